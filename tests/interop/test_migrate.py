"""`quarry migrate`: a machine's embedded data directory — folder collections, knowledge
bases with uploads and notes, vectors, users and tokens, hub registrations, chats — copied into
PostgreSQL and object storage, then served by a node over them with the same answers
(issue 25). Runs in the PostgreSQL pass (it needs the test database and S3 servers)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import requests

from conftest import QuarryHome, backend, db_rows, home_blobs_url, home_database, isolated_env, start_server, wait_ready
from fake_llm import FakeLLM
from fake_models import FakeModels
from kb_support import DOCS, api, create_kb, upload, wait_for

pytestmark = pytest.mark.skipif(backend() != "postgres", reason="migrate copies into PostgreSQL")

HANGING = Path(__file__).parent / "upstreams" / "hanging_server.py"
QUERIES = ["journal", "install packages", "wombat migration", "软件包"]


def embedded_home(quarry_bin: Path, corpus: Path, path: Path, env: dict | None = None) -> QuarryHome:
    """A home on the embedded store (the PostgreSQL pass gives every home a database; this
    one is the single machine being moved), with the corpus as collection `notes`."""
    path.mkdir(parents=True, exist_ok=True)
    e = isolated_env(path, env)
    e.pop("QUARRY_DATABASE_URL", None)
    e.pop("QUARRY_BLOBS_URL", None)
    home = QuarryHome(bin=quarry_bin, home=path, env=e, corpus=corpus)
    r = home.run("collection", "add", str(corpus), "--name", "notes")
    assert r.returncode == 0, r.stderr
    return home


def answers(srv) -> dict:
    out = {}
    for q in QUERIES:
        r = api(srv, "POST", "/search", json={"query": q, "limit": 10})
        assert r.status_code == 200, r.text
        out[q] = [(x["file"], x["docid"]) for x in r.json()["results"]]
    return out


def chat_once(srv, text: str, cid: str | None = None) -> str:
    """One streamed chat turn read to its end; the conversation's id."""
    body = {"messages": [{"role": "user", "content": text}], "stream": True}
    if cid:
        body["conversation_id"] = cid
    r = requests.post(srv.url("/api/v1/chat"), json=body, headers={"Accept": "text/event-stream"}, timeout=120)
    assert r.status_code == 200, r.text
    events = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
    assert events and events[0]["type"] == "conversation" and events[-1]["type"] == "done", events
    return events[0]["data"]["id"]


def chats(srv) -> dict:
    """Every conversation with its messages (role, content, status), as the REST API shows them."""
    r = requests.get(srv.url("/api/v1/conversations"), timeout=30)
    assert r.status_code == 200, r.text
    out = {}
    for c in r.json()["data"]:
        r = requests.get(srv.url(f"/api/v1/conversations/{c['id']}"), timeout=30)
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        out[c["id"]] = (c["title"], [(m["role"], m["content"], m.get("status")) for m in data["messages"]])
    return out


def migrate(home: QuarryHome, *args: str):
    return home.run("migrate", *args, timeout=600)


@pytest.fixture(scope="module")
def fake():
    f = FakeModels.start()
    yield f
    f.stop()


@pytest.fixture(scope="module")
def llm():
    f = FakeLLM.start()
    yield f
    f.stop()



