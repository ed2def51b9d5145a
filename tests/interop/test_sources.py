"""Sources that sync a knowledge base (issue 43) through the REST API of the real server:
a folder (attached by the machine's owner), Git repositories served by a real
``git http-backend`` over loopback HTTP and a loopback website's sitemap, synced on request
and on their schedule — additions, edits, renames and
deletions reach search, document ids stay, reports say what happened — changed and
detached (with and without their documents), a private repository's credential that is
never shown again, a sync already running (409), every bad input, what other knowledge bases
and other tenants' tokens see (404, never a 403 that tells), the audit log's record of each
sync, and the lag and failure gauges of ``/metrics``.

One server for the module, started without ``--auth`` so that a request without a token is
the machine's owner (the only caller who may name a place on the server's disk); tokens of
space ``acme`` (an admin, one limited to its knowledge base ``docs``, a read-only one) are
ordinary remote callers.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from conftest import QuarryHome, isolated_env, start_server

SECRET_KEY = "5e" * 32  # QUARRY_SECRET_KEY: 32 bytes as 64 hex digits
REPO_TOKEN = "ghp_" + "s3cr3t" * 6  # what the private repository asks for
TOKEN_USER = "x-access-token"


# ---------------------------------------------------------------------------------------------
# Git over HTTP: `git http-backend` (shipped with Git) as a CGI program behind a small server.


def git(cwd: Path, *args: str) -> str:
    r = subprocess.run(
        ["git", "-c", "user.name=Tester", "-c", "user.email=tester@example.com",
         "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, f"git {args}: {r.stderr}"
    return r.stdout


class GitServer:
    """Serves every bare repository under `root` (`root/x.git` at `/x.git`); those under
    `root/private/` only to basic authentication `x-access-token:REPO_TOKEN`. `slow` holds
    every request that long (seconds); `requests` counts them."""

    def __init__(self, root: Path):
        self.root = root
        self.slow = 0.0
        self.requests = 0
        self.seen = threading.Event()
        server = self
        expected = "Basic " + base64.b64encode(f"{TOKEN_USER}:{REPO_TOKEN}".encode()).decode()

        class Handler(BaseHTTPRequestHandler):
            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _run(self) -> None:
                server.requests += 1
                server.seen.set()
                if server.slow:
                    time.sleep(server.slow)
                body = self._body()
                path, _, query = self.path.partition("?")
                if path.startswith("/private/") and self.headers.get("Authorization") != expected:
                    self._reply(401, [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Type", "text/plain")],
                                b"authentication required")
                    return
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": str(server.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "GATEWAY_INTERFACE": "CGI/1.1",
                    "SERVER_PROTOCOL": "HTTP/1.1",
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "CONTENT_LENGTH": str(len(body)),
                    "REMOTE_ADDR": "127.0.0.1",
                }
                for k, v in self.headers.items():
                    name = k.upper().replace("-", "_")
                    if name == "CONTENT_TYPE":
                        env["CONTENT_TYPE"] = v
                    elif name not in ("CONTENT_LENGTH", "AUTHORIZATION", "TRANSFER_ENCODING"):
                        env["HTTP_" + name] = v
                if self.headers.get("Git-Protocol"):
                    env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
                out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                                     timeout=60).stdout
                sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
                head, _, rest = out.partition(sep)
                status, headers = 200, []
                for line in head.decode("latin-1").splitlines():
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "status":
                        status = int(v.split()[0])
                    elif k.strip():
                        headers.append((k.strip(), v.strip()))
                self._reply(status, headers, rest)

            do_GET = do_POST = _run

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def repo(self, name: str, files: dict[str, str]) -> Path:
        """A bare repository `name` at the root with `files` committed on `main`; returns a
        working copy to change it with (then `push`)."""
        bare = self.root / name
        bare.parent.mkdir(parents=True, exist_ok=True)
        git(self.root, "init", "-q", "--bare", str(bare))
        work = self.root.parent / "work" / name
        work.mkdir(parents=True)
        git(work, "init", "-q")
        write(work, files)
        push(work, bare, "first")
        return work

    def stop(self) -> None:
        self.httpd.shutdown()


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def push(work: Path, bare: Path | None = None, message: str = "change") -> None:
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    if bare is not None:
        git(work, "remote", "add", "origin", str(bare))
    git(work, "push", "-q", "origin", "HEAD:main")


# ---------------------------------------------------------------------------------------------
# The module's world.


@dataclass
class World:
    home: QuarryHome
    srv: object
    gitsrv: GitServer
    root: Path
    tokens: dict[str, dict] = field(default_factory=dict)
    acme: dict[str, str] = field(default_factory=dict)  # acme's knowledge bases and source

    def cli(self, *args: str) -> dict:
        r = self.home.run("--json", *args, timeout=120)
        assert r.returncode == 0, f"quarry {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return json.loads(r.stdout)

    def tok(self, key: str) -> str:
        return self.tokens[key]["token"]


@pytest.fixture(scope="module")
def world(quarry_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("sources")
    home_dir = root / "home"
    home_dir.mkdir()
    env = isolated_env(home_dir, {"QUARRY_OCR": "off", "QUARRY_SECRET_KEY": SECRET_KEY})
    home = QuarryHome(bin=quarry_bin, home=home_dir, env=env, corpus=root)
    gitsrv = GitServer(root / "git" / "repos")
    (root / "git" / "repos").mkdir(parents=True, exist_ok=True)
    w = World(home=home, srv=None, gitsrv=gitsrv, root=root)
    # Another tenant: space acme, its admin, a token limited to its knowledge base `docs`, a
    # read-only one; and a folder source of acme's, attached and synced by the CLI.
    w.cli("space", "create", "acme")
    w.cli("user", "add", "alice")
    w.cli("space", "grant", "acme", "alice", "--role", "owner")
    for kb in ("docs", "other"):
        w.acme[kb] = w.cli("--space", "acme", "kb", "create", kb)["id"]
    acme_files = root / "acme-files"
    write(acme_files, {"merger.md": "# Merger\n\nThe osprey acquisition closes in May.\n"})
    w.acme["source"] = w.cli("--space", "acme", "source", "add", "other", "--folder", str(acme_files))["id"]
    synced = w.cli("--space", "acme", "source", "sync", w.acme["source"])
    assert synced["report"]["counts"]["added"] == 1, synced
    for key, args in (
        ("admin", ("--manage",)),  # alice's own credential: it manages sources
        ("docs_only", ("--kb", "docs")),
        ("read_only", ("--read-only",)),
    ):
        w.tokens[key] = w.cli("token", "create", "--user", "alice", "--spaces", "acme", "--label", key, *args)
    # The test servers (Git, sites) listen on 127.0.0.1: allow-listed for the remote callers
    # (tokens), whose sources go through the outbound address guard.
    w.srv = start_server(home, "--allow-net", "127.0.0.1/32", logdir=root / "logs")
    yield w
    w.srv.stop()
    gitsrv.stop()


def call(w: World, method: str, path: str, token: str | None = None, **kw) -> requests.Response:
    headers = dict(kw.pop("headers", {}) or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return requests.request(method, w.srv.url(path), headers=headers, timeout=120, **kw)


def data(r: requests.Response, status: int = 200):
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["success"] is True, body
    return body["data"]


def refused(r: requests.Response, status: int, *fragments: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"detail", "status_code", "error_code"} and body["status_code"] == status, body
    for f in fragments:
        assert f in body["detail"], (f, body["detail"])
    return body


def new_kb(w: World, name: str, token: str | None = None) -> dict:
    return data(call(w, "POST", "/api/v1/knowledge-bases", token, json={"name": name}), 201)


def add(w: World, kb: str, body: dict, token: str | None = None) -> dict:
    return data(call(w, "POST", f"/api/v1/knowledge-bases/{kb}/sources", token, json=body), 201)


def sync(w: World, source_id: str, token: str | None = None) -> dict:
    """Syncs; returns the report, after every document it queued has settled."""
    out = data(call(w, "POST", f"/api/v1/sources/{source_id}/sync", token))
    report = out["report"]
    assert report["status"] == "succeeded" and report["finished_at"], report
    kb = call(w, "GET", f"/api/v1/sources/{source_id}", token).json()["data"]["knowledge_base"]
    settle(w, kb, [d["id"] for d in out["documents"]], token)
    return report


def counts(report: dict) -> list[int]:
    c = report["counts"]
    return [c[k] for k in ("added", "changed", "renamed", "deleted", "unchanged", "skipped")]


def docs(w: World, kb: str, token: str | None = None) -> dict[str, dict]:
    """The knowledge base's documents by file name."""
    return {d["file_name"]: d for d in data(call(w, "GET", f"/api/v1/knowledge-bases/{kb}/documents", token))}


