#!/usr/bin/env python3
"""Re-makes the tool catalog snapshot (eval/tools/catalog/*.json) from real MCP servers.

Not run in CI: it installs servers from npm and PyPI into a scratch directory outside the
repository and asks each for its tools over stdio.

    python3 eval/tools/collect.py --scratch /work/toolcat --install      # install, then list
    python3 eval/tools/collect.py --scratch /work/toolcat [--only NAME,…]  # list only

Every server is started with the dummy environment below (fake keys and URLs: most servers
list their tools without valid credentials, none is called), given 30 s to answer
`initialize` and every `tools/list` page (cursor pagination), then stopped. The collector
speaks newline-delimited JSON-RPC itself (protocol 2025-06-18, which every server here
accepts) instead of going through the MCP SDK's typed client, so the listing is written as
the server sent it, without a round trip through the SDK's models (which fill defaults and
drop fields they do not know). Kept per tool: name, title, description, inputSchema,
annotations, exactly as listed (outputSchema, icons, _meta and execution are left out).
A server listing more than CAP tools keeps its first CAP, in listing order.

Each snapshot file: {"server", "registry", "package", "version", "license", "collected",
"tools": [...]} with version and licence read from the installed package's own metadata
(package.json; the wheel's METADATA).
"""
import argparse
import asyncio
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "catalog"
CAP = 250
TIMEOUT = 30.0
KEEP = ("name", "title", "description", "inputSchema", "annotations")

