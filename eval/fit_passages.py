#!/usr/bin/env python3
"""Fits the calibration of *passage* scores (crates/quarry-engine/src/calibration.rs,
`PASSAGES`) on judged questions over long documents, and checks it on held-out documents.

1. Collect: ask a running server (documents uploaded, embedded for vector/hybrid) every
   question of a judged set in each mode, with `explain` (each result's evidence):

       python3 eval/fit_passages.py collect --url http://127.0.0.1:8931 \
           --set eval/long-docs.jsonl --modes keyword,vector,hybrid --out /tmp/passages.jsonl

2. Fit on the `fit` split, print the Rust constants and the tables (score band → share of
   results judged relevant) on both splits, unanswerable questions included:

       python3 eval/fit_passages.py fit /tmp/passages.jsonl

Three L2-regularised logistic models (Newton's method, numpy only), each over the top 50
results of its mode, each question weighing the same:
  keyword  σ(k0 + k1·coverage + k2·relative + k3·ln(1+rank) + k4·margin)
  vector   σ(v0 + v1·z + v2·gap + v3·ln(1+rank) + v4·margin + v5·similarity)
  hybrid   σ(h0 + h1·lk + h2·lv + h3·[keyword found] + h4·[vector found])
A result counts as relevant when its file and page are among the question's judged pages;
judgements are incomplete (1–3 pages), so measured precision is a lower bound.
"""
import argparse
import json
import math
import sys
import urllib.request
from collections import defaultdict
from pathlib import Path

BANDS = [i / 10 for i in range(11)]


def ask(url, query, mode):
    body = {"question": query, "search_mode": mode, "top_k": 50, "min_score": 0,
            "rerank": False, "explain": True}
    req = urllib.request.Request(url.rstrip("/") + "/api/v1/knowledge-search",
                                 json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def judged(q, hit):
    name = hit["file"].rsplit("/", 1)[-1]
    for rel in q.get("relevant", []):
        if rel["file"].rsplit("/", 1)[-1] == name:
            pages = rel.get("pages") or []
            if not pages or hit.get("page") in pages:
                return True
    return False


def collect(a):
    out = open(a.out, "w", encoding="utf-8")
    questions = [json.loads(l) for l in open(a.set, encoding="utf-8") if l.strip()]
    for i, q in enumerate(questions):
        for mode in a.modes.split(","):
            res = ask(a.url, q["query"], mode)
            if res.get("search_mode") != mode:
                sys.exit(f"{mode} did not run (got {res.get('search_mode')}): embed first")
            for rank, h in enumerate(res["results"]):
                out.write(json.dumps({
                    "query": q["query"], "split": q.get("split", "fit"), "kind": q.get("kind"),
                    "lang": q.get("lang"), "answerable": bool(q.get("relevant")), "mode": mode,
                    "rank": rank, "score": h["score"], "file": h["file"], "page": h.get("page"),
                    "relevant": judged(q, h), "evidence": h.get("evidence") or {},
                }, ensure_ascii=False) + "\n")
        print(f"\r{i + 1}/{len(questions)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def kw_x(e):
    return [1.0, e["coverage"], e["relative"], math.log(1 + e["rank"]), e["margin"]]


def vec_x(e):
    return [1.0, e["z"], e["gap"], math.log(1 + e["rank"]), e["margin"], e["similarity"]]


def logistic(X, y, w, l2=1e-2, iters=50):
    import numpy as np
    X, y, w = np.asarray(X, float), np.asarray(y, float), np.asarray(w, float)
    beta = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-X @ beta))
        g = X.T @ (w * (p - y)) + l2 * beta
        H = (X * (w * p * (1 - p))[:, None]).T @ X + l2 * np.eye(X.shape[1])
        step = np.linalg.solve(H, g)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def hyb_x(r, K, V):
    e = r["evidence"]
    lk = sum(a * b for a, b in zip(K, kw_x(e["keyword"]))) if e.get("keyword") else 0.0
    lv = sum(a * b for a, b in zip(V, vec_x(e["vector"]))) if e.get("vector") else 0.0
    return [1.0, lk, lv, 1.0 if e.get("keyword") else 0.0, 1.0 if e.get("vector") else 0.0]


def weights(rows):
    per_q = defaultdict(int)
    for r in rows:
        per_q[r["query"]] += 1
    return [1.0 / per_q[r["query"]] for r in rows]


