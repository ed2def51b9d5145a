#!/usr/bin/env python3
"""The peer for bench/chat/run.py: seed 003's tool loop (§5.2) written in Python by a user who
does not run Quarry — the official `openai` SDK (AsyncOpenAI, streaming, tool-call deltas
accumulated by index) against an OpenAI-compatible API, and the official MCP Python SDK
(`mcp`, a stdio client session to the tool's server) or an httpx GET (the custom HTTP tool),
in one process, no HTTP serving, no persistence, no event framing.

    PYTHON peer_loop.py --base http://127.0.0.1:PORT/v1 --requests 50 --rounds 5 --warmup 3 \
        --tool mcp --server-cmd 'node .../server-everything/dist/index.js stdio' --out peer.json
    PYTHON peer_loop.py ... --tool http --http-url 'http://127.0.0.1:PORT/echo/{{q}}'

Each chat: a user message and the tool's definition (only that tool, as Quarry is asked with
`tools: [...]`), then rounds until the model answers without tool calls. The model's script is
set by the caller (run.py scripts the fake before starting this). Per chat it records the
wall time from building the first request to having the answer, the time spent inside the
model stream (from `create(...)` until the stream is exhausted: the SDK's request, its chunk
parsing and our accumulation, as Quarry's `model_ms` includes its own stream parsing) and
inside the tool calls; overhead = wall - model - tools is the loop's own per-chat cost.
Writes one JSON object to --out (or stdout). Needs bench/chat/install.sh's venv.
"""

import argparse
import asyncio
import json
import shlex
import sys
import time
from importlib.metadata import version


def openai_tool(name, description, schema):
    return {"type": "function",
            "function": {"name": name, "description": description or "",
                         "parameters": schema or {"type": "object", "properties": {}}}}


async def stream_round(client, model, messages, tools):
    """One streamed completion; returns (text, [tool calls]) with the calls' deltas
    accumulated by index (the first delta carries id and name, later ones argument pieces)."""
    stream = await client.chat.completions.create(
        model=model, messages=messages, tools=tools, stream=True,
        stream_options={"include_usage": True})
    text, calls = [], {}
    async for chunk in stream:
        for choice in chunk.choices or []:
            d = choice.delta
            if d is None:
                continue
            if d.content:
                text.append(d.content)
            for tc in d.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function is not None:
                    if tc.function.name:
                        slot["name"] += tc.function.name
                    if tc.function.arguments:
                        slot["arguments"] += tc.function.arguments
    return "".join(text), [calls[i] for i in sorted(calls)]


async def run(a):
    from openai import AsyncOpenAI

    out = {"versions": {"openai": version("openai"), "mcp": version("mcp"),
                        "python": sys.version.split()[0]},
           "tool": a.tool, "rounds": a.rounds, "chats": [], "warmup": a.warmup}
    client = AsyncOpenAI(base_url=a.base, api_key="sk-fake-peer", max_retries=0, timeout=60)

    async def loop(call_tool, tools):
        for i in range(a.warmup + a.requests):
            t0 = time.perf_counter()
            messages = [{"role": "user", "content": f"Echo something, {a.rounds} times. ({i})"}]
            model_s = tool_s = 0.0
            rounds = calls_n = 0
            call_s = []
            while True:
                rounds += 1
                m0 = time.perf_counter()
                text, calls = await stream_round(client, a.model, messages, tools)
                model_s += time.perf_counter() - m0
                if not calls:
                    break
                messages.append({"role": "assistant", "content": text or None, "tool_calls": [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls]})
                for c in calls:
                    args = json.loads(c["arguments"] or "{}")
                    c0 = time.perf_counter()
                    result = await call_tool(c["name"], args)
                    dt = time.perf_counter() - c0
                    tool_s += dt
                    call_s.append(dt)
                    calls_n += 1
                    messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
            wall = time.perf_counter() - t0
            if i >= a.warmup:
                out["chats"].append({
                    "wall_ms": wall * 1e3, "model_ms": model_s * 1e3, "tools_ms": tool_s * 1e3,
                    "rounds": rounds, "tool_calls": calls_n,
                    "call_ms": [x * 1e3 for x in call_s], "answer": text})

    if a.tool == "mcp":
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        argv = shlex.split(a.server_cmd)
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        s0 = time.perf_counter()
        with open(a.server_log, "w") if a.server_log else open("/dev/null", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    out["session_start_ms"] = (time.perf_counter() - s0) * 1e3
                    tool = next(t for t in listed.tools if t.name == a.tool_name)
                    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
                    tools = [openai_tool(tool.name, tool.description, schema)]  # mcp 2 / 1

                    async def call_tool(name, args):
                        res = await session.call_tool(name, args)
                        text = "".join(getattr(c, "text", "") for c in res.content)
                        failed = getattr(res, "is_error", None) or getattr(res, "isError", None)
                        return f"error: {text}" if failed else text

                    await loop(call_tool, tools)
    else:
        try:  # the HTTP client the openai SDK itself depends on (httpx2 from openai 3)
            import httpx2 as httpx
        except ImportError:
            import httpx

        tools = [openai_tool(a.tool_name, "Echoes a word over HTTP",
                             {"type": "object", "properties": {"q": {"type": "string"}},
                              "required": ["q"]})]
        async with httpx.AsyncClient(timeout=60) as hc:
            async def call_tool(name, args):
                url = a.http_url
                for k, v in args.items():
                    url = url.replace("{{" + k + "}}", str(v))
                r = await hc.get(url)
                return r.text

            await loop(call_tool, tools)
    await client.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="OpenAI-compatible API base (…/v1)")
    ap.add_argument("--model", default="fake-chat")
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tool", choices=["mcp", "http"], default="mcp")
    ap.add_argument("--tool-name", default=None, help="default: echo (mcp), lookup (http)")
    ap.add_argument("--server-cmd", help="the MCP server's stdio command line (--tool mcp)")
    ap.add_argument("--server-log", help="file for the MCP server's stderr")
    ap.add_argument("--http-url", help="the HTTP tool's URL with {{q}} (--tool http)")
    ap.add_argument("--out", help="write the JSON here (default stdout)")
    a = ap.parse_args()
    a.tool_name = a.tool_name or ("echo" if a.tool == "mcp" else "lookup")
    if a.tool == "mcp" and not a.server_cmd:
        ap.error("--tool mcp needs --server-cmd")
    if a.tool == "http" and not a.http_url:
        ap.error("--tool http needs --http-url")
    out = asyncio.run(run(a))
    data = json.dumps(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(data)
    else:
        print(data)


if __name__ == "__main__":
    main()
