//! The tool hub (SPEC §1 "Tool, package, catalog", "View"; §2.4): upstream MCP servers
//! reached through rmcp's client, the catalog of every tool in packages, views that expose
//! exactly what an endpoint's URL selects, custom HTTP tools behind an SSRF guard.
//!
//! Everything an owner registers lives in the store ([`quarry_store::HubStore`]); the hub
//! holds only what cannot be stored — live connections — and caches derived from the store
//! (one [`Catalog`] per owner, rebuilt when the owner's generation changes, so several nodes
//! over one database agree). No per-request state is kept here: a view is computed from a
//! request by [`View::compute`].

pub mod catalog;
pub mod custom;
pub mod endpoint;
pub mod era;
pub mod names;
mod package;
pub mod search;
pub mod sse;
pub mod ssrf;
pub mod upstream;
pub mod view;
pub mod web;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use quarry_core::MACHINE_OWNER;
use quarry_core::{Error, Principal, Result, now_millis};
use quarry_store::{PackageRow, Store, UpstreamRow};
use rmcp::model::{CallToolResult, JsonObject};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use catalog::{BuiltinPackage, Catalog, CatalogTool, KNOWLEDGE_PACKAGE, Package, PackageKind};
pub use endpoint::EndpointSelection;
pub use names::Selection;
pub use ssrf::NetPolicy;
pub use upstream::{CallError, Health, ProgressSink, TransportKind};
pub use view::{DefaultView, View, ViewError};
pub use web::{WEB_PACKAGE, WebBackend, WebSearchOptions};

use catalog::{Manifest, package_rows};
use upstream::{ConnectSpec, Connection, UpstreamOptions, UpstreamSecrets};

/// Default cap on the tools of one endpoint (Cursor stops at 40).
pub const DEFAULT_MAX_TOOLS: usize = 32;

/// How long enabling an upstream (and the CLI's `hub add`, whose process holds the only
/// connection) waits for its first discovery before answering with the status it has
/// (`connecting` for a slow or hanging upstream, which keeps trying in the background).
/// Registration over HTTP does not wait at all: it answers `connecting` and clients poll.
pub const ANSWER_GRACE: Duration = Duration::from_secs(5);

/// Hub settings, fixed at start.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// Most tools one endpoint may expose.
    pub max_tools: usize,
    /// Longest wire name.
    pub wire_name_max: usize,
    /// Where users' HTTP upstreams and custom tools may connect.
    pub net: NetPolicy,
    /// Whether users (not only the machine's owner) may register stdio upstreams, which
    /// run commands on the server.
    pub users_may_run_commands: bool,
    /// The built-in `web` package (`web.web_search`) and its backend; `None` leaves it out.
    /// The server sets it from [`WebSearchOptions::from_lookup`].
    pub web: Option<WebSearchOptions>,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            max_tools: DEFAULT_MAX_TOOLS,
            wire_name_max: names::DEFAULT_WIRE_NAME_MAX,
            net: NetPolicy::default(),
            users_may_run_commands: false,
            web: None,
        }
    }
}

/// Whether `caller` may use catalogued tool `t` (its token's tool scope, and read-only
/// tokens' rule: tools annotated `readOnlyHint: true`, or named one by one). Every listing,
/// view, call and chat round applies it, so an out-of-scope tool is as unknown as a missing
/// one.
pub fn may_use(caller: &Principal, t: &CatalogTool) -> bool {
    caller.may_use_tool(&t.package, &t.full_name, annotated_read_only(&t.tool))
}

/// Whether a client of `caller`'s can call `t` now: switched on, of an available server,
/// callable without tasks, and allowed ([`may_use`]) — what the catalog lists and a
/// server's `usable_tool_count` counts.
pub fn usable(caller: &Principal, t: &CatalogTool) -> bool {
    t.enabled && t.available && !t.requires_task && may_use(caller, t)
}

/// Whether a tool's source annotates it read-only (`readOnlyHint: true`); a tool without
/// annotations may write. The rule [`may_use`] applies, for tools served outside the
/// catalog too (the QukaAI endpoint's knowledge tools).
pub fn annotated_read_only(tool: &rmcp::model::Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

/// [`may_use`] for a custom tool's row (custom tools carry no annotations: read-only tokens
/// reach one only when their scope names it).
fn may_use_custom(caller: &Principal, row: &quarry_store::CustomToolRow) -> bool {
    caller.may_use_tool(
        CUSTOM_PACKAGE,
        &names::catalog_name(CUSTOM_PACKAGE, &row.name),
        false,
    )
}

/// `Forbidden` unless the caller may change the hub's configuration (register, toggle,
/// create or delete servers and tools): not a read-only token or a viewer's, and not a token
/// limited to some tools — a toggle or a server is its user's, shared by all their tokens,
/// so a scoped token changing one would act outside its scope. Checked before any lookup,
/// so the answer is the same whether the named tool exists or not.
pub fn require_write(caller: &Principal) -> Result<()> {
    if caller.read_only() {
        return Err(Error::Forbidden(
            "this access token is read-only (a read-only token, or a viewer's): it cannot change tools or MCP servers".into(),
        ));
    }
    if caller.identity.as_ref().is_some_and(|i| i.tools.is_some()) {
        return Err(Error::Forbidden(
            "this access token is limited to some tools (--tools): it cannot change tools or MCP servers".into(),
        ));
    }
    Ok(())
}

/// A request to register an upstream (`POST /api/v1/mcp/servers`, `quarry hub add`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterUpstream {
    #[serde(default)]
    /// Display name (seed: `name`).
    pub name: String,
    /// `stdio`, `http` or `sse` (seed 003's `transport_type`).
    #[serde(default)]
    pub transport_type: String,
    /// The command line (stdio) or URL.
    #[serde(default)]
    pub config: String,
    /// The MCP Registry's `server.json` (schema 2025-12-11): a launch spec that stands in for
    /// `name`, `transport_type`, `config` and `args` when they are not given.
    #[serde(default)]
    pub server_json: Option<Value>,
    #[serde(default)]
    /// The command's arguments (stdio).
    pub args: Vec<String>,
    #[serde(default)]
    /// The command's working directory (stdio).
    pub cwd: Option<String>,
    #[serde(default)]
    /// Environment variables for the child (stdio); stored as secrets.
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    /// Headers sent with every request (HTTP, SSE); stored as secrets.
    pub headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    /// Whether to connect it (default: yes).
    pub enabled: Option<bool>,
    #[serde(default)]
    /// The package its tools belong to (default: from the name).
    pub package: Option<String>,
    #[serde(default)]
    /// Catalog category.
    pub category: Option<String>,
    #[serde(default)]
    /// Catalog tags.
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    /// What the server's tools are for, in words.
    pub description: Option<String>,
    /// Seed 002's `manifest.json`, describing the package and its tools.
    #[serde(default)]
    pub manifest: Option<Value>,
    #[serde(default)]
    /// Longest tool call, in seconds.
    pub call_timeout_secs: Option<u64>,
    #[serde(default)]
    /// Longest connection attempt, in seconds.
    pub connect_timeout_secs: Option<u64>,
    #[serde(default)]
    /// Tool calls in flight at once.
    pub max_concurrency: Option<usize>,
}

