//! Notes that agents create (seed 004's `create_knowledge` and its siblings): Markdown (or
//! EditorJS blocks) stored as a `.md` document of a knowledge base, keyword-searchable when
//! the call returns; embedding runs later on the ingestion queue like any upload.

use quarry_core::{Access, Error, Result};
use quarry_store::{FileFilter, FileStatus, KbFile};
use serde::Serialize;

use crate::engine::Engine;
use crate::progress::NoProgress;

/// Largest note, in bytes of Markdown.
pub const MAX_NOTE_BYTES: usize = 1 << 20;
/// Most tags on a note, and longest tag.
const MAX_TAGS: usize = 32;
const MAX_TAG_CHARS: usize = 64;
const MAX_TITLE_CHARS: usize = 300;
/// What a note may be (`kind`).
pub const NOTE_KINDS: [&str; 4] = ["text", "image", "video", "url"];
/// How long the answer to a request sent with an idempotency key is kept for its retries.
pub(crate) const IDEMPOTENCY_KEEP_MS: i64 = 24 * 3_600_000;
/// Longest idempotency key.
const MAX_IDEMPOTENCY_KEY: usize = 255;

/// How a note's content is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteFormat {
    /// Markdown text.
    Markdown,
    /// EditorJS JSON.
    Blocks,
}

impl NoteFormat {
    /// The format named `s` (`markdown`, `blocks`).
    pub fn parse(s: &str) -> Result<NoteFormat> {
        match s {
            "markdown" => Ok(NoteFormat::Markdown),
            "blocks" => Ok(NoteFormat::Blocks),
            other => Err(Error::invalid(format!(
                "content_type must be 'markdown' or 'blocks', got {other:?}"
            ))),
        }
    }
}

/// A note to create.
#[derive(Debug, Clone)]
pub struct NewNote {
    /// The note's text.
    pub content: String,
    /// How the text is written.
    pub format: NoteFormat,
    /// One of [`NOTE_KINDS`].
    pub kind: String,
    /// Its title; none: the first heading or line.
    pub title: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// Metadata fields given with it (`create_knowledge`'s `metadata`).
    pub fields: quarry_metadata::Metadata,
}

/// Changes to a note; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct NoteChange {
    /// New content and its format.
    pub content: Option<(String, NoteFormat)>,
    /// A new title.
    pub title: Option<String>,
    /// New tags.
    pub tags: Option<Vec<String>>,
}

/// A note (or any knowledge-base document) with its Markdown.
#[derive(Debug, Clone, Serialize)]
pub struct NoteView {
    #[serde(flatten)]
    /// The note's file.
    pub file: KbFile,
    /// Its title.
    pub title: String,
    /// Its Markdown.
    pub content: String,
}

pub(crate) fn check_title(title: &Option<String>) -> Result<Option<String>> {
    let t = title.as_deref().map(str::trim).filter(|t| !t.is_empty());
    if let Some(t) = t {
        if t.chars().count() > MAX_TITLE_CHARS {
            return Err(Error::invalid(format!(
                "title is longer than {MAX_TITLE_CHARS} characters"
            )));
        }
        if t.chars().any(char::is_control) {
            return Err(Error::invalid("title must not contain control characters"));
        }
    }
    // NFC, like file names: the same title typed on two systems is one title.
    Ok(t.map(quarry_ingest::nfc))
}

pub(crate) fn check_tags(tags: &[String]) -> Result<Vec<String>> {
    if tags.len() > MAX_TAGS {
        return Err(Error::invalid(format!("at most {MAX_TAGS} tags")));
    }
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.trim();
        if t.is_empty() {
            continue;
        }
        if t.chars().count() > MAX_TAG_CHARS || t.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "tag {t:?} is longer than {MAX_TAG_CHARS} characters or has control characters"
            )));
        }
        if !out.iter().any(|o| o == t) {
            out.push(t.to_owned());
        }
    }
    Ok(out)
}

/// The Markdown of `content`.
pub(crate) fn to_markdown(content: &str, format: NoteFormat) -> Result<String> {
    let md = match format {
        NoteFormat::Markdown => content.to_owned(),
        NoteFormat::Blocks => quarry_convert::editorjs_to_markdown(content)
            .map_err(|e| Error::invalid(e.to_string()))?,
    };
    if md.trim().is_empty() {
        return Err(Error::invalid("content must not be empty"));
    }
    if md.len() > MAX_NOTE_BYTES {
        return Err(Error::TooLarge(format!(
            "content is {} bytes; notes may have at most {MAX_NOTE_BYTES} bytes (upload larger documents to a knowledge base)",
            md.len()
        )));
    }
    Ok(md)
}

