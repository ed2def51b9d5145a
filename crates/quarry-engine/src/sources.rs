//! Sources that sync a knowledge base (issue 43): attaching, listing, detaching, and the
//! sync itself — list the source, [`quarry_sources::plan`] against what the last sync
//! remembered, fetch what changed into the blob store, [`quarry_sources::resolve`], and apply
//! each change in its own transaction under the source's lease. Added and changed documents
//! are queued for the ingestion workers like uploads; a changed or renamed document keeps
//! its id; a deleted one leaves every index at once. Uploads and notes of the same knowledge
//! base have no source and are never touched.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use quarry_convert::Format;
use quarry_core::{Access, Error, Result};
use quarry_sources::{Change, FileMask, Item, Known, Location, Secret, SourceError};
use quarry_store::{
    KbFile, NewKbFile, NewSource, SourceChange, SourceLease, SourceRow, SyncCounts, SyncLine,
    SyncReport,
};
use serde::Serialize;

use crate::engine::Engine;
use crate::knowledge::clean_file_name;
use crate::progress::Progress;

/// How long a claim on a source lasts without renewal; a sync renews it as it goes.
pub const SOURCE_LEASE: Duration = Duration::from_secs(600);
/// How often a running sync renews its claim.
const RENEW_EVERY: Duration = Duration::from_secs(60);
/// Lines a report keeps (the counts cover everything).
const REPORT_LINES: usize = 1000;
/// The first back-off after a failed sync; doubled for each failure in a row.
const BACKOFF_BASE: Duration = Duration::from_secs(60);
/// The longest back-off.
const BACKOFF_MAX: Duration = Duration::from_secs(6 * 3600);
/// Transient fetch failures in a row after which a sync gives up (the source is down).
const GIVE_UP_AFTER: usize = 5;
/// The shortest interval a schedule may have.
pub const MIN_SYNC_INTERVAL: Duration = Duration::from_secs(60);

/// A source to attach to a knowledge base.
#[derive(Debug, Clone)]
pub struct AddSource {
    /// Where it is.
    pub location: Location,
    /// Which paths it syncs (comma-separated globs); every path when `None`.
    pub mask: Option<String>,
    /// Synced every this long; only when asked when `None`.
    pub interval: Option<Duration>,
    /// A token or password for a private source; stored sealed, never shown again.
    pub secret: Option<Secret>,
}

/// A source as surfaces show it.
#[derive(Debug, Clone, Serialize)]
pub struct SourceView {
    /// Public id.
    pub id: String,
    /// The knowledge base it syncs into.
    pub knowledge_base: String,
    /// Where it is (no credential).
    pub location: Location,
    /// Which paths it syncs.
    pub mask: String,
    /// Seconds between scheduled syncs; `null`: only when asked.
    pub interval_seconds: Option<i64>,
    /// Whether a credential is stored (it is never shown).
    pub has_secret: bool,
    /// Unix milliseconds.
    pub created_at: i64,
    /// When the last sync ended.
    pub last_sync_at: Option<i64>,
    /// When the last successful sync ended.
    pub last_success_at: Option<i64>,
    /// When it is due next.
    pub next_sync_at: Option<i64>,
    /// Syncs that failed in a row.
    pub failures: u32,
    /// Why it keeps failing.
    pub last_error: Option<String>,
    /// Documents it holds now.
    pub documents: u64,
}

/// What a sync did: its report, and the documents it queued for processing.
#[derive(Debug, Clone, Serialize)]
pub struct SyncOutcome {
    /// The report, as kept.
    pub report: SyncReport,
    /// Documents added or changed, queued for conversion and indexing.
    #[serde(skip)]
    pub queued: Vec<KbFile>,
}

impl Engine {
    /// Attaches a source to a knowledge base (admin access to it).
    pub fn add_source(&self, kb_key: &str, req: &AddSource) -> Result<SourceView> {
        self.require(Access::Admin, "attaching a source")?;
        let kb = self.knowledge_base(kb_key)?;
        let mask = match &req.mask {
            Some(m) => FileMask::parse(m)?,
            None => FileMask::default(),
        };
        let interval_ms = interval_ms(req.interval)?;
        let location = req.location.to_json();
        let sealed_secret = match &req.secret {
            Some(secret) => Some(self.seal_secret(secret, &location)?),
            None => None,
        };
        let row = self.store().create_source(&NewSource {
            collection_id: kb.collection_id,
            kind: req.location.kind().to_owned(),
            location,
            mask: mask.text(),
            interval_ms,
            sealed_secret,
        })?;
        self.source_view(row)
    }

