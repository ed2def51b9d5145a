"""Several `quarry serve` nodes over one PostgreSQL and one S3 bucket, measured (issue 25).

Each scenario gets a fresh database and bucket and fresh data directories:

* catch-up: notes uploaded through node A one batch at a time; the lag from A reporting a
  document ready to node B finding it by keyword search (p50/p99), woken by NOTIFY and, with
  the feed's NOTIFY trigger disabled (a pooler that drops LISTEN), by polling alone;
* rebuild: a node with an empty data directory joining a database of ~100,000 documents
  (the tldr pages as 14 folder collections): seconds until it reports ready;
* queries: the tldr-en judged queries as keyword searches from 4 client threads for a fixed
  time, against 1 node and against 2 (round-robin): throughput, p50/p99, and PostgreSQL's CPU
  seconds per query (from /proc, every `postgres` process) so the scaling can be extrapolated
  beyond this machine's two cores;
* ingestion: 600 small notes uploaded at once; docs/min until every one is ready, with the
  workers of 1 node and of 2 (`--repeat N`: N runs of each in turn, the median; `--pin`:
  each node on a core of its own with `RAYON_NUM_THREADS=1`, PostgreSQL, moto and the
  client on every core — on a 2-core machine the 2-node run shares its cores with them);
* failover: kill -9 of node A during a 200-note batch; seconds until node B finished it;
* embedding: the 251-page Chinese manual uploaded to 1 node and to 2, each node held to one
  core (`RAYON_NUM_THREADS=1`, standing for a machine of its own), with a local model
  (`QUARRY_TEST_MINILM`, or `--embed-model`): seconds until it is fully embedded, and the
  nodes seen embedding at once (issue 26: embed jobs claim a collection's texts in shares).

Run through bench/nodes/run.sh (it starts the services). Needs the tldr pages in
../shared/corpora/tldr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit import cpu_model, default_quarry, free_port, isolated_env, loadavg, percentile, save  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TLDR = ROOT.parent / "shared" / "corpora" / "tldr" / "pages" / "common"
QUERIES = [json.loads(line)["query"] for line in (ROOT / "eval" / "tldr-en.jsonl").read_text().splitlines() if line.strip()]


PIN = False
REPEAT = 1


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 120):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def jpost(url: str, obj: dict):
    return json.loads(http("POST", url, json.dumps(obj).encode(), {"Content-Type": "application/json"})[1])


def multipart(files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = "quarrybench" + os.urandom(8).hex()
    parts = []
    for name, data in files:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
                     f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


class Deployment:
    """A fresh database and bucket, and nodes on it."""

    def __init__(self, binary: Path, root: Path, name: str, extra_env: dict | None = None):
        self.binary, self.root = binary, root / name
        self.root.mkdir(parents=True)
        db = f"quarry_bench_{name}_{int(time.time())}"
        url = os.environ["QUARRY_TEST_DATABASE_URL"]
        subprocess.run([str(Path(os.environ["QUARRY_TEST_PG_BIN"]) / "psql"), url, "-qc",
                        f"CREATE DATABASE {db} TEMPLATE template1"], check=True, capture_output=True)
        base, _, query = url.partition("?")
        self.db_url = base.rsplit("/", 1)[0] + "/" + db + ("?" + query if query else "")
        bucket = f"quarry-bench-{name}-{int(time.time())}".replace("_", "-")
        http("PUT", f"{os.environ['QUARRY_TEST_S3_ENDPOINT']}/{bucket}", b"")
        self.blobs = f"s3://{bucket}/blobs"
        self.extra_env = extra_env or {}
        self.nodes: list[tuple[subprocess.Popen, str]] = []

    def env(self, home: Path) -> dict:
        e = isolated_env(home)
        e.update(QUARRY_DATABASE_URL=self.db_url, QUARRY_BLOBS_URL=self.blobs, QUARRY_LOG="warn", **self.extra_env)
        return e

    def psql(self, sql: str) -> str:
        out = subprocess.run([str(Path(os.environ["QUARRY_TEST_PG_BIN"]) / "psql"), self.db_url, "-qAtc", sql],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def start_node(self, timeout: float = 120) -> str:
        home = self.root / f"node{len(self.nodes)}"
        home.mkdir()
        port = free_port()
        log = open(home.parent / f"{home.name}.log", "wb")
        cmd = [str(self.binary), "serve", "--port", str(port)]
        env = self.env(home)
        if PIN:
            # One core per node, standing for a machine of its own (PostgreSQL, moto and this
            # client stay unpinned, on every core).
            cmd = ["taskset", "-c", str(len(self.nodes) % (os.cpu_count() or 1))] + cmd
            env["RAYON_NUM_THREADS"] = "1"
        proc = subprocess.Popen(cmd, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                if http("GET", base + "/health/ready", timeout=5)[0] == 200:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"node {home} did not become ready; see {log.name}")
            time.sleep(0.05)
        self.nodes.append((proc, base))
        return base

    def stop(self):
        for proc, _ in self.nodes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.nodes:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def create_kb(base: str, name: str) -> str:
    return jpost(base + "/api/v1/knowledge-bases", {"name": name})["data"]["id"]


def upload(base: str, kb: str, files: list[tuple[str, bytes]]) -> list[str]:
    body, ctype = multipart(files)
    _, out = http("POST", f"{base}/api/v1/knowledge-bases/{kb}/documents", body, {"Content-Type": ctype})
    return [o["document"]["id"] for o in json.loads(out)["data"]]


def statuses(base: str, kb: str) -> dict[str, str]:
    _, out = http("GET", f"{base}/api/v1/knowledge-bases/{kb}/documents")
    return {d["id"]: d["status"] for d in json.loads(out)["data"]}


def wait_ready(base: str, kb: str, ids: list[str], timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while True:
        st = statuses(base, kb)
        if all(st.get(i) in ("ready", "failed") for i in ids):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"documents not processed within {timeout} s")
        time.sleep(0.1)


def search(base: str, q: str, limit: int = 10) -> list[str]:
    return [r["file"] for r in jpost(base + "/search", {"query": q, "limit": limit})["results"]]


def _proc_cpu(stat: str) -> int:
    """User + system ticks of one process (every thread) from its /proc/PID/stat line."""
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def postgres_cpu_seconds() -> float:
    """User + system CPU of every `postgres` process (the server and its backends)."""
    return cpu_by_role([])["postgres"]


def cpu_by_role(nodes: list[int]) -> dict[str, float]:
    """CPU seconds so far of each node (by pid), of every `postgres` process, of moto, of
    this client, and the machine's busy and total seconds (every core, /proc/stat), so a
    scenario can say where its time went and whether the cores were saturated."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {f"node{i}": 0.0 for i in range(len(nodes))}
    pg = moto = 0
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            comm = stat[stat.find("(") + 1:stat.rfind(")")]
            if comm.startswith("postgres"):
                pg += _proc_cpu(stat)
            elif int(p.name) in nodes:
                out[f"node{nodes.index(int(p.name))}"] = _proc_cpu(stat) / tick
            elif b"moto_server" in (p / "cmdline").read_bytes():
                moto += _proc_cpu(stat)
        except OSError:
            continue
    t = os.times()
    out.update(postgres=pg / tick, moto=moto / tick, client=t.user + t.system)
    cpu = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = cpu[3] + cpu[4]  # idle + iowait
    out.update(machine_busy=(sum(cpu[:8]) - idle) / tick, machine_total=sum(cpu[:8]) / tick)
    return out


