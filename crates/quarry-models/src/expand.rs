//! LLM query expansion: alternative phrasings of a search query from an OpenAI-compatible chat
//! API (`POST /v1/chat/completions`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::error::ModelError;
use crate::meter::ModelPurpose;
use crate::remote::{ApiKey, Http, invalid, openai_endpoint, read_key};
use crate::types::ModelIdentity;

/// Longest variant kept, in characters: anything longer is commentary, not a query.
const MAX_VARIANT_CHARS: usize = 300;

/// The instruction sent with every query.
const SYSTEM_PROMPT: &str = "You expand search queries for a document search engine. Given a \
search query, write 3 to 5 alternative search queries that would find the same documents: \
synonyms, rephrasings and the keywords a matching document is likely to contain. Write them in \
the same language as the query. Output only the queries, one per line, with no numbering, no \
bullets, no quotes and no commentary.";

/// Produces alternative phrasings of a search query (for recall: each is searched too and the
/// results are fused).
pub trait QueryExpander: Send + Sync {
    /// The model: `name` and `revision` are the model name, `dimensions` is 0.
    fn identity(&self) -> &ModelIdentity;
    /// 0..=max_variants alternative phrasings of `query` (never the query itself,
    /// deduplicated case-insensitively, trimmed, non-empty, each <= 300 chars).
    fn expand(&self, query: &str) -> Result<Vec<String>, ModelError>;
}

impl<T: QueryExpander + ?Sized> QueryExpander for Box<T> {
    fn identity(&self) -> &ModelIdentity {
        (**self).identity()
    }
    fn expand(&self, query: &str) -> Result<Vec<String>, ModelError> {
        (**self).expand(query)
    }
}

/// Options for [`OpenAiChatExpander`].
#[derive(Debug, Clone)]
pub struct ChatOptions {
    /// `https://api.openai.com/v1`, `http://localhost:11434/v1`, … (`/chat/completions` is
    /// appended, with `/v1` before it unless the URL already ends in `/v1`, as for
    /// [`crate::remote::OpenAiOptions::base_url`]).
    pub base_url: String,
    /// Chat model name sent in every request.
    pub model: String,
    /// The API key (`None`: no Authorization header).
    pub api_key: Option<ApiKey>,
    /// Whole-request timeout (default 30 s: expansion sits on the query path).
    pub timeout: Duration,
    /// Most variants returned (default 4).
    pub max_variants: usize,
}

impl ChatOptions {
    /// Defaults: no API key, 30 s timeout, at most 4 variants.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        ChatOptions {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: Duration::from_secs(30),
            max_variants: 4,
        }
    }
}

/// A [`QueryExpander`] behind an OpenAI-compatible `POST /v1/chat/completions` endpoint
/// (OpenAI, Ollama's `/v1`, llama.cpp, vLLM, …). Requests use temperature 0 so the same query
/// expands the same way.
#[derive(Debug)]
pub struct OpenAiChatExpander {
    http: Http,
    url: String,
    opts: ChatOptions,
    identity: ModelIdentity,
}

