//! In-process keyword benchmark: indexing throughput, index size, and warm search latency
//! at ~100k documents. Run with `cargo bench -p quarry-engine --bench bm25`.
//!
//! Environment:
//! - `QUARRY_BENCH_CORPUS` — markdown folder (default `../shared/corpora/tldr`)
//! - `QUARRY_BENCH_DOCS` — documents to reach by adding the corpus as several collections
//!   (default 100000)
//! - `QUARRY_BENCH_ROUNDS` — timed passes over the query mix (default 20)
//! - `QUARRY_BENCH_OUT` — also write the JSON report to this file
//!
//! Reports are figures, not pass/fail: targets are compared in the closing notes.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{env_or, eval_queries, percentile};
use quarry_engine::{Engine, EngineOptions, NoProgress, SearchRequest};

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn queries(repo: &Path) -> Vec<String> {
    // The eval sets (questions, paraphrases, Chinese) plus short keyword and identifier
    // queries, the mix an agent sends.
    let mut qs: Vec<String> = [
        "tar",
        "git",
        "docker",
        "ssh",
        "grep",
        "kill process",
        "disk usage",
        "git rebase",
        "python3 -m venv",
        "v1.2.3",
        "x86_64",
        "gzip compress",
        "list files",
        "network interface",
        "\"extract an archive\"",
        "+git -commit branch",
        "压缩",
        "磁盘",
        "网络 连接",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    qs.extend(eval_queries(
        repo,
        &["eval/tldr-en.jsonl", "eval/tldr-zh.jsonl"],
    ));
    qs
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = std::env::var_os("QUARRY_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("../shared/corpora/tldr"));
    let target_docs: u64 = env_or("QUARRY_BENCH_DOCS", 100_000);
    let rounds: usize = env_or("QUARRY_BENCH_ROUNDS", 20);
    if !corpus.is_dir() {
        return Err(format!(
            "corpus {} not found (set QUARRY_BENCH_CORPUS)",
            corpus.display()
        )
        .into());
    }
    let home = tempfile::tempdir()?;
    let opts = EngineOptions {
        home: home.path().to_path_buf(),
        index: "bench".into(),
        space: quarry_core::DEFAULT_SPACE.into(),
        max_file_bytes: quarry_ingest::DEFAULT_MAX_FILE_BYTES,
    };
    let engine = Engine::open(opts)?;

    // 1. Index the corpus once: throughput on a cold index.
    let t = Instant::now();
    let (first, _) =
        engine.add_collection(&corpus, Some("c0"), Some("**/*.md"), false, &NoProgress)?;
    let index_secs = t.elapsed().as_secs_f64();
    let files = first.documents;
    let size_one = dir_size(home.path());
    eprintln!(
        "indexed {files} files in {index_secs:.2} s ({:.0} files/s), index {:.1} MiB",
        files as f64 / index_secs,
        size_one as f64 / 1048576.0
    );

    // 2. No-op re-scan: the cost of `update` when nothing changed.
    let t = Instant::now();
    engine.update(&Default::default(), &NoProgress)?;
    let noop_update_secs = t.elapsed().as_secs_f64();

    // 3. Grow to the target size with more collections over the same folder.
    let mut total = files;
    let mut n = 1;
    let t = Instant::now();
    while total < target_docs {
        let (c, _) = engine.add_collection(
            &corpus,
            Some(&format!("c{n}")),
            Some("**/*.md"),
            false,
            &NoProgress,
        )?;
        total += c.documents;
        n += 1;
    }
    let grow_secs = t.elapsed().as_secs_f64();
    let size_total = dir_size(home.path());
    eprintln!(
        "grew to {total} documents in {n} collections ({:.0} files/s), data dir {:.1} MiB",
        (total - files) as f64 / grow_secs.max(1e-9),
        size_total as f64 / 1048576.0
    );

    // 4. Warm search latency over the query mix.
    let qs = queries(&repo);
    let req = |q: &str| SearchRequest::new(q);
    for q in &qs {
        engine.search(&req(q))?;
    }
    let mut lat = Vec::with_capacity(qs.len() * rounds);
    let mut results = 0usize;
    for _ in 0..rounds {
        for q in &qs {
            let t = Instant::now();
            let hits = engine.search(&req(q))?;
            lat.push(t.elapsed());
            results += hits.len();
        }
    }
    lat.sort();
    let mut filtered = Vec::with_capacity(qs.len() * rounds);
    for _ in 0..rounds.div_ceil(4) {
        for q in &qs {
            let mut r = req(q);
            r.collection = Some("c0".into());
            let t = Instant::now();
            engine.search(&r)?;
            filtered.push(t.elapsed());
        }
    }
    filtered.sort();

    let report = serde_json::json!({
        "corpus": corpus.display().to_string(),
        "files": files,
        "index_seconds": index_secs,
        "files_per_second": files as f64 / index_secs,
        "index_bytes_one_copy": size_one,
        "noop_update_seconds": noop_update_secs,
        "documents": total,
        "collections": n,
        "data_dir_bytes": size_total,
        "queries": qs.len(),
        "rounds": rounds,
        "mean_results": results as f64 / (qs.len() * rounds) as f64,
        "search_ms": {
            "p50": percentile(&lat, 0.50),
            "p90": percentile(&lat, 0.90),
            "p99": percentile(&lat, 0.99),
            "max": percentile(&lat, 1.0),
        },
        "search_one_collection_ms": {
            "p50": percentile(&filtered, 0.50),
            "p99": percentile(&filtered, 0.99),
        },
    });
    eprintln!(
        "warm search over {total} docs: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms ({} queries x {rounds}); one collection p50 {:.3} ms",
        percentile(&lat, 0.5),
        percentile(&lat, 0.9),
        percentile(&lat, 0.99),
        qs.len(),
        percentile(&filtered, 0.5),
    );
    let text = serde_json::to_string_pretty(&report)?;
    println!("{text}");
    if let Some(out) = std::env::var_os("QUARRY_BENCH_OUT") {
        std::fs::write(out, text)?;
    }
    Ok(())
}
