//! Quarry's engine: one API over the store and the indexes, shared by the CLI and (later)
//! the MCP and REST servers. It knows nothing about HTTP, MCP or terminals.
//!
//! Layout of a data directory (`$QUARRY_HOME/<index>/`):
//! - `quarry.db` — SQLite store (system of record)
//! - `fts/` — tantivy keyword index (derived, rebuilt from the store)
//! - `vectors.usearch` — HNSW index over chunk embeddings (derived, rebuilt from the store)
//! - `write.lock` — held by whichever process is writing; readers never take it.

pub mod calibration;
mod collections;
mod documents;
pub mod fusion;
mod hybrid;
mod indexing;
mod knowledge;
mod search;
mod semantic;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use quarry_core::{Error, Result, StatusReport};
use quarry_fts::FtsIndex;
use quarry_store::{SqliteStore, Store};

pub use collections::RESERVED_COLLECTION_NAMES;
pub use documents::{DocumentView, GetRequest, MultiGetItem, MultiGetRequest, MultiGetResult};
pub use hybrid::{CandidateEvidence, EXPANSION_DISCOUNT, LIST_DEPTH, RERANK_CANDIDATES};
pub use indexing::{CollectionReport, UpdateOptions, UpdateReport};
pub use knowledge::{
    ChunkView, CreateKnowledgeBase, IngestOptions, JobOutcome, MAX_ATTEMPTS, MAX_CHUNK_CHARS,
    Upload, UploadOutcome, clean_file_name, env_u64, is_supported_file, parse_ocr,
};
pub use quarry_models::{ModelEnv, ModelSpec};
pub use quarry_store::{FileFilter, FileStatus, Job, JobKind, KbFile, KnowledgeBase, QueueCounts};
pub use search::{NO_VECTOR_INDEX, QueryResponse, SearchRequest, snippet};
pub use semantic::{
    ANN_EXPANSION, CHUNK_OVERLAP_PERCENT, CHUNK_TOKENS, DEFAULT_EMBED_MODEL, EXACT_SEARCH_MAX,
    EmbedOptions, EmbedReport, ModelConfig, embed_input, model_key,
};

/// Where the data lives and how to behave.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Root of all indexes (`$QUARRY_HOME`).
    pub home: PathBuf,
    /// Name of the index inside `home` (QMD's `--index`).
    pub index: String,
    pub space: String,
    /// Files larger than this are skipped with a warning.
    pub max_file_bytes: u64,
}

impl EngineOptions {
    /// Defaults: `$QUARRY_HOME`, else `$XDG_DATA_HOME/quarry`, else `~/.local/share/quarry`;
    /// index `index`; space `default`; max file size from `QUARRY_MAX_FILE_BYTES`.
    pub fn from_env(index: Option<&str>) -> Result<Self> {
        let home = match std::env::var_os("QUARRY_HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
                Some(x) => PathBuf::from(x).join("quarry"),
                None => std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".local/share/quarry"))
                    .ok_or_else(|| {
                        Error::invalid("cannot find a data directory: set QUARRY_HOME")
                    })?,
            },
        };
        let max_file_bytes = match std::env::var("QUARRY_MAX_FILE_BYTES") {
            Ok(v) => v.trim().parse().map_err(|_| {
                Error::invalid(format!(
                    "QUARRY_MAX_FILE_BYTES={v:?} is not a number of bytes"
                ))
            })?,
            Err(_) => quarry_ingest::DEFAULT_MAX_FILE_BYTES,
        };
        Ok(EngineOptions {
            home,
            index: index.unwrap_or("index").to_owned(),
            space: quarry_core::DEFAULT_SPACE.to_owned(),
            max_file_bytes,
        })
    }

    pub fn data_dir(&self) -> PathBuf {
        self.home.join(&self.index)
    }
}

/// Receives progress of long operations. Implementations must be cheap to call per file.
pub trait Progress: Sync {
    /// A phase starts with `total` steps (0 when unknown).
    fn begin(&self, _label: &str, _total: u64) {}
    fn advance(&self, _n: u64) {}
    fn end(&self) {}
    /// Something was skipped or went wrong without stopping the operation.
    fn warn(&self, _message: &str) {}
    /// The operation is waiting on another process.
    fn waiting(&self, _message: &str) {}
}

/// A [`Progress`] that reports nothing.
pub struct NoProgress;
impl Progress for NoProgress {}

