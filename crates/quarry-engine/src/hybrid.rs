//! Hybrid search (seed `query`): expansion → keyword + vector lists per query → RRF →
//! rerank of the top candidates → position-aware blend. Every stage is optional and the
//! response says which ran; a configured stage that fails is skipped with a warning rather
//! than failing the search.

use std::collections::HashMap;

use quarry_core::{Error, Result, round_score};
use quarry_models::QueryExpander;
use quarry_store::ChunkRef;

use crate::fusion::{self, Fusion, RankedList};
use crate::search::search_hit;
use crate::semantic::model_err;
use crate::{Engine, NO_VECTOR_INDEX, NoProgress, QueryResponse, SearchRequest};

/// Candidates each retrieval list contributes to fusion.
pub const LIST_DEPTH: usize = 40;
/// How many fused candidates the reranker scores (seed: top 30).
pub const RERANK_CANDIDATES: usize = 30;
/// Longest passage handed to the reranker, in characters.
const RERANK_PASSAGE_CHARS: usize = 2000;

/// What the pipeline knows about one candidate document.
#[derive(Default)]
struct Candidate {
    /// Best-matching chunk from vector search (for the snippet and the rerank passage).
    chunk: Option<ChunkRef>,
    similarity: f32,
}

impl Engine {
    /// Hybrid search. Without a vector index it degrades to keyword search, without a
    /// reranker to fused order, and reports the stages that ran.
    pub fn query(&self, req: &SearchRequest) -> Result<QueryResponse> {
        req.validate()?;
        let collection_id = self.collection_id(req.collection.as_deref())?;
        let mut stages: Vec<&'static str> = Vec::new();
        let mut warnings = Vec::new();

        let mut queries = vec![req.query.clone()];
        match self.expander() {
            Ok(Some(x)) => match self.expand_cached(x.as_ref(), &req.query) {
                Ok(variants) if !variants.is_empty() => {
                    stages.push("expansion");
                    queries.extend(variants);
                }
                Ok(_) => {}
                Err(e) => warnings.push(format!("query expansion skipped: {e}")),
            },
            Ok(None) => {}
            Err(e) => warnings.push(format!("query expansion skipped: {e}")),
        }
        let weight = |i: usize| {
            if i == 0 {
                fusion::ORIGINAL_WEIGHT
            } else {
                fusion::EXPANSION_WEIGHT
            }
        };

        // Per query: keyword hits, then vector hits (when vectors exist).
        let mut keyword: Vec<Vec<(i64, f64)>> = vec![Vec::new(); queries.len()];
        if let Some(fts) = self.fts()? {
            fts.reload()?;
            let filter = collection_id.map(|c| vec![c]);
            for (i, q) in queries.iter().enumerate() {
                let parsed = fts.parse_query(q);
                keyword[i] = fts
                    .search(&parsed, filter.as_deref(), LIST_DEPTH)?
                    .iter()
                    .map(|h| (h.id, f64::from(h.score)))
                    .collect();
            }
        }
        stages.push("keyword");

        let mut candidates: HashMap<i64, Candidate> = HashMap::new();
        let mut vector: Option<Vec<Vec<(i64, f64)>>> = None;
        let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
        match self.embed_queries_for_search(&refs) {
            Ok(vectors) => {
                let mut per_query = Vec::with_capacity(vectors.len());
                for v in &vectors {
                    let hits = self.vector_search(v, LIST_DEPTH, collection_id)?;
                    for h in &hits {
                        let c = candidates.entry(h.document_id).or_default();
                        if c.chunk.is_none() || h.similarity > c.similarity {
                            c.chunk = Some(h.chunk.clone());
                            c.similarity = h.similarity;
                        }
                    }
                    per_query.push(
                        hits.iter()
                            .map(|h| (h.document_id, f64::from(h.similarity)))
                            .collect(),
                    );
                }
                vector = Some(per_query);
                stages.push("vector");
            }
            // No vectors yet is the expected degradation; anything else is worth saying.
            Err(Error::Unavailable(m)) => {
                if m != NO_VECTOR_INDEX {
                    warnings.push(format!("vector search skipped: {m}"));
                }
            }
            Err(e) => return Err(e),
        }

        let as_list = |hits: &[(i64, f64)], w: f64| {
            RankedList::new(hits.iter().map(|h| h.0).collect(), w)
                .with_scores(hits.iter().map(|h| h.1).collect())
        };
        let mut lists = Vec::new();
        for (i, kw) in keyword.iter().enumerate() {
            let vec_hits = vector.as_ref().map(|v| v[i].as_slice());
            match (self.fusion, vec_hits) {
                (Fusion::Relative, Some(v)) => lists.push(as_list(
                    &fusion::relative_score_fusion(kw, v, fusion::VECTOR_SHARE),
                    weight(i),
                )),
                (_, v) => {
                    lists.push(as_list(kw, weight(i)));
                    if let Some(v) = v {
                        lists.push(as_list(v, weight(i)));
                    }
                }
            }
        }
        let fused = fusion::rrf(&lists);
        let top: Vec<i64> = fused
            .iter()
            .take(RERANK_CANDIDATES.max(req.limit))
            .map(|(id, _)| *id)
            .collect();
        let docs = self.store().documents_by_ids(&top)?;
        let terms = self.highlight_terms(&req.query)?;

        let mut ranked: Option<Vec<(i64, f64)>> = None;
        match self.reranker(&NoProgress) {
            Ok(Some(reranker)) => {
                let pool: Vec<i64> = top.iter().take(RERANK_CANDIDATES).copied().collect();
                match self.rerank_scores(
                    reranker.as_ref(),
                    &req.query,
                    &pool,
                    &docs,
                    &candidates,
                    &terms,
                ) {
                    Ok(scores) => {
                        stages.push("rerank");
                        ranked = Some(fusion::blend(&fused, &scores));
                    }
                    Err(e) => warnings.push(format!("rerank skipped: {e}")),
                }
            }
            Ok(None) => {}
            Err(e) => warnings.push(format!("rerank skipped: {e}")),
        }
        // Without a reranker the score is the fused score relative to the best possible
        // (first in every list): 0–1, and comparable between queries.
        let ranked = ranked.unwrap_or_else(|| {
            let best: f64 = lists.iter().map(|l| l.weight).sum::<f64>() / (fusion::RRF_K + 1.0)
                + fusion::TOP_RANK_BONUS;
            fused.iter().map(|(id, s)| (*id, s / best)).collect()
        });

        let contexts = self.contexts()?;
        let mut results = Vec::new();
        for (id, score) in ranked {
            if results.len() == req.limit {
                break;
            }
            let score = round_score(score.clamp(0.0, 1.0));
            if score < req.min_score {
                continue;
            }
            let Some(doc) = docs.iter().find(|d| d.id == id) else {
                continue; // beyond the candidates loaded, or removed meanwhile
            };
            let lines = candidates
                .get(&id)
                .and_then(|c| c.chunk.as_ref())
                .map(|c| (c.line_start, c.line_end));
            results.push(search_hit(doc, &contexts, score, &terms, lines));
        }
        Ok(QueryResponse {
            results,
            stages,
            warnings,
        })
    }

