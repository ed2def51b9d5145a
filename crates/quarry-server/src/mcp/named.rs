//! `/mcp/e/<name>`: finds the named tool endpoint the caller may see and hands it to the
//! MCP handler ([`super::QuarryMcp::named`]) on the request. A token made for one endpoint is
//! refused at any other (the authentication middleware refuses it everywhere else).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use quarry_access::AuthFailure;
use serde_json::json;

use crate::auth::Caller;
use crate::http::{ErrorCode, run_blocking_raw};
use crate::service::endpoints;
use crate::state::AppState;

/// The endpoint name of a path that is exactly `/mcp/e/<name>`: one non-empty segment, no
/// trailing slash, nothing after it. Other paths under `/mcp/e/` fall through to the plain
/// `/mcp` service, so a token bound to an endpoint must be refused there (issue 41).
pub(crate) fn endpoint_name(path: &str) -> Option<&str> {
    path.strip_prefix("/mcp/e/")
        .filter(|name| !name.is_empty() && !name.contains('/'))
}

fn envelope(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "jsonrpc": "2.0",
            "error": {"code": -32000, "message": message, "data": {"error_code": code}},
            "id": null
        })),
    )
        .into_response()
}

/// Middleware on `/mcp/e/{name}`, after authentication.
pub(crate) async fn resolve(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let name = endpoint_name(req.uri().path()).unwrap_or("").to_owned();
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return envelope(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal.as_str(),
            "no caller was resolved for this route",
        );
    };
    let bound = caller
        .principal
        .identity
        .as_ref()
        .and_then(|i| i.endpoint.clone());
    let endpoint_only = || {
        let f = AuthFailure::EndpointOnly;
        crate::telemetry::record_auth_failure(f.code());
        envelope(StatusCode::FORBIDDEN, f.code(), &f.to_string())
    };
    let store = state.root_engine().store_handle();
    let wanted = name.clone();
    let principal = caller.principal.clone();
    let found = run_blocking_raw(move || endpoints::visible(&store, &principal, &wanted)).await;
    let endpoint = match found {
        // A bound token learns nothing of other endpoints: missing and foreign look alike.
        Ok(Ok(Some(e))) if bound.as_ref().is_some_and(|id| *id != e.id) => {
            return endpoint_only();
        }
        Ok(Ok(Some(e))) => e,
        Ok(Ok(None)) if bound.is_some() => return endpoint_only(),
        Ok(Ok(None)) => {
            return envelope(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound.as_str(),
                &format!("tool endpoint '{name}' not found"),
            );
        }
        Ok(Err(e)) => {
            return envelope(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Internal.as_str(),
                &crate::http::public_detail(&e),
            );
        }
        Err(e) => {
            return envelope(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Internal.as_str(),
                &e.detail,
            );
        }
    };
    req.extensions_mut().insert(endpoint);
    next.run(req).await
}
