//! Quarry's servers, a shell around `quarry-engine`: MCP over stdio and Streamable HTTP, the
//! QMD REST API, `/metrics` and `/health` — one HTTP listener, one engine, one model load.
//!
//! Layers on the HTTP side, outermost first: metrics → shutdown gate (503 while draining) →
//! Host/Origin check (DNS-rebinding defence, 403) → routes. REST routes add a body limit
//! (413 in the seed's error shape) and a request timeout; the MCP endpoint has rmcp's own body
//! limit and long-lived SSE streams.
//!
//! Source layout (a route module never imports another; `tests/layering.rs` checks it):
//! - `http/`: the error contract, extractors, envelopes, the one blocking runner, the
//!   Host/Origin guard;
//! - `auth/`: who is calling (the middleware that resolves a request's principal), the web
//!   UI's session cookie and CSRF check;
//! - `service/`: work two surfaces share (the knowledge tools of MCP and QukaAI, MCP tool
//!   arguments, the spaces a principal sees);
//! - route modules: `api/` (one module per REST surface), `compat/` (other products' APIs:
//!   WeKnora, Dify, QukaAI), `mcp/` (the MCP handler, its QMD tools, JSON-RPC wire
//!   rewriting, the hub's SSE gateway).

mod api;
mod audit;
mod auth;
mod compat;
mod http;
mod limits;
mod mcp;
mod service;
mod telemetry;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use quarry_core::Error;
use quarry_engine::Engine;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use auth::AuthMode;
use http::{ApiError, ErrorCode};
pub use mcp::{QuarryMcp, knowledge_package};

/// Default HTTP port (seed 001).
pub const DEFAULT_PORT: u16 = 18765;

/// What every request handler shares.
pub struct AppState {
    /// The machine owner's handle: startup, workers, and the base every caller's scoped
    /// handle is made from. Request handlers use [`auth::Caller::engine`] instead.
    root: Arc<Engine>,
    directory: quarry_access::Directory,
    /// The default space, looked up on first use (it is never removed), so an open-mode
    /// request does not query the store for it.
    default_space: std::sync::OnceLock<quarry_access::Space>,
    auth: auth::AuthMode,
    /// Serialises writes made through this server (collections, index, update, contexts).
    write_queue: tokio::sync::Mutex<()>,
    /// Serialises `/embed` requests through the one model instance.
    pub(crate) model_queue: tokio::sync::Mutex<()>,
    shutting_down: AtomicBool,
    /// Ingestion workers, when this server runs them.
    workers: std::sync::Mutex<Option<quarry_queue::Workers>>,
    /// Keeps this node's keyword index in step with writes made elsewhere.
    follower: std::sync::Mutex<Option<quarry_queue::Follower>>,
    /// The tool hub (upstream connections, catalogs), made on first use.
    hub: std::sync::OnceLock<Arc<quarry_hub::Hub>>,
    /// Chat (provider client, settings), made on first use without a model.
    chat: std::sync::OnceLock<Arc<quarry_chat::ChatService>>,
    /// Cancelled at shutdown: chats in progress stop (and store what they have).
    runs: CancellationToken,
    /// The web UI's files (embedded, or `QUARRY_UI_DIR` during UI development).
    ui_assets: quarry_ui::Assets,
    /// The audit log's writer, once started ([`AppState::start_audit`]).
    audit: std::sync::OnceLock<Arc<quarry_audit::AuditLog>>,
    /// Rate limits, once started ([`AppState::start_limits`]).
    limits: std::sync::OnceLock<Arc<quarry_limits::RateLimiter>>,
    /// The origin clients reach this server at (`--public-url`), when set: the OAuth
    /// issuer and resource identifiers. Unset: taken from each request's checked `Host`.
    public_url: std::sync::OnceLock<String>,
}

impl AppState {
    /// A server in open mode (no token needed on loopback); see [`AppState::with_auth`].
    pub fn new(engine: Engine) -> Arc<Self> {
        Self::with_auth(engine, auth::AuthMode::Open)
    }

    /// A server that authenticates requests as `auth` says.
    pub fn with_auth(engine: Engine, auth: auth::AuthMode) -> Arc<Self> {
        Self::with_ui_assets(engine, auth, quarry_ui::Assets::embedded())
    }

    /// A server whose web UI serves `ui_assets` (a directory during UI development).
    pub fn with_ui_assets(
        engine: Engine,
        auth: auth::AuthMode,
        ui_assets: quarry_ui::Assets,
    ) -> Arc<Self> {
        Arc::new(AppState {
            directory: quarry_access::Directory::new(engine.store_handle()),
            root: Arc::new(engine),
            default_space: std::sync::OnceLock::new(),
            auth,
            write_queue: tokio::sync::Mutex::new(()),
            model_queue: tokio::sync::Mutex::new(()),
            shutting_down: AtomicBool::new(false),
            workers: std::sync::Mutex::new(None),
            follower: std::sync::Mutex::new(None),
            hub: std::sync::OnceLock::new(),
            chat: std::sync::OnceLock::new(),
            runs: CancellationToken::new(),
            ui_assets,
            audit: std::sync::OnceLock::new(),
            limits: std::sync::OnceLock::new(),
            public_url: std::sync::OnceLock::new(),
        })
    }

