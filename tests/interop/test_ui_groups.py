"""Groups of users and per-document readers in the web UI (issue 43 item 4) through the real
``quarry serve`` and a real Chromium (fixtures in ui_support.py); every change is checked against
the API itself (/api/v1/groups, the documents' ``readers``, the sources' reader mapping):

- the Access page's Groups tab, as the machine's owner: a bad name refused with the API's words,
  a group created, a member of the space picked and added, removed again, a group deleted behind
  a confirmation;
- the documents table: each document's readers indicator (everyone, admins only, the keys); an
  admin changes an uploaded document's readers in a dialog (a bad key refused with the API's
  words), and an upload through the page with the "readers" field;
- a folder source with a reader mapping: its synced documents say their source decides (no
  change offered), the source's page shows the mapping, saves a new one (a bad key refused with
  the API's words) and clears it;
- with ``--auth token``: a read-only session sees the groups and the indicators, no action;
- the Groups tab in Chinese, with the API's refusals (a bad name, a name in use) translated
  through i18n/server.json.

axe-core on the Groups tab, the readers dialog and the source's mapping; a screenshot of each.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from ui_support import login

SLOW = 120_000  # ms: conversions on a debug build on busy cores


def open_page(page, srv, path: str):
    page.goto(f"{srv.base}/{path}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()


def panel(page):
    return page.locator(".page-access [role=tabpanel]:not([hidden])")


def quiet(page) -> None:
    page.evaluate("() => document.querySelectorAll('#toasts .toast').forEach((t) => t.remove())")


def confirm(page, button: str) -> None:
    dlg = page.get_by_role("dialog", name="Please confirm")
    expect(dlg).to_be_visible()
    dlg.get_by_role("button", name=button, exact=True).click()
    expect(dlg).to_have_count(0)


def doc_row(page, name: str):
    return page.locator("[data-testid=doc-row]").filter(has=page.get_by_role("button", name=name, exact=True))


def groups_of(srv, token: str | None = None) -> dict[str, list[str]]:
    return {g["name"]: g["members"] for g in srv.api("GET", "/api/v1/groups", token=token)}


def api_error(srv, method: str, path: str, body) -> str:
    """The API's own words for a request it refuses (nothing changes)."""
    r = srv.http(method, path, body=body)
    assert 400 <= r.status < 500, (r.status, r.text)
    return r.json()["detail"]


# ---------------------------------------------------------------------------------------------
# Groups on the Access page


def test_groups_created_filled_emptied_and_deleted(ui_page, ui_module_server, axe_check, shot):
    srv, page = ui_module_server, ui_page
    srv.add_user("ann", role="viewer")
    srv.add_user("bob", role="editor")
    open_page(page, srv, "#/access?tab=groups")
    expect(page.get_by_role("tab", name="Groups", exact=True)).to_have_attribute("aria-selected", "true")
    p = panel(page)
    expect(p.get_by_text("This space has no groups yet")).to_be_visible()

    # A bad name: the API's own message, the name kept for fixing.
    detail = api_error(srv, "POST", "/api/v1/groups", {"name": "bad name!"})
    p.get_by_label("Name", exact=True).fill("bad name!")
    p.get_by_role("button", name="New group").click()
    expect(p.get_by_test_id("group-error")).to_have_text(detail)
    expect(p.get_by_label("Name", exact=True)).to_have_value("bad name!")
    assert groups_of(srv) == {}

    p.get_by_label("Name", exact=True).fill("hr")
    p.get_by_label("Description", exact=True).fill("People who read pay")
    p.get_by_role("button", name="New group").click()
    row = p.get_by_test_id("groups-table").locator("tr[data-group=hr]")
    expect(row).to_contain_text("group:hr")
    expect(row).to_contain_text("People who read pay")
    expect(row).to_contain_text("No members yet")
    assert groups_of(srv) == {"hr": []}

    # The picker offers the space's members; one added, then the other.
    pick = row.get_by_label("Member of the space to add to hr")
    pick.select_option("ann")
    row.get_by_role("button", name="Add").click()
    expect(row.locator("li[data-user=ann]")).to_be_visible()
    assert groups_of(srv) == {"hr": ["ann"]}
    expect(row.get_by_label("Member of the space to add to hr").locator("option[value=ann]")).to_have_count(0)
    row.get_by_label("Member of the space to add to hr").select_option("bob")
    row.get_by_role("button", name="Add").click()
    expect(row.locator("li[data-user=bob]")).to_be_visible()
    assert groups_of(srv) == {"hr": ["ann", "bob"]}
    quiet(page)
    axe_check(page, "access-groups")
    shot(page, "access-groups")

    row.get_by_role("button", name="Remove bob from hr").click()
    expect(row.locator("li[data-user=bob]")).to_have_count(0)
    assert groups_of(srv) == {"hr": ["ann"]}

    # A second group, deleted behind a confirmation.
    p.get_by_label("Name", exact=True).fill("temp")
    p.get_by_role("button", name="New group").click()
    expect(p.get_by_test_id("groups-table").locator("tr[data-group=temp]")).to_be_visible()
    p.get_by_role("button", name="Delete group temp").click()
    confirm(page, "Delete group")
    expect(p.get_by_test_id("groups-table").locator("tr[data-group=temp]")).to_have_count(0)
    assert groups_of(srv) == {"hr": ["ann"]}


