//! Connections to upstream MCP servers, through rmcp's client.
//!
//! One [`Connection`] per registered upstream: a supervisor task connects (stdio child,
//! Streamable HTTP, or legacy HTTP+SSE), negotiates (`server/discover` for 2026-07-28,
//! `initialize` for older servers), discovers the tools, and reconnects with backoff when the
//! connection ends (a crashed child is restarted). Calls share that one connection, at most
//! `max_concurrency` at a time, each with its own timeout; nothing one upstream does can
//! delay another, since every upstream has its own task, connection and permits, and listing
//! never touches a connection (lists are served from the catalog).

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quarry_netguard::NetPolicy;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientCapabilities,
    ClientJsonRpcMessage, ClientRequest, Implementation, InitializeRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerNotification, ServerResult,
    Tool,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, PeerRequestOptions,
    RunningService, ServiceError,
};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use rmcp::{ClientHandler, RoleClient};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{Notify, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::priority::PriorityWork;
use crate::sse::{SseClientConfig, SseClientTransport};

/// How Quarry reaches an upstream (seed 003's `transport_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// A child process speaking MCP over stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// The legacy HTTP+SSE transport.
    Sse,
}

impl TransportKind {
    /// The kind named `s` (`stdio`, `http`, `streamable-http`, `sse`; any case).
    pub fn parse(s: &str) -> Option<TransportKind> {
        match s.to_ascii_lowercase().as_str() {
            "stdio" => Some(TransportKind::Stdio),
            "http" | "streamable-http" | "streamable_http" => Some(TransportKind::Http),
            "sse" => Some(TransportKind::Sse),
            _ => None,
        }
    }

    /// The kind's name (`stdio`, `http`, `sse`).
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::Http => "http",
            TransportKind::Sse => "sse",
        }
    }
}

/// An upstream's options, as stored (no secret values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UpstreamOptions {
    /// Arguments appended, unsplit, after the command line (stdio) — for values with spaces
    /// or quotes.
    pub args: Vec<String>,
    /// Working directory of the child (stdio).
    pub cwd: Option<String>,
    /// Names of the environment variables given to the child (values are secrets).
    pub env_keys: Vec<String>,
    /// Names of the headers sent to an HTTP upstream (values are secrets).
    pub header_names: Vec<String>,
    /// Longest tool call, in seconds.
    pub call_timeout_secs: u64,
    /// Longest connection attempt, in seconds.
    pub connect_timeout_secs: u64,
    /// Tool calls in flight at once.
    pub max_concurrency: usize,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        UpstreamOptions {
            args: Vec::new(),
            cwd: None,
            env_keys: Vec::new(),
            header_names: Vec::new(),
            call_timeout_secs: 60,
            connect_timeout_secs: 30,
            max_concurrency: 16,
        }
    }
}

/// Environment and header values: stored apart from everything that is listed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UpstreamSecrets {
    /// Environment variables for a stdio child.
    pub env: BTreeMap<String, String>,
    /// Headers for an HTTP upstream.
    pub headers: BTreeMap<String, String>,
    /// The upstream's OAuth sign-in (client, tokens, a sign-in under way), sealed under
    /// `QUARRY_SECRET_KEY` (`registry/signin.rs` owns its shape).
    pub oauth: Option<String>,
}

/// Where a connection gets the bearer token of a signed-in upstream: called with the token
/// the upstream just refused (if any), it answers the token to send now — refreshed first
/// when the stored one expires soon or was the refused one — or `None` when nobody has
/// signed in.
pub type BearerSource = Arc<
    dyn Fn(
            Option<String>,
        ) -> futures_util::future::BoxFuture<'static, Result<Option<String>, String>>
        + Send
        + Sync,
>;

/// How a connection error that needs a person to sign in begins (its status is then
/// `auth_required`).
pub const SIGN_IN_REQUIRED: &str = "sign-in required";

/// What a supervisor needs to (re)connect.
#[derive(Clone)]
pub struct ConnectSpec {
    /// The upstream's display name (for logs).
    pub name: String,
    /// How to connect.
    pub transport: TransportKind,
    /// The command line (stdio) or URL (HTTP, SSE).
    pub config: String,
    /// Arguments, timeouts, concurrency.
    pub options: UpstreamOptions,
    /// Environment and header values.
    pub secrets: UpstreamSecrets,
    /// Outbound address policy for HTTP/SSE upstreams; `None` for the machine's owner.
    pub net: Option<NetPolicy>,
    /// The registration's `updated_at` this connection was opened from: a node whose
    /// connection is older than the stored row reconnects (an edit made on another node).
    pub revision: i64,
    /// The bearer token of an OAuth sign-in (Streamable HTTP upstreams).
    pub bearer: Option<BearerSource>,
    /// The upstream's id (with `revision`, the key of the protocol it answered).
    pub id: String,
    /// What every connection of the hub shares: how many stdio upstreams start at once, and
    /// the protocol each one answered.
    pub starts: Starts,
}

/// How an upstream was asked to start its MCP lifecycle, remembered once it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    /// `server/discover` (2026-07-28).
    Discover,
    /// `initialize` (older servers).
    Initialize,
}

/// What the connections of one hub share (issue 65, item 15): how many stdio upstreams are
/// being started at once, each from its spawn to its first tool list — 70 children started
/// together on a busy machine each took over 10 s, and starved the model load beside them —
/// and the protocol each upstream answered in this process, so that its restarts ask with
/// that at once (`server/discover` with the whole connect timeout, or `initialize`) instead
/// of probing again.
#[derive(Clone)]
pub struct Starts {
    permits: Arc<Semaphore>,
    /// While this work is under way, one start at a time (its one permit is taken on top).
    narrow: Option<(CancellationToken, Arc<Semaphore>)>,
    /// By upstream id and revision.
    eras: Arc<Mutex<HashMap<String, Era>>>,
}

