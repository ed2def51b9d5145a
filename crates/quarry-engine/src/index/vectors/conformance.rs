//! One test suite run against every [`VectorBackend`], as the stores share theirs
//! (`quarry_store::conformance`): the embedded mode's HNSW file ([`LocalAnnFile`] over
//! SQLite) and vector search in the store ([`InStore`] over PostgreSQL with pgvector, on the
//! server `QUARRY_TEST_DATABASE_URL` names; without one those tests pass with a note, except
//! under CI, where they fail).
//!
//! Every case checks what the engine relies on whichever backend answers: the true
//! neighbours, best first, with exact cosine scores (a score never depends on the path that
//! found it); a collection filter that returns nothing outside it; removals that leave the
//! results at the next sync; a new model's vectors that replace the old one's; exact
//! similarities for named chunks.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use quarry_core::CollectionKind;
use quarry_store::conformance::vectors::{self, UnitVectors, cosine, oracle};
use quarry_store::{DocChange, Store};
use quarry_store_pg::testing::TestDatabase;

use super::{InStore, LocalAnnFile, VectorBackend};
use crate::index::write_lock::WriteGuard;
use crate::progress::NoProgress;

const DIMS: usize = 32;
const MODEL: &str = "test/model@v1#32";
const OTHER_MODEL: &str = "test/other@v1#32";
/// Stored vectors may be half precision (pgvector's `halfvec`): scores agree to this.
const SCORE_TOLERANCE: f32 = 2e-3;

/// A backend, the store it follows, and what must live as long as the test.
struct Rig {
    store: Arc<dyn Store>,
    backend: Box<dyn VectorBackend>,
    guard: WriteGuard,
    rng: UnitVectors,
    /// Each stored chunk's text hash (the embeddings' key), by chunk id.
    hashes: HashMap<i64, String>,
    _dir: tempfile::TempDir,
    _db: Option<TestDatabase>,
}

impl Rig {
    /// The embedded mode: SQLite and the HNSW file in a temporary data directory.
    fn local() -> Option<Rig> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = quarry_store_sqlite::SqliteStore::open(&dir.path().join("q.db"))
            .expect("open the SQLite store");
        Some(Rig {
            store: Arc::new(store),
            backend: Box::new(LocalAnnFile::new(dir.path())),
            guard: WriteGuard::in_dir(dir.path()),
            rng: UnitVectors::new(0x9e37_79b9_7f4a_7c15, DIMS),
            hashes: HashMap::new(),
            _dir: dir,
            _db: None,
        })
    }

    /// PostgreSQL with pgvector, searched where the vectors are stored.
    fn postgres() -> Option<Rig> {
        let db = TestDatabase::create("quarry_vb")?;
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Arc::new(quarry_store_pg::PgStore::connect(&db.url).expect("connect"));
        Some(Rig {
            store: store.clone(),
            backend: Box::new(InStore::new(store)),
            guard: WriteGuard::in_dir(dir.path()),
            rng: UnitVectors::new(0x9e37_79b9_7f4a_7c15, DIMS),
            hashes: HashMap::new(),
            _dir: dir,
            _db: Some(db),
        })
    }

    /// `n` one-chunk documents in a new collection `name`, with `model` vectors; returns
    /// the collection's id and each chunk's id and vector.
    fn fill(&mut self, name: &str, n: usize, model: &str) -> (i64, Vec<(i64, Vec<f32>)>) {
        let (c, chunks) = vectors::fill(&*self.store, name, n, model, &mut self.rng);
        let mut out = Vec::new();
        for chunk in chunks {
            self.hashes.insert(chunk.id, chunk.hash);
            out.push((chunk.id, chunk.vector));
        }
        (c, out)
    }

    /// Brings the backend up to the store for `model`, as `quarry embed` does.
    fn sync(&self, model: &str) {
        self.store
            .set_meta(crate::index::vectors::META_ANN_DIMS, &DIMS.to_string())
            .expect("record the dimensions");
        self.backend
            .sync(&self.guard, &*self.store, model, DIMS, &NoProgress)
            .expect("sync");
    }

    fn nearest(&self, model: &str, q: &[f32], k: usize, only: Option<&[i64]>) -> Vec<(i64, f32)> {
        self.backend
            .nearest(&*self.store, model, q, k, only)
            .expect("nearest")
            .unwrap_or_default()
            .into_iter()
            .map(|(id, s)| (id as i64, s))
            .collect()
    }
}

