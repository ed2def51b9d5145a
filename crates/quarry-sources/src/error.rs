//! Why a source could not be listed or read, and how that reads as the engine's error.

/// Why a source could not be listed or read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The configuration is wrong (a malformed URL, a folder that is not one).
    #[error("{0}")]
    Invalid(String),
    /// The source refused the credentials (or asked for some and none are set).
    #[error("{0}")]
    Unauthorized(String),
    /// The source (a repository, a branch, a folder) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The source could not be reached or failed; worth retrying later.
    #[error("{0}")]
    Unavailable(String),
    /// One item is larger than the limit.
    #[error("{path} is {size} bytes, more than the limit of {limit}")]
    TooLarge {
        /// The item.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The outbound address guard refused where the source points (a private, loopback,
    /// link-local or metadata address, or a name resolving only to such addresses): the
    /// place, then the guard's `refused: …`.
    #[error("{0}")]
    Refused(String),
    /// Reading or writing local files failed.
    #[error("{path}: {error}")]
    Io {
        /// The file or directory.
        path: String,
        /// What went wrong.
        error: std::io::Error,
    },
}

impl SourceError {
    pub(crate) fn io(path: impl std::fmt::Display, error: std::io::Error) -> SourceError {
        SourceError::Io {
            path: path.to_string(),
            error,
        }
    }

    /// Whether trying again later may succeed (the source is down, a network failed), as
    /// opposed to a configuration a person must fix.
    pub fn is_transient(&self) -> bool {
        matches!(self, SourceError::Unavailable(_) | SourceError::Io { .. })
    }
}

impl From<SourceError> for quarry_core::Error {
    fn from(e: SourceError) -> quarry_core::Error {
        match e {
            SourceError::Invalid(m) => quarry_core::Error::InvalidInput(m),
            SourceError::Unauthorized(m) => quarry_core::Error::Forbidden(m),
            SourceError::Refused(m) => quarry_core::Error::Forbidden(m),
            SourceError::NotFound(m) => quarry_core::Error::NotFound(m),
            SourceError::Unavailable(m) => quarry_core::Error::Unavailable(m),
            e @ SourceError::TooLarge { .. } => quarry_core::Error::TooLarge(e.to_string()),
            SourceError::Io { path, error } => quarry_core::Error::io(path, error),
        }
    }
}
