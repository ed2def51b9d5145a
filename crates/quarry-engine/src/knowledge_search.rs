//! `knowledge_search` (seed 000; WeKnora's `/api/v1/knowledge-search`, Dify's retrieval):
//! one request shape over the three search modes, with per-hit provenance — the knowledge
//! base, file, page and whether keyword or vector retrieval found it.

use quarry_core::{Error, Result, SearchHit};
use serde::Serialize;

use crate::{Engine, SearchRequest};

/// Longest query (seed 000).
pub const MAX_QUERY_CHARS: usize = 2000;
/// Largest `top_k` (seed 000).
pub const MAX_TOP_K: usize = 50;
/// Characters of text per result (the seed's result text shows the first 500).
const CONTENT_CHARS: usize = 1000;
/// How deep `total_count` looks.
const COUNT_DEPTH: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    Hybrid,
    Vector,
    Keyword,
}

impl SearchMode {
    pub fn parse(s: &str) -> Result<SearchMode> {
        match s {
            "hybrid" => Ok(SearchMode::Hybrid),
            "vector" => Ok(SearchMode::Vector),
            "keyword" => Ok(SearchMode::Keyword),
            other => Err(Error::invalid(format!(
                "search_mode must be one of hybrid, vector, keyword; got {other:?}"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Hybrid => "hybrid",
            SearchMode::Vector => "vector",
            SearchMode::Keyword => "keyword",
        }
    }
}

/// A knowledge search with the seed's defaults.
#[derive(Debug, Clone)]
pub struct KnowledgeSearch {
    pub query: String,
    pub mode: SearchMode,
    pub top_k: usize,
    pub min_score: f64,
    pub rerank: bool,
    /// Knowledge bases (names or ids) to search, within what the caller may read; `None`:
    /// all of them.
    pub knowledge_bases: Option<Vec<String>>,
    /// How many candidates retrieval gathers before the `top_k` cut (seed 003's
    /// `RAG_ANN_TOP_K`); `None`: deep enough to count matches for `total_count`.
    pub depth: Option<usize>,
}

impl KnowledgeSearch {
    pub fn new(query: impl Into<String>) -> KnowledgeSearch {
        KnowledgeSearch {
            query: query.into(),
            mode: SearchMode::Hybrid,
            top_k: 10,
            min_score: 0.5,
            rerank: true,
            knowledge_bases: None,
            depth: None,
        }
    }

    fn validate(&self) -> Result<()> {
        let n = self.query.chars().count();
        if self.query.trim().is_empty() || n > MAX_QUERY_CHARS {
            return Err(Error::invalid(format!(
                "query must be 1 to {MAX_QUERY_CHARS} characters (got {n})"
            )));
        }
        if !(1..=MAX_TOP_K).contains(&self.top_k) {
            return Err(Error::invalid(format!(
                "top_k must be between 1 and {MAX_TOP_K}, got {}",
                self.top_k
            )));
        }
        if !(0.0..=1.0).contains(&self.min_score) || self.min_score.is_nan() {
            return Err(Error::invalid(format!(
                "min_score must be between 0 and 1, got {}",
                self.min_score
            )));
        }
        Ok(())
    }
}

/// One result, in the seed's shape plus page, docid and knowledge base.
#[derive(Debug, Clone, Serialize)]
pub struct KnowledgeHit {
    /// The passage: `<docid>:<first line>`.
    pub id: String,
    pub content: String,
    pub score: f64,
    /// The document: a knowledge-base document's id, else its docid.
    pub knowledge_id: String,
    pub knowledge_title: String,
    pub knowledge_filename: String,
    /// `keyword`, `vector` or `hybrid` (found by both).
    pub match_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    pub docid: String,
    pub knowledge_base: String,
    /// Display path `collection/relative/path`.
    pub file: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct KnowledgeSearchResult {
    pub results: Vec<KnowledgeHit>,
    /// Matches at or above `min_score` (counted up to 100).
    pub total_count: usize,
    /// The mode that ran (`hybrid` degrades to `keyword` without vectors).
    pub search_mode: SearchMode,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A snippet's text without its `N: ` line numbers; the first line number.
fn plain_text(snippet: &str) -> (String, Option<usize>) {
    let mut first = None;
    let lines: Vec<&str> = snippet
        .lines()
        .map(|l| match l.split_once(": ") {
            Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                first = first.or(n.parse().ok());
                rest
            }
            _ => l,
        })
        .collect();
    (lines.join("\n").trim().to_owned(), first)
}

impl Engine {
    /// The collection ids of knowledge bases (or collections) named by name or id, among
    /// those this handle may read; one it cannot see is "not found", like a missing one.
    pub fn knowledge_base_ids(&self, keys: &[String]) -> Result<Vec<i64>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let visible = self.collections()?;
        keys.iter()
            .map(|key| {
                visible
                    .iter()
                    .find(|c| c.name == *key)
                    .map(|c| c.id)
                    .or_else(|| self.knowledge_base(key).ok().map(|kb| kb.collection_id))
                    .ok_or_else(|| Error::not_found(format!("knowledge base '{key}' not found")))
            })
            .collect()
    }

    /// Searches the knowledge bases this handle may read (narrowed to `knowledge_bases` when
    /// given; one the caller cannot see is "not found", like a missing one).
    pub fn knowledge_search(&self, req: &KnowledgeSearch) -> Result<KnowledgeSearchResult> {
        req.validate()?;
        let engine = match &req.knowledge_bases {
            None => self.clone(),
            Some(keys) => self.narrowed_for_search(&self.knowledge_base_ids(keys)?),
        };
        let search = SearchRequest {
            query: req.query.clone(),
            limit: req.depth.unwrap_or(COUNT_DEPTH).max(req.top_k),
            min_score: req.min_score,
            collection: None,
            rerank: req.rerank,
            excerpt_chars: CONTENT_CHARS,
        };
        let (hits, types, ran, warnings): (
            Vec<SearchHit>,
            Vec<&'static str>,
            SearchMode,
            Vec<String>,
        ) = match req.mode {
            SearchMode::Keyword => {
                let hits = engine.search(&search)?;
                let n = hits.len();
                (hits, vec!["keyword"; n], SearchMode::Keyword, Vec::new())
            }
            SearchMode::Vector => {
                let hits = engine.vsearch(&search)?;
                let n = hits.len();
                (hits, vec!["vector"; n], SearchMode::Vector, Vec::new())
            }
            SearchMode::Hybrid => {
                let r = engine.query(&search)?;
                let ran = if r.stages.contains(&"vector") {
                    SearchMode::Hybrid
                } else {
                    SearchMode::Keyword
                };
                (r.results, r.match_types, ran, r.warnings)
            }
        };
        let total_count = hits.len();
        let collections = engine.collections()?;
        let mut results = Vec::with_capacity(req.top_k.min(hits.len()));
        for (hit, match_type) in hits.into_iter().zip(types).take(req.top_k) {
            let (kb, rel) = hit.file.split_once('/').unwrap_or(("", hit.file.as_str()));
            let is_kb = collections
                .iter()
                .any(|c| c.name == kb && c.kind == quarry_core::CollectionKind::KnowledgeBase);
            let knowledge_id = if is_kb {
                engine
                    .kb_document(kb, rel)
                    .map(|f| f.id)
                    .unwrap_or_else(|_| hit.docid.clone())
            } else {
                hit.docid.clone()
            };
            let (content, line) = plain_text(&hit.snippet);
            results.push(KnowledgeHit {
                id: format!("{}:{}", hit.docid, line.unwrap_or(1)),
                content,
                score: hit.score,
                knowledge_id,
                knowledge_title: hit.title.clone(),
                knowledge_filename: rel.rsplit('/').next().unwrap_or(rel).to_owned(),
                match_type,
                page: hit.page,
                docid: hit.docid.clone(),
                knowledge_base: kb.to_owned(),
                file: hit.file.clone(),
            });
        }
        Ok(KnowledgeSearchResult {
            results,
            total_count,
            search_mode: ran,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_are_stripped() {
        let (t, first) = plain_text("12: # Title\n13: body: text\n14: ");
        assert_eq!(t, "# Title\nbody: text");
        assert_eq!(first, Some(12));
        assert_eq!(plain_text("no numbers").1, None);
    }

    #[test]
    fn requests_are_checked() {
        let mut r = KnowledgeSearch::new("x");
        assert!(r.validate().is_ok());
        r.top_k = 51;
        assert!(r.validate().is_err());
        r.top_k = 10;
        r.min_score = 1.5;
        assert!(r.validate().is_err());
        assert!(KnowledgeSearch::new(" ").validate().is_err());
        assert!(KnowledgeSearch::new("x".repeat(2001)).validate().is_err());
        assert!(SearchMode::parse("semantic").is_err());
    }
}
