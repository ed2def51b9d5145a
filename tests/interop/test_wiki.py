"""Wiki pages (issue 68), with the official MCP Python SDK as the agent, in its default mode.

Three documents come from a folder source synced into the connection's knowledge base. The
agent finds passages with ``knowledge_search``, writes five pages citing them (by the hits'
passage ids and by line ranges), then a source file is edited and synced: exactly the pages
that cite the changed passage turn stale, with the old and new text, and ``lint_wiki`` says
so; the agent rewrites one on the version ``read_page`` gave and it is current again. A write
on an old version, a citation of nothing and bad arguments are refused with what to do, and
change nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import make_home, start_server
from mcp import Client

KB = "knowledge"  # the connection's resource by default

DOCS = {
    "launch.md": "# Launch plan\n\nThe launch plan covers the spring release of the harbour app.\n\n"
                 "## Date\n\nThe launch is on 4 May, at the harbour office.\nPress is invited for ten o'clock.\n\n"
                 "## Risks\n\nThe app store review may take a week.\n",
    "budget.md": "# Budget\n\nThe budget for the release is 40,000 EUR.\nIt was approved in March.\n",
    "team.md": "# Team\n\nAnn leads the release; Bob runs the support desk.\n",
}


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("wiki")
    folder = root / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_EMBED_MODEL": "none"})
    r = home.run("kb", "create", KB)
    assert r.returncode == 0, r.stderr
    r = home.run("source", "add", KB, "--folder", str(folder), "--json")
    assert r.returncode == 0, r.stderr
    source = json.loads(r.stdout)["id"]
    r = home.run("source", "sync", source)
    assert r.returncode == 0, r.stderr
    srv = start_server(home, logdir=root / "logs")
    yield {"home": home, "srv": srv, "folder": folder, "source": source}
    srv.stop()


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


async def hit(c, query: str, file_name: str) -> dict:
    """The best keyword passage of `file_name` for `query` (waits for ingestion)."""
    deadline = time.time() + 60
    while True:
        found = await ok(c, "knowledge_search", {"query": query, "search_mode": "keyword", "min_score": 0})
        hits = [h for h in found["results"] if h["knowledge_filename"] == file_name]
        if hits:
            return hits[0]
        assert time.time() < deadline, f"{file_name} never found for {query!r}: {found}"
        time.sleep(0.3)


async def stale_pages(c) -> set[str]:
    index = await ok(c, "wiki_index", {"limit": 50})
    return {p["slug"] for p in index["pages"] if p["stale"]}


def stale_on_every_search_surface(srv, home) -> None:
    """QMD's `/search` and `/query`, Dify's `/retrieval` and `quarry search` mark the launch
    page's hit stale with the reason, the release page's current, and a document's not at all."""
    import requests

    def marks(hits, path_of):
        """Each hit's path (`pages/<slug>.md` for a page) and its `wiki_page`."""
        return {path_of(h): h.get("wiki_page") for h in hits}

    q = "launch harbour spring release"
    found = []
    for route in ("/search", "/query"):
        r = requests.post(srv.url(route), json={"query": q, "limit": 20, "minScore": 0}, timeout=60)
        assert r.status_code == 200, r.text
        found.append((route, marks(r.json()["results"], lambda h: h["file"])))
    r = requests.post(srv.url("/retrieval"), timeout=60, json={
        "knowledge_id": KB, "query": q, "retrieval_setting": {"top_k": 20, "score_threshold": 0}})
    assert r.status_code == 200, r.text
    found.append(("/retrieval", marks([rec["metadata"] for rec in r.json()["records"]], lambda m: m["path"])))
    cli = home.run("search", q, "--json", "-n", "20", "--min-score", "0")
    assert cli.returncode == 0, cli.stderr
    found.append(("cli", marks(json.loads(cli.stdout), lambda h: h["file"])))
    for where, m in found:
        launch = [v for p, v in m.items() if p.endswith("pages/launch.md")]
        assert launch and launch[0]["slug"] == "launch" and launch[0]["stale"] is True, (where, m)
        assert "11 May" in launch[0]["stale_reasons"][0], (where, m)
        release = [v for p, v in m.items() if p.endswith("pages/release.md")]
        assert release and release[0] == {"slug": "release", "stale": False}, (where, m)
        documents = [v for p, v in m.items() if "pages/" not in p]
        assert documents and documents == [None] * len(documents), (where, m)


