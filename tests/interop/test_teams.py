"""Teams: spaces, users, roles and access tokens, end to end through the real binary.

One home is built once for the module with the CLI acting as administrator: spaces ``acme``
(owner ``owner``, viewer ``viewer``, editor ``editor``), ``globex`` (owner ``outsider``) and
``initech`` (owner ``multi``, who is also a viewer of ``acme``); knowledge bases with real
uploaded documents in ``acme`` (``docs``, ``other``) and ``globex`` (``gdocs``) whose words
never overlap ("zanzibar"/"walrus"/"marmalade" only in acme, "quokka" only in globex); and
one ``quarry serve --auth token`` shared by most tests. Every boundary is probed over REST
(``requests``, real ``curl`` for the seed's commands) and over MCP with the official Python
SDK: what another space holds must look exactly like what does not exist.

Tests that revoke or expire tokens make their own tokens, so the shared ones stay valid.
"""

from __future__ import annotations

import calendar
import json
import re
import subprocess
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
import requests
from conftest import (CORPUS, QuarryHome, QuarryServer, backend, db_rows, free_port, make_home, second_node,
                      start_server, wait_ready)
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

TOKEN_RE = re.compile(r"^qk_[0-9a-f]{64}$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

QMD_TOOLS = {"search", "vsearch", "query", "get", "multi_get", "status", "metadata"}
CAPTURE_TOOLS = {"create_knowledge", "get_knowledge", "query_knowledge", "list_knowledge", "update_knowledge", "delete_knowledge"}
WRITE_TOOLS = {"create_knowledge", "update_knowledge", "delete_knowledge", "write_page", "wiki_log"}
WIKI_TOOLS = {"wiki_index", "read_page", "write_page", "lint_wiki", "wiki_log"}
BROWSE_TOOLS = {"ls", "find", "grep", "cat"}
ALL_MCP_TOOLS = QMD_TOOLS | {"knowledge_search"} | CAPTURE_TOOLS | WIKI_TOOLS | BROWSE_TOOLS

ACME_PLAN = "# Acme Launch Plan\n\nThe zanzibar rollout starts on Monday.\nThe pelican team owns the rollout.\n"
ACME_NOTES = "Acme notes about walrus migrations and the pelican budget.\n"
ACME_MANUAL = "# Acme Marmalade Manual\n\n" + " ".join(
    f"Step {i}: stir the marmalade slowly and watch the pelican gauge before moving on." for i in range(1, 16)
) + "\n"
GLOBEX_SECRET = "# Globex Secret\n\nThe quokka project is confidential.\n"

NO_RESULT_SUGGESTIONS = [
    "- Try different keywords or rephrase your query",
    "- Use more general terms if query is too specific",
    "- Check if the topic exists in the knowledge bases",
]
FEW_RESULT_SUGGESTIONS = [
    "- Consider lowering min_score to get more results",
    "- Try breaking the query into smaller parts",
    '- Use "keyword" mode if looking for exact terms',
]
SUGGESTIONS_HEADER = "\n### Suggestions for Better Results\n\n"

RANDOM_UUID = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
RANDOM_DOCID = "#abcdef"


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


# ---------------------------------------------------------------------------------------------
# The shared team home and server.


@dataclass
class Team:
    home: QuarryHome
    srv: QuarryServer
    root: Path
    spaces: dict[str, str]  # name -> UUID
    kbs: dict[str, str]  # name -> UUID
    docs: dict[str, dict]  # file name -> uploaded document (id, docid, knowledge_base, …)
    tokens: dict[str, dict]  # key -> `token create --json` output
    secrets: list[str] = field(default_factory=list)
    bogus: list[str] = field(default_factory=list)  # invalid tokens sent (must not be logged either)

    def tok(self, key: str) -> str:
        return self.tokens[key]["token"]

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        r = self.home.run(*args)
        assert r.returncode == 0, f"quarry {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r

    def cli_json(self, *args: str):
        return json.loads(self.cli("--json", *args).stdout)

    def new_token(self, user: str, *args: str) -> dict:
        t = self.cli_json("token", "create", "--user", user, *args)
        self.secrets.append(t["token"])
        return t


@pytest.fixture(scope="module")
def team(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("teams")
    home = make_home(quarry_bin, corpus, root / "quarry-home", env={"QUARRY_OCR": "off"})
    t = Team(home=home, srv=None, root=root, spaces={}, kbs={}, docs={}, tokens={})  # type: ignore[arg-type]

    for name in ("acme", "globex", "initech"):
        t.spaces[name] = t.cli_json("space", "create", name, "--description", f"{name} space")["id"]
    for user in ("owner", "viewer", "editor", "outsider", "multi"):
        t.cli("user", "add", user)
    for space, user, role in (
        ("acme", "owner", "owner"),
        ("acme", "viewer", "viewer"),
        ("acme", "editor", "editor"),
        ("acme", "multi", "viewer"),
        ("globex", "outsider", "owner"),
        ("initech", "multi", "owner"),
    ):
        t.cli("space", "grant", space, user, "--role", role)

    files = root / "files"
    files.mkdir()
    for name, text in (
        ("acme-plan.md", ACME_PLAN),
        ("acme-notes.txt", ACME_NOTES),
        ("acme-manual.md", ACME_MANUAL),
        ("globex-secret.md", GLOBEX_SECRET),
    ):
        (files / name).write_text(text, encoding="utf-8")

    for space, kb, names in (
        ("acme", "docs", ["acme-plan.md"]),
        ("acme", "other", ["acme-notes.txt", "acme-manual.md"]),
        ("globex", "gdocs", ["globex-secret.md"]),
    ):
        t.kbs[kb] = t.cli_json("--space", space, "kb", "create", kb)["id"]
        up = t.cli_json("--space", space, "kb", "upload", kb, *[str(files / n) for n in names])
        assert [d["status"] for d in up["documents"]] == ["ready"] * len(names), up
        for d in up["documents"]:
            t.docs[d["file_name"]] = d

    for key, user, args in (
        ("owner", "owner", ("--space", "acme")),  # the global --space sets the token's space
        ("owner_ro", "owner", ("--spaces", "acme", "--read-only", "--label", "read only")),
        ("viewer", "viewer", ("--spaces", "acme")),
        ("editor", "editor", ("--spaces", "acme")),
        ("outsider", "outsider", ("--spaces", "globex")),
        ("allow", "owner", ("--spaces", "acme", "--kb", "docs", "--label", "docs only")),
        ("multi", "multi", ()),  # all of multi's spaces: acme and initech
    ):
        if args[:1] == ("--space",):
            t.tokens[key] = t.cli_json(*args, "token", "create", "--user", user, "--label", key)
            t.secrets.append(t.tokens[key]["token"])
        else:
            t.tokens[key] = t.new_token(user, *args)

    # On PostgreSQL the server is another node of the deployment: everything above was
    # written through this home's CLI, and every probe below reaches it through node B.
    serving = second_node(home, root / "node-b") if backend() == "postgres" else home
    t.srv = start_server(serving, "--auth", "token", logdir=root / "logs")
    wait_ready(t.srv)
    yield t
    t.srv.stop()


# ---------------------------------------------------------------------------------------------
# Helpers.


def http(srv: QuarryServer, method: str, path: str, token: str | None = None, *, headers=None, **kw) -> requests.Response:
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    return requests.request(method, srv.url(path), headers=h, timeout=60, **kw)


def assert_rest_error(r: requests.Response, status: int, code: str | None = None, fragment: str | None = None) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body.get("status_code") == status and isinstance(body.get("detail"), str), body
    if code is not None:
        assert body.get("error_code") == code, body
    if fragment is not None:
        assert fragment in body["detail"], (fragment, body)
    if status == 401:
        assert r.headers.get("WWW-Authenticate", "").startswith("Bearer"), dict(r.headers)
    return body


def assert_mcp_envelope(r: requests.Response, status: int, code: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None, body
    err = body["error"]
    assert err["code"] == -32000 and isinstance(err["message"], str) and err["message"], body
    assert err["data"]["error_code"] == code, body
    return body


def assert_same_as_missing(foreign: requests.Response, missing: requests.Response, fid: str, mid: str) -> None:
    """A probe at something in another space answers exactly like a probe at nothing."""
    assert foreign.status_code == missing.status_code == 404, (foreign.status_code, foreign.text, missing.text)
    assert foreign.text.replace(fid, mid) == missing.text, (foreign.text, missing.text)


def upload(srv, token, kb, name, data: bytes, **kw) -> requests.Response:
    return http(
        srv,
        "POST",
        f"/api/v1/knowledge-bases/{kb}/documents",
        token,
        files=[("files", (name, data, "application/octet-stream"))],
        **kw,
    )


def ksearch(srv, token, body: dict, **kw) -> requests.Response:
    return http(srv, "POST", "/api/v1/knowledge-search", token, json=body, **kw)


def rest_search(srv, token, query: str, route: str = "/search", **kw) -> list[dict]:
    r = http(srv, "POST", route, token, json={"query": query}, **kw)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def capture(srv, token, method: str, params: dict | None = None, *, headers=None, path="/api/v1/mcp", id=1):
    """One JSON-RPC request to the stateless capture endpoint (no Accept header, no session)."""
    h = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    s = requests.Session()
    req = requests.Request("POST", srv.url(path), headers=h, data=json.dumps(body).encode()).prepare()
    req.headers.pop("Accept", None)
    req.headers.pop("Accept-Encoding", None)
    return s.send(req, timeout=60)



def mcp_url(srv, token: str | None = None, **params: str) -> str:
    q = []
    if token is not None:
        q.append(f"token={token}")
    q += [f"{k}={v}" for k, v in params.items()]
    return srv.mcp_url + ("?" + "&".join(q) if q else "")


@asynccontextmanager
async def mcp_session(url: str, headers: dict | None = None):
    """An SDK client with an initialize handshake (a session: `Mcp-Session-Id`)."""
    if headers:
        async with httpx2.AsyncClient(headers=headers, timeout=30) as hc:
            async with Client(streamable_http_client(url, http_client=hc), mode="legacy", read_timeout_seconds=30) as c:
                yield c
    else:
        async with Client(url, mode="legacy", read_timeout_seconds=30) as c:
            yield c


def texts(result) -> list[str]:
    return [c.text for c in result.content if c.type == "text"]


async def tool_ok(c, name: str, args: dict | None = None):
    r = await c.call_tool(name, args or {})
    assert r.is_error is not True, f"{name}({args}) failed: {texts(r)}"
    return r


async def tool_err(c, name: str, args: dict) -> str:
    r = await c.call_tool(name, args)
    assert r.is_error is True, f"{name}({args}) should fail, got {texts(r)} {r.structured_content}"
    return "\n".join(texts(r))


async def tool_refused(c, name: str, args: dict) -> None:
    """A write refused: an isError result, or (for a tool not even listed) a protocol error."""
    try:
        r = await c.call_tool(name, args)
    except MCPError as e:  # a JSON-RPC error for a write tool the caller is not offered
        assert name in e.error.message or name in json.dumps(e.error.data), e.error
        return
    assert r.is_error is True, f"{name}({args}) should be refused, got {texts(r)} {r.structured_content}"


def found_files(results: list[dict], key: str = "file") -> list[str]:
    return [r[key] for r in results]


def expected_search_blocks(query: str, mode: str, structured: dict, min_score: float = 0.5) -> list[str]:
    """Seed 000's knowledge_search text layout, built from the structured results: the mode
    that ran (with the one asked for, `mode`, beside it when they differ) and each paged
    result's page. A search with `min_score` 0 is not told to lower it (issue 65 item 17)."""
    results = structured["results"]
    ran = structured["search_mode"]
    shown = ran if ran == mode else f"{ran} ({mode} asked)"
    blocks = [
        f"## Search Results\n\n**Query:** {query}\n**Total Found:** {structured['total_count']}\n"
        f"**Returned:** {len(results)}\n**Search Mode:** {shown}\n\n"
    ]
    if results:
        s = "### Matched Documents\n\n"
        for i, r in enumerate(results, 1):
            content = r["content"]
            s += (
                f"#### [{i}] {r['knowledge_title']}\n- **Score:** {r['score'] * 100:.1f}%\n"
                f"- **Source:** {r['knowledge_filename']}\n"
                + (f"- **Page:** {r['page']}\n" if r.get("page") is not None else "")
                + f"- **Match Type:** {r['match_type']}\n\n"
                f"> {content[:500]}{'...' if len(content) > 500 else ''}\n\n"
            )
        blocks.append(s)
    if len(results) < 3:
        lines = NO_RESULT_SUGGESTIONS if not results else [
            line for line in FEW_RESULT_SUGGESTIONS if min_score > 0 or "min_score" not in line
        ]
        blocks.append(SUGGESTIONS_HEADER + "".join(line + "\n" for line in lines))
    return blocks


RESULT_FIELDS = {"id", "content", "score", "knowledge_id", "knowledge_title", "knowledge_filename", "match_type", "docid", "knowledge_base", "file"}


def assert_result_fields(r: dict) -> None:
    assert RESULT_FIELDS <= set(r), r
    assert r["match_type"] in {"keyword", "vector", "hybrid"}, r
    assert 0 <= r["score"] <= 1, r
    assert r["docid"].startswith("#"), r


# ---------------------------------------------------------------------------------------------
# The CLI as administrator.


def test_cli_spaces_users_and_tokens(team):
    r = team.cli("space", "create", "scratch", "--description", "temporary")
    m = re.fullmatch(r"Created space 'scratch' \(([0-9a-f-]{36})\)\n?", r.stdout)
    assert m, r.stdout
    listed = team.cli_json("space", "list")
    by_name = {s["name"]: s for s in listed}
    assert by_name["scratch"]["id"] == m.group(1) and by_name["scratch"]["description"] == "temporary"
    assert by_name["acme"]["id"] == team.spaces["acme"]
    assert {(x["user"], x["role"]) for x in by_name["acme"]["members"]} == {
        ("owner", "owner"),
        ("viewer", "viewer"),
        ("editor", "editor"),
        ("multi", "viewer"),
    }
    team.cli("space", "rm", "scratch", "--yes")
    assert "scratch" not in {s["name"] for s in team.cli_json("space", "list")}

    # --space on `token create` sets the token's space; --kb maps names to UUIDs.
    own = team.tokens["owner"]
    assert TOKEN_RE.match(own["token"]) and own["user"] == "owner" and UUID_RE.match(own["id"])
    assert own["spaces"] == [team.spaces["acme"]] and own["collections"] is None and own["read_only"] is False
    assert own["prefix"] == own["token"][: len(own["prefix"])] and own["revoked_at"] is None
    assert own["expires_at"] is None and own["last_used_at"] is None
    assert team.tokens["allow"]["collections"] == [team.kbs["docs"]]
    assert team.tokens["owner_ro"]["read_only"] is True
    assert sorted(team.tokens["multi"]["spaces"]) == sorted([team.spaces["acme"], team.spaces["initech"]])

    # Without --json stdout is just the token.
    r = team.cli("token", "create", "--user", "viewer", "--spaces", "acme", "--label", "plain", "--expires", "30d")
    plain = r.stdout.strip()
    team.secrets.append(plain)
    assert TOKEN_RE.match(plain) and r.stdout == plain + "\n", r.stdout

    # token list never shows a secret.
    out = team.cli("--json", "token", "list").stdout
    for s in team.secrets:
        assert s not in out
    rows = json.loads(out)
    assert all("token" not in row for row in rows), rows[0]
    mine = team.cli_json("token", "list", "--user", "outsider")
    assert [row["id"] for row in mine] == [team.tokens["outsider"]["id"]]


def test_roles_membership_changes_and_expiry_formats(team):
    srv = team.srv
    team.cli("user", "add", "temp")
    team.cli("space", "grant", "acme", "temp", "--role", "admin")
    t = team.new_token("temp", "--spaces", "acme", "--label", "temp admin")
    # admin: creates and deletes knowledge bases.
    r = http(srv, "POST", "/api/v1/knowledge-bases", t["token"], json={"name": "adminkb"})
    assert r.status_code == 201 and r.json()["data"]["name"] == "adminkb", r.text
    assert http(srv, "DELETE", "/api/v1/knowledge-bases/adminkb", t["token"]).status_code == 200
    # Role changes apply to existing tokens.
    team.cli("space", "grant", "acme", "temp", "--role", "viewer")
    assert_rest_error(http(srv, "POST", "/api/v1/knowledge-bases", t["token"], json={"name": "adminkb2"}), 403)
    assert found_files(rest_search(srv, t["token"], "zanzibar")) == ["docs/acme-plan.md"]
    # Out of the space: the token can no longer use it.
    team.cli("space", "revoke", "acme", "temp")
    assert_rest_error(http(srv, "GET", "/api/v1/knowledge-bases", t["token"]), 403, "SPACE_FORBIDDEN")
    r = http(srv, "POST", "/search", t["token"], json={"query": "zanzibar"})
    assert r.status_code == 403 and "zanzibar" not in r.text, r.text
    # A removed user's tokens stop working.
    team.cli("space", "grant", "acme", "temp", "--role", "viewer")
    assert http(srv, "GET", "/status", t["token"]).status_code == 200
    team.cli("user", "rm", "temp")
    assert "temp" not in team.cli("user", "list").stdout.split()
    r = http(srv, "GET", "/status", t["token"])
    assert r.status_code == 401 and r.json()["error_code"] in ("AUTH_FAILED", "TOKEN_REVOKED"), r.text

    # --expires formats.
    now = time.time() * 1000
    for spec, delta in (("12h", 12 * 3_600_000), ("90m", 90 * 60_000), ("30d", 30 * 86_400_000)):
        tok = team.new_token("viewer", "--spaces", "acme", "--expires", spec)
        assert abs(tok["expires_at"] - (now + delta)) < 120_000, (spec, tok)
    tok = team.new_token("viewer", "--spaces", "acme", "--expires", "2099-01-31")
    day = calendar.timegm((2099, 1, 31, 0, 0, 0)) * 1000
    assert day <= tok["expires_at"] <= day + 86_400_000, tok
    assert http(srv, "GET", "/status", tok["token"]).status_code == 200
    r = team.home.run("token", "create", "--user", "viewer", "--expires", "soon")
    assert r.returncode != 0 and "expires" in (r.stderr + r.stdout).lower(), (r.returncode, r.stderr)
    r = team.home.run("token", "create", "--user", "nobody")
    assert r.returncode != 0 and "nobody" in r.stderr, (r.returncode, r.stderr)


def test_token_from_query_wins_over_header(team):
    srv, o = team.srv, team.tok("owner")
    bogus = "qk_" + "3" * 64
    team.bogus.append(bogus)
    r = http(srv, "GET", f"/status?token={o}", bogus)
    assert r.status_code == 200 and {"docs", "other"} <= {c["name"] for c in r.json()["collections"]}, r.text
    r = http(srv, "GET", f"/status?token={bogus}", o)
    body = assert_rest_error(r, 401, "AUTH_FAILED")
    assert bogus not in r.text and o not in r.text, body
    r = http(srv, "GET", "/status", "not-a-token")
    assert_rest_error(r, 401, "AUTH_FAILED")
    assert "not-a-token" not in r.text
    assert http(srv, "GET", "/health").status_code == 200  # the one open route


# ---------------------------------------------------------------------------------------------
# 1. Isolation.


def test_outsider_rest_isolation(team):
    srv, x, o = team.srv, team.tok("outsider"), team.tok("owner")
    kb, doc = team.kbs["docs"], team.docs["acme-plan.md"]
    gdocs = team.kbs["gdocs"]

    # Control: the owner sees the acme document.
    assert found_files(rest_search(srv, o, "zanzibar")) == ["docs/acme-plan.md"]
    assert http(srv, "GET", f"/api/v1/knowledge-bases/{kb}/documents/{doc['id']}/markdown", o).status_code == 200

    # Listing: only its own space.
    listed = http(srv, "GET", "/api/v1/knowledge-bases", x).json()
    assert [k["name"] for k in listed["data"]] == ["gdocs"] and listed["total"] == 1, listed
    cols = http(srv, "GET", "/collections", x).json()
    assert [c["name"] for c in cols["collections"]] == ["gdocs"], cols

    # Every probe at an acme knowledge base answers like a made-up id.
    for suffix in ("", "/documents", f"/documents/{doc['id']}", f"/documents/{doc['id']}/markdown",
                   f"/documents/{doc['id']}/chunks", f"/documents/{doc['id']}/preview"):
        for key in (kb, "docs"):
            assert_same_as_missing(
                http(srv, "GET", f"/api/v1/knowledge-bases/{key}{suffix}", x),
                http(srv, "GET", f"/api/v1/knowledge-bases/{RANDOM_UUID}{suffix}", x),
                key,
                RANDOM_UUID,
            )
    # The acme document id inside the outsider's own knowledge base: like a made-up document id.
    for suffix in ("", "/markdown", "/chunks", "/preview"):
        assert_same_as_missing(
            http(srv, "GET", f"/api/v1/knowledge-bases/{gdocs}/documents/{doc['id']}{suffix}", x),
            http(srv, "GET", f"/api/v1/knowledge-bases/{gdocs}/documents/{RANDOM_UUID}{suffix}", x),
            doc["id"],
            RANDOM_UUID,
        )
    for method, suffix in (("DELETE", f"/documents/{doc['id']}"), ("POST", f"/documents/{doc['id']}/retry"),
                           ("DELETE", ""), ("PATCH", "")):
        kw = {"json": {"description": "pwned"}} if method == "PATCH" else {}
        assert_same_as_missing(
            http(srv, method, f"/api/v1/knowledge-bases/{kb}{suffix}", x, **kw),
            http(srv, method, f"/api/v1/knowledge-bases/{RANDOM_UUID}{suffix}", x, **kw),
            kb,
            RANDOM_UUID,
        )
    assert_same_as_missing(
        http(srv, "DELETE", f"/api/v1/knowledge-bases/{gdocs}/documents/{doc['id']}", x),
        http(srv, "DELETE", f"/api/v1/knowledge-bases/{gdocs}/documents/{RANDOM_UUID}", x),
        doc["id"],
        RANDOM_UUID,
    )
    assert_same_as_missing(
        upload(srv, x, kb, "evil.md", b"# evil\n"), upload(srv, x, RANDOM_UUID, "evil.md", b"# evil\n"), kb, RANDOM_UUID
    )

    # Search: nothing from acme, by any route.
    for route in ("/search", "/query"):
        assert rest_search(srv, x, "zanzibar", route) == [], route
        assert found_files(rest_search(srv, x, "quokka", route)) == ["gdocs/globex-secret.md"], route
    r = ksearch(srv, x, {"question": "zanzibar", "search_mode": "keyword", "min_score": 0})
    assert r.status_code == 200 and r.json()["results"] == [] and r.json()["total_count"] == 0, r.text
    for key in (kb, "docs"):
        foreign = ksearch(srv, x, {"question": "zanzibar", "knowledge_base_ids": [key]})
        missing = ksearch(srv, x, {"question": "zanzibar", "knowledge_base_ids": [RANDOM_UUID]})
        assert_same_as_missing(foreign, missing, key, RANDOM_UUID)
        assert foreign.json()["detail"] == f"knowledge base '{key}' not found", foreign.text

    # Get by a docid the owner can see, or by path: like a made-up one.
    assert http(srv, "POST", "/get", o, json={"file": doc["docid"]}).status_code == 200
    assert_same_as_missing(
        http(srv, "POST", "/get", x, json={"file": doc["docid"]}),
        http(srv, "POST", "/get", x, json={"file": RANDOM_DOCID}),
        doc["docid"],
        RANDOM_DOCID,
    )
    assert_same_as_missing(
        http(srv, "POST", "/get", x, json={"file": "docs/acme-plan.md"}),
        http(srv, "POST", "/get", x, json={"file": "docs/acme-plXn.md"}),
        "docs/acme-plan.md",
        "docs/acme-plXn.md",
    )

    # Status counts only globex (not acme, not the default space's folder collection).
    st = http(srv, "GET", "/status", x).json()
    assert st["total_documents"] == 1 and [c["name"] for c in st["collections"]] == ["gdocs"], st
    st = http(srv, "GET", "/status", o).json()
    names = {c["name"] for c in st["collections"]}
    assert "gdocs" not in names and "notes" not in names and {"docs", "other"} <= names, st
    assert st["total_documents"] == sum(c["documents"] for c in st["collections"]), st

    # Nothing was deleted or changed by the probes.
    r = http(srv, "GET", f"/api/v1/knowledge-bases/{kb}/documents/{doc['id']}", o)
    assert r.status_code == 200 and r.json()["data"]["status"] == "ready", r.text
    assert http(srv, "GET", f"/api/v1/knowledge-bases/{kb}", o).json()["data"]["description"] == ""


@pytest.mark.anyio
async def test_outsider_mcp_isolation(team):
    srv, x, o = team.srv, team.tok("outsider"), team.tok("owner")
    doc = team.docs["acme-plan.md"]

    # The owner writes a note in acme the outsider will try to reach.
    async with mcp_session(mcp_url(srv, o, resource="isolation-notes")) as c:
        r = await tool_ok(c, "create_knowledge", {"content": "Owner-only note about the gazpacho budget.", "title": "Budget"})
        note_id = r.structured_content["id"]
        r = await tool_ok(c, "knowledge_search", {"query": "gazpacho", "search_mode": "keyword", "min_score": 0})
        assert [h["knowledge_id"] for h in r.structured_content["results"]] == [note_id]

    async with mcp_session(mcp_url(srv, x)) as c:
        r = await tool_ok(c, "search", {"query": "zanzibar"})
        assert r.structured_content["results"] == [], r.structured_content
        r = await tool_ok(c, "query", {"query": "zanzibar"})
        assert r.structured_content["results"] == [], r.structured_content
        r = await tool_ok(c, "search", {"query": "quokka"})
        assert [x_["file"] for x_ in r.structured_content["results"]] == ["gdocs/globex-secret.md"]
        r = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "search_mode": "keyword", "min_score": 0})
        assert r.structured_content["results"] == [] and r.structured_content["total_count"] == 0
        r = await tool_ok(c, "status", {})
        assert r.structured_content["totalDocuments"] == 1, r.structured_content
        assert [col["name"] for col in r.structured_content["collections"]] == ["gdocs"]

        foreign = await tool_err(c, "get", {"file": doc["docid"]})
        missing = await tool_err(c, "get", {"file": RANDOM_DOCID})
        assert foreign.replace(doc["docid"], RANDOM_DOCID) == missing, (foreign, missing)
        foreign = await tool_err(c, "get", {"file": "docs/acme-plan.md"})
        missing = await tool_err(c, "get", {"file": "docs/acme-plXn.md"})
        assert foreign.replace("docs/acme-plan.md", "docs/acme-plXn.md") == missing, (foreign, missing)
        r = await c.call_tool("multi_get", {"pattern": "docs/*.md"})
        assert "zanzibar" not in json.dumps([texts(r), r.structured_content], ensure_ascii=False)

        for tool in ("get_knowledge", "delete_knowledge"):
            foreign = await tool_err(c, tool, {"id": note_id})
            missing = await tool_err(c, tool, {"id": RANDOM_UUID})
            assert foreign.replace(note_id, RANDOM_UUID) == missing, (tool, foreign, missing)
        r = await tool_ok(c, "query_knowledge", {"query": "gazpacho"})
        dumped = json.dumps([texts(r), r.structured_content], ensure_ascii=False)
        assert note_id not in dumped and "budget" not in dumped, dumped
        r = await tool_ok(c, "knowledge_search", {"query": "gazpacho", "search_mode": "keyword", "min_score": 0})
        assert r.structured_content["total_count"] == 0

    # The URL cannot widen the token: ?kb= naming an acme knowledge base is refused exactly like
    # a knowledge base that does not exist.
    for kb in ("docs", team.kbs["docs"]):
        foreign = requests.post(mcp_url(srv, x, kb=kb), json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
        missing = requests.post(mcp_url(srv, x, kb="nosuchkb"), json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                timeout=30)
        assert_mcp_envelope(foreign, 404, "KB_NOT_FOUND")
        assert foreign.text.replace(kb, "nosuchkb") == missing.text, (foreign.text, missing.text)

    # The note survived the outsider's delete.
    async with mcp_session(mcp_url(srv, o, resource="isolation-notes")) as c:
        r = await tool_ok(c, "get_knowledge", {"id": note_id})
        assert "gazpacho budget" in r.structured_content["content"]


def test_viewer_reads_but_cannot_write(team):
    srv, v = team.srv, team.tok("viewer")
    kb, doc = team.kbs["docs"], team.docs["acme-plan.md"]
    assert found_files(rest_search(srv, v, "zanzibar")) == ["docs/acme-plan.md"]
    r = ksearch(srv, v, {"question": "zanzibar", "search_mode": "keyword", "min_score": 0})
    assert r.status_code == 200 and r.json()["total_count"] == 1, r.text
    assert http(srv, "GET", f"/api/v1/knowledge-bases/{kb}/documents/{doc['id']}/markdown", v).status_code == 200

    assert_rest_error(upload(srv, v, kb, "viewer.md", b"# viewer\n"), 403)
    assert_rest_error(http(srv, "POST", "/api/v1/knowledge-bases", v, json={"name": "viewerkb"}), 403)
    assert_rest_error(http(srv, "DELETE", f"/api/v1/knowledge-bases/{kb}/documents/{doc['id']}", v), 403)
    assert_rest_error(http(srv, "DELETE", f"/api/v1/knowledge-bases/{kb}", v), 403)
    assert_rest_error(http(srv, "PATCH", f"/api/v1/knowledge-bases/{kb}", v, json={"description": "x"}), 403)
    # Still there.
    assert http(srv, "GET", f"/api/v1/knowledge-bases/{kb}/documents/{doc['id']}", v).status_code == 200

    r = capture(srv, v, "tools/call", {"name": "create_knowledge", "arguments": {"content": "viewer note"}})
    assert r.status_code == 200, r.text
    # Refused: an isError result, or a JSON-RPC error for a write tool a viewer is not even offered.
    body = r.json()
    assert ("error" in body and "create_knowledge" in json.dumps(body["error"])) or body["result"]["isError"] is True, body
    r = capture(srv, v, "tools/list")
    assert not WRITE_TOOLS & {t["name"] for t in r.json()["result"]["tools"]}, r.text
    r = capture(srv, v, "tools/call", {"name": "list_knowledge", "arguments": {}})
    assert "viewer note" not in r.text, r.text


@pytest.mark.anyio
async def test_viewer_mcp_cannot_write(team):
    async with mcp_session(mcp_url(team.srv, team.tok("viewer"))) as c:
        r = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "search_mode": "keyword", "min_score": 0})
        assert r.structured_content["total_count"] == 1
        await tool_refused(c, "create_knowledge", {"content": "viewer wrote this walrus note"})
        r = await tool_ok(c, "list_knowledge", {})
        assert r.structured_content["items"] == [] or all("viewer wrote" not in json.dumps(i) for i in r.structured_content["items"])


