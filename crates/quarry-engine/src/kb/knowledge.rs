//! Knowledge bases: uploads, their processing, and what readers see of them.
//!
//! An upload is staged into the blob store while it arrives (hashed and counted, never held
//! in memory), then committed with its `kb_files` row and an ingest job in one store
//! transaction, and the call returns: the document is `pending`. Workers (`quarry-queue`)
//! claim jobs through the store and run [`Engine::run_job`]: convert (outside any lock, on
//! the worker's thread) → store the Markdown as the file's document and update the keyword
//! index under the write lock (`indexing`; searchable from here on) → chunk and embed when
//! the index has an embedding model (`embedding`) → `ready`. A failure that would happen
//! again (an encrypted PDF) fails the document at once with the converter's reason; one that
//! may pass (I/O, an embedding API) is retried with backoff, then fails.
//!
//! Deletes take effect for readers in one store transaction (the document row goes, so
//! search skips its index entries); a cleanup job, committed in that transaction, removes
//! the derived-index entries and blobs nothing references any more.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use quarry_blobs::{BlobStore, FsBlobStore, Staged};
use quarry_convert::{Format, Ocr};
use quarry_core::{Access, Error, Result};
use quarry_ingest::chunk::Layout;
use quarry_store::{
    AddedFile, ConvertedFile, FileFilter, FileStatus, Job, JobKind, KbFile, KnowledgeBase, Lease,
    NewKbFile, QueueCounts,
};
use serde::Serialize;

use crate::engine::Engine;
use crate::kb::ingest_options::IngestOptions;
use crate::progress::Progress;

/// Largest chunk size a knowledge base may set, in characters.
pub const MAX_CHUNK_CHARS: u32 = 20_000;
/// Blob files no row names are deleted once older than this (a crash between writing the
/// bytes and committing the row leaves such files).
const SWEEP_AGE: Duration = Duration::from_secs(3600);
/// How often one process lists every blob for such files. Not on every cleanup: the listing
/// costs a stat (or an S3 page) per blob, and a watched folder's every edit queues a cleanup
/// (its old version's blob) — at 100,000 blobs that listing was most of an edit's time to
/// searchable.
const STRAY_SWEEP_EVERY: Duration = Duration::from_secs(15 * 60);
/// Chunk texts one embed job claims: under a minute of a small model on a CPU, so a
/// worker running embedding is free again for uploads soon, and several nodes split a
/// collection's work in shares.
const EMBED_ROUND_CHUNKS: usize = 256;

/// `auto` or `off`.
pub fn parse_ocr(v: &str) -> Result<Ocr> {
    match v.trim() {
        "" | "auto" => Ok(Ocr::Auto),
        "off" => Ok(Ocr::Off),
        other => Err(Error::invalid(format!(
            "invalid OCR mode {other:?}: use auto or off"
        ))),
    }
}

/// What to create.
#[derive(Debug, Clone, Default)]
pub struct CreateKnowledgeBase {
    /// Unique in the space.
    pub name: String,
    /// What it holds, in words.
    pub description: String,
    /// Chunk size and overlap in characters; unset: seed 003's 1,000 characters with 200
    /// overlap.
    pub chunk_size: Option<u32>,
    /// Chunk overlap in characters (default: a fifth of the size).
    pub chunk_overlap: Option<u32>,
}

/// One file arriving: its name as the client gave it and its staged bytes.
pub struct Upload {
    /// Its name as the client gave it.
    pub file_name: String,
    /// Its bytes, staged in the blob store.
    pub staged: Staged,
}

/// What became of one uploaded file.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum UploadOutcome {
    /// Stored and queued (`pending`).
    Added {
        /// The new document.
        document: KbFile,
    },
    /// The same bytes are already in this knowledge base: that document, no second one.
    Duplicate {
        /// The document already holding these bytes.
        document: KbFile,
    },
    /// Not stored.
    Rejected {
        /// Its name as the client gave it.
        file_name: String,
        /// Why, in words.
        reason: String,
        /// Why, as a code.
        kind: RejectedKind,
    },
}

/// Why an uploaded file was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectedKind {
    /// No converter reads its format (HTTP 415 when nothing was stored).
    Unsupported,
    /// Past the upload size limit (413).
    TooLarge,
    /// An empty file: nothing to convert.
    Empty,
    /// The same bytes as a document the uploader may not read.
    Duplicate,
}

/// Options of [`Engine::add_uploads`].
#[derive(Debug, Clone, Default)]
pub struct UploadOptions {
    /// Reader keys (checked by [`crate::parse_reader_keys`]): the new documents are readable
    /// only by these beside the knowledge base's admins. `None`: by every reader of the
    /// knowledge base.
    pub readers: Option<Vec<String>>,
    /// Metadata fields each new document carries (they win over its front matter and
    /// document properties).
    pub fields: quarry_metadata::Metadata,
}

/// What [`Engine::run_job`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum JobOutcome {
    /// Processed.
    Done,
    /// Back in the queue after a failure that may pass.
    Retry {
        /// Why it failed this time.
        error: String,
        /// When it runs again (milliseconds from now).
        after_ms: i64,
    },
    /// Failed for good.
    Failed {
        /// Why.
        error: String,
    },
    /// Another worker took the job over (our lease ran out); nothing was recorded.
    Lost,
}

/// A processing failure: `retry` when running again may succeed.
pub(crate) struct JobError {
    pub(crate) message: String,
    retry: bool,
}

impl JobError {
    fn permanent(message: impl Into<String>) -> JobError {
        JobError {
            message: message.into(),
            retry: false,
        }
    }

