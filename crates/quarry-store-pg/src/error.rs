//! PostgreSQL's errors as Quarry's errors.

use postgres::error::SqlState;
use quarry_core::Error;

/// A database error as a storage error carrying what PostgreSQL said.
pub(crate) fn db_err(e: postgres::Error) -> Error {
    match e.code() {
        // A NUL (or bytes that are not UTF-8) in a text parameter: SQLite stores it,
        // PostgreSQL's text cannot. The caller's input, not a failure of the store.
        Some(c)
            if *c == SqlState::CHARACTER_NOT_IN_REPERTOIRE
                || *c == SqlState::UNTRANSLATABLE_CHARACTER =>
        {
            Error::invalid("text must not contain NUL characters (\\u0000)")
        }
        // The database went away (a restart, a dropped connection): an outage, whose text
        // (host, port, user) is for the log only.
        Some(c)
            if c.code().starts_with("08")
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW =>
        {
            Error::StorageUnavailable(quarry_core::error_chain(&e))
        }
        None if e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) =>
        {
            Error::StorageUnavailable(quarry_core::error_chain(&e))
        }
        _ => Error::storage(&e),
    }
}

/// Whether `e` is a unique-constraint violation.
pub(crate) fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// A unique-constraint violation as `Conflict` with `message`, anything else as a storage
/// error.
pub(crate) fn conflict_or_db(e: postgres::Error, message: impl FnOnce() -> String) -> Error {
    if is_unique_violation(&e) {
        Error::Conflict(message())
    } else {
        db_err(e)
    }
}