impl OpenAiChatExpander {
    /// Takes the API key from `opts.api_key` (error if its variable held none); sends
    /// nothing.
    pub fn new(opts: ChatOptions) -> Result<Self, ModelError> {
        let model = opts.model.trim();
        if model.is_empty() {
            return Err(ModelError::InvalidInput("chat model name is empty".into()));
        }
        if opts.base_url.trim().is_empty() {
            return Err(ModelError::InvalidInput(
                "chat API base URL is empty".into(),
            ));
        }
        let key = read_key(opts.api_key.as_ref())?;
        let url = openai_endpoint(&opts.base_url, "chat/completions");
        Ok(OpenAiChatExpander {
            http: Http::new(key, opts.timeout, &url)?,
            url,
            identity: ModelIdentity {
                name: model.to_string(),
                dimensions: 0,
                revision: model.to_string(),
            },
            opts,
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One chat completion at temperature 0: the assistant's text for `system` + `user`.
    pub(crate) fn complete(
        &self,
        system: &str,
        user: &str,
        purpose: ModelPurpose,
    ) -> Result<String, ModelError> {
        let body = json!({
            "model": self.identity.name,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
        });
        let resp = self.http.post_json(&self.url, &body, purpose)?;
        let url = self.http.scrub(&self.url);
        message_text(&resp).ok_or_else(|| {
            invalid(
                &url,
                "no text in choices[0].message.content (expected an OpenAI chat completion)",
            )
        })
    }
}

impl QueryExpander for OpenAiChatExpander {
    fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    fn expand(&self, query: &str) -> Result<Vec<String>, ModelError> {
        let query = query.trim();
        if query.is_empty() || self.opts.max_variants == 0 {
            return Ok(Vec::new());
        }
        let content = self.complete(SYSTEM_PROMPT, query, ModelPurpose::Expansion)?;
        Ok(parse_variants(&content, query, self.opts.max_variants))
    }
}

/// `choices[0].message.content`: a string, or an array of `{type: "text", text}` parts.
fn message_text(resp: &Value) -> Option<String> {
    let content = resp
        .get("choices")?
        .get(0)?
        .get("message")?
        .get("content")?;
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// Turns the model's reply into clean variants: one per line, list markers and quotes removed,
/// commentary, the original query and duplicates (case-insensitive) dropped, at most `max`.
pub(crate) fn parse_variants(content: &str, query: &str, max: usize) -> Vec<String> {
    // Reasoning models (DeepSeek-R1, Qwen3 via Ollama) put their thinking before the answer.
    let content = match content.rfind("</think>") {
        Some(i) => &content[i + "</think>".len()..],
        None => content,
    };
    let mut seen = vec![normalize(query).to_lowercase()];
    let mut out = Vec::new();
    for line in content.lines() {
        if out.len() >= max {
            break;
        }
        let Some(v) = clean_line(line) else {
            continue;
        };
        let key = v.to_lowercase();
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(v);
    }
    out
}

/// Collapses runs of whitespace to one space.
fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One line of the reply as a query, or `None` for blanks, headings and commentary.
fn clean_line(line: &str) -> Option<String> {
    let mut s = line.trim();
    if s.starts_with("```") {
        return None;
    }
    // A Markdown heading ("## Alternatives") is commentary; "#hashtag" is not a heading.
    if s.starts_with('#') && s.trim_start_matches('#').starts_with(char::is_whitespace) {
        return None;
    }
    s = strip_marker(s).trim();
    // Markdown emphasis and quotes around the whole line, possibly nested (**"…"**).
    loop {
        let before = s;
        for (open, close) in [
            ("**", "**"),
            ("\"", "\""),
            ("'", "'"),
            ("`", "`"),
            ("“", "”"),
            ("‘", "’"),
            ("「", "」"),
            ("『", "』"),
        ] {
            if s.len() >= open.len() + close.len() && s.starts_with(open) && s.ends_with(close) {
                s = s[open.len()..s.len() - close.len()].trim();
            }
        }
        // A trailing comma after a quoted item ("a", "b",) is list syntax, not query text.
        if let Some(t) = s.strip_suffix(',')
            && t.ends_with(['"', '\'', '”'])
        {
            s = t.trim();
        }
        if s == before {
            break;
        }
    }
    let v = normalize(s);
    // A line ending in a colon introduces a list ("Here are some queries:", "**Synonyms:**").
    if v.is_empty()
        || v.ends_with(':')
        || v.ends_with('：')
        || v.chars().count() > MAX_VARIANT_CHARS
    {
        return None;
    }
    Some(v)
}

/// Removes a leading list marker: `-`, `*`, `•`, `+`, `1.`, `2)`, `1、`, `(3)`.
fn strip_marker(s: &str) -> &str {
    let s = s.trim_start();
    for bullet in ["- ", "* ", "• ", "+ ", "– ", "— ", "· "] {
        if let Some(rest) = s.strip_prefix(bullet) {
            return rest;
        }
    }
    if matches!(s, "-" | "*" | "•" | "+" | "–" | "—" | "·") {
        return "";
    }
    // Numbering: digits then `.`, `)` or `:` and a space; `(digits)`. "3D printing" or
    // "1.5 litre" are left alone (no space after the marker).
    let digits_end = s
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(s.len(), |(i, _)| i);
    if digits_end > 0 && digits_end <= 3 {
        let rest = &s[digits_end..];
        for mark in [". ", ") ", ": ", "、", "．"] {
            if let Some(r) = rest.strip_prefix(mark) {
                return r;
            }
        }
        if matches!(rest, "." | ")") {
            return "";
        }
    }
    if let Some(inner) = s.strip_prefix('(')
        && let Some(close) = inner.find(") ")
        && close > 0
        && close <= 3
        && inner[..close].chars().all(|c| c.is_ascii_digit())
    {
        return &inner[close + 2..];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_quotes() {
        let reply = "## Alternatives\nHere are some alternatives:\n**Synonyms:**\n\
                     1. extract a tar archive\n\
                     2) \"untar file\"\n\
                     - **tar -x command**\n\
                     * decompress tarball\n\
                     (5) open .tar.gz\n\
                     \n\
                     3D printing basics\n";
        let v = parse_variants(reply, "how to extract tar", 10);
        assert_eq!(
            v,
            vec![
                "extract a tar archive",
                "untar file",
                "tar -x command",
                "decompress tarball",
                "open .tar.gz",
                "3D printing basics"
            ]
        );
    }

    #[test]
    fn original_duplicates_cap_and_think() {
        let reply = "<think>The user wants\nsynonyms.</think>\nHow  to Extract TAR\nuntar\nUNTAR\n「解压 tar」\nb\nc";
        let v = parse_variants(reply, "how to extract tar", 3);
        assert_eq!(v, vec!["untar", "解压 tar", "b"]);
        let long = "x".repeat(301);
        assert!(parse_variants(&long, "q", 4).is_empty());
        assert!(parse_variants("1.\n-\n\"\"", "q", 4).is_empty());
    }
}
