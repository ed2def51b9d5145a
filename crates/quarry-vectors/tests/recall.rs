//! ANN recall against the exact oracle on 50,000 random 384-dimensional unit vectors.
//!
//! The vectors are random but embedding-like (see `common::LatentModel`: 24 latent factors
//! projected to 384 dimensions plus 10% isotropic noise, normalised); queries are fresh draws
//! from the same model, not copies of indexed vectors. Isotropic random vectors are a
//! degenerate worst case for every graph index (recall@10 ≈ 0.13 at ef = 64 at this size):
//! `examples/ann_bench.rs --data isotropic` measures that case and the `ef` it needs.

mod common;

use std::time::Instant;

use common::{LatentModel, recall};
use quarry_vectors::{Quantization, VectorIndex, VectorIndexOptions, exact_search};

const N: usize = 50_000;
const DIMS: usize = 384;
const QUERIES: usize = 200;
const K: usize = 10;

fn build(data: &[f32], options: VectorIndexOptions) -> VectorIndex {
    let index = VectorIndex::create(options).expect("create");
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = N.div_ceil(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let index = &index;
            s.spawn(move || {
                for i in (t * chunk)..((t + 1) * chunk).min(N) {
                    index
                        .add(i as u64, &data[i * DIMS..(i + 1) * DIMS])
                        .expect("add");
                }
            });
        }
    });
    assert_eq!(index.len(), N);
    index
}

fn measure(
    index: &VectorIndex,
    data: &[f32],
    queries: &[f32],
    filter: Option<&dyn Fn(u64) -> bool>,
) -> (f64, f64) {
    let mut total = 0.0;
    let mut ann_time = 0.0;
    for q in queries.chunks_exact(DIMS) {
        let truth = exact_search(
            data.chunks_exact(DIMS)
                .enumerate()
                .map(|(i, v)| (i as u64, v)),
            q,
            K,
            filter,
        );
        let t = Instant::now();
        let found = index.search(q, K, filter).expect("search");
        ann_time += t.elapsed().as_secs_f64();
        assert_eq!(found.len(), K);
        if let Some(keep) = filter {
            assert!(found.iter().all(|(k, _)| keep(*k)), "filter violated");
        }
        // Similarities are cosine similarities: compare with the exact dot products.
        for (key, sim) in &found {
            let v = &data[*key as usize * DIMS..(*key as usize + 1) * DIMS];
            let exact = quarry_vectors::dot(v, q);
            assert!(
                (sim - exact).abs() < 1e-3,
                "similarity {sim} vs exact {exact}"
            );
        }
        total += recall(&found, &truth);
    }
    let n = (queries.len() / DIMS) as f64;
    (total / n, ann_time / n * 1e3)
}

#[test]
fn ann_recall_at_10_f32() {
    let t = Instant::now();
    let model = LatentModel::new(1, DIMS, 24, 0.1);
    let data = model.matrix(42, N);
    let queries = model.matrix(7, QUERIES);
    eprintln!("generated data in {:.2?}", t.elapsed());

    let t = Instant::now();
    let index = build(&data, VectorIndexOptions::new(DIMS));
    eprintln!(
        "built {N} x {DIMS} f32 index in {:.2?} (kernel: {})",
        t.elapsed(),
        index.hardware_acceleration()
    );

    let t = Instant::now();
    let (unfiltered, ms) = measure(&index, &data, &queries, None);
    eprintln!(
        "recall@{K} unfiltered = {unfiltered:.4} (ann {ms:.3} ms/query; with oracle {:.2?})",
        t.elapsed()
    );

    let keep = |key: u64| key % 10 == 3;
    let t = Instant::now();
    let (filtered, ms) = measure(&index, &data, &queries, Some(&keep));
    eprintln!(
        "recall@{K} filtered (key % 10 == 3) = {filtered:.4} (ann {ms:.3} ms/query; with oracle {:.2?})",
        t.elapsed()
    );

    assert!(unfiltered >= 0.95, "unfiltered recall {unfiltered} < 0.95");
    assert!(filtered >= 0.95, "filtered recall {filtered} < 0.95");
}

/// I8 quantization on a smaller set: recall stays high and similarities stay close to exact.
#[test]
fn ann_recall_at_10_i8() {
    const N_I8: usize = 10_000;
    let model = LatentModel::new(1, DIMS, 24, 0.1);
    let data = model.matrix(43, N_I8);
    let queries = model.matrix(8, 100);
    let options = VectorIndexOptions {
        quantization: Quantization::I8,
        ..VectorIndexOptions::new(DIMS)
    };
    let index = VectorIndex::create(options).expect("create");
    for (i, v) in data.chunks_exact(DIMS).enumerate() {
        index.add(i as u64, v).expect("add");
    }
    let mut total = 0.0;
    let mut worst_error = 0.0f32;
    for q in queries.chunks_exact(DIMS) {
        let truth = exact_search(
            data.chunks_exact(DIMS)
                .enumerate()
                .map(|(i, v)| (i as u64, v)),
            q,
            K,
            None,
        );
        let found = index.search(q, K, None).expect("search");
        for (key, sim) in &found {
            let v = &data[*key as usize * DIMS..(*key as usize + 1) * DIMS];
            worst_error = worst_error.max((sim - quarry_vectors::dot(v, q)).abs());
        }
        total += recall(&found, &truth);
    }
    let r = total / 100.0;
    eprintln!("i8: recall@{K} = {r:.4} on {N_I8} vectors, worst similarity error {worst_error:.4}");
    assert!(r >= 0.90, "i8 recall {r} < 0.90");
    assert!(worst_error < 0.05, "i8 similarity error {worst_error}");
}
