//! Knowledge bases: uploads and the job queue, sources that sync, entries and notes, wiki pages, curation, readers and metadata.

pub(crate) mod curation;
pub(crate) mod entries;
pub(crate) mod filter_state;
pub(crate) mod ingest_options;
pub(crate) mod knowledge;
pub(crate) mod metadata;
pub(crate) mod notes;
pub(crate) mod page_history;
pub(crate) mod page_marks;
pub(crate) mod page_text;
pub(crate) mod pages;
pub(crate) mod readers;
pub(crate) mod source_options;
pub(crate) mod source_runs;
pub(crate) mod sources;
pub(crate) mod wiki_export;
pub(crate) mod wiki_log;
