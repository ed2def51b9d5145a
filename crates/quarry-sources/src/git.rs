//! A Git repository, through the `git` command: a bare, shallow copy of the synced branch is
//! kept between syncs in the source's work folder, so a re-sync fetches only new objects.
//! An item's version is its blob id: equal ids are equal bytes, and a file renamed without
//! an edit keeps its id.
//!
//! `git` runs with a cleared environment (only `PATH`, a `HOME` in the work folder, and
//! settings that stop it from prompting), only the `http`, `https` and (for a path on this
//! machine) `file` transports, and a credential given through a `credential-store` file
//! readable by this user only, made for one fetch and removed after: a token is never in
//! its environment or on its command line.
//!
//! Under the outbound address guard (a sync for someone other than the machine's owner),
//! `git` resolves names itself, out of the guard's reach, so the source **resolves and
//! pins**: before `git fetch` it checks the URL (scheme, literal address, metadata names),
//! resolves the host itself and keeps only the addresses the policy allows (none: refused,
//! nothing is started), then hands those to libcurl as `http.curloptResolve`
//! (`CURLOPT_RESOLVE`), so every connection of that fetch goes to an address that was
//! checked — a name re-resolving elsewhere between the check and the connection (DNS
//! rebinding) changes nothing. Redirects are off (`http.followRedirects=false`, which also
//! stops `http-alternates`), since a redirect could name another host that curl would
//! resolve unchecked, and no proxy is used (`http.proxy` empty, a cleared environment).
//! Refusing before spawning without pinning would leave the rebinding window open; pinning
//! without refusing first would let a metadata name through to curl. A `git` older than 2.37
//! ignores `http.curloptResolve`: the check before spawning still holds there.
//!
//! The URL `git` is handed is the one the guard checked: the `url` crate's re-serialisation,
//! never the text given, and a URL that parsers read differently is refused before anything
//! starts (`quarry_netguard::unambiguous_url`: `http://1.1.1.1\@127.0.0.1/` is host 1.1.1.1 to
//! the WHATWG parser but 127.0.0.1 to libcurl). A refusal is decided from the URL and the
//! policy alone, before any connection, so its words never depend on whether something
//! listens there.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::error::SourceError;
use crate::location::Secret;
use crate::mask::FileMask;
use crate::source::{Item, Listing, Source};

/// The ref the synced commit is fetched into.
const HEAD_REF: &str = "refs/quarry/head";
/// The user name sent with a token when none was given (what GitHub, Gitea and Forgejo take).
const TOKEN_USER: &str = "x-access-token";

/// Where and what to sync.
#[derive(Debug, Clone)]
pub struct GitOptions {
    /// `https://…`, `http://…`, or an absolute path on this machine.
    pub url: String,
    /// The branch; the remote's default branch (its `HEAD`) when `None`.
    pub branch: Option<String>,
    /// Only files under this folder of the repository; item paths are relative to it.
    pub subdir: Option<String>,
    /// A token or password for a private repository.
    pub secret: Option<Secret>,
}

/// A Git source.
pub struct GitSource {
    opts: GitOptions,
    mask: FileMask,
    work_dir: PathBuf,
    repo: PathBuf,
    /// The outbound address guard; `None`: any address (the machine's owner).
    net: Option<quarry_netguard::NetPolicy>,
}

impl GitSource {
    /// A source for `opts`, keeping its copy under `work_dir`.
    pub fn new(
        opts: GitOptions,
        mask: FileMask,
        work_dir: &Path,
    ) -> Result<GitSource, SourceError> {
        GitSource::new_with(opts, mask, work_dir, None)
    }

    /// [`GitSource::new`], fetching over http(s) under the outbound address guard `net` when
    /// given (module docs: resolved, checked and pinned; no redirects).
    pub fn new_with(
        mut opts: GitOptions,
        mask: FileMask,
        work_dir: &Path,
        net: Option<&quarry_netguard::NetPolicy>,
    ) -> Result<GitSource, SourceError> {
        if opts.url.starts_with("http://") || opts.url.starts_with("https://") {
            // `git` (libcurl) is handed the URL as the parser re-serialises it, the one the
            // guard checks; a URL that parsers read differently is refused (module docs).
            opts.url = crate::location::unambiguous(&opts.url, "Git URL")?
                .as_str()
                .to_owned();
        }
        std::fs::create_dir_all(work_dir).map_err(|e| SourceError::io(work_dir.display(), e))?;
        let repo = work_dir.join("repo.git");
        let source = GitSource {
            opts,
            mask,
            work_dir: work_dir.to_path_buf(),
            repo,
            net: net.cloned(),
        };
        if !source.repo.join("HEAD").is_file() {
            let out = source
                .git(&source.work_dir)
                .args(["init", "--bare", "--quiet"])
                .arg(&source.repo)
                .output()
                .map_err(spawn_error)?;
            source.check(&out, "git init")?;
        }
        Ok(source)
    }

