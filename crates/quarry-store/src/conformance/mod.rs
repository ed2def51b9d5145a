//! The store conformance suite: what every backend must do, run against each one (tantivy's
//! directory tests are the model). A backend's tests expand [`store_conformance!`] with a
//! function that opens a fresh, empty store:
//!
//! ```text
//! quarry_store::store_conformance!(|| {
//!     let dir = tempfile::tempdir().unwrap();
//!     let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
//!     (dir, Box::new(store) as Box<dyn quarry_store::Store>)
//! });
//! ```
//!
//! Each case takes the store and panics, naming what broke, when the backend misbehaves.

use quarry_core::{CollectionKind, Error};

use crate::{DocChange, FeedPosition, NewKbFile, Store};
use fixtures::{Model, SPACE, collection, doc, drain, id_of, position, read, truth};

pub mod access;
pub mod audit;
pub mod chat;
pub mod embedding;
pub mod entries;
mod fixtures;
pub mod groups;
#[doc(hidden)]
pub mod harness;
pub mod hub;
pub mod insight;
pub mod knowledge;
pub mod oauth;
pub mod policies;
pub mod sign_ins;
pub mod sources;
pub mod store;
pub mod vectors;

/// One `#[test]` per conformance case, each on a store from `$open` (a closure returning
/// whatever must outlive the test, e.g. a temporary directory, and a `Box<dyn Store>`; or
/// `None` to skip).
///
/// Each area's cases live in a module of their own (`conformance/<area>.rs`), listed by
/// that module's `__conformance_<area>!` (named here through the module, which re-exports
/// it), so areas grow without touching each other.
#[macro_export]
macro_rules! store_conformance {
    ($open:expr) => {
        $crate::conformance::access::__conformance_access!($open);
        $crate::conformance::audit::__conformance_audit!($open);
        $crate::conformance::chat::__conformance_chat!($open);
        $crate::conformance::embedding::__conformance_embedding!($open);
        $crate::conformance::entries::__conformance_entries!($open);
        $crate::conformance::groups::__conformance_groups!($open);
        $crate::conformance::hub::__conformance_hub!($open);
        $crate::conformance::insight::__conformance_insight!($open);
        $crate::conformance::knowledge::__conformance_knowledge!($open);
        $crate::conformance::oauth::__conformance_oauth!($open);
        $crate::conformance::policies::__conformance_policies!($open);
        $crate::conformance::sign_ins::__conformance_sign_ins!($open);
        $crate::conformance::sources::__conformance_sources!($open);
        $crate::conformance::store::__conformance_store!($open);
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance];
            feed_every_consumer_sees_every_change,
            feed_unacknowledged_work_is_read_again,
            feed_new_consumer_reads_a_snapshot_first,
            feed_snapshot_with_concurrent_writes_converges,
            feed_rebuild_reads_everything_again_and_records_meta,
            feed_forgotten_consumer_starts_over,
            feed_ack_of_an_unknown_consumer_is_not_found,
            feed_resume_from_an_index_position,
            feed_resume_below_the_trimmed_feed_is_refused,
            feed_idle_consumers_are_forgotten_and_hold_nothing_back,
            feed_horizon_covers_committed_writes,
            changes_to_a_missing_collection_are_not_found,
            collection_names_conflict_within_a_space_only,
            jobs_two_claimers_never_hold_one_job,
            jobs_a_stale_claim_writes_nothing,
        );
    };
}

/// Two derived indexes (two nodes' keyword indexes) follow one store: each sees every
/// change, whenever it reads, and one acknowledging does not hide anything from the other.
pub fn feed_every_consumer_sees_every_change(store: &dyn Store) {
    let c = collection(store, "c");
    let (mut a, mut b) = (Model::new(), Model::new());
    drain(store, "a", 100, &mut a);
    drain(store, "b", 100, &mut b);
    store
        .apply_changes(c, vec![doc("1.md", "one"), doc("2.md", "two")])
        .expect("apply");
    drain(store, "a", 100, &mut a);
    assert_eq!(a, truth(store), "consumer a after the first writes");
    let one = id_of(store, "1.md");
    store
        .apply_changes(c, vec![doc("3.md", "three"), doc("2.md", "two, changed")])
        .expect("apply");
    store
        .apply_changes(c, vec![DocChange::Remove { id: one }])
        .expect("remove");
    // b acknowledged nothing since it registered: it sees all three batches.
    drain(store, "b", 1, &mut b);
    assert_eq!(b, truth(store), "consumer b, one entry at a time");
    drain(store, "a", 100, &mut a);
    assert_eq!(a, truth(store), "consumer a after b acknowledged");
    assert!(!a.contains_key(&one), "the removal reached a");
    for consumer in ["a", "b"] {
        let batch = read(store, position(store, consumer), 100);
        assert!(batch.work.is_empty(), "{consumer} has nothing left");
    }
}

