//! `quarry migrate`: moves a single machine's data into a shared deployment — every table of
//! the system of record, page by page through [`quarry_store::copy::RowCopy`], and every blob
//! a row names, through [`quarry_blobs::BlobStore`], its SHA-256 checked on arrival.
//!
//! The copy is resumable: rows and blobs the target already has are skipped, so running it
//! again after an interruption finishes it. It refuses a target that holds anything else: a
//! target is either empty or marked (`meta['migrated.from']`) as a copy of this very source.
//! Derived state is not copied (each node rebuilds its keyword index from the copied rows;
//! vectors are copied, not recomputed). Jobs a dead process held are released on arrival.

use std::collections::BTreeSet;

use quarry_blobs::BlobStore;
use quarry_core::{Error, Result};
use quarry_store::Store;
use quarry_store::copy::{COPIED_TABLES, LOCAL_META_KEYS, Row, RowCopy};
use serde::Serialize;
use serde_json::Value;

/// A system of record a copy reads from or writes to.
pub trait Backend: Store + RowCopy {}
impl<T: Store + RowCopy> Backend for T {}

/// Rows per page (each page is one transaction on the target).
const PAGE: usize = 1000;
/// Bytes per read while copying a blob.
const BLOB_CHUNK: usize = 8 << 20;
/// The target's marker: the source's `database.id`.
const MARKER: &str = "migrated.from";
/// Tables a non-empty target is recognised by (rows someone made there).
const CONTENT_TABLES: &[&str] = &[
    "collections",
    "users",
    "access_tokens",
    "kb_files",
    "hub_upstreams",
    "chat_conversations",
];

/// One table's copy.
#[derive(Debug, Clone, Serialize)]
pub struct TableReport {
    /// The table.
    pub table: String,
    /// Rows in the source.
    pub source: u64,
    /// Rows this run inserted.
    pub copied: u64,
    /// Rows the target already had (an earlier run) or that stay behind (one database's own
    /// `meta` keys).
    pub skipped: u64,
    /// Rows in the target afterwards.
    pub target: u64,
}

/// The blobs' copy.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BlobReport {
    /// Blobs the copied rows name.
    pub referenced: u64,
    /// Copied by this run (hash checked).
    pub copied: u64,
    /// Already in the target (same size).
    pub present: u64,
    /// Bytes copied.
    pub bytes: u64,
}

/// What a copy did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Per table, in copy order.
    pub tables: Vec<TableReport>,
    /// Blobs.
    pub blobs: BlobReport,
    /// What could not be copied (a blob missing from the source, or whose bytes do not
    /// hash to its name): the rows are copied, the blob is not.
    pub problems: Vec<String>,
}

/// Where a copy stands, for progress displays.
#[derive(Debug, Clone)]
pub enum Step<'a> {
    /// Copying `table`: `done` of `total` rows read.
    Table {
        /// The table.
        table: &'a str,
        /// Rows read so far.
        done: u64,
        /// Rows in the source.
        total: u64,
    },
    /// Copying blobs: `done` of `total`.
    Blobs {
        /// Blobs handled so far.
        done: u64,
        /// Blobs to handle.
        total: u64,
    },
}

