"""Wiki pages (issue 68) on two `quarry serve` nodes over one PostgreSQL database and bucket.

An agent with the official MCP Python SDK (default mode) is connected to node A, another to
node B. Three documents come from a folder source; five pages citing them are written, spread
over both nodes and over time. Then every page reads the same on every node; a source file is
edited and the source synced on B: on both nodes exactly the pages citing the changed lines
turn stale (with the old and new text), ``lint_wiki`` says so, and a search marks the stale
page's hit; B's agent rewrites a stale page on the version ``read_page`` gave and it is fresh
on both nodes, while A's agent, writing on the version it had read before, is refused with how
to recover and changes nothing anywhere. Two agents creating the same page at once, one on
each node: exactly one wins.

PostgreSQL only (``QUARRY_TEST_BACKEND=postgres``): the embedded store is one machine's.
Cross-node waits are bounded polls (:func:`until`), never fixed sleeps.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
import requests
from mcp import Client

from conftest import backend, db_rows, make_home, second_node, start_server, wait_ready

pytestmark = pytest.mark.skipif(backend() != "postgres", reason="several nodes need the PostgreSQL backend")

KB = "knowledge"  # the connection's resource by default

DOCS = {
    "launch.md": "# Launch plan\n\nThe launch plan covers the spring release of the harbour app.\n\n"
                 "## Date\n\nThe launch is on 4 May, at the harbour office.\nPress is invited for ten o'clock.\n\n"
                 "## Risks\n\nThe app store review may take a week.\n",
    "budget.md": "# Budget\n\nThe budget for the release is 40,000 EUR.\nIt was approved in March.\n",
    "team.md": "# Team\n\nAnn leads the release; Bob runs the support desk.\n",
}
# launch.md line 7 is the date (the line the edit changes), line 8 the press call, line 3 the intro.
DATE_LINE = "The launch is on 4 May, at the harbour office."
PRESS_LINE = "Press is invited for ten o'clock."


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("wiki-nodes")
    folder = root / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    a = make_home(quarry_bin, corpus, root / "a", env={"QUARRY_EMBED_MODEL": "none"})
    b = second_node(a, root / "b")
    r = a.run("kb", "create", KB)
    assert r.returncode == 0, r.stderr
    r = a.run("source", "add", KB, "--folder", str(folder), "--json")
    assert r.returncode == 0, r.stderr
    source = json.loads(r.stdout)["id"]
    r = a.run("source", "sync", source)
    assert r.returncode == 0, r.stderr
    srv_a = start_server(a, logdir=root / "logs-a")
    srv_b = start_server(b, logdir=root / "logs-b")
    try:
        wait_ready(srv_a)
        wait_ready(srv_b)
        yield {"a": srv_a, "b": srv_b, "home_a": a, "folder": folder, "source": source}
    finally:
        for s in (srv_a, srv_b):
            if s.proc.poll() is None:
                s.stop()


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def ok(c, tool: str, args: dict) -> dict:
    r = await c.call_tool(tool, args)
    assert r.is_error is not True, text_of(r)
    return r.structured_content


async def refused(c, tool: str, args: dict) -> str:
    r = await c.call_tool(tool, args)
    assert r.is_error is True, text_of(r)
    return text_of(r)


async def until(what: str, probe, done, timeout: float = 60, every: float = 0.2):
    """Calls `probe()` until `done(answer)`; returns the answer, or fails with the last one
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await probe()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s; last answer:\n{answer}"
        await anyio.sleep(every)


async def hit(c, query: str, file_name: str) -> dict:
    """The best keyword passage of `file_name` for `query` (waits until the node has it)."""
    found = await until(f"{file_name} for {query!r}",
                        lambda: ok(c, "knowledge_search", {"query": query, "search_mode": "keyword", "min_score": 0}),
                        lambda f: any(h["knowledge_filename"] == file_name for h in f["results"]))
    return next(h for h in found["results"] if h["knowledge_filename"] == file_name)


