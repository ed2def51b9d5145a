//! Cutting documents into chunks: the passages answers are ranked by, cited by page, and
//! embedded. Chunks are cut once, when a document is keyword-indexed (so a passage is
//! searchable by keyword from the moment its document is), in characters: the document's own
//! size and overlap (a person re-cut it), else its knowledge base's, else seed 003's 1,000
//! characters with 200 overlap. The embedding model never re-cuts them: an input longer than
//! the model's window is truncated by the model, and the keyword index still holds all of its
//! text.
//!
//! People's edits (`quarry_store::ChunkEdit`) are applied as chunks are cut: an edit names
//! the chunk it changes by [`chunk_key`] (its heading path and text as cut), so it holds
//! whenever a cut yields that chunk again — a re-sync that left its text alone, a re-cut — and
//! lapses with the text it was made on. A disabled chunk is not stored at all: no passage, no
//! vector, nothing to leave out later.
//!
//! Cutting runs in this process, not in a converter child, so it keeps to the chunking limits
//! itself ([`ChunkLimits`]: `QUARRY_CHUNK_TIMEOUT_SECS`, `QUARRY_CHUNK_MEMORY_MB`). An upload
//! is checked against them before it is stored ([`check_limits`]) and fails with the reason,
//! as one past the conversion limits does; a folder's file is skipped with it. What still
//! meets them when the passages are cut (a re-cut with other settings, a slower moment) is
//! stored without passages, searchable whole by keyword, rather than holding up the rest.

use quarry_core::Error;
use quarry_ingest::chunk::{
    CharSizer, Chunk, ChunkError, ChunkLimits, ChunkOptions, Layout, chunk_document_bounded,
};
use quarry_store::{ChunkEdit, ChunkSource, DocChunks, NewChunk};

/// Bumped whenever the chunker or the passage index's layout changes: every document is then
/// cut and passage-indexed again by the next writer (stored embeddings are kept: they are
/// keyed by the text embedded, so unchanged chunks are not embedded again). The passage
/// index's own layout follows the analyzer's version (`ANALYZER_VERSION`): a change there
/// rebuilds the index from the chunks as they are.
pub(crate) const PASSAGES_VERSION: &str = "2";

/// The options a document's chunks are cut with.
pub(crate) fn chunk_options(src: &ChunkSource) -> ChunkOptions {
    options_for(src.chunk_chars)
}

/// The options for a chunk size and overlap in characters (`None`: seed 003's).
fn options_for(chunk_chars: Option<(usize, usize)>) -> ChunkOptions {
    match chunk_chars {
        Some((size, overlap)) => ChunkOptions {
            max_size: size,
            overlap: overlap.min(size / 2),
        },
        None => ChunkOptions::RAG_CHARS,
    }
}

/// The key an edit names a chunk by: its heading path and text as cut (not the document's
/// title, which a re-sync may change while the chunk's text stays).
pub(crate) fn chunk_key(heading: &str, text: &str) -> String {
    let mut h = quarry_ingest::content_hash(format!("{heading}\n{text}").as_bytes());
    h.truncate(16);
    h
}

/// One chunk as the chunker cut it, with its key and the edit that applies to it.
pub(crate) struct CutChunk<'a> {
    /// The span the chunker cut.
    pub chunk: Chunk,
    /// Its [`chunk_key`].
    pub key: String,
    /// A person's change to it, if any.
    pub edit: Option<&'a ChunkEdit>,
}

/// Whether a document's Markdown (with its pages and furniture) can be cut with
/// `chunk_chars` (see [`options_for`]) within `limits`: what an upload is checked with before
/// it is stored.
pub(crate) fn check_limits(
    markdown: &str,
    layout: Layout<'_>,
    chunk_chars: Option<(usize, usize)>,
    limits: &ChunkLimits,
) -> Result<(), ChunkError> {
    chunk_document_bounded(
        markdown,
        layout,
        options_for(chunk_chars),
        &CharSizer,
        limits,
    )
    .map(drop)
}

/// A cut past its limits, as the engine's error for a request that needed it.
pub(crate) fn limit_error(e: ChunkError) -> Error {
    match e {
        ChunkError::Timeout(_) => Error::Unavailable(e.to_string()),
        ChunkError::OutOfMemory { .. } => Error::TooLarge(e.to_string()),
    }
}

/// The document's chunks as cut within `limits`, in order, each with its edit: every chunk,
/// disabled ones included (what the curation view lists).
pub(crate) fn cut_chunks<'a>(
    src: &'a ChunkSource,
    limits: &ChunkLimits,
) -> Result<Vec<CutChunk<'a>>, ChunkError> {
    let layout = Layout {
        pages: &src.pages,
        furniture: &src.furniture,
    };
    let chunks = chunk_document_bounded(&src.body, layout, chunk_options(src), &CharSizer, limits)?;
    Ok(chunks
        .into_iter()
        .map(|chunk| {
            let key = chunk_key(&chunk.heading, chunk.text(&src.body));
            let edit = src.edits.iter().find(|e| e.key == key);
            CutChunk { chunk, key, edit }
        })
        .collect())
}

/// A document's chunks, ready to store: cut inside pages, furniture left out, each with its
/// page and heading path; people's edits applied, disabled chunks left out. A document that
/// cannot be cut within `limits` gets none (module docs).
pub(crate) fn cut(src: &ChunkSource, limits: &ChunkLimits) -> DocChunks {
    let chunks = cut_chunks(src, limits)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !c.edit.is_some_and(|e| e.disabled))
        .map(|CutChunk { chunk: c, edit, .. }| {
            let text = edit.and_then(|e| e.text.clone());
            let embedded = text.as_deref().unwrap_or_else(|| c.text(&src.body));
            NewChunk {
                hash: quarry_ingest::content_hash(
                    embed_input(&src.title, &c.heading, embedded).as_bytes(),
                ),
                page: c.page,
                byte_start: c.start,
                byte_end: c.end,
                line_start: c.line_start,
                line_end: c.line_end,
                heading: c.heading,
                text,
            }
        })
        .collect();
    DocChunks {
        document_id: src.id,
        doc_hash: src.hash.clone(),
        chunks,
    }
}

/// The text embedded for a chunk: the document title gives short chunks their topic, unless
/// the chunk already opens with it, and the heading path (`3 The Root Filesystem › 3.15 /tmp`)
/// lets a section body match a question about its heading. Without a heading path the text is
/// what it was before paths existed, so those chunks keep their vectors.
pub fn embed_input(title: &str, heading: &str, chunk: &str) -> String {
    let first = chunk.trim_start().lines().next().unwrap_or("");
    let first = first.trim_start_matches('#').trim();
    let heading = heading.trim();
    let mut head = String::new();
    if !title.trim().is_empty() && !first.contains(title.trim()) {
        head.push_str(title);
    }
    if !heading.is_empty() && heading != title.trim() {
        if !head.is_empty() {
            head.push('\n');
        }
        head.push_str(heading);
    }
    if head.is_empty() {
        chunk.to_owned()
    } else {
        format!("{head}\n\n{chunk}")
    }
}
