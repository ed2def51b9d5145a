//! Hybrid search (seed `query`): expansion → keyword + vector lists per query → RRF →
//! rerank of the top candidates → position-aware blend. Every stage is optional and the
//! response says which ran; a configured stage that fails is skipped with a warning rather
//! than failing the search.

use std::collections::HashMap;

use quarry_core::{Error, Result, round_score};
use quarry_models::QueryExpander;
use quarry_store::ChunkRef;
use serde::Serialize;

use crate::engine::Engine;
use crate::index::models::model_err;
use crate::progress::NoProgress;
use crate::retrieval::calibration::{self, EVIDENCE_DEPTH, KeywordEvidence, VectorEvidence};
use crate::retrieval::fusion::{self, Fusion, RankedList, best_over_variants};
use crate::retrieval::search::search_hit;
use crate::retrieval::search::{NO_VECTOR_INDEX, QueryResponse, SearchRequest};

/// Candidates each retrieval list contributes to fusion.
pub const LIST_DEPTH: usize = EVIDENCE_DEPTH;

/// One candidate of a hybrid query with the evidence of each retriever that found it.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateEvidence {
    #[serde(skip)]
    /// The store's document id.
    pub document_id: i64,
    /// Display path (`collection/path`).
    pub file: String,
    /// What the keyword retriever said, if it found the document.
    pub keyword: Option<KeywordEvidence>,
    /// What the vector retriever said, if it found the document.
    pub vector: Option<VectorEvidence>,
}
/// How many fused candidates the reranker scores (seed: top 30).
pub const RERANK_CANDIDATES: usize = 30;
/// Longest passage handed to the reranker, in characters.
const RERANK_PASSAGE_CHARS: usize = 2000;

/// Most typed sub-queries one `query` takes (qmd 2.8's MCP `query` tool: `searches`
/// `.max(10)`).
pub const MAX_SEARCHES: usize = 10;

/// The retriever a typed sub-query runs (qmd's `searches[].type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SubQueryType {
    /// Keywords: the keyword (BM25) retriever only.
    Lex,
    /// A natural-language question: the vector retriever only.
    Vec,
    /// A hypothetical answer passage, embedded and searched with the vector retriever only.
    Hyde,
}

impl SubQueryType {
    /// `lex`, `vec` or `hyde`.
    pub fn parse(s: &str) -> Option<SubQueryType> {
        match s {
            "lex" => Some(SubQueryType::Lex),
            "vec" => Some(SubQueryType::Vec),
            "hyde" => Some(SubQueryType::Hyde),
            _ => None,
        }
    }

    /// The type's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SubQueryType::Lex => "lex",
            SubQueryType::Vec => "vec",
            SubQueryType::Hyde => "hyde",
        }
    }
}

/// One typed sub-query of `searches`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubQuery {
    /// Which retriever it runs.
    pub kind: SubQueryType,
    /// Its text.
    pub query: String,
}

impl SubQuery {
    /// `searches[index]` from its type name and text (messages name the field).
    pub fn new(index: usize, kind: &str, query: &str) -> Result<SubQuery> {
        let Some(kind) = SubQueryType::parse(kind) else {
            return Err(Error::invalid(format!(
                "searches[{index}].type: unknown type {kind:?}; types: lex, vec, hyde"
            )));
        };
        if query.trim().is_empty() {
            return Err(Error::invalid(format!(
                "searches[{index}].query: must not be empty"
            )));
        }
        Ok(SubQuery {
            kind,
            query: query.to_owned(),
        })
    }

    /// `searches[index]` from the CLI's `TYPE:TEXT` (`lex:connection pool`).
    pub fn parse_spec(index: usize, spec: &str) -> Result<SubQuery> {
        let Some((kind, text)) = spec.split_once(':') else {
            return Err(Error::invalid(format!(
                "--search {spec:?}: expected TYPE:TEXT with TYPE one of lex, vec, hyde"
            )));
        };
        SubQuery::new(index, kind.trim(), text)
    }

