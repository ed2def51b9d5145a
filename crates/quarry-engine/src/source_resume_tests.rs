//! Syncs on several nodes (issue 43 item 5) and who may attach what: a sync whose node died
//! is resumed by another from what the store knows (nothing applied twice, nothing lost, its
//! report closed as interrupted); a sync asked for while another node holds the source is a
//! clear conflict; a long sync applies as it fetches (its report shows how far it got, a
//! rename found late is still a rename); the server's disk only for the machine's owner, and
//! URLs for anyone else only where the outbound address guard lets requests go.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quarry_core::{Access, Error, Scope};
use quarry_sources::{FileMask, Location, NetPolicy};
use quarry_store::{FileFilter, NewKbFile, SourceChange, SyncCounts, SyncReport};
use quarry_test_http::{Reply, Request, Server};

use crate::engine::Engine;
use crate::kb::source_options::SourceOptions;
use crate::kb::sources::AddSource;
use crate::progress::NoProgress;
use crate::test_support::engine;

fn kb(e: &Engine) {
    crate::test_support::create_kb(e, "notes");
}

fn attach(e: &Engine, location: Location) -> Result<crate::SourceView, Error> {
    e.add_source(
        "notes",
        &AddSource {
            location,
            mask: None,
            interval: None,
            secret: None,
            watch: false,
            readers: None,
            allow_net: Vec::new(),
        },
    )
}

/// (source path, file id) of every document the knowledge base holds.
fn documents(e: &Engine) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = e
        .kb_documents("notes", &FileFilter::default())
        .unwrap()
        .into_iter()
        .map(|f| (f.file_name, f.id))
        .collect();
    v.sort();
    v
}

/// A member of the default space with `access`, not the machine's owner (a token's caller).
fn remote(e: &Engine, access: Access) -> Engine {
    let mut scope = Scope::owner(quarry_core::DEFAULT_SPACE);
    scope.machine_owner = false;
    scope.access = access;
    e.scoped(scope)
}

