#!/usr/bin/env python3
"""The report's tables: (a) current 0.5 points (-2.5 keyword and hybrid), (b) single cut on the
top logit re-fitted leave-one-set-out, (c) the feature gate lk1 + over10 leave-one-set-out.
Cells: answered share of answerable / empty share of all foreign / empty share of the worst
foreign source set (held out)."""
import numpy as np
import fit_loso as F

RUNS = F.RUNS


def cell(s, y, g, cut, strict=False):
    ans = (s[y == 1] >= cut).mean() if strict else (s[y == 1] > cut).mean()
    emp = (s[y == 0] < cut) if strict else (s[y == 0] <= cut)
    worst = min(emp[g[y == 0] == src].mean() for src in set(g[y == 0]))
    return f"{ans:.3f}/{emp.mean():.3f}/{worst:.2f}"


def current():
    for feat in ("lk", "lh"):
        row = []
        for r in RUNS:
            X, y = F.mat(r, [feat]); g = F.groups(r)
            row.append(cell(X[:, 0], y, g, -2.5, strict=True))
        print(f"(a) current {feat} >= -2.5       " + "  ".join(row))


def loso(feats, how, m, label):
    rng = np.random.default_rng(0)
    row, folds = [], []
    for r in RUNS:
        held = F.set_of(r)
        coef, cut = F.fit([x for x in RUNS if F.set_of(x) != held], feats, how, m, rng)
        X, y = F.mat(r, feats); g = F.groups(r)
        row.append(cell(X @ coef, y, g, cut))
        # normalised: first feature's coefficient 1
        folds.append(f"{held}: " + " + ".join(f"{c / coef[0]:.3g}*{n}" for c, n in zip(coef, feats)) + f" > {cut / coef[0]:.3g}")
    coef, cut = F.fit(RUNS, feats, how, m, rng)
    print(f"{label:30s} " + "  ".join(row))
    print("     folds: " + "; ".join(dict.fromkeys(folds)))
    print("     all six runs: " + " + ".join(f"{c / coef[0]:.4g}*{n}" for c, n in zip(coef, feats))
          + f" > {cut / coef[0]:.4g}   (raw: " + " + ".join(f"{c:.4g}*{n}" for c, n in zip(coef, feats)) + f" > {cut:.4g})")


print(" " * 31 + "  ".join(f"{r[:17]:>17s}" for r in RUNS))
current()
for m in (0.5, 0.55):
    loso(["lk"], "single", m, f"(b) keyword lk cut m={m}")
    loso(["lh"], "single", m, f"(b) hybrid lh cut m={m}")
for m in (0.5, 0.55):
    loso(["lk1", "over10"], "logistic", m, f"(c) lk1+over10 m={m}")
F.PER_SOURCE = True
loso(["lh"], "single", 0.55, "(b') lh, per-source m=.55")
loso(["lk1", "over10"], "logistic", 0.55, "(c') lk1+over10 per-src .55")
