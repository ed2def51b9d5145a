"""People sign in with their company's identity provider (issue 69, items 1 to 3), end to end:
the real binary (`quarry serve --auth token --oidc-config FILE`) against a real OpenID provider
on loopback (PyPI django-oidc-provider, RS256, oidc_op.py), in headless Chromium and over plain
HTTP.

- Sign-in in the browser: the login screen's provider button, the provider's login page, back to
  the web UI as a user made at the first sign-in and found by issuer + subject after; the
  provider's groups decide the space role and the reader groups, so a person who leaves `hr` at
  the provider no longer reads hr's document after their next sign-in; sign-out ends the web
  session for good and the provider's session too (RP-initiated logout).
- Refused, each with a page that says why and nothing changed: a forged or missing `state`, a
  replayed callback, a code injected into another sign-in (PKCE), an ID token signed by a key
  the provider does not publish, an account at a domain the server does not admit, an account
  in no space, an expired session, a provider that is down (the rest of the server works), a
  session's token used as a bearer token. Key rotation at the provider is followed.
- The MCP connector flow (the SDK's OAuthClientProvider) through the consent page signed into by
  the provider.
- Two nodes over PostgreSQL: a session made on one works on the other; a sign-out on one ends it
  on both.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from conftest import QuarryHome, backend, free_port, make_home, second_node, start_server, wait_ready
from oidc_op import OidcProvider
from ui_support import artifacts_dir, in_thread

CLIENT_ID = "quarry-web"
CLIENT_SECRET = "s3cret-web-7f2a"
SECRET_VAR = "QUARRY_TEST_OIDC_SECRET"
PAY = "# Pay bands 2027\n\nThe heron pay band rises to 7,300 a month for grade four.\n"
WELCOME = "# Welcome\n\nThe heron pond is behind building two; lunch is at noon.\n"


def provider_config(op: OidcProvider, **extra) -> dict:
    p = {
        "name": "company",
        "title": "Sign in with Company SSO",
        "issuer": op.issuer,
        "client_id": CLIENT_ID,
        "client_secret_env": SECRET_VAR,
        "scopes": ["openid", "email", "profile", "groups"],
        "allowed_domains": ["example.com"],
        "groups": [
            {"group": "eng", "space": "default", "role": "editor", "reader_groups": ["eng"]},
            {"group": "hr", "space": "default", "reader_groups": ["hr"]},
            {"group": "leads", "space": "default", "role": "admin"},
        ],
    }
    p.update(extra)
    return p


@dataclass
class World:
    root: Path
    op: OidcProvider
    home: QuarryHome
    srv: object = None
    owner: str = ""
    kb: str = ""
    servers: list = field(default_factory=list)
    clients: dict = field(default_factory=dict)  # client id -> the bases registered for it

    def cli_json(self, *args: str):
        r = self.home.run("--json", *args)
        assert r.returncode == 0, f"quarry {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return json.loads(r.stdout)

    def serve(self, home: QuarryHome, name: str, config: dict) -> object:
        """A server signing people in with `config`, its callback registered at the provider."""
        path = self.root / f"{name}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        srv = start_server(home.with_env(**{SECRET_VAR: CLIENT_SECRET}), "--auth", "token", "--oidc-config",
                           str(path), logdir=self.root / f"{name}-logs")
        self.servers.append(srv)
        for p in config["providers"]:
            self.register(p["client_id"], srv.base)
        return srv

    def register(self, client_id: str, base: str) -> None:
        """Registers `base`'s callback for `client_id` at the provider, beside the others'."""
        bases = self.clients.setdefault(client_id, [])
        bases.append(base)
        self.op.add_client(client_id, CLIENT_SECRET, [f"{b}/ui/oidc/callback" for b in bases],
                           post_logout_redirect_uris=[f"{b}/" for b in bases])

    def docs_seen(self, base: str, cookie: str) -> list[str]:
        r = requests.get(f"{base}/api/v1/knowledge-bases/{self.kb}/documents",
                         headers={"Cookie": f"quarry_session={cookie}"}, timeout=30)
        assert r.status_code == 200, r.text
        return sorted(d["file_name"] for d in r.json()["data"])


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("oidc")
    op = OidcProvider(root / "op").start()
    try:
        home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})
        w = World(root=root, op=op, home=home)
        r = home.run("user", "add", "boss")
        assert r.returncode == 0, r.stderr
        assert home.run("space", "grant", "default", "boss", "--role", "owner").returncode == 0
        w.owner = w.cli_json("token", "create", "--user", "boss", "--manage")["token"]
        w.kb = w.cli_json("kb", "create", "handbook")["id"]
        files = root / "files"
        files.mkdir()
        (files / "pay.md").write_text(PAY, encoding="utf-8")
        (files / "welcome.md").write_text(WELCOME, encoding="utf-8")
        w.cli_json("kb", "upload", "handbook", str(files / "pay.md"), "--readers", "group:hr")
        w.cli_json("kb", "upload", "handbook", str(files / "welcome.md"))
        w.srv = w.serve(home, "main", {"session_minutes": 30, "providers": [provider_config(op)]})
        yield w
    finally:
        errors = []
        for srv in w.servers if "w" in locals() else []:
            try:
                srv.stop()
            except AssertionError as e:
                errors.append(str(e))
        op.stop()
        assert not errors, "\n".join(errors)


def sign_in_http(base: str, op: OidcProvider, user: str, password: str = "pw", provider: str = "company",
                 session: requests.Session | None = None) -> requests.Response:
    """Signs in as a browser would, over plain HTTP (cookies passed by hand: they are Secure,
    which a cookie jar keeps for HTTPS only). Returns the callback's answer."""
    s = session or requests.Session()
    r = s.get(f"{base}/ui/oidc/{provider}/start", params={"return_to": "/#/kb"}, allow_redirects=False, timeout=30)
    assert r.status_code == 302, r.text
    state = r.cookies.get("quarry_oidc_state")
    assert state and len(state) == 64, r.headers
    back = op.sign_in(s, r.headers["Location"], user, password)
    assert back.startswith(f"{base}/ui/oidc/callback?"), back
    return requests.get(back, headers={"Cookie": f"quarry_oidc_state={state}"}, allow_redirects=False, timeout=30)


