//! The hub gateway's legacy HTTP+SSE transport (MCP 2024-11-05; seed 002's `GET /api/mcp`
//! and `POST /api/mcp?sessionId=…`), for clients that speak nothing else.
//!
//! `GET /api/mcp[?selection]` with `Accept: text/event-stream` opens a stream whose first
//! event (`endpoint`) names `/api/mcp?sessionId=…`; the client POSTs its messages there
//! (answered `202`) and reads the answers from the stream. Each session runs the same
//! [`QuarryMcp`] gateway handler as Streamable HTTP, over a pair of channels.
//!
//! Per-connection state is inherent to this transport, and is kept to what it needs: the
//! GET's URL (the selection is bound at the handshake, as seed 002 asks, so a POST cannot
//! widen it), who opened it (a POST from anyone else finds no session), and the tools the
//! client's `initialize` named in `params.tools` (seed 002's other selection path, which may
//! only narrow the URL's). The caller is still resolved from each POST's own credentials, so a
//! revoked token stops at its next message. Everything else is computed per message as on
//! the other transports.
//!
//! `params.tools` works on sessionful Streamable HTTP too: the tools of an `initialize` are
//! kept under the `Mcp-Session-Id` rmcp answers with and put on that session's requests.
//! (2026-07-28 clients have no `initialize` and no session: their URL is their selection.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use quarry_hub::Selection;
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::{RoleServer, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::QuarryMcp;
use super::narrowing::InitializeTools;
use crate::auth::Caller;
use crate::state::AppState;

/// Where sessions post (the gateway's path; inside the nested service the URI is stripped).
const ENDPOINT: &str = "/api/mcp";
/// Open sessions at most (each holds a task and two small queues).
const MAX_SESSIONS: usize = 1024;
/// Messages queued per direction before a sender waits.
const QUEUE: usize = 64;
/// A comment line this often keeps proxies from closing an idle stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The open legacy SSE sessions of one server, and the `params.tools` of Streamable HTTP
/// sessions (keyed by `Mcp-Session-Id`).
pub(crate) struct LegacySse {
    state: Arc<AppState>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    streamable_tools: Mutex<StreamableTools>,
    max_body_bytes: usize,
    shutdown: CancellationToken,
}

/// `params.tools` per Streamable HTTP session, oldest forgotten first past
/// [`MAX_SESSIONS`]×4 (rmcp keeps the sessions themselves; a forgotten entry only widens a
/// session back to its URL's selection, which its credentials may use anyway).
#[derive(Default)]
struct StreamableTools {
    by_session: HashMap<String, InitializeTools>,
    order: std::collections::VecDeque<String>,
}

impl StreamableTools {
    fn insert(&mut self, session: String, tools: InitializeTools) {
        if self.by_session.insert(session.clone(), tools).is_none() {
            self.order.push_back(session);
        }
        while self.order.len() > MAX_SESSIONS * 4 {
            if let Some(old) = self.order.pop_front() {
                self.by_session.remove(&old);
            }
        }
    }

    fn remove(&mut self, session: &str) {
        if self.by_session.remove(session).is_some() {
            self.order.retain(|s| s != session);
        }
    }
}

struct Session {
    /// The GET's URL: every message of the session is viewed through its selection.
    uri: Uri,
    opener: Opener,
    inbox: mpsc::Sender<ClientJsonRpcMessage>,
    narrowed: OnceLock<InitializeTools>,
    ended: CancellationToken,
}

/// Who opened a session: the token (none for the machine's owner) and the space.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opener {
    token_id: Option<String>,
    space_id: String,
}

impl Opener {
    fn of(caller: &Caller) -> Opener {
        Opener {
            token_id: caller
                .principal
                .identity
                .as_ref()
                .and_then(|c| c.token_id.clone()),
            space_id: caller.principal.space_id.clone(),
        }
    }
}

