"""The web UI's wiki view (issue 68 item 8, js/wiki.js) through the real `quarry serve` and a
real Chromium (Playwright; fixtures in ui_support.py).

A knowledge base gets three documents synced from a folder and three pages written over REST,
one citing a passage of launch.md that is then changed in the folder and synced again (an
upload of the same name would be another document, "launch (2).md"), so that page turns
stale. In the browser:

- the index (`#/kb/<id>/wiki`, linked from the knowledge base's page): the pages with their
  type, status and the stale badge on exactly the stale one; the type and tag filters; paging
  with the API's `next` ("More pages"); the lint's findings (kind, page, detail) as the API
  gives them;
- a page (`#/kb/<id>/wiki/<slug>`): its Markdown (HTML in it shown as text), the stale notice
  with the passage's text when cited and now, its sources with their state and text now, a
  source's link opening the document's preview drawer with the cited chunk marked, links
  and backlinks, `[[slug]]` and `[[slug|label]]` links leading to those pages;
- editing in place (a PUT with `base_version`): saved, the view shows the new text; the
  history lists both versions and the line diff shows the added line and the removed one; a
  write over REST in between makes the next save a 409: the API's message shown and every
  typed text kept;
- a read-only token sees the wiki but no edit control; zh-CN strings; axe clean in light and
  dark; no sideways scroll at phone width; screenshots (light, dark, phone).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect
from ui_support import PHONE, login

LAUNCH = (
    "# Launch plan\n\nThe launch plan covers the spring release of the harbour app.\n\n"
    "## Date\n\nThe launch is on 4 May, at the harbour office.\nPress is invited for ten o'clock.\n\n"
    "## Risks\n\nThe app store review may take a week.\n"
)
BUDGET = "# Budget\n\nThe budget for the release is 40,000 EUR.\nIt was approved in March.\n"
TEAM = "# Team\n\nAnn leads the release; Bob runs the support desk.\n"

LAUNCH_BODY = (
    "## When\n\nThe launch is on **4 May**, at the harbour office. It is paid from [[budget]].\n\n"
    "Press comes at ten. <script>window.pwned = 1</script> <b>not bold</b>\n"
)
BUDGET_BODY = "The release has 40,000 EUR, approved in March.\n\nSee [[launch|the launch plan]] for the date.\n"
TEAM_BODY = "Ann leads the release; Bob runs support. Their rota: [[rota]].\n"


def open_page(page, srv, path: str):
    page.goto(f"{srv.base}/{path}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()


def quiet(page):
    """Waits for toasts to fade (axe looks at the page itself)."""
    expect(page.locator("#toasts .toast")).to_have_count(0, timeout=15_000)


def no_sideways_scroll(page):
    width = page.evaluate("document.documentElement.scrollWidth")
    view = page.evaluate("window.innerWidth")
    assert width <= view + 1, f"the page scrolls sideways on a phone: {width} > {view}"


def write_page(srv, kb_id: str, slug: str, body: dict, token: str | None = None, expect_status=(200, 201)) -> dict:
    return srv.api("PUT", f"/api/v1/knowledge-bases/{kb_id}/pages/{slug}", body, token=token, expect=expect_status)


def make_wiki(srv, name: str, folder: Path, token: str | None = None) -> dict:
    """A knowledge base synced from `folder` (launch.md, budget.md, team.md) and the pages
    launch (stale: launch.md's date changed and synced again), budget and team."""
    folder.mkdir(parents=True, exist_ok=True)
    for file, text in (("launch.md", LAUNCH), ("budget.md", BUDGET), ("team.md", TEAM)):
        (folder / file).write_text(text)
    kb = srv.create_kb(name, token=token)
    # A folder source: over REST without --auth, else with the CLI (the machine's owner).
    if token is None:
        source = srv.api("POST", f"/api/v1/knowledge-bases/{kb['id']}/sources", {"kind": "folder", "path": str(folder)})
    else:
        source = srv.cli_json("source", "add", kb["id"], "--folder", str(folder))

    def sync():
        if token is None:
            srv.api("POST", f"/api/v1/sources/{source['id']}/sync")
        else:
            srv.cli("source", "sync", source["id"])

    sync()
    docs = {d["file_name"]: d for d in srv.wait_documents(kb["id"], 3, token=token)}
    assert all(d["status"] == "ready" for d in docs.values()), docs
    ids = {n: d["id"] for n, d in docs.items()}
    pages = {
        "launch": write_page(srv, kb["id"], "launch", {
            "title": "Launch date", "body": LAUNCH_BODY, "type": "summary", "tags": ["release"],
            "sources": [f"{ids['launch.md']}:7-8", f"{ids['launch.md']}:3-3"],
        }, token),
        "budget": write_page(srv, kb["id"], "budget", {
            "title": "Budget", "body": BUDGET_BODY, "type": "concept", "tags": ["release", "money"],
            "sources": [{"document": ids["budget.md"], "lines": [3, 4]}],
        }, token),
        "team": write_page(srv, kb["id"], "team", {
            "title": "Team", "body": TEAM_BODY, "type": "entity", "tags": ["people"], "status": "draft",
            "sources": [f"{ids['team.md']}:3-3"],
        }, token),
    }
    assert not any(p["stale"] for p in pages.values()), pages
    # launch.md's date changes, and the source syncs: the page citing lines 7-8 turns stale.
    (folder / "launch.md").write_text(LAUNCH.replace("4 May", "11 May"))
    sync()
    srv.wait_documents(kb["id"], 6, token=token)
    launch = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/pages/launch", token=token)
    for _ in range(100):
        if launch["stale"]:
            break
        time.sleep(0.2)
        srv.wait_documents(kb["id"], 3, token=token)
        launch = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/pages/launch", token=token)
    assert launch["stale"] is True, launch
    assert launch["sources"][0]["document"] == ids["launch.md"], launch
    return {"kb": kb, "ids": ids, "pages": pages}


@pytest.fixture(scope="module")
def wiki(ui_module_server, tmp_path_factory):
    return make_wiki(ui_module_server, "handbook", tmp_path_factory.mktemp("wiki-docs"))


def test_index_lists_pages_with_the_stale_badge_and_the_lint(ui_page, ui_module_server, wiki, axe_check, shot):
    page, srv = ui_page, ui_module_server
    kb = wiki["kb"]
    open_page(page, srv, f"#/kb/{kb['id']}")
    page.get_by_test_id("wiki-link").click()
    expect(page).to_have_url(re.compile(rf"#/kb/{kb['id']}/wiki$"))
    expect(page.get_by_role("heading", level=1, name="Wiki")).to_be_visible()
    items = page.locator("[data-testid=wiki-page]")
    expect(items).to_have_count(3)
    assert [items.nth(i).get_attribute("data-slug") for i in range(3)] == ["budget", "launch", "team"]
    launch = items.filter(has=page.get_by_role("link", name="Launch date"))
    expect(launch).to_have_attribute("data-stale", "true")
    expect(launch.get_by_test_id("wiki-stale")).to_have_text("Stale")
    expect(page.get_by_test_id("wiki-stale")).to_have_count(1)
    expect(launch.get_by_test_id("wiki-type")).to_have_text("summary")
    team = items.filter(has=page.get_by_role("link", name="Team"))
    expect(team.get_by_test_id("wiki-status")).to_have_text("Draft")
    expect(team.get_by_test_id("wiki-type")).to_have_text("entity")
    expect(page.get_by_test_id("wiki-total")).to_have_text("3 pages, 3 shown")

    # The lint: as the API gives it.
    findings = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/lint")["findings"]
    assert {(f["kind"], f["page"]) for f in findings} >= {("stale", "launch"), ("broken_link", "team")}, findings
    shown = page.locator("[data-testid=wiki-finding]")
    expect(shown).to_have_count(len(findings))
    for f in findings:
        item = page.locator(f"[data-testid=wiki-finding][data-kind='{f['kind']}'][data-page='{f['page']}']").first
        expect(item).to_contain_text(f["detail"])
    stale = page.locator("[data-testid=wiki-finding][data-kind=stale]").first
    expect(stale).to_contain_text("stale")
    expect(stale).to_contain_text("11 May")
    expect(page.locator("[data-testid=wiki-finding][data-kind=broken_link]")).to_contain_text("[[rota]]")

    axe_check(page, "wiki-index")
    shot(page, "wiki-index")

    # Filters: by type, then by tag (kept in the address).
    page.get_by_test_id("wiki-filter-type").select_option("entity")
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-slug", "team")
    expect(page).to_have_url(re.compile(r"/wiki\?type=entity$"))
    page.get_by_test_id("wiki-filter-type").select_option("")
    page.get_by_test_id("wiki-filter-tag").fill("money")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-slug", "budget")
    page.get_by_test_id("wiki-filter-tag").fill("nothing-has-this")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page.get_by_test_id("wiki-empty")).to_be_visible()

    # Paging with `next`: two at a time.
    open_page(page, srv, f"#/kb/{kb['id']}/wiki?limit=2")
    expect(items).to_have_count(2)
    expect(page.get_by_test_id("wiki-total")).to_have_text("3 pages, 2 shown")
    with page.expect_response(lambda r: "/pages?" in r.url and "after=launch" in r.url):
        page.get_by_test_id("wiki-more").click()
    expect(items).to_have_count(3)
    expect(page.get_by_test_id("wiki-more")).to_be_hidden()
    assert items.nth(2).get_attribute("data-slug") == "team"

    # Phone width: no sideways scroll.
    page.set_viewport_size(PHONE)
    no_sideways_scroll(page)


