#!/usr/bin/env python3
"""Fits hybrid passage ranking and the default threshold on the outside sets, offline, from the
evidence dumps of eval/outside/evidence.py, leaving each set out in turn.

    python3 eval/outside/evidence.py --runs seal-tools:minilm,locomo:minilm,metatool:minilm,gorilla:minilm,gorilla:e5,domainrag:e5
    python3 eval/outside/fit_fusion.py [--evidence ~/.cache/quarry-outside/evidence]

1. Ranking (`fusion.rs`): each retriever's raw scores (BM25, cosine similarity) standardised over
   its own top 40, a passage missing from a list at that list's floor; hybrid ranks by
   w·z_keyword + (1 − w)·z_vector with w = σ(a + b·coverage + c·(z_keyword_top − z_vector_top)).
   (a, b, c) is chosen on a grid to maximise the smallest lead (nDCG@10, items ranked by their
   best passage) of hybrid over the better retriever alone across the runs; printed: every run's
   keyword, vector, fixed shares and the fitted share, then the choice with each set held out.
2. Threshold (`calibration.rs`, KEYWORD_HALF / HYBRID_HALF): where the calibrated logit of the
   top-ranked passage scores 0.5. Per run, the share of answerable questions it answers and of
   unrelated questions (run.py's `unrelated_queries`) it leaves empty, for a sweep of points; the
   rule: the lowest point that leaves at least 60 % of unrelated questions empty on every fitting
   set, each set held out in turn.

The candidate pool of a query is what `keyword` and `vector` mode listed (top 50 each); the
calibrated logits are Quarry's PASSAGES models (copied below; keep them in step).
"""
import argparse
import itertools
import json
import math
import statistics
from pathlib import Path

# calibration.rs PASSAGES: keyword, vector and hybrid logistic models.
PK = [-4.565, 8.934, 0.7734, -1.107, 5.028]
PV = [-5.057, 2.041, -0.03731, -0.5298, -0.1403, 1.066]
PH = [-1.924, 0.4397, 0.4534, 4.805, -1.924]
DEPTH = 40
GRID = list(itertools.product([-2, -1, -0.5, 0, 0.5, 1, 2], [0, 2, 3, 4, 5, 6, 8], [0, 0.25, 0.5, 0.75, 1, 2]))
HALVES = [x / 4 for x in range(-28, 5)]


def sigmoid(x):
    return 1 / (1 + math.exp(-max(-50.0, min(50.0, x))))


def keyword_logit(k):
    return PK[0] + PK[1] * k["coverage"] + PK[2] * k["relative"] + PK[3] * math.log(k["rank"] + 1) + PK[4] * k["margin"]


def vector_logit(v):
    return (PV[0] + PV[1] * v["z"] + PV[2] * v["gap"] + PV[3] * math.log(v["rank"] + 1) + PV[4] * v["margin"]
            + PV[5] * v["similarity"])


def passage_logits(k, v):
    """(keyword-only logit, hybrid logit) of a passage, as calibration.rs computes them."""
    lk = keyword_logit(k) if k else None
    if v is None:
        return lk, lk
    return lk, PH[0] + PH[1] * (lk or 0.0) + PH[2] * vector_logit(v) + PH[3] * (k is not None) + PH[4]


def standard(xs):
    xs = xs[:DEPTH]
    if not xs:
        return 0.0, 1.0, 0.0
    m = statistics.mean(xs)
    sd = max(statistics.pstdev(xs), 1e-9 * max(abs(m), 1.0))
    return m, sd, (xs[-1] - m) / sd


def prepare(q):
    """Per passage: item, z_keyword, z_vector, keyword logit, hybrid logit, BM25 rank; per query:
    the share's features."""
    cands = [(c["item"], (c.get("evidence") or {}).get("keyword"), (c.get("evidence") or {}).get("vector"))
             for c in q["candidates"]]
    ks = sorted((k["bm25"] for _, k, _ in cands if k), reverse=True)
    # The vector list proper (evidence looked up for a keyword candidate ranks after it).
    vs = sorted((v["similarity"] for _, _, v in cands if v and v["rank"] < 99), reverse=True)
    K, V = standard(ks), standard(vs)
    rows = []
    for item, k, v in cands:
        zk = max((k["bm25"] - K[0]) / K[1], K[2]) if k else K[2]
        listed = v is not None and v["rank"] < 99
        zv = max((v["similarity"] - V[0]) / V[1], V[2]) if listed else V[2]
        lk, lh = passage_logits(k, v)
        rows.append((item, zk, zv, lk, lh, k["rank"] if k else None, listed))
    first = min((k for _, k, _ in cands if k), key=lambda k: k["rank"], default=None)
    q["rows"] = rows
    q["features"] = (first["coverage"] if first else 0.0,
                     (ks[0] - K[0]) / K[1] if ks else 0.0, (vs[0] - V[0]) / V[1] if vs else 0.0)


