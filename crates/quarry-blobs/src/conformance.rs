//! The blob store conformance suite: what every [`BlobStore`] must do, run against each
//! backend (tantivy's directory tests are the model). A backend's tests either expand
//! [`blob_store_conformance!`](crate::blob_store_conformance) with a function that opens a
//! fresh store (one `#[test]` per case), or call [`blob_store_conformance`] on one store.
//!
//! ```text
//! quarry_blobs::blob_store_conformance!(|| {
//!     let dir = tempfile::tempdir().unwrap();
//!     let store = FsBlobStore::open(dir.path()).unwrap();
//!     Some((dir, Box::new(store) as Box<dyn quarry_blobs::BlobStore>))
//! });
//! ```
//!
//! Cases never assume the store is empty and use bytes of their own, so they can share one
//! store. Each panics, naming what broke, when the backend misbehaves.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use quarry_core::{Error, Result, sha256_hex};

use crate::store::{BlobStore, is_sha256};

/// One conformance case: panics, naming what broke, when the store misbehaves.
pub type Case = fn(&dyn BlobStore);

/// Every case, by name.
pub const CASES: &[(&str, Case)] = &[
    (
        "staged_bytes_read_back_whole_and_by_range",
        staged_bytes_read_back_whole_and_by_range,
    ),
    ("an_empty_blob_is_a_blob", an_empty_blob_is_a_blob),
    (
        "absent_blobs_have_no_size_and_delete_quietly",
        absent_blobs_have_no_size_and_delete_quietly,
    ),
    ("deleted_blobs_are_gone", deleted_blobs_are_gone),
    (
        "list_names_every_blob_with_a_recent_time",
        list_names_every_blob_with_a_recent_time,
    ),
    (
        "the_same_bytes_are_stored_once",
        the_same_bytes_are_stored_once,
    ),
    (
        "concurrent_commits_of_the_same_bytes_both_succeed",
        concurrent_commits_of_the_same_bytes_both_succeed,
    ),
    (
        "names_that_are_not_hashes_are_invalid_input",
        names_that_are_not_hashes_are_invalid_input,
    ),
    (
        "an_upload_past_its_limit_is_refused_and_loses_nothing",
        an_upload_past_its_limit_is_refused_and_loses_nothing,
    ),
    (
        "a_dropped_upload_stores_nothing",
        a_dropped_upload_stores_nothing,
    ),
    (
        "the_sweep_leaves_live_uploads_alone",
        the_sweep_leaves_live_uploads_alone,
    ),
    (
        "writers_share_the_lock_the_collector_takes_alone",
        writers_share_the_lock_the_collector_takes_alone,
    ),
];

/// Runs every case on `store`, in order.
pub fn blob_store_conformance(store: &dyn BlobStore) {
    for (name, case) in CASES {
        eprintln!("blob store conformance: {name}");
        case(store);
    }
}

/// One `#[test]` per conformance case, each on a store from `$open` (a closure returning
/// whatever must outlive the test, e.g. a temporary directory, and a `Box<dyn BlobStore>`;
/// or `None` to skip).
#[macro_export]
macro_rules! blob_store_conformance {
    ($open:expr) => {
        $crate::conformance::__blob_store_cases!($open;
            staged_bytes_read_back_whole_and_by_range,
            an_empty_blob_is_a_blob,
            absent_blobs_have_no_size_and_delete_quietly,
            deleted_blobs_are_gone,
            list_names_every_blob_with_a_recent_time,
            the_same_bytes_are_stored_once,
            concurrent_commits_of_the_same_bytes_both_succeed,
            names_that_are_not_hashes_are_invalid_input,
            an_upload_past_its_limit_is_refused_and_loses_nothing,
            a_dropped_upload_stores_nothing,
            the_sweep_leaves_live_uploads_alone,
            writers_share_the_lock_the_collector_takes_alone,
        );
    };
}

