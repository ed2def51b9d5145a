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
//! - `QUARRY_BENCH_ONLY=filtered` — the metadata-filter run instead (issue 44): the corpus
//!   is copied into the data directory with a YAML front matter `bucket: <n>` prepended to
//!   each page (n = FNV-1a of the page's path in the corpus, mod 1000, so every copy of a page
//!   has the same bucket and the same chunk texts), steps 1–2 as above, then warm `search`,
//!   `vsearch` and `query` unfiltered and through `Engine::filtered` with `bucket lt 500`
//!   (~50 %), `bucket lt 50` (~5 %) and `bucket eq 7` (~0.1 %): a fresh filtered handle per
//!   request, so every request resolves the filter (reads every document's fields). Records
//!   the documents each filter matches and asserts every result satisfies it. Steps 3's scope,
//!   4, 5 and 6 are skipped. `QUARRY_BENCH_WARMUP` (default: every query) bounds the warm-up
//!   pass of each measurement; `QUARRY_BENCH_PAGE_STRIDE` (default 1) keeps every n-th page
//!   only (with as many more copies, the same ~100,000 documents and a fraction of the
//!   chunks to embed)
//! - `QUARRY_BENCH_ONLY=uploads` — step 6 alone, into empty stores (a few minutes)
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
fn timed(queries: &[String], rounds: usize, f: impl FnMut(&str) -> Res<()>) -> Res<Vec<Duration>> {
    timed_warm(queries, rounds, queries.len(), f)
}

