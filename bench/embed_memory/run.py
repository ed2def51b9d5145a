#!/usr/bin/env python3
"""Embedding memory against document size (issue 65, item 18): peak resident memory and
chunks/s of `quarry kb upload` with a local embedding model, per model, per document, per
binary.

    eval "$(bash scripts/setup-models)"
    python3 bench/embed_memory/run.py --quarry before=PATH --quarry after=PATH \
        [--pages 2000] [--also-pages 500,1000] [--pdf PDF] [--models minilm,e5] [--cap-mib 4096] \
        [--database postgres://USER:PASSWORD@HOST:PORT/DB [--no-sqlite]]

- **Documents.** A generated Markdown document of `--pages` pages (default 2,000): page N is
  `# Page N: NAME` over two consecutive tldr pages (`../shared/corpora/tldr/pages`, headings
  demoted), about 1,900 characters a page, so about two chunks a page at the default 1,000/200
  cut: real English prose and commands, every chunk distinct. `--also-pages` adds smaller
  documents cut from the same pages (the growth with size), `--pdf` a real PDF
  (default: the 251-page Chinese Debian reference of `~/.cache/quarry-docs`).
- **Runs.** Per binary, model and document: a fresh `QUARRY_HOME`, `kb create`, then
  `quarry kb upload KB DOC --json` with `QUARRY_EMBED_MODEL` = the model's directory from
  `scripts/setup-models` (the CLI converts, indexes and embeds in its own process and returns
  when the document is ready). Peak RSS: `/usr/bin/time -v`'s maximum resident set size; the
  process's `VmHWM` is also polled every 0.2 s and the run is killed past `--cap-mib` (default
  4,096 MiB, so a binary whose memory grows with the document cannot take the machine's memory
  from others): such a run reports `killed at the cap` and the chunks it had embedded by then.
  The same upload with `QUARRY_EMBED_MODEL=none` (keyword only) is timed once per binary and
  document; chunks/s = chunks ÷ (wall with the model − wall keyword-only), which leaves out
  conversion, keyword indexing, process start and the model load (about a second).
- **PostgreSQL.** With `--database URL` (a database on a PostgreSQL 16 server with pgvector
  whose role may `CREATE DATABASE`), every run is also made on PostgreSQL, right after the
  same run on SQLite: a fresh database `embmem_PID_N` per run (`CREATE DATABASE … TEMPLATE
  template1` through `psql`, from `$QUARRY_TEST_PG_BIN` or the PATH, as bench/nodes does),
  `QUARRY_DATABASE_URL` pointing at it for `kb create` and `kb upload` (a fresh home still
  holds the node's keyword index), dropped afterwards. Peak RSS is still the quarry process's;
  where the server runs on this machine, the largest `VmHWM` of the run database's backends
  (found by their process titles, polled every second) is reported beside it (it counts the
  shared buffers a backend touched). Chunks embedded come from the run's database.
  `--no-sqlite` measures PostgreSQL alone.
- Runs are sequential (one process at a time on the machine): the figures are wall-clock and
  move with other load; the report records the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit import REPO, cpu_model, isolated_env, loadavg, save  # noqa: E402

WORK = Path(os.environ.get("QUARRY_BENCH_WORK", Path.home() / ".cache" / "quarry-bench" / "embed-memory"))


def log(msg):
    print(f"[embed-memory] {msg}", file=sys.stderr, flush=True)


def tldr_pages(root):
    pages = sorted((root / "pages").rglob("*.md"))
    if not pages:
        sys.exit(f"no tldr pages under {root}/pages")
    return pages


def generate(path, n_pages, src):
    """A Markdown document of `n_pages` pages, each two tldr pages under one heading."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    out = [f"# A long document of {n_pages} pages\n"]
    for i in range(n_pages):
        a, b = src[(2 * i) % len(src)], src[(2 * i + 1) % len(src)]
        out.append(f"\n# Page {i + 1}: {a.stem} and {b.stem}\n")
        for p in (a, b):
            text = p.read_text(encoding="utf-8", errors="replace")
            # The page's own headings one level down, under the page's.
            text = re.sub(r"^(#+)", r"#\1", text, flags=re.M)
            out.append("\n" + text.strip() + "\n")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(out), encoding="utf-8")
    tmp.rename(path)


def child_pid(pid):
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return int(kids[0]) if kids else None
    except (OSError, ValueError):
        return None


