//! What the requests to remote models cost, counted for whoever the work is done for.
//!
//! Every request to a model API (embeddings, query expansion, reranking, note annotation)
//! goes through one function, which adds it to the calling thread's [`ModelMeter`], if the
//! caller set one with [`ModelMeter::run`]. The caller (a server request, a queue job) then
//! [`takes`](ModelMeter::take) the counts and books them to the person, token or space the
//! work was for. Without a meter nothing is counted and nothing is kept.
//!
//! Tokens are those the provider reported (`usage.total_tokens`, Ollama's
//! `prompt_eval_count`, Cohere's billed units); an API that reports none is estimated from
//! the request's text (one token per four ASCII bytes, one per other character).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// What a request to a model was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ModelPurpose {
    /// Vectors of passages or queries from an embeddings API.
    Embedding,
    /// Alternative phrasings of a search query from a chat API.
    Expansion,
    /// Scores of passages for a query from a rerank API.
    Rerank,
    /// A saved note's title, tags and summary from a chat API.
    Annotation,
}

impl ModelPurpose {
    /// Its name in usage counts and metrics: `embedding`, `expansion`, `rerank`,
    /// `annotation`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelPurpose::Embedding => "embedding",
            ModelPurpose::Expansion => "expansion",
            ModelPurpose::Rerank => "rerank",
            ModelPurpose::Annotation => "annotation",
        }
    }
}

/// Requests made and the tokens they took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelCount {
    /// Requests answered (a refused or failed request is not counted).
    pub requests: u64,
    /// Tokens: reported by the provider, else estimated from the request.
    pub tokens: u64,
}

/// A tally of model requests, shared by the threads that do one piece of work. Cloning it
/// shares the tally.
#[derive(Debug, Clone, Default)]
pub struct ModelMeter(Arc<Mutex<BTreeMap<ModelPurpose, ModelCount>>>);

thread_local! {
    /// The meter the current thread's requests are added to.
    static CURRENT: RefCell<Option<ModelMeter>> = const { RefCell::new(None) };
}

/// Puts the thread's previous meter back when dropped (also when `f` panics).
struct Restore(Option<ModelMeter>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

impl ModelMeter {
    /// A meter with nothing counted.
    pub fn new() -> ModelMeter {
        ModelMeter::default()
    }

    /// Runs `f` on this thread with its model requests added to this meter (a meter set
    /// further out on the thread counts none of them).
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        f()
    }

    /// What was counted since the last take, by purpose; the meter is empty after.
    pub fn take(&self) -> Vec<(ModelPurpose, ModelCount)> {
        let mut tally = self.0.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *tally).into_iter().collect()
    }

    /// Adds `other`'s counts (a piece of work done on another thread) to this meter.
    pub fn add(&self, counts: &[(ModelPurpose, ModelCount)]) {
        let mut tally = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (purpose, c) in counts {
            let t = tally.entry(*purpose).or_default();
            t.requests = t.requests.saturating_add(c.requests);
            t.tokens = t.tokens.saturating_add(c.tokens);
        }
    }
}

/// One answered request for `purpose`, into the current thread's meter if it has one.
pub(crate) fn record(purpose: ModelPurpose, request: &Value, response: &Value) {
    let Some(meter) = CURRENT.with(|c| c.borrow().clone()) else {
        return;
    };
    let tokens = reported_tokens(response).unwrap_or_else(|| estimated_tokens(request));
    meter.add(&[(
        purpose,
        ModelCount {
            requests: 1,
            tokens,
        },
    )]);
}

/// The tokens a provider says a request took: OpenAI's and Jina's `usage` (total, else
/// prompt plus completion), Ollama's evaluation counts, Cohere's billed units.
fn reported_tokens(response: &Value) -> Option<u64> {
    let n = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64);
    if let Some(usage) = response.get("usage") {
        if let Some(total) = n(usage, "total_tokens") {
            return Some(total);
        }
        let (p, c) = (n(usage, "prompt_tokens"), n(usage, "completion_tokens"));
        if p.is_some() || c.is_some() {
            return Some(p.unwrap_or(0).saturating_add(c.unwrap_or(0)));
        }
        // DashScope's rerank: `usage.total_tokens` above, or only input tokens.
        if let Some(input) = n(usage, "input_tokens") {
            return Some(input.saturating_add(n(usage, "output_tokens").unwrap_or(0)));
        }
    }
    let (p, e) = (n(response, "prompt_eval_count"), n(response, "eval_count"));
    if p.is_some() || e.is_some() {
        return Some(p.unwrap_or(0).saturating_add(e.unwrap_or(0)));
    }
    let billed = response.get("meta").and_then(|m| m.get("billed_units"))?;
    let (i, o) = (n(billed, "input_tokens"), n(billed, "output_tokens"));
    (i.is_some() || o.is_some()).then(|| i.unwrap_or(0).saturating_add(o.unwrap_or(0)))
}