def session_cookie(r: requests.Response) -> str:
    assert r.status_code == 302, r.text
    cookie = r.cookies.get("quarry_session")
    assert cookie and cookie.startswith("qw_"), r.headers
    set_cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "Secure" in set_cookie and "SameSite=Strict" in set_cookie, set_cookie
    return cookie


def roles_of(w: World) -> dict[str, str]:
    r = requests.get(f"{w.srv.base}/api/v1/spaces/default/members", headers={"Authorization": f"Bearer {w.owner}"},
                     timeout=30)
    assert r.status_code == 200, r.text
    return {m["user"]: m["role"] for m in r.json()["data"]}


def sessions_of(w: World, user: str) -> list[dict]:
    r = requests.get(f"{w.srv.base}/api/v1/spaces/default/sessions", headers={"Authorization": f"Bearer {w.owner}"},
                     timeout=30)
    assert r.status_code == 200, r.text
    return [s for s in r.json()["data"] if s["user"] == user]


def problem(r: requests.Response) -> str:
    """The message of a sign-in problem page."""
    assert r.headers["Content-Type"].startswith("text/html"), r.headers
    assert "default-src 'none'" in r.headers["Content-Security-Policy"]
    m = re.search(r'<p id="sign-in-message">(.*?)</p>', r.text, re.S)
    assert m, r.text
    return m.group(1)


def whoami(base: str, cookie: str) -> requests.Response:
    return requests.get(f"{base}/ui/session", headers={"Cookie": f"quarry_session={cookie}"}, timeout=30)


