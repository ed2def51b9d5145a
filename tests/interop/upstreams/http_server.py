"""A small Streamable HTTP MCP server (official Python SDK, 2026-07-28) for the hub tests:
`python http_server.py PORT [TOKEN]`. With TOKEN, every request must carry
`Authorization: Bearer TOKEN` (to check that the hub sends configured headers)."""

import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("http-upstream")


@app.tool()
def shout(text: str) -> str:
    """Returns the text in upper case."""
    return text.upper()


@app.tool()
def add(a: int, b: int) -> dict:
    """Adds two integers; the result is structured."""
    return {"sum": a + b}


if __name__ == "__main__":
    import anyio
    import uvicorn

    port = int(sys.argv[1])
    token = sys.argv[2] if len(sys.argv) > 2 else None
    inner = app.streamable_http_app()

    async def guarded(scope, receive, send):
        if token and scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await inner(scope, receive, send)

    config = uvicorn.Config(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)