/// A start's turn: held from the spawn to the first tool list.
struct StartTurn {
    _narrow: Option<tokio::sync::OwnedSemaphorePermit>,
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Starts {
    /// At most `limit` (at least 1) starts at once; one at a time while `narrow_while` is
    /// under way.
    pub fn new(limit: usize, narrow_while: Option<&PriorityWork>) -> Starts {
        Starts {
            permits: Arc::new(Semaphore::new(limit.max(1))),
            narrow: narrow_while.map(|w| (w.token().clone(), Arc::new(Semaphore::new(1)))),
            eras: Arc::default(),
        }
    }

    /// Waits for a start's turn.
    async fn turn(&self) -> StartTurn {
        let narrow = match &self.narrow {
            Some((until, one)) if !until.is_cancelled() => tokio::select! {
                p = one.clone().acquire_owned() => p.ok(),
                // Finished meanwhile: the waiters go on to the ordinary limit.
                _ = until.cancelled() => None,
            },
            _ => None,
        };
        StartTurn {
            _narrow: narrow,
            _permit: self.permits.clone().acquire_owned().await.ok(),
        }
    }

    fn eras(&self) -> std::sync::MutexGuard<'_, HashMap<String, Era>> {
        self.eras.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn era(&self, key: &str) -> Option<Era> {
        self.eras().get(key).copied()
    }

    /// Remembers what `key` answered; `None` forgets it (what it answered before failed).
    fn remember(&self, key: &str, era: Option<Era>) {
        match era {
            Some(era) => self.eras().insert(key.to_owned(), era),
            None => self.eras().remove(key),
        };
    }
}

impl ConnectSpec {
    /// The key of the protocol this upstream answered: an edit (a new command, new
    /// arguments) asks again.
    fn era_key(&self) -> String {
        format!("{}@{}", self.id, self.revision)
    }
}

/// Variables a child gets from Quarry's own environment: what programs need to start
/// (finding `node`, a home for caches, the locale), never anything that could hold a key.
const CHILD_ENV_PASSTHROUGH: [&str; 8] = [
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER",
];

/// Splits a command line the way a POSIX shell would for simple cases: whitespace
/// separates words, single and double quotes group, a backslash escapes the next character
/// (outside single quotes). No expansion of any kind.
pub fn split_command_line(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err("unterminated single quote in command".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x) => cur.push(x),
                            None => return Err("command ends with a backslash".into()),
                        },
                        Some(x) => cur.push(x),
                        None => return Err("unterminated double quote in command".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(x) => {
                    in_word = true;
                    cur.push(x);
                }
                None => return Err("command ends with a backslash".into()),
            },
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// The program and arguments of a stdio upstream: the command line split like a shell
/// would, then `args` as given.
pub fn command_of(
    config: &str,
    options: &UpstreamOptions,
) -> Result<(String, Vec<String>), String> {
    let mut words = split_command_line(config)?;
    if words.is_empty() || words[0].is_empty() {
        return Err("the command is empty".into());
    }
    let program = words.remove(0);
    words.extend(options.args.iter().cloned());
    Ok((program, words))
}

/// Where a connection stands, for listings and health.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Health {
    /// `connecting`, `ready`, `error` or `disabled`.
    pub status: &'static str,
    /// The last connection or discovery error, if any.
    pub last_error: Option<String>,
    /// The protocol version negotiated with the upstream.
    pub protocol_version: Option<String>,
    /// The upstream's name, as it said at negotiation.
    pub server_name: Option<String>,
    /// The upstream's version, as it said at negotiation.
    pub server_version: Option<String>,
    /// Times the connection was re-established after ending.
    pub restarts: u64,
    /// Last lines the child wrote to stderr (stdio).
    pub stderr_tail: Vec<String>,
}

impl Health {
    /// A connection in `status` with nothing else known yet (`idle`: registered by another
    /// process and not used here; `disabled`).
    pub fn new(status: &'static str) -> Health {
        Health {
            status,
            last_error: None,
            protocol_version: None,
            server_name: None,
            server_version: None,
            restarts: 0,
            stderr_tail: Vec::new(),
        }
    }
}

/// Lines of a child's stderr kept for [`Health::stderr_tail`].
const STDERR_TAIL: usize = 20;
/// First and longest wait before reconnecting.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Progress of one forwarded call, delivered to whoever called through the hub.
pub type ProgressSink = Arc<dyn Fn(ProgressNotificationParam) + Send + Sync>;

/// The client side of one connection: fixed capabilities, progress routing, list changes.
#[derive(Clone)]
struct HubClient {
    /// rmcp gives every request its own progress token; the hub maps it back to the
    /// downstream caller's (delivered by [`UpstreamWire`] as the wire is read).
    progress: ProgressSinks,
    tools_changed: Arc<Notify>,
}

/// The capabilities Quarry declares to every upstream (the catalog is discovered under
/// these, so a tool list never depends on who connected first): none — no sampling, roots
/// or elicitation, which a gateway cannot route back to a human.
pub fn client_info() -> InitializeRequestParams {
    InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("quarry-hub", env!("CARGO_PKG_VERSION")),
    )
}

impl ClientHandler for HubClient {
    fn get_info(&self) -> InitializeRequestParams {
        client_info()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

/// What discovery found, handed to the hub to write into the catalog. The write runs on
/// the blocking pool (it touches the store); its task is awaited before the connection
/// reports `ready`, so whoever waits for discovery reads the tools it found.
pub type OnDiscovered =
    Arc<dyn Fn(&Discovered) -> Option<tokio::task::JoinHandle<()>> + Send + Sync>;

/// Why a call through the hub failed (the tool's own errors are results, not these).
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// Not connected (or disabled); the text says why.
    Unavailable(String),
    /// No answer within this long.
    Timeout(Duration),
    /// The caller cancelled the call.
    Cancelled,
    /// The upstream answered with a JSON-RPC error.
    Upstream {
        /// The JSON-RPC error code.
        code: i32,
        /// The JSON-RPC error message.
        message: String,
    },
    /// The upstream asked for client input (sampling, elicitation), which a gateway has no
    /// person to route to.
    InputRequired,
    /// The connection failed while the call was in flight.
    Transport(String),
    /// Refused before it reached anything (a tool policy, an approval to wait for); the
    /// text is what the caller is told.
    Refused(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unavailable(why) => write!(f, "upstream unavailable: {why}"),
            CallError::Timeout(d) => {
                write!(f, "upstream did not answer within {} s", d.as_secs_f32())
            }
            CallError::Cancelled => f.write_str("call cancelled"),
            CallError::Refused(why) => f.write_str(why),
            CallError::Upstream { code, message } => write!(f, "upstream error {code}: {message}"),
            CallError::InputRequired => f.write_str(
                "the upstream asked for client input (sampling or elicitation), which the hub does not relay",
            ),
            CallError::Transport(e) => write!(f, "upstream connection failed: {e}"),
        }
    }
}

/// One upstream's live connection and its supervisor.
pub struct Connection {
    name: String,
    peer: watch::Sender<Option<Peer<RoleClient>>>,
    health: Mutex<Health>,
    permits: Semaphore,
    call_timeout: Duration,
    client: HubClient,
    /// Asks the supervisor to rediscover now (or reconnect now, if it is waiting).
    refresh: Notify,
    /// A request failed in a way that may mean the connection or its session is gone
    /// (transport error, timeout): the supervisor checks it with a `ping`.
    suspect: Notify,
    /// How long a call waits for a connection that is being (re)established.
    connect_timeout: Duration,
    /// Whether a failed call makes the supervisor check the connection: over HTTP and SSE,
    /// where a session can be lost while the transport looks open. A stdio child that dies
    /// ends its connection by itself, and one busy with a slow call should not be restarted.
    probes: bool,
    /// Bumped after every discovery attempt (success or failure).
    discovered: watch::Sender<u64>,
    stop: CancellationToken,
    /// `tools` arrays of `tools/list` answers seen on a stdio wire since discovery began.
    raw_tools: Arc<Mutex<Vec<serde_json::Value>>>,
    /// When this connection was opened (the hub follower leaves young ones alone).
    opened: std::time::Instant,
    /// [`ConnectSpec::revision`].
    revision: i64,
}

