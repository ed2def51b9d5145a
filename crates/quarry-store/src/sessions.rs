//! MCP sessions any node can resume ([`SessionStore`]).

use quarry_core::Result;

/// How long a stored MCP session outlives its last handshake (clients re-initialize after).
pub const MCP_SESSION_KEPT_MS: i64 = 7 * 24 * 3600 * 1000;

/// MCP sessions (2025-11-25 clients) that any node can resume.
pub trait SessionStore: Send + Sync {
    /// The stored state of MCP session `id` (the client's `initialize` parameters, JSON).
    fn mcp_session(&self, id: &str) -> Result<Option<String>>;
    /// Stores session `id`'s state (replacing it); sessions untouched for
    /// [`MCP_SESSION_KEPT_MS`] are dropped on the way.
    fn put_mcp_session(&self, id: &str, state: &str) -> Result<()>;
    /// Forgets session `id` (the client closed it).
    fn delete_mcp_session(&self, id: &str) -> Result<()>;
}
