"""Quarry's MCP server driven by the official MCP Python SDK (`mcp`, pinned in requirements.txt).

Every contract test runs over four connections: stdio (`quarry mcp`) and Streamable HTTP
(`quarry serve`, `<base>/mcp`), each in the SDK's default `mode="auto"` (it probes
`server/discover` and settles on protocol 2026-07-28, stateless) and in `mode="legacy"` (the
`initialize` handshake, protocol 2025-11-25, with an `Mcp-Session-Id` session over HTTP).

The contract is seed 001 ("MCP Tools (6个)", resources, prompts) and SPEC §2.2; strings the seed
fixes are compared exactly (with QMD's name replaced by Quarry's where the seed names the
product, e.g. `Run 'quarry embed'`).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest
from conftest import (
    CHINESE,
    COLLECTION,
    CORPUS,
    JOURNAL_1,
    JOURNAL_2,
    JOURNAL_CONTEXT,
    JOURNAL_OLD,
    LARGE,
    MEETING,
    PASSWD_MARKER,
    PLAN,
    README,
    display,
)
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
LEGACY = "2025-11-25"  # what the SDK offers in the initialize handshake

TOOL_NAMES = {"search", "vsearch", "query", "get", "multi_get", "status", "metadata"}
# SPEC §2.2: the built-in knowledge package lists QMD's six, knowledge_search and the
# knowledge capture tools (seed 004); the machine's owner may write, so all are listed.
READ_TOOLS = TOOL_NAMES | {"knowledge_search", "get_knowledge", "query_knowledge", "list_knowledge",
                          "wiki_index", "read_page", "lint_wiki", "ls", "find", "grep", "cat"}
ALL_TOOLS = READ_TOOLS | {"create_knowledge", "update_knowledge", "delete_knowledge", "write_page", "wiki_log"}
VECTOR_INDEX_MISSING = "Vector index not found. Run 'quarry embed' first to create embeddings."
CONTEXT_COMMENT = f"<!-- Context: {JOURNAL_CONTEXT} -->\n\n"
RESULT_LINE = re.compile(r"^(#[0-9a-f]{6,}) (\d{1,3})% (.+) - (.+)$")
ISO_8601 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")

CONNECTIONS = ["stdio", "http", "stdio-legacy", "http-legacy"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def encode_qmd_path(path: str) -> str:
    """Seed 001's encodeQmdPath: encodeURIComponent per segment, slashes kept."""
    return "/".join(urllib.parse.quote(seg, safe="!~*'()") for seg in path.split("/"))


def qmd_uri(rel: str) -> str:
    return "qmd://" + encode_qmd_path(display(rel))


def body(rel: str) -> str:
    """A corpus file as Quarry returns it (no trailing newline)."""
    return CORPUS[rel].rstrip("\n")


def numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{start + i}: {line}" for i, line in enumerate(text.split("\n")))


def dump(result) -> dict:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def texts(result) -> list[str]:
    return [c.text for c in result.content if c.type == "text"]


def resources(result) -> list[dict]:
    return [dump(c)["resource"] for c in result.content if c.type == "resource"]


def assert_no_passwd(obj) -> None:
    blob = json.dumps(obj if isinstance(obj, (dict, list, str)) else dump(obj), ensure_ascii=False)
    assert PASSWD_MARKER not in blob and "/bin/bash" not in blob and "nologin" not in blob, blob[:500]


@asynccontextmanager
async def connect(kind: str, home, server, stderr_path: Path):
    """An SDK `Client` over `kind` ("stdio"/"http", optionally "-legacy")."""
    transport, _, legacy = kind.partition("-")
    mode = "legacy" if legacy else "auto"
    if transport == "stdio":
        params = StdioServerParameters(command=str(home.bin), args=["mcp"], env=home.env)
        with open(stderr_path, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode=mode, read_timeout_seconds=30) as c:
                yield c
    else:
        async with Client(server.mcp_url, mode=mode, read_timeout_seconds=30) as c:
            yield c


@pytest.fixture(params=CONNECTIONS)
async def mcp(request, shared_home, shared_server, tmp_path):
    stderr_path = tmp_path / "quarry-mcp.stderr"
    async with connect(request.param, shared_home, shared_server, stderr_path) as client:
        client.kind = request.param
        yield client
    if stderr_path.exists():
        err = stderr_path.read_text(errors="replace")
        assert "panicked" not in err and " ERROR " not in err, err[-3000:]


