//! The pool of worker threads a node runs: job workers, the heartbeat, the source
//! scheduler and the folder watchers.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quarry_core::{Error, Result};
use quarry_engine::{Engine, Job, JobOutcome, ModelMeter, NoProgress, Progress};

use crate::nodes::{NODE_HEARTBEAT, local_nodes, node_name, release_dead_nodes};
use crate::options::WorkerOptions;
use crate::shared::Shared;
use crate::watch;

/// Job threads per conversion place ([`WorkerOptions::concurrency`]). With two threads per
/// node (one per place), every keyword flush covered one or two documents and cost most
/// of an upload's CPU (two index commits, the write lock held throughout: 19 ms of a node's
/// CPU per note on one core); with eight, a flush covers up to eight and a note costs 12 ms
/// (bench/nodes, ingestion, 1 node pinned: 1,893 → 2,947 notes per minute).
pub const JOB_THREADS_PER_PLACE: usize = 4;

/// A pool of worker threads.
pub struct Workers {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    /// This node's lock in the data directory (see `local_nodes`), held while it runs.
    _node_lock: std::fs::File,
}

impl Workers {
    /// Starts workers over `engine`'s queue: [`JOB_THREADS_PER_PLACE`] threads for each of
    /// `opts.concurrency` conversion places.
    pub fn start(engine: Arc<Engine>, opts: WorkerOptions) -> Result<Workers> {
        // Alive before the first claim, so no other node takes this one's leases for dead.
        let node = node_name();
        engine.node_heartbeat(&node)?;
        // Processes of this data directory that died (a restart after a crash) are known at
        // once: their jobs need not wait for the heartbeat to go stale.
        let (node_lock, dead) = local_nodes(&engine, &node)?;
        let owners: Vec<String> = engine
            .job_lease_owners()?
            .into_iter()
            .filter(|o| {
                dead.iter()
                    .any(|d| o.rsplit_once(':').is_some_and(|(n, _)| n == d))
            })
            .collect();
        if !owners.is_empty() {
            let n = engine.expire_job_leases(&owners)?;
            tracing::info!(jobs = n, "resuming jobs of a process that died");
        }
        let shared = Arc::new(Shared::new(engine, opts));
        let mut handles = Vec::new();
        {
            let s = shared.clone();
            let node = node.clone();
            let h = std::thread::Builder::new()
                .name("quarry-node-heartbeat".into())
                .spawn(move || heartbeat_loop(&s, &node))
                .map_err(|e| Error::Storage(format!("cannot start the node heartbeat: {e}")))?;
            handles.push(h);
        }
        if let Some(every) = shared.opts.source_sync {
            let s = shared.clone();
            let owner = format!("{node}:sources");
            let h = std::thread::Builder::new()
                .name("quarry-source-sync".into())
                .spawn(move || source_sync_loop(&s, &owner, every))
                .map_err(|e| Error::Storage(format!("cannot start the source scheduler: {e}")))?;
            handles.push(h);
        }
        if let Some(every) = shared.opts.source_watch {
            let s = shared.clone();
            let owner = format!("{node}:watch");
            let h = std::thread::Builder::new()
                .name("quarry-source-watchers".into())
                .spawn(move || watch::source_watch_loop(&s, &owner, every))
                .map_err(|e| Error::Storage(format!("cannot start the folder watchers: {e}")))?;
            handles.push(h);
        }
        for i in 0..shared.opts.concurrency.max(1) * JOB_THREADS_PER_PLACE {
            let s = shared.clone();
            let owner = format!("{node}:{i}");
            // The threads beyond one per place look for work others enqueued less often
            // when idle: the queue is polled as often as with one thread per place, and a
            // claim wakes them (a burst of jobs finds them all).
            let idle_poll = if i < s.opts.concurrency.max(1) {
                s.opts.idle_poll
            } else {
                s.opts.idle_poll * JOB_THREADS_PER_PLACE as u32
            };
            let h = std::thread::Builder::new()
                .name(format!("quarry-ingest-{i}"))
                .spawn(move || worker_loop(&s, &owner, idle_poll))
                .map_err(|e| Error::Storage(format!("cannot start an ingest worker: {e}")))?;
            handles.push(h);
        }
        Ok(Workers {
            shared,
            handles,
            _node_lock: node_lock,
        })
    }

    /// New work was enqueued: idle workers look now rather than at their next poll.
    pub fn wake(&self) {
        self.shared.notify();
    }

    /// Asks workers to stop after their current job and waits up to `grace` for them. A
    /// job still running after that keeps its lease until it lapses; another worker (after
    /// a restart) takes it over.
    pub fn shutdown(mut self, grace: Duration) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.notify();
        let deadline = Instant::now() + grace;
        for h in self.handles.drain(..) {
            while !h.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.notify();
    }
}

