"""The QMD REST API (seed 001, endpoints 1-19) and HTTP hygiene, through the real server on a
loopback port with a plain HTTP client: bodies, the `{"detail", "status_code"}` error shape and
codes, Host/Origin checks, body limits, metrics, concurrent writes and graceful shutdown."""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import CHINESE, JOURNAL_1, JOURNAL_2, LARGE, MEETING, PASSWD_MARKER, PLAN, db_rows, display, free_port, start_server

TLDR_PAGES = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "tldr" / "pages"


def request(base: str, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None,
            timeout: float = 60):
    """One HTTP request; returns (status, parsed JSON or text, headers)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    text = resp.read().decode("utf-8", errors="replace")
    conn.close()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return resp.status, parsed, dict(resp.getheaders())


def post(base, path, body=None, **kw):
    return request(base, "POST", path, body, **kw)


def get(base, path, **kw):
    return request(base, "GET", path, **kw)


def assert_error(status, body, code, *fragments):
    assert status == code, (status, body)
    assert isinstance(body, dict) and set(body) == {"detail", "status_code", "error_code"}, body
    assert body["status_code"] == code
    # A stable machine code from docs/errors.md (auth refusals have their own).
    assert isinstance(body["error_code"], str) and body["error_code"].isupper(), body
    for f in fragments:
        assert f in body["detail"], (f, body["detail"])


# --- 1-3 search, vsearch, query -----------------------------------------------------------


def test_search_results_and_summary(shared_server):
    status, body, _ = post(shared_server.base, "/search", {"query": "zanzibar ingestion", "limit": 5})
    assert status == 200, body
    assert body["results"], body
    top = body["results"][0]
    assert set(top) == {"docid", "file", "title", "score", "context", "snippet"}
    assert top["file"] == display(PLAN)
    assert top["title"] == "Alpha Launch Plan"
    assert re.fullmatch(r"#[0-9a-f]{6,}", top["docid"])
    assert 0 < top["score"] <= 1 and round(top["score"], 2) == top["score"]
    assert all(re.match(r"^\d+: ", line) for line in top["snippet"].split("\n"))
    n = len(body["results"])
    head = f'Found {n} result{"" if n == 1 else "s"} for "zanzibar ingestion":\n\n'
    assert body["content"].startswith(head), body["content"]
    pct = round(top["score"] * 100)
    assert f'{top["docid"]} {pct}% {top["file"]} - {top["title"]}' in body["content"]


def test_search_filters_and_context(shared_server):
    base = shared_server.base
    _, body, _ = post(base, "/search", {"query": "journal", "collection": "notes", "limit": 10})
    journals = [r for r in body["results"] if r["file"].startswith("notes/journals/")]
    assert journals and all(r["context"] == "daily journal" for r in journals)
    _, body, _ = post(base, "/search", {"query": "journal", "min_score": 0.99})
    assert all(r["score"] >= 0.99 for r in body["results"])
    _, body, _ = post(base, "/search", {"query": "深度学习"})
    assert body["results"][0]["file"] == display(CHINESE)
    status, body, _ = post(base, "/search", {"query": "qqqzzzxxx"})
    assert status == 200 and body == {"results": [], "content": 'No results found for "qqqzzzxxx"'}


@pytest.mark.parametrize(
    "payload, code, fragment",
    [
        ({"query": ""}, 400, "query must not be empty"),
        ({"query": "x", "limit": 0}, 400, "limit"),
        ({"query": "x", "limit": "ten"}, 400, "limit"),
        ({"query": "x", "min_score": 3}, 400, "min score"),
        ({"query": "x", "collection": "nope"}, 404, "collection 'nope' not found"),
        ({"limit": 3}, 400, "query"),
        ({"query": "x", "limt": 3}, 400, "unknown field `limt`"),
        ({"query": "x", "limit": 5.5}, 400, "limit"),
        ({"query": "x", "limit": -1}, 400, "limit"),
        ({"query": "x", "limit": True}, 400, "limit"),
        ({"query": "x", "minScore": 0.5, "min_score": 0.5}, 400, "min_score"),
    ],
)
def test_search_bad_input(shared_server, payload, code, fragment):
    status, body, _ = post(shared_server.base, "/search", payload)
    assert_error(status, body, code, fragment)


def test_camel_case_spellings_and_whole_floats(shared_server):
    """MCP clients reuse their argument names (camelCase) and JavaScript numbers (5.0)."""
    base = shared_server.base
    _, snake, _ = post(base, "/search", {"query": "journal", "min_score": 0.001, "limit": 1})
    status, camel, _ = post(base, "/search", {"query": "journal", "minScore": 0.001, "limit": 1.0})
    assert status == 200, camel
    assert camel == snake and len(camel["results"]) == 1
    status, camel, _ = post(base, "/search", {"query": "journal", "minScore": 0.99})
    assert (status, camel["results"]) == (200, [])  # minScore is applied, not ignored
    _, snake, _ = post(base, "/get", {"file": display(JOURNAL_1), "from_line": 3, "max_lines": 2, "line_numbers": True})
    status, camel, _ = post(base, "/get", {"file": display(JOURNAL_1), "fromLine": 3.0, "maxLines": 2, "lineNumbers": True})
    assert status == 200, camel
    assert camel == snake
    assert camel["document"]["text"].endswith("3: Morning: reviewed the alpha launch plan.\n4: Afternoon: paired on the kumquat importer.")
    pattern = f"{display(LARGE)},{display(PLAN)}"
    _, snake, _ = post(base, "/multi_get", {"pattern": pattern, "max_bytes": 100000, "max_lines": 1, "line_numbers": True})
    status, camel, _ = post(base, "/multi_get", {"pattern": pattern, "maxBytes": 1e5, "maxLines": 1, "lineNumbers": True})
    assert status == 200, camel
    assert camel == snake and [r["name"] for r in camel["results"]] == [display(LARGE), display(PLAN)]


@pytest.mark.parametrize(
    "path, payload, fragments",
    [
        ("/get", {"file": "x", "fromLine": 2, "from_line": 2}, ["duplicate field", "from_line"]),
        # The message names the field as the client spelled it.
        ("/get", {"file": "x", "maxLines": 1.5}, ["maxLines", "whole number", "1.5"]),
        ("/get", {"file": "x", "from_line": -3}, ["from_line", "negative"]),
        ("/get", {"file": "x", "from_line": "3"}, ["from_line", "string"]),
        ("/get", {"file": "x", "lineNumbers": "yes"}, ["lineNumbers", "boolean"]),
        ("/get", {"file": "x", "lines": 3}, ["unknown field `lines`"]),
        ("/multi_get", {"pattern": "x", "maxBytes": -1}, ["maxBytes", "negative"]),
        ("/multi_get", {"pattern": "x", "max_bytes": 10.25}, ["max_bytes", "10.25"]),
        ("/multi_get", {"pattern": "x", "max_lines": 2, "maxLines": 2}, ["duplicate field", "max_lines"]),
        ("/multi_get", {"pattern": "x", "maxbytes": 10}, ["unknown field `maxbytes`"]),
        ("/query", {"query": "x", "limit": 1e30}, ["limit"]),
    ],
)
def test_bad_spellings_and_numbers(shared_server, path, payload, fragments):
    status, body, _ = post(shared_server.base, path, payload)
    assert_error(status, body, 400, *fragments)


@pytest.mark.parametrize(
    "path,fragment",
    [
        ("/api/v1/approvals?limit=-1", "limit"),
        ("/api/v1/approvals?limit=ten", "limit"),
        ("/api/v1/conversations?limit=-5", "limit"),
        ("/api/v1/knowledge-bases/nope/documents?status=%FF", "unknown status"),
        ("/api/v1/approvals?limit=1&limit=2", "limit"),
    ],
)
def test_bad_query_parameters_answer_in_the_error_shape(shared_server, path, fragment):
    """A query string that does not parse answers 400 in docs/errors.md's JSON shape, naming
    the parameter, not axum's plain text (issue 65 item 8)."""
    status, body, headers = get(shared_server.base, path)
    assert headers.get("content-type", "").startswith("application/json"), headers
    assert_error(status, body, 400, fragment)