def test_editor_writes_documents_but_not_knowledge_bases(team):
    srv, e = team.srv, team.tok("editor")
    r = upload(srv, e, "other", "editor-note.md", b"# Editor Note\n\nThe editor added a heron paragraph.\n")
    assert r.status_code == 202, r.text
    assert_rest_error(http(srv, "POST", "/api/v1/knowledge-bases", e, json={"name": "editorkb"}), 403)
    assert_rest_error(http(srv, "DELETE", f"/api/v1/knowledge-bases/{team.kbs['other']}", e), 403)
    [added] = r.json()["data"]
    assert added["result"] == "added", added
    added = added["document"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if rest_search(srv, e, "heron"):
            break
        time.sleep(0.2)
    assert found_files(rest_search(srv, e, "heron")) == ["other/editor-note.md"]
    r = http(srv, "DELETE", f"/api/v1/knowledge-bases/other/documents/{added['id']}", e)
    assert r.status_code == 200, r.text


def test_kb_allow_list_token(team):
    srv, a, o = team.srv, team.tok("allow"), team.tok("owner")
    listed = http(srv, "GET", "/api/v1/knowledge-bases", a).json()
    assert [k["name"] for k in listed["data"]] == ["docs"] and listed["total"] == 1, listed
    assert_same_as_missing(
        http(srv, "GET", f"/api/v1/knowledge-bases/{team.kbs['other']}", a),
        http(srv, "GET", f"/api/v1/knowledge-bases/{RANDOM_UUID}", a),
        team.kbs["other"],
        RANDOM_UUID,
    )
    assert found_files(rest_search(srv, a, "zanzibar")) == ["docs/acme-plan.md"]
    assert rest_search(srv, a, "walrus") == []
    assert found_files(rest_search(srv, o, "walrus")) == ["other/acme-notes.txt"]  # control
    st = http(srv, "GET", "/status", a).json()
    assert st["total_documents"] == 1 and [c["name"] for c in st["collections"]] == ["docs"], st
    r = ksearch(srv, a, {"question": "walrus", "search_mode": "keyword", "min_score": 0})
    assert r.status_code == 200 and r.json()["results"] == [], r.text
    r = ksearch(srv, a, {"question": "walrus", "knowledge_base_ids": ["other"]})
    assert_rest_error(r, 404, fragment="knowledge base 'other' not found")

    # ?kb= narrows a whole-space token, and never widens an allow-listed one.
    listed = http(srv, "GET", "/api/v1/knowledge-bases?kb=docs", o).json()
    assert [k["name"] for k in listed["data"]] == ["docs"], listed
    assert rest_search(srv, o, "walrus", params={"kb": "docs"}) == []
    # Naming one it cannot reach is refused like a missing one (not an empty answer).
    assert_same_as_missing(
        http(srv, "POST", "/search", a, json={"query": "walrus"}, params={"kb": "other"}),
        http(srv, "POST", "/search", a, json={"query": "walrus"}, params={"kb": "nosuchkb"}),
        "other",
        "nosuchkb",
    )
    assert_rest_error(http(srv, "GET", "/api/v1/knowledge-bases?kb=docs,other", a), 404, "KB_NOT_FOUND")

    # A token made by an allow-listed (or read-only) caller never has more than the caller.
    r = http(srv, "POST", "/api/v1/tokens", a, json={"label": "child"})
    assert r.status_code == 201, r.text
    child = r.json()["data"]
    team.secrets.append(child["token"])
    assert TOKEN_RE.match(child["token"]) and child["collections"] == [team.kbs["docs"]], child
    assert child["spaces"] == [team.spaces["acme"]]
    assert rest_search(srv, child["token"], "walrus") == []
    r = http(srv, "POST", "/api/v1/tokens", team.tok("owner_ro"), json={"label": "ro child"})
    assert r.status_code == 201 and r.json()["data"]["read_only"] is True, r.text
    team.secrets.append(r.json()["data"]["token"])
    assert_rest_error(upload(srv, r.json()["data"]["token"], "docs", "x.md", b"# x\n"), 403)


@pytest.mark.anyio
async def test_kb_allow_list_mcp(team):
    srv = team.srv
    for url in (mcp_url(srv, team.tok("allow")), mcp_url(srv, team.tok("owner"), kb="docs"),
                mcp_url(srv, team.tok("allow"), kb="docs")):
        async with mcp_session(url) as c:
            r = await tool_ok(c, "knowledge_search", {"query": "walrus", "search_mode": "keyword", "min_score": 0})
            assert r.structured_content["total_count"] == 0, url
            r = await tool_ok(c, "search", {"query": "walrus"})
            assert r.structured_content["results"] == [], url
            r = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "search_mode": "keyword", "min_score": 0})
            assert r.structured_content["total_count"] == 1, (url, r.structured_content)

    # An allow-listed token writes notes only into its knowledge bases: not the default resource
    # (which it may not create), not another knowledge base of the space.
    a = team.tok("allow")
    for headers in ({}, {"X-Resource": "other"}):
        r = capture(srv, a, "tools/call", {"name": "create_knowledge", "arguments": {"content": "capybara note"}},
                    headers=headers)
        body = r.json()
        # A tool's refusal is a tool result (MCP), saying which knowledge bases it may use.
        assert r.status_code == 200 and body["result"]["isError"] is True, (headers, body)
        assert "limited to 'docs'" in body["result"]["content"][0]["text"], body
    assert rest_search(srv, team.tok("owner"), "capybara") == []
    async with mcp_session(mcp_url(srv, a, resource="docs")) as c:
        r = await tool_ok(c, "create_knowledge", {"content": "A capybara note in docs.", "title": "Capybara"})
        kid = r.structured_content["id"]
        r = await tool_ok(c, "get_knowledge", {"id": kid})
        assert r.structured_content["knowledge_base"] == "docs"
        await tool_ok(c, "delete_knowledge", {"id": kid})