    /// The JSON `searches` array of REST and MCP: `[{"type": "lex", "query": "..."}, ...]`
    /// (`null` is none).
    pub fn list_from_json(v: Option<&serde_json::Value>) -> Result<Vec<SubQuery>> {
        let items = match v {
            None | Some(serde_json::Value::Null) => return Ok(Vec::new()),
            Some(serde_json::Value::Array(items)) => items,
            Some(_) => {
                return Err(Error::invalid(
                    "searches: expected an array of {\"type\", \"query\"} objects",
                ));
            }
        };
        if items.len() > MAX_SEARCHES {
            return Err(Error::invalid(format!(
                "searches: at most {MAX_SEARCHES} sub-queries, got {}",
                items.len()
            )));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let Some(o) = item.as_object() else {
                    return Err(Error::invalid(format!(
                        "searches[{i}]: expected an object with \"type\" and \"query\""
                    )));
                };
                if let Some(k) = o.keys().find(|k| *k != "type" && *k != "query") {
                    return Err(Error::invalid(format!(
                        "searches[{i}].{k}: unknown field; fields: type, query"
                    )));
                }
                let field = |name: &str| match o.get(name) {
                    Some(serde_json::Value::String(s)) => Ok(s.as_str()),
                    Some(_) => Err(Error::invalid(format!(
                        "searches[{i}].{name}: expected a string"
                    ))),
                    None => Err(Error::invalid(format!("searches[{i}].{name}: missing"))),
                };
                SubQuery::new(i, field("type")?, field("query")?)
            })
            .collect()
    }
}

/// What qmd 2.8's `query` adds to a [`SearchRequest`]: typed sub-queries, an intent,
/// several collections and the reranker's candidate count. The default adds nothing: the
/// query runs exactly as [`Engine::query`] runs it.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Typed sub-queries (at most [`MAX_SEARCHES`]). With them the query's text, when given,
    /// is the first sub-query, run through both retrievers; no expansion runs. The first
    /// sub-query weighs twice the others in RRF (as the query as written weighs against its
    /// expansions) and is undiscounted in the calibrated fusion.
    pub searches: Vec<SubQuery>,
    /// What the searcher wants: when a reranker runs it scores passages against
    /// `intent + "\n" + query`. It retrieves nothing on its own.
    pub intent: Option<String>,
    /// Results from any of these collections (with the request's `collection`, if any).
    pub collections: Vec<String>,
    /// Fused candidates the reranker scores (default [`RERANK_CANDIDATES`]).
    pub candidate_limit: Option<usize>,
}

impl QueryOptions {
    /// Checks what can be checked without the index.
    pub fn validate(&self, query: &str) -> Result<()> {
        if query.trim().is_empty() && self.searches.is_empty() {
            return Err(Error::invalid(
                "provide either 'query' (plain text) or 'searches' (typed sub-queries)",
            ));
        }
        if self.searches.len() > MAX_SEARCHES {
            return Err(Error::invalid(format!(
                "searches: at most {MAX_SEARCHES} sub-queries, got {}",
                self.searches.len()
            )));
        }
        for (i, s) in self.searches.iter().enumerate() {
            if s.query.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "searches[{i}].query: must not be empty"
                )));
            }
        }
        if let Some(n) = self.candidate_limit
            && !(1..=crate::retrieval::search::MAX_LIMIT).contains(&n)
        {
            return Err(Error::invalid(format!(
                "candidateLimit: must be between 1 and {}, got {n}",
                crate::retrieval::search::MAX_LIMIT
            )));
        }
        for (i, c) in self.collections.iter().enumerate() {
            if c.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "collections[{i}]: must not be empty"
                )));
            }
        }
        Ok(())
    }
}

/// Which retrievers one entry of a hybrid query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retrieve {
    /// Both (the query as written and its expansions).
    Both,
    /// The keyword retriever only (`lex`).
    Keyword,
    /// The vector retriever only (`vec`, `hyde`).
    Vector,
}

/// Best-matching chunk of a document from vector search (for the snippet and the rerank
/// passage).
#[derive(Clone)]
struct Candidate {
    chunk: ChunkRef,
    similarity: f32,
}

/// Both retrievers' evidence for the query and each of its expansions (index 0 is the
/// query as written).
pub(crate) struct Evidence {
    pub keyword: Vec<Vec<(i64, KeywordEvidence)>>,
    /// `None` when no vector stage ran.
    pub vector: Option<Vec<Vec<(i64, VectorEvidence)>>>,
    chunks: HashMap<i64, Candidate>,
    /// Documents ranked only to score the others as the caller's whole view would (see
    /// `Engine::rank_among`): fused with the rest, never returned.
    outside: std::collections::HashSet<i64>,
}

