//! The chunk texts to embed, read span by span, for the embed jobs ([`quarry_store::JobQueue`])
//! and the vector index's rebuilds ([`quarry_store::SemanticStore`]).

use std::collections::HashMap;

use quarry_core::Result;
use rusqlite::{Connection, OptionalExtension};

use quarry_store::EmbedJob;

use crate::error::db_err;

/// The columns of a chunk text to embed (`chunks k` joined to `documents d`), read by
/// [`embed_span_row`]: the chunk's span of the body, never the body. A query that named
/// `d.body` here read (and, grouped or sorted, kept) the whole body once per chunk: claiming
/// 256 texts of a 4,000-chunk document held 4,000 copies of its 4 MB body at once (issue 65:
/// 20.5 GB), and the time grew with the square of the document. [`embed_texts`] reads each
/// body once and cuts the spans in Rust.
pub(crate) const EMBED_TEXT_COLUMNS: &str =
    "k.hash, d.title, k.heading, k.document_id, k.byte_start, k.byte_end, k.text";

/// A row of [`EMBED_TEXT_COLUMNS`]: a chunk text to embed, its span not yet cut.
pub(crate) struct EmbedSpan {
    job: EmbedJob,
    document_id: i64,
    start: i64,
    end: i64,
    /// An edited chunk's own text (then no span is cut).
    edited: bool,
}

/// A row of [`EMBED_TEXT_COLUMNS`].
pub(crate) fn embed_span_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EmbedSpan> {
    let text: Option<String> = r.get(6)?;
    Ok(EmbedSpan {
        edited: text.is_some(),
        job: EmbedJob {
            hash: r.get(0)?,
            title: r.get(1)?,
            heading: r.get(2)?,
            text: text.unwrap_or_default(),
        },
        document_id: r.get(3)?,
        start: r.get(4)?,
        end: r.get(5)?,
    })
}

/// The chunk texts of `spans`, in order: an edited chunk's text, else its span cut from the
/// body, each body read once and let go before the next (memory: one body and the texts,
/// whatever the documents' sizes).
pub(crate) fn embed_texts(conn: &Connection, spans: Vec<EmbedSpan>) -> Result<Vec<EmbedJob>> {
    let mut by_doc: HashMap<i64, Vec<usize>> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        if !s.edited {
            by_doc.entry(s.document_id).or_default().push(i);
        }
    }
    let mut texts: Vec<Option<String>> = vec![None; spans.len()];
    let mut body_of = conn
        .prepare_cached("SELECT body FROM documents WHERE id = ?1")
        .map_err(db_err)?;
    for (doc, rows) in by_doc {
        let body: String = body_of
            .query_row([doc], |r| r.get(0))
            .optional()
            .map_err(db_err)?
            .unwrap_or_default();
        for i in rows {
            texts[i] = Some(quarry_store::byte_span(&body, spans[i].start, spans[i].end));
        }
    }
    Ok(spans
        .into_iter()
        .zip(texts)
        .map(|(s, text)| match text {
            Some(text) => EmbedJob { text, ..s.job },
            None => s.job,
        })
        .collect())
}