async def call(mcp, name: str, args: dict | None = None):
    return await mcp.call_tool(name, args or {})


async def ok(mcp, name: str, args: dict | None = None):
    r = await call(mcp, name, args)
    assert r.is_error is not True, f"{name}({args}) failed: {texts(r)}"
    return r


async def tool_error(mcp, name: str, args: dict) -> str:
    r = await call(mcp, name, args)
    assert r.is_error is True, f"{name}({args}) should fail with isError, got {dump(r)}"
    msgs = texts(r)
    assert len(msgs) == 1, dump(r)
    return msgs[0]


# ---------------------------------------------------------------------------------------------
# Lifecycle


async def test_negotiation_and_server_info(mcp, shared_home):
    expected = LEGACY if mcp.kind.endswith("legacy") else MODERN
    assert mcp.protocol_version == expected
    assert mcp.server_info is not None and mcp.server_info.name == "quarry"
    assert mcp.server_info.version and mcp.server_info.version in shared_home.run("--version").stdout
    caps = mcp.server_capabilities
    assert caps.tools is not None and caps.resources is not None and caps.prompts is not None
    # Quarry has no logging, completions or subscriptions and must not claim them.
    assert caps.logging is None and caps.completions is None
    assert not caps.resources.subscribe
    assert mcp.instructions and "search" in mcp.instructions


async def test_discover_result_over_modern_era(shared_home, shared_server, tmp_path):
    """`server/discover` (2026-07-28) lists every era Quarry negotiates."""
    for kind in ("stdio", "http"):
        async with connect(kind, shared_home, shared_server, tmp_path / "err") as c:
            d = c.session.discover_result
            assert d is not None, kind
            assert {"2025-06-18", "2025-11-25", MODERN} <= set(d.supported_versions), d.supported_versions


# ---------------------------------------------------------------------------------------------
# tools/list


async def test_lists_the_six_qmd_tools_and_the_knowledge_tools(mcp):
    tools = (await mcp.list_tools()).tools
    assert sorted(t.name for t in tools) == sorted(ALL_TOOLS)
    assert len(tools) == len(ALL_TOOLS)


async def test_tool_schemas_names_and_defaults(mcp):
    tools = {t.name: dump(t) for t in (await mcp.list_tools()).tools}
    for name in ("search", "vsearch", "query"):
        schema = tools[name]["inputSchema"]
        assert schema["type"] == "object"
        base = {"query", "limit", "minScore", "collection", "filter", "as_of"}
        if name == "query":
            # qmd 2.8's typed query (issue 44 item 3): `query` or `searches`, so neither is required.
            extra = {"searches", "intent", "collections", "candidateLimit", "rerank"}
            assert set(schema["properties"]) == base | extra, name
            assert not schema.get("required"), name
            assert schema["properties"]["searches"]["maxItems"] == 10
        else:
            assert set(schema["properties"]) == base, name
            assert schema["required"] == ["query"]
        assert schema["properties"]["limit"]["default"] == 10
        assert schema["properties"]["minScore"]["default"] == (0.3 if name == "vsearch" else 0)
        assert schema["properties"]["query"]["type"] == "string"
    get = tools["get"]["inputSchema"]
    assert set(get["properties"]) == {"file", "fromLine", "maxLines", "lineNumbers"}
    assert get["required"] == ["file"]
    assert get["properties"]["lineNumbers"].get("default", False) is False
    multi = tools["multi_get"]["inputSchema"]
    assert set(multi["properties"]) == {"pattern", "maxLines", "maxBytes", "lineNumbers"}
    assert multi["required"] == ["pattern"]
    assert multi["properties"]["maxBytes"]["default"] == 10240
    assert tools["status"]["inputSchema"]["type"] == "object"
    assert not tools["status"]["inputSchema"].get("properties")
    for name, t in tools.items():
        assert t["description"], name
        assert t["annotations"]["readOnlyHint"] is (name in READ_TOOLS), name
        assert t["annotations"].get("destructiveHint") is (name == "delete_knowledge"), name
        jsonschema.Draft202012Validator.check_schema(t["inputSchema"])


