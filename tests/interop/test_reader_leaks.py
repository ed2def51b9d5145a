"""What a reader may not read leaks through no side door (issue 65, items 4 and 5).

One home, space ``acme``: ``owner`` (owner), ``ann`` (editor, in group ``hr``), ``bob``
(editor, in no group). Knowledge base ``handbook``.

- **Sync reports** (item 4): a folder source maps ``hr/**`` to ``group:hr``. A sync's report
  names no file bob may not read and counts none — over REST (``GET
  /api/v1/sources/{id}/reports`` and the report ``POST .../sync`` answers bob with), in
  agreement with the source's document count for him — while ann and the owner (the CLI's
  ``quarry source status``) see every line.
- **Entry keys** (item 5): ann's entry with ``key: "comp-plan"``, readable by ``group:hr``
  only; bob's ``create_knowledge`` with that key (the official MCP Python SDK) is answered
  exactly as for a free key — the first version of a chain of his own, since a key names one
  current entry per set of readers — neither superseding nor naming hers; ann and hr keep
  reading it as the current entry, and the history bob reads of a key lists only versions he
  may read.
- **Bytes and the queue** (item 6): an upload of a hidden document's exact bytes is answered as
  if it did not exist, and ``/api/v1/queue`` counts none of its jobs.

Runs on the embedded store and, with ``QUARRY_TEST_BACKEND=postgres``, through a second node.
"""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from conftest import QuarryHome, QuarryServer, backend, make_home, second_node, start_server, wait_ready
from mcp import Client


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@dataclass
class World:
    home: QuarryHome
    srv: QuarryServer
    root: Path
    kb: str
    tokens: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str):
        r = self.home.run(*args)
        assert r.returncode == 0, f"quarry {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r

    def cli_json(self, *args: str):
        return json.loads(self.cli("--json", *args).stdout)


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("reader-leaks")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", "QUARRY_EMBED_MODEL": "none"})
    w = World(home=home, srv=None, root=root, kb="")  # type: ignore[arg-type]
    w.cli("space", "create", "acme")
    for user in ("owner", "ann", "bob"):
        w.cli("user", "add", user)
    w.cli("space", "grant", "acme", "owner", "--role", "owner")
    w.cli("space", "grant", "acme", "ann", "--role", "editor")
    w.cli("space", "grant", "acme", "bob", "--role", "editor")
    w.cli("--space", "acme", "group", "create", "hr")
    w.cli("--space", "acme", "group", "add", "hr", "ann")
    w.kb = w.cli_json("--space", "acme", "kb", "create", "handbook")["id"]
    for user in ("owner", "ann", "bob"):
        w.tokens[user] = w.cli_json("token", "create", "--user", user, "--spaces", "acme")["token"]
    serving = second_node(home, root / "node-b") if backend() == "postgres" else home
    w.srv = start_server(serving, "--auth", "token", logdir=root / "logs")
    wait_ready(w.srv)
    yield w
    w.srv.stop()


def http(w: World, method: str, path: str, user: str, **kw) -> requests.Response:
    headers = {"Authorization": f"Bearer {w.tokens[user]}", **kw.pop("headers", {})}
    return requests.request(method, w.srv.url(path), headers=headers, timeout=60, **kw)


def report_lines(report: dict) -> set[tuple[str, str]]:
    return {(line["path"], line["action"]) for line in report["details"]}


