//! Sources that sync a knowledge base (issue 43) over REST, under `/api/v1`: attach a Git
//! repository, an S3 bucket, a WebDAV folder, a website's sitemap or a folder to a knowledge
//! base, list, read, change (mask, schedule, credential) and detach sources, sync one now
//! (its added and changed documents go to the ingestion workers like uploads; a sync that
//! outlives the request timeout answers 408 and goes on), and read its reports.
//!
//! A source id is global: the routes under `/api/v1/sources/{id}` ([`by_id_router`]) act in
//! the space the source is in when the request names none (`auth::Surface::Source`), as long
//! as the credential reaches that space — otherwise the 404 of a missing source.
//!
//! The rules are the engine's (who may attach, change or sync; a source is found only
//! through a knowledge base the caller sees — anything else is the 404 of a missing one; a
//! place on the server's disk — a `folder` source, or a Git "URL" that is a local path — only
//! for the machine's owner, as folder collections are; a URL, for anyone else, only where the
//! outbound address guard lets requests go). This module only makes sure a remote caller's
//! folder is never looked at on the disk before the engine refuses it.
//! Each change notes what it did for the audit log (`AuditNote::Change`): the source, its
//! knowledge base, and for a sync its status and counts — never file contents, never a
//! credential or a URL's user information.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use quarry_core::Error;
use quarry_engine::{AddSource, Location, NoProgress, ReaderMapping, Secret, SourceView};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::audit::AuditNote;
use crate::auth::Caller;
use crate::http::{ApiError, Body, ErrorCode, Params, count, ok, ok_list, run_blocking};
use crate::state::AppState;

/// Reports listed when `?limit=` is not given.
const REPORTS_DEFAULT: usize = 20;
/// The most reports one request lists (the engine keeps to the same bound).
const REPORTS_MAX: usize = 100;

/// The routes under a knowledge base (its space is the request's).
pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new().route(
        "/api/v1/knowledge-bases/{id}/sources",
        get(list_sources).post(add_source),
    )
}

/// The routes that name a source by its id, mounted behind `auth::Surface::Source`: without
/// a space in the request, they act in the source's own.
pub(crate) fn by_id_router() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/api/v1/sources/{source_id}",
            get(get_source).patch(update_source).delete(remove_source),
        )
        .route("/api/v1/sources/{source_id}/sync", post(sync_source))
        .route("/api/v1/sources/{source_id}/reports", get(list_reports))
}

/// `POST …/sources`: where the source is (`kind` and its fields), which paths, how often.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddBody {
    kind: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    branch: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    sitemap: Option<String>,
    #[serde(default)]
    mask: Option<String>,
    #[serde(default, deserialize_with = "count")]
    interval_seconds: Option<u64>,
    /// A folder that syncs on change.
    #[serde(default)]
    watch: bool,
    #[serde(default)]
    credential: Option<CredentialBody>,
    /// Who reads its documents (rules, CODEOWNERS); absent: every reader of the knowledge
    /// base.
    #[serde(default)]
    readers: Option<ReaderMapping>,
    /// Address ranges its syncs may reach besides public ones and the server's
    /// `--allow-net` (a management credential's setting).
    #[serde(default)]
    allow_net: Option<Vec<String>>,
}

/// A private source's token or password (and the user name it goes with): sealed by the
/// engine under `QUARRY_SECRET_KEY`, never shown or recorded again.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialBody {
    token: String,
    #[serde(default)]
    username: Option<String>,
}

impl CredentialBody {
    fn secret(&self) -> Result<Secret, ApiError> {
        Secret::new(self.username.as_deref(), &self.token).map_err(|e| bad(e.to_string()))
    }
}

/// `PATCH /api/v1/sources/{id}`: `interval_seconds: null` syncs only when asked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateBody {
    #[serde(default)]
    mask: Option<String>,
    #[serde(default, deserialize_with = "nullable_count")]
    interval_seconds: Option<Option<u64>>,
    /// Sync on change (a folder), or stop.
    #[serde(default)]
    watch: Option<bool>,
    /// A new credential; `null` forgets the stored one.
    #[serde(default, deserialize_with = "crate::http::nullable")]
    credential: Option<Option<CredentialBody>>,
    /// A new reader mapping; `null`: every reader of the knowledge base again.
    #[serde(default, deserialize_with = "crate::http::nullable")]
    readers: Option<Option<ReaderMapping>>,
    /// The source's own address allowance; `null` or `[]`: none.
    #[serde(default, deserialize_with = "crate::http::nullable")]
    allow_net: Option<Option<Vec<String>>>,
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or a count.
fn nullable_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    count(d).map(Some)
}

