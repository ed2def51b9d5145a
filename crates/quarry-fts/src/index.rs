//! The keyword index: opening it, searching it with BM25 and writing to it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use quarry_core::{Error, Result};
use quarry_store::IndexWork;
use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, Occur as TOccur, PhraseQuery, Query,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Schema};
use tantivy::{
    DocId, DocSet, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TERMINATED,
    TantivyDocument, Term, doc,
};

use crate::analyzer::{self, TokenKind};
use crate::error::idx_err;
use crate::fields::{FieldCache, FieldTable};
use crate::query::{Occur, ParsedQuery};
use crate::schema::{EXACT_TOKENIZER, Fields, TOKENIZER, passage_schema, schema};
use crate::weights::{BM25_K1, HEADING_WEIGHT, PATH_WEIGHT, TITLE_WEIGHT, token_weights};

/// What of a document's path a passage index holds: the path without its extension (every
/// passage of a format would share `md`), none when that has no letter (`00042.pdf`,
/// `2024/0113.md` say nothing a question could name).
fn telling_path(path: &str) -> Option<&str> {
    let stem = match path.rsplit_once('.') {
        Some((stem, ext))
            if !stem.is_empty()
                && !ext.contains('/')
                && ext.len() <= 5
                && ext.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            stem
        }
        _ => path,
    };
    stem.chars().any(char::is_alphabetic).then_some(stem)
}

/// Adds `text` to an entry's searched fields: its words and their exact forms.
fn add_searched(doc: &mut TantivyDocument, fields: &Fields, text: &str) {
    doc.add_text(fields.text, text);
    doc.add_text(fields.exact, text);
}

/// One passage to index.
#[derive(Debug, Clone)]
pub struct PassageDoc<'a> {
    /// The chunk's id.
    pub id: i64,
    /// Its document's id.
    pub document_id: i64,
    /// Its collection's id (for scoping).
    pub collection_id: i64,
    /// The document's title.
    pub title: &'a str,
    /// The document's path in its collection: a file's name says what it is about ("3M
    /// 2018 10-K", "search.team"), for every passage of it.
    pub path: &'a str,
    /// The chunk's heading path.
    pub heading: &'a str,
    /// The chunk's text.
    pub text: &'a str,
}

/// A keyword index in one directory.
pub struct FtsIndex {
    index: Index,
    fields: Fields,
    reader: IndexReader,
    field_cache: FieldCache,
}

/// A raw BM25 hit: the store's document id (a passage index: the chunk's id) and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FtsHit {
    /// The store's document id (passage index: the chunk's id).
    pub id: i64,
    /// BM25 score.
    pub score: f32,
}

fn open_dir(dir: &Path, schema: Schema) -> Result<Index> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    if dir.join("meta.json").exists() {
        Index::open_in_dir(dir).map_err(idx_err)
    } else {
        Index::create_in_dir(dir, schema).map_err(idx_err)
    }
}

impl FtsIndex {
    /// Opens the index in `dir`, creating it when absent. Creation must happen under the
    /// engine's writer lock.
    pub fn open_or_create(dir: &Path) -> Result<Self> {
        let (schema, fields) = schema();
        Self::with_index(open_dir(dir, schema)?, fields)
    }

    /// Opens the passage index in `dir`, creating it when absent (under the writer lock).
    pub fn open_or_create_passages(dir: &Path) -> Result<Self> {
        let (schema, fields) = passage_schema();
        Self::with_index(open_dir(dir, schema)?, fields)
    }

    /// Opens an existing passage index; `Ok(None)` when there is none yet.
    pub fn open_passages(dir: &Path) -> Result<Option<Self>> {
        if !dir.join("meta.json").exists() {
            return Ok(None);
        }
        let index = Index::open_in_dir(dir).map_err(idx_err)?;
        Self::with_index(index, passage_schema().1).map(Some)
    }

    /// A fresh index held in memory (small derived indexes, such as the tool catalog's).
    pub fn in_memory() -> Result<Self> {
        let (schema, fields) = schema();
        Self::with_index(Index::create_in_ram(schema), fields)
    }

    /// Opens an existing index; `Ok(None)` when there is none yet.
    pub fn open(dir: &Path) -> Result<Option<Self>> {
        if !dir.join("meta.json").exists() {
            return Ok(None);
        }
        let index = Index::open_in_dir(dir).map_err(idx_err)?;
        Self::with_index(index, schema().1).map(Some)
    }

    fn with_index(index: Index, fields: Fields) -> Result<Self> {
        // An index written with another schema (a document index where passages are
        // expected) would answer with the wrong ids: refuse it, the caller rebuilds.
        let expected = if fields.doc.is_some() {
            passage_schema().0
        } else {
            schema().0
        };
        if index.schema() != expected {
            return Err(Error::Index(
                "the keyword index was written with another schema; it must be rebuilt".into(),
            ));
        }
        index
            .tokenizers()
            .register(TOKENIZER, analyzer::QuarryTokenizer::words());
        index
            .tokenizers()
            .register(EXACT_TOKENIZER, analyzer::QuarryTokenizer::exact_forms());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(idx_err)?;
        Ok(FtsIndex {
            index,
            fields,
            reader,
            field_cache: FieldCache::default(),
        })
    }