    /// `git` in `dir` with a cleared environment and the transports allowed.
    fn git(&self, dir: &Path) -> Command {
        let mut cmd = Command::new("git");
        cmd.env_clear()
            .current_dir(dir)
            .env("HOME", &self.work_dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        let local = !self.is_remote();
        cmd.args(["-c", "protocol.allow=never"])
            .args(["-c", "protocol.http.allow=always"])
            .args(["-c", "protocol.https.allow=always"])
            .args([
                "-c",
                if local {
                    "protocol.file.allow=always"
                } else {
                    "protocol.file.allow=never"
                },
            ])
            // A stalled transfer fails instead of holding the sync forever.
            .args([
                "-c",
                "http.lowSpeedLimit=1000",
                "-c",
                "http.lowSpeedTime=60",
            ]);
        cmd
    }

    fn is_remote(&self) -> bool {
        self.opts.url.starts_with("http://") || self.opts.url.starts_with("https://")
    }

    /// Fetches the synced branch into [`HEAD_REF`] and returns its commit id.
    fn fetch_head(&self) -> Result<String, SourceError> {
        let refspec = match &self.opts.branch {
            Some(b) => format!("+refs/heads/{b}:{HEAD_REF}"),
            None => format!("+HEAD:{HEAD_REF}"),
        };
        // Checked (and resolved) before anything is started.
        let guard = self.guard_args()?;
        let credentials = self.credential_file()?;
        let mut cmd = self.git(&self.repo);
        cmd.args(&guard);
        cmd.args(["-c", "credential.helper="]);
        if let Some((_dir, file)) = &credentials {
            cmd.arg("-c").arg(format!(
                "credential.helper=store --file={}",
                shell_quote(file)
            ));
        }
        let out = cmd
            .args([
                "fetch",
                "--quiet",
                "--no-tags",
                "--depth=1",
                "--force",
                "--",
            ])
            .arg(&self.opts.url)
            .arg(&refspec)
            .output()
            .map_err(spawn_error)?;
        drop(credentials);
        self.check(&out, "git fetch")?;
        let out = self
            .git(&self.repo)
            .args(["rev-parse", "--verify", "--quiet", HEAD_REF])
            .output()
            .map_err(spawn_error)?;
        self.check(&out, "git rev-parse")?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Under the guard, the settings that keep `git fetch` on checked addresses: no redirects,
    /// no proxy, and the host pinned to the addresses the policy allows (module docs). Empty
    /// without a guard, or for a repository on this machine (no network). A refusal is
    /// [`SourceError::Refused`].
    fn guard_args(&self) -> Result<Vec<String>, SourceError> {
        let Some(policy) = &self.net else {
            return Ok(Vec::new());
        };
        if !self.is_remote() {
            return Ok(Vec::new());
        }
        let url = crate::location::unambiguous(&self.opts.url, "Git URL")?;
        crate::http::guard_url(policy, &url, &url)?;
        let mut args: Vec<String> = ["-c", "http.followRedirects=false", "-c", "http.proxy="]
            .map(str::to_owned)
            .to_vec();
        // A literal address was judged by `guard_url`; a name is resolved and pinned.
        if let (Some(url::Host::Domain(host)), Some(port)) =
            (url.host(), url.port_or_known_default())
        {
            let addrs =
                quarry_netguard::resolve_blocking(policy, host, port).map_err(|e| match e {
                    quarry_netguard::ResolveError::Refused(r) => {
                        crate::http::refused(&url, &url, &r)
                    }
                    other => SourceError::Unavailable(format!("{}: {other}", self.place())),
                })?;
            let list: Vec<String> = addrs
                .iter()
                .map(|a| match a.ip() {
                    std::net::IpAddr::V4(ip) => ip.to_string(),
                    std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                })
                .collect();
            args.push("-c".into());
            args.push(format!(
                "http.curloptResolve={host}:{port}:{}",
                list.join(",")
            ));
        }
        Ok(args)
    }

    /// A credential-store file (mode 0600, in a private temporary folder) for one fetch.
    fn credential_file(&self) -> Result<Option<(tempfile::TempDir, PathBuf)>, SourceError> {
        let Some(secret) = &self.opts.secret else {
            return Ok(None);
        };
        if !self.is_remote() {
            return Ok(None);
        }
        let mut url = url::Url::parse(&self.opts.url)
            .map_err(|e| SourceError::Invalid(format!("invalid Git URL: {e}")))?;
        let user = secret.username().unwrap_or(TOKEN_USER);
        if url.set_username(user).is_err() || url.set_password(Some(secret.password())).is_err() {
            return Err(SourceError::Invalid(
                "the Git URL cannot carry a credential".into(),
            ));
        }
        url.set_path("");
        url.set_query(None);
        url.set_fragment(None);
        let line = url.as_str().trim_end_matches('/').to_owned();
        let dir = tempfile::Builder::new()
            .prefix("cred")
            .tempdir_in(&self.work_dir)
            .map_err(|e| SourceError::io(self.work_dir.display(), e))?;
        let file = dir.path().join("store");
        write_private(&file, format!("{line}\n").as_bytes())
            .map_err(|e| SourceError::io(file.display(), e))?;
        Ok(Some((dir, file)))
    }

    /// Turns a failed `git` run into an error that says why, without the credential.
    fn check(&self, out: &Output, what: &str) -> Result<(), SourceError> {
        if out.status.success() {
            return Ok(());
        }
        let mut text = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if let Some(secret) = &self.opts.secret {
            text = text.replace(secret.password(), "***");
        }
        // Status codes are looked for in the text: the URL's host, port and path are taken
        // out first (a port such as 40335 holds "403").
        let mut lower = text.to_lowercase();
        if let Ok(u) = url::Url::parse(&self.opts.url) {
            let host = u.host_str().unwrap_or_default().to_lowercase();
            let authority = match u.port() {
                Some(p) => format!("{host}:{p}"),
                None => host,
            };
            for part in [
                self.opts.url.to_lowercase(),
                authority,
                u.path().to_lowercase(),
            ] {
                if part.len() > 1 {
                    lower = lower.replace(&part, "<url>");
                }
            }
        }
        let place = self.place();
        if lower.contains("authentication failed")
            || lower.contains("could not read username")
            || lower.contains("could not read password")
            || lower.contains("401")
            || lower.contains("403")
        {
            let hint = if self.opts.secret.is_some() {
                "the repository refused the credential"
            } else {
                "the repository needs a credential (--token-env or --password-stdin)"
            };
            return Err(SourceError::Unauthorized(format!("{place}: {hint}")));
        }
        if lower.contains("couldn't find remote ref") {
            return Err(SourceError::NotFound(match &self.opts.branch {
                Some(b) => format!("{place}: there is no branch {b:?}"),
                None => format!("{place}: the repository has no commits"),
            }));
        }
        if lower.contains("not found")
            || lower.contains("does not appear to be a git repository")
            || lower.contains("404")
        {
            return Err(SourceError::NotFound(format!(
                "{place}: no repository there"
            )));
        }
        Err(SourceError::Unavailable(format!(
            "{place}: {what} failed: {text}"
        )))
    }

    fn place(&self) -> String {
        format!("Git repository {}", self.opts.url)
    }
}

impl Source for GitSource {
    fn list(&mut self) -> Result<Listing, SourceError> {
        let commit = self.fetch_head()?;
        let mut tree = HEAD_REF.to_owned();
        if let Some(sub) = &self.opts.subdir {
            // A folder that is not there would list nothing — and delete every document.
            let out = self
                .git(&self.repo)
                .args(["cat-file", "-t"])
                .arg(format!("{HEAD_REF}:{sub}"))
                .output()
                .map_err(spawn_error)?;
            if !out.status.success() || String::from_utf8_lossy(&out.stdout).trim() != "tree" {
                return Err(SourceError::NotFound(format!(
                    "{}: there is no folder {sub:?} at commit {}",
                    self.place(),
                    &commit[..commit.len().min(12)]
                )));
            }
            tree = format!("{HEAD_REF}:{sub}");
        }
        let out = self
            .git(&self.repo)
            .args(["ls-tree", "-r", "-l", "-z"])
            .arg(&tree)
            .output()
            .map_err(spawn_error)?;
        self.check(&out, "git ls-tree")?;
        let mut listing = Listing {
            revision: Some(commit),
            ..Listing::default()
        };
        for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            let Some(tab) = entry.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let meta = String::from_utf8_lossy(&entry[..tab]);
            let mut fields = meta.split_whitespace();
            let (mode, kind, oid, size) =
                (fields.next(), fields.next(), fields.next(), fields.next());
            let Ok(path) = std::str::from_utf8(&entry[tab + 1..]) else {
                listing.problems.push((
                    String::from_utf8_lossy(&entry[tab + 1..]).into_owned(),
                    "file name is not valid UTF-8".into(),
                ));
                continue;
            };
            let path = quarry_ingest::nfc(path);
            if !self.mask.admits(&path) {
                continue;
            }
            match (mode, kind, oid) {
                (Some("120000"), _, _) => {
                    listing
                        .problems
                        .push((path, "a symbolic link: not synced".into()));
                }
                (Some(_), Some("blob"), Some(oid)) => listing.items.push(Item {
                    version: oid.to_owned(),
                    size: size.and_then(|s| s.parse().ok()),
                    path,
                }),
                // Submodules (commits) are other repositories.
                _ => {}
            }
        }
        listing.items.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(listing)
    }

    fn fetch(&mut self, item: &Item, max_bytes: u64) -> Result<Vec<u8>, SourceError> {
        if item.version.is_empty() || !item.version.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SourceError::Invalid(format!(
                "{}: not a Git object id: {:?}",
                item.path, item.version
            )));
        }
        if let Some(size) = item.size.filter(|s| *s > max_bytes) {
            return Err(SourceError::TooLarge {
                path: item.path.clone(),
                size,
                limit: max_bytes,
            });
        }
        let out = self
            .git(&self.repo)
            .args(["cat-file", "blob", &item.version])
            .output()
            .map_err(spawn_error)?;
        self.check(&out, "git cat-file")?;
        if out.stdout.len() as u64 > max_bytes {
            return Err(SourceError::TooLarge {
                path: item.path.clone(),
                size: out.stdout.len() as u64,
                limit: max_bytes,
            });
        }
        Ok(out.stdout)
    }
}

