//! Quarry's blobs in S3-compatible object storage: [`ObjectBlobStore`] implements
//! [`quarry_blobs::BlobStore`] over Apache Arrow's `object_store` crate, so several nodes can
//! share one bucket (AWS S3, MinIO, Ceph RGW, R2, …). It is the one blob store on
//! `object_store` (with its S3 client on reqwest, rustls and ring); `quarry-sources` links
//! `object_store` too, for its S3 source.
//!
//! A store is named by a URL, `s3://bucket` or `s3://bucket/some/prefix`; credentials,
//! region and endpoint are settings named as the usual environment variables, which the
//! caller passes (the `quarry` CLI reads them from its environment): `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY` (`AWS_SESSION_TOKEN`), `AWS_REGION` (else `AWS_DEFAULT_REGION`,
//! else `us-east-1`), `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`) for an S3-compatible
//! server, `AWS_ALLOW_HTTP=true` for a plain-http endpoint on a private network. Every other
//! `AWS_*` setting `object_store` knows (e.g. `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`) is read
//! too. [`ObjectBlobStore::open`] lists the bucket once and fails with what to fix, naming
//! the bucket and endpoint (never a secret), when it cannot.
//!
//! Invariants:
//!
//! * **Layout.** A blob is the object `<prefix>/<first two hex>/<remaining 62 hex>` of its
//!   SHA-256, the layout of `FsBlobStore`. Nothing else under the prefix is listed.
//! * **Uploads are staged locally**, hashed while they stream, in a [`quarry_blobs::Staging`]
//!   directory of this node; `commit` uploads the finished file. Up to the multipart
//!   threshold (16 MiB by default) that is one `PUT` with `If-None-Match: *`: when two
//!   uploads of the same bytes race, the loser is told the object exists, which is success
//!   (the bytes are the same). Larger files go up as a multipart upload streamed from the
//!   file (a few parts in memory at a time), after a `HEAD` finds them absent; two such
//!   uploads racing both complete, and the last one writes the same bytes again. An existing
//!   object's modification time is not refreshed when the same bytes are committed again:
//!   the lock protocol below is what keeps a collector away from blobs being referenced.
//! * **Garbage collection locks** come from the [`BlobLocks`] the creator passes: a file lock
//!   protects nothing across machines, so **a deployment of several nodes must pass a lock
//!   they all share** (e.g. a database's advisory lock); [`quarry_blobs::FileBlobLocks`]
//!   serves one machine. `sweep_staging` sweeps this node's staging directory only.
//! * **Blocking.** The methods block; they run their requests on a small runtime the store
//!   owns (two worker threads), so they can be called from any thread, including a blocking
//!   thread of another runtime. Calling them on an async worker thread blocks that worker.

/// The settings a caller normally takes from its environment and passes to
/// [`ObjectBlobStore::open`] (the `quarry` CLI declares the same variables in its
/// configuration table).
pub const ENV_SETTINGS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ALLOW_HTTP",
];

use std::future::Future;
use std::io::Read;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};
use quarry_blobs::{BlobLock, BlobLocks, BlobStore, Staged, StagedFile, Staging, is_sha256};
use quarry_core::{Error, Result, sha256_hex};
use tokio::runtime::Runtime;

/// Files larger than this go up as multipart uploads (by default).
pub const DEFAULT_MULTIPART_THRESHOLD: u64 = 16 * 1024 * 1024;

/// S3's smallest part (all but the last) and the most parts one upload may have.
const MIN_PART: u64 = 5 * 1024 * 1024;
const MAX_PARTS: u64 = 10_000;
/// The part size aimed at, and how many parts are in flight (so in memory) at once.
const PART: u64 = 8 * 1024 * 1024;
const PARTS_IN_FLIGHT: usize = 3;

/// Blobs in an S3-compatible bucket (see the crate docs).
pub struct ObjectBlobStore {
    s3: Arc<AmazonS3>,
    prefix: Option<Path>,
    /// `s3://bucket[/prefix]`, for messages.
    name: String,
    staging: Staging,
    locks: Arc<dyn BlobLocks>,
    runtime: Option<Runtime>,
    multipart_threshold: u64,
    /// Values that must never appear in an error (the secret key, the session token).
    secrets: Vec<String>,
}

impl std::fmt::Debug for ObjectBlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectBlobStore")
            .field("name", &self.name)
            .field("staging", &self.staging.dir())
            .finish_non_exhaustive()
    }
}

