//! Conformance cases for collections, documents, chunks, embeddings, settings and contexts (`Store`). Each case is a `pub fn store_…(store: &dyn Store)`
//! listed in the macro below.

use quarry_core::{CollectionKind, Error, Furniture, FurnitureKind, PageSpan};

use super::fixtures::{Model, SPACE, collection, doc, drain, id_of, position, read, truth};
use crate::{ChunkEdit, DocChange, DocChunks, NewChunk, Store};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_store {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::store];
            store_collections_are_listed_by_name_with_counts,
            store_rename_carries_contexts_and_refuses_clashes,
            store_remove_collection_takes_its_documents_chunks_and_contexts,
            store_apply_changes_upserts_touches_and_removes,
            store_apply_changes_to_a_missing_collection_fails,
            store_docids_grow_on_collision_and_say_nothing_across_spaces,
            store_documents_by_ids_keep_the_order_asked,
            store_document_lookups_stay_in_their_space,
            store_chunks_and_embeddings_follow_the_documents,
            store_a_new_layout_of_the_same_file_is_cut_again,
            store_embed_jobs_and_state_by_collection_and_limit,
            store_collections_to_embed_across_spaces_after_failures,
            store_reset_all_chunks_cuts_every_document_again,
            store_meta_and_the_expansion_cache,
            store_contexts_are_set_replaced_and_removed,
            store_feed_a_touch_is_not_a_change,
            store_feed_concurrent_writers_and_readers_converge,
            store_concurrent_writers_get_distinct_docids,
            store_chunking_racing_writes_never_keeps_stale_chunks,
            store_chunk_edits_and_own_chunking_have_a_document_cut_again,
        );
    };
}

#[doc(hidden)]
pub use __conformance_store;

fn chunk(start: usize, end: usize, hash: &str) -> NewChunk {
    NewChunk {
        byte_start: start,
        byte_end: end,
        line_start: 1,
        line_end: 1,
        hash: hash.into(),
        page: None,
        heading: String::new(),
        text: None,
    }
}