/// One query's hybrid ranking, best first, with each document's calibrated probability.
///
/// Order: each list's scores min-max normalised (BM25, cosine) and mixed with a vector share
/// that follows the two retrievers' confidence *on this query*
/// ([`calibration::adaptive_vector_share`]): a query whose keyword leader covers it and stands
/// clear follows the keyword list; otherwise, and more so for a `question`
/// ([`calibration::phrased_as_question`]), the vectors lead. Score: [`calibration::Calibration::hybrid`], capped by the
/// score above so the list never shows scores out of order. Without vectors: keyword alone.
fn per_query_ranking(
    keyword: &[(i64, KeywordEvidence)],
    vector: Option<&[(i64, VectorEvidence)]>,
    question: bool,
) -> Vec<(i64, f64)> {
    let Some(vector) = vector else {
        let evidence: Vec<KeywordEvidence> = keyword.iter().map(|(_, e)| *e).collect();
        let probabilities =
            calibration::list_probabilities(&evidence, |e| calibration::DOCUMENTS.keyword(e));
        return keyword
            .iter()
            .map(|(id, _)| *id)
            .zip(probabilities)
            .collect();
    };
    let kw_evidence: Vec<KeywordEvidence> = keyword.iter().map(|(_, e)| *e).collect();
    let vec_evidence: Vec<VectorEvidence> = vector.iter().map(|(_, e)| *e).collect();
    let share = calibration::adaptive_vector_share(&kw_evidence, &vec_evidence, question);
    let normalised = |ids: Vec<i64>, scores: Vec<f64>| -> HashMap<i64, f64> {
        ids.into_iter().zip(min_max(&scores)).collect()
    };
    let kw_norm = normalised(
        keyword.iter().map(|(id, _)| *id).collect(),
        keyword.iter().map(|(_, e)| f64::from(e.bm25)).collect(),
    );
    let vec_norm = normalised(
        vector.iter().map(|(id, _)| *id).collect(),
        vector
            .iter()
            .map(|(_, e)| f64::from(e.similarity))
            .collect(),
    );
    let fused = |id: &i64| {
        (1.0 - share) * kw_norm.get(id).copied().unwrap_or(0.0)
            + share * vec_norm.get(id).copied().unwrap_or(0.0)
    };
    let mut candidates = union(keyword, vector);
    // Stable: exact ties keep first-seen order (keyword list first).
    candidates.sort_by(|a, b| fused(&b.0).total_cmp(&fused(&a.0)));
    let mut cap = 1.0f64;
    candidates
        .into_iter()
        .map(|(id, k, v)| {
            cap = cap.min(calibration::DOCUMENTS.hybrid(k, v));
            (id, cap)
        })
        .collect()
}

/// Every document of either list once, in first-seen order (keyword list first), with what
/// each retriever said about it.
fn union<'a>(
    keyword: &'a [(i64, KeywordEvidence)],
    vector: &'a [(i64, VectorEvidence)],
) -> Vec<(i64, Option<&'a KeywordEvidence>, Option<&'a VectorEvidence>)> {
    let mut out: Vec<(i64, Option<&KeywordEvidence>, Option<&VectorEvidence>)> =
        keyword.iter().map(|(id, e)| (*id, Some(e), None)).collect();
    let at: HashMap<i64, usize> = out.iter().enumerate().map(|(i, c)| (c.0, i)).collect();
    for (id, e) in vector {
        match at.get(id) {
            Some(&i) => out[i].2 = Some(e),
            None => out.push((*id, None, Some(e))),
        }
    }
    out
}

/// Min-max normalisation to 0–1 (a flat or one-element list normalises to 1).
fn min_max(scores: &[f64]) -> Vec<f64> {
    let hi = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = scores.iter().copied().fold(f64::INFINITY, f64::min);
    scores
        .iter()
        .map(|s| if hi > lo { (s - lo) / (hi - lo) } else { 1.0 })
        .collect()
}

/// Default fusion: each query's ranking ([`per_query_ranking`]) merged by
/// [`best_over_variants`]; `queries` are the texts behind `evidence`'s lists.
/// A `lex` sub-query ranks by its keyword list alone, a `vec`/`hyde` one by its vector
/// list alone (each document's calibrated vector probability, as `vsearch` scores it).
fn calibrated_fusion(
    evidence: &Evidence,
    queries: &[String],
    retrieve: &[Retrieve],
) -> Vec<(i64, f64)> {
    let rankings = evidence.keyword.iter().enumerate().map(|(i, kw)| {
        let vec = evidence.vector.as_ref().map(|v| v[i].as_slice());
        let question = queries
            .get(i)
            .is_some_and(|q| calibration::phrased_as_question(q));
        let ranking = match retrieve.get(i).copied().unwrap_or(Retrieve::Both) {
            Retrieve::Both => per_query_ranking(kw, vec, question),
            Retrieve::Keyword => per_query_ranking(kw, None, question),
            Retrieve::Vector => vector_ranking(vec.unwrap_or(&[])),
        };
        ranking.into_iter().map(|(id, p)| (id, p, ())).collect()
    });
    best_over_variants(rankings)
        .into_iter()
        .map(|(id, p, ())| (id, p))
        .collect()
}

/// A vector list alone, scored by the calibrated vector probability (as in `vsearch`).
fn vector_ranking(vector: &[(i64, VectorEvidence)]) -> Vec<(i64, f64)> {
    let evidence: Vec<VectorEvidence> = vector.iter().map(|(_, e)| *e).collect();
    let probabilities =
        calibration::list_probabilities(&evidence, |e| calibration::DOCUMENTS.vector(e));
    vector
        .iter()
        .map(|(id, _)| *id)
        .zip(probabilities)
        .collect()
}

