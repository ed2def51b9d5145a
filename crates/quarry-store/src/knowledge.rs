//! Knowledge bases (SPEC §1): collections whose documents are uploaded, kept as originals in
//! the blob store, converted and indexed by the ingestion queue.
//!
//! A knowledge base is a collection of kind `knowledge_base` plus a public id, a description
//! and optional chunk settings. Each upload is a [`KbFile`]: the original (a blob, by
//! SHA-256), its processing status and, once converted, the searchable document it became.
//! Work is a [`Job`] in the store's queue, claimed with a lease so that several workers — in
//! one process, several processes, later several nodes — never run the same job twice, and a
//! job whose worker died is taken again when its lease runs out.

use std::collections::HashMap;

use quarry_core::{PageSpan, Result};
use serde::Serialize;

use crate::IndexWork;

/// Processing stage of an uploaded file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// Stored and queued.
    Pending,
    /// Being converted to Markdown.
    Converting,
    /// Being keyword-indexed.
    Indexing,
    /// Searchable by keyword; waiting for its chunks' vectors.
    Embedding,
    /// Fully processed.
    Ready,
    /// Failed for good (see its error).
    Failed,
}

impl FileStatus {
    /// Every status, in processing order.
    pub const ALL: [FileStatus; 6] = [
        FileStatus::Pending,
        FileStatus::Converting,
        FileStatus::Indexing,
        FileStatus::Embedding,
        FileStatus::Ready,
        FileStatus::Failed,
    ];

    /// The status's name (`pending`, `ready` …).
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Pending => "pending",
            FileStatus::Converting => "converting",
            FileStatus::Indexing => "indexing",
            FileStatus::Embedding => "embedding",
            FileStatus::Ready => "ready",
            FileStatus::Failed => "failed",
        }
    }

    /// The status named `s`.
    pub fn parse(s: &str) -> Option<FileStatus> {
        FileStatus::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// Still moving through the queue.
    pub fn is_active(self) -> bool {
        !matches!(self, FileStatus::Ready | FileStatus::Failed)
    }
}

/// The statuses a listing filters by: one status, or `processing` — converting, indexing or
/// embedding, the word the queue, the counts and the web UI use for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Exactly this status.
    Is(FileStatus),
    /// Converting, indexing or embedding.
    Processing,
}

impl StatusFilter {
    /// The words a filter accepts, for errors and help.
    pub const WORDS: &'static str = "pending, processing (converting, indexing or embedding), converting, indexing, embedding, ready or failed";

    /// The filter named `s`, or an error that lists the words.
    pub fn parse(s: &str) -> std::result::Result<StatusFilter, String> {
        if s == "processing" {
            return Ok(StatusFilter::Processing);
        }
        FileStatus::parse(s)
            .map(StatusFilter::Is)
            .ok_or_else(|| format!("unknown status {s:?}: use {}", StatusFilter::WORDS))
    }

    /// The statuses it lets through, as stored: three, repeated where fewer, so that a
    /// statement binds `status IN (?, ?, ?)` whatever the filter.
    pub fn stored(self) -> [&'static str; 3] {
        match self {
            StatusFilter::Is(s) => [s.as_str(); 3],
            StatusFilter::Processing => [
                FileStatus::Converting.as_str(),
                FileStatus::Indexing.as_str(),
                FileStatus::Embedding.as_str(),
            ],
        }
    }
}

/// Documents of a knowledge base per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts {
    /// Files waiting to be processed.
    pub pending: u64,
    /// Files being converted, indexed or embedded.
    pub processing: u64,
    /// Files done.
    pub ready: u64,
    /// Files that failed.
    pub failed: u64,
}

/// A knowledge base.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeBase {
    /// Collection id (internal).
    #[serde(skip)]
    pub collection_id: i64,
    /// Public id (UUID).
    pub id: String,
    /// Its name, unique in the space.
    pub name: String,
    /// What it holds, in words.
    pub description: String,
    /// Chunk size and overlap in characters, when the knowledge base set its own.
    pub chunk_size: Option<u32>,
    /// Chunk overlap in characters, when it set its own.
    pub chunk_overlap: Option<u32>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds of the last change.
    pub updated_at: i64,
    /// Uploaded files (every status).
    pub document_count: u64,
    /// Files per status.
    pub status_counts: StatusCounts,
    /// Bytes of the originals.
    pub total_bytes: u64,
}

