//! Quarry's servers, a shell around `quarry-engine`: MCP over stdio and Streamable HTTP, the
//! QMD REST API, `/metrics` and `/health` — one HTTP listener, one engine, one model load.
//!
//! Layers on the HTTP side, outermost first: metrics → shutdown gate (503 while draining) →
//! Host/Origin check (DNS-rebinding defence, 403) → routes. REST routes add a body limit
//! (413 in the seed's error shape) and a request timeout; the MCP endpoint has rmcp's own body
//! limit and long-lived SSE streams.
//!
//! Source layout (files form a tree, and a route module never imports another;
//! `quarry-core`'s `tests/layering.rs` checks both):
//! - `state.rs`: `AppState`, what every handler shares. It imports from `crate::audit`,
//!   `crate::auth` and `crate::http` only what they re-export from files below it
//!   (`audit/sources.rs`, `auth/mode.rs`, `http/error.rs`, `http/blocking.rs`), none of which
//!   imports it; its public constructors, which hand it Quarry's own tool packages, are in
//!   `assembly.rs`;
//! - `local.rs`: the CLI's fast path, searches over a Unix socket in the data directory;
//! - `http/`: the error contract, extractors, envelopes, the one blocking runner, the
//!   Host/Origin guard, the listener's settings (`HttpOptions`);
//! - `auth/`: who is calling (the middleware that resolves a request's principal), the web
//!   UI's session cookie and CSRF check;
//! - `service/`: work two surfaces share (the knowledge tools of MCP and QukaAI, MCP tool
//!   arguments, the spaces a principal sees);
//! - route modules: `api/` (one module per REST surface), `compat/` (other products' APIs:
//!   WeKnora, Dify, QukaAI), `mcp/` (the MCP handler, its QMD tools, JSON-RPC wire
//!   rewriting, the hub's SSE gateway).

mod api;
mod assembly;
mod audit;
mod auth;
mod compat;
mod http;
mod limits;
mod local;
mod mcp;
mod service;
mod state;
mod telemetry;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use auth::AuthMode;
pub use http::options::{DEFAULT_PORT, HttpOptions};
use http::{ApiError, ErrorCode};
pub use local::{LocalOutcome, LocalSocket, SOCKET_NAME, ask_local, serve_local};
pub use mcp::{QuarryMcp, knowledge_package};
pub use state::AppState;

async fn refuse_while_draining(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    if state.is_shutting_down() {
        let mut r = ApiError::with_code(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ShuttingDown,
            "server is shutting down",
        )
        .into_response();
        r.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
        return r;
    }
    next.run(req).await
}