#[test]
fn a_sync_whose_node_died_is_resumed_from_what_it_applied() {
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    for i in 0..30 {
        std::fs::write(
            folder.path().join(format!("note-{i:02}.md")),
            format!("# Note {i}\n\nThe kestrel{i:02} survey.\n"),
        )
        .unwrap();
    }
    let e = engine(home.path());
    kb(&e);
    let s = attach(&e, Location::folder(folder.path()).unwrap()).unwrap();
    let row = e.store().source(&s.id).unwrap().unwrap();

    // The dead node: it claimed the source, applied the first ten files, recorded its
    // progress, and stopped; its claim lapses.
    let listing = {
        let mut src = quarry_sources::open(
            &Location::folder(folder.path()).unwrap(),
            None,
            FileMask::default(),
            home.path(),
        )
        .unwrap();
        src.list().unwrap()
    };
    let dead = e
        .store()
        .claim_source(row.row_id, "dead-node:sources", 60_000)
        .unwrap()
        .unwrap();
    let dead_report = e.store().start_sync_report(dead, None).unwrap();
    let blobs = e.blobs().unwrap();
    for item in &listing.items[..10] {
        let bytes = std::fs::read(folder.path().join(&item.path)).unwrap();
        let sha = blobs.put(&bytes).unwrap();
        let file = NewKbFile {
            meta: Default::default(),
            original_name: item.path.clone(),
            sha256: sha,
            format: "md".into(),
            mime: "text/markdown".into(),
            size: bytes.len() as u64,
            note: None,
            readers: None,
        };
        e.store()
            .apply_source_change(
                dead,
                &SourceChange::Add {
                    path: &item.path,
                    version: &item.version,
                    file: &file,
                },
            )
            .unwrap()
            .unwrap();
    }
    let progress = SyncReport {
        id: dead_report.clone(),
        source_id: s.id.clone(),
        started_at: 0,
        finished_at: None,
        status: "running".into(),
        revision: None,
        counts: SyncCounts {
            added: 10,
            ..SyncCounts::default()
        },
        details: Vec::new(),
        error: None,
    };
    assert!(e.store().record_sync_progress(dead, &progress).unwrap());

    // While it holds the source, a sync asked for elsewhere is a clear conflict.
    match e.sync_source(&s.id, "rest:1", &NoProgress) {
        Err(Error::Conflict(m)) => assert!(
            m.contains("already running") && m.contains("another"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(e.due_sources(10).unwrap().is_empty(), "held");
    let [running] = &e.sync_reports(&s.id, 10).unwrap()[..] else {
        panic!("one report")
    };
    assert_eq!(
        (running.status.as_str(), running.counts.added),
        ("running", 10)
    );

    // Its claim lapses: the source is due (it has no interval), its report reads as
    // interrupted, and another node resumes it.
    e.store().renew_source(dead, -1).unwrap();
    assert_eq!(e.due_sources(10).unwrap(), vec![s.id.clone()]);
    let [lapsed] = &e.sync_reports(&s.id, 10).unwrap()[..] else {
        panic!("one report")
    };
    assert_eq!(lapsed.status, "failed");
    assert_eq!(
        lapsed.error.as_deref(),
        Some(quarry_store::SYNC_INTERRUPTED)
    );
    let report = e
        .sync_scheduled_source(&s.id, "live-node:sources")
        .unwrap()
        .expect("resumed");
    assert_eq!(report.status, "succeeded");
    assert_eq!(
        (report.counts.added, report.counts.unchanged),
        (20, 10),
        "{report:?}"
    );
    // Every file once: nothing lost, nothing twice.
    let docs = documents(&e);
    assert_eq!(docs.len(), 30);
    let names: HashSet<&str> = docs.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(names.len(), 30);
    assert_eq!(e.source(&s.id).unwrap().documents, 30);
    assert!(e.due_sources(10).unwrap().is_empty(), "finished: not due");
    let reports = e.sync_reports(&s.id, 10).unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[1].id, dead_report);
    assert_eq!(reports[1].status, "failed");
    assert_eq!(
        reports[1].counts.added, 10,
        "what it applied stays in its report"
    );
    // And again: nothing to do.
    let again = e.sync_source(&s.id, "rest:1", &NoProgress).unwrap();
    assert_eq!(again.report.counts.unchanged, 30);
    assert_eq!(again.report.counts.added, 0);
}

#[test]
fn a_long_sync_applies_as_it_fetches_and_a_late_rename_stays_a_rename() {
    // A site whose pages take a while each: the first sync's report shows documents added
    // while it runs; in the second, a page that moved is fetched last (after several rounds
    // of applying) and still keeps its document.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let pages: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let slow = Arc::new(AtomicBool::new(false));
    let (pages2, slow2, base2) = (pages.clone(), slow.clone(), base.clone());
    let server = Server::on(listener, move |r: &Request| {
        let path = r.path().to_owned();
        match path.as_str() {
            "/robots.txt" => Reply::empty(404),
            "/sitemap.xml" => {
                let urls: String = pages2
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|p| format!("<url><loc>{base2}/{p}</loc></url>"))
                    .collect();
                Reply::ok(
                    "application/xml",
                    format!(
                        "<?xml version=\"1.0\"?><urlset \
                         xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{urls}</urlset>"
                    ),
                )
            }
            p => {
                if slow2.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(250));
                }
                // `zz-moved` has the bytes `a-first` had.
                let name = if p == "/zz-moved" { "/a-first" } else { p };
                Reply::ok(
                    "text/html",
                    format!("<html><body><h1>{name}</h1><p>Page {name}.</p></body></html>"),
                )
            }
        }
    })
    .unwrap();
    *pages.lock().unwrap() = std::iter::once("a-first".to_owned())
        .chain((0..4).map(|i| format!("p{i:02}")))
        .collect();
    let home = tempfile::tempdir().unwrap();
    let e = engine(home.path());
    kb(&e);
    let s = attach(
        &e,
        Location::site(&format!("{}/sitemap.xml", server.base())).unwrap(),
    )
    .unwrap();
    let first = e.sync_source(&s.id, "n:0", &NoProgress).unwrap();
    assert_eq!(first.report.counts.added, 5, "{:?}", first.report);
    let before = documents(&e);
    let first_id = before
        .iter()
        .find(|d| d.0 == "a-first.html")
        .map(|d| d.1.clone())
        .unwrap();

    // `a-first` moves to `zz-moved` (listed last); twenty slow new pages come first.
    *pages.lock().unwrap() = (0..4)
        .map(|i| format!("p{i:02}"))
        .chain((0..20).map(|i| format!("q{i:02}")))
        .chain(std::iter::once("zz-moved".to_owned()))
        .collect();
    slow.store(true, Ordering::SeqCst);
    let seen_running = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (e, id, seen, done) = (e.clone(), s.id.clone(), seen_running.clone(), done.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !done.load(Ordering::SeqCst) && Instant::now() < deadline {
                if let Some(r) = e.sync_reports(&id, 1).unwrap().first()
                    && r.status == "running"
                {
                    seen.lock().unwrap().push(r.counts.added);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let second = e.sync_source(&s.id, "n:0", &NoProgress).unwrap();
    done.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    let c = &second.report.counts;
    assert_eq!(
        (c.added, c.renamed, c.deleted, c.changed + c.unchanged),
        (20, 1, 0, 4),
        "{:?}",
        second.report
    );
    let seen = seen_running.lock().unwrap().clone();
    assert!(
        seen.iter().any(|n| *n > 0 && *n < 20),
        "the running report showed documents added while it ran: {seen:?}"
    );
    let after = documents(&e);
    assert_eq!(after.len(), 25);
    let moved = after.iter().find(|d| d.0 == "zz-moved.html").unwrap();
    assert_eq!(moved.1, first_id, "the moved page kept its document");
}

#[test]
fn the_servers_disk_is_for_the_machine_owner_and_urls_for_others_go_through_the_guard() {
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("a.md"), "# A").unwrap();
    let e = engine(home.path());
    kb(&e);
    let admin = remote(&e, Access::Admin);
    for location in [
        Location::folder(folder.path()).unwrap(),
        Location::Folder {
            path: "/no/such/dir".into(),
        },
        Location::git("/srv/repo.git", None, None).unwrap(),
    ] {
        match attach(&admin, location.clone()) {
            Err(Error::Forbidden(m)) => assert!(
                m.contains("reads the server's own disk")
                    && m.contains("only the machine's owner may attach one"),
                "{m}"
            ),
            other => panic!("{location:?}: {other:?}"),
        }
    }
    for (url, why) in [
        (
            "http://169.254.169.254/latest/meta-data/r.git",
            "cloud metadata address",
        ),
        ("http://127.0.0.1:9/r.git", "loopback"),
        ("http://[::ffff:10.0.0.1]/r.git", "private"),
        (
            "http://localhost:9/r.git",
            "localhost resolves only to refused",
        ),
    ] {
        match attach(&admin, Location::git(url, None, None).unwrap()) {
            Err(Error::Forbidden(m)) => {
                assert!(m.contains("refused: ") && m.contains(why), "{url}: {m}")
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    // A read-only caller is refused before anything is looked at.
    assert!(matches!(
        attach(
            &remote(&e, Access::Read),
            Location::git("https://example.com/r.git", None, None).unwrap()
        ),
        Err(Error::Forbidden(_))
    ));
    assert!(
        e.sources(Some("notes")).unwrap().is_empty(),
        "nothing created"
    );
    // The machine's owner may attach both.
    attach(&e, Location::folder(folder.path()).unwrap()).unwrap();
    attach(
        &e,
        Location::git("http://127.0.0.1:9/r.git", None, None).unwrap(),
    )
    .unwrap();
    assert_eq!(e.sources(Some("notes")).unwrap().len(), 2);

    // An allow-listed range is reachable for others too.
    let home2 = tempfile::tempdir().unwrap();
    let e2 = engine(home2.path()).with_sources(SourceOptions {
        net: NetPolicy::parse_allow_list("127.0.0.1/32").unwrap(),
        ..SourceOptions::default()
    });
    kb(&e2);
    let admin2 = remote(&e2, Access::Admin);
    attach(
        &admin2,
        Location::git("http://127.0.0.1:9/r.git", None, None).unwrap(),
    )
    .unwrap();
    assert!(matches!(
        attach(
            &admin2,
            Location::git("http://169.254.169.254/r.git", None, None).unwrap()
        ),
        Err(Error::Forbidden(_))
    ));
}

#[test]
fn a_scheduled_sync_is_guarded_unless_every_caller_is_the_owner() {
    let home = tempfile::tempdir().unwrap();
    let e = engine(home.path());
    assert!(!e.scheduler_handle().scope().machine_owner);
    assert!(e.scheduler_handle().source_net(&[]).is_some());
    let home2 = tempfile::tempdir().unwrap();
    let open = engine(home2.path()).with_sources(SourceOptions {
        guard_scheduled: false,
        ..SourceOptions::default()
    });
    assert!(open.scheduler_handle().source_net(&[]).is_none());
    assert!(
        e.source_net(&[]).is_none(),
        "the owner's own syncs are not guarded"
    );
}

/// A one-page site on loopback (`/sitemap.xml`, `/page`), as a source's location.
fn loopback_site() -> (Server, Location) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = Server::on(listener, move |r: &Request| match r.path() {
        "/robots.txt" => Reply::empty(404),
        "/sitemap.xml" => Reply::ok(
            "application/xml",
            format!(
                "<?xml version=\"1.0\"?><urlset \
                 xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                 <url><loc>{base}/page</loc></url></urlset>"
            ),
        ),
        _ => Reply::ok(
            "text/html",
            "<html><body><h1>Page</h1><p>The heron.</p></body></html>",
        ),
    })
    .unwrap();
    let location = Location::site(&format!("{}/sitemap.xml", server.base())).unwrap();
    (server, location)
}

#[test]
fn a_loopback_source_warns_at_attach_and_its_own_allowance_lets_scheduled_syncs_through() {
    // Issue 65 item 14: the machine's owner attaches a loopback source on a server whose
    // scheduled syncs are guarded; its manual sync works, the scheduled one is refused.
    let (_server, location) = loopback_site();
    let home = tempfile::tempdir().unwrap();
    let e = engine(home.path());
    kb(&e);
    let s = attach(&e, location.clone()).unwrap();
    let [warning] = s.warnings.as_slice() else {
        panic!("one warning: {:?}", s.warnings)
    };
    assert!(
        warning.contains("127.0.0.1 is a loopback address")
            && warning.contains(&format!(
                "quarry source set {} --allow-net 127.0.0.1/32",
                s.id
            ))
            && warning.contains("\"allow_net\": [\"127.0.0.1/32\"]")
            && warning.contains("quarry serve --allow-net 127.0.0.1/32"),
        "{warning}"
    );
    assert!(
        e.source(&s.id).unwrap().warnings.is_empty(),
        "said once, to whoever attached it"
    );
    e.sync_source(&s.id, "n:0", &NoProgress).unwrap();
    match e.sync_scheduled_source(&s.id, "n:sources") {
        Err(Error::Forbidden(m)) => assert!(m.contains("loopback"), "{m}"),
        other => panic!("{other:?}"),
    }
    let row = e.store().source(&s.id).unwrap().unwrap();
    assert_eq!(row.refused_under.as_deref(), Some("guarded:"));
    assert_eq!(row.failures, 1);
    // A restart under the same policy leaves it to its back-off.
    assert_eq!(e.start_source_scheduler().unwrap(), 0);
    assert!(e.due_sources(10).unwrap().is_empty());

    // Its own allowance: checked, kept, shown; the refused source is due at once, and the
    // scheduled sync goes through — while the guard still refuses everything else.
    for (bad, why) in [
        ("127.0.0.1/33", "prefix length 33"),
        ("10.0.0.1/8", "host bits set"),
        ("localhost", "is not an address range"),
        ("", "empty"),
        ("169.254.0.0/16", "cloud metadata"),
        ("0.0.0.0/0", "cloud metadata"),
        ("::/0", "cloud metadata"),
    ] {
        match e.set_source_allow_net(&s.id, &[bad.to_owned()]) {
            Err(Error::InvalidInput(m)) => {
                assert!(
                    m.starts_with("allow_net: ") && m.contains(why),
                    "{bad}: {m}"
                )
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    let changed = e
        .set_source_allow_net(&s.id, &["127.0.0.1".to_owned(), "127.0.0.1/32".to_owned()])
        .unwrap();
    assert_eq!(changed.allow_net, ["127.0.0.1/32"]);
    assert!(changed.warnings.is_empty(), "{:?}", changed.warnings);
    assert_eq!(e.due_sources(10).unwrap(), vec![s.id.clone()]);
    let report = e
        .sync_scheduled_source(&s.id, "n:sources")
        .unwrap()
        .unwrap();
    assert_eq!(report.status, "succeeded");
    assert_eq!(
        e.store().source(&s.id).unwrap().unwrap().refused_under,
        None
    );
    // A remote admin's source with that allowance still reaches nothing else.
    let admin = remote(&e, Access::Admin);
    let other = admin.add_source(
        "notes",
        &AddSource {
            location: Location::git("http://127.0.0.2:9/r.git", None, None).unwrap(),
            mask: None,
            interval: None,
            secret: None,
            watch: false,
            readers: None,
            allow_net: vec!["127.0.0.1/32".into()],
        },
    );
    assert!(
        matches!(&other, Err(Error::Forbidden(m)) if m.contains("127.0.0.2 is a loopback")),
        "{other:?}"
    );
    // Without a management credential, nobody sets one.
    let mut narrowed = admin.scope().clone();
    narrowed.manage = false;
    assert!(matches!(
        e.scoped(narrowed)
            .set_source_allow_net(&s.id, &["127.0.0.1/32".to_owned()]),
        Err(Error::ManagementForbidden(_))
    ));
    // Forgotten with an empty list.
    assert!(
        e.set_source_allow_net(&s.id, &[])
            .unwrap()
            .allow_net
            .is_empty()
    );
}

#[test]
fn a_restart_under_another_network_policy_retries_refused_sources_at_once() {
    let (_server, location) = loopback_site();
    let home = tempfile::tempdir().unwrap();
    let s = {
        let e = engine(home.path());
        kb(&e);
        assert_eq!(e.start_source_scheduler().unwrap(), 0);
        let s = attach(&e, location).unwrap();
        assert!(e.sync_scheduled_source(&s.id, "n:sources").is_err());
        assert!(e.due_sources(10).unwrap().is_empty(), "backing off");
        s
    };
    // The node again, with the loopback address allowed: due at once, and synced.
    let e = engine(home.path()).with_sources(SourceOptions {
        net: NetPolicy::parse_allow_list("127.0.0.1/32").unwrap(),
        ..SourceOptions::default()
    });
    assert_eq!(e.start_source_scheduler().unwrap(), 1);
    assert_eq!(e.due_sources(10).unwrap(), vec![s.id.clone()]);
    let report = e
        .sync_scheduled_source(&s.id, "n:sources")
        .unwrap()
        .unwrap();
    assert_eq!(report.counts.added, 1, "{report:?}");
    // What it recorded is what attaching elsewhere is warned against: nothing, now.
    let (_server2, location2) = loopback_site();
    let elsewhere = engine(home.path()).with_sources(SourceOptions {
        guard_scheduled: false,
        ..SourceOptions::default()
    });
    let mut owner = elsewhere.scope().clone();
    owner.machine_owner = true;
    let s2 = attach(&elsewhere.scoped(owner), location2.clone()).unwrap();
    assert!(s2.warnings.is_empty(), "{:?}", s2.warnings);
    // A server that guards with no allow-list starts: the CLI's attach warns.
    let guarded = engine(home.path());
    guarded.start_source_scheduler().unwrap();
    let cli = engine(home.path()).with_sources(SourceOptions {
        guard_scheduled: false,
        ..SourceOptions::default()
    });
    cli.remove_source(&s2.id, false).unwrap();
    let s3 = attach(&cli, location2).unwrap();
    assert_eq!(s3.warnings.len(), 1, "{s3:?}");
}

#[test]
fn a_source_id_is_found_in_its_own_space_by_the_machine_owner_only() {
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("a.md"), "# A").unwrap();
    let e = engine(home.path());
    let acme = e.scoped(Scope::owner("acme"));
    crate::test_support::create_kb(&acme, "docs");
    let s = acme
        .add_source(
            "docs",
            &AddSource {
                location: Location::folder(folder.path()).unwrap(),
                mask: None,
                interval: None,
                secret: None,
                watch: false,
                readers: None,
                allow_net: Vec::new(),
            },
        )
        .unwrap();
    assert_eq!(e.source_space(&s.id).unwrap().as_deref(), Some("acme"));
    assert_eq!(e.source_space("no-such-id").unwrap(), None);
    // The default space's handle does not see it; moved to its space, it does.
    assert!(matches!(e.source(&s.id), Err(Error::NotFound(_))));
    let moved = e.in_source_space(&s.id).unwrap();
    assert_eq!(moved.space(), "acme");
    assert_eq!(moved.source(&s.id).unwrap().knowledge_base, "docs");
    // Anyone else stays where they are.
    let admin = remote(&e, Access::Admin);
    assert_eq!(admin.in_source_space(&s.id).unwrap().space(), "default");
    let unknown = e.in_source_space("no-such-id").unwrap();
    assert_eq!(unknown.space(), "default");
}
