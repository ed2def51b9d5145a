//! What an index is built with: its metric, storage and graph parameters, and the effort of
//! one search.

use crate::error::{Result, VectorError};

/// Similarity metric of an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Metric {
    /// Cosine similarity. Callers pass L2-normalised vectors; the F32 index computes it as
    /// an inner product.
    #[default]
    Cosine,
}

/// How vectors are stored inside the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Quantization {
    /// 32-bit floats: 4 bytes per dimension, exact distances.
    #[default]
    F32,
    /// 8-bit integers scaled to `[-127, 127]` per vector: 1 byte per dimension, ~4× less
    /// vector memory, slightly lower recall and approximate similarities.
    I8,
}

/// How much work one search does; see
/// [`VectorIndex::search_with`](crate::VectorIndex::search_with).
///
/// The value is HNSW's `ef` (`expansion_search`): the size of the candidate list kept while
/// walking the graph's base layer. At least `k` is always used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchEffort {
    /// Graph search with this `ef`, or an exact scan of every vector where the graph
    /// search's worst case would compute as many distances: unfiltered searches whose
    /// `max(ef, k) · 2M` reaches the number of live vectors, while no add or remove is in
    /// flight. [`VectorIndex::search`](crate::VectorIndex::search) uses
    /// `Auto(options.expansion_search)`.
    Auto(usize),
    /// Graph search with this `ef`, never a scan (benchmarks and recall measurements of
    /// the graph itself).
    Graph(usize),
}

/// Construction parameters of a [`VectorIndex`](crate::VectorIndex).
///
/// `connectivity`, `expansion_add` and `quantization` shape the saved graph; `expansion_search`
/// only affects queries and can differ between `create` and `open`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VectorIndexOptions {
    /// Length of every vector (e.g. 384 for all-MiniLM-L6-v2). Must be > 0.
    pub dimensions: usize,
    /// Similarity metric.
    pub metric: Metric,
    /// HNSW `M`: graph edges per node (the base layer keeps `2·M`). Default 16.
    pub connectivity: usize,
    /// HNSW `efConstruction`: candidate list size while inserting. Default 128.
    pub expansion_add: usize,
    /// HNSW `ef`: candidate list size while searching (at least `k` is used). Default 64.
    /// The default effort of [`VectorIndex::search`](crate::VectorIndex::search); override it
    /// per query with [`VectorIndex::search_with`](crate::VectorIndex::search_with).
    pub expansion_search: usize,
    /// Storage type of vectors. Default [`Quantization::F32`].
    pub quantization: Quantization,
}

impl VectorIndexOptions {
    /// Default HNSW `M`.
    pub const DEFAULT_CONNECTIVITY: usize = 16;
    /// Default `efConstruction`.
    pub const DEFAULT_EXPANSION_ADD: usize = 128;
    /// Default `ef` at query time.
    pub const DEFAULT_EXPANSION_SEARCH: usize = 64;

    /// Options with the given dimensions and every other field at its default.
    pub fn new(dimensions: usize) -> Self {
        VectorIndexOptions {
            dimensions,
            ..Self::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(VectorError::InvalidOptions(what.to_string()));
        if self.dimensions == 0 {
            return bad("dimensions must be greater than zero");
        }
        if self.dimensions > u32::MAX as usize {
            return bad("dimensions must fit in 32 bits");
        }
        if self.connectivity < 2 {
            return bad("connectivity (HNSW M) must be at least 2");
        }
        if self.expansion_add == 0 {
            return bad("expansion_add must be greater than zero");
        }
        if self.expansion_search == 0 {
            return bad("expansion_search must be greater than zero");
        }
        Ok(())
    }
}

impl Default for VectorIndexOptions {
    /// Defaults with `dimensions: 0`, which [`VectorIndex::create`](crate::VectorIndex::create)
    /// rejects: set the dimensions (or use [`VectorIndexOptions::new`]).
    fn default() -> Self {
        VectorIndexOptions {
            dimensions: 0,
            metric: Metric::Cosine,
            connectivity: Self::DEFAULT_CONNECTIVITY,
            expansion_add: Self::DEFAULT_EXPANSION_ADD,
            expansion_search: Self::DEFAULT_EXPANSION_SEARCH,
            quantization: Quantization::F32,
        }
    }
}
