#!/usr/bin/env python3
"""Web UI budget benchmark: what the browser downloads for the first screen, and how fast the
knowledge-base page of a 1,000-document knowledge base becomes usable, in a real Chromium.

    source ~/.cache/quarry-test-env.sh      # the venv's python with Playwright, QUARRY_CHROMIUM
    python3 bench/ui/run.py --quarry "$CARGO_TARGET_DIR/release/quarry" \
        [--docs 1000] [--runs 5] [--batch 200] [--no-peer] [--note TEXT]

Quarry runs as tests/interop/conftest.py starts it: a fresh QUARRY_HOME under
~/.cache/quarry-bench/ui, model variables of the outer environment dropped, the Hugging Face Hub
offline, OCR and web search off, QUARRY_UI_DIR removed (the assets embedded in the binary),
`quarry serve --port P` on loopback without --auth (local mode: no login). The browser is
Debian's Chromium driven by Playwright (`QUARRY_CHROMIUM`, default /usr/bin/chromium),
headless, 1280x860, en-US, light; every load in a new browser context (empty HTTP cache and
storage).

Parts:
  weight  Every response of the first screen of `#/kb` (the knowledge-base list, with the
          benchmark's knowledge base in it): from navigation until the page's root sets
          `data-ready="true"` and the network is idle. Per response: decoded body bytes (what
          the page gets) and bytes on the wire (Playwright's `request.sizes()` responseBodySize,
          i.e. gzip when the server compressed; the browser sends `Accept-Encoding: gzip,
          deflate, br, zstd`), grouped HTML / CSS / JS / strings (i18n JSON) / API JSON /
          images. The JS on the wire is compared with the 50 KB budget (51,200 bytes). Then a
          reload in the same context: what revalidation costs (assets are `no-cache` with
          ETags, so every asset should come back 304 without a body).
  tti     `#/kb/<id>` of a knowledge base holding --docs small Markdown files (uploaded through
          the REST API in multipart batches of at most 200, MAX_FILES_PER_UPLOAD, then polled
          until every document is ready). One untimed warm-up load, then --runs cold loads,
          each a new context. An init script (CDP, not subject to the page's CSP) observes the
          DOM: `ready` is performance.now() (from navigation start) when `.page` gets
          `data-ready="true"` (the page's first data render, document table rows included);
          `frame` is the first task after the next animation frame after that (the rows are on
          screen and the main thread is free: the page is interactive). Also FCP, DOMContentLoaded,
          long tasks (sum of their time over 50 ms before `frame`), element count, CDP
          Performance.getMetrics (Nodes, JSHeapUsedSize, layout and style work) and the used
          JS heap after a forced GC; then one interaction: click "Next" in the pager and time
          until the table's rows change and the next frame. Medians over the runs. The same for
          `#/kb` (the list) for reference.
  peer    A peer's first screen in the same browser, if one is installed locally: the MCP
          Inspector web client (React, Vite build; @modelcontextprotocol/inspector from npm,
          which scripts/install-test-tools already puts in $QUARRY_NODE_PREFIX), its
          `clients/web/dist` served by this script with gzip (level 9, like Quarry) for text.
          Its Google Fonts requests are aborted (offline). It is a tool console, not a
          knowledge-base UI, so only the weight and time to its first render compare; no
          installable peer here shows a 1,000-document table without models from the internet.

Writes bench/results/ui.json and bench/results/ui.txt. Figures, not pass/fail. See bench/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import mimetypes
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchkit import cpu_model, free_port, isolated_env, loadavg, portable  # noqa: E402  (bench/benchkit.py)
RESULTS = REPO / "bench" / "results"
WORK = Path.home() / ".cache" / "quarry-bench" / "ui"
JS_BUDGET = 50 * 1024
VIEWPORT = {"width": 1280, "height": 860}
MAX_FILES_PER_UPLOAD = 200  # crates/quarry-server/src/api/knowledge.rs

def log(*a):
    print("[ui]", *a, file=sys.stderr, flush=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 1) if xs else None


# ---------------------------------------------------------------------------------------
# Quarry


class Quarry:
    """`quarry serve --port P` on a fresh home, its output in a file."""

    def __init__(self, quarry: Path, home: Path, ui_dir: Path | None = None):
        self.env = isolated_env(home)
        if ui_dir:
            self.env["QUARRY_UI_DIR"] = str(ui_dir)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logpath = WORK / "quarry-serve.log"
        self.log = open(self.logpath, "w")
        self.proc = subprocess.Popen([str(quarry), "serve", "--port", str(self.port)], env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.time() + 120
        while True:
            try:
                if self.request("GET", "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError(f"quarry did not start: {self.logpath.read_text()[-1500:]}")
            time.sleep(0.05)

    def request(self, method, path, body=None, headers=None, timeout=300):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def api(self, method, path, doc=None, expect=(200, 201)):
        body = json.dumps(doc).encode() if doc is not None else None
        st, _, data = self.request(method, path, body, {"Content-Type": "application/json"} if body else {})
        if st not in expect:
            raise RuntimeError(f"{method} {path}: HTTP {st}: {data[:500]!r}")
        v = json.loads(data) if data else None
        return v["data"] if isinstance(v, dict) and "data" in v and "success" in v else v

    def upload(self, kb_id, files):
        boundary = f"bench-{uuid.uuid4().hex}"
        out = bytearray()
        for name, content in files:
            out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
                    "Content-Type: text/markdown\r\n\r\n").encode() + content + b"\r\n"
        out += f"--{boundary}--\r\n".encode()
        st, _, data = self.request("POST", f"/api/v1/knowledge-bases/{kb_id}/documents", bytes(out),
                                   {"Content-Type": f"multipart/form-data; boundary={boundary}"})
        if st not in (200, 201, 202):
            raise RuntimeError(f"upload: HTTP {st}: {data[:500]!r}")

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


WORDS = ("alpha beta gamma delta quarry ledger harbor meadow copper violet orbit lantern "
         "granite willow signal cipher anchor summit prairie beacon").split()


def make_doc(i: int) -> tuple[str, bytes]:
    """A small Markdown note (about 400 bytes): a heading, two paragraphs, a list."""
    w = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(24)]
    text = (f"# Note {i:04d}: {w[0]} {w[1]}\n\n"
            f"This note records the {w[2]} {w[3]} review number {i} and its {w[4]} findings.\n"
            f"The {w[5]} team compared {w[6]} with {w[7]} and kept the {w[8]} plan.\n\n"
            f"## Actions\n\n- check {w[9]} {w[10]}\n- update {w[11]} {w[12]}\n- marker zq{i:05d}\n\n"
            f"{' '.join(w[13:])}.\n")
    return f"note-{i:04d}.md", text.encode()


def fill_kb(q: Quarry, docs: int, batch: int) -> dict:
    kb = q.api("POST", "/api/v1/knowledge-bases", {"name": f"bench-{docs}", "description": "UI benchmark"},
               expect=(201,))
    t0 = time.perf_counter()
    for start in range(0, docs, batch):
        q.upload(kb["id"], [make_doc(i) for i in range(start, min(docs, start + batch))])
    uploaded = time.perf_counter() - t0
    log(f"uploaded {docs} files in {uploaded:.1f} s; waiting until ready")
    deadline = time.time() + 3600
    while True:
        listed = q.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/documents")
        statuses = {}
        for d in listed:
            statuses[d.get("status")] = statuses.get(d.get("status"), 0) + 1
        if len(listed) >= docs and all(s in ("ready", "failed") for s in statuses):
            break
        if time.time() > deadline:
            raise RuntimeError(f"documents not ready after an hour: {statuses}")
        time.sleep(0.5)
    ready = time.perf_counter() - t0
    st, headers, body = q.request("GET", f"/api/v1/knowledge-bases/{kb['id']}/documents",
                                  headers={"Accept-Encoding": "gzip"})
    return {"id": kb["id"], "docs": len(listed), "statuses": statuses, "upload_s": round(uploaded, 2),
            "all_ready_s": round(ready, 2), "batch": batch,
            "documents_json_bytes": len(body), "documents_json_encoding": headers.get("content-encoding", "identity"),
            "documents_json_gzip_would_be": len(gzip.compress(body, 6)) if not headers.get("content-encoding") else None}


# ---------------------------------------------------------------------------------------
# The browser


OBSERVER_JS = """
(() => {
  const sel = window.__readySelector;
  window.__longTasks = [];
  try {
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__longTasks.push([e.startTime, e.duration]); })
      .observe({ type: "longtask", buffered: true });
  } catch (e) {}
  const mark = () => {
    if (window.__ready !== undefined) return true;
    const el = document.querySelector(sel);
    if (!el) return false;
    window.__ready = performance.now();
    window.__rows = el.querySelectorAll("tbody tr").length;
    window.__elementsAtReady = document.getElementsByTagName("*").length;
    requestAnimationFrame(() => setTimeout(() => { window.__frame = performance.now(); }, 0));
    return true;
  };
  const obs = new MutationObserver(() => { if (mark()) obs.disconnect(); });
  obs.observe(document, { subtree: true, childList: true, attributes: true });
})();
"""

COLLECT_JS = """() => {
  const nav = performance.getEntriesByType("navigation")[0] || {};
  const fcp = performance.getEntriesByType("paint").find((e) => e.name === "first-contentful-paint");
  const frame = window.__frame;
  const lt = (window.__longTasks || []).filter(([s]) => s < frame);
  return {
    ready: window.__ready, frame, rows: window.__rows,
    elements_at_ready: window.__elementsAtReady,
    elements: document.getElementsByTagName("*").length,
    fcp: fcp ? fcp.startTime : null,
    response_end: nav.responseEnd, dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
    long_tasks: lt.length, long_task_ms: lt.reduce((n, [, d]) => n + d, 0),
    blocking_ms: lt.reduce((n, [, d]) => n + Math.max(0, d - 50), 0),
    api: performance.getEntriesByType("resource")
      .filter((e) => (e.initiatorType === "fetch" || e.initiatorType === "xmlhttprequest") && e.startTime < frame
        && !new URL(e.name).pathname.startsWith("/assets/"))
      .map((e) => [new URL(e.name).pathname, e.startTime, e.duration]),
  };
}"""

NEXT_PAGE_JS = """(btn) => new Promise((resolve) => {
  const table = document.querySelector(".page table");
  const watch = table ? table.parentNode : document.body;
  const t0 = performance.now();
  const obs = new MutationObserver(() => {
    obs.disconnect();
    const t1 = performance.now();
    requestAnimationFrame(() => setTimeout(() => resolve([t1 - t0, performance.now() - t0]), 0));
  });
  obs.observe(watch, { childList: true, subtree: true, characterData: true });
  btn.click();
  setTimeout(() => resolve(null), 10000);
})"""


def classify(url: str, rtype: str, ctype: str) -> str:
    path = urllib.parse.urlsplit(url).path
    if rtype == "document":
        return "html"
    if rtype == "stylesheet":
        return "css"
    if rtype == "script":
        return "js"
    if rtype in ("fetch", "xhr", "eventsource"):
        return "strings" if "/i18n/" in path else "api"
    if rtype == "image" or ctype.startswith("image/"):
        return "image"
    if rtype == "font":
        return "font"
    if ctype.startswith("text/css"):
        return "css"
    if "javascript" in ctype:
        return "js"
    if ctype.startswith("text/html"):
        return "html"
    return "other"


def launch(pw, chromium):
    return pw.chromium.launch(executable_path=chromium, headless=True, args=["--enable-precise-memory-info"])


def new_context(browser, block_foreign=False):
    ctx = browser.new_context(viewport=VIEWPORT, locale="en-US", color_scheme="light")
    if block_foreign:
        ctx.route(re.compile(r"^(?!https?://127\.0\.0\.1[:/]).*"), lambda r: r.abort())
    return ctx


def first_screen(browser, url, ready_selector, block_foreign=False, revisit=True):
    """Loads `url` cold, waits for `ready_selector` and network idle; every response's bytes."""
    ctx = new_context(browser, block_foreign)
    ctx.add_init_script(f"window.__readySelector = {json.dumps(ready_selector)};" + OBSERVER_JS)
    page = ctx.new_page()
    finished, failed = [], []
    page.on("requestfinished", lambda r: finished.append(r))
    page.on("requestfailed", lambda r: failed.append((r.url, r.failure)))
    page.goto(url, wait_until="commit")
    page.wait_for_function("() => window.__frame !== undefined", timeout=120_000)
    page.wait_for_load_state("networkidle")
    timing = page.evaluate(COLLECT_JS)
    rows = []
    for req in finished:
        resp = req.response()
        if resp is None:
            continue
        sizes = req.sizes()
        headers = resp.headers
        try:
            decoded = len(resp.body())
        except Exception:  # noqa: BLE001  (redirects, bodies already dropped)
            decoded = None
        wire = sizes.get("responseBodySize")
        if (wire is None or wire < 0) and headers.get("content-length"):
            wire = int(headers["content-length"])
        rows.append({
            "url": req.url, "path": urllib.parse.urlsplit(req.url).path, "type": req.resource_type,
            "status": resp.status, "kind": classify(req.url, req.resource_type, headers.get("content-type", "")),
            "encoding": headers.get("content-encoding", "identity"), "decoded": decoded, "wire": wire,
            "headers_bytes": sizes.get("responseHeadersSize"),
        })
    out = {"url": url, "responses": rows, "failed": failed, "timing": timing}
    if revisit:
        again = []
        page.on("requestfinished", lambda r: again.append(r))
        finished.clear()
        page.reload(wait_until="commit")
        page.wait_for_function("() => window.__frame !== undefined", timeout=120_000)
        page.wait_for_load_state("networkidle")
        rv = []
        for req in again:
            resp = req.response()
            if resp is None:
                continue
            sizes = req.sizes()
            rv.append({"path": urllib.parse.urlsplit(req.url).path, "status": resp.status,
                       "kind": classify(req.url, req.resource_type, resp.headers.get("content-type", "")),
                       "wire": max(0, sizes.get("responseBodySize") or 0),
                       "headers_bytes": sizes.get("responseHeadersSize") or 0})
        out["revisit"] = rv
    ctx.close()
    return out


