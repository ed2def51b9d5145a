#!/usr/bin/env python3
"""Validate the Quarry retrieval eval sets (stdlib only).

Checks every line of eval/tldr-en.jsonl, eval/tldr-zh.jsonl and their held-out companions
eval/tldr-en-held.jsonl and eval/tldr-zh-held.jsonl:
  * is a valid JSON object
  * has "query" (non-empty string), "relevant" (non-empty list of strings,
    1-3 entries, no duplicates) and "kind" (keyword | question | paraphrase)
  * every relevant path is relative, exists as a file under --corpus,
    and lives under pages/ (English set) or pages.zh/ (Chinese set)
  * no query appears twice (across these files, after whitespace/case folding)

Also checks eval/long-docs.jsonl (questions over long documents, see eval/README.md):
  * "query", "lang" (en | zh), "kind" (question | paraphrase | keyword | unanswerable),
    "relevant" (empty exactly when kind is unanswerable), "split" (fit | held-out)
  * every relevant entry names an existing file under --docs with 1-3 pages (none for a
    file without pages, e.g. HTML), each within the PDF's page count (pdfinfo), never a
    table-of-contents page listed in eval/long-docs-toc.json, no duplicates
  * no query appears twice

Usage:  python3 eval/check.py [--corpus DIR] [--docs DIR] [FILE ...]
Default corpus: ../shared/corpora/tldr relative to the repo root; default documents:
$QUARRY_TEST_DOCS or ~/.cache/quarry-docs (../shared/corpora/documents/fetch.sh). The
long-docs check is skipped with a note when the documents are not there.
Exits 0 when everything is valid, 1 otherwise (with one message per problem).
"""
import argparse
import json
import re
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "corpora", "tldr"))
DEFAULT_FILES = {
    os.path.join(HERE, "tldr-en.jsonl"): "pages/",
    os.path.join(HERE, "tldr-zh.jsonl"): "pages.zh/",
    os.path.join(HERE, "tldr-en-held.jsonl"): "pages/",
    os.path.join(HERE, "tldr-zh-held.jsonl"): "pages.zh/",
}
KINDS = {"keyword", "question", "paraphrase"}
MAX_RELEVANT = 3
LONG_DOCS = os.path.join(HERE, "long-docs.jsonl")
LONG_TOC = os.path.join(HERE, "long-docs-toc.json")
LONG_KINDS = {"keyword", "question", "paraphrase", "unanswerable"}
DEFAULT_DOCS = os.environ.get("QUARRY_TEST_DOCS") or os.path.expanduser("~/.cache/quarry-docs")


def pdf_pages(path, cache={}):
    """Page count of a PDF by pdfinfo (poppler-utils), cached; None when it cannot be read."""
    if path not in cache:
        import subprocess
        try:
            out = subprocess.run(["pdfinfo", path], capture_output=True, text=True, check=True).stdout
            m = re.search(r"^Pages:\s+(\d+)", out, re.M)
            cache[path] = int(m.group(1)) if m else None
        except (OSError, subprocess.CalledProcessError):
            cache[path] = None
    return cache[path]


def check_long_docs(path, docs, seen, errors):
    """Validates the long-document set; returns (queries, counts per kind/lang/split)."""
    import shutil
    if not shutil.which("pdfinfo"):
        errors.append(f"{path}: pdfinfo not found; install poppler-utils to check page ranges")
        return 0, {}
    toc = {}
    try:
        toc = {k: set(v) for k, v in json.load(open(LONG_TOC, encoding="utf-8")).items() if not k.startswith("_")}
    except (OSError, ValueError) as e:
        errors.append(f"{LONG_TOC}: cannot read: {e}")
    counts, n = {}, 0
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        errors.append(f"{path}: cannot open: {e}")
        return 0, counts
    for lineno, line in enumerate(lines, 1):
        where = f"{os.path.relpath(path)}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{where}: invalid JSON: {e}")
            continue
        if not isinstance(obj, dict):
            errors.append(f"{where}: expected a JSON object")
            continue
        n += 1
        extra = set(obj) - {"query", "lang", "kind", "relevant", "split"}
        if extra:
            errors.append(f"{where}: unexpected field(s): {sorted(extra)}")
        query = obj.get("query")
        if not isinstance(query, str) or not query.strip():
            errors.append(f"{where}: missing or empty 'query'")
        else:
            key = " ".join(query.split()).casefold()
            if key in seen:
                errors.append(f"{where}: duplicate query {query!r} (first at {seen[key]})")
            else:
                seen[key] = where
        kind, lang, split = obj.get("kind"), obj.get("lang"), obj.get("split")
        if kind not in LONG_KINDS:
            errors.append(f"{where}: 'kind' must be one of {sorted(LONG_KINDS)}, got {kind!r}")
        if lang not in ("en", "zh"):
            errors.append(f"{where}: 'lang' must be en or zh, got {lang!r}")
        if split not in ("fit", "held-out"):
            errors.append(f"{where}: 'split' must be fit or held-out, got {split!r}")
        for k in (kind, f"lang={lang}", f"split={split}"):
            counts[k] = counts.get(k, 0) + 1
        rel = obj.get("relevant")
        if not isinstance(rel, list):
            errors.append(f"{where}: 'relevant' must be a list")
            continue
        if (kind == "unanswerable") != (not rel):
            errors.append(f"{where}: 'relevant' must be empty exactly when kind is unanswerable")
        files = set()
        for r in rel:
            if not isinstance(r, dict) or not isinstance(r.get("file"), str) or not isinstance(r.get("pages"), list):
                errors.append(f"{where}: relevant entry {r!r} must be {{\"file\": str, \"pages\": [int]}}")
                continue
            f, pages = r["file"], r["pages"]
            if f in files:
                errors.append(f"{where}: file {f} listed twice")
            files.add(f)
            if os.path.isabs(f) or ".." in f.split("/"):
                errors.append(f"{where}: file {f!r} must be relative to the documents folder")
                continue
            full = os.path.join(docs, f)
            if not os.path.isfile(full):
                errors.append(f"{where}: file does not exist: {full}")
                continue
            if len(pages) != len(set(pages)):
                errors.append(f"{where}: duplicate pages for {f}")
            if not f.endswith(".pdf"):
                if pages:
                    errors.append(f"{where}: {f} has no pages; list none (the file as a whole is judged)")
                continue
            if not 1 <= len(pages) <= MAX_RELEVANT:
                errors.append(f"{where}: {f}: 1-{MAX_RELEVANT} pages expected, got {len(pages)}")
            total = pdf_pages(full)
            if total is None:
                errors.append(f"{where}: cannot count the pages of {full}")
                continue
            for p in pages:
                if not isinstance(p, int) or not 1 <= p <= total:
                    errors.append(f"{where}: page {p!r} outside 1..{total} of {f}")
                elif p in toc.get(f, ()):
                    errors.append(f"{where}: page {p} of {f} is a table-of-contents page")
    return n, counts


