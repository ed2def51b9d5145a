#!/usr/bin/env python3
"""Hub benchmark: Quarry's MCP hub side by side with peer proxies, same upstream, same run.

    python3 bench/hub/run.py --quarry PATH/quarry [--parts call,list,search,memory]
        [--calls 300] [--calls32 640] [--no-fastmcp] [--note TEXT]

Parts (all by default):
  call    `tools/call echo` latency at concurrency 1 and 32 against server-everything
          (@modelcontextprotocol/server-everything): DIRECT over its own Streamable HTTP (the
          baseline), through Quarry's hub (`/api/mcp?tools=everything.echo`, the upstream
          registered as stdio), through Quarry with the upstream registered as http (pointing
          at the direct server), through mcp-proxy and FastMCP's proxy (both in front of the
          same server over stdio), and over a bare stdio pipe (a reference floor, no HTTP).
          Every HTTP target is driven by the same client (below).
  list    `tools/list` of a generated 1,000-tool server (bench/hub/big_server.py): directly
          over HTTP, through Quarry (`/api/mcp?servers=big`, `--max-tools 1000`), mcp-proxy
          and FastMCP; Quarry's RSS before and after registering it
  search  `GET /api/catalog/search?q=…` over those 1,000 tools, a few queries
  memory  Quarry's RSS (VmRSS of its own process, children excluded) before registering and
          after registering 1, 5 and 10 upstreams (bench/hub/tiny_server.py); mcp-proxy and
          FastMCP with 1, 5 and 10 servers

With `perf` on PATH (and no --no-perf), the call part also records Quarry with DWARF call
graphs during extra c=1 echo calls and reports which of its functions the per-call CPU goes to.

The client: one implementation for every HTTP target, the standard library's http.client over
one keep-alive connection per client (TCP_NODELAY), one `initialize` + `notifications/
initialized` handshake (protocol 2025-11-25, `Mcp-Session-Id` when the server gives one), then
JSON-RPC POSTs; JSON and SSE response bodies are both read to the end. Concurrency 32 is 32
such clients (threads, one connection and session each) started together.

Peers come from bench/hub/install.sh (PyPI, into ~/.cache/quarry-bench/hub). Writes
bench/results/hub.json and bench/results/hub.txt. Figures, not pass/fail. See bench/README.md.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchkit import cpu_model, default_quarry, free_port, loadavg, percentile, save  # noqa: E402  (bench/benchkit.py)
HERE = Path(__file__).resolve().parent
HOME = Path.home()
WORK = HOME / ".cache" / "quarry-bench" / "hub" / "work"
PROTOCOL = "2025-11-25"
CLK = os.sysconf("SC_CLK_TCK")
QUERIES = ["create github issue", "send a slack message", "refund stripe payment",
           "kubernetes pod logs", "weather forecast", "export invoices",
           "search confluence pages", "postgres query plan"]


def log(*a):
    print("[hub]", *a, file=sys.stderr, flush=True)


def dist(xs, scale=1000.0, nd=3):
    """p50/p90/p99/mean/min/max of seconds, scaled (ms by default)."""
    if not xs:
        return {"n": 0}
    r = lambda v: round(v * scale, nd)
    return {"n": len(xs), "p50": r(percentile(xs, 50)), "p90": r(percentile(xs, 90)),
            "p99": r(percentile(xs, 99)), "mean": r(statistics.fmean(xs)), "min": r(min(xs)),
            "max": r(max(xs))}


# ---------------------------------------------------------------------------------------
# /proc: RSS and CPU of a process and its descendants
# ---------------------------------------------------------------------------------------


def proc_status(pid, key):
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    except OSError:
        pass
    return None


def rss_kb(pid):
    return proc_status(pid, "VmRSS")


def cpu_s(pid):
    """utime + stime of the process itself (its threads; not its children), seconds."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    f = raw[raw.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / CLK


def ctx_switches(pid):
    """Voluntary + involuntary context switches of all threads of a process."""
    n = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for t in tasks:
        try:
            for ln in (t / "status").read_text().splitlines():
                if ln.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(ln.split()[1])
        except OSError:
            pass
    return n