def test_sync_reports_name_and_count_only_what_the_caller_may_read(world):
    w = world
    folder = w.root / "share"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "pay.md").write_text("# Pay\n\nThe walrus pay bands.\n", encoding="utf-8")
    (folder / "hr" / "logo.png").write_bytes(b"\x89PNG not really")
    (folder / "hr" / "old.md").write_text("# Old\n\nThe walrus archive.\n", encoding="utf-8")
    (folder / "intro.md").write_text("# Intro\n\nThe walrus welcome.\n", encoding="utf-8")
    s = w.cli_json("--space", "acme", "source", "add", "handbook", "--folder", str(folder),
                   "--readers", "hr/**=group:hr", "--readers", "**=everyone")
    first = w.cli_json("--space", "acme", "source", "sync", s["id"])["report"]
    # The owner (the CLI) reads everything: every line, every count.
    everything = {("hr/pay.md", "added"), ("hr/old.md", "added"), ("intro.md", "added"), ("hr/logo.png", "skipped")}
    assert report_lines(first) == everything, first
    assert first["counts"]["added"] == 3 and first["counts"]["skipped"] == 1, first
    assert "restricted" not in first["counts"], first

    def reports(user: str) -> list[dict]:
        r = http(w, "GET", f"/api/v1/sources/{s['id']}/reports", user)
        assert r.status_code == 200, r.text
        return r.json()["data"]

    def source_documents(user: str) -> int:
        r = http(w, "GET", f"/api/v1/sources/{s['id']}", user)
        assert r.status_code == 200, r.text
        return r.json()["data"]["documents"]

    [bobs] = reports("bob")
    assert report_lines(bobs) == {("intro.md", "added")}, bobs
    assert "hr/" not in json.dumps(bobs) and "group:hr" not in json.dumps(bobs), bobs
    assert bobs["counts"]["added"] == 1 == source_documents("bob"), (bobs, source_documents("bob"))
    assert bobs["counts"]["skipped"] == 0 and "restricted" not in bobs["counts"], bobs
    [anns] = reports("ann")
    assert report_lines(anns) == report_lines(first) and anns["counts"]["added"] == 3 == source_documents("ann"), anns

    # A sync bob runs himself answers him the same way: hr's deletion and addition unsaid.
    (folder / "hr" / "pay.md").unlink()
    (folder / "hr" / "bonus.md").write_text("# Bonus\n\nThe walrus bonus.\n", encoding="utf-8")
    (folder / "intro.md").write_text("# Intro\n\nThe walrus welcome, again.\n", encoding="utf-8")
    r = http(w, "POST", f"/api/v1/sources/{s['id']}/sync", "bob")
    assert r.status_code in (200, 201, 202), r.text
    mine = r.json()["data"]["report"]
    assert report_lines(mine) == {("intro.md", "changed")}, mine
    # Nor do the documents it queued name hr's.
    assert "hr/" not in r.text and "bonus" not in r.text and "group:hr" not in r.text, r.text
    assert [d["file_name"] for d in r.json()["data"]["documents"]] == ["intro.md"], r.text
    c = mine["counts"]
    assert (c["added"], c["changed"], c["deleted"], c["unchanged"], c["skipped"]) == (0, 1, 0, 0, 0), mine
    [latest, _] = reports("owner")
    assert report_lines(latest) == {("hr/pay.md", "deleted"), ("hr/bonus.md", "added"), ("intro.md", "changed"),
                                   ("hr/logo.png", "skipped")}, latest
    assert latest["counts"]["unchanged"] == 1 and latest["counts"]["skipped"] == 1, latest
    [latest, _] = reports("ann")
    assert report_lines(latest) == {("hr/pay.md", "deleted"), ("hr/bonus.md", "added"), ("intro.md", "changed"),
                                   ("hr/logo.png", "skipped")}, latest

    # `quarry source status` (the machine's owner) lists every line, as an admin sees it.
    st = w.cli("--space", "acme", "source", "status", s["id"]).stdout
    assert "hr/bonus.md" in st and "hr/pay.md" in st and "intro.md" in st, st
    st = w.cli_json("--space", "acme", "source", "status", s["id"])
    assert all("restricted" not in r["counts"] for r in st["reports"]), st
    w.cli("--space", "acme", "source", "rm", s["id"])


@asynccontextmanager
async def mcp(w: World, user: str):
    url = w.srv.mcp_url + f"?token={w.tokens[user]}&resource=handbook"
    async with Client(url, mode="legacy", read_timeout_seconds=30) as c:
        yield c


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def create(c, args: dict) -> dict:
    r = await c.call_tool("create_knowledge", args)
    assert r.is_error is not True, text_of(r)
    return r.structured_content


def restrict(w: World, entry: str, readers: list[str]) -> None:
    d = w.cli_json("--space", "acme", "kb", "readers", "handbook", entry, "--set", ",".join(readers))
    assert d["readers"] == readers, d


