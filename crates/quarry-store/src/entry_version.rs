//! A knowledge entry's version facts, as a [`crate::KbFile`] carries them (the entries
//! themselves are [`crate::EntryStore`]'s).

use serde::Serialize;

/// A knowledge entry's version facts ([`KbFile::entry`](crate::KbFile::entry)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryVersion {
    /// Its key, when written with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Start of validity (Unix ms).
    pub valid_from: i64,
    /// End of validity as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<i64>,
    /// When it expires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// The end of its validity window (the earliest of `valid_to`, `expires_at` and its
    /// successor's `valid_from`); absent while open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<i64>,
    /// The entry (public id) that superseded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// The entry (public id) it superseded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// Who wrote it and from where (a JSON object).
    pub provenance: serde_json::Value,
    /// The entries (public ids) it was derived from (those still there).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub derived_from: Vec<String>,
}

impl EntryVersion {
    /// Whether its validity window holds `at` (Unix ms).
    pub fn valid_at(&self, at: i64) -> bool {
        self.valid_from <= at && self.valid_until.is_none_or(|end| at < end)
    }
}