async def test_output_schemas(mcp):
    tools = {t.name: dump(t) for t in (await mcp.list_tools()).tools}
    for name in ("search", "vsearch", "query", "status"):
        assert "outputSchema" in tools[name], name
        jsonschema.Draft202012Validator.check_schema(tools[name]["outputSchema"])
    item = tools["search"]["outputSchema"]["properties"]["results"]["items"]
    assert set(item["required"]) == {"docid", "file", "title", "score", "context", "snippet"}
    assert set(tools["status"]["outputSchema"]["required"]) >= {
        "totalDocuments",
        "needsEmbedding",
        "hasVectorIndex",
        "collections",
    }
    # get / multi_get answer with embedded resources, never structuredContent, so an output
    # schema would oblige them to.
    assert "outputSchema" not in tools["get"] and "outputSchema" not in tools["multi_get"]


# ---------------------------------------------------------------------------------------------
# search / vsearch / query


def check_summary(result, query: str) -> list[dict]:
    """Seed 001 formatSearchSummary against structuredContent; returns the results."""
    hits = result.structured_content["results"]
    [text] = texts(result)
    if not hits:
        assert text == f'No results found for "{query}"'
        return hits
    n = len(hits)
    head = f'Found {n} result{"" if n == 1 else "s"} for "{query}":\n\n'
    assert text.startswith(head), text
    lines = text[len(head) :].split("\n")
    assert len(lines) == n, text
    for line, hit in zip(lines, hits, strict=True):
        m = RESULT_LINE.match(line)
        assert m, line
        assert line == f"{hit['docid']} {round(hit['score'] * 100)}% {hit['file']} - {hit['title']}"
        assert set(hit) == {"docid", "file", "title", "score", "context", "snippet"}, hit
        assert re.fullmatch(r"#[0-9a-f]{6,}", hit["docid"]), hit
        assert 0 < hit["score"] <= 1 and round(hit["score"], 2) == hit["score"], hit
        assert hit["snippet"] and all(re.match(r"^\d+: ", ln) for ln in hit["snippet"].split("\n")), hit
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    return hits


async def test_search_layout_and_structured_content(mcp):
    r = await ok(mcp, "search", {"query": "zanzibar"})
    [hit] = check_summary(r, "zanzibar")
    assert hit["file"] == display(PLAN)
    assert hit["title"] == "Alpha Launch Plan"
    assert hit["context"] is None
    assert "zanzibar" in hit["snippet"]
    # The snippet's line numbers are the file's.
    for ln in hit["snippet"].split("\n"):
        n, _, text = ln.partition(": ")
        assert CORPUS[PLAN].split("\n")[int(n) - 1] == text


async def test_search_several_hits_context_and_space_in_name(mcp):
    r = await ok(mcp, "search", {"query": "kumquat"})
    hits = check_summary(r, "kumquat")
    by_file = {h["file"]: h for h in hits}
    assert set(by_file) == {display(MEETING), display(JOURNAL_1)}
    assert by_file[display(MEETING)]["title"] == "Weekly Sync Meeting"
    assert by_file[display(JOURNAL_1)]["context"] == JOURNAL_CONTEXT
    assert by_file[display(MEETING)]["context"] is None


async def test_search_chinese(mcp):
    r = await ok(mcp, "search", {"query": "深度学习"})
    hits = check_summary(r, "深度学习")
    assert hits[0]["file"] == display(CHINESE)
    assert hits[0]["title"] == "机器学习笔记"


async def test_search_limit_min_score_collection(mcp):
    r = await ok(mcp, "search", {"query": "journal", "limit": 2})
    assert len(check_summary(r, "journal")) == 2
    r = await ok(mcp, "search", {"query": "kumquat", "collection": COLLECTION})
    assert len(check_summary(r, "kumquat")) == 2
    r = await ok(mcp, "search", {"query": "kumquat", "minScore": 0.99})
    assert check_summary(r, "kumquat") == []
    msg = await tool_error(mcp, "search", {"query": "kumquat", "collection": "no-such-collection"})
    assert "no-such-collection" in msg


