"""Malformed JSON-RPC over HTTP, sent raw (issue 21 items 4 and 18): every MCP endpoint
(`/mcp`, the hub gateway `/api/mcp`, the QukaAI endpoint `/api/v1/mcp`) answers a message that
is JSON but not one JSON-RPC 2.0 message with HTTP 400 and a JSON-RPC error object
(`-32600 Invalid Request`), and a body that is not JSON with
`-32700`, never a plain-text 415. The id is echoed when it is a valid one. A well-formed call
still works for the official SDK in its default mode (2026-07-28) and its legacy mode."""

from __future__ import annotations

import json

import pytest
import requests
from mcp import Client

pytestmark = pytest.mark.anyio

ENDPOINTS = ["/mcp", "/api/mcp", "/api/v1/mcp"]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def post(srv, path: str, body: str) -> requests.Response:
    return requests.post(srv.url(path), data=body.encode(), headers=HEADERS, timeout=30)


def assert_rpc_error(r: requests.Response, code: int, id_, *fragments: str) -> None:
    assert r.status_code == 400, (r.status_code, r.headers.get("content-type"), r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"jsonrpc", "id", "error"}, body
    assert body["jsonrpc"] == "2.0" and body["id"] == id_, body
    assert body["error"]["code"] == code, body
    for f in fragments:
        assert f in body["error"]["message"], (f, body)


CASES = [
    # (body, code, echoed id, words the message must contain)
    ('{"jsonrpc":"1.0","id":1,"method":"tools/list"}', -32600, 1, '"jsonrpc" must be "2.0"'),
    ('{"id":"a","method":"tools/list"}', -32600, "a", '"jsonrpc"'),
    ('{"jsonrpc":"2.0","id":2}', -32600, 2, '"method"'),
    ('{"jsonrpc":"2.0","id":3,"method":7}', -32600, 3, '"method" must be a string'),
    ('{"jsonrpc":"2.0","id":4,"method":"tools/list","params":"x"}', -32600, 4, '"params" must be an object'),
    ('{"jsonrpc":"2.0","id":5,"method":"tools/list","params":[1]}', -32600, 5, '"params" must be an object'),
    ('{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}', -32600, None, '"id"'),
    ("[]", -32600, None, "empty batch"),
    ('[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', -32600, None, "batches are not supported"),
    ('"tools/list"', -32600, None, "object"),
    ("42", -32600, None, "object"),
]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("body,code,id_,fragment", CASES, ids=[c[0][:40] for c in CASES])
def test_malformed_messages_get_json_rpc_errors(server, path, body, code, id_, fragment):
    assert_rpc_error(post(server, path, body), code, id_, fragment)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_text_that_is_not_json_is_a_parse_error(server, path):
    assert_rpc_error(post(server, path, '{"jsonrpc":"2.0",'), -32700, None, "Parse error")


def test_well_formed_requests_still_work_over_raw_http(server):
    # The QukaAI endpoint is stateless: one plain tools/list answers.
    r = post(server, "/api/v1/mcp", json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == 9 and body["result"]["tools"], body


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_still_calls_tools(server, mode):
    async with Client(server.mcp_url, mode=mode, read_timeout_seconds=30) as c:
        tools = await c.list_tools()
        assert any(t.name == "status" for t in tools.tools), [t.name for t in tools.tools]
        result = await c.call_tool("status", {})
        assert result.is_error is not True, result
