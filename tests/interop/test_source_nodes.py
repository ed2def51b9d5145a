"""A source synced by several `quarry serve` nodes over one PostgreSQL database and one S3
bucket (issue 43 item 5): one node runs a source's sync at a time (its lease, fenced like
every job), the others see the results through the change feed, and a node killed mid-sync
leaves a sync that another node resumes — nothing lost, nothing duplicated, no document
half-applied.

The source is a real web site (a loopback HTTP server whose every page takes a while to
answer) read through its sitemap, so a sync lasts long enough to kill its node
deterministically: once its running report shows documents applied, node A gets SIGKILL;
node B's scheduler takes the sync over once the short lease (QUARRY_SOURCE_LEASE_SECS)
lapses. Then every document is checked on every node (the list, each document's text, a
keyword search for each), the reports, and the file count in the database. Writes then go
on, spread over time and nodes: the site changes and node B syncs it, then node A
(restarted) does, every document checked on every node each time.

PostgreSQL only (``QUARRY_TEST_BACKEND=postgres``): the embedded store is one machine's.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from conftest import backend, db_rows, make_home, second_node, start_server, wait_ready
from kb_support import api, create_kb

pytestmark = pytest.mark.skipif(backend() != "postgres", reason="several nodes need the PostgreSQL backend")

PAGES = 30
DELAY = 0.35  # seconds each page takes to answer: a first sync lasts about 10 s
LEASE = 4  # QUARRY_SOURCE_LEASE_SECS


class Site:
    """A web site on loopback: `/sitemap.xml` lists the pages (each with its `<lastmod>`),
    every page answers after `delay` seconds, `/robots.txt` is missing. `pages` maps a path
    (`p07`) to (lastmod, word): a page's bytes are made of its word alone, so the same word at
    another path is the same page moved."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, str]] = {}
        self.delay = 0.0
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("?", 1)[0]
                with site.lock:
                    pages = dict(site.pages)
                    delay = site.delay
                if path == "/sitemap.xml":
                    urls = "".join(f"<url><loc>{site.base}/{p}</loc><lastmod>{lm}</lastmod></url>"
                                   for p, (lm, _) in sorted(pages.items()))
                    body = ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                            f"{urls}</urlset>").encode()
                    kind = "application/xml"
                elif path.lstrip("/") in pages:
                    time.sleep(delay)
                    word = pages[path.lstrip("/")][1]
                    body = (f"<html><head><title>The {word} page</title></head><body><h1>{word}</h1>"
                            f"<p>The {word} survey counted the herons.</p></body></html>").encode()
                    kind = "text/html"
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the node that asked was killed

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def set(self, name: str, lastmod: str, word: str) -> None:
        with self.lock:
            self.pages[name] = (lastmod, word)

    def remove(self, name: str) -> None:
        with self.lock:
            del self.pages[name]

    def stop(self) -> None:
        self.httpd.shutdown()


def ok(r: requests.Response, status: int = 200):
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["success"] is True, body
    return body["data"]


def reports(srv, source_id: str) -> list[dict]:
    return ok(api(srv, "GET", f"/api/v1/sources/{source_id}/reports", params={"limit": 10}))


def docs_by_name(srv, kb: str) -> dict[str, dict]:
    return {d["file_name"]: d for d in ok(api(srv, "GET", f"/api/v1/knowledge-bases/{kb}/documents"))}


def found(srv, kb: str, word: str) -> list[str]:
    r = api(srv, "POST", "/search", json={"query": word, "collection": kb, "limit": 10})
    assert r.status_code == 200, r.text
    return sorted(h["file"] for h in r.json()["results"])


def file_counts(home, source_id: str) -> tuple[int, int]:
    """(files, distinct paths) the source holds in the database."""
    [(n, distinct)] = db_rows(home.env, home.home,
                              "SELECT count(*), count(DISTINCT source_path) FROM kb_files "
                              f"WHERE source_id = (SELECT id FROM sources WHERE uid = '{source_id}')")
    return n, distinct


