//! [`quarry_store::AuditStore`] on PostgreSQL: a batch is one multi-row `INSERT` (one round
//! trip), reads use the `(space_id, id)` index newest first.

use postgres::types::ToSql;
use quarry_core::Result;
use quarry_store::{AuditEvent, AuditQuery, AuditRecord, AuditStore};

use crate::error::db_err;
use crate::pg_store::PgStore;
use crate::sql::col;

/// Columns of one event, in insert order.
const EVENT_COLUMNS: usize = 11;

impl AuditStore for PgStore {
    fn append_audit(&self, events: &[AuditEvent]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut sql = String::from(
            "INSERT INTO audit_events (at, space_id, user_id, user_name, token_id, client, \
             action, target, outcome, duration_ms, detail) VALUES ",
        );
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(events.len() * EVENT_COLUMNS);
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                sql.push(',');
            }
            sql.push('(');
            for c in 0..EVENT_COLUMNS {
                if c > 0 {
                    sql.push(',');
                }
                sql.push_str(&format!("${}", i * EVENT_COLUMNS + c + 1));
            }
            sql.push(')');
            params.extend([
                &e.at as &(dyn ToSql + Sync),
                &e.space_id,
                &e.user_id,
                &e.user_name,
                &e.token_id,
                &e.client,
                &e.action,
                &e.target,
                &e.outcome,
                &e.duration_ms,
                &e.detail,
            ]);
        }
        self.conn()?.execute(&sql, &params).map_err(db_err)?;
        Ok(())
    }

    fn audit_events(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        let rows = self
            .conn()?
            .query(
                "SELECT id, at, space_id, user_id, user_name, token_id, client, action, target, \
                 outcome, duration_ms, detail FROM audit_events \
                 WHERE ($1::text IS NULL OR space_id = $1) \
                 AND ($2::text IS NULL OR action = $2 \
                      OR substr(action, 1, length($2) + 1) = $2 || '.') \
                 AND ($3::text IS NULL OR user_id = $3) AND ($4::text IS NULL OR token_id = $4) \
                 AND ($5::text IS NULL OR outcome = $5) AND ($6::bigint IS NULL OR at >= $6) \
                 AND ($7::bigint IS NULL OR at < $7) AND ($8::bigint IS NULL OR id < $8) \
                 ORDER BY id DESC LIMIT $9",
                &[
                    &q.space_id,
                    &q.action,
                    &q.user_id,
                    &q.token_id,
                    &q.outcome,
                    &q.since,
                    &q.until,
                    &q.before_id,
                    &limit,
                ],
            )
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(AuditRecord {
                    id: col(r, 0)?,
                    event: AuditEvent {
                        at: col(r, 1)?,
                        space_id: col(r, 2)?,
                        user_id: col(r, 3)?,
                        user_name: col(r, 4)?,
                        token_id: col(r, 5)?,
                        client: col(r, 6)?,
                        action: col(r, 7)?,
                        target: col(r, 8)?,
                        outcome: col(r, 9)?,
                        duration_ms: col(r, 10)?,
                        detail: col(r, 11)?,
                    },
                })
            })
            .collect()
    }

    fn prune_audit(&self, before: i64) -> Result<u64> {
        self.conn()?
            .execute("DELETE FROM audit_events WHERE at < $1", &[&before])
            .map_err(db_err)
    }
}

impl quarry_store::LimitStore for PgStore {
    fn take_budget(&self, key: &str, window_start: i64, amount: i64, limit: i64) -> Result<i64> {
        if amount <= 0 || limit <= 0 {
            return Ok(0);
        }
        self.write(|tx| {
            // The row exists, then is locked: two nodes taking at once queue on it.
            tx.execute(
                "INSERT INTO rate_counters (key, window_start, count) VALUES ($1, $2, 0) \
                 ON CONFLICT (key, window_start) DO NOTHING",
                &[&key, &window_start],
            )
            .map_err(db_err)?;
            let used: i64 = tx
                .query_one(
                    "SELECT count FROM rate_counters WHERE key = $1 AND window_start = $2 FOR UPDATE",
                    &[&key, &window_start],
                )
                .map_err(db_err)?
                .get(0);
            let granted = amount.min(limit - used).max(0);
            if granted > 0 {
                tx.execute(
                    "UPDATE rate_counters SET count = count + $3 WHERE key = $1 AND window_start = $2",
                    &[&key, &window_start, &granted],
                )
                .map_err(db_err)?;
            }
            Ok(granted)
        })
    }

    fn count_event(&self, key: &str, window_start: i64) -> Result<i64> {
        let row = self
            .conn()?
            .query_one(
                "INSERT INTO rate_counters (key, window_start, count) VALUES ($1, $2, 1) \
                 ON CONFLICT (key, window_start) DO UPDATE SET count = rate_counters.count + 1 \
                 RETURNING count",
                &[&key, &window_start],
            )
            .map_err(db_err)?;
        col(&row, 0)
    }

    fn prune_limits(&self, before: i64) -> Result<u64> {
        self.conn()?
            .execute(
                "DELETE FROM rate_counters WHERE window_start < $1",
                &[&before],
            )
            .map_err(db_err)
    }
}
