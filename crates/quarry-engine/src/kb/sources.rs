//! Sources that sync a knowledge base (issue 43): attaching, listing, detaching, and the
//! sync itself — list the source, [`quarry_sources::plan`] against what the last sync
//! remembered, fetch what changed into the blob store, [`quarry_sources::resolve`], and apply
//! each change in its own transaction under the source's lease. Added and changed documents
//! are queued for the ingestion workers like uploads; a changed or renamed document keeps
//! its id; a deleted one leaves every index at once. Uploads and notes of the same knowledge
//! base have no source and are never touched.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use quarry_convert::Format;
use quarry_core::{Access, Error, Result};
use quarry_sources::readers::{CODEOWNERS_PATHS, MAX_CODEOWNERS_BYTES};
use quarry_sources::{
    Change, CodeOwners, CompiledMapping, FileMask, Item, Known, Location, Plan, ReaderMapping,
    Secret, SourceError,
};
use quarry_store::{
    KbFile, NewKbFile, NewSource, RestrictedCounts, SourceChange, SourceLease, SourceRow,
    SyncCounts, SyncLine, SyncReport,
};
use serde::Serialize;

use crate::engine::Engine;
use crate::kb::knowledge::clean_file_name;
use crate::kb::source_options::{allow_net_column, allowance_of, parse_allow_net};
use crate::progress::Progress;

