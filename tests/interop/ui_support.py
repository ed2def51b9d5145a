"""Browser fixtures for the web UI tests (``tests/interop/test_ui_*.py``): Playwright driving
Debian's Chromium against the real ``quarry serve`` with its embedded assets.

conftest.py imports the fixtures and the hook listed in ``__all__`` (rather than naming this
module in ``pytest_plugins``, which pytest refuses in a conftest below the rootdir, as in
``pytest tests``); tests import the helpers themselves (``from ui_support import login``). Set up once with
``eval "$(bash scripts/install-test-tools)"``: it installs Playwright into the venv, Chromium and
a CJK font with apt, and axe-core from npm, and exports ``QUARRY_CHROMIUM`` and
``QUARRY_AXE_JS``. Playwright's own browser download (``playwright install``) is never used.
A missing Playwright or Chromium FAILS the UI tests (the test command installs both).

Servers
- ``ui_server`` (function): ``quarry serve --port <free>`` on a fresh home (conftest's
  ``make_home``/``start_server``), with ``QUARRY_UI_DIR`` removed (the embedded assets), OCR
  and web search off. While writing pages, ``QUARRY_UI_TEST_DIR=crates/quarry-ui/assets``
  makes these servers read the assets from disk instead (no rebuild between edits); CI never
  sets it. A :class:`UiServer`: everything of ``QuarryServer`` (``.base``,
  ``.url(path)``, ``.stderr()``…) plus ``.quarry_home`` and the helpers below.
- ``ui_server_factory`` (function): ``start(*args, env={...})``, e.g. ``start("--auth",
  "token")`` or ``start(env={"QUARRY_CHAT_BASE_URL": fake.base_url})``; all stopped at teardown.
- ``ui_module_server`` (module): one open server shared by a module's tests. For other
  module-wide servers call :func:`start_ui_server` from your own module fixture.

Browser
- ``browser`` (session): headless Chromium. Modules that use it run after every other test
  module (see ``pytest_collection_modifyitems``), because Playwright's sync API leaves its
  asyncio loop set as the thread's running loop, which breaks later ``asyncio.run``/anyio.
- ``ui_page`` (function): a page in a new context (1280x860, en-US, light). It records console
  errors, uncaught page errors and every request. At teardown the test fails when there was a
  console error or page error, or a request to a host other than 127.0.0.1. Not counted: the
  browser's own "Failed to load resource: … status of 4xx" lines for non-asset URLs (the
  app handles those answers itself, e.g. /ui/session's 401 before login). 5xx answers and
  failed asset loads count. Use :func:`allow_console` for an error a test provokes on purpose.
  :func:`page_record` gives the records (``.requests``, ``.responses``, ``.console``).
- ``ui_page_factory`` (function): ``new_page(locale="zh-CN", color_scheme="dark",
  viewport=PHONE, base_url=srv.base, **context_options)``, with the same checks.
- ``axe_check(page, label, schemes=("light", "dark"))``: runs axe-core on the page as it is,
  once per colour scheme (``emulate_media``), and fails on serious or critical violations,
  listing rule, impact, help and target nodes. The full results go to the artifacts folder.
- ``shot(page, name)``: full-page screenshots ``<name>-light.png``, ``<name>-dark.png`` and
  ``<name>-phone.png`` (390x844, light) into ``$QUARRY_UI_ARTIFACTS`` (default
  ``${CARGO_TARGET_DIR:-~/.cache/quarry-target}/ui-artifacts``). The UI follows
  prefers-color-scheme unless the user picked a theme (``localStorage["quarry.theme"]``), so
  both shots look the same after the theme toggle was used.

Helpers (plain functions; ``UiServer`` methods call them)
- :func:`http` — one HTTP request with urllib (no proxies, no redirects), an :class:`Http`.
- ``srv.api(method, path, body, token=…)`` — JSON in, the ``data`` of the envelope out; fails
  the test on an unexpected status.
- ``srv.create_kb(name)``, ``srv.upload(kb_id, {"a.md": "# A"})`` (multipart, ≤ 200 files),
  ``srv.wait_documents(kb_id)`` (until every document is ready or failed).
- ``srv.add_user("alice")`` (``quarry user add`` + ``space grant default alice --role owner``),
  ``srv.token("alice")`` (``quarry token create --user alice --json``; the secret),
  ``srv.expiring_token(token, seconds)`` (``POST /api/v1/tokens`` with ``expires_at``, as the
  token's user: the CLI's shortest expiry is a minute).
- :func:`login` — signs a page in through the login form.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import QuarryHome, QuarryServer, make_home, start_server

# What conftest.py imports: the fixtures and the collection hook. Tests import the helpers
# (login, allow_console, page_record, http, PHONE…) from ui_support themselves.
__all__ = [
    "axe_check",
    "browser",
    "pytest_collection_modifyitems",
    "shot",
    "ui_module_server",
    "ui_page",
    "ui_page_factory",
    "ui_server",
    "ui_server_factory",
]

DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
LOOPBACK = "127.0.0.1"
# Chromium's built-in PDF viewer (an extension inside the browser) loads its own files when a
# page shows a PDF: not network requests, so not "requests to other hosts".
PDF_VIEWER = re.compile(r"^(chrome-extension://mhjfbmdgcfjbbpaeojofohoefgiehjai/|chrome://resources/)")
INSTALL_HINT = 'run `eval "$(bash scripts/install-test-tools)"`'
# Environment every UI server gets (on top of conftest's isolated_env): no OCR, no web search.
UI_ENV = {"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"}


def chromium_path() -> str:
    return os.environ.get("QUARRY_CHROMIUM") or "/usr/bin/chromium"


def artifacts_dir() -> Path:
    """``$QUARRY_UI_ARTIFACTS``, else ``${CARGO_TARGET_DIR:-~/.cache/quarry-target}/ui-artifacts``."""
    explicit = os.environ.get("QUARRY_UI_ARTIFACTS")
    if explicit:
        return Path(explicit)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/quarry-target")
    return Path(target) / "ui-artifacts"


# ---------------------------------------------------------------------------------------------
# Plain HTTP (urllib) for setting up data and checking headers.

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


_OPENER.add_handler(_NoRedirect())


@dataclass
class Http:
    """An HTTP answer: ``status``, ``headers`` (case-insensitive ``.get``), raw ``body``."""

    status: int
    headers: Any
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def http(
    method: str,
    url: str,
    *,
    body: Any = None,
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
    token: str | None = None,
    timeout: float = 60,
) -> Http:
    """One request; ``body`` is sent as JSON, ``data`` as is. Never raises for an HTTP status."""
    hdrs = {"Accept": "application/json", **(headers or {})}
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with _OPENER.open(req, timeout=timeout) as r:
            return Http(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Http(e.code, e.headers, e.read())


def multipart(files: list[tuple[str, bytes]], field_name: str = "files") -> tuple[bytes, str]:
    """A multipart/form-data body with one part per (file name, content); (body, content type)."""
    boundary = f"quarry-{uuid.uuid4().hex}"
    out = bytearray()
    for name, content in files:
        quoted = name.replace("\\", "\\\\").replace('"', '\\"')
        out += (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="{field_name}"; filename="{quoted}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        out += content + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


# ---------------------------------------------------------------------------------------------
# Servers.


class UiServer:
    """A running ``quarry serve`` (attributes of :class:`conftest.QuarryServer` pass through)
    with its home and helpers to create data over the API and the CLI."""

    def __init__(self, srv: QuarryServer, quarry_home: QuarryHome):
        self.srv = srv
        self.quarry_home = quarry_home

    def __getattr__(self, name: str):
        return getattr(self.srv, name)

    def __repr__(self) -> str:
        return f"UiServer({self.srv.base})"

    # --- CLI on the server's home -----------------------------------------------------------

    def cli(self, *args: str) -> str:
        """``quarry ARGS…`` on the server's home; its stdout. Fails the test on a non-zero exit."""
        r = self.quarry_home.run(*args)
        assert r.returncode == 0, f"quarry {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r.stdout

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli("--json", *args))

    def add_user(self, name: str, role: str = "owner", space: str = "default") -> None:
        """A user with ``role`` in ``space`` (tokens need a space)."""
        self.cli("user", "add", name)
        self.cli("space", "grant", space, name, "--role", role)

    def token(self, user: str, *args: str) -> str:
        """A new token's secret (``quarry token create --user USER ARGS… --json``)."""
        return self.token_info(user, *args)["token"]

    def token_info(self, user: str, *args: str) -> dict:
        """The whole ``token create --json`` answer (``token``, ``id``, ``prefix``, ``expires_at``…).
        A person signs in to the web UI: the token has the management scope unless ``args``
        narrow it or make it read-only (or say ``--plain``: a token as an agent holds it)."""
        narrowed = {"--read-only", "--kb", "--tools", "--endpoint"} & set(args)
        if "--plain" in args:
            args = tuple(a for a in args if a != "--plain")
        elif not narrowed:
            args = (*args, "--manage")
        return self.cli_json("token", "create", "--user", user, *args)

    def expiring_token(self, token: str, seconds: float, label: str = "expiring") -> dict:
        """A token of ``token``'s user that expires ``seconds`` from now (needs ``--auth``);
        the API's answer (``token``, ``expires_at`` in ms)."""
        at = int(time.time() * 1000 + seconds * 1000)
        return self.api("POST", "/api/v1/tokens", {"label": label, "expires_at": at}, token=token, expect=201)

    # --- HTTP -------------------------------------------------------------------------------

    def http(self, method: str, path: str, **kw) -> Http:
        """:func:`http` against this server (``path`` starts with ``/``)."""
        return http(method, self.srv.url(path), **kw)

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        expect: int | tuple[int, ...] = (200, 201),
    ) -> Any:
        """A JSON API call; the envelope's ``data`` (or the whole body). Fails on another status."""
        r = self.http(method, path, body=body, token=token, headers=headers)
        ok = (expect,) if isinstance(expect, int) else expect
        assert r.status in ok, f"{method} {path}: HTTP {r.status}, expected {ok}: {r.text[:2000]}"
        if not r.body:
            return None
        doc = r.json()
        if isinstance(doc, dict) and "success" in doc and "data" in doc:
            return doc["data"]
        return doc

    def create_kb(self, name: str, *, token: str | None = None, **extra: Any) -> dict:
        """``POST /api/v1/knowledge-bases``; the knowledge base (``id``, ``name``…)."""
        return self.api("POST", "/api/v1/knowledge-bases", {"name": name, **extra}, token=token, expect=201)

    def upload(
        self, kb_id: str, files: dict[str, str | bytes] | list[tuple[str, str | bytes]], *, token: str | None = None
    ) -> Any:
        """One multipart upload (at most 200 files a request); the API's answer."""
        items = list(files.items()) if isinstance(files, dict) else list(files)
        enc = [(n, c.encode() if isinstance(c, str) else c) for n, c in items]
        data, ctype = multipart(enc)
        r = self.http(
            "POST", f"/api/v1/knowledge-bases/{kb_id}/documents", data=data, headers={"Content-Type": ctype}, token=token
        )
        assert r.status in (200, 201, 202), f"upload: HTTP {r.status}: {r.text[:2000]}"
        doc = r.json()
        return doc.get("data", doc) if isinstance(doc, dict) else doc

    def documents(self, kb_id: str, *, token: str | None = None) -> list[dict]:
        return self.api("GET", f"/api/v1/knowledge-bases/{kb_id}/documents", token=token)

    def wait_documents(
        self, kb_id: str, count: int | None = None, *, timeout: float = 120, token: str | None = None
    ) -> list[dict]:
        """Polls until the knowledge base holds ``count`` documents (any number when None), each
        ready or failed; returns them."""
        deadline = time.monotonic() + timeout
        docs: list[dict] = []
        while time.monotonic() < deadline:
            docs = self.documents(kb_id, token=token)
            if (count is None or len(docs) >= count) and all(d.get("status") in ("ready", "failed") for d in docs):
                return docs
            time.sleep(0.2)
        pending = [(d.get("file_name"), d.get("status")) for d in docs if d.get("status") not in ("ready", "failed")]
        pytest.fail(f"documents of {kb_id} not done within {timeout} s ({len(docs)} listed): {pending[:20]}")


