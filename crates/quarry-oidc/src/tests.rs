//! The relying party against a provider on loopback that signs real ES256 ID tokens
//! (ring's keys): the happy path, each refused token, key rotation, userinfo, the
//! allow-list, a provider that is down; and the configuration's checks. The interop suite
//! signs in through a real provider (django-oidc-provider, RS256) in a browser.

use std::sync::{Arc, Mutex, OnceLock};

use quarry_test_http::{Reply, Request, Server};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

use super::*;

struct Key {
    kid: String,
    pair: EcdsaKeyPair,
}

fn key(kid: &str) -> Key {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    Key {
        kid: kid.into(),
        pair: EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap(),
    }
}

fn jwk(k: &Key) -> Value {
    let point = k.pair.public_key().as_ref();
    json!({
        "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": k.kid,
        "x": quarry_core::base64url_encode(&point[1..33]),
        "y": quarry_core::base64url_encode(&point[33..65]),
    })
}

fn sign(k: &Key, header: &Value, claims: &Value) -> String {
    let input = format!(
        "{}.{}",
        quarry_core::base64url_encode(header.to_string().as_bytes()),
        quarry_core::base64url_encode(claims.to_string().as_bytes())
    );
    let sig = k.pair.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
    format!("{input}.{}", quarry_core::base64url_encode(sig.as_ref()))
}

/// What the fake provider does next.
struct Op {
    /// Keys it publishes besides the signer (a key named `hide-signer` here keeps the
    /// signer out of the set).
    published: Vec<Key>,
    /// The key it signs with.
    signer: Key,
    /// Changes to the ID token's claims (`null` removes one).
    claims: Value,
    /// The header's `alg` (ES256 unless changed).
    alg: String,
    /// The nonce of the last authorization request (what the token carries by default).
    nonce: String,
    /// Claims userinfo returns.
    userinfo: Value,
    /// The token endpoint's error, if it refuses.
    refuse: Option<Value>,
    /// Auth methods announced.
    auth_methods: Value,
    /// The issuer the discovery document states (`None`: the real one).
    stated_issuer: Option<String>,
}

struct Fake {
    server: Server,
    op: Arc<Mutex<Op>>,
}

fn fake() -> Fake {
    let op = Arc::new(Mutex::new(Op {
        published: vec![],
        signer: key("k1"),
        claims: json!({}),
        alg: "ES256".into(),
        nonce: String::new(),
        userinfo: json!({"sub": "user-42"}),
        refuse: None,
        auth_methods: json!(["client_secret_basic", "client_secret_post"]),
        stated_issuer: None,
    }));
    let base: Arc<OnceLock<String>> = Arc::default();
    let handler_op = op.clone();
    let handler_base = base.clone();
    let server = Server::start(move |req: &Request| {
        let base = handler_base.get().cloned().unwrap_or_default();
        let o = handler_op.lock().unwrap();
        let issuer = format!("{base}/idp");
        match req.path() {
            "/idp/.well-known/openid-configuration" => Reply::json(
                200,
                &json!({
                    "issuer": o.stated_issuer.clone().unwrap_or(issuer.clone()),
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "jwks_uri": format!("{issuer}/jwks"),
                    "userinfo_endpoint": format!("{issuer}/userinfo"),
                    "end_session_endpoint": format!("{issuer}/logout"),
                    "token_endpoint_auth_methods_supported": o.auth_methods,
                    "id_token_signing_alg_values_supported": ["ES256", "RS256"],
                    "code_challenge_methods_supported": ["S256"],
                }),
            ),
            "/idp/jwks" => {
                let mut keys: Vec<Value> = o.published.iter().map(jwk).collect();
                keys.push(jwk(&o.signer));
                if o.published.iter().any(|k| k.kid == "hide-signer") {
                    keys.pop();
                }
                Reply::json(200, &json!({"keys": keys}))
            }
            "/idp/token" => {
                if let Some(e) = &o.refuse {
                    return Reply::json(400, e);
                }
                let mut claims = json!({
                    "iss": issuer, "aud": "quarry", "sub": "user-42",
                    "exp": quarry_core::now_millis() / 1000 + 300,
                    "iat": quarry_core::now_millis() / 1000,
                    "nonce": o.nonce, "email": "ann@example.com",
                    "preferred_username": "ann",
                });
                if let (Some(c), Some(changes)) = (claims.as_object_mut(), o.claims.as_object()) {
                    for (k, v) in changes {
                        if v.is_null() {
                            c.remove(k);
                        } else {
                            c.insert(k.clone(), v.clone());
                        }
                    }
                }
                let header = json!({"alg": o.alg, "kid": o.signer.kid, "typ": "JWT"});
                let token = sign(&o.signer, &header, &claims);
                Reply::json(
                    200,
                    &json!({"access_token": "at-1", "token_type": "Bearer", "id_token": token}),
                )
            }
            "/idp/userinfo" => {
                if req.header("authorization") != Some("Bearer at-1") {
                    return Reply::json(401, &json!({"error": "invalid_token"}));
                }
                Reply::json(200, &o.userinfo)
            }
            _ => Reply::status(404, "text/plain", "no"),
        }
    });
    let _ = base.set(server.base());
    Fake { server, op }
}

