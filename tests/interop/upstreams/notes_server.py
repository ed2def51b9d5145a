"""A small stdio MCP server (official Python SDK) for the governance tests: `read_note` is
annotated read-only, `write_note` is annotated as a write, `erase` carries no annotations — so
a read-only token's reach (tools annotated read-only only) can be probed tool by tool."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("notes")
NOTES: dict[str, str] = {"welcome": "hello"}


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> str:
    """Reads a note."""
    return NOTES.get(name, "(no such note)")


@app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def write_note(name: str, text: str) -> str:
    """Writes a note."""
    NOTES[name] = text
    return f"wrote {name}"


@app.tool()
def erase() -> str:
    """Erases every note."""
    NOTES.clear()
    return "erased"


if __name__ == "__main__":
    app.run()
