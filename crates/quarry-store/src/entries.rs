//! Knowledge entries with time (issue 44, item 4): a note written with a `key` supersedes the
//! current entry of that key in its knowledge base, and the old one stays, with the end of
//! its validity, as history; an entry may carry a validity window and an expiry; each
//! records who wrote it and which entries it was derived from, and deleting an entry deletes
//! what was derived from it. [`EntryStore`] keeps these facts and their history.
//!
//! An entry's *validity window* is `[valid_from, valid_until)`: `valid_from` as given, else
//! the moment it was written; `valid_until` the earliest of its given `valid_to`, its
//! `expires_at` and, once superseded, its successor's `valid_from` (open when none). A read
//! `as_of` a moment sees the entries whose window holds it.

use serde::Serialize;

use quarry_core::Result;

use crate::entry_version::EntryVersion;
use crate::knowledge::{KbFile, NewKbFile};

/// How a note enters as a versioned knowledge entry ([`EntryStore::add_entry`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewEntry {
    /// The fact's key in its knowledge base: a write with a key supersedes the current entry
    /// of that key.
    pub key: Option<String>,
    /// The entry (row id) this one supersedes: it must be current, and of the same key when
    /// a key is given (it may be the key's current entry named explicitly).
    pub supersedes: Option<i64>,
    /// Start of validity (Unix ms); `None`: the moment it is written.
    pub valid_from: Option<i64>,
    /// End of validity as given (Unix ms, exclusive).
    pub valid_to: Option<i64>,
    /// When it expires (Unix ms).
    pub expires_at: Option<i64>,
    /// Who wrote it and from where, as a JSON object (token, user, client, conversation,
    /// tool call).
    pub provenance: String,
    /// The entries (row ids) it was derived from.
    pub derived_from: Vec<i64>,
    /// The passages it cites, in order (a wiki page's sources; empty for other entries).
    pub sources: Vec<PageSource>,
    /// The key must have no current entry with these readers (a first version, written by
    /// a caller who read that there was none): `Conflict` otherwise.
    pub first_version: bool,
}

/// A passage an entry cites (a wiki page's source), as it was when cited: enough to tell,
/// from the document as it is now, whether the passage changed, moved or went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageSource {
    /// The cited document's knowledge-base file (public id).
    pub file: String,
    /// First line of the passage (1-based).
    pub line_start: u32,
    /// Last line (1-based, inclusive).
    pub line_end: u32,
    /// The page or slide the passage is on (paged documents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// SHA-256 of the document's text when cited.
    pub document_sha256: String,
    /// SHA-256 of the passage's text.
    pub passage_sha256: String,
    /// The passage's text when cited.
    pub passage: String,
}

/// `valid_until` of an entry with these bounds whose successor (if any) starts at `next`:
/// the earliest of them (open when none), as both stores keep it.
pub fn window_end(
    valid_to: Option<i64>,
    expires_at: Option<i64>,
    next: Option<i64>,
) -> Option<i64> {
    [valid_to, expires_at, next].into_iter().flatten().min()
}

/// What [`EntryStore::add_entry`] did.
#[derive(Debug, Clone)]
pub enum AddedEntry {
    /// A new entry; `superseded` is the one it replaced, as it is now.
    Added {
        /// The new entry.
        file: KbFile,
        /// The entry it superseded.
        superseded: Option<Box<KbFile>>,
    },
    /// The same content under the same key is already the current entry: nothing new.
    Duplicate {
        /// The existing entry.
        file: KbFile,
    },
}

/// One event in an entry's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEvent {
    /// The entry (public id) it happened to.
    pub entry: String,
    /// Its key, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `created`, `superseded`, `deleted`, `deleted_with_source` or `current_again`.
    pub event: String,
    /// When (Unix ms).
    pub at: i64,
    /// What else there is to say (the successor, the deleted source, who did it).
    pub detail: serde_json::Value,
}

/// The name a superseded version steps aside to when its successor asks for its name, so that
/// the current fact keeps the key's name (`CEO.md`) rather than looking like a copy
/// (`CEO (2).md`): `CEO (superseded 2026-12-06).md`, the day it was superseded (made free by
/// the store's `(2)` rule when a version of the same day holds it).
pub fn superseded_name(name: &str, at_ms: i64) -> String {
    let day: String = quarry_core::iso8601_millis(at_ms)
        .chars()
        .take(10)
        .collect();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem} (superseded {day}).{ext}"),
        _ => format!("{name} (superseded {day})"),
    }
}

