//! Knowledge entries with time (issue 44, item 4): what `create_knowledge` writes when it
//! is given a `key`, `supersedes`, a validity window, an expiry or sources, and what every
//! read sees `as_of` a moment.
//!
//! - **Versions.** A write with a key supersedes the key's current entry in its knowledge
//!   base (`supersedes` names it explicitly); the old entry stays, readable by id, its
//!   validity ending where the new one's starts, and the history says so.
//! - **Validity.** An entry is valid from `valid_from` (default: when written) until the
//!   earliest of `valid_to`, `expires_at` (or `ttl`) and its successor's start. Searches and
//!   listings see the entries valid at the handle's `as_of` ([`Engine::at`], default now):
//!   superseded and expired entries drop out as if absent — they neither come back nor move
//!   a score — and `as_of` in the past answers with what was valid then. Documents of
//!   folders and uploads have no window: every `as_of` sees them.
//! - **Near-duplicates.** A write without a key is compared with the knowledge base's
//!   current entries that share its words (keyword candidates, then the rule in
//!   [`near_duplicate`]); matches are reported with the write, or, with
//!   [`OnDuplicate::Merge`], the write supersedes the closest one.
//! - **Provenance.** Each entry records who wrote it (user, token, client), from which
//!   conversation or tool call, and what it was derived from; deleting an entry deletes
//!   what was derived from it, transitively, and the history says why.

use std::collections::HashSet;

use quarry_core::{Access, Error, Result};
use quarry_store::{AddedEntry, HistoryEvent, KbFile, NewEntry, NewKbFile, NoteMeta};
use serde::Serialize;

use crate::engine::Engine;
use crate::kb::notes::NewNote;

/// Longest entry key, in characters.
pub const MAX_KEY_CHARS: usize = 200;
/// Most entries one may be derived from.
pub const MAX_SOURCES: usize = 100;
/// Longest time to live: a hundred years, in seconds.
const MAX_TTL_SECONDS: u64 = 100 * 366 * 24 * 3600;
/// Near-duplicate rule: the share of the shorter entry's content words the other must have
/// too — all of them for a short entry; this share from [`NEAR_DUPLICATE_LONG_WORDS`] on…
pub const NEAR_DUPLICATE_OVERLAP: f32 = 0.9;
/// …(content words of the shorter entry from which a little rewording is tolerated)…
pub const NEAR_DUPLICATE_LONG_WORDS: usize = 10;
/// …and the share of all their distinct content words they have in common (see
/// [`near_duplicate`]).
pub const NEAR_DUPLICATE_JACCARD: f32 = 0.5;
/// Candidates (keyword hits in the knowledge base) compared with a new entry.
const NEAR_DUPLICATE_CANDIDATES: usize = 8;
/// Words of a new entry its candidates are looked up by.
const CANDIDATE_QUERY_WORDS: usize = 64;

/// What a write does with the current entries it nearly duplicates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDuplicate {
    /// Write it, and name them in the answer.
    #[default]
    Report,
    /// Write it as the new version of the closest one (which it supersedes).
    Merge,
}

impl OnDuplicate {
    /// `report` or `merge`.
    pub fn parse(text: &str) -> Result<OnDuplicate> {
        match text {
            "report" => Ok(OnDuplicate::Report),
            "merge" => Ok(OnDuplicate::Merge),
            other => Err(Error::invalid(format!(
                "on_duplicate must be 'report' or 'merge', got {other:?}"
            ))),
        }
    }
}

/// What a wiki page's write adds to an entry's ([`Engine::create_entry_with`]).
#[derive(Debug, Default)]
pub(crate) struct EntryExtras {
    /// The file's name (else one made from the title or key).
    pub file_name: Option<String>,
    /// Who may read it (`None`: every reader of the knowledge base).
    pub readers: Option<Vec<String>>,
    /// The passages it cites.
    pub sources: Vec<quarry_store::PageSource>,
    /// The key must have no current entry with these readers (a page's first version).
    pub first_version: bool,
}

