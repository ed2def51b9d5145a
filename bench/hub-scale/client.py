"""Clients for bench/hub-scale/run.py: a minimal Streamable HTTP MCP client (imported by
run.py), and the comparison clients, each run as a process of its own so that its memory is
its own (run.py starts them; they print one JSON object on stdout).

    client.py direct-raw SPEC.json   # the 100 upstreams reached directly, stdlib client
    client.py direct-sdk SPEC.json   # the same with the official MCP Python SDK (`mcp.Client`)
    client.py hub-sdk SPEC.json      # one SDK session on Quarry's /api/mcp (and ?mode=search)

SPEC.json: {"servers": [{"name", "url", "tools"}], "tasks": [text…], "rounds": N,
"search_calls": N, "hub": "http://127.0.0.1:PORT"}.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import time
import urllib.parse
from pathlib import Path

PROTOCOL = "2025-11-25"
REPO = Path(__file__).resolve().parents[2]


def mem_kb() -> dict:
    """VmRSS and VmHWM (peak) of this process, KB."""
    out = {}
    for ln in Path("/proc/self/status").read_text().splitlines():
        if ln.startswith(("VmRSS:", "VmHWM:")):
            out[ln.split(":")[0]] = int(ln.split()[1])
    return {"rss_kb": out.get("VmRSS"), "hwm_kb": out.get("VmHWM")}


def rpc_messages(body: bytes, ctype: str | None) -> list[dict]:
    """JSON-RPC messages of a response: a JSON body, or the `data:` lines of an SSE one."""
    text = body.decode("utf-8", "replace")
    if "text/event-stream" in (ctype or ""):
        # split on "\n" only: str.splitlines would also cut at U+2028 and the like inside JSON
        return [json.loads(ln[5:].strip()) for ln in text.split("\n")
                if ln.startswith("data:") and ln[5:].strip().startswith("{")]
    return [json.loads(text)] if text.strip() else []


class McpClient:
    """Streamable HTTP MCP client over one keep-alive http.client connection (TCP_NODELAY):
    `initialize` (protocol 2025-11-25) + `notifications/initialized`, then JSON-RPC POSTs;
    JSON and SSE bodies are read to the end. `Mcp-Session-Id` is sent back when given."""

    def __init__(self, url: str, timeout: float = 60):
        u = urllib.parse.urlsplit(url)
        self.path = u.path + (f"?{u.query}" if u.query else "")
        self.c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        self.c.connect()
        self.c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rid = 0
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        res, _ = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                             "clientInfo": {"name": "quarry-hub-scale-bench", "version": "1"}})
        self.headers["MCP-Protocol-Version"] = res.get("protocolVersion") or PROTOCOL
        if self.session_id:
            self.headers["Mcp-Session-Id"] = self.session_id
        st, _, body = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if st not in (200, 202):
            raise RuntimeError(f"notifications/initialized {url}: HTTP {st} {body[:200]!r}")

    session_id = None

    def post(self, msg: dict):
        self.c.request("POST", self.path, body=json.dumps(msg).encode(), headers=self.headers)
        r = self.c.getresponse()
        body = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if hdrs.get("mcp-session-id"):
            self.session_id = hdrs["mcp-session-id"]
        return r.status, hdrs, body

    def request_raw(self, method: str, params: dict):
        """(status, headers, body bytes) of one request, the body read to the end, not parsed."""
        self.rid += 1
        return self.post({"jsonrpc": "2.0", "id": self.rid, "method": method, "params": params})

    def parse(self, st: int, hdrs: dict, body: bytes) -> dict:
        if st != 200:
            raise RuntimeError(f"HTTP {st}: {body[:300]!r}")
        for m in rpc_messages(body, hdrs.get("content-type")):
            if m.get("id") == self.rid:
                if "error" in m:
                    raise RuntimeError(json.dumps(m["error"])[:300])
                return m.get("result") or {}
        raise RuntimeError(f"no response with id {self.rid}: {body[:300]!r}")

    def request(self, method: str, params: dict):
        """(result, body bytes)."""
        st, hdrs, body = self.request_raw(method, params)
        return self.parse(st, hdrs, body), len(body)

    def close(self, delete: bool = True):
        if delete and "Mcp-Session-Id" in self.headers:
            try:
                self.c.request("DELETE", self.path, headers=self.headers)
                self.c.getresponse().read()
            except (OSError, http.client.HTTPException):
                pass
        self.c.close()


def eval_bm25():
    """BM25 and its tokenizer from eval/tools/run.py (the tool search eval's baseline)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tools_eval_run", REPO / "eval" / "tools" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.BM25, mod.tokens


# The SDK reads a Streamable HTTP answer sent as SSE with a cap on one event's size (1 MiB by
# default, mcp.client.streamable_http.DEFAULT_MAX_SSE_EVENT_SIZE). The measured SDK clients
# raise it, so that a list of thousands of tools can be read at all; hub_sdk first tries the
# default and reports what happens.
SSE_EVENT_CAP = 256 * 1024 * 1024


def sdk_client(url: str):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, max_sse_event_size=SSE_EVENT_CAP), read_timeout_seconds=120)