    /// Picks up commits made since this handle was opened (by this or another process).
    pub fn reload(&self) -> Result<()> {
        self.reader.reload().map_err(idx_err)
    }

    /// The payload of the index's last commit ([`FtsWriter::commit_with_payload`]); `None`
    /// for an index committed without one.
    pub fn commit_payload(&self) -> Result<Option<String>> {
        Ok(self.index.load_metas().map_err(idx_err)?.payload)
    }

    /// Every entry visible to searches as `(id, document id)`: in a keyword index a
    /// document's id twice, in a passage index the chunk's id and its document's. What a
    /// node's self-check compares with the store (one pass over the fast columns, no text).
    pub fn entries(&self) -> Result<Vec<(i64, i64)>> {
        let searcher = self.reader.searcher();
        let mut out = Vec::with_capacity(usize::try_from(searcher.num_docs()).unwrap_or(0));
        for segment in searcher.segment_readers() {
            let fast = segment.fast_fields();
            let ids = fast.u64("id").map_err(idx_err)?;
            let docs = match self.fields.doc {
                Some(_) => Some(fast.u64("doc").map_err(idx_err)?),
                None => None,
            };
            for doc in segment.doc_ids_alive() {
                let Some(id) = ids.first(doc) else { continue };
                let owner = match &docs {
                    Some(column) => match column.first(doc) {
                        Some(d) => d,
                        None => continue,
                    },
                    None => id,
                };
                out.push((id as i64, owner as i64));
            }
        }
        Ok(out)
    }

