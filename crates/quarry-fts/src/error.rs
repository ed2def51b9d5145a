//! The index's errors as Quarry's.

use quarry_core::Error;

/// A tantivy error as an index error.
pub(crate) fn idx_err(e: tantivy::TantivyError) -> Error {
    Error::Index(e.to_string())
}
