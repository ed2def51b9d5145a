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
//!
//! Passage scores (the knowledge surfaces, [`PASSAGES`]) are the same models' logits placed
//! on the seed's bands directly (`Band`): 0.5 where the best passage of a question the
//! documents do not answer stays below, 0.8 where at least 80 % of passages answer. Judged
//! pages are incomplete, so a plain probability of "this is a judged page" sits too low on
//! long documents to use the seed's threshold as it is meant.

use serde::Serialize;

/// How many hits of each retriever the features are computed over (and `query` fuses).
pub const EVIDENCE_DEPTH: usize = quarry_rank::EVIDENCE_DEPTH;

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

/// A logistic model over keyword evidence:
/// `c0 + c1·coverage + c2·relative + c3·ln(1 + rank) + c4·margin`.
#[derive(Debug, Clone, Copy)]
struct KeywordModel([f64; 5]);

impl KeywordModel {
    fn logit(&self, e: &KeywordEvidence) -> f64 {
        let c = &self.0;
        c[0] + c[1] * e.coverage
            + c[2] * e.relative
            + c[3] * ((e.rank + 1) as f64).ln()
            + c[4] * e.margin
    }
}

/// A logistic model over vector evidence:
/// `c0 + c1·z + c2·gap + c3·ln(1 + rank) + c4·margin + c5·similarity`.
#[derive(Debug, Clone, Copy)]
struct VectorModel([f64; 6]);

impl VectorModel {
    fn logit(&self, e: &VectorEvidence) -> f64 {
        let c = &self.0;
        c[0] + c[1] * e.z
            + c[2] * e.gap
            + c[3] * ((e.rank + 1) as f64).ln()
            + c[4] * e.margin
            + c[5] * f64::from(e.similarity)
    }
}

/// A logistic model over the two retrievers' logits (`lk`, `lv`; 0 where one did not find
/// the hit): `c0 + c1·lk + c2·lv + c3·[keyword found] + c4·[vector found] + c5·r(rank_k) +
/// c6·r(rank_v)`, where `r(rank) = 10 / (10 + rank)` lets a list's own order count beyond
/// its calibrated probability.
#[derive(Debug, Clone, Copy)]
struct HybridModel([f64; 7]);

impl HybridModel {
    /// `lk`, `lv`: each retriever's logit where it found the hit; `rk`, `rv`: its ranks.
    fn logit(&self, lk: Option<f64>, lv: Option<f64>, rk: usize, rv: usize) -> f64 {
        let rank_term = |r: usize| 10.0 / (10.0 + r as f64);
        let c = &self.0;
        c[0] + c[1] * lk.unwrap_or(0.0)
            + c[2] * lv.unwrap_or(0.0)
            + c[3] * f64::from(u8::from(lk.is_some()))
            + c[4] * f64::from(u8::from(lv.is_some()))
            + c[5] * rank_term(rk)
            + c[6] * rank_term(rv)
    }
}

/// Where a mode's logit meets seed 000's bands: `half` is scored 0.5 (below it a hit is
/// tangential: the best result of a question the documents do not answer falls under it),
/// `high` is scored 0.8 (directly relevant: at least 80 % of the hits above it answer the
/// question). The score follows the logistic curve through the two points, so the logit's
/// order is kept and its scale adjusted. `IDENTITY` leaves the model's probability as is.
#[derive(Debug, Clone, Copy)]
struct Band {
    half: f64,
    high: f64,
}

/// The logit of 0.8.
const LN_4: f64 = 2.0 * std::f64::consts::LN_2;

impl Band {
    const IDENTITY: Band = Band {
        half: 0.0,
        high: LN_4,
    };

    fn score(&self, logit: f64) -> f64 {
        sigmoid(LN_4 * (logit - self.half) / (self.high - self.half))
    }
}

/// Keyword, vector and hybrid models fitted together on one kind of hit, each with its band.
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    keyword: KeywordModel,
    vector: VectorModel,
    hybrid: HybridModel,
    bands: [Band; 3],
}

/// Whole documents (QMD's `search`, `vsearch`, `query`), fitted by `eval/fit_calibration.py`
/// on tldr-zh, tldr-zh-desc and tldr-en-desc; eval/README.md has the held-out tables.
pub const DOCUMENTS: Calibration = Calibration {
    keyword: KeywordModel([-2.045, 0.8306, 1.766, -1.682, 1.393]),
    vector: VectorModel([-1.753, 0.823, -0.8882, -0.5417, 0.07561, 0.0]),
    hybrid: HybridModel([-4.419, 0.4848, 0.5762, 1.315, 1.673, 0.9081, 1.328]),
    bands: [Band::IDENTITY; 3],
};

