"""Typed metadata and the one filter grammar (issue 44, items 1–2), through every surface.

A folder collection ``meta`` holds three Markdown files with front matter — two in YAML, one
in TOML — giving ``status``, a number ``priority``, a ``date``, a ``tags`` list and a nested
``author.name``; every body holds the word "lighthouse", and one front matter holds a word
("zephyrine") no body holds. Filters that narrow (eq, gt on numbers, a date range, a list
``contains``, and/or/not), a filter that matches nothing, a bad field and a bad operator are
checked over REST (``/search``, ``/query``), over MCP with the official Python SDK (``search``,
``query``) and with the CLI; results carry ``metadata``; front matter is neither searchable
nor shown in snippets; discovery answers over REST (``/api/v1/metadata``), the MCP
``metadata`` tool and ``quarry metadata --json``; and a filter never moves a score.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import requests
from conftest import QuarryHome, QuarryServer, make_home, start_server
from mcp import Client

COLL = "meta"

DOCS = {
    "alpha.md": (
        "---\n"
        "status: published\n"
        "priority: 3\n"
        "date: 2026-07-15\n"
        "tags: [rust, search]\n"
        "author:\n"
        "  name: Ann\n"
        "codename: zephyrine\n"
        "---\n"
        "# Alpha\n\nThe lighthouse keeper writes about search engines and ranking.\n"
    ),
    "bravo.md": (
        "---\n"
        "status: draft\n"
        "priority: 1\n"
        "date: 2026-05-01\n"
        "tags: [python]\n"
        "author:\n"
        "  name: Bob\n"
        "---\n"
        "# Bravo\n\nA lighthouse on the coast, with notes on tides.\n"
    ),
    "charlie.md": (
        "+++\n"
        'status = "published"\n'
        "priority = 5\n"
        "date = 2026-06-10\n"
        'tags = ["rust"]\n'
        "[author]\n"
        'name = "Cy"\n'
        "+++\n"
        "# Charlie\n\nThe lighthouse lamp and its lenses.\n"
    ),
}

PUBLISHED = {"field": "status", "operator": "eq", "value": "published"}

# (filter, the documents it keeps)
NARROWING = [
    (PUBLISHED, {"alpha.md", "charlie.md"}),
    ({"field": "priority", "operator": "gt", "value": 4}, {"charlie.md"}),
    ({"field": "date", "operator": "gt", "value": "2026-06-01"}, {"alpha.md", "charlie.md"}),
    ({"field": "tags", "operator": "contains", "value": "python"}, {"bravo.md"}),
    ({"and": [PUBLISHED, {"not": {"field": "tags", "operator": "contains", "value": "search"}}]}, {"charlie.md"}),
    (
        {"or": [{"field": "priority", "operator": "lt", "value": 2}, {"field": "author.name", "operator": "eq", "value": "Cy"}]},
        {"bravo.md", "charlie.md"},
    ),
]
NOTHING = {"field": "status", "operator": "eq", "value": "archived"}
BAD_FIELD = {"field": "colour", "operator": "eq", "value": "red"}
BAD_OPERATOR = {"field": "status", "operator": "eqq", "value": "published"}


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("metadata")
    folder = root / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    model = os.environ.get("QUARRY_TEST_MINILM")
    if not model:
        if os.environ.get("CI") == "true":
            pytest.fail("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
        pytest.skip("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_EMBED_MODEL": model})
    r = home.run("collection", "add", str(folder), "--name", COLL)
    assert r.returncode == 0, r.stderr
    r = home.run("index", COLL)
    assert r.returncode == 0, r.stderr
    # Embedded too: a filtered vector search runs (exactly, over the matched documents' chunks).
    r = home.run("embed", "-c", COLL, timeout=900)
    assert r.returncode == 0, r.stderr
    srv = start_server(home, logdir=root / "logs")
    yield home, srv
    srv.stop()


def names(hits: list[dict]) -> set[str]:
    return {h["file"].rsplit("/", 1)[-1] for h in hits}


def rest(srv: QuarryServer, path: str, body: dict) -> requests.Response:
    return requests.post(srv.url(path), json=body, timeout=30)


@pytest.mark.parametrize("path", ["/search", "/vsearch", "/query"])
def test_rest_filters_narrow_and_keep_scores(world, path):
    _, srv = world
    r = rest(srv, path, {"query": "lighthouse", "collection": COLL, "min_score": 0})
    assert r.status_code == 200, r.text
    all_hits = r.json()["results"]
    assert names(all_hits) == set(DOCS)
    score = {h["file"]: h["score"] for h in all_hits}
    for h in all_hits:
        assert h["metadata"]["status"] in ("published", "draft"), h
        assert "status:" not in h["snippet"] and "+++" not in h["snippet"] and "---" not in h["snippet"], h
    alpha = next(h for h in all_hits if h["file"].endswith("alpha.md"))
    assert alpha["metadata"]["priority"] == 3 and alpha["metadata"]["author.name"] == "Ann", alpha
    assert alpha["metadata"]["tags"] == ["rust", "search"], alpha
    for flt, expected in NARROWING:
        r = rest(srv, path, {"query": "lighthouse", "collection": COLL, "min_score": 0, "filter": flt})
        assert r.status_code == 200, (flt, r.text)
        hits = r.json()["results"]
        assert names(hits) == expected, flt
        for h in hits:  # a filter decides which documents come back, never how they score
            assert h["score"] == pytest.approx(score[h["file"]], abs=1e-9), (flt, h)
    # The filter as a JSON string is the same filter.
    r = rest(srv, path, {"query": "lighthouse", "collection": COLL, "min_score": 0, "filter": json.dumps(PUBLISHED)})
    assert r.status_code == 200 and names(r.json()["results"]) == {"alpha.md", "charlie.md"}, r.text
    if path == "/query":
        assert "vector" in " ".join(r.json().get("stages", [])), r.json()
    r = rest(srv, path, {"query": "lighthouse", "collection": COLL, "min_score": 0, "filter": NOTHING})
    assert r.status_code == 200 and r.json()["results"] == [], r.text


@pytest.mark.parametrize("path", ["/search", "/vsearch", "/query"])
def test_rest_bad_filters_are_clear_400s(world, path):
    _, srv = world
    r = rest(srv, path, {"query": "lighthouse", "filter": BAD_FIELD})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["error_code"] and "colour" in body["detail"], body
    for known in ("status", "priority", "author.name", "collection"):
        assert known in body["detail"], body
    r = rest(srv, path, {"query": "lighthouse", "filter": BAD_OPERATOR})
    assert r.status_code == 400, r.text
    assert "eqq" in r.json()["detail"], r.json()


def test_front_matter_is_not_searchable(world):
    _, srv = world
    r = rest(srv, "/search", {"query": "zephyrine"})
    assert r.status_code == 200 and r.json()["results"] == [], r.text


def check_report(report: dict, documents: int = 3):
    assert report["documents"] == documents, report
    fields = {f["field"]: f for f in report["fields"]}
    for builtin in ("collection", "path", "title", "indexed"):
        assert builtin in fields, sorted(fields)
    assert fields["status"]["types"] == ["string"] and fields["status"]["documents"] == 3
    top = {json.dumps(v["value"]): v["count"] for v in fields["status"]["top_values"]}
    assert top == {'"published"': 2, '"draft"': 1}, fields["status"]
    assert fields["priority"]["types"] == ["number"], fields["priority"]
    assert fields["date"]["types"] == ["date"], fields["date"]
    assert "list" in fields["tags"]["types"], fields["tags"]
    tags = {v["value"]: v["count"] for v in fields["tags"]["top_values"]}
    assert tags["rust"] == 2 and tags["python"] == 1, tags
    assert fields["author.name"]["documents"] == 3


def test_rest_discovery(world):
    _, srv = world
    r = requests.get(srv.url("/api/v1/metadata"), params={"collection": COLL, "top": 5}, timeout=30)
    assert r.status_code == 200, r.text
    check_report(r.json())
    r = requests.get(
        srv.url("/api/v1/metadata"), params={"collection": COLL, "filter": json.dumps(PUBLISHED)}, timeout=30
    )
    assert r.status_code == 200 and r.json()["documents"] == 2, r.text
    r = requests.get(srv.url("/api/v1/metadata"), params={"top": 500}, timeout=30)
    assert r.status_code == 400, r.text
    r = requests.get(srv.url("/api/v1/metadata"), params={"filter": json.dumps(BAD_OPERATOR)}, timeout=30)
    assert r.status_code == 400 and "eqq" in r.json()["detail"], r.text


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.mark.anyio
async def test_mcp_filters_and_discovery(world):
    _, srv = world
    async with Client(srv.mcp_url, read_timeout_seconds=30) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "metadata" in tools
        for name in ("search", "vsearch", "query"):
            assert tools[name].input_schema["properties"]["filter"]["type"] == "object"
        for name in ("search", "query"):
            r = await c.call_tool(name, {"query": "lighthouse", "collection": COLL})
            assert r.is_error is not True, text_of(r)
            all_hits = r.structured_content["results"]
            score = {h["file"]: h["score"] for h in all_hits}
            assert names(all_hits) == set(DOCS)
            assert all("metadata" in h for h in all_hits), all_hits
            for flt, expected in NARROWING:
                r = await c.call_tool(name, {"query": "lighthouse", "collection": COLL, "filter": flt})
                assert r.is_error is not True, (flt, text_of(r))
                hits = r.structured_content["results"]
                assert names(hits) == expected, flt
                for h in hits:
                    assert h["score"] == pytest.approx(score[h["file"]], abs=1e-9), (flt, h)
            r = await c.call_tool(name, {"query": "lighthouse", "filter": NOTHING})
            assert r.is_error is not True and r.structured_content["results"] == [], text_of(r)
            r = await c.call_tool(name, {"query": "lighthouse", "filter": BAD_FIELD})
            assert r.is_error is True and "colour" in text_of(r) and "status" in text_of(r), text_of(r)
            r = await c.call_tool(name, {"query": "lighthouse", "filter": BAD_OPERATOR})
            assert r.is_error is True and "eqq" in text_of(r), text_of(r)
        r = await c.call_tool("metadata", {"collection": COLL})
        assert r.is_error is not True, text_of(r)
        check_report(r.structured_content)
        assert "status" in text_of(r)
        r = await c.call_tool("metadata", {"collection": COLL, "filter": PUBLISHED, "top": 3})
        assert r.is_error is not True and r.structured_content["documents"] == 2, text_of(r)
        r = await c.call_tool("metadata", {"top": 51})
        assert r.is_error is True, text_of(r)


def cli(home: QuarryHome, *args: str):
    return home.run("--json", *args)


def test_cli_filters_and_discovery(world, tmp_path):
    home, _ = world
    r = cli(home, "search", "lighthouse", "-c", COLL)
    assert r.returncode == 0, r.stderr
    score = {h["file"]: h["score"] for h in json.loads(r.stdout)}
    for flt, expected in NARROWING:
        r = cli(home, "search", "lighthouse", "-c", COLL, "--filter", json.dumps(flt))
        assert r.returncode == 0, (flt, r.stderr)
        hits = json.loads(r.stdout)
        assert names(hits) == expected, flt
        assert all(h["score"] == pytest.approx(score[h["file"]], abs=1e-9) for h in hits)
    f = tmp_path / "filter.json"
    f.write_text(json.dumps(PUBLISHED), encoding="utf-8")
    r = cli(home, "query", "lighthouse", "-c", COLL, "--filter", f"@{f}")
    assert r.returncode == 0, r.stderr
    assert names(json.loads(r.stdout)["results"]) == {"alpha.md", "charlie.md"}
    r = cli(home, "search", "lighthouse", "--filter", json.dumps(NOTHING))
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stderr
    r = cli(home, "search", "lighthouse", "--filter", json.dumps(BAD_FIELD))
    assert r.returncode != 0 and "colour" in r.stderr and "status" in r.stderr, r.stderr
    r = cli(home, "search", "lighthouse", "--filter", json.dumps(BAD_OPERATOR))
    assert r.returncode != 0 and "eqq" in r.stderr, r.stderr
    r = cli(home, "metadata", "-c", COLL)
    assert r.returncode == 0, r.stderr
    check_report(json.loads(r.stdout))
    r = home.run("metadata", "-c", COLL, "--top", "2")
    assert r.returncode == 0 and "status" in r.stdout and "published (2)" in r.stdout, r.stdout


@pytest.mark.anyio
async def test_create_knowledge_metadata_is_filterable(world):
    _, srv = world
    async with Client(srv.mcp_url, read_timeout_seconds=30) as c:
        r = await c.call_tool("create_knowledge", {"content": "# Nested\n\nquokka", "metadata": {"a": {"b": 1}}})
        assert r.is_error is True and "metadata" in text_of(r), text_of(r)
        for content, stage in (("# Kept\n\nThe quokka census, final.", "final"), ("# Other\n\nThe quokka census, draft.", "draft")):
            r = await c.call_tool("create_knowledge", {"content": content, "metadata": {"stage": stage, "rank": 2}})
            assert r.is_error is not True, text_of(r)
        import anyio

        flt = {"field": "stage", "operator": "eq", "value": "final"}
        hits = []
        for _ in range(120):
            r = await c.call_tool("knowledge_search", {"query": "quokka census", "search_mode": "keyword", "min_score": 0, "filter": flt})
            if r.is_error is not True:
                hits = r.structured_content["results"]
                if hits:
                    break
            await anyio.sleep(0.25)
        assert hits and all("final" in h["content"] for h in hits), text_of(r)
        assert all(h["metadata"] == {"stage": "final", "rank": 2} for h in hits), hits
        r = await c.call_tool("query_knowledge", {"query": "quokka census", "min_score": 0, "filter": flt})
        assert r.is_error is not True, text_of(r)
        assert [x["knowledge_title"] for x in r.structured_content["results"]] == ["Kept"], r.structured_content


def test_uploads_carry_given_fields_and_document_properties(world):
    """A REST upload's ``metadata`` form field and a real DOCX's and PDF's own properties
    (author, created) become fields a filter and discovery see; a bad ``metadata`` is a 400
    that stores nothing."""
    from kb_support import api, create_kb, documents, need_docs, wait_for

    docs = need_docs()
    _, srv = world
    kb = create_kb(srv, "props")
    bad = api(srv, "POST", f"/api/v1/knowledge-bases/{kb['id']}/documents",
              files=[("metadata", (None, '{"nested": {"x": 1}}')), ("files", ("n.md", b"# N\n\nwombat", "text/markdown"))])
    assert bad.status_code == 400 and "nested" in bad.text, bad.text
    bad = api(srv, "POST", f"/api/v1/knowledge-bases/{kb['id']}/documents",
              files=[("metadata", (None, "{not json")), ("files", ("n.md", b"# N\n\nwombat", "text/markdown"))])
    assert bad.status_code == 400 and "metadata" in bad.text, bad.text
    assert documents(srv, kb["id"]) == {}

    word = (docs / "docx" / "sample-word2007-images.docx").read_bytes()
    pdf = (docs / "pdf" / "en-fhs-3.0.pdf").read_bytes()
    r = api(srv, "POST", f"/api/v1/knowledge-bases/{kb['id']}/documents", timeout=120,
            files=[("metadata", (None, json.dumps({"team": "docs", "reviewed": "2026-06-02"}))),
                   ("files", ("word.docx", word, "application/octet-stream")),
                   ("files", ("fhs.pdf", pdf, "application/pdf")),
                   ("files", ("fm.md", b"---\nstatus: published\nsecret: quagga\n---\n# Front\n\nThe wombat census.\n", "text/markdown"))])
    assert r.status_code == 202, r.text
    ids = [o["document"]["id"] for o in r.json()["data"]]
    assert all(o["document"]["metadata"] == {"team": "docs", "reviewed": "2026-06-02"} for o in r.json()["data"]), r.text
    settled = wait_for(srv, kb["id"], ids)
    assert all(d["status"] == "ready" for d in settled.values()), settled

    report = requests.get(srv.url("/api/v1/metadata"), params={"collection": "props", "top": 5}, timeout=30).json()
    by_field = {f["field"]: f for f in report["fields"]}
    assert by_field["team"]["documents"] == 3, report
    assert by_field["reviewed"]["types"] == ["date"], report
    assert {"value": "Dr Malcolm Murray", "count": 1} in by_field["author"]["top_values"], report
    assert by_field["created"]["types"] == ["date"], report

    # A knowledge base's Markdown with front matter: its passages are found, the front
    # matter's words are not, and the passage carries the fields.
    found = requests.post(srv.url("/api/v1/knowledge-search"), timeout=60, json={
        "query": "wombat census", "knowledge_base_ids": [kb["id"]], "search_mode": "keyword"}).json()["results"]
    assert [h["knowledge_id"] for h in found] == [ids[2]], found
    assert found[0]["metadata"]["status"] == "published" and "status" not in found[0]["content"], found
    assert requests.post(srv.url("/api/v1/knowledge-search"), timeout=60, json={
        "query": "quagga", "knowledge_base_ids": [kb["id"]], "search_mode": "keyword"}).json()["results"] == []
    r = requests.post(srv.url("/api/v1/knowledge-search"), timeout=60, json={
        "query": "filesystem hierarchy", "knowledge_base_ids": [kb["id"]],
        "filter": {"field": "created", "operator": "gt", "value": "2015-01-01"}})
    assert r.status_code == 200, r.text
    hits = r.json()["results"]
    assert hits, r.json()
    assert {h["knowledge_id"] for h in hits} == {ids[1]}, hits
    # The same search without the filter finds the Word document too, scored alike.
    r = requests.post(srv.url("/api/v1/knowledge-search"), timeout=60, json={
        "query": "filesystem hierarchy sample", "knowledge_base_ids": [kb["id"]], "top_k": 50, "min_score": 0})
    assert ids[0] in {h["knowledge_id"] for h in r.json()["results"]}, r.json()
