//! What a version change makes a node redo when it opens a data directory: another chunker
//! cuts every document again; another analyzer only rebuilds the indexes, keeping the
//! chunks (and so their ids, which the vector index holds).

use quarry_store::Store;

use crate::test_support::{drain, engine, keyword_passages, note};

/// Every chunk's id, as the store holds them.
fn chunk_ids(store: &dyn Store) -> Vec<i64> {
    let mut ids: Vec<i64> = store
        .index_census()
        .unwrap()
        .chunks
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn another_analyzer_keeps_the_chunks_and_another_chunker_cuts_them_again() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = engine(dir.path());
        e.create_entry(
            "memory",
            note("The quokka lives on Rottnest Island."),
            &Default::default(),
        )
        .unwrap();
        drain(&e);
    }
    let before = {
        let e = engine(dir.path());
        chunk_ids(e.store())
    };
    assert!(!before.is_empty());

    // Recorded by an older analyzer with this chunker: no cut (the stamp stays as
    // recorded), the same chunks, found again through the rebuilt indexes.
    {
        let e = engine(dir.path());
        e.store().set_meta("passages.version", "2/1").unwrap();
    }
    let e = engine(dir.path());
    e.check_indexes().unwrap();
    assert_eq!(stamp(&e), "2/1");
    assert_eq!(chunk_ids(e.store()), before);
    assert!(!keyword_passages(&e, "quokka").is_empty());
    drop(e);

    // Cut by another chunker: cut again, and the stamp says so.
    {
        let e = engine(dir.path());
        e.store().set_meta("passages.version", "1/1").unwrap();
    }
    let e = engine(dir.path());
    e.check_indexes().unwrap();
    let now = format!(
        "{}/{}",
        crate::index::chunking::PASSAGES_VERSION,
        quarry_fts::analyzer::ANALYZER_VERSION
    );
    assert_eq!(stamp(&e), now);
    let cut = chunk_ids(e.store());
    assert!(!cut.is_empty());
    assert!(
        cut.iter().all(|id| !before.contains(id)),
        "cut again: {before:?} -> {cut:?}"
    );
    assert!(!keyword_passages(&e, "quokka").is_empty());
}

/// The chunker stamp the store records.
fn stamp(e: &crate::Engine) -> String {
    e.store()
        .meta("passages.version")
        .unwrap()
        .unwrap_or_default()
}

#[test]
fn chunks_cut_again_reach_the_vector_index_from_their_stored_vectors() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::test_support::HashEmbedder;

    let dir = tempfile::tempdir().unwrap();
    let embedded = Arc::new(AtomicUsize::new(0));
    let open = || {
        let counter = Arc::clone(&embedded);
        engine(dir.path()).with_test_embedder(Arc::new(HashEmbedder::new(move |n| {
            counter.fetch_add(n, Ordering::Relaxed);
        })))
    };
    let text = "The quokka lives on Rottnest Island.";
    let nearest = |e: &crate::Engine| -> Vec<i64> {
        let mut ids: Vec<i64> = e
            .nearest_chunks(&HashEmbedder::vector(text), 10, None)
            .unwrap()
            .into_iter()
            .map(|(id, _)| i64::try_from(id).unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    {
        let e = open();
        // A deleted first entry leaves the kept one's chunk a later id than a fresh cut
        // gives it.
        let first = e
            .create_entry(
                "memory",
                note("Penguins nest on Phillip Island."),
                &Default::default(),
            )
            .unwrap();
        e.create_entry("memory", note(text), &Default::default())
            .unwrap();
        drain(&e);
        e.delete_knowledge(&first.file).unwrap();
        drain(&e);
        assert_eq!(nearest(&e), chunk_ids(e.store()));
    }
    open().store().set_meta("passages.version", "1/1").unwrap();
    let first_run = embedded.load(Ordering::Relaxed);
    assert!(first_run > 0);

    let e = open();
    e.check_indexes().unwrap();
    eprintln!(
        "DBG before drain {:?} {:?} {:?}",
        nearest(&e),
        chunk_ids(e.store()),
        e.store().meta("passages.version")
    );
    drain(&e);
    eprintln!(
        "DBG after drain {:?} {:?} {:?}",
        nearest(&e),
        chunk_ids(e.store()),
        e.store().meta("passages.version")
    );
    let now = chunk_ids(e.store());
    assert!(!now.is_empty());
    assert_eq!(
        nearest(&e),
        now,
        "the vector index holds the chunks as cut now"
    );
    assert_eq!(
        embedded.load(Ordering::Relaxed),
        first_run,
        "the stored vectors serve the new cut"
    );
}
