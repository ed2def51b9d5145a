//! Each document's fields as a node's keyword index holds them
//! ([`FtsIndex::field_table`](crate::FtsIndex::field_table)): what a metadata filter is
//! resolved against on every node, without reading every document's row from the store on
//! every request.
//!
//! Segments never change once written, so a segment's entries are read from the doc store
//! and parsed once, then kept until the segment leaves the index (merged away or the index
//! dropped); deletions are applied at read time from the searcher's own alive bitsets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use quarry_core::Result;
use quarry_metadata::Metadata;
use tantivy::index::SegmentId;
use tantivy::schema::{Field, Value as _};
use tantivy::{DocId, Searcher, SegmentReader, TantivyDocument};

use crate::error::idx_err;
use crate::schema::StoredFields;

/// One document's fields in the keyword index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedFields {
    /// The store's document id.
    pub id: i64,
    /// Its collection's id.
    pub collection_id: i64,
    /// Its fields (`quarry_metadata::Metadata::of_document`: the built-in `path`, `title`
    /// and `indexed` under its stored ones; `collection` is left to the reader, as a
    /// collection's name can change without its documents being indexed again).
    pub fields: Metadata,
}

/// A segment's entries, by doc id (`None` for an entry without stored fields).
pub(crate) type SegmentFields = Vec<Option<IndexedFields>>;

/// Parsed segments by id (see the module docs).
#[derive(Default)]
pub(crate) struct FieldCache(Mutex<HashMap<SegmentId, Arc<SegmentFields>>>);

/// The fields of every document visible to one searcher (see
/// [`FtsIndex::field_table`](crate::FtsIndex::field_table)).
pub struct FieldTable {
    searcher: Searcher,
    segments: Vec<Arc<SegmentFields>>,
}

impl FieldTable {
    /// Every live document's fields, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &IndexedFields> {
        self.searcher
            .segment_readers()
            .iter()
            .zip(&self.segments)
            .flat_map(|(segment, entries)| {
                let alive = segment.alive_bitset();
                entries.iter().enumerate().filter_map(move |(doc, entry)| {
                    let entry = entry.as_ref()?;
                    let doc = DocId::try_from(doc).ok()?;
                    alive.is_none_or(|a| a.is_alive(doc)).then_some(entry)
                })
            })
    }

    /// How many documents the table holds.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl FieldCache {
    /// The fields of every document `searcher` sees, segments read through this cache (see
    /// [`FtsIndex::field_table`](crate::FtsIndex::field_table)); empty without `stored`.
    pub(crate) fn table(
        &self,
        searcher: Searcher,
        id_field: Field,
        stored: Option<StoredFields>,
    ) -> Result<FieldTable> {
        let Some(stored) = stored else {
            return Ok(FieldTable {
                searcher,
                segments: Vec::new(),
            });
        };
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut segments = Vec::with_capacity(searcher.segment_readers().len());
        for segment in searcher.segment_readers() {
            let id = segment.segment_id();
            let entries = match cache.get(&id) {
                Some(entries) => entries.clone(),
                None => {
                    let entries = Arc::new(read_segment(segment, id_field, stored)?);
                    cache.insert(id, entries.clone());
                    entries
                }
            };
            segments.push(entries);
        }
        // Segments merged away or dropped are forgotten.
        let live: std::collections::HashSet<SegmentId> = searcher
            .segment_readers()
            .iter()
            .map(SegmentReader::segment_id)
            .collect();
        cache.retain(|id, _| live.contains(id));
        Ok(FieldTable { searcher, segments })
    }
}

/// Every entry of a segment, deleted ones included (the alive bitset changes; the entries
/// do not).
fn read_segment(
    segment: &SegmentReader,
    id_field: Field,
    stored: StoredFields,
) -> Result<SegmentFields> {
    let collections = segment.fast_fields().u64("collection").map_err(idx_err)?;
    let store = segment.get_store_reader(1).map_err(|e| idx_err(e.into()))?;
    let mut out = Vec::with_capacity(segment.max_doc() as usize);
    for (doc, entry) in store.iter::<TantivyDocument>(None).enumerate() {
        let entry = entry.map_err(idx_err)?;
        let doc = DocId::try_from(doc).unwrap_or(DocId::MAX);
        let text = |field| {
            entry
                .get_first(field)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
        };
        let id = entry.get_first(id_field).and_then(|v| v.as_u64());
        let (Some(id), Some(collection)) = (id, collections.first(doc)) else {
            out.push(None);
            continue;
        };
        let indexed = entry
            .get_first(stored.indexed)
            .and_then(|v| v.as_i64())
            .unwrap_or_default();
        out.push(Some(IndexedFields {
            id: id as i64,
            collection_id: collection as i64,
            fields: Metadata::of_document(
                text(stored.path),
                text(stored.title),
                indexed,
                text(stored.meta),
            ),
        }));
    }
    Ok(out)
}