/// The content hash `doc(_, body)` gives.
fn hash_of(body: &str) -> String {
    body.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Plays the embedded mode's ANN file: absorbs whatever the store says it owes, as a vector
/// index following the store would (a backend that searches vectors in place owes nothing).
fn ann_sync(store: &dyn Store, model: &str) {
    let removed = store.ann_tombstones().expect("ann_tombstones");
    let mut added = Vec::new();
    let mut after = 0;
    loop {
        let page = store
            .ann_dirty_chunks(model, after, 100)
            .expect("ann_dirty_chunks");
        let Some(last) = page.last() else { break };
        after = last.0;
        added.extend(page.iter().map(|c| c.0));
    }
    store.ann_done(&removed, &added).expect("ann_done");
}

fn upsert(store: &dyn Store, collection_id: i64, changes: Vec<DocChange>) -> crate::IndexWork {
    store
        .apply_changes(collection_id, changes)
        .expect("apply_changes")
}

/// Collections are listed by name with their live document counts; lookups by name and id
/// answer `None` for what is not there.
pub fn store_collections_are_listed_by_name_with_counts(store: &dyn Store) {
    let b = collection(store, "b");
    let a = store
        .create_collection(SPACE, "a", CollectionKind::Folder, "/notes", "**/*.txt")
        .expect("create_collection");
    assert_eq!(
        (a.name.as_str(), a.path.as_str(), a.pattern.as_str()),
        ("a", "/notes", "**/*.txt")
    );
    assert_eq!((a.documents, a.last_updated_ms), (0, None));
    collection(store, "B");
    upsert(store, b, vec![doc("1.md", "one"), doc("2.md", "two")]);
    let names: Vec<(String, u64)> = store
        .collections(SPACE)
        .expect("collections")
        .into_iter()
        .map(|c| (c.name, c.documents))
        .collect();
    // By name as bytes compare (upper case first), whatever the backend's locale.
    assert_eq!(
        names,
        [
            ("B".to_owned(), 0),
            ("a".to_owned(), 0),
            ("b".to_owned(), 2)
        ]
    );
    let found = store
        .collection(SPACE, "a")
        .expect("collection")
        .expect("collection a");
    assert_eq!(found.id, a.id);
    assert_eq!(found.kind, CollectionKind::Folder);
    assert_eq!(found.space, SPACE);
    assert_eq!(store.collection(SPACE, "zzz").expect("collection"), None);
    assert_eq!(
        store.collection("elsewhere", "a").expect("collection"),
        None
    );
    store
        .mark_collection_scanned(a.id, 1_234_567)
        .expect("mark_collection_scanned");
    let scanned = store.collection(SPACE, "a").expect("collection");
    assert_eq!(scanned.and_then(|c| c.last_updated_ms), Some(1_234_567));
    assert_eq!(
        store.collection_space(b).expect("collection_space"),
        Some(SPACE.to_owned())
    );
    assert_eq!(
        store.collection_space(i64::MAX).expect("collection_space"),
        None
    );
    assert!(
        !store
            .collections_outside(SPACE)
            .expect("collections_outside")
    );
    store
        .create_collection("elsewhere", "x", CollectionKind::Folder, "/x", "*")
        .expect("create_collection elsewhere");
    assert!(
        store
            .collections_outside(SPACE)
            .expect("collections_outside")
    );
    assert!(
        store
            .collections_outside("elsewhere")
            .expect("collections_outside")
    );
    assert_eq!(
        store.collections("elsewhere").expect("collections").len(),
        1
    );
    assert!(
        store
            .collections("nowhere")
            .expect("collections")
            .is_empty()
    );
}

/// A rename carries the collection's contexts (and only its own) along; a taken name is a
/// conflict, a missing collection not found.
pub fn store_rename_carries_contexts_and_refuses_clashes(store: &dyn Store) {
    for n in ["a", "b"] {
        collection(store, n);
    }
    store.set_context(SPACE, "a", "whole").expect("set_context");
    store
        .set_context(SPACE, "a/notes", "n")
        .expect("set_context");
    store
        .set_context(SPACE, "ab/x", "other")
        .expect("set_context");
    store
        .set_context(SPACE, "a_/y", "like")
        .expect("set_context");
    match store.rename_collection(SPACE, "a", "b") {
        Err(Error::Conflict(_)) => {}
        other => panic!("rename onto a taken name: expected Conflict, got {other:?}"),
    }
    match store.rename_collection(SPACE, "a", "a") {
        Err(Error::Conflict(_)) => {}
        other => panic!("rename onto itself: expected Conflict, got {other:?}"),
    }
    match store.rename_collection(SPACE, "missing", "new") {
        Err(Error::NotFound(_)) => {}
        other => panic!("rename of a missing collection: expected NotFound, got {other:?}"),
    }
    store
        .rename_collection(SPACE, "a", "z")
        .expect("rename_collection");
    assert!(store.collection(SPACE, "a").expect("collection").is_none());
    assert!(store.collection(SPACE, "z").expect("collection").is_some());
    let paths: Vec<String> = store
        .contexts(SPACE)
        .expect("contexts")
        .into_iter()
        .map(|c| c.path)
        .collect();
    assert_eq!(paths, ["a_/y", "ab/x", "z", "z/notes"]);
}

/// Removing a collection removes its documents (the count is returned), their chunks and
/// the contexts under it; the feed reports the removals; a missing one is not found.
pub fn store_remove_collection_takes_its_documents_chunks_and_contexts(store: &dyn Store) {
    let c = collection(store, "c");
    let keep = collection(store, "keep");
    let mut model = Model::new();
    drain(store, "idx", 100, &mut model);
    let work = upsert(store, c, vec![doc("1.md", "one"), doc("2.md", "two")]);
    upsert(store, keep, vec![doc("k.md", "kept")]);
    let id = work.upserts[0].id;
    store
        .replace_chunks(&[DocChunks {
            document_id: id,
            doc_hash: hash_of("one"),
            chunks: vec![chunk(0, 3, "h-one")],
        }])
        .expect("replace_chunks");
    store.set_context(SPACE, "c/dir", "t").expect("set_context");
    store.set_context(SPACE, "keep", "t").expect("set_context");
    drain(store, "idx", 100, &mut model);
    assert_eq!(
        store
            .remove_collection(SPACE, "c")
            .expect("remove_collection"),
        2
    );
    assert!(store.collection(SPACE, "c").expect("collection").is_none());
    assert!(
        store
            .chunk_ids_in_collection(c)
            .expect("chunk ids")
            .is_empty()
    );
    assert!(store.chunks_of_documents(&[id]).expect("chunks").is_empty());
    assert_eq!(store.document_count(SPACE).expect("document_count"), 1);
    let paths: Vec<String> = store
        .contexts(SPACE)
        .expect("contexts")
        .into_iter()
        .map(|c| c.path)
        .collect();
    assert_eq!(paths, ["keep"]);
    drain(store, "idx", 100, &mut model);
    assert_eq!(model, truth(store), "the removals reached the feed");
    match store.remove_collection(SPACE, "c") {
        Err(Error::NotFound(_)) => {}
        other => panic!("second removal: expected NotFound, got {other:?}"),
    }
    // The name is free again.
    collection(store, "c");
}

/// Upserts write (and rewrite by path), touches change only the stat data, removes delete;
/// `file_states` reports what the scan needs and the batch reports what it wrote.
pub fn store_apply_changes_upserts_touches_and_removes(store: &dyn Store) {
    let c = collection(store, "c");
    assert!(upsert(store, c, Vec::new()).is_empty(), "an empty batch");
    let work = upsert(store, c, vec![doc("a.md", "alpha"), doc("b.md", "beta")]);
    assert_eq!(work.upserts.len(), 2);
    assert!(work.deletes.is_empty());
    let a = work.upserts[0].clone();
    assert_eq!(
        (
            a.collection_id,
            a.path.as_str(),
            a.title.as_str(),
            a.body.as_str()
        ),
        (c, "a.md", "a.md", "alpha")
    );
    let states = store.file_states(c).expect("file_states");
    assert_eq!(states.len(), 2);
    let sa = &states["a.md"];
    assert_eq!(
        (sa.id, sa.size, sa.stamp, sa.hash.as_str()),
        (a.id, 5, 1, hash_of("alpha").as_str())
    );
    // Same path, new content: the same row, rewritten.
    let again = upsert(store, c, vec![doc("a.md", "alpha 2")]);
    assert_eq!(
        again.upserts[0].id, a.id,
        "an upsert keeps the row of its path"
    );
    let d = &store.documents_by_ids(&[a.id]).expect("documents_by_ids")[0];
    assert_eq!(
        (d.body.as_str(), d.hash.clone()),
        ("alpha 2", hash_of("alpha 2"))
    );
    store
        .apply_changes(
            c,
            vec![DocChange::Touch {
                id: a.id,
                size: 99,
                stamp: 7,
            }],
        )
        .expect("touch");
    let sa = &store.file_states(c).expect("file_states")["a.md"];
    assert_eq!((sa.size, sa.stamp), (99, 7));
    let b = id_of(store, "b.md");
    let gone = upsert(store, c, vec![DocChange::Remove { id: b }]);
    assert_eq!(gone.deletes, [b]);
    assert!(
        store
            .documents_by_ids(&[b])
            .expect("documents_by_ids")
            .is_empty()
    );
    assert_eq!(store.document_count(SPACE).expect("document_count"), 1);
    // Removing what is already gone is harmless.
    store
        .apply_changes(c, vec![DocChange::Remove { id: b }])
        .expect("removing a missing document");
    // Pages and furniture are kept as given.
    let pages = vec![
        PageSpan {
            page: 1,
            byte_start: 0,
            byte_end: 3,
        },
        PageSpan {
            page: 2,
            byte_start: 3,
            byte_end: 6,
        },
    ];
    let furniture = vec![Furniture {
        kind: FurnitureKind::RunningHeader,
        byte_start: 3,
        byte_end: 4,
    }];
    let paged = upsert(
        store,
        c,
        vec![DocChange::Upsert {
            meta: Default::default(),
            path: "p.pdf".into(),
            title: "Paged".into(),
            hash: hash_of("paged!"),
            size: 6,
            stamp: 3,
            body: "paged!".into(),
            pages: pages.clone(),
            furniture: furniture.clone(),
        }],
    );
    let p = &store
        .documents_by_ids(&[paged.upserts[0].id])
        .expect("documents_by_ids")[0];
    assert_eq!(
        (p.title.as_str(), &p.pages, &p.furniture),
        ("Paged", &pages, &furniture)
    );
    assert_eq!(p.collection, "c");
}

/// Writing into a collection that does not exist is refused, and writes nothing.
pub fn store_apply_changes_to_a_missing_collection_fails(store: &dyn Store) {
    collection(store, "c");
    assert!(
        store
            .apply_changes(i64::MAX, vec![doc("a.md", "alpha")])
            .is_err(),
        "an upsert into a missing collection"
    );
    assert_eq!(store.document_count(SPACE).expect("document_count"), 0);
}

/// Docids are `#` and the shortest free prefix (≥ 6) of the content hash; the same content
/// in another space neither collides with nor reveals the default space's.
pub fn store_docids_grow_on_collision_and_say_nothing_across_spaces(store: &dyn Store) {
    let c = collection(store, "c");
    let with_hash = |path: &str, hash: &str| DocChange::Upsert {
        meta: Default::default(),
        path: path.into(),
        title: path.into(),
        hash: hash.into(),
        size: 1,
        stamp: 1,
        body: "body".into(),
        pages: Vec::new(),
        furniture: Vec::new(),
    };
    upsert(
        store,
        c,
        vec![
            with_hash("a.md", "abcdef111111"),
            with_hash("b.md", "abcdef222222"),
            with_hash("c.md", "abcdef111111"),
        ],
    );
    let ids: Vec<String> = store
        .document_summaries(SPACE)
        .expect("document_summaries")
        .into_iter()
        .map(|d| d.docid)
        .collect();
    assert_eq!(ids, ["#abcdef", "#abcdef2", "#abcdef1"]);
    // Same content rewritten keeps its docid; new content takes a free one.
    upsert(store, c, vec![with_hash("a.md", "abcdef111111")]);
    let a = store
        .document_by_path(SPACE, "c", "a.md")
        .expect("document_by_path")
        .expect("a.md");
    assert_eq!(a.docid, "#abcdef");
    upsert(store, c, vec![with_hash("a.md", "abcdef333333")]);
    let a = store
        .document_by_path(SPACE, "c", "a.md")
        .expect("document_by_path")
        .expect("a.md");
    assert_eq!(a.docid, "#abcdef", "its old docid is free again for it");
    let found = store
        .document_by_docid(SPACE, "#abcdef2")
        .expect("document_by_docid")
        .expect("b.md by docid");
    assert_eq!(found.path, "b.md");
    // Another space: the same content gets a short docid of its own, cut from elsewhere.
    let other = store
        .create_collection("elsewhere", "c", CollectionKind::Folder, "/y", "*")
        .expect("create_collection")
        .id;
    upsert(store, other, vec![with_hash("a.md", "abcdef111111")]);
    let there = store
        .document_by_path("elsewhere", "c", "a.md")
        .expect("document_by_path")
        .expect("a.md elsewhere");
    assert_eq!(there.docid.len(), 7, "a 6-hex docid: {}", there.docid);
    assert!(
        !there.docid.starts_with("#abcdef"),
        "cut from the space's own hash: {}",
        there.docid
    );
}

/// `documents_by_ids` answers in the order asked (a repeated id repeats) and skips ids that
/// are not there.
pub fn store_documents_by_ids_keep_the_order_asked(store: &dyn Store) {
    let c = collection(store, "c");
    upsert(
        store,
        c,
        vec![
            doc("a.md", "alpha"),
            doc("b.md", "beta"),
            doc("c.md", "gamma"),
        ],
    );
    let (a, b, cc) = (
        id_of(store, "a.md"),
        id_of(store, "b.md"),
        id_of(store, "c.md"),
    );
    let got: Vec<i64> = store
        .documents_by_ids(&[cc, i64::MAX, a, b, a])
        .expect("documents_by_ids")
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(got, [cc, a, b, a]);
    assert!(
        store
            .documents_by_ids(&[])
            .expect("documents_by_ids")
            .is_empty()
    );
    let d = &store.documents_by_ids(&[b]).expect("documents_by_ids")[0];
    assert_eq!(
        (
            d.collection.as_str(),
            d.path.as_str(),
            d.title.as_str(),
            d.body.as_str()
        ),
        ("c", "b.md", "b.md", "beta")
    );
    assert_eq!(d.docid, format!("#{}", &hash_of("beta")[..6]));
}

/// Lookups by path and docid, summaries and counts see one space only.
pub fn store_document_lookups_stay_in_their_space(store: &dyn Store) {
    let c = collection(store, "z");
    let a = collection(store, "a");
    upsert(store, c, vec![doc("b.md", "beta"), doc("a.md", "alpha")]);
    upsert(store, a, vec![doc("x.md", "xi xi")]);
    let other = store
        .create_collection("elsewhere", "z", CollectionKind::Folder, "/y", "*")
        .expect("create_collection")
        .id;
    upsert(store, other, vec![doc("b.md", "beta elsewhere")]);
    let listed: Vec<(String, String, u64)> = store
        .document_summaries(SPACE)
        .expect("document_summaries")
        .into_iter()
        .map(|d| (d.collection, d.path, d.body_bytes))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".to_owned(), "x.md".to_owned(), 5),
            ("z".to_owned(), "a.md".to_owned(), 5),
            ("z".to_owned(), "b.md".to_owned(), 4),
        ]
    );
    assert_eq!(store.document_count(SPACE).expect("document_count"), 3);
    assert_eq!(
        store.document_count("elsewhere").expect("document_count"),
        1
    );
    assert_eq!(store.document_count("nowhere").expect("document_count"), 0);
    let here = store
        .document_by_path(SPACE, "z", "b.md")
        .expect("document_by_path")
        .expect("z/b.md");
    assert_eq!(here.body, "beta");
    let there = store
        .document_by_path("elsewhere", "z", "b.md")
        .expect("document_by_path")
        .expect("elsewhere z/b.md");
    assert_eq!(there.body, "beta elsewhere");
    assert!(
        store
            .document_by_path(SPACE, "z", "missing.md")
            .expect("document_by_path")
            .is_none()
    );
    assert!(
        store
            .document_by_path(SPACE, "nope", "b.md")
            .expect("document_by_path")
            .is_none()
    );
    assert!(
        store
            .document_by_docid("elsewhere", &here.docid)
            .expect("document_by_docid")
            .is_none(),
        "a docid of the default space is not found elsewhere"
    );
    assert_eq!(
        store
            .document_by_docid(SPACE, &here.docid)
            .expect("document_by_docid")
            .map(|d| d.id),
        Some(here.id)
    );
}

