//! Conformance cases for knowledge entries with time (`EntryStore`): supersession by key and
//! by id, validity windows and expiry, reads of the past, derivations and cascading
//! deletes, and the history that remembers all of it. Each case is a
//! `pub fn entries_…(store: &dyn Store)` listed in the macro below.

use quarry_core::Error;

use crate::{AddedEntry, ConvertedFile, KbFile, NewEntry, NewKbFile, NoteMeta, PageSource, Store};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_entries {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::entries];
            entries_a_key_supersedes_its_current_entry_and_history_keeps_both,
            entries_supersedes_names_only_a_current_entry_of_its_key,
            entries_a_new_version_keeps_the_name_of_the_one_it_replaces,
            entries_a_key_names_one_current_entry_per_set_of_readers,
            entries_windows_expiry_and_reads_of_the_past,
            entries_deleting_a_source_deletes_what_was_derived_and_relinks_versions,
            entries_a_page_keeps_the_passages_each_version_cites,
        );
    };
}

#[doc(hidden)]
pub use __conformance_entries;

const SPACE: &str = "default";

fn note(sha: u64) -> NewKbFile {
    NewKbFile {
        meta: Default::default(),
        original_name: format!("n{sha}.md"),
        sha256: format!("{sha:064x}"),
        format: "md".into(),
        mime: "text/markdown".into(),
        size: 3,
        note: Some(NoteMeta {
            title: None,
            tags: Vec::new(),
            kind: "text".into(),
            summary: None,
        }),
        readers: None,
    }
}

fn kb(store: &dyn Store, name: &str) -> i64 {
    store
        .create_knowledge_base(SPACE, name, "", None)
        .expect("create_knowledge_base")
        .collection_id
}

fn keyed(key: &str) -> NewEntry {
    NewEntry {
        key: Some(key.into()),
        provenance: r#"{"user":"ann","client":"test"}"#.into(),
        ..NewEntry::default()
    }
}

fn added(r: quarry_core::Result<AddedEntry>) -> (KbFile, Option<KbFile>) {
    match r.expect("add_entry") {
        AddedEntry::Added { file, superseded } => (file, superseded.map(|b| *b)),
        AddedEntry::Duplicate { file } => panic!("unexpected duplicate of {}", file.id),
    }
}

/// Stores a document for the entry, as its ingest would, and returns its id.
fn with_document(store: &dyn Store, file: &KbFile) -> i64 {
    store
        .file_converted(
            None,
            file.row_id,
            ConvertedFile {
                meta: Default::default(),
                title: file.file_name.clone(),
                markdown: format!("# {}\n\nbody", file.id),
                pages: Vec::new(),
                furniture: Vec::new(),
                page_count: None,
                pages_without_text: None,
                warnings: Vec::new(),
                images: Vec::new(),
            },
        )
        .expect("file_converted");
    store
        .kb_file_by_row(file.row_id)
        .expect("kb_file_by_row")
        .and_then(|f| f.document_id)
        .expect("a document")
}

fn reload(store: &dyn Store, file: &KbFile) -> KbFile {
    store
        .kb_file_by_row(file.row_id)
        .expect("kb_file_by_row")
        .expect("the entry")
}

