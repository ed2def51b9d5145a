//! Conformance cases for spaces, users, memberships and access tokens (`AccessStore`). Each case is a `pub fn access_…(store: &dyn Store)`
//! listed in the macro below.

use quarry_core::{CollectionKind, Error};

use crate::{NewToken, Role, Store, TokenRecord};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_access {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::access];
            access_spaces_are_unique_and_found_by_name_or_uuid,
            access_deleting_a_space_forgets_its_members_and_its_place_in_tokens,
            access_a_space_with_collections_is_not_deleted,
            access_users_are_unique_and_found_by_name_or_uuid,
            access_deleting_a_user_takes_its_memberships_and_tokens,
            access_grant_replaces_the_role_and_keeps_the_join_time,
            access_grants_need_a_real_user_and_space,
            access_tokens_round_trip_without_their_secret,
            access_a_token_is_found_by_hash_with_memberships_and_ancestors,
            access_token_chains_lead_to_the_root,
            access_revoking_a_token_revokes_what_it_created,
            access_collection_ids_resolve_uuids_and_names_in_order,
            access_racing_creations_have_one_winner,
            access_every_change_a_token_resolves_through_moves_the_generation,
        );
    };
}

#[doc(hidden)]
pub use __conformance_access;

fn space(store: &dyn Store, name: &str) -> crate::Space {
    store
        .create_space(name, "")
        .unwrap_or_else(|e| panic!("create_space {name}: {e}"))
}

fn user(store: &dyn Store, name: &str) -> i64 {
    store
        .create_user(name)
        .unwrap_or_else(|e| panic!("create_user {name}: {e}"));
    store
        .user(name)
        .expect("user")
        .unwrap_or_else(|| panic!("user {name} just created is not found"))
        .0
}

fn new_token(user_row: i64, hash: &str, spaces: &[&str]) -> NewToken {
    NewToken {
        user_row,
        hash: hash.into(),
        prefix: format!("qk_{}", &hash[..hash.len().min(6)]),
        label: format!("token {hash}"),
        spaces: spaces.iter().map(|s| (*s).to_owned()).collect(),
        collections: None,
        read_only: false,
        expires_at: None,
        parent_id: None,
        tools: None,
        endpoint: None,
        manage: false,
    }
}

fn insert(store: &dyn Store, new: &NewToken) -> TokenRecord {
    store
        .insert_token(new)
        .unwrap_or_else(|e| panic!("insert_token {}: {e}", new.label))
}

/// The stored token `id`, as listed.
fn token(store: &dyn Store, id: &str) -> TokenRecord {
    store
        .tokens(None)
        .expect("tokens")
        .into_iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("token {id} is not listed"))
}

fn ids(tokens: &[TokenRecord]) -> Vec<&str> {
    tokens.iter().map(|t| t.id.as_str()).collect()
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// A space has a unique name and its own UUID; it is found by either, listed by name in
/// byte order (as the embedded store sorts, whatever the database's locale).
pub fn access_spaces_are_unique_and_found_by_name_or_uuid(store: &dyn Store) {
    let team = store
        .create_space("team", "the team's space")
        .expect("create_space");
    assert_eq!(team.name, "team");
    assert_eq!(team.description, "the team's space");
    assert!(is_uuid(&team.id), "a UUID: {}", team.id);
    assert!(team.created_at > 0, "created_at: {}", team.created_at);
    match store.create_space("team", "again") {
        Err(Error::Conflict(m)) => assert_eq!(m, "space 'team' already exists"),
        other => panic!("expected Conflict for a taken space name, got {other:?}"),
    }
    let other = space(store, "b-side");
    assert_ne!(other.id, team.id, "every space its own UUID");
    space(store, "Zeta");
    space(store, "alpha");
    let names: Vec<String> = store
        .spaces()
        .expect("spaces")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["Zeta", "alpha", "b-side", "team"], "byte order");
    for key in ["team", team.id.as_str()] {
        let found = store
            .space(key)
            .expect("space")
            .unwrap_or_else(|| panic!("space {key} not found"));
        assert_eq!(
            (
                found.id.as_str(),
                found.name.as_str(),
                found.description.as_str()
            ),
            (team.id.as_str(), "team", "the team's space"),
            "space({key})"
        );
        assert_eq!(found.created_at, team.created_at);
    }
    assert!(store.space("nope").expect("space").is_none());
    assert!(store.space("").expect("space").is_none());
}

