//! [`KnowledgeStore`] and [`JobQueue`] on SQLite.

use std::collections::HashMap;

use quarry_core::{Error, Result};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::documents::{
    UpsertDoc, drop_chunks_of, ensure_name_free, ensure_space, rename_collection_tx,
    upsert_document,
};
use crate::embed_texts::{EMBED_TEXT_COLUMNS, embed_span_row, embed_texts};
use crate::error::{conflict_or_db, db_err};
use crate::sql::{id_list, meta_column};
use crate::store::SqliteStore;
use quarry_store::{
    AddedFile, ClaimedChunks, ConvertedFile, EntryColumns, FileFilter, FileStatus, IndexWork, Job,
    JobKind, JobQueue, KbFile, KnowledgeBase, KnowledgeStore, Lease, NewKbFile, NoteMeta,
    QueueCounts, RestrictedFile, StatusCounts, StatusFilter, metadata_from_column, owner_node,
    readers_from_column, readers_to_column,
};

const KB_COLUMNS: &str = "c.id, c.uid, c.name, c.description, c.chunk_size, c.chunk_overlap, \
     c.created_at, COALESCE(c.updated_at, c.created_at), \
     (SELECT COUNT(*) FROM kb_files f WHERE f.collection_id = c.id), \
     (SELECT COUNT(*) FROM kb_files f WHERE f.collection_id = c.id AND f.status = 'pending'), \
     (SELECT COUNT(*) FROM kb_files f WHERE f.collection_id = c.id AND f.status IN ('converting', 'indexing', 'embedding')), \
     (SELECT COUNT(*) FROM kb_files f WHERE f.collection_id = c.id AND f.status = 'ready'), \
     (SELECT COUNT(*) FROM kb_files f WHERE f.collection_id = c.id AND f.status = 'failed'), \
     (SELECT COALESCE(SUM(f.size), 0) FROM kb_files f WHERE f.collection_id = c.id)";

fn kb_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KnowledgeBase> {
    let count = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
    Ok(KnowledgeBase {
        collection_id: r.get(0)?,
        id: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        name: r.get(2)?,
        description: r.get(3)?,
        chunk_size: r.get::<_, Option<i64>>(4)?.map(|v| v.max(0) as u32),
        chunk_overlap: r.get::<_, Option<i64>>(5)?.map(|v| v.max(0) as u32),
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        document_count: count(8)?,
        status_counts: StatusCounts {
            pending: count(9)?,
            processing: count(10)?,
            ready: count(11)?,
            failed: count(12)?,
        },
        total_bytes: count(13)?,
    })
}

pub(super) const FILE_COLUMNS: &str = "f.id, f.uid, f.collection_id, c.name, f.name, f.original_name, f.blob, \
     f.format, f.mime, f.size, f.status, f.error, f.pages, f.pages_without_text, f.warnings, d.docid, \
     (SELECT COUNT(*) FROM chunks k WHERE k.document_id = f.document_id), f.attempts, f.created_at, \
     f.updated_at, f.document_id, f.note_kind, f.note_title, f.note_tags, f.note_summary, f.readers, \
     f.source_id IS NOT NULL, f.meta, f.entry_key, COALESCE(f.valid_from, f.created_at), \
     f.valid_to, f.expires_at, f.valid_until, \
     (SELECT s.uid FROM kb_files s WHERE s.id = f.superseded_by), \
     (SELECT p.uid FROM kb_files p WHERE p.superseded_by = f.id), f.provenance, \
     (SELECT group_concat(s.uid, char(10)) FROM kb_derivations x JOIN kb_files s ON s.id = x.source_id \
      WHERE x.file_id = f.id)";

pub(super) const FILE_FROM: &str = "kb_files f JOIN collections c ON c.id = f.collection_id \
     LEFT JOIN documents d ON d.id = f.document_id";

pub(super) fn file_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KbFile> {
    let status: String = r.get(10)?;
    let warnings: String = r.get(14)?;
    Ok(KbFile {
        row_id: r.get(0)?,
        id: r.get(1)?,
        collection_id: r.get(2)?,
        knowledge_base: r.get(3)?,
        file_name: r.get(4)?,
        original_name: r.get(5)?,
        sha256: r.get(6)?,
        format: r.get(7)?,
        mime: r.get(8)?,
        size: r.get::<_, i64>(9)?.max(0) as u64,
        status: FileStatus::parse(&status).unwrap_or(FileStatus::Failed),
        error: r.get(11)?,
        pages: r.get::<_, Option<i64>>(12)?.map(|p| p.max(0) as u32),
        pages_without_text: r.get(13)?,
        warnings: warnings
            .split('\n')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect(),
        docid: r.get(15)?,
        chunk_count: r.get::<_, i64>(16)?.max(0) as u64,
        attempts: r.get::<_, i64>(17)?.max(0) as u32,
        created_at: r.get(18)?,
        updated_at: r.get(19)?,
        document_id: r.get(20)?,
        note: match r.get::<_, Option<String>>(21)? {
            None => None,
            Some(kind) => Some(NoteMeta {
                kind,
                title: r.get(22)?,
                tags: r
                    .get::<_, String>(23)?
                    .split('\n')
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect(),
                summary: r.get(24)?,
            }),
        },
        readers: readers_from_column(r.get::<_, Option<String>>(25)?.as_deref()),
        synced: r.get(26)?,
        metadata: metadata_from_column(&r.get::<_, String>(27)?),
        entry: EntryColumns {
            key: r.get(28)?,
            valid_from: r.get(29)?,
            valid_to: r.get(30)?,
            expires_at: r.get(31)?,
            valid_until: r.get(32)?,
            superseded_by: r.get(33)?,
            supersedes: r.get(34)?,
            provenance: r.get(35)?,
            derived_from: r.get(36)?,
        }
        .version(),
    })
}

/// Sets a file back to `pending` and (re)queues its ingest job from scratch.
pub(super) fn requeue_file(tx: &Transaction<'_>, row_id: i64, now: i64) -> Result<()> {
    tx.execute(
        "UPDATE kb_files SET status = 'pending', error = NULL, attempts = 0, updated_at = ?2 WHERE id = ?1",
        params![row_id, now],
    )
    .map_err(db_err)?;
    tx.execute(
        "INSERT INTO jobs (kind, file_id, status, not_before, created_at, updated_at) \
         VALUES ('ingest', ?1, 'enqueued', ?2, ?2, ?2) \
         ON CONFLICT (file_id) DO UPDATE SET status = 'enqueued', attempts = 0, not_before = ?2, \
         lease_owner = NULL, lease_until = NULL, error = NULL, updated_at = ?2",
        params![row_id, now],
    )
    .map_err(db_err)?;
    Ok(())
}

