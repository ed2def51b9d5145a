//! MCP tool plumbing the MCP endpoints and QukaAI's share: the audited `tools/call`, typed
//! arguments with messages that name the field, tool errors, annotations, and the caller of
//! a request.

use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

use crate::auth::Caller;
use crate::state::AppState;

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
/// whatever it answers is counted and written to the audit log
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
    let started = Instant::now();
    let name = request.name.to_string();
    let args = request.arguments.unwrap_or_default();
    let redacted = quarry_audit::redact_object(&args);
    let result = run(name.clone(), args).await;
    let outcome = match &result {
        Ok(r) if r.is_error == Some(true) => "tool_error",
        Ok(_) => "ok",
        Err(_) => "protocol_error",
    };
    let gated = result
        .as_ref()
        .ok()
        .and_then(crate::service::gate::gate_meta)
        .cloned();
    let parts = context.extensions.get::<axum::http::request::Parts>();
    if let Some(g) = gated
        .as_ref()
        .filter(|g| g["outcome"] == "held" && g["new"] == true)
    {
        crate::audit::approval_request(state, &caller.principal, &name, &redacted, g, parts);
    }
    crate::audit::tool_call(
        state,
        &caller.principal,
        &name,
        redacted,
        outcome,
        gated,
        started.elapsed(),
        parts,
    );
    // A held call its client can take to a person: the 2026-07-28 way of asking.
    if let Some(asked) = result
        .as_ref()
        .ok()
        .and_then(crate::service::gate::input_required)
    {
        return Ok(CallToolResponse::InputRequired(asked));
    }
    result.map(Into::into)
}

/// `t` with annotations `a`.
pub(crate) fn with_annotations(mut t: Tool, a: ToolAnnotations) -> Tool {
    t.annotations = Some(a);
    t
}

/// Annotations of a tool that only reads (and reads only Quarry's own data).
pub(crate) fn read_only(title: &str) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// A tool-level failure shown to the model (`isError: true`).
pub(crate) fn tool_error(msg: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(msg.into())])
}

/// A required argument refused; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgError {
    /// Absent or null (the field's name).
    Missing(String),
    /// Present but unusable (the message).
    Invalid(String),
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgError::Missing(key) => write!(f, "missing required argument `{key}`"),
            ArgError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ArgError {}

/// The other readers answer with the message alone, so parsers that mix them can use `?`.
impl From<ArgError> for String {
    fn from(e: ArgError) -> String {
        e.to_string()
    }
}

/// Reads typed arguments with messages that name the offending field.
pub(crate) struct Args<'a>(pub(crate) &'a JsonObject);

impl Args<'_> {
    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.contains('\0') => Err(nul(key)),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("`{key}` must be a string, got {}", kind(other))),
        }
    }

    pub(crate) fn required_string(&self, key: &str) -> Result<String, ArgError> {
        self.string(key)
            .map_err(ArgError::Invalid)?
            .ok_or_else(|| ArgError::Missing(key.to_owned()))
    }

    pub(crate) fn uint(&self, key: &str) -> Result<Option<u64>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v >= 1 => Ok(Some(v)),
                _ => match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f >= 1.0 && f <= u64::MAX as f64 => {
                        Ok(Some(f as u64))
                    }
                    _ => Err(format!("`{key}` must be a positive integer, got {n}")),
                },
            },
            Some(other) => Err(format!(
                "`{key}` must be a positive integer, got {}",
                kind(other)
            )),
        }
    }

    pub(crate) fn number(&self, key: &str) -> Result<Option<f64>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(format!("`{key}` must be a number, got {}", kind(other))),
        }
    }

    /// A whole number ≥ 0.
    pub(crate) fn index(&self, key: &str) -> Result<Option<u64>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) => Ok(Some(v)),
                None => Err(format!("`{key}` must be a whole number ≥ 0, got {n}")),
            },
            Some(other) => Err(format!(
                "`{key}` must be a whole number ≥ 0, got {}",
                kind(other)
            )),
        }
    }

    /// An array of strings.
    pub(crate) fn strings(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) if s.contains('\0') => Err(nul(key)),
                    Value::String(s) => Ok(s.clone()),
                    other => Err(format!(
                        "`{key}` must be an array of strings, found {}",
                        kind(other)
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(format!(
                "`{key}` must be an array of strings, got {}",
                kind(other)
            )),
        }
    }

    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!("`{key}` must be a boolean, got {}", kind(other))),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A tool argument holding a NUL character: refused before anything runs or is stored (a
/// note with one was stored as a failed note on every try, issue 41 item 21).
fn nul(key: &str) -> String {
    format!("`{key}` must not contain NUL characters (\\u0000)")
}
