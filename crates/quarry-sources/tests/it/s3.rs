//! An S3 source against a real S3-compatible server: the one named by
//! `QUARRY_TEST_S3_ENDPOINT` (moto, started by `scripts/test-services start`, with the
//! `AWS_*` variables it exports), each test in a bucket of its own: objects added,
//! overwritten, deleted and renamed between listings, a prefix, folder markers, pagination,
//! a missing bucket and prefix. Credentials are checked by a moto of the test's own with
//! authentication turned on (the shared one accepts any). Without the endpoint the tests
//! pass with a note, except under CI (`CI=true`), where they fail.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt;
use object_store::ObjectStoreExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use quarry_sources::s3::{DEFAULT_PAGE_SIZE, S3Options, S3Source};
use quarry_sources::{FileMask, Location, Secret, Source, SourceError, open, plan};

use crate::support::{MAX, available, paths, summary, sync_once};

/// The test server's endpoint, or `None` (a note printed) when there is none.
fn endpoint() -> Option<String> {
    let e = std::env::var("QUARRY_TEST_S3_ENDPOINT").unwrap_or_default();
    available(
        "an S3 test server",
        e.is_empty().then_some(
            "QUARRY_TEST_S3_ENDPOINT is not set; start one with \
             `eval \"$(bash scripts/test-services start)\"`",
        ),
    )
    .then_some(e.trim_end_matches('/').to_owned())
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The shared server's credential (moto takes any).
fn secret() -> Secret {
    Secret::new(
        Some(&env_or("AWS_ACCESS_KEY_ID", "test")),
        &env_or("AWS_SECRET_ACCESS_KEY", "test"),
    )
    .unwrap()
}

/// A bucket name no other test (or run) uses.
fn unique_bucket(label: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "qs-{label}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
    .chars()
    .take(63)
    .collect()
}

/// A raw, unsigned request (`PUT /bucket`, IAM calls); returns the status and body.
fn raw(endpoint: &str, head: &str, body: &str) -> (u16, String) {
    let host = endpoint
        .strip_prefix("http://")
        .expect("a plain-http test endpoint");
    let mut conn = TcpStream::connect(host).expect("connect to the S3 test server");
    write!(
        conn,
        "{head}\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn create_bucket(endpoint: &str, bucket: &str) {
    let (status, body) = raw(endpoint, &format!("PUT /{bucket} HTTP/1.1"), "");
    assert_eq!(status, 200, "creating bucket {bucket}: {body}");
}

/// Writes to a bucket the way another program would (object_store, signed).
struct Writer {
    s3: AmazonS3,
    rt: tokio::runtime::Runtime,
}

impl Writer {
    fn new(endpoint: &str, bucket: &str, key_id: &str, secret_key: &str) -> Writer {
        quarry_netguard::ensure_crypto_provider();
        let s3 = AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_bucket_name(bucket)
            .with_access_key_id(key_id)
            .with_secret_access_key(secret_key)
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Writer { s3, rt }
    }

    fn shared(endpoint: &str, bucket: &str) -> Writer {
        let s = secret();
        Writer::new(endpoint, bucket, s.username().unwrap(), s.password())
    }

    fn put(&self, key: &str, bytes: &[u8]) {
        let path = object_store::path::Path::parse(key).unwrap();
        self.rt
            .block_on(self.s3.put(&path, bytes.to_vec().into()))
            .unwrap();
    }

    fn delete(&self, key: &str) {
        let path = object_store::path::Path::parse(key).unwrap();
        self.rt.block_on(self.s3.delete(&path)).unwrap();
    }

    /// Many objects at once (`key-0000` …).
    fn put_many(&self, prefix: &str, n: usize) {
        let s3 = &self.s3;
        self.rt.block_on(async {
            futures_util::stream::iter(0..n)
                .map(|i| async move {
                    let path =
                        object_store::path::Path::parse(format!("{prefix}{i:04}.md")).unwrap();
                    s3.put(&path, format!("# {i}").into_bytes().into()).await
                })
                .buffer_unordered(16)
                .for_each(|r| async move {
                    r.unwrap();
                })
                .await;
        });
    }
}

fn s3_source(endpoint: &str, url: &str, secret: Option<&Secret>, mask: &str) -> Box<dyn Source> {
    let location = Location::s3(url, Some(endpoint), Some("us-east-1")).unwrap();
    open(
        &location,
        secret,
        FileMask::parse(mask).unwrap(),
        Path::new("/nonexistent-work-dir"),
    )
    .unwrap()
}

#[test]
fn objects_added_overwritten_deleted_and_renamed_under_a_prefix() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = unique_bucket("changes");
    create_bucket(&endpoint, &bucket);
    let w = Writer::shared(&endpoint, &bucket);
    w.put("handbook/intro.md", b"# Intro\nWelcome.");
    w.put("handbook/policies/leave.md", b"# Leave\n25 days.");
    w.put("handbook/Caf\u{e9} notes.md", b"# Caf\xc3\xa9");
    w.put("handbook/logo.png", b"not synced by the mask");
    // What consoles make for folders: empty objects whose keys end in `/`.
    for marker in ["handbook/", "handbook/policies/"] {
        let (status, body) = raw(&endpoint, &format!("PUT /{bucket}/{marker} HTTP/1.1"), "");
        assert_eq!(status, 200, "{marker}: {body}");
    }
    // Beside the prefix, not under it.
    w.put("handbook-old/stale.md", b"# Stale");
    w.put("other/x.md", b"# Other");
    let mut source = s3_source(
        &endpoint,
        &format!("s3://{bucket}/handbook"),
        Some(&secret()),
        "**/*.md",
    );

    let (listing, outcome, known) = sync_once(source.as_mut(), &[]);
    assert_eq!(
        paths(&listing),
        vec!["Café notes.md", "intro.md", "policies/leave.md"]
    );
    assert!(listing.problems.is_empty(), "{:?}", listing.problems);
    assert_eq!(outcome.changes.len(), 3);
    let intro = &listing.items[1];
    assert_eq!(intro.size, Some(16));
    assert!(intro.version.starts_with('"'), "an ETag: {intro:?}");
    assert_eq!(
        source.fetch(&listing.items[0], MAX).unwrap(),
        "# Café".as_bytes()
    );

    // Nothing changed: nothing to fetch. The same bytes written again: the same ETag.
    w.put("handbook/intro.md", b"# Intro\nWelcome.");
    let p = plan(&known, &source.list().unwrap());
    assert!(p.fetch.is_empty() && p.gone.is_empty(), "{p:?}");

    // An overwrite, a deletion, a rename (copy and delete), an addition.
    w.put("handbook/intro.md", b"# Intro\nWelcome, all.");
    w.put("handbook/policies/time-off.md", b"# Leave\n25 days.");
    w.delete("handbook/policies/leave.md");
    w.put("handbook/faq.md", b"# FAQ");
    let (_, outcome, _) = sync_once(source.as_mut(), &known);
    assert_eq!(
        summary(&outcome),
        vec![
            "+faq.md",
            "~intro.md",
            "policies/leave.md->policies/time-off.md"
        ]
    );

    // Without a prefix, the whole bucket; unsigned requests reach it too (moto does not
    // check them; a real store answers them only for public buckets).
    let mut whole = s3_source(&endpoint, &format!("s3://{bucket}"), None, "**/*.md");
    assert_eq!(
        paths(&whole.list().unwrap()),
        vec![
            "handbook-old/stale.md",
            "handbook/Café notes.md",
            "handbook/faq.md",
            "handbook/intro.md",
            "handbook/policies/time-off.md",
            "other/x.md"
        ]
    );

    // Fetching what was deleted since: not found. Larger than the limit: too large.
    let gone = listing.items[2].clone();
    assert!(matches!(
        source.fetch(&gone, MAX),
        Err(SourceError::NotFound(_))
    ));
    let mut big = listing.items[1].clone();
    big.size = None;
    assert!(matches!(
        source.fetch(&big, 4),
        Err(SourceError::TooLarge { limit: 4, .. })
    ));
}

#[test]
fn a_missing_bucket_or_prefix_is_not_found_never_empty() {
    let Some(endpoint) = endpoint() else { return };
    let missing = unique_bucket("missing");
    let err = s3_source(&endpoint, &format!("s3://{missing}"), Some(&secret()), "**")
        .list()
        .unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("does not exist"), "{err}");

    let bucket = unique_bucket("prefix");
    create_bucket(&endpoint, &bucket);
    // An empty bucket lists nothing (it is there, and empty).
    let mut empty = s3_source(&endpoint, &format!("s3://{bucket}"), Some(&secret()), "**");
    assert!(empty.list().unwrap().items.is_empty());
    let w = Writer::shared(&endpoint, &bucket);
    w.put("docs/a.md", b"# A");
    let err = s3_source(
        &endpoint,
        &format!("s3://{bucket}/dcos"),
        Some(&secret()),
        "**",
    )
    .list()
    .unwrap_err();
    assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
    assert!(
        err.to_string().contains("no object under the prefix"),
        "{err}"
    );

    // Nothing listening: unavailable.
    let port = quarry_test_http::unused_port();
    let err = s3_source(
        &format!("http://127.0.0.1:{port}"),
        &format!("s3://{bucket}"),
        Some(&secret()),
        "**",
    )
    .list()
    .unwrap_err();
    assert!(matches!(err, SourceError::Unavailable(_)), "{err:?}");
    assert!(err.is_transient());
}