@pytest.mark.anyio
async def test_an_agent_writes_pages_and_exactly_those_citing_a_changed_passage_turn_stale(world):
    srv, home = world["srv"], world["home"]
    async with Client(srv.mcp_url, read_timeout_seconds=60) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"wiki_index", "read_page", "write_page", "lint_wiki"} <= names, names

        date = await hit(c, "launch harbour office press", "launch.md")
        budget = await hit(c, "budget approved March", "budget.md")
        team = await hit(c, "support desk", "team.md")
        docid = date["id"].split(":")[0]
        # Lines 7-8 of launch.md are the date; its intro (line 3) is cited by "release".
        pages = [
            ("launch", "The launch is on 4 May. Paid from [[budget]].", [f"{docid}:7-8"]),
            ("budget", "The release has 40,000 EUR.", [budget["id"]]),
            ("release", "The spring release of the harbour app; see [[launch]].",
             [{"document": date["knowledge_id"], "lines": [3, 3]}, budget["id"]]),
            ("team", "Ann leads; Bob runs support.", [team["id"]]),
            ("index", "[[launch]] [[budget]] [[release]] [[team]]", []),
        ]
        versions = {}
        for slug, body, sources in pages:
            written = await ok(c, "write_page", {"slug": slug, "title": slug.title(), "body": body,
                                                 "type": "index" if slug == "index" else "summary",
                                                 "sources": sources})
            assert written["stale"] is False and written["slug"] == slug, written
            versions[slug] = written["version"]
        assert await stale_pages(c) == set()
        launch = await ok(c, "read_page", {"slug": "launch"})
        assert launch["sources"][0]["text"] == "The launch is on 4 May, at the harbour office.\nPress is invited for ten o'clock."
        assert launch["backlinks"] == ["index", "release"] and launch["links"] == ["budget"], launch
        assert launch["written_by"]["via"] == "mcp", launch

        # The date changes in the source folder; the next sync brings it in.
        (world["folder"] / "launch.md").write_text(DOCS["launch.md"].replace("4 May", "11 May"))
        r = home.run("source", "sync", world["source"])
        assert r.returncode == 0, r.stderr
        deadline = time.time() + 60
        while await stale_pages(c) != {"launch"}:
            assert time.time() < deadline, await ok(c, "wiki_index", {"limit": 50})
            time.sleep(0.3)
        launch = await ok(c, "read_page", {"slug": "launch"})
        assert launch["stale"] is True and launch["sources"][0]["state"] == "changed", launch
        assert "11 May" in launch["stale_reasons"][0] and "4 May" in launch["stale_reasons"][0], launch
        release = await ok(c, "read_page", {"slug": "release"})
        assert release["stale"] is False, release
        r = await c.call_tool("lint_wiki", {})
        findings = r.structured_content["findings"]
        assert [(f["kind"], f["page"]) for f in findings if f["kind"] == "stale"] == [("stale", "launch")], findings
        assert "- [stale] launch: lines 7-8" in text_of(r), text_of(r)
        stale_on_every_search_surface(srv, home)

        # The agent rewrites it from the passage as it is now (a docid names content: the
        # edited document has a new one; the page keeps citing the document's id).
        date = await hit(c, "launch harbour office press 11", "launch.md")
        assert date["id"].split(":")[0] != docid and date["knowledge_id"] == launch["sources"][0]["document"]
        docid = date["id"].split(":")[0]
        again = await ok(c, "write_page", {"slug": "launch", "title": "Launch", "body": "The launch is on 11 May.",
                                           "sources": [f"{docid}:7-8"], "base_version": versions["launch"]})
        # Written on the old version by someone who read it before: refused, naming the new one.
        assert again["stale"] is False and again["version"] != versions["launch"], again
        late = await refused(c, "write_page", {"slug": "launch", "title": "Launch", "body": "late",
                                               "base_version": versions["launch"]})
        assert again["version"] in late and "read_page" in late, late
        assert await stale_pages(c) == set()

        # Bad input: refused with what to do, and nothing changes.
        for args, words in [
            ({"slug": "x", "title": "X", "body": "b", "sources": ["#ffffff:3"]}, "source 1"),
            ({"slug": "x", "title": "X", "body": "b", "sources": [f"{docid}:7-900"]}, "source 1"),
            ({"slug": "x", "title": "X", "body": "b", "sources": ["not a citation"]}, "source 1"),
            ({"slug": "Bad Slug", "title": "X", "body": "b"}, "slug"),
            ({"slug": "x", "title": "X", "body": "b", "status": "stale"}, "status"),
            ({"slug": "x", "title": "X"}, "body"),
        ]:
            m = await refused(c, "write_page", args)
            assert words in m, (args, m)
        index = await ok(c, "wiki_index", {"limit": 50})
        assert sorted(p["slug"] for p in index["pages"]) == ["budget", "index", "launch", "release", "team"], index
        assert (await refused(c, "read_page", {"slug": "x"})).startswith("no page 'x'")


