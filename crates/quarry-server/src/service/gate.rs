//! The tool-policy gate on an MCP `tools/call`: every MCP endpoint runs its catalogued
//! tools through [`gated`].
//!
//! What the gate decided travels on the result's `_meta` under [`GATE_META`]
//! (`{"outcome": "held"|"denied"|"refused"|"approved", "approval_id", "policy", "new"}`):
//! clients read the approval's id there, and `audited_call` reads it to record the call as
//! refused and, for a new request, an `approval.request` event.
//!
//! A held call waits for its decision where the client can show a person a URL (URL-mode
//! elicitation, MCP 2025-11-25): the approval's page in the web UI is offered, and once the
//! person accepts, the call waits (up to [`APPROVAL_WAIT`]) for an approver's decision and
//! then runs once, or answers the refusal. A session client is asked with
//! `elicitation/create` in the middle of the call; a 2026-07-28 client, which takes no
//! request from the server, gets an `InputRequiredResult` carrying the same elicitation
//! (`audited_call` turns a held result marked `elicit` into it), and its retry with the
//! person's answer waits the same way. Every other client gets the held `isError` result.

use std::time::Duration;

use quarry_policy::{Call, EndpointRef, Verdict};
use rmcp::model::{
    CallToolResult, ElicitRequestParams, ElicitationAction, InputRequest, InputRequiredResult,
    JsonObject, MetaObject,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::run_blocking_raw;
use crate::service::tool_args::tool_error;
use crate::state::AppState;

/// The `_meta` key of the gate's outcome on a tool result.
pub(crate) const GATE_META: &str = "io.quarry/gate";
/// The key of the approval's elicitation among a 2026-07-28 `InputRequiredResult`'s requests.
pub(crate) const APPROVAL_INPUT: &str = "approval";
/// How long a held call whose person went to decide waits for the decision.
pub(crate) const APPROVAL_WAIT: Duration = Duration::from_secs(300);
/// How often a waiting call looks at its approval again.
const APPROVAL_POLL: Duration = Duration::from_millis(500);

/// The person's answer to the approval's elicitation, carried by a 2026-07-28 retry
/// (`inputResponses[APPROVAL_INPUT]`); `call_tool` puts it in the request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ApprovalAnswer(pub(crate) bool);

impl ApprovalAnswer {
    /// The answer among a retry's input responses, if it carries one.
    pub(crate) fn from_responses(
        responses: Option<&rmcp::model::InputResponses>,
    ) -> Option<ApprovalAnswer> {
        let r = responses?.get(APPROVAL_INPUT)?;
        Some(ApprovalAnswer(
            r.get("action").and_then(Value::as_str) == Some("accept"),
        ))
    }
}

/// How a held call can wait for a person, given what the client declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elicit {
    /// `elicitation/create` now (a session that declared URL elicitation).
    Session,
    /// An `InputRequiredResult` (a 2026-07-28 client that declared URL elicitation).
    InputRequired,
    /// The held result only.
    No,
}

