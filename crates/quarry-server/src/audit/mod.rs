//! What this server puts in the audit log (`quarry-audit`), recorded at four places only:
//! the authentication middleware (refusals; every REST change; searches its handlers note on
//! their responses), MCP `tools/call` (every endpoint's), chat's tool rounds, and the syncs
//! the node's source scheduler runs. Recording never waits for the store; nothing secret is
//! recorded (no token, no query string, tool arguments redacted, search text only when the
//! administrator turns it on, no credential or URL user information of a source).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::http::Method;
use axum::response::Response;
use quarry_access::Principal;
use quarry_audit::{AuditEvent, DENIED, ERROR, OK};
use serde_json::{Value, json};

use crate::state::AppState;

mod jobs;
mod sources;

pub(crate) use jobs::background_model_use;
pub(crate) use sources::{scheduled_sync, sync_detail, without_credentials};

/// The connection's peer, on every request (the audit log's `client`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAddr(pub SocketAddr);

/// The path a request arrived at, before any nested router stripped its prefix (the MCP
/// endpoints are nested services): what an MCP tool call's event names as its endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint(pub String);

/// The router with the connection's peer address put on each request.
#[derive(Clone)]
pub(crate) struct WithPeer {
    app: Router,
    peer: SocketAddr,
}

impl WithPeer {
    pub(crate) fn new(app: Router, peer: SocketAddr) -> WithPeer {
        WithPeer { app, peer }
    }
}

impl<B> tower_service::Service<axum::http::Request<B>> for WithPeer
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = <Router as tower_service::Service<axum::http::Request<B>>>::Future;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: axum::http::Request<B>) -> Self::Future {
        req.extensions_mut().insert(ClientAddr(self.peer));
        tower_service::Service::call(&mut self.app, req)
    }
}

/// What a handler tells the audit middleware about its response (a response extension,
/// never sent).
#[derive(Debug, Clone)]
pub(crate) enum AuditNote {
    /// A search: which surface, the knowledge bases it could read, how many results, and
    /// the query (kept only when the administrator records queries).
    Search {
        surface: &'static str,
        knowledge_bases: Option<Vec<String>>,
        results: usize,
        /// The best result's score (the insight log's near-miss figure).
        top_score: Option<f64>,
        /// Whether the insight log counts it (false: the insight page's own searches).
        insight: bool,
        query: String,
    },
    /// A POST that only reads (QMD's `/get`, `/multi_get`): not a write.
    Read,
    /// A change whose handler says more than its route and status (a source attached, a
    /// sync's status and counts): these fields join the write event's detail. Never file
    /// contents or a credential ([`without_credentials`] for anything that may hold a URL).
    Change(Value),
}

/// The request's peer address, if known.
pub(crate) fn client_of(extensions: &axum::http::Extensions) -> Option<String> {
    extensions.get::<ClientAddr>().map(|c| c.0.ip().to_string())
}

fn record(state: &AppState, mut event: AuditEvent, client: Option<String>) {
    if let Some(log) = state.audit() {
        event.client = client;
        log.record(event);
    }
}

/// A request refused before it reached anything: the error code, never the credential.
pub(crate) fn auth_failure(state: &AppState, code: &str, path: &str, client: Option<String>) {
    let mut e = quarry_audit::event(None, quarry_audit::AUTH_FAILURE, code, DENIED);
    e.detail = json!({ "path": path }).to_string();
    record(state, e, client);
}

/// Someone signed in to the web UI with a token.
pub(crate) fn sign_in(state: &AppState, principal: &Principal, via: &str, client: Option<String>) {
    let e = quarry_audit::event(Some(principal), quarry_audit::SIGN_IN, via, OK);
    record(state, e, client);
}

