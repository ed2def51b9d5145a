//! The blob store conformance suite (`quarry_blobs::conformance`) and the object-store cases
//! on an S3-compatible server: the one named by `QUARRY_TEST_S3_ENDPOINT` (with the `AWS_*`
//! variables `scripts/test-services start` exports; it runs moto), each test in a bucket of
//! its own. Without it the tests pass with a note, except under CI (`CI=true`), where they
//! fail.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use quarry_blobs::{BlobLock, BlobLocks, BlobStore};
use quarry_blobs_object::ObjectBlobStore;
use quarry_core::{Error, Result, sha256_hex};

/// Locks within this process: what a test needs (a deployment of several nodes passes a
/// lock they all share).
#[derive(Default)]
struct ProcessLocks {
    state: Arc<(Mutex<(usize, bool)>, Condvar)>,
}

struct Held {
    state: Arc<(Mutex<(usize, bool)>, Condvar)>,
    exclusive: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        let (m, cv) = &*self.state;
        let mut s = m.lock().unwrap_or_else(|p| p.into_inner());
        if self.exclusive {
            s.1 = false;
        } else {
            s.0 -= 1;
        }
        cv.notify_all();
    }
}

impl BlobLocks for ProcessLocks {
    fn shared(&self) -> Result<BlobLock> {
        let (m, cv) = &*self.state;
        let mut s = m.lock().unwrap();
        while s.1 {
            s = cv.wait(s).unwrap();
        }
        s.0 += 1;
        Ok(BlobLock::new(Box::new(Held {
            state: self.state.clone(),
            exclusive: false,
        })))
    }

    fn exclusive(&self) -> Result<BlobLock> {
        let (m, cv) = &*self.state;
        let mut s = m.lock().unwrap();
        while s.1 || s.0 > 0 {
            s = cv.wait(s).unwrap();
        }
        s.1 = true;
        Ok(BlobLock::new(Box::new(Held {
            state: self.state.clone(),
            exclusive: true,
        })))
    }
}

/// The test server's endpoint, or `None` (a note printed) when there is none.
fn endpoint() -> Option<String> {
    match std::env::var("QUARRY_TEST_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "QUARRY_TEST_S3_ENDPOINT is not set: CI runs the S3 blob tests \
                 (start a server with `eval \"$(bash scripts/test-services start)\"`)"
            );
            eprintln!("skipped: QUARRY_TEST_S3_ENDPOINT is not set");
            None
        }
    }
}