async def index_of(c) -> dict[str, tuple]:
    """The wiki's index on `c`'s node: slug → (version, stale, type, title)."""
    index = await ok(c, "wiki_index", {"limit": 50})
    assert "next" not in index, index
    assert index["total"] == len(index["pages"]), index
    return {p["slug"]: (p["version"], p["stale"], p["type"], p["title"]) for p in index["pages"]}


async def stale_pages(c) -> set[str]:
    return {slug for slug, (_, stale, _, _) in (await index_of(c)).items() if stale}


def page_facts(page: dict) -> dict:
    """What must be the same wherever a page is read: every field of read_page's answer."""
    facts = {k: page[k] for k in ("slug", "title", "type", "status", "stale", "version", "updated_at",
                                  "written_by", "tags", "body", "sources", "links", "backlinks")}
    return facts | {"stale_reasons": page.get("stale_reasons", [])}


async def page_hits(c, query: str) -> dict[str, dict]:
    """The wiki_page marks of the page hits a keyword search for `query` gives, by slug."""
    found = await ok(c, "knowledge_search", {"query": query, "search_mode": "keyword", "min_score": 0})
    return {h["wiki_page"]["slug"]: h["wiki_page"] for h in found["results"] if h.get("wiki_page")}


def stored_with(home, word: str) -> int:
    """How many stored documents (every version of every page, every document) hold `word`."""
    [(n,)] = db_rows(home.env, home.home, f"SELECT count(*) FROM documents WHERE body LIKE '%{word}%'")
    return n


