#!/usr/bin/env python3
"""Fits Quarry's score calibration (crates/quarry-engine/src/calibration.rs) and checks it.

Input: feature dumps from `quarry eval SET.jsonl -c COLL --features OUT.jsonl`, one per
judged set. Each row is one hybrid candidate (a document in the keyword or vector top 40 of
a query) with its keyword and vector evidence and whether it is judged relevant.

    python3 eval/fit_calibration.py --fit a.jsonl b.jsonl --check c.jsonl d.jsonl

Fits three L2-regularised logistic models (Newton's method, numpy only):
  keyword  p = σ(k0 + k1·coverage + k2·relative + k3·ln(1+rank) + k4·margin)   keyword rows
  vector   p = σ(v0 + v1·z + v2·gap + v3·ln(1+rank) + v4·margin)             vector rows
  hybrid   p = σ(h0 + h1·lk + h2·lv + h3·[kw found] + h4·[vec found]
                 + h5·10/(10+kw rank) + h6·10/(10+vec rank))                 every row
(lk, lv: the first two models' logits, 0 where that retriever did not return the document,
whose rank then counts as 60; margin: the lead over the next hit of the same list, in the
list's own units — relative BM25, or z), prints the Rust constants, and a calibration table per model on the fitting
and on the held-out dumps: score band → share of hits judged relevant. Each fitting set
weighs the same whatever its size, so a large synthetic set cannot drown the hand-judged
ones. Judgements are incomplete (1–3 relevant pages per query), so measured precision is a
lower bound.
"""
import argparse
import json
import math
import re
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
    add_margins(rows)
    return rows


def add_margins(rows):
    """Each hit's lead over the next hit of its list (as calibration.rs computes it)."""
    by_q = defaultdict(list)
    for r in rows:
        by_q[(r["set"], r["query"])].append(r)
    for c in by_q.values():
        kws = sorted((r for r in c if r["keyword"]), key=lambda r: r["keyword"]["rank"])
        for i, r in enumerate(kws):
            nxt = kws[i + 1]["keyword"]["relative"] if i + 1 < len(kws) else 0.0
            r["keyword"]["margin"] = r["keyword"]["relative"] - nxt
        vs = sorted((r for r in c if r["vector"]), key=lambda r: r["vector"]["rank"])
        for i, r in enumerate(vs):
            nxt = vs[i + 1]["vector"]["z"] if i + 1 < len(vs) else r["vector"]["z"] - 1.0
            r["vector"]["margin"] = r["vector"]["z"] - nxt


def grouped(path):
    """A feature dump's hits grouped by query, in first-seen order: [(query, hits)]."""
    groups = defaultdict(list)
    for r in load([path]):
        groups[r["query"]].append(r)
    return list(groups.items())


def minmax(hits, side, field):
    """Each hit's `side` score min-max normalised over the hits that side found (0 where it
    found none; 1 for a single or tied list), as hybrid.rs normalises each list."""
    vals = [r[side][field] for r in hits if r[side]]
    hi, lo = (max(vals), min(vals)) if vals else (0, 0)
    return np.array([((r[side][field] - lo) / (hi - lo) if hi > lo else 1.0) if r[side] else 0.0
                     for r in hits])


def hit3_ndcg10(order_rel, judged):
    """Hit@3 and nDCG@10 of relevance flags in ranked order, `judged` relevant pages."""
    f = order_rel[:10]
    dcg = sum(1 / math.log2(i + 2) for i, x in enumerate(f) if x)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(judged, 10)))
    return float(f[:3].any()), dcg / idcg


def kw_x(e):
    return [1.0, e["coverage"], e["relative"], math.log(1 + e["rank"]), e["margin"]]


def vec_x(e):
    return [1.0, e["z"], e["gap"], math.log(1 + e["rank"]), e["margin"]]


ABSENT_RANK = 60
# calibration.rs DOCUMENTS: the keyword and vector models `query` ranks documents with (the
# vector model's sixth, passage-only feature is 0 for documents).
DOCUMENTS_KEYWORD = np.array([-2.045, 0.8306, 1.766, -1.682, 1.393])
DOCUMENTS_VECTOR = np.array([-1.753, 0.823, -0.8882, -0.5417, 0.07561])
# calibration.rs SHARE: the per-query vector share
# σ(a + b·(lv − lk) + c·margin + d·coverage + e·question) of the hybrid ranking (margin,
# coverage: the keyword leader's; question: phrased_as_question).
SHARE = (3.0, 0.5, -1.0, -8.0, 3.0)
QUESTION_WORDS = {"how", "what", "which", "why", "where", "when", "who", "whom", "whose"}


def phrased_as_question(q):
    """calibration.rs phrased_as_question: ends with ?/？ or opens with an English question
    word (alone or contracted, not inside a compound)."""
    q = q.strip()
    if q.endswith(("?", "？")):
        return True
    first = re.match(r"[A-Za-z]*", q).group(0)
    rest = q[len(first):]
    return (not rest or rest[0].isspace() or rest[0] in "'’") and first.lower() in QUESTION_WORDS


