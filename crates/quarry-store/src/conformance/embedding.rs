//! Conformance cases for the rate of embedding (issue 65 items 11, 19): the batches of vectors
//! embedding runs record, read back by every node, and the embedding progress of a set of
//! documents (what `quarry kb upload` waits for). Each case is a `pub fn embedding_…(store:
//! &dyn Store)` listed in the macro below.

use super::fixtures::{SPACE, collection, doc};
use crate::{DocChunks, NewChunk, Store};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_embedding {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::embedding];
            embedding_batches_count_the_chunks_they_finish_per_model,
            embedding_state_of_documents_counts_their_own_chunks,
        );
    };
}

#[doc(hidden)]
pub use __conformance_embedding;

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

/// Two documents of collection `c`: `x.md` cut into texts `kx`, `ky`; `y.md` into `ky`, `kz`
/// (one text shared). Returns their ids.
fn two_documents(store: &dyn Store) -> (i64, i64) {
    let c = collection(store, "c");
    let work = store
        .apply_changes(c, vec![doc("x.md", "xxxx yyyy"), doc("y.md", "yyyy zzzz")])
        .expect("apply_changes");
    let id = |path: &str| {
        work.upserts
            .iter()
            .find(|d| d.path == path)
            .map(|d| d.id)
            .unwrap_or_else(|| panic!("{path} was not written"))
    };
    let (x, y) = (id("x.md"), id("y.md"));
    store
        .replace_chunks(&[
            DocChunks {
                document_id: x,
                doc_hash: hash_of("xxxx yyyy"),
                chunks: vec![chunk(0, 4, "kx"), chunk(5, 9, "ky")],
            },
            DocChunks {
                document_id: y,
                doc_hash: hash_of("yyyy zzzz"),
                chunks: vec![chunk(0, 4, "ky"), chunk(5, 9, "kz")],
            },
        ])
        .expect("replace_chunks");
    (x, y)
}

/// A recorded batch counts every chunk whose text it embedded (a text two documents share
/// finishes two chunks), at the store's clock, with the time it took; batches are read back
/// per model, oldest first, within the window asked for.
pub fn embedding_batches_count_the_chunks_they_finish_per_model(store: &dyn Store) {
    two_documents(store);
    let empty = store
        .recent_embedding("m", 60_000)
        .expect("recent_embedding");
    assert!(empty.batches.is_empty(), "{empty:?}");
    assert!(empty.now_ms > 0, "the store's clock: {empty:?}");

    store
        .record_embedded("m", &["kx".into(), "ky".into()], 1_500)
        .expect("record_embedded");
    store
        .record_embedded("m", &["kz".into(), "gone".into()], 700)
        .expect("record_embedded");
    store
        .record_embedded("other", &["kx".into()], 10)
        .expect("record_embedded");
    let recent = store
        .recent_embedding("m", 60_000)
        .expect("recent_embedding");
    let seen: Vec<(i64, u64)> = recent
        .batches
        .iter()
        .map(|b| (b.elapsed_ms, b.chunks))
        .collect();
    // kx (1) + ky (2); kz (1) + a text no chunk has (0).
    assert_eq!(seen, [(1_500, 3), (700, 1)], "{recent:?}");
    for b in &recent.batches {
        assert!(
            b.ended_ms <= recent.now_ms && b.ended_ms > recent.now_ms - 60_000,
            "a batch ended at {} on a clock at {}",
            b.ended_ms,
            recent.now_ms
        );
    }
    assert!(recent.batches[0].ended_ms <= recent.batches[1].ended_ms);
    let other = store
        .recent_embedding("other", 60_000)
        .expect("recent_embedding");
    assert_eq!(other.batches.len(), 1, "{other:?}");
    assert_eq!(other.batches[0].chunks, 1);

    // Outside the window: nothing (the store's clock moves on).
    std::thread::sleep(std::time::Duration::from_millis(30));
    let none = store.recent_embedding("m", 0).expect("recent_embedding");
    assert!(none.batches.is_empty(), "{none:?}");
}

/// The embedding progress of some documents: their chunks, those without a vector of the
/// model, and the documents still waiting for one; other documents never count.
pub fn embedding_state_of_documents_counts_their_own_chunks(store: &dyn Store) {
    let (x, y) = two_documents(store);
    let state = |ids: &[i64], model: Option<&str>| {
        let s = store
            .documents_embedding_state(ids, model)
            .expect("documents_embedding_state");
        (s.documents_pending, s.chunks, s.chunks_pending)
    };
    assert_eq!(state(&[], Some("m")), (0, 0, 0));
    assert_eq!(state(&[x], Some("m")), (1, 2, 2));
    assert_eq!(state(&[x, y], Some("m")), (2, 4, 4));
    assert_eq!(state(&[x, 999_999], None), (1, 2, 2));

    store
        .put_embeddings(
            "m",
            &[("ky".into(), vec![1.0, 2.0]), ("kx".into(), vec![0.5, 1.0])],
        )
        .expect("put_embeddings");
    // The embedded mode's vector file takes them in (a backend searching in place owes
    // nothing): x is done, y waits for kz.
    let removed = store.ann_tombstones().expect("ann_tombstones");
    let added: Vec<i64> = store
        .ann_dirty_chunks("m", 0, 100)
        .expect("ann_dirty_chunks")
        .into_iter()
        .map(|c| c.0)
        .collect();
    store.ann_done(&removed, &added).expect("ann_done");
    assert_eq!(state(&[x], Some("m")), (0, 2, 0));
    assert_eq!(state(&[y], Some("m")), (1, 2, 1));
    assert_eq!(state(&[x, y], Some("m")), (1, 4, 1));
    assert_eq!(state(&[x, y], Some("another")), (2, 4, 4));
    let whole = store
        .embedding_state(SPACE, None, Some("m"))
        .expect("embedding_state");
    assert_eq!(whole.chunks_pending, 1);
}
