//! Wiki pages (issue 68): Markdown pages an agent writes in a knowledge base, each citing the
//! passages it came from, so that Quarry can keep them honest.
//!
//! A page is a knowledge entry keyed `page:<slug>`: its versions are the key's supersede
//! chain, each with who wrote it, and each version's citations are stored with it
//! ([`quarry_store::PageSource`]: the cited file, lines, the passage's text and hashes).
//! Whether a page is stale is read, never stored: a cited passage that is no longer in its
//! document as the document is now — changed by an upload, a source sync or a curation edit,
//! or gone with its document — makes the page stale, on every node at once, with the reason,
//! and no model is involved. A passage that only moved keeps the page current.
//!
//! A page's readers are those who may read every document it cites (the intersection of
//! their readers), so a page never tells a caller what its sources would not; one citing a
//! document the caller cannot see at all is not found.

use std::collections::{BTreeMap, HashMap, HashSet};

use quarry_core::{Access, Document, Error, Result};
use quarry_metadata::{Metadata, Value};
use quarry_store::{FileFilter, KbFile, KnowledgeBase, PageSource};
use serde::Serialize;

use crate::engine::Engine;
use crate::kb::entries::{EntryExtras, EntryOptions};
use crate::kb::notes::{NewNote, NoteFormat};

/// The key prefix of a page's entries.
pub const PAGE_KEY_PREFIX: &str = "page:";
/// The page types Quarry names; any other lower-case word is accepted too.
pub const PAGE_TYPES: [&str; 8] = [
    "summary",
    "entity",
    "concept",
    "comparison",
    "how-to",
    "index",
    "log",
    "instructions",
];
/// The slug of a knowledge base's instructions page: what its pages are for, how they are
/// named and written. `wiki_index` hands it to every agent that starts there.
pub const INSTRUCTIONS_SLUG: &str = "instructions";
/// The slug of the page `wiki_log` appends to.
pub const LOG_SLUG: &str = "log";
/// Most characters of the instructions page `wiki_index` carries.
const INSTRUCTIONS_CHARS: usize = 4_000;
/// Page types that need neither sources nor links to them (they are about the wiki).
const WIKI_TYPES: [&str; 3] = ["index", "log", "instructions"];
/// Most passages one page cites.
pub const MAX_PAGE_SOURCES: usize = 50;
/// Most lines one citation spans.
pub const MAX_CITED_LINES: u32 = 400;
const MAX_SLUG_CHARS: usize = 100;
const MAX_TYPE_CHARS: usize = 40;
/// Most pages one `wiki_index` page lists.
pub const MAX_INDEX_LIMIT: usize = 200;
/// Where the stored Markdown's list of citations starts (left out of `body`).
const SOURCES_MARK: &str = "\n\n<!-- quarry:page-sources -->\n";

/// A written page's state beside staleness, which is read ([`PageView::stale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageStatus {
    /// Work in progress.
    Draft,
    /// Meant to be read.
    Published,
    /// Kept for the record.
    Archived,
}

impl PageStatus {
    /// `draft`, `published` or `archived`.
    pub fn parse(text: &str) -> Result<PageStatus> {
        match text {
            "draft" => Ok(PageStatus::Draft),
            "published" => Ok(PageStatus::Published),
            "archived" => Ok(PageStatus::Archived),
            other => Err(Error::invalid(format!(
                "status must be draft, published or archived (stale is Quarry's to say), got {other:?}"
            ))),
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            PageStatus::Draft => "draft",
            PageStatus::Published => "published",
            PageStatus::Archived => "archived",
        }
    }
}

/// Which lines of its document a citation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CitedLines {
    /// First and last line (1-based, inclusive).
    Range(u32, u32),
    /// The passage (chunk) that starts at this line, as a search hit's passage id names it
    /// (else the one that holds it).
    PassageAt(u32),
}

/// A passage a write cites: a document and which of its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    /// The document: a knowledge-base document's id, or `#docid`.
    pub document: String,
    /// Its lines.
    pub lines: CitedLines,
}

impl Citation {
    /// `#docid:12` (a search hit's passage id), `#docid:12-20` or `<document id>:12-20`.
    pub fn parse(text: &str) -> Result<Citation> {
        let text = text.trim();
        let bad = || {
            Error::invalid(format!(
                "cannot read the citation {text:?}: cite a search result's passage id \
                 ('#a1b2c3:12') or a document and its lines ('#a1b2c3:12-20', '<document id>:12-20')"
            ))
        };
        let (document, lines) = text.rsplit_once(':').ok_or_else(bad)?;
        if document.is_empty() {
            return Err(bad());
        }
        let number = |s: &str| s.trim().parse::<u32>().ok().filter(|n| *n > 0);
        let lines = match lines.split_once('-') {
            Some((a, b)) => {
                CitedLines::Range(number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?)
            }
            None => CitedLines::PassageAt(number(lines).ok_or_else(bad)?),
        };
        Ok(Citation {
            document: document.to_owned(),
            lines,
        })
    }
}

/// A page to write ([`Engine::write_page`]).
#[derive(Debug, Clone)]
pub struct PageWrite {
    /// Its name in links (`[[slug]]`): lower-case letters, digits and `-`.
    pub slug: String,
    /// Its title.
    pub title: String,
    /// One of [`PAGE_TYPES`], or another lower-case word.
    pub page_type: String,
    /// Its Markdown, with `[[slug]]` links to other pages.
    pub body: String,
    /// Draft, published or archived.
    pub status: PageStatus,
    /// Its tags.
    pub tags: Vec<String>,
    /// The passages it is written from.
    pub sources: Vec<Citation>,
    /// The version this write replaces (from `read_page`); `None` for a new page.
    pub base_version: Option<String>,
    /// Who writes it, from where (the surface fills it).
    pub provenance: serde_json::Map<String, serde_json::Value>,
}