/// One uploaded file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KbFile {
    #[serde(skip)]
    /// Row id (internal).
    pub row_id: i64,
    /// Public id (UUID).
    pub id: String,
    #[serde(skip)]
    /// The knowledge base's collection (internal).
    pub collection_id: i64,
    /// The knowledge base's name.
    pub knowledge_base: String,
    /// Name in the knowledge base, unique there (`report.pdf`, `report (2).pdf`).
    pub file_name: String,
    /// Name as uploaded.
    pub original_name: String,
    /// SHA-256 of the original.
    pub sha256: String,
    /// Detected format (`pdf`, `docx`, `md` …).
    pub format: String,
    /// Content type of the original.
    pub mime: String,
    /// Size of the original in bytes.
    pub size: u64,
    /// Where it is in processing.
    pub status: FileStatus,
    /// Why it failed (`status = failed`), in words a person understands.
    pub error: Option<String>,
    /// Pages (PDF) or slides (PPTX) of the original.
    pub pages: Option<u32>,
    /// Pages that had no text layer and were not OCR'd, e.g. "pages 3–9".
    pub pages_without_text: Option<String>,
    /// Notes from conversion that did not stop it.
    pub warnings: Vec<String>,
    /// docid of the searchable document, once indexed.
    pub docid: Option<String>,
    /// Chunks cut from it (0 until embedded).
    pub chunk_count: u64,
    /// Processing attempts so far.
    pub attempts: u32,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds of the last change.
    pub updated_at: i64,
    #[serde(skip)]
    /// Its searchable document, once stored (internal).
    pub document_id: Option<i64>,
    /// Set for notes created by agents (`create_knowledge`), absent for uploads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<NoteMeta>,
    /// Who may read it beside the knowledge base's admins (reader keys, `user:<name>`,
    /// `group:<name>`); absent: every reader of the knowledge base; empty: only its admins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readers: Option<Vec<String>>,
    /// Whether a source synced it (its readers and content are the source's to decide).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub synced: bool,
    /// Fields given at upload or on `create_knowledge` (a JSON object; front matter and
    /// document properties are the document's, not the file's).
    #[serde(skip_serializing_if = "is_empty_object")]
    pub metadata: serde_json::Value,
    /// Its version facts, for an entry written as one ([`crate::EntryStore::add_entry`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<crate::EntryVersion>,
}

fn is_empty_object(v: &serde_json::Value) -> bool {
    v.as_object().is_none_or(|o| o.is_empty())
}

/// A stored metadata column as JSON (an object; anything else reads as no fields).
pub fn metadata_from_column(column: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Value>(column) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => serde_json::Value::Object(Default::default()),
    }
}

/// What an agent said about a note it created (seed 004).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NoteMeta {
    /// The title given, if any (otherwise the document's first heading or line).
    pub title: Option<String>,
    /// Tags given by the agent or the chat model.
    pub tags: Vec<String>,
    /// `text`, `image`, `video` or `url`.
    pub kind: String,
    /// Written in the background by a chat model, when one is configured.
    pub summary: Option<String>,
}

impl KbFile {
    /// `kb-name/file-name`.
    pub fn display_path(&self) -> String {
        quarry_core::display_path(&self.knowledge_base, &self.file_name)
    }
}

/// A file to add to a knowledge base; its original is already in the blob store.
#[derive(Debug, Clone, Default)]
pub struct NewKbFile {
    /// Name as uploaded.
    pub original_name: String,
    /// SHA-256 of the original.
    pub sha256: String,
    /// Detected format (`pdf`, `docx`, `md` …).
    pub format: String,
    /// Content type of the original.
    pub mime: String,
    /// Size of the original in bytes.
    pub size: u64,
    /// Set for notes created by agents.
    pub note: Option<NoteMeta>,
    /// Its readers (see [`KbFile::readers`]); `None`: every reader of the knowledge base.
    pub readers: Option<Vec<String>>,
    /// Fields given with it, encoded (`quarry_metadata::Metadata::encode`; empty: none).
    pub meta: String,
}

