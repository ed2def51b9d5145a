//! add / replace / remove / growth / concurrency / input validation.

use std::sync::Arc;

use crate::common::{XorShift, random_unit};
use quarry_vectors::{SearchEffort, VectorError, VectorIndex, VectorIndexOptions, exact_search};

const DIMS: usize = 48;

#[test]
fn removed_keys_never_come_back() {
    let index = VectorIndex::create(VectorIndexOptions::new(DIMS)).expect("create");
    let mut rng = XorShift::new(1);
    let vectors: Vec<Vec<f32>> = (0..3_000).map(|_| random_unit(&mut rng, DIMS)).collect();
    for (key, v) in vectors.iter().enumerate() {
        index.add(key as u64, v).expect("add");
    }
    // Remove every key divisible by 3, then query with exactly those vectors.
    for key in (0..3_000u64).step_by(3) {
        assert!(index.remove(key).expect("remove"));
    }
    assert!(!index.remove(0).expect("remove twice"));
    assert!(!index.remove(1_000_000).expect("remove absent"));
    assert_eq!(index.len(), 2_000);
    for key in (0..3_000u64).step_by(3) {
        assert!(!index.contains(key));
        let v = &vectors[key as usize];
        for (found, _) in index.search(v, 20, None).expect("search") {
            assert_ne!(found % 3, 0, "removed key {found} returned");
        }
        for (found, _) in index
            .search(v, 20, Some(&|k| k.is_multiple_of(2)))
            .expect("search")
        {
            assert_ne!(
                found % 3,
                0,
                "removed key {found} returned by filtered search"
            );
        }
    }
    // Searching for everything returns only live keys.
    let all = index.search(&vectors[1], 5_000, None).expect("search");
    assert!(all.len() <= 2_000);
    assert!(all.iter().all(|(k, _)| k % 3 != 0));
}

#[test]
fn add_with_existing_key_replaces() {
    let index = VectorIndex::create(VectorIndexOptions::new(DIMS)).expect("create");
    let mut rng = XorShift::new(2);
    for key in 0..500u64 {
        index.add(key, &random_unit(&mut rng, DIMS)).expect("add");
    }
    let replacement = random_unit(&mut rng, DIMS);
    index.add(42, &replacement).expect("replace");
    index.add(42, &replacement).expect("replace again");
    assert_eq!(index.len(), 500);
    let hits = index.search(&replacement, 3, None).expect("search");
    assert_eq!(hits[0].0, 42);
    assert!(
        (hits[0].1 - 1.0).abs() < 1e-4,
        "self-similarity {}",
        hits[0].1
    );
    assert_eq!(
        hits.iter().filter(|(k, _)| *k == 42).count(),
        1,
        "duplicate key in results"
    );
    let stored = index.get(42).expect("get").expect("present");
    assert!(
        stored
            .iter()
            .zip(&replacement)
            .all(|(a, b)| (a - b).abs() < 1e-6)
    );
    assert!(index.get(9_999).expect("get").is_none());
}

#[test]
fn grows_past_initial_capacity() {
    let index = VectorIndex::create(VectorIndexOptions::new(DIMS)).expect("create");
    let initial = index.capacity();
    let n = initial as u64 * 4 + 7;
    let mut rng = XorShift::new(3);
    let vectors: Vec<Vec<f32>> = (0..n).map(|_| random_unit(&mut rng, DIMS)).collect();
    for (key, v) in vectors.iter().enumerate() {
        index.add(key as u64, v).expect("add");
    }
    assert_eq!(index.len() as u64, n);
    assert!(index.capacity() >= n as usize);
    eprintln!("capacity {initial} -> {} for {n} vectors", index.capacity());
    for key in [0u64, n / 2, n - 1] {
        assert_eq!(
            index
                .search(&vectors[key as usize], 1, None)
                .expect("search")[0]
                .0,
            key
        );
    }
    // Remove + re-add cycles reuse slots instead of growing.
    let capacity = index.capacity();
    for round in 0..3 {
        for key in 0..1_000u64 {
            index.remove(key).expect("remove");
        }
        for key in 0..1_000u64 {
            index
                .add(key, &vectors[(key as usize + round) % vectors.len()])
                .expect("re-add");
        }
    }
    assert_eq!(index.capacity(), capacity);
    assert_eq!(index.len() as u64, n);
}