def hyb_x(r, K, V):
    """Both logits where found, found flags, and a rank term per retriever."""
    lk = float(np.dot(K, kw_x(r["keyword"]))) if r["keyword"] else 0.0
    lv = float(np.dot(V, vec_x(r["vector"]))) if r["vector"] else 0.0
    rk = r["keyword"]["rank"] if r["keyword"] else ABSENT_RANK
    rv = r["vector"]["rank"] if r["vector"] else ABSENT_RANK
    return [1.0, lk, lv, float(r["keyword"] is not None), float(r["vector"] is not None), 10 / (10 + rk), 10 / (10 + rv)]


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
    for mode, side, coef, x in [("search", "keyword", K, kw_x), ("vsearch", "vector", V, vec_x)]:
        # As calibration.rs's list_probabilities: each capped by the hit above it.
        lists = defaultdict(list)
        for r in rows:
            if r[side]:
                lists[(r["set"], r["query"])].append(r)
        probs, labels, ranks = [], [], []
        for hits in lists.values():
            cap = 1.0
            for r in sorted(hits, key=lambda r: r[side]["rank"]):
                cap = min(cap, float(sigmoid(np.dot(coef, x(r[side])))))
                probs.append(cap); labels.append(r["relevant"]); ranks.append(r[side]["rank"])
        if probs:
            table(mode, probs, labels, ranks)
    # Hybrid, as `query` ranks (hybrid.rs): min-max normalised lists mixed with the per-query
    # vector share (SHARE); scores are the hybrid probability capped by the one above.
    groups = defaultdict(list)
    for r in rows:
        groups[(r["set"], r["query"])].append(r)
    by_q = {}
    for key, c in groups.items():
        kn, vn = minmax(c, "keyword", "bm25"), minmax(c, "vector", "similarity")
        lk = max((float(np.dot(K, kw_x(r["keyword"]))) for r in c if r["keyword"]), default=-8.0)
        lv = max((float(np.dot(V, vec_x(r["vector"]))) for r in c if r["vector"]), default=-8.0)
        top = next((r["keyword"] for r in c if r["keyword"] and r["keyword"]["rank"] == 0), None)
        margin, coverage = (top["margin"], top["coverage"]) if top else (0.0, 0.0)
        x = (SHARE[0] + SHARE[1] * (lv - lk) + SHARE[2] * margin + SHARE[3] * coverage
             + SHARE[4] * phrased_as_question(key[1]))
        share = float(sigmoid(x)) if has_vec[key[0]] else 0.0
        order = [c[i] for i in sorted(range(len(c)), key=lambda i: -((1 - share) * kn[i] + share * vn[i]))]
        cap, cands = 1.0, []
        for r in order:
            pk = float(sigmoid(np.dot(K, kw_x(r["keyword"])))) if r["keyword"] else 0.0
            cap = min(cap, float(sigmoid(np.dot(H, hyb_x(r, K, V)))) if has_vec[key[0]] else pk)
            cands.append((cap, r["relevant"]))
        by_q[key] = cands
    probs, labels, ranks = [], [], []
    for cands in by_q.values():
        for i, (p, l) in enumerate(cands):
            probs.append(p); labels.append(l); ranks.append(i)
    table("query", probs, labels, ranks)
    # Judged pages per query: the dump's `judged` count, else those found among candidates.
    judged = defaultdict(set)
    counts = {}
    for r in rows:
        if r["relevant"]:
            judged[(r["set"], r["query"])].add(r["file"])
        if "judged" in r:
            counts[(r["set"], r["query"])] = r["judged"]
    hit3 = ndcg = 0.0
    for key, cands in by_q.items():
        n_rel = counts.get(key) or max(len(judged[key]), 1)
        flags = [l for _, l in cands[:10]]
        hit3 += any(flags[:3])
        dcg = sum(1 / math.log2(i + 2) for i, f in enumerate(flags) if f)
        ndcg += dcg / sum(1 / math.log2(i + 2) for i in range(min(n_rel, 10)))
    print(f"  query ranking over {len(by_q)} queries: Hit@3 {hit3 / len(by_q):.3f}  nDCG@10 {ndcg / len(by_q):.3f} ")


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
    vec_sets = {r["set"] for r in rows if r["vector"]}
    hy = [r for r in rows if r["set"] in vec_sets]
    H = fit([hyb_x(r, K, V) for r in hy], [r["relevant"] for r in hy], [r["w"] for r in hy])
    fmt = lambda b: "[" + ", ".join(f"{x:.4}" for x in b) + "]"
    print(f"const KW: [f64; 5] = {fmt(K)};")
    print(f"const VEC: [f64; 5] = {fmt(V)};")
    print(f"const HYB: [f64; 7] = {fmt(H)};")
    report("calibration on the fitting sets (top-10 hits: band → share relevant (hits))", rows, K, V, H)
    for p in a.check:
        report(f"held out: {p}", load([p]), K, V, H)


if __name__ == "__main__":
    main()