def test_space_selection_and_user_spaces(team):
    srv, m = team.srv, team.tok("multi")
    acme = team.spaces["acme"]
    r = http(srv, "GET", "/api/v1/knowledge-bases", m)
    assert_rest_error(r, 400, "SPACE_REQUIRED")
    for kw in ({"headers": {"X-Space-ID": acme}}, {"headers": {"X-Space-ID": "acme"}},
               {"params": {"space_id": acme}}, {"params": {"space": "acme"}}):
        r = http(srv, "GET", "/api/v1/knowledge-bases", m, **kw)
        names = {k["name"] for k in r.json()["data"]} if r.status_code == 200 else set()
        assert {"docs", "other"} <= names and "gdocs" not in names, (kw, r.text)
    r = http(srv, "GET", "/api/v1/knowledge-bases", m, headers={"X-Space-ID": "initech"})
    assert r.status_code == 200 and r.json()["data"] == [], r.text
    # The query parameter wins over the header.
    r = http(srv, "GET", "/api/v1/knowledge-bases", m, headers={"X-Space-ID": "initech"}, params={"space": "acme"})
    assert {"docs", "other"} <= {k["name"] for k in r.json()["data"]}, r.text

    # A space the token may not use and one that does not exist: the same 403.
    forbidden = http(srv, "GET", "/api/v1/knowledge-bases", m, headers={"X-Space-ID": team.spaces["globex"]})
    missing = http(srv, "GET", "/api/v1/knowledge-bases", m, headers={"X-Space-ID": RANDOM_UUID})
    b1 = assert_rest_error(forbidden, 403, "SPACE_FORBIDDEN")
    b2 = assert_rest_error(missing, 403, "SPACE_FORBIDDEN")
    assert b1["detail"].replace(team.spaces["globex"], RANDOM_UUID) == b2["detail"], (b1, b2)
    forbidden = http(srv, "GET", "/status", m, params={"space": "globex"})
    missing = http(srv, "GET", "/status", m, params={"space": "nosuchspace"})
    b1, b2 = assert_rest_error(forbidden, 403, "SPACE_FORBIDDEN"), assert_rest_error(missing, 403, "SPACE_FORBIDDEN")
    assert b1["detail"].replace("globex", "nosuchspace") == b2["detail"], (b1, b2)
    # A one-space token can't reach another space by naming it either.
    assert_rest_error(http(srv, "GET", "/status", team.tok("outsider"), params={"space": "acme"}), 403, "SPACE_FORBIDDEN")

    r = http(srv, "GET", "/api/v1/user/spaces", m)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    got = {(s["name"], s["role"]) for s in data["list"]}
    assert got == {("acme", "viewer"), ("initech", "owner")} and data["total"] == 2, data
    for s in data["list"]:
        assert s["space_id"] == s["id"] == team.spaces[s["name"]] and "description" in s, s
    data = http(srv, "GET", "/api/v1/user/spaces", team.tok("outsider")).json()["data"]
    assert [(s["name"], s["role"]) for s in data["list"]] == [("globex", "owner")], data


