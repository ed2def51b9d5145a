//! A knowledge base's wiki as files (issue 68 item 6): a Git-able Markdown tree — `index.md`,
//! `log.md` and `pages/<slug>.md` whose front matter carries the page's sources — that
//! imports back into the same pages, and an Agent Skills folder (`SKILL.md` with `name` and
//! `description`, the pages as `references/<slug>.md`).
//!
//! Front matter is YAML in which every value is written as JSON (a YAML subset), so any
//! YAML reader reads it and the import reads it back exactly. A source names the document by
//! id and by file name: an import into another home, where ids differ, finds the document by
//! name; it refuses a page whose cited passage is no longer what was exported (importing it
//! would pass a stale page off as current) unless told to cite the passages as they are now.

use std::collections::BTreeMap;

use quarry_core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::Engine;
use crate::kb::pages::{
    Citation, CitedLines, DocumentCache, PageRow, PageStatus, PageWrite, field_str, first_sentence,
    lines_of, page_status, page_title, tags_of,
};

/// One file of an exported wiki.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WikiFile {
    /// Its path in the tree (`pages/launch.md`), always relative, `/`-separated.
    pub path: String,
    /// Its text.
    pub content: String,
}

/// The shape of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WikiExport {
    /// `index.md`, `log.md`, `pages/<slug>.md`: imports back.
    Tree,
    /// An Agent Skills folder: `SKILL.md` and `references/<slug>.md`.
    Skill,
}

/// What [`Engine::import_wiki`] did, page by page.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WikiImport {
    /// Pages written (created, or a new version), by slug.
    pub written: Vec<String>,
    /// Pages already as the tree has them.
    pub unchanged: Vec<String>,
    /// Pages not written, each with why and what to do.
    pub refused: Vec<ImportRefusal>,
}

/// A page an import did not write.
#[derive(Debug, Clone, Serialize)]
pub struct ImportRefusal {
    /// The file.
    pub path: String,
    /// Why, and what to do.
    pub reason: String,
}

/// A source as the front matter carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TreeSource {
    /// The document's id where it was exported.
    document: String,
    /// Its file name in the knowledge base (found by it where the id is unknown).
    name: String,
    /// First and last line cited.
    lines: [u32; 2],
    /// SHA-256 of the cited passage when exported.
    sha256: String,
    /// The page or slide the lines are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    page: Option<u32>,
}

/// Longest `description` the Agent Skills format allows.
const SKILL_DESCRIPTION_CHARS: usize = 1024;
/// Longest skill `name`.
const SKILL_NAME_CHARS: usize = 64;

/// `key: <JSON>` lines between `---` fences, then the body.
fn with_front_matter(fields: &[(&str, Value)], body: &str) -> String {
    let mut out = String::from("---\n");
    for (key, value) in fields {
        out.push_str(&format!("{key}: {value}\n"));
    }
    out.push_str("---\n\n");
    out.push_str(body.trim_end());
    out.push('\n');
    out
}

/// The front matter (each value JSON) and the body of an exported page.
fn read_front_matter(text: &str) -> Result<(BTreeMap<String, Value>, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| Error::invalid("no front matter: the file must start with '---'"))?;
    let (head, body) = rest
        .split_once("\n---\n")
        .or_else(|| rest.split_once("\n---\r\n"))
        .ok_or_else(|| Error::invalid("the front matter has no closing '---'"))?;
    let mut fields = BTreeMap::new();
    for line in head.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line.split_once(':').ok_or_else(|| {
            Error::invalid(format!("front matter line {line:?} is not 'key: value'"))
        })?;
        let value = serde_json::from_str(value.trim()).map_err(|e| {
            Error::invalid(format!(
                "front matter '{}' is not a JSON value ({e}): keep the values as exported",
                key.trim()
            ))
        })?;
        fields.insert(key.trim().to_owned(), value);
    }
    Ok((fields, body.trim_start_matches(['\r', '\n']).to_owned()))
}

/// `name` as an Agent Skills name: lower-case letters, digits and single hyphens.
fn skill_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out: String = out
        .trim_end_matches('-')
        .chars()
        .take(SKILL_NAME_CHARS)
        .collect();
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() {
        "knowledge".into()
    } else {
        out
    }
}

