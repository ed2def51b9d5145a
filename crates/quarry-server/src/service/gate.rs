//! The tool-policy gate on an MCP `tools/call`: every MCP endpoint runs its catalogued
//! tools through [`gated`].
//!
//! What the gate decided is a [`GateOutcome`], put in the request's [`GateRecord`] beside
//! the result: `audited_call` records the call from it. Clients read the same decision on
//! the result's `_meta` under [`GATE_META`] (`{"outcome": "held"|"denied"|"refused"|
//! "approved", "approval_id", "policy", "new"}`). A new approval request is recorded once,
//! by the gate, when the call makes it (`approval.request`).
//!
//! A held call waits for its decision where the client can show a person a URL (URL-mode
//! elicitation, MCP 2025-11-25): the approval's page in the web UI is offered, and once the
//! person accepts, the call waits (up to [`APPROVAL_WAIT`]) for an approver's decision and
//! then runs once, or answers the refusal. A session client is asked with
//! `elicitation/create` in the middle of the call; a 2026-07-28 client, which takes no
//! request from the server, gets an `InputRequiredResult` carrying the same elicitation
//! (`audited_call` turns a held result marked `elicit` into it), and its retry with the
//! person's answer waits the same way. Every other client gets the held `isError` result.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quarry_policy::{Call, EndpointRef, Verdict};
use rmcp::model::{
    CallToolResult, ElicitRequestParams, ElicitationAction, InputRequest, InputRequiredResult,
    JsonObject,
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
    let used = match before_call(state, caller, tool, &args, context).await? {
        Cleared::Stopped(mut result, outcome) => {
            with_gate_meta(&mut result, outcome.meta());
            GateRecord::put(context, outcome);
            return Ok(result);
        }
        Cleared::Run(used) => used,
    };
    let mut result = run(args).await?;
    if let Some(outcome) = used {
        with_gate_meta(&mut result, outcome.meta());
        GateRecord::put(context, outcome);
    }
    Ok(result)
}

/// What the gate decided about one call that a policy was involved in (never `Allow`).
#[derive(Debug, Clone)]
pub(crate) struct GateOutcome {
    /// The decision.
    pub(crate) verdict: Verdict,
    /// Where a 2026-07-28 client may send a person for a held call: the approval's page,
    /// what to tell them, and the approval's id.
    elicit: Option<(String, String, String)>,
}

impl GateOutcome {
    /// The decision as clients and the audit log read it (the `_meta` body).
    pub(crate) fn meta(&self) -> Value {
        let mut meta = self.verdict.outcome().unwrap_or_default();
        if let Some((url, message, id)) = &self.elicit {
            meta["elicit"] = json!({"url": url, "message": message, "id": id});
        }
        meta
    }

    /// A held call a 2026-07-28 client may answer with the person, as the
    /// `InputRequiredResult` asking for it; `None` for any other outcome.
    pub(crate) fn input_required(&self) -> Option<InputRequiredResult> {
        let (url, message, id) = self.elicit.clone()?;
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message,
            url,
            elicitation_id: id.clone(),
        };
        let request = InputRequest::Elicitation(rmcp::model::ElicitRequest::new(params));
        let mut requests = rmcp::model::InputRequests::new();
        requests.insert(APPROVAL_INPUT.to_owned(), request);
        Some(InputRequiredResult::new(Some(requests), Some(id)))
    }
}

/// Where the gate puts its outcome for one `tools/call`: each call attaches its own to the
/// request's extensions ([`GateRecord::attach`]), and its `audited_call` takes it back.
#[derive(Debug, Clone, Default)]
pub(crate) struct GateRecord(Arc<Mutex<Option<GateOutcome>>>);

impl GateRecord {
    /// A fresh record on `context`'s extensions.
    pub(crate) fn attach(context: &mut RequestContext<RoleServer>) -> GateRecord {
        let record = GateRecord::default();
        context.extensions.insert(record.clone());
        record
    }

    /// What the gate decided, if a policy was involved (taken: recorded once).
    pub(crate) fn take(&self) -> Option<GateOutcome> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn put(context: &RequestContext<RoleServer>, outcome: GateOutcome) {
        if let Some(record) = context.extensions.get::<GateRecord>() {
            *record.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
        }
    }
}

/// What the gate left a call.
enum Cleared {
    /// It runs; `Some` when an approval was used for it.
    Run(Option<GateOutcome>),
    /// It does not run: the result to answer, and why.
    Stopped(CallToolResult, GateOutcome),
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
    // A request this call made is recorded now, once: the call may wait for the decision,
    // and end approved.
    if let Verdict::Held { new: true, .. } = &verdict {
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
    // A held call whose client can send a person to the approval waits for the decision.
    let mut elicit = None;
    if let Verdict::Held { approval, .. } = &verdict {
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
                elicit = Some((url.to_string(), message, approval.id.clone()));
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
        // `new` tells the client this round made the request and answers held: not after
        // a wait, nor for a session asked in the middle of the call.
        if (go_wait || mode == Elicit::Session)
            && let Verdict::Held { new, .. } = &mut verdict
        {
            *new = false;
        }
    }
    let refusal = verdict.refusal();
    match verdict {
        Verdict::Allow => Ok(Cleared::Run(None)),
        verdict @ Verdict::Approved(_) => Ok(Cleared::Run(Some(GateOutcome {
            verdict,
            elicit: None,
        }))),
        verdict => Ok(Cleared::Stopped(
            tool_error(refusal.unwrap_or_default()),
            GateOutcome { verdict, elicit },
        )),
    }
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

/// Puts the gate's outcome on `result`'s `_meta`.
fn with_gate_meta(result: &mut CallToolResult, outcome: Value) {
    let mut meta = result.meta.take().unwrap_or_default();
    meta.0.insert(GATE_META.into(), outcome);
    result.meta = Some(meta);
}
