//! What owners read to learn what their knowledge bases are asked (issue 69): a log of
//! searches — with the query text only where the administrator keeps it, and only for searches
//! that found nothing — and daily usage counts by person and token.
//!
//! Both are written in batches by `quarry-audit`'s writer thread and read by the space's
//! admins. The store does not interpret metric names, surfaces or wordings; `quarry-audit`
//! owns their words. Views read aggregates only: the unanswered groups from an index that
//! covers them, the usage from the daily counts, so a view costs the same at a million
//! searches as at a thousand (bench/insight).

use quarry_core::Result;
use serde::Serialize;

/// Milliseconds in a day: usage is counted per UTC day.
pub const DAY_MS: i64 = 86_400_000;

/// One search as the insight log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchRecord {
    /// When (Unix milliseconds).
    pub at: i64,
    /// The space searched (UUID).
    pub space_id: String,
    /// The knowledge base, when the search was limited to exactly one; `""` otherwise.
    pub knowledge_base: String,
    /// Who searched (user UUID), `""` for the machine's owner.
    pub user_id: String,
    /// With which token (UUID), `""` for none.
    pub token_id: String,
    /// Where (`rest`, `mcp`, `chat`, `qmd`, …).
    pub surface: String,
    /// Results returned.
    pub results: u32,
    /// The best result's score, when there was one.
    pub top_score: Option<f64>,
    /// Whether the search counts as unanswered (nothing came back).
    pub unanswered: bool,
    /// What groups similar unanswered questions: the query's normalized terms, or their hash
    /// when the text is not kept; empty for an answered search.
    pub wording: String,
    /// The query text, when kept.
    pub query: Option<String>,
}

/// Which searches a view reads: one space, optionally one knowledge base, a time window.
#[derive(Debug, Clone, Default)]
pub struct InsightWindow {
    /// The space (UUID).
    pub space_id: String,
    /// Only searches limited to one knowledge base, recorded under any of these names (its
    /// UUID, name or collection id: surfaces record it as they were asked).
    pub knowledge_base: Option<Vec<String>>,
    /// From (Unix milliseconds, inclusive).
    pub since: i64,
    /// Until (Unix milliseconds, exclusive).
    pub until: i64,
}

impl InsightWindow {
    /// The window's first UTC day (days since the Unix epoch).
    pub fn first_day(&self) -> i64 {
        self.since.div_euclid(DAY_MS)
    }

    /// Its last UTC day (the one holding `until - 1`).
    pub fn last_day(&self) -> i64 {
        (self.until - 1).div_euclid(DAY_MS)
    }
}

/// Unanswered searches with the same wording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnansweredGroup {
    /// The shared wording (terms, or a hash).
    pub wording: String,
    /// Searches in the window.
    pub count: u64,
    /// The first and last of them (Unix milliseconds).
    pub first_at: i64,
    /// The last.
    pub last_at: i64,
    /// The latest query text kept for the group, if any.
    pub query: Option<String>,
    /// The best score a search of the group saw (a near miss below the threshold).
    pub best_score: Option<f64>,
    /// Searches per UTC day (days since the Unix epoch), oldest first.
    pub days: Vec<(i64, u64)>,
}

impl UnansweredGroup {
    /// Keeps the better of its best score and `score` (either may be missing).
    pub fn note_score(&mut self, score: Option<f64>) {
        self.best_score = match (self.best_score, score) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

/// A count of one thing on one day, for one person and token.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct UsageCount {
    /// The space (UUID).
    pub space_id: String,
    /// UTC day (days since the Unix epoch).
    pub day: i64,
    /// What was counted (`searches`, `tool_calls`, …).
    pub metric: String,
    /// Of what (a tool, an upstream, a surface), `""` for nothing in particular.
    pub subject: String,
    /// By whom (user UUID), `""` for the machine's owner.
    pub user_id: String,
    /// With which token (UUID), `""` for none.
    pub token_id: String,
    /// How many.
    pub count: u64,
    /// A sum the metric carries (milliseconds waited, model tokens), else 0.
    pub total: u64,
}

/// The insight log behind one trait, like everything the store keeps.
pub trait InsightStore: Send + Sync {
    /// Appends searches and adds usage counts (each to its day's row by subject and to its
    /// day's row by person and token, made when missing), in one transaction.
    fn append_insight(&self, searches: &[SearchRecord], usage: &[UsageCount]) -> Result<()>;
    /// The most frequent unanswered wordings in `window`, most searched first (ties: latest
    /// first), each with its searches per day.
    fn unanswered_groups(
        &self,
        window: &InsightWindow,
        limit: usize,
    ) -> Result<Vec<UnansweredGroup>>;
    /// The usage counts in `window` (its `knowledge_base` is not used) by day, metric and
    /// subject (`user_id` and `token_id` empty), oldest day first.
    fn usage_by_subject(&self, window: &InsightWindow) -> Result<Vec<UsageCount>>;
    /// The usage counts in `window` by person and token: per day and metric when `per_day`,
    /// else added up over the window per metric (`day` then the window's first day); `subject`
    /// empty.
    fn usage_by_person(&self, window: &InsightWindow, per_day: bool) -> Result<Vec<UsageCount>>;
    /// Removes searches and day counts older than `before` (Unix milliseconds); returns how
    /// many searches went.
    fn prune_insight(&self, before: i64) -> Result<u64>;
}

/// Which of its keys a usage table keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageKey {
    /// Day, metric and subject (`usage_daily`).
    Subject,
    /// Day, metric, person and token (`usage_people`).
    Person,
}

/// `usage` projected on `key` (the other fields emptied) with the counts of equal keys added
/// together, sorted by key: one row per key, as one upsert statement needs, in one order on
/// every node (so two nodes adding to the same days take their row locks in the same order).
pub fn merge_usage(usage: &[UsageCount], key: UsageKey) -> Vec<UsageCount> {
    // (space, day, metric, subject, user, token) → (count, total)
    type Key<'a> = (&'a str, i64, &'a str, &'a str, &'a str, &'a str);
    let mut merged: std::collections::BTreeMap<Key<'_>, (u64, u64)> =
        std::collections::BTreeMap::new();
    for u in usage {
        let (subject, user, token) = match key {
            UsageKey::Subject => (u.subject.as_str(), "", ""),
            UsageKey::Person => ("", u.user_id.as_str(), u.token_id.as_str()),
        };
        let e = merged
            .entry((
                u.space_id.as_str(),
                u.day,
                u.metric.as_str(),
                subject,
                user,
                token,
            ))
            .or_default();
        e.0 = e.0.saturating_add(u.count);
        e.1 = e.1.saturating_add(u.total);
    }
    merged
        .into_iter()
        .map(
            |((space_id, day, metric, subject, user_id, token_id), (count, total))| UsageCount {
                space_id: space_id.to_owned(),
                day,
                metric: metric.to_owned(),
                subject: subject.to_owned(),
                user_id: user_id.to_owned(),
                token_id: token_id.to_owned(),
                count,
                total,
            },
        )
        .collect()
}
