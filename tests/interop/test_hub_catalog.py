"""The hub's catalog and views as seed 002 and SPEC §2.2 describe them (issue 21 items 6, 8, 9
and 12), through the real binary, REST and the official Python SDK in its default and legacy
modes: the unselected `/api/mcp` lists everything (the cap limits selections); the seed's
example category `search` can be browsed; a manifest is the truth at run time; names work
wherever the hub hands them out.
"""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
import requests
from conftest import everything_cmd, make_home, start_server, settled
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).parent
NEW = HERE / "upstreams" / "era_2026_server.py"
CAP = 20
MODES = ["auto", "legacy"]
LONG_PACKAGE = "a-package-id-of-exactly-forty-characters"

MANIFEST = {
    "id": "ev-manifest", "name": "测试工具集", "description": "一个知识图谱示例包", "category": "testing",
    "manifestSchemaVersion": "v2",
    "tools": [
        {"name": "echo", "description": "原样返回消息",
         "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "description": "要返回的消息"}},
                         "required": ["message"]}},
        {"name": "get-sum"},
        {"name": "no-such-tool", "description": "上游没有的工具"},
    ],
}


@asynccontextmanager
async def mcp(url: str, mode: str):
    async with httpx2.AsyncClient(timeout=60) as hc:
        async with Client(streamable_http_client(url, http_client=hc), mode=mode, read_timeout_seconds=60) as c:
            yield c


def register(srv, body: dict, status: int = 201) -> dict:
    r = requests.post(srv.url("/api/v1/mcp/servers"), json=body, timeout=120)
    assert r.status_code == status, r.text
    return settled(srv, r.json()["data"]) if status == 201 else r.json()


