"""The Insight page (issue 69 item 4; js/insight.js at ``#/insight``) through the real
``quarry serve --auth token`` and a real Chromium (Playwright; fixtures in ui_support.py). One
space: ``ada`` (owner) reads the insight; ``bob`` (editor) is the one who asks. A knowledge
base ``handbook`` holds two Markdown documents; bob asks over REST
(``POST /api/v1/knowledge-search``) three wordings of one question nothing answers, one
question a document answers and one other unanswered question.

- Unanswered questions: the rephrasings are one group, listed first with its count, the
  question asked once after it, the answered one not at all; a sparkline says its count in
  words; the actions that need a knowledge base are off, with a hint, until one is chosen
  under "Answer in"; "Closest passage" runs ada's own search and shows a passage or "nothing
  close"; "Add a source" opens the knowledge base's Sources tab with its Add source dialog
  open for the question (shown as text; axe-clean); Cancel closes it and takes ``add=1`` off the
  address, so a reload does not open it again; a viewer who may not add sources gets no
  dialog; "Write a note" saves the edited note (``create_knowledge`` over
  ``/api/v1/mcp?resource=``): it exists over REST and a knowledge search for the question now
  finds it; "Request a page" writes a ``draft`` page tagged ``requested`` (checked over REST),
  and a second request shows the API's 409 beside the group, one version written, the first
  request's link kept;
- Usage: cards, the chart with today's searches, its table, the subjects and the people; the
  tabs answer the arrow keys; "Download CSV" saves a file with bob's ``searches`` line;
- Monthly model tokens (``GET``/``PUT /api/v1/insight/budget``), in the Usage tab: "No monthly
  limit" at first; ada saves 1000 (the meter, used, remaining, the reset day; 1000 over REST),
  0 and 1.5 are refused beside the field before anything is sent, a figure over the server's
  maximum shows the API's 400; ``cid`` (an admin, not an owner) reads it but Save shows the
  API's 403 inline, what was typed kept; "Remove limit" leaves none (null over REST); a new
  window does not reload it; axe in light and dark, 375 pixels without sideways scroll;
  under a server's ceiling (``QUARRY_MONTHLY_MODEL_TOKENS=500``) the section says which limit
  applies: the server's, the owner's figure above it (the server's still applies) or below it;
- bob opening the page gets the API's refusal (in Chinese too, through i18n/server.json), and
  no data (no budget section either);
- with query text off (``QUARRY_INSIGHT_QUERIES=off``) a group reads "(text not kept)" and the
  actions that need its text are off; "Add a source" opens the dialog with no question in it;
- axe-core on both tabs in light and dark; at 375 pixels no sideways scroll on either tab;
  screenshots (``ui-insight-unanswered-*``, ``ui-insight-usage-*``).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs, quote

import pytest
from playwright.sync_api import expect
from ui_support import login, start_ui_server

PHONE_375 = {"width": 375, "height": 812}
VPN = ["How do I reset my VPN password?", "vpn password reset", "reset VPN password"]
PARKING = "Where is the parking garage?"
ANSWERED = "When does the office close on Fridays?"
DOCS = {
    "expenses.md": (
        "# Expense policy\n\nSubmit expense reports within 30 days of the purchase.\n"
        "Receipts over 25 euros need a scan attached to the claim.\n\n"
        "## Travel\n\nTrain tickets are booked through the travel desk; flights need approval first.\n"
    ),
    "office.md": (
        "# Office hours\n\nThe office opens at 8 and closes at 18.\n"
        "On Fridays it closes at 16, and the front desk answers the phone until 15.\n\n"
        "## Visitors\n\nVisitors sign in at the front desk and wear a badge.\n"
    ),
}
NOTE_ANSWER = "Open the self-service portal at https://vpn.example/reset, sign in with your badge number and choose **Reset VPN password**."


# ---------------------------------------------------------------------------------------------
# The server, users, documents and bob's questions


def ask(srv, token: str, question: str) -> dict:
    return srv.api("POST", "/api/v1/knowledge-search", {"query": question}, token=token)


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    srv = start_ui_server(quarry_bin, corpus, tmp_path_factory.mktemp("ui-insight"), "--auth", "token")
    try:
        srv.add_user("ada", "owner")
        srv.add_user("bob", "editor")
        ada, bob = srv.token("ada"), srv.token("bob")
        kb = srv.create_kb("handbook", token=ada)
        srv.upload(kb["id"], DOCS, token=ada)
        docs = srv.wait_documents(kb["id"], len(DOCS), token=ada)
        assert all(d["status"] == "ready" for d in docs), docs
        for q in VPN:
            assert ask(srv, bob, q)["results"] == [], q
        assert ask(srv, bob, ANSWERED)["results"], "the office question should find office.md"
        assert ask(srv, bob, PARKING)["results"] == []
        yield {"srv": srv, "ada": ada, "bob": bob, "kb": kb}
    finally:
        srv.stop()


def open_insight(page, srv, query: str = "") -> None:
    page.goto(f"{srv.base}/#/insight{query}")
    expect(page.locator(".page-insight[data-ready=true]")).to_be_attached()


def quiet(page) -> None:
    """Drops the toasts before an axe run or a screenshot."""
    page.evaluate("() => document.querySelectorAll('#toasts .toast').forEach((t) => t.remove())")


def no_sideways_scroll(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    view = page.evaluate("window.innerWidth")
    assert width <= view + 1, f"the page scrolls sideways at {view} px: {width}"


def group(page, text: str):
    return page.get_by_test_id("insight-group").filter(has=page.get_by_test_id("insight-question").filter(has_text=text))


def source_link_query(href: str, kb_id: str) -> dict[str, list[str]]:
    """The query of an "Add a source" link, which leads to the knowledge base's Sources tab."""
    path, _, query = href.partition("?")
    assert path == f"#/kb/{kb_id}/sources", href
    return parse_qs(query, keep_blank_values=True)


