//! What the usage charts count, derived here — where the audit's words are owned — from the
//! events and searches the writer stores: each becomes at most one [`UsageCount`] on its
//! UTC day, for its space, person and token. Events outside a space count nowhere.

use quarry_store::{AuditEvent, DAY_MS, SearchRecord, UsageCount};
use serde_json::Value;

use crate::{APPROVAL_REQUEST, OK, SIGN_IN, SOURCE_SYNC, TOOL_CALL, WRITE};

/// Searches on any surface (subject: the surface).
pub const SEARCHES: &str = "searches";
/// Searches that found nothing (subject: the surface).
pub const UNANSWERED: &str = "unanswered";
/// MCP tool calls (subject: the tool as called, `package.tool` for an upstream's; total:
/// milliseconds taken).
pub const TOOL_CALLS: &str = "tool_calls";
/// Tool calls that failed or were refused (subject: the tool).
pub const TOOL_FAILURES: &str = "tool_failures";
/// Chat answers asked for (`POST /api/v1/chat`).
pub const CHAT_ANSWERS: &str = "chat_answers";
/// Tool calls held for a person's approval (subject: the tool).
pub const APPROVALS: &str = "approvals";
/// Approvals decided (subject: the decision; total: milliseconds the call waited).
pub const APPROVAL_DECISIONS: &str = "approval_decisions";
/// Document uploads (`POST …/documents` that succeeded).
pub const UPLOADS: &str = "uploads";
/// Source syncs that failed (subject: the source).
pub const SYNC_FAILURES: &str = "sync_failures";
/// Sign-ins to the web UI (subject: how).
pub const SIGN_INS: &str = "sign_ins";

/// Every metric, in the order the charts list them.
pub const METRICS: &[&str] = &[
    SEARCHES,
    UNANSWERED,
    CHAT_ANSWERS,
    TOOL_CALLS,
    TOOL_FAILURES,
    APPROVALS,
    APPROVAL_DECISIONS,
    UPLOADS,
    SYNC_FAILURES,
    SIGN_INS,
];

const CHAT_ROUTE: &str = "POST /api/v1/chat";
const UPLOAD_ROUTE: &str = "POST /api/v1/knowledge-bases/{id}/documents";

fn count(
    space_id: &str,
    at: i64,
    metric: &str,
    subject: &str,
    user_id: Option<&str>,
    token_id: Option<&str>,
    total: u64,
) -> UsageCount {
    UsageCount {
        space_id: space_id.to_owned(),
        day: at.div_euclid(DAY_MS),
        metric: metric.to_owned(),
        subject: subject.to_owned(),
        user_id: user_id.unwrap_or_default().to_owned(),
        token_id: token_id.unwrap_or_default().to_owned(),
        count: 1,
        total,
    }
}

/// What `event` adds to the usage counts, if anything. Searches are counted from their
/// [`SearchRecord`]s instead (every surface makes one; only REST's are audit events).
pub fn of_event(e: &AuditEvent) -> Vec<UsageCount> {
    let Some(space) = e.space_id.as_deref() else {
        return Vec::new();
    };
    let one = |metric: &str, subject: &str, total: u64| {
        count(
            space,
            e.at,
            metric,
            subject,
            e.user_id.as_deref(),
            e.token_id.as_deref(),
            total,
        )
    };
    let millis = e
        .duration_ms
        .and_then(|d| u64::try_from(d).ok())
        .unwrap_or(0);
    match e.action.as_str() {
        TOOL_CALL => {
            let mut out = vec![one(TOOL_CALLS, &e.target, millis)];
            if e.outcome != OK {
                out.push(one(TOOL_FAILURES, &e.target, 0));
            }
            out
        }
        APPROVAL_REQUEST => vec![one(APPROVALS, &e.target, 0)],
        SOURCE_SYNC if e.outcome != OK => vec![one(SYNC_FAILURES, &e.target, 0)],
        SIGN_IN if e.outcome == OK => vec![one(SIGN_INS, &e.target, 0)],
        WRITE if e.outcome == OK => {
            let detail: Value = serde_json::from_str(&e.detail).unwrap_or(Value::Null);
            if e.target == CHAT_ROUTE {
                vec![one(CHAT_ANSWERS, "", 0)]
            } else if e.target == UPLOAD_ROUTE {
                vec![one(UPLOADS, "", 0)]
            } else if let (Some(decision), Some(waited)) =
                (detail["decision"].as_str(), detail["waited_ms"].as_u64())
            {
                vec![one(APPROVAL_DECISIONS, decision, waited)]
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// What a search adds: one to `searches`, and one to `unanswered` when it found nothing.
pub fn of_search(s: &SearchRecord) -> Vec<UsageCount> {
    let user = (!s.user_id.is_empty()).then_some(s.user_id.as_str());
    let token = (!s.token_id.is_empty()).then_some(s.token_id.as_str());
    let mut out = vec![count(
        &s.space_id,
        s.at,
        SEARCHES,
        &s.surface,
        user,
        token,
        0,
    )];
    if s.unanswered {
        out.push(count(
            &s.space_id,
            s.at,
            UNANSWERED,
            &s.surface,
            user,
            token,
            0,
        ));
    }
    out
}
