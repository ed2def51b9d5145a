"""Chat end to end (docs/chat.md, seed 003 §5.1–5.3): the real binary answers
``POST /api/v1/chat`` through a scriptable loopback fake of an OpenAI-compatible provider
(fake_llm.py), with real knowledge bases, real MCP upstreams and real HTTP tools.

Covered, each time with the event order and payloads checked (``event:`` names equal
``data.type``; ``conversation`` first, ``rag_source`` once right after it when knowledge bases
are searched, ``done`` or ``error`` last, every ``tool_result`` answering a ``tool_call``):

- RAG: a knowledge base with a real multi-page PDF ($QUARRY_TEST_DOCS) and a Markdown file;
  ``rag_source`` entries (index, content, score, source, page, docid, document_id,
  knowledge_base), the numbered passages and the citing instruction in the system prompt the
  provider receives, ``RAG_TOP_K`` bounding them, deltas adding up to the scripted answer.
- Follow-ups: the question rewritten by a non-streaming call that sees the earlier turn,
  ``done.retrieval_query``, the stored history sent to the model, knowledge bases remembered.
- The tool loop: server-everything over stdio and custom HTTP tools over two rounds, two
  parallel interleaved calls in one round, the five-round cap (and ``max_tool_rounds``),
  failing (HTTP 500), unknown and hanging tools (``QUARRY_CHAT_TOOL_TIMEOUT``, the upstream
  cancelled), tool calls that end with ``finish_reason: stop`` (Ollama).
- Client disconnects (during a tool call and during the provider's stream): the upstream and
  the provider see the cancellation, the answer is stored ``interrupted``.
- Provider failures: 429 then success (retried), a persistent 500 (``provider_error``), a
  provider that is down (``provider_unavailable``), the same as HTTP 502/503 with
  ``stream: false``; ``finish_reason: length``.
- ``stream: false`` answers; the built-in ``web_search`` against a loopback DuckDuckGo-shaped
  page, and its per-user toggle; two token users who cannot see each other's conversations,
  knowledge bases or tools; the conversation endpoints; bad requests (nothing stored) and a
  server without a chat model (503).

Set up like the other interop tests (conftest.py); the RAG tests need $QUARRY_TEST_DOCS.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from conftest import QuarryHome, QuarryServer, backend, everything_cmd, free_port, make_home, start_server, settled
from fake_llm import FakeLLM

HERE = Path(__file__).parent
HANGING = HERE / "upstreams" / "hanging_server.py"
DOCS = Path(os.environ["QUARRY_TEST_DOCS"]) if os.environ.get("QUARRY_TEST_DOCS") else None

MODEL = "fake-chat"
API_KEY = "sk-fake-chat-key-5e0c1d"  # must reach the provider, never a log
TOP_K = 3  # RAG_TOP_K of the main server
PDF_NAME = "shinyama-paraphrase.pdf"
MD_NAME = "field-notes.md"
MD_TEXT = "# Field notes\n\nThe quokka is a small marsupial of Rottnest Island; it smiles at visitors.\n"
PDF_QUESTION = "What is paraphrase acquisition from comparable news articles?"
EVENT_TYPES = {"conversation", "rag_source", "delta", "tool_call", "tool_result", "done", "error"}
READ_TIMEOUT = 60  # seconds any single read may wait: a hang fails instead of blocking


# ---------------------------------------------------------------------------------------------
# Server-Sent Events.


@dataclass
class Ev:
    type: str
    data: Any
    t: float  # time.monotonic() when it arrived


def read_events(resp: requests.Response, deadline: float | None = None):
    """Yields the events of a text/event-stream response, checking each one's shape: an
    ``event:`` line whose name equals ``data.type``, and a data object ``{"type", "data"}``."""
    deadline = deadline or time.monotonic() + 120
    name, data = None, []
    for raw in resp.iter_lines(chunk_size=256):
        assert time.monotonic() < deadline, "the event stream did not end in time"
        line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if line == "":
            if data:
                payload = json.loads("\n".join(data))
                assert isinstance(payload, dict) and set(payload) == {"type", "data"}, payload
                assert name == payload["type"], f"event: {name!r} but data.type {payload['type']!r}"
                assert payload["type"] in EVENT_TYPES, payload
                yield Ev(payload["type"], payload["data"], time.monotonic())
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field_, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field_ == "event":
            name = value
        elif field_ == "data":
            data.append(value)
    assert not data, f"the stream ended inside an event: {data}"


@dataclass
class Chat:
    events: list[Ev]
    response: requests.Response

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, t: str) -> list[Any]:
        return [e.data for e in self.events if e.type == t]

    def one(self, t: str) -> Any:
        got = self.of(t)
        assert len(got) == 1, (t, self.types)
        return got[0]

    @property
    def conversation(self) -> dict:
        return self.one("conversation")

    @property
    def done(self) -> dict:
        return self.one("done")

    @property
    def text(self) -> str:
        return "".join(d["content"] for d in self.of("delta"))


def auth(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


def post_chat(srv: QuarryServer, body: Any, token: str | None = None, stream: bool = True) -> requests.Response:
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    headers = {"Content-Type": "application/json", **auth(token)}
    if stream:
        headers["Accept"] = "text/event-stream"
    return requests.post(srv.url("/api/v1/chat"), data=data, headers=headers, stream=stream, timeout=(10, READ_TIMEOUT))


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def chat(srv: QuarryServer, body: dict, token: str | None = None, rag: bool | None = None, ok: bool = True) -> Chat:
    """One streamed chat, read to its end and checked (see :func:`check_stream`)."""
    body = {"stream": True, **body}
    r = post_chat(srv, body, token)
    assert r.status_code == 200, (r.status_code, r.text[:2000])
    assert r.headers.get("Content-Type", "").startswith("text/event-stream"), dict(r.headers)
    with r:
        events = list(read_events(r))
    c = Chat(events, r)
    check_stream(c, rag=bool(body.get("kb_ids")) if rag is None else rag)
    if ok:
        assert c.types[-1] == "done", (c.types, c.of("error"))
    return c


def check_stream(c: Chat, rag: bool) -> None:
    types = c.types
    assert types and types[0] == "conversation", types
    conv = c.events[0].data
    assert isinstance(conv["id"], str) and conv["id"] and isinstance(conv["message_id"], str) and conv["message_id"], conv
    assert isinstance(conv["title"], str) and conv["title"].strip(), conv
    assert types.count("conversation") == 1, types
    terminal = [i for i, t in enumerate(types) if t in ("done", "error")]
    assert terminal == [len(types) - 1], f"exactly one done/error, last: {types}"
    if rag:
        assert types[1] == "rag_source" and types.count("rag_source") == 1, types
        assert isinstance(c.events[1].data, list), c.events[1].data
    else:
        assert "rag_source" not in types, types
    calls: dict[str, dict] = {}
    answered: set[str] = set()
    last_round = 0
    for e in c.events:
        if e.type == "delta":
            assert set(e.data) >= {"content"} and isinstance(e.data["content"], str), e.data
        elif e.type == "tool_call":
            d = e.data
            assert {"id", "name", "arguments", "status", "tool", "round"} <= set(d), d
            assert d["status"] == "calling" and d["id"] not in calls, d
            assert isinstance(d["arguments"], dict), d
            assert isinstance(d["round"], int) and d["round"] >= max(1, last_round), (d, last_round)
            last_round = d["round"]
            calls[d["id"]] = d
        elif e.type == "tool_result":
            d = e.data
            assert {"id", "name", "status", "result", "tool", "round", "duration_ms"} <= set(d), d
            assert d["id"] in calls and d["id"] not in answered, f"tool_result without its tool_call: {d}"
            call = calls[d["id"]]
            assert (d["name"], d["tool"], d["round"]) == (call["name"], call["tool"], call["round"]), (d, call)
            assert d["status"] in ("success", "error") and isinstance(d["result"], str), d
            assert isinstance(d["duration_ms"], (int, float)) and d["duration_ms"] >= 0, d
            answered.add(d["id"])
    if types[-1] == "done":
        done = c.events[-1].data
        assert set(calls) == answered, f"tool calls without results: {set(calls) - answered}"
        assert {"conversation_id", "message_id", "finish_reason", "rounds", "tool_rounds", "usage", "retrieval_query"} <= set(done), done
        assert (done["conversation_id"], done["message_id"]) == (conv["id"], conv["message_id"]), (done, conv)
        assert done["rounds"] >= 1 and 0 <= done["tool_rounds"] < done["rounds"] + 1, done
        assert done["tool_rounds"] == len({d["round"] for d in calls.values()}), (done, calls)
        u = done["usage"]
        assert all(isinstance(u.get(k), int) and u[k] >= 0 for k in ("prompt_tokens", "completion_tokens", "total_tokens")), u
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
    else:
        err = c.events[-1].data
        assert {"message", "code", "status"} <= set(err) and isinstance(err["message"], str) and err["message"], err
        assert err["code"] in ("provider_error", "provider_unavailable", "internal"), err


def assert_error(r: requests.Response, status: int, *fragments: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:2000])
    assert r.headers.get("Content-Type", "").startswith("application/json"), dict(r.headers)
    body = r.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    assert body.get("status_code") == status, body
    for f in fragments:
        assert f.lower() in body["detail"].lower(), (f, body["detail"])
    return body


def content_text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def readable(result: str) -> str:
    """A tool result's text with any JSON taken apart: its strings, one per line (so checks
    for a title with quotes do not depend on JSON escaping)."""
    try:
        parsed = json.loads(result)
    except ValueError:
        return result
    out: list[str] = []

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif v is not None:
            out.append(str(v))

    walk(parsed)
    return "\n".join(out)


def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def fed_back(req, expected: list[tuple[str, str, dict, str]]) -> None:
    """``req`` (a request the fake got) holds an assistant message whose ``tool_calls`` are
    ``expected`` (id, function name, arguments) in order, followed by one ``tool`` message
    per call, in the same order, whose content contains the expected fragment."""
    msgs = req.messages
    ids = [e[0] for e in expected]
    at = next((i for i, m in enumerate(msgs) if m.get("role") == "assistant"
               and [tc.get("id") for tc in (m.get("tool_calls") or [])] == ids), None)
    assert at is not None, f"no assistant message with tool_calls {ids} in {json.dumps(msgs)[:3000]}"
    for tc, (cid, name, args, _) in zip(msgs[at]["tool_calls"], expected, strict=True):
        assert tc.get("type") == "function" and tc["function"]["name"] == name, tc
        assert json.loads(tc["function"]["arguments"]) == args, tc
    tools = msgs[at + 1 : at + 1 + len(expected)]
    assert [m.get("role") for m in tools] == ["tool"] * len(expected), json.dumps(msgs[at:])[:3000]
    for m, (cid, _, _, fragment) in zip(tools, expected, strict=True):
        assert m.get("tool_call_id") == cid, m
        assert fragment in content_text(m), (fragment, m)


# ---------------------------------------------------------------------------------------------
# Loopback services: the provider fake, HTTP tool targets, a DuckDuckGo-shaped search page.


class Loopback:
    """A ThreadingHTTPServer on 127.0.0.1:0 answering with ``handle(method, path, body)``."""

    def __init__(self, handle):
        self.seen: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
                entry = {"method": self.command, "path": self.path, "body": body, "headers": dict(self.headers)}
                outer.seen.append(entry)
                status, ctype, data = handle(self.command, self.path, body)
                data = data.encode() if isinstance(data, str) else data
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def tool_target(method: str, path: str, body: str):
    if path.startswith("/fail"):
        return 500, "text/plain", "upstream exploded: the lookup backend is on fire"
    if path.startswith("/lookup/"):
        q = path.split("/lookup/", 1)[1].split("?")[0]
        return 200, "application/json", json.dumps({"answer": f"lookup says {q}-42"})
    return 404, "text/plain", "no such path"


DDG_PAGE = """<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
<head><meta http-equiv="content-type" content="text/html; charset=UTF-8"><title>{q} at DuckDuckGo</title></head>
<body>
<div id="links" class="results">
  <div class="result results_links results_links_deep result--ad ">
    <div class="links_main links_deep result__body">
      <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;u3=x">Sponsored <b>thing</b></a></h2>
      <a class="result__snippet" href="https://duckduckgo.com/y.js?ad_domain=ads.example">Buy now.</a>
    </div>
  </div>
  <div class="result results_links results_links_deep web-result ">
    <div class="links_main links_deep result__body">
      <h2 class="result__title">
        <a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fa&amp;rut=x">Example <b>A</b></a>
      </h2>
      <a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fa&amp;rut=x">Snippet &amp; <b>text</b> about the quarry chat</a>
    </div>
  </div>
  <div class="result results_links results_links_deep web-result ">
    <div class="links_main links_deep result__body">
      <h2 class="result__title">
        <a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fb%3Fx%3D1%26y%3D2&amp;rut=y">Second &quot;B&quot; page</a>
      </h2>
      <a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fb%3Fx%3D1%26y%3D2&amp;rut=y">More words here.</a>
    </div>
  </div>
