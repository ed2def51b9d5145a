//! [`SourceStore`] on SQLite.

use quarry_core::{Error, Result};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::knowledge::{
    delete_file_tx, enqueue_cleanup_tx, free_file_name, insert_file, move_to_readers,
    remember_blob, requeue_file, uuid,
};
use crate::error::db_err;
use crate::store::SqliteStore;
use quarry_store::{
    NewSource, SYNC_INTERRUPTED, SourceChange, SourceFile, SourceLease, SourceRow, SourceStore,
    SyncCounts, SyncLine, SyncReport, readers_from_column, readers_to_column,
};

const SOURCE_COLUMNS: &str = "s.id, s.uid, s.collection_id, c.name, s.kind, s.location, s.mask, \
     s.interval_ms, s.secret IS NOT NULL, s.created_at, s.updated_at, s.last_sync_at, \
     s.last_success_at, s.next_sync_at, s.failures, s.last_error, s.readers, s.watch, \
     s.allow_net, s.refused_under";

const SOURCE_FROM: &str = "sources s JOIN collections c ON c.id = s.collection_id";

fn source_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SourceRow> {
    Ok(SourceRow {
        row_id: r.get(0)?,
        id: r.get(1)?,
        collection_id: r.get(2)?,
        knowledge_base: r.get(3)?,
        kind: r.get(4)?,
        location: r.get(5)?,
        mask: r.get(6)?,
        interval_ms: r.get(7)?,
        has_secret: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
        last_sync_at: r.get(11)?,
        last_success_at: r.get(12)?,
        next_sync_at: r.get(13)?,
        failures: r.get::<_, i64>(14)?.max(0) as u32,
        last_error: r.get(15)?,
        readers: r.get(16)?,
        watch: r.get(17)?,
        allow_net: r.get(18)?,
        refused_under: r.get(19)?,
    })
}

/// A `SourceFile` from `source_path, version, blob, id, readers`.
fn source_file_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SourceFile> {
    Ok(SourceFile {
        path: r.get(0)?,
        version: r.get(1)?,
        sha256: r.get(2)?,
        file_row_id: r.get(3)?,
        readers: readers_from_column(r.get::<_, Option<String>>(4)?.as_deref()),
    })
}

fn source_by_row(conn: &Connection, row_id: i64) -> Result<Option<SourceRow>> {
    conn.query_row(
        &format!("SELECT {SOURCE_COLUMNS} FROM {SOURCE_FROM} WHERE s.id = ?1"),
        [row_id],
        source_from_row,
    )
    .optional()
    .map_err(db_err)
}

/// The source `row_id` as an update of `n` rows left it: not found when it touched none.
fn changed_source(conn: &Connection, row_id: i64, n: usize) -> Result<SourceRow> {
    if n == 0 {
        return Err(Error::NotFound("source not found".into()));
    }
    source_by_row(conn, row_id)?.ok_or_else(|| Error::Storage("source vanished".into()))
}

const REPORT_COLUMNS: &str = "r.uid, s.uid, r.started_at, r.finished_at, r.status, r.revision, \
     r.counts, r.details, r.error";

fn report_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(SyncReport, String, String)> {
    Ok((
        SyncReport {
            id: r.get(0)?,
            source_id: r.get(1)?,
            started_at: r.get(2)?,
            finished_at: r.get(3)?,
            status: r.get(4)?,
            revision: r.get(5)?,
            counts: SyncCounts::default(),
            details: Vec::new(),
            error: r.get(8)?,
        },
        r.get(6)?,
        r.get(7)?,
    ))
}

/// A report row with its JSON columns read.
fn report_of((mut report, counts, details): (SyncReport, String, String)) -> Result<SyncReport> {
    report.counts = serde_json::from_str::<SyncCounts>(&counts)
        .map_err(|e| Error::Storage(format!("sync report counts: {e}")))?;
    report.details = serde_json::from_str::<Vec<SyncLine>>(&details)
        .map_err(|e| Error::Storage(format!("sync report details: {e}")))?;
    Ok(report)
}

