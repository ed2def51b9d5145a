//! Conformance cases for sources (`SourceStore`): leases that fence a sync, the changes a
//! sync applies (ids kept across edits and renames, uploads untouched), reports and
//! schedules. Each case is a `pub fn sources_…(store: &dyn Store)` listed in the macro below.

use quarry_core::Error;

use crate::{
    FileFilter, KnowledgeBase, NewKbFile, NewSource, SourceChange, SourceLease, SourceRow, Store,
    SyncCounts, SyncReport,
};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_sources {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::sources];
            sources_are_created_listed_and_unique_per_location,
            sources_one_claim_at_a_time_and_a_stale_one_writes_nothing,
            sources_changes_keep_ids_and_leave_uploads_alone,
            sources_equal_files_are_two_documents_and_uploads_still_deduplicate,
            sources_reports_failures_and_schedules,
            sources_removing_keeps_or_deletes_documents,
            sources_watched_and_their_files_at_paths,
            sources_readers_follow_every_change_and_the_mapping_is_kept,
            sources_an_interrupted_sync_is_due_and_its_report_says_so,
            sources_a_refused_sync_is_retried_under_another_network_policy,
        );
    };
}

#[doc(hidden)]
pub use __conformance_sources;

const SPACE: &str = "default";

fn kb(store: &dyn Store, name: &str) -> KnowledgeBase {
    store
        .create_knowledge_base(SPACE, name, "", None)
        .unwrap_or_else(|e| panic!("create_knowledge_base {name}: {e}"))
}

fn source(
    store: &dyn Store,
    kb: &KnowledgeBase,
    location: &str,
    interval_ms: Option<i64>,
) -> SourceRow {
    store
        .create_source(&NewSource {
            collection_id: kb.collection_id,
            kind: "folder".into(),
            location: location.into(),
            mask: "**".into(),
            interval_ms,
            sealed_secret: Some("sealed-bytes".into()),
            readers: None,
            allow_net: None,
        })
        .unwrap_or_else(|e| panic!("create_source {location}: {e}"))
}

fn file(name: &str, sha: &str) -> NewKbFile {
    NewKbFile {
        meta: Default::default(),
        original_name: name.into(),
        sha256: sha.into(),
        format: "md".into(),
        mime: "text/markdown".into(),
        size: 10,
        note: None,
        readers: None,
    }
}

fn claim(store: &dyn Store, s: &SourceRow, owner: &str) -> SourceLease {
    store
        .claim_source(s.row_id, owner, 60_000)
        .expect("claim_source")
        .unwrap_or_else(|| panic!("{owner} could not claim a free source"))
}

fn add(store: &dyn Store, lease: SourceLease, path: &str, sha: &str) -> i64 {
    store
        .apply_source_change(
            lease,
            &SourceChange::Add {
                path,
                version: "v1",
                file: &file(path, sha),
            },
        )
        .expect("apply Add")
        .expect("the lease holds")
}

fn names(store: &dyn Store, kb: &KnowledgeBase) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = store
        .kb_files(kb.collection_id, &FileFilter::default())
        .expect("kb_files")
        .into_iter()
        .map(|f| (f.file_name, f.id))
        .collect();
    v.sort();
    v
}

fn report(id: &str, source: &SourceRow, error: Option<&str>) -> SyncReport {
    SyncReport {
        id: id.into(),
        source_id: source.id.clone(),
        started_at: 0,
        finished_at: Some(1),
        status: if error.is_some() {
            "failed"
        } else {
            "succeeded"
        }
        .into(),
        revision: Some("abc123".into()),
        counts: SyncCounts {
            added: 2,
            skipped: 1,
            // Kept with the report: what a caller who may not read hr's files leaves out.
            restricted: Some(vec![crate::RestrictedCounts {
                readers: vec!["group:hr".into()],
                counts: SyncCounts {
                    skipped: 1,
                    ..SyncCounts::default()
                },
            }]),
            ..SyncCounts::default()
        },
        details: vec![crate::SyncLine {
            path: "logo.png".into(),
            action: "skipped".into(),
            detail: Some("not a format Quarry converts".into()),
            readers: Some(vec!["group:hr".into()]),
        }],
        error: error.map(str::to_owned),
    }
}