impl Connection {
    /// How long ago this connection was opened.
    pub fn age(&self) -> Duration {
        self.opened.elapsed()
    }

    /// The registration's `updated_at` it was opened from.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Starts a supervisor for `spec`. `on_discovered` runs after each successful discovery.
    pub fn start(spec: ConnectSpec, on_discovered: OnDiscovered) -> Arc<Connection> {
        let conn = Arc::new(Connection {
            name: spec.name.clone(),
            peer: watch::channel(None).0,
            health: Mutex::new(Health::new("connecting")),
            permits: Semaphore::new(spec.options.max_concurrency.max(1)),
            call_timeout: Duration::from_secs(spec.options.call_timeout_secs.max(1)),
            client: HubClient {
                progress: Arc::default(),
                tools_changed: Arc::new(Notify::new()),
            },
            refresh: Notify::new(),
            suspect: Notify::new(),
            connect_timeout: Duration::from_secs(spec.options.connect_timeout_secs.max(1)),
            probes: spec.transport != TransportKind::Stdio,
            discovered: watch::channel(0).0,
            stop: CancellationToken::new(),
            raw_tools: Arc::default(),
            opened: std::time::Instant::now(),
            revision: spec.revision,
        });
        tokio::spawn(supervise(conn.clone(), spec, on_discovered));
        conn
    }

    /// Stops the supervisor and closes the connection (the child is killed).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Where the connection stands.
    pub fn health(&self) -> Health {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_health(&self, f: impl FnOnce(&mut Health)) {
        f(&mut self.health.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Rediscovers the tools now and waits (up to `wait`) for that attempt to finish.
    pub async fn refresh(&self, wait: Duration) {
        let mut rx = self.discovered.subscribe();
        rx.mark_unchanged();
        self.refresh.notify_one();
        let _ = tokio::time::timeout(wait, rx.changed()).await;
    }

    /// Waits (up to `wait`) until the first discovery attempt has finished.
    pub async fn wait_discovered(&self, wait: Duration) {
        let mut rx = self.discovered.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(|n| *n > 0)).await;
    }

    /// Calls `name` on the upstream. Progress notifications go to `progress`; cancelling
    /// `cancel` cancels the upstream request too.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        progress: Option<ProgressSink>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallError> {
        let peer = self.ready_peer(&cancel).await?;
        let _permit = tokio::select! {
            p = self.permits.acquire() => p.map_err(|_| CallError::Unavailable("closed".into()))?,
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
            _ = tokio::time::sleep(self.call_timeout) => return Err(CallError::Timeout(self.call_timeout)),
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(args) = arguments {
            params = params.with_arguments(args);
        }
        let request = ClientRequest::CallToolRequest(rmcp::model::Request::new(params));
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                let failed = Err(service_error(e));
                self.note_failure(&failed);
                return failed;
            }
        };
        let token = handle.progress_token.clone();
        let id = handle.id.clone();
        if let Some(sink) = progress {
            self.client
                .progress
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(token.clone(), sink);
        }
        let outcome = tokio::select! {
            r = handle.await_response() => match r {
                Ok(ServerResult::CallToolResult(result)) => Ok(result),
                Ok(ServerResult::InputRequiredResult(_)) => Err(CallError::InputRequired),
                Ok(_) => Err(CallError::Transport("the upstream answered tools/call with another kind of result".into())),
                Err(e) => Err(service_error(e)),
            },
            _ = cancel.cancelled() => Err(CallError::Cancelled),
            _ = tokio::time::sleep(self.call_timeout) => Err(CallError::Timeout(self.call_timeout)),
        };
        self.client
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&token);
        self.note_failure(&outcome);
        if matches!(outcome, Err(CallError::Cancelled | CallError::Timeout(_))) {
            // Tell the upstream to stop working on it.
            let reason = match &outcome {
                Err(CallError::Timeout(_)) => "timed out in quarry-hub",
                _ => "cancelled by the client",
            };
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(
                    Some(id),
                    Some(reason.to_owned()),
                ))
                .await;
        }
        outcome
    }
}

impl Connection {
    /// The live peer. While the supervisor is (re)connecting, waits for it (up to the
    /// connect timeout, within the call timeout), so a call made while a lost session is
    /// being re-established succeeds instead of failing at once.
    async fn ready_peer(&self, cancel: &CancellationToken) -> Result<Peer<RoleClient>, CallError> {
        if let Some(peer) = self.peer.borrow().clone() {
            return Ok(peer);
        }
        if self.health().status == "connecting" {
            let mut rx = self.peer.subscribe();
            let wait = self.connect_timeout.min(self.call_timeout);
            let waited = tokio::select! {
                r = tokio::time::timeout(wait, rx.wait_for(Option::is_some)) => {
                    r.ok().and_then(|r| r.ok()).and_then(|p| p.clone())
                }
                _ = cancel.cancelled() => return Err(CallError::Cancelled),
            };
            if let Some(peer) = waited {
                return Ok(peer);
            }
        }
        let h = self.health();
        Err(CallError::Unavailable(
            h.last_error
                .map(|e| format!("'{}' is {}: {e}", self.name, h.status))
                .unwrap_or_else(|| format!("'{}' is {}", self.name, h.status)),
        ))
    }

    /// Asks the supervisor to check the connection after a failure that may mean it is
    /// gone (a tool's own error, or the upstream's JSON-RPC error, says nothing about it).
    fn note_failure<T>(&self, outcome: &Result<T, CallError>) {
        if self.probes
            && matches!(
                outcome,
                Err(CallError::Transport(_) | CallError::Timeout(_))
            )
        {
            self.suspect.notify_one();
        }
    }

