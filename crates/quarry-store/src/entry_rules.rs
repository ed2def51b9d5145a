//! The rules of knowledge entries, written once for every backend: what superseding a key's
//! current entry checks and changes, when a write is a duplicate, and what deleting an entry
//! takes with it. A backend implements [`EntryTx`] — each method one statement of its own SQL,
//! inside the write transaction it opened — and calls [`add_entry`] and [`delete_entry`] from
//! its [`EntryStore`](crate::EntryStore).

use std::collections::HashSet;

use quarry_core::{Error, Result};

use crate::entries::{AddedEntry, NewEntry, PageSource, superseded_name, window_end};
use crate::knowledge::{KbFile, NewKbFile};

/// An entry's row as the rules need it.
#[derive(Debug, Clone)]
pub struct EntryRow {
    /// Row id.
    pub id: i64,
    /// Public id.
    pub uid: String,
    /// `entry_key`.
    pub key: Option<String>,
    /// The successor's row id (`0` while a write takes it out of its key's current set,
    /// [`EntryTx::leave_current`]).
    pub superseded_by: Option<i64>,
    /// `valid_to` as given.
    pub valid_to: Option<i64>,
    /// `expires_at`.
    pub expires_at: Option<i64>,
}

/// An entry derived from another ([`EntryTx::derived_from_any`]).
#[derive(Debug, Clone)]
pub struct Derived {
    /// The derived entry's row id.
    pub id: i64,
    /// Its knowledge base's collection.
    pub collection_id: i64,
    /// The source's public id.
    pub source_uid: String,
}

