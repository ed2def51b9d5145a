"""The knowledge-base pages of the web UI (js/kb.js, js/markdown.js) through the real
`quarry serve` (embedded assets) and a real Chromium (Playwright; fixtures in ui_support.py),
with real documents written by people (``QUARRY_TEST_DOCS``):

- `#/kb`: create (client-side and API validation errors shown on the field), the card's live
  counts, edit, delete (confirmed);
- `#/kb/<id>`: upload through the file input (a multi-page PDF with a text layer, a DOCX, an
  XLSX, random bytes named .pdf, an unsupported type): per-file progress bars labelled by the
  file, each document reaching `ready` in the table by polling, the corrupt one `failed` with
  its reason, retried and deleted; filters by status and name (server-side); sorting and
  pages; bulk delete; state after a reload;
- the preview drawer: Original (PDF in an iframe at `#page=N`), Markdown (rendered, split by
  page), Chunks (ordered by page, the page's chunks highlighted); the deep link
  `#/kb/<id>?doc=<id>&page=N`;
- search in the knowledge base: a citation on page ≥ 2 opens the drawer on that page (iframe,
  page indicator, highlighted chunk);
- editing and deleting from the knowledge-base page; axe-core on the list, the page with
  documents and the open drawer; screenshots; one pass in zh-CN.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

DOCS = Path(os.environ["QUARRY_TEST_DOCS"]) if os.environ.get("QUARRY_TEST_DOCS") else None

PDF = "en-dmca-summary-1998.pdf"  # 18 pages with a text layer
DOCX = "officer-example-headings-table.docx"
XLSX = "readxl-deaths-messy-layout.xlsx"
# A passage that only page 4 of the PDF has: keyword search cites that page.
PAGE4_QUERY = "macrovision videocassette recorders"
SLOW = 120_000  # ms: conversion on a debug build on two busy cores


@pytest.fixture
def kb_page(ui_page):
    """``ui_page`` (ui_support does not count the PDF viewer's own loads as requests)."""
    yield ui_page


@pytest.fixture
def zh_page(ui_page_factory):
    yield ui_page_factory(locale="zh-CN")


def docs_dir() -> Path:
    if DOCS is None or not DOCS.is_dir():
        pytest.skip("skipped: QUARRY_TEST_DOCS not set (scripts/test fetches the real documents)")
    return DOCS


def doc_path(name: str) -> Path:
    d = docs_dir()
    return d / name.rsplit(".", 1)[1] / name


def open_page(page, srv, path: str = "#/kb"):
    page.goto(f"{srv.base}/{path}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()


def doc_row(page, name: str):
    return page.locator("[data-testid=doc-row]").filter(has=page.get_by_role("button", name=name, exact=True))


@pytest.fixture(scope="module")
def library(ui_module_server):
    """A knowledge base with the PDF, the DOCX and the XLSX, all ready (set up over the API)."""
    srv = ui_module_server
    kb = srv.create_kb("library", description="Real documents for the preview and search tests")
    srv.upload(kb["id"], [(n, doc_path(n).read_bytes()) for n in (PDF, DOCX, XLSX)])
    docs = srv.wait_documents(kb["id"], 3)
    assert all(d["status"] == "ready" for d in docs), docs
    return {"kb": kb, "docs": {d["file_name"]: d for d in docs}}


# ---------------------------------------------------------------------------------------------
# #/kb


def test_list_create_edit_delete(ui_page, ui_module_server, axe_check, shot):
    page, srv = ui_page, ui_module_server
    srv.create_kb("taken")
    open_page(page, srv)
    expect(page.get_by_role("heading", level=1, name="Knowledge bases")).to_be_visible()

    page.get_by_role("button", name="New knowledge base").first.click()
    dialog = page.get_by_role("dialog", name="New knowledge base")
    name = dialog.get_by_label("Name", exact=True)
    # A space: refused before any request, with a suggestion, on the field.
    name.fill("team docs")
    dialog.get_by_role("button", name="Create").click()
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(dialog.get_by_role("alert").filter(has_text="team-docs")).to_be_visible()
    # The API's own errors: a name in use (409), a chunk size out of range (400).
    name.fill("taken")
    dialog.get_by_role("button", name="Create").click()
    expect(dialog.get_by_text("already exists")).to_be_visible()
    expect(name).to_have_attribute("aria-invalid", "true")
    name.fill("manuals")
    dialog.get_by_text("Chunking (optional)").click()
    dialog.get_by_label("Chunk size (100–20000)").fill("50")
    dialog.get_by_role("button", name="Create").click()
    expect(dialog.get_by_text("chunk_size must be between 100 and 20000")).to_be_visible()
    dialog.get_by_label("Chunk size (100–20000)").fill("800")
    dialog.get_by_label("Overlap").fill("100")
    dialog.get_by_label("Description").fill("Product manuals")
    dialog.get_by_role("button", name="Create").click()

    # Created: the page of the new knowledge base.
    expect(page.get_by_role("heading", level=1, name="manuals")).to_be_visible()
    expect(page.get_by_text("chunks of 800 characters, 100 overlap")).to_be_visible()
    kb = next(k for k in srv.api("GET", "/api/v1/knowledge-bases") if k["name"] == "manuals")
    assert (kb["description"], kb["chunk_size"], kb["chunk_overlap"]) == ("Product manuals", 800, 100)
    assert page.evaluate("location.hash") == f"#/kb/{kb['id']}"

    # The list: a card per knowledge base, with its counts.
    page.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name="Knowledge bases").click()
    card = page.locator("[data-testid=kb-card]").filter(has=page.get_by_role("link", name="manuals", exact=True))
    expect(card).to_be_visible()
    expect(card.get_by_text("Product manuals")).to_be_visible()
    expect(card.get_by_text("0 ready")).to_be_visible()
    expect(card.get_by_text("0 documents")).to_be_visible()

    # A document added elsewhere (the API) shows in the counts without a reload when the
    # window gets the focus back (an idle page does not poll); then polling runs until it is done.
    srv.upload(kb["id"], {"guide.md": "# Guide\n\nInstall the pump, then prime it.\n"})
    page.evaluate("window.dispatchEvent(new Event('focus'))")
    expect(card.get_by_text("1 ready")).to_be_visible(timeout=SLOW)
    expect(card.get_by_text("1 document ·")).to_be_visible()
    # (Toasts fade after 4 s; axe looks at the page itself.)
    expect(page.locator("#toasts .toast")).to_have_count(0)
    axe_check(page, "kb-list")
    shot(page, "kb-list")

    # Edit.
    card.get_by_role("button", name="Edit manuals").click()
    dialog = page.get_by_role("dialog", name="Edit “manuals”")
    expect(dialog.get_by_text("Chunking: 800 characters with 100 overlap")).to_be_visible()
    dialog.get_by_label("Description").fill("Pump manuals")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()
    expect(card.get_by_text("Pump manuals")).to_be_visible()
    assert srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}")["description"] == "Pump manuals"

    # Delete: cancel first, then confirm.
    card.get_by_role("button", name="Delete manuals").click()
    confirm = page.get_by_role("dialog", name="Please confirm")
    expect(confirm.get_by_text("and its 1 document?")).to_be_visible()
    confirm.get_by_role("button", name="Cancel").click()
    expect(card).to_be_visible()
    card.get_by_role("button", name="Delete manuals").click()
    page.get_by_role("dialog", name="Please confirm").get_by_role("button", name="Delete knowledge base").click()
    expect(card).to_have_count(0)
    assert not [k for k in srv.api("GET", "/api/v1/knowledge-bases") if k["name"] == "manuals"]


