//! Content-addressed blob storage: originals of uploaded documents and the images extracted
//! from them, named by the SHA-256 of their bytes, so the same bytes are stored once.
//!
//! [`BlobStore`] is the seam SPEC §3 asks for: [`FsBlobStore`] keeps blobs in the data
//! directory (`blobs/ab/cdef…`); `quarry-blobs-object` keeps them in an S3-compatible bucket
//! for several nodes, staging in a local [`Staging`] directory and taking its locks from a
//! [`BlobLocks`] its creator passes. The store (`quarry-store`) records which blobs are
//! referenced; this crate only holds bytes. The `conformance` feature adds the suite every
//! backend runs ([`conformance`]).
//!
//! Uploads are staged: [`BlobStore::stage`] streams bytes into a temporary file while
//! hashing and counting them (refusing more than a limit without buffering the body), then
//! [`Staged::commit`] moves the file to its content address. Deleting garbage and committing
//! new references must not interleave (a blob judged orphaned could be referenced again
//! just before its bytes go): writers of references hold [`BlobStore::lock_shared`] from
//! `commit` until their store transaction is durable; the collector holds
//! [`BlobStore::lock_exclusive`] while it decides and deletes.
//!
//! A staging file is locked (`flock`) by the process writing it until it is at its address,
//! so the files of a process that died mid-upload are the unlocked ones:
//! [`BlobStore::sweep_staging`] removes those (when the store opens, and with every blob
//! collection) while another process — a CLI beside a server — may be staging right now.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use quarry_core::{Error, Result, hex_lower, sha256_hex};
use sha2::{Digest, Sha256};

#[cfg(feature = "conformance")]
pub mod conformance;

/// A held blob lock; released on drop. It holds whatever guard its provider hands it: a
/// locked file ([`FileBlobLocks`]), a database session holding an advisory lock, …
pub struct BlobLock {
    _guard: Box<dyn Send>,
}

impl BlobLock {
    /// A lock that is held until `guard` is dropped.
    pub fn new(guard: Box<dyn Send>) -> BlobLock {
        BlobLock { _guard: guard }
    }
}

/// Where the garbage-collection locks of a blob store come from (see the crate docs): many
/// writers of references share a lock the collector takes alone. Every process that writes
/// references to, or collects, the same blobs must use the same provider: a file lock
/// ([`FileBlobLocks`]) serves the processes of one machine; blobs shared by several nodes
/// need a lock they all see (e.g. a database's advisory lock).
pub trait BlobLocks: Send + Sync {
    /// The writers' lock (held from `commit` until the reference is durable).
    fn shared(&self) -> Result<BlobLock>;
    /// The collector's lock.
    fn exclusive(&self) -> Result<BlobLock>;
}

/// [`BlobLocks`] as `flock`s on one file: for the processes of one machine.
pub struct FileBlobLocks {
    path: PathBuf,
}

impl FileBlobLocks {
    /// Locks on `path` (created when first locked; its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> FileBlobLocks {
        FileBlobLocks { path: path.into() }
    }

    fn open(&self) -> Result<File> {
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, e))
    }
}

impl BlobLocks for FileBlobLocks {
    fn shared(&self) -> Result<BlobLock> {
        let file = self.open()?;
        file.lock_shared().map_err(|e| Error::io(&self.path, e))?;
        Ok(BlobLock::new(Box::new(file)))
    }

    fn exclusive(&self) -> Result<BlobLock> {
        let file = self.open()?;
        file.lock().map_err(|e| Error::io(&self.path, e))?;
        Ok(BlobLock::new(Box::new(file)))
    }
}

/// Storage of immutable byte strings by SHA-256.
pub trait BlobStore: Send + Sync {
    /// Starts an upload: bytes written to the returned [`Staged`] are hashed and counted.
    fn stage(&self) -> Result<Staged>;
    /// Makes staged bytes durable at their address and returns it. Take
    /// [`BlobStore::lock_shared`] first and hold it until the reference is committed.
    fn commit(&self, staged: Staged) -> Result<String>;
    /// Stores bytes already in memory (extracted images); returns their SHA-256.
    fn put(&self, bytes: &[u8]) -> Result<String>;
    /// Size of a stored blob, `None` when absent.
    fn size(&self, sha256: &str) -> Result<Option<u64>>;
    /// Reads `len` bytes from `offset` (fewer at the end).
    fn read_range(&self, sha256: &str, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// Reads a whole blob.
    fn read(&self, sha256: &str) -> Result<Vec<u8>>;
    /// Deletes a blob (absent is fine).
    fn delete(&self, sha256: &str) -> Result<()>;
    /// Every stored blob with its modification time (sweeps for bytes no row names).
    fn list(&self) -> Result<Vec<(String, SystemTime)>>;
    /// Held by writers of blob references (see the crate docs).
    fn lock_shared(&self) -> Result<BlobLock>;
    /// Held by the garbage collector.
    fn lock_exclusive(&self) -> Result<BlobLock>;
    /// Removes staging files no live upload is writing (left by a process that died
    /// mid-upload); returns how many went.
    fn sweep_staging(&self) -> Result<u64>;
}

/// A staging file younger than this is left alone even when unlocked: it may have been
/// created an instant ago by a writer about to lock it.
const STAGING_GRACE: Duration = Duration::from_secs(5);

/// Where file locks are not supported, an unlocked staging file is taken for a leftover
/// only when nothing wrote to it for this long.
const STAGING_GRACE_UNLOCKABLE: Duration = Duration::from_secs(24 * 3600);

/// Blobs in a directory: `<root>/<first two hex>/<remaining hex>`; staging in `<root>/tmp`.
pub struct FsBlobStore {
    root: PathBuf,
    staging: Staging,
    locks: FileBlobLocks,
}

/// A directory of staging files (`*.part`), each locked by the process writing it: where
/// [`Staged`] uploads stream to before they go to their address. [`FsBlobStore`] stages in
/// `<root>/tmp`; a remote store stages in a local directory of its own.
pub struct Staging {
    dir: PathBuf,
    root: PathBuf,
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
    file: Option<File>,
    tmp: PathBuf,
    root: PathBuf,
    hasher: Sha256,
    len: u64,
    limit: u64,
}

/// Whether `s` is a lower-case hex SHA-256 (anything else never reaches the file system).
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn blob_path(root: &Path, sha256: &str) -> Result<PathBuf> {
    if !is_sha256(sha256) {
        return Err(Error::invalid(format!("{sha256:?} is not a SHA-256")));
    }
    Ok(root.join(&sha256[..2]).join(&sha256[2..]))
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
    fn check_complete(&self) -> Result<()> {
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
