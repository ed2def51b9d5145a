#!/usr/bin/env python3
"""One node under concurrent clients, and the CLI's fast path (issue 46).

Part `clients`: `quarry serve` on a home of tldr pages (one collection; with `--embed-model`,
embedded too), then for 1, 2, 4 and 8 concurrent clients, each a thread with its own
keep-alive connection sending `POST /query` (or `--route /search`) for `--seconds`, queries
drawn in turn from the eval questions: queries per second, p50/p99 latency, errors. Every
`--quarry LABEL=PATH` binary runs on the same home in the same run (e.g. before and after a
change), and with `--database URL` the same data on PostgreSQL is measured beside it
(`quarry migrate` copies it there first; one `--database` per binary, the last binary first).

Part `cli`: `quarry query Q --json` as separate processes, `--runs` times each: with a
server of the same data directory running (the fast path) and with `--no-server` (the CLI
opens the index and loads the model itself), p50/p90 wall time.

    python3 bench/load/run.py --quarry after=$CARGO_TARGET_DIR/release/quarry \\
        --embed-model ~/.cache/quarry-models/all-MiniLM-L6-v2 [--parts clients,cli]

Writes bench/results/load.json and load.txt. Figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit import REPO, cpu_model, default_quarry, free_port, isolated_env, loadavg, percentile, save  # noqa: E402

TLDR = REPO.parent / "shared" / "corpora" / "tldr" / "pages"


def questions() -> list[str]:
    out = []
    for line in (REPO / "eval" / "tldr-en.jsonl").read_text().splitlines():
        if line.strip():
            q = json.loads(line)
            out.append(q.get("query") or q.get("question"))
    return [q for q in out if q]


def make_home(root: Path, quarry: Path, docs: int, embed: str | None) -> dict[str, str]:
    home = root / "home"
    if home.exists():
        shutil.rmtree(home)
    corpus = root / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    corpus.mkdir(parents=True)
    pages = sorted(TLDR.glob("*/*.md"))[:docs]
    for p in pages:
        (corpus / f"{p.parent.name}-{p.name}").write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    env = isolated_env(home)
    if embed:
        env["QUARRY_EMBED_MODEL"] = embed
    run = lambda *a: subprocess.run([str(quarry), *a], env=env, check=True, capture_output=True, text=True)  # noqa: E731
    run("collection", "add", str(corpus), "--name", "tldr")
    if embed:
        run("embed")
    return env


class Server:
    def __init__(self, quarry: Path, env: dict[str, str], log: Path, extra: tuple[str, ...] = ()):
        self.port = free_port()
        self.log = open(log, "wb")
        self.proc = subprocess.Popen([str(quarry), "serve", *extra, "--port", str(self.port)], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 300
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                h = json.loads(c.getresponse().read())
                if h.get("model_loaded") or not env.get("QUARRY_EMBED_MODEL"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"quarry serve did not start; see {log}")
            time.sleep(0.2)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def load(port: int, route: str, qs: list[str], clients: int, seconds: float, fields: dict | None = None) -> dict:
    """`clients` keep-alive clients asking `route` for `seconds`; `fields` join each body."""
    lat: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    stop = time.monotonic() + seconds

    def client(i: int):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = i
        while time.monotonic() < stop:
            body = json.dumps({"query": qs[n % len(qs)], "limit": 10, **(fields or {})})
            n += clients
            t = time.perf_counter()
            try:
                conn.request("POST", route, body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except OSError:
                ok = False
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            if ok:
                lat[i].append((time.perf_counter() - t) * 1000)
            else:
                errors[i] += 1

    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    all_lat = [x for xs in lat for x in xs]
    return {"clients": clients, "n": len(all_lat), "qps": round(len(all_lat) / wall, 1),
            "p50_ms": round(percentile(all_lat, 50) or 0, 2), "p99_ms": round(percentile(all_lat, 99) or 0, 2),
            "errors": sum(errors)}


def warm_up(port: int, route: str, qs: list[str], most: float = 90.0) -> float:
    """Rounds of 2 s with 2 clients until two in a row agree within 15 % (a node fresh from
    `quarry migrate` first checks its indexes and queues: that start-up is not the steady
    state measured); the seconds it took."""
    start = time.monotonic()
    last = load(port, route, qs, 2, 2.0)["qps"]
    while time.monotonic() - start < most:
        now = load(port, route, qs, 2, 2.0)["qps"]
        if last and abs(now - last) / last < 0.15:
            break
        last = now
    return round(time.monotonic() - start, 1)


def part_clients(args, binaries, env, root, qs) -> dict:
    out = {}
    targets = [(label, path, env) for label, path in binaries]
    # Each empty database given takes the same data through one binary's `quarry migrate`,
    # the last binary's first: `--database A --database B` measures the last two on PostgreSQL.
    for (label, path), url in zip(reversed(binaries), args.database):
        pg_env = dict(env, QUARRY_DATABASE_URL=url)
        subprocess.run([str(path), "migrate", "--to", url], env=env, check=True, capture_output=True)
        targets.append((f"{label} on PostgreSQL", path, pg_env))
    for label, path, e in targets:
        srv = Server(path, e, root / f"serve-{label.replace(' ', '_')}.log")
        try:
            warmed = warm_up(srv.port, args.route, qs)
            rows = [load(srv.port, args.route, qs, c, args.seconds) for c in args.clients]
            for r in rows:
                r["warm_up_s"] = warmed
        finally:
            srv.stop()
        one = rows[0]["qps"] or 1
        for r in rows:
            r["vs_1_client"] = round(r["qps"] / one, 2)
        out[label] = rows
        print(f"[load] {label}: " + ", ".join(f"{r['clients']}c {r['qps']} q/s" for r in rows), file=sys.stderr)
    return out


def part_cli(args, binaries, env, root, qs) -> dict:
    label, path = binaries[-1]
    out = {}

    def timed(extra: list[str]) -> list[float]:
        times = []
        for i in range(args.runs):
            t = time.perf_counter()
            subprocess.run([str(path), "query", qs[i % len(qs)], "--json", *extra], env=env, check=True,
                           capture_output=True)
            times.append((time.perf_counter() - t) * 1000)
        return times

    srv = Server(path, env, root / "serve-cli.log")
    try:
        timed([])  # the first call pays for the page cache
        served = timed([])
        alone = timed(["--no-server"])
    finally:
        srv.stop()
    for name, xs in (("through the running server", served), ("--no-server (loads the index and model)", alone)):
        out[name] = {"runs": len(xs), "p50_ms": round(percentile(xs, 50), 1), "p90_ms": round(percentile(xs, 90), 1),
                     "max_ms": round(max(xs), 1)}
    out["binary"] = label
    return out


def text_report(rep) -> str:
    m = rep["meta"]
    lines = [f"# Quarry under load and the CLI's fast path ({m['date']})",
             f"machine: {m['cpus']} CPUs ({m['cpu']}), load {m['load_start']} at start, {m['load_end']} at end",
             f"binaries: {m['binaries']}", f"home: {m['docs']} tldr pages, embedding model: {m['embed'] or 'none'}, "
             f"route {m['route']}, {m['seconds']} s per point", ""]
    if "clients" in rep:
        lines.append("## Concurrent clients (keep-alive connection each)")
        lines.append(f"{'binary':36} {'clients':>7} {'q/s':>8} {'x 1 client':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'warm-up s':>9}")
        for label, rows in rep["clients"].items():
            for r in rows:
                lines.append(f"{label:36} {r['clients']:>7} {r['qps']:>8} {r['vs_1_client']:>10} {r['p50_ms']:>8} "
                             f"{r['p99_ms']:>8} {r['errors']:>6} {r.get('warm_up_s', ''):>9}")
        lines.append("")
    if "cli" in rep:
        lines.append(f"## `quarry query Q --json` as a process ({rep['cli']['binary']})")
        for name, r in rep["cli"].items():
            if isinstance(r, dict):
                lines.append(f"{name:44} p50 {r['p50_ms']:>8} ms  p90 {r['p90_ms']:>8} ms  max {r['max_ms']:>8} ms  "
                             f"({r['runs']} runs)")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quarry", action="append", default=[], metavar="LABEL=PATH")
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--embed-model")
    ap.add_argument("--route", default="/query")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--database", action="append", default=[],
                    help="an empty database per binary measured on PostgreSQL too (last binary first)")
    ap.add_argument("--parts", default="clients,cli")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "load.json")
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    binaries = []
    for spec in args.quarry or [f"quarry={default_quarry()}"]:
        label, _, path = spec.rpartition("=")
        binaries.append((label or Path(path).name, Path(path)))
    root = Path.home() / ".cache" / "quarry-bench" / "load"
    root.mkdir(parents=True, exist_ok=True)
    rep = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "cpus": os.cpu_count(),
                    "cpu": cpu_model(), "load_start": loadavg(), "binaries": {k: str(v) for k, v in binaries},
                    "docs": args.docs, "embed": args.embed_model, "route": args.route, "seconds": args.seconds}}
    env = make_home(root, binaries[-1][1], args.docs, args.embed_model)
    qs = questions()
    parts = args.parts.split(",")
    if "clients" in parts:
        rep["clients"] = part_clients(args, binaries, env, root, qs)
    if "cli" in parts:
        rep["cli"] = part_cli(args, binaries, env, root, qs)
    save(rep, args.out, text_report)
    print(text_report(rep))


if __name__ == "__main__":
    main()
