//! Ingestion: turns folders on disk into candidate documents.
//!
//! [`scan`] walks a collection root honouring `.gitignore`/`.ignore` files and the
//! collection's glob mask and returns cheap metadata (size, mtime) so the engine can skip
//! unchanged files without reading them. [`load`] reads one file, refuses binary and
//! non-UTF-8 content with a reason, and extracts the title and content hash.

pub mod chunk;
mod paths;

pub use paths::{IgnoreRules, scan_paths};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::UNIX_EPOCH;

use globset::{GlobBuilder, GlobMatcher};
use quarry_core::{Error, Result};

/// Files larger than this are skipped with a warning unless configured otherwise.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// A file found by [`scan`]; nothing has been read yet.
#[derive(Debug, Clone)]
pub struct FileEntry {
    /// Path relative to the collection root, `/`-separated.
    pub rel_path: String,
    /// Absolute path on disk.
    pub abs_path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 when unavailable).
    pub mtime_ns: i64,
    /// Fingerprint of the file's stat data (mtime, ctime, inode), like git's index: equal
    /// stamps and sizes mean "unchanged" without reading. ctime catches `cp -p`/`tar x`,
    /// which restore an old mtime.
    pub stamp: i64,
}

/// Result of walking a collection root.
#[derive(Debug, Default)]
pub struct ScanResult {
    /// Files matching the mask, sorted by path.
    pub files: Vec<FileEntry>,
    /// Entries that could not be examined: (path, reason).
    pub problems: Vec<(String, String)>,
}

/// Compiles a collection mask. `*` stays within one directory; `**/` spans any depth.
pub fn compile_mask(mask: &str) -> Result<GlobMatcher> {
    let mask = mask.trim();
    if mask.is_empty() {
        return Err(Error::invalid("glob mask is empty"));
    }
    if mask.starts_with('/') || mask.split('/').any(|s| s == "..") {
        return Err(Error::invalid(format!(
            "glob mask {mask:?} must be relative to the collection folder and must not contain '..'"
        )));
    }
    GlobBuilder::new(mask)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| Error::invalid(format!("invalid glob mask {mask:?}: {e}")))
}

/// Walks `root` and returns the files matching `mask`, sorted by relative path.
///
/// Hidden entries (see [`is_hidden`]), `node_modules`, and anything excluded by `.gitignore`,
/// `.ignore` or `.git/info/exclude` are skipped, whether or not the folder is a git
/// repository.
pub fn scan(root: &Path, mask: &GlobMatcher) -> Result<ScanResult> {
    let meta = fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    // Fail early on an unreadable root: the walker would otherwise report "no files".
    fs::read_dir(root).map_err(|e| Error::io(root, e))?;

    let mut out = ScanResult::default();
    walk(root, root, mask, &mut out);
    settle(&mut out);
    Ok(out)
}

/// Walks `start` (`root` or a folder inside it) as [`scan`] does, adding what it finds to
/// `out` with paths relative to `root`. `start` itself is not checked against the rules
/// (the caller has: [`scan`]'s root may be a hidden folder, [`scan_paths`] checks it).
fn walk(root: &Path, start: &Path, mask: &GlobMatcher, out: &mut ScanResult) {
    let walker = ignore::WalkBuilder::new(start)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .ignore(true)
        .parents(true)
        .follow_links(false)
        .filter_entry(|e| {
            let dir = e.file_type().is_some_and(|t| t.is_dir());
            // The root itself may be a hidden folder (`~/.notes`).
            e.depth() == 0 || (e.file_name() != "node_modules" && !is_hidden(e.file_name(), dir))
        })
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                out.problems.push((String::new(), e.to_string()));
                continue;
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(rel_path) = rel_to_slash(rel).map(|p| nfc(&p)) else {
            out.problems.push((
                entry.path().display().to_string(),
                "file name is not valid UTF-8".into(),
            ));
            continue;
        };
        if !mask.is_match(&rel_path) {
            continue;
        }
        match entry.metadata() {
            Ok(m) => {
                let mtime_ns = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos() as i64)
                    .unwrap_or(0);
                out.files.push(FileEntry {
                    rel_path,
                    abs_path: entry.path().to_path_buf(),
                    size: m.len(),
                    mtime_ns,
                    stamp: stat_stamp(&m, mtime_ns),
                });
            }
            Err(e) => out.problems.push((rel_path, e.to_string())),
        }
    }
}

