#!/usr/bin/env python3
"""Fits Quarry's score calibration (crates/quarry-engine/src/calibration.rs) and checks it.

Input: feature dumps from `quarry eval SET.jsonl -c COLL --features OUT.jsonl`, one per
judged set. Each row is one hybrid candidate (a document in the keyword or vector top 40 of
a query) with its keyword and vector evidence and whether it is judged relevant.

    python3 eval/fit_calibration.py --fit a.jsonl b.jsonl --check c.jsonl d.jsonl

Fits three L2-regularised logistic models (Newton's method, numpy only):
  keyword  p = σ(k0 + k1·coverage + k2·relative + k3·ln(1+rank))      on keyword rows
  vector   p = σ(v0 + v1·z + v2·gap + v3·ln(1+rank))                  on vector rows
  hybrid   p = σ(h0 + h1·logit(pk) + h2·logit(pv) + h3·[kw found] + h4·[vec found])
(pk, pv: the first two models' probabilities; a retriever that did not return the document
contributes only its "absent" intercept), prints the Rust constants, and a calibration table per model on the fitting
and on the held-out dumps: score band → share of hits judged relevant. Each fitting set
weighs the same whatever its size, so a large synthetic set cannot drown the hand-judged
ones. Judgements are incomplete (1–3 relevant pages per query), so measured precision is a
lower bound.
"""
import argparse
import json
import math
from collections import defaultdict

import numpy as np


def load(paths):
    rows = []
    for p in paths:
        n_q = len({json.loads(l)["query"] for l in open(p, encoding="utf-8") if l.strip()})
        for line in open(p, encoding="utf-8"):
            if line.strip():
                r = json.loads(line)
                r["set"] = p
                r["w"] = 1.0 / max(n_q, 1)
                rows.append(r)
    return rows


def kw_x(e):
    return [1.0, e["coverage"], e["relative"], math.log(1 + e["rank"])]


def vec_x(e):
    return [1.0, e["z"], e["gap"], math.log(1 + e["rank"])]


def logit(p):
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def hyb_x(pk, pv):
    """Each retriever's logit where it found the document, and whether it did (0 = absent)."""
    return [1.0, logit(pk) if pk > 0 else 0.0, logit(pv) if pv > 0 else 0.0, float(pk > 0), float(pv > 0)]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def fit(X, y, w, l2=1e-3):
    X, y, w = np.asarray(X), np.asarray(y, float), np.asarray(w, float)
    w = w / w.sum() * len(w)
    beta = np.zeros(X.shape[1])
    for _ in range(100):
        p = sigmoid(X @ beta)
        g = X.T @ (w * (p - y)) + l2 * len(y) * np.r_[0, beta[1:]]
        H = (X * (w * p * (1 - p))[:, None]).T @ X + l2 * len(y) * np.diag(np.r_[0, np.ones(len(beta) - 1)])
        step = np.linalg.solve(H, g)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


BANDS = [(0.0, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 1.01)]


def table(name, probs, labels, ranks=None):
    """Calibration table over hits a user sees (rank < 10 when ranks are given)."""
    cells = []
    for lo, hi in BANDS:
        sel = [l for p, l, r in zip(probs, labels, ranks or [0] * len(probs)) if lo <= round(p, 2) < hi and r < 10]
        share = f"{sum(sel) / len(sel):.2f}" if sel else "   -"
        cells.append(f"[{lo:.1f},{min(hi, 1):.1f}) {share} ({len(sel):>5})")
    print(f"  {name:<8} " + "   ".join(cells))


def report(title, rows, K, V, H):
    print(title)
    has_vec = defaultdict(bool)
    for r in rows:
        has_vec[r["set"]] |= r["vector"] is not None
    kw = [r for r in rows if r["keyword"]]
    table("search", [float(sigmoid(np.dot(K, kw_x(r["keyword"])))) for r in kw], [r["relevant"] for r in kw], [r["keyword"]["rank"] for r in kw])
    vec = [r for r in rows if r["vector"]]
    if vec:
        table("vsearch", [float(sigmoid(np.dot(V, vec_x(r["vector"])))) for r in vec], [r["relevant"] for r in vec], [r["vector"]["rank"] for r in vec])
    # Hybrid: rank each query's candidates by the fused probability, as `query` does.
    by_q = defaultdict(list)
    for r in rows:
        pk = float(sigmoid(np.dot(K, kw_x(r["keyword"])))) if r["keyword"] else 0.0
        pv = float(sigmoid(np.dot(V, vec_x(r["vector"])))) if r["vector"] else 0.0
        p = float(sigmoid(np.dot(H, hyb_x(pk, pv)))) if has_vec[r["set"]] else pk
        by_q[(r["set"], r["query"])].append((p, r["relevant"]))
    probs, labels, ranks = [], [], []
    for cands in by_q.values():
        cands.sort(key=lambda x: -x[0])
        for i, (p, l) in enumerate(cands):
            probs.append(p); labels.append(l); ranks.append(i)
    table("query", probs, labels, ranks)
    hit3 = ndcg = 0.0
    for key, cands in by_q.items():
        n_rel = len({r["file"] for r in rows if (r["set"], r["query"]) == key and r["relevant"]}) or 1
        flags = [l for _, l in cands[:10]]
        hit3 += any(flags[:3])
        dcg = sum(1 / math.log2(i + 2) for i, f in enumerate(flags) if f)
        ndcg += dcg / sum(1 / math.log2(i + 2) for i in range(min(n_rel, 10)))
    print(f"  query ranking over {len(by_q)} queries: Hit@3 {hit3 / len(by_q):.3f}  nDCG@10 {ndcg / len(by_q):.3f} (judged relevant pages outside both top-40 lists count as missing)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", nargs="+", required=True)
    ap.add_argument("--check", nargs="*", default=[])
    a = ap.parse_args()
    rows = load(a.fit)
    kw = [r for r in rows if r["keyword"]]
    K = fit([kw_x(r["keyword"]) for r in kw], [r["relevant"] for r in kw], [r["w"] for r in kw])
    vec = [r for r in rows if r["vector"]]
    V = fit([vec_x(r["vector"]) for r in vec], [r["relevant"] for r in vec], [r["w"] for r in vec])
    hy = [r for r in rows]
    X = []
    for r in hy:
        pk = float(sigmoid(np.dot(K, kw_x(r["keyword"])))) if r["keyword"] else 0.0
        pv = float(sigmoid(np.dot(V, vec_x(r["vector"])))) if r["vector"] else 0.0
        X.append(hyb_x(pk, pv))
    vec_sets = {r["set"] for r in rows if r["vector"]}
    sel = [i for i, r in enumerate(hy) if r["set"] in vec_sets]
    H = fit([X[i] for i in sel], [hy[i]["relevant"] for i in sel], [hy[i]["w"] for i in sel])
    fmt = lambda b: "[" + ", ".join(f"{x:.4}" for x in b) + "]"
    print(f"const KW: [f64; 4] = {fmt(K)};")
    print(f"const VEC: [f64; 4] = {fmt(V)};")
    print(f"const HYB: [f64; 5] = {fmt(H)};")
    report("calibration on the fitting sets (top-10 hits: band → share relevant (hits))", rows, K, V, H)
    for p in a.check:
        report(f"held out: {p}", load([p]), K, V, H)


if __name__ == "__main__":
    main()