/// A page file of an export, as read back.
struct ImportedPage {
    slug: String,
    title: String,
    page_type: String,
    status: PageStatus,
    tags: Vec<String>,
    sources: Vec<TreeSource>,
    body: String,
}

fn imported_page(file: &WikiFile) -> Result<ImportedPage> {
    let (fields, body) = read_front_matter(&file.content)?;
    let text = |key: &str| -> Result<String> {
        fields
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Error::invalid(format!("front matter needs '{key}' (a string)")))
    };
    let slug = text("slug")?;
    let expected = format!("pages/{slug}.md");
    if file.path != expected {
        return Err(Error::invalid(format!(
            "its slug is '{slug}', so it must be {expected}: rename the file or the slug"
        )));
    }
    let tags = match fields.get("tags") {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| Error::invalid(format!("'tags' must be a list of strings: {e}")))?,
    };
    let sources = match fields.get("sources") {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            Error::invalid(format!(
                "'sources' must be a list of {{document, name, lines, sha256}}: {e}"
            ))
        })?,
    };
    Ok(ImportedPage {
        slug,
        title: text("title")?,
        page_type: text("type")?,
        status: PageStatus::parse(&text("status")?)?,
        tags,
        sources,
        body,
    })
}

impl Engine {
    /// The wiki of `kb` as files, as far as this caller may read it: a tree that imports
    /// back ([`WikiExport::Tree`]) or an Agent Skills folder ([`WikiExport::Skill`]).
    pub fn export_wiki(&self, kb: &str, shape: WikiExport) -> Result<Vec<WikiFile>> {
        self.require(quarry_core::Access::Read, "reading wiki pages")?;
        let base = self.knowledge_base(kb)?;
        let mut cache = DocumentCache::for_listing();
        let rows = self.visible_pages(&base, &mut cache)?;
        let mut pages = Vec::with_capacity(rows.len());
        for row in &rows {
            pages.push((row, self.page_body(&row.file)?));
        }
        match shape {
            WikiExport::Tree => self.wiki_tree(&base.name, &pages, &mut cache),
            WikiExport::Skill => Ok(skill_folder(&base.name, &base.description, &pages)),
        }
    }