fn config(issuer: &str) -> OidcConfig {
    let file = json!({
        "session_minutes": 60,
        "providers": [{
            "name": "company", "title": "Company account", "issuer": issuer,
            "client_id": "quarry", "client_secret": "s3cr:t",
            "scopes": ["openid", "email", "groups"],
            "groups": [{"group": "eng", "space": "default", "role": "editor"}],
        }],
    })
    .to_string();
    load(
        &ConfigSources {
            file: Some(("oidc.json", &file)),
            ..ConfigSources::default()
        },
        &|_| None,
    )
    .unwrap()
}

/// Starts a sign-in and records its nonce at the fake provider (as a browser would carry
/// it through the authorization endpoint).
async fn started(sign_in: &SignIn, fake: &Fake) -> Started {
    let s = sign_in
        .start("company", "http://127.0.0.1:1/ui/oidc/callback", "/")
        .await
        .unwrap();
    let url = url::Url::parse(&s.url).unwrap();
    let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    fake.op.lock().unwrap().nonce = q["nonce"].clone();
    s
}

#[tokio::test]
async fn a_signed_id_token_signs_the_person_in() {
    let fake = fake();
    let issuer = fake.server.url("/idp");
    let sign_in = SignIn::new(config(&issuer)).unwrap();
    let s = started(&sign_in, &fake).await;
    let url = url::Url::parse(&s.url).unwrap();
    let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "quarry");
    assert_eq!(q["scope"], "openid email groups");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["state"], s.state);
    assert_eq!(s.request.state_hash, state_hash(&s.state));
    assert_eq!(
        q["code_challenge"],
        quarry_oauth::s256_challenge(&s.request.verifier)
    );
    assert_ne!(s.state, s.request.nonce);

    fake.op.lock().unwrap().userinfo = json!({"sub": "user-42", "groups": ["eng", "ops"]});
    let v = sign_in.finish(&s.request, "code-1").await.unwrap();
    assert_eq!(v.person.issuer, issuer);
    assert_eq!(v.person.subject, "user-42");
    assert_eq!(v.person.email.as_deref(), Some("ann@example.com"));
    assert_eq!(v.person.preferred_name.as_deref(), Some("ann"));
    assert_eq!(v.person.groups, vec!["eng".to_string(), "ops".to_string()]);

    // The code went with the verifier, the client authenticated by HTTP Basic (each part
    // form-encoded), and the secret is nowhere in the body.
    let token_req = fake
        .server
        .requests()
        .into_iter()
        .find(|r| r.path() == "/idp/token")
        .unwrap();
    let body = token_req.text();
    assert!(body.contains("code=code-1"), "{body}");
    assert!(body.contains(&format!("code_verifier={}", s.request.verifier)));
    assert!(!body.contains("s3cr"), "{body}");
    assert_eq!(
        token_req.header("authorization"),
        Some(format!("Basic {}", quarry_core::base64_encode(b"quarry:s3cr%3At")).as_str())
    );

    // Sign-out at the provider is offered, with the ID token as hint.
    let out = sign_in
        .logout_url("company", &v.id_token, "http://127.0.0.1:1/")
        .await
        .unwrap();
    assert!(
        out.starts_with(&format!("{issuer}/logout?id_token_hint=")),
        "{out}"
    );
    assert!(out.contains("post_logout_redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2F"));
}