/// An estimate of a request's tokens from its text: every string in it but the model's
/// name.
fn estimated_tokens(request: &Value) -> u64 {
    fn walk(v: &Value, key: Option<&str>, total: &mut u64) {
        match v {
            Value::String(s) if key != Some("model") => {
                *total = total.saturating_add(estimate_tokens(s) as u64);
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, None, total)),
            Value::Object(fields) => fields.iter().for_each(|(k, v)| walk(v, Some(k), total)),
            _ => {}
        }
    }
    let mut total = 0;
    walk(request, None, &mut total);
    total
}

/// Rough token count for APIs without a local tokenizer: one token per non-ASCII character
/// (CJK is about one token per character) plus one per four ASCII bytes.
pub(crate) fn estimate_tokens(text: &str) -> usize {
    let (mut ascii, mut other) = (0usize, 0usize);
    for c in text.chars() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
    }
    other + ascii.div_ceil(4)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reported_tokens_of_each_provider() {
        let openai = json!({"data": [], "usage": {"prompt_tokens": 7, "total_tokens": 7}});
        assert_eq!(reported_tokens(&openai), Some(7));
        let chat = json!({"usage": {"prompt_tokens": 20, "completion_tokens": 5}});
        assert_eq!(reported_tokens(&chat), Some(25));
        let ollama = json!({"embeddings": [], "prompt_eval_count": 12});
        assert_eq!(reported_tokens(&ollama), Some(12));
        let cohere = json!({"results": [], "meta": {"billed_units": {"input_tokens": 300}}});
        assert_eq!(reported_tokens(&cohere), Some(300));
        let dashscope = json!({"output": {}, "usage": {"input_tokens": 40}});
        assert_eq!(reported_tokens(&dashscope), Some(40));
        assert_eq!(reported_tokens(&json!({"results": []})), None);
    }

    #[test]
    fn estimate_counts_the_text_not_the_model_name() {
        let req = json!({"model": "a-very-long-model-name-here", "query": "abcdefgh", "documents": ["abcd", "数据"]});
        // 8 ASCII bytes: 2; 4: 1; two CJK characters: 2.
        assert_eq!(estimated_tokens(&req), 5);
    }

    #[test]
    fn a_meter_counts_only_what_runs_inside_it_on_its_thread() {
        let (outer, inner) = (ModelMeter::new(), ModelMeter::new());
        let answer = json!({"usage": {"total_tokens": 3}});
        record(ModelPurpose::Embedding, &json!({}), &answer); // no meter: dropped
        outer.run(|| {
            record(ModelPurpose::Embedding, &json!({}), &answer);
            inner.run(|| record(ModelPurpose::Rerank, &json!({}), &answer));
            record(ModelPurpose::Embedding, &json!({}), &answer);
            std::thread::spawn(move || record(ModelPurpose::Expansion, &json!({}), &answer))
                .join()
                .ok();
        });
        let one = |requests, tokens| ModelCount { requests, tokens };
        assert_eq!(outer.take(), vec![(ModelPurpose::Embedding, one(2, 6))]);
        assert_eq!(inner.take(), vec![(ModelPurpose::Rerank, one(1, 3))]);
        assert!(outer.take().is_empty());
        // A panic inside restores the thread's meter.
        let caught = std::panic::catch_unwind(|| inner.run(|| panic!("boom")));
        assert!(caught.is_err());
        record(
            ModelPurpose::Embedding,
            &json!({}),
            &json!({"usage": {"total_tokens": 1}}),
        );
        assert!(inner.take().is_empty());
    }
}
