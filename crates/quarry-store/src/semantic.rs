//! The semantic layer's storage: chunks, embeddings, the ANN protocol ([`SemanticStore`]) and
//! vector search answered by the store itself ([`VectorSearch`]).

use std::collections::HashMap;

use quarry_core::{Furniture, PageSpan, Result};

use crate::documents::IndexWork;

/// What a node's derived indexes hold when they are right, read in one snapshot: every
/// document's id, and every chunk as `(chunk id, document id)` — across every space.
#[derive(Debug, Default)]
pub struct IndexCensus {
    /// Every document's id.
    pub documents: Vec<i64>,
    /// Every chunk: its id and its document's.
    pub chunks: Vec<(i64, i64)>,
}

/// A document whose chunks are missing or were cut from older content.
#[derive(Debug, Clone)]
pub struct ChunkSource {
    /// The document's row id.
    pub id: i64,
    /// SHA-256 of the content the chunks are cut from.
    pub hash: String,
    /// The document's title.
    pub title: String,
    /// The document's body.
    pub body: String,
    /// Page map of a paged source (empty otherwise): chunks are cut at page boundaries.
    pub pages: Vec<PageSpan>,
    /// Furniture found at conversion: no chunk holds it.
    pub furniture: Vec<Furniture>,
    /// The chunk size and overlap in characters: the document's own (a re-cut with other
    /// settings), else its collection's (a knowledge base that set them at creation);
    /// `None`: seed 003's 1,000 characters with 200 overlap.
    pub chunk_chars: Option<(usize, usize)>,
    /// Whether `chunk_chars` are the document's own.
    pub own_chunking: bool,
    /// What people changed in its chunks, applied when it is cut.
    pub edits: Vec<ChunkEdit>,
}

/// What a person changed in one chunk of a document, keyed by the chunk as cut (a hash of
/// its heading path and text, computed by the engine): it applies whenever a cut produces
/// that chunk again — a re-sync that left its text alone, a re-cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkEdit {
    /// The chunk as cut: a hash of its heading path and text.
    pub key: String,
    /// The text that replaces the chunk's (`None`: its text as cut).
    pub text: Option<String>,
    /// Left out of retrieval: the chunk is not stored, indexed or embedded.
    pub disabled: bool,
    /// Who changed it (a user, a token's name).
    pub edited_by: String,
    /// When (Unix milliseconds).
    pub edited_at: i64,
}

/// One chunk to store: a span of its document and the hash of the exact text embedded for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChunk {
    /// Byte offset of the chunk's start in the body.
    pub byte_start: usize,
    /// Byte offset just past the chunk's end.
    pub byte_end: usize,
    /// First line (1-based).
    pub line_start: usize,
    /// Last line (1-based, inclusive).
    pub line_end: usize,
    /// Hash of the exact text embedded for the chunk.
    pub hash: String,
    /// The page the chunk lies on (paged sources).
    pub page: Option<u32>,
    /// The heading path the chunk sits under (`A › B`), empty if none.
    pub heading: String,
    /// An edited chunk's text (`None`: its span of the body).
    pub text: Option<String>,
}

/// The chunks cut from one version (`doc_hash`) of a document.
#[derive(Debug, Clone)]
pub struct DocChunks {
    /// The document's row id.
    pub document_id: i64,
    /// SHA-256 of the content the chunks were cut from.
    pub doc_hash: String,
    /// The chunks, in document order.
    pub chunks: Vec<NewChunk>,
}

/// A chunk text that has no embedding for some model yet: the document title, the chunk's
/// heading path and its span of the body, from which the caller rebuilds the exact text it
/// hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedJob {
    /// Hash of the exact embedded text (the embeddings' key).
    pub hash: String,
    /// The document's title.
    pub title: String,
    /// The chunk's heading path.
    pub heading: String,
    /// The chunk's span of the body.
    pub text: String,
}

/// The bytes `start..end` of `body` (clamped to it; a span off a character boundary is
/// decoded lossily rather than refused): a chunk's text, as both stores cut it from the body
/// they read once per document.
pub fn byte_span(body: &str, start: i64, end: i64) -> String {
    let len = body.len();
    let start = usize::try_from(start).unwrap_or(0).min(len);
    let end = usize::try_from(end).unwrap_or(0).clamp(start, len);
    match body.get(start..end) {
        Some(s) => s.to_owned(),
        None => String::from_utf8_lossy(&body.as_bytes()[start..end]).into_owned(),
    }
}

/// Where a chunk lies, for mapping a vector hit back to a document and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRef {
    /// The chunk's row id (the vector index's key).
    pub id: i64,
    /// The document it belongs to.
    pub document_id: i64,
    /// Byte offset of the chunk's start in the body.
    pub byte_start: usize,
    /// Byte offset just past the chunk's end.
    pub byte_end: usize,
    /// First line (1-based).
    pub line_start: usize,
    /// Last line (1-based, inclusive).
    pub line_end: usize,
    /// The page the chunk lies on (paged sources).
    pub page: Option<u32>,
    /// The heading path the chunk sits under, empty if none.
    pub heading: String,
    /// An edited chunk's text (`None`: its span of the body).
    pub text: Option<String>,
}

