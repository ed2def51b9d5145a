"""Raw MCP wire tests: hand-written JSON-RPC over `http.client` (Streamable HTTP at `/mcp`) and
over a `quarry mcp` pipe, for what SDK clients never send: malformed bodies, unknown methods,
foreign Origin/Host headers, stale sessions, oversized bodies, and the 2026-07-28 stateless
envelope (`server/discover`, per-request `_meta`, `Mcp-Method`/`Mcp-Name` headers).
"""

from __future__ import annotations

import http.client
import json
import subprocess

import pytest

MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
CLIENT_INFO = {"name": "raw-wire-test", "version": "1.0"}


def request(server, body, headers: dict | None = None, method: str = "POST", path: str = "/mcp"):
    """Sends one request; returns (status, headers dict with lower-case names, body text)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json", "Accept": ACCEPT}
        hdrs.update(headers or {})
        # http.client adds Host itself unless one is given; pass skip_host when overriding.
        conn.putrequest(method, path, skip_host="Host" in hdrs, skip_accept_encoding=True)
        for k, v in hdrs.items():
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def messages(headers: dict, text: str) -> list[dict]:
    """JSON-RPC messages of a response: a JSON body, or the `data:` events of an SSE stream."""
    if headers.get("content-type", "").startswith("text/event-stream"):
        out = []
        for event in text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(ln[5:].lstrip() for ln in event.split("\n") if ln.startswith("data:"))
            if data.strip():
                out.append(json.loads(data))
        return out
    return [json.loads(text)]


def initialize(server, version: str = "2025-06-18", headers: dict | None = None):
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO},
    }
    return request(server, body, headers)


def open_session(server, version: str = "2025-06-18") -> str:
    status, headers, text = initialize(server, version)
    assert status == 200, text
    sid = headers.get("mcp-session-id")
    assert sid, headers
    status, _, text = request(
        server,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"Mcp-Session-Id": sid, "MCP-Protocol-Version": version},
    )
    assert status == 202, text  # a notification is accepted with no body
    return sid


def modern(method: str, params: dict | None = None, id: int = 1) -> tuple[dict, dict]:
    """A 2026-07-28 request body and its required headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = dict(params or {})
    params["_meta"] = meta
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}, headers


# ---------------------------------------------------------------------------------------------
# Handshake eras


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_initialize_echoes_supported_version(shared_server, version):
    status, headers, text = initialize(shared_server, version)
    assert status == 200, text
    assert headers.get("mcp-session-id")
    [msg] = messages(headers, text)
    assert msg["id"] == 1
    result = msg["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "quarry"
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])


def test_initialize_with_unknown_version_counter_offers(shared_server):
    status, headers, text = initialize(shared_server, "1999-01-01")
    assert status == 200, text
    [msg] = messages(headers, text)
    assert msg["result"]["protocolVersion"] in {"2025-06-18", "2025-11-25"}


def test_server_discover_2026(shared_server):
    body, headers = modern("server/discover")
    status, rh, text = request(shared_server, body, headers)
    assert status == 200, text
    assert "mcp-session-id" not in rh  # 2026-07-28 is stateless
    [msg] = messages(rh, text)
    result = msg["result"]
    assert MODERN in result["supportedVersions"]
    assert {"2025-06-18", "2025-11-25"} <= set(result["supportedVersions"])
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "quarry"


def test_stateless_tools_call_2026(shared_server):
    body, headers = modern("tools/call", {"name": "search", "arguments": {"query": "zanzibar"}})
    status, rh, text = request(shared_server, body, headers)
    assert status == 200, text
    [msg] = messages(rh, text)
    result = msg["result"]
    assert result["isError"] is False
    assert result["content"][0]["text"].startswith('Found 1 result for "zanzibar":\n\n#')
    assert result["structuredContent"]["results"][0]["file"] == "notes/projects/alpha/plan.md"


def assert_seed_resource(res: dict, name: str, title: str) -> None:
    """Seed 001's embedded document: uri, name, title, mimeType, text on the resource itself."""
    assert {"uri", "name", "title", "mimeType", "text"} <= set(res), res
    assert res["name"] == name and res["title"] == title, res
    assert res["mimeType"] == "text/markdown"
    assert res["_meta"]["name"] == name and res["_meta"]["title"] == title


