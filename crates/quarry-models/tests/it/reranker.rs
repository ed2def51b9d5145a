//! LocalReranker on tiny, randomly initialised cross-encoders written by the test itself.

use crate::common::{TINY_MAX_POS, TinyKind};
use quarry_models::{Engine, Reranker, RerankerOptions};
use serde_json::json;

const QUERY: &str = "how do i extract a tar archive?";

fn passages() -> Vec<String> {
    let long = "create a compressed archive from the files in a directory and print the list of \
                files with the process output into the server log and copy it to the test \
                directory then delete the old archive and run the build again"
        .to_string();
    vec![
        "extract files from a tar archive".to_string(),
        long.clone(),
        "extract files from a tar archive".to_string(),
        "pumpkin soup recipe".to_string(),
        "git commit".to_string(),
        format!("{long} {long}"), // longer than max_position_embeddings: truncated
        "x".to_string(),
        "".to_string(),
    ]
}

fn check(kind: TinyKind, name: &str) {
    let dir = crate::common::write_tiny_model(name, kind, 42);
    for engine in [Engine::Fused, Engine::Candle] {
        check_engine(&dir, engine, name);
    }
}

fn check_engine(dir: &std::path::Path, engine: Engine, name: &str) {
    let dir = dir.to_path_buf();
    let opts = RerankerOptions {
        batch_size: 3, // several batches with different padding
        engine,
        ..RerankerOptions::default()
    };
    let model = quarry_models::LocalReranker::load(&dir, opts).unwrap();
    assert!(model.identity().revision.starts_with("sha256:"));
    assert_eq!(model.identity().dimensions, 0);
    let ps = passages();
    let refs: Vec<&str> = ps.iter().map(String::as_str).collect();

    let s1 = model.score(QUERY, &refs).unwrap();
    let s2 = model.score(QUERY, &refs).unwrap();
    assert_eq!(s1.len(), refs.len());
    assert_eq!(s1, s2, "scores must be deterministic");
    for (p, s) in refs.iter().zip(&s1) {
        assert!(*s > 0.0 && *s < 1.0, "score {s} for {p:?} not in (0,1)");
    }
    // Same passage, different batches / padding: same score.
    assert!(
        (s1[0] - s1[2]).abs() < 1e-5,
        "equal inputs scored {} and {}",
        s1[0],
        s1[2]
    );
    // Scoring alone equals scoring in a batch.
    for i in [0usize, 1, 5] {
        let alone = model.score(QUERY, &refs[i..=i]).unwrap()[0];
        assert!(
            (alone - s1[i]).abs() < 1e-5,
            "passage {i}: alone {alone} vs batched {}",
            s1[i]
        );
    }
    // Scores differ between passages (the model is not degenerate): compare log-odds.
    let log_odds: Vec<f32> = s1.iter().map(|s| (s / (1.0 - s)).ln()).collect();
    let spread = log_odds.iter().cloned().fold(f32::MIN, f32::max)
        - log_odds.iter().cloned().fold(f32::MAX, f32::min);
    assert!(spread > 1e-2, "all scores (nearly) equal: {s1:?}");
    assert!(model.score(QUERY, &[]).unwrap().is_empty());

    // Independent numpy forward pass of encoder + classification head.
    if !crate::common::python_ok() {
        eprintln!(
            "SKIPPED numpy comparison: {} lacks numpy/safetensors/tokenizers (set QUARRY_TEST_PYTHON)",
            crate::common::python()
        );
        return;
    }
    let reference = crate::common::reference(
        "rerank",
        &dir,
        &json!({"query": QUERY, "passages": ps, "max_tokens": TINY_MAX_POS}),
    );
    let logits = model.logits(QUERY, &refs).unwrap();
    for (i, p) in refs.iter().enumerate() {
        let want_logits = crate::common::as_f64s(&reference["logits"][i]);
        assert_eq!(logits[i].len(), want_logits.len());
        for (a, b) in logits[i].iter().zip(&want_logits) {
            assert!(
                (*a as f64 - b).abs() < 1e-4,
                "{name} passage {i} {p:?}: logit {a} vs reference {b}"
            );
        }
        let want = reference["scores"][i].as_f64().unwrap();
        assert!(
            (s1[i] as f64 - want).abs() < 1e-4,
            "{name} passage {i}: score {} vs reference {want}",
            s1[i]
        );
    }
    // The long passage really was truncated to the position table.
    let ids = crate::common::as_u32s(&reference["ids"][5]);
    assert_eq!(ids.len(), TINY_MAX_POS);
    eprintln!(
        "{name} {engine:?}: {} scores match the numpy reference: {s1:?}",
        refs.len()
    );
}

#[test]
fn bert_one_label() {
    check(TinyKind::BertClassifier { labels: 1 }, "bert1");
}

#[test]
fn bert_two_labels() {
    check(TinyKind::BertClassifier { labels: 2 }, "bert2");
}

#[test]
fn xlmr_one_label() {
    check(TinyKind::XlmrClassifier { labels: 1 }, "xlmr1");
}

#[test]
fn embedding_model_is_not_a_reranker() {
    let dir = crate::common::write_tiny_model("enc-as-reranker", TinyKind::BertEncoder, 7);
    let err = quarry_models::LocalReranker::load(&dir, RerankerOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("not a cross-encoder"), "{msg}");
}

#[test]
fn threads_option_gives_same_scores() {
    let dir =
        crate::common::write_tiny_model("bert-threads", TinyKind::BertClassifier { labels: 1 }, 9);
    let a = quarry_models::LocalReranker::load(&dir, RerankerOptions::default()).unwrap();
    let b = quarry_models::LocalReranker::load(
        &dir,
        RerankerOptions {
            threads: Some(1),
            ..RerankerOptions::default()
        },
    )
    .unwrap();
    let ps = passages();
    let refs: Vec<&str> = ps.iter().map(String::as_str).collect();
    let sa = a.score(QUERY, &refs).unwrap();
    let sb = b.score(QUERY, &refs).unwrap();
    for (x, y) in sa.iter().zip(&sb) {
        assert!((x - y).abs() < 1e-5);
    }
}
