//! `quarry source …` through the real binary: folder and Git sources (a real `git
//! http-backend` on loopback) synced into a knowledge base — additions, edits, renames and
//! deletions reach search, document ids stay, uploads beside them are never touched, reports
//! say what happened, and every bad input is a clear error that changes nothing.

use std::collections::HashMap;

use serde_json::Value;

use crate::common::{Quarry, s, write_files};
use quarry_test_http::git::run as git;

/// `kb docs --json`: file name → document id.
fn docs(q: &Quarry, kb: &str) -> HashMap<String, String> {
    q.json(&["kb", "docs", kb])["documents"]
        .as_array()
        .expect("documents")
        .iter()
        .map(|d| {
            (
                d["file_name"].as_str().expect("file_name").to_owned(),
                d["id"].as_str().expect("id").to_owned(),
            )
        })
        .collect()
}

fn counts(report: &Value) -> [u64; 6] {
    let c = &report["counts"];
    [
        "added",
        "changed",
        "renamed",
        "deleted",
        "unchanged",
        "skipped",
    ]
    .map(|k| c[k].as_u64().unwrap_or_else(|| panic!("{k} in {report}")))
}

fn sync(q: &Quarry, id: &str) -> Value {
    q.json(&["source", "sync", id])["report"].clone()
}

/// Files found by a keyword search in the knowledge base.
fn found(q: &Quarry, word: &str) -> Vec<String> {
    q.search_files(&[word, "-c", "handbook"])
}

#[test]
fn a_folder_source_follows_edits_renames_and_deletions() {
    let q = Quarry::new();
    q.ok(&["kb", "create", "handbook"]);
    let src = q.corpus(
        "src",
        &[
            ("intro.md", "# Intro\nWelcome aboard, zebra crossing."),
            (
                "policies/leave.md",
                "# Leave\nTwenty-five days of quokka leave.",
            ),
            ("policies/travel.md", "# Travel\nEconomy walrus class."),
            ("logo.png", "not a document"),
        ],
    );
    // An upload beside the source: a sync never touches it.
    let upload = q.corpus("up", &[("memo.md", "# Memo\nThe narwhal memo.")]);
    q.ok(&["kb", "upload", "handbook", s(&upload.join("memo.md"))]);

    let added = q.json(&["source", "add", "handbook", "--folder", s(&src)]);
    let id = added["id"].as_str().expect("id").to_owned();
    assert_eq!(added["location"]["kind"], "folder");

    let first = sync(&q, &id);
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(counts(&first), [3, 0, 0, 0, 0, 1], "{first}");
    let skipped = &first["details"].as_array().unwrap();
    assert!(
        skipped
            .iter()
            .any(|l| l["path"] == "logo.png" && l["action"] == "skipped"),
        "{first}"
    );
    let before = docs(&q, "handbook");
    assert_eq!(before.len(), 4, "{before:?}");
    assert_eq!(found(&q, "quokka"), vec!["handbook/policies/leave.md"]);
    assert_eq!(found(&q, "walrus"), vec!["handbook/policies/travel.md"]);

    // Nothing changed: nothing is read, nothing is applied.
    assert_eq!(counts(&sync(&q, &id)), [0, 0, 0, 0, 3, 1]);

    // Edit, rename, delete, add — the way people do.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_files(
        &src,
        &[("intro.md", "# Intro\nWelcome aboard, okapi crossing.")],
    );
    std::fs::rename(
        src.join("policies/leave.md"),
        src.join("policies/time-off.md"),
    )
    .unwrap();
    std::fs::remove_file(src.join("policies/travel.md")).unwrap();
    write_files(&src, &[("faq.md", "# FAQ\nAsk the axolotl.")]);
    let second = sync(&q, &id);
    assert_eq!(counts(&second), [1, 1, 1, 1, 0, 1], "{second}");

    let after = docs(&q, "handbook");
    assert_eq!(
        after["intro.md"], before["intro.md"],
        "an edit keeps the id"
    );
    assert_eq!(
        after["policies/time-off.md"], before["policies/leave.md"],
        "a rename keeps the id"
    );
    assert!(!after.contains_key("policies/travel.md"));
    assert_eq!(
        after["memo.md"], before["memo.md"],
        "the upload is untouched"
    );
    assert_eq!(found(&q, "okapi"), vec!["handbook/intro.md"]);
    assert!(found(&q, "zebra").is_empty(), "the old text is gone");
    assert_eq!(found(&q, "quokka"), vec!["handbook/policies/time-off.md"]);
    assert!(found(&q, "walrus").is_empty(), "the deleted file is gone");
    assert_eq!(found(&q, "axolotl"), vec!["handbook/faq.md"]);
    assert_eq!(found(&q, "narwhal"), vec!["handbook/memo.md"]);

    // The reports are kept, newest first.
    let status = q.json(&["source", "status", &id]);
    assert_eq!(status["source"]["documents"], 3);
    let reports = status["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 3);
    assert_eq!(reports[0]["id"], second["id"]);

    // A folder that went away fails the sync and deletes nothing.
    let moved = q.work().join("moved");
    std::fs::rename(&src, &moved).unwrap();
    let err = q.err(&["source", "sync", &id]);
    assert!(err.contains("does not exist"), "{err}");
    assert_eq!(docs(&q, "handbook"), after);
    let status = q.json(&["source", "status", &id]);
    assert_eq!(status["source"]["failures"], 1);
    assert!(
        status["source"]["last_error"]
            .as_str()
            .unwrap()
            .contains("does not exist")
    );
    assert_eq!(status["reports"][0]["status"], "failed");
    std::fs::rename(&moved, &src).unwrap();
    assert_eq!(counts(&sync(&q, &id)), [0, 0, 0, 0, 3, 1]);
    assert_eq!(q.json(&["source", "status", &id])["source"]["failures"], 0);

    // Detached with its documents kept: they stay, no longer synced.
    q.ok(&["source", "rm", &id, "--keep-documents"]);
    assert_eq!(docs(&q, "handbook"), after);
    assert_eq!(q.json(&["source", "list"])["sources"], Value::Array(vec![]));
}

