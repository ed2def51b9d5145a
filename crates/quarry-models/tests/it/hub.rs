//! Fetching models from a Hugging Face Hub look-alike on loopback: layout, caching, offline
//! mode, interrupted downloads and every error the Hub can give.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::common::{TinyKind, scratch_dir, write_tiny_model};
use quarry_models::{
    ApiKey, Embedder, HubProgress, LocalEmbedder, LocalOptions, LocalReranker, ModelCacheOptions,
    ModelEnv, ModelError, ModelSpec, Reranker, RerankerOptions, fetch_model, open_embedder,
    open_reranker,
};
use quarry_test_http::{Reply, Request, Server};

const TOKEN_VAR: &str = "QUARRY_MODELS_TEST_HF_TOKEN";
const TOKEN: &str = "hf_test_SUPERSECRET_0123456789";

/// A Hugging Face Hub look-alike: replies are looked up by request target; anything else is the
/// Hub's 404 for a missing file. Stops when dropped.
struct HubServer {
    server: Server,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
}

impl HubServer {
    fn start() -> HubServer {
        Self::bind("127.0.0.1:0").unwrap()
    }

    fn bind(addr: &str) -> std::io::Result<HubServer> {
        let routes: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
        let table = routes.clone();
        let server = Server::bind(addr, move |request| {
            table
                .lock()
                .unwrap()
                .get(&request.target)
                .cloned()
                .unwrap_or_else(|| {
                    Reply::status(404, "text/plain", "Entry not found")
                        .header("X-Error-Code", "EntryNotFound")
                })
        })?;
        Ok(HubServer { server, routes })
    }

    fn base(&self) -> String {
        self.server.base()
    }

    fn route(&self, path: &str, reply: Reply) {
        self.routes.lock().unwrap().insert(path.to_string(), reply);
    }