/// Chunks are replaced only when cut from the document's current content, go when the
/// content changes, and map back to their documents; embeddings are keyed by model and chunk
/// text, so each text is embedded once per model.
pub fn store_chunks_and_embeddings_follow_the_documents(store: &dyn Store) {
    let c = collection(store, "c");
    let work = upsert(store, c, vec![doc("a.md", "body")]);
    let id = work.upserts[0].id;
    let sources = store.chunk_sources(&[id]).expect("chunk_sources");
    assert_eq!(sources.len(), 1, "a new document is to be cut");
    assert_eq!(
        (sources[0].body.as_str(), sources[0].hash.clone()),
        ("body", hash_of("body"))
    );
    assert_eq!(sources[0].chunk_chars, None);
    // Chunks cut from content that has since changed are refused.
    store
        .replace_chunks(&[DocChunks {
            document_id: id,
            doc_hash: "stale".into(),
            chunks: vec![chunk(0, 4, "x")],
        }])
        .expect("replace_chunks (stale)");
    assert_eq!(
        store
            .embedding_state(SPACE, None, None)
            .expect("embedding_state")
            .chunks,
        0
    );
    // Chunks of a document that is gone are refused too.
    store
        .replace_chunks(&[DocChunks {
            document_id: i64::MAX,
            doc_hash: hash_of("body"),
            chunks: vec![chunk(0, 4, "x")],
        }])
        .expect("replace_chunks (missing document)");
    store
        .replace_chunks(&[DocChunks {
            document_id: id,
            doc_hash: hash_of("body"),
            chunks: vec![
                NewChunk {
                    page: Some(2),
                    heading: "A › B".into(),
                    text: None,
                    ..chunk(0, 2, "k1")
                },
                chunk(2, 4, "k1"),
                chunk(0, 4, "k2"),
            ],
        }])
        .expect("replace_chunks");
    assert!(
        store
            .chunk_sources(&[id])
            .expect("chunk_sources")
            .is_empty(),
        "cut from the current content"
    );
    let refs = store
        .chunks_of_documents(&[id])
        .expect("chunks_of_documents");
    let spans: Vec<(usize, usize)> = refs.iter().map(|r| (r.byte_start, r.byte_end)).collect();
    assert_eq!(spans, [(0, 2), (2, 4), (0, 4)], "in position order");
    assert_eq!((refs[0].page, refs[0].heading.as_str()), (Some(2), "A › B"));
    assert_eq!((refs[1].page, refs[1].heading.as_str()), (None, ""));
    assert!(
        refs.iter()
            .all(|r| r.document_id == id && r.line_start == 1)
    );
    let ids: Vec<i64> = refs.iter().map(|r| r.id).collect();
    // A second cut of the same content (another node that read `chunk_sources` before the
    // first cut landed) keeps the first cut's chunks and ids: other nodes' passage indexes
    // hold them (issue 41, item 9).
    store
        .replace_chunks(&[DocChunks {
            document_id: id,
            doc_hash: hash_of("body"),
            chunks: vec![chunk(0, 4, "k3")],
        }])
        .expect("replace_chunks (a second cut)");
    let again: Vec<i64> = store
        .chunks_of_documents(&[id])
        .expect("chunks_of_documents")
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        again, ids,
        "a second cut of the same content replaced the first"
    );
    // The census a node's self-check compares its indexes with, and the work that repairs.
    let census = store.index_census().expect("index_census");
    assert!(census.documents.contains(&id), "{census:?}");
    let mut of_doc: Vec<i64> = census
        .chunks
        .iter()
        .filter(|(_, d)| *d == id)
        .map(|(c, _)| *c)
        .collect();
    of_doc.sort_unstable();
    let mut expected = ids.clone();
    expected.sort_unstable();
    assert_eq!(of_doc, expected);
    let work = store.index_work(&[id, i64::MAX, id]).expect("index_work");
    assert_eq!(
        (
            work.upserts.iter().map(|d| d.id).collect::<Vec<_>>(),
            work.deletes.clone()
        ),
        (vec![id], vec![i64::MAX])
    );
    assert_eq!(work.upserts[0].body, "body");
    let back = store
        .chunk_refs(&[ids[2], i64::MAX, ids[0]])
        .expect("chunk_refs");
    assert_eq!(
        back,
        [refs[2].clone(), refs[0].clone()],
        "in the order asked"
    );
    let mut in_collection = store
        .chunk_ids_in_collection(c)
        .expect("chunk_ids_in_collection");
    in_collection.sort_unstable();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(in_collection, sorted);
    // Distinct texts only, sliced by byte range.
    let mut jobs = store
        .embed_jobs(SPACE, None, "m", None)
        .expect("embed_jobs");
    jobs.sort_by(|a, b| a.hash.cmp(&b.hash));
    let texts: Vec<(&str, &str, &str)> = jobs
        .iter()
        .map(|j| (j.hash.as_str(), j.text.as_str(), j.title.as_str()))
        .collect();
    assert_eq!(texts, [("k1", "bo", "a.md"), ("k2", "body", "a.md")]);
    let state = store
        .embedding_state(SPACE, None, Some("m"))
        .expect("embedding_state");
    assert_eq!(
        (state.documents_pending, state.chunks, state.chunks_pending),
        (1, 3, 3)
    );
    store
        .put_embeddings("m", &[("k1".into(), vec![1.0, 0.0])])
        .expect("put_embeddings");
    let left = store
        .embed_jobs(SPACE, None, "m", None)
        .expect("embed_jobs");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].hash, "k2");
    assert_eq!(
        store
            .embed_jobs(SPACE, None, "other", None)
            .expect("embed_jobs")
            .len(),
        2,
        "another model's vectors are its own"
    );
    ann_sync(store, "m");
    let state = store
        .embedding_state(SPACE, None, Some("m"))
        .expect("embedding_state");
    assert_eq!(
        (state.documents_pending, state.chunks_pending),
        (1, 1),
        "chunk k2 has no vector yet"
    );
    // A hash given twice: the last vector wins; a stored one is replaced.
    store
        .put_embeddings(
            "m",
            &[
                ("k2".into(), vec![0.0, 1.0]),
                ("k2".into(), vec![0.5, 0.5]),
                ("k1".into(), vec![0.0, 1.0]),
            ],
        )
        .expect("put_embeddings (replacing)");
    store
        .put_embeddings("m", &[])
        .expect("put_embeddings (none)");
    ann_sync(store, "m");
    let state = store
        .embedding_state(SPACE, None, Some("m"))
        .expect("embedding_state");
    assert_eq!(
        (state.documents_pending, state.chunks, state.chunks_pending),
        (0, 3, 0)
    );
    assert!(
        store
            .embed_jobs(SPACE, None, "m", None)
            .expect("embed_jobs")
            .is_empty()
    );
    // `--force`: the space's vectors for the model go, and every text is to embed again.
    assert_eq!(
        store
            .delete_embeddings("elsewhere", None, "m")
            .expect("delete_embeddings"),
        0,
        "another space's chunks"
    );
    assert_eq!(
        store
            .delete_embeddings(SPACE, Some(c), "m")
            .expect("delete_embeddings"),
        2
    );
    assert_eq!(
        store
            .embed_jobs(SPACE, None, "m", None)
            .expect("embed_jobs")
            .len(),
        2
    );
    // New content: the old chunks go, and the document is to be cut again.
    upsert(store, c, vec![doc("a.md", "body 2")]);
    assert!(store.chunks_of_documents(&[id]).expect("chunks").is_empty());
    assert!(store.chunk_refs(&ids).expect("chunk_refs").is_empty());
    assert_eq!(store.chunk_sources(&[id]).expect("chunk_sources").len(), 1);
    ann_sync(store, "m");
    let state = store
        .embedding_state(SPACE, None, Some("m"))
        .expect("embedding_state");
    assert_eq!(
        (state.documents_pending, state.chunks, state.chunks_pending),
        (1, 0, 0)
    );
    // A touch or the same content again keeps the chunks.
    store
        .replace_chunks(&[DocChunks {
            document_id: id,
            doc_hash: hash_of("body 2"),
            chunks: vec![chunk(0, 6, "k3")],
        }])
        .expect("replace_chunks");
    upsert(store, c, vec![doc("a.md", "body 2")]);
    store
        .apply_changes(
            c,
            vec![DocChange::Touch {
                id,
                size: 1,
                stamp: 9,
            }],
        )
        .expect("touch");
    assert_eq!(store.chunks_of_documents(&[id]).expect("chunks").len(), 1);
    assert!(
        store
            .chunk_sources(&[id])
            .expect("chunk_sources")
            .is_empty()
    );
    // A removed document takes its chunks along.
    store
        .apply_changes(c, vec![DocChange::Remove { id }])
        .expect("remove");
    assert!(
        store
            .chunk_ids_in_collection(c)
            .expect("chunk ids")
            .is_empty()
    );
    ann_sync(store, "m");
    assert!(
        store.ann_tombstones().expect("ann_tombstones").is_empty(),
        "absorbed removals are not reported again"
    );
}