#[test]
fn removing_a_source_removes_its_documents_only() {
    let q = Quarry::new();
    q.ok(&["kb", "create", "handbook"]);
    let src = q.corpus("src", &[("a.md", "# A\nalpha capybara")]);
    let upload = q.corpus("up", &[("memo.md", "# Memo\nThe narwhal memo.")]);
    q.ok(&["kb", "upload", "handbook", s(&upload.join("memo.md"))]);
    let id = q.json(&["source", "add", "handbook", "--folder", s(&src)])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    sync(&q, &id);
    assert_eq!(found(&q, "capybara"), vec!["handbook/a.md"]);
    q.ok(&["source", "rm", &id]);
    assert!(found(&q, "capybara").is_empty());
    assert_eq!(found(&q, "narwhal"), vec!["handbook/memo.md"]);
    assert_eq!(docs(&q, "handbook").len(), 1);
}

#[test]
fn a_git_source_over_http() {
    let q = Quarry::new();
    q.ok(&["kb", "create", "handbook"]);
    let srv = q.dir("srv");
    let bare = srv.join("handbook.git");
    git(&srv, &["init", "--quiet", "--bare", s(&bare)]);
    let work = q.corpus(
        "work",
        &[
            ("docs/intro.md", "# Intro\nThe pangolin intro."),
            ("docs/leave.md", "# Leave\nThe ibex leave policy."),
            ("README.md", "# Not synced: outside --path"),
        ],
    );
    git(&work, &["init", "--quiet"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "--quiet", "-m", "one"]);
    git(&work, &["push", "--quiet", s(&bare), "HEAD:main"]);
    let server = quarry_test_http::git::serve(&srv, None);

    let url = server.url("/handbook.git");
    let added = q.json(&[
        "source", "add", "handbook", "--git", &url, "--branch", "main", "--path", "docs",
    ]);
    let id = added["id"].as_str().unwrap().to_owned();
    let first = sync(&q, &id);
    assert_eq!(counts(&first), [2, 0, 0, 0, 0, 0], "{first}");
    let head = git(&work, &["rev-parse", "HEAD"]);
    assert_eq!(first["revision"].as_str(), Some(head.trim()));
    let before = docs(&q, "handbook");
    assert_eq!(found(&q, "ibex"), vec!["handbook/leave.md"]);

    git(&work, &["mv", "docs/leave.md", "docs/time-off.md"]);
    git(&work, &["rm", "--quiet", "docs/intro.md"]);
    git(&work, &["commit", "--quiet", "-m", "two"]);
    git(&work, &["push", "--quiet", s(&bare), "HEAD:main"]);
    let second = sync(&q, &id);
    assert_eq!(counts(&second), [0, 0, 1, 1, 0, 0], "{second}");
    let after = docs(&q, "handbook");
    assert_eq!(after["time-off.md"], before["leave.md"]);
    assert!(found(&q, "pangolin").is_empty());
    assert_eq!(found(&q, "ibex"), vec!["handbook/time-off.md"]);
}

