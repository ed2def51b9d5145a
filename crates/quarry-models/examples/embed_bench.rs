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
//! `--path=avx512|avxvnni|avx2|portable` (anywhere in the arguments) caps the fused engine's
//! kernels ([`quarry_models::KernelPath`]; default: the best this CPU has), so that each path
//! can be measured on one machine. `--vectors=FILE` writes the last run's vectors there, one
//! JSON array per line in passage order (bench/embed/run.py compares them across tools). Besides candle's matmul, the report gives this machine's
//! register-level peaks at the same thread count: fp32 FMA (zmm with AVX-512F, else ymm) and
//! int8 multiply-accumulate (`vpdpbusd` zmm with AVX512-VNNI, else `vpmaddubsw`+`vpmaddwd`),
//! counting 2 operations per multiply-add, and the engine's share of the one of its kind.
//!
//! Threads: candle sizes its pools from RAYON_NUM_THREADS / CANDLE_NUM_THREADS (default: the
//! physical cores).

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Device, Tensor};
use quarry_models::{Embedder, Engine, KernelPath, LocalEmbedder, LocalOptions};

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

/// Register-level peaks (GFLOP/s fp32, GOP/s int8) of `threads` threads at once.
fn register_peaks(threads: usize) -> (f64, f64) {
    let run = |f: fn() -> f64| -> f64 {
        let mut best = 0f64;
        for _ in 0..3 {
            let total: f64 = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads).map(|_| s.spawn(f)).collect();
                hs.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
            });
            best = best.max(total);
        }
        best
    };
    (run(peak::fp32_gflops), run(peak::int8_gops))
}

mod peak {
    //! One thread's multiply-accumulate rate with the operands in registers (12 independent
    //! chains), ×2 operations per multiply-add.
    #![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const ITERS: u64 = 20_000_000;
    const CHAINS: usize = 12;

    pub(super) fn fp32_gflops() -> f64 {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") {
                // SAFETY: AVX-512F detected.
                return unsafe { x86::fp32_zmm() };
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                // SAFETY: AVX2 + FMA detected.
                return unsafe { x86::fp32_ymm() };
            }
        }
        0.0
    }

    pub(super) fn int8_gops() -> f64 {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512vnni") {
                // SAFETY: AVX512-VNNI (and so AVX-512F) detected.
                return unsafe { x86::int8_vnni_zmm() };
            }
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 detected.
                return unsafe { x86::int8_maddubs_ymm() };
            }
        }
        0.0
    }

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use super::{CHAINS, ITERS};
        use std::arch::x86_64::*;
        use std::time::Instant;

        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn fp32_zmm() -> f64 {
            let a = _mm512_set1_ps(1.000_01);
            let w: [__m512; CHAINS] =
                std::array::from_fn(|i| _mm512_set1_ps(0.999 + i as f32 * 1e-4));
            let mut acc = [_mm512_setzero_ps(); CHAINS];
            let t = Instant::now();
            for _ in 0..ITERS {
                for j in 0..CHAINS {
                    acc[j] = _mm512_fmadd_ps(a, w[j], acc[j]);
                }
            }
            let secs = t.elapsed().as_secs_f64();
            std::hint::black_box(acc);
            2.0 * (ITERS * CHAINS as u64 * 16) as f64 / secs / 1e9
        }

        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn fp32_ymm() -> f64 {
            let a = _mm256_set1_ps(1.000_01);
            let w: [__m256; CHAINS] =
                std::array::from_fn(|i| _mm256_set1_ps(0.999 + i as f32 * 1e-4));
            let mut acc = [_mm256_setzero_ps(); CHAINS];
            let t = Instant::now();
            for _ in 0..ITERS {
                for j in 0..CHAINS {
                    acc[j] = _mm256_fmadd_ps(a, w[j], acc[j]);
                }
            }
            let secs = t.elapsed().as_secs_f64();
            std::hint::black_box(acc);
            2.0 * (ITERS * CHAINS as u64 * 8) as f64 / secs / 1e9
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        pub(super) unsafe fn int8_vnni_zmm() -> f64 {
            let mut a = _mm512_set1_epi8(3);
            let one = _mm512_set1_epi8(1);
            let w: [__m512i; CHAINS] = std::array::from_fn(|i| _mm512_set1_epi8(i as i8 + 1));
            let mut acc = [_mm512_setzero_si512(); CHAINS];
            let t = Instant::now();
            for _ in 0..ITERS {
                for j in 0..CHAINS {
                    acc[j] = _mm512_dpbusd_epi32(acc[j], a, w[j]);
                }
                a = _mm512_xor_si512(a, one);
            }
            let secs = t.elapsed().as_secs_f64();
            std::hint::black_box(acc);
            2.0 * (ITERS * CHAINS as u64 * 64) as f64 / secs / 1e9
        }

        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn int8_maddubs_ymm() -> f64 {
            let mut a = _mm256_set1_epi8(3);
            let ones = _mm256_set1_epi16(1);
            let w: [__m256i; CHAINS] = std::array::from_fn(|i| _mm256_set1_epi8(i as i8 + 1));
            let mut acc = [_mm256_setzero_si256(); CHAINS];
            let t = Instant::now();
            for _ in 0..ITERS {
                for j in 0..CHAINS {
                    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, w[j]), ones);
                    acc[j] = _mm256_add_epi32(acc[j], p);
                }
                a = _mm256_xor_si256(a, ones);
            }
            let secs = t.elapsed().as_secs_f64();
            std::hint::black_box(acc);
            2.0 * (ITERS * CHAINS as u64 * 32) as f64 / secs / 1e9
        }
    }
}

