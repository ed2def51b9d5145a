//! Quarry's engine: one API over the store and the indexes, shared by the CLI and (later)
//! the MCP and REST servers. It knows nothing about HTTP, MCP or terminals.
//!
//! Layout of a data directory (`$QUARRY_HOME/<index>/`):
//! - `quarry.db` — SQLite store (system of record)
//! - `fts/` — tantivy keyword index (derived, rebuilt from the store)
//! - `vectors.usearch` — HNSW index over chunk embeddings (derived, rebuilt from the store)
//! - `write.lock` — held by whichever process is writing; readers never take it.

pub mod calibration;
mod chunking;
mod collections;
mod curation;
#[cfg(test)]
mod curation_tests;
mod documents;
mod engine;
mod entries;
#[cfg(test)]
mod entries_tests;
pub mod fusion;
mod hybrid;
mod indexing;
#[cfg(test)]
mod indexing_tests;
mod knowledge;
mod knowledge_search;
mod metadata;
#[cfg(test)]
mod metadata_tests;
mod node;
mod notes;
mod passages;
mod progress;
mod readers;
#[cfg(test)]
mod scope_tests;
mod search;
mod search_command;
mod semantic;
mod source_options;
#[cfg(test)]
mod source_readers_tests;
#[cfg(test)]
mod source_resume_tests;
#[cfg(test)]
mod source_watch_tests;
mod sources;
#[cfg(test)]
mod test_support;
mod vectors;

pub use collections::RESERVED_COLLECTION_NAMES;
pub use curation::{
    ChunkChange, ChunkView, Chunking, ChunkingFrom, DocumentChunks, EmbeddingNow,
    MAX_CHUNK_EDIT_CHARS, Recut,
};
pub use documents::{DocumentView, GetRequest, MultiGetItem, MultiGetRequest, MultiGetResult};
pub use engine::{Engine, EngineOptions, EngineShared};
pub use entries::{
    CreatedEntry, DeletedKnowledge, EntryHistory, EntryOptions, MAX_KEY_CHARS, MAX_SOURCES,
    NEAR_DUPLICATE_JACCARD, NEAR_DUPLICATE_LONG_WORDS, NEAR_DUPLICATE_OVERLAP, NearDuplicate,
    OnDuplicate, near_duplicate, parse_instant,
};
pub use fusion::EXPANSION_DISCOUNT;
pub use hybrid::{
    CandidateEvidence, LIST_DEPTH, MAX_SEARCHES, QueryOptions, RERANK_CANDIDATES, SubQuery,
    SubQueryType,
};
pub use indexing::{CollectionReport, IndexCheck, UpdateOptions, UpdateReport};
pub use knowledge::{
    CreateKnowledgeBase, IngestOptions, JobOutcome, MAX_ATTEMPTS, MAX_CHUNK_CHARS, Upload,
    UploadOutcome, clean_file_name, is_supported_file, parse_ocr,
};
pub use knowledge_search::{
    KnowledgeHit, KnowledgeSearch, KnowledgeSearchResult, MAX_QUERY_CHARS, MAX_TOP_K,
    PassageEvidence, RerankOutcome, SearchMode,
};
pub use metadata::{BUILT_IN_FIELDS, MetadataReport};
pub use node::{NODE_IDLE_FORGET, NodeFeedState, READY_LAG};
pub use notes::{MAX_NOTE_BYTES, NOTE_KINDS, NewNote, NoteChange, NoteFormat, NoteView};
pub use passages::PER_DOCUMENT;
pub use progress::{NoProgress, Progress};
pub use quarry_ingest::chunk::ChunkLimits;
pub use quarry_metadata::{FieldSummary, Filter};
pub use quarry_models::{ApiKey, ModelEnv, ModelSpec};
pub use quarry_sources::{Location, ReaderMapping, ReaderRule, Secret};
pub use quarry_store::{
    ChangeWaiter, FileFilter, FileStatus, Job, JobKind, KbFile, KnowledgeBase, NoteMeta,
    QueueCounts, StatusFilter, owner_node,
};
pub use quarry_store::{SyncCounts, SyncLine, SyncReport};
pub use readers::{MAX_READERS, parse_reader_keys};
pub use search::{
    MAX_EXCERPT_CHARS, NO_VECTOR_INDEX, QueryResponse, SNIPPET_CHARS, SearchRequest,
    VSEARCH_MIN_SCORE, snippet,
};
pub use search_command::{SearchAnswer, SearchCommand, SearchVerb};
pub use semantic::{
    ANN_EXPANSION, DEFAULT_EMBED_MODEL, EMBED_CHECKPOINT, EXACT_SEARCH_MAX, EmbedOptions,
    EmbedReport, EmbeddingProgress, ModelConfig, SemanticState, embed_input, model_key,
};
pub use source_options::{MIN_SOURCE_LEASE, SourceOptions, check_allow_net};
pub use sources::{
    AddSource, MIN_SYNC_INTERVAL, SOURCE_LEASE, SourceView, SyncOutcome, WatchedFolder,
};
