//! The web UI's routes: the shell at `/`, its assets at `/assets/*` (from `quarry-ui`), and
//! the cookie session: `GET /ui/session`, `POST /ui/login`, `POST /ui/logout`.
//!
//! The UI is a client of the same REST API as everyone else. Its session is an access token
//! (pasted at `/ui/login`, or a web session's made by signing in with an identity provider,
//! `api/sign_in.rs`), kept in an HttpOnly, Secure, SameSite=Strict cookie (`quarry_session`) that
//! [`crate::auth`] reads when a request carries no other credential. State-changing requests
//! authenticated by that cookie must echo the `quarry_csrf` cookie in `X-Quarry-CSRF`
//! (double submit; checked in `auth`), and so must `/ui/login` and `/ui/logout`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use crate::auth::session::{
    CSRF_COOKIE, SESSION_COOKIE, cookie, csrf_ok, csrf_refusal, random_hex, secure_for,
    session_cookie,
};
use crate::auth::{self, Caller};
use crate::http::{ApiError, Body, ok, run_blocking, security_headers};
use crate::service::visible_spaces;
use crate::state::AppState;

/// Longest a session cookie lives when the token itself does not expire sooner.
const SESSION_MAX_AGE_SECS: i64 = 30 * 24 * 3600;

/// Routes needing no caller: the shell, assets, login and logout.
pub(crate) fn public_router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(shell))
        .route("/index.html", get(shell))
        .route("/assets/{*path}", get(asset))
        .route("/ui/config", get(config))
        .route("/ui/login", post(login))
        .route("/ui/logout", post(logout))
}

/// Routes with a caller (mounted under the Account surface: no space needs naming).
pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new().route("/ui/session", get(session))
}

/// `GET /`: the HTML shell, with a CSRF cookie when the browser has none yet.
async fn shell(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let mut response = serve_asset(&st, "index.html", &headers);
    if cookie(&headers, CSRF_COOKIE).is_none_or(|v| v.len() < 32)
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{CSRF_COOKIE}={}; Path=/; SameSite=Strict; Secure",
            random_hex(),
        ))
    {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

async fn asset(
    State(st): State<Arc<AppState>>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Response {
    serve_asset(&st, &path, &headers)
}

fn serve_asset(st: &AppState, path: &str, headers: &HeaderMap) -> Response {
    let Some(asset) = st.ui_assets().get(path) else {
        return ApiError::new(StatusCode::NOT_FOUND, format!("Not found: /assets/{path}"))
            .into_response();
    };
    let mut response = if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == asset.etag))
    {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let gzip_ok = headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|e| {
                let mut parts = e.split(';');
                parts.next().is_some_and(|n| n.trim() == "gzip")
                    && !parts.any(|p| p.trim().replace(' ', "") == "q=0")
            });
        match asset.gzip().filter(|_| gzip_ok) {
            Some(z) => {
                let mut r = z.to_vec().into_response();
                r.headers_mut()
                    .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                r
            }
            None => asset.body.clone().into_owned().into_response(),
        }
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    if let Ok(etag) = HeaderValue::from_str(&asset.etag) {
        h.insert(header::ETAG, etag);
    }
    // Paths are not versioned: browsers revalidate (a 304 costs one round trip).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    security_headers(h);
    response
}

