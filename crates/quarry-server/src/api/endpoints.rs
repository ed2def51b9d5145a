//! Named tool endpoints over REST (`/api/v1/endpoints`): list, create, read, change and
//! delete the saved selections served at `/mcp/e/<name>`. Who sees and edits which endpoint
//! is `service::endpoints`'; a selection (and its overrides: new names and descriptions of
//! its tools) is checked against the caller's own catalog when it is saved, so a typo is a
//! 400 rather than an endpoint that lists nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use quarry_core::{Access, Error};
use quarry_hub::{EndpointSelection, Selection, ToolOverride, endpoint};
use quarry_store::ToolEndpointRow;
use serde::Deserialize;

use crate::auth::Caller;
use crate::http::{ApiError, Body, base_url, count, ok, ok_list, run_blocking};
use crate::service::endpoints;
use crate::state::AppState;

/// Longest description.
const MAX_DESCRIPTION: usize = 500;

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/endpoints", get(list).post(create))
        .route(
            "/api/v1/endpoints/{name}",
            get(read).put(update).delete(remove),
        )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointBody {
    /// The URL's name (`/mcp/e/<name>`): required to create; a `PUT` may repeat the
    /// endpoint's own name, never another (its clients would lose it): see `rename`.
    #[serde(default)]
    name: Option<String>,
    /// A `PUT`'s new name for the endpoint, said explicitly: `/mcp/e/<old name>` stops
    /// answering.
    #[serde(default)]
    rename: Option<String>,
    #[serde(default)]
    description: Option<String>,
    /// `user` (default: the caller's own) or `space` (the request's space; admins).
    #[serde(default)]
    owner: Option<String>,
    /// `package.tool` names.
    #[serde(default)]
    tools: Option<Vec<String>>,
    /// Package ids.
    #[serde(default)]
    servers: Option<Vec<String>>,
    /// Tools listed beside the search tools in search mode.
    #[serde(default)]
    pin: Vec<String>,
    /// `list` (default) or `search`.
    #[serde(default)]
    mode: Option<String>,
    /// `package` (default: `package__tool`) or `tool` (the tools' own names).
    #[serde(default)]
    names: Option<String>,
    /// The most tools it may list (at most the server's cap).
    #[serde(default, deserialize_with = "count")]
    cap: Option<usize>,
    /// New names and descriptions of its tools, by `package.tool`: a `PUT` without it keeps
    /// the endpoint's, `{}` removes them.
    #[serde(default)]
    overrides: Option<BTreeMap<String, ToolOverride>>,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

fn not_found(name: &str) -> ApiError {
    ApiError::from(Error::NotFound(format!("tool endpoint '{name}' not found")))
}

/// The body as a saved selection, its shape checked (names against the catalog later).
fn saved_selection(b: &EndpointBody) -> Result<EndpointSelection, ApiError> {
    for name in [&b.name, &b.rename].into_iter().flatten() {
        endpoint::check_name(name)?;
    }
    let trim = |v: &Vec<String>| -> Vec<String> {
        v.iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let selection = Selection {
        tools: b.tools.as_ref().map(trim),
        servers: b.servers.as_ref().map(trim),
        pin: trim(&b.pin),
        search_mode: match b.mode.as_deref() {
            None | Some("list") => false,
            Some("search") => true,
            Some(other) => {
                return Err(bad(format!(
                    "unknown mode '{other}': use list (default) or search"
                )));
            }
        },
        own_names: match b.names.as_deref() {
            None | Some("package") => false,
            Some("tool") => true,
            Some(other) => {
                return Err(bad(format!(
                    "unknown names '{other}': use package (default, package__tool) or tool"
                )));
            }
        },
    };
    for name in selection
        .tools
        .iter()
        .flatten()
        .chain(selection.servers.iter().flatten())
        .chain(selection.pin.iter())
    {
        if name.contains(',') || name.chars().any(char::is_control) {
            return Err(bad(format!("invalid tool or package name {name:?}")));
        }
    }
    if selection.tools.is_none() && selection.servers.is_none() && !selection.search_mode {
        return Err(bad(
            "an endpoint chooses something: name tools (package.tool), servers (package ids), or mode=search",
        ));
    }
    if b.cap == Some(0) {
        return Err(bad("cap must be at least 1"));
    }
    if b.description
        .as_ref()
        .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION)
    {
        return Err(bad(format!(
            "description is longer than {MAX_DESCRIPTION} characters"
        )));
    }
    let overrides = b.overrides.clone().unwrap_or_default();
    for (tool, o) in &overrides {
        // What needs no catalog; whether the endpoint selects the tool, and whether its new
        // name is free, are checked against the catalog before saving.
        endpoint::check_override(tool, o).map_err(|m| bad(format!("overrides: {m}")))?;
    }
    Ok(EndpointSelection {
        selection,
        cap: b.cap,
        overrides,
    })
}

/// Checks `row`'s selection against the caller's catalog (unknown names, the cap).
async fn check_against_catalog(
    st: &Arc<AppState>,
    caller: &Caller,
    row: ToolEndpointRow,
) -> Result<ToolEndpointRow, ApiError> {
    let hub = st.hub().clone();
    let caller = caller.clone();
    let max_tools = hub.options().max_tools;
    run_blocking(move || {
        let catalog = hub.catalog(caller.principal.owner_key())?;
        endpoints::checked_view_of(&row, catalog, &caller, max_tools)
            .map_err(|e| Error::invalid(e.to_string()))?;
        Ok(row)
    })
    .await
}

async fn list(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let store = st.root_engine().store_handle();
    let owners = endpoints::visible_owners(&caller.principal);
    let rows = run_blocking(move || store.tool_endpoints(&owners)).await?;
    let base = base_url(&headers);
    let items: Vec<_> = rows
        .iter()
        .map(|e| endpoints::describe(e, &caller.principal, &base))
        .collect();
    Ok(ok_list(&items))
}

async fn create(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Body(b): Body<EndpointBody>,
) -> Result<Response, ApiError> {
    let saved = saved_selection(&b)?;
    let Some(name) = b.name.clone() else {
        return Err(bad("name is required: the endpoint's URL is /mcp/e/<name>"));
    };
    if b.rename.is_some() {
        return Err(bad(
            "\"rename\" is for changing an endpoint (PUT): give its \"name\"",
        ));
    }
    let p = &caller.principal;
    if p.read_only() {
        return Err(ApiError::from(Error::Forbidden(
            "a read-only token cannot create tool endpoints".into(),
        )));
    }
    let owner = match b.owner.as_deref() {
        None | Some("user") => endpoints::user_owner(p),
        Some("space") => {
            p.scope.require_manage(
                Access::Admin,
                "creating a tool endpoint for the whole space",
            )?;
            endpoints::space_owner(p)
        }
        Some(other) => return Err(bad(format!("unknown owner '{other}': use user or space"))),
    };
    let now = quarry_core::now_millis();
    let row = ToolEndpointRow {
        id: uuid::Uuid::new_v4().to_string(),
        name,
        owner,
        selection: saved.to_query(),
        description: b.description.unwrap_or_default().trim().to_owned(),
        created_by: p.identity.as_ref().map(|i| i.user_id.clone()),
        created_at: now,
        updated_at: now,
    };
    let row = check_against_catalog(&st, &caller, row).await?;
    let store = st.root_engine().store_handle();
    let stored = row.clone();
    run_blocking(move || store.insert_tool_endpoint(&stored)).await?;
    let body = endpoints::describe(&row, p, &base_url(&headers));
    Ok((StatusCode::CREATED, ok(body)).into_response())
}

/// The endpoint `name` as the caller sees it, or 404.
async fn find(st: &AppState, caller: &Caller, name: String) -> Result<ToolEndpointRow, ApiError> {
    let store = st.root_engine().store_handle();
    let who = caller.principal.clone();
    let wanted = name.clone();
    run_blocking(move || endpoints::visible(&store, &who, &wanted))
        .await?
        .ok_or_else(|| not_found(&name))
}

async fn read(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let row = find(&st, &caller, name).await?;
    Ok(ok(endpoints::describe(
        &row,
        &caller.principal,
        &base_url(&headers),
    )))
}

fn forbid_edit(caller: &Caller, row: &ToolEndpointRow) -> Result<(), ApiError> {
    let p = &caller.principal;
    if row.owner == endpoints::space_owner(p) {
        // A space's endpoint is a guardrail of every agent that uses it.
        p.scope
            .require_manage(Access::Admin, "changing a space's tool endpoint")?;
    }
    if endpoints::may_edit(p, row) {
        Ok(())
    } else {
        Err(ApiError::from(Error::Forbidden(format!(
            "you may use tool endpoint '{}' but not change it (its owner, or the space's admins, may)",
            row.name
        ))))
    }
}

/// `PUT`: replaces the name, selection and description (clients keep their URL unless the
/// name changes); the overrides too when the body has them, else the endpoint keeps its own.
async fn update(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Path(name): Path<String>,
    Body(b): Body<EndpointBody>,
) -> Result<Response, ApiError> {
    let mut saved = saved_selection(&b)?;
    if b.owner.is_some() {
        return Err(bad("an endpoint's owner cannot change: create a new one"));
    }
    let row = find(&st, &caller, name).await?;
    forbid_edit(&caller, &row)?;
    if b.overrides.is_none() {
        saved.overrides = EndpointSelection::from_query(&row.selection)
            .map(|old| old.overrides)
            .unwrap_or_default();
    }
    if let Some(n) = &b.name
        && *n != row.name
    {
        return Err(bad(format!(
            "\"name\" is '{n}' but this is endpoint '{}': a PUT keeps its name, since its clients use /mcp/e/{}; to rename it, send \"rename\": \"{n}\"",
            row.name, row.name
        )));
    }
    let new_name = b.rename.clone().unwrap_or_else(|| row.name.clone());
    let row = ToolEndpointRow {
        name: new_name,
        selection: saved.to_query(),
        description: b.description.unwrap_or_default().trim().to_owned(),
        updated_at: quarry_core::now_millis(),
        ..row
    };
    let row = check_against_catalog(&st, &caller, row).await?;
    let store = st.root_engine().store_handle();
    let stored = row.clone();
    run_blocking(move || store.update_tool_endpoint(&stored)).await?;
    Ok(ok(endpoints::describe(
        &row,
        &caller.principal,
        &base_url(&headers),
    )))
}

async fn remove(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let row = find(&st, &caller, name.clone()).await?;
    forbid_edit(&caller, &row)?;
    let store = st.root_engine().store_handle();
    let id = row.id.clone();
    run_blocking(move || store.delete_tool_endpoint(&id)).await?;
    Ok(ok(serde_json::json!({"deleted": name})))
}
