"""The web UI's layout (issue 21, the web UI): on a 390-pixel phone the top navigation never
breaks inside a word (知识/库, 工/具 in Chinese) and every link stays on screen; the bundle builder's client configs
(`.mcp.json` …) stay inside their panel, on the phone and on the desktop (where the panel was
sticky with a height cap and cut them off at its bottom edge), in both languages. Through the
real ``quarry serve`` and Chromium; screenshots for a look.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from ui_support import DESKTOP, PHONE

# Every nav link is one line: its text's line boxes (one rect per line) all share one top.
NAV_LINES = """() => [...document.querySelectorAll('#nav .nav-link')].map((a) => {
  const range = document.createRange();
  range.selectNodeContents(a);
  const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
  const nav = document.getElementById('nav').getBoundingClientRect();
  const box = a.getBoundingClientRect();
  return { text: a.textContent, lines: tops.size, width: box.width, top: box.top, left: box.left, right: box.right, navTop: nav.top, navBottom: nav.bottom };
})"""


@pytest.mark.parametrize("locale", ["zh-CN", "en-US"])
@pytest.mark.parametrize("path", ["#/kb", "#/chat"])
def test_phone_navigation_never_breaks_inside_a_word(ui_page_factory, ui_module_server, locale, path, shot):
    page = ui_page_factory(locale=locale, viewport=PHONE)
    page.goto(f"{ui_module_server.base}/{path}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()
    links = page.evaluate(NAV_LINES)
    assert len(links) == 8, links
    broken = [link for link in links if link["lines"] != 1]
    assert not broken, f"nav labels wrapped: {broken}"
    # Every link on screen (issue 41 item 24: Chat and Access sat off-screen in a nav that
    # scrolled sideways): the links wrap onto rows, none leaves the viewport.
    width = page.viewport_size["width"]
    off = [link for link in links if link["left"] < 0 or link["right"] > width]
    assert not off, f"nav links off-screen: {off}"
    current = page.locator("#nav .nav-link[aria-current=page]")
    expect(current).to_be_in_viewport()
    if locale == "zh-CN" and path == "#/kb":
        shot(page, "nav-phone-zh")


def bundle_with_a_tool(page, base: str):
    page.goto(f"{base}/#/hub?cat=knowledge&pkg=knowledge")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    page.get_by_role("checkbox", name="Add knowledge.search to the bundle").or_(
        page.get_by_role("checkbox", name="将 knowledge.search 加入组合")
    ).first.check()
    bundle = page.get_by_test_id("bundle")
    expect(bundle.get_by_test_id("config-claude-json")).not_to_be_empty()
    return bundle


# Each visible config block: its content fits its own box (or scrolls inside it), and the
# box lies within the bundle panel.
CONTAINED = """() => {
  const bundle = document.querySelector('[data-testid=bundle]');
  const panel = bundle.getBoundingClientRect();
  const hidden = { x: bundle.scrollWidth - bundle.clientWidth, y: bundle.scrollHeight - bundle.clientHeight };
  return [...document.querySelectorAll('[data-testid=bundle] pre.hub-code')]
    .filter((pre) => pre.offsetParent !== null)
    .map((pre) => {
      const box = pre.getBoundingClientRect();
      const cs = getComputedStyle(pre);
      return {
        id: pre.dataset.testid, scrollWidth: pre.scrollWidth, clientWidth: pre.clientWidth,
        overflowX: cs.overflowX, left: box.left, right: box.right,
        panelLeft: panel.left, panelRight: panel.right, viewport: window.innerWidth, panelHidden: hidden,
      };
    });
}"""


def check_contained(blocks: list[dict]) -> None:
    assert blocks, "no config block is visible"
    for b in blocks:
        fits = b["scrollWidth"] <= b["clientWidth"] + 1 or b["overflowX"] in ("auto", "scroll")
        assert fits, f"{b['id']}: content wider than its box and not scrollable: {b}"
        assert b["right"] <= b["panelRight"] + 1 and b["left"] >= b["panelLeft"] - 1, f"{b['id']} leaves the panel: {b}"
        assert b["right"] <= b["viewport"] + 1, f"{b['id']} leaves the screen: {b}"
        # Nothing is cut off at the panel's edges behind a scrollbar of the panel's own.
        assert b["panelHidden"]["x"] <= 1 and b["panelHidden"]["y"] <= 1, f"the panel hides part of its content: {b}"


@pytest.mark.parametrize("locale", ["zh-CN", "en-US"])
@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_bundle_config_blocks_stay_inside_the_panel(ui_page_factory, ui_module_server, locale, viewport, shot):
    page = ui_page_factory(locale=locale, viewport=viewport)
    bundle = bundle_with_a_tool(page, ui_module_server.base)
    for tab in bundle.get_by_role("tab").all():
        tab.click()
        check_contained(page.evaluate(CONTAINED))
    if locale == "zh-CN":
        bundle.get_by_role("tab").first.click()
        shot(page, f"hub-bundle-zh-{viewport['width']}")
