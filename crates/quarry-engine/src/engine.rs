//! [`Engine`]: one index as one caller sees it, and [`EngineShared`], what every handle on
//! that index shares. The verbs live in the files named after them (ARCHITECTURE.md).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use quarry_core::{Access, Error, Result, Scope, StatusReport};
use quarry_fts::FtsIndex;
use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;

use crate::index::models::{ModelConfig, Models};
use crate::index::node_state::NodeState;
use crate::index::vectors;
use crate::index::write_lock::WriteGuard;
use crate::kb::filter_state::FilterState;
use crate::kb::ingest_options::IngestOptions;
use crate::kb::source_options::SourceOptions;
use crate::progress::Progress;
use crate::retrieval::fusion;

/// How often a long `quarry embed` adds what it embedded so far to the vector index (under
/// the write lock, briefly): documents become searchable and leave the backlog as it goes,
/// not all at the end. The default of [`Engine::with_embed_checkpoint`]
/// (`QUARRY_EMBED_CHECKPOINT_SECS`).
pub const EMBED_CHECKPOINT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where the data lives and how to behave.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Root of all indexes (`$QUARRY_HOME`).
    pub home: PathBuf,
    /// Name of the index inside `home` (QMD's `--index`).
    pub index: String,
    /// The space a handle opened with [`Engine::open`] works in.
    pub space: String,
    /// Files larger than this are skipped with a warning.
    pub max_file_bytes: u64,
}

impl EngineOptions {
    /// Index `index` (default `index`) under `home`, space `default`, files up to
    /// [`quarry_ingest::DEFAULT_MAX_FILE_BYTES`]. (The CLI finds `home`: `$QUARRY_HOME`, else
    /// `$XDG_DATA_HOME/quarry`, else `~/.local/share/quarry`.)
    pub fn new(home: impl Into<PathBuf>, index: Option<&str>) -> Self {
        EngineOptions {
            home: home.into(),
            index: index.unwrap_or("index").to_owned(),
            space: quarry_core::DEFAULT_SPACE.to_owned(),
            max_file_bytes: quarry_ingest::DEFAULT_MAX_FILE_BYTES,
        }
    }

    /// The index's directory: `home/index`.
    pub fn data_dir(&self) -> PathBuf {
        self.home.join(&self.index)
    }
}

/// What every handle on one index shares: the store, the indexes, the loaded models.
pub struct EngineShared {
    pub(crate) opts: EngineOptions,
    pub(crate) dir: PathBuf,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) fts: RwLock<Option<Arc<FtsIndex>>>,
    /// The passage index (one entry per chunk; `passages/`).
    pub(crate) passages: RwLock<Option<Arc<FtsIndex>>>,
    pub(crate) models: Models,
    pub(crate) vectors: Box<dyn vectors::VectorBackend>,
    pub(crate) fusion: fusion::Fusion,
    pub(crate) blobs: OnceLock<Arc<dyn quarry_blobs::BlobStore>>,
    pub(crate) ingest: IngestOptions,
    /// How often a long embedding run (`quarry embed`) adds what it embedded so far to the
    /// vector index ([`crate::EMBED_CHECKPOINT`] unless set).
    pub(crate) embed_checkpoint: std::time::Duration,
    /// Seals and opens the credentials of sources (`QUARRY_SECRET_KEY`); `None`: no
    /// credential can be stored.
    pub(crate) secret_key: Option<Arc<quarry_secrets::SecretKey>>,
    /// How syncs of sources run: their lease, and where their requests may go.
    pub(crate) sources: SourceOptions,
    /// This process as a node following the store's feed.
    pub(crate) node: NodeState,
    /// When this process last listed every blob for stray files (see
    /// [`Engine::collect_blobs`]); `None`: not yet.
    pub(crate) stray_sweep: Mutex<Option<std::time::Instant>>,
}