    /// Serves every file of `dir` (recursively) under `/{repo}/resolve/{revision}/`.
    fn serve_model(&self, repo: &str, revision: &str, dir: &Path) {
        for (rel, bytes) in files_of(dir) {
            self.route(&format!("/{repo}/resolve/{revision}/{rel}"), file(bytes));
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.server.requests()
    }

    fn paths(&self) -> Vec<String> {
        self.server.targets()
    }

    fn clear(&self) {
        self.server.clear();
    }
}

/// 200 with these bytes, as the Hub serves a file.
fn file(bytes: Vec<u8>) -> Reply {
    Reply::ok("application/octet-stream", bytes)
}

/// An error as the Hub gives it: a status, `X-Error-*` headers and a text body.
fn hub_error(status: u16, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Reply {
    headers.iter().fold(
        Reply::status(status, "text/plain", body),
        |reply, (k, v)| reply.header(k, *v),
    )
}

/// (path relative to `dir` with `/` separators, bytes) for every file under `dir`.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A tiny sentence-transformers model: BERT weights plus modules.json asking for CLS pooling,
/// so a fetch that skipped the optional files would load a different (mean-pooling) model.
fn tiny_st_model(name: &str) -> PathBuf {
    let dir = write_tiny_model(name, TinyKind::BertEncoder, 7);
    std::fs::write(
        dir.join("modules.json"),
        r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    std::fs::write(
        dir.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 32, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("sentence_bert_config.json"),
        r#"{"max_seq_length": 24}"#,
    )
    .unwrap();
    dir
}

fn hub_opts(server: &HubServer, cache: &Path) -> ModelCacheOptions {
    ModelCacheOptions {
        endpoint: format!("{}/", server.base()),
        cache_dir: cache.to_path_buf(),
        token: ApiKey::new(TOKEN_VAR, Some(TOKEN.into())),
        offline: false,
    }
}

fn no_progress(_: &HubProgress) {}

/// Tests here share one loopback Hub's logs: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn fetch_err(repo: &str, rev: &str, opts: &ModelCacheOptions) -> ModelError {
    let err = fetch_model(repo, rev, opts, &no_progress).unwrap_err();
    let msg = err.to_string();
    assert!(
        !msg.contains(TOKEN) && !format!("{err:?}").contains(TOKEN),
        "token leaked: {msg}"
    );
    eprintln!("ok: {msg}");
    err
}

#[test]
fn fetch_load_and_reuse_the_cache() {
    let _g = serial();
    let src = tiny_st_model("hub-src");
    let server = HubServer::start();
    server.serve_model("org/tiny-bert", "main", &src);
    // Weights through a redirect, as the Hub does for LFS files: to a CDN on another host
    // (127.0.0.2 is loopback too on Linux; elsewhere the same host on another port) and from
    // there to another path on the same host.
    let weights = std::fs::read(src.join("model.safetensors")).unwrap();
    let cdn = HubServer::bind("127.0.0.2:0").unwrap_or_else(|_| HubServer::start());
    let other_host = cdn.base().starts_with("http://127.0.0.2:");
    server.route(
        "/org/tiny-bert/resolve/main/model.safetensors",
        Reply::redirect(&format!("{}/cdn/signed-1234", cdn.base())),
    );
    cdn.route("/cdn/signed-1234", Reply::redirect("/cdn/blob-1234"));
    cdn.route("/cdn/blob-1234", file(weights.clone()));
    let cache = scratch_dir("hub-cache");
    let opts = hub_opts(&server, &cache);

    let reports: Mutex<Vec<HubProgress>> = Mutex::new(Vec::new());
    let record = |p: &HubProgress| reports.lock().unwrap().push(p.clone());
    let dir = fetch_model("org/tiny-bert", "main", &opts, &record).unwrap();
    assert_eq!(dir, cache.join("org--tiny-bert").join("main"));
    for (rel, bytes) in files_of(&src) {
        assert_eq!(std::fs::read(dir.join(&rel)).unwrap(), bytes, "{rel}");
    }
    let leftovers: Vec<String> = files_of(&dir)
        .into_iter()
        .map(|(rel, _)| rel)
        .filter(|r| r.ends_with(".part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let paths = server.paths();
    let base = "/org/tiny-bert/resolve/main";
    assert_eq!(paths[0], format!("{base}/config.json"), "config.json first");
    for f in [
        "tokenizer.json",
        "modules.json",
        "1_Pooling/config.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
        "model.safetensors",
    ] {
        assert!(
            paths.contains(&format!("{base}/{f}")),
            "{f} not requested: {paths:?}"
        );
    }
    assert_eq!(
        paths.last().unwrap(),
        &format!("{base}/model.safetensors"),
        "weights last"
    );
    assert!(
        !paths.iter().any(|p| p.ends_with("pytorch_model.bin")),
        "safetensors found"
    );
    for r in server.requests() {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{}",
            r.target
        );
    }
    let cdn_requests = cdn.requests();
    let cdn_paths: Vec<&str> = cdn_requests.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(cdn_paths, ["/cdn/signed-1234", "/cdn/blob-1234"]);
    if other_host {
        for r in &cdn_requests {
            assert_eq!(
                r.header("authorization"),
                None,
                "the token must not go to another host"
            );
        }
    }

    let reports = reports.into_inner().unwrap();
    let w: Vec<&HubProgress> = reports
        .iter()
        .filter(|p| p.file == "model.safetensors")
        .collect();
    assert_eq!(w.first().unwrap().downloaded, 0);
    let last = w.last().unwrap();
    assert_eq!(last.downloaded, weights.len() as u64);
    assert_eq!(last.total, Some(weights.len() as u64));

    // The fetched directory loads like the original, under the Hub id.
    let original = LocalEmbedder::load(&src, LocalOptions::default()).unwrap();
    let env = ModelEnv {
        hub: opts.clone(),
        ..ModelEnv::default()
    };
    let spec = ModelSpec::parse("org/tiny-bert").unwrap();
    server.clear();
    let fetched = open_embedder(&spec, &env, &no_progress).unwrap();
    assert!(
        server.paths().is_empty(),
        "a complete cache needs no request"
    );
    assert_eq!(fetched.identity().name, "org/tiny-bert");
    assert_eq!(fetched.identity().revision, original.identity().revision);
    assert_eq!(
        fetched.max_tokens(),
        24,
        "sentence_bert_config.json was fetched"
    );
    let texts = ["extract a tar archive", "pumpkin soup recipe"];
    assert_eq!(
        fetched.embed_passages(&texts).unwrap(),
        original.embed_passages(&texts).unwrap()
    );
    let mean = LocalEmbedder::load(
        &src,
        LocalOptions {
            pooling: Some(quarry_models::Pooling::Mean),
            ..LocalOptions::default()
        },
    )
    .unwrap();
    assert_ne!(
        fetched.embed_passages(&texts).unwrap(),
        mean.embed_passages(&texts).unwrap(),
        "CLS pooling from 1_Pooling/config.json is in effect"
    );

    // Second fetch, and offline mode, with a complete cache: no request at all.
    fetch_model("org/tiny-bert", "main", &opts, &no_progress).unwrap();
    let offline = ModelCacheOptions {
        offline: true,
        ..opts.clone()
    };
    assert_eq!(
        fetch_model("org/tiny-bert", "main", &offline, &no_progress).unwrap(),
        dir
    );
    assert!(server.paths().is_empty(), "{:?}", server.paths());
}

#[test]
fn offline_or_unreachable_with_an_empty_cache() {
    let _g = serial();
    let server = HubServer::start();
    let cache = scratch_dir("hub-offline");
    let opts = ModelCacheOptions {
        offline: true,
        ..hub_opts(&server, &cache)
    };
    let err = fetch_err("sentence-transformers/all-MiniLM-L6-v2", "main", &opts);
    assert!(matches!(err, ModelError::HubFetch { .. }), "{err:?}");
    let msg = err.to_string();
    let first = format!(
        "cannot fetch sentence-transformers/all-MiniLM-L6-v2 from {}",
        server.base()
    );
    for needle in [
        first.as_str(),
        "offline",
        "config.json, tokenizer.json, model.safetensors",
        "Download the model on a machine with access",
        "QUARRY_EMBED_MODEL=/path/to/all-MiniLM-L6-v2",
    ] {
        assert!(msg.contains(needle), "{msg:?} should contain {needle:?}");
    }
    assert!(server.paths().is_empty(), "offline mode sends nothing");
    assert!(
        !cache
            .join("sentence-transformers--all-MiniLM-L6-v2")
            .exists()
    );

    // Nobody listening: the same advice, with the network error as the cause.
    let port = quarry_test_http::unused_port();
    let opts = ModelCacheOptions {
        endpoint: format!("http://127.0.0.1:{port}"),
        cache_dir: cache.clone(),
        token: ApiKey::new(TOKEN_VAR, Some(TOKEN.into())),
        offline: false,
    };
    let err = fetch_err("org/tiny-bert", "main", &opts);
    let msg = err.to_string();
    assert!(msg.contains(&format!(
        "cannot fetch org/tiny-bert from http://127.0.0.1:{port}"
    )));
    assert!(
        msg.contains("Download the model on a machine with access"),
        "{msg}"
    );
    assert!(
        msg.contains(
            &cache
                .join("org--tiny-bert")
                .join("main")
                .display()
                .to_string()
        )
    );
}

#[test]
fn missing_files_on_the_hub() {
    let _g = serial();
    let src = tiny_st_model("hub-404-src");
    let server = HubServer::start();
    let cache = scratch_dir("hub-404");
    let opts = hub_opts(&server, &cache);

    // No tokenizer.json.
    server.serve_model("org/no-tok", "main", &src);
    server
        .routes
        .lock()
        .unwrap()
        .remove("/org/no-tok/resolve/main/tokenizer.json");
    let msg = fetch_err("org/no-tok", "main", &opts).to_string();
    assert!(
        msg.contains("tokenizer.json was not found on the Hub"),
        "{msg}"
    );

    // No weights at all.
    server.serve_model("org/no-weights", "main", &src);
    server
        .routes
        .lock()
        .unwrap()
        .remove("/org/no-weights/resolve/main/model.safetensors");
    let msg = fetch_err("org/no-weights", "main", &opts).to_string();
    assert!(
        msg.contains("neither model.safetensors nor pytorch_model.bin was found on the Hub"),
        "{msg}"
    );

    // Only pytorch_model.bin: the fallback is fetched.
    server.serve_model("org/bin-only", "v2", &src);
    let routes = &server.routes;
    let w = routes
        .lock()
        .unwrap()
        .remove("/org/bin-only/resolve/v2/model.safetensors")
        .unwrap();
    server.route("/org/bin-only/resolve/v2/pytorch_model.bin", w);
    let dir = fetch_model("org/bin-only", "v2", &opts, &no_progress).unwrap();
    assert!(dir.join("pytorch_model.bin").is_file());
    assert!(!dir.join("model.safetensors").exists());

    // The Hub marks a missing repository or revision: stop at once, say which.
    server.clear();
    server.route(
        "/org/nope/resolve/main/config.json",
        hub_error(
            404,
            &[("X-Error-Code", "RepoNotFound")],
            "Repository not found",
        ),
    );
    let msg = fetch_err("org/nope", "main", &opts).to_string();
    assert!(msg.contains("repository was not found on the Hub"), "{msg}");
    assert_eq!(server.paths().len(), 1);
    server.route(
        "/org/no-tok/resolve/v9/config.json",
        hub_error(
            404,
            &[("X-Error-Code", "RevisionNotFound")],
            "Invalid rev id: v9",
        ),
    );
    let msg = fetch_err("org/no-tok", "v9", &opts).to_string();
    assert!(
        msg.contains("revision v9 was not found on the Hub"),
        "{msg}"
    );
}

#[test]
fn refused_access_mentions_the_token() {
    let _g = serial();
    let server = HubServer::start();
    let cache = scratch_dir("hub-401");
    server.route(
        "/org/private/resolve/main/config.json",
        hub_error(
            401,
            &[("X-Error-Code", "RepoNotFound")],
            "Invalid username or password.",
        ),
    );
    // No token configured: say which variable to set.
    let opts = ModelCacheOptions {
        token: ApiKey::new("HF_TOKEN", None),
        ..hub_opts(&server, &cache)
    };
    let msg = fetch_err("org/private", "main", &opts).to_string();
    assert!(
        msg.contains("HTTP 401") && msg.contains("HF_TOKEN"),
        "{msg}"
    );
    assert!(msg.contains("Invalid username or password"), "{msg}");

    // A refused token: scrubbed from the server's answer.
    server.route(
        "/org/private/resolve/main/config.json",
        hub_error(401, &[], format!("bad token {TOKEN}")),
    );
    let opts = hub_opts(&server, &cache);
    let msg = fetch_err("org/private", "main", &opts).to_string();
    assert!(
        msg.contains("refused the token in QUARRY_MODELS_TEST_HF_TOKEN"),
        "{msg}"
    );
    assert!(msg.contains("bad token [REDACTED]"), "{msg}");

    server.route(
        "/org/gated/resolve/main/config.json",
        hub_error(
            403,
            &[
                ("X-Error-Code", "GatedRepo"),
                ("X-Error-Message", "Access to model org/gated is restricted"),
            ],
            "{}",
        ),
    );
    let msg = fetch_err("org/gated", "main", &opts).to_string();
    assert!(msg.contains("HTTP 403") && msg.contains("gated"), "{msg}");
    assert!(msg.contains("QUARRY_MODELS_TEST_HF_TOKEN"), "{msg}");
    assert!(
        msg.contains("Access to model org/gated is restricted"),
        "{msg}"
    );

    server.route(
        "/org/busy/resolve/main/config.json",
        hub_error(503, &[], "try later"),
    );
    let msg = fetch_err("org/busy", "main", &opts).to_string();
    assert!(
        msg.contains("HTTP 503") && msg.contains("try later"),
        "{msg}"
    );
}

#[test]
fn interrupted_downloads_are_never_taken_for_complete_files() {
    let _g = serial();
    let src = tiny_st_model("hub-part-src");
    let server = HubServer::start();
    server.serve_model("org/tiny-bert", "main", &src);
    let cache = scratch_dir("hub-part");
    let opts = hub_opts(&server, &cache);
    let weights = std::fs::read(src.join("model.safetensors")).unwrap();
    let wpath = "/org/tiny-bert/resolve/main/model.safetensors";

    // The connection drops half-way through the weights.
    server.route(
        wpath,
        Reply::truncated("application/octet-stream", weights.clone()),
    );
    let err = fetch_err("org/tiny-bert", "main", &opts);
    assert!(matches!(err, ModelError::HubFetch { .. }), "{err:?}");
    let dir = cache.join("org--tiny-bert").join("main");
    assert!(
        !dir.join("model.safetensors").exists(),
        "no truncated file under the final name"
    );
    assert!(
        !dir.join("model.safetensors.part").exists(),
        "the partial file is removed"
    );
    assert!(dir.join("config.json").is_file());
    let err = LocalEmbedder::load(&dir, LocalOptions::default()).unwrap_err();
    assert!(matches!(err, ModelError::MissingFile { .. }), "{err:?}");

    // A download killed earlier left a .part behind: ignored and replaced.
    std::fs::write(
        dir.join("model.safetensors.part"),
        &weights[..weights.len() / 3],
    )
    .unwrap();
    server.route(wpath, file(weights.clone()));
    server.clear();
    let got = fetch_model("org/tiny-bert", "main", &opts, &no_progress).unwrap();
    assert_eq!(
        std::fs::read(got.join("model.safetensors")).unwrap(),
        weights
    );
    assert!(!dir.join("model.safetensors.part").exists());
    let paths = server.paths();
    assert!(paths.contains(&wpath.to_string()));
    for done in ["config.json", "tokenizer.json", "modules.json"] {
        assert!(
            !paths.iter().any(|p| p.ends_with(&format!("/main/{done}"))),
            "{done} was complete and must not be downloaded again: {paths:?}"
        );
    }
    LocalEmbedder::load(&got, LocalOptions::default()).unwrap();
}

#[test]
fn bad_ids_are_refused_before_any_request() {
    let _g = serial();
    let server = HubServer::start();
    let cache = scratch_dir("hub-bad-ids");
    let opts = hub_opts(&server, &cache);
    for (repo, rev) in [
        ("../etc", "main"),
        ("org/../../x", "main"),
        ("a/b/c", "main"),
        ("", "main"),
        ("org/na me", "main"),
        ("org--x/name", "main"),
        ("/abs", "main"),
        ("org/name", "refs/pr/1"),
        ("org/name", ".."),
        ("org/name", ""),
    ] {
        let err = fetch_model(repo, rev, &opts, &no_progress).unwrap_err();
        assert!(
            matches!(err, ModelError::InvalidInput(_)),
            "{repo}@{rev}: {err:?}"
        );
        assert!(err.to_string().contains("invalid Hugging Face"), "{err}");
    }
    assert!(server.paths().is_empty());
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn hub_reranker_is_named_by_its_id() {
    let _g = serial();
    let src = write_tiny_model("hub-rr-src", TinyKind::BertClassifier { labels: 1 }, 11);
    let server = HubServer::start();
    server.serve_model("org/tiny-reranker", "main", &src);
    let cache = scratch_dir("hub-rr");
    let env = ModelEnv {
        hub: hub_opts(&server, &cache),
        ..ModelEnv::default()
    };
    let spec = ModelSpec::parse("hf:org/tiny-reranker").unwrap();
    let r = open_reranker(&spec, &env, &no_progress).unwrap();
    assert_eq!(r.identity().name, "org/tiny-reranker");
    let original = LocalReranker::load(&src, RerankerOptions::default()).unwrap();
    let passages = ["extract a tar archive", "pumpkin soup"];
    assert_eq!(
        r.score("how to extract tar", &passages).unwrap(),
        original.score("how to extract tar", &passages).unwrap()
    );
    // Without the override the revision directory would name the model.
    let dir = cache.join("org--tiny-reranker").join("main");
    let plain = LocalReranker::load(&dir, RerankerOptions::default()).unwrap();
    assert_eq!(plain.identity().name, "main");
    let named = LocalEmbedder::load(
        &dir,
        LocalOptions {
            name: Some("org/tiny-reranker".into()),
            ..LocalOptions::default()
        },
    )
    .unwrap();
    assert_eq!(named.identity().name, "org/tiny-reranker");
    // The name also picks the family defaults, e.g. e5's query/passage prefixes.
    let e5 = LocalEmbedder::load(
        &dir,
        LocalOptions {
            name: Some("intfloat/multilingual-e5-small".into()),
            ..LocalOptions::default()
        },
    )
    .unwrap();
    assert_eq!(e5.prefixes().query, "query: ");
    assert_eq!(e5.prefixes().passage, "passage: ");
}
