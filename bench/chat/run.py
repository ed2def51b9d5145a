#!/usr/bin/env python3
"""Chat benchmark: `POST /api/v1/chat` (docs/chat.md) against a fake LLM, and the same tool loop
written in Python with the official SDKs (the peer), in the same run.

    python3 bench/chat/run.py --quarry PATH/quarry [--requests 50] [--rounds 5]
        [--parts rag,rounds,peer] [--followups 20] [--embed-pages 200] [--note TEXT]

The model is tests/interop/fake_llm.py (a scriptable OpenAI-compatible streaming fake) in this
process, with `EVENT_PAUSE = 0` and TCP_NODELAY on its connections so it answers as fast as it
can (see "The fake" below); its time is taken out of every figure through `model_ms`.

Parts (all by default):
  rag     time to first `rag_source`. Configurations, each a fresh QUARRY_HOME served with
          `quarry serve --chat-model openai:fake-chat`:
            keyword         the tldr English pages (7,425) as collection `tldr`
                            (`quarry collection add DIR --name tldr`), no embedding model
            keyword-sample  a sample of --embed-pages of those pages (every page the questions
                            are judged against, the rest evenly spaced), no model
            hybrid          the same sample after `quarry embed` with all-MiniLM-L6-v2 from
                            scripts/setup-models (served with QUARRY_EMBED_MODEL); the query is
                            embedded on every chat. No reranker (setup-models makes none).
          Per configuration --requests chats, each a fresh conversation with one question of
          eval/tldr-en.jsonl (keyword, question and paraphrase kinds interleaved), `kb_ids:
          ["tldr"]`, `use_tools: false`, after 3 untimed warm-up chats (the first one, cold, is
          reported on its own). Client-side (time.perf_counter from sending the request): to the
          `rag_source` event, to the first `delta`, to `done`; with `done.timings`. Then
          --followups two-turn conversations: the second turn (same conversation) makes Quarry
          ask the fake to rewrite the question (a non-streaming call, answered with another
          eval question) before it retrieves; its time to `rag_source` next to the first turns'.
  rounds  Quarry's own cost per model round: the fake calls a tool in each of --rounds rounds,
          then answers. Cells, interleaved chat by chat: `mcp` (server-everything's `echo`,
          registered over stdio as tests/interop/test_hub.py does, `tools: ["everything.echo"]`),
          `http` (a custom HTTP tool, `tools: ["custom.lookup"]`, GET to a loopback HTTP server
          in this process), `none` (no tools: one round, the answer). Per chat: overhead =
          total_ms - model_ms - tools_ms (server-side timings of `done`), divided by the rounds
          (model completions, `done.rounds`); tools_ms per call; the client's wall time.
  peer    bench/chat/peer_loop.py: the same scripted rounds in one Python process with the
          official `openai` SDK (AsyncOpenAI, streaming, tool-call deltas accumulated by index)
          against the same fake, and the official MCP Python SDK (stdio client to the same
          server-everything command) or an httpx GET to the same loopback server; overhead =
          wall - time inside the model stream - time inside the tool call. It serves no HTTP,
          stores nothing and frames no events: a floor, not a like-for-like server. Installed
          by bench/chat/install.sh (PyPI, ~/.cache/quarry-bench/chat); skipped with the reason
          when that fails.

The fake: fake_llm.py writes every SSE event in two TCP writes. Without TCP_NODELAY on the
fake's side, once a keep-alive connection is no longer fresh, Nagle holds each second half
until the ACK that Quarry's kernel delays (up to 40 ms): about 45 ms per model round, all of
it in `model_ms`. The bench sets TCP_NODELAY on the fake's accepted sockets (--fake-nagle
keeps the fake as it is). The fake's own time per completion (from its reading the request
to its writing `[DONE]`, `ChatRequest.started/ended`) is reported too: model_ms minus it is
the provider round trip as Quarry sees it (connection, request, stream parsing).

Client: the standard library's http.client, one keep-alive connection (TCP_NODELAY), SSE read
line by line. Quarry runs at its default log level, output to a file. Writes
bench/results/chat.json and bench/results/chat.txt. Figures, not pass/fail. See bench/README.md.
"""

import argparse
import http.client
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchkit import cpu_model, default_quarry, free_port, isolated_env, loadavg, percentile, save  # noqa: E402  (bench/benchkit.py)
HERE = Path(__file__).resolve().parent
HOME = Path.home()
WORK = HOME / ".cache" / "quarry-bench" / "chat" / "work"
CLK = os.sysconf("SC_CLK_TCK")
MODEL = "fake-chat"
API_KEY = "sk-fake-chat-bench"
WARMUP = 3
ANSWER = "To do that, use the command shown in [1]."
FOLLOW_UP = "And how would I do the same thing for every file in a folder?"
WARM_QUESTIONS = ["how do I extract a tar archive", "list the files in a directory",
                  "show disk usage of a folder", "find files by name", "kill a process by name"]

sys.path.insert(0, str(REPO / "tests" / "interop"))
import fake_llm  # noqa: E402  (tests/interop/fake_llm.py)

fake_llm.EVENT_PAUSE = 0  # the model as fast as it can be; its time is subtracted anyway


def log(*a):
    print("[chat]", *a, file=sys.stderr, flush=True)


def dist(xs, nd=3):
    """p50/p95/max/mean/min of milliseconds."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"n": 0}
    r = lambda v: round(v, nd)
    return {"n": len(xs), "p50": r(percentile(xs, 50)), "p95": r(percentile(xs, 95)),
            "max": r(max(xs)), "mean": r(statistics.fmean(xs)), "min": r(min(xs))}


def cpu_s(pid):
    """utime + stime of the process (all its threads; not its children), seconds."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    f = raw[raw.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / CLK


def rss_kb(pid):
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    except OSError:
        pass
    return None


def fsync_probe(n=30):
    """fsync latency of the disk the homes live on: n x (write 4 KiB, fsync), ms. Quarry's
    store commits with `synchronous = FULL`, so each commit waits for one of these."""
    path = WORK / "fsync-probe"
    lat = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for i in range(n):
            os.pwrite(fd, os.urandom(4096), (i % 8) * 4096)
            t = time.perf_counter()
            os.fsync(fd)
            lat.append((time.perf_counter() - t) * 1e3)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return dist(lat)


