//! Tool policies and the approvals they ask for (issue 45): what a space's admins decided a
//! tool call must satisfy or wait for, and each held call's request, decision and single
//! use. The store keeps the rules as JSON text and does not interpret them (`quarry-policy`
//! owns their grammar); what it guarantees is that an approval is decided once and used
//! once, atomically across nodes.

use quarry_core::Result;
use serde::Serialize;

/// One policy as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyRow {
    /// Its UUID.
    pub id: String,
    /// The space it belongs to (UUID).
    pub space_id: String,
    /// Unique in the space.
    pub name: String,
    /// What it is attached to: `space`, `endpoint` or `token`.
    pub attach: String,
    /// The endpoint (name or UUID) or token (UUID) it is attached to; `None` for `space`.
    pub attach_id: Option<String>,
    /// The rule as JSON: tools, condition, effect, time to live (`quarry-policy`'s grammar).
    pub rule: String,
    /// Starts at 1; every change adds one, so an approval made under an older version no
    /// longer counts.
    pub version: i64,
    /// Who made it (a user's name; `None`: the machine's owner).
    pub created_by: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub updated_at: i64,
}

/// Where an approval stands. `expired` is not stored: a pending or approved request whose
/// `expires_at` has passed reads as expired.
pub mod approval_status {
    /// Waiting for a person.
    pub const PENDING: &str = "pending";
    /// Approved, not used yet.
    pub const APPROVED: &str = "approved";
    /// Refused by a person.
    pub const DENIED: &str = "denied";
    /// Approved and run (once).
    pub const USED: &str = "used";
}

/// One held call: the request bound to the exact call, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRow {
    /// Its UUID.
    pub id: String,
    /// The space (UUID).
    pub space_id: String,
    /// The tool (`package.tool`).
    pub tool: String,
    /// SHA-256 (hex) of the tool's name and its arguments in canonical JSON.
    pub args_digest: String,
    /// The arguments as shown to the approver (JSON; secret-looking values redacted).
    pub arguments: String,
    /// Who asked, as the approval binds it: the token chain's first token, else the user,
    /// else `local`.
    pub caller_key: String,
    /// The requesting user (UUID), if any.
    pub requester_user_id: Option<String>,
    /// The requesting user's name, if any.
    pub requester_name: Option<String>,
    /// The token used (UUID), if any.
    pub requester_token_id: Option<String>,
    /// The named endpoint the call came through, if any.
    pub endpoint: Option<String>,
    /// The policies that held it, as JSON `[{"id","name","version"}]`; part of the binding.
    pub policies: String,
    /// `pending`, `approved`, `denied` or `used` ([`approval_status`]).
    pub status: String,
    /// The approver's reason, if one was given.
    pub reason: Option<String>,
    /// Who decided (a user's name, or `local`).
    pub decided_by: Option<String>,
    /// The decider's token (UUID), if any.
    pub decided_by_token_id: Option<String>,
    /// Unix milliseconds.
    pub decided_at: Option<i64>,
    /// When the approved call ran (Unix milliseconds).
    pub used_at: Option<i64>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// After this (Unix milliseconds) it can no longer be decided or used.
    pub expires_at: i64,
}

/// A decision on a pending approval.
#[derive(Debug, Clone)]
pub struct ApprovalDecision<'a> {
    /// Approve (`true`) or deny.
    pub approve: bool,
    /// Who decides (a user's name, or `local`).
    pub by: &'a str,
    /// The decider's token, if any.
    pub by_token_id: Option<&'a str>,
    /// Why, if said.
    pub reason: Option<&'a str>,
    /// Now (Unix milliseconds).
    pub at: i64,
}

/// Policies and approvals behind one trait, like everything the store keeps.
pub trait PolicyStore: Send + Sync {
    /// The space's policies, by name.
    fn tool_policies(&self, space_id: &str) -> Result<Vec<PolicyRow>>;
    /// Adds a policy; `Conflict` when the space has one of that name.
    fn insert_tool_policy(&self, row: &PolicyRow) -> Result<()>;
    /// Replaces a policy's name, attachment and rule, adding one to its version; the row
    /// after the change, or `None` when the space has no such policy. `Conflict` when the
    /// new name is another policy's.
    fn update_tool_policy(&self, row: &PolicyRow) -> Result<Option<PolicyRow>>;
    /// Removes a policy; whether there was one.
    fn delete_tool_policy(&self, space_id: &str, id: &str) -> Result<bool>;

    /// Records a new request (status `pending`).
    fn insert_approval(&self, row: &ApprovalRow) -> Result<()>;
    /// One approval of the space.
    fn approval(&self, space_id: &str, id: &str) -> Result<Option<ApprovalRow>>;
    /// The space's approvals newest first: only those of `caller_key` when given, only
    /// those in `status` when given (`expired` selects pending or approved ones past their
    /// expiry; `pending` and `approved` select unexpired ones only), at most `limit`.
    fn approvals(
        &self,
        space_id: &str,
        caller_key: Option<&str>,
        status: Option<&str>,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ApprovalRow>>;
    /// The newest request for exactly this call (caller, tool, digest and policies) that is
    /// not used and not past its expiry at `now`, whatever its status.
    fn open_approval(
        &self,
        space_id: &str,
        caller_key: &str,
        tool: &str,
        args_digest: &str,
        policies: &str,
        now: i64,
    ) -> Result<Option<ApprovalRow>>;
    /// Decides a pending, unexpired approval: the row after the decision, or `None` when
    /// it is missing, already decided, or expired (nothing changes then).
    fn decide_approval(
        &self,
        space_id: &str,
        id: &str,
        decision: &ApprovalDecision<'_>,
    ) -> Result<Option<ApprovalRow>>;
    /// Marks an approved, unexpired, unused approval used; `false` when another use, a
    /// node or an expiry came first. Exactly one caller ever gets `true`.
    fn use_approval(&self, space_id: &str, id: &str, now: i64) -> Result<bool>;
}
