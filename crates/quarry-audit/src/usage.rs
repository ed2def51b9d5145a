//! What the usage charts count, derived here — where the audit's words are owned — from the
//! events and searches the writer stores: each becomes at most one [`UsageCount`] on its
//! UTC day, for its space, person and token. Events outside a space count nowhere.

use quarry_core::{Principal, civil_from_days, days_from_civil, now_millis};
use quarry_store::{AuditEvent, DAY_MS, SearchRecord, UsageCount};
use serde_json::Value;

use crate::words::{APPROVAL_REQUEST, OK, SIGN_IN, SOURCE_SYNC, TOOL_CALL, WRITE};

/// Searches on any surface (subject: the surface).
pub const SEARCHES: &str = "searches";
/// Searches that found nothing (subject: the surface).
pub const UNANSWERED: &str = "unanswered";
/// Model calls Quarry made on someone's behalf (subject: what for: `chat`, `embedding`,
/// `expansion`, `rerank`, `annotation`; count: requests to the model; total: tokens, prompt
/// and answer). Background work (embedding uploads and syncs) counts for the space alone.
pub const MODEL_TOKENS: &str = "model_tokens";
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
    MODEL_TOKENS,
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

/// What a model's use for `purpose` by `principal` adds: `requests` and `tokens` to
/// `model_tokens`, today.
pub fn of_model(principal: &Principal, purpose: &str, requests: u64, tokens: u64) -> UsageCount {
    let identity = principal.identity.as_ref();
    let by = (
        identity.map(|i| i.user_id.as_str()),
        identity.and_then(|i| i.token_id.as_deref()),
    );
    model_use(&principal.space_id, by, purpose, requests, tokens)
}

/// The person the counts of a space's background work stand under (user ids are UUIDs,
/// so no one else's).
pub const BACKGROUND: &str = "background";

/// What a model's use for `purpose` by the space's background work (no person, no token:
/// [`BACKGROUND`]) adds, like [`of_model`].
pub fn of_space_model(space_id: &str, purpose: &str, requests: u64, tokens: u64) -> UsageCount {
    model_use(
        space_id,
        (Some(BACKGROUND), None),
        purpose,
        requests,
        tokens,
    )
}

/// `requests` and `tokens` for `purpose` by `(user, token)` in `model_tokens`, today.
fn model_use(
    space_id: &str,
    (user_id, token_id): (Option<&str>, Option<&str>),
    purpose: &str,
    requests: u64,
    tokens: u64,
) -> UsageCount {
    let mut c = count(
        space_id,
        now_millis(),
        MODEL_TOKENS,
        purpose,
        user_id,
        token_id,
        tokens,
    );
    c.count = requests;
    c
}

/// The calendar month holding `at` (UTC), as Unix milliseconds: its first instant and the
/// next month's (a monthly budget's window).
pub fn month_of(at: i64) -> (i64, i64) {
    let (y, m, _) = civil_from_days(at.div_euclid(DAY_MS));
    let m = i64::from(m);
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (
        days_from_civil(y, m, 1) * DAY_MS,
        days_from_civil(ny, nm, 1) * DAY_MS,
    )
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
