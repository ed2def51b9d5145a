//! WeKnora's knowledge search (`POST /api/v1/knowledge-search`, seed 000's body and
//! WeKnora's), over the engine's knowledge search.

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use quarry_engine::{KnowledgeSearch, SearchMode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{ApiError, Body, consistency, count, run_blocking};
use crate::state::AppState;

/// `POST /api/v1/knowledge-search` (REST error shape, one space).
pub(crate) fn router() -> Router<Arc<AppState>> {
    consistency::reads(Router::new().route("/api/v1/knowledge-search", post(knowledge_search)))
}

/// Seed 000's body (`question`, `knowledge_base_ids`) and WeKnora's (`query`,
/// `knowledge_base_id`, `knowledge_base_ids`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchBody {
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    knowledge_base_id: Option<String>,
    #[serde(default)]
    knowledge_base_ids: Option<Vec<String>>,
    #[serde(default)]
    search_mode: Option<String>,
    #[serde(default, deserialize_with = "count")]
    top_k: Option<usize>,
    #[serde(default)]
    min_score: Option<f64>,
    #[serde(default)]
    rerank: Option<bool>,
    /// Quarry's diagnostic: each result's retrieval evidence.
    #[serde(default)]
    explain: bool,
    /// A metadata filter (issue 44): a JSON filter node, or a JSON string holding one.
    #[serde(default)]
    filter: Option<Value>,
    /// The moment knowledge entries are read at (issue 44).
    #[serde(default)]
    as_of: Option<Value>,
}

/// A request with this header set to `off` is not counted in the insight log (the audit log
/// still records it): the insight page's own "closest passage" searches, so checking a
/// question does not make it look asked more often.
const INSIGHT_HEADER: &str = "x-quarry-insight";

async fn knowledge_search(
    caller: Caller,
    headers: axum::http::HeaderMap,
    Body(b): Body<SearchBody>,
) -> Result<Response, ApiError> {
    let counted = headers
        .get(INSIGHT_HEADER)
        .is_none_or(|v| !v.as_bytes().eq_ignore_ascii_case(b"off"));
    let query = match (b.question, b.query) {
        (Some(q), None) | (None, Some(q)) => q,
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "give 'question' or 'query', not both",
            ));
        }
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "missing 'question' (or WeKnora's 'query')",
            ));
        }
    };
    let mut req = KnowledgeSearch::new(query);
    if let Some(m) = &b.search_mode {
        req.mode = SearchMode::parse(m)?;
    }
    req.top_k = b.top_k.unwrap_or(req.top_k);
    req.min_score = b.min_score.unwrap_or(req.min_score);
    req.rerank = b.rerank.unwrap_or(req.rerank);
    req.explain = b.explain;
    let mut kbs: Vec<String> = b.knowledge_base_ids.unwrap_or_default();
    kbs.extend(b.knowledge_base_id);
    if !kbs.is_empty() {
        req.knowledge_bases = Some(kbs);
    }
    let engine = caller
        .engine
        .filtered(crate::service::filter::parse_filter(b.filter.as_ref())?)
        .at(crate::service::entries::parse_as_of(b.as_of.as_ref())?);
    let (query, named) = (req.query.clone(), req.knowledge_bases.clone());
    let found = run_blocking(move || engine.knowledge_search(&req)).await?;
    let note = crate::audit::AuditNote::Search {
        surface: "/api/v1/knowledge-search",
        knowledge_bases: named,
        results: found.results.len(),
        top_score: found.results.iter().map(|r| r.score).reduce(f64::max),
        insight: counted,
        query,
    };
    let mut body = json!({
        "success": true,
        "results": found.results,
        "total_count": found.total_count,
        "search_mode": found.search_mode,
        "rerank": found.rerank,
        "warnings": found.warnings,
    });
    if let Some(explain) = found.explain {
        body["explain"] = json!(explain);
    }
    Ok((axum::Extension(note), axum::Json(body)).into_response())
}
