#!/usr/bin/env python3
"""Owners' insight at 1,000,000 recorded searches (issue 69): the latency of
`GET /api/v1/insight/unanswered` and `GET /api/v1/insight/usage` (JSON and CSV) on the
embedded store and on PostgreSQL.

A fresh home per store (keyword only: QUARRY_EMBED_MODEL=none) with five knowledge bases made by
the CLI; then `--searches` rows are written straight into its `search_log` (SQLite through
Python's sqlite3 in one transaction; PostgreSQL through `psql \\copy`), with the daily usage
counts they add up to in `usage_daily` and `usage_people` — the rows the server's audit writer would have
written, faster than a million HTTP searches. The mix, one space (the worst case: every row
is the view's):
- times uniform over the last 90 days; 50 people, 200 tokens, five surfaces;
- 25% unanswered, their wordings Zipf-distributed over 20,000 distinct ones (a few asked
  often, a long tail asked once), with query text; answered ones hashed, with 1-10 results;
- 60% limited to one of the five knowledge bases;
- plus a tool call for half of them (`knowledge_search`) in the daily counts.

Then `quarry serve` (no auth: the machine's owner) and, `--samples` times each after five
warm-ups, p50/p95/max of: unanswered over 30 and 90 days, over 30 days for one knowledge
base, usage over 30 and 90 days, and its CSV over 90 days. Beside them, the baseline a user
has without the insight log's index: the same 30-day group-by run on a copy of the table
without its indexes (SQLite, in this process), i.e. a scan.

    python3 bench/insight/run.py --quarry $CARGO_TARGET_DIR/debug/quarry [--searches 1000000]
        [--stores sqlite,postgres]   # postgres: eval "$(bash scripts/test-services start)" first

Writes bench/results/insight.json and insight.txt. Figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit import (cpu_model, free_port, isolated_env, loadavg, percentile,  # noqa: E402
                      save)

DAY_MS = 86_400_000
SURFACES = ["/api/v1/knowledge-search", "mcp:knowledge_search", "/search", "chat", "mcp:query"]
WORDS = ("vpn password reset expense travel policy holiday calendar laptop printer wifi badge "
         "parking payroll invoice contract onboarding offboarding benefits pension salary leave "
         "sick office desk meeting room booking license software install update security phishing "
         "backup restore account email calendar share drive folder access permission").split()


def generate(n: int, kbs: list[str], space: str, seed: int = 7):
    """The search rows (tuples in search_log's column order) and the usage counts."""
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    users = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(50)]
    tokens = [(users[i % 50], str(uuid.UUID(int=rng.getrandbits(128)))) for i in range(200)]
    wordings = []
    for i in range(20_000):
        terms = sorted(set(rng.sample(WORDS, 3) + [f"t{i}"]))
        wordings.append(" ".join(terms))
    # Zipf-like: weight 1/rank.
    weights = [1.0 / (r + 1) for r in range(len(wordings))]
    cum, total = [], 0.0
    for w in weights:
        total += w
        cum.append(total)
    rows = []
    by_subject, by_person = Counter(), Counter()
    picks = rng.choices(range(len(wordings)), cum_weights=cum, k=n)
    for i in range(n):
        at = now - rng.randrange(90 * DAY_MS)
        user, token = tokens[rng.randrange(200)]
        surface = SURFACES[rng.randrange(len(SURFACES))]
        kb = kbs[rng.randrange(len(kbs))] if rng.random() < 0.6 else ""
        unanswered = rng.random() < 0.25
        if unanswered:
            wording = wordings[picks[i]]
            query = f"how do I {wording}?"
            rows.append((at, space, kb, user, token, surface, 0, rng.random() * 0.3 if rng.random() < 0.5 else None,
                         1, wording, query))
        else:
            rows.append((at, space, kb, user, token, surface, rng.randint(1, 10), 0.3 + rng.random() * 0.7, 0,
                         "h:%016x" % rng.getrandbits(64), None))
        day = at // DAY_MS
        counted = [("searches", surface)] + ([("unanswered", surface)] if unanswered else [])
        if rng.random() < 0.5:
            counted.append(("tool_calls", "knowledge_search"))
        for metric, subject in counted:
            by_subject[(space, day, metric, subject)] += 1
            by_person[(space, day, metric, user, token)] += 1
    return rows, ([(*k, c, 0) for k, c in by_subject.items()], [(*k, c, 0) for k, c in by_person.items()])


def cli_json(quarry, env, *args):
    r = subprocess.run([str(quarry), "--json", *args], env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"quarry {' '.join(args)}: {r.stderr}")
    return json.loads(r.stdout)


def prepare_home(quarry, root: Path, database: str | None):
    home = root / "home"
    env = isolated_env(home)
    env["QUARRY_EMBED_MODEL"] = "none"
    if database:
        env["QUARRY_DATABASE_URL"] = database
        env["QUARRY_BLOBS_URL"] = os.environ.get("QUARRY_BENCH_BLOBS_URL", "")
        if not env["QUARRY_BLOBS_URL"]:
            env.pop("QUARRY_BLOBS_URL")
    kbs = [cli_json(quarry, env, "kb", "create", f"kb{i}")["id"] for i in range(5)]
    return home, env, kbs