def test_page_view_with_stale_sources_links_and_backlinks(ui_page, ui_module_server, wiki, axe_check, shot):
    page, srv = ui_page, ui_module_server
    kb, ids = wiki["kb"], wiki["ids"]
    open_page(page, srv, f"#/kb/{kb['id']}/wiki")
    page.get_by_role("link", name="Launch date").click()
    expect(page).to_have_url(re.compile(rf"#/kb/{kb['id']}/wiki/launch$"))
    expect(page.locator(".page[data-ready=true]")).to_be_attached()
    expect(page.get_by_test_id("wiki-title")).to_have_text("Launch date")
    meta = page.get_by_test_id("wiki-meta")
    expect(meta.get_by_test_id("wiki-stale")).to_have_text("Stale")
    expect(meta.get_by_test_id("wiki-status")).to_have_text("Published")

    # The Markdown: rendered, its HTML shown as text and never run.
    body = page.get_by_test_id("wiki-body")
    expect(body.get_by_role("heading", name="When")).to_be_visible()
    expect(body.locator("strong")).to_have_text("4 May")
    expect(body).to_contain_text("<script>window.pwned = 1</script>")
    expect(body).to_contain_text("<b>not bold</b>")
    assert body.locator("script, b").count() == 0
    assert page.evaluate("window.pwned") is None

    # Why it is stale: the passage when cited and now.
    reasons = page.get_by_test_id("wiki-stale-reasons")
    expect(reasons.get_by_role("heading", name="This page is stale")).to_be_visible()
    reason = reasons.get_by_test_id("wiki-stale-reason")
    expect(reason).to_have_count(1)
    expect(reason).to_contain_text("lines 7–8 of “Launch plan” changed")
    expect(reason.get_by_test_id("wiki-was")).to_contain_text("The launch is on 4 May, at the harbour office.")
    expect(reason.get_by_test_id("wiki-now")).to_contain_text("The launch is on 11 May, at the harbour office.")

    # Sources: state and text now.
    sources = page.locator("[data-testid=wiki-source]")
    expect(sources).to_have_count(2)
    expect(sources.nth(0)).to_have_attribute("data-state", "changed")
    expect(sources.nth(0).get_by_test_id("wiki-source-state")).to_have_text("changed")
    expect(sources.nth(0).get_by_test_id("wiki-source-text")).to_contain_text("11 May")
    expect(sources.nth(1)).to_have_attribute("data-state", "current")
    expect(sources.nth(1).get_by_test_id("wiki-source-text")).to_have_text(
        "The launch plan covers the spring release of the harbour app."
    )
    # Links and backlinks.
    expect(page.get_by_test_id("wiki-links").get_by_role("link")).to_have_text(["budget"])
    expect(page.get_by_test_id("wiki-backlinks").get_by_role("link")).to_have_text(["budget"])

    axe_check(page, "wiki-page")
    shot(page, "wiki-page")
    page.set_viewport_size(PHONE)
    no_sideways_scroll(page)
    page.set_viewport_size({"width": 1280, "height": 860})

    # A source opens its document in the preview drawer, the cited chunk marked.
    open_link = sources.nth(0).get_by_test_id("wiki-source-open")
    expect(open_link).to_have_text("Launch plan, lines 7–8")
    open_link.click()
    drawer = page.get_by_role("dialog", name="launch.md")
    expect(drawer).to_be_visible()
    expect(page).to_have_url(re.compile(rf"\?doc={ids['launch.md']}"))
    cited = drawer.locator("[data-testid=chunk].is-cited")
    expect(cited).to_have_count(1)
    expect(cited).to_contain_text("11 May")
    page.go_back()
    expect(page.get_by_test_id("wiki-title")).to_have_text("Launch date")

    # [[budget]] leads to that page, whose [[launch|the launch plan]] leads back.
    page.get_by_test_id("wiki-body").get_by_role("link", name="budget").click()
    expect(page).to_have_url(re.compile(r"/wiki/budget$"))
    expect(page.get_by_test_id("wiki-title")).to_have_text("Budget")
    expect(page.get_by_test_id("wiki-meta").get_by_test_id("wiki-current")).to_have_text("Up to date")
    expect(page.get_by_test_id("wiki-stale-reasons")).to_have_count(0)
    expect(page.get_by_test_id("wiki-backlinks").get_by_role("link")).to_have_text(["launch"])
    back = page.get_by_test_id("wiki-body").get_by_role("link", name="the launch plan")
    expect(back).to_have_attribute("href", f"#/kb/{kb['id']}/wiki/launch")
    back.click()
    expect(page.get_by_test_id("wiki-title")).to_have_text("Launch date")
    # An unknown page: the API's words.
    open_page(page, srv, f"#/kb/{kb['id']}/wiki/no-such-page")
    expect(page.get_by_role("alert")).to_contain_text("no page 'no-such-page'")


