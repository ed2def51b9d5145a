"""Source ids across spaces, and what a server's outbound address guard lets a source reach
(issue 65 items 13 and 14), through the real binary: the CLI, a ``quarry serve --auth
token`` server and Git repositories served by a real ``git http-backend`` on loopback.

- Item 13: ``quarry source add`` prints ``Sync it with: quarry source sync ID``, and that
  command works verbatim for a source of another space than ``default`` (a source id is
  global: looked up across the spaces the caller reaches). With ``--space`` naming another
  space, and for a token that does not reach the source's space, it is "not found" in the
  same words as an id nobody has. A token with several spaces reaches the source over REST
  without naming one.
- Item 14: on a token server without ``--allow-net``, the machine's owner attaches a loopback
  Git source: attaching warns (the server's scheduled syncs will be refused), the owner's
  manual sync works, every scheduled one fails; a source with its own allowance
  (``--allow-net 127.0.0.1/32`` on ``source add`` / ``source set``, REST ``allow_net``) is
  synced on schedule while the other still fails; a bad range is a clear 400, a token
  without the management scope gets 403 MANAGEMENT_FORBIDDEN; and after a restart with
  ``--allow-net`` the refused source is synced within seconds, not after its back-off.
"""

from __future__ import annotations

import json
import re
import shlex
import time
import uuid
from pathlib import Path

import pytest
import requests

from conftest import QuarryHome, isolated_env, start_server
from test_sources import GitServer

LEASE = 4  # QUARRY_SOURCE_LEASE_SECS: the scheduler looks for due sources every LEASE / 2 s


class World:
    def __init__(self, home: QuarryHome, gitsrv: GitServer, root: Path):
        self.home = home
        self.gitsrv = gitsrv
        self.root = root
        self.srv = None
        self.tokens: dict[str, str] = {}

    def run(self, *args: str):
        return self.home.run(*args, timeout=120)

    def cli(self, *args: str) -> dict:
        r = self.run("--json", *args)
        assert r.returncode == 0, f"quarry {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return json.loads(r.stdout)

    def call(self, method: str, path: str, token: str | None = None, **kw) -> requests.Response:
        headers = dict(kw.pop("headers", {}) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.srv.url(path), headers=headers, timeout=120, **kw)

    def source(self, sid: str) -> dict:
        return self.cli("source", "status", sid, "--reports", "1")["source"]