    /// The sources of a knowledge base, or of every knowledge base the handle reaches.
    pub fn sources(&self, kb_key: Option<&str>) -> Result<Vec<SourceView>> {
        let ids: Vec<i64> = match kb_key {
            Some(k) => vec![self.knowledge_base(k)?.collection_id],
            None => self
                .knowledge_bases()?
                .into_iter()
                .map(|kb| kb.collection_id)
                .collect(),
        };
        self.store()
            .sources(Some(&ids))?
            .into_iter()
            .map(|r| self.source_view(r))
            .collect()
    }

    /// A source by id, when the handle reaches its knowledge base.
    pub fn source(&self, id: &str) -> Result<SourceView> {
        let row = self.source_row(id)?;
        self.source_view(row)
    }

    /// The source's latest sync reports, newest first.
    pub fn sync_reports(&self, id: &str, limit: usize) -> Result<Vec<SyncReport>> {
        let row = self.source_row(id)?;
        self.store().sync_reports(row.row_id, limit.clamp(1, 100))
    }

    /// Changes which paths a source syncs and how often.
    pub fn update_source(
        &self,
        id: &str,
        mask: Option<&str>,
        interval: Option<Option<Duration>>,
    ) -> Result<SourceView> {
        self.require(Access::Admin, "changing a source")?;
        let row = self.source_row(id)?;
        let mask = match mask {
            Some(m) => FileMask::parse(m)?.text(),
            None => row.mask.clone(),
        };
        let interval_ms = match interval {
            Some(i) => interval_ms(i)?,
            None => row.interval_ms,
        };
        let row = self.store().update_source(row.row_id, &mask, interval_ms)?;
        self.source_view(row)
    }

    /// Sets (or, with `None`, forgets) the credential a source uses.
    pub fn set_source_secret(&self, id: &str, secret: Option<&Secret>) -> Result<SourceView> {
        self.require(Access::Admin, "changing a source's credential")?;
        let row = self.source_row(id)?;
        let sealed = match secret {
            Some(s) => Some(self.seal_secret(s, &row.location)?),
            None => None,
        };
        self.store()
            .set_source_secret(row.row_id, sealed.as_deref())?;
        self.source(id)
    }

    /// Seals a credential for the source at `location` (JSON); refused without a key.
    fn seal_secret(&self, secret: &Secret, location: &str) -> Result<String> {
        let Some(key) = &self.secret_key else {
            return Err(Error::Unavailable(
                "storing a source's credential needs QUARRY_SECRET_KEY: 32 random bytes as 64 hexadecimal digits (`openssl rand -hex 32`), the same on every node".into(),
            ));
        };
        let plain = serde_json::json!({
            "username": secret.username(),
            "password": secret.password(),
        })
        .to_string();
        key.seal(&plain, location)
            .map_err(|e| Error::Unavailable(e.to_string()))
    }

    /// The credential of a source, opened; `None` when it has none.
    fn source_secret(&self, row: &SourceRow) -> Result<Option<Secret>> {
        let Some(sealed) = self.store().source_secret(row.row_id)? else {
            return Ok(None);
        };
        let Some(key) = &self.secret_key else {
            return Err(Error::Unavailable(
                "this source has a stored credential, and QUARRY_SECRET_KEY is not set: set the key it was stored with".into(),
            ));
        };
        let plain = key
            .open(&sealed, &row.location)
            .map_err(|e| Error::Unavailable(e.to_string()))?;
        let v: serde_json::Value = serde_json::from_str(&plain)
            .map_err(|_| Error::Unavailable("the stored credential is not readable".into()))?;
        let secret = Secret::new(
            v["username"].as_str(),
            v["password"].as_str().unwrap_or_default(),
        )?;
        Ok(Some(secret))
    }

