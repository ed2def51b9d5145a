//! Folders that sync on change: the schedule's flag, and a sync of a few changed paths
//! (`Engine::sync_source_paths`) — what it lists, what it changes, what it leaves alone.

use quarry_core::Error;

use crate::engine::Engine;
use crate::kb::knowledge::CreateKnowledgeBase;
use crate::kb::sources::AddSource;
use crate::progress::NoProgress;
use crate::test_support::{drain, engine, keyword_passages};
use quarry_sources::Location;
use quarry_store::{FileFilter, FileStatus};

const OWNER: &str = "test-node:watch";

/// (name, id, status) of the knowledge base's documents, by name.
fn documents(e: &Engine) -> Vec<(String, String, FileStatus)> {
    let mut v: Vec<_> = e
        .kb_documents("notes", &FileFilter::default())
        .unwrap()
        .into_iter()
        .map(|f| (f.file_name, f.id, f.status))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn found(e: &Engine, word: &str) -> Vec<String> {
    keyword_passages(e, word)
        .into_iter()
        .map(|h| h.knowledge_filename)
        .collect()
}

fn paths(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_few_changed_paths_sync_like_a_full_sync_would() {
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let f = folder.path();
    std::fs::create_dir_all(f.join("sub")).unwrap();
    std::fs::write(f.join("alpha.md"), "# Alpha\n\nharbourmaster notes").unwrap();
    std::fs::write(f.join("sub/beta.md"), "# Beta\n\nlighthouse keeper").unwrap();
    std::fs::write(f.join("gamma.md"), "# Gamma\n\nfoghorn schedule").unwrap();
    let e = engine(home.path());
    e.create_knowledge_base(&CreateKnowledgeBase {
        name: "notes".into(),
        description: String::new(),
        chunk_size: None,
        chunk_overlap: None,
    })
    .unwrap();
    // Only a folder may be watched.
    let git = e.add_source(
        "notes",
        &AddSource {
            location: Location::git("https://example.com/r.git", None, None).unwrap(),
            mask: None,
            interval: None,
            secret: None,
            watch: true,
            readers: None,
            allow_net: Vec::new(),
        },
    );
    assert!(matches!(git, Err(Error::InvalidInput(_))), "{git:?}");
    let s = e
        .add_source(
            "notes",
            &AddSource {
                location: Location::folder(f).unwrap(),
                mask: Some("**/*.md".into()),
                interval: None,
                secret: None,
                watch: true,
                readers: None,
                allow_net: Vec::new(),
            },
        )
        .unwrap();
    assert!(s.watch && s.interval_seconds.is_none());
    let watched = e.watched_folders().unwrap();
    assert_eq!(watched.len(), 1);
    assert_eq!(
        (watched[0].id.as_str(), watched[0].path.as_path()),
        (s.id.as_str(), f)
    );

    // The reconciliation: a full sync.
    let first = e.sync_source(&s.id, OWNER, &NoProgress).unwrap();
    assert_eq!(first.report.counts.added, 3);
    drain(&e);
    let before = documents(&e);
    assert!(
        before.iter().all(|d| d.2 == FileStatus::Ready),
        "{before:?}"
    );
    let id_of = |docs: &[(String, String, FileStatus)], name: &str| {
        docs.iter()
            .find(|d| d.0 == name)
            .map(|d| d.1.clone())
            .unwrap_or_else(|| panic!("no {name} in {docs:?}"))
    };

    // Nothing changed at these paths (an editor's temporary file came and went, a file the
    // mask leaves out): nothing claimed, nothing reported.
    std::fs::write(f.join("notes.txt"), "not markdown").unwrap();
    let none = e
        .sync_source_paths(&s.id, OWNER, &paths(&["alpha.md", "4913", "notes.txt"]))
        .unwrap();
    assert!(none.is_none());
    assert_eq!(e.sync_reports(&s.id, 10).unwrap().len(), 1);

    // An edit saved through a temporary file: the document keeps its id, and its new words
    // are found once processed.
    std::fs::write(f.join(".alpha.md.swp"), "# Alpha\n\nbreakwater repairs").unwrap();
    std::fs::rename(f.join(".alpha.md.swp"), f.join("alpha.md")).unwrap();
    let edit = e
        .sync_source_paths(&s.id, OWNER, &paths(&[".alpha.md.swp", "alpha.md"]))
        .unwrap()
        .unwrap();
    let c = &edit.report.counts;
    assert_eq!((c.changed, c.added, c.deleted, c.unchanged), (1, 0, 0, 0));
    assert_eq!(edit.queued.len(), 1);
    drain(&e);
    assert_eq!(found(&e, "breakwater"), ["alpha.md"]);
    assert!(found(&e, "harbourmaster").is_empty());
    assert_eq!(
        id_of(&documents(&e), "alpha.md"),
        id_of(&before, "alpha.md")
    );

    // A rename seen as its two paths: the same document, by content.
    std::fs::rename(f.join("gamma.md"), f.join("sub/delta.md")).unwrap();
    let renamed = e
        .sync_source_paths(&s.id, OWNER, &paths(&["gamma.md", "sub/delta.md"]))
        .unwrap()
        .unwrap();
    assert_eq!(renamed.report.counts.renamed, 1, "{:?}", renamed.report);
    assert_eq!(
        id_of(&documents(&e), "sub/delta.md"),
        id_of(&before, "gamma.md")
    );

    // A folder stands for everything under it: made with files, or deleted.
    std::fs::create_dir_all(f.join("new/deep")).unwrap();
    std::fs::write(f.join("new/deep/epsilon.md"), "# Epsilon\n\nquayside").unwrap();
    std::fs::write(f.join("new/zeta.md"), "# Zeta\n\nslipway").unwrap();
    let made = e
        .sync_source_paths(&s.id, OWNER, &paths(&["new"]))
        .unwrap()
        .unwrap();
    assert_eq!(made.report.counts.added, 2);
    std::fs::remove_dir_all(f.join("sub")).unwrap();
    let gone = e
        .sync_source_paths(&s.id, OWNER, &paths(&["sub"]))
        .unwrap()
        .unwrap();
    assert_eq!(gone.report.counts.deleted, 2, "{:?}", gone.report);
    drain(&e);
    let names: Vec<String> = documents(&e).into_iter().map(|d| d.0).collect();
    assert_eq!(names, ["alpha.md", "new/deep/epsilon.md", "new/zeta.md"]);
    assert!(found(&e, "lighthouse").is_empty());
    assert_eq!(
        found(&e, "slipway"),
        ["zeta.md"],
        "the file name, without its folder"
    );

    // A report per sync that did something; the paths outside were not looked at.
    let reports = e.sync_reports(&s.id, 10).unwrap();
    assert_eq!(reports.len(), 5);
    assert!(reports.iter().all(|r| r.status == "succeeded"));
    assert_eq!(reports[0].counts.unchanged, 0, "{:?}", reports[0]);

    // A full sync afterwards finds nothing left to do.
    let again = e.sync_source(&s.id, OWNER, &NoProgress).unwrap();
    let c = &again.report.counts;
    assert_eq!(
        (c.added, c.changed, c.renamed, c.deleted, c.unchanged),
        (0, 0, 0, 0, 3)
    );

    // While another sync holds the source, a change waits (Conflict) and is retried.
    let lease = e
        .store()
        .claim_source(
            e.store().source(&s.id).unwrap().unwrap().row_id,
            "other-node",
            60_000,
        )
        .unwrap()
        .unwrap();
    std::fs::write(f.join("alpha.md"), "# Alpha\n\nthird version").unwrap();
    let held = e.sync_source_paths(&s.id, OWNER, &paths(&["alpha.md"]));
    assert!(matches!(held, Err(Error::Conflict(_))), "{held:?}");
    assert!(lease.token > 0);

    // Watching off: no longer listed for the watchers.
    let off = e.set_source_watch(&s.id, false).unwrap();
    assert!(!off.watch);
    assert!(e.watched_folders().unwrap().is_empty());
}