/// Writing documents into a collection that is gone (removed by another process between
/// a scan and its write) is `NotFound`, and writes nothing.
pub fn changes_to_a_missing_collection_are_not_found(store: &dyn Store) {
    let c = collection(store, "c");
    let err = store
        .apply_changes(c + 1000, vec![doc("1.md", "one")])
        .expect_err("a missing collection");
    assert!(matches!(err, Error::NotFound(_)), "{err:?}");
    assert!(
        store
            .document_summaries(SPACE)
            .expect("summaries")
            .is_empty(),
        "nothing written"
    );
}

/// A consumer that read but died before acknowledging (its index never committed) reads
/// the same work again.
pub fn feed_unacknowledged_work_is_read_again(store: &dyn Store) {
    let c = collection(store, "c");
    drain(store, "a", 100, &mut Model::new());
    store
        .apply_changes(c, vec![doc("1.md", "one"), doc("2.md", "two")])
        .expect("apply");
    let first = read(store, position(store, "a"), 100);
    // The reader died before its index committed: it starts again from its position.
    let again = read(store, position(store, "a"), 100);
    let ids = |b: &crate::FeedBatch| b.work.upserts.iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(ids(&first), ids(&again));
    assert_eq!(first.work.upserts.len(), 2);
    assert_eq!(first.position, again.position);
    store.feed_ack("a", first.position).expect("ack");
    assert!(read(store, position(store, "a"), 100).work.is_empty());
}

/// A consumer seen for the first time gets every live document from a snapshot (in pages of
/// `limit`), not the history of writes and removals before it.
pub fn feed_new_consumer_reads_a_snapshot_first(store: &dyn Store) {
    let c = collection(store, "c");
    store
        .apply_changes(
            c,
            vec![doc("1.md", "one"), doc("2.md", "two"), doc("3.md", "three")],
        )
        .expect("apply");
    let two = id_of(store, "2.md");
    store
        .apply_changes(c, vec![DocChange::Remove { id: two }])
        .expect("remove");
    let first = read(store, position(store, "late"), 1);
    assert_eq!(first.work.upserts.len(), 1, "a page of the snapshot");
    assert!(
        first.work.deletes.is_empty(),
        "a snapshot holds no removals"
    );
    assert!(first.position.rebuilding_after.is_some());
    let mut model = Model::new();
    let batches = drain(store, "late", 1, &mut model);
    assert!(batches >= 2, "two live documents, one per page: {batches}");
    assert_eq!(model, truth(store));
}

/// Writes that land while a consumer pages through its snapshot reach it too: the index
/// ends equal to the store.
pub fn feed_snapshot_with_concurrent_writes_converges(store: &dyn Store) {
    let c = collection(store, "c");
    let changes: Vec<DocChange> = (0..6)
        .map(|i| doc(&format!("{i}.md"), &format!("body {i}")))
        .collect();
    store.apply_changes(c, changes).expect("apply");
    let mut model = Model::new();
    // Two pages of the snapshot, acknowledged.
    for _ in 0..2 {
        let batch = read(store, position(store, "n"), 2);
        for d in batch.work.upserts {
            model.insert(d.id, d.body);
        }
        store.feed_ack("n", batch.position).expect("ack");
    }
    // A document already read changes, one not yet read goes, a new one arrives.
    let zero = id_of(store, "0.md");
    let five = id_of(store, "5.md");
    store
        .apply_changes(
            c,
            vec![
                doc("0.md", "body 0, changed"),
                DocChange::Remove { id: five },
                doc("6.md", "body 6"),
            ],
        )
        .expect("apply");
    drain(store, "n", 2, &mut model);
    assert_eq!(model, truth(store));
    assert_eq!(
        model.get(&zero).map(String::as_str),
        Some("body 0, changed")
    );
}

