//! `POST /api/v1/mcp`: QukaAI's knowledge-capture endpoint (seed 004) — Streamable HTTP,
//! stateless, JSON responses, authenticated per request like every other route. Its tools are
//! the knowledge capture tools only (SPEC §2.2).
//!
//! The seed's curl examples send no `Accept` header and call `tools/call` without a session;
//! [`accept_json`] lets them in, and the stateless transport needs no `initialize` first.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;

use crate::auth::Caller;
use crate::service::tool_call::{answer_is_read_unless_it_writes, audited_call, request_caller};
use crate::service::{gate, knowledge_tools};
use crate::state::AppState;

/// The QukaAI-compatible MCP server; one per request (stateless).
#[derive(Clone)]
pub(crate) struct QukaMcp {
    state: Arc<AppState>,
}

impl QukaMcp {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        QukaMcp { state }
    }
}

impl ServerHandler for QukaMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("quarry-knowledge", env!("CARGO_PKG_VERSION"))
                    .with_title("Quarry knowledge capture"),
            )
            .with_instructions(
                "Save what you learn with create_knowledge (Markdown); find it again with query_knowledge and get_knowledge. Notes go to the knowledge base named by X-Resource (default 'knowledge') in the space of your token.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = request_caller(None, &context)?;
        Ok(ListToolsResult::with_all_items(
            knowledge_tools::capture_tools_for(&caller),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        knowledge_tools::capture_tools()
            .into_iter()
            .find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = request_caller(None, &context)?;
        gate::GateRecord::attach(&mut context);
        let (c, ctx) = (&caller, &context);
        audited_call(&self.state, c, request, ctx, move |name, args| async move {
            self.run(c, &name, args, ctx).await
        })
        .await
    }
}

impl QukaMcp {
    /// One capture tool call. `Err` is a protocol error: a name this endpoint does not
    /// serve (or the token's scope leaves out), or the token's rate limit.
    async fn run(
        &self,
        caller: &Caller,
        name: &str,
        args: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        // A write tool called by a read-only caller is known (and refused by the engine, as
        // a tool error naming why); only names this endpoint does not serve are unknown, and
        // one outside the token's tool scope is as unknown as those (`knowledge_search` is
        // not a capture tool, so it is never in scope here).
        let Some(tool) = knowledge_tools::capture_tool_in_scope(caller, name) else {
            let available: Vec<String> = knowledge_tools::capture_tools_for(caller)
                .iter()
                .map(|t| t.name.to_string())
                .collect();
            return Err(McpError::invalid_params(
                format!("Unknown tool: {name}"),
                Some(json!({ "tool": name, "available": available })),
            ));
        };
        crate::limits::tool_call(&self.state, &caller.principal).await?;
        answer_is_read_unless_it_writes(context, quarry_hub::KNOWLEDGE_PACKAGE, &tool);
        // The capture tools are the catalog's `knowledge` tools: the same policies apply.
        let name = knowledge_tools::capture_tool_name(name);
        let full_name = format!("{}.{name}", quarry_hub::KNOWLEDGE_PACKAGE);
        let state = &self.state;
        gate::gated(
            state,
            caller,
            &full_name,
            args,
            context,
            |args| async move { Ok(knowledge_tools::call(state, caller, name, args).await) },
        )
        .await
    }
}

/// Middleware: a POST whose `Accept` does not name both JSON and SSE (curl sends `*/*`, the
/// seed's examples none) is treated as accepting both; responses are JSON either way.
pub(crate) async fn accept_json(mut req: Request, next: Next) -> Response {
    if req.method() == Method::POST {
        let accepts = req
            .headers()
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        if !(accepts.contains("application/json") && accepts.contains("text/event-stream")) {
            req.headers_mut().insert(
                header::ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            );
        }
        if !req.headers().contains_key(header::CONTENT_TYPE) {
            req.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
    }
    next.run(req).await
}