    /// Query variants from the expander, cached in the store per (model, query).
    fn expand_cached(&self, expander: &dyn QueryExpander, query: &str) -> Result<Vec<String>> {
        let model = expander.identity().name.clone();
        if let Some(v) = self.store().cached_expansion(&model, query)? {
            return Ok(v);
        }
        let variants = expander.expand(query).map_err(model_err)?;
        // A cache write failing (read-only data dir) must not fail the search.
        let _ = self.store().cache_expansion(&model, query, &variants);
        Ok(variants)
    }

    /// Rerank scores (0–1) for `pool`, keyed by document id. Each passage is the title and
    /// the document's best chunk: the vector hit's, else the chunk with most query terms.
    fn rerank_scores(
        &self,
        reranker: &dyn quarry_models::Reranker,
        query: &str,
        pool: &[i64],
        docs: &[quarry_core::Document],
        candidates: &HashMap<i64, Candidate>,
        terms: &[String],
    ) -> Result<HashMap<i64, f64>> {
        let need_chunks: Vec<i64> = pool
            .iter()
            .copied()
            .filter(|id| candidates.get(id).and_then(|c| c.chunk.as_ref()).is_none())
            .collect();
        let mut chunks_by_doc: HashMap<i64, Vec<ChunkRef>> = HashMap::new();
        for c in self.store().chunks_of_documents(&need_chunks)? {
            chunks_by_doc.entry(c.document_id).or_default().push(c);
        }
        let mut ids = Vec::new();
        let mut passages = Vec::new();
        for id in pool {
            let Some(doc) = docs.iter().find(|d| d.id == *id) else {
                continue;
            };
            let body = doc.body.as_str();
            let span = |c: &ChunkRef| body.get(c.byte_start..c.byte_end).unwrap_or("");
            let text = match candidates.get(id).and_then(|c| c.chunk.as_ref()) {
                Some(c) => span(c),
                None => chunks_by_doc
                    .get(id)
                    .and_then(|cs| {
                        cs.iter().max_by_key(|c| {
                            let t = span(c).to_lowercase();
                            terms.iter().filter(|w| t.contains(w.as_str())).count()
                        })
                    })
                    .map(span)
                    .unwrap_or(body),
            };
            let text: String = text.chars().take(RERANK_PASSAGE_CHARS).collect();
            passages.push(crate::semantic::embed_input(&doc.title, &text));
            ids.push(*id);
        }
        if passages.is_empty() {
            return Ok(HashMap::new());
        }
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        let scores = reranker.score(query, &refs).map_err(model_err)?;
        if scores.len() != ids.len() {
            return Err(Error::Unavailable(format!(
                "reranker returned {} scores for {} passages",
                scores.len(),
                ids.len()
            )));
        }
        Ok(ids
            .into_iter()
            .zip(scores)
            .map(|(id, s)| (id, f64::from(s)))
            .collect())
    }
}