impl LegacySse {
    pub(crate) fn new(
        state: Arc<AppState>,
        max_body_bytes: usize,
        shutdown: CancellationToken,
    ) -> Arc<LegacySse> {
        Arc::new(LegacySse {
            state,
            sessions: Mutex::default(),
            streamable_tools: Mutex::default(),
            max_body_bytes,
            shutdown,
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn streamable_tools(&self) -> std::sync::MutexGuard<'_, StreamableTools> {
        self.streamable_tools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// Middleware on `/api/mcp`: takes the legacy transport's requests (an event-stream GET
/// without `Mcp-Session-Id`, a POST naming `?sessionId=`), passes the rest to Streamable HTTP
/// — remembering an `initialize`'s `params.tools` for the session it opens, and putting them
/// on that session's later requests.
pub(crate) async fn route(
    State(sse): State<Arc<LegacySse>>,
    mut req: Request,
    next: Next,
) -> Response {
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(session) = session else {
        if req.method() == Method::GET && wants_event_stream(&req) {
            return open(&sse, req);
        }
        if req.method() == Method::POST {
            if let Some(id) = session_param(req.uri()) {
                return post(&sse, &id, req).await;
            }
            return initialize_streamable(&sse, req, next).await;
        }
        return next.run(req).await;
    };
    let tools = sse.streamable_tools().by_session.get(&session).cloned();
    if let Some(tools) = tools {
        req.extensions_mut().insert(tools);
    }
    let delete = req.method() == Method::DELETE;
    let response = next.run(req).await;
    if delete && response.status().is_success() {
        sse.streamable_tools().remove(&session);
    }
    response
}

/// A Streamable HTTP POST without a session: when it is an `initialize` with
/// `params.tools`, the tools are checked and kept for the session rmcp opens.
async fn initialize_streamable(sse: &Arc<LegacySse>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    // `jsonrpc::http_guard` has already read and bounded a JSON body; this reads it again
    // from memory.
    let Ok(bytes) = axum::body::to_bytes(body, sse.max_body_bytes).await else {
        return json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            format!("Request body is larger than {} bytes", sse.max_body_bytes),
        );
    };
    let tools = match initialize_tools(&bytes) {
        Ok(tools) => tools,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, -32602, e),
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if let Some(tools) = tools
        && let Some(session) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        sse.streamable_tools().insert(session.to_owned(), tools);
    }
    response
}

/// `params.tools` of an `initialize` message: `None` for any other message or without them;
/// an error when they are not a list of names.
fn initialize_tools(body: &[u8]) -> Result<Option<InitializeTools>, String> {
    // Cheap filter: most messages are not an initialize naming tools.
    let text = String::from_utf8_lossy(body);
    if !text.contains("initialize") || !text.contains("tools") {
        return Ok(None);
    }
    let Ok(raw) = serde_json::from_slice::<Value>(body) else {
        return Ok(None);
    };
    if raw.get("method").and_then(Value::as_str) != Some("initialize") {
        return Ok(None);
    }
    let Some(tools) = raw.pointer("/params/tools").filter(|t| !t.is_null()) else {
        return Ok(None);
    };
    tools
        .as_array()
        .and_then(|a| {
            a.iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .map(|names| Some(InitializeTools(names)))
        .ok_or_else(|| "params.tools must be an array of tool names".to_owned())
}

fn wants_event_stream(req: &Request) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}

fn session_param(uri: &Uri) -> Option<String> {
    form_urlencoded::parse(uri.query()?.as_bytes())
        .find(|(k, _)| k == "sessionId")
        .map(|(_, v)| v.into_owned())
}

fn json_error(status: StatusCode, code: i64, message: impl Into<String>) -> Response {
    let body = json!({"jsonrpc": "2.0", "error": {"code": code, "message": message.into()}});
    (status, axum::Json(body)).into_response()
}

fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    // Without the OS's randomness there is no unguessable id: refuse rather than use zeros.
    if getrandom::fill(&mut bytes).is_err() {
        return String::new();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Opens a session and answers with its event stream.
fn open(sse: &Arc<LegacySse>, req: Request) -> Response {
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            -32603,
            "request has no authenticated caller",
        );
    };
    // A malformed selection is refused now rather than on the first message.
    if let Err(e) = Selection::from_query(req.uri().query()) {
        return json_error(StatusCode::BAD_REQUEST, -32602, e.to_string());
    }
    let id = new_session_id();
    if id.is_empty() {
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            -32603,
            "no randomness for a session id",
        );
    }
    let (inbox_tx, inbox_rx) = mpsc::channel(QUEUE);
    let (outbox_tx, outbox_rx) = mpsc::channel(QUEUE);
    let ended = sse.shutdown.child_token();
    let session = Arc::new(Session {
        uri: req.uri().clone(),
        opener: Opener::of(&caller),
        inbox: inbox_tx,
        narrowed: OnceLock::new(),
        ended: ended.clone(),
    });
    {
        let mut sessions = sse.sessions();
        if sessions.len() >= MAX_SESSIONS {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32603,
                format!("too many open SSE sessions ({MAX_SESSIONS}); use Streamable HTTP"),
            );
        }
        sessions.insert(id.clone(), session);
    }
    let handler = QuarryMcp::gateway(sse.state.clone());
    let transport = ChannelTransport {
        inbox: inbox_rx,
        outbox: outbox_tx,
    };
    let service_ended = ended.clone();
    tokio::spawn(async move {
        match handler
            .serve_with_ct(transport, service_ended.clone())
            .await
        {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!("legacy SSE session ended before initialization: {e}"),
        }
        service_ended.cancel();
    });
    let endpoint = format!("event: endpoint\ndata: {ENDPOINT}?sessionId={id}\n\n");
    let guard = SessionGuard {
        sse: sse.clone(),
        id,
        ended: ended.clone(),
    };
    let stream = futures_util::stream::unfold(
        (Some(endpoint), outbox_rx, guard),
        |(first, mut outbox, guard)| async move {
            if let Some(first) = first {
                return Some((
                    Ok::<_, std::convert::Infallible>(Bytes::from(first)),
                    (None, outbox, guard),
                ));
            }
            let frame = tokio::select! {
                msg = outbox.recv() => match msg {
                    Some(msg) => match serde_json::to_string(&msg) {
                        Ok(text) => format!("event: message\ndata: {text}\n\n"),
                        Err(e) => {
                            tracing::warn!("cannot serialize a message for an SSE session: {e}");
                            ": unserializable message dropped\n\n".to_owned()
                        }
                    },
                    None => return None,
                },
                _ = tokio::time::sleep(KEEP_ALIVE) => ": keep-alive\n\n".to_owned(),
                _ = guard.ended.cancelled() => return None,
            };
            Some((Ok(Bytes::from(frame)), (None, outbox, guard)))
        },
    );
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Ends a session when its stream is dropped (the client went away, or the server stops).
struct SessionGuard {
    sse: Arc<LegacySse>,
    id: String,
    ended: CancellationToken,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.ended.cancel();
        self.sse.sessions().remove(&self.id);
    }
}

