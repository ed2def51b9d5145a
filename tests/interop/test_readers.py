"""Per-document readers, probed through every surface that reads documents (issue 43).

One home, space ``acme``: ``owner`` (owner), ``ann`` (viewer, in group ``hr``), ``bob``
(viewer, in no group). Knowledge base ``handbook`` holds an open document, one uploaded
for ``group:hr`` only, and one for the admins only; each carries a word no other holds
("heron" open, "ocelot" hr, "vicuna" admins). A reader who may not read a document must get
exactly what a document that does not exist gets: no result, no count, no suggestion, the
same "not found" in the same words — over REST (QMD routes, knowledge bases, the seed's
knowledge search, Dify's retrieval), over MCP with the official Python SDK (QMD tools and
the knowledge tools), over QukaAI's capture endpoint and in chat (the passages a reader's
answer cites and the prompt the provider gets, through fake_llm.py). A group change bites on the next
request, and a source's reader mapping decides synced documents' readers. Runs on the
embedded store and, with ``QUARRY_TEST_BACKEND=postgres``, through a second node.
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
from fake_llm import FakeLLM
from mcp import Client

OPEN = "# Handbook\n\nThe heron guide: how we work, and the zebra policy.\n"
HR = "# Pay bands\n\nThe ocelot salary bands, and the zebra policy for pay.\n"
ADMINS = "# Board minutes\n\nThe vicuna acquisition, and the zebra policy for the board.\n"
MISSING_ID = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
CHAT_KEY = "sk-readers-chat-4b1f"


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@dataclass
class World:
    home: QuarryHome
    srv: QuarryServer
    root: Path
    kb: str
    fake: FakeLLM
    docs: dict[str, dict] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str):
        r = self.home.run(*args)
        assert r.returncode == 0, f"quarry {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return r

    def cli_json(self, *args: str):
        return json.loads(self.cli("--json", *args).stdout)


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("readers")
    fake = FakeLLM.start()
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_OCR": "off", **fake.env(CHAT_KEY)})
    w = World(home=home, srv=None, root=root, kb="", fake=fake)  # type: ignore[arg-type]
    w.cli("space", "create", "acme")
    for user in ("owner", "ann", "bob", "eve"):
        w.cli("user", "add", user)
    w.cli("space", "grant", "acme", "owner", "--role", "owner")
    w.cli("space", "grant", "acme", "ann", "--role", "viewer")
    w.cli("space", "grant", "acme", "bob", "--role", "viewer")
    w.cli("space", "grant", "acme", "eve", "--role", "editor")
    w.cli("--space", "acme", "group", "create", "hr")
    w.cli("--space", "acme", "group", "add", "hr", "ann")
    w.kb = w.cli_json("--space", "acme", "kb", "create", "handbook")["id"]
    files = root / "files"
    files.mkdir()
    for name, text in (("handbook.md", OPEN), ("pay.md", HR), ("board.md", ADMINS)):
        (files / name).write_text(text, encoding="utf-8")
    up = w.cli_json("--space", "acme", "kb", "upload", "handbook", str(files / "handbook.md"))
    w.docs["open"] = up["documents"][0]
    up = w.cli_json("--space", "acme", "kb", "upload", "handbook", str(files / "pay.md"), "--readers", "group:hr")
    w.docs["hr"] = up["documents"][0]
    assert w.docs["hr"]["readers"] == ["group:hr"], up
    up = w.cli_json("--space", "acme", "kb", "upload", "handbook", str(files / "board.md"))
    w.docs["admins"] = up["documents"][0]
    d = w.cli_json("--space", "acme", "kb", "readers", "handbook", w.docs["admins"]["id"], "--set", "")
    assert d["readers"] == [], d
    for user in ("owner", "ann", "bob", "eve"):
        # The owner's token manages (who reads a source's documents); the others are plain.
        manage = ("--manage",) if user == "owner" else ()
        w.tokens[user] = w.cli_json("token", "create", "--user", user, "--spaces", "acme", *manage)["token"]
    serving = second_node(home, root / "node-b") if backend() == "postgres" else home
    w.srv = start_server(serving, "--auth", "token", "--chat-model", "openai:fake-chat", logdir=root / "logs")
    wait_ready(w.srv)
    yield w
    w.srv.stop()
    fake.stop()


def http(srv: QuarryServer, method: str, path: str, token: str | None, **kw) -> requests.Response:
    headers = kw.pop("headers", {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return requests.request(method, srv.url(path), headers=headers, timeout=60, **kw)


def words_found(w: World, token: str, query: str = "zebra") -> set[str]:
    """Which of the three documents each REST search route finds for `query`; every route
    must agree."""
    routes = found_per_route(w, token, query)
    assert all(n == routes[0] for n in routes), routes
    return routes[0]


def found_per_route(w: World, token: str, query: str) -> list[set[str]]:
    """The file names each REST search route finds for `query`, one set per route."""
    seen: dict[str, set[str]] = {}
    for route in ("/search", "/query"):
        r = http(w.srv, "POST", route, token, json={"query": query, "limit": 20, "minScore": 0})
        assert r.status_code == 200, r.text
        seen[route] = {res["file"] for res in r.json()["results"]}
    r = http(w.srv, "POST", "/api/v1/knowledge-search", token,
             json={"question": query, "search_mode": "keyword", "min_score": 0})
    assert r.status_code == 200, r.text
    seen["ks"] = {res["knowledge_filename"] for res in r.json()["results"]}
    r = http(w.srv, "POST", "/retrieval", token,
             json={"knowledge_id": "handbook", "query": query, "retrieval_setting": {"top_k": 20, "score_threshold": 0}})
    assert r.status_code == 200, r.text
    seen["dify"] = {rec["metadata"]["path"] for rec in r.json()["records"]}
    return [{p.rsplit("/", 1)[-1] for p in s} for s in seen.values()]


def words_found_soon(w: World, token: str, query: str, want: set[str], timeout: float = 30) -> None:
    """Until `words_found` says `want`: on PostgreSQL the server is another node than the CLI,
    and a CLI write reaches the server's keyword index through the change feed (no txid to
    wait on), so right after a CLI command the server may still answer from before it. While
    it catches up the routes may disagree for a moment too: the keyword index (QMD routes)
    and the passage index (knowledge-search, Dify) commit one after the other."""
    deadline = time.monotonic() + timeout
    while True:
        found = found_per_route(w, token, query)
        if all(n == want for n in found):
            return
        assert time.monotonic() < deadline, (found, want)
        time.sleep(0.1)


def same_as_missing(hidden: requests.Response, missing: requests.Response, hid: str, mid: str) -> None:
    assert hidden.status_code == missing.status_code, (hidden.status_code, hidden.text, missing.text)
    assert hidden.text.replace(hid, "X") == missing.text.replace(mid, "X"), (hidden.text, missing.text)


def test_search_routes_show_each_reader_only_what_it_may_read(world):
    w = world
    assert words_found(w, w.tokens["owner"]) == {"handbook.md", "pay.md", "board.md"}
    assert words_found(w, w.tokens["ann"]) == {"handbook.md", "pay.md"}
    assert words_found(w, w.tokens["bob"]) == {"handbook.md"}
    for token in (w.tokens["bob"], w.tokens["ann"]):
        assert words_found(w, token, "vicuna") == set()
    assert words_found(w, w.tokens["bob"], "ocelot") == set()


def test_scores_of_what_a_reader_sees_do_not_depend_on_what_it_cannot(world):
    """The open document scores the same for bob as for someone who reads nothing else of
    the matching ones: hidden documents are out of the ranked list, not cut after it."""
    w = world
    body = {"question": "zebra policy", "search_mode": "keyword", "min_score": 0}
    r = http(w.srv, "POST", "/api/v1/knowledge-search", w.tokens["bob"], json=body).json()
    assert [x["knowledge_filename"] for x in r["results"]] == ["handbook.md"] and r["total_count"] == 1, r

    def scores(token: str) -> dict[str, float]:
        got = {}
        # One word bob's document holds, one only hidden ones do: its score's share of the
        # query's weight follows the second word's document frequency.
        for route, body in (("/search", {"query": "heron ocelot", "limit": 20, "minScore": 0}),
                            ("/api/v1/knowledge-search", {"question": "heron ocelot", "search_mode": "keyword",
                                                          "min_score": 0})):
            r = http(w.srv, "POST", route, token, json=body)
            assert r.status_code == 200, r.text
            for x in r.json()["results"]:
                got[f"{route} {x.get('file') or x.get('knowledge_filename')}"] = x["score"]
        return got

    # More documents bob may not read, holding the hidden word: what bob sees scores exactly
    # as before (BM25's statistics leave hidden documents out), where the owner's, who reads
    # them, move.
    bob_before, owner_before = scores(w.tokens["bob"]), scores(w.tokens["owner"])
    extra = []
    for i in range(3):
        (w.root / "files" / f"ocelot-{i}.md").write_text(f"# Ocelot board {i}\n\nThe ocelot census, part {i}.\n",
                                                         encoding="utf-8")
        extra.append(str(w.root / "files" / f"ocelot-{i}.md"))
    up = w.cli_json("--space", "acme", "kb", "upload", "handbook", *extra, "--readers", "group:board")
    docs = up["documents"]
    assert len(docs) == 3, up
    try:
        deadline = time.monotonic() + 30
        while sum("ocelot-" in k for k in scores(w.tokens["owner"])) < 6:
            assert time.monotonic() < deadline, "the owner never found the new document"
            time.sleep(0.2)
        owner_after = scores(w.tokens["owner"])
        assert scores(w.tokens["bob"]) == bob_before, (bob_before, scores(w.tokens["bob"]))
        moved = [k for k in owner_before if k in owner_after and owner_after[k] != owner_before[k]]
        assert moved, (owner_before, owner_after)
    finally:
        for d in docs:
            w.cli("--space", "acme", "kb", "rm-doc", "handbook", d["id"])


def test_counts_listings_and_lookups_say_nothing_of_hidden_documents(world):
    w, bob, owner = world, world.tokens["bob"], world.tokens["owner"]
    kb = http(w.srv, "GET", f"/api/v1/knowledge-bases/{w.kb}", bob).json()["data"]
    assert kb["document_count"] == 1 and kb["status_counts"]["ready"] == 1, kb
    assert kb["total_bytes"] == len(OPEN.encode()), kb
    assert http(w.srv, "GET", f"/api/v1/knowledge-bases/{w.kb}", owner).json()["data"]["document_count"] == 3
    listed = http(w.srv, "GET", f"/api/v1/knowledge-bases/{w.kb}/documents", bob).json()
    assert [d["file_name"] for d in listed["data"]] == ["handbook.md"] and listed["total"] == 1, listed
    st = http(w.srv, "GET", "/status", bob).json()
    assert st["total_documents"] == 1, st
    # Every route at a hidden document answers as for a made-up id.
    hid = w.docs["hr"]["id"]
    for suffix in ("", "/markdown", "/chunks", "/preview"):
        same_as_missing(
            http(w.srv, "GET", f"/api/v1/knowledge-bases/{w.kb}/documents/{hid}{suffix}", bob),
            http(w.srv, "GET", f"/api/v1/knowledge-bases/{w.kb}/documents/{MISSING_ID}{suffix}", bob),
            hid, MISSING_ID,
        )
    assert http(w.srv, "GET", f"/api/v1/knowledge-bases/{w.kb}/documents/{hid}/markdown",
                w.tokens["ann"]).status_code == 200
    # By docid and by path through QMD's get; its suggestions never name a hidden document.
    same_as_missing(
        http(w.srv, "POST", "/get", bob, json={"file": w.docs["hr"]["docid"]}),
        http(w.srv, "POST", "/get", bob, json={"file": "#abcdef"}),
        w.docs["hr"]["docid"], "#abcdef",
    )
    same_as_missing(
        http(w.srv, "POST", "/get", bob, json={"file": "handbook/pay.md"}),
        http(w.srv, "POST", "/get", bob, json={"file": "handbook/pXy.md"}),
        "handbook/pay.md", "handbook/pXy.md",
    )
    near = http(w.srv, "POST", "/get", bob, json={"file": "handbook/pa.md"}).text
    assert "pay.md" not in near and "board.md" not in near, near
    r = http(w.srv, "POST", "/multi_get", bob, json={"pattern": "handbook/*.md"})
    assert r.status_code == 200, r.text
    assert "ocelot" not in r.text and "vicuna" not in r.text and "heron" in r.text, r.text
    # Changing readers is for admins; a viewer's attempt changes nothing.
    r = http(w.srv, "PATCH", f"/api/v1/knowledge-bases/{w.kb}/documents/{w.docs['open']['id']}", bob,
             json={"readers": ["user:bob"]})
    assert r.status_code == 403, r.text
    r = http(w.srv, "PATCH", f"/api/v1/knowledge-bases/{w.kb}/documents/{w.docs['open']['id']}", owner,
             json={"readers": ["not-a-key"]})
    assert r.status_code == 400 and "user:<name>" in r.text, r.text
    assert words_found(w, bob) == {"handbook.md"}


def test_duplicate_upload_of_hidden_bytes_says_nothing_about_it(world):
    """An editor who may not read pay.md uploads the same bytes: answered exactly as if pay.md
    did not exist — a document of her own, open to every reader — in words that name neither
    the hidden document nor its id (issue 65 item 6: the same bytes are one document only
    among files with the same readers). The owner uploading them for hr is told which it is."""
    w = world
    docs = f"/api/v1/knowledge-bases/{w.kb}/documents"
    r = http(w.srv, "POST", docs, w.tokens["eve"], files=[("files", ("copy.md", HR.encode(), "text/markdown"))])
    assert r.status_code == 202, r.text
    mine = r.json()["data"][0]
    assert mine["result"] == "added" and "readers" not in mine["document"], mine
    assert w.docs["hr"]["id"] not in r.text and "pay.md" not in r.text and "group:hr" not in r.text, r.text
    r = http(w.srv, "POST", docs, w.tokens["owner"], files=[("files", ("copy.md", HR.encode(), "text/markdown"))],
             data={"readers": "group:hr"})
    assert r.status_code == 202, r.text
    assert r.json()["data"][0]["result"] == "duplicate" and w.docs["hr"]["id"] in r.text, r.text
    # Hers goes again (the module's later tests count what each reader finds).
    r = http(w.srv, "DELETE", f"{docs}/{mine['document']['id']}", w.tokens["eve"])
    assert r.status_code == 200, r.text
    # An upload with readers is read by them only.
    r = http(w.srv, "POST", f"/api/v1/knowledge-bases/{w.kb}/documents", w.tokens["eve"],
             files=[("files", ("eve.md", b"# Eve\n\nThe zebra policy, for eve alone.\n", "text/markdown"))],
             data={"readers": "user:eve"})
    assert r.status_code == 202 and r.json()["data"][0]["document"]["readers"] == ["user:eve"], r.text
    r = http(w.srv, "POST", f"/api/v1/knowledge-bases/{w.kb}/documents", w.tokens["eve"],
             files=[("files", ("bad.md", b"# Bad\n", "text/markdown"))], data={"readers": "eve"})
    assert r.status_code == 400 and "user:<name>" in r.text, r.text


def test_a_group_change_bites_on_the_next_request(world):
    w = world
    assert "pay.md" in words_found(w, w.tokens["ann"])
    w.cli("--space", "acme", "group", "remove", "hr", "ann")
    try:
        assert words_found(w, w.tokens["ann"]) == {"handbook.md"}
    finally:
        w.cli("--space", "acme", "group", "add", "hr", "ann")
    assert "pay.md" in words_found(w, w.tokens["ann"])


@asynccontextmanager
async def mcp(w: World, token: str):
    async with Client(w.srv.mcp_url + f"?token={token}", mode="legacy", read_timeout_seconds=30) as c:
        yield c


def texts(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.mark.anyio
async def test_mcp_tools_show_each_reader_only_what_it_may_read(world):
    w = world
    async with mcp(w, w.tokens["bob"]) as c:
        for tool, args in (("search", {"query": "zebra"}), ("query", {"query": "zebra"}),
                           ("knowledge_search", {"query": "zebra", "search_mode": "keyword", "min_score": 0})):
            r = await c.call_tool(tool, args)
            t = texts(r) + json.dumps(r.structured_content or {})
            assert "heron" in t or "handbook.md" in t, (tool, t)
            assert "pay.md" not in t and "board.md" not in t and "ocelot" not in t and "vicuna" not in t, (tool, t)
        hidden = await c.call_tool("get", {"file": w.docs["hr"]["docid"]})
        missing = await c.call_tool("get", {"file": "#abcdef"})
        assert hidden.is_error and missing.is_error
        assert texts(hidden).replace(w.docs["hr"]["docid"], "X") == texts(missing).replace("#abcdef", "X")
        r = await c.call_tool("multi_get", {"pattern": "handbook/*.md"})
        got = [x.resource.text for x in r.content if x.type == "resource"] + [texts(r)]
        assert any("heron" in g for g in got) and not any("ocelot" in g or "vicuna" in g for g in got), got
        st = await c.call_tool("status", {})
        assert st.structured_content["totalDocuments"] == 1, st.structured_content
        assert "Total documents: 1" in texts(st), texts(st)
    async with mcp(w, w.tokens["ann"]) as c:
        r = await c.call_tool("search", {"query": "ocelot"})
        assert "pay.md" in texts(r) + json.dumps(r.structured_content or {}), texts(r)


def capture(w: World, token: str, name: str, args: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}}
    r = requests.post(w.srv.url("/api/v1/mcp"), headers={"Authorization": f"Bearer {token}",
                      "Content-Type": "application/json", "X-Resource": "handbook"}, data=json.dumps(body), timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_quka_capture_tools_show_each_reader_only_what_it_may_read(world):
    w = world
    listed = json.dumps(capture(w, w.tokens["bob"], "list_knowledge", {}))
    assert "handbook.md" in listed and "pay.md" not in listed and "board.md" not in listed, listed
    found = capture(w, w.tokens["bob"], "query_knowledge", {"query": "ocelot salary"})["result"]
    assert found["structuredContent"] == {"results": [], "total_count": 0}, found
    mine = capture(w, w.tokens["ann"], "query_knowledge", {"query": "ocelot salary"})["result"]
    assert mine["structuredContent"]["total_count"] == 1, mine
    hidden = capture(w, w.tokens["bob"], "get_knowledge", {"id": w.docs["hr"]["id"]})
    missing = capture(w, w.tokens["bob"], "get_knowledge", {"id": MISSING_ID})
    assert json.dumps(hidden).replace(w.docs["hr"]["id"], "X") == json.dumps(missing).replace(MISSING_ID, "X")
    mine = json.dumps(capture(w, w.tokens["ann"], "get_knowledge", {"id": w.docs["hr"]["id"]}))
    assert "ocelot" in mine, mine


def chat_sources(w: World, token: str, question: str) -> tuple[list[dict], str]:
    """One RAG chat over the handbook: the passages the answer cites and the prompt the
    provider got."""
    w.fake.reset()
    w.fake.script([{"text": "See [1]."}])
    r = requests.post(w.srv.url("/api/v1/chat"), timeout=(10, 60), stream=True,
                      headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
                      json={"stream": True, "messages": [{"role": "user", "content": question}], "kb_ids": ["handbook"]})
    assert r.status_code == 200, r.text
    events = [json.loads(line[5:]) for line in r.iter_lines(decode_unicode=True) if line.startswith("data:")]
    assert events[-1]["type"] == "done", events
    [rag] = [e["data"] for e in events if e["type"] == "rag_source"]
    [req] = w.fake.streamed()
    return rag, req.text()


def test_chat_cites_and_prompts_only_what_the_reader_may_read(world):
    w = world
    everything = {"handbook.md", "pay.md", "board.md"}
    for user, visible in (("bob", {"handbook.md"}), ("ann", {"handbook.md", "pay.md"}), ("owner", everything)):
        sources, prompt = chat_sources(w, w.tokens[user], "What is the zebra policy?")
        cited = {s["source"] for s in sources}
        assert cited & everything == visible, (user, sources)
        for word, doc in (("heron", "handbook.md"), ("ocelot", "pay.md"), ("vicuna", "board.md")):
            assert (word in prompt) == (doc in visible), (user, word, prompt)
    # A question only a hidden document answers: nothing is retrieved, nothing reaches the provider.
    sources, prompt = chat_sources(w, w.tokens["bob"], "ocelot salary bands")
    assert all(s["source"] == "handbook.md" for s in sources) and "ocelot" not in prompt.replace(
        "ocelot salary bands", ""), (sources, prompt)


def test_a_source_mapping_decides_readers_and_a_changed_mapping_moves_them(world):
    w = world
    folder = w.root / "share"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave\n\nThe capybara leave policy.\n", encoding="utf-8")
    (folder / "intro.md").write_text("# Intro\n\nThe capybara welcome.\n", encoding="utf-8")
    s = w.cli_json("--space", "acme", "source", "add", "handbook", "--folder", str(folder),
                   "--readers", "hr/**=group:hr", "--readers", "intro.md=everyone")
    assert s["readers"]["rules"][0] == {"paths": "hr/**", "readers": ["group:hr"]}, s
    w.cli("--space", "acme", "source", "sync", s["id"])
    words_found_soon(w, w.tokens["ann"], "capybara", {"intro.md", "leave.md"})
    assert words_found(w, w.tokens["bob"], "capybara") == {"intro.md"}
    # The mapping changes over REST (an admin); the next sync moves only readers.
    r = http(w.srv, "PATCH", f"/api/v1/sources/{s['id']}", w.tokens["owner"],
             json={"readers": {"rules": [{"paths": "**", "readers": ["user:bob"]}]}})
    assert r.status_code == 200, r.text
    r = http(w.srv, "PATCH", f"/api/v1/sources/{s['id']}", w.tokens["owner"],
             json={"readers": {"rules": [{"paths": "**", "readers": ["staff"]}]}})
    assert r.status_code == 400 and "staff" in r.json()["detail"], r.text
    rep = w.cli_json("--space", "acme", "source", "sync", s["id"])["report"]
    assert sorted((l["path"], l["action"]) for l in rep["details"]) == [("hr/leave.md", "readers"), ("intro.md", "readers")], rep
    words_found_soon(w, w.tokens["ann"], "capybara", set())  # both documents' readers moved
    assert words_found(w, w.tokens["bob"], "capybara") == {"intro.md", "leave.md"}
    w.cli("--space", "acme", "source", "rm", s["id"])
