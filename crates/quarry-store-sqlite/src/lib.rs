//! The embedded [`Store`]: one SQLite database in WAL mode.
//!
//! WAL lets any number of readers run while one writer writes, so a search never sees
//! "database is locked"; writers wait on `busy_timeout` (the engine also serialises writers
//! with a lock file). `synchronous = FULL` makes every acknowledged commit durable.
//!
//! In one process, writes go through one connection ([`SqliteStore::write`]) and reads
//! through a pool of read-only ones ([`SqliteStore::conn`]): with a single connection every
//! search of every client waited for every other store call, and for each commit's fsync
//! (issue 46: 8 clients got no more queries per second than 1).

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use quarry_core::{Collection, CollectionKind, Context, Document, Error, Result, docid_for_hash};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use quarry_store::{
    ChunkEdit, ChunkRef, ChunkSource, CollectionStore, DocChange, DocChunks, DocFields, DocSummary,
    EmbedJob, EmbeddedBatch, EmbeddingState, FeedBatch, FeedPosition, FeedStore, FileState,
    IndexCensus, IndexDoc, IndexWork, RecentEmbedding, SemanticStore, SessionStore, SettingsStore,
};

/// The newest schema version: the last of [`MIGRATIONS`].
const SCHEMA_VERSION: i64 = 34;

/// `(version, SQL)`, oldest first: the files in `migrations/`, each bringing the schema from
/// the version before it to its own. Version 4 also gives old rows their UUIDs ([`assign_uids`]).
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/v01.sql")),
    (2, include_str!("../migrations/v02.sql")),
    (3, include_str!("../migrations/v03.sql")),
    (4, include_str!("../migrations/v04.sql")),
    (5, include_str!("../migrations/v05.sql")),
    (6, include_str!("../migrations/v06.sql")),
    (7, include_str!("../migrations/v07.sql")),
    (8, include_str!("../migrations/v08.sql")),
    (9, include_str!("../migrations/v09.sql")),
    (10, include_str!("../migrations/v10.sql")),
    (11, include_str!("../migrations/v11.sql")),
    (12, include_str!("../migrations/v12.sql")),
    (13, include_str!("../migrations/v13.sql")),
    (14, include_str!("../migrations/v14.sql")),
    (15, include_str!("../migrations/v15.sql")),
    (16, include_str!("../migrations/v16.sql")),
    (17, include_str!("../migrations/v17.sql")),
    (18, include_str!("../migrations/v18.sql")),
    (19, include_str!("../migrations/v19.sql")),
    (20, include_str!("../migrations/v20.sql")),
    (21, include_str!("../migrations/v21.sql")),
    (22, include_str!("../migrations/v22.sql")),
    (23, include_str!("../migrations/v23.sql")),
    (24, include_str!("../migrations/v24.sql")),
    (25, include_str!("../migrations/v25.sql")),
    (26, include_str!("../migrations/v26.sql")),
    (27, include_str!("../migrations/v27.sql")),
    (28, include_str!("../migrations/v28.sql")),
    (29, include_str!("../migrations/v29.sql")),
    (30, include_str!("../migrations/v30.sql")),
    (31, include_str!("../migrations/v31.sql")),
    (32, include_str!("../migrations/v32.sql")),
    (33, include_str!("../migrations/v33.sql")),
    (34, include_str!("../migrations/v34.sql")),
];

/// The feed's last sequence number (0 before its first entry).
fn feed_head(tx: &Connection) -> Result<i64> {
    tx.query_row(
        "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'feed'), 0)",
        [],
        |r| r.get(0),
    )
    .map_err(db_err)
}

/// Documents as the keyword index takes them, from `sql` selecting
/// `id, collection_id, path, title, body, furniture, indexed_at, meta`.
/// The index work for documents `ids` as they are now ([`IndexWork::of`]).
fn index_work_of(tx: &Connection, ids: &[i64]) -> Result<IndexWork> {
    let found = if ids.is_empty() {
        Vec::new()
    } else {
        index_docs(
            tx,
            "SELECT id, collection_id, path, title, body, furniture, indexed_at, meta \
             FROM documents WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id",
            [knowledge::id_list(ids)],
        )?
    };
    Ok(IndexWork::of(ids, found))
}

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