# ---------------------------------------------------------------------------------------------
# #/kb/<id>: uploads, the table, filters, retry, bulk delete


def test_upload_status_filters_retry_and_bulk_delete(ui_page, ui_module_server, axe_check, shot, tmp_path):
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("uploads")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(os.urandom(4096))
    unsupported = tmp_path / "setup.exe"
    unsupported.write_bytes(b"MZ\x90\x00")
    open_page(page, srv, f"#/kb/{kb['id']}")
    expect(page.get_by_text("No documents yet")).to_be_visible()

    # The drop zone is a real button (keyboard-operable) that opens the file picker.
    drop = page.get_by_role("button", name=re.compile("Drop files or folders here"))
    expect(drop).to_be_visible()
    with page.expect_file_chooser() as chooser:
        drop.focus()
        page.keyboard.press("Enter")
    assert chooser.value.is_multiple()

    files = [doc_path(PDF), doc_path(DOCX), doc_path(XLSX), broken, unsupported]
    page.locator("[data-testid=kb-file-input]").set_input_files([str(f) for f in files])

    # Per-file progress bars, labelled by the file (the unsupported one is refused at once).
    for f in files[:4]:
        expect(page.get_by_role("progressbar", name=f.name, exact=True)).to_be_attached()
    uploads = page.get_by_role("list", name="Uploads")
    exe_row = uploads.locator("[data-testid=upload-row][data-name='setup.exe']")
    expect(exe_row.get_by_text("Unsupported type")).to_be_visible()
    expect(exe_row.get_by_text("cannot be converted")).to_be_visible()

    # Each document reaches ready in the table (live polling); the corrupt one fails with its reason.
    for name in (PDF, DOCX, XLSX):
        expect(doc_row(page, name)).to_have_attribute("data-status", "ready", timeout=SLOW)
        expect(uploads.locator(f"[data-testid=upload-row][data-name='{name}']")).to_have_attribute("data-state", "ready")
    bad = doc_row(page, "broken.pdf")
    expect(bad).to_have_attribute("data-status", "failed", timeout=SLOW)
    expect(bad.locator("[data-testid=doc-error]")).to_have_text("not a PDF file")
    expect(uploads.locator("[data-testid=upload-row][data-name='broken.pdf']").get_by_text("not a PDF file")).to_be_visible()
    expect(doc_row(page, PDF)).to_contain_text("18 pages")
    expect(page.locator(".kb-summary").get_by_text("3 ready")).to_be_visible()
    expect(page.locator(".kb-summary").get_by_text("1 failed")).to_be_visible()
    assert len(srv.documents(kb["id"])) == 4  # setup.exe never left the browser

    # A second upload of the same bytes is reported as a duplicate, next to the file.
    page.locator("[data-testid=kb-file-input]").set_input_files([str(doc_path(DOCX))])
    expect(uploads.locator(f"[data-testid=upload-row][data-name='{DOCX}'][data-state=duplicate]")).to_be_visible()
    expect(uploads.get_by_text(f"Same content as “{DOCX}”")).to_be_visible()

    axe_check(page, "kb-documents")
    shot(page, "kb-documents")

    # Retry the failed one: it is queued again and fails again, with the same reason.
    before = next(d for d in srv.documents(kb["id"]) if d["file_name"] == "broken.pdf")
    bad.get_by_role("button", name="Retry broken.pdf").click()
    expect(page.locator("#toasts").get_by_text("1 document queued again")).to_be_visible()
    after = next(d for d in srv.wait_documents(kb["id"], 4) if d["file_name"] == "broken.pdf")
    assert after["status"] == "failed" and after["updated_at"] > before["updated_at"], (before, after)
    expect(bad).to_have_attribute("data-status", "failed", timeout=SLOW)
    expect(bad.locator("[data-testid=doc-error]")).to_have_text("not a PDF file")

    # Filters, server-side: status, then name.
    page.get_by_label("Status", exact=True).select_option("failed")
    expect(page.locator("[data-testid=doc-row]")).to_have_count(1)
    expect(bad).to_be_visible()
    page.get_by_label("Status", exact=True).select_option("ready")
    expect(page.locator("[data-testid=doc-row]")).to_have_count(3)
    page.get_by_label("File name", exact=True).fill("dmca")
    expect(page.locator("[data-testid=doc-row]")).to_have_count(1)
    expect(doc_row(page, PDF)).to_be_visible()
    page.get_by_label("File name", exact=True).fill("nothing-like-this")
    expect(page.get_by_text("No documents match these filters.")).to_be_visible()
    page.get_by_label("File name", exact=True).fill("")
    page.get_by_label("Status", exact=True).select_option("")
    expect(page.locator("[data-testid=doc-row]")).to_have_count(4)

    # Sorting by name (client-side over the server's list).
    page.get_by_role("button", name="Name", exact=True).click()
    names = page.locator("[data-testid=doc-row] .kb-doc-name").all_inner_texts()
    assert names == sorted(names, key=str.lower), names
    expect(page.locator("th[aria-sort=ascending]")).to_have_text(re.compile("Name"))

    # Delete one document from its row (confirmed).
    doc_row(page, XLSX).get_by_role("button", name=f"Delete {XLSX}").click()
    page.get_by_role("dialog", name="Please confirm").get_by_role("button", name="Delete").click()
    expect(doc_row(page, XLSX)).to_have_count(0)

    # Bulk: select two, delete them (confirmed).
    page.get_by_role("checkbox", name="Select broken.pdf").check()
    page.get_by_role("checkbox", name=f"Select {DOCX}").check()
    bulk = page.get_by_role("region", name="Bulk actions")
    expect(bulk.get_by_text("2 selected")).to_be_visible()
    expect(bulk.get_by_role("button", name="Retry 1 failed")).to_be_enabled()
    bulk.get_by_role("button", name="Delete selected").click()
    confirm = page.get_by_role("dialog", name="Please confirm")
    expect(confirm.get_by_text("Delete 2 selected documents")).to_be_visible()
    confirm.get_by_role("button", name="Delete").click()
    expect(page.locator("[data-testid=doc-row]")).to_have_count(1)
    expect(bulk).to_be_hidden()
    assert [d["file_name"] for d in srv.documents(kb["id"])] == [PDF]

    # State comes from the server: a reload shows the same.
    page.reload()
    expect(page.locator(".page[data-ready=true]")).to_be_attached()
    expect(page.locator("[data-testid=doc-row]")).to_have_count(1)
    expect(doc_row(page, PDF)).to_have_attribute("data-status", "ready")