    fn transient(message: impl Into<String>) -> JobError {
        JobError {
            message: message.into(),
            retry: true,
        }
    }
}

impl From<Error> for JobError {
    fn from(e: Error) -> JobError {
        JobError::transient(e.to_string())
    }
}

/// Whether a file name has an extension Quarry converts (`report.pdf`, `notes.md`, …).
pub fn is_supported_file(name: &str) -> bool {
    Format::from_file_name(name).is_some()
}

/// The last path component of a client-supplied name, without control characters, in NFC,
/// at most 200 bytes (extension kept): the name shown in `kb/name`.
pub fn clean_file_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let cleaned: String = base.chars().filter(|c| !c.is_control()).collect();
    let cleaned = quarry_ingest::nfc(cleaned.trim());
    let cleaned = cleaned.as_str();
    // A name, never a path: only `.` and `..` would mean something else (`..md` is fine).
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." {
        return "unnamed".to_owned();
    }
    if cleaned.len() <= 200 {
        return cleaned.to_owned();
    }
    let (stem, ext) = match cleaned.rsplit_once('.') {
        Some((s, e)) if e.len() <= 16 => (s, format!(".{e}")),
        _ => (cleaned, String::new()),
    };
    let mut cut = 200 - ext.len();
    while !stem.is_char_boundary(cut.min(stem.len())) {
        cut -= 1;
    }
    format!("{}{ext}", &stem[..cut.min(stem.len())])
}

impl Engine {
    /// The blob store of this data directory (created on first use).
    pub fn blobs(&self) -> Result<Arc<dyn BlobStore>> {
        if let Some(b) = self.blobs.get() {
            return Ok(b.clone());
        }
        let store: Arc<dyn BlobStore> =
            Arc::new(FsBlobStore::open(&self.data_dir().join("blobs"))?);
        Ok(self.blobs.get_or_init(|| store).clone())
    }

    /// How uploads are converted and retried.
    pub fn ingest_options(&self) -> &IngestOptions {
        &self.ingest
    }

    /// Creates a knowledge base (admins of the whole space only).
    pub fn create_knowledge_base(&self, req: &CreateKnowledgeBase) -> Result<KnowledgeBase> {
        self.require(Access::Admin, "creating a knowledge base")?;
        self.require_whole_space("creating a knowledge base")?;
        crate::collections::validate_collection_name(&req.name)?;
        if req.description.chars().count() > 2000 {
            return Err(Error::invalid("description is longer than 2000 characters"));
        }
        let chunking = validate_chunking(req.chunk_size, req.chunk_overlap)?;
        self.store()
            .create_knowledge_base(self.space(), &req.name, &req.description, chunking)
    }

    /// The knowledge bases this handle may use.
    pub fn knowledge_bases(&self) -> Result<Vec<KnowledgeBase>> {
        let mut all = self.store().knowledge_bases(self.space())?;
        all.retain(|kb| self.scope().allows(kb.collection_id));
        all.into_iter()
            .map(|kb| self.counted_for_caller(kb))
            .collect()
    }

    /// By id or name; one this handle may not use is not found, like a missing one.
    pub fn knowledge_base(&self, key: &str) -> Result<KnowledgeBase> {
        let kb = self
            .store()
            .knowledge_base(self.space(), key)?
            .filter(|kb| self.scope().allows(kb.collection_id))
            .ok_or_else(|| Error::not_found(format!("knowledge base '{key}' not found")))?;
        self.counted_for_caller(kb)
    }

    /// The knowledge base named `name`, created when missing and the handle may write to its
    /// whole space (agents' notes go to a knowledge base named by their resource, seed 004).
    pub fn knowledge_base_for_writing(&self, name: &str) -> Result<KnowledgeBase> {
        match self.knowledge_base(name) {
            Err(Error::NotFound(m)) => {
                if self.scope().collections.is_some() {
                    // Say what it may do instead; the names listed are the visible ones, so
                    // whether `name` exists elsewhere stays unsaid.
                    let names: Vec<String> = self
                        .knowledge_bases()?
                        .into_iter()
                        .map(|kb| format!("'{}'", kb.name))
                        .collect();
                    return Err(Error::Forbidden(if names.is_empty() {
                        format!(
                            "this caller may not write to knowledge base '{name}' and may not create knowledge bases: it is limited to chosen knowledge bases, none of which it can reach here"
                        )
                    } else {
                        format!(
                            "this caller may not write to knowledge base '{name}' and may not create knowledge bases: it is limited to {}; name one of them as the resource (X-Resource header or ?resource=)",
                            names.join(", ")
                        )
                    }));
                }
                if !self.scope().can(Access::Write) {
                    return Err(Error::NotFound(m));
                }
                crate::collections::validate_collection_name(name)?;
                match self
                    .store()
                    .create_knowledge_base(self.space(), name, "", None)
                {
                    // Another request created it first.
                    Err(Error::Conflict(_)) => self.knowledge_base(name),
                    other => other,
                }
            }
            other => other,
        }
    }

