//! The two systems of record side by side, in one run, on the same data: the embedded
//! default (SQLite, the local HNSW file, blobs in a folder) and PostgreSQL (pgvector, blobs in
//! S3-compatible storage). Run by `bash bench/backends/run.sh`, which starts the services and
//! makes a fresh database and bucket; see bench/README.md.
//!
//! For each backend, in a fresh data directory:
//! 1. keyword corpus: the tldr pages as 13 collections plus `sel` (their `common/` pages,
//!    ~5 % of the chunks) — over 100,000 documents; ingestion time;
//! 2. vectors: the first collection embedded with the model, then every other collection
//!    (identical chunk texts reuse the stored vector, so only the index grows);
//! 3. warm latency over the English eval questions: `search`, `vsearch`, `query`, also with
//!    a filter (a scope of the `sel` collection, as a token limited to a knowledge base has);
//! 4. recall@10 of filtered vector search against exact search over the same stored vectors,
//!    at ~5 % (`sel`) and ~50 % (`sel` and six copies) of the chunks. Copies hold identical
//!    vectors, so a found chunk counts when its similarity reaches the exact tenth one (ties);
//! 5. token check: `Directory::authenticate` on a valid and on an unknown token;
//! 6. upload: pages uploaded into a knowledge base and processed by the queue's workers
//!    (convert, chunk, keyword index, embed) until every one is ready.
//!
//! Environment:
//! - `QUARRY_BENCH_MODEL` — embedding model directory (required)
//! - `QUARRY_BENCH_DATABASE_URL` — an empty database with pgvector; without it only the
//!   embedded backend runs
//! - `QUARRY_BENCH_BLOBS_URL` — `s3://bucket/prefix` for the PostgreSQL run's blobs (the
//!   `AWS_*` variables as the CLI reads them); without it a local folder
//! - `QUARRY_BENCH_CORPUS` (default `../shared/corpora/tldr/pages`), `QUARRY_BENCH_COPIES`
//!   (13), `QUARRY_BENCH_ROUNDS` (3), `QUARRY_BENCH_UPLOADS` (400), `QUARRY_BENCH_HOME`
//!   (default: a fresh folder under `~/.cache/quarry-bench/backends`), `QUARRY_BENCH_OUT`

