//! The caller's tools as the model sees them: the hub's view turned into OpenAI function
//! definitions under LLM-safe wire names (`package__tool`), and the calls routed back
//! through the hub (built-in, MCP upstream, custom HTTP).

use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry_core::Principal;
use quarry_hub::{CallError, CatalogTool, Hub, View};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Longest tool description given to the model.
const DESCRIPTION_CHARS: usize = 1024;
/// Longest tool result given to the model (the rest is cut with a note).
pub const RESULT_CHARS: usize = 16_000;
/// How long a timed-out call may take to pass its cancellation on.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What one call produced, as the model will read it.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    /// Whether the call succeeded (else `text` says why).
    pub ok: bool,
    /// What the model reads.
    pub text: String,
    /// How long the call took.
    pub duration: Duration,
    /// What the tool policies decided ([`quarry_policy::Verdict::outcome`]), if any applied.
    pub gate: Option<Value>,
}

/// The tools offered in one chat.
pub struct ToolSet {
    view: Option<View>,
    definitions: Vec<Value>,
}

impl ToolSet {
    /// No tools.
    pub fn none() -> ToolSet {
        ToolSet {
            view: None,
            definitions: Vec::new(),
        }
    }

    /// The tools of a hub view, as OpenAI functions.
    pub fn from_view(view: View) -> ToolSet {
        let definitions = view
            .list()
            .iter()
            .filter_map(|t| view.resolve(&t.name).map(definition))
            .collect();
        ToolSet {
            view: Some(view),
            definitions,
        }
    }

    /// OpenAI `tools` entries.
    pub fn definitions(&self) -> &[Value] {
        &self.definitions
    }

    /// Whether no tool is offered.
    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty()
    }

    /// The catalogued tool behind a name the model used.
    pub fn resolve(&self, name: &str) -> Option<&CatalogTool> {
        self.view.as_ref()?.resolve(name)
    }

    /// Runs one call through the hub, bounded by `timeout` and `cancel`. Every failure is
    /// an outcome the model reads, never an error of the chat.
    #[allow(clippy::too_many_arguments)]
    pub async fn call(
        &self,
        hub: &Arc<Hub>,
        gate: &quarry_policy::Gate,
        caller: &Principal,
        tool: &CatalogTool,
        arguments: Map<String, Value>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> ToolOutcome {
        let started = Instant::now();
        // Its own token: a timeout cancels this call (and the upstream's work) only.
        let call_cancel = cancel.child_token();
        // The registry lookup (store-backed) runs on the blocking pool; the call itself is
        // the hub's async connection work.
        // The tool's policies first (as for an agent's call): a refused or held call ends
        // here with what the model should know (which policy, which approval to wait for).
        let (registry, who, target) = (hub.clone(), caller.clone(), tool.clone());
        let (gate, args) = (gate.clone(), arguments.clone());
        let checked = tokio::task::spawn_blocking(move || {
            quarry_store::thread_guard::allow_blocking(|| {
                let call = quarry_policy::Call {
                    principal: &who,
                    endpoint: None,
                    tool: &target.full_name,
                    arguments: &args,
                };
                match gate.check(&call, quarry_core::now_millis()) {
                    Ok(verdict) => {
                        let decided = verdict.outcome();
                        if let Some(refusal) = verdict.refusal() {
                            return (decided, Err(CallError::Refused(refusal)));
                        }
                        (decided, registry.route_tool(&who, &target))
                    }
                    Err(e) => (
                        None,
                        Err(CallError::Unavailable(format!("tool policies: {e}"))),
                    ),
                }
            })
        })
        .await;
        let (decided, routed) = match checked {
            Ok((decided, routed)) => (decided, Ok(routed)),
            Err(e) => (None, Err(e)),
        };
        let run = async {
            match routed {
                Ok(Ok(route)) => {
                    hub.call(route, tool, Some(arguments), None, call_cancel.clone())
                        .await
                }
                Ok(Err(e)) => Err(e),
                Err(e) => Err(CallError::Unavailable(format!("tool lookup failed: {e}"))),
            }
        };
        tokio::pin!(run);
        let result = tokio::select! {
            r = &mut run => r,
            _ = tokio::time::sleep(timeout) => {
                call_cancel.cancel();
                // The call itself tells the upstream (`notifications/cancelled`): let it
                // finish doing so rather than dropping it mid-way.
                let _ = tokio::time::timeout(CANCEL_GRACE, &mut run).await;
                Err(CallError::Timeout(timeout))
            }
        };
        let (ok, text) = match result {
            Ok(r) => (r.is_error != Some(true), result_text(&r)),
            Err(CallError::Timeout(d)) => (
                false,
                format!(
                    "the tool {} timed out after {} s and was cancelled",
                    tool.full_name,
                    d.as_secs_f32()
                ),
            ),
            Err(CallError::Refused(why)) => (false, why),
            Err(e) => (false, format!("the tool {} failed: {e}", tool.full_name)),
        };
        ToolOutcome {
            ok,
            text: clip_result(text),
            duration: started.elapsed(),
            gate: decided,
        }
    }
}