/// A change to a registered upstream (`PATCH /api/v1/mcp/servers/{id}`): each field given
/// replaces the stored one; `env` and `headers` replace the whole set. The package, and
/// with it the tools' names and tokens' scopes, stays.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamPatch {
    /// Display name.
    pub name: Option<String>,
    /// `stdio`, `http` or `sse`; another transport clears arguments, environment and headers
    /// not given with it.
    pub transport_type: Option<String>,
    /// The command line (stdio) or URL.
    pub config: Option<String>,
    /// The command's arguments (stdio).
    pub args: Option<Vec<String>>,
    /// The command's working directory (stdio); empty for none.
    pub cwd: Option<String>,
    /// Environment variables for the child (stdio).
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// Headers sent with every request (HTTP, SSE).
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    /// Whether it is connected.
    pub enabled: Option<bool>,
    /// Longest tool call, in seconds.
    pub call_timeout_secs: Option<u64>,
    /// Longest connection attempt, in seconds.
    pub connect_timeout_secs: Option<u64>,
    /// Tool calls in flight at once.
    pub max_concurrency: Option<usize>,
}

/// A checked launch specification ([`Hub::launch`]).
struct Launch {
    transport: TransportKind,
    config: String,
    options: UpstreamOptions,
    secrets: UpstreamSecrets,
}

/// An upstream's display name, trimmed: 1–100 characters.
fn upstream_name(raw: &str) -> Result<String> {
    let name = raw.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(Error::InvalidInput("name must be 1-100 characters".into()));
    }
    Ok(name.to_owned())
}

/// An upstream row's stored options and secrets.
fn stored_settings(row: &UpstreamRow) -> Result<(UpstreamOptions, UpstreamSecrets)> {
    let options = serde_json::from_str(&row.options)
        .map_err(|e| Error::Storage(format!("upstream '{}' options: {e}", row.name)))?;
    let secrets = serde_json::from_str(&row.secrets)
        .map_err(|e| Error::Storage(format!("upstream '{}' secrets: {e}", row.name)))?;
    Ok((options, secrets))
}

/// A stored JSON column's text.
fn json_text(value: &impl Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Storage(e.to_string()))
}

/// An upstream as listed: seed 003's `MCPServer` fields, Quarry's options (secret values
/// never included) and the connection's health.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamInfo {
    /// UUID.
    pub id: String,
    /// Display name.
    pub name: String,
    /// The package its tools belong to.
    pub package: String,
    /// `stdio`, `http` or `sse`.
    pub transport_type: String,
    /// The command line, or the URL with credentials masked.
    pub config: String,
    /// The command's arguments (stdio).
    pub args: Vec<String>,
    /// The command's working directory (stdio).
    pub cwd: Option<String>,
    /// Names of the environment variables set for the child (values are never shown).
    pub env: Vec<String>,
    /// Names of the headers sent (values are never shown).
    pub headers: Vec<String>,
    /// Whether the hub connects it.
    pub enabled: bool,
    /// Longest tool call, in seconds.
    pub call_timeout_secs: u64,
    /// Longest connection attempt, in seconds.
    pub connect_timeout_secs: u64,
    /// Tool calls in flight at once.
    pub max_concurrency: usize,
    /// Catalog category.
    pub category: String,
    /// Catalog tags.
    pub tags: Vec<String>,
    /// What its tools are for, in words.
    pub description: String,
    /// Where the package's description came from.
    pub source: String,
    #[serde(flatten)]
    /// The connection's state.
    pub health: Health,
    /// Tools discovered (those the caller may use), as `tools_cache` lists them.
    pub tool_count: usize,
    /// Of those, the ones a client can call now — switched on, available, not needing
    /// tasks: what the catalog lists and the web UI's card counts.
    pub usable_tool_count: usize,
    /// Tools the package's manifest declares that the upstream does not offer (not exposed).
    pub missing_tools: Vec<String>,
    /// The discovered tools as listed (seed 003's `tools_cache`): the upstream's definitions,
    /// with a manifest's description and input schema where it gives them.
    pub tools_cache: Vec<Value>,
    /// ISO 8601.
    pub created_at: String,
    /// ISO 8601 of the last change.
    pub updated_at: String,
}

/// The package every owner's custom HTTP tools belong to.
pub const CUSTOM_PACKAGE: &str = "custom";

/// A custom HTTP tool as listed: its specification with header *names* only.
#[derive(Debug, Clone, Serialize)]
pub struct CustomToolInfo {
    /// UUID.
    pub id: String,
    /// The tool's name, unique per owner.
    pub name: String,
    /// `custom.<name>`.
    pub full_name: String,
    /// What the tool does (shown to models).
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
    /// The URL it requests (`{{arg}}` placeholders filled from the arguments).
    pub http_url: String,
    /// The HTTP method.
    pub http_method: String,
    /// Names of the headers sent (values are never shown).
    pub http_headers: Vec<String>,
    /// The request body with `{{arg}}` placeholders, if any.
    pub http_body_template: Option<String>,
    /// Longest request, in seconds (default: the hub's).
    pub timeout_secs: Option<u64>,
    /// Largest response kept, in bytes (default: the hub's).
    pub max_response_bytes: Option<u64>,
    /// Whether it is offered.
    pub enabled: bool,
    /// Always `http`.
    pub tool_type: &'static str,
    /// ISO 8601.
    pub created_at: String,
    /// ISO 8601 of the last change.
    pub updated_at: String,
}

