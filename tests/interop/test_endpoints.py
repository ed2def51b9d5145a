"""Named tool endpoints (issue 27, item 5): a saved selection at ``/mcp/e/<name>``, owned by a
user or a space, edited without clients changing their configuration, with tokens that work
there only; the catalog says which endpoints expose a tool. Through the real binary, the
official MCP Python SDK in its default mode, and a real upstream (PyPI ``mcp-server-time``).

One home: space ``acme`` with ``owner`` (owner) and ``viewer`` (viewer); the owner registers
``time``; ``quarry serve --auth token``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import requests
from conftest import make_home, settled, start_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from test_teams import texts
from test_token_reach import World as ReachWorld

ACCEPT = {"Accept": "application/json, text/event-stream"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@dataclass
class World(ReachWorld):
    """test_token_reach's home and tokens, with a REST helper."""

    def api(self, method: str, path: str, who: str = "owner", **kw) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.tok(who)}", **kw.pop("headers", {})}
        return requests.request(method, self.srv.url(path), headers=headers, timeout=60, **kw)


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("endpoints")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})
    w = World(home=home, srv=None, kbs={}, docs={})
    w.cli("space", "create", "acme")
    for user, role in (("owner", "owner"), ("viewer", "viewer")):
        w.cli("user", "add", user)
        w.cli("space", "grant", "acme", user, "--role", role)
        # The owner's own credential manages (the space's endpoints); the viewer's is plain.
        manage = ("--manage",) if user == "owner" else ()
        w.tokens[user] = w.cli_json("token", "create", "--user", user, "--spaces", "acme", *manage)
    w.srv = start_server(home, "--auth", "token", "--hub-allow-commands", logdir=root / "logs")
    try:
        r = w.api("POST", "/api/v1/mcp/servers", json={"name": "time", "transport_type": "stdio",
                  "config": str(Path(sys.executable).parent / "mcp-server-time")})
        assert r.status_code == 201, r.text
        info = settled(w.srv, r.json()["data"], {"Authorization": f"Bearer {w.tok('owner')}"})
        assert info["status"] == "ready", info
        yield w
    finally:
        w.srv.stop()


async def tools_at(w: World, path: str, token: str) -> list[str]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(w.srv.url(path), http_client=http), read_timeout_seconds=60) as c:
            return sorted(t.name for t in (await c.list_tools()).tools)


async def call_at(w: World, path: str, token: str, name: str, args: dict) -> tuple[bool, str]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(w.srv.url(path), http_client=http), read_timeout_seconds=60) as c:
            try:
                r = await c.call_tool(name, args)
            except MCPError as e:
                return False, e.error.message
            return r.is_error is not True, "\n".join(texts(r))


def test_an_endpoint_is_served_and_edits_reach_its_clients(world):
    w = world
    r = w.api("POST", "/api/v1/endpoints", json={"name": "ops", "description": "Clock", "servers": ["time"]})
    assert r.status_code == 201, r.text
    ep = r.json()["data"]
    assert ep["url"] == w.srv.url("/mcp/e/ops") and ep["owner"]["kind"] == "user" and ep["editable"], ep
    assert ep["servers"] == ["time"] and ep["mode"] == "list"
    names = anyio.run(tools_at, w, "/mcp/e/ops", w.tok("owner"))
    assert names and all(n.startswith("time__") for n in names), names
    ok, text = anyio.run(call_at, w, "/mcp/e/ops", w.tok("owner"), "time__get_current_time", {"timezone": "UTC"})
    assert ok and "UTC" in text, text
    # Edited on the server: the same URL now offers one tool under its own name.
    r = w.api("PUT", "/api/v1/endpoints/ops", json={"name": "ops", "tools": ["time.get_current_time"], "names": "tool"})
    assert r.status_code == 200, r.text
    assert anyio.run(tools_at, w, "/mcp/e/ops", w.tok("owner")) == ["get_current_time"]
    ok, _ = anyio.run(call_at, w, "/mcp/e/ops", w.tok("owner"), "time__convert_time", {})
    assert not ok, "a tool the endpoint no longer selects"
    # Search mode with a pin.
    r = w.api("PUT", "/api/v1/endpoints/ops", json={"name": "ops", "servers": ["time"], "mode": "search",
                                                     "pin": ["time.get_current_time"]})
    assert r.status_code == 200, r.text
    listed = anyio.run(tools_at, w, "/mcp/e/ops", w.tok("owner"))
    assert "search_tools" in listed and "call_tool" in listed and "time__get_current_time" in listed, listed
    # The catalog says which endpoints expose a tool.
    r = w.api("GET", "/api/catalog/time/tools")
    assert r.status_code == 200, r.text
    by_name = {t["name"]: t for t in r.json()["tools"]}
    assert by_name["time.get_current_time"]["namedEndpoints"] == ["ops"], by_name["time.get_current_time"]
    # Listed for its owner.
    assert [e["name"] for e in w.api("GET", "/api/v1/endpoints").json()["data"]] == ["ops"]