/// Deleting a space forgets its memberships and takes it out of tokens; a token left with
/// no space is revoked (one already revoked keeps its time). The name is free again.
pub fn access_deleting_a_space_forgets_its_members_and_its_place_in_tokens(store: &dyn Store) {
    let one = space(store, "one");
    let two = space(store, "two");
    let u = user(store, "u");
    store.grant(u, "one", Role::Editor).expect("grant");
    store.grant(u, "two", Role::Viewer).expect("grant");
    let both = insert(store, &new_token(u, "both", &[&one.id, &two.id]));
    let only = insert(store, &new_token(u, "only", &[&one.id]));
    let revoked = insert(store, &new_token(u, "revoked", &[&one.id]));
    let elsewhere = insert(store, &new_token(u, "elsewhere", &[&two.id]));
    assert!(store.revoke_token(&revoked.id, None, 5).expect("revoke"));

    store.delete_space("one").expect("delete_space");
    assert!(store.space("one").expect("space").is_none());
    assert!(store.space(&one.id).expect("space").is_none());
    let names: Vec<String> = store
        .spaces()
        .expect("spaces")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["two"]);
    let left: Vec<String> = store
        .memberships(None)
        .expect("memberships")
        .into_iter()
        .map(|m| m.space)
        .collect();
    assert_eq!(left, ["two"], "the space's memberships are gone");

    let both = token(store, &both.id);
    assert_eq!(
        both.spaces,
        std::slice::from_ref(&two.id),
        "the other space stays"
    );
    assert_eq!(
        both.revoked_at, None,
        "a token with a space left still works"
    );
    let only = token(store, &only.id);
    assert!(only.spaces.is_empty(), "{:?}", only.spaces);
    assert!(
        only.revoked_at.is_some(),
        "a token left with no space is revoked"
    );
    assert_eq!(
        token(store, &revoked.id).revoked_at,
        Some(5),
        "revoked before"
    );
    let elsewhere = token(store, &elsewhere.id);
    assert_eq!(
        (elsewhere.spaces, elsewhere.revoked_at),
        (vec![two.id.clone()], None)
    );

    match store.delete_space("one") {
        Err(Error::NotFound(m)) => assert_eq!(m, "space 'one' not found"),
        other => panic!("expected NotFound deleting a deleted space, got {other:?}"),
    }
    let again = space(store, "one");
    assert_ne!(again.id, one.id, "a new space, a new UUID");
}

/// A space that still has collections is not deleted (needs `create_collection`).
pub fn access_a_space_with_collections_is_not_deleted(store: &dyn Store) {
    space(store, "kbs");
    let u = user(store, "u");
    store.grant(u, "kbs", Role::Owner).expect("grant");
    store
        .create_collection("kbs", "notes", CollectionKind::Folder, "/x", "**/*.md")
        .expect("create_collection");
    match store.delete_space("kbs") {
        Err(Error::Conflict(m)) => assert_eq!(m, "space 'kbs' still has 1 collection(s)"),
        other => panic!("expected Conflict deleting a space with collections, got {other:?}"),
    }
    assert!(store.space("kbs").expect("space").is_some(), "still there");
    assert_eq!(
        store.memberships(Some(u)).expect("memberships").len(),
        1,
        "the refusal changed nothing"
    );
}

