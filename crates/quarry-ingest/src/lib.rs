//! Ingestion: turns folders on disk into candidate documents.
//!
//! [`scan()`] walks a collection root honouring `.gitignore`/`.ignore` files and the
//! collection's glob mask and returns cheap metadata (size, mtime) so the engine can skip
//! unchanged files without reading them. [`load()`] reads one file, refuses binary and
//! non-UTF-8 content with a reason, and extracts the title and content hash.

pub mod chunk;
mod load;
mod paths;
mod scan;

pub use load::{
    DEFAULT_MAX_FILE_BYTES, LoadedFile, Skip, content_hash, decode, extract_title,
    front_matter_fields, load,
};
pub use paths::{IgnoreRules, scan_paths};
pub use scan::{FileEntry, ScanResult, compile_mask, nfc, scan};

use std::path::Path;
use std::process::Command;

use quarry_core::{Error, Result};

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
