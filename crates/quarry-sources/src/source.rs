//! What every kind of source is: the trait, and the listing it gives.

use crate::error::SourceError;

/// One file a source holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Path inside the source, `/`-separated, without a leading `/`.
    pub path: String,
    /// What changes when the content may have changed (a Git blob id, a size and stat
    /// stamp, an ETag). Equal versions mean "unchanged" without fetching.
    pub version: String,
    /// Size in bytes, when the listing says.
    pub size: Option<u64>,
}

/// What a source holds now.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Every item the mask admits, sorted by path.
    pub items: Vec<Item>,
    /// The revision listed, where the source has one (a Git commit id).
    pub revision: Option<String>,
    /// Entries that could not be listed: (path, reason). They are neither synced nor
    /// deleted.
    pub problems: Vec<(String, String)>,
}

/// A place documents come from.
pub trait Source: Send {
    /// Everything it holds now (items the mask admits), sorted by path.
    fn list(&mut self) -> Result<Listing, SourceError>;
    /// One listed item's bytes, at most `max_bytes` of them (more is an error).
    fn fetch(&mut self, item: &Item, max_bytes: u64) -> Result<Vec<u8>, SourceError>;
    /// What `paths` hold now — the items [`Source::list`] would give at or under each of
    /// them (a path may be a folder) — for a sync of a few changed paths. A folder source
    /// reads only these paths; the others list everything and keep those.
    fn list_paths(&mut self, paths: &[String]) -> Result<Listing, SourceError> {
        let mut listing = self.list()?;
        let kept = |p: &str| paths.iter().any(|q| is_within(p, q));
        listing.items.retain(|i| kept(&i.path));
        listing.problems.retain(|(p, _)| kept(p));
        Ok(listing)
    }
}

/// Whether `path` is `prefix` or under it (`/`-separated; the empty prefix holds everything).
pub fn is_within(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.starts_with(prefix) && path[prefix.len()..].starts_with('/'))
}