/// A second write of a key supersedes the first: the old entry's window ends where the new
/// one's starts and both say so; the same content again under the key is no new version; a
/// value that returns after a change is a new version; the history lists every step.
pub fn entries_a_key_supersedes_its_current_entry_and_history_keeps_both(store: &dyn Store) {
    let c = kb(store, "memory");
    let (first, none) = added(store.add_entry(c, &note(1), &keyed("ceo")));
    assert!(none.is_none());
    let v1 = first.entry.clone().expect("an entry's version facts");
    assert_eq!(v1.key.as_deref(), Some("ceo"));
    assert_eq!(v1.valid_until, None);
    assert_eq!(v1.provenance["user"], "ann");
    let (second, old) = added(store.add_entry(
        c,
        &note(2),
        &NewEntry {
            valid_from: Some(v1.valid_from + 1_000),
            ..keyed("ceo")
        },
    ));
    let old = old.expect("the superseded entry");
    assert_eq!(old.id, first.id);
    let old_v = old.entry.expect("version");
    assert_eq!(old_v.superseded_by.as_deref(), Some(second.id.as_str()));
    assert_eq!(old_v.valid_until, Some(v1.valid_from + 1_000));
    let new_v = second.entry.clone().expect("version");
    assert_eq!(new_v.supersedes.as_deref(), Some(first.id.as_str()));
    assert_eq!(new_v.valid_from, v1.valid_from + 1_000);
    // The current content again under its key: nothing new.
    match store.add_entry(c, &note(2), &keyed("ceo")).expect("again") {
        AddedEntry::Duplicate { file } => assert_eq!(file.id, second.id),
        AddedEntry::Added { file, .. } => panic!("a second copy {}", file.id),
    }
    // The first value back: a third version, though its bytes are the first one's.
    let (third, old) = added(store.add_entry(c, &note(1), &keyed("ceo")));
    assert_eq!(old.map(|o| o.id), Some(second.id.clone()));
    let versions = store.entry_versions(c, "ceo").expect("entry_versions");
    assert_eq!(
        versions.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(),
        [first.id.as_str(), second.id.as_str(), third.id.as_str()]
    );
    // Another key is another chain; keys are per knowledge base.
    let other = kb(store, "other");
    let (elsewhere, none) = added(store.add_entry(other, &note(1), &keyed("ceo")));
    assert!(none.is_none(), "{elsewhere:?}");
    let history = store.entry_history(c, &first.id).expect("entry_history");
    let events: Vec<(&str, &str)> = history
        .iter()
        .map(|e| (e.entry.as_str(), e.event.as_str()))
        .collect();
    assert_eq!(
        events,
        [
            (first.id.as_str(), "created"),
            (second.id.as_str(), "created"),
            (first.id.as_str(), "superseded"),
            (third.id.as_str(), "created"),
            (second.id.as_str(), "superseded"),
        ]
    );
    assert_eq!(history[2].detail["by"], second.id.as_str());
    assert_eq!(history[0].detail["by"]["client"], "test");
}

/// A new version of a key under the same name keeps that name (the current fact does not look
/// like a copy, `CEO (2).md`): the version it replaces steps aside to `CEO (superseded DAY).md`,
/// its document's path with it, and a lookup by name finds the current version. A version
/// whose name differs keeps it; a file beside them under the same name gets a free one.
pub fn entries_a_new_version_keeps_the_name_of_the_one_it_replaces(store: &dyn Store) {
    let c = kb(store, "names");
    let named = |sha: u64, name: &str| NewKbFile {
        original_name: name.into(),
        ..note(sha)
    };
    let (first, _) = added(store.add_entry(c, &named(1, "CEO.md"), &keyed("ceo")));
    let doc = with_document(store, &first);
    let (second, old) = added(store.add_entry(c, &named(2, "CEO.md"), &keyed("ceo")));
    let old = old.expect("the superseded version");
    assert_eq!(old.id, first.id);
    assert_eq!(second.file_name, "CEO.md");
    let aside = old.file_name.clone();
    assert!(
        aside.starts_with("CEO (superseded ") && aside.ends_with(").md"),
        "{aside}"
    );
    assert_eq!(reload(store, &first).file_name, aside);
    let moved = store
        .documents_by_ids(&[doc])
        .expect("documents_by_ids")
        .pop()
        .expect("its document");
    assert_eq!(moved.path, aside, "its document's path steps aside with it");
    assert_eq!(
        store.kb_file(c, "CEO.md").expect("kb_file").map(|f| f.id),
        Some(second.id.clone()),
        "the current version answers to the name"
    );
    // Again the same day: the next free name.
    let (third, _) = added(store.add_entry(c, &named(3, "CEO.md"), &keyed("ceo")));
    assert_eq!(third.file_name, "CEO.md");
    let second_aside = reload(store, &second).file_name;
    assert_ne!(second_aside, aside);
    assert!(
        second_aside.starts_with("CEO (superseded "),
        "{second_aside}"
    );
    // A version under another name leaves the old one's name alone.
    let (fourth, _) = added(store.add_entry(c, &named(4, "Chief executive.md"), &keyed("ceo")));
    assert_eq!(fourth.file_name, "Chief executive.md");
    assert_eq!(reload(store, &third).file_name, "CEO.md");
    let (beside, none) =
        added(store.add_entry(c, &named(5, "Chief executive.md"), &NewEntry::default()));
    assert!(none.is_none());
    assert_eq!(
        beside.file_name, "Chief executive (2).md",
        "a current file holds its name"
    );
}

