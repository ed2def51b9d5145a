//! Folder sources that sync on change (issue 43): a server's node watches every watched
//! folder source whose folder exists on its machine.
//!
//! One thread ([`source_watch_loop`]) reads the store's watched folders every
//! [`SOURCE_WATCH_POLL`] — sources attached, detached, switched to or from watching, or
//! given another mask while the server runs are picked up then, and so is a folder that
//! appears or disappears — and runs one thread per watched folder. That thread starts a
//! [`FolderWatcher`] (the OS's file notifications, debounced) and then:
//!
//! - syncs the whole folder once (a *reconciliation*: changes made while nobody watched),
//!   and again whenever the watcher says events were lost (the kernel's queue overflowed,
//!   a limit on watches, ignore rules at the root changed) or incremental syncs kept
//!   failing;
//! - on each batch of changed paths, syncs only those paths
//!   ([`Engine::sync_source_paths`](quarry_engine::Engine::sync_source_paths)), so the
//!   time from a save to a queued document follows the change, not the folder's size;
//!   the queued documents wake this node's ingest workers at once.
//!
//! Every sync takes the source's lease, as scheduled and asked-for syncs do: when another
//! sync of the source runs (another node watching the same folder, a `quarry source sync`),
//! the changed paths wait and are synced after it. Several nodes may watch one folder (on a
//! disk they share); each syncs what it sees and the second finds nothing left to do.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quarry_core::Error;
use quarry_engine::{SyncReport, WatchedFolder};
use quarry_sources::watch::{FolderWatcher, WatchEvent, WatchOptions};
use quarry_sources::{FileMask, SourceError};

use crate::shared::Shared;

/// How often a server's node reads which folders to watch (`WorkerOptions::source_watch`).
pub const SOURCE_WATCH_POLL: Duration = Duration::from_secs(3);
/// How long changed paths wait while another sync of their source runs.
const BUSY_RETRY: Duration = Duration::from_millis(250);
/// Incremental syncs failing in a row after which the folder is synced in full.
const FAILURES_BEFORE_FULL: u32 = 3;
/// Changed paths waiting beyond which a full sync is cheaper.
const MAX_PENDING: usize = 10_000;
/// The longest wait between two tries to start a watcher that fails.
const WATCH_RETRY_MAX: Duration = Duration::from_secs(300);

