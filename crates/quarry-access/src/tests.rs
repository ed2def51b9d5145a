use std::sync::Arc;

use quarry_core::{Access, Error, Result};
use quarry_store::{Role, Store};
use quarry_store_sqlite::SqliteStore;

use super::*;
use crate::directory::DAY_MS;
use crate::secrets::DISPLAY_PREFIX;

fn directory() -> (tempfile::TempDir, Directory, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("q.db")).unwrap());
    (dir, Directory::new(store.clone()), store)
}

fn token(d: &Directory, user: &str, spaces: &[&str]) -> IssuedToken {
    d.create_token(&TokenRequest {
        user: user.into(),
        label: "test".into(),
        spaces: spaces.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn tokens_are_random_prefixed_and_stored_only_as_hashes() {
    let (_dir, d, store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Editor).unwrap();
    let a = token(&d, "ann", &[]);
    let b = token(&d, "ann", &[]);
    assert!(is_token_shaped(&a.token), "{}", a.token);
    assert_ne!(a.token, b.token);
    assert!(a.token.starts_with(&a.record.prefix));
    // Only the hash finds it; nothing listed carries the secret.
    assert!(
        store
            .token_by_hash(&token_hash(&a.token))
            .unwrap()
            .is_some()
    );
    let listed = format!("{:?}", d.tokens(Some("ann")).unwrap());
    assert!(!listed.contains(&a.token[DISPLAY_PREFIX..]));
}

#[test]
fn authenticate_resolves_space_role_and_read_only() {
    let (_dir, d, _store) = directory();
    let team = d.create_space("team", "").unwrap();
    d.create_space("other", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Editor).unwrap();
    let t = token(&d, "ann", &["team"]);
    let p = d.authenticate(&t.token, None).unwrap().unwrap();
    assert_eq!(p.scope.space, "team");
    assert_eq!(p.space_id, team.id);
    assert_eq!(p.scope.access, Access::Write);
    // By UUID too.
    assert!(d.authenticate(&t.token, Some(&team.id)).unwrap().is_ok());
    // A space it may not use and one that does not exist fail alike.
    assert_eq!(
        d.authenticate(&t.token, Some("other"))
            .unwrap()
            .unwrap_err(),
        AuthFailure::SpaceForbidden
    );
    assert_eq!(
        d.authenticate(&t.token, Some("nope")).unwrap().unwrap_err(),
        AuthFailure::SpaceForbidden
    );
    let ro = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            read_only: true,
            ..Default::default()
        })
        .unwrap();
    let p = d.authenticate(&ro.token, None).unwrap().unwrap();
    assert_eq!(p.scope.access, Access::Read);
}

#[test]
fn revocation_expiry_and_lost_membership_take_effect_at_once() {
    let (_dir, d, _store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Viewer).unwrap();
    let t = token(&d, "ann", &[]);
    assert!(d.authenticate(&t.token, None).unwrap().is_ok());
    d.revoke_membership("ann", "team").unwrap();
    assert_eq!(
        d.authenticate(&t.token, None).unwrap().unwrap_err(),
        AuthFailure::SpaceForbidden
    );
    d.grant("ann", "team", Role::Viewer).unwrap();
    assert!(d.authenticate(&t.token, None).unwrap().is_ok());
    d.revoke_token(&t.record.id, Some("ann")).unwrap();
    assert_eq!(
        d.authenticate(&t.token, None).unwrap().unwrap_err(),
        AuthFailure::Revoked
    );
    let soon = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            expires_at: Some(quarry_core::now_millis() + 50),
            ..Default::default()
        })
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(80));
    assert_eq!(
        d.authenticate(&soon.token, None).unwrap().unwrap_err(),
        AuthFailure::Expired
    );
    // Wrong shapes and unknown tokens are one failure.
    for bad in [
        "",
        "qk_",
        "Bearer x",
        &t.token[..20],
        &format!("{}0", &t.token),
    ] {
        assert_eq!(
            d.authenticate(bad, None).unwrap().unwrap_err(),
            AuthFailure::Invalid
        );
    }
    let forged = format!("{TOKEN_PREFIX}{}", "0".repeat(64));
    assert_eq!(
        d.authenticate(&forged, None).unwrap().unwrap_err(),
        AuthFailure::Invalid
    );
}

#[test]
fn allow_lists_and_narrowing_never_widen() {
    let (_dir, d, store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Admin).unwrap();
    let a = store.create_knowledge_base("team", "a", "", None).unwrap();
    let b = store.create_knowledge_base("team", "b", "", None).unwrap();
    let t = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            collections: Some(vec!["a".into()]),
            ..Default::default()
        })
        .unwrap();
    let p = d.authenticate(&t.token, None).unwrap().unwrap();
    assert!(p.scope.allows(a.collection_id) && !p.scope.allows(b.collection_id));
    // Narrowing to one it cannot reach, or to none at all, is refused alike.
    for key in ["b", "nope"] {
        assert_eq!(
            d.narrow(&p, &[key.into()]).unwrap().unwrap_err(),
            AuthFailure::KnowledgeBaseNotFound(key.into())
        );
    }
    let n = d.narrow(&p, &["a".into()]).unwrap().unwrap();
    assert!(n.scope.allows(a.collection_id) && !n.scope.allows(b.collection_id));
    // A knowledge base outside the user's spaces cannot be put on a token.
    d.create_space("other", "").unwrap();
    store.create_knowledge_base("other", "c", "", None).unwrap();
    let e = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            collections: Some(vec!["c".into()]),
            ..Default::default()
        })
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
}

#[test]
fn names_are_checked_and_spaces_with_several_need_a_choice() {
    let (_dir, d, _store) = directory();
    assert!(d.create_space("Bad Name", "").is_err());
    assert!(
        d.create_space("550e8400-e29b-41d4-a716-446655440000", "")
            .is_err()
    );
    d.create_space("one", "").unwrap();
    d.create_space("two", "").unwrap();
    assert!(matches!(d.create_space("one", ""), Err(Error::Conflict(_))));
    d.create_user("bo").unwrap();
    assert!(
        d.create_token(&TokenRequest {
            user: "bo".into(),
            ..Default::default()
        })
        .is_err(),
        "no membership, no token"
    );
    d.grant("bo", "one", Role::Viewer).unwrap();
    d.grant("bo", "two", Role::Owner).unwrap();
    let t = token(&d, "bo", &[]);
    assert_eq!(
        d.authenticate(&t.token, None).unwrap().unwrap_err(),
        AuthFailure::SpaceRequired
    );
    let p = d.authenticate(&t.token, Some("two")).unwrap().unwrap();
    assert_eq!(p.scope.access, Access::Admin);
    // Removing a space drops it from tokens; a token left with none is revoked.
    d.delete_space("two").unwrap();
    assert!(d.authenticate(&t.token, None).unwrap().is_ok());
    d.delete_space("one").unwrap();
    assert_eq!(
        d.authenticate(&t.token, None).unwrap().unwrap_err(),
        AuthFailure::Revoked
    );
}