impl ChunkRef {
    /// The chunk's text: its edit, else its span of `body` (its document's body).
    pub fn text_in<'a>(&'a self, body: &'a str) -> Option<&'a str> {
        match &self.text {
            Some(text) => Some(text),
            None => body.get(self.byte_start..self.byte_end),
        }
    }
}

/// How far embedding has got in a space, for one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbeddingState {
    /// Documents whose chunks are missing, outdated, or not all embedded and indexed.
    pub documents_pending: u64,
    /// Chunks in the space.
    pub chunks: u64,
    /// Chunks already cut that have no vector for the model yet (documents not chunked yet
    /// are counted in `documents_pending` only).
    pub chunks_pending: u64,
}

/// How long the batches of [`SemanticStore::record_embedded`] are kept: ample for the rate's
/// window (the engine reads two minutes at most).
pub const EMBEDDED_BATCHES_KEPT_MS: i64 = 10 * 60 * 1000;

/// A batch of vectors an embedding run wrote ([`SemanticStore::record_embedded`]): the rate of
/// embedding is measured from these, across every node that shares the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedBatch {
    /// When its vectors were written, on the store's clock (milliseconds since the epoch).
    pub ended_ms: i64,
    /// How long it took: since the node's previous batch of the same run, or the run's start.
    pub elapsed_ms: i64,
    /// Chunks its vectors finished (every chunk whose text it embedded).
    pub chunks: u64,
}

/// What [`SemanticStore::recent_embedding`] answers: the store's clock, and the batches that
/// ended within the window asked for, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentEmbedding {
    /// The store's clock now (milliseconds since the epoch).
    pub now_ms: i64,
    /// The batches, by `ended_ms`.
    pub batches: Vec<EmbeddedBatch>,
}