/// The engine for one index, as one caller sees it: every call is limited to the handle's
/// [`Scope`] (its space, the collections it may use, what it may do). [`Engine::open`]
/// gives the machine owner's handle on the default space; [`Engine::scoped`] makes a
/// caller's handle, sharing models and indexes, in O(1).
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<EngineShared>,
    pub(crate) scope: Scope,
    /// For a search narrowed to some knowledge bases by its request: the scope it was
    /// narrowed from, which its scores are computed against (see [`Engine::rank_among`]).
    pub(crate) ranking_scope: Option<Arc<Scope>>,
    /// For a search limited by a metadata filter: the filter, and the documents it lets
    /// through once resolved (see [`Engine::filtered`]).
    pub(crate) filter: Option<Arc<FilterState>>,
    /// The moment searches and listings read knowledge entries at (Unix ms; `None`: now;
    /// see [`Engine::at`]).
    pub(crate) as_of: Option<i64>,
    /// For the handle of one search request ([`Engine::for_one_request`]): what its steps
    /// read once and share. Every other handle has none, and a handle made from this one
    /// with another scope, filter or moment starts without it.
    pub(crate) request: Option<Arc<RequestReads>>,
}

/// What the steps of one search request (its keyword and vector halves, every query
/// variant) would otherwise each read from the store: read by the first that needs it, for
/// this request's handle only, never shared with another request.
#[derive(Default)]
pub(crate) struct RequestReads {
    /// [`Engine::hidden_for_search`].
    pub(crate) hidden: OnceLock<Option<Arc<std::collections::HashSet<u64>>>>,
    /// [`Engine::vector_model`].
    pub(crate) vector_model: OnceLock<Option<String>>,
}

/// `slot`'s value, else `read`'s, kept in `slot` when there is one.
pub(crate) fn read_once<T: Clone>(
    slot: Option<&OnceLock<T>>,
    read: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let Some(slot) = slot else {
        return read();
    };
    if let Some(value) = slot.get() {
        return Ok(value.clone());
    }
    let value = read()?;
    Ok(slot.get_or_init(|| value).clone())
}

impl std::ops::Deref for Engine {
    type Target = EngineShared;
    fn deref(&self) -> &EngineShared {
        &self.shared
    }
}

/// A keyword index from its slot, opened on first use. Another process may be committing
/// (and deleting merged segment files) while we open; a retry reads the new meta.json.
pub(crate) fn open_for_read(
    slot: &RwLock<Option<Arc<FtsIndex>>>,
    open: impl Fn() -> Result<Option<FtsIndex>>,
) -> Result<Option<Arc<FtsIndex>>> {
    if let Some(f) = slot.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return Ok(Some(f.clone()));
    }
    let mut last = None;
    for attempt in 0..3 {
        match open() {
            Ok(Some(f)) => {
                let f = Arc::new(f);
                *slot.write().unwrap_or_else(|p| p.into_inner()) = Some(f.clone());
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

/// Empties an index slot and deletes the index's files (a missing directory is fine).
pub(crate) fn drop_index(slot: &RwLock<Option<Arc<FtsIndex>>>, dir: &Path) -> Result<()> {
    *slot.write().unwrap_or_else(|p| p.into_inner()) = None;
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir, e)),
    }
}