/// Sources are listed per knowledge base, unique per location there, and changed in place.
pub fn sources_are_created_listed_and_unique_per_location(store: &dyn Store) {
    let a = kb(store, "a");
    let b = kb(store, "b");
    let s1 = source(store, &a, r#"{"kind":"folder","path":"/srv/one"}"#, None);
    let s2 = source(
        store,
        &b,
        r#"{"kind":"folder","path":"/srv/one"}"#,
        Some(3_600_000),
    );
    assert!(s1.has_secret, "the sealed credential is stored");
    assert_eq!(s1.knowledge_base, "a");
    assert_eq!(
        store.source_secret(s1.row_id).unwrap().as_deref(),
        Some("sealed-bytes")
    );
    let again = store.create_source(&NewSource {
        collection_id: a.collection_id,
        kind: "folder".into(),
        location: r#"{"kind":"folder","path":"/srv/one"}"#.into(),
        mask: "**".into(),
        interval_ms: None,
        sealed_secret: None,
        readers: Some(r#"{"codeowners":true}"#.into()),
        allow_net: None,
    });
    assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
    let all: Vec<String> = store
        .sources(None)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(all, vec![s1.id.clone(), s2.id.clone()]);
    let of_b: Vec<String> = store
        .sources(Some(&[b.collection_id]))
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(of_b, vec![s2.id.clone()]);
    assert_eq!(
        store.source(&s2.id).unwrap().unwrap().interval_ms,
        Some(3_600_000)
    );
    assert!(store.source("no-such-id").unwrap().is_none());
    store
        .set_source_secret(s1.row_id, Some("sealed-2"))
        .unwrap();
    assert_eq!(
        store.source_secret(s1.row_id).unwrap().as_deref(),
        Some("sealed-2")
    );
    store.set_source_secret(s1.row_id, None).unwrap();
    assert_eq!(store.source_secret(s1.row_id).unwrap(), None);
    assert!(!store.source(&s1.id).unwrap().unwrap().has_secret);
    assert!(matches!(
        store.set_source_secret(999_999, None),
        Err(Error::NotFound(_))
    ));
    let updated = store
        .update_source(s1.row_id, "**/*.md", Some(120_000))
        .unwrap();
    assert_eq!(
        (updated.mask.as_str(), updated.interval_ms),
        ("**/*.md", Some(120_000))
    );
    assert!(updated.next_sync_at.is_some());
    assert!(matches!(
        store.update_source(999_999, "**", None),
        Err(Error::NotFound(_))
    ));
}

/// One claim holds a source at a time; a lapsed claim writes nothing.
pub fn sources_one_claim_at_a_time_and_a_stale_one_writes_nothing(store: &dyn Store) {
    let a = kb(store, "a");
    let s = source(store, &a, "one", None);
    let first = claim(store, &s, "node-1:0");
    assert!(
        store
            .claim_source(s.row_id, "node-2:0", 60_000)
            .unwrap()
            .is_none(),
        "a held source is not claimed again"
    );
    assert!(store.renew_source(first, 60_000).unwrap());
    add(store, first, "a.md", "sha-a");
    // The claim lapses; another node takes over.
    store.renew_source(first, -1).unwrap();
    let second = claim(store, &s, "node-2:0");
    assert!(second.token > first.token);
    assert!(!store.renew_source(first, 60_000).unwrap());
    let stale = store
        .apply_source_change(
            first,
            &SourceChange::Add {
                path: "b.md",
                version: "v1",
                file: &file("b.md", "sha-b"),
            },
        )
        .unwrap();
    assert_eq!(stale, None, "a stale claim writes nothing");
    assert_eq!(names(store, &a).len(), 1);
    assert!(store.start_sync_report(first, None).is_err());
    assert!(
        !store
            .finish_sync_report(first, &report("r0", &s, None), None, None)
            .unwrap()
    );
    let id = store.start_sync_report(second, Some("abc")).unwrap();
    assert!(
        store
            .finish_sync_report(second, &report(&id, &s, None), None, None)
            .unwrap()
    );
    // Released: claimable again at once.
    claim(store, &s, "node-1:0");
}

/// Edits and renames keep document ids; a sync touches only its own documents.
pub fn sources_changes_keep_ids_and_leave_uploads_alone(store: &dyn Store) {
    let a = kb(store, "a");
    let upload = store
        .add_files(a.collection_id, &[file("memo.md", "sha-memo")])
        .unwrap();
    let upload_id = upload[0].file().id.clone();
    let s = source(store, &a, "one", None);
    let lease = claim(store, &s, "n:0");
    let intro = add(store, lease, "intro.md", "sha-intro");
    let leave = add(store, lease, "policies/leave.md", "sha-leave");
    let travel = add(store, lease, "policies/travel.md", "sha-travel");
    let ids: std::collections::HashMap<String, String> = names(store, &a).into_iter().collect();
    assert_eq!(ids.len(), 4);

    let files = store.source_files(s.row_id).unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        vec!["intro.md", "policies/leave.md", "policies/travel.md"]
    );
    assert_eq!(files[0].sha256, "sha-intro");
    assert_eq!(files[0].version, "v1");

    let applied = |c: SourceChange<'_>| {
        store
            .apply_source_change(lease, &c)
            .unwrap_or_else(|e| panic!("{c:?}: {e}"))
            .unwrap_or_else(|| panic!("{c:?}: the lease holds"))
    };
    assert_eq!(
        applied(SourceChange::Replace {
            file_row_id: intro,
            version: "v2",
            file: &file("intro.md", "sha-intro-2"),
        }),
        intro
    );
    // `leave` becomes searchable before it moves.
    store
        .file_converted(
            None,
            leave,
            crate::ConvertedFile {
                meta: Default::default(),
                title: "Leave".into(),
                markdown: "# Leave\n\nbody".into(),
                pages: Vec::new(),
                furniture: Vec::new(),
                page_count: None,
                pages_without_text: None,
                warnings: Vec::new(),
                images: Vec::new(),
            },
        )
        .expect("file_converted");
    applied(SourceChange::Touch {
        file_row_id: travel,
        version: "v3",
        readers: None,
    });
    applied(SourceChange::Rename {
        file_row_id: leave,
        path: "policies/time-off.md",
        name: "policies/time-off.md",
        version: "v4",
        readers: None,
    });
    applied(SourceChange::Delete {
        file_row_id: travel,
    });
    let after: std::collections::HashMap<String, String> = names(store, &a).into_iter().collect();
    assert_eq!(after.len(), 3, "{after:?}");
    // A renamed document that was already searchable moves with it.
    let doc = store
        .kb_file_by_row(leave)
        .unwrap()
        .unwrap()
        .document_id
        .unwrap();
    let moved = store.documents_by_ids(&[doc]).unwrap();
    assert_eq!(moved[0].path, "policies/time-off.md");
    assert_eq!(after["intro.md"], ids["intro.md"]);
    assert_eq!(after["policies/time-off.md"], ids["policies/leave.md"]);
    assert_eq!(after["memo.md"], upload_id);
    let intro_file = store.kb_file_by_row(intro).unwrap().unwrap();
    assert_eq!(intro_file.sha256, "sha-intro-2");
    assert_eq!(
        intro_file.status.as_str(),
        "pending",
        "changed content is queued again"
    );
    let files = store.source_files(s.row_id).unwrap();
    let summary: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f.path.as_str(), f.version.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![("intro.md", "v2"), ("policies/time-off.md", "v4")]
    );

    // A sync can only touch its own documents.
    let upload_row = upload[0].file().row_id;
    for c in [
        SourceChange::Delete {
            file_row_id: upload_row,
        },
        SourceChange::Touch {
            file_row_id: upload_row,
            version: "x",
            readers: None,
        },
    ] {
        let r = store.apply_source_change(lease, &c);
        assert!(matches!(r, Err(Error::NotFound(_))), "{c:?}: {r:?}");
    }
    assert_eq!(names(store, &a).len(), 3);

    // A rename onto a name an upload holds takes a free name; the path is kept exactly.
    applied(SourceChange::Rename {
        file_row_id: intro,
        path: "memo.md",
        name: "memo.md",
        version: "v5",
        readers: None,
    });
    let names_now: Vec<String> = names(store, &a).into_iter().map(|(n, _)| n).collect();
    assert!(
        names_now.contains(&"memo (2).md".to_owned()),
        "{names_now:?}"
    );
    assert!(
        store
            .source_files(s.row_id)
            .unwrap()
            .iter()
            .any(|f| f.path == "memo.md")
    );
}

