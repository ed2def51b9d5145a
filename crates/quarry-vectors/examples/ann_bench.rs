//! ANN benchmark: builds an N × 384 index and reports build time, search latency (p50/p99,
//! k = 10, unfiltered and filtered to ~10% of keys), memory, save/open time and recall@10
//! against the exact oracle.
//!
//! ```text
//! cargo run --release --example ann_bench -- [--n 100000] [--queries 500] [--threads 2]
//!     [--data latent|isotropic] [--i8] [--m 16] [--ef-add 128] [--ef 64,128,256]
//!     [--no-filter] [--no-save]
//! ```
//!
//! `--data latent` (default) draws embedding-like vectors (24 latent factors + 10% noise);
//! `--data isotropic` draws uniformly random unit vectors, a worst case for graph indexes.
//! `--m` / `--ef-add` set the graph's connectivity and `efConstruction`; every `--ef` value
//! is measured on the same graph with `SearchEffort::Graph(ef)`, followed by the index's
//! brute-force scan (`SearchEffort::Auto(n)`, which always scans an unfiltered query) for
//! comparison.

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{LatentModel, random_unit_matrix, recall};
use quarry_vectors::{Quantization, SearchEffort, VectorIndex, VectorIndexOptions, exact_search};

const DIMS: usize = 384;

type Filter<'a> = Option<&'a dyn Fn(u64) -> bool>;
const K: usize = 10;

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

struct Args {
    n: usize,
    queries: usize,
    threads: usize,
    isotropic: bool,
    i8: bool,
    m: usize,
    ef_add: usize,
    efs: Vec<usize>,
    filtered: bool,
    save: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        n: 100_000,
        queries: 500,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        isotropic: false,
        i8: false,
        m: VectorIndexOptions::DEFAULT_CONNECTIVITY,
        ef_add: VectorIndexOptions::DEFAULT_EXPANSION_ADD,
        efs: vec![VectorIndexOptions::DEFAULT_EXPANSION_SEARCH],
        filtered: true,
        save: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_default();
        match flag.as_str() {
            "--n" => args.n = value().parse().unwrap_or(args.n),
            "--queries" => args.queries = value().parse().unwrap_or(args.queries),
            "--threads" => args.threads = value().parse().unwrap_or(args.threads).max(1),
            "--data" => args.isotropic = value() == "isotropic",
            "--i8" => args.i8 = true,
            "--m" => args.m = value().parse().unwrap_or(args.m),
            "--ef-add" => args.ef_add = value().parse().unwrap_or(args.ef_add),
            "--no-filter" => args.filtered = false,
            "--no-save" => args.save = false,
            "--ef" => {
                args.efs = value().split(',').filter_map(|s| s.parse().ok()).collect();
            }
            other => eprintln!("ignoring unknown argument {other}"),
        }
    }
    if args.efs.is_empty() {
        args.efs = vec![VectorIndexOptions::DEFAULT_EXPANSION_SEARCH];
    }
    args
}

