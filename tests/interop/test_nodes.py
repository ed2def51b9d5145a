"""Several `quarry serve` nodes over one PostgreSQL database and one S3 bucket (issue 25).

Each node has its own data directory (its own keyword index) and follows the store's change
feed; writes on one node become searchable on the other. Runs in the PostgreSQL pass
(``QUARRY_TEST_BACKEND=postgres``): the embedded store is one machine's by design.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
import requests
from mcp import Client

from conftest import backend, db_rows, make_home, second_node, settled, start_server, wait_ready
from kb_support import DOCS, TERMINAL, api, create_kb, upload, upload_response, wait_for

pytestmark = pytest.mark.skipif(backend() != "postgres", reason="several nodes need the PostgreSQL backend")


@pytest.fixture(scope="module")
def nodes(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("nodes")
    # No self-check here: these tests show what following the feed does on its own (the
    # self-check has a test of its own).
    a = make_home(quarry_bin, corpus, root / "a", env={"QUARRY_INDEX_CHECK_SECS": "0"})
    b = second_node(a, root / "b")
    srv_a = start_server(a, logdir=root / "logs-a")
    srv_b = start_server(b, logdir=root / "logs-b")
    state = {"a": srv_a, "b": srv_b, "home_a": a, "home_b": b, "root": root}
    try:
        wait_ready(srv_a)
        wait_ready(srv_b)
        yield state
    finally:
        # A test may have restarted a node (state holds the new process).
        for s in (srv_a, srv_b, state["a"], state["b"]):
            if s.proc.poll() is None:
                s.stop()


def search(srv, query: str, headers: dict | None = None, limit: int = 50) -> requests.Response:
    return api(srv, "POST", "/search", json={"query": query, "limit": limit}, headers=headers or {})


def result_files(r: requests.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [x["file"] for x in r.json()["results"]]


def quka(srv, method: str, params: dict, headers: dict | None = None) -> requests.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return requests.post(srv.url("/api/v1/mcp"), data=json.dumps(body),
                         headers={"Content-Type": "application/json", **(headers or {})}, timeout=60)


def test_the_folder_collection_indexed_before_the_servers_is_searchable_on_both(nodes):
    """B's index was built from the store (a snapshot), not from files on B's disk."""
    for srv in (nodes["a"], nodes["b"]):
        r = search(srv, "journal")
        assert r.status_code == 200, r.text
        assert result_files(r), f"{srv.base}: nothing found"


def test_uploads_on_a_are_searchable_on_b_within_two_seconds(nodes):
    """Catch-up: 200 documents uploaded through A, each found by keyword search on B; the
    lag from A reporting it ready to B finding it, p99 under 2 s."""
    a, b = nodes["a"], nodes["b"]
    kb = create_kb(a, "catch-up")
    lags: list[float] = []
    for batch in range(20):
        tag = f"zephyrbatch{batch:02d}"
        files = [(f"n{batch:02d}-{i}.md", f"# Note {batch} {i}\n\n{tag} quokka{batch:02d}x{i} body text.\n".encode())
                 for i in range(10)]
        docs = upload(a, kb["id"], files)
        wait_for(a, kb["id"], [d["id"] for d in docs], {"ready"}, timeout=120)
        t0 = time.monotonic()
        pending = {f"n{batch:02d}-{i}.md" for i in range(10)}
        while pending and time.monotonic() - t0 < 30:
            names = {f.rsplit("/", 1)[-1] for f in result_files(search(b, tag))}
            for name in pending & names:
                lags.append(time.monotonic() - t0)
            pending -= names
            if pending:
                time.sleep(0.02)
        assert not pending, f"batch {batch}: never found on B: {sorted(pending)}\n{b.stderr()[-3000:]}"
    lags.sort()
    p99 = lags[int(len(lags) * 0.99) - 1]
    print(f"catch-up over {len(lags)} uploads: p50 {statistics.median(lags):.3f} s, p99 {p99:.3f} s, max {lags[-1]:.3f} s")
    assert len(lags) == 200
    assert p99 < 2.0, f"p99 catch-up {p99:.3f} s"


def knowledge_files(srv, query: str) -> list[str]:
    """The files `knowledge_search` (the passage index) answers `query` with, at min_score 0,
    through the official SDK in its default mode."""

    async def run():
        async with Client(srv.mcp_url, read_timeout_seconds=60) as c:
            r = await c.call_tool("knowledge_search", {"query": query, "search_mode": "keyword", "min_score": 0})
            assert r.is_error is not True, r
            return [x["knowledge_filename"] for x in (r.structured_content or {}).get("results", [])]

    return anyio.run(run)


def test_single_uploads_spaced_over_both_nodes_are_found_on_every_node(nodes):
    """Issue 41 item 9: documents uploaded one at a time, a second apart, were missing from one
    node's knowledge_search for good — both nodes cut the new document's chunks and the second
    cut replaced the ids the first node had indexed. Singles spread over time and over both
    nodes; every document is checked on every node."""
    a, b = nodes["a"], nodes["b"]
    kb = create_kb(a, "singles")
    words, ids = {}, []
    for i in range(24):
        srv = (a, b)[(i // 2) % 2]  # two on A, two on B, …
        name = f"single-{i:02d}.md"
        word = f"kestrel{i:02d}x"
        [doc] = upload(srv, kb["id"], [(name, f"# Single {i}\n\nOne paragraph about the {word} survey.\n".encode())])
        words[name] = word
        ids.append(doc["id"])
        time.sleep((0.3, 0.9, 1.4)[i % 3])
    # Everything ready in the store (A reads it).
    wait_for(a, kb["id"], ids, {"ready"}, timeout=180)
    for srv, label in ((a, "A"), (b, "B")):
        missing = dict(words)
        deadline = time.monotonic() + 30
        while missing and time.monotonic() < deadline:
            for name, word in list(missing.items()):
                if name in knowledge_files(srv, word):
                    del missing[name]
            if missing:
                time.sleep(0.5)
        assert not missing, f"node {label} never finds {sorted(missing)}\n{srv.stderr()[-3000:]}"


def test_a_node_whose_passages_point_at_replaced_chunks_repairs_itself(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """Issue 41 item 9's self-check: B's passage index is made wrong the way the race made it —
    a document's chunks replaced in the store under new ids, with nothing in the feed — while
    B is down. Restarted without the self-check, B misses the document; with it
    (QUARRY_INDEX_CHECK_SECS), B finds and re-indexes it on its own, and /metrics counts it."""
    a_home = make_home(quarry_bin, corpus, tmp_path / "a")
    b_home = second_node(a_home, tmp_path / "b")
    a = start_server(a_home, logdir=tmp_path / "logs-a")
    b = start_server(b_home.with_env(QUARRY_INDEX_CHECK_SECS="0"), logdir=tmp_path / "logs-b0")
    try:
        kb = create_kb(a, "selfcheck")
        [doc] = upload(a, kb["id"], [("wombat.md", b"# Wombat\n\nThe wombatcheck survey counted burrows.\n")])
        wait_for(a, kb["id"], [doc["id"]], {"ready"}, timeout=120)
        deadline = time.monotonic() + 30
        while "wombat.md" not in knowledge_files(b, "wombatcheck"):
            assert time.monotonic() < deadline, b.stderr()[-3000:]
            time.sleep(0.3)
        b.stop()
        rows = db_rows(a_home.env, a_home.home,
                       "WITH old AS (SELECT k.id FROM chunks k JOIN documents d ON d.id = k.document_id "
                       "WHERE d.body LIKE '%wombatcheck%'), "
                       "moved AS (INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, line_end, hash, page, heading) "
                       "SELECT document_id, seq, byte_start, byte_end, line_start, line_end, hash, page, heading "
                       "FROM chunks WHERE id IN (SELECT id FROM old) RETURNING id) "
                       "DELETE FROM chunks WHERE id IN (SELECT id FROM old) RETURNING id")
        assert rows, "no chunks moved"
        # Without the self-check the node resumes where it stood and never hears of it.
        b = start_server(b_home.with_env(QUARRY_INDEX_CHECK_SECS="0"), logdir=tmp_path / "logs-b1")
        wait_ready(b)
        time.sleep(2)
        assert "wombat.md" not in knowledge_files(b, "wombatcheck"), "the stale index was not stale"
        b.stop()
        b = start_server(b_home.with_env(QUARRY_INDEX_CHECK_SECS="2"), logdir=tmp_path / "logs-b2")
        deadline = time.monotonic() + 60
        while "wombat.md" not in knowledge_files(b, "wombatcheck"):
            assert time.monotonic() < deadline, f"B never repaired its index\n{b.stderr()[-3000:]}"
            time.sleep(0.5)
        metrics = requests.get(b.url("/metrics"), timeout=30).text
        assert "quarry_index_repaired_documents 1" in metrics, [m for m in metrics.splitlines() if "repaired" in m]
        assert "re-indexed documents whose entries differed" in b.stderr()
    finally:
        a.stop()
        b.stop()


def test_the_cli_on_a_fresh_node_directory_builds_its_index_first(nodes):
    """Issue 41 item 10: `quarry search` on a fresh data directory over the shared database said
    "No results found" (exit 0) while `status` showed the documents — after `migrate` that reads
    as data loss. It builds this directory's index from the store first, and says so."""
    a = nodes["a"]
    kb = create_kb(a, "fresh-cli")
    [doc] = upload(a, kb["id"], [("platypus.md", b"# Platypus\n\nThe platypuscli census.\n")])
    wait_for(a, kb["id"], [doc["id"]], {"ready"}, timeout=120)
    fresh = second_node(nodes["home_a"], nodes["root"] / "fresh-cli")
    r = fresh.run("search", "platypuscli", timeout=180)
    assert r.returncode == 0, r.stderr
    assert "platypus.md" in r.stdout, (r.stdout, r.stderr)
    assert "no keyword index yet: indexing" in r.stderr, r.stderr
    # Once built, it is not built again.
    r = fresh.run("search", "platypuscli", timeout=60)
    assert r.returncode == 0 and "platypus.md" in r.stdout and "indexing" not in r.stderr, (r.stdout, r.stderr)