/// The statements the entry rules run, inside one write transaction of a backend. Readers
/// are compared as [`readers_to_column`](crate::readers_to_column) stores them (`None`: every
/// reader of the space), and `None` equals `None`.
pub trait EntryTx {
    /// Serialises writers of one knowledge base for the rest of the transaction (a backend
    /// whose transactions are serial already does nothing).
    fn lock_collection(&mut self, collection_id: i64) -> Result<()>;
    /// Locks the file `id` for the rest of the transaction; its collection, `None` when there
    /// is no such file.
    fn lock_file(&mut self, id: i64) -> Result<Option<i64>>;
    /// How many of `ids` (distinct) are files of this store.
    fn count_files(&mut self, ids: &[i64]) -> Result<usize>;
    /// The current entry of `key` with these readers in a knowledge base.
    fn current_of_key(
        &mut self,
        collection_id: i64,
        key: &str,
        readers: Option<&str>,
    ) -> Result<Option<i64>>;
    /// Another current entry of the key of `id`, with its readers.
    fn other_current_of_key(&mut self, id: i64) -> Result<Option<i64>>;
    /// The entry `id` of a knowledge base.
    fn entry_row(&mut self, collection_id: i64, id: i64) -> Result<Option<EntryRow>>;
    /// The public id of the file `id`.
    fn uid(&mut self, id: i64) -> Result<Option<String>>;
    /// A current, uploaded (not synced) file of a knowledge base with this content and readers.
    fn current_with_content(
        &mut self,
        collection_id: i64,
        sha256: &str,
        readers: Option<&str>,
    ) -> Result<Option<KbFile>>;
    /// The file `id` as callers see it.
    fn file(&mut self, id: i64) -> Result<Option<KbFile>>;
    /// The name and readers of the file `id`.
    fn name_and_readers(&mut self, id: i64) -> Result<(String, Option<String>)>;
    /// `name` when no file of the knowledge base with these readers holds it, else the
    /// store's `(2)` rule applied to it.
    fn free_name(
        &mut self,
        collection_id: i64,
        name: &str,
        readers: Option<&str>,
    ) -> Result<String>;
    /// Renames the file `id`, and its document's path with it.
    fn rename(&mut self, id: i64, name: &str) -> Result<()>;
    /// Inserts the file of a new entry; its row id.
    fn insert_file(&mut self, collection_id: i64, file: &NewKbFile, now: i64) -> Result<i64>;
    /// Writes the entry's columns onto its file `id`; its public id.
    fn set_entry(
        &mut self,
        id: i64,
        key: Option<&str>,
        entry: &EntryColumnsWrite<'_>,
    ) -> Result<String>;
    /// Takes the entry `id` out of its key's current set (`superseded_by = 0`) until its
    /// successor is written.
    fn leave_current(&mut self, id: i64) -> Result<()>;
    /// Sets `superseded_by` and `valid_until` of the entry `id`.
    fn set_successor(
        &mut self,
        id: i64,
        superseded_by: Option<i64>,
        valid_until: Option<i64>,
    ) -> Result<()>;
    /// Records that `file_id` was derived from `source_id`.
    fn add_derivation(&mut self, file_id: i64, source_id: i64) -> Result<()>;
    /// Records the passage the entry `entry_id` cites at `position` (0-based).
    fn add_page_source(&mut self, entry_id: i64, position: u32, source: &PageSource) -> Result<()>;
    /// The entries derived from any of `sources`, by row id.
    fn derived_from_any(&mut self, sources: &[i64]) -> Result<Vec<Derived>>;
    /// The entry whose successor is `id`.
    fn predecessor(&mut self, id: i64) -> Result<Option<i64>>;
    /// When the validity of the file `id` starts (`valid_from`, else `created_at`).
    fn valid_start(&mut self, id: i64) -> Result<Option<i64>>;
    /// Deletes the file `id` with its derivations (both ways) and the passages it cites.
    fn delete_file(&mut self, id: i64) -> Result<()>;
    /// Queues the cleanup of what deleted files left.
    fn enqueue_cleanup(&mut self) -> Result<()>;
    /// Appends an event to a knowledge base's entry history.
    fn history(&mut self, collection_id: i64, event: &HistoryRow<'_>) -> Result<()>;
    /// Marks the knowledge base changed at `now`.
    fn touch_collection(&mut self, collection_id: i64, now: i64) -> Result<()>;
}

/// The entry columns [`EntryTx::set_entry`] writes.
#[derive(Debug, Clone, Copy)]
pub struct EntryColumnsWrite<'a> {
    /// `valid_from`.
    pub valid_from: i64,
    /// `valid_to`.
    pub valid_to: Option<i64>,
    /// `expires_at`.
    pub expires_at: Option<i64>,
    /// `valid_until`.
    pub valid_until: Option<i64>,
    /// `provenance` (a JSON object).
    pub provenance: &'a str,
}

/// One history event as [`EntryTx::history`] stores it.
#[derive(Debug, Clone, Copy)]
pub struct HistoryRow<'a> {
    /// The entry's public id.
    pub entry: &'a str,
    /// Its key.
    pub key: Option<&'a str>,
    /// `created`, `superseded`, `deleted`, `deleted_with_source` or `current_again`.
    pub event: &'a str,
    /// When (Unix ms).
    pub at: i64,
    /// What else there is to say.
    pub detail: &'a serde_json::Value,
}

