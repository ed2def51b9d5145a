//! Helpers shared by the engine benchmarks.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

/// `key` parsed from the environment, else `default`.
pub(crate) fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `p` quantile of sorted durations, in milliseconds.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// The `query` fields of the repository's JSONL eval sets (`eval/…`).
pub(crate) fn eval_queries(repo: &Path, sets: &[&str]) -> Vec<String> {
    let mut qs = Vec::new();
    for f in sets {
        if let Ok(text) = std::fs::read_to_string(repo.join(f)) {
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(line)
                    && let Some(q) = v.get("query").and_then(|q| q.as_str())
                {
                    qs.push(q.to_owned());
                }
            }
        }
    }
    qs
}

/// `QUARRY_BENCH_MODEL` and the corpus (`QUARRY_BENCH_CORPUS`, default the tldr pages beside
/// the repository) of the benches that embed; `None`, said on stderr, without a model.
pub(crate) fn model_and_corpus(repo: &Path) -> Option<(String, PathBuf)> {
    let Ok(model) = std::env::var("QUARRY_BENCH_MODEL") else {
        eprintln!("QUARRY_BENCH_MODEL is not set: nothing to measure (see the file's docs)");
        return None;
    };
    let corpus = std::env::var_os("QUARRY_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("../shared/corpora/tldr/pages"));
    Some((model, corpus))
}
