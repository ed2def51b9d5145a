//! pgvector at scale (issue 25): Quarry's vector search on PostgreSQL at up to a million
//! chunks, beside WeKnora's query shape on the same vectors, in one run. Run by
//! `bash bench/pgvector/run.sh` (it starts PostgreSQL and makes a fresh database); see
//! bench/README.md.
//!
//! 1. Synthetic vectors with the structure of real text embeddings: every vector leans on
//!    one shared direction (embedding models are anisotropic: unrelated texts still score
//!    0.2–0.4), topics of very unequal size, documents within a topic, chunks within a
//!    document. Queries are chunks of documents that were never stored. Documents are spread
//!    evenly over 100 collections, independently of their topic, so a filter on one collection
//!    keeps 1 % of the chunks and a filter on five keeps 5 % — the hard case for a graph
//!    search, whose neighbours mostly fail the filter. (The generator is shared with
//!    quarry-vectors' recall bench: quarry-vectors/benches/common/vectors.rs.)
//! 2. Loaded into Quarry's own schema (collections, documents, chunks, embeddings) with
//!    COPY; then Quarry's per-model HNSW index is built (`VectorSearch::prepare_vectors`, as
//!    `quarry migrate` does after a copy): build time and size.
//! 3. WeKnora's shape on the same vectors: one denormalised table (knowledge base id,
//!    dimension, enabled flag, `halfvec`), a partial HNSW index per dimension, and its query
//!    (`hnsw.iterative_scan = strict_order`, a candidate LIMIT of max(2·top_k, 100) with
//!    `ef_search` set to it, then the threshold and top-k outside).
//! 4. recall@10 against the exact answer (computed here over the same half-precision values)
//!    at several `ef_search` values, unfiltered and filtered to 5 % and 1 %.
//! 5. Latency p50/p99 and throughput with 1 and 8 concurrent clients at each shape's default,
//!    and for filtered searches Quarry's exact path too (recall and latency), whatever the
//!    filter keeps: the figures behind `EXACT_SEARCH_MAX`.
//!
//! With `QUARRY_BENCH_VECTORS=path/to/tldr-minilm.json` (bench/vectors/make_dataset.py: real
//! embeddings of real text) the corpus and the queries are read from that dataset instead —
//! its documents, spread over the 100 collections the same way — and `QUARRY_BENCH_CHUNKS`
//! (default: all of it) takes its first vectors.
//!
//! "before" is the query path and index of Quarry before issue 46 (pgvector's default graph
//! parameters, `ef_search` 128 whatever the filter, `LIMIT k` over the relaxed-order scan), on
//! the same vectors loaded a second time under another model key, so both are measured in
//! one run on one server.
//!
//! Environment: `QUARRY_BENCH_DATABASE_URL` (an empty database with pgvector; required),
//! `QUARRY_BENCH_VECTORS` (a dataset, else synthetic vectors), `QUARRY_BENCH_CHUNKS` (1000000), `QUARRY_BENCH_DIMS` (384), `QUARRY_BENCH_QUERIES` (200),
//! `QUARRY_BENCH_EF` (comma-separated sweep, default 40,64,100,128,200,400: Quarry's base
//! `ef_search`, which it grows with the collection as it does by default —
//! `quarry_store::ef_for_size`, `ef_search_at_size` in the report — and the literal
//! `ef_search` of "before" and WeKnora's shape),
//! `QUARRY_BENCH_LATENCY_QUERIES` (queries per client per latency run, 200),
//! `QUARRY_BENCH_OUT` (a JSON file for the results).

#[path = "../../quarry-engine/benches/common/mod.rs"]
mod common;
#[path = "../../quarry-vectors/benches/common/vectors.rs"]
mod vectors;

use std::io::Write;
use std::time::Instant;