def settle(w: World, kb: str, ids: list[str], token: str | None = None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        by_id = {d["id"]: d for d in docs(w, kb, token).values()}
        if all(by_id.get(i, {}).get("status") in ("ready", "failed") for i in ids):
            assert all(by_id[i]["status"] == "ready" for i in ids), [by_id[i] for i in ids]
            return
        assert time.monotonic() < deadline, f"not processed: {by_id}\n{w.srv.stderr()[-3000:]}"
        time.sleep(0.1)


def found(w: World, word: str, kb: str, token: str | None = None) -> list[str]:
    r = call(w, "POST", "/search", token, json={"query": word, "collection": kb, "limit": 10})
    assert r.status_code == 200, r.text
    return sorted(h["file"] for h in r.json()["results"])


def metrics(w: World, token: str | None = None) -> str:
    r = call(w, "GET", "/metrics", token)
    assert r.status_code == 200, r.text
    return r.text


def gauge(text: str, name: str, source_id: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'source="{source_id}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def audit(w: World, **params) -> list[dict]:
    r = call(w, "GET", "/api/v1/audit", params={"limit": 1000, **params})
    assert r.status_code == 200, r.text
    return r.json()["data"]["items"]


# ---------------------------------------------------------------------------------------------


def test_a_folder_follows_edits_renames_and_deletions(world):
    w = world
    kb = new_kb(w, "handbook")
    src = w.root / "handbook-folder"
    write(src, {
        "intro.md": "# Intro\nWelcome aboard, zebra crossing.\n",
        "policies/leave.md": "# Leave\nTwenty-five days of quokka leave.\n",
        "policies/travel.md": "# Travel\nEconomy walrus class.\n",
        "logo.png": "not a document",
    })
    s = add(w, "handbook", {"kind": "folder", "path": str(src)})
    assert s["location"] == {"kind": "folder", "path": str(src)} and s["interval_seconds"] is None, s
    assert s["mask"] and s["next_sync_at"] is None, "synced only when asked"
    assert s["knowledge_base"] == "handbook" and s["documents"] == 0 and s["has_secret"] is False, s
    assert [x["id"] for x in data(call(w, "GET", f"/api/v1/knowledge-bases/{kb['id']}/sources"))] == [s["id"]]
    # The same place twice is refused.
    refused(call(w, "POST", "/api/v1/knowledge-bases/handbook/sources", json={"kind": "folder", "path": str(src)}), 409)

    first = sync(w, s["id"])
    assert counts(first) == [3, 0, 0, 0, 0, 1], first
    assert {"path": "logo.png", "action": "skipped", "detail": "not a format Quarry converts"} in first["details"]
    before = docs(w, "handbook")
    assert sorted(before) == ["intro.md", "policies/leave.md", "policies/travel.md"], before
    assert found(w, "quokka", "handbook") == ["handbook/policies/leave.md"]
    assert counts(sync(w, s["id"])) == [0, 0, 0, 0, 3, 1]

    # Edit, rename, delete, add — the way people do.
    time.sleep(0.05)
    write(src, {"intro.md": "# Intro\nWelcome aboard, okapi crossing at noon.\n", "faq.md": "# FAQ\nAsk the axolotl.\n"})
    (src / "policies/leave.md").rename(src / "policies/time-off.md")
    (src / "policies/travel.md").unlink()
    second = sync(w, s["id"])
    assert counts(second) == [1, 1, 1, 1, 0, 1], second
    after = docs(w, "handbook")
    assert after["intro.md"]["id"] == before["intro.md"]["id"], "an edit keeps the id"
    assert after["policies/time-off.md"]["id"] == before["policies/leave.md"]["id"], "a rename keeps the id"
    assert "policies/travel.md" not in after and "policies/leave.md" not in after
    assert found(w, "okapi", "handbook") == ["handbook/intro.md"]
    assert found(w, "zebra", "handbook") == [], "the old text is gone"
    assert found(w, "quokka", "handbook") == ["handbook/policies/time-off.md"]
    assert found(w, "walrus", "handbook") == [], "the deleted file is gone"
    assert found(w, "axolotl", "handbook") == ["handbook/faq.md"]

    # Reports, newest first; ?limit.
    reports = data(call(w, "GET", f"/api/v1/sources/{s['id']}/reports"))
    assert [r["id"] for r in reports] == [second["id"], reports[1]["id"], first["id"]], reports
    assert [r["status"] for r in reports] == ["succeeded"] * 3
    assert len(data(call(w, "GET", f"/api/v1/sources/{s['id']}/reports", params={"limit": 1}))) == 1
    got = data(call(w, "GET", f"/api/v1/sources/{s['id']}"))
    assert got["documents"] == 3 and got["last_success_at"] and got["failures"] == 0, got

    # PATCH: the mask and the schedule; null syncs only when asked.
    p = data(call(w, "PATCH", f"/api/v1/sources/{s['id']}", json={"mask": "policies/**", "interval_seconds": None}))
    assert p["mask"] == "policies/**" and p["interval_seconds"] is None, p
    assert counts(sync(w, s["id"])) == [0, 0, 0, 2, 1, 0], "outside the mask now: intro.md and faq.md go"
    p = data(call(w, "PATCH", f"/api/v1/sources/{s['id']}", json={"mask": "**/*.md", "interval_seconds": 900}))
    assert p["interval_seconds"] == 900 and p["next_sync_at"], p
    assert counts(sync(w, s["id"]))[:1] == [2]
    ids = {n: d["id"] for n, d in docs(w, "handbook").items()}

    # DELETE ?keep_documents=true: the documents stay, as ordinary documents.
    gone = data(call(w, "DELETE", f"/api/v1/sources/{s['id']}", params={"keep_documents": "true"}))
    assert gone == {"id": s["id"], "knowledge_base": "handbook", "documents": 3, "documents_kept": True, "deleted": True}
    refused(call(w, "GET", f"/api/v1/sources/{s['id']}"), 404)
    assert {n: d["id"] for n, d in docs(w, "handbook").items()} == ids
    assert found(w, "axolotl", "handbook") == ["handbook/faq.md"]

    # DELETE without: its documents go with it (from search at once), others stay.
    other = w.root / "handbook-more"
    write(other, {"glossary.md": "# Glossary\nA pangolin is a scaly mammal.\n"})
    s2 = add(w, "handbook", {"kind": "folder", "path": str(other)})
    assert counts(sync(w, s2["id"]))[:1] == [1]
    assert found(w, "pangolin", "handbook") == ["handbook/glossary.md"]
    gone = data(call(w, "DELETE", f"/api/v1/sources/{s2['id']}"))
    assert gone["documents"] == 1 and gone["documents_kept"] is False, gone
    assert "glossary.md" not in docs(w, "handbook")
    assert found(w, "pangolin", "handbook") == []
    assert {n: d["id"] for n, d in docs(w, "handbook").items()} == ids


def test_a_git_repository_over_http(world):
    """Attached by a remote caller (acme's admin token): an http(s) URL is allowed, a place on
    the server's disk is not."""
    w = world
    admin = w.tok("admin")
    repo = w.gitsrv.repo("guide.git", {
        "README.md": "# Guide\nThe heron guide.\n",
        "docs/setup.md": "# Setup\nInstall the capybara toolkit.\n",
        "docs/usage.md": "# Usage\nRun the tapir command.\n",
        "src/main.rs": "fn main() {}\n",
    })
    kb = new_kb(w, "guide", admin)
    s = add(w, "guide", {"kind": "git", "url": w.gitsrv.url("guide.git"), "branch": "main", "path": "docs"}, admin)
    assert s["location"] == {"kind": "git", "url": w.gitsrv.url("guide.git"), "branch": "main", "path": "docs"}, s
    first = sync(w, s["id"], admin)
    assert counts(first) == [2, 0, 0, 0, 0, 0] and len(first["revision"]) == 40, first
    before = docs(w, "guide", admin)
    assert sorted(before) == ["setup.md", "usage.md"], before
    assert found(w, "capybara", "guide", admin) == ["guide/setup.md"]

    write(repo, {"docs/setup.md": "# Setup\nInstall the capybara toolkit, then the okapi plugin.\n"})
    git(repo, "mv", "docs/usage.md", "docs/how-to.md")
    write(repo, {"docs/faq.md": "# FAQ\nAsk the axolotl.\n"})
    push(repo)
    second = sync(w, s["id"], admin)
    assert counts(second) == [1, 1, 1, 0, 0, 0] and second["revision"] != first["revision"], second
    after = docs(w, "guide", admin)
    assert after["setup.md"]["id"] == before["setup.md"]["id"]
    assert after["how-to.md"]["id"] == before["usage.md"]["id"]
    assert found(w, "okapi", "guide", admin) == ["guide/setup.md"]
    assert found(w, "tapir", "guide", admin) == ["guide/how-to.md"]

    git(repo, "rm", "-q", "docs/faq.md")
    push(repo)
    assert counts(sync(w, s["id"], admin)) == [0, 0, 0, 1, 2, 0]
    assert found(w, "axolotl", "guide", admin) == []

    # A remote caller names no place on the server's disk: a folder, or a repository by path.
    for body in ({"kind": "folder", "path": str(w.root)}, {"kind": "folder", "path": "/no/such/dir"},
                 {"kind": "git", "url": str(w.gitsrv.root / "guide.git")}):
        refused(call(w, "POST", f"/api/v1/knowledge-bases/{kb['id']}/sources", admin, json=body), 403,
                "machine's owner")
    assert len(data(call(w, "GET", "/api/v1/knowledge-bases/guide/sources", admin))) == 1


def test_a_private_repository_and_its_credential(world):
    w = world
    w.gitsrv.repo("private/vault.git", {"plan.md": "# Plan\nThe narwhal project.\n"})
    new_kb(w, "vault")
    url = w.gitsrv.url("private/vault.git")
    s = add(w, "vault", {"kind": "git", "url": url})
    # Without the credential the sync fails at the source: 502, the reason, a failed report.
    r = refused(call(w, "POST", f"/api/v1/sources/{s['id']}/sync"), 502)
    assert r["error_code"] == "UPSTREAM_FAILED", r
    [report] = data(call(w, "GET", f"/api/v1/sources/{s['id']}/reports"))
    assert report["status"] == "failed" and report["error"], report
    assert data(call(w, "GET", f"/api/v1/sources/{s['id']}"))["failures"] == 1
    assert gauge(metrics(w), "quarry_source_sync_consecutive_failures", s["id"]) == 1

    # The credential: set, used, never shown again.
    p = data(call(w, "PATCH", f"/api/v1/sources/{s['id']}", json={"credential": {"token": REPO_TOKEN}}))
    assert p["has_secret"] is True and REPO_TOKEN not in json.dumps(p), p
    assert counts(sync(w, s["id"])) == [1, 0, 0, 0, 0, 0]
    assert found(w, "narwhal", "vault") == ["vault/plan.md"]
    got = data(call(w, "GET", f"/api/v1/sources/{s['id']}"))
    assert got["failures"] == 0 and got["last_error"] is None, got
    assert gauge(metrics(w), "quarry_source_sync_consecutive_failures", s["id"]) == 0
    # Attached with it in one request too.
    s2 = add(w, "vault", {"kind": "git", "url": url, "branch": "main",
                          "credential": {"token": REPO_TOKEN, "username": TOKEN_USER}})
    assert s2["has_secret"] is True
    refused(call(w, "POST", "/api/v1/knowledge-bases/vault/sources",
                 json={"kind": "git", "url": url, "credential": {"token": REPO_TOKEN, "colour": 1}}), 400, "colour")
    # Forgotten: the next sync is refused again.
    p = data(call(w, "PATCH", f"/api/v1/sources/{s['id']}", json={"credential": None}))
    assert p["has_secret"] is False, p
    refused(call(w, "POST", f"/api/v1/sources/{s['id']}/sync"), 502)
    # Nowhere: not in an answer, the audit log, the metrics, the server's log or the data
    # directory.
    everything = json.dumps(audit(w)) + metrics(w) + w.srv.stderr()
    everything += json.dumps(data(call(w, "GET", "/api/v1/knowledge-bases/vault/sources")))
    assert REPO_TOKEN not in everything
    for p in w.home.home.rglob("*"):
        if p.is_file() and p.stat().st_size < 50 << 20:
            assert REPO_TOKEN.encode() not in p.read_bytes(), p


def test_a_website_through_its_sitemap(world):
    """The other remote kinds take the same REST surface: a site's pages, as its sitemap lists
    them and its robots.txt allows, attached by a remote caller."""
    w = world
    admin = w.tok("admin")
    pages: dict[str, str] = {}

    class Site(BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            kind = "application/xml" if self.path.endswith(".xml") else (
                "text/plain" if self.path == "/robots.txt" else "text/html")
            data_ = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data_)))
            self.end_headers()
            self.wfile.write(data_)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"

    def page(title: str, text: str) -> str:
        return f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"

    def sitemap(*paths: str) -> str:
        urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
        return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'

    try:
        pages.update({
            "/robots.txt": "User-agent: *\nDisallow: /private/\n",
            "/docs/intro": page("Intro", "The tapir introduction."),
            "/docs/travel": page("Travel", "Economy kinkajou class."),
            "/private/salaries": page("Salaries", "The secret marmot figures."),
            "/sitemap.xml": sitemap("/docs/intro", "/docs/travel", "/private/salaries"),
        })
        new_kb(w, "website", admin)
        s = add(w, "website", {"kind": "site", "sitemap": f"{base}/sitemap.xml"}, admin)
        assert s["location"] == {"kind": "site", "sitemap": f"{base}/sitemap.xml"}, s
        first = sync(w, s["id"], admin)
        assert counts(first)[:2] == [2, 0] and "private/salaries" in json.dumps(first), first
        assert found(w, "tapir", "website", admin) == ["website/docs/intro.html"]
        assert found(w, "marmot", "website", admin) == []
        before = docs(w, "website", admin)
        pages["/docs/intro"] = page("Intro", "The okapi introduction.")
        pages["/sitemap.xml"] = sitemap("/docs/intro")
        assert counts(sync(w, s["id"], admin))[:4] == [0, 1, 0, 1]
        assert docs(w, "website", admin)["docs/intro.html"]["id"] == before["docs/intro.html"]["id"]
        assert found(w, "okapi", "website", admin) == ["website/docs/intro.html"]
        assert found(w, "kinkajou", "website", admin) == []
    finally:
        httpd.shutdown()