def hash_of(page) -> str:
    return page.evaluate("() => location.hash")


# ---------------------------------------------------------------------------------------------
# Unanswered questions and their actions


def test_unanswered_questions_group_rephrasings_and_their_actions_write(ui_page_factory, world, axe_check, shot):
    srv, ada, bob, kb = world["srv"], world["ada"], world["bob"], world["kb"]
    page = ui_page_factory()
    login(page, srv.base, ada)
    expect(page.get_by_role("navigation").get_by_role("link", name="Insight", exact=True)).to_be_visible()
    open_insight(page, srv)
    expect(page.get_by_role("heading", level=1, name="Insight")).to_be_visible()
    expect(page.get_by_role("tab", name="Unanswered questions")).to_have_attribute("aria-selected", "true")

    groups = page.get_by_test_id("insight-group")
    expect(groups).to_have_count(2)
    first, second = groups.nth(0), groups.nth(1)
    # The three wordings are one group, first; the question asked once after it.
    expect(first).to_have_attribute("data-count", "3")
    expect(first.get_by_test_id("insight-question")).to_contain_text("VPN password", ignore_case=True)
    expect(first.get_by_test_id("insight-count")).to_have_text("asked 3 times")
    expect(second).to_have_attribute("data-count", "1")
    expect(second.get_by_test_id("insight-question")).to_have_text(PARKING)
    expect(second.get_by_test_id("insight-count")).to_have_text("asked 1 time")
    expect(page.get_by_test_id("insight-groups")).not_to_contain_text("office")
    spark = first.get_by_test_id("insight-spark")
    expect(spark).to_have_attribute("role", "img")
    expect(spark).to_have_attribute("aria-label", re.compile(r"^3 searches over 30 days, last on "))
    expect(first.locator(".ins-spark-bar")).to_have_count(1)

    # No knowledge base to answer in yet: those actions are off, with a hint.
    expect(page.get_by_test_id("insight-need-kb")).to_be_visible()
    for key in ("note", "page", "source"):
        expect(first.get_by_test_id(f"insight-{key}")).to_be_disabled()
    expect(first).to_contain_text("Choose a knowledge base to answer in first.")
    expect(first.get_by_test_id("insight-closest")).to_be_enabled()

    # Closest passage: ada's own search; a passage or "nothing close", never an error.
    first.get_by_role("button", name="Closest passage").click()
    expect(first.get_by_test_id("insight-passage").or_(first.get_by_test_id("insight-closest-none"))).to_be_visible()
    expect(first.get_by_test_id("insight-group-error")).to_have_text("")

    quiet(page)
    axe_check(page, "insight-unanswered")
    shot(page, "ui-insight-unanswered")

    # Answer in the handbook: the actions come on, the source link leads to its sources tab.
    page.get_by_label("Answer in").select_option(label="handbook")
    expect(page.get_by_test_id("insight-need-kb")).to_have_count(0)
    first = group(page, "VPN password")
    for key in ("note", "page"):
        expect(first.get_by_test_id(f"insight-{key}")).to_be_enabled()
    assert f"into={kb['id']}" in page.evaluate("() => location.hash")

    # "Add a source" asks for the Sources tab with its dialog open, for this question.
    question = first.get_by_test_id("insight-question").inner_text().strip()
    href = first.get_by_role("link", name="Add a source").get_attribute("href")
    assert source_link_query(href, kb["id"]) == {"add": ["1"], "question": [question]}, href

    # Write a note: the question as its title, the answer typed under the heading.
    first.get_by_role("button", name="Write a note").click()
    dlg = page.get_by_role("dialog", name="Write a note in handbook")
    expect(dlg).to_be_visible()
    expect(dlg.get_by_role("textbox", name="Title")).to_have_value(question)
    body = dlg.get_by_role("textbox", name="Note")
    expect(body).to_have_value(re.compile(rf"^# {re.escape(question)}\n"))
    # Nothing but the heading: refused before anything is sent, the dialog kept.
    dlg.get_by_role("button", name="Save the note").click()
    expect(dlg.get_by_test_id("insight-note-error")).to_have_text("Write the answer before saving.")
    body.fill(f"# {question}\n\n{NOTE_ANSWER}\n")
    quiet(page)
    axe_check(page, "insight-note-dialog", schemes=("light",))
    dlg.get_by_role("button", name="Save the note").click()
    expect(dlg).to_have_count(0)
    done = first.get_by_test_id("insight-note-done")
    expect(done).to_contain_text("Note saved")
    href = done.get_by_role("link").get_attribute("href")
    assert href.startswith(f"#/kb/{kb['id']}?doc="), href
    note_id = href.split("doc=", 1)[1]
    note = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/documents/{note_id}", token=ada)
    assert note["id"] == note_id and note["knowledge_base"] == "handbook", note
    # The question now finds the note, for the one who asked it.
    deadline = time.monotonic() + 30
    while True:
        hits = ask(srv, bob, VPN[0])["results"]
        if hits or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert hits and hits[0]["knowledge_id"] == note_id, hits
    assert "vpn.example/reset" in hits[0]["content"], hits[0]

    # Request a page: a draft tagged `requested`, once; a second request is the API's 409.
    first.get_by_role("button", name="Request a page").click()
    requested = first.get_by_test_id("insight-page-done")
    expect(requested).to_contain_text("Page requested")
    page_href = requested.get_by_role("link").get_attribute("href")
    slug = page_href.rsplit("/", 1)[1]
    assert page_href == f"#/kb/{kb['id']}/wiki/{slug}", page_href
    assert slug == "how-do-i-reset-my-vpn-password" or "vpn-password" in slug, slug
    wiki = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/pages/{slug}", token=ada)
    assert wiki["status"] == "draft" and "requested" in wiki["tags"] and wiki["title"] == question, wiki
    assert "asked 3 times in the last 30 days" in wiki["body"], wiki["body"]
    first.get_by_role("button", name="Request a page").click()
    error = first.get_by_test_id("insight-group-error")
    r = srv.http("PUT", f"/api/v1/knowledge-bases/{kb['id']}/pages/{slug}", body={"title": question, "body": "x", "status": "draft"}, token=ada)
    assert r.status == 409, (r.status, r.text)
    expect(error).to_have_text(r.json()["detail"])
    expect(requested).to_be_visible()  # the first request's link stays
    expect(first.get_by_test_id("insight-note-done")).to_be_visible()
    history = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/pages/{slug}/history", token=ada)
    versions = history["versions"] if isinstance(history, dict) else history
    assert len(versions) == 1, history
    listed = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/pages?tag=requested", token=ada)
    assert [p["slug"] for p in listed["pages"]] == [slug], listed
    quiet(page)
    axe_check(page, "insight-actions", schemes=("light",))
    shot(page, "ui-insight-actions")

    # The knowledge base filter: bob's searches named none, so none is the handbook's.
    page.get_by_label("Questions asked of").select_option(label="handbook")
    expect(page.get_by_test_id("insight-empty")).to_be_visible()
    page.get_by_label("Questions asked of").select_option(label="All knowledge bases")
    expect(page.get_by_test_id("insight-group")).to_have_count(2)

    # A phone: nothing scrolls sideways.
    page.set_viewport_size(PHONE_375)
    no_sideways_scroll(page)


