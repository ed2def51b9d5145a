//! Shared helpers for Quarry's end-to-end tests: every test runs the real `quarry` binary
//! against its own `QUARRY_HOME` and its own scratch folder, so tests can run in parallel.

#![allow(dead_code)]

pub(crate) mod fake_models;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tempfile::TempDir;

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_quarry");

/// One isolated Quarry installation: a fresh data home and a scratch folder for corpora.
/// Commands run with the scratch folder as their working directory, so relative paths never
/// resolve against the source tree.
pub(crate) struct Quarry {
    home: TempDir,
    work: TempDir,
    envs: Vec<(String, String)>,
}

impl Default for Quarry {
    fn default() -> Self {
        Self::new()
    }
}

impl Quarry {
    pub(crate) fn new() -> Self {
        Quarry {
            home: tempfile::Builder::new()
                .prefix("quarry-home-")
                .tempdir()
                .expect("temp home"),
            work: tempfile::Builder::new()
                .prefix("quarry-work-")
                .tempdir()
                .expect("temp work dir"),
            envs: Vec::new(),
        }
    }

    /// `$QUARRY_HOME` of this installation.
    pub(crate) fn home(&self) -> &Path {
        self.home.path()
    }

    /// The scratch folder (also the working directory of every command).
    pub(crate) fn work(&self) -> &Path {
        self.work.path()
    }

    /// Adds an environment variable to every later command of this installation.
    pub(crate) fn set_env(&mut self, key: &str, value: &str) {
        self.envs.push((key.to_owned(), value.to_owned()));
    }

    /// A `quarry` command with this installation's environment; nothing is run yet.
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_as(Path::new(BIN), args)
    }

    /// Like [`Quarry::cmd`], running `program` (e.g. a symlink to the binary named `qmd`).
    pub(crate) fn cmd_as(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.args(args)
            .current_dir(self.work())
            .env("QUARRY_HOME", self.home())
            .env_remove("QUARRY_MAX_FILE_BYTES")
            .env_remove("XDG_DATA_HOME")
            // Models only from what a test configures; never the network.
            .env_remove("QUARRY_EMBED_MODEL")
            .env_remove("QUARRY_RERANK_MODEL")
            .env_remove("QUARRY_EXPAND_MODEL")
            .env_remove("QUARRY_OPENAI_BASE_URL")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("QUARRY_RERANK_URL")
            .env_remove("HF_ENDPOINT")
            .env("HF_HUB_OFFLINE", "1")
            .env("QUARRY_MODELS_DIR", self.home().join("models"))
            .stdin(Stdio::null());
        for (k, v) in &self.envs {
            c.env(k, v);
        }
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("cannot run quarry")
    }

    pub(crate) fn run_env(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut c = self.cmd(args);
        for (k, v) in envs {
            c.env(k, v);
        }
        c.output().expect("cannot run quarry")
    }

    /// Starts `quarry` in the background with stdout/stderr piped.
    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        self.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot spawn quarry")
    }

    /// Runs and asserts success; returns stdout.
    #[track_caller]
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_success(args, &out);
        stdout(&out)
    }

    /// Runs with extra environment and asserts success; returns (stdout, stderr).
    #[track_caller]
    pub(crate) fn ok_env(&self, args: &[&str], envs: &[(&str, &str)]) -> (String, String) {
        let out = self.run_env(args, envs);
        assert_success(args, &out);
        (stdout(&out), stderr(&out))
    }

    /// Runs and asserts success; returns (stdout, stderr).
    #[track_caller]
    pub(crate) fn ok_both(&self, args: &[&str]) -> (String, String) {
        let out = self.run(args);
        assert_success(args, &out);
        (stdout(&out), stderr(&out))
    }

    /// Runs and asserts a clean failure: exit status 1, nothing on stdout, an `error: …`
    /// message on stderr. Returns stderr.
    #[track_caller]
    pub(crate) fn err(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_failure(args, &out);
        stderr(&out)
    }

    #[track_caller]
    pub(crate) fn err_env(&self, args: &[&str], envs: &[(&str, &str)]) -> String {
        let out = self.run_env(args, envs);
        assert_failure(args, &out);
        stderr(&out)
    }

    /// Runs with `--json`, asserts success and parses stdout.
    #[track_caller]
    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let out = self.ok(&all);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("quarry {all:?}: stdout is not JSON ({e}):\n{out}"))
    }

    /// A folder under the scratch area (created, with parents).
    pub(crate) fn dir(&self, rel: &str) -> PathBuf {
        let p = self.work().join(rel);
        std::fs::create_dir_all(&p).expect("mkdir");
        p
    }

    /// Writes `files` (relative path, content) into a new folder `rel` of the scratch area
    /// and returns its canonical path.
    pub(crate) fn corpus(&self, rel: &str, files: &[(&str, &str)]) -> PathBuf {
        let root = self.dir(rel);
        write_files(&root, files);
        root.canonicalize().expect("canonicalize corpus")
    }

    /// `collection add PATH --name NAME` (JSON); returns the JSON reply.
    #[track_caller]
    pub(crate) fn add(&self, path: &Path, name: &str) -> Value {
        self.json(&["collection", "add", s(path), "--name", name])
    }

    /// Search with `--json`; returns the hits.
    #[track_caller]
    pub(crate) fn search(&self, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["search"];
        all.extend_from_slice(args);
        match self.json(&all) {
            Value::Array(a) => a,
            other => panic!("search {args:?}: expected a JSON array, got {other}"),
        }
    }

    /// Display paths (`file`) of a `--json` search, in rank order.
    #[track_caller]
    pub(crate) fn search_files(&self, args: &[&str]) -> Vec<String> {
        self.search(args)
            .iter()
            .map(|h| h["file"].as_str().expect("file").to_owned())
            .collect()
    }

    /// Everything a failed command must leave untouched: status, collections, contexts.
    #[track_caller]
    pub(crate) fn state(&self) -> Value {
        serde_json::json!({
            "status": self.json(&["status"]),
            "collections": self.json(&["collection", "list"]),
            "contexts": self.json(&["context", "list"]),
        })
    }

    /// [`Quarry::state`] plus the results of some searches.
    #[track_caller]
    pub(crate) fn state_with(&self, queries: &[&str]) -> Value {
        let mut st = self.state();
        let results: Vec<Value> = queries
            .iter()
            .map(|q| Value::Array(self.search(&[q, "-n", "100"])))
            .collect();
        st["searches"] = Value::Array(results);
        st
    }

    /// Total documents according to `status --json`.
    #[track_caller]
    pub(crate) fn total_documents(&self) -> u64 {
        self.json(&["status"])["total_documents"]
            .as_u64()
            .expect("total_documents")
    }
}

