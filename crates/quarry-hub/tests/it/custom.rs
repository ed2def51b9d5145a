//! Custom HTTP tools against real loopback HTTP servers: the outbound guard refuses non-public
//! destinations without sending anything, and allow-listed requests render, send and cap as
//! specified.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use quarry_hub::custom::{CustomToolError, CustomToolSpec, TRUNCATION_MARKER, execute};
use quarry_netguard::{NetPolicy, Refused};
use quarry_test_http::{Reply, Request, Server, unused_port};
use serde_json::{Value, json};

/// A test server on another loopback address (`127.0.0.2:0`, …): Linux routes all of 127/8 to lo.
fn serve_on(addr: &str, handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
    Server::bind(addr, handler).unwrap_or_else(|e| panic!("bind the test server on {addr}: {e}"))
}

// ---------------------------------------------------------------------------------------------

fn spec(url: &str) -> CustomToolSpec {
    CustomToolSpec {
        name: "test_tool".into(),
        description: "A test tool".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        http_url: url.into(),
        http_method: "GET".into(),
        http_headers: BTreeMap::new(),
        http_body_template: None,
        timeout_secs: Some(10),
        max_response_bytes: None,
    }
}

fn allow(list: &str) -> NetPolicy {
    NetPolicy::parse_allow_list(list).unwrap()
}

async fn refused(spec: &CustomToolSpec, args: &Value, policy: &NetPolicy) -> (Refused, String) {
    match execute(spec, args, policy).await {
        Err(CustomToolError::Refused(r)) => {
            let text = CustomToolError::Refused(r.clone()).to_string();
            (r, text)
        }
        other => panic!("{}: expected a refusal, got {other:?}", spec.http_url),
    }
}

