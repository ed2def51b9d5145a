"""The web UI's Chat page (crates/quarry-ui/assets/js/chat.js) in a real browser against the real
binary, with the loopback fake of an OpenAI-compatible provider (fake_llm.py) as the chat model,
a real knowledge base (a Markdown file and a two-page PDF made here) and real custom HTTP tools
served from a loopback target.

Covered: the empty page (knowledge-base picker and chips, keyboard, axe); an answer that
streams in (observed incrementally in the DOM) with its sources (file, page, score), citations
that reveal their source, and a source link that opens the knowledge base's preview; tool calls
shown calling → succeeded / failed with their arguments and results; conversations listed,
reopened after a reload (sources and tool calls from the store), renamed and deleted, and the
list behind a button at phone width; Stop aborting a hanging stream (the provider sees the
client leave) and the page recovering; a provider error shown in the thread and retried; the
notice on a server without a chat model; the page in Simplified Chinese.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import fake_llm
import pytest
import ui_support
from fake_llm import FakeLLM
from playwright.sync_api import expect
from ui_support import PHONE, allow_console

MODEL = "fake-chat"
API_KEY = "sk-fake-ui-chat-7d41"
MD_NAME = "field-notes.md"
MD_TEXT = "# Field notes\n\nThe quokka is a small marsupial of Rottnest Island; it smiles at visitors.\n"
PDF_NAME = "island-guide.pdf"
PDF_PAGES = [
    "Island guide. Ferries to Rottnest Island leave Fremantle every morning at nine.",
    "Wildlife. The quokka lives on Rottnest Island and is most active at dusk.",
]
QUESTION = "Where do quokkas live, and how do ferries reach the island?"
HOLD_LIMIT = 60.0  # seconds a held lookup waits for the test before answering anyway


# ---------------------------------------------------------------------------------------------
# Test data: a small real PDF, and a loopback target for the custom HTTP tools.


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page."""
    n = len(pages)
    font = 3 + 2 * n
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{3 + 2 * i} 0 R' for i in range(n))}] /Count {n} >>".encode(),
    ]
    for i, text in enumerate(pages):
        esc = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({esc}) Tj ET".encode()
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objs.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs):
        offsets.append(len(out))
        out += f"{i + 1} 0 obj\n".encode() + o + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{off:010d} 00000 n \n".encode() for off in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


