//! Passage retrieval: what every knowledge surface answers with (`knowledge_search`,
//! the knowledge-search REST API, Dify's retrieval, `query_knowledge`, chat sources).
//!
//! The unit is the *passage* — a stored chunk, cut when its document was keyword-indexed
//! (`chunking.rs`), with its page — not the document: several passages of one long manual
//! may be the best answers, and a table of contents (kept out of passages at conversion)
//! never stands in for the section that answers.
//!
//! Each passage gathers the evidence of both retrievers: BM25 over the passage index
//! (`passages/`), and the cosine similarity of its vector — for every keyword candidate
//! that has one, not only those in the vector list's top. Every mode gathers both: `keyword`
//! and `vector` only choose which passages compete, so one passage has the same calibrated
//! probability (`calibration.rs`, the explained `retrieval`) in every mode that lists it. A
//! passage without a vector yet (its document was uploaded a second ago) is scored on its
//! keyword evidence alone, exactly as keyword search scores it without a model: fresh
//! content is never hidden behind embedding.
//!
//! The mode ranks: keyword by BM25, vector by similarity, hybrid by both lists' standard
//! scores fused (`fusion::StandardScores`), so a passage one retriever ranks far above the
//! rest keeps its place whatever the other says. A result's score is its probability capped
//! by those above it: scores never rise down a list, and `min_score` cuts it at one place.
//! At most [`PER_DOCUMENT`] passages per document while other documents have passages to
//! offer — unless a passage scores [`DOMINANCE_MARGIN`] above every other document's still
//! to come — and the places left then go to the best passages the cap held back, so a manual
//! that alone answers a question shows as many of its pages as asked for.

use std::collections::HashMap;

use quarry_core::{Error, Result, round_score};
use quarry_store::ChunkRef;

use crate::engine::Engine;
use crate::progress::NoProgress;
use crate::retrieval::calibration::{self, KeywordEvidence, VectorEvidence};
use crate::retrieval::fusion::{self, StandardScores};
use crate::retrieval::knowledge_search::{
    KnowledgeHit, KnowledgeSearch, KnowledgeSearchResult, PassageEvidence, RerankOutcome,
    SearchMode,
};

/// Whether candidate `i` (best first) scores [`DOMINANCE_MARGIN`] above the next candidate
/// of another document that `shown` would show, or no other document has one to come.
fn dominates(
    candidates: &[Candidate],
    i: usize,
    document_of: impl Fn(&Candidate) -> Option<i64>,
    shown: impl Fn(&Candidate) -> bool,
) -> bool {
    let own = document_of(&candidates[i]);
    let next_other = candidates[i + 1..]
        .iter()
        .find(|c| shown(c) && document_of(c).is_some_and(|d| Some(d) != own));
    next_other.is_none_or(|o| candidates[i].score - o.score >= DOMINANCE_MARGIN)
}

/// Passages each retriever contributes.
pub(crate) const PASSAGE_DEPTH: usize = 100;
/// At most this many passages of one document among the results while other documents have
/// passages to offer: a long manual may hold the three best answers, but not crowd out every
/// other document. Places no other document fills go to the passages the cap held back.
pub const PER_DOCUMENT: usize = 3;
/// A passage past its document's [`PER_DOCUMENT`] still takes its place when it scores at
/// least this much above the best passage of any other document still to come: a manual that
/// alone answers a question shows its better pages before other documents' clearly weaker ones.
pub(crate) const DOMINANCE_MARGIN: f64 = 0.1;
/// Characters of a passage handed to the reranker.
const RERANK_CHARS: usize = 2000;
/// Weight of the reranker's score against the retrieval score.
const RERANK_WEIGHT: f64 = 0.6;
/// How many passages `total_count` looks at.
const COUNT_DEPTH: usize = 100;