def test_add_a_source_opens_the_sources_tab_with_the_dialog_for_the_question(ui_page_factory, world, axe_check, shot):
    srv, ada, bob, kb = world["srv"], world["ada"], world["bob"], world["kb"]
    page = ui_page_factory()
    login(page, srv.base, ada)
    open_insight(page, srv, f"?into={kb['id']}")
    link = group(page, PARKING).get_by_role("link", name="Add a source")
    assert source_link_query(link.get_attribute("href"), kb["id"]) == {"add": ["1"], "question": [PARKING]}
    link.click()

    # One click: the knowledge base's Sources tab, its Add source dialog open for the question.
    dialog = page.get_by_role("dialog", name="Add a source to “handbook”")
    expect(dialog).to_be_visible()
    expect(page.get_by_role("tab", name=re.compile(r"^Sources"))).to_have_attribute("aria-selected", "true")
    opened = hash_of(page)
    assert source_link_query(opened, kb["id"]) == {"add": ["1"], "question": [PARKING]}, opened
    line = dialog.get_by_test_id("add-source-question")
    expect(line).to_have_text(f"For the unanswered question: “{PARKING}”")
    expect(dialog).to_have_accessible_description(f"For the unanswered question: “{PARKING}”")
    # The rest of the dialog as the "Add source" button opens it: Git first, focused.
    git = dialog.get_by_role("radio", name="Git repository")
    expect(git).to_be_checked()
    expect(git).to_be_focused()
    expect(dialog.get_by_label("Clone URL")).to_be_visible()
    quiet(page)
    axe_check(page, "insight-add-source-dialog")
    shot(page, "ui-insight-add-source")

    # Cancel: the dialog closes, the address no longer asks for it, the focus is on the button.
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    expect(page).to_have_url(re.compile(rf"#/kb/{re.escape(kb['id'])}/sources$"))
    # (The first "Add source": the tab's own; an empty list offers a second one.)
    expect(page.get_by_role("button", name="Add source").first).to_be_focused()
    # A reload comes back to the tab, without the dialog.
    page.reload()
    expect(page.get_by_role("button", name="Add source").first).to_be_visible()  # drawn with the dialog, when it opens
    expect(page.get_by_role("tab", name=re.compile(r"^Sources"))).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("dialog")).to_have_count(0)

    # The question is the viewer's to read, never markup: the words as typed, nothing made of them.
    odd = '<img src=x onerror="window.__hit=1"> {name} & co'
    page.goto(f"{srv.base}/#/kb/{kb['id']}/sources?add=1&question={quote(odd, safe='')}")
    dialog = page.get_by_role("dialog", name="Add a source to “handbook”")
    expect(dialog.get_by_test_id("add-source-question")).to_have_text(f"For the unanswered question: “{odd}”")
    expect(dialog.locator("img")).to_have_count(0)
    assert page.evaluate("() => window.__hit") is None
    dialog.get_by_role("button", name="Cancel").click()
    expect(page).to_have_url(re.compile(rf"#/kb/{re.escape(kb['id'])}/sources$"))

    # Someone who may not add sources: the tab, and no dialog.
    viewer = ui_page_factory()
    login(viewer, srv.base, bob)
    viewer.goto(f"{srv.base}/#/kb/{kb['id']}/sources?add=1&question={quote(PARKING, safe='')}")
    expect(viewer.locator(".src-section")).to_be_visible()
    expect(viewer.get_by_role("tab", name=re.compile(r"^Sources"))).to_have_attribute("aria-selected", "true")
    expect(viewer.get_by_role("button", name="Add source")).to_have_count(0)
    expect(viewer.get_by_role("dialog")).to_have_count(0)


