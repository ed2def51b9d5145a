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
  close"; "Write a note" saves the edited note (``create_knowledge`` over
  ``/api/v1/mcp?resource=``): it exists over REST and a knowledge search for the question now
  finds it; "Request a page" writes a ``draft`` page tagged ``requested`` (checked over REST),
  and a second request shows the API's 409 beside the group, one version written, the first
  request's link kept;
- Usage: cards, the chart with today's searches, its table, the subjects and the people; the
  tabs answer the arrow keys; "Download CSV" saves a file with bob's ``searches`` line;
- bob opening the page gets the API's refusal (in Chinese too, through i18n/server.json), and
  no data;
- with query text off (``QUARRY_INSIGHT_QUERIES=off``) a group reads "(text not kept)" and the
  actions that need its text are off;
- axe-core on both tabs in light and dark; at 375 pixels no sideways scroll on either tab;
  screenshots (``ui-insight-unanswered-*``, ``ui-insight-usage-*``).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path

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
    expect(first.get_by_role("link", name="Add a source")).to_have_attribute("href", f"#/kb/{kb['id']}/sources")
    assert f"into={kb['id']}" in page.evaluate("() => location.hash")

    # Write a note: the question as its title, the answer typed under the heading.
    question = first.get_by_test_id("insight-question").inner_text().strip()
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
    axe_check(page, "insight-usage-zh", schemes=("dark",))


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
    expect(g.get_by_role("link", name="Add a source")).to_have_attribute("href", f"#/kb/{kb['id']}/sources")
    assert PARKING not in page.locator("#main").inner_text()
