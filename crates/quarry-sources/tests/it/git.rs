//! A Git source against a real `git http-backend` on loopback: commits, edits, renames,
//! deletions, force-pushes, a branch and a folder inside the repository, a private
//! repository that needs a token, and every error a person can cause.

use std::path::{Path, PathBuf};

use quarry_sources::{FileMask, Location, Secret, Source, SourceError, open, plan};
use quarry_test_http::Server;
use quarry_test_http::git::{run, serve};

use crate::support::{MAX, summary, sync_once};

const TOKEN: &str = "tok-Sup3rSecret-0123";

/// A work tree whose commits are pushed to a bare repository that the server exports.
struct Repo {
    _root: tempfile::TempDir,
    work: PathBuf,
    bare: PathBuf,
    exported: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let root = tempfile::tempdir().unwrap();
        let exported = root.path().join("srv");
        let bare = exported.join("handbook.git");
        let work = root.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        run(
            root.path(),
            &["init", "--quiet", "--bare", bare.to_str().unwrap()],
        );
        run(&work, &["init", "--quiet"]);
        run(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        Repo {
            _root: root,
            work,
            bare,
            exported,
        }
    }

    fn write(&self, path: &str, text: &str) {
        let p = self.work.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn commit_and_push(&self, message: &str) {
        run(&self.work, &["add", "-A"]);
        run(&self.work, &["commit", "--quiet", "-m", message]);
        run(
            &self.work,
            &["push", "--quiet", "--force", "origin", "HEAD:main"],
        );
    }
}

fn git_source(
    server: &Server,
    branch: Option<&str>,
    path: Option<&str>,
    secret: Option<Secret>,
    work: &Path,
) -> Box<dyn Source> {
    let location = Location::git(&server.url("/handbook.git"), branch, path).unwrap();
    open(
        &location,
        secret.as_ref(),
        FileMask::parse("**/*.md").unwrap(),
        work,
    )
    .unwrap()
}

#[test]
fn edits_renames_deletions_and_force_pushes_over_http() {
    let repo = Repo::new();
    repo.write("intro.md", "# Intro\nWelcome.");
    repo.write("policies/leave.md", "# Leave\n25 days.");
    repo.write("policies/travel.md", "# Travel\nEconomy class.");
    repo.write("logo.png", "not synced by the mask");
    repo.commit_and_push("first");
    let server = serve(&repo.exported, None);
    let work = tempfile::tempdir().unwrap();
    let mut source = git_source(&server, None, None, None, work.path());

    let (listing, outcome, known) = sync_once(source.as_mut(), &[]);
    assert_eq!(
        summary(&outcome),
        vec!["+intro.md", "+policies/leave.md", "+policies/travel.md"]
    );
    let head = run(&repo.work, &["rev-parse", "HEAD"]);
    assert_eq!(listing.revision.as_deref(), Some(head.trim()));

    // Nothing changed: nothing is fetched.
    let listing2 = source.list().unwrap();
    let p = plan(&known, &listing2);
    assert!(p.fetch.is_empty() && p.gone.is_empty(), "{p:?}");
    assert_eq!(p.unchanged.len(), 3);

    // An edit, a rename without an edit, a deletion and an addition in one commit.
    repo.write("intro.md", "# Intro\nWelcome, all.");
    run(
        &repo.work,
        &["mv", "policies/leave.md", "policies/time-off.md"],
    );
    run(&repo.work, &["rm", "--quiet", "policies/travel.md"]);
    repo.write("faq.md", "# FAQ");
    repo.commit_and_push("second");
    let (_, outcome, known) = sync_once(source.as_mut(), &known);
    assert_eq!(
        summary(&outcome),
        vec![
            "+faq.md",
            "~intro.md",
            "policies/leave.md->policies/time-off.md",
            "-policies/travel.md"
        ]
    );

    // History rewritten (a force-push): the new tip is synced like any other.
    run(
        &repo.work,
        &["checkout", "--quiet", "--orphan", "rewritten"],
    );
    run(&repo.work, &["rm", "-r", "--quiet", "--cached", "."]);
    for f in ["intro.md", "faq.md", "policies/time-off.md", "logo.png"] {
        let _ = std::fs::remove_file(repo.work.join(f));
    }
    repo.write("faq.md", "# FAQ");
    repo.write("only.md", "# Only after the force-push");
    repo.commit_and_push("rewritten");
    let (_, outcome, _) = sync_once(source.as_mut(), &known);
    assert_eq!(
        summary(&outcome),
        vec!["-intro.md", "+only.md", "-policies/time-off.md"]
    );
}

#[test]
fn a_branch_and_a_folder_inside_the_repository() {
    let repo = Repo::new();
    repo.write("docs/a.md", "# A");
    repo.write("docs/deep/b.md", "# B");
    repo.write("other/c.md", "# C");
    repo.commit_and_push("main");
    run(&repo.work, &["checkout", "--quiet", "-b", "draft"]);
    repo.write("docs/draft.md", "# Draft");
    run(&repo.work, &["add", "-A"]);
    run(&repo.work, &["commit", "--quiet", "-m", "draft"]);
    run(&repo.work, &["push", "--quiet", "origin", "draft"]);
    let server = serve(&repo.exported, None);

    let work = tempfile::tempdir().unwrap();
    let mut main_docs = git_source(&server, None, Some("docs"), None, work.path());
    assert_eq!(
        paths(main_docs.as_mut()),
        vec!["a.md", "deep/b.md"],
        "paths are relative to the folder"
    );

    let work2 = tempfile::tempdir().unwrap();
    let mut draft = git_source(&server, Some("draft"), Some("docs"), None, work2.path());
    assert_eq!(paths(draft.as_mut()), vec!["a.md", "deep/b.md", "draft.md"]);

    let work3 = tempfile::tempdir().unwrap();
    let mut missing = git_source(&server, Some("nope"), None, None, work3.path());
    let err = missing.list().unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("no branch \"nope\""), "{err}");

