//! [`quarry_store::JobQueue`] on PostgreSQL.
//!
//! Every node's workers share the queue. A claim is one `UPDATE … WHERE id = (SELECT …
//! FOR UPDATE SKIP LOCKED)`, so concurrent claimers never wait on each other's rows nor take
//! the same job; due times and leases are the database's clock (`quarry_now_ms()`), one clock
//! whatever machine a worker runs on. Every claim bumps the job's `lease_token`, the fencing
//! token each side effect presents.

use quarry_core::Result;
use quarry_store::{
    ClaimedChunks, FileStatus, Job, JobKind, JobQueue, Lease, QueueCounts, owner_node,
};

use super::knowledge::{enqueue_cleanup_tx, lease_holds};
use crate::error::db_err;
use crate::pg_store::PgStore;
use crate::sql::col;

/// Advisory-lock key serialising embed job claims ("one embed job per node at a time").
const EMBED_CLAIM_LOCK: i64 = 0x7175_6172_7279_0002;

/// Advisory-lock key serialising chunk claims (two embed jobs never claim one text).
const EMBED_CHUNKS_LOCK: i64 = 0x7175_6172_7279_0003;

/// Advisory-lock class serialising embed enqueues per collection.
const EMBED_ENQUEUE_LOCK: &str = "quarry.embed.enqueue.";

/// Claims the oldest runnable job matching `kinds_sql` (a condition on `jobs o`, which may
/// use `node` as `$3`), ordered by `order_sql`; returns the claim's columns.
fn claim_where(
    tx: &mut crate::PgTransaction<'_>,
    owner: &str,
    lease_ms: i64,
    kinds_sql: &str,
    order_sql: &str,
    node: Option<&str>,
) -> Result<Option<postgres::Row>> {
    // Taking over a lapsed lease means the last attempt ended without an outcome (its worker
    // died or was killed): it counts, so a file that kills workers is not retried forever.
    tx.query_opt(
        &format!(
            "WITH now AS (SELECT quarry_now_ms() AS t) \
             UPDATE jobs j SET status = 'processing', lease_owner = $1, \
             lease_until = now.t + $2, updated_at = now.t, \
             attempts = j.attempts + CASE WHEN c.interrupted THEN 1 ELSE 0 END, \
             lease_token = j.lease_token + 1 \
             FROM now, (SELECT o.id, o.status = 'processing' AS interrupted FROM jobs o, now \
                  WHERE ((o.status = 'enqueued' AND o.not_before <= now.t) \
                      OR (o.status = 'processing' AND o.lease_until < now.t)) AND ({kinds_sql}) \
                  ORDER BY {order_sql} LIMIT 1 FOR UPDATE OF o SKIP LOCKED) c \
             WHERE j.id = c.id \
             RETURNING j.id, j.lease_token, j.kind, j.file_id, j.collection_id, j.attempts, \
             c.interrupted"
        ),
        &match &node {
            Some(node) => vec![
                &owner as &(dyn postgres::types::ToSql + Sync),
                &lease_ms,
                node,
            ],
            None => vec![&owner as &(dyn postgres::types::ToSql + Sync), &lease_ms],
        },
    )
    .map_err(db_err)
}

