"""Folder sources that sync on change (issue 43) through the real server: a folder source
attached with ``watch`` while ``quarry serve`` runs is picked up, synced in full once, then
each change is synced on its own through the OS's file notifications — editors' saves
(written to a temporary file then renamed over the original; the original renamed to a
backup first), creations, renames, deletions, a folder moved in, files the mask or
``.gitignore`` leave out — and reaches search within seconds, with document ids kept across
edits and renames and a report per change. Also: the CLI's ``--watch``/``--no-watch``, the
REST field, and kinds that cannot be watched.

Every wait polls with a deadline; nothing is asserted after a fixed sleep.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import requests

from conftest import QuarryHome, isolated_env, start_server

DEADLINE = 60.0  # seconds for one change to reach search (a debug build on a busy machine)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


class World:
    def __init__(self, home: QuarryHome, srv, root: Path):
        self.home, self.srv, self.root = home, srv, root

    def call(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, self.srv.url(path), timeout=120, **kw)

    def data(self, r: requests.Response, status: int = 200):
        assert r.status_code == status, (r.status_code, r.text)
        return r.json()["data"]

    def cli(self, *args: str) -> dict:
        r = self.home.run("--json", *args, timeout=120)
        assert r.returncode == 0, f"quarry {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return json.loads(r.stdout)

    def found(self, word: str, kb: str) -> list[str]:
        r = self.call("POST", "/search", json={"query": word, "collection": kb, "limit": 10})
        assert r.status_code == 200, r.text
        return sorted(h["file"] for h in r.json()["results"])

    def docs(self, kb: str) -> dict[str, dict]:
        return {d["file_name"]: d for d in self.data(self.call("GET", f"/api/v1/knowledge-bases/{kb}/documents"))}

    def reports(self, source_id: str) -> list[dict]:
        return self.data(self.call("GET", f"/api/v1/sources/{source_id}/reports", params={"limit": 100}))

    def until(self, what: str, check, timeout: float = DEADLINE):
        """Polls `check()` until it returns something truthy; fails with the server's log."""
        deadline = time.monotonic() + timeout
        while True:
            got = check()
            if got:
                return got
            assert time.monotonic() < deadline, f"{what}: not within {timeout} s\n{self.srv.stderr()[-4000:]}"
            time.sleep(0.1)

    def searchable(self, word: str, kb: str, files: list[str]) -> None:
        self.until(f"{word!r} found in {files}", lambda: self.found(word, kb) == files)

    def report_after(self, source_id: str, seen: set[str], what: str) -> dict:
        """The next finished report not in `seen` (added to it)."""

        def new():
            for r in reversed(self.reports(source_id)):  # oldest first
                if r["id"] not in seen and r["finished_at"]:
                    return r
            return None

        r = self.until(what, new)
        seen.add(r["id"])
        assert r["status"] == "succeeded", r
        return r


def counts(report: dict) -> dict[str, int]:
    return {k: v for k, v in report["counts"].items() if v}


