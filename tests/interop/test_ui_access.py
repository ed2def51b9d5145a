"""The Access page (#/access, crates/quarry-ui/assets/js/access.js) in a real Chromium against the
real ``quarry serve`` (fixtures in ui_support.py). The page drives /api/v1/spaces, /api/v1/users
and /api/v1/tokens (docs/access-api.md), and every change is checked against the API itself:

- local (open) mode, as the machine's owner: add a user, create a space, add the user as an
  editor, change it to a viewer, remove it, delete the space;
- tokens: create one with a label and an expiry. Its secret is shown once, with a copy button
  and a warning, and is stored nowhere (not in the page after the dialog, not in
  localStorage). The token then works against the API, the list shows its label, expiry and
  last use, and once revoked the API refuses it (401);
- with ``--auth token``: a user signed in through the login form sees only its token's spaces,
  no Users tab, and can make a token for itself;
- axe-core on each state, screenshots, and the page in Chinese.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from playwright.sync_api import expect
from ui_support import http, login

TOKEN_RE = re.compile(r"^qk_[0-9a-f]{64}$")


def open_access(page, base: str, tab: str | None = None) -> None:
    page.goto(f"{base}/#/access" + (f"?tab={tab}" if tab else ""))
    expect(page.locator(".page-access")).to_have_attribute("data-ready", "true")


def tab(page, name: str):
    return page.get_by_role("tab", name=name, exact=True)


def panel(page):
    """The visible tab panel."""
    return page.locator(".page-access [role=tabpanel]:not([hidden])")


def confirm(page, button: str) -> None:
    dlg = page.get_by_role("dialog", name="Please confirm")
    expect(dlg).to_be_visible()
    dlg.get_by_role("button", name=button, exact=True).click()
    expect(dlg).to_have_count(0)


def quiet(page) -> None:
    """Drops the toasts before an axe run. A success toast in the *system* dark scheme is white
    on light green (app.css darkens its text only under data-theme="dark"): that is the shell's
    to fix, and it would fail every page's check, not this page's."""
    page.evaluate("() => document.querySelectorAll('#toasts .toast').forEach((t) => t.remove())")


def members_of(srv, space: str) -> dict[str, str]:
    return {m["user"]: m["role"] for m in srv.api("GET", f"/api/v1/spaces/{space}/members")}


# ---------------------------------------------------------------------------------------------
# Local (open) mode: the machine's owner


def test_owner_manages_users_spaces_and_members(ui_page, ui_module_server, axe_check, shot):
    srv, page = ui_module_server, ui_page
    open_access(page, srv.base)
    expect(page.get_by_role("heading", level=1, name="Access")).to_be_visible()
    for name in ("Spaces", "Members", "Tokens", "Users"):
        expect(tab(page, name)).to_be_visible()
    expect(page.get_by_test_id("spaces-table").locator("tr[data-space=default]")).to_be_visible()
    quiet(page)
    axe_check(page, "access-spaces-open")

    # A user.
    tab(page, "Users").click()
    users = panel(page)
    users.get_by_label("Name").fill("alice")
    users.get_by_role("button", name="Add user").click()
    expect(page.get_by_test_id("users-table").locator("tr[data-user=alice]")).to_be_visible()
    assert "alice" in {u["name"] for u in srv.api("GET", "/api/v1/users")}
    # A bad name: the server's reason, shown in the form.
    users.get_by_label("Name").fill("Not OK")
    users.get_by_role("button", name="Add user").click()
    expect(users.get_by_role("alert")).to_contain_text("lowercase letters")
    quiet(page)
    axe_check(page, "access-users")

    # A space, through its dialog.
    tab(page, "Spaces").click()
    panel(page).get_by_role("button", name="New space").click()
    dlg = page.get_by_role("dialog", name="New space")
    dlg.get_by_label("Name").fill("research")
    dlg.get_by_label("Description").fill("Lab notes")
    quiet(page)
    axe_check(page, "access-space-dialog")
    dlg.get_by_role("button", name="Create").click()
    expect(dlg).to_have_count(0)
    row = page.get_by_test_id("spaces-table").locator("tr[data-space=research]")
    expect(row).to_contain_text("Lab notes")
    expect(row).to_contain_text("Owner")
    assert "research" in {s["name"] for s in srv.api("GET", "/api/v1/spaces")}
    # The same name again: the server's 409, in the dialog.
    panel(page).get_by_role("button", name="New space").click()
    dlg = page.get_by_role("dialog", name="New space")
    dlg.get_by_label("Name").fill("research")
    dlg.get_by_role("button", name="Create").click()
    expect(dlg.get_by_role("alert")).to_contain_text("already exists")
    dlg.get_by_role("button", name="Cancel").click()
    expect(dlg).to_have_count(0)

    # Members of the new space: add alice as an editor, make her a viewer, remove her.
    row.get_by_role("button", name="Members of research").click()
    members = panel(page)
    expect(members.get_by_label("Space", exact=True)).to_have_value(srv.api("GET", "/api/v1/spaces/research")["id"])
    expect(members).to_contain_text("no members yet")
    members.get_by_label("User", exact=True).fill("alice")
    members.get_by_label("Role", exact=True).select_option("editor")
    members.get_by_role("button", name="Add member").click()
    alice = page.get_by_test_id("members-table").locator("tr[data-member=alice]")
    expect(alice.get_by_label("Role of alice")).to_have_value("editor")
    assert members_of(srv, "research") == {"alice": "editor"}
    # An unknown user: the server's 404.
    members.get_by_label("User", exact=True).fill("nobody")
    members.get_by_role("button", name="Add member").click()
    expect(members.get_by_role("alert")).to_contain_text("user 'nobody' not found")
    quiet(page)
    axe_check(page, "access-members")
    shot(page, "access")

    alice.get_by_label("Role of alice").select_option("viewer")
    expect(page.locator("#toasts")).to_contain_text("alice is now Viewer")
    expect(page.get_by_test_id("members-table").locator("tr[data-member=alice]").get_by_label("Role of alice")).to_have_value("viewer")
    assert members_of(srv, "research") == {"alice": "viewer"}

    page.get_by_role("button", name="Remove alice").click()
    confirm(page, "Remove")
    expect(page.get_by_test_id("members-table")).to_have_count(0)
    expect(panel(page)).to_contain_text("no members yet")
    assert members_of(srv, "research") == {}

    # Delete the space (danger confirm); the default space offers no delete button.
    tab(page, "Spaces").click()
    expect(page.get_by_role("button", name="Delete space default")).to_have_count(0)
    page.get_by_role("button", name="Delete space research").click()
    dlg = page.get_by_role("dialog", name="Please confirm")
    expect(dlg).to_contain_text("cannot be undone")
    quiet(page)
    axe_check(page, "access-delete-confirm")
    dlg.get_by_role("button", name="Delete space").click()
    expect(page.get_by_test_id("spaces-table").locator("tr[data-space=research]")).to_have_count(0)
    assert "research" not in {s["name"] for s in srv.api("GET", "/api/v1/spaces")}


def test_token_is_shown_once_works_and_is_revoked(ui_page_factory, ui_module_server, axe_check):
    srv = ui_module_server
    srv.add_user("bob", role="editor")
    page = ui_page_factory(permissions=["clipboard-read", "clipboard-write"], base_url=srv.base)
    open_access(page, srv.base, "tokens")
    expect(tab(page, "Tokens")).to_have_attribute("aria-selected", "true")
    panel(page).get_by_role("button", name="New token").click()
    dlg = page.get_by_role("dialog", name="New token")
    dlg.get_by_label("User", exact=True).select_option("bob")
    dlg.get_by_label("Label", exact=True).fill("ci bot")
    dlg.get_by_label("Expires", exact=True).select_option("7")
    quiet(page)
    axe_check(page, "access-token-dialog")
    before = time.time()
    dlg.get_by_role("button", name="Create").click()

    # Shown once: the secret, a warning, a copy button.
    secret_box = dlg.get_by_test_id("token-secret")
    expect(secret_box).to_have_value(TOKEN_RE)
    secret = secret_box.input_value()
    expect(dlg.get_by_role("alert")).to_contain_text("You won't see it again")
    copy = dlg.get_by_role("button", name="Copy token")
    expect(copy).to_be_visible()
    copy.click()
    expect(page.locator("#toasts")).to_contain_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == secret
    quiet(page)
    axe_check(page, "access-token-secret")
    dlg.get_by_role("button", name="I have copied it").click()
    expect(dlg).to_have_count(0)
    # Nowhere else: not in the page, not in storage.
    assert secret not in page.content()
    storage = page.evaluate("() => JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})")
    assert secret not in storage and secret[3:] not in storage

    # The API side: bob's token, 7 days, and it works.
    listed = [t for t in srv.api("GET", "/api/v1/tokens") if t["label"] == "ci bot"]
    assert len(listed) == 1 and listed[0]["user"] == "bob" and not listed[0]["read_only"], listed
    tok = listed[0]
    assert abs(tok["expires_at"] / 1000 - (before + 7 * 86400)) < 120, tok
    assert secret.startswith(tok["prefix"])
    r = http("GET", srv.url("/api/v1/knowledge-bases"), token=secret)
    assert r.status == 200, r.text

    # The list: label, prefix, expiry, and (after that use) the last use.
    page.reload()
    expect(page.locator(".page-access")).to_have_attribute("data-ready", "true")
    row = page.get_by_test_id("tokens-table").locator(f"tr[data-token='{tok['id']}']")
    expect(row).to_contain_text("ci bot")
    expect(row).to_contain_text(f"{tok['prefix']}…")
    expect(row).to_contain_text("bob")
    expect(row).to_contain_text("Active")
    expect(row.get_by_test_id("token-expires")).not_to_have_text("Never")
    expect(row.get_by_test_id("token-last-used")).not_to_have_text("Not yet")
    assert secret not in page.content()

    # Revoke it: the API refuses it from then on.
    row.get_by_role("button", name="Revoke token ci bot").click()
    confirm(page, "Revoke")
    expect(row).to_have_attribute("data-status", "revoked")
    expect(row).to_contain_text("Revoked")
    expect(row.get_by_role("button", name="Revoke token ci bot")).to_have_count(0)
    r = http("GET", srv.url("/api/v1/knowledge-bases"), token=secret)
    assert r.status == 401 and r.json()["error_code"] == "TOKEN_REVOKED", r.text


def test_token_dialog_needs_a_member_and_a_future_date(ui_page, ui_module_server):
    srv, page = ui_module_server, ui_page
    srv.cli("user", "add", "drifter")  # in no space
    open_access(page, srv.base, "tokens")
    panel(page).get_by_role("button", name="New token").click()
    dlg = page.get_by_role("dialog", name="New token")
    dlg.get_by_label("User", exact=True).select_option("drifter")
    expect(dlg).to_contain_text("not a member of any space")
    expect(dlg.get_by_role("button", name="Create")).to_be_disabled()
    dlg.get_by_label("User", exact=True).select_option("bob")
    dlg.get_by_label("Expires", exact=True).select_option("date")
    date = dlg.get_by_label("Expiry date")
    expect(date).to_be_visible()
    date.fill("2099-12-31")
    dlg.get_by_label("Read-only").check()
    dlg.get_by_label("Label", exact=True).fill("far future")
    dlg.get_by_role("button", name="Create").click()
    expect(dlg.get_by_test_id("token-secret")).to_have_value(TOKEN_RE)
    dlg.get_by_role("button", name="Close").click()
    tok = next(t for t in srv.api("GET", "/api/v1/tokens") if t["label"] == "far future")
    assert tok["read_only"] is True
    assert time.gmtime(tok["expires_at"] / 1000)[:3] in ((2099, 12, 31), (2100, 1, 1)), tok


# ---------------------------------------------------------------------------------------------
# --auth token: a user signed in through the UI


def test_token_user_sees_only_its_spaces(ui_page, ui_server_factory, axe_check, shot):
    srv = ui_server_factory("--auth", "token")
    for space in ("alpha", "beta"):
        srv.cli("space", "create", space)
    srv.cli("user", "add", "carol")
    srv.cli("user", "add", "dave")
    srv.cli("space", "grant", "alpha", "carol", "--role", "admin")
    srv.cli("space", "grant", "alpha", "dave", "--role", "viewer")
    srv.cli("space", "grant", "beta", "carol", "--role", "owner")
    srv.cli("space", "grant", "beta", "dave", "--role", "owner")
    carol = srv.token_info("carol", "--spaces", "alpha", "--label", "carol laptop")
    page = ui_page
    login(page, srv.base, carol["token"])
    open_access(page, srv.base)
    expect(page.locator(".access-intro")).to_contain_text("Signed in as carol")
    rows = page.get_by_test_id("spaces-table").locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-space", "alpha")
    expect(rows.first).to_contain_text("Admin")
    # No Users tab, no delete for an admin; beta (a member, but not in the token) is absent.
    expect(tab(page, "Users")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete space alpha")).to_have_count(0)
    expect(page.get_by_text("beta")).to_have_count(0)
    quiet(page)
    axe_check(page, "access-spaces-user")

    # Members: an admin manages viewers but not the owner role.
    tab(page, "Members").click()
    members = panel(page)
    expect(members.get_by_test_id("members-why")).to_contain_text("only owners can grant")
    expect(members.get_by_label("Role", exact=True).locator("option[value=owner]")).to_have_count(0)
    dave = page.get_by_test_id("members-table").locator("tr[data-member=dave]")
    dave.get_by_label("Role of dave").select_option("editor")
    expect(page.locator("#toasts")).to_contain_text("dave is now Editor")
    assert {m["user"]: m["role"] for m in srv.api("GET", "/api/v1/spaces/alpha/members", token=carol["token"])} == {
        "carol": "admin",
        "dave": "editor",
    }

    # Tokens: carol's own, this session's marked; a new one for herself (alpha).
    tab(page, "Tokens").click()
    row = page.get_by_test_id("tokens-table").locator(f"tr[data-token='{carol['id']}']")
    expect(row).to_contain_text("this session")
    expect(row).to_contain_text("alpha")
    panel(page).get_by_role("button", name="New token").click()
    dlg = page.get_by_role("dialog", name="New token")
    expect(dlg.get_by_label("User", exact=True)).to_have_count(0)
    dlg.get_by_label("Label", exact=True).fill("agent")
    dlg.get_by_label("Expires", exact=True).select_option("never")
    dlg.get_by_role("button", name="Create").click()
    secret = dlg.get_by_test_id("token-secret").input_value()
    assert TOKEN_RE.match(secret)
    dlg.get_by_role("button", name="I have copied it").click()
    r = http("GET", srv.url("/api/v1/spaces"), token=secret)
    assert r.status == 200 and [s["name"] for s in r.json()["data"]] == ["alpha"], r.text
    expect(page.get_by_test_id("tokens-table").locator("tr", has_text="agent")).to_contain_text("Never")
    quiet(page)
    axe_check(page, "access-tokens-user")
    shot(page, "access-user")
    # The API agrees: users are not for her.
    assert http("GET", srv.url("/api/v1/users"), token=carol["token"]).status == 403


def test_read_only_session_hides_changes(ui_page, ui_server_factory):
    srv = ui_server_factory("--auth", "token")
    srv.add_user("erin", role="owner")
    page = ui_page
    login(page, srv.base, srv.token("erin", "--read-only"))
    open_access(page, srv.base)
    expect(page.locator(".access-intro")).to_contain_text("read-only")
    expect(page.get_by_role("button", name="New space")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete space default")).to_have_count(0)
    tab(page, "Members").click()
    expect(panel(page).get_by_test_id("members-why")).to_contain_text("read-only")
    expect(panel(page).get_by_role("button", name="Add member")).to_have_count(0)
    tab(page, "Tokens").click()
    expect(panel(page).get_by_role("button", name="New token")).to_have_count(0)


# ---------------------------------------------------------------------------------------------
# Chinese


def test_access_page_in_chinese(ui_page_factory, ui_module_server, axe_check):
    page = ui_page_factory(locale="zh-CN")
    open_access(page, ui_module_server.base)
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.get_by_role("heading", level=1, name="访问控制")).to_be_visible()
    for name in ("空间", "成员", "令牌", "用户"):
        expect(tab(page, name)).to_be_visible()
    expect(page.get_by_role("button", name="新建空间")).to_be_visible()
    expect(page.get_by_test_id("spaces-table")).to_contain_text("所有者")
    tab(page, "令牌").click()
    expect(panel(page).get_by_role("button", name="新建令牌")).to_be_visible()
    quiet(page)
    axe_check(page, "access-zh")
    # No English left in the page's own text.
    text = page.locator(".page-access").inner_text()
    for english in ("Spaces", "Members", "Tokens", "New token", "Your role"):
        assert english not in text, (english, text[:500])
    assert json.loads(page.evaluate("() => JSON.stringify(localStorage)")).get("quarry.token") is None


# ---------------------------------------------------------------------------------------------
# Governance (issue 27): a token's tool scope from the dialog, and the audit log tab.


def test_tool_scope_in_the_dialog_and_the_audit_tab(ui_page, ui_module_server, axe_check):
    srv, page = ui_module_server, ui_page
    srv.add_user("erin", role="editor")
    open_access(page, srv.base, "tokens")
    panel(page).get_by_role("button", name="New token").click()
    dlg = page.get_by_role("dialog", name="New token")
    dlg.get_by_label("User", exact=True).select_option("erin")
    dlg.get_by_label("Label", exact=True).fill("knowledge tools only")
    dlg.get_by_label("Tools", exact=True).fill("knowledge, nosuch")
    dlg.get_by_role("button", name="Create").click()
    # A name the catalog lacks is refused in the dialog, with the server's words.
    expect(dlg.get_by_role("alert")).to_contain_text("unknown package or tool 'nosuch'")
    dlg.get_by_label("Tools", exact=True).fill("knowledge")
    dlg.get_by_role("button", name="Create").click()
    expect(dlg.get_by_test_id("token-secret")).to_have_value(TOKEN_RE)
    dlg.get_by_role("button", name="I have copied it").click()
    tok = next(t for t in srv.api("GET", "/api/v1/tokens") if t["label"] == "knowledge tools only")
    assert tok["tools"] == ["knowledge"], tok
    row = page.get_by_test_id("tokens-table").locator(f"tr[data-token='{tok['id']}']")
    expect(row.get_by_test_id("token-tools")).to_have_text("Tools: knowledge")

    # The audit tab: the token's creation (and the refused one) are there, newest first.
    open_access(page, srv.base, "audit")
    expect(tab(page, "Audit log")).to_have_attribute("aria-selected", "true")
    table = page.get_by_test_id("audit-table")
    writes = table.locator("tr[data-action='write']")
    expect(writes.first).to_contain_text("POST /api/v1/tokens")
    expect(table.locator("tr[data-action='write'][data-outcome='error']").first).to_contain_text("POST /api/v1/tokens")
    panel(page).get_by_label("Outcome", exact=True).select_option("error")
    expect(table.locator("tr[data-outcome='ok']")).to_have_count(0)
    expect(table.locator("tr[data-outcome='error']").first).to_be_visible()
    quiet(page)
    axe_check(page, "access-audit")
    # Nothing secret in the log: no token, not even a prefix.
    assert "qk_" not in table.inner_text()
