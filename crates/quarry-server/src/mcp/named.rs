//! `/mcp/e/<name>`: finds the named tool endpoint the caller may see and hands it to the
//! MCP handler ([`super::QuarryMcp::named`]) on the request. A token made for one endpoint is
//! refused at any other (the authentication middleware refuses it everywhere else).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use quarry_access::AuthFailure;

use crate::auth::{Caller, endpoint_name, jsonrpc_refusal};
use crate::http::{ErrorCode, run_blocking_raw, status_of};
use crate::service::endpoints;
use crate::state::AppState;

/// A JSON-RPC refusal (`-32000`, `data.error_code`) with its code's HTTP status.
fn envelope(code: ErrorCode, message: &str) -> Response {
    (status_of(code), axum::Json(jsonrpc_refusal(code, message))).into_response()
}

/// Middleware on `/mcp/e/{name}`, after authentication.
pub(crate) async fn resolve(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let name = endpoint_name(req.uri().path()).unwrap_or("").to_owned();
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return envelope(ErrorCode::Internal, "no caller was resolved for this route");
    };
    let bound = caller
        .principal
        .identity
        .as_ref()
        .and_then(|i| i.endpoint.clone());
    let endpoint_only = || {
        let f = AuthFailure::EndpointOnly;
        crate::telemetry::record_auth_failure(f.code());
        envelope(f.code(), &f.to_string())
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
                ErrorCode::NotFound,
                &format!("tool endpoint '{name}' not found"),
            );
        }
        Ok(Err(e)) => {
            return envelope(ErrorCode::Internal, &crate::http::public_detail(&e));
        }
        Err(e) => {
            return envelope(ErrorCode::Internal, &e.detail);
        }
    };
    req.extensions_mut().insert(endpoint);
    next.run(req).await
}