# ---------------------------------------------------------------------------------------------
# 2. Token lifecycle.


def test_token_expiry(team):
    srv, o = team.srv, team.tok("owner")
    soon = int(time.time() * 1000) + 2500
    r = http(srv, "POST", "/api/v1/tokens", o, json={"label": "short", "expires_at": soon})
    assert r.status_code == 201, r.text
    short = r.json()["data"]
    team.secrets.append(short["token"])
    assert short["expires_at"] == soon and short["label"] == "short", short
    assert http(srv, "GET", "/api/v1/knowledge-bases", short["token"]).status_code == 200

    r = http(srv, "POST", "/api/v1/tokens", o, json={"label": "a day", "expires_in_days": 1})
    assert r.status_code == 201, r.text
    day = r.json()["data"]
    team.secrets.append(day["token"])
    assert abs(day["expires_at"] - (time.time() * 1000 + 86_400_000)) < 120_000, day

    time.sleep(max(0, soon / 1000 - time.time()) + 0.5)
    body = assert_rest_error(http(srv, "GET", "/api/v1/knowledge-bases", short["token"]), 401, "TOKEN_EXPIRED")
    assert short["token"] not in json.dumps(body)
    r = capture(srv, short["token"], "tools/list")
    assert_mcp_envelope(r, 401, "TOKEN_EXPIRED")
    assert short["token"] not in r.text
    r = requests.post(mcp_url(srv, short["token"]), json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                      headers={"Accept": "application/json, text/event-stream"}, timeout=30)
    assert_mcp_envelope(r, 401, "TOKEN_EXPIRED")
    assert short["token"] not in r.text
    assert http(srv, "GET", "/api/v1/knowledge-bases", day["token"]).status_code == 200


