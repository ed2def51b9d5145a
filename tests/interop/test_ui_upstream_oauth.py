"""Signing in to an upstream MCP server from the Tools page (js/tools.js, issue 45 item 4), in
Debian's headless Chromium between two real Quarry servers: test_upstream_oauth's ``pair``,
**B** the upstream (Quarry's own OAuth authorization server in front of its ``/mcp``) and **A**
the hub.

zoe registers B on A over REST; on A's Tools page the card says "Sign-in required" (in Chinese
too, with the server's reason translated) and offers "Sign in". It starts the sign-in
(``POST …/oauth``) and opens B's page in a new window, where ann signs in to B, picks a space
and allows; B sends that window to A's callback ("Signed in"), and meanwhile the card, which
polls its server, turns ready and says who signed in where. "Sign out" asks first, forgets the
sign-in (``DELETE …/oauth``) and the card offers "Sign in" again. A second tab, still showing
the sign-in that is gone, meets the API's 404 on "Sign out": the error shows beside the button
(in Chinese) and the card is read again. axe-core runs on both states.

A's page is opened as ``http://localhost:<port>``, B's as ``http://127.0.0.1:<port>``:
browsers keep cookies per host, not per port, and both servers name their session cookie
``quarry_session``, so on one host ann's sign-in to B would replace zoe's session on A. A
hub and its upstream on different hosts, as in real use, keep them apart.
"""

from __future__ import annotations

import os
import re
import urllib.parse

import pytest
from playwright.sync_api import expect
from test_ui_tools import open_tools, quiet, server_card
from test_upstream_oauth import Pair, pair  # noqa: F401  (pair: a module fixture used here)
from ui_support import login, page_record

SLOW = 90_000  # ms: a debug build on busy cores, and B's discovery and token exchange


@pytest.fixture(scope="module", autouse=True)
def ui_assets():
    """ui_support's servers read the UI from ``$QUARRY_UI_TEST_DIR`` when it is set (pages
    being written), else use the embedded files; ``pair``'s servers come from conftest, so
    they get the same choice here, as their ``QUARRY_UI_DIR`` (autouse: before ``pair``)."""
    mp = pytest.MonkeyPatch()
    folder = os.environ.get("QUARRY_UI_TEST_DIR")
    if folder:
        mp.setenv("QUARRY_UI_DIR", folder)
    else:
        mp.delenv("QUARRY_UI_DIR", raising=False)
    yield
    mp.undo()


def hub_base(p: Pair) -> str:
    """A's address as the browser uses it: ``localhost`` (see the module's docstring)."""
    return f"http://localhost:{p.a.srv.port}"


def register(p: Pair, name: str) -> dict:
    body = {"name": name, "transport_type": "http", "config": p.b.srv.url("/mcp")}
    r = p.api("POST", "/api/v1/mcp/servers", json=body)
    assert r.status_code == 201, r.text
    return p.wait_status(r.json()["data"]["id"], "auth_required")


def consent_in(popup, p: Pair, base: str) -> None:
    """B's page in the window the card opened: ann signs in, picks ``acme`` and allows; B sends
    the window to A's callback (as test_upstream_oauth's ``consent_on_b`` does in a browser of its own)."""
    popup.locator("#login-token").fill(p.b.tok("ann"))
    popup.locator("form.login button[type=submit]").click()
    expect(popup.get_by_role("heading", level=1)).to_contain_text("Connect", timeout=30_000)
    form = popup.locator("form.oauth-consent")
    expect(form).to_be_visible()
    for box in form.locator("input[name=space]").all():
        label = box.locator("xpath=..").inner_text().strip()
        box.set_checked(label == "acme")
    callback = f"{base}/oauth/upstream/callback"
    with popup.expect_navigation(url=lambda u: u.startswith(callback), timeout=60_000):
        popup.get_by_role("button", name="Allow", exact=True).click()


def test_sign_in_and_out_from_the_tools_page(pair, ui_page_factory, axe_check, shot):
    p = pair
    pages = []
    try:
        sign_in_and_out(p, pages, ui_page_factory, axe_check, shot)
    finally:
        # Every request went to the two servers: ui_support counts only 127.0.0.1 as loopback,
        # and A is `localhost` here.
        for pg in pages:
            try:
                pg.goto("about:blank")  # no request after the filter
            except Exception:  # noqa: BLE001  (the browser may be gone after a failure)
                pass
            rec = page_record(pg)
            rec.requests[:] = [u for u in rec.requests if urllib.parse.urlsplit(u).hostname != "localhost"]