/// A user has a unique name and a UUID, is found by either with its row id, and users are
/// listed by name in byte order.
pub fn access_users_are_unique_and_found_by_name_or_uuid(store: &dyn Store) {
    let bob = store.create_user("bob").expect("create_user");
    assert_eq!(bob.name, "bob");
    assert!(is_uuid(&bob.id), "a UUID: {}", bob.id);
    assert!(bob.created_at > 0);
    match store.create_user("bob") {
        Err(Error::Conflict(m)) => assert_eq!(m, "user 'bob' already exists"),
        other => panic!("expected Conflict for a taken user name, got {other:?}"),
    }
    store.create_user("Alice").expect("create_user");
    store.create_user("carol").expect("create_user");
    let names: Vec<String> = store
        .users()
        .expect("users")
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(names, ["Alice", "bob", "carol"], "byte order");
    let (row, by_name) = store.user("bob").expect("user").expect("bob by name");
    let (row2, by_id) = store.user(&bob.id).expect("user").expect("bob by UUID");
    assert_eq!(row, row2, "one row id");
    for u in [by_name, by_id] {
        assert_eq!(
            (u.id.as_str(), u.name.as_str(), u.created_at),
            (bob.id.as_str(), "bob", bob.created_at)
        );
    }
    let (carol, _) = store.user("carol").expect("user").expect("carol");
    assert_ne!(row, carol, "every user its own row");
    assert!(store.user("nobody").expect("user").is_none());
}

/// Deleting a user takes its memberships and tokens and nobody else's; an unknown row is
/// not an error, and the name is free again.
pub fn access_deleting_a_user_takes_its_memberships_and_tokens(store: &dyn Store) {
    let s = space(store, "s");
    let gone = user(store, "gone");
    let stays = user(store, "stays");
    for u in [gone, stays] {
        store.grant(u, "s", Role::Editor).expect("grant");
    }
    let parent = insert(store, &new_token(gone, "g1", &[&s.id]));
    insert(
        store,
        &NewToken {
            parent_id: Some(parent.id.clone()),
            ..new_token(gone, "g2", &[&s.id])
        },
    );
    let kept = insert(store, &new_token(stays, "s1", &[&s.id]));

    store.delete_user(gone).expect("delete_user");
    assert!(store.user("gone").expect("user").is_none());
    assert!(
        store
            .memberships(Some(gone))
            .expect("memberships")
            .is_empty()
    );
    assert!(store.tokens(Some(gone)).expect("tokens").is_empty());
    assert!(store.token_by_hash("g1").expect("token_by_hash").is_none());
    let members: Vec<String> = store
        .memberships(None)
        .expect("memberships")
        .into_iter()
        .map(|m| m.user)
        .collect();
    assert_eq!(members, ["stays"]);
    assert_eq!(
        ids(&store.tokens(None).expect("tokens")),
        [kept.id.as_str()]
    );

    store
        .delete_user(gone)
        .expect("deleting an unknown user row is not an error");
    let (again, _) = store
        .user(&store.create_user("gone").expect("the name is free").id)
        .expect("user")
        .expect("the new user");
    assert!(
        store
            .memberships(Some(again))
            .expect("memberships")
            .is_empty()
    );
}