@pytest.mark.anyio
async def test_an_agent_browses_documents_and_pages_like_files(world):
    """`ls`, `find`, `grep` and `cat` over MCP (and `quarry ls|find|grep|cat`): the knowledge
    base's folders and documents, its pages under pages/ (current versions only), a grep hit's
    line read back with cat, and bad input refused with what to do."""
    srv, home = world["srv"], world["home"]
    async with Client(srv.mcp_url, read_timeout_seconds=60) as c:
        top = await ok(c, "ls", {})
        assert f"{KB}/" in [e["path"] for e in top["entries"]], top
        here = await ok(c, "ls", {"path": KB})
        paths = [e["path"] for e in here["entries"]]
        assert paths[0] == f"{KB}/pages/" and {f"{KB}/launch.md", f"{KB}/budget.md", f"{KB}/team.md"} <= set(paths), paths
        pages = await ok(c, "find", {"pattern": f"{KB}/pages/*.md"})
        slugs = sorted(e["path"].rsplit("/", 1)[1][:-3] for e in pages["entries"])
        index = await ok(c, "wiki_index", {"limit": 200})
        # One file per page: superseded versions are not current, so not listed.
        assert slugs == sorted(p["slug"] for p in index["pages"]) and pages["total"] == len(slugs), (slugs, index)
        assert all(e["kind"] == "page" for e in pages["entries"]), pages
        found = await ok(c, "grep", {"pattern": r"launch is on \d+ May", "path": KB, "ignore_case": True})
        where = {(m["path"], m["line"]) for m in found["matches"]}
        assert (f"{KB}/launch.md", 7) in where and any(p.startswith(f"{KB}/pages/") for p, _ in where), found
        line = await ok(c, "cat", {"path": f"{KB}/launch.md", "from": 7, "lines": 1})
        assert line["text"].endswith("The launch is on 11 May, at the harbour office."), line
        r = await c.call_tool("cat", {"path": f"{KB}/launch.md", "from": 5, "lines": 2})
        assert "(more: cat with from = 7)" in text_of(r), text_of(r)
        for tool, args, words in [
            ("grep", {"pattern": "("}, "invalid regular expression"),
            ("grep", {"pattern": "x", "path": f"{KB}/nowhere"}, "ls"),
            ("ls", {"path": f"{KB}/../etc"}, ".."),
            ("ls", {"path": "no-such-collection"}, "nothing at"),
            ("find", {"pattern": f"{KB}/["}, "glob"),
            ("cat", {"path": f"{KB}/launch.md", "from": 999}, "past the end"),
        ]:
            m = await refused(c, tool, args)
            assert words in m, (tool, args, m)

    r = home.run("ls", KB)
    assert r.returncode == 0 and f"{KB}/pages/" in r.stdout and "launch.md" in r.stdout, r.stdout + r.stderr
    r = home.run("find", f"{KB}/pages/*.md", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["total"] == len(slugs), r.stdout + r.stderr
    r = home.run("grep", "harbour office", KB, "-C", "1")
    assert r.returncode == 0 and f"{KB}/launch.md:7:The launch is on 11 May" in r.stdout, r.stdout + r.stderr
    assert f"{KB}/launch.md-8-Press is invited" in r.stdout, r.stdout
    r = home.run("grep", "no such words anywhere", KB)
    assert r.returncode != 0 and "no line matches" in r.stderr, r.stdout + r.stderr
    r = home.run("cat", f"{KB}/launch.md:7", "-l", "1")
    assert r.returncode == 0 and r.stdout.strip() == "The launch is on 11 May, at the harbour office.", r.stdout + r.stderr


def test_rest_and_the_cli_read_and_write_the_same_pages(world):
    """The REST routes and `quarry kb pages|page|write-page|lint` are the tools' equivalents:
    a page written over REST is read by the CLI, a CLI write is read over REST, a stale base
    is 409 over REST and an error exit in the CLI, and the lint exits 1 with findings."""
    import requests

    srv, home, folder = world["srv"], world["home"], world["folder"]
    base = srv.url(f"/api/v1/knowledge-bases/{KB}")
    docs = requests.get(f"{base}/documents", timeout=30).json()["data"]
    budget = next(d for d in docs if d["file_name"] == "budget.md")
    r = requests.put(f"{base}/pages/rest-budget", timeout=30,
                     json={"title": "Budget (REST)", "body": "40,000 EUR. See [[cli-team]].",
                           "sources": [{"document": budget["id"], "lines": [3, 3]}]})
    assert r.status_code == 201, r.text
    page = r.json()["data"]
    assert page["sources"][0]["text"] == "The budget for the release is 40,000 EUR." and not page["stale"], page
    # The slug is the path's: a body naming one is refused; so are bad citations and types.
    for body, status in [({"slug": "x", "title": "X", "body": "b"}, 400),
                         ({"title": "X", "body": "b", "sources": [{"document": budget["id"], "lines": [3]}]}, 400),
                         ({"title": "X", "body": "b", "sources": ["nowhere:1-2"]}, 404),
                         ({"title": "X", "body": "b", "type": "Not A Type"}, 400)]:
        r = requests.put(f"{base}/pages/rest-bad", json=body, timeout=30)
        assert r.status_code == status, (body, r.status_code, r.text)
    r = requests.put(f"{base}/pages/rest-budget", timeout=30, data="{}")
    assert r.status_code == 415, r.text

    r = home.run("kb", "page", KB, "rest-budget")
    assert r.returncode == 0 and "Budget (REST)" in r.stdout and "\nSources:\n1. " in r.stdout, r.stdout + r.stderr
    team = next(d for d in docs if d["file_name"] == "team.md")
    body = folder.parent / "team-page.md"
    body.write_text("Ann leads the release.\n")
    r = home.run("kb", "write-page", KB, "cli-team", "--title", "Team (CLI)", "--body", str(body),
                 "--source", f"{team['id']}:3-3", "--json")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)["version"]
    r = home.run("kb", "write-page", KB, "cli-team", "--title", "Team", "--body", str(body),
                 "--source", "not a citation")
    assert r.returncode != 0 and "--source 1" in r.stderr, r.stderr
    r = requests.get(f"{base}/pages/cli-team", timeout=30)
    assert r.status_code == 200 and r.json()["data"]["version"] == first, r.text
    assert r.json()["data"]["written_by"]["via"] == "cli", r.text
    assert r.json()["data"]["backlinks"] == ["rest-budget"], r.text
    # Over REST on the CLI's version, then the CLI again on that old version: refused.
    r = requests.put(f"{base}/pages/cli-team", timeout=30,
                     json={"title": "Team", "body": "Ann and Bob.", "base_version": first,
                           "sources": [f"{team['id']}:3-3"]})
    assert r.status_code == 200 and r.json()["data"]["version"] != first, r.text
    r = home.run("kb", "write-page", KB, "cli-team", "--title", "Team", "--body", str(body),
                 "--base-version", first)
    assert r.returncode != 0 and "read_page" in r.stderr, r.stderr

    r = requests.get(f"{base}/pages", params={"limit": 2}, timeout=30)
    listed = r.json()["data"]
    assert r.status_code == 200 and len(listed["pages"]) == 2 and listed["next"], listed
    r = home.run("kb", "pages", KB, "--json")
    slugs = [p["slug"] for p in json.loads(r.stdout)["pages"]]
    assert {"rest-budget", "cli-team"} <= set(slugs) and slugs == sorted(slugs), slugs
    r = requests.get(f"{base}/lint", timeout=30)
    findings = r.json()["data"]["findings"]
    assert r.status_code == 200 and isinstance(findings, list), r.text
    r = home.run("kb", "lint", KB)
    assert (r.returncode == 0) == (findings == []), (r.returncode, findings)
    assert (f"{len(findings)} finding(s):" if findings else "No findings") in r.stdout, r.stdout


