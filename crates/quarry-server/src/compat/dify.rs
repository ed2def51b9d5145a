//! Dify's External Knowledge API (`POST /retrieval`) in its own error shape
//! (`{"error_code", "error_msg"}`).

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use quarry_engine::{Filter, KnowledgeSearch};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{consistency, count, run_blocking};
use crate::state::AppState;

/// Dify's External Knowledge API (its own error shape).
pub(crate) fn router() -> Router<Arc<AppState>> {
    consistency::reads(Router::new().route("/retrieval", post(retrieval)))
}

/// Dify's error: `{"error_code", "error_msg"}`.
fn dify_error(status: StatusCode, code: u32, msg: impl Into<String>) -> Response {
    (
        status,
        axum::Json(json!({"error_code": code, "error_msg": msg.into()})),
    )
        .into_response()
}

#[derive(Deserialize)]
struct RetrievalSetting {
    #[serde(default, deserialize_with = "count")]
    top_k: Option<usize>,
    #[serde(default)]
    score_threshold: Option<f64>,
    /// Dify's metadata filter, where a client puts it inside the setting.
    #[serde(default)]
    metadata_condition: Option<Value>,
}

#[derive(Deserialize)]
struct RetrievalBody {
    knowledge_id: String,
    query: String,
    #[serde(default)]
    retrieval_setting: Option<RetrievalSetting>,
    /// Dify's metadata filter (`logical_operator`, `conditions`), applied to the documents'
    /// metadata fields (issue 44).
    #[serde(default)]
    metadata_condition: Option<Value>,
    /// Quarry's: the moment knowledge entries are read at (issue 44).
    #[serde(default)]
    as_of: Option<Value>,
}

/// `POST /retrieval` (Dify External Knowledge API): `knowledge_id` names a knowledge base
/// the token may read.
async fn retrieval(caller: Caller, body: axum::body::Bytes) -> Response {
    let b: RetrievalBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return dify_error(
                StatusCode::BAD_REQUEST,
                400,
                format!("invalid request body: {e}"),
            );
        }
    };
    let setting = b.retrieval_setting.unwrap_or(RetrievalSetting {
        top_k: None,
        score_threshold: None,
        metadata_condition: None,
    });
    // The top-level condition (Dify's shape), else one inside the setting.
    let condition = b
        .metadata_condition
        .as_ref()
        .or(setting.metadata_condition.as_ref())
        .filter(|c| !c.is_null());
    let filter = match condition.map(Filter::from_dify).transpose() {
        Ok(f) => f.flatten(),
        Err(e) => {
            return dify_error(StatusCode::BAD_REQUEST, 400, crate::http::public_detail(&e));
        }
    };
    let as_of = match crate::service::entries::parse_as_of(b.as_of.as_ref()) {
        Ok(at) => at,
        Err(e) => {
            return dify_error(StatusCode::BAD_REQUEST, 400, crate::http::public_detail(&e));
        }
    };
    let mut req = KnowledgeSearch::new(b.query);
    req.top_k = setting.top_k.unwrap_or(5);
    req.min_score = setting.score_threshold.unwrap_or(0.0);
    req.knowledge_bases = Some(vec![b.knowledge_id.clone()]);
    let engine = caller.engine.filtered(filter).at(as_of);
    let query = req.query.clone();
    match run_blocking(move || engine.knowledge_search(&req)).await {
        Ok(found) => {
            let records: Vec<Value> = found
                .results
                .iter()
                .map(|r| {
                    let mut metadata = json!({
                        "path": r.file,
                        "description": r.knowledge_filename,
                        "docid": r.docid,
                        "page": r.page,
                        "knowledge_id": r.knowledge_id,
                    });
                    // A wiki page's slug and staleness, as knowledge_search gives them.
                    if let Some(mark) = &r.wiki_page {
                        metadata["wiki_page"] = json!(mark);
                    }
                    json!({
                        "content": r.content,
                        "score": r.score,
                        "title": r.knowledge_title,
                        "metadata": metadata,
                    })
                })
                .collect();
            let note = crate::audit::AuditNote::Search {
                surface: "/retrieval",
                knowledge_bases: Some(vec![b.knowledge_id.clone()]),
                results: records.len(),
                top_score: found.results.iter().map(|r| r.score).reduce(f64::max),
                insight: true,
                query,
            };
            (
                axum::Extension(note),
                axum::Json(json!({ "records": records })),
            )
                .into_response()
        }
        Err(e) if e.status == StatusCode::NOT_FOUND => dify_error(
            StatusCode::NOT_FOUND,
            2001,
            format!("the knowledge '{}' does not exist", b.knowledge_id),
        ),
        Err(e) => dify_error(e.status, e.status.as_u16().into(), e.detail),
    }
}