def check_everywhere(nodes: list, kb: str, expected: dict[str, str], timeout: float = 180) -> dict[str, str]:
    """On every node: exactly the `expected` documents (file name -> its word), each ready,
    its text carrying its word, and a keyword search for the word finding it and only it.
    Returns the documents' ids by name (the same on every node)."""
    ids: dict[str, str] = {}
    for srv in nodes:
        deadline = time.monotonic() + timeout
        while True:
            docs = docs_by_name(srv, kb)
            if set(docs) == set(expected) and all(d["status"] in ("ready", "failed") for d in docs.values()):
                break
            assert time.monotonic() < deadline, (
                f"{srv.base}: documents never settled to {sorted(expected)}: "
                f"{ {n: d['status'] for n, d in docs.items()} }\n{srv.stderr()[-3000:]}")
            time.sleep(0.3)
        assert all(d["status"] == "ready" for d in docs.values()), {n: d for n, d in docs.items() if d["status"] != "ready"}
        for name, d in docs.items():
            if name in ids:
                assert ids[name] == d["id"], f"{name}: ids differ between nodes"
            ids[name] = d["id"]
            md = ok(api(srv, "GET", f"/api/v1/knowledge-bases/{kb}/documents/{d['id']}/markdown"))
            assert expected[name] in md["markdown"], (srv.base, name, md["markdown"][:500])
        pending = dict(expected)
        while pending:
            for name, word in list(pending.items()):
                if found(srv, kb, word) == [f"{kb}/{name}"]:
                    del pending[name]
            if not pending:
                break
            assert time.monotonic() < deadline, f"{srv.base}: search never finds {sorted(pending)}\n{srv.stderr()[-3000:]}"
            time.sleep(0.3)
    return ids


def wait_report(srv, source_id: str, not_id: str | None, timeout: float = 120) -> dict:
    """The newest report once it is another than `not_id` and finished."""
    deadline = time.monotonic() + timeout
    while True:
        rs = reports(srv, source_id)
        if rs and rs[0]["id"] != not_id and rs[0]["status"] != "running":
            return rs[0]
        assert time.monotonic() < deadline, f"no finished sync after {not_id}: {rs[:2]}\n{srv.stderr()[-3000:]}"
        time.sleep(0.2)


@pytest.fixture
def cluster(quarry_bin: Path, corpus: Path, tmp_path: Path):
    env = {"QUARRY_SOURCE_LEASE_SECS": str(LEASE), "QUARRY_JOB_LEASE_SECS": "5", "QUARRY_OCR": "off"}
    a_home = make_home(quarry_bin, corpus, tmp_path / "a", env=env)
    b_home = second_node(a_home, tmp_path / "b")
    site = Site()
    state = {"a_home": a_home, "b_home": b_home, "site": site, "root": tmp_path, "servers": []}

    def start(home, name: str):
        srv = start_server(home, logdir=tmp_path / f"logs-{name}-{len(state['servers'])}")
        state["servers"].append(srv)
        wait_ready(srv)
        return srv

    state["start"] = start
    try:
        yield state
    finally:
        for s in state["servers"]:
            if s.proc.poll() is None:
                s.stop()
        site.stop()