async def test_search_no_results(mcp):
    r = await ok(mcp, "search", {"query": "nonexistentwordxyz"})
    assert texts(r) == ['No results found for "nonexistentwordxyz"']
    assert r.structured_content == {"results": []}


async def test_structured_content_matches_output_schema(mcp):
    tools = {t.name: t for t in (await mcp.list_tools()).tools}
    for name, args in (("search", {"query": "journal"}), ("query", {"query": "journal"}), ("status", {})):
        r = await ok(mcp, name, args)
        jsonschema.validate(r.structured_content, tools[name].output_schema)


async def test_vsearch_without_vectors_is_tool_error(mcp):
    r = await call(mcp, "vsearch", {"query": "how do we ship the alpha"})
    assert r.is_error is True
    assert [dump(c) for c in r.content] == [{"type": "text", "text": VECTOR_INDEX_MISSING}]


async def test_query_falls_back_to_keywords(mcp):
    r = await ok(mcp, "query", {"query": "zanzibar"})
    hits = check_summary(r, "zanzibar")
    keyword = (await ok(mcp, "search", {"query": "zanzibar"})).structured_content["results"]
    assert [h["file"] for h in hits] == [h["file"] for h in keyword] == [display(PLAN)]


# ---------------------------------------------------------------------------------------------
# get


async def test_get_by_path_with_space(mcp):
    r = await ok(mcp, "get", {"file": display(MEETING)})
    [res] = resources(r)
    assert len(r.content) == 1
    assert res["uri"] == "qmd://notes/projects/meeting%20notes.md" == qmd_uri(MEETING)
    assert res["mimeType"] == "text/markdown"
    assert res["text"] == body(MEETING)  # lineNumbers defaults to false; no context here
    # Seed 001: name and title are sent on the resource itself (test_mcp_wire.py checks the
    # wire); this SDK's ResourceContents model has no such fields and drops them, so a
    # client built on it reads them from _meta, where they are kept too.
    assert res["_meta"]["name"] == display(MEETING) and res["_meta"]["title"] == "Weekly Sync Meeting"
    # The extra fields do not break the SDK's validation of the result.
    assert r.content[0].resource.meta["name"] == display(MEETING)


async def test_get_chinese_uri_is_percent_encoded(mcp):
    r = await ok(mcp, "get", {"file": "zh/机器学习笔记.md"})  # a unique suffix
    [res] = resources(r)
    assert res["uri"] == "qmd://notes/zh/%E6%9C%BA%E5%99%A8%E5%AD%A6%E4%B9%A0%E7%AC%94%E8%AE%B0.md"
    assert res["text"] == body(CHINESE)


async def test_get_journal_has_context_comment(mcp):
    r = await ok(mcp, "get", {"file": display(JOURNAL_1)})
    [res] = resources(r)
    assert res["uri"] == qmd_uri(JOURNAL_1)
    assert res["text"] == CONTEXT_COMMENT + body(JOURNAL_1)


async def test_get_line_suffix_and_line_numbers(mcp):
    lines = body(JOURNAL_1).split("\n")
    # `file.md:3` starts at line 3 and wins over fromLine.
    r = await ok(mcp, "get", {"file": f"{display(JOURNAL_1)}:3", "fromLine": 1, "maxLines": 1})
    [res] = resources(r)
    assert res["uri"] == qmd_uri(JOURNAL_1)
    assert res["text"] == CONTEXT_COMMENT + lines[2]
    r = await ok(mcp, "get", {"file": display(JOURNAL_1), "fromLine": 2, "maxLines": 2, "lineNumbers": True})
    [res] = resources(r)
    assert res["text"] == CONTEXT_COMMENT + f"2: {lines[1]}\n3: {lines[2]}"
    r = await ok(mcp, "get", {"file": display(README), "lineNumbers": True})
    assert resources(r)[0]["text"] == numbered(body(README))


async def test_get_by_docid(mcp):
    hit = (await ok(mcp, "search", {"query": "zanzibar"})).structured_content["results"][0]
    r = await ok(mcp, "get", {"file": hit["docid"]})
    [res] = resources(r)
    assert res["uri"] == qmd_uri(PLAN)
    assert res["text"] == body(PLAN)