/// A catalogued tool as an OpenAI function definition.
fn definition(t: &CatalogTool) -> Value {
    let description = if t.catalog_description.trim().is_empty() {
        t.tool.description.as_deref().unwrap_or("").to_owned()
    } else {
        t.catalog_description.clone()
    };
    let description: String = description.chars().take(DESCRIPTION_CHARS).collect();
    let mut parameters = Value::Object((*t.tool.input_schema).clone());
    if let Value::Object(p) = &mut parameters {
        p.entry("type").or_insert_with(|| json!("object"));
        // Some providers (Qwen, older vLLM) refuse an object schema without properties.
        p.entry("properties").or_insert_with(|| json!({}));
    }
    json!({
        "type": "function",
        "function": {
            "name": t.wire_name,
            "description": description,
            "parameters": parameters,
        }
    })
}

/// The text a model reads from a tool result: its text blocks; other blocks named by kind;
/// `structuredContent` when there is no text.
fn result_text(r: &CallToolResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in &r.content {
        parts.push(block_text(block));
    }
    if parts.iter().all(|p| p.trim().is_empty())
        && let Some(s) = &r.structured_content
    {
        return s.to_string();
    }
    parts.join("\n")
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!("[image {}]", i.mime_type),
        ContentBlock::Audio(a) => format!("[audio {}]", a.mime_type),
        ContentBlock::Resource(r) => match &r.resource {
            rmcp::model::ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            rmcp::model::ResourceContents::BlobResourceContents { uri, .. } => {
                format!("[resource {uri} (binary)]")
            }
            _ => "[resource]".into(),
        },
        ContentBlock::ResourceLink(l) => format!("[resource link {} {}]", l.name, l.uri),
        // Kinds newer than this build: named by their JSON type.
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| {
                v.get("type")
                    .and_then(Value::as_str)
                    .map(|t| format!("[{t}]"))
            })
            .unwrap_or_else(|| "[content]".into()),
    }
}

fn clip_result(text: String) -> String {
    if text.chars().count() <= RESULT_CHARS {
        return text;
    }
    let total = text.chars().count();
    let mut out: String = text.chars().take(RESULT_CHARS).collect();
    out.push_str(&format!(
        "\n[… result cut: {RESULT_CHARS} of {total} characters shown]"
    ));
    out
}

/// The arguments the model wrote, as a JSON object; `Err` says what is wrong (the model
/// reads it as the tool's error and can try again).
pub fn parse_arguments(raw: &str) -> Result<Map<String, Value>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, got {}",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "something else",
            }
        )),
        Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        assert_eq!(parse_arguments("").unwrap().len(), 0);
        assert_eq!(parse_arguments("{\"a\":1}").unwrap()["a"], 1);
        assert!(parse_arguments("[1]").unwrap_err().contains("array"));
        assert!(
            parse_arguments("{\"a\":")
                .unwrap_err()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn long_results_are_cut() {
        let s = clip_result("x".repeat(RESULT_CHARS + 10));
        assert!(s.contains("result cut"));
        assert_eq!(clip_result("short".into()), "short");
    }
}