#[tokio::test]
async fn non_public_destinations_are_refused_before_anything_is_sent() {
    let server = Server::start(|_| Reply::ok("text/plain", "must not be reached"));
    let port = server.addr().port();
    // A server on ::1 too, where the machine has IPv6 loopback.
    let server6 = Server::bind("[::1]:0", |_| {
        Reply::ok("text/plain", "must not be reached")
    })
    .ok();
    let port6 = server6.as_ref().map_or(port, |s| s.addr().port());
    let loopback =
        "refused: 127.0.0.1 is a loopback address (allow it with --allow-net 127.0.0.1/32)";
    let cases: Vec<(String, &str)> = vec![
        (format!("http://127.0.0.1:{port}/x?q={{{{q}}}}"), loopback),
        (
            "http://10.0.0.1/x".into(),
            "refused: 10.0.0.1 is a private address (allow it with --allow-net 10.0.0.1/32)",
        ),
        (
            "http://172.16.0.1/x".into(),
            "refused: 172.16.0.1 is a private address",
        ),
        (
            "http://192.168.1.1/x".into(),
            "refused: 192.168.1.1 is a private address",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "refused: 169.254.169.254 is the cloud metadata address (link-local)",
        ),
        (
            format!("http://[::1]:{port6}/x"),
            "refused: ::1 is a loopback address (allow it with --allow-net ::1/128)",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/x"),
            "refused: ::ffff:127.0.0.1 embeds the IPv4 address 127.0.0.1, which is a loopback address \
             (allow it with --allow-net 127.0.0.1/32)",
        ),
        (format!("http://2130706433:{port}/x"), loopback),
        (format!("http://0177.0.0.1:{port}/x"), loopback),
        (format!("http://0x7f.0.0.1:{port}/x"), loopback),
        (format!("http://0x7f.1:{port}/x"), loopback),
        (format!("http://127.1:{port}/x"), loopback),
        (
            "http://metadata.google.internal/computeMetadata/v1/".into(),
            "refused: metadata.google.internal is a cloud metadata host name",
        ),
    ];
    for (url, expected) in cases {
        let started = Instant::now();
        let (_, text) = refused(&spec(&url), &json!({"q": "x"}), &NetPolicy::default()).await;
        assert!(
            text.starts_with(expected),
            "{url}: {text:?} should start with {expected:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{url}: a refusal is immediate"
        );
    }
    assert_eq!(
        server.connections(),
        0,
        "the loopback server must see no connection"
    );
    if let Some(s6) = &server6 {
        assert_eq!(s6.connections(), 0);
    }
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_after_resolution() {
    let server = Server::start(|_| Reply::ok("text/plain", "must not be reached"));
    let url = format!("http://localhost:{}/x", server.addr().port());
    let (r, text) = refused(&spec(&url), &json!({}), &NetPolicy::default()).await;
    assert!(matches!(r, Refused::NoAllowedAddress { .. }), "{r:?}");
    assert!(
        text.starts_with("refused: localhost resolves only to refused addresses: ")
            && text.contains("is a loopback address"),
        "{text}"
    );
    assert!(text.contains("--allow-net"), "{text}");
    assert_eq!(server.connections(), 0);

    // Allow-listed, the same name goes through (the resolver keeps the allowed addresses).
    let ok = Server::start(|_| Reply::ok("text/plain", "hello"));
    let url = format!("http://localhost:{}/x", ok.addr().port());
    let resp = execute(&spec(&url), &json!({}), &allow("127.0.0.1/32,::1"))
        .await
        .unwrap();
    assert_eq!((resp.status, resp.body.as_str()), (200, "hello"));
}

#[tokio::test]
async fn a_redirect_to_loopback_is_refused_and_not_followed() {
    // Only 127.0.0.2 is allowed; Linux routes all of 127/8 to lo.
    let target = Server::start(|_| Reply::ok("text/plain", "secret"));
    let to_literal = target.url("/admin");
    let to_name = format!("http://localhost:{}/admin", target.addr().port());
    let to_decimal = format!("http://2130706433:{}/admin", target.addr().port());
    let first = serve_on("127.0.0.2:0", move |r| match r.target.as_str() {
        "/literal" => Reply::redirect(&to_literal),
        "/name" => Reply::redirect(&to_name),
        "/decimal" => Reply::redirect(&to_decimal),
        "/metadata" => Reply::redirect("http://169.254.169.254/latest/meta-data/"),
        "/file" => Reply::redirect("file:///etc/passwd"),
        _ => Reply::status(404, "text/plain", "no"),
    });
    let policy = allow("127.0.0.2/32");

    let (_, text) = refused(&spec(&first.url("/literal")), &json!({}), &policy).await;
    assert_eq!(
        text,
        "refused: 127.0.0.1 is a loopback address (allow it with --allow-net 127.0.0.1/32)"
    );
    let (r, _) = refused(&spec(&first.url("/name")), &json!({}), &policy).await;
    assert!(matches!(r, Refused::NoAllowedAddress { .. }), "{r:?}");
    let (_, text) = refused(&spec(&first.url("/decimal")), &json!({}), &policy).await;
    assert!(
        text.starts_with("refused: 127.0.0.1 is a loopback address"),
        "{text}"
    );
    let (_, text) = refused(&spec(&first.url("/metadata")), &json!({}), &policy).await;
    assert!(
        text.starts_with("refused: 169.254.169.254 is the cloud metadata address"),
        "{text}"
    );
    // A non-http(s) Location is never followed: reqwest hands the 3xx back as it is.
    let resp = execute(&spec(&first.url("/file")), &json!({}), &policy)
        .await
        .unwrap();
    assert_eq!(resp.status, 302);

    assert_eq!(first.requests().len(), 5, "each first hop was allowed");
    assert_eq!(target.connections(), 0, "no redirect target was contacted");
}

#[tokio::test]
async fn redirects_are_limited_and_same_origin_ones_followed() {
    let server = serve_on("127.0.0.2:0", |r| {
        if let Some(n) = r.target.strip_prefix("/loop/") {
            let n: u32 = n.parse().unwrap();
            Reply::redirect(&format!("/loop/{}", n + 1))
        } else if r.target == "/start" {
            Reply::redirect("/end")
        } else {
            Reply::ok("text/plain", format!("at {}", r.target))
        }
    });
    let policy = allow("127.0.0.2/32");
    let resp = execute(&spec(&server.url("/start")), &json!({}), &policy)
        .await
        .unwrap();
    assert_eq!((resp.status, resp.body.as_str()), (200, "at /end"));

    let (r, text) = refused(&spec(&server.url("/loop/0")), &json!({}), &policy).await;
    assert_eq!(
        r,
        Refused::TooManyRedirects {
            max: quarry_netguard::MAX_REDIRECTS
        }
    );
    assert_eq!(text, "refused: more than 5 redirects");
    // The first request plus five followed hops.
    let loops = server
        .requests()
        .iter()
        .filter(|r| r.target.starts_with("/loop/"))
        .count();
    assert_eq!(loops, 1 + quarry_netguard::MAX_REDIRECTS);
}

#[tokio::test]
async fn secret_headers_do_not_follow_a_cross_origin_redirect() {
    let other = serve_on("127.0.0.3:0", |_| Reply::ok("text/plain", "other origin"));
    let other_url = other.url("/landing");
    let first = serve_on("127.0.0.2:0", move |_| Reply::redirect(&other_url));
    let policy = allow("127.0.0.2/32,127.0.0.3/32");

    // With headers: the 302 comes back as the response; the other origin is not contacted.
    let mut with_headers = spec(&first.url("/go"));
    with_headers
        .http_headers
        .insert("X-Api-Key".into(), "k-123-secret".into());
    let resp = execute(&with_headers, &json!({}), &policy).await.unwrap();
    assert_eq!(resp.status, 302);
    assert_eq!(other.connections(), 0);
    assert_eq!(
        first.requests()[0].header("x-api-key"),
        Some("k-123-secret")
    );

    // Without headers the redirect is followed.
    let resp = execute(&spec(&first.url("/go")), &json!({}), &policy)
        .await
        .unwrap();
    assert_eq!((resp.status, resp.body.as_str()), (200, "other origin"));
    assert_eq!(other.requests().len(), 1);
    assert_eq!(other.requests()[0].header("x-api-key"), None);
}

#[tokio::test]
async fn get_with_a_url_template_keeps_values_inside_their_segment() {
    let server =
        Server::start(|r| Reply::ok("application/json", json!({"seen": r.target}).to_string()));
    let mut s = spec(&format!(
        "{}/search/{{{{q}}}}/items?lang={{{{lang}}}}&n={{{{n}}}}",
        server.url("")
    ));
    s.parameters = json!({
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "lang": {"type": "string", "enum": ["en", "fr"]},
            "n": {"type": "integer", "default": 5},
        },
        "required": ["q", "lang"],
    });
    s.http_headers
        .insert("Authorization".into(), "Bearer tok-secret".into());
    s.http_headers
        .insert("X-Client".into(), "quarry test".into());
    let resp = execute(
        &s,
        &json!({"q": "a b/../c?x=1&y=2#frag", "lang": "en"}),
        &allow("127.0.0.1/32"),
    )
    .await
    .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.content_type.as_deref(), Some("application/json"));
    assert!(!resp.truncated);
    let expected = "/search/a%20b%2F..%2Fc%3Fx%3D1%26y%3D2%23frag/items?lang=en&n=5";
    let seen: Value = serde_json::from_str(&resp.body).unwrap();
    assert_eq!(seen["seen"], expected);
    let req = &server.requests()[0];
    assert_eq!(req.method, "GET");
    assert_eq!(req.target, expected);
    assert_eq!(req.header("authorization"), Some("Bearer tok-secret"));
    assert_eq!(req.header("x-client"), Some("quarry test"));
    assert!(req.body.is_empty());
}

