//! Chat over REST (seed 003 §5.1–5.3): `POST /api/v1/chat` streamed as Server-Sent Events
//! (or one JSON answer with `"stream": false`), and the caller's conversations. The work is
//! `quarry-chat`'s; this module checks the request before anything is streamed, turns events
//! into SSE, and cancels the run when the client goes away.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use quarry_chat::{ChatContext, ChatEvent, ChatRequest, ChatService, Outcome};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::http::{ApiError, Body, ErrorCode, Params, ok, run_blocking};
use crate::state::AppState;

/// A comment line sent while nothing else is, so proxies keep the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/chat", post(chat))
        .route("/api/v1/chat/config", get(chat_config))
        .route("/api/v1/conversations", get(list_conversations))
        .route(
            "/api/v1/conversations/{id}",
            get(get_conversation)
                .patch(rename_conversation)
                .delete(delete_conversation),
        )
}

fn context(caller: &Caller) -> ChatContext {
    ChatContext {
        engine: caller.engine.clone(),
        principal: caller.principal.clone(),
        meter: quarry_engine::ModelMeter::new(),
    }
}

/// Cancels the run when dropped: the response body (or the handler's future) going away
/// means the client left.
struct CancelOnDrop(CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

async fn chat(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Body(req): Body<ChatRequest>,
) -> Result<Response, ApiError> {
    if let Err(limited) = crate::limits::chat(&state, &caller.principal).await {
        return Ok(limited);
    }
    if let Err(spent) = crate::limits::monthly_model_tokens(&state, &caller.principal).await {
        return Ok(spent);
    }
    let service = state.chat().clone();
    let mut ctx = context(&caller);
    // Retrieval only returns passages of documents the metadata filter matches (issue 44).
    let filter = crate::service::filter::parse_filter(req.filter.as_ref())?;
    if filter.is_some() {
        ctx.engine = ctx.engine.filtered(filter);
    }
    // ... and, for knowledge entries, those valid at `as_of`.
    let as_of = crate::service::entries::parse_as_of(req.as_of.as_ref())?;
    if as_of.is_some() {
        ctx.engine = ctx.engine.at(as_of);
    }
    let streaming = req.streaming();
    let prepared = {
        let service = service.clone();
        let ctx = ctx.clone();
        run_blocking(move || service.prepare(&ctx, req)).await?
    };
    let cancel = state.shutdown_token().child_token();
    if !streaming {
        // The run is its own task, so a client that leaves cancels it (through the guard)
        // rather than dropping it half-way: tool calls pass the cancellation upstream and the
        // answer is stored as interrupted.
        let guard = CancelOnDrop(cancel.clone());
        let asked = Asked::of(&prepared);
        let answer = tokio::spawn(async move {
            let answer = collect(&state, &service, &ctx, prepared, &asked, cancel).await;
            crate::audit::metered_use(&state, &ctx.principal, &ctx.meter);
            answer
        })
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the chat stopped: {e}"),
            )
        })?;
        drop(guard);
        return Ok(answer);
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<ChatEvent>();
    let run_cancel = cancel.clone();
    let run_ctx = ctx.clone();
    let asked = Asked::of(&prepared);
    tokio::spawn(async move {
        let booked = state.clone();
        let emit = move |e: ChatEvent| {
            asked.note(&state, &run_ctx.principal, &e);
            let _ = tx.send(e);
        };
        service.run(&ctx, prepared, &emit, run_cancel).await;
        crate::audit::metered_use(&booked, &ctx.principal, &ctx.meter);
    });
    let guard = CancelOnDrop(cancel);
    let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        let next = tokio::time::timeout(KEEP_ALIVE, rx.recv()).await;
        let bytes = match next {
            Ok(Some(event)) => Bytes::from(event.to_sse()),
            Ok(None) => return None,
            Err(_) => Bytes::from_static(b": keep-alive\n\n"),
        };
        Some((Ok::<_, Infallible>(bytes), (rx, guard)))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
            // nginx buffers responses unless told not to.
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response())
}

/// What a chat asked, for what its events tell the audit and insight logs.
struct Asked {
    question: String,
    knowledge_bases: Vec<String>,
}

impl Asked {
    fn of(prepared: &quarry_chat::Prepared) -> Asked {
        Asked {
            question: prepared.question().to_owned(),
            knowledge_bases: prepared.knowledge_bases().to_vec(),
        }
    }