def test_malformed_json_and_wrong_content_type(shared_server):
    status, body, _ = post(shared_server.base, "/search", raw=b'{"query": ')
    assert_error(status, body, 400, "JSON")
    status, body, _ = post(shared_server.base, "/search", raw=b'{"query":"x"}', headers={"Content-Type": "text/plain"})
    assert_error(status, body, 415)


def test_nul_characters_are_refused_clearly_on_every_backend(server):
    """Issue 41 item 8: a NUL in a string parameter got 500 "invalid byte sequence … 0x00" on
    PostgreSQL (11 routes). Every backend answers 400 with one message, and stores nothing."""
    base = server.base
    for path, body in (("/api/v1/knowledge-bases", {"name": "a\u0000b"}),
                       ("/search", {"query": "sudo\u0000"}),
                       ("/query", {"query": "x", "collections": ["c\u0000"]}),
                       ("/api/v1/endpoints", {"name": "ops", "description": "\u0000", "mode": "search"}),
                       ("/api/v1/tokens", {"user": "nobody\u0000", "label": "x"})):
        status, answer, _ = post(base, path, body)
        assert_error(status, answer, 400, "NUL")
    for path in ("/api/v1/knowledge-bases/a%00b", "/collections/x%00", "/search?q=%00"):
        status, answer, _ = get(base, path)
        assert_error(status, answer, 400, "NUL")
    # An escaped backslash followed by the text u0000 is no NUL.
    status, answer, _ = post(base, "/search", raw=b'{"query": "\\\\u0000 sudo"}')
    assert status == 200, answer
    status, answer, _ = get(base, "/api/v1/knowledge-bases")
    assert status == 200 and answer["total"] == 0, answer


