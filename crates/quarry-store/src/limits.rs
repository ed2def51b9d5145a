//! Rate-limit counters every node shares ([`LimitStore`]): the budget of a key per fixed
//! window, and counts of events such as failed authentications.

use quarry_core::Result;

/// Counters for rate limits shared by every node: one row per key and fixed window.
pub trait LimitStore: Send + Sync {
    /// Takes up to `amount` units of `key`'s budget for the window starting at
    /// `window_start` (Unix milliseconds), never past `limit` in all; returns how many were
    /// granted (0 when the window's budget is spent). Atomic across nodes.
    fn take_budget(&self, key: &str, window_start: i64, amount: i64, limit: i64) -> Result<i64>;
    /// Counts one more event (a failed authentication) for `key` in the window; returns the
    /// window's count so far.
    fn count_event(&self, key: &str, window_start: i64) -> Result<i64>;
    /// Removes windows that started before `before`; returns how many went.
    fn prune_limits(&self, before: i64) -> Result<u64>;
}