# ---------------------------------------------------------------------------------------
# The fake LLM and the loopback HTTP tool
# ---------------------------------------------------------------------------------------


def start_fake(keep_nagle):
    if not keep_nagle:
        orig = fake_llm._Handler.setup

        def setup(self):
            orig(self)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        fake_llm._Handler.setup = setup
    return fake_llm.FakeLLM.start()


def fake_ms(recs):
    """The fake's own time on these requests (reading the request done -> [DONE] written)."""
    return sum((r.ended - r.started) * 1e3 for r in recs if r.ended is not None)


class _ToolHandler(BaseHTTPRequestHandler):
    """GET /echo/WORD -> {"echo": "WORD"}, the whole answer in one write."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections += 1

    def do_GET(self):  # noqa: N802
        self.server.hits += 1
        word = self.path.split("/echo/", 1)[-1]
        body = json.dumps({"echo": word}).encode()
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.wfile.write(head + body)
        self.wfile.flush()


def start_tool_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _ToolHandler)
    srv.daemon_threads = True
    srv.hits = srv.connections = 0
    threading.Thread(target=srv.serve_forever, name="tool-http", daemon=True).start()
    return srv


# ---------------------------------------------------------------------------------------
# Quarry
# ---------------------------------------------------------------------------------------

def quarry_env(home, fake=None, **extra):
    """As tests/interop/conftest.py: no model settings from outside, the Hugging Face Hub
    offline with an empty model cache, then the chat provider (the fake) and `extra`."""
    env = isolated_env(home)
    if fake is not None:
        env.update(QUARRY_CHAT_BASE_URL=fake.base, QUARRY_CHAT_API_KEY=API_KEY)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def cli(quarry, env, *args, timeout=3600):
    t = time.perf_counter()
    p = subprocess.run([str(quarry), *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"quarry {' '.join(map(str, args))} failed ({p.returncode}): "
                           f"{p.stderr[-1500:]}")
    return p.stdout, dt


class Quarry:
    """`quarry serve --port P --chat-model openai:fake-chat` on a home, its output in a file."""

    def __init__(self, quarry, name, home, env):
        self.name, self.home, self.env = name, Path(home), env
        self.port = free_port()
        self.logpath = WORK / f"quarry-{name}.log"
        self.log = open(self.logpath, "w")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [str(quarry), "serve", "--port", str(self.port), "--chat-model", f"openai:{MODEL}"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self.pid = self.proc.pid
        deadline = time.time() + 180
        while True:
            try:
                st, _ = self.http("GET", "/health", timeout=2)
                if st == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError(f"quarry did not start: {self.logpath.read_text()[-1500:]}")
            time.sleep(0.05)
        self.start_s = round(time.perf_counter() - t0, 3)

    def http(self, method, path, body=None, timeout=300):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                      headers={"Content-Type": "application/json"} if body is not None else {})
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            return r.status, data.decode("utf-8", "replace")

    def register(self, body):
        t = time.perf_counter()
        st, v = self.http("POST", "/api/v1/mcp/servers", body)
        dt = time.perf_counter() - t
        d = (v or {}).get("data", {}) if isinstance(v, dict) else {}
        if st != 201 or d.get("status") != "ready":
            raise RuntimeError(f"register {body['name']}: HTTP {st}: {str(v)[:600]}")
        return {"seconds": round(dt, 3), "tool_count": d.get("tool_count"),
                "server": f"{d.get('server_name')} {d.get('server_version')}"}

    def add_tool(self, body):
        st, v = self.http("POST", "/api/v1/tools", body)
        if st != 201:
            raise RuntimeError(f"add tool {body['name']}: HTTP {st}: {str(v)[:600]}")
        return v["data"]

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait()
        else:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.log.close()


def quarry_version(quarry):
    p = subprocess.run([str(quarry), "--version"], capture_output=True, text=True,
                       env=quarry_env(WORK))
    return (p.stdout or p.stderr).strip() if p.returncode == 0 else None


class ChatClient:
    """`POST /api/v1/chat` over one keep-alive http.client connection; SSE read line by line,
    each event stamped with its arrival (ms after the request was sent)."""

    def __init__(self, port):
        self.port = port
        self.c = None

    def _connect(self):
        self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        self.c.connect()
        self.c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def chat(self, body):
        if self.c is None:
            self._connect()
        data = json.dumps({"stream": True, **body}).encode()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        events = []
        t0 = time.perf_counter()
        try:
            self.c.request("POST", "/api/v1/chat", body=data, headers=headers)
            r = self.c.getresponse()
            t_head = (time.perf_counter() - t0) * 1e3
            if r.status != 200:
                raise RuntimeError(f"chat: HTTP {r.status}: {r.read()[:500]!r}")
            name, buf = None, []
            while True:
                ln = r.readline()
                if not ln:
                    break
                ln = ln.decode("utf-8").rstrip("\r\n")
                if ln == "":
                    if buf:
                        t = (time.perf_counter() - t0) * 1e3
                        payload = json.loads("\n".join(buf))
                        events.append((payload["type"], payload["data"], t))
                    name, buf = None, []
                elif ln.startswith("data:"):
                    buf.append(ln[5:].lstrip(" "))
                elif ln.startswith("event:"):
                    name = ln[6:].strip()
            t_end = (time.perf_counter() - t0) * 1e3
        except (OSError, http.client.HTTPException):
            self.c.close()
            self.c = None
            raise
        return Chat(events, t_head, t_end)

    def close(self):
        if self.c is not None:
            self.c.close()


class Chat:
    def __init__(self, events, t_head, t_end):
        self.events, self.t_head, self.t_end = events, t_head, t_end

    def first(self, kind):
        return next(((d, t) for k, d, t in self.events if k == kind), (None, None))

    def all(self, kind):
        return [(d, t) for k, d, t in self.events if k == kind]

    @property
    def done(self):
        return self.first("done")[0]

    def check(self):
        types = [k for k, _, _ in self.events]
        if not types or types[-1] != "done":
            err = self.first("error")[0]
            raise RuntimeError(f"chat did not end with done: {types[-6:]} {err}")


# ---------------------------------------------------------------------------------------
# Part: rag
# ---------------------------------------------------------------------------------------


def questions(n):
    """n questions of eval/tldr-en.jsonl, the kinds interleaved (keyword, question,
    paraphrase, keyword, …), cycling when n exceeds the set."""
    rows = [json.loads(ln) for ln in (REPO / "eval" / "tldr-en.jsonl").read_text().splitlines()
            if ln.strip()]
    by = {}
    for r in rows:
        by.setdefault(r.get("kind"), []).append(r)
    inter = []
    for i in range(max(len(v) for v in by.values())):
        for k in sorted(by):
            if i < len(by[k]):
                inter.append(by[k][i])
    return [inter[i % len(inter)] for i in range(n)], inter


def hit(sources, relevant):
    want = {r.split("/", 1)[1] if r.startswith("pages/") else r for r in relevant}
    return any(any(str(s.get("file", "")).endswith(w) for w in want) for s in sources or [])


def rag_row(c, q=None):
    rag, t_rag = c.first("rag_source")
    _, t_delta = c.first("delta")
    d = c.done
    tm = d["timings"]
    return {
        "ttfr_ms": t_rag, "ttfd_ms": t_delta, "done_ms": c.first("done")[1], "end_ms": c.t_end,
        "head_ms": c.t_head, "conversation_ms": c.first("conversation")[1],
        "retrieval_ms": tm["retrieval_ms"], "model_ms": tm["model_ms"],
        "total_ms": tm["total_ms"],
        "before_retrieval_ms": (t_rag - tm["retrieval_ms"]) if t_rag is not None else None,
        "sources": len(rag or []), "hit": hit(rag, q["relevant"]) if q else None,
        "retrieval_query": d.get("retrieval_query"),
        "conversation_id": d.get("conversation_id"),
    }


def run_rag_config(a, quarry, fake, name, home, env, qs, followups, inter):
    q = Quarry(quarry, name, home, env)
    out = {"serve_start_s": q.start_s}
    cl = ChatClient(q.port)
    try:
        rss0 = rss_kb(q.pid)
        warm = []
        for i in range(WARMUP):
            fake.script([{"text": ANSWER, "pieces": 3}])
            c = cl.chat({"messages": [{"role": "user", "content": WARM_QUESTIONS[i]}],
                         "kb_ids": ["tldr"], "use_tools": False})
            c.check()
            warm.append(rag_row(c))
        out["cold"] = {k: round(v, 3) for k, v in warm[0].items()
                       if k in ("ttfr_ms", "ttfd_ms", "done_ms", "retrieval_ms")}
        rows = []
        for qq in qs:
            fake.script([{"text": ANSWER, "pieces": 3}])
            c = cl.chat({"messages": [{"role": "user", "content": qq["query"]}],
                         "kb_ids": ["tldr"], "use_tools": False})
            c.check()
            rows.append(rag_row(c, qq))
        out["first_turn"] = summarize_rag(rows)
        by_query = {}
        for qq, r in zip(qs, rows):
            by_query.setdefault(qq["query"], r)
        # Follow-ups: turn 1 (a question), turn 2 in the same conversation; Quarry asks the
        # fake (non-streaming) to rewrite turn 2, the fake answers another eval question.
        f_first, f_second, rewrites = [], [], []
        for i in range(followups):
            qa = inter[i % len(inter)]
            # turn 2 retrieves with a question also asked as a first turn above (paired)
            qb = qs[(i + len(qs) // 2) % len(qs)]
            fake.script([{"text": ANSWER, "pieces": 3}])
            c1 = cl.chat({"messages": [{"role": "user", "content": qa["query"]}],
                          "kb_ids": ["tldr"], "use_tools": False})
            c1.check()
            f_first.append(rag_row(c1, qa))
            n0 = len(fake.completions())
            fake.script([{"text": ANSWER, "pieces": 3}])
            fake.script_complete([qb["query"]])
            c2 = cl.chat({"messages": [{"role": "user", "content": FOLLOW_UP}],
                          "conversation_id": c1.done["conversation_id"],
                          "kb_ids": ["tldr"], "use_tools": False})
            c2.check()
            row = rag_row(c2, qb)
            rw = fake.completions()[n0:]
            row["rewrite_calls"] = len(rw)
            row["rewrite_fake_ms"] = fake_ms(rw)
            row["rewritten_ok"] = row["retrieval_query"] == qb["query"]
            same = by_query.get(qb["query"])
            if same is not None:  # the same retrieval query, asked as a first turn
                row["paired_added_ttfr_ms"] = row["ttfr_ms"] - same["ttfr_ms"]
                row["paired_added_retrieval_ms"] = row["retrieval_ms"] - same["retrieval_ms"]
            f_second.append(row)
        if followups:
            a1, a2 = summarize_rag(f_first), summarize_rag(f_second)
            out["follow_up"] = {
                "n": followups, "first_turn": a1, "second_turn": a2,
                "rewrite_fake_ms": dist([r["rewrite_fake_ms"] for r in f_second]),
                "rewrite_calls": sum(r["rewrite_calls"] for r in f_second),
                "rewritten_query_used": sum(r["rewritten_ok"] for r in f_second),
                "paired_added_ttfr_ms": dist([r.get("paired_added_ttfr_ms") for r in f_second]),
                "paired_added_retrieval_ms": dist([r.get("paired_added_retrieval_ms")
                                                   for r in f_second]),
                "added_ttfr_p50_ms": round(a2["ttfr_ms"]["p50"] - a1["ttfr_ms"]["p50"], 3),
                "added_retrieval_p50_ms": round(a2["retrieval_ms"]["p50"] -
                                                a1["retrieval_ms"]["p50"], 3),
            }
        out["rss_kb"] = {"after_start": rss0, "end": rss_kb(q.pid)}
    finally:
        cl.close()
        q.close()
    return out


def summarize_rag(rows):
    keys = ("ttfr_ms", "ttfd_ms", "done_ms", "end_ms", "head_ms", "conversation_ms",
            "retrieval_ms", "before_retrieval_ms", "model_ms", "total_ms")
    s = {k: dist([r[k] for r in rows]) for k in keys}
    s["n"] = len(rows)
    s["sources_mean"] = round(statistics.fmean(r["sources"] for r in rows), 2) if rows else None
    s["no_sources"] = sum(1 for r in rows if not r["sources"])
    hits = [r["hit"] for r in rows if r["hit"] is not None]
    s["relevant_in_sources"] = f"{sum(hits)}/{len(hits)}" if hits else None
    return s


def setup_models():
    """QUARRY_TEST_MINILM from the environment, else from `bash scripts/setup-models`."""
    p = os.environ.get("QUARRY_TEST_MINILM")
    if p and Path(p, "model.safetensors").exists():
        return p, "environment"
    r = subprocess.run(["bash", str(REPO / "scripts" / "setup-models")], capture_output=True,
                       text=True, timeout=1800)
    for ln in r.stdout.splitlines():
        if ln.startswith("export QUARRY_TEST_MINILM="):
            p = ln.split("=", 1)[1].strip()
            if Path(p, "model.safetensors").exists():
                return p, "scripts/setup-models"
    raise RuntimeError(f"scripts/setup-models gave no MiniLM: {r.stderr[-800:]}")


def sample_pages(pages, inter, n):
    """Every page the questions are judged against, then evenly spaced others, n in all."""
    allp = sorted(p.relative_to(pages).as_posix() for p in pages.rglob("*.md"))
    want = []
    for q in inter:
        for r in q["relevant"]:
            rel = r.split("/", 1)[1] if r.startswith("pages/") else r
            if rel in allp and rel not in want:
                want.append(rel)
    rest = [p for p in allp if p not in set(want)]
    k = max(0, n - len(want))
    if k and rest:
        step = len(rest) / k
        want += [rest[int(i * step)] for i in range(min(k, len(rest)))]
    return want, len(allp)


def docs_of(stdout):
    """'Added collection 'tldr' with 7424 documents (…)' -> '7424 docs'."""
    words = stdout.split()
    for i, w in enumerate(words):
        if w.startswith("document") and i and words[i - 1].isdigit():
            return f"{words[i - 1]} docs"
    return stdout.strip()[:40]


def part_rag(a, quarry, fake):
    pages = Path(a.corpus)
    qs, inter = questions(a.requests)
    followups = min(a.followups, len(inter))
    out = {"corpus": str(pages), "questions": f"eval/tldr-en.jsonl, {len(qs)} of {len(inter)} "
           "(keyword, question and paraphrase interleaved)", "configs": {}}
    # keyword: all pages
    home = WORK / "home-keyword"
    env = quarry_env(home, fake)
    stdout, dt = cli(quarry, env, "collection", "add", pages, "--name", "tldr")
    log(f"  keyword: {stdout.strip()} in {dt:.1f} s")
    cfg = {"index": {"documents_line": stdout.strip(), "docs": docs_of(stdout),
                     "seconds": round(dt, 2)}}
    cfg.update(run_rag_config(a, quarry, fake, "keyword", home, env, qs, followups, inter))
    out["configs"]["keyword"] = cfg
    log(f"  keyword: ttfr p50 {cfg['first_turn']['ttfr_ms']['p50']} ms")
    if a.embed_pages <= 0:
        out["skipped"] = {"hybrid": "--embed-pages 0"}
        return out
    # keyword-sample and hybrid: the same sample of pages, before and after `quarry embed`
    sample, total = sample_pages(pages, inter, a.embed_pages)
    sdir = WORK / "sample-pages"
    shutil.rmtree(sdir, ignore_errors=True)
    for rel in sample:
        dst = sdir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pages / rel, dst)
    out["sample"] = {"pages": len(sample), "of": total, "dir": str(sdir)}
    home = WORK / "home-hybrid"
    env = quarry_env(home, fake)
    stdout, dt = cli(quarry, env, "collection", "add", sdir, "--name", "tldr")
    stdout_sample = stdout
    cfg = {"index": {"documents_line": stdout.strip(), "docs": docs_of(stdout),
                     "seconds": round(dt, 2)}}
    cfg.update(run_rag_config(a, quarry, fake, "keyword-sample", home, env, qs, followups,
                              inter))
    out["configs"]["keyword-sample"] = cfg
    log(f"  keyword-sample: ttfr p50 {cfg['first_turn']['ttfr_ms']['p50']} ms")
    try:
        minilm, origin = setup_models()
    except Exception as e:  # noqa: BLE001
        out["skipped"] = {"hybrid": f"no embedding model: {e}"}
        return out
    env = quarry_env(home, fake, QUARRY_EMBED_MODEL=minilm)
    log(f"  embedding {len(sample)} pages with {minilm}")
    stdout, dt = cli(quarry, env, "embed", "--json")
    emb = json.loads(stdout)
    cfg = {"index": {"documents_line": f"{len(sample)} pages", "docs": docs_of(stdout_sample),
                     "seconds": round(dt, 2)},
           "embed": {"model": minilm, "from": origin, "seconds": round(dt, 2),
                     "chunks_embedded": emb.get("chunks_embedded"),
                     "total_chunks": emb.get("total_chunks")}}
    cfg.update(run_rag_config(a, quarry, fake, "hybrid", home, env, qs, followups, inter))
    out["configs"]["hybrid"] = cfg
    log(f"  hybrid: ttfr p50 {cfg['first_turn']['ttfr_ms']['p50']} ms")
    return out


# ---------------------------------------------------------------------------------------
# Part: rounds
# ---------------------------------------------------------------------------------------


def tool_steps(tool, arg, rounds, tag):
    steps = [{"tool_calls": [{"tool": tool, "arguments": {arg: f"{tag}r{r}"}}], "split": 3}
             for r in range(rounds)]
    return steps + [{"text": "Done: every round echoed.", "pieces": 3}]


def rounds_row(c, fake_recs, cpu):
    d = c.done
    tm = d["timings"]
    calls = c.all("tool_call")
    results = c.all("tool_result")
    call_t = {x["id"]: t for x, t in calls}
    gaps = [t - call_t[x["id"]] for x, t in results if x["id"] in call_t]
    errors = [x for x, _ in results if x.get("status") != "success"]
    n_calls = len(results)
    overhead = tm["total_ms"] - tm["model_ms"] - tm["tools_ms"]
    fk = fake_ms(fake_recs)
    return {
        "client_ms": c.first("done")[1], "end_ms": c.t_end,
        "conversation_ms": c.first("conversation")[1],
        "total_ms": tm["total_ms"], "model_ms": tm["model_ms"], "tools_ms": tm["tools_ms"],
        "retrieval_ms": tm["retrieval_ms"], "rounds": d["rounds"], "tool_rounds": d["tool_rounds"],
        "overhead_ms": overhead, "overhead_per_round_ms": overhead / d["rounds"],
        "tools_per_call_ms": tm["tools_ms"] / n_calls if n_calls else None,
        "duration_ms": [x.get("duration_ms") for x, _ in results],
        "client_tool_gap_ms": gaps, "tool_errors": len(errors),
        "error_samples": [str(e.get("result"))[:200] for e in errors[:2]],
        "fake_ms": fk,
        "provider_rtt_per_round_ms": (tm["model_ms"] - fk) / d["rounds"],
        "outside_loop_ms": c.first("done")[1] - tm["total_ms"],
        "all_in_per_round_ms": (c.first("done")[1] - fk - tm["tools_ms"]) / d["rounds"],
        "after_loop_ms": c.first("done")[1] - c.first("conversation")[1] - tm["total_ms"],
        "cpu_ms": cpu * 1e3,
    }


def summarize_rounds(rows):
    keys = ("client_ms", "end_ms", "conversation_ms", "total_ms", "model_ms", "tools_ms",
            "overhead_ms", "overhead_per_round_ms", "tools_per_call_ms", "fake_ms",
            "provider_rtt_per_round_ms", "outside_loop_ms", "after_loop_ms",
            "all_in_per_round_ms")
    s = {k: dist([r[k] for r in rows]) for k in keys}
    s["n"] = len(rows)
    s["rounds"] = sorted({r["rounds"] for r in rows})
    s["tool_rounds"] = sorted({r["tool_rounds"] for r in rows})
    s["duration_ms"] = dist([x for r in rows for x in r["duration_ms"] if x is not None])
    s["client_tool_gap_ms"] = dist([x for r in rows for x in r["client_tool_gap_ms"]])
    s["tool_errors"] = sum(r["tool_errors"] for r in rows)
    s["error_samples"] = [e for r in rows for e in r["error_samples"]][:3]
    total_rounds = sum(r["rounds"] for r in rows)
    s["quarry_cpu_us_per_round"] = round(sum(r["cpu_ms"] for r in rows) * 1e3 / total_rounds,
                                         1) if total_rounds else None
    s["quarry_cpu_us_per_chat"] = round(sum(r["cpu_ms"] for r in rows) * 1e3 / len(rows),
                                        1) if rows else None
    return s


def everything_cmd(a):
    js = a.everything or os.path.join(
        os.environ.get("QUARRY_MCP_SERVERS", ""),
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    node = a.node or os.environ.get("QUARRY_TEST_NODE") or shutil.which("node")
    if not os.path.exists(js) or not node:
        raise SystemExit(f"server-everything not found at {js!r} (or no node): source "
                         "~/.cache/quarry-test-env.sh (or eval \"$(bash "
                         "scripts/install-test-tools)\") or pass --everything/--node")
    return node, js


def part_rounds(a, quarry, fake, tools_srv):
    node, js = everything_cmd(a)
    home = WORK / "home-rounds"
    home.mkdir(parents=True, exist_ok=True)
    env = quarry_env(home, fake, QUARRY_CHAT_MAX_TOOL_ROUNDS=max(5, a.rounds))
    q = Quarry(quarry, "rounds", home, env)
    cl = ChatClient(q.port)
    out = {}
    try:
        out["registration"] = q.register({"name": "everything", "transport_type": "stdio",
                                          "config": f"{node} {js} stdio"})
        url = f"http://127.0.0.1:{tools_srv.server_address[1]}/echo/{{{{q}}}}"
        q.add_tool({"name": "lookup", "description": "Echoes a word over HTTP",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                   "required": ["q"]},
                    "http_url": url, "http_method": "GET"})
        cells = {
            "mcp": ({"tools": ["everything.echo"], "max_tool_rounds": a.rounds},
                    lambda i: tool_steps("echo", "message", a.rounds, f"q{i}")),
            "http": ({"tools": ["custom.lookup"], "max_tool_rounds": a.rounds},
                     lambda i: tool_steps("lookup", "q", a.rounds, f"q{i}")),
            "none": ({"use_tools": False},
                     lambda i: [{"text": "Done: no tools needed.", "pieces": 3}]),
        }
        rows = {k: [] for k in cells}
        order = list(cells)
        seq = 0
        for i in range(WARMUP + a.requests):
            rot = order[i % len(order):] + order[:i % len(order)]
            for k in rot:
                body, steps = cells[k]
                seq += 1
                fake.script(steps(seq))
                n0 = len(fake.streamed())
                c0 = cpu_s(q.pid)
                c = cl.chat({"messages": [{"role": "user", "content":
                                           f"Echo something, {a.rounds} times. ({seq})"}],
                             **body})
                cpu = cpu_s(q.pid) - c0
                c.check()
                if i >= WARMUP:
                    rows[k].append(rounds_row(c, fake.streamed()[n0:], cpu))
            if i == WARMUP - 1:
                log(f"  warm-up done ({WARMUP} chats per cell)")
        if fake.pending():
            log(f"  WARNING: {fake.pending()} scripted steps left unused")
        out["cells"] = {k: summarize_rounds(v) for k, v in rows.items()}
        out["rss_kb_end"] = rss_kb(q.pid)
        out["tool_http"] = {"requests": tools_srv.hits, "connections": tools_srv.connections}
    finally:
        cl.close()
        q.close()
    return out


# ---------------------------------------------------------------------------------------
# Part: peer
# ---------------------------------------------------------------------------------------


def find_peer():
    p = subprocess.run(["bash", str(HERE / "install.sh")], capture_output=True, text=True,
                       timeout=900)
    py = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    if p.returncode != 0 or not py or not os.path.exists(py):
        return None, f"bench/chat/install.sh failed ({p.returncode}): {p.stderr[-600:]}"
    return py, None


def part_peer(a, fake, tools_srv, py):
    node, js = everything_cmd(a)
    out = {}
    url = f"http://127.0.0.1:{tools_srv.server_address[1]}/echo/{{{{q}}}}"
    for kind in ("mcp", "http"):
        n = WARMUP + a.requests
        tool = "echo" if kind == "mcp" else "lookup"
        arg = "message" if kind == "mcp" else "q"
        for i in range(n):
            fake.script(tool_steps(tool, arg, a.rounds, f"peer{i}"))
        n0 = len(fake.streamed())
        res = WORK / f"peer-{kind}.json"
        argv = [py, str(HERE / "peer_loop.py"), "--base", fake.base, "--model", MODEL,
                "--requests", str(a.requests), "--rounds", str(a.rounds),
                "--warmup", str(WARMUP), "--tool", kind, "--out", str(res)]
        argv += (["--server-cmd", shlex.join([node, js, "stdio"]),
                  "--server-log", str(WORK / "peer-everything.log")] if kind == "mcp"
                 else ["--http-url", url])
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"peer_loop.py ({kind}) failed: {p.stderr[-1500:]}")
        d = json.loads(res.read_text())
        recs = fake.streamed()[n0:]
        per = a.rounds + 1
        recs = recs[WARMUP * per:]
        rows = []
        for j, ch in enumerate(d["chats"]):
            fk = fake_ms(recs[j * per:(j + 1) * per])
            overhead = ch["wall_ms"] - ch["model_ms"] - ch["tools_ms"]
            rows.append({
                "wall_ms": ch["wall_ms"], "model_ms": ch["model_ms"], "tools_ms": ch["tools_ms"],
                "overhead_ms": overhead, "overhead_per_round_ms": overhead / ch["rounds"],
                "tools_per_call_ms": ch["tools_ms"] / ch["tool_calls"] if ch["tool_calls"]
                else None,
                "fake_ms": fk, "provider_rtt_per_round_ms": (ch["model_ms"] - fk) / ch["rounds"],
                "all_in_per_round_ms": (ch["wall_ms"] - fk - ch["tools_ms"]) / ch["rounds"],
                "rounds": ch["rounds"]})
        s = {k: dist([r[k] for r in rows]) for k in
             ("wall_ms", "model_ms", "tools_ms", "overhead_ms", "overhead_per_round_ms",
              "tools_per_call_ms", "fake_ms", "provider_rtt_per_round_ms",
              "all_in_per_round_ms")}
        s["n"] = len(rows)
        s["rounds"] = sorted({r["rounds"] for r in rows})
        s["process_s"] = round(time.perf_counter() - t0, 2)
        if "session_start_ms" in d:
            s["mcp_session_start_ms"] = round(d["session_start_ms"], 1)
        s["bad_answers"] = sum(1 for ch in d["chats"] if not ch["answer"].startswith("Done"))
        out[kind] = s
        out["versions"] = d["versions"]
    if fake.pending():
        log(f"  WARNING: {fake.pending()} scripted steps left unused")
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


def g(d, *path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def text_report(rep):
    m = rep["meta"]
    o = [f"# Quarry chat benchmark ({m['date']})",
         f"machine: {m['cpus']} CPUs ({m['cpu_model']}), load {m['load_start']} at start, "
         f"{m.get('load_end')} at end; {m['platform']}",
         f"quarry: {m['quarry_bin']} ({m['quarry_version']}), {m['binary_kind'].upper()} "
         f"build, modified {m['quarry_mtime']}",
         f"model: tests/interop/fake_llm.py in the bench process (EVENT_PAUSE 0, "
         f"{'Nagle left on' if m['fake_nagle'] else 'TCP_NODELAY'}); python "
         f"{m['client_python']}; requests {m['requests']}, rounds {m['rounds']}",
         f"disk: fsync of a 4 KiB write in the work directory p50 {m['fsync_ms'].get('p50')} ms, "
         f"p95 {m['fsync_ms'].get('p95')} ms (Quarry's store commits with synchronous = FULL: "
         f"one fsync per commit)"]
    if m["binary_kind"] != "release":
        o.append("NOTE: figures from a DEBUG build of Quarry: not representative of release "
                 "speed.")
    if m.get("note"):
        o.append(f"NOTE: {m['note']}")
    o.append("")
    r = rep.get("rag")
    if r:
        o.append("## 1. RAG: time to first rag_source (ms, client-side from sending the "
                 "request)")
        o.append(r["method"])
        rows = []
        for name, c in r["configs"].items():
            f = c["first_turn"]
            rows.append([name, c["index"]["docs"], f["n"],
                         f["ttfr_ms"]["p50"], f["ttfr_ms"]["p95"], f["ttfr_ms"]["max"],
                         f["ttfd_ms"]["p50"], f["ttfd_ms"]["p95"],
                         f["done_ms"]["p50"], f["done_ms"]["p95"],
                         f["retrieval_ms"]["p50"], f["retrieval_ms"]["p95"],
                         f["before_retrieval_ms"]["p50"], f["model_ms"]["p50"],
                         c["cold"].get("ttfr_ms") and round(c["cold"]["ttfr_ms"], 1),
                         f["sources_mean"], f["no_sources"], f["relevant_in_sources"]])
        o.append(table(["config", "index", "n", "rag p50", "rag p95", "rag max", "delta p50",
                        "delta p95", "done p50", "done p95", "retr p50", "retr p95",
                        "pre-retr p50", "model p50", "cold rag", "sources", "none", "relevant"], rows))
        o.append("rag/delta/done: client-side arrival of the rag_source event, the first "
                 "delta, done. retr: done.timings.retrieval_ms (server). pre-retr: rag minus "
                 "retr (HTTP, request checks, conversation row, framing). model: model_ms. "
                 "cold rag: the first chat after the server started (untimed warm-up). "
                 "sources: passages per chat (mean; RAG_MIN_SCORE drops the rest of the top "
                 "5); none: chats with no passage. relevant: chats whose sources include a page the question is judged against.")
        rows = []
        for name, c in r["configs"].items():
            fu = c.get("follow_up")
            if not fu:
                continue
            a1, a2 = fu["first_turn"], fu["second_turn"]
            rows.append([name, fu["n"], a1["ttfr_ms"]["p50"], a1["ttfr_ms"]["p95"],
                         a2["ttfr_ms"]["p50"], a2["ttfr_ms"]["p95"], fu["added_ttfr_p50_ms"],
                         a1["retrieval_ms"]["p50"], a2["retrieval_ms"]["p50"],
                         fu["added_retrieval_p50_ms"], fu["rewrite_fake_ms"]["p50"],
                         f"{fu['rewritten_query_used']}/{fu['n']}"])
        if rows:
            o.append("follow-up turn (same conversation; Quarry asks the fake to rewrite the "
                     "question, non-streaming, before retrieving):")
            o.append(table(["config", "n", "turn1 rag p50", "turn1 rag p95", "turn2 rag p50",
                            "turn2 rag p95", "+rag p50", "turn1 retr p50", "turn2 retr p50",
                            "+retr p50", "fake rewrite p50", "rewrite used"], rows))
            for name, c in r["configs"].items():
                fu = c.get("follow_up")
                if fu and fu["paired_added_ttfr_ms"].get("n"):
                    pa, pr = fu["paired_added_ttfr_ms"], fu["paired_added_retrieval_ms"]
                    o.append(f"{name}: paired with the same retrieval query asked as a first "
                             f"turn ({pa['n']} pairs): turn 2 adds p50 {pa['p50']} ms (p95 "
                             f"{pa['p95']}) to rag_source, {pr['p50']} ms (p95 {pr['p95']}) "
                             f"to retrieval_ms")
            o.append("+rag/+retr: turn 2 minus turn 1 at p50; fake rewrite: the fake's own "
                     "time answering the rewrite call (the rest of +retr is Quarry's request, "
                     "the round trip and the stored history it loads).")
        for name, c in r["configs"].items():
            if c.get("embed"):
                e = c["embed"]
                o.append(f"{name}: quarry embed of {r['sample']['pages']} pages "
                         f"({e['total_chunks']} chunks, {Path(e['model']).name}) took "
                         f"{e['seconds']} s before serving.")
        if r.get("skipped"):
            o.append("skipped: " + "; ".join(f"{k}: {v}" for k, v in r["skipped"].items()))
        o.append("")
    rd = rep.get("rounds")
    pe = rep.get("peer")
    if rd or pe:
        o.append(f"## 2. Tool loop: overhead per round (ms; {m['rounds']} tool rounds + the "
                 "answer)")
        if rd:
            o.append(rd["method"])
        if pe and pe.get("method"):
            o.append(pe["method"])
        rows = []
        for k, c in (rd or {}).get("cells", {}).items():
            rows.append([f"quarry {k}", c["n"], "/".join(map(str, c["rounds"])),
                         c["client_ms"]["p50"], c["client_ms"]["p95"], c["model_ms"]["p50"],
                         c["fake_ms"]["p50"], c["tools_ms"]["p50"],
                         c["overhead_per_round_ms"]["p50"], c["overhead_per_round_ms"]["p95"],
                         c["provider_rtt_per_round_ms"]["p50"],
                         c["tools_per_call_ms"].get("p50"), c["tools_per_call_ms"].get("p95"),
                         c["all_in_per_round_ms"]["p50"], c["all_in_per_round_ms"]["p95"],
                         c["conversation_ms"]["p50"], c["after_loop_ms"]["p50"],
                         c["quarry_cpu_us_per_round"]])
        for k in ("mcp", "http"):
            c = (pe or {}).get(k)
            if not c:
                continue
            rows.append([f"peer {k}", c["n"], "/".join(map(str, c["rounds"])),
                         c["wall_ms"]["p50"], c["wall_ms"]["p95"], c["model_ms"]["p50"],
                         c["fake_ms"]["p50"], c["tools_ms"]["p50"],
                         c["overhead_per_round_ms"]["p50"], c["overhead_per_round_ms"]["p95"],
                         c["provider_rtt_per_round_ms"]["p50"],
                         c["tools_per_call_ms"].get("p50"), c["tools_per_call_ms"].get("p95"),
                         c["all_in_per_round_ms"]["p50"], c["all_in_per_round_ms"]["p95"],
                         "-", "-", "-"])
        o.append(table(["who", "n", "rounds", "client p50", "client p95", "model p50",
                        "fake p50", "tools p50", "ovh/round p50", "ovh/round p95",
                        "prov/round p50", "tool/call p50", "tool/call p95", "all-in/round p50",
                        "all-in/round p95", "conv p50", "after p50", "cpu us/round"], rows))
        o.append("client: Quarry's chats from sending the request to the done event (the "
                 "peer: its wall time). model/tools: done.timings.model_ms/tools_ms (the peer: "
                 "its own clocks around the stream and the call); fake: the fake's own time on "
                 "the chat's completions. ovh/round = (total_ms - model_ms - tools_ms) / rounds "
                 "(model completions; the peer: wall - model - tools). Quarry's clocks put "
                 "building the provider request, parsing its stream and emitting deltas inside "
                 "model_ms, the tool_call/tool_result events inside tools_ms and storing the "
                 "answer after total_ms, so ovh/round is only the loop's glue; prov/round = "
                 "(model - fake) / rounds: the provider request, loopback and stream parsing as "
                 "each side sees them. tool/call: tools_ms per call. all-in/round = (client - "
                 "fake - tools) / rounds: everything but the model's own time and the tool "
                 "calls, per-chat costs (HTTP, conversation rows, storing) included. conv: "
                 "client-side arrival of the conversation event (HTTP, request checks, the "
                 "conversation and message rows; the loop's clock starts right after). after: "
                 "client done - conv - total_ms (storing the answer, then the done event). cpu: "
                 "Quarry process CPU (its threads, not its children) per round, /proc ticks.")
        if rd:
            for k, c in rd["cells"].items():
                if c["duration_ms"].get("n"):
                    o.append(f"quarry {k}: tool_result.duration_ms p50 "
                             f"{c['duration_ms']['p50']}, client-side tool_call -> "
                             f"tool_result p50 {c['client_tool_gap_ms']['p50']} ms, p95 "
                             f"{c['client_tool_gap_ms']['p95']}; tool errors {c['tool_errors']}"
                             + (f" {c['error_samples']}" if c["error_samples"] else ""))
            th = rd.get("tool_http")
            if th:
                o.append(f"loopback HTTP tool server: {th['requests']} requests from Quarry over "
                         f"{th['connections']} TCP connections")
            reg = rd.get("registration")
            if reg:
                o.append(f"server-everything registration: {reg['seconds']} s, "
                         f"{reg['tool_count']} tools ({reg['server']})")
        if pe:
            if pe.get("versions"):
                v = pe["versions"]
                o.append(f"peer: openai {v['openai']}, mcp {v['mcp']}, python {v['python']}; "
                         f"MCP session start {g(pe, 'mcp', 'mcp_session_start_ms')} ms; the "
                         "peer serves no HTTP, stores nothing and frames no events: a floor, "
                         "not a like-for-like server.")
        o.append("")
    if rep.get("skipped"):
        o.append("skipped: " + "; ".join(f"{k}: {v}" for k, v in rep["skipped"].items()))
    o.append(f"total {m.get('total_s')} s")
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quarry", type=Path, default=default_quarry(),
                    help="quarry binary (default $QUARRY_BIN, else ~/.cache/quarry-target/"
                         "{release,debug}/quarry)")
    ap.add_argument("--parts", default="rag,rounds,peer")
    ap.add_argument("--requests", type=int, default=50, help="timed chats per configuration/cell")
    ap.add_argument("--rounds", type=int, default=5, help="tool rounds per chat (1..10)")
    ap.add_argument("--followups", type=int, default=20, help="two-turn conversations per RAG "
                    "configuration")
    ap.add_argument("--embed-pages", type=int, default=200,
                    help="pages in the embedded sample (0: no hybrid configuration)")
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "tldr" / "pages"),
                    help="the tldr English pages")
    ap.add_argument("--everything", help="server-everything's dist/index.js (default: under "
                    "$QUARRY_MCP_SERVERS)")
    ap.add_argument("--node", help="node (default $QUARRY_TEST_NODE, else node on PATH)")
    ap.add_argument("--fake-nagle", action="store_true",
                    help="leave the fake's sockets as fake_llm.py makes them (no TCP_NODELAY)")
    ap.add_argument("--note", help="a line for the report header")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (homes, logs)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "chat.json")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if not a.quarry or not a.quarry.exists():
        raise SystemExit("no quarry binary: pass --quarry PATH")
    if not 1 <= a.rounds <= 10:
        raise SystemExit("--rounds: 1..10 (a chat's max_tool_rounds is at most 10)")
    parts = [p for p in a.parts.split(",") if p]
    unknown = set(parts) - {"rag", "rounds", "peer"}
    if unknown:
        raise SystemExit(f"unknown parts: {sorted(unknown)}")
    quarry = a.quarry.resolve()
    if "rag" in parts and not Path(a.corpus).is_dir():
        raise SystemExit(f"no tldr pages at {a.corpus}: pass --corpus")
    if set(parts) & {"rounds", "peer"}:
        everything_cmd(a)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    kind = "release" if "/release/" in str(quarry) else "debug" if "/debug/" in str(quarry) \
        else "?"
    t0 = time.perf_counter()
    rep = {"meta": {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
        "cpu_model": cpu_model(), "platform": platform.platform(),
        "client_python": platform.python_version(), "load_start": loadavg(),
        "quarry_bin": str(quarry), "binary_kind": kind, "quarry_version": quarry_version(quarry),
        "quarry_mtime": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                      time.gmtime(quarry.stat().st_mtime)),
        "requests": a.requests, "rounds": a.rounds, "followups": a.followups,
        "embed_pages": a.embed_pages, "warmup": WARMUP, "fake_nagle": a.fake_nagle,
        "parts": parts, "argv": sys.argv, "note": a.note,
        "log_level": "Quarry at its default level (a line per request), output to a file",
    }, "skipped": {}}
    rep["meta"]["fsync_ms"] = fsync_probe()
    fake = start_fake(a.fake_nagle)
    tools_srv = start_tool_server()
    try:
        if "rag" in parts:
            log("part rag")
            l0 = loadavg()
            rep["rag"] = part_rag(a, quarry, fake)
            rep["rag"]["load"] = [l0, loadavg()]
            rep["rag"]["method"] = (
                f"Each configuration: a fresh QUARRY_HOME, `quarry serve --chat-model "
                f"openai:{MODEL}`; {WARMUP} untimed warm-up chats, then {a.requests} chats "
                f"({rep['rag']['questions']}), each a new conversation, kb_ids [\"tldr\"], "
                f"use_tools false; the fake answers with text in 3 pieces. RAG settings at "
                f"their defaults (RAG_TOP_K 5, RAG_ANN_TOP_K 20, RAG_MIN_SCORE 0, no "
                f"reranker). keyword = all pages; keyword-sample and hybrid = the same "
                f"{g(rep, 'rag', 'sample', 'pages')}-page sample before and after `quarry "
                f"embed` (all-MiniLM-L6-v2): the embedding run is too long for the whole "
                f"corpus here. Load {l0} -> {loadavg()}.")
            save(rep, a.out, text_report)
        if "rounds" in parts:
            log("part rounds")
            l0 = loadavg()
            rep["rounds"] = part_rounds(a, quarry, fake, tools_srv)
            rep["rounds"]["method"] = (
                f"Quarry, fresh home, server-everything registered over stdio and a custom HTTP "
                f"tool (GET to a loopback server in the bench); per cell {WARMUP} warm-up + "
                f"{a.requests} chats, the cells interleaved chat by chat (order rotating): mcp "
                f"(tools [everything.echo]) and http (tools [custom.lookup]) with the fake "
                f"calling the tool once in each of {a.rounds} rounds (arguments in 3 pieces) "
                f"then answering; none (use_tools false: one round, the answer). Load {l0} -> "
                f"{loadavg()}.")
            save(rep, a.out, text_report)
        if "peer" in parts:
            log("part peer")
            py, why = find_peer()
            if py is None:
                rep["skipped"]["peer"] = why
                log(f"  peer skipped: {why}")
            else:
                l0 = loadavg()
                rep["peer"] = part_peer(a, fake, tools_srv, py)
                rep["peer"]["python"] = py
                rep["peer"]["method"] = (
                    f"peer: bench/chat/peer_loop.py in its own process ({WARMUP} warm-up + "
                    f"{a.requests} chats per tool, the same script: {a.rounds} tool rounds then "
                    f"the answer): AsyncOpenAI streaming against the same fake, then "
                    f"mcp.ClientSession.call_tool over stdio to the same server-everything "
                    f"command (mcp) or an httpx GET to the same loopback server (http). Run after "
                    f"Quarry's cells. Load {l0} -> {loadavg()}.")
            save(rep, a.out, text_report)
    finally:
        fake.stop()
        tools_srv.shutdown()
        if not a.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    rep["meta"]["total_s"] = round(time.perf_counter() - t0, 1)
    save(rep, a.out, text_report)
    print(text_report(rep))


if __name__ == "__main__":
    main()
