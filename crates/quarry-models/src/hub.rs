//! Fetching a model from the Hugging Face Hub into a local cache.
//!
//! The cache is a plain Hugging Face-layout directory per model and revision
//! (`cache_dir/<org>--<name>/<revision>/`), so it can also be filled by hand (copy the files of
//! a model repository there) and loaded with [`crate::local::LocalEmbedder::load`] directly.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::ModelError;
use crate::remote::{ApiKey, Http, excerpt, read_optional_key};

/// The public Hub.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Weight files, in order of preference: `pytorch_model.bin` only when there is no safetensors.
const WEIGHTS: [&str; 2] = ["model.safetensors", "pytorch_model.bin"];
/// sentence-transformers and tokenizer metadata: used when present, a 404 is fine.
const OPTIONAL: [&str; 6] = [
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
];
/// Longest wait for a connection, a response head or any single read of the body.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this often a progress report while bytes arrive (about 20 a second).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(50);
/// How much of an error response is read (for the message).
const ERROR_BODY_LIMIT: u64 = 64 * 1024;

/// Where models come from and where they are kept. [`ModelCacheOptions::from_vars`] reads
/// them from variables the caller hands over (this crate never reads the environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCacheOptions {
    /// Hub base URL without a trailing `/`: `$HF_ENDPOINT`, else `https://huggingface.co`.
    pub endpoint: String,
    /// Root of the model cache: `$QUARRY_MODELS_DIR`, else `$XDG_CACHE_HOME/quarry/models`,
    /// else `~/.cache/quarry/models`.
    pub cache_dir: PathBuf,
    /// A Hub access token (`$HF_TOKEN`), sent as `Authorization: Bearer` when set. Needed for
    /// private and gated models only.
    pub token: ApiKey,
    /// Never touch the network; a model missing from the cache is an error. Default: true when
    /// `$HF_HUB_OFFLINE` or `$QUARRY_OFFLINE` is `1` / `true`.
    pub offline: bool,
}

impl ModelCacheOptions {
    /// The options from the variables `get` answers (see the field docs).
    pub fn from_vars(get: &dyn Fn(&str) -> Option<String>) -> ModelCacheOptions {
        let var = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let endpoint = var("HF_ENDPOINT")
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let flag = |k: &str| {
            var(k).is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            })
        };
        ModelCacheOptions {
            endpoint,
            cache_dir: default_cache_dir(&var),
            token: ApiKey::new("HF_TOKEN", var("HF_TOKEN")),
            offline: flag("HF_HUB_OFFLINE") || flag("QUARRY_OFFLINE"),
        }
    }
}

/// A download progress report: `downloaded` bytes of `file` so far, out of `total` when the
/// server said how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubProgress {
    /// Path of the file inside the repository, e.g. `model.safetensors`.
    pub file: String,
    /// Bytes received so far.
    pub downloaded: u64,
    /// Size of the file, when known.
    pub total: Option<u64>,
}

/// `$HOME` (or `%USERPROFILE%` on Windows), for `~` in a path as a shell expands it: the one
/// variable this crate reads itself.
fn home_dir() -> Option<PathBuf> {
    ["HOME", "USERPROFILE"]
        .iter()
        .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
        .map(PathBuf::from)
}

/// Expands a leading `~` or `~/` to the home directory; other paths are returned unchanged.
pub(crate) fn expand_tilde(path: &str) -> Result<PathBuf, ModelError> {
    let rest = if path == "~" {
        ""
    } else if let Some(rest) = path.strip_prefix("~/") {
        rest
    } else {
        return Ok(PathBuf::from(path));
    };
    let home = home_dir().ok_or_else(|| {
        ModelError::InvalidInput(format!(
            "cannot expand {path:?}: the HOME environment variable is not set"
        ))
    })?;
    Ok(if rest.is_empty() {
        home
    } else {
        home.join(rest)
    })
}

fn default_cache_dir(var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(dir) = var("QUARRY_MODELS_DIR")
        && let Ok(p) = expand_tilde(dir.trim())
    {
        return p;
    }
    // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    if let Some(xdg) = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return xdg.join("quarry").join("models");
    }
    match var("HOME")
        .or_else(|| var("USERPROFILE"))
        .map(PathBuf::from)
    {
        Some(home) => home.join(".cache").join("quarry").join("models"),
        None => std::env::temp_dir().join("quarry").join("models"),
    }
}

// ---------------------------------------------------------------------------------------------
// Ids
// ---------------------------------------------------------------------------------------------

