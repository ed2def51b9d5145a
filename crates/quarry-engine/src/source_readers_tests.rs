//! A source's reader mapping: each synced document gets its readers from its path (rules,
//! then CODEOWNERS), in the change that adds or moves it; a changed mapping moves only the
//! readers of the documents it concerns, and says so in the report.

use quarry_core::{Access, Scope};

use crate::engine::Engine;
use crate::kb::sources::AddSource;
use crate::progress::NoProgress;
use crate::retrieval::search::SearchRequest;
use crate::test_support::{create_kb, drain, engine};
use quarry_sources::{Location, ReaderMapping};
use quarry_store::FileFilter;

fn readers_of(e: &Engine) -> Vec<(String, Option<Vec<String>>)> {
    let mut v: Vec<_> = e
        .kb_documents("handbook", &FileFilter::default())
        .unwrap()
        .into_iter()
        .map(|f| (f.file_name, f.readers))
        .collect();
    v.sort();
    v
}

fn found(e: &Engine, word: &str) -> usize {
    let mut req = SearchRequest::new(word);
    req.min_score = 0.0;
    e.search(&req).unwrap().len()
}

#[test]
fn a_mapping_decides_readers_per_path_and_a_changed_mapping_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("src");
    std::fs::create_dir_all(folder.join("hr")).unwrap();
    std::fs::create_dir_all(folder.join("public")).unwrap();
    std::fs::write(folder.join("hr/pay.md"), "# Pay\n\nsalary bands zebraword").unwrap();
    std::fs::write(
        folder.join("public/intro.md"),
        "# Intro\n\nwelcome zebraword",
    )
    .unwrap();
    std::fs::write(folder.join("misc.md"), "# Misc\n\nunmapped zebraword").unwrap();
    let e = engine(&dir.path().join("home"));
    create_kb(&e, "handbook");
    let mapping = ReaderMapping::from_json(
        r#"{"rules":[{"paths":"hr/**","readers":["group:hr"]},
                     {"paths":"public/**","readers":["everyone"]}]}"#,
    )
    .unwrap();
    let s = e
        .add_source(
            "handbook",
            &AddSource {
                location: Location::folder(&folder).unwrap(),
                mask: None,
                interval: None,
                secret: None,
                watch: false,
                readers: Some(mapping),
                allow_net: Vec::new(),
            },
        )
        .unwrap();
    assert!(s.readers.is_some());
    e.sync_source(&s.id, "test", &NoProgress).unwrap();
    drain(&e);
    assert_eq!(
        readers_of(&e),
        [
            ("hr/pay.md".to_owned(), Some(vec!["group:hr".to_owned()])),
            ("misc.md".to_owned(), Some(Vec::new())),
            ("public/intro.md".to_owned(), None),
        ]
    );
    let reader = |keys: &[&str]| {
        e.scoped(Scope {
            access: Access::Read,
            machine_owner: false,
            readers: Some(keys.iter().map(|k| (*k).to_owned()).collect()),
            ..Scope::owner(quarry_core::DEFAULT_SPACE)
        })
    };
    assert_eq!(found(&reader(&["user:bob"]), "zebraword"), 1);
    assert_eq!(found(&reader(&["user:ann", "group:hr"]), "zebraword"), 2);
    assert_eq!(found(&e, "zebraword"), 3);
    // A synced document's readers are the source's: refused by hand.
    let pay = &e
        .kb_documents("handbook", &FileFilter::default())
        .unwrap()
        .into_iter()
        .find(|f| f.file_name == "hr/pay.md")
        .unwrap();
    assert!(pay.synced);
    assert!(e.set_document_readers("handbook", &pay.id, None).is_err());
    // The mapping changes: hr opens up, the rest is for eng; only readers move.
    let mapping = ReaderMapping::from_json(
        r#"{"rules":[{"paths":"hr/**","readers":["everyone"]},
                     {"paths":"**","readers":["group:eng"]}]}"#,
    )
    .unwrap();
    e.set_source_readers(&s.id, Some(&mapping)).unwrap();
    let outcome = e.sync_source(&s.id, "test", &NoProgress).unwrap();
    assert!(outcome.queued.is_empty(), "nothing to convert again");
    let mut lines: Vec<(String, String)> = outcome
        .report
        .details
        .iter()
        .map(|l| (l.path.clone(), l.action.clone()))
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            ("hr/pay.md".to_owned(), "readers".to_owned()),
            ("misc.md".to_owned(), "readers".to_owned()),
            ("public/intro.md".to_owned(), "readers".to_owned()),
        ]
    );
    assert_eq!(outcome.report.counts.unchanged, 3);
    assert_eq!(found(&reader(&["user:bob"]), "zebraword"), 1);
    assert_eq!(found(&reader(&["group:eng"]), "zebraword"), 3);
    // No mapping: everyone again; a second sync changes nothing.
    e.set_source_readers(&s.id, None).unwrap();
    e.sync_source(&s.id, "test", &NoProgress).unwrap();
    assert_eq!(found(&reader(&["user:bob"]), "zebraword"), 3);
    let again = e.sync_source(&s.id, "test", &NoProgress).unwrap();
    assert!(
        again.report.details.is_empty(),
        "{:?}",
        again.report.details
    );
}

