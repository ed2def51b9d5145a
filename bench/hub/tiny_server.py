"""A minimal stdio MCP server in the standard library (no SDK), for the memory part of
bench/hub/run.py: starts in milliseconds, so registering ten of them costs little time.

    python3 bench/hub/tiny_server.py [NAME]

Answers initialize (echoing the client's protocol version when it is one it knows), ping,
tools/list (three tools) and tools/call; ignores notifications; anything else is
"method not found".
"""

import json
import sys

KNOWN = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
NAME = sys.argv[1] if len(sys.argv) > 1 else "tiny"
TOOLS = [{"name": n, "description": d,
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                          "required": ["text"]}}
         for n, d in (("echo", "Echo the text back."), ("upper", "The text in upper case."),
                      ("length", "The number of characters in the text."))]


def answer(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        v = params.get("protocolVersion")
        return {"protocolVersion": v if v in KNOWN else KNOWN[-1],
                "capabilities": {"tools": {}}, "serverInfo": {"name": NAME, "version": "1"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        out = {"echo": text, "upper": text.upper(), "length": str(len(text))}.get(
            params.get("name"))
        if out is None:
            return {"content": [{"type": "text", "text": "unknown tool"}], "isError": True}
        return {"content": [{"type": "text", "text": out}]}
    return None


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg or "method" not in msg:
            continue  # notifications and responses
        res = answer(msg)
        out = {"jsonrpc": "2.0", "id": msg["id"]}
        if res is None:
            out["error"] = {"code": -32601, "message": f"method not found: {msg['method']}"}
        else:
            out["result"] = res
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
