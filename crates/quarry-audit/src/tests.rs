use std::sync::Arc;
use std::time::Duration;

use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;
use serde_json::json;

use super::*;

fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("q.db")).unwrap());
    (dir, store)
}

fn all(store: &dyn Store) -> Vec<AuditRecord> {
    store
        .audit_events(&AuditQuery {
            limit: 100_000,
            ..AuditQuery::default()
        })
        .unwrap()
}

#[test]
fn recorded_events_reach_the_store_in_order_after_a_flush() {
    let (_dir, store) = store();
    let log = AuditLog::start(store.clone(), AuditSettings::default()).unwrap();
    let owner = Principal::owner("default", "space-1");
    for i in 0..1000 {
        log.record(event(Some(&owner), TOOL_CALL, format!("t.{i}"), OK));
    }
    log.flush(Duration::from_secs(10));
    let read = all(&*store);
    assert_eq!(read.len(), 1000);
    assert_eq!(read[0].event.target, "t.999", "newest first");
    assert_eq!(read[999].event.target, "t.0");
    assert_eq!(read[0].event.space_id.as_deref(), Some("space-1"));
    assert_eq!(
        read[0].event.user_id, None,
        "the machine's owner has no user"
    );
    assert_eq!((log.written(), log.dropped()), (1000, 0));
}

#[test]
fn a_full_queue_drops_and_counts_instead_of_blocking() {
    let (_dir, store) = store();
    let log = AuditLog::start(store.clone(), AuditSettings::default()).unwrap();
    let started = Instant::now();
    let n = QUEUE_CAPACITY * 3;
    for i in 0..n {
        log.record(event(None, AUTH_FAILURE, format!("{i}"), DENIED));
    }
    // Recording never waits for the store: a generous bound, far below writing them all.
    assert!(started.elapsed() < Duration::from_secs(20));
    log.flush(Duration::from_secs(30));
    let stored = all(&*store).len() as u64;
    assert_eq!(
        stored + log.dropped(),
        n as u64,
        "every event written or counted"
    );
    assert_eq!(stored, log.written());
}

#[test]
fn retention_prunes_old_events_at_start() {
    let (_dir, store) = store();
    let old = AuditEvent {
        at: now_millis() - 10 * DAY_MS,
        ..event(None, SEARCH, "old", OK)
    };
    let recent = event(None, SEARCH, "recent", OK);
    store.append_audit(&[old, recent]).unwrap();
    let log = AuditLog::start(
        store.clone(),
        AuditSettings {
            retention_days: 7,
            record_queries: false,
        },
    )
    .unwrap();
    log.record(event(None, SEARCH, "new", OK));
    log.flush(Duration::from_secs(10));
    let targets: Vec<String> = all(&*store).into_iter().map(|r| r.event.target).collect();
    assert_eq!(targets, ["new", "recent"]);
}

#[test]
fn redaction_keeps_shape_and_drops_text() {
    let args = json!({
        "query": "salary of Ann",
        "limit": 5,
        "deep": {"a": {"b": {"c": {"d": "x"}}}},
        "tags": ["a", "bb", 3, null, true],
        "token": "qk_secret",
    });
    let r = redact(&args);
    assert_eq!(r["query"], "<13 chars>");
    assert_eq!(r["limit"], 5);
    assert_eq!(r["tags"], json!(["<1 chars>", "<2 chars>", 3, null, true]));
    assert_eq!(r["deep"]["a"]["b"]["c"], "<object of 1>");
    let text = r.to_string();
    assert!(
        !text.contains("salary") && !text.contains("qk_secret"),
        "{text}"
    );
    let long: Vec<i32> = (0..100).collect();
    assert_eq!(redact(&json!(long)).as_array().unwrap().len(), 20);
}

#[test]
fn statuses_map_to_outcomes() {
    assert_eq!(outcome_of_status(200), OK);
    assert_eq!(outcome_of_status(204), OK);
    assert_eq!(outcome_of_status(401), DENIED);
    assert_eq!(outcome_of_status(403), DENIED);
    assert_eq!(outcome_of_status(404), ERROR);
    assert_eq!(outcome_of_status(500), ERROR);
}

#[test]
fn settings_from_variables() {
    let get = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(
        AuditSettings::from_lookup(get(&[])).unwrap(),
        AuditSettings::default()
    );
    assert_eq!(
        AuditSettings::from_lookup(get(&[("QUARRY_AUDIT_QUERIES", " maybe ")]))
            .unwrap_err()
            .to_string(),
        r#"QUARRY_AUDIT_QUERIES="maybe": use on or off"#
    );
    let s = AuditSettings::from_lookup(get(&[
        ("QUARRY_AUDIT_RETENTION_DAYS", " 0 "),
        ("QUARRY_AUDIT_QUERIES", "on"),
    ]))
    .unwrap();
    assert_eq!((s.retention_days, s.record_queries), (0, true));
    for bad in [
        &[("QUARRY_AUDIT_RETENTION_DAYS", "-1")][..],
        &[("QUARRY_AUDIT_RETENTION_DAYS", "ninety")],
        &[("QUARRY_AUDIT_QUERIES", "maybe")],
    ] {
        let e = AuditSettings::from_lookup(get(bad)).unwrap_err();
        assert_eq!((e.var.as_str(), e.value.as_str()), bad[0], "{e}");
    }
}
