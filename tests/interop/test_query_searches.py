"""qmd 2.8's typed ``query`` (issue 44 item 3), through every surface.

Three folder collections — ``sea`` (harbor, lighthouse), ``land`` (market, orchard) and
``misc`` (a recipe) — indexed and embedded. ``query`` takes ``searches`` (up to 10 typed
sub-queries: ``lex`` runs the keyword retriever only, ``vec`` the vector retriever only,
``hyde`` embeds a hypothetical answer passage; the first weighs twice the others),
``intent``, ``collections`` and ``candidateLimit``. Checked over REST ``/query``, the MCP
``query`` tool with the official Python SDK, and ``quarry query --search TYPE:TEXT``; bad
inputs are 400s (REST), ``isError`` (MCP) and exit code 1 (CLI), naming the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import requests
from conftest import QuarryHome, QuarryServer, make_home, start_server
from mcp import Client

FOLDERS = {
    "sea": {
        "harbor.md": "# Harbor\n\nThe harbor master keeps the ships' ledger and the tide tables.\n",
        "lighthouse.md": "# Lighthouse\n\nThe lighthouse keeper trims the lamp every evening so ships see the rocks.\n",
    },
    "land": {
        "market.md": "# Market\n\nThe fish market opens at dawn with the night's catch.\n",
        "orchard.md": "# Orchard\n\nApple trees in the orchard bloom in spring and are picked in autumn.\n",
    },
    "misc": {
        "recipe.md": "# Recipe\n\nBake the apple pie for forty minutes.\n",
    },
}

VEC = "who looks after the light that warns ships at night"
HYDE = "The keeper climbs the tower each evening, trims the wick and lights the lamp so that ships can see the rocks."


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("query_searches")
    model = os.environ.get("QUARRY_TEST_MINILM")
    if not model:
        if os.environ.get("CI") == "true":
            pytest.fail("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
        pytest.skip("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_EMBED_MODEL": model})
    for coll, docs in FOLDERS.items():
        folder = root / coll
        folder.mkdir()
        for name, text in docs.items():
            (folder / name).write_text(text, encoding="utf-8")
        r = home.run("collection", "add", str(folder), "--name", coll)
        assert r.returncode == 0, r.stderr
        r = home.run("index", coll)
        assert r.returncode == 0, r.stderr
        r = home.run("embed", "-c", coll, timeout=900)
        assert r.returncode == 0, r.stderr
    srv = start_server(home, logdir=root / "logs")
    yield home, srv
    srv.stop()


def files(hits: list[dict]) -> list[str]:
    return [h["file"] for h in hits]


def rest(srv: QuarryServer, body: dict) -> requests.Response:
    return requests.post(srv.url("/query"), json=body, timeout=60)


def ok(srv: QuarryServer, body: dict) -> dict:
    r = rest(srv, body)
    assert r.status_code == 200, (body, r.text)
    return r.json()


def test_rest_each_type_runs_its_retriever(world):
    _, srv = world
    body = ok(srv, {"searches": [{"type": "lex", "query": "lighthouse"}]})
    assert files(body["results"])[0] == "sea/lighthouse.md", body
    assert body["stages"] == ["keyword"], body
    for kind, text in (("vec", VEC), ("hyde", HYDE)):
        body = ok(srv, {"searches": [{"type": kind, "query": text}], "collections": ["sea"]})
        assert "vector" in body["stages"], body
        assert files(body["results"])[0] == "sea/lighthouse.md", (kind, body)
    body = ok(
        srv,
        {
            "searches": [
                {"type": "lex", "query": "harbor"},
                {"type": "vec", "query": VEC},
                {"type": "hyde", "query": HYDE},
            ]
        },
    )
    assert {"sea/harbor.md", "sea/lighthouse.md"} <= set(files(body["results"])), body
    # `query` with `searches`: the query runs first, through both retrievers.
    body = ok(srv, {"query": "market", "searches": [{"type": "lex", "query": "orchard"}]})
    assert files(body["results"])[:2] == ["land/market.md", "land/orchard.md"], body


def test_rest_first_sub_query_weighs_most(world):
    _, srv = world
    a = [{"type": "lex", "query": "harbor"}, {"type": "lex", "query": "market"}]
    body = ok(srv, {"searches": a})
    assert files(body["results"])[:2] == ["sea/harbor.md", "land/market.md"], body
    body = ok(srv, {"searches": list(reversed(a))})
    assert files(body["results"])[:2] == ["land/market.md", "sea/harbor.md"], body


def test_rest_collections_candidate_limit_intent_and_filter(world):
    _, srv = world
    apple = [{"type": "lex", "query": "apple"}]
    assert set(files(ok(srv, {"searches": apple})["results"])) == {"land/orchard.md", "misc/recipe.md"}
    body = ok(srv, {"searches": apple, "collections": ["sea", "land"]})
    assert files(body["results"]) == ["land/orchard.md"], body
    # A full query finds every document through the vectors: only the collections named.
    for body in (
        ok(srv, {"query": "apple", "collections": ["land", "misc"], "limit": 5}),
        ok(srv, {"query": "apple", "collection": "misc", "collections": ["land"]}),
    ):
        got = set(files(body["results"]))
        assert {"land/orchard.md", "misc/recipe.md"} <= got, body
        assert not any(f.startswith("sea/") for f in got), body
    body = ok(srv, {"searches": apple, "candidateLimit": 1})
    assert body["results"], body
    body = ok(srv, {"query": "lamp", "intent": "maritime safety at night", "candidateLimit": 5})
    assert files(body["results"])[0] == "sea/lighthouse.md", body
    flt = {"field": "collection", "operator": "eq", "value": "land"}
    body = ok(srv, {"searches": [{"type": "lex", "query": "the"}, {"type": "vec", "query": VEC}], "filter": flt})
    assert body["results"] and all(f.startswith("land/") for f in files(body["results"])), body


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"searches": [{"type": "lex", "query": "a"}, {"type": "lexx", "query": "b"}]}, 'searches[1].type: unknown type "lexx"'),
        ({"searches": [{"type": "lex", "query": "a"}] * 11}, "searches: at most 10"),
        ({"searches": [{"type": "vec", "query": "  "}]}, "searches[0].query"),
        ({"searches": [{"type": "vec"}]}, "searches[0].query"),
        ({"searches": "lex:apple"}, "searches"),
        ({"searches": [{"type": "lex", "query": "apple"}], "collections": ["land", "nope"]}, "collections[1]"),
        ({"searches": [{"type": "lex", "query": "apple"}], "candidateLimit": 0}, "candidateLimit"),
        ({"limit": 3}, "query"),
    ],
)
def test_rest_bad_inputs_are_400s_naming_the_field(world, body, needle):
    _, srv = world
    r = rest(srv, body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["detail"], r.json()


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.mark.anyio
async def test_mcp_query_takes_searches(world):
    _, srv = world
    async with Client(srv.mcp_url, read_timeout_seconds=60) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        props = tools["query"].input_schema["properties"]
        for key in ("query", "limit", "minScore", "collection", "filter", "searches", "intent", "collections", "candidateLimit"):
            assert key in props, sorted(props)
        assert props["searches"]["items"]["properties"]["type"]["enum"] == ["lex", "vec", "hyde"]
        r = await c.call_tool(
            "query",
            {
                "searches": [{"type": "lex", "query": "harbor"}, {"type": "vec", "query": VEC}],
                "collections": ["sea"],
                "intent": "ports and ships",
                "candidateLimit": 10,
            },
        )
        assert r.is_error is not True, text_of(r)
        hits = r.structured_content["results"]
        assert hits[0]["file"] == "sea/harbor.md" and all(h["file"].startswith("sea/") for h in hits), hits
        r = await c.call_tool("query", {"searches": [{"type": "lexx", "query": "harbor"}]})
        assert r.is_error is True and 'searches[0].type: unknown type "lexx"' in text_of(r), text_of(r)
        r = await c.call_tool("query", {"searches": [{"type": "lex", "query": "x"}], "collections": ["nope"]})
        assert r.is_error is True and "collections[0]" in text_of(r), text_of(r)
        r = await c.call_tool("query", {"query": "lighthouse"})
        assert r.is_error is not True and r.structured_content["results"][0]["file"] == "sea/lighthouse.md", text_of(r)


def test_cli_search_flags(world):
    home, _ = world
    r = home.run("--json", "query", "--search", "lex:harbor", "--search", f"vec:{VEC}", "--collections", "sea,land")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert files(body["results"])[0] == "sea/harbor.md", body
    assert "vector" in body["stages"], body
    r = home.run("--json", "query", "--search", "lex:apple", "--collections", "land", "--collections", "sea", "--intent", "fruit", "--candidate-limit", "5")
    assert r.returncode == 0, r.stderr
    assert files(json.loads(r.stdout)["results"]) == ["land/orchard.md"]
    r = home.run("query", "--search", "lexx:apple")
    assert r.returncode == 1 and "searches[0].type" in r.stderr, (r.returncode, r.stderr)
    r = home.run("query", "--search", "lex:apple", "--collections", "nope")
    assert r.returncode == 1 and "collections[0]" in r.stderr, (r.returncode, r.stderr)