def test_vsearch_without_vectors_is_503(shared_server):
    status, body, _ = post(shared_server.base, "/vsearch", {"query": "meaning"})
    assert_error(status, body, 503)
    assert body["detail"] == "Vector index not found. Run 'quarry embed' first to create embeddings."


def test_query_degrades_to_keyword(shared_server):
    status, body, _ = post(shared_server.base, "/query", {"query": "kumquat migration"})
    assert status == 200, body
    assert body["stages"] == ["keyword"]
    assert body["results"][0]["file"] == display(MEETING)


# --- 4-6 get, multi_get, status -------------------------------------------------------------


def test_get_document(shared_server):
    status, body, _ = post(shared_server.base, "/get", {"file": display(MEETING), "line_numbers": True})
    assert status == 200, body
    doc = body["document"]
    assert body["content"] is None
    assert doc["uri"] == "qmd://notes/projects/meeting%20notes.md"
    assert doc["name"] == display(MEETING)
    assert doc["title"] == "Weekly Sync Meeting"
    assert doc["mimeType"] == "text/markdown"
    assert doc["text"].startswith("1: # Weekly Sync Meeting\n2: ")
    status, body, _ = post(shared_server.base, "/get", {"file": display(JOURNAL_1) + ":3", "max_lines": 1})
    assert body["document"]["text"] == "<!-- Context: daily journal -->\n\nMorning: reviewed the alpha launch plan."


def test_get_not_found_suggests(shared_server):
    status, body, _ = post(shared_server.base, "/get", {"file": "notes/projects/alpha/plam.md"})
    assert_error(status, body, 404, "Document not found: notes/projects/alpha/plam.md", "Did you mean one of these?")
    suggestions = [l for l in body["detail"].split("\n") if l.startswith("  - ")]
    assert len(suggestions) == 3 and suggestions[0] == f"  - {display(PLAN)}"


# A path with `..` is refused as invalid (400); an absolute path outside every collection is
# not a document (404), as docs/errors.md says of each.
@pytest.mark.parametrize("file,expected", [("../../etc/passwd", 400), ("/etc/passwd", 404),
                                           ("notes/../../etc/passwd", 400),
                                           ("qmd://..%2F..%2Fetc%2Fpasswd", 400)])
def test_get_traversal_is_refused(shared_server, file, expected):
    status, body, _ = post(shared_server.base, "/get", {"file": file})
    assert status == expected, body
    assert PASSWD_MARKER not in json.dumps(body)


