"""Parser differentials (issue 65 items 2 and 3), through the real binary: what Quarry checks
must be what the program it protects reads.

- **Sources.** A Git URL the WHATWG parser (the `url` crate) reads as one host and libcurl
  (`git`) as another — `http://1.1.1.1\\@127.0.0.1:PORT/internal.git` is host 1.1.1.1 to
  the first, 127.0.0.1 to the second — is refused with a 400 when a knowledge base's admin
  attaches it, on a server with tokens and **without** `--allow-net`, as is a URL with a line
  break, a tab, a `%`-escape in its host or an IPv4 host in an odd form, for every kind that
  takes a URL. A real `git http-backend` serves an internal repository on loopback, and plain
  `git` shows that it does reach it through that URL. The refusal is decided from the URL
  alone: the same words whether or not anything listens there (no port scanner).
- **Policies.** `under` judges a path where the OS leads it — a *dangling* symbolic link
  inside the allowed folder that points outside, `allowed/link/../secret2.txt` with `link`
  pointing outside — and `host_in` refuses a URL that httpx reads as another host
  (`http://allowed.example\\@127.0.0.1:PORT/secret`). The consequential tools are the real
  npm ``@modelcontextprotocol/server-filesystem`` and a small stdio server written here
  (the official Python SDK's ``MCPServer``, FastMCP's successor) whose tools hand their arguments to ``open()`` and
  ``httpx`` unchanged, as many real tools do; the same calls made directly show what the
  tools would have done.

One home: space ``acme`` with its owner; the owner's ``admin`` token (made with ``--manage``)
attaches sources and manages policies, the owner's ``agent`` token makes the tool calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2 as httpx
import pytest
from conftest import QuarryServer, make_home, mcp_servers_prefix, node, settled, start_server
from test_policies import gateway, run
from test_sources import GitServer
from test_teams import http

INTERNAL_SECRET = "prod database password: hunter2-ZEBRA"

RAW_TOOLS = textwrap.dedent('''
    """A stdio MCP server (official Python SDK) whose tools use the OS and the network with
    their arguments unchanged, as many real tools do."""
    import httpx2
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("rawfs")


    @app.tool()
    def read_file(path: str) -> str:
        """Reads a text file."""
        with open(path, encoding="utf-8") as f:
            return f.read()


    @app.tool()
    def write_file(path: str, content: str) -> str:
        """Writes a text file."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
        return "written"


    @app.tool()
    def fetch(url: str) -> str:
        """Fetches a URL with httpx."""
        return httpx2.get(url, timeout=10).text


    if __name__ == "__main__":
        app.run()
