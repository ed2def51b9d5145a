"""No waiting behind embedding (issue 22 item 4), end to end with the real binary: REST uploads,
MCP tools over the official Python SDK, `quarry status`/`quarry embed` on the CLI.

The embedding model is the loopback OpenAI-compatible fake (fake_models.py) made slow
(`embed_delay` per text), so a 30-document batch takes many seconds to embed, as a CPU model
does. Before the queue had an embed stage, each ingest job embedded its whole collection while
holding its job (and the write lock), first in first out: a small note uploaded behind the batch
was not even keyword-searchable until the batch had been embedded.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from conftest import QuarryHome, backend, db_rows, isolated_env, second_node, start_server, wait_ready
from fake_models import FakeModels
from kb_support import api, create_kb, documents, upload, wait_for
from mcp import Client

BATCH = 30
# Per embedded text; the batch cuts into a few hundred chunks, so embedding it takes well over
# the time in which the note must be searchable.
DELAY = 0.1
NOTE = "# Kingfisher rota\n\nThe zebrafinch desk opens at nine.\n"  # ~60 bytes


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def slow_models():
    fake = FakeModels.start()
    fake.embed_delay = DELAY
    yield fake
    fake.stop()


def home_for(quarry_bin: Path, tmp_path: Path, fake: FakeModels, name: str = "home") -> QuarryHome:
    home = tmp_path / name
    home.mkdir()
    # Short leases, so a killed server's jobs would be retaken soon even without the
    # dead-process check.
    env = isolated_env(home, {**fake.env(), "QUARRY_OCR": "off", "QUARRY_JOB_LEASE_SECS": "5"})
    return QuarryHome(bin=quarry_bin, home=home, env=env, corpus=tmp_path)


def batch_files(n: int = BATCH, seed: int = 22, prefix: str = "report") -> list[tuple[str, bytes]]:
    """`n` documents of distinct prose-like text, about 20 chunks each (another `seed`:
    other texts)."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ten", "ra", "su", "vo", "pel", "dri", "an", "ost", "bu", "ce", "nor"]
    out = []
    for i in range(n):
        paras = []
        for p in range(24):
            words = ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(90)]
            paras.append(f"## Part {p}\n\n" + " ".join(words) + ".")
        title = f"Report {i}" if prefix == "report" else f"{prefix.title()} {i}"
        out.append((f"{prefix}-{i:02}.md", (f"# {title}\n\n" + "\n\n".join(paras) + "\n").encode()))
    return out


async def tool(srv, name: str, args: dict):
    async with Client(srv.mcp_url, read_timeout_seconds=60) as c:
        r = await c.call_tool(name, args)
        assert r.is_error is not True, (name, args, [x.text for x in r.content if x.type == "text"])
        return r


def keyword_files(srv, query: str) -> list[str]:
    r = anyio.run(tool, srv, "knowledge_search", {"query": query, "search_mode": "keyword", "min_score": 0})
    return [x["knowledge_filename"] for x in (r.structured_content or {}).get("results", [])]


