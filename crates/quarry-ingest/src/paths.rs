//! The same decisions as [`scan`](fn@crate::scan), for a few paths rather than a whole folder:
//! what a watched folder's changed paths hold now ([`scan_paths`]), and whether one path is
//! left out ([`IgnoreRules`]) — a hidden entry or `node_modules` on its way, or a
//! `.gitignore`, `.ignore` or `.git/info/exclude` rule of a folder above it — without
//! reading the folders beside it. The cost follows the paths asked about, never the size of
//! the folder around them.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use globset::GlobMatcher;
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use quarry_core::{Error, Result};

use crate::scan::{FileEntry, ScanResult, is_hidden, nfc, scan, settle, stat_stamp, walk};

/// The ignore rules of one folder.
#[derive(Default)]
struct FolderRules {
    /// `.ignore`.
    ignore: Option<Gitignore>,
    /// `.gitignore`.
    git: Option<Gitignore>,
    /// `.git/info/exclude`, in a repository's top folder.
    exclude: Option<Gitignore>,
    /// Whether the folder is a repository's top (has `.git`): Git's rules of the folders
    /// above it do not reach inside.
    repository: bool,
}

/// Whether paths inside a root are left out by the rules [`scan`](fn@crate::scan) applies. Rules
/// files are read once per folder for the life of the value: make a new one to see edits.
pub struct IgnoreRules {
    root: PathBuf,
    folders: HashMap<PathBuf, Arc<FolderRules>>,
}

impl IgnoreRules {
    /// Rules for paths inside `root`.
    pub fn new(root: &Path) -> IgnoreRules {
        IgnoreRules {
            root: root.to_path_buf(),
            folders: HashMap::new(),
        }
    }

    /// Whether `rel` (`/`-separated, inside the root; `is_dir` when it is a folder) is left
    /// out: one of its parts is hidden or `node_modules`, or the rules of the folders above
    /// a part exclude it (the deepest rule that matches decides, `.ignore` before
    /// `.gitignore` before `.git/info/exclude`, as the walker decides). The root itself is
    /// never left out.
    pub fn excludes(&mut self, rel: &str, is_dir: bool) -> bool {
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let mut path = self.root.clone();
        for (i, part) in parts.iter().enumerate() {
            let dir = is_dir || i + 1 < parts.len();
            if *part == "node_modules" || is_hidden(OsStr::new(part), dir) {
                return true;
            }
            path.push(part);
            if self.ignored(&path, dir) {
                return true;
            }
        }
        false
    }

    /// Whether the rules of the folders above `path` exclude it.
    fn ignored(&mut self, path: &Path, is_dir: bool) -> bool {
        let (mut by_ignore, mut by_git, mut by_exclude) = (Match::None, Match::None, Match::None);
        let mut past_repository = false;
        let mut folder = path.parent();
        while let Some(dir) = folder {
            let rules = self.rules(dir);
            if by_ignore.is_none()
                && let Some(g) = &rules.ignore
            {
                by_ignore = g.matched(path, is_dir).map(|_| ());
            }
            if !past_repository {
                if by_git.is_none()
                    && let Some(g) = &rules.git
                {
                    by_git = g.matched(path, is_dir).map(|_| ());
                }
                if by_exclude.is_none()
                    && let Some(g) = &rules.exclude
                {
                    by_exclude = g.matched(path, is_dir).map(|_| ());
                }
            }
            past_repository |= rules.repository;
            folder = dir.parent();
        }
        by_ignore.or(by_git).or(by_exclude).is_ignore()
    }

    fn rules(&mut self, dir: &Path) -> Arc<FolderRules> {
        if let Some(r) = self.folders.get(dir) {
            return r.clone();
        }
        let read = |file: PathBuf| -> Option<Gitignore> {
            if !file.is_file() {
                return None;
            }
            let mut b = GitignoreBuilder::new(dir);
            // A malformed line is left out, as the walker leaves it out.
            let _ = b.add(&file);
            b.build().ok().filter(|g| !g.is_empty())
        };
        let git_dir = dir.join(".git");
        let repository = git_dir.exists();
        let rules = Arc::new(FolderRules {
            ignore: read(dir.join(".ignore")),
            git: read(dir.join(".gitignore")),
            exclude: if repository {
                read(git_dir.join("info").join("exclude"))
            } else {
                None
            },
            repository,
        });
        self.folders.insert(dir.to_path_buf(), rules.clone());
        rules
    }
}