    /// Detaches a source: its documents are deleted with it, or kept as ordinary documents
    /// of the knowledge base (no longer synced).
    pub fn remove_source(&self, id: &str, keep_documents: bool) -> Result<SourceView> {
        self.require(Access::Admin, "detaching a source")?;
        let row = self.source_row(id)?;
        let view = self.source_view(row.clone())?;
        self.store().delete_source(row.row_id, keep_documents)?;
        // The work folder (a Git source's copy) is no longer needed.
        let _ = std::fs::remove_dir_all(self.source_work_dir(&row.id));
        Ok(view)
    }

    /// Syncs a source now, as `owner` (a node's worker name); `Conflict` while another sync
    /// of it runs. Write access to its knowledge base.
    pub fn sync_source(
        &self,
        id: &str,
        owner: &str,
        progress: &dyn Progress,
    ) -> Result<SyncOutcome> {
        self.require(Access::Write, "syncing a source")?;
        let row = self.source_row(id)?;
        self.sync_row(row, owner, progress)
    }

    /// The ids of sources (of every space) due for a scheduled sync: for a node's scheduler
    /// (`quarry-queue`), not for surfaces.
    pub fn due_sources(&self, limit: usize) -> Result<Vec<String>> {
        Ok(self
            .store()
            .due_sources(limit)?
            .into_iter()
            .map(|r| r.id)
            .collect())
    }

