//! An S3 bucket — AWS S3 or an S3-compatible store (MinIO, Ceph RGW, R2, …) — or the objects
//! under a prefix of it, through `object_store`'s S3 client (reqwest, rustls with ring).
//!
//! **Listing** is `ListObjectsV2`, page after page (1,000 keys a page unless
//! [`S3Options::page_size`] says otherwise). An item's path is its key after the prefix and
//! its `/`; a zero-byte "folder marker" (a key that other keys continue with `/`) is not an
//! item. A key `object_store` cannot name (an empty segment such as `a//b`, or a `.`/`..`
//! segment) fails the listing with an error naming it: a listing without it would delete its
//! document.
//!
//! **Versions** are ETags: S3 changes an object's ETag whenever its bytes change (an MD5 for
//! a single-part upload, a hash of the parts' for a multipart one), and keeps it when nothing
//! was written. A store that gives none gets `size:last-modified`.
//!
//! **Credentials**: a [`Secret`] with the access key id as its user name and the secret key
//! as its password signs every request (SigV4); without one, requests go unsigned, which
//! public buckets answer. The process's `AWS_*` environment, credential files and a cloud
//! instance's role are **never** used: a source is added by a user of the server, and
//! ambient credentials belong to whoever runs it (they may read Quarry's own blob bucket).
//! Temporary credentials (a session token) are not supported.
//!
//! **Errors**: a bucket that does not exist is [`SourceError::NotFound`], and so is a prefix
//! with no object under it (a typo would otherwise list nothing and delete every document);
//! refused or missing credentials are [`SourceError::Unauthorized`]; an unreachable endpoint
//! or a failing store is [`SourceError::Unavailable`]. Messages name the bucket and endpoint,
//! never the secret key.
//!
//! **Outbound guard**: with a policy ([`S3Source::new_with`], a sync for someone other than
//! the machine's owner), the endpoint is checked before anything is sent and every request
//! goes through a client built by `quarry_netguard::guarded_builder` (object_store's
//! `HttpConnector`): names resolved through the guard's resolver when the connection is made,
//! redirect hops checked, no proxy.
//!
//! **Blocking**: `list` and `fetch` run their requests on a small runtime the source owns
//! (one worker thread) and wait for them: call them from plain or blocking threads. Called
//! on an async runtime's worker they block that worker (they do not panic).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStoreExt, RetryConfig};
use tokio::runtime::Runtime;

use crate::error::SourceError;
use crate::location::Secret;
use crate::mask::FileMask;
use crate::source::{Item, Listing, Source};

/// S3's largest (and default) page of `ListObjectsV2`.
pub const DEFAULT_PAGE_SIZE: usize = 1000;

/// Where and what to sync.
#[derive(Debug, Clone)]
pub struct S3Options {
    /// The bucket.
    pub bucket: String,
    /// Only objects under this prefix (no leading or trailing `/`); item paths are relative
    /// to it.
    pub prefix: Option<String>,
    /// An S3-compatible store's endpoint (`https://…`; `http://…` is allowed because it was
    /// given explicitly); AWS S3 when `None`.
    pub endpoint: Option<String>,
    /// The region; `us-east-1` when `None`.
    pub region: Option<String>,
    /// Access key id (user name) and secret key (password); unsigned requests when `None`.
    pub secret: Option<Secret>,
    /// Keys asked for per list request (1 to 1,000).
    pub page_size: usize,
}

/// An S3 source.
pub struct S3Source {
    s3: Arc<AmazonS3>,
    opts: S3Options,
    mask: FileMask,
    runtime: Option<Runtime>,
    /// `s3://bucket[/prefix]` at the endpoint, for messages.
    place: String,
    /// The object each listed path came from (paths are NFC; keys may not be).
    keys: HashMap<String, Path>,
}

impl std::fmt::Debug for S3Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Source")
            .field("place", &self.place)
            .finish_non_exhaustive()
    }
}

impl S3Source {
    /// A source for `opts`, syncing the paths `mask` admits. Starts nothing on the network.
    pub fn new(opts: S3Options, mask: FileMask) -> Result<S3Source, SourceError> {
        S3Source::new_with(opts, mask, None)
    }

