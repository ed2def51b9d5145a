"""A scriptable loopback fake of an OpenAI-compatible chat API, for the chat interop tests.

It serves ``POST /v1/chat/completions`` (and ``POST /chat/completions``) on 127.0.0.1 from a
daemon thread and streams the way real providers do:

- Server-Sent Events over chunked HTTP/1.1: ``data: {chat.completion.chunk}\\n\\n`` lines
  ending with ``data: [DONE]``; every event goes out in two TCP writes (so a client that
  assumes one event per read breaks), with a short pause between events.
- The first chunk carries ``delta.role``; text is split over several chunks.
- Tool calls are split like OpenAI does: the first chunk of a call carries ``index``, ``id``,
  ``type: "function"``, ``function.name`` and an empty ``arguments``; later chunks carry only
  ``index`` and a piece of ``function.arguments``. Several calls in one round get indexes 0,
  1, …, sent one after another or interleaved.
- ``finish_reason`` arrives on a final choice chunk with an empty delta. Usage is sent only
  when the request sets ``stream_options.include_usage``: OpenAI style (``style: "openai"``)
  as an extra chunk with ``choices: []``; DeepSeek/Qwen style (``style: "deepseek"``) in the
  same last chunk as ``finish_reason``, with ``content: null`` next to tool-call deltas and
  ``logprobs: null`` on every choice.

Scripting (``fake.script([...])`` appends steps; each streaming request takes the next one)::

    {"text": "Hello [1]", "pieces": 3, "finish": "stop", "style": "openai"}
    {"tool_calls": [{"tool": "echo", "arguments": {"message": "hi"}}],
     "split": 3, "interleave": False, "style": "openai", "finish": "tool_calls", "text": None}
    {"status": 429, "retry_after": 0.2, "body": {...}}     # an HTTP error answer
    {"hang": True}      # 200, headers and the role chunk, then nothing until the client leaves
    {"delay": 1.5}      # alone: wait, then answer the next step; or as a key of any step

A call's ``tool`` is matched against the request's ``tools[].function.name``: exactly, else
the unique name ending in ``__<tool>``; a name nothing matches is sent verbatim (so tests can
ask for an unknown tool). ``arguments`` may be a dict (sent as JSON) or a string (sent as it
is). ``id`` may be given; otherwise ``call_<n>``. ``finish`` may be ``stop``, ``tool_calls``,
``length``; tool calls that end with ``stop`` are how Ollama answers.

A streaming request with nothing scripted answers HTTP 500 ``fake: script exhausted``.
Non-streaming requests (``stream`` absent or false; Quarry sends them to rewrite follow-up
questions) are answered from a separate queue, ``fake.script_complete([...])`` (strings, or
``{"status": 500}`` for an error), default content ``"fake standalone question"``.

Every request is recorded (:attr:`FakeLLM.requests`, :class:`ChatRequest`): the parsed body,
the headers, whether it streamed, what answered it, and whether the client disconnected
before the stream ended.

``FakeLLM.start()`` binds 127.0.0.1:0; ``.base`` is ``http://127.0.0.1:PORT/v1`` (the value
for ``QUARRY_CHAT_BASE_URL``); ``.stop()`` shuts it down.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_STANDALONE = "fake standalone question"
EVENT_PAUSE = 0.002  # seconds between SSE events
HANG_LIMIT = 600.0  # a hanging step gives up after this long even if nobody disconnects


@dataclass
class ChatRequest:
    path: str
    body: object  # the parsed JSON body (None when it was not JSON)
    headers: dict[str, str]  # names lower-cased
    stream: bool
    step: dict | None = None  # the scripted step that answered (None: non-streaming or exhausted)
    status: int = 0  # the HTTP status the fake answered
    content: str = ""  # what a non-streaming answer said
    usage: dict | None = None  # the usage the stream reported (only when the request asked for it)
    disconnected: bool = False  # the client went away before the stream ended
    completed: bool = False  # the whole answer was written (up to `data: [DONE]`)
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    # --- helpers for assertions -----------------------------------------------------------

    @property
    def messages(self) -> list[dict]:
        return list((self.body or {}).get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict]:
        return list((self.body or {}).get("tools") or []) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        """Names of the functions offered to the model (none when ``tool_choice`` is "none")."""
        if isinstance(self.body, dict) and self.body.get("tool_choice") == "none":
            return []
        return [((t or {}).get("function") or {}).get("name") for t in self.tools]

    def offers_tools(self) -> bool:
        return bool(self.tool_names)

    def text(self) -> str:
        """Every message's content, joined (to look for words anywhere in the prompt)."""
        parts = []
        for m in self.messages:
            c = m.get("content")
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, list):
                parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
        return "\n".join(parts)


