//! What checking a token costs per request, in process: `Directory::authenticate` over a
//! store with 10 spaces, 100 users and 1,000 tokens (the hash lookup, the memberships, the
//! scope). Prints p50/p90/p99; with `QUARRY_BENCH_OUT=FILE` also writes them there.
//!
//!     cargo bench -p quarry-access --bench authenticate

use std::sync::Arc;
use std::time::Instant;

use quarry_access::{Directory, Role, TokenRequest};
use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("q.db"))?);
    let d = Directory::new(store);
    for s in 0..10 {
        d.create_space(&format!("space{s}"), "")?;
    }
    let mut tokens = Vec::new();
    for u in 0..100 {
        let user = format!("user{u}");
        d.create_user(&user)?;
        d.grant(&user, &format!("space{}", u % 10), Role::Editor)?;
        for _ in 0..10 {
            tokens.push(
                d.create_token(&TokenRequest {
                    user: user.clone(),
                    label: "bench".into(),
                    ..Default::default()
                })?
                .token,
            );
        }
    }
    // Warm the statement cache and the page cache.
    for t in tokens.iter().take(200) {
        d.authenticate(t, None)?.map_err(|e| e.to_string())?;
    }
    let n = 20_000;
    let mut micros = Vec::with_capacity(n);
    for i in 0..n {
        let t = &tokens[(i * 7919) % tokens.len()];
        let start = Instant::now();
        let p = d.authenticate(t, None)?;
        micros.push(start.elapsed().as_secs_f64() * 1e6);
        assert!(p.is_ok());
    }
    // A wrong token costs only the shape check and one lookup.
    let bogus = format!("qk_{}", "0".repeat(64));
    let mut bad = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let _ = d.authenticate(&bogus, None)?;
        bad.push(start.elapsed().as_secs_f64() * 1e6);
    }
    micros.sort_by(f64::total_cmp);
    bad.sort_by(f64::total_cmp);
    let report = format!(
        "Directory::authenticate, 10 spaces, 100 users, 1000 tokens, {n} calls (release build)\n\
         valid token:   p50 {:.1} µs  p90 {:.1} µs  p99 {:.1} µs\n\
         unknown token: p50 {:.1} µs  p90 {:.1} µs  p99 {:.1} µs\n",
        percentile(&micros, 0.5),
        percentile(&micros, 0.9),
        percentile(&micros, 0.99),
        percentile(&bad, 0.5),
        percentile(&bad, 0.9),
        percentile(&bad, 0.99),
    );
    print!("{report}");
    if let Ok(path) = std::env::var("QUARRY_BENCH_OUT") {
        std::fs::write(path, report)?;
    }
    Ok(())
}