def vm_hwm_mib(pid):
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("VmHWM:"):
                return int(ln.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def pg_backends_hwm_mib(db):
    """The largest VmHWM (MiB) of the local PostgreSQL backends connected to database `db`,
    found by their process titles (`postgres: USER DB HOST(PORT) STATE`), and how many."""
    best, n = None, 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            title = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        parts = title.split()
        if len(parts) >= 3 and parts[0] == "postgres:" and parts[2] == db:
            hwm = vm_hwm_mib(d.name)
            if hwm:
                n += 1
                best = max(best or 0, hwm)
    return best, n


def run_capped(cmd, env, cap_mib, timeout, pg_db=None):
    """Runs `cmd` under /usr/bin/time -v, polling the command's VmHWM; kills it past
    `cap_mib` or `timeout`. Returns wall seconds, peak RSS (MiB), rc, stdout, stderr tail
    and why it was stopped (None when it finished). With `pg_db`, the largest VmHWM of that
    database's local PostgreSQL backends, polled every second."""
    tv = tempfile.NamedTemporaryFile(prefix="timev-", suffix=".txt", delete=False)
    tv.close()
    full = ["/usr/bin/time", "-v", "-o", tv.name, *map(str, cmd)]
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    start = time.perf_counter()
    p = subprocess.Popen(full, env=env, stdout=out, stderr=err, start_new_session=True)
    stopped, polled = None, 0.0
    pg_peak, pg_backends, ticks = None, 0, 0
    while p.poll() is None:
        time.sleep(0.2)
        ticks += 1
        if pg_db and ticks % 5 == 0:
            hwm, n = pg_backends_hwm_mib(pg_db)
            if hwm:
                pg_peak = max(pg_peak or 0, hwm)
                pg_backends = max(pg_backends, n)
        kid = child_pid(p.pid)
        hwm = vm_hwm_mib(kid) if kid else None
        if hwm:
            polled = max(polled, hwm)
        why = None
        if hwm and hwm > cap_mib:
            why = f"killed at the cap ({cap_mib} MiB)"
        elif time.perf_counter() - start > timeout:
            why = f"killed after {timeout} s"
        if why:
            stopped = why
            os.killpg(p.pid, 9)
            p.wait()
    wall = time.perf_counter() - start
    peak = None
    try:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", Path(tv.name).read_text())
        if m:
            peak = int(m.group(1)) / 1024
    except OSError:
        pass
    os.unlink(tv.name)
    out.seek(0)
    err.seek(0)
    res = {
        "wall_s": round(wall, 2),
        "peak_rss_mib": round(max(peak or 0, polled), 1) or None,
        "rc": p.returncode,
        "stopped": stopped,
    }
    if pg_db:
        res["pg_backend_peak_mib"] = round(pg_peak, 1) if pg_peak else None
        res["pg_backends"] = pg_backends
    return res, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")[-1500:]


def psql_bin():
    pg_bin = os.environ.get("QUARRY_TEST_PG_BIN")
    found = str(Path(pg_bin) / "psql") if pg_bin else shutil.which("psql")
    if not found or not Path(found).exists():
        sys.exit("--database needs psql: on the PATH or in $QUARRY_TEST_PG_BIN "
                 "(eval \"$(bash scripts/test-services start-pg)\")")
    return found


def psql(url, *sql):
    """Runs `sql` statements on `url` with psql; their output, stripped."""
    cmd = [psql_bin(), "-X", "-qAt", url]
    for q in sql:
        cmd += ["-c", q]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300).stdout.strip()


RUN_DBS = iter(range(1, 1 << 30))