#[tokio::test]
async fn post_with_a_json_body_template_escapes_values() {
    let server = Server::start(|r| Reply::status(201, "text/plain", r.body.clone()));
    let mut s = spec(&server.url("/v1/notes"));
    s.http_method = "POST".into();
    s.parameters = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "count": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["query", "count", "tags"],
    });
    s.http_body_template = Some(
        r#"{"q": "{{query}}", "n": {{count}}, "tags": {{tags}}, "label": "n={{count}}"}"#.into(),
    );
    s.http_headers
        .insert("X-Api-Key".into(), "abc-secret".into());
    let query = "he said \"hi\"\nthen left\t\\ </script> {{count}}";
    let resp = execute(
        &s,
        &json!({"query": query, "count": 3, "tags": ["a\"b", "c"]}),
        &allow("127.0.0.1/32"),
    )
    .await
    .unwrap();
    assert_eq!(
        resp.status, 201,
        "a non-2xx... or any status comes back as a response"
    );
    let req = &server.requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("x-api-key"), Some("abc-secret"));
    let body: Value = serde_json::from_slice(&req.body).expect("the body is valid JSON");
    assert_eq!(
        body,
        json!({"q": query, "n": 3, "tags": ["a\"b", "c"], "label": "n=3"})
    );
    assert_eq!(resp.body, String::from_utf8_lossy(&req.body));
}