    /// Number of documents visible to searches.
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Starts a writer. Only one may exist per index across all processes.
    pub fn writer(&self) -> Result<FtsWriter> {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get().min(4))
            .unwrap_or(1);
        self.writer_with_threads(threads)
    }

    /// A writer with `threads` indexing threads: each commit makes up to that many segments,
    /// which documents land in depending on which thread takes them.
    fn writer_with_threads(&self, threads: usize) -> Result<FtsWriter> {
        let writer = self
            .index
            .writer_with_num_threads(threads, 48_000_000 * threads)
            .map_err(idx_err)?;
        // A writer killed inside its commit leaves files the meta never came to name (delete
        // files among them, whose `<segment>.<opstamp>.del` names this writer would choose
        // again and fail on). tantivy collects them only after a commit: do it before the first.
        writer.garbage_collect_files().wait().map_err(idx_err)?;
        Ok(FtsWriter {
            writer,
            fields: self.fields,
        })
    }

    /// Parses a user query for this index (Han text cut by jieba, as the index's is).
    pub fn parse_query(&self, input: &str) -> ParsedQuery {
        ParsedQuery::parse(input)
    }

    /// Runs `query`, optionally restricted to collection ids, returning the best `limit` hits.
    pub fn search(
        &self,
        query: &ParsedQuery,
        collections: Option<&[i64]>,
        limit: usize,
    ) -> Result<Vec<FtsHit>> {
        self.search_excluding(query, collections, None, limit)
    }

    /// [`FtsIndex::search`] without the entries of the documents in `excluded` (a document
    /// index's own ids, a passage index's documents): they are skipped while the best
    /// `limit` are collected, so `limit` hits come back whenever that many others match,
    /// and BM25's statistics (documents, document frequencies, average length) leave them
    /// out too — a caller who may not read them cannot tell from a score whether they hold
    /// a word.
    pub fn search_excluding(
        &self,
        query: &ParsedQuery,
        collections: Option<&[i64]>,
        excluded: Option<Arc<HashSet<u64>>>,
        limit: usize,
    ) -> Result<Vec<FtsHit>> {
        self.search_restricted(query, collections, excluded, None, limit)
    }

    /// [`FtsIndex::search_excluding`] limited further to the documents in `allowed` (those
    /// a metadata filter matched), when given. Unlike `excluded`, `allowed` leaves BM25's
    /// statistics as they are: a filter chooses which documents come back, not how a word
    /// is weighed.
    pub fn search_restricted(
        &self,
        query: &ParsedQuery,
        collections: Option<&[i64]>,
        excluded: Option<Arc<HashSet<u64>>>,
        allowed: Option<Arc<HashSet<u64>>>,
        limit: usize,
    ) -> Result<Vec<FtsHit>> {
        if query.is_empty() || limit == 0 || allowed.as_ref().is_some_and(|a| a.is_empty()) {
            return Ok(Vec::new());
        }
        let Some(content) = self.build_query(query) else {
            return Ok(Vec::new());
        };
        let mut top: Vec<(TOccur, Box<dyn Query>)> = vec![(TOccur::Must, content)];
        if let Some(ids) = collections {
            let filter: Vec<(TOccur, Box<dyn Query>)> = ids
                .iter()
                .map(|&id| {
                    let t = Term::from_field_u64(self.fields.collection, id as u64);
                    (
                        TOccur::Should,
                        Box::new(TermQuery::new(t, IndexRecordOption::Basic)) as Box<dyn Query>,
                    )
                })
                .collect();
            // Boost 0: the filter restricts without changing BM25 scores.
            top.push((
                TOccur::Must,
                Box::new(BoostQuery::new(Box::new(BooleanQuery::new(filter)), 0.0)),
            ));
        }
        let searcher = self.reader.searcher();
        let query = BooleanQuery::new(top);
        let best = TopDocs::with_limit(limit).order_by_score();
        let field = if self.fields.doc.is_some() {
            "doc"
        } else {
            "id"
        };
        let docs = match (excluded.filter(|e| !e.is_empty()), allowed) {
            (None, None) => searcher.search(&query, &best),
            (None, Some(allowed)) => {
                let keep = move |document: u64| allowed.contains(&document);
                searcher.search(&query, &FilterCollector::new(field.into(), keep, best))
            }
            (Some(excluded), allowed) => {
                let stats = self.visible_statistics(&searcher, &excluded)?;
                let keep = move |document: u64| {
                    !excluded.contains(&document)
                        && allowed.as_ref().is_none_or(|a| a.contains(&document))
                };
                searcher.search_with_statistics_provider(
                    &query,
                    &FilterCollector::new(field.into(), keep, best),
                    &stats,
                )
            }
        }
        .map_err(idx_err)?;
        let mut hits = Vec::with_capacity(docs.len());
        let mut columns: Vec<Option<tantivy::columnar::Column<u64>>> =
            vec![None; searcher.segment_readers().len()];
        for (score, addr) in docs {
            let slot = &mut columns[addr.segment_ord as usize];
            if slot.is_none() {
                *slot = Some(
                    searcher
                        .segment_reader(addr.segment_ord)
                        .fast_fields()
                        .u64("id")
                        .map_err(idx_err)?,
                );
            }
            if let Some(id) = slot.as_ref().and_then(|c| c.first(addr.doc_id)) {
                hits.push(FtsHit {
                    id: id as i64,
                    score,
                });
            }
        }
        Ok(hits)
    }

    /// The BM25 score a document would get if it matched every positive term of `query`
    /// with saturated frequency: `Σ idf(t) · (k1 + 1)` over the terms the query scores.
    /// A hit's score divided by this is its *coverage* (0–1): how much of the query's
    /// information it matched, comparable across queries of any length (calibration input).
    /// Statistics without `excluded`'s entries, as [`FtsIndex::search_excluding`] scores.
    pub fn max_score(&self, query: &ParsedQuery, excluded: Option<&HashSet<u64>>) -> Result<f32> {
        let searcher = self.reader.searcher();
        let visible = match excluded.filter(|e| !e.is_empty()) {
            Some(e) => Some(self.visible_statistics(&searcher, e)?),
            None => None,
        };
        let stats: &dyn Bm25StatisticsProvider = match &visible {
            Some(v) => v,
            None => &searcher,
        };
        let n = stats.total_num_docs().map_err(idx_err)? as f32;
        let idf = |t: &analyzer::Token| -> f32 {
            let df = stats.doc_freq(&self.term(t)).unwrap_or(0) as f32;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        };
        let mut total = 0.0;
        for c in query.clauses.iter().filter(|c| c.occur != Occur::MustNot) {
            if c.occur == Occur::Should && !c.phrase {
                let weights = token_weights(&c.tokens);
                total += c
                    .tokens
                    .iter()
                    .zip(weights)
                    .map(|(t, w)| idf(t) * w)
                    .sum::<f32>();
            } else {
                total += c
                    .tokens
                    .iter()
                    .filter(|t| t.kind == TokenKind::Primary)
                    .map(idf)
                    .sum::<f32>();
            }
        }
        Ok(total * (1.0 + BM25_K1))
    }

    /// The entries of the `excluded` documents in `searcher`'s segments (found through the
    /// indexed `id` / `doc` term: work in proportion to them, not to the index), and what
    /// they add to BM25's statistics.
    fn visible_statistics<'s>(
        &self,
        searcher: &'s Searcher,
        excluded: &HashSet<u64>,
    ) -> Result<VisibleStatistics<'s>> {
        let key = self.fields.doc.unwrap_or(self.fields.id);
        let mut stats = VisibleStatistics {
            searcher,
            text: self.fields.text,
            hidden: Vec::with_capacity(searcher.segment_readers().len()),
            hidden_entries: 0,
            hidden_tokens: 0,
            exact: self.fields.exact,
            hidden_exact_tokens: 0,
        };
        for segment in searcher.segment_readers() {
            let inverted = segment.inverted_index(key).map_err(idx_err)?;
            let norms = segment
                .get_fieldnorms_reader(self.fields.text)
                .map_err(idx_err)?;
            let exact_norms = segment
                .get_fieldnorms_reader(self.fields.exact)
                .map_err(idx_err)?;
            let mut entries: Vec<DocId> = Vec::new();
            for &id in excluded {
                let term = Term::from_field_u64(key, id);
                let Some(mut postings) = inverted
                    .read_postings(&term, IndexRecordOption::Basic)
                    .map_err(|e| idx_err(e.into()))?
                else {
                    continue;
                };
                let mut d = postings.doc();
                while d != TERMINATED {
                    entries.push(d);
                    // tantivy's totals (documents, tokens, document frequencies) count deleted
                    // entries until a merge drops them, so every hidden entry comes off, alive
                    // or not.
                    stats.hidden_tokens += u64::from(norms.fieldnorm(d));
                    stats.hidden_exact_tokens += u64::from(exact_norms.fieldnorm(d));
                    stats.hidden_entries += 1;
                    d = postings.advance();
                }
            }
            entries.sort_unstable();
            stats.hidden.push(entries);
        }
        Ok(stats)
    }

    /// The term a query token looks up: an exact form in the `exact` field, the rest in
    /// `text`.
    fn term(&self, t: &analyzer::Token) -> Term {
        let field = match t.kind {
            TokenKind::Exact => self.fields.exact,
            _ => self.fields.text,
        };
        Term::from_field_text(field, &t.text)
    }

    fn build_query(&self, query: &ParsedQuery) -> Option<Box<dyn Query>> {
        let field = self.fields.text;
        let term = |t: &analyzer::Token| -> Box<dyn Query> {
            Box::new(TermQuery::new(self.term(t), IndexRecordOption::WithFreqs))
        };
        let mut clauses: Vec<(TOccur, Box<dyn Query>)> = Vec::new();
        for c in &query.clauses {
            let base = c.tokens.first().map_or(0, |t| t.position);
            let primaries: Vec<(usize, Term)> = c
                .tokens
                .iter()
                .filter(|t| t.kind == TokenKind::Primary)
                .map(|t| (t.position - base, Term::from_field_text(field, &t.text)))
                .collect();
            let q: Box<dyn Query> = if c.phrase && primaries.len() > 1 {
                Box::new(PhraseQuery::new_with_offset(primaries))
            } else if c.occur == Occur::Should {
                // Every token is an independent OR term; compounds and sub-words add
                // their own (high-IDF) evidence; a stem shares its weight with its exact form.
                for (t, w) in c.tokens.iter().zip(token_weights(&c.tokens)) {
                    let q = if w == 1.0 {
                        term(t)
                    } else {
                        Box::new(BoostQuery::new(term(t), w))
                    };
                    clauses.push((TOccur::Should, q));
                }
                continue;
            } else {
                // Required or excluded word: all its primary tokens; a compound, when
                // present, may stand in for its parts (`gpt-4o` or `gpt 4o`).
                let parts_q: Box<dyn Query> = Box::new(BooleanQuery::new(
                    primaries
                        .into_iter()
                        .map(|(_, t)| {
                            (
                                TOccur::Must,
                                Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs))
                                    as Box<dyn Query>,
                            )
                        })
                        .collect(),
                ));
                match c.tokens.iter().find(|t| t.kind == TokenKind::Compound) {
                    Some(comp) => Box::new(BooleanQuery::new(vec![
                        (TOccur::Should, term(comp)),
                        (TOccur::Should, parts_q),
                    ])),
                    None => parts_q,
                }
            };
            let occur = match c.occur {
                Occur::Should => TOccur::Should,
                Occur::Must => TOccur::Must,
                Occur::MustNot => TOccur::MustNot,
            };
            clauses.push((occur, q));
        }
        if clauses.iter().all(|(o, _)| *o == TOccur::MustNot) {
            return None;
        }
        Some(Box::new(BooleanQuery::new(clauses)))
    }

    /// The fields of every document this index's current searcher sees. A segment is read
    /// from disk the first time it is asked for, after that from memory; an index without
    /// stored fields (a passage index) has an empty table.
    pub fn field_table(&self) -> Result<FieldTable> {
        self.field_cache
            .table(self.reader.searcher(), self.fields.id, self.fields.stored)
    }
}