/// A file with readers of its own, as a search needs it: which document to hide from a
/// caller who is none of them, and what to leave out of the counts it sees.
#[derive(Debug, Clone, PartialEq)]
pub struct RestrictedFile {
    /// The file (row id).
    pub row_id: i64,
    /// Its knowledge base's collection.
    pub collection_id: i64,
    /// Its searchable document, once stored.
    pub document_id: Option<i64>,
    /// Where it is in processing.
    pub status: FileStatus,
    /// Size of the original in bytes.
    pub size: u64,
    /// Its reader keys (empty: only the knowledge base's admins).
    pub readers: Vec<String>,
}

/// Reader keys as stored: a JSON array, or NULL for a file every reader may read.
pub fn readers_to_column(readers: Option<&[String]>) -> Option<String> {
    readers.map(|r| serde_json::Value::from(r.to_vec()).to_string())
}

/// Why readers cannot be set: the same bytes are one document, and a key names one current
/// entry, among current files with the same readers — and another one has them (only those
/// who may change readers, who read every document, are told).
pub const SAME_BYTES_SAME_READERS: &str = "another current document of this knowledge base has \
     these readers and the same bytes or entry key: delete or supersede one of the two first";

/// Reader keys from their column. A value that is not a list of strings reads as an empty
/// list: a file nobody but the admins may read, never one everybody may.
pub fn readers_from_column(column: Option<&str>) -> Option<Vec<String>> {
    column.map(|text| serde_json::from_str::<Vec<String>>(text).unwrap_or_default())
}

/// What [`KnowledgeStore::add_files`] did with one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum AddedFile {
    /// Stored and queued.
    Added {
        /// The new file.
        file: KbFile,
    },
    /// The same bytes are already in this knowledge base: no second document.
    Duplicate {
        /// The file already holding these bytes.
        file: KbFile,
    },
}

impl AddedFile {
    /// The file, added or already there.
    pub fn file(&self) -> &KbFile {
        match self {
            AddedFile::Added { file } | AddedFile::Duplicate { file } => file,
        }
    }
}

/// Filters of [`KnowledgeStore::kb_files`].
#[derive(Debug, Clone, Default)]
pub struct FileFilter {
    /// Only files in these states.
    pub status: Option<StatusFilter>,
    /// Case-insensitive substring of the file name.
    pub name: Option<String>,
}

/// The converted form of a file, ready to become its searchable document.
#[derive(Debug, Clone)]
pub struct ConvertedFile {
    /// Title from the content.
    pub title: String,
    /// The converted Markdown.
    pub markdown: String,
    /// Page map (byte ranges per page or slide), empty for unpaged sources.
    pub pages: Vec<PageSpan>,
    /// Furniture the converter found (kept out of chunks).
    pub furniture: Vec<quarry_core::Furniture>,
    /// The document's metadata fields, encoded (front matter, document properties and the
    /// file's own fields, merged).
    pub meta: String,
    /// Pages or slides of the original.
    pub page_count: Option<u32>,
    /// Pages that had no text layer and were not OCR'd.
    pub pages_without_text: Option<String>,
    /// Notes from conversion that did not stop it.
    pub warnings: Vec<String>,
    /// Extracted images (already in the blob store): (sha256, size, mime).
    pub images: Vec<(String, u64, String)>,
}

/// What a job does. Workers claim ingest jobs first, then cleanups, then embedding, so
/// conversion and keyword indexing never wait behind another document's embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Convert and keyword-index one uploaded file (then queue its collection's embedding).
    Ingest,
    /// Finish derived-index removals and delete blobs nothing references (after deletes).
    Cleanup,
    /// Embed one round of a collection's chunks that have no vectors yet (one waiting job per
    /// collection at most; a round that leaves work queues the next).
    Embed,
}

impl JobKind {
    /// The kind's name as stored (`ingest`, `cleanup`, `embed`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Ingest => "ingest",
            JobKind::Cleanup => "cleanup",
            JobKind::Embed => "embed",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<JobKind> {
        match s {
            "ingest" => Some(JobKind::Ingest),
            "cleanup" => Some(JobKind::Cleanup),
            "embed" => Some(JobKind::Embed),
            _ => None,
        }
    }
}

/// A worker's hold on a claimed job: the job and the fencing token of this claim. Every
/// side effect of the job presents it, and the store applies the effect only while no later
/// claim has taken the job over, so a worker that froze past its lease writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The job's row id.
    pub job: i64,
    /// Grows with every claim of the job.
    pub token: i64,
}

