//! Read-your-writes across nodes.
//!
//! A successful write answers with `X-Quarry-Txid`: a position in the store's change feed
//! that the write lies below ([`quarry_engine::Engine::feed_horizon`]). A request that
//! presents it (the same header, or `?min_txid=`) on any node first waits, up to
//! [`WAIT`], until that node's keyword index has applied every write below it — so a note
//! created through node A is found by a search sent to node B. A wait that runs out answers
//! anyway, saying so with `X-Quarry-Caught-Up: false`.
//!
//! Event-stream responses (MCP over SSE) carry no position: their headers leave before the
//! work they stream has happened. Nor do reads sent by POST: searches ([`reads`]), MCP
//! messages other than tool calls, and calls of tools that write no documents
//! ([`mark_read`]). They write nothing a later read could wait for, and the position would
//! cost a store round trip each.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, run_blocking};
use crate::state::AppState;

/// The header a write answers with and a read may present.
pub(crate) const TXID: HeaderName = HeaderName::from_static("x-quarry-txid");
/// Set to `false` on a response whose wait ran out before the node caught up.
const CAUGHT_UP: HeaderName = HeaderName::from_static("x-quarry-caught-up");
/// The longest a read waits for its node to catch up.
pub(crate) const WAIT: Duration = Duration::from_secs(5);

/// The position a request presents: its `X-Quarry-Txid` header or `min_txid` parameter.
fn presented(req: &Request) -> Result<Option<i64>, ApiError> {
    let from_query = req.uri().query().and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "min_txid")
            .map(|(_, v)| v.to_owned())
    });
    let raw = match req.headers().get(&TXID) {
        Some(v) => Some(v.to_str().unwrap_or("").to_owned()),
        None => from_query,
    };
    let Some(raw) = raw else {
        return Ok(None);
    };
    match raw.trim().parse::<i64>() {
        Ok(n) if n >= 0 => Ok(Some(n)),
        _ => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "X-Quarry-Txid / min_txid must be the non-negative integer a write answered \
                 with, not {raw:?}"
            ),
        )),
    }
}

/// In a request's extensions: set, its answer is a read's whatever its method and carries
/// no position. A layer outside [`read_your_writes`] that knows from the request alone puts
/// one in already set ([`ReadMark::read`]); otherwise the middleware puts in an unset one,
/// which a handler sets once it knows ([`mark_read`]). Shared, so a handler's copy of the
/// request's extensions (rmcp's) sets the same mark.
#[derive(Clone, Default)]
pub(crate) struct ReadMark(Arc<AtomicBool>);

impl ReadMark {
    /// A mark already set: the request is a read.
    pub(crate) fn read() -> Self {
        ReadMark(Arc::new(AtomicBool::new(true)))
    }

    fn is_read(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Marks the request whose extensions these are as a read: its answer carries no
/// `X-Quarry-Txid`. Nothing happens outside [`read_your_writes`] (no mark to set).
pub(crate) fn mark_read(extensions: &axum::http::Extensions) {
    if let Some(mark) = extensions.get::<ReadMark>() {
        mark.0.store(true, Ordering::Relaxed);
    }
}

/// The routes of `router` added so far answer reads (searches and fetches sent by POST):
/// their responses carry no `X-Quarry-Txid`. Routes added after this call are not marked.
pub(crate) fn reads<S: Clone + Send + Sync + 'static>(router: axum::Router<S>) -> axum::Router<S> {
    router.route_layer(axum::middleware::map_request(|req: Request| async move {
        mark_read(req.extensions());
        req
    }))
}

/// The middleware (inside authentication: only callers make a node wait).
pub(crate) async fn read_your_writes(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let token = match presented(&req) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let mut caught_up = true;
    if let Some(token) = token {
        let engine = state.root_engine().clone();
        match run_blocking(move || engine.wait_for_horizon(token, WAIT)).await {
            Ok(done) => caught_up = done,
            Err(e) => return e.into_response(),
        }
    }
    let posted = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let read = req
        .extensions()
        .get::<ReadMark>()
        .cloned()
        .unwrap_or_default();
    req.extensions_mut().insert(read.clone());
    let mut response = next.run(req).await;
    let writes = posted && !read.is_read();
    if !caught_up {
        response
            .headers_mut()
            .insert(CAUGHT_UP, HeaderValue::from_static("false"));
    }
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if writes && response.status().is_success() && !streamed {
        let engine = state.root_engine().clone();
        if let Ok(h) = run_blocking(move || engine.feed_horizon()).await
            && let Ok(v) = HeaderValue::from_str(&h.to_string())
        {
            response.headers_mut().insert(TXID, v);
        }
    }
    response
}