/// After a request the middleware let through: a search its handler noted, or any change
/// (a method other than GET/HEAD/OPTIONS) that is not a read.
pub(crate) fn after_request(
    state: &AppState,
    principal: &Principal,
    request: (&Method, &str, &str),
    response: &Response,
    elapsed: Duration,
    client: Option<String>,
) {
    let (method, route, path) = request;
    let status = response.status().as_u16();
    let mut e = match response.extensions().get::<AuditNote>() {
        Some(AuditNote::Read) => return,
        Some(AuditNote::Search {
            surface,
            knowledge_bases,
            results,
            top_score,
            insight,
            query,
        }) => {
            if *insight && quarry_audit::outcome_of_status(status) == OK {
                let named = knowledge_bases.clone().or_else(|| reach(principal));
                search(
                    state,
                    principal,
                    surface,
                    named.as_deref(),
                    query,
                    *results,
                    *top_score,
                );
            }
            let mut e = quarry_audit::event(
                Some(principal),
                quarry_audit::SEARCH,
                *surface,
                quarry_audit::outcome_of_status(status),
            );
            let mut detail = json!({
                "knowledge_bases": knowledge_bases.clone().or_else(|| reach(principal)),
                "results": results,
            });
            if state.audit().is_some_and(|a| a.settings().record_queries) {
                detail["query"] = json!(query);
            }
            e.detail = detail.to_string();
            e
        }
        None if [Method::GET, Method::HEAD, Method::OPTIONS].contains(method) => return,
        note @ (None | Some(AuditNote::Change(_))) => {
            let mut e = quarry_audit::event(
                Some(principal),
                quarry_audit::WRITE,
                format!("{method} {route}"),
                quarry_audit::outcome_of_status(status),
            );
            let mut detail = json!({ "path": path, "status": status });
            if let Some(AuditNote::Change(Value::Object(extra))) = note {
                for (k, v) in extra {
                    // The route's own fields win: a note cannot rewrite the path or status.
                    detail
                        .as_object_mut()
                        .map(|d| d.entry(k.clone()).or_insert_with(|| v.clone()));
                }
            }
            e.detail = detail.to_string();
            e
        }
    };
    e.duration_ms = Some(elapsed.as_millis().min(i64::MAX as u128) as i64);
    record(state, e, client);
}

/// A search that ran, into the insight log (and `/metrics`): on `surface`, over the
/// knowledge bases named (`None`: all the principal reaches; one alone is the search's
/// knowledge base), what it found.
pub(crate) fn search(
    state: &AppState,
    principal: &Principal,
    surface: &str,
    knowledge_bases: Option<&[String]>,
    query: &str,
    results: usize,
    top_score: Option<f64>,
) {
    crate::telemetry::record_search(surface, results > 0);
    if let Some(log) = state.audit() {
        let one = match knowledge_bases {
            Some([kb]) => Some(kb.as_str()),
            _ => None,
        };
        log.record_search(log.search(principal, surface, one, query, results, top_score));
    }
}

/// `requests` to a model and the `tokens` they took for `purpose` on `principal`'s behalf,
/// into the usage counts (and `/metrics`).
pub(crate) fn model_use(
    state: &AppState,
    principal: &Principal,
    purpose: &str,
    requests: u64,
    tokens: u64,
) {
    crate::telemetry::record_model_tokens(purpose, tokens);
    if let Some(log) = state.audit() {
        log.record_model_use(principal, purpose, requests, tokens);
    }
}

/// What `meter` counted of remote model requests (embeddings, expansion, reranking,
/// annotation) made on `principal`'s behalf, into the usage counts (and `/metrics`).
pub(crate) fn metered_use(
    state: &AppState,
    principal: &Principal,
    meter: &quarry_engine::ModelMeter,
) {
    for (purpose, used) in meter.take() {
        model_use(
            state,
            principal,
            purpose.as_str(),
            used.requests,
            used.tokens,
        );
    }
}

/// The query of an MCP call of one of Quarry's own search tools (`search`, `vsearch`,
/// `query`, `knowledge_search`, bare or under the knowledge package), else `None`: an
/// upstream's tool of the same name is not a search of this knowledge.
pub(crate) fn mcp_search_query(
    tool: &str,
    args: &serde_json::Map<String, Value>,
) -> Option<String> {
    let bare = match tool.split_once('.') {
        None => tool,
        Some((package, name)) if package == quarry_hub::KNOWLEDGE_PACKAGE => name,
        Some(_) => return None,
    };
    if !["search", "vsearch", "query", "knowledge_search"].contains(&bare) {
        return None;
    }
    let text = args
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim();
    if !text.is_empty() {
        return Some(text.to_owned());
    }
    // `query` with typed sub-queries only: the first names the question.
    args.get("searches")?
        .as_array()?
        .iter()
        .find_map(|s| s.get("query").and_then(Value::as_str))
        .map(str::to_owned)
}

/// What an MCP search tool answered, into the insight log: its `structuredContent`'s
/// `results` and their best `score`. A failed call is no search.
pub(crate) fn mcp_search(
    state: &AppState,
    principal: &Principal,
    tool: &str,
    query: &str,
    result: &rmcp::model::CallToolResult,
) {
    if result.is_error == Some(true) {
        return;
    }
    let hits = result
        .structured_content
        .as_ref()
        .and_then(|c| c.get("results"))
        .and_then(Value::as_array);
    let results = hits.map_or(0, Vec::len);
    let top = hits.and_then(|h| {
        h.iter()
            .filter_map(|r| r.get("score").and_then(Value::as_f64))
            .reduce(f64::max)
    });
    let surface = format!("mcp:{}", tool.rsplit('.').next().unwrap_or(tool));
    search(
        state,
        principal,
        &surface,
        reach(principal).as_deref(),
        query,
        results,
        top,
    );
}