# Fake credentials and endpoints: servers that insist on a variable to start get one.
DUMMY_ENV = {
    "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_dummy", "GITHUB_TOKEN": "ghp_dummy",
    "GITLAB_PERSONAL_ACCESS_TOKEN": "glpat-dummy", "GITLAB_API_URL": "https://gitlab.invalid/api/v4",
    "SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T000", "SLACK_MCP_XOXP_TOKEN": "xoxp-dummy",
    "BRAVE_API_KEY": "dummy", "GOOGLE_MAPS_API_KEY": "dummy", "EVERART_API_KEY": "dummy",
    "AWS_ACCESS_KEY_ID": "AKIADUMMY", "AWS_SECRET_ACCESS_KEY": "dummy", "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1", "FASTMCP_LOG_LEVEL": "ERROR",
    "NOTION_TOKEN": "ntn_dummy", "OPENAPI_MCP_HEADERS": "{}",
    "FIRECRAWL_API_KEY": "fc-dummy", "TAVILY_API_KEY": "tvly-dummy", "EXA_API_KEY": "dummy",
    "SUPABASE_ACCESS_TOKEN": "sbp_dummy", "SENTRY_ACCESS_TOKEN": "dummy", "SENTRY_HOST": "sentry.invalid",
    "STRIPE_SECRET_KEY": "sk_test_dummy", "PRIVATE_APP_ACCESS_TOKEN": "dummy",
    "HEROKU_API_KEY": "dummy", "MDB_MCP_CONNECTION_STRING": "mongodb://127.0.0.1:9/x",
    "ES_URL": "http://127.0.0.1:9", "ES_API_KEY": "dummy",
    "CIRCLECI_TOKEN": "dummy", "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "9", "MYSQL_USER": "x",
    "MYSQL_PASS": "x", "MYSQL_DB": "x", "AMAP_MAPS_API_KEY": "dummy",
    "DATADOG_API_KEY": "dummy", "DATADOG_APP_KEY": "dummy", "DD_API_KEY": "dummy", "DD_APP_KEY": "dummy",
    "PERPLEXITY_API_KEY": "pplx-dummy", "SHORTCUT_API_TOKEN": "dummy", "MAPBOX_ACCESS_TOKEN": "pk.dummy",
    "ARGOCD_BASE_URL": "https://argocd.invalid", "ARGOCD_API_TOKEN": "dummy",
    "AIRTABLE_API_KEY": "patdummy", "ASANA_ACCESS_TOKEN": "dummy", "PINECONE_API_KEY": "dummy",
    "LINEAR_API_KEY": "lin_api_dummy", "LAUNCHDARKLY_API_KEY": "api-dummy",
    "FIGMA_API_KEY": "figd_dummy", "CHANNEL_ACCESS_TOKEN": "dummy", "DESTINATION_USER_ID": "U0",
    "MONDAY_TOKEN": "dummy", "CLOUDFLARE_API_TOKEN": "dummy", "CLOUDFLARE_ACCOUNT_ID": "0",
    "DSN": "sqlite:///tmp/toolcat-dbhub.db", "POSTMAN_API_KEY": "PMAK-dummy",
    "JIRA_URL": "https://jira.invalid", "JIRA_USERNAME": "x", "JIRA_API_TOKEN": "dummy",
    "CONFLUENCE_URL": "https://confluence.invalid/wiki", "CONFLUENCE_USERNAME": "x",
    "CONFLUENCE_API_TOKEN": "dummy", "QDRANT_URL": "http://127.0.0.1:9", "COLLECTION_NAME": "x",
    "EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
    "CLICKHOUSE_HOST": "127.0.0.1", "CLICKHOUSE_USER": "x", "CLICKHOUSE_PASSWORD": "x",
    "GRAFANA_URL": "http://127.0.0.1:9", "GRAFANA_API_KEY": "dummy",
    "OBSIDIAN_API_KEY": "dummy", "PAGERDUTY_USER_API_KEY": "dummy",
    "NEO4J_URI": "bolt://127.0.0.1:9", "NEO4J_USERNAME": "x", "NEO4J_PASSWORD": "x",
    "SNOWFLAKE_ACCOUNT": "x", "SNOWFLAKE_USER": "x", "SNOWFLAKE_PASSWORD": "x",
    "DATABASE_URI": "postgresql://x:x@127.0.0.1:9/x", "DBT_HOST": "x", "DBT_PROJECT_DIR": "/tmp",
    "OPENSEARCH_URL": "http://127.0.0.1:9", "ZOTERO_LOCAL": "true",
    "ZOTERO_API_KEY": "dummy", "ZOTERO_LIBRARY_ID": "0",
    "GOOGLE_OAUTH_CREDENTIALS": "/tmp/toolcat-none.json", "MS365_MCP_CLIENT_ID": "dummy",
    "TWILIO_ACCOUNT_SID": "ACdummy", "TWILIO_API_KEY": "SKdummy", "TWILIO_API_SECRET": "dummy",
    "AZURE_TOKEN_CREDENTIALS": "dev", "KUBECONFIG": "/tmp/toolcat-none-kubeconfig",
    "DOTNET_CLI_TELEMETRY_OPTOUT": "1", "NO_UPDATE_NOTIFIER": "1", "DISABLE_TELEMETRY": "1",
    "HOSTINGER_API_TOKEN": "dummy", "REPLICATE_API_TOKEN": "dummy",
}

