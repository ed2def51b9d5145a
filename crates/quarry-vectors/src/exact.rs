//! Brute-force exact search: the path for small collections and the recall oracle for the ANN index.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Dot product of two equally long slices.
///
/// Eight independent accumulators let the compiler vectorise the loop without `-ffast-math`.
/// Panics never: the caller guarantees equal lengths, and `zip` would truncate otherwise.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let a_chunks = a.chunks_exact(8);
    let b_chunks = b.chunks_exact(8);
    let a_rest = a_chunks.remainder();
    let b_rest = b_chunks.remainder();
    for (ca, cb) in a_chunks.zip(b_chunks) {
        for i in 0..8 {
            acc[i] += ca[i] * cb[i];
        }
    }
    let mut sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += x * y;
    }
    sum
}

/// A scored candidate, ordered so that "greater" means "better":
/// higher score first, then the smaller key (deterministic tie-break).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scored {
    pub(crate) key: u64,
    pub(crate) score: f32,
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.key.cmp(&self.key))
    }
}

/// Sorts results best-first: similarity descending, ties broken by ascending key.
pub(crate) fn sort_best_first(results: &mut [(u64, f32)]) {
    results.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}

/// Exact top-`k` search by dot product (cosine similarity for L2-normalised vectors).
///
/// * Returns at most `k` `(key, similarity)` pairs, best first. Higher similarity is better;
///   equal similarities are ordered by ascending key, so the output does not depend on the
///   iteration order of `vectors`.
/// * `filter`, when given, keeps only keys for which it returns `true`.
/// * Vectors whose length differs from `query.len()` cannot be compared and are skipped,
///   as are vectors whose similarity is NaN (non-finite components).
/// * `k == 0` or an empty iterator gives an empty result; `k` larger than the number of
///   candidates gives all of them.
///
/// Memory is `O(k)` (a bounded binary heap); time is `O(n · d + n · log k)`.
pub fn exact_search<'a, I>(
    vectors: I,
    query: &[f32],
    k: usize,
    filter: Option<&dyn Fn(u64) -> bool>,
) -> Vec<(u64, f32)>
where
    I: IntoIterator<Item = (u64, &'a [f32])>,
{
    if k == 0 {
        return Vec::new();
    }
    // Min-heap (via `Reverse`) of the best `k` seen so far: the top is the worst kept entry.
    let mut heap: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(k.min(1 << 16) + 1);
    for (key, vector) in vectors {
        if vector.len() != query.len() {
            continue;
        }
        if let Some(keep) = filter
            && !keep(key)
        {
            continue;
        }
        // `+ 0.0` folds -0.0 into 0.0 so that `total_cmp` treats them as a tie.
        let score = dot(vector, query) + 0.0;
        if score.is_nan() {
            continue;
        }
        let candidate = Scored { key, score };
        if heap.len() < k {
            heap.push(Reverse(candidate));
        } else if let Some(mut worst) = heap.peek_mut()
            && candidate > worst.0
        {
            *worst = Reverse(candidate);
        }
    }
    let mut out: Vec<(u64, f32)> = heap
        .into_iter()
        .map(|Reverse(s)| (s.key, s.score))
        .collect();
    sort_best_first(&mut out);
    out
}
