//! [`VectorSearch`] with pgvector: vectors are `halfvec` rows of `embeddings` (half
//! precision: full-precision values are not stored, so every score, the exact path's and the
//! re-ordering of graph candidates alike, is computed on those half-precision values), each
//! model with its own partial HNSW index over `vector::halfvec(dims)` (an index needs one
//! dimension count; models differ), built with [`HNSW_M`] and [`HNSW_EF_CONSTRUCTION`].
//! `embeddings` holds a vector per model and text; `chunk_vectors` (schema v28) the same
//! vectors per chunk, beside the chunk's collection, for filtered search — derived by
//! triggers from both tables, never written here.
//!
//! A filtered search runs exactly over the filter's `chunk_vectors` when the filter leaves
//! few chunks (or a small share of a large collection: [`SELECTIVE_EXACT_MAX`]; the filter's
//! chunks are counted only that far, the share of a larger filter taken from the planner's
//! statistics: `PgStore::filter_size`), or few beside the candidates a walk of the graph
//! would check ([`filter_read_whole`]); else, and unfiltered, through the index with
//! `hnsw.iterative_scan = relaxed_order` (without it a selective filter discards most of the
//! `ef_search` candidates and returns about half the rows asked for: 4.98 of 10 at 5 %).
//! Through the index, `ef_search` grows with the collection and as the filter narrows (the
//! graph walks the whole collection, and most of what it finds fails a selective filter:
//! [`ef_search_for`]), the iterative scan may visit enough tuples to reach them
//! (`hnsw.max_scan_tuples`), and more candidates than asked for are fetched and ordered
//! exactly by distance (relaxed order returns them only roughly sorted). Each candidate is
//! checked against the filter by its text and the filter's collections in one index
//! (`chunks_hash_collection`: every chunk carries its document's collection, schema v27).
//! bench/pgvector and bench/backends measure the figures behind every constant here.

use std::collections::HashMap;

use pgvector::HalfVector;

use quarry_core::{Error, Result};

use quarry_store::VectorSearch;

use crate::error::db_err;
use crate::pg_store::PgStore;
use crate::vector_tuning::ChunkStats;

/// Filters keeping at most [`SELECTIVE_SHARE`] of all chunks are searched exactly up to this
/// many chunks: the graph walk loses true neighbours there however large `ef_search` is
/// (recall@10 0.844 at 1 % of a million synthetic chunks, against 0.955 at 5 %), and the exact
/// scan of 10,000 chunks took 41 ms at p50, 47 ms at p99 with 8 clients on 16 cores
/// (bench/results/pgvector-1000000-16cores.json).
const SELECTIVE_EXACT_MAX: i64 = 16_384;

/// See [`SELECTIVE_EXACT_MAX`].
const SELECTIVE_SHARE: f64 = 0.02;

/// The largest `hnsw.ef_search` pgvector accepts.
const PGVECTOR_MAX_EF_SEARCH: usize = 1000;

/// Candidates fetched from the index per result asked for, then ordered exactly: the iterative
/// scan's relaxed order can put a true neighbour after a worse candidate, so a `LIMIT k` over
/// it would cut that neighbour off. Every candidate costs a lookup of its chunks' collections,
/// and a filtered scan visits `fetch / share` tuples to pass `fetch`: 4× cost a 5 % search
/// 19 ms at p50 (113k real embeddings, 2 cores), twice `LIMIT k`'s 8.7.
const OVERFETCH: usize = 2;

/// Floor of `hnsw.max_scan_tuples` (pgvector's default): the scan stops after visiting this
/// many tuples even when too few passed the filter.
const MIN_SCAN_TUPLES: usize = 20_000;

/// `hnsw.scan_mem_multiplier` for filtered searches: an iterative scan that visits many
/// tuples needs more than `work_mem` for its candidate queue, and stops early without it.
const SCAN_MEM_MULTIPLIER: usize = 4;

/// HNSW graph parameters of every model's index. pgvector's defaults (16, 64) give recall@10
/// 0.81 at a million chunks at `ef_search` 128; a wider construction list gives every node
/// better-chosen neighbours for about twice the build time. Changing these makes
/// [`VectorSearch::prepare_vectors`] rebuild existing indexes (see there).
pub(crate) const HNSW_M: usize = 16;