/// How a note is written as an entry (all optional; see the module docs).
#[derive(Debug, Clone, Default)]
pub struct EntryOptions {
    /// The fact's key in its knowledge base.
    pub key: Option<String>,
    /// The entry (public id) this one supersedes.
    pub supersedes: Option<String>,
    /// Start of validity (Unix ms).
    pub valid_from: Option<i64>,
    /// End of validity (Unix ms, exclusive).
    pub valid_to: Option<i64>,
    /// When it expires (Unix ms).
    pub expires_at: Option<i64>,
    /// Time to live, in seconds (instead of `expires_at`).
    pub ttl_seconds: Option<u64>,
    /// The entries (public ids) it was derived from.
    pub derived_from: Vec<String>,
    /// Who wrote it and from where: a JSON object the surface fills (user, token, client,
    /// conversation, tool call).
    pub provenance: serde_json::Map<String, serde_json::Value>,
    /// What to do with near-duplicates.
    pub on_duplicate: OnDuplicate,
}

/// A current entry a new one nearly duplicates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NearDuplicate {
    /// Its public id.
    pub id: String,
    /// Its title (or file name).
    pub title: String,
    /// Its key, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The share of their content words in common (see [`near_duplicate`]), 0–1.
    pub similarity: f32,
}

/// What [`Engine::create_entry`] did.
#[derive(Debug, Clone)]
pub struct CreatedEntry {
    /// The entry written (or the existing one, for a duplicate).
    pub file: KbFile,
    /// Whether the same content under the same key was already current (nothing new).
    pub duplicate: bool,
    /// The entry it superseded, as it is now.
    pub superseded: Option<KbFile>,
    /// Current entries it nearly duplicates (reported, or the one merged with first).
    pub near_duplicates: Vec<NearDuplicate>,
    /// Whether it was merged with (written as the new version of) the first of those.
    pub merged: bool,
}

/// An entry's versions and what happened to them ([`Engine::entry_history`]).
#[derive(Debug, Clone, Serialize)]
pub struct EntryHistory {
    /// Every version of its key (itself alone without one), in the order written.
    pub versions: Vec<KbFile>,
    /// The events, oldest first (deleted versions' too).
    pub events: Vec<HistoryEvent>,
}

/// What [`Engine::delete_knowledge_by`] deleted.
#[derive(Debug, Clone)]
pub struct DeletedKnowledge {
    /// The entry (or document) deleted.
    pub file: KbFile,
    /// The entries derived from it that went with it (public ids; those in knowledge bases
    /// the caller may use — others went too, unnamed).
    pub derived: Vec<String>,
}

/// An instant given by a caller: Unix milliseconds, an RFC 3339 timestamp
/// (`2026-06-01T12:00:00Z`) or a date (`2026-06-01`, its start in UTC).
pub fn parse_instant(name: &str, value: &serde_json::Value) -> Result<i64> {
    let bad = || {
        Error::invalid(format!(
            "{name} must be an RFC 3339 timestamp (2026-06-01T12:00:00Z), a date (2026-06-01) \
             or Unix milliseconds"
        ))
    };
    match value {
        serde_json::Value::Number(n) => n.as_i64().ok_or_else(bad),
        serde_json::Value::String(s) => {
            let s = s.trim();
            if let Ok(ms) = s.parse::<i64>() {
                return Ok(ms);
            }
            quarry_metadata::Date::parse(s)
                .map(|d| d.millis)
                .ok_or_else(bad)
        }
        _ => Err(bad()),
    }
}

/// A key has 1 to [`MAX_KEY_CHARS`] characters, none of them control characters.
fn check_key(key: &str) -> Result<()> {
    let n = key.chars().count();
    if key.trim().is_empty() || n > MAX_KEY_CHARS || key.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "key must have 1 to {MAX_KEY_CHARS} characters and no control characters"
        )));
    }
    Ok(())
}

/// The content words of a text as the keyword index sees them (cut, stemmed, lower-cased;
/// function words left out), each once.
fn words(text: &str) -> HashSet<String> {
    quarry_fts::analyzer::tokens(text)
        .into_iter()
        .filter(|t| t.kind != quarry_fts::analyzer::TokenKind::Exact)
        .map(|t| t.text)
        .filter(|w| !quarry_fts::query::is_stop_word(w))
        .collect()
}

