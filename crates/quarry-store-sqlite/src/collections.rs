//! [`CollectionStore`] on SQLite.

use std::collections::HashMap;

use quarry_core::{Collection, CollectionKind, Context, Document, Error, Result};
use rusqlite::{OptionalExtension, params};

use quarry_store::{CollectionStore, DocChange, DocFields, DocSummary, FileState, IndexWork};

use crate::documents::{
    UpsertDoc, drop_chunks_of, ensure_name_free, ensure_space, rename_collection_tx,
    upsert_document,
};
use crate::error::db_err;
use crate::knowledge;
use crate::sql::{id_list, like_escape};
use crate::store::SqliteStore;

const COLLECTION_COLUMNS: &str = "c.id, c.space, c.name, c.kind, c.path, c.pattern, c.last_updated, \
     (SELECT COUNT(*) FROM documents d WHERE d.collection_id = c.id)";

fn collection_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Collection> {
    let kind: String = r.get(3)?;
    Ok(Collection {
        id: r.get(0)?,
        space: r.get(1)?,
        name: r.get(2)?,
        kind: CollectionKind::parse(&kind).unwrap_or(CollectionKind::Folder),
        path: r.get(4)?,
        pattern: r.get(5)?,
        last_updated_ms: r.get(6)?,
        documents: r.get::<_, i64>(7)? as u64,
    })
}

const DOCUMENT_COLUMNS: &str =
    "d.id, c.name, d.path, d.title, d.hash, d.docid, d.body, d.pages, d.furniture, d.meta";

fn document_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Document> {
    Ok(Document {
        id: r.get(0)?,
        collection: r.get(1)?,
        path: r.get(2)?,
        title: r.get(3)?,
        hash: r.get(4)?,
        docid: r.get(5)?,
        body: r.get(6)?,
        pages: quarry_core::decode_pages(&r.get::<_, String>(7)?),
        furniture: quarry_core::decode_furniture(&r.get::<_, String>(8)?),
        meta: r.get(9)?,
    })
}

impl CollectionStore for SqliteStore {
    fn create_collection(
        &self,
        space: &str,
        name: &str,
        kind: CollectionKind,
        path: &str,
        pattern: &str,
    ) -> Result<Collection> {
        self.write(|tx| {
            ensure_space(tx, space)?;
            ensure_name_free(tx, space, name)?;
            tx.execute(
                "INSERT INTO collections (space, name, kind, path, pattern, created_at, uid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![space, name, kind.as_str(), path, pattern, quarry_core::now_millis(), uuid::Uuid::new_v4().to_string()],
            )
            .map_err(db_err)?;
            Ok(Collection {
                id: tx.last_insert_rowid(),
                space: space.to_owned(),
                name: name.to_owned(),
                kind,
                path: path.to_owned(),
                pattern: pattern.to_owned(),
                documents: 0,
                last_updated_ms: None,
            })
        })
    }

