//! People's sign-in through an identity provider (issue 69): `GET /ui/oidc/{provider}/start`
//! sends the browser to the provider; `GET /ui/oidc/callback` finishes, sets the web
//! session's cookie and sends the browser back to where it started (the web UI, or the
//! OAuth consent page an MCP connector opened). The protocol is `quarry-oidc`'s; what the
//! sign-in makes (user, group mapping, session token) is the directory's. Failures answer a
//! page that says what happened, in words, and change nothing.
//!
//! The started sign-in is kept in the store under the hash of its `state`, so the callback
//! may reach any node, and is taken once: a replayed callback finds nothing. The browser
//! keeps the state in a cookie (`quarry_oidc_state`, `SameSite=Lax` so it comes back with
//! the provider's redirect) that must equal the callback's: a callback forged into someone
//! else's browser (login CSRF) is refused.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use quarry_oidc::{OidcError, state_hash};
use serde::Deserialize;

use crate::auth::oauth::public_origin;
use crate::auth::session::{SIGN_IN_STATE_COOKIE, cookie, secure_for, session_cookie};
use crate::http::{message_page, run_blocking, run_blocking_raw};
use crate::state::AppState;

/// Routes needing no caller (the person is signing in).
pub(crate) fn public_router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/ui/oidc/callback", get(callback))
        .route("/ui/oidc/{provider}/start", get(start))
}

/// Where this server's callback is, as the provider must have it registered.
fn redirect_uri(st: &AppState, headers: &HeaderMap) -> String {
    format!("{}/ui/oidc/callback", public_origin(st, headers))
}

/// A path on this server to go back to (`/`, `/#/authorize?…`); anything else is `/`.
fn safe_return_to(raw: Option<&str>) -> String {
    match raw {
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.starts_with("/\\")
                && p.len() <= 2048
                && !p.chars().any(char::is_control) =>
        {
            p.to_owned()
        }
        _ => "/".to_owned(),
    }
}

fn problem(status: StatusCode, message: &str) -> Response {
    message_page(status, "Sign-in failed", message)
}

fn no_provider() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "this server has no identity provider configured: sign in with an access token",
    )
}

/// The page for an error of the provider or its tokens (the detail goes to the log too).
fn oidc_problem(e: &OidcError) -> Response {
    let status = match e {
        OidcError::UnknownProvider(_) => StatusCode::NOT_FOUND,
        OidcError::Unreachable(_) | OidcError::Provider(_) => StatusCode::BAD_GATEWAY,
        OidcError::Refused { .. } | OidcError::Token(_) => StatusCode::UNAUTHORIZED,
        OidcError::NotAllowed(_) => StatusCode::FORBIDDEN,
    };
    tracing::warn!(error = %e, "sign-in with an identity provider failed");
    let hint = match e {
        OidcError::Unreachable(_) | OidcError::Provider(_) => {
            " Try again later, or sign in with an access token; everything else on this server works as before."
        }
        _ => "",
    };
    problem(status, &format!("{e}.{hint}"))
}

#[derive(Deserialize)]
struct StartQuery {
    return_to: Option<String>,
}