/// `GET /ui/config`: what the login screen needs before anyone is signed in: whether this
/// server also works without a token (local mode), so a stale session can be left, and
/// the identity providers people sign in with (a button each).
async fn config(State(st): State<Arc<AppState>>) -> Response {
    let providers: Vec<_> = st
        .sign_in()
        .map(|s| {
            s.config()
                .providers
                .iter()
                .map(|p| {
                    json!({
                        "name": p.name,
                        "title": p.title,
                        "start": format!("/ui/oidc/{}/start", p.name),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    ok(json!({"mode": mode_name(st.auth_mode()), "providers": providers}))
}

fn mode_name(mode: auth::AuthMode) -> &'static str {
    match mode {
        auth::AuthMode::Open => "open",
        auth::AuthMode::Token => "token",
    }
}

/// `GET /ui/session`: who the page is acting as.
async fn session(State(st): State<Arc<AppState>>, caller: Caller) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let principal = caller.principal.clone();
    let spaces = run_blocking(move || visible_spaces(&directory, &principal)).await?;
    let p = &caller.principal;
    let space = spaces
        .iter()
        .find(|s| s["id"] == p.space_id.as_str())
        .cloned();
    Ok(ok(json!({
        "mode": mode_name(st.auth_mode()),
        "user": p.identity.as_ref().map(|c| json!({"id": c.user_id, "name": c.user})),
        "token_id": p.identity.as_ref().and_then(|c| c.token_id.clone()),
        "read_only": p.read_only(),
        // Signed in with an identity provider (a web session) rather than a pasted token.
        "web_session": p.identity.as_ref().is_some_and(|c| c.session),
        "machine_owner": p.scope.machine_owner,
        // Whether this credential manages governance (docs/governance.md).
        "manage": p.scope.manage,
        "access": p.scope.access,
        "space": space.unwrap_or_else(|| json!({"id": p.space_id, "name": p.scope.space})),
        "spaces": spaces,
        // The most tools one hub endpoint lists (`--max-tools`): the bundle builder's cap.
        "max_tools": st.hub().options().max_tools,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    token: String,
}

/// `POST /ui/login {token}`: checks the token and sets the session cookie.
async fn login(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    peer: Option<axum::Extension<crate::audit::ClientAddr>>,
    Body(b): Body<LoginBody>,
) -> Result<Response, Response> {
    let client = peer.map(|p| p.0.0.ip().to_string());
    if !secure_for(&headers) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the web UI signs in only over HTTPS or on localhost: its session cookie is Secure, so a browser on plain HTTP would drop it. Put a TLS proxy in front of Quarry (it must send X-Forwarded-Proto: https)",
        )
        .into_response());
    }
    if !csrf_ok(&headers) {
        return Err(csrf_refusal());
    }
    let token = b.token.trim().to_owned();
    if quarry_access::is_session_token(&token) {
        return Err(auth::rest_refusal(
            quarry_access::AuthFailure::SessionOutsideBrowser,
        ));
    }
    let directory = st.directory().clone();
    let secret = token.clone();
    let principal = run_blocking(move || directory.authenticate_any_space(&secret, None))
        .await
        .map_err(IntoResponse::into_response)?;
    let principal = match principal {
        Ok(p) => p,
        Err(f) => {
            crate::audit::auth_failure(&st, f.code().as_str(), "/ui/login", client.clone());
            crate::limits::auth_failure(&st, client.as_deref(), Some(&token)).await;
            return Err(auth::rest_refusal(f));
        }
    };
    crate::audit::sign_in(&st, &principal, "/ui/login", client);
    let Some(who) = principal.identity else {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "not a user's token").into_response());
    };
    let max_age = match who.expires_at {
        Some(ms) => ((ms - quarry_core::now_millis()) / 1000).clamp(1, SESSION_MAX_AGE_SECS),
        None => SESSION_MAX_AGE_SECS,
    };
    let cookie = session_cookie(&token, max_age);
    let mut response = ok(json!({"user": {"id": who.user_id, "name": who.user}}));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /ui/logout`: forgets the session cookie. A web session (signed in with an identity
/// provider) ends for good, on every node; the answer's `logout_url`, when the provider
/// offers one, ends the provider's session too. A pasted token stays valid.
async fn logout(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, Response> {
    if !csrf_ok(&headers) {
        return Err(csrf_refusal());
    }
    let mut logout_url = None;
    if let Some(token) = cookie(&headers, SESSION_COOKIE)
        .filter(|t| quarry_access::is_session_token(t))
        .map(str::to_owned)
    {
        let directory = st.directory().clone();
        let store = st.root_engine().store_handle();
        let ended = run_blocking(move || {
            let Ok(principal) = directory.authenticate_any_space(&token, None)? else {
                return Ok(None);
            };
            let Some(id) = principal.identity.and_then(|i| i.token_id) else {
                return Ok(None);
            };
            directory.revoke_token(&id, None)?;
            store.web_session(&id)
        })
        .await
        .map_err(IntoResponse::into_response)?;
        if let (Some(session), Some(service)) = (ended, st.sign_in()) {
            let back = format!("{}/", crate::auth::oauth::public_origin(&st, &headers));
            logout_url = service
                .logout_url(&session.provider, &session.id_token, &back)
                .await;
        }
    }
    let mut response = ok(json!({"signed_out": true, "logout_url": logout_url}));
    response.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "quarry_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0",
        ),
    );
    Ok(response)
}
