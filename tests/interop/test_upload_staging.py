"""Upload staging after a crash (issue 21 item 3): a server SIGKILLed in the middle of a real
streaming HTTP upload leaves a staging file (`blobs/tmp/*.part`, or `blob-staging/*.part` with
the blobs in S3); the next start removes it, and loses nothing else (a document uploaded before is still there, with its original). A staging file that a
live process is writing — here a second server's upload, as a CLI beside a server would be — is
never taken for a leftover, however old, when another process starts and sweeps."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

from conftest import QuarryHome, blob_names, isolated_env, staging_files, start_server
from kb_support import api

CHUNK = b"x" * (1 << 20)


def start_streaming_upload(srv, kb: str, name: str, megabytes: int, send: int) -> tuple[socket.socket, bytes]:
    """Starts a multipart upload of `megabytes` MB and sends the first `send` MB; returns the
    socket and what is still to send."""
    boundary = "quarryboundary"
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="files"; filename="{name}"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    total = len(head) + megabytes * len(CHUNK) + len(tail)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(
        (
            f"POST /api/v1/knowledge-bases/{kb}/documents HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{srv.port}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {total}\r\n\r\n"
        ).encode()
        + head
    )
    for _ in range(send):
        s.sendall(CHUNK)
    return s, CHUNK * (megabytes - send) + tail


def wait_staged(home: QuarryHome, besides: list[Path], at_least: int) -> Path:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = [p for p in staging_files(home) if p not in besides and p.exists() and p.stat().st_size >= at_least]
        if new:
            return new[0]
        time.sleep(0.1)
    raise AssertionError(f"no staging file grew to {at_least} bytes: {staging_files(home)}")


def test_a_killed_upload_leaves_nothing_after_restart(quarry_bin: Path, tmp_path: Path):
    home_dir = tmp_path / "home"
    home_dir.mkdir()
    env = isolated_env(home_dir, {"QUARRY_OCR": "off"})
    home = QuarryHome(bin=quarry_bin, home=home_dir, env=env, corpus=tmp_path)
    servers = [start_server(home, logdir=tmp_path / "logs")]
    r = api(servers[0], "POST", "/api/v1/knowledge-bases", json={"name": "handbook"})
    assert r.status_code == 201, r.text
    kb = r.json()["data"]["id"]
    kept = b"# Kept\n\nThe zanzibar handbook survives a crash.\n"
    files = [("files", ("kept.md", kept, "text/markdown"))]
    r = api(servers[0], "POST", f"/api/v1/knowledge-bases/{kb}/documents", files=files)
    assert r.status_code == 202, r.text
    kept_id = r.json()["data"][0]["document"]["id"]
    before = blob_names(home)
    assert before, "the first upload stored its original"

    # A 60 MB upload, streamed; the server is SIGKILLed after 20 MB.
    s, _rest = start_streaming_upload(servers[0], kb, "big.txt", 60, 20)
    left = wait_staged(home, [], 10 << 20)
    servers[0].proc.send_signal(signal.SIGKILL)
    servers[0].proc.wait()
    s.close()
    assert left.exists(), "the kill left a staging file (the situation this test is about)"
    # Staging files younger than a few seconds are left alone (a writer may be about to lock
    # one): let this one age past that.
    time.sleep(6)
    try:
        servers[0] = start_server(home, logdir=tmp_path / "logs2")
        assert not left.exists(), f"still staged after restart: {staging_files(home)}"

        # Another process (a second server, like a CLI beside one) starts while this one is
        # mid-upload, with a file older than the grace: the live upload's file stays.
        live_socket, rest = start_streaming_upload(servers[0], kb, "live.txt", 3, 2)
        live = wait_staged(home, [], 2 << 20)
        time.sleep(6)
        servers.append(start_server(home, logdir=tmp_path / "logs3"))
        assert live.exists(), "the sweep removed a live upload's staging file"
        live_socket.sendall(rest)
        live_socket.settimeout(30)
        reply = live_socket.recv(65536)
        live_socket.close()
        assert reply.startswith(b"HTTP/1.1 202"), reply[:500]

        # Nothing else lost: the first document and its original are still there.
        assert before <= blob_names(home)
        r = api(servers[0], "GET", f"/api/v1/knowledge-bases/{kb}/documents/{kept_id}")
        assert r.status_code == 200, r.text
        docs = api(servers[0], "GET", f"/api/v1/knowledge-bases/{kb}/documents").json()["data"]
        assert {"kept.md", "live.txt"} <= {d["file_name"] for d in docs}, docs
        assert staging_files(home) == [], staging_files(home)
    finally:
        for srv in servers:
            srv.stop()
