//! Semantic-layer benchmark: embedding throughput, then warm `query` / `vsearch` / `search`
//! latency at ~100k chunks, and `query` with a local cross-encoder reranking 30 candidates.
//! Run with `cargo bench -p quarry-engine --bench hybrid` (see `bench/run.sh`).
//!
//! The corpus (English tldr pages) is embedded once; it is then added again as further
//! collections until the index holds the target number of chunks. Identical chunk texts
//! share one stored embedding (vectors are keyed by chunk hash), so the copies cost ANN
//! inserts but no model time, while every chunk is a separate entry in the ANN index and
//! every page a separate document for BM25 — the query path sees a real 100k-chunk index.
//!
//! Environment:
//! - `QUARRY_BENCH_MODEL` — embedding model (directory or spec); without it the bench says
//!   so and exits
//! - `QUARRY_BENCH_RERANKER` — cross-encoder directory for the rerank figure (optional;
//!   `bench/make-timing-reranker.py` builds one of the right shape)
//! - `QUARRY_BENCH_CORPUS` — markdown folder (default `../shared/corpora/tldr/pages`)
//! - `QUARRY_BENCH_CHUNKS` — chunks to reach (default 100000)
//! - `QUARRY_BENCH_HOME` — data directory kept between runs so the embedding is paid once
//!   (default `~/.cache/quarry-bench/hybrid`)
//! - `QUARRY_BENCH_ROUNDS` — timed passes over the queries (default 5)
//! - `QUARRY_BENCH_OUT` — also write the JSON report to this file

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{env_or, eval_queries, model_and_corpus, percentile};
use quarry_engine::{
    EmbedOptions, Engine, EngineOptions, ModelConfig, ModelSpec, NoProgress, SearchRequest,
};

/// Endpoints, keys and the model cache from this process's environment, as the CLI reads them.
fn model_env() -> quarry_engine::ModelEnv {
    quarry_engine::ModelEnv::from_vars(&|k| std::env::var(k).ok())
}

fn open(home: &std::path::Path, config: ModelConfig) -> Result<Engine, Box<dyn std::error::Error>> {
    let opts = EngineOptions {
        home: home.to_path_buf(),
        index: "bench".into(),
        space: quarry_core::DEFAULT_SPACE.into(),
        max_file_bytes: quarry_ingest::DEFAULT_MAX_FILE_BYTES,
    };
    Ok(Engine::open(opts)?.with_models(config))
}

fn spec(s: &str) -> Result<ModelSpec, Box<dyn std::error::Error>> {
    Ok(ModelSpec::parse(s)?)
}

fn timed(
    queries: &[String],
    rounds: usize,
    mut f: impl FnMut(&str) -> Result<usize, Box<dyn std::error::Error>>,
) -> Result<(Vec<Duration>, f64), Box<dyn std::error::Error>> {
    for q in queries {
        f(q)?; // warm-up: models, index pages, caches
    }
    let mut lat = Vec::with_capacity(queries.len() * rounds);
    let mut results = 0usize;
    for _ in 0..rounds {
        for q in queries {
            let t = Instant::now();
            results += f(q)?;
            lat.push(t.elapsed());
        }
    }
    lat.sort();
    let mean = results as f64 / lat.len().max(1) as f64;
    Ok((lat, mean))
}

