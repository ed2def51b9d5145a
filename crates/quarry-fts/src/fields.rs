//! Each document's fields as a node's keyword index holds them ([`FtsIndex::field_table`]):
//! what a metadata filter is resolved against on every node, without reading every
//! document's row from the store on every request.
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

use crate::{FtsIndex, StoredFields, idx_err};

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

/// The fields of every document visible to one searcher (see [`FtsIndex::field_table`]).
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

impl FtsIndex {
    /// The fields of every document this index's current searcher sees. A segment is read
    /// from disk the first time it is asked for, after that from memory; an index without
    /// stored fields (a passage index) has an empty table.
    pub fn field_table(&self) -> Result<FieldTable> {
        let searcher = self.reader.searcher();
        let Some(stored) = self.fields.stored else {
            return Ok(FieldTable {
                searcher,
                segments: Vec::new(),
            });
        };
        let mut cache = self.field_cache.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut segments = Vec::with_capacity(searcher.segment_readers().len());
        for segment in searcher.segment_readers() {
            let id = segment.segment_id();
            let entries = match cache.get(&id) {
                Some(entries) => entries.clone(),
                None => {
                    let entries = Arc::new(read_segment(segment, self.fields.id, stored)?);
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

#[cfg(test)]
mod tests {
    use quarry_metadata::Value;
    use quarry_store::{IndexDoc, IndexWork};

    use crate::FtsIndex;

    fn doc(id: i64, collection_id: i64, meta: &str) -> IndexDoc {
        IndexDoc {
            id,
            collection_id,
            path: format!("{id}.md"),
            title: format!("Title {id}"),
            body: "body text".into(),
            indexed_at: 1_780_000_000_000 + id,
            meta: meta.into(),
        }
    }

    fn table(index: &FtsIndex) -> Vec<(i64, i64, Option<Value>, Option<Value>)> {
        let mut out: Vec<_> = index
            .field_table()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|d| {
                (
                    d.id,
                    d.collection_id,
                    d.fields.get("status").cloned(),
                    d.fields.get("path").cloned(),
                )
            })
            .collect();
        out.sort_by_key(|e| e.0);
        out
    }

    /// The table follows the index: new segments are read, replaced and deleted documents
    /// drop out, cached segments answer again, and built-in fields sit under stored ones.
    #[test]
    fn the_field_table_follows_writes_deletes_and_merges() -> quarry_core::Result<()> {
        let index = FtsIndex::in_memory()?;
        let mut w = index.writer_with_threads(1)?;
        w.apply(&IndexWork {
            upserts: vec![
                doc(1, 7, r#"{"status":"draft"}"#),
                doc(2, 7, "{}"),
                doc(3, 8, r#"{"path":"given"}"#),
            ],
            deletes: vec![],
        })?;
        w.commit()?;
        index.reload()?;
        let draft = Some(Value::String("draft".into()));
        let path = |p: &str| Some(Value::String(p.into()));
        assert_eq!(
            table(&index),
            [
                (1, 7, draft.clone(), path("1.md")),
                (2, 7, None, path("2.md")),
                (3, 8, None, path("given")),
            ]
        );
        let first = index.field_table()?;
        let indexed = first
            .iter()
            .find(|d| d.id == 2)
            .and_then(|d| d.fields.get("indexed").cloned());
        assert!(matches!(indexed, Some(Value::Date(d)) if d.millis == 1_780_000_000_002));

        // Document 1 replaced (in a second segment), document 2 deleted.
        w.apply(&IndexWork {
            upserts: vec![doc(1, 7, r#"{"status":"published"}"#)],
            deletes: vec![2],
        })?;
        w.commit()?;
        index.reload()?;
        let published = Some(Value::String("published".into()));
        assert_eq!(
            table(&index),
            [
                (1, 7, published.clone(), path("1.md")),
                (3, 8, None, path("given")),
            ]
        );
        // A table taken earlier keeps answering for its own searcher.
        assert_eq!(first.len(), 3);

        // Merged into one segment: read again, same answer.
        let segments = index
            .index
            .searchable_segment_ids()
            .map_err(crate::idx_err)?;
        w.writer.merge(&segments).wait().map_err(crate::idx_err)?;
        w.commit()?;
        index.reload()?;
        assert_eq!(index.reader.searcher().segment_readers().len(), 1);
        assert_eq!(
            table(&index),
            [(1, 7, published, path("1.md")), (3, 8, None, path("given"))]
        );

        // A passage index keeps no fields.
        let dir = tempfile::tempdir().map_err(|e| quarry_core::Error::io("tmp", e))?;
        let passages = FtsIndex::open_or_create_passages(dir.path())?;
        assert!(passages.field_table()?.is_empty());
        Ok(())
    }
}
