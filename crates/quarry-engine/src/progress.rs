//! Progress of long operations, reported to whoever runs them (the CLI's bars and lines,
//! a server's logs).

/// Receives progress of long operations. Implementations must be cheap to call per file.
pub trait Progress: Sync {
    /// A phase starts with `total` steps (0 when unknown).
    fn begin(&self, _label: &str, _total: u64) {}
    /// A phase that counts bytes (a download) starts, `total` bytes long (0 when unknown).
    fn begin_bytes(&self, label: &str, total: u64) {
        self.begin(label, total);
    }
    /// `n` more steps are done.
    fn advance(&self, _n: u64) {}
    /// The phase is over.
    fn end(&self) {}
    /// Something was skipped or went wrong without stopping the operation.
    fn warn(&self, _message: &str) {}
    /// The operation is waiting on another process.
    fn waiting(&self, _message: &str) {}
}

/// A [`Progress`] that reports nothing.
pub struct NoProgress;
impl Progress for NoProgress {}
