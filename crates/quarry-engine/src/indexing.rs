//! Incremental indexing of folder collections (`index`, `update`).
//!
//! Unchanged files (same size and mtime) are not read; files whose bytes hash the same are
//! only re-stamped; changed files are re-indexed; vanished files removed. Changes reach the
//! store in batches, each its own transaction, and the keyword index follows the store
//! (see `quarry_store`): a kill at any point leaves a state the next run completes.

use std::collections::HashSet;
use std::path::Path;

use quarry_core::{Collection, CollectionKind, Error, Result};
use quarry_ingest::{FileEntry, LoadedFile, Skip, load};
use quarry_store::DocChange;
use serde::Serialize;

use crate::{Engine, Progress, WriteGuard};

/// Store changes per transaction.
const CHANGE_BATCH: usize = 256;
/// Store bytes per transaction, so huge files do not pile up in memory.
const CHANGE_BATCH_BYTES: usize = 32 << 20;
/// Documents per keyword-index commit.
const INDEX_BATCH: usize = 4096;

#[derive(Debug, Clone, Default)]
pub struct UpdateOptions {
    /// Run `git pull` in each collection folder first.
    pub pull: bool,
    /// Restrict to these collections (all when empty).
    pub collections: Vec<String>,
}

/// What happened to one collection.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CollectionReport {
    pub name: String,
    pub scanned: u64,
    pub added: u64,
    pub updated: u64,
    pub unchanged: u64,
    pub removed: u64,
    /// Files not indexed, with the reason.
    pub skipped: Vec<SkippedFile>,
    /// Output of `git pull`, when requested and the folder is a repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulled: Option<String>,
    pub documents: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SkippedFile {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct UpdateReport {
    pub collections: Vec<CollectionReport>,
    pub total_documents: u64,
}

impl Engine {
    /// Re-scans folder collections (all, or those named) and brings the indexes up to date.
    pub fn update(&self, opts: &UpdateOptions, progress: &dyn Progress) -> Result<UpdateReport> {
        let all = self.store().collections(self.space())?;
        for name in &opts.collections {
            if !all.iter().any(|c| &c.name == name) {
                return Err(Error::not_found(format!("collection '{name}' not found")));
            }
        }
        let guard = self.lock_writes(progress)?;
        self.flush_index(&guard)?;
        let mut report = UpdateReport::default();
        for c in all {
            if c.kind != CollectionKind::Folder
                || (!opts.collections.is_empty() && !opts.collections.contains(&c.name))
            {
                continue;
            }
            let pulled = if opts.pull {
                quarry_ingest::git_pull(Path::new(&c.path))?
            } else {
                None
            };
            let mut r = self.index_collection(&guard, &c, progress)?;
            r.pulled = pulled;
            report.collections.push(r);
        }
        report.total_documents = self.store().document_count(self.space())?;
        Ok(report)
    }

    pub(crate) fn index_collection(
        &self,
        guard: &WriteGuard,
        c: &Collection,
        progress: &dyn Progress,
    ) -> Result<CollectionReport> {
        let mask = quarry_ingest::compile_mask(&c.pattern)?;
        let scan = quarry_ingest::scan(Path::new(&c.path), &mask)?;
        let mut report = CollectionReport {
            name: c.name.clone(),
            scanned: scan.files.len() as u64,
            ..Default::default()
        };
        for (path, reason) in scan.problems {
            progress.warn(&format!("{}: {path}: {reason}", c.name));
            report.skipped.push(SkippedFile { path, reason });
        }
        let known = self.store().file_states(c.id)?;
        let seen: HashSet<&str> = scan.files.iter().map(|f| f.rel_path.as_str()).collect();

        progress.begin(&format!("Indexing {}", c.name), scan.files.len() as u64);
        let mut batch = Batch::default();
        let mut pending_index = 0usize;
        for chunk in scan.files.chunks(64) {
            let (unchanged, changed): (Vec<&FileEntry>, Vec<&FileEntry>) =
                chunk.iter().partition(|entry| {
                    known
                        .get(&entry.rel_path)
                        .is_some_and(|s| s.size == entry.size && s.mtime_ns == entry.mtime_ns)
                });
            report.unchanged += unchanged.len() as u64;
            for (entry, loaded) in changed
                .iter()
                .zip(load_parallel(&changed, self.opts.max_file_bytes))
            {
                let state = known.get(&entry.rel_path);
                match loaded {
                    Ok(file) => match state {
                        Some(s) if s.hash == file.hash => {
                            report.unchanged += 1;
                            batch.push(DocChange::Touch {
                                id: s.id,
                                size: entry.size,
                                mtime_ns: entry.mtime_ns,
                            });
                        }
                        _ => {
                            if state.is_some() {
                                report.updated += 1;
                            } else {
                                report.added += 1;
                            }
                            pending_index += 1;
                            batch.push(DocChange::Upsert {
                                path: entry.rel_path.clone(),
                                title: file.title,
                                hash: file.hash,
                                size: entry.size,
                                mtime_ns: entry.mtime_ns,
                                body: file.text,
                            });
                        }
                    },
                    Err(skip) => {
                        // A file we cannot index keeps its previous version, if any: a
                        // transient read error must not delete a document.
                        progress.warn(&format!(
                            "{}/{}: skipped: {}",
                            c.name, entry.rel_path, skip.0
                        ));
                        report.skipped.push(SkippedFile {
                            path: entry.rel_path.clone(),
                            reason: skip.0,
                        });
                    }
                }
            }
            progress.advance(chunk.len() as u64);
            if batch.full() {
                self.store().apply_changes(c.id, &batch.take())?;
            }
            if pending_index >= INDEX_BATCH {
                self.store().apply_changes(c.id, &batch.take())?;
                self.flush_index(guard)?;
                pending_index = 0;
            }
        }
        for (path, state) in &known {
            if !seen.contains(path.as_str()) {
                report.removed += 1;
                batch.push(DocChange::Remove { id: state.id });
                if batch.full() {
                    self.store().apply_changes(c.id, &batch.take())?;
                }
            }
        }
        self.store().apply_changes(c.id, &batch.take())?;
        self.flush_index(guard)?;
        self.store()
            .mark_collection_scanned(c.id, quarry_core::now_millis())?;
        progress.end();
        report.documents = self
            .store()
            .collection(self.space(), &c.name)?
            .map_or(0, |c| c.documents);
        Ok(report)
    }

    /// Brings the keyword index up to date with the store (also recovers after a crash).
    pub(crate) fn flush_index(&self, guard: &WriteGuard) -> Result<()> {
        let mut work = self.store().pending_index_work(INDEX_BATCH)?;
        if work.is_empty() {
            return Ok(());
        }
        let fts = self.fts_for_write(guard)?;
        let mut writer = fts.writer()?;
        while !work.is_empty() {
            writer.apply(&work)?;
            writer.commit()?;
            self.store().index_work_done(&work)?;
            work = self.store().pending_index_work(INDEX_BATCH)?;
        }
        writer.finish()?;
        fts.reload()?;
        Ok(())
    }
}

#[derive(Default)]
struct Batch {
    changes: Vec<DocChange>,
    bytes: usize,
}

impl Batch {
    fn push(&mut self, c: DocChange) {
        if let DocChange::Upsert { body, .. } = &c {
            self.bytes += body.len();
        }
        self.changes.push(c);
    }

    fn full(&self) -> bool {
        self.changes.len() >= CHANGE_BATCH || self.bytes >= CHANGE_BATCH_BYTES
    }

    fn take(&mut self) -> Vec<DocChange> {
        self.bytes = 0;
        std::mem::take(&mut self.changes)
    }
}

/// Reads files on all cores, in order. Reading and hashing dominate indexing time.
fn load_parallel(files: &[&FileEntry], max_bytes: u64) -> Vec<Result<LoadedFile, Skip>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    if threads <= 1 {
        return files.iter().map(|f| load(f, max_bytes)).collect();
    }
    let per = files.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(per)
            .map(|part| {
                let h =
                    s.spawn(move || part.iter().map(|f| load(f, max_bytes)).collect::<Vec<_>>());
                (part.len(), h)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(n, h)| {
                h.join().unwrap_or_else(|_| {
                    (0..n)
                        .map(|_| Err(Skip("reader thread panicked".into())))
                        .collect()
                })
            })
            .collect()
    })
}