fn id_chars_ok(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Checks a Hub model id: `NAME` or `ORG/NAME`, the Hub's own rules. They also keep the id
/// safe as a path (no `..`) and make the cache directory name `org--name` unambiguous (no `--`).
pub(crate) fn validate_repo_id(repo: &str) -> Result<(), ModelError> {
    let parts: Vec<&str> = repo.split('/').collect();
    let ok = (1..=2).contains(&parts.len())
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 96
                && id_chars_ok(p)
                && !p.contains("..")
                && !p.contains("--")
                && !p.starts_with(['.', '-'])
                && !p.ends_with(['.', '-'])
        });
    if ok {
        Ok(())
    } else {
        Err(ModelError::InvalidInput(format!(
            "invalid Hugging Face model id {repo:?}: expected NAME or ORG/NAME made of letters, \
             digits, '.', '_' and '-' (no \"..\" or \"--\", not starting or ending with '.' or \
             '-'), e.g. sentence-transformers/all-MiniLM-L6-v2"
        )))
    }
}

/// Checks a revision (branch, tag or commit hash). It becomes one directory name in the cache,
/// so no `/`, no `..` and no leading `.`.
pub(crate) fn validate_revision(revision: &str) -> Result<(), ModelError> {
    let ok = !revision.is_empty()
        && revision.len() <= 255
        && id_chars_ok(revision)
        && !revision.contains("..")
        && !revision.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(ModelError::InvalidInput(format!(
            "invalid Hugging Face revision {revision:?}: expected a branch, tag or commit hash \
             made of letters, digits, '.', '_' and '-' (no '/' or \"..\"), e.g. main"
        )))
    }
}

// ---------------------------------------------------------------------------------------------
// Fetching
// ---------------------------------------------------------------------------------------------

/// The files a model directory cannot do without that are not there yet.
fn missing_required(dir: &Path) -> Vec<&'static str> {
    let mut missing: Vec<&'static str> = ["config.json", "tokenizer.json"]
        .into_iter()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if !WEIGHTS.iter().any(|f| dir.join(f).is_file()) {
        missing.push(WEIGHTS[0]);
    }
    missing
}

/// Returns the local directory holding `repo` at `revision` (Hugging Face layout), downloading
/// what is missing from `opts.endpoint`.
///
/// * The directory is `opts.cache_dir/<org>--<name>/<revision>/`. When `config.json`,
///   `tokenizer.json` and the weights are already there, nothing is sent over the network, so
///   a model fetched once keeps working offline. A cached `main` is therefore never refreshed:
///   delete the directory (or pin a commit as the revision) to get a newer version.
/// * Required: `config.json`, `tokenizer.json`, `model.safetensors` (`pytorch_model.bin` only
///   when the Hub has no safetensors). The sentence-transformers metadata (`modules.json`,
///   `1_Pooling/config.json`, …) is fetched when the repository has it.
/// * Each file is written to `<file>.part`, flushed to disk and renamed, so an interrupted
///   download never leaves a truncated file that looks complete. The weights come last, so a
///   directory that has them is complete. Concurrent fetches of the same model wait for each
///   other (a lock file in the directory).
/// * `progress` is called as bytes arrive, at most about 20 times a second per file.
///
/// Errors: an invalid id or revision ([`ModelError::InvalidInput`]); offline mode, network
/// failure, refusal or a missing file on the Hub ([`ModelError::HubFetch`], whose message says
/// how to supply the model by hand); a cache directory that cannot be written
/// ([`ModelError::Io`]).
pub fn fetch_model(
    repo: &str,
    revision: &str,
    opts: &ModelCacheOptions,
    progress: &dyn Fn(&HubProgress),
) -> Result<PathBuf, ModelError> {
    validate_repo_id(repo)?;
    validate_revision(revision)?;
    let dir = opts.cache_dir.join(repo.replace('/', "--")).join(revision);
    let missing = missing_required(&dir);
    if missing.is_empty() {
        return Ok(dir);
    }
    let endpoint = opts.endpoint.trim().trim_end_matches('/').to_string();
    let http = Http::new_download(read_optional_key(&opts.token), STALL_TIMEOUT, &endpoint)?;
    let fetcher = Fetcher {
        http,
        endpoint,
        repo,
        revision,
        dir,
        token_env: opts.token.var(),
        progress,
    };
    if opts.offline {
        return Err(fetcher.fail(format!(
            "offline mode is on (HF_HUB_OFFLINE or QUARRY_OFFLINE is set); the cache lacks {}",
            missing.join(", ")
        )));
    }
    if fetcher.endpoint.is_empty() {
        return Err(ModelError::InvalidInput(
            "the Hugging Face endpoint is empty (HF_ENDPOINT)".into(),
        ));
    }
    std::fs::create_dir_all(&fetcher.dir).map_err(|source| ModelError::Io {
        path: fetcher.dir.clone(),
        source,
    })?;
    let _lock = lock_dir(&fetcher.dir)?;
    // Another process may have completed the directory while this one waited for the lock.
    if missing_required(&fetcher.dir).is_empty() {
        return Ok(fetcher.dir);
    }

    // config.json first: it is small and tells at once whether the repository is reachable.
    fetcher.required("config.json")?;
    for file in OPTIONAL {
        fetcher.download(file)?;
    }
    fetcher.required("tokenizer.json")?;
    if !WEIGHTS.iter().any(|f| fetcher.dir.join(f).is_file()) {
        let mut found = false;
        for file in WEIGHTS {
            if fetcher.download(file)? != Fetched::NotFound {
                found = true;
                break;
            }
        }
        if !found {
            return Err(fetcher.fail(format!(
                "neither {} nor {} was found on the Hub at revision {}; check the model id \
                 and revision (Quarry needs safetensors or PyTorch weights)",
                WEIGHTS[0], WEIGHTS[1], fetcher.revision
            )));
        }
    }
    Ok(fetcher.dir)
}

