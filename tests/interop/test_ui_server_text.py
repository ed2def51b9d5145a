"""Server messages on the Chinese page (issue 21, the web UI): conversion reasons, warnings and
validation errors come from the server in English; the page shows the ones it knows
(i18n/server.json, one table of the server's templates) in Chinese and anything else as sent.
And a document's note about pages without text is shown once (the converter also listed it as
a warning: "No text on page 1 · no text layer on page 1 (not OCR'd)").

Through the real ``quarry serve`` (embedded assets) and Chromium; the documents are converted
by the real server.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from test_ui_chat import make_pdf

ASSETS = Path(__file__).resolve().parents[2] / "crates" / "quarry-ui" / "assets"
SERVER_TEXT = json.loads((ASSETS / "i18n" / "server.json").read_text(encoding="utf-8"))
SLOW = 120_000  # ms: conversion on a debug build on busy cores
# A PDF whose first page has no text and whose second has some.
HALF_EMPTY_PDF = make_pdf(["", "Second page. The ferry timetable changes in winter."])


@pytest.fixture(scope="module")
def library(ui_module_server):
    """A knowledge base with a file that is not a PDF (failed) and a PDF with an empty page."""
    srv = ui_module_server
    kb = srv.create_kb("reasons")
    srv.upload(kb["id"], {"broken.pdf": os.urandom(4096), "half-empty.pdf": HALF_EMPTY_PDF})
    docs = {d["file_name"]: d for d in srv.wait_documents(kb["id"], 2)}
    assert docs["broken.pdf"]["status"] == "failed", docs
    assert docs["half-empty.pdf"]["status"] == "ready", docs
    return {"kb": kb, "docs": docs}


def open_kb(page, srv, kb_id: str) -> None:
    page.goto(f"{srv.base}/#/kb/{kb_id}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()


def doc_row(page, name: str):
    return page.locator("[data-testid=doc-row]").filter(has=page.get_by_role("button", name=name, exact=True))


def test_a_page_without_text_is_noted_once(ui_page, ui_module_server, library):
    page, srv = ui_page, ui_module_server
    doc = library["docs"]["half-empty.pdf"]
    # The API says it once, in its field; no warning repeats it.
    assert doc["pages_without_text"] == "page 1", doc
    assert not [w for w in doc.get("warnings") or [] if "text layer" in w], doc["warnings"]
    open_kb(page, srv, library["kb"]["id"])
    expect(doc_row(page, "half-empty.pdf").locator(".kb-notes")).to_have_text("No text on page 1")


def test_the_chinese_page_shows_server_reasons_in_chinese(ui_page_factory, ui_module_server, library, shot):
    page, srv = ui_page_factory(locale="zh-CN"), ui_module_server
    open_kb(page, srv, library["kb"]["id"])
    # A failed conversion's reason ("not a PDF file"), in the table and in the preview.
    broken = doc_row(page, "broken.pdf")
    expect(broken).to_have_attribute("data-status", "failed")
    expect(broken.locator("[data-testid=doc-error]")).to_have_text(re.compile(r"^不是 PDF 文件"))
    expect(doc_row(page, "half-empty.pdf").locator(".kb-notes")).to_have_text("无文本：第 1 页")
    text = page.locator("main").inner_text()
    for english in ("not a PDF", "page 1", "text layer"):
        assert english not in text, f"English {english!r} on the zh-CN page:\n{text}"
    shot(page, "kb-server-text-zh")

    # Validation errors of the API, in the dialog: a name in use (409), a chunk size out of range (400).
    page.goto(f"{srv.base}/#/kb")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()
    page.get_by_role("button", name="新建知识库").first.click()
    dialog = page.get_by_role("dialog", name="新建知识库")
    name = dialog.get_by_label("名称", exact=True)
    name.fill("reasons")
    dialog.get_by_role("button", name="创建").click()
    expect(dialog.get_by_text("“reasons”已存在")).to_be_visible()
    expect(dialog.get_by_text("already exists")).to_have_count(0)
    name.fill("manuals-zh")
    dialog.get_by_text("分块设置（可选）").click()
    dialog.get_by_label("分块大小（100–20000）").fill("50")
    dialog.get_by_role("button", name="创建").click()
    expect(dialog.get_by_text("分块大小必须在 100 到 20000 个字符之间（当前为 50）")).to_be_visible()


def test_the_english_page_shows_server_text_as_sent(ui_page, ui_module_server, library):
    page, srv = ui_page, ui_module_server
    open_kb(page, srv, library["kb"]["id"])
    expect(doc_row(page, "broken.pdf").locator("[data-testid=doc-error]")).to_have_text(library["docs"]["broken.pdf"]["error"])


def sample(slot: str) -> str:
    """A value for a placeholder of the server's templates (see SLOT_PATTERNS in app.js)."""
    if slot in ("n", "limit", "page", "count", "size", "list"):
        return "12"
    if slot == "format":
        return "DOCX"
    if slot == "pages":
        return "pages 3–9, 12"
    return "my file.pdf"


def fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)


