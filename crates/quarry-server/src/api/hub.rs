//! The hub over REST: MCP servers (seed 003 §5.2: `/api/v1/mcp/servers` list, register,
//! delete, toggle, refresh, tools; `/api/v1/mcp/tools`), tools (§5.3: `/api/v1/tools`,
//! built-in tools with per-user toggles) and the catalog (seed 002: `/api/catalog…`, with
//! the endpoint URL of each selection). Every call acts on the caller's own hub: one
//! user's servers, tools and toggles are invisible to another.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use quarry_core::{Error, Principal};
use quarry_hub::{
    Catalog, CatalogTool, Hub, Package, PackageKind, RegisterUpstream, UpstreamPatch,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{ApiError, Body, Params, base_url, ok, ok_list, run_blocking};
use crate::service::{catalog_tools, endpoints};
use crate::state::AppState;

/// The shell every handler here shares: the state and the request's caller, taken as one
/// extractor; hub calls run as that caller off the async threads, their errors in the REST
/// shape, their results in the `/api/v1` envelope.
struct HubCall {
    state: Arc<AppState>,
    caller: Caller,
}

impl FromRequestParts<Arc<AppState>> for HubCall {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, state).await?;
        Ok(HubCall {
            state: state.clone(),
            caller,
        })
    }
}

/// A call on the hub's registry as the request's principal (run on the blocking runner).
trait HubFn<T>: FnOnce(&Arc<Hub>, &Principal) -> quarry_core::Result<T> + Send + 'static {}
impl<T, F> HubFn<T> for F where
    F: FnOnce(&Arc<Hub>, &Principal) -> quarry_core::Result<T> + Send + 'static
{
}

impl HubCall {
    /// Runs `f` on the hub's registry as the caller, on the blocking runner.
    async fn run<T: Send + 'static>(&self, f: impl HubFn<T>) -> Result<T, ApiError> {
        let hub = self.state.hub().clone();
        let who = self.caller.principal.clone();
        run_blocking(move || f(&hub, &who)).await
    }

    /// [`HubCall::run`], its result answered as `{"success": true, "data": …}`.
    async fn reply<T: Serialize + Send + 'static>(
        &self,
        f: impl HubFn<T>,
    ) -> Result<Response, ApiError> {
        Ok(ok(self.run(f).await?))
    }

    /// [`HubCall::reply`] with `201 Created`.
    async fn created<T: Serialize + Send + 'static>(
        &self,
        f: impl HubFn<T>,
    ) -> Result<Response, ApiError> {
        Ok((StatusCode::CREATED, self.reply(f).await?).into_response())
    }

    /// Deletes what `id` names through `f`, answered as `{"id", "deleted": true}`.
    async fn deleted<T: Send + 'static>(
        &self,
        id: String,
        f: impl FnOnce(&Arc<Hub>, &Principal, &str) -> quarry_core::Result<T> + Send + 'static,
    ) -> Result<Response, ApiError> {
        let key = id.clone();
        self.run(move |hub, who| f(hub, who, &key)).await?;
        Ok(ok(json!({ "id": id, "deleted": true })))
    }

    /// The caller's catalog.
    async fn catalog(&self) -> Result<Arc<Catalog>, ApiError> {
        self.run(|hub, who| hub.catalog(who.owner_key())).await
    }
}

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/api/v1/mcp/servers",
            get(list_servers).post(register_server),
        )
        .route(
            "/api/v1/mcp/servers/{id}",
            get(get_server)
                .patch(update_server)
                .put(update_server)
                .delete(delete_server),
        )
        .route("/api/v1/mcp/servers/{id}/toggle", patch(toggle_server))
        .route("/api/v1/mcp/servers/{id}/refresh", post(refresh_server))
        .route(
            "/api/v1/mcp/servers/{id}/oauth",
            post(begin_sign_in).delete(sign_out),
        )
        .route("/api/v1/mcp/servers/{id}/tools", get(server_tools))
        .route("/api/v1/mcp/tools", get(all_mcp_tools))
        .route("/api/v1/tools", get(all_tools).post(create_custom))
        .route("/api/v1/tools/builtin", get(builtin_tools))
        .route("/api/v1/tools/builtin/{name}/toggle", patch(toggle_builtin))
        .route(
            "/api/v1/tools/{id}",
            get(get_custom).patch(update_custom).delete(delete_custom),
        )
        .route("/api/v1/tools/{id}/toggle", patch(toggle_custom))
        .route("/api/v1/tools/{id}/test", post(test_custom))
        .route("/api/v1/hub/tools/{name}/toggle", patch(toggle_tool))
        .route("/api/catalog", get(catalog_categories))
        .route("/api/catalog/search", get(catalog_search))
        .route("/api/catalog/{key}", get(catalog_category))
        .route("/api/catalog/{key}/tools", get(catalog_package_tools))
}

