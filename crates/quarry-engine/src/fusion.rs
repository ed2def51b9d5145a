//! Rank fusion for hybrid `query` (seed 001, QMD's pipeline).
//!
//! 0. [`relative_score_fusion`] (default, [`Fusion::Relative`]): for *one* query, keyword and
//!    vector scores are comparable after min-max normalisation, so they are combined by score
//!    (vector share 0.75, Weaviate's default), giving one hybrid list per query. Plain RRF of
//!    the two lists ([`Fusion::Rrf`], QMD's behaviour) averages ranks and lets the weaker
//!    retriever drag the stronger one down: on the English tldr set with all-MiniLM-L6-v2 it
//!    scored nDCG@10 0.714 against vector-only 0.746 (relative fusion: 0.757).
//! 1. [`rrf`]: Reciprocal Rank Fusion of several ranked lists (keyword and vector results for
//!    the original query and for each expansion). A document at 0-based rank `r` in a list of
//!    weight `w` earns `w / (k + r + 1)` with `k = 60`; lists of the original query weigh 2,
//!    expansions 1. A document ranked first in any list gets a bonus of 0.05, one ranked second
//!    or third 0.02, so strong single-list evidence is not averaged away.
//! 2. [`blend`]: after a reranker scored the top candidates (0–1), each candidate's final score
//!    mixes its RRF position score `1 / position` with the rerank score, trusting RRF more at
//!    the top: positions 1–3 → 75 % RRF / 25 % rerank, 4–10 → 60 / 40, 11+ → 40 / 60.

use std::collections::HashMap;

/// RRF's rank constant.
pub const RRF_K: f64 = 60.0;
/// Weight of lists produced by the original query.
pub const ORIGINAL_WEIGHT: f64 = 2.0;
/// Weight of lists produced by an expansion of the query.
pub const EXPANSION_WEIGHT: f64 = 1.0;

/// How keyword and vector results of one query are combined before RRF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fusion {
    /// One hybrid list per query by normalised score ([`relative_score_fusion`]), then RRF
    /// across the query and its expansions.
    #[default]
    Relative,
    /// Every keyword and vector list straight into RRF (QMD).
    Rrf,
}

impl Fusion {
    /// `relative` or `rrf`.
    pub fn parse(s: &str) -> Option<Fusion> {
        match s.trim().to_ascii_lowercase().as_str() {
            "relative" => Some(Fusion::Relative),
            "rrf" => Some(Fusion::Rrf),
            _ => None,
        }
    }
}

/// Share of the vector score in [`relative_score_fusion`].
pub const VECTOR_SHARE: f64 = 0.75;