def test_token_revocation_rest_and_cli(team):
    srv = team.srv
    t1 = team.new_token("owner", "--spaces", "acme", "--label", "revoke by id")
    t2 = team.new_token("owner", "--spaces", "acme", "--label", "revoke by prefix")
    for t in (t1, t2):
        assert http(srv, "GET", "/status", t["token"]).status_code == 200
    team.cli("token", "revoke", t1["id"])
    team.cli("token", "revoke", t2["prefix"])
    for t in (t1, t2):
        body = assert_rest_error(http(srv, "GET", "/status", t["token"]), 401, "TOKEN_REVOKED")
        assert t["token"] not in json.dumps(body)
        assert_mcp_envelope(capture(srv, t["token"], "tools/list"), 401, "TOKEN_REVOKED")
    rows = {row["id"]: row for row in team.cli_json("token", "list", "--user", "owner")}
    assert rows[t1["id"]]["revoked_at"] and rows[t2["id"]]["revoked_at"], rows

    # A user's own tokens over REST: listed without secrets, revocable.
    o = team.tok("owner")
    r = http(srv, "POST", "/api/v1/user/access-token", o)
    assert r.status_code == 201, r.text
    seeded = r.json()["data"]
    team.secrets.append(seeded["token"])
    assert TOKEN_RE.match(seeded["token"])
    r = http(srv, "POST", "/api/v1/user/access-token", o, json={"desc": "from seed"})
    assert r.status_code == 201 and r.json()["data"]["label"] == "from seed", r.text
    team.secrets.append(r.json()["data"]["token"])
    r = http(srv, "GET", "/api/v1/tokens", o)
    assert r.status_code == 200, r.text
    listed = r.json()
    ids = {t["id"] for t in listed["data"]}
    assert seeded["id"] in ids and team.tokens["owner"]["id"] in ids
    assert team.tokens["outsider"]["id"] not in ids and team.tokens["viewer"]["id"] not in ids
    for s in team.secrets:
        assert s not in r.text
    # Someone else's token id: like a missing one.
    foreign = http(srv, "DELETE", f"/api/v1/tokens/{team.tokens['outsider']['id']}", o)
    missing = http(srv, "DELETE", f"/api/v1/tokens/{RANDOM_UUID}", o)
    assert_same_as_missing(foreign, missing, team.tokens["outsider"]["id"], RANDOM_UUID)
    assert http(srv, "GET", "/status", team.tok("outsider")).status_code == 200
    r = http(srv, "DELETE", f"/api/v1/tokens/{seeded['id']}", o)
    assert r.status_code == 200, r.text
    assert_rest_error(http(srv, "GET", "/status", seeded["token"]), 401, "TOKEN_REVOKED")


@pytest.mark.anyio
async def test_revocation_ends_open_mcp_session(team):
    # Token in the URL, then in a Bearer header: a session opened before the revocation is refused
    # on its very next request.
    for how in ("url", "bearer"):
        t = team.new_token("owner", "--spaces", "acme", "--label", f"session {how}")
        url, headers = (mcp_url(team.srv, t["token"]), None) if how == "url" else (
            team.srv.mcp_url, {"Authorization": f"Bearer {t['token']}"})
        outcome = None
        try:
            async with mcp_session(url, headers=headers) as c:
                r = await tool_ok(c, "search", {"query": "zanzibar"})
                assert [h["file"] for h in r.structured_content["results"]] == ["docs/acme-plan.md"]
                team.cli("token", "revoke", t["id"])
                try:
                    r = await c.call_tool("search", {"query": "zanzibar"}, read_timeout_seconds=15)
                    outcome = ("result", r.is_error, texts(r))
                except MCPError as e:
                    outcome = ("raised", e.error.message, e.error.data)
        except* MCPError as eg:  # the session's DELETE on close may fail the same way
            outcome = outcome or ("raised", str(eg.exceptions[0]), None)
        assert outcome is not None, how
        if outcome[0] == "raised":
            assert outcome[2] == {"error_code": "TOKEN_REVOKED"} and "revoked" in outcome[1], (how, outcome)
        else:
            assert outcome[1] is True and "zanzibar rollout" not in json.dumps(outcome[2]), (how, outcome)
        assert t["token"] not in json.dumps(outcome)


# ---------------------------------------------------------------------------------------------
# 3. Seed 004 (QukaAI's MCP capture endpoint).


def curl(*args: str) -> tuple[int, dict]:
    r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    body, _, code = r.stdout.rpartition("\n")
    return int(code), json.loads(body)


def test_seed_004_curl_verbatim(team):
    base, token, space = team.srv.base, team.tok("owner"), team.spaces["acme"]
    common = ["-H", "Content-Type: application/json", "-H", f"Authorization: Bearer {token}", "-H", f"X-Space-ID: {space}"]

    code, body = curl("-X", "POST", f"{base}/api/v1/mcp", *common, "-d",
                      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05",'
                      '"capabilities":{},"clientInfo":{"name":"curl-client","version":"1.0.0"}}}')
    assert code == 200, body
    assert body["id"] == 1 and body["result"]["protocolVersion"] == "2024-11-05", body
    assert "tools" in body["result"]["capabilities"], body

    code, body = curl("-X", "POST", f"{base}/api/v1/mcp", *common, "-d", '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
    assert code == 200, body
    tools = {t["name"]: t for t in body["result"]["tools"]}
    assert set(tools) == CAPTURE_TOOLS, set(tools)
    schema = tools["create_knowledge"]["inputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["content"], schema
    p = schema["properties"]
    assert p["content"]["type"] == "string"
    assert p["content_type"]["enum"] == ["markdown", "blocks"] and p["content_type"]["default"] == "markdown"
    assert p["kind"]["enum"] == ["text", "image", "video", "url"] and p["kind"]["default"] == "text"
    assert p["title"]["type"] == "string"
    assert p["tags"] == {**p["tags"], "type": "array", "items": {"type": "string"}}, p["tags"]

    code, body = curl("-X", "POST", f"{base}/api/v1/mcp", *common, "-H", "X-Resource: claude-conversations", "-d",
                      json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                          "name": "create_knowledge", "arguments": {
                              "content": "# 会议记录\n\n今天讨论了 MCP HTTP 集成方案...",
                              "content_type": "markdown", "kind": "text", "title": "MCP 集成会议记录",
                              "tags": ["mcp", "meeting"]}}}, ensure_ascii=False))
    assert code == 200, body
    result = body["result"]
    assert result.get("isError") is not True, result
    m = re.fullmatch(r"Knowledge created: ([0-9a-f-]{36})", result["content"][0]["text"])
    assert m, result
    sc = result["structuredContent"]
    assert sc["id"] == m.group(1) and sc["status"] == "processing" and sc["message"], sc

    # Keyword-searchable as soon as the call returned.
    r = ksearch(team.srv, token, {"question": "集成方案", "knowledge_base_ids": ["claude-conversations"],
                                  "search_mode": "keyword", "min_score": 0})
    assert r.status_code == 200, r.text
    hits = r.json()["results"]
    assert any(h["knowledge_title"] == "MCP 集成会议记录" and h["knowledge_id"] == sc["id"] for h in hits), hits
    assert all(h["knowledge_base"] == "claude-conversations" for h in hits), hits