impl JobQueue for PgStore {
    fn claim_job(&self, owner: &str, lease_ms: i64) -> Result<Option<Job>> {
        self.write(|tx| {
            // Uploads first (unknown kinds from a newer quarry sort with them, to be set
            // aside below), then cleanups.
            let mut row = claim_where(
                tx,
                owner,
                lease_ms,
                "o.kind <> 'embed'",
                "CASE o.kind WHEN 'cleanup' THEN 1 ELSE 0 END, o.id",
                None,
            )?;
            if row.is_none() {
                // An embed job only while no other embed job of this node holds a live
                // lease, so one embedding at a time leaves the node's other workers to
                // conversions. Two claimers would both see none running: only the holder of
                // this advisory lock (until commit) claims one. Another claimer busy
                // claiming means no embed job for this one either, so it does not wait: it
                // finds nothing. (An owner of the node is the node itself or starts with
                // `node:`; node names end in a start time, so no other node's name has this
                // one as a prefix.)
                let locked = tx
                    .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&EMBED_CLAIM_LOCK])
                    .map_err(db_err)?;
                if !col::<bool>(&locked, 0)? {
                    return Ok(None);
                }
                row = claim_where(
                    tx,
                    owner,
                    lease_ms,
                    "o.kind = 'embed' AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.kind = 'embed' \
                     AND r.status = 'processing' AND r.lease_until >= now.t AND r.id <> o.id \
                     AND (r.lease_owner = $3 OR left(r.lease_owner, length($3) + 1) = $3 || ':'))",
                    "o.id",
                    Some(owner_node(owner)),
                )?;
            }
            let Some(row) = row else {
                return Ok(None);
            };
            let id: i64 = col(&row, 0)?;
            let kind: String = col(&row, 2)?;
            let Some(kind) = JobKind::parse(&kind) else {
                // A job kind from a newer quarry: set aside, not run.
                tx.execute(
                    "UPDATE jobs SET status = 'failed', error = 'unknown job kind' WHERE id = $1",
                    &[&id],
                )
                .map_err(db_err)?;
                return Ok(None);
            };
            Ok(Some(Job {
                id,
                token: col(&row, 1)?,
                kind,
                file_id: col(&row, 3)?,
                collection_id: col(&row, 4)?,
                attempts: col::<i32>(&row, 5)?.max(0) as u32,
                interrupted: col(&row, 6)?,
            }))
        })
    }

    fn renew_job(&self, lease: Lease, lease_ms: i64) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                "UPDATE jobs SET lease_until = quarry_now_ms() + $3 WHERE id = $1 \
                 AND lease_token = $2 AND status = 'processing'",
                &[&lease.job, &lease.token, &lease_ms],
            )
            .map_err(db_err)?;
        Ok(n > 0)
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
            // Two jobs claiming at once would both see the same texts unclaimed.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&EMBED_CHUNKS_LOCK])
                .map_err(db_err)?;
            if !lease_holds(tx, Some(lease))? {
                return Ok(None);
            }
            // This job's earlier claims, and those of jobs that ended, go.
            tx.execute(
                "DELETE FROM embed_claims x WHERE x.job_id = $1 OR NOT EXISTS \
                 (SELECT 1 FROM jobs j WHERE j.id = x.job_id AND j.status = 'processing')",
                &[&lease.job],
            )
            .map_err(db_err)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX - 1);
            // Each distinct text once (its first chunk); the newest documents' first, so a
            // small upload is not queued behind a large one's backlog.
            let mut rows = tx
                .query(
                    "SELECT * FROM (SELECT DISTINCT ON (k.hash) k.hash, d.title, k.heading, \
                     k.document_id, k.byte_start, k.byte_end, k.text \
                     FROM chunks k JOIN documents d ON d.id = k.document_id \
                     JOIN collections c ON c.id = d.collection_id \
                     WHERE c.space = $1 AND d.collection_id = $2 \
                     AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = $3 AND e.hash = k.hash) \
                     AND NOT EXISTS (SELECT 1 FROM embed_claims x JOIN jobs o ON o.id = x.job_id \
                         WHERE x.model = $3 AND x.hash = k.hash AND o.status = 'processing' \
                         AND o.lease_until >= quarry_now_ms()) \
                     ORDER BY k.hash, k.id) t ORDER BY document_id DESC, hash LIMIT $4",
                    &[&space, &collection_id, &model, &(limit + 1)],
                )
                .map_err(db_err)?;
            let more = rows.len() as i64 > limit;
            rows.truncate(limit as usize);
            let hashes: Vec<String> = rows.iter().map(|r| col(r, 0)).collect::<Result<_>>()?;
            tx.execute(
                "INSERT INTO embed_claims (model, hash, job_id) SELECT $1, h, $3 FROM unnest($2::text[]) h \
                 ON CONFLICT (model, hash) DO UPDATE SET job_id = EXCLUDED.job_id",
                &[&model, &hashes, &lease.job],
            )
            .map_err(db_err)?;
            let texts = crate::store::embed_texts(&mut **tx, &rows)?;
            Ok(Some(ClaimedChunks { texts, more }))
        })
    }

    fn complete_job(&self, lease: Lease) -> Result<bool> {
        let mut conn = self.conn()?;
        let Some(job) = conn
            .query_opt(
                "DELETE FROM jobs WHERE id = $1 AND lease_token = $2 AND status = 'processing' \
                 RETURNING kind",
                &[&lease.job, &lease.token],
            )
            .map_err(db_err)?
        else {
            return Ok(false);
        };
        // Only embed jobs claim chunk texts: the other kinds leave at one statement. (Claims
        // of a job that is gone no longer count, so this needs no transaction.)
        if col::<String>(&job, 0)? == JobKind::Embed.as_str() {
            conn.execute("DELETE FROM embed_claims WHERE job_id = $1", &[&lease.job])
                .map_err(db_err)?;
        }
        Ok(true)
    }

    fn fail_job(&self, lease: Lease, error: &str, retry_after_ms: Option<i64>) -> Result<bool> {
        self.write(|tx| {
            // The fenced update itself: it holds the job's row lock until commit, so the
            // file's status below is written under the same claim.
            let job = tx
                .query_opt(
                    "UPDATE jobs SET attempts = attempts + 1, lease_owner = NULL, \
                     lease_until = NULL, error = $3, updated_at = quarry_now_ms(), \
                     status = CASE WHEN $4::bigint IS NULL THEN 'failed' ELSE 'enqueued' END, \
                     not_before = CASE WHEN $4::bigint IS NULL THEN not_before \
                                  ELSE quarry_now_ms() + $4 END \
                     WHERE id = $1 AND lease_token = $2 AND status = 'processing' \
                     RETURNING kind, file_id, collection_id, attempts",
                    &[&lease.job, &lease.token, &error, &retry_after_ms],
                )
                .map_err(db_err)?;
            let Some(job) = job else {
                return Ok(false);
            };
            let kind: String = col(&job, 0)?;
            if kind == JobKind::Embed.as_str() {
                tx.execute("DELETE FROM embed_claims WHERE job_id = $1", &[&lease.job])
                    .map_err(db_err)?;
            }
            let file_id: Option<i64> = col(&job, 1)?;
            let collection_id: Option<i64> = col(&job, 2)?;
            let attempts: i32 = col(&job, 3)?;
            let now = quarry_core::now_millis();
            if let Some(file) = file_id {
                let (status, error) = match retry_after_ms {
                    Some(_) => (FileStatus::Pending, format!("{error} (will retry)")),
                    None => (FileStatus::Failed, error.to_owned()),
                };
                tx.execute(
                    "UPDATE kb_files SET attempts = attempts + 1, status = $2, error = $3, \
                     updated_at = $4 WHERE id = $1",
                    &[&file, &status.as_str(), &error, &now],
                )
                .map_err(db_err)?;
            }
            if let (Some(collection), None) =
                (collection_id.filter(|_| kind == "embed"), retry_after_ms)
            {
                // Its documents stay keyword-searchable; `failed` with the reason says they
                // have no vectors (retrying one queues it again).
                tx.execute(
                    "UPDATE kb_files SET status = 'failed', error = $2, attempts = $3, \
                     updated_at = $4 WHERE collection_id = $1 AND status = 'embedding'",
                    &[&collection, &error, &attempts, &now],
                )
                .map_err(db_err)?;
            }
            Ok(true)
        })
    }

    fn lease_owners(&self) -> Result<Vec<String>> {
        self.conn()?
            .query(
                "SELECT DISTINCT lease_owner FROM jobs \
                 WHERE status = 'processing' AND lease_owner IS NOT NULL ORDER BY 1",
                &[],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| col(r, 0))
            .collect()
    }

    fn expire_leases(&self, owners: &[String]) -> Result<u64> {
        if owners.is_empty() {
            return Ok(0);
        }
        self.conn()?
            .execute(
                "UPDATE jobs SET lease_until = 0 WHERE status = 'processing' \
                 AND lease_owner = ANY($1)",
                &[&owners],
            )
            .map_err(db_err)
    }

    fn node_heartbeat(&self, node: &str) -> Result<()> {
        self.conn()?
            .execute(
                "INSERT INTO nodes (id, seen_at) VALUES ($1, quarry_now_ms()) \
                 ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
                &[&node],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn live_nodes(&self, within_ms: i64) -> Result<Vec<String>> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM nodes WHERE seen_at < quarry_now_ms() - 86400000",
                &[],
            )
            .map_err(db_err)?;
            tx.query(
                "SELECT id FROM nodes WHERE seen_at >= quarry_now_ms() - $1 ORDER BY id",
                &[&within_ms.max(0)],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| col(r, 0))
            .collect()
        })
    }

    fn enqueue_cleanup(&self) -> Result<()> {
        self.write(enqueue_cleanup_tx)
    }

    fn enqueue_embed(&self, collection_id: i64) -> Result<()> {
        self.write(|tx| {
            // "Unless one is already waiting" is a check then an insert: two nodes at once
            // would both insert. A per-collection advisory lock serialises them.
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                &[&format!("{EMBED_ENQUEUE_LOCK}{collection_id}")],
            )
            .map_err(db_err)?;
            tx.execute(
                "INSERT INTO jobs (kind, collection_id, status, not_before, created_at, updated_at) \
                 SELECT 'embed', $1, 'enqueued', quarry_now_ms(), $2, $2 WHERE NOT EXISTS \
                 (SELECT 1 FROM jobs WHERE kind = 'embed' AND collection_id = $1 \
                  AND status = 'enqueued')",
                &[&collection_id, &quarry_core::now_millis()],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn collections_to_embed(&self, model: Option<&str>, failed_within_ms: i64) -> Result<Vec<i64>> {
        let rows = self
            .conn()?
            .query(
                "SELECT c.id FROM collections c WHERE EXISTS (SELECT 1 FROM documents d \
                 JOIN chunks k ON k.document_id = d.id WHERE d.collection_id = c.id \
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.model = $1 AND e.hash = k.hash)) \
                 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = 'embed' \
                 AND j.collection_id = c.id AND j.status = 'failed' \
                 AND j.updated_at >= quarry_now_ms() - $2) ORDER BY c.id",
                &[&model.unwrap_or(""), &failed_within_ms],
            )
            .map_err(db_err)?;
        rows.iter().map(|r| col(r, 0)).collect()
    }

    fn chunk_fingerprint(&self) -> Result<(i64, i64)> {
        let row = self
            .conn()?
            .query_one(
                "SELECT COALESCE(MAX(id), 0)::bigint, count(*) FROM chunks",
                &[],
            )
            .map_err(db_err)?;
        Ok((col(&row, 0)?, col(&row, 1)?))
    }

    fn live_embed_jobs(&self) -> Result<u64> {
        let row = self
            .conn()?
            .query_one(
                "SELECT count(*) FROM jobs WHERE kind = 'embed' AND status = 'processing' \
                 AND lease_until >= quarry_now_ms()",
                &[],
            )
            .map_err(db_err)?;
        Ok(col::<i64>(&row, 0)?.max(0) as u64)
    }

    fn queue_counts(&self, collections: Option<&[i64]>) -> Result<QueueCounts> {
        let row = self
            .conn()?
            .query_one(
                "SELECT count(*) FILTER (WHERE j.status = 'enqueued'), \
                 count(*) FILTER (WHERE j.status = 'processing'), \
                 count(*) FILTER (WHERE j.status = 'failed') \
                 FROM jobs j LEFT JOIN kb_files f ON f.id = j.file_id \
                 WHERE $1::bigint[] IS NULL OR COALESCE(f.collection_id, j.collection_id) = ANY($1)",
                &[&collections],
            )
            .map_err(db_err)?;
        queue_counts_from_row(&row)
    }

    fn file_queue_counts(&self, file_rows: &[i64]) -> Result<QueueCounts> {
        if file_rows.is_empty() {
            return Ok(QueueCounts::default());
        }
        let row = self
            .conn()?
            .query_one(
                "SELECT count(*) FILTER (WHERE status = 'enqueued'), \
                 count(*) FILTER (WHERE status = 'processing'), \
                 count(*) FILTER (WHERE status = 'failed') FROM jobs WHERE file_id = ANY($1)",
                &[&file_rows],
            )
            .map_err(db_err)?;
        queue_counts_from_row(&row)
    }
}

/// Jobs waiting, running and failed, from a row of those three counts.
fn queue_counts_from_row(row: &postgres::Row) -> Result<QueueCounts> {
    let count = |i: usize| -> Result<u64> { Ok(col::<i64>(row, i)?.max(0) as u64) };
    Ok(QueueCounts {
        enqueued: count(0)?,
        processing: count(1)?,
        failed: count(2)?,
    })
}