fn summary(lat: &[Duration]) -> serde_json::Value {
    serde_json::json!({
        "p50": percentile(lat, 0.50),
        "p90": percentile(lat, 0.90),
        "p99": percentile(lat, 0.99),
        "n": lat.len(),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some((model, corpus)) = model_and_corpus(&repo) else {
        return Ok(());
    };
    let target: u64 = env_or("QUARRY_BENCH_CHUNKS", 100_000);
    let rounds: usize = env_or("QUARRY_BENCH_ROUNDS", 5);
    let home = std::env::var_os("QUARRY_BENCH_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/quarry-bench/hybrid"))
        })
        .ok_or("set QUARRY_BENCH_HOME")?;
    std::fs::create_dir_all(&home)?;
    let engine = open(
        &home,
        ModelConfig {
            embed: Some(spec(&model)?),
            env: model_env(),
            ..ModelConfig::default()
        },
    )?;

    // 1. The corpus once: chunking + embedding throughput (only the first run pays it).
    if engine.collections()?.iter().all(|c| c.name != "c0") {
        engine.add_collection(&corpus, Some("c0"), Some("**/*.md"), false, &NoProgress)?;
    }
    let first = engine.embed(
        &EmbedOptions {
            collection: Some("c0".into()),
            force: false,
        },
        &NoProgress,
    )?;
    eprintln!(
        "c0: {} chunks embedded in {:.1} s ({})",
        first.chunks_embedded, first.seconds, first.model
    );
    let per_copy = engine.collection("c0")?.documents.max(1);
    let status = engine.status()?;
    let chunks_now = first.total_chunks.max(1);
    let collections_now = status.collections.len() as u64;
    let chunks_per_copy = chunks_now / collections_now.max(1);

    // 2. Grow to the target with copies; their chunks reuse the stored vectors.
    let copies = target.div_ceil(chunks_per_copy.max(1));
    let t = Instant::now();
    for n in collections_now..copies {
        engine.add_collection(
            &corpus,
            Some(&format!("c{n}")),
            Some("**/*.md"),
            false,
            &NoProgress,
        )?;
    }
    let grown = engine.embed(&EmbedOptions::default(), &NoProgress)?;
    let grow_secs = t.elapsed().as_secs_f64();
    eprintln!(
        "grew to {} chunks in {copies} collections ({} new vectors embedded, {} indexed) in {grow_secs:.1} s",
        grown.total_chunks, grown.chunks_embedded, grown.vectors_indexed
    );

    // 3. Warm latency: English eval questions plus short keyword queries.
    let mut qs: Vec<String> = [
        "tar",
        "git rebase",
        "kill process",
        "disk usage",
        "list files",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    qs.extend(eval_queries(&repo, &["eval/tldr-en.jsonl"]));
    let req = |q: &str| SearchRequest::new(q);
    let (query_lat, query_results) =
        timed(&qs, rounds, |q| Ok(engine.query(&req(q))?.results.len()))?;
    let (vsearch_lat, _) = timed(&qs, rounds, |q| {
        let mut r = req(q);
        r.min_score = 0.3;
        Ok(engine.vsearch(&r)?.len())
    })?;
    let (search_lat, _) = timed(&qs, rounds, |q| Ok(engine.search(&req(q))?.len()))?;
    let one = quarry_engine::model_key(engine.embedder(&NoProgress)?.identity());
    let (embed_lat, _) = timed(&qs, rounds, |q| {
        Ok(engine.embedder(&NoProgress)?.embed_queries(&[q])?.len())
    })?;
    eprintln!(
        "at {} chunks: query p50 {:.2} ms p99 {:.2} ms | vsearch p50 {:.2} ms | search p50 {:.2} ms | query embedding p50 {:.2} ms ({one})",
        grown.total_chunks,
        percentile(&query_lat, 0.5),
        percentile(&query_lat, 0.99),
        percentile(&vsearch_lat, 0.5),
        percentile(&search_lat, 0.5),
        percentile(&embed_lat, 0.5),
    );

    // 4. With a local cross-encoder on the top 30 (optional).
    let rerank = match std::env::var("QUARRY_BENCH_RERANKER") {
        Ok(dir) => {
            let reranked = open(
                &home,
                ModelConfig {
                    embed: Some(spec(&model)?),
                    rerank: Some(spec(&dir)?),
                    env: model_env(),
                    ..ModelConfig::default()
                },
            )?;
            let sample: Vec<String> = qs.iter().take(20).cloned().collect();
            let (lat, _) = timed(&sample, 1, |q| {
                let res = reranked.query(&req(q))?;
                if !res.stages.contains(&"rerank") {
                    return Err(format!("rerank did not run: {:?}", res.warnings).into());
                }
                Ok(res.results.len())
            })?;
            eprintln!(
                "query with local reranker on {} candidates: p50 {:.0} ms, p90 {:.0} ms",
                quarry_engine::RERANK_CANDIDATES,
                percentile(&lat, 0.5),
                percentile(&lat, 0.9)
            );
            Some(summary(&lat))
        }
        Err(_) => None,
    };

    let report = serde_json::json!({
        "model": first.model,
        "corpus": corpus.display().to_string(),
        "documents_per_copy": per_copy,
        "chunks_per_copy": chunks_per_copy,
        "first_embed": {
            "chunks_embedded": first.chunks_embedded,
            "seconds": first.seconds,
            "chunks_per_second": if first.seconds > 0.0 { first.chunks_embedded as f64 / first.seconds } else { 0.0 },
        },
        "chunks": grown.total_chunks,
        "collections": copies,
        "grow_seconds": grow_secs,
        "queries": qs.len(),
        "rounds": rounds,
        "mean_query_results": query_results,
        "query_ms": summary(&query_lat),
        "vsearch_ms": summary(&vsearch_lat),
        "search_ms": summary(&search_lat),
        "query_embedding_ms": summary(&embed_lat),
        "query_with_reranker_ms": rerank,
        "rerank_candidates": quarry_engine::RERANK_CANDIDATES,
    });
    let text = serde_json::to_string_pretty(&report)?;
    println!("{text}");
    if let Some(out) = std::env::var_os("QUARRY_BENCH_OUT") {
        std::fs::write(out, text)?;
    }
    Ok(())
}
