"""A loopback fake of the model APIs Quarry calls, for the semantic-layer interop tests.

It speaks OpenAI-compatible ``POST /v1/embeddings`` and ``POST /v1/chat/completions`` and a
Jina-shaped ``POST /rerank``, like ``crates/quarry-cli/tests/common/fake_models.rs``:

- Embeddings are deterministic bags of hashed words (FNV-1a of ``"{model}/{word}"``, 64
  dimensions, 48 when the model name ends in ``-48``), L2-normalised, so cosine similarity
  tracks word overlap and tests can compute the expected vectors with :func:`fake_embedding`.
- The chat endpoint answers ``variants`` (numbered, one per line) as the query expansion.
- The reranker scores a document 1.0 when it contains ``rerank_word``, else 0.0.
- Embeddings and chat report ``usage`` (a token per word); the reranker reports none.
- Every request is recorded (:attr:`FakeModels.requests`), with the tokens Quarry should count; ``fail_embed``, ``fail_chat`` and
  ``fail_rerank`` make the endpoint answer HTTP 500 (see :meth:`FakeModels.failing`);
  ``fail_embed_containing`` does so only for embedding inputs containing a text.

``FakeModels.start()`` binds 127.0.0.1:0 and serves from a daemon thread; ``stop()`` shuts it down.
"""

from __future__ import annotations

import json
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMS = 64
DIMS_SMALL = 48  # for model names ending in "-48": a second vector space
PROBE = "dimension probe"  # what Quarry embeds to learn a remote model's dimensions


def words(text: str) -> list[str]:
    """Runs of alphanumeric characters longer than one character, lower-cased."""
    out, cur = [], []
    for ch in text:
        if ch.isalnum():
            cur.append(ch)
        else:
            if len(cur) > 1:
                out.append("".join(cur).lower())
            cur = []
    if len(cur) > 1:
        out.append("".join(cur).lower())
    return out