# name → (registry, package, command after the installed bin: [bin name or None, args…]).
# A bin of None means the package's only (or first) executable.
SERVERS = {
    # npm, reference servers
    "everything": ("npm", "@modelcontextprotocol/server-everything", [None, "stdio"]),
    "memory": ("npm", "@modelcontextprotocol/server-memory", [None]),
    "filesystem": ("npm", "@modelcontextprotocol/server-filesystem", [None, "/tmp"]),
    "sequential-thinking": ("npm", "@modelcontextprotocol/server-sequential-thinking", [None]),
    "github": ("npm", "@modelcontextprotocol/server-github", [None]),
    "gitlab": ("npm", "@modelcontextprotocol/server-gitlab", [None]),
    "slack": ("npm", "@modelcontextprotocol/server-slack", [None]),
    "puppeteer": ("npm", "@modelcontextprotocol/server-puppeteer", [None]),
    "brave-search-legacy": ("npm", "@modelcontextprotocol/server-brave-search", [None]),
    "google-maps": ("npm", "@modelcontextprotocol/server-google-maps", [None]),
    "postgres": ("npm", "@modelcontextprotocol/server-postgres", [None, "postgresql://x:x@127.0.0.1:9/x"]),
    "everart": ("npm", "@modelcontextprotocol/server-everart", [None]),
    "aws-kb-retrieval": ("npm", "@modelcontextprotocol/server-aws-kb-retrieval", [None]),
    # npm, vendors and community
    "playwright": ("npm", "@playwright/mcp", [None]),
    "chrome-devtools": ("npm", "chrome-devtools-mcp", [None]),
    "notion": ("npm", "@notionhq/notion-mcp-server", [None]),
    "desktop-commander": ("npm", "@wonderwhy-er/desktop-commander", [None]),
    "firecrawl": ("npm", "firecrawl-mcp", [None]),
    "tavily": ("npm", "tavily-mcp", [None]),
    "exa": ("npm", "exa-mcp-server", [None]),
    "sentry": ("npm", "@sentry/mcp-server", [None]),
    "hubspot": ("npm", "@hubspot/mcp-server", [None]),
    "context7": ("npm", "@upstash/context7-mcp", [None]),
    "browsermcp": ("npm", "@browsermcp/mcp", [None]),
    "mongodb": ("npm", "mongodb-mcp-server", [None]),
    "elasticsearch": ("npm", "@elastic/mcp-server-elasticsearch", [None]),
    "shopify-dev": ("npm", "@shopify/dev-mcp", [None]),
    "circleci": ("npm", "@circleci/mcp-server-circleci", [None]),
    "playwright-ea": ("npm", "@executeautomation/playwright-mcp-server", [None]),
    "brave-search": ("npm", "@brave/brave-search-mcp-server", [None]),
    "antv-chart": ("npm", "@antv/mcp-server-chart", [None]),
    "amap": ("npm", "@amap/amap-maps-mcp-server", [None]),
    "gitlab-zereight": ("npm", "@zereight/mcp-gitlab", [None]),
    "datadog": ("npm", "@winor30/mcp-server-datadog", [None]),
    "perplexity": ("npm", "@perplexity-ai/mcp-server", [None]),
    "shortcut": ("npm", "@shortcut/mcp", [None]),
    "mapbox": ("npm", "@mapbox/mcp-server", [None]),
    "argocd": ("npm", "argocd-mcp", [None, "stdio"]),
    "airbnb": ("npm", "@openbnb/mcp-server-airbnb", [None]),
    "airtable": ("npm", "airtable-mcp-server", [None]),
    "asana": ("npm", "@roychri/mcp-server-asana", [None]),
    "pinecone": ("npm", "@pinecone-database/mcp", [None]),
    "excel": ("npm", "@negokaz/excel-mcp-server", [None]),
    "pdf-reader": ("npm", "@sylphx/pdf-reader-mcp", [None]),
    "git-cyanheads": ("npm", "@cyanheads/git-mcp-server", [None]),
    "reddit": ("npm", "reddit-mcp-buddy", [None]),
    "launchdarkly": ("npm", "@launchdarkly/mcp-server", [None, "start", "--api-key", "api-dummy"]),
    "figma": ("npm", "figma-developer-mcp", [None, "--stdio"]),
    "line-bot": ("npm", "@line/line-bot-mcp-server", [None]),
    "monday": ("npm", "@mondaydotcomorg/monday-api-mcp", [None, "-t", "dummy"]),
    "cloudflare": ("npm", "@cloudflare/mcp-server-cloudflare", [None, "run", "0"]),
    "dbhub": ("npm", "@bytebase/dbhub", [None, "--transport", "stdio", "--dsn", "sqlite:///tmp/toolcat-dbhub.db"]),
    "azure": ("npm", "@azure/mcp", [None, "server", "start"]),
    "ms-365": ("npm", "@softeria/ms-365-mcp-server", [None]),
    "drawio": ("npm", "@drawio/mcp", [None]),
    # PyPI
    "time": ("pypi", "mcp-server-time", [None]),
    "git": ("pypi", "mcp-server-git", [None]),
    "fetch": ("pypi", "mcp-server-fetch", [None]),
    "sqlite": ("pypi", "mcp-server-sqlite", [None, "--db-path", "/tmp/toolcat-sqlite.db"]),
    "atlassian": ("pypi", "mcp-atlassian", [None]),
    "clickhouse": ("pypi", "mcp-clickhouse", [None]),
    "grafana": ("pypi", "mcp-grafana", [None]),
    "obsidian": ("pypi", "mcp-obsidian", [None]),
    "aws-documentation": ("pypi", "awslabs-aws-documentation-mcp-server", [None]),
    "aws-dynamodb": ("pypi", "awslabs-dynamodb-mcp-server", [None]),
    "aws-cloudwatch": ("pypi", "awslabs-cloudwatch-mcp-server", [None]),
    "aws-eks": ("pypi", "awslabs-eks-mcp-server", [None]),
    "aws-pricing": ("pypi", "awslabs-aws-pricing-mcp-server", [None]),
    "aws-billing": ("pypi", "awslabs-billing-cost-management-mcp-server", [None]),
    "aws-location": ("pypi", "awslabs-aws-location-mcp-server", [None]),
    "aws-redshift": ("pypi", "awslabs-redshift-mcp-server", [None]),
    "aws-iac": ("pypi", "awslabs-aws-iac-mcp-server", [None]),
    "aws-ecs": ("pypi", "awslabs-ecs-mcp-server", [None]),
    "word": ("pypi", "office-word-mcp-server", [None]),
    "excel-py": ("pypi", "excel-mcp-server", [None, "stdio"]),
    "powerpoint": ("pypi", "office-powerpoint-mcp-server", [None]),
    "arxiv": ("pypi", "arxiv-mcp-server", [None]),
    "duckduckgo": ("pypi", "duckduckgo-mcp-server", [None]),
    "google-analytics": ("pypi", "analytics-mcp", [None]),
    "neo4j-cypher": ("pypi", "mcp-neo4j-cypher", [None]),
    "markitdown": ("pypi", "markitdown-mcp", [None]),
    "calculator": ("pypi", "mcp-server-calculator", [None]),
    "opensearch": ("pypi", "opensearch-mcp-server-py", [None]),
    "zotero": ("pypi", "zotero-mcp", [None]),
    "yahoo-finance": ("pypi", "mcp-yahoo-finance", [None]),
}