/// A source may hold two equal files; uploads still refuse a second copy.
pub fn sources_equal_files_are_two_documents_and_uploads_still_deduplicate(store: &dyn Store) {
    let a = kb(store, "a");
    let s = source(store, &a, "one", None);
    let lease = claim(store, &s, "n:0");
    add(store, lease, "copy-1.md", "same");
    add(store, lease, "copy-2.md", "same");
    assert_eq!(
        names(store, &a).len(),
        2,
        "a source may hold two equal files"
    );
    let up = store
        .add_files(a.collection_id, &[file("u.md", "up")])
        .unwrap();
    let again = store
        .add_files(a.collection_id, &[file("u2.md", "up")])
        .unwrap();
    assert_eq!(
        again[0].file().id,
        up[0].file().id,
        "uploads still deduplicate"
    );
    assert!(matches!(again[0], crate::AddedFile::Duplicate { .. }));
    // An upload of bytes a synced file holds is a new upload: the sync may delete its copy.
    let third = store
        .add_files(a.collection_id, &[file("u3.md", "same")])
        .unwrap();
    assert!(matches!(third[0], crate::AddedFile::Added { .. }));
}

/// Reports are kept newest first; failures back off, successes follow the interval.
pub fn sources_reports_failures_and_schedules(store: &dyn Store) {
    let a = kb(store, "a");
    let s = source(store, &a, "one", Some(3_600_000));
    assert_eq!(
        store.due_sources(10).unwrap().len(),
        1,
        "a new scheduled source is due"
    );
    let manual = source(store, &a, "two", None);
    assert!(
        store
            .due_sources(10)
            .unwrap()
            .iter()
            .all(|d| d.id != manual.id),
        "a source synced only when asked is never due"
    );

    let lease = claim(store, &s, "n:0");
    assert!(
        store.due_sources(10).unwrap().is_empty(),
        "a held source is not due"
    );
    let id = store.start_sync_report(lease, None).unwrap();
    assert!(
        store
            .finish_sync_report(
                lease,
                &report(&id, &s, Some("the folder does not exist")),
                Some(60_000),
                None
            )
            .unwrap()
    );
    let failed = store.source(&s.id).unwrap().unwrap();
    assert_eq!(failed.failures, 1);
    assert_eq!(
        failed.last_error.as_deref(),
        Some("the folder does not exist")
    );
    assert!(failed.last_success_at.is_none());
    let next = failed.next_sync_at.unwrap();
    let last = failed.last_sync_at.unwrap();
    assert_eq!(next - last, 60_000, "a failure backs off");

    let lease = claim(store, &s, "n:0");
    let id2 = store.start_sync_report(lease, Some("abc123")).unwrap();
    assert!(
        store
            .finish_sync_report(lease, &report(&id2, &s, None), None, None)
            .unwrap()
    );
    let ok = store.source(&s.id).unwrap().unwrap();
    assert_eq!((ok.failures, ok.last_error.as_deref()), (0, None));
    assert_eq!(ok.last_success_at, ok.last_sync_at);
    assert_eq!(
        ok.next_sync_at.unwrap() - ok.last_sync_at.unwrap(),
        3_600_000
    );

    let reports = store.sync_reports(s.row_id, 10).unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].id, id2, "newest first");
    assert_eq!(reports[0].counts.added, 2);
    assert_eq!(reports[0].details[0].path, "logo.png");
    assert_eq!(reports[0].revision.as_deref(), Some("abc123"));
    assert_eq!(reports[1].status, "failed");
    assert_eq!(store.sync_reports(s.row_id, 1).unwrap().len(), 1);

    // A sync whose node died leaves a running report; the next one marks it.
    let lease = claim(store, &s, "n:0");
    let dead = store.start_sync_report(lease, None).unwrap();
    store.renew_source(lease, -1).unwrap();
    let lease = claim(store, &s, "m:0");
    store.start_sync_report(lease, None).unwrap();
    let r = store.sync_reports(s.row_id, 10).unwrap();
    let dead = r.iter().find(|x| x.id == dead).unwrap();
    assert_eq!(dead.status, "failed");
    assert!(dead.error.as_deref().unwrap().contains("interrupted"));
}

