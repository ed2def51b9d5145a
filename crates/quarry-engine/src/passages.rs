//! Passage retrieval for answers (seed 003 §5.1: candidates → rerank → top-k): where
//! `knowledge_search` returns each document once with its best excerpt, a model answering a
//! question needs the best *passages*, several of which may come from one long document.
//!
//! Documents are ranked by the hybrid pipeline (keyword + vector, calibrated); their chunks
//! are the passages, each scored by its document's score and how many of the query's terms
//! it holds; the best `depth` passages are reranked with the configured cross-encoder (or
//! rerank API) when asked, and the best `top_k` at or above `min_score` come back with their
//! page.

use std::collections::HashMap;

use quarry_core::{Result, round_score};

use crate::knowledge_search::{KnowledgeHit, KnowledgeSearch, KnowledgeSearchResult, MAX_TOP_K};
use crate::{Engine, NoProgress};

/// Characters of one passage returned.
const PASSAGE_CHARS: usize = 3000;
/// Passages one document may contribute before reranking.
const PER_DOCUMENT: usize = 4;
/// Characters of a passage handed to the reranker.
const RERANK_CHARS: usize = 2000;
/// Weight of the reranker's score against the retrieval score.
const RERANK_WEIGHT: f64 = 0.6;

/// One candidate passage.
struct Candidate {
    hit: usize,
    text: String,
    page: Option<u32>,
    line: usize,
    score: f64,
}

