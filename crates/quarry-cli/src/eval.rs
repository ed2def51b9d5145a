//! `quarry eval`: retrieval quality on a judged query set, measured the same way every time.
//!
//! Query files are JSON Lines. Each line has `query` and either `relevant` (paths relative to
//! the collection root) or `expected_doc` (a file-name prefix, QMD's eval format). Optional
//! `kind` or `difficulty` groups the report.
//!
//! Each mode (`search`, `vsearch`, `query`) retrieves the top 100 per query; the report gives
//! Hit@3, MRR@10, nDCG@10 (binary relevance), Recall@10 and Recall@100 per group and overall.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use quarry_engine::{Engine, SearchRequest};
use serde::Serialize;

#[derive(Args)]
pub(crate) struct EvalArgs {
    /// JSONL query file.
    queries: PathBuf,
    /// Collection the judgements refer to (paths are relative to its root).
    #[arg(short = 'c', long)]
    collection: String,
    /// Retrieval to score: one mode, or `all` (modes that cannot run, e.g. vsearch before
    /// `embed`, are reported as skipped).
    #[arg(long, value_enum, default_value_t = Mode::All)]
    mode: Mode,
    /// Also write every hybrid candidate's keyword and vector evidence with its judgement
    /// to this JSONL file (input of `eval/fit_calibration.py`).
    #[arg(long, value_name = "FILE")]
    features: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    Search,
    Vsearch,
    Query,
    All,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Search => "search",
            Mode::Vsearch => "vsearch",
            Mode::Query => "query",
            Mode::All => "all",
        }
    }
}

/// Results retrieved per query (for Recall@100).
const DEPTH: usize = 100;

enum Judgement {
    Paths(Vec<String>),
    NamePrefix(String),
}

impl Judgement {
    fn is_relevant(&self, rel_path: &str) -> bool {
        match self {
            Judgement::Paths(p) => p.iter().any(|r| r == rel_path),
            Judgement::NamePrefix(prefix) => rel_path
                .rsplit('/')
                .next()
                .is_some_and(|name| name.starts_with(prefix.as_str())),
        }
    }

    fn ideal_count(&self) -> usize {
        match self {
            Judgement::Paths(p) => p.len(),
            Judgement::NamePrefix(_) => 1,
        }
    }
}

struct Query {
    text: String,
    group: String,
    judgement: Judgement,
}

fn load(path: &PathBuf) -> Result<Vec<Query>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read query file {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not valid JSON", path.display(), i + 1))?;
        let Some(q) = v.get("query").and_then(|q| q.as_str()) else {
            bail!("{}:{}: missing \"query\"", path.display(), i + 1);
        };
        let judgement = if let Some(rel) = v.get("relevant").and_then(|r| r.as_array()) {
            Judgement::Paths(
                rel.iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect(),
            )
        } else if let Some(p) = v.get("expected_doc").and_then(|p| p.as_str()) {
            Judgement::NamePrefix(p.to_owned())
        } else {
            bail!(
                "{}:{}: needs \"relevant\" (paths) or \"expected_doc\" (file-name prefix)",
                path.display(),
                i + 1
            );
        };
        let group = v
            .get("kind")
            .or_else(|| v.get("difficulty"))
            .and_then(|g| g.as_str())
            .unwrap_or("all")
            .to_owned();
        out.push(Query {
            text: q.to_owned(),
            group,
            judgement,
        });
    }
    if out.is_empty() {
        bail!("{} has no queries", path.display());
    }
    Ok(out)
}

#[derive(Default, Serialize, Clone, Copy)]
struct Scores {
    queries: usize,
    hit_at_3: f64,
    mrr_at_10: f64,
    ndcg_at_10: f64,
    recall_at_10: f64,
    recall_at_100: f64,
}

impl Scores {
    fn add(&mut self, other: &Scores) {
        self.queries += other.queries;
        self.hit_at_3 += other.hit_at_3;
        self.mrr_at_10 += other.mrr_at_10;
        self.ndcg_at_10 += other.ndcg_at_10;
        self.recall_at_10 += other.recall_at_10;
        self.recall_at_100 += other.recall_at_100;
    }

    fn mean(&self) -> Scores {
        let n = self.queries.max(1) as f64;
        Scores {
            queries: self.queries,
            hit_at_3: self.hit_at_3 / n,
            mrr_at_10: self.mrr_at_10 / n,
            ndcg_at_10: self.ndcg_at_10 / n,
            recall_at_10: self.recall_at_10 / n,
            recall_at_100: self.recall_at_100 / n,
        }
    }
}

