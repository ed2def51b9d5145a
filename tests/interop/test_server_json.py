"""The repository's ``server.json`` (Quarry's entry for the official MCP Registry) is valid and
true: it validates against the registry's 2025-12-11 schema, carries the workspace version, and
every remote it declares, with its URL template and header filled in as a client would, reaches
a real ``quarry serve`` through the official MCP Python SDK in its default mode (Streamable HTTP,
and the SDK's ``sse_client`` for the legacy SSE remote) and lists tools. A copy with one remote's
path changed does not connect, so the connection checks can fail.

The schema is vendored: tests/interop/schemas/server.schema.2025-12-11.json is a byte-for-byte
copy of modelcontextprotocol/static, schemas/2025-12-11/server.schema.json, commit
a9ba437d9fbbe92076a24b20d56449ac7c7786ac (the file served at its ``$id``,
https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json).

The remotes are ``https://{host}/…``: the registry takes only HTTPS remote URLs, the scheme
cannot be a variable in this schema, and a team server sits behind a TLS proxy. The test
server speaks plain HTTP on loopback, so the resolver below swaps the scheme after filling in
``{host}``, as the TLS proxy would terminate it.

One home for the connection checks: user ``reg`` owns the ``default`` space, a token for it, a
named endpoint ``registry`` over the ``knowledge`` package; ``quarry serve --auth token``.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import anyio
import jsonschema
import pytest
import requests
from conftest import make_home, start_server
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parents[2]
SERVER_JSON = REPO / "server.json"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "server.schema.2025-12-11.json"
SCHEMA_ID = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
PUBLISHER = "io.modelcontextprotocol.registry/publisher-provided"
ENDPOINT = "registry"

DOC = json.loads(SERVER_JSON.read_text(encoding="utf-8"))
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))

# What each remote must list (besides being non-empty): Quarry's routes, by (type, URL path).
EXPECTED_REMOTES = {
    ("streamable-http", "/mcp"): {"query", "knowledge_search"},
    ("streamable-http", "/api/mcp"): {"knowledge__query", "knowledge__knowledge_search"},
    ("streamable-http", "/mcp/e/{endpoint}"): {"knowledge__query", "knowledge__knowledge_search"},
    ("streamable-http", "/api/v1/mcp"): {"create_knowledge", "query_knowledge"},
    ("sse", "/api/mcp"): {"knowledge__query", "knowledge__knowledge_search"},
}


def remote_id(remote: dict) -> str:
    return f"{remote['type']} {urllib.parse.urlsplit(remote['url']).path}"


# ---------------------------------------------------------------------------------------------
# The file against the schema and the workspace.


def validator():
    """A validator of the schema's own draft (its ``$schema``: draft-07), checking formats."""
    cls = jsonschema.validators.validator_for(SCHEMA)
    cls.check_schema(SCHEMA)
    checker = copy.deepcopy(cls.FORMAT_CHECKER)
    if "uri" not in checker.checkers:
        # jsonschema checks "uri" only with rfc3987 installed; stand in with an RFC 3986-ish
        # check so the schema's `format: uri` fields are never left unchecked.
        @checker.checks("uri")
        def is_uri(value: object) -> bool:
            if not isinstance(value, str):
                return True
            parts = urllib.parse.urlsplit(value)
            return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme)) and not re.search(r"\s", value)

    return cls(SCHEMA, format_checker=checker)