/// Detaching keeps or deletes the documents; a knowledge base takes its sources with it.
pub fn sources_removing_keeps_or_deletes_documents(store: &dyn Store) {
    let a = kb(store, "a");
    store
        .add_files(a.collection_id, &[file("memo.md", "m")])
        .unwrap();
    let s1 = source(store, &a, "one", None);
    let lease = claim(store, &s1, "n:0");
    add(store, lease, "x.md", "sx");
    add(store, lease, "dup.md", "m");
    store.delete_source(s1.row_id, true).unwrap();
    let kept: Vec<String> = names(store, &a).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        kept,
        vec!["memo.md".to_owned(), "x.md".to_owned()],
        "kept as uploads, except a copy of bytes an upload already holds"
    );
    assert!(store.source(&s1.id).unwrap().is_none());
    assert!(store.sync_reports(s1.row_id, 10).unwrap().is_empty());

    let s2 = source(store, &a, "two", None);
    let lease = claim(store, &s2, "n:0");
    add(store, lease, "y.md", "sy");
    store.delete_source(s2.row_id, false).unwrap();
    let left: Vec<String> = names(store, &a).into_iter().map(|(n, _)| n).collect();
    assert_eq!(left, vec!["memo.md".to_owned(), "x.md".to_owned()]);
    assert!(matches!(
        store.delete_source(s2.row_id, false),
        Err(Error::NotFound(_))
    ));

    // A knowledge base that goes takes its sources.
    let s3 = source(store, &a, "three", None);
    store.remove_collection(SPACE, "a").unwrap();
    assert!(store.source(&s3.id).unwrap().is_none());
}

