//! Collections, their documents and contexts: what a scan, an upload or a note writes and a
//! search reads ([`CollectionStore`]), and the row types of a document change.

use std::collections::HashMap;

use quarry_core::{Collection, CollectionKind, Context, Document, Furniture, PageSpan, Result};

/// What the store knows about a file from the last scan; enough to skip unchanged files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    /// The document's row id.
    pub id: i64,
    /// Size in bytes when it was indexed.
    pub size: u64,
    /// Stat fingerprint from the scan that indexed it (0: unknown, always re-read).
    pub stamp: i64,
    /// SHA-256 of the content that was indexed.
    pub hash: String,
}

/// One change to a collection's documents, applied atomically with the others in a batch.
#[derive(Debug, Clone)]
pub enum DocChange {
    /// New or changed content at `path`.
    Upsert {
        /// Path relative to the collection's folder.
        path: String,
        /// Title extracted from the content.
        title: String,
        /// SHA-256 of the file's bytes.
        hash: String,
        /// Size in bytes.
        size: u64,
        /// Stat fingerprint of the scan that read it.
        stamp: i64,
        /// The Markdown body (converted for non-Markdown sources).
        body: String,
        /// Page map of a paged source (empty otherwise).
        pages: Vec<PageSpan>,
        /// Furniture found at conversion (empty for Markdown and text files).
        furniture: Vec<Furniture>,
        /// Its metadata fields, encoded (`quarry_metadata::Metadata::encode`; `{}`: none).
        meta: String,
    },
    /// Same content, new stat data (e.g. `touch`): no re-indexing needed.
    Touch {
        /// The document's row id.
        id: i64,
        /// Size in bytes.
        size: u64,
        /// The new stat fingerprint.
        stamp: i64,
    },
    /// The file is gone.
    Remove {
        /// The document's row id.
        id: i64,
    },
}

/// A document the keyword index must (re-)index.
#[derive(Debug, Clone)]
pub struct IndexDoc {
    /// The document's row id.
    pub id: i64,
    /// The collection it belongs to.
    pub collection_id: i64,
    /// Path relative to the collection.
    pub path: String,
    /// Its title.
    pub title: String,
    /// Its body, as indexed.
    pub body: String,
    /// Unix milliseconds it was last (re)indexed (the built-in field `indexed`).
    pub indexed_at: i64,
    /// Its fields as stored (a JSON object, `quarry_metadata::Metadata::encode`): a node's
    /// keyword index keeps them so a metadata filter resolves without reading the store.
    pub meta: String,
}

/// Derived-index work left to do: documents to (re)index and ids to delete.
#[derive(Debug, Default)]
pub struct IndexWork {
    /// Documents to add or replace in the index.
    pub upserts: Vec<IndexDoc>,
    /// Document ids to delete from the index.
    pub deletes: Vec<i64>,
}

impl IndexWork {
    /// The work for the documents `asked` for: those `found` as upserts, the rest (removed
    /// since) as deletes.
    pub fn of(asked: &[i64], found: Vec<IndexDoc>) -> IndexWork {
        let present: std::collections::HashSet<i64> = found.iter().map(|d| d.id).collect();
        let mut deletes: Vec<i64> = asked
            .iter()
            .copied()
            .filter(|id| !present.contains(id))
            .collect();
        deletes.sort_unstable();
        deletes.dedup();
        IndexWork {
            upserts: found,
            deletes,
        }
    }
}

impl IndexWork {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.deletes.is_empty()
    }
}

/// A document's metadata as a filter reads it: its stored fields and the built-in ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocFields {
    /// The document's row id.
    pub id: i64,
    /// Its collection's name.
    pub collection: String,
    /// Path relative to the collection.
    pub path: String,
    /// Its title.
    pub title: String,
    /// Unix milliseconds it was last (re)indexed.
    pub indexed_at: i64,
    /// Its fields as stored (a JSON object).
    pub meta: String,
}

