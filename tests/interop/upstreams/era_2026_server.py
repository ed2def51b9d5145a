"""A 2026-07-28 MCP server (official Python SDK) with a tool, a prompt and a resource, for the
hub's protocol-era tests: `python era_2026_server.py stdio` or `python era_2026_server.py http PORT`
(Streamable HTTP at /mcp)."""

import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("era-2026")
NOTE = "A note from a 2026-07-28 server."


@app.tool()
def echo(message: str) -> str:
    """Echoes the message back."""
    return f"echo: {message}"


@app.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@app.prompt()
def greet(who: str) -> str:
    """A greeting"""
    return f"Hello, {who}!"


@app.resource("memo://note", mime_type="text/plain")
def note() -> str:
    """A note."""
    return NOTE


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import anyio
        import uvicorn

        config = uvicorn.Config(app.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]),
                                log_level="warning", lifespan="on")
        anyio.run(uvicorn.Server(config).serve)
    else:
        app.run()
