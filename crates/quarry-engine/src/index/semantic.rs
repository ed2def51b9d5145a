//! The semantic layer: models, chunking, `embed`, the ANN index and vector retrieval.
//!
//! Data flow of `embed` (each step resumable, the store leading as for the keyword index):
//! 1. **Chunk** documents whose chunks are missing or were cut from older content
//!    (`documents.chunked_hash`). Chunks are sized in the embedding model's tokens.
//! 2. **Embed** every distinct chunk text that has no vector for the active model
//!    (`embeddings` is keyed by model and chunk hash: unchanged text is never embedded
//!    twice, and a model switch never mixes two vector spaces). Longest texts first, in
//!    batches, each batch committed: a kill loses at most one batch.
//! 3. **Index**: the vector backend ([`crate::index::vectors`]) takes in what changed — the local
//!    ANN file adds the chunks it lacks and drops removed ones; a store that searches
//!    vectors itself only makes sure the model's index exists.
//!
//! The vector index belongs to one model (`meta.ann.model`); when the model changes the
//! local file is deleted and every chunk is indexed again from that model's vectors.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use quarry_core::{Error, Result};
use quarry_models::{Embedder, HubProgress, ModelEnv, ModelSpec, QueryExpander, Reranker};
use quarry_store::{ChunkRef, Lease};
use serde::Serialize;

use crate::engine::Engine;
use crate::index::chunking::embed_input;
use crate::index::embed_rate::{RATE_WINDOW_MS, eta_seconds, measured_rate};
use crate::index::models::{lock, model_err, model_key};
use crate::index::vectors::META_ANN_DIMS;
use crate::index::write_lock::WriteGuard;
use crate::progress::Progress;
use crate::retrieval::search::NO_VECTOR_INDEX;

/// A metadata filter letting through at most this many documents is searched exactly
/// (every chunk of theirs scored): exact recall, and cheaper than over-asking the index.
const EXACT_FILTERED_DOCUMENTS: usize = 20_000;
/// The most chunks a filtered search asks the vector index for at once.
const MAX_FILTERED_ASK: usize = 50_000;

/// The embedding model used when none is configured and none was used before.
pub const DEFAULT_EMBED_MODEL: &str = "intfloat/multilingual-e5-small";
pub use crate::index::vectors::{ANN_EXPANSION, EXACT_SEARCH_MAX};

const META_ANN_MODEL: &str = "ann.model";
const META_EMBED_SPEC: &str = "embed.spec";
const META_EMBED_NAME: &str = "embed.name";
/// The rate embedding last proceeded at (`{"model", "chunks_per_s"}`): what the window
/// measured when a round ended (else that round's own chunks over its wall-clock time). In
/// the store, so every node falls back on the same figure while the window has too little.
const META_EMBED_RATE: &str = "embed.rate";
/// Chunk texts per store commit while embedding: bounds what a kill can lose.
const EMBED_COMMIT: usize = 64;

/// What an embedding run did: texts embedded, and the wall-clock time it took.
#[derive(Default)]
struct EmbedRun {
    done: u64,
    took: std::time::Duration,
}

/// Which chunk texts an embedding run takes.
enum EmbedWork {
    /// Every text without a vector, of the space or one collection (`quarry embed`).
    All(Option<i64>),
    /// Up to `limit` texts of a collection, claimed for the embed job holding `lease`.
    Claimed {
        lease: Lease,
        collection_id: i64,
        limit: usize,
    },
}

/// Options of [`Engine::embed`].
#[derive(Debug, Clone, Default)]
pub struct EmbedOptions {
    /// Only this collection (all when `None`).
    pub collection: Option<String>,
    /// Re-chunk and re-embed everything in scope, even what is up to date.
    pub force: bool,
}

/// A model spec as people write it: a Hub id without the `hf:` its spec form carries.
fn spoken(spec: &str) -> &str {
    spec.strip_prefix("hf:").unwrap_or(spec)
}

/// Why a node searches by keyword only although nobody turned embedding off.
fn keyword_only_text(model: &str, reason: &str) -> String {
    format!(
        "keyword search only: the default embedding model could not be fetched or loaded \
         ({model}: {reason}). Restart with the model reachable (online, HF_ENDPOINT, or a model \
         directory in --embed-model), or pass --embed-model none to choose keyword search"
    )
}

/// Milliseconds of a duration, saturating.
fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// How far embedding has got ([`Engine::embedding_progress`]), as `/api/v1/queue` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EmbeddingProgress {
    /// Documents not yet searchable by meaning.
    pub documents_pending: u64,
    /// Chunks without a vector yet.
    pub chunks_pending: u64,
    /// Chunks in all.
    pub chunks: u64,
    /// The rate embedding proceeds at, every node together: the chunks finished (vectors
    /// written) over the last two minutes of wall-clock time, or since the embedding going on
    /// began when that is shorter ([`measured_rate`]); while that covers under five seconds,
    /// the rate last measured; `None` before any.
    pub chunks_per_second: Option<f64>,
    /// Nodes embedding now (each runs one embed job at a time).
    pub nodes_embedding: u64,
    /// `chunks_pending` at that rate, rounded up; `None` without a rate.
    pub eta_seconds: Option<u64>,
}

/// What [`Engine::embed`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EmbedReport {
    /// The embedding model's name.
    pub model: String,
    /// Its vectors' dimensions.
    pub dimensions: usize,
    /// The previous vectors came from another model and were set aside.
    pub model_changed: bool,
    /// Documents whose chunks were missing vectors when this run began.
    pub documents_chunked: u64,
    /// Chunks embedded in this run.
    pub chunks_embedded: u64,
    /// Vectors added to the vector index.
    pub vectors_indexed: u64,
    /// Vectors removed from the vector index.
    pub vectors_removed: u64,
    /// Chunks in the vector index afterwards.
    pub total_chunks: u64,
    /// How long the run took.
    pub seconds: f64,
}

