//! A folder on the machine that runs the sync. Versions come from `stat` (size and a stamp
//! of mtime, ctime and inode, as Git's index does), so a re-sync with nothing changed reads
//! no file. Hidden entries, `node_modules` and what `.gitignore`/`.ignore` exclude are left
//! out ([`quarry_ingest::scan`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::SourceError;
use crate::mask::FileMask;
use crate::source::{Item, Listing, Source};

/// A folder source.
pub struct FolderSource {
    root: PathBuf,
    mask: FileMask,
}

impl FolderSource {
    /// The folder at `root` (absolute), syncing the paths `mask` admits.
    pub fn new(root: &Path, mask: FileMask) -> Result<FolderSource, SourceError> {
        if !root.is_absolute() {
            return Err(SourceError::Invalid(format!(
                "the folder {} must be given as an absolute path",
                root.display()
            )));
        }
        Ok(FolderSource {
            root: root.to_path_buf(),
            mask,
        })
    }
}

impl FolderSource {
    /// The items of a scan the mask admits, versioned by `stat`.
    fn listing(&self, scan: quarry_ingest::ScanResult) -> Listing {
        let items = scan
            .files
            .into_iter()
            .filter(|f| self.mask.admits(&f.rel_path))
            .map(|f| Item {
                version: format!("{}:{}", f.size, f.stamp),
                size: Some(f.size),
                path: f.rel_path,
            })
            .collect();
        Listing {
            items,
            revision: None,
            problems: scan.problems,
        }
    }
}

impl Source for FolderSource {
    fn list(&mut self) -> Result<Listing, SourceError> {
        if !self.root.is_dir() {
            return Err(SourceError::NotFound(format!(
                "the folder {} does not exist (or is not a directory)",
                self.root.display()
            )));
        }
        let everything =
            quarry_ingest::compile_mask("**").map_err(|e| SourceError::Invalid(e.to_string()))?;
        let scan = quarry_ingest::scan(&self.root, &everything).map_err(|e| match e {
            quarry_core::Error::Io { path, error } => SourceError::io(path.display(), error),
            other => SourceError::Unavailable(other.to_string()),
        })?;
        Ok(self.listing(scan))
    }

    fn list_paths(&mut self, paths: &[String]) -> Result<Listing, SourceError> {
        if !self.root.is_dir() {
            return Err(SourceError::NotFound(format!(
                "the folder {} does not exist (or is not a directory)",
                self.root.display()
            )));
        }
        let everything =
            quarry_ingest::compile_mask("**").map_err(|e| SourceError::Invalid(e.to_string()))?;
        let scan =
            quarry_ingest::scan_paths(&self.root, paths, &everything).map_err(|e| match e {
                quarry_core::Error::Io { path, error } => SourceError::io(path.display(), error),
                other => SourceError::Unavailable(other.to_string()),
            })?;
        Ok(self.listing(scan))
    }

    fn fetch(&mut self, item: &Item, max_bytes: u64) -> Result<Vec<u8>, SourceError> {
        if item.path.split('/').any(|s| s.is_empty() || s == "..") {
            return Err(SourceError::Invalid(format!(
                "invalid path {:?}",
                item.path
            )));
        }
        let path = self.root.join(&item.path);
        // Listed as a file: a symbolic link put there since is not followed out of the folder.
        let meta = std::fs::symlink_metadata(&path).map_err(|e| SourceError::io(&item.path, e))?;
        if !meta.is_file() {
            return Err(SourceError::NotFound(format!(
                "{} is no longer a regular file",
                item.path
            )));
        }
        if meta.len() > max_bytes {
            return Err(SourceError::TooLarge {
                path: item.path.clone(),
                size: meta.len(),
                limit: max_bytes,
            });
        }
        let file = std::fs::File::open(&path).map_err(|e| SourceError::io(&item.path, e))?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| SourceError::io(&item.path, e))?;
        if bytes.len() as u64 > max_bytes {
            return Err(SourceError::TooLarge {
                path: item.path.clone(),
                size: bytes.len() as u64,
                limit: max_bytes,
            });
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_with_stat_versions_and_fetches() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/.hidden")).unwrap();
        std::fs::write(dir.path().join("a/one.md"), "# One").unwrap();
        std::fs::write(dir.path().join("a/.hidden/x.md"), "no").unwrap();
        std::fs::write(dir.path().join("two.txt"), "two").unwrap();
        std::fs::write(dir.path().join("skip.bin"), "x").unwrap();
        let mut src =
            FolderSource::new(dir.path(), FileMask::parse("**/*.md, **/*.txt").unwrap()).unwrap();
        let listing = src.list().unwrap();
        let paths: Vec<&str> = listing.items.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, vec!["a/one.md", "two.txt"]);
        let first = listing.items[0].clone();
        assert!(first.version.starts_with("5:"), "{first:?}");
        assert_eq!(src.fetch(&first, 100).unwrap(), b"# One");
        assert!(matches!(
            src.fetch(&first, 3),
            Err(SourceError::TooLarge {
                size: 5,
                limit: 3,
                ..
            })
        ));

        // Same listing twice: same versions. A rewrite: a new version.
        assert_eq!(src.list().unwrap().items, listing.items);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("a/one.md"), "# One!").unwrap();
        let again = src.list().unwrap();
        assert_ne!(again.items[0].version, first.version);
        assert_eq!(again.items[1], listing.items[1]);
    }

    #[test]
    fn listing_a_few_paths_gives_what_a_full_listing_gives_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/one.md"), "1").unwrap();
        std::fs::write(dir.path().join("a/two.md"), "2").unwrap();
        std::fs::write(dir.path().join("a/skip.txt"), "x").unwrap();
        std::fs::write(dir.path().join("three.md"), "3").unwrap();
        let mut src = FolderSource::new(dir.path(), FileMask::parse("**/*.md").unwrap()).unwrap();
        let full = src.list().unwrap();
        let some = src
            .list_paths(&[
                "a".into(),
                "three.md".into(),
                "gone.md".into(),
                "a/skip.txt".into(),
            ])
            .unwrap();
        assert_eq!(some.items, full.items);
        let one = src.list_paths(&["a/b/one.md".into()]).unwrap();
        assert_eq!(one.items, full.items[..1]);
        assert!(
            src.list_paths(&["a/b/gone.md".into()])
                .unwrap()
                .items
                .is_empty()
        );
    }

    #[test]
    fn a_missing_folder_and_bad_paths_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut src = FolderSource::new(&dir.path().join("gone"), FileMask::default()).unwrap();
        assert!(matches!(src.list(), Err(SourceError::NotFound(_))));
        let mut src = FolderSource::new(dir.path(), FileMask::default()).unwrap();
        let evil = Item {
            path: "../etc/passwd".into(),
            version: String::new(),
            size: None,
        };
        assert!(matches!(
            src.fetch(&evil, 100),
            Err(SourceError::Invalid(_))
        ));
        assert!(FolderSource::new(Path::new("rel"), FileMask::default()).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_not_followed_out() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), dir.path().join("link.md"))
            .unwrap();
        let mut src = FolderSource::new(dir.path(), FileMask::default()).unwrap();
        assert!(src.list().unwrap().items.is_empty(), "links are not listed");
        let link = Item {
            path: "link.md".into(),
            version: String::new(),
            size: None,
        };
        assert!(matches!(
            src.fetch(&link, 100),
            Err(SourceError::NotFound(_))
        ));
    }
}
