#!/usr/bin/env python3
"""Builds the description→page eval sets from the tldr corpus (stdlib only, deterministic).

Each query is the text of one example description of a page ("- 创建存档并将其写入文件：" →
`创建存档并将其写入文件`), judged relevant to that page only. Descriptions that occur on more
than one page ("显示帮助") are skipped: they have no single right answer. One query per sampled
page; pages are sampled with a fixed seed so the sets are stable.

    python3 eval/make_desc_sets.py [--corpus ../shared/corpora/tldr] [--per-set 300]

writes eval/tldr-zh-desc.jsonl and eval/tldr-en-desc.jsonl.
"""
import argparse
import json
import random
import re
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def examples(page: Path):
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("- "):
            text = line[2:].strip().rstrip(":：").strip()
            # Descriptions are tasks; placeholders and links carry no words of the task.
            text = re.sub(r"\s+", " ", re.sub(r"\[(\w+)\]", r"\1", text))
            if len(text) >= 4:
                yield text


def build(corpus: Path, sub: str, n: int, seed: int):
    pages = sorted(p for p in (corpus / sub).rglob("*.md"))
    where = defaultdict(set)
    per_page = {}
    for p in pages:
        rel = p.relative_to(corpus).as_posix()
        ex = list(dict.fromkeys(examples(p)))
        per_page[rel] = ex
        for e in ex:
            where[e].add(rel)
    rng = random.Random(seed)
    rels = sorted(per_page)
    rng.shuffle(rels)
    out = []
    for rel in rels:
        unique = [e for e in per_page[rel] if len(where[e]) == 1]
        if not unique:
            continue
        out.append({"query": rng.choice(unique), "relevant": [rel], "kind": "description"})
        if len(out) == n:
            break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/tldr"))
    ap.add_argument("--per-set", type=int, default=300)
    a = ap.parse_args()
    corpus = Path(a.corpus)
    for name, sub, seed in [("tldr-zh-desc", "pages.zh", 8), ("tldr-en-desc", "pages", 9)]:
        rows = build(corpus, sub, a.per_set, seed)
        with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"{name}: {len(rows)} queries")


if __name__ == "__main__":
    main()
