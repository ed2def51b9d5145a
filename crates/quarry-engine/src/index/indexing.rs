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

use crate::engine::Engine;
use crate::index::write_lock::WriteGuard;
use crate::kb::ingest_options::IngestOptions;
use crate::progress::Progress;

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
                self.ingest_options(),
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
                                meta: file.meta,
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

    /// The node's self-check: catches up, compares this node's keyword and passage indexes
    /// with the store ([`quarry_store::Store::index_census`]) and re-indexes every document
    /// whose entries differ — missing, left over, or pointing at chunks the store no longer
    /// has. Following the feed should leave nothing to mend; this catches what it missed
    /// (issue 41, item 9: chunks replaced behind a node's back) without a rebuild. A write
    /// landing between the catch-up and the census only costs its document an early
    /// re-index: applying a document is idempotent.
    pub fn check_indexes(&self) -> Result<IndexCheck> {
        let guard = self.lock_writes(&crate::progress::NoProgress)?;
        self.flush_index(&guard)?;
        let census = self.store().index_census()?;
        let mut check = IndexCheck {
            documents: census.documents.len(),
            chunks: census.chunks.len(),
            repaired: 0,
        };
        let mut suspects: std::collections::BTreeSet<i64> = std::collections::BTreeSet::new();
        if let Some(keyword) = self.fts()? {
            let indexed: HashSet<i64> = keyword.entries()?.into_iter().map(|(id, _)| id).collect();
            let stored: HashSet<i64> = census.documents.iter().copied().collect();
            suspects.extend(indexed.symmetric_difference(&stored));
        }
        if let Some(passages) = self.passage_index()? {
            let indexed: HashSet<(i64, i64)> = passages.entries()?.into_iter().collect();
            let stored: HashSet<(i64, i64)> = census.chunks.iter().copied().collect();
            suspects.extend(indexed.symmetric_difference(&stored).map(|(_, doc)| *doc));
        }
        if suspects.is_empty() {
            return Ok(check);
        }
        let ids: Vec<i64> = suspects.into_iter().collect();
        check.repaired = ids.len();
        let mut session = IndexSession::new(self, &guard);
        session.recover()?;
        for batch in ids.chunks(INDEX_BATCH.max(1)) {
            let work = self.store().index_work(batch)?;
            session.apply(work)?;
            session.commit()?;
        }
        session.finish()?;
        self.node
            .repaired
            .fetch_add(check.repaired as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(check)
    }
}

/// What [`Engine::check_indexes`] compared and mended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexCheck {
    /// Documents in the store.
    pub documents: usize,
    /// Chunks in the store.
    pub chunks: usize,
    /// Documents whose entries differed, re-indexed.
    pub repaired: usize,
}

/// Store meta key: the analyzer version the keyword index was built with (before each
/// index recorded its own stamp in its commits; read only to adopt such an index).
const META_FTS_ANALYZER: &str = "fts.analyzer";
/// Store meta key: the chunker version the stored chunks were cut with (shared by every
/// node: the first node with another chunker cuts them again).
const META_PASSAGES: &str = "passages.version";
/// Store meta key: the name of the database, so an index built from another is recognised.
const META_DATABASE_ID: &str = "database.id";
/// The single feed consumer of data directories from before per-node consumers.
const LEGACY_CONSUMER: &str = "keyword";

