//! Collections: named sets of documents inside a space.

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
    /// The kind's name as stored (`folder`, `knowledge_base`).
    pub fn as_str(self) -> &'static str {
        match self {
            CollectionKind::Folder => "folder",
            CollectionKind::KnowledgeBase => "knowledge_base",
        }
    }

    /// The kind named `s`.
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
    /// Row id (internal).
    pub id: i64,
    #[serde(skip)]
    /// The space it belongs to (internal).
    pub space: String,
    /// Unique name in its space.
    pub name: String,
    /// A folder on disk or a knowledge base.
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