use common::{env_or, percentile};
use pgvector::HalfVector;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{Kind, ToSql, Type};
use postgres::{Client, NoTls};
use quarry_store::VectorSearch;
use quarry_store_pg::PgStore;
use serde_json::{Value, json};
use vectors::{
    CHUNKS_PER_DOCUMENT, Dataset, Rng, SYNTHETIC_SEED, Space, client_latencies, normalised, overlap,
};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const MODEL: &str = "bench-synthetic";
/// The same vectors, indexed and searched as before issue 46.
const MODEL_BEFORE: &str = "bench-before";
const COLLECTIONS: i64 = 100;
const TOP_K: usize = 10;
/// The filters measured: name, collections kept.
const FILTERS: [(&str, i64); 3] = [("unfiltered", COLLECTIONS), ("5%", 5), ("1%", 1)];

fn cosine(a: &[f32], b: &[f32], norm_b: f32) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    dot / norm_b.max(f32::MIN_POSITIVE)
}

/// The stored data: vector `i` is chunk `i + 1` of document `document_of_chunk[i] + 1`.
struct Corpus {
    dims: usize,
    values: Vec<f32>,
    norms: Vec<f32>,
    /// Document (0-based) of each chunk.
    document_of_chunk: Vec<usize>,
    /// Collection (1-based) of each document.
    collection_of_document: Vec<i64>,
}

impl Corpus {
    fn vector(&self, i: usize) -> &[f32] {
        &self.values[i * self.dims..(i + 1) * self.dims]
    }
    fn collection_of_chunk(&self, i: usize) -> i64 {
        self.collection_of_document[self.document_of_chunk[i]]
    }
}