/// A sync report names and counts, for a caller who may not read every document, only the
/// files it may read (by their readers when the sync ran, and now); the knowledge base's
/// admins see every line. The same for the report a caller's own sync answers with.
#[test]
fn reports_name_and_count_only_what_the_caller_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("src");
    std::fs::create_dir_all(folder.join("hr")).unwrap();
    std::fs::write(folder.join("hr/pay.md"), "# Pay\n\nsalary bands").unwrap();
    std::fs::write(folder.join("hr/logo.png"), b"not converted").unwrap();
    std::fs::write(folder.join("hr/old.md"), "# Old\n\nstays as it is").unwrap();
    std::fs::write(folder.join("intro.md"), "# Intro\n\nwelcome").unwrap();
    let e = engine(&dir.path().join("home"));
    create_kb(&e, "handbook");
    let mapping = ReaderMapping::from_json(
        r#"{"rules":[{"paths":"hr/**","readers":["group:hr"]},
                     {"paths":"**","readers":["everyone"]}]}"#,
    )
    .unwrap();
    let s = e
        .add_source(
            "handbook",
            &AddSource {
                location: Location::folder(&folder).unwrap(),
                mask: None,
                interval: None,
                secret: None,
                watch: false,
                readers: Some(mapping),
                allow_net: Vec::new(),
            },
        )
        .unwrap();
    let first = e.sync_source(&s.id, "test", &NoProgress).unwrap().report;
    assert_eq!((first.counts.added, first.counts.skipped), (3, 1));
    assert_eq!(first.counts.restricted, None, "kept, never shown");
    let reader = |keys: &[&str]| {
        e.scoped(Scope {
            access: Access::Write,
            machine_owner: false,
            readers: Some(keys.iter().map(|k| (*k).to_owned()).collect()),
            ..Scope::owner(quarry_core::DEFAULT_SPACE)
        })
    };
    let lines = |r: &quarry_store::SyncReport| -> Vec<(String, String)> {
        let mut v: Vec<_> = r
            .details
            .iter()
            .map(|l| (l.path.clone(), l.action.clone()))
            .collect();
        v.sort();
        v
    };
    let bob = reader(&["user:bob"]);
    let [seen] = &bob.sync_reports(&s.id, 10).unwrap()[..] else {
        panic!("one report")
    };
    assert_eq!(lines(seen), [("intro.md".to_owned(), "added".to_owned())]);
    assert_eq!((seen.counts.added, seen.counts.skipped), (1, 0));
    assert_eq!(seen.counts.added, bob.source(&s.id).unwrap().documents);
    assert!(seen.details.iter().all(|l| l.readers.is_none()));
    let ann = reader(&["user:ann", "group:hr"]);
    let [seen] = &ann.sync_reports(&s.id, 10).unwrap()[..] else {
        panic!("one report")
    };
    assert_eq!(lines(seen).len(), 4);
    assert_eq!((seen.counts.added, seen.counts.skipped), (3, 1));
    // The owner sees every line, with its readers.
    let [seen] = &e.sync_reports(&s.id, 10).unwrap()[..] else {
        panic!("one report")
    };
    assert_eq!(lines(seen), lines(&first));
    assert!(seen.details.iter().any(|l| l.readers.is_some()));
    // bob's own sync: hr's deletion and addition unsaid, unchanged hr files uncounted.
    std::fs::remove_file(folder.join("hr/pay.md")).unwrap();
    std::fs::write(folder.join("hr/bonus.md"), "# Bonus\n\nthe pool").unwrap();
    std::fs::write(folder.join("intro.md"), "# Intro\n\nwelcome again").unwrap();
    let outcome = bob.sync_source(&s.id, "test", &NoProgress).unwrap();
    let queued: Vec<&str> = outcome
        .queued
        .iter()
        .map(|f| f.file_name.as_str())
        .collect();
    assert_eq!(queued, ["intro.md"], "hr/bonus.md is queued, unnamed");
    let mine = outcome.report;
    assert_eq!(
        lines(&mine),
        [("intro.md".to_owned(), "changed".to_owned())]
    );
    let c = &mine.counts;
    assert_eq!(
        (c.added, c.changed, c.deleted, c.unchanged, c.skipped),
        (0, 1, 0, 0, 0)
    );
    let all = &e.sync_reports(&s.id, 1).unwrap()[0];
    assert_eq!(
        (all.counts.added, all.counts.deleted, all.counts.unchanged),
        (1, 1, 1),
        "hr/old.md unchanged, counted for the owner only"
    );
}