def test_pages_of_documents(ui_page, ui_module_server):
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("many")
    srv.upload(kb["id"], {f"note-{i:02}.md": f"# Note {i}\n\nBody of note {i}.\n" for i in range(30)})
    srv.wait_documents(kb["id"], 30)
    open_page(page, srv, f"#/kb/{kb['id']}")
    expect(page.locator("[data-testid=doc-row]")).to_have_count(25)
    expect(page.locator("[data-testid=doc-range]")).to_have_text("1–25 of 30")
    pager = page.get_by_role("navigation", name="Document pages")
    pager.get_by_role("button", name="Next").click()
    expect(page.locator("[data-testid=doc-row]")).to_have_count(5)
    expect(pager.get_by_text("Page 2 of 2")).to_be_visible()
    pager.get_by_label("Per page").select_option("50")
    expect(page.locator("[data-testid=doc-row]")).to_have_count(30)
    # Select the page, then delete it all in one go.
    page.get_by_role("checkbox", name="Select all documents on this page").check()
    expect(page.get_by_role("region", name="Bulk actions").get_by_text("30 selected")).to_be_visible()
    page.get_by_role("button", name="Delete selected").click()
    page.get_by_role("dialog", name="Please confirm").get_by_role("button", name="Delete").click()
    expect(page.get_by_text("No documents yet")).to_be_visible()
    assert srv.documents(kb["id"]) == []


