//! [`quarry_store::SourceStore`] on PostgreSQL.
//!
//! Lock order: the source's row first (every change a sync applies checks its lease with
//! `FOR UPDATE`, so a new claim cannot slip between the check and the write), then the
//! knowledge base's row (new names), then a file's job and the file (`knowledge.rs`).

use quarry_core::{Error, Result};
use quarry_store::{
    NewSource, SYNC_INTERRUPTED, SourceChange, SourceFile, SourceLease, SourceRow, SyncCounts,
    SyncLine, SyncReport, readers_from_column, readers_to_column,
};

use super::knowledge::{
    delete_file, enqueue_cleanup_tx, free_file_name, insert_file, lock_file, move_to_readers,
    remember_blobs, requeue_file, uuid,
};
use crate::error::{conflict_or_db, db_err};
use crate::pg_store::PgStore;
use crate::sql::{col, to_i64};

const SOURCE_SELECT: &str = "SELECT s.id, s.uid, s.collection_id, c.name, s.kind, s.location, \
     s.mask, s.interval_ms, s.secret IS NOT NULL, s.created_at, s.updated_at, s.last_sync_at, \
     s.last_success_at, s.next_sync_at, s.failures, s.last_error, s.readers, s.watch, \
     s.allow_net, s.refused_under FROM sources s JOIN collections c ON c.id = s.collection_id";

fn source_from_row(r: &postgres::Row) -> Result<SourceRow> {
    Ok(SourceRow {
        row_id: col(r, 0)?,
        id: col(r, 1)?,
        collection_id: col(r, 2)?,
        knowledge_base: col(r, 3)?,
        kind: col(r, 4)?,
        location: col(r, 5)?,
        mask: col(r, 6)?,
        interval_ms: col(r, 7)?,
        has_secret: col(r, 8)?,
        created_at: col(r, 9)?,
        updated_at: col(r, 10)?,
        last_sync_at: col(r, 11)?,
        last_success_at: col(r, 12)?,
        next_sync_at: col(r, 13)?,
        failures: col::<i32>(r, 14)?.max(0) as u32,
        last_error: col(r, 15)?,
        readers: col(r, 16)?,
        watch: col(r, 17)?,
        allow_net: col(r, 18)?,
        refused_under: col(r, 19)?,
    })
}

fn source_by_row(c: &mut impl postgres::GenericClient, row_id: i64) -> Result<Option<SourceRow>> {
    c.query_opt(&format!("{SOURCE_SELECT} WHERE s.id = $1"), &[&row_id])
        .map_err(db_err)?
        .as_ref()
        .map(source_from_row)
        .transpose()
}

/// The source `row_id` as an update of `n` rows left it: not found when it touched none.
fn changed_source(c: &mut impl postgres::GenericClient, row_id: i64, n: u64) -> Result<SourceRow> {
    if n == 0 {
        return Err(Error::NotFound("source not found".into()));
    }
    source_by_row(c, row_id)?.ok_or_else(|| Error::Storage("source vanished".into()))
}

fn report_from_row(r: &postgres::Row) -> Result<SyncReport> {
    let counts: String = col(r, 6)?;
    let details: String = col(r, 7)?;
    Ok(SyncReport {
        id: col(r, 0)?,
        source_id: col(r, 1)?,
        started_at: col(r, 2)?,
        finished_at: col(r, 3)?,
        status: col(r, 4)?,
        revision: col(r, 5)?,
        counts: serde_json::from_str::<SyncCounts>(&counts)
            .map_err(|e| Error::Storage(format!("sync report counts: {e}")))?,
        details: serde_json::from_str::<Vec<SyncLine>>(&details)
            .map_err(|e| Error::Storage(format!("sync report details: {e}")))?,
        error: col(r, 8)?,
    })
}

/// The source's collection while `lease` holds it (its row locked until commit), else `None`.
fn lease_holds(tx: &mut crate::PgTransaction<'_>, lease: SourceLease) -> Result<Option<i64>> {
    tx.query_opt(
        "SELECT collection_id FROM sources WHERE id = $1 AND lease_token = $2 \
         AND lease_until >= quarry_now_ms() FOR UPDATE",
        &[&lease.source, &lease.token],
    )
    .map_err(db_err)?
    .map(|r| col(&r, 0))
    .transpose()
}