/// Sorts `out.files` by path and keeps one file per name once normalised.
fn settle(out: &mut ScanResult) {
    // Names that are one name once normalised (`café.md` written NFC and NFD): the one
    // spelled NFC on disk is indexed, the others are reported.
    let spelled_nfc = |f: &FileEntry| {
        f.abs_path
            .to_str()
            .is_some_and(|p| p.ends_with(&f.rel_path))
    };
    out.files.sort_by(|a, b| {
        a.rel_path
            .cmp(&b.rel_path)
            .then_with(|| spelled_nfc(b).cmp(&spelled_nfc(a)))
    });
    let mut kept: Vec<FileEntry> = Vec::with_capacity(out.files.len());
    for f in std::mem::take(&mut out.files) {
        if kept.last().is_some_and(|k| k.rel_path == f.rel_path) {
            out.problems.push((
                f.abs_path.display().to_string(),
                format!(
                    "skipped: its name is the same as {:?} once Unicode-normalised (NFC); rename one of them",
                    f.rel_path
                ),
            ));
        } else {
            kept.push(f);
        }
    }
    out.files = kept;
}

/// `name` in Unicode normalisation form C, so a name typed on one system and stored on
/// another (macOS writes `é` decomposed) is one name.
pub fn nfc(name: &str) -> String {
    use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};
    match is_nfc_quick(name.chars()) {
        IsNormalized::Yes => name.to_owned(),
        _ => name.nfc().collect(),
    }
}

/// A dot-name (`.git`, `.env`, `.draft.md`) is hidden, except a file whose name before its
/// extension is only dots: `..md` is tldr's page for the `.` command, a name, not a path.
fn is_hidden(name: &std::ffi::OsStr, dir: bool) -> bool {
    let name = name.as_encoded_bytes();
    if !name.starts_with(b".") {
        return false;
    }
    if dir {
        return true;
    }
    let stem_end = name.iter().rposition(|&b| b == b'.').unwrap_or(0);
    let stem = &name[..stem_end];
    stem.is_empty() || stem.iter().any(|&b| b != b'.')
}

#[cfg(unix)]
fn stat_stamp(m: &fs::Metadata, mtime_ns: i64) -> i64 {
    use std::os::unix::fs::MetadataExt;
    let ctime_ns = m
        .ctime()
        .wrapping_mul(1_000_000_000)
        .wrapping_add(m.ctime_nsec());
    mtime_ns ^ ctime_ns.rotate_left(21) ^ (m.ino() as i64).rotate_left(42)
}

#[cfg(not(unix))]
fn stat_stamp(_m: &fs::Metadata, mtime_ns: i64) -> i64 {
    mtime_ns
}

fn rel_to_slash(rel: &Path) -> Option<String> {
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    parts.map(|p| p.join("/"))
}

/// A file read and checked for indexing.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    /// Markdown text with a leading BOM removed and CRLF normalised to LF.
    pub text: String,
    /// Hex SHA-256 of the raw bytes.
    pub hash: String,
    /// The document's title (its first heading, else the file name).
    pub title: String,
    /// Page map when the text was converted from a paged source (PDF, slides).
    pub pages: Vec<quarry_core::PageSpan>,
    /// Furniture: what the converter found, or a Markdown file's front matter.
    pub furniture: Vec<quarry_core::Furniture>,
    /// Its metadata fields, encoded (a Markdown file's front matter; `{}`: none).
    pub meta: String,
}

/// Why a file was not indexed. The message is shown to the user as-is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

