//! Copying a whole system of record from one backend to another (`quarry migrate`: an
//! embedded data directory into PostgreSQL), row by row, in pages.
//!
//! Rows travel as JSON objects (column → value) so neither backend knows the other's
//! types: integers and text as they are, vectors as pgvector's text form (`[0.5,-1,…]`),
//! other binary values as `\x`-prefixed hex. A row the target already has (same key) is
//! skipped, so an interrupted copy is resumed by running it again.

use quarry_core::{Error, Result};

/// The tables a copy carries, parents before the rows that point at them. What is derived
/// or belongs to one process is left out: the change feed and its consumers (each node
/// rebuilds its keyword index), node heartbeats, MCP sessions, embed jobs' chunk claims, the
/// batches the rate of embedding is measured from, the embedded store's ANN bookkeeping,
/// sign-ins under way (ten minutes at most: whoever was signing in signs in again).
pub const COPIED_TABLES: &[&str] = &[
    "spaces",
    "users",
    "memberships",
    "groups",
    "group_members",
    "access_tokens",
    "user_identities",
    "web_sessions",
    "oauth_clients",
    "oauth_grants",
    "oauth_secrets",
    "collections",
    "sources",
    "documents",
    "contexts",
    "chunk_edits",
    "chunks",
    "embeddings",
    "expansions",
    "blobs",
    "kb_files",
    "kb_derivations",
    "kb_history",
    "page_sources",
    "file_images",
    "sync_reports",
    "jobs",
    "hub_upstreams",
    "hub_packages",
    "hub_tools",
    "hub_disabled_tools",
    "hub_custom_tools",
    "hub_generations",
    "tool_endpoints",
    "tool_policies",
    "tool_approvals",
    "chat_conversations",
    "chat_messages",
    "idempotency_keys",
    "audit_events",
    "search_log",
    "usage_daily",
    "usage_people",
    "meta",
];

/// `table` as one of [`COPIED_TABLES`], or `InvalidInput` for any other name (so a backend
/// may put it into SQL).
pub fn copied_table(table: &str) -> Result<&'static str> {
    COPIED_TABLES
        .iter()
        .find(|t| **t == table)
        .copied()
        .ok_or_else(|| Error::invalid(format!("'{table}' is not a table a copy carries")))
}

/// `meta` keys that describe one database or one node's indexes, never copied.
pub const LOCAL_META_KEYS: &[&str] = &["database.id", "feed.trimmed", "fts.analyzer"];

/// One row: column name → value.
pub type Row = serde_json::Map<String, serde_json::Value>;

/// A page of exported rows.
#[derive(Debug, Default)]
pub struct RowPage {
    /// The rows, in the table's copy order.
    pub rows: Vec<Row>,
    /// Where the next page starts (`None`: this was the last).
    pub next: Option<i64>,
}

/// A backend's side of a copy: the source exports, the target imports.
pub trait RowCopy {
    /// Up to `limit` rows of `table` from position `from` (0 for the first page).
    fn export_rows(&self, table: &str, from: i64, limit: usize) -> Result<RowPage>;
    /// Inserts `rows` into `table`, skipping rows whose key is already there; returns how
    /// many were inserted.
    fn import_rows(&self, table: &str, rows: &[Row]) -> Result<u64>;
    /// Rows in `table`.
    fn count_rows(&self, table: &str) -> Result<u64>;
    /// After the last import: moves generated ids past the copied ones.
    fn finish_import(&self) -> Result<()>;
}