/// The same file converted again into other furniture (a newer converter) is cut again;
/// converted the same way, it keeps its chunks.
pub fn store_a_new_layout_of_the_same_file_is_cut_again(store: &dyn Store) {
    let c = collection(store, "c");
    let toc = Furniture {
        kind: FurnitureKind::Contents,
        byte_start: 0,
        byte_end: 2,
    };
    let with = |furniture: Vec<Furniture>| DocChange::Upsert {
        meta: Default::default(),
        path: "a.pdf".into(),
        title: "A".into(),
        hash: "h1111111".into(),
        size: 1,
        stamp: 1,
        body: "body".into(),
        pages: Vec::new(),
        furniture,
    };
    let work = upsert(store, c, vec![with(vec![toc])]);
    let id = work.upserts[0].id;
    assert_eq!(
        store.documents_by_ids(&[id]).expect("documents_by_ids")[0].furniture,
        [toc]
    );
    assert_eq!(
        store.chunk_sources(&[id]).expect("chunk_sources")[0].furniture,
        [toc]
    );
    store
        .replace_chunks(&[DocChunks {
            document_id: id,
            doc_hash: "h1111111".into(),
            chunks: vec![chunk(2, 4, "k1")],
        }])
        .expect("replace_chunks");
    upsert(store, c, vec![with(vec![toc])]);
    assert_eq!(store.chunks_of_documents(&[id]).expect("chunks").len(), 1);
    assert!(
        store
            .chunk_sources(&[id])
            .expect("chunk_sources")
            .is_empty()
    );
    upsert(store, c, vec![with(Vec::new())]);
    assert!(
        store.chunks_of_documents(&[id]).expect("chunks").is_empty(),
        "other furniture: cut again"
    );
    assert_eq!(store.chunk_sources(&[id]).expect("chunk_sources").len(), 1);
    let d = &store.documents_by_ids(&[id]).expect("documents_by_ids")[0];
    assert!(d.furniture.is_empty());
    assert_eq!(d.docid, "#h11111", "the same content keeps its docid");
}

