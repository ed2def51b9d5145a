//! People curate a knowledge base's chunks (issue 44, item 6): see a document's chunks as
//! cut, edit one's text or disable it, re-cut a document with other chunk settings.
//!
//! An edit is stored against the chunk as cut ([`crate::index::chunking::chunk_key`]) and applied
//! whenever the document is cut (`chunking.rs`), so it holds across re-syncs that leave the
//! chunk's text alone and lapses with the text it was made on. Every change has the
//! document cut again on every node (the store puts it on the change feed); this node does it
//! before answering, and an edited text is embedded before answering too, so the next search
//! — keyword, vector or hybrid — already ranks the edit.

use quarry_core::{Access, Error, Result};
use quarry_store::ChunkEdit;
use serde::Serialize;

use crate::engine::Engine;
use crate::index::chunking::{CutChunk, cut_chunks, limit_error};
use crate::progress::NoProgress;

/// Longest text a chunk may be given, in characters.
pub const MAX_CHUNK_EDIT_CHARS: usize = 20_000;

/// One chunk of a document as people curate it.
#[derive(Debug, Clone, Serialize)]
pub struct ChunkView {
    /// The chunk's key: it names the chunk as cut, and stays while its text does.
    pub id: String,
    /// Position in the document (from 0), disabled chunks included.
    pub index: usize,
    /// The page or slide the chunk's text is on (paged sources).
    pub page: Option<u32>,
    /// The heading path the chunk sits under (`3 The Root Filesystem › 3.15 /tmp`), empty
    /// before the document's first heading.
    pub heading: String,
    /// First line (1-based).
    pub line_start: usize,
    /// Last line (1-based, inclusive).
    pub line_end: usize,
    /// Byte offset of the chunk's start in the Markdown.
    pub byte_start: usize,
    /// Byte offset just past the chunk's end.
    pub byte_end: usize,
    /// The text in force: the edit's when it was edited.
    pub content: String,
    /// Whether retrieval sees it (a disabled chunk is neither indexed nor embedded).
    pub enabled: bool,
    /// Whether a person replaced its text.
    pub edited: bool,
    /// The text as cut, when it was edited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_content: Option<String>,
    /// Who edited or disabled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_by: Option<String>,
    /// When (Unix milliseconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_at: Option<i64>,
}

/// A change to one chunk; a field left `None` stays as it is.
#[derive(Debug, Clone, Default)]
pub struct ChunkChange {
    /// `Some(Some(text))` replaces the text, `Some(None)` restores the text as cut.
    pub content: Option<Option<String>>,
    /// Enables or disables the chunk.
    pub enabled: Option<bool>,
}

/// Whether a change's text was embedded before the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingNow {
    /// Embedded and in the vector index: vector search ranks the new text now.
    Done,
    /// Queued for the background embedding (the model was not at hand, or a whole
    /// document's chunks are waiting).
    Queued,
    /// Embedding is off: keyword search only.
    Off,
}

/// Where a document's chunk settings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkingFrom {
    /// Its own (a re-cut with other settings).
    Document,
    /// Its knowledge base's.
    KnowledgeBase,
    /// Seed 003's defaults.
    Default,
}

/// The chunk settings a document is cut with.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Chunking {
    /// Characters per chunk, at most.
    pub chunk_size: usize,
    /// Characters shared by neighbouring chunks.
    pub chunk_overlap: usize,
    /// Where they come from.
    pub from: ChunkingFrom,
}

/// What a re-cut did.
#[derive(Debug, Clone, Serialize)]
pub struct Recut {
    /// Chunks cut, disabled ones included.
    pub chunks: usize,
    /// People's edits that apply to a chunk of the new cut.
    pub edits_kept: usize,
    /// Edits that match no chunk of the new cut: kept, they apply again when a cut yields
    /// their chunk (the earlier settings back).
    pub edits_unmatched: usize,
    /// The settings it was cut with.
    pub chunking: Chunking,
    /// Whether the new chunks were embedded.
    pub embedding: EmbeddingNow,
}

/// A document's chunks with the settings they are cut with.
#[derive(Debug, Clone, Serialize)]
pub struct DocumentChunks {
    /// The chunks, ordered by page, then position.
    pub chunks: Vec<ChunkView>,
    /// The settings they are cut with.
    pub chunking: Chunking,
}