def table(name, rows, prob):
    counts = defaultdict(lambda: [0, 0])
    for r in rows:
        p = prob(r)
        b = min(int(p * 10), 9)
        counts[b][0] += 1
        counts[b][1] += r["relevant"]
    print(f"\n{name}: band → share relevant (results)")
    for b in range(9, -1, -1):
        n, k = counts[b]
        if n:
            print(f"  {b / 10:.1f}–{(b + 1) / 10:.1f}  {k / n:5.2f}  ({n})")


def summary(name, rows, prob, threshold=0.5):
    """Per question: best result at or above the threshold relevant (Hit@1 by default) and
    the unanswerable questions answered with nothing."""
    by_q = defaultdict(list)
    for r in rows:
        by_q[r["query"]].append(r)
    ans = [q for q in by_q.values() if q[0]["answerable"]]
    una = [q for q in by_q.values() if not q[0]["answerable"]]
    kept = lambda q: sorted((r for r in q if prob(r) >= threshold), key=lambda r: -prob(r))
    hit3 = sum(any(r["relevant"] for r in kept(q)[:3]) for q in ans) / max(len(ans), 1)
    empty = sum(not kept(q) for q in ans) / max(len(ans), 1)
    quiet = sum(not kept(q) for q in una) / max(len(una), 1)
    hi = [r for q in by_q.values() for r in q if prob(r) >= 0.8]
    prec = sum(r["relevant"] for r in hi) / max(len(hi), 1)
    print(f"{name}: Hit@3 at {threshold:g} {hit3:.3f} · answerable empty {empty:.3f} · "
          f"unanswerable empty {quiet:.3f} ({len(una)}) · ≥0.8 relevant {prec:.2f} ({len(hi)})")