@pytest.fixture(scope="module")
def world(quarry_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("source-reach")
    (root / "home").mkdir()
    env = isolated_env(root / "home", {"QUARRY_OCR": "off", "QUARRY_SOURCE_LEASE_SECS": str(LEASE)})
    home = QuarryHome(bin=quarry_bin, home=root / "home", env=env, corpus=root)
    (root / "git" / "repos").mkdir(parents=True)
    gitsrv = GitServer(root / "git" / "repos")
    w = World(home, gitsrv, root)
    w.cli("kb", "create", "handbook")  # (and the default space with it)
    for name in ("acme", "beta"):
        w.cli("space", "create", name)
    for user in ("olga", "alice", "bob"):
        w.cli("user", "add", user)
    w.cli("space", "grant", "default", "olga", "--role", "owner")
    w.cli("space", "grant", "acme", "alice", "--role", "owner")
    w.cli("space", "grant", "beta", "alice", "--role", "owner")
    w.cli("space", "grant", "beta", "bob", "--role", "owner")
    for key, args in (
        ("olga", ("--user", "olga", "--spaces", "default", "--manage")),
        ("olga_plain", ("--user", "olga", "--spaces", "default")),
        ("alice", ("--user", "alice", "--spaces", "acme,beta", "--manage")),
        ("bob", ("--user", "bob", "--spaces", "beta", "--manage")),
    ):
        w.tokens[key] = w.cli("token", "create", *args, "--label", key)["token"]
    w.cli("--space", "acme", "kb", "create", "docs")
    # A server with tokens and no --allow-net: its scheduled syncs reach public addresses only.
    w.srv = start_server(home, "--auth", "token", logdir=root / "logs")
    yield w
    if w.srv is not None:
        w.srv.stop()
    gitsrv.stop()


def refused(r: requests.Response, status: int, *fragments: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    for f in fragments:
        assert f in body["detail"], (f, body)
    return body


def wait_for(what: str, check, w: World, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}\n{w.srv.stderr()[-3000:]}"
        time.sleep(0.25)


def test_the_sync_hint_works_for_a_source_of_another_space(world):
    """Item 13: the hint `source add` prints works verbatim outside the default space."""
    w = world
    w.gitsrv.repo("acme-guide.git", {"guide.md": "# Guide\nThe pelican handbook.\n"})
    r = w.run("--space", "acme", "source", "add", "docs", "--git", w.gitsrv.url("acme-guide.git"))
    assert r.returncode == 0, r.stderr
    [hint] = [ln for ln in r.stdout.splitlines() if ln.startswith("Sync it with: ")]
    command = shlex.split(hint.removeprefix("Sync it with: "))
    assert command[:3] == ["quarry", "source", "sync"], hint
    sid = command[3]
    synced = w.run(*command[1:])
    assert synced.returncode == 0, f"{hint}: {synced.stdout}\n{synced.stderr}"
    assert "1 added" in synced.stdout, synced.stdout
    # Every verb that takes an id finds it without --space.
    status = w.cli("source", "status", sid)
    assert status["source"]["knowledge_base"] == "docs" and status["source"]["documents"] == 1, status
    assert w.cli("source", "set", sid, "--mask", "**/*.md")["mask"] == "**/*.md"
    # --space naming another space: not found, in the words of an id nobody has.
    nobody = str(uuid.uuid4())
    wrong = w.run("--space", "beta", "source", "status", sid)
    missing = w.run("--space", "beta", "source", "status", nobody)
    assert wrong.returncode == missing.returncode != 0, (wrong, missing)
    assert "not found" in wrong.stderr and wrong.stderr.replace(sid, nobody) == missing.stderr, (
        wrong.stderr, missing.stderr)
    plain_missing = w.run("source", "sync", nobody)
    assert plain_missing.returncode != 0 and f"source '{nobody}' not found" in plain_missing.stderr
    assert w.run("--space", "acme", "source", "status", sid).returncode == 0

    # REST: a token reaching acme among several spaces finds it without naming a space; one
    # that does not reach acme gets the 404 of a missing source, and so does naming beta.
    alice, bob = w.tokens["alice"], w.tokens["bob"]
    got = w.call("GET", f"/api/v1/sources/{sid}", alice)
    assert got.status_code == 200 and got.json()["data"]["knowledge_base"] == "docs", got.text
    reports = w.call("GET", f"/api/v1/sources/{sid}/reports", alice)
    assert reports.status_code == 200 and len(reports.json()["data"]) == 1, reports.text
    for token, headers in ((bob, {}), (alice, {"X-Space-ID": "beta"})):
        other = refused(w.call("GET", f"/api/v1/sources/{sid}", token, headers=headers), 404, "not found")
        none = refused(w.call("GET", f"/api/v1/sources/{nobody}", token, headers=headers), 404, "not found")
        assert other == {**none, "detail": none["detail"].replace(nobody, sid)}, (other, none)
        refused(w.call("POST", f"/api/v1/sources/{sid}/sync", token, headers=headers), 404)
        refused(w.call("PATCH", f"/api/v1/sources/{sid}", token, headers=headers, json={"mask": "*"}), 404)
        refused(w.call("DELETE", f"/api/v1/sources/{sid}", token, headers=headers), 404)
    # Alice's unknown id is a 404 too (not "name a space").
    refused(w.call("GET", f"/api/v1/sources/{nobody}", alice), 404, "not found")
    assert w.cli("source", "status", sid)["source"]["documents"] == 1, "nothing changed"


def test_a_loopback_source_warns_and_its_own_allowance_reaches_it_on_schedule(world):
    """Item 14: the owner's loopback source on a token server without --allow-net."""
    w = world
    w.gitsrv.repo("refused.git", {"a.md": "# A\nThe gannet.\n"})
    w.gitsrv.repo("allowed.git", {"b.md": "# B\nThe cormorant.\n"})
    w.gitsrv.repo("manual.git", {"c.md": "# C\nThe shag.\n"})
    url = w.gitsrv.url("refused.git")
    # Attaching warns, in text (on stderr) and in JSON.
    r = w.run("source", "add", "handbook", "--git", url, "--every", "1h")
    assert r.returncode == 0, r.stderr
    [warning] = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    sid = next(ln for ln in r.stdout.splitlines() if ln.startswith("Sync it with: ")).split()[-1]
    for fragment in ("scheduled syncs", "127.0.0.1 is a loopback address",
                     f"quarry source set {sid} --allow-net 127.0.0.1/32", "quarry serve --allow-net 127.0.0.1/32"):
        assert fragment in warning, (fragment, warning)
    manual = w.cli("source", "add", "handbook", "--git", w.gitsrv.url("manual.git"))
    [jw] = manual["warnings"]
    assert "127.0.0.1 is a loopback address" in jw, manual
    # The owner's manual sync works: the CLI is not guarded.
    synced = w.cli("source", "sync", manual["id"])
    assert synced["report"]["status"] == "succeeded", synced
    # Its own allowance: no warning, and the server syncs it on its schedule.
    allowed = w.cli("source", "add", "handbook", "--git", w.gitsrv.url("allowed.git"),
                    "--every", "1h", "--allow-net", "127.0.0.1/32")
    assert "warnings" not in allowed and allowed["allow_net"] == ["127.0.0.1/32"], allowed
    ok = wait_for("the allowed source was never synced on schedule",
                  lambda: w.source(allowed["id"])["last_success_at"], w)
    assert ok
    # The other fails on schedule, saying why.
    failing = wait_for("the refused source never failed on schedule",
                       lambda: (lambda s: s if s["failures"] >= 1 else None)(w.source(sid)), w)
    assert "127.0.0.1 is a loopback address" in failing["last_error"], failing
    assert failing["last_success_at"] is None, failing
    status = w.run("source", "status", sid)
    assert re.search(r"failing \(\d+ in a row\): .*loopback", status.stdout), status.stdout

    # Setting an allowance: a management credential's change, checked.
    olga, plain = w.tokens["olga"], w.tokens["olga_plain"]
    sp = f"/api/v1/sources/{sid}"
    for bad, why in ((["127.0.0.1/33"], "prefix length 33"), (["10.0.0.1/8"], "host bits set"),
                     (["not-an-address"], "not an address range"), (["0.0.0.0/0"], "cloud metadata"),
                     ("127.0.0.1/32", "allow_net")):
        refused(w.call("PATCH", sp, olga, json={"allow_net": bad, "mask": "*.md"}), 400, why)
    assert w.source(sid)["mask"] != "*.md", "a refused change changes nothing"
    denied = refused(w.call("PATCH", sp, plain, json={"allow_net": ["127.0.0.1/32"]}), 403)
    assert denied["error_code"] == "MANAGEMENT_FORBIDDEN", denied
    bad_cli = w.run("source", "set", sid, "--allow-net", "127.0.0.300")
    assert bad_cli.returncode != 0 and "allow_net" in bad_cli.stderr and "127.0.0.300" in bad_cli.stderr, bad_cli
    # Over REST, a manage token attaches a loopback source with its own allowance (and is
    # refused one without it: the guard still refuses everything else).
    w.gitsrv.repo("rest.git", {"d.md": "# D\nThe puffin.\n"})
    new = {"kind": "git", "url": w.gitsrv.url("rest.git")}
    refused(w.call("POST", "/api/v1/knowledge-bases/handbook/sources", olga,
                   json={**new, "allow_net": ["127.0.0.2/32"]}), 403, "127.0.0.1 is a loopback address")
    made = w.call("POST", "/api/v1/knowledge-bases/handbook/sources", olga,
                  json={**new, "allow_net": ["127.0.0.1/32"], "mask": "**/*.md"})
    assert made.status_code == 201 and made.json()["data"]["allow_net"] == ["127.0.0.1/32"], made.text
    assert "warnings" not in made.json()["data"], made.text
    # The refused source is still failing (backing off) while the allowed one succeeded.
    still = w.source(sid)
    assert still["failures"] >= 1 and still["last_success_at"] is None, still

    # A restart with --allow-net: the refused source is retried at once, not after its
    # back-off.
    before = w.source(sid)
    backoff_until = before["next_sync_at"]
    w.srv.stop()
    w.srv = start_server(w.home, "--auth", "token", "--allow-net", "127.0.0.1/32", logdir=w.root / "logs2")
    restarted = time.time() * 1000
    done = wait_for("the refused source was not retried after the restart",
                    lambda: (lambda s: s if s["last_success_at"] else None)(w.source(sid)), w, timeout=20)
    assert done["last_success_at"] < backoff_until, (done, backoff_until)
    assert done["last_success_at"] - restarted < 15_000, (done, restarted)
    assert done["failures"] == 0 and done["last_error"] is None and done["documents"] == 1, done
