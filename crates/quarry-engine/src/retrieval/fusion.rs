//! Rank fusion for hybrid `query` (seed 001, QMD's pipeline).
//!
//! The default fusion ([`Fusion::Calibrated`]) ranks by calibrated probability
//! (`calibration.rs`, applied in `hybrid.rs`). This module keeps the rank arithmetic:
//!
//! 1. [`rrf`]: Reciprocal Rank Fusion of several ranked lists (`QUARRY_FUSION=rrf`, QMD's
//!    behaviour: keyword and vector results for the original query and each expansion). A
//!    document at 0-based rank `r` in a list of weight `w` earns `w / (k + r + 1)` with
//!    `k = 60`; lists of the original query weigh 2, expansions 1. A document ranked first in
//!    any list gets a bonus of 0.05, one ranked second or third 0.02. On the English tldr set
//!    with all-MiniLM-L6-v2 plain RRF scored nDCG@10 0.714 against vector-only 0.746: averaging
//!    ranks lets the weaker retriever drag the stronger one down.
//! 2. [`StandardScores`]: how passages are ranked in hybrid mode (`passages.rs`), from the
//!    `quarry-rank` crate (tool search ranks by the same arithmetic). Each retriever's raw
//!    scores (BM25, cosine similarity) are standardised over its own top
//!    [`EVIDENCE_DEPTH`](crate::retrieval::calibration::EVIDENCE_DEPTH) hits, and a passage ranks by
//!    w·z_keyword + (1 − w)·z_vector ([`standard_fusion`]), a retriever that did not list
//!    it giving it its list's floor, with the query's keyword share w from
//!    [`keyword_share`]. A hit far above the rest of one list keeps its lead
//!    whatever the other list says (ranks alone cannot tell a clear winner from the first
//!    of a crowd), and neither model's similarity scale nor the query's length moves the
//!    balance.
//! 3. [`blend`]: after a reranker scored the top candidates (0–1), each candidate's final score
//!    mixes its fused score (0–1) with the rerank score, trusting fusion more at the top:
//!    positions 1–3 → 75 % fusion / 25 % rerank, 4–10 → 60 / 40, 11+ → 40 / 60 (seed 001).

use std::collections::HashMap;

pub use quarry_rank::{StandardScores, keyword_share, standard_fusion};

/// RRF's rank constant.
pub const RRF_K: f64 = 60.0;
/// Weight of lists produced by the original query.
pub const ORIGINAL_WEIGHT: f64 = 2.0;
/// Weight of lists produced by an expansion of the query.
pub const EXPANSION_WEIGHT: f64 = 1.0;

/// How keyword and vector results are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fusion {
    /// Rank by the calibrated probability of relevance given both retrievers' evidence
    /// (`calibration.rs`); scores keep their meaning.
    #[default]
    Calibrated,
    /// Every keyword and vector list straight into RRF (QMD).
    Rrf,
}

impl Fusion {
    /// `calibrated` or `rrf`.
    pub fn parse(s: &str) -> Option<Fusion> {
        match s.trim().to_ascii_lowercase().as_str() {
            "calibrated" => Some(Fusion::Calibrated),
            "rrf" => Some(Fusion::Rrf),
            _ => None,
        }
    }
}

/// Bonus of a document ranked first in some list.
pub const TOP_RANK_BONUS: f64 = 0.05;
/// Bonus of a document ranked second or third (and nowhere first).
pub const NEAR_TOP_BONUS: f64 = 0.02;

/// One ranked list of ids, best first, and how much it counts.
#[derive(Debug, Clone)]
pub struct RankedList {
    /// The ids, best first.
    pub ids: Vec<i64>,
    /// What the list counts for in the fusion.
    pub weight: f64,
    /// The list's own scores, parallel to `ids` (may be empty). Used only to break exact
    /// RRF ties, which are common with two lists: A first in one and second in the other
    /// ties with B second and first.
    pub scores: Vec<f64>,
}

impl RankedList {
    /// A list of `ids` with `weight` and no scores.
    pub fn new(ids: Vec<i64>, weight: f64) -> Self {
        RankedList {
            ids,
            weight,
            scores: Vec::new(),
        }
    }

    /// The list with its own scores (for tie-breaking).
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

/// Blends fused scores (0–1, best first) with rerank scores (0–1). Candidates without a
/// rerank score keep their fused share alone (weighted as if the reranker gave 0). Returns
/// (id, score) best first.
pub fn blend(fused: &[(i64, f64)], rerank: &HashMap<i64, f64>) -> Vec<(i64, f64)> {
    let mut out: Vec<(i64, f64, usize)> = fused
        .iter()
        .enumerate()
        .map(|(i, (id, f))| {
            let share = rrf_share(i + 1);
            let r = rerank.get(id).copied().unwrap_or(0.0).clamp(0.0, 1.0);
            (*id, share * f.clamp(0.0, 1.0) + (1.0 - share) * r, i)
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

/// Weight of an expansion's evidence relative to the query as written.
pub const EXPANSION_DISCOUNT: f64 = 0.9;

/// Merges the scored lists of the query as written (first) and its expansions: a document
/// keeps its best score, an expansion's × [`EXPANSION_DISCOUNT`], with the payload of the
/// list that gave it; best first, ties in first-seen order, so the query as written decides
/// among equals. `query` and `vsearch` both rank their variants this way.
pub(crate) fn best_over_variants<T>(
    lists: impl IntoIterator<Item = Vec<(i64, f64, T)>>,
) -> Vec<(i64, f64, T)> {
    let mut best: Vec<(i64, f64, T)> = Vec::new();
    let mut at: HashMap<i64, usize> = HashMap::new();
    for (i, list) in lists.into_iter().enumerate() {
        let w = if i == 0 { 1.0 } else { EXPANSION_DISCOUNT };
        for (id, p, payload) in list {
            let p = w * p;
            match at.get(&id) {
                Some(&j) if best[j].1 >= p => {}
                Some(&j) => best[j] = (id, p, payload),
                None => {
                    at.insert(id, best.len());
                    best.push((id, p, payload));
                }
            }
        }
    }
    // Stable: ties keep first-seen order.
    best.sort_by(|a, b| b.1.total_cmp(&a.1));
    best
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
        assert_eq!(Fusion::parse("RRF"), Some(Fusion::Rrf));
        assert_eq!(Fusion::parse("calibrated"), Some(Fusion::Calibrated));
        assert_eq!(Fusion::parse("x"), None);
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
}