# ---------------------------------------------------------------------------------------------
# The preview drawer, search and citations


def test_preview_drawer_tabs(kb_page, ui_module_server, library, axe_check, shot):
    page, srv = kb_page, ui_module_server
    kb = library["kb"]
    open_page(page, srv, f"#/kb/{kb['id']}")
    doc_row(page, PDF).get_by_role("button", name=PDF, exact=True).click()
    drawer = page.get_by_role("dialog", name=PDF)
    expect(drawer).to_be_visible()
    pdf = library["docs"][PDF]
    assert page.evaluate("location.hash") == f"#/kb/{kb['id']}?doc={pdf['id']}&page=1"

    # Original: the PDF in an iframe at page 1; the page indicator.
    frame = drawer.locator("[data-testid=preview-frame]")
    expect(frame).to_have_attribute("src", re.compile(rf"/documents/{pdf['id']}/preview#page=1$"))
    indicator = drawer.locator("[data-testid=preview-page]")
    expect(indicator).to_have_text("Page 1 of 18")
    drawer.get_by_role("button", name="Next page").click()
    expect(indicator).to_have_attribute("data-page", "2")
    expect(frame).to_have_attribute("src", re.compile(r"#page=2$"))

    # Markdown, rendered (headings, not "###"), split by page.
    drawer.get_by_role("tab", name="Markdown").click()
    md = drawer.locator(".kb-md")
    expect(md.get_by_role("heading", name="THE DIGITAL MILLENNIUM COPYRIGHT ACT OF 1998")).to_be_visible()
    expect(md.locator("section[data-page='2']")).to_have_class(re.compile("is-current"))
    assert "###" not in md.inner_text()

    # Chunks, ordered by page then index; page 2's highlighted.
    drawer.get_by_role("tab", name="Chunks").click()
    chunks = drawer.locator("[data-testid=chunk]")
    expect(chunks.first).to_be_visible()
    pages = [int(p) for p in chunks.evaluate_all("els => els.map(e => e.dataset.page)")]
    assert pages == sorted(pages) and pages[0] == 1 and pages[-1] >= 17, pages
    current = drawer.locator("[data-testid=chunk][aria-current=true]")
    expect(current.first).to_be_in_viewport()
    assert set(current.evaluate_all("els => els.map(e => e.dataset.page)")) == {"2"}
    axe_check(page, "kb-preview")
    shot(page, "kb-preview")
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(page).to_have_url(re.compile(rf"#/kb/{kb['id']}$"))

    # A DOCX: no inline original (a download link), its Markdown first, with the table.
    doc_row(page, DOCX).get_by_role("button", name=DOCX, exact=True).click()
    drawer = page.get_by_role("dialog", name=DOCX)
    expect(drawer.get_by_role("tab", name="Markdown")).to_have_attribute("aria-selected", "true")
    expect(drawer.locator(".kb-md table").first).to_be_visible()
    drawer.get_by_role("tab", name="Original").click()
    expect(drawer.get_by_role("link", name=f"Download {DOCX}")).to_have_attribute("href", re.compile(r"/preview$"))
    drawer.get_by_role("button", name="Close").click()
    expect(drawer).to_be_hidden()


