//! The write lock of a data directory: one process writes at a time; readers never take it.

use std::fs::File;

/// Exclusive right to write, across processes; released on drop.
pub(crate) struct WriteGuard {
    _file: File,
}

impl WriteGuard {
    /// The guard of a lock file this process has locked.
    pub(crate) fn holding(file: File) -> WriteGuard {
        WriteGuard { _file: file }
    }
}

#[cfg(test)]
impl WriteGuard {
    /// The write lock of a test's data directory `dir`.
    pub(crate) fn in_dir(dir: &std::path::Path) -> WriteGuard {
        let path = dir.join("write.lock");
        match File::create(&path).and_then(|f| f.lock().map(|()| f)) {
            Ok(file) => WriteGuard { _file: file },
            Err(e) => panic!("lock {}: {e}", path.display()),
        }
    }
}
