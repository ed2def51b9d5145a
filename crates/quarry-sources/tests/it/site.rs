//! A site source against a static site on the loopback test server: a sitemap and a
//! `robots.txt`, pages changed, added and removed between listings, a disallowed page, a
//! page on another host, a page the sitemap lists that answers 404, sitemap indexes,
//! redirects, and every failure of the site that must not empty a listing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use quarry_sources::{FileMask, Location, Secret, Source, SourceError, open, plan};
use quarry_test_http::{Reply, Server};

use crate::support::{MAX, paths, summary, sync};

/// A site whose pages (target → reply) a test changes while it is served.
#[derive(Clone, Default)]
struct Site {
    pages: Arc<Mutex<BTreeMap<String, Reply>>>,
}

impl Site {
    fn serve(&self) -> Server {
        let pages = self.pages.clone();
        Server::start(move |req| {
            let pages = pages.lock().unwrap();
            match pages.get(&req.target) {
                Some(reply) => reply.clone(),
                None => Reply::status(404, "text/html", "<h1>Not here</h1>"),
            }
        })
    }

    fn set(&self, target: &str, reply: Reply) {
        self.pages.lock().unwrap().insert(target.to_owned(), reply);
    }

    fn page(&self, target: &str, title: &str) {
        self.set(
            target,
            Reply::ok(
                "text/html; charset=utf-8",
                format!("<html><body><h1>{title}</h1></body></html>"),
            ),
        );
    }

    fn remove(&self, target: &str) {
        self.pages.lock().unwrap().remove(target);
    }

    /// A `<urlset>` of (loc, lastmod) at `/sitemap.xml`.
    fn sitemap(&self, entries: &[(&str, Option<&str>)]) {
        self.set(
            "/sitemap.xml",
            Reply::ok("application/xml", urlset(entries)),
        );
    }
}

fn urlset(entries: &[(&str, Option<&str>)]) -> String {
    let mut xml = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#,
    );
    for (loc, lastmod) in entries {
        xml.push_str(&format!("<url><loc>{loc}</loc>"));
        if let Some(m) = lastmod {
            xml.push_str(&format!("<lastmod>{m}</lastmod>"));
        }
        xml.push_str("</url>\n");
    }
    xml.push_str("</urlset>");
    xml
}

fn site_source(server: &Server) -> Box<dyn Source> {
    let location = Location::site(&server.url("/sitemap.xml")).unwrap();
    let work = std::env::temp_dir();
    open(&location, None, FileMask::default(), &work).unwrap()
}