/// A document's identity and size without its body (listing, globbing, suggestions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocSummary {
    /// The document's row id.
    pub id: i64,
    /// Its collection's name.
    pub collection: String,
    /// Path relative to the collection.
    pub path: String,
    /// Its title.
    pub title: String,
    /// Its short id (`#abc123`).
    pub docid: String,
    /// Size of the body in bytes.
    pub body_bytes: u64,
}

impl DocSummary {
    /// `collection/path`, as results show it.
    pub fn display_path(&self) -> String {
        quarry_core::display_path(&self.collection, &self.path)
    }
}

/// Collections of a space, their documents and the contexts attached to paths: the
/// system of record a search reads and a scan or upload writes.
pub trait CollectionStore: Send + Sync {
    /// Creates a collection in `space`; a taken name is a conflict.
    fn create_collection(
        &self,
        space: &str,
        name: &str,
        kind: CollectionKind,
        path: &str,
        pattern: &str,
    ) -> Result<Collection>;
    /// The space's collections, by name.
    fn collections(&self, space: &str) -> Result<Vec<Collection>>;
    /// The space's collections' ids and names, without counting their documents (what a
    /// request resolving a filter needs, at every request).
    fn collection_names(&self, space: &str) -> Result<Vec<(i64, String)>>;
    /// One collection of the space by name.
    fn collection(&self, space: &str, name: &str) -> Result<Option<Collection>>;
    /// The id of one collection of the space by name, without counting its documents (what a
    /// search in a named collection needs, at every request).
    fn collection_id(&self, space: &str, name: &str) -> Result<Option<i64>>;
    /// Renames a collection; a taken name is a conflict.
    fn rename_collection(&self, space: &str, old: &str, new: &str) -> Result<()>;
    /// Removes a collection and its documents; returns how many documents went.
    fn remove_collection(&self, space: &str, name: &str) -> Result<u64>;
    /// Records when a collection was last scanned (milliseconds since the epoch).
    fn mark_collection_scanned(&self, collection_id: i64, at_ms: i64) -> Result<()>;
    /// What the last scan stored about each file of a collection, by path.
    fn file_states(&self, collection_id: i64) -> Result<HashMap<String, FileState>>;
    /// Applies a batch atomically and returns the documents it wrote and removed. Every
    /// change also enters the document change feed in the same transaction (see
    /// [`FeedStore::feed_read`]); derived indexes follow the feed, not this return value.
    fn apply_changes(&self, collection_id: i64, changes: Vec<DocChange>) -> Result<IndexWork>;
    /// The metadata of every document in `collection_ids`, by row id.
    fn document_fields(&self, collection_ids: &[i64]) -> Result<Vec<DocFields>>;
    /// Documents by row id (missing ids are skipped).
    fn documents_by_ids(&self, ids: &[i64]) -> Result<Vec<Document>>;
    /// A document by collection and path.
    fn document_by_path(
        &self,
        space: &str,
        collection: &str,
        path: &str,
    ) -> Result<Option<Document>>;
    /// A document by docid (`#abc123` or its hex) in a space.
    fn document_by_docid(&self, space: &str, docid: &str) -> Result<Option<Document>>;
    /// Every document of a space without its body.
    fn document_summaries(&self, space: &str) -> Result<Vec<DocSummary>>;
    /// How many documents a space holds.
    fn document_count(&self, space: &str) -> Result<u64>;
    /// Whether any space other than `space` has a collection (then a search of `space`
    /// must filter by collection inside the indexes).
    fn collections_outside(&self, space: &str) -> Result<bool>;
    /// The space a collection belongs to.
    fn collection_space(&self, collection_id: i64) -> Result<Option<String>>;
    /// Sets the context of a path (`/`, `collection/dir`), replacing one that was there.
    fn set_context(&self, space: &str, path: &str, text: &str) -> Result<()>;
    /// The space's contexts.
    fn contexts(&self, space: &str) -> Result<Vec<Context>>;
    /// Removes the context of a path; whether there was one.
    fn remove_context(&self, space: &str, path: &str) -> Result<bool>;
}