def test_the_wiki_exports_as_a_markdown_tree_and_an_agent_skill_and_imports_back(world, tmp_path):
    """`quarry kb export-wiki` writes index.md, log.md and pages/<slug>.md (sources in front
    matter); `import-wiki` into another knowledge base synced from the same folder (other
    document ids, found by name) reproduces every page, a second import writes nothing, and
    a page file broken by hand is refused by name with the others written; `--skill` writes
    SKILL.md and references/."""
    import requests

    srv, home, folder = world["srv"], world["home"], world["folder"]
    tree = tmp_path / "tree"
    r = home.run("kb", "export-wiki", KB, str(tree), "--json")
    assert r.returncode == 0, r.stderr
    files = json.loads(r.stdout)["files"]
    assert files[:2] == ["index.md", "log.md"] and all(f.startswith("pages/") for f in files[2:]), files
    slugs = sorted(f[len("pages/"):-3] for f in files[2:])
    index = requests.get(srv.url(f"/api/v1/knowledge-bases/{KB}/pages"), params={"limit": 200}, timeout=30).json()["data"]
    assert slugs == sorted(p["slug"] for p in index["pages"]), (slugs, index)
    launch = (tree / "pages" / "launch.md").read_text()
    assert launch.startswith('---\nslug: "launch"\n') and '"name":"launch.md"' in launch, launch
    assert "[[launch]]" in (tree / "log.md").read_text()

    r = home.run("kb", "create", "copy")
    assert r.returncode == 0, r.stderr
    r = home.run("source", "add", "copy", "--folder", str(folder), "--json")
    assert r.returncode == 0, r.stderr
    r = home.run("source", "sync", json.loads(r.stdout)["id"])
    assert r.returncode == 0, r.stderr
    r = home.run("kb", "import-wiki", "copy", str(tree), "--json")
    report = json.loads(r.stdout)
    # Pages citing a passage that changed in the folder since they were written are refused
    # (none here: the pages were rewritten on the current text), every other one is written.
    assert r.returncode == 0 and sorted(report["written"]) == slugs and not report["refused"], r.stdout + r.stderr
    for slug in slugs:
        a = requests.get(srv.url(f"/api/v1/knowledge-bases/{KB}/pages/{slug}"), timeout=30).json()["data"]
        b = requests.get(srv.url(f"/api/v1/knowledge-bases/copy/pages/{slug}"), timeout=30).json()["data"]
        assert (a["body"], a["title"], a["type"], a["status"], a["tags"], a["stale"]) == \
               (b["body"], b["title"], b["type"], b["status"], b["tags"], b["stale"]), (a, b)
        assert [s["lines"] for s in a["sources"]] == [s["lines"] for s in b["sources"]], (a, b)
        assert sorted(a["backlinks"]) == sorted(b["backlinks"]), (a, b)
    r = home.run("kb", "import-wiki", "copy", str(tree))
    assert r.returncode == 0 and f"0 written, {len(slugs)} unchanged, 0 refused" in r.stdout, r.stdout + r.stderr
    (tree / "pages" / "broken.md").write_text("no front matter here\n")
    (tree / "pages" / "launch.md").write_text(launch.replace("11 May", "12 May"))
    r = home.run("kb", "import-wiki", "copy", str(tree))
    assert r.returncode == 1 and "1 written" in r.stdout and "refused pages/broken.md" in r.stdout, r.stdout + r.stderr
    r = home.run("kb", "import-wiki", "copy", str(tmp_path / "nowhere"))
    assert r.returncode != 0 and "pages/ folder" in r.stderr, r.stderr

    skill = tmp_path / "skill"
    r = home.run("kb", "export-wiki", KB, str(skill), "--skill")
    assert r.returncode == 0, r.stderr
    text = (skill / "SKILL.md").read_text()
    assert text.startswith(f'---\nname: "{KB}"\ndescription: "') and "(references/launch.md)" in text, text
    assert sorted(p.name[:-3] for p in (skill / "references").iterdir()) == slugs


