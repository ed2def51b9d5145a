//! [`PgStore`]: the connection pool and what each node keeps beside it.

use quarry_core::Result;

use crate::access_watch;
use crate::error::db_err;
use crate::migrate;
use crate::pool::{self, PgConnection, PgTransaction};
use crate::vector_tuning::{ChunkStats, EF_SEARCH, EXACT_SEARCH_MAX};

/// PostgreSQL-backed [`Store`](quarry_store::Store).
pub struct PgStore {
    pub(crate) pool: pool::Pool,
    /// `hnsw.ef_search` of vector searches through the index (see [`PgStore::with_ef_search`]).
    pub(crate) ef_search: usize,
    /// Filters keeping at most this many chunks are searched exactly
    /// ([`PgStore::with_exact_search_max`]).
    pub(crate) exact_search_max: i64,
    /// The planner's statistics of all chunks and when they were read
    /// ([`PgStore::chunk_stats`]).
    pub(crate) chunk_stats: std::sync::Mutex<Option<(std::time::Instant, ChunkStats)>>,
    /// The access generation this node watches (token checks without a round trip).
    pub(crate) access_watch: access_watch::AccessWatch,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.pool.describe())
            .finish()
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`), checks that the
    /// `vector` extension is there (creating it when the role may) and brings the schema up
    /// to date. Errors name what to fix, never the password.
    pub fn connect(url: &str) -> Result<Self> {
        let pool = pool::Pool::new(url, pool::DEFAULT_SIZE)?;
        {
            let mut conn = pool.get()?;
            migrate::ensure_vector_extension(&mut conn, &pool.describe())?;
            migrate::migrate(&mut conn, &pool.describe())?;
        }
        Ok(PgStore {
            pool,
            ef_search: EF_SEARCH,
            exact_search_max: EXACT_SEARCH_MAX,
            chunk_stats: std::sync::Mutex::new(None),
            access_watch: access_watch::AccessWatch::new(),
        })
    }

    /// The HNSW candidate list of vector searches through the index (`hnsw.ef_search`,
    /// default 128, never below the number of results asked for): larger finds more of the
    /// exact neighbours and costs time (bench/pgvector measures the trade).
    pub fn with_ef_search(mut self, ef_search: usize) -> Self {
        self.ef_search = ef_search.max(1);
        self
    }

    /// Filtered vector searches whose filter keeps at most `chunks` chunks scan them exactly
    /// instead of walking the graph (default [`EXACT_SEARCH_MAX`]; filters keeping a small
    /// share of a large collection are searched exactly past it): perfect recall, at a cost
    /// that grows with the chunks kept (bench/pgvector measures both paths).
    pub fn with_exact_search_max(mut self, chunks: i64) -> Self {
        self.exact_search_max = chunks;
        self
    }

    /// A pooled connection (store calls run on blocking threads only).
    #[track_caller]
    pub(crate) fn conn(&self) -> Result<PgConnection<'_>> {
        quarry_store::thread_guard::check();
        self.pool.get()
    }

    /// Runs `f` in a transaction and commits it; any error rolls it back.
    #[track_caller]
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&mut PgTransaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn()?;
        let mut tx = conn.cached_transaction().map_err(db_err)?;
        let out = f(&mut tx)?;
        tx.commit().map_err(db_err)?;
        Ok(out)
    }

    /// Waits until no node still answers token checks from a generation older than the
    /// current one ([`access_watch::settle`]).
    pub(crate) fn settle_access(&self) -> Result<()> {
        access_watch::settle(|| self.conn())
    }

    /// Whether this node's token checks are answered from the access generation it watches
    /// (no round trip), rather than by reading it from the database: true a moment after
    /// the first check, while the watching connection works.
    pub fn watches_access(&self) -> bool {
        self.access_watch.trusted().is_some()
    }
}
