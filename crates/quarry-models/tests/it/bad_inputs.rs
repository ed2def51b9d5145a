//! Clear errors for broken or unsupported model directories.

use std::path::Path;

use crate::common::TinyKind;
use quarry_models::{Embedder, LocalEmbedder, LocalOptions, ModelError};

fn load_err(dir: &Path) -> ModelError {
    match LocalEmbedder::load(dir, LocalOptions::default()) {
        Ok(m) => panic!("{} loaded unexpectedly: {m:?}", dir.display()),
        Err(e) => {
            eprintln!("ok: {e}");
            e
        }
    }
}

#[test]
fn missing_directory() {
    let dir = crate::common::scratch_dir("missing").join("does-not-exist");
    let err = load_err(&dir);
    assert!(matches!(err, ModelError::MissingDirectory { .. }));
    let msg = err.to_string();
    assert!(msg.contains("does-not-exist"), "{msg}");
    assert!(
        msg.contains("config.json, tokenizer.json and model.safetensors"),
        "{msg}"
    );
    assert!(msg.contains("network"), "{msg}");
}

#[test]
fn file_instead_of_directory() {
    let dir = crate::common::scratch_dir("plainfile");
    let file = dir.join("model.safetensors");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        load_err(&file),
        ModelError::MissingDirectory { .. }
    ));
}

#[test]
fn missing_tokenizer_json() {
    let dir = crate::common::write_tiny_model("no-tokenizer", TinyKind::BertEncoder, 1);
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let err = load_err(&dir);
    let msg = err.to_string();
    assert!(matches!(err, ModelError::MissingFile { .. }));
    assert!(msg.contains("has no tokenizer.json"), "{msg}");
    assert!(msg.contains("Hugging Face-layout directory"), "{msg}");
}

#[test]
fn empty_directory_lists_every_missing_file() {
    let dir = crate::common::scratch_dir("empty");
    let msg = load_err(&dir).to_string();
    assert!(
        msg.contains("has no config.json, tokenizer.json, model.safetensors"),
        "{msg}"
    );
}

#[test]
fn corrupt_config_json() {
    let dir = crate::common::write_tiny_model("bad-config", TinyKind::BertEncoder, 1);
    std::fs::write(dir.join("config.json"), "{\"model_type\": \"bert\", ").unwrap();
    let err = load_err(&dir);
    assert!(matches!(err, ModelError::InvalidConfig { .. }), "{err:?}");
    assert!(err.to_string().contains("config.json"));
}

#[test]
fn config_missing_fields() {
    let dir = crate::common::write_tiny_model("incomplete-config", TinyKind::BertEncoder, 1);
    std::fs::write(
        dir.join("config.json"),
        r#"{"model_type": "bert", "hidden_size": 32}"#,
    )
    .unwrap();
    let msg = load_err(&dir).to_string();
    assert!(
        msg.contains("config.json") && msg.contains("missing field"),
        "{msg}"
    );
}

#[test]
fn unsupported_model_type() {
    let dir = crate::common::write_tiny_model("gpt2", TinyKind::BertEncoder, 1);
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    cfg["model_type"] = "gpt2".into();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let err = load_err(&dir);
    assert!(matches!(err, ModelError::UnsupportedModel { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("\"gpt2\"") && msg.contains("\"bert\", \"xlm-roberta\""),
        "{msg}"
    );
}

#[test]
fn corrupt_tokenizer_json() {
    let dir = crate::common::write_tiny_model("bad-tokenizer", TinyKind::BertEncoder, 1);
    std::fs::write(dir.join("tokenizer.json"), "{\"version\": \"1.0\"}").unwrap();
    let err = load_err(&dir);
    assert!(matches!(err, ModelError::Tokenizer { .. }), "{err:?}");
    assert!(err.to_string().contains("tokenizer.json"));
}

#[test]
fn corrupt_weights() {
    let dir = crate::common::write_tiny_model("bad-weights", TinyKind::BertEncoder, 1);
    std::fs::write(
        dir.join("model.safetensors"),
        b"\x08\x00\x00\x00\x00\x00\x00\x00garbage!",
    )
    .unwrap();
    let err = load_err(&dir);
    assert!(matches!(err, ModelError::Weights { .. }), "{err:?}");
    assert!(err.to_string().contains("model.safetensors"));
}

#[test]
fn weights_of_another_architecture() {
    let dir = crate::common::write_tiny_model("wrong-tensors", TinyKind::BertEncoder, 1);
    let mut t = std::collections::HashMap::new();
    t.insert(
        "transformer.wte.weight".to_string(),
        candle_core::Tensor::zeros((4, 4), candle_core::DType::F32, &candle_core::Device::Cpu)
            .unwrap(),
    );
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
    let msg = load_err(&dir).to_string();
    assert!(msg.contains("embeddings.word_embeddings.weight"), "{msg}");
}

#[test]
fn weights_not_matching_config() {
    let dir = crate::common::write_tiny_model("shape-mismatch", TinyKind::BertEncoder, 1);
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    cfg["hidden_size"] = 64.into();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let err = load_err(&dir);
    assert!(matches!(err, ModelError::Weights { .. }), "{err:?}");
}

#[test]
fn tiny_encoder_loads_and_embeds() {
    // The happy path on the same tiny directory, so the failures above are meaningful.
    let dir = crate::common::write_tiny_model("tiny-ok", TinyKind::BertEncoder, 1);
    let m = LocalEmbedder::load(&dir, LocalOptions::default()).unwrap();
    assert_eq!(m.identity().dimensions, crate::common::TINY_HIDDEN);
    assert_eq!(m.max_tokens(), crate::common::TINY_MAX_POS);
    let v = m
        .embed_passages(&["extract a tar archive", "", "cat"])
        .unwrap();
    assert_eq!(v.len(), 3);
    for x in &v {
        let n: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!(
            (n - 1.0).abs() < 1e-4,
            "no modules.json → normalised by default"
        );
    }
    let err = LocalEmbedder::load(
        &dir,
        LocalOptions {
            batch_size: 0,
            ..LocalOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, ModelError::InvalidInput(_)));
}
