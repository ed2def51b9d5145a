#!/usr/bin/env python3
"""Teams benchmark: Quarry as a shared, token-authenticated server with many spaces.

    python3 bench/teams/run.py --quarry PATH/quarry [--parts vector,create,search,auth,qmd]
        [--docs 10000] [--other-docs 1000] [--spaces 10] [--pages-per-doc 1]
        [--qmd PATH | --no-qmd]

Parts (all by default, run in this order):
  vector  `create_knowledge` over `/api/v1/mcp` on a server with `--embed-model` (MiniLM) in a
          fresh home: seconds until each note is found by `knowledge_search` in vector mode
  create  `create_knowledge` latency over `/api/v1/mcp` into space s0 (which already holds the
          10,000 documents), then seconds until a new note is keyword-searchable over `/mcp`
  search  `knowledge_search` latency over `/mcp` (one session, sequential) in s0 (10,000
          documents) among 10 spaces, keyword and hybrid; isolation checked in passing
  auth    per-request cost of the token check: the same requests to a `--auth token` server
          and to an open server (no `--auth`, loopback) on the same data, interleaved
  qmd     single-user baseline: QMD's CLI `qmd search` on the s0 folder next to
          `quarry --space s0 search`, one process per call

Writes bench/results/teams.json and bench/results/teams.txt. Figures, not pass/fail. Standard
library only. See bench/README.md for the method.
"""

import argparse
import http.client
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchkit import cpu_model, free_port, loadavg, percentile, save  # noqa: E402  (bench/benchkit.py)
HOME = Path.home()
WORK = HOME / ".cache" / "quarry-bench" / "teams"
PROTOCOL = "2025-11-25"
SEED = 20261123


def log(*a):
    print("[teams]", *a, file=sys.stderr, flush=True)


def dist(xs, scale=1000.0, nd=3):
    """p50/p90/p99/mean/min/max of seconds, scaled (ms by default)."""
    if not xs:
        return {"n": 0}
    r = lambda v: round(v * scale, nd)
    return {"n": len(xs), "p50": r(percentile(xs, 50)), "p90": r(percentile(xs, 90)),
            "p99": r(percentile(xs, 99)), "mean": r(statistics.fmean(xs)), "min": r(min(xs)),
            "max": r(max(xs))}


def letters(n, width=4):
    """n as lowercase letters (base 26), so every token is one plain word for any tokenizer;
    callers end tokens with 'x' so no stemmer touches them."""
    out = []
    for _ in range(width):
        out.append(chr(97 + n % 26))
        n //= 26
    return "".join(reversed(out))


def doc_token(space, i):
    return f"zq{chr(97 + space)}{letters(i)}x"


def space_mark(space):
    return f"zzmark{chr(97 + space)}x"


# ---------------------------------------------------------------------------------------
# Corpus: tldr pages made unique per document
# ---------------------------------------------------------------------------------------


def tldr_pages(tldr):
    pages = []
    for lang, sub in (("en", "pages"), ("zh", "pages.zh")):
        for p in sorted((tldr / sub).rglob("*.md")):
            if p.name.startswith("."):
                continue
            pages.append((lang, p))
    return pages


def split_page(text):
    """(header lines, example blocks): a block is a `- description` line with what follows
    it up to the next one."""
    lines = text.rstrip("\n").splitlines()
    head, blocks, cur = [], [], None
    for ln in lines:
        if ln.startswith("- "):
            if cur is not None:
                blocks.append(cur)
            cur = [ln]
        elif cur is None:
            head.append(ln)
        else:
            cur.append(ln)
    if cur is not None:
        blocks.append(cur)
    return head, blocks


def make_doc(text, rng, token, mark):
    head, blocks = split_page(text)
    rng.shuffle(blocks)
    out = list(head)
    for b in blocks:
        while b and not b[-1].strip():
            b = b[:-1]
        out += b + [""]
    out += [f"Reference: {token} {mark}", ""]
    return "\n".join(out)


def build_corpus(tldr, dest, n_spaces, n_first, n_other, pages_per_doc=1):
    """dest/sK/ holds sK's documents: s0 n_first, the others n_other. Pages are drawn from a
    per-space shuffle of all tldr pages (English and Chinese), cycling when more documents
    than pages are asked for; each document has its example blocks shuffled and a last line
    with a token unique to it and a word unique to its space. File names start with the
    space, so a search result's file says where it came from."""
    pages = tldr_pages(tldr)
    if dest.exists():
        shutil.rmtree(dest)
    counts = {}
    for k in range(n_spaces):
        rng = random.Random(SEED + k)
        order = list(range(len(pages)))
        rng.shuffle(order)
        d = dest / f"s{k}"
        d.mkdir(parents=True)
        n = n_first if k == 0 else n_other
        for i in range(n):
            # A long document (--pages-per-doc > 1): several pages, one after another, the
            # token and space word once, at the end.
            parts = [pages[order[(i * pages_per_doc + j) % len(order)]] for j in range(pages_per_doc)]
            lang, p = parts[0]
            texts = [make_doc(q.read_text("utf-8", "replace"), rng, "", "").rstrip().rsplit("\n", 1)[0]
                     for _, q in parts[1:]]
            text = make_doc(p.read_text("utf-8", "replace"), rng, doc_token(k, i), space_mark(k))
            name = f"s{k}-{lang}-{p.parent.name}-{p.stem}-{i:05d}.md"
            (d / name).write_text("\n\n".join(texts + [text]), "utf-8")
        counts[f"s{k}"] = n
    return pages, counts


def description(text):
    for ln in text.splitlines():
        if ln.startswith("> ") and not ln.startswith(("> More information", "> 更多信息")):
            return ln[2:].strip()
    return ""


STOP = set("""a an the of to for in on and or with from by as at is are be it its this that
these those into over via your you using use used can which when what how all any some other
more most not no only""".split())