fn view(c: &CutChunk<'_>, index: usize, body: &str) -> ChunkView {
    let original = c.chunk.text(body);
    let edit = c.edit;
    let text = edit.and_then(|e| e.text.clone());
    ChunkView {
        id: c.key.clone(),
        index,
        page: c.chunk.page,
        heading: c.chunk.heading.clone(),
        line_start: c.chunk.line_start,
        line_end: c.chunk.line_end,
        byte_start: c.chunk.start,
        byte_end: c.chunk.end,
        content: text.clone().unwrap_or_else(|| original.to_owned()),
        enabled: !edit.is_some_and(|e| e.disabled),
        edited: text.is_some(),
        original_content: text.is_some().then(|| original.to_owned()),
        edited_by: edit.map(|e| e.edited_by.clone()),
        edited_at: edit.map(|e| e.edited_at),
    }
}

impl Engine {
    /// A document's chunks as cut — what citations point at — each with what people changed,
    /// disabled ones included; ordered by page, then position.
    pub fn kb_document_chunks(&self, kb_key: &str, doc_key: &str) -> Result<DocumentChunks> {
        let file = self.kb_document(kb_key, doc_key)?;
        let doc = self.converted_document(&file)?;
        let src = self
            .store()
            .chunk_source(doc.id)?
            .ok_or_else(|| Error::not_found(format!("document '{doc_key}' not found")))?;
        let mut chunks: Vec<ChunkView> = cut_chunks(&src, &self.ingest.chunk)
            .map_err(limit_error)?
            .iter()
            .enumerate()
            .map(|(i, c)| view(c, i, &src.body))
            .collect();
        chunks.sort_by_key(|v| (v.page.unwrap_or(0), v.index));
        Ok(DocumentChunks {
            chunks,
            chunking: chunking_of(&src),
        })
    }

    /// Edits, restores, disables or enables one chunk of a document (writers only), as
    /// `editor`. The document is cut again on this node before the answer, and an edited or
    /// re-enabled text is embedded (when embedding is on), so every search sees the change
    /// at once; other nodes follow the change feed.
    pub fn edit_kb_chunk(
        &self,
        kb_key: &str,
        doc_key: &str,
        chunk_id: &str,
        change: &ChunkChange,
        editor: &str,
    ) -> Result<(ChunkView, EmbeddingNow)> {
        let file = self.kb_document(kb_key, doc_key)?;
        self.require(Access::Write, "editing a chunk")?;
        if change.content.is_none() && change.enabled.is_none() {
            return Err(Error::invalid(
                "give \"content\" (a text, or null to restore the text as cut) or \"enabled\"",
            ));
        }
        if let Some(Some(text)) = &change.content {
            let n = text.chars().count();
            if text.trim().is_empty() {
                return Err(Error::invalid(
                    "content must not be empty: disable the chunk instead (\"enabled\": false)",
                ));
            }
            if n > MAX_CHUNK_EDIT_CHARS {
                return Err(Error::invalid(format!(
                    "content is {n} characters; a chunk holds at most {MAX_CHUNK_EDIT_CHARS}"
                )));
            }
        }
        let doc = self.converted_document(&file)?;
        let store = self.store();
        let missing = || {
            Error::not_found(format!(
                "chunk '{chunk_id}' not found in document '{doc_key}' (a re-sync or re-cut \
                 that changed its text gives it another id: list the chunks again)"
            ))
        };
        let src = store.chunk_source(doc.id)?.ok_or_else(missing)?;
        let cut = cut_chunks(&src, &self.ingest.chunk).map_err(limit_error)?;
        let (index, target) = cut
            .iter()
            .enumerate()
            .find(|(_, c)| c.key == chunk_id)
            .ok_or_else(missing)?;
        let original = target.chunk.text(&src.body);
        let mut text = target.edit.and_then(|e| e.text.clone());
        if let Some(content) = &change.content {
            // The text as cut again is no edit.
            text = content.clone().filter(|t| t != original);
        }
        let disabled = match change.enabled {
            Some(enabled) => !enabled,
            None => target.edit.is_some_and(|e| e.disabled),
        };
        let edit = (text.is_some() || disabled).then(|| ChunkEdit {
            key: target.key.clone(),
            text: text.clone(),
            disabled,
            edited_by: editor.to_owned(),
            edited_at: quarry_core::now_millis(),
        });
        if !store.set_chunk_edit(doc.id, chunk_id, edit.as_ref())? {
            return Err(missing());
        }
        self.follow_feed()?;
        let embedding = if disabled {
            EmbeddingNow::Off
        } else {
            let embedded = text.as_deref().unwrap_or(original);
            self.embed_now(
                file.collection_id,
                &crate::index::chunking::embed_input(&src.title, &target.chunk.heading, embedded),
            )?
        };
        // An edit never moves the cut: the chunk as it now is, without reading it again.
        let after = CutChunk {
            chunk: target.chunk.clone(),
            key: target.key.clone(),
            edit: edit.as_ref(),
        };
        Ok((view(&after, index, &src.body), embedding))
    }

