//! The usearch-backed HNSW index.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::error::{Result, VectorError};
use crate::exact::sort_best_first;
use crate::format::{self, TRAILER_LEN, Trailer};
use crate::{Metric, Quantization, VectorIndexOptions};

/// Capacity reserved by `create` (and the floor after `open`); grows ×2 from there.
const INITIAL_CAPACITY: usize = 1024;
/// Number of striped locks that serialise add/remove of the same key.
const KEY_STRIPES: usize = 64;
/// usearch's message when a node cannot be placed (capacity exhausted).
const CAPACITY_MESSAGE: &str = "Reserve capacity";

/// Persisted HNSW index over `u64` keys and `f32` vectors. See the crate docs for the
/// similarity convention, the file format and the thread-safety guarantees.
///
/// `VectorIndex` is `Send + Sync`: every method takes `&self`, so share it with `Arc`.
pub struct VectorIndex {
    /// The usearch index. Read lock: add / remove / search / save. Write lock: reserve.
    index: RwLock<Index>,
    /// Taken shared by add/remove and exclusively by `save`, so a snapshot is consistent
    /// without blocking searches.
    mutations: RwLock<()>,
    /// Serialises concurrent saves (they share the `.tmp` file).
    save_lock: Mutex<()>,
    /// Serialises add/remove of the same key (stripe = key % KEY_STRIPES).
    key_locks: Vec<Mutex<()>>,
    /// Bounds concurrent calls into usearch to the number of thread contexts it has.
    contexts: Semaphore,
    threads: usize,
    options: VectorIndexOptions,
}

// `usearch::Index` is `Send + Sync` (the crate asserts it, the C++ index is designed for
// concurrent use); all other fields are std synchronisation types. Checked at compile time:
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<VectorIndex>();
};

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("options", &self.options)
            .finish()
    }
}

/// A counting semaphore (std has none).
struct Semaphore {
    available: Mutex<usize>,
    freed: Condvar,
}

struct Permit<'a>(&'a Semaphore);

impl Semaphore {
    fn new(permits: usize) -> Self {
        Semaphore {
            available: Mutex::new(permits),
            freed: Condvar::new(),
        }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut available = lock(&self.available);
        while *available == 0 {
            available = self
                .freed
                .wait(available)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *available -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *lock(&self.0.available) += 1;
        self.0.freed.notify_one();
    }
}

/// Locks a mutex, ignoring poisoning: the guarded data is `()` or a plain counter, which a
/// panic cannot leave inconsistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(4)
        .clamp(4, 64)
}

fn usearch_options(options: &VectorIndexOptions) -> IndexOptions {
    let (metric, quantization) = match (options.metric, options.quantization) {
        // Normalised inputs: inner product == cosine, and it is the cheapest kernel.
        (Metric::Cosine, Quantization::F32) => (MetricKind::IP, ScalarKind::F32),
        // usearch's i8 inner product is an unscaled integer dot product (distances in the
        // thousands); its i8 cosine kernel normalises, giving the same ranking on [-1, 1].
        (Metric::Cosine, Quantization::I8) => (MetricKind::Cos, ScalarKind::I8),
    };
    IndexOptions {
        dimensions: options.dimensions,
        metric,
        quantization,
        connectivity: options.connectivity,
        expansion_add: options.expansion_add,
        expansion_search: options.expansion_search,
        multi: false,
    }
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| VectorError::NonUtf8Path(path.to_path_buf()))
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".tmp");
    PathBuf::from(name)
}

fn check_vector(expected: usize, vector: &[f32]) -> Result<()> {
    if vector.len() != expected {
        return Err(VectorError::DimensionMismatch {
            expected,
            actual: vector.len(),
        });
    }
    if let Some(position) = vector.iter().position(|x| !x.is_finite()) {
        return Err(VectorError::NonFiniteValue { position });
    }
    Ok(())
}