/// Applies store work to the index; nothing is visible until [`FtsWriter::commit`].
pub struct FtsWriter {
    writer: IndexWriter,
    fields: Fields,
}

impl FtsWriter {
    /// Replaces the passages of documents: every passage of `documents` is deleted, then
    /// `passages` added (a document removed from the store is in `documents` only).
    pub fn apply_passages(&mut self, documents: &[i64], passages: &[PassageDoc<'_>]) -> Result<()> {
        let f = self.fields;
        let Some(doc_field) = f.doc else {
            return Err(Error::Index("not a passage index".into()));
        };
        for id in documents {
            self.writer
                .delete_term(Term::from_field_u64(doc_field, *id as u64));
        }
        for p in passages {
            let mut doc: TantivyDocument = doc!(
                f.id => p.id as u64,
                f.collection => p.collection_id as u64,
                doc_field => p.document_id as u64,
            );
            add_searched(&mut doc, &f, p.title);
            if let Some(name) = telling_path(p.path) {
                add_searched(&mut doc, &f, name);
            }
            for _ in 0..HEADING_WEIGHT {
                add_searched(&mut doc, &f, p.heading);
            }
            add_searched(&mut doc, &f, p.text);
            self.writer.add_document(doc).map_err(idx_err)?;
        }
        Ok(())
    }

    /// Applies `work`: deletes its ids and (re-)indexes its documents (uncommitted).
    pub fn apply(&mut self, work: &IndexWork) -> Result<()> {
        let f = self.fields;
        for id in &work.deletes {
            self.writer
                .delete_term(Term::from_field_u64(f.id, *id as u64));
        }
        for d in &work.upserts {
            self.writer
                .delete_term(Term::from_field_u64(f.id, d.id as u64));
            let mut doc: TantivyDocument = doc!(
                f.id => d.id as u64,
                f.collection => d.collection_id as u64,
            );
            for _ in 0..TITLE_WEIGHT {
                add_searched(&mut doc, &f, &d.title);
            }
            // The path relative to its collection: renaming a collection needs no re-index.
            for _ in 0..PATH_WEIGHT {
                add_searched(&mut doc, &f, &d.path);
            }
            add_searched(&mut doc, &f, &d.body);
            if let Some(stored) = f.stored {
                doc.add_text(stored.path, &d.path);
                doc.add_text(stored.title, &d.title);
                doc.add_i64(stored.indexed, d.indexed_at);
                doc.add_text(stored.meta, &d.meta);
            }
            self.writer.add_document(doc).map_err(idx_err)?;
        }
        Ok(())
    }

    /// Makes everything applied so far durable and visible, atomically.
    pub fn commit(&mut self) -> Result<()> {
        self.writer.commit().map_err(idx_err)?;
        Ok(())
    }

    /// Like [`FtsWriter::commit`], recording `payload` in the same atomic commit (what the
    /// index has absorbed, so the index and its position never disagree).
    pub fn commit_with_payload(&mut self, payload: &str) -> Result<()> {
        let mut prepared = self.writer.prepare_commit().map_err(idx_err)?;
        prepared.set_payload(payload);
        prepared.commit().map_err(idx_err)?;
        Ok(())
    }

    /// Waits for background segment merges so the index is compact when the process exits.
    pub fn finish(self) -> Result<()> {
        self.writer.wait_merging_threads().map_err(idx_err)
    }
}

/// BM25's statistics over a searcher's segments as if some documents' entries were not
/// there: tantivy's own counts (which include deleted entries in the document count,
/// document frequencies and token totals alike) less what those entries add.
struct VisibleStatistics<'s> {
    searcher: &'s Searcher,
    text: Field,
    /// Per segment, in segment order: the excluded entries' doc ids, ascending.
    hidden: Vec<Vec<DocId>>,
    /// Excluded entries, deleted ones included.
    hidden_entries: u64,
    /// Tokens of the `text` field in the excluded entries, deleted ones included as tantivy's
    /// totals include them (from field norms, which round long lengths: the remainder is a
    /// few tokens in millions).
    hidden_tokens: u64,
    /// The same for the `exact` field.
    exact: Field,
    hidden_exact_tokens: u64,
}

