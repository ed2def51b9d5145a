//! [`quarry_store::KnowledgeStore`] on PostgreSQL.
//!
//! Lock order, everywhere in this file and in `jobs.rs`: the file's knowledge base's row
//! (`collections`), then a file's job row, then the file's row (`kb_files`), then blob rows.
//! A worker's fenced side effect locks its job first; the user-facing writes
//! (`delete_kb_file`, `update_note`, `retry_kb_file`) lock the file's job before the file, so
//! the two never wait on each other in opposite orders. Whatever writes a document takes
//! the collection first ([`lock_file`] does): inserting one checks the collection's key, and
//! removing the collection holds it while it waits for the files' jobs.

use std::collections::HashMap;

use postgres::GenericClient;
use quarry_core::{Error, Result};
use quarry_store::{
    AddedFile, ConvertedFile, FileFilter, FileStatus, IndexWork, KbFile, KnowledgeBase,
    KnowledgeStore, Lease, NewKbFile, NoteMeta, RestrictedFile, StatusCounts, metadata_from_column,
    readers_from_column, readers_to_column,
};

use crate::error::{conflict_or_db, db_err};
use crate::pg_store::PgStore;
use crate::sql::{col, lock, to_i64};

/// The knowledge base's columns and its file counts, over `collections c`.
const KB_SELECT: &str = "SELECT c.id, c.uid, c.name, c.description, c.chunk_size, c.chunk_overlap, \
     c.created_at, COALESCE(c.updated_at, c.created_at), s.n, s.pending, s.processing, s.ready, \
     s.failed, s.bytes FROM collections c CROSS JOIN LATERAL (SELECT count(*) AS n, \
     count(*) FILTER (WHERE f.status = 'pending') AS pending, \
     count(*) FILTER (WHERE f.status IN ('converting', 'indexing', 'embedding')) AS processing, \
     count(*) FILTER (WHERE f.status = 'ready') AS ready, \
     count(*) FILTER (WHERE f.status = 'failed') AS failed, \
     COALESCE(sum(f.size), 0)::bigint AS bytes FROM kb_files f WHERE f.collection_id = c.id) s";