def test_get_and_multi_get_resources_carry_name_and_title_2026(shared_server):
    body, headers = modern("tools/call", {"name": "get", "arguments": {"file": "notes/projects/alpha/plan.md"}})
    status, rh, text = request(shared_server, body, headers)
    assert status == 200, text
    [msg] = messages(rh, text)
    [block] = msg["result"]["content"]
    assert block["type"] == "resource"
    assert_seed_resource(block["resource"], "notes/projects/alpha/plan.md", "Alpha Launch Plan")
    assert block["resource"]["uri"] == "qmd://notes/projects/alpha/plan.md"
    assert msg["result"]["resultType"] == "complete"
    body, headers = modern("tools/call", {"name": "multi_get", "arguments": {"pattern": "journals/2025-05*.md"}})
    status, rh, text = request(shared_server, body, headers)
    [msg] = messages(rh, text)
    got = [c["resource"] for c in msg["result"]["content"]]
    assert [r["name"] for r in got] == ["notes/journals/2025-05-01.md", "notes/journals/2025-05-02.md"]
    for r in got:
        assert_seed_resource(r, r["name"], "Journal " + r["name"][-13:-3])


def test_2026_request_without_routing_headers_is_rejected(shared_server):
    body, headers = modern("tools/call", {"name": "status", "arguments": {}})
    del headers["Mcp-Method"], headers["Mcp-Name"]
    status, rh, text = request(shared_server, body, headers)
    assert status == 400, text
    [msg] = messages(rh, text)
    assert msg["error"]["code"] == -32020  # HEADER_MISMATCH
    assert "Mcp-Method" in msg["error"]["message"]


# ---------------------------------------------------------------------------------------------
# Errors


def test_unknown_method_in_session(shared_server):
    sid = open_session(shared_server)
    status, rh, text = request(
        shared_server,
        {"jsonrpc": "2.0", "id": 7, "method": "no/such_method", "params": {}},
        {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"},
    )
    assert status == 200, text
    [msg] = [m for m in messages(rh, text) if m.get("id") == 7]
    assert msg["error"]["code"] == -32601
    assert "no/such_method" in msg["error"]["message"]


def test_unknown_method_2026(shared_server):
    body, headers = modern("no/such_method", id=8)
    status, rh, text = request(shared_server, body, headers)
    [msg] = messages(rh, text)
    assert msg["id"] == 8
    assert msg["error"]["code"] == -32601


@pytest.mark.parametrize("body", [b'{"jsonrpc":"2.0","id":', b"{not json", b"\xff\xfe garbage"])
def test_malformed_body_is_a_client_error(shared_server, body):
    status, _, text = request(shared_server, body)
    assert 400 <= status < 500, (status, text)
    assert text  # says what is wrong


def test_malformed_body_is_jsonrpc_parse_error(shared_server):
    status, rh, text = request(shared_server, b'{"jsonrpc":"2.0","id":')
    assert status == 400, (status, text)
    [msg] = messages(rh, text)
    assert msg["id"] is None and msg["error"]["code"] == -32700


def test_not_jsonrpc_is_a_client_error(shared_server):
    status, _, text = request(shared_server, {"hello": "world"})
    assert 400 <= status < 500, (status, text)


def test_unknown_session_is_404(shared_server):
    status, _, text = request(
        shared_server,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {"Mcp-Session-Id": "00000000-dead-beef-0000-000000000000", "MCP-Protocol-Version": "2025-06-18"},
    )
    assert status == 404, text


def test_deleted_session_is_gone(shared_server):
    sid = open_session(shared_server)
    status, _, text = request(shared_server, None, {"Mcp-Session-Id": sid}, method="DELETE")
    assert 200 <= status < 300, text
    status, _, text = request(
        shared_server,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"},
    )
    assert status == 404, text


def test_legacy_request_without_session_is_400(shared_server):
    status, _, text = request(
        shared_server,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {"MCP-Protocol-Version": "2025-06-18"},
    )
    assert status == 400, text


# ---------------------------------------------------------------------------------------------
# DNS-rebinding defence and body limits


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost.evil.example"])
def test_foreign_origin_is_403(shared_server, origin):
    status, _, text = initialize(shared_server, headers={"Origin": origin})
    assert status == 403, text
    detail = json.loads(text)
    assert detail["status_code"] == 403 and origin in detail["detail"]


def test_loopback_origin_is_accepted(shared_server):
    status, _, text = initialize(shared_server, headers={"Origin": "http://localhost:6274"})
    assert status == 200, text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example"])
def test_foreign_host_is_403(shared_server, host):
    status, _, text = initialize(shared_server, headers={"Host": host})
    assert status == 403, text
    assert host in json.loads(text)["detail"]


def test_loopback_host_names_are_accepted(shared_server):
    for host in (f"localhost:{shared_server.port}", f"127.0.0.1:{shared_server.port}"):
        status, _, text = initialize(shared_server, headers={"Host": host})
        assert status == 200, (host, text)


def test_allowed_origin_and_host_flags(server_factory):
    srv = server_factory("--allowed-origin", "https://app.example", "--allowed-host", "quarry.internal")
    status, _, text = initialize(srv, headers={"Origin": "https://app.example"})
    assert status == 200, text
    status, _, text = initialize(srv, headers={"Host": "quarry.internal"})
    assert status == 200, text
    status, _, _ = initialize(srv, headers={"Origin": "https://other.example"})
    assert status == 403


def test_oversized_body_is_413(server_factory):
    srv = server_factory("--max-body-bytes", "2000")
    status, _, text = initialize(srv)  # small requests still work
    assert status == 200, text
    big = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "x" * 5000, "version": "1"},
        },
    }
    status, _, text = request(srv, big)
    assert status == 413, text
    body, headers = modern("tools/call", {"name": "search", "arguments": {"query": "y" * 5000}})
    status, _, text = request(srv, body, headers)
    assert status == 413, text