@pytest.mark.anyio
async def test_instructions_log_entries_and_contradicting_facts(world):
    """The instructions page rides along with wiki_index; wiki_log (and POST …/log) append
    signed, dated lines to the page 'log'; lint_wiki reports two pages that state different
    values for one `key:: value`."""
    import requests

    srv = world["srv"]
    async with Client(srv.mcp_url, read_timeout_seconds=60) as c:
        await ok(c, "write_page", {"slug": "instructions", "title": "How we write", "type": "instructions",
                                   "body": "One page per topic. State dates as `date:: …`."})
        index = await ok(c, "wiki_index", {"limit": 1})
        assert "One page per topic" in index["instructions"], index
        r = await c.call_tool("wiki_index", {"limit": 1})
        assert "This wiki's instructions (page 'instructions')" in text_of(r), text_of(r)
        logged = await ok(c, "wiki_log", {"entry": "Wrote [[instructions]]."})
        assert logged["entry"].endswith(": Wrote [[instructions]]."), logged
        assert "isError" not in logged
        m = await refused(c, "wiki_log", {"entry": ""})
        assert "entry" in m, m
        budget = await hit(c, "budget approved March", "budget.md")
        for slug, value in (("fact-a", "4 May"), ("fact-b", "11 May")):
            await ok(c, "write_page", {"slug": slug, "title": slug, "body": f"launch date:: {value}\n[[index]]",
                                       "sources": [budget["id"]]})
        r = await c.call_tool("lint_wiki", {})
        found = [(f["page"], f["detail"]) for f in r.structured_content["findings"] if f["kind"] == "contradiction"]
        assert sorted(p for p, _ in found) == ["fact-a", "fact-b"], found
        assert any('fact-b says "11 May"' in d for _, d in found), found
    r = requests.post(srv.url(f"/api/v1/knowledge-bases/{KB}/log"), json={"entry": "From REST."}, timeout=30)
    assert r.status_code == 200 and r.json()["data"]["body"].rstrip().endswith(": From REST."), r.text
    lines = [l for l in r.json()["data"]["body"].splitlines() if l.startswith("- ")]
    assert len(lines) == 2 and "Wrote [[instructions]]" in lines[0], lines
    r = requests.post(srv.url(f"/api/v1/knowledge-bases/{KB}/log"), json={}, timeout=30)
    assert r.status_code == 400 and "entry" in r.text, r.text


