//! Tool policies and approvals over REST (docs/policies.md): the space's admins manage its
//! policies and decide held calls; a caller lists and reads its own requests. Handlers
//! translate; the rules (who may, what a body must say, decided once, bound to the exact
//! call) live in `quarry-policy`. A decision notes the approval's id for the audit log, so
//! the request, the decision and the run share it.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use quarry_core::{Error, now_millis};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{ApiError, Body, Params, ok, ok_list, run_blocking};
use crate::state::AppState;

/// Most approvals one listing returns.
const LIST_MAX: usize = 500;

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/policies", get(list_policies).post(create_policy))
        .route(
            "/api/v1/policies/{policy}",
            get(get_policy).patch(update_policy).delete(delete_policy),
        )
        .route("/api/v1/approvals", get(list_approvals))
        .route("/api/v1/approvals/{id}", get(get_approval))
        .route("/api/v1/approvals/{id}/decision", post(decide))
}

/// `GET /api/v1/policies`: the space's policies (its admins and owners).
async fn list_policies(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let gate = st.gate().clone();
    let p = caller.principal;
    let list = run_blocking(move || quarry_policy::policies(gate.policies(), &p)).await?;
    let shown: Vec<Value> = list.iter().map(quarry_policy::Policy::to_json).collect();
    Ok(ok_list(&shown))
}

/// `GET /api/v1/policies/{policy}` (id or name).
async fn get_policy(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Response, ApiError> {
    let gate = st.gate().clone();
    let p = caller.principal;
    let policy = run_blocking(move || quarry_policy::policy(gate.policies(), &p, &key)).await?;
    Ok(ok(policy.to_json()))
}

/// `POST /api/v1/policies`: 201 with the policy.
async fn create_policy(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(body): Body<Value>,
) -> Result<Response, ApiError> {
    let store = st.root_engine().store_handle();
    let p = caller.principal;
    let policy = st
        .write(move || quarry_policy::create_policy(store.as_ref(), &p, &body, now_millis()))
        .await?;
    let mut response = (StatusCode::CREATED, ok(policy.to_json())).into_response();
    note_policy(&mut response, &policy);
    Ok(response)
}

/// `PATCH /api/v1/policies/{policy}`: the fields given change, the version grows.
async fn update_policy(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(key): Path<String>,
    Body(body): Body<Value>,
) -> Result<Response, ApiError> {
    let store = st.root_engine().store_handle();
    let p = caller.principal;
    let policy = st
        .write(move || quarry_policy::update_policy(store.as_ref(), &p, &key, &body, now_millis()))
        .await?;
    let mut response = ok(policy.to_json());
    note_policy(&mut response, &policy);
    Ok(response)
}

/// `DELETE /api/v1/policies/{policy}`: 204.
async fn delete_policy(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Response, ApiError> {
    let store = st.root_engine().store_handle();
    let p = caller.principal;
    let gone = st
        .write(move || quarry_policy::delete_policy(store.as_ref(), &p, &key))
        .await?;
    let mut response = StatusCode::NO_CONTENT.into_response();
    note_policy(&mut response, &gone);
    Ok(response)
}

/// Names the policy a change touched in its audit event (a refused change is audited by
/// the middleware with its route and status).
fn note_policy(response: &mut Response, policy: &quarry_policy::Policy) {
    response
        .extensions_mut()
        .insert(crate::audit::AuditNote::Change(json!({
            "policy": policy.id,
            "name": policy.name,
            "version": policy.version,
        })));
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    status: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/v1/approvals?status=&limit=`: newest first; the space's admins see every
/// request, others their own.
async fn list_approvals(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Params(q): Params<ListParams>,
) -> Result<Response, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > LIST_MAX {
        return Err(ApiError::from(Error::invalid(format!(
            "limit: must be 1-{LIST_MAX}"
        ))));
    }
    let gate = st.gate().clone();
    let p = caller.principal;
    let now = now_millis();
    let viewer = p.clone();
    let rows = run_blocking(move || {
        quarry_policy::list(gate.policies(), &p, q.status.as_deref(), limit, now)
    })
    .await?;
    let shown: Vec<Value> = rows
        .iter()
        .map(|a| quarry_policy::approval_json(a, now, &viewer))
        .collect();
    Ok(ok_list(&shown))
}

/// `GET /api/v1/approvals/{id}`: one the caller may see (else 404, as for a missing one).
async fn get_approval(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let gate = st.gate().clone();
    let p = caller.principal;
    let viewer = p.clone();
    let row = run_blocking(move || {
        gate.policies()
            .approval(&p.space_id, &id)?
            .filter(|a| quarry_policy::may_see(&p, a))
            .ok_or_else(|| Error::NotFound(format!("no approval '{id}' in this space")))
    })
    .await?;
    Ok(ok(quarry_policy::approval_json(
        &row,
        now_millis(),
        &viewer,
    )))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: String,
    reason: Option<String>,
}

/// `POST /api/v1/approvals/{id}/decision {decision: approve|deny, reason?}`.
async fn decide(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<DecisionBody>,
) -> Result<Response, ApiError> {
    let approve = match b.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(ApiError::from(Error::invalid(format!(
                "decision: expected \"approve\" or \"deny\", not '{other}'"
            ))));
        }
    };
    if b.reason.as_ref().is_some_and(|r| r.chars().count() > 2000) {
        return Err(ApiError::from(Error::invalid(
            "reason: at most 2,000 characters",
        )));
    }
    let gate = st.gate().clone();
    let p = caller.principal;
    let viewer = p.clone();
    let now = now_millis();
    let row = st
        .write(move || {
            quarry_policy::decide(gate.policies(), &p, &id, approve, b.reason.as_deref(), now)
        })
        .await?;
    let mut response = ok(quarry_policy::approval_json(&row, now, &viewer));
    response
        .extensions_mut()
        .insert(crate::audit::AuditNote::Change(json!({
            "approval_id": row.id,
            "decision": row.status,
            "tool": row.tool,
            // How long the call waited for a person (the usage charts' waiting time).
            "waited_ms": row.decided_at.map(|d| d.saturating_sub(row.created_at).max(0)),
        })));
    Ok(response)
}