def fnv(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def fake_embedding(model: str, text: str) -> list[float]:
    """The fake's vector for ``text`` under ``model`` (bag of hashed words, L2-normalised)."""
    dims = DIMS_SMALL if model.endswith("-48") else DIMS
    v = [0.0] * dims
    for w in words(text):
        v[fnv(f"{model}/{w}") % dims] += 1.0
    if not any(v):
        v[0] = 1.0
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def estimated_tokens(body: object, key: str | None = None) -> int:
    """Quarry's estimate of a request without reported usage: per string in the body other
    than the model's name, one token per non-ASCII character plus one per four ASCII bytes."""
    if isinstance(body, str):
        if key == "model":
            return 0
        ascii_bytes = sum(1 for c in body if ord(c) < 128)
        return (len(body) - ascii_bytes) + (ascii_bytes + 3) // 4
    if isinstance(body, list):
        return sum(estimated_tokens(v) for v in body)
    if isinstance(body, dict):
        return sum(estimated_tokens(v, k) for k, v in body.items())
    return 0


def cosine(a: list[float], b: list[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


@dataclass
class Request:
    path: str
    body: object  # the parsed JSON body (None when it was not JSON)
    status: int = 0  # what the fake answered
    started: float = 0.0  # time.monotonic() when it arrived
    ended: float = 0.0  # ... and when it was answered
    # The tokens Quarry should count for it: those the fake reported in ``usage`` (embeddings,
    # chat), else the estimate of the request's text (rerank, which reports none).
    tokens: int = 0


@dataclass
class FakeModels:
    url: str = ""
    requests: list[Request] = field(default_factory=list)
    fail_embed: bool = False
    # Embedding requests with an input containing this text answer HTTP 500 (documents that
    # cannot be embedded while queries still can).
    fail_embed_containing: str | None = None
    fail_chat: bool = False
    fail_rerank: bool = False
    # Seconds an embeddings request takes per text (dimension probes excepted): a slow
    # embedding backend, e.g. a CPU model behind a large batch.
    embed_delay: float = 0.0
    variants: list[str] = field(default_factory=list)
    rerank_word: str = ""
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- lifecycle ------------------------------------------------------------------------

    @classmethod
    def start(cls) -> FakeModels:
        fake = cls()
        handler = type("Handler", (_Handler,), {"fake": fake})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        host, port = server.server_address[:2]
        fake.url = f"http://{host}:{port}"
        fake._server = server
        threading.Thread(target=server.serve_forever, name="fake-models", daemon=True).start()
        return fake

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # --- what Quarry is pointed at --------------------------------------------------------

    @property
    def openai_base(self) -> str:
        """Value for ``QUARRY_OPENAI_BASE_URL``."""
        return f"{self.url}/v1"

    @property
    def rerank_url(self) -> str:
        """Value for ``QUARRY_RERANK_URL``."""
        return f"{self.url}/rerank"

    def env(self, embed: str | None = "openai:fake-a", rerank: str | None = None, expand: str | None = None) -> dict:
        """Environment variables pointing Quarry at this fake (None leaves a model unset)."""
        env = {"QUARRY_OPENAI_BASE_URL": self.openai_base, "QUARRY_RERANK_URL": self.rerank_url}
        for var, spec in (("QUARRY_EMBED_MODEL", embed), ("QUARRY_RERANK_MODEL", rerank), ("QUARRY_EXPAND_MODEL", expand)):
            if spec:
                env[var] = spec
        return env

    # --- recorded traffic -----------------------------------------------------------------

    def snapshot(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def since(self, mark: int, path: str | None = None) -> list[Request]:
        """Requests after the first ``mark`` ones (``len(fake.snapshot())`` taken earlier)."""
        return [r for r in self.snapshot()[mark:] if path is None or r.path == path]

    def mark(self) -> int:
        with self._lock:
            return len(self.requests)

    def embedded_texts(self, since: int = 0) -> list[str]:
        """Texts sent to /v1/embeddings (answered or not), without dimension probes."""
        out = []
        for r in self.since(since, "/v1/embeddings"):
            inputs = r.body.get("input") if isinstance(r.body, dict) else None
            inputs = [inputs] if isinstance(inputs, str) else (inputs or [])
            out.extend(t for t in inputs if t != PROBE)
        return out

    def embedding_overlap(self) -> float:
        """Seconds during which two embedding requests or more were in flight at once."""
        edges = []
        for r in self.since(0, "/v1/embeddings"):
            if r.ended:
                edges += [(r.started, 1), (r.ended, -1)]
        edges.sort()
        overlap, depth, since = 0.0, 0, 0.0
        for at, step in edges:
            if depth >= 2:
                overlap += at - since
            depth += step
            since = at
        return overlap

    @contextmanager
    def failing(self, *what: str):
        """``with fake.failing("embed", "rerank", "chat"):`` those endpoints answer HTTP 500."""
        names = [f"fail_{w}" for w in what]
        before = {n: getattr(self, n) for n in names}
        for n in names:
            setattr(self, n, True)
        try:
            yield self
        finally:
            for n, v in before.items():
                setattr(self, n, v)

    # --- answers ----------------------------------------------------------------------------

    def answer(self, path: str, req) -> tuple[int, dict]:
        req = req if isinstance(req, dict) else {}
        if path == "/v1/embeddings":
            if self.fail_embed:
                return 500, {"error": {"message": "embedding backend down"}}
            model = str(req.get("model", ""))
            inputs = req.get("input")
            inputs = [inputs] if isinstance(inputs, str) else [t for t in (inputs or []) if isinstance(t, str)]
            if self.fail_embed_containing and any(self.fail_embed_containing in t for t in inputs):
                return 500, {"error": {"message": "embedding backend refuses this text"}}
            data = [
                {"object": "embedding", "index": i, "embedding": fake_embedding(model, t)} for i, t in enumerate(inputs)
            ]
            n = sum(len(words(t)) for t in inputs)
            return 200, {"object": "list", "model": model, "data": data,
                         "usage": {"prompt_tokens": n, "total_tokens": n}}
        if path == "/v1/chat/completions":
            if self.fail_chat:
                return 500, {"error": {"message": "chat backend down"}}
            messages = req.get("messages") or []
            system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
            user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
            if "You file notes" in system:  # note annotation: title, tags, summary as JSON
                first = words(user)[:3]
                content = json.dumps({
                    "title": "Filed: " + " ".join(first),
                    "tags": ["Fake", "notes"],
                    "summary": f"A note of {len(words(user))} words.",
                })
                return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
            content = "\n".join(f"{i}. {v}" for i, v in enumerate(self.variants, 1))
            usage = {"prompt_tokens": len(words(system)) + len(words(user)), "completion_tokens": len(words(content))}
            return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                         "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}}
        if path == "/rerank":
            if self.fail_rerank:
                return 500, {"detail": "rerank backend down"}
            docs = [d if isinstance(d, str) else (d or {}).get("text", "") for d in req.get("documents") or []]
            word = self.rerank_word.lower()
            results = [
                {"index": i, "relevance_score": 1.0 if word and word in d.lower() else 0.0} for i, d in enumerate(docs)
            ]
            return 200, {"results": results}
        return 404, {"detail": "not found"}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModels  # set on the subclass made by FakeModels.start
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        rec = Request(path=self.path, body=body, started=time.monotonic())
        with self.fake._lock:
            self.fake.requests.append(rec)
        if self.path == "/v1/embeddings" and self.fake.embed_delay and isinstance(body, dict):
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else (inputs or [])
            time.sleep(self.fake.embed_delay * sum(1 for t in inputs if t != PROBE))
        status, resp = self.fake.answer(self.path, body)
        rec.status = status
        usage = resp.get("usage") if isinstance(resp, dict) else None
        rec.tokens = usage["total_tokens"] if usage else estimated_tokens(body)
        rec.ended = time.monotonic()
        data = json.dumps(resp).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def do_GET(self):  # noqa: N802
        self.send_error(404)

    def log_message(self, format, *args):  # keep pytest output clean
        pass
