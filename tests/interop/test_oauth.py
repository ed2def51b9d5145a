"""OAuth 2.1 sign-in for MCP connectors (issue 27, item 1), end to end through the real binary:
discovery from a 401, dynamic client registration, authorization code with PKCE through the web
UI's consent page in headless Chromium (Playwright's async API, so the MCP SDK's event loop drives
it), token exchange, MCP calls, refresh rotation, replay detection and revocation.

Two clients do it: the official MCP Python SDK's own ``OAuthClientProvider`` in its default mode,
and a scripted client (plain HTTP) that checks every document and error on the way.

One home: spaces ``acme`` and ``lab``; ``ann`` is owner of ``acme`` and editor of ``lab``;
``quarry serve --auth token`` with the ``time`` package (PyPI ``mcp-server-time``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import requests
from conftest import make_home, settled, start_server
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from test_teams import texts
from test_token_reach import World as ReachWorld
from ui_support import _AXE_RUN, _axe_source, chromium_path

CALLBACK_PORT = 33419
REDIRECT = f"http://127.0.0.1:{CALLBACK_PORT}/callback"
ACCEPT = {"Accept": "application/json, text/event-stream"}


@dataclass
class World(ReachWorld):
    """test_token_reach's home and tokens."""

    def url(self, path: str) -> str:
        return self.srv.url(path)


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("oauth")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})
    w = World(home=home, srv=None, kbs={}, docs={})
    for space in ("acme", "lab"):
        w.cli("space", "create", space)
    w.cli("user", "add", "ann")
    w.cli("space", "grant", "acme", "ann", "--role", "owner")
    w.cli("space", "grant", "lab", "ann", "--role", "editor")
    # ann signs in with her own management credential; what she grants a connector still
    # manages nothing (test_a_connectors_token_manages_nothing).
    w.tokens["ann"] = w.cli_json("token", "create", "--user", "ann", "--label", "browser", "--manage")
    w.srv = start_server(home, "--auth", "token", "--hub-allow-commands", logdir=root / "logs")
    try:
        r = requests.post(w.url("/api/v1/mcp/servers"), headers={"Authorization": f"Bearer {w.tok('ann')}",
                          "X-Space-ID": "acme"}, timeout=60,
                          json={"name": "time", "transport_type": "stdio",
                                "config": str(Path(sys.executable).parent / "mcp-server-time")})
        assert r.status_code == 201, r.text
        info = settled(w.srv, r.json()["data"], {"Authorization": f"Bearer {w.tok('ann')}", "X-Space-ID": "acme"})
        assert info["status"] == "ready", info
        yield w
    finally:
        w.srv.stop()


# ---------------------------------------------------------------------------------------------
# The person in the browser: sign in to the web UI, answer the consent page.


@dataclass
class Consent:
    spaces: tuple[str, ...] = ("acme",)
    read_only: bool | None = None  # None: leave as the page proposes
    tools: str = ""
    approve: bool = True
    axe: bool = False
    kbs: tuple[str, ...] = ()  # ticked in the knowledge-base list, as labelled ("space / kb")
    picked_tools: tuple[str, ...] = ()  # packages or `package.tool`s ticked in the tool list


