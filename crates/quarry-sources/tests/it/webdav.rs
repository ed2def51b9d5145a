//! A WebDAV source against a real WebDAV server: `rclone serve webdav` (Debian's `rclone`,
//! installed by `scripts/install-test-tools`) on a loopback port with basic authentication,
//! serving a temporary folder the tests change between listings: files added, overwritten,
//! deleted and renamed, nested folders, names with spaces and non-ASCII letters. Without
//! `rclone` the tests pass with a note, except under CI, where they fail.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quarry_sources::{FileMask, Location, Secret, Source, SourceError, open, plan};

use crate::support::{MAX, available, paths, summary, sync_once};

const USER: &str = "ann";
const PASSWORD: &str = "dav-Pa55word-0123";

/// `rclone serve webdav` on a folder of its own.
struct Dav {
    child: Child,
    dir: tempfile::TempDir,
    url: String,
}

impl Drop for Dav {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dav {
    /// A server with ETags (`etags`: MD5 of the content) or without (versions then come
    /// from the modification time and the length); `None` when rclone is missing.
    fn start(etags: bool) -> Option<Dav> {
        let missing = match Command::new("rclone").arg("version").output() {
            Ok(o) if o.status.success() => None,
            Ok(_) => Some("`rclone version` failed"),
            Err(_) => Some("no `rclone` command (Debian package rclone)"),
        };
        if !available("rclone (the WebDAV test server)", missing) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("rclone.conf");
        std::fs::write(&config, "").unwrap();
        let root = dir.path().join("served");
        std::fs::create_dir(&root).unwrap();
        let port = quarry_test_http::unused_port();
        let mut cmd = Command::new("rclone");
        cmd.args(["serve", "webdav"])
            .arg(&root)
            .args(["--addr", &format!("127.0.0.1:{port}")])
            .args(["--user", USER, "--pass", PASSWORD])
            // Changes made on disk are seen at once.
            .args(["--dir-cache-time", "0s"])
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if etags {
            cmd.args(["--etag-hash", "MD5"]);
        }
        let child = cmd.spawn().expect("start rclone serve webdav");
        let dav = Dav {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}/"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "rclone serve webdav did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(dav)
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("served")
    }

