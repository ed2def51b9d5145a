//! A loopback server speaking the model APIs Quarry calls — OpenAI-compatible
//! `/v1/embeddings` and `/v1/chat/completions`, and a Jina-shaped `/rerank` — so the
//! semantic pipeline runs end to end through real HTTP without network access.
//!
//! Embeddings are deterministic bags of hashed words (so cosine similarity tracks word
//! overlap, and results are predictable); the model name salts the hash, and a model whose
//! name ends in `-48` returns 48 dimensions instead of 64, so two "models" are two vector
//! spaces. Every request is recorded; responses can be delayed or made to fail.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
}

impl FakeModels {
    pub(crate) fn start() -> FakeModels {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake model server");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(FakeState::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        FakeModels { url, state }
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

fn serve(stream: TcpStream, state: &Mutex<FakeState>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_owned();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (status, resp) = answer(&path, &req, state);
    let text = resp.to_string();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )?;
    stream.flush()
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