def test_a_configured_model_drafts_pages_under_the_same_rules(quarry_bin: Path, corpus: Path, tmp_path: Path):
    """POST …/drafts: the chat model (the fake OpenAI-compatible server) reads each document
    with line numbers and answers a page; Quarry writes it as a draft citing the lines the
    model named — and refuses, writing nothing, a draft citing lines the document does not
    have, an answer that is not the JSON asked for, and a document nobody has. No model
    configured: 503 saying how to configure one."""
    import requests
    from fake_llm import FakeLLM

    fake = FakeLLM.start()
    try:
        folder = tmp_path / "docs"
        folder.mkdir()
        for name, text in DOCS.items():
            (folder / name).write_text(text)
        home = make_home(quarry_bin, corpus, tmp_path / "home",
                         env={"QUARRY_EMBED_MODEL": "none", **fake.env("sk-draft")})
        assert home.run("kb", "create", KB).returncode == 0
        r = home.run("source", "add", KB, "--folder", str(folder), "--json")
        assert r.returncode == 0, r.stderr
        assert home.run("source", "sync", json.loads(r.stdout)["id"]).returncode == 0
        srv = start_server(home, "--chat-model", "openai:fake-model", logdir=tmp_path / "logs")
        try:
            base = srv.url(f"/api/v1/knowledge-bases/{KB}")
            docs = {d["file_name"]: d["id"] for d in requests.get(f"{base}/documents", timeout=30).json()["data"]}
            fake.script_complete([
                'Here is the page:\n```json\n{"slug": "budget-summary", "title": "Budget", '
                '"body": "The release has a budget.\\nbudget:: 40,000 EUR", "sources": [[3, 4]]}\n```',
                '{"slug": "team-summary", "title": "Team", "body": "Ann leads.", "sources": [[30, 31]]}',
                "I cannot answer in JSON today.",
            ])
            r = requests.post(f"{base}/drafts", timeout=120, json={
                "documents": [docs["budget.md"], docs["team.md"], docs["launch.md"], "no-such-document"]})
            assert r.status_code == 200, r.text
            drafts = r.json()["data"]["drafts"]
            assert [d["status"] for d in drafts] == ["drafted", "refused", "refused", "refused"], drafts
            page = drafts[0]["page"]
            assert page["status"] == "draft" and page["tags"] == ["drafted"] and not page["stale"], page
            assert page["sources"][0]["text"] == "The budget for the release is 40,000 EUR.\nIt was approved in March.", page
            assert page["written_by"]["model"] == "openai:fake-model", page
            assert "source 1" in drafts[1]["detail"] and "lines 30-31" in drafts[1]["detail"], drafts[1]
            assert "JSON" in drafts[2]["detail"], drafts[2]
            assert "no-such-document" in drafts[3]["detail"], drafts[3]
            # The model saw the document with line numbers; nothing else was written.
            asked = [q.body for q in fake.snapshot() if not q.stream]
            assert len(asked) == 3 and "3: The budget for the release is 40,000 EUR." in asked[0]["messages"][1]["content"], asked
            index = requests.get(f"{base}/pages", timeout=30).json()["data"]
            assert [p["slug"] for p in index["pages"]] == ["budget-summary"], index
            for body, status in [({"documents": []}, 400), ({"documents": ["x"] * 21}, 400),
                                 ({"documents": "x"}, 400), ({"documents": ["x"], "extra": 1}, 400)]:
                r = requests.post(f"{base}/drafts", json=body, timeout=30)
                assert r.status_code == status, (body, r.status_code, r.text)
        finally:
            srv.stop()
        plain = start_server(home, logdir=tmp_path / "logs-plain")
        try:
            r = requests.post(plain.url(f"/api/v1/knowledge-bases/{KB}/drafts"), json={"documents": ["x"]}, timeout=30)
            assert r.status_code == 503 and "--chat-model" in r.text, r.text
        finally:
            plain.stop()
    finally:
        fake.stop()
