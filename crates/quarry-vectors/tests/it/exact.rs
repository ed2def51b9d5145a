//! The brute-force oracle: ordering, ties, bounds, filters.

use quarry_vectors::exact_search;

fn run(
    vectors: &[(u64, Vec<f32>)],
    query: &[f32],
    k: usize,
    filter: Option<&dyn Fn(u64) -> bool>,
) -> Vec<(u64, f32)> {
    exact_search(
        vectors.iter().map(|(k, v)| (*k, v.as_slice())),
        query,
        k,
        filter,
    )
}

#[test]
fn orders_by_similarity_then_key() {
    let vectors = vec![
        (9, vec![1.0, 0.0]),
        (4, vec![0.0, 1.0]),
        (7, vec![1.0, 0.0]),
        (2, vec![0.6, 0.8]),
        (5, vec![1.0, 0.0]),
        (1, vec![-1.0, 0.0]),
    ];
    let hits = run(&vectors, &[1.0, 0.0], 4, None);
    assert_eq!(hits, vec![(5, 1.0), (7, 1.0), (9, 1.0), (2, 0.6)]);
    // Ties are cut by key at the k boundary too, independent of input order.
    let top2 = run(&vectors, &[1.0, 0.0], 2, None);
    assert_eq!(top2, vec![(5, 1.0), (7, 1.0)]);
    let mut reversed = vectors.clone();
    reversed.reverse();
    assert_eq!(run(&reversed, &[1.0, 0.0], 2, None), top2);
    // Signed zeros tie.
    let zeros = vec![(3, vec![0.0, -1.0]), (1, vec![0.0, 1.0])];
    let hits = run(&zeros, &[1.0, 0.0], 2, None);
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 3]);
}

#[test]
fn k_larger_than_n_and_zero_k() {
    let vectors = vec![
        (1, vec![1.0, 0.0]),
        (2, vec![0.0, 1.0]),
        (3, vec![0.7, 0.7]),
    ];
    let hits = run(&vectors, &[1.0, 0.0], 10, None);
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 3, 2]);
    assert!(run(&vectors, &[1.0, 0.0], 0, None).is_empty());
}

#[test]
fn empty_set() {
    assert!(run(&[], &[1.0, 0.0], 5, None).is_empty());
    assert!(exact_search(std::iter::empty::<(u64, &[f32])>(), &[1.0], 3, None).is_empty());
}

#[test]
fn filter_and_unusable_vectors() {
    let vectors = vec![
        (1, vec![1.0, 0.0]),
        (2, vec![0.9, 0.1]),
        (3, vec![0.8, 0.2]),
        (4, vec![1.0, 0.0, 0.0]), // wrong length: skipped
        (5, vec![f32::NAN, 0.0]), // NaN similarity: skipped
    ];
    let even = |k: u64| k.is_multiple_of(2);
    assert_eq!(
        run(&vectors, &[1.0, 0.0], 5, Some(&even))
            .iter()
            .map(|h| h.0)
            .collect::<Vec<_>>(),
        vec![2]
    );
    assert_eq!(
        run(&vectors, &[1.0, 0.0], 5, None)
            .iter()
            .map(|h| h.0)
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[test]
fn matches_a_full_sort() {
    // Pseudo-random vectors with many duplicate scores; compare against sort + truncate.
    let mut state = 12345u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 5) as f32 - 2.0
    };
    let vectors: Vec<(u64, Vec<f32>)> = (0..500)
        .map(|k| (k, vec![next(), next(), next()]))
        .collect();
    let query = [1.0, 0.5, -0.25];
    let mut all: Vec<(u64, f32)> = vectors
        .iter()
        .map(|(k, v)| (*k, v[0] * query[0] + v[1] * query[1] + v[2] * query[2]))
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for k in [1, 7, 50, 499, 500, 600] {
        let expected: Vec<(u64, f32)> = all.iter().copied().take(k).collect();
        assert_eq!(run(&vectors, &query, k, None), expected, "k={k}");
    }
}