</div>
</body></html>
"""


def ddg_target(method: str, path: str, body: str):
    parts = urlsplit(path)
    if not parts.path.startswith("/html"):
        return 404, "text/plain", "not found"
    q = (parse_qs(body).get("q") or parse_qs(parts.query).get("q") or [""])[0]
    return 200, "text/html; charset=UTF-8", DDG_PAGE.replace("{q}", q)


def ddg_queries(ddg: Loopback) -> list[str]:
    out = []
    for s in ddg.seen:
        q = parse_qs(s["body"]).get("q") or parse_qs(urlsplit(s["path"]).query).get("q") or []
        out.extend(q)
    return out


# ---------------------------------------------------------------------------------------------
# Homes and servers.


def chat_env(fake: FakeLLM, **extra: str) -> dict[str, str]:
    return {**fake.env(API_KEY), "QUARRY_OCR": "off", **extra}


def register(srv: QuarryServer, body: dict, token: str | None = None) -> dict:
    r = requests.post(srv.url("/api/v1/mcp/servers"), json=body, headers=auth(token), timeout=120)
    assert r.status_code == 201, r.text
    info = settled(srv, r.json()["data"], auth(token))
    assert info["status"] == "ready", info
    return info


def add_tool(srv: QuarryServer, body: dict, token: str | None = None) -> dict:
    r = requests.post(srv.url("/api/v1/tools"), json=body, headers=auth(token), timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["data"]


def get_conversation(srv: QuarryServer, cid: str, token: str | None = None) -> requests.Response:
    return requests.get(srv.url(f"/api/v1/conversations/{cid}"), headers=auth(token), timeout=30)


def conversation(srv: QuarryServer, cid: str, token: str | None = None) -> dict:
    r = get_conversation(srv, cid, token)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body.get("success") is True, body
    return body["data"]


def conversations(srv: QuarryServer, token: str | None = None) -> dict:
    r = requests.get(srv.url("/api/v1/conversations"), headers=auth(token), timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body.get("success") is True and isinstance(body["data"], list), body
    return body


def wait_message_status(srv: QuarryServer, cid: str, mid: str, status: str, token: str | None = None, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    msg = None
    while time.monotonic() < deadline:
        msgs = conversation(srv, cid, token)["messages"]
        msg = next((m for m in msgs if m["id"] == mid), None)
        if msg is not None and msg["status"] == status:
            return msg
        time.sleep(0.1)
    pytest.fail(f"message {mid} of {cid} is not {status!r} after {timeout} s: {msg}")


def wait_file(path: Path, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text() == text:
            return
        time.sleep(0.05)
    pytest.fail(f"{path} never said {text!r} within {timeout} s (exists: {path.exists()})")


@dataclass
class World:
    """The module's main server: the machine's owner (open mode), chat through the fake,
    everything + hanging (stdio) and two custom HTTP tools registered."""

    srv: QuarryServer
    home: QuarryHome
    fake: FakeLLM
    target: Loopback
    ddg: Loopback
    mark: Path  # hanging's $HANG_CANCEL_MARK
    started: Path  # hanging's $HANG_STARTED_MARK
    root: Path
    extra: list = field(default_factory=list)


@pytest.fixture(scope="module")
def fake():
    f = FakeLLM.start()
    yield f
    f.stop()


@pytest.fixture(autouse=True)
def fresh_fake(fake):
    """Every test starts with an empty script and no recorded requests."""
    fake.reset()
    yield
    fake.reset()


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM):
    root = tmp_path_factory.mktemp("chat")
    target = Loopback(tool_target)
    ddg = Loopback(ddg_target)
    mark = root / "hang-cancelled"
    started = root / "hang-started"
    env = chat_env(fake, RAG_TOP_K=str(TOP_K), QUARRY_WEB_SEARCH_URL=ddg.url("/html/"))
    home = make_home(quarry_bin, corpus, root / "home", env=env)
    srv = start_server(home, "--chat-model", f"openai:{MODEL}", logdir=root / "logs")
    try:
        register(srv, {"name": "everything", "transport_type": "stdio", "config": everything_cmd()})
        register(srv, {"name": "hanging", "transport_type": "stdio", "config": f"{sys.executable} {HANGING}",
                       "env": {"HANG_CANCEL_MARK": str(mark), "HANG_STARTED_MARK": str(started)}})
        add_tool(srv, {"name": "lookup", "description": "Looks a word up in the team's dictionary",
                       "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                       "http_url": target.url("/lookup/{{q}}"), "http_method": "GET"})
        add_tool(srv, {"name": "broken", "description": "A lookup whose backend fails",
                       "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                       "http_url": target.url("/fail?q={{q}}"), "http_method": "GET"})
        yield World(srv=srv, home=home, fake=fake, target=target, ddg=ddg, mark=mark, started=started, root=root)
    finally:
        try:
            srv.stop()
        finally:
            target.stop()
            ddg.stop()
    assert API_KEY not in srv.stderr(), "the provider's API key was logged"


def make_kb(srv: QuarryServer, name: str, files: list[tuple[str, bytes]]) -> dict:
    """Creates knowledge base `name`, uploads `files` and waits until every one is ready."""
    r = requests.post(srv.url("/api/v1/knowledge-bases"), json={"name": name}, timeout=30)
    assert r.status_code == 201, r.text
    info = r.json()["data"]
    parts = [("files", (fname, data, "application/octet-stream")) for fname, data in files]
    r = requests.post(srv.url(f"/api/v1/knowledge-bases/{info['id']}/documents"), files=parts, timeout=60)
    assert r.status_code == 202, r.text
    ids = [o["document"]["id"] for o in r.json()["data"]]
    deadline = time.monotonic() + 180
    while True:
        docs = requests.get(srv.url(f"/api/v1/knowledge-bases/{info['id']}/documents"), timeout=30).json()["data"]
        by_id = {d["id"]: d for d in docs}
        if all(by_id.get(i, {}).get("status") in ("ready", "failed") for i in ids):
            break
        assert time.monotonic() < deadline, docs
        time.sleep(0.2)
    for i in ids:
        assert by_id[i]["status"] == "ready", by_id[i]
    return {"id": info["id"], "name": info["name"], "docs": {by_id[i]["file_name"]: by_id[i] for i in ids}}


def pdf_bytes() -> bytes | None:
    pdf = DOCS / "pdf" / "en-naacl06-shinyama.pdf" if DOCS else None
    return pdf.read_bytes() if pdf and pdf.is_file() else None


@pytest.fixture(scope="module")
def kb(world: World) -> dict:
    """Knowledge base `handbook` on the main server: a Markdown file, and a real multi-page
    PDF when $QUARRY_TEST_DOCS is there; every document ready."""
    files = [(MD_NAME, MD_TEXT.encode())]
    pdf = pdf_bytes()
    if pdf:
        files.append((PDF_NAME, pdf))
    return {**make_kb(world.srv, "handbook", files), "has_pdf": bool(pdf)}


def need_pdf(kb: dict) -> None:
    if not kb["has_pdf"]:
        pytest.skip("skipped: QUARRY_TEST_DOCS not set (scripts/test fetches the real documents)")


def check_sources(sources: list[dict], kb: dict) -> None:
    assert 1 <= len(sources) <= TOP_K, sources
    assert [s["index"] for s in sources] == list(range(1, len(sources) + 1)), sources
    for s in sources:
        assert {"index", "content", "score", "source", "page", "docid", "document_id", "knowledge_base", "file"} <= set(s), s
        assert isinstance(s["content"], str) and s["content"].strip(), s
        assert isinstance(s["score"], (int, float)) and 0 < s["score"] <= 1, s
        assert s["source"] in kb["docs"], (s["source"], list(kb["docs"]))
        doc = kb["docs"][s["source"]]
        assert s["document_id"] == doc["id"], (s, doc)
        assert isinstance(s["docid"], str) and s["docid"].startswith("#"), s
        assert s["knowledge_base"] in (kb["name"], kb["id"]), s
        assert isinstance(s["file"], str) and s["file"].endswith(s["source"]), s
        if s["source"].endswith(".pdf"):
            assert isinstance(s["page"], int) and not isinstance(s["page"], bool) and s["page"] >= 1, s
        else:
            assert s["page"] is None, s


def system_text(req) -> str:
    return "\n".join(content_text(m) for m in req.messages if m.get("role") == "system")


def check_prompt_has_passages(req, sources: list[dict]) -> None:
    sys_text = system_text(req)
    assert sys_text, f"no system message: {json.dumps(req.messages)[:2000]}"
    assert re.search(r"\bcit(e|es|ing|ation)", sys_text, re.I), f"no instruction to cite: {sys_text[:2000]}"
    flat = norm(sys_text)
    lines = sys_text.splitlines()
    for s in sources:
        # The passage's number and its file name are given together.
        assert any(f"[{s['index']}]" in line and s["source"] in line for line in lines), (s["index"], s["source"], sys_text[:3000])
        assert norm(s["content"])[:60] in flat, (s["content"][:60], sys_text[:3000])
        if s["page"] is not None:
            assert re.search(rf"\b{s['page']}\b", sys_text), (s["page"], sys_text[:3000])


# ---------------------------------------------------------------------------------------------
# RAG.


def test_rag_answer_streams_sources_then_deltas(world: World, kb: dict):
    need_pdf(kb)
    fake, srv = world.fake, world.srv
    answer = "Paraphrases are acquired from comparable news articles [1], matched by named entities [2]."
    fake.script([{"text": answer, "pieces": 5}])
    c = chat(srv, {"messages": user(PDF_QUESTION), "kb_ids": [kb["name"]]})
    assert c.types[0:2] == ["conversation", "rag_source"] and c.types[-1] == "done", c.types
    assert set(c.types[2:-1]) == {"delta"}, c.types
    sources = c.events[1].data
    check_sources(sources, kb)
    assert any(s["source"] == PDF_NAME for s in sources), sources
    assert c.text == answer
    done = c.done
    assert done["finish_reason"] == "stop" and done["rounds"] == 1 and done["tool_rounds"] == 0, done
    assert done["retrieval_query"] == PDF_QUESTION, done
    # What the provider got: one streaming request (a first turn needs no rewrite).
    assert fake.completions() == [], "a first turn must not be rewritten"
    [req] = fake.streamed()
    assert req.body["model"] == MODEL and req.body["stream"] is True, req.body
    assert req.headers.get("authorization") == f"Bearer {API_KEY}", req.headers
    check_prompt_has_passages(req, sources)
    assert req.messages[-1] == {"role": "user", "content": PDF_QUESTION}, req.messages[-1]
    if req.usage:  # the server asked for usage: one round, so done reports exactly the provider's
        assert done["usage"] == req.usage, (done["usage"], req.usage)
    # The default tool set: the hub's tools, never Quarry's own knowledge tools.
    names = req.tool_names
    assert "everything__echo" in names and "custom__lookup" in names, names
    assert any(n == "web_search" or n.endswith("__web_search") for n in names), names
    assert not any(n.startswith("knowledge__") for n in names), names

    # An unpaged source: the Markdown file (page null), by knowledge base id this time.
    fake.reset()
    fake.script([{"text": "Quokkas smile [1].", "style": "deepseek"}])
    c = chat(srv, {"messages": user("Where does the quokka marsupial live?"), "kb_ids": [kb["id"]]})
    sources = c.events[1].data
    check_sources(sources, kb)
    md = [s for s in sources if s["source"] == MD_NAME]
    assert md and md[0]["page"] is None and "quokka" in md[0]["content"], sources
    check_prompt_has_passages(fake.streamed()[0], sources)
    assert c.text == "Quokkas smile [1]."


def test_rag_top_k_passages_of_one_document(quarry_bin: Path, corpus: Path, tmp_path: Path, fake: FakeLLM):
    """RAG_TOP_K=2 and RAG_MIN_SCORE=0 over one PDF whose word "metacluster" is in several
    chunks: exactly two passages (distinct chunks of the PDF) reach the model, numbered [1]
    and [2] — retrieval keeps passages, not one hit per document."""
    pdf = pdf_bytes()
    if pdf is None:
        pytest.skip("skipped: QUARRY_TEST_DOCS not set (scripts/test fetches the real documents)")
    env = chat_env(fake, RAG_TOP_K="2", RAG_MIN_SCORE="0")
    home = make_home(quarry_bin, corpus, tmp_path / "home", env=env)
    srv = start_server(home, "--chat-model", f"openai:{MODEL}", logdir=tmp_path / "logs")
    try:
        small = {**make_kb(srv, "papers", [(PDF_NAME, pdf)]), "has_pdf": True}
        doc_id = small["docs"][PDF_NAME]["id"]
        chunks = requests.get(srv.url(f"/api/v1/knowledge-bases/papers/documents/{doc_id}/chunks"), timeout=30).json()["data"]
        matching = [c for c in chunks if "metacluster" in c["content"].lower()]
        assert len(matching) >= 3, "the PDF should have several chunks with the word"
        fake.script([{"text": "A cluster of basic clusters [1][2]."}])
        c = chat(srv, {"messages": user("What is a metacluster?"), "kb_ids": ["papers"], "use_tools": False})
    finally:
        srv.stop()
    sources = c.events[1].data
    check_sources(sources, small)
    assert len(sources) == 2, f"RAG_TOP_K=2 with {len(matching)} matching chunks gave {len(sources)} passage(s): " + repr(
        [(s["index"], s["source"], s["page"], s["score"]) for s in sources])
    assert sources[0]["content"] != sources[1]["content"], sources
    assert all(s["source"] == PDF_NAME for s in sources)
    [req] = fake.streamed()
    sys_text = system_text(req)
    numbered = [line for line in sys_text.splitlines() if PDF_NAME in line and re.search(r"\[\d+\]", line)]
    assert len(numbered) == 2 and "[1]" in numbered[0] and "[2]" in numbered[1], sys_text[:3000]
    assert not req.offers_tools(), "use_tools: false must offer no tools"


def test_follow_up_is_rewritten_from_the_history(world: World, kb: dict):
    need_pdf(kb)
    fake, srv = world.fake, world.srv
    a1 = "It mines paraphrases from comparable articles [1]."
    fake.script([{"text": a1}])
    first = chat(srv, {"messages": user(PDF_QUESTION), "kb_ids": [kb["name"]]})
    cid = first.conversation["id"]

    fake.reset()
    q2 = "And how is it evaluated?"
    rewrite = "How is paraphrase acquisition from comparable news articles evaluated?"
    a2 = "By judging the acquired paraphrases by hand [1]."
    fake.script_complete([rewrite])
    fake.script([{"text": a2}])
    second = chat(srv, {"messages": user(q2), "conversation_id": cid, "kb_ids": [kb["name"]]})
    assert second.conversation["id"] == cid and second.conversation["message_id"] != first.conversation["message_id"]
    assert second.done["retrieval_query"] == rewrite, second.done
    check_sources(second.events[1].data, kb)
    [rw] = fake.completions()
    assert rw.body.get("stream") in (None, False), rw.body
    seen = rw.text()
    assert PDF_QUESTION in seen and a1 in seen and q2 in seen, seen[:3000]
    [req] = fake.streamed()
    convo = [(m["role"], content_text(m)) for m in req.messages if m.get("role") != "system"]
    assert convo == [("user", PDF_QUESTION), ("assistant", a1), ("user", q2)], convo
    check_prompt_has_passages(req, second.events[1].data)
    assert second.text == a2

    # A third turn without kb_ids: the conversation remembers its knowledge base.
    fake.reset()
    rewrite3 = "Which news sources does paraphrase acquisition use?"
    fake.script_complete([rewrite3])
    fake.script([{"text": "Several newspapers [1]."}])
    third = chat(srv, {"messages": user("Which sources?"), "conversation_id": cid}, rag=True)
    assert third.done["retrieval_query"] == rewrite3, third.done
    check_prompt_has_passages(fake.streamed()[0], third.events[1].data)

    # The rewrite fails: the question is used as it is.
    fake.reset()
    q4 = "What about metaclusters of comparable articles?"
    fake.script_complete([{"status": 500}, {"status": 500}])
    fake.script([{"text": "They group basic clusters [1]."}])
    fourth = chat(srv, {"messages": user(q4), "conversation_id": cid}, rag=True)
    assert fake.completions(), "the follow-up was not sent for rewriting"
    assert fourth.done["retrieval_query"] == q4, fourth.done
    assert fourth.text == "They group basic clusters [1]."

    msgs = conversation(srv, cid)["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 4, msgs
    assert [m["content"] for m in msgs[1::2]] == [a1, a2, "Several newspapers [1].", "They group basic clusters [1]."]
    assert all(m["status"] == "complete" for m in msgs), msgs


# ---------------------------------------------------------------------------------------------
# The tool loop.


def test_two_round_tool_loop_with_mcp_and_http_tools(world: World):
    fake, srv = world.fake, world.srv
    before = len(world.target.seen)
    fake.script([
        {"text": "Let me check. ", "tool_calls": [{"id": "call_echo_1", "tool": "echo", "arguments": {"message": "hello from round one"}}], "split": 4},
        {"tool_calls": [{"id": "call_lookup_2", "tool": "lookup", "arguments": {"q": "zebra"}}], "style": "deepseek"},
        {"text": "The echo said hello and the lookup says zebra-42.", "pieces": 4},
    ])
    c = chat(srv, {"messages": user("Echo something, then look up zebra.")})
    assert c.types[0] == "conversation" and c.types[-1] == "done", c.types
    calls, results = c.of("tool_call"), c.of("tool_result")
    assert [x["id"] for x in calls] == ["call_echo_1", "call_lookup_2"], calls
    # Each round: the call, then its result, then the next round.
    ordered = [e.type for e in c.events if e.type in ("tool_call", "tool_result")]
    assert ordered == ["tool_call", "tool_result", "tool_call", "tool_result"], c.types
    echo_call, lookup_call = calls
    assert echo_call == {**echo_call, "name": "echo", "tool": "everything.echo", "status": "calling", "round": 1,
                         "arguments": {"message": "hello from round one"}}, echo_call
    assert lookup_call == {**lookup_call, "name": "lookup", "tool": "custom.lookup", "status": "calling", "round": 2,
                           "arguments": {"q": "zebra"}}, lookup_call
    echo_res, lookup_res = results
    assert echo_res["status"] == "success" and "hello from round one" in echo_res["result"], echo_res
    assert lookup_res["status"] == "success" and "lookup says zebra-42" in lookup_res["result"], lookup_res
    assert world.target.seen[before:] and world.target.seen[-1]["path"] == "/lookup/zebra", world.target.seen[before:]
    assert c.text == "Let me check. The echo said hello and the lookup says zebra-42."
    done = c.done
    assert done["rounds"] == 3 and done["tool_rounds"] == 2 and done["finish_reason"] == "stop", done
    # What the model saw: each round's calls and results in the next request.
    r1, r2, r3 = fake.streamed()
    assert r1.offers_tools() and r2.offers_tools(), "tools stay offered within the cap"
    said = [m for m in r2.messages if m.get("role") == "assistant"]
    assert said and said[-1].get("content") == "Let me check. ", "text before the calls goes back with them"
    fed_back(r2, [("call_echo_1", "everything__echo", {"message": "hello from round one"}, echo_res["result"])])
    lookup_name = FakeLLM.resolve_tool("lookup", r2.body)
    assert lookup_name == "custom__lookup", r2.tool_names
    fed_back(r3, [("call_echo_1", "everything__echo", {"message": "hello from round one"}, echo_res["result"])])
    fed_back(r3, [("call_lookup_2", lookup_name, {"q": "zebra"}, lookup_res["result"])])
    assert fake.pending() == 0


def test_parallel_interleaved_tool_calls(world: World):
    fake, srv = world.fake, world.srv
    fake.script([
        {"tool_calls": [{"id": "call_par_a", "tool": "echo", "arguments": {"message": "first of two"}},
                        {"id": "call_par_b", "tool": "get-sum", "arguments": {"a": 19, "b": 23}}],
         "interleave": True, "split": 3},
        {"text": "Both done."},
    ])
    c = chat(srv, {"messages": user("Do two things at once."), "tools": ["everything.echo", "everything.get-sum"]})
    calls = c.of("tool_call")
    assert sorted(x["id"] for x in calls) == ["call_par_a", "call_par_b"] and {x["round"] for x in calls} == {1}, calls
    by_id = {x["id"]: x for x in c.of("tool_result")}
    assert set(by_id) == {"call_par_a", "call_par_b"}
    assert by_id["call_par_a"]["status"] == "success" and "first of two" in by_id["call_par_a"]["result"], by_id
    assert by_id["call_par_b"]["status"] == "success" and "42" in by_id["call_par_b"]["result"], by_id
    assert by_id["call_par_b"]["tool"] == "everything.get-sum" and by_id["call_par_b"]["name"] == "get-sum"
    assert c.done["tool_rounds"] == 1 and c.done["rounds"] == 2
    r1, r2 = fake.streamed()
    assert sorted(r1.tool_names) == ["everything__echo", "everything__get-sum"], r1.tool_names
    fed_back(r2, [("call_par_a", "everything__echo", {"message": "first of two"}, "first of two"),
                  ("call_par_b", "everything__get-sum", {"a": 19, "b": 23}, "42")])


def test_five_tool_rounds_then_the_model_must_answer(world: World):
    fake, srv = world.fake, world.srv
    fake.script([{"tool_calls": [{"id": f"call_cap_{i}", "tool": "echo", "arguments": {"message": f"round {i}"}}]}
                 for i in range(1, 6)] + [{"text": "Enough tools; here is the answer."}])
    c = chat(srv, {"messages": user("Keep calling echo."), "tools": ["everything.echo"]})
    calls = c.of("tool_call")
    assert [x["round"] for x in calls] == [1, 2, 3, 4, 5], calls
    assert [x["status"] for x in c.of("tool_result")] == ["success"] * 5
    assert c.text == "Enough tools; here is the answer."
    assert c.done["tool_rounds"] == 5 and c.done["rounds"] == 6, c.done
    reqs = fake.streamed()
    assert len(reqs) == 6, len(reqs)
    for r in reqs[:5]:
        assert r.tool_names == ["everything__echo"], r.tool_names
    sixth = reqs[5]
    assert not sixth.offers_tools(), f"the 6th request still offers tools: {sixth.body.get('tools')} {sixth.body.get('tool_choice')}"
    assert "tools" not in sixth.body or sixth.body.get("tool_choice") == "none", sixth.body
    fed_back(sixth, [("call_cap_5", "everything__echo", {"message": "round 5"}, "round 5")])
    assert fake.pending() == 0


def test_max_tool_rounds_in_the_request(world: World):
    fake, srv = world.fake, world.srv
    fake.script([{"tool_calls": [{"id": "call_one", "tool": "echo", "arguments": {"message": "only once"}}]},
                 {"text": "One round was all I had."}])
    c = chat(srv, {"messages": user("Call echo as often as you like."), "tools": ["everything.echo"], "max_tool_rounds": 1})
    assert [x["round"] for x in c.of("tool_call")] == [1]
    assert c.done["tool_rounds"] == 1 and c.done["rounds"] == 2, c.done
    r1, r2 = fake.streamed()
    assert r1.offers_tools() and not r2.offers_tools(), (r1.tool_names, r2.body.get("tools"))
    # max_tool_rounds 0: no tools at all.
    fake.reset()
    fake.script([{"text": "No tools today."}])
    c = chat(srv, {"messages": user("Anything?"), "max_tool_rounds": 0})
    assert c.done["tool_rounds"] == 0 and c.done["rounds"] == 1
    assert not fake.streamed()[0].offers_tools()


def test_failing_and_unknown_tools_become_error_results(world: World):
    fake, srv = world.fake, world.srv
    fake.script([
        {"tool_calls": [{"id": "call_broken", "tool": "broken", "arguments": {"q": "x"}}]},
        {"tool_calls": [{"id": "call_ghost", "tool": "no_such_tool", "arguments": {"z": 1}}]},
        {"text": "Both tools failed, sorry."},
    ])
    c = chat(srv, {"messages": user("Try the broken tool, then a ghost.")})
    res = {x["id"]: x for x in c.of("tool_result")}
    broken, ghost = res["call_broken"], res["call_ghost"]
    assert broken["status"] == "error" and "500" in broken["result"], broken
    assert broken["tool"] == "custom.broken" and broken["name"] == "broken", broken
    assert ghost["status"] == "error" and "no_such_tool" in ghost["result"], ghost
    assert ghost["name"] == "no_such_tool", ghost
    assert c.text == "Both tools failed, sorry."
    assert c.done["rounds"] == 3 and c.done["tool_rounds"] == 2, c.done
    _, r2, r3 = fake.streamed()
    fed_back(r2, [("call_broken", "custom__broken", {"q": "x"}, broken["result"])])
    fed_back(r3, [("call_ghost", "no_such_tool", {"z": 1}, "no_such_tool")])


def test_tool_timeout_cancels_the_upstream(quarry_bin: Path, corpus: Path, tmp_path: Path, fake: FakeLLM):
    mark = tmp_path / "hang-cancelled"
    home = make_home(quarry_bin, corpus, tmp_path / "home", env=chat_env(fake, QUARRY_CHAT_TOOL_TIMEOUT="2"))
    srv = start_server(home, "--chat-model", f"openai:{MODEL}", logdir=tmp_path / "logs")
    try:
        register(srv, {"name": "hanging", "transport_type": "stdio", "config": f"{sys.executable} {HANGING}",
                       "env": {"HANG_CANCEL_MARK": str(mark)}})
        fake.script([{"tool_calls": [{"id": "call_hang", "tool": "hang", "arguments": {}}]},
                     {"text": "The tool took too long."}])
        t0 = time.monotonic()
        c = chat(srv, {"messages": user("Wait for the hanging tool."), "tools": ["hanging.hang"]})
        took = time.monotonic() - t0
        call = next(e for e in c.events if e.type == "tool_call")
        result = next(e for e in c.events if e.type == "tool_result")
        assert call.data["tool"] == "hanging.hang" and call.data["name"] == "hang"
        assert result.data["status"] == "error", result.data
        assert re.search(r"time[sd]?[ -]?out", result.data["result"], re.I), result.data
        assert 1.5 <= result.t - call.t <= 8, result.t - call.t
        assert took < 15, took
        assert c.text == "The tool took too long." and c.done["tool_rounds"] == 1
        fed_back(fake.streamed()[1], [("call_hang", "hanging__hang", {}, result.data["result"])])
        wait_file(mark, "cancelled")
    finally:
        srv.stop()


# ---------------------------------------------------------------------------------------------
# Client disconnects.


def test_disconnect_during_a_tool_call_cancels_it(world: World):
    fake, srv = world.fake, world.srv
    world.mark.unlink(missing_ok=True)
    world.started.unlink(missing_ok=True)
    fake.script([{"tool_calls": [{"id": "call_hang_dc", "tool": "hang", "arguments": {}}]},
                 {"text": "never sent"}])
    r = post_chat(srv, {"messages": user("Hang, please."), "tools": ["hanging.hang"], "stream": True})
    assert r.status_code == 200, r.text
    # The generator stays referenced until the test closes the response itself: a dropped
    # generator is closed, and closing it closes the connection, which is the disconnect
    # this test means to make only once the upstream is inside the call.
    events = read_events(r)
    seen = []
    for e in events:
        seen.append(e)
        if e.type == "tool_call":
            break
    assert [e.type for e in seen] == ["conversation", "tool_call"], [e.type for e in seen]
    assert seen[1].data["id"] == "call_hang_dc" and seen[1].data["tool"] == "hanging.hang"
    # The tool_call event goes out before the hub has sent the request upstream; a client
    # that leaves in between cancels a call that never started, with nothing to tell the
    # upstream. Leave once the upstream is inside the call, so its cancellation is what we see.
    wait_file(world.started, "started", timeout=10)
    r.close()
    events.close()
    wait_file(world.mark, "cancelled", timeout=10)
    conv = seen[0].data
    msg = wait_message_status(srv, conv["id"], conv["message_id"], "interrupted")
    assert msg["role"] == "assistant", msg
    time.sleep(0.5)
    assert len(fake.streamed()) == 1, "the loop went on after the client left"
    assert fake.pending() == 1


def test_disconnect_during_the_providers_stream_cancels_it(world: World):
    fake, srv = world.fake, world.srv
    fake.script([{"hang": True}])
    r = post_chat(srv, {"messages": user("Think hard."), "use_tools": False, "stream": True})
    assert r.status_code == 200, r.text
    events = read_events(r)
    first = next(events)
    assert first.type == "conversation", first
    [req] = fake.wait_requests(1)
    r.close()
    assert fake.wait_disconnect(req, timeout=10), "the provider never saw the client leave"
    wait_message_status(srv, first.data["id"], first.data["message_id"], "interrupted")


# ---------------------------------------------------------------------------------------------
# Provider failures and finish reasons.


def test_rate_limit_is_retried(world: World):
    fake, srv = world.fake, world.srv
    fake.script([{"status": 429, "retry_after": 0.2, "body": {"error": {"message": "Rate limit reached", "type": "requests"}}},
                 {"text": "Worth the wait."}])
    c = chat(srv, {"messages": user("Hello?"), "use_tools": False})
    assert c.text == "Worth the wait." and c.done["finish_reason"] == "stop"
    reqs = fake.streamed()
    assert [r.status for r in reqs] == [429, 200], [r.status for r in reqs]
    assert reqs[1].started - reqs[0].started >= 0.15, "the retry did not wait"
    assert reqs[0].body == reqs[1].body


def test_provider_error_after_retries(world: World):
    fake, srv = world.fake, world.srv
    err = {"error": {"message": "fake upstream overloaded (code 7731)", "type": "server_error"}}
    fake.script([{"status": 500, "body": err}, {"status": 500, "body": err}])
    c = chat(srv, {"messages": user("Anyone there?"), "use_tools": False}, ok=False)
    assert c.types == ["conversation", "error"], c.types
    e = c.one("error")
    assert e["code"] == "provider_error" and e["status"] == 500, e
    assert "fake upstream overloaded (code 7731)" in e["message"], e
    assert len(fake.streamed()) == 2, "QUARRY_CHAT_RETRIES=1: one try and one retry"
    assert fake.pending() == 0
    conv = c.conversation
    wait_message_status(srv, conv["id"], conv["message_id"], "failed")
    # The same without streaming: a 502 JSON error.
    fake.reset()
    fake.script([{"status": 500, "body": err}, {"status": 500, "body": err}])
    r = post_chat(srv, {"messages": user("Anyone there?"), "use_tools": False, "stream": False}, stream=False)
    assert_error(r, 502, "fake upstream overloaded (code 7731)")


def test_provider_down(quarry_bin: Path, corpus: Path, tmp_path: Path, fake: FakeLLM):
    closed = free_port()
    env = chat_env(fake, QUARRY_CHAT_BASE_URL=f"http://127.0.0.1:{closed}/v1")
    home = make_home(quarry_bin, corpus, tmp_path / "home", env=env)
    srv = start_server(home, "--chat-model", f"openai:{MODEL}", logdir=tmp_path / "logs")
    try:
        t0 = time.monotonic()
        c = chat(srv, {"messages": user("Is the provider up?")}, ok=False)
        assert time.monotonic() - t0 < 30
        assert c.types == ["conversation", "error"], c.types
        e = c.one("error")
        assert e["code"] == "provider_unavailable", e
        wait_message_status(srv, c.conversation["id"], c.conversation["message_id"], "failed")
        r = post_chat(srv, {"messages": user("Is the provider up?"), "stream": False}, stream=False)
        assert_error(r, 503)
    finally:
        srv.stop()
    assert fake.snapshot() == []


def test_provider_that_goes_silent_times_out(quarry_bin: Path, corpus: Path, tmp_path: Path, fake: FakeLLM):
    """QUARRY_CHAT_TIMEOUT=1 and a provider that stops after its first chunk: the request is
    given up (provider_unavailable), the provider sees the connection go, nothing is retried
    after the first byte."""
    home = make_home(quarry_bin, corpus, tmp_path / "home", env=chat_env(fake, QUARRY_CHAT_TIMEOUT="1"))
    fake.script([{"hang": True}])
    srv = start_server(home, "--chat-model", f"openai:{MODEL}", logdir=tmp_path / "logs")
    try:
        t0 = time.monotonic()
        c = chat(srv, {"messages": user("Are you there?"), "use_tools": False}, ok=False)
        took = time.monotonic() - t0
    finally:
        srv.stop()
    assert c.types == ["conversation", "error"], c.types
    assert c.one("error")["code"] == "provider_unavailable", c.one("error")
    assert took < 10, took
    [req] = fake.streamed()
    assert fake.wait_disconnect(req, timeout=5), "the silent provider's connection was not closed"


def test_too_many_tools_is_refused_naming_the_cap(quarry_bin: Path, corpus: Path, tmp_path: Path, fake: FakeLLM):
    home = make_home(quarry_bin, corpus, tmp_path / "home", env=chat_env(fake))
    srv = start_server(home, "--chat-model", f"openai:{MODEL}", "--max-tools", "3", logdir=tmp_path / "logs")
    try:
        register(srv, {"name": "everything", "transport_type": "stdio", "config": everything_cmd()})
        for body in ({"messages": user("Use everything.")}, {"messages": user("Use everything."), "servers": ["everything"]}):
            for stream in (True, False):
                r = post_chat(srv, {**body, "stream": stream}, stream=stream)
                assert_error(r, 400, "3")
        assert fake.snapshot() == [] and conversations(srv)["total"] == 0
        # Narrowed below the cap: fine, and only those tools are offered.
        fake.script([{"text": "Two tools."}])
        chat(srv, {"messages": user("Use two."), "tools": ["everything.echo", "everything.get-sum"]})
        assert sorted(fake.streamed()[0].tool_names) == ["everything__echo", "everything__get-sum"]
        fake.reset()
        fake.script([{"text": "No tools."}])
        chat(srv, {"messages": user("Use none."), "use_tools": False})
        assert not fake.streamed()[0].offers_tools()
    finally:
        srv.stop()


def test_finish_reason_length_and_model_override(world: World):
    fake, srv = world.fake, world.srv
    fake.script([{"text": "This answer was cut sho", "finish": "length", "style": "deepseek"}])
    c = chat(srv, {"messages": user("Write a long essay."), "model": "fake-chat-long", "use_tools": False})
    assert c.done["finish_reason"] == "length", c.done
    assert c.text == "This answer was cut sho"
    [req] = fake.streamed()
    assert req.body["model"] == "fake-chat-long" and not req.offers_tools(), req.body
    if (req.body.get("stream_options") or {}).get("include_usage"):
        assert c.done["usage"]["total_tokens"] > 0, c.done
    msgs = conversation(srv, c.conversation["id"])["messages"]
    assert msgs[-1]["content"] == "This answer was cut sho"
    # The conversation keeps its model on the next turn.
    fake.script([{"text": "Go on."}])
    chat(srv, {"messages": user("Continue."), "conversation_id": c.conversation["id"], "use_tools": False})
    assert fake.streamed()[-1].body["model"] == "fake-chat-long"


def test_tool_calls_that_end_with_stop_are_executed(world: World):
    """Ollama ends a tool-calling completion with finish_reason "stop"."""
    fake, srv = world.fake, world.srv
    fake.script([{"tool_calls": [{"id": "call_ollama", "tool": "echo", "arguments": {"message": "ollama style"}}], "finish": "stop"},
                 {"text": "Done the Ollama way."}])
    c = chat(srv, {"messages": user("Echo, Ollama style."), "tools": ["everything.echo"]})
    res = c.one("tool_result")
    assert res["id"] == "call_ollama" and res["status"] == "success" and "ollama style" in res["result"], res
    assert c.done["tool_rounds"] == 1 and c.done["rounds"] == 2 and c.done["finish_reason"] == "stop", c.done
    fed_back(fake.streamed()[1], [("call_ollama", "everything__echo", {"message": "ollama style"}, "ollama style")])


# ---------------------------------------------------------------------------------------------
# stream: false.


def test_non_streaming_answer(world: World, kb: dict):
    fake, srv = world.fake, world.srv
    question = "Where does the quokka marsupial live? Echo it too."
    fake.script([{"tool_calls": [{"id": "call_json", "tool": "echo", "arguments": {"message": "json mode"}}]},
                 {"text": "On Rottnest Island [1].", "pieces": 2}])
    r = post_chat(srv, {"messages": user(question), "kb_ids": [kb["name"]], "tools": ["everything.echo"], "stream": False},
                  stream=False)
    assert r.status_code == 200, r.text
    assert r.headers.get("Content-Type", "").startswith("application/json"), dict(r.headers)
    body = r.json()
    assert {"conversation_id", "message_id", "content", "sources", "tool_calls", "finish_reason", "rounds",
            "tool_rounds", "usage", "retrieval_query"} <= set(body), body
    assert body["content"] == "On Rottnest Island [1]."
    check_sources(body["sources"], kb)
    assert any(s["source"] == MD_NAME for s in body["sources"]), body["sources"]
    [tc] = body["tool_calls"]
    assert {"id", "name", "tool", "arguments", "status", "result", "round", "duration_ms"} <= set(tc), tc
    assert (tc["id"], tc["name"], tc["tool"], tc["arguments"], tc["status"], tc["round"]) == (
        "call_json", "echo", "everything.echo", {"message": "json mode"}, "success", 1), tc
    assert "json mode" in tc["result"] and isinstance(tc["duration_ms"], (int, float)) and tc["duration_ms"] >= 0
    assert body["finish_reason"] == "stop" and body["rounds"] == 2 and body["tool_rounds"] == 1, body
    assert body["retrieval_query"] == question
    u = body["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
    stored = conversation(srv, body["conversation_id"])
    msg = stored["messages"][-1]
    assert msg["id"] == body["message_id"] and msg["content"] == body["content"] and msg["status"] == "complete", msg


def test_retrieval_honours_filter_and_as_of(world: World):
    """Chat retrieves only passages of documents the metadata filter matches, and knowledge
    entries as they stood at `as_of` (issue 44); a bad one is refused before the model runs."""
    fake, srv = world.fake, world.srv

    def quka(name: str, args: dict) -> dict:
        r = requests.post(srv.url("/api/v1/mcp"), timeout=30, headers={"X-Resource": "ledger"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}})
        assert r.status_code == 200 and r.json()["result"]["isError"] is False, r.text
        return r.json()["result"]["structuredContent"]

    quka("create_knowledge", {"content": "# Gate code\n\nThe loading bay gate code is 4471.", "key": "gate",
                                      "tags": ["site"]})
    time.sleep(0.05)
    between = int(time.time() * 1000)
    time.sleep(0.05)
    quka("create_knowledge", {"content": "# Gate code\n\nThe loading bay gate code is 9088.", "key": "gate", "tags": ["site"]})
    deadline = time.monotonic() + 60
    while True:  # until the correction is searchable
        r = requests.post(srv.url("/api/v1/knowledge-search"), timeout=30,
                          json={"question": "gate code", "search_mode": "keyword", "min_score": 0})
        if any("9088" in h["content"] for h in r.json()["results"]):
            break
        assert time.monotonic() < deadline, r.text
        time.sleep(0.2)

    def sources(extra: dict) -> list[str]:
        fake.reset()
        fake.script([{"text": "The code [1]."}])
        r = post_chat(srv, {"messages": user("What is the loading bay gate code?"), "kb_ids": ["ledger"],
                            "stream": False, **extra}, stream=False)
        assert r.status_code == 200, r.text
        return [s["content"] for s in r.json()["sources"]]

    assert any("9088" in c for c in sources({})) and not any("4471" in c for c in sources({}))
    past = sources({"as_of": between})
    assert any("4471" in c for c in past) and not any("9088" in c for c in past), past
    assert sources({"filter": {"field": "tags", "operator": "contains", "value": "nosuchtag"}}) == []
    assert any("9088" in c for c in sources({"filter": {"field": "tags", "operator": "contains", "value": "site"}}))
    fake.reset()
    for bad, words in (({"as_of": "someday"}, "as_of"), ({"filter": {"field": "tags", "operator": "like"}}, "operator")):
        r = post_chat(srv, {"messages": user("gate code?"), "kb_ids": ["ledger"], "stream": False, **bad},
                      stream=False)
        assert r.status_code == 400 and words in r.json()["detail"], r.text
    assert fake.streamed() == [] and fake.completions() == [], "a refused chat reached the model"


# ---------------------------------------------------------------------------------------------
# The built-in web_search.


def test_web_search_builtin_and_its_toggle(world: World):
    fake, srv = world.fake, world.srv
    before = len(world.ddg.seen)
    fake.script([{"tool_calls": [{"id": "call_web", "tool": "web_search", "arguments": {"query": "quarry chat test"}}]},
                 {"text": "Found it on example.org."}])
    c = chat(srv, {"messages": user("Search the web for quarry chat test.")})
    call, res = c.one("tool_call"), c.one("tool_result")
    assert call["name"] == "web_search" and call["tool"] == "web.web_search", call
    assert res["status"] == "success", res
    text = readable(res["result"])
    assert "https://example.org/a" in text and "Example A" in text, text
    assert "Snippet & text about the quarry chat" in text, text
    assert "https://example.com/b?x=1&y=2" in text and 'Second "B" page' in text, text
    assert "uddg" not in text and "<b>" not in text and "&amp;" not in text and "&quot;" not in text, text
    assert "quarry chat test" in ddg_queries(world.ddg)[-1:], world.ddg.seen[before:]
    fed_back(fake.streamed()[1], [("call_web", FakeLLM.resolve_tool("web_search", fake.streamed()[0].body),
                                   {"query": "quarry chat test"}, "https://example.org/a")])

    # Switched off for this user: the next chat offers no web_search to the model.
    r = requests.patch(srv.url("/api/v1/tools/builtin/web_search/toggle"), json={"enabled": False}, timeout=30)
    assert r.status_code == 200 and r.json()["data"]["enabled"] is False, r.text
    try:
        fake.reset()
        fake.script([{"text": "No web today."}])
        chat(srv, {"messages": user("Search the web again.")})
        names = fake.streamed()[0].tool_names
        assert names and not any(n == "web_search" or n.endswith("__web_search") for n in names), names
        assert "everything__echo" in names
    finally:
        r = requests.patch(srv.url("/api/v1/tools/builtin/web_search/toggle"), json={"enabled": True}, timeout=30)
        assert r.status_code == 200 and r.json()["data"]["enabled"] is True, r.text


# ---------------------------------------------------------------------------------------------
# Users.


def test_users_cannot_see_each_others_chats(quarry_bin: Path, corpus: Path, tmp_path: Path, fake: FakeLLM):
    home = make_home(quarry_bin, corpus, tmp_path / "home", env=chat_env(fake))

    def cli(*args: str):
        r = home.run(*args, timeout=120)
        assert r.returncode == 0, f"quarry {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return json.loads(r.stdout) if "--json" in args else r.stdout

    tok = {}
    for who, space in (("alice", "aspace"), ("bob", "bspace")):
        cli("space", "create", space)
        cli("user", "add", who)
        cli("space", "grant", space, who, "--role", "owner")
        tok[who] = cli("--json", "token", "create", "--user", who, "--spaces", space)["token"]
    notes = tmp_path / "pelican-budget.md"
    notes.write_text("# Pelican budget\n\nThe pelican budget for 2027 is forty thousand marbles.\n")
    akb = cli("--json", "--space", "aspace", "kb", "create", "akb")["id"]
    up = cli("--json", "--space", "aspace", "kb", "upload", "akb", str(notes))
    assert [d["status"] for d in up["documents"]] == ["ready"], up
    srv = start_server(home, "--chat-model", f"openai:{MODEL}", "--auth", "token", "--hub-allow-commands",
                       logdir=tmp_path / "logs")
    a, b = tok["alice"], tok["bob"]
    try:
        register(srv, {"name": "everything", "transport_type": "stdio", "config": everything_cmd()}, token=a)
        add_tool(srv, {"name": "alice_secret", "description": "Alice's private tool", "http_url": "https://example.org/alice"}, token=a)
        secret_q = "What is the pelican budget for 2027?"
        fake.script([{"text": "Forty thousand marbles [1]."}])
        ac = chat(srv, {"messages": user(secret_q), "kb_ids": [akb]}, token=a)
        aid = ac.conversation["id"]
        check_prompt_has_passages(fake.streamed()[0], ac.events[1].data)
        a_tools = fake.streamed()[0].tool_names
        assert "everything__echo" in a_tools and "custom__alice_secret" in a_tools, a_tools
        title = conversation(srv, aid, a)["title"]

        fake.reset()
        bob_texts: list[str] = []  # what Bob got without naming anything of Alice's
        probes: list[str] = []  # answers to Bob's probes at Alice's conversation (they echo its id)
        missing = str(uuid.uuid4())
        for method, kw in (("GET", {}), ("PATCH", {"json": {"title": "mine now"}}), ("DELETE", {})):
            foreign = requests.request(method, srv.url(f"/api/v1/conversations/{aid}"), headers=auth(b), timeout=30, **kw)
            nothing = requests.request(method, srv.url(f"/api/v1/conversations/{missing}"), headers=auth(b), timeout=30, **kw)
            assert_error(foreign, 404)
            assert foreign.text.replace(aid, missing) == nothing.text, (foreign.text, nothing.text)
            probes.append(foreign.text)
        for body in ({"messages": user("Continue."), "conversation_id": aid},
                     {"messages": user("Continue."), "conversation_id": aid, "stream": False}):
            r = post_chat(srv, body, token=b, stream=body.get("stream", True))
            assert_error(r, 404)
            probes.append(r.text)
        for kb_key in (akb, "akb"):
            r = post_chat(srv, {"messages": user("Read alice's notes."), "kb_ids": [kb_key]}, token=b)
            assert_error(r, 404)
            probes.append(r.text)
        assert fake.snapshot() == [], "a refused chat reached the provider"

        fake.script([{"text": "Hello Bob."}])
        bc = chat(srv, {"messages": user("Which tools do I have?")}, token=b)
        bob_texts += [json.dumps([e.data for e in bc.events])]
        b_tools = fake.streamed()[0].tool_names
        assert not any(n.startswith("everything__") or n.startswith("custom__") for n in b_tools), b_tools
        b_prompt = json.dumps(fake.streamed()[0].body)
        listed = conversations(srv, b)
        bob_texts.append(json.dumps(listed))
        assert [x["id"] for x in listed["data"]] == [bc.conversation["id"]] and listed["total"] == 1, listed
        for t in bob_texts + [b_prompt] + probes:
            for secret in (secret_q, "pelican", "alice_secret", "marbles"):
                assert secret not in t, (secret, t[:2000])
        for t in bob_texts + [b_prompt]:
            assert aid not in t, t[:2000]
        # Alice's conversation is untouched.
        mine = conversation(srv, aid, a)
        assert mine["title"] == title and len(mine["messages"]) == 2
        assert [x["id"] for x in conversations(srv, a)["data"]] == [aid]
    finally:
        srv.stop()


# ---------------------------------------------------------------------------------------------
# Conversations.


def test_conversation_endpoints(world: World, kb: dict):
    fake, srv = world.fake, world.srv
    fake.script([{"text": "First answer."}])
    c1 = chat(srv, {"message": "A first conversation, by shorthand.", "use_tools": False})
    fake.script([{"tool_calls": [{"id": "call_conv", "tool": "echo", "arguments": {"message": "stored call"}}]},
                 {"text": "Quokkas live on Rottnest [1]."}])
    c2 = chat(srv, {"messages": user("Where do quokkas live? Echo first."), "kb_ids": [kb["name"]], "tools": ["everything.echo"]})
    id1, id2 = c1.conversation["id"], c2.conversation["id"]
    assert id1 != id2

    listed = conversations(srv)
    ids = [x["id"] for x in listed["data"]]
    assert ids.index(id2) < ids.index(id1), "most recent first"
    assert listed["total"] >= len(ids) >= 2
    times = [x["updated_at"] for x in listed["data"]]
    assert times == sorted(times, reverse=True), times
    by_id = {x["id"]: x for x in listed["data"]}
    for x in (by_id[id1], by_id[id2]):
        assert {"id", "title", "kb_ids", "model", "message_count", "created_at", "updated_at"} <= set(x), x
        assert x["message_count"] == 2, x
    assert set(by_id[id2]["kb_ids"]) & {kb["id"], kb["name"]}, by_id[id2]
    assert by_id[id1]["title"] == c1.conversation["title"]

    one = conversation(srv, id1)
    assert [(m["role"], m["content"]) for m in one["messages"]] == [
        ("user", "A first conversation, by shorthand."), ("assistant", "First answer.")], one["messages"]
    two = conversation(srv, id2)
    user_msg, answer = two["messages"]
    for m in two["messages"]:
        assert {"id", "role", "content", "sources", "tool_calls", "status", "usage", "created_at"} <= set(m), m
    assert answer["id"] == c2.conversation["message_id"] and answer["status"] == "complete", answer
    assert answer["content"] == "Quokkas live on Rottnest [1]."
    assert [s["source"] for s in answer["sources"]] == [s["source"] for s in c2.events[1].data], answer["sources"]
    assert answer["sources"][0]["index"] == 1 and answer["sources"][0]["content"], answer["sources"]
    [tc] = answer["tool_calls"]
    assert tc["id"] == "call_conv" and tc["tool"] == "everything.echo" and tc["status"] == "success", tc
    assert tc["arguments"] == {"message": "stored call"} and "stored call" in tc["result"], tc
    assert user_msg["role"] == "user" and user_msg["status"] == "complete", user_msg

    r = requests.patch(srv.url(f"/api/v1/conversations/{id2}"), json={"title": "Quokka questions"}, timeout=30)
    assert r.status_code == 200, r.text
    assert conversation(srv, id2)["title"] == "Quokka questions"
    assert {x["id"]: x for x in conversations(srv)["data"]}[id2]["title"] == "Quokka questions"

    r = requests.delete(srv.url(f"/api/v1/conversations/{id2}"), timeout=30)
    assert r.status_code == 200, r.text
    assert_error(get_conversation(srv, id2), 404)
    assert_error(requests.patch(srv.url(f"/api/v1/conversations/{id2}"), json={"title": "x"}, timeout=30), 404)
    assert_error(requests.delete(srv.url(f"/api/v1/conversations/{id2}"), timeout=30), 404)
    assert id2 not in [x["id"] for x in conversations(srv)["data"]]
    # Continuing a deleted conversation is a 404 too.
    assert_error(post_chat(srv, {"messages": user("Still there?"), "conversation_id": id2}), 404)
    assert conversation(srv, id1)["messages"], "the other conversation stays"


# ---------------------------------------------------------------------------------------------
# Bad requests.


def test_bad_requests_store_nothing(world: World):
    fake, srv = world.fake, world.srv
    before = conversations(srv)["total"]
    cases = [
        ({"messages": []}, 400, ["messages"]),
        ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}, 400, ["user"]),
        ({"messages": [{"role": "wizard", "content": "abracadabra"}]}, 400, ["wizard"]),
        ({"messages": [{"role": "user", "content": 42}]}, 400, ["content"]),
        ({"messages": user("hi"), "max_tool_rounds": 11}, 400, ["max_tool_rounds"]),
        ({"messages": user("hi"), "tools": ["nope.nothing"]}, 400, ["nope.nothing"]),
        ({"messages": user("hi"), "kb_ids": ["no-such-kb"]}, 404, ["no-such-kb"]),
        ({"messages": user("hi"), "conversation_id": str(uuid.uuid4())}, 404, ["conversation"]),
        ('{"messages": [{"role": "user", "content": "hi"}', 400, []),
    ]
    for body, status, fragments in cases:
        for stream in (True, False):
            payload = body if isinstance(body, str) else {**body, "stream": stream}
            r = post_chat(srv, payload, stream=stream)
            assert_error(r, status, *fragments)
    assert fake.snapshot() == [], "a refused request reached the provider"
    assert conversations(srv)["total"] == before, "a refused request stored a conversation"


def test_no_chat_model_configured(quarry_bin: Path, corpus: Path, tmp_path: Path, fake: FakeLLM):
    home = make_home(quarry_bin, corpus, tmp_path / "home", env=chat_env(fake))
    home = home.with_env(QUARRY_CHAT_MODEL=None)
    srv = start_server(home, logdir=tmp_path / "logs")
    try:
        for stream in (True, False):
            r = post_chat(srv, {"messages": user("Hello?"), "stream": stream}, stream=stream)
            body = assert_error(r, 503)
            assert "--chat-model" in body["detail"] or "QUARRY_CHAT_MODEL" in body["detail"], body
        assert conversations(srv)["total"] == 0
        cfg = requests.get(srv.url("/api/v1/chat/config"), timeout=10).json()["data"]
        assert cfg["configured"] is False and cfg["model"] is None, cfg
    finally:
        srv.stop()
    assert fake.snapshot() == []


def test_chat_config_names_the_model_but_no_secret(world: World):
    r = requests.get(world.srv.url("/api/v1/chat/config"), timeout=10)
    assert r.status_code == 200, r.text
    cfg = r.json()["data"]
    assert cfg == {"configured": True, "model": f"openai:{MODEL}", "max_tool_rounds": 5, "rag_top_k": TOP_K}, cfg
    assert API_KEY not in r.text and world.fake.url not in r.text


def test_openapi_documents_chat(world: World):
    spec = requests.get(world.srv.url("/api/v1/openapi.json"), timeout=10).json()
    for path in ("/api/v1/chat", "/api/v1/conversations", "/api/v1/conversations/{id}"):
        assert path in spec["paths"], path
    assert "text/event-stream" in spec["paths"]["/api/v1/chat"]["post"]["responses"]["200"]["content"]
    assert "kb_ids" in spec["components"]["schemas"]["ChatRequest"]["properties"]
