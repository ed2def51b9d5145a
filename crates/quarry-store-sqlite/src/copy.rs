//! The embedded store as the source of a copy (`quarry migrate`, see `quarry_store::copy`):
//! every table paged by `rowid`. Importing into the embedded store is not offered.

use quarry_core::{Error, Result};
use quarry_store::copy::{Row, RowCopy, RowPage, copied_table};
use rusqlite::types::ValueRef;
use serde_json::Value;

use crate::error::db_err;
use crate::sql::blob_to_vector;
use crate::store::SqliteStore;

/// A column's value as the copy carries it (see `quarry_store::copy`).
fn value(table: &str, column: &str, v: ValueRef<'_>) -> Result<Value> {
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) if table == "embeddings" && column == "vector" => {
            let v = blob_to_vector(b)?;
            let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
            Value::String(format!("[{}]", parts.join(",")))
        }
        ValueRef::Blob(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            Value::String(format!("\\x{hex}"))
        }
    })
}

impl RowCopy for SqliteStore {
    fn export_rows(&self, table: &str, from: i64, limit: usize) -> Result<RowPage> {
        let table = copied_table(table)?;
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        let conn = self.conn();
        // Tables with a rowid page by it (`from` is the last rowid); those without one
        // (`WITHOUT ROWID`: embeddings) by their primary key, `from` being an offset — stable,
        // since nothing writes the directory during a copy.
        let rowid = !conn
            .query_row(
                "SELECT COALESCE(instr(upper(sql), 'WITHOUT ROWID'), 0) FROM sqlite_master \
                 WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get::<_, i64>(0),
            )
            .map_err(db_err)?
            .is_positive();
        let sql = if rowid {
            format!("SELECT rowid, * FROM {table} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2")
        } else {
            let key: Vec<String> = conn
                .prepare(&format!(
                    "SELECT name FROM pragma_table_info('{table}') WHERE pk > 0 ORDER BY pk"
                ))
                .and_then(|mut st| {
                    st.query_map([], |r| r.get::<_, String>(0))?
                        .collect::<rusqlite::Result<_>>()
                })
                .map_err(db_err)?;
            // row_number() numbers the whole ordered table before OFFSET applies: it is
            // already the row's position, the next page's offset.
            format!(
                "SELECT row_number() OVER (ORDER BY {k}), * FROM {table} ORDER BY {k} \
                 LIMIT ?2 OFFSET ?1",
                k = key.join(", ")
            )
        };
        let mut stmt = conn.prepare(&sql).map_err(db_err)?;
        let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        let mut rows = stmt.query([from, limit]).map_err(db_err)?;
        let mut page = RowPage::default();
        let mut last = from;
        while let Some(r) = rows.next().map_err(db_err)? {
            last = r.get(0).map_err(db_err)?;
            let mut row = Row::new();
            for (i, name) in columns.iter().enumerate().skip(1) {
                let v = r.get_ref(i).map_err(db_err)?;
                row.insert(name.clone(), value(table, name, v)?);
            }
            page.rows.push(row);
        }
        if i64::try_from(page.rows.len()).unwrap_or(i64::MAX) >= limit {
            page.next = Some(last);
        }
        Ok(page)
    }

    fn import_rows(&self, _table: &str, _rows: &[Row]) -> Result<u64> {
        Err(Error::invalid(
            "copying into the embedded store is not supported: quarry migrate copies an \
             embedded data directory into PostgreSQL",
        ))
    }

    fn count_rows(&self, table: &str) -> Result<u64> {
        let table = copied_table(table)?;
        let n: i64 = self
            .conn()
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .map_err(db_err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn finish_import(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of `table`, page by page as `quarry migrate` reads them.
    fn export_all(store: &SqliteStore, table: &str, limit: usize) -> Vec<Row> {
        let (mut rows, mut from) = (Vec::new(), 0);
        loop {
            let page = store.export_rows(table, from, limit).unwrap();
            rows.extend(page.rows);
            match page.next {
                Some(next) => from = next,
                None => return rows,
            }
        }
    }

    #[test]
    fn every_row_is_exported_once_across_pages_with_and_without_rowid() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
        {
            let conn = store.writer();
            for i in 0..25 {
                conn.execute(
                    "INSERT INTO embeddings (model, hash, vector) VALUES ('m', ?1, x'0000803f')",
                    [format!("h{i:02}")],
                )
                .unwrap();
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, 'v')",
                    [format!("k{i:02}")],
                )
                .unwrap();
            }
        }
        for limit in [1, 7, 10, 25, 100] {
            // embeddings is WITHOUT ROWID (paged by offset), meta pages by rowid.
            let hashes: Vec<String> = export_all(&store, "embeddings", limit)
                .iter()
                .map(|r| r["hash"].as_str().unwrap_or_default().to_owned())
                .collect();
            let want: Vec<String> = (0..25).map(|i| format!("h{i:02}")).collect();
            assert_eq!(hashes, want, "embeddings at {limit} a page");
            let keys = export_all(&store, "meta", limit)
                .iter()
                .filter(|r| r["key"].as_str().is_some_and(|k| k.starts_with('k')))
                .count();
            assert_eq!(keys, 25, "meta at {limit} a page");
        }
    }
}
