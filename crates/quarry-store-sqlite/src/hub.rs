//! [`HubStore`] on SQLite.

use quarry_core::{Error, Result};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::{conflict_or_db, db_err};
use crate::store::SqliteStore;
use quarry_store::{CustomToolRow, HubStore, PackageRow, ToolEndpointRow, ToolRow, UpstreamRow};

const ENDPOINT_COLUMNS: &str =
    "id, name, owner, selection, description, created_by, created_at, updated_at";

fn endpoint_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToolEndpointRow> {
    Ok(ToolEndpointRow {
        id: r.get(0)?,
        name: r.get(1)?,
        owner: r.get(2)?,
        selection: r.get(3)?,
        description: r.get(4)?,
        created_by: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

const UPSTREAM_COLUMNS: &str = "id, owner, name, package, transport, config, options, secrets, \
     enabled, created_at, updated_at";

fn upstream_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UpstreamRow> {
    Ok(UpstreamRow {
        id: r.get(0)?,
        owner: r.get(1)?,
        name: r.get(2)?,
        package: r.get(3)?,
        transport: r.get(4)?,
        config: r.get(5)?,
        options: r.get(6)?,
        secrets: r.get(7)?,
        enabled: r.get::<_, i64>(8)? != 0,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

const PACKAGE_COLUMNS: &str = "owner, id, name, description, category, tags, kind, upstream_id, \
     source, schema_version, manifest, updated_at, surface";

/// Tags are kept one per line (a tag never holds a newline: the hub trims them).
fn join_tags(tags: &[String]) -> String {
    tags.join("\n")
}

fn split_tags(s: &str) -> Vec<String> {
    s.lines()
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

fn package_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PackageRow> {
    Ok(PackageRow {
        owner: r.get(0)?,
        id: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        category: r.get(4)?,
        tags: split_tags(&r.get::<_, String>(5)?),
        kind: r.get(6)?,
        upstream_id: r.get(7)?,
        source: r.get(8)?,
        schema_version: r.get(9)?,
        manifest: r.get(10)?,
        updated_at: r.get(11)?,
        surface: r.get(12)?,
    })
}

const TOOL_COLUMNS: &str = "owner, package, tool, full_name, description, input_schema, raw, \
     category, tags, source, schema_version, requires_task, updated_at";

fn tool_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToolRow> {
    Ok(ToolRow {
        owner: r.get(0)?,
        package: r.get(1)?,
        tool: r.get(2)?,
        full_name: r.get(3)?,
        description: r.get(4)?,
        input_schema: r.get(5)?,
        raw: r.get(6)?,
        category: r.get(7)?,
        tags: split_tags(&r.get::<_, String>(8)?),
        source: r.get(9)?,
        schema_version: r.get(10)?,
        requires_task: r.get::<_, i64>(11)? != 0,
        updated_at: r.get(12)?,
    })
}

const CUSTOM_COLUMNS: &str = "id, owner, name, spec, secrets, enabled, created_at, updated_at";

fn custom_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CustomToolRow> {
    Ok(CustomToolRow {
        id: r.get(0)?,
        owner: r.get(1)?,
        name: r.get(2)?,
        spec: r.get(3)?,
        secrets: r.get(4)?,
        enabled: r.get::<_, i64>(5)? != 0,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

/// Every change to an owner's hub bumps its generation, in the same transaction.
fn bump(tx: &Transaction<'_>, owner: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO hub_generations (owner, generation) VALUES (?1, 1) \
         ON CONFLICT (owner) DO UPDATE SET generation = generation + 1",
        [owner],
    )
    .map_err(db_err)?;
    Ok(())
}

fn upsert_package(tx: &Transaction<'_>, p: &PackageRow) -> rusqlite::Result<usize> {
    tx.execute(
        &format!(
            "INSERT INTO hub_packages ({PACKAGE_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \
             ON CONFLICT (owner, id) DO UPDATE SET name = excluded.name, \
             description = excluded.description, category = excluded.category, \
             tags = excluded.tags, kind = excluded.kind, upstream_id = excluded.upstream_id, \
             source = excluded.source, schema_version = excluded.schema_version, \
             manifest = excluded.manifest, updated_at = excluded.updated_at, \
             surface = excluded.surface"
        ),
        params![
            p.owner,
            p.id,
            p.name,
            p.description,
            p.category,
            join_tags(&p.tags),
            p.kind,
            p.upstream_id,
            p.source,
            p.schema_version,
            p.manifest,
            p.updated_at,
            p.surface
        ],
    )
}

impl HubStore for SqliteStore {
    fn insert_upstream(&self, u: &UpstreamRow, package: &PackageRow) -> Result<()> {
        self.write(|tx| {
            let taken: Option<String> = tx
                .query_row(
                    "SELECT id FROM hub_packages WHERE owner = ?1 AND id = ?2",
                    params![u.owner, package.id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            if taken.is_some() {
                return Err(Error::Conflict(format!(
                    "a package named '{}' already exists",
                    package.id
                )));
            }
            tx.execute(
                &format!(
                    "INSERT INTO hub_upstreams ({UPSTREAM_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
                ),
                params![
                    u.id,
                    u.owner,
                    u.name,
                    u.package,
                    u.transport,
                    u.config,
                    u.options,
                    u.secrets,
                    u.enabled as i64,
                    u.created_at,
                    u.updated_at
                ],
            )
            .map_err(|e| {
                conflict_or_db(e, || {
                    format!("an MCP server named '{}' already exists", u.name)
                })
            })?;
            upsert_package(tx, package).map_err(db_err)?;
            bump(tx, &u.owner)
        })
    }

    fn update_upstream(&self, u: &UpstreamRow) -> Result<()> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE hub_upstreams SET name = ?3, options = ?4, secrets = ?5, \
                     enabled = ?6, updated_at = ?7, transport = ?8, config = ?9 \
                     WHERE owner = ?1 AND id = ?2",
                    params![
                        u.owner,
                        u.id,
                        u.name,
                        u.options,
                        u.secrets,
                        u.enabled as i64,
                        u.updated_at,
                        u.transport,
                        u.config
                    ],
                )
                .map_err(|e| {
                    conflict_or_db(e, || {
                        format!("an MCP server named '{}' already exists", u.name)
                    })
                })?;
            if n == 0 {
                return Err(Error::NotFound(format!("MCP server '{}' not found", u.id)));
            }
            bump(tx, &u.owner)
        })
    }

    fn swap_upstream_secrets(&self, id: &str, expected: &str, new: &str) -> Result<bool> {
        self.write(|tx| {
            tx.execute(
                "UPDATE hub_upstreams SET secrets = ?3 WHERE id = ?1 AND secrets = ?2",
                params![id, expected, new],
            )
            .map(|n| n == 1)
            .map_err(db_err)
        })
    }

    fn upstreams(&self, owner: Option<&str>) -> Result<Vec<UpstreamRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {UPSTREAM_COLUMNS} FROM hub_upstreams \
                 WHERE ?1 IS NULL OR owner = ?1 ORDER BY created_at, id"
            ))
            .map_err(db_err)?;
        stmt.query_map([owner], upstream_from_row)
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }

    fn upstream(&self, owner: &str, id: &str) -> Result<Option<UpstreamRow>> {
        let conn = self.conn();
        conn.query_row(
            &format!("SELECT {UPSTREAM_COLUMNS} FROM hub_upstreams WHERE owner = ?1 AND id = ?2"),
            params![owner, id],
            upstream_from_row,
        )
        .optional()
        .map_err(db_err)
    }

    fn delete_upstream(&self, owner: &str, id: &str) -> Result<bool> {
        self.write(|tx| {
            // Tools go with their package (ON DELETE CASCADE), the package with its upstream.
            let n = tx
                .execute(
                    "DELETE FROM hub_upstreams WHERE owner = ?1 AND id = ?2",
                    params![owner, id],
                )
                .map_err(db_err)?;
            if n > 0 {
                bump(tx, owner)?;
            }
            Ok(n > 0)
        })
    }

    fn replace_package(&self, package: &PackageRow, tools: &[ToolRow]) -> Result<()> {
        self.write(|tx| {
            upsert_package(tx, package).map_err(db_err)?;
            tx.execute(
                "DELETE FROM hub_tools WHERE owner = ?1 AND package = ?2",
                params![package.owner, package.id],
            )
            .map_err(db_err)?;
            let mut insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO hub_tools ({TOOL_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                ))
                .map_err(db_err)?;
            for t in tools {
                insert
                    .execute(params![
                        package.owner,
                        package.id,
                        t.tool,
                        t.full_name,
                        t.description,
                        t.input_schema,
                        t.raw,
                        t.category,
                        join_tags(&t.tags),
                        t.source,
                        t.schema_version,
                        t.requires_task as i64,
                        t.updated_at
                    ])
                    .map_err(|e| {
                        conflict_or_db(e, || {
                            format!(
                                "tool '{}' is listed twice in package '{}'",
                                t.tool, package.id
                            )
                        })
                    })?;
            }
            bump(tx, &package.owner)
        })
    }

    fn packages(&self, owner: &str) -> Result<Vec<PackageRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {PACKAGE_COLUMNS} FROM hub_packages WHERE owner = ?1 ORDER BY id"
            ))
            .map_err(db_err)?;
        stmt.query_map([owner], package_from_row)
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }

    fn catalog_tools(&self, owner: &str) -> Result<Vec<ToolRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {TOOL_COLUMNS} FROM hub_tools WHERE owner = ?1 ORDER BY package, tool"
            ))
            .map_err(db_err)?;
        stmt.query_map([owner], tool_from_row)
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }

    fn delete_package(&self, owner: &str, id: &str) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM hub_packages WHERE owner = ?1 AND id = ?2 AND upstream_id IS NULL",
                    params![owner, id],
                )
                .map_err(db_err)?;
            if n > 0 {
                bump(tx, owner)?;
            }
            Ok(n > 0)
        })
    }

    fn hub_generation(&self, owner: &str) -> Result<i64> {
        // Read on every MCP request (catalog freshness): keep the statement prepared.
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT generation FROM hub_generations WHERE owner = ?1")
            .map_err(db_err)?;
        stmt.query_row([owner], |r| r.get(0))
            .optional()
            .map(|g| g.unwrap_or(0))
            .map_err(db_err)
    }

    fn disabled_tools(&self, owner: &str) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT full_name FROM hub_disabled_tools WHERE owner = ?1 ORDER BY full_name",
            )
            .map_err(db_err)?;
        stmt.query_map([owner], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }

    fn set_tool_disabled(&self, owner: &str, full_name: &str, disabled: bool) -> Result<()> {
        self.write(|tx| {
            let sql = if disabled {
                "INSERT OR IGNORE INTO hub_disabled_tools (owner, full_name) VALUES (?1, ?2)"
            } else {
                "DELETE FROM hub_disabled_tools WHERE owner = ?1 AND full_name = ?2"
            };
            tx.execute(sql, params![owner, full_name]).map_err(db_err)?;
            bump(tx, owner)
        })
    }

    fn insert_custom_tool(&self, t: &CustomToolRow) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO hub_custom_tools ({CUSTOM_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                ),
                params![
                    t.id,
                    t.owner,
                    t.name,
                    t.spec,
                    t.secrets,
                    t.enabled as i64,
                    t.created_at,
                    t.updated_at
                ],
            )
            .map_err(|e| {
                conflict_or_db(e, || {
                    format!("a custom tool named '{}' already exists", t.name)
                })
            })?;
            bump(tx, &t.owner)
        })
    }

    fn update_custom_tool(&self, t: &CustomToolRow) -> Result<()> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE hub_custom_tools SET name = ?3, spec = ?4, secrets = ?5, \
                     enabled = ?6, updated_at = ?7 WHERE owner = ?1 AND id = ?2",
                    params![
                        t.owner,
                        t.id,
                        t.name,
                        t.spec,
                        t.secrets,
                        t.enabled as i64,
                        t.updated_at
                    ],
                )
                .map_err(|e| {
                    conflict_or_db(e, || {
                        format!("a custom tool named '{}' already exists", t.name)
                    })
                })?;
            if n == 0 {
                return Err(Error::NotFound(format!("custom tool '{}' not found", t.id)));
            }
            bump(tx, &t.owner)
        })
    }

    fn custom_tools(&self, owner: &str) -> Result<Vec<CustomToolRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {CUSTOM_COLUMNS} FROM hub_custom_tools WHERE owner = ?1 ORDER BY name"
            ))
            .map_err(db_err)?;
        stmt.query_map([owner], custom_from_row)
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }

    fn delete_custom_tool(&self, owner: &str, id: &str) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM hub_custom_tools WHERE owner = ?1 AND id = ?2",
                    params![owner, id],
                )
                .map_err(db_err)?;
            if n > 0 {
                bump(tx, owner)?;
            }
            Ok(n > 0)
        })
    }

    fn insert_tool_endpoint(&self, e: &ToolEndpointRow) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO tool_endpoints ({ENDPOINT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                ),
                params![
                    e.id,
                    e.name,
                    e.owner,
                    e.selection,
                    e.description,
                    e.created_by,
                    e.created_at,
                    e.updated_at
                ],
            )
            .map_err(|err| {
                conflict_or_db(err, || format!("an endpoint named '{}' already exists", e.name))
            })?;
            Ok(())
        })
    }

    fn update_tool_endpoint(&self, e: &ToolEndpointRow) -> Result<()> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE tool_endpoints SET name = ?2, selection = ?3, description = ?4, \
                     updated_at = ?5 WHERE id = ?1",
                    params![e.id, e.name, e.selection, e.description, e.updated_at],
                )
                .map_err(|err| {
                    conflict_or_db(err, || {
                        format!("an endpoint named '{}' already exists", e.name)
                    })
                })?;
            if n == 0 {
                return Err(Error::NotFound(format!("endpoint '{}' not found", e.name)));
            }
            Ok(())
        })
    }

    fn tool_endpoint(&self, owners: &[String], name: &str) -> Result<Option<ToolEndpointRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {ENDPOINT_COLUMNS} FROM tool_endpoints WHERE name = ?1 \
                 AND owner IN (SELECT value FROM json_each(?2))"
            ))
            .map_err(db_err)?;
        let list = serde_json::to_string(owners).unwrap_or_else(|_| "[]".into());
        let rows: Vec<ToolEndpointRow> = stmt
            .query_map(params![name, list], endpoint_from_row)
            .and_then(|rows| rows.collect())
            .map_err(db_err)?;
        Ok(quarry_store::first_by_owner(rows, owners))
    }

    fn tool_endpoints(&self, owners: &[String]) -> Result<Vec<ToolEndpointRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {ENDPOINT_COLUMNS} FROM tool_endpoints WHERE owner IN (SELECT value FROM json_each(?1)) ORDER BY name"
            ))
            .map_err(db_err)?;
        let owners = serde_json::to_string(owners).unwrap_or_else(|_| "[]".into());
        stmt.query_map([owners], endpoint_from_row)
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }

    fn delete_tool_endpoint(&self, id: &str) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute("DELETE FROM tool_endpoints WHERE id = ?1", [id])
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("index.sqlite")).unwrap();
        (dir, s)
    }

    fn upstream(owner: &str, id: &str, name: &str) -> (UpstreamRow, PackageRow) {
        (
            UpstreamRow {
                id: id.into(),
                owner: owner.into(),
                name: name.into(),
                package: name.into(),
                transport: "stdio".into(),
                config: "true".into(),
                options: "{}".into(),
                secrets: r#"{"env":{"K":"secret"}}"#.into(),
                enabled: true,
                created_at: 1,
                updated_at: 1,
            },
            PackageRow {
                owner: owner.into(),
                id: name.into(),
                name: name.into(),
                description: String::new(),
                category: "c".into(),
                tags: vec!["a".into(), "b c".into()],
                kind: "upstream".into(),
                upstream_id: Some(id.into()),
                source: "legacy".into(),
                schema_version: "legacy".into(),
                manifest: None,
                updated_at: 1,
                surface: None,
            },
        )
    }

    fn tool(owner: &str, package: &str, name: &str) -> ToolRow {
        ToolRow {
            owner: owner.into(),
            package: package.into(),
            tool: name.into(),
            full_name: format!("{package}.{name}"),
            description: "d".into(),
            input_schema: "{}".into(),
            raw: "{}".into(),
            category: "c".into(),
            tags: vec![],
            source: "legacy".into(),
            schema_version: "legacy".into(),
            requires_task: false,
            updated_at: 1,
        }
    }

    #[test]
    fn owners_are_apart_and_every_change_bumps_the_generation() {
        let (_d, s) = store();
        let (u, p) = upstream("alice", "u1", "time");
        s.insert_upstream(&u, &p).unwrap();
        let g1 = s.hub_generation("alice").unwrap();
        assert!(g1 > 0);
        assert_eq!(s.hub_generation("bob").unwrap(), 0);
        // Bob may use the same name; Alice may not twice.
        let (ub, pb) = upstream("bob", "u2", "time");
        s.insert_upstream(&ub, &pb).unwrap();
        let (u3, p3) = upstream("alice", "u3", "time");
        assert!(matches!(
            s.insert_upstream(&u3, &p3),
            Err(Error::Conflict(_))
        ));
        s.replace_package(
            &p,
            &[
                tool("alice", "time", "now"),
                tool("alice", "time", "convert"),
            ],
        )
        .unwrap();
        assert!(s.hub_generation("alice").unwrap() > g1);
        assert_eq!(s.catalog_tools("alice").unwrap().len(), 2);
        assert!(s.catalog_tools("bob").unwrap().is_empty());
        assert!(s.upstream("bob", "u1").unwrap().is_none());
        assert_eq!(s.packages("alice").unwrap()[0].tags, vec!["a", "b c"]);
        // A tool twice in one package is refused, and nothing changes.
        let dup = s.replace_package(
            &p,
            &[tool("alice", "time", "x"), tool("alice", "time", "x")],
        );
        assert!(matches!(dup, Err(Error::Conflict(_))));
        assert_eq!(s.catalog_tools("alice").unwrap().len(), 2);
        // Deleting the upstream takes its package and tools along.
        assert!(!s.delete_upstream("bob", "u1").unwrap());
        assert!(s.delete_upstream("alice", "u1").unwrap());
        assert!(s.packages("alice").unwrap().is_empty());
        assert!(s.catalog_tools("alice").unwrap().is_empty());
        assert_eq!(s.upstreams(None).unwrap().len(), 1);
    }

    #[test]
    fn toggles_and_custom_tools() {
        let (_d, s) = store();
        s.set_tool_disabled("alice", "time.now", true).unwrap();
        s.set_tool_disabled("alice", "time.now", true).unwrap();
        assert_eq!(s.disabled_tools("alice").unwrap(), vec!["time.now"]);
        assert!(s.disabled_tools("bob").unwrap().is_empty());
        s.set_tool_disabled("alice", "time.now", false).unwrap();
        assert!(s.disabled_tools("alice").unwrap().is_empty());
        let row = CustomToolRow {
            id: "c1".into(),
            owner: "alice".into(),
            name: "weather".into(),
            spec: "{}".into(),
            secrets: "{}".into(),
            enabled: true,
            created_at: 1,
            updated_at: 1,
        };
        s.insert_custom_tool(&row).unwrap();
        assert!(matches!(
            s.insert_custom_tool(&CustomToolRow {
                id: "c2".into(),
                ..row.clone()
            }),
            Err(Error::Conflict(_))
        ));
        let mut changed = row.clone();
        changed.enabled = false;
        s.update_custom_tool(&changed).unwrap();
        assert!(!s.custom_tools("alice").unwrap()[0].enabled);
        let stranger = CustomToolRow {
            owner: "bob".into(),
            ..changed.clone()
        };
        assert!(matches!(
            s.update_custom_tool(&stranger),
            Err(Error::NotFound(_))
        ));
        assert!(!s.delete_custom_tool("bob", "c1").unwrap());
        assert!(s.delete_custom_tool("alice", "c1").unwrap());
    }
}