impl Engine {
    /// The best passages for `req.query` in the knowledge bases this handle may read
    /// (narrowed to `req.knowledge_bases`): `req.depth` candidates (default 20), reranked
    /// when `req.rerank` and a reranker is configured, the best `req.top_k` at or above
    /// `req.min_score`. Each result is one chunk, with its page.
    pub fn knowledge_passages(&self, req: &KnowledgeSearch) -> Result<KnowledgeSearchResult> {
        let depth = req.depth.unwrap_or(20).max(req.top_k);
        // Documents first: the hybrid ranking, unfiltered (passages are cut later).
        let mut docs_req = req.clone();
        docs_req.top_k = depth.min(MAX_TOP_K);
        docs_req.min_score = 0.0;
        docs_req.rerank = false;
        docs_req.depth = Some(depth);
        let ranked = self.knowledge_search(&docs_req)?;
        let mut warnings = ranked.warnings;
        let hits = ranked.results;
        if hits.is_empty() {
            return Ok(KnowledgeSearchResult {
                results: Vec::new(),
                total_count: 0,
                search_mode: ranked.search_mode,
                warnings,
            });
        }
        let mut docs = Vec::with_capacity(hits.len());
        for h in &hits {
            let (collection, path) = h.file.split_once('/').unwrap_or(("", h.file.as_str()));
            docs.push(
                self.store()
                    .document_by_path(self.space(), collection, path)?,
            );
        }
        // Stored chunks in one read; documents not embedded yet are cut now, each knowledge
        // base's settings looked up once.
        let ids: Vec<i64> = docs.iter().flatten().map(|d| d.id).collect();
        let mut chunks_by_doc: HashMap<i64, Vec<quarry_store::ChunkRef>> = HashMap::new();
        for c in self.store().chunks_of_documents(&ids)? {
            chunks_by_doc.entry(c.document_id).or_default().push(c);
        }
        let mut kbs: HashMap<&str, Option<quarry_store::KnowledgeBase>> = HashMap::new();
        for (hit, doc) in hits.iter().zip(&docs) {
            if let Some(doc) = doc
                && !chunks_by_doc.contains_key(&doc.id)
            {
                let kb = kbs
                    .entry(hit.knowledge_base.as_str())
                    .or_insert_with(|| self.knowledge_base(&hit.knowledge_base).ok());
                chunks_by_doc.insert(doc.id, self.cut_chunks(doc, kb.as_ref())?);
            }
        }
        let terms = self.highlight_terms(&req.query)?;
        let mut candidates: Vec<Candidate> = Vec::new();
        for (i, (hit, doc)) in hits.iter().zip(&docs).enumerate() {
            let hit_line: usize = hit
                .id
                .rsplit_once(':')
                .and_then(|(_, l)| l.parse().ok())
                .unwrap_or(1);
            let Some(doc) = doc else {
                // Removed since the search: nothing to quote.
                continue;
            };
            let chunks = chunks_by_doc.get(&doc.id).map(Vec::as_slice).unwrap_or(&[]);
            if chunks.is_empty() {
                // An empty document: the search's excerpt is all there is.
                candidates.push(Candidate {
                    hit: i,
                    text: hit.content.clone(),
                    page: hit.page,
                    line: hit_line,
                    score: hit.score,
                });
                continue;
            }
            let mut scored: Vec<(usize, &quarry_store::ChunkRef, String)> = chunks
                .iter()
                .map(|c| {
                    let text = doc.body.get(c.byte_start..c.byte_end).unwrap_or("");
                    let lower = text.to_lowercase();
                    let overlap = terms.iter().filter(|t| lower.contains(t.as_str())).count();
                    // The chunk the search's excerpt came from counts as matching.
                    let holds_hit = (c.line_start..=c.line_end).contains(&hit_line);
                    (overlap + usize::from(holds_hit), c, text.to_owned())
                })
                .collect();
            scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.byte_start.cmp(&b.1.byte_start)));
            let best = scored.first().map(|s| s.0).unwrap_or(0).max(1);
            for (k, (overlap, c, text)) in scored.into_iter().enumerate() {
                if k >= PER_DOCUMENT || (k > 0 && overlap == 0) {
                    break;
                }
                // The document's best passage keeps its score; weaker ones fall with it.
                let share = overlap as f64 / best as f64;
                candidates.push(Candidate {
                    hit: i,
                    text: text.trim().chars().take(PASSAGE_CHARS).collect(),
                    page: c.page,
                    line: c.line_start,
                    score: hit.score * (0.7 + 0.3 * share.min(1.0)),
                });
            }
        }
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
        candidates.truncate(depth);
        if req.rerank && candidates.len() > 1 {
            match self.reranker(&NoProgress) {
                Ok(Some(reranker)) => {
                    let passages: Vec<String> = candidates
                        .iter()
                        .map(|c| {
                            let text: String = c.text.chars().take(RERANK_CHARS).collect();
                            crate::semantic::embed_input(&hits[c.hit].knowledge_title, "", &text)
                        })
                        .collect();
                    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
                    match reranker.score(&req.query, &refs) {
                        Ok(scores) if scores.len() == candidates.len() => {
                            for (c, s) in candidates.iter_mut().zip(scores) {
                                let s = f64::from(s).clamp(0.0, 1.0);
                                c.score = (1.0 - RERANK_WEIGHT) * c.score + RERANK_WEIGHT * s;
                            }
                            candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
                        }
                        Ok(scores) => warnings.push(format!(
                            "rerank skipped: the reranker returned {} scores for {} passages",
                            scores.len(),
                            candidates.len()
                        )),
                        Err(e) => warnings.push(format!("rerank skipped: {e}")),
                    }
                }
                Ok(None) => {}
                Err(e) => warnings.push(format!("rerank skipped: {e}")),
            }
        }
        let total_count = candidates
            .iter()
            .filter(|c| c.score >= req.min_score)
            .count();
        let results = candidates
            .into_iter()
            .filter(|c| c.score >= req.min_score)
            .take(req.top_k)
            .map(|c| {
                let h = &hits[c.hit];
                KnowledgeHit {
                    id: format!("{}:{}", h.docid, c.line),
                    content: c.text,
                    score: round_score(c.score),
                    page: c.page,
                    ..h.clone()
                }
            })
            .collect();
        Ok(KnowledgeSearchResult {
            results,
            total_count,
            search_mode: ranked.search_mode,
            warnings,
        })
    }
}