/// Where a synced file came from: (source row, path, version).
pub(super) type FileOrigin<'a> = (i64, &'a str, &'a str);

/// Stores a new file under a free name, remembers its blob and queues its ingest job;
/// returns its row id. `origin` is set for a file a source synced.
pub(super) fn insert_file(
    tx: &Transaction<'_>,
    collection_id: i64,
    f: &NewKbFile,
    origin: Option<FileOrigin<'_>>,
    now: i64,
) -> Result<i64> {
    remember_blob(tx, &f.sha256, f.size, &f.mime, now)?;
    let readers = readers_to_column(f.readers.as_deref());
    let name = free_file_name(tx, collection_id, &f.original_name, readers.as_deref())?;
    tx.execute(
        "INSERT INTO kb_files (uid, collection_id, name, original_name, blob, format, mime, size, \
         status, created_at, updated_at, note_kind, note_title, note_tags, source_id, source_path, \
         source_version, readers, meta) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?9, \
         ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        params![
            uuid(),
            collection_id,
            name,
            f.original_name,
            f.sha256,
            f.format,
            f.mime,
            f.size as i64,
            now,
            f.note.as_ref().map(|n| n.kind.as_str()),
            f.note.as_ref().and_then(|n| n.title.as_deref()),
            f.note
                .as_ref()
                .map(|n| n.tags.join("\n"))
                .unwrap_or_default(),
            origin.map(|o| o.0),
            origin.map(|o| o.1),
            origin.map(|o| o.2),
            readers,
            meta_column(&f.meta),
        ],
    )
    .map_err(db_err)?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO jobs (kind, file_id, status, not_before, created_at, updated_at) \
         VALUES ('ingest', ?1, 'enqueued', ?2, ?2, ?2)",
        params![id, now],
    )
    .map_err(db_err)?;
    Ok(id)
}

pub(super) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A knowledge base by public id or name (inside a write transaction or on the connection).
fn kb_by_key(conn: &Connection, space: &str, key: &str) -> Result<Option<KnowledgeBase>> {
    conn.query_row(
        &format!(
            "SELECT {KB_COLUMNS} FROM collections c WHERE c.space = ?1 AND c.kind = 'knowledge_base' \
             AND (c.uid = ?2 OR c.name = ?2) ORDER BY (c.uid = ?2) DESC LIMIT 1"
        ),
        params![space, key],
        kb_from_row,
    )
    .optional()
    .map_err(db_err)
}

pub(super) fn file_by_row(conn: &Connection, row_id: i64) -> Result<Option<KbFile>> {
    conn.query_row(
        &format!("SELECT {FILE_COLUMNS} FROM {FILE_FROM} WHERE f.id = ?1"),
        [row_id],
        file_from_row,
    )
    .optional()
    .map_err(db_err)
}

/// `report.pdf`, then `report (2).pdf`, `report (3).pdf`, … — the first name not taken in
/// the knowledge base among files with `readers` (their column form): a name names one file
/// per set of readers, so a file of other readers (maybe hidden from the writer) never moves
/// the name a writer gets.
pub(super) fn free_file_name(
    tx: &Transaction<'_>,
    collection_id: i64,
    wanted: &str,
    readers: Option<&str>,
) -> Result<String> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM kb_files WHERE collection_id = ?1 AND name = ?2 \
             AND COALESCE(readers, '') = COALESCE(?3, ''))",
        )
        .map_err(db_err)?;
    let (stem, ext) = match wanted.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s, format!(".{e}")),
        _ => (wanted, String::new()),
    };
    for n in 1.. {
        let candidate = if n == 1 {
            wanted.to_owned()
        } else {
            format!("{stem} ({n}){ext}")
        };
        let taken: bool = stmt
            .query_row(params![collection_id, candidate, readers], |r| r.get(0))
            .map_err(db_err)?;
        if !taken {
            return Ok(candidate);
        }
    }
    Err(Error::Storage("no free file name".into()))
}

/// Gives a file other readers (their column form) and the name it had if that is free among
/// them, else the next free one (its document follows: the feed tells the indexes); returns
/// whether the file exists.
pub(super) fn move_to_readers(
    tx: &Transaction<'_>,
    row_id: i64,
    readers: Option<&str>,
    now: i64,
) -> Result<bool> {
    let Some((collection_id, name, before)): Option<(i64, String, Option<String>)> = tx
        .query_row(
            "SELECT collection_id, name, readers FROM kb_files WHERE id = ?1",
            [row_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(db_err)?
    else {
        return Ok(false);
    };
    if before.as_deref() == readers {
        return Ok(true);
    }
    // Its own name is free first.
    tx.execute(
        "UPDATE kb_files SET name = 'renaming:' || uid WHERE id = ?1",
        [row_id],
    )
    .map_err(db_err)?;
    let free = free_file_name(tx, collection_id, &name, readers)?;
    // The name is free among these readers: a conflict is the bytes or the entry key.
    tx.execute(
        "UPDATE kb_files SET name = ?2, readers = ?3, updated_at = ?4 WHERE id = ?1",
        params![row_id, free, readers, now],
    )
    .map_err(|e| conflict_or_db(e, || quarry_store::SAME_BYTES_SAME_READERS.into()))?;
    if free != name {
        tx.execute(
            "UPDATE documents SET path = ?2 WHERE id = (SELECT document_id FROM kb_files WHERE id = ?1)",
            params![row_id, free],
        )
        .map_err(db_err)?;
    }
    Ok(true)
}

pub(super) fn remember_blob(
    tx: &Transaction<'_>,
    hash: &str,
    size: u64,
    mime: &str,
    now: i64,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO blobs (hash, size, mime, created_at) VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![hash, size as i64, mime, now]))
    .map_err(db_err)?;
    Ok(())
}

/// Enqueues a cleanup job unless one is already waiting.
pub(super) fn enqueue_cleanup_tx(tx: &Transaction<'_>) -> Result<()> {
    let now = quarry_core::now_millis();
    tx.execute(
        "INSERT INTO jobs (kind, status, not_before, created_at, updated_at) \
         SELECT 'cleanup', 'enqueued', ?1, ?1, ?1 \
         WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE kind = 'cleanup' AND status = 'enqueued')",
        [now],
    )
    .map_err(db_err)?;
    Ok(())
}