def totals(rows):
    by = {}
    for r in rows:
        k = by.setdefault(r["kind"], {"requests": 0, "decoded": 0, "wire": 0, "files": []})
        k["requests"] += 1
        k["decoded"] += r["decoded"] or 0
        k["wire"] += r["wire"] or 0
        k["files"].append(r["path"])
    return by


def cold_load(browser, url, ready_selector, interact=False):
    ctx = new_context(browser)
    ctx.add_init_script(f"window.__readySelector = {json.dumps(ready_selector)};" + OBSERVER_JS)
    page = ctx.new_page()
    cdp = ctx.new_cdp_session(page)
    cdp.send("Performance.enable")
    foreign = []
    page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith("http://127.0.0.1") else None)
    page.goto(url, wait_until="commit")
    page.wait_for_function("() => window.__frame !== undefined", timeout=120_000)
    m = page.evaluate(COLLECT_JS)
    metrics = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
    cdp.send("HeapProfiler.enable")
    cdp.send("HeapProfiler.collectGarbage")
    after_gc = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
    m.update({
        "nodes": metrics.get("Nodes"), "js_heap_used": metrics.get("JSHeapUsedSize"),
        "js_heap_total": metrics.get("JSHeapTotalSize"), "js_heap_after_gc": after_gc.get("JSHeapUsedSize"),
        "listeners": metrics.get("JSEventListeners"), "layouts": metrics.get("LayoutCount"),
        "style_recalcs": metrics.get("RecalcStyleCount"),
        "layout_ms": round((metrics.get("LayoutDuration") or 0) * 1000, 1),
        "style_ms": round((metrics.get("RecalcStyleDuration") or 0) * 1000, 1),
        "script_ms": round((metrics.get("ScriptDuration") or 0) * 1000, 1),
        "task_ms": round((metrics.get("TaskDuration") or 0) * 1000, 1),
        "foreign_requests": foreign,
    })
    if interact:
        nxt = page.get_by_role("button", name="Next")
        if nxt.count() and nxt.first.is_enabled():
            r = nxt.first.evaluate(NEXT_PAGE_JS)
            if r:
                m["next_page_change_ms"], m["next_page_frame_ms"] = r
    ctx.close()
    return m


