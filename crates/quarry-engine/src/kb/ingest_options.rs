//! How an engine converts, cuts and retries what it takes in.

use std::time::Duration;

use quarry_convert::ConvertOptions;
use quarry_ingest::chunk::ChunkLimits;

/// Attempts of a job whose failure may be transient before the document fails.
pub const MAX_ATTEMPTS: u32 = 3;

/// How uploads are converted and retried.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Limits, OCR and where conversion runs.
    pub convert: ConvertOptions,
    /// Bounds on cutting one document into chunks, which runs in this process (no converter
    /// child): an upload or folder file past them is refused with the reason.
    pub chunk: ChunkLimits,
    /// Attempts before a transient failure fails the document.
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each later one.
    pub retry_base: Duration,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            convert: ConvertOptions::default(),
            chunk: ChunkLimits::default(),
            max_attempts: MAX_ATTEMPTS,
            retry_base: Duration::from_secs(5),
        }
    }
}
