"""Upstreams that sign in with OAuth (issue 45, item 4), end to end between two real Quarry
servers: **B** is the upstream (``quarry serve --auth token``, Quarry's own OAuth 2.1
authorization server in front of its ``/mcp``); **A** is the hub a person registers B with.

A's connection meets B's ``401`` and waits as ``auth_required``; the person starts the
sign-in on A (discovery from the ``401``, dynamic client registration, PKCE), consents on
B's page in headless Chromium, and B sends the browser back to A's callback. A keeps the
tokens sealed under ``QUARRY_SECRET_KEY`` and calls B's tools with them, through the
official MCP Python SDK in its default mode; a refused token is refreshed; a refused or
replayed callback, another user, a revoked grant and a sign-out all say what happened.
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import requests
from conftest import backend, db_rows, make_home, second_node, start_server, wait_ready
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_token_reach import World
from ui_support import chromium_path

SECRET_KEY = "5e" * 32
PHRASE = "The kestrel ledger balances on the third Thursday."


@dataclass
class Pair:
    a: World  # the hub
    b: World  # the upstream Quarry

    def api(self, method: str, path: str, who: str = "zoe", **kw) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.a.tok(who)}", **kw.pop("headers", {})}
        return requests.request(method, self.a.srv.url(path), headers=headers, timeout=60, **kw)

    def server(self, sid: str, who: str = "zoe") -> dict:
        r = self.api("GET", f"/api/v1/mcp/servers/{sid}", who)
        assert r.status_code == 200, r.text
        return r.json()["data"]

    def wait_status(self, sid: str, want: str, timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            row = self.server(sid)
            if row["status"] == want and (want != "ready" or row["tool_count"] > 0):
                return row
            if time.monotonic() > deadline:
                pytest.fail(f"upstream not {want} after {timeout} s: {row}")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def pair(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("upstream-oauth")
    quiet = {"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"}
    b = World(home=make_home(quarry_bin, corpus, root / "b", env=quiet), srv=None, kbs={}, docs={})
    b.cli("space", "create", "acme")
    b.cli("user", "add", "ann")
    b.cli("space", "grant", "acme", "ann", "--role", "owner")
    b.tokens["ann"] = b.cli_json("token", "create", "--user", "ann", "--label", "browser")
    note = root / "ledger.md"
    note.write_text(f"# Ledger\n\n{PHRASE}\n", encoding="utf-8")
    b.kbs["notes"] = b.cli_json("--space", "acme", "kb", "create", "notes")["id"]
    up = b.cli_json("--space", "acme", "kb", "upload", "notes", str(note))
    assert [d["status"] for d in up["documents"]] == ["ready"], up
    a = World(home=make_home(quarry_bin, corpus, root / "a", env={**quiet, "QUARRY_SECRET_KEY": SECRET_KEY}),
              srv=None, kbs={}, docs={})
    a.cli("space", "create", "ops")
    for user in ("zoe", "max"):
        a.cli("user", "add", user)
        a.cli("space", "grant", "ops", user, "--role", "editor")
        a.tokens[user] = a.cli_json("token", "create", "--user", user, "--spaces", "ops")
    b.srv = start_server(b.home, "--auth", "token", logdir=root / "logs-b")
    try:
        a.srv = start_server(a.home, "--auth", "token", "--allow-net", "127.0.0.1/32", logdir=root / "logs-a")
        try:
            yield Pair(a=a, b=b)
        finally:
            a.srv.stop()
    finally:
        b.srv.stop()


async def consent_on_b(p: Pair, authorize_url: str, approve: bool = True) -> str:
    """Opens B's consent page in Chromium, signs in as ann, picks ``acme``, answers, and
    follows B's redirect to A's callback; returns the text of the page A shows."""
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            page = await browser.new_page()
            await page.goto(authorize_url)
            await page.locator("#login-token").fill(p.b.tok("ann"))
            await page.locator("form.login button[type=submit]").click()
            await expect(page.get_by_role("heading", level=1)).to_contain_text("Connect", timeout=30_000)
            form = page.locator("form.oauth-consent")
            await expect(form).to_be_visible()
            for box in await form.locator("input[name=space]").all():
                label = (await box.locator("xpath=..").inner_text()).strip()
                await box.set_checked(label == "acme")
            callback = p.a.srv.url("/oauth/upstream/callback")
            async with page.expect_navigation(url=lambda u: u.startswith(callback), timeout=60_000):
                await page.get_by_role("button", name="Allow" if approve else "Deny", exact=True).click()
            await page.wait_for_load_state()
            return await page.locator("main").inner_text()
        finally:
            await browser.close()


def start_sign_in(p: Pair, sid: str) -> dict:
    r = p.api("POST", f"/api/v1/mcp/servers/{sid}/oauth")
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def call_upstream(p: Pair, tool: str, args: dict, srv=None) -> tuple[bool, str]:
    """Calls ``tool`` through A's gateway (or another node of A) with zoe's token (the SDK in
    its default mode)."""
    headers = {"Authorization": f"Bearer {p.a.tok('zoe')}"}
    node = srv or p.a.srv
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(node.url(f"/api/mcp?tools={tool}"), http_client=http)) as c:
            res = await c.call_tool(tool.replace(".", "__"), args)
            text = "".join(getattr(x, "text", "") for x in res.content)
            return (not res.is_error, text)


def search_tool(row: dict) -> str:
    names = [t["name"] for t in row["tools_cache"]]
    assert "knowledge_search" in names, names
    return f"{row['package']}.knowledge_search"


def stored_secrets(p: Pair, sid: str) -> str:
    rows = db_rows(p.a.home.env, p.a.home.home, f"SELECT secrets FROM hub_upstreams WHERE id = '{sid}'")
    assert len(rows) == 1, rows
    return rows[0][0]


@pytest.fixture(scope="module")
def signed_in(pair: Pair) -> dict:
    """zoe registers B on A, meets its 401, signs in through the browser; the row once ready."""
    p = pair
    r = p.api("POST", "/api/v1/mcp/servers",
              json={"name": "remote", "transport_type": "http", "config": p.b.srv.url("/mcp")})
    assert r.status_code == 201, r.text
    sid = r.json()["data"]["id"]
    row = p.wait_status(sid, "auth_required")
    assert "sign-in required" in row["last_error"] and "/oauth" in row["last_error"], row
    assert row.get("oauth") is None, row

    started = start_sign_in(p, sid)
    url = started["authorization_url"]
    assert url.startswith(p.b.srv.url("/oauth/authorize?")), started
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43, q
    assert q["redirect_uri"] == p.a.srv.url("/oauth/upstream/callback"), q
    assert q["resource"].startswith(p.b.srv.url("")), q
    assert q["state"].startswith(sid + "."), q
    assert started["issuer"].rstrip("/") == p.b.srv.url("").rstrip("/"), started
    assert p.server(sid)["oauth"]["state"] == "pending"

    page = anyio.run(consent_on_b, p, url)
    assert "signed in to the MCP server 'remote'" in page, page
    row = p.wait_status(sid, "ready")
    # Replaying the callback B sent does nothing: the sign-in was used once.
    return {"id": sid, "row": row, "authorize_url": url, "state": q["state"]}


def test_sign_in_through_the_browser_then_calls_reach_the_upstream(pair, signed_in):
    p, row = pair, signed_in["row"]
    assert row["oauth"]["state"] == "signed_in", row["oauth"]
    assert row["oauth"]["user"] == "zoe", row["oauth"]
    assert row["oauth"]["expires_at"] > time.time() * 1000, row["oauth"]
    assert "access_token" not in str(row) and "refresh_token" not in str(row), row["oauth"]
    tool = search_tool(row)
    ok, text = anyio.run(call_upstream, p, tool, {"query": "kestrel ledger"})
    assert ok and "kestrel" in text.lower(), text
    # The tokens are stored sealed: no token of B's (qk_ access, qr_ refresh) in the row.
    secrets = stored_secrets(p, signed_in["id"])
    assert '"oauth":"v1:' in secrets.replace(" ", ""), secrets[:200]
    assert "qk_" not in secrets and "qr_" not in secrets, "a token stored in the clear"


def test_a_replayed_or_forged_callback_is_refused(pair, signed_in):
    p = pair
    cb = p.a.srv.url("/oauth/upstream/callback")
    for query, status, words in (
        ({"state": signed_in["state"], "code": "qc_" + "0" * 64}, 400, "already used"),
        ({"state": signed_in["id"] + ".forged", "code": "x"}, 400, "already used"),
        ({"code": "x"}, 400, "no state"),
        ({"state": "nonsense"}, 400, "already used"),
    ):
        r = requests.get(cb + "?" + urllib.parse.urlencode(query), timeout=30)
        assert r.status_code == status, (query, r.status_code, r.text)
        assert words in r.text and "Sign-in failed" in r.text, r.text
    # Still signed in and working.
    assert p.server(signed_in["id"])["status"] == "ready"


def test_others_cannot_start_a_sign_in_and_bad_bodies_say_why(pair, signed_in):
    p = pair
    sid = signed_in["id"]
    r = p.api("POST", f"/api/v1/mcp/servers/{sid}/oauth", who="max")
    assert r.status_code == 404, r.text
    r = p.api("POST", f"/api/v1/mcp/servers/{sid}/oauth", json={"client_secret": "s"})
    assert r.status_code == 400 and "client_id" in r.text, r.text
    r = p.api("POST", f"/api/v1/mcp/servers/{sid}/oauth", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.text, r.text
    r = p.api("POST", f"/api/v1/mcp/servers/{sid}/oauth", json={"client_id": "x", "surprise": 1})
    assert r.status_code == 400 and "surprise" in r.text, r.text


def test_a_refused_token_is_refreshed(pair, signed_in):
    """B stops accepting A's access token (ann revokes that one token on B); A's next
    connection refreshes it with the refresh token, once, and calls work again."""
    p = pair
    sid = signed_in["id"]
    before = stored_secrets(p, sid)
    revoke_access_tokens_on_b(p)
    calls_work_again(p, search_tool(p.server(sid)), p.a.srv)
    assert stored_secrets(p, sid) != before, "the refreshed tokens were not stored"
    assert p.server(sid)["oauth"]["state"] == "signed_in"


def revoke_access_tokens_on_b(p: Pair) -> None:
    """ann revokes, on B, the access tokens A holds (children of the OAuth grant); the grant
    and its refresh token stay."""
    tokens = p.b.cli_json("token", "list", "--user", "ann")
    access = [t for t in tokens if t.get("parent_id") and not t.get("revoked") and t.get("expires_at")]
    assert access, tokens
    for t in access:
        p.b.cli("token", "revoke", t["id"])


def calls_work_again(p: Pair, tool: str, srv, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        ok, text = anyio.run(call_upstream, p, tool, {"query": "kestrel ledger"}, srv)
        if ok and "kestrel" in text.lower():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"calls through {srv.url('')} never worked again: {text}")
        time.sleep(0.5)


@pytest.mark.skipif(backend() != "postgres", reason="two nodes of A share one PostgreSQL database")
def test_two_nodes_share_the_sign_in_and_spend_a_refresh_token_once(pair, signed_in, tmp_path):
    """A second node of A uses the stored sign-in; when B refuses the token both hold, both
    nodes recover at once — one refreshes, the other waits for its tokens. B rotates refresh
    tokens and revokes the grant when one is replayed, so a refresh spent twice would leave
    both nodes signed out."""
    import threading

    p = pair
    sid = signed_in["id"]
    tool = search_tool(p.server(sid))
    node2 = start_server(second_node(p.a.home, tmp_path / "a2"), "--auth", "token", "--allow-net", "127.0.0.1/32",
                         logdir=tmp_path / "logs-a2")
    try:
        wait_ready(node2)
        calls_work_again(p, tool, node2)
        revoke_access_tokens_on_b(p)
        failures: list[BaseException] = []

        def recover(srv) -> None:
            try:
                calls_work_again(p, tool, srv)
            except BaseException as e:  # noqa: BLE001  (reported below)
                failures.append(e)

        threads = [threading.Thread(target=recover, args=(srv,)) for srv in (p.a.srv, node2, p.a.srv, node2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures
        # Still signed in (a replayed refresh token would have revoked the grant), on both.
        assert p.server(sid)["oauth"]["state"] == "signed_in"
        for srv in (p.a.srv, node2):
            ok, text = anyio.run(call_upstream, p, tool, {"query": "kestrel ledger"}, srv)
            assert ok and "kestrel" in text.lower(), text
    finally:
        node2.stop()


def test_declined_consent_and_sign_out(pair, signed_in):
    p = pair
    sid = signed_in["id"]
    r = p.api("DELETE", f"/api/v1/mcp/servers/{sid}/oauth")
    assert r.status_code == 200, r.text
    row = p.wait_status(sid, "auth_required")
    assert row.get("oauth") is None, row
    r = p.api("DELETE", f"/api/v1/mcp/servers/{sid}/oauth")
    assert r.status_code == 404 and "no sign-in" in r.text, r.text
    # The person declines on B: A says so, and the server still waits for a sign-in.
    url = start_sign_in(p, sid)["authorization_url"]
    page = anyio.run(consent_on_b, p, url, False)
    assert "was not completed" in page and "access_denied" in page, page
    assert p.server(sid)["status"] == "auth_required"