@pytest.mark.anyio
async def test_pages_written_on_both_nodes_read_turn_stale_and_are_rewritten_the_same_everywhere(world):
    a, b, home = world["a"], world["b"], world["home_a"]
    async with Client(a.mcp_url, read_timeout_seconds=60) as on_a, \
            Client(b.mcp_url, read_timeout_seconds=60) as on_b:
        nodes = {"A": on_a, "B": on_b}
        for c in nodes.values():
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"wiki_index", "read_page", "write_page", "lint_wiki"} <= names, names

        # Each agent finds its passages on its own node.
        date = await hit(on_a, "launch harbour office press", "launch.md")
        budget = await hit(on_b, "budget approved March", "budget.md")
        team = await hit(on_b, "support desk", "team.md")
        docid, launch_id = date["id"].split(":")[0], date["knowledge_id"]
        # (node, slug, type, body, sources): "launch" and "schedule" cite the date line (7),
        # "press" only the line after it, "release" the same document's intro (line 3).
        pages = [
            ("A", "launch", "summary", "Pelicanwiki: the launch is on 4 May. Paid from [[budget]].", [f"{docid}:7-8"]),
            ("B", "budget", "entity", "The release has 40,000 EUR.", [budget["id"]]),
            ("A", "press", "how-to", "Pelicanwiki press: invite them for ten. See [[launch]].",
             [{"document": launch_id, "lines": [8, 8]}]),
            ("B", "schedule", "concept", "The date ([[launch]]) and who runs it ([[team]]).",
             [{"document": launch_id, "lines": [7, 7]}, team["id"]]),
            ("A", "release", "summary", "The spring release of the harbour app; see [[launch]] and [[budget]].",
             [{"document": launch_id, "lines": [3, 3]}, budget["id"]]),
        ]
        written = {}
        for i, (node, slug, kind, body, sources) in enumerate(pages):
            page = await ok(nodes[node], "write_page", {"slug": slug, "title": slug.title(), "body": body, "type": kind,
                                                        "tags": ["release", f"by-{node.lower()}"], "sources": sources})
            assert page["stale"] is False and page["slug"] == slug and page["body"] == body, page
            assert page["written_by"]["via"] == "mcp", page
            written[slug] = page
            await anyio.sleep((0.4, 1.1, 0.7)[i % 3])  # spread over time
        assert len({p["version"] for p in written.values()}) == 5
        launch_v1 = written["launch"]["version"]

        # Every page reads the same on every node, at the version its writer got.
        expected_index = {slug: (p["version"], False, p["type"], p["title"]) for slug, p in written.items()}
        for label, c in nodes.items():
            await until(f"node {label}'s index", lambda c=c: index_of(c), lambda i: i == expected_index)
        seen = {}
        for slug, page in written.items():
            views = {label: page_facts(await ok(c, "read_page", {"slug": slug})) for label, c in nodes.items()}
            assert views["A"] == views["B"], (slug, views)
            assert views["A"]["version"] == page["version"] and views["A"]["body"] == page["body"], views["A"]
            seen[slug] = views["A"]
        assert seen["launch"]["sources"][0]["text"] == f"{DATE_LINE}\n{PRESS_LINE}", seen["launch"]
        assert seen["launch"]["backlinks"] == ["press", "release", "schedule"], seen["launch"]
        assert seen["schedule"]["links"] == ["launch", "team"], seen["schedule"]
        assert seen["budget"]["tags"] == ["release", "by-b"], seen["budget"]

        # The date changes in the folder; node B syncs the source (REST, as its owner).
        (world["folder"] / "launch.md").write_text(DOCS["launch.md"].replace("4 May", "11 May"))
        r = requests.post(b.url(f"/api/v1/sources/{world['source']}/sync"), timeout=120)
        assert r.status_code == 200, r.text
        stale = {"launch", "schedule"}
        for label, c in nodes.items():
            await until(f"node {label}'s stale pages", lambda c=c: stale_pages(c), lambda s: s == stale)
        lints = {}
        for label, c in nodes.items():
            for slug in written:
                page = await ok(c, "read_page", {"slug": slug})
                assert page["stale"] is (slug in stale), (label, page)
                assert page["version"] == written[slug]["version"], (label, page)
                if slug in stale:
                    [reason] = page["stale_reasons"]
                    assert "4 May" in reason and "11 May" in reason and "lines 7-" in reason, (label, reason)
                    changed = [s for s in page["sources"] if s["state"] == "changed"]
                    assert len(changed) == 1 and "11 May" in changed[0]["text"], (label, page["sources"])
                else:
                    assert page.get("stale_reasons", []) == [], (label, page)
                    assert all(s["state"] == "current" for s in page["sources"]), (label, page["sources"])
            r = await c.call_tool("lint_wiki", {})
            assert r.is_error is not True, text_of(r)
            findings = r.structured_content["findings"]
            assert sorted(f["page"] for f in findings if f["kind"] == "stale") == sorted(stale), (label, findings)
            for slug in stale:
                assert f"- [stale] {slug}: lines 7-" in text_of(r), (label, text_of(r))
            lints[label] = findings
        assert lints["A"] == lints["B"], lints

        # A search on either node marks the stale page's hit, and the current one's as current.
        for label, c in nodes.items():
            marks = await until(f"node {label}'s page hits", lambda c=c: page_hits(c, "pelicanwiki"),
                                lambda m: {"launch", "press"} <= set(m))
            assert marks["launch"]["stale"] is True, (label, marks)
            assert any("11 May" in x and "4 May" in x for x in marks["launch"]["stale_reasons"]), (label, marks)
            assert marks["press"]["stale"] is False and not marks["press"].get("stale_reasons"), (label, marks)

        # Both agents read "launch" (v1). B's agent rewrites it from the passage as it is now.
        read_a = await ok(on_a, "read_page", {"slug": "launch"})
        read_b = await ok(on_b, "read_page", {"slug": "launch"})
        assert read_a["version"] == read_b["version"] == launch_v1
        fresh = await hit(on_b, "launch harbour office press 11", "launch.md")
        assert fresh["knowledge_id"] == launch_id and fresh["id"].split(":")[0] != docid, fresh
        new_body = "Pelicanwiki: the launch is on 11 May. Paid from [[budget]]."
        v2 = await ok(on_b, "write_page", {"slug": "launch", "title": "Launch", "body": new_body, "type": "summary",
                                           "tags": ["release", "by-b"], "base_version": read_b["version"],
                                           "sources": [f"{fresh['id'].split(':')[0]}:7-8"]})
        assert v2["stale"] is False and v2["version"] != launch_v1, v2
        for label, c in nodes.items():
            await until(f"node {label}'s stale pages after the rewrite", lambda c=c: stale_pages(c),
                        lambda s: s == {"schedule"})
            page = await ok(c, "read_page", {"slug": "launch"})
            assert (page["version"], page["stale"], page["body"]) == (v2["version"], False, new_body), (label, page)
            assert page["sources"][0]["state"] == "current" and "11 May" in page["sources"][0]["text"], (label, page)

        # A's agent, still on v1, writes: refused with the version to merge with and how.
        before = {label: (await index_of(c), page_facts(await ok(c, "read_page", {"slug": "launch"})))
                  for label, c in nodes.items()}
        assert stored_with(home, "Zebrafinch") == 0
        late = await refused(on_a, "write_page", {"slug": "launch", "title": "Launch", "body": "Zebrafinch: late.",
                                                  "base_version": read_a["version"],
                                                  "sources": [{"document": launch_id, "lines": [7, 8]}]})
        assert v2["version"] in late and launch_v1 in late and "read_page" in late and "base_version" in late, late
        after = {label: (await index_of(c), page_facts(await ok(c, "read_page", {"slug": "launch"})))
                 for label, c in nodes.items()}
        assert after == before, (before, after)
        assert stored_with(home, "Zebrafinch") == 0, "the refused version was stored"
        assert stored_with(home, "the launch is on 11 May") >= 1  # the query does see pages


