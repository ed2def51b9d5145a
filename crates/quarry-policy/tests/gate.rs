//! `Gate::check` on a real store: which policies apply to a call (the space, a named endpoint
//! by id or name, a token and every token it created), a deny over an approval, the life of
//! an approval (held, held again, approved and used once, denied), a policy changed under
//! an approval, and a stored policy that no longer reads.

use std::sync::Arc;

use quarry_core::{Identity, Principal};
use quarry_policy::{Call, EndpointRef, Gate, PolicySpec, Verdict};
use quarry_store::{AccessStore, ApprovalDecision, NewToken, PolicyRow, PolicyStore};
use quarry_store_sqlite::SqliteStore;
use serde_json::{Map, Value, json};

const SPACE: &str = "space-uuid";
const NOW: i64 = 1_800_000_000_000;

struct World {
    _dir: tempfile::TempDir,
    store: Arc<SqliteStore>,
    gate: Gate,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("quarry.db")).unwrap());
    let gate = Gate::new(store.clone(), store.clone());
    World {
        _dir: dir,
        store,
        gate,
    }
}

impl World {
    /// Stores the policy `body` (the REST grammar) as `id`.
    fn policy(&self, id: &str, body: Value) -> PolicyRow {
        let row = PolicySpec::parse(&body, None)
            .unwrap()
            .to_row(id, SPACE, Some("ann"), NOW);
        self.store.insert_tool_policy(&row).unwrap();
        row
    }

    fn check(
        &self,
        who: &Principal,
        endpoint: Option<(&str, &str)>,
        tool: &str,
        args: Value,
    ) -> Verdict {
        let arguments: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
        let call = Call {
            principal: who,
            endpoint: endpoint.map(|(id, name)| EndpointRef { id, name }),
            tool,
            arguments: &arguments,
        };
        self.gate.check(&call, NOW).unwrap()
    }

    /// A token of a new user, created by `parent` when given.
    fn token(&self, user: &str, parent: Option<&str>) -> String {
        let row = match self.store.user(user).unwrap() {
            Some((row, _)) => row,
            None => {
                self.store.create_user(user).unwrap();
                self.store.user(user).unwrap().unwrap().0
            }
        };
        let hash = format!("{user}-{}", parent.unwrap_or("root"));
        self.store
            .insert_token(&NewToken {
                user_row: row,
                hash: quarry_core::sha256_hex(hash.as_bytes()),
                prefix: "qk_test".into(),
                label: hash,
                spaces: vec![SPACE.into()],
                collections: None,
                read_only: false,
                tools: None,
                endpoint: None,
                expires_at: None,
                parent_id: parent.map(str::to_owned),
                manage: false,
            })
            .unwrap()
            .id
    }
}

fn owner() -> Principal {
    Principal::owner("acme", SPACE)
}

/// A user calling with token `token`.
fn with_token(user: &str, token: &str) -> Principal {
    let mut p = owner();
    p.scope.machine_owner = false;
    p.identity = Some(Identity {
        user_id: format!("{user}-uuid"),
        user: user.into(),
        token_id: Some(token.into()),
        read_only: false,
        spaces: vec![SPACE.into()],
        expires_at: None,
        tools: None,
        endpoint: None,
        root_token_id: None,
        session: false,
    });
    p
}

fn is_allow(v: &Verdict) -> bool {
    matches!(v, Verdict::Allow)
}

