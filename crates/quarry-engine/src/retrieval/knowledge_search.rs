//! `knowledge_search` (seed 000; WeKnora's `/api/v1/knowledge-search`, Dify's retrieval):
//! one request shape over the three search modes, with per-hit provenance — the knowledge
//! base, file, page and whether keyword or vector retrieval found it. Results are passages
//! (`passages.rs`): `id` names a chunk, `total_count` counts passages.

use quarry_core::{Error, PageMark, Result};
use serde::Serialize;

use crate::engine::Engine;
use crate::retrieval::calibration::{KeywordEvidence, VectorEvidence};

/// Longest query (seed 000).
pub const MAX_QUERY_CHARS: usize = 2000;
/// Largest `top_k` (seed 000).
pub const MAX_TOP_K: usize = 50;
/// Characters of text per result (seed 000 shows up to 500 around the match).
const CONTENT_CHARS: usize = 500;
/// Characters of a passage handed to a model (chat sources, `query_knowledge`): the whole
/// chunk at the default chunk size and beyond.
const PASSAGE_CHARS: usize = 3000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
/// Which retrievers a knowledge search runs.
pub enum SearchMode {
    /// Keyword and vector, fused (keyword alone until embedding ran).
    Hybrid,
    /// Vector only.
    Vector,
    /// Keyword only.
    Keyword,
}

impl SearchMode {
    /// The mode named `s` (`hybrid`, `vector`, `keyword`).
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

    /// The mode's name.
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
    /// The question.
    pub query: String,
    /// Which retrievers run.
    pub mode: SearchMode,
    /// Passages returned, at most.
    pub top_k: usize,
    /// Passages scoring below this (0–1) are dropped.
    pub min_score: f64,
    /// Rerank the candidates when a reranker is configured.
    pub rerank: bool,
    /// Knowledge bases (names or ids) to search, within what the caller may read; `None`:
    /// all of them.
    pub knowledge_bases: Option<Vec<String>>,
    /// How many candidates the reranker scores (seed 003's `RAG_ANN_TOP_K`); `None`: 20.
    pub depth: Option<usize>,
    /// Adds each result's retrieval evidence (diagnostics, calibration fitting).
    pub explain: bool,
}