def test_server_json_is_valid_against_the_2025_12_11_schema():
    assert SCHEMA["$id"] == SCHEMA_ID and "2025-12-11" in SCHEMA["$id"]
    assert DOC["$schema"] == SCHEMA["$id"]
    v = validator()
    errors = sorted(v.iter_errors(DOC), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    # The validator is not vacuous: it refuses what the schema forbids.
    for broken in (
        {**DOC, "description": "x" * 101},
        {**DOC, "name": "quarry"},
        {**DOC, "remotes": [{**DOC["remotes"][0], "url": "{host}/mcp"}]},
        {**DOC, "remotes": [{**DOC["remotes"][0], "type": "stdio"}]},
        {**DOC, "$schema": "not a uri"},
        {k: val for k, val in DOC.items() if k != "version"},
    ):
        assert list(v.iter_errors(broken)), f"the schema should refuse {broken}"


def test_version_name_and_description_follow_the_workspace_and_the_registry():
    workspace = tomllib.loads((REPO / "Cargo.toml").read_text(encoding="utf-8"))
    assert DOC["version"] == workspace["workspace"]["package"]["version"]
    limit = SCHEMA["definitions"]["ServerDetail"]["properties"]["description"]["maxLength"]
    assert 1 <= len(DOC["description"]) <= limit, (len(DOC["description"]), limit)
    # Reverse-DNS name under a GitHub namespace, as the registry's own name check spells it
    # (stricter than the schema's pattern: parts start and end alphanumeric).
    assert re.fullmatch(r"io\.github\.[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]/[a-zA-Z0-9][a-zA-Z0-9._-]*[a-zA-Z0-9]", DOC["name"])
    # Quarry is on no package registry: no invented package.
    assert "packages" not in DOC
    # The official registry keeps only the publisher-provided key of _meta, at most 4 KB.
    assert set(DOC["_meta"]) == {PUBLISHER}
    assert len(json.dumps(DOC["_meta"][PUBLISHER], separators=(",", ":"), ensure_ascii=False).encode()) <= 4096
    assert DOC["_meta"][PUBLISHER]["stdio"]["command"] == "quarry" and DOC["_meta"][PUBLISHER]["stdio"]["args"] == ["mcp"]


def test_the_remotes_are_quarrys_routes_and_templates_are_declared():
    assert {(r["type"], urllib.parse.urlsplit(r["url"]).path) for r in DOC["remotes"]} == set(EXPECTED_REMOTES)
    for r in DOC["remotes"]:
        # Every {variable} of the URL and of a header value is declared where it is used (the
        # registry refuses undeclared ones), and the URL is HTTPS (the registry's remote rule).
        assert r["url"].startswith("https://{host}/"), r["url"]
        assert set(re.findall(r"\{([^}]+)\}", r["url"])) <= set(r.get("variables", {})), r
        for h in r.get("headers", []):
            assert set(re.findall(r"\{([^}]+)\}", h.get("value", ""))) <= set(h.get("variables", {})), h
        auth = [h for h in r["headers"] if h["name"] == "Authorization"]
        assert len(auth) == 1 and auth[0]["isSecret"] is True and auth[0]["value"] == "Bearer {token}", r
        assert auth[0]["isRequired"] is False and "--auth token" in auth[0]["description"], auth
        assert auth[0]["variables"]["token"]["isSecret"] is True


# ---------------------------------------------------------------------------------------------
# The remotes against a real server.


@dataclass
class Deployment:
    base: str  # http://127.0.0.1:PORT
    token: str

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.base).netloc


@pytest.fixture(scope="module")
def deployment(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("server-json")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})

    def cli(*args: str) -> str:
        r = home.run(*args)
        assert r.returncode == 0, f"quarry {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return r.stdout

    cli("user", "add", "reg")
    cli("space", "grant", "default", "reg", "--role", "owner")
    token = json.loads(cli("--json", "token", "create", "--user", "reg", "--spaces", "default"))["token"]
    srv = start_server(home, "--auth", "token", logdir=root / "logs")
    try:
        r = requests.post(srv.url("/api/v1/endpoints"), timeout=60, headers={"Authorization": f"Bearer {token}"},
                          json={"name": ENDPOINT, "description": "server.json test", "servers": ["knowledge"]})
        assert r.status_code == 201, r.text
        yield Deployment(base=srv.base, token=token)
    finally:
        srv.stop()