/// What `paths` (inside `root`, `/`-separated) hold now, by [`scan`](fn@crate::scan)'s rules:
/// a file is itself, a folder everything under it, a path that is gone or left out
/// nothing. Only these paths are read (a folder's whole tree), never the folders beside
/// them. A path that cannot be examined is a problem, so a caller comparing with what it
/// knew does not take it for gone. The empty path is the whole root.
pub fn scan_paths(root: &Path, paths: &[String], mask: &GlobMatcher) -> Result<ScanResult> {
    let meta = fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    let mut wanted: Vec<&str> = paths.iter().map(|p| p.trim_matches('/')).collect();
    wanted.sort_unstable();
    wanted.dedup();
    // A folder asked for covers the paths under it.
    let mut kept: Vec<&str> = Vec::with_capacity(wanted.len());
    for p in wanted {
        if kept
            .last()
            .is_some_and(|k| k.is_empty() || (p.starts_with(k) && p[k.len()..].starts_with('/')))
        {
            continue;
        }
        kept.push(p);
    }
    if kept.first().is_some_and(|p| p.is_empty()) {
        return scan(root, mask);
    }
    let mut out = ScanResult::default();
    let mut rules = IgnoreRules::new(root);
    for rel in kept {
        if rel
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
        {
            out.problems
                .push((rel.to_owned(), "not a path inside the folder".into()));
            continue;
        }
        let abs = root.join(rel);
        let meta = match fs::symlink_metadata(&abs) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory => {
                continue;
            }
            Err(e) => {
                out.problems.push((nfc(rel), e.to_string()));
                continue;
            }
        };
        if rules.excludes(rel, meta.is_dir()) {
            continue;
        }
        if meta.is_dir() {
            walk(root, &abs, mask, &mut out);
        } else if meta.is_file() {
            let rel_path = nfc(rel);
            if !mask.is_match(&rel_path) {
                continue;
            }
            let mtime_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i64)
                .unwrap_or(0);
            out.files.push(FileEntry {
                rel_path,
                abs_path: abs,
                size: meta.len(),
                mtime_ns,
                stamp: stat_stamp(&meta, mtime_ns),
            });
        }
        // Anything else (a symbolic link, a socket) is not a file the scan lists.
    }
    settle(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn everything() -> GlobMatcher {
        crate::compile_mask("**").unwrap()
    }

    /// The files of [`tree`], excluded or not.
    const TREE_FILES: [&str; 13] = [
        "one.md",
        "x.log",
        "keep.log",
        "build/out.md",
        "a/two.md",
        "a/secret.md",
        "a/b/three.md",
        "a/b/deep.log",
        "a/b/other.log",
        ".hidden/h.md",
        "a/.draft.md",
        "node_modules/m/readme.md",
        "c/d/e.md",
    ];

    /// A tree with every kind of rule the scan applies.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(r, ".gitignore", "*.log\nbuild/\n!keep.log\n");
        write(r, "a/.ignore", "secret.md\n");
        write(r, "a/b/.gitignore", "!deep.log\n");
        for f in TREE_FILES {
            write(r, f, "# x");
        }
        dir
    }

    #[test]
    fn one_path_at_a_time_decides_as_the_scan_does() {
        let dir = tree();
        let r = dir.path();
        let scanned: Vec<String> = crate::scan(r, &everything())
            .unwrap()
            .files
            .into_iter()
            .map(|f| f.rel_path)
            .collect();
        let mut rules = IgnoreRules::new(r);
        for f in TREE_FILES {
            assert_eq!(
                !rules.excludes(f, false),
                scanned.iter().any(|s| s == f),
                "{f} (the scan found {scanned:?})"
            );
        }
        assert!(rules.excludes("build", true));
        assert!(!rules.excludes("a/b", true));
        assert!(!rules.excludes("", true), "the root is never left out");
    }

    #[test]
    fn paths_hold_files_folders_or_nothing() {
        let dir = tree();
        let r = dir.path();
        let got = |paths: &[&str]| -> Vec<String> {
            let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
            scan_paths(r, &paths, &everything())
                .unwrap()
                .files
                .into_iter()
                .map(|f| f.rel_path)
                .collect()
        };
        assert_eq!(got(&["one.md"]), ["one.md"]);
        assert_eq!(got(&["a/b"]), ["a/b/deep.log", "a/b/three.md"]);
        assert_eq!(
            got(&["a", "a/two.md"]),
            ["a/b/deep.log", "a/b/three.md", "a/two.md"]
        );
        assert!(got(&["gone.md", "x.log", "build", "a/secret.md", ".hidden"]).is_empty());
        assert_eq!(got(&["c"]), ["c/d/e.md"]);
        assert_eq!(got(&[""]).len(), 6, "the empty path is the whole folder");
        let md = crate::compile_mask("**/*.md").unwrap();
        let only = scan_paths(r, &["a/b".into(), "keep.log".into()], &md).unwrap();
        assert_eq!(only.files.len(), 1);
        // The same stamp as the scan's: a listing of a few paths compares with a full one.
        let full = crate::scan(r, &everything()).unwrap();
        let one = scan_paths(r, &["a/two.md".into()], &everything()).unwrap();
        let same = full
            .files
            .iter()
            .find(|f| f.rel_path == "a/two.md")
            .unwrap();
        assert_eq!(
            (one.files[0].size, one.files[0].stamp),
            (same.size, same.stamp)
        );
        let bad = scan_paths(r, &["../etc".into()], &everything()).unwrap();
        assert!(bad.files.is_empty() && bad.problems.len() == 1);
    }
}