def test_a_note_created_on_a_is_found_on_b_with_its_txid(nodes):
    """Read-your-writes across nodes: create_knowledge on A answers with X-Quarry-Txid; a
    query_knowledge on B presenting it finds the note at once."""
    a, b = nodes["a"], nodes["b"]
    r = quka(a, "tools/call", {"name": "create_knowledge",
                                "arguments": {"content": "The ocelot budget moved to March.", "title": "Ocelot"}})
    assert r.status_code == 200, r.text
    txid = r.headers.get("X-Quarry-Txid")
    assert txid and txid.isdigit(), dict(r.headers)
    r = quka(b, "tools/call", {"name": "query_knowledge", "arguments": {"query": "ocelot budget", "search_mode": "keyword"}},
             headers={"X-Quarry-Txid": txid})
    assert r.status_code == 200, r.text
    assert r.headers.get("X-Quarry-Caught-Up") != "false", dict(r.headers)
    assert "ocelot" in r.text.lower(), r.text
    # A read-only tool's answer carries no position of its own.
    assert "X-Quarry-Txid" not in r.headers, dict(r.headers)
    # A search sent by POST is a read: it presents the position but answers with none.
    r = search(b, "ocelot budget", headers={"X-Quarry-Txid": txid})
    assert r.status_code == 200 and "ocelot" in r.text.lower(), r.text
    assert "X-Quarry-Txid" not in r.headers, dict(r.headers)


