//! Vector search in PostgreSQL (`VectorSearch`): filtered and unfiltered nearest chunks
//! against a brute-force oracle, the exact path for small filters, and similarities of
//! named chunks. On the server `QUARRY_TEST_DATABASE_URL` names (see conformance.rs).

use crate::common::{TestDatabase, wait_for_lock_waiters};
use quarry_store::conformance::vectors::{self, UnitVectors, cosine, oracle};
use quarry_store::prelude::*;
use quarry_store_pg::PgStore;

const DIMS: usize = 48;
const MODEL: &str = "test/model@v1#48";

fn store() -> Option<(TestDatabase, PgStore)> {
    let db = TestDatabase::create("quarry_v")?;
    let store = PgStore::connect(&db.url).expect("connect the store");
    Some((db, store))
}

/// A collection's id and its chunks' (id, vector) pairs.
type Filled = (i64, Vec<(i64, Vec<f32>)>);

/// `n` one-chunk documents in a new collection `name`; returns (chunk id, vector) pairs.
fn fill(store: &PgStore, name: &str, n: usize, rng: &mut UnitVectors) -> Filled {
    let (c, chunks) = vectors::fill(store, name, n, MODEL, rng);
    (c, chunks.into_iter().map(|k| (k.id, k.vector)).collect())
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

/// The 10 nearest chunks to `q` in `collection`, each checked to be one of its `chunks`, and
/// their recall against the oracle over those chunks.
fn search_in(
    store: &PgStore,
    q: &[f32],
    collection: i64,
    chunks: &[(i64, Vec<f32>)],
) -> (Vec<(i64, f32)>, f64) {
    let found = store
        .nearest_chunks(MODEL, q, 10, Some(&[collection]))
        .expect("search");
    assert!(
        found
            .iter()
            .all(|(id, _)| chunks.iter().any(|(s, _)| s == id)),
        "filter"
    );
    let r = recall(&found, &oracle(chunks, q, 10), chunks, q);
    (found, r)
}

#[test]
fn filtered_and_unfiltered_search_find_the_true_neighbours() {
    let Some((db, store)) = store() else { return };
    // The threshold the sizes below were chosen for (the default is larger): `large` must
    // go through the graph.
    let store = store.with_exact_search_max(4_096);
    let mut rng = UnitVectors::new(0x9e37_79b9_7f4a_7c15, DIMS);
    // `small` is searched exactly (few chunks), `large` through the index with a filter
    // (its chunks counted up to 4,097, its share read from the statistics).
    let (small, small_vecs) = fill(&store, "small", 300, &mut rng);
    let (large, large_vecs) = fill(&store, "large", 4_500, &mut rng);
    // `tiny` (2 % of the chunks) is searched exactly too.
    let (tiny, tiny_vecs) = fill(&store, "tiny", 100, &mut rng);
    // The planner's statistics, as autovacuum leaves them: shares are taken of its count
    // of all chunks, and `large`'s (past what is worth counting) of its documents'.
    db.client()
        .batch_execute("ANALYZE chunks, documents")
        .expect("ANALYZE");
    store.prepare_vectors(MODEL, DIMS).expect("prepare_vectors");
    store
        .prepare_vectors(MODEL, DIMS)
        .expect("prepare_vectors again is cheap");
    let all: Vec<(i64, Vec<f32>)> = small_vecs
        .iter()
        .chain(&large_vecs)
        .chain(&tiny_vecs)
        .cloned()
        .collect();
    let (mut r_all, mut r_small, mut r_large, mut r_tiny) = (0.0, 0.0, 0.0, 0.0);
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
        let (_, r) = search_in(&store, &q, small, &small_vecs);
        r_small += r;
        let (found, r) = search_in(&store, &q, tiny, &tiny_vecs);
        assert_eq!(found.len(), 10);
        r_tiny += r;
        let (found, r) = search_in(&store, &q, large, &large_vecs);
        assert_eq!(
            found.len(),
            10,
            "a filtered index search still fills its answer"
        );
        r_large += r;
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
    assert_eq!(r_tiny / n, 1.0, "the tiny filter is searched exactly");
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

/// Collections that share their texts (the same pages in several knowledge bases): a filter
/// to one of them past the exact search's size — read whole from `chunk_vectors` rather than
/// walked, as its chunks are few beside the candidates' chunks a walk would check — answers
/// with its own chunks only, never a copy's, and finds the true neighbours among them.
#[test]
fn a_filter_over_texts_other_collections_share_keeps_to_its_own_chunks() {
    let Some((db, store)) = store() else { return };
    // Every filter here goes through the index: 100 chunks at most are searched exactly.
    let store = store.with_exact_search_max(100);
    let mut rng = UnitVectors::new(0x2545_f491_4f6c_dd1d, DIMS);
    let (_, first) = vectors::fill(&store, "first", 600, MODEL, &mut rng);
    // Each copy holds a quarter of the texts, every text is in two copies: a candidate
    // text outside the filter is most of the nearest.
    let copies: Vec<Filled> = (0..8)
        .map(|i| {
            let texts: Vec<_> = first
                .iter()
                .cycle()
                .skip(i * 75)
                .take(150)
                .cloned()
                .collect();
            let (c, chunks) = vectors::copy(&store, &format!("copy{i}"), &texts);
            (c, chunks.into_iter().map(|k| (k.id, k.vector)).collect())
        })
        .collect();
    db.client()
        .batch_execute("ANALYZE chunks, documents")
        .expect("ANALYZE");
    store.prepare_vectors(MODEL, DIMS).expect("prepare_vectors");
    let queries = 20;
    let mut r = 0.0;
    for i in 0..queries {
        let q = rng.unit();
        let (collection, chunks) = &copies[i % copies.len()];
        let (found, recall) = search_in(&store, &q, *collection, chunks);
        assert_eq!(found.len(), 10, "the answer is filled: {found:?}");
        assert!(
            found.windows(2).all(|w| w[0].1 >= w[1].1),
            "best first: {found:?}"
        );
        r += recall;
        // Two collections: the nearest of both, each a chunk of one of them.
        let (other, other_chunks) = &copies[(i + 1) % copies.len()];
        let found = store
            .nearest_chunks(MODEL, &q, 10, Some(&[*collection, *other]))
            .expect("search");
        assert_eq!(found.len(), 10);
        assert!(
            found
                .iter()
                .all(|(id, _)| chunks.iter().chain(other_chunks).any(|(s, _)| s == id)),
            "filter: {found:?}"
        );
    }
    assert!(
        r / queries as f64 >= 0.95,
        "filtered recall@10 {}",
        r / queries as f64
    );
}

/// Each chunk carries its document's collection (schema v27): a database from before is
/// filled in when it is opened (the chunks of no document dropped), a chunk written without
/// it (a copy from the embedded store) gets its document's, and one that moved with its
/// document follows it; filtered searches keep to the filter throughout.
#[test]
fn chunks_know_their_collection_from_before_v27_and_after() {
    let Some((db, store)) = store() else { return };
    let store = store.with_exact_search_max(10);
    let mut rng = UnitVectors::new(0x51_7cc1_b727_220a, DIMS);
    let (a, a_chunks) = fill(&store, "a", 120, &mut rng);
    let (b, b_chunks) = fill(&store, "b", 120, &mut rng);
    let (_, first) = vectors::fill(&store, "c", 60, MODEL, &mut rng);
    let (d, d_chunks) = vectors::copy(&store, "d", &first);
    let mut raw = db.client();
    // The schema as v26 left it, with a chunk whose document is gone.
    raw.batch_execute(BACK_TO_V27).expect("back to v27");
    raw.batch_execute(
        "DROP TRIGGER chunks_collection_filled ON chunks; \
         DROP TRIGGER documents_moved_chunks ON documents; \
         DROP FUNCTION quarry_chunk_collection(); DROP FUNCTION quarry_document_moved(); \
         ALTER TABLE chunks DROP COLUMN collection_id; \
         DROP FUNCTION quarry_document_collection(bigint); \
         DELETE FROM quarry_schema WHERE version = 27; \
         INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, line_end, hash) \
         VALUES (-1, 0, 0, 1, 1, 1, 'orphan')",
    )
    .expect("back to v26");
    drop(store);
    let store = PgStore::connect(&db.url)
        .expect("open and upgrade")
        .with_exact_search_max(10);
    let wrong = |raw: &mut postgres::Client| -> i64 {
        raw.query_one(
            "SELECT count(*) FROM chunks c LEFT JOIN documents d ON d.id = c.document_id \
             WHERE d.collection_id IS DISTINCT FROM c.collection_id",
            &[],
        )
        .expect("compare")
        .get(0)
    };
    assert_eq!(
        wrong(&mut raw),
        0,
        "every chunk has its document's collection"
    );
    let total: i64 = raw
        .query_one("SELECT count(*) FROM chunks", &[])
        .expect("count")
        .get(0);
    assert_eq!(
        total,
        120 + 120 + 60 + 60,
        "the orphan is gone, nothing else"
    );
    raw.batch_execute("ANALYZE chunks, documents")
        .expect("ANALYZE");
    store.prepare_vectors(MODEL, DIMS).expect("prepare_vectors");
    let d_pairs: Vec<(i64, Vec<f32>)> = d_chunks.iter().map(|k| (k.id, k.vector.clone())).collect();
    for _ in 0..5 {
        let q = rng.unit();
        for (collection, chunks) in [(a, &a_chunks), (b, &b_chunks), (d, &d_pairs)] {
            let (found, recall) = search_in(&store, &q, collection, chunks);
            assert_eq!(found.len(), 10, "{found:?}");
            assert!(recall >= 0.9, "recall@10 {recall} in {collection}");
        }
    }
    // A row written without its collection (as `quarry migrate` copies them) gets its
    // document's; a document that moves takes its chunks along.
    let a_doc: i64 = raw
        .query_one(
            "SELECT id FROM documents WHERE collection_id = $1 ORDER BY id LIMIT 1",
            &[&a],
        )
        .expect("a document")
        .get(0);
    raw.execute(
        "INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, line_end, hash) \
         VALUES ($1, 1, 0, 1, 1, 1, 'copied')",
        &[&a_doc],
    )
    .expect("insert without a collection");
    raw.execute(
        "UPDATE documents SET collection_id = $1, path = 'moved.md' WHERE id = $2",
        &[&b, &a_doc],
    )
    .expect("move the document");
    assert_eq!(wrong(&mut raw), 0, "chunks follow their document");
    let moved: i64 = raw
        .query_one(
            "SELECT count(*) FROM chunks WHERE document_id = $1 AND collection_id = $2",
            &[&a_doc, &b],
        )
        .expect("moved")
        .get(0);
    assert_eq!(moved, 2);
}

/// Undoes schema v30 (a token column), v29 (an index) and v28 (`chunk_vectors` and what
/// keeps it), as a database written by the release before v28 holds it.
const BACK_TO_V27: &str = "DROP TRIGGER chunks_vectors_added ON chunks; \
     DROP TRIGGER chunks_vectors_removed ON chunks; \
     DROP TRIGGER chunks_vectors_changed ON chunks; \
     DROP TRIGGER embeddings_vectors_added ON embeddings; \
     DROP TRIGGER embeddings_vectors_changed ON embeddings; \
     DROP TRIGGER embeddings_vectors_removed ON embeddings; \
     DROP FUNCTION quarry_chunks_added(), quarry_chunks_removed(), quarry_chunks_changed(), \
         quarry_embeddings_stored(), quarry_embeddings_removed(); \
     DROP TABLE chunk_vectors; DROP INDEX embeddings_hash; DROP INDEX kb_files_superseded_by; \
     ALTER TABLE access_tokens DROP COLUMN manage; \
     ALTER TABLE sources DROP COLUMN allow_net; ALTER TABLE sources DROP COLUMN refused_under; \
     DROP TABLE embedded_batches; \
     DROP INDEX kb_files_current_key; DROP INDEX kb_files_upload_blob; \
     CREATE UNIQUE INDEX kb_files_current_key ON kb_files(collection_id, entry_key) \
         WHERE entry_key IS NOT NULL AND superseded_by IS NULL; \
     CREATE UNIQUE INDEX kb_files_upload_blob ON kb_files(collection_id, blob) \
         WHERE source_id IS NULL AND superseded_by IS NULL; \
     DROP INDEX kb_files_name; \
     ALTER TABLE kb_files ADD CONSTRAINT kb_files_collection_id_name_key UNIQUE (collection_id, name); \
     DROP INDEX documents_path; DROP INDEX documents_kb_file; ALTER TABLE documents DROP COLUMN kb_file; \
     ALTER TABLE documents ADD CONSTRAINT documents_collection_id_path_key UNIQUE (collection_id, path); \
     DROP TABLE page_sources; \
     DROP TABLE sign_in_requests, user_identities, web_sessions; \
     DROP TABLE search_log, usage_daily, usage_people; \
     DELETE FROM quarry_schema WHERE version >= 28";

/// Rows of `chunk_vectors` that differ from what it derives from (each chunk with each
/// embedding of its text), both ways, and how many it holds.
fn vectors_out_of_step(raw: &mut postgres::Client) -> (i64, i64) {
    let row = raw
        .query_one(
            "WITH want AS (SELECT c.id, e.model, c.collection_id, e.vector::text AS v \
                 FROM chunks c JOIN embeddings e ON e.hash = c.hash), \
             have AS (SELECT chunk_id, model, collection_id, vector::text AS v FROM chunk_vectors) \
             SELECT (SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM have) m) \
                  + (SELECT count(*) FROM (SELECT * FROM have EXCEPT ALL SELECT * FROM want) x), \
                 (SELECT count(*) FROM chunk_vectors)",
            &[],
        )
        .expect("compare chunk_vectors");
    (row.get(0), row.get(1))
}

/// Filtered searches read each chunk's vector beside its collection (`chunk_vectors`,
/// schema v28), derived from chunks and embeddings by triggers: after every kind of write
/// on either side — chunks whose texts already have vectors, new and changed vectors, a
/// document that moves, vectors and documents removed — and after an upgrade from v27, it
/// holds exactly a row per chunk and embedding of its text, and searches find the vectors
/// as they are now.
#[test]
fn chunk_vectors_follow_every_write_of_either_side() {
    let Some((db, store)) = store() else { return };
    let store = store.with_exact_search_max(1_000);
    let mut raw = db.client();
    let mut rng = UnitVectors::new(0x6a09_e667_f3bc_c908, DIMS);
    let (a, a_chunks) = vectors::fill(&store, "a", 80, MODEL, &mut rng);
    let (_, b_chunks) = fill(&store, "b", 40, &mut rng);
    assert_eq!(
        vectors_out_of_step(&mut raw),
        (0, 120),
        "new texts, then vectors"
    );
    // Chunks whose texts have vectors already.
    let (d, d_chunks) = vectors::copy(&store, "d", &a_chunks[..30]);
    assert_eq!(
        vectors_out_of_step(&mut raw),
        (0, 150),
        "chunks of embedded texts"
    );
    // New vectors for texts a and d share: both collections' searches see them.
    let changed: Vec<(String, Vec<f32>)> = a_chunks[..5]
        .iter()
        .map(|k| (k.hash.clone(), rng.unit()))
        .collect();
    store.put_embeddings(MODEL, &changed).expect("new vectors");
    assert_eq!(vectors_out_of_step(&mut raw), (0, 150), "changed vectors");
    for (collection, chunk) in [(a, &a_chunks[2]), (d, &d_chunks[2])] {
        let q = &changed[2].1;
        let found = store
            .nearest_chunks(MODEL, q, 1, Some(&[collection]))
            .expect("search");
        assert_eq!(found.first().map(|f| f.0), Some(chunk.id), "{found:?}");
        assert!(found[0].1 > 0.999, "the new vector: {found:?}");
    }
    let similar = store
        .chunk_similarities(MODEL, &changed[0].1, &[a_chunks[0].id, d_chunks[0].id])
        .expect("similarities");
    assert!(similar.values().all(|s| *s > 0.999), "{similar:?}");
    // A document that moves takes its chunks' vectors along.
    raw.execute(
        "UPDATE documents SET collection_id = $1, path = 'moved.md' \
         WHERE id = (SELECT document_id FROM chunks WHERE id = $2)",
        &[&d, &b_chunks[0].0],
    )
    .expect("move a document");
    assert_eq!(vectors_out_of_step(&mut raw), (0, 150), "a moved document");
    let moved = store
        .nearest_chunks(MODEL, &b_chunks[0].1, 1, Some(&[d]))
        .expect("search");
    assert_eq!(moved.first().map(|f| f.0), Some(b_chunks[0].0));
    // Vectors removed (a model's, for a collection), then documents removed.
    let removed = store
        .delete_embeddings("default", Some(a), MODEL)
        .expect("delete_embeddings");
    assert_eq!(removed, 80);
    assert_eq!(vectors_out_of_step(&mut raw), (0, 40), "vectors removed");
    assert!(
        store
            .nearest_chunks(MODEL, &rng.unit(), 10, Some(&[a, d]))
            .expect("search")
            .len()
            == 1,
        "only the moved document's chunk is left with a vector in a and d"
    );
    store.remove_collection("default", "b").expect("remove b");
    assert_eq!(vectors_out_of_step(&mut raw), (0, 1), "documents removed");
    // A database from before v28 gets the table filled when it is opened.
    let (_, e_chunks) = fill(&store, "e", 60, &mut rng);
    raw.batch_execute(BACK_TO_V27).expect("back to v27");
    drop(store);
    let store = PgStore::connect(&db.url)
        .expect("open and upgrade")
        .with_exact_search_max(1_000);
    assert_eq!(vectors_out_of_step(&mut raw), (0, 61), "upgraded from v27");
    let found = store
        .nearest_chunks(MODEL, &e_chunks[7].1, 1, None)
        .expect("search");
    assert_eq!(found.first().map(|f| f.0), Some(e_chunks[7].0));
}

/// A chunk written while an embedding of its text commits in another transaction (another
/// node's embedding batch), and a chunk removed while one does, leave `chunk_vectors` exact
/// whichever side commits first: the second waits for the first (the triggers' lock) and
/// then reads what it wrote.
#[test]
fn chunks_and_embeddings_written_at_once_keep_chunk_vectors_exact() {
    let Some((db, store)) = store() else { return };
    let mut rng = UnitVectors::new(0xbb67_ae85_84ca_a73b, DIMS);
    let (_, chunks) = fill(&store, "a", 3, &mut rng);
    let mut raw = db.client();
    let document: i64 = raw
        .query_one(
            "SELECT document_id FROM chunks WHERE id = $1",
            &[&chunks[0].0],
        )
        .expect("a document")
        .get(0);
    let insert_chunk = "INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, \
         line_end, hash) VALUES ($1, 9, 0, 1, 1, 1, $2) RETURNING id";
    // A chunk's transaction first, the embedding's statement during it.
    let mut first = db.client();
    let mut tx = first.transaction().expect("begin");
    let chunk: i64 = tx
        .query_one(insert_chunk, &[&document, &"race-1"])
        .expect("a chunk")
        .get(0);
    std::thread::scope(|s| {
        let embedding = s.spawn(|| store.put_embeddings(MODEL, &[("race-1".into(), rng.unit())]));
        wait_for_lock_waiters(&mut raw, 1, "INSERT INTO embeddings%");
        tx.commit().expect("commit the chunk");
        embedding.join().unwrap().expect("put_embeddings");
    });
    assert_eq!(vectors_out_of_step(&mut raw), (0, 4), "chunk first");
    // An embedding's transaction first, a chunk of its text during it.
    let v = rng.unit();
    let mut tx = first.transaction().expect("begin");
    tx.execute(
        "INSERT INTO embeddings (model, hash, vector) VALUES ($1, 'race-2', $2)",
        &[&MODEL, &pgvector::HalfVector::from_f32_slice(&v)],
    )
    .expect("an embedding");
    let mut second = db.client();
    std::thread::scope(|s| {
        let chunk = s.spawn(|| second.query_one(insert_chunk, &[&document, &"race-2"]));
        wait_for_lock_waiters(&mut raw, 1, "INSERT INTO chunks%");
        tx.commit().expect("commit the embedding");
        chunk.join().unwrap().expect("insert the chunk");
    });
    assert_eq!(vectors_out_of_step(&mut raw), (0, 5), "embedding first");
    // A chunk removed while an embedding of its text commits.
    let mut tx = first.transaction().expect("begin");
    tx.execute(
        "DELETE FROM chunks WHERE hash = 'race-3' OR id = $1",
        &[&chunk],
    )
    .expect("remove the chunk");
    std::thread::scope(|s| {
        let embedding = s.spawn(|| {
            store.put_embeddings(
                MODEL,
                &[("race-1".into(), rng.unit()), ("race-3".into(), v.clone())],
            )
        });
        wait_for_lock_waiters(&mut raw, 1, "INSERT INTO embeddings%");
        tx.commit().expect("commit the removal");
        embedding.join().unwrap().expect("put_embeddings");
    });
    assert_eq!(vectors_out_of_step(&mut raw), (0, 4), "removed first");
    let left: i64 = raw
        .query_one(
            "SELECT count(*) FROM chunk_vectors WHERE chunk_id = $1",
            &[&chunk],
        )
        .expect("count")
        .get(0);
    assert_eq!(left, 0, "no vector of a removed chunk");
}

/// An embedding no chunk uses any more (the cache keeps it by text) is never an answer and
/// never crowds one out: here hundreds of them lie nearer the query than any chunk.
#[test]
fn embeddings_no_chunk_uses_take_no_place_among_the_nearest() {
    let Some((_db, store)) = store() else { return };
    let mut rng = UnitVectors::new(0x51ed_2701_a3c4_9b17, DIMS);
    let (_, live) = fill(&store, "live", 300, &mut rng);
    store.prepare_vectors(MODEL, DIMS).expect("prepare_vectors");
    let q = rng.unit();
    let near_q = |i: usize| -> Vec<f32> {
        let mut v = q.clone();
        v[i % DIMS] += 0.01;
        v
    };
    let orphans: Vec<(String, Vec<f32>)> = (0..400)
        .map(|i| (format!("orphan-{i}"), near_q(i)))
        .collect();
    store
        .put_embeddings(MODEL, &orphans)
        .expect("put_embeddings");
    for want in [1, 10, 40] {
        let found = store.nearest_chunks(MODEL, &q, want, None).expect("search");
        assert_eq!(found.len(), want, "want {want}: {found:?}");
        assert!(
            found
                .iter()
                .all(|(id, _)| live.iter().any(|(l, _)| l == id)),
            "only chunks: {found:?}"
        );
        assert_eq!(
            recall(&found, &oracle(&live, &q, want), &live, &q),
            1.0,
            "want {want}"
        );
    }
    // A query elsewhere in the space: the true neighbours as well.
    let far = rng.unit();
    let found = store.nearest_chunks(MODEL, &far, 10, None).expect("search");
    assert_eq!(recall(&found, &oracle(&live, &far, 10), &live, &far), 1.0);
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

/// The model's HNSW indexes on `embeddings`: (name, valid, definition).
fn model_indexes(db: &TestDatabase) -> Vec<(String, bool, String)> {
    db.client()
        .query(
            "SELECT c.relname::text, i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid \
             WHERE t.relname = 'embeddings' AND pg_get_indexdef(i.indexrelid) LIKE '%hnsw%' \
             ORDER BY 1",
            &[],
        )
        .expect("indexes")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// The model's HNSW indexes: (name, valid).
fn index_states(db: &TestDatabase) -> Vec<(String, bool)> {
    model_indexes(db)
        .into_iter()
        .map(|(name, valid, _)| (name, valid))
        .collect()
}

/// An index built with older graph parameters (here pgvector's defaults, under the bare
/// name earlier releases gave it) is replaced by one with today's, and searches find the
/// true neighbours before, during and after; two nodes preparing at once both succeed
/// and leave one index. An interrupted concurrent build (an invalid index under today's
/// name) is dropped and built again.
#[test]
fn an_index_with_older_parameters_is_rebuilt_while_searches_go_on() {
    let Some((db, store)) = store() else { return };
    let mut rng = UnitVectors::new(0x0dd5_11fe_4b2a_77c3, DIMS);
    let (_, chunks) = fill(&store, "docs", 400, &mut rng);
    store.prepare_vectors(MODEL, DIMS).expect("prepare_vectors");
    let [(today, true, def)] = &model_indexes(&db)[..] else {
        panic!("one valid index: {:?}", model_indexes(&db));
    };
    // Today's name is the bare name and the parameters; the bare name alone is older.
    let bare = today
        .rsplit_once("_m")
        .map(|(bare, _)| bare.to_owned())
        .expect("the name carries the parameters");
    let (head, tail) = def.split_once(" WITH (").expect("built with parameters");
    let (_, filter) = tail.split_once(") WHERE ").expect("a partial index");
    let older_def = format!("{} WHERE {filter}", head.replacen(today.as_str(), &bare, 1));
    let mut raw = db.client();
    raw.batch_execute(&format!("DROP INDEX {today}; {older_def}"))
        .expect("an index as an older release built it");
    assert_eq!(index_states(&db), [(bare.clone(), true)]);
    let queries: Vec<Vec<f32>> = (0..5).map(|_| rng.unit()).collect();
    let searched = |store: &PgStore| {
        for q in &queries {
            let found = store.nearest_chunks(MODEL, q, 10, None).expect("search");
            assert_eq!(recall(&found, &oracle(&chunks, q, 10), &chunks, q), 1.0);
        }
    };
    searched(&store);
    let second = PgStore::connect(&db.url).expect("a second node");
    std::thread::scope(|s| {
        let one = s.spawn(|| store.prepare_vectors(MODEL, DIMS));
        let two = s.spawn(|| second.prepare_vectors(MODEL, DIMS));
        let searching = s.spawn(|| searched(&second));
        one.join().unwrap().expect("node one prepares");
        two.join().unwrap().expect("node two prepares");
        searching.join().unwrap();
    });
    // The node that lost the race returned at once; whichever built, one index is left.
    store.prepare_vectors(MODEL, DIMS).expect("prepare again");
    let [(name, true, rebuilt)] = &model_indexes(&db)[..] else {
        panic!("one valid index: {:?}", model_indexes(&db));
    };
    assert_eq!(name, today);
    assert!(rebuilt.contains("ef_construction"), "{rebuilt}");
    searched(&store);
    // A `CREATE INDEX CONCURRENTLY` interrupted (here cancelled while it waits for a writer
    // to finish) leaves its index behind, invalid.
    raw.batch_execute(&format!("DROP INDEX {today}"))
        .expect("drop today's index");
    let mut writer = db.client();
    let mut writing = writer.transaction().expect("begin");
    writing
        .execute(
            "UPDATE embeddings SET vector = vector WHERE hash = (SELECT min(hash) FROM embeddings)",
            &[],
        )
        .expect("a write in progress");
    let create = def.replacen("CREATE INDEX", "CREATE INDEX CONCURRENTLY", 1);
    std::thread::scope(|s| {
        let building = s.spawn(|| db.client().batch_execute(&create));
        let pid = wait_for_lock_waiters(&mut raw, 1, "CREATE INDEX%")[0];
        raw.execute("SELECT pg_cancel_backend($1)", &[&pid])
            .expect("cancel the build");
        let failed = building.join().unwrap().expect_err("cancelled");
        let why = failed.as_db_error().map(|e| e.message().to_owned());
        assert!(
            why.as_deref().is_some_and(|m| m.contains("cancel")),
            "{failed:?}"
        );
    });
    writing.rollback().expect("rollback");
    assert_eq!(index_states(&db), [(today.clone(), false)]);
    store
        .prepare_vectors(MODEL, DIMS)
        .expect("prepare over an invalid index");
    assert_eq!(index_states(&db), [(today.clone(), true)]);
    searched(&store);
}
