//! `params.tools` of a session's `initialize` (seed 002's other selection path): kept by the
//! gateway's transports (`hub_sse`) and put on the session's requests, where the handler
//! narrows the URL's selection to them.

use axum::http::request::Parts;
use quarry_hub::{Catalog, Selection};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

/// `params.tools` of a legacy SSE session's `initialize`, put on each of its messages.
#[derive(Debug, Clone)]
pub(crate) struct InitializeTools(pub Vec<String>);

/// The selection a request is viewed through: the URL's, narrowed to `params.tools` when the
/// session's `initialize` named some. Each named tool must be in the URL's selection (all of
/// the caller's tools when it selects none): `params.tools` never widens it.
pub(crate) fn narrowed(
    selection: Selection,
    catalog: &Catalog,
    context: &RequestContext<RoleServer>,
) -> Result<Selection, McpError> {
    let Some(InitializeTools(names)) = context
        .extensions
        .get::<Parts>()
        .and_then(|p| p.extensions.get::<InitializeTools>())
    else {
        return Ok(selection);
    };
    let picked_by_url = |i: usize| {
        if selection.tools.is_none() && selection.servers.is_none() {
            return true;
        }
        let in_tools = selection
            .tools
            .iter()
            .flatten()
            .any(|n| catalog.position(n) == Some(i));
        let in_servers = selection
            .servers
            .iter()
            .flatten()
            .any(|p| *p == catalog.tools[i].package);
        in_tools || in_servers
    };
    for name in names {
        let inside = catalog.position(name).is_some_and(picked_by_url);
        if !inside {
            return Err(McpError::invalid_params(
                format!(
                    "params.tools names '{name}', which is not a tool of this endpoint's selection \
                     (params.tools can only narrow the URL's selection)"
                ),
                None,
            ));
        }
    }
    Ok(Selection {
        tools: Some(names.clone()),
        servers: None,
        ..selection
    })
}