def test_visibility_ownership_and_a_space_endpoint(world):
    w = world
    r = w.api("POST", "/api/v1/endpoints", json={"name": "mine", "servers": ["time"]})
    assert r.status_code == 201, r.text
    # Another user's endpoint does not exist for the viewer: same answer as a missing one.
    hidden = requests.post(w.srv.url("/mcp/e/mine"), json=PING,
                           headers={**ACCEPT, "Authorization": f"Bearer {w.tok('viewer')}"}, timeout=30)
    missing = requests.post(w.srv.url("/mcp/e/nosuch"), json=PING,
                            headers={**ACCEPT, "Authorization": f"Bearer {w.tok('viewer')}"}, timeout=30)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.text.replace("mine", "nosuch") == missing.text
    assert w.api("GET", "/api/v1/endpoints/mine", who="viewer").status_code == 404
    assert "mine" not in [e["name"] for e in w.api("GET", "/api/v1/endpoints", who="viewer").json()["data"]]
    # Without a token: 401 with the OAuth challenge, like any MCP endpoint.
    r = requests.post(w.srv.url("/mcp/e/mine"), json=PING, headers=ACCEPT, timeout=30)
    assert r.status_code == 401 and "resource_metadata" in r.headers["WWW-Authenticate"]

    # A space's endpoint: its admins make it, every member uses it, through their own reach.
    r = w.api("POST", "/api/v1/endpoints", who="viewer", json={"name": "team", "owner": "space", "servers": ["knowledge"]})
    assert r.status_code == 403, r.text
    r = w.api("POST", "/api/v1/endpoints", json={"name": "team", "owner": "space", "servers": ["knowledge"]})
    assert r.status_code == 201, r.text
    seen = w.api("GET", "/api/v1/endpoints/team", who="viewer").json()["data"]
    assert seen["owner"]["kind"] == "space" and not seen["editable"], seen
    viewer_tools = anyio.run(tools_at, w, "/mcp/e/team", w.tok("viewer"))
    owner_tools = anyio.run(tools_at, w, "/mcp/e/team", w.tok("owner"))
    assert "knowledge__search" in viewer_tools, viewer_tools
    assert "knowledge__create_knowledge" in owner_tools and "knowledge__create_knowledge" not in viewer_tools, (owner_tools, viewer_tools)
    r = w.api("PUT", "/api/v1/endpoints/team", who="viewer", json={"name": "team", "servers": ["time"]})
    assert r.status_code == 403, r.text
    assert w.api("DELETE", "/api/v1/endpoints/team", who="viewer").status_code == 403
    assert w.api("DELETE", "/api/v1/endpoints/team").status_code == 200
    assert w.api("GET", "/api/v1/endpoints/team", who="viewer").status_code == 404


