"""The 100-server / 5,000-tool fixture, made from the real catalog of eval/tools/catalog/
(1,781 tool definitions of 85 MCP servers, as the servers listed them).

    python3 bench/hub-scale/fixture.py OUTDIR [--servers 100 --tools 5000]

Servers: the 85 real servers once, then second copies (`<server>-2`) of real servers taken at
even steps through the name-sorted list until there are `servers` of them. Tools: each
server's real tool list, repeated until the whole fixture holds exactly `tools` tools; every
server grows by the same factor (about 2.5 for 100/5,000: the 100 servers have 2,003 real
definitions; largest remainder decides the rounding), so the real spread of sizes is kept —
from 3 tools (servers with one real tool) to 469 (ms-365's 188). A repeat is the real tool (description, title, inputSchema,
annotations verbatim) under a name with a suffix, `_2`, `_3`… (`-2`… when the name is
written with hyphens only), so names stay unique per server.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

CATALOG = Path(__file__).resolve().parents[2] / "eval" / "tools" / "catalog"


def load_real() -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CATALOG.glob("*.json"))]


def suffixed(name: str, k: int, taken: set[str]) -> str:
    sep = "-" if "-" in name and "_" not in name else "_"
    new = f"{name}{sep}{k}"
    while new in taken:  # never in the real catalog; kept for safety
        new += "x"
    return new


def build(servers: int = 100, tools: int = 5000) -> list[dict]:
    """`servers` snapshots (dicts shaped like eval/tools/catalog/*.json) with `tools` tools in all."""
    real = load_real()
    if servers < len(real):
        real = real[:servers]
    picks = [dict(s) for s in real]
    extra = servers - len(real)
    for i in range(extra):
        src = real[(i * len(real)) // extra] if extra else None
        picks.append(dict(src, server=f"{src['server']}-2", copy_of=src["server"]))
    base = sum(len(s["tools"]) for s in picks)
    if tools < base:
        sys.exit(f"{tools} tools is fewer than the {base} the {servers} servers have")
    factor = tools / base
    want = [len(s["tools"]) * factor for s in picks]
    counts = [math.floor(w) for w in want]
    for i in sorted(range(len(picks)), key=lambda i: (-(want[i] - counts[i]), i))[: tools - sum(counts)]:
        counts[i] += 1
    out = []
    for snap, n in zip(picks, counts):
        real_tools = snap["tools"]
        taken = {t["name"] for t in real_tools}
        grown = list(real_tools)
        for j in range(len(real_tools), n):
            t = real_tools[j % len(real_tools)]
            name = suffixed(t["name"], j // len(real_tools) + 1, taken)
            taken.add(name)
            grown.append(dict(t, name=name))
        out.append(dict(snap, tools=grown, real_tools=len(real_tools)))
    assert len(out) == servers and sum(len(s["tools"]) for s in out) == tools
    assert len({s["server"] for s in out}) == servers
    return out


def write(outdir: Path, snaps: list[dict]) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in snaps:
        p = outdir / f"{s['server']}.json"
        p.write_text(json.dumps(s, ensure_ascii=False), encoding="utf-8")
        paths.append(p)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--servers", type=int, default=100)
    ap.add_argument("--tools", type=int, default=5000)
    a = ap.parse_args()
    snaps = build(a.servers, a.tools)
    write(a.outdir, snaps)
    sizes = sorted(len(s["tools"]) for s in snaps)
    print(f"{len(snaps)} servers, {sum(sizes)} tools (min {sizes[0]}, median {sizes[len(sizes) // 2]}, "
          f"max {sizes[-1]}) in {a.outdir}")


if __name__ == "__main__":
    main()
