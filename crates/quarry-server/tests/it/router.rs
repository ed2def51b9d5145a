//! The HTTP application driven in-process (`tower::ServiceExt::oneshot`) over a temp-dir
//! engine: auth refusals, routing, REST error codes, the cookie session's CSRF rule and the
//! Host/Origin guard — what only the Python interop suite checked before.
//!
//! Every request runs where a store call outside the blocking runner panics (see
//! `common`).

use crate::common::{Fixture, assert_error, empty, get, post_json};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use quarry_server::AuthMode;
use serde_json::json;

#[test]
fn token_mode_refuses_missing_bad_revoked_and_expired_tokens() {
    let f = Fixture::new(AuthMode::Token);
    let missing = f.send(empty(get("/status")));
    assert_error(&missing, StatusCode::UNAUTHORIZED, "AUTH_REQUIRED");
    // The challenge names the protected-resource metadata, so MCP clients can sign in with
    // OAuth (RFC 9728 §5.1); REST routes point at the server's root document.
    assert_eq!(
        missing
            .1
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok()),
        Some(
            "Bearer realm=\"quarry\", resource_metadata=\"http://127.0.0.1:18765/.well-known/oauth-protected-resource\""
        )
    );
    let bad = f.send(empty(
        get("/status").header(header::AUTHORIZATION, "Bearer qk_not_a_real_token"),
    ));
    assert_error(&bad, StatusCode::UNAUTHORIZED, "AUTH_FAILED");

    let (token, id) = f.token(None);
    let bearer = format!("Bearer {token}");
    let (status, _, body) = f.send(empty(get("/status").header(header::AUTHORIZATION, &bearer)));
    assert_eq!(status, StatusCode::OK, "{body}");
    f.state.directory().revoke_token(&id, None).expect("revoke");
    let revoked = f.send(empty(get("/status").header(header::AUTHORIZATION, &bearer)));
    assert_error(&revoked, StatusCode::UNAUTHORIZED, "TOKEN_REVOKED");

    let (short, _) = f.token(Some(quarry_core::now_millis() + 50));
    std::thread::sleep(std::time::Duration::from_millis(120));
    let expired = f.send(empty(get(&format!("/status?token={short}"))));
    assert_error(&expired, StatusCode::UNAUTHORIZED, "TOKEN_EXPIRED");
    // /health needs no token.
    let (status, _, body) = f.send(empty(get("/health")));
    assert_eq!(
        (status, &body["status"]),
        (StatusCode::OK, &json!("healthy"))
    );
}

#[test]
fn a_token_reaches_only_its_spaces_on_every_surface() {
    let f = Fixture::new(AuthMode::Token);
    let (token, _) = f.token(None);
    let bearer = format!("Bearer {token}");
    let rest = f.send(empty(
        get("/api/v1/knowledge-bases")
            .header(header::AUTHORIZATION, &bearer)
            .header("x-space-id", "other"),
    ));
    assert_error(&rest, StatusCode::FORBIDDEN, "SPACE_FORBIDDEN");
    // The same refusal in JSON-RPC's envelope on the MCP endpoint.
    let (status, _, body) = f.send(
        Request::builder()
            .method("POST")
            .uri("/mcp?space_id=other")
            .header(header::AUTHORIZATION, &bearer)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(Body::from(
                json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
            ))
            .expect("request"),
    );
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert_eq!(
        body["error"]["data"]["error_code"], "SPACE_FORBIDDEN",
        "{body}"
    );
    // Dify's shape: 403 with its own numeric code.
    let mut req = post_json(
        "/retrieval?space_id=other",
        json!({"knowledge_id": "x", "query": "q"}),
    );
    req.headers_mut()
        .insert(header::AUTHORIZATION, bearer.parse().expect("header"));
    let (status, _, body) = f.send(req);
    assert_eq!(
        (status, &body["error_code"]),
        (StatusCode::FORBIDDEN, &json!(1002)),
        "{body}"
    );
}

