//! A read-only, path-addressed view of what a caller may read (issue 68): `ls`, `find`,
//! `grep` and (through [`Engine::get`]) `cat`, over the documents of folder collections and
//! knowledge bases, wiki pages among them (`<kb>/pages/<slug>.md`), by their display paths.
//!
//! The view is the search's: documents hidden from the caller by readers, outside its
//! token's knowledge bases, or knowledge entries not valid now (superseded versions) are not
//! listed, matched or counted. Everything is bounded: listings and matches are capped and
//! say when they were cut, a regex has a size limit, and matched lines are shortened.

use std::collections::BTreeMap;

use globset::GlobBuilder;
use quarry_core::{Error, Result};
use quarry_store::DocSummary;
use serde::Serialize;

use crate::engine::Engine;

/// Most entries `find` returns by default, and at most.
pub const FIND_LIMIT: (usize, usize) = (200, 2_000);
/// Most matches `grep` returns by default, and at most.
pub const GREP_LIMIT: (usize, usize) = (50, 500);
/// Most lines of context `grep` shows around a match.
pub const MAX_GREP_CONTEXT: usize = 3;
/// Characters of a matched line shown (the rest cut with `…`).
const LINE_CHARS: usize = 300;
/// Compiled size limit of a `grep` regex (bytes).
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Documents read from the store at a time while grepping.
const GREP_BATCH: usize = 100;

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrowseEntry {
    /// The display path (`collection/dir/file.md`); a folder's ends with `/`.
    pub path: String,
    /// `collection`, `folder`, `document` or `page` (a knowledge base's wiki page).
    pub kind: &'static str,
    /// A collection's or folder's documents, in all (below it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents: Option<usize>,
    /// A document's Markdown, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// A document's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A document's short id (`#abc123`), for `get` and citations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub docid: Option<String>,
}

/// What [`Engine::find`] found.
#[derive(Debug, Clone, Serialize)]
pub struct FindResult {
    /// The documents whose path matches, by path.
    pub entries: Vec<BrowseEntry>,
    /// How many match in all (more than `entries` when cut at the limit).
    pub total: usize,
}

/// A `grep` request.
#[derive(Debug, Clone, Default)]
pub struct GrepRequest {
    /// A regular expression (Rust `regex` syntax), matched line by line.
    pub pattern: String,
    /// Only documents under this display path (`kb` or `kb/pages`), or matching this glob.
    pub path: Option<String>,
    /// Case-insensitive.
    pub ignore_case: bool,
    /// Most matches (1 to [`GREP_LIMIT`]`.1`; 0: the default).
    pub limit: usize,
    /// Lines of context before and after each match (at most [`MAX_GREP_CONTEXT`]).
    pub context: usize,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrepMatch {
    /// The document's display path.
    pub path: String,
    /// The line's number (1-based), as `get`/`cat` count them.
    pub line: usize,
    /// The line (cut at 300 characters).
    pub text: String,
    /// Lines before it, nearest last.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
    /// Lines after it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

/// What [`Engine::grep`] found.
#[derive(Debug, Clone, Serialize)]
pub struct GrepResult {
    /// The matches, by path and line.
    pub matches: Vec<GrepMatch>,
    /// Documents searched.
    pub documents_searched: usize,
    /// Whether it stopped at the limit (more lines match).
    pub truncated: bool,
}

/// A page's file in a knowledge base: `pages/<slug>.md`.
fn entry_kind(s: &DocSummary) -> &'static str {
    if s.path.starts_with("pages/") {
        "page"
    } else {
        "document"
    }
}

fn document_entry(s: &DocSummary) -> BrowseEntry {
    BrowseEntry {
        path: s.display_path(),
        kind: entry_kind(s),
        documents: None,
        bytes: Some(s.body_bytes),
        title: Some(s.title.clone()),
        docid: Some(s.docid.clone()),
    }
}

/// `text` cut at [`LINE_CHARS`] characters.
fn shortened(text: &str) -> String {
    let mut out: String = text.chars().take(LINE_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// `path` without `./`, leading and trailing slashes and `qmd://`; `..` refused.
fn clean_path(path: &str) -> Result<String> {
    let path = path.trim();
    let path = path.strip_prefix("qmd://").unwrap_or(path);
    let path = path.trim_start_matches("./").trim_matches('/');
    if path.split('/').any(|s| s == "..") {
        return Err(Error::invalid(format!(
            "'{path}' climbs out with '..': paths are collection/path, as `ls` shows them"
        )));
    }
    Ok(path.to_owned())
}

fn glob_matcher(pattern: &str) -> Result<globset::GlobMatcher> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| Error::invalid(format!("invalid glob pattern {pattern:?}: {e}")))?
        .compile_matcher())
}

impl Engine {
    /// The documents this caller may read now, by display path (the search's view).
    fn browsable(&self) -> Result<Vec<DocSummary>> {
        let engine = self.for_one_request();
        let mut all = engine.store().document_summaries(engine.space())?;
        if let Some(allowed) = engine.allowed_names()? {
            all.retain(|d| allowed.contains(&d.collection));
        }
        if let Some(hidden) = engine.hidden_for_search()? {
            all.retain(|d| u64::try_from(d.id).is_ok_and(|id| !hidden.contains(&id)));
        }
        all.sort_by_key(|d| d.display_path());
        Ok(all)
    }