/// A file name for a note: its title (or first words), made safe, `.md`.
pub(crate) fn note_file_name(title: Option<&str>, markdown: &str) -> String {
    let basis = title.unwrap_or_else(|| {
        markdown
            .lines()
            .map(|l| l.trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .unwrap_or("note")
    });
    let mut name: String = basis
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' || c == ' ' {
                c
            } else {
                '-'
            }
        })
        .take(60)
        .collect();
    name = name.trim().trim_matches('-').to_owned();
    if name.is_empty() {
        name = "note".into();
    }
    format!("{name}.md")
}

impl Engine {
    /// Runs `work` once per idempotency `key` of `owner` (a user's UUID, or `local`) in this
    /// space: a retry with the same key and the same `request` (a fingerprint of it) gets the
    /// first answer back instead of doing the work again — from the store, so on any node,
    /// for [`IDEMPOTENCY_KEEP_MS`]. The same key with another request is a conflict. A
    /// failed attempt records nothing (a retry runs it again).
    pub fn once(
        &self,
        owner: &str,
        key: &str,
        request: &str,
        work: impl FnOnce() -> Result<serde_json::Value>,
    ) -> Result<serde_json::Value> {
        if key.is_empty()
            || key.chars().count() > MAX_IDEMPOTENCY_KEY
            || key.chars().any(|c| c.is_control())
        {
            return Err(Error::invalid(format!(
                "idempotency key must have 1 to {MAX_IDEMPOTENCY_KEY} characters and no control characters"
            )));
        }
        let scope = format!("{}\u{1f}{owner}", self.space());
        let since = quarry_core::now_millis() - IDEMPOTENCY_KEEP_MS;
        let reuse = |(first, answer): (String, String)| -> Result<serde_json::Value> {
            if first != request {
                return Err(Error::Conflict(format!(
                    "idempotency key '{key}' was already used for a different request; use a new key for a new request"
                )));
            }
            serde_json::from_str(&answer)
                .map_err(|e| Error::Storage(format!("stored answer for key '{key}': {e}")))
        };
        if let Some(found) = self.store().idempotent_answer(&scope, key, since)? {
            return reuse(found);
        }
        let answer = work()?;
        // Two attempts racing with one key: the first recorded answer is everyone's.
        let recorded = self.store().record_idempotent_answer(
            &scope,
            key,
            request,
            &answer.to_string(),
            quarry_core::now_millis(),
            since,
        )?;
        reuse(recorded)
    }

    /// Stores and keyword-indexes a note's Markdown at once; the queued job embeds it.
    pub(crate) fn index_note_now(&self, file: &KbFile) -> Result<()> {
        match self.convert_and_index(None, file.row_id, &NoProgress, &|| {}) {
            Ok(_) => Ok(()),
            Err(e) => {
                self.store().set_file_status(
                    None,
                    file.row_id,
                    FileStatus::Failed,
                    Some(&e.message),
                )?;
                Err(Error::invalid(e.message))
            }
        }
    }

