//! Which of Quarry's own catalogued tools a caller may use (the knowledge package's capture and
//! wiki tools, the approvals package), for every surface that lists or calls catalog tools.

use crate::auth::Caller;

use super::{approver_tools, knowledge_tools, wiki_tools};

/// Whether `caller` may use catalog tool `t` as far as Quarry's own packages go: any other
/// package's tool, and the knowledge and wiki tools the caller may use. (A token's tool scope is
/// `quarry_hub::may_use`'s, applied beside this.)
pub(crate) fn catalog_tool_usable_by(caller: &Caller, t: &quarry_hub::CatalogTool) -> bool {
    match t.package.as_str() {
        quarry_hub::KNOWLEDGE_PACKAGE if wiki_tools::handles(&t.name) => {
            wiki_tools::usable_by(caller, &t.name)
        }
        quarry_hub::KNOWLEDGE_PACKAGE => knowledge_tools::usable_by(caller, &t.name),
        approver_tools::APPROVALS_PACKAGE => approver_tools::usable_by(caller),
        _ => true,
    }
}