def cpu_spent(before: dict[str, float], after: dict[str, float], docs: int) -> dict:
    """CPU ms per document by role, and the share of the machine's cores kept busy."""
    per_doc = {k: round((after[k] - before[k]) / docs * 1000, 2) for k in after
               if not k.startswith("machine_")}
    busy = (after["machine_busy"] - before["machine_busy"]) / max(after["machine_total"] - before["machine_total"], 1e-9)
    return {"cpu_ms_per_doc": per_doc, "machine_busy_share": round(busy, 3)}


def notes(prefix: str, n: int) -> list[tuple[str, bytes]]:
    pages = sorted(TLDR.glob("*.md"))
    return [(f"{prefix}-{i}.md", pages[i % len(pages)].read_bytes() + f"\n\n{prefix}tag {prefix}token{i}x\n".encode())
            for i in range(n)]


def catch_up(binary: Path, root: Path, batches: int = 20, notify: bool = True) -> dict:
    d = Deployment(binary, root, "catchup" if notify else "catchuppoll")
    try:
        a, b = d.start_node(), d.start_node()
        if not notify:
            d.psql("ALTER TABLE feed DISABLE TRIGGER feed_notify")
        kb = create_kb(a, "catch-up")
        lags = []
        for batch in range(batches):
            files = notes(f"c{batch}", 10)
            ids = upload(a, kb, files)
            wait_ready(a, kb, ids)
            t0 = time.monotonic()
            pending = {name for name, _ in files}
            while pending:
                found = {f.rsplit("/", 1)[-1] for f in search(b, f"c{batch}tag", 50)}
                for name in pending & found:
                    lags.append(time.monotonic() - t0)
                pending -= found
                if time.monotonic() - t0 > 60:
                    raise SystemExit("catch-up took over 60 s")
        return {"documents": len(lags), "p50_ms": round(percentile(lags, 50) * 1000, 1),
                "p99_ms": round(percentile(lags, 99) * 1000, 1), "max_ms": round(max(lags) * 1000, 1),
                "note": "from A reporting the batch ready to B's keyword search finding each document"
                + ("" if notify else "; NOTIFY disabled, nodes poll every second")}
    finally:
        d.stop()


