"""Tool policies and approvals (issue 45 items 1 and 2), through the real binary: policies made
over REST and the CLI, calls through the official MCP Python SDK in its default mode (and the
legacy handshake), the real npm ``@modelcontextprotocol/server-filesystem`` and PyPI
``mcp-server-git`` as the consequential tools, approvals decided over REST, over MCP (the
approver tools), and with the CLI. On PostgreSQL, a second node shares the deployment: a call
held on one node is approved and run on the other, and two nodes racing one approval run the
call once.

One home: space ``acme`` with ``owner`` (owner) and ``ed`` (editor); the owner's ``agent``
token makes the calls, its ``approver`` token (another token of the same person, not of the
agent's chain, made with the management scope) decides them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
import requests
from conftest import (QuarryServer, backend, make_home, mcp_servers_prefix, node, second_node, settled,
                      start_server, wait_ready)
from mcp import Client
from test_teams import http, texts

SDK_MODES = ["auto", "legacy"]
APPROVAL_ID = re.compile(r"Approval ([0-9a-f-]{36})")


def venv_bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@dataclass
class World:
    home: object
    srv: QuarryServer
    tokens: dict
    files: Path
    allowed: Path
    repos: dict
    other: QuarryServer | None = None
    policies: dict = field(default_factory=dict)

    def tok(self, key: str) -> str:
        return self.tokens[key]["token"]

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        r = self.home.run("--space", "acme", *args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("policies")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})

    def cli_json(*args: str) -> dict:
        r = home.run(*args, "--json")
        assert r.returncode == 0, (args, r.stderr)
        return json.loads(r.stdout)

    assert home.run("space", "create", "acme").returncode == 0
    for user, role in (("owner", "owner"), ("ed", "editor")):
        assert home.run("user", "add", user).returncode == 0
        assert home.run("space", "grant", "acme", user, "--role", role).returncode == 0
    # The approver is the person's credential, made to manage; the agent's is not.
    tokens = {key: cli_json("token", "create", "--user", user, "--spaces", "acme", "--label", key,
                            *(("--manage",) if key == "approver" else ()))
              for key, user in (("approver", "owner"), ("agent", "owner"), ("ed", "ed"))}
    # The filesystem server may reach all of `files`; the policy narrows it to `allowed`.
    files = root / "files"
    allowed = files / "allowed"
    (allowed / "notes").mkdir(parents=True)
    (files / "outside").mkdir()
    (allowed / "hello.txt").write_text("hello from the allowed folder")
    (files / "outside" / "secret.txt").write_text("SECRET-OUTSIDE")
    (allowed / "link").symlink_to(files / "outside")
    repos = {}
    for name in ("allowed", "other"):
        repo = root / "repos" / name
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / f"{name}.txt").write_text(name)
        subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org",
                        "commit", "-q", "-m", f"first in {name}"], check=True)
        (repo / f"{name}-new.txt").write_text("untracked")
        repos[name] = repo
    srv = start_server(home, "--auth", "token", "--hub-allow-commands", logdir=root / "logs")
    other = None
    try:
        mods = mcp_servers_prefix() / "node_modules" / "@modelcontextprotocol"
        for body in (
            {"name": "filesystem", "transport_type": "stdio",
             "config": f"{node()} {mods / 'server-filesystem' / 'dist' / 'index.js'}", "args": [str(files)]},
            {"name": "git", "transport_type": "stdio", "config": venv_bin("mcp-server-git")},
        ):
            r = http(srv, "POST", "/api/v1/mcp/servers", tokens["approver"]["token"], json=body)
            assert r.status_code == 201, r.text
            info = settled(srv, r.json()["data"], {"Authorization": f"Bearer {tokens['approver']['token']}"})
            assert info["status"] == "ready" and info["tool_count"] > 0, info
        if backend() == "postgres":
            other = start_server(second_node(home, root / "node2"), "--auth", "token", "--hub-allow-commands",
                                 logdir=root / "logs2")
            wait_ready(other)
        w = World(home=home, srv=srv, tokens=tokens, files=files, allowed=allowed, repos=repos, other=other)
        for body in (
            {"name": "fs-inside-allowed", "tools": ["filesystem.*"], "effect": "deny",
             "when": {"not": {"argument": ["path", "paths", "source", "destination"], "operator": "under",
                              "value": str(allowed)}}},
            {"name": "git-known-repos", "tools": ["git.*"], "effect": "deny",
             "when": {"not": {"argument": "repo_path", "operator": "in", "value": [str(repos["allowed"])]}}},
            {"name": "writes-need-approval", "tools": ["filesystem.write_file", "filesystem.edit_file"],
             "effect": "require_approval", "approval_ttl_secs": 600},
        ):
            r = http(srv, "POST", "/api/v1/policies", w.tok("approver"), json=body)
            assert r.status_code == 201, r.text
            w.policies[body["name"]] = r.json()["data"]
        yield w
    finally:
        srv.stop()
        if other:
            other.stop()


def gateway(srv: QuarryServer, token: str) -> str:
    return srv.url(f"/api/mcp?token={token}")


async def call(url: str, name: str, args: dict, mode: str = "auto") -> tuple[bool, str, dict]:
    """(ok, text, the gate's `_meta` entry) of one call."""
    async with Client(url, mode=mode, read_timeout_seconds=60) as c:
        r = await c.call_tool(name, args)
        meta = (r.model_dump(by_alias=True).get("_meta") or {}).get("io.quarry/gate") or {}
        return r.is_error is not True, "\n".join(texts(r)), meta


def run(url: str, name: str, args: dict, mode: str = "auto") -> tuple[bool, str, dict]:
    return anyio.run(call, url, name, args, mode)


def approvals(w: World, token: str, srv: QuarryServer | None = None, **params) -> list[dict]:
    r = http(srv or w.srv, "GET", "/api/v1/approvals", token, params=params)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def decide(w: World, token: str, aid: str, decision: str, srv: QuarryServer | None = None, **extra) -> requests.Response:
    return http(srv or w.srv, "POST", f"/api/v1/approvals/{aid}/decision", token,
                json={"decision": decision, **extra})


def audit(w: World, **params) -> list[dict]:
    r = http(w.srv, "GET", "/api/v1/audit", w.tok("approver"), params=params)
    assert r.status_code == 200, r.text
    return r.json()["data"]["items"]


# ---------------------------------------------------------------------------------------------
# Item 2: policies on arguments, against the real filesystem and git servers.


@pytest.mark.parametrize("mode", SDK_MODES)
def test_filesystem_calls_outside_the_allowed_folder_are_refused(world, mode):
    w = world
    url = gateway(w.srv, w.tok("agent"))
    ok, text, meta = run(url, "filesystem__read_text_file", {"path": str(w.allowed / "hello.txt")}, mode)
    assert ok and "hello from the allowed folder" in text, text
    assert meta == {}, meta
    escapes = [
        ("filesystem__read_text_file", {"path": str(w.files / "outside" / "secret.txt")}),
        # `..` out of the folder, written inside it
        ("filesystem__read_text_file", {"path": f"{w.allowed}/../outside/secret.txt"}),
        # a symbolic link inside the folder that points outside it
        ("filesystem__read_text_file", {"path": str(w.allowed / "link" / "secret.txt")}),
        # one path of several
        ("filesystem__read_multiple_files", {"paths": [str(w.allowed / "hello.txt"), str(w.files / "outside" / "secret.txt")]}),
        # a move whose destination is outside
        ("filesystem__move_file", {"source": str(w.allowed / "hello.txt"), "destination": str(w.files / "outside" / "moved.txt")}),
        # relative paths, and no path at all
        ("filesystem__read_text_file", {"path": "outside/secret.txt"}),
        ("filesystem__list_allowed_directories", {}),
    ]
    for tool, args in escapes:
        ok, text, meta = run(url, tool, args, mode)
        assert not ok, (tool, args, text)
        assert "Refused by policy 'fs-inside-allowed'" in text and "SECRET-OUTSIDE" not in text, (tool, args, text)
        assert meta == {"outcome": "refused", "policy": "fs-inside-allowed"}, meta
    # Nothing moved: the refused move never reached the server.
    assert (w.allowed / "hello.txt").exists() and not (w.files / "outside" / "moved.txt").exists()
    denied = audit(w, action="tool.call", outcome="denied", token_id=w.tokens["agent"]["id"])
    assert any(e["detail"].get("gate", {}).get("policy") == "fs-inside-allowed" for e in denied), denied[:3]


def test_git_repositories_outside_the_list_are_refused(world):
    w = world
    url = gateway(w.srv, w.tok("agent"))
    ok, text, _ = run(url, "git__git_status", {"repo_path": str(w.repos["allowed"])})
    assert ok and "allowed-new.txt" in text, text
    for repo in (str(w.repos["other"]), f"{w.repos['allowed']}/../other", str(w.repos["allowed"]) + "/"):
        ok, text, meta = run(url, "git__git_status", {"repo_path": repo})
        assert not ok and "Refused by policy 'git-known-repos'" in text and "other-new.txt" not in text, (repo, text)
        assert meta["policy"] == "git-known-repos"
    # A value of the wrong type is refused too (the rule fails closed).
    ok, text, _ = run(url, "git__git_status", {"repo_path": 7})
    assert not ok and "git-known-repos" in text, text


# ---------------------------------------------------------------------------------------------
# Item 1: approval bound to the exact call.


def held(text: str, meta: dict) -> str:
    assert meta.get("outcome") == "held" and meta["tool"] == "filesystem.write_file", (text, meta)
    m = APPROVAL_ID.search(text)
    assert m and m.group(1) == meta["approval_id"], text
    assert "again with exactly the same arguments" in text, text
    return m.group(1)


def test_a_held_write_runs_once_after_approval_and_only_with_its_arguments(world):
    w = world
    url = gateway(w.srv, w.tok("agent"))
    target = w.allowed / "notes" / "plan.txt"
    args = {"path": str(target), "content": "v1"}
    ok, text, meta = run(url, "filesystem__write_file", args)
    assert not ok and meta["new"] is True
    aid = held(text, meta)
    assert not target.exists(), "a held call must not run"
    # The same call again: the same request, not a new one.
    ok, text, meta = run(url, "filesystem__write_file", args)
    assert not ok and held(text, meta) == aid and meta["new"] is False
    # The approver sees the exact arguments; the editor sees nothing of it.
    pending = {a["id"]: a for a in approvals(w, w.tok("approver"), status="pending")}
    assert pending[aid]["arguments"] == args and pending[aid]["tool"] == "filesystem.write_file", pending[aid]
    assert pending[aid]["requested_by"]["token_id"] == w.tokens["agent"]["id"]
    assert pending[aid]["policies"][0]["name"] == "writes-need-approval"
    assert aid not in {a["id"] for a in approvals(w, w.tok("ed"))}
    assert http(w.srv, "GET", f"/api/v1/approvals/{aid}", w.tok("ed")).status_code == 404
    assert decide(w, w.tok("ed"), aid, "approve").status_code == 404
    # The agent's own token may not approve what it asked for, though its user may.
    r = decide(w, w.tok("agent"), aid, "approve")
    assert r.status_code == 403 and "token" in r.json()["detail"], r.text
    r = decide(w, w.tok("approver"), aid, "approve", reason="looks fine")
    assert r.status_code == 200 and r.json()["data"]["status"] == "approved", r.text
    assert decide(w, w.tok("approver"), aid, "deny").status_code == 409
    # Other arguments are another call: held as a new request, the approval untouched.
    ok, text, meta = run(url, "filesystem__write_file", {"path": str(target), "content": "v2"})
    other_id = held(text, meta)
    assert other_id != aid and not target.exists()
    # The approved call runs, once.
    ok, text, meta = run(url, "filesystem__write_file", args)
    assert ok, text
    assert meta == {"outcome": "approved", "approval_id": aid}, meta
    assert target.read_text() == "v1"
    target.unlink()
    ok, text, meta = run(url, "filesystem__write_file", args)
    again = held(text, meta)
    assert again not in (aid, other_id) and not target.exists()
    used = http(w.srv, "GET", f"/api/v1/approvals/{aid}", w.tok("approver")).json()["data"]
    assert used["status"] == "used" and used["used_at"] and used["decided_by"] == "owner", used
    # The receipt: the request, the decision and the run share the approval's id.
    requests_ = [e for e in audit(w, action="approval.request") if e["detail"].get("approval_id") == aid]
    assert len(requests_) == 1 and requests_[0]["target"] == "filesystem.write_file", requests_
    decisions = [e for e in audit(w, action="write") if e["detail"].get("approval_id") == aid]
    assert decisions and decisions[0]["detail"]["decision"] == "approved", decisions
    runs = [e for e in audit(w, action="tool.call", outcome="ok") if e["detail"].get("approval_id") == aid]
    assert len(runs) == 1, runs


@pytest.mark.parametrize("mode", SDK_MODES)
def test_a_client_that_can_show_a_url_waits_for_the_decision(world, mode):
    """A client that declares URL elicitation is sent to the approval's page (2026-07-28: an
    `InputRequiredResult`; a 2025-11-25 session: `elicitation/create` during the call); once
    the person accepts, the call waits for the approver and then runs, once. A person who
    declines gets the held result."""
    import mcp_types as types

    w = world
    url = gateway(w.srv, w.tok("agent"))
    target = w.allowed / "notes" / f"elicited-{mode}.txt"
    args = {"path": str(target), "content": f"elicited {mode}"}
    asked: list = []

    async def approve_there(context, params):
        asked.append(params)
        # The person opens the page and an approver decides there (here: over REST).
        aid = params.elicitation_id
        r = await anyio.to_thread.run_sync(lambda: decide(w, w.tok("approver"), aid, "approve", reason="seen"))
        assert r.status_code == 200, r.text
        return types.ElicitResult(action="accept")

    async def decline(context, params):
        asked.append(params)
        return types.ElicitResult(action="decline")

    async def go(callback, arguments):
        async with Client(url, mode=mode, read_timeout_seconds=60, elicitation_callback=callback) as c:
            r = await c.call_tool("filesystem__write_file", arguments)
            meta = (r.model_dump(by_alias=True).get("_meta") or {}).get("io.quarry/gate") or {}
            return r.is_error is not True, "\n".join(texts(r)), meta

    ok, text, meta = anyio.run(go, approve_there, args)
    assert ok, text
    assert len(asked) == 1 and asked[0].mode == "url", asked
    aid = asked[0].elicitation_id
    assert asked[0].url == w.srv.url(f"/#/approvals/{aid}"), asked[0]
    assert "writes-need-approval" in asked[0].message, asked[0].message
    assert meta == {"outcome": "approved", "approval_id": aid}, meta
    assert target.read_text() == f"elicited {mode}"
    used = http(w.srv, "GET", f"/api/v1/approvals/{aid}", w.tok("approver")).json()["data"]
    assert used["status"] == "used", used
    # One receipt each: the request, the decision, the run.
    assert len([e for e in audit(w, action="approval.request") if e["detail"].get("approval_id") == aid]) == 1
    assert [e for e in audit(w, action="write") if e["detail"].get("approval_id") == aid]
    runs = [e for e in audit(w, action="tool.call", outcome="ok") if e["detail"].get("approval_id") == aid]
    assert len(runs) == 1, runs

    # Declined: nothing runs, and the answer is the held result.
    asked.clear()
    other = {"path": str(target), "content": "declined"}
    ok, text, meta = anyio.run(go, decline, other)
    assert not ok and len(asked) == 1, (text, asked)
    assert held(text, meta) == asked[0].elicitation_id
    assert target.read_text() == f"elicited {mode}"


def test_approver_tools_over_mcp_deny_with_a_reason_and_the_cli(world):
    w = world
    url = gateway(w.srv, w.tok("agent"))
    target = w.allowed / "notes" / "mcp.txt"
    args = {"path": str(target), "content": "over mcp"}
    _, text, meta = run(url, "filesystem__write_file", args)
    aid = held(text, meta)

    async def approver_side():
        async with Client(gateway(w.srv, w.tok("approver")), read_timeout_seconds=60) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"approvals__list_approvals", "approvals__decide_approval"} <= names, names
            listed = await c.call_tool("approvals__list_approvals", {})
            assert aid in json.dumps(listed.structured_content), listed
            bad = await c.call_tool("approvals__decide_approval", {"id": aid, "decision": "maybe"})
            assert bad.is_error and "approve" in texts(bad)[0]
            return await c.call_tool("approvals__decide_approval", {"id": aid, "decision": "approve"})

    decided = anyio.run(approver_side)
    assert not decided.is_error and decided.structured_content["status"] == "approved", decided
    # The editor is not offered the approver tools.
    async def editor_tools():
        async with Client(gateway(w.srv, w.tok("ed")), read_timeout_seconds=60) as c:
            return {t.name for t in (await c.list_tools()).tools}
    assert not {n for n in anyio.run(editor_tools) if n.startswith("approvals__")}
    ok, text, meta = run(url, "filesystem__write_file", args)
    assert ok and meta["approval_id"] == aid and target.read_text() == "over mcp", text

    # Denied with the CLI, with a reason: the retry says so, and runs nothing.
    args = {"path": str(target), "content": "never"}
    _, text, meta = run(url, "filesystem__write_file", args)
    aid = held(text, meta)
    listed = json.loads(w.cli("approvals", "list", "--json").stdout)
    assert aid in {a["id"] for a in listed}
    w.cli("approvals", "deny", aid, "--reason", "not during the freeze")
    ok, text, meta = run(url, "filesystem__write_file", args)
    assert not ok and meta == {"outcome": "denied", "approval_id": aid}, meta
    assert "denied by local: not during the freeze" in text, text
    assert target.read_text() == "over mcp"
    shown = json.loads(w.cli("approvals", "show", aid, "--json").stdout)
    assert shown["status"] == "denied" and shown["reason"] == "not during the freeze"
    assert [e for e in audit(w, action="write") if e["detail"].get("approval_id") == aid]