/// Embedding jobs and progress can be limited to a collection; jobs to a number; a text
/// shared by two collections is one job for the space.
pub fn store_embed_jobs_and_state_by_collection_and_limit(store: &dyn Store) {
    let a = collection(store, "a");
    let b = collection(store, "b");
    let da = upsert(store, a, vec![doc("x.md", "xxxx yyyy")]).upserts[0].id;
    let db = upsert(store, b, vec![doc("y.md", "yyyy zzzz")]).upserts[0].id;
    store
        .replace_chunks(&[
            DocChunks {
                document_id: da,
                doc_hash: hash_of("xxxx yyyy"),
                chunks: vec![chunk(0, 4, "kx"), chunk(5, 9, "ky")],
            },
            DocChunks {
                document_id: db,
                doc_hash: hash_of("yyyy zzzz"),
                chunks: vec![chunk(0, 4, "ky"), chunk(5, 9, "kz")],
            },
        ])
        .expect("replace_chunks");
    let hashes = |collection: Option<i64>, limit: Option<usize>| {
        let mut h: Vec<String> = store
            .embed_jobs(SPACE, collection, "m", limit)
            .expect("embed_jobs")
            .into_iter()
            .map(|j| j.hash)
            .collect();
        h.sort();
        h
    };
    assert_eq!(hashes(None, None), ["kx", "ky", "kz"]);
    assert_eq!(hashes(Some(a), None), ["kx", "ky"]);
    assert_eq!(hashes(Some(b), None), ["ky", "kz"]);
    assert_eq!(hashes(None, Some(2)).len(), 2);
    assert_eq!(hashes(None, Some(0)).len(), 0);
    assert!(
        store
            .embed_jobs("elsewhere", None, "m", None)
            .expect("embed_jobs")
            .is_empty()
    );
    let text: Vec<String> = store
        .embed_jobs(SPACE, Some(b), "m", None)
        .expect("embed_jobs")
        .into_iter()
        .filter(|j| j.hash == "kz")
        .map(|j| j.text)
        .collect();
    assert_eq!(text, ["zzzz"]);
    store
        .put_embeddings("m", &[("ky".into(), vec![1.0, 2.0, 3.0])])
        .expect("put_embeddings");
    ann_sync(store, "m");
    let state = |collections: Option<&[i64]>| {
        let s = store
            .embedding_state(SPACE, collections, Some("m"))
            .expect("embedding_state");
        (s.documents_pending, s.chunks, s.chunks_pending)
    };
    assert_eq!(state(None), (2, 4, 2));
    assert_eq!(state(Some(&[a])), (1, 2, 1));
    assert_eq!(state(Some(&[a, b])), (2, 4, 2));
    assert_eq!(state(Some(&[])), (0, 0, 0));
    store
        .put_embeddings("m", &[("kx".into(), vec![1.0, 0.0, 0.0])])
        .expect("put_embeddings");
    ann_sync(store, "m");
    assert_eq!(state(Some(&[a])), (0, 2, 0));
    assert_eq!(state(Some(&[b])), (1, 2, 1));
    // Deleting one collection's vectors deletes its texts' vectors (shared ones included).
    assert_eq!(
        store
            .delete_embeddings(SPACE, Some(a), "m")
            .expect("delete_embeddings"),
        2
    );
    ann_sync(store, "m");
    assert_eq!(state(None), (2, 4, 4));
}

