"""Tool policies and the approvals inbox (issue 45) in the web UI (js/policies.js at
``#/policies``, js/approvals.js at ``#/approvals``) through the real ``quarry serve --auth token``
and a real Chromium (Playwright; fixtures in ui_support.py). Tool calls come from the official
MCP Python SDK in its default mode, through the hub, to a real upstream (server-everything over
stdio, as test_ui_tools.py registers it, here by bob: a registered server is its user's). One
space: ``ada`` (owner) signs in to the page and decides; ``bob`` (editor) is the agent whose
calls are held.

- a policy made on the Policies page (invalid JSON in "when" caught before sending, a bad
  predicate refused in the API's words beside the form, nothing typed lost) holds
  ``everything.echo``: bob's call is an error naming the approval; the inbox (and the nav
  badge) shows it with bob, the exact arguments, the digest and the policy; ada approves in
  the drawer; bob's retry with the same arguments runs once (the echo comes back), a second
  retry is held again (single use: the first approval reads ``used``), other arguments are a
  new approval; ada denies one with a reason and bob's retry says denied, with the reason; a
  request decided elsewhere meanwhile answers 409 in the page, which says so and reloads; a
  value under a secret-looking name shows as its length only;
- bob sees his own requests, and no Approve, Deny or policy controls;
- a ``deny`` policy with a condition (``when``) refuses matching calls naming the policy and
  lets others run; edited on the page (version 2) it refuses more; deleted, it refuses none;
- axe-core on the pages and the drawer, screenshots.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import everything_js, node, settled
from playwright.sync_api import expect
from ui_support import in_thread, login, start_ui_server

POLICY = "echo-needs-approval"
DENY_POLICY = "no-big-sums"
REASON = "not on a Friday"


# ---------------------------------------------------------------------------------------------
# The server, users and the upstream


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    srv = start_ui_server(quarry_bin, corpus, tmp_path_factory.mktemp("ui-approvals"), "--auth", "token", "--hub-allow-commands")
    try:
        srv.add_user("ada", "owner")
        srv.add_user("bob", "editor")
        ada, bob = srv.token("ada"), srv.token("bob")
        row = srv.api(
            "POST",
            "/api/v1/mcp/servers",
            {"name": "everything", "transport_type": "stdio", "config": f"{node()} {everything_js()}", "args": ["stdio"],
             "category": "testing"},
            token=bob,
            expect=201,
        )
        info = settled(srv, row, {"Authorization": f"Bearer {bob}"})
        assert info["status"] == "ready", info
        yield {"srv": srv, "ada": ada, "bob": bob}
    finally:
        srv.stop()


def call(srv, token: str, tool: str, args: dict) -> tuple[bool, str]:
    """One tool call through the hub with the official SDK (default mode): (ok, its text). A
    protocol error counts as not ok, with its message."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    url = srv.url(f"/api/mcp?servers=everything&token={token}")

    async def go():
        async with Client(url, read_timeout_seconds=60) as c:
            try:
                r = await c.call_tool(tool, args)
            except MCPError as e:
                return False, e.error.message
            text = "\n".join(c.text for c in r.content if c.type == "text")
            return r.is_error is not True, text

    return in_thread(go)


def items(data) -> list[dict]:
    """A list answer's items (`data` is the list, as `ok_list` answers)."""
    return data["items"] if isinstance(data, dict) else data


def approvals(srv, token: str, status: str | None = None) -> list[dict]:
    path = "/api/v1/approvals?limit=100" + (f"&status={status}" if status else "")
    return items(srv.api("GET", path, token=token))


def approval(srv, token: str, approval_id: str) -> dict:
    return srv.api("GET", f"/api/v1/approvals/{approval_id}", token=token)


def policies(srv, token: str) -> list[dict]:
    return items(srv.api("GET", "/api/v1/policies", token=token))


def api_detail(srv, token: str, method: str, path: str, body) -> str:
    """The API's own words for a request it refuses (400)."""
    r = srv.http(method, path, body=body, token=token)
    assert r.status == 400, (r.status, r.text)
    return r.json()["detail"]