fn elicit_mode(context: &RequestContext<RoleServer>) -> Elicit {
    // 2026-07-28 requests carry the client's capabilities; a session's were negotiated.
    if let Some(caps) = context.meta.client_capabilities() {
        return if caps.elicitation.as_ref().is_some_and(|e| e.url.is_some()) {
            Elicit::InputRequired
        } else {
            Elicit::No
        };
    }
    if context
        .peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Url)
    {
        Elicit::Session
    } else {
        Elicit::No
    }
}

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
    let (gate, principal, tool_name, owned_args) = (
        state.gate().clone(),
        caller.principal.clone(),
        tool.to_owned(),
        args.clone(),
    );
    let check = move || {
        let (gate, principal, endpoint, tool_name, args) = (
            gate.clone(),
            principal.clone(),
            endpoint.clone(),
            tool_name.clone(),
            owned_args.clone(),
        );
        async move {
            run_blocking_raw(move || {
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
            .map_err(|e| McpError::internal_error(format!("tool policies: {e}"), None))
        }
    };
    let mut verdict = check().await?;
    // A held call whose client can send a person to the approval waits for the decision.
    let mut elicit = None;
    if let Verdict::Held { approval, new } = &verdict {
        let mode = elicit_mode(context);
        let answered = context.extensions.get::<ApprovalAnswer>().copied();
        let message = format!(
            "Calling {} needs a person's approval ({}). Open the approval to review the exact arguments; the call continues once it is decided.",
            approval.tool,
            quarry_policy::policy_names(approval)
        );
        let (mode, url) = match approval_url(context, &approval.id) {
            Some(url) => (mode, Some(url)),
            None => (Elicit::No, None),
        };
        let go_wait = match (mode, answered, url) {
            (Elicit::Session, _, Some(url)) => {
                if *new {
                    // Recorded now: the call may end approved, and its result then says so.
                    let parts = context.extensions.get::<axum::http::request::Parts>();
                    crate::audit::approval_request(
                        state,
                        &caller.principal,
                        tool,
                        &quarry_audit::redact_object(args),
                        &verdict.outcome().unwrap_or_default(),
                        parts,
                    );
                }
                matches!(
                    context
                        .peer
                        .elicit_url_with_timeout(
                            message.clone(),
                            url,
                            approval.id.clone(),
                            Some(APPROVAL_WAIT),
                        )
                        .await,
                    Ok(ElicitationAction::Accept)
                )
            }
            (Elicit::InputRequired, Some(ApprovalAnswer(accepted)), _) => accepted,
            (Elicit::InputRequired, None, Some(url)) => {
                elicit = Some(json!({"url": url.as_str(), "message": message, "id": approval.id}));
                false
            }
            _ => false,
        };
        if go_wait {
            let approval_id = approval.id.clone();
            let deadline = tokio::time::Instant::now() + APPROVAL_WAIT;
            while matches!(verdict, Verdict::Held { .. }) && tokio::time::Instant::now() < deadline
            {
                tokio::select! {
                    _ = tokio::time::sleep(APPROVAL_POLL) => {}
                    _ = context.ct.cancelled() => break,
                }
                verdict = check().await?;
            }
            tracing::debug!(approval = %approval_id, "a held call waited for its decision");
        }
        // Its request is recorded: above (a session) or by the first round (2026-07-28).
        if (go_wait || mode == Elicit::Session)
            && let Verdict::Held { new, .. } = &mut verdict
        {
            *new = false;
        }
    }
    let refusal = verdict.refusal();
    let meta = match &verdict {
        Verdict::Allow => return Ok(Cleared::Run(None)),
        Verdict::Approved(a) => return Ok(Cleared::Run(Some(a.id.clone()))),
        _ => {
            let mut meta = verdict.outcome().unwrap_or_default();
            if let Some(e) = elicit {
                meta["elicit"] = e;
            }
            meta
        }
    };
    let mut result = tool_error(refusal.unwrap_or_default());
    with_gate_meta(&mut result, meta);
    Ok(Cleared::Stopped(result))
}

/// The web UI's page of approval `id`, at the address this request came to (`None` outside
/// HTTP, or for a `Host` that makes no URL).
fn approval_url(context: &RequestContext<RoleServer>, id: &str) -> Option<url::Url> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    url::Url::parse(&format!(
        "{}/#/approvals/{id}",
        crate::http::base_url(&parts.headers)
    ))
    .ok()
}

/// A held result a 2026-07-28 client may answer with the person (its gate outcome carries
/// `elicit`), as the `InputRequiredResult` asking for it; `None` for any other result.
pub(crate) fn input_required(result: &CallToolResult) -> Option<InputRequiredResult> {
    let e = gate_meta(result)?.get("elicit")?;
    let params = ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: e.get("message")?.as_str()?.to_owned(),
        url: e.get("url")?.as_str()?.to_owned(),
        elicitation_id: e.get("id")?.as_str()?.to_owned(),
    };
    let request = InputRequest::Elicitation(rmcp::model::ElicitRequest::new(params));
    let mut requests = rmcp::model::InputRequests::new();
    requests.insert(APPROVAL_INPUT.to_owned(), request);
    Some(InputRequiredResult::new(
        Some(requests),
        e.get("id").and_then(Value::as_str).map(str::to_owned),
    ))
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
