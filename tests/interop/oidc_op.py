"""A real OpenID provider on loopback for the interop tests: django-oidc-provider in the small
Django project beside this file (oidc_op/), run with `manage.py runserver` (threaded) in a
child process.

    with running_provider(tmp_path / "op") as op:
        op.add_client("quarry", "s3cret", ["http://127.0.0.1:8080/auth/callback"])
        op.add_user("alice", "pw", "alice@example.com", ["eng", "hr"])
        ...  # op.issuer is http://127.0.0.1:PORT/openid

or, in a test module, one provider for the whole module:

    oidc_op = provider_fixture()          # a pytest fixture named `oidc_op`
    def test_sign_in(oidc_op): ...

What the provider does (django-oidc-provider 0.9.0):

- Discovery at ``{issuer}/.well-known/openid-configuration``; endpoints ``{issuer}/authorize``,
  ``/token``, ``/userinfo``, ``/jwks``, ``/end-session`` (discovery: ``end_session_endpoint``).
- Code flow for confidential clients (client_secret_basic or client_secret_post), PKCE with
  ``code_challenge_method`` S256 or plain (optional; once a code has a challenge the verifier
  is required). ID tokens RS256 with a ``kid``; ``aud`` is the client id as a string;
  ``nonce`` only when the request had one; ``at_hash`` always; the scopes ``email``,
  ``profile`` and ``groups`` put their claims in the ID token and at userinfo.
- Login page ``/accounts/login/``: ``#id_username``, ``#id_password``, ``button#login``; a
  refused login shows ``#login-error``. Consent page (clients added with
  ``require_consent=True``): accept is ``input[name="allow"]``, the other submit declines.
- Logout: ``{issuer}/end-session?id_token_hint=…&post_logout_redirect_uri=…&state=…`` ends
  the OP session and redirects to the URI (``?state=…`` added) when it is one the client
  registered; the hint's aud picks the client, its signature is not checked.
- ``GET /`` says ``signed in as NAME`` or ``not signed in``: the OP session of that browser.

oidc_op/ has no __init__.py on purpose: ``import oidc_op`` is this module, not that folder.

Admin changes (users, groups, clients, keys) go to the running server through an endpoint
guarded by a secret only this object knows, or through `manage.py op_admin` while it is down;
either way they hold from the provider's next request on.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

OP_DIR = Path(__file__).resolve().parent / "oidc_op"

# Ports 10000-19999, one slice per xdist worker and pass (as conftest.free_port does for
# 20000-31999): outside the kernel's ephemeral range and outside conftest's slices.
_PORT_BASE, _PORT_SLICE = 10000, 1250


def free_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slot = (int(worker) if worker.isdigit() else 0) % 4
    if os.environ.get("QUARRY_TEST_BACKEND") == "postgres":
        slot += 4
    base = _PORT_BASE + slot * _PORT_SLICE
    start = random.randrange(_PORT_SLICE)
    for i in range(_PORT_SLICE):
        port = base + (start + i) % _PORT_SLICE
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port for the OpenID provider")


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class OidcProvider:
    def __init__(self, data_dir: str | os.PathLike, port: int | None = None, python: str | None = None):
        """data_dir keeps everything the provider writes (SQLite, keys, op.log); python is an
        interpreter with Django and django-oidc-provider (default: this one)."""
        self.data_dir = Path(data_dir).resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.base}/openid"  # exactly what discovery and the ID tokens say
        self.discovery_url = f"{self.issuer}/.well-known/openid-configuration"
        self.authorization_endpoint = f"{self.issuer}/authorize"
        self.token_endpoint = f"{self.issuer}/token"
        self.userinfo_endpoint = f"{self.issuer}/userinfo"
        self.jwks_uri = f"{self.issuer}/jwks"
        self.end_session_endpoint = f"{self.issuer}/end-session"
        self.login_url = f"{self.base}/accounts/login/"
        self.log_path = self.data_dir / "op.log"
        self.python = python or sys.executable
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None
        self._secret = secrets.token_urlsafe(32)

    # -- lifecycle ------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="op_site.settings",
            OIDC_OP_DATA=str(self.data_dir),
            OIDC_OP_SITE_URL=self.base,
            OIDC_OP_ADMIN_SECRET=self._secret,
        )
        return env

    def _manage(self, *args: str) -> str:
        r = subprocess.run(
            [self.python, "manage.py", *args],
            cwd=OP_DIR,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if r.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-4000:]}")
        return r.stdout

    def _prepare(self) -> None:
        """Once per data dir: the Django secret, the schema, a first signing key."""
        marker = self.data_dir / "prepared"
        if marker.exists():
            return
        key = self.data_dir / "secret_key"
        if not key.exists():
            key.write_text(secrets.token_urlsafe(50))
        self._manage("migrate", "--verbosity", "0")
        self._manage("op_admin", "ensure_key")
        marker.touch()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30) -> OidcProvider:
        if self.running:
            return self
        t0 = time.monotonic()
        self._prepare()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [self.python, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload", "--skip-checks"],
                cwd=OP_DIR,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the OpenID provider exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.discovery_url, timeout=2) as r:
                    if r.status == 200:
                        self.startup_s = time.monotonic() - t0
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the OpenID provider did not answer within {timeout} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Down: connections to the port are refused until start() (same port, same data)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- admin ----------------------------------------------------------------------------

    def _admin(self, op: str, **kwargs) -> dict:
        if not self.running:
            self._prepare()
            return json.loads(self._manage("op_admin", op, json.dumps(kwargs)))
        req = urllib.request.Request(
            f"{self.base}/_op_admin/{op}",
            data=json.dumps(kwargs).encode(),
            headers={"Content-Type": "application/json", "X-Op-Admin-Secret": self._secret},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"OP admin {op} failed: {e.code} {e.read().decode(errors='replace')}") from None

    def add_user(
        self,
        username: str,
        password: str,
        email: str = "",
        groups: list[str] = (),
        first_name: str = "",
        last_name: str = "",
    ) -> str:
        """Creates (or resets) a user; returns its `sub` (the Django user id, as a string)."""
        return self._admin(
            "add_user",
            username=username,
            password=password,
            email=email,
            groups=list(groups),
            first_name=first_name,
            last_name=last_name,
        )["sub"]

    def set_groups(self, username: str, groups: list[str]) -> None:
        """Exactly these groups from now on (tokens issued later carry them)."""
        self._admin("set_groups", username=username, groups=list(groups))

    def add_client(
        self,
        client_id: str,
        client_secret: str,
        redirect_uris: list[str],
        post_logout_redirect_uris: list[str] = (),
        require_consent: bool = False,
        reuse_consent: bool = True,
    ) -> None:
        """A confidential code-flow client (created or replaced). With require_consent the
        person accepts on the consent page; reuse_consent then skips it on later sign-ins."""
        self._admin(
            "add_client",
            client_id=client_id,
            client_secret=client_secret,
            redirect_uris=list(redirect_uris),
            post_logout_redirect_uris=list(post_logout_redirect_uris),
            require_consent=require_consent,
            reuse_consent=reuse_consent,
        )

    def kids(self) -> list[str]:
        """The signing keys' kids in the OP's database (the JWKS, unless it serves a foreign key)."""
        return self._admin("state")["kids"]

    def rotate_key(self) -> str:
        """A new RSA key signs from now on; the old one leaves the JWKS. Returns the new kid."""
        return self._admin("rotate_key")["kid"]

    def serve_foreign_jwks(self, on: bool) -> None:
        """While on, the JWKS holds only another RSA key (one that signs nothing), so ID tokens'
        kid is not in it and their signatures do not verify against it."""
        self._admin("serve_foreign_jwks", on=bool(on))

    # -- a browser's part -------------------------------------------------------------------

    def sign_in(self, session, authorize_url: str, username: str, password: str, consent: bool = True) -> str:
        """Plays the browser from an authorization request on: follows the OP's redirects
        with `session` (a requests.Session, which keeps the OP's cookies), fills in the login
        form and answers the consent page (accept, or decline when consent=False) if they
        come. Returns the first URL outside the OP (the redirect to the client's
        redirect_uri, with code and state or error), without requesting it. A session
        already signed in to the OP goes straight back, as whoever it is signed in as."""
        url, method, data = authorize_url, "GET", None
        for _ in range(20):
            r = session.request(method, url, data=data, allow_redirects=False, timeout=30)
            if r.is_redirect:
                url, method, data = urllib.parse.urljoin(r.url, r.headers["Location"]), "GET", None
                if not url.startswith(self.base + "/"):
                    return url
                continue
            if r.status_code != 200:
                raise RuntimeError(f"OP answered {r.status_code} at {r.url}: {r.text[:2000]}")
            form = _Form.parse(r.text)
            if form.action is None:
                raise RuntimeError(f"OP page without a form at {r.url}: {r.text[:2000]}")
            fields = dict(form.hidden)
            if "login-error" in r.text:
                raise RuntimeError(f"the OP refused the login of {username!r}")
            if "password" in form.names:  # the login page
                fields.update(username=username, password=password)
            elif "allow" in form.names:  # the consent page
                if consent:
                    fields["allow"] = form.values["allow"]
            else:
                raise RuntimeError(f"unexpected OP page at {r.url}: {r.text[:2000]}")
            url, method, data = urllib.parse.urljoin(r.url, form.action), "POST", fields
        raise RuntimeError(f"too many redirects signing in at {authorize_url}")


class _Form(HTMLParser):
    """The first <form> of a page: its action, hidden inputs and field names."""

    def __init__(self):
        super().__init__()
        self.action: str | None = None
        self.hidden: list[tuple[str, str]] = []
        self.names: set[str] = set()
        self.values: dict[str, str] = {}
        self._in_form = self._done = False

    @classmethod
    def parse(cls, html: str) -> _Form:
        f = cls()
        f.feed(html)
        return f

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and not self._done:
            self._in_form, self.action = True, a.get("action", "")
        elif tag in ("input", "button") and self._in_form and a.get("name"):
            self.names.add(a["name"])
            self.values[a["name"]] = a.get("value", "")
            if a.get("type") == "hidden":
                self.hidden.append((a["name"], a.get("value", "")))

    def handle_endtag(self, tag):
        if tag == "form" and self._in_form:
            self._in_form, self._done = False, True


def _load_prctl():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (ImportError, OSError):
        return None


_prctl = _load_prctl()


def _die_with_parent() -> None:
    """The server goes when the test process does, even when that one is killed (runs in the
    child before exec: no imports here). Linux ties this to the thread that started the child,
    so start the provider from a long-lived thread."""
    if _prctl is not None:
        _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def running_provider(data_dir: str | os.PathLike, port: int | None = None):
    op = OidcProvider(data_dir, port)
    try:
        yield op.start()
    finally:
        op.stop()


def provider_fixture(name: str = "oidc_op", scope: str = "module"):
    """A pytest fixture (assign it to a module-level name) yielding a started OidcProvider
    with its own data dir; stopped at teardown."""
    import pytest

    @pytest.fixture(name=name, scope=scope)
    def _provider(tmp_path_factory):
        with running_provider(tmp_path_factory.mktemp("oidc-op")) as op:
            yield op

    return _provider