/// A rebuild (the index was lost, or the analyzer changed) reads every document again and
/// records its marker in the same step.
pub fn feed_rebuild_reads_everything_again_and_records_meta(store: &dyn Store) {
    let c = collection(store, "c");
    store
        .apply_changes(c, vec![doc("1.md", "one"), doc("2.md", "two")])
        .expect("apply");
    drain(store, "a", 100, &mut Model::new());
    store
        .feed_rebuild("a", Some(("analyzer", "v2")))
        .expect("feed_rebuild");
    assert_eq!(store.meta("analyzer").expect("meta").as_deref(), Some("v2"));
    let mut fresh = Model::new();
    drain(store, "a", 100, &mut fresh);
    assert_eq!(fresh, truth(store), "every document read again");
}

/// A forgotten consumer holds nothing back, and if it comes back it starts over with a
/// snapshot.
pub fn feed_forgotten_consumer_starts_over(store: &dyn Store) {
    let c = collection(store, "c");
    drain(store, "gone", 100, &mut Model::new());
    store
        .apply_changes(c, vec![doc("1.md", "one")])
        .expect("apply");
    store.feed_forget("gone").expect("feed_forget");
    let mut model = Model::new();
    drain(store, "gone", 100, &mut model);
    assert_eq!(model, truth(store));
}

/// Acknowledging for a consumer that never read is refused, not silently recorded.
pub fn feed_ack_of_an_unknown_consumer_is_not_found(store: &dyn Store) {
    match store.feed_ack("nobody", FeedPosition::default()) {
        Err(Error::NotFound(_)) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
}

/// Drains like [`drain`], from an explicit position, without acknowledging; returns the
/// position reached and the last batch's horizon.
fn follow(
    store: &dyn Store,
    mut from: FeedPosition,
    model: &mut Model,
) -> (FeedPosition, Option<i64>) {
    for _ in 0..10_000 {
        let batch = read(store, from, 100);
        for id in &batch.work.deletes {
            model.remove(id);
        }
        let done = batch.work.is_empty();
        for d in batch.work.upserts {
            model.insert(d.id, d.body);
        }
        from = batch.position;
        if done {
            return (from, batch.horizon);
        }
    }
    panic!("the feed never ends");
}

/// A node's index records its position in its own commit; on restart the node resumes
/// from it (the store's copy of the position may be older: it acknowledges after the
/// commit) and sees exactly what came after.
pub fn feed_resume_from_an_index_position(store: &dyn Store) {
    let c = collection(store, "c");
    store
        .apply_changes(c, vec![doc("1.md", "one")])
        .expect("apply");
    let mut model = Model::new();
    let (committed, _) = follow(store, position(store, "node"), &mut model);
    // The index committed `committed`, then the node died before acknowledging it.
    store
        .apply_changes(c, vec![doc("2.md", "two")])
        .expect("apply");
    assert!(
        store.feed_resume("node", committed).expect("feed_resume"),
        "the feed holds everything after the index's position"
    );
    assert_eq!(position(store, "node"), committed);
    let batch = read(store, committed, 100);
    let paths: Vec<&str> = batch.work.upserts.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["2.md"], "only what came after the index's commit");
    // A node that was never registered (its row forgotten) resumes too while the feed
    // still holds its entries.
    assert!(store.feed_resume("other", committed).expect("resume"));
}

/// An index whose position lies below what the feed was trimmed to cannot catch up from
/// the feed: resuming says so, and the node rebuilds.
pub fn feed_resume_below_the_trimmed_feed_is_refused(store: &dyn Store) {
    let c = collection(store, "c");
    let mut model = Model::new();
    let (old, _) = follow(store, position(store, "stale"), &mut model);
    store.feed_forget("stale").expect("forget");
    drain(store, "live", 100, &mut Model::new());
    for i in 0..3 {
        store
            .apply_changes(c, vec![doc(&format!("{i}.md"), &format!("body {i}"))])
            .expect("apply");
    }
    // The only live consumer absorbs everything: the feed is trimmed past `old`.
    drain(store, "live", 100, &mut Model::new());
    assert!(
        !store.feed_resume("stale", old).expect("feed_resume"),
        "entries after the stale position are gone"
    );
    store.feed_rebuild("stale", None).expect("rebuild");
    let mut rebuilt = Model::new();
    drain(store, "stale", 100, &mut rebuilt);
    assert_eq!(rebuilt, truth(store));
}