/// [`EntryStore::add_entry`](crate::EntryStore::add_entry), inside the backend's write
/// transaction `tx`.
pub fn add_entry(
    tx: &mut impl EntryTx,
    collection_id: i64,
    file: &NewKbFile,
    entry: &NewEntry,
) -> Result<AddedEntry> {
    tx.lock_collection(collection_id)?;
    let now = quarry_core::now_millis();
    let valid_from = entry.valid_from.unwrap_or(now);
    let sources: Vec<i64> = {
        let mut seen = HashSet::new();
        entry
            .derived_from
            .iter()
            .copied()
            .filter(|s| seen.insert(*s))
            .collect()
    };
    if tx.count_files(&sources)? != sources.len() {
        return Err(Error::NotFound(
            "derived_from: an entry it names is not there".into(),
        ));
    }
    let readers = crate::knowledge::readers_to_column(file.readers.as_deref());
    let current = match &entry.key {
        Some(key) => tx.current_of_key(collection_id, key, readers.as_deref())?,
        None => None,
    };
    if entry.first_version && current.is_some() {
        return Err(Error::Conflict(
            "this key already has a current entry: write the new one as its next version".into(),
        ));
    }
    let target = match entry.supersedes {
        Some(id) => Some(checked_target(tx, collection_id, id, entry, current)?),
        None => match current {
            Some(id) => tx.entry_row(collection_id, id)?,
            None => None,
        },
    };
    // The key: as given, else the superseded entry's.
    let key = entry
        .key
        .clone()
        .or_else(|| target.as_ref().and_then(|t| t.key.clone()));
    // The same content among current entries: nothing new.
    if let Some(file) = tx.current_with_content(collection_id, &file.sha256, readers.as_deref())? {
        return Ok(AddedEntry::Duplicate { file });
    }
    // Out of the key's (and the content's) current set before the new one enters.
    if let Some(t) = &target {
        tx.leave_current(t.id)?;
        step_aside(tx, collection_id, t.id, &file.original_name, now)?;
    }
    let id = tx.insert_file(collection_id, file, now)?;
    let uid = tx.set_entry(
        id,
        key.as_deref(),
        &EntryColumnsWrite {
            valid_from,
            valid_to: entry.valid_to,
            expires_at: entry.expires_at,
            valid_until: window_end(entry.valid_to, entry.expires_at, None),
            provenance: &entry.provenance,
        },
    )?;
    for source in &sources {
        tx.add_derivation(id, *source)?;
    }
    for (position, cited) in (0u32..).zip(&entry.sources) {
        tx.add_page_source(id, position, cited)?;
    }
    let provenance: serde_json::Value = serde_json::from_str(&entry.provenance).unwrap_or_default();
    tx.history(
        collection_id,
        &HistoryRow {
            entry: &uid,
            key: key.as_deref(),
            event: "created",
            at: now,
            detail: &serde_json::json!({
                "supersedes": target.as_ref().map(|t| &t.uid),
                "by": provenance,
            }),
        },
    )?;
    if let Some(t) = &target {
        tx.set_successor(
            t.id,
            Some(id),
            window_end(t.valid_to, t.expires_at, Some(valid_from)),
        )?;
        tx.history(
            collection_id,
            &HistoryRow {
                entry: &t.uid,
                key: key.as_deref(),
                event: "superseded",
                at: now,
                detail: &serde_json::json!({"by": uid, "valid_until": valid_from}),
            },
        )?;
    }
    tx.touch_collection(collection_id, now)?;
    let file = tx
        .file(id)?
        .ok_or_else(|| Error::Storage("entry vanished".into()))?;
    let superseded = match &target {
        Some(t) => tx.file(t.id)?.map(Box::new),
        None => None,
    };
    Ok(AddedEntry::Added { file, superseded })
}

/// The entry `supersedes` names, when it may be superseded by this write: it is current, of
/// the key given (when one is) and that key's current entry.
fn checked_target(
    tx: &mut impl EntryTx,
    collection_id: i64,
    id: i64,
    entry: &NewEntry,
    current: Option<i64>,
) -> Result<EntryRow> {
    let row = tx.entry_row(collection_id, id)?.ok_or_else(|| {
        Error::NotFound("supersedes: no such entry in this knowledge base".into())
    })?;
    if let Some(next) = row.superseded_by {
        let next_uid = tx.uid(next)?.unwrap_or_default();
        return Err(Error::Conflict(format!(
            "entry {} was already superseded by {next_uid}; supersede that one",
            row.uid
        )));
    }
    if let (Some(given), Some(has)) = (&entry.key, &row.key)
        && given != has
    {
        return Err(Error::Conflict(format!(
            "entry {} has the key {has:?}, not {given:?}",
            row.uid
        )));
    }
    if let Some(c) = current
        && c != row.id
    {
        return Err(Error::Conflict(format!(
            "supersedes names {}, but the key's current entry is another one",
            row.uid
        )));
    }
    Ok(row)
}