/// Passages (`passages.rs`), fitted by `eval/fit_passages.py --bands` on the fitting half
/// of `eval/long-docs.jsonl` (multilingual-e5-small vectors); eval/README.md has the
/// held-out tables. Vector evidence adds the raw similarity: on passages of long documents
/// the list's shape alone cannot tell a question the documents answer from one they do not.
/// The bands put 0.8 where at least 80 % of passages answer, and 0.5 where the outside sets
/// put it ([`KEYWORD_HALF`], [`HYBRID_HALF`]). A passage with a
/// vector is scored by the hybrid model in every mode (`passages.rs`), one without by the
/// keyword model; the vector model feeds the hybrid one, so its band is not used here.
pub const PASSAGES: Calibration = Calibration {
    keyword: KeywordModel([-4.565, 8.934, 0.7734, -1.107, 5.028]),
    vector: VectorModel([-5.057, 2.041, -0.03731, -0.5298, -0.1403, 1.066]),
    hybrid: HybridModel([-1.924, 0.4397, 0.4534, 4.805, -1.924, 0.0, 0.0]),
    bands: [
        Band {
            half: KEYWORD_HALF,
            high: 1.381,
        },
        Band {
            half: 0.6726,
            high: 2.059,
        },
        Band {
            half: HYBRID_HALF,
            high: 0.9521,
        },
    ],
};

/// Where a passage's keyword logit scores 0.5, set on the outside sets (`eval/outside/`,
/// `fit_fusion.py`): the lowest that leaves at least 60 % of questions from an unrelated set
/// empty on every set it was chosen on. Leaving each set out in turn, it answers 66–100 % of
/// the held-out set's questions and leaves 56–97 % of unrelated ones empty. (Fitted on
/// long-docs' unanswerable questions — same documents, other topics — the point was -0.005:
/// at the default `min_score` it left 23–91 % of the outside sets' answerable questions
/// without a result.)
const KEYWORD_HALF: f64 = -2.5;
/// Where a passage's hybrid logit scores 0.5, chosen the same way: held out, 53–95 % of
/// questions answered and 39–95 % of unrelated ones left empty (was -0.434: 35–79 %
/// answered). With a passage never below its keyword score ([`Calibration::passage`]), the
/// default answers 86–100 % and leaves 46–93 % of unrelated questions empty (served,
/// `eval/outside/README.md`).
const HYBRID_HALF: f64 = -2.5;

/// The rank a retriever is taken to have given a hit it did not return.
const ABSENT_RANK: usize = 60;

impl Calibration {
    /// The score of a keyword hit.
    pub fn keyword(&self, e: &KeywordEvidence) -> f64 {
        self.bands[0].score(self.keyword.logit(e))
    }

    /// The score of a vector hit.
    pub fn vector(&self, e: &VectorEvidence) -> f64 {
        self.bands[1].score(self.vector.logit(e))
    }

    /// The score of a hit given what each retriever said about it (`None` where that
    /// retriever did not find it).
    pub fn hybrid(
        &self,
        keyword: Option<&KeywordEvidence>,
        vector: Option<&VectorEvidence>,
    ) -> f64 {
        self.bands[2].score(self.hybrid.logit(
            keyword.map(|e| self.keyword.logit(e)),
            vector.map(|e| self.vector.logit(e)),
            keyword.map_or(ABSENT_RANK, |e| e.rank),
            vector.map_or(ABSENT_RANK, |e| e.rank),
        ))
    }
}

/// Below this coverage (the share of the query's weight a passage matched) keyword evidence
/// alone never makes a passage "directly relevant": one word a question shares with a
/// passage, however rare, is no answer (issue 66). The vector's own evidence can.
pub const DIRECT_COVERAGE: f64 = 0.5;
/// The highest score of a passage held below the "directly relevant" band.
const BELOW_DIRECT: f64 = 0.79;

