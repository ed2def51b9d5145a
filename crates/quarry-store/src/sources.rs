//! Sources that sync a knowledge base (issue 43): the source rows, the lease one node holds
//! while it syncs a source, the documents a source made (a `kb_files` row with the path and
//! version it came from) and the report of every sync.
//!
//! A synced document is an ordinary knowledge-base file whose row also says which source
//! and path it came from: a change at the source replaces its original and queues it again
//! (it keeps its id), a rename changes its path and name, a deletion deletes it. Uploads
//! and notes have no source and a sync never touches them.

use quarry_core::Result;
use serde::Serialize;

use crate::NewKbFile;

/// A source attached to a knowledge base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceRow {
    /// Row id (internal).
    #[serde(skip)]
    pub row_id: i64,
    /// Public id (UUID).
    pub id: String,
    /// The knowledge base's collection (internal).
    #[serde(skip)]
    pub collection_id: i64,
    /// The knowledge base's name.
    pub knowledge_base: String,
    /// `folder`, `git`, …
    pub kind: String,
    /// Where it is, as `quarry-sources` writes it (JSON: no credential in it).
    pub location: String,
    /// The file mask (comma-separated globs).
    pub mask: String,
    /// Synced every this many milliseconds; `None`: only when asked.
    pub interval_ms: Option<i64>,
    /// Whether a credential is stored (sealed; never returned).
    pub has_secret: bool,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds of the last change to its settings.
    pub updated_at: i64,
    /// When the last sync ended (either way).
    pub last_sync_at: Option<i64>,
    /// When the last sync that succeeded ended: how stale the knowledge base may be.
    pub last_success_at: Option<i64>,
    /// When it is due next (interval, or a back-off after failures).
    pub next_sync_at: Option<i64>,
    /// Syncs that failed in a row (0 after a success).
    pub failures: u32,
    /// Why the last sync failed, while it keeps failing.
    pub last_error: Option<String>,
    /// How its documents' readers are decided (the engine's mapping, JSON); `None`: every
    /// reader of the knowledge base reads them.
    pub readers: Option<String>,
    /// Synced on change (a folder watched by each server node where it exists), beside the
    /// interval if there is one.
    pub watch: bool,
    /// The addresses this source's syncs may reach besides public ones and the server's
    /// `--allow-net` (comma-separated ranges, as the engine checked them); `None`: none.
    pub allow_net: Option<String>,
    /// The network policy of the node whose guard refused this source's last sync (the
    /// engine's `SourceOptions::policy_key`); `None` when the last sync was not refused by
    /// the guard. A node started with another policy retries it at once
    /// ([`SourceStore::retry_refused_sources`]).
    pub refused_under: Option<String>,
}

/// A source to attach.
#[derive(Debug, Clone)]
pub struct NewSource {
    /// The knowledge base's collection.
    pub collection_id: i64,
    /// `folder`, `git`, …
    pub kind: String,
    /// Where it is (JSON, no credential).
    pub location: String,
    /// The file mask.
    pub mask: String,
    /// Sync interval; `None`: only when asked.
    pub interval_ms: Option<i64>,
    /// The credential, sealed by the engine (never the plain text).
    pub sealed_secret: Option<String>,
    /// How its documents' readers are decided (JSON); `None`: everyone.
    pub readers: Option<String>,
    /// The addresses its syncs may reach besides public ones (see
    /// [`SourceRow::allow_net`]).
    pub allow_net: Option<String>,
}

/// A node's hold on a source while it syncs it: every change the sync applies presents it,
/// and the store applies a change only while no later claim has taken the source over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLease {
    /// The source's row id.
    pub source: i64,
    /// Grows with every claim.
    pub token: i64,
}

/// What the last sync remembered of one path: the document it became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path inside the source.
    pub path: String,
    /// The version the source gave.
    pub version: String,
    /// SHA-256 of the original.
    pub sha256: String,
    /// The knowledge-base file (row id).
    pub file_row_id: i64,
    /// Its readers now (see [`crate::KbFile::readers`]).
    pub readers: Option<Vec<String>>,
}