async def consent_in_browser(w: World, authorize_url: str, consent: Consent, sign_in=None) -> str:
    """Opens ``authorize_url`` in headless Chromium, signs in (as ann with her token, or with
    ``await sign_in(page)``), answers the consent page and returns the URL the browser was
    sent back to (the client's redirect URI)."""
    from playwright.async_api import async_playwright, expect

    landed: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            page = await browser.new_page()

            async def catch(route):
                landed.append(route.request.url)
                await route.fulfill(status=200, body="You may close this window.")

            await page.route(f"http://127.0.0.1:{CALLBACK_PORT}/**", catch)
            await page.goto(authorize_url)
            # Not signed in yet: the login form, then the consent page at the same address.
            if sign_in is None:
                await page.locator("#login-token").fill(w.tok("ann"))
                await page.locator("form.login button[type=submit]").click()
            else:
                await sign_in(page)
            title = page.get_by_role("heading", level=1)
            await expect(title).to_contain_text("Connect", timeout=30_000)
            form = page.locator("form.oauth-consent")
            await expect(form).to_be_visible()
            for box in await form.locator("input[name=space]").all():
                label = (await box.locator("xpath=..").inner_text()).strip()
                await box.set_checked(label in consent.spaces)
            if consent.read_only is not None:
                await page.get_by_label("Read only").set_checked(consent.read_only)
            if consent.tools:
                await page.get_by_label("Tools (optional)").fill(consent.tools)
            for kb in consent.kbs:
                await form.get_by_test_id("oauth-kbs").get_by_label(kb, exact=True).check()
            for name in consent.picked_tools:
                box = form.locator(f'input[name=tool][value="{name}"]')
                if "." in name:  # a single tool: open its package's list first
                    pkg = name.split(".", 1)[0]
                    await form.locator(f'.oauth-package:has(input[value="{pkg}"]) summary').click()
                await box.check()
            if consent.axe:
                await page.evaluate(_axe_source() + "\n;undefined")
                for scheme in ("light", "dark"):
                    await page.emulate_media(color_scheme=scheme)
                    bad = [v for v in await page.evaluate(_AXE_RUN) if v["impact"] in ("serious", "critical")]
                    assert not bad, f"axe ({scheme}) on the consent page: {bad}"
            await page.get_by_role("button", name="Allow" if consent.approve else "Deny", exact=True).click()
            for _ in range(300):
                if landed:
                    break
                await anyio.sleep(0.1)
        finally:
            await browser.close()
    assert landed, "the browser never came back to the client's redirect URI"
    return landed[0]


