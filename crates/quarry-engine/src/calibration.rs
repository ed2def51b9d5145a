//! Calibrated scores: every mode's score is an estimate of the probability that the hit is
//! relevant, so seed 000's bands (> 0.8 directly relevant, 0.5–0.8 related, < 0.5
//! tangential) and its default `min_score` 0.5 mean the same for `search`, `vsearch` and
//! `query`.
//!
//! Each retriever describes a hit by features that do not depend on the query's length or
//! the embedding model's similarity scale ([`KeywordEvidence`], [`VectorEvidence`]); a
//! logistic model maps them to a probability. `query` combines the two probabilities with a
//! third logistic model, and ranks by the result: a query on which keyword evidence is
//! strong (high coverage, a clear winner) follows the keyword list, one on which it is weak
//! follows the vectors, whichever retriever is stronger on the collection.
//!
//! The coefficients were fitted by `eval/fit_calibration.py` on judged queries
//! (`eval/*.jsonl`, the fitting half) from features that `quarry eval --features` dumps,
//! and checked on held-out sets; `eval/README.md` has the procedure and the tables.

use serde::Serialize;

/// How many hits of each retriever the features are computed over (and `query` fuses).
pub const EVIDENCE_DEPTH: usize = 40;

/// Keyword evidence about one hit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KeywordEvidence {
    /// Raw BM25 score.
    pub bm25: f32,
    /// BM25 divided by the query's saturated maximum (`FtsIndex::max_score`): the share of
    /// the query's information this document matched.
    pub coverage: f64,
    /// BM25 relative to the best hit of the query.
    pub relative: f64,
    /// 0-based rank in the keyword list.
    pub rank: usize,
    /// Lead over the next hit, in `relative` units (the last hit's is its `relative`): a
    /// clear winner is likelier right than the first of several near-ties.
    pub margin: f64,
}

/// Vector evidence about one hit (its best chunk).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VectorEvidence {
    /// Cosine similarity of the best chunk.
    pub similarity: f32,
    /// Standard scores within the query's top [`EVIDENCE_DEPTH`] documents: this hit's, and
    /// the best hit's minus this one's. Both are free of the model's similarity scale.
    pub z: f64,
    /// The best hit's standard score minus this one's.
    pub gap: f64,
    /// 0-based rank in the vector list.
    pub rank: usize,
    /// Lead over the next hit, in standard scores (the last hit's is 1).
    pub margin: f64,
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

// Fitted coefficients (eval/fit_calibration.py on tldr-zh, tldr-zh-desc and tldr-en-desc;
// see eval/README.md for the held-out tables).
const KW: [f64; 5] = [-2.045, 0.8306, 1.766, -1.682, 1.393];
const VEC: [f64; 5] = [-1.753, 0.823, -0.8882, -0.5417, 0.07561];
const HYB: [f64; 7] = [-4.419, 0.4848, 0.5762, 1.315, 1.673, 0.9081, 1.328];

/// The rank a retriever is taken to have given a document it did not return.
const ABSENT_RANK: usize = 60;

fn keyword_logit(e: &KeywordEvidence) -> f64 {
    KW[0]
        + KW[1] * e.coverage
        + KW[2] * e.relative
        + KW[3] * ((e.rank + 1) as f64).ln()
        + KW[4] * e.margin
}

fn vector_logit(e: &VectorEvidence) -> f64 {
    VEC[0] + VEC[1] * e.z + VEC[2] * e.gap + VEC[3] * ((e.rank + 1) as f64).ln() + VEC[4] * e.margin
}

/// Probability that a keyword hit is relevant.
pub fn keyword_probability(e: &KeywordEvidence) -> f64 {
    sigmoid(keyword_logit(e))
}

/// Probability that a vector hit is relevant.
pub fn vector_probability(e: &VectorEvidence) -> f64 {
    sigmoid(vector_logit(e))
}

