//! The QMD REST API (seed 001, endpoints 1–19): snake_case bodies, `{"detail",
//! "status_code", "error_code"}` errors. Reads run concurrently through the blocking runner;
//! writes go through one queue ([`AppState::write`]) so concurrent requests never interleave
//! index changes.
//!
//! Bodies are strict about keys (an unknown key is a 400 naming it) but lenient about
//! spelling and number form: every multi-word field also answers to its camelCase (MCP)
//! spelling (`minScore`, `maxLines`, …; both spellings at once is a 400), and counts accept
//! a whole-valued float (`5.0`) but not `5.5` or a negative number.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Router};
use quarry_core::{Error, format_search_summary};
use quarry_engine::{
    GetRequest, MultiGetItem, MultiGetRequest, QueryOptions, SearchRequest, SubQuery, UpdateOptions,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::audit::AuditNote;
use crate::auth::Caller;
use crate::http::{ApiError, Body, consistency, count, run_blocking};
use crate::service::entries::parse_as_of;
use crate::service::filter::parse_filter;
use crate::state::AppState;

type ApiResult = Result<axum::Json<Value>, ApiError>;

pub(crate) fn router() -> Router<Arc<AppState>> {
    let reads = Router::new()
        .route("/search", post(search))
        .route("/vsearch", post(vsearch))
        .route("/query", post(query))
        .route("/get", post(get_document))
        .route("/multi_get", post(multi_get));
    consistency::reads(reads)
        .route("/status", get(status))
        .route("/embed", post(embed))
        .route("/collections", get(list_collections))
        // `add` is a reserved collection name (the engine refuses it for new collections);
        // one created before that rule is still reachable here by its name.
        .route(
            "/collections/add",
            post(add_collection)
                .get(|c: Caller| get_collection(c, Path("add".to_owned())))
                .delete(|st: State<Arc<AppState>>, c: Caller| {
                    remove_collection(st, c, Path("add".to_owned()))
                })
                .put(|st: State<Arc<AppState>>, c: Caller, b: Body<RenameBody>| {
                    rename_collection(st, c, Path("add".to_owned()), b)
                }),
        )
        .route(
            "/collections/{name}",
            get(get_collection)
                .delete(remove_collection)
                .put(rename_collection),
        )
        .route("/index", post(index))
        .route("/update", post(update))
        .route("/contexts", get(list_contexts))
        .route("/contexts/add", post(add_context))
        .route("/contexts/{*path}", delete(remove_context))
}

/// Routes that need no credentials.
pub(crate) fn public_router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/health", get(health))
        .route("/health/ready", get(ready))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchBody {
    query: String,
    #[serde(default, deserialize_with = "count")]
    limit: Option<usize>,
    #[serde(alias = "minScore")]
    min_score: Option<f64>,
    collection: Option<String>,
    /// A metadata filter (issue 44): a JSON filter node, or a JSON string holding one.
    #[serde(default)]
    filter: Option<Value>,
    /// The moment knowledge entries are read at (issue 44).
    #[serde(default)]
    as_of: Option<Value>,
}

impl SearchBody {
    fn into_request(self, default_min: f64) -> SearchRequest {
        SearchRequest {
            query: self.query,
            limit: self.limit.unwrap_or(10),
            min_score: self.min_score.unwrap_or(default_min),
            collection: self.collection,
            rerank: true,
            excerpt_chars: quarry_engine::SNIPPET_CHARS,
        }
    }
}

/// `POST /query`'s body: the search body plus qmd 2.8's `searches`, `intent`,
/// `collections`, `candidateLimit` and `rerank`. Either `query` or `searches` is needed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryBody {
    #[serde(default)]
    query: String,
    #[serde(default, deserialize_with = "count")]
    limit: Option<usize>,
    #[serde(alias = "minScore")]
    min_score: Option<f64>,
    collection: Option<String>,
    #[serde(default)]
    filter: Option<Value>,
    #[serde(default)]
    as_of: Option<Value>,
    /// Typed sub-queries `[{"type": "lex"|"vec"|"hyde", "query": "..."}]`, checked by the
    /// engine's parser so every surface words its errors alike.
    #[serde(default)]
    searches: Option<Value>,
    intent: Option<String>,
    #[serde(default)]
    collections: Option<Vec<String>>,
    #[serde(default, alias = "candidateLimit", deserialize_with = "count")]
    candidate_limit: Option<usize>,
    rerank: Option<bool>,
}

fn hits_body(hits: &[quarry_core::SearchHit], query: &str) -> Value {
    json!({ "results": hits, "content": format_search_summary(hits, query) })
}

/// Which of the three search endpoints runs.
#[derive(Clone, Copy)]
enum SearchKind {
    Keyword,
    Vector,
    Hybrid,
}