/// A document found by vector search: its best chunk and that chunk's similarity.
#[derive(Debug, Clone)]
pub(crate) struct VectorDocHit {
    pub document_id: i64,
    pub similarity: f32,
    pub chunk: ChunkRef,
}

/// Whether this process searches by meaning ([`Engine::semantic_state`]): REST `/status`
/// and the server's start-up log report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SemanticState {
    /// `--embed-model none`: keyword search only, by choice.
    Off,
    /// The embedding model loads on first use, or is loading (perhaps downloading) now.
    NotLoaded {
        /// The model, as `--embed-model` names it.
        model: String,
    },
    /// The embedding model is in memory.
    Ready {
        /// The model, as `--embed-model` names it.
        model: String,
    },
    /// The default model could not be fetched or loaded (offline, no network): keyword
    /// search only until the process starts again with the model at hand.
    KeywordOnly {
        /// The model, as `--embed-model` names it.
        model: String,
        /// Why it could not be loaded.
        reason: String,
    },
}

impl SemanticState {
    /// Why a node in [`SemanticState::KeywordOnly`] searches by keyword only, and what to do
    /// about it (the server logs it at start; vector search answers it); `None` otherwise.
    pub fn keyword_only_notice(&self) -> Option<String> {
        match self {
            SemanticState::KeywordOnly { model, reason } => Some(keyword_only_text(model, reason)),
            _ => None,
        }
    }
}

/// What `--embed-model none` answers to whatever needs the model.
pub(crate) const EMBEDDING_OFF: &str = "embedding is off (--embed-model none): keyword search only; start without it, or name \
     a model, to search by meaning";

/// Runs `load` with a callback that reports its Hub downloads through `progress`, one phase
/// per file, and ends the last phase when `load` returns.
fn with_hub_progress<T>(
    progress: &dyn Progress,
    model: &str,
    load: impl FnOnce(&dyn Fn(&HubProgress)) -> T,
) -> T {
    let current = RefCell::new((String::new(), 0u64));
    let report = |p: &HubProgress| {
        let mut cur = current.borrow_mut();
        if cur.0 != p.file {
            if !cur.0.is_empty() {
                progress.end();
            }
            progress.begin_bytes(
                &format!("Downloading {model}: {}", p.file),
                p.total.unwrap_or(0),
            );
            *cur = (p.file.clone(), 0);
        }
        progress.advance(p.downloaded.saturating_sub(cur.1));
        cur.1 = p.downloaded;
    };
    let out = load(&report);
    if !current.borrow().0.is_empty() {
        progress.end();
    }
    out
}

impl Engine {
    fn model_env(&self) -> &ModelEnv {
        &self.models.config.env
    }

    /// The embedding model spec in force: configured, else the one the index was built
    /// with, else the default. `Err(Unavailable)` under `--embed-model none`.
    pub fn embed_spec(&self) -> Result<ModelSpec> {
        Ok(self.embed_choice()?.0)
    }

    /// The embedding model spec in force, and whether it is the default, chosen by nobody
    /// (neither configured nor recorded by an earlier `embed`).
    fn embed_choice(&self) -> Result<(ModelSpec, bool)> {
        if self.models.config.embed_off {
            return Err(Error::Unavailable(EMBEDDING_OFF.to_owned()));
        }
        if let Some(s) = &self.models.config.embed {
            return Ok((s.clone(), false));
        }
        match self.store().meta(META_EMBED_SPEC)? {
            Some(s) => ModelSpec::parse(&s).map(|spec| (spec, false)).map_err(|e| {
                Error::Storage(format!("recorded embedding model {s:?} is invalid: {e}"))
            }),
            None => ModelSpec::parse(DEFAULT_EMBED_MODEL)
                .map(|spec| (spec, true))
                .map_err(model_err),
        }
    }