/// Bucket and prefix of an `s3://bucket[/prefix]` URL.
fn parse_url(url: &str) -> Result<(String, Option<Path>)> {
    // Shown without any user or password it carries.
    let shown = match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) if url.contains('@') => "(not shown: it has an @)".to_owned(),
        Err(_) => url.to_owned(),
    };
    let bad = |why: &str| {
        Error::invalid(format!(
            "invalid blob storage URL {shown:?}: {why} (expected s3://bucket or s3://bucket/prefix)"
        ))
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if parsed.scheme() != "s3" {
        return Err(bad(&format!("the scheme is {:?}, not s3", parsed.scheme())));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "credentials do not belong in the URL (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
        ));
    }
    if parsed.port().is_some() {
        return Err(bad(
            "the bucket cannot have a port (set AWS_ENDPOINT_URL for an S3-compatible server)",
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("no query or fragment is allowed"));
    }
    let bucket = parsed.host_str().unwrap_or_default().to_owned();
    let valid_bucket = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !valid_bucket {
        return Err(bad(&format!(
            "{bucket:?} is not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens)"
        )));
    }
    let raw = parsed.path().trim_matches('/');
    let prefix = if raw.is_empty() {
        None
    } else {
        let decoded = percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| bad("the prefix is not UTF-8"))?;
        let path = Path::parse(decoded.as_ref())
            .map_err(|e| bad(&format!("the prefix is not a valid object path: {e}")))?;
        Some(path)
    };
    Ok((bucket, prefix))
}

/// The endpoint as people should read it: without user or password.
fn display_endpoint(builder: &AmazonS3Builder) -> String {
    let endpoint = builder
        .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
        .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::Endpoint));
    match endpoint {
        Some(e) => match url::Url::parse(&e) {
            Ok(mut u) => {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.to_string().trim_end_matches('/').to_owned()
            }
            Err(_) => "an unparseable AWS_ENDPOINT_URL".to_owned(),
        },
        None => {
            let region = builder
                .get_config_value(&AmazonS3ConfigKey::Region)
                .unwrap_or_else(|| "us-east-1".to_owned());
            format!("AWS S3 ({region})")
        }
    }
}