def test_multi_get(shared_server):
    base = shared_server.base
    status, body, _ = post(base, "/multi_get", {"pattern": "notes/journals/2025-05*.md"})
    assert status == 200, body
    assert [r["name"] for r in body["results"]] == [display(JOURNAL_1), display(JOURNAL_2)]
    assert body["content"] is None
    _, body, _ = post(base, "/multi_get", {"pattern": f"{display(LARGE)}, {display(PLAN)}, notes/missing.md"})
    skipped = body["results"][0]
    assert skipped["type"] == "text"
    assert re.fullmatch(
        rf"\[SKIPPED: {re.escape(display(LARGE))} - File too large \(\d+KB\)\. Use 'quarry get' with file=\"{re.escape(display(LARGE))}\" to retrieve\.\]",
        skipped["text"],
    ), skipped
    assert body["results"][1]["name"] == display(PLAN)
    assert body["errors"] == ["File not found: notes/missing.md"]
    _, body, _ = post(base, "/multi_get", {"pattern": display(PLAN), "max_lines": 2})
    assert body["results"][0]["text"].endswith("\n\n[... truncated 8 more lines]")
    status, body, _ = post(base, "/multi_get", {"pattern": "notes/nothing-*.md"})
    assert_error(status, body, 404, "No files matched pattern")
    status, body, _ = post(base, "/multi_get", {"pattern": "../*"})
    assert_error(status, body, 400, "..")


def test_multi_get_glob_relative_to_the_collection(shared_server):
    """Seed 001's own example pattern names a folder inside a collection."""
    base = shared_server.base
    status, body, _ = post(base, "/multi_get", {"pattern": "journals/2025-05*.md"})
    assert status == 200, body
    assert [r["name"] for r in body["results"]] == [display(JOURNAL_1), display(JOURNAL_2)]
    _, full, _ = post(base, "/multi_get", {"pattern": "notes/journals/2025-05*.md"})
    assert full == body
    assert_error(*post(base, "/multi_get", {"pattern": "journals/2030-*.md"})[:2], 404, "No files matched pattern")
    assert_error(*post(base, "/multi_get", {"pattern": "/journals/*.md"})[:2], 400, "collection/relative/path")


def test_status(shared_server):
    status, body, _ = get(shared_server.base, "/status")
    assert status == 200
    assert body["total_documents"] == 8 and body["needs_embedding"] == 8
    assert body["has_vector_index"] is False
    (c,) = body["collections"]
    assert c["name"] == "notes" and c["pattern"] == "**/*.md" and c["documents"] == 8
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", c["last_updated"])
    assert body["content"].startswith("Quarry Index Status:\n  Total documents: 8\n  Needs embedding: 8\n  Vector index: no\n  Collections: 1\n")


def test_embed_limits(shared_server):
    base = shared_server.base
    assert_error(*post(base, "/embed", {"texts": []})[:2], 400, "Empty texts list")
    status, body, _ = post(base, "/embed", {"texts": ["x"] * 1001})
    assert_error(status, body, 413)
    assert body["detail"] == "Too many texts (1001 > 1000)"
    status, body, _ = post(base, "/embed", {"texts": ["hello"]})
    assert_error(status, body, 503)
    assert body["detail"] == "Model not loaded"


def test_health(shared_server):
    status, body, _ = get(shared_server.base, "/health")
    assert (status, body) == (200, {"status": "healthy", "model_loaded": False})


# --- 9-18 collections, index, update, contexts (writes) ------------------------------------


