//! What the audit log keeps: one row per event (a tool call, a write or delete, a search, a
//! change to tokens or memberships, a sign-in, a refused credential), appended in batches by
//! `quarry-audit` and read back newest first by the space's admins. The store does not
//! interpret `action`, `outcome` or the JSON `detail`; `quarry-audit` owns their words.

use quarry_core::Result;
use serde::Serialize;

/// One event as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEvent {
    /// When it happened (Unix milliseconds).
    pub at: i64,
    /// The space it happened in (UUID); `None` when the request never reached one (a
    /// refused credential).
    pub space_id: Option<String>,
    /// The user (UUID); `None` for the machine's owner or an unknown caller.
    pub user_id: Option<String>,
    /// The user's name at the time.
    pub user_name: Option<String>,
    /// The access token used (its UUID, never the secret).
    pub token_id: Option<String>,
    /// The client: its address.
    pub client: Option<String>,
    /// What was done (`tool.call`, `search`, `write` …).
    pub action: String,
    /// What it was done to (a tool's `package.tool`, a route, a knowledge base).
    pub target: String,
    /// `ok`, `error` or `denied`.
    pub outcome: String,
    /// How long it took, when timed.
    pub duration_ms: Option<i64>,
    /// JSON object with the rest (redacted arguments, result counts, status codes).
    pub detail: String,
}

/// A stored event with its id (ascending in insertion order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// Its id: newer events have larger ids.
    pub id: i64,
    /// The event.
    #[serde(flatten)]
    pub event: AuditEvent,
}

/// Which events to read, newest first.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Only this space's events (UUID); `None`: every space's and those outside any.
    pub space_id: Option<String>,
    /// Only events whose `action` equals this or starts with it followed by `.`.
    pub action: Option<String>,
    /// Only this user's (UUID).
    pub user_id: Option<String>,
    /// Only this token's (UUID).
    pub token_id: Option<String>,
    /// Only this outcome.
    pub outcome: Option<String>,
    /// Only events at or after this time (Unix milliseconds).
    pub since: Option<i64>,
    /// Only events before this time (Unix milliseconds).
    pub until: Option<i64>,
    /// Only events with an id below this (the previous page's last id).
    pub before_id: Option<i64>,
    /// At most this many.
    pub limit: usize,
}

/// The audit log behind one trait, like everything the store keeps.
pub trait AuditStore: Send + Sync {
    /// Appends events in one transaction (all or none).
    fn append_audit(&self, events: &[AuditEvent]) -> Result<()>;
    /// Events matching `query`, newest (largest id) first.
    fn audit_events(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>>;
    /// Removes events older than `before` (Unix milliseconds); returns how many went.
    fn prune_audit(&self, before: i64) -> Result<u64>;
}