    /// Sets the origin clients reach this server at (`https://kb.example.com`: scheme,
    /// host, optional port, nothing else). Behind a proxy or load balancer every node must
    /// be given the same one: OAuth clients compare it as a string.
    pub fn set_public_url(&self, url: &str) -> Result<(), Error> {
        let origin = auth::oauth::checked_origin(url)?;
        self.public_url
            .set(origin)
            .map_err(|_| Error::Conflict("the public URL is already set".into()))
    }

    /// The origin set by [`AppState::set_public_url`].
    pub(crate) fn public_url(&self) -> Option<&str> {
        self.public_url.get().map(String::as_str)
    }

    /// Starts ingestion workers over the engine's queue (uploads, retries, cleanups; also
    /// what a CLI enqueued).
    /// Sets the hub's options and connects the registered upstreams (needs a Tokio
    /// runtime). Without this, the hub has default options and connects upstreams only as
    /// they are registered.
    pub fn start_hub(&self, opts: quarry_hub::HubOptions) -> Result<(), Error> {
        let hub = quarry_hub::Hub::new(
            self.root.store_handle(),
            vec![mcp::knowledge_package()],
            opts,
        );
        if self.hub.set(hub).is_err() {
            return Err(Error::Conflict("the hub is already running".into()));
        }
        self.hub().start()
    }

    /// The tool hub.
    pub fn hub(&self) -> &Arc<quarry_hub::Hub> {
        self.hub.get_or_init(|| {
            quarry_hub::Hub::new(
                self.root.store_handle(),
                vec![mcp::knowledge_package()],
                quarry_hub::HubOptions::default(),
            )
        })
    }

    /// Configures chat: the provider (none: chat answers 503 saying how to set one) and
    /// the retrieval and tool-loop settings. Call it after [`AppState::start_hub`].
    pub fn start_chat(
        &self,
        provider: Option<quarry_chat::ProviderConfig>,
        settings: quarry_chat::ChatSettings,
    ) -> Result<(), Error> {
        let provider = provider
            .map(quarry_chat::Provider::new)
            .transpose()
            .map_err(Error::InvalidInput)?;
        let service = quarry_chat::ChatService::new(
            provider,
            settings,
            self.root.store_handle(),
            self.hub().clone(),
        );
        if self.chat.set(Arc::new(service)).is_err() {
            return Err(Error::Conflict("chat is already configured".into()));
        }
        Ok(())
    }

    /// Chat.
    pub fn chat(&self) -> &Arc<quarry_chat::ChatService> {
        self.chat.get_or_init(|| {
            Arc::new(quarry_chat::ChatService::new(
                None,
                quarry_chat::ChatSettings::default(),
                self.root.store_handle(),
                self.hub().clone(),
            ))
        })
    }

    /// Starts the audit log's writer (`quarry serve`, `quarry mcp`); call once, off the
    /// async runtime (it prunes the store first).
    pub fn start_audit(&self, settings: quarry_audit::AuditSettings) -> Result<(), Error> {
        let log = quarry_audit::AuditLog::start(self.root.store_handle(), settings)?;
        if self.audit.set(log).is_err() {
            return Err(Error::Conflict("the audit log is already running".into()));
        }
        Ok(())
    }

    /// The audit log, when started: surfaces record through it (never blocking).
    pub fn audit(&self) -> Option<&Arc<quarry_audit::AuditLog>> {
        self.audit.get()
    }

    /// Starts rate limiting (`quarry serve`); a second call keeps the first settings.
    pub fn start_limits(&self, settings: quarry_limits::LimitSettings) {
        let _ = self.limits.set(quarry_limits::RateLimiter::new(
            self.root.store_handle(),
            settings,
        ));
    }

    /// The rate limiter, when started.
    pub fn limits(&self) -> Option<&Arc<quarry_limits::RateLimiter>> {
        self.limits.get()
    }

