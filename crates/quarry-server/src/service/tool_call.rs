//! One MCP `tools/call` as the MCP endpoints and QukaAI's run it: the caller of the
//! request, the audit record (with what the tool-policy gate decided) and whether the answer
//! counts as a read.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use crate::auth::Caller;
use crate::http::run_blocking_raw;
use crate::service::gate::{GateOutcome, GateRecord};
use crate::service::tool_args::{Args, tool_error};
use crate::state::AppState;

/// Runs one of Quarry's own tools: `work` on a blocking thread (store and engine calls never
/// run on the runtime), a worker that died worded as a tool error naming `what`, and the
/// background workers woken after a call that did not fail (it may have queued work).
pub(crate) async fn run_own_tool(
    state: &Arc<AppState>,
    what: &str,
    work: impl FnOnce() -> CallToolResult + Send + 'static,
) -> CallToolResult {
    let result = run_blocking_raw(work)
        .await
        .unwrap_or_else(|e| tool_error(format!("{what} error: {e}")));
    if result.is_error != Some(true) {
        state.wake_workers();
    }
    result
}

/// What a tool module runs for one call: the caller, the tool's name and its arguments; an
/// `Err` is worded for the model.
pub(crate) type CallerTool = fn(&Caller, &str, &Args<'_>) -> Result<CallToolResult, String>;

/// Runs one tool of a module whose tools need only the caller (`run_own_tool`); its failure is
/// a tool error.
pub(crate) async fn call_with_caller(
    state: &Arc<AppState>,
    what: &str,
    run: CallerTool,
    caller: &Caller,
    name: &str,
    args: JsonObject,
) -> CallToolResult {
    let caller = caller.clone();
    let name = name.to_owned();
    run_own_tool(state, what, move || {
        run(&caller, &name, &Args(&args)).unwrap_or_else(tool_error)
    })
    .await
}

/// Marks a tool call's HTTP request as a read (its answer carries no `X-Quarry-Txid`, see
/// `http::consistency`) unless `tool` may write documents: Quarry's own knowledge tools that
/// are not annotated read-only. Upstream tools write nothing into this store.
pub(crate) fn answer_is_read_unless_it_writes(
    context: &RequestContext<RoleServer>,
    package: &str,
    tool: &rmcp::model::Tool,
) {
    let writes = package == quarry_hub::KNOWLEDGE_PACKAGE && !quarry_hub::annotated_read_only(tool);
    if !writes && let Some(parts) = context.extensions.get::<axum::http::request::Parts>() {
        crate::http::consistency::mark_read(&parts.extensions);
    }
}

/// The caller of one MCP request: fixed (stdio), or the one the HTTP auth middleware put on
/// the request. Neither is an error, never a default: a request nobody vouched for reads
/// nothing.
pub(crate) fn request_caller(
    fixed: Option<&Caller>,
    context: &RequestContext<RoleServer>,
) -> Result<Caller, McpError> {
    let parts = context.extensions.get::<axum::http::request::Parts>();
    let mut caller = match fixed {
        Some(c) => c.clone(),
        None => parts
            .and_then(|p| p.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| McpError::internal_error("request has no authenticated caller", None))?,
    };
    // A request without an `initialize` before it (the stateless era, QukaAI's curl
    // examples) gets rmcp's own identity as its peer's: that names no client.
    let own = rmcp::model::Implementation::from_build_env();
    let client = context
        .peer
        .peer_info()
        .filter(|p| p.client_info.name != own.name || p.client_info.version != own.version)
        .map(|p| format!("{}/{}", p.client_info.name, p.client_info.version))
        .or_else(|| {
            parts
                .and_then(|p| p.headers.get(axum::http::header::USER_AGENT))
                .and_then(|v| v.to_str().ok())
                .map(|v| v.chars().take(200).collect())
        });
    caller.origin = crate::auth::CallOrigin {
        client,
        call: Some(context.id.to_string()),
    };
    Ok(caller)
}

/// One `tools/call` as every MCP endpoint runs it (`/mcp`, `/api/mcp`, `/mcp/e/<name>`,
/// stdio, QukaAI's `/api/v1/mcp`): `run` gets the tool's name and arguments and answers;
/// the request carries a [`GateRecord`] (attached by the caller) for what the tool-policy
/// gate decides. Whatever `run` answers is counted and written to the audit log
/// ([`crate::audit::tool_call`]: arguments redacted, the endpoint and client from the HTTP
/// request when there is one) before it is returned.
pub(crate) async fn audited_call<Fut>(
    state: &AppState,
    caller: &Caller,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    run: impl FnOnce(String, JsonObject) -> Fut,
) -> Result<CallToolResponse, McpError>
where
    Fut: Future<Output = Result<CallToolResult, McpError>>,
{
    // Where the gate puts what it decided (the caller attached it to the request).
    let record = context
        .extensions
        .get::<GateRecord>()
        .cloned()
        .ok_or_else(|| McpError::internal_error("tools/call without a gate record", None))?;
    let started = Instant::now();
    let name = request.name.to_string();
    let args = request.arguments.unwrap_or_default();
    let redacted = quarry_audit::redact_object(&args);
    let searched = crate::audit::mcp_search_query(&name, &args);
    let meter = quarry_engine::ModelMeter::new();
    let result = crate::http::metered(meter.clone(), run(name.clone(), args)).await;
    crate::audit::metered_use(state, &caller.principal, &meter);
    if let (Some(query), Ok(r)) = (&searched, &result) {
        crate::audit::mcp_search(state, &caller.principal, &name, query, r);
    }
    let outcome = match &result {
        Ok(r) if r.is_error == Some(true) => "tool_error",
        Ok(_) => "ok",
        Err(_) => "protocol_error",
    };
    let gated = record.take();
    let parts = context.extensions.get::<axum::http::request::Parts>();
    crate::audit::tool_call(
        state,
        &caller.principal,
        &name,
        redacted,
        outcome,
        gated.as_ref().map(GateOutcome::meta),
        started.elapsed(),
        parts,
    );
    // A held call its client can take to a person: the 2026-07-28 way of asking.
    if result.is_ok()
        && let Some(asked) = gated.as_ref().and_then(GateOutcome::input_required)
    {
        return Ok(CallToolResponse::InputRequired(asked));
    }
    result.map(Into::into)
}
