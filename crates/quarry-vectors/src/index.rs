//! The usearch-backed HNSW index.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashSet;
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
use crate::options::{Metric, Quantization, SearchEffort, VectorIndexOptions};

/// Capacity reserved by `create` (and the floor after `open`); grows ×2 from there.
const INITIAL_CAPACITY: usize = 1024;
/// Number of striped locks that serialise add/remove of the same key.
const KEY_STRIPES: usize = 64;
/// usearch's message when a node cannot be placed (capacity exhausted).
const CAPACITY_MESSAGE: &str = "Reserve capacity";
/// usearch's marker for a removed slot (`default_free_value<u64>()`).
const FREE_KEY: u64 = u64::MAX;
/// The `expansion_search` usearch itself is configured with.
///
/// usearch searches the base layer with `ef = max(configured expansion_search, wanted)`
/// (`index_gt::search`). Keeping the configured value at 1 and asking for
/// `wanted = max(k, ef)` results (then keeping the best `k`) lets every query choose its own
/// `ef` without touching shared state: `Index::change_expansion_search` is an unsynchronised
/// write to the index's config that every concurrent search would observe.
const USEARCH_EXPANSION_SEARCH: usize = 1;

/// Persisted HNSW index over `u64` keys and `f32` vectors. See the crate docs for the
/// similarity convention, the file format and the thread-safety guarantees.
///
/// `VectorIndex` is `Send + Sync`: every method takes `&self`, so share it with `Arc`.
pub struct VectorIndex {
    /// The usearch index. Read lock: add / remove / search / save. Write lock: reserve, and
    /// the first add into an empty index.
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
    /// Lets exact scans run only while no add/remove is in flight.
    scan_gate: ScanGate,
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

/// Keeps usearch's brute-force scan apart from inserts and removals.
///
/// usearch's exact search walks every slot up to its node counter, which an insert bumps
/// *before* the node is written, and it reads keys that a removal rewrites in place; the
/// graph search only reaches nodes through published links and has neither problem. So a
/// scan runs only while no add or remove is in flight, and mutators wait for running scans
/// (bounded: one pass over the vectors). Scans never wait: [`ScanGate::try_scan`] fails
/// while a mutator is active *or waiting*, and the search uses the graph instead, so
/// neither side can starve the other.
struct ScanGate {
    state: Mutex<GateState>,
    scans_done: Condvar,
}

#[derive(Default)]
struct GateState {
    /// Adds/removes running or waiting to run.
    mutators: usize,
    /// Scans running.
    scans: usize,
}

struct MutatorPass<'a>(&'a ScanGate);
struct ScanPass<'a>(&'a ScanGate);

impl ScanGate {
    fn new() -> Self {
        ScanGate {
            state: Mutex::new(GateState::default()),
            scans_done: Condvar::new(),
        }
    }

    fn mutate(&self) -> MutatorPass<'_> {
        let mut state = lock(&self.state);
        state.mutators += 1;
        while state.scans > 0 {
            state = self
                .scans_done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        MutatorPass(self)
    }

    fn try_scan(&self) -> Option<ScanPass<'_>> {
        let mut state = lock(&self.state);
        if state.mutators > 0 {
            return None;
        }
        state.scans += 1;
        Some(ScanPass(self))
    }
}

impl Drop for MutatorPass<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).mutators -= 1;
    }
}

impl Drop for ScanPass<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        state.scans -= 1;
        if state.scans == 0 {
            self.0.scans_done.notify_all();
        }
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
        expansion_search: USEARCH_EXPANSION_SEARCH,
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

