//! Work two surfaces share, so that route modules never import each other: the knowledge
//! and wiki tools (listed and run by the MCP endpoints and QukaAI's, filtered by the hub API), MCP tool
//! arguments and the request's caller, the spaces a principal sees (the tokens API and
//! the UI session), and who sees which named tool endpoint (its API, its MCP route, tokens,
//! the catalog). Nothing here defines a route.

pub(crate) mod approver_tools;
pub(crate) mod browse_tools;
pub(crate) mod catalog_tools;
pub(crate) mod endpoints;
pub(crate) mod entries;
pub(crate) mod filter;
pub(crate) mod gate;
pub(crate) mod knowledge_tools;
mod spaces;
pub(crate) mod tool_args;
pub(crate) mod tool_call;
pub(crate) mod tool_scope;
pub(crate) mod wiki_tools;

pub(crate) use spaces::visible_spaces;