def test_search_citation_opens_the_cited_page(kb_page, ui_module_server, library):
    page, srv = kb_page, ui_module_server
    kb = library["kb"]
    pdf = library["docs"][PDF]
    open_page(page, srv, f"#/kb/{kb['id']}")
    page.get_by_role("tab", name="Search").click()
    page.get_by_label("Search this knowledge base").fill(PAGE4_QUERY)
    page.get_by_role("button", name="Search", exact=True).click()
    cite = page.locator("[data-testid=citation]").filter(has_text=PDF).first
    expect(cite).to_be_visible()
    n = int(cite.get_attribute("data-page"))
    assert n >= 2
    expect(cite).to_have_text(f"{PDF}, p. {n}")
    expect(page.locator("[data-testid=search-hit]").first.locator("mark").first).to_be_visible()

    # Whole words, no stop-words, no Markdown markers (issue 41 item 24): "is" and "the" are
    # not marked, not even inside "persistent" or "other".
    page.get_by_label("Search this knowledge base").fill("what is the macrovision")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("[data-testid=search-hit]").first.locator("mark").first).to_be_visible()
    marked = page.locator("[data-testid=search-hit] mark").all_inner_texts()
    assert marked and {m.lower() for m in marked} == {"macrovision"}, marked
    excerpts = " ".join(page.locator(".kb-hit-text").all_inner_texts())
    assert "**" not in excerpts and "\n#" not in excerpts, excerpts
    page.get_by_label("Search this knowledge base").fill(PAGE4_QUERY)
    page.get_by_role("button", name="Search", exact=True).click()
    cite = page.locator("[data-testid=citation]").filter(has_text=PDF).first
    expect(cite).to_be_visible()

    cite.click()
    drawer = page.get_by_role("dialog", name=PDF)
    expect(drawer).to_be_visible()
    expect(drawer.locator("[data-testid=preview-page]")).to_have_attribute("data-page", str(n))
    expect(drawer.locator("[data-testid=preview-page]")).to_have_text(f"Page {n} of 18")
    expect(drawer.locator("[data-testid=preview-frame]")).to_have_attribute("src", re.compile(rf"#page={n}$"))
    assert page.evaluate("location.hash") == f"#/kb/{kb['id']}?doc={pdf['id']}&page={n}"
    drawer.get_by_role("tab", name="Chunks").click()
    current = drawer.locator("[data-testid=chunk][aria-current=true]")
    expect(current.first).to_be_attached()
    assert set(current.evaluate_all("els => els.map(e => e.dataset.page)")) == {str(n)}
    # The chunk holding the cited line is marked and scrolled into view.
    cited = drawer.locator("[data-testid=chunk].is-cited")
    expect(cited).to_be_in_viewport()
    expect(cited).to_have_attribute("data-page", str(n))
    drawer.get_by_role("tab", name="Markdown").click()
    expect(drawer.locator(f".kb-md section[data-page='{n}']")).to_be_in_viewport()

    # The deep link opens the drawer directly, on its page.
    page.goto(f"{srv.base}/#/kb/{kb['id']}?doc={pdf['id']}&page=3")
    drawer = page.get_by_role("dialog", name=PDF)
    expect(drawer.locator("[data-testid=preview-page]")).to_have_attribute("data-page", "3")
    expect(drawer.locator("[data-testid=preview-frame]")).to_have_attribute("src", re.compile(r"#page=3$"))


