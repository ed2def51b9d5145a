"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, 0.1.x) against the
tool hub: every server scenario runs (a) directly against the suite's fixture server and (b)
through `quarry serve`'s hub endpoint in front of that same server.

The fixture (`upstreams/conformance_server.py`, on the official Python SDK) implements what the
suite's server scenarios call (`test_simple_text`, `test://static-text`, `test_simple_prompt`,
…; the suite does not publish its own). It is registered with the hub as the Streamable HTTP
upstream `conf`, and the suite is pointed at `<base>/api/mcp?servers=conf&names=tool`: that
endpoint exposes the package's tools, resources and prompts under the upstream's own names, which
the scenarios call by fixed names. The hub speaks 2026-07-28 to the fixture (discovered with
`server/discover`) and 2025-11-25 to the suite.

Tables:

- PASS_BOTH: every check passes both ways (WARNING and INFO allowed, at least one SUCCESS).
- HUB_DIFFERS: passes direct; through the hub the scenario fails for the reason given, and every
  failing check must match the regex (so it cannot start failing for another reason unnoticed).
- DIRECT_WARNS: no check fails either way, but direct yields only warnings (an SDK choice, see the
  reason; each WARNING must match the regex); through the hub it passes.

A scenario the suite lists that is in no table fails `test_every_scenario_is_classified`, so a
new suite version forces a decision; a HUB_DIFFERS scenario that starts passing through the hub
fails too, so it is moved to PASS_BOTH.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from conftest import free_port, make_home, start_server, wait_port, settled

HERE = Path(__file__).parent
FIXTURE = HERE / "upstreams" / "conformance_server.py"

# Scenario -> what it checks. Must pass direct and through the hub.
PASS_BOTH: dict[str, str] = {
    "server-initialize": "initialize handshake (the hub answers it itself)",
    "ping": "ping answers {}",
    "tools-list": "the fixture's 14 tools, each with name, description, inputSchema",
    "tools-call-simple-text": "text content passes through",
    "tools-call-image": "image content (data, mimeType) passes through",
    "tools-call-audio": "audio content (audio/wav) passes through",
    "tools-call-embedded-resource": "embedded resource content passes through",
    "tools-call-mixed-content": "text + image + resource in one result pass through",
    "tools-call-error": "a tool error stays a result with isError: true and its message",
    "tools-call-with-progress": "three increasing notifications/progress relayed with the caller's token",
    "json-schema-2020-12": "$schema, $defs and additionalProperties of an inputSchema kept verbatim",
    "resources-list": "the upstream's resources listed with uri and name",
    "resources-read-text": "resources/read of test://static-text forwarded",
    "resources-read-binary": "resources/read of test://static-binary (blob) forwarded",
    "resources-templates-read": "a templated URI (test://template/123/data) read through the upstream",
    "prompts-list": "the upstream's prompts listed with name and description",
    "prompts-get-simple": "prompts/get forwarded",
    "prompts-get-with-args": "prompt arguments forwarded and substituted",
    "prompts-get-embedded-resource": "a prompt message with an embedded resource passes through",
    "prompts-get-with-image": "a prompt message with an image passes through",
    "completion-complete": (
        "completion/complete answers a values array; through the hub it is the hub's own empty "
        "answer, not the upstream's (see test_completions_are_answered_by_the_hub_not_forwarded)"
    ),
    "server-sse-multiple-streams": "concurrent POST SSE streams on one session",
    "dns-rebinding-protection": "foreign Host/Origin rejected, localhost accepted (each server checks its own)",
}

_NO_BACK_CHANNEL = (
    "the hub relays no server-to-client requests (a gateway cannot route them back to a human "
    "or a model); the fixture, spoken to at 2026-07-28, asks with an InputRequiredResult, which the "
    "hub turns into an isError result"
)

# Scenario -> (why it differs through the hub, regex every failing check must match; it is
# searched in the check's errorMessage followed by its details as JSON).
HUB_DIFFERS: dict[str, tuple[str, str]] = {
    "logging-set-level": (
        "the hub declares no `logging` capability and answers logging/setLevel with method not found",
        r"-32601.*logging/setLevel",
    ),
    "tools-call-with-logging": (
        "needs logging/setLevel (not served by the hub) and log notifications from the upstream",
        r"-32601.*logging/setLevel",
    ),
    "tools-call-sampling": (f"sampling: {_NO_BACK_CHANNEL}", r"(?is)did not request sampling.*(input.?required|client input)"),
    "tools-call-elicitation": (f"elicitation: {_NO_BACK_CHANNEL}", r"(?is)did not request elicitation.*(input.?required|client input)"),
    "elicitation-sep1034-defaults": (f"elicitation: {_NO_BACK_CHANNEL}", r"did not request elicitation"),
    "elicitation-sep1330-enums": (f"elicitation: {_NO_BACK_CHANNEL}", r"did not request elicitation"),
    "resources-subscribe": (
        "the hub declares `resources` without `subscribe` and does not forward resources/subscribe",
        r"-32601.*resources/subscribe",
    ),
    "resources-unsubscribe": (
        "the scenario subscribes first: resources/subscribe is not forwarded by the hub",
        r"-32601.*resources/(un)?subscribe",
    ),
}

