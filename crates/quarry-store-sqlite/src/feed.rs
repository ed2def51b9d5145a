//! The document change feed ([`FeedStore`]) on SQLite.

use quarry_core::{Error, Result};
use rusqlite::{Connection, params};

use quarry_store::{FeedBatch, FeedPosition, FeedStore, IndexDoc, IndexWork};

use crate::error::db_err;
use crate::sql::id_list;
use crate::store::SqliteStore;

/// The feed's last sequence number (0 before its first entry).
fn feed_head(tx: &Connection) -> Result<i64> {
    tx.query_row(
        "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'feed'), 0)",
        [],
        |r| r.get(0),
    )
    .map_err(db_err)
}

/// The index work for documents `ids` as they are now ([`IndexWork::of`]).
pub(crate) fn index_work_of(tx: &Connection, ids: &[i64]) -> Result<IndexWork> {
    let found = if ids.is_empty() {
        Vec::new()
    } else {
        index_docs(
            tx,
            "SELECT id, collection_id, path, title, body, furniture, indexed_at, meta \
             FROM documents WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id",
            [id_list(ids)],
        )?
    };
    Ok(IndexWork::of(ids, found))
}

/// Documents as the keyword index takes them, from `sql` selecting
/// `id, collection_id, path, title, body, furniture, indexed_at, meta`.
fn index_docs(tx: &Connection, sql: &str, args: impl rusqlite::Params) -> Result<Vec<IndexDoc>> {
    tx.prepare_cached(sql)
        .and_then(|mut s| {
            s.query_map(args, |r| {
                let body: String = r.get(4)?;
                let furniture = quarry_core::decode_furniture(&r.get::<_, String>(5)?);
                Ok(IndexDoc {
                    id: r.get(0)?,
                    collection_id: r.get(1)?,
                    path: r.get(2)?,
                    title: r.get(3)?,
                    body: quarry_core::into_indexed_body(body, &furniture),
                    indexed_at: r.get(6)?,
                    meta: r.get(7)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()
        })
        .map_err(db_err)
}

/// Drops the feed entries every consumer is past (all of them when none is left), and
/// records how far the feed was trimmed (`feed_resume` refuses positions below it).
fn trim_feed(tx: &Connection) -> Result<()> {
    let cutoff: Option<i64> = tx
        .query_row(
            "SELECT COALESCE((SELECT MIN(seq) FROM feed_consumers), (SELECT MAX(seq) FROM feed))",
            [],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    let Some(cutoff) = cutoff else {
        return Ok(());
    };
    let gone = tx
        .prepare_cached("DELETE FROM feed WHERE seq <= ?1")
        .and_then(|mut s| s.execute([cutoff]))
        .map_err(db_err)?;
    if gone > 0 {
        tx.prepare_cached(
            "INSERT INTO meta (key, value) VALUES ('feed.trimmed', ?1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value \
             WHERE CAST(meta.value AS INTEGER) < CAST(excluded.value AS INTEGER)",
        )
        .and_then(|mut s| s.execute([cutoff.to_string()]))
        .map_err(db_err)?;
    }
    Ok(())
}

/// No notifications between processes: followers poll.
impl quarry_store::ChangeNotifier for SqliteStore {}

impl FeedStore for SqliteStore {
    fn feed_position(&self, consumer: &str) -> Result<FeedPosition> {
        self.write(|tx| {
            // A consumer seen for the first time reads a snapshot, then what follows it.
            let head = feed_head(tx)?;
            tx.prepare_cached(
                "INSERT OR IGNORE INTO feed_consumers (consumer, seq, rebuilding_after, seen_at) \
                 VALUES (?1, ?2, 0, ?3)",
            )
            .and_then(|mut s| s.execute(params![consumer, head, quarry_core::now_millis()]))
            .map_err(db_err)?;
            tx.query_row(
                "SELECT seq, rebuilding_after FROM feed_consumers WHERE consumer = ?1",
                [consumer],
                |r| {
                    Ok(FeedPosition {
                        txid: 0,
                        seq: r.get(0)?,
                        rebuilding_after: r.get(1)?,
                    })
                },
            )
            .map_err(db_err)
        })
    }

    fn feed_read(&self, from: FeedPosition, limit: usize) -> Result<FeedBatch> {
        let limit = limit.max(1) as i64;
        let seq = from.seq;
        let mut conn = self.conn();
        // One read transaction: the snapshot page, the entries and the rows they name
        // are read from one state of the database.
        let tx = conn.transaction().map_err(db_err)?;
        let tx = &*tx;
        {
            if let Some(after) = from.rebuilding_after {
                let upserts = index_docs(
                    tx,
                    "SELECT id, collection_id, path, title, body, furniture, indexed_at, meta \
                     FROM documents WHERE id > ?1 ORDER BY id LIMIT ?2",
                    params![after, limit],
                )?;
                if let Some(last) = upserts.last() {
                    let position = FeedPosition {
                        txid: 0,
                        seq,
                        rebuilding_after: Some(last.id),
                    };
                    return Ok(FeedBatch {
                        work: IndexWork {
                            upserts,
                            deletes: Vec::new(),
                        },
                        position,
                        horizon: None,
                    });
                }
                // The snapshot is read: go on with the entries after the position.
            }
            let entries: Vec<(i64, i64)> = tx
                .prepare_cached(
                    "SELECT seq, document_id FROM feed WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                )
                .and_then(|mut s| {
                    s.query_map(params![seq, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<rusqlite::Result<_>>()
                })
                .map_err(db_err)?;
            let position = FeedPosition {
                txid: 0,
                seq: entries.last().map_or(seq, |e| e.0),
                rebuilding_after: None,
            };
            // One writer at a time: entries commit in `seq` order, so a short batch read
            // everything committed up to the head (in this same read transaction).
            let horizon = if (entries.len() as i64) < limit {
                Some(feed_head(tx)? + 1)
            } else {
                None
            };
            let mut ids: Vec<i64> = entries.iter().map(|e| e.1).collect();
            ids.sort_unstable();
            ids.dedup();
            Ok(FeedBatch {
                work: index_work_of(tx, &ids)?,
                position,
                horizon,
            })
        }
    }

    fn feed_ack(&self, consumer: &str, position: FeedPosition) -> Result<()> {
        self.write(|tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE feed_consumers SET seq = ?2, rebuilding_after = ?3, seen_at = ?4 \
                     WHERE consumer = ?1",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        consumer,
                        position.seq,
                        position.rebuilding_after,
                        quarry_core::now_millis()
                    ])
                })
                .map_err(db_err)?;
            if n == 0 {
                return Err(Error::NotFound(format!(
                    "feed consumer '{consumer}' is not registered"
                )));
            }
            trim_feed(tx)
        })
    }

    fn feed_rebuild(&self, consumer: &str, meta: Option<(&str, &str)>) -> Result<()> {
        self.write(|tx| {
            let head = feed_head(tx)?;
            tx.prepare_cached(
                "INSERT INTO feed_consumers (consumer, seq, rebuilding_after, seen_at) \
                 VALUES (?1, ?2, 0, ?3) \
                 ON CONFLICT (consumer) DO UPDATE SET rebuilding_after = 0, seen_at = ?3",
            )
            .and_then(|mut s| s.execute(params![consumer, head, quarry_core::now_millis()]))
            .map_err(db_err)?;
            if let Some((key, value)) = meta {
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    params![key, value],
                )
                .map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn feed_forget(&self, consumer: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM feed_consumers WHERE consumer = ?1", [consumer])
                .map_err(db_err)?;
            trim_feed(tx)
        })
    }

    fn feed_resume(&self, consumer: &str, position: FeedPosition) -> Result<bool> {
        self.write(|tx| {
            let trimmed: i64 = tx
                .query_row(
                    "SELECT COALESCE((SELECT CAST(value AS INTEGER) FROM meta \
                     WHERE key = 'feed.trimmed'), 0)",
                    [],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if position.seq < trimmed || position.seq > feed_head(tx)? {
                return Ok(false);
            }
            tx.prepare_cached(
                "INSERT INTO feed_consumers (consumer, seq, rebuilding_after, seen_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (consumer) DO UPDATE SET seq = ?2, \
                 rebuilding_after = ?3, seen_at = ?4",
            )
            .and_then(|mut s| {
                s.execute(params![
                    consumer,
                    position.seq,
                    position.rebuilding_after,
                    quarry_core::now_millis()
                ])
            })
            .map_err(db_err)?;
            Ok(true)
        })
    }

    fn feed_forget_idle(&self, idle_ms: i64) -> Result<Vec<String>> {
        self.write(|tx| {
            let before = quarry_core::now_millis().saturating_sub(idle_ms.max(0));
            let gone: Vec<String> = tx
                .prepare_cached("DELETE FROM feed_consumers WHERE seen_at < ?1 RETURNING consumer")
                .and_then(|mut s| {
                    s.query_map([before], |r| r.get(0))?
                        .collect::<rusqlite::Result<_>>()
                })
                .map_err(db_err)?;
            if !gone.is_empty() {
                trim_feed(tx)?;
            }
            Ok(gone)
        })
    }

    fn feed_backlog(&self, from: FeedPosition) -> Result<i64> {
        self.conn()
            .query_row(
                "SELECT COUNT(*) FROM feed WHERE seq > ?1",
                [from.seq],
                |r| r.get(0),
            )
            .map_err(db_err)
    }

    fn feed_horizon(&self) -> Result<i64> {
        let conn = self.conn();
        Ok(feed_head(&conn)? + 1)
    }
}
