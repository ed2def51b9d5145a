//! The gate every tool call passes before it runs: the policies that apply to the caller, the
//! endpoint and the tool are evaluated on the call's arguments; a `deny` that holds refuses
//! it, a `require_approval` that holds binds an approval request to exactly this call.
//!
//! An approval binds the caller (its token chain's first token, else its user, else the
//! machine's owner), the tool, a SHA-256 of the tool's name and its arguments in canonical
//! JSON (keys sorted at every level), and the id and version of every policy that held it.
//! A retry of exactly that call after approval uses it (one conditional update in the store:
//! once, across nodes) and runs; any other call — other arguments, another caller, a policy
//! changed since — is a new request.

use quarry_core::iso8601_millis;
use quarry_core::{Access, Error, Principal, Result};
use std::sync::Arc;

use quarry_store::{AccessStore, ApprovalDecision, ApprovalRow, PolicyStore, approval_status};
use serde_json::{Map, Value, json};

use crate::rule::{Effect, Policy};

/// The stores the gate reads and writes, shared by every surface that runs tool calls (MCP,
/// chat) and every surface that decides approvals (REST, MCP, the CLI). Its calls block.
#[derive(Clone)]
pub struct Gate {
    policies: Arc<dyn PolicyStore>,
    access: Arc<dyn AccessStore>,
}

impl Gate {
    /// A gate over the store's policies and tokens.
    pub fn new(policies: Arc<dyn PolicyStore>, access: Arc<dyn AccessStore>) -> Gate {
        Gate { policies, access }
    }

    /// [`check`] against this gate's stores.
    pub fn check(&self, call: &Call<'_>, now: i64) -> Result<Verdict> {
        check(self.policies.as_ref(), self.access.as_ref(), call, now)
    }

    /// The policies and approvals.
    pub fn policies(&self) -> &dyn PolicyStore {
        self.policies.as_ref()
    }
}

/// The named endpoint a call came through.
#[derive(Debug, Clone, Copy)]
pub struct EndpointRef<'a> {
    /// Its UUID.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// One tool call, as the gate sees it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Who calls.
    pub principal: &'a Principal,
    /// Through which named endpoint, if one.
    pub endpoint: Option<EndpointRef<'a>>,
    /// The tool (`package.tool`).
    pub tool: &'a str,
    /// Its arguments, exactly as given.
    pub arguments: &'a Map<String, Value>,
}

/// What the gate decided.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// No policy stops it: run.
    Allow,
    /// An approval of exactly this call was used now: run (once).
    Approved(ApprovalRow),
    /// A policy refuses it.
    Refused {
        /// The policy's name.
        policy: String,
        /// What to tell the caller.
        message: String,
    },
    /// It waits for a person: `new` when this call made the request.
    Held {
        /// The request.
        approval: ApprovalRow,
        /// Whether this call created it (else an earlier identical call did).
        new: bool,
    },
    /// A person denied exactly this call.
    Denied(ApprovalRow),
}

impl Verdict {
    /// The decision as programs read it (the MCP result's `_meta["io.quarry/gate"]`, a
    /// chat call's and the audit log's `gate`): `{"outcome": "approved"|"refused"|"held"|
    /// "denied", …}`; `None` when no policy was involved.
    pub fn outcome(&self) -> Option<Value> {
        Some(match self {
            Verdict::Allow => return None,
            Verdict::Approved(a) => json!({"outcome": "approved", "approval_id": a.id}),
            Verdict::Refused { policy, .. } => json!({"outcome": "refused", "policy": policy}),
            Verdict::Held { approval, new } => json!({
                "outcome": "held",
                "approval_id": approval.id,
                "tool": approval.tool,
                "new": new,
                "expires_at": iso8601_millis(approval.expires_at),
            }),
            Verdict::Denied(a) => json!({"outcome": "denied", "approval_id": a.id}),
        })
    }

