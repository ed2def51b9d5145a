//! The schema: the migrations in `migrations/`, applied in order when a database is opened.

use rusqlite::{Connection, params};

/// The newest schema version: the last of [`MIGRATIONS`].
pub(crate) const SCHEMA_VERSION: i64 = 37;

/// `(version, SQL)`, oldest first: the files in `migrations/`, each bringing the schema from
/// the version before it to its own. Version 4 also gives old rows their UUIDs ([`assign_uids`]).
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
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
    (35, include_str!("../migrations/v35.sql")),
    (36, include_str!("../migrations/v36.sql")),
    (37, include_str!("../migrations/v37.sql")),
];

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

/// Brings the schema to [`SCHEMA_VERSION`] in one immediate transaction. The version is read
/// again inside it: two processes opening an old database at once must not both migrate.
pub(crate) fn migrate(conn: &Connection) -> rusqlite::Result<()> {
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
