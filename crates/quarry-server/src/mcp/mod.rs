//! The MCP server: seed 001's six tools, the `qmd://{+path}` resource template and the
//! `query` prompt, over any rmcp transport. Protocol eras (2025-06-18, 2025-11-25 with
//! sessions, 2026-07-28 stateless with `server/discover`) are negotiated by rmcp.
//!
//! The handler (`QuarryMcp`) lists and dispatches: QMD's tools run in `qmd_tools`, the
//! knowledge tools in `crate::service::knowledge_tools`, other catalogued tools through the
//! hub; an unknown tool is a protocol error. `jsonrpc` rewrites the wire, `hub_sse` serves the
//! gateway's legacy HTTP+SSE sessions.

pub(crate) mod hub_sse;
pub(crate) mod jsonrpc;
pub(crate) mod named;
mod narrowing;
mod progress;
mod qmd_tools;
pub(crate) mod sessions;

use std::sync::Arc;

use quarry_core::Error;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    Prompt, PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{run_blocking, run_blocking_raw};
use crate::service::tool_args::{Args, tool_error};
use crate::service::tool_call::{
    answer_is_read_unless_it_writes, audited_call, call_with_caller, request_caller,
};
use crate::service::{
    approver_tools, browse_tools, catalog_tools, gate, knowledge_tools, wiki_tools,
};
use crate::state::AppState;
use qmd_tools::{TOOL_NAMES, tools};
use quarry_hub::view::{CALL_TOOL, SEARCH_TOOLS, SearchMode};
use quarry_hub::{
    BuiltinPackage, CatalogTool, DefaultView, KNOWLEDGE_PACKAGE, ProgressSink, Selection, View,
    ViewError,
};

/// The MCP face of one engine. Cheap to clone: the HTTP transport builds one per session
/// (or per request in stateless mode).
#[derive(Clone)]
pub struct QuarryMcp {
    state: Arc<AppState>,
    /// The caller of every request (stdio: the machine's owner); `None` over HTTP, where
    /// each request carries its own, resolved by the auth middleware.
    fixed: Option<Caller>,
    /// What the endpoint lists when its URL selects nothing.
    default_view: DefaultView,
    /// `/mcp/e/<name>`: the selection is the named endpoint's (the request carries it, put
    /// there by [`named::resolve`]), not the URL's.
    named: bool,
}

impl QuarryMcp {
    /// `/mcp`: each request's caller comes from its credentials; without a selection it
    /// lists the knowledge tools under their own names (seed 001's contract).
    pub fn new(state: Arc<AppState>) -> Self {
        QuarryMcp {
            state,
            fixed: None,
            default_view: DefaultView::BarePackage(KNOWLEDGE_PACKAGE.into()),
            named: false,
        }
    }

    /// `/api/mcp`, the hub gateway (seed 002): without a selection, every tool of the caller.
    pub fn gateway(state: Arc<AppState>) -> Self {
        QuarryMcp {
            state,
            fixed: None,
            default_view: DefaultView::Everything,
            named: false,
        }
    }

    /// `/mcp/e/<name>`, a named tool endpoint: its saved selection over the caller's tools.
    pub fn named(state: Arc<AppState>) -> Self {
        QuarryMcp {
            state,
            fixed: None,
            default_view: DefaultView::Everything,
            named: true,
        }
    }

    /// For stdio: every request is the machine's owner's.
    pub fn local(state: Arc<AppState>) -> Result<Self, Error> {
        let caller = Caller::owner(&state)?;
        Ok(QuarryMcp {
            state,
            fixed: Some(caller),
            default_view: DefaultView::BarePackage(KNOWLEDGE_PACKAGE.into()),
            named: false,
        })
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
        request_caller(self.fixed.as_ref(), context)
    }

