//! Named tool endpoints as the surfaces see them (the REST API that manages them, the MCP
//! route that serves them at `/mcp/e/<name>`, the tokens API that binds tokens to one, the
//! catalog that says which endpoints expose a tool): who sees and edits which endpoint, and
//! the view an endpoint gives a caller.
//!
//! An endpoint belongs to a user (`user:<owner key>`: that user sees and edits it) or to a
//! space (`space:<UUID>`: its members see it when they act in that space; its admins and
//! owners edit it). One nobody may see is as missing as one that does not exist. An endpoint
//! never widens a caller's reach: its view is computed over the caller's own catalog with the
//! caller's token scope applied, like any other. Its overrides (new names and descriptions of
//! its tools) apply to that view only: ad-hoc URLs (`/api/mcp?tools=…`) show the tools as
//! they are.

use std::collections::BTreeMap;
use std::sync::Arc;

use quarry_core::{Access, Error, Principal};
use quarry_hub::{Catalog, DefaultView, EndpointSelection, ToolOverride, View, ViewError};
use quarry_store::{Store, ToolEndpointRow};
use serde_json::{Value, json};

use super::catalog_tools;
use crate::auth::Caller;

/// The owner word of a user's endpoint.
pub(crate) fn user_owner(principal: &Principal) -> String {
    format!("user:{}", principal.owner_key())
}

/// The owner word of the request's space's endpoints.
pub(crate) fn space_owner(principal: &Principal) -> String {
    format!("space:{}", principal.space_id)
}

/// The owners whose endpoints `principal` sees.
pub(crate) fn visible_owners(principal: &Principal) -> Vec<String> {
    vec![user_owner(principal), space_owner(principal)]
}

/// The endpoint `name` if `principal` may see it: its user's own, else its space's (names
/// are unique per owner, so a user's own endpoint comes before a space's of the same name).
pub(crate) fn visible(
    store: &Arc<dyn Store>,
    principal: &Principal,
    name: &str,
) -> Result<Option<ToolEndpointRow>, Error> {
    store.tool_endpoint(&visible_owners(principal), name)
}

/// Whether `principal` may change or delete `endpoint` (which it sees).
pub(crate) fn may_edit(principal: &Principal, endpoint: &ToolEndpointRow) -> bool {
    if principal.read_only() {
        return false;
    }
    if endpoint.owner == user_owner(principal) {
        return true;
    }
    endpoint.owner == space_owner(principal)
        && principal.scope.manage
        && principal.scope.can(Access::Admin)
}

/// The endpoint's view for `caller` over its catalog (its token scope and knowledge-tool
/// access apply), capped at the endpoint's own cap or the server's, whichever is lower, with
/// the endpoint's overrides. An override of a tool this view does not reach (switched off
/// since, or beyond this caller's reach) is left out rather than failing the endpoint.
pub(crate) fn view_of(
    endpoint: &ToolEndpointRow,
    catalog: Arc<Catalog>,
    caller: &Caller,
    server_cap: usize,
) -> Result<View, ViewError> {
    view_with(endpoint, catalog, caller, server_cap, false)
}

/// [`view_of`] as saving an endpoint checks it: every override must name a tool of the view
/// (a typo is a 400 naming it, not an override that never applies).
pub(crate) fn checked_view_of(
    endpoint: &ToolEndpointRow,
    catalog: Arc<Catalog>,
    caller: &Caller,
    server_cap: usize,
) -> Result<View, ViewError> {
    view_with(endpoint, catalog, caller, server_cap, true)
}

fn view_with(
    endpoint: &ToolEndpointRow,
    catalog: Arc<Catalog>,
    caller: &Caller,
    server_cap: usize,
    every_override: bool,
) -> Result<View, ViewError> {
    let saved = EndpointSelection::from_query(&endpoint.selection)
        .map_err(|e| ViewError::Invalid(e.to_string()))?;
    let cap = saved.cap.map_or(server_cap, |c| c.min(server_cap));
    let view = View::compute(
        catalog,
        &saved.selection,
        &DefaultView::Everything,
        &caller.principal,
        &|t| catalog_tools::catalog_tool_usable_by(caller, t),
        cap,
    )?;
    if every_override {
        return view.with_overrides(&saved.overrides);
    }
    let reached: BTreeMap<String, ToolOverride> = saved
        .overrides
        .into_iter()
        .filter(|(tool, _)| view.reaches(tool))
        .collect();
    view.with_overrides(&reached)
}

/// How the API shows an endpoint: its URL at `base`, its selection spelled out.
pub(crate) fn describe(endpoint: &ToolEndpointRow, principal: &Principal, base: &str) -> Value {
    let saved = EndpointSelection::from_query(&endpoint.selection).unwrap_or_default();
    let s = &saved.selection;
    let (kind, owner_id) = endpoint
        .owner
        .split_once(':')
        .unwrap_or(("user", endpoint.owner.as_str()));
    json!({
        "id": endpoint.id,
        "name": endpoint.name,
        "description": endpoint.description,
        "url": format!("{base}/mcp/e/{}", endpoint.name),
        "owner": {"kind": kind, "id": owner_id},
        "tools": s.tools,
        "servers": s.servers,
        "pin": s.pin,
        "mode": if s.search_mode { "search" } else { "list" },
        "names": if s.own_names { "tool" } else { "package" },
        "cap": saved.cap,
        "overrides": saved.overrides,
        "editable": may_edit(principal, endpoint),
        "created_at": quarry_core::iso8601_millis(endpoint.created_at),
        "updated_at": quarry_core::iso8601_millis(endpoint.updated_at),
    })
}