def test_seed_004_python_example_and_url_params(team):
    srv, token, space = team.srv, team.tok("owner"), team.spaces["acme"]
    # The seed's Python example, verbatim apart from the URL and credentials.
    url = f"{srv.base}/api/v1/mcp"
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "X-Space-ID": space,
        "X-Resource": "claude-conversations",
    }
    payload = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "create_knowledge",
            "arguments": {
                "content": "# Python 调用示例\n\n这是通过 Python 创建的知识...",
                "content_type": "markdown",
                "kind": "text",
                "title": "Python 示例",
                "tags": ["python", "example"],
            },
        },
    }
    response = requests.post(url, headers=headers, json=payload)
    assert response.status_code == 200, response.text
    text = response.json()["result"]["content"][0]["text"]
    assert text.startswith("Knowledge created: "), text
    py_id = text.removeprefix("Knowledge created: ")

    # The same with everything in the URL.
    r = requests.post(
        f"{srv.base}/api/v1/mcp?token={token}&space_id={space}&resource=url-notes",
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "create_knowledge", "arguments": {
            "content": "Captured via URL parameters: the ocelot protocol.", "title": "Ocelot"}}},
        timeout=30,
    )
    assert r.status_code == 200 and r.json()["id"] == 7, r.text
    url_id = r.json()["result"]["structuredContent"]["id"]

    r = capture(srv, token, "tools/call", {"name": "list_knowledge", "arguments": {}}, headers={"X-Resource": "url-notes"})
    items = r.json()["result"]["structuredContent"]["items"]
    assert [i["id"] for i in items] == [url_id], items
    r = capture(srv, token, "tools/call", {"name": "get_knowledge", "arguments": {"id": py_id}},
                headers={"X-Resource": "claude-conversations"})
    res = r.json()["result"]
    assert res["content"][0]["text"].startswith("# Python 示例\n\n"), res
    sc = res["structuredContent"]
    assert sc["id"] == py_id and sc["title"] == "Python 示例" and sc["tags"] == ["python", "example"], sc
    assert sc["kind"] == "text" and sc["knowledge_base"] == "claude-conversations" and "通过 Python" in sc["content"], sc
    for name in ("query_knowledge", "search_knowledges"):
        r = capture(srv, token, "tools/call", {"name": name, "arguments": {"query": "ocelot", "limit": 5}})
        assert r.status_code == 200 and r.json()["result"].get("isError") is not True, r.text
        assert url_id in json.dumps(r.json()["result"]), (name, r.text)
    # No resource named: the note goes to `knowledge`, created on first write.
    r = capture(srv, token, "tools/call", {"name": "create_knowledge", "arguments": {"content": "Default resource: the tapir."}})
    tapir = r.json()["result"]["structuredContent"]["id"]
    r = capture(srv, token, "tools/call", {"name": "get_knowledge", "arguments": {"id": tapir}})
    assert r.json()["result"]["structuredContent"]["knowledge_base"] == "knowledge", r.text
    assert http(srv, "GET", "/api/v1/knowledge-bases/knowledge", token).status_code == 200
    found = rest_search(srv, token, "ocelot")
    assert any("Ocelot" in (h.get("title") or "") or "ocelot" in (h.get("snippet") or "") for h in found), found


def test_capture_endpoint_auth_failures(team):
    srv = team.srv
    init = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    assert_mcp_envelope(capture(srv, None, "initialize", init), 401, "AUTH_REQUIRED")
    bogus = "qk_" + "0123456789abcdef" * 4
    team.bogus.append(bogus)
    r = capture(srv, bogus, "initialize", init)
    assert_mcp_envelope(r, 401, "AUTH_FAILED")
    assert bogus not in r.text
    r = capture(srv, team.tok("owner"), "initialize", init, headers={"X-Space-ID": team.spaces["globex"]})
    assert_mcp_envelope(r, 403, "SPACE_FORBIDDEN")
    r2 = capture(srv, team.tok("owner"), "initialize", init, headers={"X-Space-ID": RANDOM_UUID})
    assert_mcp_envelope(r2, 403, "SPACE_FORBIDDEN")
    assert r.json()["error"]["message"].replace(team.spaces["globex"], RANDOM_UUID) == r2.json()["error"]["message"]
    assert_mcp_envelope(capture(srv, team.tok("multi"), "tools/list"), 400, "SPACE_REQUIRED")
    # The same on /mcp.
    r = requests.post(srv.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                      headers={"Accept": "application/json, text/event-stream"}, timeout=30)
    assert_mcp_envelope(r, 401, "AUTH_REQUIRED")
    assert r.headers.get("WWW-Authenticate", "").startswith("Bearer"), dict(r.headers)

    soon = int(time.time() * 1000) + 1500
    r = http(srv, "POST", "/api/v1/tokens", team.tok("owner"), json={"label": "expiring", "expires_at": soon})
    assert r.status_code == 201, r.text
    short = r.json()["data"]["token"]
    team.secrets.append(short)
    assert capture(srv, short, "initialize", init).status_code == 200
    time.sleep(max(0, soon / 1000 - time.time()) + 0.5)
    r = capture(srv, short, "initialize", init)
    assert_mcp_envelope(r, 401, "TOKEN_EXPIRED")
    assert short not in r.text


# ---------------------------------------------------------------------------------------------
# 4. Seed 000 (knowledge_search).


def test_seed_000_knowledge_search_rest(team):
    srv, o = team.srv, team.tok("owner")
    r = ksearch(srv, o, {"question": "zanzibar rollout", "knowledge_base_ids": ["docs"], "search_mode": "hybrid",
                         "top_k": 10, "min_score": 0.5, "rerank": True})
    assert r.status_code == 200, r.text
    body = r.json()
    # No vector index here: hybrid runs as keyword search, and the response may say so.
    assert body["success"] is True and body["search_mode"] in ("hybrid", "keyword"), body
    assert body["total_count"] >= len(body["results"]) >= 1, body
    top = body["results"][0]
    assert_result_fields(top)
    assert top["knowledge_id"] == team.docs["acme-plan.md"]["id"] and top["knowledge_base"] == "docs", top
    assert top["knowledge_title"] == "Acme Launch Plan" and top["knowledge_filename"] == "acme-plan.md", top
    assert top["docid"] == team.docs["acme-plan.md"]["docid"] and top["file"] == "docs/acme-plan.md", top
    assert "zanzibar" in top["content"] and top["score"] >= 0.5, top

    # WeKnora's body, by name and by id.
    for kb in ("docs", team.kbs["docs"]):
        r = ksearch(srv, o, {"query": "zanzibar", "knowledge_base_id": kb})
        assert r.status_code == 200, r.text
        assert [h["knowledge_filename"] for h in r.json()["results"]] == ["acme-plan.md"], r.text

    r = ksearch(srv, o, {"question": "pelican", "search_mode": "keyword", "min_score": 0, "top_k": 2})
    body = r.json()
    assert len(body["results"]) == 2 and body["total_count"] >= 3 and body["search_mode"] == "keyword", body
    assert all(h["match_type"] == "keyword" for h in body["results"]), body

    for bad in ({"question": "x", "top_k": 0}, {"question": "x", "top_k": 51}, {"question": "x", "min_score": 1.5},
                {"question": "x", "min_score": -0.1}, {"question": ""}, {"question": "a" * 2001},
                {"question": "x", "search_mode": "semantic"}):
        assert_rest_error(ksearch(srv, o, bad), 400)
    r = ksearch(srv, o, {"question": "a" * 2000, "search_mode": "keyword"})
    assert r.status_code == 200, r.text[:300]
    r = ksearch(srv, o, {"question": "zanzibar", "knowledge_base_ids": [RANDOM_UUID]})
    assert_rest_error(r, 404, fragment=f"knowledge base '{RANDOM_UUID}' not found")
    assert_rest_error(ksearch(srv, None, {"question": "zanzibar"}), 401, "AUTH_REQUIRED")