/// Syncing on change is a flag every node reads; the documents at or under a few paths are
/// found without the others (a path is itself, or a folder and everything under it).
pub fn sources_watched_and_their_files_at_paths(store: &dyn Store) {
    let a = kb(store, "a");
    let s = source(store, &a, "watched", None);
    assert!(!s.watch, "not watched unless asked");
    let on = store.set_source_watch(s.row_id, true).unwrap();
    assert!(on.watch && on.interval_ms.is_none() && on.next_sync_at.is_none());
    assert!(store.source(&s.id).unwrap().unwrap().watch);
    assert!(
        store
            .sources(None)
            .unwrap()
            .iter()
            .any(|r| r.id == s.id && r.watch)
    );
    assert!(matches!(
        store.set_source_watch(999_999, true),
        Err(Error::NotFound(_))
    ));
    let lease = claim(store, &s, "node-1");
    for (i, p) in [
        "a.md",
        "a/b.md",
        "a/b/c.md",
        "a.md.d/x.md",
        "a0.md",
        "ab/x.md",
        "z.md",
    ]
    .iter()
    .enumerate()
    {
        add(store, lease, p, &format!("{i:064}"));
    }
    let at = |paths: &[&str]| -> Vec<String> {
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        store
            .source_files_at(s.row_id, &paths)
            .unwrap()
            .into_iter()
            .map(|f| f.path)
            .collect()
    };
    assert_eq!(at(&["a.md"]), ["a.md"]);
    assert_eq!(at(&["a"]), ["a/b.md", "a/b/c.md"]);
    assert_eq!(
        at(&["a", "a/b/c.md", "z.md"]),
        ["a/b.md", "a/b/c.md", "z.md"]
    );
    assert_eq!(at(&["a/b"]), ["a/b/c.md"]);
    assert!(at(&["gone.md", "a/b/c.md/x"]).is_empty());
    assert_eq!(at(&[""]).len(), 7, "the empty path is everything");
    let f = &store.source_files_at(s.row_id, &["z.md".into()]).unwrap()[0];
    assert_eq!((f.version.as_str(), f.sha256.len()), ("v1", 64));
    let off = store.set_source_watch(s.row_id, false).unwrap();
    assert!(!off.watch);
}

