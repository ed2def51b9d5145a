"""Hostile files cannot take Quarry down (issue 21, item 1). Each file is generated here: a PDF
whose catalog nests an array 200,000 levels deep (or a dictionary 100,000 deep), HTML nested
200,000 ``<div>``s deep, a PDF whose page inflates to 1 GB, CSVs with 500,000 columns or one
60 MB quoted field. Through the real binary — ``quarry kb upload``, ``quarry collection add`` /
``update`` and the HTTP server — the process survives, each such document ends ``failed`` (or
``ready`` with a warning) with its reason, the other files are indexed, and a restart does not
die. A job whose worker keeps being killed mid-conversion ends ``failed`` instead of being
retried forever."""

from __future__ import annotations

import json
import signal
import time
import zlib
from pathlib import Path

import pytest
import requests

from conftest import QuarryHome, db_rows, isolated_env, start_server

GOOD_MD = "# Numbat notes\n\nThe numbat eats termites in the woodlands of Western Australia.\n"


def pdf_with(catalog_extra: bytes = b"", content: bytes | None = None, compressed: bytes | None = None) -> bytes:
    """A one-page PDF with a correct cross-reference table; `catalog_extra` goes into the
    catalog dictionary, the page shows `content` (or a Flate stream `compressed`)."""
    if compressed is not None:
        stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(compressed) + compressed + b"\nendstream"
    else:
        body = content if content is not None else b"BT /F1 12 Tf 72 712 Td (Hello from a hostile file) Tj ET"
        stream = b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R " + catalog_extra + b" >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        stream,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def deep_array_pdf(depth: int = 200_000) -> bytes:
    return pdf_with(b"/Deep " + b"[" * depth + b"]" * depth)


def deep_dict_pdf(depth: int = 100_000) -> bytes:
    return pdf_with(b"/Deep " + b"<< /A " * depth + b">> " * depth)


def inflating_pdf(inflated: int = 1 << 30) -> bytes:
    """About 1 MB on disk; its page's content stream inflates to `inflated` bytes."""
    z = zlib.compressobj(9)
    block = b" " * (1 << 20)
    parts = [z.compress(block) for _ in range(inflated >> 20)]
    parts.append(z.flush())
    return pdf_with(compressed=b"".join(parts))


def deep_html(depth: int = 200_000) -> bytes:
    return b"<html><body>" + b"<div>" * depth + b"deep" + b"</div>" * depth + b"</body></html>"


def slow_html(depth: int = 900, repeat: int = 300) -> bytes:
    """Under the nesting limit, so it is converted, but slowly: the parser walks the open
    elements for every new one (seconds to minutes)."""
    tower = b"<div>" * depth + b"x" + b"</div>" * depth
    return b"<html><body>" + tower * repeat + b"</body></html>"


@pytest.fixture
def home(quarry_bin: Path, tmp_path: Path) -> QuarryHome:
    h = tmp_path / "home"
    h.mkdir()
    env = isolated_env(h, {"QUARRY_JOB_LEASE_SECS": "3", "QUARRY_OCR": "off"})
    return QuarryHome(bin=quarry_bin, home=h, env=env, corpus=tmp_path)


def docs_by_name(home: QuarryHome, kb: str) -> dict[str, dict]:
    r = home.run("--json", "kb", "docs", kb)
    assert r.returncode == 0, r.stderr
    return {d["file_name"]: d for d in json.loads(r.stdout)["documents"]}


def assert_alive(r, what: str) -> None:
    """The CLI ended on its own (0 or 1), not by a signal or an abort (134)."""
    assert r.returncode in (0, 1), f"{what}: exit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
    assert "stack overflow" not in r.stderr and "fatal runtime error" not in r.stderr, r.stderr[-2000:]


def test_cli_upload_of_deeply_nested_pdfs_fails_them_and_keeps_the_rest(home, tmp_path):
    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "deep-array.pdf").write_bytes(deep_array_pdf())
    (folder / "deep-dict.pdf").write_bytes(deep_dict_pdf())
    # HTML nested 200,000 deep fails at once (issue 41 item 19), not after the 300 s limit.
    (folder / "deep.html").write_bytes(deep_html())
    (folder / "numbat.md").write_text(GOOD_MD)
    (folder / "fine.pdf").write_bytes(pdf_with())

    assert home.run("kb", "create", "hostile").returncode == 0
    r = home.run("--json", "kb", "upload", "hostile", str(folder), timeout=300)
    assert_alive(r, "kb upload")
    docs = docs_by_name(home, "hostile")
    for name in ("deep-array.pdf", "deep-dict.pdf", "deep.html"):
        assert docs[name]["status"] == "failed", docs[name]
        assert "nests too deeply" in docs[name]["error"], docs[name]
    assert docs["numbat.md"]["status"] == "ready", docs["numbat.md"]
    assert docs["fine.pdf"]["status"] == "ready", docs["fine.pdf"]
    r = home.run("--json", "search", "numbat", "-c", "hostile")
    assert r.returncode == 0 and json.loads(r.stdout), r.stdout
    # Nothing is left claimed or queued to kill the next process.
    assert db_rows(home.env, home.home, "SELECT COUNT(*) FROM jobs WHERE kind = 'ingest' AND status != 'failed'") == [(0,)]