    /// Runs a scheduled sync as the node (`owner`), whatever space the source is in: for a
    /// node's scheduler, not for surfaces. `None` when another node holds the source.
    pub fn sync_scheduled_source(&self, id: &str, owner: &str) -> Result<Option<SyncReport>> {
        let Some(row) = self.store().source(id)? else {
            return Ok(None);
        };
        match self.sync_row(row, owner, &crate::progress::NoProgress) {
            Ok(outcome) => Ok(Some(outcome.report)),
            Err(Error::Conflict(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn sync_row(
        &self,
        row: SourceRow,
        owner: &str,
        progress: &dyn Progress,
    ) -> Result<SyncOutcome> {
        let lease_ms = SOURCE_LEASE.as_millis() as i64;
        let Some(lease) = self.store().claim_source(row.row_id, owner, lease_ms)? else {
            return Err(Error::Conflict(format!(
                "a sync of source {} is already running",
                row.id
            )));
        };
        let report_id = self.store().start_sync_report(lease, None)?;
        let mut report = SyncReport {
            id: report_id,
            source_id: row.id.clone(),
            started_at: quarry_core::now_millis(),
            finished_at: None,
            status: "running".into(),
            revision: None,
            counts: SyncCounts::default(),
            details: Vec::new(),
            error: None,
        };
        let mut queued = Vec::new();
        let result = self.run_sync(&row, lease, &mut report, &mut queued, progress);
        let retry_after = match &result {
            Ok(()) => {
                report.status = "succeeded".into();
                None
            }
            Err(e) => {
                report.status = "failed".into();
                report.error = Some(e.to_string());
                Some(backoff(row.failures))
            }
        };
        report.finished_at = Some(quarry_core::now_millis());
        let recorded = self.store().finish_sync_report(
            lease,
            &report,
            retry_after.map(|d| d.as_millis() as i64),
        )?;
        if !recorded {
            return Err(Error::Conflict(format!(
                "the sync of source {} ran past its lease and another took over; its changes up to then are kept",
                row.id
            )));
        }
        match result {
            Ok(()) => Ok(SyncOutcome { report, queued }),
            Err(e) => Err(e),
        }
    }

    fn run_sync(
        &self,
        row: &SourceRow,
        lease: SourceLease,
        report: &mut SyncReport,
        queued: &mut Vec<KbFile>,
        progress: &dyn Progress,
    ) -> Result<()> {
        let location = Location::from_json(&row.location)?;
        let mask = FileMask::parse(&row.mask)?;
        let work_dir = self.source_work_dir(&row.id);
        let secret = self.source_secret(row)?;
        let mut source = quarry_sources::open(&location, secret.as_ref(), mask, &work_dir)?;
        progress.begin("Listing", 0);
        let listing = source.list()?;
        progress.end();
        report.revision = listing.revision.clone();
        let remembered = self.store().source_files(row.row_id)?;
        let rows: HashMap<&str, i64> = remembered
            .iter()
            .map(|f| (f.path.as_str(), f.file_row_id))
            .collect();
        let known: Vec<Known> = remembered
            .iter()
            .map(|f| Known {
                path: f.path.clone(),
                version: f.version.clone(),
                sha256: f.sha256.clone(),
            })
            .collect();
        let mut lines = Lines::new(report);
        for (path, reason) in &listing.problems {
            lines.push(path, "skipped", Some(reason.clone()));
        }
        let plan = quarry_sources::plan(&known, &listing);
        let max_bytes = self.ingest_options().convert.limits.max_bytes;
        let blobs = self.blobs()?;
        // Held until every reference is committed: the collector waits (crate docs).
        let _refs = blobs.lock_shared()?;
        let mut renewed = Instant::now();
        let mut fetched: Vec<(Item, String)> = Vec::with_capacity(plan.fetch.len());
        let mut sizes: HashMap<String, u64> = HashMap::new();
        let mut failing = 0usize;
        progress.begin("Fetching", plan.fetch.len() as u64);
        for item in &plan.fetch {
            if renewed.elapsed() > RENEW_EVERY {
                self.renew(lease)?;
                renewed = Instant::now();
            }
            progress.advance(1);
            if Format::from_file_name(&item.path).is_none() {
                lines.push(
                    &item.path,
                    "skipped",
                    Some("not a format Quarry converts".into()),
                );
                continue;
            }
            let bytes = match source.fetch(item, max_bytes) {
                Ok(b) => {
                    failing = 0;
                    b
                }
                Err(e) => {
                    // One file that keeps failing (a page answering 500) is skipped and
                    // reported; a source that went away mid-sync fails the sync: what was
                    // fetched so far is applied by the next one.
                    if e.is_transient() && !matches!(e, SourceError::Io { .. }) {
                        failing += 1;
                        if failing >= GIVE_UP_AFTER {
                            return Err(e.into());
                        }
                    }
                    lines.push(&item.path, "skipped", Some(e.to_string()));
                    continue;
                }
            };
            if bytes.is_empty() {
                lines.push(&item.path, "skipped", Some("empty file".into()));
                continue;
            }
            let sha = blobs.put(&bytes)?;
            sizes.insert(item.path.clone(), bytes.len() as u64);
            fetched.push((item.clone(), sha));
        }
        progress.end();
        let outcome = quarry_sources::resolve(plan, &known, fetched);
        progress.begin("Applying", outcome.changes.len() as u64);
        let mut unchanged = outcome.unchanged.len() as u64;
        for change in &outcome.changes {
            if renewed.elapsed() > RENEW_EVERY {
                self.renew(lease)?;
                renewed = Instant::now();
            }
            progress.advance(1);
            let applied = match change {
                Change::Added { item, sha256 } => {
                    let file = new_file(item, sha256, sizes.get(&item.path).copied())?;
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Add {
                            path: &item.path,
                            version: &item.version,
                            file: &file,
                        },
                    )?;
                    lines.count_and_push(&item.path, "added", None);
                    r
                }
                Change::Changed {
                    item,
                    sha256,
                    previous,
                } => {
                    let file = new_file(item, sha256, sizes.get(&item.path).copied())?;
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Replace {
                            file_row_id: row_of(&rows, &previous.path)?,
                            version: &item.version,
                            file: &file,
                        },
                    )?;
                    lines.count_and_push(&item.path, "changed", None);
                    r
                }
                Change::Touched { item, previous } => {
                    unchanged += 1;
                    self.store().apply_source_change(
                        lease,
                        &SourceChange::Touch {
                            file_row_id: row_of(&rows, &previous.path)?,
                            version: &item.version,
                        },
                    )?
                }
                Change::Renamed { from, item } => {
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Rename {
                            file_row_id: row_of(&rows, &from.path)?,
                            path: &item.path,
                            name: &document_name(&item.path),
                            version: &item.version,
                        },
                    )?;
                    lines.count_and_push(
                        &item.path,
                        "renamed",
                        Some(format!("from {}", from.path)),
                    );
                    r
                }
                Change::Deleted { known } => {
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Delete {
                            file_row_id: row_of(&rows, &known.path)?,
                        },
                    )?;
                    lines.count_and_push(&known.path, "deleted", None);
                    r
                }
            };
            let Some(row_id) = applied else {
                return Err(lost());
            };
            if matches!(change, Change::Added { .. } | Change::Changed { .. })
                && let Some(f) = self.store().kb_file_by_row(row_id)?
            {
                queued.push(f);
            }
        }
        progress.end();
        lines.finish(unchanged);
        Ok(())
    }

