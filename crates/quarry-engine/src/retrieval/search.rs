//! Keyword search (seed `search`).

use quarry_core::{Context, Document, Error, Result, SearchHit, context_for, round_score};
use quarry_fts::{FtsHit, FtsIndex, ParsedQuery};

use crate::engine::Engine;
use crate::retrieval::calibration::{self, EVIDENCE_DEPTH, KeywordEvidence};

/// Characters of document text in a snippet.
pub const SNIPPET_CHARS: usize = 300;
/// Longest snippet a request may ask for.
pub const MAX_EXCERPT_CHARS: usize = 4000;
/// Largest `limit` accepted.
pub(crate) const MAX_LIMIT: usize = 1000;
/// Keyword hits, each with whether it is in the engine's reach (`Engine::rank_among`), and
/// their calibration evidence in the same order.
pub(crate) type KeywordRanking = (Vec<(FtsHit, bool)>, Vec<KeywordEvidence>);

/// The seed's default `min_score` of `vsearch` on every surface (CLI, REST, MCP): a cosine
/// below it is noise. `search` and `query` default to 0.
pub const VSEARCH_MIN_SCORE: f64 = 0.3;

/// A keyword search, with the seed's defaults.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// The query text.
    pub query: String,
    /// Results returned, at most.
    pub limit: usize,
    /// Results scoring below this (0–1) are dropped.
    pub min_score: f64,
    /// Only this collection.
    pub collection: Option<String>,
    /// Whether `query` reranks its candidates (when a reranker is configured).
    pub rerank: bool,
    /// Characters of document text in each hit's snippet.
    pub excerpt_chars: usize,
}

impl SearchRequest {
    /// A search for `query` with the defaults (10 results, no threshold, rerank, QMD's snippet length).
    pub fn new(query: impl Into<String>) -> Self {
        SearchRequest {
            query: query.into(),
            limit: 10,
            min_score: 0.0,
            collection: None,
            rerank: true,
            excerpt_chars: SNIPPET_CHARS,
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.query.trim().is_empty() {
            return Err(Error::invalid("query must not be empty"));
        }
        self.validate_params()
    }

    /// Everything [`SearchRequest::validate`] checks but the query text (a hybrid query
    /// with typed sub-queries may leave it empty).
    pub(crate) fn validate_params(&self) -> Result<()> {
        if self.limit == 0 || self.limit > MAX_LIMIT {
            return Err(Error::invalid(format!(
                "limit must be between 1 and {MAX_LIMIT}, got {}",
                self.limit
            )));
        }
        if !(1..=MAX_EXCERPT_CHARS).contains(&self.excerpt_chars) {
            return Err(Error::invalid(format!(
                "excerpt length must be between 1 and {MAX_EXCERPT_CHARS} characters"
            )));
        }
        if !(0.0..=1.0).contains(&self.min_score) || self.min_score.is_nan() {
            return Err(Error::invalid(format!(
                "min score must be between 0 and 1, got {}",
                self.min_score
            )));
        }
        Ok(())
    }
}

/// Message of every surface when semantic search is asked for before `embed` ran.
pub const NO_VECTOR_INDEX: &str =
    "Vector index not found. Run 'quarry embed' first to create embeddings.";

/// Result of the hybrid `query` pipeline, with the stages that actually ran.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueryResponse {
    /// The documents, best first.
    pub results: Vec<SearchHit>,
    /// Stages that ran, in order: `expansion`, `keyword`, `vector`, `rerank`. Without a
    /// vector index this is `["keyword"]` (the seed's degradation).
    pub stages: Vec<&'static str>,
    /// Why a configured stage did not run (model unreachable, index built by another model…).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// For each result: found by `keyword`, `vector`, or both (`hybrid`).
    #[serde(skip)]
    pub match_types: Vec<&'static str>,
}