/// Hands one POSTed message to its session.
async fn post(sse: &Arc<LegacySse>, id: &str, req: Request) -> Response {
    let session = sse.sessions().get(id).cloned();
    let caller = req.extensions().get::<Caller>().cloned();
    // Someone else's session is as unknown as a missing one.
    let Some(session) = session.filter(|s| {
        !s.ended.is_cancelled() && caller.as_ref().is_some_and(|c| Opener::of(c) == s.opener)
    }) else {
        return json_error(
            StatusCode::NOT_FOUND,
            -32001,
            "no such SSE session (it ended, or was never opened with these credentials); open a new one with GET",
        );
    };
    let (mut parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, sse.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                format!("Request body is larger than {} bytes", sse.max_body_bytes),
            );
        }
    };
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        return json_error(StatusCode::BAD_REQUEST, -32700, format!("Parse error: {e}"));
    }
    match initialize_tools(&bytes) {
        Ok(Some(tools)) => {
            let _ = session.narrowed.set(tools);
        }
        Ok(None) => {}
        Err(e) => return json_error(StatusCode::BAD_REQUEST, -32602, e),
    }
    let mut message: ClientJsonRpcMessage = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                -32600,
                format!("Invalid request: {e}"),
            );
        }
    };
    // The handler reads the selection from the URL and the caller from the extensions, as on
    // Streamable HTTP: the URL is the session's, the caller this POST's.
    parts.uri = session.uri.clone();
    if let Some(tools) = session.narrowed.get() {
        parts.extensions.insert(tools.clone());
    }
    match &mut message {
        ClientJsonRpcMessage::Request(r) => {
            r.request.extensions_mut().insert(parts);
        }
        ClientJsonRpcMessage::Notification(n) => {
            n.notification.extensions_mut().insert(parts);
        }
        _ => {}
    }
    if session.inbox.send(message).await.is_err() {
        return json_error(StatusCode::NOT_FOUND, -32001, "the SSE session has ended");
    }
    StatusCode::ACCEPTED.into_response()
}

/// One session's side of the rmcp service: messages in from POSTs, out to the stream.
struct ChannelTransport {
    inbox: mpsc::Receiver<ClientJsonRpcMessage>,
    outbox: mpsc::Sender<ServerJsonRpcMessage>,
}

impl rmcp::transport::Transport<RoleServer> for ChannelTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let outbox = self.outbox.clone();
        async move {
            outbox.send(item).await.map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the SSE stream is closed")
            })
        }
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.inbox.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inbox.close();
        Ok(())
    }
}
