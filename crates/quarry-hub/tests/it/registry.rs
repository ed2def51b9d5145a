//! The registry's listing of an upstream against its connection: what `GET
//! /api/v1/mcp/servers/{id}` answers while a first discovery ends.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quarry_core::{Principal, Result};
use quarry_hub::{Hub, HubOptions, RegisterUpstream};
use quarry_store::{
    ChangeNotifier, CustomToolRow, HubStore, PackageRow, ToolEndpointRow, ToolRow, UpstreamRow,
};

/// A stdio MCP server in `sh`: refuses `server/discover` (a legacy server, so the hub falls
/// back to `initialize`), answers `initialize` and lists one tool.
const FAKE_SERVER: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\).*/\1/p')
  [ -n "$id" ] || continue
  case "$line" in
    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1.0.0"}}}\n' "$id" ;;
    *'"method":"tools/list"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","description":"Echoes.","inputSchema":{"type":"object"}}]}}\n' "$id" ;;
    *)
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}\n' "$id" ;;
  esac
done
"#;

/// Longest wait of either side of the interleaving (a broken one fails, never hangs).
const STEP: Duration = Duration::from_secs(30);

/// A SQLite store that stages one interleaving: the discovery's write of the tools waits
/// until a reader has read the catalog's generation, and that reader then waits until the
/// test has seen the discovery end.
struct Staged {
    inner: quarry_store_sqlite::SqliteStore,
    /// Taken by the next `replace_package`: it waits for a signal before writing.
    write_waits_for: Mutex<Option<Receiver<()>>>,
    /// Taken by the next `hub_generation` once armed: it signals the first, then waits for
    /// the second.
    read_stage: Mutex<Option<(Sender<()>, Receiver<()>)>>,
}

impl ChangeNotifier for Staged {}

impl HubStore for Staged {
    fn insert_upstream(&self, upstream: &UpstreamRow, package: &PackageRow) -> Result<()> {
        self.inner.insert_upstream(upstream, package)
    }
    fn update_upstream(&self, upstream: &UpstreamRow) -> Result<()> {
        self.inner.update_upstream(upstream)
    }
    fn swap_upstream_secrets(&self, id: &str, expected: &str, new: &str) -> Result<bool> {
        self.inner.swap_upstream_secrets(id, expected, new)
    }
    fn upstreams(&self, owner: Option<&str>) -> Result<Vec<UpstreamRow>> {
        self.inner.upstreams(owner)
    }
    fn upstream(&self, owner: &str, id: &str) -> Result<Option<UpstreamRow>> {
        self.inner.upstream(owner, id)
    }
    fn delete_upstream(&self, owner: &str, id: &str) -> Result<bool> {
        self.inner.delete_upstream(owner, id)
    }
    fn replace_package(&self, package: &PackageRow, tools: &[ToolRow]) -> Result<()> {
        let wait = self.write_waits_for.lock().unwrap().take();
        if let Some(wait) = wait {
            wait.recv_timeout(STEP)
                .expect("no reader read the catalog before the discovery's write");
        }
        self.inner.replace_package(package, tools)
    }
    fn packages(&self, owner: &str) -> Result<Vec<PackageRow>> {
        self.inner.packages(owner)
    }
    fn catalog_tools(&self, owner: &str) -> Result<Vec<ToolRow>> {
        self.inner.catalog_tools(owner)
    }
    fn delete_package(&self, owner: &str, id: &str) -> Result<bool> {
        self.inner.delete_package(owner, id)
    }
    fn hub_generation(&self, owner: &str) -> Result<i64> {
        let generation = self.inner.hub_generation(owner)?;
        let stage = self.read_stage.lock().unwrap().take();
        if let Some((read, resume)) = stage {
            read.send(()).unwrap();
            resume
                .recv_timeout(STEP)
                .expect("the test never saw the discovery end");
        }
        Ok(generation)
    }
    fn disabled_tools(&self, owner: &str) -> Result<Vec<String>> {
        self.inner.disabled_tools(owner)
    }
    fn set_tool_disabled(&self, owner: &str, full_name: &str, disabled: bool) -> Result<()> {
        self.inner.set_tool_disabled(owner, full_name, disabled)
    }
    fn insert_custom_tool(&self, tool: &CustomToolRow) -> Result<()> {
        self.inner.insert_custom_tool(tool)
    }
    fn update_custom_tool(&self, tool: &CustomToolRow) -> Result<()> {
        self.inner.update_custom_tool(tool)
    }
    fn custom_tools(&self, owner: &str) -> Result<Vec<CustomToolRow>> {
        self.inner.custom_tools(owner)
    }
    fn delete_custom_tool(&self, owner: &str, id: &str) -> Result<bool> {
        self.inner.delete_custom_tool(owner, id)
    }
    fn insert_tool_endpoint(&self, endpoint: &ToolEndpointRow) -> Result<()> {
        self.inner.insert_tool_endpoint(endpoint)
    }
    fn update_tool_endpoint(&self, endpoint: &ToolEndpointRow) -> Result<()> {
        self.inner.update_tool_endpoint(endpoint)
    }
    fn tool_endpoint(&self, owners: &[String], name: &str) -> Result<Option<ToolEndpointRow>> {
        self.inner.tool_endpoint(owners, name)
    }
    fn tool_endpoints(&self, owners: &[String]) -> Result<Vec<ToolEndpointRow>> {
        self.inner.tool_endpoints(owners)
    }
    fn delete_tool_endpoint(&self, id: &str) -> Result<bool> {
        self.inner.delete_tool_endpoint(id)
    }
}

