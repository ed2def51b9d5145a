"""Knowledge bases through the real server with a real multipart client (`requests`): create,
upload real documents written by people (``QUARRY_TEST_DOCS``, fetched by the test command
from the package registries) and generated ones, watch the ingestion queue take them to
``ready`` or ``failed`` with a reason, search them, read their Markdown, chunks (with pages)
and originals (ETag, Range), delete them (gone at once, blobs collected after), every error
code of ``/api/v1``, and a server SIGKILLed in the middle of a 200-document batch."""

from __future__ import annotations

import hashlib
import signal
import time
from pathlib import Path

import pytest
import requests

from conftest import QuarryHome, blob_names, db_rows, isolated_env, start_server
from kb_support import DOCS, TERMINAL, api, create_kb, need_docs, wait_for
from kb_support import upload_response as upload




def zip_bomb_docx(inflated: int) -> bytes:
    """A DOCX-shaped zip whose document.xml inflates to `inflated` bytes of zeros (about
    1/1000 of that on the wire)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            block = b"\0" * (1 << 20)
            for _ in range(inflated >> 20):
                f.write(block)
    return buf.getvalue()


@pytest.fixture
def kb_home(quarry_bin: Path, tmp_path: Path) -> QuarryHome:
    home = tmp_path / "kb-home"
    home.mkdir()
    # Short leases so a killed server's jobs are retaken quickly in the restart test.
    env = isolated_env(home, {"QUARRY_JOB_LEASE_SECS": "3", "QUARRY_OCR": "off"})
    return QuarryHome(bin=quarry_bin, home=home, env=env, corpus=tmp_path)


@pytest.fixture
def kb_server(kb_home: QuarryHome, tmp_path: Path):
    srv = start_server(kb_home, logdir=tmp_path / "logs")
    yield srv
    srv.stop()


def assert_error(r: requests.Response, code: int, *fragments: str) -> None:
    assert r.status_code == code, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"detail", "status_code", "error_code"} and body["status_code"] == code, body
    assert isinstance(body["error_code"], str) and body["error_code"].isupper(), body
    for f in fragments:
        assert f in body["detail"], (f, body["detail"])


def search(srv, query: str, collection: str) -> list[dict]:
    r = api(srv, "POST", "/search", json={"query": query, "collection": collection, "limit": 10})
    assert r.status_code == 200, r.text
    return r.json()["results"]


# ---------------------------------------------------------------------------------------------


def test_knowledge_base_crud_and_errors(kb_server):
    kb = create_kb(kb_server, "handbook", description="Team handbook", chunk_size=1000, chunk_overlap=200)
    assert kb["name"] == "handbook" and kb["chunk_size"] == 1000 and kb["document_count"] == 0
    assert len(kb["id"]) == 36

    listed = api(kb_server, "GET", "/api/v1/knowledge-bases").json()
    assert listed["total"] == 1 and listed["data"][0]["id"] == kb["id"]

    # By id or by name.
    for key in (kb["id"], "handbook"):
        r = api(kb_server, "GET", f"/api/v1/knowledge-bases/{key}")
        assert r.status_code == 200 and r.json()["data"]["documents"] == []

    assert_error(api(kb_server, "POST", "/api/v1/knowledge-bases", json={"name": "handbook"}), 409, "already exists")
    assert_error(api(kb_server, "POST", "/api/v1/knowledge-bases", json={"name": "bad/name"}), 400, "invalid")
    assert_error(api(kb_server, "POST", "/api/v1/knowledge-bases", json={"name": "x", "colour": 1}), 400, "colour")
    assert_error(
        api(kb_server, "POST", "/api/v1/knowledge-bases", json={"name": "x", "chunk_size": 50}), 400, "chunk_size"
    )
    assert_error(
        api(kb_server, "POST", "/api/v1/knowledge-bases", json={"name": "x", "chunk_size": 1000, "chunk_overlap": 600}),
        400,
        "chunk_overlap",
    )
    assert_error(
        api(kb_server, "POST", "/api/v1/knowledge-bases", data="{nope", headers={"Content-Type": "application/json"}),
        400,
    )
    assert_error(api(kb_server, "POST", "/api/v1/knowledge-bases", data="name=x"), 415, "application/json")
    assert_error(api(kb_server, "GET", "/api/v1/knowledge-bases/nope"), 404, "not found")
    assert_error(api(kb_server, "PATCH", f"/api/v1/knowledge-bases/{kb['id']}", json={}), 400, "nothing to update")

    r = api(kb_server, "PATCH", f"/api/v1/knowledge-bases/{kb['id']}", json={"name": "manual", "description": "new"})
    assert r.status_code == 200 and r.json()["data"]["name"] == "manual", r.text
    assert api(kb_server, "GET", "/api/v1/knowledge-bases/manual").status_code == 200

    # Without an embedding model the queue reports jobs only: nothing waits for vectors.
    q = api(kb_server, "GET", "/api/v1/queue").json()["data"]
    assert q == {"enqueued": 0, "processing": 0, "failed": 0, "embedding": None}, q

    spec = api(kb_server, "GET", "/api/v1/openapi.json").json()
    assert spec["openapi"].startswith("3.") and "/api/v1/knowledge-bases/{id}/documents" in spec["paths"]

    r = api(kb_server, "DELETE", f"/api/v1/knowledge-bases/{kb['id']}")
    assert r.status_code == 200 and r.json()["data"]["deleted"] is True
    assert_error(api(kb_server, "GET", f"/api/v1/knowledge-bases/{kb['id']}"), 404)
    assert_error(api(kb_server, "DELETE", f"/api/v1/knowledge-bases/{kb['id']}"), 404)


def test_upload_errors(kb_home, tmp_path):
    srv = start_server(kb_home.with_env(QUARRY_MAX_UPLOAD_MB="1"), logdir=tmp_path / "logs")
    try:
        kb = create_kb(srv, "errs")
        path = f"/api/v1/knowledge-bases/{kb['id']}/documents"
        # Not multipart.
        assert_error(api(srv, "POST", path, json={"files": []}), 415, "multipart")
        # Multipart without a file part.
        assert_error(api(srv, "POST", path, files={"note": (None, "just a field")}), 422, "no file")
        # Only unsupported types: nothing stored.
        assert_error(upload(srv, kb["id"], [("tool.exe", b"MZ\x90\x00")]), 415, "unsupported file type '.exe'")
        # Only oversized files (limit 1 MB here): nothing stored.
        assert_error(upload(srv, kb["id"], [("big.txt", b"a" * (1024 * 1024 + 1))]), 413, "exceeds 1 MB")
        # Mixed: the good one is accepted, the others reported.
        r = upload(srv, kb["id"], [("ok.md", b"# Fine\n\nhello"), ("x.exe", b"MZ"), ("big.csv", b"a," * 600_000)])
        assert r.status_code == 202, r.text
        results = sorted(o["result"] for o in r.json()["data"])
        assert results == ["added", "rejected", "rejected"]
        docs = api(srv, "GET", path).json()
        assert docs["total"] == 1 and docs["data"][0]["file_name"] == "ok.md"
        # Unknown knowledge base / document.
        assert_error(upload(srv, "nope", [("a.md", b"# a")]), 404, "not found")
        assert_error(api(srv, "GET", f"{path}/nope"), 404, "not found")
        assert_error(api(srv, "GET", f"{path}?status=done"), 400, "use pending, processing")
        # `processing` is the queue's and the web UI's word: converting, indexing or embedding.
        r = api(srv, "GET", f"{path}?status=processing")
        assert r.status_code == 200, r.text
        assert {d["status"] for d in r.json()["data"]} <= {"converting", "indexing", "embedding"}, r.text
        assert_error(api(srv, "GET", "/api/v1/files/images/" + "0" * 64 + ".png"), 404)
        assert_error(api(srv, "GET", "/api/v1/files/images/../../quarry.db"), 404)
        assert_error(api(srv, "GET", "/api/v1/files/elsewhere/x"), 404)
    finally:
        srv.stop()


def test_real_documents_end_to_end(kb_server, kb_home):
    docs = need_docs()
    kb = create_kb(kb_server, "library")
    good = {
        "zh-debian-reference.zh-cn.pdf": docs / "pdf" / "zh-debian-reference.zh-cn.pdf",
        "en-census-table324-arrests.pdf": docs / "pdf" / "en-census-table324-arrests.pdf",
        "officer-example-headings-table.docx": docs / "docx" / "officer-example-headings-table.docx",
        "sample-word2007-images.docx": docs / "docx" / "sample-word2007-images.docx",
        "readxl-deaths-messy-layout.xlsx": docs / "xlsx" / "readxl-deaths-messy-layout.xlsx",
        "sample-powerpoint-stcloud.pptx": docs / "pptx" / "sample-powerpoint-stcloud.pptx",
        "acs2012-population-ne.csv": docs / "csv" / "acs2012-population-ne.csv",
        "git-gittutorial.html": docs / "html" / "git-gittutorial.html",
    }
    pdf_bytes = (docs / "pdf" / "en-census-table324-arrests.pdf").read_bytes()
    bad = {
        "encrypted-userpw-openpassword.pdf": ((docs / "pdf" / "encrypted-userpw-openpassword.pdf").read_bytes(), "encrypted PDF"),
        "broken-invalid-xref.pdf": ((docs / "pdf" / "broken-invalid-xref.pdf").read_bytes(), "PDF"),
        "scanned-huckfinn-c03-29.pdf": ((docs / "pdf" / "scanned-huckfinn-c03-29.pdf").read_bytes(), "no text layer on page 1"),
        "encrypted-password-open-sesame.xlsx": ((docs / "xlsx" / "encrypted-password-open-sesame.xlsx").read_bytes(), "encrypted XLSX"),
        "renamed-pdf.docx": ((docs / "pdf" / "es-campaign-donors-table.pdf").read_bytes(), "not a DOCX file"),
        "truncated.pdf": (pdf_bytes[: len(pdf_bytes) // 3], "PDF"),
        # Past the 512 MB decompression limit.
        "bomb.docx": (zip_bomb_docx(600 << 20), "zip bomb"),
    }
    # An empty file is refused at upload (every empty file has the same content address).
    assert_error(upload(kb_server, kb["id"], [("empty.md", b"")]), 422, "empty.md: empty file")
    files = [(n, p.read_bytes()) for n, p in good.items()] + [(n, b) for n, (b, _) in bad.items()]
    r = upload(kb_server, kb["id"], files)
    assert r.status_code == 202, r.text
    outcomes = r.json()["data"]
    assert [o["result"] for o in outcomes] == ["added"] * len(files)
    # Returned at once, queued.
    assert all(o["document"]["status"] in {"pending", "converting", "indexing", "embedding", "ready"} for o in outcomes)
    by_name = {o["document"]["file_name"]: o["document"] for o in outcomes}
    final = wait_for(kb_server, kb["id"], [d["id"] for d in by_name.values()])

    for name in good:
        d = final[by_name[name]["id"]]
        assert d["status"] == "ready", (name, d)
        assert d["docid"] and d["docid"].startswith("#")
    for name, (_, reason) in bad.items():
        d = final[by_name[name]["id"]]
        assert d["status"] == "failed", (name, d)
        assert reason in (d["error"] or ""), (name, d["error"])

    zh = final[by_name["zh-debian-reference.zh-cn.pdf"]["id"]]
    assert zh["pages"] == 251 and zh["format"] == "pdf"

    # Keyword search finds the Chinese PDF's text, under kb-name/file-name.
    hits = search(kb_server, "软件包管理", "library")
    assert any(h["file"] == "library/zh-debian-reference.zh-cn.pdf" for h in hits), hits
    hits = search(kb_server, "git commit", "library")
    assert hits and hits[0]["file"] == "library/git-gittutorial.html", hits

    base = f"/api/v1/knowledge-bases/{kb['id']}/documents"
    # Markdown: headings and table cells of the DOCX, code blocks of the HTML page.
    md = api(kb_server, "GET", f"{base}/officer-example-headings-table.docx/markdown").json()["data"]["markdown"]
    assert any(line.startswith("#") for line in md.splitlines()), md[:500]
    assert "|" in md
    html_md = api(kb_server, "GET", f"{base}/git-gittutorial.html/markdown").json()["data"]["markdown"]
    assert html_md.count("```") >= 20
    census = api(kb_server, "GET", f"{base}/en-census-table324-arrests.pdf/markdown").json()["data"]["markdown"]
    assert "Arrests" in census or "arrests" in census

    # Chunks carry pages and are ordered by page, then index.
    chunks = api(kb_server, "GET", f"{base}/{zh['id']}/chunks").json()["data"]
    assert len(chunks) > 100
    pages = [c["page"] for c in chunks]
    assert None not in pages and pages == sorted(pages) and pages[-1] > 200
    # … and the heading path they sit under (numbered sections nest by number).
    assert all(isinstance(c["heading"], str) for c in chunks)
    # The title's Chinese half, outside the PDF's bold run, stays in it (issue 41 item 17).
    assert any(c["heading"].endswith("1.1 控制台基础 › 1.1.1 shell 提示符") for c in chunks), [c["heading"] for c in chunks[:40]]

    # Images extracted from a DOCX are referenced from the Markdown and served.
    img_md = api(kb_server, "GET", f"{base}/sample-word2007-images.docx/markdown").json()["data"]["markdown"]
    refs = [part.split(")")[0] for part in img_md.split("](/api/v1/files/images/")[1:]]
    assert refs, img_md[:1000]
    img = api(kb_server, "GET", "/api/v1/files/images/" + refs[0])
    assert img.status_code == 200 and img.headers["Content-Type"].startswith("image/")
    assert hashlib.sha256(img.content).hexdigest() == refs[0].split(".")[0]

    # Preview: the original, with ETag and Range.
    original = good["zh-debian-reference.zh-cn.pdf"].read_bytes()
    r = api(kb_server, "GET", f"{base}/{zh['id']}/preview")
    assert r.status_code == 200 and r.content == original
    assert r.headers["Content-Type"] == "application/pdf"
    etag = r.headers["ETag"]
    assert etag == '"' + hashlib.sha256(original).hexdigest() + '"'
    r = api(kb_server, "GET", f"{base}/{zh['id']}/preview", headers={"Range": "bytes=100-199"})
    assert r.status_code == 206 and r.content == original[100:200]
    assert r.headers["Content-Range"] == f"bytes 100-199/{len(original)}"
    r = api(kb_server, "GET", f"{base}/{zh['id']}/preview", headers={"Range": f"bytes={len(original)}-"})
    assert r.status_code == 416
    r = api(kb_server, "GET", f"{base}/{zh['id']}/preview", headers={"If-None-Match": etag})
    assert r.status_code == 304

    # Markdown of a failed document: 503 with its reason.
    enc = final[by_name["encrypted-userpw-openpassword.pdf"]["id"]]
    assert_error(api(kb_server, "GET", f"{base}/{enc['id']}/markdown"), 503, "encrypted PDF")

    # Retry: a failed document is queued again (and fails again, for the same reason);
    # a ready one is refused.
    r = api(kb_server, "POST", f"{base}/{enc['id']}/retry")
    assert r.status_code == 202 and r.json()["data"]["status"] == "pending"
    again = wait_for(kb_server, kb["id"], [enc["id"]])[enc["id"]]
    assert again["status"] == "failed" and "encrypted PDF" in again["error"]
    assert_error(api(kb_server, "POST", f"{base}/{zh['id']}/retry"), 409, "not failed")

    # The same bytes again: no second document, the existing one is named. The same name with
    # other bytes: both kept, under distinct names.
    r = upload(kb_server, kb["id"], [("copy-of-census.pdf", pdf_bytes), ("acs2012-population-ne.csv", b"a,b\n1,2\n")])
    out = r.json()["data"]
    assert out[0]["result"] == "duplicate" and out[0]["document"]["file_name"] == "en-census-table324-arrests.pdf"
    assert out[1]["result"] == "added" and out[1]["document"]["file_name"] == "acs2012-population-ne (2).csv"

    # Live counts.
    kbs = api(kb_server, "GET", "/api/v1/knowledge-bases").json()["data"]
    assert kbs[0]["document_count"] == len(files) + 1

    # Deleting a document: gone at once from search, documents, markdown, chunks and preview;
    # its original is collected in the background (the census PDF's bytes are not shared).
    census_doc = final[by_name["en-census-table324-arrests.pdf"]["id"]]
    census_sha = census_doc["sha256"]
    assert census_sha in blob_names(kb_home)
    assert api(kb_server, "DELETE", f"{base}/{census_doc['id']}").status_code == 200
    for suffix in ("", "/markdown", "/chunks", "/preview"):
        assert_error(api(kb_server, "GET", f"{base}/{census_doc['id']}{suffix}"), 404)
    assert not any(h["file"].endswith("en-census-table324-arrests.pdf") for h in search(kb_server, "arrests", "library"))
    wait_until(lambda: census_sha not in blob_names(kb_home), "the deleted document's original to be collected")
    assert zh["sha256"] in blob_names(kb_home)

    # Deleting the knowledge base: gone at once; every blob collected.
    assert api(kb_server, "DELETE", f"/api/v1/knowledge-bases/{kb['id']}").status_code == 200
    r = api(kb_server, "POST", "/search", json={"query": "软件包管理"})
    assert r.status_code == 200 and r.json()["results"] == []
    assert_error(api(kb_server, "GET", f"{base}/{zh['id']}/preview"), 404)
    wait_until(lambda: not blob_names(kb_home), "every blob of the deleted knowledge base to be collected")


def wait_until(cond, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


BATCH = 200


def test_restart_after_sigkill_loses_and_duplicates_nothing(kb_home, tmp_path):
    """SIGKILL the server while it processes a 200-document batch; after a restart every
    document ends ready or failed, exactly once, no job is left, and no blob is orphaned (on
    PostgreSQL with the blobs in S3 when the tests run there). Leases here last
    10 minutes, longer than the test may wait: the restarted server must see that the killed
    process is gone and take its jobs over at once."""
    kb_home = kb_home.with_env(QUARRY_JOB_LEASE_SECS="600")
    srv = start_server(kb_home, logdir=tmp_path / "logs1")
    kb = create_kb(srv, "batch")
    files = []
    for i in range(BATCH - 6):
        if i % 3 == 0:
            files.append((f"note-{i}.md", f"# Note {i}\n\nquokka number {i} lives here.\n".encode()))
        elif i % 3 == 1:
            files.append((f"table-{i}.csv", f'name,value\n"quokka, {i}",{i}\n"multi\nline",{i * 2}\n'.encode()))
        else:
            files.append((f"page-{i}.html", f"<html><title>P{i}</title><body><h1>Page {i}</h1><pre><code>quokka {i}</code></pre></body></html>".encode()))
    # Bigger ones, so the kill lands while work is in flight, and some that fail.
    if DOCS is not None and DOCS.is_dir():
        for p in ("pdf/en-fhs-3.0.pdf", "pdf/en-irs-i1040nr-2007.pdf", "pdf/en-tracemonkey-pldi09.pdf", "pdf/encrypted-userpw-openpassword.pdf"):
            files.append((Path(p).name, (DOCS / p).read_bytes()))
    while len(files) < BATCH:
        files.append((f"bad-{len(files)}.pdf", f"%PDF-1.4 not really {len(files)}".encode()))
    assert len(files) == BATCH
    r = upload(srv, kb["id"], files)
    assert r.status_code == 202, r.text
    ids = [o["document"]["id"] for o in r.json()["data"]]
    assert len(set(ids)) == BATCH
    # Let some work start, then kill without warning.
    wait_until(
        lambda: any(d["status"] != "pending" for d in api(srv, "GET", f"/api/v1/knowledge-bases/{kb['id']}/documents").json()["data"]),
        "processing to start",
    )
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    def rows(sql):
        return db_rows(kb_home.env, kb_home.home, sql)

    unfinished = rows("SELECT COUNT(*) FROM kb_files WHERE status NOT IN ('ready', 'failed')")[0][0]
    assert unfinished > 0, "the kill came too late to test anything"

    srv2 = start_server(kb_home, logdir=tmp_path / "logs2")
    try:
        final = wait_for(srv2, kb["id"], ids, timeout=300)
        assert len(final) == BATCH
        statuses = [final[i]["status"] for i in ids]
        assert set(statuses) <= TERMINAL
        for i in ids:
            d = final[i]
            if d["status"] == "failed":
                assert d["error"], d
        names = [final[i]["file_name"] for i in ids]
        assert len(set(names)) == BATCH
        # One searchable document per ready file, none for the others, no job left.
        ready = rows("SELECT COUNT(*) FROM kb_files WHERE status = 'ready'")[0][0]
        docs = rows("SELECT COUNT(*) FROM documents")[0][0]
        jobs = rows("SELECT COUNT(*) FROM jobs WHERE kind = 'ingest' AND status != 'failed'")[0][0]
        referenced = {r[0] for r in rows("SELECT blob FROM kb_files UNION SELECT hash FROM file_images")}
        converted = sum(1 for i in ids if final[i]["docid"])
        assert docs == converted and ready <= docs
        assert jobs == 0
        # Every stored blob is referenced and every reference is stored.
        assert blob_names(kb_home) == referenced
        hits = search(srv2, "quokka", "batch")
        assert hits, "ready documents must be searchable"
    finally:
        srv2.stop()


def test_cli_upload_and_folder_collections(kb_home, tmp_path):
    docs = need_docs()
    folder = tmp_path / "mixed"
    folder.mkdir()
    for rel in ("pdf/en-naacl06-shinyama.pdf", "docx/mammoth-tables.docx", "csv/fy09-va-edu-recipients-by-state.csv"):
        (folder / Path(rel).name).write_bytes((docs / rel).read_bytes())
    (folder / "readme.md").write_text("# Mixed folder\n\nPDFs and Word files side by side.\n")
    (folder / "ignored.bin").write_bytes(b"\x00\x01")

    r = kb_home.run("kb", "create", "papers", "--description", "research papers")
    assert r.returncode == 0, r.stderr
    r = kb_home.run("--json", "kb", "upload", "papers", str(folder), timeout=300)
    assert r.returncode == 0, r.stderr
    import json

    out = json.loads(r.stdout)
    assert sorted(d["file_name"] for d in out["documents"]) == [
        "en-naacl06-shinyama.pdf",
        "fy09-va-edu-recipients-by-state.csv",
        "mammoth-tables.docx",
        "readme.md",
    ]
    assert all(d["status"] == "ready" for d in out["documents"]), out
    # Again: duplicates, nothing added.
    r = kb_home.run("--json", "kb", "upload", "papers", str(folder / "readme.md"))
    assert r.returncode == 0 and json.loads(r.stdout)["duplicates"][0]["file_name"] == "readme.md"
    # A bad file: exit code 1 and the reason on stderr.
    bad = tmp_path / "locked.pdf"
    bad.write_bytes((docs / "pdf" / "encrypted-userpw-openpassword.pdf").read_bytes())
    r = kb_home.run("kb", "upload", "papers", str(bad))
    assert r.returncode == 1 and "encrypted PDF" in r.stderr + r.stdout, (r.stdout, r.stderr)
    r = kb_home.run("kb", "upload", "papers", str(tmp_path / "nope.pdf"))
    assert r.returncode == 1 and "no such file" in r.stderr
    r = kb_home.run("--json", "kb", "docs", "papers", "--status", "failed")
    assert [d["file_name"] for d in json.loads(r.stdout)["documents"]] == ["locked.pdf"]
    r = kb_home.run("--json", "kb", "docs", "papers", "--status", "processing")
    assert r.returncode == 0 and json.loads(r.stdout)["documents"] == [], (r.stdout, r.stderr)
    r = kb_home.run("kb", "docs", "papers", "--status", "busy")
    assert r.returncode == 2 and "processing (converting, indexing or embedding)" in r.stderr, r.stderr
    r = kb_home.run("kb", "retry", "papers", "locked.pdf")
    assert r.returncode == 1 and "failed again" in r.stderr
    r = kb_home.run("--json", "search", "shinyama", "-c", "papers")
    assert r.returncode == 0 and any(h["file"] == "papers/en-naacl06-shinyama.pdf" for h in json.loads(r.stdout))
    r = kb_home.run("kb", "list")
    assert "papers (5 documents: 4 ready" in r.stdout, r.stdout

    # A QMD-style folder collection of PDFs and Word files, no upload.
    r = kb_home.run("collection", "add", str(folder), "--name", "mixed", "--mask", "**/*.{md,pdf,docx}")
    assert r.returncode == 0, r.stderr
    assert "with 3 documents" in r.stdout, r.stdout
    r = kb_home.run("--json", "search", "tables", "-c", "mixed")
    assert any(h["file"] == "mixed/mammoth-tables.docx" for h in json.loads(r.stdout)), r.stdout
    r = kb_home.run("get", "mixed/en-naacl06-shinyama.pdf", "-l", "5")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr

    assert blob_names(kb_home)
    # `--no-wait` only queues; a server started later processes what the CLI enqueued.
    extra = tmp_path / "later.md"
    extra.write_text("# Later\n\nThe numbat eats termites.\n")
    r = kb_home.run("--json", "kb", "upload", "papers", str(extra), "--no-wait")
    assert r.returncode == 0 and json.loads(r.stdout)["documents"][0]["status"] == "pending", r.stdout
    srv = start_server(kb_home, logdir=tmp_path / "logs")
    try:
        kb_id = api(srv, "GET", "/api/v1/knowledge-bases/papers").json()["data"]["id"]
        doc_id = json.loads(r.stdout)["documents"][0]["id"]
        assert wait_for(srv, kb_id, [doc_id])[doc_id]["status"] == "ready"
        assert search(srv, "numbat termites", "papers")
    finally:
        srv.stop()

    r = kb_home.run("kb", "rm", "papers")
    assert r.returncode == 0 and "6 documents" in r.stdout
    # The originals went with it, without a server.
    assert not blob_names(kb_home)
    r = kb_home.run("kb", "docs", "papers")
    assert r.returncode == 1 and "not found" in r.stderr


def test_uploads_are_chunked_with_pages_embedded_and_cleaned(kb_home, fake_models, tmp_path):
    """With an embedding model configured, uploads are chunked with the knowledge base's own
    sizes (characters), chunks keep their page, vector search cites it, and a delete takes the
    vectors with it. An embedding API that is down leaves the document keyword-searchable and
    ends it failed with the reason after the retries."""
    docs = need_docs()
    home = kb_home.with_env(**fake_models.env(), QUARRY_INGEST_RETRY_SECS="0")
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        kb = create_kb(srv, "papers", chunk_size=1000, chunk_overlap=200)
        pdf = (docs / "pdf" / "en-naacl06-shinyama.pdf").read_bytes()
        r = upload(srv, kb["id"], [("shinyama.pdf", pdf), ("notes.md", b"# Notes\n\nThe quokka is a small marsupial.\n")])
        ids = [o["document"]["id"] for o in r.json()["data"]]
        final = wait_for(srv, kb["id"], ids)
        paper = final[ids[0]]
        assert paper["status"] == "ready" and paper["chunk_count"] > 5, paper
        chunks = api(srv, "GET", f"/api/v1/knowledge-bases/{kb['id']}/documents/{paper['id']}/chunks").json()["data"]
        assert len(chunks) == paper["chunk_count"]
        assert {c["page"] for c in chunks} == set(range(1, paper["pages"] + 1)), [c["page"] for c in chunks]
        assert max(len(c["content"]) for c in chunks) < 2500
        r = api(srv, "POST", "/vsearch", json={"query": "paraphrase acquisition from comparable news articles", "collection": "papers"})
        hits = r.json()["results"]
        assert hits and hits[0]["file"] == "papers/shinyama.pdf" and hits[0]["page"] >= 1, hits
        # Delete: no vector of the document is found any more, and the vector index has
        # absorbed the removal once the cleanup ran.
        assert api(srv, "DELETE", f"/api/v1/knowledge-bases/{kb['id']}/documents/{paper['id']}").status_code == 200
        r = api(srv, "POST", "/vsearch", json={"query": "paraphrase acquisition from comparable news articles", "collection": "papers"})
        assert all(h["file"] != "papers/shinyama.pdf" for h in r.json()["results"])
        def cleaned() -> bool:
            if srv.env.get("QUARRY_DATABASE_URL"):
                # Vectors live in the database: nothing to flush, only the job to finish.
                return not db_rows(srv.env, home.home, "SELECT 1 FROM jobs")
            return db_rows(srv.env, home.home, "SELECT COUNT(*) FROM ann_tombstones")[0][0] == 0 and not db_rows(
                srv.env, home.home, "SELECT 1 FROM jobs"
            )

        wait_until(cleaned, "the cleanup job to flush the vector removals")

        # The embedding API goes away: the next upload is searchable by keyword at once, and
        # fails with the embedding error after its retries.
        fake_models.stop()
        r = upload(srv, kb["id"], [("later.md", b"# Later\n\nThe wombat digs burrows.\n")])
        doc_id = r.json()["data"][0]["document"]["id"]
        wait_until(lambda: search(srv, "wombat burrows", "papers") != [], "keyword search to find the new document")
        d = wait_for(srv, kb["id"], [doc_id], timeout=120)[doc_id]
        assert d["status"] == "failed" and "embedding failed" in d["error"] and d["attempts"] == 3, d
    finally:
        srv.stop()