def sign_in_and_out(p: Pair, pages: list, ui_page_factory, axe_check, shot) -> None:
    base = hub_base(p)
    row = register(p, "remote-ui")
    sid = row["id"]
    assert row.get("oauth") is None, row

    # In Chinese: the badge, the button and the server's reason.
    zh = ui_page_factory(locale="zh-CN")
    pages.append(zh)
    login(zh, base, p.a.tok("zoe"))
    open_tools(zh, base)
    zh_card = server_card(zh, "remote-ui")
    expect(zh_card.get_by_test_id("server-status")).to_have_text(re.compile("^(需要登录|连接中…)$"))
    expect(zh_card.get_by_role("button", name="登录 remote-ui")).to_be_visible()
    detail = zh_card.get_by_test_id("server-oauth-detail")
    expect(detail).to_contain_text("需要登录：上游服务器要求 OAuth 登录")
    shot(zh, "tools-server-sign-in-required-zh")

    page = ui_page_factory()
    pages.append(page)
    login(page, base, p.a.tok("zoe"))
    open_tools(page, base)
    card = server_card(page, "remote-ui")
    status = card.get_by_test_id("server-status")
    # The upstream's connection retries now and then (`connecting` for a moment): wait for the rest.
    expect(status).to_have_attribute("data-status", "auth_required", timeout=SLOW)
    expect(status).to_have_text("Sign-in required")
    expect(card).to_contain_text("This server asks for a sign-in (OAuth)")
    # Not shown as a failure: the reason is in the sign-in part.
    expect(card.get_by_test_id("server-last-error")).to_be_hidden()
    sign_in = card.get_by_role("button", name="Sign in to remote-ui")
    expect(sign_in).to_be_visible()
    expect(sign_in).to_have_text("Sign in")
    expect(card.get_by_test_id("server-oauth")).to_be_hidden()
    quiet(page)
    axe_check(page, "tools-server-sign-in-required")
    shot(page, "tools-server-sign-in-required")

    # "Sign in": B's page opens in a new window; the card waits, with the link at hand.
    with page.context.expect_page(timeout=SLOW) as opened:
        sign_in.click()
    popup = opened.value
    link = card.get_by_test_id("server-oauth-link")
    expect(link).to_be_visible()
    expect(card.get_by_test_id("server-oauth-status")).to_contain_text("Finish signing in in the new window")
    href = link.get_attribute("href")
    assert href.startswith(p.b.srv.url("/oauth/authorize?")), href
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query))
    assert q["redirect_uri"] == f"{base}/oauth/upstream/callback", q
    assert q["state"].startswith(sid + "."), q
    opened_urls = [u for u in page_record(page).requests if u.startswith(p.b.srv.url("/oauth/authorize?"))]
    assert opened_urls, "the new window did not open the sign-in page"
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert p.server(sid)["oauth"]["state"] == "pending"
    popup.wait_for_load_state()

    consent_in(popup, p, base)
    expect(popup.get_by_role("heading", level=1)).to_have_text("Signed in")
    expect(popup.locator("main")).to_contain_text("signed in to the MCP server 'remote-ui'")
    expect(popup.get_by_role("link", name="Back to Quarry's tools")).to_have_attribute("href", "/#/tools")
    popup.close()

    # Back on the Tools page: the card found out by itself.
    expect(status).to_have_attribute("data-status", "ready", timeout=SLOW)
    expect(status).to_have_text("Connected")
    who = card.get_by_test_id("server-oauth")
    expect(who).to_contain_text(f"Signed in as zoe at {p.b.srv.base}")
    expect(who).to_contain_text("access token expires")
    expect(sign_in).to_be_hidden()
    expect(card.get_by_test_id("server-oauth-status")).to_be_hidden()
    expect(page.locator("#toasts")).to_contain_text("Signed in to remote-ui")
    row = p.server(sid)
    assert row["oauth"]["state"] == "signed_in" and row["oauth"]["user"] == "zoe", row["oauth"]
    assert row["tool_count"] > 0, row
    quiet(page)
    axe_check(page, "tools-server-signed-in")
    shot(page, "tools-server-signed-in")

    # The Chinese page, loaded again, says who signed in too; it is left as it is now.
    zh.reload()
    expect(zh.locator(".page-tools")).to_have_attribute("data-ready", "true")
    expect(zh_card.get_by_test_id("server-oauth")).to_contain_text(f"已以 zoe 身份登录 {p.b.srv.base}")
    expect(zh_card.get_by_test_id("server-oauth")).to_contain_text("访问令牌于")

    # "Sign out" asks first; cancelling changes nothing.
    sign_out = card.get_by_role("button", name="Sign out of remote-ui")
    sign_out.click()
    dialog = page.get_by_role("dialog", name="Please confirm")
    expect(dialog).to_contain_text("Sign out of “remote-ui”?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert p.server(sid)["oauth"]["state"] == "signed_in"
    sign_out.click()
    dialog.get_by_role("button", name="Sign out", exact=True).click()
    expect(dialog).to_have_count(0)
    expect(page.locator("#toasts")).to_contain_text("Signed out of remote-ui")
    expect(who).to_be_hidden()
    expect(card.get_by_role("button", name="Sign in to remote-ui")).to_be_visible(timeout=SLOW)
    expect(status).to_have_attribute("data-status", "auth_required", timeout=SLOW)
    expect(card.get_by_test_id("server-oauth-error")).to_be_hidden()
    assert p.server(sid).get("oauth") is None

    # The Chinese page still shows the sign-in that is gone: its "Sign out" meets the API's 404,
    # said beside the button in Chinese, and the card is read again.
    zh_card.get_by_role("button", name="退出 remote-ui 的登录").click()
    zh_dialog = zh.get_by_role("dialog", name="请确认")
    zh_dialog.get_by_role("button", name="退出登录", exact=True).click()
    error = zh_card.get_by_test_id("server-oauth-error")
    expect(error).to_have_text("“remote-ui”没有可清除的登录")
    expect(error).to_have_attribute("role", "alert")
    expect(zh_card.get_by_test_id("server-oauth")).to_be_hidden()
    expect(zh_card.get_by_role("button", name="登录 remote-ui")).to_be_visible(timeout=SLOW)
    expect(error).to_be_visible()