impl Bm25StatisticsProvider for VisibleStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let all = self.searcher.total_num_tokens(field)?;
        Ok(if field == self.text {
            all.saturating_sub(self.hidden_tokens)
        } else if field == self.exact {
            all.saturating_sub(self.hidden_exact_tokens)
        } else {
            all
        })
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        // As tantivy counts for BM25: every entry, deleted ones too (document frequencies
        // count them as well; counting only live ones could put a frequency above the total).
        let all: u64 = self
            .searcher
            .segment_readers()
            .iter()
            .map(|s| u64::from(s.max_doc()))
            .sum();
        Ok(all.saturating_sub(self.hidden_entries))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let all = self.searcher.doc_freq(term)?;
        let mut hidden = 0u64;
        for (segment, entries) in self.searcher.segment_readers().iter().zip(&self.hidden) {
            if entries.is_empty() {
                continue;
            }
            let inverted = segment.inverted_index(term.field())?;
            let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::Basic)? else {
                continue;
            };
            for &d in entries {
                if postings.doc() > d {
                    continue;
                }
                if postings.seek(d) == d {
                    hidden += 1;
                }
                if postings.doc() == TERMINATED {
                    break;
                }
            }
        }
        Ok(all.saturating_sub(hidden))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quarry_store::IndexDoc;

    fn doc(id: i64, body: &str) -> IndexDoc {
        IndexDoc {
            id,
            collection_id: 1,
            path: format!("{id}.md"),
            title: String::new(),
            body: body.into(),
            indexed_at: 0,
            meta: String::new(),
        }
    }

    /// Ids of `query`'s hits in `index`, best first.
    fn ranked(index: &FtsIndex, query: &str) -> Result<Vec<i64>> {
        let hits = index.search(&index.parse_query(query), None, 10)?;
        Ok(hits.into_iter().map(|h| h.id).collect())
    }

    #[test]
    fn a_passage_index_holds_a_paths_telling_part() {
        assert_eq!(telling_path("search-team.md"), Some("search-team"));
        assert_eq!(
            telling_path("reports/3M 2018 10-K.pdf"),
            Some("reports/3M 2018 10-K")
        );
        assert_eq!(telling_path("00042.md"), None);
        assert_eq!(telling_path("2024/0113.md"), None);
        assert_eq!(telling_path("Makefile"), Some("Makefile"));
        assert_eq!(telling_path("v1.2/notes"), Some("v1.2/notes"));
    }

    #[test]
    fn a_words_exact_form_ranks_above_others_of_its_stem() -> Result<()> {
        let index = FtsIndex::in_memory()?;
        let mut w = index.writer()?;
        w.apply(&IndexWork {
            upserts: vec![
                doc(1, "Custom fields for the export"),
                doc(2, "Customer fields for the export"),
                doc(3, "Customers and their fields"),
                doc(4, "Billing at the T station"),
                doc(5, "AT&T billing"),
            ],
            deletes: vec![],
        })?;
        w.commit()?;
        index.reload()?;
        // One stem (`custom`), two words: each query ranks its own word first, and a plural
        // still finds the singular's texts.
        let customer = ranked(&index, "customer fields")?;
        assert!(
            customer[..2].contains(&2) && customer[..2].contains(&3),
            "{customer:?}"
        );
        assert_eq!(ranked(&index, "custom fields")?[0], 1);
        assert!(ranked(&index, "customers")?.contains(&2));
        // An identifier with `&` is one term as well as its parts.
        assert_eq!(ranked(&index, "AT&T billing")?[0], 5);
        Ok(())
    }

    #[test]
    fn entries_list_what_searches_see() -> Result<()> {
        let keyword = FtsIndex::in_memory()?;
        let mut w = keyword.writer()?;
        w.apply(&IndexWork {
            upserts: vec![doc(1, "one"), doc(2, "two"), doc(3, "three")],
            deletes: vec![],
        })?;
        w.apply(&IndexWork {
            upserts: vec![],
            deletes: vec![2],
        })?;
        w.commit()?;
        keyword.reload()?;
        let mut got = keyword.entries()?;
        got.sort_unstable();
        assert_eq!(got, [(1, 1), (3, 3)]);

        let dir = tempfile::tempdir().map_err(|e| Error::io("tmp", e))?;
        let passages = FtsIndex::open_or_create_passages(dir.path())?;
        let mut w = passages.writer()?;
        let p = |id, document_id| PassageDoc {
            id,
            document_id,
            collection_id: 1,
            title: "",
            path: "",
            heading: "",
            text: "text",
        };
        w.apply_passages(&[7, 8], &[p(70, 7), p(71, 7), p(80, 8)])?;
        // Replacing a document's passages drops its old chunk ids.
        w.apply_passages(&[7], &[p(72, 7)])?;
        w.commit()?;
        passages.reload()?;
        let mut got = passages.entries()?;
        got.sort_unstable();
        assert_eq!(got, [(72, 7), (80, 8)]);
        Ok(())
    }

    /// Visible documents replaced many times leave deleted entries that tantivy's document
    /// frequencies count until a merge: the statistics without the excluded documents must
    /// count them in the document total too, or a frequency exceeds the total (tantivy's
    /// `idf` asserts it does not: the search panicked).
    #[test]
    fn replaced_visible_documents_keep_exclusion_statistics_consistent() -> Result<()> {
        let index = FtsIndex::in_memory()?;
        let mut w = index.writer_with_threads(1)?;
        w.apply(&IndexWork {
            upserts: vec![
                doc(1, "zebra one"),
                doc(2, "zebra two"),
                doc(3, "zebra three"),
            ],
            deletes: vec![],
        })?;
        w.commit()?;
        for round in 0..5 {
            w.apply(&IndexWork {
                upserts: vec![
                    doc(1, &format!("zebra one {round}")),
                    doc(2, &format!("zebra two {round}")),
                ],
                deletes: vec![],
            })?;
        }
        w.commit()?;
        index.reload()?;
        let query = ParsedQuery::parse("zebra");
        let excluded: Arc<HashSet<u64>> = Arc::new([3].into());
        let hits = index.search_excluding(&query, None, Some(excluded.clone()), 10)?;
        let mut ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2]);
        assert!(
            hits.iter().all(|h| h.score.is_finite() && h.score > 0.0),
            "{hits:?}"
        );
        assert!(index.max_score(&query, Some(&excluded))? > 0.0);
        Ok(())
    }

    /// Scores (and the coverage maximum) of what stays visible, in an index that also holds
    /// `hidden` documents excluded from the search, equal those of an index without them —
    /// after deletes, across segments, in both kinds of index.
    #[test]
    fn excluded_documents_leave_no_trace_in_scores() -> Result<()> {
        let visible = [
            doc(1, "the zebra policy"),
            doc(2, "a heron guide for the staff"),
        ];
        let hidden = [
            doc(3, "zebra zebra bands"),
            doc(4, "zebra minutes with a long body of many other words here"),
            doc(5, "zebra"),
        ];
        let query = ParsedQuery::parse("zebra policy");
        let scores = |index: &FtsIndex, excluded: Option<Arc<HashSet<u64>>>| -> Result<_> {
            let max = index.max_score(&query, excluded.as_deref())?;
            let hits = index.search_excluding(&query, None, excluded, 10)?;
            Ok((
                hits.iter().map(|h| (h.id, h.score)).collect::<Vec<_>>(),
                max,
            ))
        };
        let alone = FtsIndex::in_memory()?;
        let mut w = alone.writer()?;
        w.apply(&IndexWork {
            upserts: visible.to_vec(),
            deletes: vec![],
        })?;
        w.commit()?;
        alone.reload()?;
        let expected = scores(&alone, None)?;
        assert_eq!(expected.0.len(), 1);

        // One indexing thread, so the replaced hidden entry shares its segment with a visible
        // one (a segment of deleted entries only is dropped at commit, hiding the case).
        let mixed = FtsIndex::in_memory()?;
        let mut w = mixed.writer_with_threads(1)?;
        w.apply(&IndexWork {
            upserts: [visible[0].clone(), hidden[0].clone()].to_vec(),
            deletes: vec![],
        })?;
        w.commit()?;
        // A second segment, and a hidden document replaced (its old entry deleted).
        w.apply(&IndexWork {
            upserts: [visible[1].clone(), hidden[1].clone(), hidden[2].clone()].to_vec(),
            deletes: vec![],
        })?;
        w.apply(&IndexWork {
            upserts: vec![doc(3, "zebra bands again")],
            deletes: vec![],
        })?;
        w.commit()?;
        mixed.reload()?;
        let excluded: HashSet<u64> = [3, 4, 5].into();
        let got = scores(&mixed, Some(Arc::new(excluded)))?;
        assert_eq!(got.0.len(), 1);
        assert!(
            (got.0[0].1 - expected.0[0].1).abs() < 1e-4,
            "{got:?} vs {expected:?}"
        );
        assert!((got.1 - expected.1).abs() < 1e-4, "{got:?} vs {expected:?}");
        // Without the exclusion the hidden documents do move the score: the test can fail.
        let open = scores(&mixed, None)?;
        assert!(
            (open.0.iter().find(|h| h.0 == 1).map_or(0.0, |h| h.1) - expected.0[0].1).abs() > 1e-3
        );

        // A passage index: entries excluded by their document.
        let dir = tempfile::tempdir().map_err(|e| Error::io("tmp", e))?;
        let passages = FtsIndex::open_or_create_passages(dir.path())?;
        let p = |id, document_id, text| PassageDoc {
            id,
            document_id,
            collection_id: 1,
            title: "",
            path: "",
            heading: "",
            text,
        };
        let mut w = passages.writer()?;
        w.apply_passages(
            &[7, 8],
            &[
                p(70, 7, "the zebra policy"),
                p(80, 8, "zebra bands"),
                p(81, 8, "zebra"),
            ],
        )?;
        w.commit()?;
        passages.reload()?;
        let dir2 = tempfile::tempdir().map_err(|e| Error::io("tmp", e))?;
        let only = FtsIndex::open_or_create_passages(dir2.path())?;
        let mut w = only.writer()?;
        w.apply_passages(&[7], &[p(70, 7, "the zebra policy")])?;
        w.commit()?;
        only.reload()?;
        let expected = scores(&only, None)?;
        let got = scores(&passages, Some(Arc::new([8u64].into())))?;
        assert_eq!(got.0.len(), 1);
        assert!(
            (got.0[0].1 - expected.0[0].1).abs() < 1e-4,
            "{got:?} vs {expected:?}"
        );
        assert!((got.1 - expected.1).abs() < 1e-4, "{got:?} vs {expected:?}");
        Ok(())
    }

    /// A writer SIGKILLed inside its commit leaves the delete files it had written but not
    /// the meta naming them; the next writer, replaying the same operations, picks the same
    /// `<segment>.<opstamp>.del` names and must not fail on the leftover.
    #[test]
    fn a_killed_commits_leftover_files_do_not_block_the_next_writer() -> Result<()> {
        let io = |e| Error::io("tmp", e);
        let dir = tempfile::tempdir().map_err(io)?;
        let index = FtsIndex::open_or_create(dir.path())?;
        let mut w = index.writer_with_threads(1)?;
        w.apply(&IndexWork {
            upserts: vec![doc(1, "one"), doc(2, "two"), doc(3, "three")],
            deletes: vec![],
        })?;
        w.commit()?;
        w.finish()?;
        drop(index);
        let meta = dir.path().join("meta.json");
        let before = std::fs::read(&meta).map_err(io)?;
        let delete_two = || -> Result<()> {
            let index = FtsIndex::open_or_create(dir.path())?;
            let mut w = index.writer_with_threads(1)?;
            w.apply(&IndexWork {
                upserts: vec![],
                deletes: vec![2],
            })?;
            w.commit()?;
            w.finish()
        };
        delete_two()?;
        let leftovers = |dir: &Path| -> Result<Vec<String>> {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(dir).map_err(io)? {
                let name = entry
                    .map_err(io)?
                    .file_name()
                    .to_string_lossy()
                    .into_owned();
                if name.ends_with(".del") {
                    names.push(name);
                }
            }
            Ok(names)
        };
        assert_eq!(leftovers(dir.path())?.len(), 1);
        // The kill: the meta as it was before that commit, its delete file left behind.
        std::fs::write(&meta, &before).map_err(io)?;
        delete_two()?;
        let index = FtsIndex::open_or_create(dir.path())?;
        let mut got = index.entries()?;
        got.sort_unstable();
        assert_eq!(got, [(1, 1), (3, 3)]);
        Ok(())
    }
}