    /// Runs one request on the shared connection: within the concurrency limit, the call
    /// timeout, and the caller's cancellation.
    async fn bounded<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, ServiceError>>,
        cancel: CancellationToken,
    ) -> Result<T, CallError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| CallError::Unavailable("closed".into()))?;
        let outcome = tokio::select! {
            r = request => r.map_err(service_error),
            _ = cancel.cancelled() => Err(CallError::Cancelled),
            _ = tokio::time::sleep(self.call_timeout) => Err(CallError::Timeout(self.call_timeout)),
        };
        self.note_failure(&outcome);
        outcome
    }

    /// Reads a resource of the upstream.
    pub async fn read_resource(
        &self,
        uri: &str,
        cancel: CancellationToken,
    ) -> Result<rmcp::model::ReadResourceResult, CallError> {
        let peer = self.ready_peer(&cancel).await?;
        self.bounded(
            peer.read_resource(rmcp::model::ReadResourceRequestParams::new(uri)),
            cancel,
        )
        .await
    }

    /// Gets a prompt of the upstream.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        cancel: CancellationToken,
    ) -> Result<rmcp::model::GetPromptResult, CallError> {
        let peer = self.ready_peer(&cancel).await?;
        let mut params = rmcp::model::GetPromptRequestParams::new(name);
        params.arguments = arguments;
        self.bounded(peer.get_prompt(params), cancel).await
    }
}

fn service_error(e: ServiceError) -> CallError {
    match e {
        ServiceError::McpError(data) => CallError::Upstream {
            code: data.code.0,
            message: data.message.to_string(),
        },
        ServiceError::Timeout { timeout } => CallError::Timeout(timeout),
        ServiceError::Cancelled { .. } => CallError::Cancelled,
        ServiceError::TransportSend(e) => CallError::Transport(causes(&*e.error)),
        other => CallError::Transport(other.to_string()),
    }
}

type Running = RunningService<RoleClient, HubClient>;

/// A stdio upstream's process (its group is killed when this drops).
type Child = Box<dyn process_wrap::tokio::ChildWrapper>;

/// Connects once: spawns the child or opens the HTTP connection, and negotiates.
async fn connect(
    spec: &ConnectSpec,
    client: HubClient,
    conn: &Arc<Connection>,
) -> Result<(Running, Option<Child>), String> {
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let timeout = Duration::from_secs(spec.options.connect_timeout_secs.max(1));
    let fut = async {
        match spec.transport {
            TransportKind::Stdio => {
                let key = spec.era_key();
                let known = spec.starts.era(&key);
                let first = match known {
                    Some(Era::Discover) => discover_only(),
                    Some(Era::Initialize) => ClientLifecycleMode::Initialize,
                    None => lifecycle.clone(),
                };
                let late = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let (child, wire) = spawn_stdio(spec, conn, late.clone())?;
                let slot = Arc::new(Mutex::new(None));
                let outcome = match client
                    .clone()
                    .serve_with_lifecycle(Reclaim::new(wire, &slot), first)
                    .await
                {
                    Ok(running) => Ok(running),
                    // It answered `server/discover` after rmcp had given up on it (10 s, its
                    // own constant) and sent `initialize`, which a 2026-07-28 server refuses
                    // on that wire: a modern server slow to start (a cold uvx, npx or docker
                    // run; issue 41, item 11). Both answers have been read, so the same
                    // process is asked again with `server/discover` alone: never started
                    // twice (issue 65, item 15).
                    Err(_) if late.load(std::sync::atomic::Ordering::Acquire) => {
                        tracing::info!(
                            upstream = %conn.name,
                            "answered server/discover after the 10 s probe; asking it again with server/discover"
                        );
                        let wire = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                        match wire {
                            Some(wire) => client
                                .serve_with_lifecycle(wire, discover_only())
                                .await
                                .map_err(handshake_error),
                            None => Err("the upstream's stdio closed during the handshake".into()),
                        }
                    }
                    Err(e) => Err(handshake_error(e)),
                };
                match outcome {
                    Ok(running) => {
                        let era = running.peer().peer_info().map(|i| {
                            if i.protocol_version.has_initialize() {
                                Era::Initialize
                            } else {
                                Era::Discover
                            }
                        });
                        spec.starts.remember(&key, era);
                        Ok((running, Some(child)))
                    }
                    Err(e) => {
                        // What it answered before failed: the next start probes again.
                        if known.is_some() {
                            spec.starts.remember(&key, None);
                        }
                        Err(e)
                    }
                }
            }
            TransportKind::Http => {
                let http = guarded_http_client(&spec.config, spec.net.as_ref()).await?;
                let mut bearer = match &spec.bearer {
                    Some(source) => source(None).await?,
                    None => None,
                };
                let mut retried = false;
                loop {
                    let challenge: Arc<Mutex<Option<String>>> = Arc::default();
                    let mut headers: HashMap<_, _> =
                        configured_headers(spec)?.into_iter().collect();
                    if let Some(token) = &bearer {
                        let value = http::HeaderValue::from_str(&format!("Bearer {token}"))
                            .map_err(|_| {
                                "the upstream's access token is not a valid header value".to_owned()
                            })?;
                        headers.insert(http::header::AUTHORIZATION, value);
                    }
                    let config =
                        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                            spec.config.as_str(),
                        )
                        .custom_headers(headers);
                    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                        SessionClient {
                            http: http.clone(),
                            challenge: challenge.clone(),
                        },
                        config,
                    );
                    match client
                        .clone()
                        .serve_with_lifecycle(
                            UpstreamWire::new(
                                transport,
                                &client.progress,
                                Arc::new(Default::default()),
                            ),
                            lifecycle.clone(),
                        )
                        .await
                    {
                        Ok(running) => break Ok((running, None)),
                        Err(e) => {
                            let asked = challenge.lock().unwrap_or_else(|p| p.into_inner()).take();
                            let Some(asked) = asked else {
                                break Err(handshake_error(e));
                            };
                            // A refused token is refreshed once; then a person must sign in.
                            if let (Some(source), Some(token), false) =
                                (&spec.bearer, bearer.clone(), retried)
                            {
                                retried = true;
                                let fresh = source(Some(token.clone())).await?;
                                if fresh.is_some() && fresh.as_ref() != Some(&token) {
                                    bearer = fresh;
                                    continue;
                                }
                            }
                            let what = if bearer.is_some() {
                                "the upstream refused its access token and it could not be refreshed"
                            } else {
                                "the upstream asks for OAuth"
                            };
                            break Err(format!(
                                "{SIGN_IN_REQUIRED}: {what} ({asked}); sign in from the web UI's Tools page or with POST /api/v1/mcp/servers/<id>/oauth"
                            ));
                        }
                    }
                }
            }
            TransportKind::Sse => {
                let http = guarded_http_client(&spec.config, spec.net.as_ref()).await?;
                let headers: http::HeaderMap = configured_headers(spec)?.into_iter().collect();
                let transport = SseClientTransport::connect(
                    http,
                    SseClientConfig {
                        url: spec.config.clone(),
                        headers,
                        connect_timeout: timeout,
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
                let wire = UpstreamWire::new(transport, &client.progress, Arc::default());
                // The legacy transport predates `server/discover`.
                client
                    .serve_with_lifecycle(wire, ClientLifecycleMode::Initialize)
                    .await
                    .map(|running| (running, None))
                    .map_err(handshake_error)
            }
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("no MCP handshake within {} s", timeout.as_secs())),
    }
}

