//! The fields of the two kinds of index (documents, passages) and the tokenizers they use.

use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, Schema, SchemaBuilder, TextFieldIndexing,
    TextOptions,
};

/// The tokenizer of the searched `text` field.
pub(crate) const TOKENIZER: &str = "quarry";
/// The tokenizer of the `exact` field: the words' exact forms only.
pub(crate) const EXACT_TOKENIZER: &str = "quarry-exact";

/// The fields of one kind of index.
#[derive(Clone, Copy)]
pub(crate) struct Fields {
    pub(crate) id: Field,
    pub(crate) collection: Field,
    pub(crate) text: Field,
    /// The same text's exact forms
    /// ([`TokenKind::Exact`](crate::analyzer::TokenKind::Exact)), a field of their own so
    /// they neither lengthen `text` (BM25's length norm) nor share its statistics.
    pub(crate) exact: Field,
    /// Passage indexes only: the document a passage belongs to.
    pub(crate) doc: Option<Field>,
    /// Document indexes only: what a metadata filter reads
    /// ([`FtsIndex::field_table`](crate::FtsIndex::field_table)).
    pub(crate) stored: Option<StoredFields>,
}

/// The stored (not indexed) fields of a document index's entries: the document's path,
/// title, when it was indexed and its metadata, so a node resolves a metadata filter from
/// its own index (which follows the store's feed) without reading every document's row.
#[derive(Clone, Copy)]
pub(crate) struct StoredFields {
    pub(crate) path: Field,
    pub(crate) title: Field,
    pub(crate) indexed: Field,
    pub(crate) meta: Field,
}

/// A passage index: the base fields and the document each passage belongs to.
pub(crate) fn passage_schema() -> (Schema, Fields) {
    let (mut b, fields) = base_schema();
    let doc = b.add_u64_field("doc", INDEXED | FAST);
    (
        b.build(),
        Fields {
            doc: Some(doc),
            ..fields
        },
    )
}

/// What both kinds of index have: the entry's id, its collection and the searched text.
pub(crate) fn base_schema() -> (SchemaBuilder, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let exact = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(EXACT_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        id: b.add_u64_field("id", INDEXED | FAST | STORED),
        collection: b.add_u64_field("collection", INDEXED | FAST),
        text: b.add_text_field("text", text),
        exact: b.add_text_field("exact", exact),
        doc: None,
        stored: None,
    };
    (b, fields)
}

/// A document index: the base fields and the stored ones a metadata filter reads.
pub(crate) fn schema() -> (Schema, Fields) {
    let (mut b, fields) = base_schema();
    let stored = StoredFields {
        path: b.add_text_field("path", STORED),
        title: b.add_text_field("title", STORED),
        indexed: b.add_i64_field("indexed", STORED),
        meta: b.add_text_field("meta", STORED),
    };
    (
        b.build(),
        Fields {
            stored: Some(stored),
            ..fields
        },
    )
}
