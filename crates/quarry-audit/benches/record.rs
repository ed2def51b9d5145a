//! What the audit log adds to a request: building an event for a token's principal, redacting
//! typical tool arguments and queueing it (`AuditLog::record`), p50/p90/p99 per call; and
//! whether the writer keeps up — events per second into SQLite, and how many a burst drops.
//! With `QUARRY_BENCH_OUT=FILE` the report is also written there.
//!
//!     cargo bench -p quarry-audit --bench record

use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry_audit::{AuditLog, AuditSettings, OK, TOOL_CALL, event, redact_object};
use quarry_core::{Identity, Principal, Scope};
use quarry_store::{AuditQuery, Store};
use quarry_store_sqlite::SqliteStore;
use serde_json::json;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("q.db"))?);
    let log = AuditLog::start(store.clone(), AuditSettings::default())?;
    let principal = Principal {
        identity: Some(Identity {
            user_id: "0b6c5e0e-5d1f-4c3a-9a55-0a3f3c9e8d11".into(),
            user: "ann".into(),
            token_id: Some("4a1e2b7c-9d3f-4e21-8f5a-2c6b1d0e9f33".into()),
            read_only: false,
            spaces: vec!["d2f1c3b4-5a69-4788-9abc-def012345678".into()],
            expires_at: None,
            tools: Some(vec!["time".into(), "git.git_status".into()]),
            endpoint: None,
            root_token_id: Some("4a1e2b7c-9d3f-4e21-8f5a-2c6b1d0e9f33".into()),
            session: false,
        }),
        scope: Scope {
            machine_owner: false,
            ..Scope::owner("team")
        },
        space_id: "d2f1c3b4-5a69-4788-9abc-def012345678".into(),
    };
    let args = json!({"timezone": "Europe/Berlin", "query": "what changed in the release notes", "limit": 5});
    let args = args.as_object().cloned().unwrap_or_default();
    // Paced (a 20 µs pause after each, far above a node's tool-call rate), so the queue
    // never fills and what is timed is the request path alone.
    let n = 20_000;
    let mut micros = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let mut e = event(Some(&principal), TOOL_CALL, "time__get_current_time", OK);
        e.duration_ms = Some(3);
        e.detail = json!({"endpoint": "/api/mcp", "arguments": redact_object(&args)}).to_string();
        log.record(e);
        micros.push(start.elapsed().as_secs_f64() * 1e6);
        std::thread::sleep(Duration::from_micros(20));
    }
    log.flush(Duration::from_secs(60));
    micros.sort_by(f64::total_cmp);
    let (paced_written, paced_dropped) = (log.written(), log.dropped());
    // A burst: 200,000 events as fast as one thread can make them.
    let burst = 200_000;
    let started = Instant::now();
    for _ in 0..burst {
        log.record(event(
            Some(&principal),
            TOOL_CALL,
            "time__get_current_time",
            OK,
        ));
    }
    let queued_in = started.elapsed();
    log.flush(Duration::from_secs(120));
    let drained_in = started.elapsed();
    let stored = store
        .audit_events(&AuditQuery {
            limit: usize::MAX >> 1,
            ..AuditQuery::default()
        })?
        .len();
    let report = format!(
        "AuditLog::record with event() and redact_object(), {n} calls paced at 20 µs (release build)\n\
         per call: p50 {:.2} µs  p90 {:.2} µs  p99 {:.2} µs  (written {paced_written}, dropped {})\n\
         burst of {burst}: queued in {:.0} ms, drained in {:.0} ms; stored {} of {}, dropped {} \
         (writer ≈ {:.0} events/s into SQLite)\n",
        percentile(&micros, 0.5),
        percentile(&micros, 0.9),
        percentile(&micros, 0.99),
        paced_dropped,
        queued_in.as_secs_f64() * 1e3,
        drained_in.as_secs_f64() * 1e3,
        stored,
        n + burst,
        log.dropped() - paced_dropped,
        (log.written() - paced_written) as f64 / drained_in.as_secs_f64(),
    );
    print!("{report}");
    if let Ok(path) = std::env::var("QUARRY_BENCH_OUT") {
        std::fs::write(path, report)?;
    }
    Ok(())
}