async def test_get_not_found_suggests(mcp):
    msg = await tool_error(mcp, "get", {"file": "notes/journals/2025-05-03.md"})
    head = "Document not found: notes/journals/2025-05-03.md\n\nDid you mean one of these?\n"
    assert msg.startswith(head), msg
    suggestions = msg[len(head) :].split("\n")
    assert 1 <= len(suggestions) <= 3, msg
    assert all(s.startswith("  - ") for s in suggestions), msg
    names = [s[4:] for s in suggestions]
    assert set(names) <= {display(p) for p in CORPUS}, names
    assert display(JOURNAL_1) in names or display(JOURNAL_2) in names


# ---------------------------------------------------------------------------------------------
# multi_get


async def test_multi_get_glob(mcp):
    r = await ok(mcp, "multi_get", {"pattern": "notes/journals/2025-05*.md"})
    assert [c.type for c in r.content] == ["resource", "resource"]
    got = {res["uri"]: res for res in resources(r)}
    assert set(got) == {qmd_uri(JOURNAL_1), qmd_uri(JOURNAL_2)}  # not 2025-04-30
    for rel in (JOURNAL_1, JOURNAL_2):
        assert got[qmd_uri(rel)]["mimeType"] == "text/markdown"
        assert got[qmd_uri(rel)]["text"] == CONTEXT_COMMENT + body(rel)
        assert got[qmd_uri(rel)]["_meta"]["name"] == display(rel)
        assert got[qmd_uri(rel)]["_meta"]["title"] == CORPUS[rel].split("\n")[0].removeprefix("# ")
    assert qmd_uri(JOURNAL_OLD) not in got


async def test_multi_get_seed_example_pattern(mcp):
    """`journals/2025-05*.md` (seed 001's example) is relative to the collection."""
    r = await ok(mcp, "multi_get", {"pattern": "journals/2025-05*.md"})
    assert [res["_meta"]["name"] for res in resources(r)] == [display(JOURNAL_1), display(JOURNAL_2)]
    msg = await tool_error(mcp, "multi_get", {"pattern": "journals/2030-*.md"})
    assert "No files matched pattern: journals/2030-*.md" in msg


async def test_multi_get_comma_list(mcp):
    r = await ok(mcp, "multi_get", {"pattern": f"{display(README)}, {display(MEETING)}"})
    assert [res["uri"] for res in resources(r)] == [qmd_uri(README), qmd_uri(MEETING)]
    assert [res["text"] for res in resources(r)] == [body(README), body(MEETING)]


async def test_multi_get_skips_large_files(corpus, mcp):
    size = (corpus / LARGE).stat().st_size
    assert size > 15 * 1024
    r = await ok(mcp, "multi_get", {"pattern": f"{display(README)},{display(LARGE)}"})
    assert [c.type for c in r.content] == ["resource", "text"]
    assert resources(r)[0]["uri"] == qmd_uri(README)
    assert texts(r) == [
        f"[SKIPPED: {display(LARGE)} - File too large ({round(size / 1024)}KB). "
        f"Use 'quarry get' with file=\"{display(LARGE)}\" to retrieve.]"
    ]
    # Only files *larger* than maxBytes are skipped.
    r = await ok(mcp, "multi_get", {"pattern": display(LARGE), "maxBytes": size})
    assert resources(r)[0]["text"] == body(LARGE)
    r = await ok(mcp, "multi_get", {"pattern": display(LARGE), "maxBytes": size - 1})
    assert [c.type for c in r.content] == ["text"]


async def test_multi_get_max_lines_and_line_numbers(mcp):
    r = await ok(mcp, "multi_get", {"pattern": "notes/journals/2025-05*.md", "maxLines": 2, "lineNumbers": True})
    got = {res["uri"]: res["text"] for res in resources(r)}
    for rel in (JOURNAL_1, JOURNAL_2):
        lines = body(rel).split("\n")
        expected = f"1: {lines[0]}\n2: {lines[1]}\n\n[... truncated {len(lines) - 2} more lines]"
        assert got[qmd_uri(rel)] == CONTEXT_COMMENT + expected


async def test_multi_get_brace_glob(mcp):
    r = await ok(mcp, "multi_get", {"pattern": "notes/journals/2025-05-0{1,2}.md"})
    assert sorted(res["uri"] for res in resources(r)) == [qmd_uri(JOURNAL_1), qmd_uri(JOURNAL_2)]