/// Removes one file's document (the feed records it for the derived indexes), images, job
/// and row.
pub(super) fn delete_file_tx(tx: &Transaction<'_>, row_id: i64) -> Result<()> {
    let document: Option<Option<i64>> = tx
        .query_row(
            "SELECT document_id FROM kb_files WHERE id = ?1",
            [row_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    if let Some(Some(doc)) = document {
        drop_chunks_of(tx, doc)?;
        tx.execute("DELETE FROM documents WHERE id = ?1", [doc])
            .map_err(db_err)?;
    }
    tx.execute("DELETE FROM file_images WHERE file_id = ?1", [row_id])
        .map_err(db_err)?;
    tx.execute("DELETE FROM page_sources WHERE page_id = ?1", [row_id])
        .map_err(db_err)?;
    tx.execute("DELETE FROM jobs WHERE file_id = ?1", [row_id])
        .map_err(db_err)?;
    tx.execute("DELETE FROM kb_files WHERE id = ?1", [row_id])
        .map_err(db_err)?;
    Ok(())
}

/// Removes every file of a collection (its documents are removed by the caller); returns
/// how many went.
pub(super) fn delete_files_of_collection(tx: &Transaction<'_>, collection_id: i64) -> Result<u64> {
    // Its sources and their reports go with it.
    tx.execute(
        "DELETE FROM sync_reports WHERE source_id IN (SELECT id FROM sources WHERE collection_id = ?1)",
        [collection_id],
    )
    .map_err(db_err)?;
    tx.execute(
        "DELETE FROM sources WHERE collection_id = ?1",
        [collection_id],
    )
    .map_err(db_err)?;
    tx.execute(
        "DELETE FROM file_images WHERE file_id IN (SELECT id FROM kb_files WHERE collection_id = ?1)",
        [collection_id],
    )
    .map_err(db_err)?;
    tx.execute(
        "DELETE FROM jobs WHERE file_id IN (SELECT id FROM kb_files WHERE collection_id = ?1)",
        [collection_id],
    )
    .map_err(db_err)?;
    // Its entries' derivations and history go with it.
    tx.execute(
        "DELETE FROM kb_derivations WHERE file_id IN (SELECT id FROM kb_files WHERE collection_id = ?1) \
         OR source_id IN (SELECT id FROM kb_files WHERE collection_id = ?1)",
        [collection_id],
    )
    .map_err(db_err)?;
    tx.execute(
        "DELETE FROM kb_history WHERE collection_id = ?1",
        [collection_id],
    )
    .map_err(db_err)?;
    tx.execute(
        "DELETE FROM page_sources WHERE page_id IN (SELECT id FROM kb_files WHERE collection_id = ?1)",
        [collection_id],
    )
    .map_err(db_err)?;
    let n = tx
        .execute(
            "DELETE FROM kb_files WHERE collection_id = ?1",
            [collection_id],
        )
        .map_err(db_err)?;
    Ok(n as u64)
}

impl KnowledgeStore for SqliteStore {
    fn create_knowledge_base(
        &self,
        space: &str,
        name: &str,
        description: &str,
        chunking: Option<(u32, u32)>,
    ) -> Result<KnowledgeBase> {
        self.write(|tx| {
            ensure_space(tx, space)?;
            ensure_name_free(tx, space, name)?;
            let now = quarry_core::now_millis();
            tx.execute(
                "INSERT INTO collections (space, name, kind, path, pattern, created_at, uid, description, \
                 chunk_size, chunk_overlap, updated_at) \
                 VALUES (?1, ?2, 'knowledge_base', '', '', ?3, ?4, ?5, ?6, ?7, ?3)",
                params![
                    space,
                    name,
                    now,
                    uuid(),
                    description,
                    chunking.map(|c| c.0),
                    chunking.map(|c| c.1)
                ],
            )
            .map_err(db_err)?;
            kb_by_key(tx, space, name)?
                .ok_or_else(|| Error::Storage("knowledge base vanished after insert".into()))
        })
    }

    fn knowledge_bases(&self, space: &str) -> Result<Vec<KnowledgeBase>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {KB_COLUMNS} FROM collections c WHERE c.space = ?1 AND c.kind = 'knowledge_base' ORDER BY c.name"
            ))
            .map_err(db_err)?;
        let rows = stmt.query_map([space], kb_from_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn knowledge_base(&self, space: &str, key: &str) -> Result<Option<KnowledgeBase>> {
        kb_by_key(&self.conn(), space, key)
    }

    fn update_knowledge_base(
        &self,
        space: &str,
        key: &str,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<KnowledgeBase> {
        self.write(|tx| {
            let Some(kb) = kb_by_key(tx, space, key)? else {
                return Err(Error::NotFound(format!("knowledge base '{key}' not found")));
            };
            let now = quarry_core::now_millis();
            if let Some(new) = name.filter(|n| *n != kb.name) {
                rename_collection_tx(tx, space, &kb.name, new)?;
            }
            if let Some(d) = description {
                tx.execute(
                    "UPDATE collections SET description = ?2 WHERE id = ?1",
                    params![kb.collection_id, d],
                )
                .map_err(db_err)?;
            }
            tx.execute(
                "UPDATE collections SET updated_at = ?2 WHERE id = ?1",
                params![kb.collection_id, now],
            )
            .map_err(db_err)?;
            kb_by_key(tx, space, &kb.id)?
                .ok_or_else(|| Error::Storage("knowledge base vanished after update".into()))
        })
    }

    fn add_files(&self, collection_id: i64, files: &[NewKbFile]) -> Result<Vec<AddedFile>> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let mut out = Vec::with_capacity(files.len());
            for f in files {
                let existing: Option<i64> = tx
                    .query_row(
                        "SELECT id FROM kb_files WHERE collection_id = ?1 AND blob = ?2 AND source_id IS NULL \
                         AND superseded_by IS NULL AND readers IS ?3",
                        params![
                            collection_id,
                            f.sha256,
                            readers_to_column(f.readers.as_deref())
                        ],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(db_err)?;
                if let Some(id) = existing {
                    let file = file_by_row(tx, id)?
                        .ok_or_else(|| Error::Storage("file vanished".into()))?;
                    out.push(AddedFile::Duplicate { file });
                    continue;
                }
                let id = insert_file(tx, collection_id, f, None, now)?;
                let file =
                    file_by_row(tx, id)?.ok_or_else(|| Error::Storage("file vanished".into()))?;
                out.push(AddedFile::Added { file });
            }
            tx.execute(
                "UPDATE collections SET updated_at = ?2 WHERE id = ?1",
                params![collection_id, now],
            )
            .map_err(db_err)?;
            Ok(out)
        })
    }

    fn kb_files(&self, collection_id: i64, filter: &FileFilter) -> Result<Vec<KbFile>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {FILE_COLUMNS} FROM {FILE_FROM} WHERE f.collection_id = ?1 \
                 AND (?2 IS NULL OR f.status IN (?2, ?4, ?5)) \
                 AND (?3 IS NULL OR instr(lower(f.name), lower(?3)) > 0) ORDER BY f.id"
            ))
            .map_err(db_err)?;
        let statuses = filter.status.map(StatusFilter::stored);
        let rows = stmt
            .query_map(
                params![
                    collection_id,
                    statuses.map(|s| s[0]),
                    filter.name.as_deref(),
                    statuses.map(|s| s[1]),
                    statuses.map(|s| s[2]),
                ],
                file_from_row,
            )
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn kb_files_by_key(&self, collection_id: i64, key: &str) -> Result<Vec<KbFile>> {
        let conn = self.conn();
        // By public id first: a name that happens to be another file's id never hides it.
        // Two lookups, each on its own index (`uid`, `kb_files_name`): one `uid = ? OR
        // name = ?` scans the knowledge base's files.
        let by_id = conn
            .prepare_cached(&format!(
                "SELECT {FILE_COLUMNS} FROM {FILE_FROM} WHERE f.uid = ?2 AND f.collection_id = ?1"
            ))
            .map_err(db_err)?
            .query_row(params![collection_id, key], file_from_row)
            .optional()
            .map_err(db_err)?;
        if let Some(file) = by_id {
            return Ok(vec![file]);
        }
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {FILE_COLUMNS} FROM {FILE_FROM} WHERE f.collection_id = ?1 AND f.name = ?2 \
                 ORDER BY f.id"
            ))
            .map_err(db_err)?;
        let files = stmt
            .query_map(params![collection_id, key], file_from_row)
            .map_err(db_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err)?;
        Ok(files)
    }

    fn kb_file_by_row(&self, row_id: i64) -> Result<Option<KbFile>> {
        file_by_row(&self.conn(), row_id)
    }

    fn kb_file_ids(&self, document_ids: &[i64]) -> Result<HashMap<i64, String>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT uid FROM kb_files WHERE document_id = ?1")
            .map_err(db_err)?;
        let mut out = HashMap::with_capacity(document_ids.len());
        for &id in document_ids {
            if let Some(uid) = stmt
                .query_row([id], |r| r.get::<_, String>(0))
                .optional()
                .map_err(db_err)?
            {
                out.insert(id, uid);
            }
        }
        Ok(out)
    }

    fn restricted_files(&self, collection_ids: &[i64]) -> Result<Vec<RestrictedFile>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, collection_id, document_id, status, size, readers FROM kb_files \
                 WHERE collection_id = ?1 AND readers IS NOT NULL",
            )
            .map_err(db_err)?;
        let mut out = Vec::new();
        for cid in collection_ids {
            let rows = stmt
                .query_map([cid], |r| {
                    let status: String = r.get(3)?;
                    Ok(RestrictedFile {
                        row_id: r.get(0)?,
                        collection_id: r.get(1)?,
                        document_id: r.get(2)?,
                        status: FileStatus::parse(&status).unwrap_or(FileStatus::Failed),
                        size: r.get::<_, i64>(4)?.max(0) as u64,
                        readers: readers_from_column(r.get::<_, Option<String>>(5)?.as_deref())
                            .unwrap_or_default(),
                    })
                })
                .map_err(db_err)?;
            for row in rows {
                out.push(row.map_err(db_err)?);
            }
        }
        Ok(out)
    }

    fn set_file_readers(
        &self,
        collection_id: i64,
        row_id: i64,
        readers: Option<&[String]>,
    ) -> Result<bool> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let here: bool = tx
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM kb_files WHERE id = ?1 AND collection_id = ?2)",
                    params![row_id, collection_id],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if !here {
                return Ok(false);
            }
            move_to_readers(tx, row_id, readers_to_column(readers).as_deref(), now)
        })
    }

    fn delete_kb_file(&self, collection_id: i64, row_id: i64) -> Result<()> {
        self.write(|tx| {
            let found: bool = tx
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM kb_files WHERE id = ?1 AND collection_id = ?2)",
                    params![row_id, collection_id],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if !found {
                return Err(Error::NotFound("document not found".into()));
            }
            delete_file_tx(tx, row_id)?;
            enqueue_cleanup_tx(tx)
        })
    }

    fn update_note(
        &self,
        collection_id: i64,
        row_id: i64,
        content: Option<(&str, u64)>,
        title: Option<Option<&str>>,
        tags: Option<&[String]>,
    ) -> Result<KbFile> {
        self.write(|tx| {
            let file = file_by_row(tx, row_id)?
                .filter(|f| f.collection_id == collection_id && f.note.is_some())
                .ok_or_else(|| Error::NotFound("knowledge not found".into()))?;
            let now = quarry_core::now_millis();
            if let Some(t) = title {
                tx.execute(
                    "UPDATE kb_files SET note_title = ?2, updated_at = ?3 WHERE id = ?1",
                    params![row_id, t, now],
                )
                .map_err(db_err)?;
            }
            if let Some(tags) = tags {
                tx.execute(
                    "UPDATE kb_files SET note_tags = ?2, updated_at = ?3 WHERE id = ?1",
                    params![row_id, tags.join("\n"), now],
                )
                .map_err(db_err)?;
            }
            // New content, or a new title (the document's title), is converted again.
            if content.is_some() || title.is_some() {
                if let Some((sha, size)) = content {
                    remember_blob(tx, sha, size, &file.mime, now)?;
                    tx.execute(
                        "UPDATE kb_files SET blob = ?2, size = ?3 WHERE id = ?1",
                        params![row_id, sha, size as i64],
                    )
                    .map_err(db_err)?;
                }
                requeue_file(tx, row_id, now)?;
            }
            file_by_row(tx, row_id)?.ok_or_else(|| Error::Storage("file vanished".into()))
        })
    }

    fn add_file_warning(&self, lease: Lease, row_id: i64, warning: &str) -> Result<()> {
        let warning = warning.replace('\n', " ");
        self.write(|tx| {
            if !lease_holds(tx, Some(lease))? {
                return Ok(());
            }
            tx.execute(
                "UPDATE kb_files SET warnings = CASE WHEN warnings = '' THEN ?2 \
                 ELSE warnings || char(10) || ?2 END WHERE id = ?1",
                params![row_id, warning],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn annotate_note(
        &self,
        lease: Lease,
        row_id: i64,
        title: Option<&str>,
        tags: &[String],
        summary: Option<&str>,
    ) -> Result<()> {
        self.write(|tx| {
            if !lease_holds(tx, Some(lease))? {
                return Ok(());
            }
            tx.execute(
                "UPDATE kb_files SET note_title = COALESCE(note_title, ?2), \
                 note_tags = CASE WHEN note_tags = '' THEN ?3 ELSE note_tags END, \
                 note_summary = COALESCE(?4, note_summary) WHERE id = ?1 AND note_kind IS NOT NULL",
                params![row_id, title, tags.join("\n"), summary],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn retry_kb_file(&self, collection_id: i64, row_id: i64) -> Result<KbFile> {
        self.write(|tx| {
            let file = file_by_row(tx, row_id)?
                .filter(|f| f.collection_id == collection_id)
                .ok_or_else(|| Error::NotFound("document not found".into()))?;
            if file.status != FileStatus::Failed {
                return Err(Error::Conflict(format!(
                    "document '{}' is {}, not failed: only failed documents are retried",
                    file.file_name,
                    file.status.as_str()
                )));
            }
            let now = quarry_core::now_millis();
            requeue_file(tx, row_id, now)?;
            file_by_row(tx, row_id)?.ok_or_else(|| Error::Storage("file vanished".into()))
        })
    }

    fn mark_embedded(&self, collection_id: i64, model: &str) -> Result<u64> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE kb_files SET status = 'ready', error = NULL, updated_at = ?3 \
                     WHERE collection_id = ?1 AND status = 'embedding' AND document_id IS NOT NULL \
                     AND EXISTS (SELECT 1 FROM documents d WHERE d.id = kb_files.document_id \
                                 AND d.chunked_hash = d.hash) \
                     AND NOT EXISTS (SELECT 1 FROM chunks k WHERE k.document_id = kb_files.document_id \
                                     AND (k.ann_dirty = 1 OR NOT EXISTS (SELECT 1 FROM embeddings e \
                                          WHERE e.model = ?2 AND e.hash = k.hash)))",
                    params![collection_id, model, quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            Ok(n as u64)
        })
    }

    fn set_file_status(
        &self,
        lease: Option<Lease>,
        row_id: i64,
        status: FileStatus,
        error: Option<&str>,
    ) -> Result<bool> {
        self.write(|tx| {
            if !lease_holds(tx, lease)? {
                return Ok(false);
            }
            let n = tx
                .execute(
                    "UPDATE kb_files SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1",
                    params![row_id, status.as_str(), error, quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn file_converted(
        &self,
        lease: Option<Lease>,
        row_id: i64,
        converted: ConvertedFile,
    ) -> Result<Option<IndexWork>> {
        self.write(|tx| {
            if !lease_holds(tx, lease)? {
                return Ok(None);
            }
            let Some(file) = file_by_row(tx, row_id)? else {
                return Ok(None);
            };
            let now = quarry_core::now_millis();
            let doc = upsert_document(
                tx,
                file.collection_id,
                UpsertDoc {
                    path: file.file_name.clone(),
                    title: converted.title,
                    hash: file.sha256.clone(),
                    size: file.size,
                    stamp: 0,
                    body: converted.markdown,
                    pages: &converted.pages,
                    furniture: &converted.furniture,
                    meta: &converted.meta,
                    kb_file: Some(row_id),
                },
                now,
            )?;
            tx.execute("DELETE FROM file_images WHERE file_id = ?1", [row_id])
                .map_err(db_err)?;
            for (hash, size, mime) in &converted.images {
                remember_blob(tx, hash, *size, mime, now)?;
                tx.execute(
                    "INSERT OR IGNORE INTO file_images (file_id, hash) VALUES (?1, ?2)",
                    params![row_id, hash],
                )
                .map_err(db_err)?;
            }
            tx.execute(
                "UPDATE kb_files SET status = 'indexing', error = NULL, document_id = ?2, pages = ?3, \
                 pages_without_text = ?4, warnings = ?5, updated_at = ?6 WHERE id = ?1",
                params![
                    row_id,
                    doc.id,
                    converted.page_count,
                    converted.pages_without_text,
                    converted.warnings.join("\n"),
                    now
                ],
            )
            .map_err(db_err)?;
            Ok(Some(IndexWork {
                upserts: vec![doc],
                deletes: Vec::new(),
            }))
        })
    }

    fn blob_visible(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        hidden_files: &[i64],
        sha256: &str,
    ) -> Result<Option<(u64, String)>> {
        let conn = self.conn();
        let allowed = collections.map(id_list);
        let hidden = id_list(hidden_files);
        conn.query_row(
            "SELECT b.size, b.mime FROM blobs b WHERE b.hash = ?2 AND ( \
               EXISTS (SELECT 1 FROM kb_files f JOIN collections c ON c.id = f.collection_id \
                       WHERE f.blob = b.hash AND c.space = ?1 \
                       AND (?3 IS NULL OR c.id IN (SELECT value FROM json_each(?3))) \
                       AND f.id NOT IN (SELECT value FROM json_each(?4))) \
               OR EXISTS (SELECT 1 FROM file_images i JOIN kb_files f ON f.id = i.file_id \
                          JOIN collections c ON c.id = f.collection_id WHERE i.hash = b.hash AND c.space = ?1 \
                          AND (?3 IS NULL OR c.id IN (SELECT value FROM json_each(?3))) \
                          AND f.id NOT IN (SELECT value FROM json_each(?4))))",
            params![space, sha256, allowed, hidden],
            |r| Ok((r.get::<_, i64>(0)?.max(0) as u64, r.get(1)?)),
        )
        .optional()
        .map_err(db_err)
    }

    fn orphan_blobs(&self, limit: usize) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT b.hash FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM kb_files f WHERE f.blob = b.hash) \
                 AND NOT EXISTS (SELECT 1 FROM file_images i WHERE i.hash = b.hash) LIMIT ?1",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([limit as i64], |r| r.get(0))
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
            .map_err(db_err)
    }

    fn blob_known(&self, sha256: &str) -> Result<bool> {
        let conn = self.conn();
        conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM blobs WHERE hash = ?1)",
            [sha256],
            |r| r.get(0),
        )
        .map_err(db_err)
    }

    fn known_blobs(&self, hashes: &[String]) -> Result<std::collections::HashSet<String>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT hash FROM blobs WHERE hash IN (SELECT value FROM json_each(?1))",
            )
            .map_err(db_err)?;
        let list = serde_json::to_string(hashes).map_err(|e| Error::storage(&e))?;
        let rows = stmt
            .query_map([list], |r| r.get::<_, String>(0))
            .map_err(db_err)?;
        rows.collect::<std::result::Result<_, _>>().map_err(db_err)
    }

    fn forget_blobs(&self, hashes: &[String]) -> Result<()> {
        self.write(|tx| {
            let mut stmt = tx
                .prepare_cached(
                    "DELETE FROM blobs WHERE hash = ?1 \
                     AND NOT EXISTS (SELECT 1 FROM kb_files f WHERE f.blob = ?1) \
                     AND NOT EXISTS (SELECT 1 FROM file_images i WHERE i.hash = ?1)",
                )
                .map_err(db_err)?;
            for h in hashes {
                stmt.execute([h]).map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn idempotent_answer(
        &self,
        scope: &str,
        key: &str,
        since: i64,
    ) -> Result<Option<(String, String)>> {
        self.conn()
            .prepare_cached(
                "SELECT request, response FROM idempotency_keys \
                 WHERE scope = ?1 AND key = ?2 AND created_at >= ?3",
            )
            .map_err(db_err)?
            .query_row(params![scope, key, since], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(db_err)
    }

    fn record_idempotent_answer(
        &self,
        scope: &str,
        key: &str,
        request: &str,
        response: &str,
        now: i64,
        since: i64,
    ) -> Result<(String, String)> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM idempotency_keys WHERE created_at < ?1",
                [since],
            )
            .map_err(db_err)?;
            tx.execute(
                "INSERT OR IGNORE INTO idempotency_keys (scope, key, request, response, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![scope, key, request, response, now],
            )
            .map_err(db_err)?;
            tx.query_row(
                "SELECT request, response FROM idempotency_keys WHERE scope = ?1 AND key = ?2",
                params![scope, key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(db_err)
        })
    }
}

impl JobQueue for SqliteStore {
    fn claim_job(&self, owner: &str, lease_ms: i64) -> Result<Option<Job>> {
        self.write(|tx| {
            // The database's clock is this machine's: every worker of this data directory
            // runs here.
            let now = quarry_core::now_millis();
            type Row = (i64, String, Option<i64>, i64, bool, Option<i64>);
            // Uploads first: an embed job is taken only when no ingest job is runnable, and
            // only while no other embed job of this node holds a live lease, so one embedding
            // at a time leaves the node's other workers to conversions. (An owner of the node
            // is the node itself or starts with `node:`; node names end in a start time, so
            // no other node's name has this one as a prefix.)
            let node = owner_node(owner);
            let row: Option<Row> = tx
                .query_row(
                    "SELECT id, kind, file_id, attempts, status = 'processing', collection_id FROM jobs j \
                     WHERE ((status = 'enqueued' AND not_before <= ?1) \
                        OR (status = 'processing' AND lease_until < ?1)) \
                       AND (kind != 'embed' OR NOT EXISTS (SELECT 1 FROM jobs o WHERE o.kind = 'embed' \
                            AND o.status = 'processing' AND o.lease_until >= ?1 AND o.id != j.id \
                            AND (o.lease_owner = ?2 OR substr(o.lease_owner, 1, length(?2) + 1) = ?2 || ':'))) \
                     ORDER BY CASE kind WHEN 'cleanup' THEN 1 WHEN 'embed' THEN 2 ELSE 0 END, id LIMIT 1",
                    params![now, node],
                    |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                        ))
                    },
                )
                .optional()
                .map_err(db_err)?;
            let Some((id, kind, file_id, mut attempts, interrupted, collection_id)) = row else {
                return Ok(None);
            };
            // Taking over a lapsed lease means the last attempt ended without an outcome (its
            // worker died or was killed): it counts, so a file that kills workers is not
            // retried forever.
            attempts += i64::from(interrupted);
            let token: i64 = tx
                .query_row(
                    "UPDATE jobs SET status = 'processing', lease_owner = ?2, lease_until = ?3, \
                     updated_at = ?4, attempts = ?5, lease_token = lease_token + 1 WHERE id = ?1 \
                     RETURNING lease_token",
                    params![id, owner, now + lease_ms, now, attempts],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            let Some(kind) = JobKind::parse(&kind) else {
                // A job kind from a newer quarry: leave it for that version.
                tx.execute(
                    "UPDATE jobs SET status = 'failed', error = 'unknown job kind' WHERE id = ?1",
                    [id],
                )
                .map_err(db_err)?;
                return Ok(None);
            };
            Ok(Some(Job {
                id,
                token,
                kind,
                file_id,
                collection_id,
                attempts: attempts.max(0) as u32,
                interrupted,
            }))
        })
    }

    fn renew_job(&self, lease: Lease, lease_ms: i64) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE jobs SET lease_until = ?3 WHERE id = ?1 AND lease_token = ?2 \
                     AND status = 'processing'",
                    params![lease.job, lease.token, quarry_core::now_millis() + lease_ms],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn claim_embed_chunks(
        &self,
        lease: Lease,
        space: &str,
        collection_id: i64,
        model: &str,
        limit: usize,
    ) -> Result<Option<ClaimedChunks>> {
        self.write(|tx| {
            if !lease_holds(tx, Some(lease))? {
                return Ok(None);
            }
            let now = quarry_core::now_millis();
            // This job's earlier claims, and those of jobs that ended, go.
            tx.execute(
                "DELETE FROM embed_claims WHERE job_id = ?1 \
                 OR job_id NOT IN (SELECT id FROM jobs WHERE status = 'processing')",
                [lease.job],
            )
            .map_err(db_err)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX - 1);
            let mut spans = {
                let mut stmt = tx
                    .prepare_cached(&format!(
                        "SELECT {EMBED_TEXT_COLUMNS} FROM chunks k JOIN documents d ON d.id = k.document_id \
                         JOIN collections c ON c.id = d.collection_id \
                         WHERE c.space = ?1 AND d.collection_id = ?2 \
                         AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = ?3 AND e.hash = k.hash) \
                         AND NOT EXISTS (SELECT 1 FROM embed_claims x JOIN jobs o ON o.id = x.job_id \
                             WHERE x.model = ?3 AND x.hash = k.hash AND o.status = 'processing' \
                             AND o.lease_until >= ?4) \
                         GROUP BY k.hash ORDER BY MAX(d.id) DESC, k.hash LIMIT ?5"
                    ))
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map(
                        params![space, collection_id, model, now, limit + 1],
                        embed_span_row,
                    )
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)?
            };
            let more = spans.len() as i64 > limit;
            spans.truncate(limit as usize);
            let texts = embed_texts(tx, spans)?;
            let mut put = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO embed_claims (model, hash, job_id) VALUES (?1, ?2, ?3)",
                )
                .map_err(db_err)?;
            for t in &texts {
                put.execute(params![model, t.hash, lease.job])
                    .map_err(db_err)?;
            }
            Ok(Some(ClaimedChunks { texts, more }))
        })
    }

    fn complete_job(&self, lease: Lease) -> Result<bool> {
        self.write(|tx| {
            let kind: Option<String> = tx
                .query_row(
                    "DELETE FROM jobs WHERE id = ?1 AND lease_token = ?2 AND status = 'processing' \
                     RETURNING kind",
                    params![lease.job, lease.token],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            // Only embed jobs claim chunk texts: the other kinds leave at one statement.
            if kind.as_deref() == Some(JobKind::Embed.as_str()) {
                tx.execute("DELETE FROM embed_claims WHERE job_id = ?1", [lease.job])
                    .map_err(db_err)?;
            }
            Ok(kind.is_some())
        })
    }

    fn fail_job(&self, lease: Lease, error: &str, retry_after_ms: Option<i64>) -> Result<bool> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            let job: Option<(String, Option<i64>, Option<i64>, i64)> = tx
                .query_row(
                    "SELECT kind, file_id, collection_id, attempts FROM jobs \
                     WHERE id = ?1 AND lease_token = ?2 AND status = 'processing'",
                    params![lease.job, lease.token],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()
                .map_err(db_err)?;
            let Some((kind, file_id, collection_id, attempts)) = job else {
                return Ok(false);
            };
            if kind == JobKind::Embed.as_str() {
                tx.execute("DELETE FROM embed_claims WHERE job_id = ?1", [lease.job])
                    .map_err(db_err)?;
            }
            match retry_after_ms {
                Some(after) => tx.execute(
                    "UPDATE jobs SET status = 'enqueued', attempts = attempts + 1, not_before = ?2, \
                     lease_owner = NULL, lease_until = NULL, error = ?3, updated_at = ?4 WHERE id = ?1",
                    params![lease.job, now + after, error, now],
                ),
                None => tx.execute(
                    "UPDATE jobs SET status = 'failed', attempts = attempts + 1, lease_owner = NULL, \
                     lease_until = NULL, error = ?2, updated_at = ?3 WHERE id = ?1",
                    params![lease.job, error, now],
                ),
            }
            .map_err(db_err)?;
            if let Some(file) = file_id {
                let (status, error) = match retry_after_ms {
                    Some(_) => (FileStatus::Pending, format!("{error} (will retry)")),
                    None => (FileStatus::Failed, error.to_owned()),
                };
                tx.execute(
                    "UPDATE kb_files SET attempts = attempts + 1, status = ?2, error = ?3, \
                     updated_at = ?4 WHERE id = ?1",
                    params![file, status.as_str(), error, now],
                )
                .map_err(db_err)?;
            }
            if let (Some(collection), None) = (collection_id.filter(|_| kind == "embed"), retry_after_ms)
            {
                // Its documents stay keyword-searchable; `failed` with the reason says they
                // have no vectors (retrying one queues it again).
                tx.execute(
                    "UPDATE kb_files SET status = 'failed', error = ?2, attempts = ?3, updated_at = ?4 \
                     WHERE collection_id = ?1 AND status = 'embedding'",
                    params![collection, error, attempts + 1, now],
                )
                .map_err(db_err)?;
            }
            Ok(true)
        })
    }

    fn lease_owners(&self) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT DISTINCT lease_owner FROM jobs WHERE status = 'processing' AND lease_owner IS NOT NULL",
            )
            .map_err(db_err)?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
            .map_err(db_err)
    }

    fn expire_leases(&self, owners: &[String]) -> Result<u64> {
        self.write(|tx| {
            let mut n = 0;
            for o in owners {
                n += tx
                    .execute(
                        "UPDATE jobs SET lease_until = 0 WHERE status = 'processing' AND lease_owner = ?1",
                        [o],
                    )
                    .map_err(db_err)?;
            }
            Ok(n as u64)
        })
    }

    fn node_heartbeat(&self, node: &str) -> Result<()> {
        self.write(|tx| {
            tx.prepare_cached(
                "INSERT INTO nodes (id, seen_at) VALUES (?1, ?2) \
                 ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
            )
            .and_then(|mut s| s.execute(params![node, quarry_core::now_millis()]))
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn live_nodes(&self, within_ms: i64) -> Result<Vec<String>> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            tx.prepare_cached("DELETE FROM nodes WHERE seen_at < ?1")
                .and_then(|mut s| s.execute([now - NODE_ROW_KEPT_MS]))
                .map_err(db_err)?;
            tx.prepare_cached("SELECT id FROM nodes WHERE seen_at >= ?1 ORDER BY id")
                .and_then(|mut s| {
                    s.query_map([now - within_ms.max(0)], |r| r.get(0))?
                        .collect::<rusqlite::Result<Vec<String>>>()
                })
                .map_err(db_err)
        })
    }

    fn enqueue_cleanup(&self) -> Result<()> {
        self.write(enqueue_cleanup_tx)
    }

    fn enqueue_embed(&self, collection_id: i64) -> Result<()> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            tx.execute(
                "INSERT INTO jobs (kind, collection_id, status, not_before, created_at, updated_at) \
                 SELECT 'embed', ?1, 'enqueued', ?2, ?2, ?2 WHERE NOT EXISTS (SELECT 1 FROM jobs \
                 WHERE kind = 'embed' AND collection_id = ?1 AND status = 'enqueued')",
                params![collection_id, now],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn collections_to_embed(&self, model: Option<&str>, failed_within_ms: i64) -> Result<Vec<i64>> {
        let failed_since = quarry_core::now_millis().saturating_sub(failed_within_ms);
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT c.id FROM collections c WHERE EXISTS (SELECT 1 FROM documents d \
                 JOIN chunks k ON k.document_id = d.id WHERE d.collection_id = c.id \
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = ?1 AND e.hash = k.hash)) \
                 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = 'embed' \
                 AND j.collection_id = c.id AND j.status = 'failed' AND j.updated_at >= ?2) \
                 ORDER BY c.id",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![model.unwrap_or(""), failed_since], |r| r.get(0))
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<i64>>>().map_err(db_err)
    }

    fn chunk_fingerprint(&self) -> Result<(i64, i64)> {
        let conn = self.conn();
        conn.query_row(
            "SELECT COALESCE(MAX(id), 0), COUNT(*) FROM chunks",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(db_err)
    }

    fn queue_counts(&self, collections: Option<&[i64]>) -> Result<QueueCounts> {
        let conn = self.conn();
        let allowed = collections.map(id_list);
        conn.query_row(
            "SELECT COALESCE(SUM(j.status = 'enqueued'), 0), COALESCE(SUM(j.status = 'processing'), 0), \
             COALESCE(SUM(j.status = 'failed'), 0) FROM jobs j LEFT JOIN kb_files f ON f.id = j.file_id \
             WHERE ?1 IS NULL OR COALESCE(f.collection_id, j.collection_id) IN (SELECT value FROM json_each(?1))",
            [allowed],
            queue_counts_from_row,
        )
        .map_err(db_err)
    }

    fn file_queue_counts(&self, file_rows: &[i64]) -> Result<QueueCounts> {
        if file_rows.is_empty() {
            return Ok(QueueCounts::default());
        }
        self.conn()
            .query_row(
                "SELECT COALESCE(SUM(status = 'enqueued'), 0), COALESCE(SUM(status = 'processing'), 0), \
                 COALESCE(SUM(status = 'failed'), 0) FROM jobs \
                 WHERE file_id IN (SELECT value FROM json_each(?1))",
                [id_list(file_rows)],
                queue_counts_from_row,
            )
            .map_err(db_err)
    }

    fn live_embed_jobs(&self) -> Result<u64> {
        self.conn()
            .query_row(
                "SELECT count(*) FROM jobs WHERE kind = 'embed' AND status = 'processing' \
                 AND lease_until >= ?1",
                [quarry_core::now_millis()],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
            .map_err(db_err)
    }
}

/// Jobs waiting, running and failed, from a row of those three counts.
fn queue_counts_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<QueueCounts> {
    let count = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
    Ok(QueueCounts {
        enqueued: count(0)?,
        processing: count(1)?,
        failed: count(2)?,
    })
}

/// Whether a job's side effect may apply: no lease (not a job's), or the job is still
/// processing under this claim's token.
fn lease_holds(tx: &Transaction<'_>, lease: Option<Lease>) -> Result<bool> {
    let Some(lease) = lease else {
        return Ok(true);
    };
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = ?1 AND lease_token = ?2 AND status = 'processing')",
        params![lease.job, lease.token],
        |r| r.get(0),
    )
    .map_err(db_err)
}

