//! Vector search in PostgreSQL (`VectorSearch`): filtered and unfiltered nearest chunks
//! against a brute-force oracle, the exact path for small filters, and similarities of
//! named chunks. On the server `QUARRY_TEST_DATABASE_URL` names (see conformance.rs).

use crate::common::TestDatabase;
use quarry_core::CollectionKind;
use quarry_store::prelude::*;
use quarry_store::{DocChange, DocChunks, NewChunk};
use quarry_store_pg::PgStore;

const DIMS: usize = 48;
const MODEL: &str = "test/model@v1#48";

fn store() -> Option<(TestDatabase, PgStore)> {
    let db = TestDatabase::create("quarry_v")?;
    let store = PgStore::connect(&db.url).expect("connect the store");
    Some((db, store))
}

/// Deterministic pseudo-random unit vectors.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 20_000) as f32 / 10_000.0 - 1.0
    }
    fn unit(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIMS).map(|_| self.next()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `n` one-chunk documents in a new collection `name`; returns (chunk id, vector) pairs.
fn fill(store: &PgStore, name: &str, n: usize, rng: &mut Rng) -> (i64, Vec<(i64, Vec<f32>)>) {
    let c = store
        .create_collection("default", name, CollectionKind::Folder, "/x", "**/*.md")
        .expect("collection");
    let changes: Vec<DocChange> = (0..n)
        .map(|i| DocChange::Upsert {
            path: format!("{i}.md"),
            title: format!("{name} {i}"),
            hash: format!("{name}-{i:060}"),
            size: 10,
            stamp: 1,
            body: format!("document {i} of {name}"),
            pages: Vec::new(),
            furniture: Vec::new(),
        })
        .collect();
    let work = store.apply_changes(c.id, changes).expect("apply_changes");
    let mut vectors = Vec::new();
    let docs: Vec<DocChunks> = work
        .upserts
        .iter()
        .map(|d| {
            let hash = format!("chunk-{name}-{}", d.id);
            vectors.push((hash.clone(), rng.unit()));
            DocChunks {
                document_id: d.id,
                doc_hash: store.documents_by_ids(&[d.id]).expect("documents_by_ids")[0]
                    .hash
                    .clone(),
                chunks: vec![NewChunk {
                    byte_start: 0,
                    byte_end: d.body.len(),
                    line_start: 1,
                    line_end: 1,
                    hash,
                    page: None,
                    heading: String::new(),
                }],
            }
        })
        .collect();
    store.replace_chunks(&docs).expect("replace_chunks");
    store
        .put_embeddings(MODEL, &vectors)
        .expect("put_embeddings");
    let ids = store.chunk_ids_in_collection(c.id).expect("chunk ids");
    let refs = store.chunk_refs(&ids).expect("chunk refs");
    let by_doc: std::collections::HashMap<i64, i64> =
        refs.iter().map(|r| (r.document_id, r.id)).collect();
    let out = work
        .upserts
        .iter()
        .zip(vectors)
        .map(|(d, (_, v))| (by_doc[&d.id], v))
        .collect();
    (c.id, out)
}

/// Share of `truth` found, where a found chunk as similar as the last true neighbour (to
/// half precision, which stored vectors have) counts as a true one.
fn recall(found: &[(i64, f32)], truth: &[(i64, f32)], pool: &[(i64, Vec<f32>)], q: &[f32]) -> f64 {
    let Some(&(_, floor)) = truth.last() else {
        return 1.0;
    };
    let hit = found
        .iter()
        .filter(|(id, _)| {
            pool.iter()
                .find(|(p, _)| p == id)
                .is_some_and(|(_, v)| cosine(v, q) >= floor - 2e-3)
        })
        .count();
    hit.min(truth.len()) as f64 / truth.len() as f64
}

fn oracle(pool: &[(i64, Vec<f32>)], q: &[f32], k: usize) -> Vec<(i64, f32)> {
    let mut all: Vec<(i64, f32)> = pool.iter().map(|(id, v)| (*id, cosine(v, q))).collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all.truncate(k);
    all
}

#[test]
fn filtered_and_unfiltered_search_find_the_true_neighbours() {
    let Some((_db, store)) = store() else { return };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // `small` is searched exactly (few chunks), `large` through the index with a filter.
    let (small, small_vecs) = fill(&store, "small", 300, &mut rng);
    let (large, large_vecs) = fill(&store, "large", 4_500, &mut rng);
    store.prepare_vectors(MODEL, DIMS).expect("prepare_vectors");
    store
        .prepare_vectors(MODEL, DIMS)
        .expect("prepare_vectors again is cheap");
    let all: Vec<(i64, Vec<f32>)> = small_vecs.iter().chain(&large_vecs).cloned().collect();
    let (mut r_all, mut r_small, mut r_large) = (0.0, 0.0, 0.0);
    let queries = 20;
    for _ in 0..queries {
        let q = rng.unit();
        let found = store.nearest_chunks(MODEL, &q, 10, None).expect("search");
        assert_eq!(found.len(), 10);
        assert!(
            found.windows(2).all(|w| w[0].1 >= w[1].1),
            "best first: {found:?}"
        );
        r_all += recall(&found, &oracle(&all, &q, 10), &all, &q);
        let found = store
            .nearest_chunks(MODEL, &q, 10, Some(&[small]))
            .expect("search");
        assert!(
            found
                .iter()
                .all(|(id, _)| small_vecs.iter().any(|(s, _)| s == id)),
            "filter"
        );
        r_small += recall(&found, &oracle(&small_vecs, &q, 10), &small_vecs, &q);
        let found = store
            .nearest_chunks(MODEL, &q, 10, Some(&[large]))
            .expect("search");
        assert_eq!(
            found.len(),
            10,
            "a filtered index search still fills its answer"
        );
        assert!(
            found
                .iter()
                .all(|(id, _)| large_vecs.iter().any(|(s, _)| s == id)),
            "filter"
        );
        r_large += recall(&found, &oracle(&large_vecs, &q, 10), &large_vecs, &q);
        // Similarities agree with the oracle to half precision.
        let ids: Vec<i64> = small_vecs.iter().take(5).map(|(id, _)| *id).collect();
        let sims = store
            .chunk_similarities(MODEL, &q, &ids)
            .expect("similarities");
        assert_eq!(sims.len(), 5);
        for (id, v) in small_vecs.iter().take(5) {
            assert!(
                (sims[id] - cosine(v, &q)).abs() < 5e-3,
                "{} vs {}",
                sims[id],
                cosine(v, &q)
            );
        }
    }
    let n = f64::from(queries);
    assert_eq!(r_small / n, 1.0, "the small filter is searched exactly");
    assert!(r_all / n >= 0.95, "unfiltered recall@10 {}", r_all / n);
    assert!(r_large / n >= 0.95, "filtered recall@10 {}", r_large / n);
    // Another model's vectors, or none: nothing found, no error.
    assert!(
        store
            .nearest_chunks("other#48", &rng.unit(), 10, None)
            .expect("search")
            .is_empty()
    );
}

#[test]
fn bad_dimensions_are_clear_errors() {
    let Some((_db, store)) = store() else { return };
    let err = store
        .prepare_vectors(MODEL, 0)
        .expect_err("zero dimensions");
    assert!(err.to_string().contains("0 dimensions"), "{err}");
    let err = store.prepare_vectors(MODEL, 5000).expect_err("too many");
    assert!(err.to_string().contains("1 to 4000"), "{err}");
}
