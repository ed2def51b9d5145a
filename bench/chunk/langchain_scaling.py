#!/usr/bin/env python3
"""The peer side of `cargo run --release -p quarry-ingest --example chunk_scaling`: the same
generated documents (headings only, one line without a break, short paragraphs, Chinese
without punctuation; doubling sizes) through LangChain's `MarkdownTextSplitter` at the same
1,000/200 characters, printing the same columns. Run both in one session for figures:

    python3 -m venv /tmp/lc && /tmp/lc/bin/pip install langchain-text-splitters
    /tmp/lc/bin/python bench/chunk/langchain_scaling.py [MAX_MB]
"""
import math
import sys
import time

from langchain_text_splitters import MarkdownTextSplitter

SHAPES = {
    "headings only": lambda n: "".join(f"## Heading {i}\n\n" for i in range(n // 16)),
    "one line": lambda n: "word " * (n // 5),
    "paragraphs": lambda n: "".join(f"Paragraph {i} says a little.\n\n" for i in range(n // 40)),
    "chinese run": lambda n: "知识库检索" * (n // 15),
}


def main() -> None:
    max_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    splitter = MarkdownTextSplitter(chunk_size=1000, chunk_overlap=200)
    print("shape\tMB\tseconds\tchunks\texponent")
    for name, make in SHAPES.items():
        last = None
        size = 256 * 1024
        while size <= max_mb * 1024 * 1024:
            text = make(size)
            started = time.perf_counter()
            chunks = splitter.split_text(text)
            secs = time.perf_counter() - started
            mb = len(text.encode()) / 1048576
            exponent = f"{math.log(secs / last[1]) / math.log(mb / last[0]):.2f}" if last else ""
            print(f"{name}\t{mb:.2f}\t{secs:.3f}\t{len(chunks)}\t{exponent}", flush=True)
            last = (mb, secs)
            size *= 2


if __name__ == "__main__":
    main()