#[tokio::test]
async fn wrong_claims_and_algorithms_are_refused() {
    let fake = fake();
    let sign_in = SignIn::new(config(&fake.server.url("/idp"))).unwrap();
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"nonce": "someone-elses"}), "ES256", "nonce"),
        (json!({"nonce": null}), "ES256", "no nonce"),
        (
            json!({"aud": "another-client"}),
            "ES256",
            "not meant for this client",
        ),
        (json!({"aud": ["quarry", "other"]}), "ES256", "azp"),
        (
            json!({"iss": "https://evil.example"}),
            "ES256",
            "configured issuer",
        ),
        (json!({"exp": 1_000}), "ES256", "expired"),
        (json!({"exp": null}), "ES256", "no expiry"),
        (
            json!({"iat": quarry_core::now_millis() / 1000 + 3_600}),
            "ES256",
            "future",
        ),
        (json!({"sub": ""}), "ES256", "subject"),
        (json!({}), "HS256", "HS256"),
        (json!({}), "none", "none"),
    ];
    for (claims, alg, says) in cases {
        let s = started(&sign_in, &fake).await;
        {
            let mut o = fake.op.lock().unwrap();
            o.claims = claims.clone();
            o.alg = alg.into();
        }
        let e = sign_in.finish(&s.request, "c").await.unwrap_err();
        assert!(matches!(e, OidcError::Token(_)), "{claims} {alg}: {e:?}");
        assert!(e.to_string().contains(says), "{claims} {alg}: {e}");
    }
    // Several audiences with azp = Quarry are fine.
    let s = started(&sign_in, &fake).await;
    {
        let mut o = fake.op.lock().unwrap();
        o.claims = json!({"aud": ["quarry", "other"], "azp": "quarry"});
        o.alg = "ES256".into();
    }
    sign_in.finish(&s.request, "c").await.unwrap();
}

#[tokio::test]
async fn keys_rotate_and_a_foreign_key_is_refused() {
    let fake = fake();
    let sign_in = SignIn::new(config(&fake.server.url("/idp"))).unwrap();
    let s = started(&sign_in, &fake).await;
    sign_in.finish(&s.request, "c").await.unwrap();
    let jwks_fetches = || {
        fake.server
            .requests()
            .iter()
            .filter(|r| r.path() == "/idp/jwks")
            .count()
    };
    assert_eq!(jwks_fetches(), 1);

    // The provider rotates: a new key signs; the cached set lacks it, so it is fetched again.
    fake.op.lock().unwrap().signer = key("k2");
    let s = started(&sign_in, &fake).await;
    sign_in.finish(&s.request, "c").await.unwrap();
    assert_eq!(jwks_fetches(), 2);
    let s = started(&sign_in, &fake).await;
    sign_in.finish(&s.request, "c").await.unwrap();
    assert_eq!(jwks_fetches(), 2, "the rotated set is cached");

    // A token signed by a key the provider does not publish.
    fake.op.lock().unwrap().published = vec![key("hide-signer")];
    fake.op.lock().unwrap().signer = key("k3");
    let s = started(&sign_in, &fake).await;
    let e = sign_in.finish(&s.request, "c").await.unwrap_err();
    assert!(e.to_string().contains("does not publish"), "{e}");

    // The kid of a published key, signed by another key.
    {
        let mut o = fake.op.lock().unwrap();
        o.published = vec![key("k4"), key("hide-signer")];
        o.signer = key("k4");
    }
    let s = started(&sign_in, &fake).await;
    let e = sign_in.finish(&s.request, "c").await.unwrap_err();
    assert_eq!(e, OidcError::Token(TokenError::BadSignature));
}

