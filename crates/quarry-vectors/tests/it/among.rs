//! `search_among`: a collection filter's search, exact or through the graph by cost.

use std::collections::HashSet;

use quarry_vectors::{MAX_FILTERED_EF, VectorIndex, VectorIndexOptions, exact_search, filtered_ef};

use crate::common::{LatentModel, XorShift, recall};

const DIMS: usize = 64;

fn index_of(n: usize) -> (VectorIndex, Vec<f32>) {
    let model = LatentModel::new(7, DIMS, 12, 0.1);
    let data = model.matrix(11, n);
    let index = VectorIndex::create(VectorIndexOptions::new(DIMS)).expect("create");
    for (i, v) in data.chunks_exact(DIMS).enumerate() {
        index.add(i as u64, v).expect("add");
    }
    (index, data)
}

fn oracle(data: &[f32], query: &[f32], allowed: &HashSet<u64>) -> Vec<(u64, f32)> {
    let keep = |k: u64| allowed.contains(&k);
    exact_search(
        data.chunks_exact(DIMS)
            .enumerate()
            .map(|(i, v)| (i as u64, v)),
        query,
        10,
        Some(&keep),
    )
}

#[test]
fn ef_grows_with_the_filter_narrowing() {
    assert_eq!(filtered_ef(128, 10, 1000, 1000), 128);
    assert_eq!(filtered_ef(128, 10, 500, 1000), 256);
    assert_eq!(filtered_ef(128, 10, 1, 1_000_000), MAX_FILTERED_EF);
    assert_eq!(filtered_ef(128, 500, 1000, 1000), 500);
    // Nothing allowed or an empty index never divides by zero.
    assert_eq!(filtered_ef(64, 10, 0, 0), 64);
}

#[test]
fn small_filters_are_exact_and_large_ones_find_the_neighbours() {
    let (index, data) = index_of(6000);
    let model = LatentModel::new(7, DIMS, 12, 0.1);
    let mut rng = XorShift::new(3);
    // 1 % (exact by cost) and 60 % (through the graph).
    let small: HashSet<u64> = (0..6000).filter(|k| k % 100 == 0).collect();
    let large: HashSet<u64> = (0..6000).filter(|k| k % 5 < 3).collect();
    let (mut r_small, mut r_large) = (0.0, 0.0);
    for _ in 0..20 {
        let q = model.sample(&mut rng);
        let found = index.search_among(&q, 10, &small, 64).expect("search");
        assert_eq!(found, oracle(&data, &q, &small), "exact on a small filter");
        r_small += recall(&found, &oracle(&data, &q, &small));
        let found = index.search_among(&q, 10, &large, 64).expect("search");
        assert!(
            found.iter().all(|(k, _)| large.contains(k)),
            "the filter holds"
        );
        assert!(found.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
        r_large += recall(&found, &oracle(&data, &q, &large));
    }
    assert!(r_small / 20.0 > 0.999);
    assert!(r_large / 20.0 > 0.9, "recall {}", r_large / 20.0);
}

#[test]
fn missing_keys_and_empty_sets_are_skipped() {
    let (index, _) = index_of(100);
    let q = vec![0.1; DIMS];
    let none: HashSet<u64> = HashSet::new();
    assert!(
        index
            .search_among(&q, 10, &none, 64)
            .expect("search")
            .is_empty()
    );
    let some: HashSet<u64> = [1, 2, 5_000, 6_000].into_iter().collect();
    let found = index.search_among(&q, 10, &some, 64).expect("search");
    let mut keys: Vec<u64> = found.iter().map(|(k, _)| *k).collect();
    keys.sort_unstable();
    assert_eq!(keys, vec![1, 2]);
    assert!(
        index.search_among(&[0.0; 3], 10, &some, 64).is_err(),
        "dimensions"
    );
}