/// How long a session's catch-up waits, in all, for older transactions to finish before
/// leaving the rest to the next one (the follower's).
const HORIZON_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Keeps the keyword-index writers open while store batches stream in, so tokenising
/// overlaps reading files. The indexes follow the store's document change feed as this
/// node's consumer: what a batch changed is read back from the feed (with whatever another
/// writer, or node, changed in between) and applied; every [`INDEX_BATCH`] documents and at
/// the end the writers commit — each commit carrying the feed position it reached and the
/// versions that built it ([`crate::index::node::IndexPayload`]), so the index and its position
/// never disagree — and then the position is acknowledged to the store (which keeps the
/// feed for the slowest live node). A document's chunks are cut here (they are what the
/// passage index holds), so a document is searchable by keyword, whole and by passage, in
/// the same commit.
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
    /// The horizon of the last batch that reached the feed's end (applied once committed).
    horizon: Option<i64>,
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
            horizon: None,
        }
    }

    /// The versions that build this process's indexes, for the commit payload.
    fn stamp(&self) -> Result<(String, String, String)> {
        let database = match self.engine.node.database.get() {
            Some(id) => id.clone(),
            None => match self.engine.store().meta(META_DATABASE_ID)? {
                Some(id) => self.engine.node.database.get_or_init(|| id).clone(),
                None => String::new(),
            },
        };
        let analyzer = quarry_fts::analyzer::ANALYZER_VERSION.to_string();
        let passages = format!("{}/{analyzer}", crate::index::chunking::PASSAGES_VERSION);
        Ok((database, analyzer, passages))
    }

    /// Where this node's indexes stand: the earlier of the two indexes' commit payloads,
    /// when both exist and were built by this process's versions from this database.
    fn index_position(&self) -> Result<Option<FeedPosition>> {
        let (database, analyzer, passages) = self.stamp()?;
        let mut position: Option<FeedPosition> = None;
        for index in [self.engine.fts(), self.engine.passage_index()] {
            let index = match index {
                Ok(Some(index)) => index,
                // None yet, or one written with another schema (an older version's): rebuilt.
                Ok(None) | Err(Error::Index(_)) => return Ok(None),
                Err(e) => return Err(e),
            };
            let Some(payload) = index.commit_payload()? else {
                return Ok(None);
            };
            let Ok(p) = serde_json::from_str::<crate::index::node::IndexPayload>(&payload) else {
                return Ok(None);
            };
            if p.database != database || p.analyzer != analyzer || p.passages != passages {
                return Ok(None);
            }
            position = Some(match position {
                Some(q) => crate::index::node::earlier(p.position, q),
                None => p.position,
            });
        }
        Ok(position)
    }

    /// Finishes work a previous, interrupted writer left, and rebuilds an index that is
    /// missing, from another database, built by another analyzer or chunker, or older than
    /// the feed remembers.
    pub(crate) fn recover(&mut self) -> Result<()> {
        let store = self.engine.store();
        let node = &self.engine.node;
        let (_, analyzer, passages) = self.stamp()?;
        // Chunks are shared by every node: the first with another chunker cuts them again
        // (this node's passage index is then rebuilt below; the others see the new
        // chunker's stamp missing from their indexes when they run it). Another analyzer
        // alone rebuilds the passage index from the chunks as they are: cutting them again
        // gives them new ids, which the vector index then lacks until an embedding run adds
        // their (stored) vectors.
        let mut chunks_reset = false;
        let recorded = store.meta(META_PASSAGES)?;
        let recorded_chunker = recorded.as_deref().and_then(|p| p.split('/').next());
        if recorded_chunker != Some(crate::index::chunking::PASSAGES_VERSION) {
            store.reset_all_chunks()?;
            store.set_meta(META_PASSAGES, &passages)?;
            node.resumed
                .store(false, std::sync::atomic::Ordering::Release);
            chunks_reset = true;
        }
        let consumer = self.engine.keyword_consumer()?;
        let resumed = node.resumed.load(std::sync::atomic::Ordering::Acquire);
        let from = match self.index_position()? {
            // Every document is cut again: its passages are all new.
            _ if chunks_reset => None,
            Some(p) if resumed => Some(p),
            Some(p) => store.feed_resume(&consumer, p)?.then_some(p),
            // An index from before per-node positions, built by this analyzer from this
            // store: the single consumer `keyword` kept its place.
            None if !chunks_reset
                && self.engine.fts_dir().join("meta.json").exists()
                && self.engine.passages_dir().join("meta.json").exists()
                && store.meta(META_FTS_ANALYZER)?.as_deref() == Some(analyzer.as_str())
                && self.legacy_index()? =>
            {
                let p = store.feed_position(LEGACY_CONSUMER)?;
                let ok = store.feed_resume(&consumer, p)?;
                store.feed_forget(LEGACY_CONSUMER)?;
                ok.then_some(p)
            }
            None => None,
        };
        let from = match from {
            Some(p) => p,
            None => {
                // Rebuilt from a snapshot of the store, then the feed from where it stood.
                self.writer = None;
                self.passages = None;
                self.engine.drop_keyword_index(self.guard)?;
                self.engine.drop_passage_index(self.guard)?;
                store.feed_rebuild(&consumer, Some((META_FTS_ANALYZER, &analyzer)))?;
                store.feed_position(&consumer)?
            }
        };
        node.resumed
            .store(true, std::sync::atomic::Ordering::Release);
        self.read = Some(from);
        self.catch_up()?;
        self.commit()?;
        if chunks_reset && self.engine.vector_model()?.is_some() {
            // The cut chunks have new ids: the vector index gets them (their vectors are
            // stored by text, so nothing is embedded twice) from an embed job per collection.
            self.engine.queue_embedding(None, 0)?;
        }
        Ok(())
    }

    /// Whether the indexes were committed without any payload (written before per-node
    /// positions), as opposed to with a stamp of another database or version.
    fn legacy_index(&self) -> Result<bool> {
        for index in [self.engine.fts(), self.engine.passage_index()] {
            match index {
                Ok(Some(index)) if index.commit_payload()?.is_none() => {}
                Ok(_) | Err(Error::Index(_)) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Applies what the feed holds for the keyword index (committing every
    /// [`INDEX_BATCH`] documents), until it has read every write committed before the call
    /// — or, when an older transaction (another node's) is still running after
    /// [`HORIZON_WAIT`], what is readable so far.
    pub(crate) fn catch_up(&mut self) -> Result<()> {
        let store = self.engine.store();
        let token = store.feed_horizon()?;
        let deadline = std::time::Instant::now() + HORIZON_WAIT;
        let mut from = match self.read {
            Some(p) => p,
            None => {
                self.recover()?;
                return Ok(());
            }
        };
        let mut pause = std::time::Duration::from_millis(2);
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
            if let Some(h) = batch.horizon {
                self.horizon = Some(self.horizon.map_or(h, |old| old.max(h)));
            }
            if done {
                let reached = batch.horizon.is_some_and(|h| h >= token);
                if reached || std::time::Instant::now() >= deadline {
                    return Ok(());
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
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
        let limits = self.engine.ingest.chunk;
        let cut: Vec<_> = store
            .chunk_sources(&ids)?
            .iter()
            .map(|src| crate::index::chunking::cut(src, &limits))
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
                    path: &d.path,
                    heading: &c.heading,
                    text: c.text_in(&d.body)?,
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

    /// Commits the writers with the feed position they reached in their payload, then
    /// acknowledges it to the store.
    pub(crate) fn commit(&mut self) -> Result<()> {
        if self.uncommitted > 0 {
            let (database, analyzer, passages) = self.stamp()?;
            let payload = serde_json::to_string(&crate::index::node::IndexPayload {
                database,
                analyzer,
                passages,
                position: self.read.unwrap_or_default(),
            })
            .map_err(|e| Error::Index(format!("cannot record the index's position: {e}")))?;
            if let Some((_, writer)) = self.writer.as_mut() {
                writer.commit_with_payload(&payload)?;
            }
            if let Some((_, writer)) = self.passages.as_mut() {
                writer.commit_with_payload(&payload)?;
            }
            self.uncommitted = 0;
        }
        if let (true, Some(position)) = (self.unacknowledged, self.read) {
            let consumer = self.engine.keyword_consumer()?;
            match self.engine.store().feed_ack(&consumer, position) {
                Ok(()) => {}
                // Forgotten as idle meanwhile: the next session resumes (or rebuilds).
                Err(Error::NotFound(_)) => self
                    .engine
                    .node
                    .resumed
                    .store(false, std::sync::atomic::Ordering::Release),
                Err(e) => return Err(e),
            }
            self.unacknowledged = false;
        }
        if let Some(position) = self.read {
            *self
                .engine
                .node
                .position
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(position);
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
        // Searches see the commits now: writes below the horizon are readable here.
        if let Some(h) = self.horizon {
            let node = &self.engine.node;
            node.applied_horizon
                .fetch_max(h, std::sync::atomic::Ordering::AcqRel);
            if self.read.is_some_and(|p| p.rebuilding_after.is_none()) {
                node.caught_up_at_ms.store(
                    quarry_core::now_millis(),
                    std::sync::atomic::Ordering::Release,
                );
            }
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
/// uploading). The content hash is always of the file's bytes. A file that cannot be cut
/// into chunks within the chunking limits is skipped with the reason.
fn load_document(
    entry: &FileEntry,
    max_bytes: u64,
    ingest: &IngestOptions,
) -> Result<LoadedFile, Skip> {
    let file = read_document(entry, max_bytes, &ingest.convert)?;
    let layout = quarry_ingest::chunk::Layout {
        pages: &file.pages,
        furniture: &file.furniture,
    };
    crate::index::chunking::check_limits(&file.text, layout, None, &ingest.chunk)
        .map_err(|e| Skip(e.to_string()))?;
    Ok(file)
}

/// [`load_document`] but for the chunking limits.
fn read_document(
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
        meta: crate::kb::metadata::property_fields(&converted.properties).encode(),
        text: converted.markdown,
    })
}

/// Reads files on all cores, in order. Reading and hashing dominate indexing time.
fn load_parallel(
    files: &[&FileEntry],
    max_bytes: u64,
    ingest: &IngestOptions,
) -> Vec<Result<LoadedFile, Skip>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    if threads <= 1 {
        return files
            .iter()
            .map(|f| load_document(f, max_bytes, ingest))
            .collect();
    }
    let per = files.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(per)
            .map(|part| {
                let h = s.spawn(move || {
                    part.iter()
                        .map(|f| load_document(f, max_bytes, ingest))
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
