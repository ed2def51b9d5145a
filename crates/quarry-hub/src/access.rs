//! Who may use or change what: the rules every listing, view, call and chat round applies to
//! a caller ([`may_use`], [`usable`]), and who may change a hub's configuration
//! ([`require_write`]).

use quarry_core::{Error, Principal, Result};

use crate::catalog::{CUSTOM_PACKAGE, CatalogTool};
use crate::names;

/// Whether `caller` may use catalogued tool `t` (its token's tool scope, and read-only
/// tokens' rule: tools annotated `readOnlyHint: true`, or named one by one). Every listing,
/// view, call and chat round applies it, so an out-of-scope tool is as unknown as a missing
/// one.
pub fn may_use(caller: &Principal, t: &CatalogTool) -> bool {
    caller.may_use_tool(&t.package, &t.full_name, annotated_read_only(&t.tool))
}

/// Whether a client of `caller`'s can call `t` now: switched on, of an available server,
/// callable without tasks, and allowed ([`may_use`]) — what the catalog lists and a
/// server's `usable_tool_count` counts.
pub fn usable(caller: &Principal, t: &CatalogTool) -> bool {
    t.enabled && t.available && !t.requires_task && may_use(caller, t)
}

/// Whether a tool's source annotates it read-only (`readOnlyHint: true`); a tool without
/// annotations may write. The rule [`may_use`] applies, for tools served outside the
/// catalog too (the QukaAI endpoint's knowledge tools).
pub fn annotated_read_only(tool: &rmcp::model::Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

/// [`may_use`] for a custom tool's row (custom tools carry no annotations: read-only tokens
/// reach one only when their scope names it).
pub(crate) fn may_use_custom(caller: &Principal, row: &quarry_store::CustomToolRow) -> bool {
    caller.may_use_tool(
        CUSTOM_PACKAGE,
        &names::catalog_name(CUSTOM_PACKAGE, &row.name),
        false,
    )
}

/// `Forbidden` unless the caller may change the hub's configuration (register, toggle,
/// create or delete servers and tools): not a read-only token or a viewer's, and not a token
/// limited to some tools — a toggle or a server is its user's, shared by all their tokens,
/// so a scoped token changing one would act outside its scope. Checked before any lookup,
/// so the answer is the same whether the named tool exists or not.
pub fn require_write(caller: &Principal) -> Result<()> {
    if caller.read_only() {
        return Err(Error::Forbidden(
            "this access token is read-only (a read-only token, or a viewer's): it cannot change tools or MCP servers".into(),
        ));
    }
    if caller.identity.as_ref().is_some_and(|i| i.tools.is_some()) {
        return Err(Error::Forbidden(
            "this access token is limited to some tools (--tools): it cannot change tools or MCP servers".into(),
        ));
    }
    Ok(())
}