impl Calibration {
    /// A passage's probability (`passages.rs`): the hybrid model's where it has a vector —
    /// never below the keyword model's for the same passage —, the keyword model's where it
    /// has none, held below 0.8 while its keyword match covers less than [`DIRECT_COVERAGE`]
    /// of the query and its vector alone does not reach 0.8.
    ///
    /// Vectors only ever raise a passage: one the keyword list alone would answer with keeps
    /// that answer when the vector list also has it, however low (issue 66). Before, a
    /// passage both lists found could score below one only the keyword list found, and a
    /// model that cannot read the documents' language (all-MiniLM-L6-v2 on Chinese) left
    /// 89 % of DomainRAG's questions without a result that keyword search answers.
    pub fn passage(
        &self,
        keyword: Option<&KeywordEvidence>,
        vector: Option<&VectorEvidence>,
    ) -> f64 {
        let p = match (keyword, vector) {
            (Some(k), Some(v)) => self.hybrid(Some(k), Some(v)).max(self.keyword(k)),
            (None, Some(v)) => self.hybrid(None, Some(v)),
            (Some(k), None) => self.keyword(k),
            (None, None) => 0.0,
        };
        let partial = keyword.is_some_and(|k| k.coverage < DIRECT_COVERAGE);
        let vector_direct = vector.is_some_and(|v| self.vector(v) >= 0.8);
        if partial && !vector_direct {
            p.min(BELOW_DIRECT)
        } else {
            p
        }
    }
}

/// Coefficients of the per-query vector share
/// `σ(a + b·(lv − lk) + c·margin + d·coverage + e·question)` (`hybrid.rs`): lk, lv are the
/// logits of each list's best hit, margin and coverage those of the keyword leader, question
/// whether the query is phrased as a question ([`phrased_as_question`]). Chosen on the five
/// judged sets with vectors to maximise the smallest margin of hybrid over the better single
/// mode, at Hit@3 and nDCG@10 (`eval/fusion_grid.py`, `eval/README.md`).
const SHARE: [f64; 5] = [3.0, 0.5, -1.0, -8.0, 3.0];
/// The top logit of a retriever that returned nothing.
const ABSENT_LOGIT: f64 = -8.0;

/// The vector share of a query's hybrid ranking. Vectors lead unless the keyword leader
/// covers much of the query and stands clear of the next hit, or the keyword list is the
/// surer of the two; a question leans further towards the vectors.
pub fn adaptive_vector_share(
    keyword: &[KeywordEvidence],
    vector: &[VectorEvidence],
    question: bool,
) -> f64 {
    let lk = keyword
        .iter()
        .map(|e| DOCUMENTS.keyword.logit(e))
        .fold(ABSENT_LOGIT, f64::max);
    let lv = vector
        .iter()
        .map(|e| DOCUMENTS.vector.logit(e))
        .fold(ABSENT_LOGIT, f64::max);
    let (margin, coverage) = keyword
        .first()
        .map_or((0.0, 0.0), |e| (e.margin, e.coverage));
    sigmoid(
        SHARE[0]
            + SHARE[1] * (lv - lk)
            + SHARE[2] * margin
            + SHARE[3] * coverage
            + SHARE[4] * f64::from(u8::from(question)),
    )
}

/// English question words that open a question.
const QUESTION_WORDS: [&str; 9] = [
    "how", "what", "which", "why", "where", "when", "who", "whom", "whose",
];