def test_an_expired_or_outdated_approval_does_not_run(world):
    w = world
    url = gateway(w.srv, w.tok("agent"))
    r = http(w.srv, "POST", "/api/v1/policies", w.tok("approver"),
             json={"name": "log-needs-quick-approval", "tools": ["git.git_log"], "effect": "require_approval",
                   "approval_ttl_secs": 2})
    assert r.status_code == 201, r.text
    pid = r.json()["data"]["id"]
    try:
        args = {"repo_path": str(w.repos["allowed"])}
        _, text, meta = run(url, "git__git_log", args)
        aid = APPROVAL_ID.search(text).group(1)
        assert meta["tool"] == "git.git_log"
        time.sleep(2.5)
        r = decide(w, w.tok("approver"), aid, "approve")
        assert r.status_code == 409 and "expired" in r.json()["detail"], r.text
        assert aid in {a["id"] for a in approvals(w, w.tok("approver"), status="expired")}
        ok, text, meta = run(url, "git__git_log", args)
        fresh = APPROVAL_ID.search(text).group(1)
        assert not ok and fresh != aid
        # Approved, then the policy changes: the approval was for the old rule.
        assert decide(w, w.tok("approver"), fresh, "approve").status_code == 200
        r = http(w.srv, "PATCH", f"/api/v1/policies/{pid}", w.tok("approver"), json={"approval_ttl_secs": 60})
        assert r.status_code == 200 and r.json()["data"]["version"] == 2, r.text
        ok, text, meta = run(url, "git__git_log", args)
        assert not ok and meta["outcome"] == "held" and meta["approval_id"] != fresh, (text, meta)
    finally:
        assert http(w.srv, "DELETE", f"/api/v1/policies/{pid}", w.tok("approver")).status_code == 204
    ok, text, _ = run(url, "git__git_log", {"repo_path": str(w.repos["allowed"])})
    assert ok and "first in allowed" in text, text