@pytest.mark.anyio
async def test_knowledge_search_mcp_seed_layout(team):
    async with mcp_session(mcp_url(team.srv, team.tok("owner"))) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        ks = tools["knowledge_search"].input_schema
        assert ks["required"] == ["query"], ks
        p = ks["properties"]
        assert p["search_mode"]["enum"] == ["hybrid", "vector", "keyword"] and p["search_mode"]["default"] == "hybrid"
        assert p["top_k"]["default"] == 10 and p["top_k"]["minimum"] == 1 and p["top_k"]["maximum"] == 50
        assert p["min_score"]["default"] == 0.5 and p["rerank"]["default"] is True
        assert "knowledge_base_ids" not in p  # the knowledge bases come from the connection

        # One result: summary, matches, "few results" suggestions.
        r = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "search_mode": "keyword"})
        sc = r.structured_content
        assert set(sc) >= {"results", "total_count", "search_mode"} and sc["search_mode"] == "keyword", sc
        assert len(sc["results"]) == 1 and sc["total_count"] == 1, sc
        assert_result_fields(sc["results"][0])
        assert sc["results"][0]["knowledge_title"] == "Acme Launch Plan"
        blocks = texts(r)
        assert blocks == expected_search_blocks("zanzibar", "keyword", sc), blocks
        assert blocks[0] == "## Search Results\n\n**Query:** zanzibar\n**Total Found:** 1\n**Returned:** 1\n**Search Mode:** keyword\n\n"
        assert blocks[1].startswith("### Matched Documents\n\n#### [1] Acme Launch Plan\n- **Score:** ")
        assert blocks[2].startswith(SUGGESTIONS_HEADER) and FEW_RESULT_SUGGESTIONS[0] in blocks[2]

        # No result: the no-result suggestions, no matches block.
        r = await tool_ok(c, "knowledge_search", {"query": "nonexistentxyzzy", "search_mode": "keyword"})
        blocks = texts(r)
        assert blocks == [
            "## Search Results\n\n**Query:** nonexistentxyzzy\n**Total Found:** 0\n**Returned:** 0\n**Search Mode:** keyword\n\n",
            SUGGESTIONS_HEADER + "".join(line + "\n" for line in NO_RESULT_SUGGESTIONS),
        ], blocks
        assert r.structured_content["results"] == [] and r.structured_content["total_count"] == 0

        # Three or more: no suggestions. Results are passages of at most 500 characters (the
        # seed's excerpt), so the layout shows each whole, without "...".
        r = await tool_ok(c, "knowledge_search", {"query": "pelican", "search_mode": "keyword", "min_score": 0})
        sc = r.structured_content
        assert len(sc["results"]) >= 3, sc
        blocks = texts(r)
        assert blocks == expected_search_blocks("pelican", "keyword", sc, min_score=0), blocks
        assert len(blocks) == 2 and "Suggestions" not in "".join(blocks)
        assert all(0 < len(h["content"]) <= 500 for h in sc["results"]), [len(h["content"]) for h in sc["results"]]
        assert all(f"> {h['content']}\n\n" in blocks[1] for h in sc["results"]), blocks[1]

        # Default mode is hybrid.
        r = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "min_score": 0})
        r2 = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "min_score": 0, "search_mode": "hybrid"})
        mode = r.structured_content["search_mode"]
        assert mode == r2.structured_content["search_mode"] and mode in ("hybrid", "keyword"), mode
        # The summary names the mode that ran, and the one asked for (the default: hybrid)
        # when they differ (issue 41 item 16).
        assert texts(r) == expected_search_blocks("zanzibar", "hybrid", r.structured_content, min_score=0), texts(r)
        assert texts(r) == texts(r2)

        for bad in ({"query": "x", "top_k": 0}, {"query": "x", "search_mode": "semantic"}, {"query": ""},
                    {"query": "x", "min_score": 2}, {"query": "x" * 2001}):
            msg = await tool_err(c, "knowledge_search", bad)
            assert msg.startswith("Search failed: 400 - "), (bad, msg)


# ---------------------------------------------------------------------------------------------
# 5./6. Claude Code style: the token (and kb) in the URL only.


@pytest.mark.anyio
async def test_claude_code_style_setup(team):
    srv = team.srv
    rw = team.new_token("owner", "--spaces", "acme", "--label", "MCP - Claude Code")
    async with mcp_session(mcp_url(srv, rw["token"], kb="docs")) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert len(names) == 23 and set(names) == ALL_MCP_TOOLS, names
        r = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "search_mode": "keyword"})
        assert [h["knowledge_filename"] for h in r.structured_content["results"]] == ["acme-plan.md"]
        r = await tool_ok(c, "knowledge_search", {"query": "walrus", "search_mode": "keyword", "min_score": 0})
        assert r.structured_content["total_count"] == 0  # ?kb=docs narrows

    async with mcp_session(mcp_url(srv, rw["token"], resource="claude-code")) as c:
        r = await tool_ok(c, "create_knowledge", {"content": "The flamingo deploy runs nightly.", "title": "Deploys",
                                                  "tags": ["ops"]})
        [text] = texts(r)
        kid = r.structured_content["id"]
        assert text == f"Knowledge created: {kid}" and r.structured_content["status"] == "processing"
        r = await tool_ok(c, "get_knowledge", {"id": kid})
        assert texts(r)[0] == "# Deploys\n\nThe flamingo deploy runs nightly.", texts(r)
        sc = r.structured_content
        assert sc["id"] == kid and sc["title"] == "Deploys" and sc["tags"] == ["ops"] and sc["kind"] == "text", sc
        assert sc["knowledge_base"] == "claude-code" and "status" in sc, sc
        r = await tool_ok(c, "list_knowledge", {"limit": 10, "offset": 0})
        sc = r.structured_content
        assert [i["id"] for i in sc["items"]] == [kid] and sc["total"] == 1 and sc["offset"] == 0 and sc["limit"] == 10, sc
        r = await tool_ok(c, "knowledge_search", {"query": "flamingo", "search_mode": "keyword", "min_score": 0})
        assert [h["knowledge_id"] for h in r.structured_content["results"]] == [kid]

        await tool_ok(c, "update_knowledge", {"id": kid, "content": "The albatross deploy runs hourly."})
        r = await tool_ok(c, "get_knowledge", {"id": kid})
        assert "albatross deploy runs hourly" in r.structured_content["content"]
        assert "flamingo" not in r.structured_content["content"]
        r = await tool_ok(c, "knowledge_search", {"query": "albatross", "search_mode": "keyword", "min_score": 0})
        assert [h["knowledge_id"] for h in r.structured_content["results"]] == [kid]
        r = await tool_ok(c, "knowledge_search", {"query": "flamingo", "search_mode": "keyword", "min_score": 0})
        assert r.structured_content["total_count"] == 0, r.structured_content
        await tool_ok(c, "update_knowledge", {"id": kid, "title": "Deploy cadence", "tags": ["ops", "ci"]})
        r = await tool_ok(c, "get_knowledge", {"id": kid})
        assert r.structured_content["title"] == "Deploy cadence" and r.structured_content["tags"] == ["ops", "ci"]

        await tool_ok(c, "delete_knowledge", {"id": kid})
        await tool_err(c, "get_knowledge", {"id": kid})
        r = await tool_ok(c, "list_knowledge", {})
        assert r.structured_content["items"] == [] and r.structured_content["total"] == 0
        r = await tool_ok(c, "knowledge_search", {"query": "albatross", "search_mode": "keyword", "min_score": 0})
        assert r.structured_content["total_count"] == 0

    async with mcp_session(mcp_url(srv, team.tok("owner_ro"), kb="docs")) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names == ALL_MCP_TOOLS - WRITE_TOOLS and len(names) == 18, names
        await tool_refused(c, "create_knowledge", {"content": "read only"})
        r = await tool_ok(c, "knowledge_search", {"query": "zanzibar", "search_mode": "keyword"})
        assert r.structured_content["total_count"] == 1

    # stdio (`quarry mcp`, the machine owner) lists the same 13 tools.
    params = StdioServerParameters(command=str(team.home.bin), args=["mcp"], env=team.home.env)
    async with Client(params, mode="legacy", read_timeout_seconds=30) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names == ALL_MCP_TOOLS, names


@pytest.mark.anyio
async def test_create_knowledge_editorjs_blocks(team):
    blocks = {"blocks": [
        {"type": "header", "data": {"text": "Plan", "level": 2}},
        {"type": "paragraph", "data": {"text": "Ship <b>fast</b>"}},
        {"type": "list", "data": {"style": "unordered", "items": ["a", "b"]}},
    ]}
    async with mcp_session(mcp_url(team.srv, team.tok("owner"), resource="editorjs")) as c:
        r = await tool_ok(c, "create_knowledge", {"content": json.dumps(blocks), "content_type": "blocks", "title": "Blocks"})
        kid = r.structured_content["id"]
        r = await tool_ok(c, "get_knowledge", {"id": kid})
        content = r.structured_content["content"]
        assert "## Plan" in content and "Ship **fast**" in content and "- a" in content and "- b" in content, content
        assert "<b>" not in content and '"blocks"' not in content, content

        msg = await tool_err(c, "create_knowledge", {"content": "{not json", "content_type": "blocks"})
        assert "blocks" in msg.lower() or "json" in msg.lower(), msg
        msg = await tool_err(c, "create_knowledge", {"content": "hello", "kind": "audio"})
        assert "audio" in msg or "kind" in msg, msg
        msg = await tool_err(c, "create_knowledge", {"content": "hello", "content_type": "html"})
        assert "content_type" in msg or "html" in msg, msg
        r = await tool_ok(c, "list_knowledge", {})
        assert [i["id"] for i in r.structured_content["items"]] == [kid], r.structured_content


# ---------------------------------------------------------------------------------------------
# 7. Dify and metrics.