/// A cited passage as its document is now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceState {
    /// The document's id.
    pub document: String,
    /// Its title (empty when it is gone).
    pub title: String,
    /// The lines cited.
    pub lines: [u32; 2],
    /// The page or slide they were on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// `current`, `moved` (the same text elsewhere in the document), `changed` or `deleted`.
    pub state: &'static str,
    /// Where a moved passage is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<[u32; 2]>,
    /// The passage's text now (at the cited lines when changed; empty when deleted).
    pub text: String,
    /// Its text when cited (only when changed or deleted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was: Option<String>,
}

impl SourceState {
    /// Whether this citation makes its page stale.
    pub fn is_stale(&self) -> bool {
        matches!(self.state, "changed" | "deleted")
    }
}

/// What a page's index line and its full view both say of it.
#[derive(Debug, Clone, Serialize)]
pub struct PageHead {
    /// Its slug.
    pub slug: String,
    /// Its title.
    pub title: String,
    /// Its type.
    #[serde(rename = "type")]
    pub page_type: String,
    /// As written: draft, published or archived.
    pub status: PageStatus,
    /// Whether a passage it cites changed or went.
    pub stale: bool,
    /// Its tags.
    pub tags: Vec<String>,
    /// This version's id: the `base_version` of the next write.
    pub version: String,
    /// When it was written (Unix ms).
    pub updated_at: i64,
}

/// A page as a caller reads it ([`Engine::read_page`]).
#[derive(Debug, Clone, Serialize)]
pub struct PageView {
    /// Slug, title, type, status, staleness, tags and version.
    #[serde(flatten)]
    pub head: PageHead,
    /// Why it is stale, one line per stale citation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale_reasons: Vec<String>,
    /// Who wrote this version, from where.
    pub written_by: serde_json::Value,
    /// Its Markdown.
    pub body: String,
    /// Its citations, as their documents are now.
    pub sources: Vec<SourceState>,
    /// The pages it links to (`[[slug]]`), each once.
    pub links: Vec<String>,
    /// The pages that link to it.
    pub backlinks: Vec<String>,
}

/// One line of [`Engine::wiki_index`].
#[derive(Debug, Clone, Serialize)]
pub struct PageSummary {
    /// Slug, title, type, status, staleness, tags and version.
    #[serde(flatten)]
    pub head: PageHead,
    /// Its first sentence (at most 160 characters).
    pub summary: String,
}

/// Which pages [`Engine::wiki_index`] lists.
#[derive(Debug, Clone, Default)]
pub struct WikiIndexRequest {
    /// Only pages of this type.
    pub page_type: Option<String>,
    /// Only pages with this tag.
    pub tag: Option<String>,
    /// Pages after this slug (the `next` of the previous answer).
    pub after: Option<String>,
    /// How many (1 to [`MAX_INDEX_LIMIT`]).
    pub limit: usize,
}

/// A page of the wiki's index, by slug.
#[derive(Debug, Clone, Serialize)]
pub struct WikiIndex {
    /// The pages.
    pub pages: Vec<PageSummary>,
    /// Pass as `after` for the next page of the index; absent at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// How many pages match, in all.
    pub total: usize,
    /// The knowledge base's instructions page (slug `instructions`): how this wiki's pages
    /// are meant to be written — read before writing. Absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// One finding of [`Engine::lint_wiki`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintFinding {
    /// `stale`, `broken_link`, `no_sources`, `orphan`, `duplicate_title` or `contradiction`.
    pub kind: &'static str,
    /// The page.
    pub page: String,
    /// What is wrong, and what to do.
    pub detail: String,
}

/// A current page version the caller may read, with what it cites.
pub(super) struct PageRow {
    pub(super) file: KbFile,
    pub(super) slug: String,
    pub(super) sources: Vec<PageSource>,
}

/// What one call looks up once: documents by file id (`None`: no such file anywhere), and
/// the space's knowledge bases (a page may cite any of them), uncounted.
#[derive(Default)]
pub(super) struct DocumentCache {
    /// Cited files by id, as this caller finds them.
    files: HashMap<String, CitedFile>,
    /// Their documents (bodies), loaded only where a passage is read.
    documents: HashMap<String, Document>,
    bases: Option<Vec<KnowledgeBase>>,
    /// A call that reads many pages' citations lists each knowledge base's files once
    /// (one query) instead of asking for each cited file (one query each).
    listing: bool,
    /// The knowledge bases already listed.
    listed: HashSet<i64>,
}

/// A cited file as one caller finds it.
#[derive(Clone)]
enum CitedFile {
    /// There, and this caller may read it.
    Readable(Box<KbFile>),
    /// There, but not for this caller.
    Hidden,
    /// In no knowledge base of the space (deleted).
    Gone,
}

impl DocumentCache {
    /// The readers of a cited file this call found readable.
    fn readers_of(&self, id: &str) -> Option<&[String]> {
        match self.files.get(id) {
            Some(CitedFile::Readable(f)) => f.readers.as_deref(),
            _ => None,
        }
    }

    pub(super) fn new() -> DocumentCache {
        DocumentCache::default()
    }

    /// For a call that reads every page's citations (the index, the lint, an export).
    pub(super) fn for_listing() -> DocumentCache {
        DocumentCache {
            listing: true,
            ..DocumentCache::default()
        }
    }
}

pub(super) fn check_slug(slug: &str) -> Result<()> {
    let ok = !slug.is_empty()
        && slug.len() <= MAX_SLUG_CHARS
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "slug must be 1 to {MAX_SLUG_CHARS} lower-case letters, digits and '-' (not first), got {slug:?}"
        )))
    }
}

fn check_type(page_type: &str) -> Result<()> {
    let ok = !page_type.is_empty()
        && page_type.len() <= MAX_TYPE_CHARS
        && page_type
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "type must be a lower-case word such as {}, got {page_type:?}",
            PAGE_TYPES.join(", ")
        )))
    }
}

