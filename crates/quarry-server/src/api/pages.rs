//! Wiki pages over REST (issue 68), the wiki tools' verbs under a knowledge base:
//! `GET /api/v1/knowledge-bases/{id}/pages` (the index, paged by slug),
//! `GET|PUT /api/v1/knowledge-bases/{id}/pages/{slug}` (read; create or write the next
//! version), `GET /api/v1/knowledge-bases/{id}/pages/{slug}/history` (its versions, newest
//! first) and `GET /api/v1/knowledge-bases/{id}/lint`. Arguments are read as the tools read
//! them (`service/wiki_tools.rs`); every rule lives in the engine.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use quarry_engine::{MAX_INDEX_LIMIT, WikiIndexRequest};
use serde::Deserialize;
use serde_json::json;

use crate::auth::Caller;
use crate::http::{ApiError, Body, Params, ok, run_blocking};
use crate::service::tool_args::Args;
use crate::service::wiki_tools::page_write;
use crate::state::AppState;

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/knowledge-bases/{id}/pages", get(index))
        .route(
            "/api/v1/knowledge-bases/{id}/pages/{slug}",
            get(read).put(write),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/pages/{slug}/history",
            get(history),
        )
        .route("/api/v1/knowledge-bases/{id}/lint", get(lint))
        .route("/api/v1/knowledge-bases/{id}/log", post(log))
        .route("/api/v1/knowledge-bases/{id}/drafts", post(draft))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexQuery {
    #[serde(rename = "type")]
    page_type: Option<String>,
    tag: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

async fn index(
    caller: Caller,
    Path(id): Path<String>,
    Params(q): Params<IndexQuery>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let req = WikiIndexRequest {
        page_type: q.page_type,
        tag: q.tag,
        after: q.after,
        limit: q.limit.unwrap_or(50).min(MAX_INDEX_LIMIT),
    };
    let index = run_blocking(move || engine.wiki_index(&id, &req)).await?;
    Ok(ok(index))
}

async fn read(
    caller: Caller,
    Path((id, slug)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let page = run_blocking(move || engine.read_page(&id, &slug)).await?;
    Ok(ok(page))
}

async fn history(
    caller: Caller,
    Path((id, slug)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let versions = run_blocking(move || engine.page_history(&id, &slug)).await?;
    Ok(ok(json!({"versions": versions})))
}

async fn write(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((id, slug)): Path<(String, String)>,
    Body(body): Body<serde_json::Map<String, serde_json::Value>>,
) -> Result<Response, ApiError> {
    if body.contains_key("slug") {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the page's slug is the path's last segment: leave `slug` out of the body",
        ));
    }
    let write = page_write(&caller, Some(slug), &Args(&body), "rest")
        .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, m))?;
    let created = write.base_version.is_none();
    let engine = caller.engine.clone();
    let page = run_blocking(move || engine.write_page(&id, write)).await?;
    st.wake_workers();
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, ok(page)).into_response())
}

async fn lint(caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let findings = run_blocking(move || engine.lint_wiki(&id)).await?;
    Ok(ok(json!({"findings": findings})))
}

/// `POST …/log` `{"entry": "…"}`: one line appended to the wiki's log page.
async fn log(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    Body(body): Body<serde_json::Map<String, serde_json::Value>>,
) -> Result<Response, ApiError> {
    let entry = Args(&body)
        .required_string("entry")
        .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, m.to_string()))?;
    let provenance = crate::service::entries::provenance(&caller, "rest");
    let engine = caller.engine.clone();
    let page = run_blocking(move || engine.append_log(&id, &entry, &provenance)).await?;
    st.wake_workers();
    Ok(ok(page))
}

/// `POST …/drafts` `{"documents": [knowledge_id, …], "type": "summary"}`: a `draft` page per
/// document, written by the configured chat model under `write_page`'s rules
/// (`quarry_chat::drafts`); each document's outcome, drafted or refused with why.
async fn draft(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    Body(req): Body<quarry_chat::drafts::DraftRequest>,
) -> Result<Response, ApiError> {
    let service = st.chat().clone();
    let provider = service.provider().map_err(ApiError::from)?;
    let provenance = crate::service::entries::provenance(&caller, "rest drafts");
    let cancel = st.shutdown_token().child_token();
    let drafts = quarry_chat::drafts::draft_pages(
        provider,
        caller.engine.clone(),
        id,
        req,
        provenance,
        &cancel,
    )
    .await
    .map_err(ApiError::from)?;
    st.wake_workers();
    Ok(ok(json!({ "drafts": drafts })))
}
