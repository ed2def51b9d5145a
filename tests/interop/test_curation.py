"""People curate (issue 44, item 6), through the real binary over REST and MCP.

A knowledge base's writer sees a document's chunks, edits one (embedded before the answer:
vector search ranks the new text at once), disables one (no search finds it), restores
the text as cut, and re-cuts the document with other chunk settings (edits kept where the
new cut yields their chunk again). A viewer sees the chunks and may change nothing; a
document it may not read has no chunks for it. Every bad change is refused with a clear
error and changes nothing. ``explain`` on the knowledge-search API adds each result's
evidence and the filter as understood without changing the ranking or a score. Over MCP the
official Python SDK (default mode) finds what the curation left. A held edit surviving a
re-sync of unchanged text is checked through a real folder source in the engine's tests
(`curation_tests.rs`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import pytest
import requests
from conftest import QuarryHome, QuarryServer, backend, make_home, second_node, start_server, wait_ready
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# Three sections of about 200 characters: one chunk each at 300 characters without overlap.
MANUAL = """# Harbour manual

## Moorings

The mooring buoys are checked every spring by the harbourmaster, who replaces worn shackles and chains, records each buoy's position, and posts the list of free moorings at the office.

## Signals

A red flag means the harbour is closed. Signals are raised on the mast at the harbour entrance and repeated on the radio every hour while they stand.

## Fuel