def load_sqlite(home: Path, rows, usage) -> tuple[str, float]:
    dbs = list(home.rglob("quarry.db"))
    assert dbs, f"no quarry.db under {home}"
    con = sqlite3.connect(dbs[0])
    space = con.execute("SELECT uid FROM spaces WHERE id = 'default'").fetchone()[0]
    rows = [(r[0], space, *r[2:]) for r in rows]
    by_subject = [(space, *u[1:]) for u in usage[0]]
    by_person = [(space, *u[1:]) for u in usage[1]]
    started = time.perf_counter()
    with con:
        con.executemany("INSERT INTO search_log (at, space_id, knowledge_base, user_id, token_id, surface, "
                        "results, top_score, unanswered, wording, query) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
        con.executemany("INSERT INTO usage_daily (space_id, day, metric, subject, count, total) "
                        "VALUES (?,?,?,?,?,?)", by_subject)
        con.executemany("INSERT INTO usage_people (space_id, day, metric, user_id, token_id, count, total) "
                        "VALUES (?,?,?,?,?,?,?)", by_person)
    con.execute("ANALYZE")
    con.close()
    return space, time.perf_counter() - started


def psql(url: str, *args: str, stdin: str | None = None) -> str:
    binary = Path(os.environ["QUARRY_TEST_PG_BIN"]) / "psql"
    r = subprocess.run([str(binary), url, "-qAtX", *args], input=stdin, capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        sys.exit(f"psql {' '.join(args)}: {r.stderr}")
    return r.stdout


def load_postgres(url: str, root: Path, rows, usage) -> tuple[str, float]:
    space = psql(url, "-c", "SELECT uid FROM spaces WHERE id = 'default'").strip()
    search_csv = root / "search_log.csv"
    with search_csv.open("w", newline="") as f:
        w = csv.writer(f)
        for r in rows:
            w.writerow([r[0], space, *r[2:8], "t" if r[8] else "f", r[9], r[10]])
    for table, rows_of in (("usage_daily", usage[0]), ("usage_people", usage[1])):
        with (root / f"{table}.csv").open("w", newline="") as f:
            w = csv.writer(f)
            for u in rows_of:
                w.writerow([space, *u[1:]])
    started = time.perf_counter()
    psql(url, "-c", f"\\copy search_log (at, space_id, knowledge_base, user_id, token_id, surface, results, "
                    f"top_score, unanswered, wording, query) FROM '{search_csv}' "
                    "WITH (FORMAT csv, FORCE_NOT_NULL (knowledge_base))")
    psql(url, "-c", f"\\copy usage_daily FROM '{root / 'usage_daily.csv'}' "
                    "WITH (FORMAT csv, FORCE_NOT_NULL (subject))")
    psql(url, "-c", f"\\copy usage_people FROM '{root / 'usage_people.csv'}' "
                    "WITH (FORMAT csv, FORCE_NOT_NULL (user_id, token_id))")
    # As autovacuum leaves an insert-only table: its visibility map set, so the views' covering
    # indexes are read without the heap (checked: a VACUUM that could not mark the pages is
    # run again).
    for table in ("search_log", "usage_daily", "usage_people"):
        psql(url, "-c", f"VACUUM (FREEZE, ANALYZE) {table}")
    for _ in range(10):
        pages, visible = psql(url, "-c", "SELECT relpages, relallvisible FROM pg_class "
                                         "WHERE relname = 'search_log'").strip().split("|")
        if int(visible) >= int(pages) * 0.99:
            break
        time.sleep(1)
        psql(url, "-c", "VACUUM search_log")
    else:
        print(f"search_log: only {visible} of {pages} pages all-visible", file=sys.stderr)
    return space, time.perf_counter() - started


def serve(quarry, env, logdir: Path):
    port = free_port()
    log = (logdir / "serve.log").open("w")
    proc = subprocess.Popen([str(quarry), "serve", "--port", str(port)], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health/ready")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"the server never became ready; see {logdir / 'serve.log'}")


def timed(port: int, path: str, samples: int) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    lat = []
    size = 0
    for i in range(samples + 5):
        t = time.perf_counter()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"GET {path}: {r.status} {body[:300]!r}")
        if i >= 5:
            lat.append((time.perf_counter() - t) * 1000)
        size = len(body)
    return {"path": path, "samples": samples, "bytes": size,
            "p50_ms": round(percentile(lat, 50), 1), "p95_ms": round(percentile(lat, 95), 1),
            "max_ms": round(max(lat), 1)}


def scan_baseline(rows, samples: int) -> dict:
    """The 30-day group-by over the same rows in a table without indexes (SQLite, in memory)."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE search_log (at INTEGER, space_id TEXT, knowledge_base TEXT, user_id TEXT, "
                "token_id TEXT, surface TEXT, results INTEGER, top_score REAL, unanswered INTEGER, "
                "wording TEXT, query TEXT)")
    con.executemany("INSERT INTO search_log VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    since = int(time.time() * 1000) - 30 * DAY_MS
    lat = []
    for i in range(samples + 2):
        t = time.perf_counter()
        con.execute("SELECT wording, COUNT(*) n, MIN(at), MAX(at) FROM search_log WHERE space_id = ? "
                    "AND unanswered = 1 AND at >= ? GROUP BY wording ORDER BY n DESC LIMIT 100",
                    (rows[0][1], since)).fetchall()
        if i >= 2:
            lat.append((time.perf_counter() - t) * 1000)
    return {"what": "the same 30-day group-by, no index (a scan)", "samples": samples,
            "p50_ms": round(percentile(lat, 50), 1), "p95_ms": round(percentile(lat, 95), 1)}


def run_store(store: str, quarry, args, rows, usage) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"insight-{store}-"))
    database = None
    if store == "postgres":
        base = os.environ.get("QUARRY_TEST_DATABASE_URL")
        if not base:
            sys.exit("postgres: run `eval \"$(bash scripts/test-services start)\"` first")
        name = f"insight_bench_{int(time.time())}"
        psql(base, "-c", f"CREATE DATABASE {name}")
        plain, _, query = base.partition("?")
        database = plain.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")
    home, env, kbs = prepare_home(quarry, root, database)
    rows = [(r[0], r[1], kbs[int(r[2][2:])] if r[2] else "", *r[3:]) for r in rows]
    if store == "sqlite":
        space, load_s = load_sqlite(home, rows, usage)
    else:
        space, load_s = load_postgres(database, root, rows, usage)
    proc, port = serve(quarry, env, root)
    try:
        views = [
            timed(port, "/api/v1/insight/unanswered?days=30", args.samples),
            timed(port, "/api/v1/insight/unanswered?days=90", args.samples),
            timed(port, f"/api/v1/insight/unanswered?days=30&knowledge_base={kbs[0]}", args.samples),
            timed(port, "/api/v1/insight/usage?days=30", args.samples),
            timed(port, "/api/v1/insight/usage?days=90", args.samples),
            timed(port, "/api/v1/insight/usage?days=90&format=csv", args.samples),
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if database and not args.keep:
        psql(os.environ["QUARRY_TEST_DATABASE_URL"], "-c", f"DROP DATABASE IF EXISTS {database.rsplit('/', 1)[1].split('?')[0]} WITH (FORCE)")
    elif database:
        print(f"kept: {database}", file=sys.stderr)
    return {"store": store, "load_s": round(load_s, 1), "views": views, "space": "default"}


def text_report(rep) -> str:
    m = rep["meta"]
    out = [f"Insight views at {m['searches']:,} recorded searches ({m['unanswered']:,} unanswered, "
           f"{m['usage_rows']:,} daily usage rows), one space",
           f"{m['cpu']} · {m['cores']} cores · quarry {m['build']} build · {m['samples']} samples each",
           ""]
    for s in rep["stores"]:
        out.append(f"{s['store']} (loaded in {s['load_s']} s)")
        for v in s["views"]:
            out.append(f"  p50 {v['p50_ms']:>7} ms  p95 {v['p95_ms']:>7} ms  max {v['max_ms']:>7} ms  "
                       f"{v['bytes']:>8} B  {v['path']}")
    b = rep.get("baseline")
    if b:
        out.append("")
        out.append(f"baseline: {b['what']}: p50 {b['p50_ms']} ms, p95 {b['p95_ms']} ms")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quarry", required=True)
    ap.add_argument("--searches", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--keep", action="store_true", help="keep the PostgreSQL database (its URL is printed)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "insight.json"))
    args = ap.parse_args()
    quarry = Path(args.quarry)
    started = time.perf_counter()
    # Knowledge bases are named kb0..kb4 until a home exists: the rows say `kb<i>`.
    rows, usage = generate(args.searches, [f"kb{i}" for i in range(5)], "space")
    print(f"generated {len(rows):,} searches and {len(usage[0]) + len(usage[1]):,} usage rows in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    rep = {"meta": {"searches": len(rows), "unanswered": sum(1 for r in rows if r[8]),
                    "usage_rows": len(usage[0]) + len(usage[1]), "cpu": cpu_model(), "cores": os.cpu_count(),
                    "build": "release" if "release" in str(quarry) else "debug", "samples": args.samples,
                    "load_start": loadavg()},
           "stores": []}
    for store in args.stores.split(","):
        rep["stores"].append(run_store(store.strip(), quarry, args, rows, usage))
        print(text_report(rep), file=sys.stderr)
    rep["baseline"] = scan_baseline(rows, max(5, args.samples // 10))
    save(rep, Path(args.out), text_report)
    print(text_report(rep))


if __name__ == "__main__":
    main()