def test_search_metadata_filter(ui_page, ui_module_server, axe_check, shot):
    """The search's metadata filter (issue 44): the field list comes from `GET /api/v1/metadata`
    (with document counts), a condition becomes a chip, chips are combined with AND, a filter
    matching nothing shows the empty state, removing the chips brings every document back."""
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("filtered")
    # Each document's `status` given with its upload (the `metadata` form field).
    for name, status, text in (
        ("published.md", "published", "# Pump guide\n\nPrime the centrifugal pump before starting it.\n"),
        ("draft.md", "draft", "# Pump notes\n\nThe centrifugal pump is noisy when dry.\n"),
    ):
        boundary = "quarry-metadata-test"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{{"status": "{status}"}}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            f"Content-Type: text/markdown\r\n\r\n{text}\r\n--{boundary}--\r\n"
        ).encode()
        r = srv.http(
            "POST", f"/api/v1/knowledge-bases/{kb['id']}/documents", data=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert r.status in (200, 201, 202), r.text
    docs = srv.wait_documents(kb["id"], 2)
    assert all(d["status"] == "ready" for d in docs), docs
    open_page(page, srv, f"#/kb/{kb['id']}")
    page.get_by_role("tab", name="Search").click()
    box = page.locator("[data-testid=search-filter]")
    expect(box).to_be_visible()
    field = box.get_by_label("Field", exact=True)
    expect(field.locator("option[value=status]")).to_have_text("status (2)")
    page.get_by_label("Minimum score (0–1)").fill("0")
    page.get_by_label("Search this knowledge base").fill("centrifugal pump")
    search = page.get_by_role("button", name="Search", exact=True)
    cites = page.locator("[data-testid=citation]")

    # Unfiltered: both documents.
    search.click()
    expect(cites.filter(has_text="published.md").first).to_be_visible()
    expect(cites.filter(has_text="draft.md").first).to_be_visible()

    # status is published: only that one; the condition is now a chip.
    field.select_option("status")
    box.get_by_label("Condition", exact=True).select_option(label="is")
    value = box.get_by_label("Value", exact=True)
    expect(page.locator("#kb-filter-values option[value=published]")).to_be_attached()
    value.fill("published")
    search.click()
    chips = box.locator("[data-testid=filter-chip]")
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text("status is published")
    expect(cites.filter(has_text="published.md").first).to_be_visible()
    expect(cites.filter(has_text="draft.md")).to_have_count(0)
    axe_check(page, "kb-search-filter", schemes=("light",))
    shot(page, "kb-search-filter")

    # AND with status is archived: nothing matches.
    value.fill("archived")
    box.get_by_role("button", name="Add condition").click()
    expect(chips).to_have_count(2)
    search.click()
    expect(page.locator(".kb-results").get_by_text("Nothing matched")).to_be_visible()
    expect(cites).to_have_count(0)

    # Chips removed (by keyboard on the second): both documents again.
    box.get_by_role("button", name="Remove condition: status is archived").press("Enter")
    box.get_by_role("button", name="Remove condition: status is published").click()
    expect(chips).to_have_count(0)
    search.click()
    expect(cites.filter(has_text="published.md").first).to_be_visible()
    expect(cites.filter(has_text="draft.md").first).to_be_visible()


# ---------------------------------------------------------------------------------------------
# Editing and deleting from the knowledge base's page; Chinese


def test_edit_and_delete_from_the_kb_page(ui_page, ui_module_server):
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("drafts", description="Old")
    open_page(page, srv, f"#/kb/{kb['id']}")
    page.get_by_role("button", name="Edit", exact=True).click()
    dialog = page.get_by_role("dialog", name="Edit “drafts”")
    dialog.get_by_label("Name", exact=True).fill("final-drafts")
    dialog.get_by_label("Description").fill("Reviewed")
    dialog.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1, name="final-drafts")).to_be_visible()
    expect(page.get_by_text("Reviewed", exact=True)).to_be_visible()
    got = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}")
    assert (got["name"], got["description"]) == ("final-drafts", "Reviewed")

    page.get_by_role("button", name="Delete", exact=True).click()
    page.get_by_role("dialog", name="Please confirm").get_by_role("button", name="Delete knowledge base").click()
    expect(page.get_by_role("heading", level=1, name="Knowledge bases")).to_be_visible()
    expect(page.get_by_role("link", name="final-drafts")).to_have_count(0)
    srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}", expect=404)


def test_missing_kb_shows_an_error(ui_page, ui_module_server):
    page, srv = ui_page, ui_module_server
    open_page(page, srv, "#/kb/no-such-kb")
    expect(page.get_by_role("alert")).to_contain_text("“no-such-kb” was not found")


def test_chinese(zh_page, ui_module_server, library, axe_check):
    page, srv = zh_page, ui_module_server
    open_page(page, srv)
    expect(page.get_by_role("heading", level=1, name="知识库")).to_be_visible()
    expect(page.get_by_role("button", name="新建知识库").first).to_be_visible()
    card = page.locator("[data-testid=kb-card]").filter(has=page.get_by_role("link", name="library", exact=True))
    expect(card.get_by_text("3 个就绪")).to_be_visible()

    open_page(page, srv, f"#/kb/{library['kb']['id']}")
    expect(page.get_by_role("tab", name="文档")).to_be_visible()
    expect(page.get_by_role("heading", name="上传")).to_be_visible()
    expect(page.get_by_role("button", name="选择文件", exact=True)).to_be_visible()
    expect(page.get_by_role("columnheader", name="名称")).to_be_visible()
    expect(doc_row(page, PDF).get_by_text("就绪")).to_be_visible()
    expect(doc_row(page, PDF).get_by_text("18 页")).to_be_visible()
    text = page.locator("main").inner_text()
    for english in ("Upload", "Documents", "Status", "Ready", "Search", "Choose files", "Per page"):
        assert not re.search(rf"\b{english}\b", text), f"English {english!r} on the zh-CN page"
    axe_check(page, "kb-documents-zh", schemes=("light",))

    page.get_by_role("tab", name="检索").click()
    page.get_by_label("检索本知识库").fill(PAGE4_QUERY)
    page.get_by_role("button", name="搜索", exact=True).click()
    cite = page.locator("[data-testid=citation]").first
    expect(cite).to_have_text(re.compile(rf"^{re.escape(PDF)}，第 \d+ 页$"))
    cite.click()
    drawer = page.get_by_role("dialog", name=PDF)
    expect(drawer.get_by_role("tab", name="原件")).to_be_visible()
    expect(drawer.locator("[data-testid=preview-page]")).to_have_text(re.compile(r"^第 \d+ / 18 页$"))


