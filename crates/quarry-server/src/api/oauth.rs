//! OAuth 2.1 for MCP clients over HTTP (the rules are `quarry-oauth`'s): the two metadata
//! documents, registration, the authorization endpoint (which hands the person to the web
//! UI's consent page), token and revocation — public, as OAuth requires — and the consent
//! page's own two calls, which need the person's web UI session. Only a server that requires
//! tokens (`--auth token`) serves any of it.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use quarry_core::Error;
use quarry_oauth::{
    AuthorizeParams, AuthorizeRefusal, CheckedAuthorize, Consent, OAuthError, OAuthServer,
    basic_credentials, parse_form,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{Caller, oauth};
use crate::http::{ApiError, Body, html_escape, ok, run_blocking, run_blocking_raw};
use crate::state::AppState;

/// Public routes (no token: clients call them before they have one).
pub(crate) fn public_router() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(authorization_server_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            get(protected_resource_metadata),
        )
        .route("/oauth/register", post(register))
        .route("/oauth/authorize", get(authorize))
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
}

/// The consent page's calls (the web UI's session authenticates them).
pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new().route(
        "/api/v1/oauth/authorize",
        get(consent_request).post(consent_answer),
    )
}

fn server(st: &AppState) -> OAuthServer {
    OAuthServer::new(st.root_engine().store_handle(), st.directory().clone())
}

/// 404 on a server that does not sign clients in.
fn disabled(path: &str) -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("Not found: {path} (OAuth sign-in is offered only by a server that requires access tokens: --auth token)"),
    )
    .into_response()
}

/// An OAuth JSON answer that no cache may keep (RFC 6749 §5.1).
fn no_store(status: StatusCode, body: Value) -> Response {
    let mut r = (status, axum::Json(body)).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn oauth_error(e: &OAuthError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut r = no_store(status, e.body());
    if e.error == "invalid_client" {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"quarry\""),
        );
    }
    r
}

fn internal(e: impl std::fmt::Display) -> OAuthError {
    OAuthError {
        error: "server_error",
        description: e.to_string(),
        status: 500,
    }
}

async fn authorization_server_metadata(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Response {
    if !oauth::enabled(&st) {
        return disabled("/.well-known/oauth-authorization-server");
    }
    axum::Json(oauth::endpoints(&st, &headers).authorization_server_metadata()).into_response()
}

async fn protected_resource_metadata(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    if !oauth::enabled(&st) {
        return disabled(uri.path());
    }
    let path = uri
        .path()
        .strip_prefix("/.well-known/oauth-protected-resource")
        .unwrap_or("");
    axum::Json(oauth::endpoints(&st, &headers).protected_resource_metadata(path)).into_response()
}

/// `POST /oauth/register` (RFC 7591): 201 with the client's information.
async fn register(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    if !oauth::enabled(&st) {
        return disabled("/oauth/register");
    }
    let meta: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return oauth_error(&OAuthError {
                error: "invalid_client_metadata",
                description: format!("the registration is not JSON: {e}"),
                status: 400,
            });
        }
    };
    let server = server(&st);
    match run_blocking_raw(move || server.register(&meta)).await {
        Ok(Ok(info)) => no_store(StatusCode::CREATED, info),
        Ok(Err(e)) => oauth_error(&e),
        Err(e) => oauth_error(&internal(e.detail)),
    }
}

/// A refusal shown to the person (never redirected: the client or redirect URI is not one
/// this server can trust).
fn shown(e: &OAuthError) -> Response {
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Cannot sign in · Quarry</title></head>\
         <body><main><h1>This application cannot sign in</h1><p>{}</p><p><code>{}</code></p></main></body></html>",
        html_escape(&e.description),
        e.error
    );
    let mut r = (StatusCode::BAD_REQUEST, axum::response::Html(page)).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    r
}

fn see_other(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(v) => {
            let mut r = StatusCode::SEE_OTHER.into_response();
            r.headers_mut().insert(header::LOCATION, v);
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Err(_) => shown(&internal("the redirect URI cannot be sent as a header")),
    }
}

