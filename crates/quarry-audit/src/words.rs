//! The audit log's words: what was done (`action`) and how it ended (`outcome`).

/// A tool called over MCP (target `package.tool`, or the tool's name on `/mcp`).
pub const TOOL_CALL: &str = "tool.call";
/// A search (target: the surface; detail: knowledge bases and the result count).
pub const SEARCH: &str = "search";
/// A change over REST (target: method and route; detail: the path and status). Knowledge
/// writes and deletes, uploads, tokens, memberships, spaces and hub changes are all this.
pub const WRITE: &str = "write";
/// A sync a node ran on its source's schedule (target: the source's id; detail: its
/// knowledge base, status and counts). A sync asked for over REST is a [`WRITE`].
pub const SOURCE_SYNC: &str = "source.sync";
/// A tool call held for a person's approval made a new request (target: the tool; detail:
/// the approval's id, its policies, the redacted arguments). The decision is a [`WRITE`]
/// (or the `decide_approval` [`TOOL_CALL`]) and the run a [`TOOL_CALL`], each with the same
/// `approval_id` in its detail: together, the approval's receipt.
pub const APPROVAL_REQUEST: &str = "approval.request";
/// A request refused before it reached anything (target: the error code).
pub const AUTH_FAILURE: &str = "auth.failure";
/// Someone signed in to the web UI.
pub const SIGN_IN: &str = "signin";

/// The outcome words.
pub const OK: &str = "ok";
/// The action failed (a tool error, a bad request, a server error).
pub const ERROR: &str = "error";
/// The caller was not allowed (401, 403, an unknown or out-of-scope tool).
pub const DENIED: &str = "denied";