#[track_caller]
pub(crate) fn assert_success(args: &[&str], out: &Output) {
    assert!(
        out.status.success(),
        "quarry {args:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        stdout(out),
        stderr(out)
    );
}

#[track_caller]
pub(crate) fn assert_failure(args: &[&str], out: &Output) {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "quarry {args:?} should fail with exit status 1:\n--- stdout\n{}\n--- stderr\n{err}",
        stdout(out)
    );
    assert!(
        stdout(out).is_empty(),
        "quarry {args:?} failed but printed on stdout:\n{}",
        stdout(out)
    );
    assert!(
        err.starts_with("error: ") && err.trim().len() > "error:".len() + 5,
        "quarry {args:?} should explain the failure on stderr, got:\n{err}"
    );
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Path as `&str` (test paths are always UTF-8).
pub(crate) fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Writes `files` (relative path, content) under `root`, creating folders.
pub(crate) fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        write_file(&root.join(rel), content.as_bytes());
    }
}

pub(crate) fn write_file(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Rewrites a file and moves its mtime forward, so the change is seen even when the new
/// content has the same size and lands within the same filesystem timestamp tick.
pub(crate) fn rewrite(path: &Path, content: &str) {
    let old = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    write_file(path, content.as_bytes());
    bump_mtime(path, old);
}

/// `touch`: a new mtime, same bytes.
pub(crate) fn touch(path: &Path) {
    let old = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    bump_mtime(path, old);
}

fn bump_mtime(path: &Path, old: Option<SystemTime>) {
    let base = old.unwrap_or(UNIX_EPOCH).max(SystemTime::now());
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open for set_modified");
    f.set_modified(base + Duration::from_secs(2))
        .expect("set_modified");
}

/// Asserts that no display path occurs twice in a list of hits.
#[track_caller]
pub(crate) fn assert_unique(files: &[String]) {
    let mut seen = HashSet::new();
    for f in files {
        assert!(seen.insert(f), "duplicate result {f} in {files:?}");
    }
}

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Parses `YYYY-MM-DDTHH:MM:SS.mmmZ` (exactly that shape) into ms since the epoch.
pub(crate) fn parse_iso8601_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 24 {
        return None;
    }
    let shape_ok = b.iter().enumerate().all(|(i, &c)| match i {
        4 | 7 => c == b'-',
        10 => c == b'T',
        13 | 16 => c == b':',
        19 => c == b'.',
        23 => c == b'Z',
        _ => c.is_ascii_digit(),
    });
    if !shape_ok {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss, ms) = (n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + ms)
}

/// True when `line` starts with `N: ` for a positive N.
pub(crate) fn has_line_prefix(line: &str) -> Option<usize> {
    let (num, _) = line.split_once(": ")?;
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    num.parse().ok().filter(|&n: &usize| n > 0)
}

/// True when `s` is `#` followed by at least 6 lowercase hex digits.
pub(crate) fn is_docid(s: &str) -> bool {
    s.strip_prefix('#').is_some_and(|h| {
        h.len() >= 6
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
