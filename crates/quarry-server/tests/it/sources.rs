//! `POST /api/v1/knowledge-bases/{id}/sources` and the outbound address guard, driven
//! in-process: a token-holding admin (not the machine's owner) is refused a source whose URL
//! points at the cloud metadata address, a private or loopback address (literal, IPv6-mapped,
//! or a name resolving there), or the server's disk — a clear 403 that says why, and nothing
//! is created. The machine's owner (an open loopback server, no token) is not guarded.

use crate::common::{Fixture, assert_error, empty, get};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use quarry_server::AuthMode;
use serde_json::{Value, json};

type Answer = (StatusCode, header::HeaderMap, Value);

fn call(f: &Fixture, method: &str, uri: &str, token: Option<&str>, body: Option<Value>) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = match body {
        Some(b) => req
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(b.to_string())),
        None => req.body(Body::empty()),
    }
    .expect("request");
    f.send(req)
}

fn sources_of(f: &Fixture, kb: &str, token: Option<&str>) -> Vec<Value> {
    let mut req = get(&format!("/api/v1/knowledge-bases/{kb}/sources"));
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let (status, _, body) = f.send(empty(req));
    assert_eq!(status, StatusCode::OK, "{body}");
    body["data"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_token_holding_admin_is_refused_non_public_and_local_sources_and_nothing_is_created() {
    let f = Fixture::new(AuthMode::Token);
    let (token, _) = f.token(None);
    let t = Some(token.as_str());
    let (status, _, body) = call(
        &f,
        "POST",
        "/api/v1/knowledge-bases",
        t,
        Some(json!({"name": "docs"})),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let path = "/api/v1/knowledge-bases/docs/sources";
    let metadata = "169.254.169.254 is the cloud metadata address";
    for (body, why) in [
        (
            json!({"kind": "site", "sitemap": "http://169.254.169.254/latest/meta-data/sitemap.xml"}),
            metadata,
        ),
        (
            json!({"kind": "git", "url": "http://169.254.169.254/team/repo.git"}),
            metadata,
        ),
        (
            json!({"kind": "webdav", "url": "http://[::ffff:169.254.169.254]/dav/"}),
            "embeds the IPv4 address 169.254.169.254",
        ),
        (
            json!({"kind": "s3", "url": "s3://bucket", "endpoint": "http://169.254.169.254"}),
            metadata,
        ),
        (
            json!({"kind": "site", "sitemap": "http://metadata.google.internal/sitemap.xml"}),
            "is a cloud metadata host name",
        ),
        (
            json!({"kind": "git", "url": "http://127.0.0.1:5432/x.git"}),
            "127.0.0.1 is a loopback address",
        ),
        (
            json!({"kind": "webdav", "url": "http://10.0.0.8/dav/"}),
            "10.0.0.8 is a private address",
        ),
        (
            json!({"kind": "git", "url": "http://localhost:5432/x.git"}),
            "localhost resolves only to refused addresses",
        ),
        // The server's disk, now the engine's rule, answers as before.
        (
            json!({"kind": "folder", "path": "/etc"}),
            "only the machine's owner may attach one",
        ),
        (
            json!({"kind": "folder", "path": "/no/such/dir"}),
            "only the machine's owner may attach one",
        ),
        (
            json!({"kind": "git", "url": "/srv/repo.git"}),
            "only the machine's owner may attach one",
        ),
    ] {
        let got = call(&f, "POST", path, t, Some(body.clone()));
        assert_error(&got, StatusCode::FORBIDDEN, "FORBIDDEN");
        let detail = got.2["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(why), "{body}: {detail}");
        if !why.contains("machine's owner") {
            assert!(detail.contains("refused: "), "{detail}");
        }
    }
    assert!(sources_of(&f, "docs", t).is_empty(), "nothing was created");
}

#[test]
fn the_machine_owner_is_not_guarded() {
    // An open loopback server: a request without a token is the machine's owner.
    let f = Fixture::new(AuthMode::Open);
    let (status, _, body) = call(
        &f,
        "POST",
        "/api/v1/knowledge-bases",
        None,
        Some(json!({"name": "docs"})),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, body) = call(
        &f,
        "POST",
        "/api/v1/knowledge-bases/docs/sources",
        None,
        Some(json!({"kind": "git", "url": "http://127.0.0.1:9/x.git"})),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(sources_of(&f, "docs", None).len(), 1);
}