def test_a_bad_txid_is_refused_clearly(nodes):
    r = search(nodes["b"], "journal", headers={"X-Quarry-Txid": "yesterday"})
    assert r.status_code == 400, r.text
    assert "X-Quarry-Txid" in r.text


def test_health_ready_says_caught_up(nodes):
    for srv in (nodes["a"], nodes["b"]):
        deadline = time.monotonic() + 10
        while True:
            r = requests.get(srv.url("/health/ready"), timeout=10)
            if r.json().get("caught_up") is True:
                break
            assert time.monotonic() < deadline, r.text
            time.sleep(0.05)
        assert r.status_code == 200 and r.json() == {"ready": True, "caught_up": True}, r.text
        # /health keeps seed 001's shape.
        assert set(requests.get(srv.url("/health"), timeout=10).json()) == {"status", "model_loaded"}
        # The gauges say the same, read again until they do: a write landing between the two
        # requests (an earlier test's background work) puts a caught-up node behind for a moment.
        while True:
            text = requests.get(srv.url("/metrics"), timeout=10).text
            if "quarry_feed_caught_up 1" in text and "quarry_feed_behind_changes 0" in text:
                break
            assert time.monotonic() < deadline, [m for m in text.splitlines() if "feed" in m]
            time.sleep(0.05)


def test_a_wiped_node_rebuilds_and_answers_like_the_other(nodes):
    """B's data directory is wiped while it is down; started again it rebuilds its index from
    the store and answers an English and Chinese query set with A's top 10."""
    a, b, home_b = nodes["a"], nodes["b"], nodes["home_b"]
    kb = create_kb(a, "bilingual")
    files = [("en.md", b"# Package managers\n\nInstall packages with apt, dnf or pacman.\n"),
             ("zh.md", "# 软件包管理\n\n使用 apt 安装软件包，使用 dnf 更新系统。\n".encode()),
             ("mix.md", "# Editors 编辑器\n\nChange the default text editor 更改默认编辑器 with update-alternatives.\n".encode())]
    docs = upload(a, kb["id"], files)
    wait_for(a, kb["id"], [d["id"] for d in docs], {"ready"}, timeout=120)
    queries = ["install packages", "default editor", "journal", "软件包", "默认编辑器", "更新系统"]
    b.stop()
    for sub in ("fts", "passages", "node.id"):
        for p in home_b.home.rglob(sub):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    nodes["b"] = b = start_server(home_b, logdir=nodes["root"] / "logs-b2")
    wait_ready(b)
    for q in queries:
        top_a = result_files(search(a, q, limit=10))
        top_b = result_files(search(b, q, limit=10))
        assert top_a == top_b, f"{q!r}: A {top_a} vs B {top_b}"
        assert top_a, f"{q!r} found nothing"


