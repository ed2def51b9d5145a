#!/usr/bin/env python3
"""Per-query features from the evidence dumps (~/.cache/quarry-outside/evidence/*.jsonl).

Reuses ../fit_fusion.py's code path for the
ranking and the top passage's logits, then adds query-level features, all computed from the
served evidence of each retriever's top-50 list. Writes FEATURES
(~/.cache/quarry-outside/answerability-features.json):
{run: [{"a": 1|0, "f": {name: value}}]}  (a = 1 answerable own-set query, 0 = foreign query;
LoCoMo's own unanswerable category-5 questions are left out, as fit_fusion.py does).
"""
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import fit_fusion as ff  # noqa: E402

SHARE = (-0.5, 8, 0.25)  # quarry-rank SHARE (shipped)
EV = Path.home() / ".cache/quarry-outside/evidence"
FEATURES = Path.home() / ".cache/quarry-outside/answerability-features.json"


def top_logits(q):
    """(keyword-only top logit, hybrid top logit, hybrid top item) exactly as fit_fusion.top()."""
    out = []
    for which in ("keyword", "hybrid"):
        r = ff.ranking(q, 1.0 if which == "keyword" else ff.share_of(SHARE, q))
        if not r:
            out += [-99.0, None]
            continue
        item = r[0][0]
        idx = 3 if which == "keyword" else 4
        out += [max((row[idx] for row in q["rows"] if row[0] == item and row[idx] is not None), default=-99.0), item]
    return out


def feats(q):
    lk_top, k_item, lh_top, h_item = top_logits(q)
    cands = [(c["item"], (c.get("evidence") or {}).get("keyword"), (c.get("evidence") or {}).get("vector"))
             for c in q["candidates"]]
    klist = sorted([(k["rank"], it, k, v) for it, k, v in cands if k], key=lambda x: x[0])
    vlist = sorted([(v["rank"], it, k, v) for it, k, v in cands if v and v["rank"] < 99], key=lambda x: x[0])

    def items(lst, n):
        seen = []
        for _, it, _, _ in lst:
            if it not in seen:
                seen.append(it)
            if len(seen) == n:
                break
        return seen

    f = {"lh": lh_top, "lk": lk_top}
    if klist:
        _, _, k1, v1 = klist[0]
        f["cov1"] = k1["coverage"]
        f["kmargin"] = k1["margin"]
        f["lk1"] = ff.keyword_logit(k1)
        f["vz_of_k1"] = v1["z"] if v1 else -3.0  # where the vector list puts the keyword leader
        f["rel5"] = klist[min(4, len(klist) - 1)][2]["relative"]
        f["rel10"] = klist[min(9, len(klist) - 1)][2]["relative"]
        f["nk"] = min(len(klist), 50) / 50
    else:
        f.update(cov1=0.0, kmargin=0.0, lk1=-8.0, vz_of_k1=-3.0, rel5=0.0, rel10=0.0, nk=0.0)
    if vlist:
        _, _, kv, v1 = vlist[0]
        sims = [x[3]["similarity"] for x in vlist]
        f["zv1"] = v1["z"]
        f["vmargin"] = v1["margin"]
        f["lv1"] = ff.vector_logit(v1)
        f["sim1"] = v1["similarity"]
        f["cov_of_v1"] = kv["coverage"] if kv else 0.0  # keyword coverage of the vector leader
        s = sims[:40]
        f["head"] = (s[0] - s[min(4, len(s) - 1)]) / max(1e-6, s[0] - s[-1])  # top1-top5 over top1-top40
        f["zv5"] = vlist[min(4, len(vlist) - 1)][3]["z"]
        # scale-free under s -> 1 - a(1 - s): how far the top similarity stands from the
        # list's mean (the engine's VectorStats.mean over the top 40) towards 1
        mean = sum(s) / len(s)
        f["frac"] = (s[0] - mean) / max(1e-6, 1 - mean)
        f["frac40"] = (s[0] - s[-1]) / max(1e-6, 1 - s[-1])
        sd = (sum((x - mean) ** 2 for x in s) / len(s)) ** 0.5
        f["sdrel"] = sd / max(1e-6, 1 - mean)
        f["dist1"] = math.log(max(1e-6, 1 - s[0]) / max(1e-6, 1 - mean))  # log of (1-s1)/(1-mean)
    else:
        f.update(zv1=0.0, vmargin=0.0, lv1=-8.0, sim1=0.0, cov_of_v1=0.0, head=0.0, zv5=0.0,
                 frac=0.0, frac40=0.0, sdrel=0.0, dist1=0.0)
    k5, v5 = items(klist, 5), items(vlist, 5)
    k10, v10 = items(klist, 10), items(vlist, 10)
    f["agree1"] = float(bool(k5) and bool(v5) and k5[0] == v5[0])
    f["agree5"] = float(bool(set(k5) & set(v5)))
    f["over5"] = len(set(k5) & set(v5)) / 5
    f["over10"] = len(set(k10) & set(v10)) / 10
    # the hybrid top passage's own evidence
    hk = max((k["coverage"] for it, k, v in cands if it == h_item and k), default=0.0)
    f["covh"] = hk
    f["k1_in_v5"] = float(bool(k5) and k5[0] in v5)
    f["v1_in_k5"] = float(bool(v5) and v5[0] in k5)
    return f


def main():
    out = {}
    for p in sorted(EV.glob("*.jsonl")):
        rows = []
        for line in open(p, encoding="utf-8"):
            q = json.loads(line)
            if not q["foreign"] and not q["answerable"]:
                continue
            ff.prepare(q)
            rows.append({"a": 0 if q["foreign"] else 1, "src": q["set"], "f": feats(q)})
        out[p.stem] = rows
        print(p.stem, len(rows), sum(r["a"] for r in rows), file=sys.stderr)
    json.dump(out, open(FEATURES, "w"))


if __name__ == "__main__":
    main()
