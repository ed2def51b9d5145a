//! Wiki pages drafted by the configured chat model (issue 68 item 7): "draft pages for these
//! documents". The model reads each document with its line numbers and answers a page in
//! JSON — slug, title, Markdown body, and the line ranges it was written from; Quarry writes
//! it as a `draft` page under the same rules as an agent's write (`Engine::write_page`): a
//! cited range the document does not have, a taken slug or a bad field refuses that draft,
//! with why, and writes nothing. The model writes; Quarry keeps it honest.

use quarry_core::{Error, Result};
use quarry_engine::{Citation, CitedLines, Engine, PageStatus, PageView, PageWrite};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::provider::{CompletionRequest, Provider};

/// Most documents one request drafts for.
pub const MAX_DRAFT_DOCUMENTS: usize = 20;
/// Most characters of a document the model is shown (its first lines).
const DOCUMENT_CHARS: usize = 24_000;

const DRAFT_PROMPT: &str = "You write one wiki page from one document. The document follows, each line prefixed by its number and ': '. \
Answer with one JSON object and nothing else: {\"slug\": \"lower-case-words-with-hyphens\", \"title\": \"…\", \"body\": \"Markdown: a short summary of what the document says, with the facts a reader needs; write keyed facts as lines 'key:: value'\", \"sources\": [[first_line, last_line], …]}. \
Every statement in the body must come from the lines you list in sources (1 to 10 ranges, each at most 40 lines). Do not invent facts or line numbers.";

/// What to draft.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraftRequest {
    /// Knowledge-base document ids (`knowledge_id`s), one page each.
    pub documents: Vec<String>,
    /// The pages' type (default `summary`).
    #[serde(default, rename = "type")]
    pub page_type: Option<String>,
}

/// One document's draft.
#[derive(Debug, Clone, Serialize)]
pub struct Draft {
    /// The document it is drafted from.
    pub document: String,
    /// `drafted`, or `refused` (nothing written).
    pub status: &'static str,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The page written (status `draft`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<PageView>,
}

/// The page the model answered.
#[derive(Debug, Deserialize)]
struct ModelPage {
    slug: String,
    title: String,
    body: String,
    #[serde(default)]
    sources: Vec<[u32; 2]>,
}

/// The JSON object in a model's answer (bare, or in a ```json fence, or amid words).
fn model_page(text: &str) -> std::result::Result<ModelPage, String> {
    let start = text.find('{').ok_or("the model answered no JSON object")?;
    let end = text.rfind('}').ok_or("the model answered no JSON object")?;
    if end < start {
        return Err("the model answered no JSON object".into());
    }
    serde_json::from_str(&text[start..=end])
        .map_err(|e| format!("the model's page is not the JSON asked for: {e}"))
}

/// Runs `f` on a blocking thread (store and engine calls never run on the runtime).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(move || quarry_store::thread_guard::allow_blocking(f))
        .await
        .map_err(|e| Error::Storage(format!("a drafting worker failed: {e}")))?
}

/// Drafts a page for each of `req.documents` of the knowledge base `kb` with `provider`,
/// written as `engine`'s caller (who must may write) with `provenance` (the model is added).
/// A document the caller cannot read, a model that fails or a page the rules refuse is
/// reported on its document; the others are drafted.
pub async fn draft_pages(
    provider: &Provider,
    engine: Engine,
    kb: String,
    req: DraftRequest,
    mut provenance: serde_json::Map<String, Value>,
    cancel: &CancellationToken,
) -> Result<Vec<Draft>> {
    if req.documents.is_empty() || req.documents.len() > MAX_DRAFT_DOCUMENTS {
        return Err(Error::invalid(format!(
            "name 1 to {MAX_DRAFT_DOCUMENTS} documents to draft pages for (their knowledge_id)"
        )));
    }
    if !engine.scope().can(quarry_core::Access::Write) {
        return Err(Error::Forbidden(
            "drafting writes pages: this credential may only read".into(),
        ));
    }
    provenance.insert("model".into(), json!(provider.config().label()));
    let page_type = req.page_type.unwrap_or_else(|| "summary".into());
    let mut drafts = Vec::with_capacity(req.documents.len());
    for document in req.documents {
        let refused = |detail: String| Draft {
            document: document.clone(),
            status: "refused",
            detail: Some(detail),
            page: None,
        };
        let (e, k, d) = (engine.clone(), kb.clone(), document.clone());
        let view = match blocking(move || {
            let file = e.find_knowledge(Some(&k), &d)?;
            e.knowledge_view(file)
        })
        .await
        {
            Ok(v) => v,
            Err(e @ (Error::NotFound(_) | Error::InvalidInput(_))) => {
                drafts.push(refused(e.to_string()));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut numbered = quarry_core::add_line_numbers(&view.content, 1);
        if numbered.len() > DOCUMENT_CHARS {
            let cut = (0..=DOCUMENT_CHARS)
                .rev()
                .find(|i| numbered.is_char_boundary(*i))
                .unwrap_or(0);
            numbered.truncate(cut);
        }
        let messages = [
            json!({"role": "system", "content": DRAFT_PROMPT}),
            json!({"role": "user", "content": format!("Document '{}':\n\n{numbered}", view.title)}),
        ];
        let answer = provider
            .complete(
                &CompletionRequest {
                    messages: &messages,
                    temperature: Some(0.2),
                    ..CompletionRequest::default()
                },
                cancel,
            )
            .await;
        let page = match answer
            .map_err(|e| format!("the model failed: {e}"))
            .and_then(|t| model_page(&t))
        {
            Ok(p) => p,
            Err(m) => {
                drafts.push(refused(m));
                continue;
            }
        };
        let write = PageWrite {
            slug: page.slug,
            title: page.title,
            page_type: page_type.clone(),
            body: page.body,
            status: PageStatus::Draft,
            tags: vec!["drafted".into()],
            sources: page
                .sources
                .iter()
                .map(|[a, b]| Citation {
                    document: view.file.id.clone(),
                    lines: CitedLines::Range(*a, *b),
                })
                .collect(),
            base_version: None,
            provenance: provenance.clone(),
        };
        let (e, k) = (engine.clone(), kb.clone());
        match blocking(move || e.write_page(&k, write)).await {
            Ok(page) => drafts.push(Draft {
                document,
                status: "drafted",
                detail: None,
                page: Some(page),
            }),
            Err(e @ (Error::InvalidInput(_) | Error::NotFound(_) | Error::Conflict(_))) => {
                drafts.push(refused(e.to_string()));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(drafts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_found_in_the_answer() {
        let p = model_page("Here:\n```json\n{\"slug\": \"a\", \"title\": \"A\", \"body\": \"b\", \"sources\": [[1, 2]]}\n```").unwrap();
        assert_eq!((p.slug.as_str(), p.sources), ("a", vec![[1, 2]]));
        assert!(model_page("no json").is_err());
        assert!(model_page("{\"slug\": 1}").is_err());
        assert!(model_page("} {").is_err());
    }
}
