"""`search_tools` in keyword, vector and hybrid mode (issue 45 item 3), through the real binary
with the MiniLM embedding model, real upstreams (PyPI ``mcp-server-time`` and
``upstreams/notes_server.py``) and the official MCP Python SDK in its default mode.

The catalog's vectors are the store's: each tool embedded once (a hash of its text under a
model key of its own), so a restart or another node embeds nothing again, and a new upstream
adds only its own tools' vectors. The accuracy on 1,781 real tools is eval/tools/'s.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
import pytest
import requests
from conftest import db_rows, make_home, settled, start_server
from mcp import Client

HERE = Path(__file__).parent
NOTES = HERE / "upstreams" / "notes_server.py"


def venv_bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def require_model() -> str:
    model = os.environ.get("QUARRY_TEST_MINILM")
    if not model:
        if os.environ.get("CI") == "true":
            pytest.fail("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
        pytest.skip("QUARRY_TEST_MINILM is not set (scripts/setup-models provides it)")
    return model


def register(srv, body: dict) -> dict:
    r = requests.post(srv.url("/api/v1/mcp/servers"), json=body, timeout=60)
    assert r.status_code == 201, r.text
    info = settled(srv, r.json()["data"])
    assert info["status"] == "ready", info
    return info


async def search(url: str, query: str, **extra) -> tuple[bool, dict, str]:
    async with Client(url, read_timeout_seconds=300) as c:
        r = await c.call_tool("search_tools", {"query": query, **extra})
        text = " ".join(getattr(b, "text", "") for b in r.content)
        return r.is_error is not True, r.structured_content or {}, text


def find(url: str, query: str, mode: str | None = None) -> tuple[bool, dict, str]:
    extra = {"mode": mode} if mode else {}
    return anyio.run(lambda: search(url, query, **extra))


def tool_vectors(home) -> int:
    rows = db_rows(home.env, home.home, "SELECT count(*) FROM embeddings WHERE model LIKE 'hub-tools:%'")
    return rows[0][0]


def test_vector_and_hybrid_find_tools_by_meaning_and_embed_each_tool_once(quarry_bin, corpus, tmp_path):
    model = require_model()
    home = make_home(quarry_bin, corpus, tmp_path / "home",
                     env={"QUARRY_EMBED_MODEL": model, "QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        register(srv, {"name": "time", "transport_type": "stdio", "config": venv_bin("mcp-server-time")})
        url = srv.url("/api/mcp?mode=search&servers=time,knowledge")
        # No word of the query is in the time tools' names or descriptions.
        query = "what hour is it in Tokyo right now"
        for mode in ("vector", "hybrid"):
            ok, found, text = find(url, query, mode)
            assert ok, text
            assert found["mode"] == mode
            names = [t["catalog_name"] for t in found["tools"]]
            # Vector: first. Hybrid fuses in the keyword ranking, whose words ("now") match
            # other tools: among the first three.
            assert "time.get_current_time" in names[: 1 if mode == "vector" else 3], (mode, names)
        ok, found, _ = find(url, query, "keyword")
        assert ok and found["mode"] == "keyword"
        assert "time.get_current_time" not in [t["catalog_name"] for t in found["tools"][:1]], found
        # Each tool once in the store's cache: a restart embeds nothing again.
        stored = tool_vectors(home)
        assert stored >= 2, stored
        srv.stop()
        srv = start_server(home, logdir=tmp_path / "logs2")
        url = srv.url("/api/mcp?mode=search&servers=time,knowledge")
        ok, found, _ = find(url, query, "vector")
        assert ok and found["tools"][0]["catalog_name"] == "time.get_current_time"
        assert tool_vectors(home) == stored
        # A new upstream adds its own tools' vectors only.
        info = register(srv, {"name": "notes", "transport_type": "stdio", "config": f"{sys.executable} {NOTES}"})
        ok, found, _ = find(srv.url("/api/mcp?mode=search&servers=time,notes,knowledge"),
                            "wipe out all of my memos", "vector")
        assert ok and found["tools"][0]["catalog_name"] == "notes.erase", found["tools"]
        assert tool_vectors(home) == stored + info["tool_count"]
        # Without a mode the first search answers at once (keyword) while the catalog is
        # embedded in the background; then hybrid is the default.
        deadline = time.monotonic() + 120
        while True:
            ok, found, _ = find(srv.url("/api/mcp?mode=search&servers=time,notes,knowledge"), query)
            assert ok
            if found["mode"] == "hybrid" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert found["mode"] == "hybrid", found
        assert "time.get_current_time" in [t["catalog_name"] for t in found["tools"][:3]], found
    finally:
        srv.stop()


def test_modes_that_cannot_run_say_why(quarry_bin, corpus, tmp_path):
    home = make_home(quarry_bin, corpus, tmp_path / "home",
                     env={"QUARRY_EMBED_MODEL": "none", "QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off"})
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        url = srv.url("/api/mcp?mode=search&servers=knowledge")
        ok, found, _ = find(url, "search my notes")
        assert ok and found["mode"] == "keyword" and found["tools"], found
        ok, _, text = find(url, "search my notes", "vector")
        assert not ok and text.startswith("mode vector:"), text
        ok, _, text = find(url, "search my notes", "semantic")
        assert not ok and "mode: expected keyword, vector or hybrid" in text, text
    finally:
        srv.stop()