/// The knowledge bases a principal is limited to (`None`: all of its space).
fn reach(principal: &Principal) -> Option<Vec<String>> {
    principal
        .scope
        .collections
        .as_ref()
        .map(|ids| ids.iter().map(|id| id.to_string()).collect())
}

/// An MCP `tools/call`, counted in the metrics and recorded in the audit log: the tool (as
/// the client named it), the outcome (`ok`, `tool_error`, `protocol_error` as the metrics
/// word them), how long, the endpoint, and the arguments already redacted
/// ([`quarry_audit::redact_object`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn tool_call(
    state: &AppState,
    principal: &Principal,
    tool: &str,
    arguments: Value,
    outcome: &'static str,
    gate: Option<Value>,
    elapsed: Duration,
    parts: Option<&axum::http::request::Parts>,
) {
    crate::telemetry::record_tool_call(tool, outcome, elapsed);
    let stopped = gate.as_ref().is_some_and(|g| g["outcome"] != "approved");
    let outcome = match outcome {
        // Refused or held by a tool policy: the call never ran.
        _ if stopped => DENIED,
        "ok" => OK,
        // Unknown tools are refused the same way whether missing or out of scope.
        "protocol_error" => DENIED,
        _ => ERROR,
    };
    let mut e = quarry_audit::event(Some(principal), quarry_audit::TOOL_CALL, tool, outcome);
    e.duration_ms = Some(elapsed.as_millis().min(i64::MAX as u128) as i64);
    let mut detail = json!({
        "endpoint": endpoint_of(parts),
        "arguments": arguments,
    });
    if let Some(g) = gate {
        if let Some(id) = g.get("approval_id") {
            detail["approval_id"] = id.clone();
        }
        detail["gate"] = g;
    }
    e.detail = detail.to_string();
    record(state, e, parts.and_then(|p| client_of(&p.extensions)));
}

/// The endpoint a request came through: a named endpoint's name, else the path.
fn endpoint_of(parts: Option<&axum::http::request::Parts>) -> Option<&str> {
    parts.map(|p| {
        p.extensions
            .get::<Endpoint>()
            .map_or_else(|| p.uri.path(), |e| e.0.as_str())
    })
}

/// A tool call held for approval made a new request: the receipt's first line.
pub(crate) fn approval_request(
    state: &AppState,
    principal: &Principal,
    tool: &str,
    arguments: &Value,
    gate: &Value,
    parts: Option<&axum::http::request::Parts>,
) {
    // The catalog's name (`package.tool`), as approvals and policies name tools.
    let target = gate.get("tool").and_then(Value::as_str).unwrap_or(tool);
    let mut e = quarry_audit::event(
        Some(principal),
        quarry_audit::APPROVAL_REQUEST,
        target,
        quarry_audit::OK,
    );
    e.detail = json!({
        "approval_id": gate.get("approval_id"),
        "expires_at": gate.get("expires_at"),
        "endpoint": endpoint_of(parts),
        "arguments": arguments,
    })
    .to_string();
    record(state, e, parts.and_then(|p| client_of(&p.extensions)));
}

/// A tool a chat's model called (target: its catalog name; the endpoint `/api/v1/chat`).
pub(crate) fn chat_tool_call(
    state: &AppState,
    principal: &Principal,
    call: &quarry_chat::ToolCallRecord,
) {
    let stopped = call
        .gate
        .as_ref()
        .is_some_and(|g| g["outcome"] != "approved");
    let outcome = match call.status.as_str() {
        "success" => OK,
        // The model named a tool the chat does not offer (hidden or missing alike), or a
        // policy stopped the call.
        _ if call.tool.is_empty() || stopped => DENIED,
        _ => ERROR,
    };
    let arguments = quarry_audit::redact(&call.arguments);
    if let Some(g) = call
        .gate
        .as_ref()
        .filter(|g| g["outcome"] == "held" && g["new"] == true)
    {
        approval_request(state, principal, &call.tool, &arguments, g, None);
    }
    let target = if call.tool.is_empty() {
        &call.name
    } else {
        &call.tool
    };
    let mut e = quarry_audit::event(Some(principal), quarry_audit::TOOL_CALL, target, outcome);
    e.duration_ms = call.duration_ms.map(|ms| ms.round() as i64);
    e.detail = json!({
        "endpoint": "/api/v1/chat",
        "round": call.round,
        "arguments": arguments,
        "gate": call.gate,
        "approval_id": call.gate.as_ref().and_then(|g| g.get("approval_id")),
    })
    .to_string();
    record(state, e, None);
}