#[test]
fn concurrent_add_search_remove() {
    let index = Arc::new(VectorIndex::create(VectorIndexOptions::new(DIMS)).expect("create"));
    // More threads than usearch has contexts for on a small machine, crossing several growths.
    let threads = 12;
    let per_thread = 600u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let index = Arc::clone(&index);
            s.spawn(move || {
                let mut rng = XorShift::new(100 + t);
                for i in 0..per_thread {
                    let key = t * per_thread + i;
                    let v = random_unit(&mut rng, DIMS);
                    index.add(key, &v).expect("concurrent add");
                    // Everyone also hammers one shared key with replacements.
                    index.add(1_000_000, &v).expect("concurrent replace");
                    if i % 5 == 0 {
                        let hits = index.search(&v, 5, None).expect("concurrent search");
                        assert!(!hits.is_empty());
                        let keep = move |k: u64| k / per_thread == t;
                        let hits = index
                            .search(&v, 5, Some(&keep))
                            .expect("concurrent filtered search");
                        assert!(hits.iter().all(|(k, _)| keep(*k)));
                    }
                    if i % 7 == 0 {
                        assert!(index.remove(key).expect("concurrent remove"));
                    }
                }
            });
        }
    });
    let removed = threads * per_thread.div_ceil(7);
    assert_eq!(index.len() as u64, threads * per_thread - removed + 1);
    assert!(index.contains(1_000_000));
    let hits = index.search(&[0.1; DIMS], 10_000, None).expect("search");
    assert_eq!(hits.iter().filter(|(k, _)| *k == 1_000_000).count(), 1);
}

/// `SearchEffort::Auto` scans (usearch's brute force) whenever no add/remove is in flight,
/// and searches the graph otherwise; the scan must never observe a half-inserted node or a
/// key being removed, and no search may report a removed slot (usearch's free key).
#[test]
fn scans_interleave_with_adds_and_removes() {
    let index = VectorIndex::create(VectorIndexOptions::new(DIMS)).expect("create");
    let mut rng = XorShift::new(21);
    for key in 0..500u64 {
        index.add(key, &random_unit(&mut rng, DIMS)).expect("add");
    }
    let scan = SearchEffort::Auto(usize::MAX);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let index = &index;
            s.spawn(move || {
                let mut rng = XorShift::new(30 + 2 * t);
                for i in 0..1_500u64 {
                    let key = 10_000 * (t + 1) + i;
                    index.add(key, &random_unit(&mut rng, DIMS)).expect("add");
                    if i % 3 == 0 {
                        assert!(index.remove(key).expect("remove"));
                    }
                    // Replace one of the initial keys now and then.
                    if i % 4 == 0 {
                        index
                            .add(i % 500, &random_unit(&mut rng, DIMS))
                            .expect("replace");
                    }
                    // Let searchers in between mutations.
                    if i % 16 == 0 {
                        std::thread::yield_now();
                    }
                }
            });
        }
        for t in 0..4u64 {
            let index = &index;
            s.spawn(move || {
                let mut rng = XorShift::new(40 + 2 * t);
                for _ in 0..600 {
                    let hits = index
                        .search_with(&random_unit(&mut rng, DIMS), 10, None, scan)
                        .expect("search");
                    // A graph search racing inserts can come back short (see the crate
                    // docs); a scan cannot, as it never overlaps them.
                    assert!(!hits.is_empty() && hits.len() <= 10);
                    for (key, sim) in &hits {
                        let known = *key < 500 || (*key >= 10_000 && *key < 30_000);
                        assert!(known, "unknown key {key} in {hits:?}");
                        assert!(sim.is_finite() && sim.abs() <= 1.001, "similarity {sim}");
                    }
                }
            });
        }
    });
    // Quiescent: the scan is exact (rank by rank; comparing similarities rather than keys
    // keeps near-ties between usearch's SIMD kernel and `dot` from mattering).
    let live: Vec<(u64, Vec<f32>)> = (0..500u64)
        .chain(10_000..11_500)
        .chain(20_000..21_500)
        .filter_map(|key| index.get(key).expect("get").map(|v| (key, v)))
        .collect();
    assert_eq!(live.len(), index.len());
    for _ in 0..20 {
        let q = random_unit(&mut rng, DIMS);
        let found = index.search_with(&q, 10, None, scan).expect("search");
        let truth = exact_search(live.iter().map(|(k, v)| (*k, v.as_slice())), &q, 10, None);
        assert_eq!(found.len(), truth.len());
        for (f, t) in found.iter().zip(&truth) {
            assert!((f.1 - t.1).abs() < 1e-5, "{found:?} vs {truth:?}");
        }
    }
}

