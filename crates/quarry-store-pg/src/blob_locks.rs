//! [`BlobLocks`] as PostgreSQL advisory locks, so blobs shared by several nodes (an S3
//! bucket) are collected safely: writers of blob references hold the lock shared from
//! storing the bytes until the reference is committed; the collector holds it alone. Each
//! lock is a session lock on a connection of its own, outside the pool, released when the
//! guard drops (or the connection dies with its process, so a crash never leaves it held).

use postgres::Client;
use quarry_blobs::{BlobLock, BlobLocks};
use quarry_core::{Error, Result};

use crate::pg_store::PgStore;

/// The advisory lock key of blob collection.
const BLOB_LOCK: i64 = 7_245_190_455_173_122_051;

struct Held(Client);

impl Drop for Held {
    fn drop(&mut self) {
        // Closing the session releases it too; unlocking first frees it at once.
        let _ = self.0.execute("SELECT pg_advisory_unlock_all()", &[]);
    }
}

impl PgStore {
    fn blob_lock(&self, shared: bool) -> Result<BlobLock> {
        quarry_store::thread_guard::check();
        let mut client = self.pool.connect_dedicated()?;
        let sql = if shared {
            "SELECT pg_advisory_lock_shared($1)"
        } else {
            "SELECT pg_advisory_lock($1)"
        };
        client
            .execute(sql, &[&BLOB_LOCK])
            .map_err(|e| Error::storage(&e))?;
        Ok(BlobLock::new(Box::new(Held(client))))
    }
}

impl BlobLocks for PgStore {
    fn shared(&self) -> Result<BlobLock> {
        self.blob_lock(true)
    }

    fn exclusive(&self) -> Result<BlobLock> {
        self.blob_lock(false)
    }
}