@pytest.mark.anyio
async def test_a_key_write_never_reaches_an_entry_the_writer_cannot_read(world):
    w = world
    async with mcp(w, "ann") as c:
        hidden = await create(c, {"content": "# Comp plan\n\nThe narwhal comp plan: 4 % for everyone.",
                                  "key": "comp-plan"})
    restrict(w, hidden["id"], ["group:hr"])
    async with mcp(w, "bob") as c:
        r = await c.call_tool("create_knowledge", {"content": "# Comp plan\n\nThe narwhal comp plan: 0 %.",
                                                   "key": "comp-plan"})
        said = text_of(r) + json.dumps(r.structured_content or {})
        assert hidden["id"] not in said and "supersede" not in said.lower(), said
        assert str(hidden["valid_from"]) not in said and "4 %" not in said, said
        # Written exactly as for a free key: the first version of a chain of bob's own.
        assert r.is_error is not True, said
        mine = r.structured_content
        assert mine["id"] != hidden["id"] and not mine.get("supersedes"), mine
        got = await c.call_tool("get_knowledge", {"id": mine["id"], "history": True})
        assert hidden["id"] not in text_of(got) + json.dumps(got.structured_content), text_of(got)
        assert [v["id"] for v in got.structured_content["versions"]] == [mine["id"]], got.structured_content
        # A free key answers the same way.
        free = await c.call_tool("create_knowledge", {"content": "# Travel\n\nThe narwhal travel plan.",
                                                      "key": "travel-plan"})
        assert free.is_error is not True and set(free.structured_content) == set(mine), (free.structured_content, mine)
        # The hidden entry answers bob as one that does not exist.
        got = await c.call_tool("get_knowledge", {"id": hidden["id"], "history": True})
        assert got.is_error is True and "4 %" not in text_of(got), text_of(got)
    # ann (hr) still reads hers as the key's current entry, not bob's text.
    async with mcp(w, "ann") as c:
        got = await c.call_tool("get_knowledge", {"id": hidden["id"], "history": True})
        assert got.is_error is not True, text_of(got)
        entry = got.structured_content["entry"]
        assert "superseded_by" not in entry and "valid_until" not in entry, entry
        assert "4 %" in text_of(got) and "0 %" not in text_of(got), text_of(got)
        r = await c.call_tool("knowledge_search", {"query": "narwhal comp plan", "search_mode": "keyword",
                                                   "min_score": 0})
        assert hidden["id"] in {h["knowledge_id"] for h in r.structured_content["results"]}, r.structured_content


@pytest.mark.anyio
async def test_history_lists_only_the_versions_the_reader_may_read(world):
    """A key with an open version and a later one restricted to hr: the open one's history,
    read by bob, lists it alone and names nothing of the other."""
    w = world
    async with mcp(w, "ann") as c:
        first = await create(c, {"content": "# Bonus pool\n\nThe okapi bonus pool is open to all.",
                                 "key": "bonus-pool"})
    async with mcp(w, "owner") as c:
        second = await create(c, {"content": "# Bonus pool\n\nThe okapi bonus pool is 2 million.",
                                  "supersedes": first["id"]})
    restrict(w, second["id"], ["group:hr"])
    async with mcp(w, "bob") as c:
        got = await c.call_tool("get_knowledge", {"id": first["id"], "history": True})
        assert got.is_error is not True, text_of(got)
        assert [v["id"] for v in got.structured_content["versions"]] == [first["id"]], got.structured_content
        assert all(e["entry"] == first["id"] for e in got.structured_content["history"]), got.structured_content
        assert second["id"] not in json.dumps(got.structured_content["history"]), got.structured_content
        # Writing the key again reaches nothing of hr's either.
        r = await c.call_tool("create_knowledge", {"content": "# Bonus pool\n\nThe okapi bonus pool is gone.",
                                                   "key": "bonus-pool"})
        said = text_of(r) + json.dumps(r.structured_content or {})
        assert second["id"] not in said and "2 million" not in said, said
        assert r.is_error is not True and not r.structured_content.get("supersedes"), said
        gone = r.structured_content["id"]
    # hr's version stays current beside bob's (a key names one current entry per set of
    # readers); ann, who reads both, sees every version of the key.
    async with mcp(w, "ann") as c:
        got = await c.call_tool("get_knowledge", {"id": second["id"]})
        assert got.is_error is not True and "superseded_by" not in got.structured_content["entry"], text_of(got)
        assert "2 million" in text_of(got), text_of(got)
        assert [v["id"] for v in (await c.call_tool("get_knowledge", {"id": second["id"], "history": True}))
                .structured_content["versions"]] == [first["id"], second["id"], gone]


