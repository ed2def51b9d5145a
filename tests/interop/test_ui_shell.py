"""The web UI's shell (crates/quarry-ui/assets: index.html, js/app.js, i18n/) through the real
`quarry serve` and a real Chromium (Playwright; fixtures in ui_support.py):

- i18n: every namespace file has the same keys in "en" and "zh-CN", no empty strings, the
  same `{placeholders}`; every `t("literal")` key used in js/*.js exists;
- the shell in local (open) mode: no login, the nav, language switch (persisted), a zh-CN
  browser starting in Chinese, the theme toggle (persisted), the skip link first in Tab order;
- HTTP: Content-Security-Policy without inline scripts, nosniff, MIME types, ETag/304, gzip,
  404 for unknown assets and for every path-traversal attempt (embedded and QUARRY_UI_DIR);
- cookie sessions with `--auth token`: the login form, a wrong token, the cookie's flags, sign
  out (the old cookie no longer works), an expired and a revoked token ending the session;
- CSRF: a state-changing request with the session cookie but without `X-Quarry-CSRF` is 403
  and changes nothing.
"""

from __future__ import annotations

import gzip
import http.client
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from conftest import make_home, start_server
from playwright.sync_api import expect
from ui_support import UI_ENV, UiServer, login, page_record, start_ui_server

ASSETS = Path(__file__).resolve().parents[2] / "crates" / "quarry-ui" / "assets"
I18N = ASSETS / "i18n"
LANGS = ("en", "zh-CN")
# t()'s placeholders: `{name}` as app.js's /\{(\w+)\}/ reads them (ASCII \w); `{{name}}` is
# literal text (the custom tools' template syntax shown to users), not a placeholder.
PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z0-9_]+)\}(?!\})")

SESSION_COOKIE = "quarry_session"
CSRF_COOKIE = "quarry_csrf"
CSRF_HEADER = "X-Quarry-CSRF"


# ---------------------------------------------------------------------------------------------
# i18n (no browser)


def i18n_files() -> list[Path]:
    files = sorted(I18N.glob("*.json"))
    assert files, f"no i18n files in {I18N}"
    return files


@pytest.mark.parametrize("path", i18n_files(), ids=lambda p: p.name)
def test_i18n_languages_have_the_same_keys_and_placeholders(path: Path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert set(doc) == set(LANGS), f"{path.name}: top-level keys {sorted(doc)}, expected {list(LANGS)}"
    en, zh = doc["en"], doc["zh-CN"]
    only_en, only_zh = sorted(set(en) - set(zh)), sorted(set(zh) - set(en))
    assert not only_en and not only_zh, f"{path.name}: only in en: {only_en}; only in zh-CN: {only_zh}"
    problems = []
    for key in en:
        for lang in LANGS:
            value = doc[lang][key]
            if not isinstance(value, str) or not value.strip():
                problems.append(f"{lang}.{key} is empty or not a string: {value!r}")
        if isinstance(en[key], str) and isinstance(zh[key], str):
            pe, pz = sorted(PLACEHOLDER.findall(en[key])), sorted(PLACEHOLDER.findall(zh[key]))
            if pe != pz:
                problems.append(f"{key}: placeholders differ: en {pe} vs zh-CN {pz}")
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_every_literal_t_key_exists():
    known: set[str] = set()
    for path in i18n_files():
        known |= set(json.loads(path.read_text(encoding="utf-8"))["en"])
    # t("key") / t('key') / t(`key`) with a literal key (keys built at run time can't be checked).
    call = re.compile(r"""(?<![\w.$])t\(\s*(?:"([^"\\]+)"|'([^'\\]+)'|`([^`$\\]+)`)""")
    missing = []
    scripts = sorted((ASSETS / "js").glob("*.js"))
    assert scripts
    for js in scripts:
        for n, line in enumerate(js.read_text(encoding="utf-8").splitlines(), 1):
            for m in call.finditer(line):
                key = next(g for g in m.groups() if g)
                if key not in known:
                    missing.append(f"{js.name}:{n}: {key}")
    assert not missing, "t() keys missing from every i18n/*.json:\n  " + "\n  ".join(missing)


# ---------------------------------------------------------------------------------------------
# The shell in a browser, local (open) mode


def nav_link(page, name: str):
    return page.get_by_role("navigation").get_by_role("link", name=name, exact=True)


def test_shell_loads_without_login_in_local_mode(ui_page, ui_module_server, axe_check, shot):
    page = ui_page
    page.goto(f"{ui_module_server.base}/")
    expect(nav_link(page, "Knowledge bases")).to_be_visible()
    for name in ("Tools", "Catalog & bundles", "Chat", "Access"):
        expect(nav_link(page, name)).to_be_visible()
    expect(page.locator("#login-token")).to_have_count(0)
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator(".who")).to_have_text("Local owner")
    # No sign-out button without a user.
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    expect(page.locator("#main")).not_to_have_attribute("aria-busy", "true")
    expect(nav_link(page, "Knowledge bases")).to_have_attribute("aria-current", "page")
    axe_check(page, "shell-open")
    shot(page, "shell-open")


