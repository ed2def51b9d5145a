"""People curate (issue 44 item 6) in the web UI (js/kb.js's document drawer, js/retrieval.js)
through the real `quarry serve` and a real Chromium (Playwright; fixtures in ui_support.py):

- a document's chunks in the drawer's Chunks tab: a chunk's text edited (the "edited" badge,
  the original text kept under a disclosure, the status line; a keyword search over the API
  then finds the new word in that passage), another chunk disabled (its word is no longer
  found), both still so when the drawer is opened again (fresh data), the edit restored (the
  cut text back, the word gone from search), an empty edit refused with the API's words in the
  chunk (the drawer and the editor stay);
- "Re-chunk": a bad overlap refused with the API's message (the typed values kept), then a
  smaller chunk size: more chunks, the count and the edits kept shown, the list reloaded, the
  document's own settings prefilled (also when the drawer is opened again); then the knowledge
  base's settings again (fields cleared): the edit set aside by the smaller cut applies again;
- the retrieval test page `#/kb/<id>/test`: the request as sent (with `"explain": true`), the
  passages in the API's order with its scores (the same ranking and scores as a direct search
  without `explain`), the Explain disclosure's keyword evidence, the summary; a filter that
  matches nothing (the empty state, 0 documents matching), one that matches one document;
  invalid JSON caught before sending; a bad field (empty, or one no document has) and a bad
  operator refused in the API's words; `as_of` (a bad moment refused, a date shown as read);
- a read-only session sees the chunks and the test page, but no curation control (and the API
  refuses a PATCH from it).
"""

from __future__ import annotations

import json
import re
import time

from playwright.sync_api import expect
from ui_support import login, page_record

SLOW = 120_000  # ms: conversion on a debug build on busy cores

# A manual with one section per unique word: each section is about 330 characters, so with
# chunks of 400 characters and no overlap every section is its own chunk.
SECTIONS = [
    ("Priming", "pumpkinseed"),
    ("Valves", "quokkavalve"),
    ("Seals", "walrusgasket"),
    ("Bearings", "ocelotbearing"),
    ("Motors", "narwhalmotor"),
    ("Storage", "lemurshelf"),
]
EDIT_WORD = "zanzibarquux"


def manual(title: str = "Field manual") -> str:
    parts = [f"# {title}\n"]
    for heading, word in SECTIONS:
        parts.append(
            f"## {heading}\n\n"
            f"The {heading.lower()} of the centrifugal pump need care: {word} is the word only this "
            "section uses. Check the housing before each shift, write down what you find in the "
            "log book, and replace worn parts with the ones the supplier lists. A pump that runs "
            "dry for a minute can lose its seal, so never start it without water in the casing.\n"
        )
    return "\n".join(parts)


def open_page(page, srv, path: str):
    page.goto(f"{srv.base}/{path}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()


def doc_row(page, name: str):
    return page.locator("[data-testid=doc-row]").filter(has=page.get_by_role("button", name=name, exact=True))


def open_chunks(page, name: str):
    """Opens the document's drawer on its Chunks tab; the drawer."""
    doc_row(page, name).get_by_role("button", name=name, exact=True).click()
    drawer = page.get_by_role("dialog", name=name)
    expect(drawer).to_be_visible()
    drawer.get_by_role("tab", name="Chunks").click()
    expect(drawer.locator("[data-testid=chunk]").first).to_be_visible()
    return drawer


def chunks_of(srv, kb_id: str, doc_id: str, token: str | None = None) -> list[dict]:
    return srv.api("GET", f"/api/v1/knowledge-bases/{kb_id}/documents/{doc_id}/chunks", token=token)


def search(srv, body: dict) -> dict:
    """A direct `POST /api/v1/knowledge-search`; the whole answer."""
    r = srv.http("POST", "/api/v1/knowledge-search", body=body)
    assert r.status == 200, (r.status, r.text)
    return r.json()


def keyword_hits(srv, kb_id: str, word: str) -> list[dict]:
    return search(srv, {"query": word, "knowledge_base_ids": [kb_id], "search_mode": "keyword", "min_score": 0})["results"]


def eventually(check, what: str, timeout: float = 20.0):
    """Polls ``check()`` until it is truthy; its value. (A search may trail a change a moment.)"""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"{what}: not so within {timeout} s (last: {last!r})")