# ---------------------------------------------------------------------------------------------
# markdown.js (shared with the chat page)

MARKDOWN = "\n".join(
    [
        "# Title",
        "",
        "Some *em*, **strong**, `code`, ~~gone~~ and snake_case_name.",
        "[web](https://example.com/a_(b)) [rel](./notes.md) [js](javascript:alert(1)) [js2](JAVASCRIPT:alert(2))",
        "[data](data:text/html,<b>x</b>) [proto](//evil.example/x) [proto2](/\\evil.example/x)",
        "![ok](/api/v1/files/images/abc.png) ![remote](http://evil.example/x.png) ![up](/api/v1/files/../secret)",
        "<script>window.__pwned = 1</script> <img src=x onerror=alert(1)>",
        "",
        "- a",
        "- b",
        "  - nested",
        "- c",
        "",
        "1. one",
        "2. two",
        "",
        "> quoted",
        "",
        "```js",
        'const x = "<b>";',
        "```",
        "",
        "| Left | Right |",
        "| --- | ---: |",
        "| a\\|b | 1<br>2 |",
        "",
        "---",
    ]
)


def test_markdown_renderer_builds_safe_dom(ui_page, ui_module_server):
    page, srv = ui_page, ui_module_server
    open_page(page, srv)
    got = page.evaluate(
        """async (md) => {
          const { renderMarkdown } = await import('/assets/js/markdown.js');
          const box = document.createElement('div');
          box.append(renderMarkdown(md, { headingOffset: 1 }));
          const q = (s) => [...box.querySelectorAll(s)];
          return {
            h2: q('h2').map((e) => e.textContent),
            em: q('em').map((e) => e.textContent), strong: q('strong').map((e) => e.textContent),
            code: q('p code').map((e) => e.textContent), del: q('del').map((e) => e.textContent),
            links: q('a').map((e) => [e.textContent, e.getAttribute('href')]),
            imgs: q('img').map((e) => e.getAttribute('src')),
            scripts: q('script').length, handlers: q('[onerror]').length,
            nested: q('ul ul li').map((e) => e.textContent),
            li_p: q('ul > li > p').length, ol: q('ol li').map((e) => e.textContent),
            quote: q('blockquote').map((e) => e.textContent.trim()),
            pre: q('pre code.language-js').map((e) => e.textContent),
            th: q('th').map((e) => [e.textContent, e.getAttribute('scope'), e.style.textAlign]),
            td: q('td').map((e) => e.innerHTML), hr: q('hr').length,
            text: box.textContent, pwned: window.__pwned === 1,
          };
        }""",
        MARKDOWN,
    )
    assert got["h2"] == ["Title"]
    assert got["em"] == ["em"] and got["strong"] == ["strong"] and got["del"] == ["gone"]
    assert got["code"] == ["code"]
    assert "snake_case_name" in got["text"]
    # Only http(s) and relative links are links; the rest is plain text.
    assert got["links"] == [["web", "https://example.com/a_(b)"], ["rel", "./notes.md"]], got["links"]
    for shown in ("js", "js2", "data", "proto", "proto2"):
        assert shown in got["text"]
    # Only same-origin /api/v1/files/ images (no `..`) and data: images.
    assert got["imgs"] == ["/api/v1/files/images/abc.png"], got["imgs"]
    # Raw HTML is text.
    assert got["scripts"] == 0 and got["handlers"] == 0 and not got["pwned"]
    assert "<script>window.__pwned = 1</script>" in got["text"]
    assert got["nested"] == ["nested"] and got["li_p"] == 0  # a tight list: no <p> in items
    assert got["ol"] == ["one", "two"]
    assert got["quote"] == ["quoted"]
    assert got["pre"] == ['const x = "<b>";']
    assert got["th"] == [["Left", "col", ""], ["Right", "col", "right"]]
    assert got["td"] == ["a|b", "1<br>2"]
    assert got["hr"] == 1