def tti(browser, url, ready_selector, runs, interact=False):
    warm = cold_load(browser, url, ready_selector, interact)
    loads = []
    for i in range(runs):
        loads.append(cold_load(browser, url, ready_selector, interact))
        log(f"  {url}: load {i + 1}/{runs}: ready {loads[-1]['ready']:.0f} ms, frame {loads[-1]['frame']:.0f} ms")
    keys = ("ready", "frame", "fcp", "dcl", "load", "long_task_ms", "blocking_ms", "rows", "elements", "nodes",
            "js_heap_used", "js_heap_after_gc", "layout_ms", "style_ms", "script_ms", "task_ms",
            "next_page_change_ms", "next_page_frame_ms")
    api = {}
    for x in loads:
        for path, start, dur in x.get("api") or []:
            api.setdefault(path, ([], []))
            api[path][0].append(start)
            api[path][1].append(dur)
    return {"url": url, "warmup": warm, "loads": loads,
            "median": {k: median([x.get(k) for x in loads]) for k in keys},
            "api_median": {p: {"start": median(s), "duration": median(d), "n": len(d)} for p, (s, d) in api.items()}}


# ---------------------------------------------------------------------------------------
# The peer: MCP Inspector's web client, served statically with gzip


def inspector_dist():
    prefix = Path(os.environ.get("QUARRY_NODE_PREFIX") or Path.home() / ".cache" / "quarry-node")
    root = prefix / "node_modules" / "@modelcontextprotocol" / "inspector"
    dist = root / "clients" / "web" / "dist"
    if not (dist / "index.html").is_file():
        return None, None
    version = json.loads((root / "package.json").read_text()).get("version")
    return dist, version