/// A claimed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Row id.
    pub id: i64,
    /// This claim's fencing token (see [`Lease`]).
    pub token: i64,
    /// What it does.
    pub kind: JobKind,
    /// The file an ingest job processes.
    pub file_id: Option<i64>,
    /// The collection an embed job works on.
    pub collection_id: Option<i64>,
    /// Attempts before this one, including those that ended without an outcome.
    pub attempts: u32,
    /// Whether the previous attempt ended without an outcome: its lease lapsed (the worker
    /// died or was killed) and this claim took the job over.
    pub interrupted: bool,
}

impl Job {
    /// The hold this claim gives on the job, for its side effects.
    pub fn lease(&self) -> Lease {
        Lease {
            job: self.id,
            token: self.token,
        }
    }
}

/// The node of a job's lease owner: owners are `node:index`, nodes `host:pid:start`.
pub fn owner_node(owner: &str) -> &str {
    owner.rsplit_once(':').map_or(owner, |(node, _)| node)
}

/// Chunk texts an embed job claimed ([`JobQueue::claim_embed_chunks`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimedChunks {
    /// The texts to embed, each once.
    pub texts: Vec<crate::EmbedJob>,
    /// Whether texts without a vector and without a claim were left (another round, or
    /// another node, has work).
    pub more: bool,
}

/// Jobs per state, for progress and `/health`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueCounts {
    /// Jobs waiting to run (or to retry).
    pub enqueued: u64,
    /// Jobs claimed by a worker.
    pub processing: u64,
    /// Jobs that failed for good.
    pub failed: u64,
}