# ---------------------------------------------------------------------------------------------
# Readers of documents


def test_document_readers_indicator_dialog_and_upload(ui_page, ui_module_server, tmp_path, axe_check, shot):
    srv, page = ui_module_server, ui_page
    if "hr" not in groups_of(srv):
        srv.api("POST", "/api/v1/groups", {"name": "hr"}, expect=201)
    kb = srv.create_kb("payroll")
    srv.upload(kb["id"], {"pay.md": "# Pay\nThe salary bands of the quokka team.\n", "menu.md": "# Menu\nSoup on Fridays.\n"})
    docs = {d["file_name"]: d for d in srv.wait_documents(kb["id"], 2)}
    assert "readers" not in docs["pay.md"] or docs["pay.md"]["readers"] is None, docs["pay.md"]

    open_page(page, srv, f"#/kb/{kb['id']}")
    pay = doc_row(page, "pay.md")
    expect(pay.get_by_test_id("doc-readers")).to_have_attribute("data-readers", "everyone")
    expect(pay.get_by_test_id("doc-readers")).to_have_text("Everyone")

    # The dialog: a bad key is refused in the API's words; then group:hr.
    docs_url = f"/api/v1/knowledge-bases/{kb['id']}/documents/{docs['pay.md']['id']}"
    detail = api_error(srv, "PATCH", docs_url, {"readers": ["hr"]})
    pay.get_by_role("button", name=re.compile(r"^Readers of pay\.md: Everyone")).click()
    dlg = page.get_by_role("dialog", name="Readers of “pay.md”")
    expect(dlg.get_by_label("Everyone")).to_be_checked()
    dlg.get_by_label("Reader keys").fill("hr")
    expect(dlg.get_by_label("These readers")).to_be_checked()
    dlg.get_by_role("button", name="Save").click()
    expect(dlg.get_by_test_id("readers-error")).to_have_text(detail)
    # A suggestion from the space's groups.
    dlg.get_by_label("Reader keys").fill("")
    dlg.get_by_role("button", name="Add group:hr").click()
    expect(dlg.get_by_label("Reader keys")).to_have_value("group:hr")
    quiet(page)
    axe_check(page, "kb-readers-dialog")
    dlg.get_by_role("button", name="Save").click()
    expect(dlg).to_have_count(0)
    expect(pay.get_by_test_id("doc-readers")).to_have_attribute("data-readers", "listed")
    expect(pay.get_by_test_id("doc-readers")).to_have_text("group:hr")
    got = {d["file_name"]: d for d in srv.documents(kb["id"])}
    assert got["pay.md"]["readers"] == ["group:hr"], got["pay.md"]
    assert got["menu.md"].get("readers") is None, got["menu.md"]

    # Admins only, then everyone again.
    pay.get_by_role("button", name=re.compile(r"^Readers of pay\.md")).click()
    dlg = page.get_by_role("dialog", name="Readers of “pay.md”")
    expect(dlg.get_by_label("Reader keys")).to_have_value("group:hr")
    dlg.get_by_label("Admins only").check()
    dlg.get_by_role("button", name="Save").click()
    expect(pay.get_by_test_id("doc-readers")).to_have_text("Admins only")
    assert {d["file_name"]: d for d in srv.documents(kb["id"])}["pay.md"]["readers"] == []
    quiet(page)
    shot(page, "kb-readers")
    pay.get_by_role("button", name=re.compile(r"^Readers of pay\.md")).click()
    dlg = page.get_by_role("dialog", name="Readers of “pay.md”")
    dlg.get_by_label("Everyone").check()
    dlg.get_by_role("button", name="Save").click()
    expect(pay.get_by_test_id("doc-readers")).to_have_text("Everyone")
    assert {d["file_name"]: d for d in srv.documents(kb["id"])}["pay.md"].get("readers") is None

    # An upload with readers.
    f = tmp_path / "bonus.md"
    f.write_text("# Bonus\nThe bonus of the wombat team.\n")
    page.get_by_label("Readers of the next uploads (optional)").fill("group:hr, user:ann")
    page.locator("[data-testid=kb-file-input]").set_input_files([str(f)])
    bonus = doc_row(page, "bonus.md")
    expect(bonus.get_by_test_id("doc-readers")).to_have_text("group:hr, user:ann", timeout=SLOW)
    got = {d["file_name"]: d for d in srv.documents(kb["id"])}
    assert got["bonus.md"]["readers"] == ["group:hr", "user:ann"], got["bonus.md"]