    /// The view of this request: its URL's selection over the caller's catalog.
    async fn view(
        &self,
        caller: &Caller,
        context: &RequestContext<RoleServer>,
    ) -> Result<View, McpError> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        if self.named {
            let endpoint = parts
                .and_then(|p| p.extensions.get::<quarry_store::ToolEndpointRow>())
                .cloned()
                .ok_or_else(|| McpError::internal_error("no tool endpoint was resolved", None))?;
            let hub = self.state.hub().clone();
            let max_tools = hub.options().max_tools;
            let (registry, owner) = (hub.clone(), caller.principal.owner_key().to_owned());
            let catalog = run_blocking(move || registry.catalog(&owner))
                .await
                .map_err(|e| McpError::internal_error(e.detail, None))?;
            return crate::service::endpoints::view_of(&endpoint, catalog, caller, max_tools)
                .map_err(|e| McpError::invalid_params(e.to_string(), None));
        }
        let query = parts.and_then(|p| p.uri.query());
        let selection = Selection::from_query(query)
            .map_err(|m| McpError::invalid_params(m.to_string(), None))?;
        let hub = self.state.hub();
        let (registry, owner) = (hub.clone(), caller.principal.owner_key().to_owned());
        let catalog = run_blocking(move || registry.catalog(&owner))
            .await
            .map_err(|e| McpError::internal_error(e.detail, None))?;
        let selection = narrowing::narrowed(selection, &catalog, context)?;
        // The cap limits selections; the unselected view lists everything (SPEC §2.2).
        let cap = if selection.chooses_tools() {
            hub.options().max_tools
        } else {
            usize::MAX
        };
        View::compute(
            catalog,
            &selection,
            &self.default_view,
            &caller.principal,
            &|t| catalog_tools::catalog_tool_usable_by(caller, t),
            cap,
        )
        .map_err(|e| {
            let data = match &e {
                ViewError::TooMany { count, cap } => json!({ "cap": cap, "count": count }),
                _ => json!({}),
            };
            McpError::invalid_params(e.to_string(), Some(data))
        })
    }

    /// Runs a catalogued tool: built-in ones here, the others through the hub (with
    /// progress and cancellation passed on).
    async fn dispatch(
        &self,
        caller: &Caller,
        tool: &CatalogTool,
        args: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        answer_is_read_unless_it_writes(context, &tool.package, &tool.tool);
        // Every catalogued tool, Quarry's own included, passes the caller's policies first.
        gate::gated(
            &self.state,
            caller,
            &tool.full_name,
            args,
            context,
            |args| self.run_catalogued(caller, tool, args, context),
        )
        .await
    }

    /// Runs a catalogued tool the gate let through.
    async fn run_catalogued(
        &self,
        caller: &Caller,
        tool: &CatalogTool,
        args: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if tool.package == KNOWLEDGE_PACKAGE {
            return self.run_tool(caller, &tool.name, args).await;
        }
        if tool.package == approver_tools::APPROVALS_PACKAGE {
            return Ok(approver_tools::call(&self.state, caller, &tool.name, args).await);
        }
        let relay = context
            .meta
            .get_progress_token()
            .map(|token| progress::ProgressRelay::start(context.peer.clone(), token));
        let progress: Option<ProgressSink> = relay.as_ref().map(progress::ProgressRelay::sink);
        let (hub, who, target) = (
            self.state.hub().clone(),
            caller.principal.clone(),
            tool.clone(),
        );
        let route = match run_blocking_raw(move || hub.route_tool(&who, &target)).await {
            Ok(Ok(route)) => route,
            Ok(Err(e)) => return Ok(tool_error(format!("{}: {e}", tool.full_name))),
            Err(e) => return Err(McpError::internal_error(e.detail, None)),
        };
        let answer = self
            .state
            .hub()
            .call(route, tool, Some(args), progress, context.ct.clone())
            .await;
        if let Some(relay) = relay {
            relay.flush().await;
        }
        match answer {
            // The upstream answered in its own protocol era; the client may speak another.
            Ok(r) => Ok(quarry_hub::era::call_result(r)),
            Err(e) => Ok(tool_error(format!("{}: {e}", tool.full_name))),
        }
    }
}

/// Every tool the caller may use on `/mcp` and stdio: QMD's six, `knowledge_search`, and the
/// knowledge capture tools (write tools only for callers that may write).
pub(crate) fn tools_for(caller: &Caller) -> Vec<Tool> {
    let mut all = tools();
    all.push(knowledge_tools::knowledge_search_tool());
    all.extend(knowledge_tools::capture_tools_for(caller));
    all.extend(wiki_tools::wiki_tools_for(caller));
    all.extend(browse_tools::browse_tools_for(caller));
    all
}

