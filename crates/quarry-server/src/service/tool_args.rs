//! MCP tool plumbing every tool module shares: typed arguments with messages that name the
//! field, tool errors and annotations (the call itself is in `tool_call`).

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

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
/// A successful tool result: `text` for the model, `structured` as `structuredContent`.
pub(crate) fn with_structured(text: String, structured: serde_json::Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    r
}

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