@pytest.mark.anyio
async def test_two_agents_creating_the_same_page_at_once_on_two_nodes_exactly_one_wins(world):
    a, b, home = world["a"], world["b"], world["home_a"]
    docs = requests.get(a.url(f"/api/v1/knowledge-bases/{KB}/documents"), timeout=30).json()["data"]
    team = next(d for d in docs if d["file_name"] == "team.md")
    async with Client(a.mcp_url, read_timeout_seconds=60) as on_a, \
            Client(b.mcp_url, read_timeout_seconds=60) as on_b:
        nodes = {"A": on_a, "B": on_b}
        for round_ in range(6):
            slug = f"race-{round_}"
            answers: dict[str, object] = {}
            go = anyio.Event()

            async def create(label: str, c) -> None:
                await go.wait()
                answers[label] = await c.call_tool("write_page", {
                    "slug": slug, "title": f"Race {round_}", "body": f"Racer{label}{round_} wrote this.",
                    "sources": [{"document": team["id"], "lines": [3, 3]}]})

            async with anyio.create_task_group() as tg:
                for label, c in nodes.items():
                    tg.start_soon(create, label, c)
                await anyio.sleep(0.05)
                go.set()
            won = [label for label, r in answers.items() if r.is_error is not True]
            lost = [label for label, r in answers.items() if r.is_error is True]
            assert len(won) == 1 and len(lost) == 1, {k: text_of(r) for k, r in answers.items()}
            winner = answers[won[0]].structured_content
            message = text_of(answers[lost[0]])
            assert "read_page" in message and slug in message, message
            for label, c in nodes.items():
                page = await ok(c, "read_page", {"slug": slug})
                assert (page["version"], page["body"]) == (winner["version"], f"Racer{won[0]}{round_} wrote this."), \
                    (label, page)
            assert stored_with(home, f"Racer{lost[0]}{round_} ") == 0, f"round {round_}: the loser's version was stored"
            assert stored_with(home, f"Racer{won[0]}{round_} ") == 1
        for label, c in nodes.items():
            index = await index_of(c)
            assert sorted(s for s in index if s.startswith("race-")) == [f"race-{i}" for i in range(6)], (label, index)