def test_a_note_behind_a_batch_is_searchable_while_the_batch_embeds(quarry_bin, tmp_path, slow_models):
    home = home_for(quarry_bin, tmp_path, slow_models)
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        kb = create_kb(srv, "reports")
        batch = upload(srv, kb["id"], batch_files())
        started = time.monotonic()
        [note] = upload(srv, kb["id"], [("kingfisher.md", NOTE.encode())])

        # Keyword-searchable as soon as it is converted, whatever the batch's embedding is
        # doing: when it is found, most of the batch is still waiting for its vectors (before
        # the embed stage, every earlier upload's job had embedded the collection first).
        found_after = None
        while time.monotonic() - started < 90:
            if "kingfisher.md" in keyword_files(srv, "zebrafinch"):
                found_after = time.monotonic() - started
                break
            time.sleep(0.2)
        now = documents(srv, kb["id"])
        assert found_after is not None, (
            f"the note was not keyword-searchable 90 s after its upload; statuses: "
            f"{sorted(d['status'] for d in now.values())}"
        )
        not_ready = [d for d in batch if now[d["id"]]["status"] != "ready"]
        assert len(not_ready) >= BATCH // 2, (
            f"the note was found after {found_after:.1f} s, when only {len(not_ready)} of the batch "
            f"were still without vectors: it waited behind their embedding"
        )
        # Searchable means indexed; its own job may not have recorded that yet (another
        # worker's group commit can index it first), so `indexing` is a moment, not a wait.
        assert now[note["id"]]["status"] in {"indexing", "embedding", "ready"}, now[note["id"]]
        # And ready (its vectors in) before the batch is: the newest documents' chunks are
        # embedded first, not wherever their hashes fall in the backlog (issue 41 item 20).
        deadline = time.monotonic() + 120
        while (now := documents(srv, kb["id"]))[note["id"]]["status"] != "ready":
            assert time.monotonic() < deadline, now[note["id"]]
            time.sleep(0.2)
        waiting = [d for d in batch if now[d["id"]]["status"] != "ready"]
        assert waiting, "the note was ready only once the whole batch was"

        # An agent's note: create_knowledge → query_knowledge finds it at once.
        created = anyio.run(tool, srv, "create_knowledge", {"content": "The ptarmigan roster is kept by Oona.",
                                                            "title": "Ptarmigan roster"})
        nid = created.structured_content["id"]
        q = anyio.run(tool, srv, "query_knowledge", {"query": "ptarmigan roster"})
        assert nid in [r["knowledge_id"] for r in q.structured_content["results"]], q.structured_content

        # status says per space what waits, during...
        st = api(srv, "GET", "/status").json()
        assert st["needs_embedding"] > 0, st
        # ...and /api/v1/queue how much, and (once a round has run) how long that takes at
        # the rate the model measured: the fake spends DELAY per text, so at most 1/DELAY a second.
        deadline = time.monotonic() + 60
        while True:
            e = api(srv, "GET", "/api/v1/queue").json()["data"]["embedding"]
            if e["chunks_per_second"] is not None and e["chunks_pending"] > 0:
                break
            assert time.monotonic() < deadline, e
            time.sleep(0.2)
        assert e["chunks_pending"] <= e["chunks"] and e["documents_pending"] > 0, e
        assert 0 < e["chunks_per_second"] <= 1.05 / DELAY, e
        expected = e["chunks_pending"] / e["chunks_per_second"]
        assert abs(e["eta_seconds"] - expected) <= 1 + 0.01 * expected, e
        # `quarry status` shows the line once the vector index exists: the first round
        # records its rate just before it adds its vectors to the index.
        deadline = time.monotonic() + 60
        while not re.search(r"Chunks waiting for embedding: \d+ \(about \d+ (s|min)",
                            text := home.run("status").stdout):
            assert time.monotonic() < deadline, text
            time.sleep(0.3)
        # ...and everything ends ready, with nothing left to embed.
        final = wait_for(srv, kb["id"], [d["id"] for d in batch] + [note["id"]])
        assert {d["status"] for d in final.values()} == {"ready"}, {d["file_name"]: d["status"] for d in final.values()}
        # (The agent's note, in its own knowledge base, gets its vectors in the next rounds.)
        deadline = time.monotonic() + 60
        while True:
            st = api(srv, "GET", "/status").json()
            if st["needs_embedding"] == 0 and st["chunks_needing_embedding"] == 0:
                break
            assert time.monotonic() < deadline, st
            time.sleep(0.25)
        e = api(srv, "GET", "/api/v1/queue").json()["data"]["embedding"]
        assert e["chunks_pending"] == 0 and e["eta_seconds"] == 0 and e["chunks"] > 0, e
        # 30 uploads made one embed job per round, not one embedding run per upload: every
        # chunk text went to the model once.
        # The test's own searches embed their query in every mode (vector evidence is gathered
        # where there is any): those are not chunk texts.
        queries = {"zebrafinch", "ptarmigan roster"}
        texts = [t for t in slow_models.embedded_texts() if t not in queries]
        twice = {t for t in set(texts) if texts.count(t) > 1}
        # Which requests carried them (arrived, answered, status, texts), and the jobs: a
        # request retried after a client timeout looks different from two claims of one text.
        carriers = [(round(r.started, 2), round(r.ended, 2), r.status, len(r.body.get("input") or []))
                    for r in slow_models.since(0, "/v1/embeddings")
                    if isinstance(r.body, dict) and twice & set(r.body.get("input") or [])]
        assert not twice, (f"{len(texts) - len(set(texts))} texts embedded twice: "
                           f"{sorted(t[:60] for t in twice)}; requests {carriers}; jobs "
                           f"{db_rows(home.env, home.home, 'SELECT id, kind, status, attempts FROM jobs')}")
        # The queue empties (a round queued after the last upload finds nothing left).
        deadline = time.monotonic() + 30
        while True:
            left = db_rows(home.env, home.home, "SELECT kind, status, error FROM jobs")
            if not left:
                break
            assert time.monotonic() < deadline, left
            time.sleep(0.25)
        # Vector search sees the batch now.
        r = anyio.run(tool, srv, "knowledge_search", {"query": "Report 7", "search_mode": "vector", "min_score": 0})
        assert r.structured_content["results"], r.structured_content
    finally:
        srv.stop()


