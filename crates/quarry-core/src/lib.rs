//! Quarry's domain model (SPEC §1): the nouns every other crate speaks.
//!
//! This crate has no I/O. It holds the types that cross crate boundaries — spaces,
//! collections, documents, contexts, search hits, status — the error type, and the small
//! pure helpers whose exact output is part of a public contract (docids, line numbers,
//! `qmd://` URI encoding, ISO 8601 timestamps, the search summary text).

mod error;
mod text;
mod time;

pub use error::{Error, Result};
pub use text::{
    add_line_numbers, decode_uri_path, docid_for_hash, encode_uri_path, format_search_summary,
    levenshtein, lines, round_score,
};
pub use time::{iso8601_millis, now_millis};

use serde::Serialize;

/// The tenant everything belongs to. Local mode has exactly one: [`DEFAULT_SPACE`].
pub const DEFAULT_SPACE: &str = "default";

/// The default glob mask of a folder collection (QMD's default).
pub const DEFAULT_MASK: &str = "**/*.md";

/// What a collection holds and how documents arrive in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectionKind {
    /// A path + glob mask on disk, re-scanned by `update` (QMD).
    Folder,
    /// Documents uploaded over the API or created by agents.
    KnowledgeBase,
}

impl CollectionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CollectionKind::Folder => "folder",
            CollectionKind::KnowledgeBase => "knowledge_base",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "folder" => Some(CollectionKind::Folder),
            "knowledge_base" => Some(CollectionKind::KnowledgeBase),
            _ => None,
        }
    }
}

/// A named set of documents inside a space.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collection {
    #[serde(skip)]
    pub id: i64,
    #[serde(skip)]
    pub space: String,
    pub name: String,
    pub kind: CollectionKind,
    /// Root folder (folder collections); empty for knowledge bases.
    pub path: String,
    /// Glob mask relative to `path`.
    pub pattern: String,
    /// Number of live documents.
    pub documents: u64,
    /// When the collection was last scanned, milliseconds since the Unix epoch.
    #[serde(skip)]
    pub last_updated_ms: Option<i64>,
}

/// A document as stored: one file or note, its Markdown text and identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub id: i64,
    pub collection: String,
    /// Path relative to the collection root, `/`-separated.
    pub path: String,
    pub title: String,
    /// Hex SHA-256 of the content.
    pub hash: String,
    /// `#` + at least 6 hex characters of `hash`, unique within the index.
    pub docid: String,
    pub body: String,
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

/// A human description attached to a path prefix (QMD `context add`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Context {
    /// Display-path prefix it applies to (`collection/dir`), or `/` for everything.
    pub path: String,
    pub text: String,
}

/// Picks the most specific context for a display path: the longest matching prefix.
pub fn context_for<'a>(contexts: &'a [Context], display_path: &str) -> Option<&'a Context> {
    contexts
        .iter()
        .filter(|c| prefix_applies(&c.path, display_path))
        .max_by_key(|c| c.path.len())
}

fn prefix_applies(prefix: &str, display_path: &str) -> bool {
    if prefix == "/" {
        return true;
    }
    let prefix = prefix.trim_end_matches('/');
    display_path == prefix
        || (display_path.starts_with(prefix) && display_path[prefix.len()..].starts_with('/'))
}

/// One search result, the seed's `SearchResultItem`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub docid: String,
    /// Display path.
    pub file: String,
    pub title: String,
    /// Relevance in 0–1, rounded to 2 decimals.
    pub score: f64,
    pub context: Option<String>,
    /// About 300 characters around the best match, each line prefixed `N: `.
    pub snippet: String,
}

/// Per-collection line of [`StatusReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectionStatus {
    pub name: String,
    pub path: String,
    pub pattern: String,
    pub documents: u64,
    /// ISO 8601 with milliseconds, or `None` when never indexed.
    pub last_updated: Option<String>,
}

/// The index's health, the seed's `StatusResult`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    pub total_documents: u64,
    pub needs_embedding: u64,
    pub has_vector_index: bool,
    pub collections: Vec<CollectionStatus>,
}

impl StatusReport {
    /// The seed's human summary (`QMD Index Status:` layout, named for Quarry).
    pub fn summary(&self) -> String {
        let mut out = format!(
            "Quarry Index Status:\n  Total documents: {}\n  Needs embedding: {}\n  Vector index: {}\n  Collections: {}",
            self.total_documents,
            self.needs_embedding,
            if self.has_vector_index { "yes" } else { "no" },
            self.collections.len()
        );
        for c in &self.collections {
            out.push_str(&format!("\n    - {} ({} docs)", c.path, c.documents));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_specific_context_wins() {
        let contexts = vec![
            Context {
                path: "/".into(),
                text: "everything".into(),
            },
            Context {
                path: "notes".into(),
                text: "notes".into(),
            },
            Context {
                path: "notes/meetings".into(),
                text: "meeting notes".into(),
            },
        ];
        let pick = |p: &str| context_for(&contexts, p).map(|c| c.text.as_str());
        assert_eq!(pick("notes/meetings/2025.md"), Some("meeting notes"));
        assert_eq!(pick("notes/todo.md"), Some("notes"));
        assert_eq!(pick("notesx/todo.md"), Some("everything"));
        assert_eq!(pick("docs/a.md"), Some("everything"));
    }
}
