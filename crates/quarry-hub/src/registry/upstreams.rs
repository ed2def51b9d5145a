//! Upstream MCP servers in the registry: registering one (a request, or the MCP Registry's
//! `server.json`), editing, enabling, refreshing, deleting and listing them.

use std::sync::Arc;
use std::time::Duration;

use quarry_core::{Error, Principal, Result, now_millis};
use quarry_store::{PackageRow, UpstreamRow};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hub::{Hub, json_text, stored_settings, uuid_v4};
use crate::access::{may_use, require_write, usable};
use crate::catalog::{self, CUSTOM_PACKAGE, Catalog, CatalogTool, Manifest, package_rows};
use crate::pool::{Connecting, Refreshing};
use crate::upstream::{self, Health, TransportKind, UpstreamOptions, UpstreamSecrets};

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
    /// The OAuth sign-in of an upstream that asked for one (never a token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<super::SignInInfo>,
    /// The discovered tools as listed (seed 003's `tools_cache`): the upstream's definitions,
    /// with a manifest's description and input schema where it gives them.
    pub tools_cache: Vec<Value>,
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

impl Hub {
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
                    quarry_netguard::check_url(&self.opts.net, &url)
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
            oauth: None,
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
        // A sign-in belongs to the server it was made with: another URL signs in anew.
        let kept_sign_in = secrets.oauth.clone().filter(|_| {
            !new_transport
                && patch
                    .config
                    .as_deref()
                    .is_none_or(|c| c.trim() == row.config)
        });
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
        let mut launch = self.launch(caller, &req)?;
        launch.secrets.oauth = kept_sign_in;
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
            Some(Connecting::new(self.connect(&row)?))
        } else {
            self.pool.remove(&row.id);
            None
        };
        Ok((row.id, connecting))
    }

    /// The live connection of an upstream in this process, if any: what async code awaits
    /// ([`Connecting::discovered`]) before reading the upstream again.
    pub fn connecting(&self, caller: &Principal, id: &str) -> Result<Option<Connecting>> {
        let row = self.row(caller, id)?;
        Ok(self.pool.get(&row.id).map(Connecting::new))
    }

    /// An upstream by id, name or package id.
    pub fn find_upstream(&self, caller: &Principal, key: &str) -> Result<UpstreamInfo> {
        let row = self.row(caller, key)?;
        let health = self.health(&row);
        let catalog = self.catalog(caller.owner_key())?;
        Ok(self.info(caller, &row, health, &catalog))
    }

    /// The caller's upstream by id, or by name or package id (both unique per owner).
    pub(super) fn row(&self, caller: &Principal, key: &str) -> Result<UpstreamRow> {
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

    /// Where an upstream's connection in this process stands.
    ///
    /// Read it *before* the catalog that goes with it in an [`UpstreamInfo`]: a connection
    /// reports `ready` only once the store holds what its discovery found, so a catalog read
    /// after a `ready` has the tools. Read the other way round, a discovery that ended between
    /// the two reads gave `ready` with the catalog from before it — no tools (seen in CI: a
    /// freshly registered server-memory polled as `ready` with `tool_count` 0).
    fn health(&self, row: &UpstreamRow) -> Health {
        if row.enabled {
            self.pool
                .get(&row.id)
                .map(|c| c.health())
                // Registered by another process and not used here yet.
                .unwrap_or_else(|| Health::new("idle"))
        } else {
            Health::new("disabled")
        }
    }

    /// An upstream's listing from its row, its `health` and a `catalog` read after the
    /// health ([`Hub::health`] says why that order).
    fn info(
        &self,
        caller: &Principal,
        row: &UpstreamRow,
        health: Health,
        catalog: &Catalog,
    ) -> UpstreamInfo {
        let options: UpstreamOptions = serde_json::from_str(&row.options).unwrap_or_default();
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
            oauth: self.sign_in_info(row),
            tools_cache: tools,
            created_at: quarry_core::iso8601_millis(row.created_at),
            updated_at: quarry_core::iso8601_millis(row.updated_at),
        }
    }

    /// The caller's upstreams, with their health.
    pub fn upstreams(&self, caller: &Principal) -> Result<Vec<UpstreamInfo>> {
        let rows: Vec<(UpstreamRow, Health)> = self
            .store
            .upstreams(Some(caller.owner_key()))?
            .into_iter()
            .filter(|r| caller.reaches_package(&r.package))
            .map(|r| {
                let health = self.health(&r);
                (r, health)
            })
            .collect();
        // After the healths: a `ready` among them has its tools in this catalog.
        let catalog = self.catalog(caller.owner_key())?;
        Ok(rows
            .into_iter()
            .map(|(r, health)| self.info(caller, &r, health, &catalog))
            .collect())
    }

    /// One of the caller's upstreams; another owner's is not found.
    pub fn upstream(&self, caller: &Principal, id: &str) -> Result<UpstreamInfo> {
        let row = self.row(caller, id)?;
        let health = self.health(&row);
        let catalog = self.catalog(caller.owner_key())?;
        Ok(self.info(caller, &row, health, &catalog))
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
        self.pool.remove(&row.id);
        self.store.delete_upstream(caller.owner_key(), &row.id)?;
        Ok(())
    }

    /// Enables or disables an upstream (`None` flips it). Enabling connects it: async code
    /// awaits the returned [`Connecting`] (for [`crate::ANSWER_GRACE`]) before reading it again.
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
                return Ok(Some(Connecting::new(self.connect(&row)?)));
            }
            self.pool.remove(&row.id);
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
        let conn = match self.pool.get(&row.id) {
            Some(c) => c,
            None => self.connect(&row)?,
        };
        Ok(Refreshing::new(
            conn,
            Duration::from_secs(options.connect_timeout_secs + 5),
        ))
    }
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