/// The tests [`blob_store_conformance!`] expands to: one `#[test]` per case named, each on
/// a store from `$open`.
#[doc(hidden)]
#[macro_export]
macro_rules! __blob_store_cases {
    ($open:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let Some((_keep, store)) = ($open)() else {
                    return;
                };
                $crate::conformance::$case(&*store);
            }
        )*
    };
}

#[doc(hidden)]
pub use __blob_store_cases;

/// The value of `r`, or a panic naming `what` and the error.
fn ok<T>(r: Result<T>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Bytes no other case (or run) uses: a label and a pattern of `len` bytes.
fn bytes_of(label: &str, len: usize) -> Vec<u8> {
    let mut out = label.as_bytes().to_vec();
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    out.extend_from_slice(format!("-{nanos}-").as_bytes());
    let mut x: u32 = 2_463_534_242;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push(x as u8);
    }
    out.truncate(len.max(label.len()));
    out
}

fn stage_and_commit(store: &dyn BlobStore, bytes: &[u8]) -> String {
    let mut staged = ok(store.stage(), "stage");
    for piece in bytes.chunks(64 * 1024 + 7) {
        ok(staged.write_all(piece), "write to a staged upload");
    }
    assert_eq!(staged.len(), bytes.len() as u64, "staged length");
    assert_eq!(staged.sha256(), sha256_hex(bytes), "staged hash");
    ok(store.commit(staged), "commit")
}

fn listed(store: &dyn BlobStore, sha: &str) -> usize {
    ok(store.list(), "list")
        .iter()
        .filter(|(s, _)| s == sha)
        .count()
}

/// Staged bytes go to their SHA-256 and read back whole, by range, and short at the end.
pub fn staged_bytes_read_back_whole_and_by_range(store: &dyn BlobStore) {
    let bytes = bytes_of("ranges", 300_000);
    let sha = stage_and_commit(store, &bytes);
    assert_eq!(sha, sha256_hex(&bytes), "commit returns the SHA-256");
    assert_eq!(
        ok(store.read(&sha), "read"),
        bytes,
        "read returns the bytes"
    );
    let n = bytes.len() as u64;
    assert_eq!(ok(store.size(&sha), "size"), Some(n), "size");
    assert_eq!(ok(store.read_range(&sha, 0, 10), "range at 0"), bytes[..10]);
    assert_eq!(
        ok(store.read_range(&sha, 1000, 5000), "range inside"),
        bytes[1000..6000]
    );
    assert_eq!(
        ok(store.read_range(&sha, n - 10, 100), "range over the end"),
        bytes[bytes.len() - 10..],
        "a range over the end is cut short"
    );
    assert!(
        ok(store.read_range(&sha, n, 10), "range at the end").is_empty(),
        "a range at the end is empty"
    );
    assert!(
        ok(store.read_range(&sha, n + 100, 10), "range past the end").is_empty(),
        "a range past the end is empty"
    );
    assert!(ok(store.read_range(&sha, 5, 0), "empty range").is_empty());
    // `put` of bytes in memory lands at the same kind of address.
    let small = bytes_of("put", 1000);
    let put = ok(store.put(&small), "put");
    assert_eq!(put, sha256_hex(&small));
    assert_eq!(ok(store.read(&put), "read put"), small);
}

/// Zero bytes are a blob like any other.
pub fn an_empty_blob_is_a_blob(store: &dyn BlobStore) {
    let sha = ok(store.put(b""), "put empty");
    assert_eq!(sha, sha256_hex(b""));
    assert_eq!(ok(store.size(&sha), "size"), Some(0));
    assert!(ok(store.read(&sha), "read").is_empty());
    assert!(ok(store.read_range(&sha, 0, 10), "range").is_empty());
    assert_eq!(stage_and_commit(store, b""), sha, "staged empty upload");
}