def catch_up_polling(binary: Path, root: Path) -> dict:
    return catch_up(binary, root, notify=False)


def rebuild(binary: Path, root: Path, copies: int = 14) -> dict:
    d = Deployment(binary, root, "rebuild")
    try:
        loader = d.root / "loader"
        loader.mkdir()
        t0 = time.monotonic()
        for i in range(copies):
            subprocess.run([str(binary), "collection", "add", str(TLDR.parent), "--name", f"tldr{i}"],
                           env=d.env(loader), check=True, capture_output=True)
        load = time.monotonic() - t0
        documents = int(d.psql("SELECT count(*) FROM documents"))
        chunks = int(d.psql("SELECT count(*) FROM chunks"))
        t0 = time.monotonic()
        base = d.start_node(timeout=3600)
        took = time.monotonic() - t0
        hits = search(base, "list files in a directory")
        return {"documents": documents, "chunks": chunks, "load_seconds": round(load, 1),
                "seconds_to_ready": round(took, 1), "first_query_hits": len(hits),
                "note": "a node with an empty data directory: snapshot read, keyword and passage "
                        "indexes built, caught up with the feed"}
    finally:
        d.stop()


def queries(binary: Path, root: Path, seconds: float = 20, clients: int = 4) -> dict:
    d = Deployment(binary, root, "queries")
    out = {}
    try:
        a = d.start_node()
        kb = create_kb(a, "tldr")
        pages = sorted(TLDR.glob("*.md"))
        ids = []
        for i in range(0, len(pages), 200):
            ids += upload(a, kb, [(p.name, p.read_bytes()) for p in pages[i:i + 200]])
        wait_ready(a, kb, ids)
        out["documents"] = len(ids)
        for n_nodes in (1, 2):
            if n_nodes == 2:
                d.start_node()
            bases = [base for _, base in d.nodes]
            lat: list[float] = []
            lock = threading.Lock()
            stop = time.monotonic() + seconds
            cpu0 = postgres_cpu_seconds()

            def client(k: int):
                i = k
                while time.monotonic() < stop:
                    q = QUERIES[i % len(QUERIES)]
                    base = bases[i % len(bases)]
                    t = time.monotonic()
                    search(base, q)
                    with lock:
                        lat.append(time.monotonic() - t)
                    i += clients

            threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.monotonic() - t0
            cpu = postgres_cpu_seconds() - cpu0
            out[f"{n_nodes}_node"] = {
                "queries": len(lat), "qps": round(len(lat) / wall, 1),
                "p50_ms": round(percentile(lat, 50) * 1000, 2), "p99_ms": round(percentile(lat, 99) * 1000, 2),
                "postgres_cpu_ms_per_query": round(cpu / max(len(lat), 1) * 1000, 3),
                "clients": clients,
            }
        return out
    finally:
        d.stop()


def ingestion(binary: Path, root: Path, n: int = 600) -> dict:
    """1 node, then 2, `REPEAT` times in turn; the median run of each."""
    runs: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, list[dict]] = {1: [], 2: []}
    for r in range(REPEAT):
        for n_nodes in (1, 2):
            d = Deployment(binary, root, f"ingest{n_nodes}_{r}")
            try:
                a = d.start_node()
                for _ in range(n_nodes - 1):
                    d.start_node()
                kb = create_kb(a, "ingest")
                files = notes("i", n)
                pids = [proc.pid for proc, _ in d.nodes]
                cpu0 = cpu_by_role(pids)
                t0 = time.monotonic()
                ids = []
                for i in range(0, n, 100):
                    ids += upload(a, kb, files[i:i + 100])
                wait_ready(a, kb, ids)
                runs[n_nodes].append(time.monotonic() - t0)
                cpu[n_nodes].append(cpu_spent(cpu0, cpu_by_role(pids), n))
            finally:
                d.stop()
    out = {}
    for n_nodes, times in runs.items():
        median = sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]
        took = times[median]
        out[f"{n_nodes}_node"] = {"documents": n, "seconds": round(took, 2), "docs_per_min": round(n / took * 60),
                                  "runs_s": [round(t, 2) for t in times], **cpu[n_nodes][median]}
    out["speedup"] = round(out["1_node"]["seconds"] / out["2_node"]["seconds"], 2)
    out["pinned"] = PIN
    return out


