//! The names of users and spaces.

use quarry_core::{Error, Result};

/// Names of users and spaces: `[a-z0-9][a-z0-9._-]*`, at most 64, and not shaped like a
/// UUID (a name and a UUID are accepted in the same places, so they must not collide).
pub fn validate_name(kind: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(Error::invalid(format!(
            "invalid {kind} name {name:?}: use lowercase letters, digits, '-', '_' or '.', starting with a letter or digit (64 at most)"
        )));
    }
    if looks_like_uuid(name) {
        return Err(Error::invalid(format!(
            "invalid {kind} name {name:?}: it looks like a UUID, which would be ambiguous"
        )));
    }
    Ok(())
}

/// Whether `s` has a UUID's shape (names must not, to stay apart from ids).
pub(crate) fn looks_like_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}
