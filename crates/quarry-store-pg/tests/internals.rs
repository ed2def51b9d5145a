//! What the conformance suite cannot see from outside: how the PostgreSQL store lays data
//! down (half-precision vectors, the feed's trimming, NUL in text), read with a raw client.
//! On the server `QUARRY_TEST_DATABASE_URL` names (skipped without one).

mod common;

use common::TestDatabase;
use pgvector::HalfVector;
use quarry_core::CollectionKind;
use quarry_store::{DocChange, FeedPosition, Store};
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

fn doc(path: &str, body: &str) -> DocChange {
    DocChange::Upsert {
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
        let read_all = |from: FeedPosition| {
            let mut from = from;
            loop {
                let batch = store.feed_read(from, 100).unwrap();
                if batch.work.is_empty() {
                    return from;
                }
                from = batch.position;
            }
        };
        store.feed_ack("a", read_all(a)).unwrap();
        assert_eq!(entries(), 2, "b has not read them");
        store.feed_ack("b", read_all(b)).unwrap();
        assert_eq!(entries(), 0, "everyone is past them");
        store.apply_changes(c, vec![doc("3.md", "three")]).unwrap();
        store.feed_forget("a").unwrap();
        assert_eq!(entries(), 1, "b still needs it");
        store.feed_forget("b").unwrap();
        assert_eq!(entries(), 0, "nobody is left to read it");
        // A NUL is stored as a space, offsets unchanged.
        let work = store.apply_changes(c, vec![doc("nul.md", "a\0b")]).unwrap();
        let d = &store.documents_by_ids(&[work.upserts[0].id]).unwrap()[0];
        assert_eq!(d.body, "a b");
    });
}
