#!/usr/bin/env python3
"""The plain baseline a user could write in an afternoon: BM25 (k1 1.2, b 0.75) over jieba's
search-mode tokens (lower-cased; Latin words as jieba emits them), whole page as one field.
Quarry's keyword search should beat it on every set.

    pip install jieba
    python3 eval/baseline_bm25.py eval/tldr-zh-desc.jsonl --corpus ../shared/corpora/tldr --mask 'pages.zh/**/*.md'

Prints Hit@3, MRR@10 and nDCG@10 over the queries (binary relevance, as `quarry eval`).
"""
import argparse
import json
import math
from collections import Counter
from pathlib import Path

import jieba

jieba.setLogLevel(60)


def toks(text):
    return [t.lower() for t in jieba.cut_for_search(text) if t.strip() and (t.isalnum() or len(t) > 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("queries")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--mask", default="**/*.md")
    a = ap.parse_args()
    root = Path(a.corpus)
    paths = sorted(root.glob(a.mask))
    docs = [Counter(toks(p.read_text(encoding="utf-8"))) for p in paths]
    names = [p.relative_to(root).as_posix() for p in paths]
    lens = [sum(d.values()) for d in docs]
    avg = sum(lens) / len(lens)
    df = Counter(t for d in docs for t in d)
    n = len(docs)
    k1, b = 1.2, 0.75
    hit3 = mrr = ndcg = 0.0
    qs = [json.loads(l) for l in open(a.queries, encoding="utf-8") if l.strip()]
    for q in qs:
        qt = toks(q["query"])
        scores = []
        for i, d in enumerate(docs):
            s = 0.0
            for t in qt:
                tf = d.get(t)
                if tf:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lens[i] / avg))
            if s > 0:
                scores.append((s, names[i]))
        scores.sort(key=lambda x: -x[0])
        ranked = [nm for _, nm in scores[:10]]
        rel = set(q["relevant"])
        flags = [r in rel for r in ranked]
        first = next((i for i, f in enumerate(flags) if f), None)
        hit3 += 1 if first is not None and first < 3 else 0
        mrr += 1 / (first + 1) if first is not None else 0
        dcg = sum(1 / math.log2(i + 2) for i, f in enumerate(flags) if f)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(rel), 10)))
        ndcg += dcg / ideal
    k = len(qs)
    print(f"{a.queries}: queries {k}  Hit@3 {hit3/k:.3f}  MRR@10 {mrr/k:.3f}  nDCG@10 {ndcg/k:.3f}")


if __name__ == "__main__":
    main()