/// Sends this node's heartbeats and releases the leases of nodes that stopped sending theirs
/// (every node does, so it happens while any node is alive).
fn heartbeat_loop(shared: &Shared, node: &str) {
    let mut first = true;
    let mut last_sweep: Option<Instant> = None;
    // The chunks as the last sweep that found nothing saw them, and when it ran in full.
    let mut quiet_since: Option<(SweepFingerprint, Instant)> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        if !first {
            shared.wait_stop(NODE_HEARTBEAT);
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
        }
        first = false;
        if let Err(e) = shared.engine.node_heartbeat(node) {
            tracing::warn!(error = %e, "cannot send the node's heartbeat");
            continue;
        }
        match release_dead_nodes(&shared.engine) {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(jobs = n, "took over the jobs of a node that stopped");
                shared.notify();
            }
            Err(e) => tracing::warn!(error = %e, "cannot look for dead nodes"),
        }
        if let Some(every) = shared.opts.embed_sweep
            && last_sweep.is_none_or(|t| t.elapsed() >= every)
        {
            last_sweep = Some(Instant::now());
            // A full sweep reads every chunk: skip it while no chunk was cut or removed
            // since one found nothing, but not for longer than a failed collection's quiet
            // time (it is due again after that without any chunk changing). Embedding
            // coming on (the default model loaded after a download) makes it due at once.
            let fingerprint = match shared
                .engine
                .chunk_fingerprint()
                .and_then(|f| Ok((f, shared.engine.embedding_enabled()?)))
            {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the chunk count");
                    None
                }
            };
            if let (Some(now), Some((then, at))) = (fingerprint, quiet_since)
                && now == then
                && at.elapsed() < QUIET_AFTER_EMBED_FAILURE
            {
                continue;
            }
            match shared
                .engine
                .queue_pending_embedding(QUIET_AFTER_EMBED_FAILURE)
            {
                Ok(0) => quiet_since = fingerprint.map(|f| (f, Instant::now())),
                Ok(n) => {
                    quiet_since = None;
                    tracing::info!(
                        collections = n,
                        "queued embedding of chunks without vectors"
                    );
                    shared.notify();
                }
                Err(e) => tracing::warn!(error = %e, "cannot look for chunks without vectors"),
            }
        }
    }
}

/// What the embedding sweep compares to know nothing changed since a sweep found nothing: the
/// store's chunk fingerprint, and whether embedding is on (it comes on when a server's
/// default model has loaded).
type SweepFingerprint = ((i64, i64), bool);

/// How long the embedding sweep leaves a collection alone after its embedding failed for
/// good (the model or its API down): a retry every sweep would only fail again.
pub const QUIET_AFTER_EMBED_FAILURE: Duration = Duration::from_secs(15 * 60);

/// Runs the syncs that fall due, one at a time: a sync is mostly waiting on its source, and
/// what it changes is queued for the ingest workers. First it records this node's network
/// policy and makes the sources the guard refused under another policy due
/// ([`Engine::start_source_scheduler`]); it looks for due sources at once, then every
/// `every`.
fn source_sync_loop(shared: &Shared, owner: &str, every: Duration) {
    match shared.engine.start_source_scheduler() {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            sources = n,
            "retrying at once the sources whose syncs the outbound address guard refused under another network policy"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "cannot record this node's network policy for scheduled syncs")
        }
    }
    let mut first = true;
    while !shared.stop.load(Ordering::Relaxed) {
        if !std::mem::take(&mut first) {
            shared.wait_stop(every);
        }
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let due = match shared.engine.due_sources(4) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for sources due for a sync");
                continue;
            }
        };
        for id in due {
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            let result = shared.engine.sync_scheduled_source(&id, owner);
            if let Some(hook) = &shared.opts.on_source_sync {
                match &result {
                    Ok(Some(report)) => (hook.0)(&id, Ok(report)),
                    // Another node took it first: it ran nothing here.
                    Ok(None) => {}
                    Err(e) => (hook.0)(&id, Err(e)),
                }
            }
            match result {
                Ok(Some(report)) => {
                    let c = &report.counts;
                    tracing::info!(
                        source = %id,
                        added = c.added,
                        changed = c.changed,
                        renamed = c.renamed,
                        deleted = c.deleted,
                        skipped = c.skipped,
                        "synced a source"
                    );
                    shared.notify();
                }
                // Another node took it first.
                Ok(None) => {}
                Err(e) => tracing::warn!(source = %id, error = %e, "a scheduled sync failed"),
            }
        }
    }
}

fn worker_loop(shared: &Shared, owner: &str, idle_poll: Duration) {
    let mut failures = 0u32;
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(place) = shared.places.take(&shared.stop) else {
            return;
        };
        let claimed = &|| shared.notify();
        let ran = run_one(
            &shared.engine,
            owner,
            &shared.opts,
            &NoProgress,
            claimed,
            &|| place.give_back(),
        );
        drop(place);
        match ran {
            Ok(Some(_)) => failures = 0,
            Ok(None) => shared.wait(idle_poll),
            Err(e) => {
                // The store itself failed (disk full, database locked for long): back off.
                failures = failures.saturating_add(1);
                tracing::warn!(error = %e, "ingest worker: cannot claim or record a job");
                shared.wait(Duration::from_millis(250 << failures.min(6)));
            }
        }
    }
}