/// Chunks, embeddings and the ANN protocol (the semantic layer): chunks are cut from a
/// document's body, embeddings are keyed by (model, chunk-text hash), and a node's ANN index
/// follows the chunks through dirty flags and tombstones.
pub trait SemanticStore: Send + Sync {
    /// Those of `document_ids` whose chunks are missing or were cut from other content
    /// (chunks are cut when a document is keyword-indexed).
    fn chunk_sources(&self, document_ids: &[i64]) -> Result<Vec<ChunkSource>>;
    /// One document's chunk source whatever its chunks' state (`None`: no such document):
    /// what its chunks are cut from, and the edits applied when they are.
    fn chunk_source(&self, document_id: i64) -> Result<Option<ChunkSource>>;
    /// Records (`Some`) or forgets (`None`) a person's change to the document's chunk
    /// `key`, and has the document cut again on every node (its chunks are forgotten and it
    /// enters the change feed). `false` when the document does not exist.
    fn set_chunk_edit(&self, document_id: i64, key: &str, edit: Option<&ChunkEdit>)
    -> Result<bool>;
    /// Gives the document its own chunk size and overlap (`None`: its collection's again)
    /// and has it cut again on every node. `false` when the document does not exist.
    fn set_document_chunking(
        &self,
        document_id: i64,
        chars: Option<(usize, usize)>,
    ) -> Result<bool>;
    /// Forgets the chunking of every document of every space (the chunker changed): the
    /// next index flush cuts them again.
    fn reset_all_chunks(&self) -> Result<()>;
    /// Replaces each document's chunks (old ones get ANN tombstones), unless the document
    /// changed since it was read (its hash is no longer `doc_hash`) or was already cut from
    /// that content (by another node: the chunks stored keep their ids, which other nodes'
    /// passage indexes hold).
    fn replace_chunks(&self, docs: &[DocChunks]) -> Result<()>;
    /// Distinct chunk texts of the space (or one collection) with no embedding for `model`;
    /// at most `limit` of them when given.
    fn embed_jobs(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
        limit: Option<usize>,
    ) -> Result<Vec<EmbedJob>>;
    /// Stores vectors for chunk hashes under `model` (replacing any).
    fn put_embeddings(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<()>;
    /// The vectors stored under `model` for those of `hashes` that have one (any order): the
    /// cache of texts embedded once for every node (the hub's tool descriptions, under a
    /// model key of their own).
    fn embeddings_for(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>>;
    /// Deletes `model`'s embeddings of the space's (or one collection's) chunks (`--force`).
    fn delete_embeddings(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
    ) -> Result<u64>;
    /// Chunk ids removed from the store that the ANN index may still hold.
    fn ann_tombstones(&self) -> Result<Vec<i64>>;
    /// Up to `limit` chunks with id > `after` that the ANN index lacks and that have a
    /// `model` vector, in id order.
    fn ann_dirty_chunks(
        &self,
        model: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, Vec<f32>)>>;
    /// The ANN index has durably absorbed these removals and additions.
    fn ann_done(&self, removed: &[i64], added: &[i64]) -> Result<()>;
    /// The ANN index is gone or belongs to another model: every chunk must be added again.
    fn ann_reset(&self) -> Result<()>;
    /// Chunk locations by id (missing ids are skipped).
    fn chunk_refs(&self, ids: &[i64]) -> Result<Vec<ChunkRef>>;
    /// Chunk locations of some documents, in document then position order.
    fn chunks_of_documents(&self, document_ids: &[i64]) -> Result<Vec<ChunkRef>>;
    /// Ids of the chunks in one collection (collection-filtered vector search).
    fn chunk_ids_in_collection(&self, collection_id: i64) -> Result<Vec<i64>>;
    /// What every node's indexes should hold ([`IndexCensus`]): a node's self-check compares
    /// its keyword and passage indexes with it. One pass over two id columns.
    fn index_census(&self) -> Result<IndexCensus>;
    /// The index work that brings these documents' entries up to the store: each one there
    /// as an upsert, each one gone as a delete (a node's self-check repairs with it).
    fn index_work(&self, document_ids: &[i64]) -> Result<IndexWork>;
    /// Embedding progress of the space for `model` (`None`: nothing embedded yet).
    /// Limited to `collections` when given.
    fn embedding_state(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        model: Option<&str>,
    ) -> Result<EmbeddingState>;
    /// Embedding progress of these documents for `model` (`None`: nothing embedded yet);
    /// ids of documents that do not exist count for nothing.
    fn documents_embedding_state(
        &self,
        document_ids: &[i64],
        model: Option<&str>,
    ) -> Result<EmbeddingState>;
    /// Records that the vectors of the chunk texts `hashes` were just written under `model`
    /// by a batch that took `elapsed_ms`: every chunk with one of those texts counts as
    /// finished now, on the store's clock. Batches older than [`EMBEDDED_BATCHES_KEPT_MS`]
    /// are forgotten.
    fn record_embedded(&self, model: &str, hashes: &[String], elapsed_ms: i64) -> Result<()>;
    /// The store's clock, and the batches recorded for `model` that ended within the last
    /// `within_ms` (by every node), oldest first.
    fn recent_embedding(&self, model: &str, within_ms: i64) -> Result<RecentEmbedding>;
}

/// Vectors at which the base HNSW effort of both vector backends was calibrated
/// (recall@10 ≥ 0.97 on real embeddings at 113k): see [`ef_for_size`].
pub const EF_REFERENCE_VECTORS: usize = 100_000;

/// The HNSW candidate list (`ef`) of an unfiltered search over `vectors` vectors whose effort
/// at [`EF_REFERENCE_VECTORS`] is `base`: `base` up to there, then `base · √(vectors / 100k)`.
/// A graph's greedy walk misses more true neighbours as it grows at a fixed `ef` (synthetic
/// embeddings: recall@10 0.92 at 300k and 0.81 at 1M with the `ef` that gave 0.95 at 100k),
/// so the effort grows with the collection; the square root is what the recall curves of
/// bench/vectors and bench/pgvector needed between 100k and 1M. Both backends scale their
/// filtered effort from this one.
pub fn ef_for_size(base: usize, vectors: usize) -> usize {
    if vectors <= EF_REFERENCE_VECTORS {
        return base;
    }
    let scale = (vectors as f64 / EF_REFERENCE_VECTORS as f64).sqrt();
    (base as f64 * scale).ceil() as usize
}

/// Vector search answered by the system of record itself (PostgreSQL with pgvector), so no
/// node keeps a vector file of its own. The embedded mode has no such thing: its engine
/// keeps a local ANN file that follows the store instead.
///
/// Vectors are the store's embeddings (`put_embeddings`), keyed by model and chunk-text
/// hash; a chunk's vector is the one of its text's hash. Similarities are cosine.
pub trait VectorSearch: Send + Sync {
    /// Makes `model`'s vectors, `dims` long, searchable (an index per model); cheap when
    /// they already are.
    fn prepare_vectors(&self, model: &str, dims: usize) -> Result<()>;
    /// The `want` chunks nearest to `query` among those with a `model` vector (limited to
    /// `collections` when given), with their similarity, best first.
    fn nearest_chunks(
        &self,
        model: &str,
        query: &[f32],
        want: usize,
        collections: Option<&[i64]>,
    ) -> Result<Vec<(i64, f32)>>;
    /// The similarity of `query` to each of `chunk_ids` that has a `model` vector (chunks
    /// without one are absent from the answer).
    fn chunk_similarities(
        &self,
        model: &str,
        query: &[f32],
        chunk_ids: &[i64],
    ) -> Result<HashMap<i64, f32>>;
}

#[cfg(test)]
mod tests {
    use super::ef_for_size;

    #[test]
    fn ef_grows_with_the_square_root_of_the_collection_past_the_reference() {
        assert_eq!(ef_for_size(128, 0), 128);
        assert_eq!(ef_for_size(128, 100_000), 128);
        assert_eq!(ef_for_size(128, 400_000), 256);
        assert_eq!(ef_for_size(128, 1_000_000), 405);
        assert_eq!(ef_for_size(64, 10_000_000), 640);
    }
}