/// Holds an exclusive lock on `dir/.quarry-fetch.lock` until dropped.
fn lock_dir(dir: &Path) -> Result<Option<File>, ModelError> {
    let path = dir.join(".quarry-fetch.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| ModelError::Io {
            path: path.clone(),
            source,
        })?;
    // Some file systems (network mounts) have no locks: fetch anyway, as without concurrency.
    Ok(file.lock().ok().map(|()| file))
}

#[derive(Debug, PartialEq, Eq)]
enum Fetched {
    Present,
    Downloaded,
    NotFound,
}

struct Fetcher<'a> {
    http: Http,
    endpoint: String,
    repo: &'a str,
    revision: &'a str,
    dir: PathBuf,
    token_env: &'a str,
    progress: &'a dyn Fn(&HubProgress),
}

impl Fetcher<'_> {
    fn fail(&self, reason: String) -> ModelError {
        ModelError::HubFetch {
            repo: self.repo.to_string(),
            endpoint: self.http.scrub(&self.endpoint),
            dir: self.dir.clone(),
            reason: self.http.scrub(&reason),
        }
    }

    fn url(&self, file: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            self.endpoint, self.repo, self.revision, file
        )
    }

    /// Downloads `file`; a 404 is an error.
    fn required(&self, file: &str) -> Result<(), ModelError> {
        if self.download(file)? == Fetched::NotFound {
            return Err(self.fail(format!(
                "HTTP 404 for {}: {file} was not found on the Hub at revision {}; check the \
                 model id and revision (Quarry needs a Hugging Face-layout model with \
                 config.json, tokenizer.json and model.safetensors)",
                self.url(file),
                self.revision
            )));
        }
        Ok(())
    }

    /// Downloads `file` unless it is already in the directory. A plain 404 is `NotFound`; a
    /// 404 that the Hub marks as a missing repository or revision is an error.
    fn download(&self, file: &str) -> Result<Fetched, ModelError> {
        let dest = self.dir.join(file);
        if dest.is_file() {
            return Ok(Fetched::Present);
        }
        let url = self.url(file);
        let resp = self.http.get(&url).map_err(|e| self.fail(e.to_string()))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        // The Hub names the cause of an error in these headers.
        let code = header("x-error-code").unwrap_or_default();
        let message = header("x-error-message").unwrap_or_default();
        if status == 404 {
            return match code.as_str() {
                "RepoNotFound" => Err(self.fail(format!(
                    "HTTP 404 for {url}: the repository was not found on the Hub; check the \
                     model id"
                ))),
                "RevisionNotFound" => Err(self.fail(format!(
                    "HTTP 404 for {url}: revision {} was not found on the Hub; check the \
                     branch, tag or commit",
                    self.revision
                ))),
                _ => Ok(Fetched::NotFound),
            };
        }
        if !(200..300).contains(&status) {
            // Best effort: the message is the point, a body that breaks off leaves it out.
            let mut raw = Vec::new();
            let body = match resp.take(ERROR_BODY_LIMIT).read_to_end(&mut raw) {
                Ok(_) => String::from_utf8_lossy(&raw).into_owned(),
                Err(_) => String::new(),
            };
            let detail = if message.trim().is_empty() {
                excerpt(&self.http.scrub(&body))
            } else {
                excerpt(&self.http.scrub(&message))
            };
            return Err(self.fail(self.status_reason(status, &url, &code, &detail)));
        }
        self.save(file, &dest, &url, resp)?;
        Ok(Fetched::Downloaded)
    }

    fn status_reason(&self, status: u16, url: &str, code: &str, detail: &str) -> String {
        let var = self.token_env;
        let advice = match status {
            401 if self.http.has_key() => format!(
                "the Hub refused the token in {var}, or the repository does not exist: check \
                 the model id and the token"
            ),
            401 => format!(
                "the repository does not exist, or it is private or gated and needs an access \
                 token: check the model id, or set {var} to a Hugging Face access token that \
                 can read it"
            ),
            403 if code == "GatedRepo" || !self.http.has_key() => format!(
                "access denied: the model is gated; accept its conditions on its Hub page and \
                 set {var} to an access token of that account"
            ),
            403 => format!(
                "access denied: the token in {var} cannot read this model (for a gated model, \
                 accept its conditions on its Hub page with the token's account)"
            ),
            429 => "rate limited by the Hub: retry later, or set a token".to_string(),
            500..=599 => "server error on the Hub: retry later".to_string(),
            _ => "unexpected answer".to_string(),
        };
        if detail.is_empty() {
            format!("HTTP {status} for {url}: {advice}")
        } else {
            format!("HTTP {status} for {url}: {advice}; the Hub said: {detail}")
        }
    }

    /// Streams the body to `<dest>.part`, flushes it to disk, then renames it to `dest`.
    fn save(
        &self,
        file: &str,
        dest: &Path,
        url: &str,
        mut resp: reqwest::blocking::Response,
    ) -> Result<(), ModelError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ModelError::Io { path, source }
        };
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut part_name = dest.as_os_str().to_owned();
        part_name.push(".part");
        let part = PathBuf::from(part_name);
        let total = resp.content_length();
        let mut out = File::create(&part).map_err(io(&part))?;
        let report = |downloaded: u64| {
            (self.progress)(&HubProgress {
                file: file.to_string(),
                downloaded,
                total,
            })
        };
        report(0);
        let mut buf = vec![0u8; 256 * 1024];
        let mut downloaded = 0u64;
        let mut last = Instant::now();
        let result: Result<(), ModelError> = loop {
            let n = match resp.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    break Err(self.fail(format!(
                        "the download of {url} broke off after {downloaded}{} bytes: {}",
                        total.map(|t| format!(" of {t}")).unwrap_or_default(),
                        quarry_core::error_chain(&e)
                    )));
                }
            };
            if let Err(e) = out.write_all(&buf[..n]) {
                break Err(io(&part)(e));
            }
            downloaded += n as u64;
            if last.elapsed() >= PROGRESS_INTERVAL {
                report(downloaded);
                last = Instant::now();
            }
        };
        let result = result.and_then(|()| match total {
            Some(t) if t != downloaded => Err(self.fail(format!(
                "the download of {url} ended after {downloaded} of {t} bytes"
            ))),
            _ => Ok(()),
        });
        // Flushed before the rename: after a crash the final name holds the whole file or
        // nothing.
        let result = result.and_then(|()| out.sync_all().map_err(io(&part)));
        drop(out);
        if let Err(e) = result {
            // Best effort: a leftover .part is overwritten by the next attempt anyway.
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
        std::fs::rename(&part, dest).map_err(io(dest))?;
        sync_parent(dest);
        report(downloaded);
        Ok(())
    }
}

