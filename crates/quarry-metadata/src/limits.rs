//! The limits on what a document's fields and a filter may hold (see the crate docs).

/// The most fields a document keeps.
pub const MAX_FIELDS: usize = 64;
/// The longest field name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest string value, in characters.
pub const MAX_STRING_CHARS: usize = 1000;
/// The most items a list value holds.
pub const MAX_LIST_ITEMS: usize = 100;
/// The deepest a filter nests.
pub const MAX_DEPTH: usize = 16;
/// The most conditions a filter holds.
pub const MAX_CONDITIONS: usize = 100;
