#!/usr/bin/env python3
"""Quarry's knowledge search on long real documents (eval/long-docs.jsonl), passage level.

    python3 eval/long_docs.py --quarry target/debug/quarry [--modes keyword,vector,hybrid]
        [--model ~/.cache/quarry-models/multilingual-e5-small] [--home DIR] [--json OUT]

Starts `quarry serve` on a loopback port over a fresh QUARRY_HOME (or --home, kept, so a
rerun skips uploading and embedding), creates the knowledge base `longdocs`, uploads the
documents of DOCUMENTS through the REST API and waits until each is `ready` (and, for the
vector and hybrid modes, until nothing needs embedding). Then every question of the set is
asked through `POST /api/v1/knowledge-search` (seed 000: query, knowledge_base_ids,
search_mode, top_k 10) twice per mode: with `min_score` 0 and with the server's default
(`min_score` omitted). Only documented REST surfaces are used, so any later binary works.

A result is relevant when its file and `page` match a judged file/page; a result without a
page counts only for a judged file without pages (HTML). Reported per mode, overall and per
split (fit / held-out) and language: Hit@3 and MRR@10 at min_score 0 and at the default, the
share of answerable questions with no result by default, the share of unanswerable questions
with no result by default (target >= 0.9), how often a table-of-contents page
(eval/long-docs-toc.json) is the top result, a calibration table (score band -> share of the
top-10 results in it that are relevant, all questions including unanswerable) and the score
spread of the same passage (file, page, id) across modes. `--json OUT` writes the summary and
every result list (query, mode, min_score, results with id/file/page/score/match_type) so the
calibration can be refitted from it.

Stdlib only. The documents come from ../shared/corpora/documents/fetch.sh (default
$QUARRY_TEST_DOCS or ~/.cache/quarry-docs).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
SET = HERE / "long-docs.jsonl"
TOC = HERE / "long-docs-toc.json"
KB = "longdocs"
MODES = ("keyword", "vector", "hybrid")
# The knowledge base: every document the set judges, plus the DMCA summary and two HTML pages
# as realistic neighbours. fhs-3.0.html and the Debian chapter-1 HTML are left out on purpose:
# they repeat the PDFs, and a copy of the answer in another file would be judged a miss.
DOCUMENTS = [
    "pdf/en-fhs-3.0.pdf",
    "pdf/zh-debian-reference.zh-cn.pdf",
    "pdf/en-irs-i1040nr-2007.pdf",
    "pdf/en-naacl06-shinyama.pdf",
    "pdf/en-tracemonkey-pldi09.pdf",
    "pdf/en-dmca-summary-1998.pdf",
    "html/git-gittutorial.html",
    "html/debian-policy-ch-controlfields.html",
]
# Variables that would give the server a model from the caller's environment.
MODEL_VARS = ("QUARRY_EMBED_MODEL", "QUARRY_RERANK_MODEL", "QUARRY_EXPAND_MODEL", "QUARRY_OPENAI_BASE_URL",
              "QUARRY_OPENAI_API_KEY", "QUARRY_RERANK_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY",
              "QUARRY_CHAT_MODEL", "QUARRY_CHAT_BASE_URL", "QUARRY_CHAT_API_KEY")
BANDS = [i / 10 for i in range(10)]


def default_docs():
    return os.environ.get("QUARRY_TEST_DOCS") or os.path.expanduser("~/.cache/quarry-docs")


def load_set(path=SET):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def load_toc(path=TOC):
    return {k: set(v) for k, v in json.load(open(path, encoding="utf-8")).items() if not k.startswith("_")}


def is_relevant(q, file, page):
    """Right file and one of its judged pages; a file judged without pages matches as a whole."""
    for r in q["relevant"]:
        if r["file"] == file:
            return page in r["pages"] if r["pages"] else True
    return False


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)


class Server:
    """`quarry serve` on a free loopback port; the loopback owner needs no token."""

    def __init__(self, quarry, home, model):
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in MODEL_VARS}
        env.update(QUARRY_HOME=str(self.home), HF_HUB_OFFLINE="1")
        if model:
            env["QUARRY_EMBED_MODEL"] = str(model)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(self.home / "long-docs-serve.log", "ab")
        self.proc = subprocess.Popen([str(quarry), "serve", "--port", str(self.port)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"quarry serve exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if self.request("GET", "/health", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        sys.exit(f"quarry serve did not answer /health within 60 s; see {self.log.name}")

    def wait_ready(self, timeout=3600):
        """Until the node's indexes are built and caught up (`/health/ready`): a home made by
        an older analyzer is re-indexed from its store when the server starts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code, body = self.request("GET", "/health/ready", timeout=10)
            if code == 200 and body.get("caught_up"):
                return
            time.sleep(1)
        sys.exit(f"quarry serve was not ready within {timeout} s; see {self.log.name}")

    def request(self, method, path, body=None, headers=None, timeout=120):
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        h = {"Content-Type": "application/json"} if isinstance(body, (dict, list)) else {}
        h.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"detail": raw.decode(errors="replace")}

    def upload(self, path):
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{path.name}\"\r\n"
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
        return self.request("POST", f"/api/v1/knowledge-bases/{KB}/documents", body,
                            {"Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout=300)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def index(srv, docs_dir, want_vectors, timeout):
    """Creates the knowledge base, uploads what is missing, waits for ready (and embedded)."""
    started = time.monotonic()
    code, _ = srv.request("GET", f"/api/v1/knowledge-bases/{KB}")
    if code == 404:
        code, body = srv.request("POST", "/api/v1/knowledge-bases", {"name": KB})
        if code not in (200, 201):
            sys.exit(f"creating knowledge base {KB}: {code} {body}")
    code, body = srv.request("GET", f"/api/v1/knowledge-bases/{KB}/documents")
    if code != 200:
        sys.exit(f"listing documents: {code} {body}")
    have = {d.get("file_name") for d in body.get("data", [])}
    for rel in DOCUMENTS:
        path = Path(docs_dir) / rel
        if path.name in have:
            continue
        if not path.is_file():
            sys.exit(f"{path} is missing: run ../shared/corpora/documents/fetch.sh or pass --docs")
        code, body = srv.upload(path)
        if code not in (200, 201, 202):
            sys.exit(f"uploading {rel}: {code} {body}")
        eprint(f"uploaded {rel}")
    last = None
    while True:
        code, body = srv.request("GET", f"/api/v1/knowledge-bases/{KB}/documents")
        docs = body.get("data", []) if code == 200 else []
        by = {}
        for d in docs:
            by.setdefault(d.get("status"), []).append(d.get("file_name"))
        line = "  ".join(f"{k} {len(v)}" for k, v in sorted(by.items(), key=lambda kv: str(kv[0])))
        pending = len(docs) - len(by.get("ready", [])) - len(by.get("failed", []))
        status = {}
        if not pending and want_vectors:
            code, status = srv.request("GET", "/status")
            need = status.get("needsEmbedding", status.get("needs_embedding", 0)) if code == 200 else 0
            line += f"  needs embedding {need}"
            pending = need
        if line != last:
            eprint(f"[{time.monotonic() - started:6.0f}s] {line}")
            last = line
        if not pending and len(docs) >= len(DOCUMENTS):
            break
        if time.monotonic() - started > timeout:
            sys.exit(f"documents not ready after {timeout} s: {line}")
        time.sleep(2)
    for d in docs:
        if d.get("status") == "failed":
            eprint(f"warning: {d.get('file_name')} failed: {d.get('error')}")
    return time.monotonic() - started


def run_queries(srv, qs, modes, top_k, workers):
    """Every question, per mode, at min_score 0 and at the default; `workers` requests at once."""
    from concurrent.futures import ThreadPoolExecutor
    base = {p.name: p.as_posix() for p in map(Path, DOCUMENTS)}

    def ask(task):
        mode, q, min_score = task
        body = {"query": q["query"], "knowledge_base_ids": [KB], "search_mode": mode, "top_k": top_k}
        if min_score is not None:
            body["min_score"] = min_score
        t0 = time.perf_counter()
        code, out = srv.request("POST", "/api/v1/knowledge-search", body)
        took = time.perf_counter() - t0
        if code != 200:
            raise RuntimeError(f"knowledge-search {mode} {q['query']!r}: {code} {out}")
        results = []
        for r in out.get("results", [])[:top_k]:
            name = r.get("knowledge_filename") or Path(r.get("file") or "").name
            results.append({"id": r.get("id"), "file": base.get(name, name), "page": r.get("page"),
                            "score": r.get("score"), "match_type": r.get("match_type")})
        return {"query": q["query"], "lang": q["lang"], "kind": q["kind"], "split": q["split"],
                "mode": mode, "min_score": min_score, "results": results, "seconds": took}

    runs = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for mode in modes:
            t0 = time.monotonic()
            try:
                runs += pool.map(ask, [(mode, q, ms) for q in qs for ms in (0, None)])
            except RuntimeError as e:
                sys.exit(str(e))
            latencies = sorted(r["seconds"] for r in runs if r["mode"] == mode)
            pct = lambda p: 1000 * latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))]
            eprint(f"{mode}: {len(qs)} questions in {time.monotonic() - t0:.1f}s; per request "
                   f"p50 {pct(50):.1f} ms, p99 {pct(99):.1f} ms ({workers} in flight)")
    return runs


