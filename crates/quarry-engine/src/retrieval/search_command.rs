//! A search as the command line asks it (`quarry search`, `vsearch`, `query`), as data: the
//! CLI runs it here when it opened the index itself, or hands it to a running server of the
//! same data directory, whose models are already loaded, and prints the answer the same way
//! either way.

use quarry_core::{Result, SearchHit};
use serde::{Deserialize, Serialize};

use crate::retrieval::hybrid::{QueryOptions, SubQuery};
use crate::retrieval::search::{SNIPPET_CHARS, SearchRequest, VSEARCH_MIN_SCORE};
use crate::{Engine, Filter};

/// Which command a [`SearchCommand`] is, and so which retriever runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchVerb {
    /// Keywords (BM25).
    Search,
    /// The embedding model.
    Vsearch,
    /// Hybrid: keywords, vectors, expansion and reranking where configured.
    Query,
}

impl SearchVerb {
    /// The command's name (`search`, `vsearch`, `query`).
    pub fn name(self) -> &'static str {
        match self {
            SearchVerb::Search => "search",
            SearchVerb::Vsearch => "vsearch",
            SearchVerb::Query => "query",
        }
    }
}

/// One search with everything the command line may add to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchCommand {
    /// Which retriever runs.
    pub verb: SearchVerb,
    /// The query text (a `query` with typed sub-queries may leave it empty).
    pub query: String,
    /// Results returned, at most.
    pub limit: usize,
    /// Results scoring below this are dropped (default 0, `vsearch` 0.3).
    pub min_score: Option<f64>,
    /// Only this collection.
    pub collection: Option<String>,
    /// A metadata filter, as JSON text.
    pub filter: Option<String>,
    /// Knowledge entries as they were valid at this moment (as `--as-of` takes it).
    pub as_of: Option<String>,
    /// `query`: typed sub-queries, `TYPE:TEXT`.
    #[serde(default)]
    pub searches: Vec<String>,
    /// `query`: what the searcher wants, for the reranker.
    pub intent: Option<String>,
    /// `query`: results from any of these collections.
    #[serde(default)]
    pub collections: Vec<String>,
    /// `query`: fused candidates the reranker scores.
    pub candidate_limit: Option<usize>,
}

/// What a [`SearchCommand`] found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchAnswer {
    /// The documents, best first.
    pub results: Vec<SearchHit>,
    /// `query` only: the stages that ran, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<String>>,
    /// `query` only: why a configured stage did not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Engine {
    /// Runs `cmd` as `quarry search|vsearch|query` would.
    pub fn run_search_command(&self, cmd: &SearchCommand) -> Result<SearchAnswer> {
        let filter = match cmd.filter.as_deref().map(str::trim) {
            Some(text) if !text.is_empty() => Some(Filter::parse_str(text)?),
            _ => None,
        };
        let as_of = cmd
            .as_of
            .as_deref()
            .map(|w| crate::parse_instant("--as-of", &serde_json::json!(w)))
            .transpose()?;
        let engine = self.filtered(filter).at(as_of);
        let default_min = match cmd.verb {
            SearchVerb::Vsearch => VSEARCH_MIN_SCORE,
            SearchVerb::Search | SearchVerb::Query => 0.0,
        };
        let req = SearchRequest {
            query: cmd.query.clone(),
            limit: cmd.limit,
            min_score: cmd.min_score.unwrap_or(default_min),
            collection: cmd.collection.clone(),
            rerank: true,
            excerpt_chars: SNIPPET_CHARS,
        };
        let hits = |results| SearchAnswer {
            results,
            stages: None,
            warnings: Vec::new(),
        };
        match cmd.verb {
            SearchVerb::Search => Ok(hits(engine.search(&req)?)),
            SearchVerb::Vsearch => Ok(hits(engine.vsearch(&req)?)),
            SearchVerb::Query => {
                let opts = QueryOptions {
                    searches: cmd
                        .searches
                        .iter()
                        .enumerate()
                        .map(|(i, spec)| SubQuery::parse_spec(i, spec))
                        .collect::<Result<_>>()?,
                    intent: cmd.intent.clone(),
                    collections: cmd.collections.clone(),
                    candidate_limit: cmd.candidate_limit,
                };
                let res = engine.query_with(&req, &opts)?;
                Ok(SearchAnswer {
                    results: res.results,
                    stages: Some(res.stages.iter().map(|s| (*s).to_owned()).collect()),
                    warnings: res.warnings,
                })
            }
        }
    }
}
