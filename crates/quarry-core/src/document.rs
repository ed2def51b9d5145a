//! Documents as stored, and the paths users and agents see them by.

use crate::furniture::Furniture;
use crate::page_map::PageSpan;

/// A document as stored: one file or note, its Markdown text and identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Row id.
    pub id: i64,
    /// Its collection's name.
    pub collection: String,
    /// Path relative to the collection root, `/`-separated.
    pub path: String,
    /// Title from the content (first heading, else the file name).
    pub title: String,
    /// Hex SHA-256 of the content.
    pub hash: String,
    /// `#` + at least 6 hex characters of `hash`, unique within the index.
    pub docid: String,
    /// The Markdown text.
    pub body: String,
    /// Page map of a paged source (PDF, slides); empty otherwise.
    pub pages: Vec<PageSpan>,
    /// Furniture found at conversion (contents, running headers …), kept out of chunks.
    pub furniture: Vec<Furniture>,
    /// Its metadata fields as stored (a JSON object; see `quarry-metadata`).
    pub meta: String,
}

impl Document {
    /// `collection/relative/path`, the path users and agents see.
    pub fn display_path(&self) -> String {
        display_path(&self.collection, &self.path)
    }
}

/// `collection/relative/path`.
pub fn display_path(collection: &str, path: &str) -> String {
    format!("{collection}/{path}")
}
