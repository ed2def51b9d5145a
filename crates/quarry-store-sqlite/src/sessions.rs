//! [`SessionStore`] on SQLite.

use quarry_core::Result;
use rusqlite::{OptionalExtension, params};

use quarry_store::SessionStore;

use crate::error::db_err;
use crate::store::SqliteStore;

impl SessionStore for SqliteStore {
    fn mcp_session(&self, id: &str) -> Result<Option<String>> {
        self.conn()
            .query_row("SELECT state FROM mcp_sessions WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(db_err)
    }

    fn put_mcp_session(&self, id: &str, state: &str) -> Result<()> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            tx.execute(
                "DELETE FROM mcp_sessions WHERE updated_at < ?1",
                [now - quarry_store::MCP_SESSION_KEPT_MS],
            )
            .map_err(db_err)?;
            tx.execute(
                "INSERT INTO mcp_sessions (id, state, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                params![id, state, now],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn delete_mcp_session(&self, id: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM mcp_sessions WHERE id = ?1", [id])
                .map_err(db_err)?;
            Ok(())
        })
    }
}
