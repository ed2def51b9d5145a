//! The audit log over REST: `GET /api/v1/audit` (filters and pages, newest first) for the
//! space's admins, and the same as JSON lines (`?format=jsonl`) for export. What is recorded
//! and how is `crate::audit`'s and `quarry-audit`'s.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use quarry_audit::{AuditQuery, AuditRecord};
use quarry_core::{Access, Error};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{ApiError, Params, ok, run_blocking};
use crate::state::AppState;

/// Events per page by default, and at most.
const PAGE_DEFAULT: usize = 100;
const PAGE_MAX: usize = 1000;
/// Most events one export carries (newest first); page with `before` for more.
const EXPORT_MAX: usize = 100_000;
/// How long a read waits for this node's queued events to reach the store.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new().route("/api/v1/audit", get(list))
}

#[derive(Default)]
struct AuditParams {
    action: Option<String>,
    /// A user's name or UUID.
    user: Option<String>,
    /// A token's UUID.
    token: Option<String>,
    outcome: Option<String>,
    /// Milliseconds since the epoch.
    since: Option<i64>,
    until: Option<i64>,
    /// The previous page's `next_before`.
    before: Option<i64>,
    limit: Option<usize>,
    /// `json` (default) or `jsonl` (an export).
    format: Option<String>,
    /// The machine's owner only: every space's events and refusals outside any space.
    all_spaces: bool,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

fn record_json(r: &AuditRecord) -> Value {
    let e = &r.event;
    json!({
        "id": r.id,
        "at": quarry_core::iso8601_millis(e.at),
        "at_ms": e.at,
        "space_id": e.space_id,
        "user_id": e.user_id,
        "user": e.user_name,
        "token_id": e.token_id,
        "client": e.client,
        "action": e.action,
        "target": e.target,
        "outcome": e.outcome,
        "duration_ms": e.duration_ms,
        "detail": serde_json::from_str::<Value>(&e.detail).unwrap_or(Value::Null),
    })
}

async fn list(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Params(params): Params<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let p = parse(&params)?;
    // Space admins read their space's log; nobody reads another space's.
    caller.engine.scope().require_manage(
        Access::Admin,
        "reading the audit log (its space's admins and owners)",
    )?;
    if p.all_spaces && !caller.principal.is_machine_owner() {
        return Err(ApiError::from(Error::Forbidden(
            "all_spaces is for the machine's owner (the CLI, or a server without --auth)".into(),
        )));
    }
    let export = match p.format.as_deref() {
        None | Some("json") => false,
        Some("jsonl") => true,
        Some(other) => return Err(bad(format!("format must be json or jsonl, not '{other}'"))),
    };
    let limit = match p.limit {
        None if export => EXPORT_MAX,
        None => PAGE_DEFAULT,
        Some(n) if (1..=PAGE_MAX).contains(&n) || (export && (1..=EXPORT_MAX).contains(&n)) => n,
        Some(n) => {
            return Err(bad(format!(
                "limit must be from 1 to {} (got {n})",
                if export { EXPORT_MAX } else { PAGE_MAX }
            )));
        }
    };
    if let Some(o) = p.outcome.as_deref()
        && ![quarry_audit::OK, quarry_audit::ERROR, quarry_audit::DENIED].contains(&o)
    {
        return Err(bad(format!(
            "outcome must be ok, error or denied, not '{o}'"
        )));
    }
    let directory = st.directory().clone();
    let state = st.clone();
    let space_id = (!p.all_spaces).then(|| caller.principal.space_id.clone());
    let records = run_blocking(move || -> Result<Vec<AuditRecord>, Error> {
        // This node's own events are in the store before it is read.
        if let Some(log) = state.audit() {
            log.flush(FLUSH_WAIT);
        }
        let user_id = match &p.user {
            // An unknown user has no events; saying so would tell who exists.
            Some(key) => Some(match directory.user(key) {
                Ok(u) => u.id,
                Err(Error::NotFound(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e),
            }),
            None => None,
        };
        state
            .root_engine()
            .store_handle()
            .audit_events(&AuditQuery {
                space_id,
                action: p.action,
                user_id,
                token_id: p.token,
                outcome: p.outcome,
                since: p.since,
                until: p.until,
                before_id: p.before,
                limit,
            })
    })
    .await?;
    if export {
        let mut body = String::new();
        for r in &records {
            body.push_str(&record_json(r).to_string());
            body.push('\n');
        }
        let mut response = (StatusCode::OK, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        );
        return Ok(response);
    }
    let next_before = (records.len() == limit)
        .then(|| records.last().map(|r| r.id))
        .flatten();
    let items: Vec<Value> = records.iter().map(record_json).collect();
    Ok(ok(json!({ "items": items, "next_before": next_before })))
}

/// The query string, strictly: an unknown parameter is a 400 naming it (a typo would
/// otherwise widen the read); credential parameters are the middleware's.
fn parse(pairs: &[(String, String)]) -> Result<AuditParams, ApiError> {
    let mut p = AuditParams::default();
    let int = |k: &str, v: &str| -> Result<i64, ApiError> {
        v.trim().parse::<i64>().map_err(|_| {
            bad(format!(
                "{k} must be an integer (milliseconds since the epoch, or an event id), not '{v}'"
            ))
        })
    };
    for (k, v) in pairs {
        let text = || Some(v.trim().to_owned()).filter(|s| !s.is_empty());
        match k.as_str() {
            "action" => p.action = text(),
            "user" => p.user = text(),
            "token_id" => p.token = text(),
            "outcome" => p.outcome = text(),
            "since" => p.since = Some(int(k, v)?),
            "until" => p.until = Some(int(k, v)?),
            "before" => p.before = Some(int(k, v)?),
            "limit" => {
                p.limit = Some(
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| bad(format!("limit must be a positive integer, not '{v}'")))?,
                )
            }
            "format" => p.format = text(),
            "all_spaces" => p.all_spaces = matches!(v.trim(), "true" | "1" | "on"),
            "token" | "space_id" | "space" | "kb" | "resource" => {}
            other => {
                return Err(bad(format!(
                    "unknown parameter '{other}': use action, user, token_id, outcome, since, until, before, limit, format or all_spaces"
                )));
            }
        }
    }
    Ok(p)
}
