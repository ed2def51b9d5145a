#!/usr/bin/env python3
"""Validate the Quarry retrieval eval sets (stdlib only).

Checks every line of eval/tldr-en.jsonl and eval/tldr-zh.jsonl:
  * is a valid JSON object
  * has "query" (non-empty string), "relevant" (non-empty list of strings,
    1-3 entries, no duplicates) and "kind" (keyword | question | paraphrase)
  * every relevant path is relative, exists as a file under --corpus,
    and lives under pages/ (English set) or pages.zh/ (Chinese set)
  * no query appears twice (across both files, after whitespace/case folding)

Usage:  python3 eval/check.py [--corpus DIR] [FILE ...]
Default corpus: ../shared/corpora/tldr relative to the repo root.
Exits 0 when everything is valid, 1 otherwise (with one message per problem).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "corpora", "tldr"))
DEFAULT_FILES = {
    os.path.join(HERE, "tldr-en.jsonl"): "pages/",
    os.path.join(HERE, "tldr-zh.jsonl"): "pages.zh/",
}
KINDS = {"keyword", "question", "paraphrase"}
MAX_RELEVANT = 3


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
    ap.add_argument("files", nargs="*",
                    help="JSONL files to check (default: eval/tldr-en.jsonl eval/tldr-zh.jsonl)")
    args = ap.parse_args()

    if not os.path.isdir(args.corpus):
        print(f"error: corpus directory not found: {args.corpus}", file=sys.stderr)
        return 1
    if args.files:
        files = {f: ("pages.zh/" if "-zh" in os.path.basename(f) else "pages/") for f in args.files}
    else:
        files = DEFAULT_FILES

    errors, seen = [], {}
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