async fn run_search(
    caller: Caller,
    mut b: SearchBody,
    kind: SearchKind,
) -> Result<Response, ApiError> {
    let filter = parse_filter(b.filter.take().as_ref())?;
    let as_of = parse_as_of(b.as_of.take().as_ref())?;
    let req = b.into_request(if matches!(kind, SearchKind::Vector) {
        quarry_engine::VSEARCH_MIN_SCORE
    } else {
        0.0
    });
    run_request(caller, (filter, as_of), req, kind, QueryOptions::default()).await
}

async fn run_request(
    caller: Caller,
    (filter, as_of): (Option<quarry_engine::Filter>, Option<i64>),
    req: SearchRequest,
    kind: SearchKind,
    opts: QueryOptions,
) -> Result<Response, ApiError> {
    let engine = caller.engine.filtered(filter).at(as_of);
    // What the summary and the audit name: the query, else the first sub-query.
    let q = if req.query.trim().is_empty() {
        opts.searches
            .first()
            .map_or_else(String::new, |s| s.query.clone())
    } else {
        req.query.clone()
    };
    let (hits, stages) = run_blocking(move || match kind {
        SearchKind::Keyword => engine.search(&req).map(|h| (h, None)),
        SearchKind::Vector => engine.vsearch(&req).map(|h| (h, None)),
        SearchKind::Hybrid => engine
            .query_with(&req, &opts)
            .map(|r| (r.results, Some((r.stages, r.warnings)))),
    })
    .await?;
    let mut body = hits_body(&hits, &q);
    if let Some((stages, warnings)) = stages {
        body["stages"] = json!(stages);
        if !warnings.is_empty() {
            body["warnings"] = json!(warnings);
        }
    }
    let note = AuditNote::Search {
        surface: match kind {
            SearchKind::Keyword => "/search",
            SearchKind::Vector => "/vsearch",
            SearchKind::Hybrid => "/query",
        },
        knowledge_bases: None,
        results: hits.len(),
        top_score: hits.iter().map(|h| h.score).reduce(f64::max),
        insight: true,
        query: q,
    };
    Ok((Extension(note), axum::Json(body)).into_response())
}

async fn search(caller: Caller, Body(b): Body<SearchBody>) -> Result<Response, ApiError> {
    run_search(caller, b, SearchKind::Keyword).await
}

async fn vsearch(caller: Caller, Body(b): Body<SearchBody>) -> Result<Response, ApiError> {
    run_search(caller, b, SearchKind::Vector).await
}