/// A synced file's readers are set with the change that adds, replaces, touches or renames
/// it, in the same transaction; the source keeps its mapping.
pub fn sources_readers_follow_every_change_and_the_mapping_is_kept(store: &dyn Store) {
    let a = kb(store, "a");
    let s = source(store, &a, "readers", None);
    assert_eq!(s.readers, None);
    let mapping = r#"{"rules":[{"paths":"hr/**","readers":["group:hr"]}]}"#;
    let s2 = store
        .set_source_readers(s.row_id, Some(mapping))
        .expect("set_source_readers");
    assert_eq!(s2.readers.as_deref(), Some(mapping));
    assert_eq!(
        store.source(&s.id).unwrap().unwrap().readers.as_deref(),
        Some(mapping)
    );
    assert!(matches!(
        store.set_source_readers(999_999, None),
        Err(Error::NotFound(_))
    ));
    let hr = vec!["group:hr".to_owned()];
    let lease = claim(store, &s, "node-1");
    let applied = |change: SourceChange<'_>| {
        store
            .apply_source_change(lease, &change)
            .expect("apply_source_change")
            .expect("the lease holds")
    };
    let pay = applied(SourceChange::Add {
        path: "hr/pay.md",
        version: "v1",
        file: &NewKbFile {
            readers: Some(hr.clone()),
            ..file("hr/pay.md", "sha-pay")
        },
    });
    let open = applied(SourceChange::Add {
        path: "open.md",
        version: "v1",
        file: &file("open.md", "sha-open"),
    });
    let readers = |row: i64| store.kb_file_by_row(row).unwrap().unwrap().readers;
    assert_eq!(readers(pay), Some(hr.clone()));
    assert_eq!(readers(open), None);
    let known = store.source_files(s.row_id).expect("source_files");
    assert_eq!(
        known
            .iter()
            .map(|f| (f.path.as_str(), f.readers.clone()))
            .collect::<Vec<_>>(),
        [("hr/pay.md", Some(hr.clone())), ("open.md", None)]
    );
    // The mapping changed: same bytes, new readers.
    applied(SourceChange::Touch {
        file_row_id: open,
        version: "v1",
        readers: Some(&[]),
    });
    assert_eq!(readers(open), Some(Vec::new()));
    // Moved out of hr/: readers at the new path, in the same change.
    applied(SourceChange::Rename {
        file_row_id: pay,
        path: "pay.md",
        name: "pay.md",
        version: "v1",
        readers: None,
    });
    assert_eq!(readers(pay), None);
    applied(SourceChange::Replace {
        file_row_id: pay,
        version: "v2",
        file: &NewKbFile {
            readers: Some(hr.clone()),
            ..file("pay.md", "sha-pay-2")
        },
    });
    assert_eq!(readers(pay), Some(hr.clone()));
    assert_eq!(store.restricted_files(&[a.collection_id]).unwrap().len(), 2);
}

/// A sync whose node died (claimed, never finished, the claim lapsed) is due again whatever
/// its interval, so another node resumes it; its report shows what it did so far while it
/// runs, and reads as interrupted once its claim lapsed, before and after the next sync.
pub fn sources_an_interrupted_sync_is_due_and_its_report_says_so(store: &dyn Store) {
    let a = kb(store, "a");
    let manual = source(store, &a, "manual", None);
    let due_ids = |store: &dyn Store| -> Vec<String> {
        store
            .due_sources(10)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert!(due_ids(store).is_empty(), "synced only when asked");
    let lease = claim(store, &manual, "n:0");
    let id = store.start_sync_report(lease, None).unwrap();
    let mut progress = report(&id, &manual, None);
    progress.status = "running".into();
    progress.finished_at = None;
    progress.counts = SyncCounts {
        added: 3,
        ..SyncCounts::default()
    };
    progress.revision = Some("rev1".into());
    assert!(store.record_sync_progress(lease, &progress).unwrap());
    let [now] = &store.sync_reports(manual.row_id, 10).unwrap()[..] else {
        panic!("one report")
    };
    assert_eq!(now.status, "running");
    assert_eq!(
        (now.counts.added, now.revision.as_deref()),
        (3, Some("rev1"))
    );
    assert_eq!(now.details.len(), 1);
    assert!(due_ids(store).is_empty(), "held: not due");

    // The node dies: its claim lapses.
    store.renew_source(lease, -1).unwrap();
    assert_eq!(due_ids(store), vec![manual.id.clone()], "interrupted: due");
    let [dead] = &store.sync_reports(manual.row_id, 10).unwrap()[..] else {
        panic!("one report")
    };
    assert_eq!(dead.status, "failed");
    assert_eq!(dead.error.as_deref(), Some(crate::SYNC_INTERRUPTED));
    assert_eq!(dead.counts.added, 3, "what it did is kept");
    assert!(
        !store.record_sync_progress(lease, &progress).unwrap(),
        "a lapsed claim records nothing"
    );

    // Another node resumes it; once finished, it is not due any more.
    let lease = claim(store, &manual, "m:0");
    let id2 = store.start_sync_report(lease, None).unwrap();
    assert!(due_ids(store).is_empty(), "held again");
    assert!(
        store
            .finish_sync_report(lease, &report(&id2, &manual, None), None, None)
            .unwrap()
    );
    assert!(due_ids(store).is_empty());
    let reports = store.sync_reports(manual.row_id, 10).unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].id, id2);
    assert_eq!(reports[0].status, "succeeded");
    assert_eq!(reports[1].id, id);
    assert_eq!(reports[1].status, "failed");
    assert_eq!(reports[1].error.as_deref(), Some(crate::SYNC_INTERRUPTED));
    assert!(reports[1].finished_at.is_some(), "closed by the next sync");
    assert_eq!(reports[1].counts.added, 3);
}

