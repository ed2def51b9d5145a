#!/usr/bin/env python3
"""Retrieval regression guard: runs `quarry eval` on the judged sets and fails when a metric
drops below its recorded baseline (eval/baseline.json) by more than noise.

    python3 eval/guard.py --quarry target/debug/quarry [--modes search] [--record]

Each set is indexed in a fresh QUARRY_HOME (or reused from --home). `--modes` picks the
modes to check (CI checks `search`, which needs no embedding model; `bench/run.sh` checks
all three with the models of bench/README.md). `--record` rewrites the baseline for the
modes run instead of checking. Noise: one query changing its outcome, i.e. a drop larger
than 1/queries (at least 0.005) fails.

`long-docs` (eval/long-docs.jsonl over the long PDFs) runs through eval/long_docs.py, i.e.
the knowledge-search REST API of a `quarry serve` (search/vsearch/query = its keyword/vector/
hybrid modes; vsearch and query need QUARRY_TEST_E5). Its metrics are passage level: Hit@3 and
MRR@10 at min_score 0 and at the default min_score, the share of answerable questions with a
result by default, of unanswerable ones with none by default, and of questions whose top
result is not a table-of-contents page; each is checked against the number of questions it
counts. The documents come from $QUARRY_TEST_DOCS (default ~/.cache/quarry-docs).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TLDR = HERE.parent.parent / "shared/corpora/tldr"
QMD = HERE.parent.parent / "shared/corpora/qmd-eval"

# set file → (index name, collection, root, mask, embedding model env var)
SETS = {
    "tldr-en": (HERE / "tldr-en.jsonl", "en", TLDR, "pages/**/*.md", "QUARRY_TEST_MINILM"),
    "tldr-en-desc": (HERE / "tldr-en-desc.jsonl", "en", TLDR, "pages/**/*.md", "QUARRY_TEST_MINILM"),
    "tldr-en-held": (HERE / "tldr-en-held.jsonl", "en", TLDR, "pages/**/*.md", "QUARRY_TEST_MINILM"),
    "tldr-zh": (HERE / "tldr-zh.jsonl", "zh", TLDR, "pages.zh/**/*.md", "QUARRY_TEST_E5"),
    "tldr-zh-desc": (HERE / "tldr-zh-desc.jsonl", "zh", TLDR, "pages.zh/**/*.md", "QUARRY_TEST_E5"),
    "zh-hard": (HERE / "zh-hard.jsonl", "zh", TLDR, "pages.zh/**/*.md", "QUARRY_TEST_E5"),
    "tldr-zh-held": (HERE / "tldr-zh-held.jsonl", "zh", TLDR, "pages.zh/**/*.md", "QUARRY_TEST_E5"),
    "qmd-queries": (QMD / "queries.jsonl", "qmd", QMD / "docs", "**/*.md", "QUARRY_TEST_MINILM"),
    "qmd-deep-research": (QMD / "deep-research.jsonl", "qmd", QMD / "docs", "**/*.md", "QUARRY_TEST_MINILM"),
}
METRICS = ["hit_at_3", "mrr_at_10", "ndcg_at_10", "recall_at_10"]
# Sets run by a script of their own instead of `quarry eval`.
LONG_DOCS = {"long-docs": HERE / "long_docs.py"}
LONG_MODES = {"search": "keyword", "vsearch": "vector", "query": "hybrid"}
LONG_METRICS = ["hit_at_3", "mrr_at_10", "hit_at_3_default", "answerable_found_default",
                "unanswerable_empty_default", "toc_not_top"]
SETS_ALL = list(SETS) + list(LONG_DOCS)


def long_docs(name, quarry, modes, home):
    """{mode: ({metric: value}, {metric: questions counted})} from eval/long_docs.py."""
    out = Path(tempfile.mkdtemp(prefix="quarry-guard-long-")) / "long-docs.json"
    cmd = [sys.executable, str(LONG_DOCS[name]), "--quarry", quarry, "--home", home, "--quiet",
           "--modes", ",".join(LONG_MODES[m] for m in modes), "--json", str(out)]
    if any(m != "search" for m in modes):
        if "QUARRY_TEST_E5" not in os.environ:
            sys.exit(f"{name}: vsearch/query need QUARRY_TEST_E5 (eval \"$(bash scripts/setup-models)\")")
        cmd += ["--model", os.environ["QUARRY_TEST_E5"]]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-4000:]}")
    summary = json.loads(out.read_text(encoding="utf-8"))["summary"]
    got = {}
    for m in modes:
        s = summary[LONG_MODES[m]]["all"]
        a, d = s["min0"], s["default"]
        vals = {"hit_at_3": a["hit_at_3"], "mrr_at_10": a["mrr_at_10"], "hit_at_3_default": d["hit_at_3"],
                "answerable_found_default": 1 - d["answerable_empty"],
                "unanswerable_empty_default": d["unanswerable_empty"], "toc_not_top": 1 - a["toc_top"]}
        n = {"unanswerable_empty_default": d["unanswerable"], "toc_not_top": a["answerable"] + a["unanswerable"]}
        got[m] = (vals, {k: n.get(k, a["answerable"]) for k in vals})
    return got


def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quarry", required=True)
    ap.add_argument("--modes", default="search")
    ap.add_argument("--sets", default=",".join(SETS_ALL))
    ap.add_argument("--home", help="data directory to keep indexes in (default: a temp dir)")
    ap.add_argument("--record", action="store_true")
    a = ap.parse_args()
    started = time.monotonic()
    modes = a.modes.split(",")
    baseline_path = HERE / "baseline.json"
    baseline = json.loads(baseline_path.read_text()) if baseline_path.exists() else {}
    home = a.home or tempfile.mkdtemp(prefix="quarry-guard-")
    env = dict(os.environ, QUARRY_HOME=home)
    failures = []
    checked = 0
    for name in a.sets.split(","):
        if name in LONG_DOCS:
            t0 = time.monotonic()
            got = long_docs(name, a.quarry, modes, str(Path(home) / name))
            for mode, (vals, counts) in got.items():
                line = "  ".join(f"{m} {vals[m]:.3f}" for m in LONG_METRICS)
                if a.record:
                    baseline.setdefault(name, {})[mode] = {m: round(vals[m], 4) for m in LONG_METRICS}
                    print(f"recorded {name:<18} {mode:<8} {line}")
                    continue
                want = baseline.get(name, {}).get(mode)
                if want is None:
                    print(f"no baseline {name} {mode}: {line}")
                    continue
                for m in LONG_METRICS:
                    checked += 1
                    noise = max(1.0 / counts[m], 0.005)
                    if vals[m] < want[m] - noise:
                        failures.append(f"{name} {mode} {m}: {vals[m]:.3f} < baseline {want[m]:.3f} (noise {noise:.3f})")
                print(f"{name:<18} {mode:<8} {line}  ({time.monotonic() - t0:.0f}s)")
            continue
        qfile, index, root, mask, model_var = SETS[name]
        if not qfile.exists() or not root.exists():
            sys.exit(f"{name}: {qfile} or {root} is missing")
        listed = run([a.quarry, "--index", index, "collection", "list", "--json"], env)
        if '"name": "eval"' not in listed:
            run([a.quarry, "--index", index, "collection", "add", str(root), "--name", "eval", "--mask", mask], env)
        menv = dict(env)
        if model_var in os.environ:
            menv["QUARRY_EMBED_MODEL"] = os.environ[model_var]
        if any(m != "search" for m in modes):
            run([a.quarry, "--index", index, "embed"], menv)
        for mode in modes:
            out = json.loads(run([a.quarry, "--index", index, "eval", str(qfile), "-c", "eval", "--mode", mode, "--json"], menv))
            got = out["modes"][mode]["overall"]
            n = out["queries"]
            line = "  ".join(f"{m} {got[m]:.3f}" for m in METRICS)
            if a.record:
                baseline.setdefault(name, {})[mode] = {m: round(got[m], 4) for m in METRICS}
                print(f"recorded {name:<18} {mode:<8} {line}")
                continue
            want = baseline.get(name, {}).get(mode)
            if want is None:
                print(f"no baseline {name} {mode}: {line}")
                continue
            noise = max(1.0 / n, 0.005)
            for m in METRICS:
                checked += 1
                if got[m] < want[m] - noise:
                    failures.append(f"{name} {mode} {m}: {got[m]:.3f} < baseline {want[m]:.3f} (noise {noise:.3f})")
            print(f"{name:<18} {mode:<8} {line}")
    if a.record:
        baseline_path.write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n")
        return
    for f in failures:
        print(f"REGRESSION {f}")
    print(f"eval guard: {checked - len(failures)} passed, {len(failures)} failed in {time.monotonic() - started:.1f}s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