async fn query(caller: Caller, Body(b): Body<QueryBody>) -> Result<Response, ApiError> {
    let filter = parse_filter(b.filter.as_ref())?;
    let as_of = parse_as_of(b.as_of.as_ref())?;
    let opts = QueryOptions {
        searches: SubQuery::list_from_json(b.searches.as_ref())?,
        intent: b.intent,
        collections: b.collections.unwrap_or_default(),
        candidate_limit: b.candidate_limit,
    };
    let req = SearchRequest {
        query: b.query,
        limit: b.limit.unwrap_or(10),
        min_score: b.min_score.unwrap_or(0.0),
        collection: b.collection,
        rerank: b.rerank.unwrap_or(true),
        excerpt_chars: quarry_engine::SNIPPET_CHARS,
    };
    run_request(caller, (filter, as_of), req, SearchKind::Hybrid, opts).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetBody {
    file: String,
    #[serde(default, alias = "fromLine", deserialize_with = "count")]
    from_line: Option<usize>,
    #[serde(default, alias = "maxLines", deserialize_with = "count")]
    max_lines: Option<usize>,
    #[serde(default, alias = "lineNumbers")]
    line_numbers: bool,
}

fn document_json(v: &quarry_engine::DocumentView) -> Value {
    json!({ "uri": v.uri, "name": v.name, "title": v.title, "mimeType": v.mime_type, "text": v.text })
}

async fn get_document(caller: Caller, Body(b): Body<GetBody>) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let view = run_blocking(move || {
        engine.get(&GetRequest {
            file: b.file,
            from_line: b.from_line,
            max_lines: b.max_lines,
            line_numbers: b.line_numbers,
        })
    })
    .await?;
    let body = json!({ "document": document_json(&view), "content": null });
    Ok((Extension(AuditNote::Read), axum::Json(body)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MultiGetBody {
    pattern: String,
    #[serde(default, alias = "maxLines", deserialize_with = "count")]
    max_lines: Option<usize>,
    #[serde(default, alias = "maxBytes", deserialize_with = "count")]
    max_bytes: Option<u64>,
    #[serde(default, alias = "lineNumbers")]
    line_numbers: bool,
}

async fn multi_get(caller: Caller, Body(b): Body<MultiGetBody>) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let res = run_blocking(move || {
        engine.multi_get(&MultiGetRequest {
            pattern: b.pattern,
            max_lines: b.max_lines,
            max_bytes: b
                .max_bytes
                .unwrap_or(quarry_engine::MultiGetRequest::new("").max_bytes),
            line_numbers: b.line_numbers,
        })
    })
    .await?;
    let results: Vec<Value> = res
        .items
        .iter()
        .map(|item| match item {
            MultiGetItem::Document(v) => document_json(v),
            MultiGetItem::Skipped { text, .. } => json!({ "type": "text", "text": text }),
        })
        .collect();
    let body = json!({ "results": results, "errors": res.errors, "content": null });
    Ok((Extension(AuditNote::Read), axum::Json(body)).into_response())
}

async fn status(caller: Caller) -> ApiResult {
    let engine = caller.engine.clone();
    let (s, semantic) =
        run_blocking(move || Ok::<_, Error>((engine.status()?, engine.semantic_state()?))).await?;
    Ok(axum::Json(json!({
        // Whether this node searches by meaning, and if not why (issue 41 item 18).
        "semantic": semantic,
        "total_documents": s.total_documents,
        "needs_embedding": s.needs_embedding,
        "chunks_needing_embedding": s.chunks_needing_embedding,
        "has_vector_index": s.has_vector_index,
        "collections": s.collections,
        "spaces": s.spaces,
        "content": s.summary(),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmbedBody {
    texts: Vec<String>,
}

/// Most texts `/embed` accepts in one request (seed).
const MAX_EMBED_TEXTS: usize = 1000;

async fn embed(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<EmbedBody>,
) -> Result<Response, ApiError> {
    if b.texts.is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "Empty texts list"));
    }
    if b.texts.len() > MAX_EMBED_TEXTS {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Too many texts ({} > {MAX_EMBED_TEXTS})", b.texts.len()),
        ));
    }
    // One request at a time through the model (seed: serial queue, one model instance).
    let _turn = st.model_queue.lock().await;
    let engine = caller.engine.clone();
    let texts = b.texts;
    let result = run_blocking(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        engine.embed_texts(&refs)
    })
    .await;
    match result {
        // Computes vectors, changes nothing: not a write.
        Ok(embeddings) => Ok((
            Extension(AuditNote::Read),
            axum::Json(json!({ "embeddings": embeddings })),
        )
            .into_response()),
        // A model that could not be loaded gets the seed's exact detail (the reason goes to
        // the log); a loaded model whose backend fails says what failed.
        Err(e)
            if e.status == StatusCode::SERVICE_UNAVAILABLE && !st.root_engine().model_loaded() =>
        {
            tracing::warn!(reason = %e.detail, "/embed: embedding model unavailable");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Model not loaded",
            ))
        }
        Err(e) => Err(e),
    }
}

