//! `quarry hub …`: the machine's owner registers upstream MCP servers and inspects the
//! catalog (its own, or a user's with `--user`). A running server picks up what is
//! registered here on the next request that needs it (the catalog is in the store).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use quarry_core::{Identity, Principal};
use quarry_engine::Engine;
use quarry_hub::{Hub, HubOptions, RegisterUpstream, UpstreamInfo};
use serde_json::{Value, json};

use crate::output::print_json;
use crate::runtime::off_async;

// Parsed once per process: the size of its largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub(crate) enum HubCmd {
    /// Register an MCP server (discovers its tools now: waits up to 45 s for its first
    /// answer, then says `connecting` and the server keeps trying).
    Add {
        name: String,
        /// A stdio server: the command line to run.
        #[arg(long, conflicts_with_all = ["http", "sse"])]
        stdio: Option<String>,
        /// A Streamable HTTP server's URL.
        #[arg(long, conflicts_with_all = ["stdio", "sse"])]
        http: Option<String>,
        /// A legacy HTTP+SSE server's URL.
        #[arg(long, conflicts_with_all = ["stdio", "http"])]
        sse: Option<String>,
        /// Environment variable for a stdio server (repeatable).
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Header for an HTTP/SSE server (repeatable), e.g. "Authorization=Bearer …".
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        /// Package id (default: from the name).
        #[arg(long)]
        package: Option<String>,
        #[arg(long)]
        category: Option<String>,
        #[arg(long = "tag")]
        tags: Vec<String>,
        #[arg(long)]
        description: Option<String>,
        /// Seed 002's manifest.json describing the package and its tools.
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Seconds a call may take.
        #[arg(long)]
        call_timeout: Option<u64>,
        /// Register for this user instead of the machine's owner.
        #[arg(long)]
        user: Option<String>,
    },
    /// Register an MCP server from the MCP Registry's server.json.
    Import {
        server_json: PathBuf,
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        #[arg(long)]
        category: Option<String>,
        #[arg(long)]
        user: Option<String>,
    },
    /// List registered MCP servers with their health.
    #[command(alias = "ls")]
    List {
        #[arg(long)]
        user: Option<String>,
    },
    /// Remove an MCP server (by name, package or id).
    #[command(alias = "remove")]
    Rm {
        server: String,
        #[arg(long)]
        user: Option<String>,
    },
    /// Rediscover a server's tools now.
    Refresh {
        server: String,
        #[arg(long)]
        user: Option<String>,
    },
    /// Enable a server.
    Enable {
        server: String,
        #[arg(long)]
        user: Option<String>,
    },
    /// Disable a server (its tools stay catalogued, unoffered).
    Disable {
        server: String,
        #[arg(long)]
        user: Option<String>,
    },
    /// Catalogued tools, of one server or all.
    Tools {
        server: Option<String>,
        #[arg(long)]
        user: Option<String>,
    },
    /// Search the catalog (BM25).
    Search {
        query: String,
        #[arg(short = 'n', long, default_value_t = 10)]
        limit: usize,
        #[arg(long)]
        user: Option<String>,
    },
}

fn pairs(items: &[String], what: &str) -> Result<BTreeMap<String, String>> {
    items
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .with_context(|| format!("--{what} '{s}': expected NAME=VALUE"))
        })
        .collect()
}

/// Who the hub commands act as: the machine's owner, or (`--user`) the machine's owner acting
/// for a user — whose servers and tools they are, with the owner's rights (it may register
/// commands). The hub keys by user, not by space, so no space id is needed.
fn caller(engine: &Engine, user: Option<&str>) -> Result<Principal> {
    let owner = Principal::owner(engine.scope().space.clone(), "");
    match user {
        None => Ok(owner),
        Some(u) => {
            let dir = quarry_access::Directory::new(engine.store_handle());
            let found = dir
                .users()?
                .into_iter()
                .find(|x| x.name == u || x.id == u)
                .with_context(|| format!("no user '{u}' (see `quarry user list`)"))?;
            Ok(Principal {
                identity: Some(Identity {
                    user_id: found.id,
                    user: found.name,
                    token_id: None,
                    read_only: false,
                    spaces: Vec::new(),
                    expires_at: None,
                    tools: None,
                    endpoint: None,
                    root_token_id: None,
                    session: false,
                }),
                ..owner
            })
        }
    }
}