/// [`timed`] with a warm-up pass over the first `warmup` queries only.
fn timed_warm(
    queries: &[String],
    rounds: usize,
    warmup: usize,
    mut f: impl FnMut(&str) -> Res<()>,
) -> Res<Vec<Duration>> {
    for q in queries.iter().take(warmup) {
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
    /// `QUARRY_BENCH_ONLY=filtered`: the metadata-filter run (see the module docs).
    only_filtered: bool,
    /// `QUARRY_BENCH_ONLY=uploads`: step 6 alone, into empty stores.
    only_uploads: bool,
    warmup: usize,
    /// `QUARRY_BENCH_PAGE_STRIDE`: in the filtered run, every n-th page only.
    stride: usize,
}

/// The bucket of a page: FNV-1a of its path in the corpus (`/`-separated), mod 1000.
fn bucket_of(rel: &Path) -> u64 {
    let text = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h % 1000
}

/// Copies the corpus's pages into `dest` with a front matter `bucket: <n>` prepended; the
/// buckets of the pages, by their path in the corpus.
/// With `stride` > 1 only every `stride`-th page (by path) is copied.
fn corpus_with_buckets(corpus: &Path, dest: &Path, stride: usize) -> Res<Vec<(PathBuf, u64)>> {
    let mut out = Vec::new();
    let mut files = walk_md(corpus)?;
    files.sort();
    for f in files.into_iter().step_by(stride.max(1)) {
        let rel = f.strip_prefix(corpus)?.to_path_buf();
        let bucket = bucket_of(&rel);
        let target = dest.join(&rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let body = std::fs::read_to_string(&f)?;
        std::fs::write(&target, format!("---\nbucket: {bucket}\n---\n{body}"))?;
        out.push((rel, bucket));
    }
    Ok(out)
}

/// The metadata filters measured: label, JSON, and the same test on a bucket.
type FilterCase = (&'static str, serde_json::Value, fn(u64) -> bool);

fn filter_cases() -> Vec<FilterCase> {
    vec![
        (
            "50",
            serde_json::json!({"field": "bucket", "operator": "lt", "value": 500}),
            (|b: u64| b < 500) as fn(u64) -> bool,
        ),
        (
            "5",
            serde_json::json!({"field": "bucket", "operator": "lt", "value": 50}),
            (|b: u64| b < 50) as fn(u64) -> bool,
        ),
        (
            "0.1",
            serde_json::json!({"field": "bucket", "operator": "eq", "value": 7}),
            (|b: u64| b == 7) as fn(u64) -> bool,
        ),
    ]
}

/// Asserts every hit is in a bucket `test` accepts: the hit's `bucket` field, or (where a
/// result carries no fields) the bucket of its path. Returns how many hits carried no fields.
fn check_hits(hits: &[quarry_core::SearchHit], label: &str, test: fn(u64) -> bool) -> usize {
    let mut bare = 0;
    for h in hits {
        let field = h
            .metadata
            .as_ref()
            .and_then(|m| m.get("bucket"))
            .and_then(serde_json::Value::as_f64);
        let bucket = match field {
            Some(b) => b as u64,
            None => {
                bare += 1;
                let rel = h.file.split_once('/').map_or(h.file.as_str(), |(_, r)| r);
                bucket_of(Path::new(rel))
            }
        };
        assert!(
            test(bucket),
            "filter {label} %: {} (bucket {bucket}, field {field:?}) does not satisfy it",
            h.file
        );
    }
    bare
}

/// The metadata-filter measurement (`QUARRY_BENCH_ONLY=filtered`), after steps 1–2.
fn measure_filters(
    engine: &Engine,
    bench: &Bench,
    pages: &[(PathBuf, u64)],
    documents: u64,
) -> Res<serde_json::Value> {
    let (queries, rounds, warmup) = (&bench.queries, bench.rounds, bench.warmup);
    let req = |q: &str| SearchRequest::new(q);
    let mut out = serde_json::Map::new();
    let t = Instant::now();
    let search = timed_warm(queries, rounds, warmup, |q| {
        engine.search(&req(q))?;
        Ok(())
    })?;
    let vsearch = timed_warm(queries, rounds, warmup, |q| {
        engine.vsearch(&req(q))?;
        Ok(())
    })?;
    let query = timed_warm(queries, rounds, warmup, |q| {
        engine.query(&req(q))?;
        Ok(())
    })?;
    eprintln!(
        "unfiltered ({:.0} s): search {}, vsearch {}, query {}",
        t.elapsed().as_secs_f64(),
        summary(&search),
        summary(&vsearch),
        summary(&query)
    );
    out.insert(
        "unfiltered".into(),
        serde_json::json!({
            "matched_documents": documents,
            "search_ms": summary(&search),
            "vsearch_ms": summary(&vsearch),
            "query_ms": summary(&query),
        }),
    );
    let copies = bench.copies as u64;
    for (label, json, test) in filter_cases() {
        let t = Instant::now();
        let filter = quarry_engine::Filter::parse(&json)?;
        let matched = engine.metadata_fields(None, Some(&filter), 0)?.documents;
        // Every copy holds every page, `sel` the `common/` ones again.
        let expected: u64 = pages
            .iter()
            .filter(|(_, b)| test(*b))
            .map(|(rel, _)| copies + u64::from(rel.starts_with("common")))
            .sum();
        if matched != expected {
            eprintln!("filter {label} %: {matched} documents match, {expected} expected");
        }
        let handle =
            || -> Res<Engine> { Ok(engine.filtered(Some(quarry_engine::Filter::parse(&json)?))) };
        let (mut hits_search, mut hits_vsearch, mut hits_query) = (0usize, 0usize, 0usize);
        let mut bare = 0usize;
        let search = timed_warm(queries, rounds, warmup, |q| {
            let hits = handle()?.search(&req(q))?;
            bare += check_hits(&hits, label, test);
            hits_search += hits.len();
            Ok(())
        })?;
        let vsearch = timed_warm(queries, rounds, warmup, |q| {
            let hits = handle()?.vsearch(&req(q))?;
            bare += check_hits(&hits, label, test);
            hits_vsearch += hits.len();
            Ok(())
        })?;
        let query = timed_warm(queries, rounds, warmup, |q| {
            let hits = handle()?.query(&req(q))?.results;
            bare += check_hits(&hits, label, test);
            hits_query += hits.len();
            Ok(())
        })?;
        let calls = (warmup.min(queries.len()) + queries.len() * rounds).max(1) as f64;
        eprintln!(
            "filter {label} % ({matched} documents, {:.0} s): search {}, vsearch {}, query {}",
            t.elapsed().as_secs_f64(),
            summary(&search),
            summary(&vsearch),
            summary(&query)
        );
        out.insert(
            format!("filter_{label}"),
            serde_json::json!({
                "filter": json,
                "matched_documents": matched,
                "expected_documents": expected,
                "selectivity": matched as f64 / documents.max(1) as f64,
                "search_ms": summary(&search),
                "vsearch_ms": summary(&vsearch),
                "query_ms": summary(&query),
                "hits_without_fields": bare,
                "mean_hits": {
                    "search": hits_search as f64 / calls,
                    "vsearch": hits_vsearch as f64 / calls,
                    "query": hits_query as f64 / calls,
                },
            }),
        );
    }
    Ok(serde_json::Value::Object(out))
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
        only_filtered,
        ..
    } = bench;
    let (corpus, copies, rounds, uploads) = (corpus.as_path(), *copies, *rounds, *uploads);
    std::fs::create_dir_all(home)?;
    let engine = open(home, database, blobs, model)?;
    eprintln!("== {label}");
    if bench.only_uploads {
        // Loaded before the clock starts, as the full run's earlier steps have it.
        engine.embedder(&NoProgress)?;
        let upload = measure_uploads(engine, corpus, uploads)?;
        return Ok(serde_json::json!({ "backend": label, "upload": upload }));
    }
    let bucketed = home.join("corpus-with-buckets");
    let pages = if *only_filtered {
        let _ = std::fs::remove_dir_all(&bucketed);
        corpus_with_buckets(corpus, &bucketed, bench.stride)?
    } else {
        Vec::new()
    };
    let corpus = if *only_filtered {
        bucketed.as_path()
    } else {
        corpus
    };

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

    if *only_filtered {
        let latency = measure_filters(&engine, bench, &pages, documents)?;
        return Ok(serde_json::json!({
            "backend": label,
            "documents": documents,
            "chunks": all.total_chunks,
            "ingest_seconds": ingest_s,
            "first_embed": { "chunks": first.chunks_embedded, "seconds": first.seconds },
            "index_all_seconds": grow_s,
            "latency": latency,
        }));
    }

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
        manage: false,
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
    let upload = measure_uploads(engine, corpus, uploads)?;

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
        "upload": upload,
    }))
}

