"""A stdio (or Streamable HTTP) MCP server with N generated tools, for bench/hub/run.py.

    python bench/hub/big_server.py [--tools 1000] [--name big] [--http PORT]

Tools are named SERVICE_ACTION_OBJECT (e.g. `github_create_issue`) with a one-line
description built from the same words plus a synonym or two, so a catalog search has
something to rank: 25 services x 8 actions x 5 objects = 1,000 distinct tools; with fewer,
the first N. Each takes (query: str, limit: int = 10) and returns one line of text.
Uses the official MCP Python SDK (`mcp` >= 2: `mcp.server.mcpserver.MCPServer`).
"""

import argparse

SERVICES = [
    ("github", "GitHub", "code hosting"), ("gitlab", "GitLab", "code hosting"),
    ("jira", "Jira", "issue tracker"), ("linear", "Linear", "issue tracker"),
    ("slack", "Slack", "team chat"), ("discord", "Discord", "community chat"),
    ("gmail", "Gmail", "email"), ("outlook", "Outlook", "email and calendar"),
    ("gcal", "Google Calendar", "calendar"), ("notion", "Notion", "wiki and notes"),
    ("confluence", "Confluence", "wiki"), ("gdrive", "Google Drive", "file storage"),
    ("s3", "Amazon S3", "object storage"), ("postgres", "PostgreSQL", "relational database"),
    ("mysql", "MySQL", "relational database"), ("redis", "Redis", "key-value cache"),
    ("k8s", "Kubernetes", "container orchestration"), ("docker", "Docker", "containers"),
    ("stripe", "Stripe", "payments"), ("shopify", "Shopify", "online store"),
    ("salesforce", "Salesforce", "CRM"), ("hubspot", "HubSpot", "marketing CRM"),
    ("weather", "OpenWeather", "weather forecasts"), ("maps", "Google Maps", "maps and places"),
    ("sentry", "Sentry", "error monitoring"),
]
ACTIONS = [
    ("list", "List", "with paging and filters"), ("get", "Fetch one", "by its id"),
    ("create", "Create a new", "from the given fields"),
    ("update", "Update an existing", "changing only the given fields"),
    ("delete", "Delete", "permanently; cannot be undone"),
    ("search", "Search", "by keywords, ranked by relevance"),
    ("archive", "Archive", "so it no longer shows in default listings"),
    ("export", "Export", "as CSV or JSON for reporting"),
]
OBJECTS = ["item", "record", "comment", "attachment", "event"]
OBJECT_WORDS = {
    "github": ["issue", "pull_request", "repository", "commit", "release"],
    "gitlab": ["merge_request", "pipeline", "project", "issue", "tag"],
    "jira": ["ticket", "sprint", "epic", "board", "worklog"],
    "linear": ["issue", "cycle", "project", "team", "label"],
    "slack": ["message", "channel", "thread", "reaction", "user"],
    "discord": ["message", "server", "channel", "role", "member"],
    "gmail": ["email", "draft", "label", "thread", "attachment"],
    "outlook": ["email", "meeting", "contact", "folder", "rule"],
    "gcal": ["event", "calendar", "invite", "reminder", "availability"],
    "notion": ["page", "database", "block", "comment", "workspace"],
    "confluence": ["page", "space", "blog_post", "comment", "template"],
    "gdrive": ["file", "folder", "permission", "revision", "shared_drive"],
    "s3": ["bucket", "object", "policy", "lifecycle_rule", "presigned_url"],
    "postgres": ["table", "row", "index", "query_plan", "backup"],
    "mysql": ["table", "row", "user", "slow_query", "replica"],
    "redis": ["key", "stream", "hash", "pubsub_channel", "snapshot"],
    "k8s": ["pod", "deployment", "service", "pod_log", "namespace"],
    "docker": ["container", "image", "volume", "network", "container_log"],
    "stripe": ["payment", "refund", "invoice", "customer", "subscription"],
    "shopify": ["order", "product", "inventory_level", "discount", "fulfillment"],
    "salesforce": ["lead", "opportunity", "account", "contact", "report"],
    "hubspot": ["contact", "deal", "campaign", "form_submission", "company"],
    "weather": ["forecast", "current_conditions", "alert", "air_quality", "history"],
    "maps": ["place", "route", "geocode", "distance_matrix", "timezone"],
    "sentry": ["issue", "event", "release", "alert_rule", "project"],
}


def tool_specs(n):
    out = []
    for svc, svc_name, svc_kind in SERVICES:
        for obj in OBJECT_WORDS.get(svc, OBJECTS):
            for act, act_text, act_tail in ACTIONS:
                name = f"{svc}_{act}_{obj}"
                noun = obj.replace("_", " ")
                desc = (f"{act_text} {noun}{'s' if act in ('list', 'search', 'export') else ''} "
                        f"in {svc_name} ({svc_kind}) {act_tail}.")
                out.append((name, desc))
    return out[:n]


def make_fn(name):
    def fn(query: str, limit: int = 10) -> str:
        return f"{name}: {limit} results for {query!r}"
    fn.__name__ = name
    return fn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", type=int, default=1000)
    ap.add_argument("--name", default="big")
    ap.add_argument("--http", type=int, help="serve Streamable HTTP on this port, not stdio")
    a = ap.parse_args()
    from mcp.server.mcpserver import MCPServer
    server = MCPServer(a.name, log_level="WARNING")
    for name, desc in tool_specs(a.tools):
        server.add_tool(make_fn(name), name=name, description=desc)
    if a.http:
        server.run("streamable-http", host="127.0.0.1", port=a.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