def test_endpoint_tokens_work_there_only(world):
    w = world
    for name, body in (("clock", {"servers": ["time"]}), ("clock2", {"tools": ["time.get_current_time"]})):
        r = w.api("POST", "/api/v1/endpoints", json={"name": name, **body})
        assert r.status_code == 201, r.text
    r = w.api("POST", "/api/v1/tokens", json={"label": "clock only", "endpoint": "clock"}, headers={"X-Space-ID": "acme"})
    assert r.status_code == 201, r.text
    bound = r.json()["data"]["token"]
    assert r.json()["data"]["endpoint"], r.json()
    assert anyio.run(tools_at, w, "/mcp/e/clock", bound)
    # Anywhere else: 403 ENDPOINT_ONLY.
    for path in ("/mcp", "/api/mcp", "/mcp/e/clock2"):
        r = requests.post(w.srv.url(path), json=PING, headers={**ACCEPT, "Authorization": f"Bearer {bound}"}, timeout=30)
        assert r.status_code == 403 and r.json()["error"]["data"]["error_code"] == "ENDPOINT_ONLY", (path, r.text)
    r = requests.get(w.srv.url("/api/v1/knowledge-bases"), headers={"Authorization": f"Bearer {bound}"}, timeout=30)
    assert r.status_code == 403 and r.json()["error_code"] == "ENDPOINT_ONLY", r.text
    # The CLI makes them too; an unknown endpoint is refused.
    cli_token = w.cli_json("token", "create", "--user", "owner", "--spaces", "acme", "--endpoint", "clock2")["token"]
    assert anyio.run(tools_at, w, "/mcp/e/clock2", cli_token) == ["time__get_current_time"]
    r = w.home.run("token", "create", "--user", "owner", "--endpoint", "nosuch")
    assert r.returncode != 0 and "no tool endpoint 'nosuch'" in r.stderr, r.stderr
    r = w.api("POST", "/api/v1/tokens", json={"endpoint": "nosuch"}, headers={"X-Space-ID": "acme"})
    assert r.status_code == 404, r.text
    # Only exactly its endpoint: a trailing slash or an extra segment fell through to the plain
    # /mcp service (issue 41 item 1), which listed and ran tools the endpoint never offered.
    for path in ("/mcp/e/clock/", "/mcp/e/clock/x", "/mcp/e/nope/x", "/mcp/e/nope", "/mcp/x",
                 "/mcp/e/clock/?servers=time", "/api/mcp/x"):
        for method in ("POST", "GET", "DELETE"):
            r = requests.request(method, w.srv.url(path), json=PING if method == "POST" else None,
                                 headers={**ACCEPT, "Authorization": f"Bearer {bound}"}, timeout=30)
            assert r.status_code == 403 and "ENDPOINT_ONLY" in r.text, (method, path, r.status_code, r.text)
    # Through the SDK too: the escape listed the knowledge tools and ran the upstream's.
    for path in ("/mcp/e/clock/", "/mcp/e/clock/x?servers=time"):
        with pytest.raises(Exception):
            anyio.run(tools_at, w, path, bound)
    # Deleted: its tokens reach nothing (a new endpoint of the same name is another one), with
    # the refusal any other endpoint's name gets.
    assert w.api("DELETE", "/api/v1/endpoints/clock").status_code == 200
    r = requests.post(w.srv.url("/mcp/e/clock"), json=PING, headers={**ACCEPT, "Authorization": f"Bearer {bound}"}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["data"]["error_code"] == "ENDPOINT_ONLY", r.text
    assert w.api("POST", "/api/v1/endpoints", json={"name": "clock", "servers": ["time"]}).status_code == 201
    r = requests.post(w.srv.url("/mcp/e/clock"), json=PING, headers={**ACCEPT, "Authorization": f"Bearer {bound}"}, timeout=30)
    assert r.status_code == 403, r.text


def test_bad_input_is_refused_clearly(world):
    w = world
    for body, status, fragment in (
        ({"name": "Bad Name", "servers": ["time"]}, 400, "invalid endpoint name"),
        ({"name": "x", "servers": ["nosuchpkg"]}, 400, "unknown package 'nosuchpkg'"),
        ({"name": "x", "tools": ["time.nosuch"]}, 400, "unknown tool 'time.nosuch'"),
        ({"name": "x"}, 400, "an endpoint chooses something"),
        ({"name": "x", "servers": ["time"], "mode": "weird"}, 400, "unknown mode"),
        ({"name": "x", "servers": ["time"], "cap": 0}, 400, "cap"),
        ({"name": "x", "servers": ["time"], "cap": 1}, 400, "more than"),
        ({"name": "x", "servers": ["time"], "owner": "everyone"}, 400, "unknown owner"),
        ({"name": "x", "servers": ["time"], "colour": "red"}, 400, "colour"),
    ):
        r = w.api("POST", "/api/v1/endpoints", json=body)
        assert r.status_code == status and fragment in r.json()["detail"], (body, r.text)
    assert w.api("POST", "/api/v1/endpoints", json={"name": "dup", "servers": ["time"]}).status_code == 201
    r = w.api("POST", "/api/v1/endpoints", json={"name": "dup", "servers": ["time"]})
    assert r.status_code == 409 and r.json()["error_code"] == "CONFLICT", r.text
    # A read-only token makes none.
    ro = w.cli_json("token", "create", "--user", "owner", "--spaces", "acme", "--read-only")["token"]
    r = requests.post(w.srv.url("/api/v1/endpoints"), json={"name": "ro", "servers": ["time"]},
                      headers={"Authorization": f"Bearer {ro}"}, timeout=30)
    assert r.status_code == 403, r.text
    assert w.api("PUT", "/api/v1/endpoints/nosuch", json={"name": "nosuch", "servers": ["time"]}).status_code == 404
    # A PUT without `name` keeps the endpoint's (it answered with the raw deserializer's
    # message before, issue 41 item 12); a POST without one says what is missing.
    r = w.api("PUT", "/api/v1/endpoints/dup", json={"tools": ["time.get_current_time"]})
    assert r.status_code == 200 and r.json()["data"]["name"] == "dup", r.text
    r = w.api("POST", "/api/v1/endpoints", json={"servers": ["time"]})
    assert r.status_code == 400 and "name is required" in r.json()["detail"], r.text
    # Another `name` in a PUT no longer renames silently (issue 65 item 8: clients of
    # /mcp/e/dup lost it); a rename is said with `rename`.
    r = w.api("PUT", "/api/v1/endpoints/dup", json={"name": "dup2", "tools": ["time.get_current_time"]})
    assert r.status_code == 400 and '"rename": "dup2"' in r.json()["detail"], r.text
    assert w.api("GET", "/api/v1/endpoints/dup").status_code == 200
    assert w.api("GET", "/api/v1/endpoints/dup2").status_code == 404
    r = w.api("PUT", "/api/v1/endpoints/dup", json={"rename": "dup2", "tools": ["time.get_current_time"]})
    assert r.status_code == 200 and r.json()["data"]["name"] == "dup2", r.text
    assert w.api("GET", "/api/v1/endpoints/dup").status_code == 404
    r = w.api("PUT", "/api/v1/endpoints/dup2", json={"rename": "Bad Name", "servers": ["time"]})
    assert r.status_code == 400, r.text


def test_endpoint_names_are_unique_per_owner(world):
    """Issue 41 item 7: names were unique on the whole server, so another space's POST got 409
    where its GET got 404 — a cross-tenant oracle and name squatting."""
    w = world
    w.cli("space", "create", "beta")
    w.cli("user", "add", "stranger")
    w.cli("space", "grant", "beta", "stranger", "--role", "owner")
    w.tokens["stranger"] = w.cli_json("token", "create", "--user", "stranger", "--spaces", "beta", "--manage")
    for owner in ("user", "space"):
        name = f"taken-{owner}"
        r = w.api("POST", "/api/v1/endpoints", json={"name": name, "owner": owner, "servers": ["knowledge"]})
        assert r.status_code == 201, r.text
        assert w.api("GET", f"/api/v1/endpoints/{name}", who="stranger").status_code == 404
        r = w.api("POST", "/api/v1/endpoints", who="stranger", json={"name": name, "owner": owner, "servers": ["knowledge"]})
        assert r.status_code == 201, (owner, r.text)
        theirs = w.api("GET", f"/api/v1/endpoints/{name}", who="stranger").json()["data"]
        mine = w.api("GET", f"/api/v1/endpoints/{name}").json()["data"]
        assert theirs["id"] != mine["id"] and theirs["editable"] and mine["editable"], (theirs, mine)
        assert anyio.run(tools_at, w, f"/mcp/e/{name}", w.tok("stranger"))
        # The same owner still cannot have two.
        r = w.api("POST", "/api/v1/endpoints", json={"name": name, "owner": owner, "servers": ["time"]})
        assert r.status_code == 409, r.text
        # Each edits and deletes only its own.
        assert w.api("DELETE", f"/api/v1/endpoints/{name}", who="stranger").status_code == 200
        assert w.api("GET", f"/api/v1/endpoints/{name}").json()["data"]["id"] == mine["id"]
    # A user's own endpoint comes before their space's of the same name.
    assert w.api("POST", "/api/v1/endpoints", json={"name": "both", "owner": "space", "servers": ["knowledge"]}).status_code == 201
    assert w.api("POST", "/api/v1/endpoints", json={"name": "both", "servers": ["time"]}).status_code == 201
    assert w.api("GET", "/api/v1/endpoints/both").json()["data"]["owner"]["kind"] == "user"
    assert w.api("GET", "/api/v1/endpoints/both", who="viewer").json()["data"]["owner"]["kind"] == "space"


async def listed_at(w: World, path: str, token: str) -> dict[str, str | None]:
    """Each listed tool's name and description."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(w.srv.url(path), http_client=http), read_timeout_seconds=60) as c:
            return {t.name: t.description for t in (await c.list_tools()).tools}


def test_an_endpoint_renames_and_redescribes_its_tools(world):
    """Per-endpoint overrides (MetaMCP's tool renames): a named endpoint lists a tool under its
    own name with its own description and answers to that name only; every other URL shows the
    tool as it is; a bad override is a 400 naming the problem that leaves the endpoint as it was."""
    w = world
    description = "查询当前时间：返回某个时区（IANA 名称，如 Asia/Shanghai）的此刻。\nCurrent time: a, b & c = d"
    tools = ["time.get_current_time", "time.convert_time"]
    overrides = {"time.get_current_time": {"name": "clock_now", "description": description}}
    r = w.api("POST", "/api/v1/endpoints", json={"name": "renamed", "tools": tools, "overrides": overrides})
    assert r.status_code == 201, r.text
    assert r.json()["data"]["overrides"] == overrides, r.text
    listed = anyio.run(listed_at, w, "/mcp/e/renamed", w.tok("owner"))
    assert listed.get("clock_now") == description, listed
    assert "time__get_current_time" not in listed and "time__convert_time" in listed, listed
    ok, text = anyio.run(call_at, w, "/mcp/e/renamed", w.tok("owner"), "clock_now", {"timezone": "UTC"})
    assert ok and "UTC" in text, text
    # The old name is unknown there, like any name the endpoint does not list.
    ok, text = anyio.run(call_at, w, "/mcp/e/renamed", w.tok("owner"), "time__get_current_time", {"timezone": "UTC"})
    assert not ok and "Unknown tool" in text, text
    # An ad-hoc URL gets no overrides.
    plain = anyio.run(listed_at, w, "/api/mcp?tools=time.get_current_time", w.tok("owner"))
    assert list(plain) == ["time__get_current_time"] and plain["time__get_current_time"] != description, plain
    ok, text = anyio.run(call_at, w, "/api/mcp?tools=time.get_current_time", w.tok("owner"), "clock_now", {"timezone": "UTC"})
    assert not ok, text

    # Bad overrides: 400 naming the problem, on create and on update, and nothing changes.
    before = w.api("GET", "/api/v1/endpoints/renamed").json()["data"]
    cur = "time.get_current_time"
    for bad, fragment, tool in (
        ({"time.nosuch": {"name": "x"}}, "not a tool of this endpoint's selection", "time.nosuch"),
        ({"knowledge.search": {"name": "x"}}, "not a tool of this endpoint's selection", "knowledge.search"),
        ({cur: {"name": "time__convert_time"}}, "already called", "time.convert_time"),
        ({cur: {"name": "same"}, "time.convert_time": {"name": "same"}}, "renamed 'same' too", cur),
        ({cur: {"name": "clock now"}}, "invalid new name", cur),
        ({cur: {"name": "x" * 65}}, "invalid new name", cur),
        ({cur: {"name": "search_tools"}}, "search_tools", cur),
        ({cur: {}}, "neither a name nor a description", cur),
        ({cur: {"name": None, "description": None}}, "neither a name nor a description", cur),
        ({cur: {"description": ""}}, "1-4000", cur),
        ({cur: {"description": "d" * 4001}}, "1-4000", cur),
        ({cur: {"title": "x"}}, "title", None),
    ):
        for method, path, name in (("PUT", "/api/v1/endpoints/renamed", "renamed"),
                                   ("POST", "/api/v1/endpoints", "renamed-bad")):
            r = w.api(method, path, json={"name": name, "tools": tools, "overrides": bad})
            assert r.status_code == 400, (method, bad, r.text)
            detail = r.json()["detail"]
            assert fragment in detail and (tool is None or tool in detail), (method, bad, detail)
    assert w.api("GET", "/api/v1/endpoints/renamed").json()["data"] == before
    assert w.api("GET", "/api/v1/endpoints/renamed-bad").status_code == 404
    assert anyio.run(listed_at, w, "/mcp/e/renamed", w.tok("owner")).get("clock_now") == description

    # A PUT without overrides keeps them (so a client that knows nothing of them loses none)…
    r = w.api("PUT", "/api/v1/endpoints/renamed", json={"name": "renamed", "tools": tools, "description": "Clock"})
    assert r.status_code == 200 and r.json()["data"]["overrides"] == overrides, r.text
    # …and so refuses a selection that drops the renamed tool, naming it.
    r = w.api("PUT", "/api/v1/endpoints/renamed", json={"name": "renamed", "tools": ["time.convert_time"]})
    assert r.status_code == 400 and "time.get_current_time" in r.json()["detail"], r.text
    # In search mode, search_tools shows the new name and description, and call_tool takes it.
    r = w.api("PUT", "/api/v1/endpoints/renamed", json={"name": "renamed", "servers": ["time"], "mode": "search"})
    assert r.status_code == 200, r.text
    ok, text = anyio.run(call_at, w, "/mcp/e/renamed", w.tok("owner"), "search_tools",
                         {"query": "current time", "mode": "keyword"})
    assert ok and '"clock_now"' in text and "查询当前时间" in text and "time__get_current_time" not in text, text
    ok, text = anyio.run(call_at, w, "/mcp/e/renamed", w.tok("owner"), "call_tool",
                         {"name": "clock_now", "arguments": {"timezone": "UTC"}})
    assert ok and "UTC" in text, text
    # `{}` removes them: the tool has its own name again.
    r = w.api("PUT", "/api/v1/endpoints/renamed", json={"name": "renamed", "tools": tools, "overrides": {}})
    assert r.status_code == 200 and r.json()["data"]["overrides"] == {}, r.text
    listed = anyio.run(listed_at, w, "/mcp/e/renamed", w.tok("owner"))
    assert "time__get_current_time" in listed and "clock_now" not in listed, listed
    assert w.api("DELETE", "/api/v1/endpoints/renamed").status_code == 200