#[test]
fn bad_sources_are_clear_errors_that_change_nothing() {
    let q = Quarry::new();
    q.ok(&["kb", "create", "handbook"]);
    let src = q.corpus("src", &[("a.md", "# A")]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["source", "add", "nope", "--folder", s(&src)],
            "knowledge base 'nope' not found",
        ),
        (
            &["source", "add", "handbook", "--folder", "missing-dir"],
            "is not a directory",
        ),
        (
            &[
                "source",
                "add",
                "handbook",
                "--git",
                "ftp://example.com/r.git",
            ],
            "unsupported Git location",
        ),
        (
            &[
                "source",
                "add",
                "handbook",
                "--git",
                "https://me:tok@example.com/r.git",
            ],
            "must not carry a user name or password",
        ),
        (
            &[
                "source",
                "add",
                "handbook",
                "--git",
                "https://example.com/r.git",
                "--branch=-x",
            ],
            "invalid branch name",
        ),
        (
            &[
                "source",
                "add",
                "handbook",
                "--git",
                "https://example.com/r.git",
                "--path",
                "../up",
            ],
            "invalid folder",
        ),
        (
            &[
                "source",
                "add",
                "handbook",
                "--folder",
                s(&src),
                "--mask",
                " , ",
            ],
            "the file mask is empty",
        ),
        (
            &[
                "source",
                "add",
                "handbook",
                "--folder",
                s(&src),
                "--every",
                "10s",
            ],
            "at least 60 seconds",
        ),
        (
            &[
                "source",
                "add",
                "handbook",
                "--folder",
                s(&src),
                "--every",
                "5w",
            ],
            "invalid interval",
        ),
        (
            &["source", "sync", "no-such-source"],
            "source 'no-such-source' not found",
        ),
        (
            &["source", "status", "no-such-source"],
            "source 'no-such-source' not found",
        ),
        (
            &["source", "rm", "no-such-source"],
            "source 'no-such-source' not found",
        ),
    ];
    for (args, want) in cases {
        let err = q.err(args);
        assert!(err.contains(want), "quarry {args:?}: {err}");
    }
    assert_eq!(q.json(&["source", "list"])["sources"], Value::Array(vec![]));

    q.json(&["source", "add", "handbook", "--folder", s(&src)]);
    let err = q.err(&["source", "add", "handbook", "--folder", s(&src)]);
    assert!(
        err.contains("already has a source at that location"),
        "{err}"
    );
    assert_eq!(
        q.json(&["source", "list"])["sources"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

const KEY: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const TOKEN: &str = "tok-Pr1vate-Handbook-777";

#[test]
fn a_private_repository_with_a_sealed_token() {
    let mut q = Quarry::new();
    q.ok(&["kb", "create", "handbook"]);
    let srv = q.dir("srv");
    let bare = srv.join("private.git");
    git(&srv, &["init", "--quiet", "--bare", s(&bare)]);
    let work = q.corpus("work", &[("secret-plan.md", "# Plan\nThe wombat plan.")]);
    git(&work, &["init", "--quiet"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "--quiet", "-m", "one"]);
    git(&work, &["push", "--quiet", s(&bare), "HEAD:main"]);
    let server = quarry_test_http::git::serve(&srv, Some(TOKEN));
    let url = server.url("/private.git");
    q.set_env("HANDBOOK_TOKEN", TOKEN);

    // No key: the credential cannot be stored, and nothing is attached.
    let err = q.err(&[
        "source",
        "add",
        "handbook",
        "--git",
        &url,
        "--token-env",
        "HANDBOOK_TOKEN",
    ]);
    assert!(err.contains("needs QUARRY_SECRET_KEY"), "{err}");
    assert_eq!(q.json(&["source", "list"])["sources"], Value::Array(vec![]));
    let err = q.err(&[
        "source",
        "add",
        "handbook",
        "--git",
        &url,
        "--token-env",
        "NOT_SET_ANYWHERE",
    ]);
    assert!(err.contains("NOT_SET_ANYWHERE"), "{err}");

    q.set_env("QUARRY_SECRET_KEY", KEY);
    let added = q.json(&[
        "source",
        "add",
        "handbook",
        "--git",
        &url,
        "--token-env",
        "HANDBOOK_TOKEN",
    ]);
    assert_eq!(added["has_secret"], true);
    assert!(!added.to_string().contains(TOKEN));
    let id = added["id"].as_str().unwrap().to_owned();
    assert_eq!(counts(&sync(&q, &id)), [1, 0, 0, 0, 0, 0]);
    assert_eq!(found(&q, "wombat"), vec!["handbook/secret-plan.md"]);

    // The token is nowhere in the data directory, nor in what the CLI prints.
    for f in walk(q.home()) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
            "{} holds the token in clear",
            f.display()
        );
    }
    let status = q.ok(&["source", "status", &id, "--json"]);
    assert!(!status.contains(TOKEN));

    // Another key cannot open it: the sync says so and changes nothing.
    let other = "00".repeat(32);
    let err = q.err_env(
        &["source", "sync", &id],
        &[("QUARRY_SECRET_KEY", other.as_str())],
    );
    assert!(
        err.contains("sealed with another QUARRY_SECRET_KEY"),
        "{err}"
    );
    assert!(!err.contains(TOKEN));
    let err = q.err_env(&["source", "list"], &[("QUARRY_SECRET_KEY", "not-hex")]);
    assert!(err.contains("64 hexadecimal digits"), "{err}");

    // Forgotten: the repository refuses; given again on standard input: it syncs.
    q.ok(&["source", "set", &id, "--forget-credential"]);
    let err = q.err(&["source", "sync", &id]);
    assert!(err.contains("needs a credential"), "{err}");
    let mut child = q
        .cmd(&["source", "set", &id, "--password-stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{TOKEN}\n").as_bytes())
            .unwrap();
    }
    assert!(child.wait_with_output().unwrap().status.success());
    assert_eq!(counts(&sync(&q, &id)), [0, 0, 0, 0, 1, 0]);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A static site on loopback whose pages and sitemap a test changes.