def start_ui_server(
    quarry_bin: Path, corpus: Path, root: Path, *extra_args: str, env: dict[str, str] | None = None
) -> UiServer:
    """``quarry serve --port <free> EXTRA…`` on a fresh home under ``root`` (conftest's make_home:
    the corpus as collection ``notes``), with the embedded assets (``QUARRY_UI_DIR`` unset;
    ``$QUARRY_UI_TEST_DIR`` when set, for development).
    ``env`` adds variables (chat model settings…); the caller stops it with ``.stop()``."""
    root.mkdir(parents=True, exist_ok=True)
    home = make_home(quarry_bin, corpus, root / "quarry-home", env={**UI_ENV, **(env or {})})
    home = home.with_env(QUARRY_UI_DIR=os.environ.get("QUARRY_UI_TEST_DIR") or None)
    srv = start_server(home, *extra_args, logdir=root / "serve-logs")
    return UiServer(srv, home)


@pytest.fixture
def ui_server_factory(quarry_bin: Path, corpus: Path, tmp_path: Path):
    started: list[UiServer] = []

    def start(*extra_args: str, env: dict[str, str] | None = None) -> UiServer:
        srv = start_ui_server(quarry_bin, corpus, tmp_path / f"ui-{len(started)}", *extra_args, env=env)
        started.append(srv)
        return srv

    yield start
    errors = []
    for srv in started:
        try:
            srv.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n\n".join(errors)