def test_history_diff_and_edit_in_place_with_a_conflict(ui_page, ui_module_server, wiki, axe_check, shot):
    page, srv = ui_page, ui_module_server
    kb = wiki["kb"]
    url = f"/api/v1/knowledge-bases/{kb['id']}/pages/budget"
    before = srv.api("GET", url)
    open_page(page, srv, f"#/kb/{kb['id']}/wiki/budget")

    # Edit: the form holds the page as it is; save a changed body.
    page.get_by_test_id("wiki-edit").click()
    form = page.get_by_test_id("wiki-form")
    expect(form.get_by_label("Title")).to_have_value("Budget")
    expect(form.get_by_label("Title")).to_be_focused()
    editor = form.get_by_test_id("wiki-edit-body")
    expect(editor).to_have_value(before["body"])
    expect(form.get_by_test_id("wiki-edit-sources")).to_have_value(f"{wiki['ids']['budget.md']}:3-4")
    expect(form.get_by_label("Tags")).to_have_value("release, money")
    new_body = before["body"].replace("approved in March", "approved in April") + "\nA reserve of 5,000 EUR is kept.\n"
    editor.fill(new_body)
    form.get_by_label("Tags").fill("release, money, reserve")
    with page.expect_response(lambda r: r.request.method == "PUT" and r.url.endswith("/pages/budget")) as resp:
        form.get_by_test_id("wiki-save").click()
    assert resp.value.status == 200, resp.value.text()
    sent = resp.value.request.post_data_json
    assert sent["base_version"] == before["version"], sent
    assert sent["tags"] == ["release", "money", "reserve"], sent
    expect(page.get_by_test_id("wiki-body")).to_contain_text("A reserve of 5,000 EUR is kept.")
    expect(page.get_by_test_id("wiki-form")).to_have_count(0)
    after = srv.api("GET", url)
    assert after["version"] != before["version"] and after["body"] == new_body.rstrip(), after
    assert after["tags"] == ["release", "money", "reserve"], after
    quiet(page)

    # History: both versions, newest first; the diff of the edit.
    page.get_by_test_id("wiki-history-link").click()
    expect(page).to_have_url(re.compile(r"/wiki/budget/history"))
    versions = page.locator("[data-testid=wiki-version]")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_have_attribute("data-version", after["version"])
    expect(versions.nth(0)).to_have_attribute("data-current", "true")
    expect(versions.nth(1)).to_have_attribute("data-version", before["version"])
    diff = page.get_by_test_id("wiki-diff")
    expect(diff.locator("[data-testid=diff-add]")).to_have_text(
        [re.compile(r"approved in April"), re.compile(r"A reserve of 5,000 EUR is kept\.")]
    )
    expect(diff.locator("[data-testid=diff-del]")).to_have_text([re.compile(r"approved in March")])
    expect(page.get_by_test_id("wiki-diff-summary")).to_have_text("2 lines added, 1 removed")
    expect(page.get_by_test_id("wiki-diff-box")).to_contain_text("release, money, reserve")
    # The first version: everything added.
    page.get_by_role("button", name="Show changes Version 1").click()
    expect(page).to_have_url(re.compile(rf"\?v={before['version']}$"))
    expect(page.get_by_test_id("wiki-diff-box").get_by_role("heading")).to_have_text("The first version")
    expect(diff.locator("[data-testid=diff-del]")).to_have_count(0)
    history = srv.api("GET", f"{url}/history")["versions"]
    assert [v["version"] for v in history] == [after["version"], before["version"]], history
    axe_check(page, "wiki-history")
    shot(page, "wiki-history")
    page.set_viewport_size(PHONE)
    no_sideways_scroll(page)
    page.set_viewport_size({"width": 1280, "height": 860})
    # The diff itself (js/wiki.js's lineDiff): a longest common subsequence of lines.
    ops = page.evaluate(
        "import('/assets/js/wiki.js').then(m => m.lineDiff('a\\nb\\nc\\nd', 'a\\nc\\nx\\nd').map(d => d.op + d.text))"
    )
    assert ops == ["samea", "delb", "samec", "addx", "samed"], ops

    # A conflict: someone writes the page over REST while the form is open.
    open_page(page, srv, f"#/kb/{kb['id']}/wiki/budget")
    page.get_by_test_id("wiki-edit").click()
    form = page.get_by_test_id("wiki-form")
    theirs = write_page(srv, kb["id"], "budget", {
        "title": "Budget", "body": "Someone else's text.\n", "type": "concept",
        "sources": [f"{wiki['ids']['budget.md']}:3-4"], "base_version": after["version"],
    })
    mine = "My text, typed while someone else wrote.\n\nIt must not be lost."
    form.get_by_test_id("wiki-edit-body").fill(mine)
    form.get_by_label("Title").fill("Budget (mine)")
    with page.expect_response(lambda r: r.request.method == "PUT" and r.url.endswith("/pages/budget")) as resp:
        form.get_by_test_id("wiki-save").click()
    assert resp.value.status == 409, resp.value.text()
    detail = resp.value.json()["detail"]
    error = form.get_by_test_id("wiki-edit-error")
    expect(error).to_contain_text(detail)
    expect(error).to_contain_text(theirs["version"])
    expect(form.get_by_test_id("wiki-edit-body")).to_have_value(mine)
    expect(form.get_by_label("Title")).to_have_value("Budget (mine)")
    assert srv.api("GET", url)["body"] == "Someone else's text."
    axe_check(page, "wiki-edit-conflict", schemes=("light",))
    shot(page, "wiki-edit-conflict")


