//! The audit log: appended in batches, read newest first with filters and pages, pruned by
//! age.

use crate::{AuditEvent, AuditQuery, Store};

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_audit {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::audit];
            audit_events_round_trip_newest_first,
            audit_filters_and_pages,
            audit_prune_removes_only_older_events,
            limits_budget_is_granted_up_to_the_limit,
            limits_concurrent_takers_never_overshoot,
        );
    };
}

#[doc(hidden)]
pub use __conformance_audit;

fn event(at: i64, space: Option<&str>, action: &str, outcome: &str) -> AuditEvent {
    AuditEvent {
        at,
        space_id: space.map(str::to_owned),
        user_id: Some(format!("user-{}", at % 2)),
        user_name: Some(format!("name-{}", at % 2)),
        token_id: (at % 3 == 0).then(|| format!("token-{at}")),
        client: Some("127.0.0.1".into()),
        action: action.into(),
        target: format!("target-{at}"),
        outcome: outcome.into(),
        duration_ms: (at % 2 == 0).then_some(at * 10),
        detail: format!(r#"{{"n":{at}}}"#),
    }
}

fn query(limit: usize) -> AuditQuery {
    AuditQuery {
        limit,
        ..AuditQuery::default()
    }
}

/// Every field survives the trip; reads come newest first; an empty batch is fine.
pub fn audit_events_round_trip_newest_first(store: &dyn Store) {
    store.append_audit(&[]).expect("an empty batch");
    let batch = vec![
        event(1, Some("s1"), "tool.call", "ok"),
        event(2, None, "auth.failure", "denied"),
        event(3, Some("s1"), "search", "ok"),
    ];
    store.append_audit(&batch).expect("append_audit");
    let read = store.audit_events(&query(10)).expect("audit_events");
    assert_eq!(read.len(), 3);
    let events: Vec<AuditEvent> = read.iter().map(|r| r.event.clone()).collect();
    assert_eq!(
        events,
        batch.iter().rev().cloned().collect::<Vec<_>>(),
        "as appended, newest first"
    );
    assert!(
        read.windows(2).all(|w| w[0].id > w[1].id),
        "ids descend: {:?}",
        read.iter().map(|r| r.id).collect::<Vec<_>>()
    );
    assert!(store.audit_events(&query(0)).expect("limit 0").is_empty());
}

/// Each filter narrows; `action` matches whole words and their sub-actions only; pages
/// continue below the last id without gaps or repeats.
pub fn audit_filters_and_pages(store: &dyn Store) {
    let mut all = Vec::new();
    for at in 1..=30 {
        let space = if at % 5 == 0 { "s2" } else { "s1" };
        let action = match at % 3 {
            0 => "tool.call",
            1 => "search",
            _ => "tool.callx",
        };
        let outcome = if at % 4 == 0 { "denied" } else { "ok" };
        all.push(event(at, Some(space), action, outcome));
    }
    for chunk in all.chunks(7) {
        store.append_audit(chunk).expect("append_audit");
    }
    let ats = |q: &AuditQuery| -> Vec<i64> {
        store
            .audit_events(q)
            .expect("audit_events")
            .iter()
            .map(|r| r.event.at)
            .collect()
    };
    let expect = |f: &dyn Fn(&AuditEvent) -> bool| -> Vec<i64> {
        all.iter().rev().filter(|e| f(e)).map(|e| e.at).collect()
    };
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = query(100);
        f(&mut q);
        q
    };
    assert_eq!(
        ats(&q(&|q| q.space_id = Some("s2".into()))),
        expect(&|e| e.space_id.as_deref() == Some("s2"))
    );
    assert_eq!(
        ats(&q(&|q| q.action = Some("tool".into()))),
        expect(&|e| e.action.starts_with("tool.")),
        "a prefix word covers its sub-actions"
    );
    assert_eq!(
        ats(&q(&|q| q.action = Some("tool.call".into()))),
        expect(&|e| e.action == "tool.call"),
        "not tool.callx"
    );
    assert!(ats(&q(&|q| q.action = Some("too".into()))).is_empty());
    assert_eq!(
        ats(&q(&|q| q.outcome = Some("denied".into()))),
        expect(&|e| e.outcome == "denied")
    );
    assert_eq!(
        ats(&q(&|q| q.user_id = Some("user-1".into()))),
        expect(&|e| e.user_id.as_deref() == Some("user-1"))
    );
    assert_eq!(ats(&q(&|q| q.token_id = Some("token-9".into()))), vec![9]);
    assert_eq!(
        ats(&q(&|q| {
            q.since = Some(10);
            q.until = Some(20);
        })),
        expect(&|e| (10..20).contains(&e.at)),
        "since inclusive, until exclusive"
    );
    // Pages of 4 over the s1 events: together exactly the filtered list.
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .audit_events(&AuditQuery {
                space_id: Some("s1".into()),
                before_id: before,
                limit: 4,
                ..AuditQuery::default()
            })
            .expect("page");
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 4);
        before = page.last().map(|r| r.id);
        seen.extend(page.iter().map(|r| r.event.at));
    }
    assert_eq!(seen, expect(&|e| e.space_id.as_deref() == Some("s1")));
}

