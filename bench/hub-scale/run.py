#!/usr/bin/env python3
"""Hub at scale (issue 45 item 6): Quarry's MCP gateway with 100 upstream MCP servers and
5,000 tools, beside the same 100 servers reached directly by the client, in the same run.

    python3 bench/hub-scale/run.py --quarry "$CARGO_TARGET_DIR/release/quarry" [--json OUT]

Run it with a Python that has the MCP SDK (the test venv, scripts/install-test-tools);
the replay server and the comparison clients use the same interpreter (`--python`).

Steps: build the fixture (fixture.py: the real catalog of eval/tools/catalog/ grown to 100
servers / 5,000 tools), serve it with eval/tools/replay_server.py (one process, one
Streamable HTTP endpoint per server), start `quarry serve` in a fresh QUARRY_HOME, register
the upstreams over REST in steps (10, 25, 50, 100 servers) and, after each, a short probe of
`tools/list` and `search_tools` (does latency grow with the catalog?); then at 100 servers:
`tools/list` on /api/mcp over one kept session and with a fresh session per call,
`search_tools` on /api/mcp?mode=search with the task texts of eval/tools/tasks.jsonl
(cycled), Quarry's memory (VmRSS/VmHWM of the `quarry serve` process) at start, after
registering and after the load, and an SDK agent's memory with one hub session. The
comparison, client.py in processes of its own: the 100 upstreams reached directly — connect
and list all of them (one after the other, and all at once), re-list them over the kept
connections, filter the 5,000 tools locally with BM25 — with the stdlib client and with the
official SDK (`mcp.Client`, 100 sessions). Figures, never pass/fail. See README.md here.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(HERE))
from benchkit import cpu_model, free_port, isolated_env, loadavg, percentile, save  # noqa: E402
from client import McpClient  # noqa: E402
from fixture import build, write  # noqa: E402

TASKS = REPO / "eval" / "tools" / "tasks.jsonl"
REPLAY = REPO / "eval" / "tools" / "replay_server.py"
CLK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print("[hub-scale]", *a, file=sys.stderr, flush=True)


def dist(xs, scale=1000.0, nd=3):
    """n, p50/p90/p99/mean/min/max of seconds, in ms by default."""
    if not xs:
        return {"n": 0}
    r = lambda v: round(v * scale, nd)  # noqa: E731
    return {"n": len(xs), "p50": r(percentile(xs, 50)), "p90": r(percentile(xs, 90)),
            "p99": r(percentile(xs, 99)), "max": r(max(xs)), "mean": r(statistics.fmean(xs)),
            "min": r(min(xs))}


def mem(pid) -> dict:
    out = {}
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith(("VmRSS:", "VmHWM:", "Threads:")):
            out[ln.split(":")[0]] = int(ln.split()[1])
    return {"rss_kb": out.get("VmRSS"), "hwm_kb": out.get("VmHWM"), "threads": out.get("Threads")}


def cpu_s(pid) -> float:
    raw = Path(f"/proc/{pid}/stat").read_text()
    f = raw[raw.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / CLK


class Proc:
    """A child in its own process group (stopped by that group's id)."""

    def __init__(self, argv, log_path: Path, env=None):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.p = subprocess.Popen([str(a) for a in argv], env=env, stdin=subprocess.DEVNULL,
                                  stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.p.pid

    def tail(self):
        return self.log_path.read_text(errors="replace")[-3000:]

    def close(self):
        if self.p.poll() is None:
            os.killpg(self.pid, signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.p.wait()
        self.log.close()


def http_json(port, method, path, body=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                  headers={"Content-Type": "application/json"} if body is not None else {})
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    return r.status, (json.loads(data) if data[:1] in (b"{", b"[") else data.decode("utf-8", "replace"))


def wait_until(what, fn, proc: Proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.p.poll() is not None:
            sys.exit(f"{what} exited ({proc.p.returncode}):\n{proc.tail()}")
        try:
            if fn():
                return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(f"{what}: not ready within {timeout} s\n{proc.tail()}")


def wait_for_load(max_load, wait_s):
    """Waits (up to wait_s) until the 1-minute load average is at most max_load."""
    t0 = time.monotonic()
    while True:
        la = loadavg()
        if la is None or la[0] <= max_load or time.monotonic() - t0 >= wait_s:
            return la, round(time.monotonic() - t0)
        log(f"load {la} above {max_load}; waiting ({round(time.monotonic() - t0)} s so far)")
        time.sleep(20)


def binary_facts(path: Path, kind: str | None) -> dict:
    p = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    st = path.stat()
    return {"path": str(path), "version": p.stdout.strip(),
            "kind": kind or ("release" if "release" in str(path) else ("debug" if "debug" in str(path) else "?")),
            "modified_utc": datetime.fromtimestamp(st.st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            "bytes": st.st_size}


def git_head() -> dict:
    def g(*a):
        r = subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)
        return r.stdout.strip()
    return {"commit": g("log", "-1", "--format=%h"), "commit_time": g("log", "-1", "--format=%ci")}


# ---------------------------------------------------------------------------------------------


class Hub:
    """`quarry serve` on a loopback port with a fresh home."""

    def __init__(self, binary: Path, work: Path, env: dict | None = None):
        home = work / "home"
        home.mkdir()
        self.port = free_port()
        self.proc = Proc([binary, "serve", "--port", self.port, "--allow-net", "127.0.0.1/32"],
                         work / "quarry.log", env={**isolated_env(home), **(env or {})})
        self.pid = self.proc.pid
        wait_until("quarry serve", lambda: http_json(self.port, "GET", "/health", timeout=2)[0] == 200, self.proc)
        self.base = f"http://127.0.0.1:{self.port}"

    def servers(self):
        st, v = http_json(self.port, "GET", "/api/v1/mcp/servers?limit=1000")
        if st != 200:
            sys.exit(f"GET /api/v1/mcp/servers: {st} {str(v)[:300]}")
        return {s["name"]: s for s in v["data"]}

    def catalog_tools(self) -> int:
        st, v = http_json(self.port, "GET", "/api/catalog")
        if st != 200:
            sys.exit(f"GET /api/catalog: {st} {str(v)[:300]}")
        return sum(c["toolCount"] for c in v["categories"])

    def register(self, snaps: list[dict], replay_base: str, timeout=300) -> dict:
        """POSTs each upstream, then waits until the catalog (GET /api/catalog, light) holds
        all their tools and every one of them is `ready` with all its tools (GET
        /api/v1/mcp/servers, which carries every tool definition, so polled only then).
        Counts POST answers that said `ready` with fewer tools than the upstream has."""
        before = self.catalog_tools()
        want = {s["server"]: len(s["tools"]) for s in snaps}
        t = time.perf_counter()
        early = 0
        for s in snaps:
            st, v = http_json(self.port, "POST", "/api/v1/mcp/servers",
                              {"name": s["server"], "transport_type": "http", "config": f"{replay_base}/{s['server']}/mcp"})
            if st != 201:
                sys.exit(f"registering {s['server']}: {st} {str(v)[:500]}")
            d = v.get("data", v)
            early += d.get("status") == "ready" and d.get("tool_count") != want[s["server"]]
        posted = time.perf_counter() - t
        deadline = time.monotonic() + timeout
        while self.catalog_tools() < before + sum(want.values()):
            if time.monotonic() > deadline:
                sys.exit(f"the catalog lacks tools after {timeout} s")
            time.sleep(0.05)
        catalogued = time.perf_counter() - t
        while True:
            rows = self.servers()
            waiting = [n for n, c in want.items() if rows.get(n, {}).get("status") == "connecting"
                       or (rows.get(n, {}).get("status") == "ready" and rows[n].get("tool_count") != c)]
            if not waiting:
                break
            if time.monotonic() > deadline:
                sys.exit(f"upstreams not settled after {timeout} s: {waiting[:10]}")
            time.sleep(0.25)
        bad = [f"{n}: {rows[n].get('status')} {rows[n].get('tool_count')}/{c} {rows[n].get('last_error') or ''}"
               for n, c in want.items() if rows[n].get("status") != "ready" or rows[n].get("tool_count") != c]
        if bad:
            sys.exit("upstreams not ready with all their tools:\n  " + "\n  ".join(bad[:20]))
        return {"posts_s": round(posted, 3), "catalogued_s": round(catalogued, 3),
                "ready_s": round(time.perf_counter() - t, 3), "post_ready_before_tools": early}


def timed_lists(client: McpClient, n: int, rss: tuple | None = None):
    """n tools/list on a kept session: (seconds each, bytes, tool count, client parse seconds).
    `rss` = (pid, list): the pid's VmRSS (KB) is appended every 50 calls, outside the timing."""
    lat, size, parse = [], 0, []
    for i in range(n):
        if rss and i % 50 == 0:
            rss[1].append(mem(rss[0])["rss_kb"])
        t = time.perf_counter()
        st, hdrs, body = client.request_raw("tools/list", {})
        lat.append(time.perf_counter() - t)
        size = len(body)
        if st != 200:
            sys.exit(f"tools/list: HTTP {st} {body[:300]!r}")
    for _ in range(3):
        t = time.perf_counter()
        res = client.parse(st, hdrs, body)
        parse.append(time.perf_counter() - t)
    return lat, size, len(res.get("tools", [])), sorted(parse)[1], bool(res.get("nextCursor")), hdrs.get("content-type")


def timed_searches(client: McpClient, tasks: list[str], n: int, start: int = 0, rss: tuple | None = None):
    lat, empty, errors, sizes = [], 0, 0, []
    for i in range(n):
        if rss and i % 100 == 0:
            rss[1].append(mem(rss[0])["rss_kb"])
        q = tasks[(start + i) % len(tasks)]
        t = time.perf_counter()
        st, hdrs, body = client.request_raw("tools/call", {"name": "search_tools", "arguments": {"query": q, "limit": 5}})
        lat.append(time.perf_counter() - t)
        sizes.append(len(body))
        try:
            res = client.parse(st, hdrs, body)
        except RuntimeError:
            errors += 1
            continue
        if res.get("isError"):
            errors += 1
        elif not (res.get("structuredContent") or {}).get("tools"):
            empty += 1
    return lat, empty, errors, sizes


def perf_rows(data: Path, children: bool, limit: str) -> list[tuple[float, str]]:
    """(percent, symbol) rows of `perf report` (--no-inline: inline resolution is slow)."""
    argv = ["perf", "report", "-i", str(data), "--no-inline", "--sort", "symbol" if children else "dso,symbol",
            "-g", "none", "--percent-limit", limit, "--children" if children else "--no-children"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    rows = []
    for ln in p.stdout.splitlines():
        parts = ln.split()
        if ln.startswith("#") or not parts or not parts[0].endswith("%"):
            continue
        try:
            pct = float(parts[0].rstrip("%"))
        except ValueError:
            continue
        rest = " ".join(parts[2:] if children else parts[1:]).replace("[.] ", "").replace("[k] ", "[kernel] ")
        while rest.endswith(" -"):
            rest = rest[:-2]
        rows.append((pct, rest))
    return rows


def has_symbols(binary: Path) -> bool:
    p = subprocess.run(["readelf", "-S", str(binary)], capture_output=True, text=True) if shutil.which("readelf") else None
    return bool(p and ".symtab" in p.stdout)


def profile(hub, tasks: list[str], work: Path, n_list: int, n_search: int) -> dict:
    """perf record (DWARF call graphs) of `quarry serve` during tools/list and search_tools
    calls made for it (not part of the timed figures): top functions by self time, and
    Quarry's own functions inclusive of what they call."""
    if not shutil.which("perf"):
        return {"skipped": "perf not found"}
    out = {}
    for label, path, n in (("tools/list", "/api/mcp", n_list), ("search_tools", "/api/mcp?mode=search", n_search)):
        c = McpClient(f"{hub.base}{path}")
        data = work / f"perf-{label.replace('/', '-')}.data"
        rec = subprocess.Popen(["perf", "record", "-F", "499", "--call-graph", "dwarf,16384", "-p", str(hub.pid),
                                "-o", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)
        if label == "tools/list":
            timed_lists(c, n)
        else:
            timed_searches(c, tasks, n)
        rec.send_signal(signal.SIGINT)
        try:
            _, err = rec.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            rec.kill()
            out[label] = {"skipped": "perf record did not stop"}
            continue
        finally:
            c.close()
        if not data.exists() or data.stat().st_size == 0:
            out[label] = {"skipped": f"perf record failed: {err.decode(errors='replace')[-300:]}"}
            continue
        own = [{"pct": pct, "symbol": sym[:140]} for pct, sym in perf_rows(data, True, "1")
               if ("quarry_" in sym or "rmcp::" in sym or "serde_json::" in sym) and "{{closure}}" not in sym[-14:]]
        out[label] = {"calls": n, "self": [{"pct": pct, "symbol": sym[:140]} for pct, sym in perf_rows(data, False, "1.5")][:15],
                      "inclusive": own[:20]}
    return out


def attribution(a, snaps: list[dict], work: Path) -> dict:
    """Where the hub's memory goes, each in a fresh `quarry serve` with its own replay
    process: the same 100 upstreams with one tool each (the cost of an upstream), one
    upstream with all the tools (the cost of a tool), and the whole fixture with glibc held
    to one malloc arena (MALLOC_ARENA_MAX=1: how much of the RSS is per-thread arenas)."""
    one = snaps[0]["tools"][0]
    big_tools = []
    for s in snaps:
        for t in s["tools"]:
            big_tools.append(dict(t, name=f"t{len(big_tools)}_{t['name']}"[:64]))
    cases = [(f"{len(snaps)} upstreams x 1 tool", [dict(s, tools=[one]) for s in snaps], {}),
             (f"1 upstream x {len(big_tools)} tools", [dict(snaps[0], server="big", tools=big_tools)], {}),
             (f"{len(snaps)} upstreams, {len(big_tools)} tools, MALLOC_ARENA_MAX=1", snaps, {"MALLOC_ARENA_MAX": "1"})]
    # The gateway re-parses a whole response when its text contains `"resource"` (see
    # README.md): the fixture without the servers whose definitions contain it.
    plain = [s for s in snaps if '"resource"' not in json.dumps(s["tools"])]
    if len(plain) < len(snaps):
        cases.append((f"without the {len(snaps) - len(plain)} upstreams whose tools contain \"resource\"", plain, {}))
    out = []
    for label, case, env in cases:
        d = work / f"attr-{len(out)}"
        d.mkdir()
        paths = write(d / "fixture", case)
        rport = free_port()
        replay = Proc([a.python, REPLAY, "--http", rport, *paths], d / "replay.log")
        hub = None
        try:
            wait_until("replay server", lambda: http_json(rport, "GET", "/ready", timeout=2)[0] == 200, replay)
            hub = Hub(a.bin, d, env)
            time.sleep(1.0)
            m0 = mem(hub.pid)
            reg = hub.register(case, f"http://127.0.0.1:{rport}")["catalogued_s"]
            time.sleep(0.5)
            m1 = mem(hub.pid)
            c = McpClient(f"{hub.base}/api/mcp")
            cpu0 = cpu_s(hub.pid)
            lat, size, *_ = timed_lists(c, 13)
            cpu1 = cpu_s(hub.pid)
            c.close()
            row = {"list_bytes": size, "hub_cpu_ms_per_list": round((cpu1 - cpu0) * 1000 / len(lat), 1),"case": label, "upstreams": len(case), "tools": sum(len(x["tools"]) for x in case),
                   "register_s": round(reg, 2), "rss_start_kb": m0["rss_kb"], "rss_registered_kb": m1["rss_kb"],
                   "rss_after_lists_kb": mem(hub.pid)["rss_kb"], "list_ms": dist(lat[3:])}
            row["added_kb"] = m1["rss_kb"] - m0["rss_kb"]
            out.append(row)
            log(f"attribution: {label}: +{row['added_kb']} KB, list p50 {row['list_ms']['p50']} ms")
        finally:
            if hub:
                hub.proc.close()
            replay.close()
    return {"cases": out}


def run_client(python: str, mode: str, spec: dict, work: Path, timeout=600) -> dict:
    sp = work / f"spec-{mode}.json"
    sp.write_text(json.dumps(spec))
    t = time.perf_counter()
    p = subprocess.run([python, str(HERE / "client.py"), mode, str(sp)], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"client.py {mode} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_s"] = round(time.perf_counter() - t, 2)
    return out


# ---------------------------------------------------------------------------------------------


def measure(a, work: Path) -> dict:
    snaps = build(a.servers, a.tools)
    paths = write(work / "fixture", snaps)
    tasks = [json.loads(ln)["task"] for ln in TASKS.read_text(encoding="utf-8").splitlines() if ln.strip()]
    sizes = sorted(len(s["tools"]) for s in snaps)
    rep = {"fixture": {"servers": len(snaps), "tools": sum(sizes), "real_servers": sum(1 for s in snaps if "copy_of" not in s),
                       "copies": [s["server"] for s in snaps if "copy_of" in s],
                       "real_tools": sum(s["real_tools"] for s in snaps),
                       "tools_per_server": {"min": sizes[0], "median": sizes[len(sizes) // 2], "max": sizes[-1]},
                       "tasks": len(tasks)}}
    procs = []
    try:
        rport = free_port()
        replay = Proc([a.python, REPLAY, "--http", rport, *paths], work / "replay.log")
        procs.append(replay)
        t = time.perf_counter()
        wait_until("replay server", lambda: http_json(rport, "GET", "/ready", timeout=2)[0] == 200, replay)
        rep["replay"] = {"start_s": round(time.perf_counter() - t, 2)}
        replay_base = f"http://127.0.0.1:{rport}"
        log(f"replay server up ({rep['replay']['start_s']} s); starting quarry")

        hub = Hub(a.bin, work)
        procs.append(hub.proc)
        time.sleep(1.0)
        q = {"mem": {"start": mem(hub.pid)}, "steps": []}
        rep["quarry"] = q
        # Registration in steps, with a short probe after each.
        steps = sorted({min(int(x), len(snaps)) for x in a.steps.split(",")} | {len(snaps)})
        done = 0
        for n in steps:
            reg = hub.register(snaps[done:n], replay_base)
            done = n
            time.sleep(0.5)
            m = mem(hub.pid)
            c = McpClient(f"{hub.base}/api/mcp")
            lat, size, ntools, _, _, _ = timed_lists(c, a.probe_calls + 3)
            c.close()
            s = McpClient(f"{hub.base}/api/mcp?mode=search")
            slat, empty, errors, _ = timed_searches(s, tasks, a.probe_calls * 2 + 3)
            s.close()
            step = {"servers": n, "upstream_tools": sum(len(x["tools"]) for x in snaps[:n]), "listed_tools": ntools,
                    "register_s": reg["catalogued_s"], "register": reg, "mem": m, "list_ms": dist(lat[3:]), "list_bytes": size,
                    "search_ms": dist(slat[3:]), "search_errors": errors, "search_empty": empty}
            q["steps"].append(step)
            log(f"{n} servers ({step['upstream_tools']} tools) registered in {reg}; RSS {m['rss_kb']} KB; "
                f"list p50 {step['list_ms']['p50']} ms, search p50 {step['search_ms']['p50']} ms")
        q["register_total_s"] = round(sum(s["register_s"] for s in q["steps"]), 3)
        q["register_posts_s"] = round(sum(s["register"]["posts_s"] for s in q["steps"]), 3)
        q["post_ready_before_tools"] = sum(s["register"]["post_ready_before_tools"] for s in q["steps"])
        q["mem"]["after_register"] = q["steps"][-1]["mem"]
        rep["replay"]["mem_after_register"] = mem(replay.pid)

        # tools/list, one kept session.
        c = McpClient(f"{hub.base}/api/mcp")
        cpu0, pc0 = cpu_s(hub.pid), time.process_time()
        rss_list = []
        lat, size, ntools, parse, cursor, ctype = timed_lists(c, a.list_calls + 3, (hub.pid, rss_list))
        cpu1, pc1 = cpu_s(hub.pid), time.process_time()
        rss_list.append(mem(hub.pid)["rss_kb"])
        c.close()
        q["list_kept"] = {"ms": dist(lat[3:]), "bytes": size, "tools": ntools, "next_cursor": cursor,
                          "content_type": ctype, "client_json_parse_ms": round(parse * 1000, 2),
                          "hub_cpu_ms_per_call": round((cpu1 - cpu0) * 1000 / len(lat), 2),
                          "client_cpu_ms_per_call": round((pc1 - pc0) * 1000 / len(lat), 2),
                          "rss_kb_every_50": rss_list,
                          "first_half_p50": dist(lat[3:3 + a.list_calls // 2])["p50"],
                          "second_half_p50": dist(lat[3 + a.list_calls // 2:])["p50"]}
        log(f"tools/list kept session: {q['list_kept']['ms']}")

        # tools/list, a fresh session (and connection) per call.
        tot, init, lst = [], [], []
        for _ in range(a.fresh_calls):
            t = time.perf_counter()
            c = McpClient(f"{hub.base}/api/mcp")
            t1 = time.perf_counter()
            st, _, body = c.request_raw("tools/list", {})
            t2 = time.perf_counter()
            c.close()
            if st != 200:
                sys.exit(f"tools/list (fresh): HTTP {st}")
            tot.append(t2 - t)
            init.append(t1 - t)
            lst.append(t2 - t1)
        q["list_fresh"] = {"ms": dist(tot), "initialize_ms": dist(init), "list_ms": dist(lst)}
        log(f"tools/list fresh session: {q['list_fresh']['ms']}")

        # search_tools.
        s = McpClient(f"{hub.base}/api/mcp?mode=search")
        listed, _ = s.request("tools/list", {})
        q["search_mode_tools"] = [t["name"] for t in listed.get("tools", [])]
        timed_searches(s, tasks, 3)
        cpu0, pc0 = cpu_s(hub.pid), time.process_time()
        rss_search = []
        slat, empty, errors, ssizes = timed_searches(s, tasks, a.search_calls, rss=(hub.pid, rss_search))
        cpu1, pc1 = cpu_s(hub.pid), time.process_time()
        rss_search.append(mem(hub.pid)["rss_kb"])
        s.close()
        k = min(100, len(slat) // 2)
        q["search"] = {"ms": dist(slat), "errors": errors, "empty": empty, "limit": 5,
                       "response_bytes_mean": round(statistics.fmean(ssizes)),
                       "hub_cpu_ms_per_call": round((cpu1 - cpu0) * 1000 / len(slat), 2),
                       "client_cpu_ms_per_call": round((pc1 - pc0) * 1000 / len(slat), 2),
                       "rss_kb_every_100": rss_search,
                       "first_p50": dist(slat[:k])["p50"], "last_p50": dist(slat[-k:])["p50"], "k": k}
        log(f"search_tools: {q['search']['ms']}")
        time.sleep(0.5)
        q["mem"]["after_load"] = mem(hub.pid)

        # The agent's side with the hub: one SDK session.
        servers = [{"name": x["server"], "url": f"{replay_base}/{x['server']}/mcp", "tools": len(x["tools"])} for x in snaps]
        spec = {"servers": servers, "tasks": tasks, "rounds": a.direct_rounds, "search_calls": a.search_calls,
                "sdk_rounds": a.sdk_rounds, "hub": hub.base}
        rep["hub_sdk"] = run_client(a.python, "hub-sdk", spec, work)
        log(f"hub-sdk: {rep['hub_sdk']['mem']}")
        time.sleep(0.5)
        q["mem"]["end"] = mem(hub.pid)

        # The comparison: the same upstreams reached directly.
        rep["direct_raw"] = run_client(a.python, "direct-raw", spec, work)
        log(f"direct-raw: cold {rep['direct_raw']['cold_sequential_s']} s sequential, "
            f"{rep['direct_raw']['cold_concurrent_s']} s concurrent")
        rep["direct_sdk"] = run_client(a.python, "direct-sdk", spec, work)
        log(f"direct-sdk: cold {rep['direct_sdk']['cold_concurrent_s']} s; {rep['direct_sdk']['mem']}")
        rep["replay"]["mem_end"] = mem(replay.pid)
        if a.perf:
            # A stripped binary (a release build as CI ships it) gives perf nothing to name:
            # then a second binary with symbols (--perf-quarry) is profiled in a hub of its
            # own, the same upstreams registered.
            target, prof_bin = hub, a.bin
            if a.perf_quarry:
                prof_bin = work / "quarry-perf"
                shutil.copy2(a.perf_quarry, prof_bin)
                pw = work / "perf-hub"
                pw.mkdir()
                target = Hub(prof_bin, pw)
                procs.append(target.proc)
                target.register(snaps, replay_base)
            if not has_symbols(prof_bin):
                rep["profile"] = {"skipped": "the binary has no symbols (stripped); give --perf-quarry a build with symbols"}
            else:
                log("perf record during extra tools/list and search_tools calls")
                rep["profile"] = profile(target, tasks, work, a.perf_list, a.perf_search)
                rep["profile"]["binary"] = binary_facts(a.perf_quarry or a.quarry, None)
        log_text = hub.proc.tail()
        rep["quarry"]["log_warnings"] = [ln for ln in log_text.splitlines() if " WARN " in ln or " ERROR " in ln][-10:]
    finally:
        for p in reversed(procs):
            p.close()
    if not a.no_attribution:
        rep["attribution"] = attribution(a, snaps, work)
    return rep


# ---------------------------------------------------------------------------------------------


def summarize(rep: dict) -> None:
    """Adds the direct side's distributions (ms) next to the raw per-call seconds."""
    d = rep["direct_raw"]
    d["summary"] = {
        "round_sequential_ms": dist(d["round_sequential_s"]),
        "round_concurrent_ms": dist(d["round_concurrent_s"]),
        "per_upstream_list_ms": dist(d["per_upstream_list_s"]),
        "search_ms": dist(d["search_s"], nd=4),
    }
    sd = rep["direct_sdk"]
    sd["summary"] = {"round_concurrent_ms": dist(sd["round_concurrent_s"])}
    h = rep["hub_sdk"]
    h["summary"] = {"list_ms": dist(h["list_s"]), "search_ms": dist(h["search_s"])}


def fmt_ms(dd: dict) -> str:
    if not dd or not dd.get("n"):
        return "-"
    return f"{dd['p50']:g} / {dd['p90']:g} / {dd['p99']:g} / {dd['max']:g}"


def mb(kb):
    return f"{kb / 1024:.1f}" if kb is not None else "-"


def text_report(rep: dict) -> str:
    m, f, q, d, sd, h = rep["meta"], rep["fixture"], rep["quarry"], rep["direct_raw"], rep["direct_sdk"], rep["hub_sdk"]
    L = [f"# Hub at scale ({m['date']})",
         f"machine: {m['cpus']} CPUs ({m['cpu']}), load {m['load_start']} at start (waited {m['load_waited_s']} s), "
         f"{m.get('load_end')} at end; {m['platform']}",
         f"quarry: {m['quarry']['path']} ({m['quarry']['version']}), {m['quarry']['kind'].upper()} build, "
         f"modified {m['quarry']['modified_utc']} UTC; repository at {m['git']['commit']} ({m['git']['commit_time']})",
         f"python {m['python']} / mcp {m['mcp']}",
         f"fixture: {f['servers']} servers ({f['real_servers']} real + {len(f['copies'])} copies), {f['tools']} tools "
         f"(grown from {f['real_tools']} real definitions), per server min {f['tools_per_server']['min']} / median "
         f"{f['tools_per_server']['median']} / max {f['tools_per_server']['max']}; {f['tasks']} task texts",
         ""]
    if m.get("note"):
        L.insert(5, f"NOTE: {m['note']}")
    L += ["## Registration and growth (Quarry)",
          "servers  tools  listed  register s  RSS MB  list p50/p99 ms  search p50/p99 ms  search err",
          *[f"{s['servers']:>7}  {s['upstream_tools']:>5}  {s['listed_tools']:>6}  {s['register_s']:>10}  "
            f"{mb(s['mem']['rss_kb']):>6}  {s['list_ms']['p50']:>7} / {s['list_ms']['p99']:<6} "
            f"{s['search_ms']['p50']:>8} / {s['search_ms']['p99']:<7} {s['search_errors']:>5}" for s in q["steps"]],
          f"all {f['servers']} registered in {q['register_total_s']} s (sum of the steps: from the first POST until the catalog "
          f"holds every tool; the {f['servers']} POSTs alone {q['register_posts_s']} s); POST answers saying ready with fewer "
          f"tools than the upstream has: {q['post_ready_before_tools']} of {f['servers']}",
          ""]
    lk, lf, se = q["list_kept"], q["list_fresh"], q["search"]
    dsum, sdsum, hsum = d["summary"], sd["summary"], h["summary"]
    rows = [
        ("tools/list, kept session(s), ms p50/p90/p99/max",
         f"{fmt_ms(lk['ms'])} (1 call, {lk['tools']} tools, {lk['bytes']:,} B)",
         f"{fmt_ms(dsum['round_sequential_ms'])} ({f['servers']} calls one after the other); "
         f"{fmt_ms(dsum['round_concurrent_ms'])} ({f['servers']} at once)"),
        ("tools/list, fresh session(s), ms",
         f"{fmt_ms(lf['ms'])} (connect + initialize + list)",
         f"{d['cold_sequential_s'] * 1000:.0f} ({f['servers']} one after the other); {d['cold_concurrent_s'] * 1000:.0f} ({f['servers']} at once)"),
        ("find 5 tools for a task, ms",
         f"{fmt_ms(se['ms'])} (search_tools, {se['ms']['n']} calls)",
         f"{fmt_ms(dsum['search_ms'])} (local BM25 in the client; index build {d['search_index_s'] * 1000:.0f} ms)"),
        ("server-side memory, MB RSS",
         f"quarry serve: {mb(q['mem']['start']['rss_kb'])} start, {mb(q['mem']['after_register']['rss_kb'])} registered, "
         f"{mb(q['mem']['after_load']['rss_kb'])} after load (peak {mb(q['mem']['end']['hwm_kb'])})",
         "none (no hub)"),
        ("client memory, MB RSS (stdlib client)",
         "-",
         f"{mb(d['mem']['start']['rss_kb'])} start, {mb(d['mem']['connected']['rss_kb'])} connected+listed, "
         f"{mb(d['mem']['end']['rss_kb'])} end (peak {mb(d['mem']['end']['hwm_kb'])})"),
        ("agent on the MCP SDK: connect + list, ms",
         f"{h['cold_s'] * 1000:.0f} (1 session, {h['tools']} tools)",
         f"{sd['cold_concurrent_s'] * 1000:.0f} ({f['servers']} sessions at once)"),
        ("agent on the MCP SDK: list again, ms",
         f"{fmt_ms(hsum['list_ms'])} (list_tools, cache bypassed)",
         f"{fmt_ms(sdsum['round_concurrent_ms'])} ({f['servers']} list_tools at once)"),
        ("agent on the MCP SDK: memory, MB RSS",
         f"{mb(h['mem']['start']['rss_kb'])} after import, {mb(h['mem']['after_list_all']['rss_kb'])} holding the "
         f"{h['tools']}-tool list, {mb(h['mem']['after_search']['rss_kb'])} after search_tools (peak {mb(h['mem']['end']['hwm_kb'])})",
         f"{mb(sd['mem']['start']['rss_kb'])} after import, {mb(sd['mem']['connected']['rss_kb'])} with {f['servers']} sessions, "
         f"{mb(sd['mem']['end']['rss_kb'])} end (peak {mb(sd['mem']['end']['hwm_kb'])})"),
    ]
    w = max(len(r[0]) for r in rows)
    L += [f"## Quarry hub vs the {f['servers']} upstreams reached directly (same run, same upstream process)"]
    for r in rows:
        L += [f"{r[0]:<{w}}  QUARRY  {r[1]}", f"{'':<{w}}  DIRECT  {r[2]}"]
    L += ["",
          f"tools/list detail: {lk['content_type']}, client JSON parse {lk['client_json_parse_ms']} ms (median of 3, outside the timing), "
          f"hub CPU {lk['hub_cpu_ms_per_call']} ms/call, client CPU {lk['client_cpu_ms_per_call']} ms/call; "
          f"p50 first half {lk['first_half_p50']} ms, second half {lk['second_half_p50']} ms; nextCursor {lk['next_cursor']}",
          f"RSS MB during the kept-session lists (every 50): {', '.join(mb(x) for x in lk['rss_kb_every_50'])}; "
          f"during search_tools (every 100): {', '.join(mb(x) for x in se['rss_kb_every_100'])}",
          f"fresh session detail: initialize {fmt_ms(lf['initialize_ms'])} ms, list {fmt_ms(lf['list_ms'])} ms",
          f"search_tools detail: errors {se['errors']}, empty {se['empty']}, response {se['response_bytes_mean']} B mean, "
          f"hub CPU {se['hub_cpu_ms_per_call']} ms/call, client CPU {se['client_cpu_ms_per_call']} ms/call; "
          f"p50 first {se['k']} {se['first_p50']} ms, last {se['k']} {se['last_p50']} ms; search mode lists {q['search_mode_tools']}",
          f"direct detail: one upstream's tools/list {fmt_ms(dsum['per_upstream_list_ms'])} ms; {d['tools']} tools, "
          f"{d['bytes']:,} B over {f['servers']} lists; cold sequential = {d['cold_sequential_init_s']} s connect+initialize + "
          f"{d['cold_sequential_list_s']} s lists",
          f"MCP Python SDK as it comes (1 MiB SSE event cap) listing the hub's /api/mcp: {h['default_sdk_list']}; "
          f"the SDK rows above raise the cap to 256 MiB",
          f"replay server (the upstreams, one Python process): RSS {mb(rep['replay']['mem_after_register']['rss_kb'])} MB "
          f"after registration, {mb(rep['replay']['mem_end']['rss_kb'])} MB at end",
          f"quarry log warnings/errors: {len(q['log_warnings'])}",
          *attribution_lines(rep.get("attribution")),
          *profile_lines(rep.get("profile")),
          f"total {m['total_s']} s"]
    return "\n".join(L) + "\n"


def attribution_lines(att) -> list[str]:
    if not att:
        return []
    L = ["", "## Where the hub's memory goes (fresh quarry serve per case, registered at once)",
         "case                                                          upstreams  tools  register s  RSS start MB  registered MB  added MB  after lists MB  list p50 ms  hub CPU ms/list  list MB"]
    for r in att["cases"]:
        L.append(f"{r['case']:<62}{r['upstreams']:>9}  {r['tools']:>5}  {r['register_s']:>10}  {mb(r['rss_start_kb']):>12}  "
                 f"{mb(r['rss_registered_kb']):>13}  {mb(r['added_kb']):>8}  {mb(r['rss_after_lists_kb']):>14}  {r['list_ms']['p50']:>11}"
                 f"  {r['hub_cpu_ms_per_list']:>15}  {r['list_bytes'] / 1e6:>7.2f}")
    return L


def profile_lines(prof) -> list[str]:
    if not prof:
        return []
    if "skipped" in prof:
        return [f"profile: skipped ({prof['skipped']})"]
    b = prof["binary"]
    L = ["", f"## Where Quarry's CPU goes (perf, extra calls after the timed parts; {b['path']}, {b['kind']} build, "
             f"modified {b['modified_utc']} UTC)"]
    for label, p in prof.items():
        if label == "binary":
            continue
        if "skipped" in p:
            L.append(f"{label}: skipped ({p['skipped']})")
            continue
        L.append(f"{label} ({p['calls']} calls): self " + "; ".join(f"{r['pct']}% {r['symbol']}" for r in p["self"][:10]))
        L.append(f"{label}: inclusive " + "; ".join(f"{r['pct']}% {r['symbol']}" for r in p["inclusive"][:14]))
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quarry", required=True, type=Path, help="quarry binary (copied first, so a rebuild cannot swap it)")
    ap.add_argument("--kind", choices=("release", "debug"), help="the build kind, when the path does not say")
    ap.add_argument("--json", type=Path, help="write the report here (and the text report beside it, .txt)")
    ap.add_argument("--python", default=sys.executable, help="python with the MCP SDK (replay server, clients)")
    ap.add_argument("--servers", type=int, default=100)
    ap.add_argument("--tools", type=int, default=5000)
    ap.add_argument("--steps", default="10,25,50,100", help="registration steps (servers)")
    ap.add_argument("--probe-calls", type=int, default=30, help="tools/list calls per step (search: twice as many)")
    ap.add_argument("--list-calls", type=int, default=200)
    ap.add_argument("--fresh-calls", type=int, default=20)
    ap.add_argument("--search-calls", type=int, default=500)
    ap.add_argument("--direct-rounds", type=int, default=20, help="re-list rounds over the 100 direct connections")
    ap.add_argument("--sdk-rounds", type=int, default=5)
    ap.add_argument("--perf", action="store_true", help="also profile quarry serve with perf (after the timed parts)")
    ap.add_argument("--perf-quarry", type=Path, help="with --perf: profile this binary (with symbols) in a hub of its own")
    ap.add_argument("--perf-list", type=int, default=20)
    ap.add_argument("--perf-search", type=int, default=200)
    ap.add_argument("--no-attribution", action="store_true", help="skip the memory attribution runs")
    ap.add_argument("--max-load", type=float, default=1.5, help="wait until the 1-minute load is at most this")
    ap.add_argument("--wait-load", type=int, default=600, help="…for at most this many seconds")
    ap.add_argument("--note", default="", help="a line for the report header")
    a = ap.parse_args()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="quarry-hub-scale-"))
    a.bin = work / "quarry"
    shutil.copy2(a.quarry, a.bin)
    la, waited = wait_for_load(a.max_load, a.wait_load)
    try:
        import mcp  # noqa: F401
        from importlib.metadata import version
        mcp_version = version("mcp")
    except Exception:  # noqa: BLE001 — reported, not needed here
        mcp_version = "?"
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"), "cpus": os.cpu_count(),
            "cpu": cpu_model(), "platform": platform.platform(), "load_start": la, "load_waited_s": waited,
            "quarry": binary_facts(a.quarry, a.kind), "git": git_head(), "python": platform.python_version(),
            "mcp": mcp_version, "note": a.note,
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()
                         if k not in ("bin", "quarry", "json", "python")}}
    try:
        rep = measure(a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rep = {"meta": meta, **rep}
    summarize(rep)
    meta["total_s"] = round(time.monotonic() - started, 1)
    if a.json:
        save(rep, a.json, text_report)
        print(a.json.with_suffix(".txt").read_text())
    else:
        meta["load_end"] = loadavg()
        print(text_report(rep))


if __name__ == "__main__":
    main()