/// The whole HTTP application: `/mcp`, `/api/v1/mcp`, the REST APIs, `/metrics`.
///
/// Every route but `/health` passes [`auth::authenticate`] (with its surface's error
/// shape), which puts the request's [`auth::Caller`] on it; handlers take their engine
/// from that caller.
pub fn app(state: Arc<AppState>, opts: &HttpOptions, shutdown: &CancellationToken) -> Router {
    let _ = telemetry::handle();
    let authenticated = |surface: auth::Surface| {
        middleware::from_fn_with_state((state.clone(), surface), auth::authenticate)
    };
    // Sessions any node can resume (`mcp/sessions.rs`).
    let sessionful = || {
        let mut config = StreamableHttpServerConfig::default();
        config.session_store = Some(mcp::sessions::StoredSessions::new(
            state.root_engine().store_handle(),
        ));
        config
    };
    let mcp_state = state.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(QuarryMcp::new(mcp_state.clone())),
        Arc::new(LocalSessionManager::default()),
        sessionful()
            // Host/Origin are checked once, for every route, by `http::guard`.
            .disable_allowed_hosts()
            .with_max_request_body_bytes(opts.max_body_bytes)
            .with_cancellation_token(shutdown.child_token()),
    );
    let gateway_state = state.clone();
    let gateway = StreamableHttpService::new(
        move || Ok(QuarryMcp::gateway(gateway_state.clone())),
        Arc::new(LocalSessionManager::default()),
        sessionful()
            .disable_allowed_hosts()
            .with_max_request_body_bytes(opts.max_body_bytes)
            .with_cancellation_token(shutdown.child_token()),
    );
    let named_state = state.clone();
    let named = StreamableHttpService::new(
        move || Ok(QuarryMcp::named(named_state.clone())),
        Arc::new(LocalSessionManager::default()),
        sessionful()
            .disable_allowed_hosts()
            .with_max_request_body_bytes(opts.max_body_bytes)
            .with_cancellation_token(shutdown.child_token()),
    );
    let quka_state = state.clone();
    let quka = StreamableHttpService::new(
        move || Ok(compat::quka::QukaMcp::new(quka_state.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_max_request_body_bytes(opts.max_body_bytes)
            .with_cancellation_token(shutdown.child_token()),
    );
    let consistent =
        || middleware::from_fn_with_state(state.clone(), http::consistency::read_your_writes);
    let timeout = || {
        tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            opts.request_timeout,
        )
    };
    let rest = api::qmd::router()
        .merge(api::tokens::router())
        .merge(api::audit::router())
        .merge(api::insight::router())
        .merge(api::metadata::router())
        .merge(compat::weknora::router())
        .merge(api::hub::router())
        .merge(api::endpoints::router())
        .merge(api::groups::router())
        .merge(api::policies::router())
        .layer(axum::extract::DefaultBodyLimit::max(opts.max_body_bytes))
        .layer(timeout())
        .layer(consistent())
        .route_layer(authenticated(auth::Surface::Rest));
    let account = api::tokens::account_router()
        .merge(api::spaces::router())
        .merge(api::ui::router())
        .merge(api::oauth::router())
        .layer(timeout())
        .route_layer(authenticated(auth::Surface::Account));
    let dify = compat::dify::router()
        .layer(axum::extract::DefaultBodyLimit::max(opts.max_body_bytes))
        .layer(timeout())
        .layer(consistent())
        .route_layer(authenticated(auth::Surface::Dify));
    let legacy_sse =
        mcp::hub_sse::LegacySse::new(state.clone(), opts.max_body_bytes, shutdown.child_token());
    let gateway =
        Router::new()
            .nest_service("/api/mcp", gateway)
            .layer(middleware::from_fn_with_state(
                legacy_sse,
                mcp::hub_sse::route,
            ));
    let named = Router::new()
        .route_service("/mcp/e/{name}", named)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            mcp::named::resolve,
        ));
    let mcp = Router::new()
        .nest_service("/mcp", mcp)
        .merge(named)
        .merge(gateway)
        .layer(consistent())
        .layer(authenticated(auth::Surface::JsonRpc))
        .layer(middleware::from_fn_with_state(
            opts.max_body_bytes,
            mcp::jsonrpc::http_guard,
        ));
    let quka = Router::new()
        .nest_service("/api/v1/mcp", quka)
        .layer(consistent())
        .layer(authenticated(auth::Surface::JsonRpc))
        .layer(middleware::from_fn(compat::quka::accept_json))
        .layer(middleware::from_fn_with_state(
            opts.max_body_bytes,
            mcp::jsonrpc::http_guard,
        ));
    // No request timeout: a chat streams for as long as its model and tools take, each
    // bounded on its own (provider silence, tool timeout, rounds).
    let chat = api::chat::router()
        .layer(axum::extract::DefaultBodyLimit::max(opts.max_body_bytes))
        .route_layer(authenticated(auth::Surface::Rest));
    let knowledge = api::knowledge::router()
        .merge(api::sources::router())
        .merge(api::pages::router())
        .layer(timeout())
        .layer(consistent())
        .route_layer(authenticated(auth::Surface::Rest));
    // A source id is global: without a space in the request, its own space.
    let sources = api::sources::by_id_router()
        .layer(timeout())
        .layer(consistent())
        .route_layer(authenticated(auth::Surface::Source));
    let metrics = api::metrics::router().route_layer(authenticated(auth::Surface::Rest));
    Router::new()
        .merge(mcp)
        .merge(quka)
        .merge(rest)
        .merge(account)
        .merge(dify)
        .merge(knowledge)
        .merge(sources)
        .merge(chat)
        .merge(metrics)
        .merge(api::qmd::public_router())
        .merge(api::hub::public_router().layer(timeout()))
        .merge(
            api::oauth::public_router()
                .layer(axum::extract::DefaultBodyLimit::max(64 * 1024))
                .layer(timeout()),
        )
        .merge(
            api::ui::public_router()
                .merge(api::sign_in::public_router())
                .layer(axum::extract::DefaultBodyLimit::max(64 * 1024))
                .layer(timeout()),
        )
        .fallback(|req: Request| async move {
            ApiError::with_code(
                StatusCode::NOT_FOUND,
                ErrorCode::RouteNotFound,
                format!("Not found: {} {}", req.method(), req.uri().path()),
            )
        })
        .method_not_allowed_fallback(|req: Request| async move {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!(
                    "Method {} is not allowed on {}",
                    req.method(),
                    req.uri().path()
                ),
            )
        })
        .with_state(state.clone())
        .layer(middleware::from_fn_with_state(
            Arc::new(http::guard::Guard::new(opts)),
            http::guard::check_host_and_origin,
        ))
        .layer(middleware::from_fn_with_state(state, refuse_while_draining))
        .layer(middleware::from_fn(telemetry::track_http))
}