impl VectorIndex {
    /// Creates an empty in-memory index.
    pub fn create(options: VectorIndexOptions) -> Result<Self> {
        options.validate()?;
        let index = Index::new(&usearch_options(&options))
            .map_err(|e| VectorError::backend("create", e))?;
        let threads = default_threads();
        index
            .reserve_capacity_and_threads(INITIAL_CAPACITY, threads)
            .map_err(|e| VectorError::backend("reserve", e))?;
        Ok(VectorIndex {
            index: RwLock::new(index),
            mutations: RwLock::new(()),
            save_lock: Mutex::new(()),
            key_locks: (0..KEY_STRIPES).map(|_| Mutex::new(())).collect(),
            contexts: Semaphore::new(threads),
            threads,
            options,
        })
    }

    /// Loads an index saved by [`VectorIndex::save`].
    ///
    /// The file's trailer, length and CRC-32 are verified before usearch reads it. Errors:
    /// * [`VectorError::Io`] if the file cannot be read ([`VectorError::is_not_found`] for a
    ///   missing file);
    /// * [`VectorError::IndexDimensionMismatch`] if it was built for other dimensions (the
    ///   embedding model changed: rebuild the index);
    /// * [`VectorError::IndexConfigMismatch`] if it was built with another metric or
    ///   quantization;
    /// * [`VectorError::Corrupt`] if it is truncated, damaged or not written by this crate.
    ///
    /// `expansion_add` and `expansion_search` are taken from `options`; the graph itself
    /// (including the connectivity it was built with) comes from the file.
    pub fn open(path: &Path, options: VectorIndexOptions) -> Result<Self> {
        options.validate()?;
        let path_utf8 = path_str(path)?;
        let trailer = format::read_and_verify(path)?;

        if trailer.dimensions != options.dimensions as u64 {
            return Err(VectorError::IndexDimensionMismatch {
                path: path.to_path_buf(),
                expected: options.dimensions,
                found: usize::try_from(trailer.dimensions).unwrap_or(usize::MAX),
            });
        }
        let metric = format::metric_from_code(trailer.metric).ok_or_else(|| {
            VectorError::corrupt(path, format!("unknown metric code {}", trailer.metric))
        })?;
        let quantization =
            format::quantization_from_code(trailer.quantization).ok_or_else(|| {
                VectorError::corrupt(
                    path,
                    format!("unknown quantization code {}", trailer.quantization),
                )
            })?;
        for (setting, expected, found) in [
            (
                "metric",
                format!("{:?}", options.metric),
                format!("{metric:?}"),
            ),
            (
                "quantization",
                format!("{:?}", options.quantization),
                format!("{quantization:?}"),
            ),
        ] {
            if expected != found {
                return Err(VectorError::IndexConfigMismatch {
                    path: path.to_path_buf(),
                    setting,
                    expected,
                    found,
                });
            }
        }

        // Cross-check usearch's own header against the trailer.
        let expected = usearch_options(&options);
        let meta = Index::metadata(path_utf8).map_err(|e| {
            VectorError::corrupt(path, format!("usearch header unreadable: {}", e.what()))
        })?;
        if meta.dimensions != trailer.dimensions
            || meta.metric != expected.metric
            || meta.quantization != expected.quantization
            || meta.multi
        {
            return Err(VectorError::corrupt(
                path,
                format!(
                    "usearch header ({} dims, {:?}, {:?}, multi={}) disagrees with the trailer",
                    meta.dimensions, meta.metric, meta.quantization, meta.multi
                ),
            ));
        }

        let this = Self::create(options)?;
        {
            let index = this.write_index();
            index
                .load(path_utf8)
                .map_err(|e| VectorError::backend("load", format!("{path_utf8}: {}", e.what())))?;
            index.change_expansion_add(this.options.expansion_add);
            index.change_expansion_search(this.options.expansion_search);
            let capacity = index.capacity().max(INITIAL_CAPACITY);
            index
                .reserve_capacity_and_threads(capacity, this.threads)
                .map_err(|e| VectorError::backend("reserve", e))?;
            if index.size() as u64 != trailer.count {
                return Err(VectorError::corrupt(
                    path,
                    format!(
                        "loaded {} vectors but the trailer records {}",
                        index.size(),
                        trailer.count
                    ),
                ));
            }
        }
        Ok(this)
    }