def test_collection_lifecycle(server, tmp_path):
    base = server.base
    folder = tmp_path / "extra"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Apricot\n\napricot orchard\n")
    (folder / "sub" / "b.md").write_text("# Banana\n\nbanana boat\n")

    status, body, _ = post(base, "/collections/add", {"name": "extra", "path": str(folder)})
    assert status == 200, body
    assert body == {
        "status": "added",
        "name": "extra",
        "path": str(folder.resolve()),
        "documents": 2,
        "content": "Added collection 'extra' with 2 documents",
    }
    assert_error(*post(base, "/collections/add", {"name": "extra", "path": str(folder)})[:2], 409, "already exists")
    assert_error(*post(base, "/collections/add", {"name": "x", "path": str(tmp_path / "missing")})[:2], 400, "missing")
    assert_error(*post(base, "/collections/add", {"name": "bad/name", "path": str(folder)})[:2], 400, "invalid collection name")

    _, body, _ = get(base, "/collections")
    assert [c["name"] for c in body["collections"]] == ["extra", "notes"]
    assert body["content"] == "Collections: 2\n- extra (2 docs)\n- notes (8 docs)"
    _, body, _ = get(base, "/collections/extra")
    assert body["documents"] == 2 and body["pattern"] == "**/*.md"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["last_indexed"])
    assert_error(*get(base, "/collections/nope")[:2], 404, "collection 'nope' not found")

    status, body, _ = request(base, "PUT", "/collections/extra", {"new_name": "fruit"})
    assert body == {"status": "renamed", "old_name": "extra", "new_name": "fruit", "content": "Renamed 'extra' to 'fruit'"}
    _, body, _ = post(base, "/search", {"query": "apricot"})
    assert body["results"][0]["file"] == "fruit/a.md"
    assert_error(*request(base, "PUT", "/collections/fruit", {"new_name": "notes"})[:2], 409)
    assert_error(*request(base, "PUT", "/collections/fruit", {})[:2], 400, "new_name")

    (folder / "c.md").write_text("# Cherry\n\ncherry pie\n")
    status, body, _ = post(base, "/index")
    assert status == 200 and body["status"] == "indexed" and body["collections"] == 2
    assert body["content"] == "Indexed 2 collections: 11 documents"
    status, body, _ = post(base, "/update", raw=b"")
    assert (status, body["status"], body["content"]) == (200, "updated", "Updated 2 collections")
    status, body, _ = post(base, "/update", {"pull": False})
    assert status == 200
    assert_error(*post(base, "/update", {"pull": "yes"})[:2], 400)

    status, body, _ = request(base, "DELETE", "/collections/fruit")
    assert body == {"status": "removed", "name": "fruit", "content": "Removed collection 'fruit'"}
    _, body, _ = post(base, "/search", {"query": "apricot cherry"})
    assert body["results"] == []
    assert_error(*request(base, "DELETE", "/collections/fruit")[:2], 404)


def test_empty_folder_needs_allow_empty(server, tmp_path):
    base = server.base
    empty = tmp_path / "inbox"
    empty.mkdir()
    status, body, _ = post(base, "/collections/add", {"name": "inbox", "path": str(empty)})
    assert_error(status, body, 400, "no files match")
    assert_error(*get(base, "/collections/inbox")[:2], 404)
    assert_error(*post(base, "/collections/add", {"name": "inbox", "path": str(empty), "allow_empty": "yes"})[:2], 400, "allow_empty")
    status, body, _ = post(base, "/collections/add", {"name": "inbox", "path": str(empty), "allow_empty": True})
    assert status == 200, body
    assert body["documents"] == 0 and body["content"] == "Added collection 'inbox' with 0 documents"
    (empty / "first.md").write_text("# First\n\nfirst note\n")
    post(base, "/update")
    _, body, _ = get(base, "/collections/inbox")
    assert body["documents"] == 1
    # The camelCase spelling too.
    other = tmp_path / "other"
    other.mkdir()
    status, body, _ = post(base, "/collections/add", {"name": "other", "path": str(other), "allowEmpty": True})
    assert status == 200, body


def rename_in_db(server, old: str, new: str) -> None:
    """Renames a collection behind the engine's back, like an index made before a name was
    reserved (names here are plain words)."""
    rows = db_rows(server.env, server.home, f"UPDATE collections SET name = '{new}' WHERE name = '{old}' RETURNING id")
    assert len(rows) == 1, rows


def test_reserved_collection_name(server, tmp_path):
    base = server.base
    folder = tmp_path / "stuff"
    folder.mkdir()
    (folder / "a.md").write_text("# Apricot\n\napricot orchard\n")
    status, body, _ = post(base, "/collections/add", {"name": "add", "path": str(folder)})
    assert_error(status, body, 400, 'invalid collection name "add"', "reserved")
    _, body, _ = get(base, "/collections")
    assert [c["name"] for c in body["collections"]] == ["notes"]
    post(base, "/collections/add", {"name": "stuff", "path": str(folder)})
    assert_error(*request(base, "PUT", "/collections/stuff", {"new_name": "add"})[:2], 400, "reserved")
    # One made before the rule stays reachable at its own URL.
    rename_in_db(server, "stuff", "add")
    status, body, _ = get(base, "/collections/add")
    assert status == 200 and body["name"] == "add" and body["documents"] == 1, body
    status, body, _ = request(base, "PUT", "/collections/add", {"newName": "fruit"})
    assert body["status"] == "renamed" and body["old_name"] == "add", body
    rename_in_db(server, "fruit", "add")
    status, body, _ = request(base, "DELETE", "/collections/add")
    assert body == {"status": "removed", "name": "add", "content": "Removed collection 'add'"}
    assert_error(*get(base, "/collections/add")[:2], 404, "collection 'add' not found")


