//! Fetching models from a Hugging Face Hub look-alike on loopback: layout, caching, offline
//! mode, interrupted downloads and every error the Hub can give.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::common::{TinyKind, scratch_dir, write_tiny_model};
use quarry_models::{
    ApiKey, Embedder, HubProgress, LocalEmbedder, LocalOptions, LocalReranker, ModelCacheOptions,
    ModelEnv, ModelError, ModelSpec, Reranker, RerankerOptions, fetch_model, open_embedder,
    open_reranker,
};

const TOKEN_VAR: &str = "QUARRY_MODELS_TEST_HF_TOKEN";
const TOKEN: &str = "hf_test_SUPERSECRET_0123456789";

/// What the server answers for one path.
#[derive(Clone)]
enum Reply {
    /// 200 with these bytes.
    File(Vec<u8>),
    /// This status, extra headers and body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// 302 to this URL or path.
    Redirect(String),
    /// Announces the full length, sends the first half, closes: a connection lost mid-download.
    Truncated(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Request {
    path: String,
    authorization: Option<String>,
}

/// A tiny static HTTP server: routes are looked up by path; anything else is the Hub's 404 for
/// a missing file. One request per connection; stops when dropped.
struct HubServer {
    base: String,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl HubServer {
    fn start() -> HubServer {
        Self::start_on(TcpListener::bind("127.0.0.1:0").unwrap())
    }

    fn start_on(listener: TcpListener) -> HubServer {
        let base = format!("http://{}", listener.local_addr().unwrap());
        let routes: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (r, q, s) = (routes.clone(), requests.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                serve(stream, &r, &q);
            }
        });
        HubServer {
            base,
            routes,
            requests,
            stop,
            handle: Some(handle),
        }
    }

    fn route(&self, path: &str, reply: Reply) {
        self.routes.lock().unwrap().insert(path.to_string(), reply);
    }

    /// Serves every file of `dir` (recursively) under `/{repo}/resolve/{revision}/`.
    fn serve_model(&self, repo: &str, revision: &str, dir: &Path) {
        for (rel, bytes) in files_of(dir) {
            self.route(
                &format!("/{repo}/resolve/{revision}/{rel}"),
                Reply::File(bytes),
            );
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    fn paths(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.path).collect()
    }

    fn clear(&self) {
        self.requests.lock().unwrap().clear();
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.base.trim_start_matches("http://"));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(stream: TcpStream, routes: &Mutex<HashMap<String, Reply>>, log: &Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut authorization = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.trim().eq_ignore_ascii_case("authorization")
        {
            authorization = Some(v.trim().to_string());
        }
    }
    log.lock().unwrap().push(Request {
        path: path.clone(),
        authorization,
    });
    let reply = routes.lock().unwrap().get(&path).cloned();
    let mut stream = stream;
    let head = |status: u16, extra: &str, len: usize| {
        format!("HTTP/1.1 {status} X\r\nContent-Length: {len}\r\nConnection: close\r\n{extra}\r\n")
    };
    let _ = match reply {
        Some(Reply::File(bytes)) => stream
            .write_all(
                head(
                    200,
                    "Content-Type: application/octet-stream\r\n",
                    bytes.len(),
                )
                .as_bytes(),
            )
            .and_then(|()| stream.write_all(&bytes)),
        Some(Reply::Truncated(bytes)) => stream
            .write_all(head(200, "", bytes.len()).as_bytes())
            .and_then(|()| stream.write_all(&bytes[..bytes.len() / 2])),
        Some(Reply::Redirect(to)) => {
            stream.write_all(head(302, &format!("Location: {to}\r\n"), 0).as_bytes())
        }
        Some(Reply::Status(status, headers, body)) => {
            let extra: String = headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}\r\n"))
                .collect();
            stream
                .write_all(head(status, &extra, body.len()).as_bytes())
                .and_then(|()| stream.write_all(body.as_bytes()))
        }
        None => {
            let body = "Entry not found";
            stream
                .write_all(head(404, "X-Error-Code: EntryNotFound\r\n", body.len()).as_bytes())
                .and_then(|()| stream.write_all(body.as_bytes()))
        }
    };
    let _ = stream.flush();
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
        endpoint: format!("{}/", server.base),
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
    let cdn = match TcpListener::bind("127.0.0.2:0") {
        Ok(l) => HubServer::start_on(l),
        Err(_) => HubServer::start(),
    };
    let other_host = cdn.base.starts_with("http://127.0.0.2:");
    server.route(
        "/org/tiny-bert/resolve/main/model.safetensors",
        Reply::Redirect(format!("{}/cdn/signed-1234", cdn.base)),
    );
    cdn.route("/cdn/signed-1234", Reply::Redirect("/cdn/blob-1234".into()));
    cdn.route("/cdn/blob-1234", Reply::File(weights.clone()));
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
            r.authorization,
            Some(format!("Bearer {TOKEN}")),
            "{}",
            r.path
        );
    }
    let cdn_requests = cdn.requests();
    let cdn_paths: Vec<&str> = cdn_requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(cdn_paths, ["/cdn/signed-1234", "/cdn/blob-1234"]);
    if other_host {
        for r in &cdn_requests {
            assert_eq!(
                r.authorization, None,
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
        server.base
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
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
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
        Reply::Status(
            404,
            vec![("X-Error-Code", "RepoNotFound".into())],
            "Repository not found".into(),
        ),
    );
    let msg = fetch_err("org/nope", "main", &opts).to_string();
    assert!(msg.contains("repository was not found on the Hub"), "{msg}");
    assert_eq!(server.paths().len(), 1);
    server.route(
        "/org/no-tok/resolve/v9/config.json",
        Reply::Status(
            404,
            vec![("X-Error-Code", "RevisionNotFound".into())],
            "Invalid rev id: v9".into(),
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
        Reply::Status(
            401,
            vec![("X-Error-Code", "RepoNotFound".into())],
            "Invalid username or password.".into(),
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
        Reply::Status(401, vec![], format!("bad token {TOKEN}")),
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
        Reply::Status(
            403,
            vec![
                ("X-Error-Code", "GatedRepo".into()),
                (
                    "X-Error-Message",
                    "Access to model org/gated is restricted".into(),
                ),
            ],
            "{}".into(),
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
        Reply::Status(503, vec![], "try later".into()),
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
    server.route(wpath, Reply::Truncated(weights.clone()));
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
    server.route(wpath, Reply::File(weights.clone()));
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
