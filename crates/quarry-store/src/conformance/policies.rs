//! Tool policies and approvals: policies named once per space with versions that grow; an
//! approval found only for exactly its call, decided once and used once, even by racing
//! threads; expired ones neither decided nor used.

use crate::{ApprovalDecision, ApprovalRow, PolicyRow, Store, approval_status};
use quarry_core::Error;

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_policies {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::policies];
            policies_are_named_once_per_space_and_versioned,
            approvals_match_exactly_their_call_and_filter_by_status,
            approvals_are_decided_once_and_used_once_across_threads,
        );
    };
}

#[doc(hidden)]
pub use __conformance_policies;

fn policy(space: &str, id: &str, name: &str) -> PolicyRow {
    PolicyRow {
        id: id.into(),
        space_id: space.into(),
        name: name.into(),
        attach: "space".into(),
        attach_id: None,
        rule: r#"{"tools":["a.*"],"effect":"deny"}"#.into(),
        version: 1,
        created_by: Some("ann".into()),
        created_at: 10,
        updated_at: 10,
    }
}

fn approval(id: &str, digest: &str, created_at: i64, expires_at: i64) -> ApprovalRow {
    ApprovalRow {
        id: id.into(),
        space_id: "s1".into(),
        tool: "fs.write".into(),
        args_digest: digest.into(),
        arguments: r#"{"path":"/a"}"#.into(),
        caller_key: "token:t1".into(),
        requester_user_id: Some("u1".into()),
        requester_name: Some("ann".into()),
        requester_token_id: Some("t1".into()),
        endpoint: None,
        policies: r#"[{"id":"p1","name":"w","version":1}]"#.into(),
        status: approval_status::PENDING.into(),
        reason: None,
        decided_by: None,
        decided_by_token_id: None,
        decided_at: None,
        used_at: None,
        created_at,
        expires_at,
    }
}

fn decision(approve: bool, at: i64) -> ApprovalDecision<'static> {
    ApprovalDecision {
        approve,
        by: "bob",
        by_token_id: Some("t2"),
        reason: Some("ok"),
        at,
    }
}

/// Names are unique per space; an update replaces the rule and adds one to the version.
pub fn policies_are_named_once_per_space_and_versioned(store: &dyn Store) {
    store
        .insert_tool_policy(&policy("s1", "p1", "writes"))
        .unwrap();
    store
        .insert_tool_policy(&policy("s1", "p2", "reads"))
        .unwrap();
    store
        .insert_tool_policy(&policy("s2", "p3", "writes"))
        .unwrap();
    assert!(matches!(
        store.insert_tool_policy(&policy("s1", "p4", "writes")),
        Err(Error::Conflict(_))
    ));
    let names: Vec<String> = store
        .tool_policies("s1")
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["reads", "writes"], "by name, this space only");
    let mut changed = policy("s1", "p1", "writes-v2");
    changed.attach = "token".into();
    changed.attach_id = Some("t9".into());
    changed.updated_at = 20;
    let after = store.update_tool_policy(&changed).unwrap().unwrap();
    assert_eq!(
        (
            after.version,
            after.name.as_str(),
            after.attach_id.as_deref()
        ),
        (2, "writes-v2", Some("t9"))
    );
    assert_eq!((after.created_at, after.updated_at), (10, 20));
    let mut clash = policy("s1", "p1", "reads");
    clash.updated_at = 30;
    assert!(matches!(
        store.update_tool_policy(&clash),
        Err(Error::Conflict(_))
    ));
    assert!(
        store
            .update_tool_policy(&policy("s2", "p1", "x"))
            .unwrap()
            .is_none(),
        "another space's id"
    );
    assert!(store.delete_tool_policy("s1", "p1").unwrap());
    assert!(!store.delete_tool_policy("s1", "p1").unwrap());
    assert_eq!(store.tool_policies("s1").unwrap().len(), 1);
}

