#!/usr/bin/env python3
"""Dumps what each retriever said about every candidate passage, per query, for fitting fusion and
calibration offline (eval/outside/fit_fusion.py) on the outside sets.

    python3 eval/outside/evidence.py --quarry "$CARGO_TARGET_DIR/release/quarry" \
        --runs gorilla:minilm,seal-tools:minilm,locomo:minilm,domainrag:e5 \
        [--home-root ~/.cache/quarry-outside/homes] [--out ~/.cache/quarry-outside/evidence]

Per run (a set and a model) one `quarry serve` home (kept under --home-root: a second call reuses it
without embedding again), every corpus item uploaded as run.py does, then every query asked twice
through `POST /api/v1/knowledge-search` with `explain: true`, `min_score: 0`, `top_k: 50`: once in
`keyword` mode (the keyword retriever's candidates, each with its vector evidence looked up) and once
in `vector` mode (the vector retriever's, each with its keyword evidence where BM25 found it). The
union is the candidate pool any fusion of the two lists can choose from.

Besides the set's own queries, `--foreign N` queries of every unrelated set are asked of this set's
corpus (run.py's `unrelated_queries`): questions the corpus cannot answer, for the empty share at the
default threshold. Writes <out>/<set>-<model>.jsonl, one line per query:
{"id", "set", "foreign", "answerable", "relevant", "kind", "candidates": [{"item", "chunk", "evidence"}]}.
"""
import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from long_docs import Server, eprint  # noqa: E402
from run import MODELS, TOP_K, index, kb_name, load, unrelated_queries  # noqa: E402


def ask(srv, names, kb, query, mode):
    body = {"query": query, "knowledge_base_ids": [kb], "top_k": TOP_K, "min_score": 0,
            "search_mode": mode, "explain": True}
    code, out = srv.request("POST", "/api/v1/knowledge-search", body)
    if code != 200:
        raise RuntimeError(f"knowledge-search {body}: {code} {out}")
    got = []
    for r in out.get("results", []):
        fname = r.get("knowledge_filename") or Path(r.get("file") or "").name
        got.append({"item": names[kb].get(fname), "chunk": r["id"], "evidence": r.get("evidence"),
                    "score": r.get("score")})
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quarry", default=os.environ.get("QUARRY_BIN")
                    or os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "quarry"))
    ap.add_argument("--data", default=str(HERE / "data"))
    ap.add_argument("--runs", required=True, help="comma list of set:model")
    ap.add_argument("--foreign", type=int, default=100)
    ap.add_argument("--home-root", default=str(Path.home() / ".cache/quarry-outside/homes"))
    ap.add_argument("--out", default=str(Path.home() / ".cache/quarry-outside/evidence"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=7200)
    a = ap.parse_args()
    data = Path(a.data)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    for run in [r.strip() for r in a.runs.split(",") if r.strip()]:
        set_name, model = run.split(":")
        path = os.environ.get(MODELS[model][0])
        if not path:
            sys.exit(f"{MODELS[model][0]} is not set: eval \"$(bash scripts/setup-models)\"")
        corpus, queries = load(data / set_name, 0)
        queries = [dict(q, set=set_name, foreign=False) for q in queries]
        queries += [dict(q, foreign=True) for q in unrelated_queries(data, set_name, a.foreign)]
        groups = sorted({c.get("group", "") for c in corpus})
        home = Path(a.home_root) / f"{set_name}-{model}"
        names_file = home / "names.json"
        srv = Server(a.quarry, home, path)
        try:
            if names_file.is_file():
                names = json.loads(names_file.read_text())
                srv.wait_ready(a.timeout)
            else:
                names, took = index(srv, set_name, corpus, True, a.timeout)
                names_file.write_text(json.dumps(names))
                eprint(f"{run}: indexed in {took:.0f}s")
            t0 = time.monotonic()

            def one(q):
                g = q.get("group", "") if not q["foreign"] else groups[
                    int(hashlib.sha1(q["id"].encode()).hexdigest(), 16) % len(groups)]
                kb = kb_name(set_name, g)
                pool = {}
                for mode in ("keyword", "vector"):
                    for c in ask(srv, names, kb, q["query"], mode):
                        pool.setdefault(c["chunk"], c)
                return {"id": q["id"], "set": q["set"], "foreign": q["foreign"], "answerable": q["answerable"],
                        "relevant": q["relevant"], "kind": q.get("kind", ""), "query": q["query"],
                        "candidates": list(pool.values())}

            with ThreadPoolExecutor(max_workers=a.workers) as ex, \
                    open(Path(a.out) / f"{set_name}-{model}.jsonl", "w", encoding="utf-8") as f:
                for rec in ex.map(one, queries):
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            eprint(f"{run}: {len(queries)} queries in {time.monotonic() - t0:.0f}s")
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
