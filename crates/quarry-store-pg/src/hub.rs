//! [`quarry_store::HubStore`] on PostgreSQL.
//!
//! - Every change bumps the owner's generation **in the same statement** (a data-modifying
//!   `WITH changed AS (… RETURNING owner)` feeding the generation upsert), so a change and
//!   its generation commit together without an explicit transaction, and the upsert's row
//!   lock serialises concurrent bumps: every node reads one number that only grows.
//! - Lists sort with `COLLATE "C"` (byte order, as SQLite's `BINARY`), whatever the
//!   database's default collation.
//! - Secrets columns are opaque text, written and read back as they are; nothing here logs
//!   or formats them into errors.

use postgres::Row;
use postgres::types::{ToSql, Type};
use quarry_core::{Error, Result};
use quarry_store::{CustomToolRow, HubStore, PackageRow, ToolEndpointRow, ToolRow, UpstreamRow};

use crate::error::{conflict_or_db, db_err};
use crate::pg_store::PgStore;

/// A hub row read from a `SELECT` of its table's column list: one reader per row type, which
/// every query returning that type goes through.
trait FromRow: Sized {
    fn from_row(r: &Row) -> std::result::Result<Self, postgres::Error>;
}

/// Defines a table's column list (what its `SELECT`s and `INSERT`s name, in this order) and
/// the reader of its row type from one list of fields: each column is the row's field of that
/// name, read as it is or through a function (`tags: split_tags`).
macro_rules! hub_row {
    ($columns:ident => $row:ident { $first:ident $(: $fconv:path)? $(, $field:ident $(: $conv:path)?)* $(,)? }) => {
        const $columns: &str = concat!(stringify!($first) $(, ", ", stringify!($field))*);

        impl FromRow for $row {
            fn from_row(r: &Row) -> std::result::Result<Self, postgres::Error> {
                Ok($row {
                    $first: hub_row!(@read r, $first $(, $fconv)?),
                    $($field: hub_row!(@read r, $field $(, $conv)?),)*
                })
            }
        }
    };
    (@read $r:ident, $field:ident) => { $r.try_get(stringify!($field))? };
    (@read $r:ident, $field:ident, $conv:path) => { $conv($r.try_get(stringify!($field))?) };
}

hub_row!(UPSTREAM_COLUMNS => UpstreamRow {
    id, owner, name, package, transport, config, options, secrets, enabled, created_at,
    updated_at,
});

hub_row!(PACKAGE_COLUMNS => PackageRow {
    owner, id, name, description, category, tags: split_tags, kind, upstream_id, source,
    schema_version, manifest, updated_at, surface,
});

hub_row!(TOOL_COLUMNS => ToolRow {
    owner, package, tool, full_name, description, input_schema, raw, category,
    tags: split_tags, source, schema_version, requires_task, updated_at,
});

hub_row!(CUSTOM_COLUMNS => CustomToolRow {
    id, owner, name, spec, secrets, enabled, created_at, updated_at,
});

hub_row!(ENDPOINT_COLUMNS => ToolEndpointRow {
    id, name, owner, selection, description, created_by, created_at, updated_at,
});

/// The tail of every changing statement: bumps the generation of each owner the CTE
/// `changed` returned (none when nothing changed). The upsert locks the owner's row, so
/// concurrent bumps queue rather than lose an increment.
const BUMP: &str = "INSERT INTO hub_generations (owner, generation) \
     SELECT DISTINCT owner, 1 FROM changed \
     ON CONFLICT (owner) DO UPDATE SET generation = hub_generations.generation + 1";