def test_folder_collection_skips_the_hostile_pdf_with_a_reason_and_indexes_the_rest(home, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "deep-array.pdf").write_bytes(deep_array_pdf())
    (folder / "numbat.md").write_text(GOOD_MD)
    (folder / "fine.pdf").write_bytes(pdf_with())

    r = home.run("collection", "add", str(folder), "--name", "mixed", "--mask", "**/*.{md,pdf}", timeout=300)
    assert_alive(r, "collection add")
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "deep-array.pdf" in out and "nests too deeply" in out, out
    assert "with 2 documents" in r.stdout, r.stdout
    # Every later update survives too, and still says why the file is left out.
    (folder / "later.md").write_text("# Later\n\nThe quokka smiles.\n")
    r = home.run("update", timeout=300)
    assert_alive(r, "update")
    assert r.returncode == 0, r.stderr
    r = home.run("--json", "search", "quokka", "-c", "mixed")
    assert r.returncode == 0 and any(h["file"] == "mixed/later.md" for h in json.loads(r.stdout)), r.stdout
    r = home.run("--json", "search", "hostile", "-c", "mixed")
    assert r.returncode == 0 and any(h["file"] == "mixed/fine.pdf" for h in json.loads(r.stdout)), r.stdout


def test_server_survives_hostile_uploads_and_restarts(home, tmp_path):
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        r = requests.post(srv.url("/api/v1/knowledge-bases"), json={"name": "up"}, timeout=30)
        assert r.status_code == 201, r.text
        kb = r.json()["data"]["id"]
        files = [
            ("deep-array.pdf", deep_array_pdf()),
            ("deep-dict.pdf", deep_dict_pdf()),
            ("bomb.pdf", inflating_pdf()),
            ("numbat.md", GOOD_MD.encode()),
        ]
        parts = [("files", (n, b, "application/octet-stream")) for n, b in files]
        r = requests.post(srv.url(f"/api/v1/knowledge-bases/{kb}/documents"), files=parts, timeout=120)
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 240
        while True:
            r = requests.get(srv.url(f"/api/v1/knowledge-bases/{kb}/documents"), timeout=30)
            assert r.status_code == 200, (r.text, srv.stderr()[-3000:])
            docs = {d["file_name"]: d for d in r.json()["data"]}
            if all(d["status"] in ("ready", "failed") for d in docs.values()):
                break
            assert srv.proc.poll() is None, f"server died:\n{srv.stderr()[-3000:]}"
            assert time.monotonic() < deadline, docs
            time.sleep(0.3)
        assert "nests too deeply" in docs["deep-array.pdf"]["error"], docs["deep-array.pdf"]
        assert "nests too deeply" in docs["deep-dict.pdf"]["error"], docs["deep-dict.pdf"]
        assert docs["bomb.pdf"]["status"] == "failed", docs["bomb.pdf"]
        assert "too large when decompressed" in docs["bomb.pdf"]["error"], docs["bomb.pdf"]
        assert docs["numbat.md"]["status"] == "ready", docs["numbat.md"]
        assert requests.get(srv.url("/health"), timeout=10).status_code == 200
    finally:
        srv.stop()
    # A restart finds nothing to die on.
    srv = start_server(home, logdir=tmp_path / "logs2")
    try:
        time.sleep(2)
        assert srv.proc.poll() is None
        assert requests.get(srv.url("/health"), timeout=10).status_code == 200
    finally:
        srv.stop()