/// `GET /ui/oidc/{provider}/start[?return_to=/path]`.
async fn start(
    State(st): State<Arc<AppState>>,
    Path(provider): Path<String>,
    Query(q): Query<StartQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(service) = st.sign_in().cloned() else {
        return no_provider();
    };
    if !secure_for(&headers) {
        return problem(
            StatusCode::BAD_REQUEST,
            "signing in works only over HTTPS or on localhost: the session cookie is Secure. Put a TLS proxy in front of Quarry (it must send X-Forwarded-Proto: https)",
        );
    }
    let started = match service
        .start(
            &provider,
            &redirect_uri(&st, &headers),
            &safe_return_to(q.return_to.as_deref()),
        )
        .await
    {
        Ok(s) => s,
        Err(e) => return oidc_problem(&e),
    };
    let store = st.root_engine().store_handle();
    let request = started.request;
    if let Err(e) = run_blocking(move || store.put_sign_in_request(&request)).await {
        return e.into_response();
    }
    let mut response = (StatusCode::FOUND, ()).into_response();
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&started.url) {
        h.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{SIGN_IN_STATE_COOKIE}={}; Path=/ui/oidc; HttpOnly; Secure; SameSite=Lax; Max-Age=600",
        started.state
    )) {
        h.append(header::SET_COOKIE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /ui/oidc/callback?code&state` (or `?error&state`).
async fn callback(
    State(st): State<Arc<AppState>>,
    Query(q): Query<CallbackQuery>,
    headers: HeaderMap,
    peer: Option<axum::Extension<crate::audit::ClientAddr>>,
) -> Response {
    let client = peer.map(|p| p.0.0.ip().to_string());
    let Some(service) = st.sign_in().cloned() else {
        return no_provider();
    };
    let refuse = |code: &str, status: StatusCode, message: &str| {
        crate::audit::auth_failure(&st, code, "/ui/oidc/callback", client.clone());
        problem(status, message)
    };
    let (Some(state), Some(kept)) = (q.state.as_deref(), cookie(&headers, SIGN_IN_STATE_COOKIE))
    else {
        return refuse(
            "SIGN_IN_STATE",
            StatusCode::BAD_REQUEST,
            "this sign-in was not started in this browser, or it took longer than ten minutes: start it again",
        );
    };
    if !quarry_core::constant_time_eq(state.as_bytes(), kept.as_bytes()) {
        return refuse(
            "SIGN_IN_STATE",
            StatusCode::BAD_REQUEST,
            "this sign-in's state does not match the one this browser started (another tab, or a forged link): start it again",
        );
    }
    let store = st.root_engine().store_handle();
    let hash = state_hash(state);
    let taken =
        run_blocking(move || store.take_sign_in_request(&hash, quarry_core::now_millis())).await;
    let request = match taken {
        Ok(Some(r)) => r,
        Ok(None) => {
            return refuse(
                "SIGN_IN_STATE",
                StatusCode::BAD_REQUEST,
                "this sign-in was already used or has expired: start it again",
            );
        }
        Err(e) => return e.into_response(),
    };
    if let Some(error) = &q.error {
        let e = OidcError::Refused {
            error: error.clone(),
            description: q.error_description.clone(),
        };
        crate::audit::auth_failure(&st, "SIGN_IN_REFUSED", "/ui/oidc/callback", client.clone());
        return oidc_problem(&e);
    }
    let Some(code) = q.code.as_deref().filter(|c| !c.is_empty()) else {
        return refuse(
            "SIGN_IN_STATE",
            StatusCode::BAD_REQUEST,
            "the identity provider sent neither a code nor an error",
        );
    };
    let verified = match service.finish(&request, code).await {
        Ok(v) => v,
        Err(e) => {
            crate::audit::auth_failure(&st, "SIGN_IN_REFUSED", "/ui/oidc/callback", client.clone());
            return oidc_problem(&e);
        }
    };
    let Some(provider) = service.config().provider(&request.provider).cloned() else {
        return problem(
            StatusCode::NOT_FOUND,
            "the identity provider is no longer configured",
        );
    };
    let session_ms = service.config().session_ms;
    let label = session_label(&provider.title, &headers);
    let directory = st.directory().clone();
    let store = st.root_engine().store_handle();
    let made = run_blocking_raw(move || -> quarry_core::Result<_> {
        let signed_in =
            directory.sign_in_person(&verified.person, &provider.rules, &label, session_ms)?;
        store.put_web_session(&quarry_store::WebSession {
            token_id: signed_in.session.record.id.clone(),
            provider: provider.name.clone(),
            issuer: verified.person.issuer.clone(),
            subject: verified.person.subject.clone(),
            id_token: verified.id_token,
            created_at: quarry_core::now_millis(),
        })?;
        let principal = directory
            .authenticate_any_space(&signed_in.session.token, None)?
            .map_err(|f| quarry_core::Error::Storage(f.to_string()))?;
        Ok((signed_in, principal))
    })
    .await;
    let (signed_in, principal) = match made {
        Ok(Ok(made)) => made,
        Ok(Err(quarry_core::Error::Forbidden(m))) => {
            return refuse("SIGN_IN_NO_SPACE", StatusCode::FORBIDDEN, &m);
        }
        Ok(Err(e)) => return crate::http::ApiError::from(e).into_response(),
        Err(e) => return e.into_response(),
    };
    crate::audit::sign_in(&st, &principal, "/ui/oidc/callback", client);
    let max_age = (session_ms / 1000).max(1);
    let mut response = (StatusCode::FOUND, ()).into_response();
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&request.return_to) {
        h.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&session_cookie(&signed_in.session.token, max_age)) {
        h.append(header::SET_COOKIE, v);
    }
    h.append(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "quarry_oidc_state=; Path=/ui/oidc; HttpOnly; Secure; SameSite=Lax; Max-Age=0",
        ),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The session token's label: the provider and the browser, so a list of sessions tells
/// them apart (printable ASCII, cut short).
fn session_label(provider_title: &str, headers: &HeaderMap) -> String {
    let agent: String = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(80)
        .collect();
    let title: String = provider_title
        .chars()
        .filter(|c| !c.is_control())
        .take(60)
        .collect();
    if agent.trim().is_empty() {
        format!("web session: {title}")
    } else {
        format!("web session: {title} ({})", agent.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_on_this_server_are_returned_to() {
        assert_eq!(safe_return_to(Some("/#/authorize?x=1")), "/#/authorize?x=1");
        assert_eq!(safe_return_to(Some("/")), "/");
        for bad in [
            "//evil.example/",
            "/\\evil",
            "https://evil.example/",
            "x",
            "/\n",
        ] {
            assert_eq!(safe_return_to(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_return_to(None), "/");
    }
}