/// A listing read while the first discovery ends — its catalog before the tools were
/// stored, the connection's state after — never says `ready` without the tools (CI:
/// `test_more_real_upstreams_memory_filesystem_git` saw server-memory `ready` with
/// `tool_count` 0). The store stages that interleaving; before the fix the listing read
/// the catalog first and answered exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_is_never_ready_without_the_tools_its_discovery_found() {
    let dir = tempfile::tempdir().unwrap();
    let (read_tx, read_rx) = channel();
    let store = Arc::new(Staged {
        inner: quarry_store_sqlite::SqliteStore::open(&dir.path().join("hub.db")).unwrap(),
        // The discovery's write waits until the reader below has read the generation.
        write_waits_for: Mutex::new(Some(read_rx)),
        read_stage: Mutex::new(None),
    });
    let hub = Hub::new(store.clone(), Vec::new(), HubOptions::default());
    let owner = Principal::owner("default", "");
    let registered = {
        let (hub, owner) = (hub.clone(), owner.clone());
        tokio::task::spawn_blocking(move || {
            hub.register(
                &owner,
                RegisterUpstream {
                    name: "fake".into(),
                    transport_type: "stdio".into(),
                    config: "sh -c".into(),
                    args: vec![FAKE_SERVER.into()],
                    connect_timeout_secs: Some(20),
                    ..Default::default()
                },
            )
        })
        .await
        .unwrap()
        .unwrap()
    };
    // The write is held, so the first discovery cannot have ended.
    assert_eq!(registered.health.status, "connecting", "{registered:?}");
    assert_eq!(registered.tool_count, 0);

    // A listing reads the catalog's generation (no tools yet) and waits there ...
    let (resume_tx, resume_rx) = channel();
    *store.read_stage.lock().unwrap() = Some((read_tx, resume_rx));
    let reader = {
        let (hub, owner, id) = (hub.clone(), owner.clone(), registered.id.clone());
        std::thread::spawn(move || hub.upstream(&owner, &id).unwrap())
    };
    // ... while the discovery stores the tools and the connection reports `ready` ...
    let connecting = {
        let (hub, owner, id) = (hub.clone(), owner.clone(), registered.id.clone());
        tokio::task::spawn_blocking(move || hub.connecting(&owner, &id))
            .await
            .unwrap()
            .unwrap()
            .expect("the registration opened a connection")
    };
    connecting.discovered(STEP).await;
    // ... and then goes on.
    resume_tx.send(()).unwrap();
    let seen = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    assert!(
        seen.health.status != "ready" || seen.tool_count == 1,
        "ready before its tools were known: {seen:?}"
    );

    // Read again, it is ready with its tool.
    let now = {
        let (hub, id) = (hub.clone(), registered.id.clone());
        tokio::task::spawn_blocking(move || hub.upstream(&owner, &id).unwrap())
            .await
            .unwrap()
    };
    assert_eq!(now.health.status, "ready", "{now:?}");
    assert_eq!(now.tool_count, 1, "{now:?}");
    assert_eq!(now.tools_cache[0]["name"], "echo");
    hub.shutdown();
}