def query_of(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


# ---------------------------------------------------------------------------------------------
# Discovery


def test_discovery_from_a_401(world):
    w = world
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for path in ("/mcp", "/api/mcp"):
        r = requests.post(w.url(path), json=ping, headers=ACCEPT, timeout=30)
        assert r.status_code == 401
        challenge = r.headers["WWW-Authenticate"]
        m = re.search(r'resource_metadata="([^"]+)"', challenge)
        assert m and m.group(1) == w.url(f"/.well-known/oauth-protected-resource{path}"), challenge
        prm = requests.get(m.group(1), timeout=30).json()
        assert prm["resource"] == w.url(path)
        assert prm["authorization_servers"] == [w.url("/")]
        assert prm["scopes_supported"] == ["read", "write"]
    # A bad token is told apart (RFC 6750 invalid_token), and REST routes challenge too.
    r = requests.post(w.url("/mcp"), json=ping, headers={**ACCEPT, "Authorization": "Bearer qk_" + "0" * 64}, timeout=30)
    assert 'error="invalid_token"' in r.headers["WWW-Authenticate"]
    r = requests.get(w.url("/api/v1/knowledge-bases"), timeout=30)
    assert "resource_metadata" in r.headers["WWW-Authenticate"]
    asm = requests.get(w.url("/.well-known/oauth-authorization-server"), timeout=30).json()
    assert asm["issuer"] == w.url("/")
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert set(asm["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    for key in ("authorization_endpoint", "token_endpoint", "registration_endpoint", "revocation_endpoint"):
        assert asm[key].startswith(w.url("/oauth/")), asm
    # Behind a TLS proxy the documents name https.
    prm = requests.get(w.url("/.well-known/oauth-protected-resource/mcp"), headers={"X-Forwarded-Proto": "https"},
                       timeout=30).json()
    assert prm["resource"].startswith("https://127.0.0.1:")


# ---------------------------------------------------------------------------------------------
# The MCP SDK's own OAuth client, default mode.


class MemoryStorage:
    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, info):
        self.client_info = info


@pytest.mark.anyio
async def test_mcp_sdk_oauth_client_signs_in_calls_and_refreshes(world):
    w = world
    storage = MemoryStorage()
    landed: list[str] = []

    async def redirect_handler(url: str) -> None:
        landed.append(await consent_in_browser(w, url, Consent(spaces=("acme",), axe=True)))

    async def callback_handler() -> AuthorizationCodeResult:
        q = query_of(landed[-1])
        return AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))

    provider = OAuthClientProvider(
        server_url=w.url("/mcp"),
        client_metadata=OAuthClientMetadata(
            client_name="SDK test client",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with create_mcp_http_client(auth=provider) as http:
        async with Client(streamable_http_client(w.url("/mcp"), http_client=http), read_timeout_seconds=60) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"knowledge_search", "create_knowledge"} <= names, names
            r = await c.call_tool("create_knowledge", {"title": "OAuth heron", "content": "The grey heron waits by the OAuth pond."})
            assert r.is_error is not True, texts(r)
            r = await c.call_tool("knowledge_search", {"query": "grey heron pond", "search_mode": "keyword", "min_score": 0})
            assert r.is_error is not True, texts(r)
            assert r.structured_content["results"], r.structured_content
    assert len(landed) == 1, "one sign-in"
    assert storage.client_info is not None and storage.client_info.client_id
    tokens = storage.tokens
    assert tokens is not None and tokens.refresh_token and tokens.scope == "read write"
    # The token reaches the consented space only.
    r = requests.get(w.url("/api/v1/user/spaces"), headers={"Authorization": f"Bearer {tokens.access_token}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert [s["name"] for s in r.json()["data"]["list"]] == ["acme"], r.json()
    r = requests.get(w.url("/api/v1/knowledge-bases"), headers={"Authorization": f"Bearer {tokens.access_token}",
                     "X-Space-ID": "lab"}, timeout=30)
    assert r.status_code == 403, r.text

    # Expire the access token as the client sees it: the SDK refreshes (rotating the refresh
    # token) without asking the person again.
    old_refresh = tokens.refresh_token
    provider.context.token_expiry_time = 1.0  # long past
    async with create_mcp_http_client(auth=provider) as http:
        async with Client(streamable_http_client(w.url("/mcp"), http_client=http), read_timeout_seconds=60) as c:
            await c.list_tools()
    assert len(landed) == 1, "refreshing needed no browser"
    assert storage.tokens.refresh_token != old_refresh
    assert storage.tokens.access_token != tokens.access_token

    # The old refresh token replayed: refused, and the whole grant ends (its newest access
    # token stops working on the next request).
    # (The SDK registered with RFC 7591's default, client_secret_basic.)
    client = storage.client_info
    assert client.token_endpoint_auth_method == "client_secret_basic" and client.client_secret
    r = requests.post(w.url("/oauth/token"), data={"grant_type": "refresh_token", "refresh_token": old_refresh},
                      auth=(client.client_id, client.client_secret), timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    r = requests.post(w.url("/mcp"), json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                      headers={**ACCEPT, "Authorization": f"Bearer {storage.tokens.access_token}"}, timeout=30)
    assert r.status_code == 401, r.text


# ---------------------------------------------------------------------------------------------
# A scripted client, step by step.


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def register(w: World, **extra) -> dict:
    body = {"client_name": "Scripted client", "redirect_uris": [REDIRECT], "grant_types": ["authorization_code", "refresh_token"], **extra}
    r = requests.post(w.url("/oauth/register"), json=body, timeout=30)
    assert r.status_code == 201, r.text
    assert r.headers["Cache-Control"] == "no-store"
    return r.json()


def authorize_url(w: World, client_id: str, challenge: str, **extra) -> str:
    q = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
         "code_challenge_method": "S256", "state": "s-" + secrets.token_hex(4), "resource": w.url("/api/mcp"), **extra}
    return w.url("/oauth/authorize?" + urllib.parse.urlencode(q))


def grant(w: World, info: dict, consent: Consent, **extra) -> dict:
    """Registration done; the rest of the flow through the browser, then the token exchange."""
    verifier, challenge = pkce()
    url = authorize_url(w, info["client_id"], challenge, **extra)
    back = anyio.run(consent_in_browser, w, url, consent)
    q = query_of(back)
    assert q["state"] == query_of(url)["state"] and q["iss"] == w.url("/"), q
    auth = (info["client_id"], info["client_secret"]) if "client_secret" in info else None
    form = {"grant_type": "authorization_code", "code": q["code"], "redirect_uri": REDIRECT, "code_verifier": verifier,
            "resource": w.url("/api/mcp")}
    if auth is None:
        form["client_id"] = info["client_id"]
    r = requests.post(w.url("/oauth/token"), data=form, auth=auth, timeout=30)
    assert r.status_code == 200, r.text
    t = r.json()
    assert t["token_type"] == "Bearer" and 0 < t["expires_in"] <= 3600, t
    assert r.headers["Cache-Control"] == "no-store"
    return t


async def gateway_tools(w: World, token: str) -> list[str]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(w.url("/api/mcp"), http_client=http), read_timeout_seconds=60) as c:
            return sorted(t.name for t in (await c.list_tools()).tools)


async def mcp_call(w: World, token: str, name: str, args: dict) -> tuple[bool, str]:
    """(ok, text) of a call on ``/mcp``; a protocol error (an unknown tool) is (False, its message)."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(w.url("/mcp"), http_client=http), read_timeout_seconds=60) as c:
            try:
                r = await c.call_tool(name, args)
            except MCPError as e:
                return False, e.error.message
            return r.is_error is not True, "\n".join(texts(r))


def test_scripted_confidential_client_read_only_scope_refresh_and_revocation(world):
    w = world
    info = register(w, token_endpoint_auth_method="client_secret_basic", scope="read")
    assert info["client_secret"].startswith("qs_")
    # The client asked for read only; the person also limits it to the time package.
    t = grant(w, info, Consent(spaces=("acme",), tools="time"), scope="read")
    assert t["scope"] == "read"
    access = t["access_token"]
    tools = anyio.run(gateway_tools, w, access)
    assert tools and all(n.startswith("time") for n in tools), tools
    # Read only: no writes through MCP.
    done, text = anyio.run(mcp_call, w, access, "create_knowledge", {"title": "nope", "content": "must not be saved"})
    assert not done and "Unknown tool" in text, text
    # Limited to the time package: knowledge search is another package's tool.
    done, text = anyio.run(mcp_call, w, access, "knowledge_search", {"query": "heron", "search_mode": "keyword"})
    assert not done and "Unknown tool" in text, text
    # Refresh needs the client's secret; then it rotates.
    r = requests.post(w.url("/oauth/token"), data={"grant_type": "refresh_token", "refresh_token": t["refresh_token"]},
                      auth=(info["client_id"], "qs_wrong"), timeout=30)
    assert r.status_code == 401 and r.json()["error"] == "invalid_client", r.text
    r = requests.post(w.url("/oauth/token"), data={"grant_type": "refresh_token", "refresh_token": t["refresh_token"]},
                      auth=(info["client_id"], info["client_secret"]), timeout=30)
    assert r.status_code == 200, r.text
    t2 = r.json()
    assert t2["refresh_token"] != t["refresh_token"] and t2["scope"] == "read"
    # Asking for write on refresh is refused: the grant is read-only.
    r = requests.post(w.url("/oauth/token"), data={"grant_type": "refresh_token", "refresh_token": t2["refresh_token"],
                      "scope": "read write"}, auth=(info["client_id"], info["client_secret"]), timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "invalid_scope", r.text
    # Revocation (RFC 7009) ends the grant: both access tokens stop on the next request.
    r = requests.post(w.url("/oauth/revoke"), data={"token": t2["access_token"]},
                      auth=(info["client_id"], info["client_secret"]), timeout=30)
    assert r.status_code == 200, r.text
    for token in (access, t2["access_token"]):
        r = requests.post(w.url("/api/mcp"), json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={**ACCEPT, "Authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 401, r.text
    r = requests.post(w.url("/oauth/token"), data={"grant_type": "refresh_token", "refresh_token": t2["refresh_token"]},
                      auth=(info["client_id"], info["client_secret"]), timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    # The person sees the grant among their tokens, revoked.
    mine = requests.get(w.url("/api/v1/tokens"), headers={"Authorization": f"Bearer {w.tok('ann')}"}, timeout=30).json()["data"]
    grants = [x for x in mine if x["label"] == "OAuth: Scripted client"]
    assert grants and all(g["revoked_at"] for g in grants), grants


def test_denied_consent_and_replayed_codes(world):
    w = world
    info = register(w, token_endpoint_auth_method="none")
    verifier, challenge = pkce()
    url = authorize_url(w, info["client_id"], challenge)
    back = anyio.run(consent_in_browser, w, url, Consent(approve=False))
    q = query_of(back)
    assert q["error"] == "access_denied" and q["state"] == query_of(url)["state"] and "code" not in q, q
    # A wrong verifier fails; the code is spent, and using it again revokes what it gave.
    url = authorize_url(w, info["client_id"], challenge)
    code = query_of(anyio.run(consent_in_browser, w, url, Consent()))["code"]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": info["client_id"]}
    r = requests.post(w.url("/oauth/token"), data={**form, "code_verifier": "x" * 43}, timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    r = requests.post(w.url("/oauth/token"), data={**form, "code_verifier": verifier}, timeout=30)
    assert r.status_code == 400 and "already used" in r.json()["error_description"], r.text


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors, nothing redirected that should not be, nothing secret in the log.


def test_bad_requests_get_clear_errors(world):
    w = world
    for body, error in (
        ({"redirect_uris": ["http://evil.example/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
        ({}, "invalid_redirect_uri"),
        ({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
        ({"redirect_uris": [REDIRECT], "grant_types": ["password"]}, "invalid_client_metadata"),
    ):
        r = requests.post(w.url("/oauth/register"), json=body, timeout=30)
        assert r.status_code == 400 and r.json()["error"] == error, (body, r.text)
    r = requests.post(w.url("/oauth/register"), data="not json", timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "invalid_client_metadata"

    info = register(w, token_endpoint_auth_method="none")
    _, challenge = pkce()
    # Unknown client, or a redirect URI it never registered: shown to the person, not redirected.
    for url in (authorize_url(w, "nope", challenge),
                authorize_url(w, info["client_id"], challenge, redirect_uri="https://evil.example/cb")):
        r = requests.get(url, allow_redirects=False, timeout=30)
        assert r.status_code == 400 and "Location" not in r.headers, r.headers
        assert "cannot sign in" in r.text
    # Anything else goes back to the client, with state and iss.
    for extra, error in (({"code_challenge_method": "plain"}, "invalid_request"),
                         ({"response_type": "token"}, "unsupported_response_type"),
                         ({"scope": "admin"}, "invalid_scope"),
                         ({"resource": "https://elsewhere.example/mcp"}, "invalid_target")):
        url = authorize_url(w, info["client_id"], challenge, **extra)
        r = requests.get(url, allow_redirects=False, timeout=30)
        assert r.status_code == 303, r.text
        q = query_of(r.headers["Location"])
        assert r.headers["Location"].startswith(REDIRECT) and q["error"] == error and q["iss"] == w.url("/"), q
    # A good request goes to the consent page.
    r = requests.get(authorize_url(w, info["client_id"], challenge), allow_redirects=False, timeout=30)
    assert r.status_code == 303 and r.headers["Location"].startswith("/#/authorize?"), r.headers

    # The token endpoint.
    for data, headers, status, error in (
        ({"grant_type": "authorization_code"}, {"Content-Type": "application/json"}, 400, "invalid_request"),
        ("grant_type=refresh_token&grant_type=authorization_code", {"Content-Type": "application/x-www-form-urlencoded"}, 400, "invalid_request"),
        ({"grant_type": "password", "client_id": info["client_id"]}, None, 400, "unsupported_grant_type"),
        ({"grant_type": "authorization_code", "client_id": info["client_id"], "code": "qc_nope", "code_verifier": "x" * 43}, None, 400, "invalid_grant"),
        ({"grant_type": "authorization_code", "client_id": info["client_id"]}, None, 400, "invalid_request"),
        ({"grant_type": "refresh_token", "client_id": "nope", "refresh_token": "qr_x"}, None, 401, "invalid_client"),
    ):
        if isinstance(data, dict) and headers:
            r = requests.post(w.url("/oauth/token"), data=json.dumps(data), headers=headers, timeout=30)
        else:
            r = requests.post(w.url("/oauth/token"), data=data, headers=headers, timeout=30)
        assert r.status_code == status and r.json()["error"] == error, (data, r.status_code, r.text)
        assert r.json()["error_description"]

    # The consent API needs a signed-in person.
    r = requests.post(w.url("/api/v1/oauth/authorize"), json={"request": "", "approve": True}, timeout=30)
    assert r.status_code == 401


def test_the_consent_page_names_the_host_the_browser_goes_to(world):
    """Issue 41 item 6: `https://evil.example\\@claude.ai/cb` was shown as "returns to
    evil.example\\@claude.ai"; a browser follows it to evil.example, so that is the host shown.
    A user name or password before the host (`https://claude.ai@evil.example/`) is refused."""
    w = world
    tricky = "https://evil.example\\@claude.ai/cb"
    info = register(w, redirect_uris=[tricky], token_endpoint_auth_method="none")
    _, challenge = pkce()
    q = {"response_type": "code", "client_id": info["client_id"], "redirect_uri": tricky, "code_challenge": challenge,
         "code_challenge_method": "S256", "state": "s1", "resource": w.url("/api/mcp")}
    r = requests.get(w.url("/api/v1/oauth/authorize?" + urllib.parse.urlencode(q)),
                     headers={"Authorization": f"Bearer {w.tok('ann')}"}, timeout=30)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["redirect_host"] == "evil.example" and data["redirect_uri"] == tricky, data
    for uri in ("https://claude.ai@evil.example/cb", "https://claude.ai:pw@evil.example/cb"):
        r = requests.post(w.url("/oauth/register"), json={"redirect_uris": [uri]}, timeout=30)
        assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri", (uri, r.text)
    # Hosts with ports and apps' own schemes read as before.
    info = register(w, redirect_uris=["http://127.0.0.1:6274/cb", "cursor://anysphere.cursor-mcp/oauth/cb"],
                    token_endpoint_auth_method="none")
    for uri, host in (("http://127.0.0.1:6274/cb", "127.0.0.1:6274"), ("cursor://anysphere.cursor-mcp/oauth/cb", "anysphere.cursor-mcp")):
        r = requests.get(w.url("/api/v1/oauth/authorize?" + urllib.parse.urlencode({**q, "client_id": info["client_id"], "redirect_uri": uri})),
                         headers={"Authorization": f"Bearer {w.tok('ann')}"}, timeout=30)
        assert r.status_code == 200 and r.json()["data"]["redirect_host"] == host, r.text


def test_audit_log_records_grants_and_refusals_without_secrets(world):
    w = world
    export = w.cli("audit", "--jsonl", "--limit", "100000").stdout
    events = [json.loads(line) for line in export.splitlines() if line.strip()]
    consents = [e for e in events if e["target"] == "POST /api/v1/oauth/authorize" and e["action"] == "write"]
    assert consents and all(e["user_name"] == "ann" for e in consents), events[:5]
    signins = [e for e in events if e["action"] == "signin" and e["target"] == "/oauth/token"]
    assert signins and all(e["user_name"] == "ann" and e["token_id"] for e in signins), signins[:3]
    assert not re.search(r"q[krcsw]_[0-9a-f]{64}", export), "a secret in the audit log"
    # Refused token requests are counted per client address, and recorded outside any space.
    for _ in range(50):  # the server's writer appends every 100 ms
        out = w.cli("audit", "--action", "auth.failure", "--limit", "1000", "--jsonl").stdout
        if "/oauth/token" in out:
            break
        time.sleep(0.1)
    assert "/oauth/token" in out, out


def test_a_request_without_credentials_is_refused_but_not_audited(world):
    """Issue 41 item 24: the web UI loads before sign-in without a token; that is not an
    authentication failure and fills no audit log. A presented bad token still is one."""
    w = world
    r = requests.get(w.srv.url("/api/v1/mcp/servers/no-credential-probe"), timeout=30)
    assert r.status_code == 401, r.text
    r = requests.get(w.srv.url("/api/v1/mcp/servers/bogus-credential-probe"), timeout=30,
                     headers={"Authorization": "Bearer qk_" + "0" * 64})
    assert r.status_code == 401, r.text
    for _ in range(50):  # the server's writer appends every 100 ms
        out = w.cli("audit", "--action", "auth.failure", "--limit", "100000", "--jsonl").stdout
        if "bogus-credential-probe" in out:
            break
        time.sleep(0.1)
    assert "bogus-credential-probe" in out, out
    assert "no-credential-probe" not in out, out


def test_open_local_server_offers_no_oauth(quarry_bin: Path, corpus: Path, tmp_path: Path):
    home = make_home(quarry_bin, corpus, tmp_path / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        for path in ("/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"):
            r = requests.get(srv.url(path), timeout=30)
            assert r.status_code == 404 and "--auth token" in r.json()["detail"], r.text
        r = requests.post(srv.url("/oauth/register"), json={"redirect_uris": [REDIRECT]}, timeout=30)
        assert r.status_code == 404
    finally:
        srv.stop()


async def token_rows_in_browser(w: World) -> list[str]:
    """Signs in to the web UI as ann and returns the text of each row of Access → Tokens."""
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            page = await browser.new_page()
            await page.goto(w.url("/#/access?tab=tokens"))
            await page.locator("#login-token").fill(w.tok("ann"))
            await page.locator("form.login button[type=submit]").click()
            table = page.get_by_test_id("tokens-table")
            await expect(table).to_be_visible(timeout=30_000)
            return [(await r.inner_text()).strip() for r in await table.locator("tbody tr").all()]
        finally:
            await browser.close()


def test_access_page_shows_one_row_per_connected_application(world):
    """Every refresh mints an access token (an hour each); Access → Tokens lists the grant
    once, with its live access tokens counted there, not one row per access token."""
    w = world
    info = register(w, client_name="Refreshing client", token_endpoint_auth_method="client_secret_basic")
    t = grant(w, info, Consent(spaces=("acme",)))
    for _ in range(3):
        r = requests.post(w.url("/oauth/token"), data={"grant_type": "refresh_token", "refresh_token": t["refresh_token"]},
                          auth=(info["client_id"], info["client_secret"]), timeout=30)
        assert r.status_code == 200, r.text
        t = r.json()
    mine = requests.get(w.url("/api/v1/tokens"), headers={"Authorization": f"Bearer {w.tok('ann')}"}, timeout=30).json()["data"]
    [g] = [x for x in mine if x["label"] == "OAuth: Refreshing client"]
    children = [x for x in mine if x["parent_id"] == g["id"]]
    assert len(children) == 4 and all(c["label"] == "OAuth access: Refreshing client" for c in children), children
    live = sum(1 for c in children if not c["revoked_at"] and (c["expires_at"] or 0) > time.time() * 1000)
    assert live >= 1, children

    rows = anyio.run(token_rows_in_browser, w)
    assert not [r for r in rows if "OAuth access:" in r], rows
    [row] = [r for r in rows if "OAuth: Refreshing client" in r]
    assert f"Connected application: {live} active access token(s)" in row, row
    # The tokens ann made by hand are still rows of their own.
    assert any("browser" in r for r in rows), rows


def test_consent_page_picks_knowledge_bases_and_tools(world):
    """The consent page lists the picked spaces' knowledge bases and the person's packages and
    tools to tick (issue 41 item 24); the grant is limited to exactly what was ticked."""
    w = world
    hdr = {"Authorization": f"Bearer {w.tok('ann')}", "X-Space-ID": "acme"}
    ids = {}
    for name in ("recipes", "handbook"):
        r = requests.post(w.url("/api/v1/knowledge-bases"), headers=hdr, json={"name": name}, timeout=30)
        assert r.status_code == 201, r.text
        ids[name] = r.json()["data"]["id"]
    info = register(w, client_name="Picky client", token_endpoint_auth_method="client_secret_basic")
    t = grant(w, info, Consent(spaces=("acme",), kbs=("acme / recipes",), picked_tools=("time.get_current_time",), axe=True))
    mine = requests.get(w.url("/api/v1/tokens"), headers={"Authorization": f"Bearer {w.tok('ann')}"}, timeout=30).json()["data"]
    [g] = [x for x in mine if x["label"] == "OAuth: Picky client"]
    assert g["collections"] == [ids["recipes"]], g
    assert g["tools"] == ["time.get_current_time"], g
    tools = anyio.run(gateway_tools, w, t["access_token"])
    assert len(tools) == 1 and "get_current_time" in tools[0], tools


def test_a_connectors_token_manages_nothing(world):
    """Issue 65 item 1: a token minted for an MCP connector carries no management powers, even
    when the person consented while signed in with a management credential."""
    w = world
    info = register(w, token_endpoint_auth_method="client_secret_basic")
    access = grant(w, info, Consent(spaces=("acme",), read_only=False))["access_token"]
    headers = {"Authorization": f"Bearer {access}", "X-Space-ID": "acme"}
    assert requests.get(w.url("/api/v1/knowledge-bases"), headers=headers, timeout=30).status_code == 200
    for method, path, body in (
        ("GET", "/api/v1/policies", None),
        ("POST", "/api/v1/policies", {"name": "gone", "tools": ["time.*"], "effect": "deny"}),
        ("POST", "/api/v1/groups", {"name": "ops"}),
        ("PUT", "/api/v1/spaces/acme/members/ann", {"role": "admin"}),
        ("GET", "/api/v1/audit", None),
        ("POST", "/api/v1/endpoints", {"name": "team", "owner": "space", "servers": ["time"]}),
        ("POST", "/api/v1/tokens", {"label": "escalated", "manage": True}),
    ):
        r = requests.request(method, w.url(path), headers=headers, json=body, timeout=30)
        assert r.status_code == 403 and r.json()["error_code"] == "MANAGEMENT_FORBIDDEN", (method, path, r.text)
    listed = {t["id"] for t in requests.get(w.url("/api/v1/tokens"), headers=headers, timeout=30).json()["data"]}
    assert w.tokens["ann"]["id"] not in listed, listed