def test_dify_retrieval(team):
    srv, o = team.srv, team.tok("owner")
    for kb in ("docs", team.kbs["docs"]):
        r = http(srv, "POST", "/retrieval", o, json={"knowledge_id": kb, "query": "zanzibar",
                                                       "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}})
        assert r.status_code == 200, r.text
        [rec] = r.json()["records"]
        assert "zanzibar" in rec["content"] and 0 < rec["score"] <= 1 and rec["title"] == "Acme Launch Plan", rec
        md = rec["metadata"]
        assert md["path"] == "docs/acme-plan.md" and md["docid"] == team.docs["acme-plan.md"]["docid"], md
        assert "description" in md and "page" in md and md["knowledge_id"] == team.docs["acme-plan.md"]["id"], md
    # A partial match (one of two words) scores below 0.99 and is filtered out there; a lone
    # full match in a small knowledge base may score 1.0, which no threshold filters.
    partial = {"knowledge_id": "docs", "query": "zanzibar quokka"}
    r = http(srv, "POST", "/retrieval", o, json={**partial, "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}})
    [rec] = r.json()["records"]
    assert 0 < rec["score"] < 0.99, rec
    r = http(srv, "POST", "/retrieval", o, json={**partial, "retrieval_setting": {"top_k": 5, "score_threshold": 0.99}})
    assert r.status_code == 200 and r.json()["records"] == [], r.text

    def dify_err(resp, status, code):
        assert resp.status_code == status, (resp.status_code, resp.text)
        b = resp.json()
        assert b["error_code"] == code and isinstance(b["error_msg"], str) and b["error_msg"], b
        return b

    body = {"query": "zanzibar", "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}}
    foreign = http(srv, "POST", "/retrieval", team.tok("outsider"), json={**body, "knowledge_id": team.kbs["docs"]})
    missing = http(srv, "POST", "/retrieval", team.tok("outsider"), json={**body, "knowledge_id": RANDOM_UUID})
    dify_err(foreign, 404, 2001), dify_err(missing, 404, 2001)
    assert foreign.text.replace(team.kbs["docs"], RANDOM_UUID) == missing.text
    dify_err(http(srv, "POST", "/retrieval", o, json={**body, "knowledge_id": "nope"}), 404, 2001)
    dify_err(http(srv, "POST", "/retrieval", None, json={**body, "knowledge_id": "docs"}), 403, 1001)
    bogus = "qk_" + "f" * 64
    team.bogus.append(bogus)
    r = http(srv, "POST", "/retrieval", bogus, json={**body, "knowledge_id": "docs"})
    dify_err(r, 403, 1002)
    assert bogus not in r.text


def test_metrics_admin_only(team):
    srv = team.srv
    assert http(srv, "GET", "/status", "qk_" + "1" * 64).status_code == 401  # an auth failure to count
    assert capture(srv, team.tok("owner"), "tools/call", {"name": "list_knowledge", "arguments": {}}).status_code == 200
    r = http(srv, "GET", "/metrics", team.tok("owner"))
    assert r.status_code == 200, r.text
    assert re.search(r'^quarry_auth_failures_total\{[^}]*reason="AUTH_FAILED"[^}]*\} [1-9]', r.text, re.M), r.text[:3000]
    assert re.search(r"^quarry_mcp_tool_calls_total(\{[^}]*\})? [1-9]", r.text, re.M), r.text[:3000]
    for s in team.secrets:
        assert s not in r.text
    assert_rest_error(http(srv, "GET", "/metrics", team.tok("viewer")), 403)
    assert_rest_error(http(srv, "GET", "/metrics", team.tok("editor")), 403)
    assert_rest_error(http(srv, "GET", "/metrics"), 401, "AUTH_REQUIRED")


def test_folder_collections_are_machine_owner_only(team):
    folder = team.root / "folder-coll"
    folder.mkdir(exist_ok=True)
    (folder / "a.md").write_text("# A\n\nlynx\n")
    r = http(team.srv, "POST", "/collections/add", team.tok("owner"), json={"name": "stolen", "path": str(folder)})
    assert_rest_error(r, 403)
    r = http(team.srv, "POST", "/collections/add", team.tok("owner"), json={"name": "etc", "path": "/etc"})
    assert_rest_error(r, 403)
    assert "stolen" not in {c["name"] for c in http(team.srv, "GET", "/collections", team.tok("owner")).json()["collections"]}


# ---------------------------------------------------------------------------------------------
# 8. Server modes.


def test_server_auth_modes(team):
    home = team.home
    r = subprocess.run([str(home.bin), "serve", "--bind", "0.0.0.0", "--auth", "none", "--port", str(free_port())],
                       env=home.env, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "--auth none" in r.stderr, (r.returncode, r.stderr)

    srv = start_server(home, "--bind", "0.0.0.0", logdir=team.root / "logs-remote")
    try:
        assert requests.get(srv.url("/health"), timeout=10).status_code == 200
        assert_rest_error(requests.get(srv.url("/status"), timeout=10), 401, "AUTH_REQUIRED")
        r = requests.get(srv.url("/status"), headers={"Host": f"127.0.0.1:{srv.port}"}, timeout=10)
        assert_rest_error(r, 401, "AUTH_REQUIRED")
        r = http(srv, "GET", "/status", team.tok("outsider"))
        assert r.status_code == 200 and r.json()["total_documents"] == 1, r.text
    finally:
        srv.stop()

    srv = start_server(home, logdir=team.root / "logs-open")  # loopback, no --auth: as before
    try:
        st = requests.get(srv.url("/status"), timeout=10).json()
        assert [c["name"] for c in st["collections"]] == ["notes"] and st["total_documents"] == len(CORPUS), st
        r = requests.post(srv.url("/search"), json={"query": "zanzibar"}, timeout=10).json()
        assert [h["file"] for h in r["results"]] == ["notes/projects/alpha/plan.md"], r  # the corpus, not acme
        # A token, when presented, is still checked and applied.
        r = http(srv, "GET", "/status", team.tok("outsider"))
        assert r.status_code == 200 and [c["name"] for c in r.json()["collections"]] == ["gdocs"], r.text
        assert_rest_error(http(srv, "GET", "/status", "qk_" + "2" * 64), 401, "AUTH_FAILED")
    finally:
        srv.stop()


def test_notes_are_titled_tagged_and_summarised_in_the_background(quarry_bin, corpus, tmp_path, fake_models):
    """With a chat model configured (QUARRY_SUMMARY_MODEL), the queue asks it for a title, tags
    and a summary of each note; the agent's own title and tags win; a failing model leaves the
    note searchable with a warning."""
    home = make_home(quarry_bin, corpus, tmp_path / "home",
                     {**fake_models.env(embed=None), "QUARRY_SUMMARY_MODEL": "openai:fake-chat"})
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        def create(args: dict) -> str:
            r = capture(srv, None, "tools/call", {"name": "create_knowledge", "arguments": args})
            assert r.status_code == 200, r.text
            return r.json()["result"]["structuredContent"]["id"]

        def note(id_: str) -> dict:
            r = capture(srv, None, "tools/call", {"name": "get_knowledge", "arguments": {"id": id_}})
            return r.json()["result"]["structuredContent"]

        def settled(id_: str) -> dict:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                n = note(id_)
                if n["status"] in ("ready", "failed"):
                    return n
                time.sleep(0.1)
            pytest.fail(f"note {id_} never settled: {note(id_)}")

        plain = create({"content": "Pelican migration schedule for the harbour crew"})
        given = create({"content": "Otter census results", "title": "Otters", "tags": ["census"]})
        n = settled(plain)
        assert n["status"] == "ready", n
        assert n["title"] == "Filed: pelican migration schedule", n
        assert n["tags"] == ["fake", "notes"] and n["summary"] == "A note of 7 words.", n
        # The model's title is the document's title: the keyword index has it.
        hits = rest_search(srv, None, "Filed")
        assert any(h["title"] == "Filed: pelican migration schedule" for h in hits), hits
        n = settled(given)
        assert n["title"] == "Otters" and n["tags"] == ["census"] and n["summary"] == "A note of 3 words.", n
        # One request per note, in whichever order the queue's workers took them.
        chats = [json.dumps(c.body, ensure_ascii=False) for c in fake_models.since(0, "/v1/chat/completions")]
        assert len(chats) == 2, chats
        assert sorted("Pelican migration" in c for c in chats) == [False, True], chats
        assert sorted("Otter census" in c for c in chats) == [False, True], chats

        with fake_models.failing("chat"):
            down = create({"content": "Heron sightings near the pier"})
            n = settled(down)
        assert n["status"] == "ready" and n["summary"] is None, n
        r = http(srv, "GET", f"/api/v1/knowledge-bases/knowledge/documents/{down}")
        assert any("no summary" in w for w in r.json()["data"]["warnings"]), r.text
        assert rest_search(srv, None, "heron"), "the note stays searchable"
    finally:
        srv.stop()


# ---------------------------------------------------------------------------------------------
# Secrets (runs last: checks every token the module made).


def test_secrets_never_stored_or_logged(team):
    assert len(team.secrets) >= 10
    rows = db_rows(team.home.env, team.home.home, "SELECT * FROM access_tokens")
    assert len(rows) >= len(team.secrets) - 1, (len(rows), len(team.secrets))  # `user rm temp` took one
    dump = []
    for row in rows:
        for v in row:
            if isinstance(v, bytes):
                dump += [v.hex(), v.decode("latin-1")]
            else:
                dump.append(str(v))
    blob = "\n".join(dump)
    for s in team.secrets:
        assert s not in blob and s[3:] not in blob, "a token is stored in clear in access_tokens"
    log = team.srv.stderr()
    assert log, "the server logged nothing"
    for s in team.secrets + team.bogus:
        assert s not in log and s[3:] not in log, "a token appears in the server log"
    out = team.cli("token", "list").stdout + team.cli("--json", "token", "list").stdout
    for s in team.secrets:
        assert s not in out