def serve_static(root: Path):
    """A loopback static server: gzip (level 9) for text when asked; index.html for page
    navigations to unknown paths (an SPA's router), 404 for anything else that is missing."""
    cache = {}

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            path = urllib.parse.urlsplit(self.path).path.lstrip("/")
            f = (root / path).resolve()
            if not path or not f.is_file() or root.resolve() not in f.parents:
                if path and "text/html" not in (self.headers.get("Accept") or ""):
                    self.send_error(404)
                    return
                f = root / "index.html"
            body = f.read_bytes()
            ctype = mimetypes.guess_type(f.name)[0] or "application/octet-stream"
            if ctype == "text/javascript" or f.suffix == ".js":
                ctype = "text/javascript"
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            text = ctype.startswith("text/") or ctype in ("application/json", "image/svg+xml")
            if text and "gzip" in (self.headers.get("Accept-Encoding") or ""):
                if f not in cache:
                    cache[f] = gzip.compress(body, 9)
                body = cache[f]
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Vary", "Accept-Encoding")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


# ---------------------------------------------------------------------------------------
# Report


def num(x):
    """A median for the table: integral values without a decimal."""
    if x is None:
        return "-"
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def kb(n):
    return "-" if n is None else f"{n / 1024:.1f}"


def table(header, rows):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w[i]) for i, x in enumerate(r)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * n for n in w]), *map(line, rows)])


