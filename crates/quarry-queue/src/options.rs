//! How a node's workers behave, and the intervals a server gives them.

use std::sync::Arc;
use std::time::Duration;

use quarry_core::Error;
use quarry_engine::{Job, ModelCount, ModelPurpose, SyncReport};

/// How workers behave.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Jobs that convert (or embed, or clean up) at once. Each node runs
    /// [`JOB_THREADS_PER_PLACE`](crate::JOB_THREADS_PER_PLACE) times as many job threads: a
    /// thread claims a job only when one of these places is free, and an ingest job gives
    /// its place back once its file is converted, so more files convert while it waits for
    /// its keyword flush — and that flush, which costs about the same for one document as
    /// for eight, takes theirs too.
    pub concurrency: usize,
    /// How long a claim lasts without renewal; a dead worker's job is retaken after it.
    pub lease: Duration,
    /// How often an idle worker looks for work it was not woken for (jobs enqueued by
    /// another process, retries falling due).
    pub idle_poll: Duration,
    /// How often the node looks for collections with chunks that have no vectors and
    /// queues their embedding (a server: folder collections the CLI added or updated, a
    /// data directory never embedded); `None` for a CLI that drains only its own uploads.
    pub embed_sweep: Option<Duration>,
    /// How often the node looks for sources due for a scheduled sync and runs them (one at
    /// a time per node; each source on one node at a time, by its lease); `None`: sources
    /// sync only when asked (a CLI).
    pub source_sync: Option<Duration>,
    /// Told of each scheduled sync this node ran (a server records it in its audit log).
    pub on_source_sync: Option<SourceSyncHook>,
    /// How often the node reads which folder sources sync on change, and watches those
    /// whose folder exists on this machine (`watch.rs`); `None`: no watching (a CLI).
    pub source_watch: Option<Duration>,
    /// Told of the requests to remote models each job made (a server books them to the
    /// job's space).
    pub on_model_use: Option<ModelUseHook>,
}

/// What a node's scheduler calls after each sync it ran: the source's id, and its report or
/// why it failed (its report, kept in the store, says the same). Called on the scheduler's
/// thread, which may block.
#[derive(Clone)]
pub struct SourceSyncHook(pub Arc<SourceSynced>);

/// The function a [`SourceSyncHook`] holds.
pub type SourceSynced = dyn Fn(&str, std::result::Result<&SyncReport, &Error>) + Send + Sync;

impl std::fmt::Debug for SourceSyncHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceSyncHook")
    }
}

/// What a worker calls after a job that made requests to remote models (embedding its
/// chunks, annotating a note): the job, and the requests and tokens by purpose. Called on
/// the job's thread, which may block.
#[derive(Clone)]
pub struct ModelUseHook(pub Arc<ModelUsed>);

/// The function a [`ModelUseHook`] holds.
pub type ModelUsed = dyn Fn(&Job, &[(ModelPurpose, ModelCount)]) + Send + Sync;

impl std::fmt::Debug for ModelUseHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelUseHook")
    }
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 2,
            lease: Duration::from_secs(60),
            idle_poll: Duration::from_secs(1),
            embed_sweep: None,
            source_sync: None,
            on_source_sync: None,
            source_watch: None,
            on_model_use: None,
        }
    }
}

/// How often a server's node looks for sources due for a sync (`WorkerOptions::source_sync`).
pub const SOURCE_SYNC_POLL: Duration = Duration::from_secs(15);

/// How often a server's node looks for chunks without vectors (`WorkerOptions::embed_sweep`).
pub const EMBED_SWEEP: Duration = Duration::from_secs(30);
