//! Search results as every surface returns them.

use serde::{Deserialize, Serialize};

/// One search result, the seed's `SearchResultItem`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// `#` + hex, the document's short id.
    pub docid: String,
    /// Display path.
    pub file: String,
    /// The document's title.
    pub title: String,
    /// Relevance in 0–1, rounded to 2 decimals.
    pub score: f64,
    /// The most specific context of the document's path.
    pub context: Option<String>,
    /// About 300 characters around the best match, each line prefixed `N: `.
    pub snippet: String,
    /// Page the snippet is on, for paged sources (PDF pages, slides).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// The document's metadata fields (absent when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// When the hit is a wiki page: its slug and whether it is stale (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiki_page: Option<PageMark>,
}

/// A wiki page's state on a search hit from it, so a stale page is never passed off as
/// current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageMark {
    /// The page's slug.
    pub slug: String,
    /// Whether a passage it cites changed or went.
    pub stale: bool,
    /// Why, one line per stale citation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_reasons: Vec<String>,
}
