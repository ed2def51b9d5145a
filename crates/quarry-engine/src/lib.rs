//! Quarry's engine: one API over the store and the indexes, shared by the CLI, the server's
//! surfaces (REST, MCP, the web UI) and its background workers. It knows nothing about HTTP,
//! MCP or terminals.
//!
//! Layout of a data directory (`$QUARRY_HOME/<index>/`):
//! - `quarry.db` — SQLite store (system of record)
//! - `fts/` — tantivy keyword index (derived, rebuilt from the store)
//! - `vectors.usearch` — HNSW index over chunk embeddings (derived, rebuilt from the store)
//! - `write.lock` — held by whichever process is writing; readers never take it.

mod browse;
mod collections;
#[cfg(test)]
mod curation_tests;
mod documents;
mod engine;
#[cfg(test)]
mod entries_tests;
mod index;
#[cfg(test)]
mod indexing_tests;
mod kb;
#[cfg(test)]
mod metadata_tests;
#[cfg(test)]
mod pages_tests;
mod progress;
mod retrieval;
#[cfg(test)]
mod scope_tests;
#[cfg(test)]
mod source_readers_tests;
#[cfg(test)]
mod source_resume_tests;
#[cfg(test)]
mod source_watch_tests;
#[cfg(test)]
mod test_support;

pub use browse::{
    BrowseEntry, FIND_LIMIT, FindResult, GREP_LIMIT, GrepMatch, GrepRequest, GrepResult,
    MAX_GREP_CONTEXT,
};
pub use collections::RESERVED_COLLECTION_NAMES;
pub use documents::{DocumentView, GetRequest, MultiGetItem, MultiGetRequest, MultiGetResult};
pub use engine::EMBED_CHECKPOINT;
pub use engine::{Engine, EngineOptions, EngineShared};
pub use index::chunking::embed_input;
pub use index::indexing::{CollectionReport, IndexCheck, UpdateOptions, UpdateReport};
pub use index::models::{ModelConfig, model_key};
pub use index::node::{NODE_IDLE_FORGET, NodeFeedState, READY_LAG};
pub use index::semantic::{
    ANN_EXPANSION, DEFAULT_EMBED_MODEL, EXACT_SEARCH_MAX, EmbedOptions, EmbedReport,
    EmbeddingProgress, SemanticState,
};
pub use kb::curation::{
    ChunkChange, ChunkView, Chunking, ChunkingFrom, DocumentChunks, EmbeddingNow,
    MAX_CHUNK_EDIT_CHARS, Recut,
};
pub use kb::entries::{
    CreatedEntry, DeletedKnowledge, EntryHistory, EntryOptions, MAX_KEY_CHARS, MAX_SOURCES,
    NEAR_DUPLICATE_JACCARD, NEAR_DUPLICATE_LONG_WORDS, NEAR_DUPLICATE_OVERLAP, NearDuplicate,
    OnDuplicate, near_duplicate, parse_instant,
};
pub use kb::ingest_options::{IngestOptions, MAX_ATTEMPTS};
pub use kb::knowledge::{
    CreateKnowledgeBase, JobOutcome, MAX_CHUNK_CHARS, RejectedKind, Upload, UploadOptions,
    UploadOutcome, clean_file_name, is_supported_file, parse_ocr,
};
pub use kb::metadata::{BUILT_IN_FIELDS, MetadataReport};
pub use kb::notes::{MAX_NOTE_BYTES, NOTE_KINDS, NewNote, NoteChange, NoteFormat, NoteView};
pub use kb::page_history::PageVersion;
pub use kb::page_text::{index_line, lint_text, page_text};
pub use kb::pages::{
    Citation, CitedLines, INSTRUCTIONS_SLUG, LOG_SLUG, LintFinding, MAX_CITED_LINES,
    MAX_INDEX_LIMIT, MAX_PAGE_SOURCES, PAGE_KEY_PREFIX, PAGE_TYPES, PageHead, PageStatus,
    PageSummary, PageView, PageWrite, SourceState, WikiIndex, WikiIndexRequest, page_facts,
    page_links,
};
pub use kb::readers::{MAX_READERS, parse_reader_keys};
pub use kb::source_options::{MIN_SOURCE_LEASE, SOURCE_LEASE, SourceOptions, check_allow_net};
pub use kb::sources::{AddSource, MIN_SYNC_INTERVAL, SourceView, SyncOutcome, WatchedFolder};
pub use kb::wiki_export::{ImportRefusal, WikiExport, WikiFile, WikiImport};
pub use kb::wiki_log::MAX_LOG_ENTRY_CHARS;
pub use progress::{NoProgress, Progress};
pub use quarry_ingest::chunk::ChunkLimits;
pub use quarry_metadata::{FieldSummary, Filter};
pub use quarry_models::{ApiKey, ModelCount, ModelEnv, ModelMeter, ModelPurpose, ModelSpec};
pub use quarry_sources::{Location, ReaderMapping, ReaderRule, Secret};
pub use quarry_store::{
    ChangeWaiter, FileFilter, FileStatus, Job, JobKind, KbFile, KnowledgeBase, NoteMeta,
    QueueCounts, StatusFilter, owner_node,
};
pub use quarry_store::{SyncCounts, SyncLine, SyncReport};
pub use retrieval::fusion::EXPANSION_DISCOUNT;
pub use retrieval::hybrid::{
    CandidateEvidence, LIST_DEPTH, MAX_SEARCHES, QueryOptions, RERANK_CANDIDATES, SubQuery,
    SubQueryType,
};
pub use retrieval::knowledge_search::{
    KnowledgeHit, KnowledgeSearch, KnowledgeSearchResult, MAX_QUERY_CHARS, MAX_TOP_K,
    PassageEvidence, RerankOutcome, SearchMode,
};
pub use retrieval::passages::PER_DOCUMENT;
pub use retrieval::search::{
    MAX_EXCERPT_CHARS, NO_VECTOR_INDEX, QueryResponse, SNIPPET_CHARS, SearchRequest,
    VSEARCH_MIN_SCORE, snippet,
};
pub use retrieval::search_command::{SearchAnswer, SearchCommand, SearchVerb};
pub use retrieval::{calibration, fusion};
