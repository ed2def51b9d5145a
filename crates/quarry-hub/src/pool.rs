//! The connection pool: the hub's asynchronous half. It holds the live upstream connections
//! by upstream id (infrastructure: what a caller may reach is decided by the store and the
//! view, never by this map) and runs what the registry (`registry.rs`) routed — an
//! upstream's tool, resource or prompt, a custom tool, the built-in `web` package — without
//! touching the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::catalog::CatalogTool;
use crate::custom::{CustomCall, CustomResponse, CustomToolError};
use crate::upstream::{CallError, Connection, ProgressSink};
use crate::web::{self, WEB_PACKAGE, WebSearch};

/// How long enabling an upstream over HTTP waits for its first discovery before answering with
/// the status it has (`connecting` for a slow or hanging upstream, which keeps trying in the
/// background). The CLI waits longer (its process holds the only connection).
/// Registration over HTTP does not wait at all: it answers `connecting` and clients poll.
pub const ANSWER_GRACE: Duration = Duration::from_secs(5);

/// Live connections by upstream id, and the `web` package's tool when it is on.
pub(crate) struct Pool {
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    web: Option<WebSearch>,
}

impl Pool {
    /// An empty pool; `web` runs the built-in `web` package's tool.
    pub(crate) fn new(web: Option<WebSearch>) -> Pool {
        Pool {
            connections: Mutex::new(HashMap::new()),
            web,
        }
    }

    /// The map; a panic elsewhere while it was held leaves it usable (every change to it is
    /// a single insert or remove).
    fn connections(&self) -> MutexGuard<'_, HashMap<String, Arc<Connection>>> {
        self.connections.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Upstream `id`'s connection in this process, if any.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Connection>> {
        self.connections().get(id).cloned()
    }

    /// Keeps `conn` as upstream `id`'s connection, stopping the one it replaces.
    pub(crate) fn insert(&self, id: String, conn: Arc<Connection>) {
        let old = self.connections().insert(id, conn);
        if let Some(old) = old {
            old.stop();
        }
    }

    /// Stops and forgets upstream `id`'s connection.
    pub(crate) fn remove(&self, id: &str) {
        let gone = self.connections().remove(id);
        if let Some(c) = gone {
            c.stop();
        }
    }

    /// Stops and forgets the connections `stale(id, connection)` picks; returns how many.
    pub(crate) fn remove_where(&self, stale: impl Fn(&str, &Connection) -> bool) -> usize {
        let gone: Vec<Arc<Connection>> = {
            let mut conns = self.connections();
            let ids: Vec<String> = conns
                .iter()
                .filter(|(id, conn)| stale(id, conn))
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| conns.remove(id)).collect()
        };
        for c in &gone {
            c.stop();
        }
        gone.len()
    }

    /// Stops every connection (children are killed).
    pub(crate) fn stop_all(&self) {
        let conns: Vec<Arc<Connection>> = self.connections().drain().map(|(_, c)| c).collect();
        for c in conns {
            c.stop();
        }
    }

    /// Runs a routed call (`Hub::call`): an upstream's tool, a custom tool, or the built-in
    /// `web` package's (other built-in tools are the server's to run).
    pub(crate) async fn call(
        &self,
        route: Route,
        tool: &CatalogTool,
        arguments: Option<JsonObject>,
        progress: Option<ProgressSink>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallError> {
        match route.0 {
            upstream @ Target::Upstream { .. } => {
                Route(upstream)
                    .connection()
                    .await?
                    .call(&tool.name, arguments, progress, cancel)
                    .await
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
/// (`Hub::set_enabled`, `Hub::connecting`).
pub struct Connecting(Arc<Connection>);

impl Connecting {
    pub(crate) fn new(conn: Arc<Connection>) -> Connecting {
        Connecting(conn)
    }

    /// Waits up to `wait` for the connection's first discovery.
    pub async fn discovered(&self, wait: Duration) {
        self.0.wait_discovered(wait).await;
    }
}

/// A rediscovery to run (`Hub::refresh`).
pub struct Refreshing {
    conn: Arc<Connection>,
    wait: Duration,
}

impl Refreshing {
    /// A rediscovery of `conn` that waits up to `wait`.
    pub(crate) fn new(conn: Arc<Connection>, wait: Duration) -> Refreshing {
        Refreshing { conn, wait }
    }

    /// Rediscovers now, waiting up to the upstream's connect timeout.
    pub async fn finish(self) {
        self.conn.refresh(self.wait).await;
    }
}

/// Where a call, resource read or prompt goes, resolved by the registry (`Hub::route_tool`,
/// `Hub::route_package`) so the asynchronous part touches no store.
pub struct Route(Target);

enum Target {
    /// An upstream's connection; `settle`: first wait this long for its first discovery (a
    /// connection this process has just made).
    Upstream {
        conn: Arc<Connection>,
        settle: Option<Duration>,
    },
    /// Boxed: a prepared custom call is much larger than the other targets.
    Custom(Box<Result<CustomCall, CustomToolError>>),
    Builtin {
        package: String,
    },
}

impl Route {
    /// To an upstream's connection, first waiting up to `settle` for its first discovery.
    pub(crate) fn upstream(conn: Arc<Connection>, settle: Option<Duration>) -> Route {
        Route(Target::Upstream { conn, settle })
    }

    /// To a custom tool (or why it cannot run, reported as the call's result).
    pub(crate) fn custom(prepared: Result<CustomCall, CustomToolError>) -> Route {
        Route(Target::Custom(Box::new(prepared)))
    }

    /// To a built-in package's tool.
    pub(crate) fn builtin(package: String) -> Route {
        Route(Target::Builtin { package })
    }

    /// The upstream connection (settled), or why this route has none.
    pub(crate) async fn connection(self) -> Result<Arc<Connection>, CallError> {
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

/// A custom tool's HTTP response as a tool result: the body as text (and as
/// `structuredContent` when it is a JSON object); an HTTP error status or a failure is
/// `isError` with the reason.
fn custom_result(outcome: Result<CustomResponse, CustomToolError>) -> CallToolResult {
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
