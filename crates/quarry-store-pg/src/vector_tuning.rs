//! What a store's vector searches are tuned by: the defaults of its two settings and the
//! planner's statistics of all chunks it keeps.

/// Filters leaving at most this many chunks are searched exactly: faster than the graph,
/// and perfect recall. Twice the embedded mode's since each chunk's vector sits beside its
/// collection (`chunk_vectors`, schema v28): at 5 % of 100,000 synthetic chunks (5,000) the
/// exact scan took 3.2 ms at p50 against the graph's 5.1 (recall@10 1.0 against 0.95), 13.1 /
/// 27.2 ms at p50 / p99 against 23.1 / 64.8 with 8 clients on 2 cores
/// (bench/results/pgvector-100000.json); 8,192 chunks cost about 5 ms.
pub const EXACT_SEARCH_MAX: i64 = 8192;

/// HNSW candidate list of an unfiltered search (`hnsw.ef_search`); a filtered search scales it
/// by the share of chunks its filter keeps ([`ef_search_for`](crate::vectors::ef_search_for)).
pub(crate) const EF_SEARCH: usize = 128;

/// What the planner's statistics say of all chunks ([`PgStore::chunk_stats`](crate::PgStore::chunk_stats)).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChunkStats {
    /// About how many chunks the store holds (`pg_class.reltuples`).
    pub(crate) chunks: i64,
    /// About how many chunks share each chunk text (1 when texts do not repeat, or before
    /// the first `ANALYZE`): each candidate of a filtered search through the index is
    /// checked against the filter through every chunk of its text.
    pub(crate) per_text: f64,
    /// The collections holding most chunks, each with its share of all chunks (the
    /// planner's most common values of `chunks.collection_id`).
    pub(crate) collection_shares: std::sync::Arc<[(i64, f64)]>,
}

impl ChunkStats {
    /// The share of all chunks in `filter`'s collections, as far as the statistics tell
    /// (`None` when none of them is among the most common values).
    pub(crate) fn share_of(&self, filter: &[i64]) -> Option<f64> {
        let mut found = None;
        for (id, share) in self.collection_shares.iter() {
            if filter.contains(id) {
                *found.get_or_insert(0.0) += share;
            }
        }
        found
    }
}