def ratio(a, b):
    return a / b if b else None


def summarize(qs, runs, toc):
    """Figures per mode and min_score, for all questions and per split and language."""
    by_query = {q["query"]: q for q in qs}
    out = {}
    groups = {"all": lambda q: True, "fit": lambda q: q["split"] == "fit", "held-out": lambda q: q["split"] == "held-out",
              "en": lambda q: q["lang"] == "en", "zh": lambda q: q["lang"] == "zh"}
    modes = sorted({r["mode"] for r in runs}, key=MODES.index)
    for mode in modes:
        m = out.setdefault(mode, {})
        for gname, pred in groups.items():
            g = {}
            for label, ms in (("min0", 0), ("default", None)):
                rs = [r for r in runs if r["mode"] == mode and r["min_score"] == ms and pred(by_query[r["query"]])]
                ans = [r for r in rs if r["kind"] != "unanswerable"]
                una = [r for r in rs if r["kind"] == "unanswerable"]
                hit3 = mrr = empty = toc_top = doc3 = 0
                for r in ans:
                    q = by_query[r["query"]]
                    files = {x["file"] for x in q["relevant"]}
                    doc3 += any(x["file"] in files for x in r["results"][:3])
                    flags = [is_relevant(q, x["file"], x["page"]) for x in r["results"][:10]]
                    first = next((i for i, f in enumerate(flags) if f), None)
                    hit3 += first is not None and first < 3
                    mrr += 1 / (first + 1) if first is not None else 0
                    empty += not r["results"]
                for r in rs:
                    if r["results"] and r["results"][0]["page"] in toc.get(r["results"][0]["file"], ()):
                        toc_top += 1
                g[label] = {"answerable": len(ans), "unanswerable": len(una),
                            "hit_at_3": ratio(hit3, len(ans)), "mrr_at_10": ratio(mrr, len(ans)),
                            "doc_hit_at_3": ratio(doc3, len(ans)),
                            "answerable_empty": ratio(empty, len(ans)),
                            "unanswerable_empty": ratio(sum(not r["results"] for r in una), len(una)),
                            "toc_top": ratio(toc_top, len(rs))}
            # calibration: top-10 results at min_score 0, every question
            bands = [[0, 0] for _ in BANDS]
            for r in runs:
                if r["mode"] != mode or r["min_score"] != 0 or not pred(by_query[r["query"]]):
                    continue
                q = by_query[r["query"]]
                for x in r["results"][:10]:
                    s = x["score"] or 0.0
                    b = min(int(s * 10), 9)
                    bands[b][0] += 1
                    bands[b][1] += is_relevant(q, x["file"], x["page"])
            g["calibration"] = [{"band": f"{lo:.1f}-{lo + 0.1:.1f}", "results": n, "relevant": rel,
                                 "share": ratio(rel, n)} for lo, (n, rel) in zip(BANDS, bands)]
            hi = [b for b in bands[8:]]
            g["share_relevant_at_0_8"] = ratio(sum(b[1] for b in hi), sum(b[0] for b in hi))
            m[gname] = g
    # the same passage (file, page, id) for the same question, found by two or more modes
    spread = {}
    for gname, pred in groups.items():
        seen = {}
        for r in runs:
            if r["min_score"] != 0 or not pred(by_query[r["query"]]):
                continue
            for x in r["results"]:
                seen.setdefault((r["query"], x["file"], x["page"], x["id"]), {})[r["mode"]] = x["score"] or 0.0
        pairs = {}
        for scores in seen.values():
            ms = sorted(scores, key=MODES.index)
            for i in range(len(ms)):
                for j in range(i + 1, len(ms)):
                    pairs.setdefault(f"{ms[i]}/{ms[j]}", []).append(abs(scores[ms[i]] - scores[ms[j]]))
        spread[gname] = {k: {"passages": len(v), "within_0_15": ratio(sum(d <= 0.15 for d in v), len(v)),
                             "median": sorted(v)[len(v) // 2]} for k, v in pairs.items()}
    out["_spread"] = spread
    return out


def fmt(v):
    return "   -  " if v is None else f"{v:6.3f}"


def report(summary, modes):
    print("passage level (right file and page), top_k 10; 'min0' = min_score 0, 'default' = min_score omitted;\n"
          "doc@3 = the right file among the top 3 whatever the page; toc@1 = a contents page ranked first")
    print(f"{'mode':<8} {'group':<9} {'n':>4} | {'Hit@3':>6} {'MRR@10':>6} {'doc@3':>6} {'toc@1':>6} | "
          f"{'Hit@3':>6} {'MRR@10':>6} {'empty':>6} {'unans∅':>6} {'toc@1':>6}   (min0 | default)")
    for mode in modes:
        for g in ("all", "fit", "held-out", "en", "zh"):
            a, d = summary[mode][g]["min0"], summary[mode][g]["default"]
            print(f"{mode:<8} {g:<9} {a['answerable']:>4} | {fmt(a['hit_at_3'])} {fmt(a['mrr_at_10'])} {fmt(a['doc_hit_at_3'])} {fmt(a['toc_top'])} | "
                  f"{fmt(d['hit_at_3'])} {fmt(d['mrr_at_10'])} {fmt(d['answerable_empty'])} "
                  f"{fmt(d['unanswerable_empty'])} {fmt(d['toc_top'])}")
    print("\ncalibration: score band -> share of top-10 results (min_score 0, all questions incl. unanswerable) "
          "judged relevant (results in band)")
    for mode in modes:
        for g in ("fit", "held-out"):
            cells = "  ".join(f"{c['band']} " + ("   -      " if c["share"] is None else f"{c['share']:.2f} ({c['results']:>4})")
                              for c in summary[mode][g]["calibration"])
            print(f"{mode:<8} {g:<9} {cells}")
    sp = summary["_spread"]["all"]
    if sp:
        print("\nsame passage (file, page, id) for the same question, found by two modes at min_score 0:")
        for k, v in sp.items():
            print(f"  {k:<15} passages {v['passages']:>4}  |Δscore| <= 0.15: {fmt(v['within_0_15'])}  median {v['median']:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quarry", default=os.environ.get("QUARRY_BIN", "target/debug/quarry"))
    ap.add_argument("--set", default=str(SET))
    ap.add_argument("--docs", default=default_docs())
    ap.add_argument("--home", help="data directory to keep the index in (default: a temp dir, removed)")
    ap.add_argument("--model", help="embedding model for vector/hybrid (QUARRY_EMBED_MODEL), e.g. "
                    "~/.cache/quarry-models/multilingual-e5-small")
    ap.add_argument("--modes", default="keyword,vector,hybrid")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4, help="requests in flight at once (default %(default)s)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds to wait for indexing/embedding")
    ap.add_argument("--json", help="write the summary and every result list here")
    ap.add_argument("--quiet", action="store_true", help="no tables on stdout (for guard.py)")
    a = ap.parse_args()
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        sys.exit(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    if not Path(a.quarry).is_file():
        sys.exit(f"quarry binary not found: {a.quarry}")
    want_vectors = any(m != "keyword" for m in modes)
    if want_vectors and not a.model and not a.home:
        sys.exit("vector and hybrid need an embedding model: pass --model DIR (or --home of an index "
                 "embedded before), or --modes keyword")
    qs = load_set(a.set)
    toc = load_toc()
    tmp = None
    home = a.home
    if not home:
        tmp = tempfile.TemporaryDirectory(prefix="quarry-long-docs-")
        home = tmp.name
    srv = Server(a.quarry, home, os.path.expanduser(a.model) if a.model else None)
    try:
        took = index(srv, a.docs, want_vectors, a.timeout)
        eprint(f"indexed in {took:.1f}s ({home})")
        runs = run_queries(srv, qs, modes, a.top_k, a.workers)
    finally:
        srv.stop()
        if tmp:
            tmp.cleanup()
    summary = summarize(qs, runs, toc)
    if not a.quiet:
        report(summary, modes)
    if a.json:
        Path(a.json).write_text(json.dumps({"set": str(a.set), "modes": modes, "model": a.model, "index_seconds": took,
                                            "summary": summary, "runs": runs}, ensure_ascii=False, indent=1) + "\n",
                                encoding="utf-8")


if __name__ == "__main__":
    main()