def choose_band(rows, logit, empty_target=0.10, quiet_target=0.90, precision=0.80):
    """The seeds' bands on one mode's logit: `t`, scored 0.5, separates the best result of
    questions the documents answer from that of questions they do not (at least
    `quiet_target` of unanswerable questions left empty first, then as few as possible of the
    answerable ones, at most `empty_target` where that can be had); `u`, scored 0.8, is the
    lowest logit above which at least `precision` of the results are relevant, and at least
    ln 4 above `t`. Between and beyond, the score follows the logistic curve through the two
    points."""
    by_q = defaultdict(list)
    for r in rows:
        x = logit(r)
        if x is not None:
            by_q[r["query"]].append((x, r))
    ans = [max(x for x, _ in q) for q in by_q.values() if q[0][1]["answerable"]]
    una = [max(x for x, _ in q) for q in by_q.values() if not q[0][1]["answerable"]]
    # Questions with no result at all count as empty at every threshold.
    n_ans = sum(1 for r in {r["query"]: r for r in rows}.values() if r["answerable"])
    n_una = sum(1 for r in {r["query"]: r for r in rows}.values() if not r["answerable"])
    cands = sorted(set(ans + una))
    # Saying nothing beats answering with something unrelated: among the thresholds that
    # leave at least `quiet_target` of unanswerable questions empty, those that also leave at
    # most `empty_target` of answerable ones empty (the middle one of them), else the one that
    # leaves the fewest empty. When no threshold is quiet enough, the quietest.
    rated = []
    for i in range(len(cands) - 1):
        t = (cands[i] + cands[i + 1]) / 2
        empty = 1 - sum(x >= t for x in ans) / max(n_ans, 1)
        quiet = 1 - sum(x >= t for x in una) / max(n_una, 1)
        rated.append((t, empty, quiet))
    quiet_enough = [r for r in rated if r[2] >= quiet_target - 1e-9]
    if not quiet_enough:
        best_quiet = max(r[2] for r in rated)
        quiet_enough = [r for r in rated if r[2] == best_quiet]
    both = [r for r in quiet_enough if r[1] <= empty_target + 1e-9]
    if both:
        chosen = [r[0] for r in both]
    else:
        fewest = min(r[1] for r in quiet_enough)
        chosen = [r[0] for r in quiet_enough if r[1] == fewest]
    t = chosen[len(chosen) // 2]
    scored = sorted(((x, r["relevant"]) for q in by_q.values() for x, r in q), key=lambda p: -p[0])
    u, hits = None, 0
    for n, (x, rel) in enumerate(scored, 1):
        hits += rel
        if n >= 20 and hits / n >= precision:
            u = x
    # Never steeper than the model itself: above `u` precision only grows.
    return t, max(u if u is not None else t, t + math.log(4))


def fit(a):
    rows = [json.loads(l) for l in open(a.dump, encoding="utf-8") if l.strip()]
    fitting = [r for r in rows if r["split"] == "fit"]
    held = [r for r in rows if r["split"] != "fit"]
    by_mode = lambda rs, m: [r for r in rs if r["mode"] == m]
    K = V = None
    kw = [r for r in by_mode(fitting, "keyword") if r["evidence"].get("keyword")]
    if kw:
        K = list(logistic([kw_x(r["evidence"]["keyword"]) for r in kw],
                          [r["relevant"] for r in kw], weights(kw)))
    vec = [r for r in by_mode(fitting, "vector") if r["evidence"].get("vector")]
    if vec:
        V = list(logistic([vec_x(r["evidence"]["vector"]) for r in vec],
                          [r["relevant"] for r in vec], weights(vec)))
    # Keep the single-mode models as served (refitting only the hybrid model and the bands).
    if a.keyword_coefs:
        K = [float(x) for x in a.keyword_coefs.split(",")]
    if a.vector_coefs:
        V = [float(x) for x in a.vector_coefs.split(",")]
    H = None
    hyb = [r for r in by_mode(fitting, "hybrid") if r["evidence"].get("vector")]
    if hyb and K and V:
        H = list(logistic([hyb_x(r, K, V) for r in hyb], [r["relevant"] for r in hyb],
                          weights(hyb)))
    fmt = lambda c: "[" + ", ".join(f"{x:.4}" for x in c) + "]"

    def raw_logit(mode):
        """The fitted model's logit of a result as `mode` scores it (None: not scored)."""
        def l(r):
            e = r["evidence"]
            if mode == "keyword" or (mode == "hybrid" and not e.get("vector")):
                return sum(x * y for x, y in zip(K, kw_x(e["keyword"]))) if e.get("keyword") else None
            if mode == "vector":
                return sum(x * y for x, y in zip(V, vec_x(e["vector"]))) if e.get("vector") else None
            return sum(x * y for x, y in zip(H, hyb_x(r, K, V)))
        return l

    bands = {"keyword": (0.0, math.log(4)), "vector": (0.0, math.log(4)), "hybrid": (0.0, math.log(4))}
    if a.bands:
        for mode in ("keyword", "vector", "hybrid"):
            m = by_mode(fitting, mode)
            if m and ((mode == "keyword" and K) or (mode == "vector" and V) or (mode == "hybrid" and H)):
                bands[mode] = choose_band(m, raw_logit(mode))

    print("// crates/quarry-engine/src/calibration.rs, PASSAGES")
    print(f"keyword: {fmt(K) if K else '-'}\nvector: {fmt(V) if V else '-'}\nhybrid: {fmt(H) if H else '-'}")
    print("bands (logit at 0.5, logit at 0.8): " + ", ".join(f"{m} ({t:.5}, {u:.5})" for m, (t, u) in bands.items()))

    def banded(mode, logit):
        t, u = bands[mode]
        return sigmoid(math.log(4) * (logit - t) / (u - t))

    def prob_for(mode):
        l = raw_logit(mode)

        def p(r):
            x = l(r)
            if x is None:
                return 0.0
            # A hybrid result without a vector is scored as keyword mode scores it.
            own = "keyword" if mode == "hybrid" and not r["evidence"].get("vector") else mode
            return banded(own, x)
        return p

    for mode in ("keyword", "vector", "hybrid"):
        if (mode == "keyword" and not K) or (mode == "vector" and not V) or (mode == "hybrid" and not H):
            continue
        for split, rs in (("fit", fitting), ("held-out", held)):
            m = by_mode(rs, mode)
            if not m:
                continue
            table(f"{mode} · {split} · refitted", m, prob_for(mode))
            summary(f"{mode} · {split} · refitted", m, prob_for(mode))
            summary(f"{mode} · {split} · served scores", m, lambda r: r["score"])
            summary(f"{mode} · {split} · ranking", m, lambda r: 1 - r["rank"] / 100, 0.0)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--url", required=True)
    c.add_argument("--set", required=True)
    c.add_argument("--modes", default="keyword,vector,hybrid")
    c.add_argument("--out", required=True)
    f = sub.add_parser("fit")
    f.add_argument("dump")
    f.add_argument("--keyword-coefs", help="keyword model to keep, comma-separated (default: refit)")
    f.add_argument("--vector-coefs", help="vector model to keep, comma-separated (default: refit)")
    f.add_argument("--bands", action="store_true",
                   help="anchor each mode's scores to the seeds' bands (0.5: answered or not; 0.8: precision)")
    a = ap.parse_args()
    collect(a) if a.cmd == "collect" else fit(a)


if __name__ == "__main__":
    main()