    fn wiki_tree(
        &self,
        kb: &str,
        pages: &[(&PageRow, String)],
        cache: &mut DocumentCache,
    ) -> Result<Vec<WikiFile>> {
        let mut files = Vec::with_capacity(pages.len() + 2);
        let mut index = format!(
            "# {kb}: wiki index\n\nExported from Quarry. `quarry kb import-wiki {kb} DIR` writes these pages back.\n"
        );
        let mut by_type: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut log = Vec::new();
        for (row, body) in pages {
            let file = &row.file;
            let mut sources = Vec::with_capacity(row.sources.len());
            for s in &row.sources {
                let name = match self.cited_document(&s.file, cache) {
                    Ok(Some((f, _))) => f.file_name,
                    _ => String::new(),
                };
                sources.push(TreeSource {
                    document: s.file.clone(),
                    name,
                    lines: [s.line_start, s.line_end],
                    sha256: s.passage_sha256.clone(),
                    page: s.page,
                });
            }
            let title = page_title(file);
            let page_type = field_str(file, "page_type").unwrap_or_default();
            files.push(WikiFile {
                path: format!("pages/{}.md", row.slug),
                content: with_front_matter(
                    &[
                        ("slug", json!(row.slug)),
                        ("title", json!(title)),
                        ("type", json!(page_type)),
                        ("status", json!(page_status(file).as_str())),
                        ("tags", json!(tags_of(file))),
                        ("version", json!(file.id)),
                        ("sources", json!(sources)),
                    ],
                    body,
                ),
            });
            by_type.entry(page_type).or_default().push(format!(
                "- [{title}](pages/{}.md) — {}",
                row.slug,
                first_sentence(body)
            ));
            for version in self.page_history(kb, &row.slug)? {
                let who = ["user", "token", "via"]
                    .iter()
                    .filter_map(|k| version.written_by.get(*k).and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(", ");
                log.push((
                    version.updated_at,
                    format!(
                        "- {} [[{}]] version {} ({who})",
                        quarry_core::iso8601_millis(version.updated_at),
                        row.slug,
                        version.version
                    ),
                ));
            }
        }
        for (page_type, lines) in &by_type {
            index.push_str(&format!("\n## {page_type}\n\n{}\n", lines.join("\n")));
        }
        log.sort();
        let log_text = format!(
            "# {kb}: wiki log\n\nEvery version of every page, oldest first.\n\n{}\n",
            log.into_iter()
                .map(|(_, l)| l)
                .collect::<Vec<_>>()
                .join("\n")
        );
        files.insert(
            0,
            WikiFile {
                path: "index.md".into(),
                content: index,
            },
        );
        files.insert(
            1,
            WikiFile {
                path: "log.md".into(),
                content: log_text,
            },
        );
        Ok(files)
    }

    /// Writes the pages of an exported tree (`pages/<slug>.md`; `index.md`, `log.md` and
    /// other files are ignored) into `kb`, each on its current version: unchanged pages are
    /// left alone, a page whose cited passage changed since the export is refused unless
    /// `recite` (then it cites the lines as they are now). Bad files are refused one by
    /// one, with why; the others are written.
    pub fn import_wiki(
        &self,
        kb: &str,
        files: &[WikiFile],
        recite: bool,
        provenance: &serde_json::Map<String, Value>,
    ) -> Result<WikiImport> {
        self.require(quarry_core::Access::Write, "writing wiki pages")?;
        let base = self.knowledge_base_for_writing(kb)?;
        let mut report = WikiImport::default();
        let mut cache = DocumentCache::new();
        for file in files.iter().filter(|f| f.path.starts_with("pages/")) {
            let refuse = |report: &mut WikiImport, reason: String| {
                report.refused.push(ImportRefusal {
                    path: file.path.clone(),
                    reason,
                });
            };
            let page = match imported_page(file) {
                Ok(p) => p,
                Err(e) => {
                    refuse(&mut report, e.to_string());
                    continue;
                }
            };
            let mut citations = Vec::with_capacity(page.sources.len());
            let mut problem = None;
            for (i, s) in page.sources.iter().enumerate() {
                match self.import_citation(&base, s, recite, &mut cache) {
                    Ok(c) => citations.push(c),
                    Err(e) => {
                        problem = Some(format!("source {}: {e}", i + 1));
                        break;
                    }
                }
            }
            if let Some(reason) = problem {
                refuse(&mut report, reason);
                continue;
            }
            let current = self.current_page(&base, &page.slug)?;
            if let Some(row) = &current
                && self.page_body(&row.file)?.trim_end() == page.body.trim_end()
                && page_title(&row.file) == page.title
                && field_str(&row.file, "page_type").as_deref() == Some(page.page_type.as_str())
                && page_status(&row.file) == page.status
                && tags_of(&row.file) == page.tags
                && row.sources.len() == citations.len()
                && row.sources.iter().zip(&citations).all(|(s, c)| {
                    c.document == s.file && c.lines == CitedLines::Range(s.line_start, s.line_end)
                })
            {
                report.unchanged.push(page.slug);
                continue;
            }
            let write = PageWrite {
                slug: page.slug.clone(),
                title: page.title,
                page_type: page.page_type,
                body: page.body,
                status: page.status,
                tags: page.tags,
                sources: citations,
                base_version: current.map(|r| r.file.id),
                provenance: provenance.clone(),
            };
            match self.write_page(kb, write) {
                Ok(_) => report.written.push(page.slug),
                Err(e @ (Error::InvalidInput(_) | Error::NotFound(_) | Error::Conflict(_))) => {
                    refuse(&mut report, e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    /// The citation an exported source makes here: its document by id, else by file name in
    /// `base`; its lines, refused when their text is not what was exported (unless `recite`).
    fn import_citation(
        &self,
        base: &quarry_store::KnowledgeBase,
        s: &TreeSource,
        recite: bool,
        cache: &mut DocumentCache,
    ) -> Result<Citation> {
        let by_id = match self.cited_document(&s.document, cache) {
            Ok(Some((file, doc))) if file.collection_id == base.collection_id => Some(doc),
            Ok(_) | Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        let (id, doc) = match by_id {
            Some(doc) => (s.document.clone(), doc),
            None => {
                let named = self
                    .store()
                    .kb_file(base.collection_id, &s.name)?
                    .filter(|f| !s.name.is_empty() && self.may_read_file(f))
                    .ok_or_else(|| {
                        Error::not_found(format!(
                            "no document '{}' (id {}) you may read in this knowledge base: upload it first",
                            s.name, s.document
                        ))
                    })?;
                let doc = self.converted_document(&named)?;
                (named.id, doc)
            }
        };
        let [from, to] = s.lines;
        let now = lines_of(&doc.body, from, to).unwrap_or_default();
        if !recite && quarry_core::sha256_hex(now.as_bytes()) != s.sha256 {
            return Err(Error::invalid(format!(
                "lines {from}-{to} of '{}' are not the passage exported (it changed since): \
                 rewrite the page from the document as it is, or import with --recite to cite \
                 the lines as they are now",
                doc.title
            )));
        }
        Ok(Citation {
            document: id,
            lines: CitedLines::Range(from, to),
        })
    }
}

/// An Agent Skills folder: `SKILL.md` (name, description, how to use the pages, their
/// index) and the pages as reference files.
fn skill_folder(kb: &str, description: &str, pages: &[(&PageRow, String)]) -> Vec<WikiFile> {
    let titles: Vec<String> = pages.iter().map(|(r, _)| page_title(&r.file)).collect();
    let mut about = format!(
        "Knowledge compiled from the '{kb}' knowledge base{}: {} page(s)",
        if description.trim().is_empty() {
            String::new()
        } else {
            format!(" ({})", description.trim())
        },
        pages.len()
    );
    if !titles.is_empty() {
        about.push_str(&format!(" on {}", titles.join(", ")));
    }
    about.push_str(". Use it when a task needs what these pages say.");
    let description: String = about.chars().take(SKILL_DESCRIPTION_CHARS).collect();
    let mut body = format!(
        "# {kb}\n\nThese pages were written from the documents of the '{kb}' knowledge base, each citing the passages it came from. \
         Read the page that matches the task from `references/`; a page's sources name the document and lines it relies on.\n\n## Pages\n\n"
    );
    let mut files = Vec::with_capacity(pages.len() + 1);
    for ((row, text), title) in pages.iter().zip(&titles) {
        body.push_str(&format!(
            "- [{title}](references/{}.md): {}\n",
            row.slug,
            first_sentence(text)
        ));
        files.push(WikiFile {
            path: format!("references/{}.md", row.slug),
            content: format!("# {title}\n\n{}\n", text.trim()),
        });
    }
    files.insert(
        0,
        WikiFile {
            path: "SKILL.md".into(),
            content: with_front_matter(
                &[
                    ("name", json!(skill_name(kb))),
                    ("description", json!(description)),
                ],
                &body,
            ),
        },
    );
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_round_trips_through_json_values() {
        let text = with_front_matter(
            &[
                ("title", json!("Launch: \"spring\"")),
                ("tags", json!(["a", "b"])),
                (
                    "sources",
                    json!([{"document": "d1", "name": "x.md", "lines": [1, 2], "sha256": "ab"}]),
                ),
            ],
            "# Body\n\ntext",
        );
        let (fields, body) = read_front_matter(&text).unwrap();
        assert_eq!(fields["title"], json!("Launch: \"spring\""));
        assert_eq!(fields["tags"], json!(["a", "b"]));
        assert_eq!(body, "# Body\n\ntext\n");
        assert!(read_front_matter("no fences").is_err());
        assert!(read_front_matter("---\ntitle: not json\n---\n").is_err());
    }

    #[test]
    fn skill_names_are_lower_case_words_and_hyphens() {
        assert_eq!(
            skill_name("Harbour Handbook (2026)"),
            "harbour-handbook-2026"
        );
        assert_eq!(skill_name("知识"), "knowledge");
        assert_eq!(skill_name(&"a".repeat(80)).len(), SKILL_NAME_CHARS);
    }
}
