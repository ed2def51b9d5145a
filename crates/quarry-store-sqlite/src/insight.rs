//! [`InsightStore`] on SQLite: searches appended and day counts added in one write
//! transaction; the unanswered view's group-by reads `search_log_unanswered` only, and each
//! group's days come from `search_log_wording`.

use quarry_core::Result;
use rusqlite::params;

use crate::error::db_err;
use crate::store::SqliteStore;
use quarry_store::{
    DAY_MS, InsightStore, InsightWindow, SearchRecord, UnansweredGroup, UsageCount, UsageKey,
    merge_usage,
};

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl InsightStore for SqliteStore {
    fn append_insight(&self, searches: &[SearchRecord], usage: &[UsageCount]) -> Result<()> {
        if searches.is_empty() && usage.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO search_log (at, space_id, knowledge_base, user_id, token_id, \
                     surface, results, top_score, unanswered, wording, query) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .map_err(db_err)?;
            for s in searches {
                insert
                    .execute(params![
                        s.at,
                        s.space_id,
                        s.knowledge_base,
                        s.user_id,
                        s.token_id,
                        s.surface,
                        s.results,
                        s.top_score,
                        s.unanswered,
                        s.wording,
                        s.query,
                    ])
                    .map_err(db_err)?;
            }
            let mut by_subject = tx
                .prepare_cached(
                    "INSERT INTO usage_daily (space_id, day, metric, subject, count, total) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (space_id, day, metric, subject) DO UPDATE \
                     SET count = count + excluded.count, total = total + excluded.total",
                )
                .map_err(db_err)?;
            for u in merge_usage(usage, UsageKey::Subject) {
                by_subject
                    .execute(params![
                        u.space_id,
                        u.day,
                        u.metric,
                        u.subject,
                        signed(u.count),
                        signed(u.total),
                    ])
                    .map_err(db_err)?;
            }
            let mut by_person = tx
                .prepare_cached(
                    "INSERT INTO usage_people (space_id, day, metric, user_id, token_id, count, \
                     total) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                     ON CONFLICT (space_id, day, metric, user_id, token_id) DO UPDATE \
                     SET count = count + excluded.count, total = total + excluded.total",
                )
                .map_err(db_err)?;
            for u in merge_usage(usage, UsageKey::Person) {
                by_person
                    .execute(params![
                        u.space_id,
                        u.day,
                        u.metric,
                        u.user_id,
                        u.token_id,
                        signed(u.count),
                        signed(u.total),
                    ])
                    .map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn unanswered_groups(&self, w: &InsightWindow, limit: usize) -> Result<Vec<UnansweredGroup>> {
        let kb = w
            .knowledge_base
            .as_ref()
            .map(|names| serde_json::Value::from(names.clone()).to_string());
        let conn = self.conn();
        let mut groups = conn
            .prepare_cached(
                "SELECT wording, COUNT(*) AS n, MIN(at), MAX(at) FROM search_log \
                 INDEXED BY search_log_unanswered \
                 WHERE space_id = ?1 AND unanswered = 1 AND at >= ?2 AND at < ?3 \
                 AND (?4 IS NULL OR knowledge_base IN (SELECT value FROM json_each(?4))) \
                 GROUP BY wording ORDER BY n DESC, MAX(at) DESC, wording LIMIT ?5",
            )
            .map_err(db_err)?;
        let mut found: Vec<UnansweredGroup> = groups
            .query_map(
                params![
                    w.space_id,
                    w.since,
                    w.until,
                    kb,
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                |r| {
                    Ok(UnansweredGroup {
                        wording: r.get(0)?,
                        count: count(r.get(1)?),
                        first_at: r.get(2)?,
                        last_at: r.get(3)?,
                        query: None,
                        best_score: None,
                        days: Vec::new(),
                    })
                },
            )
            .map_err(db_err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(db_err)?;
        let mut days = conn
            .prepare_cached(
                "SELECT at / ?5, COUNT(*), MAX(top_score) FROM search_log \
                 INDEXED BY search_log_wording \
                 WHERE space_id = ?1 AND wording = ?2 AND unanswered = 1 AND at >= ?3 AND at < ?4 \
                 AND (?6 IS NULL OR knowledge_base IN (SELECT value FROM json_each(?6))) \
                 GROUP BY 1 ORDER BY 1",
            )
            .map_err(db_err)?;
        let mut latest = conn
            .prepare_cached(
                "SELECT query FROM search_log INDEXED BY search_log_wording \
                 WHERE space_id = ?1 AND wording = ?2 AND unanswered = 1 AND at >= ?3 AND at < ?4 \
                 AND (?5 IS NULL OR knowledge_base IN (SELECT value FROM json_each(?5))) \
                 AND query IS NOT NULL \
                 ORDER BY at DESC LIMIT 1",
            )
            .map_err(db_err)?;
        for g in &mut found {
            let rows = days
                .query_map(
                    params![w.space_id, g.wording, w.since, w.until, DAY_MS, kb],
                    |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, Option<f64>>(2)?,
                        ))
                    },
                )
                .map_err(db_err)?;
            for row in rows {
                let (day, n, best) = row.map_err(db_err)?;
                g.days.push((day, count(n)));
                g.note_score(best);
            }
            g.query = latest
                .query_row(params![w.space_id, g.wording, w.since, w.until, kb], |r| {
                    r.get(0)
                })
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(db_err(e)),
                })?;
        }
        Ok(found)
    }

    fn usage_by_subject(&self, w: &InsightWindow) -> Result<Vec<UsageCount>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT day, metric, subject, count, total FROM usage_daily \
                 WHERE space_id = ?1 AND day >= ?2 AND day <= ?3 ORDER BY day, metric, subject",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![w.space_id, w.first_day(), w.last_day()], |r| {
                Ok(UsageCount {
                    space_id: w.space_id.clone(),
                    day: r.get(0)?,
                    metric: r.get(1)?,
                    subject: r.get(2)?,
                    user_id: String::new(),
                    token_id: String::new(),
                    count: count(r.get(3)?),
                    total: count(r.get(4)?),
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn usage_by_person(&self, w: &InsightWindow, per_day: bool) -> Result<Vec<UsageCount>> {
        let conn = self.conn();
        let sql = if per_day {
            "SELECT day, metric, user_id, token_id, count, total FROM usage_people \
             WHERE space_id = ?1 AND day >= ?2 AND day <= ?3 \
             ORDER BY day, metric, user_id, token_id"
        } else {
            "SELECT ?2, metric, user_id, token_id, SUM(count), SUM(total) FROM usage_people \
             WHERE space_id = ?1 AND day >= ?2 AND day <= ?3 \
             GROUP BY user_id, token_id, metric ORDER BY user_id, token_id, metric"
        };
        let mut stmt = conn.prepare_cached(sql).map_err(db_err)?;
        let rows = stmt
            .query_map(params![w.space_id, w.first_day(), w.last_day()], |r| {
                Ok(UsageCount {
                    space_id: w.space_id.clone(),
                    day: r.get(0)?,
                    metric: r.get(1)?,
                    subject: String::new(),
                    user_id: r.get(2)?,
                    token_id: r.get(3)?,
                    count: count(r.get(4)?),
                    total: count(r.get(5)?),
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn prune_insight(&self, before: i64) -> Result<u64> {
        self.write(|tx| {
            let n = tx
                .execute("DELETE FROM search_log WHERE at < ?1", params![before])
                .map_err(db_err)?;
            for table in ["usage_daily", "usage_people"] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE day < ?1"),
                    params![before.div_euclid(DAY_MS)],
                )
                .map_err(db_err)?;
            }
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }
}