def test_a_sync_already_running_is_a_conflict(world):
    w = world
    w.gitsrv.repo("slow.git", {"a.md": "# A\nSlow sloth.\n"})
    new_kb(w, "slow")
    s = add(w, "slow", {"kind": "git", "url": w.gitsrv.url("slow.git")})
    w.gitsrv.seen.clear()
    w.gitsrv.slow = 2.0
    answers: list[requests.Response] = []
    t = threading.Thread(target=lambda: answers.append(call(w, "POST", f"/api/v1/sources/{s['id']}/sync")))
    try:
        t.start()
        assert w.gitsrv.seen.wait(30), "the first sync never reached the repository"
        refused(call(w, "POST", f"/api/v1/sources/{s['id']}/sync"), 409, "already running")
    finally:
        t.join(120)
        w.gitsrv.slow = 0.0
    assert answers and answers[0].status_code == 200, answers[0].text if answers else "no answer"
    assert counts(answers[0].json()["data"]["report"]) == [1, 0, 0, 0, 0, 0]


def test_bad_inputs_change_nothing(world):
    w = world
    new_kb(w, "strict")
    folder = w.root / "strict-folder"
    write(folder, {"a.md": "# A\n"})
    path = "/api/v1/knowledge-bases/strict/sources"
    url = w.gitsrv.url("guide.git")
    missing = str(uuid.uuid4())
    # Unknown knowledge base, unknown source.
    refused(call(w, "GET", "/api/v1/knowledge-bases/nope/sources"), 404, "not found")
    refused(call(w, "POST", "/api/v1/knowledge-bases/nope/sources", json={"kind": "git", "url": url}), 404, "not found")
    for method, suffix in (("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/sync"), ("GET", "/reports")):
        body = {"json": {"mask": "*.md"}} if method == "PATCH" else {}
        refused(call(w, method, f"/api/v1/sources/{missing}{suffix}", **body), 404, "not found")
    # Bad locations, fields and values.
    for body, fragment in (
        ({"kind": "git", "url": "not a url"}, "unsupported Git location"),
        ({"kind": "git", "url": "ftp://example.com/r.git"}, "unsupported Git location"),
        ({"kind": "git", "url": "https://"}, ""),
        ({"kind": "git", "url": "https://user:pw@example.com/r.git"}, "must not carry a user name or password"),
        ({"kind": "git", "url": url, "branch": "-x"}, "invalid branch"),
        ({"kind": "git", "url": url, "path": "../up"}, "invalid folder"),
        ({"kind": "git"}, "needs \"url\""),
        ({"kind": "svn", "url": url}, "unknown source kind"),
        ({"url": url}, "kind"),
        ({"kind": "folder", "path": "relative/dir"}, "absolute"),
        ({"kind": "folder", "path": str(folder / "nope")}, "not a directory"),
        ({"kind": "folder", "path": str(folder), "url": url}, "does not take \"url\""),
        ({"kind": "git", "url": url, "sitemap": url}, "does not take \"sitemap\""),
        ({"kind": "site"}, "needs \"sitemap\""),
        ({"kind": "site", "sitemap": "http://127.0.0.1:9/"}, "not its sitemap"),
        ({"kind": "s3", "url": "https://bucket"}, "invalid S3 location"),
        ({"kind": "webdav", "url": "https://user:pw@dav.example.com/x/"}, "user name or password"),
        ({"kind": "git", "url": url, "interval_seconds": 30}, "at least 60 seconds"),
        ({"kind": "git", "url": url, "interval_seconds": -5}, "interval_seconds"),
        ({"kind": "git", "url": url, "mask": " , "}, "file mask is empty"),
        ({"kind": "git", "url": url, "colour": "red"}, "colour"),
    ):
        r = call(w, "POST", path, json=body)
        refused(r, 400, fragment)
    refused(call(w, "POST", path, data="kind=git"), 415, "application/json")
    assert data(call(w, "GET", path)) == []

    s = add(w, "strict", {"kind": "folder", "path": str(folder)})
    sp = f"/api/v1/sources/{s['id']}"
    for body, fragment in (
        ({}, "nothing to change"),
        ({"interval_seconds": 59}, "at least 60 seconds"),
        ({"interval_seconds": "1h"}, "interval_seconds"),
        ({"kind": "git"}, "kind"),
        ({"credential": {"username": "x"}}, "token"),
    ):
        refused(call(w, "PATCH", sp, json=body), 400, fragment)
    refused(call(w, "GET", f"{sp}/reports", params={"limit": 0}), 400, "limit")
    refused(call(w, "GET", f"{sp}/reports", params={"limit": "many"}), 400, "limit")
    refused(call(w, "DELETE", sp, params={"keep_documents": "maybe"}), 400, "keep_documents")
    assert data(call(w, "GET", sp)) == s, "nothing changed"
    refused(call(w, "PUT", sp, json={}), 405)