fn main() -> Res<()> {
    let url = std::env::var("QUARRY_BENCH_DATABASE_URL")
        .map_err(|_| "QUARRY_BENCH_DATABASE_URL is required (bench/pgvector/run.sh sets it)")?;
    let (dataset, vectors) = match std::env::var("QUARRY_BENCH_VECTORS") {
        Ok(path) if !path.is_empty() => {
            let dataset = Dataset::read(&path)?;
            let described = describe(&path, &dataset)?;
            (Some(dataset), described)
        }
        _ => (None, json!("synthetic")),
    };
    let n: usize = env_or(
        "QUARRY_BENCH_CHUNKS",
        dataset.as_ref().map_or(1_000_000, |d| d.count),
    );
    let dims: usize = dataset
        .as_ref()
        .map_or_else(|| env_or("QUARRY_BENCH_DIMS", 384), |d| d.dims);
    let n_queries: usize = env_or("QUARRY_BENCH_QUERIES", 200);
    let latency_queries: usize = env_or("QUARRY_BENCH_LATENCY_QUERIES", 200);
    let sweep: Vec<usize> = std::env::var("QUARRY_BENCH_EF")
        .unwrap_or_else(|_| "40,64,100,128,200,400".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let mut report = json!({"chunks": n, "dims": dims, "queries": n_queries, "vectors": vectors});
    // Written after every phase, so a run cut short still leaves what it measured.
    let save = |report: &Value| -> Res<()> {
        if let Ok(path) = std::env::var("QUARRY_BENCH_OUT") {
            std::fs::write(path, serde_json::to_string_pretty(report)? + "\n")?;
        }
        Ok(())
    };

    // Connecting the store first: it creates the `vector` extension where it is missing.
    let store = PgStore::connect(&url)?;
    let mut admin = Client::connect(&url, NoTls)?;
    report["server"] = server_facts(&mut admin)?;

    eprintln!("generating and loading {n} vectors of {dims} dimensions…");
    let t = Instant::now();
    let (corpus, queries) = load(&mut admin, dataset.as_ref(), n, dims, n_queries)?;
    report["chunks"] = json!(corpus.norms.len());
    report["documents"] = json!(corpus.collection_of_document.len());
    report["load_seconds"] = json!(t.elapsed().as_secs_f64());

    eprintln!("building Quarry's HNSW index…");
    let t = Instant::now();
    store.prepare_vectors(MODEL, dims)?;
    report["quarry"] = json!({
        "build_seconds": t.elapsed().as_secs_f64(),
        "index_bytes": relation_size(&mut admin, "embeddings_hnsw_%")?,
        "table_bytes": scalar_i64(&mut admin, "SELECT pg_table_size('embeddings')")?,
        "ef_search_default": 128,
        "ef_search_at_size": quarry_store::ef_for_size(128, n),
        "exact_search_max": quarry_store_pg::EXACT_SEARCH_MAX,
    });
    eprintln!("building the index as before issue 46 (pgvector's defaults)…");
    let t = Instant::now();
    admin.batch_execute(&format!(
        "CREATE INDEX embeddings_before_hnsw ON embeddings \
         USING hnsw ((vector::halfvec({dims})) halfvec_cosine_ops) WHERE model = '{MODEL_BEFORE}'"
    ))?;
    report["before"] = json!({
        "build_seconds": t.elapsed().as_secs_f64(),
        "index_bytes": relation_size(&mut admin, "embeddings_before_hnsw")?,
    });
    eprintln!("building WeKnora's table and index…");
    let t = Instant::now();
    weknora_table(&mut admin, dims)?;
    let copy_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    admin.batch_execute(&format!(
        "CREATE INDEX weknora_hnsw ON weknora_embeddings \
         USING hnsw ((embedding::halfvec({dims})) halfvec_cosine_ops) WHERE dimension = {dims}"
    ))?;
    report["weknora"] = json!({
        "copy_seconds": copy_seconds,
        "build_seconds": t.elapsed().as_secs_f64(),
        "index_bytes": relation_size(&mut admin, "weknora_hnsw")?,
        "table_bytes": scalar_i64(&mut admin, "SELECT pg_table_size('weknora_embeddings')")?,
        "ef_search_default": 100,
    });
    admin.batch_execute("ANALYZE")?;
    save(&report)?;

    eprintln!("exact answers…");
    let t = Instant::now();
    let truth = exact(&corpus, &queries)?;
    report["exact_seconds"] = json!(t.elapsed().as_secs_f64());

    let mut recall = serde_json::Map::new();
    for &ef in &sweep {
        let quarry = PgStore::connect(&url)?.with_ef_search(ef);
        let mut row = serde_json::Map::new();
        for (f, (name, keep)) in FILTERS.iter().enumerate() {
            let filter: Vec<i64> = (1..=*keep).collect();
            let (mut q_hits, mut w_hits, mut b_hits) = (0usize, 0usize, 0usize);
            for (qi, query) in queries.iter().enumerate() {
                let found = quarry_search(&quarry, query, &filter, *keep)?;
                q_hits += overlap(&found, &truth[qi][f], TOP_K);
                let found = before_search(&mut admin, query, dims, &filter, *keep, ef)?;
                b_hits += overlap(&found, &truth[qi][f], TOP_K);
                let found = weknora_search(&mut admin, query, dims, &filter, *keep, ef)?;
                w_hits += overlap(&found, &truth[qi][f], TOP_K);
            }
            let total = (queries.len() * TOP_K) as f64;
            row.insert(
                (*name).into(),
                json!({"quarry": q_hits as f64 / total, "before": b_hits as f64 / total,
                       "weknora": w_hits as f64 / total}),
            );
        }
        eprintln!("ef_search {ef}: {}", Value::Object(row.clone()));
        recall.insert(ef.to_string(), Value::Object(row));
        report["recall_at_10"] = Value::Object(recall.clone());
        save(&report)?;
    }

    // Quarry with every filtered search exact, whatever the filter keeps: its recall, and
    // below its latency beside the graph's, so the exact-search threshold rests on figures.
    let exact = PgStore::connect(&url)?.with_exact_search_max(i64::MAX);
    let mut exact_recall = serde_json::Map::new();
    for (f, (name, keep)) in FILTERS.iter().enumerate().skip(1) {
        let filter: Vec<i64> = (1..=*keep).collect();
        let mut hits = 0;
        for (qi, query) in queries.iter().enumerate() {
            hits += overlap(
                &quarry_search(&exact, query, &filter, *keep)?,
                &truth[qi][f],
                TOP_K,
            );
        }
        exact_recall.insert(
            (*name).into(),
            json!(hits as f64 / (queries.len() * TOP_K) as f64),
        );
    }
    report["quarry_exact_recall_at_10"] = Value::Object(exact_recall);

    let mut latency = serde_json::Map::new();
    for clients in [1usize, 8] {
        for (name, keep) in FILTERS {
            let filter: Vec<i64> = (1..=keep).collect();
            let q = run_clients(clients, latency_queries, &queries, |_, query| {
                quarry_search(&store, query, &filter, keep).map(|_| ())
            })?;
            let e = if keep < COLLECTIONS {
                run_clients(clients, latency_queries, &queries, |_, query| {
                    quarry_search(&exact, query, &filter, keep).map(|_| ())
                })?
            } else {
                Value::Null
            };
            let w = run_clients_with_client(&url, clients, latency_queries, &queries, {
                let filter = filter.clone();
                move |client, query| {
                    weknora_search(client, query, dims, &filter, keep, 100).map(|_| ())
                }
            })?;
            let b = run_clients_with_client(&url, clients, latency_queries, &queries, {
                let filter = filter.clone();
                move |client, query| {
                    before_search(client, query, dims, &filter, keep, 128).map(|_| ())
                }
            })?;
            eprintln!("{clients} client(s), {name}: quarry {q} before {b} exact {e} weknora {w}");
            latency.insert(
                format!("{clients}_clients_{name}"),
                json!({"quarry": q, "before": b, "quarry_exact": e, "weknora": w}),
            );
            report["latency_ms"] = Value::Object(latency.clone());
            save(&report)?;
        }
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn scalar_i64(client: &mut Client, sql: &str) -> Res<i64> {
    Ok(client.query_one(sql, &[])?.get(0))
}

fn relation_size(client: &mut Client, pattern: &str) -> Res<i64> {
    Ok(client
        .query_one(
            "SELECT coalesce(sum(pg_relation_size(c.oid)), 0)::bigint FROM pg_class c \
             WHERE c.relkind = 'i' AND c.relname LIKE $1",
            &[&pattern],
        )?
        .get(0))
}

fn server_facts(client: &mut Client) -> Res<Value> {
    let mut facts = serde_json::Map::new();
    for setting in [
        "server_version",
        "shared_buffers",
        "maintenance_work_mem",
        "max_parallel_maintenance_workers",
        "work_mem",
    ] {
        let v: String = client.query_one(&format!("SHOW {setting}"), &[])?.get(0);
        facts.insert(setting.into(), json!(v));
    }
    let v: String = client
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
            &[],
        )?
        .get(0);
    facts.insert("pgvector".into(), json!(v));
    facts.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(1, |n| n.get())),
    );
    Ok(Value::Object(facts))
}

