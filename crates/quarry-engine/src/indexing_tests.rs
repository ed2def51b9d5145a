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
        crate::chunking::PASSAGES_VERSION,
        quarry_fts::analyzer::ANALYZER_VERSION
    );
    assert_eq!(stamp(&e), now);
    assert!(!chunk_ids(e.store()).is_empty());
    assert!(!keyword_passages(&e, "quokka").is_empty());
}

/// The chunker stamp the store records.
fn stamp(e: &crate::Engine) -> String {
    e.store()
        .meta("passages.version")
        .unwrap()
        .unwrap_or_default()
}