/// Copies `source` (rows and blobs) into `target`. See the crate docs.
pub fn migrate(
    source: &dyn Backend,
    source_blobs: &dyn BlobStore,
    target: &dyn Backend,
    target_blobs: &dyn BlobStore,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<Report> {
    let source_id = source.meta("database.id")?.ok_or_else(|| {
        Error::invalid("the source database has no id (open it with this quarry once first)")
    })?;
    claim_target(target, &source_id)?;
    let mut report = Report::default();
    let mut blobs = BTreeSet::new();
    for table in COPIED_TABLES {
        let total = source.count_rows(table)?;
        let mut t = TableReport {
            table: (*table).to_owned(),
            source: total,
            copied: 0,
            skipped: 0,
            target: 0,
        };
        let mut from = 0;
        let mut done = 0;
        if total > 0 {
            progress(Step::Table { table, done, total });
        }
        loop {
            let page = source.export_rows(table, from, PAGE)?;
            done += page.rows.len() as u64;
            let mut rows = Vec::with_capacity(page.rows.len());
            for row in page.rows {
                collect_blobs(table, &row, &mut blobs);
                match prepare(table, row) {
                    Some(row) => rows.push(row),
                    None => t.skipped += 1,
                }
            }
            let inserted = target.import_rows(table, &rows)?;
            t.copied += inserted;
            t.skipped += rows.len() as u64 - inserted;
            progress(Step::Table { table, done, total });
            match page.next {
                Some(next) => from = next,
                None => break,
            }
        }
        // Every row read is what makes the copy whole: a page read short must not end as
        // a report of success (the source is unchanged; running again resumes).
        if done < total {
            return Err(Error::Storage(format!(
                "read {done} of the {total} rows of {table} from the source: the copy is \
                 incomplete (the source is unchanged)"
            )));
        }
        t.target = target.count_rows(table)?;
        report.tables.push(t);
    }
    target.finish_import()?;
    copy_blobs(&blobs, source_blobs, target_blobs, &mut report, progress)?;
    Ok(report)
}

/// Checks that `target` is empty or a copy of `source_id`, and marks it as one.
fn claim_target(target: &dyn Backend, source_id: &str) -> Result<()> {
    match target.meta(MARKER)? {
        Some(marked) if marked == source_id => return Ok(()),
        Some(_) => {
            return Err(Error::Conflict(
                "the target database holds a copy of another data directory; copy into an \
                 empty database"
                    .into(),
            ));
        }
        None => {}
    }
    for table in CONTENT_TABLES {
        let n = target.count_rows(table)?;
        if n > 0 {
            return Err(Error::Conflict(format!(
                "the target database already holds data ({n} rows in {table}); quarry \
                 migrate copies into an empty database, or resumes a copy of this same \
                 data directory"
            )));
        }
    }
    target.set_meta(MARKER, source_id)
}

/// A row as the target gets it, or `None` for one that stays behind.
fn prepare(table: &str, mut row: Row) -> Option<Row> {
    if table == "meta" {
        let key = row.get("key").and_then(Value::as_str).unwrap_or_default();
        // One database's or one node's own keys.
        if LOCAL_META_KEYS.contains(&key) || key == MARKER {
            return None;
        }
    }
    if table == "jobs" && row.get("status").and_then(Value::as_str) == Some("processing") {
        // Its worker was a process on the old machine: claimable at once.
        row.insert("lease_until".into(), Value::from(0));
    }
    for v in row.values_mut() {
        // PostgreSQL text holds no NUL; the stores keep it as a space, offsets unchanged.
        if let Value::String(s) = v
            && s.contains('\0')
        {
            *s = s.replace('\0', " ");
        }
    }
    Some(row)
}

/// The blobs a row names.
fn collect_blobs(table: &str, row: &Row, into: &mut BTreeSet<String>) {
    let column = match table {
        "kb_files" => "blob",
        "file_images" | "blobs" => "hash",
        _ => return,
    };
    if let Some(hash) = row.get(column).and_then(Value::as_str)
        && quarry_blobs::is_sha256(hash)
    {
        into.insert(hash.to_owned());
    }
}

fn copy_blobs(
    hashes: &BTreeSet<String>,
    source: &dyn BlobStore,
    target: &dyn BlobStore,
    report: &mut Report,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<()> {
    let total = hashes.len() as u64;
    report.blobs.referenced = total;
    for (i, hash) in hashes.iter().enumerate() {
        progress(Step::Blobs {
            done: i as u64,
            total,
        });
        let Some(size) = source.size(hash)? else {
            report
                .problems
                .push(format!("blob {hash} is missing from the source"));
            continue;
        };
        if target.size(hash)? == Some(size) {
            report.blobs.present += 1;
            continue;
        }
        // Held while the blob lands, as every writer of blobs does (the collector waits).
        let _lock = target.lock_shared()?;
        let mut staged = target.stage()?;
        let mut offset = 0u64;
        while offset < size {
            let bytes = source.read_range(hash, offset, BLOB_CHUNK)?;
            if bytes.is_empty() {
                break;
            }
            offset += bytes.len() as u64;
            staged.write_all(&bytes)?;
        }
        if staged.sha256() != *hash || offset != size {
            report.problems.push(format!(
                "blob {hash}: the source's bytes hash to {} ({offset} of {size} bytes); not copied",
                staged.sha256()
            ));
            continue;
        }
        let landed = target.commit(staged)?;
        if landed != *hash {
            return Err(Error::Storage(format!(
                "blob {hash} landed as {landed} in the target"
            )));
        }
        report.blobs.copied += 1;
        report.blobs.bytes += size;
    }
    progress(Step::Blobs { done: total, total });
    Ok(())
}
