//! [`AuditStore`] on SQLite.

use quarry_core::Result;
use rusqlite::{OptionalExtension, params};

use crate::error::db_err;
use crate::store::SqliteStore;
use quarry_store::{AuditEvent, AuditQuery, AuditRecord, AuditStore};

impl AuditStore for SqliteStore {
    fn append_audit(&self, events: &[AuditEvent]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO audit_events (at, space_id, user_id, user_name, token_id, client, \
                     action, target, outcome, duration_ms, detail) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .map_err(db_err)?;
            for e in events {
                stmt.execute(params![
                    e.at,
                    e.space_id,
                    e.user_id,
                    e.user_name,
                    e.token_id,
                    e.client,
                    e.action,
                    e.target,
                    e.outcome,
                    e.duration_ms,
                    e.detail,
                ])
                .map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn audit_events(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, at, space_id, user_id, user_name, token_id, client, action, target, \
                 outcome, duration_ms, detail FROM audit_events \
                 WHERE (?1 IS NULL OR space_id = ?1) \
                 AND (?2 IS NULL OR action = ?2 OR substr(action, 1, length(?2) + 1) = ?2 || '.') \
                 AND (?3 IS NULL OR user_id = ?3) AND (?4 IS NULL OR token_id = ?4) \
                 AND (?5 IS NULL OR outcome = ?5) AND (?6 IS NULL OR at >= ?6) \
                 AND (?7 IS NULL OR at < ?7) AND (?8 IS NULL OR id < ?8) \
                 ORDER BY id DESC LIMIT ?9",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map(
                params![
                    q.space_id,
                    q.action,
                    q.user_id,
                    q.token_id,
                    q.outcome,
                    q.since,
                    q.until,
                    q.before_id,
                    i64::try_from(q.limit).unwrap_or(i64::MAX),
                ],
                |r| {
                    Ok(AuditRecord {
                        id: r.get(0)?,
                        event: AuditEvent {
                            at: r.get(1)?,
                            space_id: r.get(2)?,
                            user_id: r.get(3)?,
                            user_name: r.get(4)?,
                            token_id: r.get(5)?,
                            client: r.get(6)?,
                            action: r.get(7)?,
                            target: r.get(8)?,
                            outcome: r.get(9)?,
                            duration_ms: r.get(10)?,
                            detail: r.get(11)?,
                        },
                    })
                },
            )
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn prune_audit(&self, before: i64) -> Result<u64> {
        self.write(|tx| {
            let n = tx
                .execute("DELETE FROM audit_events WHERE at < ?1", [before])
                .map_err(db_err)?;
            Ok(n as u64)
        })
    }
}

impl quarry_store::LimitStore for SqliteStore {
    fn take_budget(&self, key: &str, window_start: i64, amount: i64, limit: i64) -> Result<i64> {
        if amount <= 0 || limit <= 0 {
            return Ok(0);
        }
        self.write(|tx| {
            let used: i64 = tx
                .query_row(
                    "SELECT count FROM rate_counters WHERE key = ?1 AND window_start = ?2",
                    params![key, window_start],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?
                .unwrap_or(0);
            let granted = amount.min(limit - used).max(0);
            if granted > 0 {
                tx.execute(
                    "INSERT INTO rate_counters (key, window_start, count) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (key, window_start) DO UPDATE SET count = count + ?3",
                    params![key, window_start, granted],
                )
                .map_err(db_err)?;
            }
            Ok(granted)
        })
    }

    fn count_event(&self, key: &str, window_start: i64) -> Result<i64> {
        self.write(|tx| {
            tx.query_row(
                "INSERT INTO rate_counters (key, window_start, count) VALUES (?1, ?2, 1) \
                 ON CONFLICT (key, window_start) DO UPDATE SET count = count + 1 RETURNING count",
                params![key, window_start],
                |r| r.get(0),
            )
            .map_err(db_err)
        })
    }

    fn prune_limits(&self, before: i64) -> Result<u64> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM rate_counters WHERE window_start < ?1",
                    [before],
                )
                .map_err(db_err)?;
            Ok(n as u64)
        })
    }
}