def api_error(srv, method: str, path: str, body) -> str:
    """The API's own words for a request it refuses (nothing changes)."""
    r = srv.http(method, path, body=body)
    assert 400 <= r.status < 500, (r.status, r.text)
    return r.json()["detail"]


def text_of(locator) -> str:
    """An element's text exactly (textContent, whitespace kept)."""
    return locator.evaluate("el => el.textContent")


def with_word(chunks: list[dict], word: str) -> dict:
    found = [c for c in chunks if word in c["content"]]
    assert len(found) == 1, f"{word!r} should be in exactly one chunk: {[c['index'] for c in found]}"
    return found[0]


def manual_kb(srv, name: str, token: str | None = None) -> tuple[dict, dict]:
    """A knowledge base (chunks of 400 characters, no overlap) holding manual.md, ready."""
    kb = srv.create_kb(name, chunk_size=400, chunk_overlap=0, token=token)
    srv.upload(kb["id"], {"manual.md": manual()}, token=token)
    docs = srv.wait_documents(kb["id"], 1, token=token)
    assert docs[0]["status"] == "ready", docs
    return kb, docs[0]


def upload_with_metadata(srv, kb_id: str, name: str, metadata: dict, text: str) -> None:
    boundary = "quarry-curation-test"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{json.dumps(metadata)}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
        f"Content-Type: text/markdown\r\n\r\n{text}\r\n--{boundary}--\r\n"
    ).encode()
    r = srv.http(
        "POST", f"/api/v1/knowledge-bases/{kb_id}/documents", data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert r.status in (200, 201, 202), r.text


def reparse_text(out: dict) -> str:
    """What the page says after a re-chunk, from the API's answer."""
    n, kept, lost = out["chunks"], out["edits_kept"], out.get("edits_unmatched", 0)
    text = f"Cut into {n} chunk{'' if n == 1 else 's'}; {kept} edit{'' if kept == 1 else 's'} kept."
    if lost == 1:
        text += " 1 edit matches no new chunk: it is kept, and applies again when the document is cut as before."
    elif lost:
        text += f" {lost} edits match no new chunk: they are kept, and apply again when the document is cut as before."
    embedding = out.get("embedding")
    if embedding == "done":
        text += " The new chunks were embedded."
    elif embedding == "queued":
        text += " The new chunks are queued for embedding."
    return text


def status_for(message: str, embedding: str) -> str:
    """The status line the page writes for a change and the PATCH's `embedding`."""
    how = {"done": "re-embedded", "queued": "queued for embedding"}.get(embedding)
    return f"{message}; {how}." if how else f"{message}."


# ---------------------------------------------------------------------------------------------
# Chunks: edit, disable, restore, an empty edit


def test_edit_disable_and_restore_chunks(ui_page, ui_module_server, axe_check, shot):
    page, srv = ui_page, ui_module_server
    kb, doc = manual_kb(srv, "curated")
    base = f"/api/v1/knowledge-bases/{kb['id']}/documents/{doc['id']}"
    chunks = chunks_of(srv, kb["id"], doc["id"])
    assert len(chunks) >= 4, [c["content"][:60] for c in chunks]
    assert all(c["enabled"] is True and c["edited"] is False for c in chunks), chunks
    a = with_word(chunks, SECTIONS[0][1])
    b = with_word(chunks, SECTIONS[1][1])
    assert a["id"] != b["id"]
    # Before: the edit's word is nowhere, the disabled chunk's word is found.
    assert keyword_hits(srv, kb["id"], EDIT_WORD) == []
    assert any(SECTIONS[1][1] in h["content"] for h in keyword_hits(srv, kb["id"], SECTIONS[1][1]))

    open_page(page, srv, f"#/kb/{kb['id']}")
    drawer = open_chunks(page, "manual.md")
    items = drawer.locator("[data-testid=chunk]")
    expect(items).to_have_count(len(chunks))
    chunk_a = drawer.locator(f"[data-testid=chunk][data-id='{a['id']}']")
    chunk_b = drawer.locator(f"[data-testid=chunk][data-id='{b['id']}']")
    expect(chunk_a).to_have_attribute("data-edited", "false")
    expect(chunk_a).to_have_attribute("data-enabled", "true")
    expect(chunk_a.get_by_test_id("chunk-edited")).to_have_count(0)
    expect(chunk_a.get_by_test_id("chunk-restore")).to_have_count(0)
    status = drawer.get_by_test_id("chunk-status")
    n_a, n_b = a["index"] + 1, b["index"] + 1

    # Edit A: a labelled editor with the chunk's text, focused; Save.
    chunk_a.get_by_test_id("chunk-edit").click()
    editor = chunk_a.get_by_test_id("chunk-editor")
    expect(editor).to_be_focused()
    expect(editor).to_have_value(a["content"])
    expect(chunk_a.get_by_label(f"Text of chunk {n_a}")).to_be_visible()
    edited_text = a["content"].rstrip() + f"\n\nThe word {EDIT_WORD} marks this edited passage."
    editor.fill(edited_text)
    with page.expect_response(lambda r: r.request.method == "PATCH" and r.url.endswith(f"/chunks/{a['id']}")) as resp:
        chunk_a.get_by_test_id("chunk-save").click()
    answer = resp.value.json()
    assert resp.value.status == 200, answer
    assert answer["embedding"] in ("done", "queued", "off"), answer
    assert answer["data"]["id"] == a["id"] and answer["data"]["edited"] is True, answer
    expect(chunk_a).to_have_attribute("data-edited", "true")
    expect(chunk_a.get_by_test_id("chunk-edited")).to_have_text("Edited")
    expect(chunk_a.get_by_test_id("chunk-editor")).to_have_count(0)
    expect(chunk_a.get_by_test_id("chunk-text")).to_contain_text(EDIT_WORD)
    expect(status).to_have_text(status_for(f"Chunk {n_a} saved", answer["embedding"]))
    expect(chunk_a.get_by_test_id("chunk-edit")).to_be_focused()
    original = chunk_a.get_by_test_id("chunk-original")
    expect(original).to_have_count(1)
    original.locator("summary").click()
    assert text_of(original.locator("pre")) == a["content"]
    expect(chunk_a.get_by_test_id("chunk-restore")).to_be_visible()
    # The API agrees, and keyword search finds the new word in that passage.
    got = next(c for c in chunks_of(srv, kb["id"], doc["id"]) if c["id"] == a["id"])
    assert got["edited"] is True and EDIT_WORD in got["content"] and got["original_content"] == a["content"], got
    hits = eventually(lambda: keyword_hits(srv, kb["id"], EDIT_WORD), f"a keyword search finds {EDIT_WORD}")
    assert hits[0]["knowledge_id"] == doc["id"], hits[0]
    assert EDIT_WORD in hits[0]["content"], hits[0]

    # Disable B: muted, the badge, the toggle now enables; its word is no longer found.
    toggle = chunk_b.get_by_test_id("chunk-toggle")
    expect(toggle).to_have_text("Disable")
    with page.expect_response(lambda r: r.request.method == "PATCH" and r.url.endswith(f"/chunks/{b['id']}")) as resp:
        toggle.click()
    answer_b = resp.value.json()
    assert answer_b["data"]["enabled"] is False, answer_b
    expect(chunk_b).to_have_attribute("data-enabled", "false")
    expect(chunk_b).to_have_class(re.compile(r"\bis-disabled\b"))
    expect(chunk_b.get_by_test_id("chunk-disabled")).to_have_text("Disabled")
    expect(chunk_b.get_by_test_id("chunk-toggle")).to_have_text("Enable")
    expect(chunk_b.get_by_test_id("chunk-toggle")).to_be_focused()
    expect(status).to_have_text(status_for(f"Chunk {n_b} disabled: searches skip it", answer_b["embedding"]))
    got = next(c for c in chunks_of(srv, kb["id"], doc["id"]) if c["id"] == b["id"])
    assert got["enabled"] is False, got
    eventually(lambda: keyword_hits(srv, kb["id"], SECTIONS[1][1]) == [], f"{SECTIONS[1][1]} no longer found")

    axe_check(page, "kb-chunks-curated", schemes=("light", "dark"))
    shot(page, "kb-chunks-curated")

    # Opened again, the drawer shows the server's state.
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    drawer = open_chunks(page, "manual.md")
    chunk_a = drawer.locator(f"[data-testid=chunk][data-id='{a['id']}']")
    chunk_b = drawer.locator(f"[data-testid=chunk][data-id='{b['id']}']")
    expect(chunk_a).to_have_attribute("data-edited", "true")
    expect(chunk_a.get_by_test_id("chunk-text")).to_contain_text(EDIT_WORD)
    expect(chunk_b).to_have_attribute("data-enabled", "false")
    status = drawer.get_by_test_id("chunk-status")

    # Restore A: the cut text is back, the edit's word gone from search.
    with page.expect_response(lambda r: r.request.method == "PATCH" and r.url.endswith(f"/chunks/{a['id']}")) as resp:
        chunk_a.get_by_test_id("chunk-restore").click()
    assert resp.value.request.post_data_json == {"content": None}
    answer = resp.value.json()
    expect(chunk_a).to_have_attribute("data-edited", "false")
    expect(chunk_a.get_by_test_id("chunk-edited")).to_have_count(0)
    expect(chunk_a.get_by_test_id("chunk-original")).to_have_count(0)
    expect(chunk_a.get_by_test_id("chunk-restore")).to_have_count(0)
    assert text_of(chunk_a.get_by_test_id("chunk-text")) == a["content"]
    expect(status).to_have_text(status_for(f"Chunk {n_a} restored to its original text", answer["embedding"]))
    got = next(c for c in chunks_of(srv, kb["id"], doc["id"]) if c["id"] == a["id"])
    assert got["edited"] is False and got["content"] == a["content"], got
    eventually(lambda: keyword_hits(srv, kb["id"], EDIT_WORD) == [], f"{EDIT_WORD} no longer found")

    # An empty edit: the API's words in the chunk; the drawer and the editor stay.
    detail = api_error(srv, "PATCH", f"{base}/chunks/{a['id']}", {"content": ""})
    chunk_a.get_by_test_id("chunk-edit").click()
    editor = chunk_a.get_by_test_id("chunk-editor")
    editor.fill("")
    chunk_a.get_by_test_id("chunk-save").click()
    expect(chunk_a.get_by_test_id("chunk-error")).to_have_text(detail)
    expect(chunk_a.get_by_test_id("chunk-error")).to_have_attribute("role", "alert")
    expect(drawer).to_be_visible()
    expect(editor).to_be_visible()
    expect(editor).to_have_value("")
    expect(editor).to_have_attribute("aria-invalid", "true")
    # A text typed after the refusal is still there, and Cancel leaves the chunk as it was.
    editor.fill("draft that is kept")
    expect(editor).to_have_value("draft that is kept")
    chunk_a.get_by_test_id("chunk-cancel").click()
    expect(chunk_a.get_by_test_id("chunk-editor")).to_have_count(0)
    assert text_of(chunk_a.get_by_test_id("chunk-text")) == a["content"]
    assert next(c for c in chunks_of(srv, kb["id"], doc["id"]) if c["id"] == a["id"])["edited"] is False

    # B enabled again: found again.
    chunk_b.get_by_test_id("chunk-toggle").click()
    expect(chunk_b).to_have_attribute("data-enabled", "true")
    expect(chunk_b.get_by_test_id("chunk-disabled")).to_have_count(0)
    expect(status).to_contain_text(f"Chunk {n_b} enabled")
    eventually(lambda: keyword_hits(srv, kb["id"], SECTIONS[1][1]), f"{SECTIONS[1][1]} found again")


# ---------------------------------------------------------------------------------------------
# Re-chunk


def test_rechunk_with_a_smaller_size(ui_page, ui_module_server, axe_check, shot):
    page, srv = ui_page, ui_module_server
    kb, doc = manual_kb(srv, "rechunked")
    base = f"/api/v1/knowledge-bases/{kb['id']}/documents/{doc['id']}"
    before = chunks_of(srv, kb["id"], doc["id"])
    # One edit (through the API) for the re-chunk to keep or not.
    c = with_word(before, SECTIONS[2][1])
    srv.api("PATCH", f"{base}/chunks/{c['id']}", {"content": c["content"] + " Edited before the re-chunk."})

    open_page(page, srv, f"#/kb/{kb['id']}")
    drawer = open_chunks(page, "manual.md")
    expect(drawer.locator("[data-testid=chunk]")).to_have_count(len(before))
    form = drawer.get_by_test_id("reparse-form")
    expect(form).to_be_hidden()
    opener = drawer.get_by_test_id("reparse-open")
    expect(opener).to_have_attribute("aria-expanded", "false")
    opener.click()
    expect(form).to_be_visible()
    expect(opener).to_have_attribute("aria-expanded", "true")
    size = form.locator("input[name=chunk_size]")
    overlap = form.locator("input[name=chunk_overlap]")
    expect(size).to_be_focused()
    expect(form.get_by_label("Chunk size (100–20000)")).to_be_visible()
    # The document follows the knowledge base's settings: nothing of its own to prefill.
    expect(size).to_have_value("")
    expect(overlap).to_have_value("")

    # A bad overlap: the API's message, the typed values kept.
    detail = api_error(srv, "POST", f"{base}/reparse", {"chunk_size": 200, "chunk_overlap": 150})
    size.fill("200")
    overlap.fill("150")
    form.get_by_test_id("reparse-submit").click()
    expect(drawer.get_by_test_id("reparse-error")).to_have_text(detail)
    expect(size).to_have_value("200")
    expect(overlap).to_have_value("150")
    if "chunk_overlap" in detail:
        expect(overlap).to_have_attribute("aria-invalid", "true")
    assert len(chunks_of(srv, kb["id"], doc["id"])) == len(before)
    axe_check(page, "kb-rechunk-form")
    shot(page, "kb-rechunk-form")

    # A smaller size: more chunks; the count and the edits kept shown; the list reloaded.
    overlap.fill("0")
    size.fill("150")
    with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/reparse")) as resp:
        form.get_by_test_id("reparse-submit").click()
    assert resp.value.request.post_data_json == {"chunk_size": 150, "chunk_overlap": 0}
    out = resp.value.json()
    assert resp.value.status == 200, out
    n, kept = out["data"]["chunks"], out["data"]["edits_kept"]
    assert n > len(before), (n, len(before))
    assert kept + out["data"]["edits_unmatched"] == 1, out  # the one edit: kept or set aside
    assert out["data"]["chunking"] == {"chunk_size": 150, "chunk_overlap": 0, "from": "document"}, out
    expect(drawer.get_by_test_id("reparse-result")).to_have_text(reparse_text(out["data"]))
    expect(drawer.get_by_test_id("reparse-error")).to_have_text("")
    expect(drawer.locator("[data-testid=chunk]")).to_have_count(n)
    after = chunks_of(srv, kb["id"], doc["id"])
    assert len(after) == n
    assert sum(1 for x in after if x["edited"]) == kept, [(x["index"], x["edited"]) for x in after]
    shown = drawer.locator("[data-testid=chunk]").evaluate_all("els => els.map(e => e.dataset.id)")
    assert shown == [str(x["id"]) for x in after]
    expect(drawer.locator("[data-testid=chunk][data-edited=true]")).to_have_count(kept)
    # The document has settings of its own now: the form shows them, also when opened again.
    expect(size).to_have_value("150")
    expect(overlap).to_have_value("0")
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    drawer = open_chunks(page, "manual.md")
    drawer.get_by_test_id("reparse-open").click()
    form = drawer.get_by_test_id("reparse-form")
    size = form.locator("input[name=chunk_size]")
    overlap = form.locator("input[name=chunk_overlap]")
    expect(size).to_have_value("150")
    expect(overlap).to_have_value("0")

    # Cleared: the knowledge base's settings again; the edit set aside applies again.
    size.fill("")
    overlap.fill("")
    with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/reparse")) as resp:
        form.get_by_test_id("reparse-submit").click()
    assert resp.value.request.post_data_json == {}
    out = resp.value.json()["data"]
    assert out["chunks"] == len(before) and out["chunking"]["from"] == "knowledge_base", out
    assert out["edits_kept"] == 1, out  # the cut as before: the edit is back on its chunk
    expect(drawer.get_by_test_id("reparse-result")).to_have_text(reparse_text(out))
    expect(drawer.locator("[data-testid=chunk]")).to_have_count(len(before))
    again = chunks_of(srv, kb["id"], doc["id"])
    assert sum(1 for x in again if x["edited"]) == out["edits_kept"]
    expect(drawer.locator("[data-testid=chunk][data-edited=true]")).to_have_count(out["edits_kept"])
    expect(size).to_have_value("")


# ---------------------------------------------------------------------------------------------
# The retrieval test page


PUMP_DOCS = [
    ("pump-guide.md", "published", "# Pump guide\n\nPrime the centrifugal pump before starting it. A centrifugal pump that runs dry loses its seal.\n"),
    ("pump-notes.md", "draft", "# Pump notes\n\nThe centrifugal pump is noisy when dry; the pump housing gets hot.\n"),
    ("valves.md", "draft", "# Valves\n\nClose the valve before you open the pump casing.\n"),
]
QUERY = "centrifugal pump"


def test_retrieval_test_page(ui_page, ui_module_server, axe_check, shot):
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("retrieval-lab")
    for name, status, text in PUMP_DOCS:
        upload_with_metadata(srv, kb["id"], name, {"status": status}, text)
    docs = srv.wait_documents(kb["id"], len(PUMP_DOCS))
    assert all(d["status"] == "ready" for d in docs), docs

    open_page(page, srv, f"#/kb/{kb['id']}")
    page.get_by_test_id("retrieval-test-link").click()
    expect(page).to_have_url(re.compile(rf"#/kb/{re.escape(kb['id'])}/test$"))
    expect(page.get_by_role("heading", level=1, name="Retrieval test")).to_be_visible()
    form = page.get_by_test_id("retrieval-form")
    # The API's defaults.
    expect(form.locator("select[name=search_mode]")).to_have_value("hybrid")
    expect(form.locator("input[name=top_k]")).to_have_value("10")
    expect(form.locator("input[name=min_score]")).to_have_value("0.5")
    expect(form.locator("input[name=rerank]")).to_be_checked()

    form.locator("textarea[name=query]").fill(QUERY)
    form.locator("select[name=search_mode]").select_option("keyword")
    form.locator("input[name=min_score]").fill("0")
    run = form.get_by_role("button", name="Run test")
    with page.expect_response(lambda r: r.url.endswith("/api/v1/knowledge-search")) as resp:
        run.click()
    sent = resp.value.request.post_data_json
    expected_body = {
        "query": QUERY,
        "knowledge_base_ids": [kb["id"]],
        "search_mode": "keyword",
        "top_k": 10,
        "min_score": 0,
        "rerank": True,
        "explain": True,
    }
    assert sent == expected_body, sent
    explained = resp.value.json()
    assert resp.value.status == 200, explained

    # The request, to reproduce it: the JSON as sent, and curl.
    request = page.get_by_test_id("retrieval-request")
    expect(request).to_be_visible()
    assert json.loads(text_of(request.get_by_test_id("retrieval-request-json"))) == expected_body
    curl = text_of(request.get_by_test_id("retrieval-request-curl"))
    assert curl.startswith("curl ") and f"{srv.base}/api/v1/knowledge-search" in curl, curl
    assert json.dumps(expected_body, separators=(",", ":")) in curl, curl

    # The passages: the same ranking and the same scores as a direct search without explain.
    hits = page.get_by_test_id("retrieval-results").locator("[data-testid=retrieval-hit]")
    expect(hits.first).to_be_visible()
    direct = search(srv, {k: v for k, v in expected_body.items() if k != "explain"})
    assert len(direct["results"]) >= 2, direct
    expect(hits).to_have_count(len(direct["results"]))
    shown = hits.evaluate_all("els => els.map(e => [e.dataset.id, e.dataset.score])")
    assert [i for i, _ in shown] == [r["id"] for r in direct["results"]], (shown, direct["results"])
    assert [float(s) for _, s in shown] == [r["score"] for r in direct["results"]], (shown, direct["results"])
    assert [i for i, _ in shown] == [r["id"] for r in explained["results"]]
    for (_, s), r in zip(shown, explained["results"]):
        assert s == json.dumps(r["score"]) or float(s) == r["score"], (s, r["score"])
    first = hits.first
    expect(first).to_contain_text("#1")
    expect(first).to_contain_text(explained["results"][0]["knowledge_filename"])
    expect(first).to_contain_text("keyword")

    # The summary.
    summary = page.get_by_test_id("retrieval-summary")
    expect(summary).to_have_attribute("data-total", str(direct["total_count"]))
    expect(summary).to_have_attribute("data-mode", "keyword")
    expect(summary).to_have_attribute("data-rerank", direct["rerank"])
    assert direct["rerank"] in ("applied", "not_requested", "not_configured", "failed"), direct
    filters = page.get_by_test_id("retrieval-filters")
    expect(filters.get_by_test_id("retrieval-filter")).to_contain_text("none")
    assert explained["explain"]["filter"] is None, explained["explain"]

    # Explain: the first passage's keyword evidence.
    ev = explained["results"][0]["evidence"]
    assert ev.get("keyword"), ev
    explain = first.get_by_test_id("retrieval-explain")
    explain.locator("summary").click()
    keyword = explain.get_by_test_id("explain-keyword")
    expect(keyword).to_be_visible()
    expect(keyword).to_contain_text("BM25")
    expect(keyword).to_contain_text(f"rank {ev['keyword']['rank'] + 1}")
    expect(keyword).to_contain_text("coverage")
    expect(explain.get_by_test_id("explain-vector")).to_contain_text("not found by vector" if not ev.get("vector") else "similarity")
    expect(explain.get_by_test_id("explain-embedded")).to_be_visible()
    if ev.get("rerank") is not None:
        expect(explain.get_by_test_id("explain-rerank")).to_be_visible()
    axe_check(page, "kb-retrieval-test")
    shot(page, "kb-retrieval-test")

    filter_box = form.locator("textarea[name=filter]")
    error = page.get_by_test_id("retrieval-error")

    # A filter that matches nothing: the empty state, no document matching.
    filter_box.fill('{"field": "status", "operator": "eq", "value": "archived"}')
    with page.expect_response(lambda r: r.url.endswith("/api/v1/knowledge-search")) as resp:
        run.click()
    assert resp.value.request.post_data_json["filter"] == {"field": "status", "operator": "eq", "value": "archived"}
    expect(page.get_by_test_id("retrieval-empty")).to_contain_text("No passage scored at least 0")
    expect(page.get_by_test_id("retrieval-results")).to_have_count(0)
    expect(filters).to_have_attribute("data-matching", "0")
    expect(filters.get_by_test_id("retrieval-matching")).to_contain_text("0 documents")
    expect(filters.get_by_test_id("retrieval-filter")).to_contain_text("archived")

    # One that matches one document: its passages only.
    filter_box.fill('{"field": "status", "operator": "eq", "value": "published"}')
    run.click()
    expect(filters).to_have_attribute("data-matching", "1")
    expect(hits.first).to_be_visible()
    assert set(hits.evaluate_all("els => els.map(e => e.querySelector('.kb-cite').textContent)")) == {"pump-guide.md"}

    # Not JSON: said before anything is sent.
    searches = lambda: sum(1 for u in page_record(page).requests if u.endswith("/api/v1/knowledge-search"))  # noqa: E731
    n = searches()
    filter_box.fill("{nope")
    run.click()
    expect(error).to_contain_text("The filter is not valid JSON")
    expect(filter_box).to_have_attribute("aria-invalid", "true")
    assert searches() == n

    # A bad field and a bad operator: the API's words; the form keeps its values.
    for bad in (
        {"field": "", "operator": "eq", "value": "x"},
        {"field": "colour", "operator": "eq", "value": "red"},
        {"field": "status", "operator": "eqq", "value": "x"},
    ):
        detail = api_error(srv, "POST", "/api/v1/knowledge-search", {**expected_body, "filter": bad})
        text = json.dumps(bad)
        filter_box.fill(text)
        run.click()
        expect(error).to_have_text(detail)
        expect(filter_box).to_have_value(text)
        expect(form.locator("textarea[name=query]")).to_have_value(QUERY)
        expect(form.locator("select[name=search_mode]")).to_have_value("keyword")
        expect(form.locator("input[name=min_score]")).to_have_value("0")
    assert "eqq" in detail

    # As of a moment: the summary says when knowledge was read at; a bad moment is the API's error.
    filter_box.fill("")
    as_of = form.locator("input[name=as_of]")
    detail = api_error(srv, "POST", "/api/v1/knowledge-search", {**expected_body, "as_of": "not a date"})
    as_of.fill("not a date")
    run.click()
    expect(error).to_have_text(detail)
    as_of.fill("2026-01-01")
    with page.expect_response(lambda r: r.url.endswith("/api/v1/knowledge-search")) as resp:
        run.click()
    assert resp.value.request.post_data_json == {**expected_body, "as_of": "2026-01-01"}
    at = resp.value.json()["explain"]["as_of"]
    assert isinstance(at, int), resp.value.json()["explain"]
    expect(error).to_have_text("")
    expect(filters).to_have_attribute("data-as-of", str(at))
    expect(filters.get_by_test_id("retrieval-as-of")).to_be_visible()
    expect(filters.get_by_test_id("retrieval-filter")).to_contain_text("none")


# ---------------------------------------------------------------------------------------------
# Read-only


def test_read_only_session_sees_no_curation(ui_page_factory, ui_server_factory):
    srv = ui_server_factory("--auth", "token")
    srv.add_user("erin", role="owner")
    owner = srv.token("erin")
    kb, doc = manual_kb(srv, "read-only", token=owner)
    chunk = chunks_of(srv, kb["id"], doc["id"], token=owner)[0]
    reader = srv.token("erin", "--read-only")

    page = ui_page_factory()
    login(page, srv.base, reader)
    open_page(page, srv, f"#/kb/{kb['id']}")
    drawer = open_chunks(page, "manual.md")
    expect(drawer.locator("[data-testid=chunk]").first).to_have_attribute("data-enabled", "true")
    expect(drawer.get_by_test_id("chunk-edit")).to_have_count(0)
    expect(drawer.get_by_test_id("chunk-toggle")).to_have_count(0)
    expect(drawer.get_by_test_id("reparse-open")).to_have_count(0)
    page.keyboard.press("Escape")
    page.get_by_test_id("retrieval-test-link").click()
    expect(page.get_by_test_id("retrieval-form")).to_be_visible()
    # The API agrees.
    r = srv.http(
        "PATCH", f"/api/v1/knowledge-bases/{kb['id']}/documents/{doc['id']}/chunks/{chunk['id']}",
        body={"enabled": False}, token=reader,
    )
    assert r.status == 403, r.text
