//! Quarry's domain model (SPEC §1): the nouns every other crate speaks.
//!
//! This crate has no I/O. It holds the types that cross crate boundaries — spaces,
//! collections, documents, contexts, search hits, status — the error type, the one table of
//! error codes every surface answers with (`ErrorCode`), and the small pure helpers whose
//! exact output is part of a public contract (docids, line numbers, `qmd://` URI encoding,
//! ISO 8601 timestamps, the search summary text).

mod error;
mod error_code;
mod principal;
mod scope;
mod text;
mod time;

pub use error::{Error, Result, STORAGE_UNAVAILABLE, SettingError, error_chain};
pub use error_code::{CodeTable, ErrorCode};
pub use principal::{Identity, MACHINE_OWNER, Principal};
pub use scope::{Access, MANAGEMENT_HINT, Scope};
pub use text::{
    add_line_numbers, constant_time_eq, decode_uri_path, docid_for_hash, encode_uri_path,
    format_search_summary, hex_lower, levenshtein, lines, round_score, sha256_hex, terminal_safe,
};
pub use time::{civil_from_days, days_from_civil, iso8601_millis, now_millis};

use serde::{Deserialize, Serialize};

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

/// A human description attached to a path prefix (QMD `context add`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Context {
    /// Display-path prefix it applies to (`collection/dir`), or `/` for everything.
    pub path: String,
    /// The description.
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
}

/// Per-collection line of [`StatusReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectionStatus {
    /// The collection's name.
    pub name: String,
    /// Its root folder (empty for knowledge bases).
    pub path: String,
    /// Its glob mask.
    pub pattern: String,
    /// Documents it holds.
    pub documents: u64,
    /// ISO 8601 with milliseconds, or `None` when never indexed.
    pub last_updated: Option<String>,
}

/// How far embedding has got in one space (a line of [`StatusReport::spaces`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpaceEmbedding {
    /// The space's name.
    pub space: String,
    /// Documents it holds.
    pub documents: u64,
    /// Documents whose vectors are missing or outdated.
    pub needs_embedding: u64,
    /// Chunks cut but not embedded yet.
    pub chunks_needing_embedding: u64,
}

/// The index's health, the seed's `StatusResult`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    /// Documents in the space.
    pub total_documents: u64,
    /// Documents whose vectors are missing or outdated.
    pub needs_embedding: u64,
    /// Chunks of this space cut but not embedded yet (uploads wait for them to be `ready`).
    pub chunks_needing_embedding: u64,
    /// Seconds those chunks take at the rate the last embedding round measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_eta_seconds: Option<u64>,
    /// Whether a vector index exists.
    pub has_vector_index: bool,
    /// The space's collections.
    pub collections: Vec<CollectionStatus>,
    /// Every space, for the machine's owner of a server with more than one (the others'
    /// embedding is not in the counts above).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spaces: Vec<SpaceEmbedding>,
}