HANGING = Path(__file__).parent / "upstreams" / "hanging_server.py"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie — killed, not yet reaped by its parent — does not)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


@pytest.mark.anyio
async def test_an_upstream_registered_on_a_is_callable_on_b_and_stops_there_when_disabled_on_a(nodes):
    """The hub across nodes: the registration lives in the database, so B connects it on
    first use (the official SDK in its default mode); disabling it on A stops B's child
    process at once (PostgreSQL NOTIFY), not at B's next request."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    a, b = nodes["a"], nodes["b"]
    r = requests.post(a.url("/api/v1/mcp/servers"), timeout=120,
                      json={"name": "hang-nodes", "transport_type": "stdio", "config": f"{sys.executable} {HANGING}"})
    assert r.status_code == 201, r.text
    row = settled(a, r.json()["data"])
    assert row["status"] == "ready", row
    async with httpx2.AsyncClient(timeout=60) as hc:
        async with Client(streamable_http_client(b.url("/api/mcp?servers=hang-nodes"), http_client=hc),
                          read_timeout_seconds=60) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert "hang-nodes__pid" in names, names
            res = await c.call_tool("hang-nodes__pid", {})
            assert not res.is_error, res
            pid_b = int(res.content[0].text)
    async with httpx2.AsyncClient(timeout=60) as hc:
        async with Client(streamable_http_client(a.url("/api/mcp?servers=hang-nodes"), http_client=hc),
                          read_timeout_seconds=60) as c:
            pid_a = int((await c.call_tool("hang-nodes__pid", {})).content[0].text)
    assert pid_a != pid_b and alive(pid_b), "each node runs its own child"
    r = requests.patch(a.url(f"/api/v1/mcp/servers/{row['id']}/toggle"), json={"enabled": False}, timeout=30)
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 3
    while (alive(pid_a) or alive(pid_b)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid_b), "B's child outlived the upstream's disabling on A by 3 s"
    assert not alive(pid_a), "A's own child outlived its disabling by 3 s"
    # Disabled everywhere: B refuses to route to it.
    r = requests.get(b.url(f"/api/v1/mcp/servers/{row['id']}"), timeout=30)
    assert r.status_code == 200 and r.json()["data"]["enabled"] is False, r.text
    requests.delete(a.url(f"/api/v1/mcp/servers/{row['id']}"), timeout=30)


@pytest.mark.anyio
async def test_an_upstream_edited_on_a_reconnects_on_b_with_the_new_settings(nodes):
    """Issue 41 item 12 across nodes: an edit on A stops B's child started from the old
    settings (the hub follower compares the stored revision), and B's next call starts
    one from the new settings."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    a, b = nodes["a"], nodes["b"]
    r = requests.post(a.url("/api/v1/mcp/servers"), timeout=120,
                      json={"name": "edit-nodes", "transport_type": "stdio", "config": f"{sys.executable} {HANGING}"})
    assert r.status_code == 201, r.text
    row = settled(a, r.json()["data"])
    assert row["status"] == "ready", row

    async def pid_on(node) -> int:
        async with httpx2.AsyncClient(timeout=60) as hc:
            async with Client(streamable_http_client(node.url("/api/mcp?servers=edit-nodes"), http_client=hc),
                              read_timeout_seconds=60) as c:
                res = await c.call_tool("edit-nodes__pid", {})
                assert not res.is_error, res
                return int(res.content[0].text)
    try:
        pid_b = await pid_on(b)
        r = requests.patch(a.url(f"/api/v1/mcp/servers/{row['id']}"), json={"max_concurrency": 3}, timeout=60)
        assert r.status_code == 200 and r.json()["data"]["max_concurrency"] == 3, r.text
        deadline = time.monotonic() + 3
        while alive(pid_b) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid_b), "B kept the child of the old settings 3 s after the edit on A"
        r = requests.get(b.url(f"/api/v1/mcp/servers/{row['id']}"), timeout=30)
        assert r.json()["data"]["max_concurrency"] == 3, r.text
        assert await pid_on(b) != pid_b
    finally:
        requests.delete(a.url(f"/api/v1/mcp/servers/{row['id']}"), timeout=30)


