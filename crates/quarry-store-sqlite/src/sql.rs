//! Values as the statements bind and read them: id lists, metadata, `LIKE` patterns,
//! vectors.

use quarry_core::{Error, Result};

/// `[1,2,3]`, for `json_each` in a query.
pub(crate) fn id_list(ids: &[i64]) -> String {
    let parts: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(","))
}

/// A metadata column's value: `{}` for none.
pub(crate) fn meta_column(meta: &str) -> &str {
    if meta.trim().is_empty() { "{}" } else { meta }
}

pub(crate) fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// Vectors are stored as little-endian `f32`s.
pub(crate) fn vector_to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn blob_to_vector(b: &[u8]) -> Result<Vec<f32>> {
    if !b.len().is_multiple_of(4) {
        return Err(Error::Storage(format!(
            "stored vector has {} bytes, not a whole number of f32s",
            b.len()
        )));
    }
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}
