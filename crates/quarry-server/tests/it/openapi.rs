//! `src/openapi.json` (served at `/api/v1/openapi.json`) is hand-written; these tests keep it
//! honest: every route the source declares is documented with its methods, and every
//! documented operation reaches a handler (no `ROUTE_NOT_FOUND`, no 405).

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::Fixture;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use quarry_server::AuthMode;
use serde_json::Value;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// Routes that are not API: the web UI's shell and static assets.
const NOT_API: [&str; 3] = ["/", "/index.html", "/assets/{}"];

/// Endpoints mounted as whole services (MCP transports), not `.route(…)`.
const SERVICES: [&str; 4] = ["/mcp", "/api/mcp", "/api/v1/mcp", "/mcp/e/{}"];

fn openapi() -> Value {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/openapi.json"))
            .expect("read openapi.json");
    serde_json::from_str(&text).expect("openapi.json is JSON")
}

/// `/a/{id}/{*rest}` → `/a/{}/{}`: parameter names may differ between code and document.
fn shape(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if !in_param => out.push(c),
            _ => {}
        }
    }
    out
}

/// `(path shape, method)` for every operation the document lists.
fn documented() -> BTreeSet<(String, String)> {
    let doc = openapi();
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for m in METHODS {
            if item.get(m).is_some() {
                ops.insert((shape(path), m.to_owned()));
            }
        }
    }
    ops
}

/// The expression of each `.route("path", …)` call in `src`, with the path.
fn route_calls(src: &str) -> Vec<(String, String)> {
    let mut calls = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find(".route(") {
        rest = &rest[i + ".route(".len()..];
        let trimmed = rest.trim_start();
        let Some(lit) = trimmed.strip_prefix('"') else {
            continue;
        };
        let Some(end) = lit.find('"') else { break };
        let path = lit[..end].to_owned();
        // The call's arguments: up to the parenthesis that closes `.route(`.
        let mut depth = 1;
        let mut len = 0;
        for (k, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                len = k;
                break;
            }
        }
        calls.push((path, rest[..len].to_owned()));
    }
    calls
}