/// How long the row of a node that stopped sending heartbeats is kept (it says nothing
/// after its leases were released; a day leaves something to look at).
const NODE_ROW_KEPT_MS: i64 = 24 * 3600 * 1000;

#[cfg(test)]
mod tests {
    use super::*;
    use quarry_store::CollectionStore;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("q.db")).unwrap();
        (dir, s)
    }

    fn file(name: &str, sha: &str) -> NewKbFile {
        NewKbFile {
            meta: Default::default(),
            original_name: name.into(),
            sha256: sha.into(),
            format: "md".into(),
            mime: "text/markdown".into(),
            size: 3,
            note: None,
            readers: None,
        }
    }

    /// Every file read names the entry that superseded it: that lookup goes through
    /// `kb_files_superseded_by` (schema v29), not a scan of every file per file read, which
    /// made a listing quadratic in the knowledge base's size.
    #[test]
    fn reading_files_looks_up_successors_by_index() {
        let (_d, s) = store();
        let conn = s.conn();
        let mut plan = conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN SELECT {FILE_COLUMNS} FROM {FILE_FROM} WHERE f.collection_id = ?1"
            ))
            .unwrap();
        let steps: Vec<String> = plan
            .query_map([1], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            steps.iter().any(|s| s.contains("kb_files_superseded_by")),
            "{steps:#?}"
        );
        assert!(!steps.iter().any(|s| s.starts_with("SCAN")), "{steps:#?}");
    }

    #[test]
    fn same_bytes_make_no_second_file_and_same_names_get_distinct_ones() {
        let (_d, s) = store();
        let kb = s.create_knowledge_base("default", "kb", "", None).unwrap();
        let out = s
            .add_files(
                kb.collection_id,
                &[
                    file("a.md", "h1"),
                    file("a.md", "h2"),
                    file("copy.md", "h1"),
                ],
            )
            .unwrap();
        assert!(matches!(&out[0], AddedFile::Added { file } if file.file_name == "a.md"));
        assert!(matches!(&out[1], AddedFile::Added { file } if file.file_name == "a (2).md"));
        assert!(
            matches!(&out[2], AddedFile::Duplicate { file } if file.file_name == "a.md"),
            "{out:?}"
        );
        let kb = s.knowledge_base("default", "kb").unwrap().unwrap();
        assert_eq!(kb.document_count, 2);
        assert_eq!(kb.status_counts.pending, 2);
    }

    #[test]
    fn deleting_a_file_removes_its_job_and_queues_a_cleanup() {
        let (_d, s) = store();
        let kb = s.create_knowledge_base("default", "kb", "", None).unwrap();
        let out = s
            .add_files(kb.collection_id, &[file("a.md", "h1")])
            .unwrap();
        let f = out[0].file().clone();
        s.delete_kb_file(kb.collection_id, f.row_id).unwrap();
        let job = s.claim_job("A", 500).unwrap().unwrap();
        assert_eq!(job.kind, JobKind::Cleanup);
        assert_eq!(s.orphan_blobs(10).unwrap(), vec!["h1".to_owned()]);
        s.forget_blobs(&["h1".to_owned()]).unwrap();
        assert!(!s.blob_known("h1").unwrap());
        // Deleting the knowledge base takes its files with it.
        s.add_files(kb.collection_id, &[file("b.md", "h2")])
            .unwrap();
        s.remove_collection("default", "kb").unwrap();
        assert_eq!(s.orphan_blobs(10).unwrap(), vec!["h2".to_owned()]);
        assert!(s.knowledge_bases("default").unwrap().is_empty());
    }

    #[test]
    fn converting_a_file_again_keeps_its_document_and_docid() {
        let (_d, s) = store();
        let kb = s.create_knowledge_base("default", "kb", "", None).unwrap();
        let out = s
            .add_files(kb.collection_id, &[file("a.md", "abcdef0123")])
            .unwrap();
        let row = out[0].file().row_id;
        let converted = || ConvertedFile {
            meta: Default::default(),
            title: "A".into(),
            markdown: "# A\n\nbody".into(),
            pages: Vec::new(),
            furniture: Vec::new(),
            page_count: None,
            pages_without_text: None,
            warnings: Vec::new(),
            images: Vec::new(),
        };
        let first = s.file_converted(None, row, converted()).unwrap().unwrap();
        let again = s.file_converted(None, row, converted()).unwrap().unwrap();
        assert_eq!(first.upserts[0].id, again.upserts[0].id);
        let f = s.kb_file_by_row(row).unwrap().unwrap();
        assert_eq!(f.docid.as_deref(), Some("#abcdef"));
        assert_eq!(f.status, FileStatus::Indexing);
    }
}
