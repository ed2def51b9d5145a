//! Quarry's web UI as data: the files under `assets/` (HTML shell, CSS, ES modules, string
//! tables) embedded in the binary at build time, each with its content type, a strong ETag
//! and, for text, a gzip body made once on first request.
//!
//! This crate knows nothing of HTTP; `quarry-server`'s `ui` module serves what it returns.
//! There is no build step: the browser runs the files as they are in the repository.
//!
//! For UI development, [`Assets::from_dir`] reads the files from a directory on every request
//! instead (the server's `QUARRY_UI_DIR`), so an edit shows on reload without a rebuild.

use std::borrow::Cow;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/assets.rs"));
}

/// One asset, ready to serve.
#[derive(Debug, Clone)]
pub struct Asset {
    /// Its path under `assets/` (`js/app.js`).
    pub path: String,
    /// `Content-Type` to send.
    pub content_type: &'static str,
    /// The bytes to serve (uncompressed).
    pub body: Cow<'static, [u8]>,
    /// A strong ETag, quoted (`"…"`): the first 128 bits of the body's SHA-256.
    pub etag: String,
    gzip: Option<Arc<[u8]>>,
}

impl Asset {
    /// The gzip-compressed body, for text assets where it is smaller.
    pub fn gzip(&self) -> Option<&[u8]> {
        self.gzip.as_deref()
    }
}

/// Where assets come from: the binary, or a directory during development.
pub struct Assets {
    source: Source,
}

enum Source {
    /// One lazily computed (ETag, gzip) per entry of `embedded::FILES`.
    Embedded(Vec<OnceLock<Derived>>),
    Dir(PathBuf),
}

#[derive(Debug, Clone)]
struct Derived {
    etag: String,
    gzip: Option<Arc<[u8]>>,
}

impl Assets {
    /// The assets compiled into this binary.
    pub fn embedded() -> Assets {
        Assets {
            source: Source::Embedded(embedded::FILES.iter().map(|_| OnceLock::new()).collect()),
        }
    }

    /// Assets read from `dir` on every request (development).
    pub fn from_dir(dir: impl Into<PathBuf>) -> Assets {
        Assets {
            source: Source::Dir(dir.into()),
        }
    }

    /// The directory assets are read from, when not embedded.
    pub fn dev_dir(&self) -> Option<&Path> {
        match &self.source {
            Source::Dir(d) => Some(d),
            Source::Embedded(_) => None,
        }
    }

    /// The asset at `path` (relative to `assets/`, e.g. `js/app.js`). Paths with `..`,
    /// empty or hidden segments, or characters outside `[A-Za-z0-9._/-]` are never found,
    /// so a request can name nothing outside the asset set.
    pub fn get(&self, path: &str) -> Option<Asset> {
        if !is_clean(path) {
            return None;
        }
        match &self.source {
            Source::Embedded(derived) => {
                let i = embedded::FILES
                    .binary_search_by(|(p, _)| (*p).cmp(path))
                    .ok()?;
                let (p, body) = embedded::FILES[i];
                let content_type = content_type(p);
                let d = derived[i].get_or_init(|| derive(body, content_type));
                Some(Asset {
                    path: p.to_owned(),
                    content_type,
                    body: Cow::Borrowed(body),
                    etag: d.etag.clone(),
                    gzip: d.gzip.clone(),
                })
            }
            Source::Dir(dir) => {
                // A symlink out of the directory is not an asset either.
                let file = dir.join(path).canonicalize().ok()?;
                if !file.is_file() || !file.starts_with(dir.canonicalize().ok()?) {
                    return None;
                }
                let body = std::fs::read(&file).ok()?;
                let content_type = content_type(path);
                let d = derive(&body, content_type);
                Some(Asset {
                    path: path.to_owned(),
                    content_type,
                    body: Cow::Owned(body),
                    etag: d.etag,
                    gzip: d.gzip,
                })
            }
        }
    }

    /// Every embedded asset path (sorted); the development directory is not listed.
    pub fn embedded_paths() -> impl Iterator<Item = &'static str> {
        embedded::FILES.iter().map(|(p, _)| *p)
    }
}

fn is_clean(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 200
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
        && path
            .split('/')
            .all(|seg| !seg.is_empty() && !seg.starts_with('.'))
}

fn derive(body: &[u8], content_type: &str) -> Derived {
    let digest = Sha256::digest(body);
    let etag = format!(
        "\"{}\"",
        digest[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let gzip = (is_text(content_type) && body.len() > 512)
        .then(|| gzip(body))
        .flatten()
        .filter(|z| z.len() < body.len())
        .map(Arc::from);
    Derived { etag, gzip }
}

fn gzip(body: &[u8]) -> Option<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 3),
        flate2::Compression::best(),
    );
    enc.write_all(body).ok()?;
    enc.finish().ok()
}

fn is_text(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || content_type.starts_with("application/javascript")
        || content_type.starts_with("application/json")
        || content_type.starts_with("image/svg+xml")
}

/// The `Content-Type` for a file name.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") | Some("mjs") => "application/javascript; charset=utf-8",
        Some("json") => "application/json; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn the_shell_is_embedded_with_types_etags_and_gzip() {
        let assets = Assets::embedded();
        let index = assets.get("index.html").expect("index.html embedded");
        assert_eq!(index.content_type, "text/html; charset=utf-8");
        let app = assets.get("js/app.js").expect("app.js embedded");
        assert!(app.content_type.starts_with("application/javascript"));
        assert!(app.etag.starts_with('"') && app.etag.len() == 34);
        let z = app.gzip().expect("app.js is compressible");
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(z)
            .read_to_end(&mut out)
            .expect("valid gzip");
        assert_eq!(out, app.body.as_ref());
        // Stable: the same ETag on the next lookup.
        assert_eq!(assets.get("js/app.js").map(|a| a.etag), Some(app.etag));
        assert!(Assets::embedded_paths().any(|p| p == "i18n/core.json"));
    }

    #[test]
    fn nothing_outside_the_asset_set_is_reachable() {
        let dir = tempfile_dir();
        std::fs::create_dir_all(dir.join("assets/js")).unwrap();
        std::fs::write(dir.join("assets/js/a.js"), "x").unwrap();
        std::fs::write(dir.join("secret.txt"), "s").unwrap();
        std::fs::write(dir.join("assets/.hidden"), "h").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.join("secret.txt"), dir.join("assets/js/link.js")).unwrap();
        let assets = Assets::from_dir(dir.join("assets"));
        assert!(assets.get("js/a.js").is_some());
        for bad in [
            "../secret.txt",
            "js/../../secret.txt",
            "/etc/passwd",
            ".hidden",
            "js//a.js",
            "js\\a.js",
            "js/a.js%00",
            "",
            "js/",
        ] {
            assert!(assets.get(bad).is_none(), "{bad} must not resolve");
            assert!(
                Assets::embedded().get(bad).is_none(),
                "{bad} must not resolve"
            );
        }
        assert!(assets.get("missing.js").is_none());
        #[cfg(unix)]
        assert!(
            assets.get("js/link.js").is_none(),
            "a symlink out of the assets is refused"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "quarry-ui-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }
}