''')


class Internal:
    """A loopback HTTP server standing for an internal service: `/secret` answers the secret,
    `/ok` a harmless page."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = (b"INTERNAL-SECRET" if self.path.startswith("/secret") else b"OK-PAGE")
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()


@dataclass
class World:
    srv: QuarryServer
    tokens: dict
    gitsrv: GitServer
    internal: Internal
    files: Path
    allowed: Path
    outside: Path

    def tok(self, key: str) -> str:
        return self.tokens[key]["token"]


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("differentials")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})

    def cli_json(*args: str) -> dict:
        r = home.run(*args, "--json")
        assert r.returncode == 0, (args, r.stderr)
        return json.loads(r.stdout)

    assert home.run("space", "create", "acme").returncode == 0
    assert home.run("user", "add", "owner").returncode == 0
    assert home.run("space", "grant", "acme", "owner", "--role", "owner").returncode == 0
    # The owner's own credential manages (sources, MCP servers, policies); the agent's is plain.
    tokens = {key: cli_json("token", "create", "--user", "owner", "--spaces", "acme", "--label", key, *extra)
              for key, extra in (("admin", ("--manage",)), ("agent", ()))}

    # The filesystem server may reach all of `files`; the policy narrows it to `allowed`.
    files = root / "files"
    allowed, outside = files / "allowed", files / "outside"
    (allowed / "notes").mkdir(parents=True)
    outside.mkdir()
    (allowed / "hello.txt").write_text("hello from the allowed folder")
    (files / "secret2.txt").write_text("SECRET-TWO")
    # A link to a folder outside: `allowed/link/../secret2.txt` is `files/secret2.txt` to the OS.
    (allowed / "link").symlink_to("../outside")
    # Dangling links inside `allowed` whose targets would be created outside.
    (allowed / "t2.txt").symlink_to("../outside/pwn2.txt")
    (allowed / "t3.txt").symlink_to("../outside/pwn3.txt")
    raw_tools = root / "raw_tools.py"
    raw_tools.write_text(RAW_TOOLS)

    gitsrv = GitServer(root / "git" / "repos")
    gitsrv.repo("internal.git", {"prod.md": f"# Prod\n\n{INTERNAL_SECRET}\n"})
    internal = Internal()
    # Tokens, and no --allow-net: a token's sources reach only public addresses.
    srv = start_server(home, "--auth", "token", "--hub-allow-commands", logdir=root / "logs")
    try:
        admin = tokens["admin"]["token"]
        mods = mcp_servers_prefix() / "node_modules" / "@modelcontextprotocol"
        for body in (
            {"name": "filesystem", "transport_type": "stdio",
             "config": f"{node()} {mods / 'server-filesystem' / 'dist' / 'index.js'}", "args": [str(files)]},
            {"name": "rawfs", "transport_type": "stdio", "config": f"{sys.executable} {raw_tools}"},
        ):
            r = http(srv, "POST", "/api/v1/mcp/servers", admin, json=body)
            assert r.status_code == 201, r.text
            info = settled(srv, r.json()["data"], {"Authorization": f"Bearer {admin}"})
            assert info["status"] == "ready" and info["tool_count"] > 0, info
        for body in (
            {"name": "inside-allowed", "tools": ["filesystem.*", "rawfs.read_file", "rawfs.write_file"],
             "effect": "deny",
             "when": {"not": {"argument": ["path", "paths", "source", "destination"], "operator": "under",
                              "value": str(allowed)}}},
            {"name": "known-hosts", "tools": ["rawfs.fetch"], "effect": "deny",
             "when": {"not": {"argument": "url", "operator": "host_in", "value": ["allowed.example", "localhost"]}}},
        ):
            r = http(srv, "POST", "/api/v1/policies", admin, json=body)
            assert r.status_code == 201, r.text
        r = http(srv, "POST", "/api/v1/knowledge-bases", admin, json={"name": "docs"})
        assert r.status_code == 201, r.text
        yield World(srv=srv, tokens=tokens, gitsrv=gitsrv, internal=internal, files=files, allowed=allowed,
                    outside=outside)
    finally:
        srv.stop()
        gitsrv.stop()
        internal.stop()


def closed_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def attach(w: World, body: dict):
    return http(w.srv, "POST", "/api/v1/knowledge-bases/docs/sources", w.tok("admin"), json=body)


def refusal(r, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"detail", "status_code", "error_code"} and body["status_code"] == status, body
    return body["detail"]


# ---------------------------------------------------------------------------------------------
# Item 2: source URLs.


def test_git_reaches_loopback_through_the_backslash_url(world):
    """The differential itself, without Quarry: Python's urllib and plain `git` (libcurl) read
    the host of the backslash URL as 127.0.0.1 and reach the internal repository."""
    w = world
    url = f"http://1.1.1.1\\@127.0.0.1:{w.gitsrv.port}/internal.git"
    assert urllib.parse.urlsplit(url).hostname == "127.0.0.1"
    r = subprocess.run(["git", "ls-remote", url], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0", "HOME": str(w.files)})
    assert r.returncode == 0 and "refs/heads/main" in r.stdout, r.stderr


def test_ambiguous_source_urls_are_refused_at_attach(world):
    """A 400 that says what is wrong, for every kind that takes a URL, and nothing created."""
    w = world
    port = w.gitsrv.port
    cases = [
        (f"http://1.1.1.1\\@127.0.0.1:{port}/internal.git", "backslash before its path"),
        ("http://1.1.1.1/internal\n.git", "line break"),
        (f"http://1.1.1.1:{port}/internal.git\n@127.0.0.1", "line break"),
        ("http://1.1.1.1/internal\t.git", "a tab"),
        (f"http://127.0.0.1%2e:{port}/internal.git", "%-escape in its host"),
        (f"http://0x7f.1:{port}/internal.git", 'is read as "127.0.0.1"'),
        (f"http://127.1:{port}/internal.git", "is read as"),
        (f"http://u\\:x@127.0.0.1:{port}/internal.git", "backslash before its path"),
    ]
    for url, says in cases:
        for body in (
            {"kind": "git", "url": url},
            {"kind": "webdav", "url": url},
            {"kind": "site", "sitemap": url},
            {"kind": "s3", "url": "s3://docs", "endpoint": url},
        ):
            detail = refusal(attach(w, body), 400)
            assert says in detail, (body, detail)
            assert url not in detail and url.strip() not in detail, detail
    r = http(w.srv, "GET", "/api/v1/knowledge-bases/docs/sources", w.tok("admin"))
    assert r.status_code == 200 and r.json()["data"] == [], r.text


def test_a_refusal_does_not_tell_whether_anything_listens(world):
    """Open port (the Git server) and closed port: the same answer, decided before any
    connection — for the backslash URL (400) and for the plain loopback URL (403, the guard)."""
    w = world
    open_port, shut = w.gitsrv.port, closed_port()
    before = w.gitsrv.requests
    answers = []
    for port in (open_port, shut):
        for url, status in ((f"http://1.1.1.1\\@127.0.0.1:{port}/internal.git", 400),
                            (f"http://127.0.0.1:{port}/internal.git", 403),
                            (f"http://169.254.169.254\\@127.0.0.1:{port}/internal.git", 400)):
            detail = refusal(attach(w, {"kind": "git", "url": url}), status)
            answers.append(detail.replace(str(port), "PORT"))
    assert answers[:3] == answers[3:], answers
    assert "refused: 127.0.0.1 is a loopback address" in answers[1], answers
    assert w.gitsrv.requests == before, "the Git server was contacted"


# ---------------------------------------------------------------------------------------------
# Item 3: argument policies read paths and URLs as the tools do.


def refused_by(w: World, tool: str, args: dict, policy: str) -> None:
    ok, text, meta = run(gateway(w.srv, w.tok("agent")), tool, args)
    assert not ok, (tool, args, text)
    assert f"Refused by policy '{policy}'" in text, (tool, args, text)
    assert "SECRET" not in text, text
    assert meta == {"outcome": "refused", "policy": policy}, meta


def test_what_the_os_does_with_these_paths(world, tmp_path):
    """Control: plain `open()` follows a dangling link out of the folder (creating the file
    outside), and `link/..` climbs from the link's target."""
    w = world
    assert open(f"{w.allowed}/link/../secret2.txt").read() == "SECRET-TWO"
    demo = tmp_path / "allowed"
    demo.mkdir()
    (demo / "d.txt").symlink_to("../outside-created.txt")
    with open(demo / "d.txt", "w") as f:
        f.write("x")
    assert (tmp_path / "outside-created.txt").read_text() == "x"


def test_under_judges_a_dangling_link_by_where_its_target_would_be_created(world):
    w = world
    url = gateway(w.srv, w.tok("agent"))
    # Controls: inside the folder, both servers work.
    ok, text, _ = run(url, "filesystem__read_text_file", {"path": str(w.allowed / "hello.txt")})
    assert ok and "hello from the allowed folder" in text, text
    ok, text, _ = run(url, "rawfs__read_file", {"path": str(w.allowed / "hello.txt")})
    assert ok and "hello from the allowed folder" in text, text
    ok, text, _ = run(url, "filesystem__write_file", {"path": str(w.allowed / "notes" / "ok.txt"), "content": "fine"})
    assert ok, text
    assert (w.allowed / "notes" / "ok.txt").read_text() == "fine"
    # The dangling links: refused for writing and reading, by both servers' policy.
    refused_by(w, "filesystem__write_file", {"path": str(w.allowed / "t2.txt"), "content": "pwned"}, "inside-allowed")
    refused_by(w, "filesystem__read_text_file", {"path": str(w.allowed / "t2.txt")}, "inside-allowed")
    refused_by(w, "rawfs__write_file", {"path": str(w.allowed / "t3.txt"), "content": "pwned"}, "inside-allowed")
    refused_by(w, "rawfs__read_file", {"path": str(w.allowed / "t3.txt")}, "inside-allowed")
    assert not (w.outside / "pwn2.txt").exists() and not (w.outside / "pwn3.txt").exists()


def test_under_climbs_from_a_links_target(world):
    w = world
    path = f"{w.allowed}/link/../secret2.txt"
    refused_by(w, "filesystem__read_text_file", {"path": path}, "inside-allowed")
    refused_by(w, "rawfs__read_file", {"path": path}, "inside-allowed")
    refused_by(w, "rawfs__write_file", {"path": path, "content": "overwritten"}, "inside-allowed")
    assert (w.files / "secret2.txt").read_text() == "SECRET-TWO"


def test_host_in_refuses_a_url_httpx_reads_as_another_host(world):
    w = world
    port = w.internal.port
    attack = f"http://allowed.example\\@127.0.0.1:{port}/secret"
    # Control: httpx (what the tool uses) and urllib read the host as 127.0.0.1 and reach it.
    assert urllib.parse.urlsplit(attack).hostname == "127.0.0.1"
    assert httpx.get(attack, timeout=10).text == "INTERNAL-SECRET"
    # A host on the list passes the policy and the tool runs.
    ok, text, _ = run(gateway(w.srv, w.tok("agent")), "rawfs__fetch", {"url": f"http://localhost:{port}/ok"})
    assert ok and "OK-PAGE" in text, text
    for url in (
        attack,
        f"http://allowed.example\\.evil.org:{port}/secret",
        f"http://localhost@127.0.0.1:{port}/secret",
        f"http://localhost\t@127.0.0.1:{port}/secret",
        f"http://allowed%2eexample:{port}/secret",
        f"http://localhost%00@127.0.0.1:{port}/secret",
    ):
        refused_by(w, "rawfs__fetch", {"url": url}, "known-hosts")