#[tokio::test]
async fn provider_refusals_downtime_and_the_allow_list_say_what_happened() {
    let fake = fake();
    let issuer = fake.server.url("/idp");
    let sign_in = SignIn::new(config(&issuer)).unwrap();
    let s = started(&sign_in, &fake).await;
    fake.op.lock().unwrap().refuse =
        Some(json!({"error": "invalid_grant", "error_description": "code was used"}));
    let e = sign_in.finish(&s.request, "c").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "the identity provider refused: invalid_grant (code was used)"
    );
    fake.op.lock().unwrap().refuse = None;

    // Only client_secret_post offered: the secret goes in the body.
    fake.op.lock().unwrap().auth_methods = json!(["client_secret_post"]);
    let post = SignIn::new(config(&issuer)).unwrap();
    let s = started(&post, &fake).await;
    fake.server.clear();
    post.finish(&s.request, "c").await.unwrap();
    let req = fake
        .server
        .requests()
        .into_iter()
        .find(|r| r.path() == "/idp/token")
        .unwrap();
    assert!(req.text().contains("client_secret=s3cr%3At"));
    assert_eq!(req.header("authorization"), None);

    // A discovery document naming another issuer.
    fake.op.lock().unwrap().stated_issuer = Some("https://evil.example".into());
    let fresh = SignIn::new(config(&issuer)).unwrap();
    let e = fresh
        .start("company", "http://x/cb", "/")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not the configured"), "{e}");
    fake.op.lock().unwrap().stated_issuer = None;

    // The allow-list: a domain the person is not at.
    let file = json!({"providers": [{"name": "company", "issuer": issuer, "client_id": "quarry",
        "allowed_domains": ["corp.example"]}]})
    .to_string();
    let strict = SignIn::new(
        load(
            &ConfigSources {
                file: Some(("f", &file)),
                ..ConfigSources::default()
            },
            &|_| None,
        )
        .unwrap(),
    )
    .unwrap();
    let s = started(&strict, &fake).await;
    let e = strict.finish(&s.request, "c").await.unwrap_err();
    assert!(matches!(e, OidcError::NotAllowed(_)), "{e:?}");
    assert!(e.to_string().contains("corp.example"));
    // An unverified address at the right domain is refused too.
    fake.op.lock().unwrap().claims = json!({"email": "ann@corp.example", "email_verified": false});
    let s = started(&strict, &fake).await;
    assert!(strict.finish(&s.request, "c").await.is_err());
    fake.op.lock().unwrap().claims = json!({"email": "ann@CORP.example"});
    let s = started(&strict, &fake).await;
    strict.finish(&s.request, "c").await.unwrap();

    // A provider that is down: a clear error, nothing else.
    let port = quarry_test_http::unused_port();
    let down = SignIn::new(config(&format!("http://127.0.0.1:{port}/idp"))).unwrap();
    let e = down.start("company", "http://x/cb", "/").await.unwrap_err();
    assert!(matches!(e, OidcError::Unreachable(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("the identity provider cannot be reached")
    );
    let e = down.start("nobody", "http://x/cb", "/").await.unwrap_err();
    assert_eq!(e, OidcError::UnknownProvider("nobody".into()));
}

#[test]
fn configuration_is_checked_entry_by_entry() {
    let load_file = |file: Value| {
        let text = file.to_string();
        load(
            &ConfigSources {
                file: Some(("oidc.json", &text)),
                ..ConfigSources::default()
            },
            &|var| (var == "SET").then(|| "from-env".to_owned()),
        )
    };
    let p = |extra: Value| {
        let mut base = json!({"name": "co", "issuer": "https://idp.example", "client_id": "q"});
        if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        json!({"providers": [base]})
    };
    let ok = load_file(p(json!({"client_secret_env": "SET", "groups": [
        {"group": "g", "space": "default", "role": "admin", "reader_groups": ["g1"]},
        {"group": "h", "space": "default", "reader_groups": ["h1"]}]})))
    .unwrap();
    let co = &ok.providers[0];
    assert_eq!(
        co.client_secret.as_ref().map(ClientSecret::expose),
        Some("from-env")
    );
    assert_eq!(co.scopes, vec!["openid", "email", "profile"]);
    assert_eq!(co.groups_claim, "groups");
    assert_eq!(co.title, "Sign in with co");
    assert_eq!(co.rules.len(), 2);
    assert_eq!(ok.session_ms, 720 * 60_000);
    assert!(
        !format!("{co:?}").contains("from-env"),
        "secrets never print"
    );

    let refused = [
        (p(json!({"name": "Co"})), "lowercase"),
        (p(json!({"issuer": "http://idp.example"})), "https"),
        (
            p(json!({"issuer": "https://u:p@idp.example"})),
            "credentials",
        ),
        (p(json!({"client_id": " "})), "client_id"),
        (p(json!({"client_secret_env": "UNSET"})), "not set"),
        (
            p(json!({"client_secret_env": "SET", "client_secret": "x"})),
            "not both",
        ),
        (
            p(json!({"groups": [{"group": "g", "space": "s", "role": "boss"}]})),
            "boss",
        ),
        (
            p(json!({"groups": [{"group": "g", "space": "s"}]})),
            "neither",
        ),
        (p(json!({"scopes": ["openid email"]})), "one word"),
        (p(json!({"allowed_domains": ["a@b"]})), "domain"),
        (p(json!({"colour": "red"})), "unknown field"),
        (json!({"session_minutes": 0}), "session_minutes"),
        (
            json!({"providers": [
                {"name": "co", "issuer": "https://a.example", "client_id": "q"},
                {"name": "co", "issuer": "https://b.example", "client_id": "q"}]}),
            "two identity providers",
        ),
    ];
    for (file, says) in refused {
        let e = load_file(file.clone()).unwrap_err();
        assert!(e.contains(says), "{file}: {e}");
    }
    // Plain HTTP is for this machine only.
    load_file(p(json!({"issuer": "http://127.0.0.1:8080/realms/x"}))).unwrap();
    load_file(p(json!({"issuer": "http://localhost/x"}))).unwrap();

    // The one-provider shorthand.
    let short = load(
        &ConfigSources {
            issuer: Some("https://idp.example"),
            client_id: Some("q"),
            client_secret: Some("s"),
            ..ConfigSources::default()
        },
        &|_| None,
    )
    .unwrap();
    assert_eq!(short.providers[0].name, "oidc");
    let e = load(
        &ConfigSources {
            issuer: Some("https://idp.example"),
            ..ConfigSources::default()
        },
        &|_| None,
    )
    .unwrap_err();
    assert!(e.contains("QUARRY_OIDC_CLIENT_ID"), "{e}");
}
