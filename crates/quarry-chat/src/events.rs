//! What a chat reports while it runs (seed 003's SSE events), and their wire form.

use serde::Serialize;
use serde_json::{Value, json};

use crate::provider::Usage;

/// One retrieved passage, numbered for citation (`rag_source` entries).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Source {
    /// The citation number the model was told to use (`[index]`).
    pub index: usize,
    /// The passage's text.
    pub content: String,
    /// Its relevance (0–1).
    pub score: f64,
    /// The file name.
    pub source: String,
    /// PDF page or slide; `None` for unpaged sources.
    pub page: Option<u32>,
    /// The document's short id.
    pub docid: String,
    /// The knowledge-base document's id (its docid outside knowledge bases).
    pub document_id: String,
    /// The knowledge base's name.
    pub knowledge_base: String,
    /// Display path `knowledge-base/relative/path`.
    pub file: String,
}

/// A tool call and, once it ran, its outcome (stored with the assistant message).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct ToolCallRecord {
    /// The provider's id for the call.
    pub id: String,
    /// The tool's own name (`web_search`).
    pub name: String,
    /// Its catalog name (`web.web_search`); empty when the model named no offered tool.
    pub tool: String,
    /// The arguments the model wrote (JSON; the text when it is not JSON).
    pub arguments: Value,
    /// `calling`, `success` or `error`.
    pub status: String,
    /// The tool's output, once it ran.
    pub result: Option<String>,
    /// The tool round it was made in (from 1).
    pub round: usize,
    /// Milliseconds, to the microsecond.
    pub duration_ms: Option<f64>,
    /// What the tool policies decided (`{"outcome": "held", "approval_id", …}`), if any
    /// applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Value>,
}

/// The end of a chat that reached an answer.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Done {
    /// The conversation's UUID.
    pub conversation_id: String,
    /// The assistant message's UUID.
    pub message_id: String,
    /// `stop`, `tool_calls`, `length`, … as the provider said.
    pub finish_reason: String,
    /// Completions asked of the model.
    pub rounds: usize,
    /// Completions that called tools.
    pub tool_rounds: usize,
    /// Tokens over every completion of the run.
    pub usage: Usage,
    /// The query retrieval ran (the rewritten question on a follow-up), if any.
    pub retrieval_query: Option<String>,
    /// Where the time went.
    pub timings: Timings,
}

/// Where the time went, in milliseconds: retrieval (with the follow-up rewrite), waiting
/// for the model, running tools, and the whole run. What remains is Quarry's own overhead.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Timings {
    /// Searching the knowledge bases (and rewriting a follow-up).
    pub retrieval_ms: f64,
    /// Waiting for the model.
    pub model_ms: f64,
    /// Running tools.
    pub tools_ms: f64,
    /// The whole run.
    pub total_ms: f64,
}

/// A failure after the stream began.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChatFailure {
    /// What went wrong, for people.
    pub message: String,
    /// `provider_error`, `provider_unavailable` or `internal`.
    pub code: &'static str,
    /// The provider's HTTP status, for `provider_error`.
    pub status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq)]
/// One event of a running chat (an SSE event of seed 003).
pub enum ChatEvent {
    /// The conversation and message the answer is stored as (first).
    Conversation {
        /// The conversation's UUID.
        id: String,
        /// The assistant message's UUID.
        message_id: String,
        /// The conversation's title.
        title: String,
    },
    /// The passages retrieved, numbered for citation.
    RagSource(Vec<Source>),
    /// A piece of the answer's text.
    Delta(String),
    /// The model called a tool.
    ToolCall(ToolCallRecord),
    /// A tool call finished.
    ToolResult(ToolCallRecord),
    /// The answer is complete.
    Done(Done),
    /// The run failed after the stream began.
    Error(ChatFailure),
}

impl ChatEvent {
    /// The event's `type` (and SSE `event:` name).
    pub fn kind(&self) -> &'static str {
        match self {
            ChatEvent::Conversation { .. } => "conversation",
            ChatEvent::RagSource(_) => "rag_source",
            ChatEvent::Delta(_) => "delta",
            ChatEvent::ToolCall(_) => "tool_call",
            ChatEvent::ToolResult(_) => "tool_result",
            ChatEvent::Done(_) => "done",
            ChatEvent::Error(_) => "error",
        }
    }

    /// The event's `data`.
    pub fn payload(&self) -> Value {
        match self {
            ChatEvent::Conversation {
                id,
                message_id,
                title,
            } => json!({"id": id, "message_id": message_id, "title": title}),
            ChatEvent::RagSource(sources) => json!(sources),
            ChatEvent::Delta(text) => json!({"content": text}),
            ChatEvent::ToolCall(c) => json!({
                "id": c.id, "name": c.name, "arguments": c.arguments,
                "status": "calling", "tool": c.tool, "round": c.round,
            }),
            ChatEvent::ToolResult(c) => json!({
                "id": c.id, "name": c.name, "status": c.status,
                "result": c.result.as_deref().unwrap_or(""), "tool": c.tool,
                "round": c.round, "duration_ms": c.duration_ms.unwrap_or(0.0),
            }),
            ChatEvent::Done(d) => json!(d),
            ChatEvent::Error(e) => json!(e),
        }
    }

    /// The event as Server-Sent Events text: `event:` for clients that listen by name,
    /// `data:` with `{"type", "data"}` for clients that dispatch on `type` (seed 003).
    pub fn to_sse(&self) -> String {
        let body = json!({"type": self.kind(), "data": self.payload()});
        // serde_json escapes newlines inside strings, so the JSON is one line.
        format!("event: {}\ndata: {body}\n\n", self.kind())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_framing() {
        let e = ChatEvent::Delta("line one\nline two".into());
        let s = e.to_sse();
        assert_eq!(s.lines().filter(|l| !l.is_empty()).count(), 2);
        assert!(s.starts_with("event: delta\ndata: {"));
        assert!(s.ends_with("}\n\n"));
        let v: Value =
            serde_json::from_str(s.lines().nth(1).unwrap().strip_prefix("data: ").unwrap())
                .unwrap();
        assert_eq!(v["type"], "delta");
        assert_eq!(v["data"]["content"], "line one\nline two");
    }
}