impl KnowledgeSearch {
    /// A search for `query` with the seed's defaults (hybrid, 10 results, `min_score` 0.5, rerank).
    pub fn new(query: impl Into<String>) -> KnowledgeSearch {
        KnowledgeSearch {
            query: query.into(),
            mode: SearchMode::Hybrid,
            top_k: 10,
            min_score: 0.5,
            rerank: true,
            knowledge_bases: None,
            depth: None,
            explain: false,
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

/// What each retriever said about one passage; `embedded` is whether it has a vector.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PassageEvidence {
    #[serde(skip_serializing_if = "Option::is_none")]
    /// What the keyword retriever said, if it found the passage.
    pub keyword: Option<KeywordEvidence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// What the vector retriever said, if it found the passage.
    pub vector: Option<VectorEvidence>,
    /// Whether the passage has a vector.
    pub embedded: bool,
    /// The retrieval score: both retrievers' evidence calibrated into one probability,
    /// before any reranking. The same in every mode that lists the passage; the result's
    /// `score`, when it was not reranked, is this capped by the scores above it (scores never
    /// rise down a list).
    pub retrieval: f64,
    /// The reranker's own score for the passage (0–1), when it was reranked; the result's
    /// `score` is then `0.4 × retrieval + 0.6 × rerank`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<f64>,
}

/// What limited a search besides the query (only when the request asked to `explain`): the
/// metadata filter as understood, how many readable documents it lets through, and the
/// moment knowledge entries were read at.
#[derive(Debug, Clone, Serialize)]
pub struct SearchExplanation {
    /// The filter in Quarry's canonical form (qmd's and Dify's shapes translated), or null.
    pub filter: Option<serde_json::Value>,
    /// Documents the caller may read that the filter lets through (null without a filter).
    pub documents_matching_filter: Option<usize>,
    /// The moment entries were read at (Unix milliseconds; null: now).
    pub as_of: Option<i64>,
}

/// One result, in the seed's shape plus page, docid and knowledge base.
#[derive(Debug, Clone, Serialize)]
pub struct KnowledgeHit {
    /// The passage: `<docid>:<first line>`.
    pub id: String,
    /// The passage's text.
    pub content: String,
    /// The heading path the passage sits under (`3 The Root Filesystem › 3.15 /tmp`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub heading: String,
    /// Relevance, a calibrated probability (or the rerank blend).
    pub score: f64,
    /// The document: a knowledge-base document's id, else its docid.
    pub knowledge_id: String,
    /// The document's title.
    pub knowledge_title: String,
    /// The document's file name.
    pub knowledge_filename: String,
    /// `keyword`, `vector` or `hybrid` (found by both).
    pub match_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The page or slide the passage is on (paged sources).
    pub page: Option<u32>,
    /// The document's short id.
    pub docid: String,
    /// The knowledge base's name.
    pub knowledge_base: String,
    /// Display path `collection/relative/path`.
    pub file: String,
    /// What each retriever said (only when the request asked to `explain`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<PassageEvidence>,
    /// The document's metadata fields (absent when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// For a wiki page's passage: its slug and whether a passage it cites changed or went
    /// (`read_page` has the sources).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wiki_page: Option<PageMark>,
}

/// Whether the results were reranked, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RerankOutcome {
    /// The reranker ordered the results.
    Applied,
    /// The request did not ask for reranking.
    NotRequested,
    /// `rerank` was asked for and no reranker is configured: retrieval order stands.
    NotConfigured,
    /// The reranker failed (see `warnings`): retrieval order stands.
    Failed,
}

#[derive(Debug, Clone, Serialize)]
/// The answer of a knowledge search.
pub struct KnowledgeSearchResult {
    /// The passages, best first.
    pub results: Vec<KnowledgeHit>,
    /// Passages at or above `min_score` (counted up to 100).
    pub total_count: usize,
    /// The mode that ran (`hybrid` degrades to `keyword` without vectors).
    pub search_mode: SearchMode,
    /// Whether the results were reranked.
    pub rerank: RerankOutcome,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    /// Why a stage did not run as asked.
    pub warnings: Vec<String>,
    /// What limited the search (only when the request asked to `explain`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<SearchExplanation>,
}

/// A snippet's text without its `N: ` line numbers; the first line number.
pub(crate) fn plain_text(snippet: &str) -> (String, Option<usize>) {
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
    /// given; one the caller cannot see is "not found", like a missing one): the best
    /// passages, each with up to 500 characters around its match.
    pub fn knowledge_search(&self, req: &KnowledgeSearch) -> Result<KnowledgeSearchResult> {
        self.knowledge_passages_with(req, CONTENT_CHARS)
    }

    /// [`Engine::knowledge_search`] with each passage's whole text, for a model to answer
    /// from (chat sources, `query_knowledge`).
    pub fn knowledge_passages(&self, req: &KnowledgeSearch) -> Result<KnowledgeSearchResult> {
        self.knowledge_passages_with(req, PASSAGE_CHARS)
    }

    fn knowledge_passages_with(
        &self,
        req: &KnowledgeSearch,
        content_chars: usize,
    ) -> Result<KnowledgeSearchResult> {
        req.validate()?;
        let mut found = match &req.knowledge_bases {
            None => self.rank_passages(req, content_chars),
            Some(keys) => self
                .narrowed_for_search(&self.knowledge_base_ids(keys)?)
                .rank_passages(req, content_chars),
        }?;
        let hidden = self.mark_page_hits(&mut found.results)?;
        found.total_count = found.total_count.saturating_sub(hidden);
        Ok(found)
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