/// Scores one ranked list (collection-relative paths) against its judgement.
fn score(ranked: &[String], j: &Judgement) -> Scores {
    let rel: Vec<bool> = ranked.iter().take(10).map(|p| j.is_relevant(p)).collect();
    let first = rel.iter().position(|&r| r);
    let dcg: f64 = rel
        .iter()
        .enumerate()
        .filter(|(_, r)| **r)
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..j.ideal_count().min(10))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let found = rel.iter().filter(|&&r| r).count();
    let found_100 = ranked
        .iter()
        .take(DEPTH)
        .filter(|p| j.is_relevant(p))
        .count();
    let recall = |n: usize| n.min(j.ideal_count()) as f64 / j.ideal_count().max(1) as f64;
    Scores {
        queries: 1,
        hit_at_3: if first.is_some_and(|p| p < 3) {
            1.0
        } else {
            0.0
        },
        mrr_at_10: first.map_or(0.0, |p| 1.0 / (p + 1) as f64),
        ndcg_at_10: if ideal > 0.0 { dcg / ideal } else { 0.0 },
        recall_at_10: recall(found),
        recall_at_100: recall(found_100),
    }
}

/// Score bands of the calibration table (seed 000: < 0.5 tangential, 0.5–0.8 related,
/// > 0.8 directly relevant; the lowest band split once more).
const BANDS: [(f64, f64); 4] = [(0.0, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 1.01)];

/// Top-10 hits per score band and how many of them are judged relevant.
#[derive(Default, Serialize, Clone, Copy)]
struct Band {
    from: f64,
    hits: usize,
    relevant: usize,
}

/// Scores of one mode: per group, overall, the queries that missed the top 3, and the
/// calibration table.
struct ModeReport {
    groups: BTreeMap<String, Scores>,
    overall: Scores,
    misses: Vec<(String, Option<String>)>,
    bands: [Band; 4],
}

fn run_mode(
    engine: &Engine,
    mode: Mode,
    queries: &[Query],
    collection: &str,
) -> Result<ModeReport> {
    let prefix = format!("{collection}/");
    let mut by_group: BTreeMap<String, Scores> = BTreeMap::new();
    let mut total = Scores::default();
    let mut misses = Vec::new();
    let mut bands = BANDS.map(|(from, _)| Band {
        from,
        ..Band::default()
    });
    for q in queries {
        let req = SearchRequest {
            query: q.text.clone(),
            limit: DEPTH,
            min_score: 0.0,
            collection: Some(collection.to_owned()),
            rerank: true,
            excerpt_chars: quarry_engine::SNIPPET_CHARS,
        };
        let hits = match mode {
            Mode::Vsearch => engine.vsearch(&req)?,
            Mode::Query => engine.query(&req)?.results,
            _ => engine.search(&req)?,
        };
        let ranked: Vec<String> = hits
            .iter()
            .map(|h| h.file.strip_prefix(&prefix).unwrap_or(&h.file).to_owned())
            .collect();
        for (h, path) in hits.iter().zip(&ranked).take(10) {
            if let Some(b) = BANDS
                .iter()
                .position(|(lo, hi)| h.score >= *lo && h.score < *hi)
            {
                bands[b].hits += 1;
                bands[b].relevant += usize::from(q.judgement.is_relevant(path));
            }
        }
        let s = score(&ranked, &q.judgement);
        if s.hit_at_3 == 0.0 {
            misses.push((q.text.clone(), ranked.first().cloned()));
        }
        by_group.entry(q.group.clone()).or_default().add(&s);
        total.add(&s);
    }
    Ok(ModeReport {
        groups: by_group
            .iter()
            .map(|(k, v)| (k.clone(), v.mean()))
            .collect(),
        overall: total.mean(),
        misses,
        bands,
    })
}