# ---------------------------------------------------------------------------------------------
# In the browser.


def test_people_sign_in_in_the_browser_and_their_groups_decide_what_they_read(world, ui_page_factory, axe_check,
                                                                             shot):
    from playwright.sync_api import expect

    w = world
    w.op.add_user("alice", "pw", "alice@example.com", ["eng", "hr"], first_name="Alice", last_name="Liddell")
    page = ui_page_factory()
    page.goto(f"{w.srv.base}/")
    button = page.locator("#login-provider-company")
    expect(button).to_have_text("Sign in with Company SSO")
    # The token field stays, second.
    expect(page.locator("#login-token")).to_be_visible()
    expect(button).to_be_focused()
    axe_check(page, "sign-in with providers")
    shot(page, "ui-sign-in")
    page.locator("form.login").screenshot(path=str(artifacts_dir() / "ui-sign-in-card.png"))
    # The problem page the server renders is axe-clean too.
    page.goto(f"{w.srv.base}/ui/oidc/callback?code=x&state=y")
    expect(page.locator("#sign-in-problem")).to_have_text("Sign-in failed")
    axe_check(page, "sign-in problem page")
    page.goto(f"{w.srv.base}/")
    button.click()
    page.wait_for_url(re.compile(re.escape(w.op.base) + r"/accounts/login/"))
    page.locator("#id_username").fill("alice")
    page.locator("#id_password").fill("pw")
    page.locator("#login").click()
    expect(page.locator("#nav a").first).to_be_visible(timeout=30_000)
    assert page.url.startswith(f"{w.srv.base}/"), page.url
    me = page.evaluate("fetch('/ui/session').then(r => r.json())")["data"]
    assert me["user"]["name"] == "alice" and me["web_session"] is True, me
    assert me["space"]["name"] == "default" and me["manage"] is True, me
    cookie = next(c for c in page.context.cookies() if c["name"] == "quarry_session")
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict", cookie
    first_session = cookie["value"]
    assert first_session.startswith("qw_")
    assert w.docs_seen(w.srv.base, first_session) == ["pay.md", "welcome.md"]
    # The space's owner sees alice as a member and her session.
    assert roles_of(w).get("alice") == "editor"
    mine = sessions_of(w, "alice")
    assert len(mine) == 1 and mine[0]["label"].startswith("web session: Sign in with Company SSO"), mine

    # A token alice makes for her agent while signed in is hers: it outlives the session.
    made = page.evaluate("""async () => {
        const csrf = document.cookie.match(/quarry_csrf=([^;]+)/)[1];
        const r = await fetch('/api/v1/tokens', {method: 'POST', body: JSON.stringify({label: 'agent'}),
            headers: {'Content-Type': 'application/json', 'X-Quarry-CSRF': csrf}});
        return {status: r.status, body: await r.json()};
    }""")
    assert made["status"] == 201, made
    agent = made["body"]["data"]["token"]
    assert agent.startswith("qk_") and made["body"]["data"]["parent_id"] is None, made

    # alice leaves hr at the provider; she signs out (the provider's session ends too) and in
    # again.
    w.op.set_groups("alice", ["eng"])
    page.locator("#logout").click()
    page.wait_for_url(re.compile(re.escape(w.srv.base) + r"/"))
    expect(page.locator("#login-provider-company")).to_be_visible(timeout=30_000)
    assert "not signed in" in requests.get(f"{w.op.base}/", cookies={
        c["name"]: c["value"] for c in page.context.cookies() if c["name"].startswith("op_")}, timeout=30).text
    assert whoami(w.srv.base, first_session).status_code == 401, "sign-out ends the session for good"
    r = requests.get(f"{w.srv.base}/api/v1/user/spaces", headers={"Authorization": f"Bearer {agent}"}, timeout=30)
    assert r.status_code == 200, r.text
    page.locator("#login-provider-company").click()
    page.locator("#id_username").fill("alice")
    page.locator("#id_password").fill("pw")
    page.locator("#login").click()
    expect(page.locator("#nav a").first).to_be_visible(timeout=30_000)
    second = next(c["value"] for c in page.context.cookies() if c["name"] == "quarry_session")
    assert second != first_session
    me = page.evaluate("fetch('/ui/session').then(r => r.json())")["data"]
    assert me["user"]["name"] == "alice", "the same user, found by issuer and subject"
    assert w.docs_seen(w.srv.base, second) == ["welcome.md"], "hr's document is gone with the group"
    assert roles_of(w)["alice"] == "editor"
    # Joining leads makes her the space's admin at her next sign-in (admins read everything).
    w.op.set_groups("alice", ["eng", "leads"])
    third = session_cookie(sign_in_http(w.srv.base, w.op, "alice"))
    assert roles_of(w)["alice"] == "admin"
    assert w.docs_seen(w.srv.base, third) == ["pay.md", "welcome.md"]

    # The owner revokes the session: the browser is signed out at its next request.
    live = sessions_of(w, "alice")
    assert len(live) == 2, live
    for one in live:
        r = requests.delete(f"{w.srv.base}/api/v1/spaces/default/sessions/{one['id']}",
                            headers={"Authorization": f"Bearer {w.owner}"}, timeout=30)
        assert r.status_code == 200, r.text
    assert sessions_of(w, "alice") == []
    assert whoami(w.srv.base, third).status_code == 401
    assert whoami(w.srv.base, second).status_code == 401