/// Quarry's own tools as a catalog package: QMD's six, `knowledge_search` and the capture
/// tools (a view hides the write tools from callers that may not write).
pub fn knowledge_package() -> BuiltinPackage {
    let mut all = tools();
    all.push(knowledge_tools::knowledge_search_tool());
    all.extend(knowledge_tools::capture_tools());
    all.extend(wiki_tools::wiki_tools());
    all.extend(browse_tools::browse_tools());
    BuiltinPackage {
        id: KNOWLEDGE_PACKAGE.into(),
        name: "Quarry knowledge".into(),
        description:
            "Search, read and capture knowledge in this Quarry's collections and knowledge bases"
                .into(),
        category: "knowledge".into(),
        tags: vec![
            "search".into(),
            "rag".into(),
            "knowledge-base".into(),
            "notes".into(),
        ],
        tools: all,
    }
}

impl QuarryMcp {
    /// Runs one tool on a blocking thread. `Err` is a protocol error (unknown tool).
    async fn run_tool(
        &self,
        caller: &Caller,
        name: &str,
        args: JsonObject,
    ) -> Result<CallToolResult, McpError> {
        if knowledge_tools::handles(name) {
            return Ok(knowledge_tools::call(&self.state, caller, name, args).await);
        }
        if wiki_tools::handles(name) {
            let run = wiki_tools::run;
            return Ok(call_with_caller(&self.state, "Wiki", run, caller, name, args).await);
        }
        if browse_tools::handles(name) {
            let run = browse_tools::run;
            return Ok(call_with_caller(&self.state, "Browse", run, caller, name, args).await);
        }
        if !TOOL_NAMES.contains(&name) {
            let available: Vec<String> = tools_for(caller)
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            return Err(McpError::invalid_params(
                format!("Unknown tool: {name}"),
                Some(json!({ "tool": name, "available": available })),
            ));
        }
        let engine = caller.engine.clone();
        let name_owned = name.to_owned();
        let joined = run_blocking_raw(move || qmd_tools::run(&engine, &name_owned, &args)).await;
        joined.map_err(|e| McpError::internal_error(format!("tool {name} failed: {e}"), None))
    }
}

const PROMPT_GUIDE: &str = r#"# Quarry - Quick Markdown Search

Quarry is your on-device search engine for markdown knowledge bases. Use it to find information across your notes, documents, and meeting transcripts.

## Available Tools

### 1. search (Fast keyword search)
Best for: Finding documents with specific keywords or phrases.
- Uses BM25 full-text search
- Fast, no LLM required
- Good for exact matches
- Use `collection` parameter to filter to a specific collection

### 2. vsearch (Semantic search)
Best for: Finding conceptually related content even without exact keyword matches.
- Uses vector embeddings
- Understands meaning and context
- Good for "how do I..." or conceptual queries
- Use `collection` parameter to filter to a specific collection

### 3. query (Hybrid search - highest quality)
Best for: Important searches where you want the best results.
- Combines keyword + semantic search
- Expands your query with variations
- Re-ranks results with LLM
- Slower but most accurate
- Use `collection` parameter to filter to a specific collection

### 4. get (Retrieve document)
Best for: Getting the full content of a single document you found.
- Use the file path from search results
- Supports line ranges: `file.md:100` or fromLine/maxLines parameters
- Suggests similar files if not found

### 5. multi_get (Retrieve multiple documents)
Best for: Getting content from multiple files at once.
- Use glob patterns: `journals/2025-05*.md`
- Or comma-separated: `file1.md, file2.md`
- Skips files over maxBytes (default 10KB) - use get for large files

### 6. status (Index info)
Shows collection info, document counts, and embedding status.

### 7. metadata (Fields to filter on)
Lists the metadata fields of the documents you can read (front matter, document properties,
fields given at upload), with their types, counts and most frequent values.
- Call it before filtering: never guess a field name
- `search`, `vsearch` and `query` take `filter`, e.g.
  `{"field": "status", "operator": "eq", "value": "published"}`; combine with `and`/`or`/`not`

## Resources

You can also access documents directly via the `qmd://` URI scheme:
- Documents are not listed: discover them with the search tools
- Read a document: `resources/read` with uri `qmd://path/to/file.md`

## Search Strategy

1. **Start with search** for quick keyword lookups
2. **Use vsearch** when keywords aren't working or for conceptual queries
3. **Use query** for important searches or when you need high confidence
4. **Use get** to retrieve a single full document
5. **Use multi_get** to batch retrieve multiple related files

## Tips

- Use `minScore: 0.5` to filter low-relevance results
- Use `collection: "notes"` to search only in a specific collection
- Use `filter` to search only documents with some metadata (dates as ranges: `{"field": "date", "operator": "gte", "value": "2026-06-01"}`)
- Check the "Context" field - it describes what kind of content the file contains
- File paths are relative to their collection (e.g., `pages/meeting.md`)
- For glob patterns, match on display_path (e.g., `journals/2025-*.md`)
"#;