def test_a_node_killed_mid_sync_leaves_a_sync_another_node_finishes(cluster):
    site: Site = cluster["site"]
    for i in range(PAGES):
        site.set(f"p{i:02d}", "2025-01-01", f"kestrel{i:02d}x")
    a = cluster["start"](cluster["a_home"], "a")
    b = cluster["start"](cluster["b_home"], "b")
    kb = create_kb(a, "site")["name"]
    source = ok(api(a, "POST", f"/api/v1/knowledge-bases/{kb}/sources",
                    json={"kind": "site", "sitemap": f"{site.base}/sitemap.xml"}), 201)
    sid = source["id"]

    # Node A syncs; its answer never comes (it is killed).
    site.delay = DELAY
    answers: list = []

    def sync_on_a():
        try:
            answers.append(api(a, "POST", f"/api/v1/sources/{sid}/sync", timeout=300))
        except requests.RequestException as e:
            answers.append(e)

    t = threading.Thread(target=sync_on_a, daemon=True)
    t.start()
    # Once its running report (read on node B: the store is shared) shows documents applied…
    deadline = time.monotonic() + 60
    while True:
        rs = reports(b, sid)
        if rs and rs[0]["status"] == "running" and rs[0]["counts"]["added"] >= 1:
            running = rs[0]
            break
        assert time.monotonic() < deadline, f"A's sync never showed progress: {rs}\n{a.stderr()[-3000:]}"
        time.sleep(0.05)
    # … a sync asked of node B meanwhile is refused, saying another node runs it…
    r = api(b, "POST", f"/api/v1/sources/{sid}/sync")
    assert r.status_code == 409, r.text
    assert "already running" in r.json()["detail"] and "another" in r.json()["detail"], r.text
    # … and node A is killed mid-sync.
    a.proc.kill()
    a.proc.wait(timeout=30)
    t.join(30)
    assert answers and not isinstance(answers[0], requests.Response), answers
    applied_by_a = file_counts(cluster["a_home"], sid)[0]
    assert 1 <= applied_by_a < PAGES, f"A applied {applied_by_a} of {PAGES} before it died"
    print(f"node A applied {applied_by_a} of {PAGES} pages before it was killed "
          f"(its report last said {running['counts']['added']})")

    # Node B's scheduler resumes it once the lease lapses, from what the store knows.
    done = wait_report(b, sid, running["id"], timeout=LEASE + 90)
    assert done["status"] == "succeeded", done
    c = done["counts"]
    assert (c["added"], c["unchanged"], c["changed"], c["deleted"], c["renamed"]) == (
        PAGES - applied_by_a, applied_by_a, 0, 0, 0), (applied_by_a, done)
    [newest, dead, *_] = reports(b, sid)
    assert newest["id"] == done["id"] and dead["id"] == running["id"]
    assert dead["status"] == "failed" and dead["error"].startswith("interrupted"), dead
    assert dead["finished_at"] is not None, "closed when the next sync started"
    assert 1 <= dead["counts"]["added"] <= applied_by_a, (dead, applied_by_a)
    # Exactly one file per page: nothing lost, nothing twice.
    assert file_counts(cluster["b_home"], sid) == (PAGES, PAGES)
    src = ok(api(b, "GET", f"/api/v1/sources/{sid}"))
    assert src["documents"] == PAGES and src["failures"] == 0, src

    # Node A comes back; every document on every node.
    a = cluster["start"](cluster["a_home"], "a")
    expected = {f"p{i:02d}.html": f"kestrel{i:02d}x" for i in range(PAGES)}
    ids = check_everywhere([a, b], kb, expected)

    # Writes go on, over time and over nodes. On B: a page edited, one removed, one added.
    site.delay = 0.05
    site.set("p03", "2025-02-01", "osprey03y")
    site.remove("p05")
    site.set("p99", "2025-02-01", "kestrel99x")
    report = ok(api(b, "POST", f"/api/v1/sources/{sid}/sync", timeout=300))["report"]
    c = report["counts"]
    assert (c["added"], c["changed"], c["deleted"], c["renamed"]) == (1, 1, 1, 0), report
    expected["p03.html"] = "osprey03y"
    del expected["p05.html"]
    expected["p99.html"] = "kestrel99x"
    after_b = check_everywhere([a, b], kb, expected)
    assert after_b["p03.html"] == ids["p03.html"], "an edited page keeps its document"
    for srv in (a, b):
        assert found(srv, kb, "kestrel05x") == [] and found(srv, kb, "kestrel03x") == []

    # Then on A (restarted): a page moved (same bytes at a new path) and one edited.
    time.sleep(1)
    site.remove("p07")
    site.set("p07-moved", "2025-04-01", "kestrel07x")
    site.set("p11", "2025-03-01", "osprey11y")
    report = ok(api(a, "POST", f"/api/v1/sources/{sid}/sync", timeout=300))["report"]
    c = report["counts"]
    assert (c["added"], c["changed"], c["deleted"], c["renamed"]) == (0, 1, 0, 1), report
    expected["p11.html"] = "osprey11y"
    expected["p07-moved.html"] = expected.pop("p07.html")
    after_a = check_everywhere([a, b], kb, expected)
    assert after_a["p07-moved.html"] == ids["p07.html"], "a moved page keeps its document"
    assert after_a["p11.html"] == ids["p11.html"]
    assert file_counts(cluster["b_home"], sid) == (len(expected), len(expected))
    latest = reports(a, sid)
    assert [r["status"] for r in latest[:4]] == ["succeeded", "succeeded", "succeeded", "failed"], latest[:4]
