//! Where chunk vectors are searched: a [`VectorBackend`].
//!
//! - [`LocalAnnFile`], the embedded mode's: an HNSW file (`vectors.usearch`) in the data
//!   directory that follows the store through its ANN protocol (`ann_dirty_chunks`,
//!   `ann_tombstones`, `ann_done`), saved atomically and reopened when another process
//!   saved a newer one.
//! - [`InStore`], for a store that searches vectors itself ([`VectorSearch`], PostgreSQL
//!   with pgvector): nothing lives on the node, so any node answers any query.
//!
//! Both score candidates exactly (cosine on the stored vectors), so a score never depends
//! on which path found the candidate.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use quarry_core::{Error, Result};
use quarry_store::{Store, VectorSearch};
use quarry_vectors::{SearchEffort, VectorIndex, VectorIndexOptions};

use crate::index::write_lock::WriteGuard;
use crate::progress::Progress;

#[cfg(test)]
mod conformance;

/// Filters keeping at most this many chunks are always searched exactly (faster and perfect
/// recall when a filter would reject most of the graph): `ANN_EXPANSION · 2M`, the graph
/// search's worst case. More are, where a filter keeps a small share of a large index
/// (`VectorIndex::search_among`).
pub const EXACT_SEARCH_MAX: usize = 4096;
/// HNSW search effort for engine queries up to 100k vectors (recall@10 ≥ 0.97 on real
/// embeddings at 113k); larger indexes search with more (`quarry_store::ef_for_size`).
pub const ANN_EXPANSION: usize = 128;

/// The store meta key holding the vector index's dimensions.
pub(crate) const META_ANN_DIMS: &str = "ann.dims";
const VECTORS_FILE: &str = "vectors.usearch";
/// Chunk vectors read from the store per ANN round.
const ANN_ROUND: usize = 20_000;

/// Where the engine's vector search runs (see the module docs).
pub(crate) trait VectorBackend: Send + Sync {
    /// Whether vectors have been indexed here at all (before the first `embed`, vector
    /// search says there is no index).
    fn exists(&self) -> bool;
    /// Whether a vector is searchable as soon as the store holds it (nothing to sync): the
    /// engine then counts what became searchable from the store.
    fn searchable_on_write(&self) -> bool {
        false
    }
    /// The model changed: every vector indexed so far belongs to another vector space.
    fn reset(&self, guard: &WriteGuard, store: &dyn Store) -> Result<()>;
    /// Takes in what the store added and removed since the last call, for `key` (a model of
    /// `dims` dimensions); returns (added, removed).
    fn sync(
        &self,
        guard: &WriteGuard,
        store: &dyn Store,
        key: &str,
        dims: usize,
        progress: &dyn Progress,
    ) -> Result<(u64, u64)>;
    /// The `want` chunks nearest to `query` (limited to `collections`), with their exact
    /// cosine similarity, best first. `None`: nothing is indexed yet.
    fn nearest(
        &self,
        store: &dyn Store,
        key: &str,
        query: &[f32],
        want: usize,
        collections: Option<&[i64]>,
    ) -> Result<Option<Vec<(u64, f32)>>>;
    /// Exact cosine similarity of `query` to each of `chunk_ids` that has a vector.
    fn similarities(
        &self,
        store: &dyn Store,
        key: &str,
        query: &[f32],
        chunk_ids: &[i64],
    ) -> Result<HashMap<i64, f32>>;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn idx_err(e: quarry_vectors::VectorError) -> Error {
    Error::Index(e.to_string())
}

struct LoadedAnn {
    index: Arc<VectorIndex>,
    stamp: (u64, Option<SystemTime>),
}

/// The embedded mode's HNSW file (see the module docs).
pub(crate) struct LocalAnnFile {
    path: PathBuf,
    loaded: Mutex<Option<LoadedAnn>>,
}

impl LocalAnnFile {
    pub(crate) fn new(data_dir: &std::path::Path) -> LocalAnnFile {
        LocalAnnFile {
            path: data_dir.join(VECTORS_FILE),
            loaded: Mutex::new(None),
        }
    }