/// A new chunker: every document of every space is to be cut again; its old chunks serve
/// until then.
pub fn store_reset_all_chunks_cuts_every_document_again(store: &dyn Store) {
    let c = collection(store, "c");
    let other = store
        .create_collection("elsewhere", "c", CollectionKind::Folder, "/y", "*")
        .expect("create_collection")
        .id;
    let a = upsert(store, c, vec![doc("a.md", "alpha")]).upserts[0].id;
    let b = upsert(store, other, vec![doc("b.md", "beta")]).upserts[0].id;
    store
        .replace_chunks(&[
            DocChunks {
                document_id: a,
                doc_hash: hash_of("alpha"),
                chunks: vec![chunk(0, 5, "ka")],
            },
            DocChunks {
                document_id: b,
                doc_hash: hash_of("beta"),
                chunks: vec![chunk(0, 4, "kb")],
            },
        ])
        .expect("replace_chunks");
    assert!(
        store
            .chunk_sources(&[a, b])
            .expect("chunk_sources")
            .is_empty()
    );
    store.reset_all_chunks().expect("reset_all_chunks");
    let again: Vec<i64> = store
        .chunk_sources(&[b, a])
        .expect("chunk_sources")
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(again, [b, a], "in the order asked");
    assert_eq!(store.chunks_of_documents(&[a, b]).expect("chunks").len(), 2);
    // The last of two cuts of one document wins.
    store
        .replace_chunks(&[
            DocChunks {
                document_id: a,
                doc_hash: hash_of("alpha"),
                chunks: vec![chunk(0, 2, "k1"), chunk(2, 5, "k2")],
            },
            DocChunks {
                document_id: a,
                doc_hash: hash_of("alpha"),
                chunks: vec![chunk(0, 5, "k3")],
            },
        ])
        .expect("replace_chunks");
    let spans: Vec<(usize, usize)> = store
        .chunks_of_documents(&[b, a])
        .expect("chunks")
        .iter()
        .map(|r| (r.byte_start, r.byte_end))
        .collect();
    assert_eq!(
        spans,
        [(0, 4), (0, 5)],
        "document order as asked, then position"
    );
}

/// Settings and the expansion cache: unset is `None`, a second write replaces the first.
pub fn store_meta_and_the_expansion_cache(store: &dyn Store) {
    assert_eq!(store.meta("model").expect("meta"), None);
    store.set_meta("model", "a").expect("set_meta");
    store.set_meta("model", "b").expect("set_meta");
    store.set_meta("other", "").expect("set_meta");
    assert_eq!(store.meta("model").expect("meta").as_deref(), Some("b"));
    assert_eq!(store.meta("other").expect("meta").as_deref(), Some(""));
    assert_eq!(
        store.cached_expansion("m", "q").expect("cached_expansion"),
        None
    );
    store
        .cache_expansion("m", "q", &["one".into(), "two\nlines".into()])
        .expect("cache_expansion");
    assert_eq!(
        store.cached_expansion("m", "q").expect("cached_expansion"),
        Some(vec!["one".to_owned(), "two lines".to_owned()])
    );
    assert_eq!(
        store.cached_expansion("n", "q").expect("cached_expansion"),
        None
    );
    assert_eq!(
        store.cached_expansion("m", "Q").expect("cached_expansion"),
        None
    );
    store
        .cache_expansion("m", "q", &["three".into()])
        .expect("cache_expansion");
    assert_eq!(
        store.cached_expansion("m", "q").expect("cached_expansion"),
        Some(vec!["three".to_owned()])
    );
    store
        .cache_expansion("m", "none", &[])
        .expect("cache_expansion");
    assert_eq!(
        store
            .cached_expansion("m", "none")
            .expect("cached_expansion"),
        Some(Vec::new())
    );
}

/// Contexts by path, per space: set, replaced, listed by path, removed (saying whether one
/// was there).
pub fn store_contexts_are_set_replaced_and_removed(store: &dyn Store) {
    assert!(store.contexts(SPACE).expect("contexts").is_empty());
    store
        .set_context(SPACE, "/", "everything")
        .expect("set_context");
    store
        .set_context(SPACE, "c/dir", "a dir")
        .expect("set_context");
    store
        .set_context(SPACE, "c/dir", "the dir")
        .expect("set_context");
    store
        .set_context("fresh", "/", "a new space's")
        .expect("set_context in a space with nothing yet");
    let listed: Vec<(String, String)> = store
        .contexts(SPACE)
        .expect("contexts")
        .into_iter()
        .map(|c| (c.path, c.text))
        .collect();
    assert_eq!(
        listed,
        [
            ("/".to_owned(), "everything".to_owned()),
            ("c/dir".to_owned(), "the dir".to_owned())
        ]
    );
    assert_eq!(store.contexts("fresh").expect("contexts").len(), 1);
    assert!(
        store
            .remove_context(SPACE, "c/dir")
            .expect("remove_context")
    );
    assert!(
        !store
            .remove_context(SPACE, "c/dir")
            .expect("remove_context")
    );
    assert!(
        !store
            .remove_context(SPACE, "/nothing")
            .expect("remove_context")
    );
    assert_eq!(store.contexts(SPACE).expect("contexts").len(), 1);
    assert_eq!(store.contexts("fresh").expect("contexts").len(), 1);
}

/// A touch (new stat data, same content) gives the derived indexes nothing to do.
pub fn store_feed_a_touch_is_not_a_change(store: &dyn Store) {
    let c = collection(store, "c");
    upsert(store, c, vec![doc("a.md", "alpha")]);
    let mut model = Model::new();
    drain(store, "idx", 100, &mut model);
    let id = id_of(store, "a.md");
    store
        .apply_changes(
            c,
            vec![DocChange::Touch {
                id,
                size: 5,
                stamp: 2,
            }],
        )
        .expect("touch");
    let batch = read(store, position(store, "idx"), 100);
    assert!(batch.work.is_empty(), "a touch entered the feed: {batch:?}");
}

