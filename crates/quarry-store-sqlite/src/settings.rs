//! [`SettingsStore`] on SQLite.

use quarry_core::Result;
use rusqlite::{OptionalExtension, params};

use quarry_store::SettingsStore;

use crate::error::db_err;
use crate::store::SqliteStore;

impl SettingsStore for SqliteStore {
    fn meta(&self, key: &str) -> Result<Option<String>> {
        let conn = self.conn();
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(db_err)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn cached_expansion(&self, model: &str, query: &str) -> Result<Option<Vec<String>>> {
        let conn = self.conn();
        let v: Option<String> = conn
            .query_row(
                "SELECT variants FROM expansions WHERE model = ?1 AND query = ?2",
                params![model, query],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        Ok(v.map(|s| {
            s.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        }))
    }

    fn cache_expansion(&self, model: &str, query: &str, variants: &[String]) -> Result<()> {
        // Variants are single lines (the expander splits on newlines), so newline-joined is exact.
        let joined = variants
            .iter()
            .map(|v| v.replace(['\n', '\r'], " "))
            .collect::<Vec<_>>()
            .join("\n");
        self.write(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO expansions (model, query, variants, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![model, query, joined, quarry_core::now_millis()],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }
}