@pytest.mark.skipif(backend() != "postgres", reason="several nodes need the PostgreSQL backend")
def test_two_nodes_share_one_collections_embedding(quarry_bin, tmp_path, slow_models):
    """Issue 26: a collection's embedding is claimed in shares, so a second node's cores work
    on a team's upload while the first embeds (before, one embed job ran at a time across
    every node); no text is embedded twice, and everything ends ready."""
    slow_models.embed_delay = DELAY / 2
    a = home_for(quarry_bin, tmp_path, slow_models, "a")
    b = second_node(a, tmp_path / "b")
    srv_a = start_server(a, logdir=tmp_path / "logs-a")
    srv_b = start_server(b, logdir=tmp_path / "logs-b")
    try:
        wait_ready(srv_a)
        wait_ready(srv_b)
        kb = create_kb(srv_a, "reports")
        # Twice the usual batch: shares of 256 texts make several rounds per node, so a
        # measured rate exists while both nodes still embed.
        batch = upload(srv_a, kb["id"], batch_files(2 * BATCH))
        # The embed jobs being processed, by node, while the batch embeds; what
        # /api/v1/queue reports meanwhile.
        nodes_at_once, reported, fastest, both_with_rate = 0, 0, 0.0, 0
        deadline = time.monotonic() + 240
        while True:
            owners = db_rows(a.env, a.home, "SELECT lease_owner FROM jobs WHERE kind = 'embed' "
                                            "AND status = 'processing'")
            nodes_at_once = max(nodes_at_once, len({o.rsplit(":", 1)[0] for (o,) in owners}))
            e = api(srv_b, "GET", "/api/v1/queue").json()["data"]["embedding"]
            reported = max(reported, e["nodes_embedding"])
            if e["nodes_embedding"] == 2 and e["chunks_per_second"] is not None:
                # The ETA counts both nodes: the measured rate of one, twice.
                fastest = max(fastest, e["chunks_per_second"])
                both_with_rate += 1
            docs = documents(srv_a, kb["id"])
            if all(docs[d["id"]]["status"] in {"ready", "failed"} for d in batch):
                break
            assert time.monotonic() < deadline, {d["file_name"]: d["status"] for d in docs.values()}
            time.sleep(0.2)
        assert {docs[d["id"]]["status"] for d in batch} == {"ready"}, {d["file_name"]: d["status"] for d in docs.values()}
        assert nodes_at_once == 2, "the second node never embedded while the first did"
        assert reported == 2, reported
        # One node embeds at most 1/delay texts a second; two together, up to twice that.
        assert 1.05 / slow_models.embed_delay < fastest <= 2.1 / slow_models.embed_delay, (fastest, both_with_rate)
        print(f"polls that saw both nodes embedding with a measured rate: {both_with_rate}")
        assert slow_models.embedding_overlap() > 2, slow_models.embedding_overlap()
        texts = slow_models.embedded_texts()
        assert len(texts) == len(set(texts)), f"{len(texts) - len(set(texts))} texts embedded twice"
        # Nothing is left claimed once the queue is empty.
        deadline = time.monotonic() + 30
        while db_rows(a.env, a.home, "SELECT kind, status FROM jobs"):
            assert time.monotonic() < deadline
            time.sleep(0.25)
        assert db_rows(a.env, a.home, "SELECT count(*) FROM embed_claims") == [(0,)]
        r = anyio.run(tool, srv_b, "knowledge_search", {"query": "Report 7", "search_mode": "vector", "min_score": 0})
        assert r.structured_content["results"], r.structured_content
    finally:
        srv_a.stop()
        srv_b.stop()