@pytest.fixture
def ui_server(ui_server_factory) -> UiServer:
    return ui_server_factory()


@pytest.fixture(scope="module")
def ui_module_server(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    srv = start_ui_server(quarry_bin, corpus, tmp_path_factory.mktemp("ui-module"))
    yield srv
    srv.stop()


# ---------------------------------------------------------------------------------------------
# Ordering: browser modules last.


def pytest_collection_modifyitems(session, config, items) -> None:  # noqa: ARG001
    """Moves every test module that uses ``browser`` after all other modules (order kept
    within each group), so a serial run starts Chromium once per browser module, in a row."""
    by_module: dict[str, bool] = {}
    for item in items:
        key = str(getattr(item, "path", item.nodeid.split("::")[0]))
        by_module[key] = by_module.get(key, False) or "browser" in getattr(item, "fixturenames", ())
    if not any(by_module.values()):
        return

    def module_key(item) -> str:
        return str(getattr(item, "path", item.nodeid.split("::")[0]))

    items[:] = [i for i in items if not by_module[module_key(i)]] + [i for i in items if by_module[module_key(i)]]


# ---------------------------------------------------------------------------------------------
# The browser.


# One browser per module: while Playwright's sync API runs, its asyncio loop is the thread's
# running loop, and an ``asyncio.run``/anyio test in the same process fails ("Already running
# asyncio in this thread"). Under pytest-xdist a worker runs browser and other modules in any
# order, so the browser stops at the end of each module that uses it.
@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError as e:
        pytest.fail(f"Playwright is not installed ({e}): {INSTALL_HINT}", pytrace=False)
    exe = chromium_path()
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        pytest.fail(
            f"Chromium not found at {exe}: {INSTALL_HINT} (Debian package chromium), or set QUARRY_CHROMIUM",
            pytrace=False,
        )
    # A debug build on 2 busy cores: give auto-waiting assertions more than the default 5 s.
    expect.set_options(timeout=15_000)
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=exe, headless=True)
    except Exception as e:  # noqa: BLE001
        pw.stop()
        pytest.fail(f"cannot launch Chromium at {exe}: {e}", pytrace=False)
    yield b
    try:
        b.close()
    finally:
        pw.stop()


