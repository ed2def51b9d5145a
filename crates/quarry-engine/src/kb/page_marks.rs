//! Search hits from wiki pages: each marked with its page's slug and whether it is stale, so
//! no search passes a stale page off as current (issue 68) — `knowledge_search`,
//! `query_knowledge` and chat's sources, Dify's `/retrieval`, and QMD's `search`, `vsearch`
//! and `query` alike — and dropped where the page cites a document this caller may no longer
//! read (a page's readers are set when it is written; its sources' may change since).

use std::collections::HashMap;

use quarry_core::{Error, PageMark, Result, SearchHit};

use crate::engine::Engine;
use crate::kb::pages::{DocumentCache, slug_of, source_state, stale_reason};
use crate::retrieval::knowledge_search::KnowledgeHit;

/// What a search hit's document is to the wiki.
#[derive(Clone)]
enum PageLookup {
    /// Not a page's version.
    NotPage,
    /// A page citing a document this caller may not read: no page to it.
    Hidden,
    /// A page, and its state.
    Page(PageMark),
}

/// Whether a hit's metadata says it comes from a page (cheap: only those are looked up).
fn from_a_page(metadata: Option<&serde_json::Value>) -> bool {
    metadata
        .and_then(|m| m.get("kind"))
        .and_then(|k| k.as_str())
        == Some("page")
}

impl Engine {
    /// Marks the knowledge hits that come from a wiki page, drops those hidden from this
    /// caller, and returns how many went.
    pub(crate) fn mark_page_hits(&self, hits: &mut Vec<KnowledgeHit>) -> Result<usize> {
        let mut cache = DocumentCache::new();
        let mut seen: HashMap<String, PageLookup> = HashMap::new();
        for hit in hits.iter_mut() {
            if !from_a_page(hit.metadata.as_ref()) {
                continue;
            }
            let lookup = match seen.get(&hit.knowledge_id) {
                Some(l) => l.clone(),
                None => {
                    let l = self.page_lookup(&hit.knowledge_id, &mut cache)?;
                    seen.insert(hit.knowledge_id.clone(), l.clone());
                    l
                }
            };
            if let PageLookup::Page(mark) = lookup {
                hit.wiki_page = Some(mark);
            }
        }
        let before = hits.len();
        hits.retain(|h| !matches!(seen.get(&h.knowledge_id), Some(PageLookup::Hidden)));
        Ok(before - hits.len())
    }

    /// Marks QMD search hits that come from a wiki page and says, hit by hit, which to keep
    /// (false: a page hidden from this caller), so a caller holding a parallel list (`query`'s
    /// match types) drops the same ones.
    pub(crate) fn mark_page_search_hits(&self, hits: &mut [SearchHit]) -> Result<Vec<bool>> {
        let mut cache = DocumentCache::new();
        let mut keep = Vec::with_capacity(hits.len());
        for hit in hits.iter_mut() {
            if !from_a_page(hit.metadata.as_ref()) {
                keep.push(true);
                continue;
            }
            let doc = self.resolve(&hit.docid)?;
            let lookup = match self.store().kb_file_ids(&[doc.id])?.remove(&doc.id) {
                Some(id) => self.page_lookup(&id, &mut cache)?,
                None => PageLookup::NotPage,
            };
            keep.push(!matches!(lookup, PageLookup::Hidden));
            if let PageLookup::Page(mark) = lookup {
                hit.wiki_page = Some(mark);
            }
        }
        Ok(keep)
    }

    /// What the knowledge-base file `id` is to the wiki, for this caller.
    fn page_lookup(&self, id: &str, cache: &mut DocumentCache) -> Result<PageLookup> {
        let file = match self.cited_document(id, cache) {
            Ok(Some((file, _))) => file,
            Ok(None) | Err(Error::NotFound(_)) => return Ok(PageLookup::Hidden),
            Err(e) => return Err(e),
        };
        let Some(slug) = slug_of(&file) else {
            return Ok(PageLookup::NotPage);
        };
        let sources = self
            .sources_of(&[file.row_id])?
            .remove(&file.row_id)
            .unwrap_or_default();
        let mut stale_reasons = Vec::new();
        for s in &sources {
            let doc = match self.cited_document(&s.file, cache) {
                Ok(d) => d,
                Err(Error::NotFound(_)) => return Ok(PageLookup::Hidden),
                Err(e) => return Err(e),
            };
            let state = source_state(s, doc.as_ref().map(|(_, d)| d));
            if state.is_stale() {
                stale_reasons.push(stale_reason(&state));
            }
        }
        Ok(PageLookup::Page(PageMark {
            slug,
            stale: !stale_reasons.is_empty(),
            stale_reasons,
        }))
    }
}