    /// A knowledge entry of the knowledge base `kb` (a connection's resource) by id, for
    /// changing it: an entry anywhere else, visible or not, is not found here.
    pub fn resource_knowledge(&self, kb: &str, id: &str) -> Result<KbFile> {
        let found = match self.knowledge_base(kb) {
            Ok(base) => self
                .store()
                .kb_file(base.collection_id, id)?
                .filter(|f| f.id == id && self.may_read_file(f)),
            Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        found.ok_or_else(|| {
            Error::not_found(format!(
                "knowledge '{id}' not found in '{kb}', this connection's resource (X-Resource): only its entries can be updated or deleted here"
            ))
        })
    }

    /// A knowledge-base document by id, looked for in `kb` first, then in every knowledge
    /// base the caller may read.
    pub fn find_knowledge(&self, kb: Option<&str>, id: &str) -> Result<KbFile> {
        if let Some(kb) = kb
            && let Ok(f) = self.kb_document(kb, id)
        {
            return Ok(f);
        }
        for base in self.knowledge_bases()? {
            if let Some(f) = self.store().kb_file(base.collection_id, id)?
                && f.id == id
                && self.may_read_file(&f)
            {
                return Ok(f);
            }
        }
        Err(Error::not_found(format!("knowledge '{id}' not found")))
    }

    /// A knowledge-base document with its Markdown (the converted text, or a note's own
    /// Markdown while it waits for the queue).
    pub fn knowledge_view(&self, file: KbFile) -> Result<NoteView> {
        let content = match self.converted_document(&file) {
            Ok(doc) => {
                return Ok(NoteView {
                    title: doc.title.clone(),
                    content: doc.body,
                    file,
                });
            }
            Err(e) if file.note.is_some() => {
                let bytes = self.blobs()?.read(&file.sha256).map_err(|_| e)?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
            Err(e) => return Err(e),
        };
        let title = file
            .note
            .as_ref()
            .and_then(|n| n.title.clone())
            .unwrap_or_else(|| file.file_name.trim_end_matches(".md").to_owned());
        Ok(NoteView {
            title,
            content,
            file,
        })
    }

    /// Documents of `kb` (its uploads, and the notes valid at this handle's moment), newest
    /// first, paged.
    pub fn list_knowledge(
        &self,
        kb: &str,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<KbFile>, usize)> {
        let mut all = match self.knowledge_base(kb) {
            Ok(base) => self
                .store()
                .kb_files(base.collection_id, &FileFilter::default())?,
            Err(Error::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        // Entries valid at this handle's moment (superseded and expired ones are history).
        all.retain(|f| self.may_read_file(f) && self.valid_now(f));
        all.reverse();
        let total = all.len();
        Ok((all.into_iter().skip(offset).take(limit).collect(), total))
    }

    /// Changes a note's content, title or tags; changed content is keyword-searchable when
    /// this returns and re-embedded by the queue.
    pub fn update_note(&self, file: &KbFile, change: NoteChange) -> Result<KbFile> {
        self.require(Access::Write, "updating knowledge")?;
        if file.note.is_none() {
            return Err(Error::invalid(
                "only notes created by agents can be updated; upload a new version of a document instead",
            ));
        }
        let title = match &change.title {
            Some(t) => Some(check_title(&Some(t.clone()))?),
            None => None,
        };
        let tags = change.tags.as_deref().map(check_tags).transpose()?;
        let content = match &change.content {
            Some((c, f)) => Some(to_markdown(c, *f)?),
            None => None,
        };
        if content.is_none() && title.is_none() && tags.is_none() {
            return Err(Error::invalid(
                "nothing to update: give content, title or tags",
            ));
        }
        let blobs = self.blobs()?;
        let refs = blobs.lock_shared()?;
        let stored = match &content {
            Some(md) => Some((blobs.put(md.as_bytes())?, md.len() as u64)),
            None => None,
        };
        let updated = self.store().update_note(
            file.collection_id,
            file.row_id,
            stored.as_ref().map(|(sha, n)| (sha.as_str(), *n)),
            title.as_ref().map(|t| t.as_deref()),
            tags.as_deref(),
        )?;
        drop(refs);
        // Tags are a field too (`tags`): a filter on them must see the new ones.
        if content.is_some() || title.is_some() || tags.is_some() {
            self.index_note_now(&updated)?;
        }
        Ok(updated)
    }

    /// Deletes a knowledge-base document (note or upload).
    pub fn delete_knowledge(&self, file: &KbFile) -> Result<KbFile> {
        self.delete_kb_document(&file.knowledge_base, &file.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_come_from_titles_or_first_lines() {
        assert_eq!(
            note_file_name(Some("MCP 集成会议记录"), ""),
            "MCP 集成会议记录.md"
        );
        assert_eq!(note_file_name(None, "# 会议记录\n\ntext"), "会议记录.md");
        assert_eq!(note_file_name(None, "../../etc/passwd"), "etc-passwd.md");
        assert_eq!(note_file_name(Some("///"), "x"), "note.md");
    }

    #[test]
    fn tags_and_titles_are_checked() {
        assert_eq!(
            check_tags(&["a".into(), " a ".into(), "".into(), "b".into()]).unwrap(),
            vec!["a", "b"]
        );
        assert!(check_tags(&["x\ny".into()]).is_err());
        assert!(check_title(&Some("t\u{7}".into())).is_err());
        assert_eq!(check_title(&Some("  ".into())).unwrap(), None);
        assert!(to_markdown("  ", NoteFormat::Markdown).is_err());
        assert!(matches!(
            to_markdown(&"x".repeat(MAX_NOTE_BYTES + 1), NoteFormat::Markdown),
            Err(Error::TooLarge(_))
        ));
    }
}
