//! The ingestion queue's workers.
//!
//! Jobs live in the store (`quarry-store`'s `jobs` table); this crate only runs them. A
//! worker claims the oldest runnable job with a lease, renews the lease from a heartbeat
//! thread while [`Engine::run_job`] works, and claims the next. Because claims go through
//! the store, any number of workers — threads here, a CLI beside a server, later several
//! nodes — share one queue without running a job twice. Each process running workers is a
//! *node* that sends heartbeats through the store; a node that stops (killed, frozen, cut
//! off) has its leases released by the others after [`NODE_DEAD_AFTER`] — at once by a
//! process starting on the same data directory, which sees the dead one's lock file free —
//! and its jobs are claimed again — a frozen node that wakes writes nothing (the store fences every side
//! effect by the lease).
//!
//! [`Workers`] is the long-lived pool a server keeps; [`drain`] is what the CLI runs when
//! it uploads: a pool that stops once the documents it waits for are `ready` or `failed`.

mod follower;
mod watch;
pub use follower::{Follower, HEARTBEAT, INDEX_CHECK, POLL, SHUTDOWN_WAIT};
pub use watch::SOURCE_WATCH_POLL;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quarry_core::{Error, Result};
use quarry_engine::{
    Engine, FileStatus, Job, JobOutcome, KbFile, NoProgress, Progress, SyncReport, owner_node,
};

/// How workers behave.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Jobs that convert (or embed, or clean up) at once. Each node runs
    /// [`JOB_THREADS_PER_PLACE`] times as many job threads: a thread claims a job only when
    /// one of these places is free, and an ingest job gives its place back once its file is
    /// converted, so more files convert while it waits for its keyword flush — and that
    /// flush, which costs about the same for one document as for eight, takes theirs too.
    pub concurrency: usize,
    /// How long a claim lasts without renewal; a dead worker's job is retaken after it.
    pub lease: Duration,
    /// How often an idle worker looks for work it was not woken for (jobs enqueued by
    /// another process, retries falling due).
    pub idle_poll: Duration,
    /// How often the node looks for collections with chunks that have no vectors and
    /// queues their embedding (a server: folder collections the CLI added or updated, a
    /// data directory never embedded); `None` for a CLI that drains only its own uploads.
    pub embed_sweep: Option<Duration>,
    /// How often the node looks for sources due for a scheduled sync and runs them (one at
    /// a time per node; each source on one node at a time, by its lease); `None`: sources
    /// sync only when asked (a CLI).
    pub source_sync: Option<Duration>,
    /// Told of each scheduled sync this node ran (a server records it in its audit log).
    pub on_source_sync: Option<SourceSyncHook>,
    /// How often the node reads which folder sources sync on change, and watches those
    /// whose folder exists on this machine (`watch.rs`); `None`: no watching (a CLI).
    pub source_watch: Option<Duration>,
}

/// What a node's scheduler calls after each sync it ran: the source's id, and its report or
/// why it failed (its report, kept in the store, says the same). Called on the scheduler's
/// thread, which may block.
#[derive(Clone)]
pub struct SourceSyncHook(pub Arc<SourceSynced>);

/// The function a [`SourceSyncHook`] holds.
pub type SourceSynced = dyn Fn(&str, std::result::Result<&SyncReport, &Error>) + Send + Sync;

impl std::fmt::Debug for SourceSyncHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceSyncHook")
    }
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 2,
            lease: Duration::from_secs(60),
            idle_poll: Duration::from_secs(1),
            embed_sweep: None,
            source_sync: None,
            on_source_sync: None,
            source_watch: None,
        }
    }
}

/// Job threads per conversion place ([`WorkerOptions::concurrency`]). With two threads per
/// node (one per place), every keyword flush covered one or two documents and cost most
/// of an upload's CPU (two index commits, the write lock held throughout: 19 ms of a node's
/// CPU per note on one core); with eight, a flush covers up to eight and a note costs 12 ms
/// (bench/nodes, ingestion, 1 node pinned: 1,893 → 2,947 notes per minute).
pub const JOB_THREADS_PER_PLACE: usize = 4;

