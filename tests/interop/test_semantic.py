"""The semantic layer through the servers: `quarry serve` (REST and MCP over Streamable HTTP) and
`quarry mcp` (stdio, official MCP Python SDK), with the model APIs served by a loopback fake
(fake_models.py: OpenAI-compatible embeddings and chat, a Jina-shaped reranker).

Covers what crates/quarry-cli/tests/semantic.rs covers for the CLI: vsearch after `quarry embed`
(scores, snippets from the matched chunk, the collection filter, the 0.3 default), hybrid
query stages, `/embed` and `/health`, degradation when a model service fails, and a server
seeing vectors that a CLI `embed` wrote while it ran.

One home is embedded once for the module (the shared corpus as `notes`, plus a small `extra`
collection); the servers on it only read. Tests that need another state build their own.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import (
    CORPUS,
    JOURNAL_1,
    LARGE,
    MEETING,
    PLAN,
    QuarryHome,
    display,
    make_home,
    start_server,
)
from fake_models import FakeModels, cosine, fake_embedding
from kb_support import create_kb, upload, wait_for
from test_mcp_python_sdk import check_summary, connect, dump, texts
from test_mcp_wire import messages, modern
from test_mcp_wire import request as mcp_request
from test_rest import assert_error, get, post

MODEL = "fake-a"
NO_VECTORS = "Vector index not found. Run 'quarry embed' first to create embeddings."

# A second, small collection, for the collection filter.
EXTRA = {
    "zanzibar-trip.md": "# Zanzibar trip\n\nFerry to Zanzibar island, a spice tour and the beach.\n",
    "recipes/pilaf.md": "# Spice pilaf\n\nToast the rice with cardamom and cloves, then simmer.\n",
}
# Chunks the module home is embedded into: 7 small pages + the large manual in 8 chunks,
# + the 2 pages of `extra`.
CHUNKS = 47  # 1,000-character chunks (seed 003), cut when the documents were keyword-indexed


def files(results: list[dict]) -> list[str]:
    return [r["file"] for r in results]


def write_tree(root: Path, tree: dict[str, str]) -> Path:
    for rel, text in tree.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def embed(home: QuarryHome, *args: str) -> dict:
    r = home.run("embed", "--json", *args)
    assert r.returncode == 0, f"quarry embed failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout)


def wait_model_loaded(base: str, timeout: float = 10) -> dict:
    """Polls /health until model_loaded (models load in the background at start-up)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body, _ = get(base, "/health")
        assert status == 200, body
        if body.get("model_loaded") or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def check_snippet(hit: dict, text: str, lines: range | None = None) -> None:
    """Every snippet line is `N: text` with text taken from line N of the file (the first and
    last may be cut), and N within `lines` when given (the matched chunk's lines)."""
    file_lines = text.split("\n")
    assert hit["snippet"], hit
    for ln in hit["snippet"].split("\n"):
        m = re.fullmatch(r"(\d+):(?: (.*))?", ln, re.S)
        assert m, (ln, hit["snippet"])
        n, part = int(m.group(1)), m.group(2) or ""
        assert part.strip("…") in file_lines[n - 1], (n, part, file_lines[n - 1])
        if lines is not None:
            assert n in lines, (n, lines, hit["snippet"])


# ---------------------------------------------------------------------------------------------
# Module fixtures: one fake, one embedded home, servers on it.


@pytest.fixture(scope="module")
def fake():
    f = FakeModels.start()
    yield f
    f.stop()


@pytest.fixture(autouse=True)
def _fake_reset(request):
    """Tests that change the fake's behaviour leave it as they found it."""
    yield
    if "fake" in request.fixturenames:
        f = request.getfixturevalue("fake")
        f.fail_embed = f.fail_chat = f.fail_rerank = False
        f.variants, f.rerank_word = [], ""