/// Whether `lease` still holds its source: the same claim, not lapsed.
fn source_lease_holds(tx: &Transaction<'_>, lease: SourceLease, now: i64) -> Result<bool> {
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM sources WHERE id = ?1 AND lease_token = ?2 \
         AND lease_until >= ?3)",
        params![lease.source, lease.token, now],
        |r| r.get(0),
    )
    .map_err(db_err)
}

/// A document this source made, or `NotFound`.
fn check_owned(tx: &Transaction<'_>, source: i64, file_row_id: i64) -> Result<()> {
    let owned: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM kb_files WHERE id = ?1 AND source_id = ?2)",
            params![file_row_id, source],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    if owned {
        Ok(())
    } else {
        Err(Error::NotFound(format!(
            "document {file_row_id} does not belong to this source"
        )))
    }
}

impl SourceStore for SqliteStore {
    fn create_source(&self, source: &NewSource) -> Result<SourceRow> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let taken: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sources WHERE collection_id = ?1 AND kind = ?2 \
                     AND location = ?3)",
                    params![source.collection_id, source.kind, source.location],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if taken {
                return Err(Error::Conflict(
                    "the knowledge base already has a source at that location".into(),
                ));
            }
            tx.execute(
                "INSERT INTO sources (uid, collection_id, kind, location, mask, interval_ms, secret, \
                 created_at, updated_at, next_sync_at, readers, allow_net) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11)",
                params![
                    uuid(),
                    source.collection_id,
                    source.kind,
                    source.location,
                    source.mask,
                    source.interval_ms,
                    source.sealed_secret,
                    now,
                    // A scheduled source is due at once; one synced when asked never is.
                    source.interval_ms.map(|_| now),
                    source.readers,
                    source.allow_net,
                ],
            )
            .map_err(db_err)?;
            source_by_row(tx, tx.last_insert_rowid())?
                .ok_or_else(|| Error::Storage("source vanished".into()))
        })
    }

    fn sources(&self, collection_ids: Option<&[i64]>) -> Result<Vec<SourceRow>> {
        let conn = self.conn();
        let ids = collection_ids.map(crate::sql::id_list);
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {SOURCE_COLUMNS} FROM {SOURCE_FROM} WHERE ?1 IS NULL \
                 OR s.collection_id IN (SELECT value FROM json_each(?1)) ORDER BY s.id"
            ))
            .map_err(db_err)?;
        let rows = stmt.query_map([ids], source_from_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn source(&self, id: &str) -> Result<Option<SourceRow>> {
        self.conn()
            .query_row(
                &format!("SELECT {SOURCE_COLUMNS} FROM {SOURCE_FROM} WHERE s.uid = ?1"),
                [id],
                source_from_row,
            )
            .optional()
            .map_err(db_err)
    }

    fn source_secret(&self, row_id: i64) -> Result<Option<String>> {
        self.conn()
            .query_row("SELECT secret FROM sources WHERE id = ?1", [row_id], |r| {
                r.get(0)
            })
            .optional()
            .map(Option::flatten)
            .map_err(db_err)
    }

    fn set_source_secret(&self, row_id: i64, sealed: Option<&str>) -> Result<()> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE sources SET secret = ?2, updated_at = ?3 WHERE id = ?1",
                    params![row_id, sealed, quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            if n == 0 {
                return Err(Error::NotFound("source not found".into()));
            }
            Ok(())
        })
    }

    fn update_source(
        &self,
        row_id: i64,
        mask: &str,
        interval_ms: Option<i64>,
    ) -> Result<SourceRow> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let n = tx
                .execute(
                    "UPDATE sources SET mask = ?2, interval_ms = ?3, updated_at = ?4, \
                     next_sync_at = CASE WHEN ?3 IS NULL THEN NULL \
                       ELSE COALESCE(last_sync_at, ?4) + ?3 END WHERE id = ?1",
                    params![row_id, mask, interval_ms, now],
                )
                .map_err(db_err)?;
            changed_source(tx, row_id, n)
        })
    }

    fn set_source_readers(&self, row_id: i64, mapping: Option<&str>) -> Result<SourceRow> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE sources SET readers = ?2, updated_at = ?3 WHERE id = ?1",
                    params![row_id, mapping, quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            changed_source(tx, row_id, n)
        })
    }

    fn set_source_watch(&self, row_id: i64, watch: bool) -> Result<SourceRow> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE sources SET watch = ?2, updated_at = ?3 WHERE id = ?1",
                    params![row_id, watch, quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            changed_source(tx, row_id, n)
        })
    }

    fn set_source_allow_net(&self, row_id: i64, allow: Option<&str>) -> Result<SourceRow> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            // A source the guard refused is due at once: the allowance may let it through.
            let n = tx
                .execute(
                    "UPDATE sources SET allow_net = ?2, updated_at = ?3, \
                     next_sync_at = CASE WHEN refused_under IS NULL THEN next_sync_at ELSE ?3 END \
                     WHERE id = ?1",
                    params![row_id, allow, now],
                )
                .map_err(db_err)?;
            changed_source(tx, row_id, n)
        })
    }

    fn retry_refused_sources(&self, policy: &str) -> Result<u64> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE sources SET next_sync_at = ?2 WHERE refused_under IS NOT NULL \
                     AND refused_under <> ?1 AND lease_until IS NULL",
                    params![policy, quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            Ok(n as u64)
        })
    }

    fn delete_source(&self, row_id: i64, keep_documents: bool) -> Result<()> {
        self.write(|tx| {
            let files: Vec<i64> = {
                let mut stmt = tx
                    .prepare("SELECT id FROM kb_files WHERE source_id = ?1")
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([row_id], |r| r.get(0))
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)?
            };
            if keep_documents {
                // Ordinary documents from now on; two equal ones keep both rows.
                tx.execute(
                    "UPDATE kb_files SET source_id = NULL, source_path = NULL, source_version = NULL \
                     WHERE source_id = ?1 AND NOT EXISTS (SELECT 1 FROM kb_files o \
                       WHERE o.collection_id = kb_files.collection_id AND o.blob = kb_files.blob \
                       AND o.source_id IS NULL AND o.superseded_by IS NULL)",
                    [row_id],
                )
                .map_err(db_err)?;
                // A copy of bytes an upload (or another kept file) already holds goes.
                let left: Vec<i64> = {
                    let mut stmt = tx
                        .prepare("SELECT id FROM kb_files WHERE source_id = ?1 ORDER BY id")
                        .map_err(db_err)?;
                    let rows = stmt.query_map([row_id], |r| r.get(0)).map_err(db_err)?;
                    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)?
                };
                for f in left {
                    let detached = tx
                        .execute(
                            "UPDATE kb_files SET source_id = NULL, source_path = NULL, \
                             source_version = NULL WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM \
                             kb_files o WHERE o.collection_id = kb_files.collection_id \
                             AND o.blob = kb_files.blob AND o.source_id IS NULL AND o.superseded_by IS NULL)",
                            [f],
                        )
                        .map_err(db_err)?;
                    if detached == 0 {
                        delete_file_tx(tx, f)?;
                    }
                }
            } else {
                for f in files {
                    delete_file_tx(tx, f)?;
                }
            }
            tx.execute("DELETE FROM sync_reports WHERE source_id = ?1", [row_id])
                .map_err(db_err)?;
            let n = tx
                .execute("DELETE FROM sources WHERE id = ?1", [row_id])
                .map_err(db_err)?;
            if n == 0 {
                return Err(Error::NotFound("source not found".into()));
            }
            enqueue_cleanup_tx(tx)
        })
    }

    fn claim_source(&self, row_id: i64, owner: &str, lease_ms: i64) -> Result<Option<SourceLease>> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let token: Option<i64> = tx
                .query_row(
                    "UPDATE sources SET lease_owner = ?2, lease_until = ?3, \
                     lease_token = lease_token + 1 WHERE id = ?1 \
                     AND (lease_until IS NULL OR lease_until < ?4) RETURNING lease_token",
                    params![row_id, owner, now + lease_ms, now],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            Ok(token.map(|token| SourceLease {
                source: row_id,
                token,
            }))
        })
    }

    fn renew_source(&self, lease: SourceLease, lease_ms: i64) -> Result<bool> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let n = tx
                .execute(
                    "UPDATE sources SET lease_until = ?3 WHERE id = ?1 AND lease_token = ?2 \
                     AND lease_until >= ?4",
                    params![lease.source, lease.token, now + lease_ms, now],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn due_sources(&self, limit: usize) -> Result<Vec<SourceRow>> {
        let now = quarry_core::now_millis();
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                // Due by its interval and free, or interrupted: claimed, never finished (a
                // finished sync clears `lease_until`), the claim lapsed.
                "SELECT {SOURCE_COLUMNS} FROM {SOURCE_FROM} WHERE (s.next_sync_at IS NOT NULL \
                 AND s.next_sync_at <= ?1 AND s.lease_until IS NULL) OR s.lease_until < ?1 \
                 ORDER BY COALESCE(s.lease_until, s.next_sync_at), s.id LIMIT ?2"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![now, limit as i64], source_from_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn source_files(&self, row_id: i64) -> Result<Vec<SourceFile>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT source_path, COALESCE(source_version, ''), blob, id, readers FROM kb_files \
                 WHERE source_id = ?1 ORDER BY source_path",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([row_id], |r| {
                Ok(SourceFile {
                    path: r.get(0)?,
                    version: r.get(1)?,
                    sha256: r.get(2)?,
                    file_row_id: r.get(3)?,
                    readers: readers_from_column(r.get::<_, Option<String>>(4)?.as_deref()),
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn source_files_at(&self, row_id: i64, paths: &[String]) -> Result<Vec<SourceFile>> {
        if paths.iter().any(String::is_empty) {
            return self.source_files(row_id);
        }
        let conn = self.conn();
        // The path itself, then the paths under it: `p/` < path < `p0` (`0` follows `/`),
        // a range of the (source_id, source_path) index.
        let mut exact = conn
            .prepare_cached(
                "SELECT source_path, COALESCE(source_version, ''), blob, id, readers FROM kb_files \
                 WHERE source_id = ?1 AND source_path = ?2",
            )
            .map_err(db_err)?;
        let mut under = conn
            .prepare_cached(
                "SELECT source_path, COALESCE(source_version, ''), blob, id, readers FROM kb_files \
                 WHERE source_id = ?1 AND source_path > ?2 || '/' AND source_path < ?2 || '0'",
            )
            .map_err(db_err)?;
        let mut found = std::collections::BTreeMap::new();
        for p in paths {
            for stmt in [&mut exact, &mut under] {
                let rows = stmt
                    .query_map(params![row_id, p], source_file_from_row)
                    .map_err(db_err)?;
                for f in rows {
                    let f = f.map_err(db_err)?;
                    found.insert(f.path.clone(), f);
                }
            }
        }
        Ok(found.into_values().collect())
    }

    fn apply_source_change(
        &self,
        lease: SourceLease,
        change: &SourceChange<'_>,
    ) -> Result<Option<i64>> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            if !source_lease_holds(tx, lease, now)? {
                return Ok(None);
            }
            let collection_id: i64 = tx
                .query_row(
                    "SELECT collection_id FROM sources WHERE id = ?1",
                    [lease.source],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            let touched: Option<i64> = match change {
                SourceChange::Add {
                    path,
                    version,
                    file,
                } => {
                    let id = insert_file(
                        tx,
                        collection_id,
                        file,
                        Some((lease.source, path, version)),
                        now,
                    )?;
                    Some(id)
                }
                SourceChange::Replace {
                    file_row_id,
                    version,
                    file,
                } => {
                    check_owned(tx, lease.source, *file_row_id)?;
                    remember_blob(tx, &file.sha256, file.size, &file.mime, now)?;
                    tx.execute(
                        "UPDATE kb_files SET blob = ?2, size = ?3, format = ?4, mime = ?5, \
                         source_version = ?6, warnings = '', pages = NULL, \
                         pages_without_text = NULL WHERE id = ?1",
                        params![
                            file_row_id,
                            file.sha256,
                            file.size as i64,
                            file.format,
                            file.mime,
                            version,
                        ],
                    )
                    .map_err(db_err)?;
                    move_to_readers(
                        tx,
                        *file_row_id,
                        readers_to_column(file.readers.as_deref()).as_deref(),
                        now,
                    )?;
                    requeue_file(tx, *file_row_id, now)?;
                    // The old original may now be unreferenced.
                    enqueue_cleanup_tx(tx)?;
                    Some(*file_row_id)
                }
                SourceChange::Touch {
                    file_row_id,
                    version,
                    readers,
                } => {
                    check_owned(tx, lease.source, *file_row_id)?;
                    tx.execute(
                        "UPDATE kb_files SET source_version = ?2 WHERE id = ?1",
                        params![file_row_id, version],
                    )
                    .map_err(db_err)?;
                    move_to_readers(
                        tx,
                        *file_row_id,
                        readers_to_column(*readers).as_deref(),
                        now,
                    )?;
                    Some(*file_row_id)
                }
                SourceChange::Rename {
                    file_row_id,
                    path,
                    name,
                    version,
                    readers,
                } => {
                    check_owned(tx, lease.source, *file_row_id)?;
                    // Its name follows the path; the old name is free first.
                    tx.execute(
                        "UPDATE kb_files SET name = 'renaming:' || uid WHERE id = ?1",
                        [file_row_id],
                    )
                    .map_err(db_err)?;
                    let free = free_file_name(
                        tx,
                        collection_id,
                        name,
                        readers_to_column(*readers).as_deref(),
                    )?;
                    tx.execute(
                        "UPDATE kb_files SET name = ?2, original_name = ?3, source_path = ?4, \
                         source_version = ?5, updated_at = ?6, readers = ?7 WHERE id = ?1",
                        params![
                            file_row_id,
                            free,
                            name,
                            path,
                            version,
                            now,
                            readers_to_column(*readers)
                        ],
                    )
                    .map_err(db_err)?;
                    // Its searchable document moves too (the feed tells the indexes).
                    tx.execute(
                        "UPDATE documents SET path = ?2 WHERE id = \
                         (SELECT document_id FROM kb_files WHERE id = ?1)",
                        params![file_row_id, free],
                    )
                    .map_err(db_err)?;
                    Some(*file_row_id)
                }
                SourceChange::Delete { file_row_id } => {
                    check_owned(tx, lease.source, *file_row_id)?;
                    delete_file_tx(tx, *file_row_id)?;
                    enqueue_cleanup_tx(tx)?;
                    Some(*file_row_id)
                }
            };
            tx.execute(
                "UPDATE collections SET updated_at = ?2 WHERE id = ?1",
                params![collection_id, now],
            )
            .map_err(db_err)?;
            Ok(touched)
        })
    }

    fn start_sync_report(&self, lease: SourceLease, revision: Option<&str>) -> Result<String> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            if !source_lease_holds(tx, lease, now)? {
                return Err(Error::Conflict(
                    "another sync of this source took over".into(),
                ));
            }
            // A sync whose node died left its report running: say so.
            tx.execute(
                "UPDATE sync_reports SET status = 'failed', finished_at = ?2, error = ?3 \
                 WHERE source_id = ?1 AND status = 'running'",
                params![lease.source, now, SYNC_INTERRUPTED],
            )
            .map_err(db_err)?;
            let id = uuid();
            tx.execute(
                "INSERT INTO sync_reports (uid, source_id, lease_token, started_at, status, revision) \
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5)",
                params![id, lease.source, lease.token, now, revision],
            )
            .map_err(db_err)?;
            // Keep the latest 100 reports of a source.
            tx.execute(
                "DELETE FROM sync_reports WHERE source_id = ?1 AND id NOT IN \
                 (SELECT id FROM sync_reports WHERE source_id = ?1 ORDER BY id DESC LIMIT 100)",
                [lease.source],
            )
            .map_err(db_err)?;
            Ok(id)
        })
    }

    fn finish_sync_report(
        &self,
        lease: SourceLease,
        report: &SyncReport,
        retry_after_ms: Option<i64>,
        refused_under: Option<&str>,
    ) -> Result<bool> {
        let counts =
            serde_json::to_string(&report.counts).map_err(|e| Error::Storage(e.to_string()))?;
        let details =
            serde_json::to_string(&report.details).map_err(|e| Error::Storage(e.to_string()))?;
        self.write(|tx| {
            let now = quarry_core::now_millis();
            if !source_lease_holds(tx, lease, now)? {
                return Ok(false);
            }
            tx.execute(
                "UPDATE sync_reports SET finished_at = ?2, status = ?3, revision = ?4, counts = ?5, \
                 details = ?6, error = ?7 WHERE uid = ?1",
                params![
                    report.id,
                    now,
                    report.status,
                    report.revision,
                    counts,
                    details,
                    report.error
                ],
            )
            .map_err(db_err)?;
            let failed = report.error.is_some();
            tx.execute(
                "UPDATE sources SET lease_owner = NULL, lease_until = NULL, last_sync_at = ?2, \
                 last_success_at = CASE WHEN ?3 THEN last_success_at ELSE ?2 END, \
                 failures = CASE WHEN ?3 THEN failures + 1 ELSE 0 END, last_error = ?4, \
                 next_sync_at = CASE WHEN ?3 AND ?5 IS NOT NULL THEN ?2 + ?5 \
                   WHEN interval_ms IS NULL THEN NULL ELSE ?2 + interval_ms END, \
                 refused_under = ?6 WHERE id = ?1",
                params![
                    lease.source,
                    now,
                    failed,
                    report.error,
                    retry_after_ms,
                    refused_under
                ],
            )
            .map_err(db_err)?;
            Ok(true)
        })
    }

    fn sync_reports(&self, row_id: i64, limit: usize) -> Result<Vec<SyncReport>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {REPORT_COLUMNS}, \
                 COALESCE(s.lease_token = r.lease_token AND s.lease_until >= ?3, 0) \
                 FROM sync_reports r JOIN sources s ON s.id = r.source_id \
                 WHERE r.source_id = ?1 ORDER BY r.id DESC LIMIT ?2"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map(
                params![row_id, limit as i64, quarry_core::now_millis()],
                |r| Ok((report_from_row(r)?, r.get::<_, bool>(9)?)),
            )
            .map_err(db_err)?;
        rows.map(|r| {
            let (row, held) = r.map_err(db_err)?;
            let mut report = report_of(row)?;
            // Its node stopped and its claim lapsed: no one will finish it.
            if report.status == "running" && !held {
                report.status = "failed".into();
                report.error = Some(SYNC_INTERRUPTED.into());
            }
            Ok(report)
        })
        .collect()
    }

    fn record_sync_progress(&self, lease: SourceLease, report: &SyncReport) -> Result<bool> {
        let counts =
            serde_json::to_string(&report.counts).map_err(|e| Error::Storage(e.to_string()))?;
        let details =
            serde_json::to_string(&report.details).map_err(|e| Error::Storage(e.to_string()))?;
        self.write(|tx| {
            let now = quarry_core::now_millis();
            if !source_lease_holds(tx, lease, now)? {
                return Ok(false);
            }
            tx.execute(
                "UPDATE sync_reports SET revision = ?2, counts = ?3, details = ?4 \
                 WHERE uid = ?1 AND status = 'running'",
                params![report.id, report.revision, counts, details],
            )
            .map_err(db_err)?;
            Ok(true)
        })
    }
}