class FakeLLM:
    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []
        self._steps: deque = deque()
        self._complete: deque = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()
        self.url = ""

    # --- lifecycle ------------------------------------------------------------------------

    @classmethod
    def start(cls) -> FakeLLM:
        fake = cls()
        handler = type("Handler", (_Handler,), {"fake": fake})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        host, port = server.server_address[:2]
        fake.url = f"http://{host}:{port}"
        fake._server = server
        threading.Thread(target=server.serve_forever, name="fake-llm", daemon=True).start()
        return fake

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base(self) -> str:
        """Value for ``QUARRY_CHAT_BASE_URL``."""
        return f"{self.url}/v1"

    def env(self, api_key: str) -> dict[str, str]:
        """The chat provider settings of a home that talks to this fake (one retry)."""
        return {"QUARRY_CHAT_BASE_URL": self.base, "QUARRY_CHAT_API_KEY": api_key, "QUARRY_CHAT_RETRIES": "1"}

    # --- scripting --------------------------------------------------------------------------

    def script(self, steps: list[dict]) -> FakeLLM:
        """Queues answers for streaming requests, in order."""
        with self._lock:
            self._steps.extend(dict(s) for s in steps)
        return self

    def script_complete(self, answers: list) -> FakeLLM:
        """Queues answers for non-streaming requests (strings, or ``{"status": N}``)."""
        with self._lock:
            self._complete.extend(answers)
        return self

    def pending(self) -> int:
        """Scripted streaming steps not used yet."""
        with self._lock:
            return len(self._steps)

    def reset(self) -> None:
        """Forgets the script and the recorded requests."""
        with self._lock:
            self._steps.clear()
            self._complete.clear()
            self.requests.clear()

    def _next_step(self) -> dict | None:
        with self._lock:
            return self._steps.popleft() if self._steps else None

    def _next_complete(self):
        with self._lock:
            return self._complete.popleft() if self._complete else DEFAULT_STANDALONE

    def _call_id(self) -> str:
        return f"call_{next(self._ids)}"

    # --- recorded traffic -----------------------------------------------------------------

    def snapshot(self) -> list[ChatRequest]:
        with self._lock:
            return list(self.requests)

    def streamed(self) -> list[ChatRequest]:
        return [r for r in self.snapshot() if r.stream]

    def completions(self) -> list[ChatRequest]:
        """The non-streaming requests (follow-up rewriting)."""
        return [r for r in self.snapshot() if not r.stream]

    def wait_requests(self, n: int, timeout: float = 10, stream: bool | None = True) -> list[ChatRequest]:
        """Waits until at least ``n`` (streaming, by default) requests arrived."""
        deadline = time.monotonic() + timeout
        while True:
            got = [r for r in self.snapshot() if stream is None or r.stream == stream]
            if len(got) >= n or time.monotonic() > deadline:
                return got
            time.sleep(0.02)

    def wait_disconnect(self, req: ChatRequest, timeout: float = 10) -> bool:
        """Waits until the stream answering ``req`` ended; True when the client left early."""
        req.done.wait(timeout)
        return req.disconnected

    # --- building answers -------------------------------------------------------------------

    @staticmethod
    def resolve_tool(name: str, body: dict) -> str:
        """The offered function name for a scripted tool name (see the module docstring)."""
        offered = [((t or {}).get("function") or {}).get("name") for t in (body.get("tools") or [])]
        offered = [n for n in offered if isinstance(n, str)]
        if name in offered:
            return name
        ends = [n for n in offered if n.endswith(f"__{name}")]
        if len(ends) == 1:
            return ends[0]
        if len(ends) > 1:
            raise ValueError(f"fake: tool '{name}' is ambiguous among {ends}")
        return name

    @staticmethod
    def usage_for(step: dict, body: dict) -> dict:
        """The token usage the fake reports for ``step`` (when the request asks for usage)."""
        text = step.get("text") or ""
        n_text = len(split(text, int(step.get("pieces", 3)))) if text else 0
        usage = step.get("usage") or {
            "prompt_tokens": 100 + len(json.dumps(body.get("messages") or [])) // 4,
            "completion_tokens": max(1, n_text + len(step.get("tool_calls") or []) * 5),
        }
        return {**usage, "total_tokens": usage.get("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])}

    def chunks(self, step: dict, body: dict) -> list[dict]:
        """The chat.completion.chunk objects answering ``step``."""
        style = step.get("style", "openai")
        deep = style == "deepseek"
        model = body.get("model") or "fake-chat"
        cid = f"chatcmpl-fake-{next(self._ids)}"
        created = int(time.time())
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict, finish=None, usage=None, choices=True) -> dict:
            c = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
            if deep:
                c["system_fingerprint"] = "fp_fake"
            if choices:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                if deep:
                    choice["logprobs"] = None
                c["choices"] = [choice]
            else:
                c["choices"] = []
            if usage is not None:
                c["usage"] = usage
            elif deep or style == "openai" and include_usage and choices:
                c["usage"] = None  # providers send an explicit null before the usage chunk
            return c

        out = [chunk({"role": "assistant", "content": ""})]
        text = step.get("text") or ""
        n_text = 0
        if text:
            for piece in split(text, int(step.get("pieces", 3))):
                out.append(chunk({"content": piece}))
                n_text += 1
        calls = step.get("tool_calls") or []
        if calls:
            parts = int(step.get("split", 3))
            per_call = []
            for index, call in enumerate(calls):
                name = self.resolve_tool(call["tool"], body)
                args = call.get("arguments", {})
                args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                head = {
                    "index": index,
                    "id": call.get("id") or self._call_id(),
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                pieces = [{"index": index, "function": {"arguments": p}} for p in split(args, parts)]
                per_call.append([head, *pieces])
            if step.get("interleave"):
                ordered = [d for group in itertools.zip_longest(*per_call) for d in group if d is not None]
            else:
                ordered = [d for group in per_call for d in group]
            for d in ordered:
                delta = {"tool_calls": [d]}
                if deep:
                    delta = {"content": None, **delta}
                out.append(chunk(delta))
        finish = step.get("finish") or ("tool_calls" if calls else "stop")
        usage = self.usage_for(step, body)
        if deep:
            out.append(chunk({"content": ""} if not calls else {}, finish=finish, usage=usage if include_usage else None))
        else:
            out.append(chunk({}, finish=finish))
            if include_usage:
                out.append(chunk({}, usage=usage, choices=False))
        return out


def split(s: str, n: int) -> list[str]:
    """``s`` in ``n`` nearly equal non-empty pieces (fewer when ``s`` is shorter)."""
    n = max(1, min(n, len(s))) if s else 1
    if not s:
        return [""]
    size, extra = divmod(len(s), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(s[at : at + step])
        at += step
    return out


class _ClientGone(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLM  # set on the subclass made by FakeLLM.start
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep pytest output clean
        pass

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "fake-chat", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if self.path.split("?")[0] not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, {"error": {"message": f"fake: no route {self.path}"}})
            return
        body_d = body if isinstance(body, dict) else {}
        rec = ChatRequest(
            path=self.path,
            body=body,
            headers={k.lower(): v for k, v in self.headers.items()},
            stream=bool(body_d.get("stream")),
        )
        with self.fake._lock:
            self.fake.requests.append(rec)
        try:
            if rec.stream:
                self._stream(rec, body_d)
            else:
                self._complete(rec, body_d)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, _ClientGone, socket.timeout, OSError):
            rec.disconnected = not rec.completed
            self.close_connection = True
        finally:
            rec.ended = time.monotonic()
            rec.done.set()

    # --- answers --------------------------------------------------------------------------

    def _json(self, status: int, obj: dict, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _complete(self, rec: ChatRequest, body: dict) -> None:
        answer = self.fake._next_complete()
        if isinstance(answer, dict) and "status" in answer:
            rec.status = int(answer["status"])
            self._json(rec.status, answer.get("body") or {"error": {"message": f"fake: HTTP {rec.status}"}})
            rec.completed = True
            return
        rec.content = str(answer)
        rec.status = 200
        self._json(200, {
            "id": f"chatcmpl-fake-{next(self.fake._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "fake-chat",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": rec.content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        })
        rec.completed = True

    def _stream(self, rec: ChatRequest, body: dict) -> None:
        step = self.fake._next_step()
        while step is not None and set(step) == {"delay"}:  # a bare delay: wait, then the next step
            self._sleep(float(step["delay"]))
            step = self.fake._next_step()
        rec.step = step
        if step is None:
            rec.status = 500
            self._json(500, {"error": {"message": "fake: script exhausted", "type": "server_error"}})
            rec.completed = True
            return
        if step.get("delay"):
            self._sleep(float(step["delay"]))
        if "status" in step:
            rec.status = int(step["status"])
            headers = {}
            if step.get("retry_after") is not None:
                ra = float(step["retry_after"])
                headers["Retry-After"] = str(int(ra)) if ra.is_integer() else str(ra)
            body_out = step.get("body") or {
                "error": {"message": f"fake: HTTP {rec.status}", "type": "server_error", "code": None}
            }
            self._json(rec.status, body_out, headers)
            rec.completed = True
            return
        try:
            chunks = [] if step.get("hang") else self.fake.chunks(step, body)
        except ValueError as e:
            rec.status = 500
            self._json(500, {"error": {"message": str(e)}})
            rec.completed = True
            return
        rec.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        if step.get("hang"):
            role = self.fake.chunks({"text": ""}, body)[0]
            self._event(json.dumps(role))
            self._hang()
            return
        if (body.get("stream_options") or {}).get("include_usage"):
            rec.usage = self.fake.usage_for(step, body)
        for c in chunks:
            self._event(json.dumps(c, ensure_ascii=False))
            time.sleep(EVENT_PAUSE)
        self._event("[DONE]")
        self._write_chunk(b"")  # the terminating zero-length chunk
        rec.completed = True

    # --- the wire ---------------------------------------------------------------------------

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, payload: str) -> None:
        data = f"data: {payload}\n\n".encode()
        half = max(1, len(data) // 2)
        self._write_chunk(data[:half])  # one event in two writes
        self._write_chunk(data[half:])

    def _client_gone(self) -> bool:
        """True once the peer closed the connection (readable with nothing to read)."""
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.fake._stopping.is_set():
                raise _ClientGone()
            time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))

    def _hang(self) -> None:
        deadline = time.monotonic() + HANG_LIMIT
        while time.monotonic() < deadline and not self.fake._stopping.is_set():
            if self._client_gone():
                raise _ClientGone()
            time.sleep(0.02)
        raise _ClientGone()
