//! What the tests of every kind share: a sync the way the engine runs one (list, plan,
//! fetch, resolve, remember), a one-line summary of its changes, and the rule for peers a
//! machine may lack (a test passes with a note, except under CI, where it fails).

use std::collections::HashMap;

use quarry_sources::{Change, Item, Known, Listing, Outcome, Source, SourceError, plan, resolve};

/// The size limit of the tests' fetches.
pub(crate) const MAX: u64 = 1 << 20;

/// One sync's results.
pub(crate) struct Synced {
    pub(crate) listing: Listing,
    pub(crate) outcome: Outcome,
    /// What the next sync remembers.
    pub(crate) known: Vec<Known>,
    /// Items whose fetch failed with an error that is not transient (the engine reports them
    /// as skipped and leaves their documents as they were).
    pub(crate) skipped: Vec<(String, SourceError)>,
}

/// Lists and fetches what the plan says, as the engine does: a fetch that fails for good
/// skips its item (a document it had stays remembered as it was), a transient failure
/// panics (the engine would stop the sync).
pub(crate) fn sync(source: &mut dyn Source, known: &[Known]) -> Synced {
    let listing = source.list().expect("list");
    let p = plan(known, &listing);
    let mut fetched: Vec<(Item, String)> = Vec::new();
    let mut skipped = Vec::new();
    for item in &p.fetch {
        match source.fetch(item, MAX) {
            Ok(bytes) => fetched.push((item.clone(), quarry_ingest::content_hash(&bytes))),
            Err(e) if e.is_transient() => panic!("fetch {}: {e}", item.path),
            Err(e) => skipped.push((item.path.clone(), e)),
        }
    }
    let shas: HashMap<String, String> = fetched
        .iter()
        .map(|(i, s)| (i.path.clone(), s.clone()))
        .collect();
    let outcome = resolve(p, known, fetched);
    let old: HashMap<&str, &Known> = known.iter().map(|k| (k.path.as_str(), k)).collect();
    let known = listing
        .items
        .iter()
        .filter_map(|i| match shas.get(&i.path) {
            Some(sha) => Some(Known {
                path: i.path.clone(),
                version: i.version.clone(),
                sha256: sha.clone(),
            }),
            None => old.get(i.path.as_str()).map(|k| (*k).clone()),
        })
        .collect();
    Synced {
        listing,
        outcome,
        known,
        skipped,
    }
}

/// [`sync`], every fetch succeeding: the listing, the outcome and what is remembered.
pub(crate) fn sync_once(
    source: &mut dyn Source,
    known: &[Known],
) -> (Listing, Outcome, Vec<Known>) {
    let s = sync(source, known);
    assert!(
        s.skipped.is_empty(),
        "fetches failed: {:?}",
        s.skipped
            .iter()
            .map(|(p, e)| format!("{p}: {e}"))
            .collect::<Vec<_>>()
    );
    (s.listing, s.outcome, s.known)
}

/// `+added`, `~changed`, `=touched`, `from->to`, `-deleted`, in path order.
pub(crate) fn summary(outcome: &Outcome) -> Vec<String> {
    outcome
        .changes
        .iter()
        .map(|c| match c {
            Change::Added { item, .. } => format!("+{}", item.path),
            Change::Changed { item, .. } => format!("~{}", item.path),
            Change::Touched { item, .. } => format!("={}", item.path),
            Change::Renamed { from, item } => format!("{}->{}", from.path, item.path),
            Change::Deleted { known } => format!("-{}", known.path),
        })
        .collect()
}

/// The paths of a listing.
pub(crate) fn paths(listing: &Listing) -> Vec<&str> {
    listing.items.iter().map(|i| i.path.as_str()).collect()
}

/// Whether a test that needs `what` can run: `missing` is `None` when it can. Without it,
/// the test passes with a note — except under CI (`CI=true`), where it fails.
pub(crate) fn available(what: &str, missing: Option<&str>) -> bool {
    let Some(why) = missing else {
        return true;
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} is not available ({why}): CI runs these tests"
    );
    eprintln!("skipped: {what} is not available ({why})");
    false
}
