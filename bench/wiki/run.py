#!/usr/bin/env python3
"""Wiki pages at scale (issue 68): the latency of the wiki's REST routes at 10,000 pages.

A fresh home (embedded store, keyword only: QUARRY_EMBED_MODEL=none) with a knowledge base of
`--docs` tldr pages from ../shared/corpora/tldr/pages, brought in by a folder source (`quarry
source add --folder` + `source sync`; a folder source, not `kb upload`, because an upload of a
file under a name the knowledge base has makes a second document, `tar (2).md`, and leaves the
cited one as it was — a source sync changes the document in place, keeping its id, which is
what a page cites). Then `quarry serve`, and `--pages` pages written through
`PUT /api/v1/knowledge-bases/{id}/pages/{slug}` by a pool of `--threads` clients: each with a
title, a type among summary/entity/concept/how-to, tags, a body with 2-3 `[[slug]]` links to
other pages and 1-3 citations `<knowledge_id>:A-B` of real passages (an example's description
and command) of the documents. Writes/s and write latency are reported per 1,000 pages, so
their growth with the wiki's size shows.

Then, `--samples` times each, p50/p95/max of: `GET …/pages?limit=50` (the first page, one deep
in via `after`, and with a `type=` filter), `GET …/pages/{slug}`, `GET …/lint` and a keyword
search that hits pages (`POST /api/v1/knowledge-search`). Then `--edits` cited documents are
edited in the folder (one cited example's command line each, in place) and the source synced
through `POST /api/v1/sources/{id}/sync`; `GET …/lint` is measured again, now with stale
findings, and the pages it says are stale are compared with those expected from the citations
(the engine's rule: a page is stale when a cited passage is neither at its lines any more nor
anywhere else in its document).

    python3 bench/wiki/run.py --quarry $CARGO_TARGET_DIR/release/quarry [--docs 2000] [--pages 10000]

Writes bench/results/wiki.json and wiki.txt. Figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit import REPO, cpu_model, free_port, isolated_env, loadavg, percentile, save  # noqa: E402

TLDR = REPO.parent / "shared" / "corpora" / "tldr" / "pages"
TYPES = ["summary", "entity", "concept", "how-to"]
KB = "wiki"


def stats(xs: list[float]) -> dict:
    return {"n": len(xs), "p50_ms": round(percentile(xs, 50), 2), "p95_ms": round(percentile(xs, 95), 2),
            "max_ms": round(max(xs), 2)}


def lines_of(text: str, a: int, b: int) -> str | None:
    """Lines a..b (1-based, inclusive) as the engine reads them (`str::lines`, joined by \\n)."""
    lines = text.splitlines()
    if a < 1 or b > len(lines):
        return None
    return "\n".join(lines[a - 1:b])


def examples(text: str) -> list[tuple[int, int]]:
    """The (description, command) line pairs of a tldr page: `- what:` then, after a blank
    line, `` `command` ``."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.startswith("- ") and i + 2 < len(lines) and lines[i + 2].startswith("`"):
            out.append((i + 1, i + 3))
    return out


class Http:
    """One keep-alive connection per thread."""

    def __init__(self, port: int):
        self.port = port
        self.local = threading.local()

    def call(self, method: str, path: str, body=None) -> tuple[int, dict, float]:
        data = json.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (1, 2):
            conn = getattr(self.local, "conn", None)
            fresh = conn is None
            if fresh:
                conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            t = time.perf_counter()
            try:
                conn.request(method, path, data, headers)
                r = conn.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException):
                self.local.conn = None
                # A keep-alive connection the server closed while idle: once more on a new one.
                if fresh or attempt == 2:
                    raise
                continue
            ms = (time.perf_counter() - t) * 1000
            return r.status, (json.loads(raw) if raw else {}), ms
        raise AssertionError("unreachable")


def start_server(quarry: Path, env: dict, log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    out = open(log, "wb")
    proc = subprocess.Popen([str(quarry), "serve", "--port", str(port)], env=env, stdin=subprocess.DEVNULL,
                            stdout=out, stderr=out)
    deadline = time.monotonic() + 300
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health/ready")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"quarry serve did not start; see {log}")
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quarry", required=True, type=Path, help="a release build of quarry")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--pages", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--index-samples", type=int, default=None, help="samples of each index variant (default --samples)")
    ap.add_argument("--lint-samples", type=int, default=10)
    ap.add_argument("--reuse", action="store_true",
                    help="measure on the home a previous run left in --work (its documents and pages, the write "
                         "figures it saved in writes.json) instead of making one: the same --seed, --docs and --pages")
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--seed", type=int, default=68)
    ap.add_argument("--write-budget-s", type=float, default=None,
                    help="stop writing after the 1,000-page batch that passes this many seconds, and measure there")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "quarry-bench" / "wiki")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "wiki.json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    meta = {"cpu": cpu_model(), "load_start": loadavg(), "quarry": str(args.quarry.resolve()),
            "docs": args.docs, "pages": args.pages, "threads": args.threads, "samples": args.samples,
            "index_samples": args.index_samples, "lint_samples": args.lint_samples, "reuse": args.reuse, "edits": args.edits, "seed": args.seed, "store": "embedded (SQLite)",
            "embed_model": "none", "corpus": str(TLDR), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"{meta['cpu']}, load {meta['load_start']}", flush=True)

    # The documents: an evenly spaced sample of tldr pages with at least two examples.
    folder = args.work / "docs"
    if not args.reuse:
        if args.work.exists():
            shutil.rmtree(args.work)
        folder.mkdir(parents=True)
    all_pages = sorted(TLDR.glob("*/*.md"))
    usable = [p for p in all_pages if len(examples(p.read_text(encoding="utf-8"))) >= 2]
    step = max(1, len(usable) // args.docs)
    chosen = usable[::step][:args.docs]
    texts: dict[str, str] = {}
    for p in chosen:
        name = f"{p.parent.name}-{p.name}"
        texts[name] = p.read_text(encoding="utf-8")
        if not args.reuse:
            (folder / name).write_text(texts[name], encoding="utf-8")
    env = isolated_env(args.work / "home")
    env["QUARRY_EMBED_MODEL"] = "none"

    def cli(*a: str) -> str:
        r = subprocess.run([str(args.quarry), *a], env=env, capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise SystemExit(f"quarry {' '.join(a)} failed:\n{r.stderr[-3000:]}")
        return r.stdout

    if args.reuse:
        source = json.loads(cli("source", "list", "--json"))["sources"][0]["id"]
        sync_s = json.loads((args.work / "writes.json").read_text())["first_sync_s"]
    else:
        cli("kb", "create", KB)
        source = json.loads(cli("source", "add", KB, "--folder", str(folder), "--json"))["id"]
        t = time.monotonic()
        cli("source", "sync", source)
        sync_s = time.monotonic() - t
    docs = [d for d in json.loads(cli("kb", "docs", KB, "--json"))["documents"] if not d["file_name"].startswith("pages/")]
    by_name = {d["file_name"]: d for d in docs}
    assert set(by_name) == set(texts), (len(by_name), len(texts))
    print(f"{len(docs)} documents synced in {sync_s:.1f} s", flush=True)

    proc, port = start_server(args.quarry, env, args.work / "serve.log")
    api = Http(port)
    try:
        status, body, _ = api.call("GET", "/api/v1/knowledge-bases")
        kb_id = next(k["id"] for k in body["data"] if k["name"] == KB)
        base = f"/api/v1/knowledge-bases/{kb_id}"

        # The pages, planned first (seeded): citations of real example passages.
        names = sorted(texts)
        slugs = [f"p{i:05d}" for i in range(args.pages)]
        plan = []
        for i, slug in enumerate(slugs):
            cites = []
            for name in rng.sample(names, rng.randint(1, 3)):
                a, b = rng.choice(examples(texts[name]))
                cites.append((name, a, b))
            first = cites[0][0].split("-", 1)[1].removesuffix(".md")
            links: list[str] = []
            want = rng.randint(2, 3)
            while len(links) < want:
                other = slugs[rng.randrange(args.pages)]
                if other != slug and other not in links:
                    links.append(other)
            kind = TYPES[i % len(TYPES)]
            plan.append({
                "slug": slug, "type": kind, "cites": cites,
                "body": {"title": f"{first} notes {i}", "type": kind,
                         "tags": ["wikibench", cites[0][0].split("-", 1)[0], f"batch-{i // 1000}"],
                         "body": f"Wikibench {kind} about the {first} command ({i}). "
                                 + " ".join(f"See [[{x}]]." for x in links),
                         "sources": [f"{by_name[n]['id']}:{a}-{b}" for n, a, b in cites]},
            })

        # Writes: a pool of clients, in order of slug; latency kept per 1,000 pages.
        write_ms: list[tuple[int, float]] = []
        failures: list[str] = []
        lock = threading.Lock()

        def write(i: int) -> None:
            p = plan[i]
            st, out, ms = api.call("PUT", f"{base}/pages/{p['slug']}", p["body"])
            with lock:
                if st != 201:
                    failures.append(f"{p['slug']}: {st} {json.dumps(out)[:300]}")
                write_ms.append((i, ms))

        batches = []
        t_all = time.monotonic()
        with ThreadPoolExecutor(args.threads) as pool:
            for start in range(0, 0 if args.reuse else args.pages, 1000):
                t = time.monotonic()
                list(pool.map(write, range(start, min(start + 1000, args.pages))))
                wall = time.monotonic() - t
                lat = [ms for i, ms in write_ms if start <= i < start + 1000]
                batches.append({"pages": f"{start}-{start + len(lat) - 1}", "wall_s": round(wall, 1),
                                "writes_per_s": round(len(lat) / wall, 1), **stats(lat)})
                print(f"writes {batches[-1]}", flush=True)
                if failures:
                    raise SystemExit("writes failed:\n" + "\n".join(failures[:10]))
                if args.write_budget_s and time.monotonic() - t_all > args.write_budget_s:
                    print(f"write budget spent: measuring at {len(write_ms)} pages", flush=True)
                    break
        write_wall = time.monotonic() - t_all
        if args.reuse:
            writes = json.loads((args.work / "writes.json").read_text())["writes"]
            written = writes["pages"]
        else:
            written = len(write_ms)
            writes = {"pages": written, "planned": args.pages, "wall_s": round(write_wall, 1),
                      "writes_per_s": round(written / write_wall, 1),
                      **stats([ms for _, ms in write_ms]), "per_1000": batches}
            (args.work / "writes.json").write_text(json.dumps({"first_sync_s": sync_s, "writes": writes}))
        plan, slugs = plan[:written], slugs[:written]

        # Reads, warm (one call first, not counted).
        def measure(label: str, path_of, n: int, check=None) -> dict:
            api.call("GET", path_of(0))
            lat = []
            answer = None
            for k in range(n):
                st, answer, ms = api.call("GET", path_of(k))
                if st != 200:
                    raise SystemExit(f"{label}: {st} {json.dumps(answer)[:500]}")
                if check:
                    check(answer)
                lat.append(ms)
            out = stats(lat)
            print(f"{label}: {out}", flush=True)
            return out

        def full_index(a):
            assert a["data"]["total"] > 0 and 0 < len(a["data"]["pages"]) <= 50, a["data"].get("total")

        reads = {}
        isamp = args.samples if args.index_samples is None else args.index_samples
        reads["index_first"] = measure("index, first 50", lambda k: f"{base}/pages?limit=50", isamp, full_index)
        deep = slugs[written // 2]
        reads["index_deep"] = measure(f"index, 50 after {deep}", lambda k: f"{base}/pages?limit=50&after={deep}",
                                      isamp, full_index)
        reads["index_type"] = measure("index, type=how-to", lambda k: f"{base}/pages?limit=50&type=how-to",
                                      isamp, full_index)
        reads["index_type_tag"] = measure("index, type=entity&tag=batch-3",
                                          lambda k: f"{base}/pages?limit=50&type=entity&tag=batch-3", isamp)
        picks = [rng.choice(slugs) for _ in range(args.samples)]
        reads["read_page"] = measure("read_page", lambda k: f"{base}/pages/{picks[k % len(picks)]}", args.samples)
        lint_answer = {}

        def keep_lint(a):
            lint_answer["findings"] = a["data"]["findings"]

        reads["lint"] = measure("lint", lambda k: f"{base}/lint", args.lint_samples, keep_lint)
        kinds: dict[str, int] = {}
        for f in lint_answer["findings"]:
            kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        reads["lint"]["findings"] = kinds

        # Keyword search that hits pages (their bodies say "Wikibench … the X command").
        queries = [f"wikibench {plan[rng.randrange(written)]['body']['title'].split()[0]} command"
                   for _ in range(args.samples)]
        lat, page_hits, stale_marks = [], 0, 0
        for k, q in enumerate([queries[0]] + queries):
            st, out, ms = api.call("POST", "/api/v1/knowledge-search",
                                   {"question": q, "knowledge_base_ids": [kb_id], "search_mode": "keyword",
                                    "top_k": 10, "min_score": 0})
            if st != 200:
                raise SystemExit(f"search: {st} {json.dumps(out)[:500]}")
            if k:
                lat.append(ms)
                page_hits += sum(1 for h in out["results"] if h.get("wiki_page"))
                stale_marks += sum(1 for h in out["results"] if (h.get("wiki_page") or {}).get("stale"))
        reads["search"] = {**stats(lat), "page_hits_per_query": round(page_hits / len(lat), 1),
                           "stale_marks": stale_marks}
        print(f"search: {reads['search']}", flush=True)

        # Edit cited documents in place (one cited example's command line each) and sync.
        cited_by: dict[str, list[tuple[str, int, int]]] = {}
        for p in plan:
            for name, a, b in p["cites"]:
                cited_by.setdefault(name, []).append((p["slug"], a, b))
        edited = rng.sample(sorted(n for n in cited_by if len(cited_by[n]) >= 3), args.edits)
        new_texts = dict(texts)
        for name in edited:
            _, a, b = rng.choice(cited_by[name])
            lines = texts[name].splitlines(keepends=True)
            lines[b - 1] = lines[b - 1].rstrip("\n").rstrip("`") + " --wikibench-edit`\n"
            new_texts[name] = "".join(lines)
            (folder / name).write_text(new_texts[name], encoding="utf-8")
        expected = set()
        for p in plan:
            for name, a, b in p["cites"]:
                was = lines_of(texts[name], a, b)
                now = new_texts[name]
                if lines_of(now, a, b) != was and was not in now:
                    expected.add(p["slug"])
        t = time.monotonic()
        st, out, _ = api.call("POST", f"/api/v1/sources/{source}/sync")
        resync_s = time.monotonic() - t
        if st != 200:
            raise SystemExit(f"sync: {st} {json.dumps(out)[:500]}")
        # The sync applied the edits when it answers; wait (bounded) until the lint sees them.
        found: set[str] = set()
        deadline = time.monotonic() + 120
        while True:
            st, out, _ = api.call("GET", f"{base}/lint")
            found = {f["page"] for f in out["data"]["findings"] if f["kind"] == "stale"}
            if found >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        reads["lint_after_edits"] = measure("lint with stale findings", lambda k: f"{base}/lint", args.lint_samples)
        st, out, _ = api.call("GET", f"{base}/lint")
        found = {f["page"] for f in out["data"]["findings"] if f["kind"] == "stale"}
        index_stale = set()
        after = ""
        while True:
            st, out, _ = api.call("GET", f"{base}/pages?limit=200" + (f"&after={after}" if after else ""))
            index_stale |= {p["slug"] for p in out["data"]["pages"] if p["stale"]}
            after = out["data"].get("next")
            if not after:
                break
        # A search for an edited document's command marks exactly the expected pages' hits stale.
        marks_right = marks_wrong = 0
        for name in edited:
            cmd = name.split("-", 1)[1].removesuffix(".md")
            st, out, _ = api.call("POST", "/api/v1/knowledge-search",
                                  {"question": f"wikibench {cmd} command", "knowledge_base_ids": [kb_id],
                                   "search_mode": "keyword", "top_k": 20, "min_score": 0})
            for h in out.get("results", []):
                mark = h.get("wiki_page")
                if mark:
                    if mark["stale"] == (mark["slug"] in expected):
                        marks_right += 1
                    else:
                        marks_wrong += 1
        stale = {"search_page_hits_checked": marks_right + marks_wrong, "search_marks_wrong": marks_wrong,
                 "edited_documents": edited, "resync_s": round(resync_s, 2), "expected": len(expected),
                 "lint_stale_pages": len(found), "index_stale_pages": len(index_stale),
                 "missed": sorted(expected - found)[:20], "extra": sorted(found - expected)[:20],
                 "pages_citing_edited_documents": len({s for n in edited for s, _, _ in cited_by[n]})}
        print(f"stale: {stale}", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()

    # The same calls in-process (the CLI opens the store itself; no server, no HTTP), beside a
    # call that reads no page (`kb docs`: process start, opening the store): what the engine
    # costs on its own.
    def cli_ms(*a: str) -> dict:
        lat = []
        for _ in range(3):
            t = time.perf_counter()
            r = subprocess.run([str(args.quarry), *a], env=env, capture_output=True, text=True, timeout=600)
            lat.append((time.perf_counter() - t) * 1000)
            if r.returncode not in (0, 1):
                raise SystemExit(f"quarry {' '.join(a)}: {r.stderr[-2000:]}")
        return stats(lat)

    cli_times = {"kb docs (no pages read)": cli_ms("kb", "docs", KB, "--json"),
                 "kb pages (every page)": cli_ms("kb", "pages", KB, "--json"),
                 "kb lint": cli_ms("kb", "lint", KB, "--json")}
    print(f"cli: {cli_times}", flush=True)
    rep = {"meta": meta, "setup": {"documents": len(docs), "first_sync_s": round(sync_s, 1)},
           "writes": writes, "reads": reads, "stale": stale, "cli": cli_times}
    save(rep, args.out, text_report)
    print(text_report(rep))


def text_report(rep: dict) -> str:
    m, w, r, s = rep["meta"], rep["writes"], rep["reads"], rep["stale"]
    out = [f"Wiki pages at scale (bench/wiki/run.py), {m['started']}",
           f"CPU {m['cpu']}; load {m['load_start']} at start, {m.get('load_end')} at end",
           f"{rep['setup']['documents']} tldr documents (folder source, first sync {rep['setup']['first_sync_s']} s), "
           f"{m['store']} store, embeddings {m['embed_model']}",
           "",
           f"writes: {w['pages']} pages over REST PUT by {m['threads']} clients in {w['wall_s']} s = "
           f"{w['writes_per_s']} pages/s; latency p50 {w['p50_ms']} ms, p95 {w['p95_ms']} ms, max {w['max_ms']} ms",
           "  per 1,000 pages (pages/s, p50/p95 ms): "
           + "; ".join(f"{b['pages']}: {b['writes_per_s']}/s {b['p50_ms']}/{b['p95_ms']}" for b in w["per_1000"]),
           "",
           f"reads at {w['pages']} pages (ms)            p50      p95      max    n"]
    labels = {"index_first": "GET pages?limit=50", "index_deep": "GET pages?limit=50&after=(middle)",
              "index_type": "GET pages?limit=50&type=how-to", "index_type_tag": "GET pages?type=entity&tag=",
              "read_page": "GET pages/{slug}", "lint": "GET lint", "search": "POST knowledge-search (keyword)",
              "lint_after_edits": "GET lint (with stale findings)"}
    for key, label in labels.items():
        x = r[key]
        out.append(f"  {label:34s} {x['p50_ms']:8.1f} {x['p95_ms']:8.1f} {x['max_ms']:8.1f} {x['n']:4d}")
    if "findings" in r["lint"]:
        out.append(f"  lint findings before the edits: {r['lint']['findings']}")
    if "findings" in r.get("lint_after_edits", {}):
        out.append(f"  lint findings after the edits: {r['lint_after_edits']['findings']}")
    out.append(f"  search: {r['search']['page_hits_per_query']} page hits per query (top 10)")
    out += ["",
            f"stale after editing {len(s['edited_documents'])} cited documents (one cited command line each) "
            f"and a source sync ({s['resync_s']} s): expected {s['expected']} pages (of "
            f"{s['pages_citing_edited_documents']} citing those documents), lint says {s['lint_stale_pages']}, "
            f"the index {s['index_stale_pages']}; missed {s['missed']}, extra {s['extra']}; searches for the "
            f"edited commands: {s['search_page_hits_checked']} page hits, {s['search_marks_wrong']} marked wrong", ""]
    if rep.get("cli"):
        out.append("in-process, the CLI on the same home with the server stopped (wall ms, process start included; 3 runs):")
    for label, x in rep.get("cli", {}).items():
        out.append(f"  quarry {label:28s} p50 {x['p50_ms']:8.1f}  max {x['max_ms']:8.1f}")
    out.append("")
    out += [f"note: {n}" for n in rep.get("notes", [])]
    return "\n".join(out)


if __name__ == "__main__":
    main()