/// A principal for `user` through a token naming `spaces`.
fn user_actor(d: &Directory, user: &str, spaces: &[&str], read_only: bool) -> Principal {
    let token_spaces: Vec<String> = spaces.iter().map(|s| d.space(s).unwrap().id).collect();
    Principal {
        identity: Some(quarry_core::Identity {
            user_id: d.user(user).unwrap().id,
            user: user.into(),
            token_id: Some("t".into()),
            read_only,
            spaces: token_spaces.clone(),
            expires_at: None,
            tools: None,
            endpoint: None,
            root_token_id: Some("t".into()),
            session: false,
        }),
        scope: quarry_core::Scope {
            machine_owner: false,
            ..quarry_core::Scope::owner(spaces.first().copied().unwrap_or("default"))
        },
        space_id: token_spaces.first().cloned().unwrap_or_default(),
    }
}

/// The machine's owner.
fn machine() -> Principal {
    Principal::owner("default", "")
}

/// A space `team` with owner `olga`, admin `adam`, editor `eve`, viewer `vic`; `other`
/// where only `ozzy` is (owner); user `newbie` in no space.
fn managed() -> (tempfile::TempDir, Directory) {
    let (dir, d, _store) = directory();
    d.create_space("team", "the team").unwrap();
    d.create_space("other", "").unwrap();
    for (user, space, role) in [
        ("olga", "team", Role::Owner),
        ("adam", "team", Role::Admin),
        ("eve", "team", Role::Editor),
        ("vic", "team", Role::Viewer),
        ("ozzy", "other", Role::Owner),
    ] {
        d.create_user(user).unwrap();
        d.grant(user, space, role).unwrap();
    }
    d.create_user("newbie").unwrap();
    (dir, d)
}

#[test]
fn visibility_is_membership_and_token_and_the_rest_is_not_found() {
    let (_dir, d) = managed();
    let all = d.visible_spaces(&machine()).unwrap();
    let names: Vec<_> = all
        .iter()
        .map(|s| (s.name.as_str(), s.role, s.members))
        .collect();
    assert_eq!(names, [("other", Role::Owner, 1), ("team", Role::Owner, 4)]);
    let eve = user_actor(&d, "eve", &["team"], false);
    let seen = d.visible_spaces(&eve).unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].name.as_str(), seen[0].role),
        ("team", Role::Editor)
    );
    // A member whose token does not name the space does not see it, and a token naming a
    // space the user left does not show it either.
    d.grant("eve", "other", Role::Viewer).unwrap();
    assert_eq!(d.visible_spaces(&eve).unwrap().len(), 1);
    let both = user_actor(&d, "eve", &["team", "other"], false);
    assert_eq!(d.visible_spaces(&both).unwrap().len(), 2);
    d.revoke_membership("eve", "other").unwrap();
    assert_eq!(d.visible_spaces(&both).unwrap().len(), 1);
    // Someone else's space and a missing one: the same error.
    let other = d.space("other").unwrap();
    for key in ["other", other.id.as_str(), "nope"] {
        let e = d.members_as(&eve, key).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        assert_eq!(e.to_string(), format!("space '{key}' not found"));
        let e = d.check_delete_space(&eve, key).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        let e = d.set_member_as(&eve, key, "vic", Role::Viewer).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
    }
    // Any member lists the members, with when they joined.
    let vic = user_actor(&d, "vic", &["team"], true);
    let (_, members) = d.members_as(&vic, "team").unwrap();
    assert_eq!(members.len(), 4);
    assert!(members.iter().all(|m| m.joined_at > 0));
}

#[test]
fn member_management_follows_roles() {
    let (_dir, d) = managed();
    let forbidden = |r: Result<Member>| matches!(r, Err(Error::Forbidden(_)));
    let olga = user_actor(&d, "olga", &["team"], false);
    let adam = user_actor(&d, "adam", &["team"], false);
    let eve = user_actor(&d, "eve", &["team"], false);
    let olga_ro = user_actor(&d, "olga", &["team"], true);
    // Editors and viewers manage nobody; read-only tokens change nothing.
    assert!(forbidden(d.set_member_as(
        &eve,
        "team",
        "newbie",
        Role::Viewer
    )));
    assert!(forbidden(d.set_member_as(
        &olga_ro,
        "team",
        "newbie",
        Role::Viewer
    )));
    assert!(matches!(
        d.remove_member_as(&olga_ro, "team", "vic"),
        Err(Error::Forbidden(_))
    ));
    // An admin adds, changes and removes non-owners...
    let m = d
        .set_member_as(&adam, "team", "newbie", Role::Editor)
        .unwrap();
    assert_eq!((m.user.as_str(), m.role), ("newbie", Role::Editor));
    let joined = m.joined_at;
    let m = d
        .set_member_as(&adam, "team", "newbie", Role::Viewer)
        .unwrap();
    assert_eq!(
        (m.role, m.joined_at),
        (Role::Viewer, joined),
        "a role change keeps the date"
    );
    d.remove_member_as(&adam, "team", "newbie").unwrap();
    assert!(matches!(
        d.remove_member_as(&adam, "team", "newbie"),
        Err(Error::NotFound(_))
    ));
    // ...but never touches the owner role.
    assert!(forbidden(d.set_member_as(
        &adam,
        "team",
        "newbie",
        Role::Owner
    )));
    assert!(forbidden(d.set_member_as(
        &adam,
        "team",
        "olga",
        Role::Admin
    )));
    assert!(matches!(
        d.remove_member_as(&adam, "team", "olga"),
        Err(Error::Forbidden(_))
    ));
    // Unknown users are named.
    let e = d
        .set_member_as(&adam, "team", "ghost", Role::Viewer)
        .unwrap_err();
    assert_eq!(e.to_string(), "user 'ghost' not found");
    // The last owner stays.
    for r in [Role::Admin, Role::Viewer] {
        assert!(matches!(
            d.set_member_as(&olga, "team", "olga", r),
            Err(Error::Conflict(_))
        ));
    }
    assert!(matches!(
        d.remove_member_as(&olga, "team", "olga"),
        Err(Error::Conflict(_))
    ));
    assert!(matches!(
        d.remove_member_as(&machine(), "team", "olga"),
        Err(Error::Conflict(_))
    ));
    // With a second owner, either may step down.
    d.set_member_as(&olga, "team", "adam", Role::Owner).unwrap();
    d.set_member_as(&olga, "team", "olga", Role::Admin).unwrap();
    let (_, members) = d.members_as(&machine(), "team").unwrap();
    let owners: Vec<_> = members
        .iter()
        .filter(|m| m.role == Role::Owner)
        .map(|m| m.user.as_str())
        .collect();
    assert_eq!(owners, ["adam"]);
    assert_eq!(
        parse_role("Boss").unwrap_err().to_string(),
        "invalid role \"Boss\": use one of owner, admin, editor, viewer"
    );
}

