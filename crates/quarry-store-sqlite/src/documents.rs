//! Writing documents and collections, for every store part that does: the document rows
//! (with their docids and chunks), collection names and spaces.

use quarry_core::{Error, Result, docid_for_hash};
use rusqlite::{OptionalExtension, Transaction, params};

use quarry_store::IndexDoc;

use crate::error::db_err;
use crate::sql::{like_escape, meta_column};

/// Deletes a document's chunks, leaving ANN tombstones for them.
pub(crate) fn drop_chunks_of(tx: &Transaction<'_>, document_id: i64) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO ann_tombstones (chunk_id) SELECT id FROM chunks WHERE document_id = ?1",
    )
    .and_then(|mut s| s.execute([document_id]))
    .map_err(db_err)?;
    tx.prepare_cached("DELETE FROM chunks WHERE document_id = ?1")
        .and_then(|mut s| s.execute([document_id]))
        .map_err(db_err)?;
    Ok(())
}

/// Refuses a collection name already taken in the space (every kind shares the namespace).
pub(crate) fn ensure_name_free(tx: &Transaction<'_>, space: &str, name: &str) -> Result<()> {
    let taken: bool = tx
        .query_row(
            "SELECT EXISTS(SELECT 1 FROM collections WHERE space = ?1 AND name = ?2)",
            params![space, name],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    if taken {
        return Err(Error::Conflict(format!(
            "collection '{name}' already exists"
        )));
    }
    Ok(())
}

/// Renames a collection of any kind, carrying its contexts along.
pub(crate) fn rename_collection_tx(
    tx: &Transaction<'_>,
    space: &str,
    old: &str,
    new: &str,
) -> Result<()> {
    ensure_name_free(tx, space, new)?;
    let n = tx
        .execute(
            "UPDATE collections SET name = ?3 WHERE space = ?1 AND name = ?2",
            params![space, old, new],
        )
        .map_err(db_err)?;
    if n == 0 {
        return Err(Error::NotFound(format!("collection '{old}' not found")));
    }
    // Contexts are keyed by display path, which starts with the collection name.
    tx.execute(
        "UPDATE contexts SET path = ?3 || substr(path, length(?2) + 1) \
         WHERE space = ?1 AND (path = ?2 OR path LIKE ?4 ESCAPE '\\')",
        params![space, old, new, format!("{}/%", like_escape(old))],
    )
    .map_err(db_err)?;
    Ok(())
}

pub(crate) fn ensure_space(tx: &Transaction<'_>, space: &str) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO spaces (id, uid, created_at) VALUES (?1, ?2, ?3)",
        params![
            space,
            uuid::Uuid::new_v4().to_string(),
            quarry_core::now_millis()
        ],
    )
    .map_err(db_err)?;
    Ok(())
}

/// A new or changed document's fields ([`DocChange::Upsert`](quarry_store::DocChange::Upsert)).
pub(crate) struct UpsertDoc<'a> {
    pub path: String,
    pub title: String,
    pub hash: String,
    pub size: u64,
    pub stamp: i64,
    pub body: String,
    pub pages: &'a [quarry_core::PageSpan],
    pub furniture: &'a [quarry_core::Furniture],
    pub meta: &'a str,
    /// The knowledge-base file (row id) this is the document of: its document is found by
    /// the file, not by the path (two files of one name, for other readers, have two
    /// documents). `None`: a folder's document, one per path.
    pub kb_file: Option<i64>,
}