/// The lifecycle of an upstream known to answer `server/discover`: asked with it alone,
/// waiting for the whole connect timeout.
fn discover_only() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// The headers an HTTP or SSE upstream was registered with.
fn configured_headers(
    spec: &ConnectSpec,
) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, String> {
    spec.secrets
        .headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("invalid header name '{k}'"))?;
            let value = http::HeaderValue::from_str(v)
                .map_err(|_| format!("invalid value for header '{k}'"))?;
            Ok((name, value))
        })
        .collect()
}

/// Starts a stdio upstream's process (its own process group, a clean environment, stderr
/// kept in the health's tail) and wraps its stdin and stdout as an MCP transport; `late` is
/// set when it answers a `server/discover` that was given up on.
fn spawn_stdio(
    spec: &ConnectSpec,
    conn: &Arc<Connection>,
    late: Arc<std::sync::atomic::AtomicBool>,
) -> Result<(Child, impl rmcp::transport::Transport<RoleClient> + 'static), String> {
    let (program, args) = command_of(&spec.config, &spec.options)?;
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&args).env_clear();
    for key in CHILD_ENV_PASSTHROUGH {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd.envs(&spec.secrets.env);
    if let Some(dir) = &spec.options.cwd {
        cmd.current_dir(dir);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
    // Its own process group, so `npx`-style launchers' grandchildren die with it.
    wrapped
        .wrap(process_wrap::tokio::ProcessGroup::leader())
        .wrap(process_wrap::tokio::KillOnDrop);
    let mut child = wrapped
        .spawn()
        .map_err(|e| format!("cannot start '{program}': {e}"))?;
    let (Some(stdout), Some(stdin)) = (child.stdout().take(), child.stdin().take()) else {
        return Err("the child's stdio could not be opened".into());
    };
    if let Some(stderr) = child.stderr().take() {
        let conn = conn.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(upstream = %conn.name, "stderr: {line}");
                conn.set_health(|h| {
                    if h.stderr_tail.len() == STDERR_TAIL {
                        h.stderr_tail.remove(0);
                    }
                    h.stderr_tail.push(line);
                });
            }
        });
    }
    let reader = TeeReader::new(stdout, conn.raw_tools.clone());
    let transport = UpstreamWire::new(
        rmcp::transport::async_rw::AsyncRwTransport::new_client(reader, stdin),
        &conn.client.progress,
        late,
    );
    Ok((child, transport))
}

/// Why a handshake failed, in words: rmcp names a failed transport by its Rust type
/// (`WorkerTransport<StreamableHttpClientWorker<…>>`), which says nothing to a person, so a
/// transport failure is told by its chain of causes (where the real reason — a refused
/// address, a refused connection — is).
fn handshake_error(e: rmcp::service::ClientInitializeError) -> String {
    match e {
        rmcp::service::ClientInitializeError::TransportError { error, context } => {
            format!(
                "MCP handshake failed ({context}): {}",
                causes(&*error.error)
            )
        }
        other => format!("MCP handshake failed: {other}"),
    }
}

/// An error and its sources, each said once (an error often repeats its source's text).
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.retain(|p| !text.contains(p.as_str()));
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}

/// The HTTP client for an upstream, after its URL passed the outbound guard (the literal
/// URL, and the addresses its name resolves to).
pub(crate) async fn guarded_http_client(
    config: &str,
    net: Option<&NetPolicy>,
) -> Result<reqwest::Client, String> {
    let client = http_client(config, net)?;
    if let (Some(policy), Ok(url)) = (net, url::Url::parse(config)) {
        quarry_netguard::check_resolved(policy, &url)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(client)
}

fn http_client(config: &str, net: Option<&NetPolicy>) -> Result<reqwest::Client, String> {
    quarry_netguard::ensure_crypto_provider();
    let url = url::Url::parse(config).map_err(|e| format!("invalid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("the URL must start with http:// or https://".into());
    }
    // No total timeout (SSE and Streamable HTTP streams live as long as the connection;
    // calls have their own), and no redirects: an MCP endpoint has no reason to move, and
    // following one would carry the configured headers elsewhere.
    let builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10));
    match net {
        Some(policy) => {
            quarry_netguard::check_url(policy, &url).map_err(|e| e.to_string())?;
            builder
                .dns_resolver(quarry_netguard::GuardedResolver::new(Arc::new(
                    policy.clone(),
                )))
                .build()
                .map_err(|e| e.to_string())
        }
        None => builder.build().map_err(|e| e.to_string()),
    }
}

/// rmcp's reqwest client, except that a JSON-RPC error without an id, answering a request
/// sent in a session, means the session is gone. Servers on the TypeScript SDK
/// (server-everything among them) answer an unknown session id — after a restart — with
/// `400` and such an error instead of `404`; rmcp would route it to no request, and the call
/// would wait out its timeout. As `SessionExpired`, rmcp re-initialises and retries the
/// request once.
#[derive(Clone)]
struct SessionClient {
    http: reqwest::Client,
    /// The `WWW-Authenticate` challenge of a `401`, kept for the connection to tell a
    /// server that wants a sign-in from one that is down.
    challenge: Arc<Mutex<Option<String>>>,
}