/// Generates the corpus and the queries and loads the corpus into Quarry's tables.
fn load(
    client: &mut Client,
    dataset: Option<&Dataset>,
    n: usize,
    dims: usize,
    n_queries: usize,
) -> Res<(Corpus, Vec<Vec<f32>>)> {
    // Drawn with a dataset too: the collections below come next from the same generator.
    let mut rng = Rng(SYNTHETIC_SEED);
    let space = Space::new(dims, n, &mut rng);
    let n = dataset.map_or(n, |d| n.min(d.count));
    // Documents renumbered from 0 in the order their first chunk comes.
    let document_of_chunk: Vec<usize> = match dataset {
        None => (0..n).map(|i| i / CHUNKS_PER_DOCUMENT).collect(),
        Some(d) => {
            let mut seen = std::collections::HashMap::new();
            d.documents[..n]
                .iter()
                .map(|doc| {
                    let next = seen.len();
                    *seen.entry(*doc).or_insert(next)
                })
                .collect()
        }
    };
    let documents = document_of_chunk.iter().max().map_or(0, |d| d + 1);
    client.batch_execute(
        "INSERT INTO spaces (id, uid, created_at) VALUES ('bench', 'bench', 0) \
         ON CONFLICT DO NOTHING",
    )?;
    for c in 1..=COLLECTIONS {
        client.execute(
            "INSERT INTO collections (id, uid, space, name, kind, path, pattern, created_at) \
             VALUES ($1, $2, 'bench', $2, 'knowledge', '', '**/*', 0)",
            &[&c, &format!("c{c}")],
        )?;
    }
    let collection_of_document: Vec<i64> = (0..documents)
        .map(|_| 1 + (rng.next() % COLLECTIONS as u64) as i64)
        .collect();
    let mut docs = client.copy_in(
        "COPY documents (id, collection_id, path, title, hash, docid, size, stamp, body, \
         body_bytes, indexed_at) FROM STDIN",
    )?;
    for (d, c) in collection_of_document.iter().enumerate() {
        let id = d + 1;
        writeln!(
            docs,
            "{id}\t{c}\td{id}.md\tdocument {id}\th{id}\t{id:08x}\t10\t0\tbody {id}\t10\t0"
        )?;
    }
    docs.finish()?;
    let mut chunks = client.copy_in(
        "COPY chunks (id, document_id, seq, byte_start, byte_end, line_start, line_end, hash) \
         FROM STDIN",
    )?;
    for (i, doc) in document_of_chunk.iter().enumerate() {
        let (id, doc) = (i + 1, doc + 1);
        writeln!(chunks, "{id}\t{doc}\t{i}\t0\t10\t1\t1\tc{i:x}")?;
    }
    chunks.finish()?;
    client.batch_execute(
        "SELECT setval(pg_get_serial_sequence('documents', 'id'), (SELECT max(id) FROM documents)); \
         SELECT setval(pg_get_serial_sequence('chunks', 'id'), (SELECT max(id) FROM chunks))",
    )?;

    let halfvec = halfvec_type(client)?;
    let sink = client.copy_in("COPY embeddings (model, hash, vector) FROM STDIN BINARY")?;
    let mut writer = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::TEXT, halfvec.clone()]);
    let mut values = Vec::with_capacity(n * dims);
    let mut norms = Vec::with_capacity(n);
    let mut halves = Vec::with_capacity(n);
    let stored: Box<dyn Iterator<Item = (HalfVector, Vec<f32>)>> = match dataset {
        Some(d) => Box::new((0..n).map(|i| as_half(d.vector(i)))),
        None => Box::new(space.chunks(n, &mut rng).map(|v| as_half(&v))),
    };
    for (i, (half, v)) in stored.enumerate() {
        writer.write(&[&MODEL, &format!("c{i:x}"), &half])?;
        norms.push(v.iter().map(|x| x * x).sum::<f32>().sqrt());
        values.extend(v);
        halves.push(half);
    }
    writer.finish()?;
    // The same vectors under the "before" model key, for the old index and query.
    let sink = client.copy_in("COPY embeddings (model, hash, vector) FROM STDIN BINARY")?;
    let mut writer = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::TEXT, halfvec]);
    for (i, half) in halves.iter().enumerate() {
        writer.write(&[&MODEL_BEFORE, &format!("c{i:x}"), half])?;
    }
    writer.finish()?;
    let queries = match dataset {
        Some(d) => (0..n_queries.min(d.queries))
            .map(|i| d.query(i).to_vec())
            .collect(),
        None => (0..n_queries)
            .map(|_| as_half(&space.query(&mut rng)).1)
            .collect(),
    };
    Ok((
        Corpus {
            dims,
            values,
            norms,
            document_of_chunk,
            collection_of_document,
        },
        queries,
    ))
}

