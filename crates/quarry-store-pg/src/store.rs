//! Documents, collections, the change feed, chunks and vectors on PostgreSQL.
//!
//! Locking, so that several nodes writing at once stay correct without SQLite's single
//! writer:
//! - **Writers that allocate docids lock the docids they may take**: every docid a content
//!   hash can get starts with the same six hex digits, so a transaction-scoped advisory lock
//!   on those six (in `DOCID_LOCKS`' key space) makes reading which docids are free and then
//!   taking one safe, while writers of other content go on at once. A batch takes all its
//!   locks in one order, after its row locks and before it writes; a single document takes
//!   its one lock last.
//! - **The feed is read in transaction order** (`(txid, seq)`, only below the oldest
//!   running transaction: `feed_read`), so writers need not commit in `seq` order and
//!   several nodes write documents at once.
//! - **Document rows are locked in id order** (`SELECT … ORDER BY id FOR UPDATE`) by every
//!   method here that locks more than one, so two of them never deadlock.
//! - **Rows of different tables are locked in one order**: a source, its collection, a
//!   file's job, the file, documents. Removing a collection takes all of them in that order
//!   before it deletes anything; a writer that puts a document into a knowledge base holds
//!   the collection (at least `FOR KEY SHARE`, what the foreign-key check takes) before it
//!   locks a file's job (`knowledge.rs`).
//! - **Names sort by bytes** (`COLLATE "C"`), as on SQLite, whatever the database's locale.
//! - **Feed consumers** are registered, moved and forgotten under `FEED_CONSUMERS_LOCK`, so
//!   trimming never drops an entry that a consumer registering at the same moment needs.

use std::collections::{HashMap, HashSet};

use pgvector::HalfVector;
use postgres::Statement;
use postgres::row::Row;
use quarry_core::{Collection, CollectionKind, Context, Document, Error, Result, docid_for_hash};
use quarry_store::{
    ChunkEdit, ChunkRef, ChunkSource, CollectionStore, DocChange, DocChunks, DocFields, DocSummary,
    EmbedJob, EmbeddedBatch, EmbeddingState, FeedBatch, FeedPosition, FeedStore, FileState,
    IndexCensus, IndexDoc, IndexWork, NewChunk, RecentEmbedding, SemanticStore, SessionStore,
    SettingsStore,
};

use crate::error::{conflict_or_db, db_err};
use crate::pg_store::PgStore;
use crate::pool::PgConnection;
use crate::sql::{col, lock, to_i64};

/// The key space of the docid locks (`pg_advisory_xact_lock(DOCID_LOCKS, key)`, apart from
/// the single-number locks): document writers lock the six-digit prefix of the docids they
/// may take, so writers of different content never wait for each other (see the module docs).
/// The feed needs no such lock: it is read in transaction order.
const DOCID_LOCKS: i32 = 0x5144_4944;

/// Serialises registering, acknowledging and forgetting feed consumers with trimming the
/// feed: a consumer registering at the feed's head while another's acknowledgement trims it
/// must either be seen by the trim or register after it.
const FEED_CONSUMERS_LOCK: i64 = 7_245_190_455_173_122_060;

