#!/usr/bin/env python3
"""Ingestion benchmark: conversion speed and content next to markitdown, end-to-end
`quarry kb upload` throughput per format (with and without embeddings), peak RSS on the
largest PDF, and the time from a REST upload to the document being keyword-searchable.

    python3 bench/ingest/run.py --convert PATH/examples/convert --quarry PATH/quarry \
        [--docs ~/.cache/quarry-docs] [--tldr ../shared/corpora/tldr] [--parts ...]

Parts (all by default): convert, content, kb, kb-rss, rest. Each part that needs a feature
the given `quarry` binary lacks (`kb`, the knowledge-base REST API) is reported as "not
available" with the reason, and the rest still runs. Writes bench/results/ingest.json and
bench/results/ingest.txt. Figures, not pass/fail. Standard library only; markitdown runs in
its own venv (installed on first use from PyPI). See bench/README.md for the method.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchkit import free_port, loadavg, portable  # noqa: E402  (bench/benchkit.py)
HOME = Path.home()
WORK = HOME / ".cache" / "quarry-bench" / "ingest"
DOC_FORMATS = ["pdf", "docx", "xlsx", "pptx", "csv", "html"]
FORMATS = DOC_FORMATS + ["md"]
MIME = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "csv": "text/csv",
    "html": "text/html",
    "md": "text/markdown",
}


def log(*a):
    print("[ingest]", *a, file=sys.stderr, flush=True)


def mb(n):
    return n / 1e6


def per_min(count, seconds):
    return round(count / (seconds / 60.0), 2) if seconds > 0 else None


# ---------------------------------------------------------------------------------------
# /usr/bin/time -v
# ---------------------------------------------------------------------------------------


def ensure_gnu_time():
    if Path("/usr/bin/time").exists():
        return "/usr/bin/time"
    log("installing Debian 'time' for peak RSS (/usr/bin/time -v)")
    subprocess.run(["apt-get", "install", "-y", "-q", "time"], check=False,
                   stdout=subprocess.DEVNULL)
    return "/usr/bin/time" if Path("/usr/bin/time").exists() else None


def timed(cmd, env=None, stdout_path=None, timeout=None, cwd=None):
    """Runs cmd under /usr/bin/time -v; returns rc, wall seconds, peak RSS (MiB), stdout
    text (or None when written to stdout_path), stderr text less the time -v block."""
    tv = tempfile.NamedTemporaryFile(prefix="timev-", suffix=".txt", delete=False)
    tv.close()
    full = [GNU_TIME, "-v", "-o", tv.name] + [str(c) for c in cmd] if GNU_TIME else cmd
    out = open(stdout_path, "w") if stdout_path else subprocess.PIPE
    start = time.perf_counter()
    try:
        p = subprocess.run(full, env=env, stdout=out, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, cwd=cwd)
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = "timeout", None, (e.stderr or b"").decode("utf-8", "replace") \
            if isinstance(e.stderr, bytes) else (e.stderr or "")
    finally:
        if stdout_path:
            out.close()
    wall = time.perf_counter() - start
    rss = None
    try:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", Path(tv.name).read_text())
        if m:
            rss = round(int(m.group(1)) / 1024, 1)
    except OSError:
        pass
    os.unlink(tv.name)
    return {"rc": rc, "wall_s": round(wall, 3), "peak_rss_mib": rss}, stdout, stderr


# ---------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------


def ensure_docs(docs):
    if (docs / "MANIFEST.tsv").exists():
        return
    fetch = REPO.parent / "shared" / "corpora" / "documents" / "fetch.sh"
    log(f"{docs} missing: fetching with {fetch}")
    subprocess.run(["bash", str(fetch), str(docs)], check=True)


def difficult(name):
    """Files in the document set that are broken, encrypted or image-only on purpose."""
    return name.startswith(("broken-", "encrypted-", "scanned-"))


def pick_even(paths, n):
    if n >= len(paths):
        return list(paths)
    step = len(paths) / n
    return [paths[int(i * step)] for i in range(n)]


def assemble(docs, tldr, n_en, n_zh, dest):
    """Copies the documents to dest/<format>/ and an even sample of tldr pages to dest/md/
    with unique names (tldr-en-<platform>-<page>.md); returns the file list."""
    if dest.exists():
        shutil.rmtree(dest)
    files = []
    for fmt in DOC_FORMATS:
        (dest / fmt).mkdir(parents=True)
        for p in sorted((docs / fmt).iterdir()):
            if p.is_file():
                shutil.copy2(p, dest / fmt / p.name)
                files.append(dest / fmt / p.name)
    (dest / "md").mkdir(parents=True)
    for lang, sub, n in (("en", "pages", n_en), ("zh", "pages.zh", n_zh)):
        pages = sorted((tldr / sub).rglob("*.md"))
        for p in pick_even(pages, n):
            name = f"tldr-{lang}-{p.parent.name}-{p.name}"
            shutil.copy2(p, dest / "md" / name)
            files.append(dest / "md" / name)
    return files


def fmt_of(path):
    return path.suffix.lstrip(".").lower()


def corpus_summary(files):
    out = {}
    for f in FORMATS:
        fs = [p for p in files if fmt_of(p) == f]
        out[f] = {"files": len(fs), "bytes": sum(p.stat().st_size for p in fs),
                  "deliberately_difficult": sum(difficult(p.name) for p in fs)}
    out["total"] = {"files": len(files), "bytes": sum(p.stat().st_size for p in files),
                    "deliberately_difficult": sum(difficult(p.name) for p in files)}
    return out


# ---------------------------------------------------------------------------------------
# (a) conversion only: Quarry's convert example vs markitdown
# ---------------------------------------------------------------------------------------


def parse_convert_tsv(text):
    rows = {}
    for line in (text or "").splitlines():
        if not line or line.startswith(("format\t", "#")):
            continue
        parts = line.split("\t")
        if len(parts) < 8:
            continue
        fmt, size, ms, pages, md_bytes, images, result, path = parts[:8]
        name = Path(path).name
        ok = result.startswith("ok") and md_bytes not in ("-", "0") and result != "ok (empty)"
        rows[name] = {
            "format": Path(path).suffix.lstrip(".").lower(), "bytes": int(size) if size != "-" else 0,
            "ms": float(ms) if ms != "-" else None, "pages": None if pages == "-" else int(pages),
            "md_bytes": None if md_bytes == "-" else int(md_bytes), "result": result,
            "ok": ok,
        }
    return rows


def ensure_markitdown(venv):
    py = venv / "bin" / "python"
    if not py.exists():
        log(f"creating {venv} and installing markitdown from PyPI")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(py), "-c", "import markitdown"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "markitdown[pdf,docx,xlsx,pptx]"], check=True)
    versions = {}
    for pkg in ("markitdown", "pdfminer.six", "mammoth", "openpyxl", "python-pptx", "pandas"):
        r = subprocess.run([str(py), "-c", "import importlib.metadata as m, sys; "
                            f"print(m.version('{pkg}'))"], capture_output=True, text=True)
        versions[pkg] = r.stdout.strip() if r.returncode == 0 else None
    return py, versions


def summarize_tool(rows, files):
    per = {}
    for f in DOC_FORMATS + ["all"]:
        names = [p.name for p in files if f == "all" or fmt_of(p) == f]
        rs = [rows[n] for n in names if n in rows]
        secs = sum((r["ms"] or 0) for r in rs) / 1000.0
        nbytes = sum(r["bytes"] for r in rs)
        per[f] = {
            "files": len(rs), "ok": sum(r["ok"] for r in rs),
            "failed_or_empty": sum(not r["ok"] for r in rs),
            "mb": round(mb(nbytes), 3), "seconds": round(secs, 3),
            "docs_per_min": per_min(len(rs), secs), "mb_per_min": per_min(mb(nbytes), secs),
        }
    return per


def conversion(files, convert_bin, md_py, outdir, with_markitdown, repeat=1):
    docs = [p for p in files if fmt_of(p) in DOC_FORMATS]
    res = {"files": len(docs), "runs": {}}
    runs = [("quarry_no_ocr", [convert_bin, "--no-ocr", "--out", outdir / "quarry-no-ocr"]),
            ("quarry", [convert_bin, "--out", outdir / "quarry"])]
    if with_markitdown:
        runs.append(("markitdown", [md_py, Path(__file__).with_name("markitdown_convert.py"),
                                    "--out", outdir / "markitdown"]))
    rows = {}
    res["repeat"] = repeat
    for name, cmd in runs:
        metas, loads = [], []
        for i in range(repeat):
            log(f"conversion: {name} on {len(docs)} files (run {i + 1}/{repeat})")
            loads.append(loadavg())
            meta, stdout, stderr = timed(cmd + docs, timeout=3600)
            metas.append(meta)
            got = parse_convert_tsv(stdout)
            if name not in rows:
                rows[name] = got
            else:  # keep each file's fastest time over the runs
                for n, v in got.items():
                    if n in rows[name] and v["ms"] is not None and rows[name][n]["ms"] is not None:
                        rows[name][n]["ms"] = min(rows[name][n]["ms"], v["ms"])
        res["runs"][name] = {
            "process": min(metas, key=lambda m: m["wall_s"]), "processes": metas,
            "load_before": loads,
            "per_format": summarize_tool(rows[name], docs),
            "per_file": rows[name],
        }
        if metas[-1]["rc"] != 0:
            res["runs"][name]["stderr_tail"] = (stderr or "")[-2000:]
    # speed ratios: markitdown seconds / Quarry seconds, per format, on the same files
    if "markitdown" in rows:
        ratios = {}
        for q in ("quarry_no_ocr", "quarry"):
            r = {}
            for f in DOC_FORMATS + ["all"]:
                qs = res["runs"][q]["per_format"][f]["seconds"]
                ms_ = res["runs"]["markitdown"]["per_format"][f]["seconds"]
                r[f] = round(ms_ / qs, 2) if qs else None
            ratios[q] = r
        # PDFs where both produced text (text-layer PDFs): the fair like-for-like figure
        both = [n for n, v in rows["quarry_no_ocr"].items()
                if v["format"] == "pdf" and v["ok"] and rows["markitdown"].get(n, {}).get("ok")]
        qs = sum(rows["quarry_no_ocr"][n]["ms"] for n in both) / 1000
        ms_ = sum(rows["markitdown"][n]["ms"] for n in both) / 1000
        nbytes = sum(rows["quarry_no_ocr"][n]["bytes"] for n in both)
        ratios["pdf_text_layer_both_ok"] = {
            "files": len(both), "mb": round(mb(nbytes), 3),
            "quarry_seconds": round(qs, 3), "markitdown_seconds": round(ms_, 3),
            "quarry_mb_per_min": per_min(mb(nbytes), qs),
            "markitdown_mb_per_min": per_min(mb(nbytes), ms_),
            "ratio": round(ms_ / qs, 2) if qs else None,
            "per_file_ratio_median": round(statistics.median(
                rows["markitdown"][n]["ms"] / max(rows["quarry_no_ocr"][n]["ms"], 0.01)
                for n in both), 2) if both else None,
        }
        res["speed_ratio_markitdown_over_quarry"] = ratios
    return res


def largest_pdf_rss(files, convert_bin, md_py, with_markitdown):
    pdfs = sorted((p for p in files if fmt_of(p) == "pdf"), key=lambda p: p.stat().st_size)
    big = pdfs[-1]
    out = {"file": big.name, "bytes": big.stat().st_size}
    log(f"peak RSS on the largest PDF {big.name}")
    out["quarry_no_ocr"], _, _ = timed([convert_bin, "--no-ocr", big])
    out["quarry"], _, _ = timed([convert_bin, big])
    if with_markitdown:
        script = Path(__file__).with_name("markitdown_convert.py")
        out["markitdown"], _, _ = timed([md_py, script, big])
        out["markitdown_imports_only"], _, _ = timed([md_py, script])
    return out


# ---------------------------------------------------------------------------------------
# (b) content check
# ---------------------------------------------------------------------------------------

CENSUS = "en-census-table324-arrests.pdf"
CHECKS = [
    (CENSUS, "table cell", ["11,062.6", "1,540.0", "9,522.6", "8,263.3", "2,799.2", "467.9",
                            "1,396.4", "1,080.1", "1,158.5", "Offense charged"]),
    (CENSUS, "own cell", ["11,062.6", "1,540.0", "9,522.6", "8,263.3", "2,799.2", "467.9",
                          "1,396.4", "1,080.1", "1,158.5", "Offense charged"]),
    (CENSUS, "row kept", [("Robbery", "102.1"), ("Burglary", "240.9"),
                          ("Larceny-theft", "1,080.1"), ("Fraud", "173.7"),
                          ("Violent crime", "467.9")]),
    (CENSUS, "text", ["Table 324. Arrests by Sex and Age: 2009", "Murder and nonnegligent",
                      "Larceny-theft", "Driving under the influence", "Runaways"]),
    ("officer-example-headings-table.docx", "heading",
     ["Title 1", "Title 2", "Sub title 1", "Sub title 2"]),
    ("officer-example-headings-table.docx", "own cell",
     ["Petals", "Internode", "Sepal", "Bract", "Merged cell", "4,994616997", "AA"]),
    ("mammoth-tables.docx", "own cell", ["Top left", "Top right", "Bottom left", "Bottom right"]),
    ("opendominion-simulator-14-sheets.xlsx", "heading",
     ["Overview", "Population", "Production", "Construction", "Explore", "Rezone", "Military",
      "Magic", "Techs", "Imps", "Log_support", "Constants", "Races", "calc"]),
    ("readxl-deaths-messy-layout.xlsx", "heading", ["arts", "other"]),
    ("readxl-deaths-messy-layout.xlsx", "own cell",
     ["Name", "Profession", "Date of death", "David Bowie", "Carrie Fisher", "Chuck Berry",
      "musician"]),
    ("python-pptx-shapes-chart-table.pptx", "heading", ["shapes[0]"]),
    ("python-pptx-shapes-chart-table.pptx", "own cell", ["shapes[3]", "1st Qtr", "8.2"]),
    ("git-gittutorial.html", "heading",
     ["Importing a new project", "Making changes", "Managing branches",
      "Using Git for collaboration"]),
    ("git-gittutorial.html", "code block",
     ["$ git init", "$ git add .", "$ git diff --cached", "$ git log -p",
      "$ git branch experimental", "bob$ git clone /home/alice/project myrepo",
      "alice$ git pull /home/bob/myrepo master"]),
    ("zh-debian-reference.zh-cn.pdf", "text",
     ["Debian 参考手册", "免责声明", "什么是 Debian", "控制台基础", "软件包", "青木修"]),
    ("zh-debian-reference.zh-cn.pdf", "heading", ["免责声明", "什么是 Debian", "关于本文档"]),
    ("zh-debian-reference-ch01.html", "code block",
     ["foo login: penguin", "# chvt 3", "$ ls -l /etc/passwd /etc/shadow /dev/ppp /usr/sbin/exim4"]),
    ("zh-debian-reference-ch01.html", "heading", ["1.1.2. GUI 下的 shell 提示符"]),
]


def _squash(s):
    return re.sub(r"\s+", "", s.replace("**", "").replace("__", ""))


def _norm(s):
    return re.sub(r"\s+", " ", s.replace("**", "").replace("\\", "")).strip()


def _table_rows(md):
    return [l.strip() for l in md.splitlines() if l.strip().startswith("|")]


def _cells(row):
    return [_norm(c) for c in row.strip().strip("|").split("|")]


def _headings(md):
    out = []
    for l in md.splitlines():
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*)$", l)
        if m:
            out.append(_squash(m.group(1)).strip("*_"))
    return out


def _code(md):
    blocks, inside, fence = [], False, ""
    for l in md.splitlines():
        s = l.strip()
        if not inside and (s.startswith("```") or s.startswith("~~~")):
            inside, fence = True, s[:3]
            continue
        if inside and s.startswith(fence):
            inside = False
            continue
        if inside or l.startswith("    ") or l.startswith("\t"):
            blocks.append(_norm(l))
    return blocks


def check_one(md, kind, item):
    if kind == "text":
        return _squash(item) in _squash(md)
    if kind == "heading":
        e = _squash(item)
        return any(h == e or h.startswith(e) or h.endswith(e) for h in _headings(md))
    if kind == "table cell":  # anywhere inside a `|` row, as whole words
        pat = re.compile(r"(^|[\s|])" + re.escape(item) + r"($|[\s|])")
        return any(pat.search(_norm(r)) for r in _table_rows(md))
    if kind == "own cell":  # a cell of a `|` row holding exactly this text
        return any(item in _cells(r) for r in _table_rows(md))
    if kind == "row kept":  # the row label and its first figure on one `|` row
        label, value = item
        return any(label in r and value in r for r in _table_rows(md))
    if kind == "code block":
        return any(_norm(item) in c for c in _code(md))
    raise ValueError(kind)


def content_check(outdirs):
    """outdirs: tool -> directory of <file>.md. Returns rows and per-tool totals."""
    rows, totals = [], {t: [0, 0] for t in outdirs}
    for name, kind, items in CHECKS:
        row = {"file": name, "check": kind, "items": len(items), "found": {}, "missing": {}}
        for tool, d in outdirs.items():
            p = d / f"{name}.md"
            md = p.read_text("utf-8", "replace") if p.exists() else ""
            hits = [check_one(md, kind, it) for it in items]
            row["found"][tool] = sum(hits)
            row["missing"][tool] = [str(it if isinstance(it, str) else " / ".join(it))
                                    for it, h in zip(items, hits) if not h]
            totals[tool][0] += sum(hits)
            totals[tool][1] += len(items)
        rows.append(row)
    return {"checks": rows, "totals": {t: {"found": a, "of": b} for t, (a, b) in totals.items()}}


# ---------------------------------------------------------------------------------------
# (c), (d) `quarry kb upload`
# ---------------------------------------------------------------------------------------


def has_kb(quarry):
    try:
        r = subprocess.run([quarry, "kb", "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    if r.returncode != 0 or "upload" not in r.stdout:
        return False, (r.stderr or r.stdout).strip().splitlines()[0] if (r.stderr or r.stdout) \
            else f"exit {r.returncode}"
    return True, ""


def load_json(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def doc_list(v):
    """Finds the list of document objects in `kb docs --json` output, whatever its wrapper."""
    if isinstance(v, list):
        return [d.get("document", d) if isinstance(d, dict) else d for d in v]
    if isinstance(v, dict):
        for k in ("data", "documents", "results", "files"):
            if k in v:
                return doc_list(v[k])
    return []


def kb_run(quarry, label, files, env_extra, timeout=3600):
    home = Path(tempfile.mkdtemp(prefix=f"quarry-ingest-{label}-", dir=WORK))
    env = dict(os.environ, QUARRY_HOME=str(home))
    env.pop("QUARRY_EMBED_MODEL", None)
    env.update(env_extra)
    kb = f"bench-{label}"
    c, _, cerr = timed([quarry, "kb", "create", kb, "--description", "ingest benchmark"],
                       env=env, timeout=300)
    if c["rc"] != 0:
        return {"error": f"kb create failed: {cerr.strip()[-500:]}"}
    la = loadavg()
    meta, stdout, stderr = timed([quarry, "kb", "upload", kb, *files, "--json"], env=env,
                                 timeout=timeout)
    d, dout, _ = timed([quarry, "kb", "docs", kb, "--json"], env=env, timeout=300)
    docs = doc_list(load_json(dout))
    by_status, failures = {}, []
    for doc in docs:
        st = doc.get("status", "?")
        by_status[st] = by_status.get(st, 0) + 1
        if st != "ready":
            failures.append({"file": doc.get("file_name"), "status": st,
                             "error": doc.get("error")})
    n, nbytes = len(files), sum(Path(f).stat().st_size for f in files)
    secs = meta["wall_s"]
    ready = by_status.get("ready", 0)
    res = {
        "files": n, "mb": round(mb(nbytes), 3), "process": meta, "load_before": la,
        "status": by_status, "docs_listed": len(docs),
        "chunks_embedded": sum(int(d.get("chunk_count") or 0) for d in docs),
        "docs_per_min": per_min(n, secs), "mb_per_min": per_min(mb(nbytes), secs),
        "ready_docs_per_min": per_min(ready, secs),
        "not_ready": failures,
        "difficult_files": sum(difficult(Path(f).name) for f in files),
    }
    if meta["rc"] != 0:
        res["stderr_tail"] = (stderr or "")[-1500:]
    shutil.rmtree(home, ignore_errors=True)
    return res


def kb_throughput(quarry, files, embed_modes, checkpoint=lambda r: None, embed_mixed=False):
    out = {"method": "one fresh QUARRY_HOME and knowledge base per format (and one for the "
                     "whole mixed corpus); wall time of the `quarry kb upload KB FILE... --json` "
                     "process, which converts, indexes (and embeds) every file before it exits: "
                     "process start and model load included. docs/min counts every file "
                     "uploaded (failed ones too); ready_docs_per_min only those that ended ready.",
           "modes": {}}
    for mode, env_extra in embed_modes:
        per = {}
        out["modes"][mode] = per
        for f in FORMATS:
            fs = [p for p in files if fmt_of(p) == f]
            log(f"kb upload [{mode}] {f}: {len(fs)} files")
            per[f] = kb_run(quarry, f"{mode}-{f}", fs, env_extra)
            checkpoint(out)
        if not env_extra or embed_mixed:
            log(f"kb upload [{mode}] mixed: {len(files)} files")
            per["all (one mixed upload)"] = kb_run(quarry, f"{mode}-all", files, env_extra)
        else:  # the per-format runs add up to the corpus; a mixed run would double the time
            runs = [per[f] for f in FORMATS if "process" in per[f]]
            secs = sum(r["process"]["wall_s"] for r in runs)
            n = sum(r["files"] for r in runs)
            m_ = sum(r["mb"] for r in runs)
            per["all (sum of the per-format runs)"] = {
                "files": n, "mb": round(m_, 3), "process": {
                    "wall_s": round(secs, 3), "rc": "-",
                    "peak_rss_mib": max(r["process"]["peak_rss_mib"] or 0 for r in runs)},
                "status": {k: sum(r["status"].get(k, 0) for r in runs)
                           for k in {k for r in runs for k in r["status"]}},
                "docs_per_min": per_min(n, secs), "mb_per_min": per_min(m_, secs),
                "ready_docs_per_min": per_min(sum(r["status"].get("ready", 0) for r in runs), secs),
                "chunks_embedded": sum(r.get("chunks_embedded", 0) for r in runs),
                "difficult_files": sum(r["difficult_files"] for r in runs), "not_ready": [],
            }
        checkpoint(out)
    return out


def kb_rss(quarry, files, embed_modes):
    big = sorted((p for p in files if fmt_of(p) == "pdf"), key=lambda p: p.stat().st_size)[-1]
    out = {"file": big.name, "bytes": big.stat().st_size}
    for mode, env_extra in embed_modes:
        log(f"kb upload peak RSS [{mode}] {big.name}")
        out[mode] = kb_run(quarry, f"rss-{mode}", [big], env_extra)
    return out


# ---------------------------------------------------------------------------------------
# (e) REST: upload -> keyword-searchable
# ---------------------------------------------------------------------------------------


def http(method, url, body=None, headers=None, timeout=600):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post_json(url, obj):
    return http("POST", url, json.dumps(obj).encode(), {"content-type": "application/json"})


def multipart(path):
    boundary = uuid.uuid4().hex
    data = Path(path).read_bytes()
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; "
            f"filename=\"{Path(path).name}\"\r\nContent-Type: "
            f"{MIME.get(fmt_of(Path(path)), 'application/octet-stream')}\r\n\r\n").encode()
    body = head + data + f"\r\n--{boundary}--\r\n".encode()
    return body, {"content-type": f"multipart/form-data; boundary={boundary}"}


class Server:
    def __init__(self, quarry, env_extra):
        self.home = Path(tempfile.mkdtemp(prefix="quarry-ingest-rest-", dir=WORK))
        env = dict(os.environ, QUARRY_HOME=str(self.home))
        env.pop("QUARRY_EMBED_MODEL", None)
        env.update(env_extra)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(self.home / "server.log", "w")
        self.proc = subprocess.Popen([quarry, "serve", "--transport", "http", "--port",
                                      str(self.port)], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}")
            try:
                st, _ = http("GET", self.base + "/api/v1/knowledge-bases", timeout=2)
                self.kb_api = st == 200
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        raise RuntimeError("server did not answer in 120 s")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def create_kb(self, name):
        st, body = post_json(self.base + "/api/v1/knowledge-bases", {"name": name})
        if st not in (200, 201):
            raise RuntimeError(f"create knowledge base: {st} {body[:300]!r}")
        return json.loads(body)["data"]["id"]

    def hits(self, query, kb):
        st, body = post_json(self.base + "/search", {"query": query, "collection": kb})
        if st != 200:
            return -1
        v = json.loads(body)
        return len(v.get("results", [])) if isinstance(v, dict) else -1

    def upload_until_searchable(self, kb, kb_id, path, query, timeout=900, poll=0.02):
        before = self.hits(query, kb)
        if before > 0:
            return None  # not a clean probe: the query already finds something
        body, headers = multipart(path)
        t0 = time.perf_counter()
        st, resp = http("POST", f"{self.base}/api/v1/knowledge-bases/{kb_id}/documents",
                        body, headers)
        t_post = time.perf_counter() - t0
        if st not in (200, 201, 202):
            return {"file": Path(path).name, "error": f"upload {st}: {resp[:300]!r}"}
        item = json.loads(resp)["data"][0]
        doc_id = item.get("document", {}).get("id")
        r = {"file": Path(path).name, "bytes": Path(path).stat().st_size, "query": query,
             "search_before": "error" if before < 0 else before,
             "upload_response_s": round(t_post, 4), "status_at_response":
                 item.get("document", {}).get("status"), "result": item.get("result")}
        searchable = ready = None
        status_when_searchable = None
        while time.perf_counter() - t0 < timeout:
            status = None
            if doc_id:
                s2, b2 = http("GET", f"{self.base}/api/v1/knowledge-bases/{kb_id}/documents/"
                                     f"{doc_id}")
                if s2 == 200:
                    status = json.loads(b2)["data"].get("status")
            if searchable is None and self.hits(query, kb) > 0:
                searchable = time.perf_counter() - t0
                status_when_searchable = status
            if status in ("ready", "failed") and ready is None:
                ready = time.perf_counter() - t0
                r["final_status"] = status
            if searchable is not None and ready is not None:
                break
            if ready is not None and (status == "failed" or time.perf_counter() - t0 > ready + 10):
                break  # finished but the word is not found (10 s grace): not searchable
            time.sleep(poll)
        r["searchable_s"] = round(searchable, 4) if searchable is not None else None
        r["ready_s"] = round(ready, 4) if ready is not None else None
        r["status_when_searchable"] = status_when_searchable
        return r


def small_probes(tldr, n):
    """English tldr pages whose title is one plain word (the query), evenly spread; more
    than n, as a probe whose word already has a hit is skipped."""
    out = []
    for p in sorted((tldr / "pages" / "common").glob("*.md")):
        title = p.read_text("utf-8", "replace").splitlines()[0].lstrip("# ").strip()
        if re.fullmatch(r"[a-z]{5,}", title):
            out.append((p, title))
    return pick_even(out, 3 * n)


def rest_latency(quarry, tldr, docs_zh_pdf, n_small, n_big, embed_modes, n_big_embed=1):
    out = {"method": "`quarry serve --transport http` on loopback in a fresh QUARRY_HOME; "
                     "time from sending the multipart POST to the first `POST /search` "
                     "(keyword, restricted to the knowledge base) that returns a hit for a word "
                     "of the new document (a word that had no hit before the upload), polled "
                     "every 20 ms together with the document's status; `ready_s` when GET "
                     "document says ready/failed. Small: distinct tldr pages into one knowledge "
                     "base; big: the 1.4 MB Chinese PDF, a fresh server and home each time.",
           "modes": {}}
    for mode, env_extra in embed_modes:
        res = {}
        srv = Server(quarry, env_extra)
        try:
            if not srv.kb_api:
                return {"available": False,
                        "reason": "GET /api/v1/knowledge-bases is not served by this binary"}
            kb_id = srv.create_kb("latency")
            small = []
            for p, title in small_probes(tldr, n_small):
                if len(small) >= n_small:
                    break
                r = srv.upload_until_searchable("latency", kb_id, p, title)
                if r:
                    small.append(r)
            res["small"] = small
        finally:
            srv.close()
        big = []
        for i in range(n_big if not env_extra else min(n_big, n_big_embed)):
            srv = Server(quarry, env_extra)
            try:
                kb_id = srv.create_kb("latency")
                big.append(srv.upload_until_searchable("latency", kb_id, docs_zh_pdf, "免责声明"))
            finally:
                srv.close()
        res["big"] = big
        for k in ("small", "big"):
            xs = [r["searchable_s"] for r in res[k] if r and r.get("searchable_s") is not None]
            ys = [r["ready_s"] for r in res[k] if r and r.get("ready_s") is not None]
            res[f"{k}_median_searchable_s"] = round(statistics.median(xs), 3) if xs else None
            res[f"{k}_median_ready_s"] = round(statistics.median(ys), 3) if ys else None
            res[f"{k}_n"] = len(xs)
        out["modes"][mode] = res
    return out


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def table(headers, rows):
    cols = list(zip(*([headers] + [[("" if c is None else str(c)) for c in r] for r in rows])))
    widths = [max(len(x) for x in c) for c in cols]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] +
                     [line(["" if c is None else c for c in r]) for r in rows])


def text_report(rep):
    o = []
    m = rep["meta"]
    o.append(f"# Quarry ingestion benchmark ({m['date']})")
    o.append(f"machine: {m['cpus']} CPUs, load {m['load_start']} at start, {m['load_end']} at end")
    o.append(f"quarry convert example: {m['convert_bin']} ({m['convert_profile']} profile)")
    o.append(f"quarry: {m['quarry_bin']} ({m.get('quarry_version')}, {m.get('quarry_profile')} profile)")
    o.append(f"markitdown: {m.get('markitdown_versions')}")
    o.append(f"docling: {m['docling']}")
    o.append("")
    c = rep["corpus"]
    o.append(f"## Corpus: {c['total']['files']} files, {mb(c['total']['bytes']):.2f} MB "
             f"({c['total']['deliberately_difficult']} deliberately difficult: "
             "broken/encrypted/scanned)")
    o.append(table(["format", "files", "MB", "difficult"],
                   [[f, c[f]["files"], f"{mb(c[f]['bytes']):.3f}", c[f]["deliberately_difficult"]]
                    for f in FORMATS]))
    o.append("")
    conv = rep.get("conversion")
    if conv:
        o.append("## (a) Conversion only, same files, per-file time in-process (sum; fastest of "
                 f"{conv.get('repeat', 1)} run(s) per file)")
        runs = conv["runs"]
        rows = []
        for f in DOC_FORMATS + ["all"]:
            r = [f, runs["quarry_no_ocr"]["per_format"][f]["files"]]
            for t in ("quarry_no_ocr", "quarry", "markitdown"):
                if t in runs:
                    pf = runs[t]["per_format"][f]
                    r += [pf["seconds"], pf["docs_per_min"], pf["mb_per_min"], pf["failed_or_empty"]]
            if "speed_ratio_markitdown_over_quarry" in conv:
                r.append(conv["speed_ratio_markitdown_over_quarry"]["quarry_no_ocr"][f])
            rows.append(r)
        hdr = ["format", "files"]
        for t in ("quarry_no_ocr", "quarry", "markitdown"):
            if t in runs:
                short = {"quarry_no_ocr": "Q", "quarry": "Q+ocr", "markitdown": "MID"}[t]
                hdr += [f"{short} s", f"{short} doc/min", f"{short} MB/min", f"{short} fail"]
        if "speed_ratio_markitdown_over_quarry" in conv:
            hdr.append("MID/Q")
        o.append(table(hdr, rows))
        o.append("Q = Quarry --no-ocr (like markitdown, which has no OCR); Q+ocr = Quarry "
                 "default (OCR of image-only pages); fail = refused or empty Markdown.")
        if "speed_ratio_markitdown_over_quarry" in conv:
            p = conv["speed_ratio_markitdown_over_quarry"]["pdf_text_layer_both_ok"]
            o.append(f"PDFs with a text layer that both converted ({p['files']} files, "
                     f"{p['mb']} MB): Quarry {p['quarry_seconds']} s ({p['quarry_mb_per_min']} "
                     f"MB/min), markitdown {p['markitdown_seconds']} s "
                     f"({p['markitdown_mb_per_min']} MB/min): Quarry {p['ratio']}x faster "
                     f"(median per file {p['per_file_ratio_median']}x)")
        for t, r in runs.items():
            pr = r["process"]
            o.append(f"{t}: one process for all files: wall {pr['wall_s']} s, peak RSS "
                     f"{pr['peak_rss_mib']} MiB, exit {pr['rc']}")
        o.append("")
        o.append("Per file (ms; result when not ok):")
        names = list(runs["quarry_no_ocr"]["per_file"].keys())
        frows = []
        for n in names:
            r = [n]
            for t in ("quarry_no_ocr", "quarry", "markitdown"):
                if t in runs:
                    v = runs[t]["per_file"].get(n)
                    r.append("-" if not v else f"{v['ms']:.0f}" + ("" if v["ok"] and
                             v["result"] == "ok" else f" [{v['result'][:60]}]"))
            frows.append(r)
        o.append(table(["file"] + [t for t in ("quarry_no_ocr", "quarry", "markitdown")
                                   if t in runs], frows))
        o.append("")
    rss = rep.get("largest_pdf_rss")
    if rss:
        o.append(f"## Peak RSS converting the largest PDF ({rss['file']}, "
                 f"{mb(rss['bytes']):.2f} MB), one process each")
        o.append(table(["tool", "wall s", "peak RSS MiB"],
                       [[k, v["wall_s"], v["peak_rss_mib"]] for k, v in rss.items()
                        if isinstance(v, dict)]))
        o.append("")
    cc = rep.get("content_check")
    if cc:
        tools = list(cc["totals"].keys())
        o.append("## (b) Content check (items found in each tool's Markdown)")
        o.append(table(["file", "check", "items"] + tools,
                       [[r["file"], r["check"], r["items"]] + [r["found"][t] for t in tools]
                        for r in cc["checks"]]))
        o.append("totals: " + ", ".join(f"{t} {v['found']}/{v['of']}"
                                         for t, v in cc["totals"].items()))
        o.append("heading = a `#` line; table cell = inside a `|` row as whole words; own cell ="
                 " a `|` cell with exactly that text; row kept = label and its figure on one "
                 "`|` row; code block = inside a fenced/indented block; text = anywhere "
                 "(whitespace ignored).")
        for r in cc["checks"]:
            for t in tools:
                if r["missing"][t]:
                    o.append(f"  missing in {t}: {r['file']} {r['check']}: "
                             + "; ".join(r["missing"][t]))
        o.append("")
    kb = rep.get("kb_throughput")
    if kb:
        o.append("## (c) `quarry kb upload` end to end, per format")
        if kb.get("available") is False:
            o.append(f"not available: {kb['reason']}")
        else:
            o.append(kb["method"])
            if kb.get("note"):
                o.append("NOTE: " + kb["note"])
            for mode, per in kb["modes"].items():
                o.append(f"### embeddings: {mode}")
                rows = []
                for f, r in per.items():
                    if "error" in r:
                        rows.append([f, "error: " + r["error"][:80]])
                        continue
                    rows.append([f, r["files"], r["mb"], r["process"]["wall_s"], r["docs_per_min"],
                                 r["mb_per_min"], r["ready_docs_per_min"],
                                 " ".join(f"{k}={v}" for k, v in sorted(r["status"].items())),
                                 r["difficult_files"],
                                 r["process"]["peak_rss_mib"], r["process"]["rc"]])
                o.append(table(["format", "files", "MB", "wall s", "docs/min", "MB/min",
                                "ready/min", "status", "difficult", "peak RSS MiB", "exit"], rows))
                for f, r in per.items():
                    for x in r.get("not_ready", []):
                        o.append(f"  {f}: {x['file']}: {x['status']}: {x['error']}")
        o.append("")
    kr = rep.get("kb_largest_pdf_rss")
    if kr:
        o.append("## (d) Peak RSS of `quarry kb upload` on the largest PDF")
        if kr.get("available") is False:
            o.append(f"not available: {kr['reason']}")
        else:
            for mode in kr:
                if isinstance(kr[mode], dict) and "process" in kr[mode]:
                    p = kr[mode]["process"]
                    o.append(f"{kr['file']} [{mode}]: wall {p['wall_s']} s, peak RSS "
                             f"{p['peak_rss_mib']} MiB, status {kr[mode]['status']}")
        o.append("")
    rl = rep.get("rest_latency")
    if rl:
        o.append("## (e) Upload to keyword-searchable through the REST server")
        if rl.get("available") is False:
            o.append(f"not available: {rl['reason']}")
        else:
            o.append(rl["method"])
            for mode, r in rl["modes"].items():
                o.append(f"[{mode}] small docs: median {r['small_median_searchable_s']} s to "
                         f"searchable, {r['small_median_ready_s']} s to ready (n={r['small_n']}); "
                         f"big Chinese PDF: median {r['big_median_searchable_s']} s to "
                         f"searchable, {r['big_median_ready_s']} s to ready (n={r['big_n']})")
        o.append("")
    return "\n".join(o) + "\n"


def save(rep, out):
    """Writes the report (also after each finished step, so an interrupted run keeps what it
    measured)."""
    rep["meta"]["load_end"] = loadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(portable(json.dumps(rep, indent=1, ensure_ascii=False)) + "\n")
    txt = portable(text_report(rep))
    out.with_suffix(".txt").write_text(txt)
    return txt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--convert", required=True, type=Path, help="quarry-convert example binary")
    ap.add_argument("--quarry", type=Path, help="quarry binary (for kb / REST parts)")
    ap.add_argument("--docs", type=Path, default=HOME / ".cache" / "quarry-docs")
    ap.add_argument("--tldr", type=Path, default=REPO.parent / "shared" / "corpora" / "tldr")
    ap.add_argument("--tldr-en", type=int, default=150, help="English tldr pages in the corpus")
    ap.add_argument("--tldr-zh", type=int, default=50, help="Chinese tldr pages in the corpus")
    ap.add_argument("--markitdown-venv", type=Path,
                    default=HOME / ".cache" / "quarry-bench" / "markitdown-venv")
    ap.add_argument("--no-markitdown", action="store_true")
    ap.add_argument("--embed-model", help="model directory for the embeddings runs "
                    "(default: $QUARRY_TEST_MINILM, else scripts/setup-models)")
    ap.add_argument("--no-embed", action="store_true", help="skip the runs with embeddings")
    ap.add_argument("--parts", default="convert,content,kb,kb-rss,rest")
    ap.add_argument("--repeat", type=int, default=1,
                    help="conversion runs per tool; each file's fastest time is kept")
    ap.add_argument("--rest-small", type=int, default=10)
    ap.add_argument("--rest-big-embed", type=int, default=1,
                    help="big-PDF REST uploads with embeddings (each embeds the whole PDF)")
    ap.add_argument("--embed-mixed", action="store_true",
                    help="with embeddings, also one mixed upload (default: sum of the formats)")
    ap.add_argument("--kb-rss-embed", action="store_true",
                    help="peak RSS of kb upload of the largest PDF with embeddings too")
    ap.add_argument("--rest-big", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ingest.json")
    ap.add_argument("--merge", action="store_true",
                    help="keep the parts of an existing report that this run does not redo")
    a = ap.parse_args()
    parts = set(a.parts.split(","))

    global GNU_TIME
    GNU_TIME = ensure_gnu_time()
    WORK.mkdir(parents=True, exist_ok=True)
    ensure_docs(a.docs)
    files = assemble(a.docs, a.tldr, a.tldr_en, a.tldr_zh, WORK / "corpus")
    rep = {}
    if a.merge and a.out.exists():
        rep = json.loads(a.out.read_text())
    old_meta = rep.get("meta", {})
    conv = a.convert.resolve()
    rep["meta"] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
        "load_start": loadavg(), "convert_bin": str(conv),
        "convert_profile": "release" if "/release/" in str(conv) else
        "dev (deps opt-level 2)" if "/debug/" in str(conv) else "?",
        "quarry_bin": str(a.quarry) if a.quarry else None,
        "docling": "not run: its PDF pipeline needs the layout and TableFormer model weights "
                   "from the Hugging Face Hub (unreachable here) and PyTorch",
    }
    if a.quarry:
        r = subprocess.run([a.quarry, "--version"], capture_output=True, text=True)
        rep["meta"]["quarry_version"] = r.stdout.strip()
        rep["meta"]["quarry_profile"] = "release" if "/release/" in str(a.quarry) else \
            "dev (deps opt-level 2)" if "/debug/" in str(a.quarry) else "?"
    for k, v in old_meta.items():  # --merge: keep what the earlier parts recorded
        rep["meta"].setdefault(k, v)
        if k in ("markitdown_versions", "convert_bin", "convert_profile", "load_start") and \
                not parts & {"convert", "content"}:
            rep["meta"][f"{k}"] = v
    rep["corpus"] = corpus_summary(files)
    rep["corpus"]["sources"] = {
        "documents": str(a.docs), "tldr": str(a.tldr),
        "tldr_pages": f"{a.tldr_en} English + {a.tldr_zh} Chinese, evenly spaced in sorted order",
    }

    md_py = None
    if not a.no_markitdown and parts & {"convert", "content"}:
        md_py, versions = ensure_markitdown(a.markitdown_venv)
        rep["meta"]["markitdown_versions"] = versions
    outdir = WORK / "markdown"
    if "convert" in parts:
        if outdir.exists():
            shutil.rmtree(outdir)
        rep["conversion"] = conversion(files, conv, md_py, outdir, md_py is not None, a.repeat)
        rep["largest_pdf_rss"] = largest_pdf_rss(files, conv, md_py, md_py is not None)
    if "convert" in parts:
        save(rep, a.out)
    if "content" in parts:
        dirs = {"quarry": outdir / "quarry", "markitdown": outdir / "markitdown"}
        rep["content_check"] = content_check({k: v for k, v in dirs.items() if v.exists()})

    kb_parts = parts & {"kb", "kb-rss", "rest"}
    if kb_parts:
        ok, why = (False, "no --quarry binary given") if not a.quarry else has_kb(a.quarry)
        modes = [("none", {})]
        if not a.no_embed:
            model = a.embed_model or os.environ.get("QUARRY_TEST_MINILM")
            if not model:
                r = subprocess.run(["bash", str(REPO / "scripts" / "setup-models")],
                                   capture_output=True, text=True)
                m = re.search(r"QUARRY_TEST_MINILM=['\"]?([^'\"\n]+)", r.stdout)
                model = m.group(1) if m else None
            if model:
                modes.append(("all-MiniLM-L6-v2", {"QUARRY_EMBED_MODEL": model}))
                rep["meta"]["embed_model"] = model
        na = {"available": False,
              "reason": f"`{a.quarry} kb --help` failed: {why}. Re-run later with "
                        f"--parts kb,kb-rss,rest --merge"}
        if "kb" in parts:
            def ck(r):
                rep["kb_throughput"] = r
                save(rep, a.out)
            rep["kb_throughput"] = kb_throughput(a.quarry, files, modes, ck, a.embed_mixed) \
                if ok else na
            save(rep, a.out)
        if "kb-rss" in parts:
            rep["kb_largest_pdf_rss"] = kb_rss(a.quarry, files, modes if a.kb_rss_embed
                                               else modes[:1]) if ok else na
            save(rep, a.out)
        if "rest" in parts:
            if not ok:
                rep["rest_latency"] = na
            else:
                zh = next(p for p in files if p.name == "zh-debian-reference.zh-cn.pdf")
                try:
                    rep["rest_latency"] = rest_latency(a.quarry, a.tldr, zh, a.rest_small,
                                                       a.rest_big, modes, a.rest_big_embed)
                except RuntimeError as e:
                    rep["rest_latency"] = {"available": False, "reason": str(e)}
    print(save(rep, a.out))


GNU_TIME = None

if __name__ == "__main__":
    main()
