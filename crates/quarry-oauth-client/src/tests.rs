use std::sync::{Arc, OnceLock};

use quarry_test_http::{Reply, Request, Server};
use serde_json::json;

use super::*;

#[test]
fn challenges_are_read_quoted_or_not() {
    let c = parse_challenge(
        r#"Bearer error="invalid_token", resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", scope="read write""#,
    );
    assert_eq!(c.error.as_deref(), Some("invalid_token"));
    assert_eq!(
        c.resource_metadata.as_deref(),
        Some("https://h/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(c.scope.as_deref(), Some("read write"));
    let c = parse_challenge(r#"Basic realm="x", Bearer scope=read,error="a\"b""#);
    assert_eq!(c.scope.as_deref(), Some("read"));
    assert_eq!(c.error.as_deref(), Some("a\"b"));
    assert_eq!(parse_challenge("Basic realm=\"x\""), Challenge::default());
    assert_eq!(parse_challenge("Bearer"), Challenge::default());
}

/// A protected MCP server whose authorization server lives under a path, metadata only at
/// the places RFC 8414 and RFC 9728 name.
fn protected(s256: bool, announce: bool) -> (Server, Arc<OnceLock<String>>) {
    let base: Arc<OnceLock<String>> = Arc::default();
    let b = base.clone();
    let server = Server::start(move |r: &Request| {
        let base = b.get().cloned().unwrap_or_default();
        match (r.method.as_str(), r.path()) {
            ("POST", "/mcp") => {
                let mut reply = Reply::status(401, "application/json", "{}");
                if announce {
                    reply = reply.header(
                        "WWW-Authenticate",
                        format!(
                            r#"Bearer resource_metadata="{base}/meta/resource", scope="tools""#
                        ),
                    );
                }
                reply
            }
            ("GET", "/meta/resource") | ("GET", "/.well-known/oauth-protected-resource/mcp") => {
                Reply::json(
                    200,
                    &json!({"resource": format!("{base}/mcp"),
                            "authorization_servers": [format!("{base}/tenant")],
                            "scopes_supported": ["tools", "other"]}),
                )
            }
            ("GET", "/.well-known/oauth-authorization-server/tenant") => Reply::json(
                200,
                &json!({"issuer": format!("{base}/tenant"),
                        "authorization_endpoint": format!("{base}/tenant/authorize"),
                        "token_endpoint": format!("{base}/tenant/token"),
                        "registration_endpoint": format!("{base}/tenant/register"),
                        "code_challenge_methods_supported": if s256 { json!(["S256"]) } else { json!(["plain"]) }}),
            ),
            ("POST", "/tenant/register") => {
                let body = r.json();
                if body["redirect_uris"][0] == "http://hub/cb" {
                    Reply::json(201, &json!({"client_id": "c-1"}))
                } else {
                    Reply::json(
                        400,
                        &json!({"error": "invalid_redirect_uri", "error_description": "not allowed"}),
                    )
                }
            }
            ("POST", "/tenant/token") => {
                let form: std::collections::HashMap<String, String> =
                    url::form_urlencoded::parse(&r.body).into_owned().collect();
                match form.get("grant_type").map(String::as_str) {
                    Some("authorization_code")
                        if form.get("code").map(String::as_str) == Some("good")
                            && form.get("code_verifier").map(String::as_str) == Some("v") =>
                    {
                        Reply::json(
                            200,
                            &json!({"access_token": "at-1", "token_type": "Bearer",
                                    "expires_in": 60, "refresh_token": "rt-1", "scope": "tools"}),
                        )
                    }
                    Some("refresh_token") => Reply::json(
                        200,
                        &json!({"access_token": "at-2", "token_type": "bearer", "expires_in": 60}),
                    ),
                    _ => Reply::json(
                        400,
                        &json!({"error": "invalid_grant", "error_description": "code expired"}),
                    ),
                }
            }
            _ => Reply::status(404, "text/plain", "no"),
        }
    });
    let _ = base.set(server.base());
    (server, base)
}

fn client() -> reqwest::Client {
    // The workspace builds reqwest without a built-in TLS provider; the hub installs ring's.
    quarry_netguard::ensure_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap_or_default()
}

#[tokio::test]
async fn discovery_registration_and_tokens() {
    for announce in [true, false] {
        let (server, base) = protected(true, announce);
        let base = base.get().cloned().unwrap_or_default();
        let http = client();
        let found = discover(&http, &|_| Ok(()), &server.url("/mcp"))
            .await
            .unwrap();
        assert_eq!(found.resource, format!("{base}/mcp"));
        assert_eq!(found.issuer, format!("{base}/tenant"));
        assert_eq!(found.token_endpoint, format!("{base}/tenant/token"));
        // The challenge's scope wins over the resource's list.
        let want = if announce { "tools" } else { "tools other" };
        assert_eq!(found.scope.as_deref(), Some(want));

        let creds = register(&http, &found, "http://hub/cb", "Quarry")
            .await
            .unwrap();
        assert_eq!(creds.client_id, "c-1");
        let err = register(&http, &found, "http://evil/cb", "Quarry")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not allowed"), "{err}");

        let pkce = Pkce::new().unwrap();
        assert_eq!(pkce.verifier.len(), 64);
        let url =
            authorization_url(&found, &creds, "http://hub/cb", "st", &pkce.challenge).unwrap();
        let q: std::collections::HashMap<String, String> = Url::parse(&url)
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect();
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["code_challenge"], pkce.challenge);
        assert_eq!(q["resource"], format!("{base}/mcp"));
        assert_eq!(q["state"], "st");
        assert_eq!(q["client_id"], "c-1");

        let t = exchange_code(&http, &found, &creds, "good", "v", "http://hub/cb", 1_000)
            .await
            .unwrap();
        assert_eq!(t.access_token, "at-1");
        assert_eq!(t.refresh_token.as_deref(), Some("rt-1"));
        assert_eq!(t.expires_at, Some(61_000));
        assert!(!format!("{t:?}").contains("at-1"), "tokens never print");
        let err = exchange_code(&http, &found, &creds, "bad", "v", "http://hub/cb", 0)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the authorization server refused: invalid_grant (code expired)"
        );
        // A server that does not rotate: the refresh token stays.
        let t = refresh(&http, &found, &creds, "rt-1", 0).await.unwrap();
        assert_eq!(
            (t.access_token.as_str(), t.refresh_token.as_deref()),
            ("at-2", Some("rt-1"))
        );
    }
}

#[tokio::test]
async fn servers_that_cannot_be_signed_in_to_say_why() {
    let (server, _) = protected(false, true);
    let err = discover(&client(), &|_| Ok(()), &server.url("/mcp"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("S256"), "{err}");
    let open =
        Server::start(|_| Reply::json(200, &json!({"jsonrpc": "2.0", "id": 1, "result": {}})));
    let err = discover(&client(), &|_| Ok(()), &open.url("/mcp"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, OAuthClientError::NotProtected(_, 200)),
        "{err}"
    );
    let bare = Server::start(|r| {
        if r.method == "POST" {
            Reply::status(401, "text/plain", "no")
        } else {
            Reply::status(404, "text/plain", "no")
        }
    });
    let err = discover(&client(), &|_| Ok(()), &bare.url("/mcp"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no protected-resource metadata"),
        "{err}"
    );
    // The guard sees every address before a request goes there.
    let (server, _) = protected(true, true);
    let refuse = |u: &str| -> std::result::Result<(), String> {
        if u.contains("/meta/") {
            Err("not allowed here".into())
        } else {
            Ok(())
        }
    };
    let err = discover(&client(), &refuse, &server.url("/mcp"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not allowed here"), "{err}");
}