    fn options(dims: usize) -> VectorIndexOptions {
        VectorIndexOptions {
            expansion_search: ANN_EXPANSION,
            ..VectorIndexOptions::new(dims)
        }
    }

    fn drop_file(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&self.path, e)),
        }
        *lock(&self.loaded) = None;
        Ok(())
    }

    /// The index for reading, reopened when another process saved a new file.
    fn load(&self, dims: usize) -> Result<Option<Arc<VectorIndex>>> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&self.path, e)),
        };
        let stamp = (meta.len(), meta.modified().ok());
        let mut slot = lock(&self.loaded);
        if let Some(a) = slot.as_ref()
            && a.stamp == stamp
        {
            return Ok(Some(a.index.clone()));
        }
        let index = VectorIndex::open(&self.path, Self::options(dims)).map_err(|e| {
            if e.needs_rebuild() {
                Error::Unavailable(format!(
                    "the vector index needs rebuilding ({e}); run 'quarry embed'"
                ))
            } else {
                Error::Index(e.to_string())
            }
        })?;
        let index = Arc::new(index);
        *slot = Some(LoadedAnn {
            index: index.clone(),
            stamp,
        });
        Ok(Some(index))
    }

    /// Exact scores of `keys` on the vectors the file stores.
    fn exact(
        index: &VectorIndex,
        keys: &mut dyn Iterator<Item = u64>,
        query: &[f32],
        want: usize,
    ) -> Result<Vec<(u64, f32)>> {
        let mut vectors = Vec::new();
        for key in keys {
            if let Some(v) = index.get(key).map_err(idx_err)? {
                vectors.push((key, v));
            }
        }
        Ok(quarry_vectors::exact_search(
            vectors.iter().map(|(k, v)| (*k, v.as_slice())),
            query,
            want,
            None,
        ))
    }
}

/// The dimensions recorded for the file's model (0 when unknown: the file says).
fn recorded_dims(store: &dyn Store) -> Result<usize> {
    Ok(store
        .meta(META_ANN_DIMS)?
        .and_then(|d| d.parse().ok())
        .unwrap_or(0))
}

impl VectorBackend for LocalAnnFile {
    fn exists(&self) -> bool {
        self.path.exists()
    }

    fn reset(&self, _guard: &WriteGuard, store: &dyn Store) -> Result<()> {
        self.drop_file()?;
        store.ann_reset()
    }

    fn sync(
        &self,
        guard: &WriteGuard,
        store: &dyn Store,
        key: &str,
        dims: usize,
        progress: &dyn Progress,
    ) -> Result<(u64, u64)> {
        let index = match VectorIndex::open(&self.path, Self::options(dims)) {
            Ok(i) => i,
            Err(e) => {
                // Missing, damaged or of other dimensions: start over from the store.
                if !e.is_not_found() {
                    progress.warn(&format!("rebuilding the vector index: {e}"));
                }
                self.reset(guard, store)?;
                VectorIndex::create(Self::options(dims)).map_err(idx_err)?
            }
        };
        let removed = store.ann_tombstones()?;
        for id in &removed {
            index.remove(*id as u64).map_err(idx_err)?;
        }
        let mut added = Vec::new();
        let mut after = 0i64;
        let mut begun = false;
        loop {
            let round = store.ann_dirty_chunks(key, after, ANN_ROUND)?;
            let Some(last) = round.last() else { break };
            after = last.0;
            if !begun {
                progress.begin("Indexing vectors", 0);
                begun = true;
            }
            for (id, v) in &round {
                index
                    .add(*id as u64, v)
                    .map_err(|e| Error::Index(format!("chunk {id}: {e}")))?;
                added.push(*id);
            }
            progress.advance(round.len() as u64);
        }
        if begun {
            progress.end();
        }
        if added.is_empty() && removed.is_empty() && self.path.exists() {
            return Ok((0, 0));
        }
        index.save(&self.path).map_err(idx_err)?;
        store.ann_done(&removed, &added)?;
        *lock(&self.loaded) = None;
        Ok((added.len() as u64, removed.len() as u64))
    }

