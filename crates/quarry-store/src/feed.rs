//! The document change feed that every derived index follows ([`FeedStore`]), and the
//! wake-ups of followers when another process changed something.

use quarry_core::Result;

use crate::documents::IndexWork;

/// Where a consumer of the document change feed stands: every entry up to `(txid, seq)`
/// absorbed, and, while it rebuilds from a snapshot, the last document id of the snapshot
/// read so far.
///
/// Entries are read in `(txid, seq)` order: the writing transaction's id, then the entry's
/// number. A store whose writers commit in `seq` order (one writer at a time: SQLite)
/// leaves `txid` at 0. One where several transactions write at once (PostgreSQL) hands out
/// only entries of transactions older than every one still running, so a transaction that
/// took its `seq` early and commits late is never skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeedPosition {
    /// The writing transaction of the last entry absorbed (0 where the store has one writer).
    #[serde(default)]
    pub txid: i64,
    /// The last feed entry absorbed.
    pub seq: i64,
    /// `Some(id)` while rebuilding: documents with ids above it are still to read.
    pub rebuilding_after: Option<i64>,
}

/// A batch of the document change feed for one consumer ([`FeedStore::feed_read`]).
#[derive(Debug, Default)]
pub struct FeedBatch {
    /// What to apply to the derived index.
    pub work: IndexWork,
    /// The consumer's position once `work` is absorbed (pass it to [`FeedStore::feed_ack`]).
    pub position: FeedPosition,
    /// `Some(h)` when this batch reached the end of what the feed can hand out: once it is
    /// absorbed, every write committed before a [`FeedStore::feed_horizon`] call that returned
    /// at most `h` is in the derived index (read-your-writes across nodes).
    pub horizon: Option<i64>,
}

/// What a [`ChangeListener`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The document change feed grew (a node's keyword index has work).
    Feed,
    /// An owner's hub changed (registrations, toggles, deletions).
    Hub,
}

/// Wakes a process when another one (another node) changed something it follows
/// ([`ChangeNotifier::listener`]).
pub trait ChangeListener: Send {
    /// Waits until another writer may have changed what this listener follows, or
    /// `timeout` passes; `true` when woken by a change. An error means the wake-ups are lost
    /// (a dropped connection): the caller polls and asks the store for a new listener.
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool>;
}

/// A listener that is never woken: the caller polls at its timeout (stores without
/// notifications).
pub struct PollingListener;

impl ChangeListener for PollingListener {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool> {
        std::thread::sleep(timeout);
        Ok(false)
    }
}

/// A follower's wait for changes on one [`Channel`]: through a listener while it works,
/// polling while there is none, and a new listener asked for after one was lost (a dropped
/// database connection). Both followers — the feed's and the hub's — wait through one.
pub struct ChangeWaiter {
    channel: Channel,
    listener: Option<Box<dyn ChangeListener>>,
}

impl ChangeWaiter {
    /// A waiter on `channel`; its listener is made on the first wait.
    pub fn new(channel: Channel) -> ChangeWaiter {
        ChangeWaiter {
            channel,
            listener: None,
        }
    }

    /// Waits up to `poll`: `Ok(true)` when woken by a change, `Ok(false)` when the time
    /// passed. An error says the listener was lost (it is dropped; the next wait polls and
    /// asks `store` for a new one) — the caller's to log.
    pub fn wait(&mut self, store: &dyn ChangeNotifier, poll: std::time::Duration) -> Result<bool> {
        if self.listener.is_none() {
            self.listener = store.listener(self.channel).ok();
        }
        let Some(listener) = self.listener.as_mut() else {
            std::thread::sleep(poll);
            return Ok(false);
        };
        let woken = listener.wait(poll);
        if woken.is_err() {
            self.listener = None;
        }
        woken
    }
}

/// Where a follower gets its wake-ups: the part of a store both the document feed's follower
/// and the hub's need ([`FeedStore`] and [`crate::HubStore`] build on it).
pub trait ChangeNotifier: Send + Sync {
    /// Something to wait on for changes on `channel` made by other processes. Stores
    /// without notifications return a [`PollingListener`].
    fn listener(&self, channel: Channel) -> Result<Box<dyn ChangeListener>> {
        let _ = channel;
        Ok(Box::new(PollingListener))
    }
}

/// The document change feed: every write or removal of a document appends an entry in
/// the transaction that makes it, whatever the write path. Each derived index (a
/// *consumer*, e.g. one node's keyword index) reads the feed from its own position and
/// acknowledges what it has durably absorbed, so every consumer sees every change; an
/// entry goes once every consumer is past it. Also the wake-ups of followers
/// ([`ChangeNotifier::listener`]) when another process changed something.
pub trait FeedStore: ChangeNotifier {
    /// Where `consumer` stands (what it last acknowledged). A consumer seen for the first
    /// time is registered at the feed's end, to read a snapshot of every document first.
    fn feed_position(&self, consumer: &str) -> Result<FeedPosition>;
    /// Up to `limit` documents after `from`, resolved against the store's current state:
    /// while `from` is rebuilding, the next documents of the snapshot (by id); then each
    /// document written or removed after `from.seq` (a removed one as a delete). Reading
    /// moves nothing: the caller keeps the returned position and passes the last one it has
    /// durably absorbed to [`FeedStore::feed_ack`].
    fn feed_read(&self, from: FeedPosition, limit: usize) -> Result<FeedBatch>;
    /// `consumer`'s index has durably absorbed everything up to `position` (from a
    /// [`FeedBatch`]); entries every consumer is past are dropped.
    fn feed_ack(&self, consumer: &str, position: FeedPosition) -> Result<()>;
    /// `consumer` reads every document again (its index was lost, or was built by another
    /// analyzer or chunker) and then goes on from where it stood; `meta`, when given, is
    /// recorded as `meta[key] = value` in the same transaction.
    fn feed_rebuild(&self, consumer: &str, meta: Option<(&str, &str)>) -> Result<()>;
    /// Forgets a consumer that will never read again, so the feed is not kept for it.
    fn feed_forget(&self, consumer: &str) -> Result<()>;
    /// Registers (or moves) `consumer` at `position`, which its index recorded when it last
    /// committed, and says whether the feed still holds every entry after it. `false`: the
    /// entries were dropped (the consumer was forgotten as idle meanwhile, or the index is
    /// older than the feed remembers), so the index must be rebuilt ([`FeedStore::feed_rebuild`]).
    fn feed_resume(&self, consumer: &str, position: FeedPosition) -> Result<bool>;
    /// Forgets the consumers that have not acknowledged anything for `idle_ms` (nodes that
    /// stopped), so the feed is trimmed below the slowest *live* one; returns their names.
    /// A forgotten consumer that comes back rebuilds ([`FeedStore::feed_resume`] says `false`).
    fn feed_forget_idle(&self, idle_ms: i64) -> Result<Vec<String>>;
    /// How many feed entries lie after `from` (a node's lag, in changes).
    fn feed_backlog(&self, from: FeedPosition) -> Result<i64>;
    /// A position every write committed before this call lies below: a consumer that has
    /// absorbed a batch whose `horizon` is at least this value has absorbed those writes.
    /// Writers hand it to readers (the `X-Quarry-Txid` header) for read-your-writes.
    fn feed_horizon(&self) -> Result<i64>;
}