/// The `[[slug]]` (and `[[slug|label]]`) links of a body, each once, in order.
pub fn page_links(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = body;
    while let Some(open) = rest.find("[[") {
        rest = &rest[open + 2..];
        let Some(close) = rest.find("]]") else { break };
        let inner = &rest[..close];
        let slug = inner.split('|').next().unwrap_or("").trim().to_owned();
        if check_slug(&slug).is_ok() && !out.contains(&slug) {
            out.push(slug);
        }
        rest = &rest[close + 2..];
    }
    out
}

/// The keyed facts a body states: lines `key:: value` (the inline-field form of Obsidian's
/// Dataview and Logseq), keys lower-cased, each key once (its first value).
pub fn page_facts(body: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in body.lines() {
        let line = line.trim().trim_start_matches(['-', '*']).trim();
        let Some((key, value)) = line.split_once("::") else {
            continue;
        };
        let key = key.trim().trim_matches('*').trim().to_lowercase();
        let value = value.trim();
        let plain_key = !key.is_empty()
            && key.chars().count() <= 60
            && key
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.'));
        if plain_key && !value.is_empty() && !out.iter().any(|(k, _)| *k == key) {
            out.push((key, value.to_owned()));
        }
    }
    out
}

/// A value as compared across pages: case and spacing aside.
fn fact_value_key(value: &str) -> String {
    value
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Lines `from..=to` (1-based) of `body`, or `None` when they are not all there.
pub(super) fn lines_of(body: &str, from: u32, to: u32) -> Option<String> {
    let (from, to) = (usize::try_from(from).ok()?, usize::try_from(to).ok()?);
    if from == 0 || to < from {
        return None;
    }
    let lines: Vec<&str> = body.lines().collect();
    (to <= lines.len()).then(|| lines[from - 1..to].join("\n"))
}

/// Where a cited passage stands in its document as the document is now.
pub(super) fn source_state(source: &PageSource, now: Option<&Document>) -> SourceState {
    let mut state = SourceState {
        document: source.file.clone(),
        title: String::new(),
        lines: [source.line_start, source.line_end],
        page: source.page,
        state: "deleted",
        moved_to: None,
        text: String::new(),
        was: Some(source.passage.clone()),
    };
    let Some(doc) = now else { return state };
    state.title = doc.title.clone();
    let at_lines = lines_of(&doc.body, source.line_start, source.line_end);
    if at_lines
        .as_deref()
        .is_some_and(|t| quarry_core::sha256_hex(t.as_bytes()) == source.passage_sha256)
    {
        state.state = "current";
        state.text = source.passage.clone();
        state.was = None;
        return state;
    }
    if let Some(at) = doc
        .body
        .find(&source.passage)
        .filter(|_| !source.passage.is_empty())
    {
        let first = doc.body[..at].matches('\n').count() as u32 + 1;
        let span = source.passage.matches('\n').count() as u32;
        state.state = "moved";
        state.moved_to = Some([first, first + span]);
        state.text = source.passage.clone();
        state.was = None;
        return state;
    }
    state.state = "changed";
    state.text = at_lines.unwrap_or_default();
    state
}

pub(super) fn stale_reason(s: &SourceState) -> String {
    let [a, b] = s.lines;
    let was: String = s.was.as_deref().unwrap_or("").chars().take(200).collect();
    match s.state {
        "deleted" => format!(
            "document {} was deleted (it cited lines {a}-{b}: {was:?})",
            s.document
        ),
        _ => {
            let now: String = s.text.chars().take(200).collect();
            format!(
                "lines {a}-{b} of {} ('{}') changed: was {was:?}, now {now:?}",
                s.document, s.title
            )
        }
    }
}

/// Keys every citation's readers share (`None`: no citation restricts them): who may read
/// every cited document. A caller reading them through different keys is left out, never
/// one who may not read one of them.
fn shared_readers<'a>(all: impl Iterator<Item = Option<&'a [String]>>) -> Option<Vec<String>> {
    let mut shared: Option<Vec<String>> = None;
    for readers in all.flatten() {
        shared = Some(match shared {
            None => readers.to_vec(),
            Some(kept) => kept.into_iter().filter(|k| readers.contains(k)).collect(),
        });
    }
    shared
}

/// The first sentence of a body (its first paragraph that is not a heading), cut at 160
/// characters.
pub(super) fn first_sentence(body: &str) -> String {
    let para = body
        .split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty() && !p.starts_with('#'))
        .unwrap_or("");
    let flat = para.split_whitespace().collect::<Vec<_>>().join(" ");
    let sentence = match flat.find(". ") {
        Some(i) => &flat[..=i],
        None => flat.as_str(),
    };
    let mut out: String = sentence.chars().take(160).collect();
    if out.chars().count() < sentence.chars().count() {
        out.push('…');
    }
    out
}

/// The stored Markdown: the body, then the citations (so a new set of citations is a new
/// version even where the body is the same, and a search hit on a page shows its sources).
fn stored_markdown(slug: &str, body: &str, sources: &[PageSource]) -> String {
    let mut out = body.trim_end().to_owned();
    out.push_str(SOURCES_MARK);
    out.push_str(&format!("Sources of [[{slug}]]:\n"));
    for (i, s) in sources.iter().enumerate() {
        let hash: String = s.passage_sha256.chars().take(12).collect();
        out.push_str(&format!(
            "{}. {} lines {}-{} ({hash})\n",
            i + 1,
            s.file,
            s.line_start,
            s.line_end
        ));
    }
    out
}

/// The body of a stored page (its citations' list left out).
fn body_of(stored: &str) -> &str {
    stored.split(SOURCES_MARK).next().unwrap_or(stored)
}

