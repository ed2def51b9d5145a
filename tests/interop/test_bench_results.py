"""Committed benchmark reports (bench/results) carry no paths of the machine that made them:
bench/benchkit.py's `portable` names places by $CARGO_TARGET_DIR, ~, ../shared and $TMPDIR."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchkit import MACHINE_PATH, portable  # noqa: E402  (bench/benchkit.py)


def test_committed_reports_name_no_machine_paths():
    reports = sorted(p for p in (REPO / "bench" / "results").iterdir() if p.is_file())
    assert len(reports) > 20, "bench/results should hold the committed reports"
    found = []
    for path in reports:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in MACHINE_PATH.finditer(line):
                found.append(f"{path.name}:{n}: {m.group(0)}")
    assert not found, "machine paths in committed reports (python3 bench/benchkit.py scrub FILE):\n" + "\n".join(found[:20])


def test_portable_names_each_place_and_keeps_the_rest():
    home = str(Path.home())
    text = (
        f'"quarry": "{home}/.cache/quarry-target/release/quarry", '
        f'"convert": "{home}/.cache/quarry-target-convert/release/examples/convert", '
        f'"corpus": "{REPO}/crates/quarry-engine/../../../shared/corpora/tldr/pages", '
        '"other": "/home/someone/notes.md", "url": "http://127.0.0.1:8080/work/x", "rel": "docs/work/a.md"'
    )
    out = portable(text)
    assert '"quarry": "$CARGO_TARGET_DIR/release/quarry"' in out or '"quarry": "~/.cache/quarry-target/release/quarry"' in out
    assert '"convert": "~/.cache/quarry-target-convert/release/examples/convert"' in out
    assert '"corpus": "../shared/corpora/tldr/pages"' in out
    assert '"other": "<path>"' in out
    # URLs and relative paths are not machine paths.
    assert '"url": "http://127.0.0.1:8080/work/x"' in out
    assert '"rel": "docs/work/a.md"' in out
    assert not MACHINE_PATH.search(out)