    fn nearest(
        &self,
        store: &dyn Store,
        _key: &str,
        query: &[f32],
        want: usize,
        collections: Option<&[i64]>,
    ) -> Result<Option<Vec<(u64, f32)>>> {
        let Some(index) = self.load(recorded_dims(store)?)? else {
            return Ok(None);
        };
        // Every path scores its candidates the same way (exactly, on the stored vectors):
        // the graph's own distances (on quantised vectors) differ slightly, and the
        // calibration's z-scores would turn that into a score that depends on whether a
        // search named its knowledge bases.
        // The effort grows with the index (`ef_for_size`): a fixed `ef` loses recall as the
        // graph grows.
        let ef = quarry_store::ef_for_size(ANN_EXPANSION, index.len());
        let found = match collections {
            None => {
                let found = index
                    .search_with(query, want, None, SearchEffort::Auto(ef))
                    .map_err(idx_err)?;
                Self::exact(&index, &mut found.into_iter().map(|(k, _)| k), query, want)?
            }
            Some(cids) => {
                let mut ids: HashSet<u64> = HashSet::new();
                for cid in cids {
                    ids.extend(
                        store
                            .chunk_ids_in_collection(*cid)?
                            .into_iter()
                            .map(|i| i as u64),
                    );
                }
                // Exact over the filter's chunks where that costs no more than the graph
                // search would (at least `EXACT_SEARCH_MAX` of them), else the graph with
                // `ef` scaled to the share the filter keeps (`VectorIndex::search_among`).
                let found = index.search_among(query, want, &ids, ef).map_err(idx_err)?;
                Self::exact(&index, &mut found.into_iter().map(|(k, _)| k), query, want)?
            }
        };
        Ok(Some(found))
    }

    fn similarities(
        &self,
        store: &dyn Store,
        _key: &str,
        query: &[f32],
        chunk_ids: &[i64],
    ) -> Result<HashMap<i64, f32>> {
        let Some(index) = self.load(recorded_dims(store)?)? else {
            return Ok(HashMap::new());
        };
        let found = Self::exact(
            &index,
            &mut chunk_ids.iter().map(|&id| id as u64),
            query,
            chunk_ids.len(),
        )?;
        Ok(found.into_iter().map(|(k, s)| (k as i64, s)).collect())
    }
}

/// Vector search by the store itself (see the module docs).
pub(crate) struct InStore {
    search: Arc<dyn VectorSearch>,
}

impl InStore {
    pub(crate) fn new(search: Arc<dyn VectorSearch>) -> InStore {
        InStore { search }
    }
}

impl VectorBackend for InStore {
    fn exists(&self) -> bool {
        true
    }

    fn searchable_on_write(&self) -> bool {
        true
    }

    fn reset(&self, _guard: &WriteGuard, _store: &dyn Store) -> Result<()> {
        // Vectors are kept per model in the store: another model's are simply not read.
        Ok(())
    }

    fn sync(
        &self,
        _guard: &WriteGuard,
        _store: &dyn Store,
        key: &str,
        dims: usize,
        _progress: &dyn Progress,
    ) -> Result<(u64, u64)> {
        // Stored vectors are searchable as they are written; the index only has to exist.
        self.search.prepare_vectors(key, dims)?;
        Ok((0, 0))
    }

    fn nearest(
        &self,
        _store: &dyn Store,
        key: &str,
        query: &[f32],
        want: usize,
        collections: Option<&[i64]>,
    ) -> Result<Option<Vec<(u64, f32)>>> {
        let found = self.search.nearest_chunks(key, query, want, collections)?;
        Ok(Some(
            found.into_iter().map(|(id, s)| (id as u64, s)).collect(),
        ))
    }

    fn similarities(
        &self,
        _store: &dyn Store,
        key: &str,
        query: &[f32],
        chunk_ids: &[i64],
    ) -> Result<HashMap<i64, f32>> {
        self.search.chunk_similarities(key, query, chunk_ids)
    }
}
