//! The team surface over REST: the caller's access tokens (`/api/v1/tokens`, seed 004's
//! `POST /api/v1/user/access-token`), its spaces (`GET /api/v1/user/spaces`), knowledge
//! search in WeKnora's shape (`POST /api/v1/knowledge-search`, seed 000) and Dify's External
//! Knowledge API (`POST /retrieval`). Handlers translate; scope checks live in the engine
//! and in `quarry-access`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use quarry_access::TokenRequest;
use quarry_core::{Access, Error};
use quarry_engine::{KnowledgeSearch, SearchMode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::knowledge_api::ok;
use crate::rest::{Body, blocking, count};
use crate::{ApiError, AppState};

/// Routes about the caller's own account (no space needs naming to list them).
pub fn account_router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/tokens", get(list_tokens))
        .route("/api/v1/tokens/{id}", delete(revoke_token))
        .route("/api/v1/user/spaces", get(user_spaces))
}

/// Routes that answer in the REST error shape and act in one space (a new token is made
/// for the space of the request).
pub fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/tokens", post(create_token))
        .route("/api/v1/user/access-token", post(create_access_token))
        .route("/api/v1/knowledge-search", post(knowledge_search))
}

/// Dify's External Knowledge API (its own error shape).
pub fn dify_router() -> Router<Arc<AppState>> {
    Router::new().route("/retrieval", post(retrieval))
}

/// New tokens: at most what the caller has (its space, its knowledge bases, read-only when
/// it is), for its own user. The machine's owner names the user.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NewTokenBody {
    #[serde(default, alias = "desc", alias = "info")]
    label: Option<String>,
    /// Only for the machine's owner (open local mode): whose token it is.
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    knowledge_bases: Option<Vec<String>>,
    #[serde(default)]
    read_only: bool,
    /// Milliseconds since the epoch, or seconds (QukaAI) when below 10^11.
    #[serde(default)]
    expires_at: Option<i64>,
    #[serde(default)]
    expires_in_days: Option<i64>,
}

fn expiry(b: &NewTokenBody) -> Result<Option<i64>, ApiError> {
    match (b.expires_at, b.expires_in_days) {
        (Some(_), Some(_)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "give expires_at or expires_in_days, not both",
        )),
        (Some(at), None) if at < 100_000_000_000 => Ok(Some(at.saturating_mul(1000))),
        (Some(at), None) => Ok(Some(at)),
        (None, Some(d)) if !(1..=quarry_access::MAX_TOKEN_DAYS).contains(&d) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "expires_in_days must be between 1 and {}",
                quarry_access::MAX_TOKEN_DAYS
            ),
        )),
        (None, Some(d)) => Ok(Some(quarry_core::now_millis() + d * 86_400_000)),
        (None, None) => Ok(None),
    }
}

async fn issue(st: Arc<AppState>, caller: Caller, b: NewTokenBody) -> Result<Response, ApiError> {
    let expires_at = expiry(&b)?;
    let scope = caller.engine.scope().clone();
    let user = match (&caller.principal.caller, &b.user) {
        (Some(c), None) => c.user.clone(),
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "a token creates tokens for its own user only; leave out 'user'",
            ));
        }
        (None, Some(u)) => u.clone(),
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "name the token's 'user' (this server runs without --auth, so the caller is the machine's owner, not a user)",
            ));
        }
    };
    // Narrower, never wider: the caller's knowledge bases (names or ids it can see).
    let engine = caller.engine.clone();
    let wanted = b.knowledge_bases.clone();
    let collections = blocking(move || -> Result<Option<Vec<String>>, Error> {
        match wanted {
            Some(keys) => keys
                .iter()
                .map(|key| engine.knowledge_base(key).map(|kb| kb.id))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            // An allow-listed caller's knowledge bases are exactly the ones it can see.
            None if engine.scope().collections.is_some() => Ok(Some(
                engine
                    .knowledge_bases()?
                    .into_iter()
                    .map(|kb| kb.id)
                    .collect(),
            )),
            None => Ok(None),
        }
    })
    .await?;
    let directory = st.directory().clone();
    let req = TokenRequest {
        user,
        label: b.label.unwrap_or_default(),
        spaces: vec![caller.principal.space_id.clone()],
        collections,
        read_only: b.read_only || !scope.can(Access::Write),
        expires_at,
        // A token's tokens live and reach no further than it (checked in quarry-access).
        parent: caller.principal.caller.as_ref().map(|c| c.token_id.clone()),
    };
    let issued = blocking(move || directory.create_token(&req)).await?;
    Ok((StatusCode::CREATED, ok(issued)).into_response())
}