/// Whether a query is phrased as a question: it ends with a question mark (`?`, `？`) or
/// opens with an English question word. A question is worded the asker's way rather than
/// the documents', which is where vectors beat term matching; a keyword-style query
/// (`tar extract gz`, a page's own description) is not. Chinese question words (怎么, 如何)
/// were tried and cost nDCG on the Chinese sets, where the vectors are weaker
/// (`eval/README.md`), so only the question mark counts there.
pub fn phrased_as_question(query: &str) -> bool {
    let query = query.trim();
    if query.ends_with(['?', '？']) {
        return true;
    }
    let first: String = query
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    // The word itself, or its contraction ("what's"), not a compound ("how-to").
    let opens_word = query[first.len()..]
        .chars()
        .next()
        .is_none_or(|c| c.is_whitespace() || c == '\'' || c == '’');
    opens_word && QUESTION_WORDS.contains(&first.as_str())
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
        assert!(DOCUMENTS.keyword(&e(0.6, 1.0, 0)) > DOCUMENTS.keyword(&e(0.3, 1.0, 0)));
        assert!(DOCUMENTS.keyword(&e(0.6, 1.0, 0)) > DOCUMENTS.keyword(&e(0.6, 0.5, 4)));
        let v = vector_evidence(&[0.9, 0.5, 0.45, 0.4, 0.4]);
        let p: Vec<f64> = v.iter().map(|e| DOCUMENTS.vector(e)).collect();
        assert!(p.windows(2).all(|w| w[0] >= w[1]), "{p:?}");
        // Two tied hits above a much weaker one: the margin alone would put the second of
        // the tie above the first; list probabilities never go up.
        let tied = keyword_evidence(&[10.0, 10.0, 0.5], 20.0);
        let raw: Vec<f64> = tied.iter().map(|e| DOCUMENTS.keyword(e)).collect();
        let listed = list_probabilities(&tied, |e| DOCUMENTS.keyword(e));
        assert!(raw[1] > raw[0], "{raw:?}");
        assert!(listed.windows(2).all(|w| w[0] >= w[1]) && listed[1] == listed[0]);
        let k = keyword_evidence(&[20.0, 5.0], 25.0);
        let best = DOCUMENTS.hybrid(Some(&k[0]), Some(&v[0]));
        assert!(best > DOCUMENTS.hybrid(Some(&k[0]), None));
        assert!(DOCUMENTS.hybrid(Some(&k[0]), None) > DOCUMENTS.hybrid(Some(&k[1]), None));
        assert!(DOCUMENTS.hybrid(None, Some(&v[0])) > DOCUMENTS.hybrid(None, Some(&v[4])));
        assert!((0.0..=1.0).contains(&best) && DOCUMENTS.hybrid(None, None) < 0.05);
    }

    #[test]
    fn one_shared_word_is_never_directly_relevant() {
        // The only hit, far ahead of nothing, matching one word of five: the keyword model
        // alone would call it directly relevant.
        let one_word = KeywordEvidence {
            bm25: 6.0,
            coverage: 0.25,
            relative: 1.0,
            rank: 0,
            margin: 1.0,
        };
        assert!(PASSAGES.keyword(&one_word) > 0.8);
        assert!(PASSAGES.passage(Some(&one_word), None) < 0.8);
        // Most of the query matched: no cap.
        let most = KeywordEvidence {
            coverage: 0.8,
            ..one_word
        };
        assert!(PASSAGES.passage(Some(&most), None) > 0.8);
        // A vector that alone reaches the band lifts the cap; a middling one does not.
        let mut sharp = vec![0.95f32];
        sharp.extend((0..39).map(|i| 0.3 - 0.005 * i as f32));
        let sharp = vector_evidence(&sharp);
        let flat = vector_evidence(&[0.31, 0.3, 0.3, 0.29, 0.29, 0.28]);
        assert!(PASSAGES.vector(&sharp[0]) >= 0.8 && PASSAGES.vector(&flat[0]) < 0.8);
        assert!(PASSAGES.passage(Some(&one_word), Some(&flat[0])) < 0.8);
        assert_eq!(
            PASSAGES.passage(Some(&one_word), Some(&sharp[0])),
            PASSAGES
                .hybrid(Some(&one_word), Some(&sharp[0]))
                .max(PASSAGES.keyword(&one_word))
        );
        assert_eq!(PASSAGES.passage(None, None), 0.0);
    }

    #[test]
    fn a_vector_never_lowers_a_passage_below_its_keyword_score() {
        let strong = KeywordEvidence {
            bm25: 9.0,
            coverage: 0.9,
            relative: 1.0,
            rank: 0,
            margin: 0.5,
        };
        // The passage is the vector list's last and weakest (a model that cannot read it).
        let mut sims = vec![0.6f32];
        sims.extend((0..39).map(|i| 0.5 - 0.005 * i as f32));
        let weak = vector_evidence(&sims).last().copied().unwrap();
        assert!(PASSAGES.hybrid(Some(&strong), Some(&weak)) < PASSAGES.keyword(&strong));
        assert_eq!(
            PASSAGES.passage(Some(&strong), Some(&weak)),
            PASSAGES.passage(Some(&strong), None)
        );
        assert!(PASSAGES.passage(Some(&strong), Some(&weak)) >= 0.5);
    }

    #[test]
    fn questions_are_recognised_by_their_form() {
        for q in [
            "how do I follow a log file?",
            "What is the purpose of /var/tmp",
            "Why?",
            "git rebase or merge?",
            "如何查看磁盘剩余空间？",
            "  where does the kernel image live  ",
            "what's using port 8080",
        ] {
            assert!(phrased_as_question(q), "{q}");
        }
        for q in [
            "tar extract gz",
            "however long it takes",
            "whatis database",
            "how-to guide for nginx",
            "Do not prompt for confirmation",
            "如何查看磁盘剩余空间",
            "",
            "?!",
        ] {
            assert!(!phrased_as_question(q), "{q}");
        }
        // A question leans the share towards the vectors, all else equal.
        let k = keyword_evidence(&[12.0, 6.0], 24.0);
        let v = vector_evidence(&[0.7, 0.5, 0.4]);
        assert!(adaptive_vector_share(&k, &v, true) > adaptive_vector_share(&k, &v, false));
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