def test_only_a_tool_call_that_writes_answers_with_a_feed_position(server_factory):
    """X-Quarry-Txid (read-your-writes across nodes) costs a store round trip per answer. On
    the JSON endpoint (QukaAI's /api/v1/mcp) a listing or a read-only knowledge tool answers
    without it, a knowledge write with it; /mcp streams its answers, which carry none."""
    srv = server_factory()

    def call(method: str, params: dict | None = None, headers: dict | None = None) -> tuple[dict, dict]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        status, rh, text = request(srv, body, headers, path="/api/v1/mcp")
        assert status == 200, text
        assert rh.get("content-type", "").startswith("application/json"), rh
        [msg] = messages(rh, text)
        assert "error" not in msg and not msg["result"].get("isError"), msg
        return rh, msg["result"]

    for method, params in [
        ("tools/list", None),
        ("tools/call", {"name": "query_knowledge", "arguments": {"query": "zanzibar"}}),
        ("tools/call", {"name": "list_knowledge", "arguments": {}}),
    ]:
        rh, _ = call(method, params)
        assert "x-quarry-txid" not in rh, (method, params, rh)
    rh, result = call("tools/call", {"name": "create_knowledge",
                                     "arguments": {"content": "The quokka census ran in May.", "title": "Quokka"}})
    assert rh.get("x-quarry-txid", "").isdigit(), (rh, result)
    # The position it answered with is one a read may present.
    rh, result = call("tools/call", {"name": "query_knowledge", "arguments": {"query": "quokka census"}},
                      {"X-Quarry-Txid": rh["x-quarry-txid"]})
    assert "quokka" in json.dumps(result).lower(), result
    assert rh.get("x-quarry-caught-up") != "false", rh
    body, headers = modern("tools/call", {"name": "search", "arguments": {"query": "quokka"}})
    status, rh, text = request(srv, body, headers)
    assert status == 200 and rh.get("content-type", "").startswith("text/event-stream"), (rh, text)
    assert "x-quarry-txid" not in rh, rh


