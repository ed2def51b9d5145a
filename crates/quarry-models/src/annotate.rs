//! Titles, tags and a summary for notes agents create (seed 004: QukaAI summarises each
//! knowledge entry in the background), from the same OpenAI-compatible chat models as query
//! expansion.

use serde_json::Value;

use crate::error::ModelError;
use crate::expand::OpenAiChatExpander;
use crate::meter::ModelPurpose;

/// Most characters of a note sent to the model.
const MAX_INPUT_CHARS: usize = 12_000;
const MAX_TITLE_CHARS: usize = 120;
const MAX_TAGS: usize = 8;
const MAX_TAG_CHARS: usize = 40;
const MAX_SUMMARY_CHARS: usize = 600;

const SYSTEM_PROMPT: &str = "You file notes in a knowledge base. Read the note and reply with \
one JSON object and nothing else: {\"title\": a short title (at most 10 words), \"tags\": 1 to 5 \
short lowercase topic tags, \"summary\": one or two sentences}. Write in the note's language.";

/// What a model said about a note; every field is checked and bounded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NoteAnnotation {
    /// A title, when the note has none.
    pub title: Option<String>,
    /// A few tags.
    pub tags: Vec<String>,
    /// A one-line summary.
    pub summary: Option<String>,
}

/// Describes a note: title, tags, summary.
pub trait NoteAnnotator: Send + Sync {
    /// Describes the note whose text is `markdown`.
    fn annotate(&self, markdown: &str) -> Result<NoteAnnotation, ModelError>;
}

impl NoteAnnotator for OpenAiChatExpander {
    fn annotate(&self, markdown: &str) -> Result<NoteAnnotation, ModelError> {
        let input: String = markdown.chars().take(MAX_INPUT_CHARS).collect();
        let reply = self.complete(SYSTEM_PROMPT, &input, ModelPurpose::Annotation)?;
        parse_annotation(&reply).ok_or_else(|| {
            ModelError::InvalidInput(format!(
                "the chat model's reply is not the JSON object asked for: {:?}",
                reply.chars().take(200).collect::<String>()
            ))
        })
    }
}

fn bounded(s: &str, max: usize) -> Option<String> {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let s = s.trim_matches(|c: char| c == '"' || c == '\'' || c.is_whitespace());
    if s.is_empty() {
        return None;
    }
    Some(s.chars().take(max).collect())
}

/// The JSON object in a reply (reasoning before `</think>`, code fences and prose around it
/// are ignored); `None` when there is none or it has no usable field.
pub(crate) fn parse_annotation(reply: &str) -> Option<NoteAnnotation> {
    let reply = match reply.rfind("</think>") {
        Some(i) => &reply[i + "</think>".len()..],
        None => reply,
    };
    let start = reply.find('{')?;
    let end = reply.rfind('}')?;
    let v: Value = serde_json::from_str(reply.get(start..=end)?).ok()?;
    let title = v
        .get("title")
        .and_then(Value::as_str)
        .and_then(|t| bounded(t, MAX_TITLE_CHARS));
    let summary = v
        .get("summary")
        .and_then(Value::as_str)
        .and_then(|t| bounded(t, MAX_SUMMARY_CHARS));
    let mut tags: Vec<String> = Vec::new();
    if let Some(list) = v.get("tags").and_then(Value::as_array) {
        for t in list.iter().filter_map(Value::as_str) {
            if let Some(t) = bounded(&t.to_lowercase(), MAX_TAG_CHARS)
                && !tags.contains(&t)
                && tags.len() < MAX_TAGS
            {
                tags.push(t);
            }
        }
    }
    let a = NoteAnnotation {
        title,
        tags,
        summary,
    };
    (a != NoteAnnotation::default()).then_some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_parsed_and_bounded() {
        let a = parse_annotation(
            "<think>hmm</think>```json\n{\"title\": \" Launch  plan \", \"tags\": [\"MCP\", \"mcp\", \"\", 3], \"summary\": \"We ship.\"}\n```",
        )
        .unwrap();
        assert_eq!(a.title.as_deref(), Some("Launch plan"));
        assert_eq!(a.tags, vec!["mcp"]);
        assert_eq!(a.summary.as_deref(), Some("We ship."));
        let long = format!("{{\"title\": \"{}\"}}", "x".repeat(500));
        assert_eq!(
            parse_annotation(&long).unwrap().title.unwrap().len(),
            MAX_TITLE_CHARS
        );
        assert!(parse_annotation("no json here").is_none());
        assert!(parse_annotation("{\"other\": 1}").is_none());
        assert!(parse_annotation("{broken").is_none());
    }
}
