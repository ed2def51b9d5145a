//! Retrieval by path, docid or glob (seed `get`, `multi_get`, `qmd://` resources).
//!
//! Documents are served from the store, never from disk, so no path a caller passes can
//! read a file outside the indexed collections.

use globset::GlobBuilder;
use quarry_core::{
    Document, Error, Result, add_line_numbers, context_for, decode_uri_path, encode_uri_path,
    levenshtein,
};
use quarry_store::DocSummary;
use serde::Serialize;

use crate::engine::Engine;

/// Default `max_bytes` of `multi_get` (10 KB).
pub(crate) const DEFAULT_MAX_BYTES: u64 = 10_240;

#[derive(Debug, Clone, Default)]
/// What `get` shows: one document, or a line range of it.
pub struct GetRequest {
    /// Display path, suffix of one, `#docid`, `qmd://` URI; `:N` suffix sets the first line.
    pub file: String,
    /// First line to show (1-based); a `:N` suffix of `file` wins.
    pub from_line: Option<usize>,
    /// Show at most this many lines.
    pub max_lines: Option<usize>,
    /// Prefix each line with its number (`N: `).
    pub line_numbers: bool,
}

/// A document (or a line range of it) ready to show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DocumentView {
    /// `qmd://` + the display path, each segment percent-encoded.
    pub uri: String,
    /// Display path.
    pub name: String,
    /// The document's title.
    pub title: String,
    /// The document's short id (`#abc123`).
    pub docid: String,
    #[serde(rename = "mimeType")]
    /// Always `text/markdown`.
    pub mime_type: &'static str,
    /// The text, prefixed by `<!-- Context: … -->` when a context applies.
    pub text: String,
    /// The context that applies to the document, if any.
    pub context: Option<String>,
    /// First line shown (1-based) and how many lines the document has.
    pub from_line: usize,
    /// Lines the document has.
    pub total_lines: usize,
}

#[derive(Debug, Clone)]
/// What `multi_get` shows: documents by glob or comma list.
pub struct MultiGetRequest {
    /// Glob over collection-relative or display paths, or a comma-separated list of files.
    pub pattern: String,
    /// Show at most this many lines per document.
    pub max_lines: Option<usize>,
    /// Skip documents larger than this many bytes.
    pub max_bytes: u64,
    /// Prefix each line with its number (`N: `).
    pub line_numbers: bool,
}