/// Gives every space and collection without one a UUID (rows from before version 4).
fn assign_uids(conn: &Connection) -> rusqlite::Result<()> {
    for table in ["spaces", "collections"] {
        let keys: Vec<String> = conn
            .prepare(&format!(
                "SELECT CAST(id AS TEXT) FROM {table} WHERE uid IS NULL"
            ))?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for key in keys {
            conn.execute(
                &format!("UPDATE {table} SET uid = ?2 WHERE CAST(id AS TEXT) = ?1"),
                params![key, uuid::Uuid::new_v4().to_string()],
            )?;
        }
    }
    Ok(())
}

mod access;
mod audit;
mod chat;
mod copy;
#[cfg(test)]
mod embed_text_tests;
mod entries;
mod hub;
mod knowledge;
mod oauth;
mod policies;
mod sources;

/// SQLite-backed [`Store`].
pub struct SqliteStore {
    path: PathBuf,
    /// The one connection that writes.
    writer: Mutex<Connection>,
    /// Idle read-only connections (at most [`IDLE_READERS`]); a read that finds none opens
    /// another.
    readers: Mutex<Vec<Connection>>,
}

/// Read connections kept open between reads: more than the threads that read at once on a
/// busy server (each keeps its own page and statement caches warm).
const IDLE_READERS: usize = 16;

/// A connection for reading: a pooled read-only one, or — when another cannot be opened
/// (file descriptors exhausted) — the writer's, as before the pool.
pub(crate) enum ReadConn<'a> {
    Pooled {
        conn: Option<Connection>,
        pool: &'a Mutex<Vec<Connection>>,
    },
    Writer(MutexGuard<'a, Connection>),
}

impl Deref for ReadConn<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        match self {
            // `conn` is only taken in `drop`.
            ReadConn::Pooled { conn: Some(c), .. } => c,
            ReadConn::Pooled { conn: None, .. } => {
                unreachable!("a read connection used after drop")
            }
            ReadConn::Writer(g) => g,
        }
    }
}

impl DerefMut for ReadConn<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        match self {
            ReadConn::Pooled { conn: Some(c), .. } => c,
            ReadConn::Pooled { conn: None, .. } => {
                unreachable!("a read connection used after drop")
            }
            ReadConn::Writer(g) => g,
        }
    }
}

impl Drop for ReadConn<'_> {
    fn drop(&mut self) {
        if let ReadConn::Pooled { conn, pool } = self
            && let Some(c) = conn.take()
        {
            let mut idle = pool.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < IDLE_READERS {
                idle.push(c);
            }
        }
    }
}

/// Settings every connection of this store runs with.
fn configure(conn: &Connection) -> Result<()> {
    conn.busy_timeout(Duration::from_secs(30)).map_err(db_err)?;
    // A stable plan per statement: without it, the bundled SQLite (built with STAT4)
    // marks bound parameters as plan-relevant and recompiles a cached statement on every
    // new binding — half of a token check's time went to re-preparing its two queries.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(db_err)?;
    Ok(())
}

fn db_err(e: rusqlite::Error) -> Error {
    Error::storage(&e)
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    )
}