# ---------------------------------------------------------------------------------------------
# Usage


def test_usage_chart_table_people_and_csv(ui_page_factory, world, axe_check, shot, tmp_path):
    srv, ada = world["srv"], world["ada"]
    page = ui_page_factory()
    login(page, srv.base, ada)
    open_insight(page, srv)
    # The tabs answer the arrow keys, and the address keeps the tab.
    tab = page.get_by_role("tab", name="Unanswered questions")
    tab.focus()
    page.keyboard.press("ArrowRight")
    usage_tab = page.get_by_role("tab", name="Usage")
    expect(usage_tab).to_be_focused()
    expect(usage_tab).to_have_attribute("aria-selected", "true")
    assert "tab=usage" in page.evaluate("() => location.hash")

    searches = page.get_by_test_id("insight-total-searches")
    expect(searches).to_be_visible()
    assert int(searches.get_attribute("data-count")) >= len(VPN) + 2
    chart = page.get_by_test_id("insight-chart").locator("svg")
    expect(chart).to_have_attribute("role", "img")
    expect(chart).to_have_attribute("aria-label", re.compile(r"Searches [1-9]"))
    expect(page.locator('.ins-series[data-metric="searches"] polyline')).to_have_count(1)
    for m in ("searches", "unanswered", "chat_answers", "tool_calls", "uploads"):
        expect(page.locator(f'.ins-legend [data-metric="{m}"] input')).to_be_checked()
    # The table holds the same numbers: today's searches are not zero.
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    page.get_by_test_id("insight-numbers").locator("summary").click()
    cell = page.get_by_test_id("insight-usage-table").locator(f'tr[data-day="{today}"] td[data-metric="searches"]')
    expect(cell).not_to_have_text("0")
    # A legend box hides its line.
    page.locator('.ins-legend [data-metric="uploads"]').click()
    expect(page.locator('.ins-series[data-metric="uploads"]')).to_have_count(0)
    page.locator('.ins-legend [data-metric="uploads"]').click()
    expect(page.locator('.ins-series[data-metric="uploads"]')).to_have_count(1)
    # Subjects and people.
    expect(page.get_by_test_id("insight-subjects-searches")).to_contain_text("/api/v1/knowledge-search")
    people = page.get_by_test_id("insight-people")
    expect(people.locator('tr[data-user="bob"]')).to_be_visible()
    expect(people.locator('tr[data-user="ada"]')).to_be_visible()

    # CSV: the file the API exports, with bob's searches.
    with page.expect_download() as info:
        page.get_by_test_id("insight-csv").click()
    download = info.value
    assert download.suggested_filename == "quarry-usage-30d.csv", download.suggested_filename
    path = tmp_path / "usage.csv"
    download.save_as(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "day,metric,user,user_id,token,token_id,count,total", lines[:2]
    bob_searches = [line for line in lines if line.split(",")[1:2] == ["searches"] and ",bob," in line]
    assert bob_searches and bob_searches[0].startswith(today), lines
    expect(page.get_by_test_id("insight-csv-error")).to_have_text("")

    quiet(page)
    axe_check(page, "insight-usage")
    # The screenshots with the numbers folded, from the top.
    page.get_by_test_id("insight-numbers").locator("summary").click()
    page.evaluate("() => window.scrollTo(0, 0)")
    shot(page, "ui-insight-usage")
    page.set_viewport_size(PHONE_375)
    page.wait_for_timeout(300)  # the chart follows its box's width
    no_sideways_scroll(page)
    chart_box = page.get_by_test_id("insight-chart").bounding_box()
    assert chart_box["x"] + chart_box["width"] <= PHONE_375["width"] + 1, chart_box


def test_dark_theme_and_chinese(ui_page_factory, world, axe_check):
    srv, ada = world["srv"], world["ada"]
    page = ui_page_factory(locale="zh-CN", color_scheme="dark")
    login(page, srv.base, ada)
    expect(page.get_by_role("navigation").get_by_role("link", name="洞察", exact=True)).to_be_visible()
    open_insight(page, srv, "?days=7")
    expect(page.get_by_role("heading", level=1, name="洞察")).to_be_visible()
    expect(page.get_by_label("时间范围")).to_have_value("7")
    expect(page.get_by_test_id("insight-group").first.get_by_test_id("insight-count")).to_contain_text("被问")
    axe_check(page, "insight-unanswered-zh", schemes=("dark",))
    page.get_by_role("tab", name="使用情况").click()
    expect(page.get_by_test_id("insight-chart").locator("svg")).to_be_visible()
    budget = page.get_by_test_id("insight-budget")
    expect(budget.get_by_role("heading", name="每月模型令牌")).to_be_visible()
    expect(budget.get_by_label("每月上限（令牌）")).to_be_visible()
    axe_check(page, "insight-usage-zh", schemes=("dark",))


# ---------------------------------------------------------------------------------------------
# Monthly model tokens


def budget_of(srv, token: str) -> dict:
    return srv.api("GET", "/api/v1/insight/budget", token=token)


def record_methods(page) -> list[tuple[str, str]]:
    """(method, URL) of every request the page sends from now on."""
    sent: list[tuple[str, str]] = []
    page.context.on("request", lambda r: sent.append((r.method, r.url)))
    return sent


def budget_calls(sent: list[tuple[str, str]], method: str) -> int:
    return sum(1 for m, url in sent if m == method and url.split("?")[0].endswith("/api/v1/insight/budget"))


def test_monthly_model_tokens_set_validate_refuse_and_remove(ui_page_factory, world, axe_check, shot):
    srv, ada = world["srv"], world["ada"]
    assert budget_of(srv, ada)["monthly_model_tokens"] is None
    try:
        page = ui_page_factory()
        sent = record_methods(page)
        login(page, srv.base, ada)
        open_insight(page, srv, "?tab=usage")
        section = page.get_by_test_id("insight-budget")
        expect(section.get_by_role("heading", level=3, name="Monthly model tokens")).to_be_visible()
        expect(section.get_by_test_id("insight-budget-none")).to_have_text("No monthly limit")
        expect(section.get_by_test_id("insight-budget-used")).to_contain_text("tokens used in")
        expect(section.get_by_role("meter")).to_have_count(0)
        field = section.get_by_label("Monthly limit (tokens)")
        expect(field).to_have_value("")
        expect(field).to_have_attribute("type", "number")
        expect(field).to_have_attribute("min", "1")
        expect(field).to_have_attribute("step", "1")
        save = section.get_by_role("button", name="Save", exact=True)
        remove = section.get_by_role("button", name="Remove limit")
        expect(remove).to_be_disabled()

        # Save 1000: the section shows the limit, the meter, what is left and the reset day.
        field.fill("1000")
        save.click()
        expect(section).to_have_attribute("data-limit", "1000")
        rest = budget_of(srv, ada)
        assert rest["monthly_model_tokens"] == 1000 and rest["limit"] == 1000, rest
        assert rest["server_limit"] is None and rest["remaining"] == max(0, 1000 - rest["used"]), rest
        used = rest["used"]
        expect(section.get_by_test_id("insight-budget-used")).to_contain_text(re.compile(rf"^{used:,} of 1,000 tokens used in \w+ \d{{4}}$"))
        meter = section.get_by_role("meter", name="Monthly model tokens")
        expect(meter).to_have_attribute("aria-valuemin", "0")
        expect(meter).to_have_attribute("aria-valuemax", "1000")
        expect(meter).to_have_attribute("aria-valuenow", str(min(used, 1000)))
        expect(meter).to_have_attribute("aria-valuetext", re.compile(rf"^{used:,} of 1,000 tokens used \(\d+%\)$"))
        if used < 1000:
            expect(section.get_by_test_id("insight-budget-remaining")).to_have_text(f"{1000 - used:,} tokens left")
        resets = datetime.strptime(rest["resets_at"][:10], "%Y-%m-%d")
        expect(section.get_by_test_id("insight-budget-resets")).to_have_text(f"Resets on {resets:%B} {resets.day}, {resets.year} (UTC).")
        expect(section.get_by_test_id("insight-budget-resets").locator("time")).to_have_attribute("datetime", rest["resets_at"])
        expect(section.get_by_test_id("insight-budget-source")).to_have_text("The limit is this space's own, set by its owners.")
        expect(section.get_by_test_id("insight-budget-none")).to_have_count(0)
        expect(field).to_have_value("1000")
        expect(remove).to_be_enabled()
        expect(page.locator("#live-polite")).to_have_text("Monthly limit set to 1,000 tokens")
        assert budget_calls(sent, "PUT") == 1

        # Not a whole number of at least 1: said beside the field, nothing sent, what was typed kept.
        error = section.get_by_test_id("insight-budget-error")
        for bad in ("0", "1.5"):
            field.fill(bad)
            save.click()
            expect(error).to_have_text("Enter a whole number of tokens, 1 or more.")
            expect(field).to_have_attribute("aria-invalid", "true")
            expect(field).to_have_value(bad)
            expect(field).to_be_focused()
        assert budget_calls(sent, "PUT") == 1
        assert budget_of(srv, ada)["monthly_model_tokens"] == 1000
        expect(section).to_have_attribute("data-limit", "1000")
        # Typing again clears the message.
        field.fill("2")
        expect(error).to_have_text("")
        expect(field).not_to_have_attribute("aria-invalid", "true")
        # A figure the server refuses (over its maximum): the API's 400, beside the field.
        too_many = "2000000000000000"
        r = srv.http("PUT", "/api/v1/insight/budget", body={"monthly_model_tokens": int(too_many)}, token=ada)
        assert r.status == 400 and "monthly_model_tokens" in r.json()["detail"], (r.status, r.text)
        field.fill(too_many)
        save.click()
        expect(error).to_have_text(r.json()["detail"])
        expect(field).to_have_value(too_many)
        assert budget_of(srv, ada)["monthly_model_tokens"] == 1000

        # A new window reloads the usage, not the month's budget.
        gets = budget_calls(sent, "GET")
        page.get_by_label("Window", exact=True).select_option("7")
        expect(page.get_by_test_id("insight-chart")).to_be_visible()
        expect(page.get_by_test_id("insight-usage-table").locator("tbody tr")).to_have_count(7)
        assert budget_calls(sent, "GET") == gets
        expect(section).to_be_visible()
        expect(field).to_have_value(too_many)  # the redraw kept what was typed

        quiet(page)
        axe_check(page, "insight-budget")
        page.evaluate("() => window.scrollTo(0, 0)")
        shot(page, "ui-insight-budget")
        page.set_viewport_size(PHONE_375)
        page.wait_for_timeout(300)
        no_sideways_scroll(page)
        box = section.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE_375["width"] + 1, box
        page.set_viewport_size({"width": 1280, "height": 860})

        # An admin who is not an owner reads it, and Save shows the API's 403, the figure kept.
        srv.add_user("cid", "admin")
        cid = srv.token("cid")
        assert budget_of(srv, cid)["limit"] == 1000
        refused = srv.http("PUT", "/api/v1/insight/budget", body={"monthly_model_tokens": 5000}, token=cid)
        assert refused.status == 403, (refused.status, refused.text)
        detail = refused.json()["detail"]
        assert "owner" in detail and "admin" in detail, detail
        other = ui_page_factory(color_scheme="dark")
        login(other, srv.base, cid)
        open_insight(other, srv, "?tab=usage")
        theirs = other.get_by_test_id("insight-budget")
        expect(theirs).to_have_attribute("data-limit", "1000")
        expect(theirs.get_by_role("meter")).to_have_attribute("aria-valuemax", "1000")
        their_field = theirs.get_by_label("Monthly limit (tokens)")
        expect(their_field).to_have_value("1000")
        their_field.fill("5000")
        theirs.get_by_role("button", name="Save", exact=True).click()
        expect(theirs.get_by_test_id("insight-budget-error")).to_have_text(detail)
        expect(their_field).to_have_value("5000")
        expect(theirs).to_have_attribute("data-limit", "1000")
        assert budget_of(srv, ada)["monthly_model_tokens"] == 1000
        quiet(other)
        axe_check(other, "insight-budget-refused", schemes=("dark",))

        # Remove limit: none of the space's own (and the server sets none).
        remove.click()
        expect(section.get_by_test_id("insight-budget-none")).to_have_text("No monthly limit")
        expect(section).to_have_attribute("data-limit", "")
        expect(section.get_by_role("meter")).to_have_count(0)
        expect(field).to_have_value("")
        expect(error).to_have_text("")
        expect(remove).to_be_disabled()
        expect(page.locator("#live-polite")).to_have_text("The space's monthly limit is removed")
        rest = budget_of(srv, ada)
        assert rest["monthly_model_tokens"] is None and rest["limit"] is None and rest["remaining"] is None, rest
    finally:
        # The module's world is shared: no limit left behind.
        srv.api("PUT", "/api/v1/insight/budget", {"monthly_model_tokens": None}, token=ada)


def test_monthly_model_tokens_under_the_servers_ceiling(ui_server_factory, ui_page_factory, axe_check):
    srv = ui_server_factory("--auth", "token", env={"QUARRY_MONTHLY_MODEL_TOKENS": "500"})
    srv.add_user("ada", "owner")
    ada = srv.token("ada")
    page = ui_page_factory(color_scheme="dark")
    login(page, srv.base, ada)
    open_insight(page, srv, "?tab=usage")
    section = page.get_by_test_id("insight-budget")
    # None of the space's own: the server's ceiling applies, and the form says so.
    expect(section).to_have_attribute("data-limit", "500")
    expect(section.get_by_role("meter")).to_have_attribute("aria-valuemax", "500")
    expect(section.get_by_test_id("insight-budget-source")).to_contain_text("The limit is the server's ceiling")
    expect(section.get_by_test_id("insight-budget-none")).to_have_count(0)
    expect(section.get_by_text("The server's ceiling of 500 tokens still applies.", exact=False)).to_be_visible()
    field = section.get_by_label("Monthly limit (tokens)")
    save = section.get_by_role("button", name="Save", exact=True)
    expect(section.get_by_role("button", name="Remove limit")).to_be_disabled()
    # Above the ceiling: kept, but the server's applies.
    field.fill("1000")
    save.click()
    expect(section.get_by_test_id("insight-budget-source")).to_have_text(
        "This space's own limit (1,000 tokens) is above the server's ceiling (500 tokens), so the server's applies."
    )
    expect(section).to_have_attribute("data-limit", "500")
    rest = srv.api("GET", "/api/v1/insight/budget", token=ada)
    assert (rest["monthly_model_tokens"], rest["server_limit"], rest["limit"]) == (1000, 500, 500), rest
    # Below it: the space's own applies.
    field.fill("200")
    save.click()
    expect(section).to_have_attribute("data-limit", "200")
    expect(section.get_by_test_id("insight-budget-source")).to_have_text(
        "The limit is this space's own, set by its owners; the server's ceiling is 500 tokens."
    )
    expect(section.get_by_role("meter")).to_have_attribute("aria-valuemax", "200")
    quiet(page)
    axe_check(page, "insight-budget-ceiling")


# ---------------------------------------------------------------------------------------------
# Who may read it


@pytest.mark.parametrize("locale, words", [("en-US", "needs admin access"), ("zh-CN", "查看空间的洞察")])
def test_an_editor_gets_the_refusal_and_no_data(ui_page_factory, world, locale, words):
    srv, bob = world["srv"], world["bob"]
    r = srv.http("GET", "/api/v1/insight/unanswered", token=bob)
    assert r.status == 403, (r.status, r.text)
    page = ui_page_factory(locale=locale)
    login(page, srv.base, bob)
    open_insight(page, srv)
    panels = page.get_by_role("tabpanel")
    error = panels.nth(0).get_by_test_id("insight-error")
    expect(error).to_contain_text(words)
    expect(error.get_by_role("alert")).to_be_visible()
    expect(page.get_by_test_id("insight-group")).to_have_count(0)
    page.get_by_role("tab").nth(1).click()
    expect(panels.nth(0)).to_contain_text(words)  # the Usage panel, the one shown now
    expect(page.get_by_test_id("insight-chart")).to_have_count(0)
    expect(page.get_by_test_id("insight-csv")).to_have_count(0)
    # The monthly model tokens are the admins' and owners' too: no section, no figures.
    assert srv.http("GET", "/api/v1/insight/budget", token=bob).status == 403
    expect(page.get_by_test_id("insight-budget")).to_have_count(0)
    if locale == "en-US":
        assert r.json()["detail"] in error.inner_text()


# ---------------------------------------------------------------------------------------------
# Query text off


def test_without_query_text_the_actions_that_need_it_are_off(ui_server_factory, ui_page_factory):
    srv = ui_server_factory("--auth", "token", env={"QUARRY_INSIGHT_QUERIES": "off"})
    srv.add_user("ada", "owner")
    ada = srv.token("ada")
    kb = srv.create_kb("handbook", token=ada)
    ask(srv, ada, PARKING)
    page = ui_page_factory()
    login(page, srv.base, ada)
    open_insight(page, srv, f"?into={kb['id']}")
    expect(page.get_by_test_id("insight-text-off")).to_be_visible()
    g = page.get_by_test_id("insight-group")
    expect(g).to_have_count(1)
    expect(g.get_by_test_id("insight-question")).to_have_text("(text not kept)")
    for key in ("closest", "note", "page"):
        expect(g.get_by_test_id(f"insight-{key}")).to_be_disabled()
    expect(g).to_contain_text("Needs the question's text, which is not kept.")
    expect(g.get_by_role("link", name="Add a source")).to_have_attribute("href", f"#/kb/{kb['id']}/sources?add=1")
    assert PARKING not in page.locator("#main").inner_text()
    # The dialog opens all the same, with no question in it.
    g.get_by_role("link", name="Add a source").click()
    dialog = page.get_by_role("dialog", name="Add a source to “handbook”")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("radio", name="Git repository")).to_be_focused()
    expect(dialog.get_by_test_id("add-source-question")).to_have_count(0)
    assert dialog.get_attribute("aria-describedby") is None
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    expect(page).to_have_url(re.compile(rf"#/kb/{re.escape(kb['id'])}/sources$"))
