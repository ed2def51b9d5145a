"""Knowledge entries with time (issue 44, item 4), through every surface.

``create_knowledge`` with a ``key`` supersedes the key's current entry: searches return the
new one, ``as_of`` a moment before the correction returns the old one, and the old one stays
readable with its window, its successor and its history. Expiry (``ttl``), validity windows,
near-duplicates (reported and merged), provenance (user, client, tool call, conversation),
``derived_from`` with cascading deletes, and every bad input (a bad ``as_of``, a window that
ends before it starts, an expiry in the past, an unknown or already-superseded
``supersedes``) are checked over MCP with the official Python SDK in its default mode, over
QukaAI's ``/api/v1/mcp`` as its curl examples call it, over REST (``/search``, ``/query``,
``/api/v1/knowledge-search``) and with the CLI's ``--as-of``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests
from conftest import make_home, start_server
from mcp import Client

TOPIC = "Acme chief executive"


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("entries")
    home = make_home(quarry_bin, corpus, root / "home", env={"QUARRY_EMBED_MODEL": "none"})
    srv = start_server(home, logdir=root / "logs")
    yield home, srv
    srv.stop()


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def now_ms() -> int:
    return int(time.time() * 1000)


async def create(c, args: dict) -> dict:
    r = await c.call_tool("create_knowledge", args)
    assert r.is_error is not True, text_of(r)
    return r.structured_content


async def passages(c, query: str, **extra) -> set[str]:
    r = await c.call_tool("knowledge_search", {"query": query, "search_mode": "keyword", "min_score": 0, **extra})
    assert r.is_error is not True, text_of(r)
    return {h["knowledge_id"] for h in r.structured_content["results"]}


@pytest.mark.anyio
async def test_a_key_supersedes_and_as_of_reads_the_past_over_mcp(world):
    _, srv = world
    async with Client(srv.mcp_url, read_timeout_seconds=30) as c:
        first = await create(c, {"content": f"# {TOPIC}\n\nAcme's chief executive is Ann Lee.", "key": "acme.ceo",
                                 "conversation_id": "conv-7"})
        assert first["key"] == "acme.ceo" and "valid_until" not in first, first
        time.sleep(0.05)
        between = now_ms()
        time.sleep(0.05)
        r = await c.call_tool("create_knowledge", {"content": f"# {TOPIC}, corrected\n\nAcme's chief executive is Bo Chen.",
                                                   "key": "acme.ceo"})
        assert r.is_error is not True, text_of(r)
        second = r.structured_content
        assert second["superseded"] == first["id"] and first["id"] in text_of(r), text_of(r)

        # Every read surface sees the current version now, the first one as of before the
        # correction, nothing as of before either.
        assert await passages(c, TOPIC) == {second["id"]}
        assert await passages(c, TOPIC, as_of=between) == {first["id"]}
        assert await passages(c, TOPIC, as_of=first["valid_from"] - 60_000) == set()
        date_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(between // 1000)) + f".{between % 1000:03d}Z"
        assert await passages(c, TOPIC, as_of=date_text) == {first["id"]}
        r = await c.call_tool("query_knowledge", {"query": TOPIC, "min_score": 0})
        assert [x["knowledge_id"] for x in r.structured_content["results"]] == [second["id"]], r.structured_content
        r = await c.call_tool("query_knowledge", {"query": TOPIC, "min_score": 0, "as_of": between})
        assert [x["knowledge_id"] for x in r.structured_content["results"]] == [first["id"]], r.structured_content
        for tool in ("search", "query"):
            r = await c.call_tool(tool, {"query": "chief executive"})
            assert r.is_error is not True, text_of(r)
            assert [h["title"] for h in r.structured_content["results"]] == [f"{TOPIC}, corrected"], text_of(r)
            r = await c.call_tool(tool, {"query": "chief executive", "as_of": between})
            assert [h["title"] for h in r.structured_content["results"]] == [TOPIC], text_of(r)
        r = await c.call_tool("list_knowledge", {})
        listed = {i["id"] for i in r.structured_content["items"]}
        assert second["id"] in listed and first["id"] not in listed, r.structured_content
        r = await c.call_tool("list_knowledge", {"as_of": between})
        listed = {i["id"] for i in r.structured_content["items"]}
        assert first["id"] in listed and second["id"] not in listed, r.structured_content

        # The old version: readable by id, its window closed by its successor, its history
        # and provenance (the SDK's client name, the tool call, the conversation).
        r = await c.call_tool("get_knowledge", {"id": first["id"], "history": True})
        assert r.is_error is not True, text_of(r)
        got = r.structured_content
        entry = got["entry"]
        assert entry["superseded_by"] == second["id"] and entry["valid_until"] == second["valid_from"], entry
        prov = entry["provenance"]
        assert prov["via"] == "mcp" and prov["conversation"] == "conv-7" and prov["tool_call"], prov
        assert prov["client"] and not prov["client"].startswith("rmcp/"), prov
        assert [v["id"] for v in got["versions"]] == [first["id"], second["id"]], got["versions"]
        assert [(e["entry"], e["event"]) for e in got["history"]] == [
            (first["id"], "created"), (second["id"], "created"), (first["id"], "superseded")], got["history"]
        assert "## History" in text_of(r)

        # The same content again under the key: nothing new.
        r = await c.call_tool("create_knowledge", {"content": f"# {TOPIC}, corrected\n\nAcme's chief executive is Bo Chen.",
                                                   "key": "acme.ceo"})
        assert r.structured_content["id"] == second["id"] and "already exists" in text_of(r), text_of(r)


@pytest.mark.anyio
async def test_bad_entry_inputs_are_refused_and_store_nothing(world):
    _, srv = world
    async with Client(srv.mcp_url, read_timeout_seconds=30) as c:
        base = await create(c, {"content": "# Budget\n\nThe travel budget is 4000 euros.", "key": "budget"})
        await create(c, {"content": "# Budget\n\nThe travel budget is 5000 euros.", "key": "budget"})
        r = await c.call_tool("list_knowledge", {"limit": 100})
        before = r.structured_content["total"]
        now = now_ms()
        bad = [
            ({"valid_from": "2026-06-02", "valid_to": "2026-06-01"}, "valid_to"),
            ({"expires_at": now - 60_000}, "past"),
            ({"expires_at": now + 60_000, "ttl": 60}, "not both"),
            ({"ttl": -5}, "ttl"),
            ({"valid_from": "next tuesday"}, "valid_from"),
            ({"supersedes": "no-such-entry"}, "supersedes"),
            ({"supersedes": base["id"]}, "already superseded"),
            ({"derived_from": ["no-such-entry"]}, "derived_from"),
            ({"on_duplicate": "overwrite"}, "on_duplicate"),
            ({"key": ""}, "key"),
        ]
        for extra, word in bad:
            r = await c.call_tool("create_knowledge", {"content": f"# Refused\n\nrefused write {word}", **extra})
            assert r.is_error is True and word in text_of(r), (extra, text_of(r))
        r = await c.call_tool("knowledge_search", {"query": "budget", "as_of": "last tuesday"})
        assert r.is_error is True and "as_of" in text_of(r), text_of(r)
        r = await c.call_tool("search", {"query": "budget", "as_of": "soon"})
        assert r.is_error is True and "as_of" in text_of(r), text_of(r)
        r = await c.call_tool("list_knowledge", {"limit": 100})
        assert r.structured_content["total"] == before, r.structured_content


@pytest.mark.anyio
async def test_expiry_near_duplicates_and_cascading_deletes(world):
    _, srv = world
    async with Client(srv.mcp_url, read_timeout_seconds=30) as c:
        parking = await create(c, {"content": "# Parking\n\nVisitor parking is in lot C this week.", "ttl": 3600})
        assert parking["valid_until"] - parking["valid_from"] == 3_600_000, parking
        assert await passages(c, "visitor parking") == {parking["id"]}
        assert await passages(c, "visitor parking", as_of=now_ms() + 7_200_000) == set()

        original = await create(c, {"content": "The staging database password rotates every 30 days."})
        r = await c.call_tool("create_knowledge", {"content": "Every 30 days the staging database password rotates."})
        reported = r.structured_content
        assert [d["id"] for d in reported["near_duplicates"]] == [original["id"]], reported
        assert original["id"] in text_of(r) and "superseded" not in reported, text_of(r)
        merged = await create(c, {"content": "The staging database password rotates every 30 days, at midnight UTC.",
                                  "on_duplicate": "merge"})
        assert merged["merged"] is True and merged["superseded"] in {original["id"], reported["id"]}, merged

        source = await create(c, {"content": "# Standup\n\nThe daily standup moved to 9:30."})
        summary = await create(c, {"content": "# Weekly summary\n\nStandup time changed.", "derived_from": [source["id"]]})
        digest = await create(c, {"content": "# Monthly digest\n\nMeeting changes this month.",
                                  "derived_from": [summary["id"]]})
        r = await c.call_tool("get_knowledge", {"id": summary["id"]})
        assert r.structured_content["entry"]["derived_from"] == [source["id"]], r.structured_content
        r = await c.call_tool("delete_knowledge", {"id": source["id"]})
        assert r.is_error is not True, text_of(r)
        assert sorted(r.structured_content["derived_deleted"]) == sorted([summary["id"], digest["id"]]), r.structured_content
        for gone in (source, summary, digest):
            r = await c.call_tool("get_knowledge", {"id": gone["id"]})
            assert r.is_error is True, text_of(r)


def test_rest_and_cli_read_as_of(world):
    home, srv = world

    def quka(id_: int, name: str, args: dict) -> dict:
        # QukaAI's endpoint as its curl examples call it: no initialize, no session.
        r = requests.post(srv.url("/api/v1/mcp"), timeout=30, headers={"User-Agent": "curl/8.0"},
                          json={"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": args}})
        assert r.status_code == 200, r.text
        return r.json()["result"]

    old = quka(1, "create_knowledge", {"content": "# Office wifi\n\nThe office wifi password is heron-42.", "key": "wifi"})
    assert old["isError"] is False, old
    old = old["structuredContent"]
    time.sleep(0.05)
    between = now_ms()
    time.sleep(0.05)
    new = quka(2, "create_knowledge", {"content": "# Office wifi\n\nThe office wifi password is osprey-77.", "key": "wifi"})
    new = new["structuredContent"]
    assert new["superseded"] == old["id"], new
    got = quka(3, "get_knowledge", {"id": old["id"]})["structuredContent"]
    assert got["entry"]["provenance"]["client"] == "curl/8.0", got["entry"]

    def files(path: str, body: dict) -> list[str]:
        # The wifi entries' snippets (other tests' entries share the word "password").
        r = requests.post(srv.url(path), json=body, timeout=30)
        assert r.status_code == 200, r.text
        return [h["snippet"] for h in r.json()["results"] if "wifi" in h["snippet"]]

    for path in ("/search", "/query"):
        assert any("osprey" in s for s in files(path, {"query": "office wifi password"})), path
        hits = files(path, {"query": "office wifi password", "as_of": between})
        assert hits and all("heron" in s for s in hits), (path, hits)
        r = requests.post(srv.url(path), json={"query": "wifi", "as_of": "tomorrow"}, timeout=30)
        assert r.status_code == 400 and "as_of" in r.json()["detail"], r.text
    r = requests.post(srv.url("/api/v1/knowledge-search"), timeout=30,
                      json={"question": "office wifi password", "min_score": 0, "search_mode": "keyword", "as_of": between})
    assert r.status_code == 200, r.text
    assert {x["knowledge_id"] for x in r.json()["results"] if "wifi" in x["content"]} == {old["id"]}, r.text
    # Dify's retrieval takes it too (Quarry's field beside Dify's body).
    dify = {"knowledge_id": "knowledge", "query": "office wifi password",
            "retrieval_setting": {"top_k": 10, "score_threshold": 0}}
    for at, word in ((None, "osprey"), (between, "heron")):
        r = requests.post(srv.url("/retrieval"), json={**dify, "as_of": at}, timeout=30)
        assert r.status_code == 200, r.text
        texts = [rec["content"] for rec in r.json()["records"] if "wifi" in rec["content"]]
        assert texts and all(word in t for t in texts), (at, texts)
    r = requests.post(srv.url("/retrieval"), json={**dify, "as_of": "tomorrow"}, timeout=30)
    assert r.status_code == 400 and "as_of" in r.json()["error_msg"], r.text

    cli = home.run("search", "office wifi password", "--json")
    assert cli.returncode == 0, cli.stderr
    assert any("osprey" in h["snippet"] for h in json.loads(cli.stdout)), cli.stdout
    cli = home.run("search", "office wifi password", "--json", "--as-of", str(between))
    assert cli.returncode == 0, cli.stderr
    snippets = [h["snippet"] for h in json.loads(cli.stdout) if "wifi" in h["snippet"]]
    assert snippets and all("heron" in s for s in snippets), cli.stdout
    cli = home.run("search", "wifi", "--as-of", "someday")
    assert cli.returncode != 0 and "--as-of" in cli.stderr, cli.stderr
