//! The blob store seam and the names blobs go by.

use std::time::SystemTime;

use quarry_core::Result;

use crate::lock::BlobLock;
use crate::staging::Staged;

/// Storage of immutable byte strings by SHA-256.
pub trait BlobStore: Send + Sync {
    /// Starts an upload: bytes written to the returned [`Staged`] are hashed and counted.
    fn stage(&self) -> Result<Staged>;
    /// Makes staged bytes durable at their address and returns it. Take
    /// [`BlobStore::lock_shared`] first and hold it until the reference is committed.
    fn commit(&self, staged: Staged) -> Result<String>;
    /// Stores bytes already in memory (extracted images); returns their SHA-256.
    fn put(&self, bytes: &[u8]) -> Result<String>;
    /// Size of a stored blob, `None` when absent.
    fn size(&self, sha256: &str) -> Result<Option<u64>>;
    /// Reads `len` bytes from `offset` (fewer at the end).
    fn read_range(&self, sha256: &str, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// Reads a whole blob.
    fn read(&self, sha256: &str) -> Result<Vec<u8>>;
    /// Deletes a blob (absent is fine).
    fn delete(&self, sha256: &str) -> Result<()>;
    /// Every stored blob with its modification time (sweeps for bytes no row names).
    fn list(&self) -> Result<Vec<(String, SystemTime)>>;
    /// Held by writers of blob references (see the crate docs).
    fn lock_shared(&self) -> Result<BlobLock>;
    /// Held by the garbage collector.
    fn lock_exclusive(&self) -> Result<BlobLock>;
    /// Removes staging files no live upload is writing (left by a process that died
    /// mid-upload); returns how many went.
    fn sweep_staging(&self) -> Result<u64>;
}

/// Whether `s` is a lower-case hex SHA-256 (anything else never reaches the file system).
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