/// Probability that a document is relevant given what each retriever said about it (`None`
/// where the document is not in that retriever's top [`EVIDENCE_DEPTH`]).
pub fn hybrid_probability(
    keyword: Option<&KeywordEvidence>,
    vector: Option<&VectorEvidence>,
) -> f64 {
    let (lk, fk) = keyword.map_or((0.0, 0.0), |e| (keyword_logit(e), 1.0));
    let (lv, fv) = vector.map_or((0.0, 0.0), |e| (vector_logit(e), 1.0));
    // Rank terms let a list's own order count beyond its calibrated probability.
    let rank_term = |r: usize| 10.0 / (10.0 + r as f64);
    let rk = keyword.map_or(ABSENT_RANK, |e| e.rank);
    let rv = vector.map_or(ABSENT_RANK, |e| e.rank);
    sigmoid(
        HYB[0]
            + HYB[1] * lk
            + HYB[2] * lv
            + HYB[3] * fk
            + HYB[4] * fv
            + HYB[5] * rank_term(rk)
            + HYB[6] * rank_term(rv),
    )
}

// Passages (`passages.rs`), fitted by `eval/fit_passages.py` on the fitting half of
// `eval/long-docs.jsonl` (multilingual-e5-small vectors); eval/README.md has the held-out
// tables. Vector evidence adds the raw similarity: on passages of long documents the list's
// shape alone cannot tell a question the documents answer from one they do not.
const PASSAGE_KW: [f64; 5] = [-0.8661, 7.861, -2.572, -1.839, 2.086];
const PASSAGE_VEC: [f64; 6] = [-3.93, 1.487, -0.05449, -0.3946, -0.1263, 0.4661];
const PASSAGE_HYB: [f64; 5] = [-1.659, 0.4294, 0.3907, 3.99, -1.659];

fn passage_keyword_logit(e: &KeywordEvidence) -> f64 {
    PASSAGE_KW[0]
        + PASSAGE_KW[1] * e.coverage
        + PASSAGE_KW[2] * e.relative
        + PASSAGE_KW[3] * ((e.rank + 1) as f64).ln()
        + PASSAGE_KW[4] * e.margin
}

fn passage_vector_logit(e: &VectorEvidence) -> f64 {
    PASSAGE_VEC[0]
        + PASSAGE_VEC[1] * e.z
        + PASSAGE_VEC[2] * e.gap
        + PASSAGE_VEC[3] * ((e.rank + 1) as f64).ln()
        + PASSAGE_VEC[4] * e.margin
        + PASSAGE_VEC[5] * f64::from(e.similarity)
}

/// Probability that a passage found by keyword is relevant.
pub fn passage_keyword_probability(e: &KeywordEvidence) -> f64 {
    sigmoid(passage_keyword_logit(e))
}

/// Probability that a passage found by vector is relevant.
pub fn passage_vector_probability(e: &VectorEvidence) -> f64 {
    sigmoid(passage_vector_logit(e))
}

/// Probability that a passage that has a vector is relevant, given what each retriever
/// said about it (`None`: that retriever did not find it).
pub fn passage_hybrid_probability(
    keyword: Option<&KeywordEvidence>,
    vector: Option<&VectorEvidence>,
) -> f64 {
    let (lk, fk) = keyword.map_or((0.0, 0.0), |e| (passage_keyword_logit(e), 1.0));
    let (lv, fv) = vector.map_or((0.0, 0.0), |e| (passage_vector_logit(e), 1.0));
    sigmoid(
        PASSAGE_HYB[0]
            + PASSAGE_HYB[1] * lk
            + PASSAGE_HYB[2] * lv
            + PASSAGE_HYB[3] * fk
            + PASSAGE_HYB[4] * fv,
    )
}

/// Coefficients of the per-query vector share `σ(a + b·(lv − lk) + c·margin + d·coverage)`
/// (`hybrid.rs`): lk, lv are the logits of each list's best hit, margin and coverage those of
/// the keyword leader. Chosen on the five judged sets with vectors to maximise the smallest
/// margin of hybrid over the better single mode (`eval/README.md`).
const SHARE: [f64; 4] = [1.5, 0.5, -2.0, -4.0];
/// The top logit of a retriever that returned nothing.
const ABSENT_LOGIT: f64 = -8.0;