fn parse_path(v: &str) -> Result<KernelPath, String> {
    Ok(match v {
        "avx512" => KernelPath::Avx512,
        "avxvnni" => KernelPath::AvxVnni,
        "avx2" => KernelPath::Avx2,
        "portable" => KernelPath::Portable,
        other => {
            return Err(format!(
                "--path={other}: expected avx512, avxvnni, avx2 or portable"
            ));
        }
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut path = KernelPath::detect();
    let mut vectors_out: Option<PathBuf> = None;
    let mut args = Vec::new();
    for a in std::env::args().skip(1) {
        if let Some(v) = a.strip_prefix("--path=") {
            path = parse_path(v)?;
        } else if let Some(v) = a.strip_prefix("--vectors=") {
            vectors_out = Some(PathBuf::from(v));
        } else {
            args.push(a);
        }
    }
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
    let model = quarry_models::with_kernel_path(path, || {
        LocalEmbedder::load(
            &dir,
            LocalOptions {
                batch_size: batch,
                engine,
                ..LocalOptions::default()
            },
        )
    })?;
    let kernel = match engine {
        Engine::Candle => "candle (gemm crate)",
        Engine::FusedInt8 => path.int8_name(),
        _ => path.f32_name(),
    };
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
        if let Some(f) = &vectors_out {
            let lines: Vec<String> = vectors
                .iter()
                .map(serde_json::to_string)
                .collect::<Result<_, _>>()?;
            std::fs::write(f, lines.join("\n") + "\n")?;
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
    let threads_n = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (fma_peak, int8_peak) = register_peaks(threads_n);
    let achieved = real_flops / secs / 1e9;
    let kind_peak = if engine == Engine::FusedInt8 {
        int8_peak
    } else {
        fma_peak
    };
    let achieved_padded = padded_flops / secs / 1e9;
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "model            {} ({}), engine {engine:?}, kernel {kernel} (path {path:?})",
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
    println!(
        "register peaks   fp32 FMA {fma_peak:.0} GFLOP/s, int8 MAC {int8_peak:.0} GOP/s ({threads_n} threads)"
    );
    println!(
        "share            {:.1} % of this kind's register peak",
        100.0 * achieved / kind_peak.max(1e-9)
    );
    let summary = serde_json::json!({
        "model": model.identity().name,
        "engine": format!("{engine:?}"),
        "path": format!("{path:?}"),
        "kernel": kernel,
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
        "threads": threads_n,
        "fp32_fma_peak_gflops": fma_peak,
        "int8_mac_peak_gops": int8_peak,
        "share_of_register_peak": achieved / kind_peak.max(1e-9),
    });
    println!("json {summary}");
    Ok(())
}