# What the browser reports by itself for an HTTP error answer of a fetch or a load.
_LOAD_FAILED = re.compile(r"^Failed to load resource: the server responded with a status of (\d{3})")


@dataclass
class PageRecord:
    """What a page did: console messages, page errors, requests and responses."""

    color_scheme: str
    viewport: dict
    console: list[tuple[str, str, str]] = field(default_factory=list)  # (type, text, url)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    responses: list[tuple[int, str]] = field(default_factory=list)  # (status, url)
    allowed: list[re.Pattern] = field(default_factory=list)

    def errors(self) -> list[str]:
        """Console errors and page errors that count (see the module docstring)."""
        out = [f"pageerror: {e}" for e in self.page_errors if not self._allowed(e)]
        for kind, text, url in self.console:
            if kind != "error" or self._allowed(text):
                continue
            m = _LOAD_FAILED.match(text)
            if m and 400 <= int(m.group(1)) < 500 and "/assets/" not in url:
                continue
            out.append(f"console.error: {text}" + (f" ({url})" if url else ""))
        return out

    def foreign_requests(self) -> list[str]:
        bad = []
        for url in self.requests:
            u = urllib.parse.urlsplit(url)
            if u.scheme in ("data", "blob", "about") or PDF_VIEWER.match(url):
                continue
            if u.scheme not in ("http", "https", "ws", "wss") or u.hostname != LOOPBACK:
                bad.append(url)
        return bad

    def _allowed(self, text: str) -> bool:
        return any(p.search(text) for p in self.allowed)