    /// A token cancelled when the server shuts down (long-running requests end with it).
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.runs
    }

    /// Starts the ingestion workers (`quarry serve`); call once. A server embeds every
    /// collection in the background when a model is configured, so its workers also sweep
    /// for chunks without vectors (unless `opts` sets another interval).
    pub fn start_workers(&self, mut opts: quarry_queue::WorkerOptions) -> Result<(), Error> {
        opts.embed_sweep.get_or_insert(quarry_queue::EMBED_SWEEP);
        // Opening the blob store now removes what uploads cut off by a crash left staged.
        self.root.blobs()?;
        let workers = quarry_queue::Workers::start(self.root.clone(), opts)?;
        *self.workers.lock().unwrap_or_else(|p| p.into_inner()) = Some(workers);
        Ok(())
    }

    /// Starts following the store's changes into this node's keyword index (writes made
    /// by other nodes, or a CLI beside the server), checking the index against the store
    /// every `index_check` (`None`: never); call once.
    pub fn start_follower(&self, index_check: Option<Duration>) -> Result<(), Error> {
        let follower = quarry_queue::Follower::start(self.root.clone(), index_check)?;
        *self.follower.lock().unwrap_or_else(|p| p.into_inner()) = Some(follower);
        Ok(())
    }

    /// New work was queued: idle workers look now.
    pub fn wake_workers(&self) {
        if let Some(w) = self
            .workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            w.wake();
        }
    }

    /// Stops the workers, waiting up to `grace` for jobs in progress (the rest keep their
    /// lease until it lapses and are taken over after a restart).
    pub fn stop_workers(&self, grace: Duration) {
        let workers = self
            .workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(w) = workers {
            w.shutdown(grace);
        }
        let follower = self
            .follower
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(f) = follower {
            f.shutdown();
        }
        // What this node recorded reaches the store before the process ends.
        if let Some(audit) = self.audit.get() {
            audit.flush(grace);
        }
    }

    /// Runs a write through [`http::run_blocking`], one at a time, in arrival order.
    pub async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, Error> + Send + 'static,
    ) -> Result<T, ApiError> {
        let _turn = self.write_queue.lock().await;
        http::run_blocking(f).await
    }

    /// The machine owner's engine (see the field's note).
    pub fn root_engine(&self) -> &Arc<Engine> {
        &self.root
    }

    /// Users, spaces and tokens.
    pub fn directory(&self) -> &quarry_access::Directory {
        &self.directory
    }

    /// The local default space (created on first use).
    pub fn default_space(&self) -> Result<quarry_access::Space, Error> {
        if let Some(s) = self.default_space.get() {
            return Ok(s.clone());
        }
        let space = self.directory.default_space()?;
        Ok(self.default_space.get_or_init(|| space).clone())
    }

    /// The web UI's files.
    pub fn ui_assets(&self) -> &quarry_ui::Assets {
        &self.ui_assets
    }

    /// How requests are authenticated.
    pub fn auth_mode(&self) -> auth::AuthMode {
        self.auth
    }

    /// Whether a graceful shutdown has begun (new requests are refused).
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

/// HTTP listener settings.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port to listen on (0: any free port).
    pub port: u16,
    /// Extra `Host` names accepted besides loopback names and the bind address.
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin`s accepted besides loopback origins (e.g. `https://app.example`).
    pub allowed_origins: Vec<String>,
    /// Largest request body accepted (uploads have their own limit).
    pub max_body_bytes: usize,
    /// Longest a REST request may run (the MCP endpoint's streams are exempt).
    pub request_timeout: Duration,
    /// Longest a client may take to send a request's headers, counted from when the
    /// connection opens or its previous response ended: so also how long an idle
    /// connection stays open.
    pub header_timeout: Duration,
    /// Most connections served at once; one more is answered 503 and closed at once (a
    /// `GET /health` is still answered, from a small reserve).
    pub max_connections: usize,
    /// Most of those from one client address.
    pub max_connections_per_address: usize,
    /// Longest a new connection may stay silent before it is closed (at most
    /// `header_timeout`).
    pub first_byte_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_PORT,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: 4 << 20,
            request_timeout: Duration::from_secs(300),
            header_timeout: Duration::from_secs(30),
            max_connections: 512,
            max_connections_per_address: 128,
            first_byte_timeout: Duration::from_secs(10),
        }
    }
}

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
        .merge(compat::weknora::router())
        .merge(api::hub::router())
        .merge(api::endpoints::router())
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
        .layer(timeout())
        .layer(consistent())
        .route_layer(authenticated(auth::Surface::Rest));
    let metrics = api::metrics::router().route_layer(authenticated(auth::Surface::Rest));
    Router::new()
        .merge(mcp)
        .merge(quka)
        .merge(rest)
        .merge(account)
        .merge(dify)
        .merge(knowledge)
        .merge(chat)
        .merge(metrics)
        .merge(api::qmd::public_router())
        .merge(
            api::oauth::public_router()
                .layer(axum::extract::DefaultBodyLimit::max(64 * 1024))
                .layer(timeout()),
        )
        .merge(
            api::ui::public_router()
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
pub async fn serve_http(
    state: Arc<AppState>,
    opts: HttpOptions,
    shutdown: CancellationToken,
    on_ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind((opts.bind, opts.port)).await?;
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
    state.shutting_down.store(true, Ordering::SeqCst);
    state.runs.cancel();
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