async def test_multi_get_errors_lead(mcp):
    r = await ok(mcp, "multi_get", {"pattern": f"notes/missing.md, {display(README)}"})
    assert [c.type for c in r.content] == ["text", "resource"]
    assert texts(r)[0].startswith("Errors:\n")
    assert "notes/missing.md" in texts(r)[0]
    assert resources(r)[0]["uri"] == qmd_uri(README)


async def test_multi_get_no_match_is_tool_error(mcp):
    msg = await tool_error(mcp, "multi_get", {"pattern": "notes/nothing-here*.md"})
    assert "notes/nothing-here*.md" in msg


# ---------------------------------------------------------------------------------------------
# status


async def test_status(corpus, mcp):
    r = await ok(mcp, "status")
    s = r.structured_content
    assert s["totalDocuments"] == len(CORPUS)
    assert isinstance(s["needsEmbedding"], int) and 0 <= s["needsEmbedding"] <= len(CORPUS)
    assert s["hasVectorIndex"] is False
    [c] = s["collections"]
    assert c["name"] == COLLECTION
    assert Path(c["path"]) == corpus
    assert c["pattern"] == "**/*.md"
    assert c["documents"] == len(CORPUS)
    assert ISO_8601.match(c["lastUpdated"]), c["lastUpdated"]
    datetime.fromisoformat(c["lastUpdated"].replace("Z", "+00:00"))
    [text] = texts(r)
    # Seed 001's summary layout, with the product's name.
    assert text == (
        "Quarry Index Status:\n"
        f"  Total documents: {len(CORPUS)}\n"
        f"  Needs embedding: {s['needsEmbedding']}\n"
        "  Vector index: no\n"
        "  Collections: 1\n"
        f"    - {corpus} ({len(CORPUS)} docs)"
    )


# ---------------------------------------------------------------------------------------------
# Resources and prompts


async def test_resource_templates_and_no_list(mcp):
    [t] = (await mcp.list_resource_templates()).resource_templates
    assert t.uri_template == "qmd://{+path}"
    assert t.name == "document"  # QMD's registration name
    assert t.mime_type == "text/markdown"
    assert "Use search tools to discover documents" in (t.description or "")
    assert (await mcp.list_resources()).resources == []


@pytest.mark.parametrize(
    "uri",
    [
        "qmd://notes/projects/meeting%20notes.md",  # encodeQmdPath: segments encoded
        "qmd://notes%2Fprojects%2Fmeeting%20notes.md",  # the seed's examples encode '/' too
    ],
)
async def test_read_resource_with_space(mcp, uri):
    [c] = (await mcp.read_resource(uri)).contents
    assert c.uri == uri
    assert c.mime_type == "text/markdown"
    assert c.text == numbered(body(MEETING))  # line numbers on by default


async def test_read_resource_suffix_match_and_context(mcp):
    uri = "qmd://journals/2025-05-01.md"
    [c] = (await mcp.read_resource(uri)).contents
    assert c.text == CONTEXT_COMMENT + numbered(body(JOURNAL_1))


async def test_read_resource_chinese(mcp):
    [c] = (await mcp.read_resource(qmd_uri(CHINESE))).contents
    assert c.text == numbered(body(CHINESE))


async def test_read_unknown_resource_is_protocol_error(mcp):
    with pytest.raises(MCPError) as e:
        await mcp.read_resource("qmd://notes/no-such-file.md")
    # -32002 Resource not found up to 2025-11-25; SEP-2164 folds it into -32602 at 2026-07-28.
    assert e.value.code == (-32002 if mcp.kind.endswith("legacy") else -32602)
    assert "Document not found" in e.value.message
    with pytest.raises(MCPError) as e:
        await mcp.read_resource("file:///etc/hosts")
    assert e.value.code == -32602


async def test_prompts(mcp):
    [p] = (await mcp.list_prompts()).prompts
    assert p.name == "query"
    assert p.description
    r = await mcp.get_prompt("query")
    [m] = r.messages
    assert m.role == "user" and m.content.type == "text"
    text = m.content.text
    assert "## Available Tools" in text
    for i, name in enumerate(["search", "vsearch", "query", "get", "multi_get", "status"], 1):
        assert f"### {i}. {name} (" in text, name
    assert "## Search Strategy" in text and "qmd://" in text
    with pytest.raises(MCPError) as e:
        await mcp.get_prompt("no-such-prompt")
    assert e.value.code == -32602