/// Knowledge bases, their files and the blob references (see the module docs).
pub trait KnowledgeStore {
    /// Creates a knowledge base (a collection of kind `knowledge_base`).
    fn create_knowledge_base(
        &self,
        space: &str,
        name: &str,
        description: &str,
        chunking: Option<(u32, u32)>,
    ) -> Result<KnowledgeBase>;
    /// The space's knowledge bases, by name.
    fn knowledge_bases(&self, space: &str) -> Result<Vec<KnowledgeBase>>;
    /// By public id or by name.
    fn knowledge_base(&self, space: &str, key: &str) -> Result<Option<KnowledgeBase>>;
    /// Renames a knowledge base or changes its description.
    fn update_knowledge_base(
        &self,
        space: &str,
        key: &str,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<KnowledgeBase>;

    /// Adds files (their originals already stored) in one transaction, each with an ingest
    /// job; the same bytes twice in one knowledge base give the existing file back.
    fn add_files(&self, collection_id: i64, files: &[NewKbFile]) -> Result<Vec<AddedFile>>;
    /// A knowledge base's files matching `filter`.
    fn kb_files(&self, collection_id: i64, filter: &FileFilter) -> Result<Vec<KbFile>>;
    /// The file whose public id is `key`, else every file named `key` (one per set of
    /// readers), oldest first.
    fn kb_files_by_key(&self, collection_id: i64, key: &str) -> Result<Vec<KbFile>>;
    /// By public id, else the oldest file of that name (a caller that applies readers picks
    /// among [`KnowledgeStore::kb_files_by_key`]).
    fn kb_file(&self, collection_id: i64, key: &str) -> Result<Option<KbFile>> {
        Ok(self.kb_files_by_key(collection_id, key)?.into_iter().next())
    }
    /// A file by row id.
    fn kb_file_by_row(&self, row_id: i64) -> Result<Option<KbFile>>;
    /// The files of these row ids that exist, in no particular order (one read for a
    /// caller that watches many files; a store over the network overrides the loop).
    fn kb_files_by_rows(&self, row_ids: &[i64]) -> Result<Vec<KbFile>> {
        let mut out = Vec::with_capacity(row_ids.len());
        for &row in row_ids {
            out.extend(self.kb_file_by_row(row)?);
        }
        Ok(out)
    }
    /// The public file id of each of these documents that belongs to a knowledge base
    /// (document id → file id); documents of folder collections are absent.
    fn kb_file_ids(&self, document_ids: &[i64]) -> Result<HashMap<i64, String>>;
    /// The files of these collections that have readers of their own.
    fn restricted_files(&self, collection_ids: &[i64]) -> Result<Vec<RestrictedFile>>;
    /// Replaces a file's readers (`None`: every reader of the knowledge base); `false`
    /// when the file is not in that collection.
    fn set_file_readers(
        &self,
        collection_id: i64,
        row_id: i64,
        readers: Option<&[String]>,
    ) -> Result<bool>;
    /// Deletes a file and its document at once (readers stop seeing it); derived indexes
    /// and blobs are cleaned by a cleanup job enqueued in the same transaction.
    fn delete_kb_file(&self, collection_id: i64, row_id: i64) -> Result<()>;
    /// Changes a note: new content (a blob already stored: hash, size) queues it again;
    /// `title`/`tags` replace what was there when given.
    fn update_note(
        &self,
        collection_id: i64,
        row_id: i64,
        content: Option<(&str, u64)>,
        title: Option<Option<&str>>,
        tags: Option<&[String]>,
    ) -> Result<KbFile>;
    /// Adds a warning to a file's list (something that did not stop processing), while
    /// `lease` holds.
    fn add_file_warning(&self, lease: Lease, row_id: i64, warning: &str) -> Result<()>;
    /// Records what a chat model said about a note (title and tags only where the agent gave
    /// none), while `lease` holds; queues nothing.
    fn annotate_note(
        &self,
        lease: Lease,
        row_id: i64,
        title: Option<&str>,
        tags: &[String],
        summary: Option<&str>,
    ) -> Result<()>;
    /// Puts a failed file back in the queue (attempts reset).
    fn retry_kb_file(&self, collection_id: i64, row_id: i64) -> Result<KbFile>;
    /// Moves the collection's files waiting for embedding (`embedding`) whose document is
    /// chunked and whose every chunk has a vector for `model` in the vector index to
    /// `ready`; returns how many.
    fn mark_embedded(&self, collection_id: i64, model: &str) -> Result<u64>;
    /// Records a file's stage (and the reason when failing). No-op for a deleted file, and,
    /// when a job does it, once its `lease` no longer holds; returns whether it was recorded.
    fn set_file_status(
        &self,
        lease: Option<Lease>,
        row_id: i64,
        status: FileStatus,
        error: Option<&str>,
    ) -> Result<bool>;
    /// Stores the converted document (new or replacing the file's previous one) and moves
    /// the file to `indexing`; returns the document as stored (it also enters the change
    /// feed, which is what derived indexes follow), or `None` when the file was deleted
    /// meanwhile or the job's `lease` no longer holds.
    fn file_converted(
        &self,
        lease: Option<Lease>,
        row_id: i64,
        converted: ConvertedFile,
    ) -> Result<Option<IndexWork>>;

    /// Whether a blob is referenced (as an original or an extracted image) by a file of
    /// this space: what `/api/v1/files` may serve to it.
    /// Size and type of a blob that a document of `space` (of `collections` when given)
    /// references as its original or an extracted image; `None` otherwise.
    fn blob_visible(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        hidden_files: &[i64],
        sha256: &str,
    ) -> Result<Option<(u64, String)>>;
    /// Up to `limit` stored blobs nothing references any more.
    fn orphan_blobs(&self, limit: usize) -> Result<Vec<String>>;
    /// Whether any blob row names this hash (directory sweeps keep those).
    fn blob_known(&self, sha256: &str) -> Result<bool>;
    /// Which of `hashes` a blob row names (one query per batch: a sweep of every blob asks
    /// about all of them).
    fn known_blobs(&self, hashes: &[String]) -> Result<std::collections::HashSet<String>> {
        let mut known = std::collections::HashSet::new();
        for h in hashes {
            if self.blob_known(h)? {
                known.insert(h.clone());
            }
        }
        Ok(known)
    }
    /// The blob store deleted these: forget them (unless referenced again meanwhile).
    fn forget_blobs(&self, hashes: &[String]) -> Result<()>;
    /// The answer recorded for idempotency key `key` of `scope` (who sent it, where), with
    /// the fingerprint of the request it answered; keys older than `since` are gone.
    fn idempotent_answer(
        &self,
        scope: &str,
        key: &str,
        since: i64,
    ) -> Result<Option<(String, String)>>;
    /// Records the answer to a keyed request (the first one recorded wins) and forgets keys
    /// recorded before `since`. Returns the answer now recorded for the key.
    fn record_idempotent_answer(
        &self,
        scope: &str,
        key: &str,
        request: &str,
        response: &str,
        now: i64,
        since: i64,
    ) -> Result<(String, String)>;
}

/// The persisted job queue.
pub trait JobQueue {
    /// Claims the next runnable job (enqueued and due, or processing with an expired lease)
    /// for `owner` for `lease_ms` from now, by the store's clock (one clock for every
    /// worker, whatever machine it runs on): ingest jobs first, then cleanups, then embed
    /// jobs, oldest first within a kind. An embed job only while no other embed job of the
    /// owner's node (`node:index`: the owner up to its last `:`) holds a live lease: the
    /// model takes a node's cores, so with two workers or more one is always free for
    /// uploads, while every node embeds (chunks claimed apart with
    /// [`JobQueue::claim_embed_chunks`]). Each claim gets a new fencing token.
    fn claim_job(&self, owner: &str, lease_ms: i64) -> Result<Option<Job>>;
    /// Claims for the embed job holding `lease` up to `limit` distinct chunk texts of the
    /// collection (in `space`) that have no `model` vector and that no other embed job with
    /// a live lease has claimed, so embed jobs of several nodes share a collection's work
    /// without embedding a text twice. The job's earlier claims are released; all of them
    /// end with the job (completed, failed, or its lease lapsed). `None`: this claim no
    /// longer holds the job.
    fn claim_embed_chunks(
        &self,
        lease: Lease,
        space: &str,
        collection_id: i64,
        model: &str,
        limit: usize,
    ) -> Result<Option<ClaimedChunks>>;
    /// Extends a lease to `lease_ms` from now; `false` when the job is no longer held by
    /// this claim (taken over or deleted).
    fn renew_job(&self, lease: Lease, lease_ms: i64) -> Result<bool>;
    /// The job succeeded: it leaves the queue. `false`: this claim no longer held it (its
    /// lease lapsed and another worker took it, or it was deleted); nothing changed.
    fn complete_job(&self, lease: Lease) -> Result<bool>;
    /// The job failed: back in the queue after `retry_after_ms`, or failed for good when
    /// `None`. Its file (an ingest job) waits for the retry or fails with `error` in the
    /// same transaction; an embed job that fails for good fails the files waiting for the
    /// collection's embedding (they stay keyword-searchable; a retry queues them again).
    /// `false` as for [`JobQueue::complete_job`].
    fn fail_job(&self, lease: Lease, error: &str, retry_after_ms: Option<i64>) -> Result<bool>;
    /// Owners holding leases on jobs being processed.
    fn lease_owners(&self) -> Result<Vec<String>>;
    /// Ends these owners' leases now (they are known dead): their jobs are claimable.
    fn expire_leases(&self, owners: &[String]) -> Result<u64>;
    /// `node` (a process running workers: `host:pid:start`, the prefix of its lease
    /// owners' names) is alive now, on the store's clock.
    fn node_heartbeat(&self, node: &str) -> Result<()>;
    /// The nodes that sent a heartbeat within the last `within_ms`; rows of nodes silent
    /// for much longer are dropped on the way.
    fn live_nodes(&self, within_ms: i64) -> Result<Vec<String>>;
    /// Queues a cleanup job (derived-index removals, unreferenced blobs).
    fn enqueue_cleanup(&self) -> Result<()>;
    /// Queues an embed job for a collection unless one is already waiting (a running one
    /// does not count: it may have read its work before the caller's document was stored).
    fn enqueue_embed(&self, collection_id: i64) -> Result<()>;
    /// Collections of every space with a chunk that has no `model` vector (every
    /// collection with chunks when `model` is `None`: no vector index yet), leaving out
    /// those whose embed job failed for good within the last `failed_within_ms` (the
    /// store's clock): the background's sweep must not retry a failing model in a loop.
    fn collections_to_embed(&self, model: Option<&str>, failed_within_ms: i64) -> Result<Vec<i64>>;
    /// The highest chunk id and the number of chunks, of every space: it changes whenever
    /// chunks are cut or removed, so a sweep that found nothing need not look again (and
    /// scan every chunk) until it does.
    fn chunk_fingerprint(&self) -> Result<(i64, i64)>;
    /// Job counts: all jobs, or those of files in `collections`.
    fn queue_counts(&self, collections: Option<&[i64]>) -> Result<QueueCounts>;
    /// Job counts of these files alone (row ids): what a count for a caller who may not read
    /// them leaves out.
    fn file_queue_counts(&self, file_rows: &[i64]) -> Result<QueueCounts>;
    /// Embed jobs being processed under a live lease: the nodes embedding now (each runs
    /// one at most).
    fn live_embed_jobs(&self) -> Result<u64>;
}