def descendants(pid):
    kids = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(raw[raw.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------
# Processes we start (each in its own process group, stopped by that group's id)
# ---------------------------------------------------------------------------------------


class Proc:
    def __init__(self, name, argv, env=None, logdir=WORK, port=None):
        self.name, self.argv, self.port = name, [str(a) for a in argv], port
        self.logpath = Path(logdir) / f"{name}.log"
        self.log = open(self.logpath, "w")
        self.proc = subprocess.Popen(self.argv, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.pid = self.proc.pid

    def wait_port(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}: "
                                   f"{self.logpath.read_text()[-1500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not listen on {self.port} in {timeout} s")

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
            try:  # children left behind by a leader that already exited
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.log.close()


# ---------------------------------------------------------------------------------------
# The one client
# ---------------------------------------------------------------------------------------


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


class McpClient:
    """Streamable HTTP MCP client over one keep-alive http.client connection."""

    def __init__(self, port, path):
        self.port, self.path, self.rid = port, path, 0
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.c.connect()
        self.c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers = {"Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        res, err, _, hdrs = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "quarry-hub-bench", "version": "1"}})
        if err:
            raise RuntimeError(f"initialize {port}{path}: {err}")
        self.server_info = res.get("serverInfo", {})
        self.protocol = res.get("protocolVersion")
        self.headers["MCP-Protocol-Version"] = self.protocol or PROTOCOL
        if hdrs.get("mcp-session-id"):
            self.headers["Mcp-Session-Id"] = hdrs["mcp-session-id"]
        st, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if st not in (200, 202):
            raise RuntimeError(f"notifications/initialized {port}{path}: HTTP {st}")

    def post(self, msg):
        try:
            self.c.request("POST", self.path, body=json.dumps(msg).encode(),
                           headers=self.headers)
            r = self.c.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException):
            self.c.close()  # the next request opens a new connection (same session)
            raise
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body

    def request(self, method, params):
        """(result, error text, response bytes, response headers)."""
        self.rid += 1
        rid = self.rid
        st, hdrs, body = self.post({"jsonrpc": "2.0", "id": rid, "method": method,
                                    "params": params})
        if st != 200:
            return None, f"HTTP {st}: {body[:200]!r}", len(body), hdrs
        for m in rpc_messages(body, hdrs.get("content-type")):
            if m.get("id") == rid:
                if "error" in m:
                    return None, json.dumps(m["error"])[:200], len(body), hdrs
                return m.get("result") or {}, None, len(body), hdrs
        return None, f"no response with id {rid}: {body[:200]!r}", len(body), hdrs

    def close(self):
        self.c.close()


class StdioClient:
    """The reference floor: JSON-RPC straight over a stdio pipe to the upstream (no HTTP),
    safe for concurrent callers (one writer lock, one reader thread)."""

    def __init__(self, argv, logpath):
        self.log = open(logpath, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)
        self.pid = self.proc.pid
        self.lock, self.rid, self.waiting = threading.Lock(), 0, {}
        threading.Thread(target=self._reader, daemon=True).start()
        res, err, _, _ = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "quarry-hub-bench", "version": "1"}})
        if err:
            raise RuntimeError(f"stdio initialize: {err}")
        self.server_info = res.get("serverInfo", {})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, msg):
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def _reader(self):
        for line in self.proc.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            slot = self.waiting.pop(m.get("id"), None) if "id" in m else None
            if slot is not None:
                slot[1].append(m)
                slot[0].set()

    def request(self, method, params):
        with self.lock:
            self.rid += 1
            rid = self.rid
        ev, box = threading.Event(), []
        self.waiting[rid] = (ev, box)
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if not ev.wait(120):
            return None, "timeout", 0, {}
        m = box[0]
        if "error" in m:
            return None, json.dumps(m["error"])[:200], 0, {}
        return m.get("result") or {}, None, 0, {}

    def close(self):
        pass

    def stop(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def echo_call(client, tool, i):
    """One tools/call echo; returns an error text or None."""
    msg = f"hub-bench-{i}"
    res, err, _, _ = client.request("tools/call", {"name": tool, "arguments": {"message": msg}})
    if err:
        return err
    text = " ".join(c.get("text", "") for c in res.get("content", []) if isinstance(c, dict))
    if res.get("isError") or msg not in text:
        return f"unexpected result: {json.dumps(res)[:200]}"
    return None


# ---------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------


class Target:
    """Something to call: how to make a client, which tool is echo, whose CPU to count."""

    def __init__(self, key, label, make_client, proxy_pid, upstream_pids):
        self.key, self.label, self.make_client = key, label, make_client
        self.proxy_pid = proxy_pid          # the process in the middle (None: direct)
        self.upstream_pids = upstream_pids  # callable -> pids of the upstream server
        self.clients, self.tool = [], None

    def ensure_clients(self, n):
        while len(self.clients) < n:
            self.clients.append(self.make_client())
        if self.tool is None:
            res, err, _, _ = self.clients[0].request("tools/list", {})
            if err:
                raise RuntimeError(f"{self.key}: tools/list: {err}")
            names = [t["name"] for t in res.get("tools", [])]
            echo = [n for n in names if n == "echo" or n.endswith("__echo")
                    or n.endswith("_echo")]
            if not echo:
                raise RuntimeError(f"{self.key}: no echo tool in {names[:20]}")
            self.tool = echo[0]

    def cpu(self):
        p = cpu_s(self.proxy_pid) if self.proxy_pid else 0.0
        u = sum(cpu_s(x) for x in self.upstream_pids())
        return p, u

    def switches(self):
        return ctx_switches(self.proxy_pid) if self.proxy_pid else 0


def run_cell(target, conc, n_calls, warm, seq0):
    """n_calls tools/call echo over `conc` clients at once (each n_calls // conc calls) after
    `warm` untimed calls per client; latencies, errors, wall, CPU of proxy/upstream/client."""
    target.ensure_clients(conc)
    clients = target.clients[:conc]
    per = max(1, n_calls // conc)
    lat = [[] for _ in clients]
    errs = [[] for _ in clients]
    barrier = threading.Barrier(conc + 1, timeout=600)

    def call(cl, i):
        try:
            return echo_call(cl, target.tool, i)
        except Exception as e:  # a broken connection or a timeout: counted, not fatal
            return f"{type(e).__name__}: {e}"

    def work(k):
        cl = clients[k]
        for i in range(warm):
            call(cl, seq0 + i)
        barrier.wait()
        for i in range(per):
            t = time.perf_counter()
            e = call(cl, seq0 + k * per + i)
            lat[k].append(time.perf_counter() - t)
            if e:
                errs[k].append(e)
        barrier.wait()

    ths = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(conc)]
    for t in ths:
        t.start()
    barrier.wait()
    p0, u0 = target.cpu()
    s0 = target.switches()
    c0, t0 = time.process_time(), time.perf_counter()
    barrier.wait()
    wall = time.perf_counter() - t0
    c1 = time.process_time()
    p1, u1 = target.cpu()
    s1 = target.switches()
    for t in ths:
        t.join()
    return {"lat": [x for l in lat for x in l], "errors": [e for l in errs for e in l],
            "wall": wall, "proxy_cpu": p1 - p0, "upstream_cpu": u1 - u0, "client_cpu": c1 - c0,
            "proxy_switches": s1 - s0}


def merge_cells(cells):
    n = sum(len(c["lat"]) for c in cells)
    wall = sum(c["wall"] for c in cells)
    lat = [x for c in cells for x in c["lat"]]
    errors = [e for c in cells for e in c["errors"]]
    us = lambda k: round(sum(c[k] for c in cells) / n * 1e6, 1) if n else None
    return {"ms": dist(lat), "calls_per_s": round(n / wall, 1) if wall else None,
            "errors": len(errors), "error_samples": errors[:3],
            "proxy_cpu_us_per_call": us("proxy_cpu"),
            "upstream_cpu_us_per_call": us("upstream_cpu"),
            "client_cpu_us_per_call": us("client_cpu"),
            "proxy_ctx_switches_per_call": round(sum(c["proxy_switches"] for c in cells) / n, 1)
            if n else None}


# ---------------------------------------------------------------------------------------
# Quarry
# ---------------------------------------------------------------------------------------


def quarry_env(home):
    env = dict(os.environ, QUARRY_HOME=str(home), NO_COLOR="1")
    for k in ("QUARRY_EMBED_MODEL", "QUARRY_SPACE", "QUARRY_RERANK_MODEL",
              "QUARRY_EXPAND_MODEL", "QUARRY_SUMMARY_MODEL"):
        env.pop(k, None)
    return env


class Quarry:
    def __init__(self, quarry, name, extra=()):
        self.home = WORK / f"home-{name}"
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        self.port = free_port()
        self.p = Proc(f"quarry-{name}", [quarry, "serve", "--port", self.port, *extra],
                      env=quarry_env(self.home), port=self.port)
        self.pid = self.p.pid
        self.registered = set()
        deadline = time.time() + 180
        while True:
            try:
                st, _ = self.http("GET", "/health", timeout=2)
                if st == 200:
                    break
            except OSError:
                pass
            if self.p.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"quarry did not start: {self.p.logpath.read_text()[-1500:]}")
            time.sleep(0.1)

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

    def register(self, name, transport, config, args=(), **extra):
        t = time.perf_counter()
        body = {"name": name, "transport_type": transport, "config": config,
                "args": list(args), **extra}
        st, v = self.http("POST", "/api/v1/mcp/servers", body)
        dt = time.perf_counter() - t
        d = (v or {}).get("data", v) if isinstance(v, dict) else {}
        if st not in (200, 201) or d.get("status") != "ready":
            raise RuntimeError(f"register {name}: HTTP {st}: {str(v)[:600]}")
        self.registered.add(name)
        return {"seconds": round(dt, 3), "tool_count": d.get("tool_count"),
                "max_concurrency": d.get("max_concurrency"),
                "server": f"{d.get('server_name')} {d.get('server_version')}",
                "protocol": d.get("protocol_version")}

    def close(self):
        self.p.close()