/// Consumers that stopped acknowledging (a node that is gone) are forgotten, after which
/// the feed is trimmed below the live ones only; recently seen ones stay.
pub fn feed_idle_consumers_are_forgotten_and_hold_nothing_back(store: &dyn Store) {
    let c = collection(store, "c");
    // Wide margins: CI runs this beside other suites on two cores, where a few hundred
    // milliseconds can pass between the last acknowledgement and the sweep.
    drain(store, "gone", 100, &mut Model::new());
    std::thread::sleep(std::time::Duration::from_millis(4_000));
    drain(store, "live", 100, &mut Model::new());
    store
        .apply_changes(c, vec![doc("1.md", "one")])
        .expect("apply");
    drain(store, "live", 100, &mut Model::new());
    let live = position(store, "live");
    store.feed_ack("live", live).expect("feed_ack");
    let gone = store.feed_forget_idle(2_000).expect("feed_forget_idle");
    assert_eq!(gone, ["gone"], "only the consumer idle for 2 s");
    assert!(store.feed_forget_idle(60_000).expect("again").is_empty());
    // `live` is past every entry and alone: nothing is kept for `gone`.
    let mut model = Model::new();
    let from = position(store, "live");
    assert!(read(store, from, 100).work.is_empty());
    assert!(
        !store
            .feed_resume("gone", FeedPosition::default())
            .expect("resume"),
        "the forgotten consumer's entries were trimmed"
    );
    drain(store, "gone", 100, &mut model);
    assert_eq!(model, truth(store), "it comes back through a snapshot");
}

/// Read-your-writes: a horizon taken after a write is reached by a consumer's batch only
/// once the write is in what the consumer read.
pub fn feed_horizon_covers_committed_writes(store: &dyn Store) {
    let c = collection(store, "c");
    let mut model = Model::new();
    let (from, horizon) = follow(store, position(store, "node"), &mut model);
    let before = store.feed_horizon().expect("feed_horizon");
    store
        .apply_changes(c, vec![doc("1.md", "one")])
        .expect("apply");
    let after = store.feed_horizon().expect("feed_horizon");
    assert!(
        after > before,
        "a write moves the horizon: {before} → {after}"
    );
    assert!(
        horizon.is_some_and(|h| h < after),
        "a batch read before the write does not cover it: {horizon:?} vs {after}"
    );
    // Following until the horizon passes the token finds the write. (On a database other
    // transactions, such as other tests', may hold the horizon back for a moment.)
    let mut from = from;
    for _ in 0..500 {
        let (next, horizon) = follow(store, from, &mut model);
        from = next;
        if horizon.is_some_and(|h| h >= after) {
            assert!(model.values().any(|b| b == "one"), "the write was read");
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the horizon never reached {after}");
}

/// Collection names are unique within a space (a clash is `Conflict`), not across spaces;
/// `collection_id` finds a name in its own space only.
pub fn collection_names_conflict_within_a_space_only(store: &dyn Store) {
    let notes = collection(store, "notes");
    match store.create_collection(SPACE, "notes", CollectionKind::Folder, "/y", "**/*.md") {
        Err(Error::Conflict(_)) => {}
        other => panic!("expected Conflict, got {other:?}"),
    }
    collection(store, "other");
    match store.rename_collection(SPACE, "other", "notes") {
        Err(Error::Conflict(_)) => {}
        other => panic!("expected Conflict on rename, got {other:?}"),
    }
    store
        .create_collection(
            "elsewhere",
            "notes",
            CollectionKind::Folder,
            "/z",
            "**/*.md",
        )
        .expect("the same name in another space");
    let elsewhere = store
        .collection_id("elsewhere", "notes")
        .expect("collection_id");
    assert!(elsewhere.is_some_and(|id| id != notes), "{elsewhere:?}");
    assert_eq!(
        store.collection_id(SPACE, "notes").expect("collection_id"),
        Some(notes)
    );
    assert_eq!(
        store.collection_id(SPACE, "nope").expect("collection_id"),
        None
    );
}

/// Two workers claiming at once (two nodes, or two threads) never get the same job, and
/// together they get every job; a claimed job is nobody else's until its lease lapses.
pub fn jobs_two_claimers_never_hold_one_job(store: &dyn Store) {
    let kb = store
        .create_knowledge_base(SPACE, "kb", "", None)
        .expect("create_knowledge_base");
    let files: Vec<NewKbFile> = (0..40)
        .map(|i| NewKbFile {
            meta: Default::default(),
            original_name: format!("{i}.md"),
            sha256: format!("{i:064x}"),
            format: "md".into(),
            mime: "text/markdown".into(),
            size: 3,
            note: None,
            readers: None,
        })
        .collect();
    store
        .add_files(kb.collection_id, &files)
        .expect("add_files");
    let lease = 60_000;
    let claim_all = |owner: &str| {
        let mut ids = Vec::new();
        while let Some(job) = store.claim_job(owner, lease).expect("claim_job") {
            ids.push(job.id);
        }
        ids
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| claim_all("A"));
        let b = s.spawn(|| claim_all("B"));
        (a.join().expect("claimer A"), b.join().expect("claimer B"))
    });
    let mut all: Vec<i64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    let claimed = all.len();
    all.dedup();
    assert_eq!(
        all.len(),
        claimed,
        "a job was claimed twice: A {a:?}, B {b:?}"
    );
    assert_eq!(claimed, 40, "every ingest job is claimed once");
    // Within the lease nobody else gets them (lapses: `jobs_a_stale_claim_writes_nothing`).
    assert_eq!(store.claim_job("C", lease).expect("claim"), None);
}