/// An absent blob has no size, deleting it is fine, reading it is an error.
pub fn absent_blobs_have_no_size_and_delete_quietly(store: &dyn BlobStore) {
    let absent = sha256_hex(&bytes_of("never stored", 64));
    assert_eq!(ok(store.size(&absent), "size of absent"), None);
    ok(store.delete(&absent), "delete of absent");
    assert!(store.read(&absent).is_err(), "reading an absent blob fails");
    assert!(
        store.read_range(&absent, 0, 10).is_err(),
        "reading a range of an absent blob fails"
    );
    assert_eq!(listed(store, &absent), 0);
}

/// A deleted blob has no size, is not listed, and deleting it again is fine.
pub fn deleted_blobs_are_gone(store: &dyn BlobStore) {
    let bytes = bytes_of("deleted", 5000);
    let sha = ok(store.put(&bytes), "put");
    assert_eq!(listed(store, &sha), 1);
    ok(store.delete(&sha), "delete");
    assert_eq!(ok(store.size(&sha), "size after delete"), None);
    assert!(store.read(&sha).is_err(), "read after delete fails");
    assert_eq!(listed(store, &sha), 0, "a deleted blob is not listed");
    ok(store.delete(&sha), "second delete");
}

/// `list` names each stored blob once, with a modification time near now.
pub fn list_names_every_blob_with_a_recent_time(store: &dyn BlobStore) {
    let shas: Vec<String> = (0..3)
        .map(|i| ok(store.put(&bytes_of(&format!("listed {i}"), 100)), "put"))
        .collect();
    let all = ok(store.list(), "list");
    let now = SystemTime::now();
    let skew = Duration::from_secs(600);
    for sha in &shas {
        let found: Vec<_> = all.iter().filter(|(s, _)| s == sha).collect();
        assert_eq!(found.len(), 1, "{sha} listed once");
        let modified = found[0].1;
        assert!(
            modified > now - skew && modified < now + skew,
            "{sha}: modification time {modified:?} is not near now {now:?}"
        );
    }
    for (sha, _) in &all {
        assert!(is_sha256(sha), "list returns only hashes: {sha:?}");
    }
}

/// Storing the same bytes again (staged or put) gives the same address and one blob.
pub fn the_same_bytes_are_stored_once(store: &dyn BlobStore) {
    let bytes = bytes_of("twice", 20_000);
    let a = stage_and_commit(store, &bytes);
    let b = stage_and_commit(store, &bytes);
    let c = ok(store.put(&bytes), "put of stored bytes");
    assert!(a == b && b == c, "one address: {a} {b} {c}");
    assert_eq!(listed(store, &a), 1, "stored once");
    assert_eq!(ok(store.read(&a), "read"), bytes);
}

/// Two threads committing the same bytes at once both succeed, with the same address.
pub fn concurrent_commits_of_the_same_bytes_both_succeed(store: &dyn BlobStore) {
    let bytes = bytes_of("concurrent", 1 << 20);
    let barrier = Barrier::new(2);
    let results: Vec<Result<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut staged = store.stage()?;
                    staged.write_all(&bytes)?;
                    barrier.wait();
                    store.commit(staged)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(_) => panic!("a committing thread panicked"),
            })
            .collect()
    });
    let want = sha256_hex(&bytes);
    for r in results {
        assert_eq!(ok(r, "concurrent commit"), want);
    }
    assert_eq!(ok(store.read(&want), "read"), bytes);
    assert_eq!(listed(store, &want), 1);
}

/// Anything but a lower-case hex SHA-256 is refused as invalid input, touching nothing.
pub fn names_that_are_not_hashes_are_invalid_input(store: &dyn BlobStore) {
    let upper = sha256_hex(b"x").to_uppercase();
    let not_hex = "g".repeat(64);
    let bad = [
        "../../etc/passwd",
        "ABCDEF",
        "",
        upper.as_str(),
        not_hex.as_str(),
    ];
    for name in bad {
        let invalid = |r: Result<()>, what: &str| match r {
            Err(Error::InvalidInput(_)) => {}
            Err(e) => panic!("{what}({name:?}) should be invalid input, was: {e}"),
            Ok(()) => panic!("{what}({name:?}) should fail"),
        };
        invalid(store.read(name).map(drop), "read");
        invalid(store.read_range(name, 0, 1).map(drop), "read_range");
        invalid(store.size(name).map(drop), "size");
        invalid(store.delete(name), "delete");
    }
}

