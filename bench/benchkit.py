"""What every benchmark in bench/*/run.py shares: machine facts for the report header, the
percentile the reports use, a free loopback port, where the quarry binary is, and writing the
JSON and text reports.

Each run.py puts bench/ on sys.path and imports from here.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# Settings of the outer environment that would change what is measured (models, chat, RAG,
# the space, assets from disk): dropped, as tests/interop/conftest.py does.
MODEL_VARS = ("QUARRY_EMBED_MODEL", "QUARRY_RERANK_MODEL", "QUARRY_EXPAND_MODEL",
              "QUARRY_SUMMARY_MODEL", "QUARRY_SPACE", "QUARRY_OPENAI_BASE_URL",
              "QUARRY_OPENAI_API_KEY", "QUARRY_RERANK_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY",
              "QUARRY_CHAT_MODEL", "QUARRY_CHAT_BASE_URL", "QUARRY_CHAT_API_KEY",
              "DEEPSEEK_API_KEY", "DASHSCOPE_API_KEY", "OLLAMA_HOST", "RAG_TOP_K",
              "RAG_ANN_TOP_K", "RAG_USE_RERANK", "RAG_MIN_SCORE", "QUARRY_UI_DIR")


def isolated_env(home):
    """The environment for a `quarry` on `home`: none of MODEL_VARS, the Hugging Face Hub
    offline with an empty model cache, no OCR, no web search, no colour."""
    env = {k: v for k, v in os.environ.items() if k not in MODEL_VARS}
    env.update(QUARRY_HOME=str(home), HF_HUB_OFFLINE="1", NO_COLOR="1", QUARRY_OCR="off",
               QUARRY_MODELS_DIR=str(Path(home).parent / f"{Path(home).name}-models"),
               QUARRY_WEB_SEARCH="off")
    return env


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def cpu_model():
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def percentile(xs, p):
    """Linear-interpolated percentile (numpy's default), as bench/qmd/compare.py."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_quarry():
    """$QUARRY_BIN, else the release then the debug build in ~/.cache/quarry-target."""
    env = os.environ.get("QUARRY_BIN")
    if env:
        return Path(env)
    for kind in ("release", "debug"):
        p = Path.home() / ".cache" / "quarry-target" / kind / "quarry"
        if p.exists():
            return p
    return None


# An absolute path of the machine that ran a benchmark: committed reports name places by the
# variable or convention that finds them on any machine instead ($CARGO_TARGET_DIR, ~, ../shared).
MACHINE_PATH = re.compile(r"(?<![\w.~$])/(?:root|home|Users|work|tmp|var/tmp|private)(?:/[^\s\"',;:)\]}]*)?")


def portable(text):
    """`text` with the paths of this machine replaced by their portable names: the cargo target
    directory by $CARGO_TARGET_DIR, the repository by `.`, ../shared by `../shared`, the home
    directory by `~`, a temporary directory by $TMPDIR. What is left over (a path of another
    machine) becomes `<path>`."""
    places = []
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache" / "quarry-target")
    places.append((str(Path(target).resolve()), "$CARGO_TARGET_DIR"))
    places.append((str(REPO), "."))
    # ../shared as written (often a link) and where it leads.
    places.append((str(REPO.parent / "shared"), "../shared"))
    places.append((str((REPO.parent / "shared").resolve()), "../shared"))
    places.append((str(Path.home()), "~"))
    places.append((str(Path(tempfile.gettempdir()).resolve()), "$TMPDIR"))
    # `crates/x/../../../shared` and the like first become plain paths.
    text = re.sub(r"(/[\w.-]+)+/\.\.(/\.\.)*(/[\w.-]+)+",
                  lambda m: os.path.normpath(m.group(0)), text)
    for real, name in sorted(places, key=lambda p: -len(p[0])):
        if real not in ("/", "."):
            text = re.sub(re.escape(real) + r"(?![\w.-])", lambda _m, n=name: n, text)
    return MACHINE_PATH.sub("<path>", text)


def save(rep, out, text_report):
    """Writes `out` (JSON) and `out` with .txt (`text_report(rep)`), noting the load at the end;
    machine paths become portable names (`portable`)."""
    rep["meta"]["load_end"] = loadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(portable(json.dumps(rep, indent=1, ensure_ascii=False)) + "\n")
    out.with_suffix(".txt").write_text(portable(text_report(rep)))


def scrub(paths):
    """Rewrites report files in place with `portable` (the benchmarks written in Rust and shell
    call it through `python3 bench/benchkit.py scrub FILE...`)."""
    for path in map(Path, paths):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            clean = portable(text)
            if clean != text:
                path.write_text(clean, encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "scrub":
        scrub(sys.argv[2:])
    else:
        sys.exit("usage: python3 bench/benchkit.py scrub FILE...")
