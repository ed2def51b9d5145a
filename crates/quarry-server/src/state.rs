//! [`AppState`], what every request handler shares (the engine, the hub, chat, the write
//! queue, limits, audit, OAuth). What it needs from the route modules (Quarry's own tool
//! packages) is handed to it by its constructors (`assembly.rs`); it imports only files that
//! never import it (`audit/sources.rs`, `auth/mode.rs`, `http/error.rs`, `http/blocking.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use quarry_core::Error;
use quarry_engine::Engine;
use quarry_hub::BuiltinPackage;
use tokio_util::sync::CancellationToken;

use crate::audit::scheduled_sync;
use crate::auth::AuthMode;
use crate::http::{ApiError, run_blocking};

/// What every request handler shares.
pub struct AppState {
    /// The machine owner's handle: startup, workers, and the base every caller's scoped
    /// handle is made from. Request handlers use [`crate::auth::Caller::engine`] instead.
    root: Arc<Engine>,
    directory: quarry_access::Directory,
    /// The default space, looked up on first use (it is never removed), so an open-mode
    /// request does not query the store for it.
    default_space: std::sync::OnceLock<quarry_access::Space>,
    auth: AuthMode,
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
    /// Quarry's own tool packages (knowledge, approvals), catalogued by the hub when it is
    /// made.
    builtin_packages: Vec<BuiltinPackage>,
    /// Chat (provider client, settings), made on first use without a model.
    chat: std::sync::OnceLock<Arc<quarry_chat::ChatService>>,
    /// Cancelled at shutdown: chats in progress stop (and store what they have).
    runs: CancellationToken,
    /// The web UI's files (embedded, or `QUARRY_UI_DIR` during UI development).
    ui_assets: quarry_ui::Assets,
    /// The audit log's writer, once started ([`AppState::start_audit`]); shared with the
    /// node's source scheduler, which records the syncs it runs.
    audit: Arc<std::sync::OnceLock<Arc<quarry_audit::AuditLog>>>,
    /// Rate limits, once started ([`AppState::start_limits`]).
    limits: std::sync::OnceLock<Arc<quarry_limits::RateLimiter>>,
    /// The origin clients reach this server at (`--public-url`), when set: the OAuth
    /// issuer and resource identifiers. Unset: taken from each request's checked `Host`.
    public_url: std::sync::OnceLock<String>,
    /// Tool policies and approvals: every tool call (MCP, chat) passes it before it runs.
    gate: quarry_policy::Gate,
    /// People's sign-in through identity providers, when configured
    /// ([`AppState::start_sign_in`]).
    sign_in: std::sync::OnceLock<Arc<quarry_oidc::SignIn>>,
}

impl AppState {
    /// The state of a server that authenticates as `auth` says, serves `ui_assets` and
    /// whose hub catalogs `builtin_packages` (the public constructors, `assembly.rs`).
    pub(crate) fn from_parts(
        engine: Engine,
        auth: AuthMode,
        ui_assets: quarry_ui::Assets,
        builtin_packages: Vec<BuiltinPackage>,
    ) -> Arc<Self> {
        let store = engine.store_handle();
        Arc::new(AppState {
            gate: quarry_policy::Gate::new(store.clone(), store),
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
            builtin_packages,
            chat: std::sync::OnceLock::new(),
            runs: CancellationToken::new(),
            ui_assets,
            audit: Arc::new(std::sync::OnceLock::new()),
            limits: std::sync::OnceLock::new(),
            public_url: std::sync::OnceLock::new(),
            sign_in: std::sync::OnceLock::new(),
        })
    }

    /// Sets the origin clients reach this server at (`https://kb.example.com`: scheme,
    /// host, optional port, nothing else). Behind a proxy or load balancer every node must
    /// be given the same one: OAuth clients compare it as a string.
    pub fn set_public_url(&self, url: &str) -> Result<(), Error> {
        let origin = checked_origin(url)?;
        self.public_url
            .set(origin)
            .map_err(|_| Error::Conflict("the public URL is already set".into()))
    }

    /// The origin set by [`AppState::set_public_url`].
    pub(crate) fn public_url(&self) -> Option<&str> {
        self.public_url.get().map(String::as_str)
    }

    /// Sets the hub's options and connects the registered upstreams (needs a Tokio
    /// runtime). Without this, the hub has default options and connects upstreams only as
    /// they are registered.
    pub fn start_hub(&self, opts: quarry_hub::HubOptions) -> Result<(), Error> {
        let hub = quarry_hub::Hub::new(
            self.root.store_handle(),
            self.builtin_packages.clone(),
            opts,
        );
        if self.hub.set(hub).is_err() {
            return Err(Error::Conflict("the hub is already running".into()));
        }
        self.hub().start()
    }

