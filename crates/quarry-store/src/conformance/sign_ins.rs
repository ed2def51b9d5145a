//! People's sign-in state: a started sign-in is taken once (concurrent takers never both
//! get it, an expired one is refused), a provider account stays linked to its first user,
//! and web sessions round-trip; a removed user takes its links with it.

use crate::{SignInRequest, Store, WebSession};

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_sign_ins {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::sign_ins];
            sign_in_requests_are_taken_once,
            sign_in_concurrent_takers_never_both_win,
            identities_link_to_their_first_user,
            web_sessions_round_trip,
        );
    };
}

#[doc(hidden)]
pub use __conformance_sign_ins;

fn request(state_hash: &str, expires_at: i64) -> SignInRequest {
    SignInRequest {
        state_hash: state_hash.into(),
        provider: "company".into(),
        nonce: "n".repeat(32),
        verifier: "v".repeat(64),
        redirect_uri: "http://127.0.0.1:9/ui/oidc/callback".into(),
        return_to: "/#/kb".into(),
        expires_at,
    }
}

/// A request is taken once; a second take, an unknown state and an expired one get nothing.
pub fn sign_in_requests_are_taken_once(store: &dyn Store) {
    let far = quarry_core::now_millis() + 600_000;
    let r = request("h-1", far);
    store.put_sign_in_request(&r).expect("put");
    store
        .put_sign_in_request(&request("h-2", far))
        .expect("put");
    let now = quarry_core::now_millis();
    assert_eq!(
        store.take_sign_in_request("h-1", now).expect("take"),
        Some(r)
    );
    assert_eq!(
        store.take_sign_in_request("h-1", now).expect("take"),
        None,
        "a state is redeemed once"
    );
    assert_eq!(store.take_sign_in_request("h-9", now).expect("take"), None);
    assert_eq!(
        store.take_sign_in_request("h-2", far + 1).expect("take"),
        None,
        "an expired request is refused"
    );
    // A state is unique: the same one twice is an error, not a second request.
    store
        .put_sign_in_request(&request("h-3", far))
        .expect("put");
    assert!(store.put_sign_in_request(&request("h-3", far)).is_err());
}

/// Of four nodes handling the same callbacks, each request goes to one.
pub fn sign_in_concurrent_takers_never_both_win(store: &dyn Store) {
    let far = quarry_core::now_millis() + 600_000;
    for i in 0..10 {
        store
            .put_sign_in_request(&request(&format!("c-{i}"), far))
            .expect("put");
    }
    let now = quarry_core::now_millis();
    let wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..10)
                        .filter(|i| {
                            store
                                .take_sign_in_request(&format!("c-{i}"), now)
                                .expect("take")
                                .is_some()
                        })
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    assert_eq!(wins, 10, "each request taken by exactly one taker");
}

/// `(issuer, subject)` names one user: linking it again records the sign-in but never
/// moves the link; the same subject at another issuer is another account; deleting the
/// user removes its links.
pub fn identities_link_to_their_first_user(store: &dyn Store) {
    store.create_user("ann").expect("user");
    store.create_user("bob").expect("user");
    let (ann, ann_user) = store.user("ann").expect("user").expect("ann");
    let (bob, _) = store.user("bob").expect("user").expect("bob");
    let iss = "https://idp.example";
    assert_eq!(store.identity_user(iss, "42").expect("read"), None);
    store
        .link_identity(iss, "42", ann, Some("ann@example.com"), 1_000)
        .expect("link");
    store
        .link_identity(iss, "42", bob, Some("ann@new.example"), 2_000)
        .expect("relink");
    assert_eq!(
        store.identity_user(iss, "42").expect("read"),
        Some((ann, ann_user.id.clone())),
        "the first user keeps the account"
    );
    assert_eq!(
        store
            .identity_user("https://other.example", "42")
            .expect("read"),
        None
    );
    store
        .link_identity("https://other.example", "42", bob, None, 3_000)
        .expect("link");
    let all = store.identities().expect("list");
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].user, "ann");
    assert_eq!(all[0].email.as_deref(), Some("ann@new.example"));
    assert_eq!((all[0].created_at, all[0].last_sign_in_at), (1_000, 2_000));
    assert_eq!(all[1].user, "bob");
    store.delete_user(ann).expect("delete");
    assert_eq!(store.identity_user(iss, "42").expect("read"), None);
    assert_eq!(store.identities().expect("list").len(), 1);
}

/// A web session is stored under its token and read back.
pub fn web_sessions_round_trip(store: &dyn Store) {
    let s = WebSession {
        token_id: "token-1".into(),
        provider: "company".into(),
        issuer: "https://idp.example".into(),
        subject: "42".into(),
        id_token: "a.b.c".into(),
        created_at: 5_000,
    };
    store.put_web_session(&s).expect("put");
    assert_eq!(store.web_session("token-1").expect("read"), Some(s));
    assert_eq!(store.web_session("token-2").expect("read"), None);
}