async fn create_token(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<NewTokenBody>,
) -> Result<Response, ApiError> {
    issue(st, caller, b).await
}

/// Seed 004 §13.2: the same, under QukaAI's path; the body may be empty.
async fn create_access_token(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b = if body.iter().all(u8::is_ascii_whitespace) {
        NewTokenBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}"))
        })?
    };
    issue(st, caller, b).await
}

/// The caller's own tokens (every token for the machine's owner); never the secrets.
async fn list_tokens(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let user = caller.principal.caller.map(|c| c.user);
    let tokens = blocking(move || directory.tokens(user.as_deref())).await?;
    Ok(ok(tokens))
}

async fn revoke_token(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let user = caller.principal.caller.map(|c| c.user);
    blocking(move || directory.revoke_token(&id, user.as_deref())).await?;
    Ok(ok(json!({"revoked": true})))
}

/// Seed 004 §6.2: the spaces this caller may use, with its role in each.
async fn user_spaces(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let principal = caller.principal.clone();
    let spaces = blocking(move || visible_spaces(&directory, &principal)).await?;
    Ok(ok(json!({ "list": spaces, "total": spaces.len() })))
}

/// The spaces `principal` may use, with its role in each (seed 004's fields): a token's
/// spaces where its user is (still) a member; every space for the machine's owner.
pub(crate) fn visible_spaces(
    directory: &quarry_access::Directory,
    principal: &quarry_access::Principal,
) -> Result<Vec<Value>, Error> {
    Ok(directory
        .visible_spaces(&quarry_access::Actor::of(principal))?
        .into_iter()
        .map(|s| json!({"space_id": s.id, "id": s.id, "name": s.name, "description": s.description, "role": s.role}))
        .collect())
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
}

async fn knowledge_search(caller: Caller, Body(b): Body<SearchBody>) -> Result<Response, ApiError> {
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
    let engine = caller.engine.clone();
    let found = blocking(move || engine.knowledge_search(&req)).await?;
    Ok(axum::Json(json!({
        "success": true,
        "results": found.results,
        "total_count": found.total_count,
        "search_mode": found.search_mode,
        "rerank": found.rerank,
        "warnings": found.warnings,
    }))
    .into_response())
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
}

#[derive(Deserialize)]
struct RetrievalBody {
    knowledge_id: String,
    query: String,
    #[serde(default)]
    retrieval_setting: Option<RetrievalSetting>,
    /// Dify's metadata filter; accepted, not applied (Quarry has no per-document metadata
    /// filters yet).
    #[serde(default)]
    #[allow(dead_code)]
    metadata_condition: Option<Value>,
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
    });
    let mut req = KnowledgeSearch::new(b.query);
    req.top_k = setting.top_k.unwrap_or(5);
    req.min_score = setting.score_threshold.unwrap_or(0.0);
    req.knowledge_bases = Some(vec![b.knowledge_id.clone()]);
    let engine = caller.engine.clone();
    match blocking(move || engine.knowledge_search(&req)).await {
        Ok(found) => {
            let records: Vec<Value> = found
                .results
                .iter()
                .map(|r| {
                    json!({
                        "content": r.content,
                        "score": r.score,
                        "title": r.knowledge_title,
                        "metadata": {
                            "path": r.file,
                            "description": r.knowledge_filename,
                            "docid": r.docid,
                            "page": r.page,
                            "knowledge_id": r.knowledge_id,
                        }
                    })
                })
                .collect();
            axum::Json(json!({ "records": records })).into_response()
        }
        Err(e) if e.status == StatusCode::NOT_FOUND => dify_error(
            StatusCode::NOT_FOUND,
            2001,
            format!("the knowledge '{}' does not exist", b.knowledge_id),
        ),
        Err(e) => dify_error(e.status, e.status.as_u16().into(), e.detail),
    }
}
