//! Uploads staged in a directory of locked files before they go to their address.

use std::fs::{self, File};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use quarry_core::{Error, Result, hex_lower};
use sha2::{Digest, Sha256};

/// A staging file younger than this is left alone even when unlocked: it may have been
/// created an instant ago by a writer about to lock it.
const STAGING_GRACE: Duration = Duration::from_secs(5);

/// Where file locks are not supported, an unlocked staging file is taken for a leftover
/// only when nothing wrote to it for this long.
const STAGING_GRACE_UNLOCKABLE: Duration = Duration::from_secs(24 * 3600);

/// A directory of staging files (`*.part`), each locked by the process writing it: where
/// [`Staged`] uploads stream to before they go to their address.
/// [`FsBlobStore`](crate::FsBlobStore) stages in `<root>/tmp`; a remote store stages in a
/// local directory of its own.
pub struct Staging {
    dir: PathBuf,
    /// The store's root (a [`FsBlobStore`](crate::FsBlobStore) sets its own).
    pub(crate) root: PathBuf,
}

/// A finished upload taken out of its [`Staged`] ([`Staged::finish`]) by a store that
/// copies the bytes elsewhere: the staging file stays open (so locked: no sweep takes it)
/// until this is dropped, and is removed then.
pub struct StagedFile {
    file: File,
    path: PathBuf,
    sha256: String,
    len: u64,
}

/// Bytes being uploaded. Dropped without [`Staged::commit`], the temporary file goes.
pub struct Staged {
    pub(crate) file: Option<File>,
    pub(crate) tmp: PathBuf,
    root: PathBuf,
    hasher: Sha256,
    len: u64,
    limit: u64,
}

/// Temporary-file names unique within the process and across processes.
fn tmp_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{}-{}.part",
        std::process::id(),
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Staging {
    /// Opens (creating) a staging directory. Nothing else should live in it but staging
    /// files; the sweep only ever removes `*.part` files.
    pub fn open(dir: &Path) -> Result<Staging> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        Ok(Staging {
            dir: dir.to_owned(),
            root: dir.to_owned(),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts an upload: a new, locked staging file (no size limit until
    /// [`Staged::with_limit`]).
    pub fn stage(&self) -> Result<Staged> {
        let tmp = self.dir.join(tmp_name());
        // Readable too: a remote store uploads from it ([`Staged::finish`]).
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io(&tmp, e))?;
        // Held until the file is at its address or gone (see `sweep`); where locks are
        // unsupported the sweep goes by age instead.
        let _ = file.try_lock();
        Ok(Staged {
            file: Some(file),
            tmp,
            root: self.root.clone(),
            hasher: Sha256::new(),
            len: 0,
            limit: u64::MAX,
        })
    }

    /// Removes staging files no live upload is writing (left by a process that died
    /// mid-upload); returns how many went.
    pub fn sweep(&self) -> Result<u64> {
        let entries = fs::read_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let staging = path.extension().is_some_and(|e| e == "part")
                && entry.file_type().is_ok_and(|t| t.is_file());
            if staging && Self::is_abandoned(&path, now) && fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Whether a staging file is a leftover: nobody holds its lock, and it is past the grace.
    fn is_abandoned(path: &Path, now: SystemTime) -> bool {
        let Ok(file) = File::options().write(true).open(path) else {
            return false;
        };
        let age = file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        match file.try_lock() {
            Ok(()) => age > STAGING_GRACE,
            Err(fs::TryLockError::WouldBlock) => false,
            Err(fs::TryLockError::Error(_)) => age > STAGING_GRACE_UNLOCKABLE,
        }
    }
}

impl Staged {
    /// Refuse more than `limit` bytes ([`Staged::write_all`] then fails with
    /// [`Error::TooLarge`]).
    pub fn with_limit(mut self, limit: u64) -> Staged {
        self.limit = limit;
        self
    }

    /// Appends bytes; fails once the total exceeds the limit (nothing is kept).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.len += bytes.len() as u64;
        if self.len > self.limit {
            return Err(Error::TooLarge(format!(
                "exceeds {} MB",
                self.limit / (1024 * 1024)
            )));
        }
        self.hasher.update(bytes);
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| Error::Storage("staged upload already committed".into()))?;
        file.write_all(bytes).map_err(|e| Error::io(&self.tmp, e))
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// SHA-256 of what was written (the address [`Staged::commit`] will use).
    pub fn sha256(&self) -> String {
        hex_lower(&self.hasher.clone().finalize())
    }

    /// The root this upload belongs to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Ends the upload for a store that copies the bytes elsewhere (see [`StagedFile`]).
    /// An upload that went past its limit is refused: its bytes are incomplete.
    pub fn finish(mut self) -> Result<StagedFile> {
        self.check_complete()?;
        let sha256 = self.sha256();
        let mut file = self
            .file
            .take()
            .ok_or_else(|| Error::Storage("staged upload already committed".into()))?;
        let path = std::mem::take(&mut self.tmp);
        let rewound = file.flush().and_then(|()| file.rewind());
        let staged = StagedFile {
            file,
            path,
            sha256,
            len: self.len,
        };
        rewound.map_err(|e| Error::io(&staged.path, e))?;
        Ok(staged)
    }

    /// Refuses an upload a write was refused from (past the limit).
    pub(crate) fn check_complete(&self) -> Result<()> {
        if self.len > self.limit {
            return Err(Error::TooLarge(format!(
                "exceeds {} MB",
                self.limit / (1024 * 1024)
            )));
        }
        Ok(())
    }
}

impl StagedFile {
    /// The staging file, open for reading from the start.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// SHA-256 of its bytes (lower-case hex).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}