#[test]
fn listings_go_page_by_page() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = unique_bucket("pages");
    create_bucket(&endpoint, &bucket);
    let w = Writer::shared(&endpoint, &bucket);
    w.put_many("small/", 25);
    let mut source = S3Source::new(
        S3Options {
            bucket: bucket.clone(),
            prefix: Some("small".into()),
            endpoint: Some(endpoint.clone()),
            region: None,
            secret: Some(secret()),
            page_size: 7,
        },
        FileMask::default(),
    )
    .unwrap();
    let listing = source.list().unwrap();
    assert_eq!(listing.items.len(), 25);
    assert_eq!(listing.items[0].path, "0000.md");
    assert_eq!(listing.items[24].path, "0024.md");

    // More than a page of the server's own size (1,000).
    w.put_many("large/", DEFAULT_PAGE_SIZE + 5);
    let mut large = s3_source(
        &endpoint,
        &format!("s3://{bucket}/large"),
        Some(&secret()),
        "**",
    );
    let listing = large.list().unwrap();
    assert_eq!(listing.items.len(), DEFAULT_PAGE_SIZE + 5);
    let mut sorted = paths(&listing);
    sorted.dedup();
    assert_eq!(sorted.len(), DEFAULT_PAGE_SIZE + 5, "no key twice");
}

