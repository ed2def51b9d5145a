//! A source's own mask of file types: which listed paths are synced at all.

use globset::{GlobMatcher, GlobSet, GlobSetBuilder};

use crate::error::SourceError;

/// Which paths a source syncs: globs over the path inside the source (`**/*.md`,
/// `handbook/**/*.pdf`); a path matching any of them is synced.
#[derive(Debug, Clone)]
pub struct FileMask {
    patterns: Vec<String>,
    set: GlobSet,
}

impl FileMask {
    /// A mask from comma-separated globs (`"**/*.md, **/*.pdf"`).
    pub fn parse(text: &str) -> Result<FileMask, SourceError> {
        let patterns: Vec<String> = text
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        if patterns.is_empty() {
            return Err(SourceError::Invalid(
                "the file mask is empty: give at least one glob, e.g. \"**/*.md\"".into(),
            ));
        }
        FileMask::of(patterns)
    }

    fn of(patterns: Vec<String>) -> Result<FileMask, SourceError> {
        let mut set = GlobSetBuilder::new();
        for p in &patterns {
            let glob: GlobMatcher =
                quarry_ingest::compile_mask(p).map_err(|e| SourceError::Invalid(e.to_string()))?;
            set.add(glob.glob().clone());
        }
        let set = set
            .build()
            .map_err(|e| SourceError::Invalid(format!("invalid file mask: {e}")))?;
        Ok(FileMask { patterns, set })
    }

    /// This mask and `extra` globs too (files a sync reads for itself, such as a
    /// `CODEOWNERS` file).
    pub fn with_extra(&self, extra: &[&str]) -> Result<FileMask, SourceError> {
        let mut patterns = self.patterns.clone();
        patterns.extend(extra.iter().map(|p| (*p).to_owned()));
        FileMask::of(patterns)
    }

    /// Whether `path` (inside the source) is synced.
    pub fn admits(&self, path: &str) -> bool {
        self.is_everything() || self.set.is_match(path)
    }

    /// Whether it admits every path.
    pub fn is_everything(&self) -> bool {
        self.patterns.iter().any(|p| p == "**")
    }

    /// The globs, comma-separated, as [`FileMask::parse`] reads them.
    pub fn text(&self) -> String {
        self.patterns.join(", ")
    }
}

impl Default for FileMask {
    /// Every path (`**`): the sync itself skips, with the reason, formats Quarry does not
    /// convert.
    fn default() -> FileMask {
        FileMask {
            patterns: vec!["**".to_owned()],
            set: GlobSet::empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_admit_paths() {
        let mask = FileMask::parse("**/*.md, docs/*.pdf").unwrap();
        assert!(mask.admits("a.md") && mask.admits("x/y/z.md"));
        assert!(mask.admits("docs/a.pdf"));
        assert!(!mask.admits("docs/sub/a.pdf"), "`*` stays in one folder");
        assert!(!mask.admits("a.txt"));
        assert_eq!(mask.text(), "**/*.md, docs/*.pdf");
    }

    #[test]
    fn the_default_admits_everything() {
        let mask = FileMask::default();
        for p in ["README.md", "a/b.pdf", "Makefile", ".hidden/x"] {
            assert!(mask.admits(p), "{p}");
        }
        assert!(FileMask::parse("**").unwrap().is_everything());
        assert_eq!(mask.text(), "**");
    }

    #[test]
    fn bad_masks_are_refused() {
        for bad in ["", " , ", "/abs/*.md", "../*.md", "a/[.md"] {
            assert!(
                matches!(FileMask::parse(bad), Err(SourceError::Invalid(_))),
                "{bad:?}"
            );
        }
    }
}