/// A bucket name no other test (or run) uses.
fn unique_bucket(label: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let label: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(20)
        .collect();
    format!(
        "qt-{label}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
    .chars()
    .take(63)
    .collect()
}

/// `PUT /bucket` with a raw request (the server accepts it unsigned).
fn create_bucket(endpoint: &str, bucket: &str) {
    let host = endpoint
        .strip_prefix("http://")
        .expect("a plain-http test endpoint")
        .trim_end_matches('/');
    let mut conn = TcpStream::connect(host).expect("connect to the S3 test server");
    write!(
        conn,
        "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let status = answer.lines().next().unwrap_or_default();
    assert!(
        status.contains(" 200"),
        "creating bucket {bucket}: {status}"
    );
}

/// A store on a fresh bucket (with `prefix`), and its staging directory.
fn fresh_store(label: &str, prefix: &str) -> Option<(tempfile::TempDir, ObjectBlobStore)> {
    fresh_store_in(label, prefix).map(|(dir, _, store)| (dir, store))
}

/// The ETag of an object, asked with object_store directly.
fn raw_etag(bucket: &str, key: &str) -> String {
    use object_store::ObjectStoreExt;
    let s3 = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let meta = rt
        .block_on(s3.head(&object_store::path::Path::from(key)))
        .unwrap();
    meta.e_tag.unwrap_or_default()
}

/// The `AWS_*` settings of the test server from this process's environment (the store itself
/// never reads the environment: its caller passes them).
fn env_settings() -> Vec<(String, String)> {
    quarry_blobs_object::ENV_SETTINGS
        .iter()
        .filter_map(|n| Some(((*n).to_owned(), std::env::var(n).ok()?)))
        .collect()
}

/// Opens a store with [`env_settings`] and `extra` after them (taking precedence).
fn open_store(
    url: &str,
    dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> quarry_core::Result<ObjectBlobStore> {
    let env = env_settings();
    let mut settings: Vec<(&str, &str)> =
        env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    settings.extend_from_slice(extra);
    ObjectBlobStore::open(url, dir, Arc::new(ProcessLocks::default()), &settings)
}

/// [`fresh_store`], with the bucket's name.
fn fresh_store_in(
    label: &str,
    prefix: &str,
) -> Option<(tempfile::TempDir, String, ObjectBlobStore)> {
    let endpoint = endpoint()?;
    let bucket = unique_bucket(label);
    create_bucket(&endpoint, &bucket);
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&format!("s3://{bucket}{prefix}"), dir.path(), &[])
        .expect("open the store on the test server");
    Some((dir, bucket, store))
}

quarry_blobs::blob_store_conformance!(|| {
    let (dir, store) = fresh_store("conformance", "")?;
    Some((dir, Box::new(store) as Box<dyn BlobStore>))
});

#[test]
fn the_whole_suite_under_a_prefix() {
    let Some((_dir, store)) = fresh_store("prefixed", "/some/prefix") else {
        return;
    };
    quarry_blobs::conformance::blob_store_conformance(&store);
    assert_eq!(
        store.name().split('/').skip(3).collect::<Vec<_>>(),
        ["some", "prefix"]
    );
}

#[test]
fn a_file_past_the_multipart_threshold_round_trips() {
    let Some((dir, bucket, store)) = fresh_store_in("multipart", "/p") else {
        return;
    };
    let store = store.with_multipart_threshold(5 * 1024 * 1024);
    // 12 MiB and a bit: three parts (5, 5, 2 MiB), streamed from the staging file.
    let len = 12 * 1024 * 1024 + 12_345;
    let mut bytes = Vec::with_capacity(len);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while bytes.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    bytes.truncate(len);
    let mut staged = store.stage().unwrap();
    for piece in bytes.chunks(1 << 20) {
        staged.write_all(piece).unwrap();
    }
    let sha = store.commit(staged).unwrap();
    assert_eq!(sha, sha256_hex(&bytes));
    assert_eq!(store.size(&sha).unwrap(), Some(len as u64));
    let back = store.read(&sha).unwrap();
    assert!(back == bytes, "the bytes read back differ");
    assert_eq!(sha256_hex(&back), sha);
    // It went up in three parts: S3 gives a multipart object the ETag `"<md5 of md5s>-3"`.
    let etag = raw_etag(&bucket, &format!("p/{}/{}", &sha[..2], &sha[2..]));
    assert!(etag.trim_matches('"').ends_with("-3"), "ETag {etag}");
    let mid = 5 * 1024 * 1024 - 10;
    assert_eq!(
        store.read_range(&sha, mid as u64, 20).unwrap(),
        bytes[mid..mid + 20]
    );
    // Committing the same large bytes again finds them there.
    let mut again = store.stage().unwrap();
    again.write_all(&bytes).unwrap();
    assert_eq!(store.commit(again).unwrap(), sha);
    assert_eq!(store.list().unwrap().len(), 1);
    // `put` of large bytes in memory goes the same way.
    bytes[0] ^= 1;
    let other = store.put(&bytes).unwrap();
    assert_eq!(store.read(&other).unwrap(), bytes);
    // No staging file is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_missing_bucket_is_a_clear_error_at_open() {
    let Some(_) = endpoint() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bucket = unique_bucket("missing");
    let err = open_store(&format!("s3://{bucket}/x"), dir.path(), &[])
        .expect_err("the bucket does not exist");
    let text = err.to_string();
    eprintln!("{text}");
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    assert!(text.contains(&bucket), "{text}");
    assert!(
        text.contains("the bucket does not exist: create it"),
        "{text}"
    );
    assert!(text.contains("127.0.0.1"), "names the endpoint: {text}");
}

#[test]
fn an_unreachable_endpoint_is_a_clear_error_at_open_without_secrets() {
    let Some(_) = endpoint() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let err = open_store(
        "s3://some-bucket/x",
        dir.path(),
        &[
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret-key"),
        ],
    )
    .expect_err("nothing listens on port 1");
    let text = err.to_string();
    eprintln!("{text} (after {:?})", started.elapsed());
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    assert!(text.contains("\"some-bucket\""), "{text}");
    assert!(text.contains("http://127.0.0.1:1"), "{text}");
    assert!(
        text.contains("AWS_ENDPOINT_URL"),
        "says what to fix: {text}"
    );
    assert!(!text.contains("very-secret-key"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "gave up in time"
    );
}

#[test]
fn a_plain_http_endpoint_needs_allow_http() {
    let Some(_) = endpoint() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let err = open_store(
        "s3://some-bucket",
        dir.path(),
        &[("AWS_ALLOW_HTTP", "false")],
    )
    .expect_err("http is not allowed");
    eprintln!("{err}");
    assert!(
        err.to_string()
            .contains("plain http, which is refused unless AWS_ALLOW_HTTP=true"),
        "{err}"
    );
}

#[test]
fn a_malformed_url_is_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    for url in ["https://bucket/x", "s3://Bad_Bucket", "s3://b"] {
        let err = open_store(url, dir.path(), &[]).expect_err("malformed");
        assert!(matches!(err, Error::InvalidInput(_)), "{url}: {err:?}");
    }
}

#[test]
fn works_from_a_blocking_thread_of_another_runtime() {
    let Some((_dir, store)) = fresh_store("in-runtime", "") else {
        return;
    };
    let store = Arc::new(store);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let sha = rt.block_on(async {
        let s = store.clone();
        tokio::task::spawn_blocking(move || s.put(b"from spawn_blocking"))
            .await
            .unwrap()
    });
    assert_eq!(store.read(&sha.unwrap()).unwrap(), b"from spawn_blocking");
    // Dropping the store inside another runtime's context does not panic.
    rt.block_on(async move { drop(store) });
}