/// Writing past an upload's limit fails with `TooLarge`; the upload cannot be committed,
/// and what was stored before is untouched.
pub fn an_upload_past_its_limit_is_refused_and_loses_nothing(store: &dyn BlobStore) {
    let kept = bytes_of("kept", 100);
    let kept_sha = ok(store.put(&kept), "put");
    let before = ok(store.list(), "list").len();
    let mut staged = ok(store.stage(), "stage").with_limit(8);
    ok(staged.write_all(b"abcd"), "write under the limit");
    ok(staged.write_all(b"efgh"), "write up to the limit");
    match staged.write_all(b"i") {
        Err(Error::TooLarge(_)) => {}
        Err(e) => panic!("past the limit should be TooLarge, was: {e}"),
        Ok(()) => panic!("writing past the limit should fail"),
    }
    match store.commit(staged) {
        Err(Error::TooLarge(_)) => {}
        Err(e) => panic!("committing a refused upload should be TooLarge, was: {e}"),
        Ok(sha) => panic!("a refused upload was committed as {sha}"),
    }
    assert_eq!(ok(store.size(&sha256_hex(b"abcdefgh")), "size"), None);
    assert_eq!(ok(store.size(&sha256_hex(b"abcdefghi")), "size"), None);
    assert_eq!(ok(store.list(), "list").len(), before, "nothing new stored");
    assert_eq!(ok(store.read(&kept_sha), "read kept"), kept);
}

/// An upload dropped before `commit` leaves no blob.
pub fn a_dropped_upload_stores_nothing(store: &dyn BlobStore) {
    let bytes = bytes_of("dropped", 1000);
    let mut staged = ok(store.stage(), "stage");
    ok(staged.write_all(&bytes), "write");
    drop(staged);
    assert_eq!(ok(store.size(&sha256_hex(&bytes)), "size"), None);
}

/// A sweep of staging files leaves an upload being written alone.
pub fn the_sweep_leaves_live_uploads_alone(store: &dyn BlobStore) {
    let bytes = bytes_of("live", 10_000);
    let mut staged = ok(store.stage(), "stage");
    ok(staged.write_all(&bytes[..5000]), "write");
    ok(store.sweep_staging(), "sweep");
    ok(staged.write_all(&bytes[5000..]), "write after the sweep");
    let sha = ok(store.commit(staged), "commit after the sweep");
    assert_eq!(ok(store.read(&sha), "read"), bytes);
}

/// Shared locks are held together; the exclusive lock waits for them.
pub fn writers_share_the_lock_the_collector_takes_alone(store: &dyn BlobStore) {
    let a = ok(store.lock_shared(), "first shared lock");
    let b = ok(store.lock_shared(), "second shared lock");
    let taken = AtomicBool::new(false);
    std::thread::scope(|s| {
        let collector = s.spawn(|| {
            let gc = store.lock_exclusive();
            taken.store(true, Ordering::SeqCst);
            gc.map(drop)
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !taken.load(Ordering::SeqCst),
            "the exclusive lock was taken while shared locks were held"
        );
        drop(a);
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !taken.load(Ordering::SeqCst),
            "the exclusive lock was taken while a shared lock was held"
        );
        drop(b);
        match collector.join() {
            Ok(r) => ok(r, "exclusive lock"),
            Err(_) => panic!("the collector thread panicked"),
        }
    });
    assert!(taken.load(Ordering::SeqCst));
    drop(ok(store.lock_exclusive(), "exclusive lock again"));
}