def weight_lines(label, shot):
    by = totals(shot["responses"])
    order = ["html", "css", "js", "strings", "api", "image", "font", "other"]
    rows = []
    for k in order:
        if k in by:
            v = by[k]
            rows.append([k, v["requests"], kb(v["decoded"]), kb(v["wire"])])
    assets = [r for r in shot["responses"] if r["kind"] in ("html", "css", "js", "strings", "image", "font")]
    rows.append(["assets (no API)", len(assets), kb(sum(r["decoded"] or 0 for r in assets)),
                 kb(sum(r["wire"] or 0 for r in assets))])
    out = [f"{label}: {shot['url']}", table(["kind", "requests", "KB decoded", "KB on the wire"], rows)]
    return out, by


def report_text(rep):
    m = rep["meta"]
    L = [f"# Quarry web UI benchmark ({m['date']})",
         f"machine: {m['cpus']} CPUs ({m['cpu_model']}), load {m['load_start']} at start, {m['load_end']} at end; "
         f"{m['platform']}",
         f"quarry: {m['quarry_bin']} ({m['quarry_version']}), {m['binary_kind'].upper()} build, modified "
         f"{m['quarry_mtime']}",
         "assets: " + (f"read from {m['ui_dir']} (QUARRY_UI_DIR, development)" if m.get("ui_dir")
                       else "embedded in the binary"),
         f"browser: {m['chromium']} (Chromium {m['chromium_version']}) via Playwright {m['playwright']}, headless, "
         f"{VIEWPORT['width']}x{VIEWPORT['height']}, en-US, light; a new context (empty cache) per load",
         ""]
    if m.get("note"):
        L += [f"note: {m['note']}", ""]
    k = rep["kb"]
    L += ["## Knowledge base",
          f"{k['docs']} Markdown files (~400 bytes each) uploaded in multipart batches of {k['batch']}: "
          f"{k['upload_s']} s to upload, {k['all_ready_s']} s until every document was ready "
          f"(statuses {k['statuses']}). The documents list ({'GET …/documents'}) is "
          f"{kb(k['documents_json_bytes'])} KB, sent {k['documents_json_encoding']}"
          + (f" (gzip would make it {kb(k['documents_json_gzip_would_be'])} KB)" if k.get("documents_json_gzip_would_be")
             else "") + ".", ""]
    w = rep["weight"]
    lines, by = weight_lines("## 1. First screen of #/kb", w)
    js = by.get("js", {"wire": 0, "decoded": 0, "files": []})
    L += lines
    L += [f"JS on the wire: {js['wire']:,} bytes ({kb(js['wire'])} KB) for {len(js['files'])} files "
          f"({', '.join(js['files'])}); budget {JS_BUDGET:,} bytes (50 KB): "
          f"{'within' if js['wire'] <= JS_BUDGET else 'OVER'} "
          f"({100 * js['wire'] / JS_BUDGET:.0f}% of it). Decoded {kb(js['decoded'])} KB.",
          "decoded: body bytes the page gets; on the wire: response body bytes sent (gzip where the server "
          "compressed), headers excluded."]
    enc = sorted({(r["path"], r["encoding"]) for r in w["responses"] if r["kind"] != "api"})
    L += ["encodings: " + ", ".join(f"{p} {e}" for p, e in enc)]
    if w.get("failed"):
        L += [f"failed requests: {w['failed']}"]
    L += [f"requests to other hosts than 127.0.0.1: {w['foreign']}" if w.get("foreign")
          else "every request went to 127.0.0.1"]
    rv = w.get("revisit", [])
    if rv:
        assets = [r for r in rv if r["kind"] != "api"]
        n304 = sum(1 for r in assets if r["status"] == 304)
        empty = sum(1 for r in assets if not r["wire"])
        L += [f"reload (same context): {len(rv)} requests; {empty}/{len(assets)} assets came without a body "
              f"(revalidated: {n304} reported as 304, the rest as the cached 200 that fetch() and the document "
              f"see); {sum(r['wire'] for r in assets):,} body bytes for assets, "
              f"{sum(r['wire'] for r in rv if r['kind'] == 'api'):,} for API JSON, "
              f"{sum(r['headers_bytes'] for r in rv):,} header bytes."]
    L += [""]
    L += ["## 2. Time to interactive (ms from navigation start; median of "
          f"{rep['meta']['runs']} cold loads, each in a new context)"]
    rows = []
    for name, t in rep["tti"].items():
        md = t["median"]
        rows.append([name, *map(num, (md["fcp"], md["ready"], md["frame"], md["dcl"], md["long_task_ms"],
                                      md["blocking_ms"], md["rows"], md["elements"], md["nodes"])),
                     kb(md["js_heap_used"]), kb(md["js_heap_after_gc"]),
                     *map(num, (md["script_ms"], md["layout_ms"], md["style_ms"], md.get("next_page_frame_ms")))])
    L += [table(["page", "FCP", "ready", "interactive", "DCL", "long tasks", "blocking", "rows", "elements",
                 "DOM nodes", "heap KB", "heap KB after GC", "script", "layout", "style", "next page"], rows)]
    for name, t in rep["tti"].items():
        L += [f"{name} ({t['url']}): ready per load {[round(x['ready']) for x in t['loads']]}, interactive "
              f"{[round(x['frame']) for x in t['loads']]}; warm-up load {round(t['warmup']['frame'])} ms"]
        calls = ", ".join(f"{p} at {v['start']:.0f} for {v['duration']:.0f}" for p, v in t.get("api_median", {}).items())
        L += [f"  API calls before interactive (median ms from navigation start, duration): {calls}"]
    L += ["ready: the page's root got data-ready=\"true\" (first data render, rows in the table); interactive: the "
          "first task after the next animation frame (rows painted, main thread free). long tasks: their total "
          "time before interactive; blocking: the part over 50 ms each. elements: document.getElementsByTagName('*') "
          "at interactive; DOM nodes, heap (JSHeapUsedSize), script/layout/style ms: CDP Performance.getMetrics "
          "(page lifetime); heap after GC: after HeapProfiler.collectGarbage. next page: click \"Next\" in the pager "
          "until the rows changed and the next frame.", ""]
    p = rep.get("peer")
    L += ["## 3. Peer"]
    if p and p.get("weight"):
        lines, pby = weight_lines(f"MCP Inspector {p['version']} web client (React, Vite build), first screen", p["weight"])
        L += lines
        pjs = pby.get("js", {"wire": 0})
        t = p["weight"]["timing"]
        L += [f"JS on the wire {kb(pjs['wire'])} KB vs Quarry's {kb(js['wire'])} KB "
              f"({pjs['wire'] / max(1, js['wire']):.0f}x). First render (its #root filled) at "
              f"{round(t['ready'])} ms, interactive {round(t['frame'])} ms (one load) vs Quarry's #/kb "
              f"{rep['tti']['kb list']['median']['frame']} ms (median). Served by this script with gzip level 9 for "
              "text; its Google Fonts requests were aborted (offline).",
              "Not like-for-like: the Inspector is a tool console, not a knowledge-base UI. No installable peer here "
              "renders a 1,000-document table without models or services from the internet, so part 2 has none."]
    else:
        L += [p.get("skipped", "not run") if p else "not run"]
    return "\n".join(L) + "\n"