# Packages written against the MCP Python SDK 1.x that do not pin it.
PIP_EXTRA = {"mcp-server-sqlite": ["mcp<2"], "office-powerpoint-mcp-server": ["mcp<2"]}

# Tried and left out (why), at the versions the registries had when collected.
SKIPPED = {
    "redis": "@modelcontextprotocol/server-redis: waits for a Redis connection before answering",
    "kubernetes": "mcp-server-kubernetes: exits without a kubeconfig",
    "supabase": "@supabase/mcp-server-supabase: tools/list fetches from the network",
    "stripe": "@stripe/mcp: no answer within 30 s",
    "heroku": "@heroku/mcp-server: exits without the Heroku CLI",
    "mysql": "@benborla29/mcp-server-mysql: exits without a database",
    "azure-devops": "@azure-devops/mcp: install fails (keytar native build)",
    "google-calendar": "@cocal/google-calendar-mcp: exits without OAuth credentials",
    "mermaid": "mcp-mermaid: install fails",
    "linear": "linear-mcp: ships no executable",
    "twilio": "@twilio-alpha/mcp: exits on dummy credentials",
    "lark": "@larksuiteoapi/lark-mcp: install fails",
    "postman": "@postman/postman-mcp-server: install fails",
    "qdrant": "mcp-server-qdrant: loads an embedding model from the network at start",
    "motherduck": "mcp-server-motherduck: exits on an in-memory database without --read-write",
    "aws-lambda-tool": "awslabs-lambda-tool-mcp-server: exits without an AWS profile",
    "chroma": "chroma-mcp: import error (pydantic)",
    "snowflake": "snowflake-labs-mcp: exits without a service configuration file",
    "postgres-pro": "postgres-mcp: no version installs",
    "dbt": "dbt-mcp: needs Python 3.12",
    "pagerduty": "pagerduty-mcp: needs Python 3.12",
    "neo4j-memory": "mcp-neo4j-memory: exits without a database",
}


