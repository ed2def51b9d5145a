//! Where a source is ([`Location`]) and the credential it needs ([`Secret`]).

use std::path::{Path, PathBuf};

use crate::SourceError;

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
        if url.starts_with("http://") || url.starts_with("https://") {
            let parsed = url::Url::parse(url)
                .map_err(|e| SourceError::Invalid(format!("invalid Git URL: {e}")))?;
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(SourceError::Invalid(
                    "the Git URL must not carry a user name or password: give the credential \
                     with --token-env or --password-stdin, which stores it encrypted"
                        .into(),
                ));
            }
            if parsed.host_str().is_none_or(str::is_empty) {
                return Err(SourceError::Invalid(format!(
                    "the Git URL {url} has no host"
                )));
            }
        } else if !Path::new(url).is_absolute() {
            return Err(SourceError::Invalid(format!(
                "unsupported Git location {url:?}: give an http(s):// URL or an absolute path"
            )));
        }
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
        }
    }

    /// `folder` or `git`.
    pub fn kind(&self) -> &'static str {
        match self {
            Location::Folder { .. } => "folder",
            Location::Git { .. } => "git",
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
        }
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