def test_a_file_whose_worker_keeps_dying_ends_failed(home, tmp_path):
    """The server is SIGKILLed while it converts a slow file, three times: the fourth start
    gives up on it with a reason instead of converting it again (and again)."""
    assert home.run("kb", "create", "slow").returncode == 0
    slow = tmp_path / "slow.html"
    slow.write_bytes(slow_html())
    r = home.run("--json", "kb", "upload", "slow", str(slow), "--no-wait")
    assert r.returncode == 0, r.stderr
    def status() -> str:
        return db_rows(home.env, home.home, "SELECT status FROM kb_files")[0][0]

    def claims() -> int:
        # Grows with every claim of the file's job (its fencing token).
        rows = db_rows(home.env, home.home, "SELECT lease_token FROM jobs WHERE file_id IS NOT NULL")
        return rows[0][0] if rows else -1

    claimed = claims()
    for i in range(3):
        srv = start_server(home, logdir=tmp_path / f"logs{i}")
        deadline = time.monotonic() + 90
        # This server's own claim: the status left by the last one killed says `converting`
        # too, and killing a server before it claims would not count as an attempt.
        while not (status() == "converting" and claims() > claimed):
            assert time.monotonic() < deadline, (status(), claims(), claimed)
            time.sleep(0.1)
        claimed = claims()
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(10)
    srv = start_server(home, logdir=tmp_path / "logs-final")
    try:
        deadline = time.monotonic() + 60
        while status() not in ("failed", "ready"):
            assert time.monotonic() < deadline, status()
            time.sleep(0.2)
        doc = docs_by_name(home, "slow")["slow.html"]
        assert doc["status"] == "failed", doc
        assert "stopped unexpectedly 3 times" in doc["error"], doc
    finally:
        srv.stop()


