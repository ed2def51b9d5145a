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
use crate::progress::NoProgress;
use crate::source_options::SourceOptions;
use crate::sources::AddSource;
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
    assert!(e.scheduler_handle().source_net().is_some());
    let home2 = tempfile::tempdir().unwrap();
    let open = engine(home2.path()).with_sources(SourceOptions {
        guard_scheduled: false,
        ..SourceOptions::default()
    });
    assert!(open.scheduler_handle().source_net().is_none());
    assert!(
        e.source_net().is_none(),
        "the owner's own syncs are not guarded"
    );
}
