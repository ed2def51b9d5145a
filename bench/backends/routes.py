#!/usr/bin/env python3
"""Search routes over HTTP on the ~100k-document data of bench/backends (issue 46).

The backends bench measures in process; this asks `quarry serve` on the same data directory
and database what a client sees: `POST /vsearch` and `/query`, unfiltered and in the `sel`
collection (~5 % of the chunks), one keep-alive client, 2 s of warm-up queries then `--seconds`
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

A binary of a newer schema than another's runs on a copy (`--for LABEL HOME DATABASE`: e.g.
`CREATE DATABASE bk27 TEMPLATE bk`, and a home whose `sqlite` links to the first's and whose
`postgres` is empty — the node builds its keyword index from the database).

Prints a table and writes bench/results/backends-http.txt. Figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "load"))
from benchkit import REPO, cpu_model, loadavg  # noqa: E402
from run import Server, load, questions  # noqa: E402

ROUTES = [("/vsearch", {}), ("/query", {}), ("/vsearch", {"collection": "sel"}), ("/query", {"collection": "sel"})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+", metavar="LABEL=PATH")
    ap.add_argument("--home", type=Path, required=True, help="QUARRY_BENCH_HOME of a kept backends run")
    ap.add_argument("--database", required=True, help="the database that run filled")
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/quarry-models/all-MiniLM-L6-v2"))
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--for", dest="own", nargs=3, action="append", default=[], metavar=("LABEL", "HOME", "DATABASE"),
                    help="another home and database for one binary (a copy migrated to a newer schema: "
                         "CREATE DATABASE … TEMPLATE, so older and newer binaries run side by side)")
    args = ap.parse_args()
    qs = questions()
    rows = []
    logs = Path(tempfile.mkdtemp(prefix="quarry-routes-"))
    own = {label: (Path(home), database) for label, home, database in args.own}
    for label, binary in (b.split("=", 1) for b in args.binaries):
        embedded = label.startswith("embedded")
        home, database = own.get(label, (args.home, args.database))
        env = {k: v for k, v in os.environ.items() if k != "QUARRY_DATABASE_URL"}
        env.update(QUARRY_HOME=str(home / ("sqlite" if embedded else "postgres")), QUARRY_EMBED_MODEL=args.model)
        if not embedded:
            env["QUARRY_DATABASE_URL"] = database
        server = Server(Path(binary), env, logs / f"{label}.log", ("--index", "bench"))
        try:
            for route, fields in ROUTES:
                load(server.port, route, qs, 1, 2.0, fields)
                got = load(server.port, route, qs, 1, args.seconds, fields)
                if got["errors"]:
                    raise SystemExit(f"{label} {route}: {got['errors']} failed requests; see {logs}")
                rows.append((label, route + (" in sel" if fields else ""), got["p50_ms"], got["p99_ms"], got["n"]))
                print(f"[http] {rows[-1]}", file=sys.stderr)
        finally:
            server.stop()
    lines = [f"# Search routes over HTTP on bench/backends' data ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
             f"machine: {os.cpu_count()} CPUs ({cpu_model()}), load {loadavg()}; 1 keep-alive client, "
             f"{args.seconds:g} s per route after 2 s of warm-up queries", "",
             f"{'binary':<14} {'route':<18} {'p50 ms':>8} {'p99 ms':>8} {'n':>6}"]
    lines += [f"{label:<14} {route:<18} {p50:>8.2f} {p99:>8.2f} {n:>6}" for label, route, p50, p99, n in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    (REPO / "bench" / "results" / "backends-http.txt").write_text(text)


if __name__ == "__main__":
    main()