/// Inserts or replaces a document (a knowledge-base file's, else by collection and path),
/// marked for keyword indexing.
pub(crate) fn upsert_document(
    tx: &Transaction<'_>,
    collection_id: i64,
    doc: UpsertDoc<'_>,
    now: i64,
) -> Result<IndexDoc> {
    let UpsertDoc {
        path,
        title,
        hash,
        size,
        stamp,
        body,
        pages,
        furniture,
        meta,
        kb_file,
    } = doc;
    let meta = meta_column(meta);
    let pages = quarry_core::encode_pages(pages);
    let spans = furniture;
    let furniture = quarry_core::encode_furniture(spans);
    let existing: Option<(i64, String, String, bool)> = tx
        .prepare_cached(
            "SELECT id, hash, docid, body = ?3 AND pages = ?4 AND furniture = ?5 \
             FROM documents WHERE CASE WHEN ?6 IS NULL \
               THEN collection_id = ?1 AND path = ?2 AND kb_file IS NULL ELSE kb_file = ?6 END",
        )
        .and_then(|mut s| {
            s.query_row(
                params![collection_id, path, body, pages, furniture, kb_file],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
        })
        .map_err(db_err)?;
    // New content makes the old chunks wrong: drop them (and from the ANN
    // index, via tombstones) in the same transaction. So does the same file converted again
    // into other Markdown, pages or furniture (a newer converter): its chunks are cut again.
    if let Some((id, old_hash, _, same_layout)) = &existing
        && (*old_hash != hash || !same_layout)
    {
        drop_chunks_of(tx, *id)?;
        tx.prepare_cached("UPDATE documents SET chunked_hash = NULL WHERE id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(db_err)?;
    }
    // Same content keeps its docid (a re-converted upload); new content gets the shortest
    // free one.
    let docid = match &existing {
        Some((_, old_hash, docid, _)) if *old_hash == hash => docid.clone(),
        Some((id, _, _, _)) => free_docid(tx, &docid_basis(tx, collection_id, &hash)?, Some(*id))?,
        None => free_docid(tx, &docid_basis(tx, collection_id, &hash)?, None)?,
    };
    // In the writer's transaction, right after the look-up: the row found is the row
    // replaced (a knowledge-base file's also takes the file's current name).
    let id: i64 = match &existing {
        Some((id, ..)) => tx
            .prepare_cached(
                "UPDATE documents SET path = ?2, title = ?3, hash = ?4, docid = ?5, size = ?6, \
                 stamp = ?7, body = ?8, body_bytes = ?9, indexed_at = ?10, pages = ?11, \
                 furniture = ?12, meta = ?13 WHERE id = ?1 RETURNING id",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        id,
                        path,
                        title,
                        hash,
                        docid,
                        size as i64,
                        stamp,
                        body,
                        body.len() as i64,
                        now,
                        pages,
                        furniture,
                        meta
                    ],
                    |r| r.get(0),
                )
            }),
        None => tx
            .prepare_cached(
                "INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, \
                 body_bytes, indexed_at, pages, furniture, meta, kb_file) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) RETURNING id",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        collection_id,
                        path,
                        title,
                        hash,
                        docid,
                        size as i64,
                        stamp,
                        body,
                        body.len() as i64,
                        now,
                        pages,
                        furniture,
                        meta,
                        kb_file
                    ],
                    |r| r.get(0),
                )
            }),
    }
    .map_err(db_err)?;
    Ok(IndexDoc {
        id,
        collection_id,
        path,
        title,
        body: quarry_core::into_indexed_body(body, spans),
        indexed_at: now,
        meta: meta.to_owned(),
    })
}

/// What a document's docid is cut from. In the default space it is the content hash (QMD's
/// docid); in any other space it is a hash of the space's UUID and the content hash, so a
/// docid — and whether it had to grow past 6 characters — says nothing about what another
/// space holds.
fn docid_basis(tx: &Transaction<'_>, collection_id: i64, hash: &str) -> Result<String> {
    let (space, uid): (String, Option<String>) = tx
        .prepare_cached(
            "SELECT s.id, s.uid FROM collections c JOIN spaces s ON s.id = c.space WHERE c.id = ?1",
        )
        .and_then(|mut st| st.query_row([collection_id], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(db_err)?;
    Ok(if space == quarry_core::DEFAULT_SPACE {
        hash.to_owned()
    } else {
        quarry_core::sha256_hex(format!("{}:{hash}", uid.unwrap_or(space)).as_bytes())
    })
}

/// The shortest docid (≥ 6 hex) for `hash` not taken by another document.
fn free_docid(tx: &Transaction<'_>, hash: &str, own_id: Option<i64>) -> Result<String> {
    let mut stmt = tx
        .prepare_cached("SELECT id FROM documents WHERE docid = ?1")
        .map_err(db_err)?;
    for len in 6..=hash.len() {
        let candidate = docid_for_hash(hash, len);
        let holder: Option<i64> = stmt
            .query_row([&candidate], |r| r.get(0))
            .optional()
            .map_err(db_err)?;
        match holder {
            None => return Ok(candidate),
            Some(id) if Some(id) == own_id => return Ok(candidate),
            Some(_) => continue,
        }
    }
    Err(Error::Storage(format!("no free docid for hash {hash}")))
}