/// One change a sync applies, in its own transaction.
#[derive(Debug, Clone)]
pub enum SourceChange<'a> {
    /// A new path: a new document (its original already in the blob store), queued.
    Add {
        /// Path inside the source.
        path: &'a str,
        /// The version the source gave.
        version: &'a str,
        /// The original; its `original_name` is the name it takes in the knowledge base
        /// (made free if taken).
        file: &'a NewKbFile,
    },
    /// New bytes at a known path: the document keeps its id and is queued again.
    Replace {
        /// The document.
        file_row_id: i64,
        /// The version the source gave.
        version: &'a str,
        /// The new original.
        file: &'a NewKbFile,
    },
    /// Same bytes, new version (or new readers): only the remembered version and the
    /// readers move.
    Touch {
        /// The document.
        file_row_id: i64,
        /// The version the source gave.
        version: &'a str,
        /// Its readers from now on.
        readers: Option<&'a [String]>,
    },
    /// The bytes moved to a new path: the document keeps its id, its name follows.
    Rename {
        /// The document.
        file_row_id: i64,
        /// The new path.
        path: &'a str,
        /// The name it takes in the knowledge base (made free if taken).
        name: &'a str,
        /// The version the source gave.
        version: &'a str,
        /// Its readers at the new path.
        readers: Option<&'a [String]>,
    },
    /// Gone at the source: the document is deleted (every index, at once).
    Delete {
        /// The document.
        file_row_id: i64,
    },
}

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SyncCounts {
    /// New documents.
    pub added: u64,
    /// Documents whose content changed.
    pub changed: u64,
    /// Documents moved to a new path (same id).
    pub renamed: u64,
    /// Documents removed because their file is gone.
    pub deleted: u64,
    /// Files as they were (including those only re-versioned).
    pub unchanged: u64,
    /// Files not synced (each with its reason in the report).
    pub skipped: u64,
    /// The share of the counts above of files that name their readers, per readers list
    /// (what a caller who may not read those files leaves out); `None` on reports kept
    /// before readers were counted. Kept with the report, never shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restricted: Option<Vec<RestrictedCounts>>,
}

/// Counts of a sync's files that one readers list may read (see [`SyncCounts::restricted`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RestrictedCounts {
    /// The readers list (reader keys; empty: the knowledge base's admins only).
    pub readers: Vec<String>,
    /// The counts of its files (`restricted` always `None`).
    pub counts: SyncCounts,
}

impl SyncCounts {
    /// Counts one file under `action` (`added`, `changed`, `renamed`, `deleted`,
    /// `unchanged`, `skipped`; anything else counts nothing).
    pub fn count(&mut self, action: &str) {
        let slot = match action {
            "added" => &mut self.added,
            "changed" => &mut self.changed,
            "renamed" => &mut self.renamed,
            "deleted" => &mut self.deleted,
            "unchanged" => &mut self.unchanged,
            "skipped" => &mut self.skipped,
            _ => return,
        };
        *slot += 1;
    }

    /// Takes `other`'s counts away (not below zero).
    pub fn subtract(&mut self, other: &SyncCounts) {
        self.added = self.added.saturating_sub(other.added);
        self.changed = self.changed.saturating_sub(other.changed);
        self.renamed = self.renamed.saturating_sub(other.renamed);
        self.deleted = self.deleted.saturating_sub(other.deleted);
        self.unchanged = self.unchanged.saturating_sub(other.unchanged);
        self.skipped = self.skipped.saturating_sub(other.skipped);
    }
}

/// A sync's report, kept per run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// Public id (UUID).
    pub id: String,
    /// The source's public id.
    pub source_id: String,
    /// Unix milliseconds.
    pub started_at: i64,
    /// Unix milliseconds; `None` while it runs (or if its node died: the next sync says so).
    pub finished_at: Option<i64>,
    /// `running`, `succeeded`, `failed`.
    pub status: String,
    /// The revision synced (a Git commit), where the source has one.
    pub revision: Option<String>,
    /// What it did.
    pub counts: SyncCounts,
    /// Per file: (path, what happened, why) for additions, changes, renames, deletions and
    /// skips; at most the first 1,000 lines.
    pub details: Vec<SyncLine>,
    /// Why it failed as a whole.
    pub error: Option<String>,
}

/// One line of a sync report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SyncLine {
    /// Path inside the source.
    pub path: String,
    /// `added`, `changed`, `renamed`, `deleted`, `skipped`.
    pub action: String,
    /// The reason of a skip, the old path of a rename.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The readers of the line's file when the sync wrote the line (`None`: every reader of
    /// the knowledge base): a caller who may not read them is not shown the line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readers: Option<Vec<String>>,
}

/// The error of a sync whose node stopped before it finished (its report read or closed as
/// `failed`): what it applied stays, the next sync goes on from there.
pub const SYNC_INTERRUPTED: &str = "interrupted: the node running it stopped before it finished; the next sync goes on from what it applied";