/// Checks `found` against the true neighbours in `pool`: best first, each score the exact
/// cosine of its vector, and at least `min_recall` of the true ones found (a chunk as
/// similar as the last true neighbour counts as a true one).
fn assert_true_neighbours(
    found: &[(i64, f32)],
    pool: &[(i64, Vec<f32>)],
    q: &[f32],
    k: usize,
    min_recall: f64,
) {
    let truth = oracle(pool, q, k);
    assert_eq!(found.len(), truth.len(), "as many as asked for: {found:?}");
    assert!(
        found.windows(2).all(|w| w[0].1 >= w[1].1),
        "best first: {found:?}"
    );
    let vectors: HashMap<i64, &Vec<f32>> = pool.iter().map(|(id, v)| (*id, v)).collect();
    for (id, score) in found {
        let v = vectors
            .get(id)
            .unwrap_or_else(|| panic!("chunk {id} is not in the searched pool"));
        let exact = cosine(v, q);
        assert!(
            (score - exact).abs() <= SCORE_TOLERANCE,
            "chunk {id}: score {score} is not its exact cosine {exact}"
        );
    }
    let floor = truth.last().map_or(f32::MIN, |t| t.1) - SCORE_TOLERANCE;
    let hits = found
        .iter()
        .filter(|(id, _)| cosine(vectors[id], q) >= floor)
        .count();
    let recall = hits.min(truth.len()) as f64 / truth.len().max(1) as f64;
    assert!(
        recall >= min_recall,
        "recall {recall} < {min_recall}: {found:?} vs {truth:?}"
    );
}

fn search_finds_the_true_neighbours_best_first_with_exact_scores(mut rig: Rig) {
    let q = rig.rng.unit();
    assert!(
        rig.nearest(MODEL, &q, 10, None).is_empty(),
        "nothing is found before anything is stored"
    );
    let (_, pool) = rig.fill("docs", 600, MODEL);
    rig.sync(MODEL);
    for _ in 0..10 {
        let q = rig.rng.unit();
        let found = rig.nearest(MODEL, &q, 10, None);
        assert_true_neighbours(&found, &pool, &q, 10, 0.9);
    }
    // Asking for more than there is returns everything.
    let q = rig.rng.unit();
    let few = rig.nearest(MODEL, &q, 1_000, None);
    assert_eq!(few.len(), pool.len());
}

fn a_collection_filter_returns_nothing_outside_it(mut rig: Rig) {
    // `small` is few enough chunks to be scored exactly; `large` is searched through the
    // index with the filter (more than `EXACT_SEARCH_MAX` chunks).
    let (small, small_pool) = rig.fill("small", 200, MODEL);
    let (large, large_pool) = rig.fill("large", super::EXACT_SEARCH_MAX + 400, MODEL);
    rig.sync(MODEL);
    let small_ids: HashSet<i64> = small_pool.iter().map(|(id, _)| *id).collect();
    let large_ids: HashSet<i64> = large_pool.iter().map(|(id, _)| *id).collect();
    for _ in 0..5 {
        let q = rig.rng.unit();
        let found = rig.nearest(MODEL, &q, 10, Some(&[small]));
        assert!(
            found.iter().all(|(id, _)| small_ids.contains(id)),
            "{found:?}"
        );
        assert_true_neighbours(&found, &small_pool, &q, 10, 1.0);
        let found = rig.nearest(MODEL, &q, 10, Some(&[large]));
        assert!(
            found.iter().all(|(id, _)| large_ids.contains(id)),
            "{found:?}"
        );
        assert_true_neighbours(&found, &large_pool, &q, 10, 0.8);
        let both = rig.nearest(MODEL, &q, 10, Some(&[small, large]));
        assert_eq!(both.len(), 10);
    }
    // A collection without vectors finds nothing; so does an empty list.
    let empty = rig
        .store
        .create_collection("default", "empty", CollectionKind::Folder, "/y", "**/*.md")
        .expect("collection");
    let q = rig.rng.unit();
    assert!(rig.nearest(MODEL, &q, 10, Some(&[empty.id])).is_empty());
    assert!(rig.nearest(MODEL, &q, 10, Some(&[])).is_empty());
}