/// A unique-constraint violation as `Conflict` with `message`, anything else as a storage error.
fn conflict_or_db(e: rusqlite::Error, message: impl FnOnce() -> String) -> Error {
    if is_unique_violation(&e) {
        Error::Conflict(message())
    } else {
        db_err(e)
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path).map_err(|e| {
            Error::Storage(format!(
                "cannot open database {}: {}",
                path.display(),
                quarry_core::error_chain(&e)
            ))
        })?;
        configure(&conn)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
        )
        .map_err(db_err)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(db_err)?;
        if version > SCHEMA_VERSION {
            return Err(Error::Storage(format!(
                "database {} has schema version {version}, newer than this quarry ({SCHEMA_VERSION}); upgrade quarry",
                path.display()
            )));
        }
        if version < SCHEMA_VERSION {
            migrate(&conn).map_err(|e| {
                Error::Storage(format!("cannot upgrade database {}: {e}", path.display()))
            })?;
        }
        Ok(SqliteStore {
            path: path.to_owned(),
            writer: Mutex::new(conn),
            readers: Mutex::new(Vec::new()),
        })
    }

    /// A connection to read with (read-only: a write through it fails).
    #[track_caller]
    pub(crate) fn conn(&self) -> ReadConn<'_> {
        quarry_store::thread_guard::check();
        let idle = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => match self.open_reader() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open another read connection; reading through the writer's");
                    return ReadConn::Writer(self.writer());
                }
            },
        };
        ReadConn::Pooled {
            conn: Some(conn),
            pool: &self.readers,
        }
    }

    fn open_reader(&self) -> Result<Connection> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(db_err)?;
        configure(&conn)?;
        Ok(conn)
    }

    #[track_caller]
    fn writer(&self) -> MutexGuard<'_, Connection> {
        quarry_store::thread_guard::check();
        // A panic while holding the lock leaves SQLite consistent (transactions roll back),
        // so a poisoned mutex is safe to keep using.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.writer();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let out = f(&tx)?;
        tx.commit().map_err(db_err)?;
        Ok(out)
    }
}

/// The columns of a chunk text to embed (`chunks k` joined to `documents d`), read by
/// [`embed_span_row`]: the chunk's span of the body, never the body. A query that named
/// `d.body` here read (and, grouped or sorted, kept) the whole body once per chunk: claiming
/// 256 texts of a 4,000-chunk document held 4,000 copies of its 4 MB body at once (issue 65:
/// 20.5 GB), and the time grew with the square of the document. [`embed_texts`] reads each
/// body once and cuts the spans in Rust.
pub(crate) const EMBED_TEXT_COLUMNS: &str =
    "k.hash, d.title, k.heading, k.document_id, k.byte_start, k.byte_end, k.text";

/// A row of [`EMBED_TEXT_COLUMNS`]: a chunk text to embed, its span not yet cut.
pub(crate) struct EmbedSpan {
    job: EmbedJob,
    document_id: i64,
    start: i64,
    end: i64,
    /// An edited chunk's own text (then no span is cut).
    edited: bool,
}

/// A row of [`EMBED_TEXT_COLUMNS`].
pub(crate) fn embed_span_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EmbedSpan> {
    let text: Option<String> = r.get(6)?;
    Ok(EmbedSpan {
        edited: text.is_some(),
        job: EmbedJob {
            hash: r.get(0)?,
            title: r.get(1)?,
            heading: r.get(2)?,
            text: text.unwrap_or_default(),
        },
        document_id: r.get(3)?,
        start: r.get(4)?,
        end: r.get(5)?,
    })
}

/// The chunk texts of `spans`, in order: an edited chunk's text, else its span cut from the
/// body, each body read once and let go before the next (memory: one body and the texts,
/// whatever the documents' sizes).
pub(crate) fn embed_texts(conn: &Connection, spans: Vec<EmbedSpan>) -> Result<Vec<EmbedJob>> {
    let mut by_doc: HashMap<i64, Vec<usize>> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        if !s.edited {
            by_doc.entry(s.document_id).or_default().push(i);
        }
    }
    let mut texts: Vec<Option<String>> = vec![None; spans.len()];
    let mut body_of = conn
        .prepare_cached("SELECT body FROM documents WHERE id = ?1")
        .map_err(db_err)?;
    for (doc, rows) in by_doc {
        let body: String = body_of
            .query_row([doc], |r| r.get(0))
            .optional()
            .map_err(db_err)?
            .unwrap_or_default();
        for i in rows {
            texts[i] = Some(quarry_store::byte_span(&body, spans[i].start, spans[i].end));
        }
    }
    Ok(spans
        .into_iter()
        .zip(texts)
        .map(|(s, text)| match text {
            Some(text) => EmbedJob { text, ..s.job },
            None => s.job,
        })
        .collect())
}