struct Candidate {
    chunk_id: i64,
    evidence: PassageEvidence,
    score: f64,
    /// Where the mode ranks it: its standard score in the mode's list, or both lists'
    /// standard scores fused in hybrid mode (`fusion::StandardScores`).
    rank_key: f64,
    found_by: FoundBy,
}

/// Which of the mode's retrievers listed a passage (its `match_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FoundBy {
    Keyword,
    Vector,
    Both,
}

impl Engine {
    /// The passages of the knowledge bases this handle may read (narrowed to
    /// `req.knowledge_bases`) that best answer `req.query`, each with `content_chars` of
    /// text around its match.
    pub(crate) fn rank_passages(
        &self,
        req: &KnowledgeSearch,
        content_chars: usize,
    ) -> Result<KnowledgeSearchResult> {
        let filter = self.search_filter(None)?;
        let mut warnings = Vec::new();
        // Every mode gathers both retrievers' evidence where it can: the mode chooses which
        // passages compete, the evidence scores them, so one passage scores the same in
        // every mode (keyword search alone cannot tell "weakly matched" from "not in the
        // documents"; the passage's vector can). BM25 costs milliseconds; the query's
        // vector is computed only where a vector index exists.
        let keyword = self.keyword_passages(&req.query, filter.as_deref())?;
        let mut ran = req.mode;
        // Vector mode lists only the vector retriever's passages: no keyword candidate
        // needs its similarity looked up.
        let unlisted = if req.mode == SearchMode::Vector {
            &[][..]
        } else {
            &keyword[..]
        };
        let vector = match self.vector_passages(&req.query, filter.as_deref(), unlisted) {
            Ok(v) => Some(v),
            Err(e) if req.mode == SearchMode::Vector => return Err(e),
            Err(Error::Unavailable(why)) => {
                // No vectors yet (or another model): keyword evidence alone, as keyword
                // search scores without a model — said in the response, never an empty
                // answer.
                if self.vector_model()?.is_some() {
                    warnings.push(match req.mode {
                        SearchMode::Keyword => format!("vector evidence skipped: {why}"),
                        _ => format!("vector search skipped: {why}"),
                    });
                }
                ran = SearchMode::Keyword;
                None
            }
            // Keyword search never fails for want of its vector evidence.
            Err(e) if req.mode == SearchMode::Keyword => {
                warnings.push(format!("vector evidence skipped: {e}"));
                None
            }
            Err(e) => return Err(e),
        };
        let mut candidates = combine(&keyword, vector.as_ref(), req.mode);
        // Ranked by the mode's standard scores, scored by the calibrated probability, which
        // never rises down the list: a score says how likely this passage and those below
        // it are to answer, so `min_score` cuts the list at one place.
        candidates.sort_by(|a, b| b.rank_key.total_cmp(&a.rank_key));
        let mut cap = 1.0f64;
        for c in &mut candidates {
            cap = cap.min(c.score);
            c.score = cap;
        }
        candidates.truncate(COUNT_DEPTH);

        let chunk_ids: Vec<i64> = candidates.iter().map(|c| c.chunk_id).collect();
        let chunks: HashMap<i64, ChunkRef> = self
            .store()
            .chunk_refs(&chunk_ids)?
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        // A passage removed since the index was read has no chunk: skipped.
        candidates.retain(|c| chunks.contains_key(&c.chunk_id));
        let mut doc_ids: Vec<i64> = chunks.values().map(|c| c.document_id).collect();
        doc_ids.sort_unstable();
        doc_ids.dedup();
        let docs: HashMap<i64, quarry_core::Document> = self
            .store()
            .documents_by_ids(&doc_ids)?
            .into_iter()
            .map(|d| (d.id, d))
            .collect();
        let texts = |c: &Candidate| -> Option<(&ChunkRef, &quarry_core::Document, &str)> {
            let chunk = chunks.get(&c.chunk_id)?;
            let doc = docs.get(&chunk.document_id)?;
            let text = chunk.text_in(&doc.body)?;
            Some((chunk, doc, text))
        };

        let depth = req.depth.unwrap_or(20).max(req.top_k);
        let rerank = if !req.rerank {
            RerankOutcome::NotRequested
        } else {
            match self.reranker(&NoProgress) {
                Ok(None) => RerankOutcome::NotConfigured,
                Err(e) => {
                    warnings.push(format!("rerank skipped: {e}"));
                    RerankOutcome::Failed
                }
                Ok(Some(reranker)) => {
                    let head = candidates.len().min(depth);
                    let passages: Vec<String> = candidates[..head]
                        .iter()
                        .map(|c| match texts(c) {
                            Some((chunk, doc, text)) => {
                                let text: String = text.chars().take(RERANK_CHARS).collect();
                                crate::index::chunking::embed_input(
                                    &doc.title,
                                    &chunk.heading,
                                    &text,
                                )
                            }
                            None => String::new(),
                        })
                        .collect();
                    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
                    match reranker.score(&req.query, &refs) {
                        Ok(scores) if scores.len() == head => {
                            for (c, s) in candidates.iter_mut().zip(scores) {
                                let s = f64::from(s).clamp(0.0, 1.0);
                                c.evidence.rerank = Some(s);
                                c.score = (1.0 - RERANK_WEIGHT) * c.score + RERANK_WEIGHT * s;
                            }
                            candidates[..head].sort_by(|a, b| b.score.total_cmp(&a.score));
                            RerankOutcome::Applied
                        }
                        Ok(scores) => {
                            warnings.push(format!(
                                "rerank skipped: the reranker returned {} scores for {head} passages",
                                scores.len()
                            ));
                            RerankOutcome::Failed
                        }
                        Err(e) => {
                            warnings.push(format!("rerank skipped: {e}"));
                            RerankOutcome::Failed
                        }
                    }
                }
            }
        };

        // A passage that scores 0 has no evidence at all: `min_score: 0` asks for every passage
        // with some, not for padding.
        let kept = |score: f64| score >= req.min_score && score > 0.0;
        let total_count = candidates
            .iter()
            .filter(|c| kept(round_score(c.score)))
            .count();
        let terms = self.passage_terms(&req.query)?;
        let file_ids = self.store().kb_file_ids(&doc_ids)?;
        // Chosen in two passes over the candidates (best first): with the cap per document,
        // then, in the places left, the passages the cap held back. Each passage mostly inside
        // one already chosen (overlapping chunks) adds nothing.
        let mut per_doc: HashMap<i64, Vec<(usize, usize)>> = HashMap::new();
        let mut chosen: Vec<usize> = Vec::with_capacity(req.top_k);
        let mut held_back: Vec<usize> = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            if chosen.len() == req.top_k || !kept(round_score(c.score)) {
                break;
            }
            let Some((chunk, doc, _)) = texts(c) else {
                continue;
            };
            let taken = per_doc.entry(doc.id).or_default();
            if overlaps_any(taken, chunk) {
                continue;
            }
            let document_of = |c: &Candidate| texts(c).map(|(_, d, _)| d.id);
            let shown = |c: &Candidate| kept(round_score(c.score));
            if taken.len() >= PER_DOCUMENT && !dominates(&candidates, i, document_of, shown) {
                held_back.push(i);
                continue;
            }
            taken.push((chunk.byte_start, chunk.byte_end));
            chosen.push(i);
        }
        for i in held_back {
            if chosen.len() == req.top_k {
                break;
            }
            let Some((chunk, doc, _)) = texts(&candidates[i]) else {
                continue;
            };
            let taken = per_doc.entry(doc.id).or_default();
            if !overlaps_any(taken, chunk) {
                taken.push((chunk.byte_start, chunk.byte_end));
                chosen.push(i);
            }
        }
        // Best first, whichever pass chose them.
        chosen.sort_unstable();
        let mut results = Vec::with_capacity(chosen.len());
        for i in chosen {
            let c = &candidates[i];
            let score = round_score(c.score);
            let Some((chunk, doc, text)) = texts(c) else {
                continue;
            };
            let file = doc.display_path();
            let (kb, rel) = (doc.collection.as_str(), doc.path.as_str());
            // A knowledge base's file id; a folder collection's document is its docid.
            let knowledge_id = file_ids
                .get(&doc.id)
                .cloned()
                .unwrap_or_else(|| doc.docid.clone());
            results.push(KnowledgeHit {
                id: format!("{}:{}", doc.docid, chunk.line_start),
                content: excerpt(&chunk.heading, text, &terms, content_chars),
                heading: chunk.heading.clone(),
                score,
                knowledge_id,
                knowledge_title: doc.title.clone(),
                knowledge_filename: rel.rsplit('/').next().unwrap_or(rel).to_owned(),
                match_type: match c.found_by {
                    FoundBy::Keyword => "keyword",
                    FoundBy::Vector => "vector",
                    FoundBy::Both => "hybrid",
                },
                page: chunk.page,
                docid: doc.docid.clone(),
                knowledge_base: kb.to_owned(),
                file,
                // Rounded as the score is.
                evidence: req.explain.then_some(PassageEvidence {
                    retrieval: round_score(c.evidence.retrieval),
                    rerank: c.evidence.rerank.map(round_score),
                    ..c.evidence
                }),
                metadata: Engine::shown_metadata(&doc.meta),
                wiki_page: None,
            });
        }
        Ok(KnowledgeSearchResult {
            results,
            total_count,
            search_mode: ran,
            rerank,
            warnings,
            explain: if req.explain {
                Some(self.search_explanation()?)
            } else {
                None
            },
        })
    }

    /// Lower-cased query terms for choosing a passage's excerpt.
    fn passage_terms(&self, query: &str) -> Result<Vec<String>> {
        Ok(match self.passage_index()? {
            Some(index) => index.parse_query(query).highlight_terms(),
            None => self.highlight_terms(query)?,
        })
    }

    /// Passages by BM25, with keyword evidence computed over the caller's whole view
    /// (`Engine::rank_among`), so narrowing to some knowledge bases never moves a score.
    fn keyword_passages(
        &self,
        query: &str,
        filter: Option<&[i64]>,
    ) -> Result<Vec<(i64, KeywordEvidence)>> {
        let Some(index) = self.passage_index()? else {
            return Ok(Vec::new());
        };
        // Long-lived processes (servers) must see commits made by other processes.
        index.reload()?;
        let parsed = index.parse_query(query);
        let (ranked, evidence) =
            self.keyword_ranking(&index, &parsed, None, filter, PASSAGE_DEPTH)?;
        Ok(ranked
            .into_iter()
            .zip(evidence)
            .filter(|((_, keep), _)| *keep)
            .map(|((h, _), e)| (h.id, e))
            .collect())
    }

    /// Passages by vector similarity, plus every keyword candidate that has a vector, each
    /// with vector evidence relative to the vector list. `Err(Unavailable)` when vector
    /// search cannot run.
    fn vector_passages(
        &self,
        query: &str,
        filter: Option<&[i64]>,
        keyword: &[(i64, KeywordEvidence)],
    ) -> Result<VectorPassages> {
        let vectors = self.embed_queries_for_search(&[query])?;
        let Some(q) = vectors.first() else {
            return Err(Error::Unavailable(
                "embedding model returned no vector".into(),
            ));
        };
        let raw = self.nearest_chunks(q, PASSAGE_DEPTH, filter)?;
        let (ranked, head) = self.rank_among(
            None,
            raw,
            |e, f| e.nearest_chunks(q, PASSAGE_DEPTH, f),
            |h| h.0 as i64,
            |h| h.1,
        )?;
        let sims: Vec<f32> = ranked.iter().map(|(h, _)| h.1).collect();
        let evidence = calibration::evidence_in_parts(&sims, head, calibration::vector_evidence);
        let stats = calibration::VectorStats::of(&sims);
        let mut listed: HashMap<i64, VectorEvidence> = HashMap::new();
        let mut order = Vec::new();
        for ((h, keep), e) in ranked.into_iter().zip(evidence) {
            if keep {
                listed.insert(h.0 as i64, e);
                order.push(h.0 as i64);
            }
        }
        // Keyword candidates the vector list cut off: their own similarity, placed in it.
        let missing: Vec<i64> = keyword
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !listed.contains_key(id))
            .collect();
        for (id, sim) in self.chunk_similarities(q, &missing)? {
            listed.insert(id, stats.evidence(sim));
        }
        Ok(VectorPassages {
            evidence: listed,
            order,
        })
    }
}