def test_csv_memory_is_bounded_with_warnings(home, tmp_path):
    wide = tmp_path / "wide.csv"
    wide.write_text("\n".join([",".join(f"c{i}" for i in range(500_000))] + [",".join("1" * 500_000)] * 3))
    long = tmp_path / "long.csv"
    with long.open("w") as f:
        f.write('name,notes\nalpha,"')
        chunk = "lorem ipsum " * 10_000
        for _ in range(60 * 1024 * 1024 // len(chunk)):
            f.write(chunk)
        f.write('"\nbeta,short\n')
    assert home.run("kb", "create", "sheets").returncode == 0
    # A tight address-space limit for the converter: these files must fit in it.
    home = home.with_env(QUARRY_CONVERT_MEMORY_MB="600")
    for path, warning in ((wide, "only the first 1000 were kept"), (long, "fields longer than 64 KB were cut")):
        r = home.run("--json", "kb", "upload", "sheets", str(path), timeout=300)
        assert_alive(r, f"upload {path.name}")
        doc = docs_by_name(home, "sheets")[path.name]
        assert doc["status"] == "ready", doc
        assert any(warning in w for w in doc["warnings"]), doc


def test_a_converter_over_its_memory_limit_fails_the_document_with_that_reason(home, tmp_path):
    """A 60 MB CSV needs more than 64 MB of address space to convert: the child process is
    stopped by its limit and the document says so."""
    big = tmp_path / "big.csv"
    with big.open("w") as f:
        f.write("a,b,c\n")
        row = "alpha,beta,gamma\n" * 10_000
        for _ in range(60 * 1024 * 1024 // len(row)):
            f.write(row)
    assert home.run("kb", "create", "mem").returncode == 0
    r = home.with_env(QUARRY_CONVERT_MEMORY_MB="64").run("--json", "kb", "upload", "mem", str(big), timeout=300)
    assert_alive(r, "upload big.csv")
    doc = docs_by_name(home, "mem")["big.csv"]
    assert doc["status"] == "failed", doc
    assert "memory" in doc["error"], doc


def readxl_style_workbook() -> bytes:
    """A 4-sheet workbook shaped like R readxl's ``datasets.xlsx`` (iris, mtcars, chickwts,
    quakes): every sheet references a drawing part the package lacks, and the last one writes
    numbers with a leading space (``<v> 41</v>``), which calamine refuses for the whole sheet."""
    import io
    import zipfile

    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    rel_ns = 'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"'
    rt = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    sheets = {
        "iris": [["Sepal.Length", "Species"], ["5.1", "setosa"], ["4.9", "setosa"]],
        "mtcars": [["mpg", "cyl"], ["21", "6"], ["22.8", "4"]],
        "chickwts": [["weight", "feed"], ["179", "horsebean"], ["160", "horsebean"]],
        "quakes": [["lat", "long", "stations"], ["-20.42", "181.62", " 41"], ["-20.62", "181.03", " 15"]],
    }
    strings: list[str] = []

    def cell(ref: str, v: str) -> str:
        try:
            float(v)
            return f'<c r="{ref}" t="n"><v>{v}</v></c>'
        except ValueError:
            strings.append(v)
            return f'<c r="{ref}" t="s"><v>{len(strings) - 1}</v></c>'

    files: dict[str, str] = {}
    for i, (name, rows) in enumerate(sheets.items(), start=1):
        body = "".join(
            f'<row r="{r}">' + "".join(cell(f"{chr(65 + c)}{r}", v) for c, v in enumerate(row)) + "</row>"
            for r, row in enumerate(rows, start=1)
        )
        files[f"xl/worksheets/sheet{i}.xml"] = f'<?xml version="1.0" encoding="UTF-8"?><worksheet {ns}><dimension ref="A1"/><sheetData>{body}</sheetData></worksheet>'
        files[f"xl/worksheets/_rels/sheet{i}.xml.rels"] = (
            f'<?xml version="1.0" encoding="UTF-8"?><Relationships {rel_ns}>'
            f'<Relationship Id="rId1" Type="{rt}/drawing" Target="../drawings/drawing{i}.xml"/></Relationships>'
        )
    names = list(sheets)
    files["xl/workbook.xml"] = (
        f'<?xml version="1.0" encoding="UTF-8"?><workbook {ns}><sheets>'
        + "".join(f'<sheet name="{n}" sheetId="{i}" r:id="rId{i}"/>' for i, n in enumerate(names, start=1))
        + "</sheets></workbook>"
    )
    files["xl/_rels/workbook.xml.rels"] = (
        f'<?xml version="1.0" encoding="UTF-8"?><Relationships {rel_ns}>'
        + "".join(f'<Relationship Id="rId{i}" Type="{rt}/worksheet" Target="worksheets/sheet{i}.xml"/>' for i in range(1, 5))
        + f'<Relationship Id="rId9" Type="{rt}/sharedStrings" Target="sharedStrings.xml"/></Relationships>'
    )
    files["xl/sharedStrings.xml"] = (
        f'<?xml version="1.0" encoding="UTF-8"?><sst {ns.split(" ")[0]}>' + "".join(f"<si><t>{s}</t></si>" for s in strings) + "</sst>"
    )
    files["_rels/.rels"] = (
        f'<?xml version="1.0" encoding="UTF-8"?><Relationships {rel_ns}>'
        f'<Relationship Id="rId1" Type="{rt}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
    )
    files["[Content_Types].xml"] = (
        '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/></Types>'
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in ["[Content_Types].xml", "_rels/.rels", *sorted(k for k in files if k not in ("[Content_Types].xml", "_rels/.rels"))]:
            z.writestr(name, files[name])
    return buf.getvalue()


def test_every_sheet_of_a_workbook_is_kept_or_warned_about(home, tmp_path):
    """Issue 21 item 19: the fourth sheet was dropped silently (3 sheets, ready, no warning)."""
    book = tmp_path / "datasets.xlsx"
    book.write_bytes(readxl_style_workbook())
    assert home.run("kb", "create", "books").returncode == 0
    r = home.run("--json", "kb", "upload", "books", str(book), timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = docs_by_name(home, "books")["datasets.xlsx"]
    assert doc["status"] == "ready", doc
    r = home.run("get", "books/datasets.xlsx")
    assert r.returncode == 0, r.stderr
    for sheet in ("## iris", "## mtcars", "## chickwts", "## quakes"):
        assert sheet in r.stdout, (sheet, r.stdout)
    assert "| -20.42 | 181.62 | 41 |" in r.stdout, r.stdout
    assert any("sheet 'quakes' was read from its XML" in w for w in doc["warnings"]), doc


def test_empty_files_are_refused_not_called_duplicates(home, tmp_path):
    """Issue 21 item 22: an empty `.txt` was reported as a duplicate of an empty `.pdf`."""
    (tmp_path / "empty.pdf").write_bytes(b"")
    (tmp_path / "empty.txt").write_bytes(b"")
    assert home.run("kb", "create", "blank").returncode == 0
    for name in ("empty.pdf", "empty.txt"):
        r = home.run("--json", "kb", "upload", "blank", str(tmp_path / name))
        assert r.returncode == 1, (r.stdout, r.stderr)
        out = json.loads(r.stdout)
        assert out["duplicates"] == [] and out["documents"] == [], out
        assert out["rejected"] == [{"file_name": name, "kind": "empty", "reason": "empty file", "result": "rejected"}], out
        assert f"{name}: not uploaded: empty file" in r.stderr, r.stderr