fn kb_from_row(r: &postgres::Row) -> Result<KnowledgeBase> {
    let count = |i: usize| -> Result<u64> { Ok(col::<i64>(r, i)?.max(0) as u64) };
    Ok(KnowledgeBase {
        collection_id: col(r, 0)?,
        id: col(r, 1)?,
        name: col(r, 2)?,
        description: col(r, 3)?,
        chunk_size: col::<Option<i32>>(r, 4)?.map(|v| v.max(0) as u32),
        chunk_overlap: col::<Option<i32>>(r, 5)?.map(|v| v.max(0) as u32),
        created_at: col(r, 6)?,
        updated_at: col(r, 7)?,
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

pub(super) const FILE_SELECT: &str = "SELECT f.id, f.uid, f.collection_id, c.name, f.name, f.original_name, \
     f.blob, f.format, f.mime, f.size, f.status, f.error, f.pages, f.pages_without_text, f.warnings, \
     d.docid, (SELECT count(*) FROM chunks k WHERE k.document_id = f.document_id), f.attempts, \
     f.created_at, f.updated_at, f.document_id, f.note_kind, f.note_title, f.note_tags, \
     f.note_summary, f.readers, f.source_id IS NOT NULL, f.meta, f.entry_key, \
     COALESCE(f.valid_from, f.created_at), f.valid_to, f.expires_at, f.valid_until, \
     (SELECT s.uid FROM kb_files s WHERE s.id = f.superseded_by), \
     (SELECT p.uid FROM kb_files p WHERE p.superseded_by = f.id), f.provenance, \
     (SELECT string_agg(s.uid, E'\\n' ORDER BY s.id) FROM kb_derivations x \
      JOIN kb_files s ON s.id = x.source_id WHERE x.file_id = f.id) \
     FROM kb_files f JOIN collections c ON c.id = f.collection_id \
     LEFT JOIN documents d ON d.id = f.document_id";

fn lines(s: &str) -> Vec<String> {
    s.split('\n')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

pub(super) fn file_from_row(r: &postgres::Row) -> Result<KbFile> {
    let status: String = col(r, 10)?;
    let warnings: String = col(r, 14)?;
    Ok(KbFile {
        row_id: col(r, 0)?,
        id: col(r, 1)?,
        collection_id: col(r, 2)?,
        knowledge_base: col(r, 3)?,
        file_name: col(r, 4)?,
        original_name: col(r, 5)?,
        sha256: col(r, 6)?,
        format: col(r, 7)?,
        mime: col(r, 8)?,
        size: col::<i64>(r, 9)?.max(0) as u64,
        status: FileStatus::parse(&status).unwrap_or(FileStatus::Failed),
        error: col(r, 11)?,
        pages: col::<Option<i32>>(r, 12)?.map(|p| p.max(0) as u32),
        pages_without_text: col(r, 13)?,
        warnings: lines(&warnings),
        docid: col(r, 15)?,
        chunk_count: col::<i64>(r, 16)?.max(0) as u64,
        attempts: col::<i32>(r, 17)?.max(0) as u32,
        created_at: col(r, 18)?,
        updated_at: col(r, 19)?,
        document_id: col(r, 20)?,
        note: match col::<Option<String>>(r, 21)? {
            None => None,
            Some(kind) => Some(NoteMeta {
                kind,
                title: col(r, 22)?,
                tags: lines(&col::<String>(r, 23)?),
                summary: col(r, 24)?,
            }),
        },
        readers: readers_from_column(col::<Option<String>>(r, 25)?.as_deref()),
        synced: col(r, 26)?,
        metadata: metadata_from_column(&col::<String>(r, 27)?),
        entry: quarry_store::EntryColumns {
            key: col(r, 28)?,
            valid_from: col(r, 29)?,
            valid_to: col(r, 30)?,
            expires_at: col(r, 31)?,
            valid_until: col(r, 32)?,
            superseded_by: col(r, 33)?,
            supersedes: col(r, 34)?,
            provenance: col(r, 35)?,
            derived_from: col(r, 36)?,
        }
        .version(),
    })
}

impl KnowledgeStore for PgStore {
    fn create_knowledge_base(
        &self,
        space: &str,
        name: &str,
        description: &str,
        chunking: Option<(u32, u32)>,
    ) -> Result<KnowledgeBase> {
        let (size, overlap) = match chunking {
            Some((s, o)) => (
                Some(to_i32(s, "chunk size")?),
                Some(to_i32(o, "chunk overlap")?),
            ),
            None => (None, None),
        };
        self.write(|tx| {
            crate::store::ensure_space(tx, space)?;
            let now = quarry_core::now_millis();
            // The unique (space, name) constraint decides a race between two nodes.
            let row = tx
                .query_one(
                    "INSERT INTO collections (space, name, kind, path, pattern, created_at, uid, \
                     description, chunk_size, chunk_overlap, updated_at) \
                     VALUES ($1, $2, 'knowledge_base', '', '', $3, $4, $5, $6, $7, $3) RETURNING id",
                    &[&space, &name, &now, &uuid(), &description, &size, &overlap],
                )
                .map_err(|e| conflict_or_db(e, || format!("collection '{name}' already exists")))?;
            kb_by_id(&mut **tx, col(&row, 0)?)?
                .ok_or_else(|| Error::Storage("knowledge base vanished after insert".into()))
        })
    }

    fn knowledge_bases(&self, space: &str) -> Result<Vec<KnowledgeBase>> {
        // `COLLATE "C"`: byte order, as SQLite's, whatever the database's collation.
        self.conn()?
            .query(
                &format!(
                    "{KB_SELECT} WHERE c.space = $1 AND c.kind = 'knowledge_base' \
                     ORDER BY c.name COLLATE \"C\""
                ),
                &[&space],
            )
            .map_err(db_err)?
            .iter()
            .map(kb_from_row)
            .collect()
    }

    fn knowledge_base(&self, space: &str, key: &str) -> Result<Option<KnowledgeBase>> {
        kb_by_key(&mut *self.conn()?, space, key)
    }

    fn update_knowledge_base(
        &self,
        space: &str,
        key: &str,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<KnowledgeBase> {
        self.write(|tx| {
            let Some(kb) = kb_by_key(&mut **tx, space, key)? else {
                return Err(Error::NotFound(format!("knowledge base '{key}' not found")));
            };
            let new_name = name.filter(|n| *n != kb.name);
            // One statement; a name taken meanwhile by another node is the unique
            // constraint's `Conflict`.
            let n = tx
                .execute(
                    "UPDATE collections SET name = COALESCE($2, name), \
                     description = COALESCE($3, description), updated_at = $4 WHERE id = $1",
                    &[
                        &kb.collection_id,
                        &new_name,
                        &description,
                        &quarry_core::now_millis(),
                    ],
                )
                .map_err(|e| {
                    conflict_or_db(e, || {
                        format!(
                            "collection '{}' already exists",
                            new_name.unwrap_or_default()
                        )
                    })
                })?;
            if n == 0 {
                return Err(Error::NotFound(format!("knowledge base '{key}' not found")));
            }
            if let Some(new) = new_name {
                // Contexts are keyed by display path, which starts with the collection name.
                tx.execute(
                    "UPDATE contexts SET path = $3 || substr(path, length($2) + 1) \
                     WHERE space = $1 AND (path = $2 OR starts_with(path, $2 || '/'))",
                    &[&space, &kb.name, &new],
                )
                .map_err(db_err)?;
            }
            kb_by_id(&mut **tx, kb.collection_id)?
                .ok_or_else(|| Error::Storage("knowledge base vanished after update".into()))
        })
    }

    fn add_files(&self, collection_id: i64, files: &[NewKbFile]) -> Result<Vec<AddedFile>> {
        self.write(|tx| {
            // Two nodes adding to one knowledge base at once would both see a name (or the
            // same bytes) free: the collection's row lock serialises them. `NO KEY` leaves
            // other transactions' foreign-key checks on the collection unblocked.
            tx.query_opt(
                "SELECT 1 FROM collections WHERE id = $1 FOR NO KEY UPDATE",
                &[&collection_id],
            )
            .map_err(db_err)?;
            let now = quarry_core::now_millis();
            let mut out = Vec::with_capacity(files.len());
            for f in files {
                let existing = tx
                    .query_opt(
                        &format!(
                            "{FILE_SELECT} WHERE f.collection_id = $1 AND f.blob = $2 AND f.source_id IS NULL \
                             AND f.superseded_by IS NULL AND f.readers IS NOT DISTINCT FROM $3"
                        ),
                        &[
                            &collection_id,
                            &f.sha256,
                            &readers_to_column(f.readers.as_deref()),
                        ],
                    )
                    .map_err(db_err)?;
                if let Some(row) = existing {
                    out.push(AddedFile::Duplicate {
                        file: file_from_row(&row)?,
                    });
                    continue;
                }
                let id = insert_file(tx, collection_id, f, None, now)?;
                let file = file_by_row(&mut **tx, id)?
                    .ok_or_else(|| Error::Storage("file vanished".into()))?;
                out.push(AddedFile::Added { file });
            }
            tx.execute(
                "UPDATE collections SET updated_at = $2 WHERE id = $1",
                &[&collection_id, &now],
            )
            .map_err(db_err)?;
            Ok(out)
        })
    }

    fn kb_files(&self, collection_id: i64, filter: &FileFilter) -> Result<Vec<KbFile>> {
        self.conn()?
            .query(
                &format!(
                    "{FILE_SELECT} WHERE f.collection_id = $1 \
                     AND ($2::text[] IS NULL OR f.status = ANY($2)) \
                     AND ($3::text IS NULL OR strpos(lower(f.name), lower($3)) > 0) ORDER BY f.id"
                ),
                &[
                    &collection_id,
                    &filter.status.map(|s| s.stored().to_vec()),
                    &filter.name.as_deref(),
                ],
            )
            .map_err(db_err)?
            .iter()
            .map(file_from_row)
            .collect()
    }

    fn kb_files_by_key(&self, collection_id: i64, key: &str) -> Result<Vec<KbFile>> {
        // By public id first: a name that happens to be another file's id never hides it.
        // Two lookups, each on its own index (`uid`, `kb_files_name`) rather than one
        // `uid = $2 OR name = $2`.
        let mut conn = self.conn()?;
        let by_id = conn
            .query_opt(
                &format!("{FILE_SELECT} WHERE f.uid = $2 AND f.collection_id = $1"),
                &[&collection_id, &key],
            )
            .map_err(db_err)?;
        if let Some(row) = by_id {
            return Ok(vec![file_from_row(&row)?]);
        }
        conn.query(
            &format!("{FILE_SELECT} WHERE f.collection_id = $1 AND f.name = $2 ORDER BY f.id"),
            &[&collection_id, &key],
        )
        .map_err(db_err)?
        .iter()
        .map(file_from_row)
        .collect()
    }

    fn kb_file_by_row(&self, row_id: i64) -> Result<Option<KbFile>> {
        file_by_row(&mut *self.conn()?, row_id)
    }

    fn kb_files_by_rows(&self, row_ids: &[i64]) -> Result<Vec<KbFile>> {
        if row_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.conn()?
            .query(&format!("{FILE_SELECT} WHERE f.id = ANY($1)"), &[&row_ids])
            .map_err(db_err)?
            .iter()
            .map(file_from_row)
            .collect()
    }

    fn kb_file_ids(&self, document_ids: &[i64]) -> Result<HashMap<i64, String>> {
        if document_ids.is_empty() {
            return Ok(HashMap::new());
        }
        self.conn()?
            .query(
                "SELECT document_id, uid FROM kb_files WHERE document_id = ANY($1)",
                &[&document_ids],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| Ok((col(r, 0)?, col(r, 1)?)))
            .collect()
    }

    fn restricted_files(&self, collection_ids: &[i64]) -> Result<Vec<RestrictedFile>> {
        if collection_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.conn()?
            .query(
                "SELECT id, collection_id, document_id, status, size, readers FROM kb_files \
                 WHERE collection_id = ANY($1) AND readers IS NOT NULL",
                &[&collection_ids],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| {
                let status: String = col(r, 3)?;
                Ok(RestrictedFile {
                    row_id: col(r, 0)?,
                    collection_id: col(r, 1)?,
                    document_id: col(r, 2)?,
                    status: FileStatus::parse(&status).unwrap_or(FileStatus::Failed),
                    size: col::<i64>(r, 4)?.max(0) as u64,
                    readers: readers_from_column(col::<Option<String>>(r, 5)?.as_deref())
                        .unwrap_or_default(),
                })
            })
            .collect()
    }

    fn set_file_readers(
        &self,
        collection_id: i64,
        row_id: i64,
        readers: Option<&[String]>,
    ) -> Result<bool> {
        self.write(|tx| {
            // The name may move (see `move_to_readers`): the collection's lock first.
            tx.query_opt(
                "SELECT 1 FROM collections WHERE id = $1 FOR NO KEY UPDATE",
                &[&collection_id],
            )
            .map_err(db_err)?;
            if lock_file(tx, row_id)?.is_none_or(|f| f.collection_id != collection_id) {
                return Ok(false);
            }
            move_to_readers(
                tx,
                row_id,
                readers_to_column(readers).as_deref(),
                quarry_core::now_millis(),
            )
        })
    }

    fn delete_kb_file(&self, collection_id: i64, row_id: i64) -> Result<()> {
        self.write(|tx| {
            // Locked first (job, then file), so a worker converting it either finished
            // (and its document is seen below) or finds the file gone.
            let file = lock_file(tx, row_id)?.filter(|f| f.collection_id == collection_id);
            if file.is_none() {
                return Err(Error::NotFound("document not found".into()));
            }
            delete_file(tx, row_id)?;
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
            let file = lock_file(tx, row_id)?
                .filter(|f| f.collection_id == collection_id && f.note.is_some())
                .ok_or_else(|| Error::NotFound("knowledge not found".into()))?;
            if content.is_none() && title.is_none() && tags.is_none() {
                return Ok(file);
            }
            let now = quarry_core::now_millis();
            let (sha, size) = match content {
                Some((sha, size)) => {
                    let size = to_i64(size, "note size")?;
                    remember_blobs(tx, &[(sha, size, file.mime.as_str())], now)?;
                    (Some(sha), Some(size))
                }
                None => (None, None),
            };
            tx.execute(
                "UPDATE kb_files SET note_title = CASE WHEN $2 THEN $3 ELSE note_title END, \
                 note_tags = COALESCE($4, note_tags), blob = COALESCE($5, blob), \
                 size = COALESCE($6, size), updated_at = $7 WHERE id = $1",
                &[
                    &row_id,
                    &title.is_some(),
                    &title.flatten(),
                    &tags.map(|t| t.join("\n")),
                    &sha,
                    &size,
                    &now,
                ],
            )
            .map_err(|e| {
                conflict_or_db(e, || {
                    "the same content is already in this knowledge base".to_owned()
                })
            })?;
            // New content, or a new title (the document's title), is converted again.
            if content.is_some() || title.is_some() {
                requeue_file(tx, row_id, now)?;
            }
            file_by_row(&mut **tx, row_id)?.ok_or_else(|| Error::Storage("file vanished".into()))
        })
    }

    fn add_file_warning(&self, lease: Lease, row_id: i64, warning: &str) -> Result<()> {
        let warning = warning.replace('\n', " ");
        self.write(|tx| {
            if !lease_holds(tx, Some(lease))? {
                return Ok(());
            }
            tx.execute(
                "UPDATE kb_files SET warnings = CASE WHEN warnings = '' THEN $2 \
                 ELSE warnings || E'\\n' || $2 END WHERE id = $1",
                &[&row_id, &warning],
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
                "UPDATE kb_files SET note_title = COALESCE(note_title, $2), \
                 note_tags = CASE WHEN note_tags = '' THEN $3 ELSE note_tags END, \
                 note_summary = COALESCE($4, note_summary) WHERE id = $1 AND note_kind IS NOT NULL",
                &[&row_id, &title, &tags.join("\n"), &summary],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn retry_kb_file(&self, collection_id: i64, row_id: i64) -> Result<KbFile> {
        self.write(|tx| {
            let file = lock_file(tx, row_id)?
                .filter(|f| f.collection_id == collection_id)
                .ok_or_else(|| Error::NotFound("document not found".into()))?;
            if file.status != FileStatus::Failed {
                return Err(Error::Conflict(format!(
                    "document '{}' is {}, not failed: only failed documents are retried",
                    file.file_name,
                    file.status.as_str()
                )));
            }
            requeue_file(tx, row_id, quarry_core::now_millis())?;
            file_by_row(&mut **tx, row_id)?.ok_or_else(|| Error::Storage("file vanished".into()))
        })
    }

    fn mark_embedded(&self, collection_id: i64, model: &str) -> Result<u64> {
        // The vectors table is the vector index here (one partial HNSW index per model), so
        // "has a vector in the index" is "has a row in `embeddings`".
        self.write(|tx| {
            let n = tx
                .execute(
                    // In id order, as removing the collection locks them.
                    "UPDATE kb_files f SET status = 'ready', error = NULL, updated_at = $3 \
                     WHERE f.id IN (SELECT id FROM kb_files WHERE collection_id = $1 \
                                    AND status = 'embedding' ORDER BY id FOR UPDATE) \
                     AND f.collection_id = $1 AND f.status = 'embedding' \
                     AND f.document_id IS NOT NULL \
                     AND EXISTS (SELECT 1 FROM documents d WHERE d.id = f.document_id \
                                 AND d.chunked_hash = d.hash) \
                     AND NOT EXISTS (SELECT 1 FROM chunks k WHERE k.document_id = f.document_id \
                                     AND NOT EXISTS (SELECT 1 FROM embeddings e \
                                          WHERE e.model = $2 AND e.hash = k.hash))",
                    &[&collection_id, &model, &quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            Ok(n)
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
                    "UPDATE kb_files SET status = $2, error = $3, updated_at = $4 WHERE id = $1",
                    &[
                        &row_id,
                        &status.as_str(),
                        &error,
                        &quarry_core::now_millis(),
                    ],
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
        let page_count = converted
            .page_count
            .map(|p| to_i32(p, "page count"))
            .transpose()?;
        let mut images = Vec::with_capacity(converted.images.len());
        for (hash, size, mime) in &converted.images {
            images.push((hash.as_str(), to_i64(*size, "image size")?, mime.as_str()));
        }
        self.write(|tx| {
            // The file's row stays locked until commit: a delete waits for this document to
            // land (and removes it), or went first and this finds nothing. Locked before the
            // lease is checked (the same job row), so the collection comes first.
            let Some(file) = lock_file(tx, row_id)? else {
                return Ok(None);
            };
            if !lease_holds(tx, lease)? {
                return Ok(None);
            }
            let now = quarry_core::now_millis();
            let doc = crate::store::DocWriter::new(file.collection_id).upsert(
                tx,
                crate::store::UpsertDoc {
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
            )?;
            remember_blobs(tx, &images, now)?;
            let hashes: Vec<&str> = images.iter().map(|i| i.0).collect();
            // Two statements: one may not delete and insert the same key.
            tx.execute("DELETE FROM file_images WHERE file_id = $1", &[&row_id])
                .map_err(db_err)?;
            tx.execute(
                "INSERT INTO file_images (file_id, hash) SELECT DISTINCT $1::bigint, h \
                 FROM unnest($2::text[]) AS h",
                &[&row_id, &hashes],
            )
            .map_err(db_err)?;
            tx.execute(
                "UPDATE kb_files SET status = 'indexing', error = NULL, document_id = $2, \
                 pages = $3, pages_without_text = $4, warnings = $5, updated_at = $6 WHERE id = $1",
                &[
                    &row_id,
                    &doc.id,
                    &page_count,
                    &converted.pages_without_text,
                    &converted.warnings.join("\n"),
                    &now,
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
        let row = self
            .conn()?
            .query_opt(
                "SELECT b.size, b.mime FROM blobs b WHERE b.hash = $2 AND ( \
                   EXISTS (SELECT 1 FROM kb_files f JOIN collections c ON c.id = f.collection_id \
                           WHERE f.blob = b.hash AND c.space = $1 \
                           AND ($3::bigint[] IS NULL OR c.id = ANY($3)) \
                           AND NOT (f.id = ANY($4))) \
                   OR EXISTS (SELECT 1 FROM file_images i JOIN kb_files f ON f.id = i.file_id \
                              JOIN collections c ON c.id = f.collection_id \
                              WHERE i.hash = b.hash AND c.space = $1 \
                              AND ($3::bigint[] IS NULL OR c.id = ANY($3)) \
                              AND NOT (f.id = ANY($4))))",
                &[&space, &sha256, &collections, &hidden_files],
            )
            .map_err(db_err)?;
        row.map(|r| Ok((col::<i64>(&r, 0)?.max(0) as u64, col(&r, 1)?)))
            .transpose()
    }

    fn orphan_blobs(&self, limit: usize) -> Result<Vec<String>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.conn()?
            .query(
                "SELECT b.hash FROM blobs b \
                 WHERE NOT EXISTS (SELECT 1 FROM kb_files f WHERE f.blob = b.hash) \
                 AND NOT EXISTS (SELECT 1 FROM file_images i WHERE i.hash = b.hash) LIMIT $1",
                &[&limit],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| col(r, 0))
            .collect()
    }

    fn blob_known(&self, sha256: &str) -> Result<bool> {
        let row = self
            .conn()?
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM blobs WHERE hash = $1)",
                &[&sha256],
            )
            .map_err(db_err)?;
        col(&row, 0)
    }

    fn known_blobs(&self, hashes: &[String]) -> Result<std::collections::HashSet<String>> {
        if hashes.is_empty() {
            return Ok(Default::default());
        }
        let rows = self
            .conn()?
            .query("SELECT hash FROM blobs WHERE hash = ANY($1)", &[&hashes])
            .map_err(db_err)?;
        rows.iter().map(|r| col(r, 0)).collect()
    }

    fn forget_blobs(&self, hashes: &[String]) -> Result<()> {
        if hashes.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            // Every new reference to a blob first upserts its row (`remember_blobs`), which
            // row-locks it until that transaction commits. Locking the rows here first waits
            // for any such transaction, so the delete below (a statement of its own, hence a
            // fresh snapshot) sees its reference; a reference that comes later waits for this
            // commit and then inserts the row again.
            tx.execute(
                "SELECT 1 FROM blobs WHERE hash = ANY($1) ORDER BY hash FOR UPDATE",
                &[&hashes],
            )
            .map_err(db_err)?;
            tx.execute(
                "DELETE FROM blobs b WHERE b.hash = ANY($1) \
                 AND NOT EXISTS (SELECT 1 FROM kb_files f WHERE f.blob = b.hash) \
                 AND NOT EXISTS (SELECT 1 FROM file_images i WHERE i.hash = b.hash)",
                &[&hashes],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn idempotent_answer(
        &self,
        scope: &str,
        key: &str,
        since: i64,
    ) -> Result<Option<(String, String)>> {
        let row = self
            .conn()?
            .query_opt(
                "SELECT request, response FROM idempotency_keys \
                 WHERE scope = $1 AND key = $2 AND created_at >= $3",
                &[&scope, &key, &since],
            )
            .map_err(db_err)?;
        row.map(|r| Ok((col(&r, 0)?, col(&r, 1)?))).transpose()
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
                "DELETE FROM idempotency_keys WHERE created_at < $1",
                &[&since],
            )
            .map_err(db_err)?;
            // The first answer wins: a concurrent insert of the same key makes this one wait
            // and do nothing, and the next statement (a fresh snapshot) reads the winner.
            tx.execute(
                "INSERT INTO idempotency_keys (scope, key, request, response, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope, key) DO NOTHING",
                &[&scope, &key, &request, &response, &now],
            )
            .map_err(db_err)?;
            let row = tx
                .query_one(
                    "SELECT request, response FROM idempotency_keys WHERE scope = $1 AND key = $2",
                    &[&scope, &key],
                )
                .map_err(db_err)?;
            Ok((col(&row, 0)?, col(&row, 1)?))
        })
    }
}

// ---- helpers (private to this file) ----

/// Column `i` of `r`, a storage error (not a panic) when its type is not `T`.
fn to_i32(v: u32, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::invalid(format!("{what} {v} is too large")))
}

/// Where a synced file came from: (source row, path, version).
pub(super) type FileOrigin<'a> = (i64, &'a str, &'a str);

/// Stores a new file under a free name (the caller holds the collection's lock), remembers
/// its blob and queues its ingest job; returns its row id. `origin` is set for a file a
/// source synced.
pub(super) fn insert_file(
    tx: &mut crate::PgTransaction<'_>,
    collection_id: i64,
    f: &NewKbFile,
    origin: Option<FileOrigin<'_>>,
    now: i64,
) -> Result<i64> {
    let size = to_i64(f.size, "file size")?;
    remember_blobs(tx, &[(f.sha256.as_str(), size, f.mime.as_str())], now)?;
    let readers = readers_to_column(f.readers.as_deref());
    let name = free_file_name(tx, collection_id, &f.original_name, readers.as_deref())?;
    let note = f.note.as_ref();
    let row = tx
        .query_one(
            "WITH f AS (INSERT INTO kb_files (uid, collection_id, name, original_name, blob, \
             format, mime, size, status, created_at, updated_at, note_kind, note_title, note_tags, \
             source_id, source_path, source_version, readers, meta) VALUES ($1, $2, $3, $4, $5, $6, \
             $7, $8, 'pending', $9, $9, $10, $11, $12, $13, $14, $15, $16, $17) RETURNING id), \
             j AS (INSERT INTO jobs (kind, file_id, status, not_before, created_at, updated_at) \
             SELECT 'ingest', f.id, 'enqueued', quarry_now_ms(), $9, $9 FROM f) SELECT id FROM f",
            &[
                &uuid(),
                &collection_id,
                &name,
                &f.original_name,
                &f.sha256,
                &f.format,
                &f.mime,
                &size,
                &now,
                &note.map(|n| n.kind.as_str()),
                &note.and_then(|n| n.title.as_deref()),
                &note.map(|n| n.tags.join("\n")).unwrap_or_default(),
                &origin.map(|o| o.0),
                &origin.map(|o| o.1),
                &origin.map(|o| o.2),
                &readers,
                &(if f.meta.trim().is_empty() { "{}" } else { f.meta.as_str() }),
            ],
        )
        .map_err(db_err)?;
    col(&row, 0)
}

/// Removes one file's document (its removal enters the feed, by trigger, for the derived
/// indexes), images, job and row; the caller has locked the file.
pub(super) fn delete_file(tx: &mut crate::PgTransaction<'_>, file_row_id: i64) -> Result<()> {
    tx.execute(
        "WITH f AS (SELECT document_id FROM kb_files WHERE id = $1), \
         c AS (DELETE FROM chunks WHERE document_id = (SELECT document_id FROM f)), \
         d AS (DELETE FROM documents WHERE id = (SELECT document_id FROM f)), \
         i AS (DELETE FROM file_images WHERE file_id = $1), \
         p AS (DELETE FROM page_sources WHERE page_id = $1), \
         j AS (DELETE FROM jobs WHERE file_id = $1) \
         DELETE FROM kb_files WHERE id = $1",
        &[&file_row_id],
    )
    .map_err(db_err)?;
    Ok(())
}

pub(super) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn kb_by_key(c: &mut impl GenericClient, space: &str, key: &str) -> Result<Option<KnowledgeBase>> {
    c.query_opt(
        &format!(
            "{KB_SELECT} WHERE c.space = $1 AND c.kind = 'knowledge_base' \
             AND (c.uid = $2 OR c.name = $2) ORDER BY (c.uid = $2) DESC LIMIT 1"
        ),
        &[&space, &key],
    )
    .map_err(db_err)?
    .as_ref()
    .map(kb_from_row)
    .transpose()
}

fn kb_by_id(c: &mut impl GenericClient, id: i64) -> Result<Option<KnowledgeBase>> {
    c.query_opt(&format!("{KB_SELECT} WHERE c.id = $1"), &[&id])
        .map_err(db_err)?
        .as_ref()
        .map(kb_from_row)
        .transpose()
}

pub(super) fn file_by_row(c: &mut impl GenericClient, row_id: i64) -> Result<Option<KbFile>> {
    c.query_opt(&format!("{FILE_SELECT} WHERE f.id = $1"), &[&row_id])
        .map_err(db_err)?
        .as_ref()
        .map(file_from_row)
        .transpose()
}

/// Locks the file's knowledge base (`FOR KEY SHARE`: uploads and other files' writes go
/// on), the file's job (if it has one), then the file's row, until commit (see the lock
/// order in the module docs), and reads the file.
pub(super) fn lock_file(tx: &mut crate::PgTransaction<'_>, row_id: i64) -> Result<Option<KbFile>> {
    tx.execute(
        "SELECT 1 FROM collections WHERE id = (SELECT collection_id FROM kb_files WHERE id = $1) \
         FOR KEY SHARE",
        &[&row_id],
    )
    .map_err(db_err)?;
    tx.query_opt(
        "SELECT 1 FROM jobs WHERE file_id = $1 FOR UPDATE",
        &[&row_id],
    )
    .map_err(db_err)?;
    tx.query_opt(
        &format!("{FILE_SELECT} WHERE f.id = $1 FOR UPDATE OF f"),
        &[&row_id],
    )
    .map_err(db_err)?
    .as_ref()
    .map(file_from_row)
    .transpose()
}

/// Whether a job's side effect may apply: no lease (not a job's), or the job is still
/// processing under this claim's token. The job's row stays locked until commit, so no
/// claim (which bumps the token) can slip between this check and the write.
pub(super) fn lease_holds(tx: &mut crate::PgTransaction<'_>, lease: Option<Lease>) -> Result<bool> {
    let Some(lease) = lease else {
        return Ok(true);
    };
    let row = tx
        .query_opt(
            "SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2 AND status = 'processing' \
             FOR UPDATE",
            &[&lease.job, &lease.token],
        )
        .map_err(db_err)?;
    Ok(row.is_some())
}

/// `report.pdf`, then `report (2).pdf`, `report (3).pdf`, … — the first name not taken in
/// the knowledge base among files with `readers` (their column form; the caller holds the
/// collection's lock): a name names one file per set of readers, so a file of other readers
/// (maybe hidden from the writer) never moves the name a writer gets.
pub(super) fn free_file_name(
    tx: &mut crate::PgTransaction<'_>,
    collection_id: i64,
    wanted: &str,
    readers: Option<&str>,
) -> Result<String> {
    let (stem, ext) = match wanted.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s, format!(".{e}")),
        _ => (wanted, String::new()),
    };
    // Every name that could collide, in one round trip.
    let taken: std::collections::HashSet<String> = tx
        .query(
            "SELECT name FROM kb_files WHERE collection_id = $1 AND starts_with(name, $2) \
             AND COALESCE(readers, '') = COALESCE($3, '')",
            &[&collection_id, &stem, &readers],
        )
        .map_err(db_err)?
        .iter()
        .map(|r| col(r, 0))
        .collect::<Result<_>>()?;
    for n in 1..=taken.len() + 1 {
        let candidate = if n == 1 {
            wanted.to_owned()
        } else {
            format!("{stem} ({n}){ext}")
        };
        if !taken.contains(&candidate) {
            return Ok(candidate);
        }
    }
    Err(Error::Storage("no free file name".into()))
}

/// Gives a file other readers (their column form) and the name it had if that is free among
/// them, else the next free one (its document follows: the feed tells the indexes); returns
/// whether the file exists. The caller holds the collection's lock (`FOR NO KEY UPDATE`,
/// as for [`free_file_name`]) and the file's.
pub(super) fn move_to_readers(
    tx: &mut crate::PgTransaction<'_>,
    row_id: i64,
    readers: Option<&str>,
    now: i64,
) -> Result<bool> {
    let Some(row) = tx
        .query_opt(
            "SELECT collection_id, name, readers FROM kb_files WHERE id = $1",
            &[&row_id],
        )
        .map_err(db_err)?
    else {
        return Ok(false);
    };
    let (collection_id, name, before): (i64, String, Option<String>) =
        (col(&row, 0)?, col(&row, 1)?, col(&row, 2)?);
    if before.as_deref() == readers {
        return Ok(true);
    }
    // Its own name is free first.
    tx.execute(
        "UPDATE kb_files SET name = 'renaming:' || uid WHERE id = $1",
        &[&row_id],
    )
    .map_err(db_err)?;
    let free = free_file_name(tx, collection_id, &name, readers)?;
    // The name is free among these readers: a conflict is the bytes or the entry key.
    tx.execute(
        "UPDATE kb_files SET name = $2, readers = $3, updated_at = $4 WHERE id = $1",
        &[&row_id, &free, &readers, &now],
    )
    .map_err(|e| conflict_or_db(e, || quarry_store::SAME_BYTES_SAME_READERS.into()))?;
    if free != name {
        tx.execute(
            "UPDATE documents SET path = $2 WHERE id = (SELECT document_id FROM kb_files WHERE id = $1)",
            &[&row_id, &free],
        )
        .map_err(db_err)?;
    }
    Ok(true)
}

/// Records blobs (hash, size, mime) as known. An existing row is upserted rather than left
/// alone so that it stays row-locked until this transaction commits: `forget_blobs` waits for
/// that and then sees the new reference (see there).
pub(super) fn remember_blobs(
    tx: &mut crate::PgTransaction<'_>,
    blobs: &[(&str, i64, &str)],
    now: i64,
) -> Result<()> {
    if blobs.is_empty() {
        return Ok(());
    }
    // Sorted and without repeats: one upsert may not touch a row twice, and a fixed order
    // keeps two transactions locking the same blobs from deadlocking.
    let mut blobs = blobs.to_vec();
    blobs.sort_by(|a, b| a.0.cmp(b.0));
    blobs.dedup_by(|a, b| a.0 == b.0);
    let hashes: Vec<&str> = blobs.iter().map(|b| b.0).collect();
    let sizes: Vec<i64> = blobs.iter().map(|b| b.1).collect();
    let mimes: Vec<&str> = blobs.iter().map(|b| b.2).collect();
    tx.execute(
        "INSERT INTO blobs (hash, size, mime, created_at) \
         SELECT h, s, m, $4 FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(h, s, m) \
         ORDER BY h ON CONFLICT (hash) DO UPDATE SET size = blobs.size",
        &[&hashes, &sizes, &mimes, &now],
    )
    .map_err(db_err)?;
    Ok(())
}

/// Sets a file back to `pending` and (re)queues its ingest job from scratch (due now by the
/// database's clock). A worker still holding the old job loses it: its fenced effects need
/// `status = 'processing'`.
pub(super) fn requeue_file(tx: &mut crate::PgTransaction<'_>, row_id: i64, now: i64) -> Result<()> {
    tx.execute(
        "WITH f AS (UPDATE kb_files SET status = 'pending', error = NULL, attempts = 0, \
         updated_at = $2 WHERE id = $1) \
         INSERT INTO jobs (kind, file_id, status, not_before, created_at, updated_at) \
         VALUES ('ingest', $1, 'enqueued', quarry_now_ms(), $2, $2) \
         ON CONFLICT (file_id) DO UPDATE SET status = 'enqueued', attempts = 0, \
         not_before = quarry_now_ms(), lease_owner = NULL, lease_until = NULL, error = NULL, \
         updated_at = $2",
        &[&row_id, &now],
    )
    .map_err(db_err)?;
    Ok(())
}

/// Advisory-lock key serialising cleanup enqueues ("one waiting cleanup job").
const CLEANUP_LOCK: i64 = 0x7175_6172_7279_0001;

/// Enqueues a cleanup job unless one is already waiting. Two nodes deleting at once would
/// both see none waiting: a transaction-level advisory lock serialises the check and insert.
pub(super) fn enqueue_cleanup_tx(tx: &mut crate::PgTransaction<'_>) -> Result<()> {
    lock(tx, CLEANUP_LOCK)?;
    tx.execute(
        "INSERT INTO jobs (kind, status, not_before, created_at, updated_at) \
         SELECT 'cleanup', 'enqueued', quarry_now_ms(), $1, $1 \
         WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE kind = 'cleanup' AND status = 'enqueued')",
        &[&quarry_core::now_millis()],
    )
    .map_err(db_err)?;
    Ok(())
}
