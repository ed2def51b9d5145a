"""The hub between protocol eras (issue 21 item 5): every method the hub forwards
(`tools/call`, `prompts/get`, `resources/read`) to an upstream of each era — 2024-11-05,
2025-11-25, 2026-07-28, over stdio and over HTTP — reaches the official Python SDK in its
default mode (which negotiates 2026-07-28 and requires `resultType`, `ttlMs`, `cacheScope`)
and in its legacy mode (2025-11-25, where those fields do not exist).

Upstreams: ``upstreams/era_2024_server.py`` (exactly 2024-11-05: stdio and the HTTP+SSE
transport of that era), npm ``@modelcontextprotocol/server-everything`` (2025-11-25: stdio and
Streamable HTTP), ``upstreams/era_2026_server.py`` (Python SDK, 2026-07-28: stdio and Streamable
HTTP) and PyPI ``mcp-server-time`` (2026-07-28, stdio).
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import requests
from conftest import everything_cmd, everything_js, free_port, make_home, node, start_server, wait_port, settled
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).parent
OLD = HERE / "upstreams" / "era_2024_server.py"
NEW = HERE / "upstreams" / "era_2026_server.py"
OLD_NOTE = "A note from a 2024-11-05 server."
NEW_NOTE = "A note from a 2026-07-28 server."

# package → (protocol era, what to call, its arguments, text the answer holds,
#            (prompt, arguments, text) or None, (resource URI or None for the first listed, text) or None)
UPSTREAMS = {
    "old-stdio": ("2024-11-05", "echo", {"message": "hi"}, "echo: hi",
                  ("greet", {"who": "Ada"}, "Hello, Ada!"), ("memo://note", OLD_NOTE)),
    "old-sse": ("2024-11-05", "add", {"a": 2, "b": 40}, "42",
                ("greet", {"who": "Ada"}, "Hello, Ada!"), ("memo://note", OLD_NOTE)),
    "everything": ("2025-11-25", "echo", {"message": "hi"}, "hi",
                   ("simple-prompt", None, ""), (None, "")),
    "everything-http": ("2025-11-25", "get-sum", {"a": 2, "b": 40}, "42",
                        ("simple-prompt", None, ""), (None, "")),
    "new-stdio": ("2026-07-28", "echo", {"message": "hi"}, "echo: hi",
                  ("greet", {"who": "Ada"}, "Hello, Ada!"), ("memo://note", NEW_NOTE)),
    "new-http": ("2026-07-28", "add", {"a": 2, "b": 40}, "42",
                 ("greet", {"who": "Ada"}, "Hello, Ada!"), ("memo://note", NEW_NOTE)),
    "time": ("2026-07-28", "get_current_time", {"timezone": "UTC"}, "UTC", None, None),
}
# The SDK's default mode negotiates 2026-07-28 with Quarry; legacy mode the handshake's newest.
MODES = {"auto": "2026-07-28", "legacy": "2025-11-25"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@asynccontextmanager
async def mcp(url: str, mode: str):
    async with httpx2.AsyncClient(timeout=60) as hc:
        async with Client(streamable_http_client(url, http_client=hc), mode=mode, read_timeout_seconds=60) as c:
            yield c


@pytest.fixture(scope="module")
def eras(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    """One server with an upstream of each era over stdio and over HTTP registered."""
    root = tmp_path_factory.mktemp("eras")
    procs = []

    def spawn(key: str, args: list[str]) -> int:
        port = free_port()
        log = root / f"{key}.log"
        p = subprocess.Popen([a.replace("{port}", str(port)) for a in args], env={**os.environ, "PORT": str(port)},
                             stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        procs.append(p)
        wait_port(port, p, key, log=log)
        return port

    home = make_home(quarry_bin, corpus, root / "home")
    srv = start_server(home, logdir=root / "logs")
    try:
        old_sse = spawn("old-sse", [sys.executable, str(OLD), "sse", "{port}"])
        everything_http = spawn("everything-http", [node(), str(everything_js()), "streamableHttp"])
        new_http = spawn("new-http", [sys.executable, str(NEW), "http", "{port}"])
        bodies = {
            "old-stdio": {"transport_type": "stdio", "config": f"{sys.executable} {OLD} stdio"},
            "old-sse": {"transport_type": "sse", "config": f"http://127.0.0.1:{old_sse}/sse"},
            "everything": {"transport_type": "stdio", "config": everything_cmd()},
            "everything-http": {"transport_type": "http", "config": f"http://127.0.0.1:{everything_http}/mcp"},
            "new-stdio": {"transport_type": "stdio", "config": f"{sys.executable} {NEW} stdio"},
            "new-http": {"transport_type": "http", "config": f"http://127.0.0.1:{new_http}/mcp"},
            "time": {"transport_type": "stdio", "config": str(Path(sys.executable).parent / "mcp-server-time")},
        }
        registered = {}
        for name, body in bodies.items():
            r = requests.post(srv.url("/api/v1/mcp/servers"), json={"name": name, **body}, timeout=120)
            assert r.status_code == 201, r.text
            registered[name] = r.json()["data"]
        registered = {name: settled(srv, row) for name, row in registered.items()}
        yield {"srv": srv, "registered": registered}
    finally:
        srv.stop()
        for p in procs:
            p.kill()
            p.wait()


def test_each_era_is_spoken_by_its_upstream(eras):
    for name, (era, *_rest) in UPSTREAMS.items():
        info = eras["registered"][name]
        assert info["status"] == "ready" and info["protocol_version"] == era, info


@pytest.mark.anyio
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("package", list(UPSTREAMS))
async def test_forwarded_methods_reach_clients_of_every_era(eras, mode, package):
    _era, tool, args, expected, prompt, resource = UPSTREAMS[package]
    async with mcp(eras["srv"].url(f"/api/mcp?servers={package}"), mode) as c:
        assert c.protocol_version == MODES[mode]
        listed = [t.name for t in (await c.list_tools()).tools]
        assert f"{package}__{tool}" in listed, listed
        r = await c.call_tool(f"{package}__{tool}", args)
        assert not r.is_error, r
        text = "".join(x.text for x in r.content if x.type == "text")
        assert expected in text, text
        if prompt:
            name, arguments, want = prompt
            prompts = [p.name for p in (await c.list_prompts()).prompts]
            assert f"{package}__{name}" in prompts, prompts
            p = await c.get_prompt(f"{package}__{name}", arguments)
            assert p.messages and want in p.messages[0].content.text, p
        if resource:
            uri, want = resource
            if uri is None:
                uri = str((await c.list_resources()).resources[0].uri)
            rr = await c.read_resource(uri)
            assert rr.contents and want in (getattr(rr.contents[0], "text", None) or ""), rr