#[test]
fn spaces_are_created_and_deleted_by_the_right_callers() {
    let (_dir, d) = managed();
    let eve = user_actor(&d, "eve", &["team"], false);
    let eve_ro = user_actor(&d, "eve", &["team"], true);
    assert!(matches!(
        d.create_space_as(&eve_ro, "lab", ""),
        Err(Error::Forbidden(_))
    ));
    let lab = d.create_space_as(&eve, "lab", "  a lab  ").unwrap();
    assert_eq!(lab.description, "a lab");
    // The creator owns it, but its token does not name it.
    let roles: Vec<_> = d
        .user_spaces("eve")
        .unwrap()
        .into_iter()
        .map(|s| (s.name, s.role))
        .collect();
    assert!(
        roles.contains(&("lab".to_owned(), Role::Owner)),
        "{roles:?}"
    );
    assert!(
        d.visible_spaces(&eve)
            .unwrap()
            .iter()
            .all(|s| s.name != "lab")
    );
    assert!(matches!(
        d.create_space_as(&eve, "lab", ""),
        Err(Error::Conflict(_))
    ));
    assert!(matches!(
        d.create_space_as(&eve, "Bad Name", ""),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        d.create_space_as(&eve, "x", &"d".repeat(1001)),
        Err(Error::InvalidInput(_))
    ));
    // The machine's owner creates ownerless spaces.
    let m = d.create_space_as(&machine(), "bare", "").unwrap();
    assert_eq!(d.members_as(&machine(), &m.id).unwrap().1.len(), 0);
    // Deleting: owners (through a token naming the space) and the machine's owner.
    let adam = user_actor(&d, "adam", &["team"], false);
    assert!(matches!(
        d.check_delete_space(&adam, "team"),
        Err(Error::Forbidden(_))
    ));
    let olga = user_actor(&d, "olga", &["team"], false);
    assert_eq!(d.check_delete_space(&olga, "team").unwrap().name, "team");
    let olga_ro = user_actor(&d, "olga", &["team"], true);
    assert!(matches!(
        d.check_delete_space(&olga_ro, "team"),
        Err(Error::Forbidden(_))
    ));
    let eve_lab = user_actor(&d, "eve", &["lab"], false);
    assert_eq!(d.check_delete_space(&eve_lab, "lab").unwrap().name, "lab");
    assert!(d.check_delete_space(&machine(), "bare").is_ok());
    d.default_space().unwrap();
    assert!(matches!(
        d.check_delete_space(&machine(), "default"),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn users_are_for_the_machine_owner() {
    let (_dir, d) = managed();
    let olga = user_actor(&d, "olga", &["team"], false);
    assert!(matches!(d.users_as(&olga), Err(Error::Forbidden(_))));
    assert!(matches!(
        d.create_user_as(&olga, "x"),
        Err(Error::Forbidden(_))
    ));
    d.create_user_as(&machine(), "zed").unwrap();
    let users = d.users_as(&machine()).unwrap();
    assert_eq!(users.len(), 7);
    let olga = users.iter().find(|u| u.name == "olga").unwrap();
    assert_eq!(olga.spaces.len(), 1);
    assert_eq!(
        (olga.spaces[0].space.as_str(), olga.spaces[0].role),
        ("team", Role::Owner)
    );
    assert!(matches!(
        d.create_user_as(&machine(), "zed"),
        Err(Error::Conflict(_))
    ));
}

#[test]
fn a_child_token_lives_and_reaches_no_further_than_its_parent() {
    let (_dir, d, store) = directory();
    d.create_space("team", "").unwrap();
    d.create_space("other", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Editor).unwrap();
    d.grant("ann", "other", Role::Editor).unwrap();
    let now = quarry_core::now_millis();
    let parent = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            spaces: vec!["team".into()],
            read_only: true,
            expires_at: Some(now + 60_000),
            ..Default::default()
        })
        .unwrap();
    let child_of = |req: TokenRequest| {
        d.create_token(&TokenRequest {
            user: "ann".into(),
            parent: Some(parent.record.id.clone()),
            ..req
        })
    };
    // No expiry asked: the parent's; a later one: refused; another space: refused.
    let child = child_of(TokenRequest {
        spaces: vec!["team".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(child.record.expires_at, parent.record.expires_at);
    assert!(child.record.read_only);
    assert_eq!(child.record.parent_id.as_deref(), Some(&*parent.record.id));
    let later = child_of(TokenRequest {
        spaces: vec!["team".into()],
        expires_at: Some(now + 120_000),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(later, Error::InvalidInput(_)), "{later}");
    let wider = child_of(TokenRequest {
        spaces: vec!["other".into()],
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(wider, Error::Forbidden(_)), "{wider}");
    let grandchild = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            spaces: vec!["team".into()],
            parent: Some(child.record.id.clone()),
            ..Default::default()
        })
        .unwrap();
    assert!(d.authenticate(&grandchild.token, None).unwrap().is_ok());
    // Revoking the parent revokes the whole line, and the chain is checked on each request.
    d.revoke_token(&parent.record.id, None).unwrap();
    for t in [&child, &grandchild] {
        assert_eq!(
            d.authenticate(&t.token, None).unwrap().unwrap_err(),
            AuthFailure::Revoked
        );
    }
    let listed = store.tokens(None).unwrap();
    assert!(listed.iter().all(|t| t.revoked_at.is_some()), "{listed:?}");
    // A revoked parent makes no children.
    let e = child_of(TokenRequest::default()).unwrap_err();
    assert!(matches!(e, Error::Forbidden(_)), "{e}");
}

#[test]
fn a_child_expires_with_its_parent_and_absurd_expiries_are_refused() {
    let (_dir, d, _store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Editor).unwrap();
    let now = quarry_core::now_millis();
    for at in [i64::MAX, now + (MAX_TOKEN_DAYS + 1) * DAY_MS] {
        let e = d
            .create_token(&TokenRequest {
                user: "ann".into(),
                expires_at: Some(at),
                ..Default::default()
            })
            .unwrap_err();
        assert!(e.to_string().contains("36500 days"), "{e}");
    }
    let parent = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            expires_at: Some(now + 100),
            ..Default::default()
        })
        .unwrap();
    let child = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            parent: Some(parent.record.id.clone()),
            ..Default::default()
        })
        .unwrap();
    let p = d.authenticate(&child.token, None).unwrap().unwrap();
    assert_eq!(p.identity.unwrap().expires_at, parent.record.expires_at);
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(
        d.authenticate(&child.token, None).unwrap().unwrap_err(),
        AuthFailure::Expired
    );
}

