//! Where this server's OAuth endpoints are, as a client sees them, and the challenge a 401
//! carries so an MCP client can find them (RFC 9728 §5.1).

use axum::http::{HeaderMap, HeaderValue};
use quarry_oauth::Endpoints;

use crate::auth::AuthMode;
use crate::state::AppState;

/// The origin clients reach this server at: `--public-url` when set, else the origin the
/// request was sent to — its `Host`, which the Host check already limited to names this
/// server answers to, and `https` when a proxy says so (`X-Forwarded-Proto`). OAuth's
/// endpoints and the identity providers' redirect URIs are made from it.
pub(crate) fn public_origin(state: &AppState, headers: &HeaderMap) -> String {
    match state.public_url() {
        Some(origin) => origin.to_owned(),
        None => crate::http::base_url(headers).to_ascii_lowercase(),
    }
}

/// The OAuth endpoints for a request, at [`public_origin`].
pub(crate) fn endpoints(state: &AppState, headers: &HeaderMap) -> Endpoints {
    Endpoints::new(&public_origin(state, headers))
}

/// Whether this server signs clients in with OAuth: only when it requires tokens (an open
/// local server has nobody to sign in).
pub(crate) fn enabled(state: &AppState) -> bool {
    state.auth_mode() == AuthMode::Token
}

/// The `WWW-Authenticate` value of a 401 at `path`: a Bearer challenge naming the
/// resource's metadata, so MCP clients can discover how to sign in.
pub(crate) fn challenge(
    state: &AppState,
    headers: &HeaderMap,
    path: &str,
    token_presented: bool,
) -> Option<HeaderValue> {
    let e = endpoints(state, headers);
    let mut value = format!(
        "Bearer realm=\"quarry\", resource_metadata=\"{}\"",
        e.resource_metadata_url(path)
    );
    if token_presented {
        value.push_str(", error=\"invalid_token\"");
    }
    HeaderValue::from_str(&value).ok()
}