/// A grant replaces the role the user had in the space and keeps when it joined; a
/// membership is revoked once. Memberships are listed by user name, then space name.
pub fn access_grant_replaces_the_role_and_keeps_the_join_time(store: &dyn Store) {
    let a = space(store, "a");
    space(store, "B");
    let zed = user(store, "zed");
    let amy = user(store, "amy");
    for role in [Role::Viewer, Role::Editor, Role::Admin, Role::Owner] {
        store.grant(zed, "a", role).expect("grant");
        let m = store.memberships(Some(zed)).expect("memberships");
        assert_eq!(m.len(), 1, "one membership per user and space: {m:?}");
        assert_eq!(m[0].role, role, "the last role granted");
        assert_eq!(
            (
                m[0].user.as_str(),
                m[0].space.as_str(),
                m[0].space_id.as_str()
            ),
            ("zed", "a", a.id.as_str())
        );
    }
    let joined = store.memberships(Some(zed)).expect("memberships")[0].joined_at;
    assert!(joined > 0);
    std::thread::sleep(std::time::Duration::from_millis(5));
    store.grant(zed, "a", Role::Viewer).expect("grant");
    let m = store.memberships(Some(zed)).expect("memberships");
    assert_eq!(
        (m[0].role, m[0].joined_at),
        (Role::Viewer, joined),
        "a role change keeps joined_at"
    );

    store.grant(zed, "B", Role::Editor).expect("grant");
    store.grant(amy, "a", Role::Admin).expect("grant");
    let all: Vec<(String, String, Role)> = store
        .memberships(None)
        .expect("memberships")
        .into_iter()
        .map(|m| (m.user, m.space, m.role))
        .collect();
    assert_eq!(
        all,
        [
            ("amy".into(), "a".into(), Role::Admin),
            ("zed".into(), "B".into(), Role::Editor),
            ("zed".into(), "a".into(), Role::Viewer),
        ],
        "by user, then space, in byte order"
    );
    assert_eq!(store.memberships(Some(amy)).expect("memberships").len(), 1);

    assert!(
        store
            .revoke_membership(zed, "a")
            .expect("revoke_membership")
    );
    assert!(
        !store
            .revoke_membership(zed, "a")
            .expect("revoke_membership"),
        "once"
    );
    assert!(
        !store
            .revoke_membership(amy, "B")
            .expect("revoke_membership"),
        "never a member"
    );
    assert!(
        !store
            .revoke_membership(zed, "nope")
            .expect("revoke_membership")
    );
    let left: Vec<String> = store
        .memberships(Some(zed))
        .expect("memberships")
        .into_iter()
        .map(|m| m.space)
        .collect();
    assert_eq!(left, ["B"]);
    assert!(
        store.memberships(Some(-1)).expect("memberships").is_empty(),
        "an unknown user has none"
    );
}

/// A grant for a space or user that does not exist is refused and records nothing.
pub fn access_grants_need_a_real_user_and_space(store: &dyn Store) {
    space(store, "s");
    let u = user(store, "u");
    assert!(
        store.grant(u, "no-such-space", Role::Viewer).is_err(),
        "a grant in an unknown space"
    );
    assert!(
        store.grant(u + 1000, "s", Role::Viewer).is_err(),
        "a grant to an unknown user"
    );
    assert!(store.memberships(None).expect("memberships").is_empty());
}

