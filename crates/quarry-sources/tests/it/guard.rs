//! The outbound address guard on every kind of URL source (`open_with` with a policy, as the
//! engine opens a source for someone other than the machine's owner): private, loopback,
//! link-local (the metadata address), IPv6-mapped and "this network" addresses refused before
//! anything is sent; a DNS name resolving to loopback refused when the connection is made (and
//! for Git before `git` starts); a redirect to a refused address not followed; an allow-listed
//! range reached, for Git through the address it was pinned to; and no guard for the
//! machine's owner (`open`).

use std::path::Path;

use quarry_sources::{
    FileMask, Location, NetPolicy, Source, SourceError, check_location, open, open_with,
};
use quarry_test_http::git::{run, serve};
use quarry_test_http::{Reply, Request, Server};

use crate::support::MAX;

fn strict() -> NetPolicy {
    NetPolicy::default()
}

fn loopback_v4() -> NetPolicy {
    NetPolicy::parse_allow_list("127.0.0.1/32").unwrap()
}

fn guarded(location: &Location, net: &NetPolicy, work: &Path) -> Box<dyn Source> {
    open_with(location, None, FileMask::default(), work, Some(net)).unwrap()
}

/// The refusal a listing ends in (and its text).
fn refused_listing(mut source: Box<dyn Source>) -> String {
    match source.list() {
        Err(SourceError::Refused(m)) => {
            assert!(m.contains("refused: "), "{m}");
            m
        }
        Err(e) => panic!("expected a refusal, got {e:?}"),
        Ok(l) => panic!("expected a refusal, listed {:?}", l.items),
    }
}

fn site(url: &str) -> Location {
    Location::site(url).unwrap()
}

#[test]
fn non_public_addresses_are_refused_for_every_kind_before_anything_is_sent() {
    let server = Server::start(|_: &Request| Reply::ok("text/plain", "must not be reached"));
    let port = server.addr().port();
    let work = tempfile::tempdir().unwrap();
    let cases = [
        (format!("http://127.0.0.1:{port}/"), "a loopback address"),
        (format!("http://[::1]:{port}/"), "a loopback address"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            "embeds the IPv4 address 127.0.0.1",
        ),
        ("http://10.1.2.3/".to_owned(), "a private address"),
        ("http://192.168.0.10/".to_owned(), "a private address"),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "the cloud metadata address",
        ),
        ("http://169.254.10.1/".to_owned(), "a link-local address"),
        ("http://[fe80::1]/".to_owned(), "a link-local address"),
        (
            "http://[::ffff:169.254.169.254]/".to_owned(),
            "the cloud metadata address",
        ),
        ("http://0.0.0.0/".to_owned(), "the unspecified address"),
        (
            "http://metadata.google.internal/".to_owned(),
            "a cloud metadata host name",
        ),
    ];
    for (base, why) in &cases {
        let locations = [
            site(&format!("{base}sitemap.xml")),
            Location::webdav(&format!("{base}dav/")).unwrap(),
            Location::git(&format!("{base}repo.git"), None, None).unwrap(),
            Location::s3("s3://bucket", Some(base.trim_end_matches('/')), None).unwrap(),
        ];
        for location in &locations {
            // Refused when attached…
            match check_location(location, &strict()) {
                Err(SourceError::Refused(m)) => assert!(m.contains(why), "{location:?}: {m}"),
                other => panic!("{location:?}: {other:?}"),
            }
            // … and when synced (S3 refuses its endpoint when the source is opened).
            match open_with(
                location,
                None,
                FileMask::default(),
                work.path(),
                Some(&strict()),
            ) {
                Ok(source) => {
                    let m = refused_listing(source);
                    assert!(m.contains(why), "{location:?}: {m}");
                }
                Err(SourceError::Refused(m)) => assert!(m.contains(why), "{location:?}: {m}"),
                Err(e) => panic!("{location:?}: {e:?}"),
            }
        }
    }
    assert!(server.requests().is_empty(), "{:?}", server.targets());
}

#[test]
fn a_name_resolving_to_loopback_is_refused_at_connect_time() {
    let server = Server::start(|_: &Request| Reply::ok("text/plain", "must not be reached"));
    let port = server.addr().port();
    let work = tempfile::tempdir().unwrap();
    let base = format!("http://localhost:{port}");
    for location in [
        site(&format!("{base}/sitemap.xml")),
        Location::webdav(&format!("{base}/dav/")).unwrap(),
        Location::git(&format!("{base}/repo.git"), None, None).unwrap(),
        Location::s3("s3://bucket", Some(&base), None).unwrap(),
    ] {
        match check_location(&location, &strict()) {
            Err(SourceError::Refused(m)) => assert!(
                m.contains("localhost resolves only to refused addresses"),
                "{m}"
            ),
            other => panic!("{location:?}: {other:?}"),
        }
        // The URL itself passes the first check: the resolver refuses every address.
        let source = guarded(&location, &strict(), work.path());
        let m = refused_listing(source);
        assert!(
            m.contains("localhost resolves only to refused addresses"),
            "{location:?}: {m}"
        );
    }
    assert!(server.requests().is_empty(), "{:?}", server.targets());
    // Public names pass the check when attached.
    for location in [
        site("https://example.com/sitemap.xml"),
        Location::s3("s3://bucket", None, Some("eu-west-1")).unwrap(),
    ] {
        assert!(check_location(&location, &strict()).is_ok(), "{location:?}");
    }
}