/// Knowledge entries' versions, validity and provenance (see the module docs).
pub trait EntryStore {
    /// Adds a note (its original stored already) as a knowledge entry, in one transaction:
    /// with `entry.key`, the key's current entry with the new entry's readers (or
    /// `entry.supersedes`) is superseded — its validity ends where the new one's starts — and
    /// the history records both: a key names one current entry per set of readers, so a write
    /// never reaches an entry with other readers, which some of its readers may not read. A
    /// current entry with the same content and readers is given back instead (nothing new). Errors:
    /// `Conflict` when `supersedes` names an entry already superseded (naming its successor)
    /// or of another key; `NotFound` when it or a source in `derived_from` is not in this
    /// store.
    fn add_entry(
        &self,
        collection_id: i64,
        file: &NewKbFile,
        entry: &NewEntry,
    ) -> Result<AddedEntry>;
    /// The documents of entries in `space` (in `collection_ids` only, when given) whose
    /// validity window does not hold `at` (files that are not entries have no window: never
    /// these). Every search asks, so it reads no more than those entries.
    fn entries_out_of_time(
        &self,
        space: &str,
        collection_ids: Option<&[i64]>,
        at: i64,
    ) -> Result<Vec<i64>>;
    /// Every version of the key `key` in a knowledge base, in the order they were written.
    fn entry_versions(&self, collection_id: i64, key: &str) -> Result<Vec<KbFile>>;
    /// The history of an entry (by public id) and of every version of its key, oldest
    /// first — deleted entries' too.
    fn entry_history(&self, collection_id: i64, entry: &str) -> Result<Vec<HistoryEvent>>;
    /// Deletes an entry and, transitively, every entry derived from it (cleanup queued as
    /// [`crate::KnowledgeStore::delete_kb_file`] does); the entry it superseded becomes
    /// current again when it was the key's current one (unless the key has a current entry
    /// with the predecessor's readers: it then joins that chain — a key names one current
    /// entry per set of readers). `by` (a JSON object) is recorded in
    /// the history. Returns the entries derived from it that went with it (their knowledge
    /// base's collection and public id).
    fn delete_entry(&self, collection_id: i64, row_id: i64, by: &str)
    -> Result<Vec<(i64, String)>>;
    /// The passages the entries `entry_ids` (row ids) cite, each entry's in the order it
    /// gave them: `(entry row id, source)`.
    fn page_sources(&self, entry_ids: &[i64]) -> Result<Vec<(i64, PageSource)>>;
}

/// An entry's columns as both stores select them (see their `FILE_COLUMNS`), for
/// [`EntryColumns::version`].
#[derive(Debug, Default)]
pub struct EntryColumns {
    /// `entry_key`.
    pub key: Option<String>,
    /// `valid_from`, else `created_at`.
    pub valid_from: i64,
    /// `valid_to`.
    pub valid_to: Option<i64>,
    /// `expires_at`.
    pub expires_at: Option<i64>,
    /// `valid_until`.
    pub valid_until: Option<i64>,
    /// The successor's public id.
    pub superseded_by: Option<String>,
    /// The predecessor's public id.
    pub supersedes: Option<String>,
    /// `provenance`: `None` for a file that is not an entry.
    pub provenance: Option<String>,
    /// The sources' public ids, one per line.
    pub derived_from: Option<String>,
}

impl EntryColumns {
    /// The version facts, for a file written as an entry.
    pub fn version(self) -> Option<EntryVersion> {
        let provenance = self.provenance?;
        Some(EntryVersion {
            key: self.key,
            valid_from: self.valid_from,
            valid_to: self.valid_to,
            expires_at: self.expires_at,
            valid_until: self.valid_until,
            superseded_by: self.superseded_by,
            supersedes: self.supersedes,
            provenance: serde_json::from_str(&provenance)
                .unwrap_or_else(|_| serde_json::Value::Object(Default::default())),
            derived_from: self
                .derived_from
                .unwrap_or_default()
                .split('\n')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::superseded_name;

    #[test]
    fn a_superseded_version_steps_aside_under_its_day() {
        // 2026-12-06T10:00:00Z
        let at = 1_796_551_200_000;
        assert_eq!(
            superseded_name("CEO.md", at),
            "CEO (superseded 2026-12-06).md"
        );
        assert_eq!(
            superseded_name("notes", at),
            "notes (superseded 2026-12-06)"
        );
        assert_eq!(superseded_name(".env", at), ".env (superseded 2026-12-06)");
    }
}
