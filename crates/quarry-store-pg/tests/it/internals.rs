//! What the conformance suite cannot see from outside: how the PostgreSQL store lays data
//! down (half-precision vectors, the feed's trimming, NUL in text), read with a raw client.
//! On the server `QUARRY_TEST_DATABASE_URL` names (skipped without one).

use crate::common::{TestDatabase, wait_for_lock_waiters};
use pgvector::HalfVector;
use quarry_core::CollectionKind;
use quarry_store::prelude::*;
use quarry_store::{DocChange, FeedPosition};
use quarry_store_pg::PgStore;

/// Runs `f` on a store in a fresh database of the test server (see common/), with a plain
/// client on the same database; the database is dropped afterwards, even when `f` panics.
fn with_store(f: impl FnOnce(&PgStore, &mut postgres::Client)) {
    let Some(db) = TestDatabase::create("quarry_u") else {
        return;
    };
    let mut raw = db.client();
    f(
        &PgStore::connect(&db.url).expect("connect the store"),
        &mut raw,
    );
}

/// Like [`with_store`], handing over the database itself (for several raw clients).
fn with_store_db(f: impl FnOnce(&PgStore, &TestDatabase)) {
    let Some(db) = TestDatabase::create("quarry_u") else {
        return;
    };
    f(&PgStore::connect(&db.url).expect("connect the store"), &db);
}

fn doc(path: &str, body: &str) -> DocChange {
    DocChange::Upsert {
        meta: Default::default(),
        path: path.into(),
        title: path.into(),
        hash: quarry_core::sha256_hex(body.as_bytes()),
        size: 1,
        stamp: 1,
        body: body.into(),
        pages: Vec::new(),
        furniture: Vec::new(),
    }
}

/// Every file read names the entry that superseded it (`FILE_SELECT`): that lookup has
/// `kb_files_superseded_by` (schema v29) to go through, not only a scan of every file per
/// file read, which made a listing quadratic in the knowledge base's size. (Sequential
/// scans are turned off so the planner shows what it could use on a table this small.)
#[test]
fn reading_files_can_look_up_successors_by_index() {
    with_store(|_store, raw| {
        raw.batch_execute("SET enable_seqscan = off").expect("set");
        let plan: Vec<String> = raw
            .query(
                "EXPLAIN SELECT f.id, (SELECT p.uid FROM kb_files p WHERE p.superseded_by = f.id) \
                 FROM kb_files f WHERE f.collection_id = 1",
                &[],
            )
            .expect("explain")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(
            plan.iter()
                .any(|l| l.contains("kb_files_superseded_by on kb_files p")),
            "{plan:#?}"
        );
    });
}

/// Vectors go in as `halfvec` (replacing what a hash had) and hold the values at half
/// precision.
#[test]
fn vectors_are_stored_as_halfvec() {
    with_store(|store, raw| {
        store
            .put_embeddings("m", &[("k".into(), vec![9.0, 9.0])])
            .unwrap();
        store
            .put_embeddings(
                "m",
                &[
                    ("k".into(), vec![0.5, -2.25, 1000.0, 0.1]),
                    ("j".into(), vec![1.0]),
                ],
            )
            .unwrap();
        let row = raw
            .query_one(
                "SELECT vector FROM embeddings WHERE model = 'm' AND hash = 'k'",
                &[],
            )
            .unwrap();
        let v: Vec<f32> = row
            .get::<_, HalfVector>(0)
            .to_vec()
            .iter()
            .map(|h| h.to_f32())
            .collect();
        assert_eq!(v[..3], [0.5, -2.25, 1000.0]);
        assert!((v[3] - 0.1).abs() < 1e-4, "{}", v[3]);
    });
}

/// The feed keeps what the slowest consumer has not absorbed, and no more.
#[test]
fn the_feed_is_trimmed_to_the_slowest_consumer() {
    with_store(|store, raw| {
        let mut entries = || -> i64 {
            raw.query_one("SELECT COUNT(*) FROM feed", &[])
                .unwrap()
                .get(0)
        };
        let c = store
            .create_collection("default", "c", CollectionKind::Folder, "/x", "*")
            .unwrap()
            .id;
        let a = store.feed_position("a").unwrap();
        let b = store.feed_position("b").unwrap();
        store
            .apply_changes(c, vec![doc("1.md", "one"), doc("2.md", "two")])
            .unwrap();
        assert_eq!(entries(), 2);
        let read_all = |from: FeedPosition| read_all(store, from);
        store.feed_ack("a", read_all(a)).unwrap();
        assert_eq!(entries(), 2, "b has not read them");
        store.feed_ack("b", read_all(b)).unwrap();
        assert_eq!(entries(), 0, "everyone is past them");
        store.apply_changes(c, vec![doc("3.md", "three")]).unwrap();
        store.feed_forget("a").unwrap();
        assert_eq!(entries(), 1, "b still needs it");
        // With nobody left, the entries of every finished transaction go (another test's
        // transaction on this server may hold the horizon back for a moment).
        store.feed_forget("b").unwrap();
        for _ in 0..200 {
            if entries() == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            store.feed_forget("b").unwrap();
        }
        assert_eq!(entries(), 0, "nobody is left to read it");
        // A NUL is stored as a space, offsets unchanged.
        let work = store.apply_changes(c, vec![doc("nul.md", "a\0b")]).unwrap();
        let d = &store.documents_by_ids(&[work.upserts[0].id]).unwrap()[0];
        assert_eq!(d.body, "a b");
    });
}