    /// [`S3Source::new`], its every request under the outbound address guard `net` when
    /// given (module docs).
    pub fn new_with(
        mut opts: S3Options,
        mask: FileMask,
        net: Option<&quarry_netguard::NetPolicy>,
    ) -> Result<S3Source, SourceError> {
        if let Some(e) = &opts.endpoint {
            // The endpoint every parser reads alike, as re-serialised: what the client is
            // given is what the guard checks.
            let url = crate::location::unambiguous(e, "S3 endpoint")?;
            opts.endpoint = Some(url.as_str().trim_end_matches('/').to_owned());
        }
        if !(1..=DEFAULT_PAGE_SIZE).contains(&opts.page_size) {
            return Err(SourceError::Invalid(format!(
                "the S3 page size must be 1 to {DEFAULT_PAGE_SIZE}, not {}",
                opts.page_size
            )));
        }
        let place = {
            let mut p = format!("S3 bucket s3://{}", opts.bucket);
            if let Some(prefix) = &opts.prefix {
                p.push('/');
                p.push_str(prefix);
            }
            match &opts.endpoint {
                Some(e) => p.push_str(&format!(" at {e}")),
                None => p.push_str(&format!(
                    " (AWS, {})",
                    opts.region.as_deref().unwrap_or("us-east-1")
                )),
            }
            p
        };
        let mut client = ClientOptions::new()
            .with_timeout(Duration::from_secs(300))
            .with_connect_timeout(Duration::from_secs(15));
        if opts
            .endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"))
        {
            client = client.with_allow_http(true);
        }
        // `new`, not `from_env`: nothing from this process's environment.
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&opts.bucket)
            .with_region(opts.region.as_deref().unwrap_or("us-east-1"))
            .with_client_options(client)
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 3,
                retry_timeout: Duration::from_secs(60),
            });
        if let Some(e) = &opts.endpoint {
            builder = builder.with_endpoint(e);
        }
        if let Some(policy) = net {
            if let Some(e) = &opts.endpoint {
                let url = crate::location::unambiguous(e, "S3 endpoint")?;
                crate::http::guard_url(policy, &url, &url)?;
            }
            builder = builder.with_http_connector(GuardedConnector {
                policy: policy.clone(),
                allow_http: opts
                    .endpoint
                    .as_deref()
                    .is_some_and(|e| e.starts_with("http://")),
            });
        }
        match &opts.secret {
            Some(secret) => {
                let Some(key_id) = secret.username() else {
                    return Err(SourceError::Invalid(
                        "an S3 credential needs the access key id as its user name and the \
                         secret key as its password"
                            .into(),
                    ));
                };
                builder = builder
                    .with_access_key_id(key_id)
                    .with_secret_access_key(secret.password());
            }
            // Unsigned: never an instance role or another ambient credential.
            None => builder = builder.with_skip_signature(true),
        }
        quarry_netguard::ensure_crypto_provider();
        let s3 = builder.build().map_err(|e| {
            SourceError::Invalid(format!(
                "{place}: {}",
                redact(&quarry_core::error_chain(&e), opts.secret.as_ref())
            ))
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("quarry-source-s3")
            .enable_all()
            .build()
            .map_err(|e| SourceError::io("the S3 source's runtime", e))?;
        Ok(S3Source {
            s3: Arc::new(s3),
            opts,
            mask,
            runtime: Some(runtime),
            place,
            keys: HashMap::new(),
        })
    }

    /// Runs a request on the source's runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, SourceError> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| SourceError::Unavailable("the S3 source's runtime is gone".into()))?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().map_err(|_| {
            SourceError::Unavailable(format!("{}: a request ended without an answer", self.place))
        })
    }

    /// An `object_store` error as a [`SourceError`] that says what to fix, without the
    /// secret key.
    fn error(&self, e: &object_store::Error) -> SourceError {
        let text = redact(&quarry_core::error_chain(e), self.opts.secret.as_ref());
        classify(&self.place, self.opts.secret.is_some(), e, &text)
    }

    /// The object a path names: the one listed, or the prefix and the path.
    fn key(&self, path: &str) -> Result<Path, SourceError> {
        if let Some(k) = self.keys.get(path) {
            return Ok(k.clone());
        }
        let full = match &self.opts.prefix {
            Some(p) => format!("{p}/{path}"),
            None => path.to_owned(),
        };
        Path::parse(&full).map_err(|e| SourceError::Invalid(format!("invalid path {path:?}: {e}")))
    }
}

/// object_store's HTTP client under the outbound address guard: a reqwest client from
/// `quarry_netguard::guarded_builder` (guarded resolver, checked redirects, no proxy), with
/// the timeouts this source sets.
#[derive(Debug)]
struct GuardedConnector {
    policy: quarry_netguard::NetPolicy,
    allow_http: bool,
}