def test_contexts(server):
    base = server.base
    status, body, _ = post(base, "/contexts/add", {"path": "notes/projects", "text": "project docs"})
    assert body == {"status": "added", "path": "notes/projects", "content": "Added context for notes/projects"}
    _, body, _ = get(base, "/contexts")
    assert body == {"contexts": [
        {"path": "notes/journals", "text": "daily journal"},
        {"path": "notes/projects", "text": "project docs"},
    ]}
    _, body, _ = post(base, "/search", {"query": "kumquat migration"})
    assert body["results"][0]["context"] == "project docs"
    status, body, _ = request(base, "DELETE", "/contexts/notes/projects")
    assert body == {"status": "removed", "path": "notes/projects"}
    assert_error(*request(base, "DELETE", "/contexts/notes/projects")[:2], 404, "no context")
    assert_error(*post(base, "/contexts/add", {"path": "elsewhere/x", "text": "t"})[:2], 404, "not inside any collection")
    assert_error(*post(base, "/contexts/add", {"path": "notes", "text": "  "})[:2], 400, "must not be empty")


def test_contexts_with_absolute_paths(server, corpus, tmp_path):
    """`/` (the global context) and folders on disk are absolute: their leading slash must
    survive the URL, percent-encoded or doubled, and the engine must read them as folders on
    disk even when their first segment (`tmp`, `home`) is also a collection's name."""
    base = server.base
    folder = str((corpus / "projects").resolve())
    first = folder.strip("/").split("/")[0]
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    status, body, _ = post(base, "/collections/add", {"name": first, "path": str(decoy), "allow_empty": True})
    assert status == 200, body
    quoted = urllib.parse.quote(folder, safe="")
    assert quoted.startswith("%2F")
    for delete_path in (f"/contexts/{quoted}", f"/contexts/{folder}", f"/contexts/{folder}/"):
        status, body, _ = post(base, "/contexts/add", {"path": folder, "text": "project docs"})
        assert (status, body["path"]) == (200, "notes/projects"), body
        status, body, _ = request(base, "DELETE", delete_path)
        assert (status, body) == (200, {"status": "removed", "path": "notes/projects"}), (delete_path, body)
    for delete_path in ("/contexts/%2F", "/contexts//"):
        status, body, _ = post(base, "/contexts/add", {"path": "/", "text": "everything"})
        assert (status, body["path"]) == (200, "/"), body
        status, body, _ = request(base, "DELETE", delete_path)
        assert (status, body) == (200, {"status": "removed", "path": "/"}), (delete_path, body)
    _, body, _ = get(base, "/contexts")
    assert body == {"contexts": [{"path": "notes/journals", "text": "daily journal"}]}
    # Nothing to delete, or a folder outside every collection: 404 naming it.
    assert_error(*request(base, "DELETE", "/contexts/%2F")[:2], 404, "no context for '/'")
    assert_error(*request(base, "DELETE", f"/contexts/{quoted}")[:2], 404, "no context for 'notes/projects'")
    assert_error(*request(base, "DELETE", "/contexts/%2Fnonexistent%2Fdir")[:2], 404, "/nonexistent/dir")
    # A context outlives its folder: removing it by the absolute path still works.
    gone = corpus.parent / f"{corpus.name}-gone-{tmp_path.name}"
    gone_folder = gone / "sub"
    gone_folder.mkdir(parents=True)
    (gone_folder / "g.md").write_text("# Gone\n\ngone\n")
    assert post(base, "/collections/add", {"name": "gone", "path": str(gone)})[0] == 200
    status, body, _ = post(base, "/contexts/add", {"path": str(gone_folder.resolve()), "text": "soon gone"})
    assert (status, body["path"]) == (200, "gone/sub"), body
    (gone_folder / "g.md").unlink()
    gone_folder.rmdir()
    assert_error(*post(base, "/contexts/add", {"path": str(gone_folder), "text": "t"})[:2], 404, "not inside any collection")
    status, body, _ = request(base, "DELETE", "/contexts/" + urllib.parse.quote(str(gone_folder.resolve()), safe=""))
    assert (status, body) == (200, {"status": "removed", "path": "gone/sub"}), body