def check_file(path, corpus, prefix, seen, errors):
    counts = {}
    n = 0
    try:
        fh = open(path, encoding="utf-8")
    except OSError as e:
        errors.append(f"{path}: cannot open: {e}")
        return 0, counts
    with fh:
        for lineno, line in enumerate(fh, 1):
            where = f"{os.path.relpath(path)}:{lineno}"
            if not line.strip():
                errors.append(f"{where}: blank line")
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                errors.append(f"{where}: invalid JSON: {e}")
                continue
            if not isinstance(obj, dict):
                errors.append(f"{where}: expected a JSON object")
                continue
            n += 1
            extra = set(obj) - {"query", "relevant", "kind"}
            if extra:
                errors.append(f"{where}: unexpected field(s): {sorted(extra)}")

            query = obj.get("query")
            if not isinstance(query, str) or not query.strip():
                errors.append(f"{where}: missing or empty 'query'")
            else:
                key = " ".join(query.split()).casefold()
                if key in seen:
                    errors.append(f"{where}: duplicate query {query!r} (first at {seen[key]})")
                else:
                    seen[key] = where

            kind = obj.get("kind")
            if kind not in KINDS:
                errors.append(f"{where}: 'kind' must be one of {sorted(KINDS)}, got {kind!r}")
            else:
                counts[kind] = counts.get(kind, 0) + 1

            rel = obj.get("relevant")
            if not isinstance(rel, list) or not rel:
                errors.append(f"{where}: 'relevant' must be a non-empty list")
                continue
            if len(rel) > MAX_RELEVANT:
                errors.append(f"{where}: 'relevant' has {len(rel)} entries (max {MAX_RELEVANT})")
            if len(set(map(str, rel))) != len(rel):
                errors.append(f"{where}: duplicate paths in 'relevant'")
            for p in rel:
                if not isinstance(p, str) or not p:
                    errors.append(f"{where}: relevant entry {p!r} is not a non-empty string")
                    continue
                if os.path.isabs(p) or ".." in p.split("/"):
                    errors.append(f"{where}: relevant path {p!r} must be relative to the corpus root")
                    continue
                if prefix and not p.startswith(prefix):
                    errors.append(f"{where}: relevant path {p!r} should be under {prefix}")
                if not os.path.isfile(os.path.join(corpus, p)):
                    errors.append(f"{where}: relevant path does not exist: {p}")
    return n, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS,
                    help="tldr corpus root (default: %(default)s)")
    ap.add_argument("--docs", default=DEFAULT_DOCS,
                    help="documents folder of eval/long-docs.jsonl (default: %(default)s)")
    ap.add_argument("files", nargs="*",
                    help="JSONL files to check (default: the tldr sets named above)")
    args = ap.parse_args()

    if not os.path.isdir(args.corpus):
        print(f"error: corpus directory not found: {args.corpus}", file=sys.stderr)
        return 1
    if args.files:
        files = {f: ("pages.zh/" if "-zh" in os.path.basename(f) else "pages/") for f in args.files}
    else:
        files = DEFAULT_FILES

    errors, seen = [], {}
    long_files = [f for f in files if "long-docs" in os.path.basename(f)]
    files = {f: p for f, p in files.items() if f not in long_files}
    if not args.files:
        if os.path.isdir(args.docs):
            long_files = [LONG_DOCS]
        else:
            print(f"note: {args.docs} not found, eval/long-docs.jsonl not checked "
                  "(run ../shared/corpora/documents/fetch.sh or pass --docs)")
    for path in long_files:
        n, counts = check_long_docs(path, args.docs, {}, errors)
        summary = ", ".join(f"{k}={counts[k]}" for k in sorted(counts))
        print(f"{os.path.relpath(path)}: {n} queries ({summary})")
    for path, prefix in files.items():
        n, counts = check_file(path, args.corpus, prefix, seen, errors)
        summary = ", ".join(f"{k}={counts[k]}" for k in sorted(counts))
        print(f"{os.path.relpath(path)}: {n} queries ({summary})")

    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        print(f"FAILED: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
