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
//! 2. [`StandardScores`]: how passages are ranked in hybrid mode (`passages.rs`). Each
//!    retriever's raw scores (BM25, cosine similarity) are standardised over its own top
//!    [`EVIDENCE_DEPTH`] hits, and a passage ranks by w·z_keyword + (1 − w)·z_vector, a
//!    retriever that did not list it giving it its list's floor, with the query's keyword
//!    share w from [`keyword_share`]. A hit far above the rest of one list keeps its lead
//!    whatever the other list says (ranks alone cannot tell a clear winner from the first
//!    of a crowd), and neither model's similarity scale nor the query's length moves the
//!    balance.
//! 3. [`blend`]: after a reranker scored the top candidates (0–1), each candidate's final score
//!    mixes its fused score (0–1) with the rerank score, trusting fusion more at the top:
//!    positions 1–3 → 75 % fusion / 25 % rerank, 4–10 → 60 / 40, 11+ → 40 / 60 (seed 001).

use std::collections::HashMap;

use crate::calibration::EVIDENCE_DEPTH;

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

/// Coefficients of the keyword list's share of a hybrid passage ranking,
/// `σ(a + b·coverage + c·(z_keyword − z_vector))` ([`keyword_share`]). Fitted on the outside
/// sets (`eval/outside/`, `fit_fusion.py`; six runs: Seal-Tools, LoCoMo, MetaTool with
/// all-MiniLM-L6-v2, Gorilla with it and multilingual-e5-small, DomainRAG with e5) to
/// maximise the smallest lead of hybrid over the better retriever alone (nDCG@10): every run
/// within 0.001 of it or ahead. A fixed share cannot: keyword is the stronger retriever on
/// four of the sets and vectors on MetaTool (short one-line tool descriptions), and 0.75
/// lost 0.067 there while 0.5 lost 0.027 on Seal-Tools.
const SHARE: [f64; 3] = [-0.5, 8.0, 0.25];

/// The keyword list's share of one query's hybrid ranking: large when the keyword leader
/// covers much of the query (`coverage`, BM25 over the query's saturated maximum) and stands
/// further above its list than the vector leader does above its own (`z_keyword`,
/// `z_vector`: the leaders' standard scores); small when the words of the query barely
/// meet the documents', where meaning is all there is to go on.
pub fn keyword_share(coverage: f64, z_keyword: f64, z_vector: f64) -> f64 {
    let x = SHARE[0] + SHARE[1] * coverage + SHARE[2] * (z_keyword - z_vector);
    1.0 / (1.0 + (-x).exp())
}

/// One retriever's list, standardised: a score's distance from the mean of the list's top
/// [`EVIDENCE_DEPTH`] in standard deviations, never below the floor (the last of those), so
/// a hit the list did not reach — or ranked past its top — counts as its weakest listed one.
#[derive(Debug, Clone, Copy)]
pub struct StandardScores {
    mean: f64,
    sd: f64,
    floor: f64,
    /// A hit the list did not have: its floor, or one below it when the list has no spread
    /// (one hit, or hits all tied), where every listed hit stands at 0 and what the list
    /// found must still outrank what it did not.
    absent: f64,
}

impl StandardScores {
    /// The statistics of a list's scores, best first (an empty list standardises to 0).
    pub fn of(scores: &[f64]) -> StandardScores {
        let head = &scores[..scores.len().min(EVIDENCE_DEPTH)];
        if head.is_empty() {
            return StandardScores {
                mean: 0.0,
                sd: 1.0,
                floor: 0.0,
                absent: 0.0,
            };
        }
        let n = head.len() as f64;
        let mean = head.iter().sum::<f64>() / n;
        let var = head.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
        let tiny = 1e-9 * mean.abs().max(1.0);
        if var.sqrt() <= tiny {
            // No spread: every listed hit at 0, one the list missed below them.
            return StandardScores {
                mean,
                sd: 1.0,
                floor: 0.0,
                absent: -1.0,
            };
        }
        let sd = var.sqrt();
        let last = head.iter().copied().fold(f64::INFINITY, f64::min);
        let floor = (last - mean) / sd;
        StandardScores {
            mean,
            sd,
            floor,
            absent: floor,
        }
    }

    /// The standard score of `score` (`None`: the list did not have the hit).
    pub fn z(&self, score: Option<f64>) -> f64 {
        score.map_or(self.absent, |s| ((s - self.mean) / self.sd).max(self.floor))
    }
}

/// A hybrid passage's rank key from its standard scores in the keyword and vector lists,
/// given the query's [`keyword_share`].
pub fn standard_fusion(share: f64, z_keyword: f64, z_vector: f64) -> f64 {
    share * z_keyword + (1.0 - share) * z_vector
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
    fn standard_scores_keep_a_clear_winner_of_one_list_ahead() {
        // Keyword: one passage far above a crowd. Vector: a flat list it is not in.
        let keyword = StandardScores::of(&[30.0, 6.0, 5.5, 5.0, 4.8, 4.5]);
        let vector = StandardScores::of(&[0.52, 0.51, 0.50, 0.50, 0.49, 0.48]);
        let share = keyword_share(0.2, keyword.z(Some(30.0)), vector.z(Some(0.52)));
        let clear_keyword_winner = standard_fusion(share, keyword.z(Some(30.0)), vector.z(None));
        // A passage both lists hold in their crowd.
        let crowd = standard_fusion(share, keyword.z(Some(6.0)), vector.z(Some(0.52)));
        assert!(
            clear_keyword_winner > crowd,
            "{clear_keyword_winner} {crowd}"
        );
        // The share follows how much of the query the keyword leader covers.
        assert!(keyword_share(0.6, 1.0, 1.0) > 0.95 && keyword_share(0.0, 1.0, 1.0) < 0.4);
        assert!(keyword_share(0.1, 4.0, 1.0) > keyword_share(0.1, 1.0, 4.0));
        // Unlisted and below-the-top hits count as the list's weakest.
        assert_eq!(vector.z(None), vector.z(Some(0.10)));
        assert!(keyword.z(Some(4.5)) < 0.0 && keyword.z(Some(30.0)) > 2.0);
        // Scale-free: the same shape at another scale standardises the same.
        let scaled = StandardScores::of(&[300.0, 60.0, 55.0, 50.0, 48.0, 45.0]);
        assert!((scaled.z(Some(300.0)) - keyword.z(Some(30.0))).abs() < 1e-9);
        // Degenerate lists.
        assert_eq!(StandardScores::of(&[]).z(Some(5.0)), 5.0);
        assert_eq!(StandardScores::of(&[2.0, 2.0]).z(Some(2.0)), 0.0);
        // One hit (a rare word only a fresh note has): what the list found outranks what it
        // did not, though it has no spread to stand out in.
        let one = StandardScores::of(&[7.5]);
        assert!(one.z(Some(7.5)) > one.z(None));
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