def test_killing_the_server_mid_embedding_resumes_the_embed_job(quarry_bin, tmp_path, slow_models):
    home = home_for(quarry_bin, tmp_path, slow_models)
    srv = start_server(home, logdir=tmp_path / "logs1")
    kb = create_kb(srv, "reports")
    batch = upload(srv, kb["id"], batch_files())
    ids = [d["id"] for d in batch]
    # Wait until the first batch of vectors is stored and the next request is in flight.
    deadline = time.monotonic() + 120
    while len(slow_models.embedded_texts()) <= 64:
        assert time.monotonic() < deadline, "embedding never started"
        time.sleep(0.1)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    before = len(set(slow_models.embedded_texts()))
    embedding = db_rows(home.env, home.home, "SELECT COUNT(*) FROM kb_files WHERE status = 'embedding'")[0][0]
    stored = db_rows(home.env, home.home, "SELECT COUNT(*) FROM embeddings")[0][0]
    jobs = db_rows(home.env, home.home, "SELECT kind, status FROM jobs")
    assert embedding > 0 and stored >= 64, (embedding, stored, jobs)
    assert any(kind == "embed" for kind, _ in jobs), jobs

    mark = slow_models.mark()
    srv2 = start_server(home, logdir=tmp_path / "logs2")
    try:
        final = wait_for(srv2, kb["id"], ids)
        assert {d["status"] for d in final.values()} == {"ready"}, {d["file_name"]: d["status"] for d in final.values()}
        # Resumed: what was stored before the kill was not embedded again.
        again = set(slow_models.embedded_texts(mark))
        total = len(set(slow_models.embedded_texts()))
        assert len(again) <= total - stored, (len(again), total, stored, before)
        st = api(srv2, "GET", "/status").json()
        assert st["needs_embedding"] == 0, st
    finally:
        srv2.stop()


def test_cli_embed_and_status_cover_every_space(quarry_bin, tmp_path, fake_models):
    """`quarry embed` on a team server's machine embeds every space (a line per space), and
    `quarry status` shows per space what waits; `--space` narrows it and says so."""
    home = tmp_path / "home"
    home.mkdir()
    q = QuarryHome(bin=quarry_bin, home=home, env=isolated_env(home, {"QUARRY_OCR": "off"}), corpus=tmp_path)
    files = tmp_path / "files"
    files.mkdir()
    for space in ("default", "acme", "globex"):
        if space != "default":
            assert q.run("space", "create", space).returncode == 0
        (files / f"{space}.md").write_text(f"# {space}\n\nThe {space} handbook says hello.\n", encoding="utf-8")
        where = () if space == "default" else ("--space", space)
        assert q.run(*where, "kb", "create", "handbook").returncode == 0
        r = q.run(*where, "kb", "upload", "handbook", str(files / f"{space}.md"))
        assert r.returncode == 0, r.stderr
    st = json.loads(q.run("--json", "status").stdout)
    spaces = {s["space"]: s for s in st["spaces"]}
    assert set(spaces) == {"default", "acme", "globex"}, st
    assert all(s["needs_embedding"] == 1 and s["documents"] == 1 for s in spaces.values()), st
    text = q.run("status").stdout
    assert "acme (1 docs): 1 /" in text and "globex (1 docs): 1 /" in text, text

    qm = q.with_env(**fake_models.env())
    one = qm.run("--space", "acme", "embed")
    assert one.returncode == 0, one.stderr
    assert "space acme only" in one.stdout and "other spaces were left as they are" in one.stdout, one.stdout
    st = json.loads(qm.run("--json", "status").stdout)
    assert {s["space"]: s["needs_embedding"] for s in st["spaces"]} == {"default": 1, "acme": 0, "globex": 1}, st

    r = qm.run("--json", "embed")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert {s["space"] for s in report["spaces"]} == {"default", "acme", "globex"}, report
    assert report["chunks_embedded"] == 2, report  # default's and globex's; acme's were done
    st = json.loads(qm.run("--json", "status").stdout)
    assert all(s["needs_embedding"] == 0 and s["chunks_needing_embedding"] == 0 for s in st["spaces"]), st
    human = qm.run("embed").stdout
    assert "space default:" in human and "space acme:" in human and "space globex:" in human, human


