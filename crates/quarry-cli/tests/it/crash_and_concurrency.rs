//! Crash safety (SIGKILL in the middle of `update`) and concurrent readers/writers.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Quarry, assert_unique, s};
use serde_json::Value;

const GROUPS: usize = 4;

fn file_name(i: usize) -> String {
    format!("f{i:04}.md")
}

/// Writes `n` files for `version`: each has a unique `tok{i}`, a group word `grp{i % 4}`,
/// shared words, and the version in its title and body.
fn write_version(root: &Path, n: usize, version: usize) {
    let filler =
        "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor\n".repeat(6);
    for i in 0..n {
        let body = format!(
            "# File {i} v{version}\n\nshared common words quarry grp{g} tok{i} ver{version}\n\n{filler}",
            g = i % GROUPS
        );
        std::fs::write(root.join(file_name(i)), body).expect("write corpus file");
    }
}

/// The index holds exactly the `n` files at `version`: complete, nothing duplicated,
/// nothing stale.
#[track_caller]
fn verify(q: &Quarry, n: usize, version: usize) {
    assert_eq!(q.total_documents(), n as u64);
    let list = q.json(&["collection", "list"]);
    assert_eq!(list["collections"][0]["documents"], n as u64);

    // A sample of unique tokens: exactly one hit each, the right file, the current version.
    for k in 0..50 {
        let i = (k * 61 + 7) % n;
        let hits = q.search(&[&format!("tok{i}")]);
        assert_eq!(hits.len(), 1, "tok{i}: {hits:?}");
        assert_eq!(hits[0]["file"], format!("bulk/{}", file_name(i)));
        assert_eq!(hits[0]["title"], format!("File {i} v{version}"));
    }
    // Every file, exactly once, through the group words.
    for g in 0..GROUPS {
        let files = q.search_files(&[&format!("grp{g}"), "-n", "1000"]);
        assert_unique(&files);
        let got: BTreeSet<String> = files.into_iter().collect();
        let want: BTreeSet<String> = (0..n)
            .filter(|i| i % GROUPS == g)
            .map(|i| format!("bulk/{}", file_name(i)))
            .collect();
        assert_eq!(got.len(), want.len(), "grp{g}");
        assert_eq!(got, want, "grp{g}");
    }
    // A word every file shares: each file at most once.
    let files = q.search_files(&["shared", "-n", "1000"]);
    assert_eq!(files.len(), 1000.min(n));
    assert_unique(&files);
    // Older versions are gone from the keyword index.
    if version > 1 {
        assert!(q.search_files(&[&format!("ver{}", version - 1)]).is_empty());
    }
    assert_eq!(
        q.search(&[&format!("ver{version}"), "-n", "1000"]).len(),
        1000.min(n)
    );
}

