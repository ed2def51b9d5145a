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

/// A space's monthly budget of model tokens, and what it spent this month.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelBudget {
    /// What the space's owner set (`None`: nothing of its own).
    pub(crate) own: Option<u64>,
    /// The server's ceiling for every space (`QUARRY_MONTHLY_MODEL_TOKENS`; `None`: none).
    pub(crate) server: Option<u64>,
    /// Tokens spent this month, every purpose (chat, embedding, expansion, reranking).
    pub(crate) used: u64,
    /// This UTC month's first instant and the next month's (Unix ms).
    pub(crate) month: (i64, i64),
}

impl ModelBudget {
    /// The limit that applies: the owner's, never above the server's.
    pub(crate) fn limit(&self) -> Option<u64> {
        match (self.own, self.server) {
            (Some(own), Some(server)) => Some(own.min(server)),
            (own, server) => own.or(server),
        }
    }
}

/// Where a space's own monthly limit is kept (the store's settings).
fn budget_key(space_id: &str) -> String {
    format!("space/{space_id}/monthly_model_tokens")
}

/// The server's ceiling (0 in the settings: none).
pub(crate) fn server_model_tokens(state: &AppState) -> Option<u64> {
    state
        .limits()
        .map(|l| l.settings().monthly_model_tokens)
        .filter(|n| *n > 0)
}

/// Reads `space_id`'s budget; `used` only when a limit applies or `always_count`. Blocking.
pub(crate) fn model_budget(
    store: &dyn quarry_store::Store,
    server: Option<u64>,
    space_id: &str,
    always_count: bool,
) -> Result<ModelBudget, quarry_core::Error> {
    let own = store
        .meta(&budget_key(space_id))?
        .and_then(|v| v.parse::<u64>().ok());
    let month = quarry_audit::usage::month_of(quarry_core::now_millis());
    let mut budget = ModelBudget {
        own,
        server,
        used: 0,
        month,
    };
    if budget.limit().is_some() || always_count {
        let window = quarry_store::InsightWindow {
            space_id: space_id.to_owned(),
            knowledge_base: None,
            since: month.0,
            until: month.1,
        };
        budget.used = store
            .usage_by_subject(&window)?
            .iter()
            .filter(|r| r.metric == quarry_audit::usage::MODEL_TOKENS)
            .map(|r| r.total)
            .sum();
    }
    Ok(budget)
}

/// Sets (`None`: clears) `space_id`'s own monthly limit. Blocking.
pub(crate) fn set_model_budget(
    store: &dyn quarry_store::Store,
    space_id: &str,
    tokens: Option<u64>,
) -> Result<(), quarry_core::Error> {
    let value = tokens.map(|n| n.to_string()).unwrap_or_default();
    store.set_meta(&budget_key(space_id), &value)
}

/// `Err` (429 naming the month's use, whose limit it is and when it resets) when the
/// caller's space has spent its monthly model tokens: its owner's limit, never above the
/// server's `QUARRY_MONTHLY_MODEL_TOKENS`, counted from the insight log's daily counts,
/// which every node adds to. A store that cannot count does not stop the chat.
pub(crate) async fn monthly_model_tokens(
    state: &AppState,
    principal: &Principal,
) -> Result<(), Response> {
    let server = server_model_tokens(state);
    let store = state.root_engine().store_handle();
    let space_id = principal.space_id.clone();
    let budget = match run_blocking_raw(move || {
        model_budget(store.as_ref(), server, &space_id, false)
    })
    .await
    {
        Ok(Ok(budget)) => budget,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "monthly model tokens not checked");
            return Ok(());
        }
        Err(e) => {
            tracing::warn!(error = %e.detail, "monthly model tokens not checked");
            return Ok(());
        }
    };
    let Some(limit) = budget.limit() else {
        return Ok(());
    };
    if budget.used < limit {
        return Ok(());
    }
    let whose = if budget.own == Some(limit) {
        "set by the space's owner"
    } else {
        "QUARRY_MONTHLY_MODEL_TOKENS"
    };
    let (_, until) = budget.month;
    let resets = quarry_core::iso8601_millis(until);
    let now = quarry_core::now_millis();
    Err(too_many(
        format!(
            "this space has used {} of its {limit} model tokens this month ({whose}); \
             chats are refused until {resets}",
            budget.used
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

#[cfg(test)]
mod tests {
    use super::ModelBudget;

    #[test]
    fn the_owners_limit_applies_under_the_servers_ceiling() {
        let budget = |own, server| ModelBudget {
            own,
            server,
            used: 0,
            month: (0, 1),
        };
        assert_eq!(budget(None, None).limit(), None);
        assert_eq!(budget(Some(500), None).limit(), Some(500));
        assert_eq!(budget(None, Some(900)).limit(), Some(900));
        assert_eq!(budget(Some(500), Some(900)).limit(), Some(500));
        // An owner cannot raise the server's ceiling.
        assert_eq!(budget(Some(5000), Some(900)).limit(), Some(900));
    }
}