def test_other_knowledge_bases_and_tenants_see_nothing(world):
    w = world
    # A default-space source, which acme's tokens must not find.
    folder = w.root / "private-handbook"
    write(folder, {"salaries.md": "# Salaries\nThe wombat bonus.\n"})
    new_kb(w, "internal")
    mine = add(w, "internal", {"kind": "folder", "path": str(folder)})
    sync(w, mine["id"])
    theirs = w.acme["source"]

    for key in ("admin", "docs_only", "read_only"):
        t = w.tok(key)
        # Another space's source and knowledge base: the 404 of a missing one.
        nobody = str(uuid.uuid4())
        missing = refused(call(w, "GET", f"/api/v1/sources/{nobody}", t), 404)
        other = refused(call(w, "GET", f"/api/v1/sources/{mine['id']}", t), 404)
        assert other == {**missing, "detail": missing["detail"].replace(nobody, mine["id"])}, (other, missing)
        for method, suffix in (("POST", "/sync"), ("GET", "/reports"), ("DELETE", "")):
            refused(call(w, method, f"/api/v1/sources/{mine['id']}{suffix}", t), 404)
        refused(call(w, "PATCH", f"/api/v1/sources/{mine['id']}", t, json={"mask": "*.md"}), 404)
        refused(call(w, "GET", "/api/v1/knowledge-bases/internal/sources", t), 404)
    # A token limited to `docs` does not see the sources of `other`, of its own space.
    docs_only = w.tok("docs_only")
    refused(call(w, "GET", f"/api/v1/sources/{theirs}", docs_only), 404)
    refused(call(w, "GET", "/api/v1/knowledge-bases/other/sources", docs_only), 404)
    refused(call(w, "POST", "/api/v1/knowledge-bases/other/sources", docs_only,
                 json={"kind": "git", "url": w.gitsrv.url("guide.git")}), 404)
    # acme's admin sees acme's source.
    assert data(call(w, "GET", f"/api/v1/sources/{theirs}", w.tok("admin")))["knowledge_base"] == "other"
    # A read-only token changes nothing; its 403 reads the same whatever it names (its own
    # knowledge base, one that does not exist, another tenant's), so it tells nothing.
    ro = w.tok("read_only")
    body = {"kind": "git", "url": w.gitsrv.url("guide.git")}
    details = {
        refused(call(w, "POST", f"/api/v1/knowledge-bases/{kb}/sources", ro, json=body), 403)["detail"]
        for kb in ("docs", "nope", "internal", w.acme["docs"])
    }
    assert len(details) == 1, details
    [detail] = details
    assert "internal" not in detail and "docs" not in detail and "wombat" not in detail, detail
    refused(call(w, "POST", f"/api/v1/sources/{theirs}/sync", ro), 403)
    refused(call(w, "PATCH", f"/api/v1/sources/{theirs}", ro, json={"mask": "*.md"}), 403)
    refused(call(w, "DELETE", f"/api/v1/sources/{theirs}", ro), 403)
    assert data(call(w, "GET", f"/api/v1/sources/{theirs}", ro))["documents"] == 1
    # Metrics: each space's admin sees its own sources' gauges only.
    acme_metrics = metrics(w, w.tok("admin"))
    owner_metrics = metrics(w)
    assert gauge(acme_metrics, "quarry_source_sync_lag_seconds", theirs) is not None
    assert gauge(acme_metrics, "quarry_source_sync_lag_seconds", mine["id"]) is None
    assert 'knowledge_base="internal"' not in acme_metrics
    assert gauge(owner_metrics, "quarry_source_sync_lag_seconds", mine["id"]) is not None
    assert gauge(owner_metrics, "quarry_source_sync_lag_seconds", theirs) is None
    refused(call(w, "GET", "/metrics", ro), 403)


