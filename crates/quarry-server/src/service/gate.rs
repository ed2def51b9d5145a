//! The tool-policy gate on an MCP `tools/call`: every MCP endpoint runs its catalogued
//! tools through [`gated`].
//!
//! What the gate decided travels on the result's `_meta` under [`GATE_META`]
//! (`{"outcome": "held"|"denied"|"refused"|"approved", "approval_id", "policy", "new"}`):
//! clients read the approval's id there, and `audited_call` reads it to record the call as
//! refused and, for a new request, an `approval.request` event.

use quarry_policy::{Call, EndpointRef, Verdict};
use rmcp::model::{CallToolResult, JsonObject, MetaObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::run_blocking_raw;
use crate::service::tool_args::tool_error;
use crate::state::AppState;

/// The `_meta` key of the gate's outcome on a tool result.
pub(crate) const GATE_META: &str = "io.quarry/gate";

/// Runs `run` with `args` when the gate lets the call of `tool` (`package.tool`) through;
/// a used approval's id goes on the result's `_meta`.
pub(crate) async fn gated<Fut>(
    state: &AppState,
    caller: &Caller,
    tool: &str,
    args: JsonObject,
    context: &RequestContext<RoleServer>,
    run: impl FnOnce(JsonObject) -> Fut,
) -> Result<CallToolResult, McpError>
where
    Fut: Future<Output = Result<CallToolResult, McpError>>,
{
    let approval = match before_call(state, caller, tool, &args, context).await? {
        Cleared::Stopped(result) => return Ok(result),
        Cleared::Run(approval) => approval,
    };
    let mut result = run(args).await?;
    if let Some(id) = approval {
        with_gate_meta(
            &mut result,
            json!({"outcome": "approved", "approval_id": id}),
        );
    }
    Ok(result)
}

/// What the gate left a call.
enum Cleared {
    /// It runs; `Some` when an approval was used for it (its id goes on the result).
    Run(Option<String>),
    /// It does not run: the result to answer.
    Stopped(CallToolResult),
}

/// Passes `tool` (`package.tool`) with `args` through the caller's policies.
async fn before_call(
    state: &AppState,
    caller: &Caller,
    tool: &str,
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<Cleared, McpError> {
    let endpoint = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<quarry_store::ToolEndpointRow>())
        .map(|e| (e.id.clone(), e.name.clone()));
    let (gate, principal, tool_name, args) = (
        state.gate().clone(),
        caller.principal.clone(),
        tool.to_owned(),
        args.clone(),
    );
    let verdict = run_blocking_raw(move || {
        let call = Call {
            principal: &principal,
            endpoint: endpoint.as_ref().map(|(id, name)| EndpointRef { id, name }),
            tool: &tool_name,
            arguments: &args,
        };
        gate.check(&call, quarry_core::now_millis())
    })
    .await
    .map_err(|e| McpError::internal_error(e.detail, None))?
    .map_err(|e| McpError::internal_error(format!("tool policies: {e}"), None))?;
    let refusal = verdict.refusal();
    let meta = match &verdict {
        Verdict::Allow => return Ok(Cleared::Run(None)),
        Verdict::Approved(a) => return Ok(Cleared::Run(Some(a.id.clone()))),
        Verdict::Refused { policy, .. } => json!({"outcome": "refused", "policy": policy}),
        Verdict::Held { approval, new } => json!({
            "outcome": "held",
            "approval_id": approval.id,
            "tool": approval.tool,
            "new": new,
            "expires_at": quarry_core::iso8601_millis(approval.expires_at),
        }),
        Verdict::Denied(approval) => json!({"outcome": "denied", "approval_id": approval.id}),
    };
    let mut result = tool_error(refusal.unwrap_or_default());
    with_gate_meta(&mut result, meta);
    Ok(Cleared::Stopped(result))
}

/// Puts the gate's outcome on `result`'s `_meta`.
fn with_gate_meta(result: &mut CallToolResult, outcome: Value) {
    let mut meta = result.meta.take().unwrap_or_default();
    meta.0.insert(GATE_META.into(), outcome);
    result.meta = Some(meta);
}

/// The gate's outcome on a result, if it has one.
pub(crate) fn gate_meta(result: &CallToolResult) -> Option<&Value> {
    result
        .meta
        .as_ref()
        .and_then(|m: &MetaObject| m.0.get(GATE_META))
}