#[path = "../../quarry-engine/benches/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_or, eval_queries, model_and_corpus, percentile};
use quarry_core::Scope;
use quarry_engine::{
    CreateKnowledgeBase, EmbedOptions, Engine, EngineOptions, ModelConfig, ModelEnv, ModelSpec,
    NoProgress, SearchRequest, UploadOutcome,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn open(home: &Path, database: Option<&str>, blobs: Option<&str>, model: &str) -> Res<Engine> {
    let opts = EngineOptions {
        home: home.to_path_buf(),
        index: "bench".into(),
        space: quarry_core::DEFAULT_SPACE.into(),
        max_file_bytes: quarry_ingest::DEFAULT_MAX_FILE_BYTES,
    };
    let dir = home.join("bench");
    let (engine, locks): (Engine, Option<Arc<dyn quarry_blobs::BlobLocks>>) = match database {
        None => (Engine::open(opts)?, None),
        Some(url) => {
            let store = Arc::new(quarry_store_pg::PgStore::connect(url)?);
            (
                Engine::open_with(opts, store.clone())?.with_vector_search(store.clone()),
                Some(store),
            )
        }
    };
    let engine = match blobs {
        None => engine,
        Some(url) => {
            let values: Vec<(&str, String)> = quarry_blobs_object::ENV_SETTINGS
                .iter()
                .filter_map(|k| Some((*k, std::env::var(k).ok()?)))
                .collect();
            let settings: Vec<(&str, &str)> =
                values.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let locks = locks.unwrap_or_else(|| {
                Arc::new(quarry_blobs::FileBlobLocks::new(dir.join("blobs.lock")))
            });
            let store = quarry_blobs_object::ObjectBlobStore::open(
                url,
                &dir.join("blob-staging"),
                locks,
                &settings,
            )?;
            engine.with_blobs(Arc::new(store))
        }
    };
    Ok(engine.with_models(ModelConfig {
        embed: Some(ModelSpec::parse(model)?),
        env: ModelEnv::from_vars(&|k| std::env::var(k).ok()),
        ..ModelConfig::default()
    }))
}

/// Runs `f` once per query as a warm-up, then `rounds` timed passes; sorted latencies.
fn timed(
    queries: &[String],
    rounds: usize,
    mut f: impl FnMut(&str) -> Res<()>,
) -> Res<Vec<Duration>> {
    for q in queries {
        f(q)?;
    }
    let mut lat = Vec::with_capacity(queries.len() * rounds);
    for _ in 0..rounds {
        for q in queries {
            let t = Instant::now();
            f(q)?;
            lat.push(t.elapsed());
        }
    }
    lat.sort();
    Ok(lat)
}

fn summary(lat: &[Duration]) -> serde_json::Value {
    serde_json::json!({
        "p50": percentile(lat, 0.50),
        "p99": percentile(lat, 0.99),
        "n": lat.len(),
    })
}

/// A handle that may use only `names` (as a token limited to knowledge bases would).
fn scoped_to(engine: &Engine, names: &[String]) -> Res<Engine> {
    let ids: Vec<i64> = names
        .iter()
        .map(|n| engine.collection(n).map(|c| c.id))
        .collect::<Result<_, _>>()?;
    let mut scope = Scope::owner(quarry_core::DEFAULT_SPACE);
    scope.collections = Some(ids.into());
    Ok(engine.scoped(scope))
}

/// Mean recall@10 of the index against exact search, ties counted (see the module docs).
fn recall(engine: &Engine, queries: &[String]) -> Res<f64> {
    let mut total = 0.0;
    for q in queries {
        let exact = engine.nearest_chunks_to(q, 10, true)?;
        let found = engine.nearest_chunks_to(q, 10, false)?;
        let Some(tenth) = exact.last().map(|(_, s)| *s) else {
            continue;
        };
        let hits = found.iter().filter(|(_, s)| *s >= tenth - 1e-5).count();
        total += hits as f64 / exact.len() as f64;
    }
    Ok(total / queries.len().max(1) as f64)
}

/// What every backend's run gets the same.
struct Bench {
    model: String,
    corpus: PathBuf,
    copies: usize,
    rounds: usize,
    uploads: usize,
    queries: Vec<String>,
}

fn run_backend(
    bench: &Bench,
    label: &str,
    home: &Path,
    database: Option<&str>,
    blobs: Option<&str>,
) -> Res<serde_json::Value> {
    let Bench {
        model,
        corpus,
        copies,
        rounds,
        uploads,
        queries,
    } = bench;
    let (corpus, copies, rounds, uploads) = (corpus.as_path(), *copies, *rounds, *uploads);
    std::fs::create_dir_all(home)?;
    let engine = open(home, database, blobs, model)?;
    eprintln!("== {label}");

    // 1. Keyword corpus.
    let t = Instant::now();
    let mut names: Vec<String> = Vec::new();
    for n in 0..copies {
        let name = format!("c{n}");
        engine.add_collection(corpus, Some(&name), Some("**/*.md"), false, &NoProgress)?;
        names.push(name);
    }
    engine.add_collection(corpus, Some("sel"), Some("common/*.md"), false, &NoProgress)?;
    let ingest_s = t.elapsed().as_secs_f64();
    let documents: u64 = engine.collections()?.iter().map(|c| c.documents).sum();
    eprintln!("{documents} documents indexed in {ingest_s:.1} s");

    // 2. Vectors.
    let first = engine.embed(
        &EmbedOptions {
            collection: Some("c0".into()),
            force: false,
        },
        &NoProgress,
    )?;
    let t = Instant::now();
    let all = engine.embed(&EmbedOptions::default(), &NoProgress)?;
    let grow_s = t.elapsed().as_secs_f64();
    eprintln!(
        "c0 embedded in {:.1} s ({} chunks); {} chunks indexed in {grow_s:.1} s more",
        first.seconds, first.chunks_embedded, all.total_chunks
    );
    let chunks_of = |names: &[&str]| -> Res<usize> {
        let store = engine.store_handle();
        let mut n = 0;
        for name in names {
            n += store
                .chunk_ids_in_collection(engine.collection(name)?.id)?
                .len();
        }
        Ok(n)
    };
    let total_chunks = all.total_chunks.max(1) as f64;

    // 3. Warm latency, whole space and filtered.
    let req = |q: &str| SearchRequest::new(q);
    let search = timed(queries, rounds, |q| {
        engine.search(&req(q))?;
        Ok(())
    })?;
    let vsearch = timed(queries, rounds, |q| {
        engine.vsearch(&req(q))?;
        Ok(())
    })?;
    let query = timed(queries, rounds, |q| {
        engine.query(&req(q))?;
        Ok(())
    })?;
    let sel = scoped_to(&engine, &["sel".to_owned()])?;
    let vsearch_filtered = timed(queries, rounds, |q| {
        sel.vsearch(&req(q))?;
        Ok(())
    })?;
    let query_filtered = timed(queries, rounds, |q| {
        sel.query(&req(q))?;
        Ok(())
    })?;

    // 4. Filtered recall against exact search.
    let half_names: Vec<String> = std::iter::once("sel".to_owned())
        .chain(
            names
                .iter()
                .take(copies.div_ceil(2).saturating_sub(1))
                .cloned(),
        )
        .collect();
    let half = scoped_to(&engine, &half_names)?;
    let half_refs: Vec<&str> = half_names.iter().map(String::as_str).collect();
    let selectivity_5 = chunks_of(&["sel"])? as f64 / total_chunks;
    let selectivity_50 = chunks_of(&half_refs)? as f64 / total_chunks;
    let recall_all = recall(&engine, queries)?;
    let recall_5 = recall(&sel, queries)?;
    let recall_50 = recall(&half, queries)?;
    eprintln!(
        "recall@10: all {recall_all:.3}, {:.1} % {recall_5:.3}, {:.1} % {recall_50:.3}",
        selectivity_5 * 100.0,
        selectivity_50 * 100.0
    );

    // 5. Token check.
    let dir = quarry_access::Directory::new(engine.store_handle());
    dir.create_user("bench")?;
    dir.grant(
        "bench",
        quarry_core::DEFAULT_SPACE,
        quarry_access::Role::Editor,
    )?;
    let token = dir.create_token(&quarry_access::TokenRequest {
        user: "bench".into(),
        label: "bench".into(),
        spaces: vec![],
        collections: None,
        read_only: false,
        tools: None,
        endpoint: None,
        expires_at: None,
        parent: None,
    })?;
    let valid: Vec<String> = (0..500).map(|_| token.token.clone()).collect();
    let check = timed(&valid, 2, |t| match dir.authenticate(t, None)? {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("the bench token was refused: {e:?}").into()),
    })?;
    let unknown: Vec<String> = (0..500).map(|i| format!("qk_{i:064x}")).collect();
    let refused = timed(&unknown, 2, |t| match dir.authenticate(t, None)? {
        Ok(_) => Err("an unknown token was accepted".into()),
        Err(_) => Ok(()),
    })?;

    // 6. Upload throughput.
    let kb = engine.create_knowledge_base(&CreateKnowledgeBase {
        name: "uploads".into(),
        description: String::new(),
        chunk_size: None,
        chunk_overlap: None,
    })?;
    let mut files: Vec<PathBuf> = walk_md(&corpus.join("linux"))?;
    files.sort();
    files.truncate(uploads);
    let engine = Arc::new(engine);
    let t = Instant::now();
    let mut staged = Vec::new();
    for f in &files {
        if let Ok(u) = engine.upload_from_path(f)? {
            staged.push(u);
        }
    }
    let mut queued = Vec::new();
    for o in engine.add_uploads(&kb.id, staged)? {
        if let UploadOutcome::Added { document } = o {
            queued.push(document);
        }
    }
    let done = quarry_queue::drain(
        &engine,
        &queued,
        quarry_queue::WorkerOptions::default(),
        &NoProgress,
    )?;
    let upload_s = t.elapsed().as_secs_f64();
    let ready = done
        .iter()
        .filter(|f| f.status == quarry_engine::FileStatus::Ready)
        .count();
    eprintln!("{ready}/{} uploads ready in {upload_s:.1} s", files.len());

    Ok(serde_json::json!({
        "backend": label,
        "documents": documents,
        "chunks": all.total_chunks,
        "ingest_seconds": ingest_s,
        "ingest_docs_per_second": documents as f64 / ingest_s.max(1e-9),
        "first_embed": { "chunks": first.chunks_embedded, "seconds": first.seconds },
        "index_all_seconds": grow_s,
        "search_ms": summary(&search),
        "vsearch_ms": summary(&vsearch),
        "query_ms": summary(&query),
        "vsearch_filtered_5_ms": summary(&vsearch_filtered),
        "query_filtered_5_ms": summary(&query_filtered),
        "recall_at_10": {
            "unfiltered": recall_all,
            "filtered_5": { "selectivity": selectivity_5, "recall": recall_5 },
            "filtered_50": { "selectivity": selectivity_50, "recall": recall_50 },
        },
        "token_check_ms": summary(&check),
        "token_refused_ms": summary(&refused),
        "upload": {
            "files": files.len(),
            "ready": ready,
            "seconds": upload_s,
            "docs_per_minute": ready as f64 * 60.0 / upload_s.max(1e-9),
        },
    }))
}