# ---------------------------------------------------------------------------------------------
# stdio


def stdio_exchange(home, lines: list[str]) -> tuple[list[dict], str]:
    """Feeds lines to `quarry mcp`, closes stdin, returns (JSON messages on stdout, stderr)."""
    r = subprocess.run(
        [str(home.bin), "mcp"],
        input="".join(ln + "\n" for ln in lines),
        env=home.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]  # stdout is protocol only
    return out, r.stderr


INIT_LINE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT_INFO},
    }
)
INITIALIZED_LINE = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_stdio_handshake_and_unknown_method(shared_home):
    out, _ = stdio_exchange(
        shared_home,
        [
            INIT_LINE,
            INITIALIZED_LINE,
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such_method", "params": {}}),
            json.dumps(
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "status", "arguments": {}}}
            ),
        ],
    )
    by_id = {m.get("id"): m for m in out}
    assert by_id[1]["result"]["serverInfo"]["name"] == "quarry"
    assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
    assert by_id[2]["error"]["code"] == -32601
    assert by_id[3]["result"]["structuredContent"]["totalDocuments"] > 0


def test_stdio_get_resource_carries_name_and_title(shared_home):
    call = {"name": "get", "arguments": {"file": "notes/projects/meeting notes.md"}}
    out, _ = stdio_exchange(
        shared_home,
        [INIT_LINE, INITIALIZED_LINE, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})],
    )
    by_id = {m.get("id"): m for m in out}
    result = by_id[2]["result"]
    assert "resultType" not in result  # legacy era: rmcp's own handling still applies
    [block] = result["content"]
    assert_seed_resource(block["resource"], "notes/projects/meeting notes.md", "Weekly Sync Meeting")
    assert block["resource"]["uri"] == "qmd://notes/projects/meeting%20notes.md"
    # Errors are unchanged.
    call = {"name": "get", "arguments": {"file": 3}}
    out, _ = stdio_exchange(
        shared_home,
        [INIT_LINE, INITIALIZED_LINE, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})],
    )
    result = {m.get("id"): m for m in out}[2]["result"]
    assert result["isError"] is True and "`file` must be a string" in result["content"][0]["text"]


def test_stdio_survives_garbage(shared_home):
    out, _ = stdio_exchange(shared_home, ["{not json", INIT_LINE, INITIALIZED_LINE])
    assert any(m.get("id") == 1 and "result" in m for m in out), out


def test_stdio_garbage_gets_parse_error(shared_home):
    out, err = stdio_exchange(shared_home, [INIT_LINE, INITIALIZED_LINE, '{"jsonrpc":"2.0","id":5,"method":'])
    assert any(m.get("error", {}).get("code") == -32700 and m.get("id") is None for m in out), (out, err[-2000:])


# ---------------------------------------------------------------------------------------------
# Shutdown and the shared fixtures


def test_sigterm_with_open_session_stream_exits_promptly(server_factory):
    """A client holding the session's GET SSE stream must not keep the server from stopping."""
    import time

    srv = server_factory()
    sid = open_session(srv)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request(
        "GET",
        "/mcp",
        headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"},
    )
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
    started = time.monotonic()
    srv.stop()  # asserts exit status 0 within 10 s and an empty stdout
    assert time.monotonic() - started < 5
    conn.close()


def test_fixtures_home_and_server(quarry_home, server, corpus):
    r = quarry_home.run("collection", "list")
    assert r.returncode == 0 and "notes" in r.stdout, r
    r = quarry_home.run("context", "list")
    assert r.returncode == 0 and "daily journal" in r.stdout, r
    assert server.home == quarry_home.home and server.env["QUARRY_HOME"] == str(quarry_home.home)
    status, headers, text = request(server, None, method="GET", path="/health")
    assert status == 200 and json.loads(text)["status"] == "healthy", text
    body, hdrs = modern("tools/call", {"name": "status", "arguments": {}})
    status, headers, text = request(server, body, hdrs)
    [msg] = messages(headers, text)
    assert msg["result"]["structuredContent"]["collections"][0]["path"] == str(corpus)