def test_the_server_embeds_folder_collections_it_never_queued(quarry_bin, tmp_path, fake_models):
    """A server with a model embeds every collection in the background, not only uploads: a
    folder collection the CLI added before it started, and one added beside it while it runs.
    Before, only uploads queued embedding, yet the pending counts (`/status`, the queue, the
    knowledge-base page's estimate) included folder chunks that waited for `quarry embed`."""
    home = tmp_path / "home"
    home.mkdir()
    q = QuarryHome(
        bin=quarry_bin, home=home, env=isolated_env(home, {**fake_models.env(), "QUARRY_OCR": "off"}),
        corpus=tmp_path,
    )
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "heron.md").write_text("# Heron\n\nThe heron ledger closes on Fridays.\n", encoding="utf-8")
    (notes / "otter.md").write_text("# Otter\n\nOtter shifts swap at the quay.\n", encoding="utf-8")
    r = q.run("collection", "add", str(notes), "--name", "notes")
    assert r.returncode == 0, r.stderr
    assert json.loads(q.run("--json", "status").stdout)["needs_embedding"] == 2

    def settled(srv, deadline_s: float) -> dict:
        deadline = time.monotonic() + deadline_s
        while True:
            st = api(srv, "GET", "/status").json()
            if st["needs_embedding"] == 0:
                return st
            assert time.monotonic() < deadline, st
            time.sleep(0.2)

    srv = start_server(q, logdir=tmp_path / "logs")
    try:
        settled(srv, 60)
        texts = " ".join(fake_models.embedded_texts())
        assert "heron ledger" in texts and "Otter shifts" in texts, texts
        queue = api(srv, "GET", "/api/v1/queue").json()["data"]
        assert queue["embedding"]["chunks_pending"] == 0, queue

        # Added by the CLI beside the running server: the server's next sweep embeds it.
        more = tmp_path / "more"
        more.mkdir()
        (more / "wren.md").write_text("# Wren\n\nThe wren roster lives in the annex.\n", encoding="utf-8")
        r = q.with_env(QUARRY_EMBED_MODEL=None).run("collection", "add", str(more), "--name", "more")
        assert r.returncode == 0, r.stderr
        settled(srv, 90)
        assert "wren roster" in " ".join(fake_models.embedded_texts())
        # Each text embedded once: the sweep queued nothing already done.
        embedded = fake_models.embedded_texts()
        assert len(embedded) == len(set(embedded)), embedded
    finally:
        srv.stop()


def queue_embedding(srv) -> dict:
    return api(srv, "GET", "/api/v1/queue").json()["data"]["embedding"]