/// Step 6: `uploads` pages of the corpus's `linux/` uploaded into a new knowledge base and
/// processed by the queue's workers until every one is ready.
fn measure_uploads(engine: Engine, corpus: &Path, uploads: usize) -> Res<serde_json::Value> {
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
    let staged_s = t.elapsed().as_secs_f64();
    let mut queued = Vec::new();
    for o in engine.add_uploads(&kb.id, staged, &quarry_engine::UploadOptions::default())? {
        if let UploadOutcome::Added { document } = o {
            queued.push(document);
        }
    }
    let added_s = t.elapsed().as_secs_f64();
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
        "files": files.len(),
        "ready": ready,
        "seconds": upload_s,
        "staging_seconds": staged_s,
        "adding_seconds": added_s - staged_s,
        "processing_seconds": upload_s - added_s,
        "docs_per_minute": ready as f64 * 60.0 / upload_s.max(1e-9),
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
        only_filtered: std::env::var("QUARRY_BENCH_ONLY").is_ok_and(|v| v == "filtered"),
        only_uploads: std::env::var("QUARRY_BENCH_ONLY").is_ok_and(|v| v == "uploads"),
        warmup: env_or("QUARRY_BENCH_WARMUP", usize::MAX),
        stride: env_or("QUARRY_BENCH_PAGE_STRIDE", 1),
    };
    let report = |runs: &[serde_json::Value]| -> Res<String> {
        let mut report = serde_json::json!({
            "model": model,
            "corpus": corpus.display().to_string(),
            "queries": bench.queries.len(),
            "rounds": rounds,
            "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
            "runs": runs,
        });
        if bench.only_filtered {
            report["warmup_queries"] = bench.warmup.min(bench.queries.len()).into();
            report["copies"] = bench.copies.into();
            report["page_stride"] = bench.stride.into();
            report["date"] = std::process::Command::new("date")
                .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default()
                .into();
        }
        let text = serde_json::to_string_pretty(&report)?;
        // Written after each backend, so a run stopped early keeps what it measured.
        if let Some(out) = std::env::var_os("QUARRY_BENCH_OUT") {
            std::fs::write(out, &text)?;
        }
        Ok(text)
    };
    let mut runs = vec![run_backend(
        &bench,
        "embedded (SQLite, local HNSW file, blobs in a folder)",
        &root.join("sqlite"),
        None,
        None,
    )?];
    report(&runs)?;
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
    println!("{}", report(&runs)?);
    if std::env::var_os("QUARRY_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(())
}
