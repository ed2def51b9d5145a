#!/usr/bin/env python3
"""Search routes over HTTP on the ~100k-document data of bench/backends (issue 46).

The backends bench measures in process; this asks `quarry serve` on the same data directory
and database what a client sees: `POST /vsearch` and `/query`, unfiltered and in the `sel`
collection (~5 % of the chunks), one keep-alive client, 30 warm-up queries then `--seconds`
per route, p50/p99. Every `LABEL=PATH` binary runs in turn; a label starting with `embedded`
serves the embedded home, any other the PostgreSQL one.

Keep the bench's data first (run.sh drops its database), e.g.:

    eval "$(bash scripts/test-services start-pg)"
    psql "$QUARRY_TEST_DATABASE_URL" -c "CREATE DATABASE bk"
    QUARRY_BENCH_MODEL=~/.cache/quarry-models/all-MiniLM-L6-v2 QUARRY_BENCH_HOME=/tmp/bk \\
      QUARRY_BENCH_KEEP=1 QUARRY_BENCH_ROUNDS=1 QUARRY_BENCH_UPLOADS=20 \\
      QUARRY_BENCH_DATABASE_URL=${QUARRY_TEST_DATABASE_URL%/*}/bk \\
      cargo bench -p quarry-cli --bench backends
    python3 bench/backends/routes.py --home /tmp/bk --database ${QUARRY_TEST_DATABASE_URL%/*}/bk \\
      embedded=$CARGO_TARGET_DIR/release/quarry after=$CARGO_TARGET_DIR/release/quarry

Prints a table and writes bench/results/backends-http.txt. Figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "load"))
from benchkit import REPO, cpu_model, free_port, loadavg, percentile  # noqa: E402
from run import questions  # noqa: E402

ROUTES = [("/vsearch", {}), ("/query", {}), ("/vsearch", {"collection": "sel"}), ("/query", {"collection": "sel"})]


def serve(binary: str, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([binary, "serve", "--index", "bench", "--port", str(port)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if json.loads(c.getresponse().read()).get("model_loaded"):
                return proc, port
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{binary} serve did not start")
        time.sleep(0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+", metavar="LABEL=PATH")
    ap.add_argument("--home", type=Path, required=True, help="QUARRY_BENCH_HOME of a kept backends run")
    ap.add_argument("--database", required=True, help="the database that run filled")
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/quarry-models/all-MiniLM-L6-v2"))
    ap.add_argument("--seconds", type=float, default=8)
    args = ap.parse_args()
    qs = questions()
    rows = []
    for label, binary in (b.split("=", 1) for b in args.binaries):
        embedded = label.startswith("embedded")
        env = {k: v for k, v in os.environ.items() if k != "QUARRY_DATABASE_URL"}
        env.update(QUARRY_HOME=str(args.home / ("sqlite" if embedded else "postgres")), QUARRY_EMBED_MODEL=args.model)
        if not embedded:
            env["QUARRY_DATABASE_URL"] = args.database
        proc, port = serve(binary, env)
        try:
            for route, extra in ROUTES:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

                def one(i: int) -> float:
                    body = json.dumps({"query": qs[i % len(qs)], "limit": 10, **extra})
                    t = time.perf_counter()
                    conn.request("POST", route, body, {"Content-Type": "application/json"})
                    r = conn.getresponse()
                    text = r.read()
                    if r.status != 200:
                        raise SystemExit(f"{label} {route}: {r.status} {text[:300]!r}")
                    return (time.perf_counter() - t) * 1000

                for i in range(30):
                    one(i)
                lat, i, stop = [], 0, time.monotonic() + args.seconds
                while time.monotonic() < stop:
                    lat.append(one(i))
                    i += 1
                rows.append((label, route + (" in sel" if extra else ""), percentile(lat, 50), percentile(lat, 99), len(lat)))
                print(f"[http] {rows[-1]}", file=sys.stderr)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    lines = [f"# Search routes over HTTP on bench/backends' data ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
             f"machine: {os.cpu_count()} CPUs ({cpu_model()}), load {loadavg()}; 1 keep-alive client, "
             f"{args.seconds:g} s per route after 30 warm-up queries", "",
             f"{'binary':<14} {'route':<18} {'p50 ms':>8} {'p99 ms':>8} {'n':>6}"]
    lines += [f"{label:<14} {route:<18} {p50:>8.2f} {p99:>8.2f} {n:>6}" for label, route, p50, p99, n in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    (REPO / "bench" / "results" / "backends-http.txt").write_text(text)


if __name__ == "__main__":
    main()