    /// What the caller is told when the call does not run (`None` when it runs).
    pub fn refusal(&self) -> Option<String> {
        match self {
            Verdict::Allow | Verdict::Approved(_) => None,
            Verdict::Refused { message, .. } => Some(message.clone()),
            Verdict::Held { approval, .. } => Some(format!(
                "Held for approval: this call of {tool} needs a person's approval ({policies}). \
                 Approval {id} is pending until {until}. Ask an approver to approve it (web UI: \
                 Approvals; REST: POST /api/v1/approvals/{id}/decision; CLI: quarry approvals \
                 approve {id}; MCP: decide_approval), then call {tool} again with exactly the \
                 same arguments: it runs once.",
                tool = approval.tool,
                policies = policy_names(approval),
                id = approval.id,
                until = iso8601_millis(approval.expires_at),
            )),
            Verdict::Denied(approval) => Some(format!(
                "Denied: approval {id} for this call of {tool} was denied by {by}{reason}. The \
                 same call stays refused until {until}.",
                id = approval.id,
                tool = approval.tool,
                by = approval.decided_by.as_deref().unwrap_or("an approver"),
                reason = approval
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default(),
                until = iso8601_millis(approval.expires_at),
            )),
        }
    }
}

/// The policies that held `a`, in words (`policy 'x', policy 'y'`).
pub fn policy_names(a: &ApprovalRow) -> String {
    let names: Vec<String> = serde_json::from_str::<Vec<Value>>(&a.policies)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .map(|n| format!("policy '{n}'"))
        })
        .collect();
    names.join(", ")
}

/// Longest string an approval shows whole; longer ones are cut, saying how much is left out
/// (the digest still binds every byte).
const SHOWN_CHARS: usize = 20_000;

/// Whether an argument's name says it holds a secret.
fn secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace(['-', '_'], "");
    [
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "authorization",
        "credential",
        "privatekey",
        "cookie",
    ]
    .iter()
    .any(|s| k.contains(s))
}