def quarry_version(quarry):
    p = subprocess.run([str(quarry), "--version"], capture_output=True, text=True,
                       env=quarry_env(WORK))
    return p.stdout.strip()


# ---------------------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------------------


def find_peers(args):
    """{'mcp-proxy': bin dir, 'fastmcp': bin dir} from install.sh, or skip reasons."""
    peers, skipped = {}, {}
    p = subprocess.run(["bash", str(HERE / "install.sh")], capture_output=True, text=True,
                       timeout=900)
    for ln in p.stdout.splitlines():
        parts = ln.split(None, 1)
        if len(parts) == 2:
            peers[parts[0]] = Path(parts[1])
    for name in ("mcp-proxy", "fastmcp"):
        if name not in peers:
            skipped[name] = f"bench/hub/install.sh did not install it: {p.stderr[-400:]}"
    if args.no_fastmcp:
        peers.pop("fastmcp", None)
        skipped["fastmcp"] = "--no-fastmcp"
    return peers, skipped


def peer_version(bindir, name):
    if name == "mcp-proxy":
        p = subprocess.run([str(bindir / "mcp-proxy"), "--version"], capture_output=True,
                           text=True)
        return (p.stdout or p.stderr).strip()
    p = subprocess.run([str(bindir / "python"), "-c",
                        "import fastmcp, mcp.types; from importlib.metadata import version; "
                        "print('fastmcp', fastmcp.__version__, '/ mcp', version('mcp'))"],
                       capture_output=True, text=True)
    return (p.stdout or p.stderr).strip()


def start_mcp_proxy(bindir, name, command, named=None):
    """mcp-proxy serving COMMAND (a list) at /mcp, or named servers {name: list} at
    /servers/NAME/mcp."""
    port = free_port()
    argv = [bindir / "mcp-proxy", "--port", port]
    if named:
        for n, cmd in named.items():
            argv += ["--named-server", n, shlex.join(cmd)]
    else:
        argv += ["--", *command]
    p = Proc(name, argv, port=port)
    p.wait_port()
    return p


def start_fastmcp(bindir, name, command, config=None):
    port = free_port()
    argv = [bindir / "python", HERE / "fastmcp_proxy.py", port]
    if config:
        path = WORK / f"{name}.json"
        path.write_text(json.dumps(config))
        argv += ["--config", path]
    else:
        argv += command
    p = Proc(name, argv, port=port)
    p.wait_port()
    return p


# ---------------------------------------------------------------------------------------
# Parts
# ---------------------------------------------------------------------------------------


