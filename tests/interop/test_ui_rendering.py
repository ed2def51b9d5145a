"""Markdown written by tools and documents, as the web UI shows it (issue 21, the web UI):

- built-in tool descriptions (`**When to use:**`, lists) are rendered (js/markdown.js builds DOM)
  on #/tools and in the catalog (#/hub), not shown as raw Markdown;
- chat source excerpts are plain text: no `# ` heading markers, no `| --- |` table rows;
- the assistant's avatar is the product's mark, not rays around a point (which read as a
  loading spinner).

Through the real ``quarry serve`` and Chromium; the chat model is the loopback fake of an
OpenAI-compatible provider (fake_llm.py), the sources come from a real knowledge base.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import ui_support
from fake_llm import FakeLLM
from playwright.sync_api import expect

MODEL = "fake-chat"
FARES = "\n".join(
    [
        "# Ferry fares",
        "",
        "Ferries to Rottnest Island leave Fremantle every morning; the quokka greets them.",
        "",
        "| Ticket | Return fare |",
        "| --- | ---: |",
        "| Adult | 75 dollars |",
        "| Child | 40 dollars |",
        "",
        "## Luggage",
        "",
        "Bicycles travel for **free** on the ferry to Rottnest Island.",
    ]
)


def open_tools(page, base: str, tab: str) -> None:
    page.goto(f"{base}/#/tools?tab={tab}")
    expect(page.locator(".page-tools")).to_have_attribute("data-ready", "true")


def test_builtin_tool_descriptions_render_markdown(ui_page, ui_module_server):
    page, srv = ui_page, ui_module_server
    tools = srv.api("GET", "/api/v1/tools/builtin")
    marked = [t for t in tools if "**" in (t.get("description") or "")]
    assert marked, "no built-in tool description uses Markdown emphasis: nothing to check"
    open_tools(page, srv.base, "builtin")
    for tool in marked:
        # The description's cell (the second column).
        desc = page.get_by_test_id(f"builtin-{tool['full_name']}").locator("td").nth(1)
        expect(desc).to_be_visible()
        strong = re.findall(r"\*\*([^*\n]+)\*\*", tool["description"])
        for text in strong:
            expect(desc.locator("strong").filter(has_text=text.strip()).first).to_be_attached()
        shown = desc.inner_text()
        assert "**" not in shown, f"{tool['full_name']}: raw Markdown shown: {shown[:300]}"
        if re.search(r"^- ", tool["description"], re.M):
            expect(desc.locator("ul > li").first).to_be_attached()


def test_catalog_tool_descriptions_render_markdown(ui_page, ui_module_server):
    page, srv = ui_page, ui_module_server
    page.goto(f"{srv.base}/#/hub?cat=knowledge&pkg=knowledge")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    expect(page.get_by_role("heading", name="knowledge.search")).to_be_visible()
    expect(page.locator(".hub-desc strong").first).to_be_attached()
    assert "**" not in page.locator("main").inner_text()


# ---------------------------------------------------------------------------------------------
# Chat: source excerpts and the avatar


@pytest.fixture(scope="module")
def fake():
    f = FakeLLM.start()
    yield f
    f.stop()


@pytest.fixture(scope="module")
def chat_srv(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM):
    env = {"QUARRY_CHAT_BASE_URL": fake.base, "QUARRY_CHAT_API_KEY": "sk-fake-ui-render", "QUARRY_CHAT_RETRIES": "1"}
    srv = ui_support.start_ui_server(
        quarry_bin, corpus, tmp_path_factory.mktemp("ui-render"), "--chat-model", f"openai:{MODEL}", env=env
    )
    try:
        kb = srv.create_kb("ferries")
        srv.upload(kb["id"], {"fares.md": FARES})
        docs = srv.wait_documents(kb["id"], 1)
        assert docs[0]["status"] == "ready", docs
        yield srv
    finally:
        srv.stop()


def ask_about_fares(page, srv, fake: FakeLLM):
    fake.reset()
    fake.script([{"text": "An adult return fare is 75 dollars [1]."}])
    page.goto(srv.url("/#/chat"))
    expect(page.locator(".page-chat")).to_have_attribute("data-ready", "true")
    picker = page.get_by_test_id("kb-picker")
    picker.click()
    page.get_by_role("checkbox", name=re.compile(r"^ferries\b")).check()
    page.keyboard.press("Escape")
    box = page.get_by_role("textbox", name=re.compile("^(Message|消息)$"))
    box.fill("What is the return fare for an adult on the Rottnest Island ferry?")
    box.press("Enter")
    answer = page.get_by_test_id("assistant-message").last
    expect(answer).to_have_attribute("data-state", "complete", timeout=30_000)
    return answer


def test_chat_source_excerpts_are_clean_text(ui_page, chat_srv, fake, shot):
    page, srv = ui_page, chat_srv
    answer = ask_about_fares(page, srv, fake)
    panel = answer.get_by_test_id("sources")
    expect(panel).to_be_attached()
    panel.locator("summary").click()
    # What the server sent: the passages as stored, Markdown and all.
    conv = srv.api("GET", f"/api/v1/conversations/{page.url.rsplit('/', 1)[1]}")
    sources = conv["messages"][-1]["sources"]
    assert sources and any(("# " in s["content"] or "| ---" in s["content"]) for s in sources), sources
    excerpts = answer.locator(".chat-source-excerpt")
    expect(excerpts.first).not_to_be_empty()
    texts = excerpts.all_inner_texts()
    assert len(texts) == len(sources), texts
    for text in texts:
        assert not re.search(r"(^|\s)#{1,6} ", text), f"heading marker in the excerpt: {text}"
        assert "|" not in text and "---" not in text and "**" not in text, f"raw Markdown in the excerpt: {text}"
    joined = " ".join(texts)
    if any("| Adult |" in s["content"] for s in sources):
        assert "Adult · 75 dollars" in joined, joined
    if any("# Ferry fares" in s["content"] for s in sources):
        assert "Ferry fares" in joined, joined
    shot(page, "chat-source-excerpts")


def test_the_assistant_avatar_is_the_product_mark(ui_page_factory, chat_srv, fake):
    page = ui_page_factory(locale="zh-CN", viewport={"width": 1280, "height": 860})
    answer = ask_about_fares(page, chat_srv, fake)
    avatar = answer.locator(".msg-avatar")
    expect(avatar).to_be_visible()
    got = page.evaluate(
        """() => {
          const avatar = [...document.querySelectorAll('.msg-avatar')].pop();
          const svg = avatar.querySelector('svg');
          const paths = [...svg.querySelectorAll('path')].map((p) => p.getAttribute('d'));
          const brand = document.querySelector('.brand svg path').getAttribute('d');
          const cs = getComputedStyle(svg);
          const box = getComputedStyle(avatar);
          return { paths, brand, fill: cs.fill, animation: cs.animationName, bg: box.backgroundColor, color: box.color };
        }"""
    )
    # One filled shape, the top bar's mark (rays around a point look like a spinner).
    assert got["paths"] == [got["brand"]], got
    assert got["fill"] not in ("none", ""), got
    assert got["animation"] == "none", got
    # The mark stands out from its tile.
    assert got["bg"] != got["color"], got
