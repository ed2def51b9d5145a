"""Names are names, not paths (issue 21 items 4, 20, 21), through the real CLI and HTTP:

- `..md` (tldr's page for the `.` command) is indexed from a folder and fetchable by `get`
  and `multi_get`, and keeps its name when uploaded; `..` as a path component is still refused.
- A name is stored in Unicode NFC: `café.md` written decomposed (NFD, as macOS writes it)
  and composed is one name — in a folder, one document and a warning naming the other file;
  in a knowledge base, the same file name; `get` finds it by either spelling.
- `DELETE /contexts/<absolute path without its leading slash>` removes the context of that
  absolute path when the path read as given names nothing.
"""

from __future__ import annotations

import json
import unicodedata
import urllib.parse
from pathlib import Path

import requests

from conftest import QuarryHome, isolated_env

NFC = unicodedata.normalize("NFC", "café.md")
NFD = unicodedata.normalize("NFD", "café.md")


def home_with(quarry_bin: Path, tmp_path: Path, files: dict[str, str]) -> tuple[QuarryHome, Path]:
    folder = tmp_path / "pages"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    home_dir = tmp_path / "home"
    home_dir.mkdir()
    env = isolated_env(home_dir, {"QUARRY_OCR": "off"})
    return QuarryHome(bin=quarry_bin, home=home_dir, env=env, corpus=folder), folder


def cli_json(home: QuarryHome, *args: str):
    r = home.run(*args, "--json")
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return json.loads(r.stdout)


def test_a_file_named_dot_dot_md_is_indexed_and_fetchable(quarry_bin, tmp_path, server_factory):
    home, folder = home_with(
        quarry_bin,
        tmp_path,
        {
            "..md": "# .\n\nSource a file: run the zanzibar commands of a script in the current shell.\n",
            "ls.md": "# ls\n\nList directory contents.\n",
        },
    )
    r = home.run("collection", "add", str(folder), "--name", "tldr")
    assert r.returncode == 0, r.stderr
    assert "with 2 documents" in r.stdout, r.stdout  # main: 1 (`..md` silently skipped)
    assert "..md" not in r.stderr, r.stderr
    r = home.run("get", "tldr/..md")
    assert r.returncode == 0, r.stderr
    assert "zanzibar" in r.stdout
    # Real traversal is still refused.
    r = home.run("get", "tldr/../etc/passwd")
    assert r.returncode != 0 and "must not contain '..'" in r.stderr, (r.stdout, r.stderr)

    srv = server_factory(home=home)
    r = requests.post(srv.url("/get"), json={"file": "tldr/..md"}, timeout=30)
    assert r.status_code == 200 and "zanzibar" in r.text, r.text
    r = requests.post(srv.url("/multi_get"), json={"pattern": "tldr/..md"}, timeout=30)
    assert r.status_code == 200 and "zanzibar" in r.text, r.text
    # Uploaded under that name, it keeps it.
    r = requests.post(srv.url("/api/v1/knowledge-bases"), json={"name": "pages"}, timeout=30)
    assert r.status_code == 201, r.text
    kb = r.json()["data"]["id"]
    files = [("files", ("..md", b"# dot\n\nThe dot command.\n", "text/markdown"))]
    r = requests.post(srv.url(f"/api/v1/knowledge-bases/{kb}/documents"), files=files, timeout=30)
    assert r.status_code == 202, r.text
    assert r.json()["data"][0]["document"]["file_name"] == "..md", r.json()


def test_nfc_and_nfd_spellings_are_one_name(quarry_bin, tmp_path, server_factory):
    home, folder = home_with(quarry_bin, tmp_path, {NFC: "# Composed\n\nkaffee one\n", NFD: "# Decomposed\n\nkaffee two\n"})
    assert len(list(folder.iterdir())) == 2  # two files on disk (Linux keeps both spellings)
    r = home.run("collection", "add", str(folder), "--name", "cafe")
    assert r.returncode == 0, r.stderr
    assert "with 1 documents" in r.stdout, r.stdout  # main: 2 documents with one display name
    assert "NFC" in r.stderr and NFD in r.stderr, r.stderr  # the other spelling is reported
    # Either spelling finds it; the body is the composed file's.
    for spelling in (NFC, NFD):
        r = home.run("get", f"cafe/{spelling}")
        assert r.returncode == 0, (spelling, r.stderr)
        assert "kaffee one" in r.stdout

    srv = server_factory(home=home)
    r = requests.post(srv.url("/multi_get"), json={"pattern": "cafe/*"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.text.count("kaffee") == 1 and "kaffee one" in r.text, r.text
    r = requests.post(srv.url("/api/v1/knowledge-bases"), json={"name": "uploads"}, timeout=30)
    assert r.status_code == 201, r.text
    kb = r.json()["data"]["id"]
    names = []
    for spelling, body in ((NFC, b"# one\n\nfirst upload\n"), (NFD, b"# two\n\nsecond upload\n")):
        files = [("files", (spelling, body, "text/markdown"))]
        r = requests.post(srv.url(f"/api/v1/knowledge-bases/{kb}/documents"), files=files, timeout=30)
        assert r.status_code == 202, r.text
        names.append(r.json()["data"][0]["document"]["original_name"])
    assert names == [NFC, NFC], [n.encode() for n in names]


def test_delete_context_by_an_absolute_path_without_its_slash(quarry_bin, tmp_path, server_factory):
    home, folder = home_with(quarry_bin, tmp_path, {"a.md": "# A\n"})
    (folder / "sub").mkdir()
    (folder / "sub" / "b.md").write_text("# B\n", encoding="utf-8")
    assert home.run("collection", "add", str(folder), "--name", "notes").returncode == 0
    srv = server_factory(home=home)
    absolute = str(folder / "sub")
    r = requests.post(srv.url("/contexts/add"), json={"path": absolute, "text": "sub pages"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["path"] == "notes/sub"
    # `/contexts/` + the absolute path: its leading slash merges with the route's.
    r = requests.delete(srv.url("/contexts" + urllib.parse.quote(absolute)), timeout=30)
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "removed", "path": "notes/sub"}
    assert requests.get(srv.url("/contexts"), timeout=30).json()["contexts"] == []
    # A path that names nothing either way is still a 404 that says so.
    r = requests.delete(srv.url("/contexts/no/such/place"), timeout=30)
    assert r.status_code == 404, r.text
    assert "no/such/place" in r.json()["detail"]
