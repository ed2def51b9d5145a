//! What a sync does, decided apart from any source or store: [`plan`] before fetching,
//! [`resolve`] after.

use std::collections::{BTreeMap, HashMap};

use crate::source::{Item, Listing};

/// What the last sync remembered of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// Path inside the source.
    pub path: String,
    /// The version the source gave then.
    pub version: String,
    /// SHA-256 of the bytes synced then.
    pub sha256: String,
}

/// Before fetching: what to read and what is gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Items to fetch: paths not seen before, or whose version changed.
    pub fetch: Vec<Item>,
    /// Paths listed with the version remembered: nothing to read.
    pub unchanged: Vec<String>,
    /// Remembered paths the listing no longer has (deleted or renamed: [`resolve`] tells).
    pub gone: Vec<Known>,
}

/// Compares a listing with what the last sync remembered. Costs time in the size of the
/// listing, never of the content.
pub fn plan(known: &[Known], listing: &Listing) -> Plan {
    let by_path: HashMap<&str, &Known> = known.iter().map(|k| (k.path.as_str(), k)).collect();
    let mut out = Plan::default();
    let mut listed = std::collections::HashSet::with_capacity(listing.items.len());
    for item in &listing.items {
        listed.insert(item.path.as_str());
        match by_path.get(item.path.as_str()) {
            Some(k) if k.version == item.version && !item.version.is_empty() => {
                out.unchanged.push(item.path.clone());
            }
            _ => out.fetch.push(item.clone()),
        }
    }
    // Paths that could not be listed this time are neither fetched nor gone.
    let unlisted: std::collections::HashSet<&str> =
        listing.problems.iter().map(|(p, _)| p.as_str()).collect();
    out.gone = known
        .iter()
        .filter(|k| !listed.contains(k.path.as_str()) && !unlisted.contains(k.path.as_str()))
        .cloned()
        .collect();
    out.gone.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// One thing a sync does to the knowledge base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A path seen for the first time: a new document.
    Added {
        /// The item.
        item: Item,
        /// SHA-256 of its bytes.
        sha256: String,
    },
    /// New bytes at a known path: the document keeps its id and is converted again.
    Changed {
        /// The item.
        item: Item,
        /// SHA-256 of the new bytes.
        sha256: String,
        /// What was there.
        previous: Known,
    },
    /// The version changed but the bytes did not (a `touch`, a re-upload): only the
    /// remembered version moves.
    Touched {
        /// The item.
        item: Item,
        /// What was remembered.
        previous: Known,
    },
    /// The bytes of a gone path appeared at a new one: the document keeps its id, its name
    /// follows the path.
    Renamed {
        /// The path it had.
        from: Known,
        /// Where it is now.
        item: Item,
    },
    /// A remembered path is gone: its document is removed from every index.
    Deleted {
        /// What was remembered.
        known: Known,
    },
}

impl Change {
    /// The path the change is about (the new path of a rename).
    pub fn path(&self) -> &str {
        match self {
            Change::Added { item, .. }
            | Change::Changed { item, .. }
            | Change::Touched { item, .. }
            | Change::Renamed { item, .. } => &item.path,
            Change::Deleted { known } => &known.path,
        }
    }
}

/// What a sync does, once the items to fetch were read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Additions, changes, renames, touches and deletions, in path order.
    pub changes: Vec<Change>,
    /// Paths left as they were.
    pub unchanged: Vec<String>,
}

