//! The feed follower: keeps this node's keyword index in step with the store when the
//! writes come from elsewhere (another node, a CLI beside the server).
//!
//! It waits on the store's feed notifications (PostgreSQL `LISTEN`), polling as a fallback
//! when there are none or the listening connection dropped, and applies what the feed
//! holds ([`Engine::follow_feed`]). Every [`HEARTBEAT`] it refreshes this node's place in
//! the store, which also forgets nodes gone for [`quarry_engine::NODE_IDLE_FORGET`]; every
//! [`INDEX_CHECK`] (by default) it checks the node's indexes against the store and repairs
//! what differs ([`Engine::check_indexes`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use quarry_core::{Error, Result};
use quarry_engine::Engine;

/// How often the follower looks without being woken (and how long a lost listener waits
/// before it is made again).
pub const POLL: Duration = Duration::from_secs(1);
/// How often the node tells the store it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// How often, by default, the node checks its indexes against the store and repairs what
/// differs ([`Engine::check_indexes`]); the first check comes after one such interval or a
/// minute, whichever is sooner.
pub const INDEX_CHECK: Duration = Duration::from_secs(10 * 60);

/// How long [`Follower::shutdown`] waits for the thread's current round. A round can wait
/// for the feed's horizon (a write transaction still open somewhere in the cluster); the
/// index needs no goodbye — every commit is whole and carries its own position — so a
/// process that is exiting does not wait for it.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// The running follower thread; stops when dropped.
pub struct Follower {
    stop: Arc<AtomicBool>,
    /// Disconnected when the thread ends (it holds the sender).
    ended: Receiver<()>,
}

impl Follower {
    /// Starts following `engine`'s store, checking the indexes against it every
    /// `index_check` (`None`: never).
    pub fn start(engine: Arc<Engine>, index_check: Option<Duration>) -> Result<Follower> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (alive, ended) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("quarry-follower".into())
            .spawn(move || {
                let _alive = alive;
                follow(&engine, &flag, index_check)
            })
            .map_err(|e| Error::Storage(format!("cannot start the feed follower: {e}")))?;
        Ok(Follower { stop, ended })
    }

    /// Stops the follower after its current round, waiting for it up to [`SHUTDOWN_WAIT`].
    pub fn shutdown(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.ended.recv_timeout(SHUTDOWN_WAIT);
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn follow(engine: &Engine, stop: &AtomicBool, index_check: Option<Duration>) {
    let mut changes = engine.feed_waiter();
    let mut last_heartbeat: Option<Instant> = None;
    let mut failures = 0u32;
    let mut next_check =
        index_check.map(|every| Instant::now() + every.min(Duration::from_secs(60)));
    while !stop.load(Ordering::Relaxed) {
        if let (Some(at), Some(every)) = (next_check, index_check)
            && Instant::now() >= at
        {
            match engine.check_indexes() {
                Ok(c) if c.repaired > 0 => tracing::warn!(
                    repaired = c.repaired,
                    documents = c.documents,
                    chunks = c.chunks,
                    "index self-check: re-indexed documents whose entries differed from the store"
                ),
                Ok(c) => tracing::debug!(
                    documents = c.documents,
                    chunks = c.chunks,
                    "index self-check: indexes match the store"
                ),
                Err(e) => tracing::warn!(error = %e, "index self-check failed; next time again"),
            }
            next_check = Some(Instant::now() + every);
        }
        if last_heartbeat.is_none_or(|t| t.elapsed() >= HEARTBEAT) {
            match engine.feed_heartbeat() {
                Ok(gone) if !gone.is_empty() => {
                    tracing::info!(consumers = ?gone, "forgot idle nodes; the feed no longer waits for them")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "feed heartbeat failed"),
            }
            last_heartbeat = Some(Instant::now());
        }
        match engine.follow_feed() {
            Ok(()) => failures = 0,
            Err(e) => {
                failures = failures.saturating_add(1);
                tracing::warn!(error = %e, "cannot follow the store's changes; retrying");
                std::thread::sleep(POLL * failures.min(10));
                continue;
            }
        }
        if let Err(e) = engine.wait_for_feed(&mut changes, POLL) {
            tracing::warn!(error = %e, "lost feed notifications; polling until they are back");
        }
    }
}