class FreshDatabase:
    """An empty database on the server of `url`, made from template1 (which holds pgvector
    on the test services), dropped on exit."""

    def __init__(self, url):
        self.admin = url
        self.name = f"embmem_{os.getpid()}_{next(RUN_DBS)}"
        base, _, query = url.partition("?")
        self.url = base.rsplit("/", 1)[0] + "/" + self.name + ("?" + query if query else "")

    def __enter__(self):
        psql(self.admin, f"CREATE DATABASE {self.name} TEMPLATE template1")
        return self

    def __exit__(self, *_):
        try:
            psql(self.admin, f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        except (subprocess.SubprocessError, OSError) as e:
            log(f"could not drop {self.name}: {e}")


def upload(quarry, doc, model_dir, cap_mib, timeout, database=None):
    """One run; with `database` (a server URL), on a fresh PostgreSQL database of its own."""
    if database:
        with FreshDatabase(database) as db:
            return upload_on(quarry, doc, model_dir, cap_mib, timeout, db)
    return upload_on(quarry, doc, model_dir, cap_mib, timeout, None)


def upload_on(quarry, doc, model_dir, cap_mib, timeout, db):
    home = Path(tempfile.mkdtemp(prefix="home-", dir=WORK))
    env = isolated_env(home)
    env["QUARRY_EMBED_MODEL"] = str(model_dir) if model_dir else "none"
    # The store is the run's alone: the outer environment's database or bucket never leaks in.
    env.pop("QUARRY_DATABASE_URL", None)
    env.pop("QUARRY_BLOBS_URL", None)
    if db:
        env["QUARRY_DATABASE_URL"] = db.url
    try:
        c = subprocess.run([quarry, "kb", "create", "long"], env=env, capture_output=True,
                           text=True, timeout=300)
        if c.returncode != 0:
            return {"error": f"kb create: {c.stderr.strip()[-500:]}"}
        la = loadavg()
        res, _, stderr = run_capped([quarry, "kb", "upload", "long", doc, "--json"], env,
                                    cap_mib, timeout, db.name if db else None)
        res["load_before"] = la
        if res["rc"] != 0 and not res["stopped"]:
            res["stderr_tail"] = stderr
        # Chunks, and (with a model) how many have a vector: straight from the database, so
        # a run stopped at the cap still says how far it got.
        res.update(count_chunks_pg(db.url) if db else count_chunks(home))
        return res
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(Path(str(home).rstrip("/") + "-models"), ignore_errors=True)


# The same two tables, `chunks` and `embeddings` keyed by the chunk text's hash, in both stores.
CHUNKS_SQL = "SELECT count(*) FROM chunks"
EMBEDDED_SQL = "SELECT count(*) FROM chunks k WHERE EXISTS (SELECT 1 FROM embeddings e WHERE e.hash = k.hash)"


def count_chunks(home):
    import sqlite3

    dbs = sorted(Path(home).rglob("*.db"), key=lambda p: p.stat().st_size)
    if not dbs:
        return {}
    try:
        db = sqlite3.connect(f"file:{dbs[-1]}?mode=ro", uri=True)
        chunks = db.execute(CHUNKS_SQL).fetchone()[0]
        embedded = db.execute(EMBEDDED_SQL).fetchone()[0]
        db.close()
        return {"chunks": chunks, "chunks_embedded": embedded}
    except sqlite3.Error as e:
        return {"db_error": str(e)}


def count_chunks_pg(url):
    try:
        chunks, embedded = psql(url, CHUNKS_SQL, EMBEDDED_SQL).split()
        return {"chunks": int(chunks), "chunks_embedded": int(embedded)}
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        return {"db_error": str(e)[-300:]}


def text_report(rep):
    m = rep["meta"]
    pg = any(r.get("store") == "PostgreSQL" for r in rep["runs"])
    lines = [
        f"# Embedding memory against document size ({m['date']})",
        f"machine: {m['cores']} CPUs ({m['cpu']}), load {m['load_start']} at start, "
        f"{m.get('load_end')} at end",
        "`quarry kb upload` of one document in a fresh home, the CLI embedding in its own process;",
        "peak RSS = /usr/bin/time -v; chunks/s = chunks / (wall with the model - wall keyword-only).",
        f"runs stopped past {m['cap_mib']} MiB are marked '>' (killed at the cap).",
    ]
    if pg:
        lines += [
            "PostgreSQL: a fresh database per run on the server of --database; peak RSS is still the",
            "quarry process's; 'pg backend' = the largest VmHWM of that database's backends (MiB,",
            "polled every second; it counts the shared buffers a backend touched).",
        ]
    lines += [
        "",
        f"{'binary':<8} " + (f"{'store':<10} " if pg else "")
        + f"{'model':<22} {'document':<28} {'chunks':>7} {'embedded':>8} "
        f"{'peak RSS MiB':>12} {'wall s':>8} {'kw-only s':>9} {'chunks/s':>8}"
        + (f" {'pg backend':>10}" if pg else ""),
    ]
    for r in rep["runs"]:
        peak = r.get("peak_rss_mib")
        peak_s = "-" if peak is None else (f">{peak:.0f}" if r.get("stopped") else f"{peak:.0f}")
        cps = r.get("chunks_per_s")
        pgb = r.get("pg_backend_peak_mib")
        lines.append(
            f"{r['binary']:<8} " + (f"{r.get('store', 'SQLite'):<10} " if pg else "")
            + f"{r['model']:<22} {r['document']:<28} {r.get('chunks', '-'):>7} "
            f"{r.get('chunks_embedded', '-'):>8} {peak_s:>12} {r.get('wall_s', '-'):>8} "
            f"{r.get('keyword_only_s', '-'):>9} {('-' if cps is None else f'{cps:.1f}'):>8}"
            + ((f" {'-' if pgb is None else f'{pgb:.0f}':>10}") if pg else "")
            + (f"  ({r['stopped']})" if r.get("stopped") else "")
            + (f"  error: {r['error']}" if r.get("error") else "")
        )
    lines.append("")
    lines.append("keyword-only peak RSS (MiB): " + ", ".join(
        f"{k} {v}" for k, v in rep.get("keyword_only_peak_mib", {}).items()))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quarry", action="append", required=True,
                    help="LABEL=PATH of a quarry binary (repeat: the first is the baseline)")
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--also-pages", default="", help="smaller generated documents, e.g. 500,1000")
    ap.add_argument("--pdf", type=Path,
                    default=Path.home() / ".cache" / "quarry-docs" / "pdf" / "zh-debian-reference.zh-cn.pdf")
    ap.add_argument("--no-pdf", action="store_true")
    ap.add_argument("--models", default="minilm,e5")
    ap.add_argument("--cap-mib", type=int, default=4096)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per upload")
    ap.add_argument("--tldr", type=Path, default=REPO.parent / "shared" / "corpora" / "tldr")
    ap.add_argument("--database", metavar="URL",
                    help="also run on PostgreSQL: a fresh database per run on this URL's server "
                         "(its role may CREATE DATABASE; template1 must hold pgvector or allow it)")
    ap.add_argument("--no-sqlite", action="store_true", help="with --database: PostgreSQL only")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "embed-memory.json")
    a = ap.parse_args()
    if a.no_sqlite and not a.database:
        sys.exit("--no-sqlite needs --database")
    stores = ([] if a.no_sqlite else [("SQLite", None)]) + (
        [("PostgreSQL", a.database)] if a.database else [])
    if a.database:
        psql(a.database, "SELECT 1")  # reachable, before the long runs
    model_dirs = {"minilm": os.environ.get("QUARRY_TEST_MINILM"),
                  "e5": os.environ.get("QUARRY_TEST_E5")}
    names = {"minilm": "all-MiniLM-L6-v2", "e5": "multilingual-e5-small"}
    models = []
    for m in a.models.split(","):
        if not model_dirs.get(m):
            sys.exit(f"no directory for {m}: run eval \"$(bash scripts/setup-models)\" first")
        models.append((names[m], Path(model_dirs[m])))
    binaries = [tuple(q.split("=", 1)) for q in a.quarry]
    WORK.mkdir(parents=True, exist_ok=True)
    src = tldr_pages(a.tldr)
    docs = []
    for n in sorted({a.pages, *(int(x) for x in a.also_pages.split(",") if x)}):
        path = WORK / f"long-{n}-pages.md"
        generate(path, n, src)
        docs.append((f"generated, {n} pages", path))
    if not a.no_pdf and a.pdf.is_file():
        docs.append((a.pdf.name, a.pdf))
    rep = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu_model(),
                    "cores": os.cpu_count(), "load_start": loadavg(), "cap_mib": a.cap_mib,
                    "binaries": {k: v for k, v in binaries},
                    "stores": [name for name, _ in stores],
                    **({"database": re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", a.database),
                        "postgres": psql(a.database, "SHOW server_version")}
                       if a.database else {}),
                    "documents": {k: {"path": str(v), "bytes": v.stat().st_size} for k, v in docs},
                    "method": "see bench/README.md, Embedding memory"},
           "runs": [], "keyword_only_peak_mib": {}}
    for label, quarry in binaries:
        for dname, doc in docs:
            kws = {}
            for store, database in stores:
                log(f"{label}: keyword only, {store}, {dname}")
                kws[store] = kw = upload(quarry, doc, None, a.cap_mib, a.timeout, database)
                key = f"{label} / {dname}" if not a.database else f"{label} / {store} / {dname}"
                rep["keyword_only_peak_mib"][key] = kw.get("peak_rss_mib")
                if kw.get("error") or kw.get("stderr_tail"):
                    log(f"keyword-only run failed: {kw.get('error') or kw.get('stderr_tail')}")
            # Each model on each store in turn, so the stores' runs meet the same load.
            for mname, mdir in models:
                for store, database in stores:
                    kw = kws[store]
                    log(f"{label}: {mname}, {store}, {dname}")
                    r = upload(quarry, doc, mdir, a.cap_mib, a.timeout, database)
                    r.update(binary=label, store=store, model=mname, document=dname,
                             keyword_only_s=kw.get("wall_s"))
                    spent = (r.get("wall_s") or 0) - (kw.get("wall_s") or 0)
                    if r.get("chunks_embedded") and spent > 0:
                        r["chunks_per_s"] = round(r["chunks_embedded"] / spent, 2)
                    rep["runs"].append(r)
                    save(rep, a.out, text_report)
                    log(json.dumps({k: r.get(k) for k in (
                        "peak_rss_mib", "pg_backend_peak_mib", "wall_s", "chunks",
                        "chunks_embedded", "chunks_per_s", "stopped")}))
    save(rep, a.out, text_report)
    print(a.out.with_suffix(".txt").read_text())


if __name__ == "__main__":
    main()