#[cfg(test)]
mod field_table_tests {
    use quarry_metadata::Value;
    use quarry_store::{IndexDoc, IndexWork};

    use super::FtsIndex;
    use crate::error::idx_err;

    fn doc(id: i64, collection_id: i64, meta: &str) -> IndexDoc {
        IndexDoc {
            id,
            collection_id,
            path: format!("{id}.md"),
            title: format!("Title {id}"),
            body: "body text".into(),
            indexed_at: 1_780_000_000_000 + id,
            meta: meta.into(),
        }
    }

    fn table(index: &FtsIndex) -> Vec<(i64, i64, Option<Value>, Option<Value>)> {
        let mut out: Vec<_> = index
            .field_table()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|d| {
                (
                    d.id,
                    d.collection_id,
                    d.fields.get("status").cloned(),
                    d.fields.get("path").cloned(),
                )
            })
            .collect();
        out.sort_by_key(|e| e.0);
        out
    }

    /// The table follows the index: new segments are read, replaced and deleted documents
    /// drop out, cached segments answer again, and built-in fields sit under stored ones.
    #[test]
    fn the_field_table_follows_writes_deletes_and_merges() -> quarry_core::Result<()> {
        let index = FtsIndex::in_memory()?;
        let mut w = index.writer_with_threads(1)?;
        w.apply(&IndexWork {
            upserts: vec![
                doc(1, 7, r#"{"status":"draft"}"#),
                doc(2, 7, "{}"),
                doc(3, 8, r#"{"path":"given"}"#),
            ],
            deletes: vec![],
        })?;
        w.commit()?;
        index.reload()?;
        let draft = Some(Value::String("draft".into()));
        let path = |p: &str| Some(Value::String(p.into()));
        assert_eq!(
            table(&index),
            [
                (1, 7, draft.clone(), path("1.md")),
                (2, 7, None, path("2.md")),
                (3, 8, None, path("given")),
            ]
        );
        let first = index.field_table()?;
        let indexed = first
            .iter()
            .find(|d| d.id == 2)
            .and_then(|d| d.fields.get("indexed").cloned());
        assert!(matches!(indexed, Some(Value::Date(d)) if d.millis == 1_780_000_000_002));

        // Document 1 replaced (in a second segment), document 2 deleted.
        w.apply(&IndexWork {
            upserts: vec![doc(1, 7, r#"{"status":"published"}"#)],
            deletes: vec![2],
        })?;
        w.commit()?;
        index.reload()?;
        let published = Some(Value::String("published".into()));
        assert_eq!(
            table(&index),
            [
                (1, 7, published.clone(), path("1.md")),
                (3, 8, None, path("given")),
            ]
        );
        // A table taken earlier keeps answering for its own searcher.
        assert_eq!(first.len(), 3);

        // Merged into one segment: read again, same answer.
        let segments = index.index.searchable_segment_ids().map_err(idx_err)?;
        w.writer.merge(&segments).wait().map_err(idx_err)?;
        w.commit()?;
        index.reload()?;
        assert_eq!(index.reader.searcher().segment_readers().len(), 1);
        assert_eq!(
            table(&index),
            [(1, 7, published, path("1.md")), (3, 8, None, path("given"))]
        );

        // A passage index keeps no fields.
        let dir = tempfile::tempdir().map_err(|e| quarry_core::Error::io("tmp", e))?;
        let passages = FtsIndex::open_or_create_passages(dir.path())?;
        assert!(passages.field_table()?.is_empty());
        Ok(())
    }
}
