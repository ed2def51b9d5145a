#!/usr/bin/env python3
"""The anchor a careful engineer would try first on long documents: plain BM25 (Okapi, k1 1.2,
b 0.75) over PAGES. Each PDF page is one document (`pdftotext -f N -l N`, the page index Quarry
reports); an HTML file is one page. Han runs are cut by jieba in search mode, everything else
into lower-cased word tokens. Scored like eval/long_docs.py at page level: a hit is the right
file and one of the judged pages; Hit@3 and MRR@10 over the answerable questions, overall,
per language and per split, plus how often a table-of-contents page ranks first.

    pip install -r eval/requirements.txt        # jieba; pdftotext from poppler-utils
    python3 eval/baseline_pages_bm25.py [--set eval/long-docs.jsonl] [--docs ~/.cache/quarry-docs]
"""
import argparse
import html
import math
import re
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import jieba

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long_docs import DOCUMENTS, SET, default_docs, is_relevant, load_set, load_toc  # noqa: E402

jieba.setLogLevel(60)
HAN = re.compile(r"([\u3400-\u9fff\uf900-\ufaff]+)")
WORD = re.compile(r"[0-9a-z]+")


def toks(text):
    out = []
    for i, run in enumerate(HAN.split(text.lower())):
        if i % 2:  # a Han run
            out.extend(t for t in jieba.cut_for_search(run) if t.strip())
        else:
            out.extend(WORD.findall(run))
    return out


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.skip -= tag in ("script", "style") and self.skip > 0

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def pages_of(path):
    """[(page, text)]: PDF pages 1..n by pdftotext, an HTML file as page None."""
    if path.suffix == ".pdf":
        info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
        n = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
        return [(i, subprocess.run(["pdftotext", "-f", str(i), "-l", str(i), str(path), "-"],
                                   capture_output=True, text=True, check=True).stdout) for i in range(1, n + 1)]
    p = _Text()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return [(None, html.unescape(" ".join(p.parts)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default=str(SET))
    ap.add_argument("--docs", default=default_docs())
    ap.add_argument("--misses", action="store_true", help="list the answerable questions missed in the top 3")
    a = ap.parse_args()
    units = []  # (file, page, Counter)
    for rel in DOCUMENTS:
        for page, text in pages_of(Path(a.docs) / rel):
            units.append((rel, page, Counter(toks(text))))
    lens = [sum(c.values()) for _, _, c in units]
    avg = sum(lens) / len(lens)
    df = Counter(t for _, _, c in units for t in c)
    n = len(units)
    k1, b = 1.2, 0.75
    toc = load_toc()
    qs = load_set(a.set)
    groups = {"all": [], "en": [], "zh": [], "fit": [], "held-out": []}
    toc_top = 0
    for q in qs:
        qt = toks(q["query"])
        scored = []
        for i, (f, page, c) in enumerate(units):
            s = 0.0
            for t in qt:
                tf = c.get(t)
                if tf:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lens[i] / avg))
            if s > 0:
                scored.append((s, f, page))
        scored.sort(key=lambda x: -x[0])
        top = scored[:10]
        if top and top[0][2] in toc.get(top[0][1], ()):
            toc_top += 1
        if q["kind"] == "unanswerable":
            continue
        first = next((i for i, (_, f, p) in enumerate(top) if is_relevant(q, f, p)), None)
        if a.misses and (first is None or first >= 3):
            print(f"miss: {q['query']}  judged {q['relevant']}  got {[(f, p) for _, f, p in top[:3]]}")
        row = (1 if first is not None and first < 3 else 0, 1 / (first + 1) if first is not None else 0.0)
        for g in ("all", q["lang"], q["split"]):
            groups[g].append(row)
    print(f"plain page-level BM25 (k1 {k1}, b {b}; jieba search mode + lower-cased words) over {n} pages "
          f"of {len(DOCUMENTS)} documents")
    for g, rows in groups.items():
        if rows:
            print(f"  {g:<9} answerable {len(rows):>4}  Hit@3 {sum(r[0] for r in rows) / len(rows):.3f}  "
                  f"MRR@10 {sum(r[1] for r in rows) / len(rows):.3f}")
    print(f"  table-of-contents page ranked first: {toc_top}/{len(qs)} questions")


if __name__ == "__main__":
    main()
