#!/usr/bin/env python3
"""Sources benchmark (issue 43): a folder source's first sync beside a plain upload of the same
files, a re-sync with nothing changed at several sizes (its time follows the listing, not the
content), a Git repository's first and no-change syncs, and a watched folder's change to
searchable latency.

    python3 bench/sources/run.py --quarry "$CARGO_TARGET_DIR/release/quarry" \
        [--sizes 10000,30000,100000] [--upload-sizes 100000] [--git-files 10000] \
        [--edits 60] [--parts folder,upload,git,watch] [--out bench/results/sources.json]

Files are generated deterministically from the tldr pages (../shared/corpora/tldr): file i is
page i mod 7,425 with a line that makes it unique (`variant i, token q000123z`), 1,000 files
per folder. Every `quarry` runs in a fresh QUARRY_HOME under ~/.cache/quarry-bench/sources
with no models (keyword search only; benchkit.isolated_env). Figures, not pass/fail. Standard
library only. See bench/README.md for the method.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchkit import (  # noqa: E402  (bench/benchkit.py)
    cpu_model, free_port, isolated_env, loadavg, percentile, save,
)

WORK = Path.home() / ".cache" / "quarry-bench" / "sources"
PER_FOLDER = 1000


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def per_min(n, secs):
    return round(n * 60.0 / secs, 1) if secs else None


# ---------------------------------------------------------------------------------------
# The files
# ---------------------------------------------------------------------------------------


def pages(tldr: Path) -> list[tuple[str, str]]:
    out = []
    for p in sorted((tldr / "pages").rglob("*.md")):
        # `..md` (the `.` command) would make a hidden file, which no sync lists.
        stem = p.stem if not p.stem.startswith(".") else "dot" + p.stem.lstrip(".")
        out.append((stem, p.read_text("utf-8", "replace")))
    if not out:
        sys.exit(f"no tldr pages under {tldr}/pages")
    return out


def token(i: int) -> str:
    return f"q{i:06}z"


def generate(dest: Path, n: int, src: list[tuple[str, str]]) -> dict:
    """`n` Markdown files under `dest` (made once; kept between runs)."""
    marker = dest / ".complete"
    if marker.exists() and marker.read_text() == str(n):
        pass
    else:
        shutil.rmtree(dest, ignore_errors=True)
        for i in range(n):
            stem, text = src[i % len(src)]
            d = dest / f"d{i // PER_FOLDER:03}"
            if i % PER_FOLDER == 0:
                d.mkdir(parents=True, exist_ok=True)
            (d / f"{stem}-{i}.md").write_text(
                f"{text.rstrip()}\n\n> variant {i}, token {token(i)}\n", encoding="utf-8")
        marker.write_text(str(n))
    files = [p for p in dest.rglob("*.md")]
    return {"files": len(files), "mb": round(sum(p.stat().st_size for p in files) / 1e6, 2)}


def path_of(root: Path, i: int, src: list[tuple[str, str]]) -> Path:
    return root / f"d{i // PER_FOLDER:03}" / f"{src[i % len(src)][0]}-{i}.md"


# ---------------------------------------------------------------------------------------
# Running quarry
# ---------------------------------------------------------------------------------------


class Home:
    def __init__(self, quarry: Path, label: str):
        self.quarry = quarry
        self.dir = WORK / "homes" / label
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.dir.parent / f"{label}-models", ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.env = isolated_env(self.dir)

    def run(self, *args, timeout=6 * 3600) -> tuple[dict, float]:
        t0 = time.perf_counter()
        r = subprocess.run([str(self.quarry), "--json", *map(str, args)], env=self.env,
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        secs = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"quarry {' '.join(map(str, args))}: {r.returncode}\n{r.stderr[-2000:]}")
        try:
            return json.loads(r.stdout), secs
        except ValueError:
            return {"stdout": r.stdout[-500:]}, secs

    def count_ready(self, kb: str) -> dict:
        out, _ = self.run("kb", "docs", kb)
        docs = out.get("documents", out.get("data", out)) if isinstance(out, dict) else out
        by = {}
        for d in docs if isinstance(docs, list) else []:
            st = d.get("status", "?")
            by[st] = by.get(st, 0) + 1
        return by

    def search_hits(self, word: str, kb: str) -> int:
        out, _ = self.run("search", word, "-c", kb, "-n", "5")
        rs = out.get("results", out) if isinstance(out, dict) else out
        return len(rs) if isinstance(rs, list) else -1

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def folder_sync(quarry: Path, folder: Path, n: int, resyncs: int,
                no_wait: bool) -> tuple[dict, Home, str]:
    """First sync and no-change re-syncs of `folder`. `no_wait`: the first sync only lists,
    fetches and applies (the documents stay queued); else it returns once every document is
    processed (keyword-searchable)."""
    home = Home(quarry, f"folder-{n}-{'queued' if no_wait else 'processed'}")
    home.run("kb", "create", "bench")
    src, _ = home.run("source", "add", "bench", "--folder", folder)
    la = loadavg()
    first, secs = home.run("source", "sync", src["id"], *(["--no-wait"] if no_wait else []))
    c = first["report"]["counts"]
    res = {"files": n, "load_before": la, "first_sync_s": round(secs, 2),
           "first_sync_docs_per_min": per_min(c["added"], secs), "first_counts": c,
           "first_sync_processed": not no_wait}
    if not no_wait:
        res["status"] = home.count_ready("bench")
        res["searchable_last_file"] = home.search_hits(token(n - 1), "bench")
    times = []
    for _ in range(resyncs):
        again, s2 = home.run("source", "sync", src["id"])
        times.append(round(s2, 3))
        res["resync_counts"] = again["report"]["counts"]
    res["resync_s"] = times
    res["resync_median_s"] = round(statistics.median(times), 3)
    res["resync_ms_per_1000_files"] = round(1000 * 1000 * res["resync_median_s"] / n, 1)
    # What the listing alone costs (stat of every file), for comparison: Python's own walk.
    t0 = time.perf_counter()
    walked = sum(1 for _ in folder.rglob("*.md"))
    res["python_walk_s"] = round(time.perf_counter() - t0, 3)
    res["python_walk_files"] = walked
    res["load_end"] = loadavg()
    return res, home, src["id"]


def upload(quarry: Path, folder: Path, n: int) -> dict:
    home = Home(quarry, f"upload-{n}")
    home.run("kb", "create", "bench")
    la = loadavg()
    _, secs = home.run("kb", "upload", "bench", folder)
    res = {"files": n, "load_before": la, "upload_s": round(secs, 2),
           "docs_per_min": per_min(n, secs), "status": home.count_ready("bench"),
           "load_end": loadavg()}
    home.remove()
    return res


def git(*args, cwd):
    r = subprocess.run(["git", "-c", "user.name=Bench", "-c", "user.email=bench@example.com",
                        "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
                       cwd=cwd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"git {args}: {r.stderr[-1000:]}")
    return r.stdout


def git_sync(quarry: Path, n: int, src: list, resyncs: int) -> dict:
    repo = WORK / f"git-{n}"
    if not (repo / ".git").exists() or not (repo / ".complete").exists():
        shutil.rmtree(repo, ignore_errors=True)
        generate(repo / "files", n, src)
        git("init", "-q", cwd=repo)
        git("add", "-A", "files", cwd=repo)
        git("commit", "-q", "-m", f"{n} files", cwd=repo)
        (repo / ".complete").write_text(str(n))
    home = Home(quarry, f"git-{n}")
    home.run("kb", "create", "bench")
    s, _ = home.run("source", "add", "bench", "--git", repo, "--path", "files")
    la = loadavg()
    # The sync side (clone, list, read, apply): the documents' processing is the folder's.
    first, secs = home.run("source", "sync", s["id"], "--no-wait")
    c = first["report"]["counts"]
    times = []
    res = {"files": n, "load_before": la, "first_sync_s": round(secs, 2),
           "first_sync_docs_per_min": per_min(c["added"], secs), "first_counts": c,
           "first_sync_processed": False}
    for _ in range(resyncs):
        again, s2 = home.run("source", "sync", s["id"])
        times.append(round(s2, 3))
        res["resync_counts"] = again["report"]["counts"]
    res["resync_s"] = times
    res["resync_median_s"] = round(statistics.median(times), 3)
    res["load_end"] = loadavg()
    home.remove()
    return res


# ---------------------------------------------------------------------------------------
# Watched folder: change -> searchable
# ---------------------------------------------------------------------------------------


def http(method, url, obj=None, timeout=60):
    body = json.dumps(obj).encode() if obj is not None else None
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={"content-type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def drop_queued_jobs(home: Home) -> int:
    """Empties the job queue of `home` (SQLite): the documents of a `--no-wait` sync stay
    queued but no worker processes them, so the watched-change latency is not measured
    behind a backlog of 100,000 conversions."""
    import sqlite3
    dbs = list(home.dir.rglob("quarry.db"))
    if not dbs:
        return 0
    with sqlite3.connect(dbs[0]) as db:
        n = db.execute("DELETE FROM jobs").rowcount
    return n


def watch_latency(home: Home, source_id: str, folder: Path, n: int, edits: int,
                  src: list) -> dict:
    home.run("source", "set", source_id, "--watch")
    # The reports before the server starts: its reconciliation is the first one after.
    status, _ = home.run("source", "status", source_id, "--reports", "100")
    before = {r["id"] for r in status.get("reports", [])}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    logf = open(home.dir / "serve.log", "w")
    t_start = time.perf_counter()
    proc = subprocess.Popen([str(home.quarry), "serve", "--transport", "http", "--port", str(port)],
                            env=home.env, stdout=logf, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    res = {"files": n, "edits": edits, "load_before": loadavg()}
    try:
        deadline = time.time() + 3600
        # The reconciliation at start: a full sync that finds nothing changed.
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}")
            try:
                st, body = http("GET", f"{base}/api/v1/sources/{source_id}/reports?limit=5", timeout=5)
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
                continue
            if st == 200:
                new = [r for r in body["data"] if r["id"] not in before and r["finished_at"]]
                if new:
                    res["reconciliation_s_after_start"] = round(time.perf_counter() - t_start, 2)
                    res["reconciliation_report_s"] = round((new[0]["finished_at"] - new[0]["started_at"]) / 1000, 3)
                    res["reconciliation_counts"] = new[0]["counts"]
                    break
            time.sleep(0.2)
        lat, misses = [], 0
        for k in range(edits):
            i = (k * 7919 + 13) % n
            word = f"edit{k:03}w{i}x"
            p = path_of(folder, i, src)
            tmp = p.with_name(f".{p.name}.tmp")
            text = p.read_text("utf-8")
            tmp.write_text(f"{text.rstrip()}\n\nEdited: {word}.\n", encoding="utf-8")
            os.replace(tmp, p)  # an editor's save: a temporary file renamed over the original
            t0 = time.perf_counter()
            while True:
                st, body = http("POST", f"{base}/search", {"query": word, "collection": "bench", "limit": 3})
                if st == 200 and body.get("results"):
                    lat.append(time.perf_counter() - t0)
                    break
                if time.perf_counter() - t0 > 60:
                    misses += 1
                    break
                time.sleep(0.02)
        st, body = http("GET", f"{base}/api/v1/sources/{source_id}/reports?limit=100")
        incremental = [r for r in (body or {}).get("data", []) if r["id"] not in before][:-1]
        res.update({
            "searchable_s": [round(x, 3) for x in lat],
            "p50_s": round(percentile(lat, 50), 3) if lat else None,
            "p90_s": round(percentile(lat, 90), 3) if lat else None,
            "p99_s": round(percentile(lat, 99), 3) if lat else None,
            "max_s": round(max(lat), 3) if lat else None,
            "not_found_in_60s": misses,
            "incremental_reports": len(incremental),
            "incremental_report_ms_median": round(statistics.median(
                [r["finished_at"] - r["started_at"] for r in incremental]), 1) if incremental else None,
            "load_end": loadavg(),
        })
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        logf.close()
    return res


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def text_report(rep) -> str:
    m = rep["meta"]
    lines = [f"# Sources benchmark ({m['date']})",
             f"machine: {m['cpu']}, {m['cores']} cores; load {m['load_start']} -> {m.get('load_end')}",
             f"binary: {m['quarry']}", ""]
    f = rep.get("folder", [])
    if f:
        lines.append("Folder source: first sync (list, read, apply; documents left queued) and a re-sync with nothing changed")
        lines.append(f"{'files':>8} {'first s':>9} {'docs/min':>9} {'re-sync s':>10} {'ms/1000 files':>14} {'py walk s':>10}")
        for r in f:
            lines.append(f"{r['files']:>8} {r['first_sync_s']:>9} {r['first_sync_docs_per_min']:>9} "
                         f"{r['resync_median_s']:>10} {r['resync_ms_per_1000_files']:>14} {r['python_walk_s']:>10}")
        lines.append("")
    p = rep.get("processed")
    if p:
        lines.append(f"Folder source of {p['files']} files, first sync until every document is processed "
                     f"(keyword-searchable): {p['first_sync_s']} s, {p['first_sync_docs_per_min']} docs/min "
                     f"({p.get('status')}); re-sync {p['resync_median_s']} s")
    for r in rep.get("upload", []):
        lines.append(f"Plain upload of the same {r['files']} files (quarry kb upload KB DIR): "
                     f"{r['upload_s']} s, {r['docs_per_min']} docs/min ({r.get('status')})")
    if p or rep.get("upload"):
        lines.append("")
    g = rep.get("git")
    if g:
        lines.append(f"Git source (local repository), {g['files']} files: first sync {g['first_sync_s']} s "
                     f"({g['first_sync_docs_per_min']} docs/min, documents left queued); "
                     f"no-change re-sync {g['resync_median_s']} s")
        lines.append("")
    for key, what in (("watch", "processed documents"),
                      ("watch_large", "files known to the store, queue emptied (not in the keyword index)")):
        wl = rep.get(key)
        if not wl:
            continue
        lines.append(f"Watched folder of {wl['files']} files ({what}), {len(wl.get('searchable_s', []))} "
                     f"single-file edits (temporary file renamed over the original) to keyword-searchable:")
        lines.append(f"  p50 {wl.get('p50_s')} s, p90 {wl.get('p90_s')} s, p99 {wl.get('p99_s')} s, "
                     f"max {wl.get('max_s')} s; not found within 60 s: {wl.get('not_found_in_60s')}")
        lines.append(f"  reconciliation at start: {wl.get('reconciliation_report_s')} s "
                     f"({wl.get('reconciliation_counts')}); incremental syncs: {wl.get('incremental_reports')}, "
                     f"median {wl.get('incremental_report_ms_median')} ms each")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quarry", required=True, type=Path)
    ap.add_argument("--tldr", type=Path, default=REPO.parent / "shared" / "corpora" / "tldr")
    ap.add_argument("--sizes", default="10000,30000,100000",
                    help="folder sizes for the sync side and the no-change re-sync")
    ap.add_argument("--process", type=int, default=100000,
                    help="files synced until searchable, and uploaded beside")
    ap.add_argument("--git-files", type=int, default=10000)
    ap.add_argument("--resyncs", type=int, default=3)
    ap.add_argument("--edits", type=int, default=60)
    ap.add_argument("--parts", default="resync,process,git,watch,watch-large")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "sources.json")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    sizes = sorted(int(x) for x in a.sizes.split(","))
    src = pages(a.tldr)
    rep = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu_model(),
                    "cores": os.cpu_count(), "load_start": loadavg(),
                    "quarry": str(a.quarry), "sizes": sizes, "tldr_pages": len(src),
                    "method": "see bench/README.md, Sources"}}

    def checkpoint():
        save(rep, a.out, text_report)

    def folder(n):
        f = WORK / f"folder-{n}"
        log(f"generating {n} files")
        rep["meta"][f"folder_{n}"] = generate(f, n, src)
        return f

    keep = {}
    if "resync" in parts:
        # The sync side at every size (documents left queued), and re-syncs with nothing changed.
        rep["folder"] = []
        for n in sizes:
            f = folder(n)
            log(f"folder source, {n} files: first sync (queued only) and re-syncs")
            r, home, sid = folder_sync(a.quarry, f, n, a.resyncs, no_wait=True)
            rep["folder"].append(r)
            checkpoint()
            if "watch-large" in parts and n == sizes[-1]:
                keep["large"] = (home, sid, f, n)
            else:
                home.remove()
    if "process" in parts:
        # A first sync until every document is searchable, beside a plain upload of the same.
        f = folder(a.process)
        log(f"folder source, {a.process} files: first sync until every document is processed")
        r, home, sid = folder_sync(a.quarry, f, a.process, a.resyncs, no_wait=False)
        rep["processed"] = r
        checkpoint()
        keep["processed"] = (home, sid, f, a.process)
        log(f"plain upload of the same {a.process} files")
        rep["upload"] = [upload(a.quarry, f, a.process)]
        checkpoint()
    if "git" in parts:
        log(f"git source of {a.git_files} files")
        rep["git"] = git_sync(a.quarry, a.git_files, src, a.resyncs)
        checkpoint()
    if "watch" in parts and "processed" in keep:
        home, sid, f, n = keep["processed"]
        log(f"watched folder of {n} processed files: {a.edits} edits")
        rep["watch"] = watch_latency(home, sid, f, n, a.edits, src)
        checkpoint()
    if "watch-large" in parts and "large" in keep:
        home, sid, f, n = keep["large"]
        dropped = drop_queued_jobs(home)
        log(f"watched folder of {n} files (queue emptied: {dropped} jobs): {a.edits} edits")
        rep["watch_large"] = watch_latency(home, sid, f, n, a.edits, src)
        rep["watch_large"]["queued_jobs_dropped"] = dropped
        checkpoint()
    for home, *_ in keep.values():
        home.remove()
    checkpoint()
    print(text_report(rep))


if __name__ == "__main__":
    main()
