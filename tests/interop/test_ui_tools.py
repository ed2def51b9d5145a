"""The Tools page (#/tools, crates/quarry-ui/assets/js/tools.js) and the catalog browser and
bundle builder (#/hub, js/hub.js) in a real Chromium against the real ``quarry serve``
(fixtures in ui_support.py). Everything the pages do is checked against the hub's REST API,
and the bundle's URL against the hub's MCP endpoint with the official MCP Python SDK:

- MCP servers: register server-everything (stdio, with an argument and a secret environment
  variable) through the dialog, watch it connect and list its tools, open a tool's schema,
  switch a tool off; register two dead upstreams (a command that exits at once and an HTTP URL
  on a closed port) and see the failure and the last error; delete one;
- built-in tools: switch one off and on;
- custom HTTP tools: build one with the parameter editor against a loopback HTTP server,
  "Test" it through the form generated from its schema, edit it (header values kept);
- #/hub: category → package → tool, search across categories, a bundle of server-everything
  tools whose URL lists exactly those tools over MCP (and one of them answers), the bundle kept
  across a reload, the over-cap warning, the configs with a Bearer placeholder under --auth;
- axe-core on each tab and the hub, screenshots, and the pages in Chinese.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect
from conftest import everything_js, node, settled
from ui_support import in_thread, login

GREETING_SECRET = "greeting-secret-5d1c"
HEADER_SECRET = "header-secret-93ab"


# ---------------------------------------------------------------------------------------------
# Helpers


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_tools(page, base: str, tab: str | None = None) -> None:
    page.goto(f"{base}/#/tools" + (f"?tab={tab}" if tab else ""))
    expect(page.locator(".page-tools")).to_have_attribute("data-ready", "true")


def open_hub(page, base: str) -> None:
    page.goto(f"{base}/#/hub")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")


def panel(page):
    """The visible tab panel of the Tools page."""
    return page.locator(".page-tools [role=tabpanel]:not([hidden])")


def quiet(page) -> None:
    """Drops the toasts before an axe run (their colours are the shell's, see test_ui_access)."""
    page.evaluate("() => document.querySelectorAll('#toasts .toast').forEach((t) => t.remove())")


def server_card(page, name: str):
    return page.get_by_test_id(f"server-{name}")


def servers_by_name(srv) -> dict[str, dict]:
    return {s["name"]: s for s in srv.api("GET", "/api/v1/mcp/servers")}


def ensure_everything(srv) -> dict:
    """server-everything registered (by the first test, or here when run alone)."""
    found = servers_by_name(srv).get("everything")
    if found:
        return found
    return settled(srv, srv.api(
        "POST",
        "/api/v1/mcp/servers",
        {"name": "everything", "transport_type": "stdio", "config": f"{node()} {everything_js()}", "args": ["stdio"],
         "category": "testing"},
        expect=201,
    ))


# ---------------------------------------------------------------------------------------------
# A loopback HTTP endpoint for the custom tool: it answers with what it received.


class _Echo(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        out = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "body": body,
                # Whether the secret header arrived, never its value (the page shows this body).
                "key_ok": self.headers.get("X-Key") == HEADER_SECRET,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


@pytest.fixture(scope="module")
def echo_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


# ---------------------------------------------------------------------------------------------
# MCP servers


def test_register_stdio_server_browse_and_switch_tools(ui_page, ui_module_server, axe_check, shot):
    srv, page = ui_module_server, ui_page
    open_tools(page, srv.base)
    expect(page.get_by_role("heading", level=1, name="Tools")).to_be_visible()
    expect(panel(page)).to_contain_text("No MCP servers yet")

    panel(page).get_by_role("button", name="Register server").click()
    dlg = page.get_by_role("dialog", name="Register an MCP server")
    dlg.get_by_role("textbox", name="Name", exact=True).fill("everything")
    # stdio is the default transport: its fields show, the URL's do not.
    expect(dlg.get_by_role("radio", name="stdio (local command)")).to_be_checked()
    expect(dlg.get_by_role("textbox", name="Server URL")).to_be_hidden()
    dlg.get_by_role("textbox", name="Command", exact=True).fill(f"{node()} {everything_js()}")
    dlg.get_by_role("textbox", name="Extra arguments").fill("stdio")
    dlg.get_by_role("button", name="Add variable").click()
    dlg.get_by_label("Variable 1 name").fill("GREETING")
    dlg.get_by_label("Variable 1 value").fill(GREETING_SECRET)
    expect(dlg.get_by_label("Variable 1 value")).to_have_attribute("type", "password")
    dlg.get_by_text("Catalog details and timeouts").click()
    dlg.get_by_role("textbox", name="Category").fill("testing")
    quiet(page)
    axe_check(page, "tools-register-dialog")
    dlg.get_by_role("button", name="Register", exact=True).click()
    expect(dlg).to_have_count(0)

    card = server_card(page, "everything")
    expect(card.get_by_test_id("server-status")).to_have_attribute("data-status", "ready")
    expect(card.get_by_test_id("server-status")).to_have_text("Connected")
    api = servers_by_name(srv)["everything"]
    assert api["status"] == "ready" and api["args"] == ["stdio"] and api["env"] == ["GREETING"], api
    assert api["category"] == "testing"
    # The card counts the tools a client can call — what the catalog lists (issue 41 item 12:
    # it said 13 where the catalog listed 12; everything's task-only tool is not callable).
    catalog = srv.api("GET", "/api/catalog/everything/tools")["tools"]
    assert api["usable_tool_count"] == len(catalog) < api["tool_count"], (api["usable_tool_count"], len(catalog))
    expect(card.get_by_test_id("server-tool-count")).to_have_text(f"{api['usable_tool_count']} tools")
    # The variable's name shows, its value never (the API does not return it either).
    expect(card).to_contain_text("GREETING")
    assert GREETING_SECRET not in page.content()
    expect(card.get_by_role("switch", name="Enabled: everything")).to_be_checked()

    # Its tools, with descriptions and schemas.
    card.get_by_role("button", name=f"Show {api['tool_count']} tools").click()
    echo = card.get_by_test_id("tool-everything.echo")
    expect(echo).to_contain_text("Echoes back the input string")
    expect(echo).to_contain_text("everything__echo")
    echo.get_by_text("Input schema of echo").click()
    tree = echo.locator(".json-tree")
    expect(tree).to_contain_text("message")
    expect(tree).to_contain_text('"string"')
    expect(tree).to_contain_text("required")

    # A tool switched off through its switch is off in the API.
    get_sum = card.get_by_test_id("tool-everything.get-sum")
    sw = get_sum.get_by_role("switch", name="Enabled: everything.get-sum")
    expect(sw).to_be_checked()
    sw.click()
    expect(sw).not_to_be_checked()
    expect(sw).to_be_enabled()  # disabled while the request runs
    tools = {t["tool"]: t for t in srv.api("GET", f"/api/v1/mcp/servers/{api['id']}/tools")}
    assert tools["get-sum"]["enabled"] is False and tools["echo"]["enabled"] is True

    # Refresh rediscovers and keeps the card's state.
    card.get_by_role("button", name="Refresh everything").click()
    expect(page.locator("#toasts")).to_contain_text("everything refreshed")
    expect(get_sum.get_by_role("switch", name="Enabled: everything.get-sum")).not_to_be_checked()

    quiet(page)
    axe_check(page, "tools-servers")
    shot(page, "tools-servers")


def test_health_updates_live_while_connecting(ui_page, ui_module_server):
    """Registration answers at once (issue 21 item 7): the dialog closes, the list polls and
    shows the new server connecting, then connected, and a toast says so."""
    srv, page = ui_module_server, ui_page
    open_tools(page, srv.base)
    panel(page).get_by_role("button", name="Register server").click()
    dlg = page.get_by_role("dialog", name="Register an MCP server")
    dlg.get_by_role("textbox", name="Name", exact=True).fill("slow")
    dlg.get_by_role("textbox", name="Command", exact=True).fill(f"sh -c 'sleep 4; exec {node()} {everything_js()} stdio'")
    dlg.get_by_role("button", name="Register", exact=True).click()
    expect(dlg).to_have_count(0)
    expect(page.locator("#toasts")).to_contain_text("slow is registered and connecting")
    card = server_card(page, "slow")
    expect(card.get_by_test_id("server-status")).to_have_attribute("data-status", "connecting")
    expect(card.get_by_test_id("server-status")).to_have_text("Connecting…")
    expect(card.get_by_test_id("server-status")).to_have_attribute("data-status", "ready")
    expect(page.locator("#toasts")).to_contain_text("slow is connected")
    srv.api("DELETE", f"/api/v1/mcp/servers/{servers_by_name(srv)['slow']['id']}")


def test_dead_upstreams_show_their_failure(ui_page, ui_module_server, axe_check):
    srv, page = ui_module_server, ui_page
    open_tools(page, srv.base)

    # A command that exits at once.
    panel(page).get_by_role("button", name="Register server").click()
    dlg = page.get_by_role("dialog", name="Register an MCP server")
    dlg.get_by_role("textbox", name="Name", exact=True).fill("dead")
    dlg.get_by_role("textbox", name="Command", exact=True).fill(
        f"{sys.executable} -c \"import sys; sys.stderr.write('no upstream here'); sys.exit(3)\""
    )
    dlg.get_by_role("button", name="Register", exact=True).click()
    expect(dlg).to_have_count(0)
    expect(page.locator("#toasts")).to_contain_text("dead was registered but is Failed")
    dead = server_card(page, "dead")
    expect(dead.get_by_test_id("server-status")).to_have_text("Failed")
    api = servers_by_name(srv)["dead"]
    assert api["status"] in ("error", "connecting") and api["last_error"], api
    expect(dead.get_by_test_id("server-last-error")).to_contain_text("Last error:")
    expect(dead.get_by_test_id("server-last-error")).to_contain_text(api["last_error"][:30])
    expect(dead.get_by_test_id("server-tool-count")).to_have_text("0 tools")

    # Streamable HTTP on a port nobody listens on: the dialog shows the URL and header fields.
    panel(page).get_by_role("button", name="Register server").click()
    dlg = page.get_by_role("dialog", name="Register an MCP server")
    dlg.get_by_role("textbox", name="Name", exact=True).fill("closed")
    dlg.get_by_text("Streamable HTTP", exact=True).click()
    expect(dlg.get_by_role("textbox", name="Command", exact=True)).to_be_hidden()
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    dlg.get_by_role("textbox", name="Server URL").fill(url)
    dlg.get_by_role("button", name="Add header").click()
    dlg.get_by_label("Header 1 name").fill("Authorization")
    dlg.get_by_label("Header 1 value").fill(f"Bearer {HEADER_SECRET}")
    dlg.get_by_role("button", name="Register", exact=True).click()
    expect(dlg).to_have_count(0)
    closed = server_card(page, "closed")
    expect(closed.get_by_test_id("server-status")).to_have_text("Failed")
    expect(closed.get_by_test_id("server-last-error")).to_be_visible()
    expect(closed).to_contain_text(url)
    expect(closed).to_contain_text("Authorization")
    assert HEADER_SECRET not in page.content()
    last = servers_by_name(srv)["closed"]
    assert last["transport_type"] == "http" and last["headers"] == ["Authorization"] and last["last_error"], last
    quiet(page)
    axe_check(page, "tools-servers-failed")

    # Deleting asks first.
    closed.get_by_role("button", name="Delete closed").click()
    confirm = page.get_by_role("dialog", name="Please confirm")
    expect(confirm).to_contain_text("closed")
    confirm.get_by_role("button", name="Delete", exact=True).click()
    expect(closed).to_have_count(0)
    assert "closed" not in servers_by_name(srv)
    # The failing one is disabled, which stops its retries.
    dead.get_by_role("switch", name="Enabled: dead").click()
    expect(dead.get_by_test_id("server-status")).to_have_text("Disabled")
    assert servers_by_name(srv)["dead"]["enabled"] is False


# ---------------------------------------------------------------------------------------------
# Built-in tools


def test_builtin_tool_switch(ui_page, ui_module_server, axe_check):
    srv, page = ui_module_server, ui_page
    open_tools(page, srv.base, "builtin")
    expect(page.get_by_role("tab", name="Built-in tools")).to_have_attribute("aria-selected", "true")
    row = page.get_by_test_id("builtin-knowledge.status")
    sw = row.get_by_role("switch", name="Enabled: knowledge.status")
    expect(sw).to_be_checked()

    def enabled() -> bool:
        return {t["full_name"]: t["enabled"] for t in srv.api("GET", "/api/v1/tools/builtin")}["knowledge.status"]

    sw.click()
    expect(sw).not_to_be_checked()
    expect(sw).to_be_enabled()
    assert enabled() is False
    quiet(page)
    axe_check(page, "tools-builtin")
    # The page reloaded shows the stored state; switching it back on works too.
    open_tools(page, srv.base, "builtin")
    sw = page.get_by_test_id("builtin-knowledge.status").get_by_role("switch", name="Enabled: knowledge.status")
    expect(sw).not_to_be_checked()
    sw.click()
    expect(sw).to_be_checked()
    expect(sw).to_be_enabled()
    assert enabled() is True


# ---------------------------------------------------------------------------------------------
# Custom HTTP tools


def test_custom_http_tool_editor_and_test(ui_page, ui_module_server, echo_server, axe_check):
    srv, page = ui_module_server, ui_page
    open_tools(page, srv.base, "custom")
    expect(panel(page)).to_contain_text("No custom tools yet")
    panel(page).get_by_role("button", name="New custom tool").click()
    dlg = page.get_by_role("dialog", name="New custom HTTP tool")
    dlg.get_by_role("textbox", name="Name", exact=True).fill("echo_http")
    dlg.get_by_role("combobox", name="Method").select_option("POST")
    dlg.get_by_role("textbox", name="URL", exact=True).fill(f"{echo_server}/items/{{{{city}}}}")
    dlg.get_by_role("textbox", name="Description", exact=True).fill("Echo a request back")
    # Parameters through the editor: a required text, an enum, an integer and a list.
    for n, (name, kind) in enumerate([("city", None), ("unit", "enum"), ("days", "integer"), ("tags", "array")], 1):
        dlg.get_by_role("button", name="Add parameter").click()
        dlg.get_by_label(f"Parameter {n} name").fill(name)
        if kind:
            dlg.get_by_label(f"Parameter {n} type").select_option(kind)
    dlg.get_by_label("Parameter 1 required").check()
    dlg.get_by_label("Parameter 1 description").fill("Which city")
    dlg.get_by_label("Parameter 2 allowed values, comma-separated").fill("c, f")
    # The raw view shows the JSON Schema the editor built.
    dlg.get_by_role("button", name="JSON Schema").click()
    expected = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Which city"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["city"],
    }
    assert json.loads(dlg.get_by_label("Parameters as JSON Schema").input_value()) == expected
    dlg.get_by_role("button", name="Editor").click()
    expect(dlg.get_by_label("Parameter 4 name")).to_have_value("tags")
    dlg.get_by_role("button", name="Add header").click()
    dlg.get_by_label("Header 1 name").fill("X-Key")
    dlg.get_by_label("Header 1 value").fill(HEADER_SECRET)
    dlg.get_by_role("textbox", name="Body template").fill('{"unit": "{{unit}}", "days": {{days}}, "tags": {{tags}}}')
    quiet(page)
    axe_check(page, "tools-custom-dialog")
    dlg.get_by_role("button", name="Create", exact=True).click()
    expect(dlg).to_have_count(0)

    row = page.get_by_test_id("custom-echo_http")
    expect(row).to_contain_text("custom.echo_http")
    expect(row).to_contain_text("Listed to agents as custom__echo_http")
    expect(row).to_contain_text("X-Key")
    assert HEADER_SECRET not in page.content()
    [tool] = [t for t in srv.api("GET", "/api/v1/tools") if str(t.get("source", "")).startswith("custom:")]
    assert tool["parameters"] == expected and tool["http_method"] == "POST" and tool["http_headers"] == ["X-Key"], tool
    # The listing names it as MCP clients call it; its own name is `tool` (issue 21 item 12).
    assert (tool["name"], tool["tool"], tool["package"]) == ("custom__echo_http", "echo_http", "custom"), tool

    # "Test": a form generated from the schema, and the endpoint's answer.
    row.get_by_role("button", name="Test echo_http").click()
    dlg = page.get_by_role("dialog", name="Test echo_http")
    dlg.get_by_label("city").fill("Paris")
    dlg.get_by_label("unit").select_option("f")
    dlg.get_by_label("days").fill("3")
    dlg.get_by_label("tags").fill("red\nblue")
    quiet(page)
    axe_check(page, "tools-custom-test")
    dlg.get_by_role("button", name="Send request").click()
    expect(dlg.get_by_test_id("test-status")).to_have_text("HTTP 200")
    body = json.loads(dlg.get_by_test_id("test-body").inner_text())
    assert body == {
        "method": "POST",
        "path": "/items/Paris",
        "body": '{"unit": "f", "days": 3, "tags": ["red","blue"]}',
        "key_ok": True,
    }, body
    # A required field left empty is caught before any request.
    dlg.get_by_label("city").fill("")
    dlg.get_by_role("button", name="Send request").click()
    expect(dlg.get_by_role("alert")).to_contain_text("“city” is required")
    dlg.get_by_role("button", name="Close", exact=True).last.click()
    expect(dlg).to_have_count(0)

    # Editing keeps the header values it cannot show.
    row.get_by_role("button", name="Edit echo_http").click()
    dlg = page.get_by_role("dialog", name="Edit echo_http")
    expect(dlg).to_contain_text("Current headers: X-Key")
    # The editor shows the stored schema (the API lists properties by name).
    rows = dlg.locator(".pe-row").evaluate_all(
        "(rows) => rows.map((r) => [r.querySelector('.pe-name').value, r.querySelector('.pe-type').value,"
        " r.querySelector('.pe-required').checked])"
    )
    assert sorted(rows) == [["city", "string", True], ["days", "integer", False], ["tags", "array", False],
                            ["unit", "enum", False]], rows
    dlg.get_by_role("textbox", name="Description", exact=True).fill("Echo a request back, edited")
    dlg.get_by_role("button", name="Save", exact=True).click()
    expect(dlg).to_have_count(0)
    expect(row).to_contain_text("edited")
    got = srv.api("POST", f"/api/v1/tools/{tool['id']}/test",
                  {"arguments": {"city": "Oslo", "unit": "c", "days": 1, "tags": []}})
    assert json.loads(got["body"])["key_ok"] is True

    # Its switch.
    sw = row.get_by_role("switch", name="Enabled: custom.echo_http")
    sw.click()
    expect(sw).not_to_be_checked()
    expect(sw).to_be_enabled()
    assert srv.api("GET", f"/api/v1/tools/{tool['id']}")["enabled"] is False
    sw.click()
    expect(sw).to_be_checked()
    expect(sw).to_be_enabled()
    quiet(page)
    axe_check(page, "tools-custom")


# ---------------------------------------------------------------------------------------------
# The catalog and the bundle


def test_hub_browse_search_and_bundle_over_mcp(ui_page, ui_module_server, axe_check, shot):
    srv, page = ui_module_server, ui_page
    everything = ensure_everything(srv)
    open_hub(page, srv.base)
    expect(page.get_by_role("heading", level=1, name="Catalog & bundles")).to_be_visible()
    expect(page.get_by_test_id("bundle")).to_contain_text("0 of at most 32 tools")

    # Category → package → tool.
    page.get_by_test_id("category-testing").click()
    expect(page.get_by_role("heading", level=2, name="Packages in testing")).to_be_focused()
    pkg = page.get_by_test_id("package-everything")
    expect(pkg).to_contain_text("MCP server")
    pkg.get_by_role("button", name="Browse tools").click()
    expect(page.get_by_role("heading", level=2, name="Tools of everything")).to_be_visible()
    expect(page.get_by_role("navigation", name="Catalog location")).to_contain_text("testing")
    echo = page.get_by_test_id("catalog-tool-everything.echo")
    expect(echo).to_contain_text("Echoes back the input string")
    echo.get_by_text("Input schema of everything.echo").click()
    expect(echo.locator(".json-tree")).to_contain_text("message")
    # get-sum was switched off on the Tools page: the catalog does not offer it.
    expect(page.get_by_test_id("catalog-tool-everything.get-env")).to_be_visible()
    expect(page.get_by_test_id("catalog-tool-everything.get-sum")).to_have_count(0)
    usable = [t["name"] for t in srv.api("GET", "/api/catalog/everything/tools")["tools"]]
    expect(page.locator("[data-testid^=catalog-tool-]")).to_have_count(len(usable))

    # Two tools from the package.
    page.get_by_label("Add everything.get-env to the bundle").check()
    page.get_by_label("Add everything.get-structured-content to the bundle").check()

    # Search across categories: "echo" finds server-everything's tool and the custom one.
    page.get_by_role("searchbox", name="Search all categories").fill("echo")
    page.get_by_role("searchbox", name="Search all categories").press("Enter")
    expect(page.get_by_role("heading", level=2, name="Results for “echo”")).to_be_visible()
    hits = page.locator("[data-testid^=catalog-tool-]")
    expect(hits.first).to_have_attribute("data-testid", "catalog-tool-everything.echo")
    api_hits = srv.api("GET", "/api/catalog/search?q=echo&limit=100")
    expect(hits).to_have_count(api_hits["total"])
    categories = {t["category"] for t in api_hits["tools"]}
    assert len(categories) >= 2, api_hits  # testing and custom (the custom tool of the test above)
    for t in api_hits["tools"]:
        expect(page.get_by_test_id(f"catalog-tool-{t['name']}")).to_contain_text(f"Category {t['category']}")
    page.get_by_label("Add everything.echo to the bundle").check()

    bundled = ["everything.get-env", "everything.get-structured-content", "everything.echo"]
    bundle = page.get_by_test_id("bundle")
    expect(bundle.get_by_test_id("bundle-count")).to_have_text("3 of at most 32 tools")
    url = page.get_by_test_id("bundle-url").input_value()
    assert url == f"{srv.base}/api/mcp?tools=" + ",".join(bundled), url
    # Configs for the clients, all with this URL and no Authorization on an open server.
    expect(bundle.get_by_test_id("config-claude-cmd")).to_have_text(f"claude mcp add --transport http quarry-tools '{url}'")
    assert json.loads(bundle.get_by_test_id("config-claude-json").inner_text()) == {
        "mcpServers": {"quarry-tools": {"type": "http", "url": url}}
    }
    bundle.get_by_role("tab", name="Cursor").click()
    assert json.loads(bundle.get_by_test_id("config-cursor-json").inner_text()) == {
        "mcpServers": {"quarry-tools": {"url": url}}
    }
    bundle.get_by_role("tab", name="Claude Desktop").click()
    assert json.loads(bundle.get_by_test_id("config-desktop-json").inner_text()) == {
        "mcpServers": {"quarry-tools": {"command": "npx", "args": ["-y", "mcp-remote", url]}}
    }
    # The page asks the endpoint itself.
    bundle.get_by_role("button", name="Check the endpoint").click()
    expect(bundle.get_by_test_id("bundle-check")).to_contain_text("The endpoint lists 3 tools")

    # A reload keeps the bundle (localStorage).
    page.reload()
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    expect(page.get_by_test_id("bundle-url")).to_have_value(url)
    expect(page.get_by_role("heading", level=2, name="Results for “echo”")).to_be_visible()

    # The URL read from the page, through the official MCP SDK.
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def use():
        async with httpx2.AsyncClient(timeout=60) as hc:
            async with Client(streamable_http_client(url, http_client=hc), mode="legacy", read_timeout_seconds=60) as c:
                listed = sorted(t.name for t in (await c.list_tools()).tools)
                r = await c.call_tool("everything__echo", {"message": "from the bundle"})
                return listed, r

    listed, result = in_thread(use)
    assert listed == sorted(n.replace(".", "__", 1) for n in bundled), listed
    assert not result.is_error and "from the bundle" in result.content[0].text, result

    quiet(page)
    axe_check(page, "hub-bundle")
    shot(page, "hub-bundle")

    # Whole packages: more than the cap warns, and the endpoint refuses, naming the cap.
    settled(srv, srv.api(
        "POST",
        "/api/v1/mcp/servers",
        {"name": "everything2", "transport_type": "stdio", "config": f"{node()} {everything_js()} stdio",
         "category": "testing"},
        expect=201,
    ))
    page.goto(f"{srv.base}/#/hub?cat=testing")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    page.get_by_label("Add the whole package everything to the bundle", exact=True).check()
    page.get_by_label("Add the whole package everything2 to the bundle", exact=True).check()
    page.goto(f"{srv.base}/#/hub?cat=knowledge")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    page.get_by_label("Add the whole package Quarry knowledge to the bundle", exact=True).check()
    counts = {p["id"]: p["toolCount"] for c in ("testing", "knowledge") for p in srv.api("GET", f"/api/catalog/{c}")["packages"]}
    total = counts["everything"] + counts["everything2"] + counts["knowledge"]
    assert total > 32, counts
    bundle = page.get_by_test_id("bundle")
    expect(bundle.get_by_test_id("bundle-count")).to_have_text(f"{total} of at most 32 tools")
    expect(bundle.get_by_test_id("bundle-warning")).to_contain_text("more than the server's cap of 32")
    url = page.get_by_test_id("bundle-url").input_value()
    assert url == f"{srv.base}/api/mcp?servers=everything,everything2,knowledge", url
    bundle.get_by_role("button", name="Check the endpoint").click()
    expect(bundle.get_by_test_id("bundle-check")).to_contain_text("cap of 32")
    # Tools of a package taken whole are included (and cannot be unticked one by one).
    page.goto(f"{srv.base}/#/hub?cat=testing&pkg=everything")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    expect(page.get_by_label("Add everything.echo to the bundle")).to_be_checked()
    expect(page.get_by_label("Add everything.echo to the bundle")).to_be_disabled()
    # Search mode lists two tools: under the cap again.
    page.get_by_test_id("bundle").get_by_label("Search mode").check()
    expect(page.get_by_test_id("bundle-warning")).to_be_hidden()
    expect(page.get_by_test_id("bundle-url")).to_have_value(url + "&mode=search")
    page.get_by_test_id("bundle").get_by_role("button", name="Check the endpoint").click()
    expect(page.get_by_test_id("bundle-check")).to_contain_text("The endpoint lists 2 tools")
    expect(page.get_by_test_id("bundle-check")).to_contain_text("search_tools")
    page.get_by_test_id("bundle").get_by_role("button", name="Clear").click()
    expect(page.get_by_test_id("bundle-count")).to_have_text("0 of at most 32 tools")
    expect(page.get_by_label("Add everything.echo to the bundle")).not_to_be_checked()


def test_bundle_saved_as_a_named_endpoint(ui_page, ui_module_server, axe_check):
    """The bundle builder saves the bundle on the server as /mcp/e/<name> (issue 27); saving
    again under the same name changes what the same URL offers; the catalog shows the tool's
    endpoints."""
    srv, page = ui_module_server, ui_page
    ensure_everything(srv)
    page.goto(f"{srv.base}/#/hub?cat=testing&pkg=everything")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    bundle = page.get_by_test_id("bundle")
    clear = bundle.get_by_role("button", name="Clear")
    if clear.is_enabled():  # what an earlier test left in this browser's bundle
        clear.click()
    page.get_by_label("Add everything.echo to the bundle").check()
    page.get_by_label("Add everything.get-env to the bundle").check()
    bundle.get_by_test_id("endpoint-name").fill("Bad Name")
    bundle.get_by_test_id("endpoint-save").click()
    expect(bundle.get_by_test_id("endpoint-status")).to_contain_text("lowercase")
    bundle.get_by_test_id("endpoint-name").fill("bundle-ep")
    bundle.get_by_test_id("endpoint-save").click()
    expect(bundle.get_by_test_id("endpoint-status")).to_contain_text("Saved as endpoint bundle-ep")
    url = f"{srv.base}/mcp/e/bundle-ep"
    expect(bundle.get_by_test_id("endpoint-url")).to_have_text(url)
    saved = srv.api("GET", "/api/v1/endpoints/bundle-ep")
    assert sorted(saved["tools"]) == ["everything.echo", "everything.get-env"], saved

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def listed():
        async with httpx2.AsyncClient(timeout=60) as hc:
            async with Client(streamable_http_client(url, http_client=hc), read_timeout_seconds=60) as c:
                return sorted(t.name for t in (await c.list_tools()).tools)

    assert in_thread(listed) == ["everything__echo", "everything__get-env"]
    # The catalog says where a tool is exposed.
    page.reload()
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    expect(page.get_by_test_id("catalog-tool-everything.echo").get_by_test_id("tool-endpoints")).to_have_text(
        "In named endpoints: bundle-ep")
    expect(page.get_by_test_id("catalog-tool-everything.get-structured-content").get_by_test_id("tool-endpoints")).to_have_count(0)
    # Saved again under the same name: the same URL now offers one tool.
    page.get_by_label("Add everything.get-env to the bundle").uncheck()
    bundle.get_by_test_id("endpoint-name").fill("bundle-ep")
    bundle.get_by_test_id("endpoint-save").click()
    expect(bundle.get_by_test_id("endpoint-status")).to_contain_text("Saved as endpoint bundle-ep")
    assert in_thread(listed) == ["everything__echo"]
    quiet(page)
    axe_check(page, "hub-endpoint")
    bundle.get_by_role("button", name="Clear").click()
    srv.api("DELETE", "/api/v1/endpoints/bundle-ep")


def test_hub_configs_carry_a_token_placeholder_under_auth(ui_page, ui_server_factory):
    srv = ui_server_factory("--auth", "token")
    srv.add_user("ann")
    token = srv.token("ann")
    page = ui_page
    login(page, srv.base, token)
    page.goto(f"{srv.base}/#/hub?cat=knowledge&pkg=knowledge")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    page.get_by_label("Add knowledge.search to the bundle").check()
    bundle = page.get_by_test_id("bundle")
    url = page.get_by_test_id("bundle-url").input_value()
    assert url == f"{srv.base}/api/mcp?tools=knowledge.search", url
    expect(bundle).to_contain_text("replace <token> with yours")
    expect(bundle.get_by_test_id("config-claude-cmd")).to_have_text(
        f"claude mcp add --transport http quarry-tools '{url}' --header 'Authorization: Bearer <token>'"
    )
    assert json.loads(bundle.get_by_test_id("config-claude-json").inner_text()) == {
        "mcpServers": {"quarry-tools": {"type": "http", "url": url, "headers": {"Authorization": "Bearer <token>"}}}
    }
    bundle.get_by_role("tab", name="Cursor").click()
    assert json.loads(bundle.get_by_test_id("config-cursor-json").inner_text())["mcpServers"]["quarry-tools"]["headers"] == {
        "Authorization": "Bearer <token>"
    }
    bundle.get_by_role("tab", name="Claude Desktop").click()
    desktop = json.loads(bundle.get_by_test_id("config-desktop-json").inner_text())["mcpServers"]["quarry-tools"]
    assert desktop["args"] == ["-y", "mcp-remote", url, "--header", "Authorization:${QUARRY_AUTH_HEADER}"]
    assert desktop["env"] == {"QUARRY_AUTH_HEADER": "Bearer <token>"}
    # The page never writes the real token anywhere.
    assert token not in page.content()
    assert token not in page.evaluate("() => JSON.stringify(localStorage)")
    # The check uses the page's own session: the endpoint answers for this user.
    bundle.get_by_role("button", name="Check the endpoint").click()
    expect(bundle.get_by_test_id("bundle-check")).to_contain_text("The endpoint lists 1 tool")


# ---------------------------------------------------------------------------------------------
# Chinese


def test_tools_and_hub_in_chinese(ui_page_factory, ui_module_server, axe_check):
    srv = ui_module_server
    ensure_everything(srv)
    page = ui_page_factory(locale="zh-CN")
    open_tools(page, srv.base)
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.get_by_role("heading", level=1, name="工具")).to_be_visible()
    for name in ("MCP 服务器", "内置工具", "自定义 HTTP 工具"):
        expect(page.get_by_role("tab", name=name, exact=True)).to_be_visible()
    card = server_card(page, "everything")
    expect(card.get_by_test_id("server-status")).to_have_text("已连接")
    expect(card.get_by_role("switch", name="已启用：everything")).to_be_checked()
    panel(page).get_by_role("button", name="注册服务器").click()
    dlg = page.get_by_role("dialog", name="注册 MCP 服务器")
    expect(dlg.get_by_role("radio", name="stdio（本地命令）")).to_be_checked()
    dlg.get_by_role("button", name="取消").click()
    quiet(page)
    axe_check(page, "tools-zh", schemes=("light",))
    page.goto(f"{srv.base}/#/hub")
    expect(page.locator(".page-hub")).to_have_attribute("data-ready", "true")
    expect(page.get_by_role("heading", level=2, name="分类")).to_be_visible()
    expect(page.get_by_test_id("bundle")).to_contain_text("0 个工具，上限 32 个")
    page.get_by_test_id("category-testing").click()
    expect(page.get_by_role("heading", level=2, name="testing 分类下的工具包")).to_be_visible()
    axe_check(page, "hub-zh", schemes=("light",))