/// A vector as stored (half precision) and the f32 values of those halves.
fn as_half(v: &[f32]) -> (HalfVector, Vec<f32>) {
    let half = HalfVector::from_f32_slice(v);
    let values = half.to_vec().iter().map(|h| h.to_f32()).collect();
    (half, values)
}

/// The dataset as the report names it (its model read from the JSON).
fn describe(path: &str, dataset: &Dataset) -> Res<Value> {
    let meta: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let model = meta["model"].as_str().unwrap_or("?");
    let described = json!({"dataset": dataset.name, "model": model, "count": dataset.count,
        "held_out_queries": dataset.queries});
    Ok(described)
}

fn halfvec_type(client: &mut Client) -> Res<Type> {
    let oid: u32 = client
        .query_one("SELECT oid FROM pg_type WHERE typname = 'halfvec'", &[])?
        .get(0);
    Ok(Type::new(
        "halfvec".into(),
        oid,
        Kind::Simple,
        "public".into(),
    ))
}

/// WeKnora's table, filled from Quarry's (the same vectors, chunk ids and collections).
fn weknora_table(client: &mut Client, dims: usize) -> Res<()> {
    client.batch_execute(&format!(
        "CREATE TABLE weknora_embeddings (
             id bigserial PRIMARY KEY,
             chunk_id bigint NOT NULL,
             knowledge_base_id text NOT NULL,
             dimension integer NOT NULL,
             is_enabled boolean,
             embedding halfvec NOT NULL);
         INSERT INTO weknora_embeddings (chunk_id, knowledge_base_id, dimension, is_enabled, embedding)
             SELECT c.id, d.collection_id::text, {dims}, true, e.vector
             FROM chunks c JOIN documents d ON d.id = c.document_id
             JOIN embeddings e ON e.model = '{MODEL}' AND e.hash = c.hash
             ORDER BY c.id;
         CREATE INDEX weknora_kb ON weknora_embeddings (knowledge_base_id);"
    ))?;
    Ok(())
}