# Scenario -> (why direct yields only warnings, regex every direct WARNING must match).
DIRECT_WARNS: dict[str, tuple[str, str]] = {
    "server-sse-polling": (
        "the suite's raw tools/call POST (test_reconnection) carries `mcp-protocol-version: "
        "2025-03-26`; the Python SDK sends the priming event and `retry:` and lets a tool close its "
        "stream (SEP-1699) only for clients at 2025-11-25 or later, so the call is answered on the "
        "first stream without them. Through the hub, Quarry's own SSE layer primes every POST stream "
        "and the result arrives on it",
        r"priming event|retry field",
    ),
}

UPSTREAM = "conf"


def _describe(checks: list[dict]) -> str:
    return json.dumps(
        [
            {k: c.get(k) for k in ("id", "status", "errorMessage", "details")}
            for c in checks
            if c.get("status") != "INFO"
        ],
        indent=1,
    )[:4000]


def _with(checks: list[dict], status: str) -> list[dict]:
    return [c for c in checks if c.get("status") == status]


def _text(check: dict) -> str:
    return f"{check.get('errorMessage') or ''} {json.dumps(check.get('details'))}"


@pytest.fixture(scope="module")
def fixture_url(tmp_path_factory: pytest.TempPathFactory):
    """The suite's fixture server (official Python SDK) on a free loopback port."""
    log = tmp_path_factory.mktemp("conformance-fixture") / "server.log"
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(FIXTURE), str(port)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        wait_port(port, proc, "conformance_server.py", log=log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def hub(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory, fixture_url: str):
    """A loopback `quarry serve` (the machine's owner) with the fixture registered as `conf`."""
    root = tmp_path_factory.mktemp("hub-conformance")
    home = make_home(quarry_bin, corpus, root / "home")
    srv = start_server(home, logdir=root / "logs")
    try:
        r = requests.post(
            srv.url("/api/v1/mcp/servers"),
            json={"name": UPSTREAM, "transport_type": "http", "config": fixture_url},
            timeout=120,
        )
        assert r.status_code == 201, r.text
        info = settled(srv, r.json()["data"])
        assert info["status"] == "ready", info
        assert info["package"] == UPSTREAM and info["tool_count"] == 14, info
        yield {"srv": srv, "info": info, "url": srv.url(f"/api/mcp?servers={UPSTREAM}&names=tool")}
    finally:
        srv.stop()


def _run_suite(node_cli: list[str], url: str, out: Path) -> dict[str, list[dict]]:
    """Runs every server scenario (`--suite all`, pending ones included); scenario -> checks."""
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        [*node_cli, "server", "--url", url, "--suite", "all", "-o", str(out / "results")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=out,
    )
    by_scenario: dict[str, list[dict]] = {}
    for checks in (out / "results").glob("*/checks.json"):
        m = re.match(r"server-(.+)-\d{4}-\d{2}-\d{2}T", checks.parent.name)
        assert m, checks.parent.name
        by_scenario[m.group(1)] = json.loads(checks.read_text())
    assert by_scenario, (
        f"the suite produced no results for {url} (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    )
    return by_scenario


@pytest.fixture(scope="module")
def results(node_cli, fixture_url, hub, tmp_path_factory) -> dict[str, dict[str, list[dict]]]:
    """{"direct": scenario -> checks, "hub": scenario -> checks}; both runs at once."""
    out = tmp_path_factory.mktemp("conformance-runs")
    urls = {"direct": fixture_url, "hub": hub["url"]}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {way: pool.submit(_run_suite, node_cli, url, out / way) for way, url in urls.items()}
        runs = {way: f.result() for way, f in futures.items()}
    lines = []
    for name in sorted(set(runs["direct"]) | set(runs["hub"])):
        cells = []
        for way in ("direct", "hub"):
            checks = runs[way].get(name, [])
            verdict = "FAIL" if _with(checks, "FAILURE") else "pass" if _with(checks, "SUCCESS") else "warn"
            cells.append(f"{way}={verdict}")
        lines.append(f"  {name}: {', '.join(cells)}")
    print("\nconformance direct vs through the hub:\n" + "\n".join(lines))
    return runs


def test_every_scenario_is_classified(listed_scenarios):
    tables = [set(PASS_BOTH), set(HUB_DIFFERS), set(DIRECT_WARNS)]
    unknown = sorted(set(listed_scenarios) - set().union(*tables))
    assert not unknown, f"new conformance scenarios: classify them in PASS_BOTH, HUB_DIFFERS or DIRECT_WARNS: {unknown}"
    assert sum(map(len, tables)) == len(set().union(*tables)), "a scenario is in two tables"
    stale = sorted(set().union(*tables) - set(listed_scenarios))
    assert not stale, f"scenarios the suite no longer lists: {stale}"


def test_every_scenario_ran_both_ways(listed_scenarios, results):
    for way in ("direct", "hub"):
        assert sorted(set(listed_scenarios) - set(results[way])) == [], way


@pytest.mark.parametrize("way", ["direct", "hub"])
@pytest.mark.parametrize("scenario", sorted(PASS_BOTH))
def test_scenario_passes_both_ways(results, scenario, way):
    checks = results[way].get(scenario)
    assert checks, f"scenario {scenario} did not run ({way})"
    assert _with(checks, "SUCCESS"), _describe(checks)
    assert not _with(checks, "FAILURE"), f"{scenario} fails {way}:\n{_describe(checks)}"


@pytest.mark.parametrize("scenario", sorted(HUB_DIFFERS))
def test_scenario_passes_direct_and_differs_through_the_hub_for_its_reason(results, scenario):
    reason, expect = HUB_DIFFERS[scenario]
    direct = results["direct"].get(scenario)
    assert direct, f"scenario {scenario} did not run direct"
    assert _with(direct, "SUCCESS") and not _with(direct, "FAILURE"), (
        f"{scenario} fails against the fixture itself (fix conformance_server.py):\n{_describe(direct)}"
    )
    checks = results["hub"].get(scenario)
    assert checks, f"scenario {scenario} did not run through the hub"
    failed = _with(checks, "FAILURE")
    assert failed, f"{scenario} now passes through the hub: move it to PASS_BOTH ({reason})\n{_describe(checks)}"
    for c in failed:
        assert re.search(expect, _text(c)), (
            f"{scenario} fails through the hub for another reason than '{reason}':\n{_describe(checks)}"
        )


@pytest.mark.parametrize("scenario", sorted(DIRECT_WARNS))
def test_scenario_warns_direct_and_passes_through_the_hub(results, scenario):
    reason, expect = DIRECT_WARNS[scenario]
    direct = results["direct"].get(scenario)
    assert direct, f"scenario {scenario} did not run direct"
    assert not _with(direct, "FAILURE"), f"{scenario} fails direct:\n{_describe(direct)}"
    warned = _with(direct, "WARNING")
    assert warned, f"{scenario} no longer only warns direct: move it to PASS_BOTH ({reason})\n{_describe(direct)}"
    for c in warned:
        assert re.search(expect, _text(c)), (
            f"{scenario} warns direct for another reason than '{reason}':\n{_describe(direct)}"
        )
    hub_checks = results["hub"].get(scenario)
    assert hub_checks, f"scenario {scenario} did not run through the hub"
    assert _with(hub_checks, "SUCCESS") and not _with(hub_checks, "FAILURE"), _describe(hub_checks)


def _details(results, way: str, scenario: str, check_id: str) -> dict:
    checks = results[way][scenario]
    return next(c for c in checks if c.get("id") == check_id)["details"]


def test_completions_are_answered_by_the_hub_not_forwarded(results):
    """completion/complete passes both ways, but only the fixture really completes: the hub
    declares no `completions` capability and answers every request with an empty list."""
    direct = _details(results, "direct", "completion-complete", "completion-complete")["result"]["completion"]
    assert direct["values"] == ["testValue1"], direct  # the fixture completes arg1 = "test"
    through = _details(results, "hub", "completion-complete", "completion-complete")["result"]["completion"]
    assert through["values"] == [], (
        f"the hub now forwards completions: update PASS_BOTH's note and this test: {through}"
    )


def test_results_and_listings_are_the_upstreams(results):
    """What the suite saw through the hub is the fixture's own content, not the hub's."""
    for scenario, check_id, key in [
        ("tools-list", "tools-list", "tools"),
        ("resources-list", "resources-list", "resources"),
        ("prompts-list", "prompts-list", "prompts"),
    ]:
        direct = _details(results, "direct", scenario, check_id)[key]
        through = _details(results, "hub", scenario, check_id)[key]
        assert sorted(through) == sorted(direct), (scenario, direct, through)
    d = _details(results, "direct", "tools-call-simple-text", "tools-call-simple-text")["result"]
    h = _details(results, "hub", "tools-call-simple-text", "tools-call-simple-text")["result"]
    assert h["content"] == d["content"] and h.get("structuredContent") == d.get("structuredContent")
    d = _details(results, "direct", "tools-call-error", "tools-call-error")["result"]
    h = _details(results, "hub", "tools-call-error", "tools-call-error")["result"]
    assert "intentionally returns an error" in d["content"][0]["text"], d
    assert h["content"] == d["content"] and h["isError"] is True, h
    for scenario in ("prompts-get-with-args", "prompts-get-embedded-resource"):
        d = _details(results, "direct", scenario, scenario)["messages"]
        h = _details(results, "hub", scenario, scenario)["messages"]
        assert h == d, scenario
    d = _details(results, "direct", "resources-templates-read", "resources-templates-read")
    h = _details(results, "hub", "resources-templates-read", "resources-templates-read")
    assert h == d