async fn list_collections(caller: Caller) -> ApiResult {
    let engine = caller.engine.clone();
    let cs = run_blocking(move || engine.collections()).await?;
    let mut content = format!("Collections: {}", cs.len());
    for c in &cs {
        content.push_str(&format!("\n- {} ({} docs)", c.name, c.documents));
    }
    let list: Vec<Value> = cs
        .iter()
        .map(|c| json!({ "name": c.name, "path": c.path, "pattern": c.pattern, "documents": c.documents }))
        .collect();
    Ok(axum::Json(
        json!({ "collections": list, "content": content }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddCollectionBody {
    name: String,
    path: String,
    #[serde(alias = "globPattern")]
    glob_pattern: Option<String>,
    /// Add the collection even when no file matches yet (the CLI's `--allow-empty`).
    #[serde(default, alias = "allowEmpty")]
    allow_empty: bool,
}

async fn add_collection(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<AddCollectionBody>,
) -> ApiResult {
    let engine = caller.engine.clone();
    let (c, _report) = st
        .write(move || {
            engine.add_collection(
                &PathBuf::from(&b.path),
                Some(&b.name),
                b.glob_pattern.as_deref(),
                b.allow_empty,
                &quarry_engine::NoProgress,
            )
        })
        .await?;
    Ok(axum::Json(json!({
        "status": "added", "name": c.name, "path": c.path, "documents": c.documents,
        "content": format!("Added collection '{}' with {} documents", c.name, c.documents),
    })))
}

async fn get_collection(caller: Caller, Path(name): Path<String>) -> ApiResult {
    let engine = caller.engine.clone();
    let c = run_blocking(move || engine.collection(&name)).await?;
    Ok(axum::Json(json!({
        "name": c.name, "path": c.path, "pattern": c.pattern, "documents": c.documents,
        "last_indexed": c.last_updated_ms.map(quarry_core::iso8601_millis),
    })))
}

async fn remove_collection(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    let engine = caller.engine.clone();
    let n = name.clone();
    st.write(move || engine.remove_collection(&n, &quarry_engine::NoProgress))
        .await?;
    Ok(axum::Json(json!({
        "status": "removed", "name": name, "content": format!("Removed collection '{name}'"),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenameBody {
    #[serde(alias = "newName")]
    new_name: String,
}

async fn rename_collection(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
    Body(b): Body<RenameBody>,
) -> ApiResult {
    let engine = caller.engine.clone();
    let (old, new) = (name.clone(), b.new_name.clone());
    st.write(move || engine.rename_collection(&old, &new, &quarry_engine::NoProgress))
        .await?;
    Ok(axum::Json(json!({
        "status": "renamed", "old_name": name, "new_name": b.new_name,
        "content": format!("Renamed '{name}' to '{}'", b.new_name),
    })))
}

async fn index(State(st): State<Arc<AppState>>, caller: Caller) -> ApiResult {
    let engine = caller.engine.clone();
    let r = st
        .write(move || engine.update(&UpdateOptions::default(), &quarry_engine::NoProgress))
        .await?;
    let n = r.collections.len();
    Ok(axum::Json(json!({
        "status": "indexed", "collections": n, "total_documents": r.total_documents,
        "report": r,
        "content": format!("Indexed {n} collection{}: {} documents", if n == 1 { "" } else { "s" }, r.total_documents),
    })))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct UpdateBody {
    #[serde(default)]
    pull: bool,
}

async fn update(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    body: axum::body::Bytes,
) -> ApiResult {
    // The seed allows an empty body here ("pull" defaults to false).
    let pull = if body.iter().all(u8::is_ascii_whitespace) {
        false
    } else {
        serde_json::from_slice::<UpdateBody>(&body)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))?
            .pull
    };
    let engine = caller.engine.clone();
    let r = st
        .write(move || {
            engine.update(
                &UpdateOptions {
                    pull,
                    collections: Vec::new(),
                },
                &quarry_engine::NoProgress,
            )
        })
        .await?;
    let n = r.collections.len();
    Ok(axum::Json(json!({
        "status": "updated", "collections": n, "report": r,
        "content": format!("Updated {n} collection{}", if n == 1 { "" } else { "s" }),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextBody {
    path: String,
    text: String,
}

async fn add_context(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<ContextBody>,
) -> ApiResult {
    let engine = caller.engine.clone();
    let c = st
        .write(move || engine.add_context(&b.path, &b.text))
        .await?;
    Ok(axum::Json(json!({
        "status": "added", "path": c.path, "content": format!("Added context for {}", c.path),
    })))
}

async fn list_contexts(caller: Caller) -> ApiResult {
    let engine = caller.engine.clone();
    let cs = run_blocking(move || engine.contexts()).await?;
    Ok(axum::Json(json!({ "contexts": cs })))
}

async fn remove_context(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(path): Path<String>,
) -> ApiResult {
    let engine = caller.engine.clone();
    let key = st
        .write(move || match engine.remove_context(&path) {
            // `/contexts/{*path}` drops an absolute path's leading slash unless it was
            // encoded or doubled: read it as absolute when the path as given names nothing.
            Err(Error::NotFound(first)) if !path.starts_with('/') => engine
                .remove_context(&format!("/{path}"))
                .map_err(|e| match e {
                    Error::NotFound(_) => Error::NotFound(first),
                    other => other,
                }),
            removed => removed,
        })
        .await?;
    Ok(axum::Json(json!({ "status": "removed", "path": key })))
}

async fn health(State(st): State<Arc<AppState>>) -> Response {
    // Healthy = the index answers; model_loaded = the embedding model is in memory (seed
    // 001's shape, exactly: a node's place in the store's changes is `/health/ready`'s).
    let engine = st.root_engine().clone();
    let loaded = engine.model_loaded();
    match run_blocking(move || engine.status()).await {
        Ok(_) => axum::Json(json!({ "status": "healthy", "model_loaded": loaded })).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(
                json!({ "status": "unhealthy", "model_loaded": loaded, "detail": e.detail }),
            ),
        )
            .into_response(),
    }
}

/// For load balancers: 200 once this node answers, its index is built and it follows the
/// store's changes closely (`READY_LAG`), 503 before (a node rebuilding takes no traffic).
async fn ready(State(st): State<Arc<AppState>>) -> Response {
    // Anonymous callers learn whether the node is ready and caught up, not how far behind
    // it is (`/metrics` says, to admins).
    let engine = st.root_engine().clone();
    match run_blocking(move || engine.node_feed_state()).await {
        Ok(node) => (
            if node.ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            },
            axum::Json(json!({ "ready": node.ready, "caught_up": node.caught_up })),
        )
            .into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "ready": false, "caught_up": false, "detail": e.detail })),
        )
            .into_response(),
    }
}
