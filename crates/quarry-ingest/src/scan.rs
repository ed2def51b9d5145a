//! Walking a collection folder: the files a mask takes, with the stat data that tells an
//! unchanged file without reading it.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use globset::{GlobBuilder, GlobMatcher};
use quarry_core::{Error, Result};

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
/// (the caller has: [`scan`]'s root may be a hidden folder, [`scan_paths`](crate::scan_paths) checks it).
pub(crate) fn walk(root: &Path, start: &Path, mask: &GlobMatcher, out: &mut ScanResult) {
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
pub(crate) fn settle(out: &mut ScanResult) {
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
pub(crate) fn is_hidden(name: &std::ffi::OsStr, dir: bool) -> bool {
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
pub(crate) fn stat_stamp(m: &fs::Metadata, mtime_ns: i64) -> i64 {
    use std::os::unix::fs::MetadataExt;
    let ctime_ns = m
        .ctime()
        .wrapping_mul(1_000_000_000)
        .wrapping_add(m.ctime_nsec());
    mtime_ns ^ ctime_ns.rotate_left(21) ^ (m.ino() as i64).rotate_left(42)
}

#[cfg(not(unix))]
pub(crate) fn stat_stamp(_m: &fs::Metadata, mtime_ns: i64) -> i64 {
    mtime_ns
}

fn rel_to_slash(rel: &Path) -> Option<String> {
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    parts.map(|p| p.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
