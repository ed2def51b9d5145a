#!/usr/bin/env python3
"""Replays catalog snapshots (eval/tools/catalog/*.json) as MCP servers: `tools/list` gives
the snapshot's tools verbatim, every `tools/call` answers the error "replayed catalog: not
callable". Built on the MCP Python SDK's low-level `Server`. (One change: an inputSchema
without a "type" gets "type": "object", which the SDK insists on.)

    replay_server.py catalog/github.json                      # one server over stdio
    replay_server.py --http PORT catalog/a.json catalog/b.json  # many, one process

With --http, one process serves each snapshot over Streamable HTTP at
http://127.0.0.1:PORT/<server>/mcp (the file's "server" name), so a harness registers one
upstream per snapshot without starting one Python process per server (the SDK takes about a
second of CPU to import, which times ~100 servers is too slow for a guard on two cores).
"""
import argparse
import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

NOT_CALLABLE = "replayed catalog: not callable"


def replay(path: Path) -> Server:
    snap = json.loads(path.read_text(encoding="utf-8"))
    tools = []
    for t in snap["tools"]:
        if "type" not in t.get("inputSchema", {}):
            # A few servers list schemas without `"type": "object"` (the official GitLab
            # server: zod-to-json-schema output); the SDK refuses to send those, so the
            # replay adds it. Nothing else is changed, and search does not read schemas.
            t = dict(t, inputSchema={"type": "object", **t.get("inputSchema", {})})
        tools.append(types.Tool.model_validate(t))

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text=NOT_CALLABLE)], is_error=True)

    return Server(snap["server"], version=snap.get("version", ""), on_list_tools=list_tools, on_call_tool=call_tool)


def serve_stdio(path: Path) -> None:
    from mcp.server.stdio import stdio_server

    server = replay(path)

    async def main():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def serve_http(port: int, paths: list[Path]) -> None:
    import contextlib

    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
    )
    managers, routes = [], []
    for p in paths:
        server = replay(p)
        m = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True, security_settings=security)
        managers.append(m)
        routes.append(Route(f"/{server.name}/mcp", endpoint=StreamableHTTPASGIApp(m)))
    routes.append(Route("/ready", endpoint=lambda request: PlainTextResponse("ok")))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with contextlib.AsyncExitStack() as stack:
            for m in managers:
                await stack.enter_async_context(m.run())
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--http", type=int, metavar="PORT", help="serve every snapshot over HTTP on this port")
    ap.add_argument("snapshots", nargs="+", type=Path)
    a = ap.parse_args()
    if a.http is not None:
        serve_http(a.http, a.snapshots)
    elif len(a.snapshots) == 1:
        serve_stdio(a.snapshots[0])
    else:
        sys.exit("several snapshots need --http PORT")


if __name__ == "__main__":
    main()
