"""Semantic search is the default (issue 41 item 18): `quarry serve` and `quarry embed` with no
model configured fetch the default model (intfloat/multilingual-e5-small) from the Hugging Face
Hub on first use, with progress, and search by meaning; `--embed-model none` opts out; offline,
a server says plainly that it searches by keyword only.

The Hub is a loopback mirror (`HF_ENDPOINT`): Python's own `http.server` serving the real e5
model that scripts/setup-models builds, laid out as the Hub lays out its files
(`/{repo}/resolve/{revision}/{file}`). Quarry's real download path runs against it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PLAN, QuarryHome, display, free_port, make_home, start_server, wait_port
from kb_support import api, create_kb, upload, wait_for
from test_rest import assert_error, get, post

DEFAULT_MODEL = "intfloat/multilingual-e5-small"
WEIGHTS_PATH = f"/{DEFAULT_MODEL}/resolve/main/model.safetensors"
NO_VECTORS = "Vector index not found. Run 'quarry embed' first to create embeddings."
QUERY = "rotate the api keys of the zanzibar cluster"
NOTE = (
    "# Greenhouse watering\n\nThe tomato seedlings in the greenhouse are watered at dawn; "
    "the orchids get rain water twice a week.\n"
)


@dataclass
class Mirror:
    url: str
    log: Path
    proc: subprocess.Popen

    def requests(self) -> list[str]:
        """The request lines the mirror answered, e.g. `GET /org/m/resolve/main/x HTTP/1.1" 200`."""
        return re.findall(r'"(GET [^"]+)" (\d{3})', self.log.read_text(errors="replace"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def hf_mirror(tmp_path: Path):
    model = os.environ.get("QUARRY_TEST_E5")
    if not model:
        if os.environ.get("CI") == "true":
            pytest.fail("QUARRY_TEST_E5 is not set (scripts/setup-models provides it)")
        pytest.skip("QUARRY_TEST_E5 is not set (scripts/setup-models provides it)")
    root = tmp_path / "hf-mirror"
    repo = root / DEFAULT_MODEL / "resolve" / "main"
    for f in Path(model).rglob("*"):
        if f.is_file():
            dest = repo / f.relative_to(model)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(f)
    port = free_port()
    log = tmp_path / "hf-mirror.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    mirror = Mirror(url=f"http://127.0.0.1:{port}", log=log, proc=proc)
    try:
        wait_port(port, proc, "the Hugging Face mirror", log=log)
        yield mirror
    finally:
        mirror.stop()


def online_home(quarry_bin: Path, corpus: Path, root: Path, mirror: Mirror) -> QuarryHome:
    """A home with the corpus indexed, an empty model cache, and the Hub at `mirror`."""
    return make_home(quarry_bin, corpus, root / "quarry-home").with_env(HF_HUB_OFFLINE=None, HF_ENDPOINT=mirror.url)


def wait_until(what: str, check, timeout: float, srv=None):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = f"\nserver stderr:\n{srv.stderr()[-3000:]}" if srv is not None else ""
            pytest.fail(f"{what}: not within {timeout} s{tail}")
        time.sleep(0.2)


def semantic(srv) -> dict:
    status, body, _ = get(srv.base, "/status")
    assert status == 200, body
    return body["semantic"]


def test_serve_fetches_the_default_model_with_progress_and_searches_by_meaning(quarry_bin, corpus, hf_mirror, tmp_path):
    home = online_home(quarry_bin, corpus, tmp_path, hf_mirror)
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        # The server answers at once; the model arrives in the background.
        wait_until("the default model loaded", lambda: get(srv.base, "/health")[1].get("model_loaded"), 300, srv)
        assert semantic(srv) == {"state": "ready", "model": DEFAULT_MODEL}
        err = srv.stderr()
        # Progress on stderr (a pipe here: lines, in MB), however quick the download.
        assert f"Downloading {DEFAULT_MODEL}: model.safetensors: 0.0 MB/" in err, err[-3000:]
        assert re.search(rf"Downloading {re.escape(DEFAULT_MODEL)}: model\.safetensors: [\d.]+ MB done in", err), err[-3000:]
        assert (f"GET {WEIGHTS_PATH} HTTP/1.1", "200") in hf_mirror.requests(), hf_mirror.requests()

        # What the CLI indexed before the server started is embedded by its sweep.
        def embedded():
            body = get(srv.base, "/status")[1]
            return body["has_vector_index"] and body["needs_embedding"] == 0 and body
        wait_until("the corpus embedded", embedded, 300, srv)
        status, body, _ = post(srv.base, "/vsearch", {"query": QUERY, "min_score": 0})
        assert status == 200, body
        assert body["results"][0]["file"] == display(PLAN), body["results"]

        # An upload is embedded as it arrives, and found by meaning with no word in common.
        kb = create_kb(srv, "garden")
        [doc] = upload(srv, kb["id"], [("watering.md", NOTE.encode())])
        wait_for(srv, kb["id"], [doc["id"]], {"ready"}, timeout=300)
        status, body, _ = post(srv.base, "/vsearch", {"query": "how often do the flowers get water", "min_score": 0})
        assert status == 200, body
        assert "watering" in body["results"][0]["file"], body["results"]
    finally:
        srv.stop()

    # Cached: a later start needs no Hub at all.
    hf_mirror.stop()
    offline = home.with_env(HF_HUB_OFFLINE="1")
    srv = start_server(offline, logdir=tmp_path / "logs-offline")
    try:
        wait_until("the cached model loaded", lambda: get(srv.base, "/health")[1].get("model_loaded"), 120, srv)
        assert "Downloading" not in srv.stderr()
        assert semantic(srv) == {"state": "ready", "model": DEFAULT_MODEL}
        status, body, _ = post(srv.base, "/vsearch", {"query": QUERY, "min_score": 0})
        assert status == 200 and body["results"][0]["file"] == display(PLAN), body
    finally:
        srv.stop()


def test_cli_embed_fetches_the_default_model(quarry_bin, corpus, hf_mirror, tmp_path):
    home = online_home(quarry_bin, corpus, tmp_path, hf_mirror)
    r = home.run("embed", "--json", timeout=900)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["chunks_embedded"] > 0 and report["total_chunks"] == report["vectors_indexed"], report
    assert f"Downloading {DEFAULT_MODEL}: model.safetensors" in r.stderr, r.stderr
    assert (f"GET {WEIGHTS_PATH} HTTP/1.1", "200") in hf_mirror.requests()
    r = home.run("vsearch", QUERY, "--json", "--min-score", "0")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["file"] == display(PLAN), r.stdout


def test_offline_server_says_it_searches_by_keyword_only(server):
    """The test servers' usual state: Hub offline, empty model cache, nothing configured."""
    assert server.env["HF_HUB_OFFLINE"] == "1" and "QUARRY_EMBED_MODEL" not in server.env
    wait_until("the keyword-only notice", lambda: "keyword search only" in server.stderr(), 30, server)
    err = server.stderr()
    assert "the default embedding model could not be fetched or loaded" in err, err[-3000:]
    assert "--embed-model none" in err, err[-3000:]
    state = semantic(server)
    assert state["state"] == "keyword_only" and state["model"] == DEFAULT_MODEL, state
    assert "offline mode is on" in state["reason"], state
    # Uploads do not wait for a model that will not come: ready, and found by keyword.
    kb = create_kb(server, "garden")
    [doc] = upload(server, kb["id"], [("watering.md", NOTE.encode())])
    wait_for(server, kb["id"], [doc["id"]], {"ready"}, timeout=60)
    status, body, _ = post(server.base, "/search", {"query": "orchids"})
    assert status == 200 and any("watering" in h["file"] for h in body["results"]), body
    assert_error(*post(server.base, "/vsearch", {"query": "orchids"})[:2], 503, NO_VECTORS)
    status, body, _ = post(server.base, "/embed", {"texts": ["hello"]})
    assert_error(status, body, 503)