#[tokio::test]
async fn non_2xx_statuses_are_responses() {
    let server = Server::start(|_| Reply::status(404, "text/plain", "not here"));
    let resp = execute(
        &spec(&server.url("/missing")),
        &json!({}),
        &allow("127.0.0.1"),
    )
    .await
    .unwrap();
    assert_eq!(
        (resp.status, resp.body.as_str(), resp.truncated),
        (404, "not here", false)
    );
    assert_eq!(resp.content_type.as_deref(), Some("text/plain"));
}

#[tokio::test]
async fn large_responses_are_truncated_at_the_cap() {
    let big = "a".repeat(200_000);
    let server = Server::start(move |_| Reply::ok("text/plain", big.clone()));
    let policy = allow("127.0.0.1/32");
    let mut s = spec(&server.url("/big"));
    s.max_response_bytes = Some(1000);
    let resp = execute(&s, &json!({}), &policy).await.unwrap();
    assert!(resp.truncated);
    let (data, marker) = resp.body.split_at(1000);
    assert_eq!(data, "a".repeat(1000));
    assert_eq!(
        marker,
        format!("{TRUNCATION_MARKER} the response was longer than 1000 bytes]")
    );

    // Exactly at the cap: complete, not truncated.
    s.max_response_bytes = Some(200_000);
    let resp = execute(&s, &json!({}), &policy).await.unwrap();
    assert!(!resp.truncated);
    assert_eq!(resp.body.len(), 200_000);

    // A cut inside a multi-byte character drops the partial character.
    let euros = "€".repeat(100); // 3 bytes each
    let server = Server::start(move |_| Reply::ok("text/plain; charset=utf-8", euros.clone()));
    let mut s = spec(&server.url("/euros"));
    s.max_response_bytes = Some(10);
    let resp = execute(&s, &json!({}), &policy).await.unwrap();
    assert!(resp.truncated);
    assert!(
        resp.body.starts_with(&format!("€€€{TRUNCATION_MARKER}")),
        "{}",
        resp.body
    );
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = Server::start(|_| Reply::hang());
    let mut s = spec(&server.url("/slow"));
    s.timeout_secs = Some(1);
    s.http_headers
        .insert("X-Api-Key".into(), "never-shown-secret".into());
    let started = Instant::now();
    let err = execute(&s, &json!({}), &allow("127.0.0.1/32"))
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err, CustomToolError::Timeout { secs: 1 });
    assert_eq!(
        err.to_string(),
        "the request timed out after 1 s without a complete response"
    );
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(!format!("{err} {err:?}").contains("never-shown-secret"));
}