/// Decides what each fetched item is, by its bytes' SHA-256: `fetched` holds the items of
/// `plan.fetch` that were read (one that could not be read is left out by the caller, and
/// reported as skipped: its document, if any, stays as it was). A gone path whose bytes
/// reappear at a new path is a rename (paired in path order, each gone path once); a
/// known path whose bytes did not change is a touch.
pub fn resolve(plan: Plan, known: &[Known], fetched: Vec<(Item, String)>) -> Outcome {
    let by_path: HashMap<&str, &Known> = known.iter().map(|k| (k.path.as_str(), k)).collect();
    // Gone paths by content, in path order, for pairing with new paths.
    let mut gone_by_sha: BTreeMap<String, Vec<Known>> = BTreeMap::new();
    for k in plan.gone.iter().rev() {
        gone_by_sha
            .entry(k.sha256.clone())
            .or_default()
            .push(k.clone());
    }
    let mut fetched = fetched;
    fetched.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    let mut changes = Vec::with_capacity(fetched.len() + plan.gone.len());
    for (item, sha256) in fetched {
        match by_path.get(item.path.as_str()) {
            Some(previous) if previous.sha256 == sha256 => changes.push(Change::Touched {
                item,
                previous: (*previous).clone(),
            }),
            Some(previous) => changes.push(Change::Changed {
                item,
                sha256,
                previous: (*previous).clone(),
            }),
            None => match gone_by_sha.get_mut(&sha256).and_then(Vec::pop) {
                Some(from) => changes.push(Change::Renamed { from, item }),
                None => changes.push(Change::Added { item, sha256 }),
            },
        }
    }
    for known in gone_by_sha.into_values().flatten() {
        changes.push(Change::Deleted { known });
    }
    changes.sort_by(|a, b| a.path().cmp(b.path()));
    Outcome {
        changes,
        unchanged: plan.unchanged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(path: &str, version: &str) -> Item {
        Item {
            path: path.into(),
            version: version.into(),
            size: None,
        }
    }

    fn known(path: &str, version: &str, sha: &str) -> Known {
        Known {
            path: path.into(),
            version: version.into(),
            sha256: sha.into(),
        }
    }

    fn listing(items: Vec<Item>) -> Listing {
        Listing {
            items,
            ..Listing::default()
        }
    }

    #[test]
    fn a_first_sync_fetches_everything() {
        let p = plan(&[], &listing(vec![item("a.md", "1"), item("b.md", "2")]));
        assert_eq!(p.fetch.len(), 2);
        assert!(p.unchanged.is_empty() && p.gone.is_empty());
        let out = resolve(
            p,
            &[],
            vec![
                (item("b.md", "2"), "sb".into()),
                (item("a.md", "1"), "sa".into()),
            ],
        );
        assert_eq!(
            out.changes,
            vec![
                Change::Added {
                    item: item("a.md", "1"),
                    sha256: "sa".into()
                },
                Change::Added {
                    item: item("b.md", "2"),
                    sha256: "sb".into()
                },
            ]
        );
    }

    #[test]
    fn versions_decide_what_is_read_and_hashes_what_changed() {
        let known = vec![
            known("same.md", "v1", "s1"),
            known("edited.md", "v1", "s2"),
            known("touched.md", "v1", "s3"),
            known("deleted.md", "v1", "s4"),
            known("old-name.md", "v1", "s5"),
        ];
        let now = listing(vec![
            item("edited.md", "v2"),
            item("new-name.md", "v9"),
            item("new.md", "v1"),
            item("same.md", "v1"),
            item("touched.md", "v2"),
        ]);
        let p = plan(&known, &now);
        assert_eq!(p.unchanged, vec!["same.md"]);
        assert_eq!(
            p.fetch.iter().map(|i| i.path.as_str()).collect::<Vec<_>>(),
            vec!["edited.md", "new-name.md", "new.md", "touched.md"]
        );
        assert_eq!(
            p.gone.iter().map(|k| k.path.as_str()).collect::<Vec<_>>(),
            vec!["deleted.md", "old-name.md"]
        );
        let out = resolve(
            p,
            &known,
            vec![
                (item("edited.md", "v2"), "s2b".into()),
                (item("new-name.md", "v9"), "s5".into()),
                (item("new.md", "v1"), "s6".into()),
                (item("touched.md", "v2"), "s3".into()),
            ],
        );
        assert_eq!(
            out.changes,
            vec![
                Change::Deleted {
                    known: known[3].clone()
                },
                Change::Changed {
                    item: item("edited.md", "v2"),
                    sha256: "s2b".into(),
                    previous: known[1].clone()
                },
                Change::Renamed {
                    from: known[4].clone(),
                    item: item("new-name.md", "v9")
                },
                Change::Added {
                    item: item("new.md", "v1"),
                    sha256: "s6".into()
                },
                Change::Touched {
                    item: item("touched.md", "v2"),
                    previous: known[2].clone()
                },
            ]
        );
        assert_eq!(out.unchanged, vec!["same.md"]);
    }

    #[test]
    fn two_copies_of_one_file_renamed_pair_once_each() {
        let known = vec![known("a1.md", "v", "s"), known("a2.md", "v", "s")];
        let now = listing(vec![
            item("b.md", "w"),
            item("c.md", "w"),
            item("d.md", "w"),
        ]);
        let p = plan(&known, &now);
        let fetched = now
            .items
            .iter()
            .map(|i| (i.clone(), "s".to_owned()))
            .collect();
        let out = resolve(p, &known, fetched);
        let kinds: Vec<String> = out
            .changes
            .iter()
            .map(|c| match c {
                Change::Renamed { from, item } => format!("{}->{}", from.path, item.path),
                Change::Added { item, .. } => format!("+{}", item.path),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds, vec!["a1.md->b.md", "a2.md->c.md", "+d.md"]);
    }

    #[test]
    fn an_unreadable_or_unlisted_path_is_not_deleted() {
        let known = vec![
            known("flaky.md", "v1", "s1"),
            known("unlisted.md", "v1", "s2"),
        ];
        let mut now = listing(vec![item("flaky.md", "v2")]);
        now.problems
            .push(("unlisted.md".into(), "permission denied".into()));
        let p = plan(&known, &now);
        assert!(p.gone.is_empty(), "{p:?}");
        // flaky.md could not be fetched: the caller leaves it out; nothing happens to it.
        let out = resolve(p, &known, Vec::new());
        assert!(out.changes.is_empty(), "{out:?}");
    }

    #[test]
    fn an_empty_version_is_always_read() {
        let known = vec![known("page", "", "s1")];
        let p = plan(&known, &listing(vec![item("page", "")]));
        assert_eq!(p.fetch.len(), 1);
    }
}