/// An open approval is found only for its caller, tool, digest and policies, unexpired;
/// listings filter by status (expired derived from the time).
pub fn approvals_match_exactly_their_call_and_filter_by_status(store: &dyn Store) {
    store
        .insert_approval(&approval("a1", "d1", 100, 1_000))
        .unwrap();
    store
        .insert_approval(&approval("a2", "d2", 200, 1_000))
        .unwrap();
    store
        .insert_approval(&approval("a3", "d1", 50, 150))
        .unwrap();
    let policies = r#"[{"id":"p1","name":"w","version":1}]"#;
    let open = |digest: &str, caller: &str, policies: &str, now: i64| {
        store
            .open_approval("s1", caller, "fs.write", digest, policies, now)
            .unwrap()
            .map(|a| a.id)
    };
    assert_eq!(
        open("d1", "token:t1", policies, 120).as_deref(),
        Some("a1"),
        "the newest open one"
    );
    assert_eq!(open("d1", "token:t1", policies, 2_000), None, "expired");
    assert_eq!(
        open("d1", "token:t2", policies, 120),
        None,
        "another caller"
    );
    assert_eq!(
        open(
            "d1",
            "token:t1",
            r#"[{"id":"p1","name":"w","version":2}]"#,
            120
        ),
        None,
        "another version"
    );
    assert_eq!(open("d9", "token:t1", policies, 120), None);
    assert!(
        store.approval("s2", "a1").unwrap().is_none(),
        "another space"
    );
    let ids = |status: Option<&str>, caller: Option<&str>| -> Vec<String> {
        store
            .approvals("s1", caller, status, 300, 10)
            .unwrap()
            .into_iter()
            .map(|a| a.id)
            .collect()
    };
    assert_eq!(ids(None, None), ["a2", "a1", "a3"], "newest first");
    assert_eq!(ids(Some("pending"), None), ["a2", "a1"]);
    assert_eq!(ids(Some("expired"), None), ["a3"]);
    assert!(ids(None, Some("token:other")).is_empty());
    assert!(
        store
            .decide_approval("s1", "a3", &decision(true, 300))
            .unwrap()
            .is_none(),
        "expired"
    );
    let denied = store
        .decide_approval("s1", "a2", &decision(false, 300))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            denied.status.as_str(),
            denied.decided_by.as_deref(),
            denied.reason.as_deref()
        ),
        ("denied", Some("bob"), Some("ok"))
    );
    assert_eq!(ids(Some("denied"), None), ["a2"]);
    assert!(
        !store.use_approval("s1", "a2", 300).unwrap(),
        "a denied request is never used"
    );
}

/// Racing deciders decide once; racing users use once; an expired approval is not used.
pub fn approvals_are_decided_once_and_used_once_across_threads(store: &dyn Store) {
    store
        .insert_approval(&approval("r1", "d1", 100, 10_000))
        .unwrap();
    assert!(
        !store.use_approval("s1", "r1", 200).unwrap(),
        "pending is not approved"
    );
    let decided: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                s.spawn(move || {
                    store
                        .decide_approval("s1", "r1", &decision(i % 2 == 0, 200))
                        .unwrap()
                        .is_some()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(decided.iter().filter(|d| **d).count(), 1, "decided once");
    let row = store.approval("s1", "r1").unwrap().unwrap();
    if row.status == approval_status::DENIED {
        return;
    }
    let used: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| store.use_approval("s1", "r1", 300).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(used.iter().filter(|u| **u).count(), 1, "used once");
    let row = store.approval("s1", "r1").unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.used_at), ("used", Some(300)));
    // An approval past its expiry is not used.
    store
        .insert_approval(&approval("r2", "d2", 100, 400))
        .unwrap();
    store
        .decide_approval("s1", "r2", &decision(true, 200))
        .unwrap()
        .unwrap();
    assert!(!store.use_approval("s1", "r2", 400).unwrap());
}