/// Makes a rename durable (Unix: fsync the directory). Best effort: not every platform or file
/// system can open a directory, and the file itself is already complete.
fn sync_parent(path: &Path) {
    if let Some(parent) = path.parent()
        && let Ok(d) = File::open(parent)
    {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids() {
        for ok in [
            "bert-base-uncased",
            "sentence-transformers/all-MiniLM-L6-v2",
            "intfloat/multilingual-e5-small",
            "BAAI/bge-m3",
            "a/b_c.d",
        ] {
            validate_repo_id(ok).unwrap();
        }
        for bad in [
            "", "/", "a/", "/b", "a/b/c", "../b", "a/..", "a/b..c", "a--b/c", "a/b--c", ".a/b",
            "a/b-", "a b/c", "a/b@main", "a\\b", "a/ü",
        ] {
            let e = validate_repo_id(bad).unwrap_err();
            assert!(
                e.to_string().contains("invalid Hugging Face model id"),
                "{e}"
            );
        }
    }

    #[test]
    fn revisions() {
        for ok in [
            "main",
            "v1.0",
            "0123456789abcdef0123456789abcdef01234567",
            "my_branch",
        ] {
            validate_revision(ok).unwrap();
        }
        for bad in ["", ".", "..", "refs/pr/1", "a..b", ".hidden", "a b", "a/b"] {
            assert!(validate_revision(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tilde() {
        if let Some(home) = home_dir() {
            assert_eq!(expand_tilde("~").unwrap(), home);
            assert_eq!(expand_tilde("~/m").unwrap(), home.join("m"));
        }
        assert_eq!(expand_tilde("~x/m").unwrap(), PathBuf::from("~x/m"));
        assert_eq!(expand_tilde("/a/~").unwrap(), PathBuf::from("/a/~"));
    }
}
