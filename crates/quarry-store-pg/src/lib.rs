//! The shared [`Store`]: PostgreSQL with the pgvector extension, the system of record when
//! several Quarry nodes serve one team (SPEC §3).
//!
//! - **Blocking by design.** The store traits are synchronous and are only called from
//!   blocking threads (`quarry_store::thread_guard`); this crate uses `postgres`, the
//!   synchronous facade of `tokio-postgres`, through a small connection [`pool`].
//! - **Schema** as SQL files at the embedded store's logical versions (`migrations/`),
//!   applied under an advisory lock with a checksum per version ([`migrate`]); a database
//!   newer than this binary is refused.
//! - **Native SQL**, not the embedded store's: `FOR UPDATE SKIP LOCKED` job claims with the
//!   database's clock, `halfvec` vectors with a partial HNSW index per model.

use std::collections::HashMap;

use postgres::error::SqlState;
use quarry_core::{Collection, CollectionKind, Context, Document, Error, Result};
use quarry_store::{
    AccessStore, AddedFile, ChatMessageRow, ChatStore, ChunkRef, ChunkSource, ConversationRow,
    ConversationSummary, ConvertedFile, CustomToolRow, DocChange, DocChunks, DocSummary, EmbedJob,
    EmbeddingState, FeedBatch, FeedPosition, FileFilter, FileState, FileStatus, HubStore,
    IndexWork, Job, JobQueue, KbFile, KnowledgeBase, KnowledgeStore, Lease, Membership, NewKbFile,
    NewToken, PackageRow, QueueCounts, Role, Space, TokenGrant, TokenRecord, ToolEndpointRow,
    ToolRow, UpstreamRow, User,
};

mod migrate;
mod pool;

pub use pool::{PgConnection, PgTransaction};
pub use vectors::EXACT_SEARCH_MAX;

/// PostgreSQL-backed [`Store`].
pub struct PgStore {
    pool: pool::Pool,
    /// `hnsw.ef_search` of vector searches through the index (see [`PgStore::with_ef_search`]).
    ef_search: usize,
    /// Filters keeping at most this many chunks are searched exactly
    /// ([`PgStore::with_exact_search_max`]).
    exact_search_max: i64,
    /// The planner's statistics of all chunks and when they were read
    /// ([`PgStore::chunk_stats`]).
    chunk_stats: std::sync::Mutex<Option<(std::time::Instant, vectors::ChunkStats)>>,
    /// The access generation this node watches (token checks without a round trip).
    access_watch: access_watch::AccessWatch,
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
            ef_search: vectors::EF_SEARCH,
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
}

/// A database error as a storage error carrying what PostgreSQL said.
pub(crate) fn db_err(e: postgres::Error) -> Error {
    match e.code() {
        // A NUL (or bytes that are not UTF-8) in a text parameter: SQLite stores it,
        // PostgreSQL's text cannot. The caller's input, not a failure of the store.
        Some(c)
            if *c == SqlState::CHARACTER_NOT_IN_REPERTOIRE
                || *c == SqlState::UNTRANSLATABLE_CHARACTER =>
        {
            Error::invalid("text must not contain NUL characters (\\u0000)")
        }
        // The database went away (a restart, a dropped connection): an outage, whose text
        // (host, port, user) is for the log only.
        Some(c)
            if c.code().starts_with("08")
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW =>
        {
            Error::StorageUnavailable(quarry_core::error_chain(&e))
        }
        None if e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) =>
        {
            Error::StorageUnavailable(quarry_core::error_chain(&e))
        }
        _ => Error::storage(&e),
    }
}

/// Whether `e` is a unique-constraint violation.
pub(crate) fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// A unique-constraint violation as `Conflict` with `message`, anything else as a storage
/// error.
pub(crate) fn conflict_or_db(e: postgres::Error, message: impl FnOnce() -> String) -> Error {
    if is_unique_violation(&e) {
        Error::Conflict(message())
    } else {
        db_err(e)
    }
}

/// Column `i` of a row, its type checked (a mismatch is a storage error, not a panic).
pub(crate) fn col<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
) -> Result<T> {
    row.try_get(i).map_err(db_err)
}

/// A count or size as `bigint`; past its range is the caller's error.
pub(crate) fn to_i64<T: TryInto<i64> + std::fmt::Display + Copy>(n: T, what: &str) -> Result<i64> {
    n.try_into()
        .map_err(|_| Error::invalid(format!("{what} {n} is too large to store")))
}

/// Takes a transaction-level advisory lock (released at commit or rollback).
pub(crate) fn lock(tx: &mut crate::PgTransaction<'_>, key: i64) -> Result<()> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&key])
        .map_err(db_err)?;
    Ok(())
}

/// The key space of the docid locks (`pg_advisory_xact_lock(DOCID_LOCKS, key)`, apart from
/// the single-number locks): document writers lock the six-digit prefix of the docids they
/// may take, so writers of different content never wait for each other (see `store.rs`).
/// The feed needs no such lock: it is read in transaction order.
pub(crate) const DOCID_LOCKS: i32 = 0x5144_4944;

mod access;
mod access_watch;
mod audit;
mod blob_locks;
mod chat;
mod copy;
mod entries;
mod hub;
mod jobs;
mod knowledge;
mod oauth;
mod policies;
mod sources;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod vectors;
