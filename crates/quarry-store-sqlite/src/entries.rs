//! [`EntryStore`] on SQLite: knowledge entries' versions, validity, derivations and history.

use std::collections::HashSet;

use quarry_core::{Error, Result};
use rusqlite::{OptionalExtension, Transaction, params};

use quarry_store::{AddedEntry, EntryStore, HistoryEvent, KbFile, NewEntry, NewKbFile, window_end};

use super::knowledge::{
    FILE_COLUMNS, FILE_FROM, delete_file_tx, enqueue_cleanup_tx, file_by_row, free_file_name,
    insert_file,
};
use crate::error::db_err;
use crate::sql::id_list;
use crate::store::SqliteStore;

/// The current version keeps the key's name: the version `row_id` it replaces, when it holds
/// the name its successor asks for (`wanted`), steps aside to [`quarry_store::superseded_name`]
/// — its document's path with it.
fn step_aside(
    tx: &Transaction<'_>,
    collection_id: i64,
    row_id: i64,
    wanted: &str,
    now: i64,
) -> Result<()> {
    let (name, readers): (String, Option<String>) = tx
        .query_row(
            "SELECT name, readers FROM kb_files WHERE id = ?1",
            [row_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(db_err)?;
    if name != wanted {
        return Ok(());
    }
    let aside = free_file_name(
        tx,
        collection_id,
        &quarry_store::superseded_name(&name, now),
        readers.as_deref(),
    )?;
    tx.execute(
        "UPDATE kb_files SET name = ?2 WHERE id = ?1",
        params![row_id, aside],
    )
    .map_err(db_err)?;
    tx.execute(
        "UPDATE documents SET path = ?2 WHERE id = (SELECT document_id FROM kb_files WHERE id = ?1)",
        params![row_id, aside],
    )
    .map_err(db_err)?;
    Ok(())
}

fn history(
    tx: &Transaction<'_>,
    collection_id: i64,
    entry: &str,
    key: Option<&str>,
    event: &str,
    at: i64,
    detail: &serde_json::Value,
) -> Result<()> {
    tx.execute(
        "INSERT INTO kb_history (collection_id, entry, entry_key, event, at, detail) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![collection_id, entry, key, event, at, detail.to_string()],
    )
    .map_err(db_err)?;
    Ok(())
}

/// An entry's row as the versioning needs it.
struct EntryRow {
    id: i64,
    uid: String,
    key: Option<String>,
    superseded_by: Option<i64>,
    valid_to: Option<i64>,
    expires_at: Option<i64>,
}

fn entry_row(tx: &Transaction<'_>, collection_id: i64, id: i64) -> Result<Option<EntryRow>> {
    tx.query_row(
        "SELECT id, uid, entry_key, superseded_by, valid_to, expires_at FROM kb_files \
         WHERE id = ?1 AND collection_id = ?2",
        params![id, collection_id],
        |r| {
            Ok(EntryRow {
                id: r.get(0)?,
                uid: r.get(1)?,
                key: r.get(2)?,
                superseded_by: r.get(3)?,
                valid_to: r.get(4)?,
                expires_at: r.get(5)?,
            })
        },
    )
    .optional()
    .map_err(db_err)
}

impl EntryStore for SqliteStore {
    fn add_entry(
        &self,
        collection_id: i64,
        file: &NewKbFile,
        entry: &NewEntry,
    ) -> Result<AddedEntry> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let valid_from = entry.valid_from.unwrap_or(now);
            for source in &entry.derived_from {
                let found: bool = tx
                    .query_row(
                        "SELECT EXISTS(SELECT 1 FROM kb_files WHERE id = ?1)",
                        [source],
                        |r| r.get(0),
                    )
                    .map_err(db_err)?;
                if !found {
                    return Err(Error::NotFound(
                        "derived_from: an entry it names is not there".into(),
                    ));
                }
            }
            let current = match &entry.key {
                Some(key) => tx
                    .query_row(
                        "SELECT id FROM kb_files WHERE collection_id = ?1 AND entry_key = ?2 \
                         AND superseded_by IS NULL AND readers IS ?3",
                        params![
                            collection_id,
                            key,
                            quarry_store::readers_to_column(file.readers.as_deref())
                        ],
                        |r| r.get::<_, i64>(0),
                    )
                    .optional()
                    .map_err(db_err)?,
                None => None,
            };
            let target = match entry.supersedes {
                Some(id) => {
                    let row = entry_row(tx, collection_id, id)?.ok_or_else(|| {
                        Error::NotFound("supersedes: no such entry in this knowledge base".into())
                    })?;
                    if let Some(next) = row.superseded_by {
                        let next_uid: String = tx
                            .query_row("SELECT uid FROM kb_files WHERE id = ?1", [next], |r| {
                                r.get(0)
                            })
                            .optional()
                            .map_err(db_err)?
                            .unwrap_or_default();
                        return Err(Error::Conflict(format!(
                            "entry {} was already superseded by {next_uid}; supersede that one",
                            row.uid
                        )));
                    }
                    if let (Some(given), Some(has)) = (&entry.key, &row.key)
                        && given != has
                    {
                        return Err(Error::Conflict(format!(
                            "entry {} has the key {has:?}, not {given:?}",
                            row.uid
                        )));
                    }
                    if let Some(c) = current
                        && c != row.id
                    {
                        return Err(Error::Conflict(format!(
                            "supersedes names {}, but the key's current entry is another one",
                            row.uid
                        )));
                    }
                    Some(row)
                }
                None => match current {
                    Some(id) => entry_row(tx, collection_id, id)?,
                    None => None,
                },
            };
            // The key: as given, else the superseded entry's.
            let key = entry
                .key
                .clone()
                .or_else(|| target.as_ref().and_then(|t| t.key.clone()));
            // The same content among current entries: nothing new.
            let same: Option<i64> = tx
                .query_row(
                    "SELECT id FROM kb_files WHERE collection_id = ?1 AND blob = ?2 \
                     AND source_id IS NULL AND superseded_by IS NULL AND readers IS ?3",
                    params![
                        collection_id,
                        file.sha256,
                        quarry_store::readers_to_column(file.readers.as_deref())
                    ],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            if let Some(id) = same {
                let file =
                    file_by_row(tx, id)?.ok_or_else(|| Error::Storage("entry vanished".into()))?;
                return Ok(AddedEntry::Duplicate { file });
            }
            // Out of the key's (and the content's) current set before the new one enters.
            if let Some(t) = &target {
                tx.execute(
                    "UPDATE kb_files SET superseded_by = 0 WHERE id = ?1",
                    [t.id],
                )
                .map_err(db_err)?;
                step_aside(tx, collection_id, t.id, &file.original_name, now)?;
            }
            let id = insert_file(tx, collection_id, file, None, now)?;
            tx.execute(
                "UPDATE kb_files SET entry_key = ?2, valid_from = ?3, valid_to = ?4, \
                 expires_at = ?5, valid_until = ?6, provenance = ?7 WHERE id = ?1",
                params![
                    id,
                    key,
                    valid_from,
                    entry.valid_to,
                    entry.expires_at,
                    window_end(entry.valid_to, entry.expires_at, None),
                    entry.provenance,
                ],
            )
            .map_err(db_err)?;
            for source in entry.derived_from.iter().collect::<HashSet<_>>() {
                tx.execute(
                    "INSERT INTO kb_derivations (file_id, source_id) VALUES (?1, ?2)",
                    params![id, source],
                )
                .map_err(db_err)?;
            }
            let uid: String = tx
                .query_row("SELECT uid FROM kb_files WHERE id = ?1", [id], |r| r.get(0))
                .map_err(db_err)?;
            let provenance: serde_json::Value =
                serde_json::from_str(&entry.provenance).unwrap_or_default();
            history(
                tx,
                collection_id,
                &uid,
                key.as_deref(),
                "created",
                now,
                &serde_json::json!({
                    "supersedes": target.as_ref().map(|t| &t.uid),
                    "by": provenance,
                }),
            )?;
            if let Some(t) = &target {
                tx.execute(
                    "UPDATE kb_files SET superseded_by = ?2, valid_until = ?3 WHERE id = ?1",
                    params![
                        t.id,
                        id,
                        window_end(t.valid_to, t.expires_at, Some(valid_from))
                    ],
                )
                .map_err(db_err)?;
                history(
                    tx,
                    collection_id,
                    &t.uid,
                    key.as_deref(),
                    "superseded",
                    now,
                    &serde_json::json!({"by": uid, "valid_until": valid_from}),
                )?;
            }
            tx.execute(
                "UPDATE collections SET updated_at = ?2 WHERE id = ?1",
                params![collection_id, now],
            )
            .map_err(db_err)?;
            let file =
                file_by_row(tx, id)?.ok_or_else(|| Error::Storage("entry vanished".into()))?;
            let superseded = match &target {
                Some(t) => file_by_row(tx, t.id)?.map(Box::new),
                None => None,
            };
            Ok(AddedEntry::Added { file, superseded })
        })
    }

    fn entries_out_of_time(
        &self,
        space: &str,
        collection_ids: Option<&[i64]>,
        at: i64,
    ) -> Result<Vec<i64>> {
        if collection_ids.is_some_and(<[i64]>::is_empty) {
            return Ok(Vec::new());
        }
        // Two ranges, each on its partial index, then the space and collections.
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT f.document_id FROM kb_files f JOIN collections c ON c.id = f.collection_id \
                 WHERE f.id IN (SELECT id FROM kb_files WHERE valid_until <= ?3 \
                 UNION SELECT id FROM kb_files WHERE valid_from > ?3) \
                 AND f.document_id IS NOT NULL AND c.space = ?1 \
                 AND (?2 IS NULL OR f.collection_id IN (SELECT value FROM json_each(?2)))",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![space, collection_ids.map(id_list), at], |r| {
                r.get(0)
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<i64>>>().map_err(db_err)
    }

    fn entry_versions(&self, collection_id: i64, key: &str) -> Result<Vec<KbFile>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {FILE_COLUMNS} FROM {FILE_FROM} WHERE f.collection_id = ?1 \
                 AND f.entry_key = ?2 ORDER BY f.id"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![collection_id, key], super::knowledge::file_from_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn entry_history(&self, collection_id: i64, entry: &str) -> Result<Vec<HistoryEvent>> {
        let conn = self.conn();
        let key: Option<String> = conn
            .query_row(
                "SELECT entry_key FROM kb_history WHERE collection_id = ?1 AND entry = ?2 \
                 AND entry_key IS NOT NULL LIMIT 1",
                params![collection_id, entry],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT entry, entry_key, event, at, detail FROM kb_history \
                 WHERE collection_id = ?1 AND (entry = ?2 OR (?3 IS NOT NULL AND entry_key = ?3)) \
                 ORDER BY at, id",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![collection_id, entry, key], |r| {
                Ok(HistoryEvent {
                    entry: r.get(0)?,
                    key: r.get(1)?,
                    event: r.get(2)?,
                    at: r.get(3)?,
                    detail: serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or_default(),
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn delete_entry(
        &self,
        collection_id: i64,
        row_id: i64,
        by: &str,
    ) -> Result<Vec<(i64, String)>> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let by: serde_json::Value = serde_json::from_str(by).unwrap_or_default();
            let root = entry_row(tx, collection_id, row_id)?
                .ok_or_else(|| Error::NotFound("document not found".into()))?;
            // Everything derived from it, level by level (each entry once: cycles end).
            let mut gone: Vec<(EntryRow, i64, Option<String>)> = vec![(root, collection_id, None)];
            let mut seen: HashSet<i64> = HashSet::from([row_id]);
            let mut level = vec![row_id];
            while !level.is_empty() {
                let mut next = Vec::new();
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT x.file_id, f.collection_id, s.uid FROM kb_derivations x \
                         JOIN kb_files f ON f.id = x.file_id JOIN kb_files s ON s.id = x.source_id \
                         WHERE x.source_id IN (SELECT value FROM json_each(?1)) ORDER BY x.file_id",
                    )
                    .map_err(db_err)?;
                let derived = stmt
                    .query_map([id_list(&level)], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    })
                    .map_err(db_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(db_err)?;
                for (id, collection, source) in derived {
                    if seen.insert(id)
                        && let Some(row) = entry_row(tx, collection, id)?
                    {
                        next.push(id);
                        gone.push((row, collection, Some(source)));
                    }
                }
                level = next;
            }
            let mut derived_uids = Vec::new();
            for (row, collection, source) in &gone {
                let key = row.key.as_deref();
                match source {
                    None => history(
                        tx,
                        *collection,
                        &row.uid,
                        key,
                        "deleted",
                        now,
                        &serde_json::json!({"by": by}),
                    )?,
                    Some(source) => {
                        derived_uids.push((*collection, row.uid.clone()));
                        history(
                            tx,
                            *collection,
                            &row.uid,
                            key,
                            "deleted_with_source",
                            now,
                            &serde_json::json!({"source": source, "by": by}),
                        )?;
                    }
                }
                // Its predecessor takes its place in the key's chain.
                let predecessor: Option<EntryRow> = tx
                    .query_row(
                        "SELECT id FROM kb_files WHERE superseded_by = ?1",
                        [row.id],
                        |r| r.get::<_, i64>(0),
                    )
                    .optional()
                    .map_err(db_err)?
                    .map(|id| entry_row(tx, *collection, id))
                    .transpose()?
                    .flatten();
                let next_start: Option<i64> = match row.superseded_by {
                    Some(next) => tx
                        .query_row(
                            "SELECT COALESCE(valid_from, created_at) FROM kb_files WHERE id = ?1",
                            [next],
                            |r| r.get(0),
                        )
                        .optional()
                        .map_err(db_err)?,
                    None => None,
                };
                tx.execute(
                    "DELETE FROM kb_derivations WHERE file_id = ?1 OR source_id = ?1",
                    [row.id],
                )
                .map_err(db_err)?;
                delete_file_tx(tx, row.id)?;
                if let Some(p) = predecessor {
                    // Current again, unless its key already has a current entry with its
                    // readers (another chain): it then joins that one.
                    let successor = match row.superseded_by {
                        Some(next) => Some(next),
                        None => tx
                            .query_row(
                                "SELECT c.id FROM kb_files c JOIN kb_files p ON p.id = ?1 \
                                 WHERE c.collection_id = p.collection_id AND c.entry_key = p.entry_key \
                                 AND c.readers IS p.readers AND c.superseded_by IS NULL AND c.id <> p.id",
                                [p.id],
                                |r| r.get::<_, i64>(0),
                            )
                            .optional()
                            .map_err(db_err)?,
                    };
                    tx.execute(
                        "UPDATE kb_files SET superseded_by = ?2, valid_until = ?3 WHERE id = ?1",
                        params![
                            p.id,
                            successor,
                            window_end(p.valid_to, p.expires_at, next_start)
                        ],
                    )
                    .map_err(db_err)?;
                    if successor.is_none() {
                        history(
                            tx,
                            *collection,
                            &p.uid,
                            p.key.as_deref(),
                            "current_again",
                            now,
                            &serde_json::json!({"because_deleted": row.uid}),
                        )?;
                    }
                }
            }
            enqueue_cleanup_tx(tx)?;
            Ok(derived_uids)
        })
    }
}
