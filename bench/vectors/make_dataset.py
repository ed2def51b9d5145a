#!/usr/bin/env python3
"""Real embeddings of real text for the vector-recall benches (issue 46, item 1).

Embeds every distinct passage of the tldr pages in the shared corpora (English and Chinese):
each page's description, each example's description, each example's command, and each example
as description + command (the way a chunk of that page would read), with all-MiniLM-L6-v2,
normalised. A passage's page is its "document". Queries are held out: the questions of
eval/*.jsonl (never stored as passages), shuffled with a fixed seed.

Writes, under the output directory (default ~/.cache/quarry-bench/vectors):
  tldr-minilm.f32   little-endian f32, `count` corpus vectors then `queries` query vectors,
                    `dims` values each, L2-normalised
  tldr-minilm.json  {"count", "queries", "dims", "model", "documents": [document index per
                    corpus vector], "document_names": [...], "source"}
  tldr-minilm.docs  the same document indexes as little-endian u32 (for readers without JSON)
Corpus vectors are ordered by document (a page's passages are consecutive, as a store's chunk
ids would be).

Run:  source /tmp/models.env   # from `bash scripts/setup-models`
      ~/.cache/quarry-models-venv/bin/python bench/vectors/make_dataset.py
Options: --out DIR, --corpora DIR (default ../shared/corpora from the repository root),
--model DIR (default $QUARRY_TEST_MINILM), --batch N, --limit N (first N passages, for a quick
check). A second run with the same inputs does nothing.
"""

import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "tldr-minilm"


def page_passages(text):
    """The passages of one tldr page, in page order."""
    out = []
    desc = []
    example = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("> "):
            body = line[2:].strip()
            # "More information: <url>" says nothing about the command.
            if "<http" not in body:
                desc.append(body)
        elif line.startswith("- "):
            example = line[2:].strip().rstrip(":：").strip()
            if example:
                out.append(example)
        elif line.startswith("`") and line.endswith("`") and len(line) > 2:
            command = line[1:-1].strip()
            if command:
                out.append(command)
                if example:
                    out.append(f"{example}: {command}")
            example = None
    if desc:
        out.insert(0, " ".join(desc))
    return out


def corpus(corpora):
    """(document name, passage) pairs, each passage once (its first page keeps it)."""
    seen = set()
    pairs = []
    tldr = corpora / "tldr"
    for lang in ("pages", "pages.zh"):
        for path in sorted((tldr / lang).rglob("*.md")):
            name = str(path.relative_to(tldr))
            for p in page_passages(path.read_text(encoding="utf-8", errors="replace")):
                p = re.sub(r"\s+", " ", p)
                if len(p) < 3 or p in seen:
                    continue
                seen.add(p)
                pairs.append((name, p))
    return pairs, seen


def held_out_queries(stored):
    queries = []
    seen = set()
    for path in sorted((ROOT / "eval").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            q = json.loads(line).get("query", "").strip()
            if q and q not in stored and q not in seen:
                seen.add(q)
                queries.append(q)
    random.Random(46).shuffle(queries)
    return queries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/quarry-bench/vectors"))
    ap.add_argument("--corpora", default=str(ROOT.parent / "shared" / "corpora"))
    ap.add_argument("--model", default=os.environ.get("QUARRY_TEST_MINILM"))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    if not args.model:
        sys.exit("no model: source /tmp/models.env (bash scripts/setup-models) or pass --model")

    pairs, stored = corpus(Path(args.corpora))
    if args.limit:
        pairs = pairs[: args.limit]
    queries = held_out_queries(stored)
    names = sorted({n for n, _ in pairs})
    index = {n: i for i, n in enumerate(names)}
    # Stable order: by document, then page order (pairs is already in that order).
    texts = [p for _, p in pairs] + queries
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta_path, data_path = out / f"{NAME}.json", out / f"{NAME}.f32"
    docs_path = out / f"{NAME}.docs"
    import array
    docs = array.array("I", [index[n] for n, _ in pairs])
    if sys.byteorder != "little":
        docs.byteswap()
    docs_path.write_bytes(docs.tobytes())
    if meta_path.exists() and data_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("source_sha256_16") == digest:
            print(f"{data_path}: up to date ({meta['count']} vectors, {meta['queries']} queries)")
            return

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(os.cpu_count() or 1)
    model = SentenceTransformer(args.model, device="cpu")
    print(f"embedding {len(pairs)} passages from {len(names)} pages and {len(queries)} queries…",
          file=sys.stderr)
    t = time.time()
    # Embedding in length order keeps padding (and time) down; the order is restored after.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vecs = model.encode([texts[i] for i in order], batch_size=args.batch,
                        normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=sys.stderr.isatty())
    full = np.empty_like(vecs)
    full[np.array(order)] = vecs
    full = full.astype("<f4")
    seconds = time.time() - t
    tmp = data_path.with_suffix(".f32.tmp")
    full.tofile(tmp)
    os.replace(tmp, data_path)
    meta = {
        "count": len(pairs),
        "queries": len(queries),
        "dims": int(full.shape[1]),
        "model": "all-MiniLM-L6-v2",
        "source": "tldr pages (en + zh): page descriptions, example descriptions, commands, "
                  "description + command; queries: eval/*.jsonl, held out",
        "source_sha256_16": digest,
        "embed_seconds": round(seconds, 1),
        "documents": [index[n] for n, _ in pairs],
        "document_names": names,
    }
    meta_path.write_text(json.dumps(meta))
    print(f"{data_path}: {len(pairs)} vectors + {len(queries)} queries of {full.shape[1]} "
          f"dimensions in {seconds:.0f} s")


if __name__ == "__main__":
    main()
