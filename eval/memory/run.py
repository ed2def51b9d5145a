#!/usr/bin/env python3
"""The memory benchmark (issue 44, item 5): knowledge entries with time against plain
append-only storage, with the same retrieval, through a real `quarry serve`.

Both knowledge bases get the same 322 writes of ``facts.jsonl`` (``make_facts.py``) over
QukaAI's ``/api/v1/mcp`` endpoint, in the order things happened:

- ``mem-versioned``: each write with its ``key`` and ``valid_from`` (and ``valid_to`` for a
  temporary fact), so a correction supersedes what it corrects;
- ``mem-append``: the same texts as plain notes, nothing else (what a memory without time
  keeps: every version side by side).

Then each of the 220 questions of ``questions.jsonl`` goes to ``POST /api/v1/knowledge-search``
(the same mode, ``top_k``, no score floor) on each knowledge base: the versioned one with
``as_of`` for questions about a date, the append-only one with the date in the question
("… on 2026-03-15?"), its best chance. The top result is right when it states the expected
value (word-bounded) — or, for a temporary fact whose time is over, when it states none of its
values (no result is right too).

The near-duplicate rule is measured on the 300 labelled pairs of ``pairs.jsonl``: each pair in
a knowledge base of its own, ``a`` written first, then ``b`` with ``on_duplicate: report``; the
rule said "duplicate" when the answer names ``a``.

    QUARRY_BIN=target/release/quarry python3 eval/memory/run.py [--mode keyword|hybrid]

``--mode hybrid`` needs an embedding model (``QUARRY_EVAL_MODEL``, a model directory, e.g.
``$QUARRY_TEST_MINILM`` from ``scripts/setup-models``). Writes ``results-<mode>.json`` here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent


def load(name: str) -> list[dict]:
    with open(HERE / f"{name}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary: str, model: str | None):
        self.home = Path(tempfile.mkdtemp(prefix="quarry-memory-"))
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUARRY_")}
        env.update({"QUARRY_HOME": str(self.home), "QUARRY_DATA_DIR": str(self.home / "data"),
                    "QUARRY_EMBED_MODEL": model or "none", "RUST_BACKTRACE": "1"})
        self.log = open(self.home / "serve.log", "w")
        self.proc = subprocess.Popen([binary, "serve", "--port", str(self.port)], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(300):
            try:
                if requests.get(self.base + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise SystemExit(f"quarry serve did not start; see {self.home / 'serve.log'}")

    def tool(self, kb: str, name: str, args: dict) -> dict:
        r = requests.post(self.base + "/api/v1/mcp", timeout=120, headers={"X-Resource": kb},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": name, "arguments": args}})
        if r.status_code != 200:
            raise SystemExit(f"{name} answered {r.status_code}: {r.text}")
        result = r.json()["result"]
        if result.get("isError"):
            raise SystemExit(f"{name} failed: {result['content'][0]['text']}")
        return result["structuredContent"]

    def search(self, kb: str, question: str, mode: str, as_of: str | None) -> list[dict]:
        body = {"question": question, "knowledge_base_ids": [kb], "search_mode": mode, "top_k": 5,
                "min_score": 0}
        if as_of:
            body["as_of"] = as_of
        r = requests.post(self.base + "/api/v1/knowledge-search", json=body, timeout=120)
        if r.status_code != 200:
            raise SystemExit(f"knowledge-search answered {r.status_code}: {r.text}")
        return r.json()["results"]

    def wait_embedded(self) -> None:
        """Until no file waits for conversion, indexing or embedding, and no chunk for a vector
        (superseded entries are files too: `document_count` counts the current ones only)."""
        waiting = ("queued", "converting", "indexing", "embedding")
        for _ in range(2400):
            r = requests.get(self.base + "/api/v1/knowledge-bases", timeout=30).json()
            kbs = r.get("data", r) if isinstance(r, dict) else r
            queue = requests.get(self.base + "/api/v1/queue", timeout=30).json()["data"]
            pending = (queue.get("embedding") or {}).get("chunks_pending", 0)
            if not pending and all(kb["status_counts"].get(s, 0) == 0 for kb in kbs for s in waiting):
                return
            time.sleep(0.5)
        raise SystemExit("documents were not all embedded after 20 minutes")

    def stop(self, keep: bool = False) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()
        if keep:
            print(f"kept {self.home} (serve.log) for a look", file=sys.stderr)
        else:
            shutil.rmtree(self.home, ignore_errors=True)


def states(text: str, value: str) -> bool:
    return re.search(r"(?<![\w.])" + re.escape(value) + r"(?![\w])", text) is not None


def right(question: dict, results: list[dict]) -> bool:
    top = results[0]["content"] if results else ""
    if question["answer"] is None:
        return not any(states(top, v) for v in question["stale"])
    return states(top, question["answer"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["keyword", "hybrid"], default="keyword")
    ap.add_argument("--keep", action="store_true", help="keep the server's home (printed) for a look")
    args = ap.parse_args()
    binary = os.environ.get("QUARRY_BIN") or shutil.which("quarry")
    if not binary:
        raise SystemExit("set QUARRY_BIN to a quarry binary")
    model = os.environ.get("QUARRY_EVAL_MODEL") if args.mode == "hybrid" else None
    if args.mode == "hybrid" and not model:
        raise SystemExit("--mode hybrid needs QUARRY_EVAL_MODEL (a model directory)")
    facts, questions, pairs = load("facts"), load("questions"), load("pairs")
    srv = Server(binary, model)
    ok = False
    try:
        t = time.time()
        for f in facts:
            versioned = {"content": f["content"], "key": f["key"], "valid_from": f["valid_from"]}
            if "valid_to" in f:
                versioned["valid_to"] = f["valid_to"]
            srv.tool("mem-versioned", "create_knowledge", versioned)
            srv.tool("mem-append", "create_knowledge", {"content": f["content"], "on_duplicate": "report"})
        write_s = time.time() - t
        if model:
            srv.wait_embedded()
        by_kind: dict[str, dict[str, list[bool]]] = {}
        misses: list[dict] = []
        t = time.time()
        for q in questions:
            as_of = q.get("date")
            found = srv.search("mem-versioned", q["question"], args.mode, as_of)
            v = right(q, found)
            a_question = q["question"].rstrip("?") + (f" on {as_of}?" if as_of else "?")
            a = right(q, srv.search("mem-append", a_question, args.mode, None))
            slot = by_kind.setdefault(q["kind"], {"versioned": [], "append": []})
            slot["versioned"].append(v)
            slot["append"].append(a)
            if not v:
                misses.append({**q, "top": found[0]["content"] if found else None})
        query_s = time.time() - t
        # Near-duplicate rule on labelled pairs, each in a knowledge base of its own.
        outcome = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
        per_kind: dict[str, list[bool]] = {}
        for i, p in enumerate(pairs):
            kb = f"pair-{i}"
            first = srv.tool(kb, "create_knowledge", {"content": p["a"]})
            second = srv.tool(kb, "create_knowledge", {"content": p["b"], "on_duplicate": "report"})
            said = any(d["id"] == first["id"] for d in second.get("near_duplicates", []))
            outcome[("t" if said == p["duplicate"] else "f") + ("p" if said else "n")] += 1
            per_kind.setdefault(p["kind"], []).append(said)
        ok = True
    finally:
        srv.stop(keep=args.keep or not ok)

    def acc(xs: list[bool]) -> float:
        return round(sum(xs) / len(xs), 3) if xs else 0.0

    table = {k: {"questions": len(s["versioned"]), "versioned": acc(s["versioned"]), "append_only": acc(s["append"])}
             for k, s in sorted(by_kind.items())}
    every_v = [x for s in by_kind.values() for x in s["versioned"]]
    every_a = [x for s in by_kind.values() for x in s["append"]]
    table["all"] = {"questions": len(every_v), "versioned": acc(every_v), "append_only": acc(every_a)}
    precision = outcome["tp"] / max(1, outcome["tp"] + outcome["fp"])
    recall = outcome["tp"] / max(1, outcome["tp"] + outcome["fn"])
    report = {
        "mode": args.mode,
        "model": Path(model).name if model else None,
        "facts": len(facts),
        "corrections": len(facts) - len({f["key"] for f in facts}),
        "top1_accuracy": table,
        "near_duplicates": {"pairs": len(pairs), **outcome, "precision": round(precision, 3),
                            "recall": round(recall, 3),
                            "said_duplicate_by_kind": {k: f"{sum(v)}/{len(v)}" for k, v in sorted(per_kind.items())}},
        "seconds": {"writes": round(write_s, 1), "queries": round(query_s, 1)},
        "versioned_misses": misses,
    }
    (HERE / f"results-{args.mode}.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"| question kind | questions | versioned top-1 | append-only top-1 |\n|---|---:|---:|---:|")
    for k, row in table.items():
        print(f"| {k} | {row['questions']} | {row['versioned']:.3f} | {row['append_only']:.3f} |")
    nd = report["near_duplicates"]
    print(f"\nnear-duplicate rule on {nd['pairs']} labelled pairs: precision {nd['precision']:.3f}, "
          f"recall {nd['recall']:.3f} ({nd['said_duplicate_by_kind']})")
    print(f"writes {write_s:.1f} s, queries {query_s:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
