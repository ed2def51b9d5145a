//! Quarry's domain model (SPEC §1): the nouns every other crate speaks.
//!
//! This crate has no I/O. It holds the types that cross crate boundaries — spaces,
//! collections, documents, contexts, search hits, status — the error type, the one table of
//! error codes every surface answers with (`ErrorCode`), and the small pure helpers whose
//! exact output is part of a public contract (docids, line numbers, `qmd://` URI encoding,
//! ISO 8601 timestamps, the search summary text).

mod base64;
mod collection;
mod context;
mod document;
mod error;
mod error_code;
mod furniture;
mod page_map;
mod principal;
mod scope;
mod search;
mod status;
mod text;
mod time;

pub use base64::{base64_decode, base64_encode, base64url_decode, base64url_encode};
pub use collection::{Collection, CollectionKind, DEFAULT_MASK, DEFAULT_SPACE};
pub use context::{Context, context_for};
pub use document::{Document, display_path};
pub use error::{Error, Result, STORAGE_UNAVAILABLE, SettingError, error_chain};
pub use error_code::{CodeTable, ErrorCode};
pub use furniture::{
    Furniture, FurnitureKind, decode_furniture, encode_furniture, into_indexed_body,
};
pub use page_map::{PageSpan, decode_pages, encode_pages, page_at};
pub use principal::{Identity, MACHINE_OWNER, Principal};
pub use scope::{Access, MANAGEMENT_HINT, Scope};
pub use search::{PageMark, SearchHit};
pub use status::{CollectionStatus, SpaceEmbedding, StatusReport};
pub use text::{
    add_line_numbers, constant_time_eq, decode_uri_path, docid_for_hash, encode_uri_path,
    format_search_summary, hex_lower, levenshtein, lines, round_score, sha256_hex, terminal_safe,
};
pub use time::{civil_from_days, days_from_civil, iso8601_millis, now_millis};