def run_batch_while_a_node_fails(quarry_bin: Path, corpus: Path, tmp_path: Path, fail) -> tuple:
    """Two nodes (leases of 10 minutes, longer than the test waits: B must learn from A's
    missing heartbeats that A is gone); a 200-document batch uploaded through A; `fail(a)`
    once processing started. Checks that B finishes the batch with every document ready or
    failed exactly once, no duplicate document or chunk, no job left; returns (a, b, seconds
    from the failure to the batch done). The caller stops the servers."""
    a_home = make_home(quarry_bin, corpus, tmp_path / "a", env={"QUARRY_JOB_LEASE_SECS": "600"})
    b_home = second_node(a_home, tmp_path / "b")
    a = start_server(a_home, logdir=tmp_path / "logs-a")
    b = start_server(b_home, logdir=tmp_path / "logs-b")
    try:
        return batch_on_two_nodes(a, a_home, b, fail)
    except BaseException:
        # Never leave a frozen or half-finished node behind for the next tests.
        a.proc.send_signal(signal.SIGCONT)
        for s in (a, b):
            s.proc.kill()
        raise


def batch_on_two_nodes(a, a_home, b, fail) -> tuple:
    wait_ready(b)
    kb = create_kb(a, "failover")
    batch = [(f"note-{i}.md", f"# Note {i}\n\nwombat number {i} lives here.\n".encode()) for i in range(196)]
    if DOCS is not None and DOCS.is_dir():
        for p in ("pdf/en-fhs-3.0.pdf", "pdf/en-irs-i1040nr-2007.pdf", "pdf/en-tracemonkey-pldi09.pdf"):
            batch.append((Path(p).name, (DOCS / p).read_bytes()))
    while len(batch) < 200:
        batch.append((f"bad-{len(batch)}.pdf", f"%PDF-1.4 not really {len(batch)}".encode()))
    r = upload_response(a, kb["id"], batch)
    assert r.status_code == 202, r.text
    ids = [o["document"]["id"] for o in r.json()["data"]]
    deadline = time.monotonic() + 60
    while not any(d["status"] != "pending" for d in api(a, "GET", f"/api/v1/knowledge-bases/{kb['id']}/documents").json()["data"]):
        assert time.monotonic() < deadline, "processing never started"
        time.sleep(0.02)
    fail(a)
    failed_at = time.monotonic()

    def rows(sql):
        return db_rows(a_home.env, a_home.home, sql)

    assert rows("SELECT COUNT(*) FROM kb_files WHERE status NOT IN ('ready', 'failed')")[0][0] > 0, \
        "the failure came too late to test anything"
    final = wait_for(b, kb["id"], ids, timeout=240)
    took = time.monotonic() - failed_at
    assert {final[i]["status"] for i in ids} <= TERMINAL
    converted = sum(1 for i in ids if final[i]["docid"])
    assert rows("SELECT COUNT(*) FROM documents d JOIN collections c ON c.id = d.collection_id "
                "WHERE c.kind = 'knowledge_base'")[0][0] == converted
    assert rows("SELECT COUNT(*) FROM (SELECT document_id, seq FROM chunks GROUP BY document_id, seq "
                "HAVING COUNT(*) > 1) d")[0][0] == 0, "duplicate chunks"
    assert rows("SELECT COUNT(*) FROM jobs WHERE kind = 'ingest' AND status != 'failed'")[0][0] == 0
    assert "took over the jobs of a node that stopped" in b.stderr(), b.stderr()[-3000:]
    return a, b, took