/// Whether two entries' texts state the same fact, the later one at most adding to it, and
/// how similar they are (`Some(jaccard)`). Content words are compared as the keyword index
/// cuts and stems them (so "limits" meets "limit", and Chinese or Japanese are cut into
/// words), function words left out. They match when every content word of the shorter text
/// is in the other — the same stem, or one stem the other's start — (at least
/// [`NEAR_DUPLICATE_OVERLAP`] of them once it has
/// [`NEAR_DUPLICATE_LONG_WORDS`]), their Jaccard similarity is at least
/// [`NEAR_DUPLICATE_JACCARD`] (a long document containing a short fact is not its
/// duplicate), and they state the same numbers. So a text that names another service, person
/// or value — each side has a word the other lacks — is an update or another fact, never a
/// duplicate; texts of fewer than three content words never match. Measured in `eval/memory`.
pub fn near_duplicate(a: &str, b: &str) -> Option<f32> {
    let (a, b) = (words(a), words(b));
    let (shorter, longer) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    if shorter.len() < 3 {
        return None;
    }
    let numbers = |w: &HashSet<String>| -> Vec<String> {
        let mut n: Vec<String> = w
            .iter()
            .filter(|t| t.chars().any(|c| c.is_ascii_digit()))
            .cloned()
            .collect();
        n.sort_unstable();
        n
    };
    if numbers(&a) != numbers(&b) {
        return None;
    }
    // A word of the shorter text is found when the longer has it, or — for texts of a few
    // hundred words at most — a word one of whose stems is the other's start (stems of
    // five letters or more: "primari" / "primarili").
    let found = |w: &String| {
        longer.contains(w)
            || (longer.len() <= 300
                && w.chars().count() >= 5
                && longer.iter().any(|l| {
                    l.chars().count() >= 5
                        && (l.starts_with(w.as_str()) || w.starts_with(l.as_str()))
                }))
    };
    let shared = shorter.iter().filter(|w| found(w)).count();
    let needed = if shorter.len() >= NEAR_DUPLICATE_LONG_WORDS {
        NEAR_DUPLICATE_OVERLAP
    } else {
        1.0
    };
    let contained = shared as f32 / shorter.len() as f32;
    let jaccard = shared as f32 / (a.len() + b.len() - shared) as f32;
    (contained >= needed && jaccard >= NEAR_DUPLICATE_JACCARD).then_some(jaccard)
}

impl Engine {
    /// Creates a note in the knowledge base `kb` (created when missing and the caller may
    /// write to its space). Returns the note and whether the same content was already there
    /// (then nothing new is created). A note is a knowledge entry without a key (see
    /// [`Engine::create_entry`] for one with a key, a window or sources).
    pub fn create_note(&self, kb: &str, note: NewNote) -> Result<(KbFile, bool)> {
        let created = self.create_entry(kb, note, &EntryOptions::default())?;
        Ok((created.file, created.duplicate))
    }

    /// This handle reading `as_of` a moment (Unix ms; `None`: now): searches and listings
    /// see the knowledge entries valid then (see the module docs).
    pub fn at(&self, as_of: Option<i64>) -> Engine {
        let mut e = self.clone();
        e.as_of = as_of;
        e.request = None;
        e
    }

    /// The moment this handle reads at.
    pub(crate) fn read_moment(&self) -> i64 {
        self.as_of.unwrap_or_else(quarry_core::now_millis)
    }

    /// The documents of the entries this handle may use (in `collections` only, when
    /// given) that are not valid at its moment.
    pub(crate) fn out_of_time(&self, collections: Option<&[i64]>) -> Result<Vec<i64>> {
        let scoped = self.scope().collections.as_deref();
        let ids = match (collections, scoped) {
            (Some(ids), _) => Some(ids),
            (None, scoped) => scoped,
        };
        self.store()
            .entries_out_of_time(self.space(), ids, self.read_moment())
    }

    /// Creates a note as a knowledge entry (see the module docs): with a key (or
    /// `supersedes`) a new version, with a window or expiry, with its provenance and
    /// sources; near-duplicates of a write without a key are reported or merged.
    pub fn create_entry(
        &self,
        kb: &str,
        note: NewNote,
        options: &EntryOptions,
    ) -> Result<CreatedEntry> {
        self.create_entry_with(kb, note, options, EntryExtras::default())
    }

