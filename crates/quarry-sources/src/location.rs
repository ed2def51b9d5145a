//! Where a source is ([`Location`]) and the credential it needs ([`Secret`]).

use std::path::{Path, PathBuf};

use crate::error::SourceError;

/// Where a source's files are. Never holds a credential: a URL with a user name or
/// password in it is refused (the credential goes in a [`Secret`], stored encrypted).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Location {
    /// A directory on the machine that runs the sync.
    Folder {
        /// Absolute path.
        path: PathBuf,
    },
    /// A Git repository: `https://…`, `http://…`, or a path on this machine.
    Git {
        /// Clone URL or absolute path.
        url: String,
        /// The branch synced; the repository's default branch when `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        /// Only files under this folder of the repository, when given (`docs/handbook`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// An S3 bucket (AWS S3 or an S3-compatible store), or the objects under a prefix of it.
    S3 {
        /// The bucket's name.
        bucket: String,
        /// Only objects under this prefix (`docs/handbook`, no leading or trailing `/`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
        /// The endpoint of an S3-compatible store (`https://minio.example.com:9000`); AWS S3
        /// when `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint: Option<String>,
        /// The region (`eu-west-1`); `us-east-1` when `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
    },
    /// A folder on a WebDAV server (Nextcloud, ownCloud, SharePoint, Apache `mod_dav`, …).
    #[serde(rename = "webdav")]
    WebDav {
        /// The folder's `https://…` (or `http://…`) URL, without a user name or password.
        url: String,
    },
    /// The pages a web site lists in its sitemap, as its `robots.txt` allows.
    Site {
        /// The sitemap's `https://…/sitemap.xml` (or `http://…`) URL.
        sitemap: String,
    },
}

impl Location {
    /// A folder: an absolute path to an existing directory.
    pub fn folder(path: &Path) -> Result<Location, SourceError> {
        if !path.is_absolute() {
            return Err(SourceError::Invalid(format!(
                "the folder {} must be given as an absolute path",
                path.display()
            )));
        }
        if !path.is_dir() {
            return Err(SourceError::NotFound(format!(
                "{} is not a directory",
                path.display()
            )));
        }
        Ok(Location::Folder {
            path: path.to_path_buf(),
        })
    }

    /// A Git repository; `branch` and `path` are checked as Git would read them.
    pub fn git(
        url: &str,
        branch: Option<&str>,
        path: Option<&str>,
    ) -> Result<Location, SourceError> {
        let url = url.trim();
        // An http(s) URL is kept as the parser re-serialises it: `git` is handed exactly the
        // URL the outbound guard checks.
        let checked;
        let url = if url.starts_with("http://") || url.starts_with("https://") {
            let parsed = unambiguous(url, "Git URL")?;
            if parsed.host_str().is_none_or(str::is_empty) {
                return Err(SourceError::Invalid("the Git URL has no host".into()));
            }
            checked = parsed;
            checked.as_str()
        } else if url.chars().any(char::is_control) {
            return Err(SourceError::Invalid(
                "the Git repository's path has a control character (a line break, a tab …): \
                 remove it"
                    .into(),
            ));
        } else if Path::new(url).is_absolute() {
            url
        } else {
            return Err(SourceError::Invalid(format!(
                "unsupported Git location {}: give an http(s):// URL or an absolute path",
                shown_url(url)
            )));
        };
        let branch = branch.map(str::trim).filter(|b| !b.is_empty());
        if let Some(b) = branch {
            check_branch(b)?;
        }
        let path = match path
            .map(|p| p.trim().trim_matches('/'))
            .filter(|p| !p.is_empty())
        {
            Some(p) => Some(check_subdir(p)?),
            None => None,
        };
        Ok(Location::Git {
            url: url.to_owned(),
            branch: branch.map(str::to_owned),
            path,
        })
    }