/// A worker that froze past its lease, whose job another worker took over, records nothing:
/// neither the job's outcome nor its file's status (fencing tokens). A retry comes back
/// after its delay with the attempt counted; the lease durations are the store's clock.
pub fn jobs_a_stale_claim_writes_nothing(store: &dyn Store) {
    use crate::{FileStatus, Lease, QueueCounts};
    use std::time::Duration;
    let kb = store
        .create_knowledge_base(SPACE, "kb", "", None)
        .expect("create_knowledge_base");
    let added = store
        .add_files(
            kb.collection_id,
            &[NewKbFile {
                meta: Default::default(),
                original_name: "a.md".into(),
                sha256: format!("{:064x}", 1),
                format: "md".into(),
                mime: "text/markdown".into(),
                size: 3,
                note: None,
                readers: None,
            }],
        )
        .expect("add_files");
    let row = added[0].file().row_id;
    let status = || {
        let f = store
            .kb_file_by_row(row)
            .expect("kb_file_by_row")
            .expect("the file");
        (f.status, f.error)
    };
    let job = store.claim_job("A", 1_500).expect("claim").expect("a job");
    assert_eq!(job.kind, crate::JobKind::Ingest);
    assert_eq!(
        store.claim_job("B", 1_500).expect("claim"),
        None,
        "held by A"
    );
    assert!(store.renew_job(job.lease(), 1_500).expect("renew"));
    let forged = Lease {
        job: job.id,
        token: job.token + 1,
    };
    assert!(
        !store.renew_job(forged, 1_500).expect("renew"),
        "a token never issued"
    );
    std::thread::sleep(Duration::from_millis(2_000));
    let taken = store
        .claim_job("B", 60_000)
        .expect("claim")
        .expect("the lapsed job");
    assert_eq!(taken.id, job.id);
    assert!(taken.token > job.token, "every claim a new token");
    // A's attempt ended without an outcome: it counts, so a file that kills its workers is
    // not taken over forever.
    assert!(!job.interrupted && taken.interrupted);
    assert_eq!(taken.attempts, 1);
    assert!(!store.complete_job(job.lease()).expect("complete"));
    assert!(!store.renew_job(job.lease(), 1_500).expect("renew"));
    assert!(!store.fail_job(job.lease(), "stale", None).expect("fail"));
    assert!(
        !store
            .set_file_status(Some(job.lease()), row, FileStatus::Failed, Some("stale"))
            .expect("set_file_status")
    );
    assert_eq!(status(), (FileStatus::Pending, None), "A wrote nothing");
    assert_eq!(store.queue_counts(None).expect("counts").processing, 1);
    // B's retry: back in the queue after its delay, its file waiting with the reason.
    assert!(
        store
            .set_file_status(Some(taken.lease()), row, FileStatus::Converting, None)
            .expect("set_file_status")
    );
    assert!(
        store
            .fail_job(taken.lease(), "flaky", Some(1_500))
            .expect("fail")
    );
    assert_eq!(
        status(),
        (FileStatus::Pending, Some("flaky (will retry)".to_owned()))
    );
    assert_eq!(
        store.claim_job("C", 1_500).expect("claim"),
        None,
        "not due yet"
    );
    std::thread::sleep(Duration::from_millis(2_000));
    let again = store
        .claim_job("C", 60_000)
        .expect("claim")
        .expect("the retry");
    assert_eq!((again.attempts, again.interrupted), (2, false));
    assert!(store.complete_job(again.lease()).expect("complete"));
    assert_eq!(
        store.queue_counts(None).expect("counts"),
        QueueCounts::default()
    );
}
