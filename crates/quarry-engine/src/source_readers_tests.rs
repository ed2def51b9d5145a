//! A source's reader mapping: each synced document gets its readers from its path (rules,
//! then CODEOWNERS), in the change that adds or moves it; a changed mapping moves only the
//! readers of the documents it concerns, and says so in the report.

use quarry_core::{Access, Scope};

use crate::engine::Engine;
use crate::progress::NoProgress;
use crate::search::SearchRequest;
use crate::sources::AddSource;
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