    fn renew(&self, lease: SourceLease) -> Result<()> {
        if self
            .store()
            .renew_source(lease, SOURCE_LEASE.as_millis() as i64)?
        {
            Ok(())
        } else {
            Err(lost())
        }
    }

    /// A source row the handle may see: its knowledge base is in the handle's space and
    /// scope; anything else is "not found", whether it exists or not.
    fn source_row(&self, id: &str) -> Result<SourceRow> {
        let not_found = || Error::not_found(format!("source '{id}' not found"));
        let row = self.store().source(id)?.ok_or_else(not_found)?;
        let visible = self
            .knowledge_bases()?
            .iter()
            .any(|kb| kb.collection_id == row.collection_id);
        if visible { Ok(row) } else { Err(not_found()) }
    }

    fn source_view(&self, row: SourceRow) -> Result<SourceView> {
        let documents = self.store().source_files(row.row_id)?.len() as u64;
        Ok(SourceView {
            location: Location::from_json(&row.location)?,
            id: row.id,
            knowledge_base: row.knowledge_base,
            mask: row.mask,
            interval_seconds: row.interval_ms.map(|ms| ms / 1000),
            has_secret: row.has_secret,
            created_at: row.created_at,
            last_sync_at: row.last_sync_at,
            last_success_at: row.last_success_at,
            next_sync_at: row.next_sync_at,
            failures: row.failures,
            last_error: row.last_error,
            documents,
        })
    }

    /// Where a source keeps its local state (a Git source's copy).
    fn source_work_dir(&self, id: &str) -> PathBuf {
        self.data_dir().join("sources").join(id)
    }
}

fn lost() -> Error {
    Error::Conflict("another sync of this source took over (this one ran past its lease)".into())
}

fn row_of(rows: &HashMap<&str, i64>, path: &str) -> Result<i64> {
    rows.get(path)
        .copied()
        .ok_or_else(|| Error::Storage(format!("no document remembered for {path}")))
}

fn interval_ms(interval: Option<Duration>) -> Result<Option<i64>> {
    match interval {
        None => Ok(None),
        Some(d) if d < MIN_SYNC_INTERVAL => Err(Error::invalid(format!(
            "a sync interval must be at least {} seconds",
            MIN_SYNC_INTERVAL.as_secs()
        ))),
        Some(d) => Ok(Some(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))),
    }
}

/// The wait after `failures` failed syncs in a row (this one not counted yet).
fn backoff(failures: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(1u32 << failures.min(16))
        .min(BACKOFF_MAX)
}

/// A source path as a document's name: each part cleaned as upload names are.
fn document_name(path: &str) -> String {
    path.split('/')
        .map(clean_file_name)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

fn new_file(item: &Item, sha256: &str, size: Option<u64>) -> Result<NewKbFile> {
    let format = Format::from_file_name(&item.path).ok_or_else(|| {
        Error::Unsupported(format!("{}: not a format Quarry converts", item.path))
    })?;
    Ok(NewKbFile {
        original_name: document_name(&item.path),
        sha256: sha256.to_owned(),
        format: format.as_str().to_owned(),
        mime: format.mime().to_owned(),
        size: size.or(item.size).unwrap_or(0),
        note: None,
    })
}

/// A report's lines and counts, as a sync fills them.
struct Lines<'a> {
    report: &'a mut SyncReport,
}

impl<'a> Lines<'a> {
    fn new(report: &'a mut SyncReport) -> Lines<'a> {
        Lines { report }
    }

    fn push(&mut self, path: &str, action: &str, detail: Option<String>) {
        if action == "skipped" {
            self.report.counts.skipped += 1;
        }
        if self.report.details.len() < REPORT_LINES {
            self.report.details.push(SyncLine {
                path: path.to_owned(),
                action: action.to_owned(),
                detail,
            });
        }
    }

    fn count_and_push(&mut self, path: &str, action: &str, detail: Option<String>) {
        let c = &mut self.report.counts;
        match action {
            "added" => c.added += 1,
            "changed" => c.changed += 1,
            "renamed" => c.renamed += 1,
            "deleted" => c.deleted += 1,
            _ => {}
        }
        self.push(path, action, detail);
    }

    fn finish(self, unchanged: u64) {
        self.report.counts.unchanged = unchanged;
    }
}