/// See [`HNSW_M`].
pub(crate) const HNSW_EF_CONSTRUCTION: usize = 128;

/// pgvector indexes `halfvec` up to this many dimensions.
const MAX_INDEXED_DIMS: usize = 4000;

/// Serialises index creation between nodes (`CREATE INDEX IF NOT EXISTS` races).
const INDEX_LOCK: i64 = 7_245_190_455_173_122_050;

/// The prefix of every index of `model`'s vectors: a name PostgreSQL accepts whatever the
/// model is called.
fn index_prefix(model: &str) -> String {
    let hex = quarry_core::sha256_hex(model.as_bytes());
    format!("embeddings_hnsw_{}", &hex[..16])
}

/// The index of `model`'s vectors with today's graph parameters; an index of the same model
/// with another name was built with other parameters (the bare prefix: pgvector's defaults).
fn index_name(model: &str) -> String {
    format!("{}_m{HNSW_M}_ef{HNSW_EF_CONSTRUCTION}", index_prefix(model))
}

/// `text` as an SQL string literal (DDL takes no parameters).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn check_dims(dims: usize) -> Result<()> {
    if dims == 0 || dims > MAX_INDEXED_DIMS {
        return Err(Error::invalid(format!(
            "vectors of {dims} dimensions cannot be indexed by pgvector (1 to {MAX_INDEXED_DIMS})"
        )));
    }
    Ok(())
}

/// The `$fetch` texts nearest to `$2` among the model's (`$1`) embeddings that pass `texts`
/// (a condition on `e`, or none), materialised so they are ordered exactly after the HNSW
/// scan's relaxed order, then the chunks of each that pass `chunks` (on `c`) until `$limit`
/// are out. Prepared once per connection (`dims` is part of the text).
///
/// A text's chunks are looked up by hash, one index probe per text (`LATERAL … OFFSET 0`
/// keeps the planner from joining instead): where texts repeat across collections the
/// planner, costing random reads as on disk, otherwise scans every chunk (15 ms of 17 at 110k
/// chunks). The texts are taken in order of distance (`near` sorted again: a plain CTE scan
/// has no order the planner knows), so an incremental sort stops probing once `$limit`
/// chunks are out: where each text has 14 chunks (bench/backends) the unfiltered statement
/// probed all of `$fetch` texts for 4,464 chunks to return 160 (6.9 ms at p50 in psql; 2.6
/// in order).
fn nearest_texts_statement(dims: usize, texts: &str, chunks: &str, limit: u8, fetch: u8) -> String {
    format!(
        "WITH near AS MATERIALIZED (
             SELECT e.hash, e.vector::halfvec({dims}) <=> $2::halfvec({dims}) AS dist
             FROM embeddings e WHERE e.model = $1{texts}
             ORDER BY e.vector::halfvec({dims}) <=> $2::halfvec({dims})
             LIMIT ${fetch})
         SELECT c.id, (1 - near.dist)::real
         FROM (SELECT * FROM near ORDER BY dist) near
         CROSS JOIN LATERAL (
             SELECT c.id FROM chunks c WHERE c.hash = near.hash{chunks} OFFSET 0) c
         ORDER BY near.dist, c.id LIMIT ${limit}"
    )
}

/// `hnsw.ef_search` for a search through the index over about `total` chunks whose filter
/// keeps `in_filter` of them (`None`: unfiltered): `base` grown with the collection
/// ([`quarry_store::ef_for_size`]), then divided by √share of the filter; at least that and
/// `want`, at most what pgvector accepts (a larger `want` is served by the iterative scan,
/// which keeps going).
/// Not `/ share`: the iterative scan goes on past the first `ef` candidates until enough
/// pass the filter, so `ef` only sets how good that first neighbourhood is; at 5 % of 113k real
/// embeddings `base / share` (capped at 1,000) gave recall@10 0.9965 but a p99 of 171 ms with
/// 8 clients on 2 cores, where 1,000 candidates cost more than an exact scan.
pub(crate) fn ef_search_for(base: usize, want: usize, total: i64, in_filter: Option<i64>) -> usize {
    let sized = quarry_store::ef_for_size(base, usize::try_from(total).unwrap_or(0));
    let ef = match in_filter {
        Some(in_filter) if in_filter > 0 && total > in_filter => {
            let share = in_filter as f64 / total as f64;
            (sized as f64 / share.sqrt()).ceil() as usize
        }
        _ => sized,
    };
    ef.max(sized).max(want).min(PGVECTOR_MAX_EF_SEARCH)
}

