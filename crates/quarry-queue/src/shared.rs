//! What a node's threads share: the engine, the options, the conversion places and the
//! signal that wakes idle workers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use quarry_engine::Engine;

use crate::options::WorkerOptions;

pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) opts: WorkerOptions,
    /// Places free for a job to convert in (`WorkerOptions::concurrency` in all).
    pub(crate) places: Places,
    pub(crate) stop: AtomicBool,
    /// Bumped by [`Workers::wake`](crate::Workers::wake); idle workers wait on it.
    signal: Mutex<u64>,
    cond: Condvar,
}

/// A counting semaphore: the conversion places of a node's job threads.
pub(crate) struct Places {
    free: Mutex<usize>,
    cond: Condvar,
}

impl Places {
    /// Waits for a free place; `None` once `stop` is set.
    pub(crate) fn take<'a>(&'a self, stop: &AtomicBool) -> Option<Place<'a>> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            if *free > 0 {
                *free -= 1;
                return Some(Place {
                    places: self,
                    held: std::cell::Cell::new(true),
                });
            }
            // Bounded so a stop is seen without a wake-up of its own.
            free = self
                .cond
                .wait_timeout(free, Duration::from_millis(200))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A place taken from [`Places`]: given back by [`Place::give_back`] (once; later calls
/// do nothing) or when dropped.
pub(crate) struct Place<'a> {
    places: &'a Places,
    held: std::cell::Cell<bool>,
}

impl Place<'_> {
    pub(crate) fn give_back(&self) {
        if self.held.replace(false) {
            *self.places.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            self.places.cond.notify_one();
        }
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl Shared {
    /// The state of a node running `opts.concurrency` conversion places (at least one).
    pub(crate) fn new(engine: Arc<Engine>, opts: WorkerOptions) -> Shared {
        Shared {
            engine,
            places: Places {
                free: Mutex::new(opts.concurrency.max(1)),
                cond: Condvar::new(),
            },
            opts,
            stop: AtomicBool::new(false),
            signal: Mutex::new(0),
            cond: Condvar::new(),
        }
    }

    pub(crate) fn wait(&self, timeout: Duration) {
        let guard = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        let seen = *guard;
        let _ = self
            .cond
            .wait_timeout_while(guard, timeout, |s| {
                *s == seen && !self.stop.load(Ordering::Relaxed)
            })
            .unwrap_or_else(|p| p.into_inner());
    }

    /// Sleeps up to `timeout`, waking early only to stop.
    pub(crate) fn wait_stop(&self, timeout: Duration) {
        let guard = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .cond
            .wait_timeout_while(guard, timeout, |_| !self.stop.load(Ordering::Relaxed))
            .unwrap_or_else(|p| p.into_inner());
    }

    pub(crate) fn notify(&self) {
        let mut s = self.signal.lock().unwrap_or_else(|p| p.into_inner());
        *s = s.wrapping_add(1);
        self.cond.notify_all();
        drop(s);
        if self.stop.load(Ordering::Relaxed) {
            // Threads waiting for a place see it at once.
            self.places.cond.notify_all();
        }
    }
}