@pytest.fixture(scope="module")
def cat(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("catalog")
    home = make_home(quarry_bin, corpus, root / "home")
    srv = start_server(home, "--max-tools", str(CAP), logdir=root / "logs")
    try:
        everything = register(srv, {"name": "everything", "transport_type": "stdio", "config": everything_cmd(),
                                    "category": "testing"})
        manifest = register(srv, {"name": "ev-manifest", "transport_type": "stdio", "config": everything_cmd(),
                                  "manifest": MANIFEST})
        searcher = register(srv, {"name": "sga_search", "package": "sga_search", "transport_type": "stdio",
                                  "config": f"{sys.executable} {NEW} stdio", "category": "search",
                                  "description": "SGA搜索"})
        yield {"srv": srv, "everything": everything, "manifest": manifest, "search": searcher}
    finally:
        srv.stop()


@pytest.mark.parametrize("mode", MODES)
def test_unselected_gateway_lists_everything_and_selections_stay_capped(cat, mode):
    async def run():
        async with mcp(cat["srv"].url("/api/mcp"), mode) as c:
            names = [t.name for t in (await c.list_tools()).tools]
        async with mcp(cat["srv"].url("/api/mcp?servers=everything,knowledge"), mode) as c:
            with pytest.raises(MCPError) as e:
                await c.list_tools()
        return names, str(e.value)
    names, refused = anyio.run(run)
    assert len(names) > CAP, len(names)
    assert "everything__echo" in names and "knowledge__search" in names and "sga_search__echo" in names
    assert f"cap of {CAP}" in refused


def test_the_seeds_category_search_can_be_browsed(cat):
    srv = cat["srv"]
    r = requests.get(srv.url("/api/catalog/search"), timeout=30)
    assert r.status_code == 200, r.text
    assert [p["id"] for p in r.json()["packages"]] == ["sga_search"]
    cats = {c["id"]: c for c in requests.get(srv.url("/api/catalog"), timeout=30).json()["categories"]}
    assert cats["search"]["packageCount"] == 1
    tools = requests.get(srv.url("/api/catalog/sga_search/tools"), timeout=30).json()["tools"]
    assert {t["name"] for t in tools} == {"sga_search.echo", "sga_search.add"}
    found = requests.get(srv.url("/api/catalog/search"), params={"q": "echo"}, timeout=30).json()
    assert found["total"] >= 1 and "tools" in found
    assert requests.get(srv.url("/api/catalog/search"), params={"q": " "}, timeout=30).status_code == 400
    for bad in ["", "   "]:
        r = register(srv, {"name": f"empty-cat-{len(bad)}", "transport_type": "stdio", "config": "true",
                           "category": bad}, status=400)
        assert "category" in r["detail"], r
        r = register(srv, {"name": f"empty-man-{len(bad)}", "transport_type": "stdio", "config": "true",
                           "manifest": {"id": f"empty-man-{len(bad)}", "category": bad}}, status=400)
        assert "category" in r["detail"], r
    listed = requests.get(srv.url("/api/v1/mcp/servers"), timeout=30).json()["data"]
    assert not any(s["name"].startswith("empty-") for s in listed)


@pytest.mark.parametrize("mode", MODES)
def test_the_manifest_is_the_truth_at_run_time(cat, mode):
    async def run():
        async with mcp(cat["srv"].url("/api/mcp?servers=ev-manifest"), mode) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            echoed = await c.call_tool("ev-manifest__echo", {"message": "按清单调用"})
            with pytest.raises(MCPError) as e:
                await c.call_tool("ev-manifest__get-env", {})
            return tools, echoed, str(e.value)
    tools, echoed, refused = anyio.run(run)
    assert set(tools) == {"ev-manifest__echo", "ev-manifest__get-sum"}, set(tools)
    echo = tools["ev-manifest__echo"]
    assert echo.description == "原样返回消息"
    assert echo.input_schema["properties"]["message"]["description"] == "要返回的消息"
    # Declared without a schema or description: the upstream's stand.
    assert "a" in tools["ev-manifest__get-sum"].input_schema["properties"]
    assert not echoed.is_error and "按清单调用" in echoed.content[0].text
    assert "Unknown tool" in refused
    info = requests.get(cat["srv"].url(f"/api/v1/mcp/servers/{cat['manifest']['id']}"), timeout=30).json()["data"]
    assert info["missing_tools"] == ["no-such-tool"], info
    assert info["tool_count"] == 2


def test_catalog_search_finds_packages_by_name_and_description(cat):
    srv = cat["srv"]
    for q in ["工具集", "知识图谱"]:
        r = requests.get(srv.url("/api/catalog/search"), params={"q": q}, timeout=30).json()
        names = {t["name"] for t in r["tools"]}
        assert names and all(n.startswith("ev-manifest.") for n in names), (q, r)


def test_manifest_id_and_package_must_agree(cat):
    r = register(cat["srv"], {"name": "conflict", "transport_type": "stdio", "config": "true", "package": "one",
                              "manifest": {"id": "two", "name": "x"}}, status=400)
    assert "'one'" in r["detail"] and "'two'" in r["detail"], r


@pytest.mark.parametrize("mode", MODES)
def test_long_package_ids_keep_tool_names_and_search_results_are_callable(cat, mode):
    srv = cat["srv"]
    known = next((s for s in requests.get(srv.url("/api/v1/mcp/servers"), timeout=30).json()["data"]
                 if s["package"] == LONG_PACKAGE), None)
    if known is None:
        register(srv, {"name": "long", "package": LONG_PACKAGE, "transport_type": "stdio",
                              "config": str(Path(sys.executable).parent / "mcp-server-time"), "category": "testing"})

    async def run():
        async with mcp(srv.url(f"/api/mcp?servers={LONG_PACKAGE}"), mode) as c:
            names = [t.name for t in (await c.list_tools()).tools]
        async with mcp(srv.url("/api/mcp?servers=everything&mode=search"), mode) as c:
            found = (await c.call_tool("search_tools", {"query": "add two numbers", "limit": 3})).structured_content
            name = found["tools"][0]["name"]
            direct = await c.call_tool(name, {"a": 2, "b": 40})
        return names, name, direct
    names, name, direct = anyio.run(run)
    assert len(names) == 2 and all(len(n) <= 48 for n in names), names
    assert any("__get_current_time_" in n for n in names) and any("__convert_time_" in n for n in names), names
    assert name == "everything__get-sum"
    assert not direct.is_error and "42" in direct.content[0].text


def test_server_routes_accept_names(cat):
    srv = cat["srv"]
    uid = cat["search"]["id"]
    for key in ["sga_search", uid]:
        r = requests.get(srv.url(f"/api/v1/mcp/servers/{key}"), timeout=30)
        assert r.status_code == 200 and r.json()["data"]["id"] == uid, r.text
        r = requests.get(srv.url(f"/api/v1/mcp/servers/{key}/tools"), timeout=30)
        assert r.status_code == 200 and len(r.json()["data"]) == 2, r.text
    assert requests.post(srv.url("/api/v1/mcp/servers/sga_search/refresh"), timeout=60).status_code == 200
    assert requests.get(srv.url("/api/v1/mcp/servers/nope"), timeout=30).status_code == 404


def test_an_upstream_the_guard_refuses_says_why(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """A user's HTTP upstream whose name resolves only to loopback: the server's list says so,
    in words (not rmcp's Rust type names)."""
    home = make_home(quarry_bin, corpus, tmp_path / "home")
    assert home.run("user", "add", "erin").returncode == 0
    assert home.run("space", "grant", "default", "erin", "--role", "editor").returncode == 0
    token = json.loads(home.run("token", "create", "--user", "erin", "--json").stdout)["token"]
    h = {"Authorization": f"Bearer {token}"}
    srv = start_server(home, "--auth", "token", logdir=tmp_path / "logs")
    try:
        r = requests.post(srv.url("/api/v1/mcp/servers"), headers=h, timeout=120,
                          json={"name": "local", "transport_type": "http", "config": "http://localhost:9/mcp",
                                "connect_timeout_secs": 5})
        assert r.status_code == 201, r.text
        info = settled(srv, r.json()["data"], h)
        error = info["last_error"] or ""
        assert info["status"] == "error" and "resolves only to refused addresses" in error, info
        assert "WorkerTransport" not in error and "rmcp::" not in error, error
    finally:
        srv.stop()


@pytest.mark.parametrize("mode", MODES)
def test_tool_listing_names_tools_as_clients_call_them(cat, echo_http, mode):
    """Issue 21 item 12: `/api/v1/tools` gave built-ins their wire name (`web__web_search`) and
    custom tools their bare name (`weather`). Every `name` there is now the name an MCP client
    calls, with `package` and the tool's own name (`tool`) beside it; the custom tool keeps
    every field of seed 003's CustomTool, and its routes accept each of its names."""
    srv = cat["srv"]
    spec = {"name": "weather_now", "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "http_url": f"http://127.0.0.1:{echo_http['port']}/weather/{{{{city}}}}", "http_method": "GET"}
    r = requests.post(srv.url("/api/v1/tools"), json=spec, timeout=30)
    if r.status_code == 409:  # the other mode's run made it
        created = requests.get(srv.url("/api/v1/tools/weather_now"), timeout=30).json()["data"]
    else:
        assert r.status_code == 201, r.text
        created = r.json()["data"]
    listing = requests.get(srv.url("/api/v1/tools"), timeout=30).json()["data"]
    for t in listing:
        assert t["name"] == f"{t['package']}__{t['tool']}", t
        assert t["full_name"] == f"{t['package']}.{t['tool']}", t
    [custom] = [t for t in listing if str(t.get("source", "")).startswith("custom:")]
    assert (custom["name"], custom["tool"], custom["package"]) == ("custom__weather_now", "weather_now", "custom")
    seed_fields = {"id", "description", "tool_type", "parameters", "http_url", "http_method", "http_headers",
                   "http_body_template", "enabled"}
    assert seed_fields <= custom.keys(), custom.keys()
    assert custom["id"] == created["id"] and custom["tool_type"] == "http"
    builtins = [t for t in listing if t["source"] == "builtin" and t["enabled"]]
    assert builtins, listing

    async def run():
        async with mcp(srv.url("/api/mcp"), mode) as c:
            offered = {t.name for t in (await c.list_tools()).tools}
            called = await c.call_tool(custom["name"], {"city": "Oslo"})
        return offered, called
    offered, called = anyio.run(run)
    assert custom["name"] in offered and all(t["name"] in offered for t in builtins), (offered, listing)
    assert not called.is_error and "/weather/Oslo" in called.content[0].text, called

    for key in (created["id"], "weather_now", "custom.weather_now", "custom__weather_now"):
        r = requests.get(srv.url(f"/api/v1/tools/{key}"), timeout=30)
        assert r.status_code == 200 and r.json()["data"]["id"] == created["id"], (key, r.text)
    assert requests.get(srv.url("/api/v1/tools/custom__nope"), timeout=30).status_code == 404
