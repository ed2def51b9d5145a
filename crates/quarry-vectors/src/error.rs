//! Error type for the crate.

use std::path::PathBuf;

/// Everything that can go wrong in `quarry-vectors`.
///
/// Errors that a caller is expected to act on have their own variant:
/// [`VectorError::IndexDimensionMismatch`] and [`VectorError::IndexConfigMismatch`]
/// mean "the embedding model or index settings changed: rebuild the index",
/// [`VectorError::Corrupt`] means "the file on disk cannot be trusted: rebuild it".
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// The options passed to [`crate::VectorIndex::create`] / [`crate::VectorIndex::open`]
    /// are unusable (zero dimensions, zero connectivity, ...).
    #[error("invalid vector index options: {0}")]
    InvalidOptions(String),

    /// A vector or query passed to the index has the wrong length.
    #[error("vector has {actual} dimensions but the index expects {expected}")]
    DimensionMismatch {
        /// Dimensions of the index.
        expected: usize,
        /// Length of the vector that was passed in.
        actual: usize,
    },

    /// A vector or query contains NaN or an infinity, which would poison the graph.
    #[error("vector contains a non-finite value (NaN or infinity) at position {position}")]
    NonFiniteValue {
        /// Index of the first offending component.
        position: usize,
    },

    /// The saved index was built for a different number of dimensions than requested.
    /// Usually the embedding model changed: the caller should rebuild the index.
    #[error(
        "vector index {path} holds {found}-dimensional vectors but {expected} dimensions were \
         requested (embedding model changed?); rebuild the index"
    )]
    IndexDimensionMismatch {
        /// File that was opened.
        path: PathBuf,
        /// Dimensions requested by the caller.
        expected: usize,
        /// Dimensions stored in the file.
        found: usize,
    },

    /// The saved index was built with a different metric or quantization than requested.
    #[error(
        "vector index {path} was built with {setting} {found} but {expected} was requested; \
         rebuild the index"
    )]
    IndexConfigMismatch {
        /// File that was opened.
        path: PathBuf,
        /// Which setting differs (`"quantization"` or `"metric"`).
        setting: &'static str,
        /// Value requested by the caller.
        expected: String,
        /// Value stored in the file.
        found: String,
    },

    /// The file exists but is not a complete, intact index written by this crate
    /// (truncated, bit-flipped, or written by something else).
    #[error("vector index {path} is corrupt or incomplete: {reason}; rebuild the index")]
    Corrupt {
        /// File that was opened.
        path: PathBuf,
        /// What the validation found.
        reason: String,
    },

    /// The path cannot be handed to usearch (it takes UTF-8 paths only).
    #[error("path {0} is not valid UTF-8, which the usearch backend requires")]
    NonUtf8Path(PathBuf),

    /// An I/O error while reading or writing an index file.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The usearch backend reported an error (out of memory, incompatible file version, ...).
    #[error("usearch {operation} failed: {message}")]
    Backend {
        /// Which operation failed (`add`, `search`, `load`, ...).
        operation: &'static str,
        /// The message of the C++ exception.
        message: String,
    },
}

impl VectorError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        VectorError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        VectorError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn backend(operation: &'static str, error: impl std::fmt::Display) -> Self {
        VectorError::Backend {
            operation,
            message: error.to_string(),
        }
    }

    /// `true` when the error means the index file does not exist (a fresh start, not a failure).
    pub fn is_not_found(&self) -> bool {
        matches!(self, VectorError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// `true` when the saved index must be rebuilt from the source embeddings: it was
    /// built for other dimensions or quantization, or it is corrupt.
    pub fn needs_rebuild(&self) -> bool {
        matches!(
            self,
            VectorError::IndexDimensionMismatch { .. }
                | VectorError::IndexConfigMismatch { .. }
                | VectorError::Corrupt { .. }
        )
    }
}

/// Result alias used throughout the crate.
pub type Result<T, E = VectorError> = std::result::Result<T, E>;
