//! The embedded store's vector search at scale (issue 46): recall@10 against exact search and
//! latency with 1 and 8 clients, unfiltered and filtered to 5 % and 1 %, through the calls the
//! engine makes (`quarry-engine/src/vectors.rs`, `LocalAnnFile::nearest`): an index built with
//! the engine's options, `search` for unfiltered queries, `search_among` with the filter's
//! chunk ids as a set (built per query, as the engine does from the store) for filtered ones.
//! "before" is the engine's path before issue 46: exact at ≤ 4,096 filtered chunks, else the
//! graph with the filter as a predicate at the unfiltered `ef`. Run by
//! `bash bench/vectors/run.sh`; the same table as bench/pgvector's.
//!
//! Vectors: `QUARRY_BENCH_VECTORS=path/to/tldr-minilm.json` (bench/vectors/make_dataset.py:
//! real embeddings of real text, their documents spread evenly over 100 collections
//! independently of topic) or, without it, `QUARRY_BENCH_CHUNKS` synthetic ones (shared
//! direction, topics of unequal size, documents of 20 chunks: benches/common/vectors.rs, as
//! bench/pgvector's).
//!
//! Environment: `QUARRY_BENCH_VECTORS`, `QUARRY_BENCH_CHUNKS` (all of the dataset, else
//! 100000), `QUARRY_BENCH_QUERIES` (200), `QUARRY_BENCH_EF` (sweep, 32,64,128,256),
//! `QUARRY_BENCH_LATENCY_QUERIES` (per client, 200), `QUARRY_BENCH_M` (16),
//! `QUARRY_BENCH_EF_ADD` (128), `QUARRY_BENCH_OUT` (a JSON file for the results).

#[path = "common/vectors.rs"]
mod vectors;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use quarry_store::ef_for_size;
use quarry_vectors::{SearchEffort, VectorIndex, VectorIndexOptions, exact_search};
use vectors::{
    CHUNKS_PER_DOCUMENT, Dataset, Rng, SYNTHETIC_SEED, Space, client_latencies, overlap,
};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const COLLECTIONS: u64 = 100;
const TOP_K: usize = 10;
/// The engine's search effort (`quarry_engine::ANN_EXPANSION`).
const ENGINE_EF: usize = 128;
/// The engine's exact threshold before issue 46.
const BEFORE_EXACT_MAX: usize = 4096;
const FILTERS: [(&str, u64); 3] = [("unfiltered", COLLECTIONS), ("5%", 5), ("1%", 1)];

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The corpus: vector `i` (key `i + 1`) belongs to document `documents[i]`.
struct Data {
    dims: usize,
    values: Vec<f32>,
    documents: Vec<usize>,
    queries: Vec<Vec<f32>>,
    source: String,
}

impl Data {
    fn vector(&self, i: usize) -> &[f32] {
        &self.values[i * self.dims..(i + 1) * self.dims]
    }
    fn len(&self) -> usize {
        self.documents.len()
    }
}

/// A dataset's first `limit` vectors and first `n_queries` queries.
fn read_dataset(path: &str, limit: Option<usize>, n_queries: usize) -> Res<Data> {
    let dataset = Dataset::read(path)?;
    let n = limit.unwrap_or(dataset.count).min(dataset.count);
    let queries = (0..n_queries.min(dataset.queries))
        .map(|q| dataset.query(q).to_vec())
        .collect();
    let mut values = dataset.values;
    values.truncate(n * dataset.dims);
    Ok(Data {
        dims: dataset.dims,
        values,
        documents: dataset.documents[..n].iter().map(|&d| d as usize).collect(),
        queries,
        source: dataset.name,
    })
}

/// `n` synthetic chunks and `n_queries` queries, as bench/pgvector generates them.
fn synthetic(n: usize, dims: usize, n_queries: usize) -> Data {
    let mut rng = Rng(SYNTHETIC_SEED);
    let space = Space::new(dims, n, &mut rng);
    let values = space.chunks(n, &mut rng).flatten().collect();
    let queries = (0..n_queries).map(|_| space.query(&mut rng)).collect();
    Data {
        dims,
        values,
        documents: (0..n).map(|i| i / CHUNKS_PER_DOCUMENT).collect(),
        queries,
        source: "synthetic".into(),
    }
}

