//! [`SemanticStore`] on SQLite: chunks, embeddings and what the vector index needs.

use quarry_core::{Error, Result};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use quarry_store::{
    ChunkEdit, ChunkRef, ChunkSource, DocChunks, EmbedJob, EmbeddedBatch, EmbeddingState,
    IndexCensus, IndexWork, RecentEmbedding, SemanticStore,
};

use crate::documents::drop_chunks_of;
use crate::embed_texts::{EMBED_TEXT_COLUMNS, embed_span_row, embed_texts};
use crate::error::db_err;
use crate::feed::index_work_of;
use crate::sql::{blob_to_vector, id_list, vector_to_blob};
use crate::store::SqliteStore;

impl SemanticStore for SqliteStore {
    fn chunk_sources(&self, document_ids: &[i64]) -> Result<Vec<ChunkSource>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {CHUNK_SOURCE_COLUMNS} \
                 FROM documents d JOIN collections c ON c.id = d.collection_id \
                 WHERE d.id = ?1 AND (d.chunked_hash IS NULL OR d.chunked_hash != d.hash)"
            ))
            .map_err(db_err)?;
        let mut out = Vec::new();
        for id in document_ids {
            let row = stmt
                .query_row([id], chunk_source_from_row)
                .optional()
                .map_err(db_err)?;
            if let Some(mut src) = row {
                src.edits = chunk_edits_of(&conn, src.id)?;
                out.push(src);
            }
        }
        Ok(out)
    }

    fn chunk_source(&self, document_id: i64) -> Result<Option<ChunkSource>> {
        let conn = self.conn();
        let row = conn
            .prepare_cached(&format!(
                "SELECT {CHUNK_SOURCE_COLUMNS} \
                 FROM documents d JOIN collections c ON c.id = d.collection_id WHERE d.id = ?1"
            ))
            .and_then(|mut s| s.query_row([document_id], chunk_source_from_row).optional())
            .map_err(db_err)?;
        let Some(mut src) = row else {
            return Ok(None);
        };
        src.edits = chunk_edits_of(&conn, document_id)?;
        Ok(Some(src))
    }

    fn set_chunk_edit(
        &self,
        document_id: i64,
        key: &str,
        edit: Option<&ChunkEdit>,
    ) -> Result<bool> {
        self.write(|tx| {
            if !recut(tx, document_id)? {
                return Ok(false);
            }
            match edit {
                Some(e) => tx.execute(
                    "INSERT INTO chunk_edits (document_id, key, text, disabled, edited_by, edited_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (document_id, key) DO UPDATE SET \
                     text = excluded.text, disabled = excluded.disabled, \
                     edited_by = excluded.edited_by, edited_at = excluded.edited_at",
                    params![document_id, key, e.text, e.disabled, e.edited_by, e.edited_at],
                ),
                None => tx.execute(
                    "DELETE FROM chunk_edits WHERE document_id = ?1 AND key = ?2",
                    params![document_id, key],
                ),
            }
            .map_err(db_err)?;
            Ok(true)
        })
    }

    fn set_document_chunking(
        &self,
        document_id: i64,
        chars: Option<(usize, usize)>,
    ) -> Result<bool> {
        self.write(|tx| {
            if !recut(tx, document_id)? {
                return Ok(false);
            }
            let (size, overlap) =
                chars.map_or((None, None), |(s, o)| (Some(s as i64), Some(o as i64)));
            tx.execute(
                "UPDATE documents SET chunk_size = ?2, chunk_overlap = ?3 WHERE id = ?1",
                params![document_id, size, overlap],
            )
            .map_err(db_err)?;
            Ok(true)
        })
    }

    fn reset_all_chunks(&self) -> Result<()> {
        self.write(|tx| {
            tx.execute("UPDATE documents SET chunked_hash = NULL", [])
                .map_err(db_err)?;
            Ok(())
        })
    }

    fn replace_chunks(&self, docs: &[DocChunks]) -> Result<()> {
        self.write(|tx| {
            let mut current = tx
                .prepare_cached("SELECT hash, chunked_hash FROM documents WHERE id = ?1")
                .map_err(db_err)?;
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, line_end, hash, ann_dirty, page, heading, text) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9, ?10)",
                )
                .map_err(db_err)?;
            let mut mark = tx
                .prepare_cached("UPDATE documents SET chunked_hash = ?2 WHERE id = ?1")
                .map_err(db_err)?;
            // As if applied in order: a document's last entry in the batch is its cut.
            let last: std::collections::HashMap<i64, usize> = docs
                .iter()
                .enumerate()
                .map(|(i, d)| (d.document_id, i))
                .collect();
            for (i, doc) in docs.iter().enumerate() {
                if last.get(&doc.document_id) != Some(&i) {
                    continue;
                }
                let row: Option<(String, Option<String>)> = current
                    .query_row([doc.document_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
                    .map_err(db_err)?;
                let Some((hash, chunked)) = row else {
                    continue; // removed since it was chunked
                };
                // Changed since it was chunked, or already cut from this content (by
                // another process since it was read): the chunks stored stay, with their ids.
                if hash != doc.doc_hash || chunked.as_deref() == Some(hash.as_str()) {
                    continue;
                }
                drop_chunks_of(tx, doc.document_id)?;
                for (seq, c) in doc.chunks.iter().enumerate() {
                    insert
                        .execute(params![
                            doc.document_id,
                            seq as i64,
                            c.byte_start as i64,
                            c.byte_end as i64,
                            c.line_start as i64,
                            c.line_end as i64,
                            c.hash,
                            c.page,
                            c.heading,
                            c.text
                        ])
                        .map_err(db_err)?;
                }
                mark.execute(params![doc.document_id, doc.doc_hash])
                    .map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn embed_jobs(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
        limit: Option<usize>,
    ) -> Result<Vec<EmbedJob>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {EMBED_TEXT_COLUMNS} \
                 FROM chunks k JOIN documents d ON d.id = k.document_id JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = ?1 AND (?2 IS NULL OR d.collection_id = ?2) \
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = ?3 AND e.hash = k.hash) \
                 GROUP BY k.hash LIMIT ?4"
            ))
            .map_err(db_err)?;
        // LIMIT -1: no limit.
        let limit = limit.map_or(-1, |n| n.min(i64::MAX as usize) as i64);
        let spans = stmt
            .query_map(params![space, collection_id, model, limit], embed_span_row)
            .map_err(db_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err)?;
        drop(stmt);
        embed_texts(&conn, spans)
    }

    fn put_embeddings(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<()> {
        self.write(|tx| {
            let mut put = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?1, ?2, ?3)",
                )
                .map_err(db_err)?;
            for (hash, v) in vectors {
                put.execute(params![model, hash, vector_to_blob(v)])
                    .map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn embeddings_for(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT hash, vector FROM embeddings \
                 WHERE model = ?1 AND hash IN (SELECT value FROM json_each(?2))",
            )
            .map_err(db_err)?;
        let mut out = Vec::with_capacity(hashes.len());
        for part in hashes.chunks(2000) {
            let list = serde_json::to_string(part).map_err(|e| Error::Storage(e.to_string()))?;
            let rows = stmt
                .query_map(params![model, list], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .map_err(db_err)?;
            for row in rows {
                let (hash, blob) = row.map_err(db_err)?;
                out.push((hash, blob_to_vector(&blob)?));
            }
        }
        Ok(out)
    }

    fn delete_embeddings(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
    ) -> Result<u64> {
        self.write(|tx| {
            let scope = "SELECT k.id FROM chunks k JOIN documents d ON d.id = k.document_id \
                 JOIN collections c ON c.id = d.collection_id WHERE c.space = ?1 AND (?2 IS NULL OR d.collection_id = ?2)";
            let n = tx
                .execute(
                    &format!(
                        "DELETE FROM embeddings WHERE model = ?3 AND hash IN (SELECT hash FROM chunks WHERE id IN ({scope}))"
                    ),
                    params![space, collection_id, model],
                )
                .map_err(db_err)?;
            tx.execute(
                &format!("UPDATE chunks SET ann_dirty = 1 WHERE id IN ({scope})"),
                params![space, collection_id],
            )
            .map_err(db_err)?;
            Ok(n as u64)
        })
    }

    fn ann_tombstones(&self) -> Result<Vec<i64>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT chunk_id FROM ann_tombstones")
            .map_err(db_err)?;
        stmt.query_map([], |r| r.get(0))
            .map_err(db_err)?
            .collect::<rusqlite::Result<Vec<i64>>>()
            .map_err(db_err)
    }

    fn ann_dirty_chunks(
        &self,
        model: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, Vec<f32>)>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT k.id, e.vector FROM chunks k JOIN embeddings e ON e.model = ?1 AND e.hash = k.hash \
                 WHERE k.ann_dirty = 1 AND k.id > ?2 ORDER BY k.id LIMIT ?3",
            )
            .map_err(db_err)?;
        stmt.query_map(params![model, after, limit as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .map_err(db_err)?
        .map(|row| {
            let (id, blob) = row.map_err(db_err)?;
            Ok((id, blob_to_vector(&blob)?))
        })
        .collect()
    }

    fn ann_done(&self, removed: &[i64], added: &[i64]) -> Result<()> {
        self.write(|tx| {
            let mut del = tx
                .prepare_cached("DELETE FROM ann_tombstones WHERE chunk_id = ?1")
                .map_err(db_err)?;
            for id in removed {
                del.execute([id]).map_err(db_err)?;
            }
            let mut clear = tx
                .prepare_cached("UPDATE chunks SET ann_dirty = 0 WHERE id = ?1")
                .map_err(db_err)?;
            for id in added {
                clear.execute([id]).map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn ann_reset(&self) -> Result<()> {
        self.write(|tx| {
            tx.execute_batch(
                "UPDATE chunks SET ann_dirty = 1 WHERE ann_dirty = 0; DELETE FROM ann_tombstones;",
            )
            .map_err(db_err)
        })
    }

    fn chunk_refs(&self, ids: &[i64]) -> Result<Vec<ChunkRef>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!("SELECT {CHUNK_COLUMNS} FROM chunks WHERE id = ?1"))
            .map_err(db_err)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(c) = stmt
                .query_row([id], chunk_from_row)
                .optional()
                .map_err(db_err)?
            {
                out.push(c);
            }
        }
        Ok(out)
    }

    fn chunks_of_documents(&self, document_ids: &[i64]) -> Result<Vec<ChunkRef>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {CHUNK_COLUMNS} FROM chunks WHERE document_id = ?1 ORDER BY seq"
            ))
            .map_err(db_err)?;
        let mut out = Vec::new();
        for id in document_ids {
            let rows = stmt.query_map([id], chunk_from_row).map_err(db_err)?;
            for r in rows {
                out.push(r.map_err(db_err)?);
            }
        }
        Ok(out)
    }

    fn chunk_ids_in_collection(&self, collection_id: i64) -> Result<Vec<i64>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT k.id FROM chunks k JOIN documents d ON d.id = k.document_id WHERE d.collection_id = ?1",
            )
            .map_err(db_err)?;
        stmt.query_map([collection_id], |r| r.get(0))
            .map_err(db_err)?
            .collect::<rusqlite::Result<Vec<i64>>>()
            .map_err(db_err)
    }

    fn index_census(&self) -> Result<IndexCensus> {
        let mut conn = self.conn();
        // One read transaction: documents and chunks from one state of the database.
        let tx = conn.transaction().map_err(db_err)?;
        let documents = tx
            .prepare_cached("SELECT id FROM documents")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(db_err)?;
        let chunks = tx
            .prepare_cached("SELECT id, document_id FROM chunks")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(IndexCensus { documents, chunks })
    }

    fn index_work(&self, document_ids: &[i64]) -> Result<IndexWork> {
        index_work_of(&self.conn(), document_ids)
    }

    fn embedding_state(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        model: Option<&str>,
    ) -> Result<EmbeddingState> {
        let conn = self.conn();
        let allowed = collections.map(id_list);
        let pending: i64 = conn
            .prepare_cached(
                "SELECT COUNT(*) FROM documents d JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = ?1 AND (?3 IS NULL OR c.id IN (SELECT value FROM json_each(?3))) \
                 AND (d.chunked_hash IS NULL OR d.chunked_hash != d.hash \
                 OR EXISTS (SELECT 1 FROM chunks k WHERE k.document_id = d.id AND (k.ann_dirty = 1 \
                 OR NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = ?2 AND e.hash = k.hash))))",
            )
            .and_then(|mut s| {
                s.query_row(params![space, model.unwrap_or(""), allowed], |r| r.get(0))
            })
            .map_err(db_err)?;
        let chunks: i64 = conn
            .prepare_cached(
                "SELECT COUNT(*) FROM chunks k JOIN documents d ON d.id = k.document_id \
                 JOIN collections c ON c.id = d.collection_id WHERE c.space = ?1 \
                 AND (?2 IS NULL OR c.id IN (SELECT value FROM json_each(?2)))",
            )
            .and_then(|mut s| s.query_row(params![space, allowed], |r| r.get(0)))
            .map_err(db_err)?;
        let chunks_pending: i64 = conn
            .prepare_cached(
                "SELECT COUNT(*) FROM chunks k JOIN documents d ON d.id = k.document_id \
                 JOIN collections c ON c.id = d.collection_id WHERE c.space = ?1 \
                 AND (?3 IS NULL OR c.id IN (SELECT value FROM json_each(?3))) \
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = ?2 AND e.hash = k.hash)",
            )
            .and_then(|mut s| {
                s.query_row(params![space, model.unwrap_or(""), allowed], |r| r.get(0))
            })
            .map_err(db_err)?;
        Ok(EmbeddingState {
            documents_pending: pending as u64,
            chunks: chunks as u64,
            chunks_pending: chunks_pending as u64,
        })
    }

    fn documents_embedding_state(
        &self,
        document_ids: &[i64],
        model: Option<&str>,
    ) -> Result<EmbeddingState> {
        if document_ids.is_empty() {
            return Ok(EmbeddingState::default());
        }
        let conn = self.conn();
        let ids = id_list(document_ids);
        let model = model.unwrap_or("");
        let pending: i64 = conn
            .prepare_cached(
                "SELECT COUNT(*) FROM documents d WHERE d.id IN (SELECT value FROM json_each(?1)) \
                 AND (d.chunked_hash IS NULL OR d.chunked_hash != d.hash \
                 OR EXISTS (SELECT 1 FROM chunks k WHERE k.document_id = d.id AND (k.ann_dirty = 1 \
                 OR NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = ?2 AND e.hash = k.hash))))",
            )
            .and_then(|mut s| s.query_row(params![ids, model], |r| r.get(0)))
            .map_err(db_err)?;
        let (chunks, chunks_pending): (i64, i64) = conn
            .prepare_cached(
                "SELECT COUNT(*), COALESCE(SUM(NOT EXISTS (SELECT 1 FROM embeddings e \
                 WHERE e.model = ?2 AND e.hash = k.hash)), 0) FROM chunks k \
                 WHERE k.document_id IN (SELECT value FROM json_each(?1))",
            )
            .and_then(|mut s| s.query_row(params![ids, model], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(db_err)?;
        Ok(EmbeddingState {
            documents_pending: pending.max(0) as u64,
            chunks: chunks.max(0) as u64,
            chunks_pending: chunks_pending.max(0) as u64,
        })
    }

    fn record_embedded(&self, model: &str, hashes: &[String], elapsed_ms: i64) -> Result<()> {
        let list = serde_json::to_string(hashes).map_err(|e| Error::Storage(e.to_string()))?;
        self.write(|tx| {
            let now = quarry_core::now_millis();
            tx.prepare_cached("DELETE FROM embedded_batches WHERE ended_at < ?1")
                .and_then(|mut s| s.execute([now - quarry_store::EMBEDDED_BATCHES_KEPT_MS]))
                .map_err(db_err)?;
            tx.prepare_cached(
                "INSERT INTO embedded_batches (model, ended_at, elapsed_ms, chunks) \
                 SELECT ?1, ?2, ?3, COUNT(*) FROM chunks \
                 WHERE hash IN (SELECT value FROM json_each(?4))",
            )
            .and_then(|mut s| s.execute(params![model, now, elapsed_ms.max(0), list]))
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn recent_embedding(&self, model: &str, within_ms: i64) -> Result<RecentEmbedding> {
        let conn = self.conn();
        let now = quarry_core::now_millis();
        let batches = conn
            .prepare_cached(
                "SELECT ended_at, elapsed_ms, chunks FROM embedded_batches \
                 WHERE ended_at >= ?1 AND model = ?2 ORDER BY ended_at, id",
            )
            .and_then(|mut s| {
                s.query_map(params![now - within_ms.max(0), model], |r| {
                    Ok(EmbeddedBatch {
                        ended_ms: r.get(0)?,
                        elapsed_ms: r.get(1)?,
                        chunks: r.get::<_, i64>(2)?.max(0) as u64,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db_err)?;
        Ok(RecentEmbedding {
            now_ms: now,
            batches,
        })
    }
}

const CHUNK_COLUMNS: &str =
    "id, document_id, byte_start, byte_end, line_start, line_end, page, heading, text";

/// What [`chunk_source_from_row`] reads, over `documents d JOIN collections c`.
const CHUNK_SOURCE_COLUMNS: &str = "d.id, d.hash, d.title, d.body, d.pages, \
     COALESCE(d.chunk_size, c.chunk_size), \
     CASE WHEN d.chunk_size IS NULL THEN c.chunk_overlap ELSE d.chunk_overlap END, \
     d.furniture, d.chunk_size IS NOT NULL";

/// A `ChunkSource` (without its edits) from [`CHUNK_SOURCE_COLUMNS`].
fn chunk_source_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChunkSource> {
    let size: Option<i64> = r.get(5)?;
    let overlap: Option<i64> = r.get(6)?;
    Ok(ChunkSource {
        id: r.get(0)?,
        hash: r.get(1)?,
        title: r.get(2)?,
        body: r.get(3)?,
        pages: quarry_core::decode_pages(&r.get::<_, String>(4)?),
        furniture: quarry_core::decode_furniture(&r.get::<_, String>(7)?),
        chunk_chars: size.map(|s| (s.max(1) as usize, overlap.unwrap_or(0).max(0) as usize)),
        own_chunking: r.get(8)?,
        edits: Vec::new(),
    })
}

/// The edits people made to a document's chunks.
fn chunk_edits_of(conn: &Connection, document_id: i64) -> Result<Vec<ChunkEdit>> {
    conn.prepare_cached(
        "SELECT key, text, disabled, edited_by, edited_at FROM chunk_edits WHERE document_id = ?1",
    )
    .and_then(|mut s| {
        s.query_map([document_id], |r| {
            Ok(ChunkEdit {
                key: r.get(0)?,
                text: r.get(1)?,
                disabled: r.get(2)?,
                edited_by: r.get(3)?,
                edited_at: r.get(4)?,
            })
        })?
        .collect()
    })
    .map_err(db_err)
}

/// Has a document cut again by every node: its chunks are forgotten and it enters the
/// change feed (the `curation` counter's trigger). `false` when it does not exist.
fn recut(tx: &Transaction<'_>, document_id: i64) -> Result<bool> {
    let n = tx
        .execute(
            "UPDATE documents SET chunked_hash = NULL, curation = curation + 1 WHERE id = ?1",
            [document_id],
        )
        .map_err(db_err)?;
    Ok(n > 0)
}

fn chunk_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChunkRef> {
    Ok(ChunkRef {
        id: r.get(0)?,
        document_id: r.get(1)?,
        byte_start: r.get::<_, i64>(2)? as usize,
        byte_end: r.get::<_, i64>(3)? as usize,
        line_start: r.get::<_, i64>(4)? as usize,
        line_end: r.get::<_, i64>(5)? as usize,
        page: r.get(6)?,
        heading: r.get(7)?,
        text: r.get(8)?,
    })
}