    /// Lets people sign in with the identity providers of `config` (the web UI and the
    /// OAuth consent page). Only a server that requires tokens has anyone to sign in. Reads
    /// the store (whether mapped spaces exist): call it off the async threads.
    pub fn start_sign_in(&self, config: quarry_oidc::OidcConfig) -> Result<(), Error> {
        if config.is_empty() {
            return Ok(());
        }
        if self.auth != AuthMode::Token {
            return Err(Error::invalid(
                "signing in with an identity provider needs a server that requires access tokens (--auth token)",
            ));
        }
        // A mapping to a space that does not exist is skipped until it does: say so now.
        for p in &config.providers {
            for rule in &p.rules {
                if let Err(Error::NotFound(_)) = self.directory.space(&rule.space) {
                    tracing::warn!(
                        provider = %p.name,
                        group = %rule.group,
                        space = %rule.space,
                        "a group rule names a space that does not exist: it is skipped until the space is made"
                    );
                }
            }
        }
        let service = quarry_oidc::SignIn::new(config).map_err(Error::invalid)?;
        self.sign_in
            .set(Arc::new(service))
            .map_err(|_| Error::Conflict("sign-in is already configured".into()))
    }

    /// People's sign-in through identity providers, when configured.
    pub(crate) fn sign_in(&self) -> Option<&Arc<quarry_oidc::SignIn>> {
        self.sign_in.get()
    }

    /// Tool policies and approvals.
    pub fn gate(&self) -> &quarry_policy::Gate {
        &self.gate
    }

    /// The tool hub.
    pub fn hub(&self) -> &Arc<quarry_hub::Hub> {
        self.hub.get_or_init(|| {
            quarry_hub::Hub::new(
                self.root.store_handle(),
                self.builtin_packages.clone(),
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
            .map_err(|e| Error::invalid(e.to_string()))?;
        let service = quarry_chat::ChatService::new(
            provider,
            settings,
            self.root.store_handle(),
            self.hub().clone(),
            self.gate.clone(),
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
                self.gate.clone(),
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
        opts.source_sync
            .get_or_insert(quarry_queue::SOURCE_SYNC_POLL);
        // Folder sources that sync on change are watched where their folder exists.
        opts.source_watch
            .get_or_insert(quarry_queue::SOURCE_WATCH_POLL);
        if opts.on_source_sync.is_none() {
            // Scheduled syncs go in the audit log like those asked for over REST (the log may
            // start after the workers: it is looked up at each sync).
            let audit = self.audit.clone();
            let store = self.root.store_handle();
            let directory = self.directory.clone();
            opts.on_source_sync = Some(quarry_queue::SourceSyncHook(Arc::new(
                move |id: &str, outcome: Result<&quarry_engine::SyncReport, &Error>| {
                    if let Some(log) = audit.get() {
                        scheduled_sync(log, store.as_ref(), &directory, id, outcome);
                    }
                },
            )));
        }
        if opts.on_model_use.is_none() {
            // Background embedding's requests to a remote model count for the job's space.
            let audit = self.audit.clone();
            let store = self.root.store_handle();
            let directory = self.directory.clone();
            opts.on_model_use =
                Some(quarry_queue::ModelUseHook(
                    Arc::new(
                        move |job: &quarry_engine::Job,
                              used: &[(
                            quarry_engine::ModelPurpose,
                            quarry_engine::ModelCount,
                        )]| {
                            crate::audit::background_model_use(
                                audit.get().map(|a| a.as_ref()),
                                store.as_ref(),
                                &directory,
                                job,
                                used,
                            );
                        },
                    ),
                ));
        }
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

    /// Runs a write through [`run_blocking`], one at a time, in arrival order.
    pub async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, Error> + Send + 'static,
    ) -> Result<T, ApiError> {
        let _turn = self.write_queue.lock().await;
        run_blocking(f).await
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
    pub fn auth_mode(&self) -> AuthMode {
        self.auth
    }

    /// Whether a graceful shutdown has begun (new requests are refused).
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// The listener stopped: refuse new requests, cancel long runs (chat streams, waits).
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.runs.cancel();
    }
}

/// `url` as an origin (`--public-url`), or why it is not one.
fn checked_origin(url: &str) -> Result<String, Error> {
    Ok(quarry_oauth::Endpoints::from_public_url(url)?
        .origin()
        .to_owned())
}