/// Writes every hybrid candidate's evidence and judgement, one JSON object per line.
fn write_features(
    engine: &Engine,
    queries: &[Query],
    collection: &str,
    path: &PathBuf,
) -> Result<()> {
    let prefix = format!("{collection}/");
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path)
            .with_context(|| format!("cannot write features to {}", path.display()))?,
    );
    for q in queries {
        let mut req = SearchRequest::new(q.text.clone());
        req.collection = Some(collection.to_owned());
        for c in engine.query_evidence(&req)? {
            let rel = c.file.strip_prefix(&prefix).unwrap_or(&c.file);
            let row = serde_json::json!({
                "query": q.text,
                "group": q.group,
                "file": rel,
                "relevant": q.judgement.is_relevant(rel),
                "judged": q.judgement.ideal_count(),
                "keyword": c.keyword,
                "vector": c.vector,
            });
            serde_json::to_writer(&mut out, &row)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(())
}

pub(crate) fn run(
    engine: &Engine,
    args: &EvalArgs,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let queries = load(&args.queries)?;
    engine.collection(&args.collection)?;
    let modes: Vec<Mode> = match args.mode {
        Mode::All => vec![Mode::Search, Mode::Vsearch, Mode::Query],
        m => vec![m],
    };
    if let Some(path) = &args.features {
        write_features(engine, &queries, &args.collection, path)?;
    }
    let mut reports = Vec::new();
    for mode in modes {
        match run_mode(engine, mode, &queries, &args.collection) {
            Ok(r) => reports.push((mode, Ok(r))),
            // With `all`, a mode that cannot run here is reported, not fatal.
            Err(e) if args.mode == Mode::All && is_unavailable(&e) => {
                reports.push((mode, Err(format!("{e:#}"))))
            }
            Err(e) => return Err(e),
        }
    }
    if json {
        let modes: serde_json::Map<String, serde_json::Value> = reports
            .iter()
            .map(|(mode, r)| {
                let v = match r {
                    Ok(r) => serde_json::json!({
                        "overall": r.overall,
                        "groups": r.groups,
                        "misses_at_3": r.misses.iter().map(|(q, top)| serde_json::json!({"query": q, "top": top})).collect::<Vec<_>>(),
                        "calibration": r.bands,
                    }),
                    Err(e) => serde_json::json!({ "skipped": e }),
                };
                (mode.name().to_owned(), v)
            })
            .collect();
        let v = serde_json::json!({
            "collection": args.collection,
            "queries": queries.len(),
            "modes": modes,
        });
        serde_json::to_writer_pretty(&mut *out, &v)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "collection: {}   queries: {}",
        args.collection,
        queries.len()
    )?;
    writeln!(
        out,
        "{:<8} {:<12} {:>7} {:>7} {:>8} {:>8} {:>10} {:>11}",
        "mode", "group", "queries", "Hit@3", "MRR@10", "nDCG@10", "Recall@10", "Recall@100"
    )?;
    for (mode, r) in &reports {
        match r {
            Ok(r) => {
                let overall = ("overall".to_string(), r.overall);
                let rows = if r.groups.len() > 1 {
                    r.groups
                        .iter()
                        .map(|(k, v)| (k.clone(), *v))
                        .chain(std::iter::once(overall))
                        .collect::<Vec<_>>()
                } else {
                    vec![overall]
                };
                for (name, s) in rows {
                    writeln!(
                        out,
                        "{:<8} {:<12} {:>7} {:>7.3} {:>8.3} {:>8.3} {:>10.3} {:>11.3}",
                        mode.name(),
                        name,
                        s.queries,
                        s.hit_at_3,
                        s.mrr_at_10,
                        s.ndcg_at_10,
                        s.recall_at_10,
                        s.recall_at_100
                    )?;
                }
            }
            Err(e) => writeln!(out, "{:<8} skipped: {e}", mode.name())?,
        }
    }
    writeln!(
        out,
        "calibration: top-10 hits per score band, share judged relevant (hits)"
    )?;
    for (mode, r) in &reports {
        if let Ok(r) = r {
            let cells: Vec<String> = r
                .bands
                .iter()
                .zip(BANDS)
                .map(|(b, (lo, hi))| {
                    let share = if b.hits == 0 {
                        "   -".to_string()
                    } else {
                        format!("{:.2}", b.relevant as f64 / b.hits as f64)
                    };
                    format!("[{lo:.1},{:.1}) {share} ({:>4})", hi.min(1.0), b.hits)
                })
                .collect();
            writeln!(out, "{:<8} {}", mode.name(), cells.join("   "))?;
        }
    }
    Ok(())
}

fn is_unavailable(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<quarry_core::Error>(),
            Some(quarry_core::Error::Unavailable(_))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_on_a_constructed_ranking() {
        let j = Judgement::Paths(vec!["a.md".into(), "b.md".into()]);
        let ranked: Vec<String> = ["x.md", "a.md", "y.md", "b.md"].map(String::from).to_vec();
        let s = score(&ranked, &j);
        assert_eq!(s.hit_at_3, 1.0);
        assert_eq!(s.mrr_at_10, 0.5);
        assert_eq!(s.recall_at_10, 1.0);
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let ideal = 1.0 + 1.0 / 3f64.log2();
        assert!((s.ndcg_at_10 - dcg / ideal).abs() < 1e-12);
        let prefix = Judgement::NamePrefix("api-design".into());
        assert_eq!(
            score(&["docs/api-design-principles.md".into()], &prefix).mrr_at_10,
            1.0
        );
        assert_eq!(score(&[], &prefix).hit_at_3, 0.0);
    }
}
