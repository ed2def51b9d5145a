"""A small stdio MCP server (official Python SDK) for the hub tests: `hang` never answers,
`quick` answers at once, `pid` returns the process id (so a test can kill it mid-call)."""

import os

import anyio
from mcp.server.mcpserver import MCPServer

app = MCPServer("hanging")


@app.tool()
async def hang(seconds: float = 3600) -> str:
    """Sleeps (practically forever by default)."""
    await anyio.sleep(seconds)
    return "woke up"


@app.tool()
def quick(text: str) -> str:
    """Answers at once."""
    return f"quick: {text}"


@app.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


if __name__ == "__main__":
    app.run()
