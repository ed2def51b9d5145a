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
            ..AuditSettings::default()
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
        ("QUARRY_INSIGHT_RETENTION_DAYS", "30"),
        ("QUARRY_INSIGHT_QUERIES", "off"),
    ]))
    .unwrap();
    assert_eq!((s.retention_days, s.record_queries), (0, true));
    assert_eq!((s.insight_retention_days, s.insight_queries), (30, false));
    for bad in [
        &[("QUARRY_AUDIT_RETENTION_DAYS", "-1")][..],
        &[("QUARRY_AUDIT_RETENTION_DAYS", "ninety")],
        &[("QUARRY_AUDIT_QUERIES", "maybe")],
        &[("QUARRY_INSIGHT_RETENTION_DAYS", "a month")],
        &[("QUARRY_INSIGHT_QUERIES", "sometimes")],
    ] {
        let e = AuditSettings::from_lookup(get(bad)).unwrap_err();
        assert_eq!((e.var.as_str(), e.value.as_str()), bad[0], "{e}");
    }
}

#[test]
fn wordings_group_rephrased_questions_and_hash_when_text_is_not_kept() {
    use crate::wording::wording;
    assert_eq!(
        wording("How do I reset my password?", true),
        "password reset"
    );
    assert_eq!(wording("password resets", true), "password reset");
    assert_eq!(wording("Resetting passwords", true), "password reset");
    assert_eq!(wording("bicycle parking", true), "bicycle park");
    assert_eq!(wording("calling king", true), "call king");
    assert_eq!(wording("What is the VPN address", true), "address vpn");
    // Unspaced scripts are read in overlapping pairs, as the keyword index reads them.
    assert_eq!(wording("如何重置密码", true), "何重 如何 密码 置密 重置");
    // Only common words: the question itself.
    assert_eq!(wording("  What is it? ", true), "what is it?");
    let hashed = wording("How do I reset my password?", false);
    assert!(hashed.starts_with("h:") && hashed.len() == 18, "{hashed}");
    assert_eq!(hashed, wording("password resets", false));
    assert_ne!(hashed, wording("vpn", false));
}

#[test]
fn similar_groups_merge_into_the_larger_one() {
    use quarry_store::UnansweredGroup;
    let group = |wording: &str, count: u64, day: i64| UnansweredGroup {
        wording: wording.into(),
        count,
        first_at: day * DAY_MS,
        last_at: day * DAY_MS,
        query: Some(format!("q {wording}")),
        best_score: Some(count as f64 / 10.0),
        days: vec![(day, count)],
    };
    let merged = wording::merge_similar(vec![
        group("expense policy travel", 5, 3),
        group("vpn", 4, 1),
        group("expense policy", 3, 2),
        group("h:00", 2, 1),
        group("h:01", 1, 1),
    ]);
    let summary: Vec<(&str, u64)> = merged
        .iter()
        .map(|(g, _)| (g.wording.as_str(), g.count))
        .collect();
    assert_eq!(
        summary,
        [
            ("expense policy travel", 8),
            ("vpn", 4),
            ("h:00", 2),
            ("h:01", 1)
        ]
    );
    let (travel, variants) = &merged[0];
    assert_eq!(travel.days, [(2, 3), (3, 5)]);
    assert_eq!((travel.first_at, travel.last_at), (2 * DAY_MS, 3 * DAY_MS));
    assert_eq!(travel.best_score, Some(0.5));
    assert_eq!(variants, &["q expense policy"]);
}

/// Everything a space's insight log holds, from the epoch to tomorrow.
fn everything_of(space_id: &str) -> quarry_store::InsightWindow {
    quarry_store::InsightWindow {
        space_id: space_id.into(),
        knowledge_base: None,
        since: 0,
        until: now_millis() + DAY_MS,
    }
}

