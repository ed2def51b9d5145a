//! Quarry's system of record: collections, documents, contexts, chunks and embeddings — behind
//! the [`Store`] trait.
//!
//! This crate holds the traits and row types only, no database driver: the embedded backend
//! is `quarry-store-sqlite` (one file, WAL mode), and other backends implement the same
//! traits. Derived indexes (BM25, vectors) are rebuilt from what the store
//! holds: every document change is committed here together with an entry in the document
//! change feed, and each derived index acknowledges its position in the feed only after it
//! has committed too. A process killed at any moment therefore leaves entries that the next
//! run reads with [`Store::feed_read`] and applies — nothing is lost, and applying an entry
//! twice is harmless (an upsert replaces, a delete of a missing document does nothing).

mod access;
mod audit;
mod chat;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod copy;
mod hub;
mod knowledge;
mod oauth;
pub mod thread_guard;

pub use access::{AccessStore, Membership, NewToken, Role, Space, TokenGrant, TokenRecord, User};
pub use audit::{AuditEvent, AuditQuery, AuditRecord, AuditStore, LimitStore};
pub use chat::{ChatMessageRow, ChatStore, ConversationRow, ConversationSummary};
pub use hub::{
    CustomToolRow, HubStore, PackageRow, ToolEndpointRow, ToolRow, UpstreamRow, first_by_owner,
};
pub use knowledge::{
    AddedFile, ClaimedChunks, ConvertedFile, FileFilter, FileStatus, Job, JobKind, JobQueue,
    KbFile, KnowledgeBase, KnowledgeStore, Lease, NewKbFile, NoteMeta, QueueCounts, StatusCounts,
    owner_node,
};
pub use oauth::{
    OAuthClientRow, OAuthGrantRow, OAuthSecretKind, OAuthSecretRow, OAuthStore, Redeemed,
};

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

/// What a node's derived indexes hold when they are right, read in one snapshot: every
/// document's id, and every chunk as `(chunk id, document id)` — across every space.
#[derive(Debug, Default)]
pub struct IndexCensus {
    /// Every document's id.
    pub documents: Vec<i64>,
    /// Every chunk: its id and its document's.
    pub chunks: Vec<(i64, i64)>,
}

/// Where a consumer of the document change feed stands: every entry up to `(txid, seq)`
/// absorbed, and, while it rebuilds from a snapshot, the last document id of the snapshot
/// read so far.
///
/// Entries are read in `(txid, seq)` order: the writing transaction's id, then the entry's
/// number. A store whose writers commit in `seq` order (one writer at a time: SQLite)
/// leaves `txid` at 0. One where several transactions write at once (PostgreSQL) hands out
/// only entries of transactions older than every one still running, so a transaction that
/// took its `seq` early and commits late is never skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeedPosition {
    /// The writing transaction of the last entry absorbed (0 where the store has one writer).
    #[serde(default)]
    pub txid: i64,
    /// The last feed entry absorbed.
    pub seq: i64,
    /// `Some(id)` while rebuilding: documents with ids above it are still to read.
    pub rebuilding_after: Option<i64>,
}

/// A batch of the document change feed for one consumer ([`Store::feed_read`]).
#[derive(Debug, Default)]
pub struct FeedBatch {
    /// What to apply to the derived index.
    pub work: IndexWork,
    /// The consumer's position once `work` is absorbed (pass it to [`Store::feed_ack`]).
    pub position: FeedPosition,
    /// `Some(h)` when this batch reached the end of what the feed can hand out: once it is
    /// absorbed, every write committed before a [`Store::feed_horizon`] call that returned
    /// at most `h` is in the derived index (read-your-writes across nodes).
    pub horizon: Option<i64>,
}

/// How long a stored MCP session outlives its last handshake (clients re-initialize after).
pub const MCP_SESSION_KEPT_MS: i64 = 7 * 24 * 3600 * 1000;

/// What a [`ChangeListener`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The document change feed grew (a node's keyword index has work).
    Feed,
    /// An owner's hub changed (registrations, toggles, deletions).
    Hub,
}