    /// [`Engine::create_entry`], with what a wiki page's write adds ([`EntryExtras`]).
    pub(crate) fn create_entry_with(
        &self,
        kb: &str,
        note: NewNote,
        options: &EntryOptions,
        extras: EntryExtras,
    ) -> Result<CreatedEntry> {
        self.require(Access::Write, "creating knowledge")?;
        if let Some(key) = &options.key {
            check_key(key)?;
        }
        let untitled = note.title.is_none();
        let (mut file, markdown) = self.prepare_note(note)?;
        // A keyed fact without a title is named by its key: the key says what the fact is
        // about ("search.team"), and a file's name is indexed with its passages, so "which
        // team owns the search service?" finds this fact before another service's team.
        if let Some(key) = options.key.as_deref().filter(|_| untitled) {
            file.original_name = crate::kb::notes::note_file_name(Some(key), &markdown);
        }
        if let Some(name) = extras.file_name {
            file.original_name = name;
        }
        file.readers = extras.readers;
        let base = self.knowledge_base_for_writing(kb)?;
        let mut entry = self.new_entry(base.collection_id, options)?;
        entry.sources = extras.sources;
        entry.first_version = extras.first_version;
        self.check_key_readable(base.collection_id, &entry, file.readers.as_deref())?;
        let mut near = Vec::new();
        let mut merged = false;
        if entry.key.is_none() && entry.supersedes.is_none() {
            near = self.near_duplicates(base.collection_id, &markdown)?;
            if options.on_duplicate == OnDuplicate::Merge
                && let Some(first) = near.first()
            {
                let row = self
                    .store()
                    .kb_file(base.collection_id, &first.id)?
                    .map(|f| f.row_id)
                    .ok_or_else(|| Error::Conflict("the entry to merge with went away".into()))?;
                entry.supersedes = Some(row);
                merged = true;
            }
        }
        let blobs = self.blobs()?;
        let refs = blobs.lock_shared()?;
        let sha256 = blobs.put(markdown.as_bytes())?;
        let added =
            self.store()
                .add_entry(base.collection_id, &NewKbFile { sha256, ..file }, &entry)?;
        drop(refs);
        let (file, superseded) = match added {
            AddedEntry::Added { file, superseded } => (file, superseded.map(|b| *b)),
            AddedEntry::Duplicate { file } if self.may_read_file(&file) => {
                return Ok(CreatedEntry {
                    file,
                    duplicate: true,
                    superseded: None,
                    near_duplicates: Vec::new(),
                    merged: false,
                });
            }
            // The same text as an entry this caller may not read: which one stays unsaid.
            AddedEntry::Duplicate { .. } => {
                return Err(Error::Conflict(
                    "the same content is already in this knowledge base".into(),
                ));
            }
        };
        self.index_note_now(&file)?;
        Ok(CreatedEntry {
            file,
            duplicate: false,
            superseded,
            near_duplicates: near,
            merged,
        })
    }