/// QMD's fusion (`QUARRY_FUSION=rrf`): every keyword and vector list into RRF; the score is
/// the fused score relative to the best possible (first in every list). Not calibrated.
/// A `lex` sub-query contributes its keyword list only, a `vec`/`hyde` one its vector list.
fn rrf_fusion(
    evidence: &Evidence,
    weight: &dyn Fn(usize) -> f64,
    retrieve: &[Retrieve],
) -> Vec<(i64, f64)> {
    let mut lists = Vec::new();
    for (i, kw) in evidence.keyword.iter().enumerate() {
        let runs = retrieve.get(i).copied().unwrap_or(Retrieve::Both);
        if runs != Retrieve::Vector {
            lists.push(
                RankedList::new(kw.iter().map(|h| h.0).collect(), weight(i))
                    .with_scores(kw.iter().map(|h| f64::from(h.1.bm25)).collect()),
            );
        }
        if let Some(v) = evidence.vector.as_ref().map(|v| &v[i])
            && runs != Retrieve::Keyword
        {
            lists.push(
                RankedList::new(v.iter().map(|h| h.0).collect(), weight(i))
                    .with_scores(v.iter().map(|h| f64::from(h.1.similarity)).collect()),
            );
        }
    }
    let best: f64 = lists.iter().map(|l| l.weight).sum::<f64>() / (fusion::RRF_K + 1.0)
        + fusion::TOP_RANK_BONUS;
    fusion::rrf(&lists)
        .into_iter()
        .map(|(id, s)| (id, s / best))
        .collect()
}

impl Engine {
    /// Hybrid search. Without a vector index it degrades to keyword search, without a
    /// reranker to fused order, and reports the stages that ran.
    pub fn query(&self, req: &SearchRequest) -> Result<QueryResponse> {
        self.query_with(req, &QueryOptions::default())
    }

    /// Hybrid search with qmd 2.8's options ([`QueryOptions`]): typed sub-queries, an
    /// intent for the reranker, several collections, the reranker's candidate count. With
    /// the default options this is [`Engine::query`].
    pub fn query_with(&self, req: &SearchRequest, opts: &QueryOptions) -> Result<QueryResponse> {
        self.for_one_request().hybrid_request(req, opts)
    }

