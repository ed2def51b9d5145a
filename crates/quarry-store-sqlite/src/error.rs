//! Database errors as Quarry's errors.

use quarry_core::Error;

pub(crate) fn db_err(e: rusqlite::Error) -> Error {
    Error::storage(&e)
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    )
}

/// A unique-constraint violation as `Conflict` with `message`, anything else as a storage error.
pub(crate) fn conflict_or_db(e: rusqlite::Error, message: impl FnOnce() -> String) -> Error {
    if is_unique_violation(&e) {
        Error::Conflict(message())
    } else {
        db_err(e)
    }
}