    /// Writes the index to `path` atomically: the data goes to `<path>.tmp`, gets a
    /// checksummed trailer, is fsynced, and is renamed over `path`.
    ///
    /// Adds and removes wait while the usearch serialisation runs; searches do not.
    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = tmp_path(path);
        let tmp_utf8 = path_str(&tmp)?;
        let _one_saver = lock(&self.save_lock);
        let result = self.save_inner(path, &tmp, tmp_utf8);
        if result.is_err() {
            // Best effort: never leave a stale temporary behind.
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn save_inner(&self, path: &Path, tmp: &Path, tmp_utf8: &str) -> Result<()> {
        let count = {
            let _no_mutations = self
                .mutations
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let index = self.read_index();
            index
                .save(tmp_utf8)
                .map_err(|e| VectorError::backend("save", format!("{tmp_utf8}: {}", e.what())))?;
            index.size() as u64
        };

        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(tmp)
            .map_err(|e| VectorError::io(tmp, e))?;
        let payload_len = file.metadata().map_err(|e| VectorError::io(tmp, e))?.len();
        let mut trailer = Trailer {
            payload_len,
            crc32: 0,
            format_version: format::FORMAT_VERSION,
            dimensions: self.options.dimensions as u64,
            count,
            metric: format::metric_code(self.options.metric),
            quantization: format::quantization_code(self.options.quantization),
        };
        let mut hasher = format::crc_of_prefix(&mut file, tmp, payload_len)?;
        hasher.update(&trailer.checksummed_bytes());
        trailer.crc32 = hasher.finalize();
        let encoded: [u8; TRAILER_LEN] = trailer.encode();
        file.write_all(&encoded)
            .map_err(|e| VectorError::io(tmp, e))?;
        file.sync_all().map_err(|e| VectorError::io(tmp, e))?;
        drop(file);

        std::fs::rename(tmp, path).map_err(|e| VectorError::io(path, e))?;
        // Persist the rename itself (best effort: not every platform can open a directory).
        if let Some(dir) = path.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// Number of live vectors (removed ones excluded).
    pub fn len(&self) -> usize {
        self.read_index().size()
    }

    /// `true` when the index holds no vectors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimensions of every vector in the index.
    pub fn dimensions(&self) -> usize {
        self.options.dimensions
    }

    /// The options the index was created or opened with.
    pub fn options(&self) -> &VectorIndexOptions {
        &self.options
    }

    /// Number of vector slots currently reserved (grows ×2 automatically).
    pub fn capacity(&self) -> usize {
        self.read_index().capacity()
    }

    /// Approximate memory used by the index, in bytes (usearch's estimate).
    pub fn memory_usage(&self) -> usize {
        self.read_index().memory_usage()
    }

    /// The SIMD kernel usearch picked for distance computations at run time
    /// (for example `"skylake"` or `"serial"`).
    pub fn hardware_acceleration(&self) -> String {
        self.read_index().hardware_acceleration()
    }

    /// Inserts `vector` under `key`, replacing any vector already stored under `key`.
    ///
    /// Fails with [`VectorError::DimensionMismatch`] or [`VectorError::NonFiniteValue`] on
    /// bad input. Capacity is reserved automatically, doubling when full.
    pub fn add(&self, key: u64, vector: &[f32]) -> Result<()> {
        check_vector(self.options.dimensions, vector)?;
        let _same_key = self.key_lock(key);
        let _no_save = self
            .mutations
            .read()
            .unwrap_or_else(PoisonError::into_inner);

        // Replacing: remove first (usearch rejects duplicate keys in a unique index).
        {
            let index = self.read_index();
            if index.contains(key) {
                index
                    .remove(key)
                    .map_err(|e| VectorError::backend("remove", e))?;
            }
        }

        let mut attempts = 0;
        loop {
            self.ensure_capacity(1)?;
            let index = self.read_index();
            let _context = self.contexts.acquire();
            match index.add(key, vector) {
                Ok(()) => return Ok(()),
                // Another thread filled the last slot between our check and our add.
                Err(e) if e.what().contains(CAPACITY_MESSAGE) && attempts < 8 => attempts += 1,
                Err(e) => return Err(VectorError::backend("add", e)),
            }
        }
    }

    /// Removes the vector stored under `key`. Returns whether it was present.
    ///
    /// The slot is reused by later adds; searches never return a removed key.
    pub fn remove(&self, key: u64) -> Result<bool> {
        let _same_key = self.key_lock(key);
        let _no_save = self
            .mutations
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let removed = self
            .read_index()
            .remove(key)
            .map_err(|e| VectorError::backend("remove", e))?;
        Ok(removed > 0)
    }

    /// Whether a vector is stored under `key`.
    pub fn contains(&self, key: u64) -> bool {
        self.read_index().contains(key)
    }

    /// The vector stored under `key` (dequantised for [`Quantization::I8`]), if any.
    pub fn get(&self, key: u64) -> Result<Option<Vec<f32>>> {
        let mut out = vec![0.0f32; self.options.dimensions];
        let found = self
            .read_index()
            .get(key, &mut out)
            .map_err(|e| VectorError::backend("get", e))?;
        Ok((found > 0).then_some(out))
    }

    /// Approximate top-`k` search.
    ///
    /// Returns up to `k` `(key, similarity)` pairs, best first (ties by ascending key);
    /// `similarity = 1 − distance` is the cosine similarity for normalised vectors.
    ///
    /// With `filter`, only keys for which it returns `true` are returned. The filter is
    /// evaluated *during* the graph traversal (usearch's predicate search): rejected nodes
    /// are still used for navigation but never enter the result list, so a selective filter
    /// does not shrink the result set the way post-filtering would. For very selective
    /// filters (well under 1% of the index) prefer [`crate::exact_search`] over the
    /// matching vectors. A panic inside `filter` is caught at the FFI boundary (unwinding
    /// through C++ would abort) and re-raised here after the search returns.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&dyn Fn(u64) -> bool>,
    ) -> Result<Vec<(u64, f32)>> {
        check_vector(self.options.dimensions, query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let panic_payload: RefCell<Option<Box<dyn Any + Send>>> = RefCell::new(None);
        let matches = {
            let index = self.read_index();
            // More results than live vectors cannot exist; clamping also keeps an absurd `k`
            // from reaching usearch's result allocation.
            let k = k.min(index.size());
            if k == 0 {
                return Ok(Vec::new());
            }
            let _context = self.contexts.acquire();
            match filter {
                None => index.search(query, k),
                Some(keep) => {
                    let guarded = |key: u64| -> bool {
                        if panic_payload.borrow().is_some() {
                            return false;
                        }
                        match catch_unwind(AssertUnwindSafe(|| keep(key))) {
                            Ok(verdict) => verdict,
                            Err(payload) => {
                                *panic_payload.borrow_mut() = Some(payload);
                                false
                            }
                        }
                    };
                    index.filtered_search(query, k, guarded)
                }
            }
        };
        if let Some(payload) = panic_payload.into_inner() {
            resume_unwind(payload);
        }
        let matches = matches.map_err(|e| VectorError::backend("search", e))?;
        let mut out: Vec<(u64, f32)> = matches
            .keys
            .iter()
            .zip(&matches.distances)
            .map(|(&key, &distance)| (key, 1.0 - distance))
            .collect();
        sort_best_first(&mut out);
        Ok(out)
    }

    /// Makes room for `extra` more vectors, doubling the capacity as needed.
    fn ensure_capacity(&self, extra: usize) -> Result<()> {
        {
            let index = self.read_index();
            if index.size().saturating_add(extra) <= index.capacity() {
                return Ok(());
            }
        }
        let index = self.write_index();
        let capacity = index.capacity();
        let needed = index.size().saturating_add(extra);
        if needed > capacity {
            let target = needed.max(capacity.saturating_mul(2)).max(INITIAL_CAPACITY);
            index
                .reserve_capacity_and_threads(target, self.threads)
                .map_err(|e| VectorError::backend("reserve", e))?;
        }
        Ok(())
    }

    fn read_index(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_index(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn key_lock(&self, key: u64) -> MutexGuard<'_, ()> {
        lock(&self.key_locks[(key % KEY_STRIPES as u64) as usize])
    }
}