def leaf_error(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"[:300]


def secs(xs: list[float]) -> list[float]:
    return [round(x, 6) for x in xs]


# ---------------------------------------------------------------------------------------------
# The 100 upstreams reached directly, stdlib client: what an agent without a hub does.


def direct_raw(spec: dict) -> dict:
    BM25, tokens = eval_bm25()

    servers, out = spec["servers"], {"mem": {"start": mem_kb()}}

    def connect_list(s):
        t = time.perf_counter()
        c = McpClient(s["url"])
        t1 = time.perf_counter()
        res, n = c.request("tools/list", {})
        t2 = time.perf_counter()
        if len(res.get("tools", [])) != s["tools"] or res.get("nextCursor"):
            raise RuntimeError(f"{s['name']}: {len(res.get('tools', []))} tools, want {s['tools']}")
        return c, res["tools"], n, t1 - t, t2 - t1

    # Cold, one server after the other: connect + initialize + tools/list for each.
    t = time.perf_counter()
    got = [connect_list(s) for s in servers]
    out["cold_sequential_s"] = round(time.perf_counter() - t, 4)
    out["cold_sequential_init_s"] = round(sum(g[3] for g in got), 4)
    out["cold_sequential_list_s"] = round(sum(g[4] for g in got), 4)
    out["bytes"] = sum(g[2] for g in got)
    out["tools"] = sum(len(g[1]) for g in got)
    for g in got:
        g[0].close()
    # Cold, all at once (a thread per server, as an agent that connects in parallel).
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=len(servers))
    t = time.perf_counter()
    got = list(pool.map(connect_list, servers))
    out["cold_concurrent_s"] = round(time.perf_counter() - t, 4)
    clients = [g[0] for g in got]
    catalog = [(s["name"], tl) for s, (_, tl, *_r) in zip(servers, got)]
    out["mem"]["connected"] = mem_kb()

    def relist(c):
        t = time.perf_counter()
        st, hdrs, body = c.request_raw("tools/list", {})
        dt = time.perf_counter() - t
        if st != 200:
            raise RuntimeError(f"tools/list: HTTP {st}")
        return dt, len(body)

    # Refresh over the kept connections: one round = tools/list on every upstream.
    for c in clients[:5]:
        relist(c)
    seq, per_call, conc = [], [], []
    for _ in range(spec["rounds"]):
        t = time.perf_counter()
        per_call += [relist(c)[0] for c in clients]
        seq.append(time.perf_counter() - t)
    for _ in range(spec["rounds"]):
        t = time.perf_counter()
        list(pool.map(relist, clients))
        conc.append(time.perf_counter() - t)
    out["round_sequential_s"], out["round_concurrent_s"], out["per_upstream_list_s"] = secs(seq), secs(conc), secs(per_call)
    out["mem"]["after_lists"] = mem_kb()
    # Filtering the tools itself: the BM25 of eval/tools/run.py over what it listed.
    t = time.perf_counter()
    ids, docs = [], []
    for name, tl in catalog:
        for tool in tl:
            ids.append(f"{name}.{tool['name']}")
            docs.append(tokens(" ".join([name, tool["name"], tool.get("title") or "", tool.get("description") or ""])))
    index = BM25(docs)
    out["search_index_s"] = round(time.perf_counter() - t, 4)
    tasks, lat, empty = spec["tasks"], [], 0
    for i in range(spec["search_calls"]):
        t = time.perf_counter()
        top = index.top(tokens(tasks[i % len(tasks)]), 5)
        lat.append(time.perf_counter() - t)
        empty += not top
    out["search_s"], out["search_empty"] = secs(lat), empty
    out["mem"]["after_search"] = mem_kb()
    for c in clients:
        c.close()
    pool.shutdown()
    return out