impl QuarryMcp {
    /// `tools/call` inside a view: a tool the view does not list is unknown, whatever its
    /// name (bare, wire or catalog).
    async fn call_in_view(
        &self,
        caller: &Caller,
        view: &View,
        name: &str,
        args: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if view.is_search_mode() && name == SEARCH_TOOLS {
            if let Some(parts) = context.extensions.get::<axum::http::request::Parts>() {
                crate::http::consistency::mark_read(&parts.extensions);
            }
            return Ok(search_tools_result(caller, view, &args).await);
        }
        if view.is_search_mode() && name == CALL_TOOL {
            let a = Args(&args);
            let target = match a.required_string("name") {
                Ok(t) => t,
                Err(m) => return Ok(tool_error(m)),
            };
            let inner = match args.get("arguments") {
                None | Some(Value::Null) => JsonObject::new(),
                Some(Value::Object(o)) => o.clone(),
                Some(_) => return Ok(tool_error("arguments: expected an object")),
            };
            return match view.resolve(&target) {
                Some(tool) => {
                    let tool = tool.clone();
                    self.dispatch(caller, &tool, inner, context).await
                }
                None => Ok(tool_error(format!(
                    "Unknown tool: {target} (search_tools lists the tools this endpoint reaches)"
                ))),
            };
        }
        match view.resolve(name) {
            Some(tool) => {
                let tool = tool.clone();
                self.dispatch(caller, &tool, args, context).await
            }
            None => {
                let available: Vec<String> = view
                    .list()
                    .into_iter()
                    .map(|t| t.name.to_string())
                    .collect();
                Err(McpError::invalid_params(
                    format!("Unknown tool: {name}"),
                    Some(json!({ "tool": name, "available": available })),
                ))
            }
        }
    }
}

/// An upstream's failure to read a resource or get a prompt: its own JSON-RPC error when it
/// sent one, else an internal error saying why.
fn upstream_error(e: quarry_hub::CallError) -> McpError {
    match e {
        quarry_hub::CallError::Upstream { code, message } => {
            McpError::new(rmcp::model::ErrorCode(code), message, None)
        }
        other => McpError::internal_error(other.to_string(), None),
    }
}

/// Every catalog tool's vector (in catalog order) and the query's.
type ToolVectors = (Arc<Vec<Vec<f32>>>, Vec<f32>);

/// The tools' vectors (computed for this catalog snapshot on first use: each tool looked up
/// in the store's cache, only new or changed ones embedded) and the query's.
fn tool_vectors(
    engine: &quarry_engine::Engine,
    catalog: &quarry_hub::Catalog,
    query: &str,
) -> Result<ToolVectors, Error> {
    let tools = match catalog.vectors() {
        Some(v) => v,
        None => {
            let vectors = engine.cached_passage_vectors("hub-tools", &catalog.tool_texts())?;
            catalog.set_vectors(vectors)
        }
    };
    if query.is_empty() {
        return Ok((tools, Vec::new()));
    }
    Ok((tools, engine.query_vector(query)?))
}

