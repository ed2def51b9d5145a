//! Incremental indexing of folder collections (`index`, `update`).
//!
//! Unchanged files (same size and stat fingerprint) are not read; files whose bytes hash the same are
//! only re-stamped; changed files are re-indexed; vanished files removed. Changes reach the
//! store in batches, each its own transaction, and the keyword index follows the store
//! (see `quarry_store`): a kill at any point leaves a state the next run completes.

use std::collections::HashSet;
use std::path::Path;

use quarry_convert::{ConvertOptions, Format};
use quarry_core::{Collection, CollectionKind, Error, Result};
use quarry_ingest::{FileEntry, LoadedFile, Skip, load};
use std::sync::Arc;

use quarry_fts::{FtsIndex, FtsWriter, PassageDoc};
use quarry_store::{DocChange, FeedPosition, IndexWork};
use serde::Serialize;

use crate::{Engine, Progress, WriteGuard};

/// Store changes per transaction (each commit is fsync'd).
const CHANGE_BATCH: usize = 1024;
/// Store bytes per transaction, so huge files do not pile up in memory.
const CHANGE_BATCH_BYTES: usize = 32 << 20;
/// Documents per keyword-index commit: bounds the work a kill can make us redo.
const INDEX_BATCH: usize = 16_384;
/// Feed entries read at once (their bodies are held in memory until applied).
const CATCH_UP_BATCH: usize = 1024;

#[derive(Debug, Clone, Default)]
/// What `update` (`index`) re-scans.
pub struct UpdateOptions {
    /// Run `git pull` in each collection folder first.
    pub pull: bool,
    /// Restrict to these collections (all when empty).
    pub collections: Vec<String>,
}

/// What happened to one collection.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CollectionReport {
    /// The collection's name.
    pub name: String,
    /// Files that match the mask.
    pub scanned: u64,
    /// New documents.
    pub added: u64,
    /// Changed documents, re-indexed.
    pub updated: u64,
    /// Files whose content was unchanged.
    pub unchanged: u64,
    /// Documents whose file is gone.
    pub removed: u64,
    /// Files not indexed, with the reason.
    pub skipped: Vec<SkippedFile>,
    /// Output of `git pull`, when requested and the folder is a repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulled: Option<String>,
    /// Why this collection could not be (fully) updated; its documents were left as they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Documents it holds now.
    pub documents: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SkippedFile {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize)]
/// What `update` did to every collection.
pub struct UpdateReport {
    /// One report per collection.
    pub collections: Vec<CollectionReport>,
    /// Documents in the space afterwards.
    pub total_documents: u64,
}

impl UpdateReport {
    /// Collections that could not be (fully) updated.
    pub fn failures(&self) -> impl Iterator<Item = &CollectionReport> {
        self.collections.iter().filter(|c| c.error.is_some())
    }
}

impl Engine {
    /// Re-scans folder collections (all, or those named) and brings the indexes up to date.
    pub fn update(&self, opts: &UpdateOptions, progress: &dyn Progress) -> Result<UpdateReport> {
        self.require(quarry_core::Access::Admin, "updating collections")?;
        let all = self.collections()?;
        for name in &opts.collections {
            if !all.iter().any(|c| &c.name == name) {
                return Err(Error::not_found(format!("collection '{name}' not found")));
            }
        }
        let guard = self.lock_writes(progress)?;
        let mut session = IndexSession::new(self, &guard);
        session.recover()?;
        let mut report = UpdateReport::default();
        for c in all {
            if c.kind != CollectionKind::Folder
                || (!opts.collections.is_empty() && !opts.collections.contains(&c.name))
            {
                continue;
            }
            let pulled = if opts.pull {
                quarry_ingest::git_pull(Path::new(&c.path))
            } else {
                Ok(None)
            };
            let mut r = self.index_collection(&mut session, &c, progress)?;
            match pulled {
                Ok(p) => r.pulled = p,
                Err(e) => {
                    progress.warn(&format!("{}: {e}", c.name));
                    r.error.get_or_insert(e.to_string());
                }
            }
            report.collections.push(r);
        }
        session.finish()?;
        report.total_documents = self.store().document_count(self.space())?;
        Ok(report)
    }

