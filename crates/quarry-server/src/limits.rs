//! Rate limits at the surfaces (`quarry-limits` keeps the budgets in the store): tool calls
//! per chain of tokens (its root token) on every MCP endpoint, chats per chain, and the delay before answering a failed
//! authentication. The machine's owner (no token) is never limited.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use quarry_access::Principal;
use quarry_limits::{Decision, Kind};
use rmcp::ErrorData as McpError;
use serde_json::json;

use crate::http::{ErrorCode, run_blocking_raw};
use crate::state::AppState;

/// The decision for one unit of `kind` by `principal` (a store call only when this node's
/// lease is spent, and then off the async runtime).
async fn decide(state: &AppState, principal: &Principal, kind: Kind) -> Decision {
    let (Some(limiter), Some(token)) = (
        state.limits(),
        // Counted per chain of tokens (its root), so minting a child or refreshing an
        // OAuth grant does not start a fresh budget.
        principal
            .identity
            .as_ref()
            .and_then(|i| i.root_token_id.clone().or_else(|| i.token_id.clone())),
    ) else {
        return Decision::Allowed;
    };
    if let Some(d) = limiter.try_local(kind, &token) {
        return d;
    }
    let limiter = limiter.clone();
    match run_blocking_raw(move || limiter.take(kind, &token)).await {
        Ok(Ok(d)) => d,
        // A store that cannot count does not stop the work (the failure is logged).
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "rate limit not checked");
            Decision::Allowed
        }
        Err(e) => {
            tracing::warn!(error = %e.detail, "rate limit not checked");
            Decision::Allowed
        }
    }
}

/// `Err` (a JSON-RPC error naming the wait) when the token used up its tool calls.
pub(crate) async fn tool_call(state: &AppState, principal: &Principal) -> Result<(), McpError> {
    match decide(state, principal, Kind::ToolCall).await {
        Decision::Allowed => Ok(()),
        Decision::Limited { retry_after } => {
            let per_minute = state
                .limits()
                .map_or(0, |l| l.settings().tool_calls_per_minute);
            Err(McpError::new(
                rmcp::model::ErrorCode(-32000),
                format!(
                    "rate limited: this token (with the tokens made from it) may make {per_minute} tool calls a minute; retry in {} s",
                    retry_after.as_secs()
                ),
                Some(json!({
                    "error_code": ErrorCode::RateLimited.as_str(),
                    "retry_after_secs": retry_after.as_secs(),
                })),
            ))
        }
    }
}

/// `Err` (429 with `Retry-After`) when the token used up its chats.
pub(crate) async fn chat(state: &AppState, principal: &Principal) -> Result<(), Response> {
    match decide(state, principal, Kind::Chat).await {
        Decision::Allowed => Ok(()),
        Decision::Limited { retry_after } => {
            let per_minute = state.limits().map_or(0, |l| l.settings().chats_per_minute);
            Err(too_many(
                format!(
                    "rate limited: this token (with the tokens made from it) may start {per_minute} chats a minute; retry in {} s",
                    retry_after.as_secs()
                ),
                retry_after,
            ))
        }
    }
}

/// `Err` (429 naming the month's use and when it resets) when the caller's space has spent
/// its monthly model tokens (`QUARRY_MONTHLY_MODEL_TOKENS`), counted from the insight log's
/// daily counts, which every node adds to. A store that cannot count does not stop the chat.
pub(crate) async fn monthly_model_tokens(
    state: &AppState,
    principal: &Principal,
) -> Result<(), Response> {
    let limit = state
        .limits()
        .map_or(0, |l| l.settings().monthly_model_tokens);
    if limit == 0 {
        return Ok(());
    }
    let now = quarry_core::now_millis();
    let (since, until) = quarry_audit::usage::month_of(now);
    let window = quarry_store::InsightWindow {
        space_id: principal.space_id.clone(),
        knowledge_base: None,
        since,
        until,
    };
    let store = state.root_engine().store_handle();
    let used = match run_blocking_raw(move || store.usage_by_subject(&window)).await {
        Ok(Ok(rows)) => rows
            .iter()
            .filter(|r| r.metric == quarry_audit::usage::MODEL_TOKENS)
            .map(|r| r.total)
            .sum::<u64>(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "monthly model tokens not checked");
            return Ok(());
        }
        Err(e) => {
            tracing::warn!(error = %e.detail, "monthly model tokens not checked");
            return Ok(());
        }
    };
    if used < limit {
        return Ok(());
    }
    let resets = quarry_core::iso8601_millis(until);
    Err(too_many(
        format!(
            "this space has used {used} of its {limit} model tokens this month \
             (QUARRY_MONTHLY_MODEL_TOKENS); chats are refused until {resets}"
        ),
        Duration::from_millis(u64::try_from(until - now).unwrap_or(0)),
    ))
}

fn too_many(detail: String, retry_after: Duration) -> Response {
    let status = StatusCode::TOO_MANY_REQUESTS;
    let mut r = (
        status,
        axum::Json(json!({
            "detail": detail,
            "status_code": status.as_u16(),
            "error_code": ErrorCode::RateLimited.as_str(),
        })),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&retry_after.as_secs().to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Counts a failed authentication (per client address unless loopback — behind a local
/// proxy every client is one address — and per presented token) and waits the delay it
/// earned before the refusal is answered.
pub(crate) async fn auth_failure(state: &AppState, client: Option<&str>, presented: Option<&str>) {
    let Some(limiter) = state.limits() else {
        return;
    };
    let mut keys = Vec::new();
    if let Some(ip) = client.filter(|ip| {
        ip.parse::<std::net::IpAddr>()
            .is_ok_and(|a| !a.is_loopback())
    }) {
        keys.push(format!("ip:{ip}"));
    }
    if let Some(secret) = presented {
        // A hash, so the counter never holds a credential.
        keys.push(format!(
            "token:{}",
            &quarry_access::token_hash(secret)[..32]
        ));
    }
    if keys.is_empty() {
        return;
    }
    let limiter = limiter.clone();
    let delay = match run_blocking_raw(move || limiter.auth_failure(&keys)).await {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "failed authentication not counted");
            Duration::ZERO
        }
        Err(_) => Duration::ZERO,
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}
