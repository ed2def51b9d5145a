"""Custom HTTP tools' templates through the real server against a loopback echo server:
values are encoded for the body's Content-Type (a form field cannot smuggle another field),
and an optional parameter the call leaves out (no schema default) drops its pair or renders
empty instead of failing with "missing value for {{days}}"."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
import requests
from conftest import make_home, start_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def srv(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("custom-templates")
    home = make_home(quarry_bin, corpus, root / "home")
    server = start_server(home, logdir=root / "logs")
    yield server
    server.stop()


SCHEMA = {"type": "object",
          "properties": {"q": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["q"]}


def create(srv, spec: dict) -> dict:
    r = requests.post(srv.url("/api/v1/tools"), json=spec, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["data"]


def run_test(srv, tool: dict, arguments: dict) -> dict:
    r = requests.post(srv.url(f"/api/v1/tools/{tool['id']}/test"), json={"arguments": arguments}, timeout=30)
    assert r.status_code == 200, r.text
    return json.loads(r.json()["data"]["body"])


def test_a_form_body_encodes_values_so_no_field_can_be_injected(srv, echo_http):
    tool = create(srv, {
        "name": "form_ask", "parameters": SCHEMA, "http_method": "POST",
        "http_url": f"http://127.0.0.1:{echo_http['port']}/ask",
        "http_headers": {"Content-Type": "application/x-www-form-urlencoded"},
        "http_body_template": "q={{q}}&role=user&days={{days}}",
    })
    got = run_test(srv, tool, {"q": "hello world&role=admin", "days": 3})
    assert got["content_type"] == "application/x-www-form-urlencoded"
    fields = parse_qs(got["body"], keep_blank_values=True)
    assert fields == {"q": ["hello world&role=admin"], "role": ["user"], "days": ["3"]}, got["body"]
    # Non-ASCII, '=', '+', '%' stay inside their field too.
    got = run_test(srv, tool, {"q": "a=b+c%20 北京"})
    assert parse_qs(got["body"])["q"] == ["a=b+c%20 北京"], got["body"]


def test_a_left_out_optional_parameter_drops_its_pair_or_renders_empty(srv, echo_http):
    form = create(srv, {
        "name": "form_opt", "parameters": SCHEMA, "http_method": "POST",
        "http_url": f"http://127.0.0.1:{echo_http['port']}/forecast?q={{{{q}}}}&days={{{{days}}}}",
        "http_headers": {"Content-Type": "application/x-www-form-urlencoded"},
        "http_body_template": "q={{q}}&days={{days}}&role=user",
    })
    got = run_test(srv, form, {"q": "oslo"})
    assert parse_qs(got["body"], keep_blank_values=True) == {"q": ["oslo"], "role": ["user"]}, got["body"]
    assert urlsplit(got["path"]).query == "q=oslo", got["path"]
    js = create(srv, {
        "name": "json_opt", "parameters": SCHEMA, "http_method": "POST",
        "http_url": f"http://127.0.0.1:{echo_http['port']}/json",
        "http_body_template": '{"q": "{{q}}", "days": {{days}}, "label": "d={{days}}"}',
    })
    got = run_test(srv, js, {"q": 'say "hi"'})
    assert json.loads(got["body"]) == {"q": 'say "hi"', "days": None, "label": "d="}, got["body"]
    # A required parameter is still required, with a message naming it.
    r = requests.post(srv.url(f"/api/v1/tools/{js['id']}/test"), json={"arguments": {"days": 2}}, timeout=30)
    assert r.status_code == 400 and "q" in r.json()["detail"], r.text


def test_the_same_encoding_applies_to_calls_over_mcp(srv, echo_http):
    create(srv, {
        "name": "form_mcp", "parameters": SCHEMA, "http_method": "POST",
        "http_url": f"http://127.0.0.1:{echo_http['port']}/mcp-form",
        "http_headers": {"Content-Type": "application/x-www-form-urlencoded"},
        "http_body_template": "q={{q}}&role=user&days={{days}}",
    })

    async def call(mode: str):
        async with httpx2.AsyncClient(timeout=60) as hc:
            async with Client(streamable_http_client(srv.url("/api/mcp?tools=custom.form_mcp"), http_client=hc),
                              mode=mode, read_timeout_seconds=60) as c:
                return await c.call_tool("custom__form_mcp", {"q": "x&role=admin"})

    for mode in ("auto", "legacy"):
        r = anyio.run(call, mode)
        assert not r.is_error, r
        body = (r.structured_content or json.loads(r.content[0].text))["body"]
        assert parse_qs(body) == {"q": ["x&role=admin"], "role": ["user"]}, (mode, body)