fn spawn_error(e: std::io::Error) -> SourceError {
    if e.kind() == std::io::ErrorKind::NotFound {
        SourceError::Unavailable("the `git` command is not installed (Git sources need it)".into())
    } else {
        SourceError::io("git", e)
    }
}

/// `'…'` for the shell Git runs a credential helper with.
fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn failed(stderr: &str) -> Output {
        Output {
            status: std::process::ExitStatus::from_raw(128 << 8),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    fn opts(url: &str) -> GitOptions {
        GitOptions {
            url: url.into(),
            branch: None,
            subdir: None,
            secret: None,
        }
    }

    /// `git` is handed the URL the guard checked, never the text given: a URL that parsers
    /// read differently is refused before anything starts, under the guard or not, and the
    /// refusal is the same whether or not anything listens at the address libcurl would
    /// have reached.
    #[test]
    fn git_gets_the_checked_url_and_ambiguous_ones_are_refused() {
        let work = tempfile::tempdir().unwrap();
        let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open_port = listening.local_addr().unwrap().port();
        let closed_port = quarry_test_http::unused_port();
        let policy = quarry_netguard::NetPolicy::default();
        let mut said = Vec::new();
        for port in [open_port, closed_port] {
            for url in [
                format!("http://1.1.1.1\\@127.0.0.1:{port}/internal.git"),
                format!("http://1.1.1.1/\t@127.0.0.1:{port}/internal.git"),
                format!("http://0x7f.1:{port}/internal.git"),
            ] {
                for net in [None, Some(&policy)] {
                    match GitSource::new_with(opts(&url), FileMask::default(), work.path(), net) {
                        Err(SourceError::Invalid(m)) => {
                            assert!(m.starts_with("invalid Git URL: the URL"), "{m}");
                            said.push(m);
                        }
                        Err(other) => panic!("{url:?}: {other:?}"),
                        Ok(_) => panic!("{url:?} was accepted"),
                    }
                }
            }
            // A plain loopback URL under the guard: refused from the URL alone, in the same
            // words whether or not something listens there.
            let mut source = GitSource::new_with(
                opts(&format!("http://127.0.0.1:{port}/internal.git")),
                FileMask::default(),
                work.path(),
                Some(&policy),
            )
            .unwrap();
            match source.list() {
                Err(SourceError::Refused(m)) => said.push(m.replace(&port.to_string(), "PORT")),
                other => panic!("{other:?}"),
            }
        }
        let half = said.len() / 2;
        assert_eq!(said[..half], said[half..], "{said:#?}");
        // Kept as re-serialised: what `git fetch` gets.
        let source = GitSource::new(
            opts("https://Example.COM:443/team/./r.git"),
            FileMask::default(),
            work.path(),
        )
        .unwrap();
        assert_eq!(source.opts.url, "https://example.com/team/r.git");
        drop(listening);
    }

    #[test]
    fn status_codes_are_not_read_from_the_url() {
        let work = tempfile::tempdir().unwrap();
        let source = GitSource::new(
            GitOptions {
                url: "http://127.0.0.1:40335/team-4031.git".into(),
                branch: None,
                subdir: None,
                secret: None,
            },
            FileMask::default(),
            work.path(),
        )
        .unwrap();
        let err = source
            .check(
                &failed("fatal: repository 'http://127.0.0.1:40335/team-4031.git/' not found"),
                "git fetch",
            )
            .unwrap_err();
        assert!(matches!(err, SourceError::NotFound(_)), "{err:?}");
        let err = source
            .check(
                &failed(
                    "fatal: unable to access 'http://127.0.0.1:40335/team-4031.git/': \
                     The requested URL returned error: 403",
                ),
                "git fetch",
            )
            .unwrap_err();
        assert!(matches!(err, SourceError::Unauthorized(_)), "{err:?}");
    }
}
