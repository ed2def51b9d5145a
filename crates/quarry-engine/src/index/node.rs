//! This process's derived indexes as one *node* of a deployment: a name kept in the data
//! directory, where its keyword index stands in the store's change feed, and how far it has
//! caught up (read-your-writes across nodes, `/health`).
//!
//! Several nodes over one database each follow the feed into their own keyword index; the
//! index's position lives in its own commits (see `indexing.rs`), the store keeps a copy
//! per consumer only so the feed is trimmed below the slowest live node.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use quarry_core::{Error, Result};
use quarry_store::FeedPosition;
use serde::Serialize;

use crate::engine::Engine;
use crate::progress::{NoProgress, Progress};

/// A consumer that acknowledged nothing for this long is a node that stopped: it is
/// forgotten, so the feed no longer waits for it (it rebuilds if it comes back).
pub const NODE_IDLE_FORGET: Duration = Duration::from_secs(15 * 60);
/// The node's name: `node.id` in the data directory, made on first use. A wiped data
/// directory is a new node (and rebuilds); a copied one must not run beside its original.
pub(crate) fn node_id(dir: &Path) -> Result<String> {
    let path = dir.join("node.id");
    match std::fs::read_to_string(&path) {
        Ok(id) if is_node_id(id.trim()) => return Ok(id.trim().to_owned()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&path, e)),
    }
    let seed = format!(
        "{}:{}:{:?}",
        std::process::id(),
        quarry_core::now_millis(),
        Instant::now()
    );
    let id = quarry_core::sha256_hex(seed.as_bytes())[..16].to_owned();
    // Written atomically: two processes racing on a new directory agree on the survivor.
    let tmp = dir.join(format!("node.id.{}", std::process::id()));
    std::fs::write(&tmp, &id).map_err(|e| Error::io(&tmp, e))?;
    if std::fs::hard_link(&tmp, &path).is_err() && !path.exists() {
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    }
    let _ = std::fs::remove_file(&tmp);
    let id = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    Ok(id.trim().to_owned())
}

fn is_node_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Where a node stands (`/health`, `quarry status`).
#[derive(Debug, Clone, Serialize)]
pub struct NodeFeedState {
    /// The node's name (`node.id` in its data directory).
    pub node: String,
    /// Feed entries written but not yet in this node's keyword index.
    pub behind_changes: i64,
    /// Seconds since the node was last seen caught up (0 when it is).
    pub behind_seconds: f64,
    /// Whether every write committed so far is searchable on this node.
    pub caught_up: bool,
    /// Whether the node should take traffic: its index is built (not reading a snapshot)
    /// and it was at the feed's end within [`READY_LAG`] (under a steady stream of writes a
    /// node is rarely at zero lag, yet serves current answers).
    pub ready: bool,
    /// Documents this process's self-checks found wrong in its indexes and re-indexed.
    pub repaired_documents: u64,
}

/// How far behind (in time) a node may be and still count as ready.
pub const READY_LAG: Duration = Duration::from_secs(5);

impl Engine {
    pub(crate) fn node_id(&self) -> Result<String> {
        if let Some(id) = self.node.id.get() {
            return Ok(id.clone());
        }
        let id = node_id(&self.dir)?;
        Ok(self.node.id.get_or_init(|| id).clone())
    }

    /// The feed consumer this node's keyword and passage indexes are.
    pub(crate) fn keyword_consumer(&self) -> Result<String> {
        Ok(format!("keyword:{}", self.node_id()?))
    }

    /// A position every write committed so far lies below: what a write hands its caller
    /// (`X-Quarry-Txid`) so a read on any node can wait for it ([`Engine::wait_for_horizon`]).
    pub fn feed_horizon(&self) -> Result<i64> {
        self.store().feed_horizon()
    }

    /// Applies what the feed holds for this node's keyword index: one round of following.
    /// Waits (boundedly) for transactions older than the store's current horizon.
    pub fn follow_feed(&self) -> Result<()> {
        let guard = self.lock_writes(&NoProgress)?;
        self.flush_index(&guard)
    }

    /// Builds this data directory's keyword and passage indexes from the store when it has
    /// none (or only ones an older version wrote with another schema) while the store holds
    /// documents — a fresh directory over a shared database, where
    /// a search would otherwise answer "No results found" as if the data were gone (issue
    /// 41, item 10). `building(n)` is told before `n` documents are indexed; `true` when it
    /// built them.
    pub fn ensure_indexes(&self, building: impl FnOnce(usize)) -> Result<bool> {
        // One written by an older version with another schema cannot be read: it is rebuilt.
        let usable = |index: Result<Option<_>>| match index {
            Ok(Some(_)) => Ok(true),
            Ok(None) | Err(Error::Index(_)) => Ok(false),
            Err(e) => Err(e),
        };
        if usable(self.fts())? && usable(self.passage_index())? {
            return Ok(false);
        }
        let documents = self.store().index_census()?.documents.len();
        if documents == 0 {
            return Ok(false);
        }
        building(documents);
        self.follow_feed()?;
        Ok(true)
    }

