//! The OAuth authorization server's state: clients and grants round-trip, a code or refresh
//! token is redeemed once (a replay is told apart from an unknown secret), concurrent
//! redeemers never both win, and pruning drops what expired.

use crate::{
    NewToken, OAuthClientRow, OAuthGrantRow, OAuthSecretKind, OAuthSecretRow, Redeemed, Store,
};

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_oauth {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::oauth];
            oauth_clients_and_grants_round_trip,
            oauth_secrets_are_redeemed_once,
            oauth_concurrent_redeemers_never_both_win,
            oauth_prune_drops_expired_secrets_and_grant_tokens,
        );
    };
}

#[doc(hidden)]
pub use __conformance_oauth;

fn secret(hash: &str, kind: OAuthSecretKind, expires_at: i64) -> OAuthSecretRow {
    OAuthSecretRow {
        hash: hash.into(),
        kind,
        client_id: "client-1".into(),
        grant_id: "grant-1".into(),
        redirect_uri: "http://127.0.0.1:9/cb".into(),
        code_challenge: "c".repeat(43),
        resource: "http://127.0.0.1:9/mcp".into(),
        scope: "read write".into(),
        expires_at,
        used_at: None,
    }
}

/// Clients and grants are stored and read back; a client id is unique.
pub fn oauth_clients_and_grants_round_trip(store: &dyn Store) {
    let client = OAuthClientRow {
        id: "client-1".into(),
        secret_hash: Some("ab".repeat(32)),
        name: "Inspector".into(),
        redirect_uris: vec!["http://127.0.0.1:6274/cb".into(), "app.example:/cb".into()],
        metadata: r#"{"client_name":"Inspector"}"#.into(),
        created_at: 1_000,
    };
    store.insert_oauth_client(&client).expect("insert client");
    assert_eq!(
        store.oauth_client("client-1").expect("client"),
        Some(client.clone())
    );
    assert_eq!(store.oauth_client("client-2").expect("client"), None);
    assert!(
        store.insert_oauth_client(&client).is_err(),
        "a client id is registered once"
    );
    let grant = OAuthGrantRow {
        grant_id: "grant-1".into(),
        client_id: "client-1".into(),
        created_at: 2_000,
    };
    store.insert_oauth_grant(&grant).expect("insert grant");
    assert_eq!(store.oauth_grant("grant-1").expect("grant"), Some(grant));
    assert_eq!(store.oauth_grant("grant-2").expect("grant"), None);
}

/// A secret is redeemed once; a second try is a replay, an expired one is unknown.
pub fn oauth_secrets_are_redeemed_once(store: &dyn Store) {
    let code = secret("h-code", OAuthSecretKind::Code, 10_000);
    store.insert_oauth_secret(&code).expect("insert code");
    assert_eq!(
        store
            .oauth_secret("h-code", OAuthSecretKind::Code)
            .expect("read"),
        Some(code.clone())
    );
    // The kind is part of the key: a code is no refresh token.
    assert_eq!(
        store
            .redeem_oauth_secret("h-code", OAuthSecretKind::Refresh, 5_000)
            .expect("redeem"),
        Redeemed::Unknown
    );
    match store
        .redeem_oauth_secret("h-code", OAuthSecretKind::Code, 5_000)
        .expect("redeem")
    {
        Redeemed::Fresh(row) => {
            assert_eq!(row.used_at, Some(5_000));
            assert_eq!(row.grant_id, "grant-1");
            assert_eq!(row.code_challenge, code.code_challenge);
        }
        other => panic!("first redemption: {other:?}"),
    }
    assert!(
        matches!(
            store
                .redeem_oauth_secret("h-code", OAuthSecretKind::Code, 5_001)
                .expect("redeem"),
            Redeemed::Reused(ref r) if r.used_at == Some(5_000)
        ),
        "a second redemption is a replay"
    );
    // Expired and unknown secrets are alike.
    store
        .insert_oauth_secret(&secret("h-old", OAuthSecretKind::Refresh, 4_000))
        .expect("insert");
    assert_eq!(
        store
            .redeem_oauth_secret("h-old", OAuthSecretKind::Refresh, 4_000)
            .expect("redeem"),
        Redeemed::Unknown
    );
    assert_eq!(
        store
            .redeem_oauth_secret("h-none", OAuthSecretKind::Refresh, 1)
            .expect("redeem"),
        Redeemed::Unknown
    );
}

/// Four threads redeeming the same secrets: each is won exactly once.
pub fn oauth_concurrent_redeemers_never_both_win(store: &dyn Store) {
    for i in 0..10 {
        store
            .insert_oauth_secret(&secret(
                &format!("h-{i}"),
                OAuthSecretKind::Refresh,
                1_000_000,
            ))
            .expect("insert");
    }
    let wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..10)
                        .filter(|i| {
                            matches!(
                                store
                                    .redeem_oauth_secret(
                                        &format!("h-{i}"),
                                        OAuthSecretKind::Refresh,
                                        10
                                    )
                                    .expect("redeem"),
                                Redeemed::Fresh(_)
                            )
                        })
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    assert_eq!(wins, 10, "each secret redeemed by exactly one taker");
}

/// Pruning drops expired secrets and expired tokens under a grant, nothing else.
pub fn oauth_prune_drops_expired_secrets_and_grant_tokens(store: &dyn Store) {
    store.create_space("s", "").expect("space");
    store.create_user("ann").expect("user");
    let (row, _) = store.user("ann").expect("user").expect("ann");
    let token = |hash: &str, parent: Option<String>, expires_at: Option<i64>| {
        store
            .insert_token(&NewToken {
                user_row: row,
                hash: hash.into(),
                prefix: format!("qk_{hash}"),
                label: hash.into(),
                spaces: Vec::new(),
                collections: None,
                read_only: false,
                tools: None,
                endpoint: None,
                expires_at,
                parent_id: parent,
                manage: false,
            })
            .expect("insert token")
    };
    let signed_in = token("signin", None, Some(100));
    let grant = token("grant", Some(signed_in.id.clone()), None);
    store
        .insert_oauth_grant(&OAuthGrantRow {
            grant_id: grant.id.clone(),
            client_id: "client-1".into(),
            created_at: 0,
        })
        .expect("grant");
    let old = token("old-access", Some(grant.id.clone()), Some(100));
    let live = token("live-access", Some(grant.id.clone()), Some(10_000));
    store
        .insert_oauth_secret(&secret("h-old", OAuthSecretKind::Code, 100))
        .expect("insert");
    store
        .insert_oauth_secret(&secret("h-live", OAuthSecretKind::Refresh, 10_000))
        .expect("insert");
    let gone = store.prune_oauth(500).expect("prune");
    assert_eq!(gone, 2, "one secret and one access token expired");
    let ids: Vec<String> = store
        .tokens(None)
        .expect("tokens")
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert!(!ids.contains(&old.id), "the expired access token went");
    assert!(ids.contains(&live.id) && ids.contains(&grant.id));
    // A token expired outside any grant is the person's to see, not pruned.
    assert!(ids.contains(&signed_in.id));
    assert!(
        store
            .oauth_secret("h-live", OAuthSecretKind::Refresh)
            .expect("read")
            .is_some()
    );
}