#[tokio::test]
async fn invalid_arguments_fail_before_any_request() {
    let server = Server::start(|_| Reply::ok("text/plain", "must not be reached"));
    let mut s = spec(&format!("{}/city/{{{{city}}}}", server.url("")));
    s.parameters = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city"],
        "additionalProperties": false,
    });
    s.http_headers
        .insert("X-Api-Key".into(), "never-shown-secret".into());
    let policy = allow("127.0.0.1/32");
    let cases = [
        (
            json!({}),
            "invalid arguments: missing required property \"city\"",
        ),
        (
            json!({"city": 5}),
            "invalid arguments: city: expected string, got number",
        ),
        (
            json!({"city": "Oslo", "days": 9}),
            "invalid arguments: days: must be at most 7, got 9",
        ),
        (
            json!({"city": "Oslo", "days": 1.5}),
            "invalid arguments: days: expected integer, got number",
        ),
        (
            json!({"city": "Oslo", "hours": 1}),
            "invalid arguments: unknown property \"hours\"",
        ),
        (
            json!("Oslo"),
            "invalid arguments: expected object, got string",
        ),
        (
            json!({"city": ".."}),
            "invalid arguments: the URL path would contain a \"..\" segment, which would change the path",
        ),
    ];
    for (args, expected) in cases {
        let err = execute(&s, &args, &policy).await.unwrap_err();
        assert!(
            matches!(err, CustomToolError::InvalidArguments(_)),
            "{err:?}"
        );
        assert_eq!(err.to_string(), expected);
        assert!(!format!("{err:?}").contains("never-shown-secret"));
    }
    // An invalid spec is refused too, before anything is sent.
    let mut bad = s.clone();
    bad.http_method = "TRACE".into();
    let err = execute(&bad, &json!({"city": "Oslo"}), &policy)
        .await
        .unwrap_err();
    assert!(matches!(err, CustomToolError::InvalidSpec(_)), "{err:?}");
    assert_eq!(server.connections(), 0);

    // The same spec with good arguments reaches the server.
    let resp = execute(&s, &json!({"city": "Oslo", "days": 2}), &policy)
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(server.requests()[0].target, "/city/Oslo");
}

#[tokio::test]
async fn connection_failures_are_clear_and_keep_secrets() {
    // A port with nothing listening.
    let port = unused_port();
    let mut s = spec(&format!("http://127.0.0.1:{port}/x?token={{{{q}}}}"));
    s.http_headers
        .insert("Authorization".into(), "Bearer never-shown-secret".into());
    let err = execute(&s, &json!({"q": "query-secret"}), &allow("127.0.0.1/32"))
        .await
        .unwrap_err();
    assert!(matches!(err, CustomToolError::Connect(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("connection failed: http://127.0.0.1:{port}/x")),
        "{text}"
    );
    assert!(
        !text.contains("never-shown-secret") && !text.contains("query-secret"),
        "{text}"
    );
}

#[tokio::test]
async fn guarded_client_checks_names_and_redirects_on_its_own() {
    let target = Server::start(|_| Reply::ok("text/plain", "secret"));
    let to = target.url("/");
    let first = serve_on("127.0.0.2:0", move |_| Reply::redirect(&to));
    let client =
        quarry_netguard::guarded_client(&allow("127.0.0.2/32"), Duration::from_secs(5)).unwrap();

    let err = client.get(first.url("/")).send().await.unwrap_err();
    assert!(
        matches!(
            quarry_netguard::refusal_in(&err),
            Some(Refused::Address { .. })
        ),
        "{err:?}"
    );
    let err = client
        .get(format!("http://localhost:{}/", target.addr().port()))
        .send()
        .await
        .unwrap_err();
    assert!(
        matches!(
            quarry_netguard::refusal_in(&err),
            Some(Refused::NoAllowedAddress { .. })
        ),
        "{err:?}"
    );
    assert_eq!(target.connections(), 0);
}
