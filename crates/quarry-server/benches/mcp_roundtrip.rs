//! MCP round-trip benchmark: `tools/call search` through the real `quarry` binary over stdio
//! and Streamable HTTP at concurrency 1 and 32, against the same query run in-process on the
//! engine (the difference is the server's overhead); server RSS idle and under load; and,
//! when `QMD_BIN` is set, the same through QMD's own MCP HTTP server (BM25 `lex` query).
//!
//! Run: `cargo build --release -p quarry-cli && cargo bench -p quarry-server --bench mcp_roundtrip`
//!
//! Environment: `QUARRY_BIN` (default: the `quarry` next to this bench's target dir),
//! `QUARRY_BENCH_CORPUS` (default `../shared/corpora/tldr/pages`), `QUARRY_BENCH_CALLS`
//! (sequential calls, default 400), `QMD_BIN` (e.g. `~/.cache/quarry-bench/bin/qmd-direct`),
//! `QUARRY_BENCH_OUT` (also write the JSON report there).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use quarry_engine::{Engine, EngineOptions, SearchRequest};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{Peer, RoleClient};
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const QUERIES: &[&str] = &[
    "tar",
    "extract tar archive",
    "git rebase",
    "kill process by name",
    "disk usage directory",
    "list open ports",
    "docker remove all containers",
    "python virtual environment",
    "how do I find files by name",
    "compress directory zip",
    "change file permissions",
    "copy files over ssh",
    "ssh",
    "curl download file",
    "search text in files recursively",
    "show the last lines of a log file",
    "ffmpeg convert video",
    "systemctl restart service",
    "create a symbolic link",
    "check my ip address",
];

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(mut lat: Vec<Duration>, wall: Duration) -> Value {
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len().max(1) - 1) as f64 * p).round() as usize)
            .map_or(0.0, |d| ms(*d))
    };
    json!({
        "calls": lat.len(),
        "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99),
        "throughput_per_s": lat.len() as f64 / wall.as_secs_f64().max(1e-9),
    })
}

