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

#[cfg(feature = "conformance")]
pub mod conformance;
mod fs_store;
mod lock;
mod staging;
mod store;

pub use fs_store::FsBlobStore;
pub use lock::{BlobLock, BlobLocks, FileBlobLocks};
pub use staging::{Staged, StagedFile, Staging};
pub use store::{BlobStore, is_sha256};