/// Sources, their leases, their documents and their reports (see the module docs).
pub trait SourceStore: Send + Sync {
    /// Attaches a source; `Conflict` when the knowledge base already has one at that
    /// location (same kind and location).
    fn create_source(&self, source: &NewSource) -> Result<SourceRow>;
    /// The sources of these knowledge bases (every source when `None`), oldest first.
    fn sources(&self, collection_ids: Option<&[i64]>) -> Result<Vec<SourceRow>>;
    /// By public id.
    fn source(&self, id: &str) -> Result<Option<SourceRow>>;
    /// The sealed credential of a source, for the sync only.
    fn source_secret(&self, row_id: i64) -> Result<Option<String>>;
    /// Replaces (or, with `None`, removes) a source's sealed credential.
    fn set_source_secret(&self, row_id: i64, sealed: Option<&str>) -> Result<()>;
    /// Changes the mask and the interval; `next_sync_at` follows the interval.
    fn update_source(&self, row_id: i64, mask: &str, interval_ms: Option<i64>)
    -> Result<SourceRow>;
    /// Replaces how the source's documents' readers are decided (JSON, `None`: everyone);
    /// the next sync applies it to every document.
    fn set_source_readers(&self, row_id: i64, mapping: Option<&str>) -> Result<SourceRow>;
    /// Turns syncing on change on or off (a folder source watched by the server nodes).
    fn set_source_watch(&self, row_id: i64, watch: bool) -> Result<SourceRow>;
    /// Replaces the addresses the source's syncs may reach besides public ones (`None`:
    /// none). A source whose last sync the guard refused is due at once: the new allowance
    /// may let it through.
    fn set_source_allow_net(&self, row_id: i64, allow: Option<&str>) -> Result<SourceRow>;
    /// Makes every source whose last sync the guard refused under a network policy other
    /// than `policy` due at once (a node started with a changed `--allow-net`, or without
    /// the guard), unless a sync of it runs; returns how many.
    fn retry_refused_sources(&self, policy: &str) -> Result<u64>;
    /// Detaches a source. Its documents are deleted with it, or, with `keep_documents`,
    /// become ordinary documents of the knowledge base (no longer synced).
    fn delete_source(&self, row_id: i64, keep_documents: bool) -> Result<()>;
    /// Claims a source for a sync for `lease_ms` (the store's clock) unless another claim
    /// holds it; `None` when it is held (or gone). Each claim gets a new fencing token.
    fn claim_source(&self, row_id: i64, owner: &str, lease_ms: i64) -> Result<Option<SourceLease>>;
    /// Extends a claim; `false` when it no longer holds.
    fn renew_source(&self, lease: SourceLease, lease_ms: i64) -> Result<bool>;
    /// The sources due for a sync now, oldest due first: those whose interval passed and
    /// that nobody holds, and those whose last sync was interrupted — claimed, never
    /// finished, its lease lapsed (the node running it died) — whatever their interval, so
    /// another node resumes it.
    fn due_sources(&self, limit: usize) -> Result<Vec<SourceRow>>;
    /// What the last syncs remembered: the source's documents, by path.
    fn source_files(&self, row_id: i64) -> Result<Vec<SourceFile>>;
    /// What the last syncs remembered at or under `paths` (a path may be a folder: the
    /// documents whose path starts with it and `/`), by path: for a sync of a few changed
    /// paths, in time that follows them rather than the source's size. The default reads
    /// every document of the source; backends answer from their index.
    fn source_files_at(&self, row_id: i64, paths: &[String]) -> Result<Vec<SourceFile>> {
        let under = |p: &str| {
            paths.iter().any(|q| {
                q.is_empty()
                    || p == q
                    || (p.starts_with(q.as_str()) && p[q.len()..].starts_with('/'))
            })
        };
        Ok(self
            .source_files(row_id)?
            .into_iter()
            .filter(|f| under(&f.path))
            .collect())
    }
    /// Applies one change while `lease` holds; returns the document's row id (the deleted
    /// one's for a deletion), or `None` when the lease no longer holds (nothing changed).
    fn apply_source_change(
        &self,
        lease: SourceLease,
        change: &SourceChange<'_>,
    ) -> Result<Option<i64>>;
    /// Records a sync that started (status `running`).
    fn start_sync_report(&self, lease: SourceLease, revision: Option<&str>) -> Result<String>;
    /// Records how a sync ended and releases the claim: a success clears the failures and
    /// schedules the next sync by the interval; a failure counts and backs off
    /// (`retry_after_ms`). `refused_under` is the network policy under which the guard
    /// refused the sync ([`SourceRow::refused_under`]; `None`: it was not refused). `false`
    /// when the lease no longer held (nothing recorded).
    fn finish_sync_report(
        &self,
        lease: SourceLease,
        report: &SyncReport,
        retry_after_ms: Option<i64>,
        refused_under: Option<&str>,
    ) -> Result<bool>;
    /// The source's latest reports, newest first. A report still `running` whose claim no
    /// longer holds (its node died and the lease lapsed) reads as `failed`, interrupted.
    fn sync_reports(&self, row_id: i64, limit: usize) -> Result<Vec<SyncReport>>;
    /// Keeps what a running sync did so far (its counts, lines and revision) on its report,
    /// which stays `running`, while `lease` holds: what a report shows while the sync runs,
    /// and what an interrupted one keeps. `false` when the lease no longer holds (nothing
    /// recorded).
    fn record_sync_progress(&self, lease: SourceLease, report: &SyncReport) -> Result<bool>;
}