/// Converts usearch matches (`distance = 1 − similarity`) to the crate's convention and
/// keeps the best `k`: similarity descending, ties by ascending key.
///
/// Drops [`FREE_KEY`]: usearch writes it into the slot of a removed vector and reads result
/// keys back from the slots only after the traversal, so a graph search racing a `remove`
/// can report the removed vector under that key. usearch never returns it otherwise (its
/// searches skip slots holding it), and since searches ask for `ef ≥ k` results there are
/// usually spares to fill the gap.
fn best_k(keys: &[u64], distances: &[f32], k: usize) -> Vec<(u64, f32)> {
    let mut out: Vec<(u64, f32)> = keys
        .iter()
        .zip(distances)
        .filter(|&(&key, _)| key != FREE_KEY)
        .map(|(&key, &distance)| (key, 1.0 - distance))
        .collect();
    sort_best_first(&mut out);
    out.truncate(k);
    out
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
            scan_gate: ScanGate::new(),
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
            index.change_expansion_search(USEARCH_EXPANSION_SEARCH);
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
        let _no_scan = self.scan_gate.mutate();

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
            let result = if index.size() == 0 {
                // usearch's first insertion into an empty graph bumps the node count
                // before it writes the node, and a search starting in between walks an
                // entry point without a vector (a null dereference). Insert into an empty
                // index exclusively; every later node is only reachable once written.
                drop(index);
                let index = self.write_index();
                let _context = self.contexts.acquire();
                index.add(key, vector)
            } else {
                let _context = self.contexts.acquire();
                index.add(key, vector)
            };
            match result {
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
        let _no_scan = self.scan_gate.mutate();
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

    /// Top-`k` search with the index's default effort,
    /// `SearchEffort::Auto(options.expansion_search)`; see [`VectorIndex::search_with`].
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
        self.search_with(
            query,
            k,
            filter,
            SearchEffort::Auto(self.options.expansion_search),
        )
    }

    /// Top-`k` search with a per-query effort (see [`SearchEffort`]).
    ///
    /// Same results contract and filter semantics as [`VectorIndex::search`]. The effort
    /// only affects this call: concurrent searches keep their own, and nothing is changed
    /// in the index (usearch's `change_expansion_search` would be an unsynchronised write
    /// seen by every concurrent search, so it is never called here).
    ///
    /// * [`SearchEffort::Graph`]`(ef)`: HNSW search of the base layer with
    ///   `ef = max(ef, k)`, clamped to the number of live vectors. Time grows roughly
    ///   linearly with `ef`, recall towards 1.
    /// * [`SearchEffort::Auto`]`(ef)`: the same, except that an unfiltered search whose
    ///   `max(ef, k) · 2M` reaches the number of live vectors (`M` = the graph's
    ///   connectivity) scans every vector instead. The graph search evaluates up to `2M`
    ///   neighbours of each of its `ef` expanded candidates, so from that point on its worst
    ///   case computes as many distances as the scan, plus the graph walk. On isotropic
    ///   data the worst case is the real case and the scan is as fast or faster; on
    ///   clustered data near the threshold the graph visits fewer nodes and the scan can
    ///   cost up to ~2× as much (fractions of a millisecond at that size), for exact
    ///   results. This covers small indexes (≤ 2,048 vectors at the defaults) and large
    ///   `ef` on hard data (see the crate docs). The scan is skipped, and the graph used,
    ///   while an add or remove is in flight (usearch's scan cannot run alongside them).
    pub fn search_with(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&dyn Fn(u64) -> bool>,
        effort: SearchEffort,
    ) -> Result<Vec<(u64, f32)>> {
        check_vector(self.options.dimensions, query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let (expansion, may_scan) = match effort {
            SearchEffort::Auto(ef) => (ef, filter.is_none()),
            SearchEffort::Graph(ef) => (ef, false),
        };
        let panic_payload: RefCell<Option<Box<dyn Any + Send>>> = RefCell::new(None);
        let matches = {
            let index = self.read_index();
            let live = index.size();
            // More results than live vectors cannot exist; clamping also keeps an absurd `k`
            // (or `ef`) from reaching usearch's result allocation.
            let k = k.min(live);
            if k == 0 {
                return Ok(Vec::new());
            }
            let ef = expansion.max(k).min(live);
            let base_degree = index.connectivity().saturating_mul(2);
            let scan_pays = may_scan && ef.saturating_mul(base_degree) >= live;
            let scan = if scan_pays {
                self.scan_gate.try_scan()
            } else {
                None
            };
            let _context = self.contexts.acquire();
            let result = match (scan, filter) {
                (Some(_scan), _) => index.exact_search(query, k),
                // usearch explores `max(configured ef, wanted)` candidates (see
                // `USEARCH_EXPANSION_SEARCH`): asking for `ef` results gives this query its `ef`.
                (None, None) => index.search(query, ef),
                (None, Some(keep)) => {
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
                    index.filtered_search(query, ef, guarded)
                }
            };
            result.map(|matches| (matches, k))
        };
        if let Some(payload) = panic_payload.into_inner() {
            resume_unwind(payload);
        }
        let (matches, k) = matches.map_err(|e| VectorError::backend("search", e))?;
        Ok(best_k(&matches.keys, &matches.distances, k))
    }

    /// Top-`k` among the keys in `allowed` (a collection filter), by whichever of the two
    /// ways costs fewer distance computations:
    ///
    /// * the graph with the filter as a predicate and `ef` scaled by the share of live
    ///   vectors `allowed` keeps ([`filtered_ef`]): rejected nodes are walked but never enter
    ///   the result list, so keeping `k` results costs about `ef / share` candidates for the
    ///   recall `ef` gives unfiltered (a fixed `ef` lost a third of the true neighbours at 5 %);
    /// * an exact scan of the allowed keys' vectors, when there are no more of them than that
    ///   graph search's worst case computes distances (`ef · 2M`): exact, and no slower.
    ///
    /// Keys in `allowed` that the index lacks are skipped. Results as [`VectorIndex::search`].
    pub fn search_among(
        &self,
        query: &[f32],
        k: usize,
        allowed: &HashSet<u64>,
        ef: usize,
    ) -> Result<Vec<(u64, f32)>> {
        check_vector(self.options.dimensions, query)?;
        let live = self.len();
        if k == 0 || allowed.is_empty() || live == 0 {
            return Ok(Vec::new());
        }
        let ef = filtered_ef(ef, k, allowed.len(), live);
        let worst_case = ef.saturating_mul(self.options.connectivity.saturating_mul(2));
        if allowed.len() <= worst_case {
            return self.exact_among(allowed.iter().copied(), query, k);
        }
        let keep = |key: u64| allowed.contains(&key);
        self.search_with(query, k, Some(&keep), SearchEffort::Graph(ef))
    }

    /// Exact top-`k` over the stored vectors of `keys` (missing keys skipped): one buffer,
    /// one lock, no vector copied out.
    pub fn exact_among(
        &self,
        keys: impl IntoIterator<Item = u64>,
        query: &[f32],
        k: usize,
    ) -> Result<Vec<(u64, f32)>> {
        check_vector(self.options.dimensions, query)?;
        let index = self.read_index();
        let mut buffer = vec![0.0f32; self.options.dimensions];
        let mut scored = Vec::new();
        for key in keys {
            let found = index
                .get(key, &mut buffer)
                .map_err(|e| VectorError::backend("get", e))?;
            if found > 0 {
                scored.push((key, crate::exact::dot(&buffer, query) + 0.0));
            }
        }
        drop(index);
        scored.retain(|(_, s)| !s.is_nan());
        if scored.len() > k {
            scored.select_nth_unstable_by(k - 1, |a, b| {
                b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0))
            });
            scored.truncate(k);
        }
        sort_best_first(&mut scored);
        Ok(scored)
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

/// The largest `ef` of a filtered graph search: past it an exact scan of the filter's keys
/// is cheaper anyway (it is chosen whenever they number at most `ef · 2M`).
pub const MAX_FILTERED_EF: usize = 4096;

/// `ef` for a graph search whose filter keeps `allowed` of `live` vectors: `ef / share`,
/// at least `ef` and `k`, at most [`MAX_FILTERED_EF`] (and `k` if that is more).
pub fn filtered_ef(ef: usize, k: usize, allowed: usize, live: usize) -> usize {
    let share = (allowed.max(1) as f64 / live.max(1) as f64).min(1.0);
    let scaled = (ef as f64 / share).ceil() as usize;
    scaled.min(MAX_FILTERED_EF).max(ef).max(k)
}