/// A token is stored as given, with its owner's UUID and name, and never with its secret:
/// only the hash finds it. A duplicate hash is refused without quoting it.
pub fn access_tokens_round_trip_without_their_secret(store: &dyn Store) {
    let s = space(store, "s");
    let t = space(store, "t");
    let bob = user(store, "bob");
    let bob_uuid = store.user("bob").expect("user").expect("bob").1.id;
    let eve = user(store, "eve");
    let new = NewToken {
        user_row: bob,
        hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
        prefix: "qk_1a2b3c".into(),
        label: "laptop".into(),
        spaces: vec![s.id.clone(), t.id.clone()],
        collections: Some(vec!["c-uuid-1".into(), "c-uuid-2".into()]),
        read_only: true,
        expires_at: Some(4_102_444_800_000),
        parent_id: None,
        tools: Some(vec!["time".into(), "git.git_status".into()]),
        endpoint: Some("e-uuid-1".into()),
        manage: true,
    };
    let rec = insert(store, &new);
    assert!(is_uuid(&rec.id), "a UUID: {}", rec.id);
    assert_eq!(
        (rec.user_row, rec.user_id.as_str(), rec.user.as_str()),
        (bob, bob_uuid.as_str(), "bob")
    );
    assert_eq!(
        (rec.label.as_str(), rec.prefix.as_str()),
        ("laptop", "qk_1a2b3c")
    );
    assert_eq!(rec.spaces, new.spaces);
    assert_eq!(rec.collections, new.collections);
    assert_eq!(rec.tools, new.tools);
    assert_eq!(rec.endpoint, new.endpoint);
    assert!(rec.read_only);
    assert!(rec.manage, "the management scope round-trips");
    assert!(rec.created_at > 0);
    assert_eq!(rec.expires_at, Some(4_102_444_800_000));
    assert_eq!(
        (rec.last_used_at, rec.revoked_at, rec.parent_id.clone()),
        (None, None, None)
    );
    let listed = token(store, &rec.id);
    assert_eq!(
        format!("{listed:?}"),
        format!("{rec:?}"),
        "listed as inserted"
    );

    // All collections (None) and none of them (an empty list) stay apart.
    let all = insert(
        store,
        &NewToken {
            read_only: false,
            ..new_token(bob, "all", &[&s.id])
        },
    );
    assert_eq!(
        (all.collections, all.read_only, all.expires_at),
        (None, false, None)
    );
    let none = insert(
        store,
        &NewToken {
            collections: Some(Vec::new()),
            ..new_token(bob, "none", &[&s.id])
        },
    );
    assert_eq!(none.collections, Some(Vec::new()));
    let evs = insert(store, &new_token(eve, "eve", &[&t.id]));

    assert_eq!(
        ids(&store.tokens(Some(bob)).expect("tokens")),
        [rec.id.as_str(), all.id.as_str(), none.id.as_str()],
        "a user's tokens, oldest first"
    );
    assert_eq!(
        ids(&store.tokens(Some(eve)).expect("tokens")),
        [evs.id.as_str()]
    );
    assert_eq!(store.tokens(None).expect("tokens").len(), 4);
    assert!(store.tokens(Some(-1)).expect("tokens").is_empty());

    store.touch_token(&rec.id, 1_234).expect("touch_token");
    assert_eq!(token(store, &rec.id).last_used_at, Some(1_234));
    assert_eq!(token(store, &all.id).last_used_at, None, "only that token");
    store
        .touch_token("no-such-token", 1)
        .expect("touching an unknown token is not an error");

    let dup = store
        .insert_token(&NewToken {
            label: "copy".into(),
            ..new.clone()
        })
        .expect_err("a duplicate hash");
    assert!(
        !dup.to_string().contains(&new.hash),
        "the error quotes the hash: {dup}"
    );
    assert!(
        store
            .insert_token(&new_token(-1, "orphan", &[&s.id]))
            .is_err(),
        "a token for an unknown user"
    );
    assert_eq!(
        store.tokens(None).expect("tokens").len(),
        4,
        "nothing stored"
    );
}

