//! A debug-build guard against store calls on an async runtime's worker threads.
//!
//! A store call blocks (SQLite waits on the file lock; a network database will wait on the
//! wire), so async code must hand it to a blocking thread — in the server, through its one
//! runner. The guard makes a forgotten hand-off fail loudly in tests: a thread that runs async
//! tasks calls [`mark_async_thread`] (the server's router tests do, for the runtime's threads
//! and the test's own), the runner wraps each job in [`allow_blocking`], and every store
//! method checks the two in debug builds. It is a pair of thread-local flags rather than a
//! question to Tokio, because Tokio cannot tell a worker thread from a blocking-pool thread
//! (both are "inside a runtime"), and this keeps Tokio out of the store. Release builds check
//! nothing.

use std::cell::Cell;

thread_local! {
    static ASYNC_THREAD: Cell<bool> = const { Cell::new(false) };
    static ALLOWED: Cell<u32> = const { Cell::new(0) };
}

/// Marks the current thread as one that runs async tasks: store calls on it panic in debug
/// builds unless made inside [`allow_blocking`]. For a runtime's `on_thread_start`.
pub fn mark_async_thread() {
    ASYNC_THREAD.with(|f| f.set(true));
}

/// Undoes [`mark_async_thread`] (a test's own thread, after its async part).
pub fn unmark_async_thread() {
    ASYNC_THREAD.with(|f| f.set(false));
}

/// Runs `f` with store calls allowed on this thread: the blocking runner's jobs.
pub fn allow_blocking<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ALLOWED.with(|a| a.set(a.get().saturating_sub(1)));
        }
    }
    ALLOWED.with(|a| a.set(a.get() + 1));
    let _reset = Reset;
    f()
}

/// Whether a store call may run on this thread now.
pub fn blocking_allowed() -> bool {
    !ASYNC_THREAD.with(Cell::get) || ALLOWED.with(Cell::get) > 0
}

/// Called by every store method of every backend (the SQLite store calls it from its
/// connection accessor): in debug builds, panics on an async thread outside the runner.
#[track_caller]
pub fn check() {
    debug_assert!(
        blocking_allowed(),
        "a store method ran on an async runtime thread: hand it to the blocking runner \
         (quarry-server's http::run_blocking)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_threads_allow_store_calls_only_inside_allow_blocking() {
        std::thread::spawn(|| {
            assert!(blocking_allowed());
            mark_async_thread();
            assert!(!blocking_allowed());
            assert!(allow_blocking(blocking_allowed));
            assert!(!blocking_allowed());
            unmark_async_thread();
            assert!(blocking_allowed());
        })
        .join()
        .unwrap();
    }
}
