//! Embedding throughput of a local model, and how close it gets to this machine's fp32 peak.
//!
//! ```text
//! cargo run --release --example embed_bench -- MODEL_DIR [N=512] [CORPUS_DIR] [BATCH=32]
//! ```
//!
//! Passages are tldr examples ("page: description `command`", ~40 tokens each) read from
//! CORPUS_DIR (default /work/shared/corpora/tldr/pages), in sorted file order.
//! `QUARRY_BENCH_PASSAGES=pages` uses whole pages instead (~150–250 tokens, truncated to the
//! model's input limit: the size of the chunks `quarry embed` makes of these pages).
//! `QUARRY_BENCH_PASSAGES=file:PATH` reads the passages from a JSON-lines file, one JSON
//! string per line (`bench/embed/run.py` writes the chunks Quarry embeds for a real document).
//! The last line printed is `json {...}` with the figures, for scripts.
//! `QUARRY_BENCH_RUNS` (default 3): timed runs, the best reported.
//!
//! FLOPs are counted for the encoder only, per layer and per sequence of n tokens (hidden H,
//! feed-forward F): `8·n·H²` (Q, K, V and output projections) + `4·n·H·F` (the two
//! feed-forward matmuls) + `4·n²·H` (QKᵀ and attention·V), i.e. 2 FLOPs per multiply-add.
//! Embedding lookups, LayerNorm, softmax, GELU and pooling are O(n·H) and left out. Both
//! the FLOPs of the real tokens and of the padded batches actually computed are reported (the
//! same for the fused engine, whose batches are packed, without padding).
//! The peak is candle's own 1024×1024×1024 f32 matmul, repeated.
//!
//! `QUARRY_BENCH_ENGINE=candle` runs candle-transformers' BertModel / XLMRobertaModel instead of
//! the default fused engine; `QUARRY_BENCH_ENGINE=int8` the fused engine on int8 weights.
//!
//! Threads: candle sizes its pools from RAYON_NUM_THREADS / CANDLE_NUM_THREADS (default: the
//! physical cores).

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Device, Tensor};
use quarry_models::{Embedder, Engine, LocalEmbedder, LocalOptions};

fn tldr_passages(root: &Path, n: usize) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    let whole_pages = std::env::var("QUARRY_BENCH_PASSAGES").is_ok_and(|v| v == "pages");
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        if whole_pages {
            out.push(text);
            if out.len() >= n {
                return out;
            }
            continue;
        }
        let title = text
            .lines()
            .find_map(|l| l.strip_prefix("# "))
            .unwrap_or("")
            .to_string();
        let mut desc: Option<String> = None;
        for line in text.lines() {
            if let Some(d) = line.strip_prefix("- ") {
                desc = Some(d.trim_end_matches(':').to_string());
            } else if line.starts_with('`')
                && let Some(d) = desc.take()
            {
                out.push(format!("{title}: {d} {line}"));
                if out.len() >= n {
                    return out;
                }
            }
        }
    }
    out
}

fn matmul_peak_gflops() -> candle_core::Result<f64> {
    let dev = Device::Cpu;
    let n = 1024usize;
    let a = Tensor::randn(0f32, 1.0, (n, n), &dev)?;
    let b = Tensor::randn(0f32, 1.0, (n, n), &dev)?;
    for _ in 0..3 {
        a.matmul(&b)?; // warm-up
    }
    let reps = 20;
    let t = Instant::now();
    for _ in 0..reps {
        let c = a.matmul(&b)?;
        std::hint::black_box(c);
    }
    let secs = t.elapsed().as_secs_f64();
    Ok(2.0 * (n * n * n) as f64 * reps as f64 / secs / 1e9)
}

#[derive(serde::Deserialize)]
struct Dims {
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
}