/// Claims and runs one job, renewing its lease meanwhile. `None`: nothing to do.
/// `claimed` is called once a job is claimed, `converted` once an ingest job's file is
/// converted ([`Engine::run_job`]).
pub fn run_one(
    engine: &Engine,
    owner: &str,
    opts: &WorkerOptions,
    progress: &dyn Progress,
    claimed: &dyn Fn(),
    converted: &dyn Fn(),
) -> Result<Option<(Job, JobOutcome)>> {
    let Some(job) = engine.claim_job(owner, opts.lease)? else {
        return Ok(None);
    };
    claimed();
    let meter = ModelMeter::new();
    let done = (Mutex::new(false), Condvar::new());
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            let every = opts.lease / 3;
            let mut finished = done.0.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                let (g, timeout) = done
                    .1
                    .wait_timeout_while(finished, every, |f| !*f)
                    .unwrap_or_else(|p| p.into_inner());
                finished = g;
                if *finished || !timeout.timed_out() {
                    break;
                }
                match engine.renew_job(&job, opts.lease) {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(job = job.id, "ingest job lease lost");
                        break;
                    }
                    Err(e) => tracing::warn!(job = job.id, error = %e, "cannot renew lease"),
                }
            }
        });
        let outcome = meter.run(|| engine.run_job(&job, progress, converted));
        *done.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        done.1.notify_all();
        outcome
    })?;
    let used = meter.take();
    if let (Some(hook), false) = (&opts.on_model_use, used.is_empty()) {
        (hook.0)(&job, &used);
    }
    match &outcome {
        JobOutcome::Done => tracing::debug!(job = job.id, kind = ?job.kind, "job done"),
        JobOutcome::Retry { error, after_ms } => {
            tracing::warn!(job = job.id, %error, after_ms, "job failed; will retry")
        }
        JobOutcome::Failed { error } => tracing::warn!(job = job.id, %error, "job failed"),
        JobOutcome::Lost => tracing::warn!(
            job = job.id,
            "job lease lapsed; another worker took it over"
        ),
    }
    Ok(Some((job, outcome)))
}

#[cfg(test)]
mod tests {
    use quarry_engine::FileStatus;

    use super::*;

    /// The statuses of `kb`'s files, by name.
    fn statuses(engine: &Engine, kb: &str) -> Vec<(String, FileStatus)> {
        let mut files: Vec<_> = engine
            .kb_documents(kb, &quarry_engine::FileFilter::default())
            .unwrap()
            .into_iter()
            .map(|f| (f.file_name, f.status))
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files
    }

    /// With one conversion place, files still convert one after another while the jobs
    /// before them wait for the keyword flush (here: another process holds the index's
    /// write lock); once it is free every file becomes ready and searchable, whichever
    /// job's flush took it (the others skip theirs).
    #[test]
    fn jobs_waiting_for_the_flush_leave_their_place_to_the_next_conversion() {
        let home = tempfile::tempdir().unwrap();
        let engine = Arc::new(
            Engine::open(quarry_engine::EngineOptions {
                home: home.path().to_path_buf(),
                index: "index".into(),
                space: quarry_core::DEFAULT_SPACE.into(),
                max_file_bytes: 1 << 20,
            })
            .unwrap(),
        );
        engine
            .create_knowledge_base(&quarry_engine::CreateKnowledgeBase {
                name: "kb".into(),
                description: String::new(),
                chunk_size: None,
                chunk_overlap: None,
            })
            .unwrap();
        let mut uploads = Vec::new();
        for i in 0..3 {
            let path = home.path().join(format!("note-{i}.md"));
            std::fs::write(&path, format!("# Note {i}\n\nword{i} and more\n")).unwrap();
            uploads.push(engine.upload_from_path(&path).unwrap().unwrap());
        }
        engine
            .add_uploads("kb", uploads, &quarry_engine::UploadOptions::default())
            .unwrap();
        // What another process writing to this index holds.
        let lock = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(engine.data_dir().join("write.lock"))
            .unwrap();
        lock.lock().unwrap();
        let workers = Workers::start(
            engine.clone(),
            WorkerOptions {
                concurrency: 1,
                idle_poll: Duration::from_millis(50),
                ..WorkerOptions::default()
            },
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let indexing =
            |files: &[(String, FileStatus)]| files.iter().all(|(_, s)| *s == FileStatus::Indexing);
        let mut files = statuses(&engine, "kb");
        while !indexing(&files) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            files = statuses(&engine, "kb");
        }
        assert!(indexing(&files), "{files:?}");
        lock.unlock().unwrap();
        let ready =
            |files: &[(String, FileStatus)]| files.iter().all(|(_, s)| *s == FileStatus::Ready);
        while !ready(&files) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            files = statuses(&engine, "kb");
        }
        assert!(ready(&files), "{files:?}");
        // Ready means searchable, whichever job's flush took the file.
        for i in 0..3 {
            let hits = engine
                .search(&quarry_engine::SearchRequest::new(format!("word{i}")))
                .unwrap();
            assert_eq!(hits.len(), 1, "word{i}: {hits:?}");
        }
        workers.shutdown(Duration::from_secs(10));
    }
}