/// The vector share of a query's hybrid ranking. Vectors lead unless the keyword leader
/// covers much of the query and stands clear of the next hit, or the keyword list is the
/// surer of the two.
pub fn adaptive_vector_share(keyword: &[KeywordEvidence], vector: &[VectorEvidence]) -> f64 {
    let lk = keyword
        .iter()
        .map(keyword_logit)
        .fold(ABSENT_LOGIT, f64::max);
    let lv = vector.iter().map(vector_logit).fold(ABSENT_LOGIT, f64::max);
    let (margin, coverage) = keyword
        .first()
        .map_or((0.0, 0.0), |e| (e.margin, e.coverage));
    sigmoid(SHARE[0] + SHARE[1] * (lv - lk) + SHARE[2] * margin + SHARE[3] * coverage)
}

/// Probabilities for one retriever's list, best first, made non-increasing down the list
/// (each is capped by the one above it). The `margin` feature can otherwise score the
/// second of two tied hits above the first; a list must never show scores out of order.
pub fn list_probabilities<E>(evidence: &[E], probability: impl Fn(&E) -> f64) -> Vec<f64> {
    let mut cap = 1.0f64;
    evidence
        .iter()
        .map(|e| {
            cap = cap.min(probability(e));
            cap
        })
        .collect()
}

/// Keyword evidence for a list of raw BM25 scores (best first) given the query's saturated
/// maximum.
pub fn keyword_evidence(scores: &[f32], max_score: f32) -> Vec<KeywordEvidence> {
    let top = scores
        .first()
        .copied()
        .unwrap_or(0.0)
        .max(f32::MIN_POSITIVE);
    let max = max_score.max(f32::MIN_POSITIVE);
    let relative = |s: f32| f64::from(s / top).clamp(0.0, 1.0);
    scores
        .iter()
        .enumerate()
        .map(|(rank, &s)| KeywordEvidence {
            bm25: s,
            coverage: f64::from(s / max).clamp(0.0, 1.0),
            relative: relative(s),
            rank,
            margin: relative(s) - scores.get(rank + 1).map_or(0.0, |&n| relative(n)),
        })
        .collect()
}

/// Evidence for a list whose first `head` entries are a ranked list of their own (see
/// `Engine::rank_among`): theirs computed over them alone, the rest's over the whole list.
pub fn evidence_in_parts<E>(
    scores: &[f32],
    head: usize,
    evidence: impl Fn(&[f32]) -> Vec<E>,
) -> Vec<E> {
    let head = head.min(scores.len());
    if head == scores.len() {
        return evidence(scores);
    }
    let mut out = evidence(&scores[..head]);
    out.extend(evidence(scores).into_iter().skip(head));
    out
}

/// Vector evidence for a list of similarities (best first). The list's statistics come from
/// its first [`EVIDENCE_DEPTH`] entries, as when the models were fitted, however long it is.
pub fn vector_evidence(similarities: &[f32]) -> Vec<VectorEvidence> {
    let stats = VectorStats::of(similarities);
    let z = |s: f32| (f64::from(s) - stats.mean) / stats.sd;
    similarities
        .iter()
        .enumerate()
        .map(|(rank, &s)| VectorEvidence {
            similarity: s,
            z: z(s),
            gap: (stats.top - f64::from(s)) / stats.sd,
            rank,
            margin: similarities.get(rank + 1).map_or(1.0, |&n| z(s) - z(n)),
        })
        .collect()
}

/// The statistics [`vector_evidence`] computes over a list, to place a similarity that is
/// not in the list (a keyword candidate the vector list cut off) on the same scale.
#[derive(Debug, Clone, Copy)]
pub struct VectorStats {
    mean: f64,
    sd: f64,
    top: f64,
    /// The list's similarities, best first (for the rank a new one would take).
    len: usize,
    last: f64,
}

