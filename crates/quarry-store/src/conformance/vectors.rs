//! Fixtures for the vector tests of every backend: deterministic unit vectors, one-chunk
//! documents with a vector each, and the brute-force oracle they are checked against
//! (`quarry-store-pg`'s pgvector tests and `quarry-engine`'s vector-backend suite).

use std::collections::HashMap;

use quarry_core::CollectionKind;

use crate::{DocChange, DocChunks, NewChunk, Store};

/// Deterministic pseudo-random unit vectors of `dims` dimensions (xorshift).
pub struct UnitVectors {
    state: u64,
    dims: usize,
}

impl UnitVectors {
    /// A generator of `dims`-dimensional vectors, the same sequence for the same seed.
    pub fn new(seed: u64, dims: usize) -> UnitVectors {
        UnitVectors { state: seed, dims }
    }

    fn next(&mut self) -> f32 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % 20_000) as f32 / 10_000.0 - 1.0
    }

    /// The next unit vector.
    pub fn unit(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..self.dims).map(|_| self.next()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

/// The cosine of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The true `k` nearest of `pool` to `q`, best first (ties by id).
pub fn oracle(pool: &[(i64, Vec<f32>)], q: &[f32], k: usize) -> Vec<(i64, f32)> {
    let mut all: Vec<(i64, f32)> = pool.iter().map(|(id, v)| (*id, cosine(v, q))).collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

/// A chunk [`fill`] stored: its id, the hash of its text (the embeddings' key) and the
/// `model` vector stored for it.
#[derive(Clone, Debug)]
pub struct FilledChunk {
    /// The chunk's row id.
    pub id: i64,
    /// Its text's hash.
    pub hash: String,
    /// Its vector.
    pub vector: Vec<f32>,
}

/// `n` one-chunk documents in a new collection `name` of the default space, each chunk
/// with a `model` vector from `vectors`; returns the collection's id and the chunks.
pub fn fill(
    store: &dyn Store,
    name: &str,
    n: usize,
    model: &str,
    vectors: &mut UnitVectors,
) -> (i64, Vec<FilledChunk>) {
    let (c, chunks) = one_chunk_documents(store, name, n, |_, document_id| {
        format!("chunk-{name}-{document_id}")
    });
    let embeddings: Vec<(String, Vec<f32>)> = chunks
        .iter()
        .map(|(_, hash)| (hash.clone(), vectors.unit()))
        .collect();
    store
        .put_embeddings(model, &embeddings)
        .expect("put_embeddings");
    let chunks = chunks
        .into_iter()
        .zip(embeddings)
        .map(|((id, hash), (_, vector))| FilledChunk { id, hash, vector })
        .collect();
    (c, chunks)
}

/// A new collection `name` of one-chunk documents whose chunks reuse the texts (hashes) of
/// `of`, as the same pages in several knowledge bases do: no vector is stored, each chunk
/// has its text's. Returns the collection id and its chunks, in `of`'s order.
pub fn copy(store: &dyn Store, name: &str, of: &[FilledChunk]) -> (i64, Vec<FilledChunk>) {
    let (c, chunks) = one_chunk_documents(store, name, of.len(), |i, _| of[i].hash.clone());
    let chunks = chunks
        .into_iter()
        .zip(of)
        .map(|((id, hash), chunk)| FilledChunk {
            id,
            hash,
            vector: chunk.vector.clone(),
        })
        .collect();
    (c, chunks)
}

/// `n` one-chunk documents in a new collection `name` of the default space, the `i`th
/// document's chunk with the text hash `hash_of(i, document id)`; returns the collection's
/// id and each chunk's (id, hash), in document order.
fn one_chunk_documents(
    store: &dyn Store,
    name: &str,
    n: usize,
    mut hash_of: impl FnMut(usize, i64) -> String,
) -> (i64, Vec<(i64, String)>) {
    let c = store
        .create_collection("default", name, CollectionKind::Folder, "/x", "**/*.md")
        .expect("collection");
    let changes = (0..n)
        .map(|i| DocChange::Upsert {
            meta: Default::default(),
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
    let hashes: Vec<String> = work
        .upserts
        .iter()
        .enumerate()
        .map(|(i, d)| hash_of(i, d.id))
        .collect();
    let docs: Vec<DocChunks> = work
        .upserts
        .iter()
        .zip(&hashes)
        .map(|(d, hash)| DocChunks {
            document_id: d.id,
            doc_hash: store.documents_by_ids(&[d.id]).expect("documents_by_ids")[0]
                .hash
                .clone(),
            chunks: vec![NewChunk {
                byte_start: 0,
                byte_end: d.body.len(),
                line_start: 1,
                line_end: 1,
                hash: hash.clone(),
                page: None,
                heading: String::new(),
                text: None,
            }],
        })
        .collect();
    store.replace_chunks(&docs).expect("replace_chunks");
    let ids: Vec<i64> = work.upserts.iter().map(|d| d.id).collect();
    let refs = store
        .chunks_of_documents(&ids)
        .expect("chunks_of_documents");
    assert_eq!(refs.len(), n, "one chunk per document");
    let chunk_of: HashMap<i64, i64> = refs.iter().map(|r| (r.document_id, r.id)).collect();
    let chunks = work
        .upserts
        .iter()
        .zip(hashes)
        .map(|(d, hash)| (chunk_of[&d.id], hash))
        .collect();
    (c.id, chunks)
}