/// A source's own network allowance is kept; a sync the guard refused remembers the policy
/// it was refused under, and is due at once when a node with another policy asks
/// (`retry_refused_sources`) or when its allowance changes — never under the same policy.
pub fn sources_a_refused_sync_is_retried_under_another_network_policy(store: &dyn Store) {
    let a = kb(store, "a");
    let s = source(store, &a, "refused", Some(3_600_000));
    assert_eq!(s.allow_net, None);
    assert_eq!(s.refused_under, None);
    let other = source(store, &a, "failing", Some(3_600_000));
    let fail = |s: &SourceRow, refused_under: Option<&str>| {
        let lease = claim(store, s, "n:0");
        let id = store.start_sync_report(lease, None).unwrap();
        assert!(
            store
                .finish_sync_report(
                    lease,
                    &report(&id, s, Some("refused: 127.0.0.1 is a loopback address")),
                    Some(3_600_000),
                    refused_under,
                )
                .unwrap()
        );
        store.source(&s.id).unwrap().unwrap()
    };
    let refused = fail(&s, Some("guarded:"));
    assert_eq!(refused.refused_under.as_deref(), Some("guarded:"));
    let failed = fail(&other, None);
    assert_eq!(failed.refused_under, None, "not refused by the guard");
    let due_ids = || -> Vec<String> {
        store
            .due_sources(10)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert!(due_ids().is_empty(), "both back off");
    // The same policy retries nothing; another one retries the refused source only.
    assert_eq!(store.retry_refused_sources("guarded:").unwrap(), 0);
    assert!(due_ids().is_empty());
    assert_eq!(
        store.retry_refused_sources("guarded:127.0.0.1/32").unwrap(),
        1
    );
    assert_eq!(due_ids(), vec![s.id.clone()]);
    // A sync that succeeds forgets the refusal.
    let lease = claim(store, &s, "n:0");
    let id = store.start_sync_report(lease, None).unwrap();
    assert!(
        store
            .finish_sync_report(lease, &report(&id, &s, None), None, None)
            .unwrap()
    );
    let ok = store.source(&s.id).unwrap().unwrap();
    assert_eq!(ok.refused_under, None);
    assert_eq!(store.retry_refused_sources("open").unwrap(), 0);
    assert!(due_ids().is_empty());
    // An allowance is kept; set on a refused source, it makes it due at once.
    let refused = fail(&s, Some("guarded:"));
    assert!(refused.next_sync_at.unwrap() > quarry_core::now_millis());
    let allowed = store
        .set_source_allow_net(s.row_id, Some("127.0.0.1/32"))
        .unwrap();
    assert_eq!(allowed.allow_net.as_deref(), Some("127.0.0.1/32"));
    assert_eq!(due_ids(), vec![s.id.clone()]);
    let kept = store.sources(Some(&[a.collection_id])).unwrap();
    assert_eq!(kept[0].allow_net.as_deref(), Some("127.0.0.1/32"));
    // On a source that was not refused, the schedule stays.
    let unchanged = store
        .set_source_allow_net(other.row_id, Some("10.0.0.0/8"))
        .unwrap();
    assert_eq!(unchanged.next_sync_at, failed.next_sync_at);
    let cleared = store.set_source_allow_net(other.row_id, None).unwrap();
    assert_eq!(cleared.allow_net, None);
    // A held source is left to the sync that holds it.
    let _lease = claim(store, &s, "n:1");
    assert_eq!(store.retry_refused_sources("open").unwrap(), 0);
}