def test_the_audit_log_and_metrics_record_syncs(world):
    w = world
    folder = w.root / "audited"
    write(folder, {"one.md": "# One\nThe ibis.\n", "two.md": "# Two\nThe egret.\n"})
    new_kb(w, "audited")
    s = add(w, "audited", {"kind": "folder", "path": str(folder), "mask": "*.md"})
    report = sync(w, s["id"])
    (folder / "two.md").unlink()
    second = sync(w, s["id"])
    data(call(w, "PATCH", f"/api/v1/sources/{s['id']}", json={"interval_seconds": 120}))

    events = [e for e in audit(w, action="write") if e["detail"].get("source") == s["id"]]
    by_target: dict[str, list[dict]] = {}
    for e in events:
        by_target.setdefault(e["target"], []).append(e)
    syncs = by_target["POST /api/v1/sources/{source_id}/sync"]
    assert [e["detail"]["sync"]["report"] for e in syncs] == [second["id"], report["id"]], syncs
    newest = syncs[0]
    assert newest["outcome"] == "ok" and newest["detail"]["status"] == 200, newest
    assert newest["detail"]["knowledge_base"] == "audited" and newest["detail"]["path"] == f"/api/v1/sources/{s['id']}/sync"
    assert newest["detail"]["sync"]["status"] == "succeeded", newest
    assert newest["detail"]["sync"]["counts"] == second["counts"], newest
    assert "details" not in newest["detail"]["sync"] and "ibis" not in json.dumps(events)
    [added] = by_target["POST /api/v1/knowledge-bases/{id}/sources"]
    assert added["detail"]["location"] == {"kind": "folder", "path": str(folder)}, added
    assert added["detail"]["mask"] == "*.md" and added["detail"]["status"] == 201, added
    [changed] = by_target["PATCH /api/v1/sources/{source_id}"]
    assert changed["detail"]["interval_seconds"] == 120, changed
    # A failed sync is recorded with its status too.
    shutil.rmtree(folder)
    refused(call(w, "POST", f"/api/v1/sources/{s['id']}/sync"), 502, "does not exist")
    failed = [e for e in audit(w, action="write", outcome="error") if e["detail"].get("source") == s["id"]]
    assert failed and failed[0]["detail"]["sync"]["status"] == "failed", failed
    assert failed[0]["detail"]["status"] == 502 and "does not exist" in failed[0]["detail"]["sync"]["error"]
    data(call(w, "DELETE", f"/api/v1/sources/{s['id']}"))
    [removed] = [e for e in audit(w, action="write") if e["detail"].get("source") == s["id"]
                 and e["target"] == "DELETE /api/v1/sources/{source_id}"]
    assert removed["detail"]["documents"] == 1 and removed["detail"]["documents_kept"] is False, removed

    # /metrics: the lag since the last successful sync, and failures in a row.
    folder.mkdir()
    write(folder, {"three.md": "# Three\nThe crane.\n"})
    s2 = add(w, "audited", {"kind": "folder", "path": str(folder)})
    text = metrics(w)
    assert "# TYPE quarry_source_sync_lag_seconds gauge" in text, text[-2000:]
    lag = gauge(text, "quarry_source_sync_lag_seconds", s2["id"])
    assert lag is not None and 0 <= lag < 120, "never synced: the lag counts from when it was attached"
    sync(w, s2["id"])
    time.sleep(1.1)
    line = next(ln for ln in metrics(w).splitlines()
                if ln.startswith("quarry_source_sync_lag_seconds{") and s2["id"] in ln)
    assert f'source="{s2["id"]}",knowledge_base="audited"' in line, line
    assert 1.0 <= float(line.rsplit(" ", 1)[1]) < 60, line
    assert gauge(metrics(w), "quarry_source_sync_consecutive_failures", s2["id"]) == 0