    /// Waits up to `timeout` until every write committed before `token` was taken (from
    /// [`Engine::feed_horizon`], on any node) is searchable here, catching up meanwhile;
    /// `false` when the time ran out.
    pub fn wait_for_horizon(&self, token: i64, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.applied(token) {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            self.index_through(token, &NoProgress)?;
            if !self.applied(token) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Whether every write committed before `token` (a [`quarry_store::FeedStore::feed_horizon`])
    /// is searchable on this node.
    pub(crate) fn applied(&self, token: i64) -> bool {
        self.node.applied_horizon.load(Ordering::Acquire) >= token
    }

    /// Makes every write committed before `token` searchable on this node: a flush under
    /// the write lock, unless one that finished while this waited for the lock took them.
    /// The ingest jobs and read-your-writes requests queued behind one flush then run no
    /// session of their own (on PostgreSQL one with nothing to index still costs a dozen
    /// round trips, all under the lock; ingestion ran one per document).
    pub(crate) fn index_through(&self, token: i64, progress: &dyn Progress) -> Result<()> {
        let guard = self.lock_writes(progress)?;
        if !self.applied(token) {
            self.flush_index(&guard)?;
        }
        Ok(())
    }

    /// A waiter on the store's feed, for [`Engine::wait_for_feed`].
    pub fn feed_waiter(&self) -> quarry_store::ChangeWaiter {
        quarry_store::ChangeWaiter::new(quarry_store::Channel::Feed)
    }

    /// Waits up to `poll` for the feed to grow ([`quarry_store::ChangeWaiter::wait`]).
    pub fn wait_for_feed(
        &self,
        waiter: &mut quarry_store::ChangeWaiter,
        poll: Duration,
    ) -> Result<bool> {
        waiter.wait(self.store(), poll)
    }

    /// Refreshes this node's place in the store (so the feed keeps its entries) and forgets
    /// nodes idle for [`NODE_IDLE_FORGET`]; returns the nodes forgotten.
    pub fn feed_heartbeat(&self) -> Result<Vec<String>> {
        let position = *self.node.position.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(position) = position {
            match self.store().feed_ack(&self.keyword_consumer()?, position) {
                Ok(()) => {}
                // Forgotten as idle (a long pause): the next catch-up resumes or rebuilds.
                Err(Error::NotFound(_)) => self.node.resumed.store(false, Ordering::Release),
                Err(e) => return Err(e),
            }
        }
        let idle = i64::try_from(NODE_IDLE_FORGET.as_millis()).unwrap_or(i64::MAX);
        self.store().feed_forget_idle(idle)
    }

    /// Where this node stands in the feed.
    pub fn node_feed_state(&self) -> Result<NodeFeedState> {
        let position = *self.node.position.lock().unwrap_or_else(|p| p.into_inner());
        let behind_changes = match position {
            Some(p) if p.rebuilding_after.is_none() => self.store().feed_backlog(p)?,
            // Never indexed, or still reading a snapshot: every document is behind.
            _ => self.store().feed_backlog(FeedPosition::default())?.max(1),
        };
        let caught_up = position.is_some() && behind_changes == 0;
        let since = self.node.caught_up_at_ms.load(Ordering::Acquire);
        let behind_seconds = if caught_up || since == 0 {
            0.0
        } else {
            (quarry_core::now_millis() - since).max(0) as f64 / 1000.0
        };
        let built = position.is_some_and(|p| p.rebuilding_after.is_none());
        Ok(NodeFeedState {
            node: self.node_id()?,
            behind_changes,
            behind_seconds,
            caught_up,
            ready: built && (caught_up || behind_seconds <= READY_LAG.as_secs_f64()),
            repaired_documents: self.node.repaired.load(Ordering::Relaxed),
        })
    }
}

/// The payload each keyword-index commit carries: what built the index and how far into
/// the feed it is. An index whose stamp differs from this process's is rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct IndexPayload {
    /// `meta['database.id']` of the store it follows.
    pub(crate) database: String,
    /// The analyzer's version.
    pub(crate) analyzer: String,
    /// The chunker's and passage layout's version.
    pub(crate) passages: String,
    /// Everything up to here is in the index.
    pub(crate) position: FeedPosition,
}

/// The earlier of two positions (the one an index that committed both must resume from).
pub(crate) fn earlier(a: FeedPosition, b: FeedPosition) -> FeedPosition {
    let key = |p: FeedPosition| {
        (
            p.txid,
            p.seq,
            p.rebuilding_after.is_none(),
            p.rebuilding_after,
        )
    };
    if key(a) <= key(b) { a } else { b }
}