struct VectorPassages {
    /// Every passage that has a vector among the candidates: the vector list and the keyword
    /// candidates it cut off.
    evidence: HashMap<i64, VectorEvidence>,
    /// The vector list, best first.
    order: Vec<i64>,
}

/// The passages `mode`'s retrievers found, each scored on all the evidence there is about
/// it: both retrievers' where it has a vector, its keyword evidence alone where it has none
/// yet (exactly as keyword search scores it without a model).
fn combine(
    keyword: &[(i64, KeywordEvidence)],
    vector: Option<&VectorPassages>,
    mode: SearchMode,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut at: HashMap<i64, usize> = HashMap::new();
    if mode != SearchMode::Vector {
        let kw_probabilities = calibration::list_probabilities(
            &keyword.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
            |e| calibration::PASSAGES.passage(Some(e), None),
        );
        for ((id, e), p) in keyword.iter().zip(kw_probabilities) {
            at.insert(*id, out.len());
            out.push(Candidate {
                chunk_id: *id,
                evidence: PassageEvidence {
                    keyword: Some(*e),
                    vector: None,
                    embedded: false,
                    retrieval: p,
                    rerank: None,
                },
                score: p,
                rank_key: 0.0,
                found_by: FoundBy::Keyword,
            });
        }
    }
    let keyword_z = StandardScores::of(
        &keyword
            .iter()
            .map(|(_, e)| f64::from(e.bm25))
            .collect::<Vec<_>>(),
    );
    let z_keyword = |c: &Candidate| keyword_z.z(c.evidence.keyword.map(|e| f64::from(e.bm25)));
    let Some(v) = vector else {
        for c in &mut out {
            c.rank_key = z_keyword(c);
        }
        return out;
    };
    if mode != SearchMode::Keyword {
        // Hybrid mode listed every keyword passage above; vector mode looks up the keyword
        // evidence of the passages it lists.
        let keyword_of: HashMap<i64, KeywordEvidence> = if mode == SearchMode::Vector {
            keyword.iter().copied().collect()
        } else {
            HashMap::new()
        };
        for id in &v.order {
            match at.get(id) {
                Some(&i) => out[i].found_by = FoundBy::Both,
                None => {
                    at.insert(*id, out.len());
                    out.push(Candidate {
                        chunk_id: *id,
                        evidence: PassageEvidence {
                            keyword: keyword_of.get(id).copied(),
                            vector: None,
                            embedded: true,
                            retrieval: 0.0,
                            rerank: None,
                        },
                        score: 0.0,
                        rank_key: 0.0,
                        found_by: FoundBy::Vector,
                    });
                }
            }
        }
    }
    let vector_z = StandardScores::of(
        &v.order
            .iter()
            .filter_map(|id| v.evidence.get(id))
            .map(|e| f64::from(e.similarity))
            .collect::<Vec<_>>(),
    );
    let leader = |list: &StandardScores, top: Option<f64>| top.map_or(0.0, |t| list.z(Some(t)));
    let share = fusion::keyword_share(
        keyword.first().map_or(0.0, |(_, e)| e.coverage),
        leader(&keyword_z, keyword.first().map(|(_, e)| f64::from(e.bm25))),
        leader(
            &vector_z,
            v.order
                .first()
                .and_then(|id| v.evidence.get(id))
                .map(|e| f64::from(e.similarity)),
        ),
    );
    for c in &mut out {
        c.evidence.vector = v.evidence.get(&c.chunk_id).copied();
        c.evidence.embedded = c.evidence.vector.is_some();
        if let Some(ve) = &c.evidence.vector {
            c.score = calibration::PASSAGES.passage(c.evidence.keyword.as_ref(), Some(ve));
        }
        c.evidence.retrieval = c.score;
        let z_vector = vector_z.z(c.evidence.vector.map(|e| f64::from(e.similarity)));
        c.rank_key = match mode {
            SearchMode::Keyword => z_keyword(c),
            SearchMode::Vector => z_vector,
            SearchMode::Hybrid => fusion::standard_fusion(share, z_keyword(c), z_vector),
        };
    }
    out
}