fn main() -> Result<(), quarry_vectors::VectorError> {
    let args = parse_args();
    let n = args.n;
    let t = Instant::now();
    let (data, queries) = if args.isotropic {
        (
            random_unit_matrix(42, n, DIMS),
            random_unit_matrix(7, args.queries, DIMS),
        )
    } else {
        let model = LatentModel::new(1, DIMS, 24, 0.1);
        (model.matrix(42, n), model.matrix(7, args.queries))
    };
    println!(
        "data: {n} x {DIMS} {} unit vectors, {} queries (generated in {:.1?})",
        if args.isotropic {
            "isotropic"
        } else {
            "latent-24"
        },
        args.queries,
        t.elapsed()
    );
    let rss_before = status_kib("VmRSS:");

    let options = VectorIndexOptions {
        quantization: if args.i8 {
            Quantization::I8
        } else {
            Quantization::F32
        },
        connectivity: args.m,
        expansion_add: args.ef_add,
        ..VectorIndexOptions::new(DIMS)
    };
    println!(
        "options: M={} ef_add={} quantization={:?}, {} insert threads",
        options.connectivity, options.expansion_add, options.quantization, args.threads
    );
    let index = VectorIndex::create(options.clone())?;
    let t = Instant::now();
    let chunk = n.div_ceil(args.threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads)
            .map(|th| {
                let index = &index;
                let data = &data;
                s.spawn(move || -> Result<(), quarry_vectors::VectorError> {
                    for i in (th * chunk)..((th + 1) * chunk).min(n) {
                        index.add(i as u64, &data[i * DIMS..(i + 1) * DIMS])?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Ok(())))
            .collect::<Result<Vec<()>, _>>()
    })?;
    let build = t.elapsed();
    let rss_after = status_kib("VmRSS:");
    println!(
        "build: {build:.2?} ({:.0} vectors/s), SIMD kernel {}",
        n as f64 / build.as_secs_f64(),
        index.hardware_acceleration()
    );
    println!(
        "memory: RSS {:.1} MiB (index adds {:.1} MiB over the raw data; usearch estimate {:.1} MiB; peak RSS {:.1} MiB)",
        mib(rss_after),
        mib(rss_after.saturating_sub(rss_before)),
        index.memory_usage() as f64 / (1024.0 * 1024.0),
        mib(status_kib("VmHWM:"))
    );

    if args.save {
        let path = std::env::temp_dir().join(format!("ann_bench_{}.qv", std::process::id()));
        let t = Instant::now();
        index.save(&path)?;
        let save = t.elapsed();
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let t = Instant::now();
        let reopened = VectorIndex::open(&path, options.clone())?;
        println!(
            "persistence: save {save:.2?}, open (verify + load) {:.2?}, file {:.1} MiB",
            t.elapsed(),
            size as f64 / (1024.0 * 1024.0)
        );
        drop(reopened);
        let _ = std::fs::remove_file(&path);
    }

    let keep = |key: u64| key % 10 == 3;
    let all_filters: [(&str, Filter); 2] = [("unfiltered", None), ("filtered 10%", Some(&keep))];
    let filters = &all_filters[..if args.filtered { 2 } else { 1 }];
    let t = Instant::now();
    let truths: Vec<Vec<Vec<(u64, f32)>>> = filters
        .iter()
        .map(|(_, filter)| {
            queries
                .chunks_exact(DIMS)
                .map(|q| {
                    exact_search(
                        data.chunks_exact(DIMS)
                            .enumerate()
                            .map(|(i, v)| (i as u64, v)),
                        q,
                        K,
                        *filter,
                    )
                })
                .collect()
        })
        .collect();
    let exact_per_query = t.elapsed() / (filters.len() * args.queries.max(1)) as u32;
    println!("exact_search (oracle): {exact_per_query:.2?} per query over {n} vectors");

    let report = |label: &str, mut latencies: Vec<Duration>, total_recall: f64| {
        let mean = latencies.iter().sum::<Duration>() / latencies.len().max(1) as u32;
        latencies.sort_unstable();
        println!(
            "{label} k={K}: mean {mean:>8.3?}  p50 {:>8.3?}  p99 {:>8.3?}  recall@{K} {:.4}",
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            total_recall / args.queries.max(1) as f64
        );
    };
    for &ef in &args.efs {
        for ((label, filter), truth) in filters.iter().zip(&truths) {
            let mut latencies = Vec::with_capacity(args.queries);
            let mut total_recall = 0.0;
            for (q, truth) in queries.chunks_exact(DIMS).zip(truth) {
                let t = Instant::now();
                let found = index.search_with(q, K, *filter, SearchEffort::Graph(ef))?;
                latencies.push(t.elapsed());
                total_recall += recall(&found, truth);
            }
            report(
                &format!("search ef={ef:<5} {label:<13}"),
                latencies,
                total_recall,
            );
        }
    }
    let mut latencies = Vec::with_capacity(args.queries);
    let mut total_recall = 0.0;
    for (q, truth) in queries.chunks_exact(DIMS).zip(&truths[0]) {
        let t = Instant::now();
        let found = index.search_with(q, K, None, SearchEffort::Auto(n))?;
        latencies.push(t.elapsed());
        total_recall += recall(&found, truth);
    }
    report("scan (Auto)      unfiltered   ", latencies, total_recall);
    Ok(())
}