/// Reads the feed from `from` until a batch covers every write committed before the call.
fn read_all(store: &PgStore, mut from: FeedPosition) -> FeedPosition {
    let token = store.feed_horizon().unwrap();
    for _ in 0..1_000 {
        let batch = store.feed_read(from, 100).unwrap();
        let empty = batch.work.is_empty();
        from = batch.position;
        if empty && batch.horizon.is_some_and(|h| h >= token) {
            return from;
        }
        if empty {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    panic!("the feed's horizon never reached {token}");
}

/// Why the feed is read in `(txid, seq)` order below the oldest running transaction:
/// transaction A takes its entry's `seq` first but commits after B. A reader that followed
/// `seq > last` would read B's entry, move past A's number, and never see A's document.
#[test]
fn an_entry_that_commits_out_of_order_is_not_skipped() {
    with_store_db(|store, db| {
        let raw = &mut db.client();
        let c = store
            .create_collection("default", "c", CollectionKind::Folder, "/x", "*")
            .unwrap()
            .id;
        let from = read_all(store, store.feed_position("node").unwrap());
        let insert = |client: &mut postgres::Transaction<'_>, path: &str| {
            client
                .execute(
                    "INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, \
                     body, body_bytes, indexed_at) VALUES ($1, $2, $2, $2, $2, 1, 1, $2, 1, 0)",
                    &[&c, &path],
                )
                .unwrap();
        };
        let (mut a, mut b) = (db.client(), db.client());
        let mut ta = a.transaction().unwrap();
        insert(&mut ta, "a.md");
        let mut tb = b.transaction().unwrap();
        insert(&mut tb, "b.md");
        tb.commit().unwrap();
        // B is committed, A is not; A's entry has the lower seq.
        let seqs: Vec<(i64, String)> = raw
            .query(
                "SELECT f.seq, d.path FROM feed f JOIN documents d ON d.id = f.document_id \
                 ORDER BY f.seq",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(seqs.len(), 1, "only B's entry is visible: {seqs:?}");
        assert_eq!(seqs[0].1, "b.md");
        let naive_cursor = seqs[0].0;
        // The store's reader hands out nothing yet: A, older than B, is still running.
        let batch = store.feed_read(from, 100).unwrap();
        assert!(
            batch.work.is_empty(),
            "read past a running transaction: {batch:?}"
        );
        ta.commit().unwrap();
        // A naive `seq > last` reader that moved to B's seq now misses A for good.
        let naive: i64 = raw
            .query_one("SELECT COUNT(*) FROM feed WHERE seq > $1", &[&naive_cursor])
            .unwrap()
            .get(0);
        assert_eq!(naive, 0, "A's entry sits below B's seq");
        // The store's reader gets both.
        let mut got = Vec::new();
        let mut from = from;
        let token = store.feed_horizon().unwrap();
        for _ in 0..500 {
            let batch = store.feed_read(from, 100).unwrap();
            got.extend(batch.work.upserts.iter().map(|d| d.path.clone()));
            from = batch.position;
            if batch.horizon.is_some_and(|h| h >= token) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        got.sort();
        assert_eq!(got, ["a.md", "b.md"]);
    });
}

/// Fails unless `tables` hold no rows (each may carry its own `WHERE`).
fn assert_no_rows(raw: &mut postgres::Client, tables: &[&str]) {
    for table in tables {
        let left: i64 = raw
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .unwrap()
            .get(0);
        assert_eq!(left, 0, "rows left in {table}");
    }
}

fn upload(name: &str) -> quarry_store::NewKbFile {
    quarry_store::NewKbFile {
        original_name: name.into(),
        sha256: quarry_core::sha256_hex(name.as_bytes()),
        format: "md".into(),
        mime: "text/markdown".into(),
        size: 10,
        note: None,
        readers: None,
        meta: String::new(),
    }
}

fn converted(body: &str) -> quarry_store::ConvertedFile {
    quarry_store::ConvertedFile {
        title: body.into(),
        markdown: body.into(),
        pages: Vec::new(),
        furniture: Vec::new(),
        meta: String::new(),
        page_count: None,
        pages_without_text: None,
        warnings: Vec::new(),
        images: Vec::new(),
    }
}

/// A conversion landing its document (the file's job and row locked, then a document
/// inserted, which checks the collection's key) while the knowledge base is removed (the
/// collection locked, then the files' jobs): both finish, and nothing of the knowledge base
/// is left. Taken in opposite orders, the two locks deadlocked and PostgreSQL aborted one.
#[test]
fn removing_a_knowledge_base_while_a_conversion_lands_deadlocks_neither() {
    with_store_db(|store, db| {
        let kb = store
            .create_knowledge_base("default", "kb", "", None)
            .unwrap();
        let file = match &store
            .add_files(kb.collection_id, &[upload("a.md")])
            .unwrap()[0]
        {
            quarry_store::AddedFile::Added { file } => file.row_id,
            other => panic!("not added: {other:?}"),
        };
        // The test holds the file's row, so the conversion stops right after its first locks.
        let mut holder = db.client();
        let mut hold = holder.transaction().unwrap();
        hold.execute(
            "SELECT 1 FROM kb_files WHERE id = $1 FOR KEY SHARE",
            &[&file],
        )
        .unwrap();
        let mut raw = db.client();
        std::thread::scope(|s| {
            let landing = s.spawn(|| store.file_converted(None, file, converted("# A\n\nbody")));
            wait_for_lock_waiters(&mut raw, 1, "%");
            let removing = s.spawn(|| store.remove_collection("default", "kb"));
            wait_for_lock_waiters(&mut raw, 2, "%");
            hold.commit().unwrap();
            let landed = landing.join().unwrap();
            let removed = removing.join().unwrap();
            assert!(landed.is_ok(), "the conversion failed: {landed:?}");
            assert!(removed.is_ok(), "the removal failed: {removed:?}");
        });
        assert_no_rows(
            &mut raw,
            &[
                "collections",
                "kb_files",
                "documents",
                "jobs WHERE kind <> 'cleanup'",
            ],
        );
    });
}

/// A sync adding a file (its source locked, then the knowledge base's row for a free name)
/// while the knowledge base is removed: the removal takes the source first, so the sync
/// waits and then finds its lease gone. Removing took the collection before the source and
/// deadlocked with it.
#[test]
fn removing_a_knowledge_base_while_its_source_syncs_deadlocks_neither() {
    with_store_db(|store, db| {
        let kb = store
            .create_knowledge_base("default", "kb", "", None)
            .unwrap();
        let source = store
            .create_source(&quarry_store::NewSource {
                collection_id: kb.collection_id,
                kind: "folder".into(),
                location: "/docs".into(),
                mask: "**".into(),
                interval_ms: None,
                sealed_secret: None,
                readers: None,
                allow_net: None,
            })
            .unwrap();
        let lease = store
            .claim_source(source.row_id, "node-1", 60_000)
            .unwrap()
            .expect("a new source is free");
        let add = |name: &'static str| {
            let file = upload(name);
            store.apply_source_change(
                lease,
                &quarry_store::SourceChange::Add {
                    path: name,
                    version: "v1",
                    file: &file,
                },
            )
        };
        let first = add("one.md").unwrap().expect("the lease holds");
        store
            .file_converted(None, first, converted("# One"))
            .unwrap()
            .expect("converted");
        // The test holds the knowledge base's document, so the removal stops once it has
        // locked what comes before documents.
        let mut holder = db.client();
        let mut hold = holder.transaction().unwrap();
        hold.execute(
            "SELECT 1 FROM documents WHERE collection_id = $1 FOR KEY SHARE",
            &[&kb.collection_id],
        )
        .unwrap();
        let mut raw = db.client();
        std::thread::scope(|s| {
            let removing = s.spawn(|| store.remove_collection("default", "kb"));
            wait_for_lock_waiters(&mut raw, 1, "%");
            let syncing = s.spawn(|| add("two.md"));
            wait_for_lock_waiters(&mut raw, 2, "%");
            hold.commit().unwrap();
            let removed = removing.join().unwrap();
            let synced = syncing.join().unwrap();
            assert!(matches!(removed, Ok(1)), "the removal failed: {removed:?}");
            assert!(
                matches!(synced, Ok(None)),
                "the sync should find its source gone: {synced:?}"
            );
        });
        assert_no_rows(
            &mut raw,
            &["collections", "sources", "kb_files", "documents"],
        );
    });
}
