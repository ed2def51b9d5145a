"""Converts files with Microsoft's markitdown, one process for all files, and prints the
same columns as Quarry's `convert` example (format, bytes, ms, -, md_bytes, -, result,
file). Run with the markitdown venv's interpreter:

    markitdown-venv/bin/python markitdown_convert.py [--out DIR] FILE...

The time per file is measured in-process around `MarkItDown.convert` (imports and
start-up are outside it, as for Quarry's example)."""

import os
import sys
import time


def main():
    args = sys.argv[1:]
    out = None
    if args[:1] == ["--out"]:
        out, args = args[1], args[2:]
        os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    from markitdown import MarkItDown

    md = MarkItDown(enable_plugins=False)
    print(f"# import+init {1000 * (time.perf_counter() - t0):.1f} ms", file=sys.stderr)
    print("format\tbytes\tms\tpages\tmd_bytes\timages\tresult\tfile")
    for path in args:
        fmt = os.path.splitext(path)[1].lstrip(".").lower()
        size = os.path.getsize(path)
        start = time.perf_counter()
        try:
            res = md.convert(path)
            text = res.text_content or ""
            ms = 1000 * (time.perf_counter() - start)
            body = text.encode("utf-8", "replace")
            result = "ok" if text.strip() else "ok (empty)"
            print(f"{fmt}\t{size}\t{ms:.1f}\t-\t{len(body)}\t-\t{result}\t{path}", flush=True)
            if out:
                with open(os.path.join(out, os.path.basename(path) + ".md"), "wb") as f:
                    f.write(body)
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            ms = 1000 * (time.perf_counter() - start)
            msg = " ".join(f"{type(e).__name__}: {e}".split())[:200]
            print(f"{fmt}\t{size}\t{ms:.1f}\t-\t-\t-\terror: {msg}\t{path}", flush=True)


if __name__ == "__main__":
    main()