_RECORDS: dict[int, PageRecord] = {}


def page_record(page) -> PageRecord:
    """The :class:`PageRecord` of a page made by ``ui_page``/``ui_page_factory``."""
    return _RECORDS[id(page)]


def allow_console(page, pattern: str) -> None:
    """Lets console errors and page errors matching the regex ``pattern`` pass (for errors a
    test provokes on purpose)."""
    page_record(page).allowed.append(re.compile(pattern))


@pytest.fixture
def ui_page_factory(browser):
    made: list[tuple[Any, Any]] = []  # (context, page)

    def new_page(
        *,
        locale: str = "en-US",
        color_scheme: str = "light",
        viewport: dict | None = None,
        base_url: str | None = None,
        **context_options: Any,
    ):
        vp = dict(viewport or DESKTOP)
        ctx = browser.new_context(
            viewport=vp, locale=locale, color_scheme=color_scheme, base_url=base_url, **context_options
        )
        page = ctx.new_page()
        rec = PageRecord(color_scheme=color_scheme, viewport=vp)
        page.on("console", lambda m: rec.console.append((m.type, m.text, (m.location or {}).get("url", ""))))
        page.on("pageerror", lambda e: rec.page_errors.append(f"{e.name}: {e.message}\n{e.stack or ''}".strip()))
        ctx.on("request", lambda r: rec.requests.append(r.url))
        ctx.on("response", lambda r: rec.responses.append((r.status, r.url)))
        _RECORDS[id(page)] = rec
        made.append((ctx, page))
        return page

    yield new_page
    problems = []
    for ctx, page in made:
        rec = _RECORDS.pop(id(page), None)
        if rec is not None:
            errors = rec.errors()
            foreign = rec.foreign_requests()
            warnings = [t for k, t, _ in rec.console if k == "warning"]
            if warnings:
                print("console warnings:\n  " + "\n  ".join(warnings))
            if errors:
                problems.append("console errors on the page:\n  " + "\n  ".join(errors))
            if foreign:
                problems.append(f"requests to hosts other than {LOOPBACK}:\n  " + "\n  ".join(sorted(set(foreign))))
        try:
            ctx.close()
        except Exception:  # noqa: BLE001  (the browser may already be gone)
            pass
    assert not problems, "\n".join(problems)


@pytest.fixture
def ui_page(ui_page_factory):
    return ui_page_factory()


def login(page, base: str, token: str) -> None:
    """Opens ``base``/ and signs in through the login form; returns when the nav shows."""
    from playwright.sync_api import expect

    page.goto(f"{base}/")
    page.locator("#login-token").fill(token)
    page.locator("form.login button[type=submit]").click()
    expect(page.locator("#nav a").first).to_be_visible()


# ---------------------------------------------------------------------------------------------
# Accessibility (axe-core) and screenshots.


