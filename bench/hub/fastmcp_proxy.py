"""FastMCP's proxy (`fastmcp.server.create_proxy`, the successor of `FastMCP.as_proxy`) in front
of stdio MCP servers, served over Streamable HTTP at /mcp. Run with the fastmcp venv that
bench/hub/install.sh makes:

    fastmcp-venv/bin/python bench/hub/fastmcp_proxy.py PORT COMMAND [ARG...]
    fastmcp-venv/bin/python bench/hub/fastmcp_proxy.py PORT --config SERVERS.json

SERVERS.json is an MCPConfig, `{"mcpServers": {"NAME": {"command": ..., "args": [...]}}}`;
with more than one server FastMCP prefixes each server's tools with its name.
"""

import json
import sys

from fastmcp.server import create_proxy


def main():
    port = int(sys.argv[1])
    if sys.argv[2] == "--config":
        with open(sys.argv[3]) as f:
            config = json.load(f)
    else:
        config = {"mcpServers": {"upstream": {"command": sys.argv[2], "args": sys.argv[3:],
                                              "transport": "stdio"}}}
    proxy = create_proxy(config, name="fastmcp-proxy")
    # Default log level, as for every server in the benchmark.
    proxy.run(transport="http", host="127.0.0.1", port=port, path="/mcp", show_banner=False)


if __name__ == "__main__":
    main()