impl MultiGetRequest {
    /// A request for `pattern` with the defaults (10 KB per document, every line).
    pub fn new(pattern: impl Into<String>) -> Self {
        MultiGetRequest {
            pattern: pattern.into(),
            max_lines: None,
            max_bytes: DEFAULT_MAX_BYTES,
            line_numbers: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
/// One document of a `multi_get` answer.
pub enum MultiGetItem {
    /// The document (or its first lines).
    Document(DocumentView),
    /// Over `max_bytes`: not read; `text` is the seed's `[SKIPPED: …]` notice.
    Skipped {
        /// Display path.
        file: String,
        /// The document's size in bytes.
        bytes: u64,
        /// The `[SKIPPED: …]` notice.
        text: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
/// The documents `multi_get` found.
pub struct MultiGetResult {
    /// The documents, in path order.
    pub items: Vec<MultiGetItem>,
    /// Names from a comma list that matched nothing.
    pub errors: Vec<String>,
}

impl Engine {
    /// One document, whole or a line range.
    pub fn get(&self, req: &GetRequest) -> Result<DocumentView> {
        let (name, line_from_name) = split_line_suffix(&req.file);
        let doc = match self.resolve(name) {
            Ok(d) => d,
            // `notes.md:12` could also be a real file name containing a colon.
            Err(e) if line_from_name.is_some() => match self.resolve(&req.file) {
                Ok(d) => return self.view(&d, req.from_line, req.max_lines, req.line_numbers),
                Err(_) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        self.view(
            &doc,
            line_from_name.or(req.from_line),
            req.max_lines,
            req.line_numbers,
        )
    }

    /// Several documents by glob or comma list; large files are skipped with a notice.
    pub fn multi_get(&self, req: &MultiGetRequest) -> Result<MultiGetResult> {
        let pattern = req.pattern.trim();
        if pattern.is_empty() {
            return Err(Error::invalid("pattern must not be empty"));
        }
        let all = self.visible_summaries()?;
        let mut errors = Vec::new();
        // A glob wins over a comma list, so `2025-05-0{1,2}.md` is a glob (as in QMD).
        let selected: Vec<DocSummary> = if pattern.contains(['*', '?', '[', '{']) {
            check_relative(pattern)?;
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| Error::invalid(format!("invalid glob pattern {pattern:?}: {e}")))?
                .compile_matcher();
            // `journals/2025-05*.md` (the seed's example) is relative to a collection;
            // `notes/journals/*.md` names the collection too. Either form matches.
            all.iter()
                .filter(|d| glob.is_match(&d.path) || glob.is_match(d.display_path()))
                .cloned()
                .collect()
        } else if pattern.contains(',') {
            let mut out = Vec::new();
            for name in pattern.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match self.resolve_in(name, &all) {
                    Ok(s) => out.push(s),
                    Err(_) => errors.push(format!("File not found: {name}")),
                }
            }
            out
        } else {
            vec![self.resolve_in(pattern, &all)?]
        };
        if selected.is_empty() {
            return Err(Error::not_found(format!(
                "No files matched pattern: {pattern}"
            )));
        }
        let mut items = Vec::with_capacity(selected.len());
        for s in selected {
            let file = s.display_path();
            if s.body_bytes > req.max_bytes {
                let kb = (s.body_bytes as f64 / 1024.0).round() as u64;
                items.push(MultiGetItem::Skipped {
                    text: format!(
                        "[SKIPPED: {file} - File too large ({kb}KB). Use 'quarry get' with file=\"{file}\" to retrieve.]"
                    ),
                    file,
                    bytes: s.body_bytes,
                });
                continue;
            }
            let Some(doc) = self.store().documents_by_ids(&[s.id])?.into_iter().next() else {
                errors.push(format!("File not found: {file}"));
                continue;
            };
            let mut view = self.view(&doc, None, req.max_lines, req.line_numbers)?;
            if let Some(max) = req.max_lines
                && view.total_lines > max
            {
                view.text.push_str(&format!(
                    "\n\n[... truncated {} more lines]",
                    view.total_lines - max
                ));
            }
            items.push(MultiGetItem::Document(view));
        }
        Ok(MultiGetResult { items, errors })
    }

    /// Resolves a `qmd://` resource URI (seed: exact match, then suffix match; line numbers on).
    pub fn read_resource(&self, uri: &str) -> Result<DocumentView> {
        if !uri.starts_with("qmd://") {
            return Err(Error::invalid(format!("not a qmd:// URI: {uri}")));
        }
        let doc = self.resolve(uri)?;
        self.view(&doc, None, None, true)
    }

    fn view(
        &self,
        doc: &Document,
        from_line: Option<usize>,
        max_lines: Option<usize>,
        line_numbers: bool,
    ) -> Result<DocumentView> {
        let name = doc.display_path();
        let lines: Vec<&str> = quarry_core::lines(&doc.body).collect();
        let total = lines.len();
        let from = from_line.unwrap_or(1);
        if from == 0 {
            return Err(Error::invalid("line numbers start at 1"));
        }
        if from > total.max(1) {
            return Err(Error::invalid(format!(
                "line {from} is past the end of {name} ({total} lines)"
            )));
        }
        let end = match max_lines {
            Some(0) => return Err(Error::invalid("max lines must be at least 1")),
            Some(n) => (from - 1 + n).min(total.max(from)),
            None => total.max(from),
        };
        let slice = lines[from - 1..end.min(lines.len())].join("\n");
        let body = if line_numbers {
            add_line_numbers(&slice, from)
        } else {
            slice
        };
        let contexts = self.contexts()?;
        let context = context_for(&contexts, &name).map(|c| c.text.clone());
        let text = match &context {
            Some(c) => format!("<!-- Context: {c} -->\n\n{body}"),
            None => body,
        };
        Ok(DocumentView {
            uri: format!("qmd://{}", encode_uri_path(&name)),
            name,
            title: doc.title.clone(),
            docid: doc.docid.clone(),
            mime_type: "text/markdown",
            text,
            context,
            from_line: from,
            total_lines: total,
        })
    }

    /// Finds one document by docid, display path, absolute path inside a collection, or
    /// unique suffix; otherwise a not-found error with the three closest paths.
    pub(crate) fn resolve(&self, name: &str) -> Result<Document> {
        let name = name.trim();
        if name.is_empty() {
            return Err(Error::invalid("file must not be empty"));
        }
        if let Some(hex) = name.strip_prefix('#') {
            let allowed = self.allowed_names()?;
            let hidden = self.hidden_in(None)?;
            return self
                .store()
                .document_by_docid(self.space(), &format!("#{}", hex.to_ascii_lowercase()))?
                .filter(|d| allowed.as_ref().is_none_or(|a| a.contains(&d.collection)))
                .filter(|d| hidden.as_ref().is_none_or(|h| !h.hides(d.id)))
                .ok_or_else(|| Error::not_found(format!("Document not found: {name}")));
        }
        let all = self.visible_summaries()?;
        let s = self.resolve_in(name, &all)?;
        self.store()
            .documents_by_ids(&[s.id])?
            .into_iter()
            .next()
            .ok_or_else(|| Error::not_found(format!("Document not found: {name}")))
    }

    fn resolve_in(&self, name: &str, all: &[DocSummary]) -> Result<DocSummary> {
        if let Some(hex) = name.strip_prefix('#') {
            let want = format!("#{}", hex.to_ascii_lowercase());
            return all
                .iter()
                .find(|d| d.docid == want)
                .cloned()
                .ok_or_else(|| Error::not_found(format!("Document not found: {name}")));
        }
        // A `qmd://` URI is percent-encoded per segment (see `DocumentView::uri`).
        let decoded;
        let name = match name.strip_prefix("qmd://") {
            Some(rest) => {
                decoded = decode_uri_path(rest)?;
                decoded.as_str()
            }
            None => name,
        };
        let display = if name.starts_with('/') {
            self.absolute_to_display(name)?
        } else {
            check_relative(name)?;
            name.trim_start_matches("./").to_owned()
        };
        // Names are stored in NFC (`quarry_ingest::nfc`): so is the one asked for.
        let display = quarry_ingest::nfc(&display);
        // A knowledge base's name names one document per set of readers: a caller who
        // reads two of one path names one by its docid.
        let exact: Vec<&DocSummary> = all.iter().filter(|d| d.display_path() == display).collect();
        let matches = if exact.is_empty() {
            let suffix = format!("/{display}");
            all.iter()
                .filter(|d| d.display_path().ends_with(&suffix))
                .collect()
        } else {
            exact
        };
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(Error::not_found(not_found_message(name, all))),
            many => Err(Error::invalid(format!(
                "'{name}' matches {} documents; use one of:\n{}",
                many.len(),
                many.iter()
                    .take(10)
                    .map(|d| format!("  - {} ({})", d.display_path(), d.docid))
                    .collect::<Vec<_>>()
                    .join("\n")
            ))),
        }
    }

    /// Summaries of the documents this handle may read.
    fn visible_summaries(&self) -> Result<Vec<DocSummary>> {
        let mut all = self.store().document_summaries(self.space())?;
        if let Some(allowed) = self.allowed_names()? {
            all.retain(|d| allowed.contains(&d.collection));
        }
        // Hidden documents are not found, listed, matched by a glob or suggested.
        if let Some(hidden) = self.hidden_in(None)? {
            all.retain(|d| !hidden.hides(d.id));
        }
        Ok(all)
    }

    /// Maps an absolute filesystem path inside a collection root to its display path.
    fn absolute_to_display(&self, abs: &str) -> Result<String> {
        check_no_dots(abs)?;
        for c in self.collections()? {
            if let Some(rel) = abs.strip_prefix(c.path.as_str())
                && let Some(rel) = rel.strip_prefix('/')
            {
                return Ok(format!("{}/{rel}", c.name));
            }
        }
        Err(Error::not_found(format!(
            "Document not found: {abs} is outside every collection"
        )))
    }
}

fn check_no_dots(path: &str) -> Result<()> {
    if path.split('/').any(|s| s == "..") {
        return Err(Error::invalid(format!(
            "path {path:?} must not contain '..': documents are addressed by collection/relative/path"
        )));
    }
    Ok(())
}

fn check_relative(path: &str) -> Result<()> {
    check_no_dots(path)?;
    if path.starts_with('/') || path.contains('\\') || path.contains('\0') {
        return Err(Error::invalid(format!(
            "path {path:?} must be a collection/relative/path"
        )));
    }
    Ok(())
}

/// `name:120` → (`name`, Some(120)).
fn split_line_suffix(file: &str) -> (&str, Option<usize>) {
    if let Some((name, n)) = file.rsplit_once(':')
        && !name.is_empty()
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && let Ok(line) = n.parse()
    {
        return (name, Some(line));
    }
    (file, None)
}

fn not_found_message(name: &str, all: &[DocSummary]) -> String {
    let mut scored: Vec<(usize, String)> = all
        .iter()
        .map(|d| {
            let p = d.display_path();
            let file_name = d.path.rsplit('/').next().unwrap_or(&d.path);
            let query_name = name.rsplit('/').next().unwrap_or(name);
            let dist = levenshtein(name, &p)
                .min(levenshtein(name, &d.path))
                .min(levenshtein(query_name, file_name) + 1);
            (dist, p)
        })
        .collect();
    scored.sort();
    let mut msg = format!("Document not found: {name}");
    if !scored.is_empty() {
        msg.push_str("\n\nDid you mean one of these?");
        for (_, p) in scored.into_iter().take(3) {
            msg.push_str(&format!("\n  - {p}"));
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_suffix() {
        assert_eq!(split_line_suffix("a/b.md:120"), ("a/b.md", Some(120)));
        assert_eq!(split_line_suffix("a/b.md"), ("a/b.md", None));
        assert_eq!(split_line_suffix("a:b.md"), ("a:b.md", None));
        assert_eq!(split_line_suffix(":12"), (":12", None));
    }

    #[test]
    fn traversal_is_refused() {
        assert!(check_relative("../../etc/passwd").is_err());
        assert!(check_relative("notes/../../x").is_err());
        assert!(check_relative("/etc/passwd").is_err());
        assert!(check_relative("notes/a.md").is_ok());
    }
}