fn params_of(query: &str) -> AuthorizeParams {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    AuthorizeParams::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

async fn check(
    st: &AppState,
    headers: &HeaderMap,
    query: String,
) -> Result<Result<CheckedAuthorize, AuthorizeRefusal>, ApiError> {
    let server = server(st);
    let endpoints = oauth::endpoints(st, headers);
    run_blocking_raw(move || server.check_authorize(&endpoints, &params_of(&query))).await
}

/// `GET /oauth/authorize`: checks the request, then hands the person to the consent page
/// (`/#/authorize?…`, which asks them to sign in first when they have not).
async fn authorize(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if !oauth::enabled(&st) {
        return disabled("/oauth/authorize");
    }
    let query = query.unwrap_or_default();
    match check(&st, &headers, query.clone()).await {
        Ok(Ok(_)) => see_other(&format!("/#/authorize?{query}")),
        Ok(Err(AuthorizeRefusal::Redirect(to))) => see_other(&to),
        Ok(Err(AuthorizeRefusal::Show(e))) => shown(&e),
        Err(e) => shown(&internal(e.detail)),
    }
}

/// The form of a token or revocation request, and its client's Basic credentials.
fn form_and_basic(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(quarry_oauth::Form, Option<(String, String)>), OAuthError> {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';').next().is_some_and(|t| {
                t.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
        });
    if !form_type {
        return Err(OAuthError {
            error: "invalid_request",
            description: "send the parameters as application/x-www-form-urlencoded".into(),
            status: 400,
        });
    }
    let basic = match headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        Some(h) => Some(basic_credentials(h).ok_or_else(|| OAuthError {
            error: "invalid_client",
            description: "the Authorization header is not valid Basic credentials".into(),
            status: 401,
        })?),
        None => None,
    };
    Ok((parse_form(body)?, basic))
}

/// `POST /oauth/token`: a code (with its PKCE verifier) or a refresh token for tokens.
async fn token(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    peer: Option<axum::Extension<crate::audit::ClientAddr>>,
    body: Bytes,
) -> Response {
    if !oauth::enabled(&st) {
        return disabled("/oauth/token");
    }
    let (form, basic) = match form_and_basic(&headers, &body) {
        Ok(x) => x,
        Err(e) => return oauth_error(&e),
    };
    let server = server(&st);
    let endpoints = oauth::endpoints(&st, &headers);
    let client = peer.map(|p| p.0.0.ip().to_string());
    let signing_in = form
        .get("grant_type")
        .is_some_and(|g| g == "authorization_code");
    let directory = st.directory().clone();
    let issued = run_blocking_raw(move || {
        let tokens = server.token(&endpoints, &form, basic)?;
        // An application signing in (not a refresh) is a sign-in of the person behind it.
        let principal = match tokens["access_token"].as_str() {
            Some(t) if signing_in => directory
                .authenticate_any_space(t, None)
                .ok()
                .and_then(Result::ok),
            _ => None,
        };
        Ok::<_, OAuthError>((tokens, principal))
    })
    .await;
    match issued {
        Ok(Ok((tokens, principal))) => {
            if let Some(p) = principal {
                crate::audit::sign_in(&st, &p, "/oauth/token", client);
            }
            no_store(StatusCode::OK, tokens)
        }
        Ok(Err(e)) => {
            if matches!(e.error, "invalid_client" | "invalid_grant") {
                crate::audit::auth_failure(&st, e.error, "/oauth/token", client.clone());
                crate::limits::auth_failure(&st, client.as_deref(), None).await;
            }
            oauth_error(&e)
        }
        Err(e) => oauth_error(&internal(e.detail)),
    }
}