    // A folder that is not there is an error, never an empty listing (which would delete
    // every document).
    let work4 = tempfile::tempdir().unwrap();
    let mut typo = git_source(&server, None, Some("dcos"), None, work4.path());
    let err = typo.list().unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("no folder \"dcos\""), "{err}");

    // No repository at that URL.
    let location = Location::git(&server.url("/missing.git"), None, None).unwrap();
    let work5 = tempfile::tempdir().unwrap();
    let mut none = open(&location, None, FileMask::default(), work5.path()).unwrap();
    let err = none.list().unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
}

#[test]
fn a_private_repository_needs_its_token_and_never_shows_it() {
    let repo = Repo::new();
    repo.write("secret-plan.md", "# Plan");
    repo.commit_and_push("first");
    let server = serve(&repo.exported, Some(TOKEN));

    let work = tempfile::tempdir().unwrap();
    let err = git_source(&server, None, None, None, work.path())
        .list()
        .unwrap_err();
    assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
    assert!(err.to_string().contains("needs a credential"), "{err}");

    let wrong = Secret::new(None, "tok-wrong-999").unwrap();
    let err = git_source(&server, None, None, Some(wrong), work.path())
        .list()
        .unwrap_err();
    assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
    assert!(!err.to_string().contains("tok-wrong-999"), "{err}");

    let right = Secret::new(None, TOKEN).unwrap();
    let mut source = git_source(&server, None, None, Some(right), work.path());
    let listing = source.list().unwrap();
    assert_eq!(listing.items.len(), 1);
    assert_eq!(source.fetch(&listing.items[0], MAX).unwrap(), b"# Plan");

    // The credential file lived for one fetch only; nothing in the work folder holds it.
    for entry in walk(work.path()) {
        if entry.is_file() {
            let bytes = std::fs::read(&entry).unwrap();
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "{} holds the token",
                entry.display()
            );
        }
    }
    // Every request that reached the server sent it only as the Authorization header.
    for r in server.requests() {
        assert!(!r.target.contains(TOKEN), "{}", r.target);
    }
}

fn paths(source: &mut dyn Source) -> Vec<String> {
    source
        .list()
        .unwrap()
        .items
        .into_iter()
        .map(|i| i.path)
        .collect()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_repository_on_this_machine_and_an_oversized_file() {
    let repo = Repo::new();
    repo.write("big.md", &"x".repeat(5000));
    repo.write("small.md", "# Small");
    repo.commit_and_push("first");
    let location = Location::git(repo.bare.to_str().unwrap(), Some("main"), None).unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut source = open(&location, None, FileMask::default(), work.path()).unwrap();
    let listing = source.list().unwrap();
    assert_eq!(listing.items.len(), 2);
    let big = &listing.items[0];
    assert_eq!(big.size, Some(5000));
    let err = source.fetch(big, 1000).unwrap_err();
    assert!(
        matches!(
            err,
            SourceError::TooLarge {
                size: 5000,
                limit: 1000,
                ..
            }
        ),
        "{err:?}"
    );
    let bogus = quarry_sources::Item {
        path: "x".into(),
        version: "--output=/tmp/x".into(),
        size: None,
    };
    assert!(matches!(
        source.fetch(&bogus, MAX),
        Err(SourceError::Invalid(_))
    ));
}