/// `42 s`, `7 min`, `2 h 5 min`: an estimate, so no finer than it is.
fn human_duration(secs: u64) -> String {
    match secs {
        0..=89 => format!("{secs} s"),
        90..=5399 => format!("{} min", secs.div_ceil(60)),
        _ => format!("{} h {} min", secs / 3600, (secs % 3600) / 60),
    }
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
            // A knowledge base has no folder: show its name.
            let place = if c.path.is_empty() { &c.name } else { &c.path };
            out.push_str(&format!("\n    - {place} ({} docs)", c.documents));
        }
        // Chunks are cut with keyword indexing, so they "wait" even where nothing embeds:
        // the line is for indexes that have vectors (seed 001's text otherwise).
        if self.chunks_needing_embedding > 0 && self.has_vector_index {
            out.push_str(&format!(
                "\n  Chunks waiting for embedding: {}",
                self.chunks_needing_embedding
            ));
            if let Some(eta) = self.embedding_eta_seconds {
                out.push_str(&format!(" (about {} left)", human_duration(eta)));
            }
        }
        if !self.spaces.is_empty() {
            out.push_str("\n  Spaces (needs embedding: documents / chunks):");
            for s in &self.spaces {
                out.push_str(&format!(
                    "\n    - {} ({} docs): {} / {}",
                    s.space, s.documents, s.needs_embedding, s.chunks_needing_embedding
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_blanked_in_place() {
        let body = "---\ntitle: Café\n---\n# Body\n".to_owned();
        let front = Furniture {
            kind: FurnitureKind::FrontMatter,
            byte_start: 0,
            byte_end: 21,
        };
        let kept = into_indexed_body(body.clone(), &[front]);
        assert_eq!(kept.len(), body.len());
        assert_eq!(kept, "   \n            \n   \n# Body\n");
        assert_eq!(into_indexed_body(body.clone(), &[]), body);
    }

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

/// One page of a paged source (PDF page, slide): its number (from 1) and its byte range in
/// the document's Markdown. A document's page map lists them in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageSpan {
    /// The page or slide number, from 1.
    pub page: u32,
    /// Byte offset of the page's start in the Markdown.
    pub byte_start: usize,
    /// Byte offset just past the page's end.
    pub byte_end: usize,
}

/// The page containing byte `offset` of a document, given its page map (`None` when the
/// document has no pages).
pub fn page_at(pages: &[PageSpan], offset: usize) -> Option<u32> {
    let last = pages.len().checked_sub(1)?;
    let i = pages.partition_point(|p| p.byte_end <= offset);
    Some(pages[i.min(last)].page)
}

/// A page map as stored: `page:start:end` triples joined by `,`.
pub fn encode_pages(pages: &[PageSpan]) -> String {
    pages
        .iter()
        .map(|p| format!("{}:{}:{}", p.page, p.byte_start, p.byte_end))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses [`encode_pages`]' output; malformed entries are dropped.
pub fn decode_pages(s: &str) -> Vec<PageSpan> {
    s.split(',')
        .filter_map(|t| {
            let mut it = t.split(':').map(|n| n.parse::<usize>().ok());
            Some(PageSpan {
                page: u32::try_from(it.next()??).ok()?,
                byte_start: it.next()??,
                byte_end: it.next()??,
            })
        })
        .collect()
}

/// What a stretch of a document's Markdown is when it is not body text a question could be
/// answered from: kept in the Markdown (a person reading the document sees it), kept out of
/// the passages that compete for answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FurnitureKind {
    /// A table of contents (or list of tables/figures).
    Contents,
    /// A back-of-book index.
    Index,
    /// A line repeated at the top of many pages ("Debian 参考手册 72 / 223").
    RunningHeader,
    /// A line repeated at the bottom of many pages.
    RunningFooter,
    /// A page number on a line of its own.
    PageNumber,
    /// Other repeated boilerplate (navigation, cookie banners, legal footers).
    Boilerplate,
    /// A Markdown document's front matter: its fields are the document's metadata, its
    /// text is neither chunked nor keyword-indexed.
    FrontMatter,
}

impl FurnitureKind {
    /// The kind's name as stored (`contents`, `running_header` …).
    pub fn as_str(self) -> &'static str {
        match self {
            FurnitureKind::Contents => "contents",
            FurnitureKind::Index => "index",
            FurnitureKind::RunningHeader => "running_header",
            FurnitureKind::RunningFooter => "running_footer",
            FurnitureKind::PageNumber => "page_number",
            FurnitureKind::Boilerplate => "boilerplate",
            FurnitureKind::FrontMatter => "front_matter",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<FurnitureKind> {
        Some(match s {
            "contents" => FurnitureKind::Contents,
            "index" => FurnitureKind::Index,
            "running_header" => FurnitureKind::RunningHeader,
            "running_footer" => FurnitureKind::RunningFooter,
            "page_number" => FurnitureKind::PageNumber,
            "boilerplate" => FurnitureKind::Boilerplate,
            "front_matter" => FurnitureKind::FrontMatter,
            _ => return None,
        })
    }
}

/// A byte range of a document's Markdown that is [`FurnitureKind`] furniture. A document's
/// furniture list is sorted by `byte_start` and its ranges do not overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Furniture {
    /// What the range holds.
    pub kind: FurnitureKind,
    /// Byte offset of the range's start.
    pub byte_start: usize,
    /// Byte offset just past the range's end.
    pub byte_end: usize,
}

/// `body` as the keyword indexes hold it: a leading front matter blanked (each of its
/// characters but line breaks replaced by as many spaces as it has bytes), so its words are
/// not indexed while every byte offset and line number — chunks', passages' — stays valid.
pub fn into_indexed_body(body: String, furniture: &[Furniture]) -> String {
    let end = match furniture.first() {
        Some(f) if f.kind == FurnitureKind::FrontMatter && f.byte_start == 0 => f.byte_end,
        _ => return body,
    };
    let Some(front) = body.get(..end) else {
        return body;
    };
    let mut out = String::with_capacity(body.len());
    for c in front.chars() {
        if c == '\n' {
            out.push('\n');
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }
    out.push_str(&body[end..]);
    out
}

/// A furniture list as stored: `kind:start:end` triples joined by `,`.
pub fn encode_furniture(spans: &[Furniture]) -> String {
    spans
        .iter()
        .map(|f| format!("{}:{}:{}", f.kind.as_str(), f.byte_start, f.byte_end))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses [`encode_furniture`]'s output; malformed entries are dropped.
pub fn decode_furniture(s: &str) -> Vec<Furniture> {
    s.split(',')
        .filter_map(|t| {
            let mut it = t.split(':');
            let kind = FurnitureKind::parse(it.next()?)?;
            Some(Furniture {
                kind,
                byte_start: it.next()?.parse().ok()?,
                byte_end: it.next()?.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod page_tests {
    use super::*;

    #[test]
    fn page_maps_round_trip_and_locate_offsets() {
        let pages = vec![
            PageSpan {
                page: 1,
                byte_start: 0,
                byte_end: 10,
            },
            PageSpan {
                page: 2,
                byte_start: 10,
                byte_end: 25,
            },
        ];
        assert_eq!(decode_pages(&encode_pages(&pages)), pages);
        assert_eq!(decode_pages(""), vec![]);
        assert_eq!(page_at(&pages, 0), Some(1));
        assert_eq!(page_at(&pages, 10), Some(2));
        assert_eq!(page_at(&pages, 400), Some(2));
        assert_eq!(page_at(&[], 3), None);
    }

    #[test]
    fn furniture_lists_round_trip() {
        let spans = vec![
            Furniture {
                kind: FurnitureKind::Contents,
                byte_start: 0,
                byte_end: 40,
            },
            Furniture {
                kind: FurnitureKind::RunningHeader,
                byte_start: 90,
                byte_end: 120,
            },
        ];
        assert_eq!(decode_furniture(&encode_furniture(&spans)), spans);
        assert_eq!(decode_furniture(""), vec![]);
        assert_eq!(decode_furniture("toc:1:2,index:3:x"), vec![]);
    }
}
