//! Score fusion arithmetic shared by every hybrid ranking: knowledge-base passages
//! (`quarry-engine`'s `passages.rs`) and tool search (`quarry-hub`'s `View::search`). No I/O,
//! no dependencies: numbers in, numbers out.
//!
//! Each retriever's raw scores (BM25, cosine similarity) are standardised over its own top
//! [`EVIDENCE_DEPTH`] hits ([`StandardScores`]), and a hit ranks by
//! w·z_keyword + (1 − w)·z_vector ([`standard_fusion`]), a retriever that did not list it
//! giving it its list's floor, with the query's keyword share w from [`keyword_share`]. A hit
//! far above the rest of one list keeps its lead whatever the other list says (ranks alone,
//! as in reciprocal-rank fusion, cannot tell a clear winner from the first of a crowd), and
//! neither model's similarity scale nor the query's length moves the balance.

/// How many hits of each retriever standard scores are computed over (and the engine's
/// calibrated features, `quarry-engine`'s `calibration.rs`).
pub const EVIDENCE_DEPTH: usize = 40;

/// A model of the keyword list's share of one query's hybrid ranking,
/// `σ(intercept + coverage·c + lead·(z_keyword − z_vector))` ([`KeywordShare::of`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeywordShare {
    /// The share's log-odds when nothing else is known.
    pub intercept: f64,
    /// Weight of the keyword leader's coverage of the query (BM25 over the query's
    /// saturated maximum, 0–1).
    pub coverage: f64,
    /// Weight of how much further the keyword leader stands above its list than the vector
    /// leader above its own (their standard scores' difference).
    pub lead: f64,
}

impl KeywordShare {
    /// The keyword list's share (0–1) given the keyword leader's `coverage` and both
    /// leaders' standard scores.
    pub fn of(&self, coverage: f64, z_keyword: f64, z_vector: f64) -> f64 {
        let x = self.intercept + self.coverage * coverage + self.lead * (z_keyword - z_vector);
        1.0 / (1.0 + (-x).exp())
    }
}

/// Coefficients of the keyword list's share of a hybrid passage ranking ([`keyword_share`]).
/// Fitted on the outside sets (`eval/outside/`, `fit_fusion.py`; six runs: Seal-Tools,
/// LoCoMo, MetaTool with all-MiniLM-L6-v2, Gorilla with it and multilingual-e5-small,
/// DomainRAG with e5) to maximise the smallest lead of hybrid over the better retriever
/// alone (nDCG@10): every run within 0.001 of it or ahead. A fixed share cannot: keyword is
/// the stronger retriever on four of the sets and vectors on MetaTool (short one-line tool
/// descriptions), and 0.75 lost 0.067 there while 0.5 lost 0.027 on Seal-Tools.
pub const SHARE: KeywordShare = KeywordShare {
    intercept: -0.5,
    coverage: 8.0,
    lead: 0.25,
};

/// The keyword list's share of one query's hybrid passage ranking ([`SHARE`]): large when
/// the keyword leader covers much of the query (`coverage`, BM25 over the query's saturated
/// maximum) and stands further above its list than the vector leader does above its own
/// (`z_keyword`, `z_vector`: the leaders' standard scores); small when the words of the
/// query barely meet the documents', where meaning is all there is to go on.
pub fn keyword_share(coverage: f64, z_keyword: f64, z_vector: f64) -> f64 {
    SHARE.of(coverage, z_keyword, z_vector)
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
    /// The statistics of a list's scores, best first, over its top [`EVIDENCE_DEPTH`] (an
    /// empty list standardises to 0).
    pub fn of(scores: &[f64]) -> StandardScores {
        StandardScores::over(scores, EVIDENCE_DEPTH)
    }

    /// The statistics of a list's scores, best first, over its top `depth` (at least one).
    pub fn over(scores: &[f64], depth: usize) -> StandardScores {
        let head = &scores[..scores.len().min(depth.max(1))];
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

    /// The standard score of a hit the list did not have.
    pub fn absent(&self) -> f64 {
        self.absent
    }
}

/// A hybrid hit's rank key from its standard scores in the keyword and vector lists, given
/// the query's [`keyword_share`].
pub fn standard_fusion(share: f64, z_keyword: f64, z_vector: f64) -> f64 {
    share * z_keyword + (1.0 - share) * z_vector
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(vector.absent(), vector.z(None));
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
    fn a_vector_only_clear_winner_leads_a_keyword_crowd() {
        // A long task: dozens of tools share its common words, none stands out; the vectors
        // put one tool far ahead. The keyword leader covers little of the query.
        let bm25: Vec<f64> = (0..40).map(|i| 9.0 - 0.05 * f64::from(i)).collect();
        let cosines: Vec<f64> = std::iter::once(0.71)
            .chain((0..39).map(|i| 0.45 - 0.002 * f64::from(i)))
            .collect();
        let (k, v) = (StandardScores::of(&bm25), StandardScores::of(&cosines));
        let share = keyword_share(0.15, k.z(Some(bm25[0])), v.z(Some(cosines[0])));
        let vector_winner = standard_fusion(share, k.z(None), v.z(Some(0.71)));
        let keyword_leader = standard_fusion(share, k.z(Some(bm25[0])), v.z(Some(0.45)));
        assert!(
            vector_winner > keyword_leader,
            "{vector_winner} {keyword_leader}"
        );
    }

    #[test]
    fn the_passage_share_is_the_fitted_logistic() {
        for (c, k, v) in [(0.0, 0.0, 0.0), (0.3, 2.5, 1.0), (0.9, -1.0, 4.0)] {
            let x: f64 = -0.5 + 8.0 * c + 0.25 * (k - v);
            assert_eq!(keyword_share(c, k, v), 1.0 / (1.0 + (-x).exp()));
        }
        let flat = KeywordShare {
            intercept: 0.0,
            coverage: 0.0,
            lead: 0.0,
        };
        assert_eq!(flat.of(0.7, 3.0, -2.0), 0.5);
    }

    #[test]
    fn depth_bounds_the_statistics() {
        // Past the depth a score does not move the mean, and counts as the floor.
        let scores = [10.0, 8.0, 6.0, 1.0, 0.0];
        let three = StandardScores::over(&scores, 3);
        assert_eq!(three.z(Some(8.0)), 0.0);
        assert_eq!(three.z(Some(1.0)), three.z(Some(6.0)));
        assert_eq!(StandardScores::over(&scores, 0).z(Some(10.0)), 0.0);
        assert_eq!(
            StandardScores::of(&scores).z(Some(10.0)),
            StandardScores::over(&scores, EVIDENCE_DEPTH).z(Some(10.0))
        );
    }
}