/// Where an upstream's authorization server sends the browser back (public: the `state`
/// authenticates it).
pub(crate) fn public_router() -> Router<Arc<AppState>> {
    Router::new().route(UPSTREAM_CALLBACK, get(sign_in_callback))
}

/// The redirect URI Quarry registers with upstreams' authorization servers.
const UPSTREAM_CALLBACK: &str = "/oauth/upstream/callback";

/// A client registered by hand, for authorization servers without dynamic registration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignInBody {
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// `POST /api/v1/mcp/servers/{id}/oauth`: starts signing in; answers the address the person
/// opens to consent.
async fn begin_sign_in(
    call: HubCall,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    // The body is optional: most authorization servers register Quarry themselves.
    let body: SignInBody = if body.iter().all(u8::is_ascii_whitespace) {
        SignInBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::from(Error::InvalidInput(format!("invalid JSON body: {e}"))))?
    };
    let client = match (body.client_id, body.client_secret) {
        (Some(client_id), client_secret) if !client_id.trim().is_empty() => {
            Some(quarry_hub::ClientCredentials {
                client_id,
                client_secret,
            })
        }
        (None, None) => None,
        _ => {
            return Err(ApiError::from(Error::InvalidInput(
                "client_secret needs a client_id".into(),
            )));
        }
    };
    let redirect_uri = format!("{}{UPSTREAM_CALLBACK}", base_url(&headers));
    let hub = call.state.hub().clone();
    let started = hub
        .begin_sign_in(&call.caller.principal, &id, &redirect_uri, client)
        .await?;
    Ok(ok(started))
}

/// `DELETE /api/v1/mcp/servers/{id}/oauth`: forgets the sign-in.
async fn sign_out(call: HubCall, Path(id): Path<String>) -> Result<Response, ApiError> {
    let key = id.clone();
    call.run(move |hub, who| hub.sign_out(who, &key)).await?;
    call.reply(move |hub, who| hub.upstream(who, &id)).await
}