/// Masks a URL's password and the values of query parameters that look like credentials.
pub fn mask_url(raw: &str) -> String {
    let Ok(mut url) = url::Url::parse(raw) else {
        return raw.to_owned();
    };
    if url.password().is_some() {
        let _ = url.set_password(Some("****"));
    }
    let secretish = |k: &str| {
        let k = k.to_ascii_lowercase();
        [
            "key",
            "token",
            "secret",
            "auth",
            "password",
            "sig",
            "credential",
        ]
        .iter()
        .any(|s| k.contains(s))
    };
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if secretish(&k) {
                    "****".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

fn iso(ms: i64) -> String {
    quarry_core::iso8601_millis(ms)
}

/// The hub: one per server process.
pub struct Hub {
    store: Arc<dyn Store>,
    builtin: Vec<BuiltinPackage>,
    opts: HubOptions,
    /// Live connections by upstream id (infrastructure, like a connection pool: what a
    /// caller may reach is decided by the store and the view, never by this map).
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    /// Catalog snapshots by owner, each tagged with the generation it was built from.
    catalogs: Mutex<HashMap<String, Arc<Catalog>>>,
    /// The `web` package's tool, when [`HubOptions::web`] is set.
    web: Option<web::WebSearch>,
    /// Set by [`Hub::shutdown`]: the follower thread exits.
    stopped: std::sync::atomic::AtomicBool,
}

/// How often a node looks for hub changes made elsewhere without being notified.
pub const RECONCILE_POLL: Duration = Duration::from_secs(5);
/// A connection whose upstream has no row is stopped once it is older than this (an
/// upstream deleted on another node; a younger one may be mid-registration here).
const DELETED_AFTER: Duration = Duration::from_secs(30);

/// The hub follower's loop: until the hub is dropped, stop what other nodes disabled.
fn follow_hub_changes(hub: &std::sync::Weak<Hub>, store: &dyn Store) {
    let mut changes = quarry_store::ChangeWaiter::new(quarry_store::Channel::Hub);
    loop {
        if let Err(e) = changes.wait(store, RECONCILE_POLL) {
            tracing::warn!(error = %e, "lost hub notifications; polling until they are back");
        }
        let Some(hub) = hub.upgrade() else {
            return;
        };
        if hub.stopped.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        match hub.reconcile() {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                stopped = n,
                "stopped upstreams disabled or deleted on another node"
            ),
            Err(e) => tracing::warn!(error = %e, "cannot read the hub's registrations"),
        }
    }
}

impl Hub {
    /// A hub over `store` with the server's `builtin` packages; with [`HubOptions::web`] set,
    /// the built-in `web` package is added (unless `builtin` already has one).
    pub fn new(store: Arc<dyn Store>, builtin: Vec<BuiltinPackage>, opts: HubOptions) -> Arc<Hub> {
        let mut builtin = builtin;
        let web = opts.web.clone().map(web::WebSearch::new);
        if web.is_some() && !builtin.iter().any(|b| b.id == WEB_PACKAGE) {
            builtin.push(web::web_package());
        }
        Arc::new(Hub {
            store,
            builtin,
            opts,
            connections: Mutex::new(HashMap::new()),
            catalogs: Mutex::new(HashMap::new()),
            web,
            stopped: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The options the hub runs with.
    pub fn options(&self) -> &HubOptions {
        &self.opts
    }

    /// Connects every enabled upstream of every owner (in the background), and follows
    /// hub changes other nodes make ([`Hub::reconcile`] on every `quarry_hub` notification,
    /// and every [`RECONCILE_POLL`] without one).
    pub fn start(self: &Arc<Self>) -> Result<()> {
        for row in self.store.upstreams(None)? {
            if row.enabled {
                self.connect(&row)?;
            }
        }
        let hub = Arc::downgrade(self);
        let store = self.store.clone();
        std::thread::Builder::new()
            .name("quarry-hub-follower".into())
            .spawn(move || follow_hub_changes(&hub, store.as_ref()))
            .map_err(|e| Error::Storage(format!("cannot start the hub follower: {e}")))?;
        Ok(())
    }

    /// Stops the connections of upstreams that were disabled, edited or deleted since they
    /// were opened (by another node: this node's own changes stop them at once); returns how
    /// many stopped. Their child processes exit with them.
    pub fn reconcile(&self) -> Result<usize> {
        let rows: HashMap<String, (bool, i64)> = self
            .store
            .upstreams(None)?
            .into_iter()
            .map(|r| (r.id, (r.enabled, r.updated_at)))
            .collect();
        let gone: Vec<Arc<Connection>> = {
            let mut conns = self.connections.lock().unwrap_or_else(|p| p.into_inner());
            let ids: Vec<String> = conns
                .iter()
                .filter(|(id, conn)| match rows.get(*id) {
                    // Edited since it was opened: the next use connects the stored settings.
                    Some((enabled, revision)) => !enabled || *revision != conn.revision(),
                    // A registration opens its connection before its row commits: a young
                    // connection without a row is one being registered, not one deleted.
                    None => conn.age() > DELETED_AFTER,
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| conns.remove(id)).collect()
        };
        for c in &gone {
            c.stop();
        }
        Ok(gone.len())
    }

    /// Stops every connection (children are killed).
    pub fn shutdown(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let conns: Vec<Arc<Connection>> = self
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, c)| c)
            .collect();
        for c in conns {
            c.stop();
        }
    }

    fn connection(&self, id: &str) -> Option<Arc<Connection>> {
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    fn connect(self: &Arc<Self>, row: &UpstreamRow) -> Result<Arc<Connection>> {
        let (options, secrets) = stored_settings(row)?;
        let transport = TransportKind::parse(&row.transport)
            .ok_or_else(|| Error::Storage(format!("upstream '{}': bad transport", row.name)))?;
        let spec = ConnectSpec {
            name: row.name.clone(),
            transport,
            config: row.config.clone(),
            options,
            secrets,
            net: (row.owner != MACHINE_OWNER).then(|| self.opts.net.clone()),
            revision: row.updated_at,
        };
        let hub = Arc::downgrade(self);
        let owner = row.owner.clone();
        let package = row.package.clone();
        // Discovery finishes on the connection's async task; the store write it causes runs
        // on the blocking pool like every other store call, and the connection awaits it
        // before it reports `ready`.
        let on_discovered: upstream::OnDiscovered = Arc::new(
            move |found: &upstream::Discovered| {
                let hub = hub.upgrade()?;
                let (owner, package) = (owner.clone(), package.clone());
                let found = found.clone();
                Some(tokio::task::spawn_blocking(move || {
                    quarry_store::thread_guard::allow_blocking(|| {
                        if let Err(e) = hub.write_discovered(&owner, &package, &found) {
                            tracing::warn!(package = %package, "cannot store discovered tools: {e}");
                        }
                    })
                }))
            },
        );
        let conn = Connection::start(spec, on_discovered);
        if let Some(old) = self
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(row.id.clone(), conn.clone())
        {
            old.stop();
        }
        Ok(conn)
    }

    /// Connects an enabled upstream this process has no connection for yet: the connection
    /// and how long to wait for its first discovery before using it.
    fn connect_registered(
        self: &Arc<Self>,
        owner: &str,
        id: &str,
    ) -> std::result::Result<(Arc<Connection>, Duration), CallError> {
        let row = self
            .store
            .upstream(owner, id)
            .map_err(|e| CallError::Unavailable(e.to_string()))?
            .filter(|r| r.enabled)
            .ok_or_else(|| CallError::Unavailable("the MCP server is disabled".into()))?;
        let conn = self
            .connect(&row)
            .map_err(|e| CallError::Unavailable(e.to_string()))?;
        let options: UpstreamOptions = serde_json::from_str(&row.options).unwrap_or_default();
        Ok((conn, Duration::from_secs(options.connect_timeout_secs + 5)))
    }

    fn disconnect(&self, id: &str) {
        if let Some(c) = self
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            c.stop();
        }
    }

    fn package_row(&self, owner: &str, id: &str) -> Result<Option<PackageRow>> {
        Ok(self.store.packages(owner)?.into_iter().find(|p| p.id == id))
    }

    fn write_discovered(
        &self,
        owner: &str,
        package: &str,
        found: &upstream::Discovered,
    ) -> Result<()> {
        let Some(mut pkg) = self.package_row(owner, package)? else {
            return Ok(()); // deleted meanwhile
        };
        let manifest = pkg
            .manifest
            .as_deref()
            .and_then(|m| serde_json::from_str::<Value>(m).ok())
            .and_then(|v| Manifest::parse(&v).ok());
        let now = now_millis();
        let rows = package_rows(
            owner,
            &pkg,
            manifest.as_ref(),
            Some((&found.tools, &found.raw)),
            now,
        );
        pkg.updated_at = now;
        pkg.surface = serde_json::to_string(&found.surface).ok();
        self.store.replace_package(&pkg, &rows)
    }

    /// The owner's catalog (built-in packages first), rebuilt only when it changed.
    pub fn catalog(&self, owner: &str) -> Result<Arc<Catalog>> {
        let generation = self.store.hub_generation(owner)?;
        if let Some(c) = self
            .catalogs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(owner)
            .filter(|c| c.generation == generation)
        {
            return Ok(c.clone());
        }
        let catalog = Arc::new(Catalog::build(
            generation,
            &self.builtin,
            self.store.packages(owner)?,
            self.store.catalog_tools(owner)?,
            &self.store.disabled_tools(owner)?,
            &self
                .store
                .upstreams(Some(owner))?
                .into_iter()
                .filter(|u| !u.enabled)
                .map(|u| u.id)
                .collect::<Vec<_>>(),
            self.opts.wire_name_max,
        ));
        self.catalogs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(owner.to_owned(), catalog.clone());
        Ok(catalog)
    }

    /// Registers an upstream and starts connecting it in the background: the answer comes
    /// at once, usually with status `connecting` (a hanging upstream must not hold the
    /// request); the server list then shows `ready` with its tools, or `error` with the
    /// reason. [`Hub::connecting`] gives what async code awaits for the first discovery where
    /// a caller needs it.
    pub fn register(
        self: &Arc<Self>,
        caller: &Principal,
        req: RegisterUpstream,
    ) -> Result<UpstreamInfo> {
        require_write(caller)?;
        let mut req = req;
        if let Some(sj) = req.server_json.take() {
            apply_server_json(&mut req, &sj)?;
        }
        let name = upstream_name(&req.name)?;
        let launch = self.launch(caller, &req)?;
        let manifest = match &req.manifest {
            Some(v) => Some(Manifest::parse(v)?),
            None => None,
        };
        let manifest_id = manifest.as_ref().and_then(|m| m.id.as_deref());
        if let (Some(package), Some(id)) = (req.package.as_deref(), manifest_id)
            && package != id
        {
            return Err(Error::InvalidInput(format!(
                "package '{package}' and the manifest's id '{id}' differ; give one of them, or the same id in both"
            )));
        }
        let package_id = catalog::package_id(req.package.as_deref().or(manifest_id), &name)?;
        let category = req
            .category
            .clone()
            .or_else(|| manifest.as_ref().and_then(|m| m.category.clone()))
            .map(|c| c.trim().to_owned())
            .unwrap_or_else(|| "uncategorized".into());
        // A category is a catalog route (`/api/catalog/{category}`): it needs a name.
        if category.is_empty() {
            return Err(Error::InvalidInput(
                "category must not be empty (leave it out for 'uncategorized')".into(),
            ));
        }
        if self.builtin.iter().any(|b| b.id == package_id) || package_id == CUSTOM_PACKAGE {
            return Err(Error::Conflict(format!(
                "package '{package_id}' is built in; choose another name or package"
            )));
        }
        let now = now_millis();
        let id = uuid_v4();
        let row = UpstreamRow {
            id: id.clone(),
            owner: caller.owner_key().to_owned(),
            name: name.clone(),
            package: package_id.clone(),
            transport: launch.transport.as_str().into(),
            config: launch.config,
            options: json_text(&launch.options)?,
            secrets: json_text(&launch.secrets)?,
            enabled: req.enabled.unwrap_or(true),
            created_at: now,
            updated_at: now,
        };
        let tags: Vec<String> = req
            .tags
            .clone()
            .or_else(|| manifest.as_ref().map(|m| m.tags.clone()))
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.trim().replace('\n', " "))
            .filter(|t| !t.is_empty())
            .collect();
        let package = PackageRow {
            owner: caller.owner_key().to_owned(),
            id: package_id,
            name: manifest
                .as_ref()
                .and_then(|m| m.name.clone())
                .unwrap_or_else(|| name.clone()),
            description: req
                .description
                .clone()
                .or_else(|| manifest.as_ref().and_then(|m| m.description.clone()))
                .unwrap_or_default(),
            category,
            tags,
            kind: "upstream".into(),
            upstream_id: Some(id.clone()),
            source: if manifest.is_some() {
                "manifest"
            } else {
                "legacy"
            }
            .into(),
            schema_version: manifest
                .as_ref()
                .and_then(|m| m.manifest_schema_version.clone())
                .unwrap_or_else(|| if manifest.is_some() { "v2" } else { "legacy" }.into()),
            manifest: req.manifest.as_ref().map(Value::to_string),
            updated_at: now,
            surface: None,
        };
        let manifest_rows =
            package_rows(caller.owner_key(), &package, manifest.as_ref(), None, now);
        self.store.insert_upstream(&row, &package)?;
        if !manifest_rows.is_empty() {
            self.store.replace_package(&package, &manifest_rows)?;
        }
        if row.enabled {
            self.connect(&row)?;
        }
        self.upstream(caller, &id)
    }

    /// How to start an upstream, checked: the transport, command or URL, arguments,
    /// secrets and limits of a registration or an edit.
    fn launch(&self, caller: &Principal, req: &RegisterUpstream) -> Result<Launch> {
        let transport = TransportKind::parse(&req.transport_type).ok_or_else(|| {
            Error::InvalidInput(format!(
                "unknown transport_type '{}': use stdio, http or sse",
                req.transport_type
            ))
        })?;
        let config = req.config.trim().to_owned();
        match transport {
            TransportKind::Stdio => {
                if !caller.is_machine_owner() && !self.opts.users_may_run_commands {
                    return Err(Error::Forbidden(
                        "stdio MCP servers run commands on the server: only its owner may register them (start the server with --hub-allow-commands to let users)".into(),
                    ));
                }
                upstream::command_of(
                    &config,
                    &UpstreamOptions {
                        args: req.args.clone(),
                        ..Default::default()
                    },
                )
                .map_err(|e| Error::InvalidInput(format!("config: {e}")))?;
                if !req.headers.is_empty() {
                    return Err(Error::InvalidInput(
                        "headers apply to http and sse servers, not stdio".into(),
                    ));
                }
            }
            TransportKind::Http | TransportKind::Sse => {
                let url = url::Url::parse(&config)
                    .map_err(|e| Error::InvalidInput(format!("config must be a URL: {e}")))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(Error::InvalidInput(
                        "config must be an http:// or https:// URL".into(),
                    ));
                }
                if !caller.is_machine_owner() {
                    ssrf::check_url(&self.opts.net, &url)
                        .map_err(|e| Error::InvalidInput(e.to_string()))?;
                }
                if !req.env.is_empty() || !req.args.is_empty() {
                    return Err(Error::InvalidInput(
                        "env and args apply to stdio servers only".into(),
                    ));
                }
            }
        }
        for k in req.env.keys() {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(Error::InvalidInput(format!(
                    "invalid environment variable name '{k}'"
                )));
            }
        }
        for (k, v) in &req.headers {
            if http::HeaderName::from_bytes(k.as_bytes()).is_err()
                || http::HeaderValue::from_str(v).is_err()
            {
                return Err(Error::InvalidInput(format!("invalid header '{k}'")));
            }
        }
        let call_timeout = req.call_timeout_secs.unwrap_or(60);
        let connect_timeout = req.connect_timeout_secs.unwrap_or(30);
        let concurrency = req.max_concurrency.unwrap_or(16);
        if !(1..=3600).contains(&call_timeout)
            || !(1..=600).contains(&connect_timeout)
            || !(1..=256).contains(&concurrency)
        {
            return Err(Error::InvalidInput(
                "call_timeout_secs must be 1-3600, connect_timeout_secs 1-600, max_concurrency 1-256".into(),
            ));
        }
        let options = UpstreamOptions {
            args: req.args.clone(),
            cwd: req.cwd.clone(),
            env_keys: req.env.keys().cloned().collect(),
            header_names: req.headers.keys().cloned().collect(),
            call_timeout_secs: call_timeout,
            connect_timeout_secs: connect_timeout,
            max_concurrency: concurrency,
        };
        let secrets = UpstreamSecrets {
            env: req.env.clone(),
            headers: req.headers.clone(),
        };
        Ok(Launch {
            transport,
            config,
            options,
            secrets,
        })
    }

    /// Changes an upstream's settings (the fields `patch` gives; the rest stay), checked as
    /// a registration is, and reconnects it with them: at once here, and on other nodes when
    /// their hub follower sees the edit. Returns the upstream's id (`key` may be its old
    /// name) and, when enabled, the [`Connecting`] async code awaits before reading it again.
    pub fn update_upstream(
        self: &Arc<Self>,
        caller: &Principal,
        key: &str,
        patch: UpstreamPatch,
    ) -> Result<(String, Option<Connecting>)> {
        require_write(caller)?;
        let mut row = self.row(caller, key)?;
        let (options, secrets) = stored_settings(&row)?;
        // Another transport starts from a clean slate: stdio's arguments and environment
        // mean nothing to a URL, nor headers to a command.
        let new_transport = patch
            .transport_type
            .as_deref()
            .is_some_and(|t| t.trim() != row.transport);
        let (args, cwd, env, headers) = if new_transport {
            Default::default()
        } else {
            (options.args, options.cwd, secrets.env, secrets.headers)
        };
        let req = RegisterUpstream {
            name: patch.name.unwrap_or_else(|| row.name.clone()),
            transport_type: patch
                .transport_type
                .unwrap_or_else(|| row.transport.clone()),
            config: patch.config.unwrap_or_else(|| row.config.clone()),
            args: patch.args.unwrap_or(args),
            cwd: match patch.cwd {
                Some(dir) if dir.trim().is_empty() => None,
                Some(dir) => Some(dir),
                None => cwd,
            },
            env: patch.env.unwrap_or(env),
            headers: patch.headers.unwrap_or(headers),
            call_timeout_secs: Some(patch.call_timeout_secs.unwrap_or(options.call_timeout_secs)),
            connect_timeout_secs: Some(
                patch
                    .connect_timeout_secs
                    .unwrap_or(options.connect_timeout_secs),
            ),
            max_concurrency: Some(patch.max_concurrency.unwrap_or(options.max_concurrency)),
            ..Default::default()
        };
        let name = upstream_name(&req.name)?;
        let launch = self.launch(caller, &req)?;
        row.name = name;
        row.transport = launch.transport.as_str().into();
        row.config = launch.config;
        row.options = json_text(&launch.options)?;
        row.secrets = json_text(&launch.secrets)?;
        row.enabled = patch.enabled.unwrap_or(row.enabled);
        // Strictly newer, so a node holding a connection of the old settings sees the edit
        // even within the same millisecond as the last one.
        row.updated_at = now_millis().max(row.updated_at + 1);
        self.store.update_upstream(&row)?;
        // Connecting replaces (and stops) the connection of the old settings.
        let connecting = if row.enabled {
            Some(Connecting(self.connect(&row)?))
        } else {
            self.disconnect(&row.id);
            None
        };
        Ok((row.id, connecting))
    }

    /// The live connection of an upstream in this process, if any: what async code awaits
    /// ([`Connecting::discovered`]) before reading the upstream again.
    pub fn connecting(&self, caller: &Principal, id: &str) -> Result<Option<Connecting>> {
        let row = self.row(caller, id)?;
        Ok(self.connection(&row.id).map(Connecting))
    }

    /// An upstream by id, name or package id.
    pub fn find_upstream(&self, caller: &Principal, key: &str) -> Result<UpstreamInfo> {
        let row = self.row(caller, key)?;
        let catalog = self.catalog(caller.owner_key())?;
        Ok(self.info(caller, &row, &catalog))
    }

    /// The caller's upstream by id, or by name or package id (both unique per owner).
    fn row(&self, caller: &Principal, key: &str) -> Result<UpstreamRow> {
        let found = match self.store.upstream(caller.owner_key(), key)? {
            Some(row) => Some(row),
            None => self
                .store
                .upstreams(Some(caller.owner_key()))?
                .into_iter()
                .find(|r| r.name == key || r.package == key),
        };
        // A server the token's tool scope does not reach is as missing as one never added.
        found
            .filter(|r| caller.reaches_package(&r.package))
            .ok_or_else(|| Error::NotFound(format!("MCP server '{key}' not found")))
    }

    fn info(&self, caller: &Principal, row: &UpstreamRow, catalog: &Catalog) -> UpstreamInfo {
        let options: UpstreamOptions = serde_json::from_str(&row.options).unwrap_or_default();
        let health = if row.enabled {
            self.connection(&row.id)
                .map(|c| c.health())
                // Registered by another process and not used here yet.
                .unwrap_or_else(|| Health::new("idle"))
        } else {
            Health::new("disabled")
        };
        let pkg = catalog.package(&row.package);
        let tools: Vec<Value> = catalog
            .tools_of(&row.package)
            .filter(|t| may_use(caller, t))
            .map(|t| t.raw.clone())
            .collect();
        let usable_tool_count = catalog
            .tools_of(&row.package)
            .filter(|t| usable(caller, t))
            .count();
        UpstreamInfo {
            id: row.id.clone(),
            name: row.name.clone(),
            package: row.package.clone(),
            transport_type: row.transport.clone(),
            config: if row.transport == "stdio" {
                row.config.clone()
            } else {
                mask_url(&row.config)
            },
            args: options.args,
            cwd: options.cwd,
            env: options.env_keys,
            headers: options.header_names,
            enabled: row.enabled,
            call_timeout_secs: options.call_timeout_secs,
            connect_timeout_secs: options.connect_timeout_secs,
            max_concurrency: options.max_concurrency,
            category: pkg.map(|p| p.category.clone()).unwrap_or_default(),
            tags: pkg.map(|p| p.tags.clone()).unwrap_or_default(),
            description: pkg.map(|p| p.description.clone()).unwrap_or_default(),
            source: pkg.map(|p| p.source.clone()).unwrap_or_default(),
            health,
            tool_count: tools.len(),
            usable_tool_count,
            missing_tools: pkg.map(|p| p.missing_tools.clone()).unwrap_or_default(),
            tools_cache: tools,
            created_at: iso(row.created_at),
            updated_at: iso(row.updated_at),
        }
    }

    /// The caller's upstreams, with their health.
    pub fn upstreams(&self, caller: &Principal) -> Result<Vec<UpstreamInfo>> {
        let catalog = self.catalog(caller.owner_key())?;
        Ok(self
            .store
            .upstreams(Some(caller.owner_key()))?
            .iter()
            .filter(|r| caller.reaches_package(&r.package))
            .map(|r| self.info(caller, r, &catalog))
            .collect())
    }

    /// One of the caller's upstreams; another owner's is not found.
    pub fn upstream(&self, caller: &Principal, id: &str) -> Result<UpstreamInfo> {
        let row = self.row(caller, id)?;
        let catalog = self.catalog(caller.owner_key())?;
        Ok(self.info(caller, &row, &catalog))
    }

    /// The upstream's catalogued tools (those the caller may use).
    pub fn upstream_tools(&self, caller: &Principal, id: &str) -> Result<Vec<CatalogTool>> {
        let row = self.row(caller, id)?;
        let catalog = self.catalog(caller.owner_key())?;
        Ok(catalog
            .tools_of(&row.package)
            .filter(|t| may_use(caller, t))
            .cloned()
            .collect())
    }

    /// Disconnects and removes one of the caller's upstreams with its package.
    pub fn delete_upstream(&self, caller: &Principal, id: &str) -> Result<()> {
        require_write(caller)?;
        let row = self.row(caller, id)?;
        self.disconnect(&row.id);
        self.store.delete_upstream(caller.owner_key(), &row.id)?;
        Ok(())
    }

    /// Enables or disables an upstream (`None` flips it). Enabling connects it: async code
    /// awaits the returned [`Connecting`] (for [`ANSWER_GRACE`]) before reading it again.
    pub fn set_enabled(
        self: &Arc<Self>,
        caller: &Principal,
        id: &str,
        enabled: Option<bool>,
    ) -> Result<Option<Connecting>> {
        require_write(caller)?;
        let mut row = self.row(caller, id)?;
        let enabled = enabled.unwrap_or(!row.enabled);
        if enabled != row.enabled {
            row.enabled = enabled;
            row.updated_at = now_millis();
            self.store.update_upstream(&row)?;
            if enabled {
                return Ok(Some(Connecting(self.connect(&row)?)));
            }
            self.disconnect(&row.id);
        }
        Ok(None)
    }

    /// Prepares rediscovering an upstream's tools now (reconnecting at once if it is down):
    /// async code awaits [`Refreshing::finish`], then reads the upstream again.
    pub fn refresh(self: &Arc<Self>, caller: &Principal, id: &str) -> Result<Refreshing> {
        let row = self.row(caller, id)?;
        if !row.enabled {
            return Err(Error::Conflict(format!(
                "MCP server '{}' is disabled; enable it first",
                row.name
            )));
        }
        let options: UpstreamOptions = serde_json::from_str(&row.options).unwrap_or_default();
        let conn = match self.connection(&row.id) {
            Some(c) => c,
            None => self.connect(&row)?,
        };
        Ok(Refreshing {
            conn,
            wait: Duration::from_secs(options.connect_timeout_secs + 5),
        })
    }

    /// Switches one catalogued tool on or off for its owner (seed 003's toggles).
    pub fn set_tool_enabled(
        &self,
        caller: &Principal,
        full_name: &str,
        enabled: bool,
    ) -> Result<CatalogTool> {
        require_write(caller)?;
        let catalog = self.catalog(caller.owner_key())?;
        let tool = catalog
            .by_full_name(full_name)
            .or_else(|| catalog.by_wire_name(full_name))
            .ok_or_else(|| Error::NotFound(format!("tool '{full_name}' not found")))?
            .clone();
        self.store
            .set_tool_disabled(caller.owner_key(), &tool.full_name, !enabled)?;
        Ok(CatalogTool { enabled, ..tool })
    }

    /// Where a caller's outbound requests (custom tools) may go: anywhere for the machine's
    /// owner (who runs the server), the configured policy for users.
    fn net_policy(&self, caller: &Principal) -> NetPolicy {
        if caller.is_machine_owner() && caller.identity.is_none() {
            NetPolicy::parse_allow_list("0.0.0.0/0,::/0").unwrap_or_else(|_| self.opts.net.clone())
        } else {
            self.opts.net.clone()
        }
    }

    /// Rewrites the owner's `custom` package from its enabled custom tools.
    fn write_custom_package(&self, owner: &str) -> Result<()> {
        let now = now_millis();
        let rows = self.store.custom_tools(owner)?;
        let package = PackageRow {
            owner: owner.to_owned(),
            id: CUSTOM_PACKAGE.into(),
            name: "Custom HTTP tools".into(),
            description: "HTTP endpoints registered as tools".into(),
            category: "custom".into(),
            tags: vec!["http".into(), "webhook".into()],
            kind: "custom".into(),
            upstream_id: None,
            source: "custom".into(),
            schema_version: "custom".into(),
            manifest: None,
            updated_at: now,
            surface: None,
        };
        let mut tools = Vec::new();
        // Every custom tool is catalogued; a disabled one is switched off like any tool.
        for row in &rows {
            let info = custom_info(row)?;
            let raw = serde_json::json!({
                "name": info.name,
                "description": info.description,
                "inputSchema": info.parameters,
                "annotations": {"openWorldHint": true},
            });
            tools.push(quarry_store::ToolRow {
                owner: owner.to_owned(),
                package: CUSTOM_PACKAGE.into(),
                tool: info.name.clone(),
                full_name: info.full_name.clone(),
                description: info.description.clone(),
                input_schema: info.parameters.to_string(),
                raw: raw.to_string(),
                category: "custom".into(),
                tags: package.tags.clone(),
                source: "custom".into(),
                schema_version: "custom".into(),
                requires_task: false,
                updated_at: now,
            });
        }
        if rows.is_empty() {
            self.store.delete_package(owner, CUSTOM_PACKAGE)?;
            return Ok(());
        }
        self.store.replace_package(&package, &tools)
    }

    /// The caller's custom HTTP tools.
    pub fn custom_tools(&self, caller: &Principal) -> Result<Vec<CustomToolInfo>> {
        self.store
            .custom_tools(caller.owner_key())?
            .iter()
            .filter(|r| may_use_custom(caller, r))
            .map(custom_info)
            .collect()
    }

    /// A custom tool by id, by its name, or by the names the tool listings give it (the
    /// catalog name `custom.NAME` and the wire name an MCP client calls it by).
    fn custom_row(&self, caller: &Principal, id: &str) -> Result<quarry_store::CustomToolRow> {
        let mut rows = self.store.custom_tools(caller.owner_key())?;
        // Out of the token's tool scope: as missing as a tool that does not exist.
        rows.retain(|r| may_use_custom(caller, r));
        if let Some(row) = rows.iter().find(|r| r.id == id || r.name == id) {
            return Ok(row.clone());
        }
        let catalog = self.catalog(caller.owner_key())?;
        let named = catalog
            .tools
            .iter()
            .find(|t| t.package == CUSTOM_PACKAGE && (t.wire_name == id || t.full_name == id))
            .map(|t| t.name.clone());
        named
            .and_then(|n| rows.into_iter().find(|r| r.name == n))
            .ok_or_else(|| Error::NotFound(format!("custom tool '{id}' not found")))
    }

    /// One of the caller's custom tools.
    pub fn custom_tool(&self, caller: &Principal, id: &str) -> Result<CustomToolInfo> {
        custom_info(&self.custom_row(caller, id)?)
    }

    /// Creates a custom HTTP tool (seed 003's `CustomTool`); header values are kept apart.
    pub fn create_custom_tool(
        &self,
        caller: &Principal,
        spec: custom::CustomToolSpec,
        enabled: bool,
    ) -> Result<CustomToolInfo> {
        require_write(caller)?;
        custom::validate_spec(&spec).map_err(Error::InvalidInput)?;
        let now = now_millis();
        let (spec, headers) = split_headers(spec);
        let row = quarry_store::CustomToolRow {
            id: uuid_v4(),
            owner: caller.owner_key().to_owned(),
            name: spec.name.clone(),
            spec: json_text(&spec)?,
            secrets: json_text(&headers)?,
            enabled,
            created_at: now,
            updated_at: now,
        };
        self.store.insert_custom_tool(&row)?;
        self.store.set_tool_disabled(
            caller.owner_key(),
            &names::catalog_name(CUSTOM_PACKAGE, &row.name),
            !enabled,
        )?;
        self.write_custom_package(caller.owner_key())?;
        custom_info(&row)
    }

    /// Changes a custom tool: `patch` holds the fields to replace (any of the spec's, and
    /// `enabled`). Header values not given are kept.
    pub fn update_custom_tool(
        &self,
        caller: &Principal,
        id: &str,
        patch: serde_json::Map<String, Value>,
    ) -> Result<CustomToolInfo> {
        require_write(caller)?;
        let mut row = self.custom_row(caller, id)?;
        let mut spec_json: serde_json::Map<String, Value> =
            serde_json::from_str(&row.spec).map_err(|e| Error::Storage(e.to_string()))?;
        let mut headers: std::collections::BTreeMap<String, String> =
            serde_json::from_str(&row.secrets).unwrap_or_default();
        for (k, v) in patch {
            match k.as_str() {
                "enabled" => {
                    row.enabled = v.as_bool().ok_or_else(|| {
                        Error::InvalidInput("enabled: expected true or false".into())
                    })?
                }
                "http_headers" => {
                    headers = serde_json::from_value(v).map_err(|e| {
                        Error::InvalidInput(format!(
                            "http_headers: expected an object of strings ({e})"
                        ))
                    })?
                }
                _ => {
                    spec_json.insert(k, v);
                }
            }
        }
        spec_json.insert(
            "http_headers".into(),
            serde_json::to_value(&headers).unwrap_or_default(),
        );
        let spec: custom::CustomToolSpec = serde_json::from_value(Value::Object(spec_json))
            .map_err(|e| Error::InvalidInput(format!("invalid custom tool: {e}")))?;
        custom::validate_spec(&spec).map_err(Error::InvalidInput)?;
        let (spec, headers) = split_headers(spec);
        row.name = spec.name.clone();
        row.spec = json_text(&spec)?;
        row.secrets = json_text(&headers)?;
        row.updated_at = now_millis();
        let old_name = names::catalog_name(CUSTOM_PACKAGE, &self.custom_row(caller, id)?.name);
        self.store.update_custom_tool(&row)?;
        self.store
            .set_tool_disabled(caller.owner_key(), &old_name, false)?;
        self.store.set_tool_disabled(
            caller.owner_key(),
            &names::catalog_name(CUSTOM_PACKAGE, &row.name),
            !row.enabled,
        )?;
        self.write_custom_package(caller.owner_key())?;
        custom_info(&row)
    }

    /// Removes one of the caller's custom tools.
    pub fn delete_custom_tool(&self, caller: &Principal, id: &str) -> Result<()> {
        require_write(caller)?;
        let row = self.custom_row(caller, id)?;
        self.store.delete_custom_tool(caller.owner_key(), &row.id)?;
        self.store.set_tool_disabled(
            caller.owner_key(),
            &names::catalog_name(CUSTOM_PACKAGE, &row.name),
            false,
        )?;
        self.write_custom_package(caller.owner_key())
    }

    /// A custom tool ready to run ([`CustomCall::run`]): its spec, and where the caller's
    /// requests may go (the "test" button, and `tools/call`).
    pub fn custom_call(
        &self,
        caller: &Principal,
        id: &str,
    ) -> std::result::Result<CustomCall, custom::CustomToolError> {
        let row = self
            .custom_row(caller, id)
            .map_err(|e| custom::CustomToolError::InvalidSpec(e.to_string()))?;
        let mut spec: custom::CustomToolSpec = serde_json::from_str(&row.spec)
            .map_err(|e| custom::CustomToolError::InvalidSpec(e.to_string()))?;
        spec.http_headers = serde_json::from_str(&row.secrets).unwrap_or_default();
        Ok(CustomCall {
            spec,
            net: self.net_policy(caller),
        })
    }

    /// Where a resource or prompt request for an upstream package goes (connecting it if
    /// another process registered it).
    pub fn route_package(
        self: &Arc<Self>,
        caller: &Principal,
        package: &str,
    ) -> std::result::Result<Route, CallError> {
        if !caller.may_use_package(package) {
            return Err(CallError::Unavailable(format!(
                "package '{package}' is not an MCP server"
            )));
        }
        let catalog = self
            .catalog(caller.owner_key())
            .map_err(|e| CallError::Unavailable(e.to_string()))?;
        let id = catalog
            .package(package)
            .and_then(|p| p.upstream_id.clone())
            .ok_or_else(|| {
                CallError::Unavailable(format!("package '{package}' is not an MCP server"))
            })?;
        self.route_upstream(caller.owner_key(), &id)
    }

    fn route_upstream(
        self: &Arc<Self>,
        owner: &str,
        id: &str,
    ) -> std::result::Result<Route, CallError> {
        Ok(Route(match self.connection(id) {
            Some(conn) => Target::Upstream { conn, settle: None },
            // Registered by another process (the CLI, another node): connect here.
            None => {
                let (conn, wait) = self.connect_registered(owner, id)?;
                Target::Upstream {
                    conn,
                    settle: Some(wait),
                }
            }
        }))
    }

    /// Where a call of a catalogued tool goes: an upstream's connection, a custom tool, or
    /// a built-in package. The registry part of [`Hub::call`]: synchronous, store-backed.
    pub fn route_tool(
        self: &Arc<Self>,
        caller: &Principal,
        tool: &CatalogTool,
    ) -> std::result::Result<Route, CallError> {
        // Views already hide such tools; this keeps every other path honest too.
        if !may_use(caller, tool) {
            return Err(CallError::Unavailable(format!(
                "unknown tool '{}'",
                tool.full_name
            )));
        }
        let catalog = self
            .catalog(caller.owner_key())
            .map_err(|e| CallError::Unavailable(e.to_string()))?;
        let pkg = catalog
            .package(&tool.package)
            .ok_or_else(|| CallError::Unavailable(format!("package '{}' is gone", tool.package)))?;
        match pkg.kind {
            PackageKind::Upstream => {
                let id = pkg.upstream_id.clone().unwrap_or_default();
                self.route_upstream(caller.owner_key(), &id)
            }
            PackageKind::Custom => Ok(Route(Target::Custom(Box::new(
                self.custom_call(caller, &tool.name),
            )))),
            PackageKind::Builtin => Ok(Route(Target::Builtin {
                package: pkg.id.clone(),
            })),
        }
    }

    /// Checks a token's tool scope against `owner`'s catalog: every entry must name one of
    /// its packages or tools (a typo would otherwise make a token that reaches nothing).
    pub fn check_tool_scope(&self, owner: &str, entries: &[String]) -> Result<()> {
        let catalog = self.catalog(owner)?;
        for entry in entries {
            let known = match names::split_catalog_name(entry) {
                Some(_) => catalog.tools.iter().any(|t| &t.full_name == entry),
                None => catalog.package(entry).is_some(),
            };
            if !known {
                return Err(Error::invalid(format!(
                    "unknown package or tool '{entry}' in the tool scope (see /api/catalog for package ids and package.tool names)"
                )));
            }
        }
        Ok(())
    }

    /// Reads a resource of an upstream package ([`Hub::route_package`]).
    pub async fn read_resource(
        &self,
        route: Route,
        uri: &str,
        cancel: CancellationToken,
    ) -> std::result::Result<rmcp::model::ReadResourceResult, CallError> {
        route.connection().await?.read_resource(uri, cancel).await
    }

    /// Gets a prompt of an upstream package ([`Hub::route_package`]).
    pub async fn get_prompt(
        &self,
        route: Route,
        name: &str,
        arguments: Option<JsonObject>,
        cancel: CancellationToken,
    ) -> std::result::Result<rmcp::model::GetPromptResult, CallError> {
        route
            .connection()
            .await?
            .get_prompt(name, arguments, cancel)
            .await
    }

    /// Calls a catalogued tool where [`Hub::route_tool`] sent it: an upstream or custom
    /// package, or the built-in `web` package (when [`HubOptions::web`] is set). Other
    /// built-in tools are the server's to run. Touches no store.
    pub async fn call(
        &self,
        route: Route,
        tool: &CatalogTool,
        arguments: Option<JsonObject>,
        progress: Option<ProgressSink>,
        cancel: CancellationToken,
    ) -> std::result::Result<CallToolResult, CallError> {
        match route.0 {
            Target::Upstream { conn, settle } => {
                if let Some(wait) = settle {
                    conn.wait_discovered(wait).await;
                }
                conn.call(&tool.name, arguments, progress, cancel).await
            }
            Target::Custom(prepared) => {
                let args = Value::Object(arguments.unwrap_or_default());
                let outcome = match *prepared {
                    Ok(custom) => tokio::select! {
                        r = custom.run(&args) => r,
                        _ = cancel.cancelled() => return Err(CallError::Cancelled),
                    },
                    Err(e) => Err(e),
                };
                Ok(custom_result(outcome))
            }
            Target::Builtin { package } => match &self.web {
                Some(web) if package == WEB_PACKAGE => {
                    if tool.name != web::WEB_SEARCH_TOOL {
                        return Err(CallError::Unavailable(format!(
                            "the web package has no tool '{}'",
                            tool.name
                        )));
                    }
                    let args = arguments.unwrap_or_default();
                    let result = web.search(&args, cancel.clone()).await;
                    if cancel.is_cancelled() {
                        return Err(CallError::Cancelled);
                    }
                    Ok(result)
                }
                _ => Err(CallError::Unavailable(
                    "built-in tools run in the server".into(),
                )),
            },
        }
    }
}