/// Looking a token up by hash brings its owner's memberships and its ancestors with it.
pub fn access_a_token_is_found_by_hash_with_memberships_and_ancestors(store: &dyn Store) {
    let s = space(store, "s");
    let t = space(store, "t");
    space(store, "u");
    let bob = user(store, "bob");
    let eve = user(store, "eve");
    store.grant(bob, "t", Role::Admin).expect("grant");
    store.grant(bob, "s", Role::Viewer).expect("grant");
    store.grant(eve, "u", Role::Owner).expect("grant");
    let root = insert(store, &new_token(bob, "root", &[&s.id, &t.id]));
    let child = insert(
        store,
        &NewToken {
            parent_id: Some(root.id.clone()),
            tools: Some(vec!["time".into()]),
            ..new_token(bob, "child", &[&s.id])
        },
    );
    store.touch_token(&child.id, 77).expect("touch_token");

    let grant = store
        .token_by_hash("child")
        .expect("token_by_hash")
        .expect("the token");
    assert_eq!(grant.token.id, child.id);
    assert_eq!(grant.token.parent_id.as_deref(), Some(root.id.as_str()));
    assert_eq!(grant.token.last_used_at, Some(77));
    assert_eq!(grant.token.tools, Some(vec!["time".to_owned()]));
    assert_eq!(
        format!("{:?}", grant.token),
        format!("{:?}", token(store, &child.id))
    );
    let mut memberships: Vec<(String, String, String, Role)> = grant
        .memberships
        .iter()
        .map(|m| (m.user.clone(), m.space.clone(), m.space_id.clone(), m.role))
        .collect();
    memberships.sort();
    assert_eq!(
        memberships,
        [
            ("bob".into(), "s".into(), s.id.clone(), Role::Viewer),
            ("bob".into(), "t".into(), t.id.clone(), Role::Admin),
        ],
        "the owner's memberships, nobody else's"
    );
    assert!(grant.memberships.iter().all(|m| m.joined_at > 0));
    assert_eq!(ids(&grant.ancestors), [root.id.as_str()]);

    let grant = store
        .token_by_hash("root")
        .expect("token_by_hash")
        .expect("the root");
    assert!(grant.ancestors.is_empty());
    assert_eq!(grant.memberships.len(), 2);

    let lonely = insert(store, &new_token(user(store, "lonely"), "lonely", &[]));
    let grant = store
        .token_by_hash("lonely")
        .expect("token_by_hash")
        .expect("a token whose owner is in no space");
    assert_eq!(grant.token.id, lonely.id);
    assert!(grant.token.spaces.is_empty());
    assert!(grant.memberships.is_empty());

    assert!(
        store
            .token_by_hash("unknown")
            .expect("token_by_hash")
            .is_none()
    );
    assert!(
        store
            .token_by_hash(&root.id)
            .expect("token_by_hash")
            .is_none(),
        "a UUID is not a hash"
    );
    assert!(
        store
            .token_by_hash("qk_root")
            .expect("token_by_hash")
            .is_none()
    );
}

/// A token's chain runs from it to the root, nearest first; a lost ancestor ends it early
/// (the last record still names a parent).
pub fn access_token_chains_lead_to_the_root(store: &dyn Store) {
    let u = user(store, "u");
    let root = insert(store, &new_token(u, "root", &[]));
    let mut chain = vec![root.clone()];
    for i in 0..4 {
        let parent = chain.last().map(|t| t.id.clone());
        chain.push(insert(
            store,
            &NewToken {
                parent_id: parent,
                ..new_token(u, &format!("level{i}"), &[])
            },
        ));
    }
    insert(
        store,
        &NewToken {
            parent_id: Some(root.id.clone()),
            ..new_token(u, "sibling", &[])
        },
    );
    let leaf = chain.last().expect("a leaf").clone();
    let mut expected: Vec<&str> = ids(&chain);
    expected.reverse();
    assert_eq!(
        ids(&store.token_chain(&leaf.id).expect("token_chain")),
        expected
    );
    assert_eq!(
        ids(&store.token_chain(&root.id).expect("token_chain")),
        [root.id.as_str()]
    );
    assert!(
        store
            .token_chain("no-such-token")
            .expect("token_chain")
            .is_empty()
    );
    let grant = store
        .token_by_hash("level3")
        .expect("token_by_hash")
        .expect("the leaf");
    assert_eq!(
        ids(&grant.ancestors),
        &expected[1..],
        "ancestors, nearest first"
    );

    let orphan = insert(
        store,
        &NewToken {
            parent_id: Some("00000000-0000-0000-0000-000000000000".into()),
            ..new_token(u, "orphan", &[])
        },
    );
    let lost = store.token_chain(&orphan.id).expect("token_chain");
    assert_eq!(ids(&lost), [orphan.id.as_str()]);
    assert!(lost[0].parent_id.is_some(), "the chain shows its loss");
}