def fill(template: str, values: dict[str, str]) -> str:
    """``{name}`` → value, the registry's substitution; an unknown name stays as it is."""
    return re.sub(r"\{([^}]+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def resolve(remote: dict, d: Deployment, with_token: bool = True) -> tuple[str, dict[str, str]]:
    """The URL and headers a client builds from `remote` for the test server: `{host}` is its
    host:port, `{endpoint}` the named endpoint made above, `{token}` its token; optional
    headers without a value are left out. HTTPS becomes HTTP (see the module docstring)."""
    user_values = {"host": d.host, "endpoint": ENDPOINT, "token": d.token}
    for name, var in remote.get("variables", {}).items():
        assert name in user_values or not var.get("isRequired"), f"no value for required variable {name}"
    url = fill(remote["url"], user_values)
    assert url.startswith("https://") and "{" not in url, url
    url = "http://" + url.removeprefix("https://")
    headers = {}
    for h in remote.get("headers", []):
        if "value" not in h or (h["name"] == "Authorization" and not with_token):
            continue
        headers[h["name"]] = fill(h["value"], user_values)
    return url, headers


async def list_tools(remote: dict, url: str, headers: dict[str, str]) -> list[str]:
    with anyio.fail_after(120):
        if remote["type"] == "sse":
            transport = sse_client(url, headers=headers, timeout=30, sse_read_timeout=60)
        else:
            transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        async with Client(transport, read_timeout_seconds=60) as c:
            return sorted(t.name for t in (await c.list_tools()).tools)


@pytest.mark.parametrize("remote", DOC["remotes"], ids=remote_id)
def test_every_remote_connects_with_the_sdk_and_lists_tools(deployment, remote):
    url, headers = resolve(remote, deployment)
    assert headers["Authorization"].startswith("Bearer qk_"), headers
    names = anyio.run(list_tools, remote, url, headers)
    assert names, f"{url} listed no tools"
    want = EXPECTED_REMOTES[(remote["type"], urllib.parse.urlsplit(remote["url"]).path)]
    assert want <= set(names), (url, sorted(want - set(names)), names)


def test_the_authorization_header_is_what_a_token_server_asks_for(deployment):
    """The header's description says it is needed with `--auth token`: without it, refused."""
    remote = next(r for r in DOC["remotes"] if r["type"] == "streamable-http")
    url, headers = resolve(remote, deployment, with_token=False)
    assert "Authorization" not in headers
    with pytest.raises(Exception) as caught:
        anyio.run(list_tools, remote, url, headers)
    assert "AUTH_REQUIRED" in repr(caught.value), repr(caught.value)
    r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                      headers={"Accept": "application/json, text/event-stream", **headers}, timeout=30)
    assert r.status_code == 401, r.text


def test_on_loopback_without_auth_no_header_is_needed(server):
    """…and that it is not required: the default loopback server answers without a token."""
    remote = next(r for r in DOC["remotes"] if urllib.parse.urlsplit(r["url"]).path == "/mcp")
    d = Deployment(base=server.base, token="")
    url, headers = resolve(remote, d, with_token=False)
    names = anyio.run(list_tools, remote, url, headers)
    assert {"query", "knowledge_search"} <= set(names), names


@pytest.mark.parametrize("index", range(len(DOC["remotes"])), ids=lambda i: remote_id(DOC["remotes"][i]))
def test_a_remote_with_a_wrong_path_does_not_connect(deployment, index):
    """The connection check can fail: a copy of server.json with this remote's path moved under
    a path Quarry does not serve is still schema-valid, and the SDK cannot list its tools."""
    broken = copy.deepcopy(DOC)
    remote = broken["remotes"][index]
    remote["url"] = remote["url"].replace("https://{host}/", "https://{host}/no-such-surface/", 1)
    assert not list(validator().iter_errors(broken))
    url, headers = resolve(remote, deployment)
    with pytest.raises(Exception) as caught:
        anyio.run(list_tools, remote, url, headers)
    # Refused as a route that does not exist (HTTP 404, or its JSON-RPC rendering), not timed out.
    assert re.search(r"Not Found|404", repr(caught.value)), f"{url}: {caught.value!r}"
    r = requests.request("GET" if remote["type"] == "sse" else "POST", url, timeout=30,
                         json=None if remote["type"] == "sse" else {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         headers={"Accept": "text/event-stream" if remote["type"] == "sse"
                                  else "application/json, text/event-stream", **headers})
    assert r.status_code == 404, (url, r.status_code, r.text[:300])