def test_a_hidden_document_looks_like_one_that_does_not_exist(world):
    """Item 6: an upload of a hidden document's exact bytes is a document of the uploader's own
    (no "the same bytes are already in this knowledge base"); an upload under a hidden
    document's name gets that name exactly, as under a name nobody uses (a name names one
    document per set of readers), and is found by that name, searched and read as the
    uploader's own; and `/api/v1/queue` counts no job of a document the caller may not read."""
    w = world
    docs = f"/api/v1/knowledge-bases/{w.kb}/documents"
    secret = b"# Layoffs 2027\n\nThe quokka plant closes in March.\n"
    r = http(w, "POST", docs, "owner", data={"readers": "group:hr"}, files=[
        ("files", ("layoffs-2027.md", secret, "text/markdown")),
        # Not a PDF inside: its job fails for good and stays counted as failed.
        ("files", ("plan-b.pdf", b"%PDF-1.7\nnot really a pdf\n", "application/pdf")),
    ])
    assert r.status_code == 202, r.text
    hidden = {o["document"]["file_name"]: o["document"]["id"] for o in r.json()["data"]}
    deadline = time.monotonic() + 60
    while True:
        listed = {d["id"]: d for d in http(w, "GET", docs, "owner").json()["data"]}
        if listed[hidden["plan-b.pdf"]]["status"] == "failed" and listed[hidden["layoffs-2027.md"]]["status"] == "ready":
            break
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)

    r = http(w, "POST", docs, "bob", files=[("files", ("copy.md", secret, "text/markdown"))])
    assert r.status_code == 202, r.text
    copy = r.json()["data"][0]
    assert copy["result"] == "added" and copy["document"]["id"] not in hidden.values(), copy
    assert "already" not in r.text, r.text

    got = http(w, "GET", f"{docs}/{copy['document']['id']}", "bob")
    assert got.status_code == 200 and "readers" not in got.json()["data"], got.text
    got = http(w, "GET", f"{docs}/{hidden['layoffs-2027.md']}", "ann")
    assert got.status_code == 200 and got.json()["data"]["file_name"] == "layoffs-2027.md", got.text
    assert http(w, "GET", f"{docs}/{hidden['layoffs-2027.md']}", "bob").status_code == 404

    # The hidden document's name, and a name nobody uses: the same answer, each name as asked.
    r = http(w, "POST", docs, "bob", files=[
        ("files", ("layoffs-2027.md", b"# Layoffs 2027\n\nBob's own rumour list.\n", "text/markdown")),
        ("files", ("never-used-2027.md", b"# Never used\n\nA name nobody had.\n", "text/markdown")),
    ])
    assert r.status_code == 202, r.text
    mine, free = r.json()["data"]
    assert (mine["result"], mine["document"]["file_name"]) == ("added", "layoffs-2027.md"), mine
    assert (free["result"], free["document"]["file_name"]) == ("added", "never-used-2027.md"), free
    assert sorted(mine["document"]) == sorted(free["document"]), (mine, free)
    deadline = time.monotonic() + 60
    while http(w, "GET", f"{docs}/{mine['document']['id']}", "bob").json()["data"]["status"] != "ready":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # By name, bob reaches his own document; its text is his, the hidden one's never.
    got = http(w, "GET", f"{docs}/layoffs-2027.md", "bob")
    assert got.status_code == 200 and got.json()["data"]["id"] == mine["document"]["id"], got.text
    found = http(w, "POST", "/search", "bob", json={"query": "Layoffs 2027 quokka rumour", "min_score": 0})
    assert found.status_code == 200, found.text
    named = [h["snippet"] for h in found.json()["results"] if h["file"].endswith("/layoffs-2027.md")]
    assert len(named) == 1 and "rumour" in named[0] and "quokka" not in named[0], found.text
    # ann (hr) reads both: by name she is asked to pick one by id, both ids offered.
    both = http(w, "GET", f"{docs}/layoffs-2027.md", "ann")
    assert both.status_code == 400, both.text
    assert hidden["layoffs-2027.md"] in both.text and mine["document"]["id"] in both.text, both.text

    counts = {u: http(w, "GET", "/api/v1/queue", u).json()["data"] for u in ("owner", "bob")}
    assert counts["owner"]["failed"] == counts["bob"]["failed"] + 1, counts