Diesel is sold at the north quay from six until noon; boats queue along the wall in the order they arrive, and payment is by card only.
"""
SECRET = "# Board minutes\n\nThe vicuna acquisition was approved by the board in closed session.\n"
EDITED = "## Fuel\n\nPetrol and diesel are now sold at the south quay around the clock by the fuel attendant."


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@dataclass
class World:
    home: QuarryHome
    srv: QuarryServer
    kb: str = ""
    doc: str = ""
    secret: str = ""
    tokens: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str):
        r = self.home.run(*args)
        assert r.returncode == 0, f"quarry {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r

    def api(self, method: str, path: str, who: str = "owner", **kw) -> requests.Response:
        headers = kw.pop("headers", {})
        headers["Authorization"] = f"Bearer {self.tokens[who]}"
        return requests.request(method, self.srv.url(path), headers=headers, timeout=120, **kw)

    def chunks(self, who: str = "owner", doc: str | None = None) -> dict:
        r = self.api("GET", f"/api/v1/knowledge-bases/{self.kb}/documents/{doc or self.doc}/chunks", who)
        assert r.status_code == 200, r.text
        return r.json()

    def patch(self, chunk: str, body, who: str = "owner") -> requests.Response:
        return self.api("PATCH", f"/api/v1/knowledge-bases/{self.kb}/documents/{self.doc}/chunks/{chunk}", who,
                        data=body if isinstance(body, str) else json.dumps(body),
                        headers={"Content-Type": "application/json"})

    def search(self, question: str, who: str = "owner", **kw) -> dict:
        body = {"question": question, "knowledge_base_ids": [self.kb], "min_score": 0, "rerank": False, **kw}
        r = self.api("POST", "/api/v1/knowledge-search", who, json=body)
        assert r.status_code == 200, r.text
        return r.json()

    def contents(self, question: str, mode: str = "keyword", **kw) -> list[str]:
        return [h["content"] for h in self.search(question, search_mode=mode, **kw)["results"]]


def require_model() -> str:
    model = os.environ.get("QUARRY_TEST_MINILM")
    if not model:
        if os.environ.get("CI") == "true":
            pytest.fail("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
        pytest.skip("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
    return model


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    model = require_model()
    root = tmp_path_factory.mktemp("curation")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_EMBED_MODEL": model})
    w = World(home=home, srv=None)  # type: ignore[arg-type]
    w.cli("space", "create", "acme")
    for user, role in (("owner", "owner"), ("ann", "viewer")):
        w.cli("user", "add", user)
        w.cli("space", "grant", "acme", user, "--role", role)
        # The owner's own credential manages (who reads a document); ann's is plain.
        manage = ["--manage"] if user == "owner" else []
        w.tokens[user] = json.loads(w.cli("--json", "token", "create", "--user", user, "--spaces", "acme",
                                          *manage).stdout)["token"]
    serving = second_node(home, root / "node-b") if backend() == "postgres" else home
    w.srv = start_server(serving, "--auth", "token", logdir=root / "logs")
    wait_ready(w.srv)
    r = w.api("POST", "/api/v1/knowledge-bases", json={"name": "harbour", "chunk_size": 300, "chunk_overlap": 0})
    assert r.status_code == 201, r.text
    w.kb = r.json()["data"]["id"]
    files = [("files", ("harbour.md", MANUAL.encode(), "text/markdown")),
             ("files", ("board.md", SECRET.encode(), "text/markdown"))]
    r = w.api("POST", f"/api/v1/knowledge-bases/{w.kb}/documents", files=files)
    assert r.status_code == 202, r.text
    w.doc, w.secret = (o["document"]["id"] for o in r.json()["data"])
    r = w.api("PATCH", f"/api/v1/knowledge-bases/{w.kb}/documents/{w.secret}", json={"readers": []})
    assert r.status_code == 200, r.text
    # Ready: converted, indexed and embedded.
    deadline = time.monotonic() + 300
    while True:
        r = w.api("GET", f"/api/v1/knowledge-bases/{w.kb}/documents")
        assert r.status_code == 200, r.text
        status = {d["id"]: d["status"] for d in r.json()["data"]}
        if status.get(w.doc) == status.get(w.secret) == "ready":
            break
        assert "failed" not in status.values() and time.monotonic() < deadline, (status, w.srv.stderr()[-3000:])
        time.sleep(0.3)
    yield w
    w.srv.stop()


def by_text(chunks: dict, needle: str) -> dict:
    found = [c for c in chunks["data"] if needle in c["content"]]
    assert len(found) == 1, (needle, chunks)
    return found[0]


def test_a_writer_edits_disables_and_restores_chunks_and_every_search_sees_it(world):
    w = world
    listed = w.chunks()
    assert listed["total"] == 3 and listed["chunking"] == {"chunk_size": 300, "chunk_overlap": 0, "from": "knowledge_base"}, listed
    assert all(c["enabled"] and not c["edited"] and "original_content" not in c for c in listed["data"]), listed
    fuel = by_text(listed, "Diesel is sold")

    # Edit: embedded before the answer, so vector search ranks the new text at once.
    r = w.patch(fuel["id"], {"content": EDITED})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["embedding"] == "done", body
    c = body["data"]
    assert c["edited"] and c["enabled"] and c["content"] == EDITED and c["original_content"] == fuel["content"], c
    assert c["edited_by"].startswith("owner") and c["id"] == fuel["id"], c
    assert any("south quay" in t for t in w.contents("petrol")), w.contents("petrol")
    assert not any("north quay" in t for t in w.contents("noon")), "the text as cut is no longer searched"
    top = w.search("where can I buy petrol at night?", search_mode="vector", top_k=1)["results"][0]
    assert "south quay" in top["content"], top

    # Disable the signals chunk: neither retriever finds it; the list still shows it.
    signals = by_text(listed, "red flag")
    r = w.patch(signals["id"], {"enabled": False})
    assert r.status_code == 200 and r.json()["data"]["enabled"] is False, r.text
    assert w.contents("flag") == []
    assert not any("red flag" in t for t in w.contents("what does a red flag on the mast mean", "vector", top_k=10))
    assert by_text(w.chunks(), "red flag")["enabled"] is False

    # Over MCP (the SDK's default mode): the same.
    async def over_mcp():
        headers = {"Authorization": f"Bearer {w.tokens['owner']}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as hc, \
                Client(streamable_http_client(w.srv.mcp_url, http_client=hc), read_timeout_seconds=60) as client:
            found = await client.call_tool("knowledge_search", {"query": "petrol", "search_mode": "keyword", "min_score": 0})
            hidden = await client.call_tool("knowledge_search", {"query": "flag", "search_mode": "keyword", "min_score": 0})
            return found.structured_content, hidden.structured_content
    found, hidden = anyio.run(over_mcp)
    assert any("south quay" in h["content"] for h in found["results"]), found
    assert hidden["results"] == [], hidden

    # Enable and restore: as cut again, searchable by both retrievers.
    r = w.patch(signals["id"], {"enabled": True})
    assert r.status_code == 200 and r.json()["embedding"] == "done", r.text
    r = w.patch(fuel["id"], {"content": None})
    assert r.status_code == 200, r.text
    c = r.json()["data"]
    assert not c["edited"] and c["content"] == fuel["content"] and "edited_by" not in c, c
    assert any("red flag" in t for t in w.contents("flag"))
    assert any("north quay" in t for t in w.contents("noon"))
    assert w.contents("petrol") == []
    assert [c["content"] for c in w.chunks()["data"]] == [c["content"] for c in listed["data"]]


def test_bad_changes_and_readers_are_refused_and_change_nothing(world):
    w = world
    before = w.chunks()
    first = before["data"][0]["id"]
    for body, status, words in (
        ({}, 400, "give \"content\""),
        ({"content": "   "}, 400, "must not be empty"),
        ({"content": "x" * 20_001}, 400, "at most 20000"),
        ({"content": "text", "colour": "red"}, 400, "colour"),
        ({"enabled": "no"}, 400, "enabled"),
        ("{not json", 400, ""),
    ):
        r = w.patch(first, body)
        assert r.status_code == status, (body, r.status_code, r.text)
        assert words in r.json()["detail"], (body, r.text)
    r = w.patch("0000000000000000", {"enabled": False})
    assert r.status_code == 404 and "list the chunks again" in r.json()["detail"], r.text

    # A viewer reads the chunks and changes nothing; a document it may not read has none.
    assert w.chunks("ann")["total"] == before["total"]
    r = w.patch(first, {"enabled": False}, who="ann")
    assert r.status_code == 403, r.text
    r = w.api("POST", f"/api/v1/knowledge-bases/{w.kb}/documents/{w.doc}/reparse", "ann", json={"chunk_size": 200})
    assert r.status_code == 403, r.text
    hidden = w.api("GET", f"/api/v1/knowledge-bases/{w.kb}/documents/{w.secret}/chunks", "ann")
    missing = w.api("GET", f"/api/v1/knowledge-bases/{w.kb}/documents/0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9/chunks", "ann")
    assert hidden.status_code == missing.status_code == 404, (hidden.text, missing.text)
    assert w.chunks(doc=w.secret)["total"] == 1, "the owner reads it"

    # Bad re-cuts.
    for body, words in (
        ({"chunk_size": 50}, "between 100 and"),
        ({"chunk_size": 300, "chunk_overlap": 150}, "less than half"),
        ({"chunk_overlap": 10}, "needs chunk_size"),
        ({"chunk_size": -5}, "chunk_size"),
        ({"size": 300}, "size"),
    ):
        r = w.api("POST", f"/api/v1/knowledge-bases/{w.kb}/documents/{w.doc}/reparse", json=body)
        assert r.status_code == 400 and words in r.json()["detail"], (body, r.text)
    assert w.chunks() == before


def test_a_recut_with_other_settings_keeps_the_edits_its_chunks_match(world):
    w = world
    before = w.chunks()
    moorings = by_text(before, "mooring buoys")
    r = w.patch(moorings["id"], {"enabled": False})
    assert r.status_code == 200, r.text
    url = f"/api/v1/knowledge-bases/{w.kb}/documents/{w.doc}/reparse"
    r = w.api("POST", url, json={"chunk_size": 120, "chunk_overlap": 10})
    assert r.status_code == 200, r.text
    cut = r.json()["data"]
    assert cut["chunks"] > before["total"] and cut["chunking"] == {"chunk_size": 120, "chunk_overlap": 10, "from": "document"}, cut
    assert cut["edits_kept"] + cut["edits_unmatched"] == 1 and cut["embedding"] == "queued", cut
    small = w.chunks()
    assert small["total"] == cut["chunks"] and all(len(c["content"]) <= 120 for c in small["data"]), small
    # Keyword search finds the new, smaller passages at once (each shown under its heading).
    found = w.contents("harbourmaster")
    assert found and all(len(t.split("\n", 1)[-1]) <= 120 for t in found), found
    # Back to the knowledge base's settings: the disabled chunk is disabled again.
    r = w.api("POST", url, json={})
    assert r.status_code == 200, r.text
    back = r.json()["data"]
    assert back["chunks"] == before["total"] and back["edits_kept"] == 1 and back["chunking"]["from"] == "knowledge_base", back
    assert by_text(w.chunks(), "mooring buoys")["enabled"] is False
    assert w.contents("harbourmaster") == []
    r = w.patch(moorings["id"], {"enabled": True})
    assert r.status_code == 200, r.text


def test_explain_adds_evidence_and_the_filter_without_changing_the_ranking(world):
    w = world
    for mode in ("keyword", "vector", "hybrid"):
        plain = w.search("fuel at the quay", search_mode=mode)
        explained = w.search("fuel at the quay", search_mode=mode, explain=True)
        assert [(h["id"], h["score"]) for h in plain["results"]] == [(h["id"], h["score"]) for h in explained["results"]], mode
        assert "explain" not in plain and all("evidence" not in h for h in plain["results"]), plain
        assert explained["explain"] == {"filter": None, "documents_matching_filter": None, "as_of": None}, explained
        above = 1.0
        for h in explained["results"]:
            e = h["evidence"]
            # The score is the passage's probability capped by the results above it
            # (docs/search-scores.md): a list ranked by BM25 may hold a likelier passage
            # below a less likely one.
            assert h["score"] == min(e["retrieval"], above) and "rerank" not in e, (mode, h)
            assert e.get("keyword") or e.get("vector"), h
            above = h["score"]
    # A filter in qmd's shape, as understood; one that matches nothing; bad ones.
    qmd = {"key": "title", "op": "eq", "value": "Harbour manual"}
    found = w.search("quay", explain=True, filter=qmd)
    assert found["explain"]["filter"] == {"field": "title", "operator": "eq", "value": "Harbour manual"}, found["explain"]
    assert found["explain"]["documents_matching_filter"] == 1 and found["results"], found
    none = w.search("quay", explain=True, filter={"field": "title", "operator": "eq", "value": "No such title"})
    assert none["results"] == [] and none["explain"]["documents_matching_filter"] == 0, none
    # The owner's filter counts the document a viewer may not read; the viewer's does not.
    every = {"field": "title", "operator": "exists"}
    assert w.search("quay", explain=True, filter=every)["explain"]["documents_matching_filter"] == 2
    assert w.search("quay", "ann", explain=True, filter=every)["explain"]["documents_matching_filter"] == 1
    for bad, words in (({"field": "colour", "operator": "eq", "value": "red"}, "colour"),
                       ({"field": "title", "operator": "like", "value": "x"}, "unknown operator")):
        r = w.api("POST", "/api/v1/knowledge-search", json={"question": "quay", "explain": True, "filter": bad})
        assert r.status_code == 400 and words in r.json()["detail"], r.text