fn walk_md(dir: &Path) -> Res<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk_md(&p)?);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
    Ok(out)
}

fn main() -> Res<()> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some((model, corpus)) = model_and_corpus(&repo) else {
        return Ok(());
    };
    let copies: usize = env_or("QUARRY_BENCH_COPIES", 13);
    let rounds: usize = env_or("QUARRY_BENCH_ROUNDS", 3);
    let uploads: usize = env_or("QUARRY_BENCH_UPLOADS", 400);
    let root = match std::env::var_os("QUARRY_BENCH_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            let base = std::env::var_os("HOME").ok_or("set QUARRY_BENCH_HOME")?;
            PathBuf::from(base).join(format!(
                ".cache/quarry-bench/backends/{}",
                std::process::id()
            ))
        }
    };
    let queries = eval_queries(&repo, &["eval/tldr-en.jsonl"]);
    let database = std::env::var("QUARRY_BENCH_DATABASE_URL").ok();
    let blobs = std::env::var("QUARRY_BENCH_BLOBS_URL").ok();

    let bench = Bench {
        model: model.clone(),
        corpus: corpus.clone(),
        copies,
        rounds,
        uploads,
        queries,
    };
    let mut runs = vec![run_backend(
        &bench,
        "embedded (SQLite, local HNSW file, blobs in a folder)",
        &root.join("sqlite"),
        None,
        None,
    )?];
    match database.as_deref() {
        Some(url) => runs.push(run_backend(
            &bench,
            if blobs.is_some() {
                "PostgreSQL 16 + pgvector, blobs in S3"
            } else {
                "PostgreSQL 16 + pgvector, blobs in a folder"
            },
            &root.join("postgres"),
            Some(url),
            blobs.as_deref(),
        )?),
        None => eprintln!("QUARRY_BENCH_DATABASE_URL is not set: the PostgreSQL run is skipped"),
    }
    let report = serde_json::json!({
        "model": model,
        "corpus": corpus.display().to_string(),
        "queries": bench.queries.len(),
        "rounds": rounds,
        "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        "runs": runs,
    });
    let text = serde_json::to_string_pretty(&report)?;
    println!("{text}");
    if let Some(out) = std::env::var_os("QUARRY_BENCH_OUT") {
        std::fs::write(out, text)?;
    }
    if std::env::var_os("QUARRY_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(())
}