def test_language_switch_translates_and_persists(ui_page, ui_module_server):
    page = ui_page
    page.goto(f"{ui_module_server.base}/")
    expect(nav_link(page, "Knowledge bases")).to_be_visible()
    page.get_by_label("Language").select_option("zh-CN")
    expect(nav_link(page, "知识库")).to_be_visible()
    expect(nav_link(page, "访问控制")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.locator(".skip")).to_have_text("跳到正文")
    expect(page.locator(".who")).to_have_text("本机所有者")

    page.reload()
    expect(nav_link(page, "知识库")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.get_by_label("语言")).to_have_value("zh-CN")

    page.get_by_label("语言").select_option("en")
    expect(nav_link(page, "Knowledge bases")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    page.reload()
    expect(nav_link(page, "Knowledge bases")).to_be_visible()


def test_chinese_browser_starts_in_chinese(ui_page_factory, ui_module_server, axe_check):
    page = ui_page_factory(locale="zh-CN")
    assert page.evaluate("() => navigator.languages")[0] == "zh-CN"
    page.goto(f"{ui_module_server.base}/")
    expect(nav_link(page, "知识库")).to_be_visible()
    expect(nav_link(page, "工具")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.get_by_label("语言")).to_have_value("zh-CN")
    expect(page.locator('.page[data-ready="true"]')).to_be_visible()
    axe_check(page, "shell-open-zh")


def test_theme_toggle_switches_and_persists(ui_page, ui_module_server):
    page = ui_page
    page.goto(f"{ui_module_server.base}/")
    html = page.locator("html")
    to_dark = page.get_by_role("button", name="Switch to dark theme")
    expect(to_dark).to_be_visible()
    expect(html).not_to_have_attribute("data-theme", re.compile(".*"))  # follows the system
    to_dark.click()
    expect(html).to_have_attribute("data-theme", "dark")
    to_light = page.get_by_role("button", name="Switch to light theme")
    expect(to_light).to_be_visible()
    bg_dark = page.evaluate("() => getComputedStyle(document.body).backgroundColor")

    page.reload()
    expect(html).to_have_attribute("data-theme", "dark")
    expect(page.get_by_role("button", name="Switch to light theme")).to_be_visible()

    page.get_by_role("button", name="Switch to light theme").click()
    expect(html).to_have_attribute("data-theme", "light")
    bg_light = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert bg_dark != bg_light, f"the theme changed data-theme but not the page background ({bg_light})"
    page.reload()
    expect(html).to_have_attribute("data-theme", "light")


def test_system_dark_scheme_is_followed(ui_page_factory, ui_module_server):
    page = ui_page_factory(color_scheme="dark")
    page.goto(f"{ui_module_server.base}/")
    # No theme picked: the system's dark scheme, so the toggle offers the light theme.
    expect(page.get_by_role("button", name="Switch to light theme")).to_be_visible()
    expect(page.locator("html")).not_to_have_attribute("data-theme", re.compile(".*"))


def test_tab_reaches_the_skip_link_first(ui_page, ui_module_server):
    page = ui_page
    page.goto(f"{ui_module_server.base}/#/kb")
    expect(nav_link(page, "Knowledge bases")).to_be_visible()
    page.keyboard.press("Tab")
    focused = page.evaluate("() => [document.activeElement.className, document.activeElement.textContent]")
    assert focused == ["skip", "Skip to content"], f"first Tab stop: {focused}"
    expect(page.locator(".skip")).to_be_in_viewport()


def test_skip_link_moves_focus_to_main_without_leaving_the_page(ui_page, ui_module_server):
    page = ui_page
    page.goto(f"{ui_module_server.base}/#/kb")
    expect(nav_link(page, "Knowledge bases")).to_be_visible()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    # The router owns the hash: a skip link that sets `#main` changes the route.
    assert page.evaluate("() => location.hash") == "#/kb", "the skip link changed the route"


def test_navigation_focuses_main_without_framing_the_page(ui_page, ui_module_server):
    """Each navigation moves focus to `#main` (screen readers start there) — by keyboard too,
    where `:focus-visible` applies — without drawing a frame around the whole page."""
    page = ui_page
    page.goto(f"{ui_module_server.base}/#/kb")
    expect(nav_link(page, "Knowledge bases")).to_be_visible()
    link = nav_link(page, "Tools")
    link.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    style = page.evaluate("() => { const s = getComputedStyle(document.getElementById('main')); return [s.outlineStyle, s.outlineWidth]; }")
    assert style[0] == "none" or style[1] == "0px", f"#main is framed after a navigation: {style}"
    # Other controls keep their keyboard focus ring. The page renders what it fetched after the
    # navigation: a Tab taken before that lands on an element the render replaces.
    page.wait_for_load_state("networkidle")
    page.keyboard.press("Tab")
    page.wait_for_function("() => document.activeElement && document.activeElement !== document.body")
    ring = page.evaluate("() => [document.activeElement.outerHTML.slice(0, 80), getComputedStyle(document.activeElement).outlineStyle]")
    assert ring[1] != "none", ring


# ---------------------------------------------------------------------------------------------
# HTTP: headers, caching, compression, 404s, path traversal (no browser)


def csp_directives(value: str) -> dict[str, list[str]]:
    out = {}
    for part in value.split(";"):
        tokens = part.split()
        if tokens:
            out[tokens[0].lower()] = tokens[1:]
    return out


def raw_get(base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """GET with the path sent byte for byte (no client-side normalisation of `..`)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/", "/assets/js/app.js", "/assets/app.css"])
def test_security_headers(ui_module_server, path):
    status, headers, _ = raw_get(ui_module_server.base, path)
    assert status == 200, (path, status)
    csp = headers.get("content-security-policy")
    assert csp, f"{path}: no Content-Security-Policy ({headers})"
    d = csp_directives(csp)
    script = d.get("script-src", d.get("default-src"))
    assert script is not None and "'self'" in script, f"{path}: script-src is not 'self': {csp}"
    for bad in ("'unsafe-inline'", "'unsafe-eval'", "*", "data:", "http:", "https:"):
        assert bad not in script, f"{path}: script-src allows {bad}: {csp}"
    assert "'unsafe-inline'" not in csp, f"{path}: 'unsafe-inline' in the CSP: {csp}"
    style = d.get("style-src", d.get("default-src"))
    assert style is not None and "'unsafe-inline'" not in style, f"{path}: style-src: {csp}"
    assert headers.get("x-content-type-options", "").lower() == "nosniff", (path, headers)


@pytest.mark.parametrize(
    "path, mime",
    [
        ("/", "text/html"),
        ("/assets/js/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
        ("/assets/i18n/core.json", "application/json"),
        ("/assets/favicon.svg", "image/svg+xml"),
    ],
)
def test_content_types(ui_module_server, path, mime):
    status, headers, _ = raw_get(ui_module_server.base, path)
    assert status == 200, (path, status)
    ctype = headers.get("content-type", "")
    # Module scripts under nosniff need a JavaScript MIME type.
    ok = {mime, "application/javascript"} if mime == "text/javascript" else {mime}
    assert ctype.split(";")[0].strip().lower() in ok, (path, ctype)


@pytest.mark.parametrize("path", ["/assets/js/app.js", "/assets/app.css", "/assets/i18n/core.json"])
def test_assets_have_etags_and_answer_304(ui_module_server, path):
    status, headers, body = raw_get(ui_module_server.base, path)
    assert status == 200 and body
    etag = headers.get("etag")
    assert etag, f"{path}: no ETag ({headers})"
    status, headers2, body2 = raw_get(ui_module_server.base, path, {"If-None-Match": etag})
    assert status == 304, f"{path}: If-None-Match {etag} gave {status}"
    assert body2 == b""
    assert headers2.get("etag") == etag
    status, _, body3 = raw_get(ui_module_server.base, path, {"If-None-Match": '"something-else"'})
    assert status == 200 and body3 == body


@pytest.mark.parametrize("path", ["/", "/assets/js/app.js", "/assets/app.css", "/assets/i18n/core.json"])
def test_gzip_matches_identity(ui_module_server, path):
    status, plain_headers, plain = raw_get(ui_module_server.base, path)
    assert status == 200 and plain
    assert "content-encoding" not in plain_headers or plain_headers["content-encoding"] == "identity"
    status, headers, zipped = raw_get(ui_module_server.base, path, {"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers.get("content-encoding") == "gzip", f"{path}: Accept-Encoding gzip gave {headers}"
    assert gzip.decompress(zipped) == plain
    assert len(zipped) < len(plain), f"{path}: gzip body not smaller ({len(zipped)} >= {len(plain)})"
    vary = headers.get("vary", "").lower()
    assert "accept-encoding" in vary, f"{path}: compressed answer without Vary: Accept-Encoding ({headers})"


def test_unknown_assets_are_404(ui_module_server):
    for path in ("/assets/js/nope.js", "/assets/nope.css", "/assets/i18n/nope.json", "/assets/", "/assets/js"):
        status, _, body = raw_get(ui_module_server.base, path)
        assert status == 404, f"{path}: {status} {body[:200]!r}"


# Paths that try to leave the assets. The first ones must be 404 (the brief's contract); for the
# exotic encodings a 400 (malformed path) is as good. None may answer 200 or leak a file.
MUST_404 = [
    "/assets/../Cargo.toml",
    "/assets/%2e%2e/Cargo.toml",
    "/assets/%2E%2E/Cargo.toml",
    "/assets/js/../../Cargo.toml",
    "/assets/js/%2e%2e/%2e%2e/Cargo.toml",
    "/assets/../../../Cargo.toml",
    "/assets/%2e%2e/%2e%2e/%2e%2e/Cargo.toml",
    "/assets//etc/passwd",
    "/assets/js/../../../../../../../../etc/passwd",
    "/assets/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
]
MAY_400 = [
    "/assets/..%2fCargo.toml",
    "/assets/%2e%2e%2fCargo.toml",
    "/assets/%2e%2e%2f%2e%2e%2f%2e%2e%2fCargo.toml",
    "/assets/%2fetc%2fpasswd",
    "/assets/..%5cCargo.toml",
    "/assets/..\\Cargo.toml",
    "/assets/....//....//etc/passwd",
    "/assets/%252e%252e/Cargo.toml",
    "/assets/%00/../Cargo.toml",
    "/assets/app.css%00.js",
    "/assets/%c0%ae%c0%ae/Cargo.toml",
]
LEAK_MARKERS = (b"[package]", b"[workspace]", b"root:")


def assert_no_traversal(base: str) -> None:
    problems = []
    for path in MUST_404 + MAY_400:
        status, _, body = raw_get(base, path)
        allowed = (404,) if path in MUST_404 else (400, 404)
        if status not in allowed or any(m in body for m in LEAK_MARKERS):
            problems.append(f"{path}: HTTP {status} (expected {' or '.join(map(str, allowed))}), {body[:120]!r}")
    assert not problems, "path traversal not refused:\n  " + "\n  ".join(problems)


def test_path_traversal_embedded_assets(ui_module_server):
    assert_no_traversal(ui_module_server.base)


def test_path_traversal_with_ui_dir(quarry_bin, corpus, tmp_path):
    """QUARRY_UI_DIR serves from disk: nothing outside that folder."""
    ui_dir = tmp_path / "crates" / "quarry-ui" / "assets"  # ../Cargo.toml and ../../../Cargo.toml exist
    shutil.copytree(ASSETS, ui_dir)
    (tmp_path / "crates" / "quarry-ui" / "Cargo.toml").write_text("[package]\nname = 'leak'\n")
    (tmp_path / "Cargo.toml").write_text("[workspace]\nmembers = []\n")
    home = make_home(quarry_bin, corpus, tmp_path / "home", env={**UI_ENV, "QUARRY_UI_DIR": str(ui_dir)})
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        # Dev mode really reads the folder: an edit shows without a restart.
        (ui_dir / "i18n" / "extra.json").write_text('{"en": {}, "zh-CN": {}}')
        status, _, body = raw_get(srv.base, "/assets/i18n/extra.json")
        assert status == 200 and json.loads(body) == {"en": {}, "zh-CN": {}}, (status, body[:200])
        assert_no_traversal(srv.base)
    finally:
        srv.stop()


# ---------------------------------------------------------------------------------------------
# Cookie sessions with --auth token


@pytest.fixture(scope="module")
def auth_server(quarry_bin, corpus, tmp_path_factory):
    srv = start_ui_server(quarry_bin, corpus, tmp_path_factory.mktemp("ui-auth"), "--auth", "token")
    srv.add_user("alice")
    srv.alice = srv.token("alice", "--label", "ui tests")
    yield srv
    srv.stop()


def cookies_by_name(page) -> dict[str, dict]:
    return {c["name"]: c for c in page.context.cookies()}


def test_login_form_and_wrong_token(ui_page, auth_server: UiServer, axe_check, shot):
    page = ui_page
    page.goto(f"{auth_server.base}/")
    token = page.get_by_label("Access token")
    expect(token).to_be_visible()
    expect(page.get_by_role("heading", name="Sign in to Quarry")).to_be_visible()
    expect(page.locator("#nav a")).to_have_count(0)
    axe_check(page, "login")
    shot(page, "login")

    token.fill("qk_" + "0" * 64)
    page.get_by_role("button", name="Sign in").click()
    error = page.locator("#login-error")
    expect(error).to_contain_text("Sign-in failed")
    expect(page.locator("#nav a")).to_have_count(0)
    assert SESSION_COOKIE not in cookies_by_name(page), page.context.cookies()
    # No session either way: the API refuses the page.
    assert page.evaluate("() => fetch('/api/v1/knowledge-bases').then((r) => r.status)") == 401


def test_login_sets_a_strict_http_only_cookie_and_sign_out_ends_it(ui_page, auth_server: UiServer):
    page = ui_page
    login(page, auth_server.base, auth_server.alice)
    expect(page.locator(".who")).to_have_text("alice")
    expect(nav_link(page, "Knowledge bases")).to_be_visible()

    cookies = cookies_by_name(page)
    assert SESSION_COOKIE in cookies, cookies
    session = cookies[SESSION_COOKIE]
    assert session["httpOnly"] is True, session
    assert session["secure"] is True, session
    assert session["sameSite"] == "Strict", session
    visible = page.evaluate("() => document.cookie")
    assert SESSION_COOKIE not in visible, f"session cookie readable from JS: {visible}"
    assert CSRF_COOKIE in cookies and f"{CSRF_COOKIE}=" in visible, f"the CSRF cookie must be readable: {visible}"

    # The session works for the page's API calls.
    status = page.evaluate("() => fetch('/api/v1/knowledge-bases').then((r) => r.status)")
    assert status == 200

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Access token")).to_be_visible()
    expect(page.locator("#nav a")).to_have_count(0)
    assert page.evaluate("() => fetch('/api/v1/knowledge-bases').then((r) => r.status)") == 401
    assert SESSION_COOKIE not in cookies_by_name(page)


def test_expired_token_ends_the_session(ui_page, auth_server: UiServer):
    page = ui_page
    short = auth_server.expiring_token(auth_server.alice, 3, label="short")
    login(page, auth_server.base, short["token"])
    expect(page.locator(".who")).to_have_text("alice")
    remaining = short["expires_at"] / 1000 - time.time()
    page.wait_for_timeout(max(0, remaining) * 1000 + 500)  # the expiry itself is what is tested
    page.evaluate("() => { location.hash = '#/kb'; }")  # an in-app navigation: the page calls the API
    expect(page.get_by_label("Access token")).to_be_visible()
    expect(page.locator("#login-error")).to_contain_text("Your session ended")
    r = page.evaluate("() => fetch('/ui/session').then((r) => r.status)")
    assert r == 401


def test_revoked_token_ends_the_session(ui_page, auth_server: UiServer):
    page = ui_page
    info = auth_server.token_info("alice", "--label", "to revoke")
    login(page, auth_server.base, info["token"])
    auth_server.cli("token", "revoke", info["id"])
    page.evaluate("() => { location.hash = '#/kb'; }")  # an in-app navigation: the page calls the API
    expect(page.locator("#login-error")).to_contain_text("Your session ended")


# ---------------------------------------------------------------------------------------------
# CSRF


def kb_names(srv: UiServer) -> set[str]:
    return {kb["name"] for kb in srv.api("GET", "/api/v1/knowledge-bases", token=srv.alice)}


def test_csrf_header_is_required_with_the_session_cookie(ui_page, auth_server: UiServer):
    page = ui_page
    login(page, auth_server.base, auth_server.alice)
    csrf = cookies_by_name(page)[CSRF_COOKIE]["value"]
    url = auth_server.url("/api/v1/knowledge-bases")
    before = kb_names(auth_server)

    # The context's request client sends the browser's cookies, and only the headers given.
    r = page.request.post(url, data={"name": "csrf-missing"})
    assert r.status == 403, f"POST with the cookie and no {CSRF_HEADER}: {r.status} {r.text()[:200]}"
    r = page.request.post(url, data={"name": "csrf-wrong"}, headers={CSRF_HEADER: "0" * len(csrf)})
    assert r.status == 403, f"POST with a wrong {CSRF_HEADER}: {r.status} {r.text()[:200]}"
    # The browser's own fetch without the header (a cross-site form could not add it either).
    status = page.evaluate(
        """() => fetch('/api/v1/knowledge-bases', {method: 'POST', headers: {'Content-Type': 'application/json'},
             body: JSON.stringify({name: 'csrf-fetch'})}).then((r) => r.status)"""
    )
    assert status == 403
    # Multipart (a "simple" request a foreign page could send) is refused the same way.
    kb = auth_server.create_kb("csrf-target", token=auth_server.alice)
    r = page.request.post(
        auth_server.url(f"/api/v1/knowledge-bases/{kb['id']}/documents"),
        multipart={"files": {"name": "a.md", "mimeType": "text/markdown", "buffer": b"# a"}},
    )
    assert r.status == 403, f"multipart POST without {CSRF_HEADER}: {r.status} {r.text()[:200]}"
    assert auth_server.documents(kb["id"], token=auth_server.alice) == []
    before.add("csrf-target")
    assert kb_names(auth_server) == before, "a refused request changed something"

    r = page.request.post(url, data={"name": "csrf-ok"}, headers={CSRF_HEADER: csrf})
    assert r.status == 201, f"POST with {CSRF_HEADER}: {r.status} {r.text()[:200]}"
    assert "csrf-ok" in kb_names(auth_server)
    # Reads need no header.
    assert page.request.get(url).status == 200
    # A bearer token needs no CSRF header (no cookie involved).
    auth_server.api("DELETE", f"/api/v1/knowledge-bases/{r.json()['data']['id']}", token=auth_server.alice)


def test_before_login_only_the_session_probe_fails(ui_page, auth_server: UiServer):
    """Signed out, the only failed request is /ui/session's 401: every asset loads."""
    page = ui_page
    page.goto(f"{auth_server.base}/")
    expect(page.get_by_label("Access token")).to_be_visible()
    failed = [(s, u) for s, u in page_record(page).responses if s >= 400]
    assert all(u.endswith("/ui/session") for _, u in failed), failed
