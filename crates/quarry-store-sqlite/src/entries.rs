//! [`EntryStore`] on SQLite: knowledge entries' versions, validity, derivations and history.

use quarry_core::Result;
use rusqlite::{OptionalExtension, Transaction, params};

use quarry_store::entry_rules::{self, Derived, EntryColumnsWrite, EntryRow, EntryTx, HistoryRow};
use quarry_store::{AddedEntry, EntryStore, HistoryEvent, KbFile, NewEntry, NewKbFile, PageSource};

use super::knowledge::{
    FILE_COLUMNS, FILE_FROM, delete_file_tx, enqueue_cleanup_tx, file_by_row, file_from_row,
    free_file_name, insert_file,
};
use crate::error::db_err;
use crate::sql::id_list;
use crate::store::SqliteStore;

/// The entry rules' statements ([`EntryTx`]) on a SQLite write transaction (serial: no
/// locks to take).
struct SqliteEntryTx<'a, 'c>(&'a Transaction<'c>);

impl EntryTx for SqliteEntryTx<'_, '_> {
    fn lock_collection(&mut self, _collection_id: i64) -> Result<()> {
        Ok(())
    }

    fn lock_file(&mut self, id: i64) -> Result<Option<i64>> {
        self.0
            .query_row(
                "SELECT collection_id FROM kb_files WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    fn count_files(&mut self, ids: &[i64]) -> Result<usize> {
        let n: i64 = self
            .0
            .query_row(
                "SELECT count(*) FROM kb_files WHERE id IN (SELECT value FROM json_each(?1))",
                [id_list(ids)],
                |r| r.get(0),
            )
            .map_err(db_err)?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn current_of_key(
        &mut self,
        collection_id: i64,
        key: &str,
        readers: Option<&str>,
    ) -> Result<Option<i64>> {
        self.0
            .query_row(
                "SELECT id FROM kb_files WHERE collection_id = ?1 AND entry_key = ?2 \
                 AND superseded_by IS NULL AND readers IS ?3",
                params![collection_id, key, readers],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    fn other_current_of_key(&mut self, id: i64) -> Result<Option<i64>> {
        self.0
            .query_row(
                "SELECT c.id FROM kb_files c JOIN kb_files p ON p.id = ?1 \
                 WHERE c.collection_id = p.collection_id AND c.entry_key = p.entry_key \
                 AND c.readers IS p.readers AND c.superseded_by IS NULL AND c.id <> p.id LIMIT 1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    fn entry_row(&mut self, collection_id: i64, id: i64) -> Result<Option<EntryRow>> {
        self.0
            .query_row(
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

    fn uid(&mut self, id: i64) -> Result<Option<String>> {
        self.0
            .query_row("SELECT uid FROM kb_files WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(db_err)
    }

    fn current_with_content(
        &mut self,
        collection_id: i64,
        sha256: &str,
        readers: Option<&str>,
    ) -> Result<Option<KbFile>> {
        self.0
            .query_row(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM {FILE_FROM} WHERE f.collection_id = ?1 \
                     AND f.blob = ?2 AND f.source_id IS NULL AND f.superseded_by IS NULL \
                     AND f.readers IS ?3"
                ),
                params![collection_id, sha256, readers],
                file_from_row,
            )
            .optional()
            .map_err(db_err)
    }

    fn file(&mut self, id: i64) -> Result<Option<KbFile>> {
        file_by_row(self.0, id)
    }

    fn name_and_readers(&mut self, id: i64) -> Result<(String, Option<String>)> {
        self.0
            .query_row(
                "SELECT name, readers FROM kb_files WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(db_err)
    }

    fn free_name(
        &mut self,
        collection_id: i64,
        name: &str,
        readers: Option<&str>,
    ) -> Result<String> {
        free_file_name(self.0, collection_id, name, readers)
    }

    fn rename(&mut self, id: i64, name: &str) -> Result<()> {
        self.0
            .execute(
                "UPDATE kb_files SET name = ?2 WHERE id = ?1",
                params![id, name],
            )
            .map_err(db_err)?;
        self.0
            .execute(
                "UPDATE documents SET path = ?2 \
                 WHERE id = (SELECT document_id FROM kb_files WHERE id = ?1)",
                params![id, name],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn insert_file(&mut self, collection_id: i64, file: &NewKbFile, now: i64) -> Result<i64> {
        insert_file(self.0, collection_id, file, None, now)
    }

    fn set_entry(
        &mut self,
        id: i64,
        key: Option<&str>,
        entry: &EntryColumnsWrite<'_>,
    ) -> Result<String> {
        self.0
            .query_row(
                "UPDATE kb_files SET entry_key = ?2, valid_from = ?3, valid_to = ?4, \
                 expires_at = ?5, valid_until = ?6, provenance = ?7 WHERE id = ?1 RETURNING uid",
                params![
                    id,
                    key,
                    entry.valid_from,
                    entry.valid_to,
                    entry.expires_at,
                    entry.valid_until,
                    entry.provenance,
                ],
                |r| r.get(0),
            )
            .map_err(db_err)
    }

    fn leave_current(&mut self, id: i64) -> Result<()> {
        self.0
            .execute("UPDATE kb_files SET superseded_by = 0 WHERE id = ?1", [id])
            .map_err(db_err)?;
        Ok(())
    }

    fn set_successor(
        &mut self,
        id: i64,
        superseded_by: Option<i64>,
        valid_until: Option<i64>,
    ) -> Result<()> {
        self.0
            .execute(
                "UPDATE kb_files SET superseded_by = ?2, valid_until = ?3 WHERE id = ?1",
                params![id, superseded_by, valid_until],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn add_derivation(&mut self, file_id: i64, source_id: i64) -> Result<()> {
        self.0
            .execute(
                "INSERT INTO kb_derivations (file_id, source_id) VALUES (?1, ?2)",
                params![file_id, source_id],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn add_page_source(&mut self, entry_id: i64, position: u32, source: &PageSource) -> Result<()> {
        self.0
            .execute(
                "INSERT INTO page_sources (page_id, position, file_uid, line_start, line_end, \
                 page, document_sha256, passage_sha256, passage) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    entry_id,
                    position,
                    source.file,
                    source.line_start,
                    source.line_end,
                    source.page,
                    source.document_sha256,
                    source.passage_sha256,
                    source.passage,
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn derived_from_any(&mut self, sources: &[i64]) -> Result<Vec<Derived>> {
        let mut stmt = self
            .0
            .prepare_cached(
                "SELECT x.file_id, f.collection_id, s.uid FROM kb_derivations x \
                 JOIN kb_files f ON f.id = x.file_id JOIN kb_files s ON s.id = x.source_id \
                 WHERE x.source_id IN (SELECT value FROM json_each(?1)) ORDER BY x.file_id",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([id_list(sources)], |r| {
                Ok(Derived {
                    id: r.get(0)?,
                    collection_id: r.get(1)?,
                    source_uid: r.get(2)?,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn predecessor(&mut self, id: i64) -> Result<Option<i64>> {
        self.0
            .query_row(
                "SELECT id FROM kb_files WHERE superseded_by = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    fn valid_start(&mut self, id: i64) -> Result<Option<i64>> {
        self.0
            .query_row(
                "SELECT COALESCE(valid_from, created_at) FROM kb_files WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    fn delete_file(&mut self, id: i64) -> Result<()> {
        self.0
            .execute(
                "DELETE FROM kb_derivations WHERE file_id = ?1 OR source_id = ?1",
                [id],
            )
            .map_err(db_err)?;
        delete_file_tx(self.0, id)
    }

    fn enqueue_cleanup(&mut self) -> Result<()> {
        enqueue_cleanup_tx(self.0)
    }

    fn history(&mut self, collection_id: i64, event: &HistoryRow<'_>) -> Result<()> {
        self.0
            .execute(
                "INSERT INTO kb_history (collection_id, entry, entry_key, event, at, detail) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    collection_id,
                    event.entry,
                    event.key,
                    event.event,
                    event.at,
                    event.detail.to_string()
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn touch_collection(&mut self, collection_id: i64, now: i64) -> Result<()> {
        self.0
            .execute(
                "UPDATE collections SET updated_at = ?2 WHERE id = ?1",
                params![collection_id, now],
            )
            .map_err(db_err)?;
        Ok(())
    }
}

impl EntryStore for SqliteStore {
    fn add_entry(
        &self,
        collection_id: i64,
        file: &NewKbFile,
        entry: &NewEntry,
    ) -> Result<AddedEntry> {
        self.write(|tx| entry_rules::add_entry(&mut SqliteEntryTx(tx), collection_id, file, entry))
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
            .query_map(params![collection_id, key], file_from_row)
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
            entry_rules::delete_entry(&mut SqliteEntryTx(tx), collection_id, row_id, by)
        })
    }

    fn page_sources(&self, entry_ids: &[i64]) -> Result<Vec<(i64, PageSource)>> {
        if entry_ids.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT page_id, file_uid, line_start, line_end, page, document_sha256, \
                 passage_sha256, passage FROM page_sources \
                 WHERE page_id IN (SELECT value FROM json_each(?1)) ORDER BY page_id, position",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([id_list(entry_ids)], |r| {
                Ok((
                    r.get(0)?,
                    PageSource {
                        file: r.get(1)?,
                        line_start: r.get(2)?,
                        line_end: r.get(3)?,
                        page: r.get(4)?,
                        document_sha256: r.get(5)?,
                        passage_sha256: r.get(6)?,
                        passage: r.get(7)?,
                    },
                ))
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }
}