/// `POST /oauth/revoke` (RFC 7009): 200 whether or not the token was known.
async fn revoke(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    if !oauth::enabled(&st) {
        return disabled("/oauth/revoke");
    }
    let (form, basic) = match form_and_basic(&headers, &body) {
        Ok(x) => x,
        Err(e) => return oauth_error(&e),
    };
    let server = server(&st);
    match run_blocking_raw(move || server.revoke(&form, basic)).await {
        Ok(Ok(())) => no_store(StatusCode::OK, json!({})),
        Ok(Err(e)) => oauth_error(&e),
        Err(e) => oauth_error(&internal(e.detail)),
    }
}

/// What the consent page shows about a request it was handed.
fn describe(req: &CheckedAuthorize) -> Value {
    let host = quarry_oauth::redirect_host(&req.redirect_uri);
    json!({
        "client_id": req.client.id,
        "client_name": req.client.name,
        "redirect_uri": req.redirect_uri,
        "redirect_host": host,
        "wants_write": req.wants_write,
        "resource": req.resource,
    })
}

fn consent_refusal(r: AuthorizeRefusal) -> Result<Response, ApiError> {
    match r {
        AuthorizeRefusal::Show(e) => Err(ApiError::new(StatusCode::BAD_REQUEST, e.description)),
        AuthorizeRefusal::Redirect(to) => Ok(ok(json!({"refused": true, "redirect_to": to}))),
    }
}

/// `GET /api/v1/oauth/authorize?<the request's parameters>`: the request, checked again,
/// for the consent page to show.
async fn consent_request(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    _caller: Caller,
) -> Result<Response, ApiError> {
    if !oauth::enabled(&st) {
        return Ok(disabled("/api/v1/oauth/authorize"));
    }
    match check(&st, &headers, query.unwrap_or_default()).await? {
        Ok(req) => Ok(ok(describe(&req))),
        Err(r) => consent_refusal(r),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsentBody {
    /// The authorization request's query string, as the consent page got it.
    request: String,
    /// Whether the person allowed it.
    approve: bool,
    /// Spaces (names or UUIDs) the application may use.
    #[serde(default)]
    spaces: Vec<String>,
    /// Knowledge bases (names or UUIDs) in them; absent: all.
    #[serde(default)]
    knowledge_bases: Option<Vec<String>>,
    /// Hub packages and tools; absent: every tool the person's token reaches.
    #[serde(default)]
    tools: Option<Vec<String>>,
    /// Read only, even when the application asked to write.
    #[serde(default)]
    read_only: bool,
}

/// `POST /api/v1/oauth/authorize`: the person's answer; returns where to send the browser.
async fn consent_answer(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    caller: Caller,
    Body(b): Body<ConsentBody>,
) -> Result<Response, ApiError> {
    if !oauth::enabled(&st) {
        return Ok(disabled("/api/v1/oauth/authorize"));
    }
    let req = match check(&st, &headers, b.request.clone()).await? {
        Ok(req) => req,
        Err(r) => return consent_refusal(r),
    };
    let server = server(&st);
    let endpoints = oauth::endpoints(&st, &headers);
    if !b.approve {
        return Ok(ok(json!({"redirect_to": server.deny(&endpoints, &req)})));
    }
    let principal = caller.principal.clone();
    let hub = st.hub().clone();
    let directory = st.directory().clone();
    let consent = Consent {
        spaces: b.spaces,
        knowledge_bases: b.knowledge_bases,
        tools: b.tools,
        read_only: b.read_only,
    };
    let to = run_blocking(move || -> Result<String, Error> {
        let mut consent = consent;
        if let Some(tools) = &consent.tools {
            // As for tokens: names the person's catalog lacks are typos, refused up front.
            let scope = quarry_access::normalize_tool_scope(tools)?;
            let who = principal
                .identity
                .as_ref()
                .ok_or_else(|| Error::invalid("sign in with a user's access token"))?;
            hub.check_tool_scope(&directory.user(&who.user_id)?.id, &scope)?;
            consent.tools = Some(scope);
        }
        server.approve(&endpoints, &req, &principal, &consent)
    })
    .await?;
    Ok(ok(json!({"redirect_to": to})))
}