fn site(
    pages: std::sync::Arc<std::sync::Mutex<HashMap<String, String>>>,
) -> quarry_test_http::Server {
    use quarry_test_http::{Reply, Server};
    Server::start(move |req| {
        let pages = pages.lock().unwrap();
        match pages.get(req.path()) {
            Some(body) if req.path().ends_with(".xml") => {
                Reply::ok("application/xml", body.clone())
            }
            Some(body) if req.path() == "/robots.txt" => Reply::ok("text/plain", body.clone()),
            Some(body) => Reply::ok("text/html", body.clone()),
            None => Reply::status(404, "text/plain", "no such page"),
        }
    })
}

fn html(title: &str, text: &str) -> String {
    format!(
        "<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
    )
}

#[test]
fn a_website_through_its_sitemap() {
    let q = Quarry::new();
    q.ok(&["kb", "create", "handbook"]);
    let pages = std::sync::Arc::new(std::sync::Mutex::new(HashMap::new()));
    let server = site(pages.clone());
    let sitemap = |paths: &[&str]| {
        let urls: String = paths
            .iter()
            .map(|p| format!("<url><loc>{}</loc></url>", server.url(p)))
            .collect();
        format!(
            r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>"#
        )
    };
    {
        let mut p = pages.lock().unwrap();
        p.insert(
            "/robots.txt".into(),
            "User-agent: *\nDisallow: /private/\n".into(),
        );
        p.insert(
            "/docs/intro".into(),
            html("Intro", "The tapir introduction."),
        );
        p.insert(
            "/docs/travel".into(),
            html("Travel", "Economy kinkajou class."),
        );
        p.insert(
            "/private/salaries".into(),
            html("Salaries", "The secret marmot figures."),
        );
        p.insert(
            "/sitemap.xml".into(),
            sitemap(&["/docs/intro", "/docs/travel", "/private/salaries"]),
        );
    }
    let id = q.json(&[
        "source",
        "add",
        "handbook",
        "--site",
        &server.url("/sitemap.xml"),
    ])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = sync(&q, &id);
    assert_eq!(counts(&first)[..2], [2, 0], "{first}");
    assert!(
        first.to_string().contains("private/salaries"),
        "the disallowed page is reported: {first}"
    );
    assert!(
        !server.targets().iter().any(|t| t.starts_with("/private")),
        "robots.txt is honoured: the page is never requested"
    );
    assert_eq!(found(&q, "tapir"), vec!["handbook/docs/intro.html"]);
    assert!(found(&q, "marmot").is_empty());
    let before = docs(&q, "handbook");

    {
        let mut p = pages.lock().unwrap();
        p.insert(
            "/docs/intro".into(),
            html("Intro", "The okapi introduction."),
        );
        p.insert("/sitemap.xml".into(), sitemap(&["/docs/intro"]));
    }
    let second = sync(&q, &id);
    assert_eq!(counts(&second)[..4], [0, 1, 0, 1], "{second}");
    let after = docs(&q, "handbook");
    assert_eq!(after["docs/intro.html"], before["docs/intro.html"]);
    assert!(
        found(&q, "kinkajou").is_empty(),
        "a page gone from the sitemap is gone"
    );
    assert_eq!(found(&q, "okapi"), vec!["handbook/docs/intro.html"]);
}