/// Min-max normalises each list's scores to 0–1 (a one-element or flat list gets 1) and sums
/// them with weights `1 − vector_share` and `vector_share`; a document missing from a list
/// gets 0 there (below that list's weakest hit). Returns (id, score) best first; ties keep
/// keyword order, then vector order.
pub fn relative_score_fusion(
    keyword: &[(i64, f64)],
    vector: &[(i64, f64)],
    vector_share: f64,
) -> Vec<(i64, f64)> {
    fn normalised(list: &[(i64, f64)]) -> impl Iterator<Item = (i64, f64)> + '_ {
        let hi = list.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
        let lo = list.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        list.iter().map(move |(id, s)| {
            let n = if hi > lo { (s - lo) / (hi - lo) } else { 1.0 };
            (*id, n)
        })
    }
    let mut acc: HashMap<i64, (f64, usize)> = HashMap::new();
    let mut order = 0usize;
    for (list, w) in [(keyword, 1.0 - vector_share), (vector, vector_share)] {
        for (id, n) in normalised(list) {
            let e = acc.entry(id).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            e.0 += w * n;
        }
    }
    let mut out: Vec<(i64, f64, usize)> = acc.into_iter().map(|(id, (s, o))| (id, s, o)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

/// Bonus of a document ranked first in some list.
pub const TOP_RANK_BONUS: f64 = 0.05;
/// Bonus of a document ranked second or third (and nowhere first).
pub const NEAR_TOP_BONUS: f64 = 0.02;

/// One ranked list of ids, best first, and how much it counts.
#[derive(Debug, Clone)]
pub struct RankedList {
    pub ids: Vec<i64>,
    pub weight: f64,
    /// The list's own scores, parallel to `ids` (may be empty). Used only to break exact
    /// RRF ties, which are common with two lists: A first in one and second in the other
    /// ties with B second and first.
    pub scores: Vec<f64>,
}

impl RankedList {
    pub fn new(ids: Vec<i64>, weight: f64) -> Self {
        RankedList {
            ids,
            weight,
            scores: Vec::new(),
        }
    }

    pub fn with_scores(mut self, scores: Vec<f64>) -> Self {
        self.scores = scores;
        self
    }
}

fn top_rank_bonus(best_rank: usize) -> f64 {
    match best_rank {
        0 => TOP_RANK_BONUS,
        1 | 2 => NEAR_TOP_BONUS,
        _ => 0.0,
    }
}

/// Fuses ranked lists; returns (id, score) best first.
///
/// Exact ties (to 1e-9) go to the document that stood closer to the winner of the lists it
/// appeared in (sum of weight × score / list's best score), then to the first seen.
pub fn rrf(lists: &[RankedList]) -> Vec<(i64, f64)> {
    // score, best rank, closeness, first seen
    let mut acc: HashMap<i64, (f64, usize, f64, usize)> = HashMap::new();
    let mut seen = 0usize;
    for list in lists {
        let top = list.scores.first().copied().filter(|t| *t > 0.0);
        for (rank, id) in list.ids.iter().enumerate() {
            let entry = acc.entry(*id).or_insert_with(|| {
                seen += 1;
                (0.0, usize::MAX, 0.0, seen)
            });
            entry.0 += list.weight / (RRF_K + rank as f64 + 1.0);
            entry.1 = entry.1.min(rank);
            if let (Some(top), Some(s)) = (top, list.scores.get(rank)) {
                entry.2 += list.weight * (s / top);
            }
        }
    }
    let mut out: Vec<(i64, f64, f64, usize)> = acc
        .into_iter()
        .map(|(id, (s, best, close, order))| (id, s + top_rank_bonus(best), close, order))
        .collect();
    let bucket = |s: f64| (s * 1e9).round() as i64;
    out.sort_by(|a, b| {
        bucket(b.1)
            .cmp(&bucket(a.1))
            .then(b.2.total_cmp(&a.2))
            .then(a.3.cmp(&b.3))
    });
    out.into_iter().map(|(id, s, _, _)| (id, s)).collect()
}

/// Share of the RRF position score in the blend at 1-based `position`.
pub fn rrf_share(position: usize) -> f64 {
    match position {
        0..=3 => 0.75,
        4..=10 => 0.60,
        _ => 0.40,
    }
}

/// Blends fused order with rerank scores (0–1). Candidates without a rerank score keep their
/// position score alone (weighted as if the reranker gave 0). Returns (id, score) best first.
pub fn blend(fused: &[(i64, f64)], rerank: &HashMap<i64, f64>) -> Vec<(i64, f64)> {
    let mut out: Vec<(i64, f64, usize)> = fused
        .iter()
        .enumerate()
        .map(|(i, (id, _))| {
            let position = i + 1;
            let share = rrf_share(position);
            let r = rerank.get(id).copied().unwrap_or(0.0).clamp(0.0, 1.0);
            (*id, share * (1.0 / position as f64) + (1.0 - share) * r, i)
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn rrf_arithmetic_on_constructed_lists() {
        let lists = vec![
            RankedList::new(vec![1, 2, 3], ORIGINAL_WEIGHT),
            RankedList::new(vec![3, 4], ORIGINAL_WEIGHT),
            RankedList::new(vec![4, 1], EXPANSION_WEIGHT),
        ];
        let fused: HashMap<i64, f64> = rrf(&lists).into_iter().collect();
        // id 1: 2/61 + 1/62, best rank 0 → +0.05
        assert!(close(fused[&1], 2.0 / 61.0 + 1.0 / 62.0 + 0.05));
        // id 2: 2/62, best rank 1 → +0.02
        assert!(close(fused[&2], 2.0 / 62.0 + 0.02));
        // id 3: 2/63 + 2/61, best rank 0 → +0.05
        assert!(close(fused[&3], 2.0 / 63.0 + 2.0 / 61.0 + 0.05));
        // id 4: 2/62 + 1/61, best rank 0 → +0.05
        assert!(close(fused[&4], 2.0 / 62.0 + 1.0 / 61.0 + 0.05));
        let order: Vec<i64> = rrf(&lists).into_iter().map(|(id, _)| id).collect();
        assert_eq!(order, [3, 1, 4, 2]);
    }

    #[test]
    fn original_query_lists_outweigh_expansions() {
        let lists = vec![
            RankedList::new(vec![10], ORIGINAL_WEIGHT),
            RankedList::new(vec![20], EXPANSION_WEIGHT),
        ];
        let order: Vec<i64> = rrf(&lists).into_iter().map(|(id, _)| id).collect();
        assert_eq!(order, [10, 20]);
    }

    #[test]
    fn blend_is_position_aware() {
        let fused: Vec<(i64, f64)> = (1..=12).map(|id| (id, 1.0 / id as f64)).collect();
        let mut rerank = HashMap::new();
        rerank.insert(12, 1.0); // the reranker loves the last candidate
        rerank.insert(1, 0.0);
        let out: HashMap<i64, f64> = blend(&fused, &rerank).into_iter().collect();
        assert!(close(out[&1], 0.75 * 1.0));
        assert!(close(out[&4], 0.60 * 0.25));
        assert!(close(out[&12], 0.40 * (1.0 / 12.0) + 0.60 * 1.0));
        let order: Vec<i64> = blend(&fused, &rerank)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(&order[..2], &[1, 12]);
        assert_eq!(rrf_share(3), 0.75);
        assert_eq!(rrf_share(10), 0.60);
        assert_eq!(rrf_share(11), 0.40);
    }

    #[test]
    fn exact_ties_go_to_the_document_closer_to_each_list_winner() {
        // Doc 1 leads the keyword list by far, doc 2 barely leads the vector list: their RRF
        // scores tie exactly; doc 2 was nearly first in the keyword list too, so it wins.
        let keyword = RankedList::new(vec![1, 2], ORIGINAL_WEIGHT).with_scores(vec![10.0, 9.5]);
        let vector = RankedList::new(vec![2, 1], ORIGINAL_WEIGHT).with_scores(vec![0.80, 0.40]);
        let fused = rrf(&[keyword.clone(), vector.clone()]);
        assert_eq!(fused[0].0, 2);
        assert!(close(fused[0].1, fused[1].1));
        // Without scores the first seen wins.
        let fused = rrf(&[
            RankedList::new(vec![1, 2], 2.0),
            RankedList::new(vec![2, 1], 2.0),
        ]);
        assert_eq!(fused[0].0, 1);
    }

    #[test]
    fn relative_fusion_normalises_each_list_and_weights_vectors() {
        // Keyword: 1 strong, 2 weak. Vector: 2 strong, 3 middling, 1 weakest.
        let kw = [(1, 20.0), (2, 4.0)];
        let vec = [(2, 0.9), (3, 0.7), (1, 0.5)];
        let fused = relative_score_fusion(&kw, &vec, VECTOR_SHARE);
        // 1: 0.25·1 + 0.75·0 = 0.25; 2: 0.25·0 + 0.75·1 = 0.75; 3: 0.75·0.5 = 0.375.
        let ids: Vec<i64> = fused.iter().map(|x| x.0).collect();
        assert_eq!(ids, [2, 3, 1]);
        assert!(close(fused[0].1, 0.75) && close(fused[1].1, 0.375) && close(fused[2].1, 0.25));
        // One list alone keeps its order; a flat list normalises to 1.
        let only = relative_score_fusion(&kw, &[], VECTOR_SHARE);
        assert_eq!(only[0], (1, 0.25));
        let flat = relative_score_fusion(&[(7, 3.0)], &[(7, 0.4)], VECTOR_SHARE);
        assert!(close(flat[0].1, 1.0));
        assert_eq!(Fusion::parse("RRF"), Some(Fusion::Rrf));
        assert_eq!(Fusion::parse("x"), None);
    }
}
