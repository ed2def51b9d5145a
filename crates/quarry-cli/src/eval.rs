//! `quarry eval`: retrieval quality on a judged query set, measured the same way every time.
//!
//! Query files are JSON Lines. Each line has `query` and either `relevant` (paths relative to
//! the collection root) or `expected_doc` (a file-name prefix, QMD's eval format). Optional
//! `kind` or `difficulty` groups the report.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use quarry_engine::{Engine, SearchRequest};
use serde::Serialize;

#[derive(Args)]
pub struct EvalArgs {
    /// JSONL query file.
    queries: PathBuf,
    /// Collection the judgements refer to (paths are relative to its root).
    #[arg(short = 'c', long)]
    collection: String,
}

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
}

impl Scores {
    fn add(&mut self, other: &Scores) {
        self.queries += other.queries;
        self.hit_at_3 += other.hit_at_3;
        self.mrr_at_10 += other.mrr_at_10;
        self.ndcg_at_10 += other.ndcg_at_10;
        self.recall_at_10 += other.recall_at_10;
    }

    fn mean(&self) -> Scores {
        let n = self.queries.max(1) as f64;
        Scores {
            queries: self.queries,
            hit_at_3: self.hit_at_3 / n,
            mrr_at_10: self.mrr_at_10 / n,
            ndcg_at_10: self.ndcg_at_10 / n,
            recall_at_10: self.recall_at_10 / n,
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
    Scores {
        queries: 1,
        hit_at_3: if first.is_some_and(|p| p < 3) {
            1.0
        } else {
            0.0
        },
        mrr_at_10: first.map_or(0.0, |p| 1.0 / (p + 1) as f64),
        ndcg_at_10: if ideal > 0.0 { dcg / ideal } else { 0.0 },
        recall_at_10: found.min(j.ideal_count()) as f64 / j.ideal_count().max(1) as f64,
    }
}

pub fn run(engine: &Engine, args: &EvalArgs, json: bool, out: &mut impl Write) -> Result<()> {
    let queries = load(&args.queries)?;
    engine.collection(&args.collection)?;
    let prefix = format!("{}/", args.collection);
    let mut by_group: BTreeMap<String, Scores> = BTreeMap::new();
    let mut total = Scores::default();
    let mut misses = Vec::new();
    for q in &queries {
        let hits = engine.search(&SearchRequest {
            query: q.text.clone(),
            limit: 10,
            min_score: 0.0,
            collection: Some(args.collection.clone()),
        })?;
        let ranked: Vec<String> = hits
            .iter()
            .map(|h| h.file.strip_prefix(&prefix).unwrap_or(&h.file).to_owned())
            .collect();
        let s = score(&ranked, &q.judgement);
        if s.hit_at_3 == 0.0 {
            misses.push((q.text.clone(), ranked.first().cloned()));
        }
        by_group.entry(q.group.clone()).or_default().add(&s);
        total.add(&s);
    }
    let groups: BTreeMap<String, Scores> = by_group
        .iter()
        .map(|(k, v)| (k.clone(), v.mean()))
        .collect();
    if json {
        let v = serde_json::json!({
            "mode": "search",
            "collection": args.collection,
            "overall": total.mean(),
            "groups": groups,
            "misses_at_3": misses.iter().map(|(q, top)| serde_json::json!({"query": q, "top": top})).collect::<Vec<_>>(),
        });
        serde_json::to_writer_pretty(&mut *out, &v)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "mode: search   collection: {}", args.collection)?;
    writeln!(
        out,
        "{:<12} {:>7} {:>7} {:>8} {:>8} {:>10}",
        "group", "queries", "Hit@3", "MRR@10", "nDCG@10", "Recall@10"
    )?;
    for (name, s) in groups
        .iter()
        .chain(std::iter::once((&"overall".to_string(), &total.mean())))
    {
        writeln!(
            out,
            "{:<12} {:>7} {:>7.3} {:>8.3} {:>8.3} {:>10.3}",
            name, s.queries, s.hit_at_3, s.mrr_at_10, s.ndcg_at_10, s.recall_at_10
        )?;
    }
    Ok(())
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