/// `search_tools`: names and full schemas of the best tools of the scope.
async fn search_tools_result(caller: &Caller, view: &View, args: &JsonObject) -> CallToolResult {
    let a = Args(args);
    let query = match a.required_string("query") {
        Ok(q) => q,
        Err(m) => return tool_error(m),
    };
    let limit = match a.uint("limit") {
        Ok(l) => l.unwrap_or(5) as usize,
        Err(m) => return tool_error(m),
    };
    if limit == 0 || limit > quarry_hub::view::SEARCH_LIMIT_MAX {
        return tool_error(format!(
            "limit: must be 1-{}",
            quarry_hub::view::SEARCH_LIMIT_MAX
        ));
    }
    let category = match a.string("category") {
        Ok(c) => c,
        Err(m) => return tool_error(m),
    };
    let asked = match a.string("mode") {
        Ok(None) => None,
        Ok(Some(m)) => match SearchMode::parse(&m) {
            Some(mode) => Some(mode),
            None => {
                return tool_error(format!(
                    "mode: expected keyword, vector or hybrid, not '{m}'"
                ));
            }
        },
        Err(m) => return tool_error(m),
    };
    // Without a mode: hybrid where an embedding model is at hand, else keyword (a first
    // search never waits for a model to download).
    let engine = caller.engine.clone();
    let catalog = view.catalog().clone();
    let mode = match asked {
        Some(m) => m,
        // Vectors already computed for this catalog: a model was at hand.
        None if catalog.vectors().is_some() => SearchMode::Hybrid,
        None => {
            let e = engine.clone();
            if run_blocking_raw(move || e.embedding_ready())
                .await
                .unwrap_or(false)
            {
                SearchMode::Hybrid
            } else {
                SearchMode::Keyword
            }
        }
    };
    let vectors = if mode == SearchMode::Keyword {
        None
    } else if asked.is_none() && catalog.vectors().is_none() {
        // By default a search never waits for the catalog to be embedded: keyword now, and
        // the vectors computed in the background (only new or changed tools are embedded).
        if catalog.claim_vectors() {
            let engine = engine.clone();
            tokio::task::spawn_blocking(move || {
                quarry_store::thread_guard::allow_blocking(|| {
                    if let Err(e) = tool_vectors(&engine, &catalog, "") {
                        tracing::warn!(error = %e, "embedding the tool catalog failed; search_tools stays on keywords");
                    }
                })
            });
        }
        None
    } else {
        let q = query.clone();
        match run_blocking_raw(move || tool_vectors(&engine, &catalog, &q)).await {
            Ok(Ok(v)) => Some(v),
            // Asked for by name: say why it cannot run. Chosen by default: keyword instead.
            Ok(Err(e)) if asked.is_some() => {
                return tool_error(format!("mode {}: {e}", mode.as_str()));
            }
            Err(e) if asked.is_some() => return tool_error(e.detail),
            _ => None,
        }
    };
    let mode = if vectors.is_some() {
        mode
    } else {
        SearchMode::Keyword
    };
    let pair = vectors.as_ref().map(|(t, q)| (t.as_slice(), q.as_slice()));
    match view.search(&query, category.as_deref(), limit, mode, pair) {
        Ok(found) => {
            let tools: Vec<Value> = found
                .iter()
                .map(|t| {
                    // A named endpoint's new name and description, where it gives them.
                    json!({
                        "name": view.renamed(t).unwrap_or(t.wire_name.as_str()),
                        "catalog_name": t.full_name,
                        "description": view.described(t).unwrap_or(t.description()),
                        "category": t.category,
                        "inputSchema": &*t.tool.input_schema,
                    })
                })
                .collect();
            let text = if tools.is_empty() {
                format!("No tools match \"{query}\".")
            } else {
                serde_json::to_string_pretty(&tools).unwrap_or_default()
            };
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = Some(json!({ "tools": tools, "mode": mode.as_str() }));
            r
        }
        Err(e) => tool_error(format!("search failed: {e}")),
    }
}

