//! [`SqliteStore`]: the database file, its one writing connection and its pool of readers.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use quarry_core::{Error, Result};
use rusqlite::{Connection, Transaction};

use crate::error::db_err;
use crate::migrate::{SCHEMA_VERSION, migrate};

/// SQLite-backed [`Store`](quarry_store::Store).
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
    pub(crate) fn writer(&self) -> MutexGuard<'_, Connection> {
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