/// Reads and validates one file.
pub fn load(entry: &FileEntry, max_bytes: u64) -> Result<LoadedFile, Skip> {
    if entry.size > max_bytes {
        return Err(Skip(format!(
            "file is {} bytes, over the {max_bytes}-byte limit (QUARRY_MAX_FILE_BYTES)",
            entry.size
        )));
    }
    let bytes = fs::read(&entry.abs_path).map_err(|e| Skip(format!("cannot read: {e}")))?;
    decode(&bytes, &entry.rel_path)
}

/// Validates raw bytes as a Markdown/text document and extracts its title.
pub fn decode(bytes: &[u8], rel_path: &str) -> Result<LoadedFile, Skip> {
    let probe = &bytes[..bytes.len().min(8192)];
    if probe.contains(&0) {
        return Err(Skip("binary file (contains NUL bytes)".into()));
    }
    let hash = content_hash(bytes);
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(e) => {
            return Err(Skip(format!(
                "not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            )));
        }
    };
    let text = if text.contains('\r') {
        text.replace("\r\n", "\n")
    } else {
        text.to_owned()
    };
    let title = extract_title(&text, rel_path);
    let mut furniture = Vec::new();
    let meta = front_matter_fields(&text, &mut furniture).encode();
    Ok(LoadedFile {
        text,
        hash,
        title,
        pages: Vec::new(),
        furniture,
        meta,
    })
}

/// A Markdown text's front matter fields; its range is added to `furniture` (first: it
/// starts the text), so it is neither chunked nor keyword-indexed.
pub fn front_matter_fields(
    text: &str,
    furniture: &mut Vec<quarry_core::Furniture>,
) -> quarry_metadata::Metadata {
    let Some(front) = quarry_metadata::front_matter(text) else {
        return quarry_metadata::Metadata::default();
    };
    furniture.retain(|f| f.byte_start >= front.end);
    furniture.insert(
        0,
        quarry_core::Furniture {
            kind: quarry_core::FurnitureKind::FrontMatter,
            byte_start: 0,
            byte_end: front.end,
        },
    );
    front.fields
}

/// Hex SHA-256 of `bytes`.
pub fn content_hash(bytes: &[u8]) -> String {
    quarry_core::sha256_hex(bytes)
}

/// Title: front-matter `title:`, else the first `# ` heading (outside code fences), else
/// the first heading of any level, else the file name without extension.
pub fn extract_title(text: &str, rel_path: &str) -> String {
    let mut lines = text.lines().peekable();
    if lines.peek().is_some_and(|l| l.trim() == "---") {
        lines.next();
        for line in lines.by_ref() {
            if line.trim() == "---" {
                break;
            }
            if let Some(v) = line.strip_prefix("title:") {
                let v = v.trim().trim_matches(|c| c == '"' || c == '\'').trim();
                if !v.is_empty() {
                    return v.to_owned();
                }
            }
        }
    }
    let mut in_fence = false;
    let mut first_any: Option<String> = None;
    for line in lines {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !t.starts_with('#') {
            continue;
        }
        let level = t.chars().take_while(|&c| c == '#').count();
        let rest = &t[level..];
        if level > 6 || !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        let heading = rest.trim().trim_end_matches('#').trim();
        if heading.is_empty() {
            continue;
        }
        if level == 1 {
            return heading.to_owned();
        }
        first_any.get_or_insert_with(|| heading.to_owned());
    }
    first_any.unwrap_or_else(|| file_stem(rel_path))
}

fn file_stem(rel_path: &str) -> String {
    let name = rel_path.rsplit('/').next().unwrap_or(rel_path);
    match name.rfind('.') {
        Some(i) if i > 0 => name[..i].to_owned(),
        _ => name.to_owned(),
    }
}

/// Runs `git pull --ff-only` in `root` when it is inside a git work tree.
/// Returns `Ok(None)` when it is not a repository.
pub fn git_pull(root: &Path) -> Result<Option<String>> {
    let inside = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--is-inside-work-tree"])
        .output();
    match inside {
        Ok(o) if o.status.success() => {}
        Ok(_) => return Ok(None),
        Err(e) => return Err(Error::io("git", e)),
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["pull", "--ff-only"])
        .output()
        .map_err(|e| Error::io("git", e))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(Some(text.trim().to_owned()))
    } else {
        Err(Error::invalid(format!(
            "git pull in {} failed: {}",
            root.display(),
            text.trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        assert_eq!(extract_title("# Hello\ntext", "a/b.md"), "Hello");
        assert_eq!(extract_title("intro\n## Sub\n# Main", "b.md"), "Main");
        assert_eq!(extract_title("intro\n## Sub\n", "b.md"), "Sub");
        assert_eq!(extract_title("```\n# not\n```\nplain", "dir/x.y.md"), "x.y");
        assert_eq!(
            extract_title("---\ntitle: \"Front\"\n---\n# H", "a.md"),
            "Front"
        );
        assert_eq!(extract_title("#hashtag only", "n.md"), "n");
    }

    #[test]
    fn decode_rejects_binary_and_bad_utf8() {
        assert!(decode(b"abc\0def", "x").unwrap_err().0.contains("binary"));
        let err = decode(b"ok \xff\xfe", "x").unwrap_err();
        assert!(
            err.0.contains("UTF-8") && err.0.contains("offset 3"),
            "{err:?}"
        );
        let ok = decode(b"\xEF\xBB\xBF# T\r\nline\r\n", "x").unwrap();
        assert_eq!(ok.text, "# T\nline\n");
        assert_eq!(ok.title, "T");
    }

    #[test]
    fn masks() {
        let m = compile_mask("**/*.md").unwrap();
        assert!(m.is_match("a.md") && m.is_match("x/y/a.md") && !m.is_match("a.txt"));
        let m = compile_mask("*.md").unwrap();
        assert!(m.is_match("a.md") && !m.is_match("x/a.md"));
        assert!(compile_mask("../*.md").is_err());
        assert!(compile_mask("/etc/*").is_err());
        assert!(compile_mask("a[").is_err());
    }

    #[test]
    #[cfg(unix)]
    fn names_are_normalised_and_one_of_two_spellings_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("caf\u{e9}.md"), "# nfc").unwrap();
        fs::write(root.join("cafe\u{301}.md"), "# nfd").unwrap();
        fs::write(root.join("re\u{301}sume\u{301}.md"), "# nfd only").unwrap();
        let res = scan(root, &compile_mask("**/*.md").unwrap()).unwrap();
        let names: Vec<_> = res.files.iter().map(|f| f.rel_path.as_str()).collect();
        assert_eq!(names, ["caf\u{e9}.md", "r\u{e9}sum\u{e9}.md"]);
        assert!(res.files[0].abs_path.ends_with("caf\u{e9}.md"));
        assert_eq!(res.problems.len(), 1, "{:?}", res.problems);
        assert!(res.problems[0].1.contains("NFC"));
    }

    #[test]
    fn scan_honours_gitignore_and_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::create_dir_all(root.join(".hidden")).unwrap();
        fs::create_dir_all(root.join("node_modules/pkg")).unwrap();
        fs::write(root.join(".gitignore"), "ignored.md\n").unwrap();
        for p in [
            "a.md",
            "sub/b.md",
            "ignored.md",
            ".hidden/c.md",
            "node_modules/pkg/d.md",
            "e.txt",
            "..md",
            "sub/..md",
            ".draft.md",
            ".md",
        ] {
            fs::write(root.join(p), "# x").unwrap();
        }
        let res = scan(root, &compile_mask("**/*.md").unwrap()).unwrap();
        let names: Vec<_> = res.files.iter().map(|f| f.rel_path.as_str()).collect();
        assert_eq!(names, ["..md", "a.md", "sub/..md", "sub/b.md"]);
    }
}