/// Locks a document this source made (job, then file), or `NotFound`.
fn lock_owned(tx: &mut crate::PgTransaction<'_>, source: i64, file_row_id: i64) -> Result<()> {
    let owned = tx
        .query_opt(
            "SELECT 1 FROM kb_files WHERE id = $1 AND source_id = $2",
            &[&file_row_id, &source],
        )
        .map_err(db_err)?
        .is_some();
    if owned && lock_file(tx, file_row_id)?.is_some() {
        Ok(())
    } else {
        Err(Error::NotFound(format!(
            "document {file_row_id} does not belong to this source"
        )))
    }
}

/// [`lock_owned`], the knowledge base's row first (`FOR NO KEY UPDATE`) when the file's
/// readers change: its name may move among the new readers' ([`move_to_readers`]), and a
/// name is picked under that lock. Unchanged readers leave uploads to the knowledge base
/// unblocked.
fn lock_owned_for_readers(
    tx: &mut crate::PgTransaction<'_>,
    source: i64,
    file_row_id: i64,
    readers: Option<&str>,
) -> Result<()> {
    let change = tx
        .query_opt(
            "SELECT collection_id FROM kb_files WHERE id = $1 \
             AND readers IS DISTINCT FROM $2",
            &[&file_row_id, &readers],
        )
        .map_err(db_err)?;
    if let Some(row) = change {
        let collection_id: i64 = col(&row, 0)?;
        tx.query_opt(
            "SELECT 1 FROM collections WHERE id = $1 FOR NO KEY UPDATE",
            &[&collection_id],
        )
        .map_err(db_err)?;
    }
    lock_owned(tx, source, file_row_id)
}