impl SessionClient {
    fn note(&self, result: &PostResult) {
        if let Err(StreamableHttpError::AuthRequired(e)) = result {
            *self.challenge.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(e.www_authenticate_header.clone());
        }
    }
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// Whether `message` is a request sent inside a session (what [`session_lost`] judges).
fn sent_in_session(session_id: &Option<Arc<str>>, message: &ClientJsonRpcMessage) -> bool {
    session_id.is_some() && matches!(message, ClientJsonRpcMessage::Request(_))
}

fn session_lost(in_session_request: bool, result: PostResult) -> PostResult {
    match result {
        Ok(StreamableHttpPostResponse::Json(rmcp::model::JsonRpcMessage::Error(e), _))
            if in_session_request && e.id.is_none() =>
        {
            tracing::info!(
                "the upstream no longer knows the session: {}",
                e.error.message
            );
            Err(StreamableHttpError::SessionExpired)
        }
        other => other,
    }
}

impl StreamableHttpClient for SessionClient {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> impl std::future::Future<Output = PostResult> + Send + '_ {
        let in_session_request = sent_in_session(&session_id, &message);
        async move {
            let result = self
                .http
                .post_message(uri, message, session_id, auth_header, custom_headers)
                .await;
            self.note(&result);
            session_lost(in_session_request, result)
        }
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl std::future::Future<Output = PostResult> + Send + '_ {
        let in_session_request = sent_in_session(&session_id, &message);
        async move {
            let result = self
                .http
                .post_message_with_max_sse_event_size(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await;
            self.note(&result);
            session_lost(in_session_request, result)
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> impl std::future::Future<Output = Result<(), StreamableHttpError<reqwest::Error>>> + Send + '_
    {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> impl std::future::Future<
        Output = Result<BoxedSseResponse, StreamableHttpError<reqwest::Error>>,
    > + Send
    + '_ {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl std::future::Future<
        Output = Result<BoxedSseResponse, StreamableHttpError<reqwest::Error>>,
    > + Send
    + '_ {
        self.http.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

/// What discovery found: typed tools and, where the wire was seen (stdio), each tool's JSON
/// exactly as the upstream sent it (rmcp's types drop fields they do not know).
#[derive(Clone)]
pub struct Discovered {
    /// The tools, typed.
    pub tools: Vec<Tool>,
    /// Each tool's JSON as the upstream sent it, by name (stdio only).
    pub raw: HashMap<String, serde_json::Value>,
    /// Resources, resource templates and prompts, when the upstream offers them.
    pub surface: Surface,
}

/// What an upstream offers besides tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Surface {
    /// Resources.
    pub resources: Vec<rmcp::model::Resource>,
    /// Resource templates.
    pub resource_templates: Vec<rmcp::model::ResourceTemplate>,
    /// Prompts.
    pub prompts: Vec<rmcp::model::Prompt>,
}

/// Lists every tool, following pagination.
async fn discover(
    conn: &Connection,
    peer: &Peer<RoleClient>,
    timeout: Duration,
) -> Result<Discovered, String> {
    conn.raw_tools
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
    match tokio::time::timeout(timeout, peer.list_all_tools()).await {
        Ok(Ok(tools)) => {
            let pages =
                std::mem::take(&mut *conn.raw_tools.lock().unwrap_or_else(|p| p.into_inner()));
            let raw = pages
                .into_iter()
                .filter_map(|t| Some((t.get("name")?.as_str()?.to_owned(), t)))
                .collect();
            let caps = peer.peer_info().map(|i| i.capabilities.clone());
            let mut surface = Surface::default();
            // What else the upstream offers; a failure here leaves that part empty.
            if caps.as_ref().is_some_and(|c| c.resources.is_some()) {
                if let Ok(Ok(r)) = tokio::time::timeout(timeout, peer.list_all_resources()).await {
                    surface.resources = r;
                }
                if let Ok(Ok(t)) =
                    tokio::time::timeout(timeout, peer.list_all_resource_templates()).await
                {
                    surface.resource_templates = t;
                }
            }
            if caps.as_ref().is_some_and(|c| c.prompts.is_some())
                && let Ok(Ok(p)) = tokio::time::timeout(timeout, peer.list_all_prompts()).await
            {
                surface.prompts = p;
            }
            Ok(Discovered {
                tools,
                raw,
                surface,
            })
        }
        // A server that declares no tools may refuse to list them.
        Ok(Err(_))
            if peer
                .peer_info()
                .is_some_and(|i| i.capabilities.tools.is_none()) =>
        {
            Ok(Discovered {
                tools: Vec::new(),
                raw: HashMap::new(),
                surface: Surface::default(),
            })
        }
        Ok(Err(e)) => Err(format!("tools/list failed: {e}")),
        Err(_) => Err(format!(
            "tools/list took longer than {} s",
            timeout.as_secs()
        )),
    }
}

async fn supervise(conn: Arc<Connection>, spec: ConnectSpec, on_discovered: OnDiscovered) {
    let mut backoff = BACKOFF_MIN;
    let mut attempts: u64 = 0;
    let discover_timeout = Duration::from_secs(spec.options.connect_timeout_secs.max(1));
    let probe_timeout = discover_timeout.min(PROBE_TIMEOUT_MAX);
    loop {
        if conn.stop.is_cancelled() {
            break;
        }
        // `last_error` stays: while reconnecting, it says why. An upstream waiting for a
        // sign-in stays `auth_required` while it is retried: only a person can change that.
        conn.set_health(|h| {
            if h.status != "auth_required" {
                h.status = "connecting";
            }
        });
        // A stdio child's start waits its turn, and keeps it until its first tool list.
        let turn = match spec.transport {
            TransportKind::Stdio => tokio::select! {
                t = spec.starts.turn() => Some(t),
                _ = conn.stop.cancelled() => break,
            },
            TransportKind::Http | TransportKind::Sse => None,
        };
        let connected = tokio::select! {
            r = connect(&spec, conn.client.clone(), &conn) => r,
            _ = conn.stop.cancelled() => break,
        };
        match connected {
            Ok((running, child)) => {
                // Lives as long as this connection; dropping it kills the process group.
                let _child = child;
                attempts += 1;
                let peer = running.peer().clone();
                let info = peer.peer_info();
                conn.set_health(|h| {
                    h.protocol_version = info.as_ref().map(|i| i.protocol_version.to_string());
                    h.server_name = info
                        .as_ref()
                        .and_then(|i| i.server_info.as_ref())
                        .map(|s| s.name.clone());
                    h.server_version = info
                        .as_ref()
                        .and_then(|i| i.server_info.as_ref())
                        .map(|s| s.version.clone());
                    if attempts > 1 {
                        h.restarts += 1;
                    }
                });
                // A connection whose tools cannot be listed is not ready: it is dropped
                // and tried again with backoff (the catalog keeps what was found before).
                let first = discover(&conn, &peer, discover_timeout).await;
                let discovered = record_discovery(&conn, first, &on_discovered).await;
                drop(turn);
                if !discovered {
                    running.cancellation_token().cancel();
                    if !wait_backoff(&conn, &mut backoff).await {
                        break;
                    }
                    continue;
                }
                conn.peer.send_replace(Some(peer.clone()));
                backoff = BACKOFF_MIN;
                // 2026-07-28 servers send list changes only on a subscription.
                let listen = info.as_ref().is_some_and(|i| {
                    i.protocol_version >= ProtocolVersion::V_2026_07_28
                        && i.capabilities
                            .tools
                            .as_ref()
                            .is_some_and(|t| t.list_changed == Some(true))
                });
                let listener = listen.then(|| {
                    let peer = peer.clone();
                    let changed = conn.client.tools_changed.clone();
                    tokio::spawn(async move {
                        let filter = rmcp::model::SubscriptionFilter::builder()
                            .tools_list_changed()
                            .build();
                        let Ok(mut sub) = peer.listen(filter).await else {
                            return;
                        };
                        while let Ok(Some(n)) = sub.next().await {
                            if matches!(
                                n,
                                rmcp::model::ServerNotification::ToolListChangedNotification(_)
                            ) {
                                changed.notify_one();
                            }
                        }
                    })
                });
                let ct = running.cancellation_token();
                let waiting = running.waiting();
                tokio::pin!(waiting);
                // Whether the connection was given up for a fresh one now (lost session,
                // failed rediscovery) rather than closed by the other side.
                let mut lost = false;
                loop {
                    tokio::select! {
                        _ = &mut waiting => {
                            conn.set_health(|h| {
                                h.status = "error";
                                h.last_error = Some("the connection closed".into());
                            });
                            break;
                        }
                        _ = conn.stop.cancelled() => {
                            if let Some(l) = &listener {
                                l.abort();
                            }
                            ct.cancel();
                            let _ = tokio::time::timeout(Duration::from_secs(5), &mut waiting).await;
                            conn.peer.send_replace(None);
                            return;
                        }
                        _ = conn.suspect.notified() => {
                            if let Err(e) = probe(&peer, probe_timeout).await {
                                tracing::warn!(upstream = %conn.name, "connection lost: {e}");
                                conn.set_health(|h| {
                                    h.status = "connecting";
                                    h.last_error = Some(format!("connection lost ({e}); reconnecting"));
                                });
                                lost = true;
                                break;
                            }
                        }
                        _ = conn.refresh.notified() => {
                            let r = discover(&conn, &peer, discover_timeout).await;
                            if !record_discovery(&conn, r, &on_discovered).await {
                                break;
                            }
                        }
                        _ = conn.client.tools_changed.notified() => {
                            let r = discover(&conn, &peer, discover_timeout).await;
                            if !record_discovery(&conn, r, &on_discovered).await {
                                break;
                            }
                        }
                    }
                }
                if let Some(l) = listener {
                    l.abort();
                }
                conn.peer.send_replace(None);
                ct.cancel();
                if lost {
                    // Re-initialise at once: the upstream answered before, so it most
                    // likely restarted or dropped the session.
                    continue;
                }
            }
            Err(e) => {
                drop(turn);
                tracing::warn!(upstream = %conn.name, "cannot connect: {e}");
                conn.set_health(|h| {
                    h.status = if e.starts_with(SIGN_IN_REQUIRED) {
                        "auth_required"
                    } else {
                        "error"
                    };
                    h.last_error = Some(e);
                });
                conn.discovered.send_modify(|n| *n += 1);
            }
        }
        if !wait_backoff(&conn, &mut backoff).await {
            break;
        }
    }
    conn.peer.send_replace(None);
}

/// Longest wait for a `ping` that checks a suspect connection.
const PROBE_TIMEOUT_MAX: Duration = Duration::from_secs(10);

/// Whether the upstream still answers on this connection: a `tools/list` (every protocol
/// era has it; `ping` is gone from 2026-07-28). Any answer counts, a JSON-RPC error included;
/// a transport failure or silence does not.
async fn probe(peer: &Peer<RoleClient>, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, peer.list_tools(None)).await {
        Ok(Ok(_)) | Ok(Err(ServiceError::McpError(_))) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
    }
}

/// Waits before reconnecting (a refresh asks to try again now), doubling the next wait.
/// False when the connection was stopped meanwhile.
async fn wait_backoff(conn: &Connection, backoff: &mut Duration) -> bool {
    let go_on = tokio::select! {
        _ = tokio::time::sleep(*backoff) => true,
        _ = conn.refresh.notified() => true,
        _ = conn.stop.cancelled() => false,
    };
    *backoff = (*backoff * 2).min(BACKOFF_MAX);
    go_on
}

/// Publishes what discovery found; false (and the connection's status `error`) when it
/// failed, so the supervisor reconnects and tries again instead of staying `ready` with an
/// empty or stale catalog.
async fn record_discovery(
    conn: &Connection,
    result: Result<Discovered, String>,
    on: &OnDiscovered,
) -> bool {
    let ok = match result {
        Ok(found) => {
            if let Some(write) = on(&found) {
                // A panicked write has logged itself; the connection still works.
                let _ = write.await;
            }
            conn.set_health(|h| {
                h.status = "ready";
                h.last_error = None;
            });
            true
        }
        Err(e) => {
            tracing::warn!(upstream = %conn.name, "{e}");
            conn.set_health(|h| {
                h.status = "error";
                h.last_error = Some(format!("{e}; retrying"));
            });
            false
        }
    };
    conn.discovered.send_modify(|n| *n += 1);
    ok
}

/// Longest line the tee inspects (a `tools/list` answer larger than this is not captured).
const TEE_LINE_MAX: usize = 16 << 20;

/// Progress sinks by the token rmcp gave each call ([`Connection::call`]).
type ProgressSinks = Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>;

/// What the hub does to every upstream's wire as rmcp reads it, in the wire's order:
///
/// - Hands each progress notification of a live call to the call's sink before any later
///   message — the call's answer included — is read. rmcp runs every notification handler in
///   a task of its own, so a progress notification sent just before the answer reached
///   `on_progress` after the call had returned and dropped its sink (the conformance suite's
///   `tools-call-with-progress` through the hub saw 2 of 3). Notifications for no live call
///   pass on to rmcp.
/// - Drops a late answer to an abandoned `server/discover`, and says whether it was a
///   success. rmcp's `Auto` lifecycle gives the probe 10 s (its own constant), then sends
///   `initialize` on the same wire and fails on any other response id ("conflict initialized
///   response id: expected 1, got 0"). An upstream slower than that to start (a cold `uvx`,
///   `npx` or `docker run`) reads the probe first and answers it: a legacy server's late
///   error is dropped and its `initialize` goes on; a modern server's late success sets
///   `late`, and the same process is asked again with `server/discover` alone once its
///   refusal of `initialize` was read (issue 41, item 11; issue 65, item 15).
struct UpstreamWire<T> {
    inner: T,
    sinks: ProgressSinks,
    /// The `server/discover` sent and not yet answered.
    pending: Option<rmcp::model::RequestId>,
    /// The `server/discover` given up on when `initialize` was sent.
    abandoned: Option<rmcp::model::RequestId>,
    /// Set when the abandoned `server/discover` was answered with a result.
    late: Arc<std::sync::atomic::AtomicBool>,
}

impl<T> UpstreamWire<T> {
    fn new(inner: T, sinks: &ProgressSinks, late: Arc<std::sync::atomic::AtomicBool>) -> Self {
        UpstreamWire {
            inner,
            sinks: sinks.clone(),
            pending: None,
            abandoned: None,
            late,
        }
    }
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for UpstreamWire<T>
{
    type Error = T::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(r) = &item {
            match &r.request {
                ClientRequest::DiscoverRequest(_) => self.pending = Some(r.id.clone()),
                ClientRequest::InitializeRequest(_) => self.abandoned = self.pending.take(),
                _ => {}
            }
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            if let rmcp::model::ServerJsonRpcMessage::Notification(n) = &message
                && let ServerNotification::ProgressNotification(p) = &n.notification
            {
                let sink = self
                    .sinks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&p.params.progress_token)
                    .cloned();
                if let Some(sink) = sink {
                    sink(p.params.clone());
                    continue;
                }
            }
            let id = match &message {
                rmcp::model::ServerJsonRpcMessage::Response(r) => Some(&r.id),
                rmcp::model::ServerJsonRpcMessage::Error(e) => e.id.as_ref(),
                _ => None,
            };
            if let Some(id) = id {
                if self.abandoned.as_ref() == Some(id) {
                    tracing::info!("ignoring a late answer to server/discover");
                    if matches!(message, rmcp::model::ServerJsonRpcMessage::Response(_)) {
                        self.late.store(true, std::sync::atomic::Ordering::Release);
                    }
                    self.abandoned = None;
                    continue;
                }
                if self.pending.as_ref() == Some(id) {
                    self.pending = None;
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// A wire that rmcp hands back when it drops it: after a failed handshake, into `slot`, so
/// the same child can be asked again. Once a handshake succeeded nobody holds the slot, and
/// the wire closes with the connection as any other.
struct Reclaim<T> {
    wire: Option<T>,
    slot: std::sync::Weak<Mutex<Option<T>>>,
}

impl<T> Reclaim<T> {
    fn new(wire: T, slot: &Arc<Mutex<Option<T>>>) -> Self {
        Reclaim {
            wire: Some(wire),
            slot: Arc::downgrade(slot),
        }
    }
}

impl<T> Drop for Reclaim<T> {
    fn drop(&mut self) {
        if let (Some(wire), Some(slot)) = (self.wire.take(), self.slot.upgrade()) {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(wire);
        }
    }
}

/// [`Reclaim`]'s errors: the wire's own, or a use after it was handed back (which rmcp,
/// having dropped it, cannot make).
#[derive(Debug)]
enum ReclaimError<E> {
    Wire(E),
    HandedBack,
}

impl<E: std::fmt::Display> std::fmt::Display for ReclaimError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReclaimError::Wire(e) => e.fmt(f),
            ReclaimError::HandedBack => f.write_str("the wire was handed back"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ReclaimError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReclaimError::Wire(e) => e.source(),
            ReclaimError::HandedBack => None,
        }
    }
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for Reclaim<T>
{
    type Error = ReclaimError<T::Error>;

    fn name() -> std::borrow::Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent = self.wire.as_mut().map(|w| w.send(item));
        async move {
            match sent {
                Some(sent) => sent.await.map_err(ReclaimError::Wire),
                None => Err(ReclaimError::HandedBack),
            }
        }
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        self.wire.as_mut()?.receive().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        match self.wire.as_mut() {
            Some(w) => w.close().await.map_err(ReclaimError::Wire),
            None => Ok(()),
        }
    }
}

/// Passes a child's stdout through unchanged while picking out the tools of `tools/list`
/// answers as raw JSON.
struct TeeReader<R> {
    inner: R,
    line: Vec<u8>,
    overflow: bool,
    capture: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl<R> TeeReader<R> {
    fn new(inner: R, capture: Arc<Mutex<Vec<serde_json::Value>>>) -> Self {
        TeeReader {
            inner,
            line: Vec::new(),
            overflow: false,
            capture,
        }
    }

    fn scan(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            match rest.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if !self.overflow {
                        self.line.extend_from_slice(&rest[..i]);
                        self.inspect();
                    }
                    self.line.clear();
                    self.overflow = false;
                    rest = &rest[i + 1..];
                }
                None => {
                    if !self.overflow {
                        self.line.extend_from_slice(rest);
                        if self.line.len() > TEE_LINE_MAX {
                            self.overflow = true;
                            self.line = Vec::new();
                        }
                    }
                    rest = &[];
                }
            }
        }
    }

    fn inspect(&mut self) {
        const NEEDLE: &[u8] = b"\"tools\"";
        if !self.line.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
            return;
        }
        let Ok(msg) = serde_json::from_slice::<serde_json::Value>(&self.line) else {
            return;
        };
        if let Some(tools) = msg.pointer("/result/tools").and_then(|t| t.as_array()) {
            self.capture
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(tools.iter().cloned());
        }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for TeeReader<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled {
            let fresh = buf.filled()[before..].to_vec();
            self.scan(&fresh);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tee_captures_raw_tools_across_reads() {
        use tokio::io::AsyncReadExt;
        let wire = concat!(
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{},"execution":{"taskSupport":"required"}}]}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"tools":1}}"#,
            "\n"
        );
        let capture = Arc::new(Mutex::new(Vec::new()));
        let (mut w, r) = tokio::io::duplex(7);
        let mut tee = TeeReader::new(r, capture.clone());
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            w.write_all(wire.as_bytes()).await.unwrap();
        });
        let mut out = String::new();
        tee.read_to_string(&mut out).await.unwrap();
        writer.await.unwrap();
        assert_eq!(out, wire);
        let got = capture.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["execution"]["taskSupport"], "required");
    }

    #[test]
    fn an_id_less_error_to_a_session_request_means_the_session_is_gone() {
        // What server-everything answers a request naming a session it does not know.
        let unknown_session = || {
            let msg: rmcp::model::ServerJsonRpcMessage = serde_json::from_value(serde_json::json!({
                "jsonrpc": "2.0",
                "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
                "id": null
            }))
            .unwrap();
            Ok(StreamableHttpPostResponse::Json(msg, None))
        };
        assert!(matches!(
            session_lost(true, unknown_session()),
            Err(StreamableHttpError::SessionExpired)
        ));
        // Outside a session (or for a notification) it is an ordinary answer.
        assert!(matches!(
            session_lost(false, unknown_session()),
            Ok(StreamableHttpPostResponse::Json(..))
        ));
        // An error answering the request itself (with its id) is the request's.
        let own: rmcp::model::ServerJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "bad params"}
        }))
        .unwrap();
        assert!(matches!(
            session_lost(true, Ok(StreamableHttpPostResponse::Json(own, None))),
            Ok(StreamableHttpPostResponse::Json(..))
        ));
    }

    #[test]
    fn command_lines_split_like_a_shell() {
        assert_eq!(
            split_command_line(r#"npx -y "@scope/pkg name" 'a b' c\ d"#).unwrap(),
            vec!["npx", "-y", "@scope/pkg name", "a b", "c d"]
        );
        assert!(split_command_line("a 'b").is_err());
        assert_eq!(split_command_line("  ").unwrap(), Vec::<String>::new());
        let opts = UpstreamOptions {
            args: vec!["--x".into()],
            ..Default::default()
        };
        assert_eq!(
            command_of("'/usr/bin/my server' -v", &opts).unwrap(),
            (
                "/usr/bin/my server".to_owned(),
                vec!["-v".to_owned(), "--x".to_owned()]
            )
        );
        assert!(command_of("", &UpstreamOptions::default()).is_err());
    }
}