def license_file(folder: Path) -> str:
    """The licence a LICENSE file in `folder` (or its licenses/) states, by its first lines."""
    for f in sorted(folder.glob("LICEN[CS]E*")) + sorted(folder.glob("licenses/*")):
        head = f.read_text(errors="replace")[:600]
        for key, name in (("MIT License", "MIT"), ("Permission is hereby granted, free of charge", "MIT"),
                          ("Apache License", "Apache-2.0"), ("BSD 3-Clause", "BSD-3-Clause"),
                          ("Mozilla Public License", "MPL-2.0"), ("ISC License", "ISC")):
            if key in head:
                return f"{name} (LICENSE file)"
    return ""


def npm_dir(scratch: Path, package: str) -> Path:
    return scratch / "npm" / package.replace("/", "_").replace("@", "_")


def npm_meta(scratch: Path, package: str) -> tuple[list[str], str, str]:
    """(bin paths, version, licence) of an installed npm package."""
    root = npm_dir(scratch, package) / "node_modules" / package
    pj = json.loads((root / "package.json").read_text())
    b = pj.get("bin") or {}
    if isinstance(b, str):
        b = {package.split("/")[-1]: b}
    bins = [str(npm_dir(scratch, package) / "node_modules/.bin" / k) for k in b]
    lic = pj.get("license") or ""
    if isinstance(lic, dict):
        lic = lic.get("type", "")
    if not lic and pj.get("licenses"):
        lic = " OR ".join(x.get("type", "") for x in pj["licenses"])
    if not lic or lic.startswith("SEE LICENSE"):
        lic = license_file(root) or lic or "not stated"
    return bins, pj["version"], lic


def pypi_meta(scratch: Path, package: str) -> tuple[list[str], str, str]:
    """(console scripts, version, licence) of a PyPI package installed in its own venv."""
    venv = scratch / "py" / package
    norm = re.sub(r"[-_.]+", "_", package).lower()
    for d in (venv / "lib").glob("python*/site-packages/*.dist-info"):
        if re.sub(r"[-_.]+", "_", d.name.removesuffix(".dist-info").rsplit("-", 1)[0]).lower() != norm:
            continue
        meta = (d / "METADATA").read_text(errors="replace").split("\n\n", 1)[0]
        fields: dict[str, list[str]] = {}
        for line in meta.splitlines():
            if ": " in line and not line.startswith(" "):
                k, v = line.split(": ", 1)
                fields.setdefault(k, []).append(v.strip())
        lic = (fields.get("License-Expression") or [""])[0]
        if not lic:
            lic = (fields.get("License") or [""])[0]
            if len(lic) > 40 or "\n" in lic:  # a whole licence text: take the classifier
                lic = ""
        if not lic:
            cls = [c.split("::")[-1].strip() for c in fields.get("Classifier", []) if c.startswith("License ::")]
            lic = " OR ".join(cls)
        lic = lic or license_file(d) or "not stated"
        scripts = []
        ep = d / "entry_points.txt"
        if ep.exists():
            section = ""
            for line in ep.read_text().splitlines():
                if line.startswith("["):
                    section = line.strip("[] ")
                elif section == "console_scripts" and "=" in line:
                    scripts.append(str(venv / "bin" / line.split("=")[0].strip()))
        return scripts, fields["Version"][0], lic
    raise FileNotFoundError(f"{package}: not installed in {venv}")


