//! Every kernel path this CPU runs ([`KernelPath`]: AVX-512 / AVX512-VNNI, AVX-VNNI, AVX2,
//! plain Rust) against the independent numpy float64 reference (tests/reference_embed.py), on
//! all-MiniLM-L6-v2 and multilingual-e5-small: fp32 paths within cosine 0.999 (measured
//! ~1 - 1e-7), int8 paths within 0.99. Paths this CPU lacks are named as skipped.
//!
//! Runs when QUARRY_TEST_MINILM / QUARRY_TEST_E5 point at model directories (see
//! scripts/setup-models).

use quarry_models::{Embedder, Engine, KernelPath, LocalEmbedder, LocalOptions, with_kernel_path};
use serde_json::json;

fn texts() -> Vec<String> {
    vec![
        "How do I extract a tar.gz archive?".to_string(),
        "南瓜的家常做法".to_string(),
        "如何使用 git rebase 合并多个 commit？".to_string(),
        "x".to_string(),
        "Quarry indexes markdown notes, PDFs and office documents and answers questions \
         about them with hybrid keyword and vector search. "
            .repeat(12),
        "南瓜是一种常见的蔬菜，可以做汤、做饼，也可以蒸着吃。".repeat(10),
    ]
}

fn check(var: &str, passage_prefix: &str, max_tokens: usize) {
    let Some(dir) = crate::common::model_dir(var) else {
        return;
    };
    let texts = texts();
    let inputs: Vec<String> = texts
        .iter()
        .map(|t| format!("{passage_prefix}{t}"))
        .collect();
    let reference = crate::common::reference(
        "embed",
        &dir,
        &json!({"texts": inputs, "max_tokens": max_tokens}),
    );
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for path in KernelPath::ALL {
        for (engine, native, floor) in [
            (Engine::Fused, path.f32_native(), 0.999),
            (Engine::FusedInt8, path.int8_native(), 0.99),
        ] {
            if !native {
                eprintln!("{var}: skipped {path:?} {engine:?}: this CPU lacks its kernel");
                continue;
            }
            let model = with_kernel_path(path, || {
                LocalEmbedder::load(
                    &dir,
                    LocalOptions {
                        batch_size: 4,
                        engine,
                        ..LocalOptions::default()
                    },
                )
            })
            .unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
            let got = model.embed_passages(&refs).unwrap();
            let mut worst = 1f64;
            for (i, v) in got.iter().enumerate() {
                let want = crate::common::as_f64s(&reference["vectors"][i]);
                worst = worst.min(crate::common::cosine(v, &want));
            }
            let kernel = if engine == Engine::Fused {
                path.f32_name()
            } else {
                path.int8_name()
            };
            eprintln!("{var} {path:?} {engine:?} ({kernel}): worst cosine to float64 {worst:.6}");
            assert!(
                worst >= floor,
                "{var} {path:?} {engine:?}: cosine {worst} < {floor}"
            );
        }
    }
}

#[test]
fn every_path_matches_reference_minilm() {
    check("QUARRY_TEST_MINILM", "", 256);
}

#[test]
fn every_path_matches_reference_e5() {
    check("QUARRY_TEST_E5", "passage: ", 512);
}
