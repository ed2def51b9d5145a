#!/usr/bin/env python3
"""Leave-one-set-out fits of a query-level "answer or stay empty" rule on features.json.

A rule is a linear score s = w·x over a few query features; a query is answered iff s > cut.
The cut is always chosen the same way on the fitting runs: the lowest that leaves at least
`m` of the foreign (unrelated) questions empty on every fitting run (which maximises the
smallest answered share subject to that constraint, since both move monotonically with the cut).
w is chosen on the fitting runs by (a) fixed (single feature), (b) class- and run-balanced
logistic regression, or (c) direct search for the largest smallest answered share.
Held out: every run of the held-out set (Gorilla's two together).

    python3 fit_loso.py [--margin 0.55] [--feats lh,cov1 ...]
"""
import argparse
import itertools
import json
import math

import numpy as np
from pathlib import Path

D = json.load(open(Path.home() / ".cache/quarry-outside/answerability-features.json"))
RUNS = list(D)


def set_of(r):
    return r.rsplit("-", 1)[0]


SETS = sorted({set_of(r) for r in RUNS})


PER_SOURCE = False


def mat(run, feats):
    """X, y where y = 1 answerable, 0 foreign; with PER_SOURCE, foreign questions get a label
    -k per source set, so every (run, source) is its own constraint."""
    rows = D[run]
    X = np.array([[x["f"][n] for n in feats] for x in rows], float)
    y = np.array([x["a"] for x in rows], int)
    return X, y


def groups(run):
    return np.array([x["src"] for x in D[run]])


def cut_for(scores_by_run, m):
    """Lowest cut leaving >= m of foreign empty (s <= cut) on every run: midpoint above."""
    cuts = []
    for s, y in scores_by_run:
        g = np.sort(s[y == 0])
        k = math.ceil(m * len(g)) - 1
        hi = g[k + 1] if k + 1 < len(g) else g[k] + 1e-3
        cuts.append((g[k] + hi) / 2 if hi > g[k] else g[k])
    return max(cuts)


def rates(s, y, cut):
    return (s[y == 1] > cut).mean(), (s[y == 0] <= cut).mean()


def logistic(X, y, wts, l2=1e-2, iters=50):
    Xb = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(Xb.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(Xb @ w, -30, 30)))
        g = Xb.T @ (wts * (p - y)) + l2 * np.r_[w[:-1], 0]
        H = (Xb * (wts * p * (1 - p))[:, None]).T @ Xb + l2 * np.eye(len(w))
        w -= np.linalg.solve(H, g)
    return w


def fit(fitruns, feats, how, m, rng):
    data = [mat(r, feats) for r in fitruns]
    X = np.vstack([d[0] for d in data])
    mu, sd = X.mean(0), X.std(0) + 1e-9
    Z = [((d[0] - mu) / sd, d[1]) for d in data]
    if PER_SOURCE:  # every (run, foreign source) a constraint of its own
        Zc = []
        for r, (z, y) in zip(fitruns, Z):
            g = groups(r)
            for src in sorted(set(g[y == 0])):
                keep = (y == 1) | (g == src)
                Zc.append((z[keep], y[keep]))
    else:
        Zc = Z
    if how == "single" or len(feats) == 1:
        w = np.ones(len(feats))
    elif how == "logistic":
        Xs = np.vstack([z for z, _ in Z]); ys = np.concatenate([y for _, y in Z])
        wts = np.concatenate([np.where(y == 1, 1 / max(1, y.sum()), 1 / max(1, (1 - y).sum())) / len(Z)
                              for _, y in Z]) * len(ys)
        w = logistic(Xs, ys, wts)[:-1]
    else:  # maximin direct search over directions
        def obj(w):
            c = cut_for([(z @ w, y) for z, y in Zc], m)
            return min(rates(z @ w, y, c)[0] for z, y in Z)
        best, bw = -1, None
        cand = rng.normal(size=(3000, len(feats)))
        for w in cand:
            w = w / np.linalg.norm(w)
            o = obj(w)
            if o > best:
                best, bw = o, w
        step = 0.2
        for _ in range(300):
            w = bw + step * rng.normal(size=len(feats)); w /= np.linalg.norm(w)
            o = obj(w)
            if o >= best:
                best, bw = o, w
            else:
                step *= 0.99
        w = bw
    c = cut_for([(z @ w, y) for z, y in Zc], m)
    # in raw units: answered iff sum(coef_i x_i) > cut_raw
    coef = w / sd
    cut_raw = c + (coef * mu).sum()
    return coef, cut_raw


def evaluate(feats, how, m, seed=0, verbose=False):
    rng = np.random.default_rng(seed)
    res = {}
    for held in SETS:
        fitruns = [r for r in RUNS if set_of(r) != held]
        coef, cut = fit(fitruns, feats, how, m, rng)
        for r in RUNS:
            if set_of(r) == held:
                X, y = mat(r, feats)
                g = groups(r); sc = X @ coef
                worst = min((sc[(y == 0) & (g == src)] <= cut).mean() for src in set(g[y == 0]))
                res[r] = rates(sc, y, cut) + (worst, coef, cut)
    coef, cut = fit(RUNS, feats, how, m, rng)
    allfit = {r: rates(mat(r, feats)[0] @ coef, mat(r, feats)[1], cut) for r in RUNS}
    return res, (coef, cut), allfit


def show(name, feats, res, full, allfit):
    a = min(v[0] for v in res.values()); e = min(v[1] for v in res.values())
    w = min(v[2] for v in res.values())
    print(f"{name:40s} held out (answered/foreign-empty/worst source): "
          + "  ".join(f"{r[:12]} {v[0]:.2f}/{v[1]:.2f}/{v[2]:.2f}" for r, v in res.items())
          + f"   | min {a:.2f}/{e:.2f}/{w:.2f}")
    coef, cut = full
    print(f"{'':40s} fitted on all: {' + '.join(f'{c:.4g}*{n}' for c, n in zip(coef, feats))} > {cut:.4g};  "
          + "  ".join(f"{r[:12]} {v[0]:.2f}/{v[1]:.2f}" for r, v in allfit.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--margin", type=float, default=0.55)
    ap.add_argument("--how", default="logistic")
    ap.add_argument("--feats", nargs="*", default=None)
    ap.add_argument("--per-source", action="store_true",
                    help="constraint on every (run, foreign source set), not every run")
    ap.add_argument("--search", type=int, default=0, help="try all subsets up to this size")
    ap.add_argument("--pool", default="lh,lk1,lv1,cov1,covh,kmargin,zv1,vmargin,vz_of_k1,cov_of_v1,over10,over5,agree1,rel10,frac,frac40,sdrel,nk")
    a = ap.parse_args()
    global PER_SOURCE
    PER_SOURCE = a.per_source
    if a.search:
        pool = a.pool.split(",")
        out = []
        for k in range(1, a.search + 1):
            for fs in itertools.combinations(pool, k):
                res, full, allfit = evaluate(list(fs), a.how, a.margin)
                out.append((min(v[0] for v in res.values()), min(v[1] for v in res.values()),
                            min(v[2] for v in res.values()), fs))
        out.sort(reverse=True)
        for x in out[:25]:
            print(f"{x[0]:.3f} {x[1]:.3f} {x[2]:.3f} {','.join(x[3])}")
        return
    for fs in a.feats:
        feats = fs.split(",")
        res, full, allfit = evaluate(feats, a.how, a.margin)
        show(f"{a.how} m={a.margin} [{fs}]", feats, res, full, allfit)


if __name__ == "__main__":
    main()