/// The exact top 10 of every query: unfiltered, and within each filter of [`FILTERS`].
fn exact(corpus: &Corpus, queries: &[Vec<f32>]) -> Res<Vec<Vec<Vec<i64>>>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = queries.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = queries
            .chunks(per)
            .map(|part| s.spawn(move || part.iter().map(|q| exact_one(corpus, q)).collect()))
            .collect();
        let mut all = Vec::new();
        for h in handles {
            let part: Vec<_> = h.join().map_err(|_| "an exact-search thread panicked")?;
            all.extend(part);
        }
        Ok(all)
    })
}

fn exact_one(corpus: &Corpus, query: &[f32]) -> Vec<Vec<i64>> {
    let q = normalised(query.to_vec());
    let mut best: Vec<Vec<(f32, i64)>> = vec![Vec::new(); FILTERS.len()];
    for i in 0..corpus.norms.len() {
        let score = cosine(&q, corpus.vector(i), corpus.norms[i]);
        let collection = corpus.collection_of_chunk(i);
        for (f, (_, keep)) in FILTERS.iter().enumerate() {
            if collection > *keep {
                continue;
            }
            let top = &mut best[f];
            if top.len() < TOP_K || score > top[TOP_K - 1].0 {
                top.push((score, i as i64 + 1));
                top.sort_by(|a, b| b.0.total_cmp(&a.0));
                top.truncate(TOP_K);
            }
        }
    }
    best.into_iter()
        .map(|top| top.into_iter().map(|(_, id)| id).collect())
        .collect()
}

