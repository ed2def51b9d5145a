//! Knowledge entries with time through the engine (issue 44, item 4): a key's new version
//! replaces the old one in every search and listing, `as_of` reads the past, expiry ends an
//! entry, near-duplicates are reported or merged, and deletes cascade to derived entries.

use quarry_core::Error;
use serde_json::json;

use crate::kb::entries::{EntryOptions, OnDuplicate};
use crate::retrieval::knowledge_search::KnowledgeSearch;
use crate::retrieval::search::SearchRequest;
use crate::test_support::{drain, engine, note};

fn keyed(key: &str) -> EntryOptions {
    let mut provenance = serde_json::Map::new();
    provenance.insert("user".into(), json!("ann"));
    EntryOptions {
        key: Some(key.into()),
        provenance,
        ..EntryOptions::default()
    }
}

/// The key `ceo`'s first version and its correction.
const CEO_ANN: &str = "# Chief executive\n\nThe chief executive is Ann Lee.";
const CEO_BO: &str = "# Chief executive now\n\nThe chief executive is Bo Chen.";

/// Writes `text` as the current version of the key `ceo` in `memory`.
fn ceo_entry(e: &crate::Engine, text: &str) -> crate::kb::entries::CreatedEntry {
    e.create_entry("memory", note(text), &keyed("ceo")).unwrap()
}

fn titles(hits: Vec<quarry_core::SearchHit>) -> Vec<String> {
    let mut t: Vec<String> = hits.into_iter().map(|h| h.title).collect();
    t.sort();
    t
}

#[test]
fn a_keys_new_version_replaces_the_old_one_and_as_of_reads_the_past() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let first = ceo_entry(&e, CEO_ANN);
    assert!(!first.duplicate && first.superseded.is_none());
    let between = quarry_core::now_millis();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let second = ceo_entry(&e, CEO_BO);
    assert_eq!(
        second.superseded.as_ref().map(|f| &f.id),
        Some(&first.file.id)
    );
    drain(&e);

    // Now: the current version only, in search, passages and listings.
    assert_eq!(
        titles(e.search(&SearchRequest::new("chief executive")).unwrap()),
        ["Chief executive now"]
    );
    let passages = e
        .knowledge_search(&KnowledgeSearch::new("chief executive"))
        .unwrap();
    assert!(
        passages
            .results
            .iter()
            .all(|p| p.knowledge_id == second.file.id),
        "{passages:?}"
    );
    let (listed, total) = e.list_knowledge("memory", 0, 10).unwrap();
    assert_eq!((listed.len(), total), (1, 1));
    // As of before the second write: the first one.
    let past = e.at(Some(between));
    assert_eq!(
        titles(past.search(&SearchRequest::new("chief executive")).unwrap()),
        ["Chief executive"]
    );
    assert_eq!(past.list_knowledge("memory", 0, 10).unwrap().1, 1);
    // Before either: nothing.
    assert!(
        e.at(Some(between - 3_600_000))
            .search(&SearchRequest::new("chief executive"))
            .unwrap()
            .is_empty()
    );

    // The old version stays readable by id, with its window and successor; the history
    // lists both versions.
    let old = e.find_knowledge(Some("memory"), &first.file.id).unwrap();
    let v = old.entry.clone().unwrap();
    assert_eq!(v.superseded_by.as_deref(), Some(second.file.id.as_str()));
    assert!(v.valid_until.is_some());
    assert_eq!(v.provenance["user"], "ann");
    let history = e.entry_history(&old).unwrap();
    assert_eq!(history.versions.len(), 2);
    assert_eq!(
        history
            .events
            .iter()
            .map(|e| e.event.as_str())
            .collect::<Vec<_>>(),
        ["created", "created", "superseded"]
    );

    // The same content again under the key: nothing new.
    let again = ceo_entry(&e, CEO_BO);
    assert!(again.duplicate);
    assert_eq!(again.file.id, second.file.id);
}