fn user_of(cmd: &HubCmd) -> Option<&str> {
    match cmd {
        HubCmd::Add { user, .. }
        | HubCmd::Import { user, .. }
        | HubCmd::List { user }
        | HubCmd::Rm { user, .. }
        | HubCmd::Refresh { user, .. }
        | HubCmd::Enable { user, .. }
        | HubCmd::Disable { user, .. }
        | HubCmd::Tools { user, .. }
        | HubCmd::Search { user, .. } => user.as_deref(),
    }
}

/// One line per tool: its catalog name and the first line of its description.
fn print_tool_lines(tools: &[Value]) {
    for t in tools {
        println!(
            "{:<40} {}",
            t["name"].as_str().unwrap_or_default(),
            t["description"]
                .as_str()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default()
        );
    }
}

fn print_server(s: &UpstreamInfo, json_out: bool) -> Result<()> {
    if json_out {
        return print_json(s);
    }
    println!(
        "{}  {}  {} {}  {} tools  {}{}",
        s.package,
        s.health.status,
        s.transport_type,
        s.config,
        s.tool_count,
        s.id,
        s.health
            .last_error
            .as_deref()
            .map(|e| format!("\n  last error: {e}"))
            .unwrap_or_default()
    );
    Ok(())
}

pub(crate) fn run(engine: Engine, cmd: &HubCmd, json_out: bool) -> Result<()> {
    let who = caller(&engine, user_of(cmd))?;
    let hub = Hub::new(
        engine.store_handle(),
        vec![quarry_server::knowledge_package()],
        HubOptions::default(),
    );
    let runtime = crate::runtime::build()?;
    let out = crate::runtime::block_on(&runtime, run_async(&hub, &who, cmd, json_out));
    hub.shutdown();
    // Give killed children a moment to be reaped.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    out
}

/// How long `hub add` / `hub enable` wait for the first discovery. Longer than the server's
/// [`quarry_hub::ANSWER_GRACE`]: this process holds the only connection, and a cold `uvx` /
/// Python server on a loaded machine can take well over 5 s to answer `initialize`; a person at
/// a terminal would rather wait than get `connecting` and a tool count of 0.
const CLI_DISCOVERY_WAIT: std::time::Duration = std::time::Duration::from_secs(45);

/// An upstream once its first discovery finished (or after [`CLI_DISCOVERY_WAIT`], still
/// `connecting`).
async fn settle(hub: &Arc<Hub>, who: &Principal, id: &str) -> Result<UpstreamInfo> {
    if let Some(c) = off_async(|| hub.connecting(who, id))? {
        c.discovered(CLI_DISCOVERY_WAIT).await;
    }
    Ok(off_async(|| hub.upstream(who, id))?)
}