#[derive(Debug, Default, Deserialize)]
struct CallbackQuery {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /oauth/upstream/callback`: the browser comes back from the authorization server; the
/// code is exchanged and the person is told how it went.
async fn sign_in_callback(
    axum::extract::State(st): axum::extract::State<Arc<AppState>>,
    Params(q): Params<CallbackQuery>,
) -> Response {
    let error = q.error.as_deref().map(|e| match &q.error_description {
        Some(d) => format!("{e} ({d})"),
        None => e.to_owned(),
    });
    let outcome = match q.state.as_deref() {
        Some(state) => {
            st.hub()
                .finish_sign_in(state, q.code.as_deref(), error.as_deref())
                .await
        }
        None => Err(Error::InvalidInput(
            "the authorization server sent no state".into(),
        )),
    };
    let (status, title, text) = match &outcome {
        Ok(done) => (
            StatusCode::OK,
            "Signed in".to_owned(),
            format!(
                "Quarry is signed in to the MCP server '{}'. Its tools are being listed; you can close this window.",
                done.name
            ),
        ),
        Err(e) => (
            crate::http::http_status(e),
            "Sign-in failed".to_owned(),
            crate::http::public_detail(e),
        ),
    };
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title} · Quarry</title></head>\
         <body><main><h1>{title}</h1><p class=\"sign-in-result\">{}</p><p><a href=\"/#/tools\">Back to Quarry's tools</a></p></main></body></html>",
        crate::http::html_escape(&text)
    );
    (
        status,
        [
            (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (axum::http::header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response()
}

async fn list_servers(call: HubCall) -> Result<Response, ApiError> {
    let servers = call.run(|hub, who| hub.upstreams(who)).await?;
    Ok(ok_list(&servers))
}

async fn register_server(
    call: HubCall,
    Body(req): Body<RegisterUpstream>,
) -> Result<Response, ApiError> {
    call.created(move |hub, who| hub.register(who, req)).await
}

async fn get_server(call: HubCall, Path(id): Path<String>) -> Result<Response, ApiError> {
    call.reply(move |hub, who| hub.upstream(who, &id)).await
}

async fn delete_server(call: HubCall, Path(id): Path<String>) -> Result<Response, ApiError> {
    call.deleted(id, |hub, who, id| hub.delete_upstream(who, id))
        .await
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ToggleBody {
    #[serde(default)]
    enabled: Option<bool>,
}

/// An optional JSON body: none (or empty) means "flip".
fn toggle_body(bytes: &[u8]) -> Result<ToggleBody, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(ToggleBody::default());
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("invalid body: {e} (send {{\"enabled\": true|false}} or nothing)"),
        )
    })
}

async fn toggle_server(
    call: HubCall,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b = toggle_body(&body)?;
    let key = id.clone();
    let connecting = call
        .run(move |hub, who| hub.set_enabled(who, &key, b.enabled))
        .await?;
    settled_server(&call, id, connecting).await
}

/// The upstream `id` once a (re)connection has had [`quarry_hub::ANSWER_GRACE`] to discover.
async fn settled_server(
    call: &HubCall,
    id: String,
    connecting: Option<quarry_hub::Connecting>,
) -> Result<Response, ApiError> {
    if let Some(c) = connecting {
        c.discovered(quarry_hub::ANSWER_GRACE).await;
    }
    call.reply(move |hub, who| hub.upstream(who, &id)).await
}

/// `PATCH` (and `PUT`) `/api/v1/mcp/servers/{id}`: the fields given change, the rest stay;
/// the answer comes once the reconnection has had [`quarry_hub::ANSWER_GRACE`].
async fn update_server(
    call: HubCall,
    Path(key): Path<String>,
    Body(patch): Body<UpstreamPatch>,
) -> Result<Response, ApiError> {
    let (id, connecting) = call
        .run(move |hub, who| hub.update_upstream(who, &key, patch))
        .await?;
    settled_server(&call, id, connecting).await
}

async fn refresh_server(call: HubCall, Path(id): Path<String>) -> Result<Response, ApiError> {
    let key = id.clone();
    call.run(move |hub, who| hub.refresh(who, &key))
        .await?
        .finish()
        .await;
    call.reply(move |hub, who| hub.upstream(who, &id)).await
}

/// One tool as the tool APIs list it.
fn tool_json(t: &CatalogTool, catalog: &Catalog) -> Value {
    let pkg = catalog.package(&t.package);
    let source = match pkg.map(|p| p.kind) {
        Some(PackageKind::Builtin) => "builtin".to_owned(),
        Some(PackageKind::Upstream) => format!(
            "mcp:{}",
            pkg.and_then(|p| p.upstream_id.clone()).unwrap_or_default()
        ),
        Some(PackageKind::Custom) => "custom".to_owned(),
        None => String::new(),
    };
    let mut v = json!({
        "name": t.wire_name,
        "tool": t.name,
        "full_name": t.full_name,
        "package": t.package,
        "description": t.description(),
        "inputSchema": &*t.tool.input_schema,
        "category": t.category,
        "tags": t.tags,
        "source": source,
        "catalog_source": t.source,
        "schema_version": t.schema_version,
        "enabled": t.enabled,
        "requires_task": t.requires_task,
    });
    if let Some(title) = &t.tool.title {
        v["title"] = json!(title);
    }
    if let Some(o) = &t.tool.output_schema {
        v["outputSchema"] = json!(&**o);
    }
    if let Some(a) = &t.tool.annotations {
        v["annotations"] = json!(a);
    }
    v
}

async fn server_tools(call: HubCall, Path(id): Path<String>) -> Result<Response, ApiError> {
    let (tools, catalog) = call
        .run(move |hub, who| {
            let tools = hub.upstream_tools(who, &id)?;
            Ok((tools, hub.catalog(who.owner_key())?))
        })
        .await?;
    let items: Vec<Value> = tools.iter().map(|t| tool_json(t, &catalog)).collect();
    Ok(ok_list(&items))
}

/// Tools of the given kinds, knowledge tools only those the caller may use.
fn tools_of_kinds(caller: &Caller, catalog: &Catalog, kinds: &[PackageKind]) -> Vec<Value> {
    catalog
        .tools
        .iter()
        .filter(|t| {
            catalog
                .package(&t.package)
                .is_some_and(|p| kinds.contains(&p.kind))
                && quarry_hub::may_use(&caller.principal, t)
                && catalog_tools::catalog_tool_usable_by(caller, t)
        })
        .map(|t| tool_json(t, catalog))
        .collect()
}

async fn all_mcp_tools(call: HubCall) -> Result<Response, ApiError> {
    let catalog = call.catalog().await?;
    Ok(ok_list(&tools_of_kinds(
        &call.caller,
        &catalog,
        &[PackageKind::Builtin, PackageKind::Upstream],
    )))
}

/// Built-in tools and the caller's custom tools (seed 003 §5.3), custom ones with their
/// specification (header names only) whether enabled or not.
async fn all_tools(call: HubCall) -> Result<Response, ApiError> {
    let catalog = call.catalog().await?;
    let mut items = tools_of_kinds(&call.caller, &catalog, &[PackageKind::Builtin]);
    let custom = call.run(|hub, who| hub.custom_tools(who)).await?;
    for c in custom {
        let mut v = serde_json::to_value(&c).unwrap_or_default();
        // One meaning of `name` in this listing: what an MCP client calls the tool by (as for
        // built-ins); the tool's own name and its package beside it.
        let wire = catalog
            .tools
            .iter()
            .find(|t| t.full_name == c.full_name)
            .map(|t| t.wire_name.clone())
            .unwrap_or_else(|| {
                quarry_hub::names::wire_name(
                    quarry_hub::CUSTOM_PACKAGE,
                    &c.name,
                    quarry_hub::names::DEFAULT_WIRE_NAME_MAX,
                )
            });
        v["name"] = json!(wire);
        v["tool"] = json!(c.name);
        v["package"] = json!(quarry_hub::CUSTOM_PACKAGE);
        v["source"] = json!(format!("custom:{}", c.id));
        items.push(v);
    }
    Ok(ok_list(&items))
}

async fn create_custom(
    call: HubCall,
    Body(mut body): Body<serde_json::Map<String, Value>>,
) -> Result<Response, ApiError> {
    let enabled = match body.remove("enabled") {
        None => true,
        Some(Value::Bool(b)) => b,
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "enabled: expected true or false",
            ));
        }
    };
    // Seed 003 names the kind; HTTP is the only one.
    match body.remove("tool_type") {
        None => {}
        Some(Value::String(t)) if t == "http" => {}
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("tool_type: only \"http\" is supported, got {other}"),
            ));
        }
    }
    let spec: quarry_hub::custom::CustomToolSpec = serde_json::from_value(Value::Object(body))
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid custom tool: {e}")))?;
    call.created(move |hub, who| hub.create_custom_tool(who, spec, enabled))
        .await
}

async fn get_custom(call: HubCall, Path(id): Path<String>) -> Result<Response, ApiError> {
    call.reply(move |hub, who| hub.custom_tool(who, &id)).await
}

async fn update_custom(
    call: HubCall,
    Path(id): Path<String>,
    Body(patch): Body<serde_json::Map<String, Value>>,
) -> Result<Response, ApiError> {
    call.reply(move |hub, who| hub.update_custom_tool(who, &id, patch))
        .await
}

async fn delete_custom(call: HubCall, Path(id): Path<String>) -> Result<Response, ApiError> {
    call.deleted(id, |hub, who, id| hub.delete_custom_tool(who, id))
        .await
}

async fn toggle_custom(
    call: HubCall,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b = toggle_body(&body)?;
    call.reply(move |hub, who| {
        quarry_hub::require_write(who)?;
        let current = hub.custom_tool(who, &id)?;
        let mut patch = serde_json::Map::new();
        patch.insert(
            "enabled".into(),
            json!(b.enabled.unwrap_or(!current.enabled)),
        );
        hub.update_custom_tool(who, &current.id, patch)
    })
    .await
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TestBody {
    #[serde(default)]
    arguments: Option<Value>,
}

/// Runs a custom tool once and shows the raw response (seed 003's "test").
async fn test_custom(
    call: HubCall,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b: TestBody = if body.iter().all(u8::is_ascii_whitespace) {
        TestBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("invalid body: {e} (send {{\"arguments\": {{…}}}})"),
            )
        })?
    };
    // A missing tool is a 404 like every other route's.
    let prepared = call
        .run(move |hub, who| {
            hub.custom_tool(who, &id)?;
            Ok(hub.custom_call(who, &id))
        })
        .await?;
    let args = b.arguments.unwrap_or_else(|| json!({}));
    let outcome = match prepared {
        Ok(custom) => custom.run(&args).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(r) => Ok(ok(r)),
        Err(e) => {
            use quarry_hub::custom::CustomToolError as E;
            let status = match &e {
                E::InvalidSpec(_) | E::InvalidArguments(_) | E::Refused(_) => {
                    StatusCode::BAD_REQUEST
                }
                E::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::BAD_GATEWAY,
            };
            Err(ApiError::new(status, e.to_string()))
        }
    }
}
async fn builtin_tools(call: HubCall) -> Result<Response, ApiError> {
    let catalog = call.catalog().await?;
    Ok(ok_list(&tools_of_kinds(
        &call.caller,
        &catalog,
        &[PackageKind::Builtin],
    )))
}

async fn set_enabled(
    call: &HubCall,
    name: String,
    body: &[u8],
    builtin_only: bool,
) -> Result<Response, ApiError> {
    let b = toggle_body(body)?;
    let (tool, catalog) = call
        .run(move |hub, who| {
            quarry_hub::require_write(who)?;
            let catalog = hub.catalog(who.owner_key())?;
            let found = if builtin_only {
                catalog
                    .tools
                    .iter()
                    .find(|t| {
                        catalog
                            .package(&t.package)
                            .is_some_and(|p| p.kind == PackageKind::Builtin)
                            && (t.name == name || t.full_name == name || t.wire_name == name)
                    })
                    .cloned()
            } else {
                catalog
                    .by_full_name(&name)
                    .or_else(|| catalog.by_wire_name(&name))
                    .cloned()
            };
            let tool = found.ok_or_else(|| Error::NotFound(format!("tool '{name}' not found")))?;
            let enabled = b.enabled.unwrap_or(!tool.enabled);
            let tool = hub.set_tool_enabled(who, &tool.full_name, enabled)?;
            Ok((tool, hub.catalog(who.owner_key())?))
        })
        .await?;
    Ok(ok(tool_json(&tool, &catalog)))
}

async fn toggle_builtin(
    call: HubCall,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    set_enabled(&call, name, &body, true).await
}

async fn toggle_tool(
    call: HubCall,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    set_enabled(&call, name, &body, false).await
}

// --- Catalog (seed 002) ------------------------------------------------------------------

/// `scheme://host` of this request, for ready-to-paste endpoint URLs.
fn encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Usable catalog tools (switched on, of an enabled server, callable without tasks, allowed
/// to this caller): what an endpoint URL from the catalog would expose.
fn usable<'a>(caller: &Caller, catalog: &'a Catalog) -> Vec<&'a CatalogTool> {
    catalog
        .tools
        .iter()
        .filter(|t| is_usable(caller, t))
        .collect()
}