    /// An S3 bucket: `s3://bucket` or `s3://bucket/prefix`, with the endpoint of an
    /// S3-compatible store (`https://…`, or `http://…` on a private network) and a region
    /// when they are not AWS's defaults.
    pub fn s3(
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<Location, SourceError> {
        let url = url.trim();
        let bad = |why: &str| {
            SourceError::Invalid(format!(
                "invalid S3 location {}: {why} (expected s3://bucket or s3://bucket/prefix)",
                shown_url(url)
            ))
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("it does not start with s3://"))?;
        if rest.contains(['?', '#']) {
            return Err(bad("no query or fragment is allowed"));
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.contains('@') || bucket.contains(':') {
            return Err(bad(
                "credentials and ports do not belong in the URL (give the endpoint apart, \
                 and the credential with --token-env or --password-stdin)",
            ));
        }
        let prefix = prefix.trim_matches('/');
        Location::s3_parts(
            bucket,
            (!prefix.is_empty()).then_some(prefix),
            endpoint,
            region,
        )
    }

    /// An S3 location from its parts, checked as [`Location::s3`] checks them.
    fn s3_parts(
        bucket: &str,
        prefix: Option<&str>,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<Location, SourceError> {
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !valid_bucket {
            return Err(SourceError::Invalid(format!(
                "{bucket:?} is not an S3 bucket name (3 to 63 lower-case letters, digits, dots \
                 and hyphens, starting and ending with a letter or digit)"
            )));
        }
        let prefix = match prefix
            .map(|p| p.trim().trim_matches('/'))
            .filter(|p| !p.is_empty())
        {
            Some(p) => {
                if p.split('/').any(|s| s.is_empty() || s == "." || s == "..")
                    || p.chars().any(char::is_control)
                {
                    return Err(SourceError::Invalid(format!(
                        "invalid S3 prefix {p:?}: folders separated by single '/', without \
                         '.' or '..'"
                    )));
                }
                Some(p.to_owned())
            }
            None => None,
        };
        let endpoint = match endpoint.map(str::trim).filter(|e| !e.is_empty()) {
            Some(e) => Some(
                check_http_url(e, "S3 endpoint")?
                    .trim_end_matches('/')
                    .to_owned(),
            ),
            None => None,
        };
        let region = match region.map(str::trim).filter(|r| !r.is_empty()) {
            Some(r) => {
                if r.len() > 64
                    || !r
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                {
                    return Err(SourceError::Invalid(format!(
                        "{r:?} is not an S3 region (lower-case letters, digits and hyphens, \
                         e.g. eu-west-1)"
                    )));
                }
                Some(r.to_owned())
            }
            None => None,
        };
        Ok(Location::S3 {
            bucket: bucket.to_owned(),
            prefix,
            endpoint,
            region,
        })
    }

    /// A WebDAV folder: an `https://…` (or `http://…`) URL without a user name or password.
    pub fn webdav(url: &str) -> Result<Location, SourceError> {
        let url = check_http_url(url.trim(), "WebDAV URL")?;
        Ok(Location::WebDav { url })
    }

    /// A web site's sitemap: an `https://…` (or `http://…`) URL without a user name or
    /// password (`https://example.com/sitemap.xml`).
    pub fn site(sitemap: &str) -> Result<Location, SourceError> {
        let sitemap = check_http_url(sitemap.trim(), "sitemap URL")?;
        let parsed = url::Url::parse(&sitemap)
            .map_err(|e| SourceError::Invalid(format!("invalid sitemap URL: {e}")))?;
        if parsed.path() == "/" && parsed.query().is_none() {
            return Err(SourceError::Invalid(format!(
                "{sitemap} is a site, not its sitemap: give the sitemap's URL \
                 (e.g. {}sitemap.xml)",
                parsed.as_str()
            )));
        }
        if parsed.fragment().is_some() {
            return Err(SourceError::Invalid(format!(
                "the sitemap URL {sitemap} must not have a #fragment"
            )));
        }
        Ok(Location::Site { sitemap })
    }

    /// As stored: one line of JSON (`{"kind":"git","url":…}`), no credential.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored location, checked again as when it was first given.
    pub fn from_json(text: &str) -> Result<Location, SourceError> {
        let raw: Location = serde_json::from_str(text)
            .map_err(|e| SourceError::Invalid(format!("stored source location: {e}")))?;
        match &raw {
            Location::Folder { path } => {
                if path.is_absolute() {
                    Ok(raw)
                } else {
                    Err(SourceError::Invalid(format!(
                        "stored folder {} is not absolute",
                        path.display()
                    )))
                }
            }
            Location::Git { url, branch, path } => {
                Location::git(url, branch.as_deref(), path.as_deref())
            }
            Location::S3 {
                bucket,
                prefix,
                endpoint,
                region,
            } => Location::s3_parts(
                bucket,
                prefix.as_deref(),
                endpoint.as_deref(),
                region.as_deref(),
            ),
            Location::WebDav { url } => Location::webdav(url),
            Location::Site { sitemap } => Location::site(sitemap),
        }
    }

    /// `folder`, `git`, `s3`, `webdav` or `site`.
    pub fn kind(&self) -> &'static str {
        match self {
            Location::Folder { .. } => "folder",
            Location::Git { .. } => "git",
            Location::S3 { .. } => "s3",
            Location::WebDav { .. } => "webdav",
            Location::Site { .. } => "site",
        }
    }

    /// Where it is, in one line (`https://host/repo.git#main:docs`): for lists and reports.
    pub fn describe(&self) -> String {
        match self {
            Location::Folder { path } => path.display().to_string(),
            Location::Git { url, branch, path } => {
                let mut s = url.clone();
                if let Some(b) = branch {
                    s.push('#');
                    s.push_str(b);
                }
                if let Some(p) = path {
                    s.push(':');
                    s.push_str(p);
                }
                s
            }
            Location::S3 {
                bucket,
                prefix,
                endpoint,
                region,
            } => {
                let mut s = format!("s3://{bucket}");
                if let Some(p) = prefix {
                    s.push('/');
                    s.push_str(p);
                }
                let at: Vec<&str> = [endpoint.as_deref(), region.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect();
                if !at.is_empty() {
                    s.push_str(&format!(" ({})", at.join(", ")));
                }
                s
            }
            Location::WebDav { url } => url.clone(),
            Location::Site { sitemap } => sitemap.clone(),
        }
    }
}

/// `url` parsed, when every common parser reads it alike
/// ([`quarry_netguard::unambiguous_url`]); `what` names it in the error (`Git URL`), which
/// never repeats the URL.
pub(crate) fn unambiguous(url: &str, what: &str) -> Result<url::Url, SourceError> {
    quarry_netguard::unambiguous_url(url).map_err(|e| match e {
        quarry_netguard::AmbiguousUrl::UserInfo => SourceError::Invalid(format!(
            "the {what} must not carry a user name or password: give the credential with \
             --token-env or --password-stdin, which stores it encrypted"
        )),
        other => SourceError::Invalid(format!("invalid {what}: {other}")),
    })
}

/// An `http(s)://` URL with a host and without a user name or password, that every common
/// parser reads alike, as the parser re-serialises it (what the source then fetches).
fn check_http_url(url: &str, what: &str) -> Result<String, SourceError> {
    let parsed = unambiguous(url, what)?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(SourceError::Invalid(format!(
            "the {what} {} must start with https:// (or http://)",
            shown_url(url)
        )));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(SourceError::Invalid(format!(
            "the {what} must not carry a user name or password: give the credential with \
             --token-env or --password-stdin, which stores it encrypted"
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(SourceError::Invalid(format!(
            "the {what} {} has no host",
            shown_url(url)
        )));
    }
    Ok(parsed.as_str().to_owned())
}

/// A URL as an error may show it: never with what could be a credential before an `@`.
fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            format!("{:?}", u.as_str())
        }
        Ok(_) => format!("{url:?}"),
        Err(_) if url.contains('@') => "(not shown: it has an @)".to_owned(),
        Err(_) => format!("{url:?}"),
    }
}

/// A branch name Git accepts and that cannot be read as an option.
fn check_branch(b: &str) -> Result<(), SourceError> {
    let bad = b.starts_with('-')
        || b.starts_with('/')
        || b.ends_with('/')
        || b.ends_with(".lock")
        || b.contains("..")
        || b.contains("@{")
        || b.chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        return Err(SourceError::Invalid(format!("invalid branch name {b:?}")));
    }
    Ok(())
}

/// A folder inside a repository: relative, no `..`.
fn check_subdir(p: &str) -> Result<String, SourceError> {
    if p.split('/').any(|s| s.is_empty() || s == "." || s == "..") || p.contains('\\') {
        return Err(SourceError::Invalid(format!(
            "invalid folder {p:?} inside the repository: a relative path without '.' or '..'"
        )));
    }
    Ok(p.to_owned())
}

/// A source's credential: a token or password, and the user name it goes with. Never
/// printed (`Debug` hides it), never in an error, a log, a child's environment or
/// command line.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    username: Option<String>,
    password: String,
}

