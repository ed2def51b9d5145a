//! Blobs in a directory of the local file system.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use quarry_core::{Error, Result, sha256_hex};

use crate::lock::{BlobLock, BlobLocks, FileBlobLocks};
use crate::staging::{Staged, Staging};
use crate::store::{BlobStore, is_sha256};

/// Blobs in a directory: `<root>/<first two hex>/<remaining hex>`; staging in `<root>/tmp`.
pub struct FsBlobStore {
    root: PathBuf,
    staging: Staging,
    locks: FileBlobLocks,
}

fn blob_path(root: &Path, sha256: &str) -> Result<PathBuf> {
    if !is_sha256(sha256) {
        return Err(Error::invalid(format!("{sha256:?} is not a SHA-256")));
    }
    Ok(root.join(&sha256[..2]).join(&sha256[2..]))
}

impl FsBlobStore {
    /// Opens (creating) the directory and removes what a crashed upload left in staging.
    pub fn open(root: &Path) -> Result<FsBlobStore> {
        let mut staging = Staging::open(&root.join("tmp"))?;
        staging.root = root.to_owned();
        let store = FsBlobStore {
            root: root.to_owned(),
            staging,
            locks: FileBlobLocks::new(root.join("gc.lock")),
        };
        store.sweep_staging()?;
        Ok(store)
    }

    /// Moves a finished temporary file to its address (or drops it when the bytes are
    /// already there), fsyncing so an acknowledged upload survives a crash.
    fn install(&self, tmp: &Path, sha256: &str) -> Result<()> {
        let dest = blob_path(&self.root, sha256)?;
        if dest.exists() {
            let _ = fs::remove_file(tmp);
            // Refresh the time so a sweep never takes a just-uploaded blob for an old orphan.
            let _ = File::options()
                .write(true)
                .open(&dest)
                .and_then(|f| f.set_modified(SystemTime::now()));
            return Ok(());
        }
        if let Some(dir) = dest.parent() {
            fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        fs::rename(tmp, &dest).map_err(|e| Error::io(&dest, e))?;
        if let Some(dir) = dest.parent()
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl BlobStore for FsBlobStore {
    fn stage(&self) -> Result<Staged> {
        self.staging.stage()
    }

    fn commit(&self, mut staged: Staged) -> Result<String> {
        staged.check_complete()?;
        let sha = staged.sha256();
        let file = staged
            .file
            .take()
            .ok_or_else(|| Error::Storage("staged upload already committed".into()))?;
        let tmp = std::mem::take(&mut staged.tmp);
        // The file stays open, so locked, until it is at its address: a sweep in another
        // process never takes it for a leftover.
        let installed = file
            .sync_all()
            .map_err(|e| Error::io(&tmp, e))
            .and_then(|()| self.install(&tmp, &sha));
        if installed.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        drop(file);
        installed.map(|()| sha)
    }

    fn put(&self, bytes: &[u8]) -> Result<String> {
        let sha = sha256_hex(bytes);
        if blob_path(&self.root, &sha)?.exists() {
            return Ok(sha);
        }
        let mut staged = self.stage()?;
        staged.write_all(bytes)?;
        self.commit(staged)
    }

    fn size(&self, sha256: &str) -> Result<Option<u64>> {
        let path = blob_path(&self.root, sha256)?;
        match fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    fn read_range(&self, sha256: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let path = blob_path(&self.root, sha256)?;
        let mut f = File::open(&path).map_err(|e| Error::io(&path, e))?;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(&path, e))?;
        let mut buf = Vec::with_capacity(len.min(1 << 20));
        f.take(len as u64)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(&path, e))?;
        Ok(buf)
    }

    fn read(&self, sha256: &str) -> Result<Vec<u8>> {
        let path = blob_path(&self.root, sha256)?;
        fs::read(&path).map_err(|e| Error::io(&path, e))
    }

    fn delete(&self, sha256: &str) -> Result<()> {
        let path = blob_path(&self.root, sha256)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    fn list(&self) -> Result<Vec<(String, SystemTime)>> {
        let mut out = Vec::new();
        let entries = fs::read_dir(&self.root).map_err(|e| Error::io(&self.root, e))?;
        for dir in entries.flatten() {
            let prefix = dir.file_name().to_string_lossy().into_owned();
            if prefix.len() != 2 || !dir.path().is_dir() {
                continue;
            }
            let Ok(files) = fs::read_dir(dir.path()) else {
                continue;
            };
            for f in files.flatten() {
                let sha = format!("{prefix}{}", f.file_name().to_string_lossy());
                if !is_sha256(&sha) {
                    continue;
                }
                let modified = f
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                out.push((sha, modified));
            }
        }
        Ok(out)
    }

    fn lock_shared(&self) -> Result<BlobLock> {
        self.locks.shared()
    }

    fn lock_exclusive(&self) -> Result<BlobLock> {
        self.locks.exclusive()
    }

    fn sweep_staging(&self) -> Result<u64> {
        self.staging.sweep()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn same_bytes_are_stored_once_and_read_back_by_range() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let a = store.put(b"hello world").unwrap();
        let b = store.put(b"hello world").unwrap();
        assert_eq!(a, b);
        assert_eq!(a, sha256_hex(b"hello world"));
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(store.size(&a).unwrap(), Some(11));
        assert_eq!(store.read_range(&a, 6, 100).unwrap(), b"world");
        store.delete(&a).unwrap();
        assert_eq!(store.size(&a).unwrap(), None);
        store.delete(&a).unwrap();
    }

    #[test]
    fn staging_hashes_streams_and_refuses_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let mut s = store.stage().unwrap().with_limit(8);
        s.write_all(b"abcd").unwrap();
        s.write_all(b"efgh").unwrap();
        assert_eq!(s.sha256(), sha256_hex(b"abcdefgh"));
        let err = s.write_all(b"i").unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
        drop(s);
        // Nothing left behind: neither a blob nor the temporary file.
        assert!(store.list().unwrap().is_empty());
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn the_sweep_removes_only_staging_files_nobody_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let old = SystemTime::now() - Duration::from_secs(60);
        let age = |p: &Path| {
            File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap()
        };
        // Left by a dead process: unlocked and old.
        let dead = dir.path().join("tmp").join("1-2-3.part");
        fs::write(&dead, b"half an upload").unwrap();
        age(&dead);
        // Written now by a live upload, just as old.
        let mut live = store.stage().unwrap();
        live.write_all(b"streaming").unwrap();
        let live_path = live.tmp.clone();
        age(&live_path);
        // Unlocked but just created (its writer may be about to lock it).
        let young = dir.path().join("tmp").join("4-5-6.part");
        fs::write(&young, b"").unwrap();

        assert_eq!(store.sweep_staging().unwrap(), 1);
        assert!(!dead.exists() && live_path.exists() && young.exists());
        let sha = store.commit(live).unwrap();
        assert_eq!(store.read(&sha).unwrap(), b"streaming");
        // Opening the store sweeps too.
        age(&young);
        FsBlobStore::open(dir.path()).unwrap();
        assert!(!young.exists());
    }

    #[test]
    fn names_that_are_not_hashes_never_touch_the_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        assert!(store.read("../../etc/passwd").is_err());
        assert!(store.size("ABCDEF").is_err());
        assert!(!is_sha256(&"g".repeat(64)));
    }
}