impl object_store::client::HttpConnector for GuardedConnector {
    fn connect(
        &self,
        _options: &ClientOptions,
    ) -> object_store::Result<object_store::client::HttpClient> {
        let client = quarry_netguard::guarded_builder(&self.policy, false)
            .user_agent(crate::http::USER_AGENT)
            .timeout(Duration::from_secs(300))
            .connect_timeout(Duration::from_secs(15))
            .https_only(!self.allow_http)
            .build()
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        Ok(object_store::client::HttpClient::new(client))
    }
}

/// Which [`SourceError`] an `object_store` error is. List errors come as generic ones whose
/// text carries the status and S3's error code, so both the kind and the text are read.
fn classify(place: &str, signed: bool, e: &object_store::Error, text: &str) -> SourceError {
    if let Some(r) = quarry_netguard::refusal_in(e) {
        return SourceError::Refused(format!("{place}: {r}"));
    }
    let has = |s: &str| text.contains(s);
    if has("NoSuchBucket") {
        return SourceError::NotFound(format!("{place}: the bucket does not exist"));
    }
    let refused = matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) || [
        "status code: 401",
        "status code: 403",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "InvalidToken",
        "ExpiredToken",
    ]
    .iter()
    .any(|s| has(s));
    if refused {
        let hint = if signed {
            "the store refused the credential (check the access key id, the secret key, and \
             that they may list and read the bucket)"
        } else {
            "the bucket is not public: give an access key id and secret key"
        };
        return SourceError::Unauthorized(format!("{place}: {hint}"));
    }
    if matches!(e, object_store::Error::NotFound { .. }) || has("status code: 404") {
        return SourceError::NotFound(format!("{place}: not found ({text})"));
    }
    let hint = if has("redirect") || has("status code: 301") {
        " (check the region)"
    } else {
        ""
    };
    SourceError::Unavailable(format!("{place}: {text}{hint}"))
}

/// `text` without the secret key.
fn redact(text: &str, secret: Option<&Secret>) -> String {
    match secret {
        Some(s) if !s.password().is_empty() => text.replace(s.password(), "[redacted]"),
        _ => text.to_owned(),
    }
}