    pub(crate) fn index_collection(
        &self,
        session: &mut IndexSession<'_>,
        c: &Collection,
        progress: &dyn Progress,
    ) -> Result<CollectionReport> {
        let mask = quarry_ingest::compile_mask(&c.pattern)?;
        let mut report = CollectionReport {
            name: c.name.clone(),
            documents: c.documents,
            ..Default::default()
        };
        // A folder that vanished (unmounted disk, moved repo) must not wipe its documents:
        // report it and leave the collection as it was.
        let scan = match quarry_ingest::scan(Path::new(&c.path), &mask) {
            Ok(scan) => scan,
            Err(e) => {
                progress.warn(&format!(
                    "{}: cannot scan: {e}; documents left unchanged",
                    c.name
                ));
                report.error = Some(format!("cannot scan: {e}"));
                return Ok(report);
            }
        };
        report.scanned = scan.files.len() as u64;
        for (path, reason) in scan.problems {
            progress.warn(&format!("{}: {path}: {reason}", c.name));
            report.skipped.push(SkippedFile { path, reason });
        }
        let known = self.store().file_states(c.id)?;
        // "Racily clean" files (git's term): modified so close to this scan that a later
        // same-size edit could keep the same stat data. Their stamp is stored as 0 so the
        // next scan reads and hashes them again.
        let racy_after = quarry_core::now_millis().saturating_sub(2_000) * 1_000_000;
        let stamp_of = |e: &FileEntry| if e.mtime_ns >= racy_after { 0 } else { e.stamp };
        let seen: HashSet<&str> = scan.files.iter().map(|f| f.rel_path.as_str()).collect();

        progress.begin(&format!("Indexing {}", c.name), scan.files.len() as u64);
        let mut batch = Batch::default();
        for chunk in scan.files.chunks(64) {
            let (unchanged, changed): (Vec<&FileEntry>, Vec<&FileEntry>) =
                chunk.iter().partition(|entry| {
                    known.get(&entry.rel_path).is_some_and(|s| {
                        s.stamp != 0 && s.size == entry.size && s.stamp == entry.stamp
                    })
                });
            report.unchanged += unchanged.len() as u64;
            for (entry, loaded) in changed.iter().zip(load_parallel(
                &changed,
                self.opts.max_file_bytes,
                &self.ingest_options().convert,
            )) {
                let state = known.get(&entry.rel_path);
                match loaded {
                    Ok(file) => match state {
                        Some(s) if s.hash == file.hash => {
                            report.unchanged += 1;
                            batch.push(DocChange::Touch {
                                id: s.id,
                                size: entry.size,
                                stamp: stamp_of(entry),
                            });
                        }
                        _ => {
                            if state.is_some() {
                                report.updated += 1;
                            } else {
                                report.added += 1;
                            }
                            batch.push(DocChange::Upsert {
                                path: entry.rel_path.clone(),
                                title: file.title,
                                hash: file.hash,
                                size: entry.size,
                                stamp: stamp_of(entry),
                                body: file.text,
                                pages: file.pages,
                                furniture: file.furniture,
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
                self.store().apply_changes(c.id, batch.take())?;
                session.catch_up()?;
            }
        }
        for (path, state) in &known {
            if !seen.contains(path.as_str()) {
                report.removed += 1;
                batch.push(DocChange::Remove { id: state.id });
                if batch.full() {
                    self.store().apply_changes(c.id, batch.take())?;
                    session.catch_up()?;
                }
            }
        }
        self.store().apply_changes(c.id, batch.take())?;
        session.catch_up()?;
        session.commit()?;
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
        let mut session = IndexSession::new(self, guard);
        session.recover()?;
        session.finish()
    }
}

/// Store meta key: the analyzer version the keyword index was built with.
const META_FTS_ANALYZER: &str = "fts.analyzer";
/// Store meta key: the chunker and analyzer versions the passage index was built with.
const META_PASSAGES: &str = "passages.version";

/// The keyword and passage indexes of a data directory, as one consumer of the store's
/// document change feed (both commit together, so one position serves both).
const KEYWORD_CONSUMER: &str = "keyword";

/// Keeps the keyword-index writers open while store batches stream in, so tokenising
/// overlaps reading files. The indexes follow the store's document change feed: what a
/// batch changed is read back from the feed (with whatever another writer changed in
/// between) and applied; every [`INDEX_BATCH`] documents and at the end the writers commit
/// and only then is the feed position acknowledged. A document's chunks are cut here (they
/// are what the passage index holds), so a document is searchable by keyword, whole and by
/// passage, in the same commit.
pub(crate) struct IndexSession<'a> {
    engine: &'a Engine,
    guard: &'a WriteGuard,
    writer: Option<(Arc<FtsIndex>, FtsWriter)>,
    passages: Option<(Arc<FtsIndex>, FtsWriter)>,
    /// Documents applied to the writers but not yet committed.
    uncommitted: usize,
    /// How far this session has read the feed (its writers hold everything up to here).
    read: Option<FeedPosition>,
    /// Whether `read` is ahead of the position last acknowledged.
    unacknowledged: bool,
}

impl<'a> IndexSession<'a> {
    pub(crate) fn new(engine: &'a Engine, guard: &'a WriteGuard) -> Self {
        IndexSession {
            engine,
            guard,
            writer: None,
            passages: None,
            uncommitted: 0,
            read: None,
            unacknowledged: false,
        }
    }

    /// Finishes work a previous, interrupted writer left, and rebuilds an index that is
    /// missing or was built by another analyzer or chunker.
    pub(crate) fn recover(&mut self) -> Result<()> {
        let store = self.engine.store();
        // A lost index is read again from the store.
        if !self.engine.fts_dir().exists() || !self.engine.passages_dir().exists() {
            store.feed_rebuild(KEYWORD_CONSUMER, None)?;
        }
        // An index written by another analyzer version is rebuilt from the store.
        let version = quarry_fts::analyzer::ANALYZER_VERSION.to_string();
        if store.meta(META_FTS_ANALYZER)?.as_deref() != Some(version.as_str()) {
            store.feed_rebuild(KEYWORD_CONSUMER, Some((META_FTS_ANALYZER, &version)))?;
        }
        // Passages cut by another chunker (or indexed by another analyzer) are cut and
        // indexed again: the files go first, so a kill in between only repeats this.
        let passages = format!("{}/{version}", crate::chunking::PASSAGES_VERSION);
        if store.meta(META_PASSAGES)?.as_deref() != Some(passages.as_str()) {
            self.passages = None;
            self.engine.drop_passage_index(self.guard)?;
            store.reset_all_chunks()?;
            store.feed_rebuild(KEYWORD_CONSUMER, Some((META_PASSAGES, &passages)))?;
        }
        self.catch_up()?;
        self.commit()
    }

    /// Applies what the feed holds for the keyword index (committing every
    /// [`INDEX_BATCH`] documents).
    pub(crate) fn catch_up(&mut self) -> Result<()> {
        let store = self.engine.store();
        let mut from = match self.read {
            Some(p) => p,
            None => store.feed_position(KEYWORD_CONSUMER)?,
        };
        loop {
            let batch = store.feed_read(from, CATCH_UP_BATCH)?;
            let done = batch.work.is_empty();
            self.apply(batch.work)?;
            if batch.position != from {
                from = batch.position;
                self.read = Some(from);
                self.unacknowledged = true;
            }
            if self.uncommitted >= INDEX_BATCH {
                self.commit()?;
            }
            if done {
                return Ok(());
            }
        }
    }

    fn apply(&mut self, work: IndexWork) -> Result<()> {
        if work.is_empty() {
            return Ok(());
        }
        if self.writer.is_none() {
            let fts = self.engine.fts_for_write(self.guard)?;
            let writer = fts.writer()?;
            self.writer = Some((fts, writer));
        }
        if let Some((_, writer)) = self.writer.as_mut() {
            writer.apply(&work)?;
        }
        self.apply_passages(&work)?;
        self.uncommitted += work.upserts.len() + work.deletes.len();
        Ok(())
    }

    /// Cuts the chunks of the upserted documents that lack current ones and replaces the
    /// passages of every document in `work`.
    fn apply_passages(&mut self, work: &IndexWork) -> Result<()> {
        let store = self.engine.store();
        let ids: Vec<i64> = work.upserts.iter().map(|d| d.id).collect();
        let cut: Vec<_> = store
            .chunk_sources(&ids)?
            .iter()
            .map(crate::chunking::cut)
            .collect();
        if !cut.is_empty() {
            store.replace_chunks(&cut)?;
        }
        let chunks = store.chunks_of_documents(&ids)?;
        let docs: std::collections::HashMap<i64, &quarry_store::IndexDoc> =
            work.upserts.iter().map(|d| (d.id, d)).collect();
        let passages: Vec<PassageDoc<'_>> = chunks
            .iter()
            .filter_map(|c| {
                let d = docs.get(&c.document_id)?;
                Some(PassageDoc {
                    id: c.id,
                    document_id: d.id,
                    collection_id: d.collection_id,
                    title: &d.title,
                    heading: &c.heading,
                    text: d.body.get(c.byte_start..c.byte_end)?,
                })
            })
            .collect();
        if self.passages.is_none() {
            let index = self.engine.passages_for_write(self.guard)?;
            let writer = index.writer()?;
            self.passages = Some((index, writer));
        }
        if let Some((_, writer)) = self.passages.as_mut() {
            let mut touched = ids;
            touched.extend_from_slice(&work.deletes);
            writer.apply_passages(&touched, &passages)?;
        }
        Ok(())
    }

    /// Commits the writers, then acknowledges the feed position they reached.
    pub(crate) fn commit(&mut self) -> Result<()> {
        if self.uncommitted > 0 {
            if let Some((_, writer)) = self.writer.as_mut() {
                writer.commit()?;
            }
            if let Some((_, writer)) = self.passages.as_mut() {
                writer.commit()?;
            }
            self.uncommitted = 0;
        }
        if let (true, Some(position)) = (self.unacknowledged, self.read) {
            self.engine.store().feed_ack(KEYWORD_CONSUMER, position)?;
            self.unacknowledged = false;
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<()> {
        self.commit()?;
        for (index, writer) in [self.writer.take(), self.passages.take()]
            .into_iter()
            .flatten()
        {
            writer.finish()?;
            index.reload()?;
        }
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

/// Reads one file: Markdown and text as they are; PDF, Office, spreadsheet, CSV, HTML and
/// JSON files through `quarry-convert` (so a QMD-style folder of PDFs works without
/// uploading). The content hash is always of the file's bytes.
fn load_document(
    entry: &FileEntry,
    max_bytes: u64,
    convert: &ConvertOptions,
) -> Result<LoadedFile, Skip> {
    let format = Format::from_file_name(&entry.rel_path);
    if matches!(format, None | Some(Format::Md | Format::Txt)) {
        return load(entry, max_bytes);
    }
    if entry.size > max_bytes {
        return Err(Skip(format!(
            "file is {} bytes, over the {max_bytes}-byte limit (QUARRY_MAX_FILE_BYTES)",
            entry.size
        )));
    }
    let bytes = std::fs::read(&entry.abs_path).map_err(|e| Skip(format!("cannot read: {e}")))?;
    let converted = quarry_convert::convert(&entry.rel_path, &bytes, convert)
        .map_err(|e| Skip(e.to_string()))?;
    let title = converted
        .title
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| quarry_ingest::extract_title(&converted.markdown, &entry.rel_path));
    Ok(LoadedFile {
        hash: quarry_ingest::content_hash(&bytes),
        title,
        pages: converted.pages,
        furniture: converted.furniture,
        text: converted.markdown,
    })
}

/// Reads files on all cores, in order. Reading and hashing dominate indexing time.
fn load_parallel(
    files: &[&FileEntry],
    max_bytes: u64,
    convert: &ConvertOptions,
) -> Vec<Result<LoadedFile, Skip>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    if threads <= 1 {
        return files
            .iter()
            .map(|f| load_document(f, max_bytes, convert))
            .collect();
    }
    let per = files.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(per)
            .map(|part| {
                let h = s.spawn(move || {
                    part.iter()
                        .map(|f| load_document(f, max_bytes, convert))
                        .collect::<Vec<_>>()
                });
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
