"""A credential never changes the guardrails that bind it (issue 65 item 1), through the real
binary: ``quarry serve --auth token``, tokens made with the CLI and over REST, calls through the
official MCP Python SDK in its default mode, and a real stdio upstream (``upstreams/
raw_files_server.py``) whose ``read_file`` opens exactly the path it is given.

One home: space ``acme`` with ``owner`` (owner), ``ann`` (editor, in group ``hr``) and ``carl``
(viewer). The owner's ``person`` token was made with the management scope (``--manage``); the
owner's ``agent`` token, like every token an agent holds, was not. Policy ``raw-inside`` denies
``rawfs.read_file`` outside ``files/allowed``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from conftest import QuarryServer, make_home, settled, start_server
from mcp import Client
from test_teams import assert_rest_error, http, texts

HERE = Path(__file__).parent
RAWFS = HERE / "upstreams" / "raw_files_server.py"
NO_SUCH_TOKEN = "00000000-0000-4000-8000-000000000000"


@dataclass
class World:
    home: object
    srv: QuarryServer
    root: Path
    tokens: dict = field(default_factory=dict)
    ids: dict = field(default_factory=dict)

    def tok(self, key: str) -> str:
        return self.tokens[key]["token"]

    def cli(self, *args: str) -> str:
        r = self.home.run("--space", "acme", *args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout

    def cli_json(self, *args: str) -> dict:
        return json.loads(self.cli(*args, "--json"))

    def api(self, key: str, method: str, path: str, **kw):
        return http(self.srv, method, path, self.tok(key), headers={"X-Space-ID": "acme"}, **kw)


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("guardrails")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})
    files = root / "files"
    (files / "allowed").mkdir(parents=True)
    (files / "allowed" / "hello.txt").write_text("hello from inside")
    (files / "allowed" / "held.txt").write_text("held for a person")
    (files / "outside").mkdir()
    (files / "outside" / "secret.txt").write_text("SECRET-OUTSIDE")
    synced = root / "synced"
    synced.mkdir()
    (synced / "note.md").write_text("# A synced note\n\nsomething to index\n")
    assert home.run("space", "create", "acme").returncode == 0
    for user, role in (("owner", "owner"), ("ann", "editor"), ("carl", "viewer")):
        assert home.run("user", "add", user).returncode == 0
        assert home.run("space", "grant", "acme", user, "--role", role).returncode == 0
    srv = start_server(home, "--auth", "token", "--hub-allow-commands", logdir=root / "logs")
    w = World(home=home, srv=srv, root=root)
    try:
        w.tokens["person"] = w.cli_json("token", "create", "--user", "owner", "--label", "person", "--manage")
        w.tokens["agent"] = w.cli_json("token", "create", "--user", "owner", "--label", "agent")
        assert w.tokens["person"]["manage"] is True and w.tokens["agent"]["manage"] is False
        r = w.api("person", "POST", "/api/v1/mcp/servers",
                  json={"name": "rawfs", "transport_type": "stdio", "config": f"{sys.executable} {RAWFS}"})
        assert r.status_code == 201, r.text
        info = settled(srv, r.json()["data"], {"Authorization": f"Bearer {w.tok('person')}", "X-Space-ID": "acme"})
        assert info["status"] == "ready", info
        r = w.api("person", "POST", "/api/v1/knowledge-bases", json={"name": "docs"})
        assert r.status_code in (200, 201), r.text
        r = w.api("person", "POST", "/api/v1/groups", json={"name": "hr"})
        assert r.status_code == 201, r.text
        assert w.api("person", "PUT", "/api/v1/groups/hr/members/ann").status_code == 200
        r = w.api("person", "POST", "/api/v1/endpoints", json={"name": "ops", "owner": "space", "servers": ["rawfs"]})
        assert r.status_code == 201, r.text
        for body in (
            {"name": "raw-inside", "tools": ["rawfs.read_file"], "effect": "deny",
             "when": {"not": {"argument": "path", "operator": "under", "value": str(files / "allowed")}}},
            {"name": "held-reads", "tools": ["rawfs.read_file"], "effect": "require_approval",
             "when": {"argument": "path", "operator": "matches", "value": ".*held.*"}},
        ):
            r = w.api("person", "POST", "/api/v1/policies", json=body)
            assert r.status_code == 201, r.text
        w.ids["source"] = w.cli_json("source", "add", "docs", "--folder", str(synced))["id"]
        # The agent's narrowed tokens, each of a kind the issue names.
        r = w.api("agent", "POST", "/api/v1/tokens", json={"label": "tool-scoped", "tools": ["rawfs.read_file"]})
        assert r.status_code == 201, r.text
        w.tokens["tools"] = r.json()["data"]
        w.tokens["kb"] = w.cli_json("token", "create", "--user", "owner", "--label", "kb-scoped", "--kb", "docs")
        w.tokens["endpoint"] = w.cli_json("token", "create", "--user", "owner", "--label", "ops-only",
                                          "--endpoint", "ops")
        # A held call of the person's own chain: an approval another chain might try to decide.
        ok, text = anyio.run(call, w, "person", str(files / "allowed" / "held.txt"))
        assert not ok and "Held for approval" in text, text
        w.ids["approval"] = text.split("Approval ", 1)[1].split(" ", 1)[0]
        w.ids["files"] = str(files)
        yield w
    finally:
        srv.stop()


async def call(w: World, key: str, path: str) -> tuple[bool, str]:
    """`rawfs.read_file(path)` through the gateway with token `key`, the SDK in its default mode."""
    async with Client(w.srv.url(f"/api/mcp?token={w.tok(key)}&space_id=acme"), read_timeout_seconds=60) as c:
        r = await c.call_tool("rawfs__read_file", {"path": path})
        return r.is_error is not True, "\n".join(texts(r))


def policy_names(w: World) -> list[str]:
    r = w.api("person", "GET", "/api/v1/policies")
    assert r.status_code == 200, r.text
    return sorted(p["name"] for p in r.json()["data"])


def test_the_governed_agent_cannot_remove_the_policy_then_make_the_refused_call(world):
    w = world
    secret = str(Path(w.ids["files"]) / "outside" / "secret.txt")
    for key in ("tools", "agent"):
        ok, text = anyio.run(call, w, key, secret)
        assert not ok and "raw-inside" in text and "SECRET" not in text, (key, text)
        r = w.api(key, "DELETE", "/api/v1/policies/raw-inside")
        assert_rest_error(r, 403, "MANAGEMENT_FORBIDDEN", "management credential")
        r = w.api(key, "PATCH", "/api/v1/policies/raw-inside", json={"applies_to": {"token": NO_SUCH_TOKEN}})
        assert_rest_error(r, 403, "MANAGEMENT_FORBIDDEN")
        ok, text = anyio.run(call, w, key, secret)
        assert not ok and "SECRET" not in text, (key, text)
    assert "raw-inside" in policy_names(w)
    # Inside the folder the same token works: the guardrail, not the tool, refused.
    ok, text = anyio.run(call, w, "tools", str(Path(w.ids["files"]) / "allowed" / "hello.txt"))
    assert ok and "hello from inside" in text, text


# Every route that manages governance, with what each would change.
def management_routes(w: World) -> list[tuple[str, str, dict | None]]:
    return [
        ("GET", "/api/v1/policies", None),
        ("POST", "/api/v1/policies", {"name": "gone", "tools": ["rawfs.*"], "effect": "deny"}),
        ("PATCH", "/api/v1/policies/raw-inside", {"applies_to": {"token": NO_SUCH_TOKEN}}),
        ("DELETE", "/api/v1/policies/raw-inside", None),
        ("POST", f"/api/v1/approvals/{w.ids['approval']}/decision", {"decision": "approve"}),
        ("POST", "/api/v1/groups", {"name": "ops2"}),
        ("PUT", "/api/v1/groups/hr/members/carl", None),
        ("DELETE", "/api/v1/groups/hr/members/ann", None),
        ("DELETE", "/api/v1/groups/hr", None),
        ("PUT", "/api/v1/spaces/acme/members/carl", {"role": "admin"}),
        ("DELETE", "/api/v1/spaces/acme/members/carl", None),
        ("GET", "/api/v1/audit", None),
        ("POST", "/api/v1/knowledge-bases/docs/sources", {"kind": "git", "url": "https://example.org/r.git"}),
        ("PATCH", f"/api/v1/sources/{w.ids['source']}", {"interval_seconds": None}),
        ("DELETE", f"/api/v1/sources/{w.ids['source']}", None),
        ("POST", "/api/v1/endpoints", {"name": "ops2", "owner": "space", "servers": ["rawfs"]}),
        ("PUT", "/api/v1/endpoints/ops", {"servers": ["rawfs"], "description": "widened"}),
        ("DELETE", "/api/v1/endpoints/ops", None),
        ("POST", "/api/v1/tokens", {"label": "escalated", "manage": True}),
    ]


def guardrails(w: World) -> dict:
    """What the walk must leave as it was, as the person reads it."""
    return {
        "policies": policy_names(w),
        "groups": w.api("person", "GET", "/api/v1/groups").json(),
        "members": w.api("person", "GET", "/api/v1/spaces/acme/members").json(),
        "sources": w.api("person", "GET", "/api/v1/knowledge-bases/docs/sources").json(),
        "endpoint": w.api("person", "GET", "/api/v1/endpoints/ops").json(),
    }


def test_every_management_route_refuses_every_narrowed_token(world):
    w = world
    before = guardrails(w)
    table = []
    for key in ("agent", "tools", "kb", "endpoint"):
        for method, path, body in management_routes(w):
            r = w.api(key, method, path, **({"json": body} if body is not None else {}))
            code = r.json().get("error_code") if r.headers.get("content-type", "").startswith("application/json") else None
            table.append((key, method, path, r.status_code, code))
            # An endpoint-bound token works at its endpoint only: refused before any route.
            allowed = {"MANAGEMENT_FORBIDDEN"} | ({"ENDPOINT_ONLY"} if key == "endpoint" else set())
            assert r.status_code == 403 and code in allowed, (key, method, path, r.status_code, r.text)
    print("\n".join(f"{k:9} {m:6} {p:55} {s} {c}" for k, m, p, s, c in table))
    assert guardrails(w) == before
    r = w.api("person", "GET", f"/api/v1/approvals/{w.ids['approval']}")
    assert r.status_code == 200 and r.json()["data"]["status"] == "pending", r.text
    # Tokens of other chains: neither listed nor revocable (exactly like a missing one).
    for key in ("agent", "tools", "kb"):
        r = w.api(key, "GET", "/api/v1/tokens")
        assert r.status_code == 200, r.text
        listed = {t["id"] for t in r.json()["data"]}
        assert w.tokens[key]["id"] in listed and w.tokens["person"]["id"] not in listed, (key, listed)
        assert_rest_error(w.api(key, "DELETE", f"/api/v1/tokens/{w.tokens['person']['id']}"), 404, "NOT_FOUND")
    listed = {t["id"] for t in w.api("agent", "GET", "/api/v1/tokens").json()["data"]}
    assert w.tokens["tools"]["id"] in listed, "an agent still sees the tokens it made"
    r = w.api("person", "GET", "/api/v1/tokens")
    assert {w.tokens[k]["id"] for k in ("person", "agent", "tools", "kb")} <= {t["id"] for t in r.json()["data"]}


def test_policy_targets_exist_and_never_bind_the_credential_changing_them(world):
    w = world
    body = {"name": "ghost", "tools": ["rawfs.*"], "effect": "deny", "applies_to": {"token": NO_SUCH_TOKEN}}
    assert_rest_error(w.api("person", "POST", "/api/v1/policies", json=body), 400, "INVALID_INPUT", "applies_to.token")
    body["applies_to"] = {"endpoint": "nosuch"}
    assert_rest_error(w.api("person", "POST", "/api/v1/policies", json=body), 400, "INVALID_INPUT",
                      "applies_to.endpoint")
    assert_rest_error(w.api("person", "PATCH", "/api/v1/policies/raw-inside",
                            json={"applies_to": {"token": NO_SUCH_TOKEN}}), 400, "INVALID_INPUT")
    assert "ghost" not in policy_names(w)
    # An existing endpoint and token are accepted.
    body["applies_to"] = {"endpoint": "ops"}
    r = w.api("person", "POST", "/api/v1/policies", json=body)
    assert r.status_code == 201, r.text
    assert w.api("person", "DELETE", "/api/v1/policies/ghost").status_code == 204
    # A policy on the person's own token: the machine's owner adds it; the person can neither
    # change nor remove it, another management credential can.
    w.cli("policy", "add", json.dumps({"name": "person-bound", "tools": ["rawfs.*"], "effect": "deny",
                                       "applies_to": {"token": w.tokens["person"]["id"]}}))
    for method, kw in (("PATCH", {"json": {"effect": "require_approval"}}), ("DELETE", {})):
        assert_rest_error(w.api("person", method, "/api/v1/policies/person-bound", **kw), 403,
                          "MANAGEMENT_FORBIDDEN", "binds the token making the request")
    body = {"name": "self-bound", "tools": ["rawfs.*"], "effect": "deny",
            "applies_to": {"token": w.tokens["person"]["id"]}}
    assert_rest_error(w.api("person", "POST", "/api/v1/policies", json=body), 403, "MANAGEMENT_FORBIDDEN")
    w.tokens["person2"] = w.cli_json("token", "create", "--user", "owner", "--label", "person2", "--manage")
    assert w.api("person2", "DELETE", "/api/v1/policies/person-bound").status_code == 204
    assert "person-bound" not in policy_names(w)


def test_policy_changes_refused_and_accepted_are_audited(world):
    w = world
    assert w.api("agent", "DELETE", "/api/v1/policies/raw-inside").status_code == 403
    r = w.api("person", "PATCH", "/api/v1/policies/held-reads", json={"approval_ttl_secs": 900})
    assert r.status_code == 200, r.text
    events = w.api("person", "GET", "/api/v1/audit", params={"limit": 200}).json()["data"]["items"]
    policy_events = [e for e in events if "/api/v1/policies" in json.dumps(e)]
    refused = [e for e in policy_events if e.get("outcome") == "denied" and "raw-inside" in json.dumps(e)]
    accepted = [e for e in policy_events if e.get("outcome") == "ok" and "held-reads" in json.dumps(e)]
    assert refused, policy_events
    assert accepted and any(e.get("detail", {}).get("version") for e in accepted), accepted
    assert w.tok("agent") not in json.dumps(events)


def test_management_tokens_are_never_narrowed_nor_minted_by_an_agent(world):
    w = world
    for extra in (("--tools", "rawfs"), ("--kb", "docs"), ("--endpoint", "ops")):
        r = w.home.run("--space", "acme", "token", "create", "--user", "owner", "--manage", *extra)
        assert r.returncode != 0 and "cannot be narrowed" in r.stderr, (extra, r.stderr)
    # A management token's own children may manage only if asked, never a narrowed one.
    r = w.api("person", "POST", "/api/v1/tokens", json={"label": "script", "manage": True})
    assert r.status_code == 201 and r.json()["data"]["manage"] is True, r.text
    r = w.api("person", "POST", "/api/v1/tokens", json={"label": "narrow", "manage": True, "tools": ["rawfs"]})
    assert_rest_error(r, 400, "INVALID_INPUT", "cannot be narrowed")
    r = w.api("agent", "POST", "/api/v1/tokens", json={"label": "escalated", "manage": True})
    assert_rest_error(r, 403, "MANAGEMENT_FORBIDDEN")
    # Listed so a person can tell them apart.
    listing = w.cli("token", "list", "--user", "owner")
    person_line = next(line for line in listing.splitlines() if w.tokens["person"]["id"] in line)
    agent_line = next(line for line in listing.splitlines() if w.tokens["agent"]["id"] in line)
    assert " manage" in person_line and " manage" not in agent_line, listing