/// A key names one current entry per set of readers: a write with other readers than the
/// key's restricted entry starts a chain of its own (as for a free key) and supersedes
/// nothing; a write with the same readers supersedes it. A chain's current entry deleted while
/// another chain holds the key for its predecessor's readers: the predecessor joins that chain
/// rather than becoming a second current entry.
pub fn entries_a_key_names_one_current_entry_per_set_of_readers(store: &dyn Store) {
    let c = kb(store, "readers");
    let hr = |sha: u64| NewKbFile {
        readers: Some(vec!["group:hr".to_owned()]),
        ..note(sha)
    };
    let (restricted, _) = added(store.add_entry(c, &hr(1), &keyed("comp-plan")));
    let (open, superseded) = added(store.add_entry(c, &note(2), &keyed("comp-plan")));
    assert!(
        superseded.is_none(),
        "a write with other readers supersedes nothing"
    );
    assert_eq!(
        reload(store, &restricted)
            .entry
            .and_then(|e| e.superseded_by),
        None
    );
    let (hr_next, superseded) = added(store.add_entry(c, &hr(3), &keyed("comp-plan")));
    assert_eq!(superseded.map(|s| s.id), Some(restricted.id.clone()));
    assert_eq!(
        reload(store, &open).entry.and_then(|e| e.superseded_by),
        None
    );
    let current: Vec<String> = store
        .entry_versions(c, "comp-plan")
        .expect("entry_versions")
        .into_iter()
        .filter(|f| f.entry.as_ref().is_some_and(|e| e.superseded_by.is_none()))
        .map(|f| f.id)
        .collect();
    assert_eq!(current, [open.id.clone(), hr_next.id.clone()]);

    // v1 open, v2 (superseding it by id) for hr, then another open chain; v2 deleted.
    let (v1, _) = added(store.add_entry(c, &note(10), &keyed("bonus")));
    let (v2, _) = added(store.add_entry(
        c,
        &hr(11),
        &NewEntry {
            supersedes: Some(v1.row_id),
            ..keyed("bonus")
        },
    ));
    let (other, superseded) = added(store.add_entry(c, &note(12), &keyed("bonus")));
    assert!(
        superseded.is_none(),
        "the open version is superseded already"
    );
    store
        .delete_entry(c, v2.row_id, r#"{"user":"ann"}"#)
        .expect("delete_entry");
    let v1 = reload(store, &v1).entry.expect("version");
    assert_eq!(v1.superseded_by.as_deref(), Some(other.id.as_str()));
}

/// `supersedes` names the entry replaced: an unknown one is not found, one already
/// superseded is a conflict naming its successor, as is one of another key; without a key
/// the new entry takes the superseded one's.
pub fn entries_supersedes_names_only_a_current_entry_of_its_key(store: &dyn Store) {
    let c = kb(store, "memory");
    let (a, _) = added(store.add_entry(c, &note(1), &keyed("plan")));
    let (b, _) = added(store.add_entry(c, &note(2), &keyed("plan")));
    let (other, _) = added(store.add_entry(c, &note(3), &keyed("budget")));
    let by_id = |id: i64, key: Option<&str>| NewEntry {
        supersedes: Some(id),
        key: key.map(str::to_owned),
        provenance: "{}".into(),
        ..NewEntry::default()
    };
    match store.add_entry(c, &note(4), &by_id(a.row_id, None)) {
        Err(Error::Conflict(m)) => assert!(m.contains(&b.id), "{m}"),
        other => panic!("expected a conflict naming the successor, got {other:?}"),
    }
    match store.add_entry(c, &note(4), &by_id(other.row_id, Some("plan"))) {
        Err(Error::Conflict(m)) => assert!(m.contains("budget"), "{m}"),
        other => panic!("expected a conflict naming the key, got {other:?}"),
    }
    match store.add_entry(c, &note(4), &by_id(i64::MAX, None)) {
        Err(Error::NotFound(_)) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
    match store.add_entry(
        c,
        &note(4),
        &NewEntry {
            derived_from: vec![i64::MAX],
            ..keyed("x")
        },
    ) {
        Err(Error::NotFound(m)) => assert!(m.contains("derived_from"), "{m}"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    // Nothing was left half-written by the refusals.
    assert_eq!(store.entry_versions(c, "x").expect("versions").len(), 0);
    let (c2, old) = added(store.add_entry(c, &note(5), &by_id(b.row_id, None)));
    assert_eq!(old.map(|o| o.id), Some(b.id.clone()));
    assert_eq!(
        c2.entry.and_then(|e| e.key).as_deref(),
        Some("plan"),
        "the key is inherited"
    );
}

/// Windows: `valid_to` and `expires_at` end one, `valid_from` (else the moment of writing)
/// starts it; a read at a moment leaves out what was not valid then.
pub fn entries_windows_expiry_and_reads_of_the_past(store: &dyn Store) {
    let c = kb(store, "memory");
    let (plain, _) = added(store.add_entry(
        c,
        &note(1),
        &NewEntry {
            provenance: "{}".into(),
            ..NewEntry::default()
        },
    ));
    let start = plain.entry.clone().expect("version").valid_from;
    let (bounded, _) = added(store.add_entry(
        c,
        &note(2),
        &NewEntry {
            valid_from: Some(start - 10_000),
            valid_to: Some(start - 5_000),
            provenance: "{}".into(),
            ..NewEntry::default()
        },
    ));
    let (expiring, _) = added(store.add_entry(
        c,
        &note(3),
        &NewEntry {
            expires_at: Some(start + 60_000),
            provenance: "{}".into(),
            ..NewEntry::default()
        },
    ));
    let (future, _) = added(store.add_entry(
        c,
        &note(4),
        &NewEntry {
            valid_from: Some(start + 3_600_000),
            provenance: "{}".into(),
            ..NewEntry::default()
        },
    ));
    assert_eq!(
        expiring.entry.clone().expect("version").valid_until,
        Some(start + 60_000)
    );
    let docs: Vec<i64> = [&plain, &bounded, &expiring, &future]
        .iter()
        .map(|f| with_document(store, f))
        .collect();
    let out = |at: i64| {
        let mut got = store
            .entries_out_of_time(SPACE, Some(&[c]), at)
            .expect("entries_out_of_time");
        got.sort_unstable();
        got
    };
    let sorted = |mut v: Vec<i64>| {
        v.sort_unstable();
        v
    };
    // Now (the entries were written within seconds of `start`): the ended one and the
    // future one are out.
    assert_eq!(out(start + 30_000), sorted(vec![docs[1], docs[3]]));
    // After the expiry, that one too.
    assert_eq!(
        out(start + 120_000),
        sorted(vec![docs[1], docs[2], docs[3]])
    );
    // Inside the bounded one's window (written later, valid then): only it was valid; the
    // others start when they were written.
    assert_eq!(out(start - 7_000), sorted(vec![docs[0], docs[2], docs[3]]));
    assert!(
        store
            .entries_out_of_time(SPACE, Some(&[]), start)
            .expect("none")
            .is_empty()
    );
    // The whole space: the same entries; another space: none of them.
    let mut space = store
        .entries_out_of_time(SPACE, None, start + 30_000)
        .expect("space");
    space.sort_unstable();
    assert_eq!(space, sorted(vec![docs[1], docs[3]]));
    assert!(
        store
            .entries_out_of_time("elsewhere", None, start + 30_000)
            .expect("other space")
            .is_empty()
    );
}

/// Deleting an entry deletes, transitively, the entries derived from it (in any knowledge
/// base), says so in each one's history, and gives its key's chain back to its predecessor.
pub fn entries_deleting_a_source_deletes_what_was_derived_and_relinks_versions(store: &dyn Store) {
    let c = kb(store, "memory");
    let other = kb(store, "summaries");
    let (source, _) = added(store.add_entry(c, &note(1), &keyed("fact")));
    let (derived, _) = added(store.add_entry(
        other,
        &note(2),
        &NewEntry {
            derived_from: vec![source.row_id],
            provenance: "{}".into(),
            ..NewEntry::default()
        },
    ));
    let (second_order, _) = added(store.add_entry(
        c,
        &note(3),
        &NewEntry {
            derived_from: vec![derived.row_id, source.row_id],
            provenance: "{}".into(),
            ..NewEntry::default()
        },
    ));
    let (unrelated, _) = added(store.add_entry(c, &note(4), &keyed("other")));
    assert_eq!(
        reload(store, &derived).entry.expect("version").derived_from,
        std::slice::from_ref(&source.id)
    );
    // A newer version of the source's key, then the newer one deleted: the source is
    // current again.
    let (newer, _) = added(store.add_entry(c, &note(5), &keyed("fact")));
    let gone = store
        .delete_entry(c, newer.row_id, r#"{"user":"ann"}"#)
        .expect("delete the newer version");
    assert!(gone.is_empty());
    let back = reload(store, &source).entry.expect("version");
    assert_eq!(back.superseded_by, None);
    assert_eq!(back.valid_until, None);
    match store.delete_entry(other, source.row_id, "{}") {
        Err(Error::NotFound(_)) => {}
        other => panic!("a delete through another knowledge base: {other:?}"),
    }
    let mut gone = store
        .delete_entry(c, source.row_id, r#"{"user":"ann"}"#)
        .expect("delete the source");
    gone.sort();
    let mut expected = vec![(other, derived.id.clone()), (c, second_order.id.clone())];
    expected.sort();
    assert_eq!(gone, expected);
    for f in [&source, &derived, &second_order] {
        assert_eq!(
            store.kb_file_by_row(f.row_id).expect("read"),
            None,
            "{}",
            f.id
        );
    }
    assert!(
        store
            .kb_file_by_row(unrelated.row_id)
            .expect("read")
            .is_some()
    );
    let history = store.entry_history(other, &derived.id).expect("history");
    let last = history.last().expect("events");
    assert_eq!(last.event, "deleted_with_source");
    assert_eq!(last.detail["source"], source.id.as_str());
    let history = store.entry_history(c, &source.id).expect("history");
    let events: Vec<&str> = history.iter().map(|e| e.event.as_str()).collect();
    assert!(events.contains(&"current_again"), "{events:?}");
    assert_eq!(history.last().map(|e| e.event.as_str()), Some("deleted"));
    assert_eq!(
        history.last().map(|e| &e.detail["by"]["user"]),
        Some(&"ann".into())
    );
}

fn cited(file: &str, lines: (u32, u32), text: &str) -> PageSource {
    PageSource {
        file: file.into(),
        line_start: lines.0,
        line_end: lines.1,
        page: (lines.0 > 100).then_some(7),
        document_sha256: format!("{:064x}", text.len()),
        passage_sha256: format!("{:064x}", lines.0),
        passage: text.into(),
    }
}

/// A page (an entry with sources) keeps the passages each of its versions cites, in the order
/// given; a new version's sources are its own and the old version keeps its; deleting a
/// version, or the knowledge base, takes its citations with it; an entry without sources
/// has none; a first version of a key that has a current entry is a conflict.
pub fn entries_a_page_keeps_the_passages_each_version_cites(store: &dyn Store) {
    let c = kb(store, "wiki");
    let first_sources = vec![
        cited("doc-a", (3, 9), "The launch is on 4 May."),
        cited(
            "doc-b",
            (120, 124),
            "Budget: 40,000 EUR, with a page number.",
        ),
    ];
    let (v1, _) = added(store.add_entry(
        c,
        &note(1),
        &NewEntry {
            sources: first_sources.clone(),
            ..keyed("page:launch")
        },
    ));
    let (plain, _) = added(store.add_entry(c, &note(9), &keyed("fact")));
    // A first version of a key that has one is refused, and writes nothing.
    match store.add_entry(
        c,
        &note(8),
        &NewEntry {
            first_version: true,
            ..keyed("page:launch")
        },
    ) {
        Err(Error::Conflict(_)) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    let (v2, old) = added(store.add_entry(
        c,
        &note(2),
        &NewEntry {
            sources: vec![cited("doc-a", (3, 10), "The launch moved to 11 May.")],
            ..keyed("page:launch")
        },
    ));
    assert_eq!(old.map(|o| o.row_id), Some(v1.row_id));
    let of = |ids: &[i64]| store.page_sources(ids).expect("page_sources");
    let all = of(&[v2.row_id, plain.row_id, v1.row_id]);
    let v1_sources: Vec<PageSource> = all
        .iter()
        .filter(|(id, _)| *id == v1.row_id)
        .map(|(_, s)| s.clone())
        .collect();
    assert_eq!(
        v1_sources, first_sources,
        "the first version keeps its citations, in order"
    );
    let v2_sources: Vec<&PageSource> = all
        .iter()
        .filter(|(id, _)| *id == v2.row_id)
        .map(|(_, s)| s)
        .collect();
    assert_eq!(v2_sources.len(), 1);
    assert_eq!(v2_sources[0].passage, "The launch moved to 11 May.");
    assert_eq!(v2_sources[0].page, None);
    assert!(all.iter().all(|(id, _)| *id != plain.row_id));
    assert!(of(&[]).is_empty());
    // Deleting the current version takes its citations; the old version is current again
    // and keeps its own.
    store
        .delete_entry(c, v2.row_id, r#"{"user":"ann"}"#)
        .expect("delete_entry");
    assert!(of(&[v2.row_id]).is_empty());
    assert_eq!(of(&[v1.row_id]).len(), 2);
    // The knowledge base's deletion takes every citation in it.
    store
        .remove_collection(SPACE, "wiki")
        .expect("remove_collection");
    assert!(of(&[v1.row_id]).is_empty());
}