impl quarry_store::SourceStore for PgStore {
    fn create_source(&self, source: &NewSource) -> Result<SourceRow> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let row = tx
                .query_one(
                    "INSERT INTO sources (uid, collection_id, kind, location, mask, interval_ms, \
                     secret, created_at, updated_at, next_sync_at, readers, allow_net) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11) RETURNING id",
                    &[
                        &uuid(),
                        &source.collection_id,
                        &source.kind,
                        &source.location,
                        &source.mask,
                        &source.interval_ms,
                        &source.sealed_secret,
                        &now,
                        // A scheduled source is due at once; one synced when asked never is.
                        &source.interval_ms.map(|_| now),
                        &source.readers,
                        &source.allow_net,
                    ],
                )
                .map_err(|e| {
                    conflict_or_db(e, || {
                        "the knowledge base already has a source at that location".into()
                    })
                })?;
            source_by_row(&mut **tx, col(&row, 0)?)?
                .ok_or_else(|| Error::Storage("source vanished".into()))
        })
    }

    fn sources(&self, collection_ids: Option<&[i64]>) -> Result<Vec<SourceRow>> {
        let ids: Option<Vec<i64>> = collection_ids.map(<[i64]>::to_vec);
        self.conn()?
            .query(
                &format!(
                    "{SOURCE_SELECT} WHERE $1::bigint[] IS NULL OR s.collection_id = ANY($1) \
                     ORDER BY s.id"
                ),
                &[&ids],
            )
            .map_err(db_err)?
            .iter()
            .map(source_from_row)
            .collect()
    }

    fn source(&self, id: &str) -> Result<Option<SourceRow>> {
        self.conn()?
            .query_opt(&format!("{SOURCE_SELECT} WHERE s.uid = $1"), &[&id])
            .map_err(db_err)?
            .as_ref()
            .map(source_from_row)
            .transpose()
    }

    fn source_secret(&self, row_id: i64) -> Result<Option<String>> {
        Ok(self
            .conn()?
            .query_opt("SELECT secret FROM sources WHERE id = $1", &[&row_id])
            .map_err(db_err)?
            .map(|r| col::<Option<String>>(&r, 0))
            .transpose()?
            .flatten())
    }

    fn set_source_secret(&self, row_id: i64, sealed: Option<&str>) -> Result<()> {
        let n = self
            .conn()?
            .execute(
                "UPDATE sources SET secret = $2, updated_at = $3 WHERE id = $1",
                &[&row_id, &sealed, &quarry_core::now_millis()],
            )
            .map_err(db_err)?;
        if n == 0 {
            return Err(Error::NotFound("source not found".into()));
        }
        Ok(())
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
                    "UPDATE sources SET mask = $2, interval_ms = $3, updated_at = $4, \
                     next_sync_at = CASE WHEN $3::bigint IS NULL THEN NULL \
                       ELSE COALESCE(last_sync_at, $4) + $3 END WHERE id = $1",
                    &[&row_id, &mask, &interval_ms, &now],
                )
                .map_err(db_err)?;
            changed_source(&mut **tx, row_id, n)
        })
    }

    fn set_source_watch(&self, row_id: i64, watch: bool) -> Result<SourceRow> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE sources SET watch = $2, updated_at = $3 WHERE id = $1",
                    &[&row_id, &watch, &quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            changed_source(&mut **tx, row_id, n)
        })
    }

    fn set_source_readers(&self, row_id: i64, mapping: Option<&str>) -> Result<SourceRow> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE sources SET readers = $2, updated_at = $3 WHERE id = $1",
                    &[&row_id, &mapping, &quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            changed_source(&mut **tx, row_id, n)
        })
    }

    fn set_source_allow_net(&self, row_id: i64, allow: Option<&str>) -> Result<SourceRow> {
        self.write(|tx| {
            // A source the guard refused is due at once: the allowance may let it through.
            let n = tx
                .execute(
                    "UPDATE sources SET allow_net = $2, updated_at = $3, \
                     next_sync_at = CASE WHEN refused_under IS NULL THEN next_sync_at \
                       ELSE quarry_now_ms() END WHERE id = $1",
                    &[&row_id, &allow, &quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            changed_source(&mut **tx, row_id, n)
        })
    }

    fn retry_refused_sources(&self, policy: &str) -> Result<u64> {
        self.conn()?
            .execute(
                // Rows taken in id order (two nodes starting at once never deadlock); one
                // another write holds is left alone (a sync or a change of it is under way).
                "UPDATE sources SET next_sync_at = quarry_now_ms() WHERE id IN (SELECT id FROM \
                 sources WHERE refused_under IS NOT NULL AND refused_under <> $1 \
                 AND lease_until IS NULL ORDER BY id FOR UPDATE SKIP LOCKED)",
                &[&policy],
            )
            .map_err(db_err)
    }

    fn delete_source(&self, row_id: i64, keep_documents: bool) -> Result<()> {
        self.write(|tx| {
            let Some(row) = tx
                .query_opt(
                    "SELECT collection_id FROM sources WHERE id = $1 FOR UPDATE",
                    &[&row_id],
                )
                .map_err(db_err)?
            else {
                return Err(Error::NotFound("source not found".into()));
            };
            let collection_id: i64 = col(&row, 0)?;
            // New names and uploads of the knowledge base wait for this.
            tx.query_opt(
                "SELECT 1 FROM collections WHERE id = $1 FOR NO KEY UPDATE",
                &[&collection_id],
            )
            .map_err(db_err)?;
            let files: Vec<i64> = tx
                .query(
                    "SELECT id FROM kb_files WHERE source_id = $1 ORDER BY id",
                    &[&row_id],
                )
                .map_err(db_err)?
                .iter()
                .map(|r| col(r, 0))
                .collect::<Result<_>>()?;
            for f in files {
                lock_file(tx, f)?;
                // Kept: an ordinary document from now on — unless an upload (or a file kept
                // before it) already holds the same bytes, the one rule uploads follow.
                let detached = keep_documents
                    && tx
                        .execute(
                            "UPDATE kb_files SET source_id = NULL, source_path = NULL, \
                             source_version = NULL WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM \
                             kb_files o WHERE o.collection_id = kb_files.collection_id \
                             AND o.blob = kb_files.blob AND o.source_id IS NULL AND o.superseded_by IS NULL)",
                            &[&f],
                        )
                        .map_err(db_err)?
                        > 0;
                if !detached {
                    delete_file(tx, f)?;
                }
            }
            tx.execute(
                "WITH r AS (DELETE FROM sync_reports WHERE source_id = $1) \
                 DELETE FROM sources WHERE id = $1",
                &[&row_id],
            )
            .map_err(db_err)?;
            enqueue_cleanup_tx(tx)
        })
    }

    fn claim_source(&self, row_id: i64, owner: &str, lease_ms: i64) -> Result<Option<SourceLease>> {
        self.conn()?
            .query_opt(
                "UPDATE sources SET lease_owner = $2, lease_until = quarry_now_ms() + $3, \
                 lease_token = lease_token + 1 WHERE id = $1 \
                 AND (lease_until IS NULL OR lease_until < quarry_now_ms()) RETURNING lease_token",
                &[&row_id, &owner, &lease_ms],
            )
            .map_err(db_err)?
            .map(|r| {
                Ok(SourceLease {
                    source: row_id,
                    token: col(&r, 0)?,
                })
            })
            .transpose()
    }

    fn renew_source(&self, lease: SourceLease, lease_ms: i64) -> Result<bool> {
        Ok(self
            .conn()?
            .execute(
                "UPDATE sources SET lease_until = quarry_now_ms() + $3 WHERE id = $1 \
                 AND lease_token = $2 AND lease_until >= quarry_now_ms()",
                &[&lease.source, &lease.token, &lease_ms],
            )
            .map_err(db_err)?
            > 0)
    }

    fn due_sources(&self, limit: usize) -> Result<Vec<SourceRow>> {
        let limit = to_i64(limit, "limit")?;
        self.conn()?
            .query(
                &format!(
                    // Due by its interval and free, or interrupted: claimed, never finished
                    // (a finished sync clears `lease_until`), the claim lapsed.
                    "{SOURCE_SELECT} WHERE (s.next_sync_at IS NOT NULL \
                     AND s.next_sync_at <= quarry_now_ms() AND s.lease_until IS NULL) \
                     OR s.lease_until < quarry_now_ms() \
                     ORDER BY COALESCE(s.lease_until, s.next_sync_at), s.id LIMIT $1"
                ),
                &[&limit],
            )
            .map_err(db_err)?
            .iter()
            .map(source_from_row)
            .collect()
    }

    fn source_files(&self, row_id: i64) -> Result<Vec<SourceFile>> {
        self.conn()?
            .query(
                "SELECT source_path, COALESCE(source_version, ''), blob, id, readers FROM kb_files \
                 WHERE source_id = $1 ORDER BY source_path",
                &[&row_id],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| {
                Ok(SourceFile {
                    path: col(r, 0)?,
                    version: col(r, 1)?,
                    sha256: col(r, 2)?,
                    file_row_id: col(r, 3)?,
                    readers: readers_from_column(col::<Option<String>>(r, 4)?.as_deref()),
                })
            })
            .collect()
    }

    fn source_files_at(&self, row_id: i64, paths: &[String]) -> Result<Vec<SourceFile>> {
        if paths.iter().any(String::is_empty) {
            return self.source_files(row_id);
        }
        // The paths themselves, then those under each: `p/` < path < `p0` in byte order
        // (`0` follows `/`), a range of the `COLLATE "C"` index (v20).
        let below: Vec<String> = paths.iter().map(|p| format!("{p}/")).collect();
        let above: Vec<String> = paths.iter().map(|p| format!("{p}0")).collect();
        let mut found = std::collections::BTreeMap::new();
        let mut conn = self.conn()?;
        let rows = conn
            .query(
                "SELECT source_path, COALESCE(source_version, ''), blob, id, readers FROM kb_files \
                 WHERE source_id = $1 AND source_path = ANY($2) \
                 UNION ALL \
                 SELECT f.source_path, COALESCE(f.source_version, ''), f.blob, f.id, f.readers \
                 FROM unnest($3::text[], $4::text[]) AS r(lo, hi) \
                 JOIN kb_files f ON f.source_id = $1 \
                   AND f.source_path COLLATE \"C\" > r.lo COLLATE \"C\" \
                   AND f.source_path COLLATE \"C\" < r.hi COLLATE \"C\"",
                &[&row_id, &paths, &below, &above],
            )
            .map_err(db_err)?;
        for r in &rows {
            let f = SourceFile {
                path: col(r, 0)?,
                version: col(r, 1)?,
                sha256: col(r, 2)?,
                file_row_id: col(r, 3)?,
                readers: readers_from_column(col::<Option<String>>(r, 4)?.as_deref()),
            };
            found.insert(f.path.clone(), f);
        }
        Ok(found.into_values().collect())
    }

    fn apply_source_change(
        &self,
        lease: SourceLease,
        change: &SourceChange<'_>,
    ) -> Result<Option<i64>> {
        self.write(|tx| {
            let Some(collection_id) = lease_holds(tx, lease)? else {
                return Ok(None);
            };
            let now = quarry_core::now_millis();
            let touched: Option<i64> = match change {
                SourceChange::Add {
                    path,
                    version,
                    file,
                } => {
                    tx.query_opt(
                        "SELECT 1 FROM collections WHERE id = $1 FOR NO KEY UPDATE",
                        &[&collection_id],
                    )
                    .map_err(db_err)?;
                    Some(insert_file(
                        tx,
                        collection_id,
                        file,
                        Some((lease.source, path, version)),
                        now,
                    )?)
                }
                SourceChange::Replace {
                    file_row_id,
                    version,
                    file,
                } => {
                    let readers = readers_to_column(file.readers.as_deref());
                    lock_owned_for_readers(tx, lease.source, *file_row_id, readers.as_deref())?;
                    let size = to_i64(file.size, "file size")?;
                    remember_blobs(tx, &[(file.sha256.as_str(), size, file.mime.as_str())], now)?;
                    tx.execute(
                        "UPDATE kb_files SET blob = $2, size = $3, format = $4, mime = $5, \
                         source_version = $6, warnings = '', pages = NULL, \
                         pages_without_text = NULL WHERE id = $1",
                        &[
                            file_row_id,
                            &file.sha256,
                            &size,
                            &file.format,
                            &file.mime,
                            version,
                        ],
                    )
                    .map_err(db_err)?;
                    move_to_readers(tx, *file_row_id, readers.as_deref(), now)?;
                    requeue_file(tx, *file_row_id, now)?;
                    enqueue_cleanup_tx(tx)?;
                    Some(*file_row_id)
                }
                SourceChange::Touch {
                    file_row_id,
                    version,
                    readers,
                } => {
                    let readers = readers_to_column(*readers);
                    lock_owned_for_readers(tx, lease.source, *file_row_id, readers.as_deref())?;
                    tx.execute(
                        "UPDATE kb_files SET source_version = $2 WHERE id = $1",
                        &[file_row_id, version],
                    )
                    .map_err(db_err)?;
                    move_to_readers(tx, *file_row_id, readers.as_deref(), now)?;
                    Some(*file_row_id)
                }
                SourceChange::Rename {
                    file_row_id,
                    path,
                    name,
                    version,
                    readers,
                } => {
                    tx.query_opt(
                        "SELECT 1 FROM collections WHERE id = $1 FOR NO KEY UPDATE",
                        &[&collection_id],
                    )
                    .map_err(db_err)?;
                    lock_owned(tx, lease.source, *file_row_id)?;
                    // Its name follows the path; the old name is free first.
                    tx.execute(
                        "UPDATE kb_files SET name = 'renaming:' || uid WHERE id = $1",
                        &[file_row_id],
                    )
                    .map_err(db_err)?;
                    let free = free_file_name(
                        tx,
                        collection_id,
                        name,
                        readers_to_column(*readers).as_deref(),
                    )?;
                    tx.execute(
                        "UPDATE kb_files SET name = $2, original_name = $3, source_path = $4, \
                         source_version = $5, updated_at = $6, readers = $7 WHERE id = $1",
                        &[
                            file_row_id,
                            &free,
                            name,
                            path,
                            version,
                            &now,
                            &readers_to_column(*readers),
                        ],
                    )
                    .map_err(db_err)?;
                    // Its searchable document moves too (the feed tells the indexes).
                    tx.execute(
                        "UPDATE documents SET path = $2 WHERE id = \
                         (SELECT document_id FROM kb_files WHERE id = $1)",
                        &[file_row_id, &free],
                    )
                    .map_err(db_err)?;
                    Some(*file_row_id)
                }
                SourceChange::Delete { file_row_id } => {
                    lock_owned(tx, lease.source, *file_row_id)?;
                    delete_file(tx, *file_row_id)?;
                    enqueue_cleanup_tx(tx)?;
                    Some(*file_row_id)
                }
            };
            tx.execute(
                "UPDATE collections SET updated_at = $2 WHERE id = $1",
                &[&collection_id, &now],
            )
            .map_err(db_err)?;
            Ok(touched)
        })
    }

    fn start_sync_report(&self, lease: SourceLease, revision: Option<&str>) -> Result<String> {
        self.write(|tx| {
            if lease_holds(tx, lease)?.is_none() {
                return Err(Error::Conflict(
                    "another sync of this source took over".into(),
                ));
            }
            let now = quarry_core::now_millis();
            tx.execute(
                "UPDATE sync_reports SET status = 'failed', finished_at = $2, error = $3 \
                 WHERE source_id = $1 AND status = 'running'",
                &[&lease.source, &now, &SYNC_INTERRUPTED],
            )
            .map_err(db_err)?;
            let id = uuid();
            tx.execute(
                "INSERT INTO sync_reports (uid, source_id, lease_token, started_at, status, revision) \
                 VALUES ($1, $2, $3, $4, 'running', $5)",
                &[&id, &lease.source, &lease.token, &now, &revision],
            )
            .map_err(db_err)?;
            tx.execute(
                "DELETE FROM sync_reports WHERE source_id = $1 AND id NOT IN \
                 (SELECT id FROM sync_reports WHERE source_id = $1 ORDER BY id DESC LIMIT 100)",
                &[&lease.source],
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
            if lease_holds(tx, lease)?.is_none() {
                return Ok(false);
            }
            let now = quarry_core::now_millis();
            tx.execute(
                "UPDATE sync_reports SET finished_at = $2, status = $3, revision = $4, counts = $5, \
                 details = $6, error = $7 WHERE uid = $1",
                &[
                    &report.id,
                    &now,
                    &report.status,
                    &report.revision,
                    &counts,
                    &details,
                    &report.error,
                ],
            )
            .map_err(db_err)?;
            let failed = report.error.is_some();
            tx.execute(
                "UPDATE sources SET lease_owner = NULL, lease_until = NULL, last_sync_at = $2, \
                 last_success_at = CASE WHEN $3 THEN last_success_at ELSE $2 END, \
                 failures = CASE WHEN $3 THEN failures + 1 ELSE 0 END, last_error = $4, \
                 next_sync_at = CASE WHEN $3 AND $5::bigint IS NOT NULL THEN $2 + $5 \
                   WHEN interval_ms IS NULL THEN NULL ELSE $2 + interval_ms END, \
                 refused_under = $6 WHERE id = $1",
                &[
                    &lease.source,
                    &now,
                    &failed,
                    &report.error,
                    &retry_after_ms,
                    &refused_under,
                ],
            )
            .map_err(db_err)?;
            Ok(true)
        })
    }

    fn sync_reports(&self, row_id: i64, limit: usize) -> Result<Vec<SyncReport>> {
        let limit = to_i64(limit, "limit")?;
        self.conn()?
            .query(
                "SELECT r.uid, s.uid, r.started_at, r.finished_at, r.status, r.revision, r.counts, \
                 r.details, r.error, \
                 COALESCE(s.lease_token = r.lease_token AND s.lease_until >= quarry_now_ms(), false) \
                 FROM sync_reports r JOIN sources s ON s.id = r.source_id \
                 WHERE r.source_id = $1 ORDER BY r.id DESC LIMIT $2",
                &[&row_id, &limit],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| {
                let mut report = report_from_row(r)?;
                let held: bool = col(r, 9)?;
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
            if lease_holds(tx, lease)?.is_none() {
                return Ok(false);
            }
            tx.execute(
                "UPDATE sync_reports SET revision = $2, counts = $3, details = $4 \
                 WHERE uid = $1 AND status = 'running'",
                &[&report.id, &report.revision, &counts, &details],
            )
            .map_err(db_err)?;
            Ok(true)
        })
    }
}
