//! What this process knows of its own node's progress in the store's change feed, shared by
//! every engine handle on one index (`node.rs` works with it).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64};

use quarry_store::FeedPosition;

/// What a node knows of its own progress, shared by every handle on one index.
#[derive(Default)]
pub(crate) struct NodeState {
    /// The node's name, read once (`node.id`).
    pub(crate) id: std::sync::OnceLock<String>,
    /// The store's `database.id` (given when the database was created), read once: every
    /// index session stamps its commits with it.
    pub(crate) database: std::sync::OnceLock<String>,
    /// Whether this process has checked its index's position against the store (resumed
    /// or rebuilt); later sessions start from the index's payload without asking again.
    pub(crate) resumed: AtomicBool,
    /// Every write committed before a `feed_horizon()` at or below this is searchable here.
    pub(crate) applied_horizon: AtomicI64,
    /// When the last catch-up found the node at the store's horizon (ms since the epoch).
    pub(crate) caught_up_at_ms: AtomicI64,
    /// The position last committed and acknowledged.
    pub(crate) position: Mutex<Option<FeedPosition>>,
    /// Documents the self-check ([`Engine::check_indexes`]) found wrong and re-indexed.
    pub(crate) repaired: std::sync::atomic::AtomicU64,
}