def test_policy_and_approval_requests_that_are_wrong_say_why(world):
    w = world
    tok = w.tok("approver")
    for body, status, fragment in (
        ({"tools": ["a.*"], "effect": "deny"}, 400, "name: missing"),
        ({"name": "x", "tools": ["a.*"], "effect": "allow"}, 400, "effect: expected"),
        ({"name": "x", "tools": "a.*", "effect": "deny"}, 400, "tools: expected"),
        ({"name": "x", "tools": ["a.*"], "effect": "deny", "when": {"argument": "p", "operator": "near"}}, 400,
         "when.operator: unknown operator 'near'"),
        ({"name": "x", "tools": ["a.*"], "effect": "deny", "when": {"argument": "p", "operator": "under", "value": "rel"}},
         400, "not an absolute path"),
        ({"name": "x", "tools": ["a.*"], "effect": "deny", "when": {"and": [{"argument": "p", "operator": "matches", "value": "("}]}},
         400, "when.and[0].value: not a valid regular expression"),
        ({"name": "fs-inside-allowed", "tools": ["a.*"], "effect": "deny"}, 409, "already exists"),
    ):
        r = http(w.srv, "POST", "/api/v1/policies", tok, json=body)
        assert r.status_code == status and fragment in r.json()["detail"], (body, r.text)
    # An editor neither manages nor reads policies.
    assert http(w.srv, "POST", "/api/v1/policies", w.tok("ed"),
                json={"name": "y", "tools": ["a.*"], "effect": "deny"}).status_code == 403
    assert http(w.srv, "GET", "/api/v1/policies", w.tok("ed")).status_code == 403
    assert http(w.srv, "GET", "/api/v1/policies/nope", tok).status_code == 404
    assert http(w.srv, "GET", "/api/v1/approvals", tok, params={"status": "stale"}).status_code == 400
    assert http(w.srv, "GET", "/api/v1/approvals", tok, params={"limit": 0}).status_code == 400
    assert decide(w, tok, "no-such-id", "approve").status_code == 404
    r = http(w.srv, "POST", "/api/v1/approvals/x/decision", tok, json={"decision": "yes"})
    assert r.status_code == 400 and "decision" in r.json()["detail"], r.text
    # Policies listed by name, over REST and with the CLI, with their rules in words.
    names = [p["name"] for p in http(w.srv, "GET", "/api/v1/policies", tok).json()["data"]]
    assert names == sorted(names) and {"fs-inside-allowed", "git-known-repos", "writes-need-approval"} <= set(names)
    listed = w.cli("policy", "list").stdout
    assert "fs-inside-allowed" in listed and "deny filesystem.* when not (path|paths|source|destination under" in listed
    r = w.home.run("--space", "acme", "policy", "add", '{"name": "z", "tools": ["a"], "effect": "nope"}')
    assert r.returncode != 0 and "effect: expected" in r.stderr, r.stderr


