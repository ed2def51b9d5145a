#!/usr/bin/env python3
"""Compare QMD's BM25 CLI path with Quarry's CLI on one markdown corpus.

Python 3.11, standard library only.

For each tool, in a fresh temporary home:
  1. `collection add CORPUS --name NAME --mask '**/*.md'`  -> index wall time, files/s
  2. `update` (re-scan of an unchanged corpus)            -> wall time
  3. index size on disk (bytes of the tool's data dir)
  4. every query `--runs` times: `search QUERY -n N --json` -> end-to-end latency
     p50/p90/p99/mean, mean number of results, errors.
Also reports, per query, how many of the top-N files both tools return.

Usage:
  python3 bench/qmd/compare.py --corpus /work/shared/corpora/tldr/pages \
      --quarry target/release/quarry --qmd "$(bench/qmd/install.sh)" --out bench.json

A tool whose command is missing is skipped with a message; the other still runs.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# ~34 realistic queries over a corpus of shell-command docs (tldr pages):
# single words, keyword phrases, natural-language questions, and Chinese.
DEFAULT_QUERIES: list[str] = [
    # one word
    "tar",
    "grep",
    "ssh",
    "docker",
    "rsync",
    "chmod",
    "curl",
    "ffmpeg",
    "systemctl",
    # keyword phrases
    "extract tar archive",
    "list open ports",
    "git undo last commit",
    "compress directory zip",
    "change file permissions",
    "download file",
    "kill process by name",
    "disk usage directory",
    "convert video to gif",
    "search text in files recursively",
    "copy files over ssh",
    "docker remove all containers",
    "python virtual environment",
    # natural-language questions
    "how do I find files by name",
    "how to see which process is using a port",
    "what command shows free memory",
    "how can I resize an image from the command line",
    "how do I create a symbolic link",
    "how to check my ip address",
    "how do I schedule a cron job",
    "show the last lines of a log file and follow it",
    # Chinese
    "压缩文件",
    "查看磁盘空间",
    "下载文件",
    "列出目录内容",
]


# --------------------------------------------------------------------------
# helpers


class CmdResult:
    __slots__ = ("argv", "rc", "wall", "cpu", "maxrss_kb", "stdout", "stderr", "timed_out")

    def __init__(self, argv, rc, wall, cpu, maxrss_kb, stdout, stderr, timed_out):
        self.argv = argv
        self.rc = rc
        self.wall = wall
        self.cpu = cpu
        self.maxrss_kb = maxrss_kb
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out


def run_cmd(argv: list[str], env: dict, cwd: str, timeout: float, nice: int = 0) -> CmdResult:
    """Run argv, capturing output to temp files, and reap it with wait4 so we
    get this child's own CPU time and peak RSS (not the whole script's)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        preexec = (lambda: os.nice(nice)) if nice else None
        t0 = time.perf_counter()
        p = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd,
            preexec_fn=preexec, start_new_session=True,
        )
        timed_out = threading.Event()

        def _kill():
            timed_out.set()
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, _kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return CmdResult(
            argv, p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss,
            out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
            timed_out.is_set(),
        )


def dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            total += st.st_size
    return total


def count_md(corpus: Path) -> int:
    n = 0
    for _root, _dirs, files in os.walk(corpus):
        n += sum(1 for f in files if f.endswith(".md"))
    return n