def test_a_scheduled_sync_is_in_the_audit_log(world):
    """A source with a schedule is due at once: the server's node syncs it on its own (it
    looks every 15 s) and records the sync in the source's space, with no user."""
    w = world
    admin = w.tok("admin")
    w.gitsrv.repo("scheduled.git", {"notes.md": "# Notes\nThe kiwi schedule.\n"})
    new_kb(w, "scheduled", admin)
    s = add(w, "scheduled", {"kind": "git", "url": w.gitsrv.url("scheduled.git"), "interval_seconds": 60}, admin)
    assert s["interval_seconds"] == 60 and s["next_sync_at"], s
    deadline = time.monotonic() + 60
    while not data(call(w, "GET", f"/api/v1/sources/{s['id']}", admin))["last_success_at"]:
        assert time.monotonic() < deadline, f"never synced on its schedule\n{w.srv.stderr()[-3000:]}"
        time.sleep(0.5)
    [report] = data(call(w, "GET", f"/api/v1/sources/{s['id']}/reports", admin))
    assert counts(report) == [1, 0, 0, 0, 0, 0], report
    got = data(call(w, "GET", f"/api/v1/sources/{s['id']}", admin))
    assert got["next_sync_at"] >= report["finished_at"] + 60_000 - 1000, got
    # acme's admin reads it in acme's log; the default space's log does not hold it.
    deadline = time.monotonic() + 10
    while True:
        r = call(w, "GET", "/api/v1/audit", admin, params={"action": "source.sync"})
        assert r.status_code == 200, r.text
        events = [e for e in r.json()["data"]["items"] if e["target"] == s["id"]]
        if events or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    [event] = events
    assert event["outcome"] == "ok" and event["user"] is None and event["token_id"] is None, event
    assert event["detail"]["scheduled"] is True and event["detail"]["knowledge_base"] == "scheduled", event
    assert event["detail"]["sync"]["report"] == report["id"] and event["detail"]["sync"]["counts"] == report["counts"]
    assert not [e for e in audit(w, action="source.sync") if e["target"] == s["id"]]
    assert gauge(metrics(w, admin), "quarry_source_sync_lag_seconds", s["id"]) < 60