# ---------------------------------------------------------------------------------------------
# Over HTTP: what is refused, and why.


def test_forged_replayed_and_injected_callbacks_are_refused(world):
    w = world
    w.op.add_user("bob", "pw", "bob@example.com", ["eng"])
    base = w.srv.base
    # No state cookie: a callback this browser never started.
    r = requests.get(f"{base}/ui/oidc/callback", params={"code": "x", "state": "a" * 64}, timeout=30)
    assert r.status_code == 400 and "not started in this browser" in problem(r)
    # A state that is not the browser's (login CSRF: a link with the attacker's code).
    r = requests.get(f"{base}/ui/oidc/callback", params={"code": "x", "state": "a" * 64},
                     headers={"Cookie": "quarry_oidc_state=" + "b" * 64}, timeout=30)
    assert r.status_code == 400 and "does not match" in problem(r)

    # A real sign-in, then its callback replayed.
    s = requests.Session()
    r = s.get(f"{base}/ui/oidc/company/start", allow_redirects=False, timeout=30)
    state = r.cookies["quarry_oidc_state"]
    back = w.op.sign_in(s, r.headers["Location"], "bob", "pw")
    first = requests.get(back, headers={"Cookie": f"quarry_oidc_state={state}"}, allow_redirects=False, timeout=30)
    cookie = session_cookie(first)
    assert first.headers["Location"] == "/"
    assert whoami(base, cookie).json()["data"]["user"]["name"] == "bob"
    again = requests.get(back, headers={"Cookie": f"quarry_oidc_state={state}"}, allow_redirects=False, timeout=30)
    assert again.status_code == 400 and "already used" in problem(again)

    # Another sign-in's code injected into this one: the provider refuses it (PKCE).
    s1, s2 = requests.Session(), requests.Session()
    r1 = s1.get(f"{base}/ui/oidc/company/start", allow_redirects=False, timeout=30)
    r2 = s2.get(f"{base}/ui/oidc/company/start", allow_redirects=False, timeout=30)
    code_of_1 = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(w.op.sign_in(s1, r1.headers["Location"], "bob", "pw")).query))["code"]
    state2 = r2.cookies["quarry_oidc_state"]
    r = requests.get(f"{base}/ui/oidc/callback", params={"code": code_of_1, "state": state2},
                     headers={"Cookie": f"quarry_oidc_state={state2}"}, timeout=30)
    assert r.status_code == 401 and "invalid_grant" in problem(r), r.text

    # The provider answered an error (the person declined).
    s = requests.Session()
    r = s.get(f"{base}/ui/oidc/company/start", allow_redirects=False, timeout=30)
    state = r.cookies["quarry_oidc_state"]
    r = requests.get(f"{base}/ui/oidc/callback", params={"error": "access_denied", "state": state},
                     headers={"Cookie": f"quarry_oidc_state={state}"}, timeout=30)
    assert r.status_code == 401 and "access_denied" in problem(r)

    # A session's token is the browser's: as a bearer token or pasted into the token form, refused.
    r = requests.get(f"{base}/ui/session", headers={"Authorization": f"Bearer {cookie}"}, timeout=30)
    assert r.status_code == 401 and "session cookie" in r.json()["detail"], r.text
    csrf = "c" * 64
    r = requests.post(f"{base}/ui/login", json={"token": cookie},
                      headers={"Cookie": f"quarry_csrf={csrf}", "X-Quarry-CSRF": csrf}, timeout=30)
    assert r.status_code == 401, r.text
    # Refusals are audited (outside any space: nobody signed in), without the code, the state
    # or any token.
    for _ in range(50):  # the server's writer appends every 100 ms
        out = w.home.run("audit", "--jsonl", "--limit", "100000").stdout
        if "SIGN_IN_STATE" in out and "SIGN_IN_REFUSED" in out:
            break
        time.sleep(0.1)
    assert "SIGN_IN_STATE" in out and "SIGN_IN_REFUSED" in out, out[-2000:]
    assert code_of_1 not in out and state2 not in out and state not in out
    assert not re.search(r"q[kw]_[0-9a-f]{64}", out), "a secret in the audit log"
    signins = [json.loads(x) for x in out.splitlines() if '"signin"' in x]
    assert any(e["target"] == "/ui/oidc/callback" and e["user_name"] == "bob" for e in signins), signins[-3:]


