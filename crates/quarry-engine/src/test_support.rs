//! What the engine's own tests share: a fresh engine in a folder, a knowledge base, and the
//! queued jobs run in place of the workers.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use quarry_models::{Embedder, ModelError, ModelIdentity};

use crate::engine::{Engine, EngineOptions};
use crate::kb::knowledge::CreateKnowledgeBase;
use crate::progress::NoProgress;

/// The embedded engine of `dir` (index `index`, the default space, files up to 1 MiB).
pub(crate) fn engine(dir: &Path) -> Engine {
    Engine::open(EngineOptions {
        home: dir.to_path_buf(),
        index: "index".into(),
        space: quarry_core::DEFAULT_SPACE.into(),
        max_file_bytes: 1 << 20,
    })
    .unwrap()
}

/// Creates the knowledge base `name` with the default chunking.
pub(crate) fn create_kb(e: &Engine, name: &str) {
    e.create_knowledge_base(&CreateKnowledgeBase {
        name: name.into(),
        description: String::new(),
        chunk_size: None,
        chunk_overlap: None,
    })
    .unwrap();
}

/// Runs every queued job here.
pub(crate) fn drain(e: &Engine) {
    while let Some(job) = e
        .claim_job("test-worker:0", Duration::from_secs(60))
        .unwrap()
    {
        e.run_job(&job, &NoProgress, &|| {}).unwrap();
    }
}

/// A Markdown note with `text` and nothing else.
pub(crate) fn note(text: &str) -> crate::kb::notes::NewNote {
    crate::kb::notes::NewNote {
        content: text.to_owned(),
        format: crate::kb::notes::NoteFormat::Markdown,
        kind: "text".into(),
        title: None,
        tags: Vec::new(),
        fields: Default::default(),
    }
}

/// The passages a keyword knowledge search finds for `query`: every score, no reranking.
pub(crate) fn keyword_passages(e: &Engine, query: &str) -> Vec<crate::KnowledgeHit> {
    let mut req = crate::retrieval::knowledge_search::KnowledgeSearch::new(query);
    req.mode = crate::retrieval::knowledge_search::SearchMode::Keyword;
    req.min_score = 0.0;
    req.rerank = false;
    e.knowledge_search(&req).unwrap().results
}

/// What [`HashEmbedder`] calls before it embeds a batch of passages, with the batch's size.
type BeforeBatch = Box<dyn FnMut(usize) + Send>;

/// An embedding model without weights: a text's vector counts its words by hash, so texts
/// that share words are near. Before each batch of passages it calls a hook (a test looks at
/// the index while an embedding run is under way).
pub(crate) struct HashEmbedder {
    identity: ModelIdentity,
    before_batch: Mutex<BeforeBatch>,
}

impl HashEmbedder {
    /// Vector length.
    const DIMENSIONS: usize = 16;

    pub(crate) fn new(before_batch: impl FnMut(usize) + Send + 'static) -> HashEmbedder {
        HashEmbedder {
            identity: ModelIdentity {
                name: "test-embedder".into(),
                dimensions: Self::DIMENSIONS,
                revision: "words-by-hash".into(),
            },
            before_batch: Mutex::new(Box::new(before_batch)),
        }
    }

    /// The vector of `text`, unit length.
    pub(crate) fn vector(text: &str) -> Vec<f32> {
        let mut v = [0f32; Self::DIMENSIONS];
        v[0] = 1e-3;
        for word in text.split_whitespace() {
            let h = quarry_core::sha256_hex(word.to_lowercase().as_bytes());
            let i = usize::from_str_radix(&h[..4], 16).unwrap_or(0) % Self::DIMENSIONS;
            v[i] += 1.0;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect()
    }
}

impl Embedder for HashEmbedder {
    fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        (self.before_batch.lock().unwrap_or_else(|p| p.into_inner()))(texts.len());
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }

    fn max_tokens(&self) -> usize {
        512
    }

    fn count_tokens(&self, text: &str) -> Result<usize, ModelError> {
        Ok(text.split_whitespace().count())
    }
}
