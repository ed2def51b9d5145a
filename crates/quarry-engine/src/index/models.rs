//! The models an engine uses, configured once and loaded once per process on first use.

use std::sync::{Arc, Mutex};

use quarry_core::Error;
use quarry_models::{
    Embedder, ModelEnv, ModelError, ModelIdentity, ModelSpec, QueryExpander, Reranker,
};

/// Which models the engine uses. Unset fields mean: embeddings from the model the index
/// was built with (else [`crate::index::semantic::DEFAULT_EMBED_MODEL`], fetched on first use); no reranker; no
/// query expansion.
#[derive(Default)]
pub struct ModelConfig {
    /// Embedding model (`--embed-model`).
    pub embed: Option<ModelSpec>,
    /// `--embed-model none`: keyword search only. No embedding model is loaded or fetched,
    /// uploads are not embedded, vector search says it is off (`embed` is then ignored).
    pub embed_off: bool,
    /// Reranker for `query` (`--rerank-model`).
    pub rerank: Option<ModelSpec>,
    /// Query expansion for `query` (`--expand-model`).
    pub expand: Option<ModelSpec>,
    /// Chat model that titles, tags and summarises agents' notes in the background.
    pub annotate: Option<ModelSpec>,
    /// Endpoints, keys and the Hub cache (the default: public endpoints, no keys).
    pub env: ModelEnv,
}

/// Models loaded once per process, on first use.
#[derive(Default)]
pub(crate) struct Models {
    pub(crate) config: ModelConfig,
    /// Held while the embedding model loads (a download may take minutes); the slot itself
    /// is locked only briefly, so `/health` and searches never wait for a download.
    pub(crate) embedder_loading: Mutex<()>,
    pub(crate) embedder: Mutex<Option<(String, Arc<dyn Embedder>)>>,
    /// Why the default embedding model could not be loaded in this process (offline, the
    /// Hub unreachable): the node then searches by keyword only, and says so, rather than
    /// trying again on every request. Only the default: a configured model's failure is
    /// an error the operator fixes.
    pub(crate) default_unavailable: Mutex<Option<String>>,
    pub(crate) reranker: Mutex<Option<Arc<dyn Reranker>>>,
    pub(crate) expander: Mutex<Option<Arc<dyn QueryExpander>>>,
    pub(crate) annotator: Mutex<Option<Arc<dyn quarry_models::NoteAnnotator>>>,
}

impl Models {
    pub(crate) fn new(config: ModelConfig) -> Models {
        Models {
            config,
            ..Models::default()
        }
    }

    /// Models whose embedding model is `model`, configured and loaded already (tests: no
    /// weights, no download).
    #[cfg(test)]
    pub(crate) fn with_embedder(model: Arc<dyn Embedder>) -> Models {
        let spec = ModelSpec::OpenAi("test-embedder".into());
        Models {
            embedder: Mutex::new(Some((spec.to_string(), model))),
            config: ModelConfig {
                embed: Some(spec),
                ..ModelConfig::default()
            },
            ..Models::default()
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Model problems are the environment's, not the caller's: a missing model, an unreachable
/// endpoint, a refused key.
pub(crate) fn model_err(e: ModelError) -> Error {
    Error::Unavailable(e.to_string())
}

/// `name@revision#dimensions`: two vectors are comparable only if this matches.
pub fn model_key(id: &ModelIdentity) -> String {
    format!("{}@{}#{}", id.name, id.revision, id.dimensions)
}