#[test]
fn pages_change_move_and_go_as_the_sitemap_and_robots_say() {
    let site = Site::default();
    let server = site.serve();
    let base = server.base();
    // Another origin: same server, another host name.
    let elsewhere = format!("http://localhost:{}", server.addr().port());
    site.set(
        "/robots.txt",
        Reply::ok(
            "text/plain",
            "User-agent: *\nDisallow: /private/\nAllow: /private/press\n\n\
             User-agent: SomeBot\nDisallow: /\n",
        ),
    );
    site.page("/", "Home");
    site.page("/docs/intro", "Intro");
    site.page("/docs/guide.html", "Guide");
    site.page("/private/secret", "Secret");
    site.page("/private/press", "Press");
    site.set(
        "/files/report.pdf",
        Reply::ok("application/pdf", b"%PDF-1.4 not really".to_vec()),
    );
    site.sitemap(&[
        (&format!("{base}/"), Some("2025-07-01")),
        (
            &format!("{base}/docs/intro"),
            Some("2025-07-01T10:00:00+00:00"),
        ),
        (&format!("{base}/docs/guide.html"), None),
        (&format!("{base}/private/secret"), Some("2025-07-01")),
        (&format!("{base}/private/press"), Some("2025-07-01")),
        (&format!("{base}/files/report.pdf"), Some("2025-06-01")),
        (&format!("{base}/missing"), Some("2025-07-01")),
        (&format!("{elsewhere}/other"), Some("2025-07-01")),
        (
            &format!("{base}/docs/intro#section"),
            Some("2025-07-01T10:00:00+00:00"),
        ),
    ]);

    let mut source = site_source(&server);
    let first = sync(source.as_mut(), &[]);
    assert_eq!(
        paths(&first.listing),
        vec![
            "docs/guide.html",
            "docs/intro.html",
            "files/report.pdf",
            "index.html",
            "missing.html",
            "private/press.html"
        ]
    );
    assert_eq!(first.listing.items[3].version, "2025-07-01");
    assert_eq!(
        first.listing.items[0].version, "",
        "no <lastmod>: no version"
    );
    // Left out, and saying why.
    let problems: Vec<(&str, &str)> = first
        .listing
        .problems
        .iter()
        .map(|(p, r)| (p.as_str(), r.as_str()))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems.contains(&(
            "private/secret.html",
            "disallowed by robots.txt: not synced"
        )),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|(p, r)| *p == format!("{elsewhere}/other") && r.contains("another host")),
        "{problems:?}"
    );
    // The page the sitemap lists but the site does not have: a skipped page that says why.
    assert_eq!(first.skipped.len(), 1);
    let (path, err) = &first.skipped[0];
    assert_eq!(path, "missing.html");
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("404"), "{err}");
    assert_eq!(
        summary(&first.outcome),
        vec![
            "+docs/guide.html",
            "+docs/intro.html",
            "+files/report.pdf",
            "+index.html",
            "+private/press.html"
        ]
    );
    // The disallowed page was never asked for; every request named Quarry.
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .all(|r| !r.target.starts_with("/private/secret")),
        "{:?}",
        server.targets()
    );
    assert!(requests.iter().all(|r| {
        r.header("user-agent")
            .is_some_and(|ua| ua.starts_with("quarry/"))
    }));
    let bytes = source.fetch(&first.listing.items[1], MAX).unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "<html><body><h1>Intro</h1></body></html>"
    );

    // Nothing changed: only the pages without <lastmod> are read again.
    let again = source.list().unwrap();
    let p = plan(&first.known, &again);
    let fetched: Vec<&str> = p.fetch.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(fetched, vec!["docs/guide.html", "missing.html"]);
    assert!(p.gone.is_empty());

    // The intro is edited (its <lastmod> moves), the guide leaves the sitemap, a page is
    // added, the missing page appears, the press page becomes disallowed (it stays as it
    // was: a problem, not a deletion).
    site.page("/docs/intro", "Intro, edited");
    site.page("/docs/new/", "New");
    site.page("/missing", "Found");
    site.remove("/docs/guide.html");
    site.set(
        "/robots.txt",
        Reply::ok("text/plain", "User-agent: *\nDisallow: /private/\n"),
    );
    site.sitemap(&[
        (&format!("{base}/"), Some("2025-07-01")),
        (&format!("{base}/docs/intro"), Some("2025-07-02")),
        (&format!("{base}/docs/new/"), None),
        (&format!("{base}/private/press"), Some("2025-07-01")),
        (&format!("{base}/files/report.pdf"), Some("2025-06-01")),
        (&format!("{base}/missing"), Some("2025-07-01")),
    ]);
    let second = sync(source.as_mut(), &first.known);
    assert!(second.skipped.is_empty());
    assert_eq!(
        summary(&second.outcome),
        vec![
            "-docs/guide.html",
            "~docs/intro.html",
            "+docs/new/index.html",
            "+missing.html"
        ]
    );
    assert!(
        second
            .listing
            .problems
            .iter()
            .any(|(p, r)| p == "private/press.html" && r.contains("robots.txt")),
        "{:?}",
        second.listing.problems
    );
}

#[test]
fn sitemap_indexes_and_robots_for_quarry() {
    let site = Site::default();
    let server = site.serve();
    let base = server.base();
    site.set(
        "/robots.txt",
        Reply::ok(
            "text/plain",
            "User-agent: *\nDisallow: /\n\nUser-agent: quarry\nDisallow: /drafts/\n",
        ),
    );
    site.set(
        "/sitemap.xml",
        Reply::ok(
            "application/xml",
            format!(
                r#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>{base}/sitemap-docs.xml</loc></sitemap>
<sitemap><loc>{base}/sitemap-blog.xml</loc></sitemap>
<sitemap><loc>http://localhost:{}/sitemap-other.xml</loc></sitemap>
<sitemap><loc>{base}/sitemap-nested.xml</loc></sitemap>
</sitemapindex>"#,
                server.addr().port()
            ),
        ),
    );
    site.set(
        "/sitemap-docs.xml",
        Reply::ok(
            "application/xml",
            urlset(&[
                (&format!("{base}/docs/a"), None),
                (&format!("{base}/drafts/b"), None),
            ]),
        ),
    );
    site.set(
        "/sitemap-blog.xml",
        Reply::ok(
            "application/xml",
            urlset(&[(&format!("{base}/blog/post?id=7"), Some("2025-01-02"))]),
        ),
    );
    site.set(
        "/sitemap-nested.xml",
        Reply::ok(
            "application/xml",
            format!("<sitemapindex><sitemap><loc>{base}/deeper.xml</loc></sitemap></sitemapindex>"),
        ),
    );
    let mut source = site_source(&server);
    let listing = source.list().unwrap();
    assert_eq!(paths(&listing), vec!["blog/post?id=7.html", "docs/a.html"]);
    let reasons: Vec<&str> = listing.problems.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(listing.problems.len(), 3, "{:?}", listing.problems);
    assert!(reasons.iter().any(|r| r.contains("robots.txt")));
    assert!(reasons.iter().any(|r| r.contains("another host")));
    assert!(reasons.iter().any(|r| r.contains("one level only")));

    // One child sitemap failing fails the listing: without it, its pages would be deleted.
    site.set(
        "/sitemap-blog.xml",
        Reply::status(503, "text/plain", "busy"),
    );
    let err = source.list().unwrap_err();
    assert!(matches!(err, SourceError::Unavailable(_)), "{err:?}");
    assert!(err.to_string().contains("503"), "{err}");
    site.remove("/sitemap-blog.xml");
    let err = source.list().unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
}