impl Engine {
    /// Semantic search (seed `vsearch`, default min score 0.3): documents ranked by the
    /// cosine similarity of their best chunk to the query, scored by the calibrated
    /// probability of relevance. Needs `embed` to have run.
    pub fn vsearch(&self, req: &SearchRequest) -> Result<Vec<SearchHit>> {
        self.for_one_request().vector_request(req)
    }

    /// [`Engine::vsearch`] on the request's handle.
    fn vector_request(&self, req: &SearchRequest) -> Result<Vec<SearchHit>> {
        req.validate()?;
        let filter = self.search_filter(req.collection.as_deref())?;
        // Expansions are searched too (seed 001); a document keeps its best probability,
        // an expansion's discounted as in `query`. vsearch has no warnings channel, so a
        // failing expander just leaves the query as written.
        let queries = self.query_variants(&req.query, &mut Vec::new());
        let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
        let vectors = self.embed_queries_for_search(&refs)?;
        if vectors.is_empty() {
            return Err(Error::Unavailable(
                "embedding model returned no vector".into(),
            ));
        }
        let mut lists = Vec::with_capacity(vectors.len());
        for v in &vectors {
            // The calibration's evidence is computed over a fixed depth, whatever the limit.
            let depth = req.limit.max(EVIDENCE_DEPTH);
            let hits = self.vector_search(v, depth, filter.as_deref())?;
            let (ranked, head) = self.rank_among(
                req.collection.as_deref(),
                hits,
                |e, f| e.vector_search(v, depth, f),
                |h| h.document_id,
                |h| h.similarity,
            )?;
            let sims: Vec<f32> = ranked.iter().map(|(h, _)| h.similarity).collect();
            let evidence =
                calibration::evidence_in_parts(&sims, head, calibration::vector_evidence);
            let probabilities =
                calibration::list_probabilities(&evidence, |e| calibration::DOCUMENTS.vector(e));
            lists.push(
                ranked
                    .into_iter()
                    .zip(probabilities)
                    .filter(|((_, keep), _)| *keep)
                    .map(|((h, _), p)| (h.document_id, p, h))
                    .collect(),
            );
        }
        let mut best = crate::retrieval::fusion::best_over_variants(lists);
        best.truncate(req.limit);
        let (probabilities, found): (Vec<f64>, Vec<_>) =
            best.into_iter().map(|(_, p, h)| (p, h)).unzip();
        let ids: Vec<i64> = found.iter().map(|h| h.document_id).collect();
        let docs = self.store().documents_by_ids(&ids)?;
        let contexts = self.contexts()?;
        let terms = self.highlight_terms(&req.query)?;
        let mut hits = Vec::with_capacity(found.len());
        for (h, p) in found.iter().zip(probabilities) {
            let Some(doc) = docs.iter().find(|d| d.id == h.document_id) else {
                continue;
            };
            let score = round_score(p);
            if score < req.min_score {
                continue;
            }
            let lines = Some((h.chunk.line_start, h.chunk.line_end));
            hits.push(search_hit(
                doc,
                &contexts,
                score,
                &terms,
                lines,
                req.excerpt_chars,
            ));
        }
        self.marked_page_hits(hits)
    }

    /// `hits` with those from wiki pages marked, less pages hidden from this caller.
    fn marked_page_hits(&self, mut hits: Vec<SearchHit>) -> Result<Vec<SearchHit>> {
        let keep = self.mark_page_search_hits(&mut hits)?;
        Ok(hits
            .into_iter()
            .zip(keep)
            .filter_map(|(h, k)| k.then_some(h))
            .collect())
    }

    /// Lower-cased query terms for choosing snippet lines (the keyword analyzer's view when
    /// a keyword index exists, else whitespace words).
    pub(crate) fn highlight_terms(&self, query: &str) -> Result<Vec<String>> {
        Ok(match self.fts()? {
            Some(fts) => fts.parse_query(query).highlight_terms(),
            None => query
                .split_whitespace()
                .map(str::to_lowercase)
                .filter(|w| w.chars().count() > 1)
                .collect(),
        })
    }