/// Binds `opts`' address and port for [`serve_http`]; the error names the address and what
/// to do (another port, another process listening there).
pub fn bind_http(opts: &HttpOptions) -> Result<std::net::TcpListener, String> {
    let addr = SocketAddr::new(opts.bind, opts.port);
    std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "cannot listen on {addr}: the address is already in use (another quarry serve, or another program, listens there); stop it or pick another port with --port"
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "cannot listen on {addr}: permission denied (ports below 1024 need privileges); pick another port with --port"
        ),
        std::io::ErrorKind::AddrNotAvailable => format!(
            "cannot listen on {addr}: no network interface of this machine has that address; check --bind"
        ),
        _ => format!("cannot listen on {addr}: {e}"),
    })
}

/// Serves HTTP until `shutdown` is cancelled, then stops accepting, answers requests that
/// arrive on open connections with 503, and finishes the ones in flight.
///
/// Connections are bounded in time and number: a new connection that sends nothing is closed
/// after `first_byte_timeout`, a client gets `header_timeout` to send each request's headers
/// (so headers a byte at a time are cut off), and at most `max_connections` are served at
/// once, `max_connections_per_address` of them from one address — one more is answered 503
/// and closed, unless it is a `GET /health`, answered from a small reserve (so a load
/// balancer keeps the node while one client holds its slots; `http::admission`). Slow or
/// idle clients can exhaust neither the process's file descriptors nor the connections of
/// those already served.
///
/// `listener` is bound by the caller before anything slow starts (a model's load), so a port
/// that is taken is said at once ([`bind_http`]).
pub async fn serve_http(
    state: Arc<AppState>,
    opts: HttpOptions,
    listener: std::net::TcpListener,
    shutdown: CancellationToken,
    on_ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let addr = listener.local_addr()?;
    let app = app(state.clone(), &opts, &shutdown);
    on_ready(addr);
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(opts.header_timeout);
    let admission = Arc::new(http::admission::Admission::new(
        opts.max_connections,
        opts.max_connections_per_address,
        opts.first_byte_timeout.min(opts.header_timeout),
    ));
    // Each connection task holds a receiver; all dropped = every connection has ended.
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    let over_capacity = Arc::new(over_capacity_reply());
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    pause_after_accept_error(&e).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let admitted = admission.try_admit(peer.ip());
        let looking = match admitted {
            Some(_) => None,
            None => match admission.try_look() {
                Some(looking) => Some(looking),
                None => {
                    // A best-effort answer without reading the request: the descriptor is
                    // held for no longer than this write.
                    let _ = tcp.try_write(&over_capacity);
                    continue;
                }
            },
        };
        // Streamed replies (SSE) go out in several writes: without TCP_NODELAY, Nagle's
        // algorithm holds the second one back until the client's delayed ACK (~40 ms).
        let _ = tcp.set_nodelay(true);
        let shutdown = shutdown.clone();
        let open = open_rx.clone();
        let admission = admission.clone();
        let over_capacity = over_capacity.clone();
        let app = app.clone();
        let http1 = http1.clone();
        tokio::spawn(async move {
            let permit = match (admitted, looking) {
                (Some(admitted), _) => {
                    // A connection still silent when the server stops is simply closed.
                    let spoke = tokio::select! {
                        r = admission.first_bytes(&tcp) => r.is_ok(),
                        _ = shutdown.cancelled() => false,
                    };
                    if !spoke {
                        return;
                    }
                    admitted
                }
                (None, Some(looking)) => match admission.second_look(&tcp, looking).await {
                    Ok(admitted) => admitted,
                    Err(http::admission::Refused::Busy) => {
                        let _ = tcp.try_write(&over_capacity);
                        // Read what the client sent, so closing sends a FIN after the
                        // answer rather than a reset that can discard it.
                        let mut sink = [0u8; 4096];
                        while matches!(tcp.try_read(&mut sink), Ok(n) if n > 0) {}
                        return;
                    }
                    Err(http::admission::Refused::Silent) => return,
                },
                (None, None) => return,
            };
            let conn = http1.serve_connection(
                hyper_util::rt::TokioIo::new(tcp),
                hyper_util::service::TowerToHyperService::new(audit::WithPeer::new(app, peer)),
            );
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                served = conn.as_mut() => {
                    if let Err(e) = served {
                        tracing::debug!("connection ended: {e}");
                    }
                }
                _ = shutdown.cancelled() => {
                    // Idle connections close now; one mid-request finishes its response.
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            drop(permit);
            drop(open);
        });
    }
    drop(listener);
    state.begin_shutdown();
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}