def test_keys_rotate_and_a_foreign_key_is_refused(world):
    w = world
    w.op.add_user("carol", "pw", "carol@example.com", ["eng"])
    session_cookie(sign_in_http(w.srv.base, w.op, "carol"))
    # The provider rotates its key: the new kid is not in the cached set, which is fetched again.
    old, new = w.op.kids()[0], w.op.rotate_key()
    assert old != new
    session_cookie(sign_in_http(w.srv.base, w.op, "carol"))
    # The provider signs with a key its JWKS does not carry (the set names another key).
    w.op.serve_foreign_jwks(True)
    try:
        w.op.rotate_key()
        r = sign_in_http(w.srv.base, w.op, "carol")
        assert r.status_code == 401 and "does not publish" in problem(r), r.text
    finally:
        w.op.serve_foreign_jwks(False)
    session_cookie(sign_in_http(w.srv.base, w.op, "carol"))


def test_who_may_sign_in(world):
    w = world
    # A domain the server does not admit.
    w.op.add_user("mallory", "pw", "mallory@evil.example", ["eng"])
    r = sign_in_http(w.srv.base, w.op, "mallory")
    assert r.status_code == 403 and "example.com" in problem(r)
    # An account no group maps to a space, and no owner added: told to ask an owner.
    w.op.add_user("dave", "pw", "dave@example.com", ["guests"])
    r = sign_in_http(w.srv.base, w.op, "dave")
    assert r.status_code == 403 and "not a member of any space" in problem(r), problem(r)
    # Once an owner adds the user the sign-in made to a space no group rule names, the same
    # account signs in (a space the rules name is the provider's to decide: docs/sign-in.md).
    assert w.home.run("space", "create", "side").returncode == 0
    assert w.home.run("space", "grant", "side", "dave", "--role", "viewer").returncode == 0
    cookie = session_cookie(sign_in_http(w.srv.base, w.op, "dave"))
    assert whoami(w.srv.base, cookie).json()["data"]["user"]["name"] == "dave"
    # A user named like the account but made by an owner is someone else: the account gets
    # its own user.
    assert w.home.run("user", "add", "erin").returncode == 0
    assert w.home.run("space", "grant", "default", "erin", "--role", "viewer").returncode == 0
    w.op.add_user("erin", "pw", "erin@example.com", ["eng"])
    cookie = session_cookie(sign_in_http(w.srv.base, w.op, "erin"))
    assert whoami(w.srv.base, cookie).json()["data"]["user"]["name"] == "erin-2"