def failover(binary: Path, root: Path, n: int = 200) -> dict:
    d = Deployment(binary, root, "failover", {"QUARRY_JOB_LEASE_SECS": "600"})
    try:
        a, b = d.start_node(), d.start_node()
        kb = create_kb(a, "failover")
        ids = upload(a, kb, notes("f", n))
        while all(s == "pending" for s in statuses(a, kb).values()):
            time.sleep(0.02)
        proc = d.nodes[0][0]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        left = sum(1 for s in statuses(b, kb).values() if s not in ("ready", "failed"))
        wait_ready(b, kb, ids)
        return {"documents": n, "unfinished_at_kill": left, "seconds_to_finished": round(time.monotonic() - t0, 1),
                "lease_secs": 600, "node_dead_after_secs": 15}
    finally:
        d.stop()


EMBED_MODEL = os.environ.get("QUARRY_TEST_MINILM", "")
MANUAL = Path(os.environ.get("QUARRY_TEST_DOCS") or Path.home() / ".cache" / "quarry-docs") / "pdf" / "zh-debian-reference.zh-cn.pdf"


def embedding(binary: Path, root: Path) -> dict:
    if not EMBED_MODEL or not MANUAL.is_file():
        raise SystemExit("embedding: needs QUARRY_TEST_MINILM (eval \"$(bash scripts/setup-models)\") or "
                         f"--embed-model, and {MANUAL} (../shared/corpora/documents/fetch.sh)")
    out = {"model": Path(EMBED_MODEL).name, "document": MANUAL.name, "threads_per_node": 1}
    for n_nodes in (1, 2):
        d = Deployment(binary, root, f"embed{n_nodes}", {"QUARRY_EMBED_MODEL": EMBED_MODEL, "RAYON_NUM_THREADS": "1"})
        try:
            a = d.start_node()
            for _ in range(n_nodes - 1):
                d.start_node()
            kb = create_kb(a, "manual")
            t0 = time.monotonic()
            ids = upload(a, kb, [(MANUAL.name, MANUAL.read_bytes())])
            at_once = 0
            while not all(s in ("ready", "failed") for s in statuses(a, kb).values()):
                live = d.psql("SELECT count(*) FROM jobs WHERE kind = 'embed' AND status = 'processing' "
                              "AND lease_until >= quarry_now_ms()")
                at_once = max(at_once, int(live or 0))
                if time.monotonic() - t0 > 1800:
                    raise SystemExit("embedding: not embedded within 30 minutes")
                time.sleep(0.2)
            took = time.monotonic() - t0
            texts = int(d.psql("SELECT count(DISTINCT hash) FROM chunks"))
            assert statuses(a, kb)[ids[0]] == "ready", statuses(a, kb)
            out[f"{n_nodes}_node"] = {"chunks": texts, "seconds_to_embedded": round(took, 1),
                                      "chunks_per_s": round(texts / took, 2), "nodes_embedding_at_once": at_once}
        finally:
            d.stop()
    out["speedup"] = round(out["1_node"]["seconds_to_embedded"] / out["2_node"]["seconds_to_embedded"], 2)
    return out


def text_report(rep: dict) -> str:
    lines = [f"quarry nodes benchmark — {rep['meta']['binary']} on {rep['meta']['cpu']} "
             f"({rep['meta']['cores']} cores)"]
    for k, v in rep["results"].items():
        lines.append(f"{k}: {json.dumps(v)}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "nodes.json")
    ap.add_argument("--only", nargs="*", default=["catch_up", "catch_up_polling", "queries", "ingestion", "failover", "rebuild"])
    ap.add_argument("--pin", action="store_true",
                    help="each node on a core of its own (taskset) with RAYON_NUM_THREADS=1")
    ap.add_argument("--repeat", type=int, default=1, help="ingestion runs of 1 and 2 nodes, in turn (median)")
    ap.add_argument("--embed-model", help="model directory for the embedding scenario (default: QUARRY_TEST_MINILM)")
    args = ap.parse_args()
    global PIN, REPEAT
    PIN, REPEAT = args.pin, max(1, args.repeat)
    if args.embed_model:
        global EMBED_MODEL
        EMBED_MODEL = args.embed_model
    binary = default_quarry()
    if binary is None:
        raise SystemExit("no quarry binary: build one or set QUARRY_BIN")
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="quarry-bench-nodes-"))
    rep = {"meta": {"binary": str(binary), "cpu": cpu_model(), "cores": os.cpu_count(), "load_start": loadavg(),
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, "results": {}}
    for name in args.only:
        t = time.monotonic()
        rep["results"][name] = globals()[name](binary, root)
        print(f"{name}: {json.dumps(rep['results'][name])} ({time.monotonic() - t:.0f} s)", flush=True)
    save(rep, args.out, text_report)


if __name__ == "__main__":
    main()