    /// The store's form of `options`, checked: ids resolved among what the caller may
    /// read, bounds in order, one of `expires_at` and `ttl`.
    fn new_entry(&self, collection_id: i64, options: &EntryOptions) -> Result<NewEntry> {
        if let Some(key) = &options.key {
            check_key(key)?;
        }
        if let (Some(from), Some(to)) = (options.valid_from, options.valid_to)
            && to <= from
        {
            return Err(Error::invalid("valid_to must be after valid_from"));
        }
        let now = quarry_core::now_millis();
        let expires_at = match (options.expires_at, options.ttl_seconds) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid("give expires_at or ttl, not both"));
            }
            (Some(at), None) => Some(at),
            (None, Some(0)) => return Err(Error::invalid("ttl must be at least 1 second")),
            (None, Some(ttl)) if ttl > MAX_TTL_SECONDS => {
                return Err(Error::invalid("ttl must be at most 100 years"));
            }
            (None, Some(ttl)) => Some(now.saturating_add(i64::try_from(ttl).unwrap_or(0) * 1000)),
            (None, None) => None,
        };
        if let Some(at) = expires_at
            && at <= now
        {
            return Err(Error::invalid(
                "expires_at is in the past: the entry would never be read",
            ));
        }
        let supersedes = match &options.supersedes {
            Some(id) => Some(
                self.store()
                    .kb_file(collection_id, id)?
                    .filter(|f| f.id == *id && self.may_read_file(f))
                    .map(|f| f.row_id)
                    .ok_or_else(|| {
                        Error::not_found(format!(
                            "supersedes: knowledge '{id}' not found in this knowledge base"
                        ))
                    })?,
            ),
            None => None,
        };
        if options.derived_from.len() > MAX_SOURCES {
            return Err(Error::invalid(format!(
                "derived_from names at most {MAX_SOURCES} entries"
            )));
        }
        let mut derived_from = Vec::with_capacity(options.derived_from.len());
        for id in &options.derived_from {
            let file = self.find_knowledge(None, id).map_err(|e| match e {
                Error::NotFound(_) => {
                    Error::not_found(format!("derived_from: knowledge '{id}' not found"))
                }
                other => other,
            })?;
            derived_from.push(file.row_id);
        }
        Ok(NewEntry {
            key: options.key.clone(),
            supersedes,
            // The moment a ttl counts from, so the window is exactly as long as asked.
            valid_from: Some(options.valid_from.unwrap_or(now)),
            valid_to: options.valid_to,
            expires_at,
            provenance: serde_json::Value::Object(options.provenance.clone()).to_string(),
            derived_from,
            sources: Vec::new(),
            first_version: false,
        })
    }

    /// A key write only ever reaches entries the writer may read. A key names one current
    /// entry per set of readers (the store's rule), so a write whose readers differ from a
    /// hidden current entry's starts a chain of its own, exactly as for a free key, and never
    /// learns of the hidden one (issue 65 item 5). Only a write that names readers it is not
    /// among, the hidden entry's own, would reach it: that one is refused, in words that are
    /// the same whichever entry it is (its id, title, readers and time stay unsaid).
    fn check_key_readable(
        &self,
        collection_id: i64,
        entry: &NewEntry,
        readers: Option<&[String]>,
    ) -> Result<()> {
        if self.scope().readers.is_none() {
            return Ok(());
        }
        // A version named by id whose successor is hidden: the store's answer would name the
        // successor, so the words here say only that it is not current.
        if let Some(row) = entry.supersedes
            && let Some(target) = self.store().kb_file_by_row(row)?
            && let Some(next) = target.entry.as_ref().and_then(|e| e.superseded_by.clone())
            && let Some(successor) = self.store().kb_file(collection_id, &next)?
            && !self.may_read_file(&successor)
        {
            return Err(Error::Conflict(format!(
                "entry {} is not the current version of its key: write the key to add a version",
                target.id
            )));
        }
        let key = match (&entry.key, entry.supersedes) {
            (Some(key), _) => Some(key.clone()),
            (None, Some(row)) => self
                .store()
                .kb_file_by_row(row)?
                .and_then(|f| f.entry.and_then(|e| e.key)),
            (None, None) => None,
        };
        let Some(key) = key else {
            return Ok(());
        };
        let hidden_current = self
            .store()
            .entry_versions(collection_id, &key)?
            .iter()
            .any(|f| {
                f.entry.as_ref().is_some_and(|e| e.superseded_by.is_none())
                    && f.readers.as_deref() == readers
                    && !self.may_read_file(f)
            });
        if hidden_current {
            return Err(Error::Conflict(format!(
                "the key {key:?} cannot be written in this knowledge base: write it under \
                 another key"
            )));
        }
        Ok(())
    }

    /// The current entries of a knowledge base that `markdown` nearly duplicates, closest
    /// first (candidates: its keyword hits there; the rule: [`near_duplicate`]).
    fn near_duplicates(&self, collection_id: i64, markdown: &str) -> Result<Vec<NearDuplicate>> {
        let Some(fts) = self.fts()? else {
            return Ok(Vec::new());
        };
        fts.reload()?;
        let query: String = markdown
            .split_whitespace()
            .take(CANDIDATE_QUERY_WORDS)
            .collect::<Vec<_>>()
            .join(" ");
        let parsed = fts.parse_query(&query);
        let hits = fts.search(&parsed, Some(&[collection_id]), NEAR_DUPLICATE_CANDIDATES)?;
        let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        let files = self.store().kb_file_ids(&ids)?;
        let now = quarry_core::now_millis();
        let mut found = Vec::new();
        for doc in self.store().documents_by_ids(&ids)? {
            let Some(uid) = files.get(&doc.id) else {
                continue;
            };
            let Some(file) = self.store().kb_file(collection_id, uid)? else {
                continue;
            };
            let current = file.entry.as_ref().is_none_or(|e| e.valid_at(now));
            if !current || !self.may_read_file(&file) {
                continue;
            }
            let body = quarry_core::into_indexed_body(doc.body.clone(), &doc.furniture);
            if let Some(similarity) = near_duplicate(markdown, &body) {
                found.push(NearDuplicate {
                    id: file.id.clone(),
                    title: file
                        .note
                        .as_ref()
                        .and_then(|n| n.title.clone())
                        .unwrap_or_else(|| doc.title.clone()),
                    key: file.entry.as_ref().and_then(|e| e.key.clone()),
                    similarity,
                });
            }
        }
        found.sort_by(|a, b| b.similarity.total_cmp(&a.similarity).then(a.id.cmp(&b.id)));
        Ok(found)
    }

    /// An entry's versions (every one of its key, in the order written; itself alone
    /// without a key) and its history, as far as the caller may read them.
    pub fn entry_history(&self, file: &KbFile) -> Result<EntryHistory> {
        let key = file.entry.as_ref().and_then(|e| e.key.clone());
        let (versions, hidden): (Vec<KbFile>, Vec<KbFile>) = match &key {
            Some(key) => self
                .store()
                .entry_versions(file.collection_id, key)?
                .into_iter()
                .partition(|f| self.may_read_file(f)),
            None => (vec![file.clone()], Vec::new()),
        };
        let mut events = self.store().entry_history(file.collection_id, &file.id)?;
        if self.scope().readers.is_some() {
            // Only what happened to versions the caller may read, and no event that names
            // one it may not (a version deleted since is not known to be readable).
            let readable: HashSet<&str> = versions.iter().map(|f| f.id.as_str()).collect();
            events.retain(|e| {
                let detail = e.detail.to_string();
                readable.contains(e.entry.as_str())
                    && !hidden.iter().any(|h| detail.contains(h.id.as_str()))
            });
        }
        Ok(EntryHistory { versions, events })
    }

    /// Deletes a knowledge-base document and, transitively, every entry derived from it;
    /// `by` (who deleted it, from where) goes into the history beside each.
    pub fn delete_knowledge_by(
        &self,
        file: &KbFile,
        by: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<DeletedKnowledge> {
        self.require(Access::Write, "deleting a document")?;
        let gone = self.store().delete_entry(
            file.collection_id,
            file.row_id,
            &serde_json::Value::Object(by.clone()).to_string(),
        )?;
        let reach: HashSet<i64> = self.collections()?.iter().map(|c| c.id).collect();
        Ok(DeletedKnowledge {
            file: file.clone(),
            derived: gone
                .into_iter()
                .filter(|(collection, _)| reach.contains(collection))
                .map(|(_, id)| id)
                .collect(),
        })
    }

    /// Whether `file` is valid at this handle's moment (a file that is no entry always is).
    pub(crate) fn valid_now(&self, file: &KbFile) -> bool {
        let at = self.read_moment();
        file.entry.as_ref().is_none_or(|e| e.valid_at(at))
    }
}

/// A note's file row and Markdown, checked ([`Engine::prepare_note`]).
pub(crate) type PreparedNote = (NewKbFile, String);

impl Engine {
    /// Checks a note and makes its file row (the blob's hash left for the caller to fill).
    pub(crate) fn prepare_note(&self, note: NewNote) -> Result<PreparedNote> {
        if !crate::kb::notes::NOTE_KINDS.contains(&note.kind.as_str()) {
            return Err(Error::invalid(format!(
                "kind must be one of text, image, video, url; got {:?}",
                note.kind
            )));
        }
        let title = crate::kb::notes::check_title(&note.title)?;
        let tags = crate::kb::notes::check_tags(&note.tags)?;
        let markdown = crate::kb::notes::to_markdown(&note.content, note.format)?;
        Ok((
            NewKbFile {
                meta: note.fields.encode(),
                original_name: crate::kb::notes::note_file_name(title.as_deref(), &markdown),
                sha256: String::new(),
                format: "md".into(),
                mime: "text/markdown".into(),
                size: markdown.len() as u64,
                note: Some(NoteMeta {
                    title,
                    tags,
                    kind: note.kind,
                    summary: None,
                }),
                readers: None,
            },
            markdown,
        ))
    }
}