impl Drop for S3Source {
    fn drop(&mut self) {
        // Dropping a runtime waits for its threads, which may not be done inside another
        // runtime's context; letting them go in the background is always allowed.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Source for S3Source {
    fn list(&mut self) -> Result<Listing, SourceError> {
        let list_prefix = self.opts.prefix.as_ref().map(|p| format!("{p}/"));
        let mut objects: Vec<object_store::ObjectMeta> = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let s3 = self.s3.clone();
            let prefix = list_prefix.clone();
            let opts = PaginatedListOptions {
                page_token: token.take(),
                max_keys: Some(self.opts.page_size),
                ..PaginatedListOptions::default()
            };
            let page = self
                .run(async move { s3.list_paginated(prefix.as_deref(), opts).await })?
                .map_err(|e| self.error(&e))?;
            objects.extend(page.result.objects);
            match page.page_token.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        if objects.is_empty()
            && let Some(prefix) = &self.opts.prefix
        {
            // A typo in the prefix must not list nothing (and delete every document).
            return Err(SourceError::NotFound(format!(
                "{}: there is no object under the prefix {prefix:?}",
                self.place
            )));
        }
        let strip = list_prefix.unwrap_or_default();
        let mut by_path: BTreeMap<String, (Path, Item)> = BTreeMap::new();
        let mut folders: HashSet<String> = HashSet::new();
        let mut listing = Listing::default();
        for meta in objects {
            let key = meta.location.as_ref();
            let Some(rel) = key.strip_prefix(&strip).filter(|r| !r.is_empty()) else {
                // The prefix's own folder marker.
                continue;
            };
            let path = quarry_ingest::nfc(rel);
            let mut parent = path.as_str();
            while let Some((p, _)) = parent.rsplit_once('/') {
                if !folders.insert(p.to_owned()) {
                    break;
                }
                parent = p;
            }
            let version = match meta.e_tag.as_deref().filter(|t| !t.is_empty()) {
                Some(tag) => tag.to_owned(),
                None => format!("{}:{}", meta.size, meta.last_modified.timestamp_millis()),
            };
            let item = Item {
                path: path.clone(),
                version,
                size: Some(meta.size),
            };
            if by_path
                .insert(path.clone(), (meta.location, item))
                .is_some()
            {
                listing.problems.push((
                    path,
                    "two keys are the same path once Unicode-normalised (NFC): not synced".into(),
                ));
            }
        }
        let clashes: HashSet<String> = listing.problems.iter().map(|(p, _)| p.clone()).collect();
        self.keys.clear();
        for (path, (key, item)) in by_path {
            // A folder marker (`docs/` uploaded by a console) is not a document.
            if (folders.contains(&path) && item.size == Some(0)) || clashes.contains(&path) {
                continue;
            }
            if folders.contains(&path) {
                listing.problems.push((
                    path,
                    "an object whose key is also a folder of other objects: not synced".into(),
                ));
                continue;
            }
            if !self.mask.admits(&path) {
                continue;
            }
            self.keys.insert(path, key);
            listing.items.push(item);
        }
        listing.problems.sort();
        Ok(listing)
    }

    fn fetch(&mut self, item: &Item, max_bytes: u64) -> Result<Vec<u8>, SourceError> {
        if let Some(size) = item.size.filter(|s| *s > max_bytes) {
            return Err(SourceError::TooLarge {
                path: item.path.clone(),
                size,
                limit: max_bytes,
            });
        }
        let key = self.key(&item.path)?;
        let s3 = self.s3.clone();
        let location = key.clone();
        let got = self.run(async move {
            let result = s3.get(&location).await?;
            let size = result.meta.size;
            if size > max_bytes {
                return Ok(Err(size));
            }
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            let mut stream = result.into_stream();
            while let Some(chunk) = stream.next().await {
                bytes.extend_from_slice(&chunk?);
                if bytes.len() as u64 > max_bytes {
                    return Ok(Err(bytes.len() as u64));
                }
            }
            Ok::<_, object_store::Error>(Ok(bytes))
        })?;
        match got {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(size)) => Err(SourceError::TooLarge {
                path: item.path.clone(),
                size,
                limit: max_bytes,
            }),
            Err(object_store::Error::NotFound { .. }) => Err(SourceError::NotFound(format!(
                "{}: {} is no longer there",
                self.place, item.path
            ))),
            Err(e) => Err(self.error(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> S3Options {
        S3Options {
            bucket: "docs".into(),
            prefix: None,
            endpoint: Some("http://127.0.0.1:9".into()),
            region: None,
            secret: None,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    #[test]
    fn options_are_checked() {
        assert!(S3Source::new(opts(), FileMask::default()).is_ok());
        let err = S3Source::new(
            S3Options {
                page_size: 0,
                ..opts()
            },
            FileMask::default(),
        )
        .unwrap_err();
        assert!(matches!(err, SourceError::Invalid(_)), "{err:?}");
        let err = S3Source::new(
            S3Options {
                secret: Some(Secret::new(None, "only-a-secret-key").unwrap()),
                ..opts()
            },
            FileMask::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("access key id"), "{err}");
        assert!(!err.to_string().contains("only-a-secret-key"), "{err}");
    }

    #[test]
    fn errors_are_classified_without_the_secret() {
        let generic = |text: &str| object_store::Error::Generic {
            store: "S3",
            source: text.to_owned().into(),
        };
        let place = "S3 bucket s3://docs";
        let e = generic(
            "Server returned non-2xx status code: 404 Not Found: <Code>NoSuchBucket</Code>",
        );
        assert!(matches!(
            classify(place, true, &e, &e.to_string()),
            SourceError::NotFound(_)
        ));
        let e = generic("status code: 403 Forbidden: <Code>SignatureDoesNotMatch</Code>");
        let err = classify(place, true, &e, &e.to_string());
        assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
        assert!(err.to_string().contains("refused the credential"), "{err}");
        let err = classify(place, false, &e, &e.to_string());
        assert!(err.to_string().contains("not public"), "{err}");
        let e = generic("error sending request: connection refused");
        let err = classify(place, false, &e, &e.to_string());
        assert!(matches!(err, SourceError::Unavailable(_)), "{err:?}");
        assert!(err.is_transient());

        let secret = Secret::new(Some("AKIA1"), "s3cr3t-key").unwrap();
        assert_eq!(
            redact("bad s3cr3t-key here", Some(&secret)),
            "bad [redacted] here"
        );
    }

    #[test]
    fn an_unreachable_endpoint_is_unavailable() {
        let mut src = S3Source::new(
            S3Options {
                endpoint: Some(format!("http://127.0.0.1:{}", unused_port())),
                ..opts()
            },
            FileMask::default(),
        )
        .unwrap();
        let err = src.list().unwrap_err();
        assert!(matches!(err, SourceError::Unavailable(_)), "{err:?}");
        assert!(err.to_string().contains("s3://docs"), "{err}");
    }

    fn unused_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap()
    }
}