    fn collections(&self, space: &str) -> Result<Vec<Collection>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLLECTION_COLUMNS} FROM collections c WHERE c.space = ?1 ORDER BY c.name"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map([space], collection_from_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn collection_id(&self, space: &str, name: &str) -> Result<Option<i64>> {
        self.conn()
            .prepare_cached("SELECT id FROM collections WHERE space = ?1 AND name = ?2")
            .map_err(db_err)?
            .query_row(params![space, name], |r| r.get(0))
            .optional()
            .map_err(db_err)
    }

    fn collection_names(&self, space: &str) -> Result<Vec<(i64, String)>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT id, name FROM collections WHERE space = ?1 ORDER BY name")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([space], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn collection(&self, space: &str, name: &str) -> Result<Option<Collection>> {
        let conn = self.conn();
        conn.query_row(
            &format!(
                "SELECT {COLLECTION_COLUMNS} FROM collections c WHERE c.space = ?1 AND c.name = ?2"
            ),
            params![space, name],
            collection_from_row,
        )
        .optional()
        .map_err(db_err)
    }

    fn rename_collection(&self, space: &str, old: &str, new: &str) -> Result<()> {
        self.write(|tx| rename_collection_tx(tx, space, old, new))
    }

    fn remove_collection(&self, space: &str, name: &str) -> Result<u64> {
        self.write(|tx| {
            let id: Option<i64> = tx
                .query_row(
                    "SELECT id FROM collections WHERE space = ?1 AND name = ?2",
                    params![space, name],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            let Some(id) = id else {
                return Err(Error::NotFound(format!("collection '{name}' not found")));
            };
            tx.execute(
                "INSERT OR IGNORE INTO ann_tombstones (chunk_id) SELECT id FROM chunks \
                 WHERE document_id IN (SELECT id FROM documents WHERE collection_id = ?1)",
                [id],
            )
            .map_err(db_err)?;
            tx.execute(
                "DELETE FROM chunks WHERE document_id IN (SELECT id FROM documents WHERE collection_id = ?1)",
                [id],
            )
            .map_err(db_err)?;
            let n = tx
                .execute("DELETE FROM documents WHERE collection_id = ?1", [id])
                .map_err(db_err)?;
            // A knowledge base's uploads go with it; their blobs and derived-index entries
            // are cleaned by a cleanup job (committed with this transaction, so a restart
            // resumes it).
            let files = knowledge::delete_files_of_collection(tx, id)?;
            if files > 0 || n > 0 {
                knowledge::enqueue_cleanup_tx(tx)?;
            }
            tx.execute("DELETE FROM collections WHERE id = ?1", [id])
                .map_err(db_err)?;
            tx.execute(
                "DELETE FROM contexts WHERE space = ?1 AND (path = ?2 OR path LIKE ?3 ESCAPE '\\')",
                params![space, name, format!("{}/%", like_escape(name))],
            )
            .map_err(db_err)?;
            Ok(n as u64)
        })
    }

    fn mark_collection_scanned(&self, collection_id: i64, at_ms: i64) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE collections SET last_updated = ?2 WHERE id = ?1",
                params![collection_id, at_ms],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn file_states(&self, collection_id: i64) -> Result<HashMap<String, FileState>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT path, id, size, stamp, hash FROM documents WHERE collection_id = ?1",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([collection_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    FileState {
                        id: r.get(1)?,
                        size: r.get::<_, i64>(2)? as u64,
                        stamp: r.get(3)?,
                        hash: r.get(4)?,
                    },
                ))
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<HashMap<_, _>>>()
            .map_err(db_err)
    }

    fn apply_changes(&self, collection_id: i64, changes: Vec<DocChange>) -> Result<IndexWork> {
        let mut work = IndexWork::default();
        if changes.is_empty() {
            return Ok(work);
        }
        self.write(|tx| {
            // A collection removed since the caller looked it up: say so (a foreign-key
            // failure would read as a storage error).
            let exists: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM collections WHERE id = ?1)",
                    [collection_id],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if !exists {
                return Err(Error::NotFound(format!(
                    "collection {collection_id} no longer exists"
                )));
            }
            let now = quarry_core::now_millis();
            for change in changes {
                match change {
                    DocChange::Upsert {
                        path,
                        title,
                        hash,
                        size,
                        stamp,
                        body,
                        pages,
                        furniture,
                        meta,
                    } => {
                        work.upserts.push(upsert_document(
                            tx,
                            collection_id,
                            UpsertDoc {
                                path,
                                title,
                                hash,
                                size,
                                stamp,
                                body,
                                pages: &pages,
                                furniture: &furniture,
                                meta: &meta,
                                kb_file: None,
                            },
                            now,
                        )?);
                    }
                    DocChange::Touch { id, size, stamp } => {
                        tx.prepare_cached(
                            "UPDATE documents SET size = ?2, stamp = ?3 WHERE id = ?1",
                        )
                        .and_then(|mut s| s.execute(params![id, size as i64, stamp]))
                        .map_err(db_err)?;
                    }
                    DocChange::Remove { id } => {
                        drop_chunks_of(tx, id)?;
                        tx.prepare_cached("DELETE FROM documents WHERE id = ?1")
                            .and_then(|mut s| s.execute([id]))
                            .map_err(db_err)?;
                        work.deletes.push(id);
                    }
                }
            }
            Ok(work)
        })
    }

    fn document_fields(&self, collection_ids: &[i64]) -> Result<Vec<DocFields>> {
        if collection_ids.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.conn();
        conn.prepare_cached(
            "SELECT d.id, c.name, d.path, d.title, d.indexed_at, d.meta FROM documents d \
             JOIN collections c ON c.id = d.collection_id \
             WHERE d.collection_id IN (SELECT value FROM json_each(?1))",
        )
        .and_then(|mut s| {
            s.query_map([id_list(collection_ids)], |r| {
                Ok(DocFields {
                    id: r.get(0)?,
                    collection: r.get(1)?,
                    path: r.get(2)?,
                    title: r.get(3)?,
                    indexed_at: r.get(4)?,
                    meta: r.get(5)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()
        })
        .map_err(db_err)
    }

    fn documents_by_ids(&self, ids: &[i64]) -> Result<Vec<Document>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {DOCUMENT_COLUMNS} FROM documents d JOIN collections c ON c.id = d.collection_id WHERE d.id = ?1"
            ))
            .map_err(db_err)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(doc) = stmt
                .query_row([id], document_from_row)
                .optional()
                .map_err(db_err)?
            {
                out.push(doc);
            }
        }
        Ok(out)
    }

    fn document_by_path(
        &self,
        space: &str,
        collection: &str,
        path: &str,
    ) -> Result<Option<Document>> {
        let conn = self.conn();
        conn.query_row(
            &format!(
                "SELECT {DOCUMENT_COLUMNS} FROM documents d JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = ?1 AND c.name = ?2 AND d.path = ?3"
            ),
            params![space, collection, path],
            document_from_row,
        )
        .optional()
        .map_err(db_err)
    }

    fn document_by_docid(&self, space: &str, docid: &str) -> Result<Option<Document>> {
        let conn = self.conn();
        conn.query_row(
            &format!(
                "SELECT {DOCUMENT_COLUMNS} FROM documents d JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = ?1 AND d.docid = ?2"
            ),
            params![space, docid],
            document_from_row,
        )
        .optional()
        .map_err(db_err)
    }

    fn document_summaries(&self, space: &str) -> Result<Vec<DocSummary>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT d.id, c.name, d.path, d.title, d.docid, d.body_bytes FROM documents d \
                 JOIN collections c ON c.id = d.collection_id WHERE c.space = ?1 ORDER BY c.name, d.path",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([space], |r| {
                Ok(DocSummary {
                    id: r.get(0)?,
                    collection: r.get(1)?,
                    path: r.get(2)?,
                    title: r.get(3)?,
                    docid: r.get(4)?,
                    body_bytes: r.get::<_, i64>(5)? as u64,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn document_count(&self, space: &str) -> Result<u64> {
        let conn = self.conn();
        conn.query_row(
            "SELECT COUNT(*) FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.space = ?1",
            [space],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n as u64)
        .map_err(db_err)
    }

    fn collections_outside(&self, space: &str) -> Result<bool> {
        let conn = self.conn();
        conn.prepare_cached("SELECT EXISTS(SELECT 1 FROM collections WHERE space != ?1)")
            .and_then(|mut s| s.query_row([space], |r| r.get(0)))
            .map_err(db_err)
    }

    fn collection_space(&self, collection_id: i64) -> Result<Option<String>> {
        let conn = self.conn();
        conn.prepare_cached("SELECT space FROM collections WHERE id = ?1")
            .and_then(|mut s| s.query_row([collection_id], |r| r.get(0)).optional())
            .map_err(db_err)
    }

    fn set_context(&self, space: &str, path: &str, text: &str) -> Result<()> {
        self.write(|tx| {
            ensure_space(tx, space)?;
            tx.execute(
                "INSERT INTO contexts (space, path, text) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (space, path) DO UPDATE SET text = excluded.text",
                params![space, path, text],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn contexts(&self, space: &str) -> Result<Vec<Context>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT path, text FROM contexts WHERE space = ?1 ORDER BY path")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([space], |r| {
                Ok(Context {
                    path: r.get(0)?,
                    text: r.get(1)?,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
    }

    fn remove_context(&self, space: &str, path: &str) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM contexts WHERE space = ?1 AND path = ?2",
                    params![space, path],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }
}