    /// The embedding model, loaded (and fetched from the Hub, with `progress`) on first use
    /// and kept for the life of the engine. While another thread loads the default model
    /// this answers `Unavailable` at once instead of waiting out a download; once the
    /// default failed to load it answers why, without trying again.
    pub fn embedder(&self, progress: &dyn Progress) -> Result<Arc<dyn Embedder>> {
        let (spec, default) = self.embed_choice()?;
        let key = spec.to_string();
        if let Some(e) = self.loaded_embedder(&key) {
            return Ok(e);
        }
        if default && let Some(reason) = lock(&self.models.default_unavailable).clone() {
            return Err(Error::Unavailable(keyword_only_text(spoken(&key), &reason)));
        }
        let _loading = if default {
            match self.models.embedder_loading.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    return Err(Error::Unavailable(format!(
                        "the embedding model {} is still loading (a first start downloads \
                         it); keyword search works meanwhile",
                        spoken(&key)
                    )));
                }
            }
        } else {
            lock(&self.models.embedder_loading)
        };
        // Loaded by the thread this one waited for.
        if let Some(e) = self.loaded_embedder(&key) {
            return Ok(e);
        }
        let env = self.model_env();
        let loaded: Arc<dyn Embedder> = match with_hub_progress(progress, spoken(&key), |report| {
            quarry_models::open_embedder(&spec, env, report)
        }) {
            Ok(m) => Arc::from(m),
            Err(e) => {
                if default {
                    *lock(&self.models.default_unavailable) = Some(e.to_string());
                }
                return Err(model_err(e));
            }
        };
        *lock(&self.models.embedder) = Some((key, loaded.clone()));
        Ok(loaded)
    }

    fn loaded_embedder(&self, key: &str) -> Option<Arc<dyn Embedder>> {
        lock(&self.models.embedder)
            .as_ref()
            .filter(|(k, _)| k == key)
            .map(|(_, e)| e.clone())
    }

    /// Loads the models a server will need, so the first request does not wait: the
    /// embedding model (the default included, fetched from the Hub on a first start with
    /// `progress`; unless `--embed-model none`), the reranker and expander if configured.
    /// Returns what was loaded. The default model failing to load is no error: the node
    /// searches by keyword, and [`Engine::semantic_state`] says why.
    pub fn preload_models(&self, progress: &dyn Progress) -> Result<Vec<String>> {
        let mut loaded = Vec::new();
        if !self.models.config.embed_off {
            match self.embedder(progress) {
                Ok(e) => loaded.push(e.identity().name.clone()),
                // Recorded: `semantic_state` reports it.
                Err(_) if self.embed_choice()?.1 => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(r) = self.reranker(progress)? {
            loaded.push(r.identity().name.clone());
        }
        if let Some(x) = self.expander()? {
            loaded.push(x.identity().name.clone());
        }
        Ok(loaded)
    }

    /// Whether an embedding model is loaded in this process (REST `/health`).
    pub fn model_loaded(&self) -> bool {
        lock(&self.models.embedder).is_some()
    }

    /// Whether this process searches by meaning, and if not why (REST `/status`, the
    /// server's log).
    pub fn semantic_state(&self) -> Result<SemanticState> {
        let (spec, default) = match self.embed_choice() {
            Ok(c) => c,
            Err(Error::Unavailable(_)) => return Ok(SemanticState::Off),
            Err(e) => return Err(e),
        };
        let key = spec.to_string();
        let model = spoken(&key).to_owned();
        if self.loaded_embedder(&key).is_some() {
            return Ok(SemanticState::Ready { model });
        }
        if default && let Some(reason) = lock(&self.models.default_unavailable).clone() {
            return Ok(SemanticState::KeywordOnly { model, reason });
        }
        Ok(SemanticState::NotLoaded { model })
    }

    /// The configured reranker, loaded on first use; `None` when none is configured.
    pub fn reranker(&self, progress: &dyn Progress) -> Result<Option<Arc<dyn Reranker>>> {
        let Some(spec) = &self.models.config.rerank else {
            return Ok(None);
        };
        let mut slot = lock(&self.models.reranker);
        if let Some(r) = slot.as_ref() {
            return Ok(Some(r.clone()));
        }
        let env = self.model_env();
        let loaded: Arc<dyn Reranker> = Arc::from(
            with_hub_progress(progress, spoken(&spec.to_string()), |report| {
                quarry_models::open_reranker(spec, env, report)
            })
            .map_err(model_err)?,
        );
        *slot = Some(loaded.clone());
        Ok(Some(loaded))
    }

    /// The configured query expander; `None` when none is configured.
    pub fn expander(&self) -> Result<Option<Arc<dyn QueryExpander>>> {
        let Some(spec) = &self.models.config.expand else {
            return Ok(None);
        };
        let mut slot = lock(&self.models.expander);
        if let Some(x) = slot.as_ref() {
            return Ok(Some(x.clone()));
        }
        let env = self.model_env();
        let loaded: Arc<dyn QueryExpander> =
            Arc::from(quarry_models::open_expander(spec, env).map_err(model_err)?);
        *slot = Some(loaded.clone());
        Ok(Some(loaded))
    }

    /// The configured note annotator; `None` when none is configured.
    pub fn annotator(&self) -> Result<Option<Arc<dyn quarry_models::NoteAnnotator>>> {
        let Some(spec) = &self.models.config.annotate else {
            return Ok(None);
        };
        let mut slot = lock(&self.models.annotator);
        if let Some(x) = slot.as_ref() {
            return Ok(Some(x.clone()));
        }
        let env = self.model_env();
        let loaded: Arc<dyn quarry_models::NoteAnnotator> =
            Arc::from(quarry_models::open_annotator(spec, env).map_err(model_err)?);
        *slot = Some(loaded.clone());
        Ok(Some(loaded))
    }

    /// Embeds texts as passages with the active model (REST `/embed`).
    pub fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let model = self.embedder(&crate::progress::NoProgress)?;
        model.embed_passages(texts).map_err(model_err)
    }

    /// The identity key of `model`, asking a remote model once for its dimensions if needed.
    pub(crate) fn identity_key(model: &dyn Embedder) -> Result<String> {
        if model.identity().dimensions == 0 {
            model
                .embed_queries(&["dimension probe"])
                .map_err(model_err)?;
        }
        let id = model.identity();
        if id.dimensions == 0 {
            return Err(Error::Unavailable(format!(
                "embedding model {} did not report its dimensions",
                id.name
            )));
        }
        Ok(model_key(id))
    }

    /// Chunks, embeds and indexes what changed since the last run (see the module docs).
    pub fn embed(&self, opts: &EmbedOptions, progress: &dyn Progress) -> Result<EmbedReport> {
        self.require(quarry_core::Access::Admin, "embedding")?;
        let collection_id = self.collection_id(opts.collection.as_deref())?;
        self.embed_scope(collection_id, opts.force, progress)
    }

    /// Whether uploads are embedded as they arrive: an embedding model is configured, or
    /// the index already has vectors, or the default model is loaded in this process (a
    /// server loads it at start; until then, or when it cannot, uploads are searchable by
    /// keyword and the embedding sweep catches up once it is in). Never under
    /// `--embed-model none`.
    pub fn embedding_enabled(&self) -> Result<bool> {
        match self.embed_choice() {
            Ok((_, false)) => Ok(true),
            Ok((spec, true)) => Ok(self.loaded_embedder(&spec.to_string()).is_some()),
            Err(Error::Unavailable(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Brings the ANN file up to date with removals (after deletes), if there is one.
    pub(crate) fn flush_vectors(&self, guard: &WriteGuard, progress: &dyn Progress) -> Result<()> {
        let (Some(key), Some(dims)) = (self.vector_model()?, self.store().meta(META_ANN_DIMS)?)
        else {
            return Ok(());
        };
        let dims: usize = dims
            .parse()
            .map_err(|_| Error::Storage(format!("invalid vector dimensions {dims:?}")))?;
        self.vectors
            .sync(guard, self.store(), &key, dims, progress)?;
        Ok(())
    }

    /// [`Engine::embed`] over one collection (by id: a knowledge base may be renamed while
    /// its uploads are processed) or everything.
    pub(crate) fn embed_scope(
        &self,
        collection_id: Option<i64>,
        force: bool,
        progress: &dyn Progress,
    ) -> Result<EmbedReport> {
        let started = Instant::now();
        let model = self.embedder(progress)?;
        // The write lock is held for the setup and each sync, never while the model runs:
        // a server over the same directory converts and indexes uploads meanwhile.
        let guard = self.lock_writes(progress)?;
        let store = self.store();
        // The setup learns a remote model's dimensions (a probe): read them after it.
        let (key, model_changed) = self.embedding_setup(&guard, model.as_ref())?;
        let dims = model.identity().dimensions;
        let mut report = EmbedReport {
            model: model.identity().name.clone(),
            dimensions: dims,
            model_changed,
            ..EmbedReport::default()
        };
        if force {
            store.delete_embeddings(self.space(), collection_id, &key)?;
        }
        // Chunks are cut when documents are keyword-indexed; finish any indexing a killed
        // writer left, so every document has its chunks.
        let only = collection_id.map(|c| [c]);
        let pending =
            store.embedding_state(self.space(), only.as_ref().map(|c| &c[..]), Some(&key))?;
        self.flush_index(&guard)?;
        // Chunks with a vector of the model, for a backend that needs no sync to count.
        let with_vectors = || -> Result<u64> {
            let s =
                store.embedding_state(self.space(), only.as_ref().map(|c| &c[..]), Some(&key))?;
            Ok(s.chunks.saturating_sub(s.chunks_pending))
        };
        let before = if self.vectors.searchable_on_write() {
            with_vectors()?
        } else {
            0
        };
        report.documents_chunked = pending.documents_pending;
        drop(guard);
        let mut indexed = (0u64, 0u64);
        let run = self.embed_pending(
            EmbedWork::All(collection_id),
            &key,
            model.as_ref(),
            progress,
            &mut || {
                let guard = self.lock_writes(&crate::progress::NoProgress)?;
                self.still_indexing(&guard, &key)?;
                let (added, removed) =
                    self.vectors
                        .sync(&guard, store, &key, dims, &crate::progress::NoProgress)?;
                indexed = (indexed.0 + added, indexed.1 + removed);
                Ok(())
            },
        )?;
        report.chunks_embedded = run.done;
        let guard = self.lock_writes(progress)?;
        self.still_indexing(&guard, &key)?;
        let (added, removed) = self.vectors.sync(&guard, store, &key, dims, progress)?;
        let (added, removed) = (added + indexed.0, removed + indexed.1);
        self.record_embed_rate(&key, &run)?;
        report.vectors_indexed = if self.vectors.searchable_on_write() {
            with_vectors()?.saturating_sub(before)
        } else {
            added
        };
        report.vectors_removed = removed;
        report.total_chunks = store
            .embedding_state(
                self.space(),
                self.scope().collections.as_deref(),
                Some(&key),
            )?
            .chunks;
        report.seconds = started.elapsed().as_secs_f64();
        quarry_models::release_free_memory();
        Ok(report)
    }

    /// One round of the background embedding of a collection (the embed job holding
    /// `lease`): claims up to `max_chunks` chunk texts without vectors that no other embed
    /// job claimed, queues the collection's next round at once when texts are left (so
    /// another node's worker shares the work while this one embeds), embeds them and adds
    /// them to the vector index, then marks the collection's files whose every chunk is
    /// indexed `ready`. The write lock is held only for the short bookkeeping at either end,
    /// never while the model runs, so uploads are converted and keyword-indexed meanwhile.
    pub(crate) fn embed_round(
        &self,
        lease: Lease,
        collection_id: i64,
        max_chunks: usize,
        progress: &dyn Progress,
    ) -> Result<()> {
        let model = self.embedder(progress)?;
        let key = {
            let guard = self.lock_writes(progress)?;
            // Chunks are cut with keyword indexing: finish any a killed writer left.
            self.flush_index(&guard)?;
            self.embedding_setup(&guard, model.as_ref())?.0
        };
        let dims = model.identity().dimensions;
        let run = self.embed_pending(
            EmbedWork::Claimed {
                lease,
                collection_id,
                limit: max_chunks,
            },
            &key,
            model.as_ref(),
            progress,
            // A round is short: its vectors are added right after it.
            &mut || Ok(()),
        )?;
        // Even with nothing embedded: chunks whose text another document's vector already
        // covers still need adding to the index.
        {
            let guard = self.lock_writes(progress)?;
            self.still_indexing(&guard, &key)?;
            self.vectors
                .sync(&guard, self.store(), &key, dims, progress)?;
        }
        self.record_embed_rate(&key, &run)?;
        self.store().mark_embedded(collection_id, &key)?;
        quarry_models::release_free_memory();
        Ok(())
    }

    /// Checks, under the write lock, that the vector index still belongs to `key`: the lock
    /// is released while the model runs, and another process (a server started with another
    /// model) may have switched the index meanwhile. Adding this run's vectors then would mix
    /// two vector spaces; the run stops and says so instead (its vectors stay stored, keyed
    /// by model, for when that model is in force again).
    fn still_indexing(&self, _guard: &WriteGuard, key: &str) -> Result<()> {
        match self.store().meta(META_ANN_MODEL)? {
            Some(now) if now != key => Err(Error::Conflict(format!(
                "the vector index was switched to {now} by another process while this run \
                 embedded with {key}; its vectors are kept, and searches use {now}. Run \
                 'quarry embed' again with the model the index should use"
            ))),
            _ => Ok(()),
        }
    }

    /// What every embedding run settles first, under the write lock: the model's key, and
    /// (when the model changed) a fresh vector index. Returns the model key and whether the
    /// model changed.
    fn embedding_setup(&self, guard: &WriteGuard, model: &dyn Embedder) -> Result<(String, bool)> {
        let spec = self.embed_spec()?;
        let key = Self::identity_key(model)?;
        let dims = model.identity().dimensions;
        let store = self.store();
        let mut model_changed = false;

        // A different model: its vectors live beside the old ones (switching back is free),
        // but the ANN file holds one vector space, so it is rebuilt from scratch.
        let previous = store.meta(META_ANN_MODEL)?;
        if previous.as_deref() != Some(key.as_str()) {
            model_changed = previous.is_some();
            self.vectors.reset(guard, store)?;
            store.set_meta(META_ANN_DIMS, &dims.to_string())?;
            store.set_meta(META_ANN_MODEL, &key)?;
        }
        store.set_meta(META_EMBED_SPEC, &spec.to_string())?;
        store.set_meta(META_EMBED_NAME, &model.identity().name)?;

        Ok((key, model_changed))
    }

    /// Embeds chunk texts that have no vector for `key` (those `work` names), calling
    /// `checkpoint` between batches once [`Engine::with_embed_checkpoint`]'s interval
    /// ([`EMBED_CHECKPOINT`]) has passed since the last, with what it committed so far.
    fn embed_pending(
        &self,
        work: EmbedWork,
        key: &str,
        model: &dyn Embedder,
        progress: &dyn Progress,
        checkpoint: &mut dyn FnMut() -> Result<()>,
    ) -> Result<EmbedRun> {
        let store = self.store();
        let run_started = Instant::now();
        // Where the next batch's time starts: the run's start (reading the texts is part of
        // the first batch), then each batch's end.
        let mut batch_started = run_started;
        let mut jobs = match work {
            EmbedWork::All(collection_id) => {
                store.embed_jobs(self.space(), collection_id, key, None)?
            }
            EmbedWork::Claimed {
                lease,
                collection_id,
                limit,
            } => {
                let Some(claimed) =
                    store.claim_embed_chunks(lease, self.space(), collection_id, key, limit)?
                else {
                    return Ok(EmbedRun::default()); // the job was taken over: its new holder embeds
                };
                if claimed.more {
                    store.enqueue_embed(collection_id)?;
                }
                claimed.texts
            }
        };
        if jobs.is_empty() {
            return Ok(EmbedRun::default());
        }
        let inputs: Vec<(String, String)> = jobs
            .drain(..)
            .map(|j| (embed_input(&j.title, &j.heading, &j.text), j.hash))
            .collect();
        // Longest first: similar lengths share a batch (little padding), the slowest work
        // comes first so the ETA only improves, and memory peaks at the start.
        let mut order: Vec<usize> = (0..inputs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(inputs[i].0.len()));
        progress.begin("Embedding", inputs.len() as u64);
        let mut done = 0u64;
        let mut checkpointed = Instant::now();
        for batch in order.chunks(EMBED_COMMIT) {
            if done > 0 && checkpointed.elapsed() >= self.embed_checkpoint {
                checkpoint()?;
                checkpointed = Instant::now();
            }
            let texts: Vec<&str> = batch.iter().map(|&i| inputs[i].0.as_str()).collect();
            let vectors = model.embed_passages(&texts).map_err(model_err)?;
            if vectors.len() != texts.len() {
                return Err(Error::Unavailable(format!(
                    "embedding model returned {} vectors for {} texts",
                    vectors.len(),
                    texts.len()
                )));
            }
            let rows: Vec<(String, Vec<f32>)> = batch
                .iter()
                .zip(vectors)
                .map(|(&i, v)| (inputs[i].1.clone(), v))
                .collect();
            store.put_embeddings(key, &rows)?;
            // What the rate is measured from: the chunks these vectors finished, and the
            // wall-clock time since the last batch (the model, the writes, a checkpoint).
            let hashes: Vec<String> = rows.into_iter().map(|(hash, _)| hash).collect();
            store.record_embedded(key, &hashes, millis(batch_started.elapsed()))?;
            batch_started = Instant::now();
            done += hashes.len() as u64;
            progress.advance(hashes.len() as u64);
        }
        progress.end();
        Ok(EmbedRun {
            done,
            took: run_started.elapsed(),
        })
    }

    /// Records the rate embedding proceeds at once a run's vectors are in the index (a
    /// status that shows an estimate also shows the index), for when the window has too
    /// little to measure: what the window measures now, else the run's own chunks over its
    /// wall-clock time.
    fn record_embed_rate(&self, key: &str, run: &EmbedRun) -> Result<()> {
        if run.done > 0 && !run.took.is_zero() {
            let recent = self.store().recent_embedding(key, RATE_WINDOW_MS)?;
            let rate = match measured_rate(recent.now_ms, &recent.batches) {
                Some(rate) => rate,
                None => {
                    let measured = run.done as f64 / run.took.as_secs_f64();
                    // Weighted by the chunks behind each figure: a 4-chunk upload's round
                    // (all per-call overhead) barely moves an estimate a thousand chunks
                    // made, so the time left does not leap from one round to the next.
                    let previous = self.stored_embed_rate(Some(key))?;
                    let weight = run.done as f64 / (run.done as f64 + 512.0);
                    previous.map_or(measured, |p| p * (1.0 - weight) + measured * weight)
                }
            };
            let rate = serde_json::json!({
                "model": key,
                "chunks_per_s": rate,
            });
            self.store().set_meta(META_EMBED_RATE, &rate.to_string())?;
        }
        Ok(())
    }

    /// What is left to embed of what the caller may read (its space, limited to its
    /// collections), with the rate embedding proceeds at ([`Engine::embed_rate`]) and the
    /// time that leaves; `None` when no embedding model is configured.
    pub fn embedding_progress(&self) -> Result<Option<EmbeddingProgress>> {
        if !self.embedding_enabled()? {
            return Ok(None);
        }
        let model = self.backlog_model()?;
        let mut state = self.store().embedding_state(
            self.space(),
            self.scope().collections.as_deref(),
            model.as_deref(),
        )?;
        self.uncount_hidden_embedding(&mut state, model.as_deref())?;
        let (rate, nodes) = self.embed_rate(model.as_deref())?;
        Ok(Some(EmbeddingProgress {
            documents_pending: state.documents_pending,
            chunks_pending: state.chunks_pending,
            chunks: state.chunks,
            chunks_per_second: rate.map(|r| (r * 100.0).round() / 100.0),
            nodes_embedding: nodes,
            eta_seconds: rate.map(|r| eta_seconds(state.chunks_pending, r)),
        }))
    }

    /// The rate embedding proceeds at, with the nodes embedding now: the chunks every node
    /// finished with `model` (the index's model) over the last [`RATE_WINDOW_MS`] of
    /// wall-clock time, or since the embedding going on began ([`measured_rate`]); while
    /// that window holds too little, the rate last recorded, if it was measured with `model`
    /// (any while there is none yet: a rate of another model says nothing of this one).
    pub(crate) fn embed_rate(&self, model: Option<&str>) -> Result<(Option<f64>, u64)> {
        let nodes = self.store().live_embed_jobs()?;
        let measured = match model {
            Some(m) => {
                let recent = self.store().recent_embedding(m, RATE_WINDOW_MS)?;
                measured_rate(recent.now_ms, &recent.batches)
            }
            None => None,
        };
        let rate = match measured {
            Some(rate) => Some(rate),
            None => self.stored_embed_rate(model)?,
        };
        Ok((rate, nodes))
    }

    /// Embedding progress of some documents (a CLI waiting for its uploads): their chunks,
    /// those without a vector yet, the documents not yet searchable by meaning, and the time
    /// that leaves at the rate embedding proceeds at ([`Engine::embed_rate`]). Whoever embeds
    /// them (this process or a server) records what it finished in the store, so the figures
    /// are the same everywhere.
    pub fn documents_embedding_progress(&self, document_ids: &[i64]) -> Result<EmbeddingProgress> {
        let model = self.backlog_model()?;
        let state = self
            .store()
            .documents_embedding_state(document_ids, model.as_deref())?;
        let (rate, nodes) = self.embed_rate(model.as_deref())?;
        Ok(EmbeddingProgress {
            documents_pending: state.documents_pending,
            chunks_pending: state.chunks_pending,
            chunks: state.chunks,
            chunks_per_second: rate.map(|r| (r * 100.0).round() / 100.0),
            nodes_embedding: nodes,
            eta_seconds: rate.map(|r| eta_seconds(state.chunks_pending, r)),
        })
    }

    /// The rate last recorded, if it was measured with `model` (any when `None`).
    fn stored_embed_rate(&self, model: Option<&str>) -> Result<Option<f64>> {
        Ok(self
            .store()
            .meta(META_EMBED_RATE)?
            .and_then(|v| serde_json::from_str::<serde_json::Value>(&v).ok())
            .filter(|v| model.is_none() || v["model"].as_str() == model)
            .and_then(|v| v["chunks_per_s"].as_f64())
            .filter(|r| r.is_finite() && *r > 0.0))
    }

    /// The model whose vectors count as done in a backlog: the index's, or while the first
    /// run has not written the index yet, the model it embeds with — so counts move as
    /// vectors are committed, not only when the index is saved.
    pub(crate) fn backlog_model(&self) -> Result<Option<String>> {
        match self.vector_model()? {
            Some(model) => Ok(Some(model)),
            None => self.store().meta(META_ANN_MODEL),
        }
    }

    /// The model key of the vector index, if `embed` has built one (read once per request
    /// on a request's handle, [`Engine::for_one_request`]).
    pub(crate) fn vector_model(&self) -> Result<Option<String>> {
        crate::engine::read_once(self.request.as_deref().map(|r| &r.vector_model), || {
            if !self.vectors.exists() {
                return Ok(None);
            }
            self.store().meta(META_ANN_MODEL)
        })
    }

    /// Checks that vector search can run and embeds the queries with the index's model.
    /// `Err(Unavailable)` says why not (no index yet, or another model configured).
    pub(crate) fn embed_queries_for_search(&self, queries: &[&str]) -> Result<Vec<Vec<f32>>> {
        if self.models.config.embed_off {
            return Err(Error::Unavailable(EMBEDDING_OFF.to_owned()));
        }
        let Some(indexed) = self.vector_model()? else {
            return Err(Error::Unavailable(NO_VECTOR_INDEX.to_owned()));
        };
        let model = self.embedder(&crate::progress::NoProgress)?;
        let vectors = model.embed_queries(queries).map_err(model_err)?;
        let key = model_key(model.identity());
        if key != indexed {
            return Err(Error::Unavailable(format!(
                "the vector index was built with {indexed}, but the embedding model is now {key}; \
                 run 'quarry embed' to re-embed with it"
            )));
        }
        Ok(vectors)
    }

    /// The `want` chunks nearest to `query_vec` (limited to `collections`), with their exact
    /// cosine similarity, best first.
    pub(crate) fn nearest_chunks(
        &self,
        query_vec: &[f32],
        want: usize,
        collections: Option<&[i64]>,
    ) -> Result<Vec<(u64, f32)>> {
        let Some(key) = self.vector_model()? else {
            return Err(Error::Unavailable(NO_VECTOR_INDEX.to_owned()));
        };
        if let Some(allowed) = self.allowed_documents()? {
            return self.nearest_allowed_chunks(&key, query_vec, want, collections, &allowed);
        }
        // The chunks of documents the caller may not read are asked for on top and dropped:
        // each can displace at most one of the `want` best it may read.
        let hidden = self.hidden_chunks()?;
        let mut found = self
            .vectors
            .nearest(
                self.store(),
                &key,
                query_vec,
                want.saturating_add(hidden.len()),
                collections,
            )?
            .ok_or_else(|| Error::Unavailable(NO_VECTOR_INDEX.to_owned()))?;
        if !hidden.is_empty() {
            found.retain(|(chunk, _)| !hidden.contains(chunk));
            found.truncate(want);
        }
        Ok(found)
    }

    /// [`Engine::nearest_chunks`] among the chunks of `allowed` documents (a metadata
    /// filter's; hidden ones are never in it). Few documents are scored exactly, every one
    /// of their chunks; otherwise the index is asked for more in proportion to how much the
    /// filter leaves out, and asked again for more while too few come back.
    fn nearest_allowed_chunks(
        &self,
        key: &str,
        query_vec: &[f32],
        want: usize,
        collections: Option<&[i64]>,
        allowed: &HashSet<u64>,
    ) -> Result<Vec<(u64, f32)>> {
        if allowed.is_empty() || want == 0 {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = allowed.iter().map(|&id| id as i64).collect();
        let exact = |ids: &[i64]| -> Result<Vec<(u64, f32)>> {
            // The chunks of the matched documents: from this node's passage index (one pass
            // over its fast columns) rather than every chunk's row and text from the store.
            let chunk_ids: Vec<i64> = match self.passage_index()? {
                Some(passages) => {
                    passages.reload()?;
                    passages
                        .entries()?
                        .into_iter()
                        .filter(|(_, doc)| u64::try_from(*doc).is_ok_and(|d| allowed.contains(&d)))
                        .map(|(chunk, _)| chunk)
                        .collect()
                }
                None => self
                    .store()
                    .chunks_of_documents(ids)?
                    .into_iter()
                    .map(|c| c.id)
                    .collect(),
            };
            let mut scored: Vec<(u64, f32)> = Vec::with_capacity(chunk_ids.len());
            for part in chunk_ids.chunks(8192) {
                scored.extend(
                    self.chunk_similarities(query_vec, part)?
                        .into_iter()
                        .filter_map(|(k, s)| u64::try_from(k).ok().map(|k| (k, s))),
                );
            }
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            scored.truncate(want);
            Ok(scored)
        };
        if ids.len() <= EXACT_FILTERED_DOCUMENTS {
            return exact(&ids);
        }
        let total: usize = self
            .collections()?
            .iter()
            .filter(|c| collections.is_none_or(|ids| ids.contains(&c.id)))
            .map(|c| c.documents as usize)
            .sum();
        let share = (total.max(1) as f64 / ids.len() as f64).ceil() as usize;
        let mut ask = want.saturating_mul(share.clamp(1, 256)).saturating_mul(2);
        loop {
            let found = self
                .vectors
                .nearest(self.store(), key, query_vec, ask, collections)?
                .ok_or_else(|| Error::Unavailable(NO_VECTOR_INDEX.to_owned()))?;
            let exhausted = found.len() < ask;
            let chunk_ids: Vec<i64> = found.iter().map(|(k, _)| *k as i64).collect();
            let docs: HashMap<i64, i64> = self
                .store()
                .chunk_refs(&chunk_ids)?
                .into_iter()
                .map(|c| (c.id, c.document_id))
                .collect();
            let mut kept: Vec<(u64, f32)> = found
                .into_iter()
                .filter(|(k, _)| {
                    docs.get(&(*k as i64))
                        .is_some_and(|d| u64::try_from(*d).is_ok_and(|d| allowed.contains(&d)))
                })
                .collect();
            if kept.len() >= want || exhausted || ask >= MAX_FILTERED_ASK {
                kept.truncate(want);
                return Ok(kept);
            }
            ask = ask.saturating_mul(4).min(MAX_FILTERED_ASK);
        }
    }

    /// Exact cosine similarity of `query_vec` to each of `chunk_ids` that the vector index
    /// holds (chunks not embedded yet are absent from the answer).
    pub(crate) fn chunk_similarities(
        &self,
        query_vec: &[f32],
        chunk_ids: &[i64],
    ) -> Result<HashMap<i64, f32>> {
        let Some(key) = self.vector_model()? else {
            return Ok(HashMap::new());
        };
        self.vectors
            .similarities(self.store(), &key, query_vec, chunk_ids)
    }

    /// The `want` chunks nearest to `query` among this handle's collections, with their
    /// cosine similarity, best first: through the vector index as every search goes, or
    /// `exact`ly (every stored vector of those collections scored). Comparing the two is how
    /// recall is checked (the backends benchmark); searches never take the exact path here.
    pub fn nearest_chunks_to(
        &self,
        query: &str,
        want: usize,
        exact: bool,
    ) -> Result<Vec<(i64, f32)>> {
        let vectors = self.embed_queries_for_search(&[query])?;
        let Some(vec) = vectors.first() else {
            return Err(Error::Unavailable(
                "embedding model returned no vector".into(),
            ));
        };
        let filter = self.search_filter(None)?;
        if !exact {
            let found = self.nearest_chunks(vec, want, filter.as_deref())?;
            return Ok(found.into_iter().map(|(k, s)| (k as i64, s)).collect());
        }
        let collections = match filter {
            Some(ids) => ids,
            None => self.collections()?.iter().map(|c| c.id).collect(),
        };
        let mut scored = Vec::new();
        for c in collections {
            for ids in self.store().chunk_ids_in_collection(c)?.chunks(8192) {
                scored.extend(self.chunk_similarities(vec, ids)?);
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(want);
        Ok(scored)
    }

    /// Documents nearest to `query_vec`, best chunk per document, best first.
    pub(crate) fn vector_search(
        &self,
        query_vec: &[f32],
        docs: usize,
        collections: Option<&[i64]>,
    ) -> Result<Vec<VectorDocHit>> {
        // Several chunks of one document may rank high; ask for more chunks than documents.
        let raw = self.nearest_chunks(query_vec, (docs * 4).max(40), collections)?;
        let chunk_ids: Vec<i64> = raw.iter().map(|(k, _)| *k as i64).collect();
        let refs: HashMap<i64, ChunkRef> = self
            .store()
            .chunk_refs(&chunk_ids)?
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (key, sim) in raw {
            // A chunk removed after the index was saved is skipped.
            let Some(chunk) = refs.get(&(key as i64)) else {
                continue;
            };
            if !seen.insert(chunk.document_id) {
                continue;
            }
            out.push(VectorDocHit {
                document_id: chunk.document_id,
                similarity: sim,
                chunk: chunk.clone(),
            });
            if out.len() == docs {
                break;
            }
        }
        Ok(out)
    }
}

/// Texts embedded once for every node and kept in the store beside chunks' vectors, under a
/// model key of their own (`<namespace>:<model key>`), so no document search ever meets them.
impl Engine {
    /// Whether an embedding model is there to use without fetching one: configured, recorded
    /// by an earlier `embed`, or already loaded (the default model is not fetched for this).
    pub fn embedding_ready(&self) -> bool {
        if self.models.config.embed_off {
            return false;
        }
        match self.embed_choice() {
            Ok((_, false)) => true,
            Ok((spec, true)) => self.loaded_embedder(&spec.to_string()).is_some(),
            Err(_) => false,
        }
    }

    /// Passage vectors of `texts` with the embedding model: each looked up in the store by a
    /// hash of `namespace` and the text, and only the missing ones embedded (then stored,
    /// for this node and every other). The vectors, in order.
    pub fn cached_passage_vectors(
        &self,
        namespace: &str,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>> {
        if self.models.config.embed_off {
            return Err(Error::Unavailable(EMBEDDING_OFF.to_owned()));
        }
        let model = self.embedder(&crate::progress::NoProgress)?;
        let key = format!("{namespace}:{}", Self::identity_key(model.as_ref())?);
        let hashes: Vec<String> = texts
            .iter()
            .map(|t| quarry_core::sha256_hex(format!("{namespace}\0{t}").as_bytes()))
            .collect();
        let mut known: HashMap<String, Vec<f32>> = self
            .store()
            .embeddings_for(&key, &hashes)?
            .into_iter()
            .collect();
        let missing: Vec<usize> = (0..texts.len())
            .filter(|&i| !known.contains_key(&hashes[i]))
            .collect();
        for batch in missing.chunks(64) {
            let refs: Vec<&str> = batch.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = model.embed_passages(&refs).map_err(model_err)?;
            let rows: Vec<(String, Vec<f32>)> = batch
                .iter()
                .zip(vectors)
                .map(|(&i, v)| (hashes[i].clone(), v))
                .collect();
            self.store().put_embeddings(&key, &rows)?;
            known.extend(rows);
        }
        Ok(hashes
            .iter()
            .map(|h| known.get(h).cloned().unwrap_or_default())
            .collect())
    }

    /// The query vector of `text` with the embedding model (no vector index needed).
    pub fn query_vector(&self, text: &str) -> Result<Vec<f32>> {
        if self.models.config.embed_off {
            return Err(Error::Unavailable(EMBEDDING_OFF.to_owned()));
        }
        let model = self.embedder(&crate::progress::NoProgress)?;
        let mut v = model.embed_queries(&[text]).map_err(model_err)?;
        v.pop()
            .ok_or_else(|| Error::Unavailable("the embedding model returned no vector".into()))
    }
}

#[cfg(test)]
mod tests {
    use crate::index::chunking::embed_input;

    /// A `quarry embed` over three batches of chunks adds each batch's vectors to the vector
    /// index at the next checkpoint, while the run goes on: they are found by a vector
    /// search before it ends (issue 65 item 21).
    #[test]
    fn a_long_embedding_run_makes_its_vectors_searchable_at_each_checkpoint() {
        use std::sync::{Arc, mpsc};
        use std::time::Duration;

        use crate::progress::NoProgress;
        use crate::test_support::HashEmbedder;

        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        std::fs::create_dir(&notes).unwrap();
        // One chunk each: batches of 64, 64 and 22.
        const NOTES: usize = 2 * super::EMBED_COMMIT + 22;
        for i in 0..NOTES {
            let text = format!("# Note {i}\n\nword{i} and the words all notes share\n");
            std::fs::write(notes.join(format!("n{i:03}.md")), text).unwrap();
        }
        // Before each batch the model waits until the test has searched.
        let (batch_starts, started) = mpsc::channel::<usize>();
        let (go_on, wait) = mpsc::channel::<()>();
        let model = HashEmbedder::new(move |n| {
            let _ = batch_starts.send(n);
            let _ = wait.recv();
        });
        let e = crate::test_support::engine(dir.path())
            .with_test_embedder(Arc::new(model))
            .with_embed_checkpoint(Duration::ZERO);
        e.add_collection(&notes, Some("notes"), None, false, &NoProgress)
            .unwrap();
        let searchable = || {
            let query = HashEmbedder::vector("the words all notes share");
            e.nearest_chunks(&query, 10 * NOTES, None)
                .map_or(0, |found| found.len())
        };
        let run = {
            let e = e.clone();
            std::thread::spawn(move || e.embed_scope(None, false, &NoProgress))
        };
        let mut seen = Vec::new();
        for size in [super::EMBED_COMMIT, super::EMBED_COMMIT, 22] {
            let n = started
                .recv_timeout(Duration::from_secs(120))
                .expect("the next batch starts");
            assert_eq!(n, size);
            seen.push(searchable());
            go_on.send(()).unwrap();
        }
        let report = run.join().unwrap().unwrap();
        assert_eq!(report.chunks_embedded, NOTES as u64);
        // Before the second batch, the first is in the index; before the third, both.
        assert_eq!(seen, [0, super::EMBED_COMMIT, 2 * super::EMBED_COMMIT]);
        assert_eq!(searchable(), NOTES);
        assert_eq!(report.vectors_indexed, NOTES as u64);
    }

    #[test]
    fn the_embedded_text_carries_the_heading_path() {
        // Without a path: exactly the text of before, so stored vectors stay valid.
        assert_eq!(embed_input("FHS", "", "body"), "FHS\n\nbody");
        assert_eq!(embed_input("FHS", "", "# FHS\n\nbody"), "# FHS\n\nbody");
        assert_eq!(embed_input("", "", "body"), "body");
        // With one: title, path, text.
        assert_eq!(
            embed_input("FHS", "3 Root › 3.18 /tmp", "The /tmp directory"),
            "FHS\n3 Root › 3.18 /tmp\n\nThe /tmp directory"
        );
        assert_eq!(embed_input("", "3.18 /tmp", "text"), "3.18 /tmp\n\ntext");
        assert_eq!(embed_input("T", "T", "text"), "T\n\ntext");
    }
}