impl Secret {
    /// A token or password, with the user name some servers want beside it.
    pub fn new(username: Option<&str>, password: &str) -> Result<Secret, SourceError> {
        if password.is_empty() {
            return Err(SourceError::Invalid("the credential is empty".into()));
        }
        if password.contains(['\n', '\r', '\0'])
            || username.is_some_and(|u| u.contains(['\n', '\r', '\0', ':']))
        {
            return Err(SourceError::Invalid(
                "the credential or user name contains a line break, NUL or (user name) ':'".into(),
            ));
        }
        Ok(Secret {
            username: username.filter(|u| !u.is_empty()).map(str::to_owned),
            password: password.to_owned(),
        })
    }

    /// The user name, when one was given.
    pub fn username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// The token or password.
    pub fn password(&self) -> &str {
        &self.password
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(hidden)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_locations() {
        let l = Location::git(
            "https://example.com/team/handbook.git",
            Some("main"),
            Some("/docs/"),
        )
        .unwrap();
        assert_eq!(
            l.describe(),
            "https://example.com/team/handbook.git#main:docs"
        );
        assert_eq!(l.kind(), "git");
        assert!(Location::git("/srv/repo.git", None, None).is_ok());
        for (url, branch, path) in [
            ("https://user:tok@example.com/r.git", None, None),
            ("https://tok@example.com/r.git", None, None),
            ("ftp://example.com/r.git", None, None),
            ("relative/repo", None, None),
            (
                "https://example.com/r.git",
                Some("--upload-pack=evil"),
                None,
            ),
            ("https://example.com/r.git", Some("a..b"), None),
            ("https://example.com/r.git", Some("a b"), None),
            ("https://example.com/r.git", None, Some("../etc")),
            ("https://example.com/r.git", None, Some("a/./b")),
        ] {
            assert!(
                matches!(
                    Location::git(url, branch, path),
                    Err(SourceError::Invalid(_))
                ),
                "{url} {branch:?} {path:?}"
            );
        }
    }

    #[test]
    fn locations_round_trip_as_json() {
        let l = Location::git("https://example.com/r.git", Some("main"), None).unwrap();
        assert_eq!(
            l.to_json(),
            r#"{"kind":"git","url":"https://example.com/r.git","branch":"main"}"#
        );
        assert_eq!(Location::from_json(&l.to_json()).unwrap(), l);
        let f = Location::Folder {
            path: PathBuf::from("/srv/docs"),
        };
        assert_eq!(Location::from_json(&f.to_json()).unwrap(), f);
        for bad in [
            r#"{"kind":"ftp","url":"x"}"#,
            r#"{"kind":"folder","path":"rel"}"#,
            r#"{"kind":"git","url":"https://u:p@h/r.git"}"#,
            "not json",
        ] {
            assert!(Location::from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn s3_locations() {
        let l = Location::s3("s3://team-docs/handbook/", None, None).unwrap();
        assert_eq!(
            l,
            Location::S3 {
                bucket: "team-docs".into(),
                prefix: Some("handbook".into()),
                endpoint: None,
                region: None,
            }
        );
        assert_eq!(
            (l.kind(), l.describe()),
            ("s3", "s3://team-docs/handbook".into())
        );
        let l = Location::s3(
            " s3://docs ",
            Some("http://127.0.0.1:9000/"),
            Some("eu-west-1"),
        )
        .unwrap();
        assert_eq!(l.describe(), "s3://docs (http://127.0.0.1:9000, eu-west-1)");
        assert_eq!(
            l.to_json(),
            r#"{"kind":"s3","bucket":"docs","endpoint":"http://127.0.0.1:9000","region":"eu-west-1"}"#
        );
        assert_eq!(Location::from_json(&l.to_json()).unwrap(), l);
        for (url, endpoint, region, says) in [
            ("https://docs/x", None, None, "does not start with s3://"),
            ("s3://Docs", None, None, "not an S3 bucket name"),
            ("s3://ab", None, None, "not an S3 bucket name"),
            ("s3://-docs", None, None, "not an S3 bucket name"),
            ("s3://docs:9000/x", None, None, "ports do not belong"),
            ("s3://AKIA:secret@docs/x", None, None, "credentials"),
            ("s3://docs/a//b", None, None, "invalid S3 prefix"),
            ("s3://docs/a/../b", None, None, "invalid S3 prefix"),
            ("s3://docs/a?x=1", None, None, "no query"),
            (
                "s3://docs",
                Some("ftp://h"),
                None,
                "must start with https://",
            ),
            ("s3://docs", Some("not a url"), None, "invalid S3 endpoint"),
            ("s3://docs", Some("https://u:p@h"), None, "must not carry"),
            ("s3://docs", None, Some("EU West"), "not an S3 region"),
        ] {
            match Location::s3(url, endpoint, region) {
                Err(SourceError::Invalid(m)) => {
                    assert!(m.contains(says), "{url} {endpoint:?}: {m}");
                    assert!(!m.contains("secret"), "{m}");
                }
                other => panic!("{url} {endpoint:?} {region:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn webdav_and_site_locations() {
        let l =
            Location::webdav("https://cloud.example.com/remote.php/dav/files/ann/Docs").unwrap();
        assert_eq!(l.kind(), "webdav");
        assert_eq!(
            l.to_json(),
            r#"{"kind":"webdav","url":"https://cloud.example.com/remote.php/dav/files/ann/Docs"}"#
        );
        assert_eq!(Location::from_json(&l.to_json()).unwrap(), l);
        assert_eq!(
            l.describe(),
            "https://cloud.example.com/remote.php/dav/files/ann/Docs"
        );
        let s = Location::site("https://example.com/sitemap.xml").unwrap();
        assert_eq!(
            (s.kind(), s.describe()),
            ("site", "https://example.com/sitemap.xml".into())
        );
        assert_eq!(
            s.to_json(),
            r#"{"kind":"site","sitemap":"https://example.com/sitemap.xml"}"#
        );
        assert_eq!(Location::from_json(&s.to_json()).unwrap(), s);
        for (bad, says) in [
            (
                "https://ann:pw@cloud.example.com/dav",
                "must not carry a user name",
            ),
            ("ftp://cloud.example.com/dav", "must start with https://"),
            ("cloud.example.com/dav", "invalid WebDAV URL"),
            ("https://", "invalid WebDAV URL"),
        ] {
            match Location::webdav(bad) {
                Err(SourceError::Invalid(m)) => {
                    assert!(m.contains(says), "{bad}: {m}");
                    assert!(!m.contains("pw@"), "{m}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        for (bad, says) in [
            ("https://example.com/", "is a site, not its sitemap"),
            ("https://example.com", "is a site, not its sitemap"),
            ("https://u:p@example.com/sitemap.xml", "must not carry"),
            ("https://example.com/sitemap.xml#top", "fragment"),
            ("file:///srv/sitemap.xml", "must start with https://"),
        ] {
            match Location::site(bad) {
                Err(SourceError::Invalid(m)) => assert!(m.contains(says), "{bad}: {m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        for bad in [
            r#"{"kind":"webdav","url":"https://u:p@h/dav"}"#,
            r#"{"kind":"web_dav","url":"https://h/dav"}"#,
            r#"{"kind":"site","sitemap":"https://h/"}"#,
            r#"{"kind":"s3","bucket":"NO"}"#,
            r#"{"kind":"s3","bucket":"docs","prefix":"../x"}"#,
            r#"{"kind":"s3","bucket":"docs","endpoint":"gopher://h"}"#,
            r#"{"kind":"s3","bucket":"docs","secret":"x"}"#,
        ] {
            assert!(
                matches!(Location::from_json(bad), Err(SourceError::Invalid(_))),
                "{bad}"
            );
        }
    }

    /// URLs that parsers read differently are refused for every kind that takes a URL, with
    /// words that say what is wrong and never repeat the URL; the ones kept are stored as the
    /// parser re-serialises them (what `git` and the HTTP clients are then handed).
    #[test]
    fn urls_that_parsers_read_differently_are_refused_for_every_kind() {
        let cases = [
            (
                "http://1.1.1.1\\@127.0.0.1:18993/internal.git",
                "backslash before its path",
            ),
            (
                "http://h.example\\.evil.org/r.git",
                "backslash before its path",
            ),
            ("http://example.com/r\n.git", "a line break at character 21"),
            ("http://example.com/r\t.git", "a tab"),
            ("http://example.com/r .git", "a space"),
            ("http://exa\u{1}mple.com/r.git", "a control character"),
            ("http://127.0.0.1%2eevil.org/r.git", "%-escape in its host"),
            ("http://u\\:pw@127.0.0.1/r.git", "backslash before its path"),
            (
                "http://ann:pw@example.com/r.git",
                "must not carry a user name",
            ),
            ("http://0x7f.1/r.git", "is read as \"127.0.0.1\""),
            ("http://127.1/r.git", "is read as \"127.0.0.1\""),
            ("http://2130706433/r.git", "is read as \"127.0.0.1\""),
            ("http:///example.com/r.git", "no host after"),
        ];
        type Make = fn(&str) -> Result<Location, SourceError>;
        let kinds: [(&str, Make); 4] = [
            ("git", |u| Location::git(u, None, None)),
            ("webdav", Location::webdav),
            ("site", Location::site),
            ("s3", |u| Location::s3("s3://docs", Some(u), None)),
        ];
        for (kind, make) in kinds {
            for (url, says) in cases {
                match make(url) {
                    Err(SourceError::Invalid(m)) => {
                        assert!(m.contains(says), "{kind} {url:?}: {m}");
                        assert!(!m.contains(url) && !m.contains("pw"), "{m}");
                    }
                    other => panic!("{kind} {url:?}: {other:?}"),
                }
            }
        }
        // A stored location is checked again: one attached before this check stops syncing.
        let stored = r#"{"kind":"git","url":"http://1.1.1.1\\@127.0.0.1:18993/internal.git"}"#;
        assert!(matches!(
            Location::from_json(stored),
            Err(SourceError::Invalid(m)) if m.contains("backslash")
        ));
        // Kept as re-serialised.
        let l = Location::git("HTTP://Example.COM:80/a/../r.git", None, None);
        assert!(l.is_err(), "only http:// and https:// as written: {l:?}");
        let l = Location::git("https://Example.COM:443/team/./r.git", None, None).unwrap();
        assert_eq!(l.describe(), "https://example.com/team/r.git");
        let l = Location::webdav("https://Cloud.example.com/dav/ü").unwrap();
        assert_eq!(l.describe(), "https://cloud.example.com/dav/%C3%BC");
        let l = Location::s3("s3://docs", Some("HTTP://127.0.0.1:9000"), None).unwrap();
        assert_eq!(l.describe(), "s3://docs (http://127.0.0.1:9000)");
        let l = Location::site("https://example.com/a/../sitemap.xml").unwrap();
        assert_eq!(l.describe(), "https://example.com/sitemap.xml");
    }

    #[test]
    fn folder_locations() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Location::folder(dir.path()).unwrap().kind(), "folder");
        assert!(matches!(
            Location::folder(Path::new("relative")),
            Err(SourceError::Invalid(_))
        ));
        assert!(matches!(
            Location::folder(&dir.path().join("missing")),
            Err(SourceError::NotFound(_))
        ));
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new(Some("bot"), "tok-123").unwrap();
        assert_eq!(format!("{s:?}"), "Secret(hidden)");
        assert_eq!((s.username(), s.password()), (Some("bot"), "tok-123"));
        assert!(Secret::new(None, "").is_err());
        assert!(Secret::new(None, "a\nb").is_err());
        assert!(Secret::new(Some("a:b"), "x").is_err());
    }
}