    /// [`Engine::query_with`] on the request's handle.
    fn hybrid_request(&self, req: &SearchRequest, opts: &QueryOptions) -> Result<QueryResponse> {
        if opts.searches.is_empty() {
            req.validate()?;
        } else {
            req.validate_params()?;
        }
        opts.validate(&req.query)?;
        // Collections: the request's one and `collections`, each one this handle may use,
        // each resolved once (the request's own only when it is one of several).
        let mut names: Vec<(String, Option<i64>)> =
            req.collection.iter().map(|c| (c.clone(), None)).collect();
        for (i, c) in opts.collections.iter().enumerate() {
            let id = match self.collection_id(Some(c)) {
                Ok(id) => id,
                Err(Error::NotFound(_)) => {
                    return Err(Error::invalid(format!(
                        "collections[{i}]: unknown collection {c:?}"
                    )));
                }
                Err(e) => return Err(e),
            };
            if !names.iter().any(|(n, _)| n == c) {
                names.push((c.clone(), id));
            }
        }
        let (collection, filter) = if names.len() > 1 {
            let mut ids = Vec::with_capacity(names.len());
            for (n, id) in &names {
                match id {
                    Some(id) => ids.push(*id),
                    None => ids.extend(self.collection_id(Some(n))?),
                }
            }
            (None, Some(ids))
        } else {
            let one = names.into_iter().next().map(|(n, _)| n);
            let filter = self.search_filter(one.as_deref())?;
            (one, filter)
        };
        let mut stages: Vec<&'static str> = Vec::new();
        let mut warnings = Vec::new();

        let (queries, retrieve) = if opts.searches.is_empty() {
            let queries = self.query_variants(&req.query, &mut warnings);
            if queries.len() > 1 {
                stages.push("expansion");
            }
            let retrieve = vec![Retrieve::Both; queries.len()];
            (queries, retrieve)
        } else {
            // Typed sub-queries run as given (qmd: no expansion); the query's text, when
            // given too, is the first and runs through both retrievers.
            let mut queries = Vec::new();
            let mut retrieve = Vec::new();
            if !req.query.trim().is_empty() {
                queries.push(req.query.clone());
                retrieve.push(Retrieve::Both);
            }
            for s in &opts.searches {
                queries.push(s.query.clone());
                retrieve.push(match s.kind {
                    SubQueryType::Lex => Retrieve::Keyword,
                    SubQueryType::Vec | SubQueryType::Hyde => Retrieve::Vector,
                });
            }
            (queries, retrieve)
        };
        // The first query weighs twice the others (the query as written against its
        // expansions; the first typed sub-query against the rest).
        let weight = |i: usize| {
            if i == 0 {
                fusion::ORIGINAL_WEIGHT
            } else {
                fusion::EXPANSION_WEIGHT
            }
        };

        let evidence = self.gather_evidence(
            &queries,
            &retrieve,
            collection.as_deref(),
            filter.as_deref(),
            &mut stages,
            &mut warnings,
        )?;
        let mut fused = match self.fusion {
            Fusion::Calibrated => calibrated_fusion(&evidence, &queries, &retrieve),
            Fusion::Rrf => rrf_fusion(&evidence, &weight, &retrieve),
        };
        fused.retain(|(id, _)| !evidence.outside.contains(id));
        // The text snippets are cut around and the reranker reads: the query, else (qmd)
        // the first `lex` sub-query, else the first `vec`, else the first.
        let primary: &str = if req.query.trim().is_empty() {
            opts.searches
                .iter()
                .find(|s| s.kind == SubQueryType::Lex)
                .or_else(|| opts.searches.iter().find(|s| s.kind == SubQueryType::Vec))
                .or(opts.searches.first())
                .map_or("", |s| s.query.as_str())
        } else {
            &req.query
        };
        let rerank_query = match opts.intent.as_deref().map(str::trim) {
            Some(intent) if !intent.is_empty() => format!("{intent}\n{primary}"),
            _ => primary.to_owned(),
        };
        let candidate_limit = opts.candidate_limit.unwrap_or(RERANK_CANDIDATES);
        let keyword_ids: std::collections::HashSet<i64> = evidence
            .keyword
            .iter()
            .flat_map(|list| list.iter().map(|(id, _)| *id))
            .collect();
        let mut match_types = Vec::new();
        let candidates = evidence.chunks;
        let top: Vec<i64> = fused
            .iter()
            .take(candidate_limit.max(req.limit))
            .map(|(id, _)| *id)
            .collect();
        let docs = self.store().documents_by_ids(&top)?;
        let terms = self.highlight_terms(primary)?;

        let mut ranked: Option<Vec<(i64, f64)>> = None;
        let reranker = if req.rerank {
            self.reranker(&NoProgress)
        } else {
            Ok(None)
        };
        match reranker {
            Ok(Some(reranker)) => {
                let pool: Vec<i64> = top.iter().take(candidate_limit).copied().collect();
                match self.rerank_scores(
                    reranker.as_ref(),
                    &rerank_query,
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
        let ranked = ranked.unwrap_or(fused);

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
                .map(|c| (c.chunk.line_start, c.chunk.line_end));
            results.push(search_hit(
                doc,
                &contexts,
                score,
                &terms,
                lines,
                req.excerpt_chars,
            ));
            let by_keyword = keyword_ids.contains(&id);
            let by_vector = candidates.contains_key(&id);
            match_types.push(match (by_keyword, by_vector) {
                (true, true) => "hybrid",
                (false, true) => "vector",
                _ => "keyword",
            });
        }
        // Pages hidden from this caller go with their match types.
        let keep = self.mark_page_search_hits(&mut results)?;
        let (results, match_types) = results
            .into_iter()
            .zip(match_types)
            .zip(keep)
            .filter_map(|(pair, k)| k.then_some(pair))
            .unzip();
        Ok(QueryResponse {
            results,
            stages,
            warnings,
            match_types,
        })
    }

    /// Keyword evidence for every query, then vector evidence when vectors exist (the
    /// stages that ran are pushed to `stages`; a vector stage that could not run, to
    /// `warnings`).
    ///
    /// `retrieve[i]` says which retrievers query `i` runs: a list it does not run stays
    /// empty. A vector stage that cannot run when some query needs only it is a warning,
    /// unless no query can run without it: then its error.
    fn gather_evidence(
        &self,
        queries: &[String],
        retrieve: &[Retrieve],
        collection: Option<&str>,
        filter: Option<&[i64]>,
        stages: &mut Vec<&'static str>,
        warnings: &mut Vec<String>,
    ) -> Result<Evidence> {
        let mut keyword = vec![Vec::new(); queries.len()];
        let mut outside = std::collections::HashSet::new();
        if let Some(fts) = self.fts()? {
            fts.reload()?;
            for (i, q) in queries.iter().enumerate() {
                if retrieve[i] == Retrieve::Vector {
                    continue;
                }
                let parsed = fts.parse_query(q);
                let (ranked, ev) =
                    self.keyword_ranking(&fts, &parsed, collection, filter, EVIDENCE_DEPTH)?;
                outside.extend(ranked.iter().filter(|(_, keep)| !keep).map(|(h, _)| h.id));
                keyword[i] = ranked.iter().map(|(h, _)| h.id).zip(ev).collect();
            }
        }
        stages.push("keyword");

        let mut chunks: HashMap<i64, Candidate> = HashMap::new();
        let mut vector = None;
        let wanted: Vec<usize> = (0..queries.len())
            .filter(|&i| retrieve[i] != Retrieve::Keyword)
            .collect();
        let refs: Vec<&str> = wanted.iter().map(|&i| queries[i].as_str()).collect();
        let embedded = if refs.is_empty() {
            // Only `lex` sub-queries: no vector stage.
            Ok(Vec::new())
        } else {
            self.embed_queries_for_search(&refs)
        };
        match embedded {
            Ok(vectors) if refs.is_empty() => debug_assert!(vectors.is_empty()),
            Ok(vectors) => {
                let mut per_query = vec![Vec::new(); queries.len()];
                for (&at, v) in wanted.iter().zip(&vectors) {
                    let hits = self.vector_search(v, EVIDENCE_DEPTH, filter)?;
                    let (ranked, head) = self.rank_among(
                        collection,
                        hits,
                        |e, f| e.vector_search(v, EVIDENCE_DEPTH, f),
                        |h| h.document_id,
                        |h| h.similarity,
                    )?;
                    let sims: Vec<f32> = ranked.iter().map(|(h, _)| h.similarity).collect();
                    let ev =
                        calibration::evidence_in_parts(&sims, head, calibration::vector_evidence);
                    outside.extend(
                        ranked
                            .iter()
                            .filter(|(_, keep)| !keep)
                            .map(|(h, _)| h.document_id),
                    );
                    let hits: Vec<(&crate::index::semantic::VectorDocHit, VectorEvidence)> =
                        ranked.iter().map(|(h, _)| h).zip(ev).collect();
                    for (h, _) in &hits {
                        let better = chunks
                            .get(&h.document_id)
                            .is_none_or(|c| h.similarity > c.similarity);
                        if better {
                            chunks.insert(
                                h.document_id,
                                Candidate {
                                    chunk: h.chunk.clone(),
                                    similarity: h.similarity,
                                },
                            );
                        }
                    }
                    per_query[at] = hits.into_iter().map(|(h, e)| (h.document_id, e)).collect();
                }
                vector = Some(per_query);
                stages.push("vector");
            }
            // No vectors yet is the expected degradation, and so is `--embed-model none`
            // where nothing was ever embedded; anything else is worth saying.
            Err(Error::Unavailable(m)) => {
                if retrieve.iter().all(|r| *r == Retrieve::Vector) {
                    // Only `vec`/`hyde` sub-queries: nothing can run.
                    return Err(Error::Unavailable(m));
                }
                let expected = m == NO_VECTOR_INDEX
                    || (m == crate::index::semantic::EMBEDDING_OFF
                        && self.vector_model()?.is_none());
                if retrieve.contains(&Retrieve::Vector) {
                    warnings.push(format!("vec and hyde sub-queries skipped: {m}"));
                } else if !expected {
                    warnings.push(format!("vector search skipped: {m}"));
                }
            }
            Err(e) => return Err(e),
        }
        Ok(Evidence {
            keyword,
            vector,
            chunks,
            outside,
        })
    }

    /// The evidence behind one hybrid query as written (no expansion, no reranker): every
    /// candidate of either retriever with its features, for fitting and checking the
    /// calibration (`quarry eval --features`).
    pub fn query_evidence(&self, req: &SearchRequest) -> Result<Vec<CandidateEvidence>> {
        req.validate()?;
        let filter = self.search_filter(req.collection.as_deref())?;
        let evidence = self.gather_evidence(
            std::slice::from_ref(&req.query),
            &[Retrieve::Both],
            req.collection.as_deref(),
            filter.as_deref(),
            &mut Vec::new(),
            &mut Vec::new(),
        )?;
        let vector = evidence
            .vector
            .as_ref()
            .map_or(&[][..], |v| v[0].as_slice());
        let mut out: Vec<CandidateEvidence> = union(&evidence.keyword[0], vector)
            .into_iter()
            .map(|(document_id, keyword, vector)| CandidateEvidence {
                document_id,
                file: String::new(),
                keyword: keyword.copied(),
                vector: vector.copied(),
            })
            .collect();
        let ids: Vec<i64> = out.iter().map(|c| c.document_id).collect();
        let docs = self.store().documents_by_ids(&ids)?;
        out.retain_mut(|c| match docs.iter().find(|d| d.id == c.document_id) {
            Some(d) => {
                c.file = d.display_path();
                true
            }
            None => false,
        });
        Ok(out)
    }

    /// The query as written, then its expansions when an expander is configured (a failing
    /// expander is skipped with a warning: expansion is never worth failing a search over).
    pub(crate) fn query_variants(&self, query: &str, warnings: &mut Vec<String>) -> Vec<String> {
        let mut queries = vec![query.to_owned()];
        let expanded = self.expander().and_then(|x| match x {
            Some(x) => self.expand_cached(x.as_ref(), query),
            None => Ok(Vec::new()),
        });
        match expanded {
            Ok(variants) => queries.extend(variants),
            Err(e) => warnings.push(format!("query expansion skipped: {e}")),
        }
        queries
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
            .filter(|id| !candidates.contains_key(id))
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
            fn span<'a>(c: &'a ChunkRef, body: &'a str) -> &'a str {
                c.text_in(body).unwrap_or("")
            }
            let chunk = match candidates.get(id) {
                Some(c) => Some(&c.chunk),
                None => chunks_by_doc.get(id).and_then(|cs| {
                    cs.iter().max_by_key(|c| {
                        let t = span(c, body).to_lowercase();
                        terms.iter().filter(|w| t.contains(w.as_str())).count()
                    })
                }),
            };
            let (heading, text) = chunk.map_or(("", body), |c| (c.heading.as_str(), span(c, body)));
            let text: String = text.chars().take(RERANK_PASSAGE_CHARS).collect();
            passages.push(crate::index::chunking::embed_input(
                &doc.title, heading, &text,
            ));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ranking: &[(i64, f64)]) -> Vec<i64> {
        ranking.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn sub_queries_are_checked_field_by_field() {
        let err = |r: Result<Vec<SubQuery>>| r.unwrap_err().to_string();
        let ok = SubQuery::list_from_json(Some(&serde_json::json!([
            {"type": "lex", "query": "pool"},
            {"type": "vec", "query": "how are connections reused"},
            {"type": "hyde", "query": "Connections are kept in a pool."},
        ])))
        .unwrap();
        assert_eq!(
            ok.iter().map(|s| s.kind).collect::<Vec<_>>(),
            [SubQueryType::Lex, SubQueryType::Vec, SubQueryType::Hyde]
        );
        let bad = serde_json::json!([
            {"type": "lex", "query": "a"}, {"type": "vec", "query": "b"},
            {"type": "lex", "query": "c"}, {"type": "lexx", "query": "d"},
        ]);
        let m = err(SubQuery::list_from_json(Some(&bad)));
        assert!(
            m.contains(r#"searches[3].type: unknown type "lexx"; types: lex, vec, hyde"#),
            "{m}"
        );
        let eleven = serde_json::Value::Array(vec![
            serde_json::json!({"type": "lex", "query": "x"});
            MAX_SEARCHES + 1
        ]);
        let m = err(SubQuery::list_from_json(Some(&eleven)));
        assert!(m.contains("searches: at most 10"), "{m}");
        let m = err(SubQuery::list_from_json(Some(
            &serde_json::json!([{"type": "vec", "query": "  "}]),
        )));
        assert!(m.contains("searches[0].query: must not be empty"), "{m}");
        let m = err(SubQuery::list_from_json(Some(
            &serde_json::json!([{"type": "vec"}]),
        )));
        assert!(m.contains("searches[0].query: missing"), "{m}");
        assert!(SubQuery::list_from_json(None).unwrap().is_empty());
        assert_eq!(
            SubQuery::parse_spec(0, "lex:connection pool").unwrap(),
            SubQuery {
                kind: SubQueryType::Lex,
                query: "connection pool".into()
            }
        );
        assert!(SubQuery::parse_spec(0, "nocolon").is_err());
        let m = QueryOptions::default()
            .validate(" ")
            .unwrap_err()
            .to_string();
        assert!(m.contains("provide either 'query'"), "{m}");
        let m = QueryOptions {
            candidate_limit: Some(0),
            ..QueryOptions::default()
        }
        .validate("q")
        .unwrap_err()
        .to_string();
        assert!(m.contains("candidateLimit"), "{m}");
    }

    /// Notes in `kb` for the engine tests (keyword index only: no model is configured).
    fn engine_with_notes(dir: &std::path::Path) -> Engine {
        let e = crate::test_support::engine(dir);
        for text in [
            "# Harbor\n\nthe harbor master keeps the ships' ledger",
            "# Lighthouse\n\nthe lighthouse keeper trims the lamp",
            "# Market\n\nthe fish market opens at dawn",
        ] {
            e.create_note("kb", crate::test_support::note(text))
                .unwrap();
        }
        crate::test_support::drain(&e);
        e
    }

    fn lex(q: &str) -> SubQuery {
        SubQuery::new(0, "lex", q).unwrap()
    }

    #[test]
    fn lex_sub_queries_search_keywords_only_and_the_first_weighs_most() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine_with_notes(dir.path());
        let req = SearchRequest::new("");
        let titles = |opts: &QueryOptions| -> Vec<String> {
            let r = e.query_with(&req, opts).unwrap();
            assert_eq!(r.stages, ["keyword"], "{r:?}");
            r.results.iter().map(|h| h.title.clone()).collect()
        };
        let opts = |searches: Vec<SubQuery>| QueryOptions {
            searches,
            ..QueryOptions::default()
        };
        assert_eq!(titles(&opts(vec![lex("lighthouse")])), ["Lighthouse"]);
        // Two sub-queries naming different documents: the first one's leads.
        let t = titles(&opts(vec![lex("harbor"), lex("market")]));
        assert_eq!(t, ["Harbor", "Market"]);
        let t = titles(&opts(vec![lex("market"), lex("harbor")]));
        assert_eq!(t, ["Market", "Harbor"]);
        // With the query too, the query is the first.
        let r = e
            .query_with(&SearchRequest::new("lamp"), &opts(vec![lex("dawn")]))
            .unwrap();
        let t: Vec<&str> = r.results.iter().map(|h| h.title.as_str()).collect();
        assert_eq!(t, ["Lighthouse", "Market"]);
        // An unknown collection names the field; a known one narrows nothing here.
        let m = e
            .query_with(
                &req,
                &QueryOptions {
                    searches: vec![lex("harbor")],
                    collections: vec!["kb".into(), "nope".into()],
                    ..QueryOptions::default()
                },
            )
            .unwrap_err()
            .to_string();
        assert!(
            m.contains(r#"collections[1]: unknown collection "nope""#),
            "{m}"
        );
    }

    #[test]
    fn vector_sub_queries_without_vectors_are_skipped_or_fail_alone() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine_with_notes(dir.path());
        let req = SearchRequest::new("");
        let vec_only = QueryOptions {
            searches: vec![SubQuery::new(0, "vec", "who keeps the lamp").unwrap()],
            ..QueryOptions::default()
        };
        assert!(matches!(
            e.query_with(&req, &vec_only),
            Err(Error::Unavailable(_))
        ));
        let mixed = QueryOptions {
            searches: vec![
                SubQuery::new(0, "hyde", "The keeper trims the lamp.").unwrap(),
                lex("harbor"),
            ],
            ..QueryOptions::default()
        };
        let r = e.query_with(&req, &mixed).unwrap();
        assert_eq!(r.results[0].title, "Harbor");
        assert!(
            r.warnings.iter().any(|w| w.contains("sub-queries skipped")),
            "{r:?}"
        );
    }

    #[test]
    fn the_confident_retriever_leads_and_scores_never_rise() {
        // Keyword: doc 1 covers the whole query, far ahead. Vectors: a flat list led by 2.
        let kw: Vec<(i64, KeywordEvidence)> = [1, 3]
            .into_iter()
            .zip(calibration::keyword_evidence(&[30.0, 6.0], 32.0))
            .collect();
        let flat = [0.80, 0.79, 0.79, 0.78, 0.78, 0.77];
        let vec: Vec<(i64, VectorEvidence)> = [2, 4, 5, 6, 7, 1]
            .into_iter()
            .zip(calibration::vector_evidence(&flat))
            .collect();
        let r = per_query_ranking(&kw, Some(&vec), false);
        assert_eq!(r[0].0, 1, "{r:?}");
        assert!(r.windows(2).all(|w| w[0].1 >= w[1].1), "{r:?}");
        // Keyword: a weak, flat match. Vectors: doc 2 stands far above the rest. (Min-max
        // normalisation gives the keyword leader 1 as well: the share decides.)
        let kw: Vec<(i64, KeywordEvidence)> = [3, 4, 5]
            .into_iter()
            .zip(calibration::keyword_evidence(&[2.0, 2.0, 2.0], 40.0))
            .collect();
        let mut sharp = vec![0.90f32];
        sharp.extend([0.30f32; 9]);
        let vec: Vec<(i64, VectorEvidence)> =
            (2..12).zip(calibration::vector_evidence(&sharp)).collect();
        let r = per_query_ranking(&kw, Some(&vec), false);
        assert_eq!(r[0].0, 2, "{r:?}");
        assert!(r.windows(2).all(|w| w[0].1 >= w[1].1), "{r:?}");
        // Without vectors the keyword order and its probabilities stand.
        let alone = per_query_ranking(&kw, None, false);
        assert_eq!(ids(&alone), [3, 4, 5]);
        assert!(alone.windows(2).all(|w| w[0].1 >= w[1].1));
    }
}