def test_concurrent_writes_are_serialised(server, tmp_path):
    base = server.base
    folders = []
    for i in range(6):
        f = tmp_path / f"c{i}"
        f.mkdir()
        (f / "doc.md").write_text(f"# Doc {i}\n\nword{i} shared\n")
        folders.append(f)

    def work(i):
        s1, b1, _ = post(base, "/collections/add", {"name": f"c{i}", "path": str(folders[i])})
        s2, b2, _ = post(base, "/update")
        s3, b3, _ = post(base, "/contexts/add", {"path": f"c{i}", "text": f"ctx {i}"})
        return (s1, s2, s3), (b1, b2, b3)

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(work, range(6)))
    for statuses, bodies in results:
        assert statuses == (200, 200, 200), bodies
    _, body, _ = get(base, "/status")
    assert body["total_documents"] == 8 + 6
    _, body, _ = post(base, "/search", {"query": "shared", "limit": 50})
    files = [r["file"] for r in body["results"]]
    assert sorted(files) == sorted(f"c{i}/doc.md" for i in range(6))
    _, body, _ = get(base, "/contexts")
    assert len(body["contexts"]) == 1 + 6


# --- HTTP hygiene ------------------------------------------------------------------------------


def test_unknown_route_and_method(shared_server):
    assert_error(*get(shared_server.base, "/nope")[:2], 404, "Not found: GET /nope")
    assert_error(*request(shared_server.base, "DELETE", "/search")[:2], 405, "DELETE")


def test_dns_rebinding_host_is_refused(shared_server):
    status, body, _ = get(shared_server.base, "/status", headers={"Host": "attacker.example:18765"})
    assert_error(status, body, 403, "attacker.example")
    status, body, _ = post(shared_server.base, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                           headers={"Host": "attacker.example", "Accept": "application/json, text/event-stream"})
    assert status == 403
    status, _, _ = get(shared_server.base, "/status", headers={"Host": f"localhost:{shared_server.port}"})
    assert status == 200


def test_foreign_origin_is_refused(shared_server):
    status, body, _ = post(shared_server.base, "/search", {"query": "x"}, headers={"Origin": "https://evil.example"})
    assert_error(status, body, 403, "evil.example")
    status, _, _ = post(shared_server.base, "/search", {"query": "x"}, headers={"Origin": f"http://localhost:{shared_server.port}"})
    assert status == 200


def test_allowed_origin_flag(server_factory):
    srv = server_factory("--allowed-origin", "https://app.example")
    status, _, _ = post(srv.base, "/search", {"query": "x"}, headers={"Origin": "https://app.example"})
    assert status == 200
    status, _, _ = post(srv.base, "/search", {"query": "x"}, headers={"Origin": "https://other.example"})
    assert status == 403


def test_oversized_body_is_413(server_factory):
    srv = server_factory("--max-body-bytes", "2000")
    status, body, _ = post(srv.base, "/search", {"query": "x" * 5000})
    assert_error(status, body, 413)
    status, _, _ = post(srv.base, "/search", {"query": "alpha"})
    assert status == 200


