//! The prompts Quarry writes: the knowledge-base context with citation numbers, and the
//! follow-up rewrite.

use serde_json::{Value, json};

use crate::events::Source;

/// Characters of one passage put in the prompt.
const PASSAGE_CHARS: usize = 2000;
/// Characters of one earlier message shown to the rewrite.
const REWRITE_TURN_CHARS: usize = 600;
/// Earlier messages shown to the rewrite.
const REWRITE_TURNS: usize = 6;

/// The system message that carries retrieved passages, numbered `[1]…[n]` with file and page,
/// and asks the model to cite them by number.
pub fn sources_message(sources: &[Source]) -> Value {
    let mut text = String::from(
        "Answer using the numbered passages below from the user's knowledge bases when they \
         are relevant. Cite the passages you use with their numbers in square brackets, like \
         [1] or [2][3], right after the statement they support. If the passages do not contain \
         the answer, say so and answer from general knowledge or the tools, without citing.\n\n",
    );
    for s in sources {
        let page = s.page.map(|p| format!(", page {p}")).unwrap_or_default();
        let content: String = s.content.chars().take(PASSAGE_CHARS).collect();
        text.push_str(&format!(
            "[{}] {}{}\n{}\n\n",
            s.index,
            s.source,
            page,
            content.trim()
        ));
    }
    json!({"role": "system", "content": text.trim_end()})
}

/// The system message when retrieval was asked for but found nothing.
pub fn no_sources_message() -> Value {
    json!({
        "role": "system",
        "content": "The user's knowledge bases were searched for this question and nothing relevant was found. Say so if the answer depended on them."
    })
}

/// A request asking the model to turn a follow-up into a standalone search query.
pub fn rewrite_messages(history: &[(String, String)], question: &str) -> Vec<Value> {
    let start = history.len().saturating_sub(REWRITE_TURNS);
    let mut convo = String::new();
    for (role, content) in &history[start..] {
        let content: String = content.chars().take(REWRITE_TURN_CHARS).collect();
        convo.push_str(&format!("{role}: {}\n", content.trim()));
    }
    vec![
        json!({
            "role": "system",
            "content": "You rewrite the user's latest question into a standalone search query for a document search engine. Resolve pronouns and references (\"it\", \"the second one\", \"that chapter\") from the conversation, keep names, numbers and the question's language, add nothing else. Reply with the query only, on one line."
        }),
        json!({
            "role": "user",
            "content": format!("Conversation:\n{convo}\nLatest question: {question}\n\nStandalone query:")
        }),
    ]
}

/// The model's rewrite, cleaned: one line, no quotes or label; `None` when unusable.
pub fn clean_rewrite(raw: &str, max_chars: usize) -> Option<String> {
    let line = raw.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line
        .strip_prefix("Standalone query:")
        .unwrap_or(line)
        .trim()
        .trim_matches(|c| c == '"' || c == '“' || c == '”' || c == '\'')
        .trim();
    if line.is_empty() || line.chars().count() > max_chars {
        return None;
    }
    Some(line.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_numbered_with_pages() {
        let s = Source {
            index: 2,
            content: "Retries back off.".into(),
            score: 0.8,
            source: "guide.pdf".into(),
            page: Some(3),
            docid: "#abc123".into(),
            document_id: "d".into(),
            knowledge_base: "kb".into(),
            file: "kb/guide.pdf".into(),
        };
        let m = sources_message(&[s]);
        let text = m["content"].as_str().unwrap();
        assert!(
            text.contains("[2] guide.pdf, page 3\nRetries back off."),
            "{text}"
        );
        assert!(text.contains("Cite"));
    }

    #[test]
    fn rewrites_are_cleaned() {
        assert_eq!(
            clean_rewrite("\n\"What is X?\"\nmore", 100).as_deref(),
            Some("What is X?")
        );
        assert_eq!(
            clean_rewrite("Standalone query: retry policy", 100).as_deref(),
            Some("retry policy")
        );
        assert_eq!(clean_rewrite("   ", 100), None);
        assert_eq!(clean_rewrite("x".repeat(50).as_str(), 10), None);
        let m = rewrite_messages(
            &[
                ("user".into(), "Tell me about A".into()),
                ("assistant".into(), "A is…".into()),
            ],
            "and its price?",
        );
        assert!(
            m[1]["content"]
                .as_str()
                .unwrap()
                .contains("user: Tell me about A")
        );
    }
}