impl ObjectBlobStore {
    /// Opens the blobs at `url` (`s3://bucket[/prefix]`) with `settings` named as the usual
    /// environment variables (`("AWS_ENDPOINT_URL", "http://…")`, `("AWS_REGION", …)`,
    /// credentials; the caller reads them: this crate never reads the environment), staging
    /// uploads in `staging_dir` (created; what a crashed upload left there is removed) and
    /// taking its garbage-collection locks from `locks`, which every node sharing the bucket
    /// must share. Lists the bucket once: an unreachable endpoint, a missing bucket or
    /// refused credentials are an [`Error::Unavailable`] saying what to fix; a malformed URL
    /// or an unknown setting is [`Error::InvalidInput`].
    pub fn open(
        url: &str,
        staging_dir: &FsPath,
        locks: Arc<dyn BlobLocks>,
        settings: &[(&str, &str)],
    ) -> Result<Self> {
        let (bucket, prefix) = parse_url(url)?;
        let mut builder = AmazonS3Builder::new();
        let mut secrets: Vec<String> = Vec::new();
        for (name, value) in settings {
            let key: AmazonS3ConfigKey = name.to_ascii_lowercase().parse().map_err(|_| {
                Error::invalid(format!("{name} is not an S3 setting object_store knows"))
            })?;
            if matches!(
                key,
                AmazonS3ConfigKey::SecretAccessKey | AmazonS3ConfigKey::Token
            ) {
                secrets.push((*value).to_owned());
            }
            builder = builder.with_config(key, *value);
        }
        secrets.retain(|s| s.len() >= 4);
        let builder = builder.with_bucket_name(&bucket);
        let endpoint = display_endpoint(&builder);
        let name = match &prefix {
            Some(p) => format!("s3://{bucket}/{p}"),
            None => format!("s3://{bucket}"),
        };
        let redact = |text: String| redact(text, &secrets);
        let unusable = |why: String| {
            Error::Unavailable(redact(format!(
                "blob storage {name} (bucket {bucket:?} at {endpoint}) cannot be used: {why}"
            )))
        };

        quarry_netguard::ensure_crypto_provider();
        // The check at open gives up quickly; the store itself keeps object_store's patient
        // defaults (retries with backoff for up to three minutes).
        let probe = builder
            .clone()
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 2,
                retry_timeout: Duration::from_secs(15),
            })
            .build()
            .map_err(|e| unusable(format!("{e}; check the AWS_* settings")))?;
        let s3 = builder
            .build()
            .map_err(|e| unusable(format!("{e}; check the AWS_* settings")))?;

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("quarry-blobs-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::Storage(format!("starting the object storage runtime: {e}")))?;
        let list_prefix = prefix.clone();
        let first = run_on(&runtime, async move {
            probe.list(list_prefix.as_ref()).next().await.transpose()
        })?;
        if let Err(e) = first {
            let text = e.to_string();
            let hint = match &e {
                _ if matches!(e, object_store::Error::NotFound { .. })
                    || text.contains("NoSuchBucket") =>
                {
                    "the bucket does not exist: create it, or correct the bucket in the URL \
                     (and AWS_ENDPOINT_URL if it is on another server)"
                }
                object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. } => {
                    "the credentials were refused: check AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), and that they may list \
                     the bucket"
                }
                _ if endpoint.starts_with("http://") && text.contains("builder error") => {
                    "the endpoint is plain http, which is refused unless AWS_ALLOW_HTTP=true \
                     (only on a private network), or use https"
                }
                _ => {
                    "check AWS_ENDPOINT_URL (AWS_ALLOW_HTTP=true for a plain-http endpoint), \
                     AWS_REGION, the credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                     and that the bucket exists"
                }
            };
            return Err(unusable(format!("{hint} ({text})")));
        }

        let staging = Staging::open(staging_dir)?;
        staging.sweep()?;
        Ok(ObjectBlobStore {
            s3: Arc::new(s3),
            prefix,
            name,
            staging,
            locks,
            runtime: Some(runtime),
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            secrets,
        })
    }

    /// Uploads larger than `bytes` (at least 5 MiB, S3's smallest part) go up in parts.
    pub fn with_multipart_threshold(mut self, bytes: u64) -> Self {
        self.multipart_threshold = bytes.max(MIN_PART);
        self
    }

    /// `s3://bucket[/prefix]`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The object key of a blob.
    fn key(&self, sha256: &str) -> Result<Path> {
        if !is_sha256(sha256) {
            return Err(Error::invalid(format!("{sha256:?} is not a SHA-256")));
        }
        let parts = [&sha256[..2], &sha256[2..]];
        Ok(match &self.prefix {
            Some(p) => p.clone().join(parts[0]).join(parts[1]),
            None => Path::from_iter(parts),
        })
    }

    /// Runs a request on the store's runtime and waits for it.
    fn run<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> Result<T> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| Error::Storage("the object storage runtime is gone".into()))?;
        run_on(runtime, fut)
    }

    /// An `object_store` error as Quarry's: an absent object is an I/O `NotFound` (as
    /// `FsBlobStore` reports it), anything else a storage error; never with a secret.
    fn error(&self, what: &str, key: &Path, e: object_store::Error) -> Error {
        let text = redact(e.to_string(), &self.secrets);
        let place = PathBuf::from(format!("{}/{key}", self.bucket_url()));
        match e {
            object_store::Error::NotFound { .. } => Error::io(
                place,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such blob"),
            ),
            _ => Error::Storage(format!("{what} {}: {text}", place.display())),
        }
    }

    /// `s3://bucket` (the prefix is part of every key).
    fn bucket_url(&self) -> &str {
        match &self.prefix {
            Some(p) => self
                .name
                .strip_suffix(p.as_ref())
                .map_or(&*self.name, |s| s.trim_end_matches('/')),
            None => &self.name,
        }
    }

    /// Uploads a finished staging file to `key`.
    fn upload(&self, key: &Path, mut file: StagedFile) -> Result<()> {
        if file.len() > self.multipart_threshold {
            return self.upload_in_parts(key, file);
        }
        let mut bytes = Vec::with_capacity(usize::try_from(file.len()).unwrap_or(0));
        file.file()
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(file.path(), e))?;
        drop(file);
        self.put_bytes(key, bytes)
    }

    /// One `PUT` that creates the object; an existing object has the same bytes, so it is
    /// left as it is.
    fn put_bytes(&self, key: &Path, bytes: Vec<u8>) -> Result<()> {
        let s3 = self.s3.clone();
        let location = key.clone();
        let payload = PutPayload::from(bytes);
        let result = self.run(async move {
            let create = PutOptions::from(PutMode::Create);
            match s3.put_opts(&location, payload.clone(), create).await {
                // A store with conditional writes turned off (`AWS_CONDITIONAL_PUT=disabled`):
                // look first, then write (the same bytes, should another writer win).
                Err(object_store::Error::NotImplemented { .. }) => match s3.head(&location).await {
                    Ok(_) => Ok(()),
                    Err(object_store::Error::NotFound { .. }) => {
                        s3.put(&location, payload).await.map(drop)
                    }
                    Err(e) => Err(e),
                },
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(()),
                r => r.map(drop),
            }
        })?;
        result.map_err(|e| self.error("writing", key, e))
    }

    /// A multipart upload streamed from the file, a few parts in flight; skipped when the
    /// object is already there.
    fn upload_in_parts(&self, key: &Path, mut file: StagedFile) -> Result<()> {
        if self.exists(key)? {
            return Ok(());
        }
        let s3 = self.s3.clone();
        let location = key.clone();
        let mut upload = self
            .run(async move { s3.put_multipart(&location).await })?
            .map_err(|e| self.error("starting an upload of", key, e))?;
        let part = PART
            .min(self.multipart_threshold)
            .max(MIN_PART)
            .max(file.len().div_ceil(MAX_PARTS));
        let part = usize::try_from(part).unwrap_or(usize::MAX);
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| Error::Storage("the object storage runtime is gone".into()))?;
        let mut in_flight = std::collections::VecDeque::new();
        let mut sent: Result<()> = Ok(());
        let mut remaining = file.len();
        while remaining > 0 && sent.is_ok() {
            if in_flight.len() >= PARTS_IN_FLIGHT
                && let Some(oldest) = in_flight.pop_front()
            {
                sent = self.finish_part(key, oldest);
                if sent.is_err() {
                    break;
                }
            }
            let len = usize::try_from(remaining).unwrap_or(usize::MAX).min(part);
            let mut buf = vec![0; len];
            if let Err(e) = file.file().read_exact(&mut buf) {
                sent = Err(Error::io(file.path(), e));
                break;
            }
            remaining -= len as u64;
            in_flight.push_back(runtime.spawn(upload.put_part(PutPayload::from(buf))));
        }
        while let Some(h) = in_flight.pop_front() {
            let r = self.finish_part(key, h);
            if sent.is_ok() {
                sent = r;
            }
        }
        drop(file);
        let completed = self.run(async move {
            match sent {
                Ok(()) => match upload.complete().await {
                    Ok(_) => Ok(Ok(())),
                    Err(e) => {
                        let _ = upload.abort().await;
                        Ok(Err(e))
                    }
                },
                Err(e) => {
                    let _ = upload.abort().await;
                    Err(e)
                }
            }
        })?;
        completed?.map_err(|e| self.error("finishing the upload of", key, e))
    }

    fn finish_part(
        &self,
        key: &Path,
        handle: tokio::task::JoinHandle<object_store::Result<()>>,
    ) -> Result<()> {
        match self.run(handle)? {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.error("uploading a part of", key, e)),
            Err(e) => Err(Error::Storage(format!("uploading a part of {key}: {e}"))),
        }
    }

    fn exists(&self, key: &Path) -> Result<bool> {
        Ok(self.head(key)?.is_some())
    }

    fn head(&self, key: &Path) -> Result<Option<u64>> {
        let s3 = self.s3.clone();
        let location = key.clone();
        match self.run(async move { s3.head(&location).await })? {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error("looking up", key, e)),
        }
    }
}