async fn run_async(hub: &Arc<Hub>, who: &Principal, cmd: &HubCmd, json_out: bool) -> Result<()> {
    match cmd {
        HubCmd::Add {
            name,
            stdio,
            http,
            sse,
            env,
            headers,
            package,
            category,
            tags,
            description,
            manifest,
            call_timeout,
            ..
        } => {
            let (transport, config) = match (stdio, http, sse) {
                (Some(c), None, None) => ("stdio", c.clone()),
                (None, Some(u), None) => ("http", u.clone()),
                (None, None, Some(u)) => ("sse", u.clone()),
                _ => bail!("give one of --stdio COMMAND, --http URL or --sse URL"),
            };
            let manifest = match manifest {
                Some(p) => Some(
                    serde_json::from_slice::<Value>(
                        &std::fs::read(p)
                            .with_context(|| format!("cannot read {}", p.display()))?,
                    )
                    .with_context(|| format!("{} is not JSON", p.display()))?,
                ),
                None => None,
            };
            let req = RegisterUpstream {
                name: name.clone(),
                transport_type: transport.into(),
                config,
                env: pairs(env, "env")?,
                headers: pairs(headers, "header")?,
                package: package.clone(),
                category: category.clone(),
                tags: (!tags.is_empty()).then(|| tags.clone()),
                description: description.clone(),
                manifest,
                call_timeout_secs: *call_timeout,
                ..Default::default()
            };
            let info = off_async(|| hub.register(who, req))?;
            // This process holds the only connection: wait a little for its tools.
            let info = settle(hub, who, &info.id).await?;
            print_server(&info, json_out)?;
            if info.health.status == "error" {
                bail!(
                    "registered, but it is not reachable: {}",
                    info.health.last_error.unwrap_or_default()
                );
            }
        }
        HubCmd::Import {
            server_json,
            env,
            category,
            ..
        } => {
            let v: Value = serde_json::from_slice(
                &std::fs::read(server_json)
                    .with_context(|| format!("cannot read {}", server_json.display()))?,
            )
            .with_context(|| format!("{} is not JSON", server_json.display()))?;
            let req = RegisterUpstream {
                server_json: Some(v),
                env: pairs(env, "env")?,
                category: category.clone(),
                ..Default::default()
            };
            let info = off_async(|| hub.register(who, req))?;
            let info = settle(hub, who, &info.id).await?;
            print_server(&info, json_out)?;
        }
        HubCmd::List { .. } => {
            let list = off_async(|| hub.upstreams(who))?;
            if json_out {
                return print_json(&list);
            }
            if list.is_empty() {
                println!("No MCP servers. Add one: quarry hub add NAME --stdio 'COMMAND'");
            }
            for s in &list {
                print_server(s, false)?;
            }
        }
        HubCmd::Rm { server, .. } => {
            let s = off_async(|| hub.find_upstream(who, server))?;
            off_async(|| hub.delete_upstream(who, &s.id))?;
            if json_out {
                print_json(&json!({ "id": s.id, "deleted": true }))?;
            } else {
                println!("Removed {} ({})", s.name, s.id);
            }
        }
        HubCmd::Refresh { server, .. } => {
            let s = off_async(|| hub.find_upstream(who, server))?;
            hub.refresh(who, &s.id)?.finish().await;
            print_server(&off_async(|| hub.upstream(who, &s.id))?, json_out)?;
        }
        HubCmd::Enable { server, .. } | HubCmd::Disable { server, .. } => {
            let s = off_async(|| hub.find_upstream(who, server))?;
            let on = matches!(cmd, HubCmd::Enable { .. });
            if let Some(c) = off_async(|| hub.set_enabled(who, &s.id, Some(on)))? {
                c.discovered(CLI_DISCOVERY_WAIT).await;
            }
            print_server(&off_async(|| hub.upstream(who, &s.id))?, json_out)?;
        }
        HubCmd::Tools { server, .. } => {
            let catalog = off_async(|| hub.catalog(who.owner_key()))?;
            let package = match server {
                Some(s) => Some(
                    off_async(|| hub.find_upstream(who, s))
                        .map(|s| s.package)
                        .or_else(|e| {
                            if catalog.package(s).is_some() {
                                Ok(s.clone())
                            } else {
                                Err(e)
                            }
                        })?,
                ),
                None => None,
            };
            let tools: Vec<Value> = catalog
                .tools
                .iter()
                .filter(|t| package.as_deref().is_none_or(|p| t.package == p))
                .map(|t| {
                    json!({
                        "name": t.full_name, "wire_name": t.wire_name,
                        "description": t.description(), "enabled": t.enabled,
                        "available": t.available, "source": t.source,
                    })
                })
                .collect();
            if json_out {
                return print_json(&tools);
            }
            print_tool_lines(&tools);
        }
        HubCmd::Search { query, limit, .. } => {
            let catalog = off_async(|| hub.catalog(who.owner_key()))?;
            let hits = catalog.index()?.search(query, None, (*limit).max(1))?;
            let found: Vec<Value> = hits
                .iter()
                .map(|(i, score)| {
                    let t = &catalog.tools[*i];
                    json!({ "name": t.full_name, "score": score, "description": t.description() })
                })
                .collect();
            if json_out {
                return print_json(&found);
            }
            if found.is_empty() {
                println!("No tools match \"{query}\".");
            }
            print_tool_lines(&found);
        }
    }
    Ok(())
}