#[test]
fn killed_update_is_completed_by_the_next_run() {
    const N: usize = 3000;
    let q = Quarry::new();
    let root = q.dir("bulk");
    q.json(&[
        "collection",
        "add",
        s(&root),
        "--name",
        "bulk",
        "--allow-empty",
    ]);
    let mut version = 1;
    write_version(&root, N, version);

    // Kill `update` part-way, many times, each time with fresh work to do: all 3,000 files
    // new (round 0) or changed. The delays spread the kills over the phases of a run
    // (scan, read + store batches, keyword indexing). After some kills a full run
    // completes the work; after the others the next round starts on top of the leftovers,
    // so recovery itself gets killed too.
    let plan: [(u64, bool); 7] = [
        (60, true),
        (120, true),
        (200, false),
        (40, true),
        (300, false),
        (90, false),
        (160, true),
    ];
    let mut killed_mid_run = 0;
    let t0 = Instant::now();
    for (round, &(delay, complete_after)) in plan.iter().enumerate() {
        if round > 0 {
            version += 1;
            write_version(&root, N, version);
        }
        let mut child = q.spawn(&["update"]);
        std::thread::sleep(Duration::from_millis(delay));
        let still_running = child.try_wait().expect("try_wait").is_none();
        if still_running {
            child.kill().expect("SIGKILL");
        }
        let out = child.wait_with_output().expect("wait");
        if still_running && !out.status.success() && crate::common::stdout(&out).is_empty() {
            // Killed before it reported completion.
            killed_mid_run += 1;
        }
        // Whatever state the kill left, every index is still usable by readers, and no
        // document is listed twice.
        let docs = q.total_documents();
        assert!(docs <= N as u64);
        let fresh = q.search_files(&[&format!("ver{version}"), "-n", "1000"]);
        assert_unique(&fresh);
        assert_unique(&q.search_files(&["shared", "-n", "1000"]));
        for hit in q.search(&["tok7"]) {
            assert_eq!(hit["file"], "bulk/f0007.md");
        }
        eprintln!(
            "round {round} (t={:?}): {} after {delay} ms; {docs} documents stored, {} searchable at v{version}",
            t0.elapsed(),
            if still_running { "killed" } else { "finished" },
            fresh.len()
        );
        if complete_after {
            let v = q.json(&["update"]);
            assert_eq!(v["total_documents"], N as u64, "{v}");
            assert_eq!(
                q.search(&[&format!("ver{version}"), "-n", "1000"]).len(),
                1000
            );
            let hits = q.search(&[&format!("tok{}", round * 101)]);
            assert_eq!(hits.len(), 1, "{hits:?}");
            assert_eq!(hits[0]["title"], format!("File {} v{version}", round * 101));
        }
    }
    assert!(
        killed_mid_run >= 3,
        "only {killed_mid_run} kills landed before an update finished; the test proved little"
    );

    // The next run succeeds and completes the work (the last round completed already;
    // kill once more on top of fresh changes so the final run has real work).
    version += 1;
    write_version(&root, N, version);
    let mut child = q.spawn(&["update"]);
    std::thread::sleep(Duration::from_millis(150));
    let _ = child.kill();
    let _ = child.wait();
    let v = q.json(&["update"]);
    assert_eq!(v["total_documents"], N as u64, "{v}");
    eprintln!("final update done (t={:?})", t0.elapsed());
    verify(&q, N, version);
    eprintln!("verified (t={:?})", t0.elapsed());

    // Nothing is left to do afterwards: everything is unchanged.
    let v = q.json(&["update"]);
    let r = &v["collections"][0];
    assert_eq!(
        (&r["added"], &r["updated"], &r["removed"], &r["unchanged"]),
        (
            &Value::from(0),
            &Value::from(0),
            &Value::from(0),
            &Value::from(N)
        ),
        "{v}"
    );
}

#[test]
fn killed_collection_add_is_completed_by_update() {
    // A kill during the first indexing of `collection add`: the collection exists, and
    // `update` finishes it.
    const N: usize = 2000;
    let q = Quarry::new();
    let root = q.dir("bulk");
    write_version(&root, N, 1);
    let mut killed = false;
    let mut delay = 100.0f64;
    for _attempt in 0..10 {
        let mut child = q.spawn(&["collection", "add", s(&root), "--name", "bulk"]);
        std::thread::sleep(Duration::from_millis(delay as u64));
        let running = child.try_wait().expect("try_wait").is_none();
        if running {
            child.kill().expect("SIGKILL");
        }
        let out = child.wait_with_output().expect("wait");
        let exists = !q.json(&["collection", "list"])["collections"]
            .as_array()
            .unwrap()
            .is_empty();
        let finished = !running || !crate::common::stdout(&out).is_empty();
        if !finished && exists {
            killed = true;
            break;
        }
        if finished {
            // Too late: start over with a shorter delay.
            q.ok(&["collection", "remove", "bulk"]);
            delay /= 2.0;
        } else {
            // Killed before the collection was created: nothing was added; wait longer.
            delay *= 1.5;
        }
    }
    if !killed {
        eprintln!("skipping: could not kill `collection add` after it created the collection");
        return;
    }
    // Adding again is refused (it exists) and changes nothing; update completes it.
    let err = q.err(&["collection", "add", s(&root), "--name", "bulk"]);
    assert!(err.contains("already exists"), "{err}");
    q.ok(&["update"]);
    verify(&q, N, 1);
}

