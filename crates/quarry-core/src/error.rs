use std::path::PathBuf;

/// Everything that can go wrong in Quarry, classified so every surface (CLI exit codes,
/// HTTP status codes, MCP `isError`) can map it without string matching.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller asked for something malformed (HTTP 400).
    #[error("{0}")]
    InvalidInput(String),
    /// A named thing does not exist (HTTP 404). The message is complete and user-facing.
    #[error("{0}")]
    NotFound(String),
    /// The caller may see the object but not do this to it, e.g. a read-only token writing
    /// (HTTP 403). Never used for objects the caller cannot see: those are `NotFound`.
    #[error("{0}")]
    Forbidden(String),
    /// The credential may not manage governance (policies, approvals, groups, roles,
    /// members, other chains' tokens, sources, the audit log), or the change would alter a
    /// guardrail that binds the calling token's own chain (HTTP 403,
    /// `MANAGEMENT_FORBIDDEN`).
    #[error("{0}")]
    ManagementForbidden(String),
    /// A name is already taken (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// The input is larger than a limit allows (HTTP 413).
    #[error("{0}")]
    TooLarge(String),
    /// The input's type is not one Quarry handles (HTTP 415).
    #[error("{0}")]
    Unsupported(String),
    /// A capability is not ready, e.g. no vector index yet (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// A file or directory could not be read or written. The cause is part of the message
    /// (not a `source()`), so error chains do not print it twice.
    #[error("{path}: {error}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// The metadata store cannot be reached (a database outage, every connection busy). The
    /// text says where it was looked for — for the operator and the server's log; surfaces
    /// that answer remote callers say only "storage unavailable" (HTTP 503).
    #[error("storage unavailable: {0}")]
    StorageUnavailable(String),
    /// The metadata store failed. The text carries the cause's whole chain
    /// ([`Error::storage`]), so a 500 says what the database said.
    #[error("storage error: {0}")]
    Storage(String),
    /// The keyword index failed.
    #[error("index error: {0}")]
    Index(String),
}

/// A store outage, as remote callers read it ([`Error::public_text`]).
pub const STORAGE_UNAVAILABLE: &str =
    "storage unavailable: the server cannot reach its database; try again shortly";

impl Error {
    /// An I/O failure on `path`.
    pub fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            error,
        }
    }

    /// What a remote caller may read of this error: its text, except for a store outage,
    /// whose text names the database's host, port, user and name (for the operator's log).
    pub fn public_text(&self) -> String {
        match self {
            Error::StorageUnavailable(_) => STORAGE_UNAVAILABLE.to_owned(),
            other => other.to_string(),
        }
    }

    /// An [`Error::InvalidInput`] with `msg`.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    /// An [`Error::NotFound`] with `msg`.
    pub fn not_found(msg: impl Into<String>) -> Self {
        Error::NotFound(msg.into())
    }

    /// A store failure that keeps its cause: `e`'s message and each `source()` below it
    /// (skipping a source whose text its parent already shows), joined with ": ".
    pub fn storage(e: &(dyn std::error::Error + 'static)) -> Self {
        Error::Storage(error_chain(e))
    }
}

/// `e` and its sources, outermost first, joined with ": "; a source whose text the message
/// above it already contains is left out (many errors print their source themselves).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// A malformed setting: the variable, the value it held and what it should hold. Shown as
/// `VAR="value": reason`, e.g. `QUARRY_RATE_CHATS="-1": give a whole number (0 or more)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: {reason}")]
pub struct SettingError {
    /// The variable, e.g. `QUARRY_RATE_CHATS`.
    pub var: String,
    /// The value it held (trimmed).
    pub value: String,
    /// What to give instead.
    pub reason: String,
}

impl SettingError {
    /// `var` held `value`, which is not what `reason` asks for.
    pub fn new(
        var: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        SettingError {
            var: var.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// Quarry's result: [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_errors_name_the_variable_and_value() {
        let e = SettingError::new("SOME_LIMIT", "-1", "give a whole number (0 or more)");
        assert_eq!(
            e.to_string(),
            r#"SOME_LIMIT="-1": give a whole number (0 or more)"#
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{msg}")]
    struct Layer {
        msg: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    #[test]
    fn storage_errors_keep_their_cause_chain() {
        let root = Layer {
            msg: "disk I/O error",
            source: None,
        };
        let mid = Layer {
            msg: "cannot commit",
            source: Some(Box::new(root)),
        };
        assert_eq!(
            Error::storage(&mid).to_string(),
            "storage error: cannot commit: disk I/O error"
        );
        // A message that already shows its source does not repeat it.
        let root = Layer {
            msg: "locked",
            source: None,
        };
        let top = Layer {
            msg: "database is locked",
            source: Some(Box::new(root)),
        };
        assert_eq!(
            Error::storage(&top).to_string(),
            "storage error: database is locked"
        );
    }
}
