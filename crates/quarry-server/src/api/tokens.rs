//! The caller's account over REST: its access tokens (`/api/v1/tokens`, seed 004's
//! `POST /api/v1/user/access-token`) and its spaces (`GET /api/v1/user/spaces`). Handlers
//! translate; scope checks live in the engine and in `quarry-access`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use quarry_access::TokenRequest;
use quarry_core::{Access, Error};
use serde::Deserialize;
use serde_json::json;

use crate::auth::Caller;
use crate::http::{ApiError, Body, ok, run_blocking};
use crate::service::visible_spaces;
use crate::state::AppState;

/// Routes about the caller's own account (no space needs naming to list them).
pub(crate) fn account_router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/tokens", get(list_tokens))
        .route("/api/v1/tokens/{id}", delete(revoke_token))
        .route("/api/v1/user/spaces", get(user_spaces))
}

/// Routes that answer in the REST error shape and act in one space (a new token is made
/// for the space of the request).
pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/tokens", post(create_token))
        .route("/api/v1/user/access-token", post(create_access_token))
}

/// New tokens: at most what the caller has (its space, its knowledge bases, read-only when
/// it is), for its own user. The machine's owner names the user.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NewTokenBody {
    #[serde(default, alias = "desc", alias = "info")]
    label: Option<String>,
    /// Only for the machine's owner (open local mode): whose token it is.
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    knowledge_bases: Option<Vec<String>>,
    #[serde(default)]
    read_only: bool,
    /// Hub packages (`time`) and tools (`time.get_current_time`) the token may use.
    #[serde(default)]
    tools: Option<Vec<String>>,
    /// Milliseconds since the epoch, or seconds (QukaAI) when below 10^11.
    #[serde(default)]
    expires_at: Option<i64>,
    #[serde(default)]
    expires_in_days: Option<i64>,
    /// A named tool endpoint (`/mcp/e/<name>`) the token is for: it works there only.
    #[serde(default)]
    endpoint: Option<String>,
    /// The management scope (docs/governance.md): only a caller that manages may give it.
    #[serde(default)]
    manage: bool,
}

fn expiry(b: &NewTokenBody) -> Result<Option<i64>, ApiError> {
    match (b.expires_at, b.expires_in_days) {
        (Some(_), Some(_)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "give expires_at or expires_in_days, not both",
        )),
        (Some(at), None) if at < 100_000_000_000 => Ok(Some(at.saturating_mul(1000))),
        (Some(at), None) => Ok(Some(at)),
        (None, Some(d)) if !(1..=quarry_access::MAX_TOKEN_DAYS).contains(&d) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "expires_in_days must be between 1 and {}",
                quarry_access::MAX_TOKEN_DAYS
            ),
        )),
        (None, Some(d)) => Ok(Some(quarry_core::now_millis() + d * 86_400_000)),
        (None, None) => Ok(None),
    }
}

async fn issue(st: Arc<AppState>, caller: Caller, b: NewTokenBody) -> Result<Response, ApiError> {
    let expires_at = expiry(&b)?;
    if b.manage && !caller.principal.scope.manage {
        return Err(ApiError::from(Error::ManagementForbidden(format!(
            "making a token with the management scope needs a management credential: {}",
            quarry_core::MANAGEMENT_HINT
        ))));
    }
    let scope = caller.engine.scope().clone();
    let user = match (&caller.principal.identity, &b.user) {
        (Some(c), None) => c.user.clone(),
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "a token creates tokens for its own user only; leave out 'user'",
            ));
        }
        (None, Some(u)) => u.clone(),
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "name the token's 'user' (this server runs without --auth, so the caller is the machine's owner, not a user)",
            ));
        }
    };
    // Narrower, never wider: the caller's knowledge bases (names or ids it can see).
    let engine = caller.engine.clone();
    let wanted = b.knowledge_bases.clone();
    let collections = run_blocking(move || -> Result<Option<Vec<String>>, Error> {
        match wanted {
            Some(keys) => keys
                .iter()
                .map(|key| engine.knowledge_base(key).map(|kb| kb.id))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            // An allow-listed caller's knowledge bases are exactly the ones it can see.
            None if engine.scope().collections.is_some() => Ok(Some(
                engine
                    .knowledge_bases()?
                    .into_iter()
                    .map(|kb| kb.id)
                    .collect(),
            )),
            None => Ok(None),
        }
    })
    .await?;
    // The endpoint by name, as the caller sees it (the machine's owner sees every one).
    let endpoint = match b.endpoint.clone() {
        Some(name) => {
            let store = st.root_engine().store_handle();
            let who = caller.principal.clone();
            let directory = st.directory().clone();
            let for_user = user.clone();
            let id = run_blocking(move || {
                let found = if who.is_machine_owner() {
                    // The machine's owner makes tokens for any user: that user's endpoints.
                    store.tool_endpoint(&directory.endpoint_owners(&for_user)?, &name)?
                } else {
                    crate::service::endpoints::visible(&store, &who, &name)?
                };
                found
                    .map(|e| e.id)
                    .ok_or_else(|| Error::NotFound(format!("tool endpoint '{name}' not found")))
            })
            .await?;
            Some(id)
        }
        None => None,
    };
    let directory = st.directory().clone();
    let req = TokenRequest {
        user,
        label: b.label.unwrap_or_default(),
        spaces: vec![caller.principal.space_id.clone()],
        collections,
        read_only: b.read_only || !scope.can(Access::Write),
        tools: b.tools,
        endpoint,
        expires_at,
        // A token's tokens live and reach no further than it (checked in quarry-access); a
        // web session's are the person's own.
        parent: caller
            .principal
            .identity
            .as_ref()
            .and_then(|c| c.parent_for_new_tokens()),
        manage: b.manage,
    };
    let hub = st.hub().clone();
    let issued = run_blocking(move || {
        let mut req = req;
        if let Some(tools) = &req.tools {
            // Names its user's catalog lacks are typos (checked before anything is stored).
            let scope = quarry_access::normalize_tool_scope(tools)?;
            hub.check_tool_scope(&directory.user(&req.user)?.id, &scope)?;
            req.tools = Some(scope);
        }
        directory.create_token(&req)
    })
    .await?;
    Ok((StatusCode::CREATED, ok(issued)).into_response())
}

async fn create_token(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<NewTokenBody>,
) -> Result<Response, ApiError> {
    issue(st, caller, b).await
}

/// Seed 004 §13.2: the same, under QukaAI's path; the body may be empty.
async fn create_access_token(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b = if body.iter().all(u8::is_ascii_whitespace) {
        NewTokenBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}"))
        })?
    };
    issue(st, caller, b).await
}

/// The caller's own tokens (every token for the machine's owner; a token without the
/// management scope: itself and the tokens made from it); never the secrets.
async fn list_tokens(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let principal = caller.principal;
    let tokens = run_blocking(move || directory.tokens_as(&principal)).await?;
    Ok(ok(tokens))
}

async fn revoke_token(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let principal = caller.principal;
    run_blocking(move || directory.revoke_token_as(&principal, &id)).await?;
    Ok(ok(json!({"revoked": true})))
}

/// Seed 004 §6.2: the spaces this caller may use, with its role in each.
async fn user_spaces(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let principal = caller.principal.clone();
    let spaces = run_blocking(move || visible_spaces(&directory, &principal)).await?;
    Ok(ok(json!({ "list": spaces, "total": spaces.len() })))
}