fn bad(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, detail)
}

fn interval(seconds: Option<u64>) -> Option<Duration> {
    seconds.map(Duration::from_secs)
}

/// The location fields each kind takes, the required one first.
const KIND_FIELDS: [(&str, &[&str]); 5] = [
    ("git", &["url", "branch", "path"]),
    ("folder", &["path"]),
    ("s3", &["url", "endpoint", "region"]),
    ("webdav", &["url"]),
    ("site", &["sitemap"]),
];

/// Where the source is, checked as the CLI checks it (`Location::git`, `folder`, `s3`,
/// `webdav`, `site`). A folder named by anyone but the machine's owner is taken as given,
/// never looked at: the engine refuses it (`Engine::add_source`), and the refusal says
/// nothing of what the disk holds.
fn location_of(b: &AddBody, machine_owner: bool) -> Result<Location, ApiError> {
    let quoted = |fields: &mut dyn Iterator<Item = &&str>| {
        fields
            .map(|f| format!("\"{f}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((kind, fields)) = KIND_FIELDS.iter().find(|(k, _)| *k == b.kind) else {
        return Err(bad(format!(
            "unknown source kind {:?}: use one of {}",
            b.kind,
            quoted(&mut KIND_FIELDS.iter().map(|(k, _)| k))
        )));
    };
    let remote = *kind != "folder";
    let given = [
        ("url", b.url.is_some()),
        ("branch", b.branch.is_some()),
        ("path", b.path.is_some()),
        ("endpoint", b.endpoint.is_some()),
        ("region", b.region.is_some()),
        ("sitemap", b.sitemap.is_some()),
        ("credential", b.credential.is_some()),
    ];
    let takes = |f: &str| fields.contains(&f) || (f == "credential" && remote);
    if let Some((field, _)) = given.iter().find(|(f, on)| *on && !takes(f)) {
        return Err(bad(format!(
            "a {kind} source does not take \"{field}\" (it takes {})",
            quoted(&mut fields.iter().chain(remote.then_some(&"credential")))
        )));
    }
    let required = fields[0];
    if !given.iter().any(|(f, on)| *f == required && *on) {
        return Err(bad(format!(
            "a {kind} source needs \"{required}\": {}",
            match *kind {
                "git" => "an http(s):// clone URL",
                "folder" => "an absolute path on the server",
                "s3" => "s3://bucket or s3://bucket/prefix",
                "webdav" => "the folder's http(s):// URL",
                _ => "the sitemap's http(s):// URL",
            }
        )));
    }
    fn checked(r: Result<Location, impl std::fmt::Display>) -> Result<Location, ApiError> {
        r.map_err(|e| bad(e.to_string()))
    }
    let url = b.url.as_deref().unwrap_or_default();
    match *kind {
        // An absolute path is a repository on this machine (the engine's rule applies); it
        // is not looked at here.
        "git" => checked(Location::git(url, b.branch.as_deref(), b.path.as_deref())),
        "folder" => {
            let path = std::path::Path::new(b.path.as_deref().unwrap_or_default());
            if !machine_owner {
                // Refused by the engine, unread.
                return Ok(Location::Folder {
                    path: path.to_path_buf(),
                });
            }
            // A folder that is missing is a mistake in the request, not a missing route.
            checked(Location::folder(path))
        }
        "s3" => checked(Location::s3(
            url,
            b.endpoint.as_deref(),
            b.region.as_deref(),
        )),
        "webdav" => checked(Location::webdav(url)),
        _ => checked(Location::site(b.sitemap.as_deref().unwrap_or_default())),
    }
}

/// `response` with a note for the audit log.
fn noted(mut response: Response, detail: Value) -> Response {
    response.extensions_mut().insert(AuditNote::Change(detail));
    response
}

/// What the audit log keeps of a source: ids, kind, where (without user information or a
/// query string), mask and schedule.
fn audit_source(s: &SourceView) -> Value {
    let mut location = serde_json::to_value(&s.location).unwrap_or(Value::Null);
    for field in ["url", "endpoint", "sitemap"] {
        if let Some(Value::String(url)) = location.get_mut(field) {
            *url = crate::audit::without_credentials(url);
        }
    }
    json!({
        "source": s.id,
        "knowledge_base": s.knowledge_base,
        "location": location,
        "mask": s.mask,
        "interval_seconds": s.interval_seconds,
        "watch": s.watch,
        "has_credential": s.has_secret,
        "readers": s.readers,
        "allow_net": s.allow_net,
    })
}

async fn list_sources(caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let sources = run_blocking(move || engine.sources(Some(&id))).await?;
    Ok(ok_list(&sources))
}

async fn add_source(
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<AddBody>,
) -> Result<Response, ApiError> {
    let location = location_of(&b, caller.principal.is_machine_owner())?;
    let secret = b
        .credential
        .as_ref()
        .map(CredentialBody::secret)
        .transpose()?;
    let req = AddSource {
        location,
        mask: b.mask,
        interval: interval(b.interval_seconds),
        secret,
        watch: b.watch,
        readers: b.readers,
        allow_net: b.allow_net.unwrap_or_default(),
    };
    let engine = caller.engine.clone();
    let s = run_blocking(move || engine.add_source(&id, &req)).await?;
    let detail = audit_source(&s);
    Ok(noted((StatusCode::CREATED, ok(&s)).into_response(), detail))
}

async fn get_source(caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let s = run_blocking(move || engine.source(&id)).await?;
    Ok(ok(s))
}

async fn update_source(
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<UpdateBody>,
) -> Result<Response, ApiError> {
    if b.mask.is_none()
        && b.interval_seconds.is_none()
        && b.watch.is_none()
        && b.credential.is_none()
        && b.readers.is_none()
        && b.allow_net.is_none()
    {
        return Err(bad(
            "nothing to change: give \"mask\", \"interval_seconds\" (null: sync only when asked), \
             \"watch\", \"credential\" (null: forget the stored one), \"readers\" \
             (null: every reader of the knowledge base) and/or \"allow_net\" (null: none)",
        ));
    }
    // Checked before anything changes.
    if let Some(Some(allow)) = &b.allow_net {
        quarry_engine::check_allow_net(allow)?;
    }
    let secret = match &b.credential {
        Some(Some(c)) => Some(Some(c.secret()?)),
        Some(None) => Some(None),
        None => None,
    };
    let engine = caller.engine.clone();
    let every = b.interval_seconds.map(interval);
    let mask = b.mask;
    let watch = b.watch;
    let readers = b.readers;
    let allow_net = b.allow_net;
    let s = run_blocking(move || {
        // Found (or 404) and the mask and schedule checked before the credential moves.
        let mut s = engine.source(&id)?;
        if mask.is_some() || every.is_some() {
            s = engine.update_source(&id, mask.as_deref(), every)?;
        }
        if let Some(w) = watch {
            s = engine.set_source_watch(&id, w)?;
        }
        if let Some(mapping) = &readers {
            s = engine.set_source_readers(&id, mapping.as_ref())?;
        }
        if let Some(secret) = &secret {
            s = engine.set_source_secret(&id, secret.as_ref())?;
        }
        // Last: its answer carries the warnings about the source's reach.
        if let Some(allow) = &allow_net {
            s = engine.set_source_allow_net(&id, allow.as_deref().unwrap_or_default())?;
        }
        Ok(s)
    })
    .await?;
    let mut detail = audit_source(&s);
    // That it changed, never what it is.
    match &b.credential {
        Some(Some(_)) => detail["credential"] = json!("set"),
        Some(None) => detail["credential"] = json!("forgotten"),
        None => {}
    }
    Ok(noted(ok(&s), detail))
}

/// `?keep_documents=true|false` (default false); other parameters are the credentials'.
fn keep_documents(params: &[(String, String)]) -> Result<bool, ApiError> {
    match params
        .iter()
        .rev()
        .find(|(k, _)| k == "keep_documents")
        .map(|(_, v)| v.trim())
    {
        None | Some("false" | "0" | "") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(bad(format!(
            "keep_documents must be true or false, not {other:?}"
        ))),
    }
}

async fn remove_source(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    Params(params): Params<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let keep = keep_documents(&params)?;
    let engine = caller.engine.clone();
    let s = run_blocking(move || {
        // Found first: a caller that cannot see the source gets its 404 before any 403.
        engine.source(&id)?;
        engine.remove_source(&id, keep)
    })
    .await?;
    // Deleted documents leave the indexes and their blobs through the cleanup job.
    st.wake_workers();
    let mut detail = audit_source(&s);
    detail["documents"] = json!(s.documents);
    detail["documents_kept"] = json!(keep);
    Ok(noted(
        ok(json!({
            "id": s.id,
            "knowledge_base": s.knowledge_base,
            "documents": s.documents,
            "documents_kept": keep,
            "deleted": true,
        })),
        detail,
    ))
}

/// Syncs now, on the blocking runner; answers the report and the documents it queued. A sync
/// that ran and failed at the source (unreachable, refused, gone) is `502 UPSTREAM_FAILED`
/// with the reason; its report is kept (`GET …/reports`).
async fn sync_source(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let owner = format!("rest:{}", std::process::id());
    let source_id = id.clone();
    let result = run_blocking(move || {
        // Found first (404 for a source the caller cannot see, whatever else is wrong), and
        // its latest report, to tell the sync's own failure from a refusal.
        let source = engine.source(&source_id)?;
        let before = engine
            .sync_reports(&source_id, 1)?
            .into_iter()
            .next()
            .map(|r| r.id);
        match engine.sync_source(&source_id, &owner, &NoProgress) {
            Ok(outcome) => Ok(Ok((source, outcome))),
            Err(e) => {
                let failed = engine
                    .sync_reports(&source_id, 1)?
                    .into_iter()
                    .next()
                    .filter(|r| Some(&r.id) != before.as_ref() && r.status == "failed");
                Ok(Err((source, e, failed)))
            }
        }
    })
    .await?;
    match result {
        Ok((source, outcome)) => {
            if !outcome.queued.is_empty() {
                st.wake_workers();
            }
            let detail = json!({
                "source": source.id,
                "knowledge_base": source.knowledge_base,
                "sync": crate::audit::sync_detail(&outcome.report),
            });
            Ok(noted(
                ok(json!({ "report": outcome.report, "documents": outcome.queued })),
                detail,
            ))
        }
        Err((source, e, failed)) => {
            // What was applied before the failure stays, and may have queued documents.
            st.wake_workers();
            let at_source = failed.is_some()
                && matches!(
                    e,
                    Error::InvalidInput(_)
                        | Error::NotFound(_)
                        | Error::Forbidden(_)
                        | Error::Unavailable(_)
                        | Error::Io { .. }
                        | Error::TooLarge(_)
                        | Error::Unsupported(_)
                );
            let error = if at_source {
                ApiError::with_code(
                    StatusCode::BAD_GATEWAY,
                    ErrorCode::UpstreamFailed,
                    format!(
                        "the sync of source {} failed: {}",
                        source.id,
                        crate::http::public_detail(&e)
                    ),
                )
            } else {
                ApiError::from(e)
            };
            let mut detail = json!({
                "source": source.id,
                "knowledge_base": source.knowledge_base,
            });
            if let Some(r) = &failed {
                detail["sync"] = crate::audit::sync_detail(r);
            }
            Ok(noted(error.into_response(), detail))
        }
    }
}

async fn list_reports(
    caller: Caller,
    Path(id): Path<String>,
    Params(params): Params<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let limit = match params.iter().rev().find(|(k, _)| k == "limit") {
        None => REPORTS_DEFAULT,
        Some((_, v)) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=REPORTS_MAX).contains(&n) => n,
            _ => {
                return Err(bad(format!(
                    "limit must be a whole number from 1 to {REPORTS_MAX}, not {v:?}"
                )));
            }
        },
    };
    let engine = caller.engine.clone();
    let reports = run_blocking(move || engine.sync_reports(&id, limit)).await?;
    Ok(ok_list(&reports))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: Value) -> AddBody {
        serde_json::from_value(v).expect("body")
    }

    #[test]
    fn places_on_the_servers_disk_are_not_looked_at_for_others() {
        let dir = std::env::temp_dir();
        let folder = body(json!({"kind": "folder", "path": dir}));
        assert!(location_of(&folder, true).is_ok());
        // Taken as given for anyone else (the engine refuses it): a missing folder reads the
        // same as one that exists.
        assert_eq!(
            location_of(&folder, false).unwrap(),
            Location::Folder { path: dir.clone() }
        );
        let missing = body(json!({"kind": "folder", "path": "/no/such/dir"}));
        assert_eq!(
            location_of(&missing, false).unwrap(),
            Location::Folder {
                path: "/no/such/dir".into()
            }
        );
        let local_git = body(json!({"kind": "git", "url": "/srv/repo.git"}));
        assert!(location_of(&local_git, false).is_ok());
        let remote = body(json!({"kind": "git", "url": "https://example.com/r.git"}));
        assert!(location_of(&remote, false).is_ok());
        for v in [
            json!({"kind": "s3", "url": "s3://bucket/docs", "region": "eu-west-1"}),
            json!({"kind": "webdav", "url": "https://dav.example.com/team/"}),
            json!({"kind": "site", "sitemap": "https://example.com/sitemap.xml"}),
        ] {
            assert!(location_of(&body(v.clone()), false).is_ok(), "{v}");
        }
        // For the owner, a missing folder is a bad request (not the 404 of a missing route).
        assert_eq!(
            location_of(&missing, true).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn bad_bodies_are_refused() {
        for (v, fragment) in [
            (
                json!({"kind": "svn", "url": "https://x/y"}),
                "unknown source kind",
            ),
            (json!({"kind": "git"}), "needs \"url\""),
            (
                json!({"kind": "folder", "url": "https://x/y"}),
                "does not take \"url\"",
            ),
            (
                json!({"kind": "folder", "path": "/x", "credential": {"token": "t"}}),
                "does not take \"credential\"",
            ),
            (
                json!({"kind": "webdav", "url": "https://x/y", "branch": "main"}),
                "does not take \"branch\"",
            ),
            (
                json!({"kind": "site", "url": "https://x/sitemap.xml"}),
                "does not take \"url\"",
            ),
            (json!({"kind": "site"}), "needs \"sitemap\""),
            (
                json!({"kind": "s3", "url": "https://x/y"}),
                "invalid S3 location",
            ),
            (
                json!({"kind": "git", "url": "ftp://x/y"}),
                "unsupported Git location",
            ),
        ] {
            let err = location_of(&body(v.clone()), false).unwrap_err();
            assert!(err.detail.contains(fragment), "{v}: {}", err.detail);
        }
        let err = location_of(
            &body(json!({"kind": "git", "url": "https://user:pw@example.com/r.git"})),
            false,
        )
        .unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{}", err.detail);
        assert!(serde_json::from_value::<AddBody>(json!({"kind": "git", "colour": 1})).is_err());
    }

    #[test]
    fn patch_tells_null_from_absent() {
        let b: UpdateBody = serde_json::from_value(json!({"interval_seconds": null})).unwrap();
        assert_eq!(b.interval_seconds, Some(None));
        let b: UpdateBody = serde_json::from_value(json!({"interval_seconds": 300})).unwrap();
        assert_eq!(b.interval_seconds, Some(Some(300)));
        let b: UpdateBody = serde_json::from_value(json!({"mask": "**/*.md"})).unwrap();
        assert_eq!(b.interval_seconds, None);
        assert!(b.credential.is_none());
        let b: UpdateBody = serde_json::from_value(json!({"credential": null})).unwrap();
        assert!(matches!(b.credential, Some(None)));
        let b: UpdateBody =
            serde_json::from_value(json!({"credential": {"token": "t0k"}})).unwrap();
        assert!(matches!(b.credential, Some(Some(_))));
    }

    #[test]
    fn keep_documents_is_a_boolean() {
        let p = |v: &str| vec![("keep_documents".to_owned(), v.to_owned())];
        assert!(!keep_documents(&[]).unwrap());
        assert!(keep_documents(&p("true")).unwrap());
        assert!(!keep_documents(&p("false")).unwrap());
        assert!(keep_documents(&p("yes please")).is_err());
    }
}
