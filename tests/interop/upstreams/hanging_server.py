"""A small stdio MCP server (official Python SDK) for the hub tests: `hang` never answers,
`quick` answers at once, `pid` returns the process id (so a test can kill it mid-call),
`grow` adds a tool and announces it with `notifications/tools/list_changed`."""

import os

import anyio
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("hanging")


@app.tool()
async def hang(seconds: float = 3600) -> str:
    """Sleeps (practically forever by default). On entry writes "started" to the file named
    by $HANG_STARTED_MARK; when cancelled, writes "cancelled" to the file named by
    $HANG_CANCEL_MARK (so a test can see the call arrive, then its cancellation)."""
    started = os.environ.get("HANG_STARTED_MARK")
    if started:
        with open(started, "w") as f:
            f.write("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        mark = os.environ.get("HANG_CANCEL_MARK")
        if mark:
            with open(mark, "w") as f:
                f.write("cancelled")
        raise
    return "woke up"


@app.tool()
def quick(text: str) -> str:
    """Answers at once."""
    return f"quick: {text}"


@app.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


def grown() -> str:
    """A tool that exists once `grow` ran."""
    return "grown"


@app.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and tells the client its tool list changed."""
    app.add_tool(grown)
    await ctx.notify_tools_changed()
    return "added grown"


if __name__ == "__main__":
    app.run()
