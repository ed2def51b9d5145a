//! PostgreSQL as the target of a copy (`quarry migrate`, see `quarry_store::copy`): each
//! page goes in with one `INSERT … SELECT … FROM json_populate_recordset(…) ON CONFLICT DO
//! NOTHING`, so PostgreSQL converts every value to its column's type (pgvector's text form
//! to `halfvec`, `\x…` to `bytea`, `1` to `boolean`) and a row already there is skipped.

use quarry_core::{Error, Result};
use quarry_store::SettingsStore;
use quarry_store::copy::{Row, RowCopy, RowPage, copied_table};

use crate::error::db_err;
use crate::pg_store::PgStore;
use crate::sql::col;

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

impl RowCopy for PgStore {
    fn export_rows(&self, table: &str, _from: i64, _limit: usize) -> Result<RowPage> {
        copied_table(table)?;
        Err(Error::invalid(
            "copying out of PostgreSQL is not supported: use pg_dump for a database",
        ))
    }

    fn import_rows(&self, table: &str, rows: &[Row]) -> Result<u64> {
        let table = copied_table(table)?;
        let Some(first) = rows.first() else {
            return Ok(0);
        };
        self.write(|tx| {
            let columns: Vec<String> = tx
                .query(
                    "SELECT column_name::text FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND table_name = $1",
                    &[&table],
                )
                .map_err(db_err)?
                .iter()
                .map(|r| col::<String>(r, 0))
                .collect::<Result<_>>()?;
            // The columns both sides have; the target's own ones keep their defaults.
            let shared: Vec<String> = first
                .keys()
                .filter(|k| columns.iter().any(|c| c == *k))
                .map(|k| quote(k))
                .collect();
            if shared.is_empty() {
                return Err(Error::invalid(format!(
                    "no column of the copied '{table}' rows exists in PostgreSQL"
                )));
            }
            let list = shared.join(", ");
            let json = serde_json::to_string(rows)
                .map_err(|e| Error::invalid(format!("rows of '{table}': {e}")))?;
            tx.execute(
                &format!(
                    "INSERT INTO {table} ({list}) SELECT {list} FROM \
                     json_populate_recordset(NULL::{table}, $1::text::json) ON CONFLICT DO NOTHING"
                ),
                &[&json],
            )
            .map_err(db_err)
        })
    }

    fn count_rows(&self, table: &str) -> Result<u64> {
        let table = copied_table(table)?;
        let n: i64 = col(
            &self
                .conn()?
                .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
                .map_err(db_err)?,
            0,
        )?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn finish_import(&self) -> Result<()> {
        self.write(|tx| {
            let identities: Vec<(String, String)> = tx
                .query(
                    "SELECT table_name::text, column_name::text FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND is_identity = 'YES'",
                    &[],
                )
                .map_err(db_err)?
                .iter()
                .map(|r| Ok((col(r, 0)?, col(r, 1)?)))
                .collect::<Result<_>>()?;
            for (table, column) in identities {
                // Ids the copy brought stay unique: new rows are numbered after them.
                tx.execute(
                    &format!(
                        "SELECT setval(pg_get_serial_sequence($1, $2), m) FROM \
                         (SELECT MAX({c}) AS m FROM {t}) x WHERE m IS NOT NULL",
                        c = quote(&column),
                        t = quote(&table)
                    ),
                    &[&table, &column],
                )
                .map_err(db_err)?;
            }
            Ok(())
        })?;
        // Statistics now, not when autovacuum gets to it: a migrated node's first searches
        // are planned on the copied row counts, not on an empty table's.
        let tables: Vec<String> = quarry_store::copy::COPIED_TABLES
            .iter()
            .map(|t| quote(t))
            .collect();
        self.conn()?
            .batch_execute(&format!("ANALYZE {}", tables.join(", ")))
            .map_err(db_err)?;
        // The copied vectors' model gets its index now, not at the first `embed`.
        let model = self.meta("ann.model")?;
        let dims = self.meta("ann.dims")?.and_then(|d| d.parse::<usize>().ok());
        if let (Some(model), Some(dims)) = (model, dims) {
            quarry_store::VectorSearch::prepare_vectors(self, &model, dims)?;
        }
        Ok(())
    }
}
