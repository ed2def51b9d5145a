//! Catalog search: the same analyzer and BM25 engine as documents (`quarry-fts`, so Chinese
//! and Japanese descriptions are segmented the same way), over an in-memory index built from
//! one catalog snapshot. Packages stand where collections do for documents, so a search
//! limited to an endpoint's packages filters *inside* the index, before the top-k cut.

use std::collections::HashMap;

use quarry_core::Result;
use quarry_fts::{FtsIndex, ParsedQuery};
use quarry_store::{IndexDoc, IndexWork};

use crate::package::{CatalogTool, Package};

/// A keyword index over one catalog's tools (names, descriptions, tags), for `search_tools`.
pub struct CatalogIndex {
    fts: FtsIndex,
    /// Package id → the "collection" id its tools are indexed under.
    packages: HashMap<String, i64>,
}

impl CatalogIndex {
    /// Indexes `tools`, each with its package's name and description (so a package's name
    /// finds its tools); a hit's id is the tool's position in that slice.
    pub fn build(tools: &[CatalogTool], of_packages: &[Package]) -> Result<CatalogIndex> {
        let fts = FtsIndex::in_memory()?;
        let mut packages: HashMap<String, i64> = HashMap::new();
        let mut work = IndexWork::default();
        for (i, t) in tools.iter().enumerate() {
            let next = packages.len() as i64 + 1;
            let collection_id = *packages.entry(t.package.clone()).or_insert(next);
            let title = match &t.tool.title {
                Some(title) => format!("{} {title}", t.name),
                None => t.name.clone(),
            };
            let package = of_packages
                .iter()
                .find(|p| p.id == t.package)
                .map(|p| format!("{}\n{}", p.name, p.description))
                .unwrap_or_default();
            work.upserts.push(IndexDoc {
                id: i as i64,
                collection_id,
                path: t.full_name.clone(),
                title,
                body: format!(
                    "{}\n{}\n{}\n{}\n{package}",
                    t.description(),
                    t.tool
                        .description
                        .as_deref()
                        .filter(|d| *d != t.description())
                        .unwrap_or(""),
                    t.category,
                    t.tags.join(" ")
                ),
                indexed_at: 0,
                meta: String::new(),
            });
        }
        let mut writer = fts.writer()?;
        writer.apply(&work)?;
        writer.commit()?;
        fts.reload()?;
        Ok(CatalogIndex { fts, packages })
    }

    /// The best `limit` tools for `query` (positions and BM25 scores), limited to
    /// `packages` when given.
    pub fn search(
        &self,
        query: &str,
        packages: Option<&[&str]>,
        limit: usize,
    ) -> Result<Vec<(usize, f32)>> {
        let parsed = self.fts.parse_query(query);
        self.hits(&parsed, packages, limit)
    }

    /// [`CatalogIndex::search`] with the query's saturated maximum: the BM25 score a tool
    /// matching every word of the query with saturated frequency would get
    /// (`FtsIndex::max_score`), over which a hit's score is its coverage of the query
    /// ([`KeywordHits::coverage`]), an input of hybrid search's keyword share
    /// (`quarry_rank::KeywordShare`).
    pub fn search_with_max(
        &self,
        query: &str,
        packages: Option<&[&str]>,
        limit: usize,
    ) -> Result<KeywordHits> {
        let parsed = self.fts.parse_query(query);
        let hits = self.hits(&parsed, packages, limit)?;
        let max_score = if hits.is_empty() {
            0.0
        } else {
            self.fts.max_score(&parsed, None)?
        };
        Ok(KeywordHits { hits, max_score })
    }

    fn hits(
        &self,
        parsed: &ParsedQuery,
        packages: Option<&[&str]>,
        limit: usize,
    ) -> Result<Vec<(usize, f32)>> {
        let ids: Option<Vec<i64>> = packages.map(|ps| {
            ps.iter()
                .filter_map(|p| self.packages.get(*p).copied())
                .collect()
        });
        if ids.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let hits = self.fts.search(parsed, ids.as_deref(), limit)?;
        Ok(hits.into_iter().map(|h| (h.id as usize, h.score)).collect())
    }
}

/// A keyword search's hits and the query's saturated maximum.
#[derive(Debug, Clone, Default)]
pub struct KeywordHits {
    /// Tool positions and BM25 scores, best first.
    pub hits: Vec<(usize, f32)>,
    /// The BM25 score of a tool matching every word of the query with saturated frequency
    /// (0 without hits).
    pub max_score: f32,
}

impl KeywordHits {
    /// How much of the query a hit scored `bm25` covers: its share of the saturated maximum
    /// (0–1; 0 when there is none).
    pub fn coverage(&self, bm25: f64) -> f64 {
        if self.max_score > 0.0 {
            (bm25 / f64::from(self.max_score)).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}
