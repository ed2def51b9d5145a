//! A wiki page's versions (issue 68): every write of a page is a new version of the entry
//! keyed `page:<slug>` that supersedes the one before, so a page's history is that entry's
//! (`Engine::entry_history`), read under the rules `read_page` reads by — a caller who may
//! not read the page (or a document its current version cites) finds none, and a version
//! citing a document it may not read is left out.

use quarry_core::{Access, Error, Result};
use serde::Serialize;

use crate::engine::Engine;
use crate::kb::pages::{
    DocumentCache, PageRow, PageStatus, check_slug, field_str, page_status, page_title, tags_of,
};

/// One version of a page ([`Engine::page_history`]).
#[derive(Debug, Clone, Serialize)]
pub struct PageVersion {
    /// The version's id (what `base_version` names).
    pub version: String,
    /// When it was written (Unix ms).
    pub updated_at: i64,
    /// Who wrote it, from where.
    pub written_by: serde_json::Value,
    /// Its title.
    pub title: String,
    /// Its type.
    #[serde(rename = "type")]
    pub page_type: String,
    /// As written: draft, published or archived.
    pub status: PageStatus,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its Markdown.
    pub body: String,
    /// What it cited, as `<document id>:<first>-<last>`.
    pub sources: Vec<String>,
    /// Whether it is the page's current version.
    pub current: bool,
}

impl Engine {
    /// The versions of the page `slug` of `kb` this caller may read, newest first.
    /// `NotFound` when `read_page` would not find the page.
    pub fn page_history(&self, kb: &str, slug: &str) -> Result<Vec<PageVersion>> {
        self.require(Access::Read, "reading wiki pages")?;
        check_slug(slug)?;
        let base = self.knowledge_base(kb)?;
        let mut cache = DocumentCache::new();
        let row = match self.current_page(&base, slug)? {
            Some(row) if self.sources_visible(&row, &mut cache)? => row,
            _ => {
                return Err(Error::not_found(format!(
                    "no page '{slug}' in '{kb}': wiki_index lists the pages there are"
                )));
            }
        };
        let history = self.entry_history(&row.file)?;
        let ids: Vec<i64> = history.versions.iter().map(|f| f.row_id).collect();
        let mut sources = self.sources_of(&ids)?;
        let mut out = Vec::with_capacity(history.versions.len());
        for file in history.versions.into_iter().rev() {
            let version = PageRow {
                sources: sources.remove(&file.row_id).unwrap_or_default(),
                slug: slug.to_owned(),
                file,
            };
            // An older version may cite what this caller may not read: it is not shown.
            if !self.sources_visible(&version, &mut cache)? {
                continue;
            }
            let file = &version.file;
            out.push(PageVersion {
                version: file.id.clone(),
                updated_at: file.created_at,
                written_by: file
                    .entry
                    .as_ref()
                    .map(|e| e.provenance.clone())
                    .unwrap_or_default(),
                title: page_title(file),
                page_type: field_str(file, "page_type").unwrap_or_default(),
                status: page_status(file),
                tags: tags_of(file),
                body: self.page_body(file)?,
                sources: version
                    .sources
                    .iter()
                    .map(|s| format!("{}:{}-{}", s.file, s.line_start, s.line_end))
                    .collect(),
                current: file.id == row.file.id,
            });
        }
        Ok(out)
    }
}