    /// The keyword half of every mode (search, query, passages): `query`'s hits in `index` to
    /// `depth`, ranked among the engine's ranking scope when it has one (`rank_among`: a hit
    /// marked `false` is outside this engine's reach, there only to rank the others), and
    /// each hit's calibration evidence, in the same order.
    pub(crate) fn keyword_ranking(
        &self,
        index: &FtsIndex,
        parsed: &ParsedQuery,
        collection: Option<&str>,
        filter: Option<&[i64]>,
        depth: usize,
    ) -> Result<KeywordRanking> {
        // What the caller may not read is skipped inside the index, before any score is
        // computed relative to the list.
        let excluded = self.hidden_for_search()?;
        // A metadata filter chooses among the rest (the reference list below is unfiltered).
        let allowed = self.allowed_documents()?;
        let raw = index.search_restricted(parsed, filter, excluded.clone(), allowed, depth)?;
        let (ranked, head) = self.rank_among(
            collection,
            raw,
            |_, f| index.search_excluding(parsed, f, excluded.clone(), depth),
            |h| h.id,
            |h| h.score,
        )?;
        let scores: Vec<f32> = ranked.iter().map(|(h, _)| h.score).collect();
        let max = index.max_score(parsed, excluded.as_deref())?;
        let evidence = calibration::evidence_in_parts(&scores, head, |s| {
            calibration::keyword_evidence(s, max)
        });
        Ok((ranked, evidence))
    }

    /// BM25 search with OR semantics; hits carry snippet, context and a calibrated 0–1 score.
    pub fn search(&self, req: &SearchRequest) -> Result<Vec<SearchHit>> {
        req.validate()?;
        let filter = self.search_filter(req.collection.as_deref())?;
        let Some(fts) = self.fts()? else {
            return Ok(Vec::new());
        };
        // Long-lived processes (servers) must see commits made by other processes.
        fts.reload()?;
        let parsed = fts.parse_query(&req.query);
        // The calibration's evidence is computed over a fixed depth, whatever the limit.
        let depth = req.limit.max(EVIDENCE_DEPTH);
        let (ranked, evidence) = self.keyword_ranking(
            &fts,
            &parsed,
            req.collection.as_deref(),
            filter.as_deref(),
            depth,
        )?;
        let probabilities =
            calibration::list_probabilities(&evidence, |e| calibration::DOCUMENTS.keyword(e));
        let (mut raw, probabilities): (Vec<_>, Vec<f64>) = ranked
            .into_iter()
            .zip(probabilities)
            .filter(|((_, keep), _)| *keep)
            .map(|((h, _), p)| (h, p))
            .unzip();
        raw.truncate(req.limit);
        let ids: Vec<i64> = raw.iter().map(|h| h.id).collect();
        let docs = self.store().documents_by_ids(&ids)?;
        let contexts = self.contexts()?;
        let terms = parsed.highlight_terms();
        let mut hits = Vec::with_capacity(docs.len());
        for (h, p) in raw.iter().zip(probabilities) {
            // The keyword index may briefly list a document another process just removed.
            let Some(doc) = docs.iter().find(|d| d.id == h.id) else {
                continue;
            };
            let score = round_score(p);
            if score < req.min_score {
                continue;
            }
            hits.push(search_hit(
                doc,
                &contexts,
                score,
                &terms,
                None,
                req.excerpt_chars,
            ));
        }
        self.marked_page_hits(hits)
    }
}

/// A result of any search mode: identity, context and a snippet from `lines` (a chunk's
/// 1-based line range) or the whole body.
pub(crate) fn search_hit(
    doc: &Document,
    contexts: &[Context],
    score: f64,
    terms: &[String],
    lines: Option<(usize, usize)>,
    excerpt_chars: usize,
) -> SearchHit {
    let file = doc.display_path();
    let snippet = snippet_in(&doc.body, terms, excerpt_chars, lines, &doc.furniture);
    SearchHit {
        docid: doc.docid.clone(),
        context: context_for(contexts, &file).map(|c| c.text.clone()),
        file,
        title: doc.title.clone(),
        score,
        page: snippet_page(doc, &snippet),
        snippet,
        metadata: Engine::shown_metadata(&doc.meta),
        wiki_page: None,
    }
}