/// How often a server's node looks for sources due for a sync (`WorkerOptions::source_sync`).
pub const SOURCE_SYNC_POLL: Duration = Duration::from_secs(15);

/// This machine's name, as node names record it (`local` where the kernel does not say).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && !h.contains(':'))
        .unwrap_or_else(|| "local".into())
}

/// This process as a node of the queue: `host:pid:start`, unique per process start. Its
/// workers' lease owners are `node:index`.
fn node_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}:{}:{nanos:x}", host_name(), std::process::id())
}

/// How often a node running workers tells the store it is alive.
pub const NODE_HEARTBEAT: Duration = Duration::from_secs(5);
/// A node silent for this long is dead: any other node releases its job leases, so its
/// jobs are taken over without waiting for the leases to lapse.
pub const NODE_DEAD_AFTER: Duration = Duration::from_secs(15);

/// Registers this node in the data directory (`nodes/<name>.lock`, locked for the process's
/// life) and finds the nodes of the directory whose lock nobody holds: processes that died.
/// Their lock files go. Portable (file locks), and exact for the processes of one machine;
/// other machines' nodes are judged by their heartbeats.
fn local_nodes(engine: &Engine, node: &str) -> Result<(std::fs::File, Vec<String>)> {
    let dir = engine.data_dir().join("nodes");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let file_name = |n: &str| format!("{}.lock", n.replace('/', "_"));
    let own_path = dir.join(file_name(node));
    let own = std::fs::File::create(&own_path).map_err(|e| Error::io(&own_path, e))?;
    own.lock().map_err(|e| Error::io(&own_path, e))?;
    let mut dead = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".lock"))
            .map(str::to_owned)
        else {
            continue;
        };
        if path == own_path {
            continue;
        }
        let Ok(file) = std::fs::File::options().write(true).open(&path) else {
            continue;
        };
        // Lockable: its process is gone (the kernel drops a dead process's locks).
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(&path);
            dead.push(name);
        }
    }
    Ok((own, dead))
}

/// Releases the leases of owners whose node stopped sending heartbeats (killed, frozen,
/// cut off); returns how many jobs were released.
fn release_dead_nodes(engine: &Engine) -> Result<u64> {
    let live = engine.live_nodes(NODE_DEAD_AFTER)?;
    let dead = dead_owners(engine.job_lease_owners()?, &live);
    if dead.is_empty() {
        return Ok(0);
    }
    engine.expire_job_leases(&dead)
}

/// The lease owners (`node:index`) whose node is not among `live`.
fn dead_owners(owners: Vec<String>, live: &[String]) -> Vec<String> {
    owners
        .into_iter()
        .filter(|owner| {
            let node = owner_node(owner);
            !live.iter().any(|l| l == node)
        })
        .collect()
}

struct Shared {
    engine: Arc<Engine>,
    opts: WorkerOptions,
    /// Places free for a job to convert in (`WorkerOptions::concurrency` in all).
    places: Places,
    stop: AtomicBool,
    /// Bumped by [`Workers::wake`]; idle workers wait on it.
    signal: Mutex<u64>,
    cond: Condvar,
}

/// A counting semaphore: the conversion places of a node's job threads.
struct Places {
    free: Mutex<usize>,
    cond: Condvar,
}

impl Places {
    /// Waits for a free place; `None` once `stop` is set.
    fn take<'a>(&'a self, stop: &AtomicBool) -> Option<Place<'a>> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            if *free > 0 {
                *free -= 1;
                return Some(Place {
                    places: self,
                    held: std::cell::Cell::new(true),
                });
            }
            // Bounded so a stop is seen without a wake-up of its own.
            free = self
                .cond
                .wait_timeout(free, Duration::from_millis(200))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A place taken from [`Places`]: given back by [`Place::give_back`] (once; later calls
/// do nothing) or when dropped.
struct Place<'a> {
    places: &'a Places,
    held: std::cell::Cell<bool>,
}

