//! The garbage-collection locks of a blob store: shared by writers of references, taken
//! alone by the collector.

use std::fs::File;
use std::path::PathBuf;

use quarry_core::{Error, Result};

/// A held blob lock; released on drop. It holds whatever guard its provider hands it: a
/// locked file ([`FileBlobLocks`]), a database session holding an advisory lock, …
pub struct BlobLock {
    _guard: Box<dyn Send>,
}

impl BlobLock {
    /// A lock that is held until `guard` is dropped.
    pub fn new(guard: Box<dyn Send>) -> BlobLock {
        BlobLock { _guard: guard }
    }
}

/// Where the garbage-collection locks of a blob store come from (see the crate docs): many
/// writers of references share a lock the collector takes alone. Every process that writes
/// references to, or collects, the same blobs must use the same provider: a file lock
/// ([`FileBlobLocks`]) serves the processes of one machine; blobs shared by several nodes
/// need a lock they all see (e.g. a database's advisory lock).
pub trait BlobLocks: Send + Sync {
    /// The writers' lock (held from `commit` until the reference is durable).
    fn shared(&self) -> Result<BlobLock>;
    /// The collector's lock.
    fn exclusive(&self) -> Result<BlobLock>;
}

/// [`BlobLocks`] as `flock`s on one file: for the processes of one machine.
pub struct FileBlobLocks {
    path: PathBuf,
}

impl FileBlobLocks {
    /// Locks on `path` (created when first locked; its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> FileBlobLocks {
        FileBlobLocks { path: path.into() }
    }

    fn open(&self) -> Result<File> {
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, e))
    }
}

impl BlobLocks for FileBlobLocks {
    fn shared(&self) -> Result<BlobLock> {
        let file = self.open()?;
        file.lock_shared().map_err(|e| Error::io(&self.path, e))?;
        Ok(BlobLock::new(Box::new(file)))
    }

    fn exclusive(&self) -> Result<BlobLock> {
        let file = self.open()?;
        file.lock().map_err(|e| Error::io(&self.path, e))?;
        Ok(BlobLock::new(Box::new(file)))
    }
}