@pytest.fixture(scope="module")
def world(quarry_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("watch")
    home_dir = root / "home"
    home_dir.mkdir()
    home = QuarryHome(bin=quarry_bin, home=home_dir, env=isolated_env(home_dir, {"QUARRY_OCR": "off"}), corpus=root)
    # Without --auth: a request without a token is the machine's owner (folder sources).
    srv = start_server(home, logdir=root / "logs")
    yield World(home, srv, root)
    srv.stop()


def test_a_watched_folder_syncs_each_change_on_its_own(world):
    w = world
    kb = "watched"
    w.data(w.call("POST", "/api/v1/knowledge-bases", json={"name": kb}), 201)
    folder = w.root / "notes"
    write(folder, {
        "intro.md": "# Intro\nThe heron waits.\n",
        "team/roles.md": "# Roles\nThe kestrel leads.\n",
        "logo.png": "not a document",
        ".gitignore": "drafts/\n",
        "drafts/secret.md": "# Draft\nThe cassowary plan.\n",
    })
    # Attached while the server runs: picked up, and synced in full once (no sync asked for).
    s = w.data(w.call("POST", f"/api/v1/knowledge-bases/{kb}/sources",
                      json={"kind": "folder", "path": str(folder), "watch": True}), 201)
    assert s["watch"] is True and s["interval_seconds"] is None and s["next_sync_at"] is None, s
    sid = s["id"]
    seen: set[str] = set()
    first = w.report_after(sid, seen, "the reconciliation at start")
    assert counts(first) == {"added": 2, "skipped": 1}, first
    w.searchable("heron", kb, [f"{kb}/intro.md"])
    w.searchable("kestrel", kb, [f"{kb}/team/roles.md"])
    assert w.found("cassowary", kb) == [], ".gitignore leaves drafts/ out"
    ids = {n: d["id"] for n, d in w.docs(kb).items()}
    assert sorted(ids) == ["intro.md", "team/roles.md"], ids

    # VS Code / gedit / Emacs: a temporary file beside it, renamed over the original.
    tmp = folder / ".intro.md.tmp-1234"
    tmp.write_text("# Intro\nThe egret waits.\n", encoding="utf-8")
    os.replace(tmp, folder / "intro.md")
    w.searchable("egret", kb, [f"{kb}/intro.md"])
    assert w.found("heron", kb) == [], "the old text is gone"
    r = w.report_after(sid, seen, "the save's report")
    assert counts(r) == {"changed": 1}, r
    assert [d["path"] for d in r["details"]] == ["intro.md"], r
    assert w.docs(kb)["intro.md"]["id"] == ids["intro.md"], "an edit keeps the id"

    # vim (backupcopy=no): the original renamed to a backup, a new file written, the backup
    # deleted.
    os.replace(folder / "intro.md", folder / "intro.md~")
    (folder / "intro.md").write_text("# Intro\nThe ibis waits.\n", encoding="utf-8")
    (folder / "intro.md~").unlink()
    w.searchable("ibis", kb, [f"{kb}/intro.md"])
    r = w.report_after(sid, seen, "vim's save")
    assert counts(r) == {"changed": 1}, r
    assert w.docs(kb)["intro.md"]["id"] == ids["intro.md"], "an edit keeps the id"

    # A new file; a file the mask lets through but .gitignore does not.
    write(folder, {"drafts/more.md": "# More\nThe dodo idea.\n", "faq.md": "# FAQ\nAsk the axolotl.\n"})
    w.searchable("axolotl", kb, [f"{kb}/faq.md"])
    r = w.report_after(sid, seen, "the new file's report")
    assert counts(r) == {"added": 1}, r
    assert w.found("dodo", kb) == [], "ignored by .gitignore"

    # A rename: the same document under its new name.
    os.rename(folder / "team" / "roles.md", folder / "team" / "people.md")
    w.searchable("kestrel", kb, [f"{kb}/team/people.md"])
    r = w.report_after(sid, seen, "the rename's report")
    assert counts(r) == {"renamed": 1}, r
    assert r["details"] == [{"path": "team/people.md", "action": "renamed", "detail": "from team/roles.md"}], r
    docs = w.docs(kb)
    assert docs["team/people.md"]["id"] == ids["team/roles.md"], "a rename keeps the id"
    assert "team/roles.md" not in docs

    # A folder moved in from elsewhere (its files were never seen one by one), then deleted.
    outside = w.root / "outside"
    write(outside, {"a.md": "# A\nThe gannet.\n", "deep/b.md": "# B\nThe puffin.\n"})
    os.rename(outside, folder / "moved")
    w.searchable("puffin", kb, [f"{kb}/moved/deep/b.md"])
    w.searchable("gannet", kb, [f"{kb}/moved/a.md"])
    shutil.rmtree(folder / "moved")
    w.searchable("puffin", kb, [])
    w.until("the moved folder's documents deleted", lambda: "moved/a.md" not in w.docs(kb))

    # A deletion.
    (folder / "faq.md").unlink()
    w.searchable("axolotl", kb, [])
    w.until("faq.md deleted", lambda: "faq.md" not in w.docs(kb))

    # Every report of the watcher succeeded and named only what changed.
    reports = w.reports(sid)
    assert all(r["status"] == "succeeded" for r in reports), reports
    actions = [(d["action"], d["path"]) for r in reports[:-1] for d in r["details"]]
    assert not [a for a in actions if a[1].startswith("drafts/") or a[1].endswith(("~", "tmp-1234"))], actions
    assert ("deleted", "faq.md") in actions and ("deleted", "moved/a.md") in actions, actions

    # Watching off, then on again: picked up again (in full first), changes follow.
    off = w.data(w.call("PATCH", f"/api/v1/sources/{sid}", json={"watch": False}))
    assert off["watch"] is False, off
    on = w.data(w.call("PATCH", f"/api/v1/sources/{sid}", json={"watch": True}))
    assert on["watch"] is True, on
    write(folder, {"later.md": "# Later\nThe condor.\n"})
    w.searchable("condor", kb, [f"{kb}/later.md"])
    final = {n: d["id"] for n, d in w.docs(kb).items()}
    assert final["intro.md"] == ids["intro.md"] and final["team/people.md"] == ids["team/roles.md"], final


def test_a_burst_of_files_arrives_in_a_few_syncs(world):
    w = world
    kb = "burst"
    w.data(w.call("POST", "/api/v1/knowledge-bases", json={"name": kb}), 201)
    folder = w.root / "burst"
    folder.mkdir()
    s = w.data(w.call("POST", f"/api/v1/knowledge-bases/{kb}/sources",
                      json={"kind": "folder", "path": str(folder), "watch": True, "mask": "**/*.md"}), 201)
    seen: set[str] = set()
    start = w.report_after(s["id"], seen, "the watch started (an empty folder synced in full)")
    assert counts(start) == {}, start
    for i in range(200):
        (folder / f"page-{i:03}.md").write_text(f"# Page {i}\nword{i:03}x and the common albatross.\n", encoding="utf-8")
    w.until("all 200 documents", lambda: len(w.docs(kb)) == 200)
    w.searchable("word199x", kb, [f"{kb}/page-199.md"])
    new = [r for r in w.reports(s["id"]) if r["id"] not in seen]
    assert sum(r["counts"]["added"] for r in new) == 200, new
    assert len(new) <= 20, f"{len(new)} syncs for one burst"


def test_cli_and_rest_watch_only_folders(world):
    w = world
    w.cli("kb", "create", "clikb")
    folder = w.root / "cli-folder"
    write(folder, {"one.md": "# One\nThe marmot.\n"})
    s = w.cli("source", "add", "clikb", "--folder", str(folder), "--watch")
    assert s["watch"] is True, s
    w.searchable("marmot", "clikb", ["clikb/one.md"])
    listed = w.home.run("source", "list", "clikb")
    assert "on change" in listed.stdout, listed.stdout
    off = w.cli("source", "set", s["id"], "--no-watch")
    assert off["watch"] is False, off
    on = w.cli("source", "set", s["id"], "--watch", "--every", "1h")
    assert on["watch"] is True and on["interval_seconds"] == 3600, on
    listed = w.home.run("source", "list", "clikb")
    assert "on change and every 3600s" in listed.stdout, listed.stdout
    # --watch goes with --folder only.
    r = w.home.run("source", "add", "clikb", "--git", "https://example.com/r.git", "--watch")
    assert r.returncode != 0 and "folder" in r.stderr, r.stderr
    # Over REST, a kind that has no notifications is refused, on attaching and on changing.
    r = w.call("POST", "/api/v1/knowledge-bases/clikb/sources",
               json={"kind": "s3", "url": "s3://bucket/prefix", "endpoint": "http://127.0.0.1:9", "watch": True})
    assert r.status_code == 400 and "folder" in r.json()["detail"], r.text
    r = w.call("PATCH", f"/api/v1/sources/{s['id']}", json={"watch": "yes"})
    assert r.status_code == 400 and "watch" in r.json()["detail"], r.text