/// Writers on several threads (several nodes) and consumers reading at the same time: when
/// the writes stop, each consumer's index equals the store (no entry skipped because it
/// committed while another was being read).
pub fn store_feed_concurrent_writers_and_readers_converge(store: &dyn Store) {
    let collections: Vec<i64> = (0..3)
        .map(|i| collection(store, &format!("c{i}")))
        .collect();
    let mut early = Model::new();
    drain(store, "early", 7, &mut early);
    let done = std::sync::atomic::AtomicBool::new(false);
    let (early, late) = std::thread::scope(|s| {
        let writers: Vec<_> = collections
            .iter()
            .map(|&c| {
                s.spawn(move || {
                    for round in 0..25 {
                        let mut changes = vec![
                            doc(&format!("{round}.md"), &format!("{c} {round}")),
                            doc("same.md", &format!("{c} same {round}")),
                        ];
                        if round % 3 == 2 {
                            let gone = store
                                .file_states(c)
                                .expect("file_states")
                                .get(&format!("{}.md", round - 1))
                                .map(|f| f.id);
                            changes.extend(gone.map(|id| DocChange::Remove { id }));
                        }
                        store.apply_changes(c, changes).expect("apply_changes");
                    }
                })
            })
            .collect();
        let follow = |consumer: &'static str, mut model: Model| {
            let done = &done;
            s.spawn(move || {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    drain(store, consumer, 5, &mut model);
                }
                model
            })
        };
        let early = follow("early", early);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let late = follow("late", Model::new());
        for w in writers {
            w.join().expect("writer");
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (
            early.join().expect("consumer early"),
            late.join().expect("consumer late"),
        )
    });
    let (mut early, mut late) = (early, late);
    drain(store, "early", 5, &mut early);
    drain(store, "late", 5, &mut late);
    let expected = truth(store);
    assert_eq!(expected.len(), 3 * (25 - 8 + 1), "documents written");
    assert_eq!(early, expected, "consumer early");
    assert_eq!(late, expected, "consumer late");
}

/// Writers on several threads (several nodes) storing the same content at once each get a
/// docid of their own, without a conflict.
pub fn store_concurrent_writers_get_distinct_docids(store: &dyn Store) {
    let collections: Vec<i64> = (0..4)
        .map(|i| collection(store, &format!("c{i}")))
        .collect();
    std::thread::scope(|s| {
        let writers: Vec<_> = collections
            .iter()
            .map(|&c| {
                s.spawn(move || {
                    for i in 0..10 {
                        store
                            .apply_changes(c, vec![doc(&format!("{i}.md"), &format!("{i} same"))])
                            .expect("apply_changes");
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer");
        }
    });
    let mut docids: Vec<String> = store
        .document_summaries(SPACE)
        .expect("document_summaries")
        .into_iter()
        .map(|d| d.docid)
        .collect();
    assert_eq!(docids.len(), 40);
    docids.sort();
    docids.dedup();
    assert_eq!(docids.len(), 40, "every document has a docid of its own");
}

/// A chunker cutting documents while a writer changes them (in either order of their rows)
/// never leaves chunks cut from content a document no longer has, and neither fails.
pub fn store_chunking_racing_writes_never_keeps_stale_chunks(store: &dyn Store) {
    let c = collection(store, "c");
    let paths: Vec<String> = (0..6).map(|i| format!("{i}.md")).collect();
    upsert(
        store,
        c,
        paths.iter().map(|p| doc(p, &format!("{p} v0"))).collect(),
    );
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for v in 1..15 {
                let mut changes: Vec<DocChange> =
                    paths.iter().map(|p| doc(p, &format!("{p} v{v}"))).collect();
                if v % 2 == 0 {
                    changes.reverse();
                }
                store.apply_changes(c, changes).expect("apply_changes");
            }
        });
        let chunker = s.spawn(|| {
            for round in 0..30 {
                let mut ids: Vec<i64> = store
                    .file_states(c)
                    .expect("file_states")
                    .values()
                    .map(|f| f.id)
                    .collect();
                ids.sort_unstable();
                if round % 2 == 0 {
                    ids.reverse();
                }
                let cuts: Vec<DocChunks> = store
                    .chunk_sources(&ids)
                    .expect("chunk_sources")
                    .into_iter()
                    .map(|src| DocChunks {
                        document_id: src.id,
                        chunks: vec![
                            chunk(0, 2, &format!("{}-a", src.hash)),
                            chunk(2, 4, &format!("{}-b", src.hash)),
                        ],
                        doc_hash: src.hash,
                    })
                    .collect();
                store.replace_chunks(&cuts).expect("replace_chunks");
            }
        });
        writer.join().expect("writer");
        chunker.join().expect("chunker");
    });
    let current: std::collections::HashMap<String, String> = store
        .file_states(c)
        .expect("file_states")
        .into_iter()
        .map(|(path, f)| (path, f.hash))
        .collect();
    for job in store
        .embed_jobs(SPACE, None, "m", None)
        .expect("embed_jobs")
    {
        let hash = &current[&job.title];
        assert!(
            job.hash.starts_with(hash.as_str()),
            "{}: a chunk {} cut from content it no longer has ({hash})",
            job.title,
            job.hash
        );
    }
}