#[test]
fn searches_never_fail_while_update_runs() {
    const N: usize = 1500;
    let q = Quarry::new();
    let root = q.dir("bulk");
    write_version(&root, N, 1);
    q.json(&["collection", "add", s(&root), "--name", "bulk"]);

    let stop = AtomicBool::new(false);
    let updating = AtomicBool::new(false);
    let rounds = AtomicUsize::new(0);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let last_version = AtomicUsize::new(1);
    let started = Instant::now();

    let (searches, overlapped) = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut version = 1;
            while rounds.load(Ordering::SeqCst) < 2
                || (!stop.load(Ordering::SeqCst) && rounds.load(Ordering::SeqCst) < 10)
            {
                version += 1;
                write_version(&root, N, version);
                updating.store(true, Ordering::SeqCst);
                let out = q.run(&["update"]);
                updating.store(false, Ordering::SeqCst);
                last_version.store(version, Ordering::SeqCst);
                if !out.status.success() {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("update failed: {}", crate::common::stderr(&out)));
                    break;
                }
                rounds.fetch_add(1, Ordering::SeqCst);
            }
            stop.store(true, Ordering::SeqCst);
        });

        let mut searches = 0;
        let mut overlapped = 0;
        while searches < 30 || (rounds.load(Ordering::SeqCst) < 2 && !stop.load(Ordering::SeqCst)) {
            if !failures.lock().unwrap().is_empty() || started.elapsed() > Duration::from_secs(90) {
                break;
            }
            let during = updating.load(Ordering::SeqCst);
            let args: Vec<String> = if searches % 2 == 0 {
                vec![
                    "search".into(),
                    format!("grp{}", searches % GROUPS),
                    "-n".into(),
                    "1000".into(),
                    "--json".into(),
                ]
            } else {
                vec![
                    "search".into(),
                    format!("tok{}", (searches * 37) % N),
                    "--json".into(),
                ]
            };
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = q.run(&argv);
            if during && updating.load(Ordering::SeqCst) {
                overlapped += 1;
            }
            searches += 1;
            let err = crate::common::stderr(&out);
            assert!(
                out.status.success(),
                "search {argv:?} failed during update: {err}"
            );
            assert!(!err.contains("locked"), "{err}");
            let hits: Vec<Value> = serde_json::from_slice(&out.stdout).expect("search JSON");
            let files: Vec<String> = hits
                .iter()
                .map(|h| h["file"].as_str().unwrap().to_owned())
                .collect();
            assert_unique(&files);
            if argv[1].starts_with("grp") {
                assert!(files.len() <= N / GROUPS, "{}", files.len());
            } else {
                assert!(files.len() <= 1, "{files:?}");
            }
        }
        stop.store(true, Ordering::SeqCst);
        (searches, overlapped)
    });

    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    assert!(searches >= 30, "only {searches} searches ran");
    assert!(rounds.load(Ordering::SeqCst) >= 2);
    assert!(
        overlapped >= 10,
        "only {overlapped} of {searches} searches overlapped an update"
    );
    verify(&q, N, last_version.load(Ordering::SeqCst));
}

#[test]
fn two_updates_at_once_both_succeed() {
    const N: usize = 1500;
    let q = Quarry::new();
    let root = q.dir("bulk");
    write_version(&root, N, 1);
    q.json(&["collection", "add", s(&root), "--name", "bulk"]);
    write_version(&root, N, 2);

    let a = q.spawn(&["update", "--json"]);
    let b = q.spawn(&["update", "--json"]);
    let oa = a.wait_with_output().unwrap();
    let ob = b.wait_with_output().unwrap();
    crate::common::assert_success(&["update (first)"], &oa);
    crate::common::assert_success(&["update (second)"], &ob);
    let mut updated: Vec<u64> = [&oa, &ob]
        .iter()
        .map(|o| {
            let v: Value = serde_json::from_slice(&o.stdout).expect("update JSON");
            assert_eq!(v["total_documents"], N as u64);
            v["collections"][0]["updated"].as_u64().unwrap()
        })
        .collect();
    updated.sort();
    // Writers are serialised: one did all the work, the other found nothing left.
    assert_eq!(updated, [0, N as u64]);
    verify(&q, N, 2);

    // Three at once, with a search racing them.
    write_version(&root, N, 3);
    let children: Vec<_> = (0..3).map(|_| q.spawn(&["update"])).collect();
    let files = q.search_files(&["grp0", "-n", "1000"]);
    assert_unique(&files);
    for c in children {
        let out = c.wait_with_output().unwrap();
        crate::common::assert_success(&["update (concurrent)"], &out);
    }
    verify(&q, N, 3);
}