fn removed_documents_leave_the_results(mut rig: Rig) {
    let (c, pool) = rig.fill("docs", 300, MODEL);
    rig.sync(MODEL);
    // The query is a stored vector: its chunk is the nearest until its document goes.
    let (gone_chunk, gone_vector) = pool[7].clone();
    let found = rig.nearest(MODEL, &gone_vector, 5, None);
    assert_eq!(found.first().map(|f| f.0), Some(gone_chunk));
    let gone_doc = rig
        .store
        .chunk_refs(&[gone_chunk])
        .expect("chunk_refs")
        .first()
        .map(|r| r.document_id)
        .expect("the chunk's document");
    rig.store
        .apply_changes(c, vec![DocChange::Remove { id: gone_doc }])
        .expect("remove");
    rig.sync(MODEL);
    let found = rig.nearest(MODEL, &gone_vector, 5, None);
    assert!(found.iter().all(|(id, _)| *id != gone_chunk), "{found:?}");
    let rest: Vec<(i64, Vec<f32>)> = pool
        .iter()
        .filter(|(id, _)| *id != gone_chunk)
        .cloned()
        .collect();
    assert_true_neighbours(&found, &rest, &gone_vector, 5, 0.8);
    let filtered = rig.nearest(MODEL, &gone_vector, 5, Some(&[c]));
    assert!(filtered.iter().all(|(id, _)| *id != gone_chunk));
    let scores = rig
        .backend
        .similarities(&*rig.store, MODEL, &gone_vector, &[gone_chunk])
        .expect("similarities");
    assert!(
        scores.is_empty(),
        "a removed chunk has no score: {scores:?}"
    );
}

fn a_new_models_vectors_replace_the_old_ones(mut rig: Rig) {
    let (_, old_pool) = rig.fill("docs", 200, MODEL);
    rig.sync(MODEL);
    // The same chunk texts embedded by another model: other vectors under the same hashes.
    let new_pool: Vec<(i64, Vec<f32>)> = old_pool
        .iter()
        .map(|(id, _)| (*id, rig.rng.unit()))
        .collect();
    let vectors: Vec<(String, Vec<f32>)> = new_pool
        .iter()
        .map(|(id, v)| (rig.hashes[id].clone(), v.clone()))
        .collect();
    rig.store
        .put_embeddings(OTHER_MODEL, &vectors)
        .expect("put_embeddings");
    rig.backend
        .reset(&rig.guard, &*rig.store)
        .expect("reset for the new model");
    rig.sync(OTHER_MODEL);
    for _ in 0..5 {
        let q = rig.rng.unit();
        let found = rig.nearest(OTHER_MODEL, &q, 10, None);
        assert_true_neighbours(&found, &new_pool, &q, 10, 0.9);
    }
    let q = rig.rng.unit();
    let ids: Vec<i64> = new_pool.iter().map(|(id, _)| *id).collect();
    let scores = rig
        .backend
        .similarities(&*rig.store, OTHER_MODEL, &q, &ids)
        .expect("similarities");
    assert_eq!(scores.len(), ids.len());
    for (id, v) in &new_pool {
        assert!((scores[id] - cosine(v, &q)).abs() <= SCORE_TOLERANCE);
    }
}

fn similarities_are_exact_for_named_chunks(mut rig: Rig) {
    let (_, pool) = rig.fill("docs", 100, MODEL);
    rig.sync(MODEL);
    let q = rig.rng.unit();
    let named: Vec<i64> = pool.iter().step_by(7).map(|(id, _)| *id).collect();
    let mut asked = named.clone();
    asked.push(i64::MAX); // no such chunk
    let scores = rig
        .backend
        .similarities(&*rig.store, MODEL, &q, &asked)
        .expect("similarities");
    assert_eq!(
        scores.keys().copied().collect::<HashSet<_>>(),
        named.iter().copied().collect::<HashSet<_>>(),
        "every named chunk with a vector, and nothing else"
    );
    for (id, v) in pool.iter().filter(|(id, _)| named.contains(id)) {
        let exact = cosine(v, &q);
        assert!(
            (scores[id] - exact).abs() <= SCORE_TOLERANCE,
            "chunk {id}: {} vs {exact}",
            scores[id]
        );
    }
}

/// Each case once per backend: `local::case` and `postgres::case`.
macro_rules! vector_backend_suite {
    ($($case:ident),* $(,)?) => {
        mod local {
            $(
                #[test]
                fn $case() {
                    if let Some(rig) = super::Rig::local() {
                        super::$case(rig);
                    }
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $case() {
                    if let Some(rig) = super::Rig::postgres() {
                        super::$case(rig);
                    }
                }
            )*
        }
    };
}

vector_backend_suite!(
    search_finds_the_true_neighbours_best_first_with_exact_scores,
    a_collection_filter_returns_nothing_outside_it,
    removed_documents_leave_the_results,
    a_new_models_vectors_replace_the_old_ones,
    similarities_are_exact_for_named_chunks,
);