pub(crate) fn validate_index_name(name: &str) -> Result<()> {
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
    /// Opens (creating if needed) the index described by `opts`, on the embedded store:
    /// `quarry.db` (SQLite) in the index's data directory.
    pub fn open(opts: EngineOptions) -> Result<Engine> {
        validate_index_name(&opts.index)?;
        let dir = opts.data_dir();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let store = SqliteStore::open(&dir.join("quarry.db"))?;
        Self::open_with(opts, Arc::new(store))
    }

    /// Opens the index described by `opts` on `store`, a system of record already open
    /// (any backend); the data directory holds what this process derives from it (the
    /// keyword and vector indexes, blobs staged for upload).
    pub fn open_with(opts: EngineOptions, store: Arc<dyn Store>) -> Result<Engine> {
        validate_index_name(&opts.index)?;
        let dir = opts.data_dir();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let scope = Scope::owner(opts.space.clone());
        let vectors = Box::new(vectors::LocalAnnFile::new(&dir));
        Ok(Engine {
            shared: Arc::new(EngineShared {
                opts,
                dir,
                store,
                fts: RwLock::new(None),
                passages: RwLock::new(None),
                models: Models::default(),
                vectors,
                fusion: fusion::Fusion::default(),
                blobs: OnceLock::new(),
                ingest: IngestOptions::default(),
                embed_checkpoint: EMBED_CHECKPOINT,
                secret_key: None,
                sources: SourceOptions::default(),
                node: NodeState::default(),
                stray_sweep: Mutex::new(None),
            }),
            scope,
            ranking_scope: None,
            filter: None,
            as_of: None,
            request: None,
        })
    }

    /// Keeps uploaded originals and extracted images in `blobs` (e.g. an S3 bucket) rather
    /// than in the index directory.
    pub fn with_blobs(self, blobs: Arc<dyn quarry_blobs::BlobStore>) -> Engine {
        self.configure(|s| {
            let _ = s.blobs.set(blobs);
        })
    }

    /// Searches vectors in the store itself (PostgreSQL with pgvector) rather than in a
    /// local ANN file: `search` is usually the store opened for [`Engine::open_with`].
    pub fn with_vector_search(self, search: Arc<dyn quarry_store::VectorSearch>) -> Engine {
        self.configure(|s| s.vectors = Box::new(vectors::InStore::new(search)))
    }

    /// Changes shared settings while this is the only handle (the `with_*` builders run
    /// right after [`Engine::open`]); later calls, with other handles alive, are ignored.
    fn configure(mut self, f: impl FnOnce(&mut EngineShared)) -> Engine {
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => f(shared),
            None => debug_assert!(false, "engine configured after it was shared"),
        }
        self
    }

    /// How uploads are converted and retried.
    pub fn with_ingest(self, ingest: IngestOptions) -> Engine {
        self.configure(|s| s.ingest = ingest)
    }

    /// How often a long embedding run (`quarry embed`) adds the vectors it embedded so far to
    /// the vector index, so documents become searchable as it goes (default
    /// [`crate::EMBED_CHECKPOINT`], 30 s; zero: after every batch).
    pub fn with_embed_checkpoint(self, every: std::time::Duration) -> Engine {
        self.configure(|s| s.embed_checkpoint = every)
    }

    /// This engine with `model` as its embedding model, loaded already.
    #[cfg(test)]
    pub(crate) fn with_test_embedder(self, model: Arc<dyn quarry_models::Embedder>) -> Engine {
        self.configure(|s| s.models = Models::with_embedder(model))
    }

    /// The key the credentials of sources are sealed with.
    pub fn with_secret_key(self, key: Arc<quarry_secrets::SecretKey>) -> Engine {
        self.configure(|s| s.secret_key = Some(key))
    }

    /// How syncs of sources run: the lease their claims hold, where the requests of a sync
    /// for someone other than the machine's owner may go, whether scheduled syncs are
    /// guarded (`source_options.rs`).
    pub fn with_sources(self, sources: SourceOptions) -> Engine {
        self.configure(|s| s.sources = sources)
    }

    /// How `query` combines keyword and vector results (default [`fusion::Fusion::Calibrated`]).
    pub fn with_fusion(self, fusion: fusion::Fusion) -> Engine {
        self.configure(|s| s.fusion = fusion)
    }

    /// Sets the models this engine uses (they load on first use).
    pub fn with_models(self, config: ModelConfig) -> Engine {
        self.configure(|s| s.models = Models::new(config))
    }

    /// A handle limited to `scope`, sharing this engine's store, indexes and models.
    pub fn scoped(&self, scope: Scope) -> Engine {
        Engine {
            shared: self.shared.clone(),
            scope,
            ranking_scope: None,
            filter: None,
            as_of: None,
            request: None,
        }
    }

    /// This handle for one search request: the hidden documents and the vector index's
    /// model are read once, by the first step that needs them, and shared by the others
    /// (each is otherwise one more store round trip per step). Made per request, dropped
    /// with it.
    pub(crate) fn for_one_request(&self) -> Engine {
        Engine {
            request: Some(Arc::default()),
            ..self.clone()
        }
    }

    /// This handle narrowed to the collections `ids` for one search request, scoring as
    /// this handle would: which documents come back depends on the narrowing, their scores
    /// do not (the calibration reads features relative to the whole ranked list).
    pub(crate) fn narrowed_for_search(&self, ids: &[i64]) -> Engine {
        Engine {
            shared: self.shared.clone(),
            scope: self.scope.narrowed(ids),
            ranking_scope: Some(self.ranking_scope_or_own()),
            filter: self.filter.clone(),
            as_of: self.as_of,
            request: None,
        }
    }

    /// The scope a narrowed search's scores are computed against: the one this handle was
    /// narrowed from, else its own.
    pub(crate) fn ranking_scope_or_own(&self) -> Arc<Scope> {
        self.ranking_scope
            .clone()
            .unwrap_or_else(|| Arc::new(self.scope.clone()))
    }

    /// `filtered` (hits of a search limited to this handle's collections) placed among the
    /// same search over the ranking scope (`search` runs it with that scope's filter), each
    /// marked whether it is one of `filtered`, and how many come first from that search:
    /// evidence for those, computed over them alone ([`calibration::evidence_in_parts`]), is
    /// what the ranking scope's search computes; hits it cut off follow, in order. Without a
    /// ranking scope (or for a search naming one collection), `filtered` as it is. The
    /// ranking scope is the caller's own, so what it may not read never moves a score.
    pub(crate) fn rank_among<H>(
        &self,
        collection: Option<&str>,
        filtered: Vec<H>,
        search: impl FnOnce(&Engine, Option<&[i64]>) -> Result<Vec<H>>,
        id: impl Fn(&H) -> i64,
        score: impl Fn(&H) -> f32,
    ) -> Result<(Vec<(H, bool)>, usize)> {
        // A search naming one collection ranks within it, unless a metadata filter narrows
        // it further: then it ranks among that collection unfiltered.
        let Some(ranking) = self
            .ranking_scope
            .as_ref()
            .filter(|_| collection.is_none() || self.filter.is_some())
        else {
            let n = filtered.len();
            return Ok((filtered.into_iter().map(|h| (h, true)).collect(), n));
        };
        // At this handle's moment: entries not valid then leave the reference list too.
        let reference_engine = self.scoped((**ranking).clone()).at(self.as_of);
        let reference = reference_engine.search_filter(collection)?;
        let mut kept: std::collections::HashSet<i64> = filtered.iter().map(&id).collect();
        let mut ranked: Vec<(H, bool)> = search(&reference_engine, reference.as_deref())?
            .into_iter()
            .map(|h| {
                let keep = kept.remove(&id(&h));
                (h, keep)
            })
            .collect();
        let reference_len = ranked.len();
        // Hits the reference list cut off score below all of it.
        let mut rest: Vec<H> = filtered
            .into_iter()
            .filter(|h| kept.contains(&id(h)))
            .collect();
        rest.sort_by(|a, b| score(b).total_cmp(&score(a)));
        ranked.extend(rest.into_iter().map(|h| (h, true)));
        Ok((ranked, reference_len))
    }

    /// What this handle may reach.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The store, for services beside the engine that keep their records in it (principals
    /// and tokens, `quarry-access`).
    pub fn store_handle(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// `Forbidden` unless the handle may do `access`; `what` names the action.
    pub(crate) fn require(&self, access: Access, what: &str) -> Result<()> {
        if self.scope.can(access) {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "{what} needs {} access; this caller has {} access",
                access.as_str(),
                self.scope.access.as_str()
            )))
        }
    }

    /// Refuses callers limited to chosen knowledge bases (a token's allow-list or `?kb=`)
    /// where an action concerns the whole space: creating or renaming a knowledge base.
    /// Checked before the name is looked at, so the refusal says nothing about the names
    /// the caller cannot see.
    pub(crate) fn require_whole_space(&self, what: &str) -> Result<()> {
        if self.scope.collections.is_some() {
            return Err(Error::Forbidden(format!(
                "{what} needs access to the whole space; this caller is limited to chosen knowledge bases"
            )));
        }
        Ok(())
    }

    /// The options the engine was opened with.
    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// The index's directory.
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// The space this handle works in.
    pub fn space(&self) -> &str {
        &self.scope.space
    }

    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    pub(crate) fn fts_dir(&self) -> PathBuf {
        self.dir.join("fts")
    }

    /// The keyword index for reading; `None` until something has been indexed.
    pub(crate) fn fts(&self) -> Result<Option<Arc<FtsIndex>>> {
        open_for_read(&self.fts, || FtsIndex::open(&self.fts_dir()))
    }

    /// The keyword index for writing (created on first use). Caller holds the write lock.
    pub(crate) fn fts_for_write(&self, _guard: &WriteGuard) -> Result<Arc<FtsIndex>> {
        let f = Arc::new(FtsIndex::open_or_create(&self.fts_dir())?);
        *self.fts.write().unwrap_or_else(|p| p.into_inner()) = Some(f.clone());
        Ok(f)
    }

    pub(crate) fn passages_dir(&self) -> PathBuf {
        self.dir.join("passages")
    }

    /// The passage index for reading; `None` until something has been indexed.
    pub(crate) fn passage_index(&self) -> Result<Option<Arc<FtsIndex>>> {
        open_for_read(&self.passages, || {
            FtsIndex::open_passages(&self.passages_dir())
        })
    }

    /// The passage index for writing (created on first use; one written with another
    /// layout is deleted: the caller re-indexes every passage). Caller holds the write lock.
    pub(crate) fn passages_for_write(&self, _guard: &WriteGuard) -> Result<Arc<FtsIndex>> {
        let dir = self.passages_dir();
        let f = match FtsIndex::open_or_create_passages(&dir) {
            Ok(f) => f,
            Err(Error::Index(_)) => {
                std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
                FtsIndex::open_or_create_passages(&dir)?
            }
            Err(e) => return Err(e),
        };
        let f = Arc::new(f);
        *self.passages.write().unwrap_or_else(|p| p.into_inner()) = Some(f.clone());
        Ok(f)
    }

    /// Forgets the keyword index handle and files (it is rebuilt). Write lock held.
    pub(crate) fn drop_keyword_index(&self, _guard: &WriteGuard) -> Result<()> {
        drop_index(&self.fts, &self.fts_dir())
    }

    /// Forgets the passage index handle and files (its layout changed). Write lock held.
    pub(crate) fn drop_passage_index(&self, _guard: &WriteGuard) -> Result<()> {
        drop_index(&self.passages, &self.passages_dir())
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
        Ok(WriteGuard::holding(file))
    }

    /// Index health (seed `status`).
    pub fn status(&self) -> Result<StatusReport> {
        let collections = self.collections()?;
        let total: u64 = collections.iter().map(|c| c.documents).sum();
        let model = self.backlog_model()?;
        let mut embedding = self.store.embedding_state(
            self.space(),
            self.scope.collections.as_deref(),
            model.as_deref(),
        )?;
        self.uncount_hidden_embedding(&mut embedding, model.as_deref())?;
        // The machine's owner sees every space's backlog: a team server embeds them all.
        let mut spaces = Vec::new();
        if self.scope.machine_owner && self.scope.collections.is_none() {
            let all = self.store.spaces()?;
            if all.len() > 1 {
                for s in all {
                    let state = self
                        .store
                        .embedding_state(&s.name, None, model.as_deref())?;
                    let documents = self
                        .scoped(quarry_core::Scope::owner(s.name.clone()))
                        .collections()?
                        .iter()
                        .map(|c| c.documents)
                        .sum();
                    spaces.push(quarry_core::SpaceEmbedding {
                        space: s.name,
                        documents,
                        needs_embedding: state.documents_pending,
                        chunks_needing_embedding: state.chunks_pending,
                    });
                }
            }
        }
        let (rate, _) = self.embed_rate(model.as_deref())?;
        Ok(StatusReport {
            total_documents: total,
            needs_embedding: embedding.documents_pending,
            chunks_needing_embedding: embedding.chunks_pending,
            embedding_eta_seconds: rate
                .filter(|_| embedding.chunks_pending > 0)
                .map(|r| crate::index::embed_rate::eta_seconds(embedding.chunks_pending, r)),
            spaces,
            has_vector_index: self.vector_model()?.is_some(),
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