/// The pages a stored version links to (its `links` field).
fn links_of(file: &KbFile) -> Vec<String> {
    file.metadata
        .get("links")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn field_str(file: &KbFile, name: &str) -> Option<String> {
    file.metadata
        .get(name)
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

impl Engine {
    /// Writes a page (a new one, or the next version of `base_version`) citing `sources`,
    /// and returns it as read back. Errors: `InvalidInput` for a bad slug, type, title or
    /// citation; `NotFound` for a cited document this caller cannot read; `Conflict` when
    /// the page has another current version than `base_version` (someone wrote in between),
    /// or exists though no `base_version` was given — with the version to merge with.
    pub fn write_page(&self, kb: &str, write: PageWrite) -> Result<PageView> {
        self.require(Access::Write, "writing wiki pages")?;
        check_slug(&write.slug)?;
        check_type(&write.page_type)?;
        if write.title.trim().is_empty() {
            return Err(Error::invalid("a page needs a title"));
        }
        if write.sources.len() > MAX_PAGE_SOURCES {
            return Err(Error::invalid(format!(
                "a page cites at most {MAX_PAGE_SOURCES} passages"
            )));
        }
        let base = self.knowledge_base_for_writing(kb)?;
        let mut cache = DocumentCache::new();
        let mut sources = Vec::with_capacity(write.sources.len());
        for (i, cite) in write.sources.iter().enumerate() {
            sources.push(self.cited_passage(cite, &mut cache).map_err(|e| match e {
                Error::InvalidInput(m) => Error::InvalidInput(format!("source {}: {m}", i + 1)),
                Error::NotFound(m) => Error::NotFound(format!("source {}: {m}", i + 1)),
                other => other,
            })?);
        }
        let readers = shared_readers(sources.iter().map(|s| cache.readers_of(&s.file)));
        let current = self.current_page(&base, &write.slug)?;
        match (&current, &write.base_version) {
            (Some(cur), Some(given)) if cur.file.id != *given => {
                return Err(Error::Conflict(format!(
                    "page '{}' is at version {} now, not {given}: someone wrote it since you read it. \
                     read_page it again, apply your change to that version, and write it with base_version {}",
                    write.slug, cur.file.id, cur.file.id
                )));
            }
            (Some(cur), None) => {
                return Err(Error::Conflict(format!(
                    "page '{}' exists (version {}): read_page it and write your change with base_version {}, \
                     or choose another slug",
                    write.slug, cur.file.id, cur.file.id
                )));
            }
            (None, Some(given)) => {
                return Err(Error::Conflict(format!(
                    "page '{}' has no current version {given} (it was deleted, or never was): \
                     write it without base_version to create it",
                    write.slug
                )));
            }
            _ => {}
        }
        let mut fields = Metadata::default();
        fields.0.insert("kind".into(), Value::String("page".into()));
        fields
            .0
            .insert("page_type".into(), Value::String(write.page_type.clone()));
        fields
            .0
            .insert("slug".into(), Value::String(write.slug.clone()));
        fields
            .0
            .insert("status".into(), Value::String(write.status.as_str().into()));
        // Kept beside the body so backlinks and the lint read no page's text.
        let links = page_links(&write.body);
        if !links.is_empty() {
            fields.0.insert(
                "links".into(),
                Value::List(links.into_iter().map(Value::String).collect()),
            );
        }
        // So is what it states by key, for the lint's contradictions.
        let facts = page_facts(&write.body);
        if !facts.is_empty() {
            fields.0.insert(
                "facts".into(),
                Value::List(
                    facts
                        .into_iter()
                        .map(|(k, v)| Value::String(format!("{k}:: {v}")))
                        .collect(),
                ),
            );
        }
        let note = NewNote {
            content: stored_markdown(&write.slug, &write.body, &sources),
            format: NoteFormat::Markdown,
            kind: "text".into(),
            title: Some(write.title.trim().to_owned()),
            tags: write.tags.clone(),
            fields,
        };
        let options = EntryOptions {
            key: Some(format!("{PAGE_KEY_PREFIX}{}", write.slug)),
            supersedes: write.base_version.clone(),
            provenance: write.provenance.clone(),
            ..EntryOptions::default()
        };
        let extras = EntryExtras {
            // Under `pages/`, apart from the documents' names (`launch.md` stays the document's).
            file_name: Some(format!("pages/{}.md", write.slug)),
            readers,
            sources,
            first_version: write.base_version.is_none(),
        };
        let created = self
            .create_entry_with(kb, note, &options, extras)
            .map_err(|e| match e {
                Error::Conflict(m) if write.base_version.is_none() => Error::Conflict(format!(
                    "page '{}' was created by someone else just now ({m}): read_page it and write \
                     your change with its version as base_version",
                    write.slug
                )),
                Error::Conflict(m) => Error::Conflict(format!(
                    "page '{}' changed since version {} ({m}): read_page it again and write your \
                     change on the version it gives",
                    write.slug,
                    write.base_version.as_deref().unwrap_or("")
                )),
                other => other,
            })?;
        let row = self
            .page_rows([created.file])?
            .pop()
            .ok_or_else(|| Error::Storage("a page just written was not read back".into()))?;
        self.page_view(&base, &row, &mut cache)
    }

    /// A page of the knowledge base `kb` by slug, with its citations as their documents are
    /// now, its links and backlinks. `NotFound` when there is none this caller may read (a
    /// page citing a document it may not read is none).
    pub fn read_page(&self, kb: &str, slug: &str) -> Result<PageView> {
        self.require(Access::Read, "reading wiki pages")?;
        check_slug(slug)?;
        let base = self.knowledge_base(kb)?;
        let mut cache = DocumentCache::new();
        match self.current_page(&base, slug)? {
            Some(row) if self.sources_visible(&row, &mut cache)? => {
                self.page_view(&base, &row, &mut cache)
            }
            _ => Err(Error::not_found(format!(
                "no page '{slug}' in '{kb}': wiki_index lists the pages there are"
            ))),
        }
    }

    /// The pages of `kb` this caller may read, by slug, a page of the list at a time.
    pub fn wiki_index(&self, kb: &str, req: &WikiIndexRequest) -> Result<WikiIndex> {
        self.index_pages(kb, req, req.limit.clamp(1, MAX_INDEX_LIMIT))
    }

    /// Every page of `kb` this caller may read after `req.after` (its `limit` aside), in one
    /// pass: for an in-process caller that lists them all (`quarry kb pages`). Paging through
    /// [`Engine::wiki_index`] reads every page's citations once per call instead.
    pub fn wiki_index_all(&self, kb: &str, req: &WikiIndexRequest) -> Result<WikiIndex> {
        self.index_pages(kb, req, usize::MAX)
    }

    fn index_pages(&self, kb: &str, req: &WikiIndexRequest, limit: usize) -> Result<WikiIndex> {
        self.require(Access::Read, "reading wiki pages")?;
        let base = self.knowledge_base(kb)?;
        let mut cache = DocumentCache::for_listing();
        let mut matching = Vec::new();
        for row in self.current_pages(&base)? {
            if req
                .page_type
                .as_ref()
                .is_some_and(|t| field_str(&row.file, "page_type").as_ref() != Some(t))
                || req
                    .tag
                    .as_ref()
                    .is_some_and(|t| !tags_of(&row.file).contains(t))
                || !self.sources_visible(&row, &mut cache)?
            {
                continue;
            }
            matching.push(row);
        }
        let total = matching.len();
        let mut pages = Vec::new();
        let mut next = None;
        for row in matching
            .into_iter()
            .filter(|r| req.after.as_ref().is_none_or(|a| r.slug > *a))
        {
            if pages.len() == limit {
                next = pages.last().map(|p: &PageSummary| p.head.slug.clone());
                break;
            }
            let states = self.source_states(&row, &mut cache)?;
            let body = self.page_body(&row.file)?;
            pages.push(PageSummary {
                head: page_head(&row, &states),
                summary: first_sentence(&body),
            });
        }
        let instructions = match self.current_page(&base, INSTRUCTIONS_SLUG)? {
            Some(row) if self.sources_visible(&row, &mut cache)? => {
                let body = self.page_body(&row.file)?;
                let mut text: String = body.chars().take(INSTRUCTIONS_CHARS).collect();
                if text.len() < body.len() {
                    text.push_str(&format!(
                        "\n\n[… read_page '{INSTRUCTIONS_SLUG}' for the rest]"
                    ));
                }
                Some(text)
            }
            _ => None,
        };
        Ok(WikiIndex {
            pages,
            next,
            total,
            instructions,
        })
    }

    /// What is wrong with the wiki of `kb`, as far as this caller may read it: stale pages,
    /// links to no page, pages citing nothing and pages nothing links to (index, log and
    /// instructions pages aside), titles used twice, and pages stating different values for
    /// one keyed fact.
    pub fn lint_wiki(&self, kb: &str) -> Result<Vec<LintFinding>> {
        self.require(Access::Read, "reading wiki pages")?;
        let base = self.knowledge_base(kb)?;
        let mut cache = DocumentCache::for_listing();
        let rows = self.visible_pages(&base, &mut cache)?;
        let slugs: HashSet<&str> = rows.iter().map(|r| r.slug.as_str()).collect();
        let mut linked: HashSet<String> = HashSet::new();
        let mut titles: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut findings = Vec::new();
        for row in &rows {
            for link in links_of(&row.file) {
                if !slugs.contains(link.as_str()) {
                    findings.push(LintFinding {
                        kind: "broken_link",
                        page: row.slug.clone(),
                        detail: format!(
                            "links to [[{link}]], which is no page: write it, or fix the link"
                        ),
                    });
                }
                if link != row.slug {
                    linked.insert(link);
                }
            }
            let page_type = field_str(&row.file, "page_type").unwrap_or_default();
            if row.sources.is_empty() && !WIKI_TYPES.contains(&page_type.as_str()) {
                findings.push(LintFinding {
                    kind: "no_sources",
                    page: row.slug.clone(),
                    detail: "cites no passage: nothing can tell when it goes out of date".into(),
                });
            }
            for s in &row.sources {
                let doc = self.cited_document(&s.file, &mut cache)?;
                let state = source_state(s, doc.as_ref().map(|(_, d)| d));
                if state.is_stale() {
                    findings.push(LintFinding {
                        kind: "stale",
                        page: row.slug.clone(),
                        detail: stale_reason(&state),
                    });
                }
            }
            titles
                .entry(page_title(&row.file).to_lowercase())
                .or_default()
                .push(row.slug.clone());
        }
        for row in &rows {
            let page_type = field_str(&row.file, "page_type").unwrap_or_default();
            if !linked.contains(&row.slug) && !WIKI_TYPES.contains(&page_type.as_str()) {
                findings.push(LintFinding {
                    kind: "orphan",
                    page: row.slug.clone(),
                    detail: "no page links to it: link it from an index or a related page".into(),
                });
            }
        }
        for (title, pages) in titles.into_iter().filter(|(_, p)| p.len() > 1) {
            for page in &pages {
                findings.push(LintFinding {
                    kind: "duplicate_title",
                    page: page.clone(),
                    detail: format!(
                        "the title {title:?} is also used by {}: merge them or tell them apart",
                        pages
                            .iter()
                            .filter(|p| *p != page)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        findings.extend(contradictions(&rows));
        Ok(findings)
    }

    /// The current page versions of `base` this caller may read (by its readers), by slug,
    /// without their citations; only `slug`'s when given.
    fn current_page_files(
        &self,
        base: &KnowledgeBase,
        slug: Option<&str>,
    ) -> Result<BTreeMap<String, KbFile>> {
        let mut by_slug: BTreeMap<String, KbFile> = BTreeMap::new();
        // Page files are named `pages/<slug>.md`: the store lists those, not every document.
        let filter = FileFilter {
            name: Some(match slug {
                Some(slug) => format!("pages/{slug}.md"),
                None => "pages/".into(),
            }),
            ..FileFilter::default()
        };
        for file in self.store().kb_files(base.collection_id, &filter)? {
            let current = file
                .entry
                .as_ref()
                .is_some_and(|e| e.superseded_by.is_none());
            let Some(found) =
                slug_of(&file).filter(|found| current && slug.is_none_or(|s| s == found))
            else {
                continue;
            };
            if !self.may_read_file(&file) {
                continue;
            }
            // Two current versions (chains of other readers): the newest.
            match by_slug.get(&found) {
                Some(kept) if kept.row_id > file.row_id => {}
                _ => {
                    by_slug.insert(found, file);
                }
            }
        }
        Ok(by_slug)
    }

    /// `files` (current page versions) with their citations.
    fn page_rows(&self, files: impl IntoIterator<Item = KbFile>) -> Result<Vec<PageRow>> {
        let files: Vec<KbFile> = files.into_iter().collect();
        let ids: Vec<i64> = files.iter().map(|f| f.row_id).collect();
        let mut sources = self.sources_of(&ids)?;
        Ok(files
            .into_iter()
            .map(|file| PageRow {
                sources: sources.remove(&file.row_id).unwrap_or_default(),
                slug: slug_of(&file).unwrap_or_default(),
                file,
            })
            .collect())
    }

    /// The current pages of `base` this caller may read, citations and all (a page citing a
    /// document it may not read is none), by slug.
    pub(super) fn visible_pages(
        &self,
        base: &KnowledgeBase,
        cache: &mut DocumentCache,
    ) -> Result<Vec<PageRow>> {
        let mut rows = Vec::new();
        for row in self.current_pages(base)? {
            if self.sources_visible(&row, cache)? {
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// The current page versions of `base` this caller may read, by slug, with their
    /// citations.
    pub(super) fn current_pages(&self, base: &KnowledgeBase) -> Result<Vec<PageRow>> {
        self.page_rows(self.current_page_files(base, None)?.into_values())
    }

    /// The current version of the page `slug` of `base` this caller may read.
    pub(super) fn current_page(&self, base: &KnowledgeBase, slug: &str) -> Result<Option<PageRow>> {
        let files = self.current_page_files(base, Some(slug))?;
        Ok(self.page_rows(files.into_values())?.pop())
    }

    pub(super) fn sources_of(&self, ids: &[i64]) -> Result<HashMap<i64, Vec<PageSource>>> {
        let mut out: HashMap<i64, Vec<PageSource>> = HashMap::new();
        for (id, source) in self.store().page_sources(ids)? {
            out.entry(id).or_default().push(source);
        }
        Ok(out)
    }

    /// Whether this caller may read every document `row` cites that is still there.
    pub(super) fn sources_visible(&self, row: &PageRow, cache: &mut DocumentCache) -> Result<bool> {
        for s in &row.sources {
            if self.cited_file(&s.file, cache).is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The cited file `id` and its document as they are now: `Ok(None)` when no knowledge
    /// base of the space holds it (deleted), `Err` when one does but this caller may not
    /// read it.
    pub(super) fn cited_document(
        &self,
        id: &str,
        cache: &mut DocumentCache,
    ) -> Result<Option<(KbFile, Document)>> {
        let Some(file) = self.cited_file(id, cache)? else {
            return Ok(None);
        };
        if let Some(doc) = cache.documents.get(id) {
            return Ok(Some((file, doc.clone())));
        }
        let doc = self.converted_document(&file)?;
        cache.documents.insert(id.to_owned(), doc.clone());
        Ok(Some((file, doc)))
    }

    /// The cited file `id` as it is now, without its document: `Ok(None)` when no
    /// knowledge base of the space holds it (deleted), `Err` when one does but this caller
    /// may not read it. Enough to say who may read a page, so listings load no bodies.
    pub(super) fn cited_file(&self, id: &str, cache: &mut DocumentCache) -> Result<Option<KbFile>> {
        let cited = match cache.files.get(id) {
            Some(known) => known.clone(),
            None => {
                let found = self.find_cited_file(id, cache)?;
                cache.files.insert(id.to_owned(), found.clone());
                found
            }
        };
        match cited {
            CitedFile::Readable(file) => Ok(Some(*file)),
            CitedFile::Hidden => Err(Error::not_found(format!("document '{id}' not found"))),
            CitedFile::Gone => Ok(None),
        }
    }

    fn find_cited_file(&self, id: &str, cache: &mut DocumentCache) -> Result<CitedFile> {
        if cache.bases.is_none() {
            cache.bases = Some(self.store().knowledge_bases(self.space())?);
        }
        if cache.listing {
            let ids: Vec<i64> = cache
                .bases
                .iter()
                .flatten()
                .map(|k| k.collection_id)
                .collect();
            for collection in ids {
                if !cache.listed.insert(collection) {
                    continue;
                }
                for file in self.store().kb_files(collection, &FileFilter::default())? {
                    let state = if self.scope().allows(collection) && self.may_read_file(&file) {
                        CitedFile::Readable(Box::new(file.clone()))
                    } else {
                        CitedFile::Hidden
                    };
                    cache.files.entry(file.id).or_insert(state);
                }
            }
            return Ok(cache.files.get(id).cloned().unwrap_or(CitedFile::Gone));
        }
        for kb in cache.bases.iter().flatten() {
            let Some(file) = self
                .store()
                .kb_file(kb.collection_id, id)?
                .filter(|f| f.id == id)
            else {
                continue;
            };
            // Hidden from this caller (its readers, or a knowledge base outside its token's
            // reach) is not gone: only a file that is nowhere is.
            if !self.scope().allows(kb.collection_id) || !self.may_read_file(&file) {
                return Ok(CitedFile::Hidden);
            }
            return Ok(CitedFile::Readable(Box::new(file)));
        }
        Ok(CitedFile::Gone)
    }

    /// The passage `cite` names, as it is now, for a page to store.
    fn cited_passage(&self, cite: &Citation, cache: &mut DocumentCache) -> Result<PageSource> {
        let (file, doc) = self.citable_document(&cite.document, cache)?;
        let (from, to) = match cite.lines {
            CitedLines::Range(from, to) => (from, to),
            CitedLines::PassageAt(start) => self.passage_at(&doc, start)?,
        };
        if to < from || to - from >= MAX_CITED_LINES {
            return Err(Error::invalid(format!(
                "cite 1 to {MAX_CITED_LINES} lines, first line first (got {from}-{to})"
            )));
        }
        let passage = lines_of(&doc.body, from, to).ok_or_else(|| {
            Error::invalid(format!(
                "'{}' has {} lines: lines {from}-{to} are not all there",
                doc.title,
                doc.body.lines().count()
            ))
        })?;
        if passage.trim().is_empty() {
            return Err(Error::invalid(format!(
                "lines {from}-{to} of '{}' are blank: cite the passage's text",
                doc.title
            )));
        }
        let page = doc
            .pages
            .iter()
            .find(|p| {
                let start = doc.body[..p.byte_start.min(doc.body.len())]
                    .matches('\n')
                    .count() as u32
                    + 1;
                let end = doc.body[..p.byte_end.min(doc.body.len())]
                    .matches('\n')
                    .count() as u32
                    + 1;
                (start..=end).contains(&from)
            })
            .map(|p| p.page);
        Ok(PageSource {
            file: file.id.clone(),
            line_start: from,
            line_end: to,
            page,
            document_sha256: doc.hash.clone(),
            passage_sha256: quarry_core::sha256_hex(passage.as_bytes()),
            passage,
        })
    }

    /// A knowledge-base document this caller may read, by its id or `#docid`.
    fn citable_document(
        &self,
        reference: &str,
        cache: &mut DocumentCache,
    ) -> Result<(KbFile, Document)> {
        let id = if reference.starts_with('#') {
            let doc = self.resolve(reference)?;
            self.store()
                .kb_file_ids(&[doc.id])?
                .remove(&doc.id)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{reference} is a folder collection's document: pages cite documents of knowledge bases"
                    ))
                })?
        } else {
            reference.to_owned()
        };
        match self.cited_document(&id, cache) {
            Ok(Some(found)) => Ok(found),
            Ok(None) | Err(Error::NotFound(_)) => Err(Error::not_found(format!(
                "no document '{reference}' you may read: cite a knowledge_search result's id"
            ))),
            Err(e) => Err(e),
        }
    }

    /// The lines of the passage (chunk) of `doc` that starts at line `start` (else the one
    /// that holds it).
    fn passage_at(&self, doc: &Document, start: u32) -> Result<(u32, u32)> {
        let chunks = self.store().chunks_of_documents(&[doc.id])?;
        let line = start as usize;
        chunks
            .iter()
            .find(|c| c.line_start == line)
            .or_else(|| {
                chunks
                    .iter()
                    .find(|c| c.line_start <= line && line <= c.line_end)
            })
            .map(|c| {
                (
                    u32::try_from(c.line_start).unwrap_or(u32::MAX),
                    u32::try_from(c.line_end).unwrap_or(u32::MAX),
                )
            })
            .ok_or_else(|| {
                Error::invalid(format!(
                    "no passage of '{}' holds line {start} (it is not indexed yet, or has fewer lines): cite its lines ('{}:{start}-<last line>')",
                    doc.title, doc.docid
                ))
            })
    }

    pub(super) fn page_body(&self, file: &KbFile) -> Result<String> {
        let stored = self.blobs()?.read(&file.sha256)?;
        Ok(body_of(&String::from_utf8_lossy(&stored)).to_owned())
    }

    /// Its citations as their documents are now.
    fn source_states(&self, row: &PageRow, cache: &mut DocumentCache) -> Result<Vec<SourceState>> {
        let mut states = Vec::with_capacity(row.sources.len());
        for s in &row.sources {
            let doc = self.cited_document(&s.file, cache)?;
            states.push(source_state(s, doc.as_ref().map(|(_, d)| d)));
        }
        Ok(states)
    }

    fn page_view(
        &self,
        base: &KnowledgeBase,
        row: &PageRow,
        cache: &mut DocumentCache,
    ) -> Result<PageView> {
        let body = self.page_body(&row.file)?;
        let sources = self.source_states(row, cache)?;
        // Backlinks from the pages' link lists, kept beside each page: only the pages that
        // link here have their citations read, to tell which this caller may see.
        let linking: Vec<KbFile> = self
            .current_page_files(base, None)?
            .into_iter()
            .filter(|(slug, f)| *slug != row.slug && links_of(f).contains(&row.slug))
            .map(|(_, f)| f)
            .collect();
        let mut backlinks = Vec::new();
        for other in self.page_rows(linking)? {
            if self.sources_visible(&other, cache)? {
                backlinks.push(other.slug);
            }
        }
        Ok(PageView {
            head: page_head(row, &sources),
            stale_reasons: sources
                .iter()
                .filter(|s| s.is_stale())
                .map(stale_reason)
                .collect(),
            written_by: row
                .file
                .entry
                .as_ref()
                .map(|e| e.provenance.clone())
                .unwrap_or_default(),
            links: page_links(&body),
            body,
            sources,
            backlinks,
        })
    }
}

/// The keyed facts a stored page version states (kept beside it when written).
fn facts_of(file: &KbFile) -> Vec<(String, String)> {
    file.metadata
        .get("facts")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str()?.split_once(":: "))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Pages that state different values for the same key (`key:: value`): one finding on each,
/// naming the others and what they say.
fn contradictions(rows: &[PageRow]) -> Vec<LintFinding> {
    // key → value as compared → (value as written, pages saying it)
    let mut by_key: BTreeMap<String, BTreeMap<String, (String, Vec<String>)>> = BTreeMap::new();
    for row in rows {
        for (key, value) in facts_of(&row.file) {
            by_key
                .entry(key)
                .or_default()
                .entry(fact_value_key(&value))
                .or_insert_with(|| (value, Vec::new()))
                .1
                .push(row.slug.clone());
        }
    }
    let mut findings = Vec::new();
    for (key, values) in by_key.into_iter().filter(|(_, v)| v.len() > 1) {
        for (own, (value, pages)) in &values {
            let others: Vec<String> = values
                .iter()
                .filter(|(k, _)| *k != own)
                .map(|(_, (v, p))| format!("{} says {v:?}", p.join(", ")))
                .collect();
            for page in pages {
                findings.push(LintFinding {
                    kind: "contradiction",
                    page: page.clone(),
                    detail: format!(
                        "states {key}:: {value:?}, but {}: check the sources and make them agree",
                        others.join("; ")
                    ),
                });
            }
        }
    }
    findings
}

/// The slug of a page version's file (`None`: not a page).
pub(super) fn slug_of(file: &KbFile) -> Option<String> {
    file.entry
        .as_ref()
        .and_then(|e| e.key.as_deref())
        .and_then(|k| k.strip_prefix(PAGE_KEY_PREFIX))
        .map(str::to_owned)
}

pub(super) fn tags_of(file: &KbFile) -> Vec<String> {
    file.note
        .as_ref()
        .map(|n| n.tags.clone())
        .unwrap_or_default()
}

pub(super) fn page_title(file: &KbFile) -> String {
    file.note
        .as_ref()
        .and_then(|n| n.title.clone())
        .unwrap_or_else(|| file.file_name.clone())
}

fn page_head(row: &PageRow, sources: &[SourceState]) -> PageHead {
    PageHead {
        slug: row.slug.clone(),
        title: page_title(&row.file),
        page_type: field_str(&row.file, "page_type").unwrap_or_default(),
        status: page_status(&row.file),
        stale: sources.iter().any(SourceState::is_stale),
        tags: tags_of(&row.file),
        version: row.file.id.clone(),
        updated_at: row.file.created_at,
    }
}

pub(super) fn page_status(file: &KbFile) -> PageStatus {
    field_str(file, "status")
        .and_then(|s| PageStatus::parse(&s).ok())
        .unwrap_or(PageStatus::Published)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_read_passage_ids_and_ranges() {
        assert_eq!(
            Citation::parse("#a1b2c3:12").unwrap(),
            Citation {
                document: "#a1b2c3".into(),
                lines: CitedLines::PassageAt(12),
            }
        );
        assert_eq!(
            Citation::parse(" 5f0c-uid:3-9 ").unwrap().lines,
            CitedLines::Range(3, 9)
        );
        for bad in ["", "#a1b2c3", ":3", "#a:0", "#a:x-2", "#a:3-"] {
            assert!(Citation::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn links_are_slugs_in_double_brackets_each_once() {
        assert_eq!(
            page_links(
                "See [[launch-plan]] and [[budget|the budget]], [[launch-plan]] again; [[Not A Slug]] [[open"
            ),
            vec!["launch-plan".to_owned(), "budget".to_owned()]
        );
    }

    #[test]
    fn a_passage_is_current_moved_changed_or_deleted() {
        let passage = "Budget: 40,000 EUR.\nApproved in May.";
        let source = PageSource {
            file: "f1".into(),
            line_start: 3,
            line_end: 4,
            page: None,
            document_sha256: "old".into(),
            passage_sha256: quarry_core::sha256_hex(passage.as_bytes()),
            passage: passage.into(),
        };
        let doc = |body: &str| Document {
            id: 1,
            collection: "kb".into(),
            path: "plan.md".into(),
            title: "Plan".into(),
            hash: "new".into(),
            docid: "#abcdef".into(),
            body: body.into(),
            pages: Vec::new(),
            furniture: Vec::new(),
            meta: String::new(),
        };
        let same = doc("# Plan\n\nBudget: 40,000 EUR.\nApproved in May.\n\nMore.");
        assert_eq!(source_state(&source, Some(&same)).state, "current");
        let moved = doc("# Plan\n\nIntro.\n\nBudget: 40,000 EUR.\nApproved in May.");
        let state = source_state(&source, Some(&moved));
        assert_eq!((state.state, state.moved_to), ("moved", Some([5, 6])));
        let changed = doc("# Plan\n\nBudget: 55,000 EUR.\nApproved in May.");
        let state = source_state(&source, Some(&changed));
        assert_eq!(state.state, "changed");
        assert_eq!(state.text, "Budget: 55,000 EUR.\nApproved in May.");
        assert_eq!(state.was.as_deref(), Some(passage));
        assert!(
            stale_reason(&state).contains("55,000"),
            "{}",
            stale_reason(&state)
        );
        assert_eq!(source_state(&source, None).state, "deleted");
    }

    #[test]
    fn a_page_is_read_by_those_who_read_all_it_cites() {
        let a = vec!["user:ann".to_owned(), "group:fin".to_owned()];
        let b = vec!["group:fin".to_owned()];
        assert_eq!(shared_readers([None, None].into_iter()), None);
        assert_eq!(
            shared_readers([Some(a.as_slice()), None, Some(b.as_slice())].into_iter()),
            Some(vec!["group:fin".to_owned()])
        );
        assert_eq!(
            shared_readers([Some(&a[..1]), Some(b.as_slice())].into_iter()),
            Some(Vec::new())
        );
    }

    #[test]
    fn the_stored_markdown_keeps_the_body_apart_from_its_citations() {
        let s = PageSource {
            file: "f1".into(),
            line_start: 1,
            line_end: 2,
            page: None,
            document_sha256: String::new(),
            passage_sha256: "0123456789abcdef".into(),
            passage: "x".into(),
        };
        let stored = stored_markdown("plan", "# Plan\n\nText.\n", &[s]);
        assert_eq!(body_of(&stored), "# Plan\n\nText.");
        assert!(
            stored.contains("1. f1 lines 1-2 (0123456789ab)"),
            "{stored}"
        );
        assert_eq!(
            first_sentence("# Plan\n\nThe launch is on 4 May. Then more."),
            "The launch is on 4 May."
        );
    }
}