async def test_concurrent_calls_on_one_connection(mcp):
    """Twenty interleaved requests on one connection each get their own answer."""
    import anyio

    queries = ["zanzibar", "kumquat", "深度学习", "xylophone", "nonexistentwordxyz"] * 4
    got: dict[int, list[str]] = {}

    async def one(i: int, q: str):
        r = await ok(mcp, "search", {"query": q})
        got[i] = [h["file"] for h in check_summary(r, q)]

    async with anyio.create_task_group() as tg:
        for i, q in enumerate(queries):
            tg.start_soon(one, i, q)
    for i, q in enumerate(queries):
        assert got[i] == got[i % 5], (q, got[i], got[i % 5])
    assert got[0] == [display(PLAN)] and got[4] == []


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    "tool, args, field",
    [
        ("search", {"query": "kumquat", "limit": "abc"}, "limit"),
        ("search", {"query": "kumquat", "minScore": "x"}, "minScore"),
        ("query", {"query": "kumquat", "limit": 0}, "limit"),
        ("vsearch", {"query": 42}, "query"),
        ("search", {}, "query"),
        ("get", {"file": 123}, "file"),
        ("get", {"file": display(README), "lineNumbers": "yes"}, "lineNumbers"),
        ("get", {"file": display(README), "fromLine": -1}, "fromLine"),
        ("multi_get", {"pattern": ["a", "b"]}, "pattern"),
        ("multi_get", {"pattern": "notes/*.md", "maxBytes": "big"}, "maxBytes"),
    ],
)
async def test_wrong_argument_types_name_the_field(mcp, tool, args, field):
    msg = await tool_error(mcp, tool, args)
    assert f"`{field}`" in msg or field in msg, msg


async def test_unknown_tool_is_protocol_error(mcp):
    with pytest.raises(MCPError) as e:
        await mcp.call_tool("no_such_tool", {})
    assert e.value.code == -32602
    assert "no_such_tool" in e.value.message


@pytest.mark.parametrize(
    "tool, args",
    [
        ("get", {"file": "../../etc/passwd"}),
        ("get", {"file": "/etc/passwd"}),
        ("get", {"file": "notes/../../../../etc/passwd"}),
        ("get", {"file": "qmd://..%2F..%2Fetc%2Fpasswd"}),
        ("multi_get", {"pattern": "../../etc/passwd"}),
        ("multi_get", {"pattern": "/etc/*"}),
        ("multi_get", {"pattern": "../../etc/pass*"}),
    ],
)
async def test_path_traversal_in_tools_is_refused(mcp, tool, args):
    r = await call(mcp, tool, args)
    assert r.is_error is True, dump(r)
    assert_no_passwd(dump(r))


async def test_path_traversal_in_comma_list_is_reported_not_served(mcp):
    r = await ok(mcp, "multi_get", {"pattern": f"{display(README)},../../etc/passwd,/etc/passwd"})
    assert_no_passwd(dump(r))
    assert [res["uri"] for res in resources(r)] == [qmd_uri(README)]
    assert texts(r)[0].startswith("Errors:\n")


@pytest.mark.parametrize(
    "uri",
    [
        "qmd://..%2F..%2Fetc%2Fpasswd",
        "qmd://../../etc/passwd",
        "qmd:///etc/passwd",
        "qmd://notes/..%2F..%2F..%2Fetc%2Fpasswd",
    ],
)
async def test_path_traversal_in_resources_is_refused(mcp, uri):
    with pytest.raises(MCPError) as e:
        await mcp.read_resource(uri)
    assert_no_passwd(e.value.message)
    assert_no_passwd(json.dumps(e.value.data))


# ---------------------------------------------------------------------------------------------
# Session end (HTTP, legacy era: sessions exist)


async def test_session_close_is_clean_for_python_sdk(shared_server, caplog):
    caplog.set_level("WARNING")
    async with Client(shared_server.mcp_url, mode="legacy") as c:
        await c.list_tools()
    assert not [r for r in caplog.records if "Session termination failed" in r.getMessage()]
