//! The ingestion queue's workers.
//!
//! Jobs live in the store (`quarry-store`'s `jobs` table); this crate only runs them. A
//! worker claims the oldest runnable job with a lease, renews the lease from a heartbeat
//! thread while [`Engine::run_job`] works, and claims the next. Because claims go through
//! the store, any number of workers — threads here, a CLI beside a server, later several
//! nodes — share one queue without running a job twice. Each process running workers is a
//! *node* that sends heartbeats through the store; a node that stops (killed, frozen, cut
//! off) has its leases released by the others after [`NODE_DEAD_AFTER`] — at once by a
//! process starting on the same data directory, which sees the dead one's lock file free —
//! and its jobs are claimed again — a frozen node that wakes writes nothing (the store fences every side
//! effect by the lease).
//!
//! [`Workers`] is the long-lived pool a server keeps; [`drain`] is what the CLI runs when
//! it uploads: a pool that stops once the documents it waits for are `ready` or `failed`.
//!
//! [`Engine::run_job`]: quarry_engine::Engine::run_job

mod follower;
mod nodes;
mod options;
mod shared;
mod wait;
mod watch;
mod workers;

pub use follower::{Follower, HEARTBEAT, INDEX_CHECK, POLL, SHUTDOWN_WAIT};
pub use nodes::{NODE_DEAD_AFTER, NODE_HEARTBEAT, workers_running_elsewhere};
pub use options::{
    EMBED_SWEEP, ModelUseHook, ModelUsed, SOURCE_SYNC_POLL, SourceSyncHook, SourceSynced,
    WorkerOptions,
};
pub use wait::{WaitReport, drain, wait_for};
pub use watch::SOURCE_WATCH_POLL;
pub use workers::{JOB_THREADS_PER_PLACE, QUIET_AFTER_EMBED_FAILURE, Workers, run_one};