/// How often a sync applies what it fetched so far that cannot be part of a rename (kept if
/// its node stops; the next sync goes on from there) and records its progress on its report.
const APPLY_EVERY: Duration = Duration::from_secs(2);
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
    /// Synced on change (a folder only): the server nodes watch it.
    pub watch: bool,
    /// Who reads its documents; every reader of the knowledge base when `None`.
    pub readers: Option<ReaderMapping>,
    /// Address ranges its syncs may reach besides public ones and the server's
    /// `--allow-net` (`127.0.0.1/32`); none when empty.
    pub allow_net: Vec<String>,
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
    /// Synced on change: every server node where the folder exists watches it.
    pub watch: bool,
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
    /// Documents it holds now (those the caller may read).
    pub documents: u64,
    /// How its documents' readers are decided; absent: every reader of the knowledge base.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readers: Option<ReaderMapping>,
    /// Address ranges its syncs may reach besides public ones and the server's
    /// `--allow-net`: this source's own allowance.
    pub allow_net: Vec<String>,
    /// What whoever attached or changed it should know (the answer to that request only):
    /// the server's scheduled syncs would be refused by its outbound address guard, and how
    /// to allow the address. Absent when there is nothing to say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
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
        check_watch(&req.location, req.watch)?;
        let kb = self.knowledge_base(kb_key)?;
        // After the lookup: a knowledge base out of a narrowed token's reach is "not found".
        self.scope
            .require_manage(Access::Admin, "attaching a source")?;
        let allow = parse_allow_net(&req.allow_net)?;
        // Only the machine's owner names the server's disk; others only where the outbound
        // address guard lets requests go, with the source's own allowance
        // (`source_options.rs`).
        self.check_source_location(&req.location, allow.as_deref().unwrap_or_default())?;
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
            readers: mapping_column(req.readers.as_ref())?,
            allow_net: allow_net_column(allow.as_deref()),
        })?;
        let row = if req.watch {
            self.store().set_source_watch(row.row_id, true)?
        } else {
            row
        };
        let mut view = self.source_view(row)?;
        view.warnings = self.source_warnings(
            &view.id,
            &req.location,
            allow.as_deref().unwrap_or_default(),
        )?;
        Ok(view)
    }

    /// Replaces the address ranges a source's syncs may reach besides public ones and the
    /// server's `--allow-net` (empty: none) — a management credential's change. Checked
    /// like `--allow-net` (never the cloud metadata address); a source the guard refused
    /// is due at once. The answer carries the warnings attaching would.
    pub fn set_source_allow_net(&self, id: &str, allow: &[String]) -> Result<SourceView> {
        self.scope
            .require_manage(Access::Admin, "changing which addresses a source may reach")?;
        let row = self.source_row(id)?;
        let ranges = parse_allow_net(allow)?;
        let row = self
            .store()
            .set_source_allow_net(row.row_id, allow_net_column(ranges.as_deref()).as_deref())?;
        let location = Location::from_json(&row.location)?;
        let mut view = self.source_view(row)?;
        view.warnings =
            self.source_warnings(&view.id, &location, ranges.as_deref().unwrap_or_default())?;
        Ok(view)
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

    /// The space a source is in, whoever may see it (`None`: no such source): for surfaces
    /// that decide which space a request about a source id acts in — a source id is global
    /// — never shown to a caller. The handle for that space still decides whether the
    /// caller sees the source.
    pub fn source_space(&self, id: &str) -> Result<Option<String>> {
        let Some(row) = self.store().source(id.trim())? else {
            return Ok(None);
        };
        self.store().collection_space(row.collection_id)
    }

    /// This handle moved to the space source `id` is in, for the machine's owner (who
    /// reaches every space) — so `quarry source sync ID` finds a source of any space; any
    /// other handle, or an unknown id, is returned as it is (its lookups then say whether
    /// it sees the source).
    pub fn in_source_space(&self, id: &str) -> Result<Engine> {
        if !self.scope().machine_owner || self.scope().collections.is_some() {
            return Ok(self.clone());
        }
        match self.source_space(id)? {
            Some(space) if space != self.space() => {
                let mut scope = self.scope().clone();
                scope.space = space;
                Ok(self.scoped(scope))
            }
            _ => Ok(self.clone()),
        }
    }

    /// A source by id, when the handle reaches its knowledge base.
    pub fn source(&self, id: &str) -> Result<SourceView> {
        let row = self.source_row(id)?;
        self.source_view(row)
    }

    /// The source's latest sync reports, newest first, as this handle may see them (see
    /// `report_for_caller`).
    pub fn sync_reports(&self, id: &str, limit: usize) -> Result<Vec<SyncReport>> {
        let row = self.source_row(id)?;
        self.store()
            .sync_reports(row.row_id, limit.clamp(1, 100))?
            .into_iter()
            .map(|r| self.report_for_caller(&row, r))
            .collect()
    }

    /// Changes which paths a source syncs and how often.
    pub fn update_source(
        &self,
        id: &str,
        mask: Option<&str>,
        interval: Option<Option<Duration>>,
    ) -> Result<SourceView> {
        self.scope
            .require_manage(Access::Admin, "changing a source")?;
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

    /// Replaces how a source's documents get their readers (`None`: every reader of the
    /// knowledge base). The next sync applies it to every document the source holds.
    pub fn set_source_readers(
        &self,
        id: &str,
        mapping: Option<&ReaderMapping>,
    ) -> Result<SourceView> {
        self.scope
            .require_manage(Access::Admin, "changing who reads a source's documents")?;
        let row = self.source_row(id)?;
        let column = mapping_column(mapping)?;
        let row = self
            .store()
            .set_source_readers(row.row_id, column.as_deref())?;
        self.source_view(row)
    }

    /// Replaces who may read a knowledge base's document beside its admins (`None`: every
    /// reader of the knowledge base). A synced document's readers are the source's to
    /// decide: its next sync would undo the change, so it is refused.
    pub fn set_document_readers(
        &self,
        kb_key: &str,
        doc_key: &str,
        readers: Option<&[String]>,
    ) -> Result<KbFile> {
        let readers = readers.map(crate::parse_reader_keys).transpose()?;
        let file = self.kb_document(kb_key, doc_key)?;
        self.scope
            .require_manage(Access::Admin, "changing who reads a document")?;
        if file.synced {
            return Err(Error::invalid(format!(
                "document '{doc_key}' is synced from a source: change the source's reader mapping instead"
            )));
        }
        self.store()
            .set_file_readers(file.collection_id, file.row_id, readers.as_deref())?;
        self.kb_document(kb_key, doc_key)
    }

    /// Sets (or, with `None`, forgets) the credential a source uses.
    pub fn set_source_secret(&self, id: &str, secret: Option<&Secret>) -> Result<SourceView> {
        self.scope
            .require_manage(Access::Admin, "changing a source's credential")?;
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
        self.scope
            .require_manage(Access::Admin, "detaching a source")?;
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
        self.sync_row(row, owner, None, progress)
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
        // Guarded unless every caller of this node is the machine's owner.
        let node = self.scheduler_handle();
        match node.sync_row(row, owner, None, &crate::progress::NoProgress) {
            Ok(outcome) => Ok(Some(outcome.report)),
            Err(Error::Conflict(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn sync_row(
        &self,
        row: SourceRow,
        owner: &str,
        paths: Option<&[String]>,
        progress: &dyn Progress,
    ) -> Result<SyncOutcome> {
        let lease_ms = self.sources.lease_ms();
        let Some(lease) = self.store().claim_source(row.row_id, owner, lease_ms)? else {
            return Err(Error::Conflict(format!(
                "a sync of source {} is already running, on this node or another one of the \
                 same server: its reports say how it goes; try again once it has finished",
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
            counts: SyncCounts {
                // Files that name their readers are counted apart too (`report_for_caller`).
                restricted: Some(Vec::new()),
                ..SyncCounts::default()
            },
            details: Vec::new(),
            error: None,
        };
        let mut queued = Vec::new();
        // Set when the outbound address guard refused what failed the sync.
        let refused = Cell::new(false);
        // Renewed by a heartbeat while it runs (`source_runs.rs`).
        let result = self.with_heartbeat(lease, || {
            self.run_sync(
                &row,
                Running {
                    lease,
                    paths,
                    refused: &refused,
                },
                &mut report,
                &mut queued,
                progress,
            )
        });
        // The policy it was refused under: a node started with another retries it at once.
        let refused_under = (result.is_err() && refused.get()).then(|| self.sources.guarded_key());
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
            refused_under.as_deref(),
        )?;
        if !recorded {
            return Err(Error::Conflict(format!(
                "the sync of source {} ran past its lease and another took over; its changes up to then are kept",
                row.id
            )));
        }
        match result {
            Ok(()) => Ok(SyncOutcome {
                report: self.report_for_caller(&row, report)?,
                // The documents queued, those the caller may read (the workers take them
                // all from the store).
                queued: queued
                    .into_iter()
                    .filter(|f| self.may_read_file(f))
                    .collect(),
            }),
            Err(e) => Err(e),
        }
    }

    /// A sync report as this handle may see it. Whoever reads every document of the
    /// knowledge base (its admins and owners) sees it whole; anyone else sees neither the
    /// lines nor the counts of files it may not read — by their readers when the sync ran,
    /// and a line also not when its document is hidden from it now — so what a report
    /// says agrees with the documents the caller finds. A report kept before readers were
    /// counted shows such a caller its outcome only (no lines, no counts).
    fn report_for_caller(&self, row: &SourceRow, mut report: SyncReport) -> Result<SyncReport> {
        let restricted = report.counts.restricted.take();
        if self.scope().readers.is_none() {
            return Ok(report);
        }
        let Some(restricted) = restricted else {
            report.counts = SyncCounts::default();
            report.details.clear();
            return Ok(report);
        };
        let scope = self.scope();
        for r in restricted
            .iter()
            .filter(|r| !scope.may_read(Some(&r.readers)))
        {
            report.counts.subtract(&r.counts);
        }
        let now: HashMap<String, Option<Vec<String>>> = self
            .store()
            .source_files(row.row_id)?
            .into_iter()
            .map(|f| (f.path, f.readers))
            .collect();
        report.details.retain(|l| {
            scope.may_read(l.readers.as_deref())
                && now
                    .get(&l.path)
                    .is_none_or(|readers| scope.may_read(readers.as_deref()))
        });
        for line in &mut report.details {
            line.readers = None;
        }
        Ok(report)
    }

    fn run_sync(
        &self,
        row: &SourceRow,
        run: Running<'_>,
        report: &mut SyncReport,
        queued: &mut Vec<KbFile>,
        progress: &dyn Progress,
    ) -> Result<()> {
        let Running {
            lease,
            paths,
            refused,
        } = run;
        // A source error as the sync fails with it, noting a refusal by the guard.
        let failed = |e: SourceError| -> Error {
            if matches!(e, SourceError::Refused(_)) {
                refused.set(true);
            }
            e.into()
        };
        let location = Location::from_json(&row.location)?;
        let mapping = reader_mapping(row)?;
        let codeowners = mapping.as_ref().is_some_and(|m| m.uses_codeowners());
        let mut mask = FileMask::parse(&row.mask)?;
        if codeowners {
            // Read for the mapping whatever the mask: it is never a document.
            mask = mask.with_extra(&CODEOWNERS_PATHS)?;
        }
        let work_dir = self.source_work_dir(&row.id);
        let secret = self.source_secret(row)?;
        // The operator's allow-list and the source's own allowance.
        let net = self.source_net(&allowance_of(row.allow_net.as_deref()));
        let mut source =
            quarry_sources::open_with(&location, secret.as_ref(), mask, &work_dir, net.as_ref())
                .map_err(failed)?;
        progress.begin("Listing", 0);
        // A watched folder's changed paths, or everything.
        let mut listing = match paths {
            Some(paths) => source.list_paths(paths),
            None => source.list(),
        }
        .map_err(failed)?;
        progress.end();
        let owners = if codeowners {
            read_codeowners(source.as_mut(), &mut listing, paths.is_some()).map_err(failed)?
        } else {
            None
        };
        let readers_of = |path: &str| -> Option<Vec<String>> {
            mapping
                .as_ref()
                .and_then(|m| m.readers_for(path, owners.as_ref()))
        };
        report.revision = listing.revision.clone();
        let remembered = match paths {
            Some(paths) => self.store().source_files_at(row.row_id, paths)?,
            None => self.store().source_files(row.row_id)?,
        };
        let rows: HashMap<&str, i64> = remembered
            .iter()
            .map(|f| (f.path.as_str(), f.file_row_id))
            .collect();
        let by_path: HashMap<&str, &quarry_store::SourceFile> =
            remembered.iter().map(|f| (f.path.as_str(), f)).collect();
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
            lines.push(path, "skipped", Some(reason.clone()), readers_of(path));
        }
        let plan = quarry_sources::plan(&known, &listing);
        let max_bytes = self.ingest_options().convert.limits.max_bytes;
        let blobs = self.blobs()?;
        // Held until every reference is committed: the collector waits (crate docs).
        let _refs = blobs.lock_shared()?;
        let mut fetched: Vec<(Item, String)> = Vec::with_capacity(plan.fetch.len());
        let mut sizes: HashMap<String, u64> = HashMap::new();
        let mut failing = 0usize;
        for path in &plan.unchanged {
            lines.unchanged(readers_of(path));
        }
        // What fetched bytes could be a rename of (held back until everything is fetched).
        let gone: HashSet<String> = plan.gone.iter().map(|k| k.sha256.clone()).collect();
        let mut applied_at = Instant::now();
        progress.begin("Fetching", plan.fetch.len() as u64);
        for item in &plan.fetch {
            if applied_at.elapsed() >= APPLY_EVERY {
                // A long sync keeps its progress: what cannot be part of a rename is applied
                // now, and the report says how far it got.
                let ready = settled(&mut fetched, &rows, &gone);
                let outcome = quarry_sources::resolve(Plan::default(), &known, ready);
                self.apply_changes(
                    &outcome.changes,
                    Applying {
                        lease,
                        rows: &rows,
                        sizes: &sizes,
                        readers_of: &readers_of,
                        stored: &by_path,
                        lines: &mut lines,
                        queued,
                        progress: &crate::progress::NoProgress,
                    },
                )?;
                let so_far = lines.so_far();
                if !self.store().record_sync_progress(lease, so_far)? {
                    return Err(lost());
                }
                applied_at = Instant::now();
            }
            progress.advance(1);
            if Format::from_file_name(&item.path).is_none() {
                lines.push(
                    &item.path,
                    "skipped",
                    Some("not a format Quarry converts".into()),
                    readers_of(&item.path),
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
                            return Err(failed(e));
                        }
                    }
                    lines.push(
                        &item.path,
                        "skipped",
                        Some(e.to_string()),
                        readers_of(&item.path),
                    );
                    continue;
                }
            };
            if bytes.is_empty() {
                lines.push(
                    &item.path,
                    "skipped",
                    Some("empty file".into()),
                    readers_of(&item.path),
                );
                continue;
            }
            let sha = blobs.put(&bytes)?;
            sizes.insert(item.path.clone(), bytes.len() as u64);
            fetched.push((item.clone(), sha));
        }
        progress.end();
        let outcome = quarry_sources::resolve(plan, &known, fetched);
        progress.begin("Applying", outcome.changes.len() as u64);
        self.apply_changes(
            &outcome.changes,
            Applying {
                lease,
                rows: &rows,
                sizes: &sizes,
                readers_of: &readers_of,
                stored: &by_path,
                lines: &mut lines,
                queued,
                progress,
            },
        )?;
        // Unchanged documents whose readers changed (the mapping, or CODEOWNERS, did):
        // only their readers move, each in its own fenced change.
        for path in &outcome.unchanged {
            let Some(known) = by_path.get(path.as_str()) else {
                continue;
            };
            let readers = readers_of(path);
            if readers == known.readers {
                continue;
            }
            let applied = self.store().apply_source_change(
                lease,
                &SourceChange::Touch {
                    file_row_id: known.file_row_id,
                    version: &known.version,
                    readers: readers.as_deref(),
                },
            )?;
            if applied.is_none() {
                return Err(lost());
            }
            let detail = describe_readers(readers.as_deref());
            lines.push(path, "readers", Some(detail), readers);
        }
        progress.end();
        Ok(())
    }

    /// Applies `changes`, each in its own transaction fenced by the lease; added and changed
    /// documents are queued. `Conflict` when the lease no longer holds.
    fn apply_changes(&self, changes: &[Change], a: Applying<'_, '_>) -> Result<()> {
        let Applying {
            lease,
            rows,
            sizes,
            readers_of,
            stored,
            lines,
            queued,
            progress,
        } = a;
        for change in changes {
            progress.advance(1);
            let applied = match change {
                Change::Added { item, sha256 } => {
                    let file = new_file(
                        item,
                        sha256,
                        sizes.get(&item.path).copied(),
                        readers_of(&item.path),
                    )?;
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Add {
                            path: &item.path,
                            version: &item.version,
                            file: &file,
                        },
                    )?;
                    lines.push(&item.path, "added", None, readers_of(&item.path));
                    r
                }
                Change::Changed {
                    item,
                    sha256,
                    previous,
                } => {
                    let file = new_file(
                        item,
                        sha256,
                        sizes.get(&item.path).copied(),
                        readers_of(&item.path),
                    )?;
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Replace {
                            file_row_id: row_of(rows, &previous.path)?,
                            version: &item.version,
                            file: &file,
                        },
                    )?;
                    lines.push(&item.path, "changed", None, readers_of(&item.path));
                    r
                }
                Change::Touched { item, previous } => {
                    let readers = readers_of(&item.path);
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Touch {
                            file_row_id: row_of(rows, &previous.path)?,
                            version: &item.version,
                            readers: readers.as_deref(),
                        },
                    )?;
                    lines.unchanged(readers);
                    r
                }
                Change::Renamed { from, item } => {
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Rename {
                            file_row_id: row_of(rows, &from.path)?,
                            path: &item.path,
                            name: &document_name(&item.path),
                            version: &item.version,
                            readers: readers_of(&item.path).as_deref(),
                        },
                    )?;
                    lines.push(
                        &item.path,
                        "renamed",
                        Some(format!("from {}", from.path)),
                        readers_of(&item.path),
                    );
                    r
                }
                Change::Deleted { known } => {
                    let r = self.store().apply_source_change(
                        lease,
                        &SourceChange::Delete {
                            file_row_id: row_of(rows, &known.path)?,
                        },
                    )?;
                    // The readers the document had: whoever could not read it is not told
                    // it went.
                    let had = stored
                        .get(known.path.as_str())
                        .map_or_else(|| readers_of(&known.path), |f| f.readers.clone());
                    lines.push(&known.path, "deleted", None, had);
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
        Ok(())
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
        let documents = self
            .store()
            .source_files(row.row_id)?
            .iter()
            .filter(|f| self.scope().may_read(f.readers.as_deref()))
            .count() as u64;
        // Kept checked: a mapping that no longer reads is shown as none rather than failing
        // every listing (its syncs say why they fail).
        let readers = row
            .readers
            .as_deref()
            .and_then(|text| ReaderMapping::from_json(text).ok());
        Ok(SourceView {
            readers,
            location: Location::from_json(&row.location)?,
            id: row.id,
            knowledge_base: row.knowledge_base,
            mask: row.mask,
            interval_seconds: row.interval_ms.map(|ms| ms / 1000),
            watch: row.watch,
            has_secret: row.has_secret,
            created_at: row.created_at,
            last_sync_at: row.last_sync_at,
            last_success_at: row.last_success_at,
            next_sync_at: row.next_sync_at,
            failures: row.failures,
            last_error: row.last_error,
            documents,
            allow_net: allowance_of(row.allow_net.as_deref())
                .iter()
                .map(ToString::to_string)
                .collect(),
            warnings: Vec::new(),
        })
    }

    /// Where a source keeps its local state (a Git source's copy).
    fn source_work_dir(&self, id: &str) -> PathBuf {
        self.data_dir().join("sources").join(id)
    }
}

/// A folder source a server node watches (`quarry-queue`): its id, where it is, which
/// paths it syncs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedFolder {
    /// The source's public id.
    pub id: String,
    /// The folder (on the machine that attached it).
    pub path: PathBuf,
    /// Its mask (comma-separated globs).
    pub mask: String,
}

/// Folders that sync on change (issue 43): the schedule, and the sync of a few changed paths.
impl Engine {
    /// Turns syncing on change on or off (admin access; a folder source only).
    pub fn set_source_watch(&self, id: &str, watch: bool) -> Result<SourceView> {
        self.scope
            .require_manage(Access::Admin, "changing a source")?;
        let row = self.source_row(id)?;
        check_watch(&Location::from_json(&row.location)?, watch)?;
        let row = self.store().set_source_watch(row.row_id, watch)?;
        self.source_view(row)
    }

    /// The folder sources to watch, of every space: for a node's watcher (`quarry-queue`),
    /// not for surfaces.
    pub fn watched_folders(&self) -> Result<Vec<WatchedFolder>> {
        Ok(self
            .store()
            .sources(None)?
            .into_iter()
            .filter(|r| r.watch)
            .filter_map(|r| match Location::from_json(&r.location) {
                Ok(Location::Folder { path }) => Some(WatchedFolder {
                    id: r.id,
                    path,
                    mask: r.mask,
                }),
                _ => None,
            })
            .collect())
    }

    /// Syncs only `paths` of a source — what a watcher saw change: files, and folders that
    /// stand for everything under them — as the node `owner`, whatever space it is in (for
    /// a node's watcher, not for surfaces). Only these paths are listed and compared with
    /// what the store remembers at or under them, so the time follows the change, not the
    /// folder's size; the rest is a sync like any other: under the source's lease, each
    /// change fenced, a rename (its old and new paths in `paths`) keeping the document's id
    /// by content, added and changed documents queued, a report kept. `None` when the paths
    /// change nothing the source syncs (an editor's temporary file, an ignored folder):
    /// then nothing is claimed or reported. `Conflict` while another sync of the source
    /// runs: try again after it.
    pub fn sync_source_paths(
        &self,
        id: &str,
        owner: &str,
        paths: &[String],
    ) -> Result<Option<SyncOutcome>> {
        let Some(row) = self.store().source(id)? else {
            return Err(Error::not_found(format!("source '{id}' not found")));
        };
        if paths.is_empty() || !self.paths_changed(&row, paths)? {
            return Ok(None);
        }
        self.sync_row(row, owner, Some(paths), &crate::progress::NoProgress)
            .map(Some)
    }

    /// Whether a sync of `paths` would do anything: their listing against what the store
    /// remembers there, read without the lease.
    fn paths_changed(&self, row: &SourceRow, paths: &[String]) -> Result<bool> {
        let location = Location::from_json(&row.location)?;
        let mask = FileMask::parse(&row.mask)?;
        let secret = self.source_secret(row)?;
        let work_dir = self.source_work_dir(&row.id);
        let mut source = quarry_sources::open(&location, secret.as_ref(), mask, &work_dir)?;
        let listing = source.list_paths(paths)?;
        let known: Vec<Known> = self
            .store()
            .source_files_at(row.row_id, paths)?
            .into_iter()
            .map(|f| Known {
                path: f.path,
                version: f.version,
                sha256: f.sha256,
            })
            .collect();
        let plan = quarry_sources::plan(&known, &listing);
        Ok(!plan.fetch.is_empty() || !plan.gone.is_empty())
    }
}

/// Only a folder is watched: the other kinds have no notifications to follow.
fn check_watch(location: &Location, watch: bool) -> Result<()> {
    if watch && !matches!(location, Location::Folder { .. }) {
        return Err(Error::invalid(format!(
            "only a folder source syncs on change; a {} source syncs on its interval or when asked",
            location.kind()
        )));
    }
    Ok(())
}

/// What a running sync holds: its lease, the paths it syncs (a watched folder's changed
/// paths; `None`: everything), and where it notes that the guard refused it.
struct Running<'a> {
    lease: SourceLease,
    paths: Option<&'a [String]>,
    refused: &'a Cell<bool>,
}

/// What applying changes needs from the sync that runs them ([`Engine::apply_changes`]).
struct Applying<'a, 'r> {
    lease: SourceLease,
    rows: &'a HashMap<&'a str, i64>,
    sizes: &'a HashMap<String, u64>,
    readers_of: &'a dyn Fn(&str) -> Option<Vec<String>>,
    /// What the last sync remembered, by path (a deleted document's readers).
    stored: &'a HashMap<&'a str, &'a quarry_store::SourceFile>,
    lines: &'a mut Lines<'r>,
    queued: &'a mut Vec<KbFile>,
    progress: &'a dyn Progress,
}

/// Takes from `fetched` the items whose change cannot be part of a rename — a path the
/// store knows (changed or touched), or bytes no gone path had (added) — and leaves the
/// others for the end of the sync, when every gone path's new place is known.
fn settled(
    fetched: &mut Vec<(Item, String)>,
    rows: &HashMap<&str, i64>,
    gone: &HashSet<String>,
) -> Vec<(Item, String)> {
    let (ready, held): (Vec<_>, Vec<_>) = std::mem::take(fetched)
        .into_iter()
        .partition(|(item, sha)| rows.contains_key(item.path.as_str()) || !gone.contains(sha));
    *fetched = held;
    ready
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

fn new_file(
    item: &Item,
    sha256: &str,
    size: Option<u64>,
    readers: Option<Vec<String>>,
) -> Result<NewKbFile> {
    let format = Format::from_file_name(&item.path).ok_or_else(|| {
        Error::Unsupported(format!("{}: not a format Quarry converts", item.path))
    })?;
    Ok(NewKbFile {
        meta: Default::default(),
        original_name: document_name(&item.path),
        sha256: sha256.to_owned(),
        format: format.as_str().to_owned(),
        mime: format.mime().to_owned(),
        size: size.or(item.size).unwrap_or(0),
        note: None,
        readers,
    })
}

/// A reader mapping as the store keeps it, checked.
fn mapping_column(mapping: Option<&ReaderMapping>) -> Result<Option<String>> {
    let Some(mapping) = mapping else {
        return Ok(None);
    };
    mapping.compile()?;
    Ok(Some(mapping.to_json()))
}

/// A source's reader mapping, ready to decide paths (`None`: no mapping).
fn reader_mapping(row: &SourceRow) -> Result<Option<CompiledMapping>> {
    let Some(text) = row.readers.as_deref() else {
        return Ok(None);
    };
    Ok(Some(ReaderMapping::from_json(text)?.compile()?))
}

/// Takes the source's `CODEOWNERS` file out of `listing` (it is never a document) and
/// reads it; a sync of a few paths looks it up by itself. `None` when the source has none.
fn read_codeowners(
    source: &mut dyn quarry_sources::Source,
    listing: &mut quarry_sources::Listing,
    partial: bool,
) -> std::result::Result<Option<CodeOwners>, SourceError> {
    let is_codeowners = |p: &str| CODEOWNERS_PATHS.contains(&p);
    let mut found: Vec<Item> = if partial {
        let wanted: Vec<String> = CODEOWNERS_PATHS.iter().map(|p| (*p).to_owned()).collect();
        source.list_paths(&wanted)?.items
    } else {
        listing
            .items
            .iter()
            .filter(|i| is_codeowners(&i.path))
            .cloned()
            .collect()
    };
    listing.items.retain(|i| !is_codeowners(&i.path));
    listing.problems.retain(|(p, _)| !is_codeowners(p));
    found.retain(|i| is_codeowners(&i.path));
    // GitHub's order: .github/, the root, docs/.
    found.sort_by_key(|i| CODEOWNERS_PATHS.iter().position(|p| *p == i.path));
    let Some(item) = found.first() else {
        return Ok(None);
    };
    let bytes = source.fetch(item, MAX_CODEOWNERS_BYTES)?;
    Ok(Some(CodeOwners::parse(&String::from_utf8_lossy(&bytes))))
}

/// Readers as a report line says them.
fn describe_readers(readers: Option<&[String]>) -> String {
    match readers {
        None => "readers: everyone".to_owned(),
        Some([]) => "readers: admins only".to_owned(),
        Some(keys) => format!("readers: {}", keys.join(", ")),
    }
}

/// A report's lines and counts, as a sync fills them: each file counted under its action,
/// and apart under its readers when it names them (`SyncCounts::restricted`), each line
/// with the readers its file had — so a caller who may not read a file neither sees its
/// line nor counts it ([`Engine::report_for_caller`]).
struct Lines<'a> {
    report: &'a mut SyncReport,
}

impl<'a> Lines<'a> {
    fn new(report: &'a mut SyncReport) -> Lines<'a> {
        Lines { report }
    }

    fn count(&mut self, action: &str, readers: Option<&[String]>) {
        if action == "readers" {
            return; // counted as unchanged
        }
        let counts = &mut self.report.counts;
        counts.count(action);
        let Some(keys) = readers else {
            return;
        };
        let restricted = counts.restricted.get_or_insert_with(Vec::new);
        match restricted.iter_mut().find(|r| r.readers == keys) {
            Some(r) => r.counts.count(action),
            None => {
                let mut counts = SyncCounts::default();
                counts.count(action);
                restricted.push(RestrictedCounts {
                    readers: keys.to_vec(),
                    counts,
                });
            }
        }
    }

    /// A line (and its count, for an action that is counted).
    fn push(
        &mut self,
        path: &str,
        action: &str,
        detail: Option<String>,
        readers: Option<Vec<String>>,
    ) {
        self.count(action, readers.as_deref());
        if self.report.details.len() < REPORT_LINES {
            self.report.details.push(SyncLine {
                path: path.to_owned(),
                action: action.to_owned(),
                detail,
                readers,
            });
        }
    }

    /// A file as it was (no line).
    fn unchanged(&mut self, readers: Option<Vec<String>>) {
        self.count("unchanged", readers.as_deref());
    }

    /// The report as it stands mid-sync.
    fn so_far(&mut self) -> &SyncReport {
        self.report
    }
}