@pytest.fixture(scope="module")
def sem_home(quarry_bin, corpus, fake, tmp_path_factory) -> QuarryHome:
    root = tmp_path_factory.mktemp("semantic")
    home = make_home(quarry_bin, corpus, root / "quarry-home", env=fake.env())
    extra = write_tree(root / "extra", EXTRA)
    r = home.run("collection", "add", str(extra), "--name", "extra")
    assert r.returncode == 0, r.stderr
    mark = fake.mark()
    report = embed(home)
    home.embedded_texts = fake.embedded_texts(mark)  # the chunk texts, for large_chunks()
    assert report["model"] == MODEL and report["dimensions"] == 64, report
    assert report["documents_chunked"] == len(CORPUS) + len(EXTRA), report
    assert report["chunks_embedded"] == report["vectors_indexed"] == report["total_chunks"] == CHUNKS, report
    return home


@pytest.fixture(scope="module")
def sem_server(sem_home, tmp_path_factory):
    srv = start_server(sem_home, logdir=tmp_path_factory.mktemp("semantic-serve"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def rerank_server(sem_home, fake, tmp_path_factory):
    """A server on the same home with a reranker and query expansion configured."""
    home = sem_home.with_env(**fake.env(rerank="jina:fake-rerank", expand="openai:fake-chat"))
    srv = start_server(home, logdir=tmp_path_factory.mktemp("semantic-rerank-serve"))
    yield srv
    srv.stop()


def large_chunks(home: QuarryHome) -> list[tuple[str, range]]:
    """The large manual's chunks as embedded (text sent to the model) and their file lines."""
    body = CORPUS[LARGE]
    title = "Large Operations Manual"
    out = []
    for text in home.embedded_texts:
        if "xylophone" not in text:
            continue
        chunk = text.removeprefix(f"{title}\n\n") if not text.startswith("# ") else text
        at = body.find(chunk)
        assert at >= 0, f"chunk is not a slice of the document: {chunk[:120]!r}"
        first = body.count("\n", 0, at) + 1
        last = first + chunk.rstrip("\n").count("\n")
        out.append((text, range(first, last + 1)))
    return out


# ---------------------------------------------------------------------------------------------
# REST after `quarry embed`


def test_status_after_embed(sem_server):
    status, body, _ = get(sem_server.base, "/status")
    assert status == 200, body
    assert body["needs_embedding"] == 0 and body["has_vector_index"] is True, body
    assert body["total_documents"] == len(CORPUS) + len(EXTRA)
    assert "  Needs embedding: 0\n  Vector index: yes\n" in body["content"], body["content"]


def test_vsearch_finds_the_page(sem_server):
    query = "rotate the api keys of the zanzibar cluster"
    status, body, _ = post(sem_server.base, "/vsearch", {"query": query})
    assert status == 200, body
    hits = body["results"]
    top = hits[0]
    assert top["file"] == display(PLAN), hits
    assert set(top) == {"docid", "file", "title", "score", "context", "snippet"}
    assert top["title"] == "Alpha Launch Plan"
    assert 0.3 < top["score"] <= 1, top
    # Ranked by the cosine of the query and each page's best chunk; the score is the
    # calibrated probability of relevance (never rising down the list).
    qv = fake_embedding(MODEL, query)
    assert cosine(qv, fake_embedding(MODEL, CORPUS[PLAN])) > 0.3
    check_snippet(top, CORPUS[PLAN])
    assert "9: Key rotation: rotate the api keys every 90 days." in top["snippet"].split("\n"), top["snippet"]
    # Default min_score 0.3 (seed): nothing weaker comes back, and 0 lets weaker pages through.
    assert all(h["score"] >= 0.3 for h in hits), hits
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    n = len(hits)
    assert body["content"].startswith(f'Found {n} result{"" if n == 1 else "s"} for "{query}":\n\n'), body["content"]
    _, everything, _ = post(sem_server.base, "/vsearch", {"query": query, "min_score": 0, "limit": 50})
    assert len(everything["results"]) == len(CORPUS) + len(EXTRA), everything
    assert any(h["score"] < 0.3 for h in everything["results"]), everything
    for h in everything["results"]:  # folder contexts travel with vector hits too
        assert h["context"] == ("daily journal" if h["file"].startswith("notes/journals/") else None), h
    _, two, _ = post(sem_server.base, "/vsearch", {"query": query, "min_score": 0, "limit": 2})
    assert files(two["results"]) == files(everything["results"])[:2]


def test_vsearch_snippet_comes_from_the_matched_chunk(sem_home, sem_server):
    """The large manual is several chunks whose lines all contain the query's words; the
    snippet must come from the chunk nearest to the query, not the document's first match."""
    query = "xylophone procedure"
    chunks = large_chunks(sem_home)
    assert len(chunks) == 38, [c[1] for c in chunks]  # 1,000-character chunks
    qv = fake_embedding(MODEL, query)
    ranked = sorted(chunks, key=lambda c: cosine(qv, fake_embedding(MODEL, c[0])), reverse=True)
    best_text, best_lines = ranked[0]
    best = cosine(qv, fake_embedding(MODEL, best_text))
    assert best - cosine(qv, fake_embedding(MODEL, ranked[1][0])) > 1e-4, "no clear best chunk"
    assert best_lines.start > 3, "the best chunk must not be the first one for this test to mean anything"

    status, body, _ = post(sem_server.base, "/vsearch", {"query": query, "min_score": 0, "collection": "notes"})
    assert status == 200, body
    [hit] = [h for h in body["results"] if h["file"] == display(LARGE)]
    assert 0 < hit["score"] <= 1, hit
    check_snippet(hit, CORPUS[LARGE], best_lines)
    first = int(hit["snippet"].split(":", 1)[0])
    assert first == best_lines.start, (hit["snippet"], best_lines)


def test_vsearch_collection_filter(sem_server):
    base = sem_server.base
    _, both, _ = post(base, "/vsearch", {"query": "zanzibar", "min_score": 0, "limit": 50})
    assert {f.split("/")[0] for f in files(both["results"])} == {"notes", "extra"}, both
    for coll in ("notes", "extra"):
        status, body, _ = post(base, "/vsearch", {"query": "zanzibar", "collection": coll, "min_score": 0, "limit": 50})
        assert status == 200, body
        got = files(body["results"])
        assert got and all(f.startswith(f"{coll}/") for f in got), got
        assert got == [f for f in files(both["results"]) if f.startswith(f"{coll}/")]
    _, extra, _ = post(base, "/vsearch", {"query": "ferry to the island", "collection": "extra"})
    assert files(extra["results"])[0] == "extra/zanzibar-trip.md", extra
    assert_error(*post(base, "/vsearch", {"query": "zanzibar", "collection": "nope"})[:2], 404, "nope")


@pytest.mark.parametrize("route", ["/vsearch", "/query"])
@pytest.mark.parametrize(
    "payload, code, fragment",
    [
        ({"query": ""}, 400, "query must not be empty"),
        ({"query": "x", "limit": 0}, 400, "limit"),
        ({"query": "x", "min_score": 2}, 400, "min score"),
        ({"query": "x", "collection": "nope"}, 404, "collection 'nope' not found"),
    ],
)
def test_bad_input_is_refused_before_any_model_call(sem_server, fake, route, payload, code, fragment):
    mark = fake.mark()
    assert_error(*post(sem_server.base, route, payload)[:2], code, fragment)
    assert fake.since(mark) == []


def test_query_uses_keyword_and_vector(sem_server, fake):
    mark = fake.mark()
    status, body, _ = post(sem_server.base, "/query", {"query": "zanzibar cluster region", "collection": "notes"})
    assert status == 200, body
    assert body["stages"] == ["keyword", "vector"], body
    assert "warnings" not in body, body
    assert body["results"][0]["file"] == display(PLAN)
    # The query itself was embedded (no prefix for openai: models).
    assert fake.embedded_texts(mark) == ["zanzibar cluster region"]
    # The vector list brings pages the keyword list lacks.
    _, kw, _ = post(sem_server.base, "/search", {"query": "zanzibar cluster region", "collection": "notes"})
    assert set(files(kw["results"])) < set(files(body["results"])), (kw, body)


# ---------------------------------------------------------------------------------------------
# /embed and /health


def test_embed_returns_the_models_vectors(sem_server, fake):
    texts_in = ["hello world", "Zanzibar spice tour", "深度学习 and gradient descent", "x"]
    mark = fake.mark()
    status, body, _ = post(sem_server.base, "/embed", {"texts": texts_in})
    assert status == 200, body
    assert set(body) == {"embeddings"}
    vectors = body["embeddings"]
    assert len(vectors) == len(texts_in)
    for text, v in zip(texts_in, vectors, strict=True):
        assert len(v) == 64 and all(isinstance(x, float) for x in v), v
        expected = fake_embedding(MODEL, text)
        assert max(abs(a - b) for a, b in zip(v, expected, strict=True)) < 1e-6, (text, v, expected)
    # Passages, as given: openai: models have no prefixes.
    assert fake.embedded_texts(mark) == texts_in
    assert_error(*post(sem_server.base, "/embed", {"texts": []})[:2], 400, "Empty texts list")
    status, body, _ = post(sem_server.base, "/embed", {"texts": ["x"] * 1001})
    assert_error(status, body, 413)
    assert body["detail"] == "Too many texts (1001 > 1000)"
    assert fake.embedded_texts(mark) == texts_in, "refused requests reached the model"


def test_health_reports_the_configured_model_loaded(sem_home, server_factory):
    """A fresh server loads the configured model in the background, before any request needs it."""
    srv = server_factory(home=sem_home)
    assert wait_model_loaded(srv.base) == {"status": "healthy", "model_loaded": True}


def test_another_model_than_the_index_was_built_with(sem_home, fake, server_factory):
    """A server configured with a model whose vectors live in another space never mixes them:
    vsearch says what to do, query degrades with a warning, /embed uses the configured model."""
    srv = server_factory(home=sem_home.with_env(QUARRY_EMBED_MODEL="openai:fake-b-48"))
    status, body, _ = post(srv.base, "/vsearch", {"query": "zanzibar"})
    assert_error(status, body, 503, "built with fake-a", "quarry embed")
    status, body, _ = post(srv.base, "/query", {"query": "zanzibar"})
    assert status == 200 and body["stages"] == ["keyword"], body
    [warning] = body["warnings"]
    assert warning.startswith("vector search skipped: ") and "fake-a" in warning, warning
    assert set(files(body["results"])) == {display(PLAN), "extra/zanzibar-trip.md"}, body
    status, body, _ = post(srv.base, "/embed", {"texts": ["hello world"]})
    assert status == 200, body
    assert body["embeddings"] == [pytest.approx(fake_embedding("fake-b-48", "hello world"), abs=1e-6)]


def test_without_a_model_embed_is_503_and_health_says_not_loaded(server):
    """No QUARRY_EMBED_MODEL, no index, offline Hub: the default model cannot be loaded."""
    assert "QUARRY_EMBED_MODEL" not in server.env and server.env["HF_HUB_OFFLINE"] == "1"
    status, body, _ = post(server.base, "/embed", {"texts": ["hello"]})
    assert_error(status, body, 503)
    assert body["detail"] == "Model not loaded"
    assert get(server.base, "/health")[:2] == (200, {"status": "healthy", "model_loaded": False})
    assert_error(*post(server.base, "/vsearch", {"query": "alpha"})[:2], 503, NO_VECTORS)


def test_unloadable_model(sem_home, server_factory):
    """A configured model that cannot be loaded (a Hugging Face id, with the Hub offline): the
    server runs, keyword search works, and each semantic route says so."""
    missing = "quarry-test/no-such-model"
    srv = server_factory(home=sem_home.with_env(QUARRY_EMBED_MODEL=missing))
    time.sleep(0.3)  # give the background load its chance to (fail to) finish
    assert get(srv.base, "/health")[:2] == (200, {"status": "healthy", "model_loaded": False})
    assert_error(*post(srv.base, "/embed", {"texts": ["hello"]})[:2], 503, "Model not loaded")
    assert_error(*post(srv.base, "/vsearch", {"query": "zanzibar"})[:2], 503, missing)
    status, body, _ = post(srv.base, "/query", {"query": "zanzibar"})
    assert status == 200 and body["stages"] == ["keyword"], body
    assert missing in body["warnings"][0], body


def test_embed_with_a_failing_backend_is_503_naming_the_cause(sem_server, fake):
    # The model is loaded (the server preloads it); its backend failing is not "not loaded".
    with fake.failing("embed"):
        status, body, _ = post(sem_server.base, "/embed", {"texts": ["hello"]})
    assert_error(status, body, 503, "500")
    assert "Model not loaded" not in body["detail"], body


def test_unconfigured_server_follows_the_model_of_the_index(quarry_bin, corpus, fake, server_factory, tmp_path):
    """With no QUARRY_EMBED_MODEL the server uses the model the index was embedded with, and
    follows a CLI re-embed with another model (and back) without a restart."""
    cli = make_home(quarry_bin, corpus, tmp_path / "home", env=fake.env())
    embed(cli)
    srv = server_factory(home=cli.with_env(QUARRY_EMBED_MODEL=None))
    assert wait_model_loaded(srv.base)["model_loaded"] is True
    query = "rotate the api keys of the zanzibar cluster"

    def vsearch_model() -> str:
        """Runs /vsearch; returns the model the query was embedded with."""
        mark = fake.mark()
        status, body, _ = post(srv.base, "/vsearch", {"query": query})
        assert status == 200, body
        assert body["results"][0]["file"] == display(PLAN), body
        [req] = fake.since(mark, "/v1/embeddings")
        assert req.body["input"] == [query], req.body
        return req.body["model"]

    def embed_dims() -> int:
        status, body, _ = post(srv.base, "/embed", {"texts": ["hello"]})
        assert status == 200, body
        return len(body["embeddings"][0])

    assert (vsearch_model(), embed_dims()) == ("fake-a", 64)
    report = embed(cli.with_env(QUARRY_EMBED_MODEL="openai:fake-b-48"))
    assert (report["model_changed"], report["dimensions"]) == (True, 48), report
    assert (vsearch_model(), embed_dims()) == ("fake-b-48", 48)
    _, body, _ = post(srv.base, "/query", {"query": query})
    assert body["stages"] == ["keyword", "vector"] and "warnings" not in body, body
    report = embed(cli)  # back to fake-a: its vectors are still stored
    assert (report["model_changed"], report["chunks_embedded"]) == (True, 0), report
    assert (vsearch_model(), embed_dims()) == ("fake-a", 64)


# ---------------------------------------------------------------------------------------------
# Degradation


def test_failing_embedding_backend(sem_server, fake):
    base = sem_server.base
    _, keyword, _ = post(base, "/search", {"query": "kumquat migration"})
    with fake.failing("embed"):
        status, body, _ = post(base, "/vsearch", {"query": "kumquat migration"})
        assert_error(status, body, 503)
        detail = body["detail"]
        assert detail != NO_VECTORS and "not found" not in detail.lower(), detail
        assert "/v1/embeddings" in detail and "500" in detail, detail

        status, body, _ = post(base, "/query", {"query": "kumquat migration"})
        assert status == 200, body
        assert body["stages"] == ["keyword"], body
        [warning] = body["warnings"]
        assert warning.startswith("vector search skipped: ") and "500" in warning, warning
        assert files(body["results"]) == files(keyword["results"]) != []
        assert body["results"][0]["file"] == display(MEETING)
    # The backend is back: so is vector search (a failure is not remembered).
    status, body, _ = post(base, "/query", {"query": "kumquat migration"})
    assert body["stages"] == ["keyword", "vector"] and "warnings" not in body, body


def test_rerank_stage(rerank_server, sem_server, fake):
    fake.rerank_word = "kumquat"
    _, plain, _ = post(sem_server.base, "/query", {"query": "zanzibar", "collection": "notes"})
    mark = fake.mark()
    status, body, _ = post(rerank_server.base, "/query", {"query": "zanzibar", "collection": "notes"})
    assert status == 200, body
    assert body["stages"] == ["keyword", "vector", "rerank"], body
    assert "warnings" not in body, body
    [rr] = fake.since(mark, "/rerank")
    assert rr.body["query"] == "zanzibar" and rr.body["model"] == "fake-rerank", rr.body
    docs = rr.body["documents"]
    assert 1 <= len(docs) <= 30 and all(isinstance(d, str) and d for d in docs), docs
    assert len(docs) == len(plain["results"]), "every fused candidate is reranked"
    # The pages the reranker prefers (those with "kumquat") move into the top 3; the fused
    # first place stays there (75 % of a top-3 score is its fused probability). (Which page
    # fuses first depends on the fake's 64-dimension hashed vectors.)
    got = files(body["results"])
    assert {display(MEETING), display(JOURNAL_1)} <= set(got[:3]), got
    assert files(plain["results"])[0] in got[:3], (got, plain)
    assert got != files(plain["results"]), "the reranker changed the order"
    scores = [h["score"] for h in body["results"]]
    assert scores == sorted(scores, reverse=True), scores


def test_failing_reranker_is_skipped_with_a_warning(rerank_server, fake):
    with fake.failing("rerank"):
        status, body, _ = post(rerank_server.base, "/query", {"query": "alpha launch"})
    assert status == 200, body
    assert body["stages"] == ["keyword", "vector"], body
    [warning] = body["warnings"]
    assert warning.startswith("rerank skipped: ") and "500" in warning, warning
    assert body["results"][0]["file"] == display(PLAN)


def test_expansion_stage_and_total_failure(rerank_server, fake):
    base = rerank_server.base
    fake.variants = ["ferry island", "spice tour"]
    mark = fake.mark()
    status, body, _ = post(base, "/query", {"query": "trip to the islands"})
    assert status == 200, body
    assert body["stages"] == ["expansion", "keyword", "vector", "rerank"], body
    assert "warnings" not in body
    assert len(fake.since(mark, "/v1/chat/completions")) == 1
    assert set(fake.embedded_texts(mark)) == {"trip to the islands", "ferry island", "spice tour"}
    assert body["results"][0]["file"] == "extra/zanzibar-trip.md", body
    # Expansions are cached: the same query again asks the chat model nothing.
    mark = fake.mark()
    _, again, _ = post(base, "/query", {"query": "trip to the islands"})
    assert again["results"] == body["results"] and again["stages"] == body["stages"]
    assert fake.since(mark, "/v1/chat/completions") == []

    with fake.failing("embed", "rerank", "chat"):
        status, body, _ = post(base, "/query", {"query": "kumquat postponed"})
    assert status == 200, body
    assert body["stages"] == ["keyword"], body
    warnings = " | ".join(body["warnings"])
    for what in ("query expansion skipped", "vector search skipped", "rerank skipped"):
        assert what in warnings, (what, warnings)
    assert body["results"][0]["file"] == display(MEETING)
    # Failed expansions are not cached: the next call asks again.
    fake.variants = ["kumquat migration"]
    _, body, _ = post(base, "/query", {"query": "kumquat postponed"})
    assert body["stages"] == ["expansion", "keyword", "vector", "rerank"], body


# ---------------------------------------------------------------------------------------------
# A running server sees vectors written by `quarry embed` in another process.


def mcp_tool(server, name: str, args: dict) -> dict:
    """One stateless (2026-07-28) `tools/call` over HTTP; returns the result object."""
    body, headers = modern("tools/call", {"name": name, "arguments": args})
    status, rh, text = mcp_request(server, body, headers)
    assert status == 200, text
    [msg] = messages(rh, text)
    return msg["result"]


@pytest.mark.parametrize("configured", [True, False], ids=["model-configured", "model-from-index"])
def test_server_sees_embed_run_while_it_serves(quarry_bin, corpus, fake_models, server_factory, tmp_path, configured):
    """`quarry serve` starts on a home with no vectors; `quarry embed` runs in another process
    (with the model given to it alone when not `configured`); the server answers from the new
    vectors without a restart, and again after an incremental embed. A server with a model
    configured also embeds the collections in the background by itself
    (test_embed_queue.py), so there the CLI may find some or all of the work done."""
    cli = make_home(quarry_bin, corpus, tmp_path / "late-home", env=fake_models.env())
    srv = server_factory(home=cli if configured else cli.with_env(QUARRY_EMBED_MODEL=None))
    base = srv.base
    if configured:
        assert wait_model_loaded(base)["model_loaded"] is True
    else:
        assert_error(*post(base, "/vsearch", {"query": "zanzibar"})[:2], 503, NO_VECTORS)
        result = mcp_tool(srv, "vsearch", {"query": "zanzibar"})
        assert result["isError"] is True and result["content"] == [{"type": "text", "text": NO_VECTORS}], result
        status, body, _ = post(base, "/query", {"query": "zanzibar"})
        assert (status, body["stages"], "warnings" in body) == (200, ["keyword"], False), body
        _, st, _ = get(base, "/status")
        assert (st["needs_embedding"], st["has_vector_index"]) == (len(CORPUS), False), st
        # Offline with an empty cache the default model cannot be fetched: keyword only
        # (test_default_model.py fetches it from a loopback mirror).
        time.sleep(0.3)
        assert get(base, "/health")[1]["model_loaded"] is False
        assert fake_models.snapshot() == []

    report = embed(cli)
    if not configured:  # configured: the server's background run may have embedded any share
        assert report["chunks_embedded"] == 45, report

    status, body, _ = post(base, "/vsearch", {"query": "rotate the api keys of the zanzibar cluster"})
    assert status == 200, body
    assert body["results"][0]["file"] == display(PLAN)
    assert get(base, "/health")[1]["model_loaded"] is True
    result = mcp_tool(srv, "vsearch", {"query": "rotate the api keys of the zanzibar cluster"})
    assert result["isError"] is False, result
    assert result["structuredContent"]["results"][0]["file"] == display(PLAN)
    _, st, _ = get(base, "/status")
    assert (st["needs_embedding"], st["has_vector_index"]) == (0, True), st
    _, body, _ = post(base, "/query", {"query": "zanzibar"})
    assert body["stages"] == ["keyword", "vector"], body

    # Again after an incremental embed: a new collection's page becomes findable.
    extra = write_tree(tmp_path / "late-extra", {"pilaf.md": EXTRA["recipes/pilaf.md"]})
    r = cli.run("collection", "add", str(extra), "--name", "late")
    assert r.returncode == 0, r.stderr
    # The server's own sweep (every 30 s, now that the index has a model) may be first.
    _, st, _ = get(base, "/status")
    assert st["needs_embedding"] in (0, 1), st
    assert embed(cli)["chunks_embedded"] in (0, 1)
    _, st, _ = get(base, "/status")
    assert st["needs_embedding"] == 0, st
    status, body, _ = post(base, "/vsearch", {"query": "rice cardamom cloves simmer"})
    assert status == 200, body
    assert body["results"][0]["file"] == "late/pilaf.md", body


def test_embed_stops_when_another_process_switches_the_model(quarry_bin, corpus, fake_models, tmp_path):
    """`quarry embed` holds the write lock only between model calls; a server started with
    another model meanwhile switches the vector index to it. The CLI must then stop with a
    clear error rather than add its vectors to an index of another vector space."""
    home = make_home(quarry_bin, corpus, tmp_path / "switch-home", env=fake_models.env())
    fake_models.embed_delay = 0.3  # the CLI's 45 chunks take about 14 s
    mark = fake_models.mark()
    cli = subprocess.Popen(
        [str(home.bin), "embed"], env=home.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not fake_models.embedded_texts(mark):
            assert cli.poll() is None and time.monotonic() < deadline, cli.communicate()
            time.sleep(0.05)
        srv = start_server(home.with_env(QUARRY_EMBED_MODEL="openai:fake-b-48"), logdir=tmp_path / "logs")
        try:
            kb = create_kb(srv, "garden")
            [doc] = upload(srv, kb["id"], [("pilaf.md", EXTRA["recipes/pilaf.md"].encode())])
            wait_for(srv, kb["id"], [doc["id"]], {"ready"}, timeout=120)
            out, err = cli.communicate(timeout=120)
            assert cli.returncode != 0, (out, err)
            assert "the vector index was switched to fake-b-48" in err and "while this run embedded with fake-a" in err, err
            assert "Run 'quarry embed' again" in err, err
            # The server's index holds one vector space, its own.
            status, body, _ = post(srv.base, "/vsearch", {"query": "rice cardamom cloves simmer"})
            assert status == 200 and body["results"][0]["file"].endswith("pilaf.md"), body
        finally:
            fake_models.embed_delay = 0.0
            srv.stop()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()


# ---------------------------------------------------------------------------------------------
# MCP: the official Python SDK over stdio (`quarry mcp`) and Streamable HTTP (`quarry serve`).


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(params=["stdio", "http"])
async def mcp(request, sem_home, sem_server, tmp_path):
    stderr_path = tmp_path / "quarry-mcp.stderr"
    async with connect(request.param, sem_home, sem_server, stderr_path) as client:
        client.kind = request.param
        yield client
    if stderr_path.exists():
        err = stderr_path.read_text(errors="replace")
        assert "panicked" not in err, err[-3000:]


async def tool(mcp, name: str, args: dict | None = None):
    r = await mcp.call_tool(name, args or {})
    assert r.is_error is not True, f"{name}({args}) failed: {texts(r)}"
    return r


@pytest.mark.anyio
async def test_mcp_vsearch(mcp):
    query = "rotate the api keys of the zanzibar cluster"
    r = await tool(mcp, "vsearch", {"query": query})
    hits = check_summary(r, query)
    assert hits[0]["file"] == display(PLAN), hits
    assert all(h["score"] >= 0.3 for h in hits)
    check_snippet(hits[0], CORPUS[PLAN])
    r = await tool(mcp, "vsearch", {"query": "ferry to the island", "collection": "extra"})
    hits = check_summary(r, "ferry to the island")
    assert hits[0]["file"] == "extra/zanzibar-trip.md" and all(h["file"].startswith("extra/") for h in hits), hits


@pytest.mark.anyio
async def test_mcp_query_with_vectors_and_with_a_failing_backend(mcp, fake):
    query = "zanzibar cluster region"
    keyword = check_summary(await tool(mcp, "search", {"query": query}), query)
    mark = fake.mark()
    hybrid = check_summary(await tool(mcp, "query", {"query": query}), query)
    assert fake.embedded_texts(mark) == [query], "query did not use vector search"
    assert hybrid[0]["file"] == display(PLAN)
    assert {h["file"] for h in keyword} < {h["file"] for h in hybrid}

    with fake.failing("embed"):
        r = await mcp.call_tool("query", {"query": query})
        assert r.is_error is not True, dump(r)
        degraded = check_summary(r, query)
        assert [h["file"] for h in degraded] == [h["file"] for h in keyword]
        r = await mcp.call_tool("vsearch", {"query": query})
        assert r.is_error is True, dump(r)
        [msg] = texts(r)
        assert msg != NO_VECTORS and "500" in msg and "/v1/embeddings" in msg, msg


@pytest.mark.anyio
async def test_mcp_structured_content_matches_output_schema(mcp):
    schemas = {t.name: t.output_schema for t in (await mcp.list_tools()).tools}
    for name in ("vsearch", "query"):
        r = await tool(mcp, name, {"query": "zanzibar cluster", "minScore": 0.01})
        assert r.structured_content["results"], name
        jsonschema.validate(r.structured_content, schemas[name])


@pytest.mark.anyio
async def test_mcp_status(mcp):
    r = await tool(mcp, "status")
    s = r.structured_content
    assert s["hasVectorIndex"] is True and s["needsEmbedding"] == 0, s
    assert s["totalDocuments"] == len(CORPUS) + len(EXTRA)
    [text] = texts(r)
    assert "  Needs embedding: 0\n  Vector index: yes\n" in text, text