def ranking(q, share):
    best = {}
    for item, zk, zv, _, lh, rank, listed in q["rows"]:
        if share == 1.0 and rank is None or share == 0.0 and not listed:
            continue
        s = share * zk + (1 - share) * zv
        if item not in best or s > best[item][0]:
            best[item] = (s, lh)
    return sorted(best.items(), key=lambda x: -x[1][0])


def ndcg(q, ranked):
    rel = set(q["relevant"])
    dcg = sum(1 / math.log2(j + 2) for j, (i, _) in enumerate(ranked[:10]) if i in rel)
    return dcg / sum(1 / math.log2(j + 2) for j in range(min(10, len(rel))))


def share_of(w, q):
    cov, zk, zv = q["features"]
    return sigmoid(w[0] + w[1] * cov + w[2] * (zk - zv))


def mean_ndcg(qs, share):
    return sum(ndcg(q, ranking(q, share(q))) for q in qs) / len(qs)


def set_of(run):
    return run.rsplit("-", 1)[0]


def fit_share(runs):
    answerable = {n: [q for q in qs if q["answerable"] and not q["foreign"]] for n, qs in runs.items()}
    alone = {n: (mean_ndcg(qs, lambda q: 1.0), mean_ndcg(qs, lambda q: 0.0)) for n, qs in answerable.items()}
    print("nDCG@10 (items by their best passage)\n"
          "run                 keyword  vector  w=0.5  w=0.75")
    for n, qs in answerable.items():
        print(f"{n:18s}  {alone[n][0]:.3f}    {alone[n][1]:.3f}   {mean_ndcg(qs, lambda q: 0.5):.3f}  "
              f"{mean_ndcg(qs, lambda q: 0.75):.3f}")
    lead = {w: {n: mean_ndcg(qs, lambda q: share_of(w, q)) - max(alone[n]) for n, qs in answerable.items()}
            for w in GRID}
    shipped = (-0.5, 8, 0.25)  # fusion.rs SHARE
    print(f"share in fusion.rs {shipped}: hybrid minus the better retriever alone: "
          + ", ".join(f"{n} {x:+.3f}" for n, x in lead[shipped].items()))
    w = max(GRID, key=lambda w: min(lead[w].values()))
    print(f"\nshare fitted on every run: {w}; hybrid minus the better retriever alone: "
          + ", ".join(f"{n} {x:+.3f}" for n, x in lead[w].items()))
    for held in runs:
        fit = [n for n in runs if set_of(n) != set_of(held)]
        wh = max(GRID, key=lambda w: min(lead[w][n] for n in fit))
        print(f"  {held:18s} held out: share {wh}, its lead {lead[wh][held]:+.3f}")
    return w


def fit_thresholds(runs, w):
    def top(q, which):
        r = ranking(q, 1.0 if which == "keyword" else share_of(w, q))
        if not r:
            return -99.0
        item = r[0][0]
        idx = 3 if which == "keyword" else 4
        return max((row[idx] for row in q["rows"] if row[0] == item and row[idx] is not None), default=-99.0)

    for which in ("keyword", "hybrid"):
        stats = {}
        for n, qs in runs.items():
            if which == "keyword":
                qs_k = qs
            else:
                qs_k = qs
            stats[n] = ([top(q, which) for q in qs_k if q["answerable"] and not q["foreign"]],
                        [top(q, which) for q in qs_k if q["foreign"]])

        def rates(n, h):
            a, f = stats[n]
            return sum(x >= h for x in a) / len(a), sum(x < h for x in f) / max(1, len(f))

        print(f"\n{which}: answered / unrelated empty at the default, by the logit that scores 0.5")
        for h in HALVES[::2]:
            print(f"  {h:6.2f}  " + "  ".join(f"{n[:10]} {rates(n, h)[0]:.2f}/{rates(n, h)[1]:.2f}" for n in runs))
        for held in list(runs) + [None]:
            fit = [n for n in runs if held is None or set_of(n) != set_of(held)]
            ok = [h for h in HALVES if all(rates(n, h)[1] >= 0.6 for n in fit)]
            h = min(ok) if ok else max(HALVES)
            shown = [held] if held else list(runs)
            print(f"  {'all sets' if held is None else held + ' held out':28s} point {h:5.2f}: "
                  + "  ".join(f"{n} {rates(n, h)[0]:.3f}/{rates(n, h)[1]:.3f}" for n in shown))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evidence", default=str(Path.home() / ".cache/quarry-outside/evidence"))
    a = ap.parse_args()
    runs = {}
    for p in sorted(Path(a.evidence).glob("*.jsonl")):
        qs = [json.loads(x) for x in open(p, encoding="utf-8")]
        for q in qs:
            prepare(q)
        runs[p.stem] = qs
    w = fit_share(runs)
    fit_thresholds(runs, w)


if __name__ == "__main__":
    main()