/// Revoking a token (by UUID or display prefix, of its owner when one is named) revokes
/// everything it created, keeps the first revocation time, and leaves others alone.
pub fn access_revoking_a_token_revokes_what_it_created(store: &dyn Store) {
    let u = user(store, "u");
    let other = user(store, "other");
    let root = insert(store, &new_token(u, "root00", &[]));
    let child = insert(
        store,
        &NewToken {
            parent_id: Some(root.id.clone()),
            ..new_token(u, "child0", &[])
        },
    );
    let grandchild = insert(
        store,
        &NewToken {
            parent_id: Some(child.id.clone()),
            ..new_token(u, "grand0", &[])
        },
    );
    let sibling = insert(
        store,
        &NewToken {
            parent_id: Some(root.id.clone()),
            ..new_token(u, "sibl00", &[])
        },
    );
    let theirs = insert(store, &new_token(other, "theirs", &[]));
    let revoked = |id: &str| token(store, id).revoked_at;

    assert!(
        !store
            .revoke_token(&child.id, Some(other), 50)
            .expect("revoke_token"),
        "not the named user's token"
    );
    assert!(
        !store
            .revoke_token("no-such-token", None, 50)
            .expect("revoke_token")
    );
    assert_eq!(
        revoked(&child.id),
        None,
        "a refused revocation changes nothing"
    );

    assert!(
        store
            .revoke_token(&child.id, Some(u), 100)
            .expect("revoke_token")
    );
    assert_eq!(revoked(&child.id), Some(100));
    assert_eq!(
        revoked(&grandchild.id),
        Some(100),
        "what it created goes with it"
    );
    assert_eq!(revoked(&root.id), None, "its parent stays");
    assert_eq!(revoked(&sibling.id), None, "its sibling stays");

    assert!(
        store
            .revoke_token(&child.id, None, 200)
            .expect("revoke_token"),
        "an already revoked token still matches"
    );
    assert_eq!(
        revoked(&child.id),
        Some(100),
        "the first revocation time stays"
    );

    assert!(
        store
            .revoke_token(&root.prefix, Some(u), 300)
            .expect("revoke by prefix")
    );
    assert_eq!(revoked(&root.id), Some(300));
    assert_eq!(revoked(&sibling.id), Some(300));
    assert_eq!(revoked(&grandchild.id), Some(100));
    assert_eq!(revoked(&theirs.id), None, "another user's token stays");
    let grant = store
        .token_by_hash("grand0")
        .expect("token_by_hash")
        .expect("a revoked token is still found");
    assert_eq!(grant.token.revoked_at, Some(100));
    assert!(grant.ancestors.iter().all(|a| a.revoked_at.is_some()));
}

/// Collections are resolved by UUID or name within one space, in the keys' order; unknown
/// keys are skipped (needs `create_collection`).
pub fn access_collection_ids_resolve_uuids_and_names_in_order(store: &dyn Store) {
    let space = quarry_core::DEFAULT_SPACE;
    let notes = store
        .create_collection(space, "notes", CollectionKind::Folder, "/n", "**/*.md")
        .expect("create_collection");
    let docs = store
        .create_collection(space, "docs", CollectionKind::Folder, "/d", "**/*.md")
        .expect("create_collection");
    store
        .create_collection(
            "elsewhere",
            "hidden",
            CollectionKind::Folder,
            "/h",
            "**/*.md",
        )
        .expect("create_collection");
    let by_name = store
        .collection_ids(space, &["notes".into(), "docs".into()])
        .expect("collection_ids");
    assert_eq!(by_name.len(), 2, "{by_name:?}");
    assert_eq!((by_name[0].0, by_name[1].0), (notes.id, docs.id));
    let (notes_uid, docs_uid) = (by_name[0].1.clone(), by_name[1].1.clone());
    assert!(is_uuid(&notes_uid) && is_uuid(&docs_uid), "{by_name:?}");
    assert_ne!(notes_uid, docs_uid);
    let mixed = store
        .collection_ids(
            space,
            &[
                docs_uid.clone(),
                "missing".into(),
                "hidden".into(),
                "notes".into(),
            ],
        )
        .expect("collection_ids");
    assert_eq!(
        mixed,
        [(docs.id, docs_uid.clone()), (notes.id, notes_uid.clone())],
        "in the keys' order, unknown keys and other spaces' collections skipped"
    );
    assert!(
        store
            .collection_ids(space, &[])
            .expect("collection_ids")
            .is_empty()
    );
    assert!(
        store
            .collection_ids("elsewhere", &["notes".into(), notes_uid])
            .expect("collection_ids")
            .is_empty(),
        "a collection of another space"
    );
}