impl ServerHandler for QuarryMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(
            Implementation::new("quarry", env!("CARGO_PKG_VERSION")).with_title("Quarry"),
        )
        .with_instructions(match self.default_view {
            DefaultView::Everything => {
                "Quarry tool hub: the tools listed are the ones this endpoint's URL selected (?tools=, ?servers=); with search_tools/call_tool, search first, then call what fits."
            }
            DefaultView::BarePackage(_) => {
                "Quarry searches the user's markdown knowledge base. Start with `search` (keyword) or `query` (best quality), then `get` a document by the path or #docid from the results."
            }
        })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&context)?;
        let view = self.view(&caller, &context).await?;
        Ok(ListToolsResult::with_all_items(view.list()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let mut all = tools();
        all.push(knowledge_tools::knowledge_search_tool());
        all.extend(knowledge_tools::capture_tools());
        all.extend(wiki_tools::wiki_tools());
        all.extend(browse_tools::browse_tools());
        all.into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context)?;
        let mut context = context;
        // A 2026-07-28 retry carrying the person's answer to a held call's approval.
        if let Some(answer) = gate::ApprovalAnswer::from_responses(request.input_responses.as_ref())
        {
            context.extensions.insert(answer);
        }
        gate::GateRecord::attach(&mut context);
        let (c, ctx) = (&caller, &context);
        audited_call(&self.state, c, request, ctx, move |name, args| async move {
            crate::limits::tool_call(&self.state, &c.principal).await?;
            let view = self.view(c, ctx).await?;
            self.call_in_view(c, &view, &name, args, ctx).await
        })
        .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        // Quarry's own documents are found by search, not listed; upstreams' resources are.
        let caller = self.caller(&context)?;
        let view = self.view(&caller, &context).await?;
        Ok(ListResourcesResult::with_all_items(view.resources()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let caller = self.caller(&context)?;
        let view = self.view(&caller, &context).await?;
        let mut templates = Vec::new();
        if view.offers_package(KNOWLEDGE_PACKAGE) {
            templates.push(
                ResourceTemplate::new("qmd://{+path}", "document")
                    .with_title("Quarry Document")
                    .with_description(
                        "A markdown document from your Quarry knowledge base. Use search tools to discover documents.",
                    )
                    .with_mime_type("text/markdown"),
            );
        }
        templates.extend(view.resource_templates());
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.caller(&context)?;
        let view = self.view(&caller, &context).await?;
        // An upstream's resource, or Quarry's own (which explains a URI it cannot read).
        let upstream = match view.resource_package(&request.uri) {
            Some(p) if !request.uri.starts_with("qmd://") => Some(p),
            _ if view.offers_package(KNOWLEDGE_PACKAGE) => None,
            _ => {
                return Err(McpError::resource_not_found(
                    format!("Resource not found: {}", request.uri),
                    Some(json!({ "uri": request.uri })),
                ));
            }
        };
        if let Some(package) = upstream {
            let (hub, who) = (self.state.hub().clone(), caller.principal.clone());
            let route = run_blocking_raw(move || hub.route_package(&who, &package))
                .await
                .map_err(|e| McpError::internal_error(e.detail, None))?
                .map_err(upstream_error)?;
            return match self
                .state
                .hub()
                .read_resource(route, &request.uri, context.ct.clone())
                .await
            {
                Ok(r) => {
                    Ok(quarry_hub::era::read_result(r, context.protocol_version().as_ref()).into())
                }
                Err(e) => Err(upstream_error(e)),
            };
        }
        let engine = caller.engine;
        let uri = request.uri.clone();
        let doc = run_blocking_raw(move || engine.read_resource(&uri))
            .await
            .map_err(|e| McpError::internal_error(format!("read failed: {e}"), None))?;
        match doc {
            Ok(v) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(v.text, request.uri).with_mime_type("text/markdown"),
            ])
            .into()),
            Err(Error::NotFound(msg)) => Err(McpError::resource_not_found(
                msg,
                Some(json!({ "uri": request.uri })),
            )),
            Err(e @ Error::InvalidInput(_)) => Err(McpError::invalid_params(
                e.to_string(),
                Some(json!({ "uri": request.uri })),
            )),
            Err(e) => Err(McpError::internal_error(
                crate::http::public_detail(&e),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let caller = self.caller(&context)?;
        let view = self.view(&caller, &context).await?;
        let mut prompts = Vec::new();
        if view.offers_package(KNOWLEDGE_PACKAGE) {
            prompts.push(
                Prompt::new(
                    "query",
                    Some("How to use Quarry to search the knowledge base effectively"),
                    None,
                )
                .with_title("Quarry search guide"),
            );
        }
        prompts.extend(view.prompts());
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&context)?;
        let view = self.view(&caller, &context).await?;
        if request.name == "query" && view.offers_package(KNOWLEDGE_PACKAGE) {
            return Ok(GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                PROMPT_GUIDE,
            )])
            .with_description("How to use Quarry to search the knowledge base effectively")
            .into());
        }
        let Some((package, name)) = view.resolve_prompt(&request.name) else {
            let available: Vec<String> = view
                .prompts()
                .into_iter()
                .map(|p| p.name)
                .chain(
                    view.offers_package(KNOWLEDGE_PACKAGE)
                        .then(|| "query".to_owned()),
                )
                .collect();
            return Err(McpError::invalid_params(
                format!("Unknown prompt: {}", request.name),
                Some(json!({ "available": available })),
            ));
        };
        let (hub, who) = (self.state.hub().clone(), caller.principal.clone());
        let route = run_blocking_raw(move || hub.route_package(&who, &package))
            .await
            .map_err(|e| McpError::internal_error(e.detail, None))?
            .map_err(upstream_error)?;
        match self
            .state
            .hub()
            .get_prompt(route, &name, request.arguments, context.ct.clone())
            .await
        {
            Ok(r) => Ok(quarry_hub::era::prompt_result(r).into()),
            Err(e) => Err(upstream_error(e)),
        }
    }
}