#[test]
fn searches_and_events_reach_the_insight_log_with_usage_counts() {
    let (_dir, store) = store();
    let log = AuditLog::start(store.clone(), AuditSettings::default()).unwrap();
    let owner = Principal::owner("default", "space-1");
    let unanswered = log.search(
        &owner,
        "mcp",
        Some("kb-1"),
        "Where is the VPN guide?",
        0,
        None,
    );
    assert_eq!(unanswered.wording, "guide vpn");
    assert_eq!(unanswered.query.as_deref(), Some("Where is the VPN guide?"));
    let answered = log.search(&owner, "rest", None, "holiday calendar", 3, Some(0.8));
    assert_eq!(answered.query, None, "an answered search keeps no text");
    assert!(answered.wording.is_empty(), "nor its words");
    log.record_search(unanswered);
    log.record_search(answered);
    let mut call = event(Some(&owner), TOOL_CALL, "git.git_log", ERROR);
    call.duration_ms = Some(40);
    log.record(call);
    let mut chat = event(Some(&owner), WRITE, "POST /api/v1/chat", OK);
    chat.detail = json!({"path": "/api/v1/chat", "status": 200}).to_string();
    log.record(chat);
    log.record(event(None, AUTH_FAILURE, "unauthorized", DENIED));
    log.flush(Duration::from_secs(10));
    let window = everything_of("space-1");
    let groups = store.unanswered_groups(&window, 10).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].wording, "guide vpn");
    let mut counts: Vec<(String, String, u64, u64)> = store
        .usage_by_subject(&window)
        .unwrap()
        .into_iter()
        .map(|u| (u.metric, u.subject, u.count, u.total))
        .collect();
    counts.sort();
    let want = [
        ("chat_answers", "", 1, 0),
        ("searches", "mcp", 1, 0),
        ("searches", "rest", 1, 0),
        ("tool_calls", "git.git_log", 1, 40),
        ("tool_failures", "git.git_log", 1, 0),
        ("unanswered", "mcp", 1, 0),
    ];
    let want: Vec<(String, String, u64, u64)> = want
        .iter()
        .map(|(m, s, c, t)| ((*m).to_owned(), (*s).to_owned(), *c, *t))
        .collect();
    assert_eq!(counts, want);
}

#[test]
fn text_is_not_kept_when_the_administrator_turns_it_off() {
    let (_dir, store) = store();
    let log = AuditLog::start(
        store,
        AuditSettings {
            insight_queries: false,
            ..AuditSettings::default()
        },
    )
    .unwrap();
    let owner = Principal::owner("default", "space-1");
    let s = log.search(
        &owner,
        "rest",
        None,
        "secret project codename",
        0,
        Some(f64::NAN),
    );
    assert_eq!(s.query, None);
    assert!(s.wording.starts_with("h:"), "{}", s.wording);
    assert_eq!(
        s.top_score, None,
        "a score that is not a number is not kept"
    );
}

#[test]
fn no_nul_reaches_the_store() {
    let (_dir, store) = store();
    let log = AuditLog::start(store, AuditSettings::default()).unwrap();
    let owner = Principal::owner("default", "space-1");
    let s = log.search(&owner, "rest", Some("kb\0x"), "vpn\0 guide\0", 0, None);
    assert_eq!(
        (s.query.as_deref(), s.knowledge_base.as_str()),
        (Some("vpn guide"), "kbx")
    );
    assert_eq!(s.wording, "guide vpn");
}

#[test]
fn a_month_runs_from_its_first_day_to_the_next_months() {
    use quarry_core::iso8601_millis;
    for (at, since, until) in [
        (
            1796625000000,
            "2026-12-01T00:00:00.000Z",
            "2027-01-01T00:00:00.000Z",
        ), // 2026-12-07T06:30:00Z
        (
            1835481599000,
            "2028-02-01T00:00:00.000Z",
            "2028-03-01T00:00:00.000Z",
        ), // 2028-02-29T23:59:59Z
        (
            -43200000,
            "1969-12-01T00:00:00.000Z",
            "1970-01-01T00:00:00.000Z",
        ), // 1969-12-31T12:00:00Z
        (
            1798761600000,
            "2027-01-01T00:00:00.000Z",
            "2027-02-01T00:00:00.000Z",
        ), // 2027-01-01T00:00:00Z
    ] {
        let (a, b) = usage::month_of(at);
        assert_eq!(
            (iso8601_millis(a).as_str(), iso8601_millis(b).as_str()),
            (since, until)
        );
    }
}

#[test]
fn model_use_counts_for_the_person_and_background_work_for_the_space() {
    let (_dir, store) = store();
    let log = AuditLog::start(store.clone(), AuditSettings::default()).unwrap();
    let owner = Principal::owner("default", "space-1");
    log.record_model_use(&owner, "embedding", 2, 30);
    log.record_model_use(&owner, "embedding", 1, 12);
    log.record_space_model_use("space-1", "embedding", 4, 900);
    log.record_space_model_use("space-2", "rerank", 1, 5);
    log.flush(Duration::from_secs(10));
    let window = everything_of("space-1");
    let mut people: Vec<(String, u64, u64)> = store
        .usage_by_person(&window, false)
        .unwrap()
        .into_iter()
        .filter(|u| u.metric == crate::usage::MODEL_TOKENS)
        .map(|u| (u.user_id, u.count, u.total))
        .collect();
    people.sort();
    // The machine's owner has no user id; background work stands under its own.
    assert_eq!(
        people,
        vec![
            (String::new(), 3, 42),
            (crate::usage::BACKGROUND.to_owned(), 4, 900)
        ]
    );
    let spent: u64 = store
        .usage_by_subject(&window)
        .unwrap()
        .iter()
        .filter(|u| u.metric == crate::usage::MODEL_TOKENS)
        .map(|u| u.total)
        .sum();
    assert_eq!(spent, 942, "another space's use is not this one's");
}
