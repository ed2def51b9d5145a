//! [`InsightStore`] on PostgreSQL: a batch of searches is one `INSERT … SELECT FROM unnest`
//! and its day counts one upsert (one round trip each, in one transaction; keys merged and
//! sorted first, so nodes adding to the same rows lock them in the same order).

use quarry_core::Result;
use quarry_store::{
    DAY_MS, InsightStore, InsightWindow, SearchRecord, UnansweredGroup, UsageCount, UsageKey,
    merge_usage,
};

use crate::error::db_err;
use crate::pg_store::PgStore;
use crate::sql::col;

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Days, counts and totals of `rows`, as `unnest` takes them.
fn numbers(rows: &[UsageCount]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    (
        rows.iter().map(|u| u.day).collect(),
        rows.iter().map(|u| signed(u.count)).collect(),
        rows.iter().map(|u| signed(u.total)).collect(),
    )
}

impl InsightStore for PgStore {
    fn append_insight(&self, searches: &[SearchRecord], usage: &[UsageCount]) -> Result<()> {
        if searches.is_empty() && usage.is_empty() {
            return Ok(());
        }
        let by_subject = merge_usage(usage, UsageKey::Subject);
        let by_person = merge_usage(usage, UsageKey::Person);
        self.write(|tx| {
            if !searches.is_empty() {
                let at: Vec<i64> = searches.iter().map(|s| s.at).collect();
                let text = |f: fn(&SearchRecord) -> &str| -> Vec<&str> {
                    searches.iter().map(f).collect()
                };
                let results: Vec<i32> = searches
                    .iter()
                    .map(|s| i32::try_from(s.results).unwrap_or(i32::MAX))
                    .collect();
                let top: Vec<Option<f64>> = searches.iter().map(|s| s.top_score).collect();
                let unanswered: Vec<bool> = searches.iter().map(|s| s.unanswered).collect();
                let query: Vec<Option<&str>> =
                    searches.iter().map(|s| s.query.as_deref()).collect();
                tx.execute(
                    "INSERT INTO search_log (at, space_id, knowledge_base, user_id, token_id, \
                     surface, results, top_score, unanswered, wording, query) \
                     SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], \
                     $5::text[], $6::text[], $7::int[], $8::float8[], $9::bool[], $10::text[], \
                     $11::text[])",
                    &[
                        &at,
                        &text(|s| &s.space_id),
                        &text(|s| &s.knowledge_base),
                        &text(|s| &s.user_id),
                        &text(|s| &s.token_id),
                        &text(|s| &s.surface),
                        &results,
                        &top,
                        &unanswered,
                        &text(|s| &s.wording),
                        &query,
                    ],
                )
                .map_err(db_err)?;
            }
            if !by_subject.is_empty() {
                let text = |f: fn(&UsageCount) -> &str| -> Vec<&str> {
                    by_subject.iter().map(f).collect()
                };
                let (day, counts, totals) = numbers(&by_subject);
                tx.execute(
                    "INSERT INTO usage_daily AS u (space_id, day, metric, subject, count, total) \
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], \
                     $5::bigint[], $6::bigint[]) \
                     ON CONFLICT (space_id, day, metric, subject) DO UPDATE \
                     SET count = u.count + excluded.count, total = u.total + excluded.total",
                    &[
                        &text(|u| &u.space_id),
                        &day,
                        &text(|u| &u.metric),
                        &text(|u| &u.subject),
                        &counts,
                        &totals,
                    ],
                )
                .map_err(db_err)?;
            }
            if !by_person.is_empty() {
                let text =
                    |f: fn(&UsageCount) -> &str| -> Vec<&str> { by_person.iter().map(f).collect() };
                let (day, counts, totals) = numbers(&by_person);
                tx.execute(
                    "INSERT INTO usage_people AS u (space_id, day, metric, user_id, token_id, \
                     count, total) \
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], \
                     $5::text[], $6::bigint[], $7::bigint[]) \
                     ON CONFLICT (space_id, day, metric, user_id, token_id) DO UPDATE \
                     SET count = u.count + excluded.count, total = u.total + excluded.total",
                    &[
                        &text(|u| &u.space_id),
                        &day,
                        &text(|u| &u.metric),
                        &text(|u| &u.user_id),
                        &text(|u| &u.token_id),
                        &counts,
                        &totals,
                    ],
                )
                .map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn unanswered_groups(&self, w: &InsightWindow, limit: usize) -> Result<Vec<UnansweredGroup>> {
        let mut conn = self.conn()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = conn
            .query(
                "SELECT wording, COUNT(*) AS n, MIN(at), MAX(at) FROM search_log \
                 WHERE space_id = $1 AND unanswered AND at >= $2 AND at < $3 \
                 AND ($4::text[] IS NULL OR knowledge_base = ANY($4)) \
                 GROUP BY wording ORDER BY n DESC, MAX(at) DESC, wording LIMIT $5",
                &[&w.space_id, &w.since, &w.until, &w.knowledge_base, &limit],
            )
            .map_err(db_err)?;
        let mut found = rows
            .iter()
            .map(|r| {
                Ok(UnansweredGroup {
                    wording: col(r, 0)?,
                    count: count(col(r, 1)?),
                    first_at: col(r, 2)?,
                    last_at: col(r, 3)?,
                    query: None,
                    best_score: None,
                    days: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if found.is_empty() {
            return Ok(found);
        }
        let wordings: Vec<&str> = found.iter().map(|g| g.wording.as_str()).collect();
        // Every group's days and latest text in two statements, not two per group.
        let days = conn
            .query(
                "SELECT wording, at / $5, COUNT(*), MAX(top_score) FROM search_log \
                 WHERE space_id = $1 AND wording = ANY($2) AND unanswered \
                 AND at >= $3 AND at < $4 AND ($6::text[] IS NULL OR knowledge_base = ANY($6)) \
                 GROUP BY 1, 2 ORDER BY 1, 2",
                &[
                    &w.space_id,
                    &wordings,
                    &w.since,
                    &w.until,
                    &DAY_MS,
                    &w.knowledge_base,
                ],
            )
            .map_err(db_err)?;
        // Each group's latest kept text: one backward step down `search_log_wording` per
        // group, never every row of a much-asked group.
        let latest = conn
            .query(
                "SELECT w.wording, l.query FROM unnest($2::text[]) AS w(wording) \
                 CROSS JOIN LATERAL (SELECT query FROM search_log \
                 WHERE space_id = $1 AND wording = w.wording AND unanswered \
                 AND at >= $3 AND at < $4 AND ($5::text[] IS NULL OR knowledge_base = ANY($5)) \
                 AND query IS NOT NULL ORDER BY at DESC LIMIT 1) l",
                &[
                    &w.space_id,
                    &wordings,
                    &w.since,
                    &w.until,
                    &w.knowledge_base,
                ],
            )
            .map_err(db_err)?;
        for g in &mut found {
            let wording = g.wording.clone();
            for r in days.iter().filter(|r| r.get::<_, &str>(0) == wording) {
                g.days.push((col(r, 1)?, count(col(r, 2)?)));
                let best: Option<f64> = col(r, 3)?;
                g.note_score(best);
            }
            g.query = latest
                .iter()
                .find(|r| r.get::<_, &str>(0) == g.wording)
                .map(|r| col(r, 1))
                .transpose()?;
        }
        Ok(found)
    }

    fn usage_by_subject(&self, w: &InsightWindow) -> Result<Vec<UsageCount>> {
        let rows = self
            .conn()?
            .query(
                "SELECT day, metric, subject, count, total FROM usage_daily \
                 WHERE space_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, metric, subject",
                &[&w.space_id, &w.first_day(), &w.last_day()],
            )
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(UsageCount {
                    space_id: w.space_id.clone(),
                    day: col(r, 0)?,
                    metric: col(r, 1)?,
                    subject: col(r, 2)?,
                    user_id: String::new(),
                    token_id: String::new(),
                    count: count(col(r, 3)?),
                    total: count(col(r, 4)?),
                })
            })
            .collect()
    }

    fn usage_by_person(&self, w: &InsightWindow, per_day: bool) -> Result<Vec<UsageCount>> {
        let sql = if per_day {
            "SELECT day, metric, user_id, token_id, count, total FROM usage_people \
             WHERE space_id = $1 AND day >= $2 AND day <= $3 \
             ORDER BY day, metric, user_id, token_id"
        } else {
            "SELECT $2::bigint, metric, user_id, token_id, SUM(count)::bigint, \
             SUM(total)::bigint FROM usage_people \
             WHERE space_id = $1 AND day >= $2 AND day <= $3 \
             GROUP BY user_id, token_id, metric ORDER BY user_id, token_id, metric"
        };
        let rows = self
            .conn()?
            .query(sql, &[&w.space_id, &w.first_day(), &w.last_day()])
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(UsageCount {
                    space_id: w.space_id.clone(),
                    day: col(r, 0)?,
                    metric: col(r, 1)?,
                    subject: String::new(),
                    user_id: col(r, 2)?,
                    token_id: col(r, 3)?,
                    count: count(col(r, 4)?),
                    total: count(col(r, 5)?),
                })
            })
            .collect()
    }

    fn prune_insight(&self, before: i64) -> Result<u64> {
        self.write(|tx| {
            let n = tx
                .execute("DELETE FROM search_log WHERE at < $1", &[&before])
                .map_err(db_err)?;
            for table in ["usage_daily", "usage_people"] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE day < $1"),
                    &[&before.div_euclid(DAY_MS)],
                )
                .map_err(db_err)?;
            }
            Ok(n)
        })
    }
}
