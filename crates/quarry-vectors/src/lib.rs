//! # quarry-vectors
//!
//! The persisted approximate-nearest-neighbour (ANN) index over Quarry's chunk embeddings,
//! plus an exact brute-force path used for small collections and as the recall oracle.
//!
//! * [`VectorIndex`] wraps a [`usearch`] HNSW index (C++, compiled by the `usearch` crate's
//!   build script through `cxx`; no network access needed at build time).
//! * [`exact_search`] is a brute-force dot-product top-k over any iterator of vectors.
//! * [`SearchEffort`] picks the effort of one search ([`VectorIndex::search_with`]).
//!
//! ## Similarity
//!
//! The only metric is [`Metric::Cosine`]. Callers L2-normalise their embeddings, so with
//! [`Quantization::F32`] the index uses usearch's inner-product metric (`distance = 1 − a·b`).
//! With [`Quantization::I8`] the index uses usearch's cosine metric on the `i8` codes: usearch's
//! `i8` inner product is an unnormalised integer dot product, which would return
//! similarities like `-16000`; the cosine kernel gives the same ranking on a `[-1, 1]` scale.
//! Every search returns `(key, similarity)` with `similarity = 1 − distance` (the cosine of
//! the angle, higher is better), ordered best first, ties broken by ascending key.
//!
//! ## Search effort and recall
//!
//! [`VectorIndex::search`] runs `SearchEffort::Auto(expansion_search)`: an HNSW search with
//! `ef = expansion_search` (default 64), except that an *unfiltered* search whose
//! `max(ef, k) · 2M` reaches the number of live vectors scans every vector instead (exact,
//! and no more distance computations than the graph search's worst case). With the defaults
//! that means indexes of up to 2,048 vectors are searched exactly. On clustered data near
//! that size the graph search is cheaper than its worst case, so the scan costs up to ~2×
//! more (0.14 vs 0.08 ms at 2,000 × 384) but is exact; on isotropic data the two cost the
//! same. [`VectorIndex::search_with`] sets the effort per query:
//! `SearchEffort::Auto(ef)` as above, or `SearchEffort::Graph(ef)` for the graph search only.
//!
//! How much `ef` recall@10 ≥ 0.95 takes depends on the data (50,000 × 384, default graph
//! `M = 16`, `efConstruction = 128`, 2 cores, dev profile; `tests/it/recall.rs`,
//! `examples/ann_bench.rs`):
//!
//! * Embedding-like vectors (low intrinsic dimension, like real sentence embeddings): the
//!   default `ef = 64` suffices (recall@10 ≈ 0.97, ≈ 1 ms per query).
//! * Isotropic vectors (uniform on the sphere) are the worst case for any graph index: every
//!   point is nearly equidistant from every other, so the graph offers no shortcuts.
//!   `Graph(ef)` recall@10: 0.14 at `ef = 64`, 0.79 at 1024, 0.94 at 2048, 0.98 at 3072,
//!   0.99 at 4096, at 0.6 / 7 / 11 / 15 / 21 ms per query, while a full scan takes 8.5 ms
//!   (one run, machine busy with another build). Raising `efConstruction` to 256 gains
//!   < 0.01 recall for 26% more build time; `M = 32, efConstruction = 256` reaches 0.96 at
//!   `ef = 1024` (12–18 ms) but builds ≈ 3× slower (84 s instead of 27 s). On such data, set `expansion_search` (or pass `Auto(ef)`) to at least
//!   `n / 2M` (1,563 for 50,000 vectors at `M = 16`): unfiltered searches then scan, which
//!   is exact and faster than any graph search of that recall. The switch depends on the
//!   live count: past `ef · 2M` vectors the same `ef` means a graph search again, with
//!   lower recall, so raise `ef` with the index. Filtered searches never scan; with 10% of
//!   keys passing, `ef = 512` gave recall@10 0.98–0.99 at 20–28 ms per query (rejected
//!   nodes are walked but do not fill the result list), `ef = 64` only 0.56–0.58.
//!
//! ## Persistence
//!
//! [`VectorIndex::save`] writes the usearch serialisation to `<path>.tmp`, appends a 48-byte
//! trailer (length, CRC-32, dimensions, quantization, count), fsyncs, and renames it over
//! `<path>`: readers see either the old or the new file, never a half-written one.
//! [`VectorIndex::open`] verifies the trailer and the checksum *before* handing the file to
//! usearch, because usearch trusts the sizes it reads from a file. A file built for other
//! dimensions gives [`VectorError::IndexDimensionMismatch`] (the embedding model changed:
//! rebuild); a truncated or damaged file gives [`VectorError::Corrupt`]. Both report
//! [`VectorError::needs_rebuild`].
//!
//! ## Thread safety
//!
//! [`VectorIndex`] is `Send + Sync`; share it behind an `Arc`. usearch's dense index supports
//! concurrent `add`, `remove` and `search`, but with two caveats this wrapper takes care of:
//!
//! 1. usearch keeps a fixed pool of per-thread search contexts and *fails* (rather than
//!    waits) when more threads than that call in at once. The wrapper sizes the pool to the
//!    machine's parallelism (at least 4) and gates entry with a semaphore, so excess callers
//!    wait for a free context instead of erroring.
//! 2. Growing the capacity (`reserve`) must not run concurrently with anything else. The
//!    wrapper holds a read lock for `add`/`search`/`remove` and takes the write lock only
//!    for the rare doubling of capacity.
//! 3. usearch's very first insertion publishes the node count before the node itself, so a
//!    search starting in between would read an entry point without a vector. An add into
//!    an empty index therefore also takes the write lock.
//!
//! Adds and removes of the *same* key are serialised (striped key locks), so two threads
//! replacing the same key cannot leave duplicates behind. While a key is being replaced, a
//! concurrent search may briefly miss it, and a graph search that overlaps adds or removes
//! can rarely return fewer than `k` results (usearch rewrites neighbour lists in place;
//! 0.1–0.4% of searches in a stress test with two writers and four readers). A search that
//! overlaps a `remove` never reports the removed slot. [`VectorIndex::save`] blocks adds and removes for
//! its duration but not searches.
//!
//! The search effort is per call: [`VectorIndex::search_with`] never changes the index's
//! configured `ef` (usearch's `change_expansion_search` is an unsynchronised write that
//! every concurrent search would see), so concurrent searches with different efforts do
//! not interfere. usearch's brute-force scan must not overlap an add or remove (it walks
//! slots an insert has claimed but not yet written): a scan runs only while no add or
//! remove is running or waiting, adds and removes wait for running scans (one pass over
//! the vectors), and a search that finds a mutation in flight uses the graph instead of
//! waiting.
//!
//! ## Example
//!
//! ```
//! use quarry_vectors::{VectorIndex, VectorIndexOptions, exact_search};
//!
//! let index = VectorIndex::create(VectorIndexOptions::new(3))?;
//! index.add(1, &[1.0, 0.0, 0.0])?;
//! index.add(2, &[0.0, 1.0, 0.0])?;
//! let hits = index.search(&[0.9, 0.1, 0.0], 1, None)?;
//! assert_eq!(hits[0].0, 1);
//!
//! // Only keys of one collection:
//! let hits = index.search(&[0.9, 0.1, 0.0], 1, Some(&|key| key == 2))?;
//! assert_eq!(hits[0].0, 2);
//!
//! // Exact search over vectors held elsewhere (small collections, recall checks):
//! let vectors: Vec<(u64, Vec<f32>)> = vec![(1, vec![1.0, 0.0, 0.0]), (2, vec![0.0, 1.0, 0.0])];
//! let exact = exact_search(vectors.iter().map(|(k, v)| (*k, v.as_slice())), &[0.9, 0.1, 0.0], 1, None);
//! assert_eq!(exact[0].0, 1);
//! # Ok::<(), quarry_vectors::VectorError>(())
//! ```

#![warn(missing_docs)]

mod error;
mod exact;
mod format;
mod index;
mod options;

pub use error::{Result, VectorError};
pub use exact::{dot, exact_search};
pub use index::{MAX_FILTERED_EF, VectorIndex, filtered_ef};
pub use options::{Metric, Quantization, SearchEffort, VectorIndexOptions};