# ---------------------------------------------------------------------------------------------
# The same with the official SDK: an agent on `mcp.Client`, one session per upstream.


def direct_sdk(spec: dict) -> dict:
    import anyio
    from mcp import Client  # noqa: F401  (imported before the first figure, as in hub_sdk)

    servers, out = spec["servers"], {"mem": {"start": mem_kb()}}

    async def main():
        clients: dict = {}
        done = anyio.Event()
        stop = anyio.Event()
        listed: dict[str, int] = {}

        async def hold(s):
            async with sdk_client(s["url"]) as c:
                r = await c.list_tools()
                listed[s["name"]] = len(r.tools)
                clients[s["name"]] = c
                if len(listed) == len(servers):
                    done.set()
                await stop.wait()

        async with anyio.create_task_group() as tg:
            t = time.perf_counter()
            for s in servers:
                tg.start_soon(hold, s)
            with anyio.fail_after(300):
                await done.wait()
            out["cold_concurrent_s"] = round(time.perf_counter() - t, 4)
            bad = [s["name"] for s in servers if listed.get(s["name"]) != s["tools"]]
            if bad:
                raise RuntimeError(f"tool counts differ: {bad[:5]}")
            out["tools"] = sum(listed.values())
            out["protocol"] = sorted({str(getattr(c, "protocol_version", "") or "") for c in clients.values()})
            out["mem"]["connected"] = mem_kb()
            rounds = []
            for _ in range(spec["sdk_rounds"]):
                t = time.perf_counter()
                async with anyio.create_task_group() as g:
                    for c in clients.values():
                        g.start_soon(lambda c=c: c.list_tools(cache_mode="bypass"))
                rounds.append(time.perf_counter() - t)
            out["round_concurrent_s"] = secs(rounds)
            out["mem"]["after_lists"] = mem_kb()
            stop.set()

    anyio.run(main)
    return out


# ---------------------------------------------------------------------------------------------
# The agent's side with the hub: one SDK session on Quarry.


def hub_sdk(spec: dict) -> dict:
    import anyio
    from mcp import Client

    out = {"mem": {"start": mem_kb()}}

    async def main():
        try:  # the SDK as it comes
            async with Client(f"{spec['hub']}/api/mcp", read_timeout_seconds=120) as c:
                out["default_sdk_list"] = f"ok, {len((await c.list_tools()).tools)} tools"
        except Exception as e:  # noqa: BLE001 — reported
            out["default_sdk_list"] = leaf_error(e)
        t = time.perf_counter()
        async with sdk_client(f"{spec['hub']}/api/mcp") as c:
            await c.list_tools()
            out["cold_s"] = round(time.perf_counter() - t, 4)
            lat = []
            for _ in range(spec["sdk_rounds"]):
                t = time.perf_counter()
                r = await c.list_tools(cache_mode="bypass")
                lat.append(time.perf_counter() - t)
            out["list_s"], out["tools"] = secs(lat), len(r.tools)
            out["mem"]["after_list_all"] = mem_kb()
        async with sdk_client(f"{spec['hub']}/api/mcp?mode=search") as c:
            names = [t.name for t in (await c.list_tools()).tools]
            lat = []
            for i in range(spec["sdk_rounds"] * 4):
                t = time.perf_counter()
                r = await c.call_tool("search_tools", {"query": spec["tasks"][i % len(spec["tasks"])], "limit": 5})
                lat.append(time.perf_counter() - t)
                if r.is_error:
                    raise RuntimeError(f"search_tools: {r.content}")
            out["search_mode_tools"], out["search_s"] = names, secs(lat)
            out["mem"]["after_search"] = mem_kb()

    anyio.run(main)
    return out


def main():
    mode, spec = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
    fn = {"direct-raw": direct_raw, "direct-sdk": direct_sdk, "hub-sdk": hub_sdk}[mode]
    out = fn(spec)
    out["mem"]["end"] = mem_kb()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