def test_migrate_copies_everything_and_a_node_answers_the_same(quarry_bin: Path, corpus: Path, tmp_path: Path, fake, llm):
    src = embedded_home(quarry_bin, corpus, tmp_path / "src", env=fake.env() | llm.env("sk-migrate-test"))
    r = src.run("embed", "--json")
    assert r.returncode == 0, r.stderr
    vectors = json.loads(r.stdout)["chunks_embedded"]
    assert vectors > 0
    for args in (("user", "add", "alice"), ("space", "create", "team"), ("space", "grant", "team", "alice", "--role", "editor"),
                 ("group", "create", "eng", "--space", "team"), ("group", "add", "eng", "alice", "--space", "team")):
        r = src.run(*args)
        assert r.returncode == 0, r.stderr
    r = src.run("token", "create", "--user", "alice", "--spaces", "team", "--json")
    assert r.returncode == 0, r.stderr
    token = json.loads(r.stdout)["token"]

    srv = start_server(src, "--chat-model", "openai:fake-chat", logdir=tmp_path / "logs-src")
    try:
        llm.script([{"text": "Wombats travel at dusk."}, {"text": "They dig burrows."}])
        cid = chat_once(srv, "When do wombats travel?")
        chat_once(srv, "And where do they sleep?", cid)
        chats_before = chats(srv)
        assert len(chats_before[cid][1]) == 4, chats_before
        kb = create_kb(srv, "handbook")
        files = [("wombats.md", "# Wombat migration\n\nWombats move at dusk.\n".encode()),
                 ("pkgs.md", "# 软件包管理\n\n使用 apt 安装软件包。 Install packages with apt.\n".encode())]
        if DOCS is not None and DOCS.is_dir():
            files.append(("fhs.pdf", (DOCS / "pdf/en-fhs-3.0.pdf").read_bytes()))
        docs = upload(srv, kb["id"], files)
        wait_for(srv, kb["id"], [d["id"] for d in docs], {"ready"}, timeout=240)
        r = requests.post(srv.url("/api/v1/mcp/servers"), timeout=120,
                          json={"name": "hang-migrated", "transport_type": "stdio", "config": f"{sys.executable} {HANGING}"})
        assert r.status_code == 201, r.text
        r = requests.post(srv.url("/api/v1/endpoints"), timeout=30, json={"name": "kb-tools", "servers": ["knowledge"]})
        assert r.status_code == 201, r.text
        before = answers(srv)
        before_docs = {d["id"]: (d["file_name"], d["status"], d["docid"]) for d in
                       api(srv, "GET", f"/api/v1/knowledge-bases/{kb['id']}/documents").json()["data"]}
        deadline = time.monotonic() + 30
        while not requests.get(srv.url("/health"), timeout=10).json()["model_loaded"]:
            assert time.monotonic() < deadline, "the server never loaded the embedding model"
            time.sleep(0.1)
        vsearch_before = api(srv, "POST", "/vsearch", json={"query": "wombats at dusk", "limit": 5}).json()
    finally:
        srv.stop()

    target_dir = tmp_path / "node"
    target_dir.mkdir()
    url, blobs = home_database(target_dir), home_blobs_url(target_dir)
    r = migrate(src, "--to", url, "--blobs", blobs)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    table = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()[1:] if len(line.split()) == 5}
    for name in ("documents", "chunks", "embeddings", "kb_files", "access_tokens", "groups", "group_members",
                 "hub_upstreams", "chat_conversations", "chat_messages"):
        source, copied, _skipped, target = map(int, table[name])
        assert source == copied == target and source > 0, (name, table[name])
    assert "SHA-256 checked" in r.stdout, r.stdout
    # The planner has statistics at once (autovacuum would take its time).
    unanalysed = db_rows({"QUARRY_DATABASE_URL": url}, target_dir,
                         "SELECT relname FROM pg_stat_user_tables WHERE relname IN "
                         "('documents', 'chunks', 'embeddings', 'kb_files', 'access_tokens') "
                         "AND last_analyze IS NULL AND last_autoanalyze IS NULL")
    assert unanalysed == [], unanalysed
    # Running it again resumes: nothing left to copy.
    r = migrate(src, "--to", url, "--blobs", blobs, "--json")
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert all(t["copied"] == 0 for t in again["tables"]), again["tables"]
    assert again["blobs"]["copied"] == 0 and again["blobs"]["present"] == again["blobs"]["referenced"] > 0

    node = QuarryHome(bin=quarry_bin, home=target_dir, corpus=corpus,
                      env=isolated_env(target_dir, fake.env() | llm.env("sk-migrate-test"))
                      | {"QUARRY_DATABASE_URL": url, "QUARRY_BLOBS_URL": blobs})
    srv = start_server(node, "--chat-model", "openai:fake-chat", logdir=tmp_path / "logs-node")
    try:
        wait_ready(srv)
        assert chats(srv) == chats_before
        # The conversation goes on after the move: its next messages come after the copied ones.
        llm.script([{"text": "In burrows, mostly."}])
        assert chat_once(srv, "Alone?", cid) == cid
        assert chats(srv)[cid][1][:4] == chats_before[cid][1] and len(chats(srv)[cid][1]) == 6
        after = answers(srv)
        for q in QUERIES:
            # Same documents found, same best answer (scores may differ in the last digits:
            # a fresh index has no deleted documents in its statistics).
            assert set(after[q]) == set(before[q]), (q, before[q], after[q])
            assert after[q][:1] == before[q][:1], (q, before[q], after[q])
        after_docs = {d["id"]: (d["file_name"], d["status"], d["docid"]) for d in
                      api(srv, "GET", f"/api/v1/knowledge-bases/{kb['id']}/documents").json()["data"]}
        assert after_docs == before_docs
        deadline = time.monotonic() + 30
        while not requests.get(srv.url("/health"), timeout=10).json()["model_loaded"]:
            assert time.monotonic() < deadline, "the node never loaded the embedding model"
            time.sleep(0.1)
        vsearch_after = api(srv, "POST", "/vsearch", json={"query": "wombats at dusk", "limit": 5}).json()
        assert "results" in vsearch_after, vsearch_after
        assert vsearch_before["results"], vsearch_before
        assert [x["file"] for x in vsearch_after["results"]] == [x["file"] for x in vsearch_before["results"]]
        # Originals come back byte for byte from the bucket.
        doc = next(d for d in docs if d["file_name"] == "wombats.md")
        r = api(srv, "GET", f"/api/v1/knowledge-bases/{kb['id']}/documents/{doc['id']}/preview")
        assert r.status_code == 200 and r.content == files[0][1], (r.status_code, r.text[:300])
        servers = requests.get(srv.url("/api/v1/mcp/servers"), timeout=30).json()["data"]
        assert [s["name"] for s in servers] == ["hang-migrated"]
        endpoint = requests.get(srv.url("/api/v1/endpoints/kb-tools"), timeout=30)
        assert endpoint.status_code == 200 and endpoint.json()["data"]["servers"] == ["knowledge"], endpoint.text
        r = node.run("token", "list", "--json")
        assert r.returncode == 0 and "alice" in r.stdout, r.stdout
        # Groups come along; a new one is numbered after them.
        r = node.run("--json", "group", "list", "--space", "team")
        assert r.returncode == 0 and [(g["name"], g["members"]) for g in json.loads(r.stdout)] == [("eng", ["alice"])], r.stdout
        r = node.run("group", "create", "ops", "--space", "team")
        assert r.returncode == 0, r.stderr
        # New rows are numbered after the copied ones.
        more = upload(srv, kb["id"], [("after.md", b"# After\n\nwritten after the move\n")])
        wait_for(srv, kb["id"], [more[0]["id"]], {"ready"}, timeout=120)
    finally:
        srv.stop()
    # The copied token opens the node's door.
    srv = start_server(node, "--auth", "token", logdir=tmp_path / "logs-node-auth")
    try:
        r = requests.get(srv.url("/api/v1/spaces"), headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 200 and "team" in r.text, r.text
        r = requests.get(srv.url("/api/v1/spaces"), headers={"Authorization": "Bearer qk_" + "0" * 64}, timeout=30)
        assert r.status_code == 401, r.text
    finally:
        srv.stop()


def test_migrate_refuses_a_database_that_holds_other_data(quarry_bin: Path, corpus: Path, tmp_path: Path):
    one = embedded_home(quarry_bin, corpus, tmp_path / "one")
    two = embedded_home(quarry_bin, corpus, tmp_path / "two")
    target = tmp_path / "target"
    target.mkdir()
    url = home_database(target)
    r = migrate(one, "--to", url)
    assert r.returncode == 0, r.stderr
    r = migrate(two, "--to", url)
    assert r.returncode != 0
    assert "copy of another data directory" in r.stderr, r.stderr
    # A refusal is not an interrupted copy: running it again would only refuse again.
    assert "again to resume" not in r.stderr, r.stderr
    # No target named at all: a clear error, not a copy into the embedded store.
    r = migrate(one)
    assert r.returncode != 0 and "--to" in r.stderr, r.stderr