fn is_usable(caller: &Caller, t: &CatalogTool) -> bool {
    quarry_hub::usable(&caller.principal, t) && catalog_tools::catalog_tool_usable_by(caller, t)
}

/// The catalog's packages this caller's tool scope reaches (all, without one).
fn reached<'a>(caller: &'a Caller, catalog: &'a Catalog) -> impl Iterator<Item = &'a Package> {
    catalog
        .packages
        .iter()
        .filter(|p| caller.principal.reaches_package(&p.id))
}

async fn catalog_categories(call: HubCall) -> Result<Response, ApiError> {
    let catalog = call.catalog().await?;
    let caller = &call.caller;
    let tools = usable(caller, &catalog);
    let mut cats: std::collections::BTreeMap<&str, (std::collections::BTreeSet<&str>, usize)> =
        Default::default();
    for p in reached(caller, &catalog) {
        cats.entry(p.category.as_str()).or_default().0.insert(&p.id);
    }
    for t in &tools {
        if let Some(p) = catalog.package(&t.package) {
            cats.entry(p.category.as_str()).or_default().1 += 1;
        }
    }
    let categories: Vec<Value> = cats
        .iter()
        .map(|(id, (pkgs, n))| {
            json!({ "id": id, "name": id, "packageCount": pkgs.len(), "toolCount": n })
        })
        .collect();
    Ok(axum::Json(json!({ "categories": categories })).into_response())
}

