//! What the rate limiter adds to a tool call: `RateLimiter::check` for 100 tokens within
//! their limit (leases spent locally, one store write per slice), p50/p90/p99 per call over
//! SQLite. With `QUARRY_BENCH_OUT=FILE` the report is also written there.
//!
//!     cargo bench -p quarry-limits --bench limits

use std::sync::Arc;
use std::time::Instant;

use quarry_limits::{Decision, Kind, LimitSettings, RateLimiter};
use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("q.db"))?);
    // A limit no token reaches here: every call is allowed, as in normal use.
    let limiter = RateLimiter::new(
        store,
        LimitSettings {
            tool_calls_per_minute: 100_000,
            chats_per_minute: 60,
            auth_failures_free: 5,
            monthly_model_tokens: 0,
        },
    );
    let tokens: Vec<String> = (0..100).map(|i| format!("token-{i:04}")).collect();
    let n = 50_000;
    let mut micros = Vec::with_capacity(n);
    for i in 0..n {
        let t = &tokens[(i * 7919) % tokens.len()];
        let start = Instant::now();
        let d = limiter.check(Kind::ToolCall, t)?;
        micros.push(start.elapsed().as_secs_f64() * 1e6);
        assert_eq!(d, Decision::Allowed);
    }
    micros.sort_by(f64::total_cmp);
    let report = format!(
        "RateLimiter::check, 100 tokens, {n} calls, limit 100000/min (slices of 5000; release build, SQLite)\n\
         per call: p50 {:.2} µs  p90 {:.2} µs  p99 {:.2} µs  max {:.0} µs\n",
        percentile(&micros, 0.5),
        percentile(&micros, 0.9),
        percentile(&micros, 0.99),
        micros.last().copied().unwrap_or(0.0),
    );
    print!("{report}");
    if let Ok(path) = std::env::var("QUARRY_BENCH_OUT") {
        std::fs::write(path, report)?;
    }
    Ok(())
}