/// Wakes a process when another one (another node) changed something it follows
/// ([`Store::listener`]).
pub trait ChangeListener: Send {
    /// Waits until another writer may have changed what this listener follows, or
    /// `timeout` passes; `true` when woken by a change. An error means the wake-ups are lost
    /// (a dropped connection): the caller polls and asks the store for a new listener.
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool>;
}

/// A listener that is never woken: the caller polls at its timeout (stores without
/// notifications).
pub struct PollingListener;

impl ChangeListener for PollingListener {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool> {
        std::thread::sleep(timeout);
        Ok(false)
    }
}

/// A follower's wait for changes on one [`Channel`]: through a listener while it works,
/// polling while there is none, and a new listener asked for after one was lost (a dropped
/// database connection). Both followers — the feed's and the hub's — wait through one.
pub struct ChangeWaiter {
    channel: Channel,
    listener: Option<Box<dyn ChangeListener>>,
}

impl ChangeWaiter {
    /// A waiter on `channel`; its listener is made on the first wait.
    pub fn new(channel: Channel) -> ChangeWaiter {
        ChangeWaiter {
            channel,
            listener: None,
        }
    }

    /// Waits up to `poll`: `Ok(true)` when woken by a change, `Ok(false)` when the time
    /// passed. An error says the listener was lost (it is dropped; the next wait polls and
    /// asks `store` for a new one) — the caller's to log.
    pub fn wait(&mut self, store: &dyn Store, poll: std::time::Duration) -> Result<bool> {
        if self.listener.is_none() {
            self.listener = store.listener(self.channel).ok();
        }
        let Some(listener) = self.listener.as_mut() else {
            std::thread::sleep(poll);
            return Ok(false);
        };
        let woken = listener.wait(poll);
        if woken.is_err() {
            self.listener = None;
        }
        woken
    }
}

impl IndexWork {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.deletes.is_empty()
    }
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

/// A document whose chunks are missing or were cut from older content.
#[derive(Debug, Clone)]
pub struct ChunkSource {
    /// The document's row id.
    pub id: i64,
    /// SHA-256 of the content the chunks are cut from.
    pub hash: String,
    /// The document's title.
    pub title: String,
    /// The document's body.
    pub body: String,
    /// Page map of a paged source (empty otherwise): chunks are cut at page boundaries.
    pub pages: Vec<PageSpan>,
    /// Furniture found at conversion: no chunk holds it.
    pub furniture: Vec<Furniture>,
    /// The collection's own chunk size and overlap in characters (a knowledge base that set
    /// them at creation); `None`: seed 003's 1,000 characters with 200 overlap.
    pub chunk_chars: Option<(usize, usize)>,
}

/// One chunk to store: a span of its document and the hash of the exact text embedded for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChunk {
    /// Byte offset of the chunk's start in the body.
    pub byte_start: usize,
    /// Byte offset just past the chunk's end.
    pub byte_end: usize,
    /// First line (1-based).
    pub line_start: usize,
    /// Last line (1-based, inclusive).
    pub line_end: usize,
    /// Hash of the exact text embedded for the chunk.
    pub hash: String,
    /// The page the chunk lies on (paged sources).
    pub page: Option<u32>,
    /// The heading path the chunk sits under (`A › B`), empty if none.
    pub heading: String,
}

/// The chunks cut from one version (`doc_hash`) of a document.
#[derive(Debug, Clone)]
pub struct DocChunks {
    /// The document's row id.
    pub document_id: i64,
    /// SHA-256 of the content the chunks were cut from.
    pub doc_hash: String,
    /// The chunks, in document order.
    pub chunks: Vec<NewChunk>,
}

/// A chunk text that has no embedding for some model yet: the document title, the chunk's
/// heading path and its span of the body, from which the caller rebuilds the exact text it
/// hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedJob {
    /// Hash of the exact embedded text (the embeddings' key).
    pub hash: String,
    /// The document's title.
    pub title: String,
    /// The chunk's heading path.
    pub heading: String,
    /// The chunk's span of the body.
    pub text: String,
}