/// Whether a filter keeping `in_filter` of `total` chunks is searched exactly: when it keeps
/// at most `exact_max` ([`EXACT_SEARCH_MAX`](crate::EXACT_SEARCH_MAX) by default), or a small share of a large
/// collection ([`SELECTIVE_EXACT_MAX`]).
fn searched_exactly(in_filter: i64, total: i64, exact_max: i64) -> bool {
    in_filter <= exact_max
        || (in_filter <= SELECTIVE_EXACT_MAX
            && in_filter as f64 <= SELECTIVE_SHARE * total.max(1) as f64)
}

/// `hnsw.max_scan_tuples` for a filtered search: enough tuples for `fetch` of them to pass a
/// filter keeping `in_filter` of `total`, twice over, beside the `ef` of the first pass.
fn max_scan_tuples(ef: usize, fetch: usize, in_filter: i64, total: i64) -> usize {
    let share = (in_filter.max(1) as f64 / total.max(1) as f64).min(1.0);
    let needed = (fetch as f64 / share).ceil() as usize;
    needed
        .saturating_add(ef)
        .saturating_mul(2)
        .max(MIN_SCAN_TUPLES)
}

/// How much more a graph candidate's check cost, per chunk of its text looked up (that chunk
/// and its document by key), than reading one of the filter's chunks up front: 2.0 µs against
/// 1.0 on bench/backends' data (`sel`, 5,066 of 109,625 chunks, 14 chunks per text), before
/// chunks carried their collection (schema v27). Kept since: the rule below still picks the
/// faster path on every filter measured.
const PROBE_PER_READ: f64 = 2.0;

/// Whether a filtered search reads every vector of the filter's chunks (exact, over
/// `chunk_vectors`) rather than walk the graph and check each candidate in
/// `chunks_hash_collection`: reading costs the `in_filter` chunks once, the walk at least
/// `ef` candidates, each checked through the chunks of its text (`per_text`). Measured with
/// `chunk_vectors` (schema v28; psql, p50 of 22 stored vectors as queries, 160 chunks asked
/// for, bench/backends' data with 14 chunks per text), the rule picks the faster path on each
/// filter: `sel` (5,066 chunks) 1.97 ms read against 6.54 walked, `c0` (8,043) 2.84 against
/// 7.48 — both read —, `c0` and `c1` (16,086) 4.92 against 4.05, and four collections
/// (32,172) 14.0 against 5.4 — both walked.
fn filter_read_whole(in_filter: i64, ef: usize, per_text: f64) -> bool {
    in_filter as f64 <= ef as f64 * (1.0 + per_text) * PROBE_PER_READ
}

/// How long a node keeps the planner's statistics of all chunks before reading them again.
const CHUNK_STATS_KEPT: std::time::Duration = std::time::Duration::from_secs(30);

/// Chunks per text from `reltuples` and `pg_stats.n_distinct` of `chunks.hash` (a positive
/// count of distinct texts, or minus their share of the rows; `None` before any `ANALYZE`).
fn chunks_per_text(chunks: i64, n_distinct: Option<f32>) -> f64 {
    let per_text = match n_distinct {
        Some(d) if d < 0.0 => 1.0 / f64::from(-d),
        Some(d) if d > 0.0 => chunks.max(0) as f64 / f64::from(d),
        _ => 1.0,
    };
    if per_text.is_finite() {
        per_text.max(1.0)
    } else {
        1.0
    }
}

