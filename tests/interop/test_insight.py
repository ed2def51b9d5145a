"""Insight for owners (issue 69, item 4) through the real binary: what a space is asked and
cannot answer, and its usage over time, over REST (``/api/v1/insight/unanswered``,
``/api/v1/insight/usage``, CSV) and ``/metrics``. Searches come from every surface a person or
agent uses: REST knowledge search (WeKnora's shape), QMD's ``/search``, MCP through the official
Python SDK in its default mode and the legacy handshake (``knowledge_search``, ``search``), and
chat (its retrieval, with the fake LLM).

Checked:
- rephrasings of one question group together (with their count per day and the latest
  wording); answered searches are not listed; a knowledge base's view holds only searches
  limited to it; each surface adds to the usage counts, per person and token, with the tool
  calls an agent made; the CSV export has the same lines; ``quarry_searches_total``;
- only the space's admins (with a managing credential) read it: an editor, a viewer and an
  owner's agent token without ``--manage`` are refused; bad parameters are refused naming
  them; an unknown knowledge base is not found;
- a search sent with ``X-Quarry-Insight: off`` (the insight page's own) is not counted;
- chat's model use (requests and tokens) per person and token; a space past
  ``QUARRY_MONTHLY_MODEL_TOKENS`` is refused chats (429 ``RATE_LIMITED``, naming the month's use
  and when it resets) while other surfaces work; a bad limit stops the server at start-up;
- remote model use (the fake model APIs): a REST ``/query``'s expansion, query embeddings and
  reranking, an MCP ``vsearch`` through the SDK's default mode, chat's retrieval, and the
  background embedding of an upload, each counted for the person and token it was for (the
  upload's for the space's background work) with the requests made and the tokens reported
  (estimated for the reranker, which reports none), by purpose, and on ``/metrics``;
- the space's own monthly limit: its owner sets it (an admin, an editor and a token without
  ``--manage`` cannot; bad bodies are refused naming the field); past it chats are refused
  naming whose limit it is; removing it lets them through; the server's
  ``QUARRY_MONTHLY_MODEL_TOKENS`` stays the ceiling above an owner's larger figure;
- ``QUARRY_INSIGHT_QUERIES=off`` keeps no question text (groups by a hash), and nothing
  answered keeps text either way;
- two nodes over PostgreSQL: a search on either node is in the views read on both.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
import requests
from conftest import QuarryHome, backend, make_home, second_node, start_server, wait_ready
from fake_llm import FakeLLM
from fake_models import FakeModels
from mcp import Client
from test_teams import assert_rest_error, http, ksearch, mcp_url, upload

HANDBOOK = "# Employee Handbook\n\nThe heron policy says lunch starts at noon.\n"
MODEL = "gpt-insight"
API_KEY = "sk-insight-test"
# One question, asked four ways on four surfaces; another asked once; one that is answered.
VPN = [
    "How do I reset my VPN password?",
    "vpn password reset",
    "Resetting the VPN password",
    "reset vpn passwords",
]
PARKING = "Where can I park a bicycle?"
ANSWERED = "heron policy lunch"


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@dataclass
class World:
    home: QuarryHome
    root: Path
    srv: object = None
    fake: FakeLLM | None = None
    kbs: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, dict] = field(default_factory=dict)

    def tok(self, key: str) -> str:
        return self.tokens[key]["token"]

    def cli_json(self, *args: str):
        r = self.home.run("--json", *args)
        assert r.returncode == 0, f"quarry {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return json.loads(r.stdout)


def build_world(quarry_bin: Path, corpus: Path, root: Path, env: dict[str, str] | None = None) -> World:
    fake = FakeLLM.start()
    home = make_home(quarry_bin, corpus, root / "home",
                     env={**fake.env(API_KEY), "QUARRY_OCR": "off", "QUARRY_WEB_SEARCH": "off", **(env or {})})
    w = World(home=home, root=root, fake=fake)
    w.cli_json("space", "create", "acme")
    for user, role in (("owner", "owner"), ("editor", "editor"), ("viewer", "viewer")):
        home.run("user", "add", user)
        assert home.run("space", "grant", "acme", user, "--role", role).returncode == 0
    files = root / "files"
    files.mkdir()
    (files / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    for kb in ("handbook", "travel"):
        w.kbs[kb] = w.cli_json("--space", "acme", "kb", "create", kb)["id"]
    up = w.cli_json("--space", "acme", "kb", "upload", "handbook", str(files / "handbook.md"))
    assert [d["status"] for d in up["documents"]] == ["ready"], up
    for key, user, args in (
        ("owner", "owner", ("--manage",)),
        ("owner_agent", "owner", ()),
        ("editor", "editor", ()),
        ("viewer", "viewer", ()),
        ("handbook_agent", "editor", ("--kb", "handbook")),
    ):
        w.tokens[key] = w.cli_json("token", "create", "--user", user, "--spaces", "acme", "--label", key, *args)
    return w


@pytest.fixture(scope="module")
def world(quarry_bin: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    w = build_world(quarry_bin, corpus, tmp_path_factory.mktemp("insight"))
    w.srv = start_server(w.home, "--auth", "token", "--chat-model", f"openai:{MODEL}", logdir=w.root / "logs")
    try:
        ask_everywhere(w)
        yield w
    finally:
        w.srv.stop()
        if w.fake:
            w.fake.stop()


async def mcp_search(url: str, mode: str, tool: str, args: dict) -> None:
    async with Client(url, mode=mode, read_timeout_seconds=60) as c:
        r = await c.call_tool(tool, args)
        assert r.is_error is not True, r


def ask_everywhere(w: World) -> None:
    """The searches every test below reads back."""
    editor = w.tok("editor")
    # REST knowledge search, limited to one knowledge base (WeKnora's shape).
    r = ksearch(w.srv, editor, {"question": VPN[0], "knowledge_base_id": w.kbs["handbook"]})
    assert r.status_code == 200 and r.json()["results"] == [], r.text
    # QMD's /search over the whole space.
    r = http(w.srv, "POST", "/search", editor, json={"query": VPN[1]})
    assert r.status_code == 200 and r.json()["results"] == [], r.text
    # MCP: the SDK's default mode with a knowledge-base-limited token, then the legacy handshake.
    anyio.run(mcp_search, mcp_url(w.srv, w.tok("handbook_agent")), "auto", "knowledge_search", {"query": VPN[2]})
    anyio.run(mcp_search, mcp_url(w.srv, editor), "legacy", "search", {"query": PARKING})
    # Chat: its retrieval finds nothing for the question.
    w.fake.script([{"text": "I do not know.", "usage": {"prompt_tokens": 300, "completion_tokens": 12}}])
    r = http(w.srv, "POST", "/api/v1/chat", editor,
             json={"message": VPN[3], "kb_ids": [w.kbs["handbook"]], "stream": False})
    assert r.status_code == 200, r.text
    assert r.json()["sources"] == [], r.json()
    # The insight page's own "closest passage" searches are not counted as questions asked.
    r = ksearch(w.srv, editor, {"question": PARKING}, headers={"X-Quarry-Insight": "off"})
    assert r.status_code == 200 and r.json()["results"] == [], r.text
    # Answered searches, from another person: over REST and over MCP (counted from the tool's
    # structuredContent).
    r = ksearch(w.srv, w.tok("viewer"), {"question": ANSWERED, "min_score": 0})
    assert r.status_code == 200 and r.json()["results"], r.text
    anyio.run(mcp_search, mcp_url(w.srv, w.tok("viewer")), "auto", "knowledge_search",
              {"query": ANSWERED, "min_score": 0})


def insight(w: World, view: str, token: str | None = None, srv=None, **params) -> requests.Response:
    return http(srv or w.srv, "GET", f"/api/v1/insight/{view}", token or w.tok("owner"), params=params)


def groups_of(r: requests.Response) -> list[dict]:
    assert r.status_code == 200, r.text
    return r.json()["data"]["groups"]


def test_unanswered_questions_group_rephrasings_from_every_surface(world):
    w = world
    data = insight(w, "unanswered").json()["data"]
    assert data["queries_kept"] is True and data["days"] == 30, data
    groups = data["groups"]
    assert [g["count"] for g in groups] == [4, 1], groups
    vpn, parking = groups
    assert vpn["wording"] == "password reset vpn", vpn
    # Every rephrasing has the same terms: one wording, the latest text shown.
    assert vpn["question"] == VPN[3] and vpn["variants"] == [], vpn
    assert sum(d["count"] for d in vpn["days"]) == 4 and len(vpn["days"]) == 1, vpn
    assert parking["question"] == PARKING and parking["wording"] == "bicycle park", parking
    listed = json.dumps(groups)
    assert "heron" not in listed, "an answered search is no unanswered question"

    # One knowledge base: only the searches limited to it (by id or by name).
    for key in (w.kbs["handbook"], "handbook"):
        only = insight(w, "unanswered", knowledge_base=key).json()["data"]
        assert only["knowledge_base"] == {"id": w.kbs["handbook"], "name": "handbook"}, only
        assert [g["count"] for g in only["groups"]] == [3], only
    assert groups_of(insight(w, "unanswered", knowledge_base="travel")) == []
    assert [g["count"] for g in groups_of(insight(w, "unanswered", limit=1))] == [4]


def test_usage_counts_every_surface_by_person_and_token(world):
    w = world
    r = insight(w, "usage", days=7)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert len(data["days"]) == 7 and len(data["metrics"][0]["per_day"]) == 7, data
    metrics = {m["metric"]: m for m in data["metrics"]}
    assert metrics["searches"]["count"] == 7, metrics["searches"]
    assert metrics["searches"]["per_day"][-1] == 7, "today is the last day"
    assert metrics["unanswered"]["count"] == 5, metrics["unanswered"]
    assert metrics["chat_answers"]["count"] == 1, metrics["chat_answers"]
    # What chat cost: one request to the model, the tokens it reported.
    assert (metrics["model_tokens"]["count"], metrics["model_tokens"]["total"]) == (1, 312), metrics["model_tokens"]
    assert metrics["tool_calls"]["count"] == 3, metrics["tool_calls"]
    subjects = {(s["metric"], s["subject"]): s["count"] for s in data["subjects"]}
    assert subjects[("tool_calls", "knowledge_search")] == 2 and subjects[("tool_calls", "search")] == 1, subjects
    assert subjects[("searches", "chat")] == 1 and subjects[("searches", "mcp:knowledge_search")] == 2, subjects
    assert subjects[("unanswered", "mcp:knowledge_search")] == 1, subjects
    people = {(p["user"], p["token"]): p["counts"] for p in data["people"]}
    spent = {(p["user"], p["token"]): p["totals"] for p in data["people"]}
    assert spent[("editor", "editor")]["model_tokens"] == 312 and "model_tokens" not in spent[("viewer", "viewer")], spent
    assert people[("editor", "editor")]["searches"] == 4, people
    assert people[("editor", "handbook_agent")] == {"searches": 1, "tool_calls": 1, "unanswered": 1}, people
    assert people[("viewer", "viewer")] == {"searches": 2, "tool_calls": 1}, people

    r = insight(w, "usage", format="csv", days=7)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv"), r.headers
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert {"day", "metric", "user", "user_id", "token", "token_id", "count", "total"} == set(rows[0]), rows[0]
    viewer = [x for x in rows if x["metric"] == "searches" and x["user"] == "viewer"]
    assert [(x["token"], x["count"]) for x in viewer] == [("viewer", "2")], rows
    assert sum(int(x["count"]) for x in rows if x["metric"] == "searches") == 7

    metrics_text = http(w.srv, "GET", "/metrics", w.tok("owner")).text
    assert 'quarry_searches_total{surface="chat",answered="no"} 1' in metrics_text, metrics_text[-2000:]
    assert 'quarry_searches_total{surface="mcp:knowledge_search",answered="yes"} 1' in metrics_text
    assert 'quarry_model_tokens_total{purpose="chat"} 312' in metrics_text


def test_only_the_spaces_admins_read_it_and_bad_parameters_are_refused(world):
    w = world
    for who in ("editor", "viewer", "handbook_agent"):
        for view in ("unanswered", "usage"):
            assert_rest_error(insight(w, view, w.tok(who)), 403)
    # The owner's agent token has no management scope: it reads neither others' questions nor
    # who did what.
    for view in ("unanswered", "usage"):
        assert_rest_error(insight(w, view, w.tok("owner_agent")), 403, "MANAGEMENT_FORBIDDEN")
    for params, fragment in (
        ({"days": "0"}, "days must be"),
        ({"days": "many"}, "days must be"),
        ({"limit": "0"}, "limit must be"),
        ({"format": "xml"}, "format must be"),
        ({"user": "editor"}, "unknown parameter 'user'"),
    ):
        view = "usage" if "format" in params else "unanswered"
        assert_rest_error(insight(w, view, **params), 400, fragment=fragment)
    assert_rest_error(insight(w, "usage", knowledge_base="handbook"), 400, fragment="unknown parameter")
    assert_rest_error(insight(w, "unanswered", knowledge_base="no-such-kb"), 404)


def test_question_text_is_not_kept_when_turned_off(quarry_bin, corpus, tmp_path):
    w = build_world(quarry_bin, corpus, tmp_path, env={"QUARRY_INSIGHT_QUERIES": "off"})
    w.srv = start_server(w.home, "--auth", "token", logdir=tmp_path / "logs")
    try:
        for q in VPN[:2]:
            r = http(w.srv, "POST", "/search", w.tok("editor"), json={"query": q})
            assert r.status_code == 200, r.text
        data = insight(w, "unanswered").json()["data"]
        assert data["queries_kept"] is False, data
        [group] = data["groups"]
        assert group["count"] == 2 and group["question"] is None, group
        assert group["wording"].startswith("h:") and "vpn" not in json.dumps(data).lower(), data
    finally:
        w.srv.stop()
        w.fake.stop()
    # Nothing of the question is in the embedded database either (its WAL included).
    for db in w.home.home.rglob("*.db*"):
        stored = db.read_bytes().lower()
        assert b"vpn password" not in stored and b"password reset" not in stored, db


def chat_until_refused(w: World, token: str, chat: dict, answered: str) -> requests.Response:
    """Chats (one token each) until one is refused, and that refusal: a chat's use reaches the
    store from the audit writer, which batches every 100 ms, so the chat after the one that
    crossed a limit may still be answered. `answered` says what went wrong if none is refused
    within 10 s."""
    deadline = time.monotonic() + 10
    while True:
        w.fake.script([{"text": "Again.", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}])
        r = http(w.srv, "POST", "/api/v1/chat", token, json=chat)
        if r.status_code != 200:
            return r
        assert time.monotonic() < deadline, answered
        time.sleep(0.2)


def test_a_space_over_its_monthly_model_tokens_is_refused_chats(quarry_bin, corpus, tmp_path):
    w = build_world(quarry_bin, corpus, tmp_path, env={"QUARRY_MONTHLY_MODEL_TOKENS": "500"})
    w.srv = start_server(w.home, "--auth", "token", "--chat-model", f"openai:{MODEL}", logdir=tmp_path / "logs")
    try:
        editor = w.tok("editor")
        w.fake.script([{"text": "One.", "usage": {"prompt_tokens": 400, "completion_tokens": 150}}])
        chat = {"message": "hello", "stream": False}
        r = http(w.srv, "POST", "/api/v1/chat", editor, json=chat)
        assert r.status_code == 200, r.text
        r = chat_until_refused(w, editor, chat, "a chat past the month's tokens was answered")
        body = assert_rest_error(r, 429, "RATE_LIMITED")
        assert "model tokens this month" in body["detail"] and "QUARRY_MONTHLY_MODEL_TOKENS" in body["detail"], body
        assert int(r.headers["Retry-After"]) > 0, r.headers
        # The server's limit is the ceiling: an owner's larger figure is kept, the server's applies.
        r = http(w.srv, "PUT", "/api/v1/insight/budget", w.tok("owner"), json={"monthly_model_tokens": 100000})
        assert r.status_code == 200, r.text
        b = r.json()["data"]
        assert (b["monthly_model_tokens"], b["server_limit"], b["limit"], b["remaining"]) == (100000, 500, 500, 0), b
        body = assert_rest_error(http(w.srv, "POST", "/api/v1/chat", editor, json=chat), 429, "RATE_LIMITED")
        assert "QUARRY_MONTHLY_MODEL_TOKENS" in body["detail"], body
        # The whole space is over, not only this token; other surfaces still work.
        assert_rest_error(http(w.srv, "POST", "/api/v1/chat", w.tok("owner"), json=chat), 429, "RATE_LIMITED")
        assert http(w.srv, "POST", "/search", editor, json={"query": "heron"}).status_code == 200
        usage = insight(w, "usage", days=1).json()["data"]
        spent = {m["metric"]: m for m in usage["metrics"]}["model_tokens"]
        assert spent["total"] >= 550, spent
    finally:
        w.srv.stop()
        w.fake.stop()
    # A limit that is not a number stops the server at start-up, naming it.
    r = w.home.with_env(QUARRY_MONTHLY_MODEL_TOKENS="lots").run("serve", "--port", "0", timeout=60)
    assert r.returncode != 0 and "QUARRY_MONTHLY_MODEL_TOKENS" in r.stderr, r.stderr[-2000:]


def wait_quiet(models: FakeModels, quiet: float = 1.5, timeout: float = 60) -> None:
    """Until the model APIs have had no request for `quiet` seconds (start-up work done)."""
    deadline = time.monotonic() + timeout
    while True:
        mark = models.mark()
        time.sleep(quiet)
        if models.mark() == mark:
            return
        assert time.monotonic() < deadline, "the server keeps calling the model APIs"


def model_token_metrics(w: World) -> dict[str, int]:
    """``quarry_model_tokens_total`` by purpose, from ``/metrics``."""
    text = http(w.srv, "GET", "/metrics", w.tok("owner")).text
    found = re.findall(r'^quarry_model_tokens_total\{purpose="([a-z]+)"\} (\d+)$', text, re.M)
    return {purpose: int(n) for purpose, n in found}


def test_remote_models_are_counted_for_the_person_the_token_and_the_space(quarry_bin, corpus, tmp_path):
    models = FakeModels.start()
    models.variants = ["midday meal rules", "lunch hour"]
    w = build_world(quarry_bin, corpus, tmp_path,
                    env=models.env(rerank="jina:fake-rerank", expand="openai:fake-chat"))
    w.srv = start_server(w.home, "--auth", "token", "--chat-model", f"openai:{MODEL}", logdir=tmp_path / "logs")
    try:
        wait_quiet(models)
        start = models.mark()
        # What the server metered before (embedding the default space's folder at start-up).
        before = model_token_metrics(w)
        expected: dict[tuple[str, str | None], list[int]] = {}  # (person, token) -> [requests, tokens]

        def booked_to(who: tuple[str, str | None], act) -> None:
            mark = models.mark()
            act()
            made = models.since(mark)
            assert made and all(m.status == 200 for m in made), made
            e = expected.setdefault(who, [0, 0])
            e[0] += len(made)
            e[1] += sum(m.tokens for m in made)

        def rest_query():
            r = http(w.srv, "POST", "/query", w.tok("editor"), json={"query": "when does lunch start"})
            assert r.status_code == 200 and r.json()["stages"] == ["expansion", "keyword", "vector", "rerank"], r.text

        booked_to(("editor", "editor"), rest_query)
        booked_to(("editor", "handbook_agent"), lambda: anyio.run(
            mcp_search, mcp_url(w.srv, w.tok("handbook_agent")), "auto", "vsearch", {"query": "heron noon"}))

        def chat():
            w.fake.script([{"text": "At noon.", "usage": {"prompt_tokens": 100, "completion_tokens": 5}}])
            r = http(w.srv, "POST", "/api/v1/chat", w.tok("viewer"),
                     json={"message": "when is the heron lunch", "kb_ids": [w.kbs["handbook"]], "stream": False})
            assert r.status_code == 200 and r.json()["sources"], r.text

        booked_to(("viewer", "viewer"), chat)
        # An upload is embedded by the server's workers: the space's background work.
        mark = models.mark()
        r = upload(w.srv, w.tok("owner"), w.kbs["travel"], "trains.md",
                   b"# Trains\n\nThe ptarmigan express leaves at dawn.\n")
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 60
        while not any("ptarmigan" in t for t in models.embedded_texts(mark)):
            assert time.monotonic() < deadline, "the upload was never embedded"
            time.sleep(0.2)
        wait_quiet(models)
        made = models.since(mark)
        expected[("(background work)", None)] = [len(made), sum(m.tokens for m in made)]
        assert models.mark() - start == sum(e[0] for e in expected.values()), "every request was booked to someone"

        by_purpose: dict[str, list[int]] = {}
        for m in models.since(start):
            purpose = {"/v1/embeddings": "embedding", "/v1/chat/completions": "expansion", "/rerank": "rerank"}[m.path]
            t = by_purpose.setdefault(purpose, [0, 0])
            t[0] += 1
            t[1] += m.tokens
        assert set(by_purpose) == {"embedding", "expansion", "rerank"}, by_purpose
        deadline = time.monotonic() + 15
        while True:
            data = insight(w, "usage", days=1).json()["data"]
            people = {(p["user"], p["token"]): p for p in data["people"]}
            got = {k: [p["counts"].get("model_tokens", 0), p["totals"].get("model_tokens", 0)] for k, p in people.items()}
            # Chat's own request to the chat model: one more request, the 105 tokens it reported.
            want = {k: list(v) for k, v in expected.items()}
            want[("viewer", "viewer")] = [want[("viewer", "viewer")][0] + 1, want[("viewer", "viewer")][1] + 105]
            if all(got.get(k) == v for k, v in want.items()):
                break
            assert time.monotonic() < deadline, (got, want)
            time.sleep(0.2)
        subjects = {s["subject"]: [s["count"], s["total"]] for s in data["subjects"] if s["metric"] == "model_tokens"}
        assert subjects == {**by_purpose, "chat": [1, 105]}, (subjects, by_purpose)
        assert people[("(background work)", None)]["user_id"] == "background", people
        after = model_token_metrics(w)
        grown = {p: after.get(p, 0) - before.get(p, 0) for p in after}
        assert grown == {**{p: t for p, (_, t) in by_purpose.items()}, "chat": 105}, (grown, by_purpose)
        # The month's budget view counts every purpose.
        b = insight(w, "budget").json()["data"]
        assert b["used"] == sum(t for _, t in by_purpose.values()) + 105 and b["limit"] is None, b
    finally:
        w.srv.stop()
        w.fake.stop()
        models.stop()


def test_a_spaces_owner_sets_its_monthly_limit(quarry_bin, corpus, tmp_path):
    w = build_world(quarry_bin, corpus, tmp_path)
    w.home.run("user", "add", "adm")
    assert w.home.run("space", "grant", "acme", "adm", "--role", "admin").returncode == 0
    w.tokens["admin"] = w.cli_json("token", "create", "--user", "adm", "--spaces", "acme", "--manage")
    w.srv = start_server(w.home, "--auth", "token", "--chat-model", f"openai:{MODEL}", logdir=tmp_path / "logs")
    path = "/api/v1/insight/budget"
    try:
        b = insight(w, "budget").json()["data"]
        assert {k: b[k] for k in ("monthly_model_tokens", "server_limit", "limit", "used", "remaining")} == {
            "monthly_model_tokens": None, "server_limit": None, "limit": None, "used": 0, "remaining": None}, b
        assert re.fullmatch(r"\d{4}-\d{2}", b["month"]) and b["resets_at"].endswith("-01T00:00:00.000Z"), b
        # Admins read it; only an owner, with a managing credential, sets it.
        assert insight(w, "budget", token=w.tok("admin")).status_code == 200
        for key in ("editor", "viewer"):
            assert_rest_error(insight(w, "budget", token=w.tok(key)), 403)
        assert_rest_error(http(w.srv, "PUT", path, w.tok("admin"), json={"monthly_model_tokens": 10}),
                          403, fragment="needs the owner role")
        assert_rest_error(http(w.srv, "PUT", path, w.tok("editor"), json={"monthly_model_tokens": 10}), 403)
        assert_rest_error(http(w.srv, "PUT", path, w.tok("owner_agent"), json={"monthly_model_tokens": 10}),
                          403, "MANAGEMENT_FORBIDDEN")
        for bad, fragment in (({}, "monthly_model_tokens is required"),
                              ({"monthly_model_tokens": 0}, "from 1 to"),
                              ({"monthly_model_tokens": -5}, "from 1 to"),
                              ({"monthly_model_tokens": 1.5}, "whole number"),
                              ({"monthly_model_tokens": "lots"}, "whole number"),
                              ({"monthly_model_tokens": 10**19}, "from 1 to"),
                              ({"monthly_model_tokens": 5, "per_day": 1}, "unknown field 'per_day'"),
                              ([5], "JSON object")):
            assert_rest_error(http(w.srv, "PUT", path, w.tok("owner"), json=bad), 400, fragment=fragment)
        assert_rest_error(http(w.srv, "PUT", path + "?days=3", w.tok("owner"), json={"monthly_model_tokens": 5}),
                          400, fragment="unknown parameter 'days'")
        assert insight(w, "budget").json()["data"]["limit"] is None, "refused changes changed nothing"

        r = http(w.srv, "PUT", path, w.tok("owner"), json={"monthly_model_tokens": 500})
        assert r.status_code == 200 and r.json()["data"]["limit"] == 500, r.text
        editor, chat = w.tok("editor"), {"message": "hello", "stream": False}
        w.fake.script([{"text": "One.", "usage": {"prompt_tokens": 400, "completion_tokens": 150}}])
        assert http(w.srv, "POST", "/api/v1/chat", editor, json=chat).status_code == 200
        r = chat_until_refused(w, editor, chat, "a chat past the owner's limit was answered")
        body = assert_rest_error(r, 429, "RATE_LIMITED", fragment="set by the space's owner")
        assert "of its 500 model tokens this month" in body["detail"], body
        b = insight(w, "budget").json()["data"]
        assert b["used"] >= 550 and b["remaining"] == 0 and b["monthly_model_tokens"] == 500, b
        # Removed: chats are answered again.
        r = http(w.srv, "PUT", path, w.tok("owner"), json={"monthly_model_tokens": None})
        assert r.status_code == 200 and r.json()["data"]["limit"] is None, r.text
        w.fake.script([{"text": "Back.", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}])
        r = http(w.srv, "POST", "/api/v1/chat", editor, json=chat)
        assert r.status_code == 200, r.text
    finally:
        w.srv.stop()
        w.fake.stop()


def test_two_nodes_read_each_others_searches(world):
    if backend() != "postgres":
        pytest.skip("several nodes share a PostgreSQL database (the PostgreSQL pass runs this)")
    w = world
    node_b = start_server(second_node(w.home, w.root / "node-b"), "--auth", "token", logdir=w.root / "logs-b")
    try:
        wait_ready(node_b)
        r = http(node_b, "POST", "/search", w.tok("editor"), json={"query": "Where can I park my bicycle"})
        assert r.status_code == 200 and r.json()["results"] == [], r.text
        r = http(w.srv, "POST", "/search", w.tok("editor"), json={"query": "bicycle parking"})
        assert r.status_code == 200, r.text
        for srv in (w.srv, node_b):
            # Each node reads what the other's writer has stored (it batches every 100 ms).
            deadline = time.monotonic() + 15
            while True:
                groups = groups_of(insight(w, "unanswered", srv=srv))
                usage = insight(w, "usage", srv=srv, days=1).json()["data"]
                searches = {m["metric"]: m["count"] for m in usage["metrics"]}["searches"]
                parking = [g["count"] for g in groups if g["wording"] == "bicycle park"]
                if (parking, searches) == ([3], 9) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert (parking, searches) == ([3], 9), (srv.base, groups, usage["metrics"])
    finally:
        node_b.stop()