#[test]
fn concurrent_save_while_adding_and_searching() {
    let dir = std::env::temp_dir().join(format!("qv-test-concurrent-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("live.qv");
    let index = VectorIndex::create(VectorIndexOptions::new(DIMS)).expect("create");
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = XorShift::new(7);
            for key in 0..4_000u64 {
                index.add(key, &random_unit(&mut rng, DIMS)).expect("add");
            }
        });
        s.spawn(|| {
            let mut rng = XorShift::new(8);
            for _ in 0..500 {
                index
                    .search(&random_unit(&mut rng, DIMS), 5, None)
                    .expect("search");
            }
        });
        s.spawn(|| {
            for _ in 0..5 {
                index.save(&path).expect("save");
                let reopened =
                    VectorIndex::open(&path, VectorIndexOptions::new(DIMS)).expect("open");
                assert!(reopened.len() <= 4_000);
            }
        });
    });
    index.save(&path).expect("final save");
    assert_eq!(
        VectorIndex::open(&path, VectorIndexOptions::new(DIMS))
            .expect("open")
            .len(),
        4_000
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_rejected() {
    let index = VectorIndex::create(VectorIndexOptions::new(4)).expect("create");
    assert!(matches!(
        index.add(1, &[1.0, 0.0, 0.0]),
        Err(VectorError::DimensionMismatch {
            expected: 4,
            actual: 3
        })
    ));
    assert!(matches!(
        index.add(1, &[1.0, f32::NAN, 0.0, 0.0]),
        Err(VectorError::NonFiniteValue { position: 1 })
    ));
    assert!(matches!(
        index.search(&[1.0, 0.0], 3, None),
        Err(VectorError::DimensionMismatch {
            expected: 4,
            actual: 2
        })
    ));
    assert!(matches!(
        index.search(&[f32::INFINITY, 0.0, 0.0, 0.0], 3, None),
        Err(VectorError::NonFiniteValue { position: 0 })
    ));
    assert!(index.is_empty());
    assert!(
        index
            .search(&[1.0, 0.0, 0.0, 0.0], 3, None)
            .expect("empty search")
            .is_empty()
    );
    index.add(1, &[1.0, 0.0, 0.0, 0.0]).expect("add");
    assert!(
        index
            .search(&[1.0, 0.0, 0.0, 0.0], 0, None)
            .expect("k=0")
            .is_empty()
    );
    assert_eq!(
        index
            .search(&[1.0, 0.0, 0.0, 0.0], 100, None)
            .expect("k>n")
            .len(),
        1
    );
    assert!(
        index
            .search(&[1.0, 0.0, 0.0, 0.0], 3, Some(&|_| false))
            .expect("filter none")
            .is_empty()
    );

    for bad in [
        VectorIndexOptions::new(0),
        VectorIndexOptions {
            connectivity: 0,
            ..VectorIndexOptions::new(4)
        },
        VectorIndexOptions {
            expansion_search: 0,
            ..VectorIndexOptions::new(4)
        },
    ] {
        let err = VectorIndex::create(bad).expect_err("invalid options");
        assert!(matches!(err, VectorError::InvalidOptions(_)), "{err:?}");
    }
}

#[test]
fn panicking_filter_propagates_without_aborting() {
    let index = VectorIndex::create(VectorIndexOptions::new(4)).expect("create");
    for key in 0..100u64 {
        index
            .add(key, &[1.0, key as f32 / 100.0, 0.0, 0.0])
            .expect("add");
    }
    let result = std::panic::catch_unwind(|| {
        let _ = index.search(&[1.0, 0.0, 0.0, 0.0], 5, Some(&|_| panic!("filter bug")));
    });
    assert!(result.is_err(), "panic must propagate to the caller");
    // The index is still usable afterwards.
    assert_eq!(
        index
            .search(&[1.0, 0.0, 0.0, 0.0], 5, None)
            .expect("search")
            .len(),
        5
    );
}