#[test]
fn a_tool_scope_is_checked_carried_and_narrowed_by_child_tokens() {
    let (_dir, d, _store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Editor).unwrap();
    let with = |tools: &[&str], parent: Option<String>| {
        d.create_token(&TokenRequest {
            user: "ann".into(),
            tools: Some(tools.iter().map(|t| (*t).to_owned()).collect()),
            parent,
            ..Default::default()
        })
    };
    // Bad entries are refused with the entry named; duplicates fold; nothing is not a scope.
    for bad in [
        "Time",
        "time.",
        ".x",
        "a b",
        "pkg.tool,other",
        "pkg.tool name",
        "",
    ] {
        let e = with(&[bad], None).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{bad}: {e}");
    }
    assert!(with(&[], None).is_err(), "an empty scope");
    let parent = with(&["time", "git.git_status", " time "], None).unwrap();
    assert_eq!(
        parent.record.tools,
        Some(vec!["time".to_owned(), "git.git_status".to_owned()])
    );
    // The principal carries it.
    let p = d.authenticate(&parent.token, None).unwrap().unwrap();
    assert!(p.may_use_tool("time", "time.convert_time", false));
    assert!(p.may_use_tool("git", "git.git_status", false));
    assert!(!p.may_use_tool("git", "git.git_log", true));
    assert!(!p.may_use_tool("memory", "memory.read_graph", true));
    // A child: none asked means the parent's; a tool of a package it has: fine; wider: refused.
    let id = Some(parent.record.id.clone());
    let child = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            parent: id.clone(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(child.record.tools, parent.record.tools);
    let narrower = with(&["time.convert_time"], id.clone()).unwrap();
    assert_eq!(
        narrower.record.tools,
        Some(vec!["time.convert_time".to_owned()])
    );
    for wider in [&["git"][..], &["git.git_log"], &["memory"]] {
        let e = with(wider, id.clone()).unwrap_err();
        assert!(matches!(e, Error::Forbidden(_)), "{wider:?}: {e}");
    }
    // Without a scope, every tool (a read-only token: read-only tools only).
    let all = token(&d, "ann", &["team"]);
    let p = d.authenticate(&all.token, None).unwrap().unwrap();
    assert!(p.may_use_tool("memory", "memory.create_entities", false));
}

#[test]
fn endpoint_tokens_carry_their_endpoint_to_the_principal_and_their_children() {
    let (_dir, d, _store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Editor).unwrap();
    let bound = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            endpoint: Some("ep-1".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(bound.record.endpoint.as_deref(), Some("ep-1"));
    let p = d.authenticate(&bound.token, None).unwrap().unwrap();
    assert_eq!(p.identity.unwrap().endpoint.as_deref(), Some("ep-1"));
    // A child keeps the endpoint, and cannot move to another one.
    let child = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            parent: Some(bound.record.id.clone()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(child.record.endpoint.as_deref(), Some("ep-1"));
    let other = d.create_token(&TokenRequest {
        user: "ann".into(),
        parent: Some(bound.record.id.clone()),
        endpoint: Some("ep-2".into()),
        ..Default::default()
    });
    assert!(matches!(other, Err(Error::Forbidden(_))), "{other:?}");
}

#[test]
fn only_refusals_that_guess_something_are_throttled() {
    use crate::AuthFailure;
    for f in [
        AuthFailure::Invalid,
        AuthFailure::Expired,
        AuthFailure::Revoked,
        AuthFailure::SpaceForbidden,
        AuthFailure::KnowledgeBaseNotFound("kb".into()),
        AuthFailure::Missing,
    ] {
        assert!(f.is_guess(), "{}", f.code());
    }
    for f in [AuthFailure::EndpointOnly, AuthFailure::SpaceRequired] {
        assert!(!f.is_guess(), "{}", f.code());
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn groups_are_listed_by_members_and_managed_by_admins() {
    let (_dir, d) = managed();
    let forbidden = |r: Result<Group>| matches!(r, Err(Error::Forbidden(_)));
    let adam = user_actor(&d, "adam", &["team"], false);
    let olga_ro = user_actor(&d, "olga", &["team"], true);
    let eve = user_actor(&d, "eve", &["team"], false);
    let vic = user_actor(&d, "vic", &["team"], true);
    // Editors, viewers and read-only tokens change nothing; an admin creates.
    assert!(forbidden(d.create_group_as(&eve, "team", "eng", "")));
    assert!(forbidden(d.create_group_as(&olga_ro, "team", "eng", "")));
    let eng = d
        .create_group_as(&adam, "team", " eng ", "  the engineers ")
        .unwrap();
    assert_eq!(
        (eng.name.as_str(), eng.description.as_str()),
        ("eng", "the engineers")
    );
    assert!(matches!(
        d.create_group_as(&adam, "team", "eng", ""),
        Err(Error::Conflict(_))
    ));
    // The machine's owner manages every space's groups.
    d.create_group_as(&machine(), "other", "eng", "").unwrap();
    // Members are added by admins, once each, and only members of the space.
    let g = d
        .add_group_members_as(&adam, "team", "eng", &strings(&["vic", "eve", "vic"]))
        .unwrap();
    assert_eq!(g.members, ["eve", "vic"]);
    let g = d
        .add_group_members_as(&adam, "team", &eng.id, &strings(&["eve"]))
        .unwrap();
    assert_eq!(g.members, ["eve", "vic"], "by UUID, and idempotent");
    assert!(forbidden(d.add_group_members_as(
        &eve,
        "team",
        "eng",
        &strings(&["olga"])
    )));
    assert!(forbidden(d.add_group_members_as(
        &olga_ro,
        "team",
        "eng",
        &strings(&["olga"])
    )));
    let e = d
        .add_group_members_as(&adam, "team", "eng", &strings(&["olga", "ozzy"]))
        .unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "user 'ozzy' is not a member of space 'team': make them a member of the space first"
    );
    assert_eq!(
        d.group_as(&adam, "team", "eng").unwrap().members,
        ["eve", "vic"],
        "every user is checked before any is added"
    );
    let e = d
        .add_group_members_as(&adam, "team", "eng", &strings(&["ghost"]))
        .unwrap_err();
    assert_eq!(e.to_string(), "user 'ghost' not found");
    let e = d
        .add_group_members_as(&adam, "team", "nope", &strings(&["eve"]))
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    assert_eq!(e.to_string(), "group 'nope' not found in space 'team'");
    assert!(matches!(
        d.add_group_members_as(&adam, "team", "eng", &[]),
        Err(Error::InvalidInput(_))
    ));
    // Any member lists the groups, a read-only token too; another space is not found.
    let (space, groups) = d.groups_as(&vic, "team").unwrap();
    assert_eq!(space.name, "team");
    let listed: Vec<_> = groups
        .iter()
        .map(|g| (g.name.as_str(), g.members.clone()))
        .collect();
    assert_eq!(listed, [("eng", strings(&["eve", "vic"]))]);
    for key in ["other", "nope"] {
        let e = d.groups_as(&eve, key).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        assert!(matches!(
            d.create_group_as(&adam, key, "x", ""),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            d.delete_group_as(&adam, key, "eng"),
            Err(Error::NotFound(_))
        ));
    }
    // Removing: admins only, a user not in the group is not found.
    assert!(forbidden(d.remove_group_members_as(
        &eve,
        "team",
        "eng",
        &strings(&["vic"])
    )));
    let e = d
        .remove_group_members_as(&adam, "team", "eng", &strings(&["vic", "olga"]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "user 'olga' is not in group 'eng' of space 'team'"
    );
    let g = d
        .remove_group_members_as(&adam, "team", "eng", &strings(&["vic"]))
        .unwrap();
    assert_eq!(g.members, ["eve"]);
    // Deleting.
    assert!(forbidden(d.delete_group_as(&eve, "team", "eng")));
    assert!(forbidden(d.delete_group_as(&olga_ro, "team", "eng")));
    let gone = d.delete_group_as(&adam, "team", "eng").unwrap();
    assert_eq!(gone.members, ["eve"]);
    assert!(matches!(
        d.delete_group_as(&adam, "team", "eng"),
        Err(Error::NotFound(_))
    ));
    assert!(d.groups_as(&vic, "team").unwrap().1.is_empty());
    assert_eq!(d.groups_as(&machine(), "other").unwrap().1.len(), 1);
}

#[test]
fn group_names_and_descriptions_are_checked() {
    let (_dir, d) = managed();
    let admin = machine();
    for good in ["eng", "Eng-Team_2.0", "a", &"x".repeat(64)] {
        d.create_group_as(&admin, "team", good, "").unwrap();
    }
    let uuid = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
    for bad in [
        "",
        "  ",
        "a b",
        "-eng",
        ".hidden",
        "..",
        "eng/ops",
        "é",
        "group:eng",
        &"x".repeat(65),
        uuid,
    ] {
        let e = d.create_group_as(&admin, "team", bad, "").unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{bad:?}: {e}");
    }
    assert!(
        d.create_group_as(&admin, "team", "ops", &"d".repeat(1001))
            .is_err()
    );
    assert!(d.create_group_as(&admin, "team", "ops", "a\u{7}b").is_err());
    d.create_group_as(&admin, "team", "ops", "line one\nline two")
        .unwrap();
    // Names are case-sensitive: `Eng-Team_2.0` and `eng-team_2.0` are two groups.
    d.create_group_as(&admin, "team", "eng-team_2.0", "")
        .unwrap();
}

#[test]
fn a_token_reads_as_its_user_and_groups_unless_its_role_reads_everything() {
    let (_dir, d) = managed();
    let admin = machine();
    d.create_group_as(&admin, "team", "eng", "").unwrap();
    d.create_group_as(&admin, "team", "hr", "").unwrap();
    d.create_group_as(&admin, "other", "eng-other", "").unwrap();
    d.add_group_members_as(&admin, "team", "eng", &strings(&["vic", "eve", "adam"]))
        .unwrap();
    d.add_group_members_as(&admin, "team", "hr", &strings(&["vic"]))
        .unwrap();
    d.grant("vic", "other", Role::Viewer).unwrap();
    d.add_group_members_as(&admin, "other", "eng-other", &strings(&["vic"]))
        .unwrap();
    let readers = |user: &str, space: &str, read_only: bool| {
        let t = d
            .create_token(&TokenRequest {
                user: user.into(),
                spaces: vec![space.into()],
                read_only,
                ..Default::default()
            })
            .unwrap();
        d.authenticate(&t.token, None)
            .unwrap()
            .unwrap()
            .scope
            .readers
            .map(|r| r.to_vec())
    };
    assert_eq!(
        readers("vic", "team", false),
        Some(strings(&["user:vic", "group:eng", "group:hr"])),
        "only the groups of the token's space"
    );
    assert_eq!(
        readers("vic", "other", true),
        Some(strings(&["user:vic", "group:eng-other"]))
    );
    assert_eq!(
        readers("eve", "team", false),
        Some(strings(&["user:eve", "group:eng"]))
    );
    d.create_user("solo").unwrap();
    d.grant("solo", "team", Role::Editor).unwrap();
    assert_eq!(
        readers("solo", "team", false),
        Some(strings(&["user:solo"]))
    );
    // Admins and owners read everything, through a read-only token too.
    assert_eq!(readers("adam", "team", false), None);
    assert_eq!(readers("adam", "team", true), None);
    assert_eq!(readers("olga", "team", true), None);
    // Narrowing by ?kb= keeps the reader keys.
    let t = token(&d, "eve", &["team"]);
    let p = d.authenticate(&t.token, None).unwrap().unwrap();
    let narrowed = d.narrow(&p, &[]).unwrap().unwrap();
    assert_eq!(narrowed.scope.readers, p.scope.readers);
    // A change of groups or role shows on the very next request.
    d.remove_group_members_as(&admin, "team", "eng", &strings(&["eve"]))
        .unwrap();
    let p = d.authenticate(&t.token, None).unwrap().unwrap();
    assert_eq!(
        p.scope.readers.map(|r| r.to_vec()),
        Some(strings(&["user:eve"]))
    );
    d.grant("eve", "team", Role::Admin).unwrap();
    let p = d.authenticate(&t.token, None).unwrap().unwrap();
    assert!(p.scope.readers.is_none());
    // The same keys without a token.
    assert_eq!(
        d.reader_keys("team", "vic").unwrap().map(|r| r.to_vec()),
        Some(strings(&["user:vic", "group:eng", "group:hr"]))
    );
    assert!(d.reader_keys("team", "olga").unwrap().is_none());
    assert!(matches!(
        d.reader_keys("team", "ozzy"),
        Err(Error::NotFound(_))
    ));
    // The machine's owner reads everything.
    assert!(
        owner_principal(&d.space("team").unwrap())
            .scope
            .readers
            .is_none()
    );
}

/// The store of one node, counting the token lookups that reach it.
struct CountingStore {
    inner: Arc<dyn Store>,
    token_reads: std::sync::atomic::AtomicUsize,
}

mod counting {
    use std::sync::atomic::Ordering;

    use quarry_core::Result;
    use quarry_store::{
        AccessStore, Group, Membership, NewToken, Role, Space, TokenGrant, TokenRecord, User,
    };

    impl quarry_store::SignInStore for super::CountingStore {
        fn put_sign_in_request(&self, r: &quarry_store::SignInRequest) -> Result<()> {
            self.inner.put_sign_in_request(r)
        }
        fn take_sign_in_request(
            &self,
            state_hash: &str,
            now: i64,
        ) -> Result<Option<quarry_store::SignInRequest>> {
            self.inner.take_sign_in_request(state_hash, now)
        }
        fn identity_user(&self, issuer: &str, subject: &str) -> Result<Option<(i64, String)>> {
            self.inner.identity_user(issuer, subject)
        }
        fn link_identity(
            &self,
            issuer: &str,
            subject: &str,
            user_row: i64,
            email: Option<&str>,
            now: i64,
        ) -> Result<()> {
            self.inner
                .link_identity(issuer, subject, user_row, email, now)
        }
        fn identities(&self) -> Result<Vec<quarry_store::LinkedIdentity>> {
            self.inner.identities()
        }
        fn put_web_session(&self, s: &quarry_store::WebSession) -> Result<()> {
            self.inner.put_web_session(s)
        }
        fn web_session(&self, token_id: &str) -> Result<Option<quarry_store::WebSession>> {
            self.inner.web_session(token_id)
        }
    }

    impl AccessStore for super::CountingStore {
        fn create_space(&self, name: &str, description: &str) -> Result<Space> {
            self.inner.create_space(name, description)
        }
        fn spaces(&self) -> Result<Vec<Space>> {
            self.inner.spaces()
        }
        fn space(&self, key: &str) -> Result<Option<Space>> {
            self.inner.space(key)
        }
        fn delete_space(&self, name: &str) -> Result<()> {
            self.inner.delete_space(name)
        }
        fn create_user(&self, name: &str) -> Result<User> {
            self.inner.create_user(name)
        }
        fn users(&self) -> Result<Vec<User>> {
            self.inner.users()
        }
        fn user(&self, key: &str) -> Result<Option<(i64, User)>> {
            self.inner.user(key)
        }
        fn delete_user(&self, user_row: i64) -> Result<()> {
            self.inner.delete_user(user_row)
        }
        fn grant(&self, user_row: i64, space: &str, role: Role) -> Result<()> {
            self.inner.grant(user_row, space, role)
        }
        fn revoke_membership(&self, user_row: i64, space: &str) -> Result<bool> {
            self.inner.revoke_membership(user_row, space)
        }
        fn memberships(&self, user_row: Option<i64>) -> Result<Vec<Membership>> {
            self.inner.memberships(user_row)
        }
        fn insert_token(&self, new: &NewToken) -> Result<TokenRecord> {
            self.inner.insert_token(new)
        }
        fn tokens(&self, user_row: Option<i64>) -> Result<Vec<TokenRecord>> {
            self.inner.tokens(user_row)
        }
        fn token_by_hash(&self, hash: &str) -> Result<Option<TokenGrant>> {
            self.token_reads.fetch_add(1, Ordering::Relaxed);
            self.inner.token_by_hash(hash)
        }
        fn token_chain(&self, id: &str) -> Result<Vec<TokenRecord>> {
            self.inner.token_chain(id)
        }
        fn revoke_token(&self, key: &str, user_row: Option<i64>, at: i64) -> Result<bool> {
            self.inner.revoke_token(key, user_row, at)
        }
        fn touch_token(&self, id: &str, at: i64) -> Result<()> {
            self.inner.touch_token(id, at)
        }
        fn access_generation(&self) -> Result<i64> {
            self.inner.access_generation()
        }
        fn create_group(&self, space: &str, name: &str, description: &str) -> Result<Group> {
            self.inner.create_group(space, name, description)
        }
        fn groups(&self, space: &str) -> Result<Vec<Group>> {
            self.inner.groups(space)
        }
        fn group(&self, space: &str, key: &str) -> Result<Option<Group>> {
            self.inner.group(space, key)
        }
        fn delete_group(&self, space: &str, name: &str) -> Result<bool> {
            self.inner.delete_group(space, name)
        }
        fn add_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool> {
            self.inner.add_group_member(space, group, user_row)
        }
        fn remove_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool> {
            self.inner.remove_group_member(space, group, user_row)
        }
        fn user_groups(&self, space: &str, user_row: i64) -> Result<Vec<String>> {
            self.inner.user_groups(space, user_row)
        }
        fn collection_ids(&self, space: &str, keys: &[String]) -> Result<Vec<(i64, String)>> {
            self.inner.collection_ids(space, keys)
        }
    }
}

impl CountingStore {
    fn node(store: &Arc<dyn Store>) -> (Arc<CountingStore>, Directory) {
        let counting = Arc::new(CountingStore {
            inner: store.clone(),
            token_reads: Default::default(),
        });
        (counting.clone(), Directory::new(counting))
    }

    fn reads(&self) -> usize {
        self.token_reads.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[test]
fn a_kept_token_answers_without_reading_it_until_a_change_anywhere_makes_it_read_again() {
    let (_dir, admin, store) = directory();
    admin.create_space("team", "").unwrap();
    admin.create_space("lab", "").unwrap();
    admin.create_user("ann").unwrap();
    admin.grant("ann", "team", Role::Editor).unwrap();
    admin.grant("ann", "lab", Role::Viewer).unwrap();
    let t = token(&admin, "ann", &["team", "lab"]);
    // Two nodes over one store, each with its own cache.
    let (a_store, a) = CountingStore::node(&store);
    let (b_store, b) = CountingStore::node(&store);
    for _ in 0..5 {
        assert_eq!(
            a.authenticate(&t.token, None).unwrap().err(),
            Some(AuthFailure::SpaceRequired)
        );
        assert_eq!(
            b.authenticate(&t.token, Some("lab"))
                .unwrap()
                .unwrap()
                .scope
                .access,
            Access::Read
        );
    }
    assert_eq!(
        (a_store.reads(), b_store.reads()),
        (1, 1),
        "kept tokens are read once"
    );
    // Unknown tokens are kept too (a guess costs one read per generation).
    let bogus = format!("qk_{}", "0".repeat(64));
    for _ in 0..3 {
        assert_eq!(
            a.authenticate(&bogus, None).unwrap().err(),
            Some(AuthFailure::Invalid)
        );
    }
    assert_eq!(a_store.reads(), 2);
    // A membership revoked elsewhere: both read again; the token's one space is now implied.
    admin.revoke_membership("ann", "lab").unwrap();
    assert_eq!(
        a.authenticate(&t.token, None).unwrap().unwrap().scope.space,
        "team"
    );
    assert_eq!(
        b.authenticate(&t.token, Some("lab")).unwrap().err(),
        Some(AuthFailure::SpaceForbidden)
    );
    assert_eq!((a_store.reads(), b_store.reads()), (3, 2));
    admin.grant("ann", "lab", Role::Viewer).unwrap();
    // A role changed by node A shows on node B's next request.
    a.grant("ann", "lab", Role::Editor).unwrap();
    assert_eq!(
        b.authenticate(&t.token, Some("lab"))
            .unwrap()
            .unwrap()
            .scope
            .access,
        Access::Write
    );
    // Revoked on node B: node A's next request is refused, though A kept the token.
    assert!(a.authenticate(&t.token, Some("team")).unwrap().is_ok());
    b.revoke_token(&t.record.id, None).unwrap();
    assert_eq!(
        a.authenticate(&t.token, Some("team")).unwrap().err(),
        Some(AuthFailure::Revoked)
    );
    assert_eq!(
        b.authenticate(&t.token, None).unwrap().err(),
        Some(AuthFailure::Revoked)
    );
}

#[test]
fn a_kept_token_still_expires_on_time() {
    let (_dir, d, _store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Editor).unwrap();
    let soon = quarry_core::now_millis() + 300;
    let t = d
        .create_token(&TokenRequest {
            user: "ann".into(),
            label: "short".into(),
            expires_at: Some(soon),
            ..Default::default()
        })
        .unwrap();
    assert!(d.authenticate(&t.token, None).unwrap().is_ok());
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(
        d.authenticate(&t.token, None).unwrap().err(),
        Some(AuthFailure::Expired)
    );
}

/// Issue 65: only a token made with the management scope, whose whole chain has it and that
/// nothing narrows, manages governance; a narrowed one cannot be made, a child of an
/// unmanaging token cannot gain it, and a connector's (OAuth) child never has it.
#[test]
fn only_unnarrowed_management_chains_manage() {
    let (_dir, d, _store) = directory();
    d.create_space("team", "").unwrap();
    d.create_user("ann").unwrap();
    d.grant("ann", "team", Role::Owner).unwrap();
    let make = |req: TokenRequest| {
        d.create_token(&TokenRequest {
            user: "ann".into(),
            spaces: vec!["team".into()],
            ..req
        })
    };
    let manages = |t: &IssuedToken| {
        d.authenticate(&t.token, Some("team"))
            .unwrap()
            .unwrap()
            .scope
            .manage
    };
    let person = make(TokenRequest {
        manage: true,
        ..Default::default()
    })
    .unwrap();
    let agent = make(TokenRequest::default()).unwrap();
    assert!(manages(&person) && !manages(&agent));
    for narrowed in [
        TokenRequest {
            tools: Some(vec!["time".into()]),
            ..Default::default()
        },
        TokenRequest {
            collections: Some(vec![]),
            ..Default::default()
        },
    ] {
        let e = make(TokenRequest {
            manage: true,
            ..narrowed
        })
        .unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    }
    // A child of the agent's token cannot gain it; one of the person's may, if asked.
    let e = make(TokenRequest {
        manage: true,
        parent: Some(agent.record.id.clone()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(e, Error::ManagementForbidden(_)), "{e}");
    let script = make(TokenRequest {
        manage: true,
        parent: Some(person.record.id.clone()),
        ..Default::default()
    })
    .unwrap();
    let plain_child = make(TokenRequest {
        parent: Some(person.record.id.clone()),
        ..Default::default()
    })
    .unwrap();
    assert!(manages(&script) && !manages(&plain_child));
    // A narrowed child of a managing token: not made with it, so it does not manage.
    let narrowed_child = make(TokenRequest {
        tools: Some(vec!["time".into()]),
        parent: Some(person.record.id.clone()),
        ..Default::default()
    })
    .unwrap();
    assert!(!manages(&narrowed_child));
    // What the OAuth server issues under a grant.
    let connector = d
        .create_child_token(&person.record.id, "OAuth: client", 60_000)
        .unwrap();
    assert!(!manages(&connector));
    // `?kb=` narrowing takes it away too.
    let p = d
        .authenticate(&person.token, Some("team"))
        .unwrap()
        .unwrap();
    assert!(!p.scope.narrowed(&[]).manage);
    // The machine's owner always manages.
    assert!(owner_principal(&d.space("team").unwrap()).scope.manage);
}

fn person(subject: &str, name: &str, email: &str, groups: &[&str]) -> Person {
    Person {
        issuer: "https://idp.example".into(),
        subject: subject.into(),
        preferred_name: Some(name.into()),
        email: Some(email.into()),
        groups: strings(groups),
    }
}

fn rule(group: &str, space: &str, role: Option<Role>, readers: &[&str]) -> GroupRule {
    GroupRule {
        group: group.into(),
        space: space.into(),
        role,
        reader_groups: strings(readers),
    }
}

/// A first sign-in makes a user and a session; later ones find the user by issuer and
/// subject only; provider groups decide roles and reader groups in the spaces the rules
/// name, and leave the others alone; an account in no space is refused.
#[test]
fn people_sign_in_by_subject_and_their_groups_decide_mapped_spaces() {
    let (_dir, d, store) = directory();
    d.create_space("eng", "").unwrap();
    d.create_space("hr", "").unwrap();
    d.create_space("side", "").unwrap();
    let rules = [
        rule("engineers", "eng", Some(Role::Editor), &["engineers"]),
        rule("leads", "eng", Some(Role::Admin), &[]),
        rule("people-ops", "hr", Some(Role::Viewer), &["hr-staff"]),
        rule("payroll", "hr", None, &["payroll"]),
        // A space that does not exist (yet): the rule waits for it.
        rule("engineers", "future", Some(Role::Admin), &["engineers"]),
    ];
    let hour = 3_600_000;

    let ann = person(
        "s-1",
        "Ann",
        "ann@example.com",
        &["engineers", "people-ops"],
    );
    let first = d.sign_in_person(&ann, &rules, "web session", hour).unwrap();
    assert!(first.created);
    assert_eq!(first.user.name, "ann");
    assert!(first.session.token.starts_with(SESSION_PREFIX));
    assert!(is_session_token(&first.session.token));
    assert!(!is_session_token(&token(&d, "ann", &[]).token));
    let roles = |user: &str| -> Vec<(String, Role)> {
        let mut v: Vec<_> = d
            .memberships(Some(user))
            .unwrap()
            .into_iter()
            .map(|m| (m.space, m.role))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(
        roles("ann"),
        vec![("eng".into(), Role::Editor), ("hr".into(), Role::Viewer)]
    );
    // The session reaches both spaces, with the person's role, and expires.
    let p = d
        .authenticate(&first.session.token, Some("hr"))
        .unwrap()
        .unwrap();
    assert_eq!(p.scope.access, Access::Read);
    assert!(p.identity.unwrap().expires_at.is_some());
    let readers = p_readers(&d, &first.session.token, "hr");
    assert!(
        readers.contains(&"group:hr-staff".to_string()),
        "{readers:?}"
    );

    // An owner's own grant in a space no rule names stays.
    d.grant("ann", "side", Role::Viewer).unwrap();
    // Another account claiming ann's e-mail is someone else.
    let impostor = person("s-2", "Ann", "ann@example.com", &["engineers"]);
    let other = d
        .sign_in_person(&impostor, &rules, "web session", hour)
        .unwrap();
    assert!(other.created);
    assert_eq!(other.user.name, "ann-2");

    // Ann leaves people-ops and joins leads and payroll: hr is left, eng is admin.
    let ann = person(
        "s-1",
        "Ann",
        "ann@new.example",
        &["engineers", "leads", "payroll"],
    );
    let again = d.sign_in_person(&ann, &rules, "web session", hour).unwrap();
    assert!(!again.created);
    assert_eq!(again.user.id, first.user.id);
    assert_eq!(
        roles("ann"),
        vec![("eng".into(), Role::Admin), ("side".into(), Role::Viewer)]
    );
    // payroll gives a reader group only where the person has a role: not in hr now.
    assert!(
        store
            .groups("hr")
            .unwrap()
            .iter()
            .all(|g| g.members.is_empty())
    );
    let eng = store.groups("eng").unwrap();
    assert_eq!(eng.len(), 1);
    // The impostor is in engineers too (as another user).
    assert_eq!(eng[0].members, strings(&["ann", "ann-2"]));

    // Leaving engineers drops the reader group; with no group at all, side remains.
    let ann = person("s-1", "Ann", "ann@new.example", &[]);
    d.sign_in_person(&ann, &rules, "web session", hour).unwrap();
    assert_eq!(roles("ann"), vec![("side".into(), Role::Viewer)]);
    assert_eq!(store.groups("eng").unwrap()[0].members, strings(&["ann-2"]));

    // An account the rules give nothing, with no grant, is refused in words.
    let nobody = person("s-3", "Carl", "carl@example.com", &["guests"]);
    let e = d
        .sign_in_person(&nobody, &rules, "web session", hour)
        .unwrap_err();
    assert!(matches!(e, Error::Forbidden(_)), "{e}");
    assert!(e.to_string().contains("not a member of any space"), "{e}");

    let linked = store.identities().unwrap();
    assert_eq!(linked.len(), 3);
    assert_eq!(linked[0].email.as_deref(), Some("ann@new.example"));
}

fn p_readers(d: &Directory, token: &str, space: &str) -> Vec<String> {
    d.authenticate(token, Some(space))
        .unwrap()
        .unwrap()
        .scope
        .readers
        .map(|r| r.to_vec())
        .unwrap_or_default()
}

/// A space's admins and owners see and end its members' web sessions; nobody else does,
/// and a session of someone outside the space is "not found" there.
#[test]
fn space_admins_see_and_end_their_members_sessions() {
    let (_dir, d) = managed();
    let sign_in = |user: &str| {
        let p = Person {
            issuer: "https://idp".into(),
            subject: format!("sub-{user}"),
            preferred_name: Some(user.into()),
            email: None,
            groups: vec![],
        };
        // The person's user exists already (an owner added it): link it first.
        let (row, _) = d.user_row(user).unwrap();
        d.store
            .link_identity("https://idp", &p.subject, row, None, 1)
            .unwrap();
        d.sign_in_person(&p, &[], "web session: test", 3_600_000)
            .unwrap()
    };
    let eve = sign_in("eve");
    let ozzy = sign_in("ozzy");
    // A plain token is no session.
    token(&d, "vic", &["team"]);
    let adam = user_actor(&d, "adam", &["team"], false);
    let (_, seen) = d.sessions_as(&adam, "team").unwrap();
    assert_eq!(
        seen.iter().map(|s| s.user.as_str()).collect::<Vec<_>>(),
        vec!["eve"]
    );
    assert_eq!(seen[0].id, eve.session.record.id);
    // An editor may not; a read-only admin token may not.
    let eve_actor = user_actor(&d, "eve", &["team"], false);
    assert!(matches!(
        d.sessions_as(&eve_actor, "team"),
        Err(Error::Forbidden(_))
    ));
    assert!(
        d.sessions_as(&user_actor(&d, "adam", &["team"], true), "team")
            .is_err()
    );
    // ozzy's session is not team's to end.
    assert!(matches!(
        d.revoke_session_as(&adam, "team", &ozzy.session.record.id),
        Err(Error::NotFound(_))
    ));
    d.revoke_session_as(&adam, "team", &eve.session.record.id)
        .unwrap();
    assert!(d.sessions_as(&adam, "team").unwrap().1.is_empty());
    assert_eq!(
        d.authenticate(&eve.session.token, Some("team"))
            .unwrap()
            .unwrap_err(),
        AuthFailure::Revoked
    );
    assert!(
        d.authenticate(&ozzy.session.token, Some("other"))
            .unwrap()
            .is_ok()
    );
}