#[test]
fn failures_of_the_site_are_errors_never_empty_listings() {
    let site = Site::default();
    let server = site.serve();
    let base = server.base();
    let mut source = site_source(&server);

    // No sitemap.
    let err = source.list().unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");

    // robots.txt missing (404) means no rules; failing (500) means nothing may be read.
    site.page("/a", "A");
    site.sitemap(&[(&format!("{base}/a"), None)]);
    assert_eq!(paths(&source.list().unwrap()), vec!["a.html"]);
    site.set("/robots.txt", Reply::status(500, "text/plain", "oops"));
    let err = source.list().unwrap_err();
    assert!(matches!(err, SourceError::Unavailable(_)), "{err:?}");
    assert!(err.is_transient());
    // Its redirects are followed even to another host (RFC 9309).
    site.set(
        "/robots.txt",
        Reply::redirect(&format!(
            "http://localhost:{}/robots-www.txt",
            server.addr().port()
        )),
    );
    site.set(
        "/robots-www.txt",
        Reply::ok("text/plain", "User-agent: *\nDisallow: /a\n"),
    );
    let listing = source.list().unwrap();
    assert!(listing.items.is_empty());
    assert_eq!(listing.problems.len(), 1, "{:?}", listing.problems);
    site.remove("/robots.txt");

    // An HTML page where the sitemap should be (a "soft 404"), a cut-off sitemap, a
    // compressed one, a login wall.
    for (reply, transient) in [
        (
            Reply::ok("text/html", "<html><body>Welcome</body></html>"),
            false,
        ),
        (
            Reply::ok("application/xml", "<urlset><url><loc>x</loc></url>"),
            false,
        ),
        (
            Reply::truncated("application/xml", urlset(&[(&format!("{base}/a"), None)])),
            true,
        ),
        (
            Reply::ok("application/gzip", vec![0x1f, 0x8b, 8, 0, 0, 0]),
            false,
        ),
        (Reply::status(401, "text/plain", "login"), false),
    ] {
        site.set("/sitemap.xml", reply);
        let err = source.list().unwrap_err();
        assert_eq!(err.is_transient(), transient, "{err:?}");
    }

    // Nothing listens any more.
    drop(server);
    let err = source.list().unwrap_err();
    assert!(matches!(err, SourceError::Unavailable(_)), "{err:?}");
}

#[test]
fn redirects_stay_on_the_host_and_sizes_are_limited() {
    let site = Site::default();
    let server = site.serve();
    let base = server.base();
    site.page("/new-home", "Moved");
    site.set("/old", Reply::redirect("/new-home"));
    site.set(
        "/away",
        Reply::redirect(&format!(
            "http://localhost:{}/new-home",
            server.addr().port()
        )),
    );
    site.set("/big", Reply::ok("text/html", "x".repeat(5000)));
    site.sitemap(&[
        (&format!("{base}/old"), None),
        (&format!("{base}/away"), None),
        (&format!("{base}/big"), None),
    ]);
    let mut source = site_source(&server);
    let listing = source.list().unwrap();
    assert_eq!(paths(&listing), vec!["away.html", "big.html", "old.html"]);
    let by = |p: &str| listing.items.iter().find(|i| i.path == p).unwrap().clone();
    assert_eq!(
        source.fetch(&by("old.html"), MAX).unwrap(),
        b"<html><body><h1>Moved</h1></body></html>"
    );
    let err = source.fetch(&by("away.html"), MAX).unwrap_err();
    assert!(err.to_string().contains("another host"), "{err}");
    let err = source.fetch(&by("big.html"), 1000).unwrap_err();
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

    // A fresh source fetches after listing by itself; a path the sitemap does not list is
    // not found.
    let mut fresh = site_source(&server);
    assert!(fresh.fetch(&by("big.html"), MAX).is_ok());
    let mut stranger = by("big.html");
    stranger.path = "etc/passwd".into();
    assert!(matches!(
        fresh.fetch(&stranger, MAX),
        Err(SourceError::NotFound(_))
    ));

    // Sites are public: a credential is refused rather than ignored.
    let location = Location::site(&server.url("/sitemap.xml")).unwrap();
    let secret = Secret::new(Some("u"), "p").unwrap();
    assert!(matches!(
        open(
            &location,
            Some(&secret),
            FileMask::default(),
            &std::env::temp_dir()
        ),
        Err(SourceError::Invalid(_))
    ));
}
