//! A loopback server speaking the model APIs Quarry calls — OpenAI-compatible
//! `/v1/embeddings` and `/v1/chat/completions`, and a Jina-shaped `/rerank` — so the
//! semantic pipeline runs end to end through real HTTP without network access.
//!
//! Embeddings are deterministic bags of hashed words (so cosine similarity tracks word
//! overlap, and results are predictable); the model name salts the hash, and a model whose
//! name ends in `-48` returns 48 dimensions instead of 64, so two "models" are two vector
//! spaces. Every request is recorded; responses can be delayed or made to fail.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quarry_test_http::{Reply, Server};
use serde_json::{Value, json};

#[derive(Default)]
pub(crate) struct FakeState {
    /// Every text sent to `/v1/embeddings`, in arrival order.
    pub embedded: Vec<String>,
    /// Number of embedding requests answered.
    pub embed_requests: usize,
    pub chat_requests: usize,
    pub rerank_requests: usize,
    /// Documents in the last rerank request.
    pub last_rerank_docs: usize,
    /// Delay before answering each embedding request.
    pub embed_delay: Duration,
    /// Answer embedding / chat / rerank requests with HTTP 500.
    pub fail_embed: bool,
    pub fail_chat: bool,
    pub fail_rerank: bool,
    /// Query variants the chat endpoint returns, one per line.
    pub variants: Vec<String>,
    /// Documents containing this word get rerank score 1.0, others 0.0.
    pub rerank_word: String,
}

pub(crate) struct FakeModels {
    pub url: String,
    pub state: Arc<Mutex<FakeState>>,
    /// Serves until the fake is dropped.
    _server: Server,
}

impl FakeModels {
    pub(crate) fn start() -> FakeModels {
        let state = Arc::new(Mutex::new(FakeState::default()));
        let shared = state.clone();
        let server = Server::start(move |request| {
            let (status, body) = answer(&request.target, &request.json(), &shared);
            Reply::json(status, &body)
        });
        FakeModels {
            url: server.base(),
            state,
            _server: server,
        }
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Base URL for `QUARRY_OPENAI_BASE_URL`.
    pub(crate) fn openai_base(&self) -> String {
        format!("{}/v1", self.url)
    }

    pub(crate) fn rerank_url(&self) -> String {
        format!("{}/rerank", self.url)
    }

    /// Texts embedded so far, not counting the one-word dimension probes.
    pub(crate) fn embedded_texts(&self) -> Vec<String> {
        self.state()
            .embedded
            .iter()
            .filter(|t| t.as_str() != "dimension probe")
            .cloned()
            .collect()
    }
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 1)
        .map(str::to_lowercase)
        .collect()
}

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Bag of hashed words, L2-normalised.
pub(crate) fn fake_embedding(model: &str, text: &str) -> Vec<f32> {
    let dims = if model.ends_with("-48") { 48 } else { 64 };
    let mut v = vec![0f32; dims];
    for w in words(text) {
        let h = fnv(&format!("{model}/{w}"));
        v[(h % dims as u64) as usize] += 1.0;
    }
    if v.iter().all(|x| *x == 0.0) {
        v[0] = 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

fn lock(state: &Mutex<FakeState>) -> std::sync::MutexGuard<'_, FakeState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn answer(path: &str, req: &Value, state: &Mutex<FakeState>) -> (u16, Value) {
    match path {
        "/v1/embeddings" => {
            let delay = lock(state).embed_delay;
            std::thread::sleep(delay);
            let mut st = lock(state);
            if st.fail_embed {
                return (500, json!({"error": {"message": "embedding backend down"}}));
            }
            let model = req["model"].as_str().unwrap_or("").to_owned();
            let inputs: Vec<String> = match &req["input"] {
                Value::Array(a) => a
                    .iter()
                    .filter_map(|t| t.as_str().map(String::from))
                    .collect(),
                Value::String(s) => vec![s.clone()],
                _ => Vec::new(),
            };
            st.embed_requests += 1;
            st.embedded.extend(inputs.iter().cloned());
            let data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": fake_embedding(&model, t)}))
                .collect();
            (200, json!({"object": "list", "model": model, "data": data}))
        }
        "/v1/chat/completions" => {
            let mut st = lock(state);
            st.chat_requests += 1;
            if st.fail_chat {
                return (500, json!({"error": {"message": "chat backend down"}}));
            }
            let content = st
                .variants
                .iter()
                .enumerate()
                .map(|(i, v)| format!("{}. {v}", i + 1))
                .collect::<Vec<_>>()
                .join("\n");
            (
                200,
                json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}),
            )
        }
        "/rerank" => {
            let mut st = lock(state);
            st.rerank_requests += 1;
            if st.fail_rerank {
                return (500, json!({"detail": "rerank backend down"}));
            }
            let docs: Vec<String> = req["documents"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|d| {
                            d.as_str()
                                .map(String::from)
                                .or_else(|| d["text"].as_str().map(String::from))
                                .unwrap_or_default()
                        })
                        .collect()
                })
                .unwrap_or_default();
            st.last_rerank_docs = docs.len();
            let word = st.rerank_word.to_lowercase();
            let results: Vec<Value> = docs
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let hit = !word.is_empty() && d.to_lowercase().contains(&word);
                    json!({"index": i, "relevance_score": if hit { 1.0 } else { 0.0 }})
                })
                .collect();
            (200, json!({"results": results}))
        }
        _ => (404, json!({"detail": "not found"})),
    }
}