def test_embed_model_none_opts_out(quarry_bin, corpus, hf_mirror, tmp_path):
    home = online_home(quarry_bin, corpus, tmp_path, hf_mirror)
    srv = start_server(home, "--embed-model", "none", logdir=tmp_path / "logs")
    try:
        wait_until("the keyword-only notice", lambda: "keyword search only (--embed-model none)" in srv.stderr(), 30, srv)
        assert semantic(srv) == {"state": "off"}
        kb = create_kb(srv, "garden")
        [doc] = upload(srv, kb["id"], [("watering.md", NOTE.encode())])
        wait_for(srv, kb["id"], [doc["id"]], {"ready"}, timeout=60)
        status, body, _ = post(srv.base, "/embed", {"texts": ["hello"]})
        assert_error(status, body, 503)
        assert api(srv, "GET", "/health").json()["model_loaded"] is False
    finally:
        srv.stop()
    # Nothing was fetched: the mirror saw no request.
    assert hf_mirror.requests() == []
    # `none` is a choice the CLI honours too, with a clear error where a model is needed.
    r = home.run("embed", "--embed-model", "none")
    assert r.returncode != 0 and "embedding is off (--embed-model none)" in r.stderr, r.stderr
    r = home.run("vsearch", "orchids", "--embed-model", "none")
    assert r.returncode != 0 and "--embed-model none" in r.stderr, r.stderr
    assert hf_mirror.requests() == []