def test_metrics(shared_server):
    post(shared_server.base, "/search", {"query": "alpha"})
    get(shared_server.base, "/nope")
    status, text, headers = get(shared_server.base, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert re.search(r'quarry_http_requests_total\{method="POST",route="/search",status="200"\} \d+', text), text[:2000]
    assert 'route="unmatched"' in text
    assert "quarry_http_request_duration_seconds_bucket" in text


def test_non_loopback_bind_without_tokens_needs_explicit_consent(quarry_home):
    # A non-loopback bind turns token auth on (test_teams.py); turning it off there is refused.
    r = quarry_home.run("serve", "--bind", "0.0.0.0", "--port", "0", "--auth", "none")
    assert r.returncode == 1
    assert "refusing to bind 0.0.0.0 with --auth none" in r.stderr and r.stdout == ""


# --- graceful shutdown ----------------------------------------------------------------------


@pytest.mark.skipif(not TLDR_PAGES.is_dir(), reason="needs ../shared/corpora/tldr")
def test_shutdown_finishes_in_flight_work_and_refuses_new(server_factory):
    srv = server_factory()
    result = {}

    def long_write():
        # Minutes on a loaded machine: the answer, not its speed, is under test.
        result["resp"] = post(srv.base, "/collections/add", {"name": "tldr", "path": str(TLDR_PAGES)}, timeout=600)

    t = threading.Thread(target=long_write)
    t.start()
    time.sleep(0.15)  # the add (several thousand files) is now in flight
    srv.proc.send_signal(signal.SIGTERM)
    t.join(timeout=600)
    status, body, _ = result["resp"]
    assert status == 200, body
    assert body["status"] == "added" and body["documents"] > 7000
    assert srv.proc.wait(timeout=20) == 0
    with pytest.raises(OSError):
        get(srv.base, "/health")


def test_transport_both_keeps_http_when_stdin_carries_no_client(quarry_home, tmp_path):
    """Issue 41 item 22: `serve --transport both` under nohup or systemd (stdin /dev/null) exited
    as soon as stdin ended and took HTTP down. Stdin that never carried an MCP session leaves
    HTTP serving; a real stdio session ending still ends the process (an agent started it)."""
    srv = start_server(quarry_home, "--transport", "both", logdir=tmp_path / "logs")
    try:
        time.sleep(3)
        assert srv.proc.poll() is None, srv.stderr()[-3000:]
        status, body, _ = get(srv.base, "/health")
        assert status == 200, body
        assert "serving HTTP only" in srv.stderr(), srv.stderr()[-3000:]
    finally:
        srv.stop()
    # With a client on stdin: its session ending ends the server.
    port = free_port()
    proc = subprocess.Popen([str(quarry_home.bin), "serve", "--transport", "both", "--port", str(port)],
                            env=quarry_home.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        assert proc.stdin and proc.stdout
        proc.stdin.write((json.dumps(init) + "\n").encode())
        proc.stdin.flush()
        assert b'"result"' in proc.stdout.readline()
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_note_with_a_nul_character_is_refused_and_nothing_is_stored(server):
    """Issue 41 item 21: create_knowledge with a NUL in its content answered isError but stored
    a `failed` note on every call. Refused before anything is stored, with a clear message."""
    import anyio
    from mcp import Client

    async def run():
        async with Client(server.mcp_url, read_timeout_seconds=60) as c:
            for _ in range(2):
                r = await c.call_tool("create_knowledge", {"content": "before\x00after", "title": "nul"})
                assert r.is_error is True
                text = "".join(x.text for x in r.content if x.type == "text")
                assert "NUL" in text, text

    anyio.run(run)
    status, body, _ = get(server.base, "/api/v1/knowledge-bases")
    assert status == 200, body
    for kb in body["data"]:
        status, docs, _ = get(server.base, f"/api/v1/knowledge-bases/{kb['id']}/documents")
        assert status == 200 and docs["total"] == 0, docs


def test_a_nul_in_an_uploaded_file_name_is_explained(server):
    """Issue 41 item 21: a NUL in a multipart filename got "failed to read headers"."""
    status, kb, _ = post(server.base, "/api/v1/knowledge-bases", {"name": "nul-upload"})
    assert status == 201, kb
    boundary = "qboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a\x00b.md\"\r\n"
            f"Content-Type: text/markdown\r\n\r\n# hi\r\n--{boundary}--\r\n").encode()
    status, answer, _ = post(server.base, f"/api/v1/knowledge-bases/{kb['data']['id']}/documents", raw=body,
                             headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert_error(status, answer, 400, "file name must not contain control characters")
    status, docs, _ = get(server.base, f"/api/v1/knowledge-bases/{kb['data']['id']}/documents")
    assert status == 200 and docs["total"] == 0, docs


def test_serve_on_a_taken_port_says_so_at_once(quarry_home):
    """Issue 65 item 16: the port is bound before anything slow starts (the model's load), and
    a taken one is named with what to do — not a bare "Address already in use (os error 98)"."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        t0 = time.monotonic()
        r = quarry_home.run("serve", "--port", str(port), timeout=60)
        took = time.monotonic() - t0
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "--port" in r.stderr, r.stderr
    assert "already in use" in r.stderr, r.stderr
    assert "models loaded" not in r.stderr, r.stderr
    print(f"refused in {took:.2f} s")