def part_call(a, env, peers, q):
    """tools/call echo latency, concurrency 1 and 32, every target up at once, interleaved."""
    ev = env["everything"]
    procs, targets, out = [], [], {"method": None, "targets": {}}
    try:
        port = free_port()
        direct = Proc("everything-http", [env["node"], ev, "streamableHttp"],
                      env=dict(os.environ, PORT=str(port)), port=port)
        procs.append(direct)
        direct.wait_port()
        targets.append(Target("direct", "server-everything direct (Streamable HTTP)",
                              lambda: McpClient(port, "/mcp"), None, lambda: [direct.pid]))
        reg = q.register("everything", "stdio", env["node"], [ev, "stdio"])
        reg_http = q.register("evhttp", "http", f"http://127.0.0.1:{port}/mcp")
        out["quarry_registration"] = {"stdio": reg, "http": reg_http}
        q_up = lambda: [x for x in descendants(q.pid) if "server-everything" in cmdline(x)]
        targets.append(Target("quarry", "Quarry hub, stdio upstream",
                              lambda: McpClient(q.port, "/api/mcp?tools=everything.echo"),
                              q.pid, q_up))
        targets.append(Target("quarry-http", "Quarry hub, http upstream (-> direct)",
                              lambda: McpClient(q.port, "/api/mcp?tools=evhttp.echo"),
                              q.pid, lambda: [direct.pid]))
        if "mcp-proxy" in peers:
            mp = start_mcp_proxy(peers["mcp-proxy"], "mcp-proxy-everything",
                                 [env["node"], ev, "stdio"])
            procs.append(mp)
            targets.append(Target("mcp-proxy", "mcp-proxy (sparfenyuk), stdio upstream",
                                  lambda: McpClient(mp.port, "/mcp"), mp.pid,
                                  lambda: descendants(mp.pid)))
        if "fastmcp" in peers:
            fm = start_fastmcp(peers["fastmcp"], "fastmcp-everything",
                               [env["node"], ev, "stdio"])
            procs.append(fm)
            targets.append(Target("fastmcp", "FastMCP create_proxy, stdio upstream",
                                  lambda: McpClient(fm.port, "/mcp"), fm.pid,
                                  lambda: descendants(fm.pid)))
        if not a.no_stdio_floor:
            sc = StdioClient([env["node"], ev, "stdio"], WORK / "everything-stdio.log")
            stdio_client = sc
            targets.append(Target("stdio", "reference: bare stdio pipe (no HTTP)",
                                  lambda: stdio_client, None, lambda: [sc.pid]))
        concs = [int(x) for x in a.concurrency.split(",")]
        log("sessions: " + ", ".join(t.key for t in targets))
        for t in targets:
            t0 = time.perf_counter()
            if t.key == "stdio":
                t.clients = [sc] * max(concs)
                t.ensure_clients(1)
            else:
                t.ensure_clients(max(concs))
            log(f"  {t.key}: {max(concs)} sessions in {time.perf_counter() - t0:.2f} s "
                f"(tool {t.tool})")
        seq = 0
        for conc in concs:
            n = a.calls if conc == 1 else a.calls32
            warm = a.warmup if conc == 1 else max(2, a.warmup // 10)
            cells = {t.key: [] for t in targets}
            for r in range(a.rounds):
                order = targets[r % len(targets):] + targets[:r % len(targets)]
                for t in order:
                    cells[t.key].append(run_cell(t, conc, n // a.rounds, warm if r == 0 else 2,
                                                 seq))
                    seq += 100000
                log(f"  c={conc} round {r + 1}/{a.rounds} done")
            for t in targets:
                m = merge_cells(cells[t.key])
                out["targets"].setdefault(t.key, {"label": t.label, "tool": t.tool})[
                    f"c{conc}"] = m
        for bkey, suffix in (("direct", ""), ("stdio", "_over_stdio")):
            base = out["targets"].get(bkey)
            if not base:
                continue
            for k, v in out["targets"].items():
                for ck in [f"c{c}" for c in concs]:
                    if k not in ("direct", "stdio") and ck in v and base[ck]["ms"].get("p50"):
                        for p in ("p50", "p99"):
                            v[ck][f"added_{p}_ms{suffix}"] = round(
                                v[ck]["ms"][p] - base[ck]["ms"][p], 3)
        if not a.no_perf:
            log("  profiling Quarry (perf)")
            out["quarry_profile"] = part_profile(a, q, next(t for t in targets
                                                            if t.key == "quarry"))
        out["upstream_processes"] = {
            "quarry": len(q_up()),
            **({"mcp-proxy": len(descendants(mp.pid))} if "mcp-proxy" in peers else {}),
            **({"fastmcp": len(descendants(fm.pid))} if "fastmcp" in peers else {})}
        out["method"] = (
            f"tools/call echo (server-everything {env['everything_version']}), "
            f"concurrency {a.concurrency}: {a.calls} calls at c=1, {a.calls32} at c=32 "
            f"({a.calls32 // 32} per client), split over {a.rounds} rounds; every target is "
            "up during the whole part and the rounds rotate the target order. Warm-up: "
            f"{a.warmup} untimed calls (c=1), {max(2, a.warmup // 10)} per client (c=32). "
            "Each client: one http.client keep-alive connection, one initialize handshake "
            f"({PROTOCOL}). 'added' = target minus the direct baseline at the same "
            "percentile. CPU columns: CPU time of the proxy process (children excluded), of "
            "the upstream server process(es) and of the benchmark client itself, per call "
            f"(/proc, {CLK} Hz ticks).")
        return out
    finally:
        for t in targets:
            if t.key != "stdio":
                for c in t.clients:
                    try:
                        c.close()
                    except OSError:
                        pass
        if not a.no_stdio_floor and "sc" in locals():
            sc.stop()
        for p in procs:
            p.close()


def perf_report(data, children, limit="0.2"):
    """(percent, symbol) rows of `perf report` (--no-inline: inline resolution through
    addr2line takes minutes on a debug binary)."""
    argv = ["perf", "report", "-i", str(data), "--no-inline", "--sort",
            "symbol" if children else "dso,symbol", "-g", "none", "--percent-limit", limit,
            "--children" if children else "--no-children"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    rows = []
    for ln in p.stdout.splitlines():
        if ln.startswith("#") or "%" not in ln:
            continue
        parts = ln.split()
        try:
            pct = float(parts[0].rstrip("%"))
        except ValueError:
            continue
        rest = " ".join(parts[2:] if children else parts[1:])
        while rest.endswith(" -"):
            rest = rest[:-2]
        rows.append((pct, rest))
    return rows


def crate_of(sym):
    s = sym.lstrip("<&*").replace("dyn ", "").replace("mut ", "")
    head = s.split("::", 1)[0] if "::" in s else s
    if head in ("core", "alloc", "std"):
        return "std/core/alloc (generic code)"
    return head if head.replace("_", "").isalnum() else "other"


def part_profile(a, q, target):
    """perf record (DWARF call graphs) of the Quarry process during a c=1 echo cell: which
    of Quarry's own functions the hub's per-call CPU goes to."""
    if not shutil.which("perf"):
        return {"skipped": "perf not found"}
    data = WORK / "perf.data"
    rec = subprocess.Popen(["perf", "record", "-F", "999", "--call-graph", "dwarf,16384",
                            "-p", str(q.pid), "-o", str(data)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    cell = merge_cells([run_cell(target, 1, a.perf_calls, 10, 5 * 10 ** 6)])
    rec.send_signal(signal.SIGINT)
    try:
        _, err = rec.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        rec.kill()
        return {"skipped": "perf record did not stop"}
    if not data.exists() or data.stat().st_size == 0:  # perf exits non-zero on SIGINT
        return {"skipped": f"perf record failed: {err.decode()[-300:]}"}
    inclusive = perf_report(data, True)
    keep = lambda sym: (("quarry_" in sym or "rusqlite" in sym
                         or sym.startswith("<tracing_subscriber::fmt::Subscriber"))
                        and "{{closure}}" not in sym.split("::")[-1][:12] or
                        sym.endswith("QuarryMcp::view"))
    funcs, seen = [], set()
    for pct, sym in inclusive:
        sym = sym.replace("[.] ", "")
        if keep(sym) and sym not in seen:
            seen.add(sym)
            funcs.append({"pct": pct, "symbol": sym[:150]})
    by_crate = {}
    selfrows = perf_report(data, False, limit="0")
    top_self = [{"pct": pct, "symbol": " ".join(sym.split())[:110]} for pct, sym in selfrows[:10]]
    for pct, sym in selfrows:
        dso, _, name = sym.partition(" ")
        key = "kernel" if "[k]" in name else (
            crate_of(name.replace("[.] ", "")) if dso == q.p.argv[0].rsplit("/", 1)[-1]
            else dso)
        by_crate[key] = round(by_crate.get(key, 0) + pct, 2)
    return {"method": f"perf record -F 999 --call-graph dwarf on the Quarry process during "
                      f"{a.perf_calls} tools/call echo at c=1 (not part of the timed cells); "
                      "percent of Quarry's samples, inclusive of callees (functions) or self "
                      "(crates).",
            "cell": cell, "functions": funcs[:30], "top_self": top_self,
            "self_by_crate": dict(sorted(by_crate.items(), key=lambda kv: -kv[1])[:12])}


def part_list(a, env, peers, q):
    big = [env["python"], HERE / "big_server.py", "--tools", str(a.tools)]
    out = {"method": None, "targets": {}}
    procs = []
    try:
        echo = None
        if "everything" in q.registered:
            # Does a call through the hub slow down when the catalog grows? The same c=1 cell
            # before and after the big server is registered.
            echo = Target("quarry", "Quarry hub, stdio upstream",
                          lambda: McpClient(q.port, "/api/mcp?tools=everything.echo"), q.pid,
                          lambda: [x for x in descendants(q.pid)
                                   if "server-everything" in cmdline(x)])
            echo_before = merge_cells([run_cell(echo, 1, a.calls, a.warmup, 0)])
        time.sleep(0.5)
        rss0 = rss_kb(q.pid)
        reg = q.register("big", "stdio", env["python"], [str(x) for x in big[1:]])
        time.sleep(0.5)
        out["quarry_registration"] = reg
        if echo:
            echo_after = merge_cells([run_cell(echo, 1, a.calls, a.warmup, 10 ** 6)])
            out["quarry_echo_vs_catalog_size"] = {
                "before": echo_before, "after": echo_after,
                "method": f"tools/call echo through /api/mcp?tools=everything.echo, c=1, "
                          f"{a.calls} calls, before and after registering the "
                          f"{a.tools}-tool server"}
        port = free_port()
        d = Proc("big-http", big + ["--http", str(port)], port=port)
        procs.append(d)
        d.wait_port()
        targets = [("direct", "big server direct (Streamable HTTP)", port, "/mcp"),
                   ("quarry", "Quarry hub /api/mcp?servers=big", q.port, "/api/mcp?servers=big")]
        if "mcp-proxy" in peers:
            mp = start_mcp_proxy(peers["mcp-proxy"], "mcp-proxy-big", big)
            procs.append(mp)
            targets.append(("mcp-proxy", "mcp-proxy, stdio upstream", mp.port, "/mcp"))
        if "fastmcp" in peers:
            fm = start_fastmcp(peers["fastmcp"], "fastmcp-big", big)
            procs.append(fm)
            targets.append(("fastmcp", "FastMCP create_proxy, stdio upstream", fm.port, "/mcp"))
        clients = {k: McpClient(p, path) for k, _, p, path in targets}
        lat = {k: [] for k, *_ in targets}
        info = {}
        for k, *_ in targets:
            for _ in range(3):
                res, err, nbytes, _ = clients[k].request("tools/list", {})
                if err:
                    raise RuntimeError(f"tools/list {k}: {err}")
            info[k] = {"tools": len(res.get("tools", [])), "bytes": nbytes,
                       "next_cursor": bool(res.get("nextCursor"))}
        errors = {k: 0 for k in lat}
        for i in range(a.list_calls):
            for k, *_ in (targets[i % len(targets):] + targets[:i % len(targets)]):
                t = time.perf_counter()
                res, err, _, _ = clients[k].request("tools/list", {})
                lat[k].append(time.perf_counter() - t)
                if err or len(res.get("tools", [])) != info[k]["tools"]:
                    errors[k] += 1
        for k, label, *_ in targets:
            out["targets"][k] = {"label": label, "ms": dist(lat[k]), "errors": errors[k],
                                 **info[k]}
        base = out["targets"]["direct"]["ms"]["p50"]
        for k, v in out["targets"].items():
            if k != "direct":
                v["added_p50_ms"] = round(v["ms"]["p50"] - base, 3)
        out["quarry_rss_kb"] = {"before_big": rss0, "after_big": rss_kb(q.pid)}
        out["method"] = (f"tools/list of bench/hub/big_server.py ({a.tools} generated tools, "
                         "official MCP Python SDK) over one session per target, "
                         f"{a.list_calls} calls each after 3 untimed, targets interleaved. "
                         "Quarry answers from its catalog; the proxies forward each list to "
                         "the upstream.")
        for c in clients.values():
            c.close()
        return out
    finally:
        for p in procs:
            p.close()


def part_search(a, q):
    out = {"queries": {}}
    allx = []
    for qq in QUERIES:
        path = f"/api/catalog/search?q={qq.replace(' ', '+')}&limit=10"
        c = http.client.HTTPConnection("127.0.0.1", q.port, timeout=60)
        c.connect()
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        xs, top, st = [], [], None
        for i in range(a.search_calls + 3):
            t = time.perf_counter()
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            dt = time.perf_counter() - t
            st = r.status
            if i >= 3:
                xs.append(dt)
        c.close()
        try:
            v = json.loads(body)
            top = [x.get("name") for x in v.get("tools", [])][:3]
        except ValueError:
            v = {}
        allx += xs
        out["queries"][qq] = {"ms": dist(xs), "status": st, "top3": top,
                              "hits": len(v.get("tools", []))}
    out["all_ms"] = dist(allx)
    out["method"] = (f"GET /api/catalog/search?q=QUERY&limit=10 over the {a.tools}-tool "
                     f"catalog (plus server-everything's tools), {len(QUERIES)} queries x "
                     f"{a.search_calls} after 3 untimed, one keep-alive connection per query.")
    return out


def part_memory(a, env, peers, quarry):
    tiny = lambda i: [env["python"], str(HERE / "tiny_server.py"), f"t{i}"]
    steps = [int(x) for x in a.memory_steps.split(",")]
    out = {"method": (f"VmRSS of the server process itself (children excluded) from "
                      f"/proc/PID/status, 0.5 s after the step; upstreams are "
                      f"bench/hub/tiny_server.py (stdlib, 3 tools) over stdio. Quarry: "
                      f"one fresh server, registering up to {steps[-1]} upstreams "
                      f"(`POST /api/v1/mcp/servers`) and listing `/api/mcp` after each "
                      f"step. Peers: one process per step, started with that many servers "
                      f"and listed once through each."),
           "steps": steps}
    q = Quarry(quarry, "memory", ["--max-tools", "1000"])
    try:
        c = McpClient(q.port, "/api/mcp")
        c.request("tools/list", {})
        c.close()
        time.sleep(0.5)
        rows = [{"upstreams": 0, "rss_kb": rss_kb(q.pid), "children_rss_kb": 0}]
        n = 0
        for s in steps:
            while n < s:
                n += 1
                q.register(f"t{n}", "stdio", tiny(n)[0], tiny(n)[1:])
            c = McpClient(q.port, "/api/mcp")
            t = time.perf_counter()
            res, err, _, _ = c.request("tools/list", {})
            list_s = time.perf_counter() - t
            c.close()
            time.sleep(0.5)
            kids = [x for x in descendants(q.pid)]
            rows.append({"upstreams": s, "rss_kb": rss_kb(q.pid),
                         "children": len(kids),
                         "children_rss_kb": sum(rss_kb(x) or 0 for x in kids),
                         "tools_listed": len((res or {}).get("tools", [])), "error": err,
                         "list_ms": round(list_s * 1000, 1)})
        out["quarry"] = {"rows": rows, **per_upstream(rows)}
    finally:
        q.close()
    for name in ("mcp-proxy", "fastmcp"):
        if name not in peers:
            continue
        rows = []
        for s in steps:
            named = {f"t{i}": tiny(i) for i in range(1, s + 1)}
            if name == "mcp-proxy":
                p = start_mcp_proxy(peers[name], f"mcp-proxy-mem{s}", None, named=named)
                paths = [f"/servers/t{i}/mcp" for i in range(1, s + 1)]
            else:
                cfg = {"mcpServers": {k: {"command": v[0], "args": v[1:], "transport": "stdio"}
                                      for k, v in named.items()}}
                p = start_fastmcp(peers[name], f"fastmcp-mem{s}", None, config=cfg)
                paths = ["/mcp"]
            try:
                listed, list_s = 0, 0.0
                for path in paths:
                    c = McpClient(p.port, path)
                    t = time.perf_counter()
                    res, err, _, _ = c.request("tools/list", {})
                    list_s += time.perf_counter() - t
                    c.close()
                    listed += len((res or {}).get("tools", []))
                time.sleep(0.5)
                kids = descendants(p.pid)
                rows.append({"upstreams": s, "rss_kb": rss_kb(p.pid), "children": len(kids),
                             "children_rss_kb": sum(rss_kb(x) or 0 for x in kids),
                             "tools_listed": listed, "list_ms": round(list_s * 1000, 1)})
            finally:
                p.close()
        out[name] = {"rows": rows, **per_upstream(rows)}
    return out


def per_upstream(rows):
    """KB per upstream: from the first row to the last, and the marginal slope past the
    first upstream."""
    r = {}
    a, z = rows[0], rows[-1]
    if z["upstreams"] > a["upstreams"] and a["rss_kb"] and z["rss_kb"]:
        r["kb_per_upstream"] = round((z["rss_kb"] - a["rss_kb"]) /
                                     (z["upstreams"] - a["upstreams"]))
    one = [x for x in rows if x["upstreams"] == 1]
    if one and z["upstreams"] > 1 and one[0] is not a:
        r["kb_per_upstream_after_first"] = round((z["rss_kb"] - one[0]["rss_kb"]) /
                                                 (z["upstreams"] - 1))
    return r


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def table(headers, rows):
    cols = list(zip(*([headers] + [[("" if c is None else str(c)) for c in r] for r in rows])))
    widths = [max(len(x) for x in c) for c in cols]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] +
                     [line(["" if c is None else c for c in r]) for r in rows])


def text_report(rep):
    m = rep["meta"]
    o = [f"# Quarry hub benchmark ({m['date']})",
         f"machine: {m['cpus']} CPUs ({m['cpu_model']}), load {m['load_start']} at start, "
         f"{m.get('load_end')} at end; {m['platform']}",
         f"quarry: {m['quarry_bin']} ({m['quarry_version']}), {m['binary_kind'].upper()} "
         f"build, modified {m['quarry_mtime']}",
         f"peers: " + "; ".join(f"{k}: {v}" for k, v in m["peers"].items()),
         f"upstream: server-everything {m['everything_version']} on node {m['node_version']}; "
         f"python {m['server_python_version']} for the generated servers"]
    if m["binary_kind"] != "release":
        o.append("NOTE: figures from a DEBUG build of Quarry: not representative of release "
                 "speed.")
    if m.get("note"):
        o.append(f"NOTE: {m['note']}")
    o.append("")
    c = rep.get("call")
    if c:
        o.append("## 1. tools/call echo (ms per call, client-side)")
        o.append(c["method"])
        for ck in [k for k in ("c1", "c32") if any(k in v for v in c["targets"].values())] + \
                  sorted({k for v in c["targets"].values() for k in v
                          if k.startswith("c") and k not in ("c1", "c32")}):
            rows = []
            for k, v in c["targets"].items():
                x = v.get(ck)
                if not x:
                    continue
                d = x["ms"]
                rows.append([k, d["n"], d["p50"], d["p90"], d["p99"],
                             x.get("added_p50_ms", "-"), x.get("added_p99_ms", "-"),
                             x.get("added_p50_ms_over_stdio", "-"),
                             x.get("added_p99_ms_over_stdio", "-"),
                             x["calls_per_s"], x["errors"],
                             x["proxy_cpu_us_per_call"] if k not in ("direct", "stdio") else "-",
                             x["upstream_cpu_us_per_call"], x["client_cpu_us_per_call"],
                             x.get("proxy_ctx_switches_per_call")
                             if k not in ("direct", "stdio") else "-"])
            o.append(f"concurrency {ck[1:]}:")
            o.append(table(["target", "n", "p50", "p90", "p99", "+p50", "+p99", "+p50 pipe",
                            "+p99 pipe", "calls/s", "err", "proxy cpu us", "upstream cpu us",
                            "client cpu us", "proxy ctxsw"], rows))
        o.append("+p50/+p99: added over the direct HTTP baseline; +p50/+p99 pipe: added over "
                 "the bare stdio pipe (what the HTTP hop and the proxy cost, for proxies of "
                 "a stdio upstream). cpu: microseconds of CPU per call; proxy ctxsw: context "
                 "switches of all the proxy's threads per call.")
        o.append("targets: " + "; ".join(f"{k} = {v['label']} (tool {v['tool']})"
                                         for k, v in c["targets"].items()))
        r = c.get("quarry_registration", {})
        if r:
            o.append("Quarry registration: " + "; ".join(
                f"{k} {v['seconds']} s, {v['tool_count']} tools, max_concurrency "
                f"{v['max_concurrency']}" for k, v in r.items()))
        o.append(f"upstream processes after the part: {c.get('upstream_processes')}")
        pr = c.get("quarry_profile")
        if pr and pr.get("skipped"):
            o.append(f"Quarry profile skipped: {pr['skipped']}")
        elif pr:
            o.append("")
            o.append("### Where Quarry's time goes (tools/call echo, c=1)")
            o.append(pr["method"] + f" Cell: p50 {pr['cell']['ms']['p50']} ms, hub CPU "
                     f"{pr['cell']['proxy_cpu_us_per_call']} us/call.")
            o.append("self time by crate (approximate: inlined code counts for its caller): "
                     + ", ".join(f"{k} {v}%"
                                                  for k, v in pr["self_by_crate"].items()))
            o.append("top self: " + "; ".join(f"{x['pct']}% {x['symbol']}"
                                              for x in pr.get("top_self", [])[:8]))
            o.append(table(["incl %", "function"],
                           [[f["pct"], f["symbol"]] for f in pr["functions"][:20]]))
        for k, v in c["targets"].items():
            for ck in ("c1", "c32"):
                if v.get(ck, {}).get("errors"):
                    o.append(f"errors {k} {ck}: {v[ck]['error_samples']}")
        o.append("")
    li = rep.get("list")
    if li:
        o.append(f"## 2. tools/list with {rep['meta']['tools']} tools (ms per call)")
        o.append(li["method"])
        rows = [[k, v["tools"], v["bytes"], v["ms"]["n"], v["ms"]["p50"], v["ms"]["p90"],
                 v["ms"]["p99"], v.get("added_p50_ms", "-"), v["errors"]]
                for k, v in li["targets"].items()]
        o.append(table(["target", "tools", "bytes", "n", "p50", "p90", "p99", "+p50", "err"],
                       rows))
        r = li["quarry_registration"]
        rs = li["quarry_rss_kb"]
        o.append(f"Quarry: registering the {r['tool_count']}-tool server took {r['seconds']} s "
                 f"(spawn + discovery + catalog); RSS {rs['before_big']} -> {rs['after_big']} KB "
                 f"({(rs['after_big'] or 0) - (rs['before_big'] or 0):+d} KB)")
        e = li.get("quarry_echo_vs_catalog_size")
        if e:
            b, z = e["before"], e["after"]
            o.append(f"Quarry tools/call echo (c=1) with {b['ms']['n']} calls, before -> after "
                     f"the {r['tool_count']} tools joined the catalog: p50 {b['ms']['p50']} -> "
                     f"{z['ms']['p50']} ms, p99 {b['ms']['p99']} -> {z['ms']['p99']} ms, hub "
                     f"CPU {b['proxy_cpu_us_per_call']} -> {z['proxy_cpu_us_per_call']} "
                     f"us/call")
        o.append("")
    s = rep.get("search")
    if s:
        o.append("## 3. Catalog search, GET /api/catalog/search (ms per request)")
        o.append(s["method"])
        rows = [[qq, v["ms"]["n"], v["ms"]["p50"], v["ms"]["p99"], v["hits"],
                 ", ".join(v["top3"])] for qq, v in s["queries"].items()]
        rows.append(["(all)", s["all_ms"]["n"], s["all_ms"]["p50"], s["all_ms"]["p99"], "", ""])
        o.append(table(["query", "n", "p50", "p99", "hits", "top 3"], rows))
        o.append("")
    mem = rep.get("memory")
    if mem:
        o.append("## 4. Memory per upstream (VmRSS KB of the hub/proxy process, children "
                 "excluded)")
        o.append(mem["method"])
        rows = []
        for name in ("quarry", "mcp-proxy", "fastmcp"):
            v = mem.get(name)
            if not v:
                continue
            byn = {r["upstreams"]: r for r in v["rows"]}
            rows.append([name] + [byn.get(n, {}).get("rss_kb") for n in [0] + mem["steps"]] +
                        [v.get("kb_per_upstream"), v.get("kb_per_upstream_after_first"),
                         byn.get(mem["steps"][-1], {}).get("children_rss_kb"),
                         byn.get(mem["steps"][-1], {}).get("children")])
        o.append(table(["server", "0"] + [str(n) for n in mem["steps"]] +
                       ["KB/upstream", "KB/upstream after 1st",
                        f"children RSS at {mem['steps'][-1]}", "children"], rows))
        o.append("tools/list (ms, first list after the step; the sum over endpoints for "
                 "mcp-proxy's per-server URLs): " + "; ".join(
                     f"{name} " + ", ".join(f"{r['upstreams']}: {r.get('list_ms')}"
                                            for r in mem[name]["rows"])
                     for name in ("quarry", "mcp-proxy", "fastmcp") if mem.get(name)))
        if mem.get("fastmcp") and not any(r["children"] for r in mem["fastmcp"]["rows"]
                                          if r["upstreams"] > 1):
            o.append("fastmcp keeps no upstream running with a multi-server config: it "
                     "starts every stdio server afresh for each request (see list ms), so "
                     "its RSS is not comparable past one server.")
        o.append("")
    if rep.get("skipped"):
        o.append("skipped: " + "; ".join(f"{k}: {v}" for k, v in rep["skipped"].items()))
    o.append(f"total {m.get('total_s')} s")
    return "\n".join(o) + "\n"


def server_python(arg):
    """An interpreter with the MCP Python SDK >= 2 (mcp.server.mcpserver) for big_server.py."""
    cands = [arg] if arg else [sys.executable,
                               os.path.join(os.environ.get("QUARRY_TEST_VENV", ""), "bin",
                                            "python")]
    for c in cands:
        if c and subprocess.run([c, "-c", "import mcp.server.mcpserver"],
                                capture_output=True).returncode == 0:
            return c
    raise SystemExit("no python with the MCP SDK (mcp >= 2: mcp.server.mcpserver); "
                     "source ~/.cache/quarry-test-env.sh or pass --server-python")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quarry", type=Path, default=default_quarry(),
                    help="quarry binary (default $QUARRY_BIN, else ~/.cache/quarry-target/"
                         "{release,debug}/quarry)")
    ap.add_argument("--parts", default="call,list,search,memory")
    ap.add_argument("--everything", help="server-everything's dist/index.js (default: under "
                    "$QUARRY_MCP_SERVERS)")
    ap.add_argument("--node", default=shutil.which("node"))
    ap.add_argument("--server-python", help="python with mcp >= 2 for the generated servers")
    ap.add_argument("--calls", type=int, default=300, help="timed calls per target at c=1")
    ap.add_argument("--calls32", type=int, default=640, help="timed calls per target at c=32")
    ap.add_argument("--concurrency", default="1,32")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tools", type=int, default=1000)
    ap.add_argument("--list-calls", type=int, default=30)
    ap.add_argument("--search-calls", type=int, default=20)
    ap.add_argument("--memory-steps", default="1,5,10")
    ap.add_argument("--no-fastmcp", action="store_true")
    ap.add_argument("--no-stdio-floor", action="store_true",
                    help="leave out the bare stdio pipe reference")
    ap.add_argument("--no-perf", action="store_true",
                    help="skip the perf profile of Quarry during echo calls")
    ap.add_argument("--perf-calls", type=int, default=1500)
    ap.add_argument("--note", help="a line for the report header")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (homes, logs)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "hub.json")
    a = ap.parse_args()
    # SIGTERM (a job being stopped) unwinds like Ctrl-C, so the servers we started are
    # stopped by the `finally` blocks.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if not a.quarry or not a.quarry.exists():
        raise SystemExit("no quarry binary: pass --quarry PATH")
    if not 1 <= a.tools <= 1000:
        raise SystemExit("--tools: 1..1000 (Quarry's --max-tools is at most 1000)")
    parts = [p for p in a.parts.split(",") if p]
    quarry = a.quarry.resolve()
    sys.setswitchinterval(0.0005)
    ev = a.everything or os.path.join(
        os.environ.get("QUARRY_MCP_SERVERS", ""),
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    if not os.path.exists(ev) or not a.node:
        raise SystemExit(f"server-everything not found at {ev!r} (or no node): source "
                         "~/.cache/quarry-test-env.sh or pass --everything/--node")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    py = server_python(a.server_python)
    ev_pkg = json.loads((Path(ev).parents[1] / "package.json").read_text())
    env = {"everything": ev, "node": a.node, "python": py,
           "everything_version": ev_pkg.get("version")}
    kind = "release" if "/release/" in str(quarry) else "debug" if "/debug/" in str(quarry) \
        else "?"
    t0 = time.perf_counter()
    peers, skipped = find_peers(a)
    rep = {"meta": {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
        "cpu_model": cpu_model(), "platform": platform.platform(),
        "client_python": platform.python_version(), "load_start": loadavg(),
        "quarry_bin": str(quarry), "binary_kind": kind,
        "quarry_version": quarry_version(quarry),
        "quarry_mtime": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                      time.gmtime(quarry.stat().st_mtime)),
        "node_version": subprocess.run([a.node, "--version"], capture_output=True,
                                       text=True).stdout.strip(),
        "server_python_version": subprocess.run(
            [py, "-c", "import platform; from importlib.metadata import version; "
                       "print(platform.python_version(), '/ mcp', version('mcp'))"],
            capture_output=True, text=True).stdout.strip(),
        "everything_version": env["everything_version"], "tools": a.tools,
        "peers": {k: peer_version(v, k) for k, v in peers.items()},
        "parts": parts, "argv": sys.argv, "note": a.note,
        "log_levels": "every server at its default log level (Quarry, mcp-proxy and "
                      "uvicorn log one line per request at INFO), output to a file",
    }, "skipped": skipped}
    q = None
    try:
        if set(parts) & {"call", "list", "search"}:
            q = Quarry(quarry, "hub", ["--max-tools", "1000"])
            if "call" in parts:
                log("part call")
                rep["call"] = part_call(a, env, peers, q)
                save(rep, a.out, text_report)
            if set(parts) & {"list", "search"}:
                log("part list")
                rep["list"] = part_list(a, env, peers, q)
                save(rep, a.out, text_report)
            if "search" in parts:
                log("part search")
                rep["search"] = part_search(a, q)
                save(rep, a.out, text_report)
            q.close()
            q = None
        if "memory" in parts:
            log("part memory")
            rep["memory"] = part_memory(a, env, peers, quarry)
            save(rep, a.out, text_report)
    finally:
        if q is not None:
            q.close()
        if not a.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    rep["meta"]["total_s"] = round(time.perf_counter() - t0, 1)
    save(rep, a.out, text_report)
    print(text_report(rep))


if __name__ == "__main__":
    main()