/// Where a chunk lies, for mapping a vector hit back to a document and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRef {
    /// The chunk's row id (the vector index's key).
    pub id: i64,
    /// The document it belongs to.
    pub document_id: i64,
    /// Byte offset of the chunk's start in the body.
    pub byte_start: usize,
    /// Byte offset just past the chunk's end.
    pub byte_end: usize,
    /// First line (1-based).
    pub line_start: usize,
    /// Last line (1-based, inclusive).
    pub line_end: usize,
    /// The page the chunk lies on (paged sources).
    pub page: Option<u32>,
    /// The heading path the chunk sits under, empty if none.
    pub heading: String,
}

/// How far embedding has got in a space, for one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbeddingState {
    /// Documents whose chunks are missing, outdated, or not all embedded and indexed.
    pub documents_pending: u64,
    /// Chunks in the space.
    pub chunks: u64,
    /// Chunks already cut that have no vector for the model yet (documents not chunked yet
    /// are counted in `documents_pending` only).
    pub chunks_pending: u64,
}

/// Storage of Quarry's metadata and documents for one data directory.
///
/// Every method is scoped to a space; names are unique within a space. Implementations
/// must be safe to share between threads and must tolerate other processes reading while
/// one writes.
pub trait Store:
    KnowledgeStore
    + JobQueue
    + AccessStore
    + AuditStore
    + LimitStore
    + OAuthStore
    + HubStore
    + ChatStore
    + Send
    + Sync
{
    // Collections.
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
    /// One collection of the space by name.
    fn collection(&self, space: &str, name: &str) -> Result<Option<Collection>>;
    /// Renames a collection; a taken name is a conflict.
    fn rename_collection(&self, space: &str, old: &str, new: &str) -> Result<()>;
    /// Removes a collection and its documents; returns how many documents went.
    fn remove_collection(&self, space: &str, name: &str) -> Result<u64>;
    /// Records when a collection was last scanned (milliseconds since the epoch).
    fn mark_collection_scanned(&self, collection_id: i64, at_ms: i64) -> Result<()>;

    // Documents.
    /// What the last scan stored about each file of a collection, by path.
    fn file_states(&self, collection_id: i64) -> Result<HashMap<String, FileState>>;
    /// Applies a batch atomically and returns the documents it wrote and removed. Every
    /// change also enters the document change feed in the same transaction (see
    /// [`Store::feed_read`]); derived indexes follow the feed, not this return value.
    fn apply_changes(&self, collection_id: i64, changes: Vec<DocChange>) -> Result<IndexWork>;

    // The document change feed: every write or removal of a document appends an entry in
    // the transaction that makes it, whatever the write path. Each derived index (a
    // *consumer*, e.g. one node's keyword index) reads the feed from its own position and
    // acknowledges what it has durably absorbed, so every consumer sees every change; an
    // entry goes once every consumer is past it.
    /// Where `consumer` stands (what it last acknowledged). A consumer seen for the first
    /// time is registered at the feed's end, to read a snapshot of every document first.
    fn feed_position(&self, consumer: &str) -> Result<FeedPosition>;
    /// Up to `limit` documents after `from`, resolved against the store's current state:
    /// while `from` is rebuilding, the next documents of the snapshot (by id); then each
    /// document written or removed after `from.seq` (a removed one as a delete). Reading
    /// moves nothing: the caller keeps the returned position and passes the last one it has
    /// durably absorbed to [`Store::feed_ack`].
    fn feed_read(&self, from: FeedPosition, limit: usize) -> Result<FeedBatch>;
    /// `consumer`'s index has durably absorbed everything up to `position` (from a
    /// [`FeedBatch`]); entries every consumer is past are dropped.
    fn feed_ack(&self, consumer: &str, position: FeedPosition) -> Result<()>;
    /// `consumer` reads every document again (its index was lost, or was built by another
    /// analyzer or chunker) and then goes on from where it stood; `meta`, when given, is
    /// recorded as `meta[key] = value` in the same transaction.
    fn feed_rebuild(&self, consumer: &str, meta: Option<(&str, &str)>) -> Result<()>;
    /// Forgets a consumer that will never read again, so the feed is not kept for it.
    fn feed_forget(&self, consumer: &str) -> Result<()>;
    /// Registers (or moves) `consumer` at `position`, which its index recorded when it last
    /// committed, and says whether the feed still holds every entry after it. `false`: the
    /// entries were dropped (the consumer was forgotten as idle meanwhile, or the index is
    /// older than the feed remembers), so the index must be rebuilt ([`Store::feed_rebuild`]).
    fn feed_resume(&self, consumer: &str, position: FeedPosition) -> Result<bool>;
    /// Forgets the consumers that have not acknowledged anything for `idle_ms` (nodes that
    /// stopped), so the feed is trimmed below the slowest *live* one; returns their names.
    /// A forgotten consumer that comes back rebuilds ([`Store::feed_resume`] says `false`).
    fn feed_forget_idle(&self, idle_ms: i64) -> Result<Vec<String>>;
    /// How many feed entries lie after `from` (a node's lag, in changes).
    fn feed_backlog(&self, from: FeedPosition) -> Result<i64>;
    /// A position every write committed before this call lies below: a consumer that has
    /// absorbed a batch whose `horizon` is at least this value has absorbed those writes.
    /// Writers hand it to readers (the `X-Quarry-Txid` header) for read-your-writes.
    fn feed_horizon(&self) -> Result<i64>;
    /// Something to wait on for changes on `channel` made by other processes. Stores
    /// without notifications return a [`PollingListener`].
    fn listener(&self, channel: Channel) -> Result<Box<dyn ChangeListener>> {
        let _ = channel;
        Ok(Box::new(PollingListener))
    }
    // MCP sessions (2025-11-25 clients) any node can resume.
    /// The stored state of MCP session `id` (the client's `initialize` parameters, JSON).
    fn mcp_session(&self, id: &str) -> Result<Option<String>>;
    /// Stores session `id`'s state (replacing it); sessions untouched for
    /// [`MCP_SESSION_KEPT_MS`] are dropped on the way.
    fn put_mcp_session(&self, id: &str, state: &str) -> Result<()>;
    /// Forgets session `id` (the client closed it).
    fn delete_mcp_session(&self, id: &str) -> Result<()>;
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

    // Chunks, embeddings and the ANN protocol (semantic layer).
    /// Those of `document_ids` whose chunks are missing or were cut from other content
    /// (chunks are cut when a document is keyword-indexed).
    fn chunk_sources(&self, document_ids: &[i64]) -> Result<Vec<ChunkSource>>;
    /// Forgets the chunking of every document of every space (the chunker changed): the
    /// next index flush cuts them again.
    fn reset_all_chunks(&self) -> Result<()>;
    /// Replaces each document's chunks (old ones get ANN tombstones), unless the document
    /// changed since it was read (its hash is no longer `doc_hash`) or was already cut from
    /// that content (by another node: the chunks stored keep their ids, which other nodes'
    /// passage indexes hold).
    fn replace_chunks(&self, docs: &[DocChunks]) -> Result<()>;
    /// Distinct chunk texts of the space (or one collection) with no embedding for `model`;
    /// at most `limit` of them when given.
    fn embed_jobs(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
        limit: Option<usize>,
    ) -> Result<Vec<EmbedJob>>;
    /// Stores vectors for chunk hashes under `model` (replacing any).
    fn put_embeddings(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<()>;
    /// Deletes `model`'s embeddings of the space's (or one collection's) chunks (`--force`).
    fn delete_embeddings(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
    ) -> Result<u64>;
    /// Chunk ids removed from the store that the ANN index may still hold.
    fn ann_tombstones(&self) -> Result<Vec<i64>>;
    /// Up to `limit` chunks with id > `after` that the ANN index lacks and that have a
    /// `model` vector, in id order.
    fn ann_dirty_chunks(
        &self,
        model: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, Vec<f32>)>>;
    /// The ANN index has durably absorbed these removals and additions.
    fn ann_done(&self, removed: &[i64], added: &[i64]) -> Result<()>;
    /// The ANN index is gone or belongs to another model: every chunk must be added again.
    fn ann_reset(&self) -> Result<()>;
    /// Chunk locations by id (missing ids are skipped).
    fn chunk_refs(&self, ids: &[i64]) -> Result<Vec<ChunkRef>>;
    /// Chunk locations of some documents, in document then position order.
    fn chunks_of_documents(&self, document_ids: &[i64]) -> Result<Vec<ChunkRef>>;
    /// Ids of the chunks in one collection (collection-filtered vector search).
    fn chunk_ids_in_collection(&self, collection_id: i64) -> Result<Vec<i64>>;
    /// What every node's indexes should hold ([`IndexCensus`]): a node's self-check compares
    /// its keyword and passage indexes with it. One pass over two id columns.
    fn index_census(&self) -> Result<IndexCensus>;
    /// The index work that brings these documents' entries up to the store: each one there
    /// as an upsert, each one gone as a delete (a node's self-check repairs with it).
    fn index_work(&self, document_ids: &[i64]) -> Result<IndexWork>;
    /// Embedding progress of the space for `model` (`None`: nothing embedded yet).
    /// Limited to `collections` when given.
    fn embedding_state(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        model: Option<&str>,
    ) -> Result<EmbeddingState>;
    /// Whether any space other than `space` has a collection (then a search of `space`
    /// must filter by collection inside the indexes).
    fn collections_outside(&self, space: &str) -> Result<bool>;
    /// The space a collection belongs to.
    fn collection_space(&self, collection_id: i64) -> Result<Option<String>>;

    // Small key/value settings of the data directory (active model, chunking).
    /// A setting of the data directory; `None` when unset.
    fn meta(&self, key: &str) -> Result<Option<String>>;
    /// Sets a setting of the data directory.
    fn set_meta(&self, key: &str, value: &str) -> Result<()>;

    // Query-expansion cache.
    /// The cached expansions of `query` by `model`.
    fn cached_expansion(&self, model: &str, query: &str) -> Result<Option<Vec<String>>>;
    /// Caches the expansions of `query` by `model`.
    fn cache_expansion(&self, model: &str, query: &str, variants: &[String]) -> Result<()>;

    // Contexts.
    /// Sets the context of a path (`/`, `collection/dir`), replacing one that was there.
    fn set_context(&self, space: &str, path: &str, text: &str) -> Result<()>;
    /// The space's contexts.
    fn contexts(&self, space: &str) -> Result<Vec<Context>>;
    /// Removes the context of a path; whether there was one.
    fn remove_context(&self, space: &str, path: &str) -> Result<bool>;
}

/// Vector search answered by the system of record itself (PostgreSQL with pgvector), so no
/// node keeps a vector file of its own. The embedded mode has no such thing: its engine
/// keeps a local ANN file that follows the store instead.
///
/// Vectors are the store's embeddings (`put_embeddings`), keyed by model and chunk-text
/// hash; a chunk's vector is the one of its text's hash. Similarities are cosine.
pub trait VectorSearch: Send + Sync {
    /// Makes `model`'s vectors, `dims` long, searchable (an index per model); cheap when
    /// they already are.
    fn prepare_vectors(&self, model: &str, dims: usize) -> Result<()>;
    /// The `want` chunks nearest to `query` among those with a `model` vector (limited to
    /// `collections` when given), with their similarity, best first.
    fn nearest_chunks(
        &self,
        model: &str,
        query: &[f32],
        want: usize,
        collections: Option<&[i64]>,
    ) -> Result<Vec<(i64, f32)>>;
    /// The similarity of `query` to each of `chunk_ids` that has a `model` vector (chunks
    /// without one are absent from the answer).
    fn chunk_similarities(
        &self,
        model: &str,
        query: &[f32],
        chunk_ids: &[i64],
    ) -> Result<HashMap<i64, f32>>;
}
