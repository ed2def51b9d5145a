//! Model spec strings: parsing, printing, every error, the environment, and which spec opens
//! which kind of model.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use crate::common::{TinyKind, scratch_dir, write_tiny_model};
use quarry_models::{
    ApiKey, Embedder, HubProgress, ModelEnv, ModelError, ModelSpec, RerankApiFlavor, open_embedder,
    open_expander, open_reranker,
};

/// Tests here change the process environment: one at a time.
static ENV_LOCK: Mutex<()> = Mutex::new(());

fn env_lock() -> MutexGuard<'static, ()> {
    ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn hub(repo: &str, revision: &str) -> ModelSpec {
    ModelSpec::Hub {
        repo: repo.into(),
        revision: revision.into(),
    }
}

fn no_progress(_: &HubProgress) {}

/// The error of a result whose success type (a boxed model) has no `Debug`.
fn err_of<T>(r: Result<T, ModelError>) -> ModelError {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

#[test]
fn parse_and_round_trip() {
    let _g = env_lock();
    let dir = scratch_dir("spec-dir");
    let cases: Vec<(String, ModelSpec, &str)> = vec![
        (
            "openai:text-embedding-3-small".into(),
            ModelSpec::OpenAi("text-embedding-3-small".into()),
            "openai:text-embedding-3-small",
        ),
        (
            " ollama:nomic-embed-text:latest ".into(),
            ModelSpec::Ollama("nomic-embed-text:latest".into()),
            "ollama:nomic-embed-text:latest",
        ),
        (
            "jina:jina-reranker-v2-base-multilingual".into(),
            ModelSpec::RerankApi {
                flavor: RerankApiFlavor::Standard,
                model: "jina-reranker-v2-base-multilingual".into(),
            },
            "jina:jina-reranker-v2-base-multilingual",
        ),
        (
            "cohere:rerank-v3.5".into(),
            ModelSpec::RerankApi {
                flavor: RerankApiFlavor::Standard,
                model: "rerank-v3.5".into(),
            },
            "jina:rerank-v3.5",
        ),
        (
            "dashscope:gte-rerank-v2".into(),
            ModelSpec::RerankApi {
                flavor: RerankApiFlavor::DashScope,
                model: "gte-rerank-v2".into(),
            },
            "dashscope:gte-rerank-v2",
        ),
        (
            "rerank:bge-reranker-v2-m3".into(),
            ModelSpec::RerankApi {
                flavor: RerankApiFlavor::Auto,
                model: "bge-reranker-v2-m3".into(),
            },
            "rerank:bge-reranker-v2-m3",
        ),
        (
            "sentence-transformers/all-MiniLM-L6-v2".into(),
            hub("sentence-transformers/all-MiniLM-L6-v2", "main"),
            "hf:sentence-transformers/all-MiniLM-L6-v2",
        ),
        (
            "BAAI/bge-m3@5617a9f61b028005a4858fdac845db406aefb181".into(),
            hub("BAAI/bge-m3", "5617a9f61b028005a4858fdac845db406aefb181"),
            "hf:BAAI/bge-m3@5617a9f61b028005a4858fdac845db406aefb181",
        ),
        (
            "hf:bert-base-uncased".into(),
            hub("bert-base-uncased", "main"),
            "hf:bert-base-uncased",
        ),
        (
            "HF:intfloat/multilingual-e5-small@v1.0".into(),
            hub("intfloat/multilingual-e5-small", "v1.0"),
            "hf:intfloat/multilingual-e5-small@v1.0",
        ),
        (
            dir.display().to_string(),
            ModelSpec::Dir(dir.clone()),
            // Printed as given.
            "",
        ),
        // Cargo runs tests in the package directory: `tests` and `./src` exist.
        (
            "./tests".into(),
            ModelSpec::Dir(PathBuf::from("./tests")),
            "./tests",
        ),
        ("src".into(), ModelSpec::Dir(PathBuf::from("src")), "src"),
    ];
    for (text, expected, printed) in cases {
        let spec = ModelSpec::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(spec, expected, "{text}");
        let shown = spec.to_string();
        if !printed.is_empty() {
            assert_eq!(shown, printed, "{text}");
        }
        assert_eq!(
            ModelSpec::parse(&shown).unwrap(),
            spec,
            "round trip of {shown}"
        );
    }

    // `~` is the home directory.
    let home = scratch_dir("spec-home");
    std::fs::create_dir_all(home.join("models/e5")).unwrap();
    let old = std::env::var_os("HOME");
    // SAFETY: `env_lock` is held, and no test here reads the environment without it.
    unsafe { std::env::set_var("HOME", &home) };
    let parsed = (ModelSpec::parse("~/models/e5"), ModelSpec::parse("~"));
    // SAFETY: as above.
    unsafe {
        match old {
            Some(h) => std::env::set_var("HOME", h),
            None => std::env::remove_var("HOME"),
        }
    }
    assert_eq!(parsed.0.unwrap(), ModelSpec::Dir(home.join("models/e5")));
    assert_eq!(parsed.1.unwrap(), ModelSpec::Dir(home.clone()));
}

#[test]
fn parse_errors_say_what_is_wrong() {
    let _g = env_lock();
    let file = scratch_dir("spec-file").join("model.safetensors");
    std::fs::write(&file, b"x").unwrap();
    let file = file.display().to_string();
    let cases: Vec<(&str, &[&str])> = vec![
        ("", &["empty", "ORG/NAME", "openai:MODEL"]),
        ("   ", &["empty"]),
        (
            "openai:",
            &["names no model", "openai:text-embedding-3-small"],
        ),
        ("ollama: ", &["names no model", "ollama:nomic-embed-text"]),
        ("jina:", &["names no model"]),
        ("cohere:", &["names no model"]),
        ("dashscope:", &["names no model"]),
        (
            "hf:",
            &[
                "names no model",
                "hf:sentence-transformers/all-MiniLM-L6-v2",
            ],
        ),
        (
            "/no/such/quarry/model",
            &["/no/such/quarry/model", "does not exist"],
        ),
        ("./no-such-quarry-model", &["does not exist", "config.json"]),
        ("../no-such-quarry-model", &["does not exist"]),
        ("~/no-such-quarry-model-dir", &["does not exist"]),
        (&file, &["not a directory"]),
        (
            "all-MiniLM-L6-v2",
            &["hf:all-MiniLM-L6-v2", "./all-MiniLM-L6-v2"],
        ),
        ("a/b/c", &["invalid Hugging Face model id"]),
        ("org/na me", &["invalid Hugging Face model id"]),
        ("org/..x", &["invalid Hugging Face model id"]),
        ("org/name@", &["invalid Hugging Face revision"]),
        ("org/name@refs/pr/1", &["invalid Hugging Face"]),
        ("hf:org/name@..", &["invalid Hugging Face revision"]),
        ("hf:../etc", &["invalid Hugging Face model id"]),
    ];
    for (text, needles) in cases {
        let err = match ModelSpec::parse(text) {
            Ok(spec) => panic!("{text:?} parsed as {spec:?}"),
            Err(e) => e,
        };
        let msg = err.to_string();
        for n in needles {
            assert!(msg.contains(n), "{text:?}: {msg:?} should contain {n:?}");
        }
        eprintln!("ok: {text:?}: {msg}");
    }
}

/// A lookup over `pairs`, as the CLI hands its start-up snapshot of the environment over.
fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: std::collections::HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn model_env_from_variables() {
    let env = ModelEnv::from_vars(&vars(&[("HOME", "/home/u")]));
    assert_eq!(env.openai_base_url, "https://api.openai.com/v1");
    assert_eq!(env.openai_key.var(), "OPENAI_API_KEY");
    assert!(!env.openai_key.is_set());
    assert_eq!(env.ollama_host, "http://127.0.0.1:11434");
    assert_eq!(env.rerank_url, None);
    assert_eq!(env.rerank_key.var(), "QUARRY_RERANK_API_KEY");
    assert_eq!(env.hub.endpoint, "https://huggingface.co");
    assert_eq!(env.hub.token.var(), "HF_TOKEN");
    assert!(!env.hub.offline);
    assert_eq!(
        env.hub.cache_dir,
        PathBuf::from("/home/u").join(".cache/quarry/models")
    );

    let env = ModelEnv::from_vars(&vars(&[
        ("OPENAI_BASE_URL", "http://localhost:8080/v1"),
        ("OPENAI_API_KEY", "sk-o"),
        ("OLLAMA_HOST", "0.0.0.0"),
        ("HF_ENDPOINT", "https://hf-mirror.com/"),
        ("HF_HUB_OFFLINE", "1"),
        ("HF_TOKEN", "hf_x"),
        ("XDG_CACHE_HOME", "/tmp/xdg-cache"),
    ]));
    assert_eq!(env.openai_base_url, "http://localhost:8080/v1");
    assert_eq!(
        env.openai_key,
        ApiKey::new("OPENAI_API_KEY", Some("sk-o".into()))
    );
    assert_eq!(env.ollama_host, "http://0.0.0.0:11434");
    assert_eq!(env.hub.endpoint, "https://hf-mirror.com");
    assert!(env.hub.offline);
    assert!(env.hub.token.is_set());
    assert_eq!(
        env.hub.cache_dir,
        PathBuf::from("/tmp/xdg-cache/quarry/models")
    );
    assert!(
        !format!("{env:?}").contains("sk-o") && !format!("{env:?}").contains("hf_x"),
        "Debug shows no key: {env:?}"
    );

    let env = ModelEnv::from_vars(&vars(&[
        ("OPENAI_BASE_URL", "http://localhost:8080/v1"),
        ("OPENAI_API_KEY", "sk-o"),
        ("QUARRY_OPENAI_BASE_URL", "http://127.0.0.1:9000/v1"),
        ("QUARRY_OPENAI_API_KEY", "sk-x"),
        ("OLLAMA_HOST", "gpu-box:11500"),
        ("QUARRY_RERANK_URL", "http://127.0.0.1:7997/rerank"),
        ("HF_HUB_OFFLINE", "0"),
        ("QUARRY_OFFLINE", "true"),
        ("QUARRY_MODELS_DIR", "/srv/models"),
        ("XDG_CACHE_HOME", "/tmp/xdg-cache"),
    ]));
    assert_eq!(env.openai_base_url, "http://127.0.0.1:9000/v1");
    assert_eq!(env.openai_key.var(), "QUARRY_OPENAI_API_KEY");
    assert_eq!(
        env.openai_key,
        ApiKey::new("QUARRY_OPENAI_API_KEY", Some("sk-x".into()))
    );
    assert_eq!(env.ollama_host, "http://gpu-box:11500");
    assert_eq!(
        env.rerank_url.as_deref(),
        Some("http://127.0.0.1:7997/rerank")
    );
    assert!(env.hub.offline);
    assert_eq!(env.hub.cache_dir, PathBuf::from("/srv/models"));
}

#[test]
fn each_spec_opens_only_what_it_is() {
    let _g = env_lock();
    let mut env = ModelEnv {
        openai_base_url: "http://127.0.0.1:9/v1".into(),
        openai_key: ApiKey::new("QUARRY_MODELS_TEST_UNSET_VAR", None),
        rerank_url: None,
        ..ModelEnv::default()
    };
    let rerank = ModelSpec::parse("cohere:rerank-v3.5").unwrap();
    let openai = ModelSpec::parse("openai:text-embedding-3-small").unwrap();
    let ollama = ModelSpec::parse("ollama:nomic-embed-text").unwrap();

    let err = err_of(open_embedder(&rerank, &env, &no_progress));
    assert!(
        err.to_string()
            .contains("jina:rerank-v3.5 is a reranker, not an embedding model"),
        "{err}"
    );
    let err = err_of(open_reranker(&rerank, &env, &no_progress));
    assert!(err.to_string().contains("QUARRY_RERANK_URL"), "{err}");
    for spec in [&openai, &ollama] {
        let err = err_of(open_reranker(spec, &env, &no_progress));
        assert!(err.to_string().contains("cannot rerank"), "{err}");
    }
    let dir = write_tiny_model("spec-tiny", TinyKind::BertEncoder, 3);
    let local = ModelSpec::Dir(dir.clone());
    for spec in [&rerank, &local, &ModelSpec::parse("org/name").unwrap()] {
        let err = match open_expander(spec, &env) {
            Ok(_) => panic!("{spec} opened as an expander"),
            Err(e) => e,
        };
        assert!(err.to_string().contains("cannot expand queries"), "{err}");
    }

    // A local directory is an embedder; it is not a cross-encoder (no classifier).
    let e = open_embedder(&local, &env, &no_progress).unwrap();
    assert_eq!(
        e.identity().name,
        "quarry-models-spec-tiny-".to_string() + &std::process::id().to_string()
    );
    let err = err_of(open_reranker(&local, &env, &no_progress));
    assert!(
        matches!(err, ModelError::UnsupportedModel { .. }),
        "{err:?}"
    );

    // QUARRY_EMBED_QUANTIZE: int8 runs the same model on int8 weights; anything else is an
    // error naming the variable, even for a remote model (a typo must not pass unseen).
    let quantized = ModelEnv {
        embed_quantize: Some("int8".into()),
        ..env.clone()
    };
    let e8 = open_embedder(&local, &quantized, &no_progress).unwrap();
    assert_eq!(e8.identity(), e.identity());
    assert_eq!(
        e8.embed_passages(&["a b c"]).unwrap()[0].len(),
        e.identity().dimensions
    );
    let typo = ModelEnv {
        embed_quantize: Some("int4".into()),
        ..env.clone()
    };
    for spec in [&local, &openai] {
        let err = err_of(open_embedder(spec, &typo, &no_progress));
        assert!(
            err.to_string().contains("QUARRY_EMBED_QUANTIZE is 'int4'"),
            "{err}"
        );
    }
    assert_eq!(
        ModelEnv::from_vars(&vars(&[("QUARRY_EMBED_QUANTIZE", " INT8 ")])).embed_quantize,
        Some("int8".into())
    );

    // Remote models are opened without any request (the port is closed).
    open_embedder(&openai, &env, &no_progress).unwrap();
    open_embedder(&ollama, &env, &no_progress).unwrap();
    open_expander(&openai, &env).unwrap();

    // A Hub model in offline mode with an empty cache: the fetch error, naming the model.
    env.hub.offline = true;
    env.hub.cache_dir = scratch_dir("spec-empty-cache");
    let err = match open_embedder(&ModelSpec::parse("org/name").unwrap(), &env, &no_progress) {
        Ok(_) => panic!("fetched offline"),
        Err(e) => e,
    };
    assert!(matches!(err, ModelError::HubFetch { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot fetch org/name"), "{err}");
}
