//! What checking a token costs per request, in process: `Directory::authenticate` over a
//! store with 10 spaces, 100 users and 1,000 tokens, on the embedded store and — with
//! `QUARRY_BENCH_DATABASE_URL` naming an empty database — on PostgreSQL, in one run:
//! - kept: the node has checked the token before (the access generation: on PostgreSQL the
//!   one the node watches, a read of it until the watch has started);
//! - first: a directory that never saw it (the generation, the token with its memberships
//!   and chain, the scope — what every check cost before tokens were kept);
//! - unknown: a token that does not exist, kept as such;
//! - revoke: a token revoked while another node (a second store on the same database or
//!   file) has it kept; the other node's next check must refuse it. On PostgreSQL the
//!   revocation returns once every node watching the access generation has seen it.
//!
//! Prints p50/p90/p99; with `QUARRY_BENCH_OUT=FILE` also writes them there.
//!
//!     cargo bench -p quarry-access --bench authenticate

use std::sync::Arc;
use std::time::Instant;

use quarry_access::{Directory, Role, TokenRequest};
use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Microseconds of `n` calls of `check(i)`, sorted.
fn timed(n: usize, mut check: impl FnMut(usize) -> Res<()>) -> Res<Vec<f64>> {
    let mut micros = Vec::with_capacity(n);
    for i in 0..n {
        let start = Instant::now();
        check(i)?;
        micros.push(start.elapsed().as_secs_f64() * 1e6);
    }
    micros.sort_by(f64::total_cmp);
    Ok(micros)
}

fn line(label: &str, m: &[f64]) -> String {
    format!(
        "  {label:8} p50 {:>7.1} µs  p90 {:>7.1} µs  p99 {:>7.1} µs\n",
        percentile(m, 0.5),
        percentile(m, 0.9),
        percentile(m, 0.99)
    )
}

fn measure(name: &str, store: Arc<dyn Store>, other: Arc<dyn Store>) -> Res<String> {
    let d = Directory::new(store.clone());
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
    let pick = |i: usize| &tokens[(i * 7919) % tokens.len()];
    let valid = |d: &Directory, t: &str| -> Res<()> {
        d.authenticate(t, None)?.map_err(|e| e.to_string())?;
        Ok(())
    };
    // Every token kept once (and the statement caches and pages warm).
    for t in &tokens {
        valid(&d, t)?;
    }
    let n = 20_000;
    let kept = timed(n, |i| valid(&d, pick(i)))?;
    let first = timed(n / 4, |i| valid(&Directory::new(store.clone()), pick(i)))?;
    let bogus = format!("qk_{}", "0".repeat(64));
    let unknown = timed(n, |_| {
        let _ = d.authenticate(&bogus, None)?;
        Ok(())
    })?;
    let other = Directory::new(other);
    let mut issued = Vec::new();
    for i in 0..200 {
        let t = d.create_token(&TokenRequest {
            user: format!("user{}", i % 100),
            label: "revoked".into(),
            ..Default::default()
        })?;
        valid(&other, &t.token)?;
        issued.push(t);
    }
    let revoke = timed(issued.len(), |i| {
        d.revoke_token(&issued[i].record.id, None)?;
        Ok(())
    })?;
    for t in &issued {
        if other.authenticate(&t.token, None)?.is_ok() {
            return Err("the other node accepted a revoked token".into());
        }
    }
    Ok(format!(
        "{name}\n{}{}{}{}",
        line("kept", &kept),
        line("first", &first),
        line("unknown", &unknown),
        line("revoke", &revoke)
    ))
}

fn main() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let mut report = String::from(
        "Directory::authenticate, 10 spaces, 100 users, 1000 tokens (release build)\n",
    );
    let file = dir.path().join("q.db");
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&file)?);
    report += &measure(
        "embedded (SQLite)",
        sqlite,
        Arc::new(SqliteStore::open(&file)?),
    )?;
    match std::env::var("QUARRY_BENCH_DATABASE_URL") {
        Ok(url) => {
            let pg: Arc<dyn Store> = Arc::new(quarry_store_pg::PgStore::connect(&url)?);
            let node_b = Arc::new(quarry_store_pg::PgStore::connect(&url)?);
            report += &measure("PostgreSQL", pg, node_b)?;
        }
        Err(_) => report += "PostgreSQL: skipped (QUARRY_BENCH_DATABASE_URL is not set)\n",
    }
    print!("{report}");
    if let Ok(path) = std::env::var("QUARRY_BENCH_OUT") {
        std::fs::write(path, report)?;
    }
    Ok(())
}