/// Several nodes creating one space or user name at once: one succeeds, every other gets
/// `Conflict`, and one record exists.
pub fn access_racing_creations_have_one_winner(store: &dyn Store) {
    const RACERS: usize = 6;
    let outcomes: Vec<(bool, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..RACERS)
            .map(|_| {
                s.spawn(|| {
                    let space = match store.create_space("contested", "") {
                        Ok(_) => true,
                        Err(Error::Conflict(_)) => false,
                        Err(e) => panic!("create_space: expected Ok or Conflict, got {e:?}"),
                    };
                    let user = match store.create_user("contested") {
                        Ok(_) => true,
                        Err(Error::Conflict(_)) => false,
                        Err(e) => panic!("create_user: expected Ok or Conflict, got {e:?}"),
                    };
                    (space, user)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a racer panicked"))
            .collect()
    });
    let spaces = outcomes.iter().filter(|(s, _)| *s).count();
    let users = outcomes.iter().filter(|(_, u)| *u).count();
    assert_eq!((spaces, users), (1, 1), "one winner each: {outcomes:?}");
    assert_eq!(store.spaces().expect("spaces").len(), 1);
    assert_eq!(store.users().expect("users").len(), 1);
}

/// Every change that can alter what a token resolves to moves the access generation (the
/// server's token cache trusts a token's rows only while it holds); a token's use does not.
pub fn access_every_change_a_token_resolves_through_moves_the_generation(store: &dyn Store) {
    let generation = || store.access_generation().expect("access_generation");
    let last = std::cell::Cell::new(generation());
    let moved = |what: &str| {
        let now = generation();
        assert!(
            now > last.get(),
            "{what} left the access generation at {now}"
        );
        last.set(now);
    };
    let team = space(store, "team");
    let other = space(store, "other");
    let ann = user(store, "ann");
    let bob = user(store, "bob");
    store.grant(ann, "team", Role::Editor).expect("grant");
    moved("a membership granted");
    store.grant(ann, "team", Role::Viewer).expect("grant");
    moved("a role changed");
    let token = insert(store, &new_token(ann, "h1", &[&team.id, &other.id]));
    moved("a token created");
    let before = generation();
    store.touch_token(&token.id, 1_000).expect("touch_token");
    assert_eq!(
        generation(),
        before,
        "a token's use moved the access generation"
    );
    last.set(before);
    store.create_group("team", "eng", "").expect("create_group");
    store
        .add_group_member("team", "eng", ann)
        .expect("add_group_member");
    moved("a group member added");
    store
        .remove_group_member("team", "eng", ann)
        .expect("remove_group_member");
    moved("a group member removed");
    store.delete_group("team", "eng").expect("delete_group");
    moved("a group deleted");
    assert!(
        store
            .revoke_token(&token.id, None, 2_000)
            .expect("revoke_token")
    );
    moved("a token revoked");
    store.grant(bob, "other", Role::Viewer).expect("grant");
    assert!(
        store
            .revoke_membership(bob, "other")
            .expect("revoke_membership")
    );
    moved("a membership revoked");
    store.delete_space("other").expect("delete_space");
    moved("a space deleted");
    store.delete_user(bob).expect("delete_user");
    moved("a user deleted");
}