# ---------------------------------------------------------------------------------------------
# A source's reader mapping


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_source_mapping_shown_saved_and_cleared(ui_page, ui_module_server, tmp_path, axe_check, shot):
    srv, page = ui_module_server, ui_page
    kb = srv.create_kb("handbook-readers")
    folder = tmp_path / "handbook"
    write(folder, {"hr/pay.md": "# Pay\nBands of the ibis team.\n", "public/hello.md": "# Hello\nWelcome.\n"})
    mapping = {"rules": [{"paths": "hr/**", "readers": ["group:hr"]}, {"paths": "public/**", "readers": ["everyone"]}]}
    s = srv.api("POST", f"/api/v1/knowledge-bases/{kb['id']}/sources", {"kind": "folder", "path": str(folder), "readers": mapping}, expect=201)
    srv.api("POST", f"/api/v1/sources/{s['id']}/sync")
    docs = {d["file_name"]: d for d in srv.wait_documents(kb["id"], 2)}
    pay = next(d for name, d in docs.items() if name.endswith("pay.md"))
    assert pay.get("synced") is True and pay["readers"] == ["group:hr"], pay

    # The documents table: the indicator, "its source decides", no change offered.
    open_page(page, srv, f"#/kb/{kb['id']}")
    row = page.locator(f"[data-testid=doc-row][data-id='{pay['id']}']")
    expect(row.get_by_test_id("doc-readers")).to_have_text("group:hr")
    expect(row.get_by_test_id("doc-readers-synced")).to_have_text("Set by its source's reader mapping")
    expect(row.locator("[data-act=readers]")).to_have_count(0)

    # The source's page: the mapping, then a new one.
    open_page(page, srv, f"#/kb/{kb['id']}/sources/{s['id']}")
    form = page.get_by_test_id("readers-form")
    expect(form.get_by_test_id("readers-state")).to_have_text("2 rules")
    expect(page.locator(".src-summary [data-testid=readers-mapping]")).to_have_text("2 rules")
    expect(form.get_by_label("Paths of rule 1")).to_have_value("hr/**")
    expect(form.get_by_label("Readers of rule 2")).to_have_value("everyone")

    # A bad key: the API's words, nothing changed.
    bad = {"rules": [{"paths": "hr/**", "readers": ["hr"]}, {"paths": "public/**", "readers": ["everyone"]}], "codeowners": False}
    detail = api_error(srv, "PATCH", f"/api/v1/sources/{s['id']}", {"readers": bad})
    form.get_by_label("Readers of rule 1").fill("hr")
    form.get_by_role("button", name="Save readers").click()
    expect(form.get_by_test_id("readers-error")).to_have_text(detail)
    assert srv.api("GET", f"/api/v1/sources/{s['id']}")["readers"]["rules"][0]["readers"] == ["group:hr"]

    form.get_by_label("Readers of rule 1").fill("group:hr, user:ann")
    form.get_by_role("button", name="Remove rule 2").click()
    form.get_by_role("button", name="Add a rule").click()
    form.get_by_label("Paths of rule 2").fill("docs/**, notes/**")
    form.get_by_label("Readers of rule 2").fill("group:eng")
    form.get_by_label("Use the source's CODEOWNERS file").check()
    form.get_by_role("button", name="Save readers").click()
    form = page.get_by_test_id("readers-form")
    expect(form.get_by_test_id("readers-state")).to_have_text("2 rules · CODEOWNERS")
    got = srv.api("GET", f"/api/v1/sources/{s['id']}")["readers"]
    assert got["rules"] == [
        {"paths": "hr/**", "readers": ["group:hr", "user:ann"]},
        {"paths": "docs/**, notes/**", "readers": ["group:eng"]},
    ], got
    assert got.get("codeowners") is True, got
    quiet(page)
    axe_check(page, "source-readers")
    shot(page, "source-readers")

    form.get_by_test_id("readers-clear").click()
    confirm(page, "Clear the mapping")
    expect(page.get_by_test_id("readers-form").get_by_test_id("readers-state")).to_have_text("Everyone (no mapping)")
    assert srv.api("GET", f"/api/v1/sources/{s['id']}").get("readers") is None


