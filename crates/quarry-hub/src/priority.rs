//! Work more urgent than starting upstreams ([`PriorityWork`]): the hub's options name it,
//! and the upstreams' start limit narrows while it is under way.

use tokio_util::sync::{CancellationToken, DropGuard};

/// Work more urgent than starting upstreams, under way (the server's model load): while it
/// is, stdio upstreams start one at a time ([`crate::HubOptions::narrow_starts_while`]). It
/// ends with [`PriorityWork::finish`], or when the guard of [`PriorityWork::finish_on_drop`]
/// drops (a panic included).
#[derive(Debug, Clone, Default)]
pub struct PriorityWork(CancellationToken);

impl PriorityWork {
    /// Work under way.
    pub fn new() -> PriorityWork {
        PriorityWork::default()
    }

    /// The work is done: upstreams start as many at once as the hub allows.
    pub fn finish(&self) {
        self.0.cancel();
    }

    /// Finishes the work when the returned guard drops.
    pub fn finish_on_drop(&self) -> FinishOnDrop {
        FinishOnDrop {
            _guard: self.0.clone().drop_guard(),
        }
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.0
    }
}

/// Finishes a [`PriorityWork`] when dropped.
#[must_use = "the work finishes when this guard drops"]
pub struct FinishOnDrop {
    _guard: DropGuard,
}