/// Runs `fut` on `runtime` and waits for it on this thread (which never drives a runtime,
/// so this works on any thread).
fn run_on<T: Send + 'static>(
    runtime: &Runtime,
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| Error::Storage("an object storage request ended without an answer".into()))
}

/// `text` with every secret replaced.
fn redact(mut text: String, secrets: &[String]) -> String {
    for s in secrets {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "[redacted]");
        }
    }
    text
}

impl Drop for ObjectBlobStore {
    fn drop(&mut self) {
        // Dropping a runtime waits for its threads, which may not be done inside another
        // runtime's context; letting them go in the background is always allowed.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl BlobStore for ObjectBlobStore {
    fn stage(&self) -> Result<Staged> {
        self.staging.stage()
    }

    fn commit(&self, staged: Staged) -> Result<String> {
        let file = staged.finish()?;
        let sha = file.sha256().to_owned();
        let key = self.key(&sha)?;
        self.upload(&key, file)?;
        Ok(sha)
    }

    fn put(&self, bytes: &[u8]) -> Result<String> {
        let sha = sha256_hex(bytes);
        let key = self.key(&sha)?;
        if bytes.len() as u64 > self.multipart_threshold {
            let mut staged = self.stage()?;
            staged.write_all(bytes)?;
            return self.commit(staged);
        }
        self.put_bytes(&key, bytes.to_vec())?;
        Ok(sha)
    }

    fn size(&self, sha256: &str) -> Result<Option<u64>> {
        let key = self.key(sha256)?;
        self.head(&key)
    }

    fn read_range(&self, sha256: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let key = self.key(sha256)?;
        if len == 0 {
            return match self.head(&key)? {
                Some(_) => Ok(Vec::new()),
                None => Err(self.error(
                    "reading",
                    &key,
                    object_store::Error::NotFound {
                        path: key.to_string(),
                        source: "no such blob".into(),
                    },
                )),
            };
        }
        let s3 = self.s3.clone();
        let location = key.clone();
        let end = offset.saturating_add(len as u64);
        match self.run(async move { s3.get_range(&location, offset..end).await })? {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(e @ object_store::Error::NotFound { .. }) => Err(self.error("reading", &key, e)),
            // A range that starts at or past the end is refused (416): nothing to read there,
            // as from a file. Any other failure stays one.
            Err(e) => match self.head(&key)? {
                Some(size) if offset >= size => Ok(Vec::new()),
                _ => Err(self.error("reading", &key, e)),
            },
        }
    }

    fn read(&self, sha256: &str) -> Result<Vec<u8>> {
        let key = self.key(sha256)?;
        let s3 = self.s3.clone();
        let location = key.clone();
        let result = self.run(async move { s3.get(&location).await?.bytes().await })?;
        result
            .map(|b| b.to_vec())
            .map_err(|e| self.error("reading", &key, e))
    }

    fn delete(&self, sha256: &str) -> Result<()> {
        let key = self.key(sha256)?;
        let s3 = self.s3.clone();
        let location = key.clone();
        match self.run(async move { s3.delete(&location).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("deleting", &key, e)),
        }
    }

    fn list(&self) -> Result<Vec<(String, SystemTime)>> {
        let s3 = self.s3.clone();
        let prefix = self.prefix.clone();
        let depth = prefix.as_ref().map_or(0, |p| p.parts().count());
        let listed = self.run(async move {
            s3.list(prefix.as_ref())
                .try_collect::<Vec<object_store::ObjectMeta>>()
                .await
        })?;
        let listed = listed.map_err(|e| {
            Error::Storage(format!(
                "listing {}: {}",
                self.name,
                redact(e.to_string(), &self.secrets)
            ))
        })?;
        let mut out = Vec::with_capacity(listed.len());
        for meta in listed {
            let parts: Vec<_> = meta.location.parts().collect();
            if parts.len() != depth + 2 {
                continue;
            }
            let sha = format!("{}{}", parts[depth].as_ref(), parts[depth + 1].as_ref());
            if parts[depth].as_ref().len() == 2 && is_sha256(&sha) {
                out.push((sha, SystemTime::from(meta.last_modified)));
            }
        }
        Ok(out)
    }

    fn lock_shared(&self) -> Result<BlobLock> {
        self.locks.shared()
    }

    fn lock_exclusive(&self) -> Result<BlobLock> {
        self.locks.exclusive()
    }

    fn sweep_staging(&self) -> Result<u64> {
        self.staging.sweep()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket_and_an_optional_prefix() {
        let (b, p) = parse_url("s3://my-bucket").unwrap();
        assert_eq!((b.as_str(), p), ("my-bucket", None));
        let (b, p) = parse_url("s3://my.bucket/a/b/").unwrap();
        assert_eq!(b, "my.bucket");
        assert_eq!(p.unwrap().as_ref(), "a/b");
        let (_, p) = parse_url("s3://bkt/with%20space").unwrap();
        assert_eq!(p.unwrap().parts().count(), 1);
        for bad in [
            "",
            "bucket",
            "http://bucket/x",
            "s3://",
            "s3://UPPER",
            "s3://ab",
            "s3://key:secret@bucket",
            "s3://bucket:9000",
            "s3://bucket/a//b",
            "s3://bucket/x?region=eu",
            "s3://-bucket",
        ] {
            match parse_url(bad) {
                Err(Error::InvalidInput(msg)) => {
                    assert!(msg.contains("s3://bucket"), "{msg}");
                    assert!(!msg.contains("secret@"), "{msg}");
                }
                other => panic!("{bad:?} should be invalid input, was {other:?}"),
            }
        }
    }

    #[test]
    fn secrets_are_redacted() {
        let text = redact(
            "signature for KEY/abcdSECRET failed".into(),
            &["abcdSECRET".into()],
        );
        assert_eq!(text, "signature for KEY/[redacted] failed");
    }
}