def make_queries(pages, n):
    """n varied queries from the pages: description phrases (2-4 words), command names, and
    Chinese description fragments, interleaved 2:1:1."""
    rng = random.Random(SEED)
    en = [p for lang, p in pages if lang == "en"]
    zh = [p for lang, p in pages if lang == "zh"]
    rng.shuffle(en)
    rng.shuffle(zh)
    phrases, titles, chinese = [], [], []
    for p in en:
        text = p.read_text("utf-8", "replace")
        d = re.sub(r"[`*_<>\[\]{}()\"']", " ", description(text)).rstrip(".")
        words = [w.lower() for w in re.split(r"[\s,;:.]+", d) if w.isalpha() or "-" in w]
        words = [w for w in words if w not in STOP]
        if len(words) >= 2 and len(phrases) < n and "alias" not in words:
            k = rng.randint(2, min(3, len(words)))
            start = rng.randint(0, len(words) - k)
            phrases.append(" ".join(words[start:start + k]))
        t = text.splitlines()[0].lstrip("# ").strip() if text else ""
        if t and len(titles) < n:
            titles.append(t)
    for p in zh:
        d = description(p.read_text("utf-8", "replace"))
        frag = re.split(r"[，。、；：（()`,.;:]", d)[0].strip()
        if re.search(r"[\u4e00-\u9fff]", frag) and len(frag) >= 2 and "命令" not in frag:
            chinese.append(frag[:8])
        if len(chinese) >= n:
            break
    out, seen = [], set()
    its = [iter(phrases), iter(phrases), iter(titles), iter(chinese)]
    its[1] = its[0]  # two phrases per title and Chinese fragment
    i = 0
    while len(out) < n and i < 10 * n:
        q = next(its[i % 4], None)
        if q and q not in seen:
            seen.add(q)
            out.append(q)
        i += 1
    return out


# ---------------------------------------------------------------------------------------
# Quarry CLI and servers
# ---------------------------------------------------------------------------------------


def quarry_env(home):
    env = dict(os.environ, QUARRY_HOME=str(home), NO_COLOR="1")
    for k in ("QUARRY_EMBED_MODEL", "QUARRY_SPACE", "QUARRY_RERANK_MODEL",
              "QUARRY_EXPAND_MODEL"):
        env.pop(k, None)
    return env


def cli(quarry, home, *args, timeout=1800, check=True):
    p = subprocess.run([str(quarry), *map(str, args)], env=quarry_env(home),
                       capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"quarry {' '.join(map(str, args))}: rc={p.returncode}: "
                           f"{(p.stderr or p.stdout)[-500:]}")
    return p


