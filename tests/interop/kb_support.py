"""Knowledge-base helpers shared by the interop tests that drive the REST API of a running
``quarry serve`` (``test_knowledge.py``, ``test_passages.py``, ``test_embed_queue.py``,
``test_upload_staging.py``): create a knowledge base, upload files, list documents and wait
until they settle. Each helper asserts the status it expects, so a failing call shows the
server's answer; servers come from conftest's ``start_server``.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import requests

DOCS = Path(os.environ["QUARRY_TEST_DOCS"]) if os.environ.get("QUARRY_TEST_DOCS") else None
TERMINAL = {"ready", "failed"}


def need_docs() -> Path:
    """The real documents (``../shared/corpora/documents``, fetched by scripts/test), or skip."""
    if DOCS is None or not DOCS.is_dir():
        pytest.skip("skipped: QUARRY_TEST_DOCS not set (scripts/test fetches the real documents)")
    return DOCS


def api(srv, method: str, path: str, timeout: float = 60, **kw) -> requests.Response:
    return requests.request(method, srv.url(path), timeout=timeout, **kw)


def create_kb(srv, name: str, **extra) -> dict:
    r = api(srv, "POST", "/api/v1/knowledge-bases", json={"name": name, **extra})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["success"] is True, body
    return body["data"]


def upload_response(srv, kb_id: str, files: list[tuple[str, bytes]]) -> requests.Response:
    """The raw answer to a multipart upload (for tests of refusals)."""
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return api(srv, "POST", f"/api/v1/knowledge-bases/{kb_id}/documents", timeout=120, files=parts)


def upload(srv, kb_id: str, files: list[tuple[str, bytes]]) -> list[dict]:
    """Uploads files that must all be accepted; returns their documents, in order."""
    r = upload_response(srv, kb_id, files)
    assert r.status_code == 202, r.text
    return [o["document"] for o in r.json()["data"]]


def documents(srv, kb_id: str) -> dict[str, dict]:
    r = api(srv, "GET", f"/api/v1/knowledge-bases/{kb_id}/documents")
    assert r.status_code == 200, r.text
    return {d["id"]: d for d in r.json()["data"]}


def wait_for(srv, kb_id: str, ids: list[str], statuses: set[str] = TERMINAL, timeout: float = 240) -> dict[str, dict]:
    """Polls the documents until each has one of `statuses`; returns them by id."""
    deadline = time.monotonic() + timeout
    last: dict[str, dict] = {}
    while True:
        last = documents(srv, kb_id)
        if all(last.get(i, {}).get("status") in statuses for i in ids):
            return last
        if time.monotonic() > deadline:
            pending = {last.get(i, {}).get("file_name", i): last.get(i, {}).get("status") for i in ids
                       if last.get(i, {}).get("status") not in statuses}
            pytest.fail(f"not {sorted(statuses)} within {timeout} s: {pending}\nserver stderr:\n{srv.stderr()[-3000:]}")
        time.sleep(0.2)