/// The arguments as an approver sees them: exactly, but for values under secret-looking
/// names (`[hidden: N chars]`) and strings past [`SHOWN_CHARS`].
fn shown(v: &Value, key: Option<&str>) -> Value {
    if key.is_some_and(secret_key) && !v.is_null() {
        let n = match v {
            Value::String(s) => s.chars().count(),
            other => other.to_string().chars().count(),
        };
        return json!(format!("[hidden: {n} chars]"));
    }
    match v {
        Value::String(s) if s.chars().count() > SHOWN_CHARS => {
            let head: String = s.chars().take(SHOWN_CHARS).collect();
            json!(format!(
                "{head}… [{} more chars]",
                s.chars().count() - SHOWN_CHARS
            ))
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| shown(i, None)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), shown(v, Some(k))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What an approver and a refusal may show of a call's arguments (worked out only when a
/// policy holds: most calls never need it).
fn shown_call_arguments(call: &Call<'_>) -> Value {
    Value::Object(
        call.arguments
            .iter()
            .map(|(k, v)| (k.clone(), shown(v, Some(k))))
            .collect(),
    )
}

/// Who an approval binds: the token chain's first token (stable across an OAuth grant's
/// refreshes), else the user, else the machine's owner.
pub fn caller_key(p: &Principal) -> String {
    match &p.identity {
        Some(id) => match (&id.root_token_id, &id.token_id) {
            (Some(root), _) => format!("token:{root}"),
            (None, Some(t)) => format!("token:{t}"),
            (None, None) => format!("user:{}", id.user_id),
        },
        None => "local".to_owned(),
    }
}

/// SHA-256 (hex) of the tool's name and its arguments in canonical JSON.
pub fn digest(tool: &str, arguments: &Map<String, Value>) -> String {
    let mut text = String::new();
    canonical(
        &json!({"tool": tool, "arguments": Value::Object(arguments.clone())}),
        &mut text,
    );
    quarry_core::sha256_hex(text.as_bytes())
}

/// JSON with object keys sorted at every level (whatever map the build of serde_json uses).
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                canonical(&o[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The space's policies that apply to this caller and endpoint (any tool), parsed; a stored
/// policy that no longer parses is an error for the calls it might govern.
fn applicable(
    policies: &dyn PolicyStore,
    access: &dyn AccessStore,
    call: &Call<'_>,
) -> Result<Vec<std::result::Result<Policy, (String, String)>>> {
    let rows = policies.tool_policies(&call.principal.space_id)?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let token = call
        .principal
        .identity
        .as_ref()
        .and_then(|i| i.token_id.clone());
    let mut lineage: Option<Vec<String>> = None;
    let mut out = Vec::new();
    for row in &rows {
        let attached = match row.attach.as_str() {
            "space" => true,
            "endpoint" => call.endpoint.is_some_and(|e| {
                row.attach_id.as_deref() == Some(e.id) || row.attach_id.as_deref() == Some(e.name)
            }),
            "token" => match (&token, &row.attach_id) {
                (Some(t), Some(want)) => {
                    if lineage.is_none() {
                        lineage = Some(access.token_chain(t)?.into_iter().map(|r| r.id).collect());
                    }
                    lineage.as_ref().is_some_and(|l| l.contains(want))
                }
                _ => false,
            },
            // An attachment this binary does not know: apply it rather than skip a rule.
            _ => true,
        };
        if attached {
            out.push(Policy::from_row(row).map_err(|e| (row.name.clone(), e)));
        }
    }
    Ok(out)
}

/// Decides what happens to `call` at `now` (Unix milliseconds), creating or using an
/// approval as needed.
pub fn check(
    policies: &dyn PolicyStore,
    access: &dyn AccessStore,
    call: &Call<'_>,
    now: i64,
) -> Result<Verdict> {
    let mut holding: Vec<Policy> = Vec::new();
    for p in applicable(policies, access, call)? {
        let policy = match p {
            Ok(policy) => policy,
            Err((name, why)) => {
                return Ok(Verdict::Refused {
                    message: format!(
                        "Refused: policy '{name}' cannot be read ({why}); ask an admin to fix it."
                    ),
                    policy: name,
                });
            }
        };
        if !policy.covers(call.tool) {
            continue;
        }
        let holds = policy.when.as_ref().is_none_or(|w| w.holds(call.arguments));
        if !holds {
            continue;
        }
        match policy.effect {
            Effect::Deny => {
                let mut message = format!(
                    "Refused by policy '{}': {} is not allowed",
                    policy.name, call.tool
                );
                if let Some(w) = &policy.when {
                    message.push_str(&format!(" when {}", w.describe()));
                    let shown_arguments = shown_call_arguments(call);
                    let shown: Vec<String> = w
                        .arguments()
                        .into_iter()
                        .filter_map(|a| {
                            let top = a.split('.').next().unwrap_or(a);
                            shown_arguments.get(top).map(|v| {
                                let mut s = v.to_string();
                                if s.len() > 200 {
                                    let cut = (0..=200)
                                        .rev()
                                        .find(|i| s.is_char_boundary(*i))
                                        .unwrap_or(0);
                                    s.truncate(cut);
                                    s.push('…');
                                }
                                format!("{top}={s}")
                            })
                        })
                        .collect();
                    if !shown.is_empty() {
                        message.push_str(&format!(" (this call: {})", shown.join(", ")));
                    }
                }
                message.push('.');
                return Ok(Verdict::Refused {
                    policy: policy.name,
                    message,
                });
            }
            Effect::RequireApproval => holding.push(policy),
        }
    }
    if holding.is_empty() {
        return Ok(Verdict::Allow);
    }
    holding.sort_by(|a, b| a.id.cmp(&b.id));
    let bound = Value::Array(
        holding
            .iter()
            .map(|p| json!({"id": p.id, "name": p.name, "version": p.version}))
            .collect(),
    )
    .to_string();
    let ttl = holding
        .iter()
        .map(|p| p.approval_ttl_secs)
        .min()
        .unwrap_or(crate::rule::DEFAULT_APPROVAL_TTL_SECS);
    let key = caller_key(call.principal);
    let args_digest = digest(call.tool, call.arguments);
    let space = &call.principal.space_id;
    if let Some(open) = policies.open_approval(space, &key, call.tool, &args_digest, &bound, now)? {
        match open.status.as_str() {
            approval_status::APPROVED => {
                if policies.use_approval(space, &open.id, now)? {
                    let mut used = open;
                    used.status = approval_status::USED.to_owned();
                    used.used_at = Some(now);
                    return Ok(Verdict::Approved(used));
                }
                // Another identical call used it first: this one needs its own approval.
            }
            approval_status::DENIED => return Ok(Verdict::Denied(open)),
            _ => {
                return Ok(Verdict::Held {
                    approval: open,
                    new: false,
                });
            }
        }
    }
    let identity = call.principal.identity.as_ref();
    let row = ApprovalRow {
        id: uuid::Uuid::new_v4().to_string(),
        space_id: space.clone(),
        tool: call.tool.to_owned(),
        args_digest,
        arguments: shown_call_arguments(call).to_string(),
        caller_key: key,
        requester_user_id: identity.map(|i| i.user_id.clone()),
        requester_name: identity.map(|i| i.user.clone()),
        requester_token_id: identity.and_then(|i| i.token_id.clone()),
        endpoint: call.endpoint.map(|e| e.name.to_owned()),
        policies: bound,
        status: approval_status::PENDING.to_owned(),
        reason: None,
        decided_by: None,
        decided_by_token_id: None,
        decided_at: None,
        used_at: None,
        created_at: now,
        expires_at: now.saturating_add(ttl.saturating_mul(1000)),
    };
    policies.insert_approval(&row)?;
    Ok(Verdict::Held {
        approval: row,
        new: true,
    })
}

/// Whether `p` may decide approvals and manage policies in its space: an admin or owner of
/// the space (or the machine's owner) with a management credential that may write.
pub fn may_govern(p: &Principal) -> bool {
    p.scope.manage && p.scope.can(Access::Admin) && !p.read_only()
}

/// `Ok` when `p` may govern ([`may_govern`]): else `ManagementForbidden` for a credential
/// without the management scope, `Forbidden` for a role too low or a read-only token.
pub(crate) fn require_govern(p: &Principal, what: &str) -> Result<()> {
    p.scope.require_manage(Access::Admin, what)?;
    if p.read_only() {
        return Err(Error::Forbidden(format!(
            "{what}: this token may only read"
        )));
    }
    Ok(())
}

/// Whether `p` may see approval `a`: those who govern see every one of the space, others
/// their own requests.
pub fn may_see(p: &Principal, a: &ApprovalRow) -> bool {
    may_govern(p) || a.caller_key == caller_key(p)
}

/// Whether `a` was asked for by `p`'s own token chain: a token never approves what its own
/// chain asked for; a person (a session, the machine's owner) approving what their agent
/// asked is the point.
fn own_chain(p: &Principal, a: &ApprovalRow) -> bool {
    p.identity.as_ref().is_some_and(|i| i.token_id.is_some())
        && a.caller_key.starts_with("token:")
        && a.caller_key == caller_key(p)
}

/// Whether `p` may decide `a` now (what [`decide`] would allow, but for a race).
pub fn may_decide(p: &Principal, a: &ApprovalRow, now: i64) -> bool {
    may_govern(p) && !own_chain(p, a) && shown_status(a, now) == approval_status::PENDING
}

/// Decides approval `id` as `p`. `NotFound` when `p` may not see it; `Forbidden` when `p`
/// may not decide, or would decide its own token chain's request; `Conflict` when it is no
/// longer pending (decided, used or expired).
pub fn decide(
    policies: &dyn PolicyStore,
    p: &Principal,
    id: &str,
    approve: bool,
    reason: Option<&str>,
    now: i64,
) -> Result<ApprovalRow> {
    let what = "deciding an approval (the space's admins and owners decide)";
    if p.scope.can(Access::Admin) {
        // An admin's credential that may not manage is told so whichever request it names.
        require_govern(p, what)?;
    }
    let current = policies
        .approval(&p.space_id, id)?
        .filter(|a| may_see(p, a))
        .ok_or_else(|| Error::NotFound(format!("no approval '{id}' in this space")))?;
    require_govern(p, what)?;
    if own_chain(p, &current) {
        return Err(Error::Forbidden(
            "a request cannot be decided with the token (or a token of the chain) that made it"
                .into(),
        ));
    }
    let by = p
        .identity
        .as_ref()
        .map_or_else(|| "local".to_owned(), |i| i.user.clone());
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    let decision = ApprovalDecision {
        approve,
        by: &by,
        by_token_id: p.identity.as_ref().and_then(|i| i.token_id.as_deref()),
        reason,
        at: now,
    };
    match policies.decide_approval(&p.space_id, id, &decision)? {
        Some(row) => Ok(row),
        None => Err(Error::Conflict(format!(
            "approval '{id}' is {}: only a pending request can be decided",
            shown_status(&current, now)
        ))),
    }
}

/// An approval's status as shown: `expired` for a pending or approved one past its expiry.
pub fn shown_status(a: &ApprovalRow, now: i64) -> &str {
    match a.status.as_str() {
        approval_status::PENDING | approval_status::APPROVED if a.expires_at <= now => "expired",
        s => s,
    }
}

/// An approval as the API shows it to `viewer` (`can_decide`: whether it may decide it now).
pub fn approval_json(a: &ApprovalRow, now: i64, viewer: &Principal) -> Value {
    let arguments: Value = serde_json::from_str(&a.arguments).unwrap_or(Value::Null);
    let policies: Value = serde_json::from_str(&a.policies).unwrap_or(Value::Null);
    json!({
        "id": a.id,
        "tool": a.tool,
        "arguments": arguments,
        "args_digest": a.args_digest,
        "status": shown_status(a, now),
        "requested_by": {
            "user": a.requester_name,
            "user_id": a.requester_user_id,
            "token_id": a.requester_token_id,
        },
        "endpoint": a.endpoint,
        "policies": policies,
        "reason": a.reason,
        "decided_by": a.decided_by,
        "decided_at": a.decided_at.map(iso8601_millis),
        "used_at": a.used_at.map(iso8601_millis),
        "created_at": iso8601_millis(a.created_at),
        "expires_at": iso8601_millis(a.expires_at),
        "can_decide": may_decide(viewer, a, now),
    })
}

/// The approvals `p` may see, newest first (see [`PolicyStore::approvals`] for `status`).
pub fn list(
    policies: &dyn PolicyStore,
    p: &Principal,
    status: Option<&str>,
    limit: usize,
    now: i64,
) -> Result<Vec<ApprovalRow>> {
    if let Some(s) = status
        && !matches!(s, "pending" | "approved" | "denied" | "used" | "expired")
    {
        return Err(Error::invalid(format!(
            "status: unknown status '{s}' (pending, approved, denied, used, expired)"
        )));
    }
    let mine = (!may_govern(p)).then(|| caller_key(p));
    policies.approvals(&p.space_id, mine.as_deref(), status, now, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_ignore_key_order_and_see_every_byte() {
        let a: Map<String, Value> =
            serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#).unwrap();
        let b: Map<String, Value> =
            serde_json::from_str(r#"{"a": {"x": "s", "y": [1, 2]}, "b": 1}"#).unwrap();
        let c: Map<String, Value> =
            serde_json::from_str(r#"{"a": {"x": "s", "y": [2, 1]}, "b": 1}"#).unwrap();
        assert_eq!(digest("t.x", &a), digest("t.x", &b));
        assert_ne!(digest("t.x", &a), digest("t.x", &c));
        assert_ne!(digest("t.x", &a), digest("t.y", &a));
    }

    #[test]
    fn approvers_see_arguments_but_not_secrets() {
        let v = json!({"path": "/srv/a", "api_key": "sk-123", "headers": {"Authorization": "Bearer x"},
                       "n": 3, "long": "x".repeat(SHOWN_CHARS + 5)});
        let s = shown(&v, None);
        assert_eq!(s["path"], "/srv/a");
        assert_eq!(s["n"], 3);
        assert_eq!(s["api_key"], "[hidden: 6 chars]");
        assert_eq!(s["headers"]["Authorization"], "[hidden: 8 chars]");
        assert!(s["long"].as_str().unwrap().ends_with("… [5 more chars]"));
    }
}
