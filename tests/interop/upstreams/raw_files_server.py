"""A small stdio MCP server (official Python SDK) whose tool hands its argument to the OS
unchanged, as many real tools do: `read_file` opens exactly the path it is given. Policies are
what stands between an agent and the files it must not read."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("rawfs")


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_file(path: str) -> str:
    """Reads a text file."""
    with open(path, encoding="utf-8") as f:
        return f.read()


if __name__ == "__main__":
    app.run()
