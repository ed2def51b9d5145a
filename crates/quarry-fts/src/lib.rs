//! Quarry's keyword index: BM25 over tantivy with field weights title > path > body
//! (see [`TITLE_WEIGHT`]).
//!
//! The index is derived data: postings, a fast `id` column that points back at the store's
//! document id and, in a document index, each document's path, title, indexing time and
//! metadata as stored fields, read (once per segment, [`FtsIndex::field_table`]) by metadata
//! filters. A *passage* index ([`FtsIndex::open_passages`])
//! has one entry per chunk instead (`id` is the chunk's id) and a `doc` column with its
//! document's id, so a document's passages are replaced together. [`FtsWriter::apply`] deletes each id before
//! re-adding it, so replaying work after a crash never duplicates a document. A tantivy
//! commit is atomic, so readers in other processes see either the old or the new index,
//! never half of one.

pub mod analyzer;
mod error;
mod fields;
mod index;
pub mod query;
mod schema;
mod weights;

pub use analyzer::QuarryTokenizer;
pub use fields::{FieldTable, IndexedFields};
pub use index::{FtsHit, FtsIndex, FtsWriter, PassageDoc};
pub use query::{Occur, ParsedQuery};
pub use weights::{EXACT_SHARE, HEADING_WEIGHT, PATH_WEIGHT, TITLE_WEIGHT};