/// The methods a route expression names: `get(…)`, `.post(…)`, … as whole words.
fn methods_of(expr: &str) -> Vec<String> {
    METHODS
        .iter()
        .filter(|m| {
            expr.match_indices(&format!("{m}(")).any(|(i, _)| {
                !expr[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .map(|m| (*m).to_owned())
        .collect()
}

fn declared() -> BTreeSet<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut ops = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read source");
        for (path, expr) in route_calls(&text) {
            let methods = methods_of(&expr);
            assert!(
                !methods.is_empty(),
                "{}: no method found for {path}",
                f.display()
            );
            for m in methods {
                ops.insert((shape(&path), m));
            }
        }
    }
    ops
}

#[test]
fn every_declared_route_is_documented() {
    let declared = declared();
    assert!(declared.len() > 80, "only {} routes found", declared.len());
    let documented = documented();
    let missing: Vec<String> = declared
        .iter()
        .filter(|(p, _)| !NOT_API.contains(&p.as_str()))
        .filter(|op| !documented.contains(*op))
        .map(|(p, m)| format!("{} {p}", m.to_uppercase()))
        .collect();
    assert!(
        missing.is_empty(),
        "routes missing from openapi.json:\n{}",
        missing.join("\n")
    );
    let paths: BTreeSet<&str> = documented.iter().map(|(p, _)| p.as_str()).collect();
    for s in SERVICES {
        assert!(paths.contains(s), "{s} is not documented");
    }
}

#[test]
fn every_documented_operation_reaches_a_handler() {
    let f = Fixture::new(AuthMode::Open);
    let mut unrouted = Vec::new();
    for (path, method) in documented() {
        if SERVICES.contains(&path.as_str()) {
            continue; // streams; covered by the interop tests
        }
        let uri = path.replace("{}", "x");
        let req = Request::builder()
            .method(method.to_uppercase().as_str())
            .uri(&uri)
            .body(Body::empty())
            .expect("request");
        let (status, _, body) = f.send(req);
        if status == 405 || body["error_code"] == "ROUTE_NOT_FOUND" {
            unrouted.push(format!("{} {uri}: {status} {body}", method.to_uppercase()));
        }
    }
    assert!(
        unrouted.is_empty(),
        "documented but not routed:\n{}",
        unrouted.join("\n")
    );
}

/// Whether `body` is the refusal of a token used away from its tool endpoint, in any
/// surface's shape (REST, JSON-RPC, Dify).
fn is_endpoint_only(status: StatusCode, body: &Value) -> bool {
    status == StatusCode::FORBIDDEN
        && (body["error_code"] == "ENDPOINT_ONLY"
            || body["error"]["data"]["error_code"] == "ENDPOINT_ONLY"
            || body["error_msg"]
                .as_str()
                .is_some_and(|m| m.contains("one tool endpoint")))
}

/// A token bound to endpoint `ops` gets nothing anywhere else: on every documented route,
/// with a trailing slash and with an extra segment, it is refused or answered exactly as a
/// caller with no token at all. Only `/mcp/e/ops` itself serves it (issue 41: `/mcp/e/ops/x`
/// reached the plain `/mcp` service).
#[test]
fn an_endpoint_token_works_at_its_endpoint_only() {
    let f = Fixture::new(AuthMode::Token);
    let (owner, _) = f.token(None);
    let create = Request::builder()
        .method("POST")
        .uri("/api/v1/endpoints")
        .header(header::AUTHORIZATION, format!("Bearer {owner}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(r#"{"name": "ops", "mode": "search"}"#))
        .expect("request");
    let (status, _, body) = f.send(create);
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let endpoint = body["data"]["id"].as_str().expect("endpoint id").to_owned();
    let bound = f
        .state
        .directory()
        .create_token(&quarry_access::TokenRequest {
            user: "ann".into(),
            label: "ops only".into(),
            endpoint: Some(endpoint),
            ..Default::default()
        })
        .expect("bound token")
        .token;
    let request = |method: &str, uri: &str, token: Option<&str>| {
        let mut b = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::ACCEPT, "application/json, text/event-stream");
        if let Some(t) = token {
            b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let body = if method == "GET" || method == "DELETE" {
            Body::empty()
        } else {
            b = b.header(header::CONTENT_TYPE, "application/json");
            Body::from(r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}"#)
        };
        b.body(body).expect("request")
    };
    let mut walked = 0;
    let mut escapes = Vec::new();
    let mut uris: Vec<(String, String)> = Vec::new();
    for (path, method) in documented() {
        let uri = path.replace("{}", "x");
        for variant in [uri.clone(), format!("{uri}/"), format!("{uri}/x")] {
            uris.push((method.to_uppercase(), variant));
        }
    }
    for extra in [
        "/mcp/e/ops/",
        "/mcp/e/ops/x",
        "/mcp/e/nope",
        "/mcp/e/nope/x",
        "/mcp/x",
    ] {
        for method in ["GET", "POST", "DELETE"] {
            uris.push((method.to_owned(), extra.to_owned()));
        }
    }
    for (method, uri) in &uris {
        let (status, _, body) = f.send(request(method, uri, Some(&bound)));
        walked += 1;
        if is_endpoint_only(status, &body) {
            continue;
        }
        let (anonymous, _, _) = f.send(request(method, uri, None));
        if status != anonymous {
            escapes.push(format!(
                "{method} {uri}: {status} with the endpoint token, {anonymous} without: {body}"
            ));
        }
    }
    assert!(walked > 250, "only {walked} requests walked");
    assert!(
        escapes.is_empty(),
        "an endpoint token reached past its endpoint:\n{}",
        escapes.join("\n")
    );
    // Its own endpoint serves it.
    let init = r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}"#;
    let own = Request::builder()
        .method("POST")
        .uri("/mcp/e/ops")
        .header(header::AUTHORIZATION, format!("Bearer {bound}"))
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(init))
        .expect("request");
    let (status, _, body) = f.send(own);
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[test]
fn the_route_scan_reads_method_chains() {
    let src = r#"Router::new()
        .route("/a/{id}", get(one).delete(remove))
        .route(
            "/b",
            post(add).get(|c: Caller| get_collection(c, Path("b".into()))),
        )"#;
    let calls = route_calls(src);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].0, "/a/{id}");
    assert_eq!(methods_of(&calls[0].1), ["get", "delete"]);
    assert_eq!(methods_of(&calls[1].1), ["get", "post"]);
    assert_eq!(shape("/files/{bucket}/{*path}"), "/files/{}/{}");
}