def test_every_server_template_is_recognised_and_nothing_else_is_touched(ui_page_factory, ui_module_server):
    """Each "en" entry of i18n/server.json, filled with values, comes out as its own zh-CN entry
    (so no template hides another); names are never translated; unknown text stays as sent."""
    page, srv = ui_page_factory(locale="zh-CN"), ui_module_server
    page.goto(f"{srv.base}/#/kb")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()
    en, zh = SERVER_TEXT["en"], SERVER_TEXT["zh-CN"]
    cases, want = [], []
    for key, template in en.items():
        values = {slot: sample(slot) for slot in re.findall(r"\{(\w+)\}", template)}
        cases.append(fill(template, values))
        shown = {k: ("第 3–9, 12 页" if k == "pages" else v) for k, v in values.items()}
        want.append(fill(zh[key], shown))
    extra = {
        # A knowledge base named like a message keeps its name.
        "collection 'empty file' already exists": "“empty file”已存在",
        # A reason behind a file name, and several joined (a refused upload of two files).
        "a.exe: file name has no extension, so its type is unknown (supported: pdf)": "a.exe: 文件名没有扩展名，无法判断类型（支持：pdf）",
        "a.bin: exceeds 100 MB; b.bin: exceeds 100 MB": "a.bin: 超过 100 MB；b.bin: 超过 100 MB",
        # Unknown: as sent.
        "the moon is made of cheese": "the moon is made of cheese",
        "page one is missing": "page one is missing",
        "encrypted things are not welcome": "encrypted things are not welcome",
    }
    got = page.evaluate(
        """async (texts) => {
          const { serverText } = await import('/assets/js/app.js');
          return texts.map((s) => serverText(s));
        }""",
        cases + list(extra),
    )
    assert got[: len(cases)] == want
    assert got[len(cases) :] == list(extra.values())


def refused(srv, method: str, path: str, body=None) -> str:
    """The API's own words for a request it refuses."""
    r = srv.http(method, path, body=body)
    assert 400 <= r.status < 500, (method, path, r.status, r.text)
    return r.json()["detail"]


def test_group_and_reader_messages_of_the_server_are_translated(ui_page_factory, ui_module_server, tmp_path):
    """The server's own words (not copies of them) for groups, a document's readers and a
    source's reader mapping come out in Chinese: a change of wording on the server that the
    table does not follow fails here."""
    srv = ui_module_server
    srv.add_user("ann", role="viewer")
    srv.cli("user", "add", "zoe")  # in no space
    srv.api("POST", "/api/v1/groups", {"name": "hr"}, expect=201)
    kb = srv.create_kb("reader-words")
    srv.upload(kb["id"], {"pay.md": "# Pay\nBands.\n"})
    (doc,) = srv.wait_documents(kb["id"], 1)
    doc_url = f"/api/v1/knowledge-bases/{kb['id']}/documents/{doc['id']}"
    folder = tmp_path / "synced"
    folder.mkdir()
    (folder / "a.md").write_text("# A\nSynced.\n")
    sources = f"/api/v1/knowledge-bases/{kb['id']}/sources"
    s = srv.api("POST", sources, {"kind": "folder", "path": str(folder)}, expect=201)
    srv.api("POST", f"/api/v1/sources/{s['id']}/sync")
    synced = next(d for d in srv.documents(kb["id"]) if d.get("synced"))

    def mapping(readers) -> str:
        return refused(srv, "POST", sources, {"kind": "folder", "path": str(tmp_path), "readers": readers})

    messages = [
        refused(srv, "POST", "/api/v1/groups", {"name": "bad name!"}),
        refused(srv, "POST", "/api/v1/groups", {"name": "123e4567-e89b-12d3-a456-426614174000"}),
        refused(srv, "POST", "/api/v1/groups", {"name": "hr"}),
        refused(srv, "DELETE", "/api/v1/groups/nope"),
        refused(srv, "PUT", "/api/v1/groups/hr/members/nobody"),
        refused(srv, "PUT", "/api/v1/groups/hr/members/zoe"),
        refused(srv, "DELETE", "/api/v1/groups/hr/members/ann"),
        refused(srv, "PATCH", doc_url, {"readers": ["hr"]}),
        refused(srv, "PATCH", doc_url, {"readers": [f"user:u{i}" for i in range(101)]}),
        refused(srv, "PATCH", f"/api/v1/knowledge-bases/{kb['id']}/documents/{synced['id']}", {"readers": ["group:hr"]}),
        mapping({"rules": [{"paths": "hr/**", "readers": ["hr"]}]}),
        mapping({"rules": []}),
        mapping({"rules": [{"paths": "hr/[", "readers": ["group:hr"]}]}),
        mapping({"rules": [{"paths": " , ", "readers": ["group:hr"]}]}),
        mapping({"rules": [{"paths": "hr/**", "readers": ["everyone", "group:hr"]}]}),
        mapping({"rules": [{"paths": f"d{i}/**", "readers": []} for i in range(201)]}),
    ]
    page = ui_page_factory(locale="zh-CN")
    page.goto(f"{srv.base}/#/kb")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()
    got = page.evaluate(
        """async (texts) => {
          const { serverText } = await import('/assets/js/app.js');
          return texts.map((s) => serverText(s));
        }""",
        messages,
    )
    for sent, shown in zip(messages, got):
        assert shown != sent and re.search(r"[\u4e00-\u9fff]", shown), f"not translated: {sent!r}"
        assert not re.search(r"\b[a-z]+ [a-z]+ [a-z]+\b", shown), f"English left in {shown!r} (for {sent!r})"
