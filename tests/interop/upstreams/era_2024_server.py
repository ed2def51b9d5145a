"""A minimal MCP server that speaks exactly protocol 2024-11-05, for the hub's protocol-era
tests (no SDK: every SDK today answers a newer version when asked, and 2024-11-05 results
carry none of the fields later eras added — no `resultType`, no `structuredContent`).

    python era_2024_server.py stdio      # newline-delimited JSON-RPC on stdin/stdout
    python era_2024_server.py sse PORT   # 2024-11-05's HTTP+SSE transport: GET /sse, POST /messages

Offers a tool `echo` (text back), a tool `add` (the sum as text), a prompt `greet` and a
resource `memo://note`. Whatever version the client asks for, it answers 2024-11-05.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

VERSION = "2024-11-05"
NOTE = "A note from a 2024-11-05 server."

TOOLS = [
    {"name": "echo", "description": "Echoes the message back.",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
    {"name": "add", "description": "Adds two integers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     "required": ["a", "b"]}},
]


def handle(msg: dict) -> dict | None:
    """The response to one message (None for notifications)."""
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None:
        return None

    def ok(result: dict) -> dict:
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    def err(code: int, message: str) -> dict:
        return {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}}

    if method == "initialize":
        return ok({"protocolVersion": VERSION,
                   "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
                   "serverInfo": {"name": "era-2024", "version": "1.0.0"}})
    if method == "ping":
        return ok({})
    if method == "tools/list":
        return ok({"tools": TOOLS})
    if method == "tools/call":
        args = params.get("arguments") or {}
        if params.get("name") == "echo":
            return ok({"content": [{"type": "text", "text": f"echo: {args.get('message', '')}"}]})
        if params.get("name") == "add":
            return ok({"content": [{"type": "text", "text": str(int(args.get("a", 0)) + int(args.get("b", 0)))}]})
        return ok({"content": [{"type": "text", "text": f"unknown tool {params.get('name')}"}], "isError": True})
    if method == "prompts/list":
        return ok({"prompts": [{"name": "greet", "description": "A greeting",
                                "arguments": [{"name": "who", "required": True}]}]})
    if method == "prompts/get":
        who = (params.get("arguments") or {}).get("who", "you")
        return ok({"description": "A greeting",
                   "messages": [{"role": "user", "content": {"type": "text", "text": f"Hello, {who}!"}}]})
    if method == "resources/list":
        return ok({"resources": [{"uri": "memo://note", "name": "note", "mimeType": "text/plain"}]})
    if method == "resources/templates/list":
        return ok({"resourceTemplates": []})
    if method == "resources/read":
        if params.get("uri") == "memo://note":
            return ok({"contents": [{"uri": "memo://note", "mimeType": "text/plain", "text": NOTE}]})
        return err(-32002, f"Resource not found: {params.get('uri')}")
    return err(-32601, f"Method not found: {method}")


def serve_stdio() -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        reply = handle(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


SESSIONS: dict[str, queue.Queue] = {}


class SseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if urlparse(self.path).path != "/sse":
            self.send_error(404)
            return
        sid = uuid.uuid4().hex
        events: queue.Queue = queue.Queue()
        SESSIONS[sid] = events
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            self.wfile.write(f"event: endpoint\ndata: /messages?session_id={sid}\n\n".encode())
            self.wfile.flush()
            while True:
                try:
                    reply = events.get(timeout=15)
                except queue.Empty:
                    self.wfile.write(b": ping\n\n")
                    self.wfile.flush()
                    continue
                self.wfile.write(f"event: message\ndata: {json.dumps(reply)}\n\n".encode())
                self.wfile.flush()
        except OSError:
            pass
        finally:
            SESSIONS.pop(sid, None)

    def do_POST(self) -> None:
        url = urlparse(self.path)
        sid = (parse_qs(url.query).get("session_id") or [""])[0]
        events = SESSIONS.get(sid)
        if url.path != "/messages" or events is None:
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply = handle(json.loads(body))
        self.send_response(202)
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"Accepted")
        if reply is not None:
            events.put(reply)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "sse":
        server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), SseHandler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        threading.Event().wait()
    else:
        serve_stdio()


if __name__ == "__main__":
    main()
