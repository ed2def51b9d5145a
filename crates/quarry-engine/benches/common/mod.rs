//! Helpers shared by the engine benchmarks.

#![allow(dead_code)]

use std::path::Path;
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