fn main() -> Res<()> {
    let n_queries: usize = env_or("QUARRY_BENCH_QUERIES", 200);
    let limit = std::env::var("QUARRY_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok());
    let data = match std::env::var("QUARRY_BENCH_VECTORS") {
        Ok(path) if !path.is_empty() => read_dataset(&path, limit, n_queries)?,
        _ => synthetic(limit.unwrap_or(100_000), 384, n_queries),
    };
    let sweep: Vec<usize> = std::env::var("QUARRY_BENCH_EF")
        .unwrap_or_else(|_| "32,64,128,256".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let latency_queries: usize = env_or("QUARRY_BENCH_LATENCY_QUERIES", 200);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());

    // Collections per document, drawn as bench/pgvector draws them.
    let mut rng = Rng(0x00C0_FFEE);
    let documents = data.documents.iter().max().map_or(0, |d| d + 1);
    let collection_of_document: Vec<u64> = (0..documents)
        .map(|_| 1 + rng.next() % COLLECTIONS)
        .collect();
    let collection = |i: usize| collection_of_document[data.documents[i]];
    // The chunk ids of each collection, as the store lists them.
    let mut members: Vec<Vec<u64>> = vec![Vec::new(); COLLECTIONS as usize + 1];
    for i in 0..data.len() {
        members[collection(i) as usize].push(i as u64 + 1);
    }

    let mut report = String::new();
    let options = VectorIndexOptions {
        connectivity: env_or("QUARRY_BENCH_M", VectorIndexOptions::DEFAULT_CONNECTIVITY),
        expansion_add: env_or(
            "QUARRY_BENCH_EF_ADD",
            VectorIndexOptions::DEFAULT_EXPANSION_ADD,
        ),
        expansion_search: ENGINE_EF,
        ..VectorIndexOptions::new(data.dims)
    };
    eprintln!(
        "building a usearch index of {} vectors ({} dims, M {}, ef_add {}) with {threads} threads…",
        data.len(),
        data.dims,
        options.connectivity,
        options.expansion_add
    );
    let index = VectorIndex::create(options.clone())?;
    let t = Instant::now();
    let per = data.len().div_ceil(threads).max(1);
    std::thread::scope(|s| -> Res<()> {
        let handles: Vec<_> = (0..threads)
            .map(|part| {
                let (index, data) = (&index, &data);
                s.spawn(move || -> Res<()> {
                    for i in part * per..((part + 1) * per).min(data.len()) {
                        index.add(i as u64 + 1, data.vector(i))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "an add thread panicked")??;
        }
        Ok(())
    })?;
    let build_seconds = t.elapsed().as_secs_f64();
    let _ = write!(
        report,
        "{{\"vectors\": \"{}\", \"chunks\": {}, \"documents\": {documents}, \"dims\": {}, \
         \"queries\": {}, \"cores\": {threads}, \"connectivity\": {}, \"expansion_add\": {}, \
         \"engine_ef\": {ENGINE_EF}, \"engine_ef_at_size\": {}, \
         \"build_seconds\": {build_seconds:.2}, \
         \"memory_bytes\": {}, \"simd\": \"{}\"",
        data.source,
        data.len(),
        data.dims,
        data.queries.len(),
        options.connectivity,
        options.expansion_add,
        ef_for_size(ENGINE_EF, index.len()),
        index.memory_usage(),
        index.hardware_acceleration()
    );
    eprintln!("built in {build_seconds:.1} s; exact answers…");

    // The exact top 10 per query and filter, over all vectors.
    let truth: Vec<Vec<Vec<u64>>> = data
        .queries
        .iter()
        .map(|q| {
            FILTERS
                .iter()
                .map(|(_, keep)| {
                    let pass = |key: u64| collection(key as usize - 1) <= *keep;
                    exact_search(
                        (0..data.len()).map(|i| (i as u64 + 1, data.vector(i))),
                        q,
                        TOP_K,
                        Some(&pass),
                    )
                    .into_iter()
                    .map(|(k, _)| k)
                    .collect()
                })
                .collect()
        })
        .collect();

    // The filter's chunk ids as the engine builds them per query.
    let allowed = |keep: u64| -> HashSet<u64> {
        members[1..=keep as usize]
            .iter()
            .flatten()
            .copied()
            .collect()
    };
    let search = |query: &[f32], keep: u64, ef: usize, before: bool| -> Res<Vec<u64>> {
        // The engine grows its effort with the index; "before" searched with `ef` as given.
        let ef = if before {
            ef
        } else {
            ef_for_size(ef, index.len())
        };
        let found = if keep >= COLLECTIONS {
            index.search_with(query, TOP_K, None, SearchEffort::Auto(ef))?
        } else {
            let ids = allowed(keep);
            if !before {
                index.search_among(query, TOP_K, &ids, ef)?
            } else if ids.len() <= BEFORE_EXACT_MAX {
                index.exact_among(ids.iter().copied(), query, TOP_K)?
            } else {
                let pass = |k: u64| ids.contains(&k);
                index.search_with(query, TOP_K, Some(&pass), SearchEffort::Auto(ef))?
            }
        };
        Ok(found.into_iter().map(|(k, _)| k).collect())
    };

    report.push_str(", \"recall_at_10\": {");
    for (e, &ef) in sweep.iter().enumerate() {
        let mut row = String::new();
        for (f, (name, keep)) in FILTERS.iter().enumerate() {
            let (mut now, mut before) = (0usize, 0usize);
            for (qi, q) in data.queries.iter().enumerate() {
                now += overlap(&search(q, *keep, ef, false)?, &truth[qi][f], TOP_K);
                before += overlap(&search(q, *keep, ef, true)?, &truth[qi][f], TOP_K);
            }
            let total = (data.queries.len() * TOP_K) as f64;
            let _ = write!(
                row,
                "{}\"{name}\": {{\"quarry\": {:.4}, \"before\": {:.4}}}",
                if f == 0 { "" } else { ", " },
                now as f64 / total,
                before as f64 / total
            );
        }
        eprintln!("ef {ef}: {row}");
        let _ = write!(
            report,
            "{}\"{ef}\": {{{row}}}",
            if e == 0 { "" } else { ", " }
        );
    }
    report.push_str("}, \"latency_ms\": {");
    let mut first = true;
    for clients in [1usize, 8] {
        for (name, keep) in FILTERS {
            let mut cell = String::new();
            for (label, before) in [("quarry", false), ("before", true)] {
                let stats = run_clients(clients, latency_queries, &data.queries, |q| {
                    search(q, keep, ENGINE_EF, before).map(|_| ())
                })?;
                let _ = write!(
                    cell,
                    "{}\"{label}\": {stats}",
                    if before { ", " } else { "" }
                );
            }
            eprintln!("{clients} client(s), {name}: {cell}");
            let _ = write!(
                report,
                "{}\"{clients}_clients_{name}\": {{{cell}}}",
                if first { "" } else { ", " }
            );
            first = false;
        }
    }
    report.push_str("}}\n");
    if let Ok(path) = std::env::var("QUARRY_BENCH_OUT") {
        std::fs::write(path, &report)?;
    }
    println!("{report}");
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// [`client_latencies`] as p50/p99 in ms and queries per second.
fn run_clients(
    clients: usize,
    per_client: usize,
    queries: &[Vec<f32>],
    f: impl Fn(&[f32]) -> Res<()> + Sync,
) -> Res<String> {
    let (all, wall) = client_latencies(clients, per_client, queries, |_, q| f(q))?;
    Ok(format!(
        "{{\"n\": {}, \"p50\": {:.3}, \"p99\": {:.3}, \"qps\": {:.1}}}",
        all.len(),
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all.len() as f64 / wall.as_secs_f64()
    ))
}