def test_a_remote_admin_reaches_no_address_the_guard_refuses(world):
    """The outbound address guard for sources: acme's admin (a token, not the machine's owner)
    is refused a source at the cloud metadata address, a private address, or a loopback
    address the server does not allow-list (it allows 127.0.0.1 only) — a 403 saying why —
    and nothing is created; the machine's owner is not guarded."""
    w = world
    admin = w.tok("admin")
    new_kb(w, "guarded", admin)
    path = "/api/v1/knowledge-bases/guarded/sources"
    port = w.gitsrv.port
    for body, why in (
        ({"kind": "site", "sitemap": "http://169.254.169.254/latest/meta-data/sitemap.xml"},
         "169.254.169.254 is the cloud metadata address"),
        ({"kind": "git", "url": "http://[::ffff:169.254.169.254]/r.git"}, "embeds the IPv4 address 169.254.169.254"),
        ({"kind": "s3", "url": "s3://bucket", "endpoint": "http://169.254.169.254"}, "cloud metadata address"),
        ({"kind": "webdav", "url": "http://10.1.2.3/dav/"}, "10.1.2.3 is a private address"),
        ({"kind": "git", "url": f"http://[::1]:{port}/guide.git"}, "::1 is a loopback address"),
        ({"kind": "git", "url": f"http://127.0.0.2:{port}/guide.git"}, "127.0.0.2 is a loopback address"),
    ):
        r = refused(call(w, "POST", path, admin, json=body), 403, "refused: ", why)
        assert r["error_code"] == "FORBIDDEN", r
    assert data(call(w, "GET", path, admin)) == []
    # The allow-listed loopback address is reachable for the admin; anything for the owner
    # (a request without a token, in the default space).
    assert add(w, "guarded", {"kind": "git", "url": w.gitsrv.url("guide.git")}, admin)
    assert len(data(call(w, "GET", path, admin))) == 1
    new_kb(w, "owned")
    assert add(w, "owned", {"kind": "git", "url": f"http://127.0.0.2:{port}/guide.git"})
    assert add(w, "owned", {"kind": "site", "sitemap": "http://169.254.169.254/latest/sitemap.xml"})


def test_control_characters_in_synced_names_never_reach_the_terminal(quarry_home, tmp_path):
    """Issue 65 item 7: a synced file named ``ctl<ESC>[2Jclear.md`` cleared the admin's screen
    through ``quarry source status``; the CLI prints such names escaped."""
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "ctl\x1b[2Jclear.md").write_text("# Odd\n\nan odd name\n")
    (folder / "bell\x07.md").write_text("# Bell\n\nanother\n")
    r = quarry_home.run("kb", "create", "odd")
    assert r.returncode == 0, r.stderr
    r = quarry_home.run("source", "add", "odd", "--folder", str(folder), "--json")
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["id"]
    for args in (("source", "sync", sid), ("source", "status", sid), ("kb", "docs", "odd")):
        r = quarry_home.run(*args)
        assert r.returncode == 0, (args, r.stderr)
        shown = r.stdout + r.stderr
        assert "\x1b" not in shown and "\x07" not in shown, (args, shown)
        if args[1] == "status":
            assert "ctl\\u{1b}[2Jclear.md" in shown, (args, shown)