/// The page a snippet starts on (its first `N: ` line), for paged sources.
fn snippet_page(doc: &Document, snippet: &str) -> Option<u32> {
    if doc.pages.is_empty() {
        return None;
    }
    let line: usize = snippet.split_once(": ")?.0.parse().ok()?;
    let offset = if line <= 1 {
        0
    } else {
        doc.body
            .match_indices('\n')
            .nth(line - 2)
            .map_or(doc.body.len(), |(i, _)| i + 1)
    };
    quarry_core::page_at(&doc.pages, offset)
}

/// About `max_chars` characters of `body` starting at the line that matches most `terms`,
/// each line prefixed with its 1-based number (`N: `). Long lines are cut around the match.
pub fn snippet(body: &str, terms: &[String], max_chars: usize) -> String {
    snippet_in(body, terms, max_chars, None, &[])
}

/// [`snippet`] restricted to a 1-based inclusive line range (a chunk's lines), from lines
/// outside `furniture` (a table of contents names every section's words; its line is not
/// the answer) unless only furniture matches.
pub(crate) fn snippet_in(
    body: &str,
    terms: &[String],
    max_chars: usize,
    lines: Option<(usize, usize)>,
    furniture: &[quarry_core::Furniture],
) -> String {
    let furniture_lines = furniture_lines(body, furniture);
    let is_furniture = |i: usize| {
        let k = furniture_lines.partition_point(|r| r.1 <= i);
        furniture_lines.get(k).is_some_and(|r| r.0 <= i)
    };
    let outside = snippet_lines(body, terms, max_chars, lines, &is_furniture);
    if !outside.1 && !furniture_lines.is_empty() {
        let anywhere = snippet_lines(body, terms, max_chars, lines, &|_| false);
        if anywhere.1 {
            return anywhere.0;
        }
    }
    outside.0
}

/// 0-based line ranges `[from, to)` that `furniture` covers, in order.
fn furniture_lines(body: &str, furniture: &[quarry_core::Furniture]) -> Vec<(usize, usize)> {
    if furniture.is_empty() {
        return Vec::new();
    }
    let newlines: Vec<usize> = body.match_indices('\n').map(|(i, _)| i).collect();
    let line_of = |offset: usize| newlines.partition_point(|&n| n < offset);
    let mut ranges: Vec<(usize, usize)> = furniture
        .iter()
        .filter(|f| f.byte_end > f.byte_start)
        .map(|f| (line_of(f.byte_start), line_of(f.byte_end - 1) + 1))
        .collect();
    ranges.sort_unstable();
    // Merged, so a search by the end of a range finds the range holding a line.
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.0 <= last.1 => last.1 = last.1.max(r.1),
            _ => merged.push(r),
        }
    }
    merged
}