async fn catalog_category(
    call: HubCall,
    headers: HeaderMap,
    Path(category): Path<String>,
) -> Result<Response, ApiError> {
    category_packages(&call, &headers, &category).await
}

/// `GET /api/catalog/{category}`: the category's packages, or 404.
async fn category_packages(
    call: &HubCall,
    headers: &HeaderMap,
    category: &str,
) -> Result<Response, ApiError> {
    let catalog = call.catalog().await?;
    let caller = &call.caller;
    let tools = usable(caller, &catalog);
    let base = base_url(headers);
    let packages: Vec<Value> = reached(caller, &catalog)
        .filter(|p| p.category == category)
        .map(|p| {
            let n = tools.iter().filter(|t| t.package == p.id).count();
            json!({
                "id": p.id, "name": p.name, "description": p.description,
                "toolCount": n, "tags": p.tags, "kind": p.kind, "source": p.source,
                "endpoint": format!("{base}/api/mcp?servers={}", encode(&p.id)),
            })
        })
        .collect();
    if packages.is_empty() {
        return Err(ApiError::from(Error::NotFound(format!(
            "category '{category}' not found"
        ))));
    }
    Ok(axum::Json(json!({ "packages": packages })).into_response())
}

/// Which of the caller's named endpoints expose each tool (`package.tool` → endpoint names,
/// in name order): their views over the caller's catalog, computed once per request.
async fn exposing(
    call: &HubCall,
    catalog: &Arc<Catalog>,
) -> Result<std::collections::HashMap<String, Vec<String>>, ApiError> {
    let store = call.state.root_engine().store_handle();
    let caller = call.caller.clone();
    let catalog = catalog.clone();
    let max_tools = call.state.hub().options().max_tools;
    run_blocking(move || {
        let owners = endpoints::visible_owners(&caller.principal);
        let mut by_tool: std::collections::HashMap<String, Vec<String>> = Default::default();
        for e in store.tool_endpoints(&owners)? {
            // An endpoint whose selection no longer fits this catalog exposes nothing here.
            let Ok(view) = endpoints::view_of(&e, catalog.clone(), &caller, max_tools) else {
                continue;
            };
            for t in catalog.tools.iter().filter(|t| view.reaches(&t.full_name)) {
                by_tool
                    .entry(t.full_name.clone())
                    .or_default()
                    .push(e.name.clone());
            }
        }
        Ok(by_tool)
    })
    .await
}