def test_a_provider_that_is_down_leaves_the_rest_working(world):
    w = world
    w.op.add_user("frank", "pw", "frank@example.com", ["eng"])
    # A fresh server: no discovery document cached.
    srv = w.serve(w.home, "down", {"providers": [provider_config(w.op)]})
    w.op.stop()
    try:
        r = requests.get(f"{srv.base}/ui/oidc/company/start", allow_redirects=False, timeout=60)
        assert r.status_code == 502, r.text
        msg = problem(r)
        assert "cannot be reached" in msg and "access token" in msg, msg
        assert CLIENT_SECRET not in r.text
        assert requests.get(f"{srv.base}/health", timeout=30).status_code == 200
        r = requests.get(f"{srv.base}/api/v1/knowledge-bases", headers={"Authorization": f"Bearer {w.owner}"}, timeout=30)
        assert r.status_code == 200, r.text
        assert CLIENT_SECRET not in srv.stderr()
    finally:
        w.op.start()
    session_cookie(sign_in_http(srv.base, w.op, "frank"))


def test_a_session_expires_on_the_owners_bound(world):
    w = world
    w.op.add_user("gina", "pw", "gina@example.com", ["eng"])
    config = {"session_minutes": 0.1, "providers": [provider_config(w.op, client_id="quarry-short")]}
    srv = w.serve(w.home, "short", config)
    cookie = session_cookie(sign_in_http(srv.base, w.op, "gina"))
    assert whoami(srv.base, cookie).status_code == 200
    time.sleep(6.5)
    r = whoami(srv.base, cookie)
    assert r.status_code == 401 and "expired" in r.json()["detail"], r.text


def test_a_bad_configuration_stops_the_server_with_its_reason(world):
    w = world
    bad = w.root / "bad.json"
    for doc, says in (
        ({"providers": [provider_config(w.op, issuer="http://idp.example.com")]}, "https"),
        ({"providers": [provider_config(w.op, client_secret_env="QUARRY_TEST_UNSET_SECRET")]}, "not set"),
        ({"providers": [provider_config(w.op, groups=[{"group": "g", "space": "default", "role": "boss"}])]}, "boss"),
        ("{not json", "bad.json"),
    ):
        bad.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
        r = w.home.with_env(**{SECRET_VAR: CLIENT_SECRET}).run(
            "serve", "--port", str(free_port()), "--auth", "token", "--oidc-config", str(bad), timeout=60)
        assert r.returncode != 0 and says in r.stderr, r.stderr
        assert CLIENT_SECRET not in r.stderr
    # Sign-in needs a server that requires tokens.
    good = w.root / "good.json"
    good.write_text(json.dumps({"providers": [provider_config(w.op)]}), encoding="utf-8")
    r = w.home.with_env(**{SECRET_VAR: CLIENT_SECRET}).run("serve", "--port", str(free_port()), "--auth", "none",
                                                          "--oidc-config", str(good), timeout=60)
    assert r.returncode != 0 and "--auth token" in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------
# An MCP connector's consent, signed into with the provider.


def test_an_mcp_connector_is_approved_by_a_person_signed_in_with_the_provider(world):
    # Its own event loop in a thread: the module's browser (sync Playwright) owns this one's.
    in_thread(lambda: connector_flow(world))