fn flops(d: &Dims, n: usize) -> f64 {
    let (n, h, f) = (n as f64, d.hidden_size as f64, d.intermediate_size as f64);
    d.num_hidden_layers as f64 * (8.0 * n * h * h + 4.0 * n * h * f + 4.0 * n * n * h)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: embed_bench MODEL_DIR [N=512] [CORPUS_DIR] [BATCH=32]");
        std::process::exit(2);
    };
    let n: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(512);
    let corpus = args
        .get(2)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/corpora/tldr/pages"));
    let batch: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(32);

    let passages = match std::env::var("QUARRY_BENCH_PASSAGES") {
        Ok(v) if v.starts_with("file:") => {
            let text = std::fs::read_to_string(&v[5..])?;
            let mut out = Vec::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()).take(n) {
                out.push(serde_json::from_str::<String>(line)?);
            }
            out
        }
        _ => tldr_passages(&corpus, n),
    };
    if passages.is_empty() {
        return Err(format!("no passages (corpus {})", corpus.display()).into());
    }
    let engine = match std::env::var("QUARRY_BENCH_ENGINE").as_deref() {
        Ok("candle") => Engine::Candle,
        Ok("int8") => Engine::FusedInt8,
        _ => Engine::Fused,
    };
    let t = Instant::now();
    let model = LocalEmbedder::load(
        &dir,
        LocalOptions {
            batch_size: batch,
            engine,
            ..LocalOptions::default()
        },
    )?;
    let load_s = t.elapsed().as_secs_f64();
    let dims: Dims = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?;
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();

    // Token lengths as fed (prefix + specials, truncated), and the padded batches the
    // embedder forms (sorted by length, `batch` texts or 16,384 padded tokens per batch).
    let mut lens: Vec<usize> = refs
        .iter()
        .map(|p| model.count_tokens(p).map(|c| c.min(model.max_tokens())))
        .collect::<Result<_, _>>()?;
    lens.sort_unstable_by(|a, b| b.cmp(a));
    let real_tokens: usize = lens.iter().sum();
    let real_flops: f64 = lens.iter().map(|&l| flops(&dims, l)).sum();
    let mut padded_tokens = 0usize;
    let mut padded_flops = 0f64;
    let mut i = 0;
    // The fused engine packs its batches: it computes the real tokens only.
    if engine != Engine::Candle {
        padded_tokens = real_tokens;
        padded_flops = real_flops;
        i = lens.len();
    }
    while i < lens.len() {
        let longest = lens[i].max(1);
        let per = (16_384 / longest).clamp(1, batch);
        let end = (i + per).min(lens.len());
        padded_tokens += longest * (end - i);
        padded_flops += flops(&dims, longest) * (end - i) as f64;
        i = end;
    }

    model.embed_passages(&refs[..refs.len().min(batch)])?; // warm-up
    // Best of QUARRY_BENCH_RUNS (3; embedding and peak alike): the machine may be shared, and
    // the fastest run is the one least disturbed by other processes. bench/embed/run.py asks
    // for 1 per round and interleaves the rounds with the other tools'.
    let runs: usize = std::env::var("QUARRY_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let mut secs = f64::MAX;
    let mut peak = 0f64;
    for _ in 0..runs {
        let t = Instant::now();
        let vectors = model.embed_passages(&refs)?;
        secs = secs.min(t.elapsed().as_secs_f64());
        if vectors.len() != refs.len() {
            return Err("wrong number of vectors".into());
        }
        peak = peak.max(matmul_peak_gflops()?);
    }
    // Tokenisation alone, one text after another on this thread (the embedder tokenises a
    // call's texts in parallel before its forward passes): its share of the embedding time
    // bounds what overlapping it with the matrix products could gain.
    let t = Instant::now();
    for p in &refs {
        model.count_tokens(p)?;
    }
    let tokenize_s = t.elapsed().as_secs_f64();
    let achieved = real_flops / secs / 1e9;
    let achieved_padded = padded_flops / secs / 1e9;
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "model            {} ({}), engine {engine:?}",
        model.identity().name,
        model.identity().revision
    );
    println!(
        "encoder          {} layers, hidden {}, ffn {}; load {load_s:.2} s; RAYON_NUM_THREADS={threads}",
        dims.num_hidden_layers, dims.hidden_size, dims.intermediate_size
    );
    println!(
        "passages         {} (mean {:.1} tokens, batch {batch}, padding overhead {:.1} %)",
        refs.len(),
        real_tokens as f64 / refs.len() as f64,
        100.0 * (padded_tokens as f64 / real_tokens as f64 - 1.0)
    );
    println!(
        "time             {secs:.3} s (best of {runs}; loadavg {})",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("chunks/s         {:.1}", refs.len() as f64 / secs);
    println!(
        "tokenisation     {tokenize_s:.3} s on one thread ({:.1} % of the embedding time)",
        100.0 * tokenize_s / secs
    );
    println!("tokens/s         {:.0}", real_tokens as f64 / secs);
    println!(
        "GFLOP/s          {achieved:.1} (real tokens), {achieved_padded:.1} (padded, as computed)"
    );
    println!("fp32 matmul peak {peak:.1} GFLOP/s (candle 1024x1024x1024)");
    println!(
        "ratio            {:.1} % of peak (real), {:.1} % (padded)",
        100.0 * achieved / peak,
        100.0 * achieved_padded / peak
    );
    let summary = serde_json::json!({
        "model": model.identity().name,
        "engine": format!("{engine:?}"),
        "passages": refs.len(),
        "mean_tokens": real_tokens as f64 / refs.len() as f64,
        "batch": batch,
        "seconds": secs,
        "chunks_per_s": refs.len() as f64 / secs,
        "gflops_real": achieved,
        "gflops_padded": achieved_padded,
        "peak_gflops": peak,
        "share_of_peak": achieved / peak,
        "tokenize_seconds_one_thread": tokenize_s,
    });
    println!("json {summary}");
    Ok(())
}
