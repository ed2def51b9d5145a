//! What the engine's own tests share: a fresh engine in a folder, a knowledge base, and the
//! queued jobs run in place of the workers.

use std::path::Path;
use std::time::Duration;

use crate::engine::{Engine, EngineOptions};
use crate::knowledge::CreateKnowledgeBase;
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
pub(crate) fn note(text: &str) -> crate::notes::NewNote {
    crate::notes::NewNote {
        content: text.to_owned(),
        format: crate::notes::NoteFormat::Markdown,
        kind: "text".into(),
        title: None,
        tags: Vec::new(),
        fields: Default::default(),
    }
}

/// The passages a keyword knowledge search finds for `query`: every score, no reranking.
pub(crate) fn keyword_passages(e: &Engine, query: &str) -> Vec<crate::KnowledgeHit> {
    let mut req = crate::knowledge_search::KnowledgeSearch::new(query);
    req.mode = crate::knowledge_search::SearchMode::Keyword;
    req.min_score = 0.0;
    req.rerank = false;
    e.knowledge_search(&req).unwrap().results
}
