//! The wiki's log (issue 68): one page, slug `log`, that entries are appended to — what was
//! ingested, which pages were written and why — each dated and signed with who wrote it. Every
//! append is a version of the page, so the log's history is the page's.

use quarry_core::{Error, Result};

use crate::engine::Engine;
use crate::kb::pages::{LOG_SLUG, PageStatus, PageView, PageWrite};

/// Most characters of one log entry.
pub const MAX_LOG_ENTRY_CHARS: usize = 2_000;
/// Tries of an append that meets another writer's append.
const APPEND_TRIES: usize = 5;

impl Engine {
    /// Appends `entry` (one line; line breaks become spaces) to the log page of `kb`,
    /// creating it on first use, and returns the page. Two appends at once both land: the
    /// one that loses the race appends again on the version the other wrote.
    pub fn append_log(
        &self,
        kb: &str,
        entry: &str,
        provenance: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<PageView> {
        let entry = entry.split_whitespace().collect::<Vec<_>>().join(" ");
        if entry.is_empty() {
            return Err(Error::invalid("a log entry needs text"));
        }
        if entry.chars().count() > MAX_LOG_ENTRY_CHARS {
            return Err(Error::invalid(format!(
                "a log entry is at most {MAX_LOG_ENTRY_CHARS} characters: log what happened, link the pages ([[slug]])"
            )));
        }
        let who = ["user", "token", "client", "via"]
            .iter()
            .find_map(|k| provenance.get(*k).and_then(|v| v.as_str()))
            .unwrap_or("someone");
        let line = format!(
            "- {} {who}: {entry}",
            quarry_core::iso8601_millis(quarry_core::now_millis())
        );
        let mut last = None;
        for _ in 0..APPEND_TRIES {
            let current = match self.read_page(kb, LOG_SLUG) {
                Ok(page) => Some(page),
                Err(Error::NotFound(_)) => None,
                Err(e) => return Err(e),
            };
            let body = match &current {
                Some(page) => format!("{}\n{line}", page.body.trim_end()),
                None => format!("# Log\n\nWhat happened in this wiki, oldest first.\n\n{line}"),
            };
            let write = PageWrite {
                slug: LOG_SLUG.into(),
                title: "Log".into(),
                page_type: "log".into(),
                body,
                status: PageStatus::Published,
                tags: Vec::new(),
                sources: Vec::new(),
                base_version: current.map(|p| p.head.version),
                provenance: provenance.clone(),
            };
            match self.write_page(kb, write) {
                Err(Error::Conflict(m)) => last = Some(m),
                other => return other,
            }
        }
        Err(Error::Conflict(format!(
            "the log kept changing while appending ({}): try again",
            last.unwrap_or_default()
        )))
    }
}
