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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use quarry_core::{Error, Result};
use quarry_metadata::{FieldSummary, Fields, Filter, Metadata, Value};

use crate::engine::Engine;
use crate::kb::filter_state::FilterState;

/// The built-in fields, in the order discovery lists them.
pub const BUILT_IN_FIELDS: [&str; 4] = ["collection", "path", "title", "indexed"];

/// Most values discovery lists per field.
pub(crate) const MAX_TOP_VALUES: usize = 50;

/// A document's fields with its collection's name (the fourth built-in field, read at
/// request time: renaming a collection re-indexes nothing). Its stored fields win where
/// names meet, as over the other built-in ones.
struct InCollection<'a> {
    collection: &'a Value,
    fields: &'a Metadata,
}

impl Fields for InCollection<'_> {
    fn field(&self, name: &str) -> Option<&Value> {
        self.fields
            .field(name)
            .or_else(|| (name == "collection").then_some(self.collection))
    }
}

impl InCollection<'_> {
    /// Whether the document has `name` at all.
    fn has(&self, name: &str) -> bool {
        self.field(name).is_some()
    }

    /// A copy with `collection` in it (what discovery summarises).
    fn to_metadata(&self) -> Metadata {
        let mut fields = self.fields.clone();
        fields
            .0
            .entry("collection".into())
            .or_insert_with(|| self.collection.clone());
        fields
    }
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
            as_of: self.as_of,
            request: None,
        }
    }

    /// What limits this handle's searches besides the query, for a request that asked to
    /// explain: the filter as understood, the readable documents it lets through, the moment.
    pub(crate) fn search_explanation(
        &self,
    ) -> Result<crate::retrieval::knowledge_search::SearchExplanation> {
        Ok(crate::retrieval::knowledge_search::SearchExplanation {
            filter: self.filter.as_deref().map(|f| f.filter.to_json()),
            documents_matching_filter: self.allowed_documents()?.map(|a| a.len()),
            as_of: self.as_of,
        })
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
        let mut missing: Vec<&str> = filter
            .fields()
            .into_iter()
            .filter(|f| !BUILT_IN_FIELDS.contains(f))
            .collect();
        let mut allowed = HashSet::new();
        self.visit_readable(None, &mut |id, doc| {
            if !missing.is_empty() {
                missing.retain(|f| !doc.has(f));
            }
            if filter.matches(doc)
                && let Ok(id) = u64::try_from(id)
            {
                allowed.insert(id);
            }
        })?;
        if let Some(field) = missing.first() {
            let mut known: BTreeSet<String> =
                BUILT_IN_FIELDS.into_iter().map(str::to_owned).collect();
            self.visit_readable(None, &mut |_, doc| {
                known.extend(doc.fields.0.keys().cloned());
            })?;
            let list: Vec<&str> = known.iter().map(String::as_str).collect();
            return Err(Error::invalid(format!(
                "no document in reach has the field {field:?}; fields here: {} \
                 (see 'quarry metadata' or GET /api/v1/metadata)",
                list.join(", ")
            )));
        }
        Ok(Some(
            state.allowed.get_or_init(|| Arc::new(allowed)).clone(),
        ))
    }

    /// Calls `visit` with each document this handle may read in `collection` (all it may
    /// use when `None`) and its fields: from this node's keyword index, which follows the
    /// store's feed and keeps each document's fields parsed ([`quarry_fts::FtsIndex::field_table`]),
    /// or from the store while this node has no index yet.
    fn visit_readable(
        &self,
        collection: Option<&str>,
        visit: &mut dyn FnMut(i64, &InCollection<'_>),
    ) -> Result<()> {
        let names: HashMap<i64, Value> = self
            .store()
            .collection_names(self.space())?
            .into_iter()
            .filter(|(id, name)| {
                self.scope().allows(*id) && collection.is_none_or(|wanted| name == wanted)
            })
            .map(|(id, name)| (id, Value::String(name)))
            .collect();
        if let (Some(name), true) = (collection, names.is_empty()) {
            return Err(Error::NotFound(format!("collection {name:?} not found")));
        }
        let ids: Vec<i64> = names.keys().copied().collect();
        let hidden = self.hidden_in(Some(&ids))?;
        // Knowledge entries not valid at this handle's moment are history, not fields here.
        let out_of_time: HashSet<i64> = self.out_of_time(Some(&ids))?.into_iter().collect();
        let hides =
            |id: i64| hidden.as_ref().is_some_and(|h| h.hides(id)) || out_of_time.contains(&id);
        if let Some(index) = self.fts()? {
            index.reload()?;
            for doc in index.field_table()?.iter() {
                if let Some(collection) = names.get(&doc.collection_id)
                    && !hides(doc.id)
                {
                    let fields = InCollection {
                        collection,
                        fields: &doc.fields,
                    };
                    visit(doc.id, &fields);
                }
            }
            return Ok(());
        }
        for doc in self.store().document_fields(&ids)? {
            if hides(doc.id) {
                continue;
            }
            let fields = Metadata::of_document(&doc.path, &doc.title, doc.indexed_at, &doc.meta);
            let collection = Value::String(doc.collection);
            visit(
                doc.id,
                &InCollection {
                    collection: &collection,
                    fields: &fields,
                },
            );
        }
        Ok(())
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
        let mut metadata: Vec<Metadata> = Vec::new();
        self.visit_readable(collection, &mut |_, doc| {
            if filter.is_none_or(|f| f.matches(doc)) {
                metadata.push(doc.to_metadata());
            }
        })?;
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

/// What [`Engine::metadata_fields`] found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MetadataReport {
    /// Documents summarised.
    pub documents: u64,
    /// Their fields, most common first.
    pub fields: Vec<FieldSummary>,
}