impl PgStore {
    /// About how many chunks the store holds and how many share each text (the planner's
    /// statistics, kept for [`CHUNK_STATS_KEPT`]): an unfiltered search's effort grows with
    /// the first, a filtered one's way of checking candidates depends on the second. Hints,
    /// not shared state — nodes may read them at different moments and still search
    /// correctly — so an unfiltered search costs no extra round trip for them.
    fn chunk_stats(&self, conn: &mut crate::PgConnection<'_>) -> Result<ChunkStats> {
        let kept = || {
            self.chunk_stats
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((read, stats)) = &*kept()
            && read.elapsed() < CHUNK_STATS_KEPT
        {
            return Ok(stats.clone());
        }
        let row = conn
            .query_one(
                "SELECT greatest(c.reltuples, 0)::bigint, h.n_distinct, \
                     k.most_common_vals::text::bigint[], k.most_common_freqs \
                 FROM pg_class c \
                 LEFT JOIN pg_stats h ON h.schemaname = current_schema() \
                     AND h.tablename = 'chunks' AND h.attname = 'hash' \
                 LEFT JOIN pg_stats k ON k.schemaname = current_schema() \
                     AND k.tablename = 'chunks' AND k.attname = 'collection_id' \
                 WHERE c.oid = 'chunks'::regclass",
                &[],
            )
            .map_err(db_err)?;
        let chunks: i64 = row.get(0);
        let ids: Option<Vec<i64>> = row.get(2);
        let freqs: Option<Vec<f32>> = row.get(3);
        let stats = ChunkStats {
            chunks,
            per_text: chunks_per_text(chunks, row.get(1)),
            collection_shares: ids
                .unwrap_or_default()
                .into_iter()
                .zip(freqs.unwrap_or_default().into_iter().map(f64::from))
                .collect(),
        };
        *kept() = Some((std::time::Instant::now(), stats.clone()));
        Ok(stats)
    }
}

/// The chunks a filter keeps, counted only up to `cap` (`counted`), and what the store says
/// of the rest: all chunks (`total`, the planner's estimate) and the share of chunks in
/// the filter's collections (`share`, from the planner's most common values; `None` when it
/// has none for them). `None` when only a count to the end will do.
fn filter_estimate(counted: i64, cap: i64, total: i64, share: Option<f64>) -> Option<i64> {
    if counted < cap {
        return Some(counted);
    }
    match share {
        Some(share) if share > 0.0 => Some(((share * total as f64).ceil() as i64).max(cap)),
        _ => None,
    }
}

/// Every chunk a filter (`$1`) keeps (a range of `chunks_collection` per collection).
const FILTER_COUNT: &str = "SELECT count(*) FROM chunks WHERE collection_id = ANY($1)";

/// Up to `$2` chunks a filter (`$1`) keeps.
const FILTER_COUNT_BOUNDED: &str = "SELECT count(*) FROM (SELECT 1 FROM chunks \
     WHERE collection_id = ANY($1) LIMIT $2) k";

/// The most chunks of a filter worth counting: past it no search runs exactly (see
/// [`searched_exactly`]), and only the filter's share steers the graph search.
fn count_cap(total: i64, exact_max: i64) -> i64 {
    let selective = (SELECTIVE_SHARE * total.max(0) as f64).ceil() as i64;
    exact_max
        .max(selective.min(SELECTIVE_EXACT_MAX))
        .saturating_add(1)
}

impl PgStore {
    /// How many chunks `filter` keeps and all chunks (the planner's estimate,
    /// [`PgStore::chunk_stats`], as an unfiltered search reads it). Counting is bounded
    /// ([`count_cap`]):
    /// a filter on a collection that holds most of the store made every search count every
    /// chunk (34 ms at 105,000 of 110,000, 3.3 ms bounded: bench/pgvector/filter-count.sh),
    /// though past the cap the count decides nothing but how wide the graph search looks,
    /// which the planner's statistics tell well enough.
    fn filter_size(
        &self,
        conn: &mut crate::PgConnection<'_>,
        filter: &[i64],
    ) -> Result<(i64, i64)> {
        let stats = self.chunk_stats(conn)?;
        let estimate = stats.chunks;
        // A store no larger than the cap has nothing to bound.
        let cap = match count_cap(estimate, self.exact_search_max) {
            cap if estimate < cap => i64::MAX,
            cap => cap,
        };
        // The share of a filter that reached the cap comes from the statistics this node
        // keeps ([`ChunkStats::collection_shares`]): read from `pg_stats` in the count's
        // statement, planning that view's joins took 0.4–0.9 ms of every filtered search.
        let counted: i64 = conn
            .query_one(FILTER_COUNT_BOUNDED, &[&filter, &cap])
            .map_err(db_err)?
            .get(0);
        let share = if counted >= cap {
            stats.share_of(filter)
        } else {
            None
        };
        let in_filter = match filter_estimate(counted, cap, estimate, share) {
            Some(n) => n,
            None => conn
                .query_one(FILTER_COUNT, &[&filter])
                .map_err(db_err)?
                .get(0),
        };
        // A stale estimate below the filter's own count means "most of the table".
        Ok((in_filter, estimate.max(in_filter)))
    }
}

/// The `limit` chunks in `filter` nearest to `q`, exactly: every vector of the filter's
/// chunks (`chunk_vectors`, one range of its collection index) and its distance. Cheaper
/// than any walk of the graph when the filter is small, or small beside the candidates a walk
/// would check ([`searched_exactly`], [`filter_read_whole`]); `vector <=> $2` is not the
/// index's expression, so nothing but this scan can answer it.
fn exact_in_filter(
    conn: &mut crate::PgConnection<'_>,
    model: &str,
    q: &HalfVector,
    filter: &[i64],
    limit: i64,
) -> Result<Vec<(i64, f32)>> {
    let rows = conn
        .query(
            "SELECT v.chunk_id, (1 - (v.vector <=> $2))::real FROM chunk_vectors v \
             WHERE v.collection_id = ANY($3) AND v.model = $1 \
             ORDER BY v.vector <=> $2, v.chunk_id LIMIT $4",
            &[&model, q, &filter, &limit],
        )
        .map_err(db_err)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

impl VectorSearch for PgStore {
    /// Makes sure `model`'s index exists with today's parameters. The first index of a
    /// model is built in place (`CREATE INDEX`, writes to `embeddings` wait). An index built
    /// with older parameters keeps serving searches while its replacement is built beside it
    /// (`CREATE INDEX CONCURRENTLY`, writes go on) by the one node that takes the lock —
    /// other nodes carry on with the old index — and is dropped once the new one is valid.
    /// An interrupted concurrent build leaves an invalid index, dropped and rebuilt next time.
    fn prepare_vectors(&self, model: &str, dims: usize) -> Result<()> {
        check_dims(dims)?;
        let name = index_name(model);
        let prefix = index_prefix(model);
        let mut conn = self.conn()?;
        let state = index_state(&mut conn, &name, &prefix)?;
        if state.current == Some(true) && state.outdated.is_empty() {
            return Ok(());
        }
        let rebuild = state.outdated.iter().any(|(_, valid)| *valid);
        if rebuild {
            // Another node rebuilding: searches use the old index meanwhile.
            let locked: bool = conn
                .query_one("SELECT pg_try_advisory_lock($1)", &[&INDEX_LOCK])
                .map_err(db_err)?
                .get(0);
            if !locked {
                return Ok(());
            }
        } else {
            conn.execute("SELECT pg_advisory_lock($1)", &[&INDEX_LOCK])
                .map_err(db_err)?;
        }
        let result = build_index(&mut conn, model, dims, &name, &prefix);
        let unlocked = conn
            .execute("SELECT pg_advisory_unlock($1)", &[&INDEX_LOCK])
            .map_err(db_err);
        result.and(unlocked.map(|_| ()))
    }

    fn nearest_chunks(
        &self,
        model: &str,
        query: &[f32],
        want: usize,
        collections: Option<&[i64]>,
    ) -> Result<Vec<(i64, f32)>> {
        let dims = query.len();
        check_dims(dims)?;
        if want == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(want).unwrap_or(i64::MAX);
        let q = HalfVector::from_f32_slice(query);
        let all: Vec<i64> = Vec::new();
        let filter = collections.unwrap_or(&all);
        let filtered = collections.is_some();
        let mut conn = self.conn()?;
        let (total, in_filter, ef) = if filtered {
            let (in_filter, total) = self.filter_size(&mut conn, filter)?;
            let ef = ef_search_for(self.ef_search, want, total, Some(in_filter));
            if searched_exactly(in_filter, total, self.exact_search_max)
                || filter_read_whole(in_filter, ef, self.chunk_stats(&mut conn)?.per_text)
            {
                return exact_in_filter(&mut conn, model, &q, filter, limit);
            }
            (total, Some(in_filter), ef)
        } else {
            let total = self.chunk_stats(&mut conn)?.chunks;
            (
                total,
                None,
                ef_search_for(self.ef_search, want, total, None),
            )
        };
        let fetch = want.saturating_mul(OVERFETCH).min(ef.max(want));
        let scan_tuples = match in_filter {
            Some(in_filter) => max_scan_tuples(ef, fetch, in_filter, total),
            None => MIN_SCAN_TUPLES,
        };
        let memory = if in_filter.is_some() {
            SCAN_MEM_MULTIPLIER
        } else {
            1
        };
        // Session settings, not `SET LOCAL` in a transaction of its own (BEGIN and COMMIT
        // are two more round trips per search): every search through the index asks for
        // all four, so what the last search on this pooled connection left never applies,
        // and nothing but an HNSW scan reads them. Unchanged since that search (the usual
        // case for unfiltered searches), they cost no round trip.
        conn.set_session(&format!(
            "SET hnsw.ef_search = {ef}; SET hnsw.iterative_scan = relaxed_order; \
             SET hnsw.max_scan_tuples = {scan_tuples}; SET hnsw.scan_mem_multiplier = {memory}"
        ))
        .map_err(db_err)?;
        let fetch = i64::try_from(fetch).unwrap_or(i64::MAX);
        if !filtered {
            // Unfiltered, first without asking of each candidate whether a chunk still
            // uses it: that question, inside the scan, is a semi-join over every chunk
            // and document when the planner scans exactly (most of the search's time on
            // small collections). Its answer only matters for an embedding kept after its
            // last chunk went (`embeddings` is a cache by text): such an embedding takes a
            // place among the `fetch` here, so an answer short of `want` is asked again
            // below, skipping them inside the scan. Otherwise both answers are the same:
            // every live text nearer than the last one returned is among the `fetch`.
            let rows = conn
                .query(
                    &nearest_texts_statement(dims, "", "", 3, 4),
                    &[&model, &q, &limit, &fetch],
                )
                .map_err(db_err)?;
            if rows.len() >= want {
                return Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect());
            }
        }
        // Through the model's HNSW index: the `fetch` nearest chunk texts (hashes) that some
        // chunk in the filter still has, then those chunks.
        let chunk_in_filter = " AND (NOT $3 OR c.collection_id = ANY($4))";
        let rows = conn
            .query(
                &nearest_texts_statement(
                    dims,
                    &format!(
                        " AND EXISTS (SELECT 1 FROM chunks c \
                         WHERE c.hash = e.hash{chunk_in_filter})"
                    ),
                    chunk_in_filter,
                    5,
                    6,
                ),
                &[&model, &q, &filtered, &filter, &limit, &fetch],
            )
            .map_err(db_err)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    fn chunk_similarities(
        &self,
        model: &str,
        query: &[f32],
        chunk_ids: &[i64],
    ) -> Result<HashMap<i64, f32>> {
        check_dims(query.len())?;
        if chunk_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let q = HalfVector::from_f32_slice(query);
        let rows = self
            .conn()?
            .query(
                "SELECT v.chunk_id, (1 - (v.vector <=> $2))::real FROM chunk_vectors v \
                 WHERE v.chunk_id = ANY($3) AND v.model = $1",
                &[&model, &q, &chunk_ids],
            )
            .map_err(db_err)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

/// What exists of a model's indexes: today's (`Some(valid)`), and the others (name, valid).
struct IndexState {
    current: Option<bool>,
    outdated: Vec<(String, bool)>,
}

fn index_state(conn: &mut postgres::Client, name: &str, prefix: &str) -> Result<IndexState> {
    let rows = conn
        .query(
            "SELECT c.relname::text, i.indisvalid FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indexrelid \
             JOIN pg_class t ON t.oid = i.indrelid \
             WHERE t.relname = 'embeddings' AND (c.relname = $1 OR c.relname LIKE $2)",
            &[&prefix, &format!("{prefix}\\_%")],
        )
        .map_err(db_err)?;
    let mut state = IndexState {
        current: None,
        outdated: Vec::new(),
    };
    for row in rows {
        let (relname, valid): (String, bool) = (row.get(0), row.get(1));
        if relname == name {
            state.current = Some(valid);
        } else {
            state.outdated.push((relname, valid));
        }
    }
    Ok(state)
}

/// Builds `name` (holding [`INDEX_LOCK`]) and drops the model's other indexes.
fn build_index(
    conn: &mut postgres::Client,
    model: &str,
    dims: usize,
    name: &str,
    prefix: &str,
) -> Result<()> {
    let state = index_state(conn, name, prefix)?;
    if state.current == Some(false) {
        // An interrupted concurrent build: invalid, never used, and in the way.
        conn.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}"))
            .map_err(db_err)?;
    }
    if state.current != Some(true) {
        let serving = state.outdated.iter().any(|(_, valid)| *valid);
        // While an old index serves searches, build beside it without blocking writes;
        // a model's first index is built in place (faster, and nothing is waiting on it).
        let how = if serving { "CONCURRENTLY " } else { "" };
        conn.batch_execute(&format!(
            "CREATE INDEX {how}IF NOT EXISTS {name} ON embeddings \
             USING hnsw ((vector::halfvec({dims})) halfvec_cosine_ops) \
             WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) \
             WHERE model = {}",
            literal(model)
        ))
        .map_err(db_err)?;
    }
    for (old, _) in &state.outdated {
        conn.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {old}"))
            .map_err(db_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector_tuning::EXACT_SEARCH_MAX;

    #[test]
    fn ef_search_grows_as_the_filter_narrows_and_the_collection_grows() {
        assert_eq!(ef_search_for(128, 10, 100_000, None), 128);
        assert_eq!(ef_search_for(128, 500, 100_000, None), 500);
        assert_eq!(ef_search_for(128, 10, 100_000, Some(25_000)), 256);
        assert_eq!(ef_search_for(128, 10, 100_000, Some(5_000)), 573);
        assert_eq!(ef_search_for(128, 10, 100_000, Some(1_000)), 1000);
        // A collection ten times the reference searches with √10 times the effort.
        assert_eq!(ef_search_for(128, 10, 1_000_000, None), 405);
        assert_eq!(ef_search_for(128, 10, 1_000_000, Some(250_000)), 810);
        // A stale or missing estimate never lowers the effort.
        assert_eq!(ef_search_for(128, 10, 0, Some(5_000)), 128);
        assert_eq!(ef_search_for(128, 10, -1, None), 128);
        assert_eq!(ef_search_for(128, 2000, 100_000, None), 1000);
    }

    #[test]
    fn small_filters_and_small_shares_of_large_collections_are_searched_exactly() {
        assert!(searched_exactly(8_192, 100_000, EXACT_SEARCH_MAX));
        assert!(searched_exactly(5_000, 100_000, EXACT_SEARCH_MAX));
        assert!(!searched_exactly(9_000, 100_000, EXACT_SEARCH_MAX));
        // 1 % of a million: past the fixed threshold, but a share the graph serves badly.
        assert!(searched_exactly(10_000, 1_000_000, EXACT_SEARCH_MAX));
        assert!(!searched_exactly(50_000, 1_000_000, EXACT_SEARCH_MAX));
        // A small share of a huge collection costs too much to scan.
        assert!(!searched_exactly(20_000, 10_000_000, EXACT_SEARCH_MAX));
        assert!(searched_exactly(1 << 40, 1 << 41, i64::MAX));
    }

    #[test]
    fn a_filter_is_counted_only_as_far_as_the_choice_of_path_needs() {
        // 110,000 chunks: past 8,192 (2 % is 2,200) nothing is searched exactly.
        assert_eq!(count_cap(110_000, EXACT_SEARCH_MAX), 8_193);
        assert_eq!(count_cap(500_000, EXACT_SEARCH_MAX), 10_001);
        assert_eq!(count_cap(110_000, 4_096), 4_097);
        // A million: 2 % is past the selective limit.
        assert_eq!(count_cap(1_000_000, EXACT_SEARCH_MAX), 16_385);
        assert_eq!(count_cap(0, 100), 101);
        assert_eq!(count_cap(1_000, i64::MAX), i64::MAX);
        // A count that reached the cap never asks for an exact search.
        for total in [3_000, 110_000, 500_000, 1_000_000, 10_000_000] {
            let cap = count_cap(total, EXACT_SEARCH_MAX);
            for kept in [cap, cap + 1, 2 * cap, total]
                .into_iter()
                .filter(|&k| k >= cap)
            {
                assert!(
                    !searched_exactly(kept, total, EXACT_SEARCH_MAX),
                    "{kept} of {total}"
                );
            }
        }
        // Below the cap the count is the answer; at it, the statistics' share, never less.
        assert_eq!(filter_estimate(4_000, 4_097, 110_000, None), Some(4_000));
        assert_eq!(
            filter_estimate(4_097, 4_097, 110_000, Some(0.5)),
            Some(55_000)
        );
        assert_eq!(
            filter_estimate(4_097, 4_097, 110_000, Some(0.01)),
            Some(4_097)
        );
        // No statistics for the filter's collections: counted to the end.
        assert_eq!(filter_estimate(4_097, 4_097, 110_000, None), None);
        assert_eq!(filter_estimate(4_097, 4_097, 110_000, Some(0.0)), None);
    }

    #[test]
    fn a_filters_share_sums_its_common_collections() {
        let stats = ChunkStats {
            chunks: 110_000,
            per_text: 1.0,
            collection_shares: vec![(14, 0.046), (3, 0.07), (9, 0.01)].into(),
        };
        assert_eq!(stats.share_of(&[14]), Some(0.046));
        assert!((stats.share_of(&[14, 9, 77]).unwrap_or(0.0) - 0.056).abs() < 1e-12);
        // None of the filter's collections is common: no estimate, the filter is counted.
        assert_eq!(stats.share_of(&[77]), None);
        assert_eq!(stats.share_of(&[]), None);
    }

    #[test]
    fn index_names_carry_the_parameters() {
        let name = index_name("m");
        assert!(name.starts_with(&index_prefix("m")));
        assert!(name.ends_with(&format!("_m{HNSW_M}_ef{HNSW_EF_CONSTRUCTION}")));
        assert!(name.len() <= 63, "PostgreSQL truncates longer names");
    }

    #[test]
    fn chunks_per_text_comes_from_the_planners_distinct_count() {
        // Unique texts (n_distinct -1), 13 copies of each (positive count or share), no
        // statistics yet: never below one.
        assert_eq!(chunks_per_text(110_000, Some(-1.0)), 1.0);
        assert_eq!(chunks_per_text(110_000, Some(8_000.0)), 13.75);
        assert!((chunks_per_text(110_000, Some(-0.08)) - 12.5).abs() < 1e-6);
        assert_eq!(chunks_per_text(110_000, None), 1.0);
        assert_eq!(chunks_per_text(0, Some(10.0)), 1.0);
        assert_eq!(chunks_per_text(-1, Some(0.0)), 1.0);
    }

    #[test]
    fn a_filter_is_read_whole_where_texts_repeat() {
        // 5 % of 110,000 chunks at ef 629: unique texts are checked candidate by candidate,
        // texts in 14 collections read whole.
        assert!(!filter_read_whole(5_060, 629, 1.0));
        assert!(filter_read_whole(5_060, 629, 13.7));
        // bench/backends' filters as measured: one collection read, two or four walked.
        assert!(filter_read_whole(8_043, 473, 13.6));
        assert!(!filter_read_whole(16_086, 335, 13.6));
        assert!(!filter_read_whole(32_172, 240, 13.6));
        // A filter much larger than the candidates' chunks is never read whole.
        assert!(!filter_read_whole(60_000, 629, 13.7));
    }

    #[test]
    fn scan_tuples_cover_the_filter() {
        assert_eq!(max_scan_tuples(1000, 40, 50_000, 1_000_000), 20_000);
        assert_eq!(max_scan_tuples(1000, 40, 1_000, 1_000_000), 82_000);
    }
}