fn quarry_bin() -> Result<PathBuf, BoxError> {
    if let Some(p) = std::env::var_os("QUARRY_BIN") {
        return Ok(PathBuf::from(p));
    }
    // target/release/deps/<bench> → target/release/quarry
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("quarry"))
        .ok_or("cannot locate the quarry binary; set QUARRY_BIN")?;
    if !bin.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release -p quarry-cli` first or set QUARRY_BIN",
            bin.display()
        )
        .into());
    }
    Ok(bin)
}

fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn args(v: Value) -> JsonObject {
    v.as_object().cloned().unwrap_or_default()
}

/// One `tools/call`; checks it succeeded so a broken server cannot look fast.
async fn call(peer: &Peer<RoleClient>, tool: &str, a: JsonObject) -> Result<Duration, BoxError> {
    let t = Instant::now();
    let r = peer
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(a))
        .await?;
    let elapsed = t.elapsed();
    if r.is_error == Some(true) {
        return Err(format!("{tool} returned isError: {:?}", r.content).into());
    }
    Ok(elapsed)
}

/// Sequential calls on one connection, then 32 concurrent callers (each on `peers[i % n]`).
async fn measure(
    peers: &[Peer<RoleClient>],
    tool: &str,
    make_args: impl Fn(&str) -> JsonObject + Send + Sync + Clone + 'static,
    calls: usize,
) -> Result<Value, BoxError> {
    for q in QUERIES {
        call(&peers[0], tool, make_args(q)).await?;
    }
    let started = Instant::now();
    let mut seq = Vec::with_capacity(calls);
    for i in 0..calls {
        seq.push(call(&peers[0], tool, make_args(QUERIES[i % QUERIES.len()])).await?);
    }
    let seq_wall = started.elapsed();

    let per_task = calls.div_ceil(32).max(10);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..32 {
        let peer = peers[t % peers.len()].clone();
        let tool = tool.to_owned();
        let make_args = make_args.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_task);
            for i in 0..per_task {
                lat.push(call(&peer, &tool, make_args(QUERIES[(t + i) % QUERIES.len()])).await?);
            }
            Ok::<_, BoxError>(lat)
        }));
    }
    let mut conc = Vec::new();
    for t in tasks {
        conc.extend(t.await??);
    }
    let conc_wall = started.elapsed();
    Ok(json!({
        "concurrency_1": summary(seq, seq_wall),
        "concurrency_32": summary(conc, conc_wall),
    }))
}

async fn wait_for_http(port: u16, path: &str) -> Result<(), BoxError> {
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if client
            .get(format!("http://127.0.0.1:{port}{path}"))
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("server on port {port} did not come up").into())
}

async fn http_peers(
    url: &str,
    n: usize,
) -> Result<Vec<rmcp::service::RunningService<RoleClient, ()>>, BoxError> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
                .await?,
        );
    }
    Ok(out)
}

fn search_args(q: &str) -> JsonObject {
    args(json!({ "query": q, "limit": 10 }))
}

async fn bench_quarry(bin: &Path, home: &Path, calls: usize) -> Result<Value, BoxError> {
    // stdio: one child process, one connection (concurrent calls are multiplexed on it).
    let client = ()
        .serve(TokioChildProcess::new(
            tokio::process::Command::new(bin).configure(|c| {
                c.arg("mcp")
                    .env("QUARRY_HOME", home)
                    .env("QUARRY_LOG", "warn");
            }),
        )?)
        .await?;
    let stdio = measure(&[client.peer().clone()], "search", search_args, calls).await?;
    client.cancel().await?;

    // HTTP: `quarry serve`; 32 concurrent callers on 32 sessions.
    let port = quarry_test_http::unused_port();
    let mut serve = tokio::process::Command::new(bin);
    serve
        .args(["serve", "--port", &port.to_string()])
        .env("QUARRY_HOME", home)
        .env("QUARRY_LOG", "warn");
    let (http, rss) =
        bench_http_server(serve, port, "/health", "search", search_args, calls).await?;
    Ok(json!({ "stdio": stdio, "http": http, "server_rss_kib": rss }))
}

async fn bench_qmd(qmd: &Path, corpus: &Path, calls: usize) -> Result<Value, BoxError> {
    let home = tempfile::tempdir()?;
    let envs = [
        ("HOME", home.path().to_path_buf()),
        ("XDG_CONFIG_HOME", home.path().join("config")),
        ("XDG_CACHE_HOME", home.path().join("cache")),
    ];
    let status = tokio::process::Command::new(qmd)
        .args(["collection", "add"])
        .arg(corpus)
        .args(["--name", "tldr", "--mask", "**/*.md"])
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .env_remove("QMD_CONFIG_DIR")
        .env_remove("INDEX_PATH")
        .current_dir(home.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await?;
    if !status.success() {
        return Err("qmd collection add failed".into());
    }
    let port = quarry_test_http::unused_port();
    let mut serve = tokio::process::Command::new(qmd);
    serve
        .args(["mcp", "--http", "--port", &port.to_string()])
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .env_remove("QMD_CONFIG_DIR")
        .env_remove("INDEX_PATH")
        .current_dir(home.path());
    // QMD merged its search tools into `query`; a `lex` sub-query is its BM25 path.
    let lex = |q: &str| {
        args(json!({ "searches": [{ "type": "lex", "query": q }], "limit": 10, "rerank": false }))
    };
    let (http, rss) = bench_http_server(serve, port, "/mcp", "query", lex, calls).await?;
    Ok(json!({ "http": http, "server_rss_kib": rss }))
}

/// Starts an MCP HTTP server, waits for `ready_path`, measures `tool` over 32 sessions
/// (see [`measure`]), and returns the figures with the server's RSS idle, after load and peak.
async fn bench_http_server(
    mut command: tokio::process::Command,
    port: u16,
    ready_path: &str,
    tool: &str,
    make_args: impl Fn(&str) -> JsonObject + Send + Sync + Clone + 'static,
    calls: usize,
) -> Result<(Value, Value), BoxError> {
    let mut server = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    wait_for_http(port, ready_path).await?;
    let pid = server.id().unwrap_or(0);
    let idle_rss = rss_kib(pid, "VmRSS:");
    let clients = http_peers(&format!("http://127.0.0.1:{port}/mcp"), 32).await?;
    let peers: Vec<_> = clients.iter().map(|c| c.peer().clone()).collect();
    let figures = measure(&peers, tool, make_args, calls).await?;
    let rss = json!({
        "idle": idle_rss,
        "after_load": rss_kib(pid, "VmRSS:"),
        "peak": rss_kib(pid, "VmHWM:"),
    });
    for c in clients {
        c.cancel().await?;
    }
    server.kill().await?;
    Ok((figures, rss))
}

async fn run() -> Result<(), BoxError> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = std::env::var_os("QUARRY_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("../shared/corpora/tldr/pages"));
    let corpus = std::fs::canonicalize(&corpus)
        .map_err(|e| format!("corpus {}: {e} (set QUARRY_BENCH_CORPUS)", corpus.display()))?;
    let calls: usize = env_or("QUARRY_BENCH_CALLS", 400);
    let bin = quarry_bin()?;
    let home = tempfile::tempdir()?;
    let status = std::process::Command::new(&bin)
        .args(["collection", "add"])
        .arg(&corpus)
        .args(["--name", "tldr"])
        .env("QUARRY_HOME", home.path())
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err("quarry collection add failed".into());
    }

    // The engine call alone, in-process: what the servers add is measured against this.
    let engine = Engine::open(EngineOptions {
        home: home.path().to_path_buf(),
        index: "index".into(),
        space: quarry_core::DEFAULT_SPACE.into(),
        max_file_bytes: u64::MAX,
    })?;
    let mut lat = Vec::new();
    for round in 0..(calls / QUERIES.len()).max(2) {
        for q in QUERIES {
            let t = Instant::now();
            engine.search(&SearchRequest::new(*q))?;
            if round > 0 {
                lat.push(t.elapsed());
            }
        }
    }
    let engine_only = summary(lat, Duration::from_secs(1));
    drop(engine);

    let quarry = bench_quarry(&bin, home.path(), calls).await?;
    let qmd = match std::env::var_os("QMD_BIN") {
        Some(q) => bench_qmd(Path::new(&q), &corpus, calls).await?,
        None => json!("skipped (set QMD_BIN)"),
    };
    let engine_p50 = engine_only["p50_ms"].as_f64().unwrap_or(0.0);
    let overhead = |v: &Value| v["concurrency_1"]["p50_ms"].as_f64().unwrap_or(0.0) - engine_p50;
    let report = json!({
        "corpus": corpus.display().to_string(),
        "engine_search_in_process": engine_only,
        "quarry": quarry,
        "server_overhead_p50_ms": {
            "stdio": overhead(&quarry["stdio"]),
            "http": overhead(&quarry["http"]),
        },
        "qmd": qmd,
    });
    let text = serde_json::to_string_pretty(&report)?;
    println!("{text}");
    if let Some(out) = std::env::var_os("QUARRY_BENCH_OUT") {
        std::fs::write(out, &text)?;
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}