def chromium_version(chromium):
    try:
        return subprocess.run([chromium, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quarry", type=Path, required=True, help="the quarry binary (release or debug)")
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=MAX_FILES_PER_UPLOAD)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--chromium", default=os.environ.get("QUARRY_CHROMIUM") or "/usr/bin/chromium")
    ap.add_argument("--note", default="")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--ui-dir", type=Path, help="development: serve the UI from this assets folder "
                    "(QUARRY_UI_DIR) instead of the binary's embedded copy; the report says so")
    a = ap.parse_args()
    if not 1 <= a.batch <= MAX_FILES_PER_UPLOAD:
        raise SystemExit(f"--batch: 1..{MAX_FILES_PER_UPLOAD}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SystemExit("Playwright missing: source ~/.cache/quarry-test-env.sh (or run scripts/install-test-tools)")
    quarry = a.quarry.resolve()
    if not quarry.is_file():
        raise SystemExit(f"no quarry binary at {quarry}")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    kind = "release" if "/release/" in str(quarry) else "debug" if "/debug/" in str(quarry) else "?"
    from importlib.metadata import version as pkg_version
    rep = {"meta": {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "cpus": os.cpu_count(),
        "cpu_model": cpu_model(), "platform": platform.platform(), "load_start": loadavg(),
        "quarry_bin": str(quarry), "binary_kind": kind,
        "quarry_version": subprocess.run([str(quarry), "--version"], capture_output=True, text=True).stdout.strip(),
        "quarry_mtime": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(quarry.stat().st_mtime)),
        "chromium": a.chromium, "chromium_version": chromium_version(a.chromium),
        "playwright": pkg_version("playwright"), "docs": a.docs, "runs": a.runs, "note": a.note,
        "js_budget_bytes": JS_BUDGET, "argv": sys.argv,
    }}
    rep["meta"]["ui_dir"] = str(a.ui_dir.resolve()) if a.ui_dir else None
    q = Quarry(quarry, WORK / "home", a.ui_dir.resolve() if a.ui_dir else None)
    pw = sync_playwright().start()
    try:
        log(f"quarry at {q.base}; filling a knowledge base with {a.docs} documents")
        rep["kb"] = fill_kb(q, a.docs, a.batch)
        browser = launch(pw, a.chromium)
        rep["meta"]["chromium_version"] = browser.version
        log("first screen of #/kb")
        rep["weight"] = first_screen(browser, f"{q.base}/#/kb", '.page[data-ready="true"]')
        foreign = [r["url"] for r in rep["weight"]["responses"] if not r["url"].startswith("http://127.0.0.1")]
        rep["weight"]["foreign"] = foreign
        rep["tti"] = {}
        log("cold loads of #/kb")
        rep["tti"]["kb list"] = tti(browser, f"{q.base}/#/kb", '.page[data-ready="true"]', a.runs)
        log(f"cold loads of #/kb/{rep['kb']['id']}")
        rep["tti"][f"kb ({a.docs} docs)"] = tti(browser, f"{q.base}/#/kb/{rep['kb']['id']}", '.page[data-ready="true"]',
                                              a.runs, interact=True)
        if a.no_peer:
            rep["peer"] = {"skipped": "--no-peer"}
        else:
            dist, version = inspector_dist()
            if dist is None:
                rep["peer"] = {"skipped": "MCP Inspector web client not installed (scripts/install-test-tools)"}
            else:
                srv = serve_static(dist)
                try:
                    log(f"peer: MCP Inspector {version} web client")
                    base = f"http://127.0.0.1:{srv.server_address[1]}/"
                    rep["peer"] = {"name": "MCP Inspector web client", "version": version, "dist": str(dist),
                                   "weight": first_screen(browser, base, "#root > *", block_foreign=True,
                                                          revisit=False)}
                finally:
                    srv.shutdown()
        browser.close()
    finally:
        pw.stop()
        q.close()
    rep["meta"]["load_end"] = loadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ui.json").write_text(portable(json.dumps(rep, indent=1, ensure_ascii=False)) + "\n")
    text = portable(report_text(rep))
    (RESULTS / "ui.txt").write_text(text)
    print(text)
    if not a.keep:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