/// An upstream connection being made: the asynchronous half of a registry change
/// ([`Hub::set_enabled`], [`Hub::connecting`]).
pub struct Connecting(Arc<Connection>);

impl Connecting {
    /// Waits up to `wait` for the connection's first discovery.
    pub async fn discovered(&self, wait: Duration) {
        self.0.wait_discovered(wait).await;
    }
}

/// A rediscovery to run ([`Hub::refresh`]).
pub struct Refreshing {
    conn: Arc<Connection>,
    wait: Duration,
}

impl Refreshing {
    /// Rediscovers now, waiting up to the upstream's connect timeout.
    pub async fn finish(self) {
        self.conn.refresh(self.wait).await;
    }
}

/// A custom tool ready to run ([`Hub::custom_call`]).
pub struct CustomCall {
    spec: custom::CustomToolSpec,
    net: NetPolicy,
}

impl CustomCall {
    /// Sends the tool's HTTP request with `arguments`.
    pub async fn run(
        &self,
        arguments: &Value,
    ) -> std::result::Result<custom::CustomResponse, custom::CustomToolError> {
        custom::execute(&self.spec, arguments, &self.net).await
    }
}

/// Where a call, resource read or prompt goes, resolved by the registry
/// ([`Hub::route_tool`], [`Hub::route_package`]) so the asynchronous part touches no store.
pub struct Route(Target);