@pytest.mark.skipif(backend() != "postgres", reason="several nodes need the PostgreSQL backend")
def test_across_nodes_a_call_held_on_one_is_approved_and_run_once_on_the_other(world):
    w = world
    assert w.other is not None
    target = w.allowed / "notes" / "nodes.txt"
    args = {"path": str(target), "content": "from node two"}
    _, text, meta = run(gateway(w.srv, w.tok("agent")), "filesystem__write_file", args)
    aid = held(text, meta)
    # Node two lists it and approves it.
    assert aid in {a["id"] for a in approvals(w, w.tok("approver"), srv=w.other, status="pending")}
    assert decide(w, w.tok("approver"), aid, "approve", srv=w.other).status_code == 200

    # Both nodes retry at once: exactly one runs it.
    async def race():
        results = {}

        async def one(key, srv):
            results[key] = await call(gateway(srv, w.tok("agent")), "filesystem__write_file", args)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "a", w.srv)
            tg.start_soon(one, "b", w.other)
        return results

    results = anyio.run(race)
    ran = [k for k, (ok, _, meta) in results.items() if ok]
    assert len(ran) == 1, results
    assert results[ran[0]][2] == {"outcome": "approved", "approval_id": aid}
    loser = results["b" if ran[0] == "a" else "a"]
    assert loser[2]["outcome"] == "held" and loser[2]["approval_id"] != aid, loser
    assert target.read_text() == "from node two"