/// At most `max_chars` of a passage: the heading path it sits under (unless the passage
/// opens with that heading), then the text around its best-matching line, without line
/// numbers.
fn excerpt(heading: &str, text: &str, terms: &[String], max_chars: usize) -> String {
    let last = heading.rsplit(" › ").next().unwrap_or("").trim();
    let opens_with_it = text
        .trim_start()
        .lines()
        .next()
        .is_some_and(|l| !last.is_empty() && l.contains(last));
    let lead = if heading.is_empty() || opens_with_it {
        String::new()
    } else {
        format!("{heading}\n")
    };
    let budget = max_chars
        .saturating_sub(lead.chars().count())
        .max(max_chars / 2);
    let snippet = crate::retrieval::search::snippet_in(text, terms, budget, None, &[]);
    let plain = lead + &crate::retrieval::knowledge_search::plain_text(&snippet).0;
    // The snippet's budget leaves out the line breaks it joins with.
    match plain.char_indices().nth(max_chars) {
        Some((cut, _)) => plain[..cut].trim_end().to_owned(),
        None => plain,
    }
}

/// Whether `chunk` lies mostly (more than half of it) inside one of the spans already taken
/// from its document.
fn overlaps_any(taken: &[(usize, usize)], chunk: &ChunkRef) -> bool {
    taken.iter().any(|&(s, e)| {
        let shared = e
            .min(chunk.byte_end)
            .saturating_sub(s.max(chunk.byte_start));
        shared * 2 > chunk.byte_end - chunk.byte_start
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Candidates best first: (document, score).
    fn candidates(list: &[(i64, f64)]) -> Vec<Candidate> {
        list.iter()
            .enumerate()
            .map(|(i, &(document, score))| Candidate {
                chunk_id: document * 100 + i as i64,
                evidence: PassageEvidence {
                    keyword: None,
                    vector: None,
                    embedded: false,
                    retrieval: score,
                    rerank: None,
                },
                score,
                rank_key: score,
                found_by: FoundBy::Keyword,
            })
            .collect()
    }

    #[test]
    fn a_dominant_documents_clearly_better_passage_passes_the_cap() {
        let document_of = |c: &Candidate| Some(c.chunk_id / 100);
        let shown = |c: &Candidate| c.score >= 0.5;
        // The manual's fourth passage (0.8) is far above the other document's best (0.6).
        let c = candidates(&[(1, 0.9), (1, 0.9), (1, 0.85), (1, 0.8), (2, 0.6)]);
        assert!(dominates(&c, 3, document_of, shown));
        // Close to it: the cap holds, the other document shows first.
        let c = candidates(&[(1, 0.9), (1, 0.9), (1, 0.85), (1, 0.8), (2, 0.75)]);
        assert!(!dominates(&c, 3, document_of, shown));
        // Nothing of another document that would be shown: nothing to make room for.
        let c = candidates(&[(1, 0.9), (1, 0.9), (1, 0.85), (1, 0.8), (2, 0.4)]);
        assert!(dominates(&c, 3, document_of, shown));
    }
}