#[test]
fn a_deny_wins_over_an_approval_whatever_their_order() {
    let w = world();
    // The approval policy sorts first by id; the deny still decides.
    w.policy(
        "a-hold",
        json!({"name": "hold writes", "tools": ["fs.*"], "effect": "require_approval"}),
    );
    w.policy(
        "b-deny",
        json!({"name": "no etc", "tools": ["fs.write_file"], "effect": "deny",
               "when": {"argument": "path", "operator": "under", "value": "/etc"}}),
    );
    match w.check(
        &owner(),
        None,
        "fs.write_file",
        json!({"path": "/etc/passwd"}),
    ) {
        Verdict::Refused { policy, message } => {
            assert_eq!(policy, "no etc");
            assert!(message.contains("path=\"/etc/passwd\""), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Where the deny's condition does not hold, the approval policy holds the call.
    assert!(matches!(
        w.check(&owner(), None, "fs.write_file", json!({"path": "/srv/a"})),
        Verdict::Held { new: true, .. }
    ));
    // A tool no policy covers runs.
    assert!(is_allow(&w.check(&owner(), None, "time.now", json!({}))));
}

#[test]
fn an_approval_is_asked_once_used_once_and_a_denial_sticks() {
    let w = world();
    w.policy(
        "p1",
        json!({"name": "hold push", "tools": ["git.git_push"], "effect": "require_approval"}),
    );
    let args = json!({"branch": "main"});
    let Verdict::Held {
        approval,
        new: true,
    } = w.check(&owner(), None, "git.git_push", args.clone())
    else {
        panic!("the first call asks");
    };
    // The same call again waits on the same request; other arguments are another request.
    match w.check(&owner(), None, "git.git_push", args.clone()) {
        Verdict::Held {
            approval: again,
            new: false,
        } => assert_eq!(again.id, approval.id),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        w.check(&owner(), None, "git.git_push", json!({"branch": "dev"})),
        Verdict::Held { new: true, .. }
    ));
    let decide = |id: &str, approve: bool| {
        w.store
            .decide_approval(
                SPACE,
                id,
                &ApprovalDecision {
                    approve,
                    by: "bob",
                    by_token_id: None,
                    reason: Some("checked"),
                    at: NOW,
                },
            )
            .unwrap()
            .unwrap()
    };
    decide(&approval.id, true);
    match w.check(&owner(), None, "git.git_push", args.clone()) {
        Verdict::Approved(used) => assert_eq!(used.id, approval.id),
        other => panic!("{other:?}"),
    }
    // Used: the next identical call needs an approval of its own.
    let Verdict::Held {
        approval: second,
        new: true,
    } = w.check(&owner(), None, "git.git_push", args.clone())
    else {
        panic!("a used approval does not run a second call");
    };
    assert_ne!(second.id, approval.id);
    decide(&second.id, false);
    match w.check(&owner(), None, "git.git_push", args) {
        Verdict::Denied(denied) => {
            assert_eq!(denied.id, second.id);
            let told = Verdict::Denied(denied).refusal().unwrap();
            assert!(told.contains("denied by bob: checked"), "{told}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_changed_policy_asks_again() {
    let w = world();
    let row = w.policy(
        "p1",
        json!({"name": "hold", "tools": ["kb.delete_*"], "effect": "require_approval"}),
    );
    let args = json!({"id": "d1"});
    let Verdict::Held { approval, .. } = w.check(&owner(), None, "kb.delete_file", args.clone())
    else {
        panic!("held");
    };
    w.store
        .decide_approval(
            SPACE,
            &approval.id,
            &ApprovalDecision {
                approve: true,
                by: "bob",
                by_token_id: None,
                reason: None,
                at: NOW,
            },
        )
        .unwrap();
    // The policy changes (version 2): the approval was given under version 1.
    let mut changed = row.clone();
    changed.updated_at = NOW + 1;
    w.store.update_tool_policy(&changed).unwrap();
    assert!(matches!(
        w.check(&owner(), None, "kb.delete_file", args),
        Verdict::Held { new: true, .. }
    ));
}

#[test]
fn endpoint_policies_apply_through_that_endpoint_by_id_or_name() {
    let w = world();
    w.policy("p-name", json!({"name": "ops by name", "applies_to": {"endpoint": "ops"}, "tools": ["fs.*"], "effect": "deny"}));
    w.policy("p-id", json!({"name": "ci by id", "applies_to": {"endpoint": "ep-ci"}, "tools": ["git.*"], "effect": "deny"}));
    // Not through an endpoint, or through another one: neither applies.
    assert!(is_allow(&w.check(
        &owner(),
        None,
        "fs.read_file",
        json!({})
    )));
    assert!(is_allow(&w.check(
        &owner(),
        Some(("ep-other", "other")),
        "fs.read_file",
        json!({})
    )));
    // Through `ops` (matched by name) and through `ep-ci` (matched by id).
    assert!(matches!(
        w.check(&owner(), Some(("ep-ops", "ops")), "fs.read_file", json!({})),
        Verdict::Refused { ref policy, .. } if policy == "ops by name"
    ));
    assert!(matches!(
        w.check(&owner(), Some(("ep-ci", "ci")), "git.git_push", json!({})),
        Verdict::Refused { ref policy, .. } if policy == "ci by id"
    ));
    assert!(is_allow(&w.check(
        &owner(),
        Some(("ep-ci", "ci")),
        "fs.read_file",
        json!({})
    )));
}

#[test]
fn a_token_policy_binds_the_token_and_every_token_it_made() {
    let w = world();
    let parent = w.token("ann", None);
    let child = w.token("ann", Some(&parent));
    let grandchild = w.token("ann", Some(&child));
    let other = w.token("bob", None);
    w.policy(
        "p1",
        json!({"name": "ann's agent", "applies_to": {"token": child}, "tools": ["*"], "effect": "deny"}),
    );
    // The token itself and a token minted from it: a credential never sheds the rule.
    for t in [&child, &grandchild] {
        assert!(
            matches!(
                w.check(&with_token("ann", t), None, "time.now", json!({})),
                Verdict::Refused { .. }
            ),
            "token {t}"
        );
    }
    // Its parent, another user's token and the machine's owner are not bound.
    assert!(is_allow(&w.check(
        &with_token("ann", &parent),
        None,
        "time.now",
        json!({})
    )));
    assert!(is_allow(&w.check(
        &with_token("bob", &other),
        None,
        "time.now",
        json!({})
    )));
    assert!(is_allow(&w.check(&owner(), None, "time.now", json!({}))));
}

#[test]
fn a_stored_policy_that_no_longer_reads_refuses_what_it_might_govern() {
    let w = world();
    let mut row = w.policy(
        "p1",
        json!({"name": "broken", "tools": ["fs.*"], "effect": "deny"}),
    );
    row.rule = "{not json".into();
    w.store.update_tool_policy(&row).unwrap();
    match w.check(&owner(), None, "time.now", json!({})) {
        Verdict::Refused { policy, message } => {
            assert_eq!(policy, "broken");
            assert!(message.contains("cannot be read"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