def test_read_only_token_sees_no_edit_control(ui_page_factory, ui_server_factory, tmp_path):
    srv = ui_server_factory("--auth", "token")
    srv.add_user("erin", role="owner")
    owner = srv.token("erin")
    w = make_wiki(srv, "read-only-wiki", tmp_path / "docs", token=owner)
    reader = srv.token("erin", "--read-only")
    page = ui_page_factory()
    login(page, srv.base, reader)
    open_page(page, srv, f"#/kb/{w['kb']['id']}/wiki/launch")
    expect(page.get_by_test_id("wiki-title")).to_have_text("Launch date")
    expect(page.get_by_test_id("wiki-stale-reasons")).to_contain_text("Someone who may write the page can bring it up to date.")
    expect(page.get_by_test_id("wiki-edit")).to_have_count(0)
    page.get_by_test_id("wiki-history-link").click()
    expect(page.locator("[data-testid=wiki-version]")).to_have_count(1)
    # The API agrees.
    r = srv.http(
        "PUT", f"/api/v1/knowledge-bases/{w['kb']['id']}/pages/launch", token=reader,
        body={"title": "x", "body": "y", "base_version": w["pages"]["launch"]["version"]},
    )
    assert r.status == 403, r.text


def test_chinese(ui_page_factory, ui_module_server, wiki, axe_check):
    page, srv = ui_page_factory(locale="zh-CN"), ui_module_server
    kb = wiki["kb"]
    open_page(page, srv, f"#/kb/{kb['id']}")
    expect(page.get_by_test_id("wiki-link")).to_have_text("Wiki 页面")
    open_page(page, srv, f"#/kb/{kb['id']}/wiki")
    expect(page.get_by_role("heading", level=1, name="Wiki 页面")).to_be_visible()
    expect(page.get_by_role("heading", name="检查")).to_be_visible()
    launch = page.locator("[data-testid=wiki-page][data-slug=launch]")
    expect(launch.get_by_test_id("wiki-stale")).to_have_text("已过时")
    expect(page.get_by_label("类型")).to_be_visible()
    expect(page.locator("[data-testid=wiki-finding][data-kind=stale] .badge").first).to_have_text("已过时")
    text = page.locator("main").inner_text()
    for english in ("Stale", "Filter", "Type", "Tag", "Lint", "Published", "Draft", "pages"):
        assert not re.search(rf"\b{english}\b", text), f"English {english!r} on the zh-CN page"
    axe_check(page, "wiki-index-zh", schemes=("light",))

    open_page(page, srv, f"#/kb/{kb['id']}/wiki/launch")
    expect(page.get_by_role("heading", name="此页面已过时")).to_be_visible()
    expect(page.get_by_test_id("wiki-history-link")).to_have_text("历史")
    expect(page.get_by_test_id("wiki-edit")).to_have_text("编辑")
    expect(page.locator("[data-testid=wiki-source][data-state=changed] [data-testid=wiki-source-state]")).to_have_text("已改动")
    expect(page.get_by_role("heading", name="反向链接")).to_be_visible()
    text = page.locator("main").inner_text()
    for english in ("Stale", "Sources", "Backlinks", "History", "Was", "Now", "changed", "current"):
        assert not re.search(rf"\b{english}\b", text), f"English {english!r} on the zh-CN page"
    axe_check(page, "wiki-page-zh", schemes=("light",))