fn catalog_tool_json(
    t: &CatalogTool,
    catalog: &Catalog,
    base: &str,
    exposed_by: &std::collections::HashMap<String, Vec<String>>,
) -> Value {
    let pkg = catalog.package(&t.package);
    json!({
        "name": t.full_name,
        "wireName": t.wire_name,
        "description": t.description(),
        "inputSchema": &*t.tool.input_schema,
        "category": t.category,
        "tags": t.tags,
        "serverId": t.package,
        "serverName": pkg.map(|p| p.name.as_str()).unwrap_or(""),
        "source": t.source,
        "schemaVersion": t.schema_version,
        "endpoint": format!("{base}/api/mcp?tools={}", encode(&t.full_name)),
        "namedEndpoints": exposed_by.get(&t.full_name).cloned().unwrap_or_default(),
    })
}

async fn catalog_package_tools(
    call: HubCall,
    headers: HeaderMap,
    Path(package): Path<String>,
) -> Result<Response, ApiError> {
    let catalog = call.catalog().await?;
    let caller = &call.caller;
    if catalog.package(&package).is_none() || !caller.principal.reaches_package(&package) {
        return Err(ApiError::from(Error::NotFound(format!(
            "package '{package}' not found"
        ))));
    }
    let base = base_url(&headers);
    let exposed_by = exposing(&call, &catalog).await?;
    let tools: Vec<Value> = usable(caller, &catalog)
        .into_iter()
        .filter(|t| t.package == package)
        .map(|t| catalog_tool_json(t, &catalog, &base, &exposed_by))
        .collect();
    Ok(axum::Json(json!({
        "tools": tools,
        "endpoint": format!("{base}/api/mcp?servers={}", encode(&package)),
    }))
    .into_response())
}