    /// Renames a knowledge base or changes its description.
    pub fn update_knowledge_base(
        &self,
        key: &str,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<KnowledgeBase> {
        let current = self.knowledge_base(key)?;
        self.require(Access::Admin, "changing a knowledge base")?;
        if let Some(n) = name {
            if n != current.name {
                self.require_whole_space("renaming a knowledge base")?;
            }
            crate::collections::validate_collection_name(n)?;
        }
        if description.is_some_and(|d| d.chars().count() > 2000) {
            return Err(Error::invalid("description is longer than 2000 characters"));
        }
        self.store()
            .update_knowledge_base(self.space(), key, name, description)
    }

    /// Deletes a knowledge base: gone for readers when this returns; its index entries and
    /// blobs are removed by a cleanup job. Returns it as it was (`document_count`: how many
    /// documents went).
    pub fn delete_knowledge_base(&self, key: &str) -> Result<KnowledgeBase> {
        let kb = self.knowledge_base(key)?;
        self.require(Access::Admin, "deleting a knowledge base")?;
        self.store().remove_collection(self.space(), &kb.name)?;
        Ok(kb)
    }

    /// Starts receiving one file, refused past the upload size limit.
    pub fn stage_upload(&self) -> Result<Staged> {
        Ok(self
            .blobs()?
            .stage()?
            .with_limit(self.ingest.convert.limits.max_bytes))
    }

    /// Adds staged files to a knowledge base and queues them; returns at once.
    pub fn add_uploads(
        &self,
        kb_key: &str,
        uploads: Vec<Upload>,
        options: &UploadOptions,
    ) -> Result<Vec<UploadOutcome>> {
        let meta = options.fields.encode();
        let readers = options
            .readers
            .as_deref()
            .map(crate::parse_reader_keys)
            .transpose()?;
        let kb = self.knowledge_base(kb_key)?;
        self.require(Access::Write, "uploading documents")?;
        let blobs = self.blobs()?;
        let mut outcomes: Vec<Option<UploadOutcome>> = Vec::with_capacity(uploads.len());
        let mut new_files = Vec::new();
        let mut slots = Vec::new();
        let _refs = blobs.lock_shared()?;
        for up in uploads {
            let name = clean_file_name(&up.file_name);
            let Some(format) = Format::from_file_name(&name) else {
                outcomes.push(Some(UploadOutcome::Rejected {
                    reason: unsupported_reason(&name),
                    file_name: name,
                    kind: RejectedKind::Unsupported,
                }));
                continue;
            };
            let size = up.staged.len();
            // Every empty file has the same content address, so an empty `.txt` would be
            // called a duplicate of an empty `.pdf`; there is nothing to convert anyway.
            if size == 0 {
                outcomes.push(Some(UploadOutcome::Rejected {
                    reason: "empty file".to_owned(),
                    file_name: name,
                    kind: RejectedKind::Empty,
                }));
                continue;
            }
            let sha256 = blobs.commit(up.staged)?;
            slots.push(outcomes.len());
            outcomes.push(None);
            new_files.push(NewKbFile {
                meta: meta.clone(),
                original_name: name,
                sha256,
                format: format.as_str().to_owned(),
                mime: format.mime().to_owned(),
                size,
                note: None,
                readers: readers.clone(),
            });
        }
        let added = self.store().add_files(kb.collection_id, &new_files)?;
        for ((slot, a), asked) in slots.into_iter().zip(added).zip(&new_files) {
            outcomes[slot] = Some(match a {
                AddedFile::Added { file } => UploadOutcome::Added { document: file },
                AddedFile::Duplicate { file } if self.may_read_file(&file) => {
                    UploadOutcome::Duplicate { document: file }
                }
                // The same bytes as a document this caller may not read: which one (its
                // name, its id) stays unsaid.
                AddedFile::Duplicate { .. } => UploadOutcome::Rejected {
                    file_name: asked.original_name.clone(),
                    reason: "the same bytes are already in this knowledge base".to_owned(),
                    kind: RejectedKind::Duplicate,
                },
            });
        }
        Ok(outcomes.into_iter().flatten().collect())
    }

    /// Stages a file from disk (CLI uploads); a file over the limit is rejected, not read.
    pub fn upload_from_path(
        &self,
        path: &Path,
    ) -> Result<std::result::Result<Upload, UploadOutcome>> {
        use std::io::Read;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let limit = self.ingest.convert.limits.max_bytes;
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.len() > limit {
            return Ok(Err(UploadOutcome::Rejected {
                file_name: clean_file_name(&name),
                reason: format!("exceeds {} MB", limit / (1024 * 1024)),
                kind: RejectedKind::TooLarge,
            }));
        }
        let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let mut staged = self.stage_upload()?;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = file.read(&mut buf).map_err(|e| Error::io(path, e))?;
            if n == 0 {
                break;
            }
            match staged.write_all(&buf[..n]) {
                Ok(()) => {}
                Err(Error::TooLarge(reason)) => {
                    return Ok(Err(UploadOutcome::Rejected {
                        file_name: clean_file_name(&name),
                        reason,
                        kind: RejectedKind::TooLarge,
                    }));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Ok(Upload {
            file_name: name,
            staged,
        }))
    }

    /// A knowledge base's documents matching `filter`.
    pub fn kb_documents(&self, kb_key: &str, filter: &FileFilter) -> Result<Vec<KbFile>> {
        let kb = self.knowledge_base(kb_key)?;
        let mut files = self.store().kb_files(kb.collection_id, filter)?;
        files.retain(|f| self.may_read_file(f));
        Ok(files)
    }

    /// A document of a knowledge base, by id or file name.
    pub fn kb_document(&self, kb_key: &str, doc_key: &str) -> Result<KbFile> {
        self.document_in(&self.knowledge_base(kb_key)?, kb_key, doc_key)
    }

    /// A document of a knowledge base already looked up (`kb_key` as the caller named it).
    /// A name names one document per set of readers: among those of `doc_key`'s name, the
    /// one this caller may read; several readable ones are asked apart by id.
    fn document_in(&self, kb: &KnowledgeBase, kb_key: &str, doc_key: &str) -> Result<KbFile> {
        let mut readable: Vec<KbFile> = self
            .store()
            .kb_files_by_key(kb.collection_id, doc_key)?
            .into_iter()
            .filter(|f| self.may_read_file(f))
            .collect();
        match readable.len() {
            0 => Err(Error::not_found(format!(
                "document '{doc_key}' not found in knowledge base '{kb_key}'"
            ))),
            1 => Ok(readable.remove(0)),
            n => Err(Error::invalid(format!(
                "{n} documents of knowledge base '{kb_key}' are named '{doc_key}' (for different readers); name one by its id: {}",
                readable
                    .iter()
                    .map(|f| f.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The documents of these row ids that still exist, in any space and no particular
    /// order (the CLI's progress over many uploads: one read).
    pub fn kb_documents_by_rows(&self, row_ids: &[i64]) -> Result<Vec<KbFile>> {
        self.store().kb_files_by_rows(row_ids)
    }

    /// Deletes a document: gone for readers when this returns — with, for a knowledge
    /// entry, every entry derived from it ([`Engine::delete_knowledge_by`]).
    pub fn delete_kb_document(&self, kb_key: &str, doc_key: &str) -> Result<KbFile> {
        let file = self.kb_document(kb_key, doc_key)?;
        Ok(self
            .delete_knowledge_by(&file, &serde_json::Map::new())?
            .file)
    }

    /// Queues a failed document again.
    pub fn retry_kb_document(&self, kb_key: &str, doc_key: &str) -> Result<KbFile> {
        let file = self.kb_document(kb_key, doc_key)?;
        self.require(Access::Write, "retrying a document")?;
        self.store().retry_kb_file(file.collection_id, file.row_id)
    }

    /// The converted Markdown of a document (once it reached `indexing`).
    pub fn kb_document_markdown(&self, kb_key: &str, doc_key: &str) -> Result<(KbFile, String)> {
        let file = self.kb_document(kb_key, doc_key)?;
        let doc = self.converted_document(&file)?;
        Ok((file, doc.body))
    }

    pub(crate) fn converted_document(&self, file: &KbFile) -> Result<quarry_core::Document> {
        let not_yet = || {
            Error::Unavailable(match file.status {
                FileStatus::Failed => format!(
                    "document '{}' failed: {}",
                    file.file_name,
                    file.error.as_deref().unwrap_or("unknown reason")
                ),
                s => format!(
                    "document '{}' is not converted yet (status: {})",
                    file.file_name,
                    s.as_str()
                ),
            })
        };
        let id = file.document_id.ok_or_else(not_yet)?;
        self.store()
            .documents_by_ids(&[id])?
            .into_iter()
            .next()
            .ok_or_else(not_yet)
    }

    /// Size and MIME type of a blob this space may read (an original or an extracted image
    /// of one of its documents); anything else is "not found", whether or not it exists.
    pub fn readable_blob(&self, sha256: &str) -> Result<(u64, String)> {
        let missing = || Error::not_found("file not found");
        if !quarry_blobs::is_sha256(sha256) {
            return Err(missing());
        }
        let hidden = self
            .hidden_in(None)?
            .map(|h| h.file_rows())
            .unwrap_or_default();
        self.store()
            .blob_visible(
                self.space(),
                self.scope().collections.as_deref(),
                &hidden,
                sha256,
            )?
            .ok_or_else(missing)
    }

    /// Bytes of a blob (check [`Engine::readable_blob`] first).
    pub fn read_blob(&self, sha256: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.blobs()?.read_range(sha256, offset, len)
    }

    /// Jobs of the documents this handle may read (all jobs for the machine's owner).
    pub fn queue_counts(&self) -> Result<QueueCounts> {
        if self.scope().machine_owner && self.scope().collections.is_none() {
            return self.store().queue_counts(None);
        }
        let ids: Vec<i64> = self.collections()?.iter().map(|c| c.id).collect();
        let mut counts = self.store().queue_counts(Some(&ids))?;
        // The jobs of files the caller may not read are not counted either (issue 65 item 6):
        // a hidden document looks exactly like one that does not exist.
        if let Some(hidden) = self.hidden_in(Some(&ids))? {
            let rows: Vec<i64> = hidden.files.iter().map(|f| f.row_id).collect();
            let theirs = self.store().file_queue_counts(&rows)?;
            counts.enqueued = counts.enqueued.saturating_sub(theirs.enqueued);
            counts.processing = counts.processing.saturating_sub(theirs.processing);
            counts.failed = counts.failed.saturating_sub(theirs.failed);
        }
        Ok(counts)
    }

    /// Owners holding leases on running jobs.
    pub fn job_lease_owners(&self) -> Result<Vec<String>> {
        self.store().lease_owners()
    }

    /// Ends the leases of owners known to be dead, so their jobs are taken over now rather
    /// than when the leases lapse.
    pub fn expire_job_leases(&self, owners: &[String]) -> Result<u64> {
        self.store().expire_leases(owners)
    }

    /// `node` (a process running workers) is alive.
    pub fn node_heartbeat(&self, node: &str) -> Result<()> {
        self.store().node_heartbeat(node)
    }

    /// The nodes that sent a heartbeat within `within`.
    pub fn live_nodes(&self, within: Duration) -> Result<Vec<String>> {
        self.store()
            .live_nodes(i64::try_from(within.as_millis()).unwrap_or(i64::MAX))
    }

    /// Claims the next runnable job for `owner` for `lease`.
    pub fn claim_job(&self, owner: &str, lease: Duration) -> Result<Option<Job>> {
        self.store().claim_job(owner, lease.as_millis() as i64)
    }

    /// Extends the lease of a claimed job; `false` when it was lost to another claim.
    pub fn renew_job(&self, job: &Job, lease: Duration) -> Result<bool> {
        self.store()
            .renew_job(job.lease(), lease.as_millis() as i64)
    }

    /// Runs a claimed job and records its outcome in the store. Each of its writes presents
    /// the claim's lease, so a worker that lost the job records nothing. `converted` is
    /// called once an ingest job's file is read and converted, before its store write and
    /// keyword flush (a caller that bounds conversions rather than jobs frees a place
    /// there; it may be called again for the same job); other jobs never call it.
    pub fn run_job(
        &self,
        job: &Job,
        progress: &dyn Progress,
        converted: &dyn Fn(),
    ) -> Result<JobOutcome> {
        let lease = job.lease();
        let result = match job.kind {
            // Its workers keep dying on this file (a process killed mid-conversion, out of
            // memory…): give up rather than take down every worker that claims it.
            JobKind::Ingest if job.interrupted && job.attempts >= self.ingest.max_attempts => {
                Err(JobError::permanent(format!(
                    "processing stopped unexpectedly {} times (the worker crashed or was \
                     killed while converting this file); not retried",
                    job.attempts
                )))
            }
            JobKind::Ingest => match job.file_id {
                Some(id) => self.ingest_file(lease, id, progress, converted),
                None => Err(JobError::permanent("ingest job without a document")),
            },
            JobKind::Cleanup => self.cleanup(progress).map_err(JobError::from),
            JobKind::Embed => self.embed_job(lease, job.collection_id, progress),
        };
        let store = self.store();
        // The queue records an outcome only for the job's current claim; a worker whose
        // lease lapsed (and whose job another took over) leaves everything as it is.
        match result {
            Ok(()) => Ok(if store.complete_job(lease)? {
                JobOutcome::Done
            } else {
                JobOutcome::Lost
            }),
            Err(e) if e.retry && job.attempts + 1 < self.ingest.max_attempts => {
                let delay =
                    self.ingest.retry_base.as_millis() as i64 * (1i64 << job.attempts.min(10));
                if !store.fail_job(lease, &e.message, Some(delay))? {
                    return Ok(JobOutcome::Lost);
                }
                Ok(JobOutcome::Retry {
                    error: e.message,
                    after_ms: delay,
                })
            }
            Err(e) => Ok(if store.fail_job(lease, &e.message, None)? {
                JobOutcome::Failed { error: e.message }
            } else {
                JobOutcome::Lost
            }),
        }
    }

    fn ingest_file(
        &self,
        lease: Lease,
        file_id: i64,
        progress: &dyn Progress,
        converted: &dyn Fn(),
    ) -> Result<(), JobError> {
        let Some(mut file) = self.convert_and_index(Some(lease), file_id, progress, converted)?
        else {
            return Ok(()); // deleted while queued or converting, or the job lost
        };
        let store = self.store();
        if file.note.is_some() && self.annotate_note(lease, &file)? {
            // A new title is the document's title too: index it again (cheap for a note).
            match self.convert_and_index(Some(lease), file_id, progress, converted)? {
                Some(f) => file = f,
                None => return Ok(()),
            }
        }
        if self.embedding_enabled()? {
            // Searchable by keyword now; the vectors come from the collection's embed job,
            // which workers take only when no upload waits (issue 22 item 4), and which
            // marks the file `ready` once its every chunk is in the vector index.
            if store.set_file_status(Some(lease), file_id, FileStatus::Embedding, None)? {
                store.enqueue_embed(file.collection_id)?;
            }
        } else {
            store.set_file_status(Some(lease), file_id, FileStatus::Ready, None)?;
        }
        Ok(())
    }

    /// Queues an embed job for every collection, of any space, with chunks that have no
    /// vector of the index's model (all chunks when there is no vector index yet), so a
    /// server embeds what uploads never queued: folder collections added or updated by the
    /// CLI, a data directory that was never embedded. A collection whose embedding failed
    /// for good within `quiet_after_failure` is left out until then (or until an upload
    /// queues it). Returns how many were queued; none when embedding is off.
    pub fn queue_pending_embedding(&self, quiet_after_failure: Duration) -> Result<usize> {
        if !self.embedding_enabled()? {
            return Ok(0);
        }
        let model = self.vector_model()?;
        let window = i64::try_from(quiet_after_failure.as_millis()).unwrap_or(i64::MAX);
        self.queue_embedding(model.as_deref(), window)
    }

    /// Queues an embed job for every collection with chunks that have no vector of `model`
    /// (`None`: every collection with chunks), leaving out those whose embedding failed for
    /// good in the last `quiet_ms`; how many were queued.
    pub(crate) fn queue_embedding(&self, model: Option<&str>, quiet_ms: i64) -> Result<usize> {
        let store = self.store();
        let collections = store.collections_to_embed(model, quiet_ms)?;
        for &c in &collections {
            store.enqueue_embed(c)?;
        }
        Ok(collections.len())
    }

    /// Changes whenever chunks are cut or removed, in any space (see
    /// `JobQueue::chunk_fingerprint`): cheap, where [`Engine::queue_pending_embedding`]
    /// reads every chunk.
    pub fn chunk_fingerprint(&self) -> Result<(i64, i64)> {
        self.store().chunk_fingerprint()
    }

    /// One round of a collection's background embedding (see [`Engine::embed_round`]);
    /// queues the next round when chunks are left.
    fn embed_job(
        &self,
        lease: Lease,
        collection: Option<i64>,
        progress: &dyn Progress,
    ) -> Result<(), JobError> {
        let Some(collection_id) = collection else {
            return Err(JobError::permanent("embed job without a collection"));
        };
        let store = self.store();
        // Deleted meanwhile, or embedding switched off: nothing to do.
        let Some(space) = store.collection_space(collection_id)? else {
            return Ok(());
        };
        if !self.embedding_enabled()? {
            return Ok(());
        }
        // Embedding works space by space: run it as the owner of the collection's space.
        // The round queues the next one itself, as soon as it knows texts are left.
        self.scoped(quarry_core::Scope::owner(space))
            .embed_round(lease, collection_id, EMBED_ROUND_CHUNKS, progress)
            .map_err(|e| JobError::transient(format!("embedding failed: {e}")))
    }

    /// Asks the configured chat model for a note's title, tags and summary and records them
    /// (title and tags only where the agent gave none). Best effort: a failing model leaves
    /// the note as it is, with a warning. Returns whether the title changed.
    fn annotate_note(&self, lease: Lease, file: &KbFile) -> Result<bool, JobError> {
        let Some(annotator) = self.annotator().ok().flatten() else {
            return Ok(false);
        };
        let Some(note) = &file.note else {
            return Ok(false);
        };
        if note.summary.is_some() && note.title.is_some() && !note.tags.is_empty() {
            return Ok(false);
        }
        let markdown = self.converted_document(file)?.body;
        match annotator.annotate(&markdown) {
            Ok(a) => {
                let title = a.title.as_deref().filter(|_| note.title.is_none());
                self.store().annotate_note(
                    lease,
                    file.row_id,
                    title,
                    &a.tags,
                    a.summary.as_deref(),
                )?;
                Ok(title.is_some())
            }
            Err(e) => {
                self.store().add_file_warning(
                    lease,
                    file.row_id,
                    &format!("no summary: {}", crate::index::models::model_err(e)),
                )?;
                Ok(false)
            }
        }
    }

    /// Converts a file and stores and keyword-indexes its Markdown: searchable by keyword
    /// when this returns. `None` when the file was deleted meanwhile, or when the job doing
    /// it (`lease`) lost it to another worker.
    pub(crate) fn convert_and_index(
        &self,
        lease: Option<Lease>,
        file_id: i64,
        progress: &dyn Progress,
        converted: &dyn Fn(),
    ) -> Result<Option<KbFile>, JobError> {
        let store = self.store();
        let Some(file) = store.kb_file_by_row(file_id)? else {
            return Ok(None);
        };
        if !store.set_file_status(lease, file_id, FileStatus::Converting, None)? {
            return Ok(None);
        }
        let blobs = self.blobs()?;
        let bytes = match blobs.read(&file.sha256) {
            Ok(b) => b,
            Err(Error::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(JobError::permanent(
                    "the original is missing from the blob store",
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let conversion = quarry_convert::convert(&file.file_name, &bytes, &self.ingest.convert);
        drop(bytes);
        converted();
        let mut converted = conversion.map_err(|e| JobError::permanent(e.to_string()))?;
        let meta = crate::kb::metadata::converted_fields(&file, &mut converted);
        // Chunks are cut in this process, not in a converter child: a document that cannot
        // be cut within the chunking limits fails here, with the reason, before anything of
        // it is stored (as one past the conversion limits does).
        let layout = Layout {
            pages: &converted.pages,
            furniture: &converted.furniture,
        };
        crate::index::chunking::check_limits(
            &converted.markdown,
            layout,
            self.kb_chunk_chars(&file)?,
            &self.ingest.chunk,
        )
        .map_err(|e| JobError::permanent(e.to_string()))?;

        let title = file
            .note
            .as_ref()
            .and_then(|n| n.title.clone())
            .or_else(|| converted.title.clone())
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| {
                file.file_name
                    .rsplit_once('.')
                    .map_or(file.file_name.as_str(), |(s, _)| s)
                    .to_owned()
            });
        let page_count = converted.pages.iter().map(|p| p.page).max();
        let pages_without_text = (!converted.pages_without_text.is_empty())
            .then(|| quarry_convert::describe_pages(&converted.pages_without_text));
        let mut warnings = converted.warnings.clone();
        if !converted.pages_ocred.is_empty() {
            warnings.push(format!(
                "text of {} recognised by OCR",
                quarry_convert::describe_pages(&converted.pages_ocred)
            ));
        }

        // Images and the document's row are committed under the blob lock (no collector
        // between storing bytes and referencing them). The row is committed before this
        // node's write lock is taken, not under it: the keyword index follows the store's
        // feed, so whichever worker takes the lock next indexes every document committed by
        // then in one commit, and the workers that wait behind it find theirs done (group
        // commit: one index commit per document cost more than the document's own work).
        // A document without images stores no bytes here: no lock to take (on PostgreSQL
        // it is a connection of its own). Each image is freed once stored: a job waiting for
        // the flush, its conversion place given back, holds only its Markdown.
        let refs = if converted.images.is_empty() {
            None
        } else {
            Some(blobs.lock_shared()?)
        };
        let mut images = Vec::with_capacity(converted.images.len());
        for img in std::mem::take(&mut converted.images) {
            let sha = blobs.put(&img.bytes)?;
            images.push((sha, img.bytes.len() as u64, img.mime));
        }
        let work = store.file_converted(
            lease,
            file_id,
            ConvertedFile {
                meta,
                title,
                markdown: converted.markdown,
                pages: converted.pages,
                furniture: converted.furniture,
                page_count,
                pages_without_text,
                warnings,
                images,
            },
        )?;
        drop(refs);
        if work.is_none() {
            return Ok(None);
        }
        self.index_through(store.feed_horizon()?, progress)?;
        Ok(Some(file))
    }

    /// The chunk size and overlap in characters of `file`'s knowledge base, when it set its
    /// own (`None`: the default, also when it is gone).
    fn kb_chunk_chars(&self, file: &KbFile) -> Result<Option<(usize, usize)>> {
        let store = self.store();
        let Some(space) = store.collection_space(file.collection_id)? else {
            return Ok(None);
        };
        Ok(store
            .knowledge_base(&space, &file.knowledge_base)?
            .filter(|kb| kb.collection_id == file.collection_id)
            .and_then(|kb| {
                let size = kb.chunk_size?;
                Some((size as usize, kb.chunk_overlap.unwrap_or(0) as usize))
            }))
    }

    /// Finishes derived-index removals and deletes blobs nothing references (what the
    /// cleanup job does; the CLI calls it right after a delete, no server being needed).
    pub fn cleanup(&self, progress: &dyn Progress) -> Result<()> {
        let guard = self.lock_writes(progress)?;
        self.flush_index(&guard)?;
        self.flush_vectors(&guard, progress)?;
        drop(guard);
        self.collect_blobs()?;
        Ok(())
    }

    /// Deletes blobs no row references (and stray files no row names, older than an hour),
    /// and staging files of uploads that died; returns how many went.
    pub fn collect_blobs(&self) -> Result<u64> {
        let blobs = self.blobs()?;
        let store = self.store();
        let _gc = blobs.lock_exclusive()?;
        let mut removed = blobs.sweep_staging()?;
        loop {
            let orphans = store.orphan_blobs(512)?;
            if orphans.is_empty() {
                break;
            }
            for h in &orphans {
                blobs.delete(h)?;
            }
            store.forget_blobs(&orphans)?;
            removed += orphans.len() as u64;
        }
        if !self.stray_sweep_due() {
            return Ok(removed);
        }
        let now = SystemTime::now();
        let old: Vec<String> = blobs
            .list()?
            .into_iter()
            .filter(|(_, modified)| now.duration_since(*modified).unwrap_or_default() > SWEEP_AGE)
            .map(|(sha, _)| sha)
            .collect();
        for batch in old.chunks(1000) {
            let known = store.known_blobs(batch)?;
            for sha in batch.iter().filter(|sha| !known.contains(*sha)) {
                blobs.delete(sha)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Whether this process should list every blob for stray files now (its first cleanup,
    /// then every [`STRAY_SWEEP_EVERY`]); marks the sweep as done when it says yes.
    fn stray_sweep_due(&self) -> bool {
        let mut last = self.stray_sweep.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < STRAY_SWEEP_EVERY) {
            return false;
        }
        *last = Some(now);
        true
    }
}

fn unsupported_reason(name: &str) -> String {
    let supported: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
    match name.rsplit_once('.') {
        Some((_, ext)) => format!(
            "unsupported file type '.{ext}' (supported: {})",
            supported.join(", ")
        ),
        None => format!(
            "file name has no extension, so its type is unknown (supported: {})",
            supported.join(", ")
        ),
    }
}

/// A chunk size and overlap in characters as given (a knowledge base's, a document's re-cut):
/// the size between 100 and [`MAX_CHUNK_CHARS`], the overlap (default a fifth of the size)
/// under half of it; `None` when neither is given.
pub(crate) fn validate_chunking(
    size: Option<u32>,
    overlap: Option<u32>,
) -> Result<Option<(u32, u32)>> {
    Ok(match (size, overlap) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(Error::invalid(
                "chunk_overlap needs chunk_size (both in characters)",
            ));
        }
        (Some(size), overlap) => {
            let overlap = overlap.unwrap_or(size / 5);
            if !(100..=MAX_CHUNK_CHARS).contains(&size) {
                return Err(Error::invalid(format!(
                    "chunk_size must be between 100 and {MAX_CHUNK_CHARS} characters (got {size})"
                )));
            }
            if overlap >= size / 2 {
                return Err(Error::invalid(format!(
                    "chunk_overlap must be less than half of chunk_size (got {overlap} for {size})"
                )));
            }
            Some((size, overlap))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quarry_ingest::chunk::ChunkLimits;

    #[test]
    fn client_file_names_are_reduced_to_a_safe_last_component() {
        assert_eq!(clean_file_name("../../etc/passwd"), "passwd");
        assert_eq!(clean_file_name("C:\\Users\\me\\报告.pdf"), "报告.pdf");
        assert_eq!(clean_file_name("a\u{0}b\n.md"), "ab.md");
        assert_eq!(clean_file_name("  "), "unnamed");
        assert_eq!(clean_file_name(".."), "unnamed");
        assert_eq!(clean_file_name("."), "unnamed");
        assert_eq!(clean_file_name("..md"), "..md");
        assert_eq!(clean_file_name("cafe\u{301}.md"), "caf\u{e9}.md");
        let long = format!("{}.pdf", "长".repeat(300));
        let cleaned = clean_file_name(&long);
        assert!(
            cleaned.len() <= 200 && cleaned.ends_with(".pdf"),
            "{cleaned}"
        );
    }

    /// Uploads `text` as the file `name` to the knowledge base `kb`.
    fn upload(e: &Engine, kb: &str, name: &str, text: &str) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let upload = e.upload_from_path(&path).unwrap().unwrap();
        let outcome = e
            .add_uploads(kb, vec![upload], &UploadOptions::default())
            .unwrap();
        assert!(
            matches!(outcome[..], [UploadOutcome::Added { .. }]),
            "{outcome:?}"
        );
    }

    /// The status and error of `kb`'s file `name`.
    fn file_state(e: &Engine, kb: &str, name: &str) -> (FileStatus, Option<String>) {
        let files = e.kb_documents(kb, &FileFilter::default()).unwrap();
        let f = files.iter().find(|f| f.file_name == name).unwrap();
        (f.status, f.error.clone())
    }

    /// Markdown is cut into chunks in this process, not in a converter child: a document the
    /// chunker cannot cut within its limits fails alone, with the reason, and nothing of it
    /// is stored; the knowledge base's other documents stay searchable, and later ones are
    /// processed (issue 65 item 21).
    #[test]
    fn a_document_past_the_chunking_limits_fails_with_the_reason_and_the_rest_is_served() {
        use crate::test_support::{create_kb, drain, engine, keyword_passages};
        let dir = tempfile::tempdir().unwrap();
        {
            let e = engine(dir.path());
            create_kb(&e, "kb");
            upload(
                &e,
                "kb",
                "harbor.md",
                "# Harbor\n\nThe harbor master keeps the ledger.\n",
            );
            drain(&e);
        }
        let with_chunking = |chunk: ChunkLimits| {
            engine(dir.path()).with_ingest(IngestOptions {
                chunk,
                ..IngestOptions::default()
            })
        };
        // A deadline that has passed when the cut starts: the upload fails with the reason.
        let e = with_chunking(ChunkLimits {
            timeout: Some(Duration::ZERO),
            ..ChunkLimits::NONE
        });
        upload(
            &e,
            "kb",
            "lighthouse.md",
            "# Lighthouse\n\nThe keeper trims the lamp.\n",
        );
        drain(&e);
        assert_eq!(
            file_state(&e, "kb", "lighthouse.md"),
            (
                FileStatus::Failed,
                Some("chunking took longer than 0 s (QUARRY_CHUNK_TIMEOUT_SECS)".into())
            )
        );
        assert!(keyword_passages(&e, "lamp").is_empty());
        let found = keyword_passages(&e, "ledger");
        assert_eq!(found.len(), 1, "{found:?}");
        drop(e);
        // A memory limit that a short note keeps to and 100,000 blank-line-separated lines
        // do not: the one fails, the other is searchable.
        let e = with_chunking(ChunkLimits {
            max_memory_bytes: Some(256 * 1024),
            ..ChunkLimits::NONE
        });
        upload(&e, "kb", "lines.md", &"line\n\n".repeat(100_000));
        upload(
            &e,
            "kb",
            "market.md",
            "# Market\n\nThe fish market opens at dawn.\n",
        );
        drain(&e);
        assert_eq!(
            file_state(&e, "kb", "lines.md"),
            (
                FileStatus::Failed,
                Some(
                    "chunking needs more than 262144 bytes of memory (QUARRY_CHUNK_MEMORY_MB)"
                        .into()
                )
            )
        );
        assert_eq!(file_state(&e, "kb", "market.md").0, FileStatus::Ready);
        assert_eq!(keyword_passages(&e, "dawn").len(), 1);
        assert_eq!(keyword_passages(&e, "ledger").len(), 1);
        // A folder's file past the limits is skipped with the reason; the others are indexed.
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("lines.md"), "line\n\n".repeat(100_000)).unwrap();
        std::fs::write(
            folder.join("bell.md"),
            "# Bell\n\nThe bell rings at noon.\n",
        )
        .unwrap();
        let (_, report) = e
            .add_collection(
                &folder,
                Some("folder"),
                None,
                false,
                &crate::progress::NoProgress,
            )
            .unwrap();
        assert_eq!(report.added, 1);
        let skipped: Vec<(&str, &str)> = report
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(
            skipped,
            [(
                "lines.md",
                "chunking needs more than 262144 bytes of memory (QUARRY_CHUNK_MEMORY_MB)"
            )]
        );
        assert_eq!(keyword_passages(&e, "noon").len(), 1);
    }

    /// Backdates the file of blob `sha` under `dir` past [`SWEEP_AGE`].
    fn backdate(dir: &std::path::Path, sha: &str) {
        let name = &sha[2..];
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in std::fs::read_dir(&d).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    todo.push(path);
                } else if entry.file_name().to_string_lossy() == name {
                    let f = std::fs::File::options().write(true).open(&path).unwrap();
                    f.set_modified(SystemTime::now() - 2 * SWEEP_AGE).unwrap();
                    return;
                }
            }
        }
        panic!("no file for blob {sha}");
    }

    #[test]
    fn stray_blobs_go_at_a_processes_first_cleanup_and_then_once_per_sweep_interval() {
        let dir = tempfile::tempdir().unwrap();
        let e = crate::test_support::engine(dir.path());
        let blobs = e.blobs().unwrap();
        let listed = |sha: &str| blobs.list().unwrap().iter().any(|(s, _)| s == sha);
        // Bytes whose row never committed (a crash between the two): stray files.
        let first = blobs.put(b"first stray bytes").unwrap();
        backdate(dir.path(), &first);
        let young = blobs.put(b"young stray bytes").unwrap();
        e.cleanup(&crate::progress::NoProgress).unwrap();
        assert!(
            !listed(&first),
            "an old stray file goes at the first cleanup"
        );
        assert!(
            listed(&young),
            "a young one may still be an upload in flight"
        );
        // The next cleanups (a watched folder's every edit queues one) skip the listing…
        let second = blobs.put(b"second stray bytes").unwrap();
        backdate(dir.path(), &second);
        e.cleanup(&crate::progress::NoProgress).unwrap();
        assert!(listed(&second));
        // …until the interval has passed.
        let long_ago = std::time::Instant::now().checked_sub(STRAY_SWEEP_EVERY);
        *e.stray_sweep.lock().unwrap() = long_ago;
        e.cleanup(&crate::progress::NoProgress).unwrap();
        assert!(!listed(&second) && listed(&young));
    }
}
