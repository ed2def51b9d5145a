//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use candle_core::{Device, Tensor};
use serde_json::{Value, json};

/// A model directory from an env var, or `None` with a printed skip message.
pub(crate) fn model_dir(var: &str) -> Option<PathBuf> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => {
            eprintln!(
                "SKIPPED: {var} is not set (run scripts/setup-models and export the paths it \
                 prints to run this test)"
            );
            None
        }
    }
}

pub(crate) fn python() -> String {
    std::env::var("QUARRY_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Whether the reference interpreter has numpy, safetensors and tokenizers.
pub(crate) fn python_ok() -> bool {
    Command::new(python())
        .args(["-c", "import numpy, safetensors, tokenizers"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Runs tests/reference_embed.py `mode` on `dir` with `request` on stdin.
pub(crate) fn reference(mode: &str, dir: &Path, request: &Value) -> Value {
    // At run time first: a test binary reused from a build cache elsewhere keeps the path it
    // was compiled at.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf());
    let script = manifest.join("tests/reference_embed.py");
    let mut child = Command::new(python())
        .arg(&script)
        .arg(mode)
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); set QUARRY_TEST_PYTHON", python()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "reference_embed.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn cosine(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * y).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

pub(crate) fn as_f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

pub(crate) fn as_u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// A fresh empty directory under the target dir.
pub(crate) fn scratch_dir(name: &str) -> PathBuf {
    // Cargo sets CARGO_TARGET_TMPDIR at compile time for integration tests.
    let base = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("quarry-models-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ----------------------------------------------------------------------------------------------
// Tiny self-made models
// ----------------------------------------------------------------------------------------------

pub(crate) const WORDS: &[&str] = &[
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "how",
    "what",
    "do",
    "i",
    "you",
    "file",
    "files",
    "archive",
    "extract",
    "create",
    "list",
    "directory",
    "copy",
    "move",
    "delete",
    "remove",
    "search",
    "text",
    "pattern",
    "network",
    "port",
    "process",
    "kill",
    "show",
    "print",
    "with",
    "from",
    "into",
    "compress",
    "tar",
    "zip",
    "git",
    "commit",
    "branch",
    "merge",
    "docker",
    "image",
    "container",
    "python",
    "rust",
    "cargo",
    "build",
    "test",
    "run",
    "server",
    "http",
    "request",
    "json",
    "pumpkin",
    "soup",
    "recipe",
    "cook",
    "bake",
    "bread",
    "cat",
    "dog",
    "?",
    ".",
    ",",
    "!",
    "-",
    "/",
];

/// A WordPiece tokenizer.json over [`WORDS`] + letters (BERT-style specials, pair template).
/// Returns (json, vocab size).
pub(crate) fn tiny_tokenizer_json() -> (Value, usize) {
    let mut vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    vocab.extend(WORDS.iter().map(|s| s.to_string()));
    for c in 'a'..='z' {
        let s = c.to_string();
        if !vocab.contains(&s) {
            vocab.push(s);
        }
        vocab.push(format!("##{c}"));
    }
    let map: serde_json::Map<String, Value> = vocab
        .iter()
        .enumerate()
        .map(|(i, w)| (w.clone(), json!(i)))
        .collect();
    let special = |id: u32, content: &str| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    let tok = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"),
                         special(3, "[SEP]"), special(4, "[MASK]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}
            }
        },
        "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": map}
    });
    (tok, vocab.len())
}

/// Deterministic pseudo-random numbers (splitmix64), uniform in [-1, 1).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub(crate) fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub(crate) fn tensor(&mut self, shape: &[usize], scale: f32, offset: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| offset + scale * self.next_f32()).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TinyKind {
    /// BertForSequenceClassification (`bert.` prefix, pooler + classifier).
    BertClassifier { labels: usize },
    /// XLMRobertaForSequenceClassification (`roberta.` prefix, classifier.dense/out_proj).
    XlmrClassifier { labels: usize },
    /// A plain BertModel (no head, no prefix).
    BertEncoder,
}

pub(crate) const TINY_HIDDEN: usize = 32;
pub(crate) const TINY_MAX_POS: usize = 40;

/// Writes a tiny randomly initialised model directory and returns its path.
pub(crate) fn write_tiny_model(name: &str, kind: TinyKind, seed: u64) -> PathBuf {
    let dir = scratch_dir(name);
    let (tok, vocab) = tiny_tokenizer_json();
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    let (h, f, layers, heads) = (TINY_HIDDEN, 64usize, 2usize, 4usize);
    let (xlmr, prefix, labels) = match kind {
        TinyKind::BertClassifier { labels } => (false, "bert.", labels),
        TinyKind::XlmrClassifier { labels } => (true, "roberta.", labels),
        TinyKind::BertEncoder => (false, "", 0),
    };
    let pad = 0usize;
    // XLM-R numbers positions from pad+1, so it needs pad+1 extra rows.
    let max_pos = if xlmr {
        TINY_MAX_POS + pad + 1
    } else {
        TINY_MAX_POS
    };
    let type_vocab = if xlmr { 1 } else { 2 };
    let mut cfg = json!({
        "model_type": if xlmr { "xlm-roberta" } else { "bert" },
        "architectures": [match kind {
            TinyKind::BertClassifier { .. } => "BertForSequenceClassification",
            TinyKind::XlmrClassifier { .. } => "XLMRobertaForSequenceClassification",
            TinyKind::BertEncoder => "BertModel",
        }],
        "vocab_size": vocab,
        "hidden_size": h,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": f,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": max_pos,
        "type_vocab_size": type_vocab,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": pad,
        "position_embedding_type": "absolute",
    });
    if labels > 0 {
        let id2label: serde_json::Map<String, Value> = (0..labels)
            .map(|i| (i.to_string(), json!(format!("LABEL_{i}"))))
            .collect();
        cfg["id2label"] = Value::Object(id2label);
    }
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(&cfg).unwrap(),
    )
    .unwrap();

    let mut rng = Rng::new(seed);
    let mut t: HashMap<String, Tensor> = HashMap::new();
    let mut put = |name: String, tensor: Tensor| {
        t.insert(name, tensor);
    };
    let p = |s: &str| format!("{prefix}{s}");
    put(
        p("embeddings.word_embeddings.weight"),
        rng.tensor(&[vocab, h], 1.0, 0.0),
    );
    put(
        p("embeddings.position_embeddings.weight"),
        rng.tensor(&[max_pos, h], 0.5, 0.0),
    );
    put(
        p("embeddings.token_type_embeddings.weight"),
        rng.tensor(&[type_vocab, h], 0.5, 0.0),
    );
    put(p("embeddings.LayerNorm.weight"), rng.tensor(&[h], 0.1, 1.0));
    put(p("embeddings.LayerNorm.bias"), rng.tensor(&[h], 0.1, 0.0));
    let lin = |rng: &mut Rng, out: usize, inp: usize| {
        let scale = (3.0 / inp as f32).sqrt();
        (
            rng.tensor(&[out, inp], scale, 0.0),
            rng.tensor(&[out], 0.1, 0.0),
        )
    };
    for i in 0..layers {
        let l = |s: &str| p(&format!("encoder.layer.{i}.{s}"));
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", f, h),
            ("output.dense", h, f),
        ] {
            let (w, b) = lin(&mut rng, out, inp);
            put(l(&format!("{name}.weight")), w);
            put(l(&format!("{name}.bias")), b);
        }
        for ln in ["attention.output.LayerNorm", "output.LayerNorm"] {
            put(l(&format!("{ln}.weight")), rng.tensor(&[h], 0.1, 1.0));
            put(l(&format!("{ln}.bias")), rng.tensor(&[h], 0.1, 0.0));
        }
    }
    match kind {
        TinyKind::BertClassifier { labels } => {
            let (w, b) = lin(&mut rng, h, h);
            put(p("pooler.dense.weight"), w);
            put(p("pooler.dense.bias"), b);
            let (w, b) = lin(&mut rng, labels, h);
            put("classifier.weight".into(), (w * 1.5).unwrap());
            put("classifier.bias".into(), b);
        }
        TinyKind::XlmrClassifier { labels } => {
            let (w, b) = lin(&mut rng, h, h);
            put("classifier.dense.weight".into(), w);
            put("classifier.dense.bias".into(), b);
            let (w, b) = lin(&mut rng, labels, h);
            put("classifier.out_proj.weight".into(), (w * 1.5).unwrap());
            put("classifier.out_proj.bias".into(), b);
        }
        TinyKind::BertEncoder => {}
    }
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
    dir
}