    /// Cuts a document again with its own chunk size and overlap (`None`: its knowledge
    /// base's again), writers only; people's edits apply to the chunks the new cut yields
    /// again. The new chunks are keyword-searchable when this returns; their vectors come
    /// from the background embedding.
    pub fn recut_kb_document(
        &self,
        kb_key: &str,
        doc_key: &str,
        chunk_size: Option<u32>,
        chunk_overlap: Option<u32>,
    ) -> Result<Recut> {
        let file = self.kb_document(kb_key, doc_key)?;
        self.require(Access::Write, "re-cutting a document")?;
        let chars = crate::kb::knowledge::validate_chunking(chunk_size, chunk_overlap)?
            .map(|(size, overlap)| (size as usize, overlap as usize));
        let doc = self.converted_document(&file)?;
        let store = self.store();
        let missing = || Error::not_found(format!("document '{doc_key}' not found"));
        if !store.set_document_chunking(doc.id, chars)? {
            return Err(missing());
        }
        self.follow_feed()?;
        let src = store.chunk_source(doc.id)?.ok_or_else(missing)?;
        let cut = cut_chunks(&src, &self.ingest.chunk).map_err(limit_error)?;
        let edits_kept = src
            .edits
            .iter()
            .filter(|e| cut.iter().any(|c| c.key == e.key))
            .count();
        let embedding = if self.embedding_enabled()? {
            store.enqueue_embed(file.collection_id)?;
            EmbeddingNow::Queued
        } else {
            EmbeddingNow::Off
        };
        Ok(Recut {
            chunks: cut.len(),
            edits_kept,
            edits_unmatched: src.edits.len() - edits_kept,
            chunking: chunking_of(&src),
            embedding,
        })
    }

    /// Embeds one chunk text now and adds the chunks that have vectors to the vector index;
    /// queues the collection's background embedding instead when the model is not at hand.
    fn embed_now(&self, collection_id: i64, input: &str) -> Result<EmbeddingNow> {
        if !self.embedding_enabled()? {
            return Ok(EmbeddingNow::Off);
        }
        let queued = || -> Result<EmbeddingNow> {
            self.store().enqueue_embed(collection_id)?;
            Ok(EmbeddingNow::Queued)
        };
        // No vector index yet: the first embedding run builds it.
        let Some(key) = self.vector_model()? else {
            return queued();
        };
        // A model that cannot load now: the background embedding retries it.
        let Ok(model) = self.embedder(&NoProgress) else {
            return queued();
        };
        if Self::identity_key(model.as_ref())? != key {
            return queued();
        }
        let vectors = match model.embed_passages(&[input]) {
            Ok(v) if v.len() == 1 => v,
            Ok(_) | Err(_) => return queued(),
        };
        let hash = quarry_ingest::content_hash(input.as_bytes());
        let rows: Vec<(String, Vec<f32>)> =
            vectors.into_iter().map(|v| (hash.clone(), v)).collect();
        self.store().put_embeddings(&key, &rows)?;
        let guard = self.lock_writes(&NoProgress)?;
        self.flush_vectors(&guard, &NoProgress)?;
        Ok(EmbeddingNow::Done)
    }
}

/// The settings a chunk source is cut with, and where they come from.
fn chunking_of(src: &quarry_store::ChunkSource) -> Chunking {
    let options = crate::index::chunking::chunk_options(src);
    Chunking {
        chunk_size: options.max_size,
        chunk_overlap: options.overlap,
        from: match (src.own_chunking, src.chunk_chars) {
            (true, _) => ChunkingFrom::Document,
            (false, Some(_)) => ChunkingFrom::KnowledgeBase,
            (false, None) => ChunkingFrom::Default,
        },
    }
}