    /// A tool round into the audit log; the passages retrieved into the insight log (none
    /// found: an unanswered question); the model's requests and tokens into the usage counts.
    fn note(&self, state: &AppState, principal: &quarry_access::Principal, e: &ChatEvent) {
        match e {
            ChatEvent::ToolResult(call) => crate::audit::chat_tool_call(state, principal, call),
            ChatEvent::Done(done) => crate::audit::model_use(
                state,
                principal,
                "chat",
                u64::try_from(done.rounds).unwrap_or(u64::MAX),
                done.usage.total_tokens,
            ),
            ChatEvent::RagSource(sources) => crate::audit::search(
                state,
                principal,
                "chat",
                Some(&self.knowledge_bases),
                &self.question,
                sources.len(),
                sources.iter().map(|s| s.score).reduce(f64::max),
            ),
            _ => {}
        }
    }
}

/// Runs a chat to its end and answers one JSON object (`"stream": false`).
async fn collect(
    state: &AppState,
    service: &Arc<ChatService>,
    ctx: &ChatContext,
    prepared: quarry_chat::Prepared,
    asked: &Asked,
    cancel: CancellationToken,
) -> Response {
    let events = std::sync::Mutex::new(Vec::new());
    let emit = |e: ChatEvent| {
        asked.note(state, &ctx.principal, &e);
        events.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    };
    let outcome = service.run(ctx, prepared, &emit, cancel).await;
    let events = events.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut content = String::new();
    let mut sources = Value::Array(Vec::new());
    let mut calls: Vec<Value> = Vec::new();
    let mut conversation = Value::Null;
    for e in &events {
        match e {
            ChatEvent::Conversation { id, message_id, .. } => {
                conversation = json!({"id": id, "message_id": message_id});
            }
            ChatEvent::RagSource(_) => sources = e.payload(),
            ChatEvent::Delta(t) => content.push_str(t),
            ChatEvent::ToolResult(c) => calls.push(json!(c)),
            _ => {}
        }
    }
    match outcome {
        Outcome::Answered(done) => {
            let mut v = json!({
                "content": content,
                "sources": sources,
                "tool_calls": calls,
            });
            if let (Value::Object(out), Value::Object(d)) = (&mut v, json!(done)) {
                out.extend(d);
            }
            axum::Json(v).into_response()
        }
        Outcome::Failed(f) => {
            let status = if f.code == "provider_unavailable" {
                StatusCode::SERVICE_UNAVAILABLE
            } else if f.code == "provider_error" {
                StatusCode::BAD_GATEWAY
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            (
                status,
                axum::Json(json!({
                    "detail": f.message,
                    "status_code": status.as_u16(),
                    "error_code": ErrorCode::for_status(status.as_u16()).as_str(),
                    "code": f.code,
                    "provider_status": f.status,
                    "conversation_id": conversation.get("id"),
                })),
            )
                .into_response()
        }
        // The client is gone; nobody reads this.
        Outcome::Cancelled => StatusCode::NO_CONTENT.into_response(),
    }
}

#[derive(Deserialize)]
struct ListParams {
    limit: Option<usize>,
}

/// `GET /api/v1/chat/config`: whether chat is configured, with which model and limits.
async fn chat_config(State(state): State<Arc<AppState>>, _caller: Caller) -> Response {
    ok(state.chat().config())
}

async fn list_conversations(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Params(p): Params<ListParams>,
) -> Result<Response, ApiError> {
    let limit = p.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("limit must be 1 to 1000, got {limit}"),
        ));
    }
    let service = state.chat().clone();
    let owner = caller.principal.owner_key().to_owned();
    let items = run_blocking(move || service.conversations(&owner, limit)).await?;
    Ok(axum::Json(json!({"success": true, "data": items, "total": items.len()})).into_response())
}

async fn get_conversation(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let service = state.chat().clone();
    let owner = caller.principal.owner_key().to_owned();
    let v = run_blocking(move || service.conversation(&owner, &id)).await?;
    Ok(ok(v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenameBody {
    title: String,
}

async fn rename_conversation(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<RenameBody>,
) -> Result<Response, ApiError> {
    let service = state.chat().clone();
    let owner = caller.principal.owner_key().to_owned();
    let v = run_blocking(move || service.rename_conversation(&owner, &id, &b.title)).await?;
    Ok(ok(v))
}

async fn delete_conversation(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let service = state.chat().clone();
    let owner = caller.principal.owner_key().to_owned();
    let deleted = id.clone();
    run_blocking(move || service.delete_conversation(&owner, &id)).await?;
    Ok(ok(json!({"id": deleted, "deleted": true})))
}