/// The category whose route (`/api/catalog/search`) is also the search route.
const SEARCH_CATEGORY: &str = "search";

#[derive(Deserialize)]
struct SearchParams {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    limit: Option<String>,
}

async fn catalog_search(
    call: HubCall,
    headers: HeaderMap,
    Params(params): Params<SearchParams>,
) -> Result<Response, ApiError> {
    let limit = match params.limit.as_deref() {
        None | Some("") => 20,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("limit must be an integer from 1 to 100, got '{l}'"),
                ));
            }
        },
    };
    let catalog = call.catalog().await?;
    let Some(q) = params.q.as_deref().map(str::trim) else {
        // `/api/catalog/search` without `q` is the category `search` (seed 002's own
        // example), when there is one.
        if params.category.is_none()
            && catalog
                .packages
                .iter()
                .any(|p| p.category == SEARCH_CATEGORY)
        {
            return category_packages(&call, &headers, SEARCH_CATEGORY).await;
        }
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "q is required"));
    };
    if q.is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "q is required"));
    }
    let q = q.to_owned();
    let allowed: std::collections::HashSet<usize> = catalog
        .tools
        .iter()
        .enumerate()
        .filter(|(_, t)| is_usable(&call.caller, t))
        .map(|(i, _)| i)
        .collect();
    let c2 = catalog.clone();
    let hits = run_blocking(move || {
        let index = c2.index()?;
        index.search(&q, None, c2.tools.len().max(1))
    })
    .await?;
    let base = base_url(&headers);
    let matched: Vec<&CatalogTool> = hits
        .into_iter()
        .filter(|(i, _)| allowed.contains(i))
        .map(|(i, _)| &catalog.tools[i])
        .filter(|t| params.category.as_deref().is_none_or(|c| t.category == c))
        .collect();
    let total = matched.len();
    let exposed_by = exposing(&call, &catalog).await?;
    let tools: Vec<Value> = matched
        .into_iter()
        .take(limit)
        .map(|t| catalog_tool_json(t, &catalog, &base, &exposed_by))
        .collect();
    Ok(axum::Json(json!({ "tools": tools, "total": total })).into_response())
}