/// A moto server of this test's own, with IAM authentication on: a user with an access key
/// and a policy that allows S3, and a bucket (made in the four unauthenticated requests
/// moto allows before checking every request).
struct PrivateMoto {
    child: Child,
    endpoint: String,
    key_id: String,
    secret_key: String,
}

impl Drop for PrivateMoto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_server() -> Option<PathBuf> {
    let venv = std::env::var_os("QUARRY_MOTO_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/quarry-moto-venv"))
        })?;
    Some(venv.join("bin/moto_server")).filter(|p| p.is_file())
}

impl PrivateMoto {
    fn start(bucket: &str) -> Option<PrivateMoto> {
        let server = moto_server();
        if !available(
            "moto_server (the venv scripts/test-services installs)",
            server
                .is_none()
                .then_some("not in $QUARRY_MOTO_VENV or ~/.cache/quarry-moto-venv"),
        ) {
            return None;
        }
        let port = quarry_test_http::unused_port();
        let child = Command::new(server?)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "4")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let mut moto = PrivateMoto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            key_id: String::new(),
            secret_key: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        // IAM calls are routed by the credential scope of an Authorization header, which
        // moto does not check for its first four requests.
        let iam = |body: &str| {
            let (status, answer) = raw(
                &moto.endpoint,
                "POST / HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
                 Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20250101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
                &format!("{body}&Version=2010-05-08"),
            );
            assert_eq!(status, 200, "{body}: {answer}");
            answer
        };
        iam("Action=CreateUser&UserName=reader");
        let key = iam("Action=CreateAccessKey&UserName=reader");
        let between = |a: &str, b: &str| {
            key.split_once(a)
                .and_then(|(_, rest)| rest.split_once(b))
                .map(|(v, _)| v.to_owned())
                .unwrap()
        };
        moto.key_id = between("<AccessKeyId>", "</AccessKeyId>");
        moto.secret_key = between("<SecretAccessKey>", "</SecretAccessKey>");
        let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#;
        let encoded: String = policy
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        iam(&format!(
            "Action=PutUserPolicy&UserName=reader&PolicyName=s3&PolicyDocument={encoded}"
        ));
        create_bucket(&moto.endpoint, bucket);
        Some(moto)
    }
}

#[test]
fn a_private_bucket_needs_its_key_and_never_shows_the_secret() {
    if endpoint().is_none() {
        return;
    }
    let bucket = "private-docs";
    let Some(moto) = PrivateMoto::start(bucket) else {
        return;
    };
    let w = Writer::new(&moto.endpoint, bucket, &moto.key_id, &moto.secret_key);
    w.put("plan.md", b"# Plan");

    let right = Secret::new(Some(&moto.key_id), &moto.secret_key).unwrap();
    let mut source = s3_source(
        &moto.endpoint,
        &format!("s3://{bucket}"),
        Some(&right),
        "**",
    );
    let listing = source.list().unwrap();
    assert_eq!(paths(&listing), vec!["plan.md"]);
    assert_eq!(source.fetch(&listing.items[0], MAX).unwrap(), b"# Plan");

    let wrong_secret = "wrongSecretKey/0123456789abcdefghijKLMN";
    for secret in [
        Secret::new(Some(&moto.key_id), wrong_secret).unwrap(),
        Secret::new(Some("AKIAUNKNOWNKEY000000"), wrong_secret).unwrap(),
    ] {
        let err = s3_source(
            &moto.endpoint,
            &format!("s3://{bucket}"),
            Some(&secret),
            "**",
        )
        .list()
        .unwrap_err();
        assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
        assert!(err.to_string().contains("refused the credential"), "{err}");
        assert!(!err.to_string().contains(wrong_secret), "{err}");
        assert!(!format!("{err:?}").contains(wrong_secret), "{err:?}");
        // Fetching with it is refused the same way.
        let mut source = s3_source(
            &moto.endpoint,
            &format!("s3://{bucket}"),
            Some(&secret),
            "**",
        );
        let err = source.fetch(&listing.items[0], MAX).unwrap_err();
        assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
    }
}