/// The current version keeps the key's name: the version `row_id` it replaces, when it holds
/// the name its successor asks for (`wanted`), steps aside to [`superseded_name`] — its
/// document's path with it.
fn step_aside(
    tx: &mut impl EntryTx,
    collection_id: i64,
    row_id: i64,
    wanted: &str,
    now: i64,
) -> Result<()> {
    let (name, readers) = tx.name_and_readers(row_id)?;
    if name != wanted {
        return Ok(());
    }
    let aside = tx.free_name(
        collection_id,
        &superseded_name(&name, now),
        readers.as_deref(),
    )?;
    tx.rename(row_id, &aside)
}

/// [`EntryStore::delete_entry`](crate::EntryStore::delete_entry), inside the backend's write
/// transaction `tx`.
pub fn delete_entry(
    tx: &mut impl EntryTx,
    collection_id: i64,
    row_id: i64,
    by: &str,
) -> Result<Vec<(i64, String)>> {
    tx.lock_collection(collection_id)?;
    let now = quarry_core::now_millis();
    let by: serde_json::Value = serde_json::from_str(by).unwrap_or_default();
    let not_found = || Error::NotFound("document not found".into());
    if tx.lock_file(row_id)? != Some(collection_id) {
        return Err(not_found());
    }
    let root = tx.entry_row(collection_id, row_id)?.ok_or_else(not_found)?;
    // Everything derived from it, level by level (each entry once: cycles end).
    let mut gone: Vec<(EntryRow, i64, Option<String>)> = vec![(root, collection_id, None)];
    let mut seen: HashSet<i64> = HashSet::from([row_id]);
    let mut level = vec![row_id];
    while !level.is_empty() {
        let mut next = Vec::new();
        for derived in tx.derived_from_any(&level)? {
            if !seen.insert(derived.id) {
                continue;
            }
            tx.lock_file(derived.id)?;
            if let Some(row) = tx.entry_row(derived.collection_id, derived.id)? {
                next.push(derived.id);
                gone.push((row, derived.collection_id, Some(derived.source_uid)));
            }
        }
        level = next;
    }
    let mut derived_uids = Vec::new();
    for (row, collection, source) in &gone {
        let detail = match source {
            None => serde_json::json!({"by": by}),
            Some(source) => {
                derived_uids.push((*collection, row.uid.clone()));
                serde_json::json!({"source": source, "by": by})
            }
        };
        tx.history(
            *collection,
            &HistoryRow {
                entry: &row.uid,
                key: row.key.as_deref(),
                event: if source.is_some() {
                    "deleted_with_source"
                } else {
                    "deleted"
                },
                at: now,
                detail: &detail,
            },
        )?;
        // Its predecessor takes its place in the key's chain.
        let predecessor = match tx.predecessor(row.id)? {
            Some(id) => tx.entry_row(*collection, id)?,
            None => None,
        };
        let next_start = match row.superseded_by {
            Some(next) => tx.valid_start(next)?,
            None => None,
        };
        tx.delete_file(row.id)?;
        let Some(p) = predecessor else { continue };
        // Current again, unless its key already has a current entry with its readers
        // (another chain): it then joins that one.
        let successor = match row.superseded_by {
            Some(next) => Some(next),
            None => tx.other_current_of_key(p.id)?,
        };
        tx.set_successor(
            p.id,
            successor,
            window_end(p.valid_to, p.expires_at, next_start),
        )?;
        if successor.is_none() {
            tx.history(
                *collection,
                &HistoryRow {
                    entry: &p.uid,
                    key: p.key.as_deref(),
                    event: "current_again",
                    at: now,
                    detail: &serde_json::json!({"because_deleted": row.uid}),
                },
            )?;
        }
    }
    tx.enqueue_cleanup()?;
    Ok(derived_uids)
}
