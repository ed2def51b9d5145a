//! Cutting documents into chunks: the passages answers are ranked by, cited by page, and
//! embedded. Chunks are cut once, when a document is keyword-indexed (so a passage is
//! searchable by keyword from the moment its document is), in characters: the knowledge
//! base's own size and overlap, else seed 003's 1,000 characters with 200 overlap. The
//! embedding model never re-cuts them: an input longer than the model's window is truncated
//! by the model, and the keyword index still holds all of its text.

use quarry_ingest::chunk::{CharSizer, ChunkOptions, Layout, chunk_document};
use quarry_store::{ChunkSource, DocChunks, NewChunk};

use crate::semantic::embed_input;

/// Bumped whenever the chunker or the passage index's layout changes: every document is then
/// cut and passage-indexed again by the next writer (stored embeddings are kept: they are
/// keyed by the text embedded, so unchanged chunks are not embedded again).
pub(crate) const PASSAGES_VERSION: &str = "2";

/// The options a document's chunks are cut with.
pub(crate) fn chunk_options(src: &ChunkSource) -> ChunkOptions {
    match src.chunk_chars {
        Some((size, overlap)) => ChunkOptions {
            max_size: size,
            overlap: overlap.min(size / 2),
        },
        None => ChunkOptions::RAG_CHARS,
    }
}

/// A document's chunks, ready to store: cut inside pages, furniture left out, each with its
/// page and heading path.
pub(crate) fn cut(src: &ChunkSource) -> DocChunks {
    let layout = Layout {
        pages: &src.pages,
        furniture: &src.furniture,
    };
    let chunks = chunk_document(&src.body, layout, chunk_options(src), &CharSizer)
        .into_iter()
        .map(|c| NewChunk {
            hash: quarry_ingest::content_hash(
                embed_input(&src.title, &c.heading, c.text(&src.body)).as_bytes(),
            ),
            page: c.page,
            byte_start: c.start,
            byte_end: c.end,
            line_start: c.line_start,
            line_end: c.line_end,
            heading: c.heading,
        })
        .collect();
    DocChunks {
        document_id: src.id,
        doc_hash: src.hash.clone(),
        chunks,
    }
}