impl Place<'_> {
    fn give_back(&self) {
        if self.held.replace(false) {
            *self.places.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            self.places.cond.notify_one();
        }
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl Shared {
    fn wait(&self, timeout: Duration) {
        let guard = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        let seen = *guard;
        let _ = self
            .cond
            .wait_timeout_while(guard, timeout, |s| {
                *s == seen && !self.stop.load(Ordering::Relaxed)
            })
            .unwrap_or_else(|p| p.into_inner());
    }

    /// Sleeps up to `timeout`, waking early only to stop.
    fn wait_stop(&self, timeout: Duration) {
        let guard = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .cond
            .wait_timeout_while(guard, timeout, |_| !self.stop.load(Ordering::Relaxed))
            .unwrap_or_else(|p| p.into_inner());
    }

    fn notify(&self) {
        let mut s = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        *s = s.wrapping_add(1);
        self.cond.notify_all();
        drop(s);
        if self.stop.load(Ordering::Relaxed) {
            // Threads waiting for a place see it at once.
            self.places.cond.notify_all();
        }
    }
}

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
        let shared = Arc::new(Shared {
            engine,
            places: Places {
                free: Mutex::new(opts.concurrency.max(1)),
                cond: Condvar::new(),
            },
            opts,
            stop: AtomicBool::new(false),
            signal: Mutex::new(0),
            cond: Condvar::new(),
        });
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

/// How often a server's node looks for chunks without vectors (`WorkerOptions::embed_sweep`).
pub const EMBED_SWEEP: Duration = Duration::from_secs(30);

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
        let outcome = engine.run_job(&job, progress, converted);
        *done.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        done.1.notify_all();
        outcome
    })?;
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

/// Runs workers in this process until every document in `waiting` (by row) is `ready` or
/// `failed` (or deleted), reporting each as it finishes. Documents another process (a
/// server) processes count as well: claims are shared through the store.
pub fn drain(
    engine: &Arc<Engine>,
    waiting: &[KbFile],
    opts: WorkerOptions,
    progress: &dyn Progress,
) -> Result<Vec<KbFile>> {
    progress.begin("Processing", waiting.len() as u64);
    let mut finished_before = 0;
    let (result, workers) = wait_loop(engine, waiting, opts, progress, false, &mut |r| {
        progress.advance((r.finished - finished_before) as u64);
        finished_before = r.finished;
    });
    progress.end();
    if let Some(workers) = workers {
        workers.shutdown(Duration::from_secs(600));
    }
    result
}

/// Whether another process of this data directory runs workers now — a `quarry serve` on
/// this machine, or another CLI processing its uploads: the lock of its node in `nodes/` is
/// held (see `local_nodes`). Call it before this process starts workers of its own (their
/// lock would count too).
pub fn workers_running_elsewhere(engine: &Engine) -> Result<bool> {
    let dir = engine.data_dir().join("nodes");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("lock") {
            continue;
        }
        let Ok(file) = std::fs::File::options().write(true).open(&path) else {
            continue;
        };
        // Lockable: its process is gone (the lock goes with `file`). Held: a live node.
        if let Err(std::fs::TryLockError::WouldBlock) = file.try_lock() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Where the documents [`wait_for`] waits for stand, each time it looks.
#[derive(Debug)]
pub struct WaitReport<'a> {
    /// The documents still being processed, as just read.
    pub pending: &'a [KbFile],
    /// How many are finished (`ready` or `failed`) or were deleted.
    pub finished: usize,
    /// Whether this process runs workers; `false` while another process of the data
    /// directory does the work ([`workers_running_elsewhere`]).
    pub working_here: bool,
}

/// How often a waiting CLI looks again whether another process still does the work.
const ELSEWHERE_CHECK: Duration = Duration::from_secs(1);

