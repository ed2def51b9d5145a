//! The schema: SQL files at the embedded store's logical versions, applied in order under a
//! transaction-level advisory lock (two nodes starting at once never both migrate), each
//! recorded in `quarry_schema` with a checksum of its text. A database whose newest version
//! is beyond this binary's is refused, and so is one whose recorded checksum differs from
//! the file this binary carries (someone changed an applied migration).

use quarry_core::{Error, Result};

use crate::error::db_err;
use crate::pool::PgConnection;

/// `(logical version, SQL)`, oldest first. Version 12 is where PostgreSQL starts: the whole
/// schema of the embedded store's version 12 in one file.
const MIGRATIONS: &[(i32, &str)] = &[
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
    (35, include_str!("../migrations/v35.sql")),
    (36, include_str!("../migrations/v36.sql")),
    (37, include_str!("../migrations/v37.sql")),
];

/// The newest schema version this binary knows.
pub(crate) const SCHEMA_VERSION: i32 = 37;

/// Serialises migrations across every process using the database.
const MIGRATION_LOCK: i64 = 7_245_190_455_173_122_048;

/// Makes sure the `vector` extension is installed, installing it when the role may.
pub(crate) fn ensure_vector_extension(conn: &mut PgConnection<'_>, db: &str) -> Result<()> {
    let installed: bool = conn
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
            &[],
        )
        .map_err(db_err)?
        .get(0);
    if installed {
        return Ok(());
    }
    let available: bool = conn
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
            &[],
        )
        .map_err(db_err)?
        .get(0);
    if !available {
        return Err(Error::Unavailable(format!(
            "PostgreSQL at {db} has no pgvector extension: install pgvector 0.8 or newer on \
             the server (https://github.com/pgvector/pgvector), or use a managed PostgreSQL \
             that offers it"
        )));
    }
    conn.batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
        .map_err(|e| {
            Error::Unavailable(format!(
                "PostgreSQL at {db} has pgvector available but it is not enabled in this \
                 database, and this role cannot enable it ({}): run \
                 `CREATE EXTENSION vector;` in it as its owner or a superuser",
                quarry_core::error_chain(&e)
            ))
        })
}

/// Brings the schema to [`SCHEMA_VERSION`].
pub(crate) fn migrate(conn: &mut PgConnection<'_>, db: &str) -> Result<()> {
    let mut tx = conn.transaction().map_err(db_err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(db_err)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS quarry_schema (
             version integer PRIMARY KEY,
             checksum text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .map_err(db_err)?;
    let applied: Vec<(i32, String)> = tx
        .query(
            "SELECT version, checksum FROM quarry_schema ORDER BY version",
            &[],
        )
        .map_err(db_err)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    if let Some((newest, _)) = applied.last()
        && *newest > SCHEMA_VERSION
    {
        return Err(Error::Storage(format!(
            "database {db} has schema version {newest}, newer than this quarry \
             ({SCHEMA_VERSION}); upgrade quarry"
        )));
    }
    for (version, sql) in MIGRATIONS {
        let sum = checksum(sql);
        match applied.iter().find(|(v, _)| v == version) {
            Some((_, recorded)) if *recorded == sum => continue,
            Some(_) => {
                return Err(Error::Storage(format!(
                    "database {db}: schema version {version} was applied from different SQL \
                     than this quarry carries (checksum mismatch); restore the database or use \
                     the quarry that created it"
                )));
            }
            None => {}
        }
        tx.batch_execute(sql).map_err(|e| {
            Error::Storage(format!(
                "cannot upgrade database {db} to schema version {version}: {}",
                quarry_core::error_chain(&e)
            ))
        })?;
        tx.execute(
            "INSERT INTO quarry_schema (version, checksum) VALUES ($1, $2)",
            &[version, &sum],
        )
        .map_err(db_err)?;
    }
    tx.commit().map_err(db_err)
}

fn checksum(sql: &str) -> String {
    quarry_core::sha256_hex(sql.as_bytes())
}