    fn write(&self, path: &str, text: &str) {
        let p = self.root().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn source(&self, folder: &str, secret: Option<&Secret>, mask: &str) -> Box<dyn Source> {
        let location = Location::webdav(&format!("{}{folder}", self.url)).unwrap();
        open(
            &location,
            secret,
            FileMask::parse(mask).unwrap(),
            Path::new("/nonexistent-work-dir"),
        )
        .unwrap()
    }
}

fn secret() -> Secret {
    Secret::new(Some(USER), PASSWORD).unwrap()
}

#[test]
fn edits_renames_deletions_and_nested_folders() {
    let Some(dav) = Dav::start(true) else { return };
    dav.write("intro.md", "# Intro\nWelcome.");
    dav.write("guides/setup.md", "# Setup\nStep one.");
    dav.write("guides/deep/er/nested.md", "# Nested\nFar down.");
    dav.write("Notes with spaces é.md", "# Notes\nÇa va.");
    dav.write("日本語/資料.md", "# 資料");
    dav.write("logo.png", "not synced by the mask");
    std::fs::create_dir_all(dav.root().join("empty folder")).unwrap();
    let mut source = dav.source("", Some(&secret()), "**/*.md");

    let (listing, outcome, known) = sync_once(source.as_mut(), &[]);
    assert_eq!(
        paths(&listing),
        vec![
            "Notes with spaces é.md",
            "guides/deep/er/nested.md",
            "guides/setup.md",
            "intro.md",
            "日本語/資料.md"
        ]
    );
    assert_eq!(outcome.changes.len(), 5);
    assert!(listing.problems.is_empty(), "{:?}", listing.problems);
    let intro = listing.items.iter().find(|i| i.path == "intro.md").unwrap();
    assert_eq!(intro.size, Some(16));
    assert!(intro.version.starts_with('"'), "an ETag: {intro:?}");
    assert_eq!(
        source.fetch(&listing.items[0], MAX).unwrap(),
        "# Notes\nÇa va.".as_bytes()
    );

    // Nothing changed: nothing to fetch.
    let p = plan(&known, &source.list().unwrap());
    assert!(p.fetch.is_empty() && p.gone.is_empty(), "{p:?}");

    // An overwrite of the same length, a deletion, a rename, a new file in a new folder.
    dav.write("intro.md", "# Intro\nWelcome!");
    std::fs::remove_file(dav.root().join("guides/setup.md")).unwrap();
    std::fs::create_dir_all(dav.root().join("moved")).unwrap();
    std::fs::rename(
        dav.root().join("guides/deep/er/nested.md"),
        dav.root().join("moved/nested.md"),
    )
    .unwrap();
    dav.write("new folder/faq.md", "# FAQ");
    let (_, outcome, _) = sync_once(source.as_mut(), &known);
    assert_eq!(
        summary(&outcome),
        vec![
            "-guides/setup.md",
            "~intro.md",
            "guides/deep/er/nested.md->moved/nested.md",
            "+new folder/faq.md"
        ]
    );

    // A folder inside the server: paths are relative to it.
    let mut sub = dav.source("new%20folder", Some(&secret()), "**");
    assert_eq!(paths(&sub.list().unwrap()), vec!["faq.md"]);
    let mut sub = dav.source("日本語/", Some(&secret()), "**");
    let listing = sub.list().unwrap();
    assert_eq!(paths(&listing), vec!["資料.md"]);
    assert_eq!(
        sub.fetch(&listing.items[0], MAX).unwrap(),
        "# 資料".as_bytes()
    );
}

#[test]
fn credentials_missing_folders_and_sizes() {
    let Some(dav) = Dav::start(true) else { return };
    dav.write("a.md", &"x".repeat(5000));

    let err = dav.source("", None, "**").list().unwrap_err();
    assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
    assert!(err.to_string().contains("needs a user name"), "{err}");

    let wrong = Secret::new(Some(USER), "wrong-Pa55-999").unwrap();
    let err = dav.source("", Some(&wrong), "**").list().unwrap_err();
    assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
    assert!(err.to_string().contains("refused"), "{err}");
    assert!(!err.to_string().contains("wrong-Pa55-999"), "{err}");
    assert!(!format!("{err:?}").contains("wrong-Pa55-999"), "{err:?}");

    let err = dav
        .source("nope/", Some(&secret()), "**")
        .list()
        .unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
    // A file given as the folder: never an empty listing.
    let err = dav
        .source("a.md", Some(&secret()), "**")
        .list()
        .unwrap_err();
    assert!(
        matches!(err, SourceError::NotFound(_) | SourceError::Invalid(_)),
        "{err:?}"
    );

    let mut source = dav.source("", Some(&secret()), "**");
    let listing = source.list().unwrap();
    let err = source.fetch(&listing.items[0], 1000).unwrap_err();
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
    // Without the listed size, the answer's length stops it.
    let mut unsized_item = listing.items[0].clone();
    unsized_item.size = None;
    assert!(matches!(
        source.fetch(&unsized_item, 1000),
        Err(SourceError::TooLarge { .. })
    ));

    // Deleted since it was listed: not found (the engine skips it, and the next listing
    // says it is gone).
    std::fs::remove_file(dav.root().join("a.md")).unwrap();
    let err = source.fetch(&listing.items[0], MAX).unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");

    // Nothing listening: unavailable, worth retrying.
    let url = dav.url.clone();
    drop(dav);
    let location = Location::webdav(&url).unwrap();
    let err = open(
        &location,
        Some(&secret()),
        FileMask::default(),
        Path::new("/x"),
    )
    .unwrap()
    .list()
    .unwrap_err();
    assert!(matches!(err, SourceError::Unavailable(_)), "{err:?}");
}

#[test]
fn rclone_without_content_etags_still_changes_them_on_writes() {
    // Without --etag-hash, rclone's ETag is the modification time and size (as Go's WebDAV
    // server makes it): a rewrite changes it.
    let Some(dav) = Dav::start(false) else { return };
    dav.write("a.md", "one");
    let mut source = dav.source("", Some(&secret()), "**");
    let first = source.list().unwrap();
    assert_eq!(source.list().unwrap().items, first.items, "stable");
    std::thread::sleep(Duration::from_millis(20));
    dav.write("a.md", "two");
    let again = source.list().unwrap();
    assert_ne!(again.items[0].version, first.items[0].version);
}

/// One response of a multistatus: href, ETag, last-modified, length, whether a folder.
type Row<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<u64>, bool);

/// A multistatus answer of these rows.
fn multistatus(rows: &[Row<'_>]) -> String {
    let mut xml = String::from(r#"<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">"#);
    for (href, etag, modified, length, collection) in rows {
        xml.push_str(&format!(
            "<d:response><d:href>{href}</d:href><d:propstat><d:prop>"
        ));
        xml.push_str(if *collection {
            "<d:resourcetype><d:collection/></d:resourcetype>"
        } else {
            "<d:resourcetype/>"
        });
        if let Some(e) = etag {
            xml.push_str(&format!("<d:getetag>{e}</d:getetag>"));
        }
        if let Some(m) = modified {
            xml.push_str(&format!("<d:getlastmodified>{m}</d:getlastmodified>"));
        }
        if let Some(l) = length {
            xml.push_str(&format!("<d:getcontentlength>{l}</d:getcontentlength>"));
        }
        xml.push_str("</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>");
    }
    xml.push_str("</d:multistatus>");
    xml
}

#[test]
fn a_server_without_etags_and_with_absolute_hrefs() {
    use quarry_test_http::{Reply, Server};
    const MODIFIED: &str = "Tue, 01 Jul 2025 10:00:00 GMT";
    let server = Server::start(|req| {
        let base = format!("http://{}", req.header("host").unwrap_or_default());
        match (req.method.as_str(), req.target.as_str()) {
            ("PROPFIND", "/dav/") => Reply::status(
                207,
                "application/xml",
                multistatus(&[
                    (&format!("{base}/dav/"), None, None, None, true),
                    (
                        &format!("{base}/dav/a.md"),
                        None,
                        Some(MODIFIED),
                        Some(3),
                        false,
                    ),
                    ("/dav/sub", None, None, None, true),
                    ("/elsewhere/x.md", None, Some(MODIFIED), Some(1), false),
                    ("/dav/only-length.md", None, None, Some(2), false),
                    ("/dav/nothing.md", None, None, None, false),
                ]),
            ),
            ("PROPFIND", "/dav/sub/") => Reply::status(
                207,
                "application/xml",
                multistatus(&[
                    ("/dav/sub/", None, None, None, true),
                    (
                        "/dav/sub/b%20c.md",
                        Some("W/\"b1\""),
                        Some(MODIFIED),
                        Some(4),
                        false,
                    ),
                ]),
            ),
            ("GET", "/dav/sub/b%20c.md") => Reply::ok("text/markdown", "# BC"),
            ("PROPFIND", "/dav/a.md/") => Reply::status(
                207,
                "application/xml",
                multistatus(&[("/dav/a.md", None, Some(MODIFIED), Some(3), false)]),
            ),
            _ => Reply::status(404, "text/plain", "no"),
        }
    });
    let location = Location::webdav(&server.url("/dav")).unwrap();
    let mut source = open(
        &location,
        Some(&secret()),
        FileMask::default(),
        Path::new("/x"),
    )
    .unwrap();
    let listing = source.list().unwrap();
    let versions: Vec<(&str, &str)> = listing
        .items
        .iter()
        .map(|i| (i.path.as_str(), i.version.as_str()))
        .collect();
    assert_eq!(
        versions,
        vec![
            ("a.md", "Tue, 01 Jul 2025 10:00:00 GMT|3"),
            ("nothing.md", ""),
            ("only-length.md", "|2"),
            ("sub/b c.md", "W/\"b1\""),
        ]
    );
    assert_eq!(source.fetch(&listing.items[3], MAX).unwrap(), b"# BC");
    // A file where the folder should be: an error, not an empty listing.
    let location = Location::webdav(&server.url("/dav/a.md")).unwrap();
    let err = open(
        &location,
        Some(&secret()),
        FileMask::default(),
        Path::new("/x"),
    )
    .unwrap()
    .list()
    .unwrap_err();
    assert!(err.to_string().contains("is a file, not a folder"), "{err}");
    // Every request: `Depth: 1` on PROPFIND, basic authentication, the password in no URL.
    let requests = server.requests();
    let expected = format!(
        "Basic {}",
        quarry_core::base64_encode(format!("{USER}:{PASSWORD}").as_bytes())
    );
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some(expected.as_str()),
            "{}",
            r.target
        );
        assert!(!r.target.contains(PASSWORD));
        if r.method == "PROPFIND" {
            assert_eq!(r.header("depth"), Some("1"));
            assert!(r.text().contains("getetag"), "{}", r.text());
        }
    }
    assert_eq!(
        requests.iter().filter(|r| r.method == "PROPFIND").count(),
        3,
        "one per folder: {:?}",
        server.targets()
    );
}