/// Pruning removes events strictly older than the cut and reports how many.
pub fn audit_prune_removes_only_older_events(store: &dyn Store) {
    let batch: Vec<AuditEvent> = (1..=10)
        .map(|at| event(at * 1000, Some("s"), "search", "ok"))
        .collect();
    store.append_audit(&batch).expect("append_audit");
    assert_eq!(store.prune_audit(4000).expect("prune"), 3);
    let left: Vec<i64> = store
        .audit_events(&query(100))
        .expect("audit_events")
        .iter()
        .map(|r| r.event.at)
        .collect();
    assert_eq!(left, (4..=10).rev().map(|n| n * 1000).collect::<Vec<_>>());
    assert_eq!(store.prune_audit(4000).expect("again"), 0);
}

/// A window's budget is granted up to its limit and no further, per key and window; events
/// are counted; old windows are pruned.
pub fn limits_budget_is_granted_up_to_the_limit(store: &dyn Store) {
    assert_eq!(store.take_budget("tok:a", 60_000, 4, 10).expect("take"), 4);
    assert_eq!(store.take_budget("tok:a", 60_000, 4, 10).expect("take"), 4);
    assert_eq!(
        store.take_budget("tok:a", 60_000, 4, 10).expect("take"),
        2,
        "capped"
    );
    assert_eq!(
        store.take_budget("tok:a", 60_000, 4, 10).expect("take"),
        0,
        "spent"
    );
    assert_eq!(
        store.take_budget("tok:b", 60_000, 4, 10).expect("take"),
        4,
        "per key"
    );
    assert_eq!(
        store.take_budget("tok:a", 120_000, 4, 10).expect("take"),
        4,
        "per window"
    );
    assert_eq!(
        store.take_budget("tok:c", 60_000, 5, 0).expect("take"),
        0,
        "no budget"
    );
    assert_eq!(store.count_event("ip:1", 60_000).expect("count"), 1);
    assert_eq!(store.count_event("ip:1", 60_000).expect("count"), 2);
    assert_eq!(store.count_event("ip:1", 120_000).expect("count"), 1);
    assert_eq!(store.prune_limits(120_000).expect("prune"), 3);
    assert_eq!(
        store.take_budget("tok:a", 60_000, 4, 10).expect("take"),
        4,
        "pruned"
    );
}

/// Several threads taking budget at once never grant more than the limit in all.
pub fn limits_concurrent_takers_never_overshoot(store: &dyn Store) {
    let granted: i64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut got = 0;
                    for _ in 0..20 {
                        got += store.take_budget("tok:shared", 0, 3, 100).expect("take");
                    }
                    got
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    assert_eq!(granted, 100, "exactly the limit across takers");
}