# ---------------------------------------------------------------------------------------------
# A read-only session


def test_read_only_session_sees_groups_and_readers_without_actions(ui_page, ui_server_factory):
    srv = ui_server_factory("--auth", "token")
    srv.add_user("erin", role="owner")
    srv.add_user("ann", role="viewer")
    owner = srv.token("erin")
    srv.api("POST", "/api/v1/groups", {"name": "hr"}, token=owner, expect=201)
    srv.api("PUT", "/api/v1/groups/hr/members/ann", token=owner)
    kb = srv.create_kb("secrets", token=owner)
    srv.upload(kb["id"], {"pay.md": "# Pay\nBands.\n"}, token=owner)
    doc = srv.wait_documents(kb["id"], 1, token=owner)[0]
    srv.api("PATCH", f"/api/v1/knowledge-bases/{kb['id']}/documents/{doc['id']}", {"readers": ["group:hr"]}, token=owner)

    page = ui_page
    login(page, srv.base, srv.token("erin", "--read-only"))
    open_page(page, srv, "#/access?tab=groups")
    p = panel(page)
    expect(p.get_by_test_id("groups-why")).to_contain_text("read-only")
    expect(p.get_by_test_id("groups-table").locator("tr[data-group=hr]")).to_contain_text("ann")
    expect(p.get_by_role("button", name="New group")).to_have_count(0)
    expect(p.get_by_role("button", name="Delete group hr")).to_have_count(0)
    expect(p.get_by_role("button", name="Remove ann from hr")).to_have_count(0)

    open_page(page, srv, f"#/kb/{kb['id']}")
    row = doc_row(page, "pay.md")
    expect(row.get_by_test_id("doc-readers")).to_have_text("group:hr")
    expect(row.locator("[data-act=readers]")).to_have_count(0)
    expect(page.get_by_label("Readers of the next uploads (optional)")).to_have_count(0)


@pytest.mark.parametrize("lang", ["zh-CN"])
def test_groups_tab_in_chinese(ui_page_factory, ui_module_server, lang):
    page = ui_page_factory(locale=lang)
    open_page(page, ui_module_server, "#/access?tab=groups")
    expect(page.get_by_role("tab", name="用户组", exact=True)).to_have_attribute("aria-selected", "true")
    text = panel(page).inner_text()
    for english in ("Groups", "New group", "Members"):
        assert english not in text, (english, text[:500])
    # The API's refusals, in Chinese (i18n/server.json): a bad name, a name in use.
    p = panel(page)
    p.get_by_label("名称", exact=True).fill("bad name!")
    p.get_by_role("button", name="新建用户组").click()
    expect(p.get_by_test_id("group-error")).to_have_text(
        "无效的用户组名称“bad name!”：请使用字母、数字、'-'、'_' 或 '.'，并以字母或数字开头（最多 64 个字符）"
    )
    expect(p.get_by_label("名称", exact=True)).to_have_value("bad name!")
    ui_module_server.api("POST", "/api/v1/groups", {"name": "zh-taken"}, expect=201)
    p.get_by_label("名称", exact=True).fill("zh-taken")
    p.get_by_role("button", name="新建用户组").click()
    expect(p.get_by_test_id("group-error")).to_have_text("空间“default”中已有用户组“zh-taken”")