impl CollectionStore for PgStore {
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
            // The unique (space, name) decides a race between two nodes.
            let row = tx
                .query_one(
                    "INSERT INTO collections (space, name, kind, path, pattern, created_at, uid) \
                     VALUES ($1, $2, $3, $4, $5, quarry_now_ms(), $6) RETURNING id",
                    &[
                        &space,
                        &name,
                        &kind.as_str(),
                        &path,
                        &pattern,
                        &uuid::Uuid::new_v4().to_string(),
                    ],
                )
                .map_err(|e| conflict_or_db(e, || name_taken(name)))?;
            Ok(Collection {
                id: col(&row, 0)?,
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
        let rows = self
            .conn()?
            .query(
                &format!(
                    "SELECT {COLLECTION_COLUMNS} FROM collections c WHERE c.space = $1 \
                     ORDER BY c.name COLLATE \"C\""
                ),
                &[&space],
            )
            .map_err(db_err)?;
        rows.iter().map(collection_from_row).collect()
    }

    fn collection(&self, space: &str, name: &str) -> Result<Option<Collection>> {
        self.conn()?
            .query_opt(
                &format!(
                    "SELECT {COLLECTION_COLUMNS} FROM collections c \
                     WHERE c.space = $1 AND c.name = $2"
                ),
                &[&space, &name],
            )
            .map_err(db_err)?
            .as_ref()
            .map(collection_from_row)
            .transpose()
    }

    fn rename_collection(&self, space: &str, old: &str, new: &str) -> Result<()> {
        self.write(|tx| {
            // A taken name is a conflict even when `old` does not exist (as on SQLite);
            // the unique (space, name) still decides a race.
            let taken: bool = col(
                &tx.query_one(
                    "SELECT EXISTS(SELECT 1 FROM collections WHERE space = $1 AND name = $2)",
                    &[&space, &new],
                )
                .map_err(db_err)?,
                0,
            )?;
            if taken {
                return Err(Error::Conflict(name_taken(new)));
            }
            let n = tx
                .execute(
                    "UPDATE collections SET name = $3 WHERE space = $1 AND name = $2",
                    &[&space, &old, &new],
                )
                .map_err(|e| conflict_or_db(e, || name_taken(new)))?;
            if n == 0 {
                return Err(Error::NotFound(format!("collection '{old}' not found")));
            }
            // Contexts are keyed by display path, which starts with the collection name.
            tx.execute(
                "UPDATE contexts SET path = $3::text || substr(path, length($2::text) + 1) \
                 WHERE space = $1 AND (path = $2::text OR path LIKE $4 ESCAPE '\\')",
                &[&space, &old, &new, &format!("{}/%", like_escape(old))],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn remove_collection(&self, space: &str, name: &str) -> Result<u64> {
        self.write(|tx| {
            let not_found = || Error::NotFound(format!("collection '{name}' not found"));
            let id: i64 = match tx
                .query_opt(
                    "SELECT id FROM collections WHERE space = $1 AND name = $2",
                    &[&space, &name],
                )
                .map_err(db_err)?
            {
                Some(row) => col(&row, 0)?,
                None => return Err(not_found()),
            };
            // Everything it removes is locked first, in the order every other writer takes
            // the same rows (see the module docs): its sources, the collection, its files'
            // jobs, its files, its documents. A sync holds its source before the collection,
            // and a conversion the collection before the file's job, so taking them in
            // another order here would close a cycle and deadlock.
            tx.execute(
                "SELECT 1 FROM sources WHERE collection_id = $1 ORDER BY id FOR UPDATE",
                &[&id],
            )
            .map_err(db_err)?;
            if tx
                .query_opt("SELECT 1 FROM collections WHERE id = $1 FOR UPDATE", &[&id])
                .map_err(db_err)?
                .is_none()
            {
                return Err(not_found());
            }
            for lock in [
                "SELECT 1 FROM jobs WHERE file_id IN \
                 (SELECT id FROM kb_files WHERE collection_id = $1) ORDER BY id FOR UPDATE",
                "SELECT 1 FROM kb_files WHERE collection_id = $1 ORDER BY id FOR UPDATE",
                "SELECT 1 FROM documents WHERE collection_id = $1 ORDER BY id FOR UPDATE",
            ] {
                tx.execute(lock, &[&id]).map_err(db_err)?;
            }
            let n = tx
                .execute(
                    "WITH gone AS (DELETE FROM chunks WHERE document_id IN \
                     (SELECT id FROM documents WHERE collection_id = $1)) \
                     DELETE FROM documents WHERE collection_id = $1",
                    &[&id],
                )
                .map_err(db_err)?;
            // Its sources and their reports go with it.
            tx.execute(
                "WITH r AS (DELETE FROM sync_reports WHERE source_id IN \
                 (SELECT id FROM sources WHERE collection_id = $1)) \
                 DELETE FROM sources WHERE collection_id = $1",
                &[&id],
            )
            .map_err(db_err)?;
            // A knowledge base's uploads go with it; their blobs and derived-index entries
            // are cleaned by a cleanup job (committed with this transaction, so a restart
            // resumes it).
            let files = tx
                .execute(
                    "WITH images AS (DELETE FROM file_images WHERE file_id IN \
                     (SELECT id FROM kb_files WHERE collection_id = $1)), \
                     jobs AS (DELETE FROM jobs WHERE file_id IN \
                     (SELECT id FROM kb_files WHERE collection_id = $1)), \
                     derivations AS (DELETE FROM kb_derivations WHERE file_id IN \
                     (SELECT id FROM kb_files WHERE collection_id = $1) OR source_id IN \
                     (SELECT id FROM kb_files WHERE collection_id = $1)), \
                     history AS (DELETE FROM kb_history WHERE collection_id = $1), \
                     cited AS (DELETE FROM page_sources WHERE page_id IN \
                     (SELECT id FROM kb_files WHERE collection_id = $1)) \
                     DELETE FROM kb_files WHERE collection_id = $1",
                    &[&id],
                )
                .map_err(db_err)?;
            if files > 0 || n > 0 {
                // Two nodes racing here may both enqueue one; a cleanup is idempotent.
                tx.execute(
                    "INSERT INTO jobs (kind, status, not_before, created_at, updated_at) \
                     SELECT 'cleanup', 'enqueued', t, t, t FROM (SELECT quarry_now_ms() AS t) n \
                     WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE kind = 'cleanup' AND status = 'enqueued')",
                    &[],
                )
                .map_err(db_err)?;
            }
            tx.execute("DELETE FROM collections WHERE id = $1", &[&id])
                .map_err(db_err)?;
            tx.execute(
                "DELETE FROM contexts WHERE space = $1 AND (path = $2 OR path LIKE $3 ESCAPE '\\')",
                &[&space, &name, &format!("{}/%", like_escape(name))],
            )
            .map_err(db_err)?;
            Ok(n)
        })
    }

    fn mark_collection_scanned(&self, collection_id: i64, at_ms: i64) -> Result<()> {
        self.conn()?
            .execute(
                "UPDATE collections SET last_updated = $2 WHERE id = $1",
                &[&collection_id, &at_ms],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn file_states(&self, collection_id: i64) -> Result<HashMap<String, FileState>> {
        let rows = self
            .conn()?
            .query(
                "SELECT path, id, size, stamp, hash FROM documents WHERE collection_id = $1",
                &[&collection_id],
            )
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok((
                    col(r, 0)?,
                    FileState {
                        id: col(r, 1)?,
                        size: to_u64(col(r, 2)?),
                        stamp: col(r, 3)?,
                        hash: col(r, 4)?,
                    },
                ))
            })
            .collect()
    }

    fn apply_changes(&self, collection_id: i64, changes: Vec<DocChange>) -> Result<IndexWork> {
        let mut work = IndexWork::default();
        if changes.is_empty() {
            return Ok(work);
        }
        self.write(|tx| {
            // A collection removed since the caller looked it up: say so (a foreign-key
            // failure would read as a storage error). Its row stays locked against removal
            // until this batch commits.
            if tx
                .query_opt(
                    "SELECT 1 FROM collections WHERE id = $1 FOR KEY SHARE",
                    &[&collection_id],
                )
                .map_err(db_err)?
                .is_none()
            {
                return Err(Error::NotFound(format!(
                    "collection {collection_id} no longer exists"
                )));
            }
            // Every existing row this batch touches, locked in id order (see the module's
            // doc) before any is written.
            let mut paths = Vec::new();
            let mut ids = Vec::new();
            for change in &changes {
                match change {
                    DocChange::Upsert { path, .. } => paths.push(path.as_str()),
                    DocChange::Touch { id, .. } | DocChange::Remove { id } => ids.push(*id),
                }
            }
            tx.execute(
                "SELECT 1 FROM documents WHERE (collection_id = $1 AND path = ANY($2)) \
                 OR id = ANY($3) ORDER BY id FOR UPDATE",
                &[&collection_id, &paths, &ids],
            )
            .map_err(db_err)?;
            let mut writer = DocWriter::new(collection_id);
            let hashes: Vec<&str> = changes
                .iter()
                .filter_map(|c| match c {
                    DocChange::Upsert { hash, .. } => Some(hash.as_str()),
                    _ => None,
                })
                .collect();
            writer.lock_docids(tx, &hashes)?;
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
                        work.upserts.push(writer.upsert(
                            tx,
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
                        )?);
                    }
                    DocChange::Touch { id, size, stamp } => {
                        let stmt = kept(
                            tx,
                            "UPDATE documents SET size = $2, stamp = $3 WHERE id = $1",
                        )?;
                        tx.execute(&stmt, &[&id, &to_i64(size, "size")?, &stamp])
                            .map_err(db_err)?;
                    }
                    DocChange::Remove { id } => {
                        let stmt = kept(
                            tx,
                            "WITH gone AS (DELETE FROM chunks WHERE document_id = $1) \
                             DELETE FROM documents WHERE id = $1",
                        )?;
                        tx.execute(&stmt, &[&id]).map_err(db_err)?;
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
        let rows = self
            .conn()?
            .query(
                "SELECT d.id, c.name, d.path, d.title, d.indexed_at, d.meta FROM documents d \
                 JOIN collections c ON c.id = d.collection_id WHERE d.collection_id = ANY($1)",
                &[&collection_ids],
            )
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(DocFields {
                    id: col(r, 0)?,
                    collection: col(r, 1)?,
                    path: col(r, 2)?,
                    title: col(r, 3)?,
                    indexed_at: col(r, 4)?,
                    meta: col(r, 5)?,
                })
            })
            .collect()
    }

    fn documents_by_ids(&self, ids: &[i64]) -> Result<Vec<Document>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // In the order asked (a repeated id repeats), missing ids skipped.
        let rows = self
            .conn()?
            .query(
                &format!(
                    "SELECT {DOCUMENT_COLUMNS} FROM unnest($1::bigint[]) WITH ORDINALITY AS i(id, ord) \
                     JOIN documents d ON d.id = i.id JOIN collections c ON c.id = d.collection_id \
                     ORDER BY i.ord"
                ),
                &[&ids],
            )
            .map_err(db_err)?;
        rows.iter().map(document_from_row).collect()
    }

    fn document_by_path(
        &self,
        space: &str,
        collection: &str,
        path: &str,
    ) -> Result<Option<Document>> {
        self.conn()?
            .query_opt(
                &format!(
                    "SELECT {DOCUMENT_COLUMNS} FROM documents d JOIN collections c ON c.id = d.collection_id \
                     WHERE c.space = $1 AND c.name = $2 AND d.path = $3"
                ),
                &[&space, &collection, &path],
            )
            .map_err(db_err)?
            .as_ref()
            .map(document_from_row)
            .transpose()
    }

    fn document_by_docid(&self, space: &str, docid: &str) -> Result<Option<Document>> {
        self.conn()?
            .query_opt(
                &format!(
                    "SELECT {DOCUMENT_COLUMNS} FROM documents d JOIN collections c ON c.id = d.collection_id \
                     WHERE c.space = $1 AND d.docid = $2"
                ),
                &[&space, &docid],
            )
            .map_err(db_err)?
            .as_ref()
            .map(document_from_row)
            .transpose()
    }

    fn document_summaries(&self, space: &str) -> Result<Vec<DocSummary>> {
        let rows = self
            .conn()?
            .query(
                "SELECT d.id, c.name, d.path, d.title, d.docid, d.body_bytes FROM documents d \
                 JOIN collections c ON c.id = d.collection_id WHERE c.space = $1 \
                 ORDER BY c.name COLLATE \"C\", d.path COLLATE \"C\"",
                &[&space],
            )
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(DocSummary {
                    id: col(r, 0)?,
                    collection: col(r, 1)?,
                    path: col(r, 2)?,
                    title: col(r, 3)?,
                    docid: col(r, 4)?,
                    body_bytes: to_u64(col(r, 5)?),
                })
            })
            .collect()
    }

    fn document_count(&self, space: &str) -> Result<u64> {
        let row = self
            .conn()?
            .query_one(
                "SELECT COUNT(*) FROM documents d JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = $1",
                &[&space],
            )
            .map_err(db_err)?;
        Ok(to_u64(col(&row, 0)?))
    }

    fn collection_names(&self, space: &str) -> Result<Vec<(i64, String)>> {
        self.conn()?
            .query(
                "SELECT id, name FROM collections WHERE space = $1 ORDER BY name",
                &[&space],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| Ok((col(r, 0)?, col(r, 1)?)))
            .collect()
    }

    fn collection_id(&self, space: &str, name: &str) -> Result<Option<i64>> {
        self.conn()?
            .query_opt(
                "SELECT id FROM collections WHERE space = $1 AND name = $2",
                &[&space, &name],
            )
            .map_err(db_err)?
            .map(|r| col(&r, 0))
            .transpose()
    }

    fn collections_outside(&self, space: &str) -> Result<bool> {
        let row = self
            .conn()?
            .query_one(
                "SELECT EXISTS(SELECT 1 FROM collections WHERE space <> $1)",
                &[&space],
            )
            .map_err(db_err)?;
        col(&row, 0)
    }

    fn collection_space(&self, collection_id: i64) -> Result<Option<String>> {
        self.conn()?
            .query_opt(
                "SELECT space FROM collections WHERE id = $1",
                &[&collection_id],
            )
            .map_err(db_err)?
            .map(|r| col(&r, 0))
            .transpose()
    }

    fn set_context(&self, space: &str, path: &str, text: &str) -> Result<()> {
        self.write(|tx| {
            ensure_space(tx, space)?;
            tx.execute(
                "INSERT INTO contexts (space, path, text) VALUES ($1, $2, $3) \
                 ON CONFLICT (space, path) DO UPDATE SET text = EXCLUDED.text",
                &[&space, &path, &text],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn contexts(&self, space: &str) -> Result<Vec<Context>> {
        self.conn()?
            .query(
                "SELECT path, text FROM contexts WHERE space = $1 ORDER BY path COLLATE \"C\"",
                &[&space],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| {
                Ok(Context {
                    path: col(r, 0)?,
                    text: col(r, 1)?,
                })
            })
            .collect()
    }

    fn remove_context(&self, space: &str, path: &str) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                "DELETE FROM contexts WHERE space = $1 AND path = $2",
                &[&space, &path],
            )
            .map_err(db_err)?;
        Ok(n > 0)
    }
}

impl FeedStore for PgStore {
    fn feed_position(&self, consumer: &str) -> Result<FeedPosition> {
        // The usual case, a known consumer, in one round trip.
        if let Some(row) = self
            .conn()?
            .query_opt(
                "SELECT txid, seq, rebuilding_after FROM feed_consumers WHERE consumer = $1",
                &[&consumer],
            )
            .map_err(db_err)?
        {
            return position_from_row(&row);
        }
        self.write(|tx| {
            lock(tx, FEED_CONSUMERS_LOCK)?;
            // A consumer seen for the first time reads a snapshot, then the entries of every
            // transaction not finished yet (see `REGISTER_AT`).
            let row = tx
                .query_one(
                    &format!(
                        "WITH added AS (INSERT INTO feed_consumers \
                         (consumer, txid, seq, rebuilding_after, seen_at) \
                         SELECT $1, r.txid, r.seq, 0, quarry_now_ms() FROM ({REGISTER_AT}) r \
                         ON CONFLICT (consumer) DO NOTHING RETURNING txid, seq, rebuilding_after) \
                         SELECT txid, seq, rebuilding_after FROM added UNION ALL \
                         SELECT txid, seq, rebuilding_after FROM feed_consumers WHERE consumer = $1 \
                         LIMIT 1"
                    ),
                    &[&consumer],
                )
                .map_err(db_err)?;
            position_from_row(&row)
        })
    }

    fn feed_read(&self, from: FeedPosition, limit: usize) -> Result<FeedBatch> {
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        let mut conn = self.conn()?;
        // One snapshot for the whole read: the horizon, the snapshot page or the entries,
        // and the rows they name.
        let mut tx = snapshot(&mut conn)?;
        if let Some(after) = from.rebuilding_after {
            let rows = tx
                .query(
                    "SELECT id, collection_id, path, title, body, furniture, indexed_at, meta FROM documents \
                     WHERE id > $1 ORDER BY id LIMIT $2",
                    &[&after, &limit],
                )
                .map_err(db_err)?;
            let upserts = rows.iter().map(index_doc).collect::<Result<Vec<_>>>()?;
            if let Some(last) = upserts.last() {
                let position = FeedPosition {
                    rebuilding_after: Some(last.id),
                    ..from
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
            // The snapshot is read: go on with the entries after the position. (A document
            // written since its page was read has an entry after the position.)
        }
        // Entries only of transactions older than every one still running: those are all
        // finished, so none can still commit below the position this batch moves to.
        let horizon: i64 = col(
            &tx.query_one(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
                &[],
            )
            .map_err(db_err)?,
            0,
        )?;
        let entries = tx
            .query(
                "SELECT txid::text::bigint, seq, document_id FROM feed \
                 WHERE (txid, seq) > (($1::bigint)::text::xid8, $2) \
                 AND txid < (($3::bigint)::text::xid8) ORDER BY txid, seq LIMIT $4",
                &[&from.txid, &from.seq, &horizon, &limit],
            )
            .map_err(db_err)?;
        let mut position = FeedPosition {
            rebuilding_after: None,
            ..from
        };
        let mut ids = Vec::with_capacity(entries.len());
        for e in &entries {
            position.txid = col(e, 0)?;
            position.seq = col(e, 1)?;
            ids.push(col::<i64>(e, 2)?);
        }
        ids.sort_unstable();
        ids.dedup();
        let work = index_work_of(&mut tx, &ids)?;
        tx.commit().map_err(db_err)?;
        let full = i64::try_from(entries.len()).unwrap_or(i64::MAX) >= limit;
        Ok(FeedBatch {
            work,
            position,
            horizon: (!full).then_some(horizon),
        })
    }

    fn feed_ack(&self, consumer: &str, position: FeedPosition) -> Result<()> {
        self.write(|tx| {
            lock(tx, FEED_CONSUMERS_LOCK)?;
            let n = tx
                .execute(
                    "UPDATE feed_consumers SET txid = $2, seq = $3, rebuilding_after = $4, \
                     seen_at = quarry_now_ms() WHERE consumer = $1",
                    &[
                        &consumer,
                        &position.txid,
                        &position.seq,
                        &position.rebuilding_after,
                    ],
                )
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
            lock(tx, FEED_CONSUMERS_LOCK)?;
            tx.execute(
                &format!(
                    "INSERT INTO feed_consumers (consumer, txid, seq, rebuilding_after, seen_at) \
                     SELECT $1, r.txid, r.seq, 0, quarry_now_ms() FROM ({REGISTER_AT}) r \
                     ON CONFLICT (consumer) DO UPDATE SET txid = excluded.txid, \
                     seq = excluded.seq, rebuilding_after = 0, seen_at = excluded.seen_at"
                ),
                &[&consumer],
            )
            .map_err(db_err)?;
            if let Some((key, value)) = meta {
                tx.execute(SET_META, &[&key, &value]).map_err(db_err)?;
            }
            Ok(())
        })
    }

    fn feed_forget(&self, consumer: &str) -> Result<()> {
        self.write(|tx| {
            lock(tx, FEED_CONSUMERS_LOCK)?;
            tx.execute(
                "DELETE FROM feed_consumers WHERE consumer = $1",
                &[&consumer],
            )
            .map_err(db_err)?;
            trim_feed(tx)
        })
    }

    fn feed_resume(&self, consumer: &str, position: FeedPosition) -> Result<bool> {
        self.write(|tx| {
            lock(tx, FEED_CONSUMERS_LOCK)?;
            let row = tx
                .query_one(
                    "SELECT (SELECT value FROM meta WHERE key = 'feed.trimmed'), \
                     pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
                    &[],
                )
                .map_err(db_err)?;
            let trimmed = parse_trimmed(col::<Option<String>>(&row, 0)?.as_deref());
            let next_txid: i64 = col(&row, 1)?;
            // Below the trim mark the entries are gone; past the next transaction id the
            // position cannot come from this database.
            if (position.txid, position.seq) < trimmed || position.txid >= next_txid {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO feed_consumers (consumer, txid, seq, rebuilding_after, seen_at) \
                 VALUES ($1, $2, $3, $4, quarry_now_ms()) ON CONFLICT (consumer) DO UPDATE \
                 SET txid = $2, seq = $3, rebuilding_after = $4, seen_at = quarry_now_ms()",
                &[
                    &consumer,
                    &position.txid,
                    &position.seq,
                    &position.rebuilding_after,
                ],
            )
            .map_err(db_err)?;
            Ok(true)
        })
    }

    fn feed_forget_idle(&self, idle_ms: i64) -> Result<Vec<String>> {
        self.write(|tx| {
            lock(tx, FEED_CONSUMERS_LOCK)?;
            let gone = tx
                .query(
                    "DELETE FROM feed_consumers WHERE seen_at < quarry_now_ms() - $1 \
                     RETURNING consumer",
                    &[&idle_ms.max(0)],
                )
                .map_err(db_err)?
                .iter()
                .map(|r| col::<String>(r, 0))
                .collect::<Result<Vec<_>>>()?;
            if !gone.is_empty() {
                trim_feed(tx)?;
            }
            Ok(gone)
        })
    }

    fn feed_backlog(&self, from: FeedPosition) -> Result<i64> {
        col(
            &self
                .conn()?
                .query_one(
                    "SELECT COUNT(*) FROM feed WHERE (txid, seq) > (($1::bigint)::text::xid8, $2)",
                    &[&from.txid, &from.seq],
                )
                .map_err(db_err)?,
            0,
        )
    }

    fn feed_horizon(&self) -> Result<i64> {
        // Every transaction that committed before this statement has an id below the
        // snapshot's xmax; a reader whose xmin reached it has read them all.
        col(
            &self
                .conn()?
                .query_one(
                    "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
                    &[],
                )
                .map_err(db_err)?,
            0,
        )
    }
}

impl quarry_store::ChangeNotifier for PgStore {
    fn listener(
        &self,
        channel: quarry_store::Channel,
    ) -> Result<Box<dyn quarry_store::ChangeListener>> {
        let mut client = self.pool.connect_dedicated()?;
        client
            .batch_execute(match channel {
                quarry_store::Channel::Feed => "LISTEN quarry_feed",
                quarry_store::Channel::Hub => "LISTEN quarry_hub",
            })
            .map_err(db_err)?;
        Ok(Box::new(Notifications { client }))
    }
}

impl SessionStore for PgStore {
    fn mcp_session(&self, id: &str) -> Result<Option<String>> {
        self.conn()?
            .query_opt("SELECT state FROM mcp_sessions WHERE id = $1", &[&id])
            .map_err(db_err)?
            .map(|r| col(&r, 0))
            .transpose()
    }

    fn put_mcp_session(&self, id: &str, state: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM mcp_sessions WHERE updated_at < quarry_now_ms() - $1",
                &[&quarry_store::MCP_SESSION_KEPT_MS],
            )
            .map_err(db_err)?;
            tx.execute(
                "INSERT INTO mcp_sessions (id, state, updated_at) VALUES ($1, $2, quarry_now_ms()) \
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                &[&id, &state],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn delete_mcp_session(&self, id: &str) -> Result<()> {
        self.conn()?
            .execute("DELETE FROM mcp_sessions WHERE id = $1", &[&id])
            .map_err(db_err)?;
        Ok(())
    }
}

impl SemanticStore for PgStore {
    fn chunk_sources(&self, document_ids: &[i64]) -> Result<Vec<ChunkSource>> {
        if document_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn()?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {CHUNK_SOURCE_COLUMNS} \
                     FROM unnest($1::bigint[]) WITH ORDINALITY AS i(id, ord) \
                     JOIN documents d ON d.id = i.id JOIN collections c ON c.id = d.collection_id \
                     WHERE d.chunked_hash IS DISTINCT FROM d.hash ORDER BY i.ord"
                ),
                &[&document_ids],
            )
            .map_err(db_err)?;
        let mut sources = rows
            .iter()
            .map(chunk_source_from_row)
            .collect::<Result<Vec<_>>>()?;
        with_chunk_edits(&mut *conn, &mut sources)?;
        Ok(sources)
    }

    fn chunk_source(&self, document_id: i64) -> Result<Option<ChunkSource>> {
        let mut conn = self.conn()?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {CHUNK_SOURCE_COLUMNS} \
                     FROM documents d JOIN collections c ON c.id = d.collection_id WHERE d.id = $1"
                ),
                &[&document_id],
            )
            .map_err(db_err)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut sources = vec![chunk_source_from_row(&row)?];
        with_chunk_edits(&mut *conn, &mut sources)?;
        Ok(sources.pop())
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
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (document_id, key) DO UPDATE SET \
                     text = excluded.text, disabled = excluded.disabled, \
                     edited_by = excluded.edited_by, edited_at = excluded.edited_at",
                    &[&document_id, &key, &e.text, &e.disabled, &e.edited_by, &e.edited_at],
                ),
                None => tx.execute(
                    "DELETE FROM chunk_edits WHERE document_id = $1 AND key = $2",
                    &[&document_id, &key],
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
        let chars = chars
            .map(|(s, o)| Ok::<_, Error>((to_i32(s, "chunk size")?, to_i32(o, "chunk overlap")?)))
            .transpose()?;
        self.write(|tx| {
            if !recut(tx, document_id)? {
                return Ok(false);
            }
            tx.execute(
                "UPDATE documents SET chunk_size = $2, chunk_overlap = $3 WHERE id = $1",
                &[&document_id, &chars.map(|c| c.0), &chars.map(|c| c.1)],
            )
            .map_err(db_err)?;
            Ok(true)
        })
    }

    fn reset_all_chunks(&self) -> Result<()> {
        self.conn()?
            .execute(
                "UPDATE documents SET chunked_hash = NULL WHERE id IN \
                 (SELECT id FROM documents WHERE chunked_hash IS NOT NULL ORDER BY id FOR UPDATE)",
                &[],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn replace_chunks(&self, docs: &[DocChunks]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let mut ids: Vec<i64> = docs.iter().map(|d| d.document_id).collect();
        ids.sort_unstable();
        ids.dedup();
        self.write(|tx| {
            // The documents' rows, locked in id order: an upsert changing one waits for
            // this transaction (and then drops these chunks), or is seen here.
            let current: HashMap<i64, (String, Option<String>, i64)> = tx
                .query(
                    "SELECT id, hash, chunked_hash, collection_id FROM documents \
                     WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                    &[&ids],
                )
                .map_err(db_err)?
                .iter()
                .map(|r| Ok((col(r, 0)?, (col(r, 1)?, col(r, 2)?, col(r, 3)?))))
                .collect::<Result<_>>()?;
            // As if applied in order: a document's last entry cut from its current content
            // wins; one removed or changed since it was chunked is left alone, and so is one
            // already cut from this content — by another node since our `chunk_sources`:
            // that node's passage index holds those chunks' ids, and replacing them would
            // leave it pointing at rows that no longer exist (issue 41, item 9).
            let mut latest: HashMap<i64, (&DocChunks, i64)> = HashMap::new();
            for doc in docs {
                if let Some((hash, chunked, collection_id)) = current.get(&doc.document_id)
                    && *hash == doc.doc_hash
                    && chunked.as_deref() != Some(hash.as_str())
                {
                    latest.insert(doc.document_id, (doc, *collection_id));
                }
            }
            if latest.is_empty() {
                return Ok(());
            }
            let mut chosen: Vec<(&DocChunks, i64)> = latest.into_values().collect();
            chosen.sort_by_key(|(d, _)| d.document_id);
            let doc_ids: Vec<i64> = chosen.iter().map(|(d, _)| d.document_id).collect();
            let hashes: Vec<&str> = chosen.iter().map(|(d, _)| d.doc_hash.as_str()).collect();
            let mut rows = ChunkRows::default();
            for (doc, collection_id) in &chosen {
                for (seq, c) in doc.chunks.iter().enumerate() {
                    rows.push(doc.document_id, *collection_id, seq, c)?;
                }
            }
            tx.execute(
                "DELETE FROM chunks WHERE document_id = ANY($1)",
                &[&doc_ids],
            )
            .map_err(db_err)?;
            if !rows.document_id.is_empty() {
                tx.execute(
                    "INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, \
                     line_end, hash, page, heading, text, collection_id) \
                     SELECT * FROM unnest($1::bigint[], $2::integer[], $3::bigint[], $4::bigint[], \
                     $5::bigint[], $6::bigint[], $7::text[], $8::integer[], $9::text[], $10::text[], \
                     $11::bigint[])",
                    &[
                        &rows.document_id,
                        &rows.seq,
                        &rows.byte_start,
                        &rows.byte_end,
                        &rows.line_start,
                        &rows.line_end,
                        &rows.hash,
                        &rows.page,
                        &rows.heading,
                        &rows.text,
                        &rows.collection_id,
                    ],
                )
                .map_err(db_err)?;
            }
            tx.execute(
                "UPDATE documents d SET chunked_hash = u.hash \
                 FROM unnest($1::bigint[], $2::text[]) AS u(id, hash) WHERE d.id = u.id",
                &[&doc_ids, &hashes],
            )
            .map_err(db_err)?;
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
        let limit = limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let mut conn = self.conn()?;
        // Each distinct text once (its first chunk).
        let rows = conn
            .query(
                "SELECT DISTINCT ON (k.hash) k.hash, d.title, k.heading, k.document_id, \
                 k.byte_start, k.byte_end, k.text \
                 FROM chunks k JOIN documents d ON d.id = k.document_id \
                 JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = $1 AND ($2::bigint IS NULL OR d.collection_id = $2) \
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = $3 AND e.hash = k.hash) \
                 ORDER BY k.hash, k.id LIMIT $4",
                &[&space, &collection_id, &model, &limit],
            )
            .map_err(db_err)?;
        embed_texts(&mut *conn, &rows)
    }

    fn put_embeddings(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<()> {
        if vectors.is_empty() {
            return Ok(());
        }
        // One row per hash (the last given wins, as if stored in order: one statement may
        // not update a row twice), in hash order so two nodes storing overlapping batches
        // take the rows' locks in the same order.
        let mut last: HashMap<&str, &[f32]> = HashMap::new();
        for (hash, v) in vectors {
            last.insert(hash.as_str(), v);
        }
        let mut rows: Vec<(&str, &[f32])> = last.into_iter().collect();
        rows.sort_unstable_by_key(|r| r.0);
        let hashes: Vec<&str> = rows.iter().map(|r| r.0).collect();
        let halves: Vec<HalfVector> = rows
            .iter()
            .map(|r| HalfVector::from_f32_slice(r.1))
            .collect();
        self.conn()?
            .execute(
                "INSERT INTO embeddings (model, hash, vector) \
                 SELECT $1, u.hash, u.vector FROM unnest($2::text[], $3::halfvec[]) AS u(hash, vector) \
                 ON CONFLICT (model, hash) DO UPDATE SET vector = EXCLUDED.vector",
                &[&model, &hashes, &halves],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn embeddings_for(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .conn()?
            .query(
                "SELECT hash, vector::vector::real[] FROM embeddings \
                 WHERE model = $1 AND hash = ANY($2::text[])",
                &[&model, &hashes],
            )
            .map_err(db_err)?;
        rows.iter()
            .map(|r| Ok((r.try_get(0).map_err(db_err)?, r.try_get(1).map_err(db_err)?)))
            .collect()
    }

    fn delete_embeddings(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
    ) -> Result<u64> {
        self.conn()?
            .execute(
                "DELETE FROM embeddings WHERE model = $3 AND hash IN \
                 (SELECT k.hash FROM chunks k JOIN documents d ON d.id = k.document_id \
                 JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = $1 AND ($2::bigint IS NULL OR d.collection_id = $2))",
                &[&space, &collection_id, &model],
            )
            .map_err(db_err)
    }

    // The ANN protocol keeps the embedded mode's local vector file in step with the store.
    // On PostgreSQL the vectors are searched where they are stored (`embeddings`, with an
    // HNSW index per model), so there is no file to keep in step: nothing is ever owed to
    // it, and what it reports absorbed needs no record.
    fn ann_tombstones(&self) -> Result<Vec<i64>> {
        Ok(Vec::new())
    }

    fn ann_dirty_chunks(
        &self,
        _model: &str,
        _after: i64,
        _limit: usize,
    ) -> Result<Vec<(i64, Vec<f32>)>> {
        Ok(Vec::new())
    }

    fn ann_done(&self, _removed: &[i64], _added: &[i64]) -> Result<()> {
        Ok(())
    }

    fn ann_reset(&self) -> Result<()> {
        Ok(())
    }

    fn chunk_refs(&self, ids: &[i64]) -> Result<Vec<ChunkRef>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .conn()?
            .query(
                &format!(
                    "SELECT {CHUNK_COLUMNS} FROM unnest($1::bigint[]) WITH ORDINALITY AS i(id, ord) \
                     JOIN chunks k ON k.id = i.id ORDER BY i.ord"
                ),
                &[&ids],
            )
            .map_err(db_err)?;
        rows.iter().map(chunk_from_row).collect()
    }

    fn chunks_of_documents(&self, document_ids: &[i64]) -> Result<Vec<ChunkRef>> {
        if document_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .conn()?
            .query(
                &format!(
                    "SELECT {CHUNK_COLUMNS} FROM unnest($1::bigint[]) WITH ORDINALITY AS i(id, ord) \
                     JOIN chunks k ON k.document_id = i.id ORDER BY i.ord, k.seq"
                ),
                &[&document_ids],
            )
            .map_err(db_err)?;
        rows.iter().map(chunk_from_row).collect()
    }

    fn chunk_ids_in_collection(&self, collection_id: i64) -> Result<Vec<i64>> {
        self.conn()?
            .query(
                "SELECT k.id FROM chunks k JOIN documents d ON d.id = k.document_id \
                 WHERE d.collection_id = $1",
                &[&collection_id],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| col(r, 0))
            .collect()
    }

    fn index_census(&self) -> Result<IndexCensus> {
        let mut conn = self.conn()?;
        let mut tx = snapshot(&mut conn)?;
        let documents = tx
            .query("SELECT id FROM documents", &[])
            .map_err(db_err)?
            .iter()
            .map(|r| col(r, 0))
            .collect::<Result<Vec<i64>>>()?;
        let chunks = tx
            .query("SELECT id, document_id FROM chunks", &[])
            .map_err(db_err)?
            .iter()
            .map(|r| Ok((col(r, 0)?, col(r, 1)?)))
            .collect::<Result<Vec<(i64, i64)>>>()?;
        tx.commit().map_err(db_err)?;
        Ok(IndexCensus { documents, chunks })
    }

    fn index_work(&self, document_ids: &[i64]) -> Result<IndexWork> {
        let mut conn = self.conn()?;
        index_work_of(&mut *conn, document_ids)
    }

    fn embedding_state(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        model: Option<&str>,
    ) -> Result<EmbeddingState> {
        // A chunk with a vector is searchable at once here (no ANN file to absorb it), so a
        // document is pending while it is not cut from its content or a chunk lacks a vector.
        let row = self
            .conn()?
            .query_one(
                "SELECT \
                 (SELECT COUNT(*) FROM documents d JOIN collections c ON c.id = d.collection_id \
                  WHERE c.space = $1 AND ($3::bigint[] IS NULL OR c.id = ANY($3)) \
                  AND (d.chunked_hash IS DISTINCT FROM d.hash OR EXISTS (SELECT 1 FROM chunks k \
                  WHERE k.document_id = d.id AND NOT EXISTS \
                  (SELECT 1 FROM embeddings e WHERE e.model = $2 AND e.hash = k.hash)))), \
                 COUNT(*), \
                 COUNT(*) FILTER (WHERE NOT EXISTS \
                  (SELECT 1 FROM embeddings e WHERE e.model = $2 AND e.hash = k.hash)) \
                 FROM chunks k JOIN documents d ON d.id = k.document_id \
                 JOIN collections c ON c.id = d.collection_id \
                 WHERE c.space = $1 AND ($3::bigint[] IS NULL OR c.id = ANY($3))",
                &[&space, &model.unwrap_or(""), &collections],
            )
            .map_err(db_err)?;
        Ok(EmbeddingState {
            documents_pending: to_u64(col(&row, 0)?),
            chunks: to_u64(col(&row, 1)?),
            chunks_pending: to_u64(col(&row, 2)?),
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
        let row = self
            .conn()?
            .query_one(
                "SELECT \
                 (SELECT COUNT(*) FROM documents d WHERE d.id = ANY($1) \
                  AND (d.chunked_hash IS DISTINCT FROM d.hash OR EXISTS (SELECT 1 FROM chunks k \
                  WHERE k.document_id = d.id AND NOT EXISTS \
                  (SELECT 1 FROM embeddings e WHERE e.model = $2 AND e.hash = k.hash)))), \
                 COUNT(*), \
                 COUNT(*) FILTER (WHERE NOT EXISTS \
                  (SELECT 1 FROM embeddings e WHERE e.model = $2 AND e.hash = k.hash)) \
                 FROM chunks k WHERE k.document_id = ANY($1)",
                &[&document_ids, &model.unwrap_or("")],
            )
            .map_err(db_err)?;
        Ok(EmbeddingState {
            documents_pending: to_u64(col(&row, 0)?),
            chunks: to_u64(col(&row, 1)?),
            chunks_pending: to_u64(col(&row, 2)?),
        })
    }

    fn record_embedded(&self, model: &str, hashes: &[String], elapsed_ms: i64) -> Result<()> {
        self.conn()?
            .execute(
                "WITH gone AS (DELETE FROM embedded_batches WHERE ended_at < quarry_now_ms() - $4) \
                 INSERT INTO embedded_batches (model, ended_at, elapsed_ms, chunks) \
                 SELECT $1, quarry_now_ms(), $2, count(*) FROM chunks WHERE hash = ANY($3)",
                &[
                    &model,
                    &elapsed_ms.max(0),
                    &hashes,
                    &quarry_store::EMBEDDED_BATCHES_KEPT_MS,
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn recent_embedding(&self, model: &str, within_ms: i64) -> Result<RecentEmbedding> {
        let rows = self
            .conn()?
            .query(
                "SELECT n.now, b.ended_at, b.elapsed_ms, b.chunks \
                 FROM (SELECT quarry_now_ms() AS now) n LEFT JOIN embedded_batches b \
                 ON b.model = $1 AND b.ended_at >= n.now - $2 ORDER BY b.ended_at, b.id",
                &[&model, &within_ms.max(0)],
            )
            .map_err(db_err)?;
        let mut out = RecentEmbedding::default();
        for r in &rows {
            out.now_ms = col(r, 0)?;
            if let (Some(ended_ms), Some(elapsed_ms), Some(chunks)) = (
                col::<Option<i64>>(r, 1)?,
                col::<Option<i64>>(r, 2)?,
                col::<Option<i64>>(r, 3)?,
            ) {
                out.batches.push(EmbeddedBatch {
                    ended_ms,
                    elapsed_ms,
                    chunks: to_u64(chunks),
                });
            }
        }
        Ok(out)
    }
}

impl SettingsStore for PgStore {
    fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn()?
            .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])
            .map_err(db_err)?
            .map(|r| col(&r, 0))
            .transpose()
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn()?
            .execute(SET_META, &[&key, &value])
            .map_err(db_err)?;
        Ok(())
    }

    fn cached_expansion(&self, model: &str, query: &str) -> Result<Option<Vec<String>>> {
        let variants: Option<String> = self
            .conn()?
            .query_opt(
                "SELECT variants FROM expansions WHERE model = $1 AND query = $2",
                &[&model, &query],
            )
            .map_err(db_err)?
            .map(|r| col(&r, 0))
            .transpose()?;
        Ok(variants.map(|s| {
            s.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        }))
    }

    fn cache_expansion(&self, model: &str, query: &str, variants: &[String]) -> Result<()> {
        // Variants are single lines (the expander splits on newlines), so newline-joined is
        // exact.
        let joined = variants
            .iter()
            .map(|v| v.replace(['\n', '\r'], " "))
            .collect::<Vec<_>>()
            .join("\n");
        self.conn()?
            .execute(
                "INSERT INTO expansions (model, query, variants, created_at) \
                 VALUES ($1, $2, $3, quarry_now_ms()) \
                 ON CONFLICT (model, query) DO UPDATE \
                 SET variants = EXCLUDED.variants, created_at = EXCLUDED.created_at",
                &[&model, &query, &joined],
            )
            .map_err(db_err)?;
        Ok(())
    }
}

const SET_META: &str = "INSERT INTO meta (key, value) VALUES ($1, $2) \
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";

const COLLECTION_COLUMNS: &str = "c.id, c.space, c.name, c.kind, c.path, c.pattern, c.last_updated, \
     (SELECT COUNT(*) FROM documents d WHERE d.collection_id = c.id)";

const DOCUMENT_COLUMNS: &str =
    "d.id, c.name, d.path, d.title, d.hash, d.docid, d.body, d.pages, d.furniture, d.meta";

const CHUNK_COLUMNS: &str = "k.id, k.document_id, k.byte_start, k.byte_end, k.line_start, \
     k.line_end, k.page, k.heading, k.text";

/// What [`chunk_source_from_row`] reads, over `documents d JOIN collections c`.
const CHUNK_SOURCE_COLUMNS: &str = "d.id, d.hash, d.title, d.body, d.pages, \
     COALESCE(d.chunk_size, c.chunk_size), \
     CASE WHEN d.chunk_size IS NULL THEN c.chunk_overlap ELSE d.chunk_overlap END, \
     d.furniture, d.chunk_size IS NOT NULL";

/// A `ChunkSource` (without its edits) from [`CHUNK_SOURCE_COLUMNS`].
fn chunk_source_from_row(r: &Row) -> Result<ChunkSource> {
    let size: Option<i32> = col(r, 5)?;
    let overlap: Option<i32> = col(r, 6)?;
    Ok(ChunkSource {
        id: col(r, 0)?,
        hash: col(r, 1)?,
        title: col(r, 2)?,
        body: col(r, 3)?,
        pages: quarry_core::decode_pages(&col::<String>(r, 4)?),
        furniture: quarry_core::decode_furniture(&col::<String>(r, 7)?),
        chunk_chars: size.map(|s| {
            (
                usize::try_from(s.max(1)).unwrap_or(1),
                usize::try_from(overlap.unwrap_or(0).max(0)).unwrap_or(0),
            )
        }),
        own_chunking: col(r, 8)?,
        edits: Vec::new(),
    })
}

/// Fills in the edits people made to these documents' chunks, in one query.
fn with_chunk_edits(
    client: &mut impl postgres::GenericClient,
    sources: &mut [ChunkSource],
) -> Result<()> {
    if sources.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = sources.iter().map(|s| s.id).collect();
    let rows = client
        .query(
            "SELECT document_id, key, text, disabled, edited_by, edited_at FROM chunk_edits \
             WHERE document_id = ANY($1)",
            &[&ids],
        )
        .map_err(db_err)?;
    let mut by_doc: HashMap<i64, Vec<ChunkEdit>> = HashMap::new();
    for r in &rows {
        by_doc.entry(col(r, 0)?).or_default().push(ChunkEdit {
            key: col(r, 1)?,
            text: col(r, 2)?,
            disabled: col(r, 3)?,
            edited_by: col(r, 4)?,
            edited_at: col(r, 5)?,
        });
    }
    for s in sources {
        s.edits = by_doc.remove(&s.id).unwrap_or_default();
    }
    Ok(())
}

/// Has a document cut again by every node: its chunks are forgotten and it enters the
/// change feed (the `curation` counter's trigger). `false` when it does not exist.
fn recut(tx: &mut crate::PgTransaction<'_>, document_id: i64) -> Result<bool> {
    let n = tx
        .execute(
            "UPDATE documents SET chunked_hash = NULL, curation = curation + 1 WHERE id = $1",
            &[&document_id],
        )
        .map_err(db_err)?;
    Ok(n > 0)
}

/// A size given in characters as the database's `integer`.
fn to_i32(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::invalid(format!("{what} {n} is too large")))
}

/// A count or size the database holds as `bigint` (never negative) as `u64`.
fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A `bigint` offset or line number as `usize`.
fn to_usize(n: i64) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::Storage(format!("stored offset {n} is out of range")))
}

fn name_taken(name: &str) -> String {
    format!("collection '{name}' already exists")
}

/// Registers `space` if it is new.
pub(crate) fn ensure_space(tx: &mut crate::PgTransaction<'_>, space: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO spaces (id, uid, created_at) VALUES ($1, $2, quarry_now_ms()) \
         ON CONFLICT (id) DO NOTHING",
        &[&space, &uuid::Uuid::new_v4().to_string()],
    )
    .map_err(db_err)?;
    Ok(())
}

fn collection_from_row(r: &Row) -> Result<Collection> {
    let kind: String = col(r, 3)?;
    Ok(Collection {
        id: col(r, 0)?,
        space: col(r, 1)?,
        name: col(r, 2)?,
        kind: CollectionKind::parse(&kind).unwrap_or(CollectionKind::Folder),
        path: col(r, 4)?,
        pattern: col(r, 5)?,
        last_updated_ms: col(r, 6)?,
        documents: to_u64(col(r, 7)?),
    })
}

fn document_from_row(r: &Row) -> Result<Document> {
    Ok(Document {
        id: col(r, 0)?,
        collection: col(r, 1)?,
        path: col(r, 2)?,
        title: col(r, 3)?,
        hash: col(r, 4)?,
        docid: col(r, 5)?,
        body: col(r, 6)?,
        pages: quarry_core::decode_pages(&col::<String>(r, 7)?),
        furniture: quarry_core::decode_furniture(&col::<String>(r, 8)?),
        meta: col(r, 9)?,
    })
}

fn chunk_from_row(r: &Row) -> Result<ChunkRef> {
    Ok(ChunkRef {
        id: col(r, 0)?,
        document_id: col(r, 1)?,
        byte_start: to_usize(col(r, 2)?)?,
        byte_end: to_usize(col(r, 3)?)?,
        line_start: to_usize(col(r, 4)?)?,
        line_end: to_usize(col(r, 5)?)?,
        page: col::<Option<i32>>(r, 6)?.and_then(|p| u32::try_from(p).ok()),
        heading: col(r, 7)?,
        text: col(r, 8)?,
    })
}

/// A document as the keyword index takes it, from `id, collection_id, path, title, body`.
/// A read-only transaction that sees one snapshot of the database throughout.
fn snapshot<'a>(conn: &'a mut PgConnection<'_>) -> Result<postgres::Transaction<'a>> {
    conn.build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(db_err)
}

/// The index work for documents `ids` as they are now ([`IndexWork::of`]).
fn index_work_of(c: &mut impl postgres::GenericClient, ids: &[i64]) -> Result<IndexWork> {
    let found = c
        .query(
            "SELECT id, collection_id, path, title, body, furniture, indexed_at, meta FROM documents \
             WHERE id = ANY($1) ORDER BY id",
            &[&ids],
        )
        .map_err(db_err)?
        .iter()
        .map(index_doc)
        .collect::<Result<Vec<_>>>()?;
    Ok(IndexWork::of(ids, found))
}

fn index_doc(r: &Row) -> Result<IndexDoc> {
    let furniture = quarry_core::decode_furniture(&col::<String>(r, 5)?);
    Ok(IndexDoc {
        id: col(r, 0)?,
        collection_id: col(r, 1)?,
        path: col(r, 2)?,
        title: col(r, 3)?,
        body: quarry_core::into_indexed_body(col(r, 4)?, &furniture),
        indexed_at: col(r, 6)?,
        meta: col(r, 7)?,
    })
}

fn position_from_row(r: &Row) -> Result<FeedPosition> {
    Ok(FeedPosition {
        txid: col(r, 0)?,
        seq: col(r, 1)?,
        rebuilding_after: col(r, 2)?,
    })
}

/// Where a consumer that reads a snapshot first is registered: just before the entries of
/// the oldest transaction still running. Every transaction below it has finished, so its
/// writes are in the snapshot; every later one has an entry after the position.
const REGISTER_AT: &str = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint - 1 AS txid, \
     9223372036854775807::bigint AS seq";

/// `meta['feed.trimmed']` (`txid:seq`): entries up to it are gone.
fn parse_trimmed(value: Option<&str>) -> (i64, i64) {
    value
        .and_then(|v| v.split_once(':'))
        .and_then(|(t, s)| Some((t.parse().ok()?, s.parse().ok()?)))
        .unwrap_or((0, 0))
}

/// Drops the feed entries every consumer is past (those of every finished transaction when
/// no consumer is left) and records how far the feed was trimmed. Run under
/// `FEED_CONSUMERS_LOCK`.
fn trim_feed(tx: &mut crate::PgTransaction<'_>) -> Result<()> {
    let cut = tx
        .query_one(
            &format!(
                "WITH c AS (SELECT txid, seq FROM feed_consumers ORDER BY txid, seq LIMIT 1), \
                 r AS ({REGISTER_AT}) \
                 SELECT COALESCE((SELECT txid FROM c), (SELECT txid FROM r)), \
                 COALESCE((SELECT seq FROM c), (SELECT seq FROM r))"
            ),
            &[],
        )
        .map_err(db_err)?;
    let cut: (i64, i64) = (col(&cut, 0)?, col(&cut, 1)?);
    let gone = tx
        .execute(
            "DELETE FROM feed WHERE (txid, seq) <= (($1::bigint)::text::xid8, $2)",
            &[&cut.0, &cut.1],
        )
        .map_err(db_err)?;
    if gone > 0 {
        let row = tx
            .query_one("SELECT value FROM meta WHERE key = 'feed.trimmed'", &[])
            .map_err(db_err);
        let before = match row {
            Ok(r) => parse_trimmed(col::<Option<String>>(&r, 0)?.as_deref()),
            Err(_) => (0, 0),
        };
        if cut > before {
            tx.execute(
                SET_META,
                &[&"feed.trimmed", &format!("{}:{}", cut.0, cut.1)],
            )
            .map_err(db_err)?;
        }
    }
    Ok(())
}

/// LISTEN on one channel (`quarry_feed`, `quarry_hub`) over a connection of its own.
struct Notifications {
    client: postgres::Client,
}

impl quarry_store::ChangeListener for Notifications {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool> {
        quarry_store::thread_guard::check();
        use postgres::fallible_iterator::FallibleIterator;
        let mut notifications = self.client.notifications();
        let woken = notifications
            .timeout_iter(timeout)
            .next()
            .map_err(db_err)?
            .is_some();
        // One wake-up covers every notification already queued.
        while notifications.iter().next().map_err(db_err)?.is_some() {}
        drop(notifications);
        if self.client.is_closed() {
            return Err(Error::Unavailable(
                "the connection listening for change notifications closed".into(),
            ));
        }
        Ok(woken)
    }
}

/// `s` with each NUL as a space (same length in bytes).
fn without_nul(s: String) -> String {
    if s.contains('\0') {
        s.replace('\0', " ")
    } else {
        s
    }
}

fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// `sql` prepared on the transaction's connection, once per connection (the loops that run a
/// statement per item bind it once).
fn kept(tx: &mut crate::PgTransaction<'_>, sql: &str) -> Result<Statement> {
    tx.prepare_kept(sql).map_err(db_err)
}

/// A new or changed document's fields ([`DocChange::Upsert`]).
pub(crate) struct UpsertDoc<'a> {
    pub(crate) path: String,
    pub(crate) title: String,
    pub(crate) hash: String,
    pub(crate) size: u64,
    pub(crate) stamp: i64,
    pub(crate) body: String,
    pub(crate) pages: &'a [quarry_core::PageSpan],
    pub(crate) furniture: &'a [quarry_core::Furniture],
    pub(crate) meta: &'a str,
    /// The knowledge-base file (row id) this is the document of: its document is found by
    /// the file, not by the path (two files of one name, for other readers, have two
    /// documents). `None`: a folder's document, one per path.
    pub(crate) kb_file: Option<i64>,
}

/// Writes documents into one collection, locking the docids it may take (so the docids it
/// finds free stay free until it commits).
pub(crate) struct DocWriter {
    collection_id: i64,
    /// The space and its UUID, read at the first upsert.
    space: Option<(String, String)>,
    /// Docid locks this transaction holds already (see [`DocWriter::lock_docids`]).
    locked: HashSet<i32>,
}

impl DocWriter {
    pub(crate) fn new(collection_id: i64) -> Self {
        DocWriter {
            collection_id,
            space: None,
            locked: HashSet::new(),
        }
    }

    /// Inserts or replaces a document (a knowledge-base file's, else by collection and path).
    pub(crate) fn upsert(
        &mut self,
        tx: &mut crate::PgTransaction<'_>,
        doc: UpsertDoc<'_>,
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
        let meta = if meta.trim().is_empty() { "{}" } else { meta };
        let spans = furniture;
        // PostgreSQL's text cannot hold NUL (a converter's stray control character): it is
        // stored as a space, which keeps every byte offset (chunks, pages, furniture) valid,
        // rather than failing the whole batch.
        let title = without_nul(title);
        let body = without_nul(body);
        let pages = quarry_core::encode_pages(pages);
        let furniture = quarry_core::encode_furniture(furniture);
        let find = kept(
            tx,
            "SELECT id, hash, docid, body = $3 AND pages = $4 AND furniture = $5 \
             FROM documents WHERE CASE WHEN $6::bigint IS NULL \
               THEN collection_id = $1 AND path = $2 AND kb_file IS NULL ELSE kb_file = $6 END",
        )?;
        let existing: Option<(i64, String, String, bool)> = tx
            .query_opt(
                &find,
                &[
                    &self.collection_id,
                    &path,
                    &body,
                    &pages,
                    &furniture,
                    &kb_file,
                ],
            )
            .map_err(db_err)?
            .map(|r| Ok((col(&r, 0)?, col(&r, 1)?, col(&r, 2)?, col(&r, 3)?)))
            .transpose()?;
        // New content makes the old chunks wrong: drop them in the same transaction. So does
        // the same file converted again into other Markdown, pages or furniture (a newer
        // converter): its chunks are cut again.
        if let Some((id, old_hash, _, same_layout)) = &existing
            && (*old_hash != hash || !same_layout)
        {
            let drop = kept(
                tx,
                "WITH gone AS (DELETE FROM chunks WHERE document_id = $1) \
                 UPDATE documents SET chunked_hash = NULL WHERE id = $1",
            )?;
            tx.execute(&drop, &[id]).map_err(db_err)?;
        }
        // Same content keeps its docid (a re-converted upload); new content gets the
        // shortest free one.
        let docid = match &existing {
            Some((_, old_hash, docid, _)) if *old_hash == hash => docid.clone(),
            Some((id, _, _, _)) => self.free_docid(tx, &hash, Some(*id))?,
            None => self.free_docid(tx, &hash, None)?,
        };
        // A folder's document is one per path (two nodes syncing one folder meet in the
        // conflict); a knowledge-base file's is one per file (a renamed file takes its
        // document along).
        let insert = kept(
            tx,
            if kb_file.is_none() {
                "INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, \
                 body_bytes, indexed_at, pages, furniture, meta, kb_file) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, quarry_now_ms(), $10, $11, $12, $13) \
                 ON CONFLICT (collection_id, path) WHERE kb_file IS NULL DO UPDATE SET \
                 title = EXCLUDED.title, hash = EXCLUDED.hash, docid = EXCLUDED.docid, \
                 size = EXCLUDED.size, stamp = EXCLUDED.stamp, body = EXCLUDED.body, \
                 body_bytes = EXCLUDED.body_bytes, indexed_at = EXCLUDED.indexed_at, \
                 pages = EXCLUDED.pages, furniture = EXCLUDED.furniture, meta = EXCLUDED.meta \
                 RETURNING id, indexed_at"
            } else {
                "INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, \
                 body_bytes, indexed_at, pages, furniture, meta, kb_file) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, quarry_now_ms(), $10, $11, $12, $13) \
                 ON CONFLICT (kb_file) WHERE kb_file IS NOT NULL DO UPDATE SET \
                 path = EXCLUDED.path, title = EXCLUDED.title, hash = EXCLUDED.hash, \
                 docid = EXCLUDED.docid, size = EXCLUDED.size, stamp = EXCLUDED.stamp, \
                 body = EXCLUDED.body, body_bytes = EXCLUDED.body_bytes, \
                 indexed_at = EXCLUDED.indexed_at, pages = EXCLUDED.pages, \
                 furniture = EXCLUDED.furniture, meta = EXCLUDED.meta \
                 RETURNING id, indexed_at"
            },
        )?;
        let row = tx
            .query_one(
                &insert,
                &[
                    &self.collection_id,
                    &path,
                    &title,
                    &hash,
                    &docid,
                    &to_i64(size, "size")?,
                    &stamp,
                    &body,
                    &to_i64(body.len(), "body")?,
                    &pages,
                    &furniture,
                    &meta,
                    &kb_file,
                ],
            )
            .map_err(db_err)?;
        Ok(IndexDoc {
            id: col(&row, 0)?,
            collection_id: self.collection_id,
            path,
            title,
            body: quarry_core::into_indexed_body(body, spans),
            indexed_at: col(&row, 1)?,
            meta: meta.to_owned(),
        })
    }

    /// The shortest docid (≥ 6 hex) for `hash` not taken by another document, all candidates
    /// looked up at once.
    fn free_docid(
        &mut self,
        tx: &mut crate::PgTransaction<'_>,
        hash: &str,
        own_id: Option<i64>,
    ) -> Result<String> {
        let basis = self.docid_basis(tx, hash)?;
        // Held already when a batch locked its docids; else taken now, last.
        let key = docid_key(&basis);
        if self.locked.insert(key) {
            lock_docid_keys(tx, &[key])?;
        }
        let candidates: Vec<String> = (6..=basis.len())
            .map(|len| docid_for_hash(&basis, len))
            .collect();
        let holders = kept(tx, "SELECT docid, id FROM documents WHERE docid = ANY($1)")?;
        let taken: HashMap<String, i64> = tx
            .query(&holders, &[&candidates])
            .map_err(db_err)?
            .iter()
            .map(|r| Ok((col(r, 0)?, col(r, 1)?)))
            .collect::<Result<_>>()?;
        candidates
            .into_iter()
            .find(|c| match taken.get(c) {
                None => true,
                Some(id) => Some(*id) == own_id,
            })
            .ok_or_else(|| Error::Storage(format!("no free docid for hash {basis}")))
    }

    /// Locks the docids documents of these content hashes may take, in one order for every
    /// writer (see the module's docs).
    pub(crate) fn lock_docids(
        &mut self,
        tx: &mut crate::PgTransaction<'_>,
        hashes: &[&str],
    ) -> Result<()> {
        let mut keys = Vec::with_capacity(hashes.len());
        for hash in hashes {
            keys.push(docid_key(&self.docid_basis(tx, hash)?));
        }
        keys.sort_unstable();
        keys.dedup();
        keys.retain(|k| !self.locked.contains(k));
        lock_docid_keys(tx, &keys)?;
        self.locked.extend(keys);
        Ok(())
    }

    /// What a document's docid is cut from. In the default space it is the content hash
    /// (QMD's docid); in any other space it is a hash of the space's UUID and the content
    /// hash, so a docid — and whether it had to grow past 6 characters — says nothing about
    /// what another space holds.
    fn docid_basis(&mut self, tx: &mut crate::PgTransaction<'_>, hash: &str) -> Result<String> {
        if self.space.is_none() {
            let row = tx
                .query_opt(
                    "SELECT s.id, s.uid FROM collections c JOIN spaces s ON s.id = c.space \
                     WHERE c.id = $1",
                    &[&self.collection_id],
                )
                .map_err(db_err)?
                .ok_or_else(|| {
                    Error::Storage(format!("collection {} does not exist", self.collection_id))
                })?;
            self.space = Some((col(&row, 0)?, col(&row, 1)?));
        }
        let (space, uid) = self.space.as_ref().map_or(("", ""), |(s, u)| (s, u));
        Ok(if space == quarry_core::DEFAULT_SPACE {
            hash.to_owned()
        } else {
            quarry_core::sha256_hex(format!("{uid}:{hash}").as_bytes())
        })
    }
}

/// Chunks as columns, for one `INSERT … SELECT FROM unnest(…)`.
#[derive(Default)]
struct ChunkRows<'a> {
    document_id: Vec<i64>,
    collection_id: Vec<i64>,
    seq: Vec<i32>,
    byte_start: Vec<i64>,
    byte_end: Vec<i64>,
    line_start: Vec<i64>,
    line_end: Vec<i64>,
    hash: Vec<&'a str>,
    page: Vec<Option<i32>>,
    heading: Vec<&'a str>,
    text: Vec<Option<&'a str>>,
}

impl<'a> ChunkRows<'a> {
    fn push(
        &mut self,
        document_id: i64,
        collection_id: i64,
        seq: usize,
        c: &'a NewChunk,
    ) -> Result<()> {
        self.document_id.push(document_id);
        self.collection_id.push(collection_id);
        self.seq.push(
            i32::try_from(seq).map_err(|_| Error::invalid("too many chunks in one document"))?,
        );
        self.byte_start.push(to_i64(c.byte_start, "chunk offset")?);
        self.byte_end.push(to_i64(c.byte_end, "chunk offset")?);
        self.line_start.push(to_i64(c.line_start, "chunk line")?);
        self.line_end.push(to_i64(c.line_end, "chunk line")?);
        self.hash.push(&c.hash);
        self.page.push(
            c.page
                .map(|p| i32::try_from(p).map_err(|_| Error::invalid("chunk page is too large")))
                .transpose()?,
        );
        self.heading.push(&c.heading);
        self.text.push(c.text.as_deref());
        Ok(())
    }
}

/// The chunk texts of `rows` (`hash, title, heading, document_id, byte_start, byte_end,
/// text`), in order: an edited chunk's text, else its span cut from the body here — each body
/// fetched once, rather than by the database once per chunk, and let go before the next
/// (memory: one body and the texts, whatever the documents' sizes).
pub(crate) fn embed_texts(
    client: &mut impl postgres::GenericClient,
    rows: &[postgres::Row],
) -> Result<Vec<EmbedJob>> {
    let mut jobs = Vec::with_capacity(rows.len());
    let mut by_doc: HashMap<i64, Vec<(usize, i64, i64)>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        let edited: Option<String> = col(r, 6)?;
        if edited.is_none() {
            by_doc
                .entry(col(r, 3)?)
                .or_default()
                .push((i, col(r, 4)?, col(r, 5)?));
        }
        jobs.push(EmbedJob {
            hash: col(r, 0)?,
            title: col(r, 1)?,
            heading: col(r, 2)?,
            text: edited.unwrap_or_default(),
        });
    }
    for (doc, spans) in by_doc {
        let body: String = client
            .query_opt("SELECT body FROM documents WHERE id = $1", &[&doc])
            .map_err(db_err)?
            .map(|r| col(&r, 0))
            .transpose()?
            .unwrap_or_default();
        for (i, start, end) in spans {
            jobs[i].text = quarry_store::byte_span(&body, start, end);
        }
    }
    Ok(jobs)
}

/// The lock key of every docid cut from `basis`: its first six hex digits (each docid is
/// `#` and a prefix of at least six), as a number.
fn docid_key(basis: &str) -> i32 {
    let six = basis.get(..6).unwrap_or(basis);
    match i32::from_str_radix(six, 16) {
        Ok(key) => key,
        // Not hex (no real hash): any stable number will do.
        Err(_) => six
            .bytes()
            .fold(0x811c_9dc5_u32, |h, b| {
                (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
            })
            .cast_signed(),
    }
}

/// Takes the docid locks `keys` (sorted), in that order, until the transaction ends.
fn lock_docid_keys(tx: &mut crate::PgTransaction<'_>, keys: &[i32]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    // unnest yields the array in order: the locks are taken in it.
    tx.execute(
        "SELECT pg_advisory_xact_lock($1::int4, k) FROM unnest($2::int4[]) AS k",
        &[&DOCID_LOCKS, &keys],
    )
    .map_err(db_err)?;
    Ok(())
}