class ToolTarget:
    """127.0.0.1:0 answering ``/lookup/<q>`` (JSON) and ``/fail`` (HTTP 500).

    While a test holds it (``hold``), a lookup waits until ``release``: a test that checks the
    "calling" state sees it for as long as it needs, however loaded the machine (a fixed delay
    was shorter than one slow browser poll in CI)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.released.set()
        released = self.released

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                if self.path.startswith("/fail"):
                    status, data = 500, b"upstream exploded: the lookup backend is on fire"
                    ctype = "text/plain"
                elif self.path.startswith("/lookup/"):
                    released.wait(HOLD_LIMIT)
                    q = self.path.split("/lookup/", 1)[1].split("?")[0]
                    status, data, ctype = 200, json.dumps({"answer": f"lookup says {q}-42"}).encode(), "application/json"
                else:
                    status, data, ctype = 404, b"no such path", "text/plain"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def hold(self) -> None:
        self.released.clear()

    def release(self) -> None:
        self.released.set()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------------
# Fixtures: one chat server for the module.


@dataclass
class World:
    srv: ui_support.UiServer
    fake: FakeLLM
    kb: dict
    docs: dict  # file name → document
    target: ToolTarget


@pytest.fixture(scope="module")
def fake():
    f = FakeLLM.start()
    yield f
    f.stop()


@pytest.fixture(autouse=True)
def fresh_fake(fake):
    fake.reset()
    pause = fake_llm.EVENT_PAUSE
    yield
    fake_llm.EVENT_PAUSE = pause
    fake.reset()


@pytest.fixture
def held_lookup(world: World):
    """The lookup tool held until the test calls ``release()``; released after the test anyway."""
    world.target.hold()
    yield world.target
    world.target.release()


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM):
    target = ToolTarget()
    env = {
        "QUARRY_CHAT_BASE_URL": fake.base,
        "QUARRY_CHAT_API_KEY": API_KEY,
        "QUARRY_CHAT_RETRIES": "1",
    }
    srv = ui_support.start_ui_server(
        quarry_bin, corpus, tmp_path_factory.mktemp("ui-chat"), "--chat-model", f"openai:{MODEL}", env=env
    )
    try:
        srv.api("POST", "/api/v1/tools", {
            "name": "lookup", "description": "Looks a word up in the team's dictionary",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            "http_url": target.url("/lookup/{{q}}"), "http_method": "GET"}, expect=201)
        srv.api("POST", "/api/v1/tools", {
            "name": "broken", "description": "A lookup whose backend fails",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "http_url": target.url("/fail?q={{q}}"), "http_method": "GET"}, expect=201)
        kb = srv.create_kb("handbook")
        srv.upload(kb["id"], {MD_NAME: MD_TEXT, PDF_NAME: make_pdf(PDF_PAGES)})
        docs = srv.wait_documents(kb["id"], 2)
        assert all(d["status"] == "ready" for d in docs), docs
        yield World(srv=srv, fake=fake, kb=kb, docs={d["file_name"]: d for d in docs}, target=target)
    finally:
        try:
            srv.stop()
        finally:
            target.stop()
    assert API_KEY not in srv.stderr()


# ---------------------------------------------------------------------------------------------
# Helpers.


def open_chat(page, srv, path: str = "#/chat") -> None:
    page.goto(srv.url(f"/{path}"))
    expect(page.locator(".page-chat")).to_have_attribute("data-ready", "true")


def message_box(page):
    return page.get_by_role("textbox", name="Message", exact=True)


def choose_kb(page, name: str) -> None:
    picker = page.get_by_test_id("kb-picker")
    picker.click()
    expect(picker).to_have_attribute("aria-expanded", "true")
    page.get_by_role("checkbox", name=re.compile(rf"^{re.escape(name)}\b")).check()
    page.keyboard.press("Escape")
    expect(picker).to_have_attribute("aria-expanded", "false")
    expect(page.get_by_test_id("kb-chip").filter(has_text=name)).to_be_visible()


def ask(page, text: str) -> None:
    box = message_box(page)
    box.fill(text)
    box.press("Enter")
    expect(page.get_by_test_id("user-text").last).to_have_text(text)


def last_answer(page):
    return page.get_by_test_id("assistant-message").last


def wait_complete(page):
    answer = last_answer(page)
    expect(answer).to_have_attribute("data-state", "complete", timeout=30_000)
    expect(page.get_by_test_id("send")).to_be_visible()
    expect(page.get_by_test_id("stop")).to_be_hidden()
    return answer


def conversation_id(page) -> str:
    m = re.search(r"#/chat/([0-9a-fA-F-]{8,})$", page.url)
    assert m, f"the URL does not name a conversation: {page.url}"
    return m.group(1)


def stored(srv, cid: str) -> dict:
    return srv.api("GET", f"/api/v1/conversations/{cid}")


def wait_stored_status(srv, cid: str, status: str, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    msg = None
    while time.monotonic() < deadline:
        msgs = stored(srv, cid)["messages"]
        msg = msgs[-1] if msgs else None
        if msg and msg["role"] == "assistant" and msg["status"] == status:
            return msg
        time.sleep(0.1)
    pytest.fail(f"the last message of {cid} is not {status!r}: {msg}")


# Records every text the last answer showed while it streamed.
WATCH_ANSWER = """() => {
  window.__answerTexts = [];
  const thread = document.querySelector('[data-testid=chat-thread]');
  const seen = () => {
    const all = thread.querySelectorAll('[data-testid=assistant-message] [data-testid=answer]');
    const el = all[all.length - 1];
    if (!el || el.querySelector('[data-testid=thinking]')) return;
    const text = el.textContent;
    const list = window.__answerTexts;
    if (text && list[list.length - 1] !== text) list.push(text);
  };
  new MutationObserver(seen).observe(thread, {subtree: true, childList: true, characterData: true});
}"""


# ---------------------------------------------------------------------------------------------
# Tests.


def test_empty_chat_page_and_the_knowledge_base_picker(world: World, ui_page, axe_check):
    page = ui_page
    open_chat(page, world.srv)
    expect(page.get_by_role("heading", level=1)).to_have_text("Chat")
    expect(page.get_by_test_id("chat-welcome")).to_be_visible()
    log = page.get_by_role("log")
    expect(log).to_have_attribute("aria-live", "polite")
    expect(page.get_by_role("button", name="New chat")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_test_id("stop")).to_be_hidden()
    expect(page.get_by_test_id("chat-notice")).to_be_hidden()

    # Shift+Enter is a new line; nothing is sent.
    box = message_box(page)
    box.fill("first line")
    box.press("Shift+Enter")
    box.type("second line")
    expect(box).to_have_value("first line\nsecond line")
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    box.fill("")

    # The picker, with the keyboard only: open, check, close with Escape, focus returns.
    picker = page.get_by_test_id("kb-picker")
    picker.focus()
    page.keyboard.press("Enter")
    expect(picker).to_have_attribute("aria-expanded", "true")
    handbook = page.get_by_role("checkbox", name=re.compile(r"^handbook\b"))
    expect(handbook).to_be_focused()
    page.keyboard.press("Space")
    expect(handbook).to_be_checked()
    expect(page.get_by_role("group", name="Search these knowledge bases")).to_contain_text("2 docs")
    axe_check(page, "chat-kb-picker-open")
    page.keyboard.press("Escape")
    expect(picker).to_have_attribute("aria-expanded", "false")
    expect(picker).to_be_focused()
    expect(picker).to_have_accessible_name(re.compile(r"^Knowledge bases\s*,\s*1 chosen\s*$"))
    chip = page.get_by_test_id("kb-chip")
    expect(chip).to_have_count(1)
    expect(chip).to_contain_text("handbook")
    axe_check(page, "chat-empty")

    # A chip's remove button takes the knowledge base off again.
    page.get_by_role("button", name="Remove knowledge base handbook").click()
    expect(page.get_by_test_id("kb-chip")).to_have_count(0)
    picker.click()
    expect(handbook).not_to_be_checked()
    page.keyboard.press("Escape")

    # The options: a model name and the tool settings.
    options = page.get_by_test_id("chat-options")
    options.click()
    expect(page.get_by_label("Model", exact=True)).to_be_visible()
    expect(page.get_by_label("Let the model use tools")).to_be_checked()
    expect(page.get_by_label("Most tool rounds")).to_be_visible()
    page.keyboard.press("Escape")
    expect(options).to_have_attribute("aria-expanded", "false")


def test_answer_streams_with_sources_tools_and_a_link_to_the_preview(
    world: World, held_lookup: ToolTarget, ui_page, axe_check, shot
):
    page, srv, fake = ui_page, world.srv, world.fake
    fake_llm.EVENT_PAUSE = 0.12  # slow enough that the deltas arrive one by one
    answer_text = "Quokkas live on **Rottnest Island** [1]; ferries leave Fremantle every morning [2]."
    fake.script([
        {"tool_calls": [{"id": "call_lookup", "tool": "lookup", "arguments": {"q": "quokka"}}]},
        {"text": answer_text, "pieces": 8},
    ])
    open_chat(page, srv)
    choose_kb(page, "handbook")
    page.evaluate(WATCH_ANSWER)
    ask(page, QUESTION)

    # While it runs: Stop instead of Send, the log busy, the tool call in progress.
    expect(page.get_by_test_id("stop")).to_be_visible()
    expect(page.get_by_test_id("send")).to_be_hidden()
    tool = page.get_by_test_id("tool-call")
    expect(tool).to_have_attribute("data-state", "calling")
    expect(tool).to_contain_text("Calling…")
    expect(tool).to_contain_text("lookup")
    held_lookup.release()
    expect(tool).to_have_attribute("data-state", "success")
    expect(tool).to_contain_text("Succeeded")

    answer = wait_complete(page)
    expect(page.get_by_role("log")).not_to_have_attribute("aria-busy", "true")
    expect(page.locator("#live-polite")).to_have_text("Answer complete.")

    # The text arrived piece by piece (plain text while streaming), then became Markdown.
    plain = answer_text.replace("**", "")
    texts = page.evaluate("() => window.__answerTexts")
    partial = [t for t in texts if t and len(t) < len(answer_text) and answer_text.startswith(t)]
    assert len(partial) >= 3, f"the answer did not stream in: {texts}"
    body = answer.get_by_test_id("answer")
    expect(body.locator("strong")).to_have_text("Rottnest Island")
    expect(body).to_have_text(re.compile(re.escape(plain.split("[")[0].strip())))
    expect(answer.get_by_test_id("answer-meta")).to_contain_text("tokens")

    # The URL names the conversation, and the list shows it first, current.
    cid = conversation_id(page)
    conv = stored(srv, cid)
    assert conv["messages"][-1]["status"] == "complete", conv["messages"][-1]
    sources = conv["messages"][-1]["sources"]
    assert {s["source"] for s in sources} == {MD_NAME, PDF_NAME}, sources
    first = page.get_by_test_id("conversation").first
    expect(first).to_have_attribute("data-id", cid)
    expect(first.get_by_role("link")).to_have_attribute("aria-current", "page")
    expect(first).to_contain_text(QUESTION[:20])

    # Sources: a count, then each passage's file, page and score.
    panel = answer.get_by_test_id("sources")
    expect(panel.locator("summary")).to_contain_text(f"{len(sources)} sources")
    panel.locator("summary").click()
    items = panel.get_by_test_id("source")
    expect(items).to_have_count(len(sources))
    for s, item in zip(sources, items.all(), strict=True):
        expect(item.get_by_test_id("source-file")).to_have_text(s["source"])
        expect(item.get_by_test_id("source-score")).to_have_text(f"Score {s['score']:.2f}")
        if s["page"] is None:
            expect(item.get_by_test_id("source-page")).to_have_count(0)
        else:
            expect(item.get_by_test_id("source-page")).to_have_text(f"Page {s['page']}")
    assert any(s["page"] for s in sources if s["source"] == PDF_NAME), sources

    # Citations: [2] reveals source 2.
    cites = body.get_by_test_id("citation")
    expect(cites).to_have_count(2)
    second = sources[1]
    expect(cites.nth(1)).to_have_accessible_name(f"Source 2: {second['source']}")
    panel.locator("summary").click()  # closed again: the citation opens it
    cites.nth(1).click()
    expect(panel).to_have_attribute("open", "")
    expect(items.nth(1)).to_be_focused()

    # The tool call's arguments and result, formatted.
    tool.get_by_text("Arguments").click()
    expect(tool.get_by_test_id("tool-arguments")).to_have_text(json.dumps({"q": "quokka"}, indent=2))
    tool.get_by_text("Result", exact=True).click()
    expect(tool.get_by_test_id("tool-result")).to_contain_text('"answer": "lookup says quokka-42"')

    axe_check(page, "chat-answer-sources-tools")
    shot(page, "chat")

    # Source links open the knowledge base's preview at that document (and page). The PDF's
    # link is checked by its address: opening it would load Chromium's PDF viewer, a
    # chrome-extension:// request the page checks count as foreign. The Markdown one is followed.
    for s in sources:
        doc_id = world.docs[s["source"]]["id"]
        assert s["document_id"] == doc_id, (s, doc_id)
        want = f"#/kb/{world.kb['id']}?doc={doc_id}" + (f"&page={s['page']}" if s["page"] is not None else "")
        expect(items.nth(sources.index(s)).get_by_test_id("source-link")).to_have_attribute("href", want)
    md = next(s for s in sources if s["source"] == MD_NAME)
    items.nth(sources.index(md)).get_by_test_id("source-link").click()
    expect(page).to_have_url(re.compile(re.escape(f"#/kb/{world.kb['id']}?doc={world.docs[MD_NAME]['id']}")))
    expect(page.locator(".page-kb")).to_have_attribute("data-ready", "true")
    expect(page.locator("dialog[open]")).to_contain_text(MD_NAME)


def test_tool_calls_calling_then_succeeded_or_failed(world: World, held_lookup: ToolTarget, ui_page):
    page, srv, fake = ui_page, world.srv, world.fake
    fake.script([
        {"tool_calls": [{"id": "call_ok", "tool": "lookup", "arguments": {"q": "zebra"}}]},
        {"tool_calls": [{"id": "call_bad", "tool": "broken", "arguments": {"q": "x"}}]},
        {"text": "The lookup says zebra-42; the other lookup failed."},
    ])
    open_chat(page, srv)
    ask(page, "Look up zebra, then try the broken lookup.")
    blocks = page.get_by_test_id("tool-call")
    ok = blocks.nth(0)
    expect(ok).to_have_attribute("data-state", "calling")
    expect(ok.locator(".tool-badge")).to_have_text("Calling…")
    expect(page.locator("#live-polite")).to_have_text("Calling tool lookup")
    held_lookup.release()
    expect(ok).to_have_attribute("data-state", "success")
    expect(ok.locator(".tool-badge")).to_have_text("Succeeded")
    bad = blocks.nth(1)
    expect(bad).to_have_attribute("data-state", "error")
    expect(bad.locator(".tool-badge")).to_have_text("Failed")
    answer = wait_complete(page)
    expect(answer.get_by_test_id("answer")).to_have_text("The lookup says zebra-42; the other lookup failed.")
    expect(answer.get_by_test_id("sources")).to_have_count(0)

    # Arguments and results are behind disclosure widgets, operable with the keyboard.
    args = ok.get_by_test_id("tool-arguments")
    expect(args).to_be_hidden()
    ok.get_by_text("Arguments").focus()
    page.keyboard.press("Enter")
    expect(args).to_have_text(json.dumps({"q": "zebra"}, indent=2))
    ok.get_by_text("Result", exact=True).click()
    expect(ok.get_by_test_id("tool-result")).to_contain_text("lookup says zebra-42")
    bad.get_by_text("Result", exact=True).click()
    expect(bad.get_by_test_id("tool-result")).to_contain_text("500")

    # After a reload the stored conversation shows the same calls.
    cid = conversation_id(page)
    page.reload()
    expect(page.locator(".page-chat")).to_have_attribute("data-ready", "true")
    blocks = page.get_by_test_id("tool-call")
    expect(blocks).to_have_count(2)
    expect(blocks.nth(0)).to_have_attribute("data-state", "success")
    expect(blocks.nth(1)).to_have_attribute("data-state", "error")
    expect(blocks.nth(1)).to_contain_text("broken")
    expect(last_answer(page).get_by_test_id("answer")).to_have_text("The lookup says zebra-42; the other lookup failed.")
    assert [c["id"] for c in stored(srv, cid)["messages"][-1]["tool_calls"]] == ["call_ok", "call_bad"]


def test_conversations_survive_a_reload_and_can_be_renamed_and_deleted(world: World, ui_page, ui_page_factory):
    page, srv, fake = ui_page, world.srv, world.fake
    fake.script([{"text": "On Rottnest Island [1]."}])
    open_chat(page, srv)
    choose_kb(page, "handbook")
    ask(page, "Where does the quokka live?")
    wait_complete(page)
    cid = conversation_id(page)

    page.reload()
    expect(page.locator(".page-chat")).to_have_attribute("data-ready", "true")
    item = page.locator(f"[data-testid=conversation][data-id='{cid}']")
    expect(item).to_contain_text("Where does the quokka live?")
    # Reopened from the store: the question, the answer with its sources and citation, the
    # knowledge base chosen again in the composer.
    expect(page.get_by_test_id("user-text")).to_have_text(["Where does the quokka live?"])
    answer = last_answer(page)
    expect(answer.get_by_test_id("answer")).to_have_text("On Rottnest Island 1.")
    expect(answer.get_by_test_id("citation")).to_have_count(1)
    expect(answer.get_by_test_id("sources").locator("summary")).to_contain_text("sources")
    expect(page.get_by_test_id("kb-chip")).to_have_text(["handbook"])

    # "New chat" empties the thread; the list opens the conversation again.
    page.get_by_role("button", name="New chat").click()
    expect(page.get_by_test_id("chat-welcome")).to_be_visible()
    expect(page).to_have_url(re.compile(r"#/chat$"))
    item.get_by_role("link").click()
    expect(page).to_have_url(re.compile(rf"#/chat/{cid}$"))
    expect(last_answer(page).get_by_test_id("answer")).to_have_text("On Rottnest Island 1.")

    # Rename.
    page.get_by_role("button", name="Rename conversation “Where does the quokka live?”").click()
    dialog = page.get_by_role("dialog", name="Rename conversation")
    dialog.get_by_label("Title").fill("Quokka questions")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_have_count(0)
    expect(item.locator(".chat-conv-title")).to_have_text("Quokka questions")
    expect(page.locator("#chat-thread-title")).to_have_text("Quokka questions")
    assert stored(srv, cid)["title"] == "Quokka questions"

    # At phone width the list hides behind a button.
    phone = ui_page_factory(viewport=PHONE)
    open_chat(phone, srv, f"#/chat/{cid}")
    toggle = phone.get_by_role("button", name="Conversations")
    expect(phone.locator("#chat-sidebar")).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(phone.locator("#chat-sidebar")).to_be_visible()
    phone.locator(f"[data-testid=conversation][data-id='{cid}']").get_by_role("link").click()
    expect(phone.locator("#chat-sidebar")).to_be_hidden()
    expect(last_answer(phone).get_by_test_id("answer")).to_have_text("On Rottnest Island 1.")

    # Delete (confirmed): gone from the list and the store; the page starts a new chat.
    page.get_by_role("button", name="Delete conversation “Quokka questions”").click()
    confirm = page.get_by_role("dialog")
    expect(confirm).to_contain_text("Quokka questions")
    confirm.get_by_role("button", name="Delete").click()
    expect(item).to_have_count(0)
    expect(page.get_by_test_id("chat-welcome")).to_be_visible()
    expect(page).to_have_url(re.compile(r"#/chat$"))
    assert srv.http("GET", f"/api/v1/conversations/{cid}").status == 404


def test_stop_aborts_a_hanging_stream_and_the_page_recovers(world: World, ui_page):
    page, srv, fake = ui_page, world.srv, world.fake
    fake.script([{"hang": True}, {"text": "Back again."}])
    open_chat(page, srv)
    ask(page, "Think very hard.")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(last_answer(page).get_by_test_id("thinking")).to_be_visible()
    [req] = fake.wait_requests(1)
    expect(page).to_have_url(re.compile(r"#/chat/[0-9a-f-]+$"))
    cid = conversation_id(page)
    stop.click()
    answer = last_answer(page)
    expect(answer).to_have_attribute("data-state", "interrupted")
    expect(answer.get_by_test_id("stopped")).to_have_text("Stopped")
    expect(page.get_by_test_id("send")).to_be_visible()
    expect(stop).to_be_hidden()
    expect(message_box(page)).to_be_focused()
    assert fake.wait_disconnect(req, timeout=10), "the provider never saw the client leave"
    wait_stored_status(srv, cid, "interrupted")

    # The same conversation goes on.
    ask(page, "Are you back?")
    answer = wait_complete(page)
    expect(answer.get_by_test_id("answer")).to_have_text("Back again.")
    assert conversation_id(page) == cid
    assert len(fake.streamed()) == 2


def test_a_provider_error_is_shown_in_the_thread_and_can_be_retried(world: World, ui_page):
    page, srv, fake = ui_page, world.srv, world.fake
    err = {"error": {"message": "fake upstream overloaded (code 7731)", "type": "server_error"}}
    fake.script([{"status": 500, "body": err}, {"status": 500, "body": err}])  # a try and one retry
    open_chat(page, srv)
    ask(page, "Anyone there?")
    answer = last_answer(page)
    expect(answer).to_have_attribute("data-state", "failed")
    block = answer.get_by_test_id("chat-error")
    expect(block).to_contain_text("The model could not answer")
    expect(block).to_contain_text("fake upstream overloaded (code 7731)")
    expect(block).to_contain_text("provider_error · 500")
    expect(page.locator("#live-assertive")).to_contain_text("fake upstream overloaded (code 7731)")
    expect(page.get_by_test_id("send")).to_be_visible()
    wait_stored_status(srv, conversation_id(page), "failed")

    fake.script([{"text": "Here now."}])
    answer.get_by_role("button", name="Try again").click()
    answer = wait_complete(page)
    expect(answer.get_by_test_id("answer")).to_have_text("Here now.")


def test_without_a_chat_model_the_page_says_how_to_configure_one(ui_server_factory, ui_page, axe_check):
    srv = ui_server_factory()  # no --chat-model
    page = ui_page
    allow_console(page, r"status of 503")  # the API's answer, shown as a notice
    open_chat(page, srv)
    notice = page.get_by_test_id("chat-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Chat is not set up on this server yet")
    expect(notice).to_contain_text("--chat-model")
    axe_check(page, "chat-no-model")
    # Sending says the same and keeps the text; nothing is stored.
    message_box(page).fill("Hello?")
    page.get_by_role("button", name="Send").click()
    expect(notice).to_be_visible()
    expect(message_box(page)).to_have_value("Hello?")
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    expect(page.get_by_test_id("no-conversations")).to_be_visible()
    assert srv.api("GET", "/api/v1/conversations") == []


def test_chat_in_simplified_chinese(world: World, held_lookup: ToolTarget, ui_page_factory):
    page = ui_page_factory(locale="zh-CN")
    world.fake.script([
        {"tool_calls": [{"tool": "lookup", "arguments": {"q": "袋鼠"}}]},
        {"text": "查到了。"},
    ])
    open_chat(page, world.srv)
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    expect(page.get_by_role("heading", level=1)).to_have_text("对话")
    expect(page.get_by_role("button", name="新对话")).to_be_visible()
    expect(page.get_by_test_id("kb-picker")).to_have_accessible_name("知识库")
    box = page.get_by_role("textbox", name="消息", exact=True)
    expect(box).to_have_attribute("placeholder", "输入问题…")
    box.fill("查一下袋鼠")
    page.get_by_role("button", name="发送").click()
    expect(page.get_by_test_id("tool-call")).to_contain_text("调用中…")
    held_lookup.release()
    expect(page.get_by_test_id("tool-call").locator(".tool-badge")).to_have_text("成功")
    answer = wait_complete(page)
    expect(answer.get_by_test_id("answer")).to_have_text("查到了。")
    expect(page.locator("#live-polite")).to_have_text("回答完毕。")
    page.get_by_test_id("tool-call").get_by_text("参数").click()
    expect(page.get_by_test_id("tool-arguments")).to_contain_text("袋鼠")