/// Waits until every document in `waiting` (by row) is `ready` or `failed` (or deleted),
/// as [`drain`] does, but leaves the work to another process of this data directory that
/// runs workers (a `quarry serve` on this machine, [`workers_running_elsewhere`]): while one
/// does, this process runs none — it would convert and embed on the same cores beside it
/// (issue 65 item 11) — and it starts its own only once none does (none ran, or it
/// stopped). `report` is called after each look (every 100 ms); failures are told to
/// `progress` as warnings.
pub fn wait_for(
    engine: &Arc<Engine>,
    waiting: &[KbFile],
    opts: WorkerOptions,
    progress: &dyn Progress,
    report: &mut dyn FnMut(&WaitReport<'_>),
) -> Result<Vec<KbFile>> {
    let (result, workers) = wait_loop(engine, waiting, opts, progress, true, report);
    if let Some(workers) = workers {
        workers.shutdown(Duration::from_secs(600));
    }
    result
}

/// [`drain`] and [`wait_for`]: with `leave_to_others`, workers start here only while no
/// other process of the data directory runs any. Returns the workers it started, for the
/// caller to stop once it has said the wait is over.
fn wait_loop(
    engine: &Arc<Engine>,
    waiting: &[KbFile],
    opts: WorkerOptions,
    progress: &dyn Progress,
    leave_to_others: bool,
    report: &mut dyn FnMut(&WaitReport<'_>),
) -> (Result<Vec<KbFile>>, Option<Workers>) {
    let mut workers = None;
    let mut checked: Option<Instant> = None;
    let mut pending: Vec<KbFile> = waiting.to_vec();
    let mut finished = Vec::with_capacity(waiting.len());
    let mut gone = 0;
    let result = loop {
        if workers.is_none() && checked.is_none_or(|t| t.elapsed() >= ELSEWHERE_CHECK) {
            checked = Some(Instant::now());
            let elsewhere = if leave_to_others {
                match workers_running_elsewhere(engine) {
                    Ok(e) => e,
                    Err(e) => break Err(e),
                }
            } else {
                false
            };
            if !elsewhere {
                match Workers::start(engine.clone(), opts.clone()) {
                    Ok(w) => workers = Some(w),
                    Err(e) => break Err(e),
                }
            }
        }
        // One read for every file still waited for: a read each, 400 round trips every
        // 100 ms on PostgreSQL, took CPU from the workers (bench/backends, uploads alone).
        let rows: Vec<i64> = pending.iter().map(|f| f.row_id).collect();
        let now = match engine.kb_documents_by_rows(&rows) {
            Ok(files) => files,
            Err(e) => break Err(e),
        };
        let mut now: std::collections::HashMap<i64, KbFile> =
            now.into_iter().map(|f| (f.row_id, f)).collect();
        let mut still = Vec::with_capacity(pending.len());
        for f in pending.drain(..) {
            match now.remove(&f.row_id) {
                // Deleted meanwhile: nothing more to wait for.
                None => gone += 1,
                Some(n) if !n.status.is_active() => {
                    if n.status == FileStatus::Failed {
                        progress.warn(&format!(
                            "{}: failed: {}",
                            n.display_path(),
                            n.error.as_deref().unwrap_or("unknown reason")
                        ));
                    }
                    finished.push(n);
                }
                Some(n) => still.push(n),
            }
        }
        pending = still;
        report(&WaitReport {
            pending: &pending,
            finished: finished.len() + gone,
            working_here: workers.is_some(),
        });
        if pending.is_empty() {
            break Ok(finished);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (result, workers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_of_nodes_without_a_recent_heartbeat_are_dead() {
        let live = vec!["host:12:ab".to_owned(), "other:7:cd".to_owned()];
        let owners = vec![
            "host:12:ab:0".to_owned(), // a live node's worker
            "other:7:cd:3".to_owned(), // another live node's
            "host:12:ef:0".to_owned(), // the same pid, another start: a restarted process
            "gone:9:aa:1".to_owned(),  // a node that stopped
        ];
        assert_eq!(
            dead_owners(owners, &live),
            ["host:12:ef:0".to_owned(), "gone:9:aa:1".to_owned()]
        );
        let node = node_name();
        assert_eq!(node.split(':').count(), 3, "{node}");
    }

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
        engine.add_uploads("kb", uploads).unwrap();
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