#[test]
fn expiry_windows_and_bad_options_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let now = quarry_core::now_millis();
    let expiring = e
        .create_entry(
            "memory",
            note("# Parking\n\nVisitor parking is in lot C this week."),
            &EntryOptions {
                ttl_seconds: Some(3600),
                ..EntryOptions::default()
            },
        )
        .unwrap();
    drain(&e);
    let until = expiring.file.entry.as_ref().unwrap().valid_until.unwrap();
    assert!((until - now - 3_600_000).abs() < 60_000, "{until}");
    assert_eq!(e.search(&SearchRequest::new("parking")).unwrap().len(), 1);
    assert!(
        e.at(Some(now + 7_200_000))
            .search(&SearchRequest::new("parking"))
            .unwrap()
            .is_empty()
    );

    let bad = |options: EntryOptions| match e.create_entry(
        "memory",
        note("# X\n\nsomething else entirely"),
        &options,
    ) {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(
        bad(EntryOptions {
            valid_from: Some(now),
            valid_to: Some(now - 1),
            ..EntryOptions::default()
        })
        .contains("valid_to")
    );
    assert!(
        bad(EntryOptions {
            expires_at: Some(now - 1_000),
            ..EntryOptions::default()
        })
        .contains("past")
    );
    assert!(
        bad(EntryOptions {
            expires_at: Some(now + 1_000),
            ttl_seconds: Some(5),
            ..EntryOptions::default()
        })
        .contains("not both")
    );
    assert!(
        bad(EntryOptions {
            key: Some(" ".into()),
            ..EntryOptions::default()
        })
        .contains("key")
    );
    match e.create_entry(
        "memory",
        note("# Y\n\nyet another thing"),
        &EntryOptions {
            supersedes: Some("nope".into()),
            ..EntryOptions::default()
        },
    ) {
        Err(Error::NotFound(m)) => assert!(m.contains("supersedes"), "{m}"),
        other => panic!("{other:?}"),
    }
    match e.create_entry(
        "memory",
        note("# Z\n\nand one more"),
        &EntryOptions {
            derived_from: vec!["nope".into()],
            ..EntryOptions::default()
        },
    ) {
        Err(Error::NotFound(m)) => assert!(m.contains("derived_from"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Nothing was stored by the refusals.
    assert_eq!(e.list_knowledge("memory", 0, 10).unwrap().1, 1);
}

#[test]
fn near_duplicates_are_reported_or_merged_and_deletes_cascade() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let original = e
        .create_entry(
            "memory",
            note("The staging database password rotates every 30 days."),
            &EntryOptions::default(),
        )
        .unwrap();
    let reworded = e
        .create_entry(
            "memory",
            note("Every 30 days the staging database password rotates."),
            &EntryOptions::default(),
        )
        .unwrap();
    assert_eq!(reworded.near_duplicates.len(), 1, "{reworded:?}");
    assert_eq!(reworded.near_duplicates[0].id, original.file.id);
    assert!(!reworded.merged && reworded.superseded.is_none());
    let unrelated = e
        .create_entry(
            "memory",
            note("Lunch is served at noon in the atrium."),
            &EntryOptions::default(),
        )
        .unwrap();
    assert!(unrelated.near_duplicates.is_empty());
    // Merged: the new wording becomes the closest one's new version.
    let merged = e
        .create_entry(
            "memory",
            note("The staging database password rotates every 30 days, at midnight."),
            &EntryOptions {
                on_duplicate: OnDuplicate::Merge,
                ..EntryOptions::default()
            },
        )
        .unwrap();
    assert!(merged.merged);
    assert!(merged.superseded.is_some());

    // Derived entries go with their source, transitively.
    let summary = e
        .create_entry(
            "summaries",
            note("Summary: lunch at noon."),
            &EntryOptions {
                derived_from: vec![unrelated.file.id.clone()],
                ..EntryOptions::default()
            },
        )
        .unwrap();
    let digest = e
        .create_entry(
            "summaries",
            note("Digest of summaries."),
            &EntryOptions {
                derived_from: vec![summary.file.id.clone()],
                ..EntryOptions::default()
            },
        )
        .unwrap();
    let mut by = serde_json::Map::new();
    by.insert("user".into(), json!("ann"));
    let deleted = e.delete_knowledge_by(&unrelated.file, &by).unwrap();
    let mut derived = deleted.derived.clone();
    derived.sort();
    let mut expected = vec![summary.file.id.clone(), digest.file.id.clone()];
    expected.sort();
    assert_eq!(derived, expected);
    assert!(matches!(
        e.find_knowledge(None, &digest.file.id),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn the_near_duplicate_rule_wants_the_same_words_and_the_same_numbers() {
    use crate::kb::entries::near_duplicate;
    let a = "The staging database password rotates every 30 days.";
    assert!(near_duplicate(a, "Every 30 days the staging database password rotates.").is_some());
    // Another number is an update, not a rewording.
    assert!(near_duplicate(a, "The staging database password rotates every 60 days.").is_none());
    // Other words, or too few.
    assert!(near_duplicate(a, "Lunch is served at noon in the atrium.").is_none());
    assert!(near_duplicate("rotate keys", "rotate keys").is_none());
    // Stemmed and cut as the keyword index cuts them (Chinese too).
    assert!(near_duplicate("支付服务的值班工程师是王伟", "王伟是支付服务的值班工程师").is_some());
    assert!(
        near_duplicate(
            "The API limits requests strictly",
            "The API strictly limit requests"
        )
        .is_some()
    );
}

/// A search request's handle reads what it leaves out once and keeps it for that request
/// only: the next request on the same handle sees an entry superseded in between, and a
/// handle made from a request's (another moment, scope or narrowing) reads afresh.
#[test]
fn what_a_search_leaves_out_is_read_once_per_request_and_never_kept_across_requests() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let first = ceo_entry(&e, CEO_ANN);
    drain(&e);
    let query = SearchRequest::new("chief executive");
    let found = |e: &crate::Engine| titles(e.query(&query).unwrap().results);
    assert_eq!(found(&e), ["Chief executive"]);

    let request = e.for_one_request();
    assert_eq!(request.hidden_for_search().unwrap(), None);
    ceo_entry(&e, CEO_BO);
    drain(&e);
    // The request's handle answers from what it read…
    assert_eq!(request.hidden_for_search().unwrap(), None);
    // …while the next request, on the same long-lived handle, reads the supersession.
    assert_eq!(found(&e), ["Chief executive now"]);
    let first_doc = e
        .store()
        .kb_file_by_row(first.file.row_id)
        .unwrap()
        .and_then(|f| f.document_id);
    let hidden_now = |h: &crate::Engine| -> Vec<u64> {
        let mut ids: Vec<u64> = h
            .hidden_for_search()
            .unwrap()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        ids.sort();
        ids
    };
    let expected: Vec<u64> = first_doc.into_iter().map(|d| d as u64).collect();
    assert_eq!(expected.len(), 1);
    assert_eq!(hidden_now(&e.for_one_request()), expected);
    // Handles made from the request's start without what it read.
    for derived in [
        request.at(None),
        request.scoped(request.scope().clone()),
        request.narrowed_for_search(&[]),
    ] {
        assert!(derived.request.is_none());
        assert_eq!(hidden_now(&derived), expected);
    }
}

/// A key write never reaches an entry its writer may not read: written by key, it starts a
/// chain of the writer's own exactly as a free key would (a key names one current entry per
/// set of readers); superseding by id a version whose successor is hidden is refused without
/// naming it. The hidden current entry of the key stays current and unnamed, and a history
/// read by the writer lists only the versions it may read (issue 65, item 5).
#[test]
fn a_key_write_never_supersedes_or_names_a_hidden_entry() {
    use quarry_core::{Access, Scope};
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let editor = |keys: &[&str]| {
        e.scoped(Scope {
            access: Access::Write,
            machine_owner: false,
            readers: Some(keys.iter().map(|k| (*k).to_owned()).collect()),
            ..Scope::owner(quarry_core::DEFAULT_SPACE)
        })
    };
    let (ann, bob) = (editor(&["user:ann", "group:hr"]), editor(&["user:bob"]));
    // An open version, then hr's, restricted by an admin.
    let open = ann
        .create_entry(
            "memory",
            note("# Plan\n\nThe plan is open."),
            &keyed("plan"),
        )
        .unwrap();
    let hidden = ann
        .create_entry(
            "memory",
            note("# Plan\n\nThe plan is 4 percent."),
            &keyed("plan"),
        )
        .unwrap();
    e.set_document_readers(
        "memory",
        &hidden.file.id,
        Some(&["group:hr".to_owned()][..]),
    )
    .unwrap();
    let by_id = EntryOptions {
        supersedes: Some(open.file.id.clone()),
        ..EntryOptions::default()
    };
    match bob.create_entry("memory", note("# Plan\n\nThe plan is 0."), &by_id) {
        Err(Error::Conflict(words)) => assert!(!words.contains(&hidden.file.id), "{words}"),
        other => panic!("{other:?}"),
    }
    let mine = bob
        .create_entry("memory", note("# Plan\n\nThe plan is 0."), &keyed("plan"))
        .unwrap();
    let free = bob
        .create_entry(
            "memory",
            note("# Free\n\nA key nobody used."),
            &keyed("free"),
        )
        .unwrap();
    assert!(
        mine.superseded.is_none() && free.superseded.is_none(),
        "as for a free key"
    );
    // hr's version is still the key's current entry.
    let now = ann.find_knowledge(None, &hidden.file.id).unwrap();
    assert!(now.entry.as_ref().unwrap().superseded_by.is_none());
    // bob's history of the open version: the versions he reads (it and his own chain's),
    // no event naming hr's.
    let old = bob.find_knowledge(None, &open.file.id).unwrap();
    let h = bob.entry_history(&old).unwrap();
    assert_eq!(
        h.versions.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(),
        [open.file.id.as_str(), mine.file.id.as_str()]
    );
    assert!(
        h.events
            .iter()
            .all(|ev| ev.entry == open.file.id || ev.entry == mine.file.id)
    );
    assert!(
        !serde_json::to_string(&h.events)
            .unwrap()
            .contains(&hidden.file.id)
    );
    // ann reads every version of the key: the open one, hr's and bob's chain beside it.
    assert_eq!(ann.entry_history(&old).unwrap().versions.len(), 3);
    // A key whose current entry bob reads is written as always.
    bob.create_entry(
        "memory",
        note("# Other\n\nAnother fact here."),
        &keyed("other"),
    )
    .unwrap();
}

#[test]
fn a_keyed_fact_is_named_by_its_key_and_found_by_subject_and_attribute() {
    // Issue 66 item 7 (eval/memory's misses): "which team owns the search service?" must not
    // answer with another service's team, nor with the search service's on-call engineer.
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let facts = [
        (
            "search.team",
            "Ownership of the search service sits with team Lynx.",
        ),
        (
            "search.oncall",
            "Jia Li is the on-call engineer for the search service.",
        ),
        (
            "storage.team",
            "The storage service is owned by the Badger team.",
        ),
        (
            "billing.team",
            "The billing service is owned by the Puffin team.",
        ),
        (
            "storage.oncall",
            "The on-call engineer for the storage service is Bruno Silva.",
        ),
    ];
    for (key, text) in facts {
        let created = e.create_entry("memory", note(text), &keyed(key)).unwrap();
        assert_eq!(
            created.file.original_name,
            format!("{}.md", key.replace('.', "-"))
        );
    }
    // A title given keeps naming the file.
    let titled = crate::kb::notes::NewNote {
        title: Some("Region".into()),
        ..note("The search service runs in eu-west-1.")
    };
    let created = e
        .create_entry("memory", titled, &keyed("search.region"))
        .unwrap();
    assert_eq!(created.file.original_name, "Region.md");
    drain(&e);
    let mut req = KnowledgeSearch::new("Which team owns the search service?");
    req.mode = crate::retrieval::knowledge_search::SearchMode::Keyword;
    let found = e.knowledge_search(&req).unwrap();
    assert!(
        found
            .results
            .first()
            .is_some_and(|h| h.content.contains("Lynx")),
        "{found:?}"
    );
}