def _axe_source() -> str:
    path = os.environ.get("QUARRY_AXE_JS")
    if not path:
        pytest.fail(f"QUARRY_AXE_JS is not set: {INSTALL_HINT}", pytrace=False)
    if not os.path.isfile(path):
        pytest.fail(f"axe-core not found at {path}: {INSTALL_HINT}", pytrace=False)
    return Path(path).read_text(encoding="utf-8")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "page"


_AXE_RUN = """() => axe.run(document, {resultTypes: ["violations"]}).then((r) => r.violations.map((v) => ({
  id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
  nodes: v.nodes.map((n) => ({target: n.target, html: n.html, summary: n.failureSummary})),
})))"""


@pytest.fixture
def axe_check():
    """``axe_check(page, label, schemes=("light", "dark"))``: fails on serious/critical axe
    violations in any of the colour schemes."""

    def check(page, label: str, schemes: tuple[str, ...] = ("light", "dark")) -> list[dict]:
        # The page's CSP allows only 'self' scripts, so a <script> tag with axe's source would
        # be blocked; evaluation over the DevTools protocol is not subject to CSP.
        if not page.evaluate("() => typeof window.axe === 'object'"):
            page.evaluate(_axe_source() + "\n;undefined")
        rec = _RECORDS.get(id(page))
        restore = rec.color_scheme if rec else "light"
        found: list[dict] = []
        try:
            for scheme in schemes:
                page.emulate_media(color_scheme=scheme)
                for v in page.evaluate(_AXE_RUN):
                    v["scheme"] = scheme
                    found.append(v)
        finally:
            page.emulate_media(color_scheme=restore)
        bad = [v for v in found if v["impact"] in ("serious", "critical")]
        out = artifacts_dir()
        out.mkdir(parents=True, exist_ok=True)
        (out / f"axe-{_slug(label)}.json").write_text(json.dumps(found, indent=2, ensure_ascii=False))
        if bad:
            lines = []
            for v in bad:
                lines.append(f"[{v['scheme']}] {v['id']} ({v['impact']}): {v['help']}  {v['helpUrl']}")
                for n in v["nodes"][:10]:
                    lines.append(f"    {' '.join(map(str, n['target']))}  {n['html'][:160]}")
                    if n.get("summary"):
                        lines.append("      " + n["summary"].replace("\n", "\n      ")[:600])
                if len(v["nodes"]) > 10:
                    lines.append(f"    … and {len(v['nodes']) - 10} more")
            pytest.fail(f"axe-core: serious/critical violations on '{label}':\n" + "\n".join(lines), pytrace=False)
        return found

    return check


@pytest.fixture
def shot():
    """``shot(page, name)``: ``<name>-light.png``, ``-dark.png`` and ``-phone.png`` (full page)."""

    def take(page, name: str) -> list[Path]:
        out = artifacts_dir()
        out.mkdir(parents=True, exist_ok=True)
        slug = _slug(name)
        rec = _RECORDS.get(id(page))
        scheme0 = rec.color_scheme if rec else "light"
        viewport0 = page.viewport_size or DESKTOP
        paths = []
        try:
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                p = out / f"{slug}-{scheme}.png"
                page.screenshot(path=str(p), full_page=True, animations="disabled")
                paths.append(p)
            page.emulate_media(color_scheme="light")
            page.set_viewport_size(PHONE)
            p = out / f"{slug}-phone.png"
            page.screenshot(path=str(p), full_page=True, animations="disabled")
            paths.append(p)
        finally:
            page.set_viewport_size(viewport0)
            page.emulate_media(color_scheme=scheme0)
        return paths

    return take


def in_thread(coro_fn):
    """Runs an async function on a fresh event loop in another thread (Playwright's sync API
    owns this thread's loop) and returns its result."""
    box: dict = {}

    def run():
        try:
            box["value"] = asyncio.run(coro_fn())
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    th = threading.Thread(target=run)
    th.start()
    th.join(120)
    assert not th.is_alive(), "the MCP client did not finish within 120 s"
    if "error" in box:
        raise box["error"]
    return box["value"]
