//! The CLI's async runtimes (`serve`, `mcp`, `hub`) and how blocking work leaves their async
//! threads. Every thread a runtime starts, and the thread driving `block_on`, is marked for
//! the store's debug-build guard ([`quarry_store::thread_guard`]), so a store call left on an
//! async thread fails the interop suite (a debug binary) instead of stalling a server that
//! talks to PostgreSQL over the network.

use anyhow::{Context, Result};
use quarry_store::thread_guard;

/// A multi-threaded runtime whose threads are marked async. Its blocking-pool threads are
/// marked too (Tokio starts both through one hook): work handed to `spawn_blocking` goes
/// through [`thread_guard::allow_blocking`].
pub(crate) fn build() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_start(thread_guard::mark_async_thread)
        .build()
        .context("cannot start the async runtime")
}

/// `runtime.block_on(fut)` with this thread marked async while it drives `fut`.
pub(crate) fn block_on<F: std::future::Future>(
    runtime: &tokio::runtime::Runtime,
    fut: F,
) -> F::Output {
    struct Unmark;
    impl Drop for Unmark {
        fn drop(&mut self) {
            thread_guard::unmark_async_thread();
        }
    }
    thread_guard::mark_async_thread();
    let _unmark = Unmark;
    runtime.block_on(fut)
}

/// Runs blocking work (store calls) from async code: the thread leaves the scheduler for it
/// (`block_in_place`) and the guard allows it.
pub(crate) fn off_async<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(|| thread_guard::allow_blocking(f))
}