def test_folder_picker_and_drop_zone(ui_page, ui_module_server, tmp_path):
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("dropped")
    folder = tmp_path / "handbook"
    (folder / "policies").mkdir(parents=True)
    (folder / "intro.md").write_text("# Intro\n\nWelcome.\n")
    (folder / "policies" / "leave.txt").write_text("Leave policy: 25 days.\n")
    (folder / ".DS_Store").write_bytes(b"\0\1")
    (folder / "logo.bin").write_bytes(b"\0" * 10)
    open_page(page, srv, f"#/kb/{kb['id']}")

    # A folder: its supported files, with their paths; hidden and unsupported ones skipped.
    page.locator("[data-testid=kb-folder-input]").set_input_files(str(folder))
    uploads = page.get_by_role("list", name="Uploads")
    expect(uploads.locator("[data-testid=upload-row]")).to_have_count(2)
    expect(page.locator("#toasts").get_by_text("Skipped 2 hidden or unsupported files.")).to_be_visible()
    expect(page.get_by_role("progressbar", name="handbook/policies/leave.txt")).to_be_attached()
    for name in ("intro.md", "leave.txt"):
        expect(doc_row(page, name)).to_have_attribute("data-status", "ready", timeout=SLOW)

    # Files dropped on the drop zone.
    page.evaluate(
        """() => {
          const dt = new DataTransfer();
          dt.items.add(new File(["# Dropped\\n\\nFrom a drag and drop.\\n"], "dropped.md", { type: "text/markdown" }));
          const zone = document.querySelector(".kb-drop");
          for (const type of ["dragenter", "dragover", "drop"]) {
            zone.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
          }
        }"""
    )
    expect(uploads.locator("[data-testid=upload-row][data-name='dropped.md']")).to_be_visible()
    expect(doc_row(page, "dropped.md")).to_have_attribute("data-status", "ready", timeout=SLOW)
    assert sorted(d["file_name"] for d in srv.documents(kb["id"])) == ["dropped.md", "intro.md", "leave.txt"]


def test_too_large_file_is_reported_next_to_it(ui_page, ui_server_factory, tmp_path):
    page = ui_page
    srv = ui_server_factory(env={"QUARRY_MAX_UPLOAD_MB": "1"})
    kb = srv.create_kb("small")
    big = tmp_path / "big.txt"
    big.write_bytes(b"words and more words\n" * 60_000)  # 1.26 MB
    small = tmp_path / "small.txt"
    small.write_text("A small note.\n")
    open_page(page, srv, f"#/kb/{kb['id']}")
    page.locator("[data-testid=kb-file-input]").set_input_files([str(big), str(small)])
    uploads = page.get_by_role("list", name="Uploads")
    row = uploads.locator("[data-testid=upload-row][data-name='big.txt']")
    expect(row).to_have_attribute("data-state", "error")
    expect(row.get_by_text("Too large")).to_be_visible()
    expect(row.locator(".kb-up-msg")).to_contain_text("1 MB")
    expect(doc_row(page, "small.txt")).to_have_attribute("data-status", "ready", timeout=SLOW)
    assert [d["file_name"] for d in srv.documents(kb["id"])] == ["small.txt"]


def test_embedding_progress_line(ui_page, ui_server_factory, fake_models, tmp_path):
    """While a knowledge base's chunks wait for vectors, its page says how many are left in the
    space (from GET /api/v1/queue), then drops the line once its documents are ready."""
    page = ui_page
    fake_models.embed_delay = 0.1  # per text: some 13 s of embedding for the file below
    srv = ui_server_factory(env=fake_models.env())
    kb = srv.create_kb("embedding")
    paras = [f"## Part {i}\n\n" + " ".join(f"kingfisher{i}x{j}" for j in range(140)) for i in range(60)]
    report = tmp_path / "report.md"
    report.write_text("# Report\n\n" + "\n\n".join(paras) + "\n")
    open_page(page, srv, f"#/kb/{kb['id']}")
    page.locator("[data-testid=kb-file-input]").set_input_files([str(report)])
    line = page.locator(".kb-embedding")
    expect(line).to_have_text(re.compile(r"^Embedding: [\d,]+ chunks left in this space"), timeout=SLOW)
    expect(line).to_have_attribute("role", "status")
    expect(doc_row(page, "report.md")).to_have_attribute("data-status", "ready", timeout=SLOW)
    # The knowledge base has nothing left in flight, so the page stops asking.
    expect(line).to_be_hidden(timeout=SLOW)