def test_kill_9_of_a_node_mid_batch_and_the_other_finishes_it(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """kill -9 of node A during a 200-document batch: node B finishes it."""
    def kill(a):
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()

    a, b, took = run_batch_while_a_node_fails(quarry_bin, corpus, tmp_path, kill)
    print(f"failover: {took:.1f} s from kill -9 of node A to the batch finished on B")
    b.stop()


def test_a_frozen_node_that_wakes_after_losing_its_leases_writes_nothing(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """SIGSTOP of node A mid-batch, past the point where B takes its leases over; SIGCONT once
    B finished: A's late completions are refused by the store (fencing), so the batch stays
    exactly as B left it, and A says its lease was lost."""
    a, b, _ = run_batch_while_a_node_fails(quarry_bin, corpus, tmp_path, lambda a: a.proc.send_signal(signal.SIGSTOP))
    try:
        a.proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 30
        lost = ("job lease lapsed; another worker took it over", "ingest job lease lost")
        while not any(m in a.stderr() for m in lost):
            assert time.monotonic() < deadline, f"A never noticed its lost lease\n{a.stderr()[-3000:]}"
            time.sleep(0.1)
        time.sleep(1)
        rows = db_rows(a.env, a.home, "SELECT COUNT(*) FROM (SELECT document_id, seq FROM chunks "
                                      "GROUP BY document_id, seq HAVING COUNT(*) > 1) d")
        assert rows[0][0] == 0, "A's late work duplicated chunks"
        assert db_rows(a.env, a.home, "SELECT COUNT(*) FROM jobs WHERE kind = 'ingest' AND status != 'failed'")[0][0] == 0
    finally:
        a.stop()
        b.stop()


def psql(env: dict[str, str], sql: str) -> None:
    pg_bin = os.environ.get("QUARRY_TEST_PG_BIN")
    url = os.environ["QUARRY_TEST_DATABASE_URL"]
    subprocess.run([str(Path(pg_bin) / "psql") if pg_bin else "psql", url, "-qc", sql],
                   check=True, capture_output=True, timeout=60)


def test_two_nodes_started_at_once_on_an_empty_database(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """Two nodes started at the same moment on a database nobody migrated: one creates the
    schema, the other waits for it; both come up and agree."""
    from conftest import QuarryHome, isolated_env

    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    a_home = QuarryHome(bin=quarry_bin, home=a_dir, env=isolated_env(a_dir), corpus=corpus)
    b_home = second_node(a_home, b_dir)
    started: dict[str, object] = {}

    def start(name, home):
        try:
            started[name] = start_server(home, logdir=tmp_path / f"logs-{name}")
        except BaseException as e:  # noqa: BLE001 - reported below
            started[name] = e

    threads = [threading.Thread(target=start, args=(n, h)) for n, h in (("a", a_home), ("b", b_home))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    servers = [started["a"], started["b"]]
    try:
        for s in servers:
            assert not isinstance(s, BaseException), s
        versions = db_rows(a_home.env, a_home.home, "SELECT version, COUNT(*) FROM quarry_schema GROUP BY version")
        assert versions and all(n == 1 for _, n in versions), versions
        for s in servers:
            wait_ready(s)
        kb = create_kb(servers[0], "started-together")
        docs = upload(servers[1], kb["id"], [("x.md", b"# X\n\naardvark together\n")])
        wait_for(servers[0], kb["id"], [docs[0]["id"]], {"ready"}, timeout=60)
    finally:
        for s in servers:
            if not isinstance(s, BaseException):
                s.stop()


@pytest.mark.alone
def test_postgresql_restarted_during_ingestion_loses_no_acknowledged_write(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """PostgreSQL is crash-restarted (immediate stop) while uploads stream in through node A:
    requests during the outage fail cleanly, the nodes reconnect on their own, and every upload
    that was acknowledged (202) is there afterwards, processed, and searchable on node B."""
    a_home = make_home(quarry_bin, corpus, tmp_path / "a")
    b_home = second_node(a_home, tmp_path / "b")
    # The test server runs with asynchronous commit (speed); durable commits for this database,
    # as a real server has them, so "acknowledged" means on disk.
    db = a_home.env["QUARRY_DATABASE_URL"].partition("?")[0].rsplit("/", 1)[1]
    psql(a_home.env, f"ALTER DATABASE {db} SET synchronous_commit = on")
    a = start_server(a_home, logdir=tmp_path / "logs-a")
    b = start_server(b_home, logdir=tmp_path / "logs-b")
    try:
        wait_ready(b)
        kb = create_kb(a, "restart")
        acked: list[str] = []
        refused: list[int] = []
        stop = threading.Event()

        def uploader():
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    r = upload_response(a, kb["id"], [(f"r-{i}.md", f"# R {i}\n\nnarwhal{i}x restart\n".encode())])
                except requests.RequestException:
                    refused.append(-1)
                    continue
                if r.status_code == 202:
                    acked.append((i, r.json()["data"][0]["document"]["id"]))
                else:
                    refused.append(r.status_code)
                time.sleep(0.02)

        # Reads on B through the outage: what a caller is told (issue 41 item 8: the database's
        # user, host, port and name reached unauthenticated callers).
        answers: list[tuple[int, str]] = []

        def reader():
            while not stop.is_set():
                try:
                    r = requests.get(b.url("/api/v1/knowledge-bases"), timeout=30)
                    answers.append((r.status_code, r.text))
                except requests.RequestException:
                    pass
                time.sleep(0.05)

        t = threading.Thread(target=uploader)
        t.start()
        probe = threading.Thread(target=reader)
        probe.start()
        time.sleep(2)
        before = len(acked)
        r = subprocess.run(["bash", "scripts/test-services", "restart-pg"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        time.sleep(4)
        stop.set()
        t.join(timeout=60)
        probe.join(timeout=60)
        url = a_home.env["QUARRY_DATABASE_URL"]
        secrets_of_db = {db, url.split("@", 1)[1].split("/", 1)[0], url.split("://", 1)[1].split(":", 1)[0] + "@"}
        failed = [(code, text) for code, text in answers if code != 200]
        for code, text in failed:
            assert not any(x in text for x in secrets_of_db), (code, text)
            assert code in (500, 503), (code, text)
        assert not failed or any("storage unavailable" in text for _, text in failed), failed
        assert before > 0 and len(acked) > before, (before, len(acked), refused)
        assert set(refused) <= {-1, 500, 503}, refused
        ids = [d for _, d in acked]
        final = wait_for(a, kb["id"], ids, {"ready"}, timeout=240)
        assert all(final[d]["status"] == "ready" for d in ids)
        # On B too, through its own index: a sample across the outage.
        sample = acked[:3] + acked[before - 2:before + 3] + acked[-3:]
        for i, _ in sample:
            deadline = time.monotonic() + 30
            while f"r-{i}.md" not in {f.rsplit("/", 1)[-1] for f in result_files(search(b, f"narwhal{i}x"))}:
                assert time.monotonic() < deadline, f"B never finds r-{i}.md after the restart\n{b.stderr()[-3000:]}"
                time.sleep(0.1)
    finally:
        a.stop()
        b.stop()


def rpc(srv, path: str, body: dict, session: str | None = None) -> requests.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if session:
        headers["Mcp-Session-Id"] = session
    return requests.post(srv.url(path), data=json.dumps(body), headers=headers, timeout=60)


def rpc_result(r: requests.Response) -> dict:
    """The JSON-RPC message of a response, plain JSON or one SSE event."""
    assert r.status_code == 200, (r.status_code, r.text)
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        raise AssertionError(f"no data in {r.text!r}")
    return r.json()


@pytest.mark.parametrize("path", ["/mcp", "/api/mcp"])
def test_a_2025_11_25_session_opened_on_a_continues_on_b(nodes, path):
    """A sessionful client (2025-11-25: `initialize`, then `Mcp-Session-Id` on every request)
    whose next request lands on the other node keeps its session: the session's state is in
    the database, and B replays the handshake instead of answering 404."""
    a, b = nodes["a"], nodes["b"]
    r = rpc(a, path, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "nodes-test", "version": "1.0"}}})
    init = rpc_result(r)
    assert init["result"]["protocolVersion"] == "2025-11-25", init
    session = r.headers.get("Mcp-Session-Id")
    assert session, dict(r.headers)
    r = rpc(a, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert r.status_code == 202, r.text
    on_a = rpc_result(rpc(a, path, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session))
    on_b = rpc_result(rpc(b, path, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, session))
    assert {t["name"] for t in on_b["result"]["tools"]} == {t["name"] for t in on_a["result"]["tools"]}
    assert on_b["result"]["tools"], on_b
    # A session nobody opened is still refused on either node.
    r = rpc(b, path, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, "no-such-session")
    assert r.status_code == 404, (r.status_code, r.text)


def test_an_oauth_grant_moves_between_nodes(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """OAuth state lives in the store (issue 27): a client registered on one node, consented to
    on the other, exchanges, refreshes and is revoked across both — behind one public URL."""
    import base64
    import hashlib
    import secrets
    import urllib.parse

    a = make_home(quarry_bin, corpus, tmp_path / "a")
    b = second_node(a, tmp_path / "b")
    for args in (("space", "create", "acme"), ("user", "add", "ann"), ("space", "grant", "acme", "ann", "--role", "editor")):
        r = a.run(*args)
        assert r.returncode == 0, r.stderr
    ann = json.loads(a.run("--json", "token", "create", "--user", "ann").stdout)["token"]
    public = "http://quarry.test"
    srv_a = start_server(a, "--auth", "token", "--public-url", public, logdir=tmp_path / "logs-a")
    srv_b = start_server(b, "--auth", "token", "--public-url", public, logdir=tmp_path / "logs-b")
    try:
        meta = [requests.get(s.url("/.well-known/oauth-authorization-server"), timeout=30).json() for s in (srv_a, srv_b)]
        assert meta[0] == meta[1] and meta[0]["issuer"] == f"{public}/", meta
        redirect = "http://127.0.0.1:33420/cb"
        client = requests.post(srv_a.url("/oauth/register"), json={"redirect_uris": [redirect], "token_endpoint_auth_method": "none"},
                               timeout=30).json()
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        request = urllib.parse.urlencode({"response_type": "code", "client_id": client["client_id"], "redirect_uri": redirect,
                                          "code_challenge": challenge, "code_challenge_method": "S256", "state": "n1",
                                          "resource": f"{public}/mcp"})
        # The consent page's call, on node b, as the signed-in person.
        r = requests.post(srv_b.url("/api/v1/oauth/authorize"), headers={"Authorization": f"Bearer {ann}"},
                          json={"request": request, "approve": True, "spaces": ["acme"]}, timeout=30)
        assert r.status_code == 200, r.text
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(r.json()["data"]["redirect_to"]).query))
        assert q["iss"] == f"{public}/" and q["state"] == "n1"
        token = lambda srv, **form: requests.post(srv.url("/oauth/token"), data={"client_id": client["client_id"], **form}, timeout=30)  # noqa: E731
        r = token(srv_a, grant_type="authorization_code", code=q["code"], code_verifier=verifier, redirect_uri=redirect)
        assert r.status_code == 200, r.text
        first = r.json()
        spaces = requests.get(srv_b.url("/api/v1/user/spaces"), headers={"Authorization": f"Bearer {first['access_token']}"}, timeout=30)
        assert spaces.status_code == 200 and [s["name"] for s in spaces.json()["data"]["list"]] == ["acme"], spaces.text
        r = token(srv_b, grant_type="refresh_token", refresh_token=first["refresh_token"])
        assert r.status_code == 200, r.text
        second = r.json()
        # The first refresh token again, on the other node: a replay; the grant ends everywhere.
        r = token(srv_a, grant_type="refresh_token", refresh_token=first["refresh_token"])
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
        for srv in (srv_a, srv_b):
            r = requests.get(srv.url("/api/v1/user/spaces"), headers={"Authorization": f"Bearer {second['access_token']}"}, timeout=30)
            assert r.status_code == 401, r.text
    finally:
        srv_a.stop()
        srv_b.stop()


def test_access_changes_through_either_node_or_the_cli_bite_on_the_next_request_on_both(
        quarry_bin: Path, corpus: Path, tmp_path: Path):
    """Nodes check tokens from the access generation they watch, with no round trip (issue
    46): a token made on one node works on the other at once; revoked through either node's
    REST API or the CLI, it is refused by both nodes' very next request; a membership taken
    away and given back likewise — changes spread over time and over the nodes, so some land
    while a node is renewing its watch and some between renewals."""
    a = make_home(quarry_bin, corpus, tmp_path / "a")
    b = second_node(a, tmp_path / "b")
    for args in (("space", "create", "acme"), ("user", "add", "ann"), ("space", "grant", "acme", "ann", "--role", "editor")):
        r = a.run(*args)
        assert r.returncode == 0, r.stderr
    ann = json.loads(a.run("--json", "token", "create", "--user", "ann").stdout)["token"]
    srv_a = start_server(a, "--auth", "token", logdir=tmp_path / "logs-a")
    srv_b = start_server(b, "--auth", "token", logdir=tmp_path / "logs-b")
    nodes = (srv_a, srv_b)

    def status(srv, token: str) -> requests.Response:
        return requests.get(srv.url("/status"), headers={"Authorization": f"Bearer {token}"}, timeout=30)

    try:
        for srv in nodes:
            assert status(srv, ann).status_code == 200
        for i in range(12):
            maker, other = nodes[i % 2], nodes[1 - i % 2]
            r = requests.post(maker.url("/api/v1/user/access-token"), json={"desc": f"round {i}"},
                              headers={"Authorization": f"Bearer {ann}"}, timeout=30)
            assert r.status_code == 201, r.text
            made = r.json()["data"]
            assert status(other, made["token"]).status_code == 200, f"round {i}: the other node refused a new token"
            assert status(maker, made["token"]).status_code == 200
            how = ("the other node", "the node that made it", "the CLI")[i % 3]
            if how == "the CLI":
                r = b.run("token", "revoke", made["id"])
                assert r.returncode == 0, r.stderr
            else:
                revoker = other if how == "the other node" else maker
                r = requests.delete(revoker.url(f"/api/v1/tokens/{made['id']}"),
                                    headers={"Authorization": f"Bearer {ann}"}, timeout=30)
                assert r.status_code == 200, r.text
            for srv in nodes:
                r = status(srv, made["token"])
                assert r.status_code == 401 and r.json()["error_code"] == "TOKEN_REVOKED", \
                    f"round {i}, revoked through {how}: {srv.url('')} answered {r.status_code} {r.text}"
            time.sleep((i * 0.137) % 0.6)
        # A membership taken away (CLI) and given back: both nodes follow at once.
        r = a.run("space", "revoke", "acme", "ann")
        assert r.returncode == 0, r.stderr
        for srv in nodes:
            r = status(srv, ann)
            # Her token is valid; she is in no space it names any more.
            assert r.status_code == 403 and r.json()["error_code"] == "SPACE_FORBIDDEN", r.text
        r = b.run("space", "grant", "acme", "ann", "--role", "viewer")
        assert r.returncode == 0, r.stderr
        for srv in nodes:
            assert status(srv, ann).status_code == 200
        # Each node watches with one connection of its own, and each has its row.
        watching = db_rows(a.env, a.home, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'quarry access watch' "
                           "AND datname = current_database()")
        assert watching == [(2,)], watching
        assert db_rows(a.env, a.home, "SELECT count(*) FROM access_watchers") == [(2,)]
    finally:
        for srv in nodes:
            srv.stop()