/// Brings the schema to [`SCHEMA_VERSION`] in one immediate transaction. The version is read
/// again inside it: two processes opening an old database at once must not both migrate.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let step = || -> rusqlite::Result<()> {
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for &(to, sql) in MIGRATIONS {
            if version < to {
                conn.execute_batch(sql)?;
                if to == 4 {
                    assign_uids(conn)?;
                }
            }
        }
        conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
    };
    match step() {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Builds the schema of `version` exactly as the migrations of that time left it, for tests
/// that upgrade an old database.
#[cfg(test)]
pub(crate) fn schema_at(conn: &Connection, version: i64) {
    for &(to, sql) in MIGRATIONS.iter().take_while(|(to, _)| *to <= version) {
        if let Err(e) = conn.execute_batch(sql) {
            panic!("migration {to}: {e}");
        }
    }
}

/// Deletes a document's chunks, leaving ANN tombstones for them.
fn drop_chunks_of(tx: &Transaction<'_>, document_id: i64) -> Result<()> {
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
fn ensure_name_free(tx: &Transaction<'_>, space: &str, name: &str) -> Result<()> {
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
fn rename_collection_tx(tx: &Transaction<'_>, space: &str, old: &str, new: &str) -> Result<()> {
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

fn ensure_space(tx: &Transaction<'_>, space: &str) -> Result<()> {
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

/// A new or changed document's fields ([`DocChange::Upsert`]).
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
    let meta = knowledge::meta_column(meta);
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
            s.query_map([knowledge::id_list(collection_ids)], |r| {
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

impl SessionStore for SqliteStore {
    fn mcp_session(&self, id: &str) -> Result<Option<String>> {
        self.conn()
            .query_row("SELECT state FROM mcp_sessions WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(db_err)
    }

    fn put_mcp_session(&self, id: &str, state: &str) -> Result<()> {
        self.write(|tx| {
            let now = quarry_core::now_millis();
            tx.execute(
                "DELETE FROM mcp_sessions WHERE updated_at < ?1",
                [now - quarry_store::MCP_SESSION_KEPT_MS],
            )
            .map_err(db_err)?;
            tx.execute(
                "INSERT INTO mcp_sessions (id, state, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                params![id, state, now],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn delete_mcp_session(&self, id: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM mcp_sessions WHERE id = ?1", [id])
                .map_err(db_err)?;
            Ok(())
        })
    }
}

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
        let allowed = collections.map(knowledge::id_list);
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
        let ids = knowledge::id_list(document_ids);
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

impl SettingsStore for SqliteStore {
    fn meta(&self, key: &str) -> Result<Option<String>> {
        let conn = self.conn();
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(db_err)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn cached_expansion(&self, model: &str, query: &str) -> Result<Option<Vec<String>>> {
        let conn = self.conn();
        let v: Option<String> = conn
            .query_row(
                "SELECT variants FROM expansions WHERE model = ?1 AND query = ?2",
                params![model, query],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        Ok(v.map(|s| {
            s.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        }))
    }

    fn cache_expansion(&self, model: &str, query: &str, variants: &[String]) -> Result<()> {
        // Variants are single lines (the expander splits on newlines), so newline-joined is exact.
        let joined = variants
            .iter()
            .map(|v| v.replace(['\n', '\r'], " "))
            .collect::<Vec<_>>()
            .join("\n");
        self.write(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO expansions (model, query, variants, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![model, query, joined, quarry_core::now_millis()],
            )
            .map_err(db_err)?;
            Ok(())
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

/// Vectors are stored as little-endian `f32`s.
fn vector_to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn blob_to_vector(b: &[u8]) -> Result<Vec<f32>> {
    if !b.len().is_multiple_of(4) {
        return Err(Error::Storage(format!(
            "stored vector has {} bytes, not a whole number of f32s",
            b.len()
        )));
    }
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default space's documents whose chunks are missing or stale.
    fn to_chunk(store: &SqliteStore) -> Result<Vec<ChunkSource>> {
        let ids: Vec<i64> = store
            .document_summaries("default")?
            .iter()
            .map(|d| d.id)
            .collect();
        store.chunk_sources(&ids)
    }

    fn upsert(path: &str, hash: &str) -> DocChange {
        DocChange::Upsert {
            meta: Default::default(),
            path: path.into(),
            title: path.into(),
            hash: hash.into(),
            size: 1,
            stamp: 1,
            body: "body".into(),
            pages: Vec::new(),
            furniture: Vec::new(),
        }
    }

    #[test]
    fn docid_collisions_get_longer_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
        let c = store
            .create_collection("default", "c", CollectionKind::Folder, "/x", "**/*.md")
            .unwrap();
        store
            .apply_changes(
                c.id,
                vec![
                    upsert("a.md", "abcdef111111"),
                    upsert("b.md", "abcdef222222"),
                    upsert("c.md", "abcdef111111"),
                ],
            )
            .unwrap();
        let ids: Vec<String> = store
            .document_summaries("default")
            .unwrap()
            .into_iter()
            .map(|d| d.docid)
            .collect();
        assert_eq!(ids, ["#abcdef", "#abcdef2", "#abcdef1"]);
    }

    #[test]
    fn rename_moves_contexts_and_refuses_clash() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
        for n in ["a", "b"] {
            store
                .create_collection("default", n, CollectionKind::Folder, "/x", "**/*.md")
                .unwrap();
        }
        store.set_context("default", "a/notes", "n").unwrap();
        store.set_context("default", "ab/x", "other").unwrap();
        assert!(matches!(
            store.rename_collection("default", "a", "b"),
            Err(Error::Conflict(_))
        ));
        store.rename_collection("default", "a", "z").unwrap();
        let paths: Vec<String> = store
            .contexts("default")
            .unwrap()
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(paths, ["ab/x", "z/notes"]);
    }

    fn chunk(start: usize, end: usize, hash: &str) -> quarry_store::NewChunk {
        quarry_store::NewChunk {
            page: None,
            heading: String::new(),
            byte_start: start,
            byte_end: end,
            line_start: 1,
            line_end: 1,
            hash: hash.into(),
            text: None,
        }
    }

    #[test]
    fn migrations_run_from_one_to_the_schema_version_without_gaps() {
        let versions: Vec<i64> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
        // Every file applies on top of the ones before it, and a new database ends there.
        let conn = Connection::open_in_memory().unwrap();
        schema_at(&conn, SCHEMA_VERSION);
    }

    #[test]
    fn version_1_databases_are_upgraded_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        {
            let conn = Connection::open(&path).unwrap();
            schema_at(&conn, 1);
            conn.execute_batch(
                "PRAGMA user_version = 1; \
                 INSERT INTO spaces VALUES ('default', 0); \
                 INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'c', 'folder', '/x', '*.md', 0); \
                 INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, body_bytes, fts_dirty, indexed_at) \
                 VALUES (1, 'a.md', 'A', 'aaaaaaaa', '#aaaaaa', 4, 1, 'body', 4, 0, 0);",
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let version: i64 = store
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let todo = to_chunk(&store).unwrap();
        assert_eq!(todo.len(), 1);
        assert_eq!(todo[0].body, "body");
        // Opening again does not migrate twice.
        drop(store);
        SqliteStore::open(&path).unwrap();
    }

    #[test]
    fn version_33_databases_keep_their_rows_when_names_go_per_readers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        {
            let conn = Connection::open(&path).unwrap();
            schema_at(&conn, 33);
            conn.execute_batch(
                "PRAGMA user_version = 33; PRAGMA foreign_keys = ON; \
                 INSERT INTO spaces (id, created_at) VALUES ('default', 0); \
                 INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'kb', 'knowledge_base', '', '', 0); \
                 INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'f', 'folder', '/x', '*.md', 0); \
                 INSERT INTO documents (id, collection_id, path, title, hash, docid, size, stamp, body, body_bytes, indexed_at) \
                 VALUES (7, 1, 'a.md', 'A', 'aaaaaaaa', '#aaaaaa', 4, 0, 'body', 4, 0), \
                        (8, 2, 'b.md', 'B', 'bbbbbbbb', '#bbbbbb', 4, 7, 'body', 4, 0), \
                        (40, 2, 'gone.md', 'G', 'cccccccc', '#cccccc', 4, 7, 'body', 4, 0); \
                 DELETE FROM documents WHERE id = 40; \
                 INSERT INTO kb_files (id, uid, collection_id, name, original_name, blob, format, mime, size, status, created_at, updated_at, document_id) \
                 VALUES (3, 'u3', 1, 'a.md', 'a.md', 'aaaaaaaa', 'md', 'text/markdown', 4, 'ready', 0, 0, 7), \
                        (90, 'u90', 1, 'x.md', 'x.md', 'dddddddd', 'md', 'text/markdown', 4, 'ready', 0, 0, NULL); \
                 DELETE FROM kb_files WHERE id = 90; \
                 INSERT INTO chunk_edits (document_id, key, text, disabled, edited_by, edited_at) VALUES (7, 'k', 'edited', 0, 'ann', 0);",
            )
            .unwrap();
        }
        let feed = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM feed", [], |r| r.get(0))
                .unwrap()
        };
        let before = feed(&Connection::open(&path).unwrap());
        let store = SqliteStore::open(&path).unwrap();
        let conn = store.conn();
        assert_eq!(feed(&conn), before, "no document enters the feed");
        let owners: Vec<(i64, Option<i64>)> = conn
            .prepare("SELECT id, kb_file FROM documents ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(owners, [(7, Some(3)), (8, None)]);
        let edits: i64 = conn
            .query_row(
                "SELECT count(*) FROM chunk_edits WHERE document_id = 7",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(edits, 1, "curation edits survive the rebuild");
        let seq = |table: &str| -> i64 {
            conn.query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(
            (seq("documents"), seq("kb_files")),
            (40, 90),
            "ids are never handed out again"
        );
        drop(conn);
        let found = quarry_store::KnowledgeStore::kb_file(&store, 1, "a.md").unwrap();
        assert_eq!(found.map(|f| f.row_id), Some(3));
    }

    #[test]
    fn version_20_documents_with_front_matter_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        {
            let conn = Connection::open(&path).unwrap();
            schema_at(&conn, 20);
            conn.execute_batch(
                "PRAGMA user_version = 20; \
                 INSERT INTO spaces (id, created_at) VALUES ('default', 0); \
                 INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'c', 'folder', '/x', '*.md', 0); \
                 INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, body_bytes, indexed_at) \
                 VALUES (1, 'a.md', 'A', 'aaaaaaaa', '#aaaaaa', 4, 7, '---
tag: x
---
body', 4, 0), \
                        (1, 'b.md', 'B', 'bbbbbbbb', '#bbbbbb', 4, 7, '# B

body', 4, 0);",
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let states = store.file_states(1).unwrap();
        assert_eq!(
            (states["a.md"].hash.as_str(), states["a.md"].stamp),
            ("", 0)
        );
        assert_eq!(
            (states["b.md"].hash.as_str(), states["b.md"].stamp),
            ("bbbbbbbb", 7)
        );
        let docs = store.documents_by_ids(&[1, 2]).unwrap();
        assert!(docs.iter().all(|d| d.meta == "{}"));
    }

    #[test]
    fn version_7_databases_gain_furniture_and_headings_and_are_chunked_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        {
            let conn = Connection::open(&path).unwrap();
            schema_at(&conn, 7);
            conn.execute_batch(
                "PRAGMA user_version = 7; \
                 INSERT INTO spaces (id, created_at) VALUES ('default', 0); \
                 INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'c', 'folder', '/x', '*.pdf', 0); \
                 INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, body_bytes, fts_dirty, indexed_at, pages, chunked_hash) \
                 VALUES (1, 'a.pdf', 'A', 'aaaaaaaa', '#aaaaaa', 4, 1, 'body', 4, 0, 0, '1:0:4', 'aaaaaaaa'); \
                 INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, line_end, hash, ann_dirty, page) \
                 VALUES (1, 0, 0, 4, 1, 1, 'k0', 0, 1);",
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let version: i64 = store
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        // The old chunk still serves, without a heading, until the document is cut again.
        let old = store.chunks_of_documents(&[1]).unwrap();
        assert_eq!((old.len(), old[0].heading.as_str()), (1, ""));
        let todo = to_chunk(&store).unwrap();
        assert_eq!(todo.len(), 1, "every document is cut again");
        assert!(todo[0].furniture.is_empty());
        store
            .replace_chunks(&[DocChunks {
                document_id: 1,
                doc_hash: "aaaaaaaa".into(),
                chunks: vec![quarry_store::NewChunk {
                    heading: "3 Root › 3.15 /tmp".into(),
                    ..chunk(0, 4, "k1")
                }],
            }])
            .unwrap();
        let refs = store.chunks_of_documents(&[1]).unwrap();
        assert_eq!(refs[0].heading, "3 Root › 3.15 /tmp");
        assert_eq!(
            store.chunk_refs(&[refs[0].id]).unwrap()[0].heading,
            refs[0].heading
        );
        let jobs = store.embed_jobs("default", None, "m", None).unwrap();
        assert_eq!(jobs[0].heading, "3 Root › 3.15 /tmp");
        // Opening again does not migrate twice (nor cut everything again).
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        assert!(to_chunk(&store).unwrap().is_empty());
    }

    #[test]
    fn furniture_is_kept_and_a_new_layout_of_the_same_file_is_cut_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
        let c = store
            .create_collection("default", "c", CollectionKind::Folder, "/x", "**/*.pdf")
            .unwrap();
        let toc = quarry_core::Furniture {
            kind: quarry_core::FurnitureKind::Contents,
            byte_start: 0,
            byte_end: 2,
        };
        let with = |furniture: Vec<quarry_core::Furniture>| DocChange::Upsert {
            meta: Default::default(),
            path: "a.pdf".into(),
            title: "A".into(),
            hash: "h1111111".into(),
            size: 1,
            stamp: 1,
            body: "body".into(),
            pages: Vec::new(),
            furniture,
        };
        let work = store.apply_changes(c.id, vec![with(vec![toc])]).unwrap();
        let id = work.upserts[0].id;
        assert_eq!(store.documents_by_ids(&[id]).unwrap()[0].furniture, [toc]);
        let todo = to_chunk(&store).unwrap();
        assert_eq!(todo[0].furniture, [toc]);
        let cut = || {
            store
                .replace_chunks(&[DocChunks {
                    document_id: id,
                    doc_hash: "h1111111".into(),
                    chunks: vec![chunk(2, 4, "k1")],
                }])
                .unwrap()
        };
        cut();
        // The same file converted the same way keeps its chunks.
        store.apply_changes(c.id, vec![with(vec![toc])]).unwrap();
        assert_eq!(store.chunks_of_documents(&[id]).unwrap().len(), 1);
        assert!(to_chunk(&store).unwrap().is_empty());
        // Converted again with other furniture (a newer converter): cut again.
        store.apply_changes(c.id, vec![with(Vec::new())]).unwrap();
        assert!(store.chunks_of_documents(&[id]).unwrap().is_empty());
        assert_eq!(to_chunk(&store).unwrap().len(), 1);
        assert!(
            store.documents_by_ids(&[id]).unwrap()[0]
                .furniture
                .is_empty()
        );
    }

    #[test]
    fn chunks_embeddings_and_ann_flags_follow_the_documents() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
        let c = store
            .create_collection("default", "c", CollectionKind::Folder, "/x", "**/*.md")
            .unwrap();
        let work = store
            .apply_changes(c.id, vec![upsert("a.md", "h1111111")])
            .unwrap();
        let doc = work.upserts[0].id;
        // Chunks cut from content that has since changed are refused.
        store
            .replace_chunks(&[DocChunks {
                document_id: doc,
                doc_hash: "stale".into(),
                chunks: vec![chunk(0, 4, "x")],
            }])
            .unwrap();
        assert_eq!(
            store.embedding_state("default", None, None).unwrap().chunks,
            0
        );
        store
            .replace_chunks(&[DocChunks {
                document_id: doc,
                doc_hash: "h1111111".into(),
                chunks: vec![chunk(0, 2, "k1"), chunk(2, 4, "k1"), chunk(0, 4, "k2")],
            }])
            .unwrap();
        assert!(to_chunk(&store).unwrap().is_empty());
        // Distinct texts only, sliced by byte range.
        let jobs = store.embed_jobs("default", None, "m", None).unwrap();
        assert_eq!(jobs.len(), 2);
        assert!(jobs.iter().any(|j| j.hash == "k2" && j.text == "body"));
        store
            .put_embeddings("m", &[("k1".into(), vec![1.0, 0.0])])
            .unwrap();
        assert_eq!(
            store.embed_jobs("default", None, "m", None).unwrap().len(),
            1
        );
        assert_eq!(
            store
                .embed_jobs("default", None, "other", None)
                .unwrap()
                .len(),
            2
        );
        let dirty = store.ann_dirty_chunks("m", 0, 10).unwrap();
        assert_eq!(dirty.len(), 2, "both chunks with text k1 have a vector");
        assert_eq!(dirty[0].1, vec![1.0, 0.0]);
        let ids: Vec<i64> = dirty.iter().map(|d| d.0).collect();
        store.ann_done(&[], &ids).unwrap();
        assert!(store.ann_dirty_chunks("m", 0, 10).unwrap().is_empty());
        assert_eq!(
            store
                .embedding_state("default", None, Some("m"))
                .unwrap()
                .documents_pending,
            1,
            "chunk k2 has no vector yet"
        );
        // New content: the old chunks go, leaving tombstones for the ANN index.
        store
            .apply_changes(c.id, vec![upsert("a.md", "h2222222")])
            .unwrap();
        let mut tomb = store.ann_tombstones().unwrap();
        tomb.sort();
        let mut all = ids.clone();
        all.push(ids[1] + 1);
        all.sort();
        assert_eq!(tomb, all);
        assert_eq!(to_chunk(&store).unwrap().len(), 1);
        store.ann_done(&tomb, &[]).unwrap();
        assert!(store.ann_tombstones().unwrap().is_empty());
        // A model switch re-flags every chunk; vectors of other models stay stored.
        store
            .replace_chunks(&[DocChunks {
                document_id: doc,
                doc_hash: "h2222222".into(),
                chunks: vec![chunk(0, 4, "k1")],
            }])
            .unwrap();
        let fresh: Vec<i64> = store
            .ann_dirty_chunks("m", 0, 10)
            .unwrap()
            .iter()
            .map(|d| d.0)
            .collect();
        store.ann_done(&[], &fresh).unwrap();
        store.ann_reset().unwrap();
        assert_eq!(store.ann_dirty_chunks("m", 0, 10).unwrap().len(), 1);
        // Removing the collection drops its chunks with tombstones.
        store.remove_collection("default", "c").unwrap();
        assert_eq!(store.ann_tombstones().unwrap(), fresh);
    }
}