/// [`snippet_in`] over the lines `skip` leaves; with whether any line matched a term.
fn snippet_lines(
    body: &str,
    terms: &[String],
    max_chars: usize,
    lines: Option<(usize, usize)>,
    skip: &dyn Fn(usize) -> bool,
) -> (String, bool) {
    let (first, last) = lines.unwrap_or((1, usize::MAX));
    let in_range = |i: usize| i + 1 >= first && i < last;
    let mut best: Option<(usize, usize, usize)> = None; // (score, line index, byte offset of match)
    for (i, line) in quarry_core::lines(body).enumerate() {
        if i + 1 > last {
            break;
        }
        if !in_range(i) || line.trim().is_empty() || skip(i) {
            continue;
        }
        let lower = line.to_lowercase();
        let mut score = 0;
        let mut first_at = usize::MAX;
        for t in terms {
            if let Some(at) = lower.find(t.as_str()) {
                score += 1;
                first_at = first_at.min(at);
            }
        }
        if best.is_none_or(|b| score > b.0) {
            // Byte offsets in the lower-cased line can differ from the original for a few
            // scripts; clamp to a char boundary of the original.
            best = Some((score, i, if score == 0 { 0 } else { first_at }));
            if score == terms.len() && score > 0 {
                break;
            }
        }
    }
    let Some((score, start_line, match_at)) = best else {
        return (String::new(), false);
    };
    let mut out = String::new();
    let mut budget = max_chars;
    for (n, line) in quarry_core::lines(body).enumerate().skip(start_line) {
        if budget == 0 || !in_range(n) {
            break;
        }
        if skip(n) {
            continue;
        }
        let text = if n == start_line {
            window(line, match_at, budget)
        } else {
            head(line, budget)
        };
        budget = budget.saturating_sub(text.chars().count().max(1));
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("{}: {text}", n + 1));
    }
    (out, score > 0)
}

/// At most `max` chars of `line`, starting a little before byte `at`.
fn window(line: &str, at: usize, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let mut start = at.min(line.len()).saturating_sub(max / 4);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let s: String = line[start..].chars().take(max).collect();
    if start > 0 { format!("…{s}") } else { s }
}

fn head(line: &str, max: usize) -> String {
    line.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_starts_at_best_line_with_numbers() {
        let body = "# Title\n\nintro text\n\n- extract a tar archive\n`tar xf file.tar`\n";
        let s = snippet(body, &["tar".into(), "extract".into()], 300);
        assert!(
            s.starts_with("5: - extract a tar archive\n6: `tar xf file.tar`"),
            "{s}"
        );
    }

    #[test]
    fn snippet_skips_a_table_of_contents_unless_only_it_matches() {
        // Issue 41 item 17: the contents line "1.1.12 sudo 配置 . . . 33" named the term first.
        let body = "# Guide\n\n1.1.12 sudo 配置 . . . . 33\n1.2 Other . . . . 40\n\n## 1.1.12 sudo 配置\n\nsudo lets a user run commands as root.\n";
        let toc_start = body.find("1.1.12").unwrap_or_default();
        let toc_end = body.find("\n\n## ").unwrap_or_default();
        let contents = [quarry_core::Furniture {
            kind: quarry_core::FurnitureKind::Contents,
            byte_start: toc_start,
            byte_end: toc_end,
        }];
        let s = snippet_in(body, &["sudo".into()], 60, None, &contents);
        assert!(s.starts_with("6: ## 1.1.12 sudo"), "{s}");
        // Only the contents name it: better that line than none.
        let s = snippet_in(body, &["other".into()], 60, None, &contents);
        assert!(s.starts_with("4: 1.2 Other"), "{s}");
        // The snippet's later lines leave furniture out too.
        let s = snippet_in(body, &["guide".into()], 200, None, &contents);
        assert!(s.starts_with("1: # Guide") && !s.contains(". . ."), "{s}");
    }

    #[test]
    fn snippet_is_bounded_and_cuts_long_lines_near_the_match() {
        let long = format!("{}needle{}", "x".repeat(1000), "y".repeat(1000));
        let s = snippet(&long, &["needle".into()], 300);
        assert!(s.contains("needle"));
        assert!(s.chars().count() <= 310, "{}", s.chars().count());
        assert!(s.starts_with("1: …"));
    }

    #[test]
    fn snippet_has_no_line_past_the_end() {
        assert_eq!(
            snippet("# T\n\nextract\n", &["extract".into()], 300),
            "3: extract"
        );
    }

    #[test]
    fn snippet_without_match_shows_the_start() {
        assert_eq!(
            snippet("\nfirst\nsecond", &["zzz".into()], 300),
            "2: first\n3: second"
        );
    }
}