#[test]
fn unknown_routes_and_methods_have_codes() {
    let f = Fixture::new(AuthMode::Open);
    let missing = f.send(empty(get("/no/such/route")));
    assert_error(&missing, StatusCode::NOT_FOUND, "ROUTE_NOT_FOUND");
    let wrong = f.send(empty(Request::builder().method("DELETE").uri("/status")));
    assert_error(&wrong, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED");
}

#[test]
fn rest_errors_carry_their_codes() {
    let f = Fixture::new(AuthMode::Open);
    // 400: a body the route cannot read, and an unknown key.
    let bad = f.send(post_json("/search", json!({"limit": 3})));
    assert_error(&bad, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    let unknown = f.send(post_json("/search", json!({"query": "x", "nope": 1})));
    assert_error(&unknown, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert!(unknown.2["detail"].as_str().unwrap_or("").contains("nope"));
    // 404 from the engine.
    let missing = f.send(empty(get("/collections/nothing-here")));
    assert_error(&missing, StatusCode::NOT_FOUND, "NOT_FOUND");
    // 409: a name taken twice.
    let (status, _, body) = f.send(post_json(
        "/api/v1/knowledge-bases",
        json!({"name": "notes"}),
    ));
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let again = f.send(post_json(
        "/api/v1/knowledge-bases",
        json!({"name": "notes"}),
    ));
    assert_error(&again, StatusCode::CONFLICT, "CONFLICT");
    // 413 for an oversized embed request.
    let texts: Vec<String> = (0..1001).map(|i| i.to_string()).collect();
    let big = f.send(post_json("/embed", json!({"texts": texts})));
    assert_error(&big, StatusCode::PAYLOAD_TOO_LARGE, "TOO_LARGE");
}

#[test]
fn cookie_sessions_need_the_csrf_header_for_state_changes() {
    let f = Fixture::new(AuthMode::Token);
    let (token, _) = f.token(None);
    let csrf = "0123456789abcdef0123456789abcdef";
    let create = |cookie: String, header_value: Option<&str>| {
        let mut req = post_json("/api/v1/knowledge-bases", json!({"name": "kb1"}));
        req.headers_mut()
            .insert(header::COOKIE, cookie.parse().expect("cookie"));
        if let Some(v) = header_value {
            req.headers_mut()
                .insert("x-quarry-csrf", v.parse().expect("csrf header"));
        }
        f.send(req)
    };
    let session = format!("quarry_session={token}");
    let with_csrf_cookie = format!("{session}; quarry_csrf={csrf}");
    let none = create(session.clone(), None);
    assert_error(&none, StatusCode::FORBIDDEN, "CSRF_FAILED");
    let wrong = create(
        with_csrf_cookie.clone(),
        Some("ffffffffffffffffffffffffffffffff"),
    );
    assert_error(&wrong, StatusCode::FORBIDDEN, "CSRF_FAILED");
    let (status, _, body) = create(with_csrf_cookie.clone(), Some(csrf));
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Reads need no CSRF header; the cookie alone authenticates them.
    let (status, _, body) = f.send(empty(
        get("/api/v1/knowledge-bases").header(header::COOKIE, &session),
    ));
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["total"], 1, "{body}");
    // A bearer token is not a cookie session: no CSRF header needed.
    let mut req = post_json("/api/v1/knowledge-bases", json!({"name": "kb2"}));
    req.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header"),
    );
    assert_eq!(f.send(req).0, StatusCode::CREATED);
}

#[test]
fn host_and_origin_are_checked_before_anything_else() {
    let f = Fixture::new(AuthMode::Open);
    let host = f.send(empty(
        get("/health").header(header::HOST, "evil.example:18765"),
    ));
    assert_error(&host, StatusCode::FORBIDDEN, "HOST_NOT_ALLOWED");
    let origin = f.send(empty(
        get("/status").header(header::ORIGIN, "http://evil.example"),
    ));
    assert_error(&origin, StatusCode::FORBIDDEN, "ORIGIN_NOT_ALLOWED");
    let (status, _, body) = f.send(empty(
        get("/status").header(header::ORIGIN, "http://localhost:3000"),
    ));
    assert_eq!(status, StatusCode::OK, "{body}");
    let no_host = f.send_raw(empty(get("/health")));
    assert_error(&no_host, StatusCode::BAD_REQUEST, "MISSING_HOST");
}

/// The guard itself: a store call on a marked async thread panics in debug builds, so the
/// tests above would fail on any route that skipped the runner.
#[cfg(debug_assertions)]
#[test]
fn a_store_call_on_an_async_thread_fails_in_debug_builds() {
    let f = Fixture::new(AuthMode::Open);
    let directory = f.state.directory().clone();
    let outcome = std::thread::spawn(move || {
        quarry_store::thread_guard::mark_async_thread();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| directory.spaces())).is_err()
    })
    .join()
    .expect("thread");
    assert!(
        outcome,
        "the store ran on a marked thread without complaint"
    );
    // Inside the runner's wrapper it is allowed.
    let directory = f.state.directory().clone();
    std::thread::spawn(move || {
        quarry_store::thread_guard::mark_async_thread();
        quarry_store::thread_guard::allow_blocking(|| directory.spaces()).expect("spaces");
    })
    .join()
    .expect("thread");
}
