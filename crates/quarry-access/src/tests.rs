use std::sync::Arc;

use quarry_core::{Access, Error};
use quarry_store::{Role, SqliteStore, Store};

use super::*;

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
    let n = d.narrow(&p, &["b".into()]).unwrap();
    assert!(!n.scope.allows(a.collection_id) && !n.scope.allows(b.collection_id));
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