def percentile(xs: list[float], p: float) -> float | None:
    """Linear-interpolated percentile (like numpy's default)."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def load_queries(path: str | None) -> tuple[list[str], str]:
    if not path:
        return list(DEFAULT_QUERIES), "built-in"
    p = Path(path)
    if not p.exists():
        print(f"note: queries file {path} not found; using the built-in list", file=sys.stderr)
        return list(DEFAULT_QUERIES), "built-in"
    qs = []
    for line in p.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        obj = json.loads(line)
        q = obj["query"] if isinstance(obj, dict) else str(obj)
        if q.strip():
            qs.append(q)
    return qs, str(p)


def norm_file(f: str, corpus: Path, coll: str) -> str:
    """Map a result's file to a corpus-relative path so the tools can be compared.
    QMD prints qmd://<collection>/<relpath>; Quarry may print a URI, an absolute
    or a relative path."""
    if not isinstance(f, str):
        return str(f)
    m = re.match(r"^[a-zA-Z][\w+.-]*://(.*)$", f)
    if m:
        rest = m.group(1)
        if rest.startswith(coll + "/"):
            rest = rest[len(coll) + 1:]
        f = rest
    else:
        try:
            pf = Path(f)
            if pf.is_absolute():
                f = str(pf.resolve().relative_to(corpus.resolve()))
        except (ValueError, OSError):
            pass
        if f.startswith(coll + "/"):
            f = f[len(coll) + 1:]
    return f.removeprefix("./").lower()


# --------------------------------------------------------------------------
# tools


class Tool:
    name = "?"

    def __init__(self, cmd: list[str]):
        self.cmd = cmd

    def env(self, home: Path) -> dict:
        raise NotImplementedError

    def data_dir(self, home: Path) -> Path:
        return home


class QmdTool(Tool):
    name = "qmd"

    def env(self, home: Path) -> dict:
        e = dict(os.environ)
        # QMD: config in $XDG_CONFIG_HOME/qmd/index.yml (else $HOME/.config/qmd),
        # index in $XDG_CACHE_HOME/qmd/index.sqlite (else $HOME/.cache/qmd).
        # QMD_CONFIG_DIR / INDEX_PATH override those; drop them so the temp
        # home is what counts. cwd is the temp home too, so no project-local
        # .qmd/index.yaml above the cwd gets picked up.
        for k in ("QMD_CONFIG_DIR", "INDEX_PATH"):
            e.pop(k, None)
        e["HOME"] = str(home)
        e["XDG_CONFIG_HOME"] = str(home / "config")
        e["XDG_CACHE_HOME"] = str(home / "cache")
        e["NO_COLOR"] = "1"
        e["QMD_FORCE_CPU"] = "1"  # never probe GPUs (BM25 path does not load llama.cpp anyway)
        return e


class QuarryTool(Tool):
    name = "quarry"

    def env(self, home: Path) -> dict:
        e = dict(os.environ)
        e["QUARRY_HOME"] = str(home / "quarry")
        e["HOME"] = str(home)
        e["XDG_CONFIG_HOME"] = str(home / "config")
        e["XDG_CACHE_HOME"] = str(home / "cache")
        e["NO_COLOR"] = "1"
        return e

    def data_dir(self, home: Path) -> Path:
        return home / "quarry"


def resolve_cmd(spec: str | None) -> tuple[list[str] | None, str]:
    """Return (argv prefix, message). spec is a path or a command name."""
    if not spec:
        return None, "not given"
    p = Path(spec).expanduser()
    if p.exists():
        if not os.access(p, os.X_OK) or p.is_dir():
            return None, f"{spec} is not an executable file"
        return [str(p.resolve())], "ok"
    found = shutil.which(spec)
    if found:
        return [found], "ok"
    return None, f"{spec} not found"


def bench_tool(tool: Tool, args, corpus: Path, n_files: int, queries: list[str]) -> dict:
    res: dict = {"tool": tool.name, "command": tool.cmd, "skipped": False}
    base = Path(args.workdir) if args.workdir else None
    if base:
        base.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix=f"bench-{tool.name}-", dir=base))
    env = tool.env(home)
    cwd = str(home)
    coll = args.name
    try:
        v = run_cmd(tool.cmd + ["--version"], env, cwd, 60)
        res["version"] = (v.stdout.strip() or v.stderr.strip()).splitlines()[0] if v.rc == 0 and (v.stdout or v.stderr).strip() else None

        # 1. index
        print(f"[{tool.name}] indexing {corpus} ({n_files} .md files) in {home} ...", file=sys.stderr, flush=True)
        r = run_cmd(tool.cmd + ["collection", "add", str(corpus), "--name", coll, "--mask", "**/*.md"],
                    env, cwd, args.index_timeout, args.nice)
        res["index"] = {
            "wall_s": r.wall, "cpu_s": r.cpu, "peak_rss_kb": r.maxrss_kb, "rc": r.rc,
            "files": n_files, "files_per_s": (n_files / r.wall) if r.wall > 0 else None,
            "timed_out": r.timed_out,
        }
        if r.rc != 0:
            res["index"]["stderr_tail"] = (r.stderr or r.stdout)[-2000:]
            print(f"[{tool.name}] indexing FAILED rc={r.rc}: {(r.stderr or r.stdout)[-500:]}", file=sys.stderr)
            res["error"] = "indexing failed"
            return res
        res["index"]["stdout_tail"] = r.stdout[-400:]

        # 2. re-scan of the unchanged corpus
        u = run_cmd(tool.cmd + ["update"], env, cwd, args.index_timeout, args.nice)
        res["update"] = {"wall_s": u.wall, "cpu_s": u.cpu, "rc": u.rc}
        if u.rc != 0:
            res["update"]["stderr_tail"] = (u.stderr or u.stdout)[-1000:]

        # 3. size on disk
        res["index_bytes"] = dir_size(tool.data_dir(home))

        # 4. queries
        print(f"[{tool.name}] {len(queries)} queries x {args.runs} runs ...", file=sys.stderr, flush=True)
        for q in queries[: args.warmup]:
            run_cmd(tool.cmd + ["search", q, "-n", str(args.n), "--json"], env, cwd, args.search_timeout, args.nice)
        lat: list[float] = []
        cpu: list[float] = []
        rss: list[int] = []
        per_q: dict[str, dict] = {q: {"lat": [], "results": None, "files": [], "error": None} for q in queries}
        errors = 0
        for _run in range(args.runs):
            for q in queries:
                s = run_cmd(tool.cmd + ["search", q, "-n", str(args.n), "--json"],
                            env, cwd, args.search_timeout, args.nice)
                lat.append(s.wall)
                cpu.append(s.cpu)
                rss.append(s.maxrss_kb)
                pq = per_q[q]
                pq["lat"].append(s.wall)
                if s.rc != 0:
                    errors += 1
                    pq["error"] = f"rc={s.rc}: {(s.stderr or s.stdout).strip()[-300:]}"
                    continue
                try:
                    data = json.loads(s.stdout) if s.stdout.strip() else []
                    if isinstance(data, dict):  # tolerate {"results": [...]}
                        data = data.get("results", [])
                    if not isinstance(data, list):
                        raise ValueError("not a JSON array")
                except ValueError as e:
                    errors += 1
                    pq["error"] = f"bad JSON ({e}): {s.stdout[:200]!r}"
                    continue
                if pq["results"] is None:
                    pq["results"] = len(data)
                    pq["files"] = [norm_file(d.get("file", ""), corpus, coll) for d in data if isinstance(d, dict)]
                    pq["top"] = [
                        {k: d.get(k) for k in ("file", "title", "score")} for d in data[:3] if isinstance(d, dict)
                    ]
        counts = [pq["results"] for pq in per_q.values() if pq["results"] is not None]
        res["search"] = {
            "samples": len(lat),
            "errors": errors,
            "p50_ms": 1000 * percentile(lat, 50) if lat else None,
            "p90_ms": 1000 * percentile(lat, 90) if lat else None,
            "p99_ms": 1000 * percentile(lat, 99) if lat else None,
            "mean_ms": 1000 * statistics.fmean(lat) if lat else None,
            "min_ms": 1000 * min(lat) if lat else None,
            "max_ms": 1000 * max(lat) if lat else None,
            "cpu_mean_ms": 1000 * statistics.fmean(cpu) if cpu else None,
            "peak_rss_kb_max": max(rss) if rss else None,
            "mean_results": statistics.fmean(counts) if counts else None,
            "zero_result_queries": sum(1 for c in counts if c == 0),
        }
        res["per_query"] = {
            q: {
                "p50_ms": 1000 * percentile(pq["lat"], 50) if pq["lat"] else None,
                "results": pq["results"],
                "files": pq["files"],
                "top": pq.get("top", []),
                "error": pq["error"],
            }
            for q, pq in per_q.items()
        }
        return res
    finally:
        if args.keep_temp:
            res["home"] = str(home)
        else:
            shutil.rmtree(home, ignore_errors=True)


# --------------------------------------------------------------------------
# report


def fmt(v, spec: str = ".1f", unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:{spec}}{unit}"


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    x = float(n)
    for u in ("B", "KiB", "MiB", "GiB"):
        if x < 1024 or u == "GiB":
            return f"{x:.1f} {u}" if u != "B" else f"{int(x)} B"
        x /= 1024
    return str(n)


def print_table(report: dict) -> None:
    tools = report["tools"]
    names = list(tools)
    cols = [(n, tools[n]) for n in names]

    def row(label, getter):
        vals = []
        for _n, t in cols:
            if t.get("skipped"):
                vals.append("skipped")
            else:
                try:
                    vals.append(getter(t))
                except (KeyError, TypeError):
                    vals.append("-")
        return [label] + vals

    rows = [
        row("version", lambda t: t.get("version") or "-"),
        row("index wall (s)", lambda t: fmt(t["index"]["wall_s"], ".2f")),
        row("index CPU (s)", lambda t: fmt(t["index"]["cpu_s"], ".2f")),
        row("index files/s", lambda t: fmt(t["index"]["files_per_s"], ".0f")),
        row("index peak RSS", lambda t: human_bytes(t["index"]["peak_rss_kb"] * 1024)),
        row("update (no-op) wall (s)", lambda t: fmt(t["update"]["wall_s"], ".2f")),
        row("index size", lambda t: f'{human_bytes(t["index_bytes"])} ({t["index_bytes"]:,} B)'),
        row("search p50 (ms)", lambda t: fmt(t["search"]["p50_ms"])),
        row("search p90 (ms)", lambda t: fmt(t["search"]["p90_ms"])),
        row("search p99 (ms)", lambda t: fmt(t["search"]["p99_ms"])),
        row("search mean (ms)", lambda t: fmt(t["search"]["mean_ms"])),
        row("search CPU mean (ms)", lambda t: fmt(t["search"]["cpu_mean_ms"])),
        row("search peak RSS", lambda t: human_bytes(t["search"]["peak_rss_kb_max"] * 1024)),
        row("mean results / query", lambda t: fmt(t["search"]["mean_results"], ".2f")),
        row("zero-result queries", lambda t: str(t["search"]["zero_result_queries"])),
        row("search errors", lambda t: f'{t["search"]["errors"]}/{t["search"]["samples"]}'),
    ]
    header = ["metric"] + names
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    m = report["meta"]
    print()
    print(f"corpus: {m['corpus']} ({m['files']} .md files)   queries: {m['queries']} ({m['queries_source']})"
          f"   runs: {m['runs']}   -n {m['n']}   nice: {m['nice']}"
          f"   load: {m['loadavg_start'][0]:.2f} -> {m['loadavg_end'][0]:.2f}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    for n, t in cols:
        if t.get("skipped"):
            print(f"\n{n}: skipped — {t.get('reason')}")
        elif t.get("error"):
            print(f"\n{n}: {t['error']}")

    pq = report.get("per_query")
    if pq:
        live = [n for n, t in cols if not t.get("skipped") and "per_query" in t]
        print()
        hdr = ["query"] + [f"{n} n" for n in live] + [f"{n} p50ms" for n in live]
        if len(live) == 2:
            hdr.append(f"overlap@{m['n']}")
        lines = []
        for q, d in pq.items():
            line = [q[:48]]
            line += [fmt(d.get(n, {}).get("results"), "d") if d.get(n, {}).get("results") is not None
                     else ("ERR" if d.get(n, {}).get("error") else "-") for n in live]
            line += [fmt(d.get(n, {}).get("p50_ms")) for n in live]
            if len(live) == 2:
                line.append(fmt(d.get("overlap"), "d"))
            lines.append(line)
        w = [max(_dispw(str(r[i])) for r in lines + [hdr]) for i in range(len(hdr))]
        print("  ".join(_pad(h, x) for h, x in zip(hdr, w)))
        for line in lines:
            print("  ".join(_pad(str(c), x) for c, x in zip(line, w)))


def _dispw(s: str) -> int:
    # CJK characters take two terminal columns
    return sum(2 if ord(ch) >= 0x2E80 else 1 for ch in s)


def _pad(s: str, w: int) -> str:
    return s + " " * max(0, w - _dispw(s))


# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="folder of .md files")
    ap.add_argument("--queries", help="JSONL file, one {\"query\": ...} per line (default: built-in list)")
    ap.add_argument("--quarry", help="path to the quarry binary (skipped if missing)")
    ap.add_argument("--qmd", help="qmd command, e.g. the path printed by bench/qmd/install.sh (skipped if absent)")
    ap.add_argument("--out", help="write the JSON report here")
    ap.add_argument("--runs", type=int, default=5, help="times each query is run per tool (default 5)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed warm-up queries per tool (default 3)")
    ap.add_argument("-n", dest="n", type=int, default=10, help="results per query (default 10)")
    ap.add_argument("--name", default="bench", help="collection name (default bench)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run every tool command under this niceness (e.g. 10 on a shared machine)")
    ap.add_argument("--workdir", help="parent folder for the temporary homes (default: system temp)")
    ap.add_argument("--keep-temp", action="store_true", help="keep the temporary homes")
    ap.add_argument("--index-timeout", type=float, default=1800)
    ap.add_argument("--search-timeout", type=float, default=60)
    ap.add_argument("--tools", default="quarry,qmd", help="comma list and order of tools to run")
    args = ap.parse_args(argv)

    corpus = Path(args.corpus).expanduser().resolve()
    if not corpus.is_dir():
        print(f"error: corpus {corpus} is not a directory", file=sys.stderr)
        return 2
    queries, qsrc = load_queries(args.queries)
    n_files = count_md(corpus)

    report: dict = {
        "meta": {
            "corpus": str(corpus), "files": n_files, "queries": len(queries), "queries_source": qsrc,
            "runs": args.runs, "warmup": args.warmup, "n": args.n, "nice": args.nice,
            "host": platform.node(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "latency": "end-to-end wall time of one CLI process (spawn to exit), seconds->ms",
            "loadavg_start": list(os.getloadavg()),
        },
        "tools": {},
    }

    specs = {"quarry": (QuarryTool, args.quarry), "qmd": (QmdTool, args.qmd)}
    ran_any = False
    for name in [t.strip() for t in args.tools.split(",") if t.strip()]:
        if name not in specs:
            print(f"error: unknown tool {name}", file=sys.stderr)
            return 2
        cls, spec = specs[name]
        cmd, why = resolve_cmd(spec)
        if cmd is None:
            msg = f"{name}: skipped ({'--' + name} {why})"
            print(msg, file=sys.stderr)
            report["tools"][name] = {"tool": name, "skipped": True, "reason": f"--{name} {why}"}
            continue
        report["tools"][name] = bench_tool(cls(cmd), args, corpus, n_files, queries)
        ran_any = True

    # per-query side by side + top-N overlap between the two tools
    live = [n for n, t in report["tools"].items() if "per_query" in t]
    if live:
        pq: dict = {}
        for q in queries:
            d: dict = {}
            for n in live:
                d[n] = report["tools"][n]["per_query"].get(q, {})
            if len(live) == 2:
                a, b = (set(d[n].get("files") or []) for n in live)
                d["overlap"] = len(a & b)
            pq[q] = d
        report["per_query"] = pq
        if len(live) == 2:
            ov = [d["overlap"] for d in pq.values()]
            report["meta"][f"mean_overlap_at_{args.n}"] = statistics.fmean(ov) if ov else None
    report["meta"]["loadavg_end"] = list(os.getloadavg())
    report["meta"]["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    print_table(report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from benchkit import portable  # bench/benchkit.py: no machine paths in reports

        Path(args.out).write_text(portable(json.dumps(report, indent=2, ensure_ascii=False)) + "\n", encoding="utf-8")
        print(f"\nwrote {args.out}")
    if not ran_any:
        print("warning: no tool ran (give --quarry and/or --qmd)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
