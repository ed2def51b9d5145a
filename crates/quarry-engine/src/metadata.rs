//! Document metadata (issue 44): what a document's fields are, which documents a filter
//! lets through, and what discovery tells a caller about the fields in its reach.
//!
//! A document's fields are its stored ones (front matter, document properties, the fields
//! given with its file, merged at ingest) over four built-in ones every document has:
//! `collection`, `path`, `title` and `indexed` (the date it was last indexed). A filter is
//! resolved, once per request, to the set of documents it matches among those the caller may
//! read; searches then rank among that set only ([`Engine::filtered`]), while their scores
//! are computed as for the same search without the filter, so a filter decides which
//! documents come back, never how they score.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, OnceLock};

use quarry_core::{Error, Result};
use quarry_metadata::{Date, FieldSummary, Filter, Metadata, Value};
use quarry_store::DocFields;

use crate::Engine;

/// The built-in fields, in the order discovery lists them.
pub const BUILT_IN_FIELDS: [&str; 4] = ["collection", "path", "title", "indexed"];

/// Most values discovery lists per field.
pub(crate) const MAX_TOP_VALUES: usize = 50;

/// A document's fields as a filter reads them: the built-in ones, then its stored ones
/// (which win where names meet).
pub(crate) fn document_metadata(doc: &DocFields) -> Metadata {
    let mut fields = Metadata::default();
    fields
        .0
        .insert("collection".into(), Value::String(doc.collection.clone()));
    fields
        .0
        .insert("path".into(), Value::String(doc.path.clone()));
    fields
        .0
        .insert("title".into(), Value::String(doc.title.clone()));
    fields.0.insert(
        "indexed".into(),
        Value::Date(Date {
            millis: doc.indexed_at,
            has_time: true,
        }),
    );
    if doc.meta.len() > 2 {
        fields.merge(Metadata::decode(&doc.meta));
    }
    fields
}

impl Engine {
    /// This handle limited to the documents `filter` matches, for one search request. The
    /// results of every search through it come from those documents only; their scores are
    /// those of the same search without the filter (see [`Engine::rank_among`]).
    pub fn filtered(&self, filter: Option<Filter>) -> Engine {
        let Some(filter) = filter else {
            return self.clone();
        };
        Engine {
            shared: self.shared.clone(),
            scope: self.scope.clone(),
            ranking_scope: Some(self.ranking_scope_or_own()),
            filter: Some(Arc::new(FilterState {
                filter,
                allowed: OnceLock::new(),
            })),
        }
    }

    /// The documents (keyword-index ids) this handle's filter lets through among those it
    /// may read; `None` without a filter. A field no readable document has is an error
    /// naming the fields there are: an agent that guessed a key learns the right one.
    pub(crate) fn allowed_documents(&self) -> Result<Option<Arc<HashSet<u64>>>> {
        let Some(state) = self.filter.as_deref() else {
            return Ok(None);
        };
        if let Some(allowed) = state.allowed.get() {
            return Ok(Some(allowed.clone()));
        }
        let filter = &state.filter;
        let docs = self.readable_fields(None)?;
        let metadata: Vec<(i64, Metadata)> =
            docs.iter().map(|d| (d.id, document_metadata(d))).collect();
        let mut known: BTreeSet<&str> = BUILT_IN_FIELDS.into_iter().collect();
        for (_, m) in &metadata {
            known.extend(m.0.keys().map(String::as_str));
        }
        for field in filter.fields() {
            if !known.contains(field) {
                let list: Vec<&str> = known.iter().copied().collect();
                return Err(Error::invalid(format!(
                    "no document in reach has the field {field:?}; fields here: {} \
                     (see 'quarry metadata' or GET /api/v1/metadata)",
                    list.join(", ")
                )));
            }
        }
        let allowed: Arc<HashSet<u64>> = Arc::new(
            metadata
                .iter()
                .filter(|(_, m)| filter.matches(m))
                .filter_map(|(id, _)| u64::try_from(*id).ok())
                .collect(),
        );
        Ok(Some(state.allowed.get_or_init(|| allowed).clone()))
    }

