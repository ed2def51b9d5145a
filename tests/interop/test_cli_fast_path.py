"""The CLI's fast path (issue 46): `quarry search|vsearch|query` ask a running server of the same
data directory, which has its index open and its models loaded, and print what they would have
printed on their own.

How a test tells who answered without timing anything: the home's embedding model is a
symbolic link to all-MiniLM-L6-v2; once the server has loaded the model the link is removed.
From then on only the server can embed a query: a CLI that searches itself fails or falls back
to keywords, a CLI the server answers still gets the `vector` stage.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest
import requests
from conftest import QuarryHome, make_home, start_server
from test_curation import require_model

QUESTION = "when does the alpha release ship"
SOCKET = "quarry.sock"


@pytest.fixture
def world(quarry_bin: Path, corpus: Path, tmp_path: Path):
    model = require_model()
    link = tmp_path / "model"
    link.symlink_to(model)
    home = make_home(quarry_bin, corpus, tmp_path / "home", env={"QUARRY_EMBED_MODEL": str(link)})
    r = home.run("embed", timeout=300)
    assert r.returncode == 0, r.stderr
    return home, link, Path(model)


def socket_path(home: QuarryHome) -> Path:
    return home.home / "index" / SOCKET


def loaded(srv) -> None:
    deadline = time.monotonic() + 120
    while not requests.get(srv.url("/health"), timeout=10).json().get("model_loaded"):
        assert time.monotonic() < deadline, f"the model never loaded\n{srv.stderr()[-3000:]}"
        time.sleep(0.1)


def ok(home: QuarryHome, *args: str, **env: str | None):
    r = home.with_env(**env).run(*args, timeout=300) if env else home.run(*args, timeout=300)
    assert r.returncode == 0, f"quarry {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}"
    return r


def test_a_running_server_answers_with_its_loaded_model(world, tmp_path: Path):
    home, link, model = world
    # What the CLI prints on its own, for every command and output form.
    commands = [
        ("query", QUESTION, "--json"),
        ("query", QUESTION),
        ("vsearch", QUESTION, "--json"),
        ("vsearch", QUESTION, "--files"),
        ("search", "zanzibar", "--json"),
        ("query", "--search", "lex:kumquat", "--search", "vec:moving the importer later", "--json"),
    ]
    alone = {c: ok(home, *c) for c in commands}
    bad = [
        ("query", QUESTION, "--filter", '{"field": "status", "operator": "near", "value": 1}'),
        ("vsearch", QUESTION, "-n", "0"),
        ("query", "--search", "typo:nothing"),
        ("search", "x", "--as-of", "yesterday-ish"),
        ("query", QUESTION, "--collections", "nowhere"),
    ]
    bad_alone = {c: home.run(*c, timeout=300) for c in bad}
    for c, r in bad_alone.items():
        assert r.returncode != 0 and r.stderr.startswith("error: "), (c, r.stdout, r.stderr)
    assert "vector" in json.loads(alone[commands[0]].stdout)["stages"]

    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        loaded(srv)
        sock = socket_path(home)
        assert sock.is_socket(), f"no {sock} while serving"
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        link.unlink()  # only the server holds the model now

        for c in commands:
            served = ok(home, *c)
            assert served.stdout == alone[c].stdout, f"quarry {' '.join(c)} printed otherwise through the server"
            if "--json" not in c and c[0] == "query":
                assert "stages: keyword, vector" in served.stderr

        # On its own the CLI cannot embed the question any more.
        own = home.run("vsearch", QUESTION, "--json", "--no-server", timeout=300)
        assert own.returncode != 0, own.stdout
        own_query = home.run("query", QUESTION, "--json", "--no-server", timeout=300)
        assert own_query.returncode != 0 or "vector" not in json.loads(own_query.stdout)["stages"]

        # Other settings than the server's: the CLI searches itself (RRF instead of calibrated
        # fusion, or another embedding model, would answer otherwise).
        other = home.with_env(QUARRY_FUSION="rrf").run("query", QUESTION, "--json", timeout=300)
        assert other.returncode != 0 or "vector" not in json.loads(other.stdout)["stages"], (
            "a CLI with other settings was answered by the server"
        )
        # `vsearch` does not fuse: the fusion setting is not one of its settings.
        assert ok(home, "vsearch", QUESTION, "--json", QUARRY_FUSION="rrf").stdout == alone[commands[2]].stdout
        # The same weights under another name are another model to the index: on its own the
        # CLI says so, where the server would have answered.
        other = home.with_env(QUARRY_EMBED_MODEL=str(model)).run("vsearch", QUESTION, "--json", timeout=300)
        assert other.returncode != 0 and "quarry embed" in other.stderr, other.stdout

        # A failing search fails the same way through the server as on its own.
        for c, own in bad_alone.items():
            served = home.run(*c, timeout=300)
            assert served.returncode != 0, (c, served.stdout)
            assert (served.stdout, served.stderr) == ("", own.stderr), c
    finally:
        if not link.exists():
            link.symlink_to(model)
        srv.stop()
    assert not sock.exists(), "the server left its socket behind"


def test_writes_of_the_cli_are_found_through_the_server(world, tmp_path: Path):
    """Read-your-writes: a document the CLI indexed a moment ago is found by the next search,
    which the server answers."""
    home, link, model = world
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        loaded(srv)
        link.unlink()
        (home.corpus / "zz-fast-path.md").write_text("# Quillwort\n\nThe quillwort survey starts Monday.\n")
        ok(home, "update")
        r = ok(home, "search", "quillwort", "--json")
        assert [h["file"] for h in json.loads(r.stdout)] == ["notes/zz-fast-path.md"]
        r = ok(home, "query", "quillwort survey", "--json")
        assert json.loads(r.stdout)["results"][0]["file"] == "notes/zz-fast-path.md"
    finally:
        (home.corpus / "zz-fast-path.md").unlink(missing_ok=True)
        if not link.exists():
            link.symlink_to(model)
        srv.stop()


def test_a_socket_left_by_a_killed_server_is_harmless_and_replaced(world, tmp_path: Path):
    home, link, model = world
    srv = start_server(home, logdir=tmp_path / "logs")
    loaded(srv)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    sock = socket_path(home)
    assert sock.is_socket(), "a killed server cannot remove its socket: the case under test"
    # Nobody listens: the CLI searches on its own.
    alone = ok(home, "vsearch", QUESTION, "--json")
    assert json.loads(alone.stdout), "no results"

    # A new server takes the socket over and answers again.
    srv = start_server(home, logdir=tmp_path / "logs2")
    try:
        loaded(srv)
        link.unlink()
        served = ok(home, "vsearch", QUESTION, "--json")
        assert served.stdout == alone.stdout
    finally:
        if not link.exists():
            link.symlink_to(model)
        srv.stop()


def test_a_second_server_leaves_the_socket_to_the_first(world, tmp_path: Path):
    """Two processes on one data directory (`quarry serve` and an agent's `quarry mcp`): the one
    that listens first keeps answering, the other does not take its socket."""
    home, link, model = world
    first = start_server(home, logdir=tmp_path / "logs")
    try:
        loaded(first)
        inode = socket_path(home).stat().st_ino
        second = start_server(home, logdir=tmp_path / "logs2")
        try:
            loaded(second)
            assert socket_path(home).stat().st_ino == inode
            assert "another process answers the CLI" in second.stderr()
        finally:
            second.stop()
        # The second one's exit leaves the first one's socket alone.
        assert socket_path(home).is_socket() and socket_path(home).stat().st_ino == inode
        link.unlink()
        ok(home, "vsearch", QUESTION, "--json")
    finally:
        if not link.exists():
            link.symlink_to(model)
        first.stop()


def test_a_stale_file_or_a_foreign_listener_never_breaks_the_cli(world, tmp_path: Path):
    home, _link, _model = world
    sock = socket_path(home)
    # A plain file where the socket would be.
    sock.write_text("not a socket")
    try:
        r = ok(home, "search", "zanzibar", "--json")
        assert json.loads(r.stdout)
    finally:
        sock.unlink()
    # Something else listening there, answering garbage.
    import socket as so
    import threading

    listener = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(4)

    def garbage():
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n{nonsense\n")
            conn.close()

    t = threading.Thread(target=garbage, daemon=True)
    t.start()
    try:
        r = ok(home, "search", "zanzibar", "--json")
        assert json.loads(r.stdout), "the CLI should have searched on its own"
    finally:
        listener.close()
        os.unlink(sock)