async def list_tools(cmd: list[str], env: dict[str, str]) -> tuple[list[dict], dict]:
    """(tools as listed, serverInfo) from a stdio server, raw JSON."""
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env, cwd="/tmp", limit=64 * 1024 * 1024,
        start_new_session=True)
    pending: dict[int, asyncio.Future] = {}

    async def reader():
        while True:
            line = await proc.stdout.readline()
            if not line:
                for f in pending.values():
                    if not f.done():
                        f.set_exception(EOFError("server closed stdout"))
                return
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # a log line on stdout
            if not isinstance(msg, dict):
                continue
            if "method" in msg and "id" in msg:  # a request from the server
                result = {"roots": []} if msg["method"] == "roots/list" else {}
                send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            elif "id" in msg and msg["id"] in pending:
                pending.pop(msg["id"]).set_result(msg)

    def send(msg):
        proc.stdin.write((json.dumps(msg) + "\n").encode())

    next_id = [0]

    async def request(method, params):
        next_id[0] += 1
        f = asyncio.get_running_loop().create_future()
        pending[next_id[0]] = f
        send({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params})
        await proc.stdin.drain()
        msg = await f
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg["result"]

    task = asyncio.create_task(reader())
    try:
        init = await request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": False}},
            "clientInfo": {"name": "quarry-toolcat", "version": "1"}})
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools, cursor = [], None
        while True:
            res = await request("tools/list", {"cursor": cursor} if cursor else {})
            tools += res.get("tools", [])
            cursor = res.get("nextCursor")
            if not cursor:
                break
        return tools, init.get("serverInfo", {})
    finally:
        task.cancel()
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        await proc.wait()


def install(scratch: Path, registry: str, package: str) -> None:
    if registry == "npm":
        d = npm_dir(scratch, package)
        if (d / "node_modules" / package / "package.json").exists():
            return
        d.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PUPPETEER_SKIP_DOWNLOAD="1", PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
        subprocess.run(["npm", "install", "--prefix", str(d), "--no-audit", "--no-fund", package],
                       env=env, check=True, capture_output=True, timeout=600)
    else:
        venv = scratch / "py" / package
        if (venv / "bin" / "python").exists():
            return
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin/pip"), "install", "-q", package, *PIP_EXTRA.get(package, [])], check=True,
                       capture_output=True, timeout=600)


async def collect(name: str, scratch: Path) -> str:
    registry, package, spec = SERVERS[name]
    bins, version, lic = (npm_meta if registry == "npm" else pypi_meta)(scratch, package)
    if not bins:
        raise RuntimeError("no executable")
    exe = bins[0] if spec[0] is None else next(b for b in bins if b.endswith("/" + spec[0]))
    env = dict(os.environ, **DUMMY_ENV)
    tools, _info = await asyncio.wait_for(list_tools([exe, *spec[1:]], env), TIMEOUT)
    if not tools:
        raise RuntimeError("listed no tools")
    total = len(tools)
    tools = [{k: t[k] for k in KEEP if k in t} for t in tools[:CAP]]
    out = {"server": name, "registry": registry, "package": package, "version": version,
           "license": lic, "collected": datetime.date.today().isoformat(), "tools": tools}
    if total > CAP:
        out["listed"] = total
    CATALOG.mkdir(parents=True, exist_ok=True)
    (CATALOG / f"{name}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    return f"{len(tools)} tools" + (f" (capped from {total})" if total > CAP else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scratch", default="/work/toolcat", type=Path)
    ap.add_argument("--only", help="comma-separated server names")
    ap.add_argument("--install", action="store_true", help="install missing packages first")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else list(SERVERS)
    for name in names:
        registry, package, _ = SERVERS[name]
        try:
            if a.install:
                install(a.scratch, registry, package)
            print(f"{name:<22} {asyncio.run(collect(name, a.scratch))}", flush=True)
        except Exception as e:  # noqa: BLE001 — report and go on with the next server
            print(f"{name:<22} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