impl HubStore for PgStore {
    fn insert_upstream(&self, u: &UpstreamRow, package: &PackageRow) -> Result<()> {
        let tags = join_tags(&package.tags);
        self.write(|tx| {
            // The package check rides on the insert, first, so its message wins as in SQLite;
            // a registration racing this one for the same package is caught below by the
            // package's primary key (`ON CONFLICT DO NOTHING` returns no row).
            let n = tx
                .execute(
                    &format!(
                        "INSERT INTO hub_upstreams ({UPSTREAM_COLUMNS}) \
                         SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, \
                         $7::text, $8::text, $9::boolean, $10::bigint, $11::bigint \
                         WHERE NOT EXISTS \
                         (SELECT 1 FROM hub_packages WHERE owner = $2 AND id = $12)"
                    ),
                    &[
                        &u.id,
                        &u.owner,
                        &u.name,
                        &u.package,
                        &u.transport,
                        &u.config,
                        &u.options,
                        &u.secrets,
                        &u.enabled,
                        &u.created_at,
                        &u.updated_at,
                        &package.id,
                    ],
                )
                .map_err(|e| {
                    conflict_or_db(e, || {
                        format!("an MCP server named '{}' already exists", u.name)
                    })
                })?;
            if n == 0 {
                return Err(package_taken(&package.id));
            }
            let n = tx
                .execute(
                    &format!(
                        "WITH changed AS (INSERT INTO hub_packages ({PACKAGE_COLUMNS}) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
                         ON CONFLICT (owner, id) DO NOTHING RETURNING $14::text AS owner) \
                         {BUMP}"
                    ),
                    &[&package_params(package, &tags)[..], &[&u.owner]].concat(),
                )
                .map_err(db_err)?;
            if n == 0 {
                return Err(package_taken(&package.id));
            }
            Ok(())
        })
    }

    fn update_upstream(&self, u: &UpstreamRow) -> Result<()> {
        let n = self
            .conn()?
            .execute(
                &format!(
                    "WITH changed AS (UPDATE hub_upstreams SET name = $3, options = $4, \
                     secrets = $5, enabled = $6, updated_at = $7, transport = $8, config = $9 \
                     WHERE owner = $1 AND id = $2 RETURNING owner) {BUMP}"
                ),
                &[
                    &u.owner,
                    &u.id,
                    &u.name,
                    &u.options,
                    &u.secrets,
                    &u.enabled,
                    &u.updated_at,
                    &u.transport,
                    &u.config,
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
        Ok(())
    }

    fn swap_upstream_secrets(&self, id: &str, expected: &str, new: &str) -> Result<bool> {
        self.conn()?
            .execute(
                "UPDATE hub_upstreams SET secrets = $3 WHERE id = $1 AND secrets = $2",
                &[&id, &expected, &new],
            )
            .map(|n| n == 1)
            .map_err(db_err)
    }

    fn upstreams(&self, owner: Option<&str>) -> Result<Vec<UpstreamRow>> {
        read_all(self.conn()?.query(
            &format!(
                "SELECT {UPSTREAM_COLUMNS} FROM hub_upstreams \
                 WHERE $1::text IS NULL OR owner = $1 \
                 ORDER BY created_at, id COLLATE \"C\""
            ),
            &[&owner],
        ))
    }

    fn upstream(&self, owner: &str, id: &str) -> Result<Option<UpstreamRow>> {
        read_opt(self.conn()?.query_opt(
            &format!("SELECT {UPSTREAM_COLUMNS} FROM hub_upstreams WHERE owner = $1 AND id = $2"),
            &[&owner, &id],
        ))
    }

    fn delete_upstream(&self, owner: &str, id: &str) -> Result<bool> {
        // Its package goes with it (ON DELETE CASCADE), and the package's tools with that.
        let n = self
            .conn()?
            .execute(
                &format!(
                    "WITH changed AS (DELETE FROM hub_upstreams WHERE owner = $1 AND id = $2 \
                     RETURNING owner) {BUMP}"
                ),
                &[&owner, &id],
            )
            .map_err(db_err)?;
        Ok(n > 0)
    }

    fn replace_package(&self, package: &PackageRow, tools: &[ToolRow]) -> Result<()> {
        let tags = join_tags(&package.tags);
        let column = |f: fn(&ToolRow) -> &str| tools.iter().map(f).collect::<Vec<&str>>();
        let names = column(|t| &t.tool);
        let full_names = column(|t| &t.full_name);
        let descriptions = column(|t| &t.description);
        let schemas = column(|t| &t.input_schema);
        let raws = column(|t| &t.raw);
        let categories = column(|t| &t.category);
        let sources = column(|t| &t.source);
        let versions = column(|t| &t.schema_version);
        let tool_tags: Vec<String> = tools.iter().map(|t| join_tags(&t.tags)).collect();
        let requires_task: Vec<bool> = tools.iter().map(|t| t.requires_task).collect();
        let updated_at: Vec<i64> = tools.iter().map(|t| t.updated_at).collect();
        self.write(|tx| {
            // The upsert locks the package's row (or, for a new package, waits on its key):
            // two nodes replacing one package run one after the other, never mixing tools.
            tx.execute(
                &format!(
                    "WITH changed AS (INSERT INTO hub_packages ({PACKAGE_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
                     ON CONFLICT (owner, id) DO UPDATE SET name = excluded.name, \
                     description = excluded.description, category = excluded.category, \
                     tags = excluded.tags, kind = excluded.kind, \
                     upstream_id = excluded.upstream_id, source = excluded.source, \
                     schema_version = excluded.schema_version, manifest = excluded.manifest, \
                     updated_at = excluded.updated_at, surface = excluded.surface \
                     RETURNING owner) {BUMP}"
                ),
                &package_params(package, &tags),
            )
            .map_err(db_err)?;
            tx.execute(
                "DELETE FROM hub_tools WHERE owner = $1 AND package = $2",
                &[&package.owner, &package.id],
            )
            .map_err(db_err)?;
            if tools.is_empty() {
                return Ok(());
            }
            // All tools in one statement. A tool whose name or full name is taken (twice in
            // the list, or by another package of the owner) is skipped rather than raising,
            // so the first one skipped, in the list's order, can be named as SQLite does;
            // the transaction then rolls back and nothing changes.
            let inserted = tx
                .query(
                    &format!(
                        "INSERT INTO hub_tools ({TOOL_COLUMNS}) \
                         SELECT $1, $2, t.tool, t.full_name, t.description, t.input_schema, \
                         t.raw, t.category, t.tags, t.source, t.schema_version, \
                         t.requires_task, t.updated_at \
                         FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], \
                         $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], \
                         $12::boolean[], $13::bigint[]) WITH ORDINALITY AS t(tool, full_name, \
                         description, input_schema, raw, category, tags, source, \
                         schema_version, requires_task, updated_at, n) \
                         ORDER BY t.n \
                         ON CONFLICT DO NOTHING RETURNING tool, full_name"
                    ),
                    &[
                        &package.owner,
                        &package.id,
                        &names,
                        &full_names,
                        &descriptions,
                        &schemas,
                        &raws,
                        &categories,
                        &tool_tags,
                        &sources,
                        &versions,
                        &requires_task,
                        &updated_at,
                    ],
                )
                .map_err(db_err)?;
            if inserted.len() == tools.len() {
                return Ok(());
            }
            let mut kept: Vec<(String, String)> = inserted
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<std::result::Result<_, postgres::Error>>()
                .map_err(db_err)?;
            let skipped = tools.iter().find(|t| {
                match kept
                    .iter()
                    .position(|(tool, full)| *tool == t.tool && *full == t.full_name)
                {
                    Some(i) => {
                        kept.swap_remove(i);
                        false
                    }
                    None => true,
                }
            });
            let tool = skipped.map_or("", |t| t.tool.as_str());
            Err(Error::Conflict(format!(
                "tool '{tool}' is listed twice in package '{}'",
                package.id
            )))
        })
    }

    fn packages(&self, owner: &str) -> Result<Vec<PackageRow>> {
        read_all(self.conn()?.query(
            &format!(
                "SELECT {PACKAGE_COLUMNS} FROM hub_packages WHERE owner = $1 \
                 ORDER BY id COLLATE \"C\""
            ),
            &[&owner],
        ))
    }

    fn catalog_tools(&self, owner: &str) -> Result<Vec<ToolRow>> {
        read_all(self.conn()?.query(
            &format!(
                "SELECT {TOOL_COLUMNS} FROM hub_tools WHERE owner = $1 \
                 ORDER BY package COLLATE \"C\", tool COLLATE \"C\""
            ),
            &[&owner],
        ))
    }

    fn delete_package(&self, owner: &str, id: &str) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                &format!(
                    "WITH changed AS (DELETE FROM hub_packages \
                     WHERE owner = $1 AND id = $2 AND upstream_id IS NULL RETURNING owner) \
                     {BUMP}"
                ),
                &[&owner, &id],
            )
            .map_err(db_err)?;
        Ok(n > 0)
    }

    fn hub_generation(&self, owner: &str) -> Result<i64> {
        // Read on every MCP request (catalog freshness): typed parameters spare the round
        // trip that preparing the statement would cost.
        let rows = self
            .conn()?
            .query_typed(
                "SELECT generation FROM hub_generations WHERE owner = $1",
                &[(&owner, Type::TEXT)],
            )
            .map_err(db_err)?;
        match rows.first() {
            Some(row) => row.try_get(0).map_err(db_err),
            None => Ok(0),
        }
    }

    fn disabled_tools(&self, owner: &str) -> Result<Vec<String>> {
        self.conn()?
            .query(
                "SELECT full_name FROM hub_disabled_tools WHERE owner = $1 \
                 ORDER BY full_name COLLATE \"C\"",
                &[&owner],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| r.try_get(0).map_err(db_err))
            .collect()
    }

    fn set_tool_disabled(&self, owner: &str, full_name: &str, disabled: bool) -> Result<()> {
        // The generation moves even when the switch was already where asked (as in SQLite).
        let change = if disabled {
            "INSERT INTO hub_disabled_tools (owner, full_name) VALUES ($1, $2) \
             ON CONFLICT DO NOTHING"
        } else {
            "DELETE FROM hub_disabled_tools WHERE owner = $1 AND full_name = $2"
        };
        self.conn()?
            .execute(
                &format!(
                    "WITH toggled AS ({change}), changed AS (SELECT $1::text AS owner) {BUMP}"
                ),
                &[&owner, &full_name],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn insert_custom_tool(&self, t: &CustomToolRow) -> Result<()> {
        self.conn()?
            .execute(
                &format!(
                    "WITH changed AS (INSERT INTO hub_custom_tools ({CUSTOM_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING owner) {BUMP}"
                ),
                &[
                    &t.id,
                    &t.owner,
                    &t.name,
                    &t.spec,
                    &t.secrets,
                    &t.enabled,
                    &t.created_at,
                    &t.updated_at,
                ],
            )
            .map_err(|e| {
                conflict_or_db(e, || {
                    format!("a custom tool named '{}' already exists", t.name)
                })
            })?;
        Ok(())
    }

    fn update_custom_tool(&self, t: &CustomToolRow) -> Result<()> {
        let n = self
            .conn()?
            .execute(
                &format!(
                    "WITH changed AS (UPDATE hub_custom_tools SET name = $3, spec = $4, \
                     secrets = $5, enabled = $6, updated_at = $7 \
                     WHERE owner = $1 AND id = $2 RETURNING owner) {BUMP}"
                ),
                &[
                    &t.owner,
                    &t.id,
                    &t.name,
                    &t.spec,
                    &t.secrets,
                    &t.enabled,
                    &t.updated_at,
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
        Ok(())
    }

    fn custom_tools(&self, owner: &str) -> Result<Vec<CustomToolRow>> {
        read_all(self.conn()?.query(
            &format!(
                "SELECT {CUSTOM_COLUMNS} FROM hub_custom_tools WHERE owner = $1 \
                 ORDER BY name COLLATE \"C\""
            ),
            &[&owner],
        ))
    }

    fn delete_custom_tool(&self, owner: &str, id: &str) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                &format!(
                    "WITH changed AS (DELETE FROM hub_custom_tools WHERE owner = $1 AND id = $2 \
                     RETURNING owner) {BUMP}"
                ),
                &[&owner, &id],
            )
            .map_err(db_err)?;
        Ok(n > 0)
    }

    fn insert_tool_endpoint(&self, e: &ToolEndpointRow) -> Result<()> {
        self.conn()?
            .execute(
                &format!(
                    "INSERT INTO tool_endpoints ({ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                ),
                &[
                    &e.id,
                    &e.name,
                    &e.owner,
                    &e.selection,
                    &e.description,
                    &e.created_by,
                    &e.created_at,
                    &e.updated_at,
                ],
            )
            .map_err(|err| {
                conflict_or_db(err, || format!("an endpoint named '{}' already exists", e.name))
            })?;
        Ok(())
    }

    fn update_tool_endpoint(&self, e: &ToolEndpointRow) -> Result<()> {
        let n = self
            .conn()?
            .execute(
                "UPDATE tool_endpoints SET name = $2, selection = $3, description = $4, \
                 updated_at = $5 WHERE id = $1",
                &[&e.id, &e.name, &e.selection, &e.description, &e.updated_at],
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
    }

    fn tool_endpoint(&self, owners: &[String], name: &str) -> Result<Option<ToolEndpointRow>> {
        let rows = read_all(self.conn()?.query(
            &format!(
                "SELECT {ENDPOINT_COLUMNS} FROM tool_endpoints WHERE name = $1 AND owner = ANY($2)"
            ),
            &[&name, &owners],
        ))?;
        Ok(quarry_store::first_by_owner(rows, owners))
    }

    fn tool_endpoints(&self, owners: &[String]) -> Result<Vec<ToolEndpointRow>> {
        read_all(self.conn()?.query(
            &format!(
                "SELECT {ENDPOINT_COLUMNS} FROM tool_endpoints WHERE owner = ANY($1) \
                 ORDER BY name COLLATE \"C\""
            ),
            &[&owners],
        ))
    }

    fn delete_tool_endpoint(&self, id: &str) -> Result<bool> {
        let n = self
            .conn()?
            .execute("DELETE FROM tool_endpoints WHERE id = $1", &[&id])
            .map_err(db_err)?;
        Ok(n > 0)
    }
}

fn package_taken(id: &str) -> Error {
    Error::Conflict(format!("a package named '{id}' already exists"))
}

/// Tags are kept one per line, as in SQLite (a tag never holds a newline: the hub trims
/// them).
fn join_tags(tags: &[String]) -> String {
    tags.join("\n")
}

fn split_tags(s: &str) -> Vec<String> {
    s.lines()
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The rows a query returned, each read as `T` (a failed query or a column of an unexpected
/// type is a storage error).
fn read_all<T: FromRow>(rows: std::result::Result<Vec<Row>, postgres::Error>) -> Result<Vec<T>> {
    rows.map_err(db_err)?
        .iter()
        .map(|r| T::from_row(r).map_err(db_err))
        .collect()
}

/// The row a query returned, if any, read as `T`.
fn read_opt<T: FromRow>(
    row: std::result::Result<Option<Row>, postgres::Error>,
) -> Result<Option<T>> {
    row.map_err(db_err)?
        .map(|r| T::from_row(&r).map_err(db_err))
        .transpose()
}

/// A package's values in [`PACKAGE_COLUMNS`]' order ($1 … $13), its tags already joined.
fn package_params<'a>(
    p: &'a PackageRow,
    tags: &'a (dyn ToSql + Sync),
) -> [&'a (dyn ToSql + Sync); 13] {
    [
        &p.owner,
        &p.id,
        &p.name,
        &p.description,
        &p.category,
        tags,
        &p.kind,
        &p.upstream_id,
        &p.source,
        &p.schema_version,
        &p.manifest,
        &p.updated_at,
        &p.surface,
    ]
}