/// The engine for one index of one space.
pub struct Engine {
    opts: EngineOptions,
    dir: PathBuf,
    store: Arc<dyn Store>,
    fts: RwLock<Option<Arc<FtsIndex>>>,
    models: semantic::Models,
    ann: semantic::AnnSlot,
    fusion: fusion::Fusion,
    blobs: OnceLock<Arc<dyn quarry_blobs::BlobStore>>,
    ingest: knowledge::IngestOptions,
}

/// Exclusive right to write, across processes; released on drop.
pub(crate) struct WriteGuard {
    _file: File,
}

fn validate_index_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid index name {name:?}: use letters, digits, '-', '_' or '.' (not leading)"
        )))
    }
}

impl Engine {
    /// Opens (creating if needed) the index described by `opts`.
    pub fn open(opts: EngineOptions) -> Result<Engine> {
        validate_index_name(&opts.index)?;
        let dir = opts.data_dir();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let store = SqliteStore::open(&dir.join("quarry.db"))?;
        Ok(Engine {
            opts,
            dir,
            store: Arc::new(store),
            fts: RwLock::new(None),
            models: semantic::Models::default(),
            ann: semantic::AnnSlot::default(),
            fusion: fusion::Fusion::default(),
            blobs: OnceLock::new(),
            ingest: knowledge::IngestOptions::default(),
        })
    }

    /// How uploads are converted and retried.
    pub fn with_ingest(mut self, ingest: knowledge::IngestOptions) -> Engine {
        self.ingest = ingest;
        self
    }

    /// How `query` combines keyword and vector results (default [`fusion::Fusion::Calibrated`]).
    pub fn with_fusion(mut self, fusion: fusion::Fusion) -> Engine {
        self.fusion = fusion;
        self
    }

    /// Sets the models this engine uses (they load on first use).
    pub fn with_models(mut self, config: ModelConfig) -> Engine {
        self.models = semantic::Models::new(config);
        self
    }

    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    pub fn space(&self) -> &str {
        &self.opts.space
    }

    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    fn fts_dir(&self) -> PathBuf {
        self.dir.join("fts")
    }

    /// The keyword index for reading; `None` until something has been indexed.
    pub(crate) fn fts(&self) -> Result<Option<Arc<FtsIndex>>> {
        if let Some(f) = self.fts.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return Ok(Some(f.clone()));
        }
        // Another process may be committing (and deleting merged segment files) while we
        // open; a retry reads the new meta.json.
        let mut last = None;
        for attempt in 0..3 {
            match FtsIndex::open(&self.fts_dir()) {
                Ok(Some(f)) => {
                    let f = Arc::new(f);
                    *self.fts.write().unwrap_or_else(|p| p.into_inner()) = Some(f.clone());
                    return Ok(Some(f));
                }
                Ok(None) => return Ok(None),
                Err(e) => {
                    last = Some(e);
                    std::thread::sleep(std::time::Duration::from_millis(20 * (attempt + 1)));
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Index("cannot open keyword index".into())))
    }

    /// The keyword index for writing (created on first use). Caller holds the write lock.
    pub(crate) fn fts_for_write(&self, _guard: &WriteGuard) -> Result<Arc<FtsIndex>> {
        let f = Arc::new(FtsIndex::open_or_create(&self.fts_dir())?);
        *self.fts.write().unwrap_or_else(|p| p.into_inner()) = Some(f.clone());
        Ok(f)
    }

    /// Takes the cross-process write lock, waiting (and saying so) if another process has it.
    pub(crate) fn lock_writes(&self, progress: &dyn Progress) -> Result<WriteGuard> {
        let path = self.dir.join("write.lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                progress.waiting(
                    "another quarry process is writing to this index; waiting for it to finish",
                );
                file.lock().map_err(|e| Error::io(&path, e))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        Ok(WriteGuard { _file: file })
    }

    /// Index health (seed `status`).
    pub fn status(&self) -> Result<StatusReport> {
        let collections = self.store.collections(self.space())?;
        let total: u64 = collections.iter().map(|c| c.documents).sum();
        let model = self.vector_model()?;
        let embedding = self.store.embedding_state(self.space(), model.as_deref())?;
        Ok(StatusReport {
            total_documents: total,
            needs_embedding: embedding.documents_pending,
            has_vector_index: model.is_some(),
            collections: collections
                .into_iter()
                .map(|c| quarry_core::CollectionStatus {
                    last_updated: c.last_updated_ms.map(quarry_core::iso8601_millis),
                    name: c.name,
                    path: c.path,
                    pattern: c.pattern,
                    documents: c.documents,
                })
                .collect(),
        })
    }
}