/// The embedding sweep's question: which collections, of every space, have chunks without
/// a vector of the model; a collection whose embed job just failed for good is left out.
pub fn store_collections_to_embed_across_spaces_after_failures(store: &dyn Store) {
    assert_eq!(
        store.chunk_fingerprint().expect("chunk_fingerprint"),
        (0, 0)
    );
    let a = collection(store, "a");
    let b = collection(store, "b");
    let empty = collection(store, "empty");
    let elsewhere = store
        .create_collection("other-space", "c", CollectionKind::Folder, "/y", "**/*.md")
        .expect("create_collection")
        .id;
    let mut cut = Vec::new();
    for (c, body, hashes) in [
        (a, "xxxx yyyy", ["kx", "ky"]),
        (b, "yyyy zzzz", ["ky", "kz"]),
        (elsewhere, "wwww", ["kw", "kw"]),
    ] {
        let id = upsert(store, c, vec![doc("d.md", body)]).upserts[0].id;
        cut.push(DocChunks {
            document_id: id,
            doc_hash: hash_of(body),
            chunks: vec![chunk(0, 4, hashes[0]), chunk(0, 4, hashes[1])],
        });
    }
    store.replace_chunks(&cut).expect("replace_chunks");
    let (top, count) = store.chunk_fingerprint().expect("chunk_fingerprint");
    assert_eq!(count, 6, "the chunks of every space");
    assert!(top > 0);
    let due = |model: Option<&str>| {
        store
            .collections_to_embed(model, 60_000)
            .expect("collections_to_embed")
    };
    assert_eq!(
        due(None),
        [a, b, elsewhere],
        "no index yet: every collection with chunks"
    );
    assert!(!due(None).contains(&empty), "no chunks, nothing to embed");
    assert_eq!(due(Some("m")), [a, b, elsewhere]);
    store
        .put_embeddings("m", &[("kx".into(), vec![1.0]), ("ky".into(), vec![1.0])])
        .expect("put_embeddings");
    assert_eq!(
        due(Some("m")),
        [b, elsewhere],
        "a is embedded; b still lacks kz"
    );
    assert_eq!(
        due(Some("other")),
        [a, b, elsewhere],
        "another model's vectors are its own"
    );
    // b's embedding fails for good: the sweep leaves it alone for the window given.
    store.enqueue_embed(b).expect("enqueue_embed");
    let job = store
        .claim_job("w", 60_000)
        .expect("claim_job")
        .expect("b's embed job");
    assert!(
        store
            .fail_job(job.lease(), "model down", None)
            .expect("fail_job")
    );
    assert_eq!(due(Some("m")), [elsewhere]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(
        store
            .collections_to_embed(Some("m"), 0)
            .expect("collections_to_embed"),
        [b, elsewhere],
        "once the window has passed, b is due again"
    );
    // The fingerprint moves when chunks are cut again (after the chunker changed: a cut of
    // content already cut keeps its chunks), even to the same number.
    store.reset_all_chunks().expect("reset_all_chunks");
    store
        .replace_chunks(&[DocChunks {
            document_id: cut[0].document_id,
            doc_hash: hash_of("xxxx yyyy"),
            chunks: vec![chunk(0, 4, "kx"), chunk(5, 9, "ky")],
        }])
        .expect("replace_chunks");
    let (new_top, new_count) = store.chunk_fingerprint().expect("chunk_fingerprint");
    assert_eq!(new_count, count);
    assert!(new_top > top, "new chunks get new ids: {new_top} vs {top}");
}

/// A person's chunk edit, and a document's own chunk settings, are stored with the document,
/// handed to whoever cuts it, and have it cut again on every node: its chunks are forgotten
/// and it enters the change feed. An edited chunk's text is stored with it and is the text
/// embedded. Both go with the document; a missing document changes nothing.
pub fn store_chunk_edits_and_own_chunking_have_a_document_cut_again(store: &dyn Store) {
    let c = collection(store, "curated");
    let id = upsert(store, c, vec![doc("a.md", "alpha beta")]).upserts[0].id;
    let cut = |text: Option<&str>| DocChunks {
        document_id: id,
        doc_hash: hash_of("alpha beta"),
        chunks: vec![NewChunk {
            text: text.map(str::to_owned),
            ..chunk(0, 5, text.map_or("k-alpha", |_| "k-edited"))
        }],
    };
    store.replace_chunks(&[cut(None)]).expect("replace_chunks");
    let src = store
        .chunk_source(id)
        .expect("chunk_source")
        .expect("exists");
    assert!(src.edits.is_empty() && !src.own_chunking && src.chunk_chars.is_none());
    assert!(
        store
            .chunk_sources(&[id])
            .expect("chunk_sources")
            .is_empty()
    );
    let _ = read(store, position(store, "cur"), 100);
    store
        .feed_ack("cur", read(store, position(store, "cur"), 100).position)
        .expect("feed_ack");

    let edit = ChunkEdit {
        key: "k1".into(),
        text: Some("ALPHA".into()),
        disabled: false,
        edited_by: "ann".into(),
        edited_at: 7,
    };
    assert!(
        store
            .set_chunk_edit(id, "k1", Some(&edit))
            .expect("set_chunk_edit")
    );
    let again = store.chunk_sources(&[id]).expect("chunk_sources");
    assert_eq!(again.len(), 1, "an edit has the document cut again");
    assert_eq!(again[0].edits, std::slice::from_ref(&edit));
    let batch = read(store, position(store, "cur"), 100);
    assert_eq!(
        batch.work.upserts.iter().map(|d| d.id).collect::<Vec<_>>(),
        [id],
        "an edit puts the document on the feed"
    );
    store.feed_ack("cur", batch.position).expect("feed_ack");
    // The cut with the edit applied: the chunk's text is the edit's, and so is the text
    // embedding jobs hand out.
    store
        .replace_chunks(&[cut(Some("ALPHA"))])
        .expect("replace_chunks");
    let chunks = store.chunks_of_documents(&[id]).expect("chunks");
    assert_eq!(chunks[0].text.as_deref(), Some("ALPHA"));
    assert_eq!(chunks[0].text_in("alpha beta"), Some("ALPHA"));
    let jobs = store
        .embed_jobs(SPACE, Some(c), "m", None)
        .expect("embed_jobs");
    assert_eq!(
        jobs.iter().map(|j| j.text.as_str()).collect::<Vec<_>>(),
        ["ALPHA"]
    );
    let refs = store.chunk_refs(&[chunks[0].id]).expect("chunk_refs");
    assert_eq!(refs[0].text.as_deref(), Some("ALPHA"));

    // Updated in place (one edit per key), then forgotten.
    let disabled = ChunkEdit {
        text: None,
        disabled: true,
        ..edit.clone()
    };
    assert!(
        store
            .set_chunk_edit(id, "k1", Some(&disabled))
            .expect("set_chunk_edit")
    );
    let src = store
        .chunk_source(id)
        .expect("chunk_source")
        .expect("exists");
    assert_eq!(src.edits, [disabled]);
    assert!(
        store
            .set_chunk_edit(id, "k1", None)
            .expect("set_chunk_edit")
    );
    assert!(
        store
            .chunk_source(id)
            .expect("chunk_source")
            .expect("exists")
            .edits
            .is_empty()
    );

    // The document's own chunk settings, then its collection's again.
    assert!(
        store
            .set_document_chunking(id, Some((300, 30)))
            .expect("set_document_chunking")
    );
    let src = store
        .chunk_source(id)
        .expect("chunk_source")
        .expect("exists");
    assert_eq!((src.chunk_chars, src.own_chunking), (Some((300, 30)), true));
    assert_eq!(store.chunk_sources(&[id]).expect("chunk_sources").len(), 1);
    assert!(
        store
            .set_document_chunking(id, None)
            .expect("set_document_chunking")
    );
    let src = store
        .chunk_source(id)
        .expect("chunk_source")
        .expect("exists");
    assert_eq!((src.chunk_chars, src.own_chunking), (None, false));

    // A missing document: nothing to change.
    assert!(
        !store
            .set_chunk_edit(id + 1_000_000, "k1", Some(&edit))
            .expect("set_chunk_edit")
    );
    assert!(
        !store
            .set_document_chunking(id + 1_000_000, None)
            .expect("set_document_chunking")
    );
    assert!(
        store
            .chunk_source(id + 1_000_000)
            .expect("chunk_source")
            .is_none()
    );

    // Edits go with their document.
    store
        .set_chunk_edit(id, "k1", Some(&edit))
        .expect("set_chunk_edit");
    store
        .apply_changes(c, vec![DocChange::Remove { id }])
        .expect("remove");
    let id2 = upsert(store, c, vec![doc("a.md", "alpha beta")]).upserts[0].id;
    assert!(
        store
            .chunk_source(id2)
            .expect("chunk_source")
            .expect("exists")
            .edits
            .is_empty()
    );
}
