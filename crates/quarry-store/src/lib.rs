//! Quarry's system of record: collections, documents, contexts — behind the [`Store`] trait.
//!
//! The embedded backend is [`SqliteStore`] (one file, WAL mode). A PostgreSQL backend will
//! implement the same trait. Derived indexes (BM25, vectors) are rebuilt from what the store
//! holds: every document change is committed here first with an `fts_dirty` flag (or a
//! tombstone for removals), and the flag is cleared only after the derived index has
//! committed too. A process killed at any moment therefore leaves work that the next run
//! finds with [`Store::pending_index_work`] and finishes — nothing is lost or indexed twice.

mod sqlite;

pub use sqlite::SqliteStore;

use std::collections::HashMap;

use quarry_core::{Collection, CollectionKind, Context, Document, Result};

/// What the store knows about a file from the last scan; enough to skip unchanged files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub id: i64,
    pub size: u64,
    /// Stat fingerprint from the scan that indexed it (0: unknown, always re-read).
    pub stamp: i64,
    pub hash: String,
}

/// One change to a collection's documents, applied atomically with the others in a batch.
#[derive(Debug, Clone)]
pub enum DocChange {
    /// New or changed content at `path`.
    Upsert {
        path: String,
        title: String,
        hash: String,
        size: u64,
        stamp: i64,
        body: String,
    },
    /// Same content, new stat data (e.g. `touch`): no re-indexing needed.
    Touch { id: i64, size: u64, stamp: i64 },
    /// The file is gone.
    Remove { id: i64 },
}

/// A document the keyword index must (re-)index.
#[derive(Debug, Clone)]
pub struct IndexDoc {
    pub id: i64,
    pub collection_id: i64,
    pub path: String,
    pub title: String,
    pub body: String,
}

/// Derived-index work left to do: documents to (re)index and ids to delete.
#[derive(Debug, Default)]
pub struct IndexWork {
    pub upserts: Vec<IndexDoc>,
    pub deletes: Vec<i64>,
}

impl IndexWork {
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.deletes.is_empty()
    }
}

/// A document's identity and size without its body (listing, globbing, suggestions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocSummary {
    pub id: i64,
    pub collection: String,
    pub path: String,
    pub title: String,
    pub docid: String,
    pub body_bytes: u64,
}

impl DocSummary {
    pub fn display_path(&self) -> String {
        quarry_core::display_path(&self.collection, &self.path)
    }
}

/// Storage of Quarry's metadata and documents for one data directory.
///
/// Every method is scoped to a space; names are unique within a space. Implementations
/// must be safe to share between threads and must tolerate other processes reading while
/// one writes.
pub trait Store: Send + Sync {
    // Collections.
    fn create_collection(
        &self,
        space: &str,
        name: &str,
        kind: CollectionKind,
        path: &str,
        pattern: &str,
    ) -> Result<Collection>;
    fn collections(&self, space: &str) -> Result<Vec<Collection>>;
    fn collection(&self, space: &str, name: &str) -> Result<Option<Collection>>;
    fn rename_collection(&self, space: &str, old: &str, new: &str) -> Result<()>;
    /// Removes a collection and its documents; returns how many documents went.
    fn remove_collection(&self, space: &str, name: &str) -> Result<u64>;
    fn mark_collection_scanned(&self, collection_id: i64, at_ms: i64) -> Result<()>;

    // Documents.
    fn file_states(&self, collection_id: i64) -> Result<HashMap<String, FileState>>;
    /// Applies a batch atomically and returns the derived-index work it created (the
    /// documents are marked dirty until [`Store::index_work_done`]).
    fn apply_changes(&self, collection_id: i64, changes: Vec<DocChange>) -> Result<IndexWork>;
    /// Up to `limit` documents still dirty and tombstones still pending (crash recovery).
    fn pending_index_work(&self, limit: usize) -> Result<IndexWork>;
    /// The derived index has durably absorbed `work`: clear its flags and tombstones.
    fn index_work_done(&self, work: &IndexWork) -> Result<()>;
    fn documents_by_ids(&self, ids: &[i64]) -> Result<Vec<Document>>;
    fn document_by_path(
        &self,
        space: &str,
        collection: &str,
        path: &str,
    ) -> Result<Option<Document>>;
    fn document_by_docid(&self, space: &str, docid: &str) -> Result<Option<Document>>;
    fn document_summaries(&self, space: &str) -> Result<Vec<DocSummary>>;
    fn document_count(&self, space: &str) -> Result<u64>;

    // Contexts.
    fn set_context(&self, space: &str, path: &str, text: &str) -> Result<()>;
    fn contexts(&self, space: &str) -> Result<Vec<Context>>;
    fn remove_context(&self, space: &str, path: &str) -> Result<bool>;
}