/// A watched folder's thread, told to stop by its flag.
struct Watching {
    folder: WatchedFolder,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// Keeps one thread per watched folder that exists on this machine (module docs).
pub(crate) fn source_watch_loop(shared: &Arc<Shared>, owner: &str, every: Duration) {
    let mut watching: HashMap<String, Watching> = HashMap::new();
    while !shared.stop.load(Ordering::Relaxed) {
        match shared.engine.watched_folders() {
            Ok(folders) => {
                let wanted: HashMap<String, WatchedFolder> = folders
                    .into_iter()
                    .filter(|f| f.path.is_dir())
                    .map(|f| (f.id.clone(), f))
                    .collect();
                // Detached, no longer watched, moved to another mask, gone from this
                // machine, or its thread ended (its folder went away): stopped, and started
                // again below where it is still wanted.
                watching.retain(|id, w| {
                    let keep = wanted.get(id) == Some(&w.folder) && !w.thread.is_finished();
                    if !keep {
                        w.stop.store(true, Ordering::Relaxed);
                    }
                    keep
                });
                for (id, folder) in wanted {
                    if watching.contains_key(&id) {
                        continue;
                    }
                    let stop = Arc::new(AtomicBool::new(false));
                    let (s, f, st) = (shared.clone(), folder.clone(), stop.clone());
                    let o = owner.to_owned();
                    match std::thread::Builder::new()
                        .name("quarry-source-watch".into())
                        .spawn(move || watch_folder(&s, &o, &f, &st))
                    {
                        Ok(thread) => {
                            tracing::info!(source = %id, folder = %folder.path.display(), "watching a folder source");
                            watching.insert(
                                id,
                                Watching {
                                    folder,
                                    stop,
                                    thread,
                                },
                            );
                        }
                        Err(e) => {
                            tracing::warn!(source = %id, error = %e, "cannot start a folder watcher")
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the folder sources to watch"),
        }
        shared.wait_stop(every);
    }
    for w in watching.values() {
        w.stop.store(true, Ordering::Relaxed);
    }
}

/// Watches one folder until `stop`, its folder goes away, or its source is detached.
fn watch_folder(shared: &Shared, owner: &str, folder: &WatchedFolder, stop: &AtomicBool) {
    let stopped = || stop.load(Ordering::Relaxed) || shared.stop.load(Ordering::Relaxed);
    let mask = match FileMask::parse(&folder.mask) {
        Ok(m) => m,
        Err(e) => {
            // The source's syncs report the same error.
            tracing::warn!(source = %folder.id, error = %e, "cannot watch a folder source");
            return;
        }
    };
    let (tx, rx) = mpsc::channel();
    let mut wait = Duration::from_secs(1);
    let _watcher = loop {
        if stopped() {
            return;
        }
        let events = tx.clone();
        match FolderWatcher::start(
            &folder.path,
            mask.clone(),
            WatchOptions::default(),
            Box::new(move |e| {
                let _ = events.send(e);
            }),
        ) {
            Ok(w) => break w,
            // Gone: watched again when it is back (the loop above).
            Err(SourceError::NotFound(_)) => return,
            Err(e) => {
                tracing::warn!(source = %folder.id, error = %e, retry_in = ?wait, "cannot watch a folder source");
                sleep_unless(&stopped, wait);
                wait = (wait * 2).min(WATCH_RETRY_MAX);
            }
        }
    };
    // Only the watcher sends now: the channel closes with it.
    drop(tx);
    let mut full: Option<String> = Some("watching started".into());
    let mut pending: BTreeSet<String> = BTreeSet::new();
    let mut not_before: Option<Instant> = None;
    let mut failures = 0u32;
    loop {
        if stopped() {
            return;
        }
        if not_before.is_none_or(|t| Instant::now() >= t) {
            not_before = None;
            if let Some(why) = full.take() {
                if !folder.path.is_dir() {
                    return;
                }
                tracing::info!(source = %folder.id, reason = %why, "syncing a watched folder in full");
                // What is pending is in the full listing (or comes after it, as events).
                pending.clear();
                match shared.engine.sync_scheduled_source(&folder.id, owner) {
                    Ok(Some(report)) => done(shared, &folder.id, Ok(&report), true),
                    // Another sync holds the source: this one runs after it, as its listing
                    // may predate this watch.
                    Ok(None) => {
                        full = Some(why);
                        not_before = Some(Instant::now() + BUSY_RETRY * 8);
                    }
                    Err(e) => done(shared, &folder.id, Err(&e), false),
                }
            } else if !pending.is_empty() {
                let paths: Vec<String> = pending.iter().cloned().collect();
                match shared.engine.sync_source_paths(&folder.id, owner, &paths) {
                    Ok(outcome) => {
                        pending.clear();
                        failures = 0;
                        if let Some(o) = outcome {
                            done(shared, &folder.id, Ok(&o.report), !o.queued.is_empty());
                        }
                    }
                    Err(Error::Conflict(_)) => not_before = Some(Instant::now() + BUSY_RETRY),
                    // Detached, or the folder went away, meanwhile: the loop above starts
                    // a new watch if it is still wanted.
                    Err(Error::NotFound(_)) => return,
                    Err(e) => {
                        done(shared, &folder.id, Err(&e), false);
                        failures += 1;
                        if failures >= FAILURES_BEFORE_FULL {
                            failures = 0;
                            full = Some(format!("syncing the changed paths failed: {e}"));
                        }
                        not_before = Some(Instant::now() + BUSY_RETRY * (1 << failures.min(6)) * 4);
                    }
                }
            }
        }
        let timeout = not_before
            .map_or(Duration::from_secs(1), |t| {
                t.saturating_duration_since(Instant::now())
            })
            .min(Duration::from_secs(1));
        match rx.recv_timeout(timeout) {
            Ok(first) => {
                for event in std::iter::once(first).chain(rx.try_iter()) {
                    match event {
                        WatchEvent::Changed(paths) => pending.extend(paths),
                        WatchEvent::Rescan(why) => full = Some(why),
                    }
                }
                if pending.len() > MAX_PENDING {
                    full = Some(format!("more than {MAX_PENDING} changed paths waiting"));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Tells the node's hook and log of a sync a watcher ran, and wakes the ingest workers when
/// it queued documents.
fn done(shared: &Shared, id: &str, result: std::result::Result<&SyncReport, &Error>, queued: bool) {
    if let Some(hook) = &shared.opts.on_source_sync {
        (hook.0)(id, result);
    }
    match result {
        Ok(report) => {
            let c = &report.counts;
            tracing::info!(
                source = %id,
                added = c.added,
                changed = c.changed,
                renamed = c.renamed,
                deleted = c.deleted,
                skipped = c.skipped,
                "synced a watched folder"
            );
        }
        Err(e) => tracing::warn!(source = %id, error = %e, "a sync of a watched folder failed"),
    }
    if queued {
        shared.notify();
    }
}

/// Sleeps `total`, waking every second to see whether to stop.
fn sleep_unless(stopped: &dyn Fn() -> bool, total: Duration) {
    let end = Instant::now() + total;
    while !stopped() {
        let Some(left) = end.checked_duration_since(Instant::now()) else {
            return;
        };
        std::thread::sleep(left.min(Duration::from_secs(1)));
    }
}