class Server:
    def __init__(self, quarry, home, name, extra=(), env_extra=None):
        self.port = free_port()
        self.name = name
        self.logpath = home.parent / f"server-{name}.log"
        self.log = open(self.logpath, "w")
        env = quarry_env(home)
        env.update(env_extra or {})
        self.argv = [str(quarry), "serve", "--port", str(self.port), *map(str, extra)]
        self.proc = subprocess.Popen(self.argv, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {name} exited {self.proc.returncode}: "
                                   f"{self.logpath.read_text()[-800:]}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                r = c.getresponse()
                self.health = r.read()
                c.close()
                if r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server {name} did not answer /health in 180 s")

    def wait_model(self, timeout=120):
        """Waits until /health says the model is loaded (when it reports that)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            c.request("GET", "/health")
            v = json.loads(c.getresponse().read() or b"{}")
            c.close()
            if v.get("model_loaded", True):
                return True
            time.sleep(0.2)
        return False

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Conn:
    """One HTTP/1.1 connection kept alive (`fresh=True`: a new connection per request).
    TCP_NODELAY on the client side, as common HTTP clients set it."""

    def __init__(self, port, fresh=False):
        self.port, self.fresh, self.c = port, fresh, None

    def _open(self):
        self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        self.c.connect()
        self.c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, method, path, body=None, headers=None):
        for attempt in (0, 1):
            if self.c is None:
                self._open()
            try:
                self.c.request(method, path, body=body, headers=headers or {})
                r = self.c.getresponse()
                data = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if self.fresh or r.will_close:
                    self.close()
                return r.status, hdrs, data
            except (http.client.RemoteDisconnected, ConnectionError, BrokenPipeError):
                self.close()
                if attempt:
                    raise
        raise AssertionError

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def rpc_messages(body, ctype):
    """JSON-RPC messages of a response: a JSON body, or the `data:` lines of an SSE one."""
    text = body.decode("utf-8", "replace")
    if "text/event-stream" in (ctype or ""):
        out = []
        for ln in text.splitlines():
            if ln.startswith("data:"):
                d = ln[5:].strip()
                if d.startswith("{"):
                    out.append(json.loads(d))
        return out
    return [json.loads(text)] if text.strip() else []


def rpc_result(status, hdrs, body, rid):
    """(result, error text) of JSON-RPC request rid."""
    if status != 200:
        return None, f"HTTP {status}: {body[:300]!r}"
    for m in rpc_messages(body, hdrs.get("content-type")):
        if m.get("id") == rid:
            if "error" in m:
                return None, json.dumps(m["error"])[:300]
            res = m.get("result") or {}
            if res.get("isError"):
                txt = " ".join(c.get("text", "") for c in res.get("content", []))
                return res, txt[:300] or "isError"
            return res, None
    return None, f"no response with id {rid}: {body[:300]!r}"


class McpSession:
    """Streamable HTTP MCP client for /mcp: initialize, notifications/initialized, then
    tools/call with the session id."""

    def __init__(self, port, token, fresh=False, space=None):
        self.conn = Conn(port, fresh)
        self.token = token
        self.rid = 0
        self.base = {"Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream",
                     "Authorization": f"Bearer {token}"}
        if space:
            self.base["X-Space-ID"] = space
        self.rid += 1
        st, h, b = self.conn.request("POST", "/mcp", json.dumps({
            "jsonrpc": "2.0", "id": self.rid, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "quarry-teams-bench", "version": "1"}}}).encode(),
            self.base)
        self.init_status = st
        res, err = rpc_result(st, h, b, self.rid)
        if err:
            raise RuntimeError(f"initialize: {err}")
        self.sid = h.get("mcp-session-id")
        self.protocol = res.get("protocolVersion")
        self.headers = dict(self.base, **{"MCP-Protocol-Version": PROTOCOL})
        if self.sid:
            self.headers["Mcp-Session-Id"] = self.sid
        st, _, _ = self.conn.request("POST", "/mcp", json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(), self.headers)
        if st not in (200, 202):
            raise RuntimeError(f"notifications/initialized: HTTP {st}")

    def call(self, name, args):
        self.rid += 1
        st, h, b = self.conn.request("POST", "/mcp", json.dumps(
            {"jsonrpc": "2.0", "id": self.rid, "method": "tools/call",
             "params": {"name": name, "arguments": args}}).encode(), self.headers)
        return rpc_result(st, h, b, self.rid)

    def search(self, query, mode, top_k=10):
        return self.call("knowledge_search", {"query": query, "search_mode": mode,
                                              "top_k": top_k, "min_score": 0})


def results_of(res):
    return ((res or {}).get("structuredContent") or {}).get("results") or []


class Capture:
    """Stateless /api/v1/mcp client (JSON responses) for create_knowledge."""

    def __init__(self, port, token, space, resource):
        self.conn = Conn(port)
        self.rid = 0
        self.headers = {"Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream",
                        "Authorization": f"Bearer {token}", "X-Space-ID": space,
                        "X-Resource": resource}

    def create(self, title, content):
        self.rid += 1
        st, h, b = self.conn.request("POST", "/api/v1/mcp", json.dumps(
            {"jsonrpc": "2.0", "id": self.rid, "method": "tools/call",
             "params": {"name": "create_knowledge",
                        "arguments": {"content": content, "title": title}}}).encode(),
            self.headers)
        res, err = rpc_result(st, h, b, self.rid)
        nid = ((res or {}).get("structuredContent") or {}).get("id")
        if not err and not nid:
            err = f"no structuredContent.id: {b[:200]!r}"
        return nid, err


def setup_team(quarry, home, n_spaces, corpus_dir):
    """Spaces s0..s(n-1), each indexed from corpus_dir/sK with `collection add`; user
    `alice`, editor of s0 only; a token limited to s0; knowledge base `notes` in s0."""
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    index = {}
    for k in range(n_spaces):
        cli(quarry, home, "space", "create", f"s{k}")
    cli(quarry, home, "user", "add", "alice")
    cli(quarry, home, "space", "grant", "s0", "alice", "--role", "editor")
    for k in range(n_spaces):
        t0 = time.perf_counter()
        p = cli(quarry, home, "--space", f"s{k}", "collection", "add", corpus_dir / f"s{k}",
                "--name", "docs")
        index[f"s{k}"] = {"wall_s": round(time.perf_counter() - t0, 3),
                          "output": p.stdout.strip()[-200:]}
        log(f"indexed s{k}: {index[f's{k}']['wall_s']} s: {p.stdout.strip()[-120:]}")
    cli(quarry, home, "--space", "s0", "kb", "create", "notes")
    token = cli(quarry, home, "token", "create", "--user", "alice", "--spaces", "s0",
                "--label", "teams bench").stdout.strip().split()[-1]
    if not token.startswith("qk_"):
        raise RuntimeError(f"unexpected token output: {token[:20]!r}")
    return token, index


def note_sources(pages, n, offset):
    """n English tldr pages (distinct where possible), evenly spread, from offset on."""
    en = [p for lang, p in pages if lang == "en"]
    step = max(1, len(en) // max(n, 1))
    return [en[(offset + i * step) % len(en)] for i in range(n)]


# ---------------------------------------------------------------------------------------
# Parts
# ---------------------------------------------------------------------------------------

ADJ = ["purple", "silent", "frozen", "golden", "rusty", "tiny", "ancient", "noisy", "gentle",
       "hollow", "crimson", "sleepy", "brave", "muddy", "shiny", "wooden", "windy", "bitter",
       "polite", "lazy", "clever", "fragile", "gigantic", "dusty", "electric"]
WHO = ["lighthouse keeper", "beekeeper", "train conductor", "glassblower", "astronomer",
       "pastry chef", "mountain guide", "violin maker", "ferry captain", "librarian",
       "blacksmith", "orchid grower", "tailor", "clockmaker", "submarine pilot", "cartographer",
       "falconer", "potter", "harbour pilot", "chess coach", "vintner", "locksmith", "gardener",
       "radio operator", "puppeteer"]
DOES = ["collects antique barometers", "repairs broken telescopes", "paints tiny sailboats",
        "bakes rye bread at dawn", "trains carrier pigeons", "knits scarves for penguins",
        "writes letters to volcanoes", "grows tomatoes on the roof", "tunes church organs",
        "catalogues rare beetles", "builds kites from newspapers", "studies desert lizards",
        "polishes copper kettles", "records the songs of whales", "sorts seashells by colour",
        "carves chess pieces from driftwood", "measures the depth of glaciers",
        "restores old typewriters", "brews ginger beer", "maps underground rivers",
        "feeds stray cats at the harbour", "teaches parrots to whistle",
        "photographs thunderstorms", "folds paper cranes", "counts migrating geese"]


def vector_sentences(n):
    rng = random.Random(SEED + 99)
    out = []
    for i in range(n):
        out.append(f"The {ADJ[i % len(ADJ)]} {WHO[(i * 7) % len(WHO)]} "
                   f"{DOES[(i * 11) % len(DOES)]} every {rng.choice(['Monday', 'winter', 'full moon', 'morning', 'holiday'])}.")
    return out


def part_vector(quarry, work, model, n, poll=0.05, timeout=300):
    """A fresh home (space s0, knowledge base `vecnotes`, a token), a server with
    --embed-model; each note is created and then searched in vector mode every `poll` s with
    its own sentence until it is in the results."""
    home = work / "home-vector"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    cli(quarry, home, "space", "create", "s0")
    cli(quarry, home, "user", "add", "alice")
    cli(quarry, home, "space", "grant", "s0", "alice", "--role", "editor")
    cli(quarry, home, "--space", "s0", "kb", "create", "vecnotes")
    token = cli(quarry, home, "token", "create", "--user", "alice", "--spaces", "s0"
                ).stdout.strip().split()[-1]
    srv = Server(quarry, home, "vector", ["--auth", "token", "--embed-model", model])
    try:
        t_load = time.perf_counter()
        loaded = srv.wait_model()
        t_load = time.perf_counter() - t_load
        cap = Capture(srv.port, token, "s0", "vecnotes")
        mcp = McpSession(srv.port, token, fresh=True)
        probes = []
        for i, sentence in enumerate(vector_sentences(n)):
            title = f"vector probe {i}"
            content = f"# {title}\n\n{sentence}\n"
            t0 = time.perf_counter()
            nid, err = cap.create(title, content)
            t_create = time.perf_counter() - t0
            r = {"title": title, "sentence": sentence, "create_s": round(t_create, 4)}
            if err:
                r["error"] = err
                probes.append(r)
                continue
            polls, errs, first_err, found = 0, 0, None, None
            while time.perf_counter() - t0 < timeout:
                polls += 1
                res, e = mcp.search(sentence, "vector", 10)
                if e:
                    errs += 1
                    first_err = first_err or e
                elif any(x.get("knowledge_id") == nid or x.get("knowledge_title") == title
                         for x in results_of(res)):
                    found = time.perf_counter() - t0
                    break
                time.sleep(poll)
            r.update({"searchable_s": round(found, 4) if found is not None else None,
                      "polls": polls, "poll_errors": errs, "first_poll_error": first_err})
            probes.append(r)
            log(f"vector probe {i}: {r['searchable_s']} s, {polls} polls, {errs} errors")
        xs = [p["searchable_s"] for p in probes if p.get("searchable_s") is not None]
        return {
            "method": "fresh QUARRY_HOME (space s0, knowledge base `vecnotes`, no other "
                      "documents), `quarry serve --auth token --embed-model MODEL`; per note: "
                      "POST create_knowledge to /api/v1/mcp, then `knowledge_search` "
                      "(search_mode vector, top_k 10, min_score 0, query = the note's sentence) "
                      f"over /mcp every {int(poll * 1000)} ms until the note is in the results; "
                      "seconds from sending create_knowledge. Errors before the first embedding "
                      "(\"Vector index not found\") are counted and polling goes on.",
            "model": model, "model_loaded": loaded, "model_wait_s": round(t_load, 3),
            "notes": len(probes), "found": len(xs),
            "searchable_s": dist(xs, 1.0, 3),
            "create_ms": dist([p["create_s"] for p in probes], 1000.0, 2),
            "polls_with_errors": sum(p.get("poll_errors", 0) for p in probes),
            "probes": probes,
        }
    finally:
        srv.close()
        shutil.rmtree(home, ignore_errors=True)


def part_create(quarry, home, token, pages, n_creates, n_probes, docs_in_s0):
    srv = Server(quarry, home, "create", ["--auth", "token"])
    try:
        cap = Capture(srv.port, token, "s0", "notes")
        lat, errors, ids = [], [], []
        srcs = note_sources(pages, n_creates + n_probes, 17)
        for _ in range(3):  # warm-up notes (not timed)
            cap.create("warm-up", "# warm-up\n\nwarm-up note\n")
        for i, p in enumerate(srcs[:n_creates]):
            text = p.read_text("utf-8", "replace").rstrip("\n")
            title = f"{text.splitlines()[0].lstrip('# ').strip()} note {i}"
            content = f"{text}\n\nNote marker: zn{letters(i)}x\n"
            t0 = time.perf_counter()
            nid, err = cap.create(title, content)
            lat.append(time.perf_counter() - t0)
            if err:
                errors.append(err)
            else:
                ids.append(nid)
        log(f"create_knowledge x{n_creates}: p50 {dist(lat)['p50']} ms, {len(errors)} errors")
        # Keyword-searchable probes over /mcp (a new connection per call: see the search part
        # for why keep-alive /mcp calls stall 40 ms).
        mcp = McpSession(srv.port, token, fresh=True)
        probes = []
        for j, p in enumerate(srcs[n_creates:]):
            i = n_creates + j
            tok = f"zn{letters(i)}x"
            text = p.read_text("utf-8", "replace").rstrip("\n")
            title = f"{text.splitlines()[0].lstrip('# ').strip()} probe {j}"
            before, e0 = mcp.search(tok, "keyword")
            t0 = time.perf_counter()
            nid, err = cap.create(title, f"{text}\n\nNote marker: {tok}\n")
            t_create = time.perf_counter() - t0
            r = {"token": tok, "create_ms": round(t_create * 1000, 3),
                 "hits_before": len(results_of(before)) if not e0 else e0}
            if err:
                r["error"] = err
                probes.append(r)
                continue
            attempts, found, search_errs = 0, None, []
            while time.perf_counter() - t0 < 30:
                attempts += 1
                res, e = mcp.search(tok, "keyword")
                if e:
                    search_errs.append(e)
                elif any(x.get("knowledge_id") == nid or x.get("knowledge_title") == title
                         for x in results_of(res)):
                    found = time.perf_counter() - t0
                    break
                if attempts > 1:
                    time.sleep(0.02)
            r.update({"searchable_ms": round(found * 1000, 3) if found is not None else None,
                      "attempts": attempts, "search_errors": search_errs[:3]})
            probes.append(r)
        xs = [r["searchable_ms"] / 1000 for r in probes if r.get("searchable_ms") is not None]
        retried = [r for r in probes if r.get("attempts", 1) > 1]
        return {
            "method": "`quarry serve --auth token` (no embedding model) on the team home; "
                      f"space s0 already holds {docs_in_s0} documents (collection `docs`); "
                      "notes go to knowledge base `notes` (X-Resource). create_knowledge over "
                      "the stateless /api/v1/mcp (one keep-alive connection, JSON responses), "
                      "distinct English tldr pages plus a unique marker word, sequential, after "
                      "3 untimed warm-up notes. Searchable: a further note per probe; the clock "
                      "starts when create_knowledge is sent and stops at the first "
                      "`knowledge_search` (keyword, over /mcp, one session, a new TCP "
                      "connection per call) whose results include the note; the first search "
                      "is sent as soon as create_knowledge returns, retries every 20 ms.",
            "space": f"s0 (holding {docs_in_s0} documents)",
            "create_ms": dist(lat, 1000.0, 3), "creates": n_creates,
            "create_errors": len(errors), "create_error_samples": errors[:5],
            "searchable_ms": dist(xs, 1000.0, 3), "probes_n": len(probes),
            "probes_found": len(xs), "probes_needing_retries": len(retried),
            "max_attempts": max((r.get("attempts", 0) for r in probes), default=None),
            "probes": probes,
        }
    finally:
        srv.close()


def transport_probe(port, token, sid, rounds=4):
    """Raw socket: when the pieces of a keep-alive /mcp tools/call response arrive."""
    body = json.dumps({"jsonrpc": "2.0", "id": 999, "method": "tools/call", "params": {
        "name": "knowledge_search", "arguments": {"query": "tar", "search_mode": "keyword",
                                                  "top_k": 10, "min_score": 0}}}).encode()
    req = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
           f"\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {token}"
           f"\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: {PROTOCOL}\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    try:
        for i in range(rounds):
            t0 = time.perf_counter()
            s.sendall(req)
            buf, segs = b"", []
            while not buf.endswith(b"0\r\n\r\n"):
                d = s.recv(1 << 16)
                if not d:
                    break
                buf += d
                segs.append([round((time.perf_counter() - t0) * 1000, 2), len(d)])
            out.append({"request_on_connection": i + 1, "reads_ms_bytes": segs})
    finally:
        s.close()
    return out


def run_queries(mcp, queries, modes, s0_prefix="s0-"):
    """Every query in every mode, the modes interleaved per query (alternating which goes
    first), so neither mode gets the warmer caches."""
    acc = {m: {"lat": [], "errs": [], "counts": [], "foreign": []} for m in modes}
    for i, q in enumerate(queries):
        for m in (modes if i % 2 == 0 else modes[::-1]):
            a = acc[m]
            t0 = time.perf_counter()
            res, err = mcp.search(q, m)
            a["lat"].append(time.perf_counter() - t0)
            if err:
                a["errs"].append(f"{q}: {err}")
                continue
            rs = results_of(res)
            a["counts"].append(len(rs))
            for x in rs:
                kb = x.get("knowledge_base")
                f = x.get("knowledge_filename") or x.get("file") or ""
                if (kb == "docs" and not Path(f).name.startswith(s0_prefix)) or \
                        kb not in ("docs", "notes"):
                    a["foreign"].append({"query": q, "docid": x.get("docid"), "kb": kb,
                                         "file": f})
    return {m: {"ms": dist(a["lat"], 1000.0, 3), "errors": len(a["errs"]),
                "error_samples": a["errs"][:5],
                "mean_results": round(statistics.fmean(a["counts"]), 2) if a["counts"] else None,
                "zero_result_queries": sum(1 for c in a["counts"] if c == 0),
                "results_from_other_spaces": len(a["foreign"]),
                "foreign_samples": a["foreign"][:5]} for m, a in acc.items()}


def part_search(quarry, home, token, queries, n_spaces, counts):
    srv = Server(quarry, home, "search", ["--auth", "token"])
    try:
        out = {"method": "`quarry serve --auth token` (no embedding model; the home has no "
                         "vector index, so hybrid runs the keyword leg only plus fusion) on "
                         f"the team home ({n_spaces} spaces: "
                         + ", ".join(f"{k} {v}" for k, v in counts.items()) +
                         " documents); token of user `alice`, editor of s0 only. One /mcp "
                         "session, sequential `knowledge_search` calls (top_k 10, min_score 0), "
                         f"{len(queries)} queries, each in keyword and in hybrid mode (the two "
                         "interleaved per query), after 10 untimed warm-up calls; once over one keep-alive connection and once "
                         "with a new TCP connection per call (same session).",
               "queries": len(queries), "query_samples": queries[:12]}
        for label, fresh in (("keepalive", False), ("new_connection", True)):
            mcp = McpSession(srv.port, token, fresh=fresh)
            for q in queries[:10]:
                mcp.search(q, "keyword")
            out[label] = run_queries(mcp, queries, ["keyword", "hybrid"])
            log(f"/mcp {label}: keyword p50 {out[label]['keyword']['ms'].get('p50')} ms, "
                f"hybrid p50 {out[label]['hybrid']['ms'].get('p50')} ms")
        mcp = McpSession(srv.port, token)
        out["transport_probe"] = {
            "what": "raw socket, one keep-alive connection, the same tools/call 4 times: "
                    "[ms since send, bytes] of each read",
            "reads": transport_probe(srv.port, token, mcp.sid)}
        # Isolation: words that exist only in s1 (one document's token, and the word every
        # s1 document carries), and a positive control in s0.
        iso = {}
        mcp = McpSession(srv.port, token, fresh=True)
        if n_spaces > 1:
            for q in (doc_token(1, 7), space_mark(1)):
                for m in ("keyword", "hybrid"):
                    res, err = mcp.search(q, m)
                    iso[f"{q} [{m}] via s0 token"] = err or len(results_of(res))
                p = cli(quarry, home, "--space", "s1", "search", q, "-n", "10", "--json",
                        check=False)
                try:
                    iso[f"{q} via CLI in s1 (control)"] = len(json.loads(p.stdout or "[]"))
                except ValueError:
                    iso[f"{q} via CLI in s1 (control)"] = f"rc={p.returncode} {p.stderr[-200:]}"
        res, err = mcp.search(doc_token(0, 7), "keyword")
        iso[f"{doc_token(0, 7)} [keyword] via s0 token (control)"] = err or len(results_of(res))
        try:
            McpSession(srv.port, token, space="s1")
            iso["initialize with X-Space-ID s1 (token for s0)"] = "accepted"
        except RuntimeError as e:
            iso["initialize with X-Space-ID s1 (token for s0)"] = f"refused: {str(e)[:160]}"
        out["isolation"] = iso
        return out
    finally:
        srv.close()


def part_auth(quarry, home, token, n, out_dir):
    """Interleaved requests to a --auth token server and an open server on the same home."""
    tok = Server(quarry, home, "auth-token", ["--auth", "token"])
    opn = Server(quarry, home, "auth-open", [])
    try:
        common = {"X-Space-ID": "s0"}
        hdr = {"token": dict(common, Authorization=f"Bearer {token}"), "open": dict(common)}
        conns = {"token": Conn(tok.port), "open": Conn(opn.port)}
        body = json.dumps({"query": "tar", "limit": 1}).encode()
        routes = {
            "GET /health (public on both: control)": ("GET", "/health", None, {}),
            "GET /status": ("GET", "/status", None, None),
            "POST /search {query: tar, limit: 1}": ("POST", "/search", body,
                                                    {"Content-Type": "application/json"}),
        }
        lat = {r: {"token": [], "open": []} for r in routes}
        bad = {r: {"token": 0, "open": 0} for r in routes}
        for i in range(n + 50):
            order = ("token", "open") if i % 2 == 0 else ("open", "token")
            for r, (method, path, b, extra) in routes.items():
                for side in order:
                    h = {} if extra == {} else dict(hdr[side], **(extra or {}))
                    t0 = time.perf_counter()
                    st, _, _ = conns[side].request(method, path, b, h)
                    dt = time.perf_counter() - t0
                    if i >= 50:  # the first 50 rounds warm up
                        lat[r][side].append(dt)
                        if st != 200:
                            bad[r][side] += 1
        res = {}
        for r in routes:
            t, o = dist(lat[r]["token"], 1e6, 1), dist(lat[r]["open"], 1e6, 1)
            res[r] = {"token_us": t, "open_us": o, "non_200": bad[r],
                      "diff_p50_us": round(t["p50"] - o["p50"], 1),
                      "diff_p99_us": round(t["p99"] - o["p99"], 1),
                      "diff_mean_us": round(t["mean"] - o["mean"], 1)}
        inproc = out_dir / "teams-authenticate.txt"
        return {
            "method": "two servers of the same binary on the same home at once: `quarry serve "
                      "--auth token` and `quarry serve` (loopback, no --auth: open mode); one "
                      "keep-alive connection each (http.client, TCP_NODELAY); every request "
                      "carries X-Space-ID: s0 (so both act in s0; the open server looks the "
                      "space up, the token server the token), the token server's also "
                      f"`Authorization: Bearer`. {n} timed rounds after 50 warm-up rounds; a "
                      "round sends each route to both servers, alternating which goes first. "
                      "Latency is client-side, from sending to the body read (µs). /health is "
                      "public on both: its difference is the noise floor.",
            "requests_per_route_and_server": n, "routes": res,
            "in_process": inproc.read_text() if inproc.exists() else None,
        }
    finally:
        tok.close()
        opn.close()


def run_proc(argv, env, cwd, timeout):
    """Wall, CPU (own + reaped children) and peak RSS of one process, as compare.py."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                             cwd=cwd, start_new_session=True)
        timer = threading.Timer(timeout, lambda: os.killpg(p.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return {"rc": os.waitstatus_to_exitcode(status), "wall": wall,
                "cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss,
                "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")}


def cli_search_bench(argv_prefix, env, cwd, queries, runs, warmup=3):
    for q in queries[:warmup]:
        run_proc(argv_prefix + [q, "-n", "10", "--json"], env, cwd, 120)
    lat, cpu, rss, errors, counts = [], [], [], [], {}
    for _ in range(runs):
        for q in queries:
            r = run_proc(argv_prefix + [q, "-n", "10", "--json"], env, cwd, 120)
            lat.append(r["wall"])
            cpu.append(r["cpu"])
            rss.append(r["rss_kb"])
            if r["rc"] != 0:
                errors.append(f"{q}: rc={r['rc']} {(r['stderr'] or r['stdout'])[-200:]}")
                continue
            try:
                v = json.loads(r["stdout"] or "[]")
                v = v.get("results", []) if isinstance(v, dict) else v
                counts.setdefault(q, len(v))
            except ValueError:
                errors.append(f"{q}: bad JSON {r['stdout'][:100]!r}")
    return {"ms": dist(lat, 1000.0, 2), "cpu_mean_ms": round(statistics.fmean(cpu) * 1000, 2),
            "peak_rss_kb_max": max(rss) if rss else None, "errors": len(errors),
            "error_samples": errors[:3],
            "mean_results": round(statistics.fmean(counts.values()), 2) if counts else None,
            "zero_result_queries": sum(1 for c in counts.values() if c == 0),
            "results_per_query": counts}


def part_qmd(quarry, home, qmd_spec, corpus, queries, runs, work, quarry_index_s):
    out = {"method": "one CLI process per call (spawn to exit), `search QUERY -n 10 --json`, "
                     f"{len(queries)} queries x {runs} runs after 3 untimed warm-up calls, "
                     "as bench/qmd/compare.py. Quarry: `quarry --space s0 search` in the team "
                     "home (10 spaces); QMD: its own fresh home indexing the s0 folder with "
                     "`qmd collection add DIR --name docs --mask '**/*.md'`. QMD ANDs the words "
                     "of a query (prefix terms), Quarry ORs and ranks them: result counts differ.",
           "queries": queries}
    out["quarry"] = cli_search_bench([str(quarry), "--space", "s0", "search"],
                                     quarry_env(home), str(work), queries, runs)
    out["quarry"]["index_s0_s"] = quarry_index_s
    if qmd_spec is None:
        out["qmd"] = {"skipped": "--no-qmd"}
        return out
    qmd = qmd_spec
    if qmd == "install":
        p = subprocess.run(["bash", str(REPO / "bench" / "qmd" / "install.sh")],
                           capture_output=True, text=True, timeout=600)
        qmd = p.stdout.strip().splitlines()[-1] if p.returncode == 0 and p.stdout.strip() \
            else None
        if not qmd:
            out["qmd"] = {"skipped": f"bench/qmd/install.sh failed (rc={p.returncode}): "
                                     f"{p.stderr[-400:]}"}
            return out
    qhome = work / "qmd-home"
    if qhome.exists():
        shutil.rmtree(qhome)
    qhome.mkdir(parents=True)
    env = dict(os.environ, HOME=str(qhome), XDG_CONFIG_HOME=str(qhome / "config"),
               XDG_CACHE_HOME=str(qhome / "cache"), NO_COLOR="1", QMD_FORCE_CPU="1")
    for k in ("QMD_CONFIG_DIR", "INDEX_PATH"):
        env.pop(k, None)
    v = run_proc([qmd, "--version"], env, str(qhome), 60)
    r = run_proc([qmd, "collection", "add", str(corpus), "--name", "docs", "--mask", "**/*.md"],
                 env, str(qhome), 900)
    out["qmd"] = {"command": qmd, "version": (v["stdout"] or v["stderr"]).strip()[:60],
                  "index": {"wall_s": round(r["wall"], 3), "cpu_s": round(r["cpu"], 3),
                            "peak_rss_kb": r["rss_kb"], "rc": r["rc"],
                            "output": r["stdout"].strip()[-300:]}}
    if r["rc"] != 0:
        out["qmd"]["skipped"] = f"qmd collection add failed: {(r['stderr'] or r['stdout'])[-400:]}"
        return out
    out["qmd"].update(cli_search_bench([qmd, "search"], env, str(qhome), queries, runs))
    shutil.rmtree(qhome, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def table(headers, rows):
    cols = list(zip(*([headers] + [[("" if c is None else str(c)) for c in r] for r in rows])))
    widths = [max(len(x) for x in c) for c in cols]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] +
                     [line(["" if c is None else c for c in r]) for r in rows])


def drow(label, d, *extra):
    return [label, d.get("n"), d.get("p50"), d.get("p90"), d.get("p99"), d.get("mean"),
            d.get("max"), *extra]


def text_report(rep):
    m = rep["meta"]
    o = [f"# Quarry teams benchmark ({m['date']})",
         f"machine: {m['cpus']} CPUs ({m['cpu_model']}), load {m['load_start']} at start, "
         f"{m.get('load_end')} at end; {m['platform']}",
         f"quarry: {m['quarry_bin']} ({m['quarry_version']}), {m['binary_kind'].upper()} "
         f"build, modified {m['quarry_mtime']}"]
    if m["binary_kind"] != "release":
        o.append("NOTE: figures from a DEBUG build: not representative of release speed.")
    if m.get("note"):
        o.append(f"NOTE: {m['note']}")
    o.append(f"corpus: tldr pages ({m['tldr']}), {m['corpus_spaces']}")
    o.append("")
    v = rep.get("vector")
    if v:
        o.append("## 1b. create_knowledge -> vector-searchable (seconds)")
        o.append(v["method"])
        o.append(table(["", "n", "p50", "p90", "p99", "mean", "max"],
                       [drow("searchable_s", v["searchable_s"]),
                        drow("create_ms", v["create_ms"])]))
        o.append(f"found {v['found']}/{v['notes']}; polls that errored: "
                 f"{v['polls_with_errors']}; model {v['model']} (loaded: {v['model_loaded']})")
        o.append("")
    c = rep.get("create")
    if c:
        o.append("## 1. create_knowledge over /api/v1/mcp (ms)")
        o.append(c["method"])
        o.append(table(["", "n", "p50", "p90", "p99", "mean", "max"],
                       [drow("create_knowledge", c["create_ms"]),
                        drow("send -> keyword hit", c["searchable_ms"])]))
        o.append(f"create errors: {c['create_errors']}; keyword probes found "
                 f"{c['probes_found']}/{c['probes_n']}, needing retries: "
                 f"{c['probes_needing_retries']} (max attempts {c['max_attempts']})")
        o.append("")
    s = rep.get("search")
    if s:
        o.append(f"## 2. knowledge_search over /mcp, {m['corpus_short']} (ms per call)")
        o.append(s["method"])
        rows = []
        for label in ("keepalive", "new_connection"):
            for mode in ("keyword", "hybrid"):
                r = s[label][mode]
                rows.append(drow(f"{mode} [{label}]", r["ms"], r["errors"], r["mean_results"],
                                 r["zero_result_queries"], r["results_from_other_spaces"]))
        o.append(table(["mode [connection]", "n", "p50", "p90", "p99", "mean", "max", "errors",
                        "mean results", "zero-result q", "foreign results"], rows))
        o.append("transport probe (keep-alive, [ms, bytes] per read): " + "; ".join(
            str(x["reads_ms_bytes"]) for x in s["transport_probe"]["reads"]))
        o.append("isolation:")
        for k, val in s["isolation"].items():
            o.append(f"  {k}: {val}")
        o.append("")
    a = rep.get("auth")
    if a:
        o.append("## 3. Token check per HTTP request (µs, client-side)")
        o.append(a["method"])
        rows = []
        for r, x in a["routes"].items():
            rows.append([r, x["token_us"]["p50"], x["open_us"]["p50"], x["diff_p50_us"],
                         x["token_us"]["p99"], x["open_us"]["p99"], x["diff_p99_us"],
                         x["diff_mean_us"], f"{x['non_200']['token']}/{x['non_200']['open']}"])
        o.append(table(["route", "token p50", "open p50", "diff p50", "token p99", "open p99",
                        "diff p99", "diff mean", "non-200 t/o"], rows))
        o.append(f"requests per route and server: {a['requests_per_route_and_server']}")
        if a.get("in_process"):
            o.append("in-process (bench/results/teams-authenticate.txt):")
            o += ["  " + ln for ln in a["in_process"].rstrip().splitlines()]
        else:
            o.append("in-process: bench/results/teams-authenticate.txt not present")
        o.append("")
    q = rep.get("qmd")
    if q:
        o.append("## 4. Single-user baseline: CLI search on the s0 folder (ms per process)")
        o.append(q["method"])
        rows = [drow("quarry --space s0 search", q["quarry"]["ms"], q["quarry"]["cpu_mean_ms"],
                     q["quarry"]["mean_results"], q["quarry"]["zero_result_queries"],
                     q["quarry"]["errors"])]
        qm = q.get("qmd", {})
        if "ms" in qm:
            rows.append(drow("qmd search", qm["ms"], qm["cpu_mean_ms"], qm["mean_results"],
                             qm["zero_result_queries"], qm["errors"]))
        o.append(table(["", "n", "p50", "p90", "p99", "mean", "max", "cpu ms", "mean results",
                        "zero-result q", "errors"], rows))
        o.append(f"index the s0 folder: quarry {q['quarry'].get('index_s0_s')} s"
                 + (f", qmd {qm['index']['wall_s']} s ({qm.get('version')})" if "index" in qm
                    else ""))
        if qm.get("skipped"):
            o.append(f"qmd skipped: {qm['skipped']}")
        o.append("")
    if rep.get("setup"):
        st = rep["setup"]
        o.append(f"setup: corpus written in {st['corpus_s']} s; collection add per space (s): "
                 + ", ".join(f"{k} {v['wall_s']}" for k, v in st["index"].items()))
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quarry", required=True, type=Path)
    ap.add_argument("--tldr", type=Path, default=REPO.parent / "shared" / "corpora" / "tldr")
    ap.add_argument("--parts", default="vector,create,search,auth,qmd")
    ap.add_argument("--spaces", type=int, default=10)
    ap.add_argument("--docs", type=int, default=10000, help="documents in s0")
    ap.add_argument("--pages-per-doc", type=int, default=1,
                    help="tldr pages per document (10: long documents, ~10 passages each)")
    ap.add_argument("--other-docs", type=int, default=1000, help="documents in s1..")
    ap.add_argument("--creates", type=int, default=300)
    ap.add_argument("--keyword-probes", type=int, default=30)
    ap.add_argument("--vector-probes", type=int, default=20)
    ap.add_argument("--embed-model", help="model directory for the vector part (default: "
                    "$QUARRY_TEST_MINILM, else from scripts/setup-models)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--auth-requests", type=int, default=2000)
    ap.add_argument("--qmd", default="install", help="qmd command (default: run "
                    "bench/qmd/install.sh, which prints it)")
    ap.add_argument("--no-qmd", action="store_true")
    ap.add_argument("--qmd-queries", type=int, default=20)
    ap.add_argument("--qmd-runs", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=WORK)
    ap.add_argument("--keep", action="store_true", help="keep the homes and corpus")
    ap.add_argument("--note", help="a line for the report header (e.g. why a debug build)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "teams.json")
    a = ap.parse_args()
    parts = [p for p in a.parts.split(",") if p]
    quarry = a.quarry.resolve()
    kind = "release" if "/release/" in str(quarry) else "debug" if "/debug/" in str(quarry) \
        else "?"
    a.workdir.mkdir(parents=True, exist_ok=True)
    rep = {"meta": {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
        "cpu_model": cpu_model(), "platform": platform.platform(),
        "python": platform.python_version(), "load_start": loadavg(),
        "quarry_bin": str(quarry), "binary_kind": kind,
        "quarry_version": cli(quarry, a.workdir, "--version").stdout.strip(),
        "quarry_mtime": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                      time.gmtime(quarry.stat().st_mtime)),
        "tldr": str(a.tldr), "parts": parts, "argv": sys.argv, "note": a.note,
    }}
    t0 = time.perf_counter()
    corpus = a.workdir / "corpus"
    pages, counts = build_corpus(a.tldr, corpus, a.spaces, a.docs, a.other_docs, a.pages_per_doc)
    corpus_s = round(time.perf_counter() - t0, 2)
    rep["meta"]["corpus_spaces"] = ", ".join(f"{k}: {v} docs" for k, v in counts.items())
    rep["meta"]["corpus_short"] = f"s0 {a.docs} docs" + (
        f" among {a.spaces} spaces (s1..s{a.spaces - 1}: {a.other_docs} docs each)"
        if a.spaces > 1 else "")
    log(f"corpus written in {corpus_s} s ({sum(counts.values())} files)")
    queries = make_queries(pages, a.queries)
    home = a.workdir / "home"
    try:
        if "vector" in parts:
            model = a.embed_model or os.environ.get("QUARRY_TEST_MINILM")
            if not model:
                p = subprocess.run(["bash", str(REPO / "scripts" / "setup-models")],
                                   capture_output=True, text=True)
                mm = re.search(r"QUARRY_TEST_MINILM=['\"]?([^'\"\n]+)", p.stdout)
                model = mm.group(1) if mm else None
            if model:
                log("part vector")
                rep["vector"] = part_vector(quarry, a.workdir, model, a.vector_probes)
            else:
                rep["vector"] = {"skipped": "no embedding model (scripts/setup-models failed)"}
            save(rep, a.out, text_report)
        if set(parts) & {"create", "search", "auth", "qmd"}:
            t1 = time.perf_counter()
            token, index = setup_team(quarry, home, a.spaces, corpus)
            rep["setup"] = {"corpus_s": corpus_s, "index": index,
                            "setup_s": round(time.perf_counter() - t1, 2)}
            save(rep, a.out, text_report)
            if "create" in parts:
                log("part create")
                rep["create"] = part_create(quarry, home, token, pages, a.creates,
                                            a.keyword_probes, counts["s0"])
                save(rep, a.out, text_report)
            if "search" in parts:
                log("part search")
                rep["search"] = part_search(quarry, home, token, queries, a.spaces, counts)
                save(rep, a.out, text_report)
            if "auth" in parts:
                log("part auth")
                rep["auth"] = part_auth(quarry, home, token, a.auth_requests,
                                         REPO / "bench" / "results")
                save(rep, a.out, text_report)
            if "qmd" in parts:
                log("part qmd")
                step = max(1, len(queries) // a.qmd_queries)
                qs = queries[::step][:a.qmd_queries]
                rep["qmd"] = part_qmd(quarry, home, None if a.no_qmd else a.qmd,
                                      corpus / "s0", qs, a.qmd_runs, a.workdir,
                                      index["s0"]["wall_s"])
                save(rep, a.out, text_report)
    finally:
        if not a.keep:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(corpus, ignore_errors=True)
    rep["meta"]["total_s"] = round(time.perf_counter() - t0, 1)
    save(rep, a.out, text_report)
    print(text_report(rep))


if __name__ == "__main__":
    main()