/// Quarry's search: exactly what a knowledge search scoped to `keep` collections calls.
fn quarry_search(store: &PgStore, query: &[f32], filter: &[i64], keep: i64) -> Res<Vec<i64>> {
    let scope = (keep < COLLECTIONS).then_some(filter);
    Ok(store
        .nearest_chunks(MODEL, query, TOP_K, scope)?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// Quarry's search before issue 46, on the "before" model's vectors and index: exact at
/// ≤ 4,096 filtered chunks, else `ef_search` as given whatever the filter, relaxed-order
/// iterative scan with pgvector's default `max_scan_tuples`, `LIMIT k` inside.
fn before_search(
    client: &mut Client,
    query: &[f32],
    dims: usize,
    filter: &[i64],
    keep: i64,
    ef_search: usize,
) -> Res<Vec<i64>> {
    let q = HalfVector::from_f32_slice(query);
    let filtered = keep < COLLECTIONS;
    let limit = TOP_K as i64;
    if filtered {
        let in_filter: i64 = client
            .query_one(
                "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id \
                 WHERE d.collection_id = ANY($1)",
                &[&filter],
            )?
            .get(0);
        if in_filter <= 4096 {
            let rows = client.query(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id \
                 JOIN embeddings e ON e.model = $1 AND e.hash = c.hash \
                 WHERE d.collection_id = ANY($3) ORDER BY e.vector <=> $2, c.id LIMIT $4",
                &[&MODEL_BEFORE, &q, &filter, &limit],
            )?;
            return Ok(rows.iter().map(|r| r.get(0)).collect());
        }
    }
    scan_ids(
        client,
        ef_search.clamp(TOP_K, 1000),
        "relaxed_order",
        &format!(
            "WITH near AS (
                 SELECT e.hash, e.vector::halfvec({dims}) <=> $2::halfvec({dims}) AS dist
                 FROM embeddings e
                 WHERE e.model = $1 AND EXISTS (
                     SELECT 1 FROM chunks c JOIN documents d ON d.id = c.document_id
                     WHERE c.hash = e.hash AND (NOT $3 OR d.collection_id = ANY($4)))
                 ORDER BY e.vector::halfvec({dims}) <=> $2::halfvec({dims})
                 LIMIT $5)
             SELECT c.id FROM near
             JOIN chunks c ON c.hash = near.hash
             JOIN documents d ON d.id = c.document_id
             WHERE NOT $3 OR d.collection_id = ANY($4)
             ORDER BY near.dist, c.id LIMIT $5"
        ),
        &[&MODEL_BEFORE, &q, &filtered, &filter, &limit],
    )
}

/// WeKnora's vector retrieval (internal/application/repository/retriever/postgres), its SQL
/// shape with `ef_search` as given (WeKnora sets it to the candidate LIMIT, 100 at top-k 10).
fn weknora_search(
    client: &mut Client,
    query: &[f32],
    dims: usize,
    filter: &[i64],
    keep: i64,
    ef_search: usize,
) -> Res<Vec<i64>> {
    let q = HalfVector::from_f32_slice(query);
    let kbs: Vec<String> = filter.iter().map(|c| c.to_string()).collect();
    let candidates = (TOP_K as i64 * 2).clamp(100, 200);
    let top_k = TOP_K as i64;
    let filtered = keep < COLLECTIONS;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&q, &candidates, &top_k];
    if filtered {
        params.push(&kbs);
    }
    let where_kb = if filtered {
        "AND knowledge_base_id = ANY($4)"
    } else {
        ""
    };
    scan_ids(
        client,
        ef_search.max(40),
        "strict_order",
        &format!(
            "SELECT chunk_id, (1 - distance) AS score FROM (
                 SELECT chunk_id, embedding::halfvec({dims}) <=> $1::halfvec({dims}) AS distance
                 FROM weknora_embeddings
                 WHERE dimension = {dims} {where_kb} AND (is_enabled IS NULL OR is_enabled = true)
                 ORDER BY embedding::halfvec({dims}) <=> $1::halfvec({dims})
                 LIMIT $2) AS candidates
             WHERE distance <= 2 ORDER BY distance ASC LIMIT $3"
        ),
        &params,
    )
}

/// The ids (first column) `sql` returns with `hnsw.ef_search` and `hnsw.iterative_scan` set
/// for its transaction.
fn scan_ids(
    client: &mut Client,
    ef_search: usize,
    iterative_scan: &str,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Res<Vec<i64>> {
    let mut tx = client.transaction()?;
    tx.batch_execute(&format!(
        "SET LOCAL hnsw.ef_search = {ef_search}; SET LOCAL hnsw.iterative_scan = {iterative_scan}"
    ))?;
    let rows = tx.query(sql, params)?;
    tx.commit()?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// [`client_latencies`] as latency percentiles and throughput.
fn run_clients(
    clients: usize,
    per_client: usize,
    queries: &[Vec<f32>],
    f: impl Fn(usize, &[f32]) -> Res<()> + Sync,
) -> Res<Value> {
    let (all, wall) = client_latencies(clients, per_client, queries, f)?;
    Ok(json!({
        "n": all.len(),
        "p50": percentile(&all, 0.50),
        "p99": percentile(&all, 0.99),
        "qps": all.len() as f64 / wall.as_secs_f64(),
    }))
}

/// [`run_clients`] where each client has its own connection (WeKnora's shape runs raw SQL).
fn run_clients_with_client(
    url: &str,
    clients: usize,
    per_client: usize,
    queries: &[Vec<f32>],
    f: impl Fn(&mut Client, &[f32]) -> Res<()> + Sync,
) -> Res<Value> {
    let connections: Vec<std::sync::Mutex<Client>> = (0..clients)
        .map(|_| Client::connect(url, NoTls).map(std::sync::Mutex::new))
        .collect::<Result<_, _>>()?;
    run_clients(clients, per_client, queries, |c, query| {
        let mut client = connections[c]
            .lock()
            .map_err(|_| "a client thread panicked")?;
        f(&mut client, query)
    })
}