enum Target {
    /// An upstream's connection; `settle`: first wait this long for its first discovery (a
    /// connection this process has just made).
    Upstream {
        conn: Arc<Connection>,
        settle: Option<Duration>,
    },
    /// Boxed: a prepared custom call is much larger than the other targets.
    Custom(Box<std::result::Result<CustomCall, custom::CustomToolError>>),
    Builtin {
        package: String,
    },
}

impl Route {
    /// The upstream connection (settled), or why this route has none.
    async fn connection(self) -> std::result::Result<Arc<Connection>, CallError> {
        match self.0 {
            Target::Upstream { conn, settle } => {
                if let Some(wait) = settle {
                    conn.wait_discovered(wait).await;
                }
                Ok(conn)
            }
            Target::Custom(_) | Target::Builtin { .. } => Err(CallError::Unavailable(
                "this package is not an MCP server".into(),
            )),
        }
    }
}

fn custom_info(row: &quarry_store::CustomToolRow) -> Result<CustomToolInfo> {
    let spec: custom::CustomToolSpec = serde_json::from_str(&row.spec)
        .map_err(|e| Error::Storage(format!("custom tool '{}': {e}", row.name)))?;
    let headers: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&row.secrets).unwrap_or_default();
    Ok(CustomToolInfo {
        id: row.id.clone(),
        full_name: names::catalog_name(CUSTOM_PACKAGE, &spec.name),
        name: spec.name,
        description: spec.description,
        parameters: spec.parameters,
        http_url: spec.http_url,
        http_method: spec.http_method.to_ascii_uppercase(),
        http_headers: headers.into_keys().collect(),
        http_body_template: spec.http_body_template,
        timeout_secs: spec.timeout_secs,
        max_response_bytes: spec.max_response_bytes,
        enabled: row.enabled,
        tool_type: "http",
        created_at: iso(row.created_at),
        updated_at: iso(row.updated_at),
    })
}