def quiet(page) -> None:
    """Drops the toasts before an axe run or a screenshot."""
    page.evaluate("() => document.querySelectorAll('#toasts .toast').forEach((t) => t.remove())")


def open_page(page, srv, path: str) -> None:
    page.goto(f"{srv.base}/{path}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()


def approval_row(page, approval_id: str):
    return page.locator(f"[data-testid=approval-row][data-id='{approval_id}']")


def open_drawer(page, approval_id: str):
    approval_row(page, approval_id).get_by_test_id("approval-review").click()
    drawer = page.get_by_test_id("approval-drawer")
    expect(drawer).to_be_visible()
    return drawer


def held_approval(srv, ada: str, text: str, known: set[str]) -> dict:
    """The pending approval the refusal `text` names (one not in `known`)."""
    new = [a for a in approvals(srv, ada, "pending") if a["id"] not in known]
    assert len(new) == 1, (new, text)
    assert new[0]["id"] in text, f"the refusal does not name approval {new[0]['id']}: {text!r}"
    return new[0]


# ---------------------------------------------------------------------------------------------
# Approvals


def test_a_policy_holds_a_call_until_a_person_approves_it_once(ui_page_factory, world, axe_check, shot):
    srv, ada, bob = world["srv"], world["ada"], world["bob"]
    for p in policies(srv, ada):
        srv.api("DELETE", f"/api/v1/policies/{p['id']}", token=ada, expect=(200, 204))
    page = ui_page_factory()
    login(page, srv.base, ada)

    # --- The policy, made on the page
    open_page(page, srv, "#/policies")
    expect(page.get_by_role("heading", level=1, name="Policies")).to_be_visible()
    expect(page.get_by_test_id("policies-list")).to_contain_text("No policies")
    page.get_by_role("button", name="New policy").first.click()
    dlg = page.get_by_role("dialog", name="New policy")
    dlg.get_by_role("textbox", name="Name").fill(POLICY)
    expect(dlg.get_by_role("radio", name="The whole space")).to_be_checked()
    expect(dlg.get_by_role("radio", name="Require approval")).to_be_checked()
    expect(dlg.get_by_role("spinbutton", name="Approval valid for (seconds)")).to_have_value("3600")
    dlg.get_by_role("textbox", name="Tools").fill("everything.echo")
    when = dlg.get_by_role("textbox", name="When (JSON, optional)")
    # Not JSON: said before anything is sent.
    when.fill('{"argument": "message",')
    dlg.get_by_role("button", name="Create").click()
    error = dlg.get_by_test_id("policy-error")
    expect(error).to_contain_text("“When” is not valid JSON")
    expect(when).to_have_attribute("aria-invalid", "true")
    assert policies(srv, ada) == []
    # JSON the server refuses: its words beside the form, the form kept.
    bad = {"argument": "message", "operator": "resembles", "value": "x"}
    detail = api_detail(srv, ada, "POST", "/api/v1/policies", {
        "name": POLICY, "applies_to": {"space": True}, "tools": ["everything.echo"], "effect": "require_approval",
        "approval_ttl_secs": 3600, "when": bad,
    })
    when.fill(json.dumps(bad))
    dlg.get_by_role("button", name="Create").click()
    expect(error).to_have_text(detail)
    expect(dlg.get_by_role("textbox", name="Name")).to_have_value(POLICY)
    assert policies(srv, ada) == []
    quiet(page)
    axe_check(page, "policy-dialog")
    when.fill("")
    dlg.get_by_role("button", name="Create").click()
    expect(dlg).to_have_count(0)
    [pol] = policies(srv, ada)
    assert pol["name"] == POLICY and pol["tools"] == ["everything.echo"] and pol["effect"] == "require_approval", pol
    assert pol["applies_to"] == {"space": True} and pol["when"] is None and pol["approval_ttl_secs"] == 3600, pol
    prow = page.locator(f"[data-testid=policy-row][data-id='{pol['id']}']")
    expect(prow.get_by_test_id("policy-tools")).to_have_text("everything.echo")
    expect(prow.get_by_test_id("policy-effect")).to_have_text("Require approval")
    expect(prow.get_by_test_id("policy-applies")).to_have_text("Whole space")
    expect(prow.get_by_test_id("policy-version")).to_have_text(str(pol["version"]))

    # --- bob's call is held, naming the approval
    args = {"message": "hello approvals"}
    ok, text = call(srv, bob, "everything__echo", args)
    assert not ok, text
    first = held_approval(srv, ada, text, set())
    assert first["tool"] == "everything.echo" and first["arguments"] == args, first
    assert first["status"] == "pending" and first["requested_by"]["user"] == "bob", first
    assert [p["name"] for p in first["policies"]] == [POLICY], first

    # --- The inbox: the badge, the row, the drawer with the exact call
    open_page(page, srv, "#/approvals")
    expect(page.get_by_role("heading", level=1, name="Approvals")).to_be_visible()
    expect(page.get_by_test_id("nav-badge-approvals")).to_contain_text("1")
    expect(page.get_by_role("tab", name="Pending (1)")).to_have_attribute("aria-selected", "true")
    row = approval_row(page, first["id"])
    expect(row.get_by_test_id("approval-tool")).to_have_text("everything.echo")
    expect(row.get_by_test_id("approval-preview")).to_have_text(json.dumps(args, separators=(",", ":")))
    expect(row.get_by_test_id("approval-requester")).to_have_text("bob")
    expect(row.get_by_test_id("approval-status")).to_have_text("Pending")
    quiet(page)
    axe_check(page, "approvals-inbox")
    shot(page, "approvals-inbox")
    drawer = open_drawer(page, first["id"])
    expect(drawer.get_by_role("heading", name="everything.echo")).to_be_visible()
    assert json.loads(drawer.get_by_test_id("approval-arguments").inner_text()) == args
    expect(drawer.get_by_test_id("approval-arguments")).to_have_text(json.dumps(args, indent=2))
    expect(drawer.get_by_test_id("approval-digest")).to_have_text(first["args_digest"])
    expect(drawer.get_by_test_id("approval-policies")).to_contain_text(POLICY)
    expect(drawer.get_by_test_id("approval-requested-by")).to_contain_text("bob")
    axe_check(page, "approval-drawer")
    shot(page, "approval-drawer")
    drawer.get_by_role("button", name="Approve").click()
    expect(drawer.get_by_test_id("approval-status")).to_have_text("Approved")
    expect(drawer.get_by_test_id("approval-decided-by")).to_have_text("ada")
    expect(drawer.get_by_role("button", name="Approve")).to_have_count(0)
    # The row follows the server's answer.
    expect(row.get_by_test_id("approval-status")).to_have_text("Approved")
    assert approval(srv, ada, first["id"])["status"] == "approved"
    drawer.get_by_role("button", name="Close").first.click()
    expect(drawer).to_have_count(0)

    # --- The retry with the same arguments runs once; the next one is held again
    ok, text = call(srv, bob, "everything__echo", args)
    assert ok, text
    assert "hello approvals" in text, text
    assert approval(srv, ada, first["id"])["status"] == "used"
    ok, text = call(srv, bob, "everything__echo", args)
    assert not ok, text
    second = held_approval(srv, ada, text, {first["id"]})
    assert second["arguments"] == args and second["id"] != first["id"], second
    # Other arguments: a new approval of their own.
    other = {"message": "other words"}
    ok, text = call(srv, bob, "everything__echo", other)
    assert not ok, text
    third = held_approval(srv, ada, text, {first["id"], second["id"]})
    assert third["arguments"] == other, third

    # --- bob sees his requests, and cannot decide them
    bob_page = ui_page_factory()
    login(bob_page, srv.base, bob)
    open_page(bob_page, srv, "#/approvals")
    expect(bob_page.get_by_test_id("approvals-role-hint")).to_contain_text("the space's admins decide them")
    expect(approval_row(bob_page, third["id"])).to_be_visible()
    bob_drawer = open_drawer(bob_page, third["id"])
    expect(bob_drawer.get_by_test_id("approval-no-decide")).to_have_text("Only the space's admins decide requests.")
    expect(bob_drawer.get_by_role("button", name="Approve")).to_have_count(0)
    expect(bob_drawer.get_by_role("button", name="Deny")).to_have_count(0)
    open_page(bob_page, srv, "#/policies")
    expect(bob_page.get_by_test_id("policies-role-hint")).to_contain_text("Only the space's admins")
    expect(bob_page.get_by_role("button", name="New policy")).to_have_count(0)
    expect(bob_page.get_by_role("button", name=re.compile("^Edit"))).to_have_count(0)

    # --- The inbox polls: both new requests appear without a reload; deny one with a reason
    expect(approval_row(page, second["id"])).to_be_visible(timeout=20_000)
    expect(approval_row(page, third["id"])).to_be_visible(timeout=20_000)
    expect(page.get_by_test_id("nav-badge-approvals")).to_contain_text("2", timeout=20_000)
    drawer = open_drawer(page, third["id"])
    assert json.loads(drawer.get_by_test_id("approval-arguments").inner_text()) == other
    drawer.get_by_role("button", name="Deny", exact=True).click()
    drawer.get_by_role("textbox", name="Reason (optional)").fill(REASON)
    axe_check(page, "approval-deny")
    drawer.get_by_role("button", name="Deny the call").click()
    expect(drawer.get_by_test_id("approval-status")).to_have_text("Denied")
    expect(drawer.get_by_test_id("approval-reason")).to_have_text(REASON)
    expect(approval_row(page, third["id"]).get_by_test_id("approval-status")).to_have_text("Denied")
    denied = approval(srv, ada, third["id"])
    assert denied["status"] == "denied" and denied["reason"] == REASON and denied["decided_by"] == "ada", denied
    drawer.get_by_role("button", name="Close").first.click()
    ok, text = call(srv, bob, "everything__echo", other)
    assert not ok, text
    assert "denied" in text.lower() and REASON in text, text

    # --- Decided elsewhere meanwhile: the page's Approve gets 409, says so and reloads
    drawer = open_drawer(page, second["id"])
    r = srv.http("POST", f"/api/v1/approvals/{second['id']}/decision", body={"decision": "deny"}, token=ada)
    assert r.status == 200, r.text
    r = srv.http("POST", f"/api/v1/approvals/{second['id']}/decision", body={"decision": "approve"}, token=ada)
    assert r.status == 409 and r.json()["error_code"] == "CONFLICT", r.text
    conflict = r.json()["detail"]
    drawer.get_by_role("button", name="Approve").click()
    expect(drawer.get_by_test_id("approval-error")).to_have_text(f"Already decided or expired: {conflict}")
    expect(drawer.get_by_test_id("approval-status")).to_have_text("Denied")
    expect(drawer.get_by_role("button", name="Approve")).to_have_count(0)
    drawer.get_by_role("button", name="Close").first.click()

    # A value under a secret-looking name: the approver sees its length, never the value.
    secret = "sk-live-0123456789"
    ok, text = call(srv, bob, "everything__echo", {"message": "with a key", "api_key": secret})
    assert not ok, text
    fourth = held_approval(srv, ada, text, {first["id"], second["id"], third["id"]})
    assert fourth["arguments"] == {"message": "with a key", "api_key": f"[hidden: {len(secret)} chars]"}, fourth
    drawer = open_drawer(page, fourth["id"])
    assert json.loads(drawer.get_by_test_id("approval-arguments").inner_text()) == fourth["arguments"]
    expect(drawer.get_by_test_id("approval-hidden-hint")).to_contain_text("show only their length")
    assert secret not in page.content()
    drawer.get_by_role("button", name="Deny", exact=True).click()
    drawer.get_by_role("button", name="Deny the call").click()
    expect(drawer.get_by_test_id("approval-status")).to_have_text("Denied")
    expect(drawer.get_by_test_id("approval-reason")).to_have_count(0)
    drawer.get_by_role("button", name="Close").first.click()

    # Nothing pending: the badge goes; the Used tab lists the approval that ran.
    expect(page.get_by_test_id("nav-badge-approvals")).to_have_count(0, timeout=20_000)
    page.get_by_role("tab", name="Used").click()
    expect(approval_row(page, first["id"]).get_by_test_id("approval-status")).to_have_text("Used")
    expect(page).to_have_url(re.compile(r"#/approvals\?status=used$"))
    quiet(page)
    axe_check(page, "approvals-used")


# ---------------------------------------------------------------------------------------------
# Deny policies


def test_a_deny_policy_refuses_by_name_and_follows_edits_and_deletion(ui_page, world, axe_check, shot):
    srv, ada, bob = world["srv"], world["ada"], world["bob"]
    for p in policies(srv, ada):
        srv.api("DELETE", f"/api/v1/policies/{p['id']}", token=ada, expect=(200, 204))
    page = ui_page
    login(page, srv.base, ada)
    open_page(page, srv, "#/policies")
    page.get_by_role("button", name="New policy").first.click()
    dlg = page.get_by_role("dialog", name="New policy")
    dlg.get_by_role("textbox", name="Name").fill(DENY_POLICY)
    dlg.get_by_role("textbox", name="Tools").fill("everything.get-sum")
    dlg.get_by_text("Deny", exact=True).click()
    expect(dlg.get_by_role("radio", name="Deny")).to_be_checked()
    # The approval's lifetime means nothing for a refusal: not asked.
    expect(dlg.get_by_role("spinbutton", name="Approval valid for (seconds)")).to_be_hidden()
    dlg.get_by_role("textbox", name="When (JSON, optional)").fill('{"argument": "a", "operator": "gt", "value": 100}')
    dlg.get_by_role("button", name="Create").click()
    expect(dlg).to_have_count(0)
    [pol] = policies(srv, ada)
    assert pol["effect"] == "deny" and pol["when"] == {"argument": "a", "operator": "gt", "value": 100}, pol
    row = page.locator(f"[data-testid=policy-row][data-id='{pol['id']}']")
    expect(row.get_by_test_id("policy-effect")).to_have_text("Deny")
    expect(row.get_by_test_id("policy-when")).to_have_text('a gt 100')

    ok, text = call(srv, bob, "everything__get-sum", {"a": 500, "b": 1})
    assert not ok and DENY_POLICY in text, text
    ok, text = call(srv, bob, "everything__get-sum", {"a": 2, "b": 3})
    assert ok and "5" in text, text
    # A refusal is not a request: nothing waits in the inbox.
    assert not [a for a in approvals(srv, ada) if a["tool"] == "everything.get-sum"]

    # Edited: a wider condition, version 2.
    row.get_by_role("button", name=f"Edit {DENY_POLICY}").click()
    dlg = page.get_by_role("dialog", name=f"Edit policy {DENY_POLICY}")
    when = dlg.get_by_role("textbox", name="When (JSON, optional)")
    assert json.loads(when.input_value()) == pol["when"]
    expect(dlg.get_by_role("textbox", name="Tools")).to_have_value("everything.get-sum")
    expect(dlg.get_by_role("radio", name="Deny")).to_be_checked()
    when.fill('{"argument": "a", "operator": "gt", "value": 1}')
    quiet(page)
    axe_check(page, "policy-edit")
    dlg.get_by_role("button", name="Save").click()
    expect(dlg).to_have_count(0)
    [pol2] = policies(srv, ada)
    assert pol2["version"] == pol["version"] + 1 and pol2["when"]["value"] == 1, pol2
    expect(row.get_by_test_id("policy-version")).to_have_text(str(pol2["version"]))
    expect(row.get_by_test_id("policy-when")).to_have_text("a gt 1")
    ok, text = call(srv, bob, "everything__get-sum", {"a": 2, "b": 3})
    assert not ok and DENY_POLICY in text, text
    quiet(page)
    axe_check(page, "policies-list")
    shot(page, "policies-list")

    # Deleted: the call runs again.
    row.get_by_role("button", name=f"Delete {DENY_POLICY}").click()
    confirm = page.get_by_role("dialog", name="Please confirm")
    expect(confirm).to_contain_text(DENY_POLICY)
    confirm.get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0)
    expect(page.get_by_test_id("policies-list")).to_contain_text("No policies")
    assert policies(srv, ada) == []
    ok, text = call(srv, bob, "everything__get-sum", {"a": 2, "b": 3})
    assert ok and "5" in text, text
