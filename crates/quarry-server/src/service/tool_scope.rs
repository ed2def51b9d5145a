//! Whether a caller's token reaches one of Quarry's own tools (its tool scope and read-only
//! rule, as `quarry_hub::may_use` applies them to catalogued tools): shared by the knowledge
//! and wiki tools, below both.

use rmcp::model::Tool;

use crate::auth::Caller;

/// Whether the caller's token reaches Quarry's own tool `t` (its tool scope and read-only
/// rule, as `quarry_hub::may_use` applies them to catalogued tools).
pub(crate) fn in_tool_scope(caller: &Caller, t: &Tool) -> bool {
    caller.principal.may_use_tool(
        quarry_hub::KNOWLEDGE_PACKAGE,
        &quarry_hub::names::catalog_name(quarry_hub::KNOWLEDGE_PACKAGE, &t.name),
        quarry_hub::annotated_read_only(t),
    )
}
