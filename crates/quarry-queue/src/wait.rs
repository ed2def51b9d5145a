//! Waiting for uploads to be processed: here, or by another process of the data directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry_core::Result;
use quarry_engine::{Engine, FileStatus, KbFile, Progress};

use crate::nodes::workers_running_elsewhere;
use crate::options::WorkerOptions;
use crate::workers::Workers;

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