#[test]
fn a_redirect_to_a_refused_address_is_not_followed() {
    // An allow-listed server redirects every request to the metadata address, or to another
    // loopback address that is not allow-listed (127.0.0.2, where a server listens).
    let inner = Server::bind("127.0.0.2:0", |_: &Request| {
        Reply::ok("text/plain", "must not be reached")
    });
    let mut targets = vec![(
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "169.254.169.254 is the cloud metadata address",
    )];
    match &inner {
        Ok(inner) => targets.push((inner.url("/sitemap.xml"), "127.0.0.2 is a loopback address")),
        Err(e) => {
            eprintln!("note: 127.0.0.2 cannot be bound here ({e}); that redirect is not tried")
        }
    }
    let work = tempfile::tempdir().unwrap();
    for (to, why) in targets {
        let server = Server::start(move |_: &Request| Reply::redirect(&to));
        // A site follows its robots.txt's redirects to any host: the guard stops this one.
        let location = site(&server.url("/sitemap.xml"));
        let m = refused_listing(guarded(&location, &loopback_v4(), work.path()));
        assert!(m.contains("redirects to") && m.contains(why), "{m}");
        // WebDAV follows none to another host, guarded or not.
        let dav = Location::webdav(&server.url("/dav/")).unwrap();
        match guarded(&dav, &loopback_v4(), work.path()).list() {
            Err(SourceError::Unavailable(m)) => assert!(m.contains("not followed"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(!server.requests().is_empty());
    }
    if let Ok(inner) = &inner {
        assert!(inner.requests().is_empty(), "{:?}", inner.targets());
        // Without a guard (the machine's owner) the same redirect is followed.
        let to = inner.url("/sitemap.xml");
        let server = Server::start(move |_: &Request| Reply::redirect(&to));
        let mut owner = open(
            &site(&server.url("/sitemap.xml")),
            None,
            FileMask::default(),
            work.path(),
        )
        .unwrap();
        let _ = owner.list();
        assert!(!inner.requests().is_empty());
    }
}

#[test]
fn git_reaches_an_allow_listed_server_through_the_pinned_address_and_follows_no_redirect() {
    let root = tempfile::tempdir().unwrap();
    let exported = root.path().join("srv");
    let bare = exported.join("handbook.git");
    let work_tree = root.path().join("work");
    std::fs::create_dir_all(&work_tree).unwrap();
    run(
        root.path(),
        &["init", "--quiet", "--bare", bare.to_str().unwrap()],
    );
    run(&work_tree, &["init", "--quiet"]);
    std::fs::write(work_tree.join("intro.md"), "# Intro\nWelcome.").unwrap();
    run(&work_tree, &["add", "-A"]);
    run(&work_tree, &["commit", "--quiet", "-m", "first"]);
    run(
        &work_tree,
        &["push", "--quiet", bare.to_str().unwrap(), "HEAD:main"],
    );
    let server = serve(&exported, None);
    let port = server.addr().port();

    // `localhost` resolves to 127.0.0.1 (allowed) and maybe ::1 (not): git is pinned to the
    // first, and the sync works.
    let work = tempfile::tempdir().unwrap();
    let location =
        Location::git(&format!("http://localhost:{port}/handbook.git"), None, None).unwrap();
    check_location(&location, &loopback_v4()).unwrap();
    let mut source = guarded(&location, &loopback_v4(), work.path());
    let listing = source.list().unwrap();
    assert_eq!(listing.items.len(), 1, "{listing:?}");
    let bytes = source.fetch(&listing.items[0], MAX).unwrap();
    assert_eq!(bytes, b"# Intro\nWelcome.");

    // Not allow-listed: refused before `git` starts (the server sees nothing new).
    let before = server.requests().len();
    let work2 = tempfile::tempdir().unwrap();
    let m = refused_listing(guarded(&location, &strict(), work2.path()));
    assert!(
        m.contains("localhost resolves only to refused addresses"),
        "{m}"
    );
    assert_eq!(server.requests().len(), before);

    // A server that redirects: git does not follow it under the guard.
    let target = server.url("/handbook.git");
    let redirecting = Server::start(move |r: &Request| {
        let rest = r.target.trim_start_matches("/moved.git");
        Reply::redirect(&format!("{target}{rest}"))
    });
    let moved = Location::git(&redirecting.url("/moved.git"), None, None).unwrap();
    let work3 = tempfile::tempdir().unwrap();
    let before = server.requests().len();
    match guarded(&moved, &loopback_v4(), work3.path()).list() {
        Err(e) => assert!(!matches!(e, SourceError::Refused(_)), "{e:?}"),
        Ok(l) => panic!("a redirect was followed under the guard: {l:?}"),
    }
    assert!(!redirecting.requests().is_empty());
    assert_eq!(
        server.requests().len(),
        before,
        "the redirect's target was reached: {:?}",
        server.targets()
    );
    // The machine's owner follows it (git's default for the first request).
    let work4 = tempfile::tempdir().unwrap();
    let mut owner = open(&moved, None, FileMask::default(), work4.path()).unwrap();
    assert_eq!(owner.list().unwrap().items.len(), 1);
}

#[test]
fn the_allow_list_lets_a_site_on_loopback_be_synced() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let page = format!("{base}/page");
    let server = Server::on(listener, move |r: &Request| match r.path() {
        "/robots.txt" => Reply::empty(404),
        "/sitemap.xml" => Reply::ok(
            "application/xml",
            format!(
                "<?xml version=\"1.0\"?><urlset \
                 xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>{page}</loc>\
                 </url></urlset>"
            ),
        ),
        _ => Reply::ok("text/html", "<html><body><p>Hello.</p></body></html>"),
    })
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let location = site(&server.url("/sitemap.xml"));
    check_location(&location, &loopback_v4()).unwrap();
    let mut source = guarded(&location, &loopback_v4(), work.path());
    let listing = source.list().unwrap();
    assert_eq!(listing.items.len(), 1, "{listing:?}");
    let bytes = source.fetch(&listing.items[0], MAX).unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("Hello."));
}