    /// What is at `path`: with no path, the collections and knowledge bases (each with its
    /// documents); else the folders (with their documents) and documents directly under it.
    /// `NotFound` when nothing this caller may read is there.
    pub fn ls(&self, path: &str) -> Result<Vec<BrowseEntry>> {
        let path = clean_path(path)?;
        let all = self.browsable()?;
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        let mut folders: BTreeMap<String, usize> = BTreeMap::new();
        let mut out = Vec::new();
        for s in &all {
            let display = s.display_path();
            if display == path {
                // `ls` of a document: that document.
                return Ok(vec![document_entry(s)]);
            }
            let Some(rest) = display.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((folder, _)) => *folders.entry(folder.to_owned()).or_default() += 1,
                None => out.push(document_entry(s)),
            }
        }
        if out.is_empty() && folders.is_empty() {
            return Err(Error::not_found(if path.is_empty() {
                "nothing to list: no collection or knowledge base holds a document you may read"
                    .to_owned()
            } else {
                format!(
                    "nothing at '{path}' that you may read: `ls` with no path lists the collections"
                )
            }));
        }
        let kind = if path.is_empty() {
            "collection"
        } else {
            "folder"
        };
        let mut entries: Vec<BrowseEntry> = folders
            .into_iter()
            .map(|(name, n)| BrowseEntry {
                path: format!("{prefix}{name}/"),
                kind,
                documents: Some(n),
                bytes: None,
                title: None,
                docid: None,
            })
            .collect();
        entries.extend(out);
        Ok(entries)
    }

    /// The documents whose display path (or path in its collection) matches the glob
    /// `pattern` (`kb/pages/*.md`, `**/*.pdf`), by path, at most `limit` (0: 200; at most
    /// 2,000).
    pub fn find(&self, pattern: &str, limit: usize) -> Result<FindResult> {
        let pattern = clean_path(pattern)?;
        if pattern.is_empty() {
            return Err(Error::invalid("give a glob pattern, such as 'kb/**/*.md'"));
        }
        let limit = match limit {
            0 => FIND_LIMIT.0,
            n => n.min(FIND_LIMIT.1),
        };
        let glob = glob_matcher(&pattern)?;
        let found: Vec<BrowseEntry> = self
            .browsable()?
            .iter()
            .filter(|d| glob.is_match(d.display_path()) || glob.is_match(&d.path))
            .map(document_entry)
            .collect();
        let total = found.len();
        Ok(FindResult {
            entries: found.into_iter().take(limit).collect(),
            total,
        })
    }

    /// The lines matching `req.pattern` in the documents under `req.path` (all this caller
    /// may read when none), by path and line, at most `req.limit`.
    pub fn grep(&self, req: &GrepRequest) -> Result<GrepResult> {
        if req.pattern.is_empty() {
            return Err(Error::invalid("give a pattern to search for"));
        }
        let regex = regex::RegexBuilder::new(&req.pattern)
            .case_insensitive(req.ignore_case)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| Error::invalid(format!("invalid regular expression: {e}")))?;
        let limit = match req.limit {
            0 => GREP_LIMIT.0,
            n => n.min(GREP_LIMIT.1),
        };
        let context = req.context.min(MAX_GREP_CONTEXT);
        let mut docs = self.browsable()?;
        if let Some(path) = &req.path {
            let path = clean_path(path)?;
            if path.contains(['*', '?', '[', '{']) {
                let glob = glob_matcher(&path)?;
                docs.retain(|d| glob.is_match(d.display_path()) || glob.is_match(&d.path));
            } else if !path.is_empty() {
                let under = format!("{path}/");
                docs.retain(|d| {
                    let display = d.display_path();
                    display == path || display.starts_with(&under)
                });
            }
            if docs.is_empty() {
                return Err(Error::not_found(format!(
                    "no document you may read is at '{path}': `ls` shows what is there"
                )));
            }
        }
        let mut result = GrepResult {
            matches: Vec::new(),
            documents_searched: 0,
            truncated: false,
        };
        for batch in docs.chunks(GREP_BATCH) {
            let ids: Vec<i64> = batch.iter().map(|d| d.id).collect();
            let mut bodies = self.store().documents_by_ids(&ids)?;
            // The store answers in its own order; grep answers by path.
            bodies.sort_by_key(|d| d.display_path());
            for doc in bodies {
                result.documents_searched += 1;
                let lines: Vec<&str> = quarry_core::lines(&doc.body).collect();
                for (i, line) in lines.iter().enumerate() {
                    if !regex.is_match(line) {
                        continue;
                    }
                    if result.matches.len() == limit {
                        result.truncated = true;
                        return Ok(result);
                    }
                    let around = |range: std::ops::Range<usize>| -> Vec<String> {
                        lines[range].iter().map(|l| shortened(l)).collect()
                    };
                    result.matches.push(GrepMatch {
                        path: doc.display_path(),
                        line: i + 1,
                        text: shortened(line),
                        before: around(i.saturating_sub(context)..i),
                        after: around(i + 1..(i + 1 + context).min(lines.len())),
                    });
                }
            }
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_and_dots_refused() {
        assert_eq!(clean_path(" ./kb/pages/ ").unwrap(), "kb/pages");
        assert_eq!(clean_path("qmd://kb/a.md").unwrap(), "kb/a.md");
        assert_eq!(clean_path("/").unwrap(), "");
        assert!(clean_path("kb/../other").is_err());
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "é".repeat(400);
        let cut = shortened(&long);
        assert_eq!(cut.chars().count(), LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(shortened("short"), "short");
    }
}