async def connector_flow(world):
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    from test_oauth import REDIRECT, Consent, MemoryStorage, consent_in_browser, query_of

    w = world
    w.op.add_user("hana", "pw", "hana@example.com", ["eng"])
    landed: list[str] = []

    async def with_company_account(page) -> None:
        await page.locator("#login-provider-company").click()
        await page.locator("#id_username").fill("hana")
        await page.locator("#id_password").fill("pw")
        await page.locator("#login").click()

    async def consent(url: str) -> None:
        landed.append(await consent_in_browser(w, url, Consent(spaces=("default",)), sign_in=with_company_account))

    async def callback() -> AuthorizationCodeResult:
        q = query_of(landed[-1])
        return AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=f"{w.srv.base}/mcp",
        client_metadata=OAuthClientMetadata(client_name="SDK via SSO", redirect_uris=[REDIRECT],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"]),
        storage=storage, redirect_handler=consent, callback_handler=callback,
    )
    async with create_mcp_http_client(auth=provider) as http:
        async with Client(streamable_http_client(f"{w.srv.base}/mcp", http_client=http), read_timeout_seconds=60) as c:
            r = await c.call_tool("knowledge_search", {"query": "heron pond", "search_mode": "keyword", "min_score": 0})
            assert r.is_error is not True
            names = {hit.get("file_name") or hit.get("title") for hit in r.structured_content["results"]}
            assert not any("pay" in (n or "") for n in names), names
    assert len(landed) == 1
    token = storage.tokens.access_token
    # The connection outlives the browser's session: hana signs out (the session is revoked),
    # the connector still works.
    for live in sessions_of(w, "hana"):
        r = requests.delete(f"{w.srv.base}/api/v1/spaces/default/sessions/{live['id']}",
                            headers={"Authorization": f"Bearer {w.owner}"}, timeout=30)
        assert r.status_code == 200, r.text
    assert sessions_of(w, "hana") == []
    r = requests.get(f"{w.srv.base}/api/v1/user/spaces", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text


# ---------------------------------------------------------------------------------------------
# Two nodes over PostgreSQL.


def test_a_session_works_on_every_node_and_a_sign_out_ends_it_on_all(world):
    if backend() != "postgres":
        pytest.skip("several nodes share a PostgreSQL database (the PostgreSQL pass runs this)")
    w = world
    w.op.add_user("ivan", "pw", "ivan@example.com", ["eng", "hr"])
    config = {"providers": [provider_config(w.op, client_id="quarry-nodes")]}
    node_b = second_node(w.home, w.root / "node-b")
    a = w.serve(w.home, "node-a", config)
    b = w.serve(node_b, "node-b", config)
    wait_ready(b)
    # Started on A, finished on B (the sign-in request is in the database).
    s = requests.Session()
    r = s.get(f"{a.base}/ui/oidc/company/start", allow_redirects=False, timeout=30)
    state = r.cookies["quarry_oidc_state"]
    back = w.op.sign_in(s, r.headers["Location"], "ivan", "pw")
    on_b = back.replace(a.base, b.base)
    cookie = session_cookie(requests.get(on_b, headers={"Cookie": f"quarry_oidc_state={state}"},
                                         allow_redirects=False, timeout=30))
    for node in (a, b):
        assert whoami(node.base, cookie).json()["data"]["user"]["name"] == "ivan"
        assert w.docs_seen(node.base, cookie) == ["pay.md", "welcome.md"]
    csrf = "d" * 64
    r = requests.post(f"{a.base}/ui/logout", headers={"Cookie": f"quarry_session={cookie}; quarry_csrf={csrf}",
                                                      "X-Quarry-CSRF": csrf}, timeout=30)
    assert r.status_code == 200, r.text
    out = r.json()["data"]["logout_url"]
    assert out and out.startswith(f"{w.op.issuer}/end-session?id_token_hint="), out
    for node in (a, b):
        assert whoami(node.base, cookie).status_code == 401, node.base