/// Fills a registration from a `server.json` launch spec (explicit fields win). Required
/// environment variables without a value or default are refused by name.
fn apply_server_json(req: &mut RegisterUpstream, v: &Value) -> Result<()> {
    let spec = catalog::parse_server_json(v)?;
    if req.name.trim().is_empty() {
        req.name = spec
            .name
            .rsplit('/')
            .next()
            .unwrap_or(&spec.name)
            .to_owned();
    }
    if req.description.is_none() && !spec.description.is_empty() {
        req.description = Some(spec.description.clone());
    }
    if req.transport_type.trim().is_empty() {
        req.transport_type = spec.transport.as_str().into();
    }
    if req.config.trim().is_empty() {
        req.config = spec.config.clone();
        if req.args.is_empty() {
            req.args = spec.args.clone();
        }
    }
    let mut missing = Vec::new();
    for (name, default, required) in &spec.env {
        if req.env.contains_key(name) {
            continue;
        }
        match default {
            Some(d) => {
                req.env.insert(name.clone(), d.clone());
            }
            None if *required => missing.push(name.clone()),
            None => {}
        }
    }
    if !missing.is_empty() {
        return Err(Error::InvalidInput(format!(
            "server.json requires environment variables {}: pass them in env",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// Header values go to the secrets column; the spec keeps none.
fn split_headers(
    mut spec: custom::CustomToolSpec,
) -> (
    custom::CustomToolSpec,
    std::collections::BTreeMap<String, String>,
) {
    let headers = std::mem::take(&mut spec.http_headers);
    (spec, headers)
}

/// A custom tool's HTTP response as a tool result: the body as text (and as
/// `structuredContent` when it is a JSON object); an HTTP error status or a failure is
/// `isError` with the reason.
fn custom_result(
    outcome: std::result::Result<custom::CustomResponse, custom::CustomToolError>,
) -> CallToolResult {
    use rmcp::model::ContentBlock;
    match outcome {
        Ok(r) => {
            let mut result = if (200..300).contains(&r.status) {
                CallToolResult::success(vec![ContentBlock::text(r.body.clone())])
            } else {
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "HTTP {}: {}",
                    r.status, r.body
                ))])
            };
            if (200..300).contains(&r.status)
                && !r.truncated
                && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&r.body)
            {
                result.structured_content = Some(v);
            }
            result
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
    }
}

fn uuid_v4() -> String {
    uuid::Uuid::new_v4().to_string()
}