impl VectorStats {
    /// The statistics of a vector list (similarities, best first).
    pub fn of(similarities: &[f32]) -> VectorStats {
        let head = &similarities[..similarities.len().min(EVIDENCE_DEPTH)];
        let n = head.len().max(1) as f64;
        let mean = head.iter().map(|&s| f64::from(s)).sum::<f64>() / n;
        let var = head
            .iter()
            .map(|&s| (f64::from(s) - mean).powi(2))
            .sum::<f64>()
            / n;
        VectorStats {
            mean,
            // A floor keeps a flat list (every similarity equal) from producing huge z-scores.
            sd: var.sqrt().max(0.01),
            top: similarities.first().map_or(0.0, |&s| f64::from(s)),
            len: similarities.len(),
            last: similarities.last().map_or(0.0, |&s| f64::from(s)),
        }
    }

    /// Evidence for a similarity below the list's last entry (it ranks after the list).
    pub fn evidence(&self, similarity: f32) -> VectorEvidence {
        let s = f64::from(similarity);
        let z = (s - self.mean) / self.sd;
        VectorEvidence {
            similarity,
            z,
            gap: (self.top - s) / self.sd,
            rank: if s > self.last {
                self.len.saturating_sub(1)
            } else {
                self.len
            },
            margin: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_are_monotonic_in_their_evidence() {
        let e = |coverage, relative, rank| KeywordEvidence {
            bm25: 1.0,
            coverage,
            relative,
            rank,
            margin: 0.1,
        };
        assert!(keyword_probability(&e(0.6, 1.0, 0)) > keyword_probability(&e(0.3, 1.0, 0)));
        assert!(keyword_probability(&e(0.6, 1.0, 0)) > keyword_probability(&e(0.6, 0.5, 4)));
        let v = vector_evidence(&[0.9, 0.5, 0.45, 0.4, 0.4]);
        let p: Vec<f64> = v.iter().map(vector_probability).collect();
        assert!(p.windows(2).all(|w| w[0] >= w[1]), "{p:?}");
        // Two tied hits above a much weaker one: the margin alone would put the second of
        // the tie above the first; list probabilities never go up.
        let tied = keyword_evidence(&[10.0, 10.0, 0.5], 20.0);
        let raw: Vec<f64> = tied.iter().map(keyword_probability).collect();
        let listed = list_probabilities(&tied, keyword_probability);
        assert!(raw[1] > raw[0], "{raw:?}");
        assert!(listed.windows(2).all(|w| w[0] >= w[1]) && listed[1] == listed[0]);
        let k = keyword_evidence(&[20.0, 5.0], 25.0);
        let best = hybrid_probability(Some(&k[0]), Some(&v[0]));
        assert!(best > hybrid_probability(Some(&k[0]), None));
        assert!(hybrid_probability(Some(&k[0]), None) > hybrid_probability(Some(&k[1]), None));
        assert!(hybrid_probability(None, Some(&v[0])) > hybrid_probability(None, Some(&v[4])));
        assert!((0.0..=1.0).contains(&best) && hybrid_probability(None, None) < 0.05);
    }

    #[test]
    fn evidence_is_scale_free() {
        // The same list shape at two similarity scales (two models) gives the same evidence.
        let a = vector_evidence(&[0.62, 0.40, 0.38, 0.30]);
        let b = vector_evidence(&[0.962, 0.940, 0.938, 0.930]);
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (x.z - y.z).abs() < 1e-4 && (x.gap - y.gap).abs() < 1e-4,
                "{a:?} {b:?}"
            );
        }
        assert!(a[0].z > 1.5 && a[3].gap > 2.5, "{a:?}");
        let k = keyword_evidence(&[12.0, 6.0], 24.0);
        assert_eq!((k[0].coverage, k[1].relative), (0.5, 0.5));
        assert_eq!((k[0].margin, k[1].margin), (0.5, 0.5));
        assert!((a[0].margin - (a[0].z - a[1].z)).abs() < 1e-12 && a[3].margin == 1.0);
        assert!(keyword_evidence(&[], 0.0).is_empty());
        assert_eq!(vector_evidence(&[0.5])[0].z, 0.0);
        // Hits past the fitted depth do not change the evidence of those before it.
        let long: Vec<f32> = (0..100).map(|i| 0.9 - i as f32 * 0.005).collect();
        assert_eq!(
            vector_evidence(&long)[..39],
            vector_evidence(&long[..40])[..39]
        );
    }
}