def test_the_eta_is_what_the_chunks_actually_finished_leave(quarry_bin, tmp_path, slow_models):
    """Issue 65 item 19: `/api/v1/queue` said 43–47 chunks/s and an ETA of 4 minutes while
    `chunks_pending` fell by 12.8 a second. The rate was what the last round's model time
    measured (and an average of past rounds), not what was finished: here a first batch
    embeds at once, then embedding gets slow (as when other work takes the cores) and the
    queue must say how long the rest really takes, from how fast chunks are finished now."""
    slow_models.embed_delay = 0.0
    home = home_for(quarry_bin, tmp_path, slow_models)
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        kb = create_kb(srv, "reports")
        first = upload(srv, kb["id"], batch_files())
        wait_for(srv, kb["id"], [d["id"] for d in first])
        # A pause longer than one stretch of embedding may hold (30 s): the next backlog's
        # rate is measured from where its own embedding begins.
        time.sleep(35)
        slow = 0.05  # at most 20 texts a second
        slow_models.embed_delay = slow
        second = upload(srv, kb["id"], batch_files(2 * BATCH, seed=65, prefix="memo"))
        ids = [d["id"] for d in second]
        # Every file converted (its chunks cut: from now on the backlog only falls) and a
        # few batches embedded at the slow speed.
        deadline = time.monotonic() + 240
        peak = 0
        while True:
            e = queue_embedding(srv)
            peak = max(peak, e["chunks_pending"])
            docs = documents(srv, kb["id"])
            converted = all(docs[i]["status"] in {"embedding", "ready"} for i in ids)
            if converted and peak - e["chunks_pending"] >= 192 and e["eta_seconds"] is not None:
                break
            assert time.monotonic() < deadline, (e, {docs[i]["status"] for i in ids})
            time.sleep(0.25)
        t1, p1 = time.monotonic(), e["chunks_pending"]
        time.sleep(15)
        e = queue_embedding(srv)
        t2, p2 = time.monotonic(), e["chunks_pending"]
        assert p2 > 0, f"the backlog ran out before the second look ({p1} → {p2}); make it longer"
        fell = (p1 - p2) / (t2 - t1)
        assert fell > 0, (p1, p2)
        assert fell <= 1.1 / slow, (fell, p1, p2)  # the fake's speed bounds what was finished
        honest = p2 / fell
        rate, eta = e["chunks_per_second"], e["eta_seconds"]
        print(f"chunks fell by {fell:.1f}/s; the queue said {rate}/s and {eta} s for {p2} chunks "
              f"({honest:.0f} s at the observed rate)")
        assert honest / 2 <= eta <= honest * 2, (
            f"eta_seconds {eta} for {p2} chunks at {rate}/s, while they were finished at "
            f"{fell:.1f}/s (about {honest:.0f} s left)"
        )
        assert fell / 2 <= rate <= fell * 2, (rate, fell)
        assert abs(eta - p2 / rate) <= 1 + 0.02 * eta, e
        # `quarry status` shows the same estimate.
        st = json.loads(home.run("--json", "status").stdout)
        if st["chunks_needing_embedding"] > 0:
            assert st.get("embedding_eta_seconds") is not None, st
            assert st["embedding_eta_seconds"] <= 3 * honest + 30, (st, honest)
        final = wait_for(srv, kb["id"], ids)
        assert {d["status"] for d in final.values()} == {"ready"}
    finally:
        srv.stop()


def test_kb_upload_beside_a_running_server_leaves_the_work_to_it(quarry_bin, tmp_path, slow_models):
    """Issue 65 item 11: a `quarry kb upload` beside a running server embedded in its own
    process too (`nodes_embedding: 2`, both on the same cores) while its progress line counted
    documents only — `Processing: 37/47 (0.0/s, about 3 min 36 s left)` for 15 minutes. Now it
    leaves the work to the server, waits, and its line says what embedding still needs."""
    slow_models.embed_delay = 0.05
    home = home_for(quarry_bin, tmp_path, slow_models)
    srv = start_server(home, logdir=tmp_path / "logs")
    files = tmp_path / "upload"
    files.mkdir()
    for name, data in batch_files(BATCH, seed=11, prefix="note"):
        (files / name).write_bytes(data)
    try:
        wait_ready(srv)
        r = home.run("kb", "create", "notes")
        assert r.returncode == 0, r.stderr
        mark = slow_models.mark()
        cli = subprocess.Popen(
            [str(home.bin), "kb", "upload", "notes", str(files)],
            env=home.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        nodes, rates = set(), []
        deadline = time.monotonic() + 300
        try:
            while cli.poll() is None:
                e = queue_embedding(srv)
                nodes.add(e["nodes_embedding"])
                if e["chunks_pending"] and e["chunks_per_second"]:
                    rates.append(e["chunks_per_second"])
                assert time.monotonic() < deadline, "kb upload never finished"
                time.sleep(0.2)
        finally:
            if cli.poll() is None:
                cli.kill()
            out, err = cli.communicate()
        print(err)
        assert cli.returncode == 0, err
        assert nodes >= {1}, nodes
        assert max(nodes) == 1, f"the CLI embedded beside the server: nodes_embedding {sorted(nodes)}"
        # Its progress said what embedding still needs, and that the server does the work.
        assert "chunks to embed" in err, err
        assert "a server" in err, err
        assert f"{BATCH} ready, 0 failed" in out, out
        # Every text embedded once, by the server (the CLI never called the model for them:
        # it embedded nothing).
        texts = slow_models.embedded_texts(mark)
        assert len(texts) == len(set(texts)) and texts, f"{len(texts) - len(set(texts))} texts embedded twice"
        docs = json.loads(home.run("--json", "kb", "docs", "notes").stdout)["documents"]
        assert {d["status"] for d in docs} == {"ready"} and len(docs) == BATCH, docs
    finally:
        srv.stop()