/// What a connection over `max_connections` gets before it is closed: the REST error shape.
fn over_capacity_reply() -> Vec<u8> {
    let body = ApiError::with_code(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::TooManyConnections,
        "too many connections, try again later",
    )
    .body()
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// After a failed `accept`: nothing to wait for when one client gave up, a pause when the
/// process is out of descriptors (EMFILE), so the loop does not spin while some close.
async fn pause_after_accept_error(e: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!("accept failed: {e}");
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// Serves MCP over stdin/stdout until the client closes stdin or `shutdown` is cancelled.
pub async fn serve_stdio(state: Arc<AppState>, shutdown: CancellationToken) -> std::io::Result<()> {
    let (reader, writer, output) =
        mcp::jsonrpc::stdio_pipes(tokio::io::stdin(), tokio::io::stdout());
    // The session's principal is read from the store: off the async threads.
    let mcp = http::run_blocking_raw(move || QuarryMcp::local(state))
        .await
        .map_err(|e| std::io::Error::other(e.detail))?
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let served = match mcp.serve_with_ct((reader, writer), shutdown).await {
        Ok(service) => service.waiting().await.map(drop).map_err(|e| {
            std::io::Error::other(format!("MCP stdio session ended with an error: {e}"))
        }),
        Err(e) => Err(std::io::Error::other(format!(
            "MCP stdio session failed to start: {e}"
        ))),
    };
    // Everything rmcp wrote (and every parse-error reply) reaches stdout before we return.
    let _ = output.await;
    served
}

/// A token cancelled on SIGINT or SIGTERM.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => {
                        let _ = ctrl_c.await;
                        t.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
        t.cancel();
    });
    token
}
