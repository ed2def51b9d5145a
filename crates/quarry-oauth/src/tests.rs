use std::sync::Arc;

use quarry_access::{AuthFailure, Directory, Role, TokenRequest};
use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;
use serde_json::json;

use super::*;

const ORIGIN: &str = "http://127.0.0.1:18765";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk-plus-some-more";

struct World {
    _dir: tempfile::TempDir,
    server: OAuthServer,
    directory: Directory,
    endpoints: Endpoints,
    /// The token ann signed in to the web UI with.
    signed_in: String,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("q.db")).unwrap());
    let directory = Directory::new(store.clone());
    directory.create_space("team", "").unwrap();
    directory.create_space("other", "").unwrap();
    directory.create_user("ann").unwrap();
    directory.grant("ann", "team", Role::Editor).unwrap();
    directory.grant("ann", "other", Role::Editor).unwrap();
    let signed_in = directory
        .create_token(&TokenRequest {
            user: "ann".into(),
            label: "browser".into(),
            ..Default::default()
        })
        .unwrap()
        .token;
    World {
        _dir: dir,
        server: OAuthServer::new(store, directory.clone()),
        directory,
        endpoints: Endpoints::new(ORIGIN),
        signed_in,
    }
}

fn register(w: &World, method: &str) -> Value {
    w.server
        .register(&json!({
            "client_name": "Test client",
            "redirect_uris": ["http://127.0.0.1:33333/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": method,
        }))
        .unwrap()
}

/// A registered public client's id.
fn public_client(w: &World) -> String {
    register(w, "none")["client_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn params(client_id: &str) -> AuthorizeParams {
    AuthorizeParams {
        response_type: Some("code".into()),
        client_id: Some(client_id.into()),
        redirect_uri: Some("http://127.0.0.1:33333/callback".into()),
        code_challenge: Some(s256_challenge(VERIFIER)),
        code_challenge_method: Some("S256".into()),
        state: Some("xyz".into()),
        scope: None,
        resource: Some(format!("{ORIGIN}/mcp")),
    }
}

fn query_of(url: &str) -> HashMap<String, String> {
    Url::parse(url)
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn consent(w: &World, client_id: &str, c: &Consent) -> String {
    let checked = w
        .server
        .check_authorize(&w.endpoints, &params(client_id))
        .unwrap();
    let principal = w
        .directory
        .authenticate_any_space(&w.signed_in, None)
        .unwrap()
        .unwrap();
    let to = w
        .server
        .approve(&w.endpoints, &checked, &principal, c)
        .unwrap();
    let q = query_of(&to);
    assert_eq!(q["state"], "xyz");
    assert_eq!(q["iss"], format!("{ORIGIN}/"));
    q["code"].clone()
}

/// A form from pairs.
fn form_of(pairs: &[(&str, &str)]) -> Form {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn exchange(w: &World, client_id: &str, code: &str, verifier: &str) -> OAuthResult<Value> {
    let form = form_of(&[
        ("grant_type", "authorization_code"),
        ("code", code),
        ("client_id", client_id),
        ("code_verifier", verifier),
        ("redirect_uri", "http://127.0.0.1:33333/callback"),
    ]);
    w.server.token(&w.endpoints, &form, None)
}

fn refresh(w: &World, client_id: &str, token: &str) -> OAuthResult<Value> {
    let form = form_of(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", token),
        ("client_id", client_id),
    ]);
    w.server.token(&w.endpoints, &form, None)
}

fn team() -> Consent {
    Consent {
        spaces: vec!["team".into()],
        ..Default::default()
    }
}

#[test]
fn s256_is_rfc_7636s_example() {
    // RFC 7636 appendix B.
    assert_eq!(
        s256_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    );
}

#[test]
fn metadata_names_one_issuer_and_the_endpoints() {
    let e = Endpoints::new("https://kb.example.com/");
    let m = e.authorization_server_metadata();
    assert_eq!(m["issuer"], "https://kb.example.com/");
    assert_eq!(m["token_endpoint"], "https://kb.example.com/oauth/token");
    assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
    let r = e.protected_resource_metadata("/mcp");
    assert_eq!(r["resource"], "https://kb.example.com/mcp");
    assert_eq!(
        r["authorization_servers"],
        json!(["https://kb.example.com/"])
    );
    assert_eq!(
        e.resource_metadata_url("/mcp"),
        "https://kb.example.com/.well-known/oauth-protected-resource/mcp"
    );
    assert!(e.owns("https://kb.example.com/api/mcp"));
    assert!(!e.owns("https://kb.example.com.evil/mcp"));
    assert!(!e.owns("http://kb.example.com/mcp"));
}

#[test]
fn registration_checks_redirect_uris_and_methods() {
    let w = world();
    for (uri, ok) in [
        ("https://claude.ai/api/mcp/auth_callback", true),
        ("http://127.0.0.1:6274/oauth/callback", true),
        ("http://localhost/cb", true),
        ("cursor://anysphere.cursor-mcp/oauth/callback", true),
        ("http://evil.example/cb", false),
        ("javascript:alert(1)", false),
        ("https://app.example/cb#frag", false),
        ("/relative", false),
    ] {
        let r = w
            .server
            .register(&json!({"redirect_uris": [uri], "token_endpoint_auth_method": "none"}));
        assert_eq!(r.is_ok(), ok, "{uri}: {r:?}");
        if let Err(e) = r {
            assert_eq!(e.error, "invalid_redirect_uri");
        }
    }
    assert_eq!(
        w.server.register(&json!({})).unwrap_err().error,
        "invalid_redirect_uri"
    );
    let e = w
        .server
        .register(&json!({"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}))
        .unwrap_err();
    assert_eq!(e.error, "invalid_client_metadata");
    let e = w
        .server
        .register(&json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]}))
        .unwrap_err();
    assert_eq!(e.error, "invalid_client_metadata");
    // Public clients get no secret; confidential ones get one, stored only as a hash.
    let public = register(&w, "none");
    assert!(public.get("client_secret").is_none());
    let confidential = register(&w, "client_secret_post");
    let secret = confidential["client_secret"].as_str().unwrap();
    assert!(secret.starts_with("qs_"));
    let row = w
        .server
        .client(confidential["client_id"].as_str().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        row.secret_hash.as_deref(),
        Some(quarry_core::sha256_hex(secret.as_bytes()).as_str())
    );
    assert!(!row.metadata.contains(secret));
}

#[test]
fn authorization_requests_are_checked_before_anyone_sees_them() {
    let w = world();
    let id = public_client(&w);
    let check = |p: AuthorizeParams| w.server.check_authorize(&w.endpoints, &p);
    // Unknown client or foreign redirect: shown, never redirected.
    let mut p = params("nope");
    assert!(
        matches!(check(p.clone()), Err(AuthorizeRefusal::Show(e)) if e.error == "invalid_client")
    );
    p = params(&id);
    p.redirect_uri = Some("https://evil.example/cb".into());
    assert!(matches!(check(p), Err(AuthorizeRefusal::Show(_))));
    // A loopback redirect may change its port.
    p = params(&id);
    p.redirect_uri = Some("http://127.0.0.1:40000/callback".into());
    assert!(check(p).is_ok());
    // Everything else goes back to the client with state and iss.
    let redirected = |p: AuthorizeParams| match check(p) {
        Err(AuthorizeRefusal::Redirect(to)) => query_of(&to),
        other => panic!("expected a redirect, got {other:?}"),
    };
    p = params(&id);
    p.code_challenge_method = Some("plain".into());
    let q = redirected(p);
    assert_eq!(q["error"], "invalid_request");
    assert_eq!(q["state"], "xyz");
    assert_eq!(q["iss"], format!("{ORIGIN}/"));
    p = params(&id);
    p.code_challenge = None;
    assert_eq!(redirected(p)["error"], "invalid_request");
    p = params(&id);
    p.response_type = Some("token".into());
    assert_eq!(redirected(p)["error"], "unsupported_response_type");
    p = params(&id);
    p.scope = Some("admin".into());
    assert_eq!(redirected(p)["error"], "invalid_scope");
    p = params(&id);
    p.resource = Some("https://other.example/mcp".into());
    assert_eq!(redirected(p)["error"], "invalid_target");
    p = params(&id);
    p.scope = Some("read".into());
    assert!(!check(p).unwrap().wants_write);
}

#[test]
fn code_flow_refresh_rotation_and_replay() {
    let w = world();
    let id = public_client(&w);
    let code = consent(&w, &id, &team());
    // A wrong verifier fails and burns nothing but itself… the code is single-use either way.
    let wrong = "x".repeat(43);
    assert_eq!(
        exchange(&w, &id, &code, &wrong).unwrap_err().error,
        "invalid_grant"
    );
    let code = consent(&w, &id, &team());
    let t = exchange(&w, &id, &code, VERIFIER).unwrap();
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["scope"], "read write");
    assert!(t["expires_in"].as_i64().unwrap() <= ACCESS_TOKEN_SECS);
    let access = t["access_token"].as_str().unwrap().to_owned();
    let p = w.directory.authenticate(&access, None).unwrap().unwrap();
    let who = p.identity.clone().unwrap();
    assert_eq!(who.user, "ann");
    assert_eq!(who.spaces.len(), 1, "only the space consented to");
    assert!(!who.read_only);
    // The code is single-use: a replay revokes the grant and the token it gave.
    assert_eq!(
        exchange(&w, &id, &code, VERIFIER).unwrap_err().error,
        "invalid_grant"
    );
    assert_eq!(
        w.directory
            .authenticate(&access, None)
            .unwrap()
            .unwrap_err(),
        AuthFailure::Revoked
    );

    // A fresh grant: refresh rotates, and the old refresh token replayed ends the grant.
    let code = consent(&w, &id, &team());
    let t = exchange(&w, &id, &code, VERIFIER).unwrap();
    let r1 = t["refresh_token"].as_str().unwrap().to_owned();
    assert!(r1.starts_with(REFRESH_PREFIX));
    let t2 = refresh(&w, &id, &r1).unwrap();
    let r2 = t2["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(r1, r2);
    let a2 = t2["access_token"].as_str().unwrap().to_owned();
    assert!(w.directory.authenticate(&a2, None).unwrap().is_ok());
    let e = refresh(&w, &id, &r1).unwrap_err();
    assert_eq!(e.error, "invalid_grant");
    assert!(e.description.contains("already used"));
    assert_eq!(
        w.directory.authenticate(&a2, None).unwrap().unwrap_err(),
        AuthFailure::Revoked
    );
    assert_eq!(
        refresh(&w, &id, &r2).unwrap_err().error,
        "invalid_grant",
        "the rotated one died with the grant"
    );
}

#[test]
fn read_scope_and_consent_narrow_the_token() {
    let w = world();
    let id = public_client(&w);
    let mut c = team();
    c.read_only = true;
    c.tools = Some(vec!["time".into()]);
    let code = consent(&w, &id, &c);
    let t = exchange(&w, &id, &code, VERIFIER).unwrap();
    assert_eq!(t["scope"], "read");
    let p = w
        .directory
        .authenticate(t["access_token"].as_str().unwrap(), None)
        .unwrap()
        .unwrap();
    let who = p.identity.unwrap();
    assert!(who.read_only);
    assert_eq!(who.tools, Some(vec!["time".to_owned()]));
    // Refreshing cannot add write.
    let form = form_of(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", t["refresh_token"].as_str().unwrap()),
        ("client_id", id.as_str()),
        ("scope", "read write"),
    ]);
    assert_eq!(
        w.server.token(&w.endpoints, &form, None).unwrap_err().error,
        "invalid_scope"
    );
    // The refused refresh did not spend the token: the client's correct refresh works (it
    // looked like a replay before, and revoked the grant — issue 41 item 21).
    let again = refresh(&w, &id, t["refresh_token"].as_str().unwrap()).unwrap();
    assert!(again["access_token"].as_str().is_some(), "{again}");
    assert!(
        w.directory
            .authenticate(again["access_token"].as_str().unwrap(), None)
            .unwrap()
            .is_ok()
    );
}

#[test]
fn revoking_the_signed_in_token_ends_the_grant() {
    let w = world();
    let id = public_client(&w);
    let code = consent(&w, &id, &team());
    let t = exchange(&w, &id, &code, VERIFIER).unwrap();
    let access = t["access_token"].as_str().unwrap();
    let browser = w
        .directory
        .authenticate_any_space(&w.signed_in, None)
        .unwrap()
        .unwrap();
    w.directory
        .revoke_token(&browser.identity.unwrap().token_id.unwrap(), None)
        .unwrap();
    assert_eq!(
        w.directory.authenticate(access, None).unwrap().unwrap_err(),
        AuthFailure::Revoked
    );
    let r = t["refresh_token"].as_str().unwrap();
    assert_eq!(refresh(&w, &id, r).unwrap_err().error, "invalid_grant");
}

#[test]
fn confidential_clients_must_authenticate_and_revocation_ends_the_grant() {
    let w = world();
    let info = register(&w, "client_secret_basic");
    let id = info["client_id"].as_str().unwrap().to_owned();
    let secret = info["client_secret"].as_str().unwrap().to_owned();
    let code = consent(&w, &id, &team());
    // Without the secret, or with a wrong one: invalid_client (401), checked before the code
    // is redeemed, so the code still works for the real client.
    let e = exchange(&w, &id, &code, VERIFIER).unwrap_err();
    assert_eq!((e.error, e.status), ("invalid_client", 401));
    let form = form_of(&[
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", VERIFIER),
    ]);
    let bad = w
        .server
        .token(&w.endpoints, &form, Some((id.clone(), "qs_wrong".into())))
        .unwrap_err();
    assert_eq!(bad.error, "invalid_client");
    let t = w
        .server
        .token(&w.endpoints, &form, Some((id.clone(), secret.clone())))
        .unwrap();
    let access = t["access_token"].as_str().unwrap().to_owned();
    // Revoking with another client's credentials does nothing; with its own ends the grant.
    let other = public_client(&w);
    let rev = form_of(&[("token", access.as_str()), ("client_id", other.as_str())]);
    w.server.revoke(&rev, None).unwrap();
    assert!(w.directory.authenticate(&access, None).unwrap().is_ok());
    let rev = form_of(&[("token", access.as_str())]);
    w.server.revoke(&rev, Some((id, secret))).unwrap();
    assert_eq!(
        w.directory
            .authenticate(&access, None)
            .unwrap()
            .unwrap_err(),
        AuthFailure::Revoked
    );
}

#[test]
fn forms_refuse_repeated_parameters() {
    assert_eq!(parse_form(b"a=1&b=2").unwrap()["b"], "2");
    assert_eq!(parse_form(b"a=1&a=2").unwrap_err().error, "invalid_request");
}

#[test]
fn public_urls_are_origins() {
    assert_eq!(
        Endpoints::from_public_url("https://KB.example.com/")
            .unwrap()
            .origin(),
        "https://kb.example.com"
    );
    assert_eq!(
        Endpoints::from_public_url("http://10.0.0.5:8080")
            .unwrap()
            .origin(),
        "http://10.0.0.5:8080"
    );
    for bad in [
        "kb.example.com",
        "ftp://kb.example.com",
        "https://kb.example.com/quarry",
        "https://u:p@kb.example.com",
        "https://kb.example.com/?a=1",
    ] {
        assert!(Endpoints::from_public_url(bad).is_err(), "{bad}");
    }
}

#[test]
fn basic_credentials_are_decoded() {
    // "a%3Ab:s3cr%2Bt" — the id and secret are form-encoded before base64.
    assert_eq!(
        basic_credentials("Basic YSUzQWI6czNjciUyQnQ="),
        Some(("a:b".to_owned(), "s3cr+t".to_owned()))
    );
    assert_eq!(basic_credentials("Bearer abc"), None);
    assert_eq!(basic_credentials("Basic !!!"), None);
    assert_eq!(basic_credentials("Basic bm9jb2xvbg=="), None, "no colon");
}

#[test]
fn a_client_name_as_long_as_allowed_still_gets_tokens() {
    let w = world();
    let id = w
        .server
        .register(&json!({
            "client_name": "n".repeat(200),
            "redirect_uris": ["http://127.0.0.1:33333/callback"],
            "token_endpoint_auth_method": "none",
        }))
        .unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let code = consent(&w, &id, &team());
    let t = exchange(&w, &id, &code, VERIFIER).unwrap();
    assert!(t["access_token"].as_str().is_some());
}