    /// The fields of the documents this handle may read in `collection` (all it may use
    /// when `None`).
    fn readable_fields(&self, collection: Option<&str>) -> Result<Vec<DocFields>> {
        let ids: Vec<i64> = match collection {
            Some(name) => self
                .collections()?
                .iter()
                .filter(|c| c.name == name)
                .map(|c| c.id)
                .collect(),
            None => self.collections()?.iter().map(|c| c.id).collect(),
        };
        if collection.is_some() && ids.is_empty() {
            return Err(Error::NotFound(format!(
                "collection {:?} not found",
                collection.unwrap_or_default()
            )));
        }
        let mut docs = self.store().document_fields(&ids)?;
        if let Some(hidden) = self.hidden_in(Some(&ids))? {
            docs.retain(|d| !hidden.hides(d.id));
        }
        Ok(docs)
    }

    /// Discovery: the fields of the documents this handle may read (in `collection`, or all
    /// it may use), with their types, how many documents have each, and their `top` most
    /// frequent values; optionally only the documents `filter` matches.
    pub fn metadata_fields(
        &self,
        collection: Option<&str>,
        filter: Option<&Filter>,
        top: usize,
    ) -> Result<MetadataReport> {
        let docs = self.readable_fields(collection)?;
        let metadata: Vec<Metadata> = docs
            .iter()
            .map(document_metadata)
            .filter(|m| filter.is_none_or(|f| f.matches(m)))
            .collect();
        Ok(MetadataReport {
            documents: metadata.len() as u64,
            fields: quarry_metadata::summarize(&metadata, top.min(MAX_TOP_VALUES)),
        })
    }

    /// A document's fields as results show them (built-in ones left out: results carry
    /// collection, path and title already).
    pub(crate) fn shown_metadata(meta: &str) -> Option<serde_json::Value> {
        if meta.len() <= 2 {
            return None;
        }
        let m = Metadata::decode(meta);
        (!m.is_empty()).then(|| m.to_json())
    }
}

/// The fields of a document's own properties (Office `docProps/core.xml`, a PDF's Info
/// dictionary): `title`, `author`, `subject`, `keywords`, `created`, `modified`.
pub(crate) fn property_fields(p: &quarry_convert::DocProperties) -> Metadata {
    let mut fields = Metadata::default();
    let mut text = |name: &str, v: &Option<String>| {
        if let Some(v) = v.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            fields.0.insert(name.to_owned(), Value::from_text(v));
        }
    };
    text("title", &p.title);
    text("author", &p.author);
    text("subject", &p.subject);
    text("created", &p.created);
    text("modified", &p.modified);
    if !p.keywords.is_empty() {
        fields.0.insert(
            "keywords".into(),
            Value::List(
                p.keywords
                    .iter()
                    .map(|k| Value::String(k.clone()))
                    .collect(),
            ),
        );
    }
    fields
}

/// A converted file's document fields, encoded: its front matter (Markdown; its range is
/// added to `furniture`), then its document properties, then a note's tags, then the
/// fields given with the file, each winning over the ones before.
pub(crate) fn converted_fields(
    file: &quarry_store::KbFile,
    converted: &mut quarry_convert::Converted,
) -> String {
    let mut fields = if matches!(file.format.as_str(), "md" | "markdown") {
        quarry_ingest::front_matter_fields(&converted.markdown, &mut converted.furniture)
    } else {
        Metadata::default()
    };
    fields.merge(property_fields(&converted.properties));
    if let Some(note) = file.note.as_ref().filter(|n| !n.tags.is_empty()) {
        fields.0.insert(
            "tags".into(),
            Value::List(note.tags.iter().map(|t| Value::String(t.clone())).collect()),
        );
    }
    fields.merge(Metadata::decode(&file.metadata.to_string()));
    fields.encode()
}

/// A request's metadata filter and, once resolved, the documents it lets through (kept
/// for the request: its keyword and vector halves and every query variant share it).
pub(crate) struct FilterState {
    filter: Filter,
    allowed: OnceLock<Arc<HashSet<u64>>>,
}

/// What [`Engine::metadata_fields`] found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MetadataReport {
    /// Documents summarised.
    pub documents: u64,
    /// Their fields, most common first.
    pub fields: Vec<FieldSummary>,
}
