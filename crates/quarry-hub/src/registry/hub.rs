//! [`Hub`] itself: the type, its catalogs, routing and the follower of other nodes' changes,
//! and the stored-row helpers the registry's other files share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quarry_core::{Error, MACHINE_OWNER, Principal, Result, now_millis};
use quarry_netguard::NetPolicy;
use quarry_store::{HubStore, PackageRow, UpstreamRow};
use rmcp::model::{CallToolResult, JsonObject};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::access::may_use;
use crate::catalog::{BuiltinPackage, Catalog, CatalogTool, Manifest, PackageKind, package_rows};
use crate::names;
use crate::options::HubOptions;
use crate::pool::{Pool, Route};
use crate::upstream::{
    self, CallError, ConnectSpec, Connection, ProgressSink, TransportKind, UpstreamOptions,
    UpstreamSecrets,
};
use crate::web::{self, WEB_PACKAGE};

/// How often a node looks for hub changes made elsewhere without being notified.
pub const RECONCILE_POLL: Duration = Duration::from_secs(5);
/// A connection whose upstream has no row is stopped once it is older than this (an
/// upstream deleted on another node; a younger one may be mid-registration here).
const DELETED_AFTER: Duration = Duration::from_secs(30);

/// The hub: one per server process.
pub struct Hub {
    /// Everything owners registered; the follower waits on its change notifications.
    pub(super) store: Arc<dyn HubStore>,
    pub(super) builtin: Vec<BuiltinPackage>,
    pub(super) opts: HubOptions,
    /// Live connections (and the `web` package's tool): the asynchronous half.
    pub(super) pool: Pool,
    /// Catalog snapshots by owner, each tagged with the generation it was built from.
    catalogs: Mutex<HashMap<String, Arc<Catalog>>>,
    /// Set by [`Hub::shutdown`]: the follower thread exits.
    stopped: AtomicBool,
    /// How many stdio upstreams start at once, and what each one answered.
    starts: upstream::Starts,
}

/// The hub follower's loop: until the hub is dropped, stop what other nodes disabled.
fn follow_hub_changes(hub: &std::sync::Weak<Hub>, store: &dyn HubStore) {
    let mut changes = quarry_store::ChangeWaiter::new(quarry_store::Channel::Hub);
    loop {
        if let Err(e) = changes.wait(store, RECONCILE_POLL) {
            tracing::warn!(error = %e, "lost hub notifications; polling until they are back");
        }
        let Some(hub) = hub.upgrade() else {
            return;
        };
        if hub.stopped.load(Ordering::Relaxed) {
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

/// An upstream row's stored options and secrets.
pub(super) fn stored_settings(row: &UpstreamRow) -> Result<(UpstreamOptions, UpstreamSecrets)> {
    let options = serde_json::from_str(&row.options)
        .map_err(|e| Error::Storage(format!("upstream '{}' options: {e}", row.name)))?;
    let secrets = serde_json::from_str(&row.secrets)
        .map_err(|e| Error::Storage(format!("upstream '{}' secrets: {e}", row.name)))?;
    Ok((options, secrets))
}

/// A stored JSON column's text.
pub(super) fn json_text(value: &impl Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Storage(e.to_string()))
}

pub(super) fn uuid_v4() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Hub {
    /// A hub over `store` with the server's `builtin` packages; with [`HubOptions::web`] set,
    /// the built-in `web` package is added (unless `builtin` already has one).
    pub fn new(
        store: Arc<dyn HubStore>,
        builtin: Vec<BuiltinPackage>,
        opts: HubOptions,
    ) -> Arc<Hub> {
        let mut builtin = builtin;
        let web = opts.web.clone().map(web::WebSearch::new);
        if web.is_some() && !builtin.iter().any(|b| b.id == WEB_PACKAGE) {
            builtin.push(web::web_package());
        }
        let starts = upstream::Starts::new(opts.upstream_starts, opts.narrow_starts_while.as_ref());
        Arc::new(Hub {
            store,
            builtin,
            opts,
            pool: Pool::new(web),
            catalogs: Mutex::new(HashMap::new()),
            stopped: AtomicBool::new(false),
            starts,
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
        let read = std::time::Instant::now();
        let rows: HashMap<String, (bool, i64)> = self
            .store
            .upstreams(None)?
            .into_iter()
            .map(|r| (r.id, (r.enabled, r.updated_at)))
            .collect();
        Ok(self.pool.remove_where(|id, conn| match rows.get(id) {
            // Opened after the rows were read (this node enabled or edited it meanwhile):
            // they say nothing of it; the next reconcile does. Judged by them, an upstream
            // disabled and enabled again at once lost its new connection to the disable's
            // notification (seen in CI: `test_toggles` on PostgreSQL answered `idle`).
            Some(_) if conn.age() < read.elapsed() => false,
            // Edited since it was opened: the next use connects the stored settings.
            Some((enabled, revision)) => !enabled || *revision != conn.revision(),
            // A registration opens its connection before its row commits: a young
            // connection without a row is one being registered, not one deleted.
            None => conn.age() > DELETED_AFTER,
        }))
    }

    /// Stops every connection (children are killed).
    pub fn shutdown(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.pool.stop_all();
    }

    /// Starts connecting an upstream row (replacing this process's connection of it, if
    /// any); discovered tools are written back to the store.
    pub(super) fn connect(self: &Arc<Self>, row: &UpstreamRow) -> Result<Arc<Connection>> {
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
            bearer: (transport == TransportKind::Http).then(|| self.bearer_source(row)),
            id: row.id.clone(),
            starts: self.starts.clone(),
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
        self.pool.insert(row.id.clone(), conn.clone());
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

    /// Switches one catalogued tool on or off for its owner (seed 003's toggles).
    pub fn set_tool_enabled(
        &self,
        caller: &Principal,
        full_name: &str,
        enabled: bool,
    ) -> Result<CatalogTool> {
        crate::access::require_write(caller)?;
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

    /// Where a caller's outbound requests (custom tools) may go: anywhere for the machine's
    /// owner (who runs the server), the configured policy for users.
    pub(super) fn net_policy(&self, caller: &Principal) -> NetPolicy {
        if caller.is_machine_owner() && caller.identity.is_none() {
            NetPolicy::parse_allow_list("0.0.0.0/0,::/0").unwrap_or_else(|_| self.opts.net.clone())
        } else {
            self.opts.net.clone()
        }
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
        Ok(match self.pool.get(id) {
            Some(conn) => Route::upstream(conn, None),
            // Registered by another process (the CLI, another node): connect here.
            None => {
                let (conn, wait) = self.connect_registered(owner, id)?;
                Route::upstream(conn, Some(wait))
            }
        })
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
            PackageKind::Custom => Ok(Route::custom(self.custom_call(caller, &tool.name))),
            PackageKind::Builtin => Ok(Route::builtin(pkg.id.clone())),
        }
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
        self.pool
            .call(route, tool, arguments, progress, cancel)
            .await
    }
}
