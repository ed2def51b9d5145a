#!/usr/bin/env bash
# Embedding at the machine's limit (issue 26): Quarry beside sentence-transformers (PyTorch CPU)
# and ONNX Runtime on the same model directories and the same page-length passages, and the
# 251-page Chinese manual end to end through `quarry serve`. bench/embed/run.py says what is
# measured. Builds the release `quarry` and `embed_bench`, sets up the models and the models
# venv (torch, sentence-transformers, onnxruntime from PyPI), then writes
# bench/results/embed.json and embed.txt.
#   bash bench/embed/run.sh
#   QUARRY_BENCH_SAMPLE=64 bash bench/embed/run.sh      # fewer passages per model comparison
#   QUARRY_BENCH_SKIP_DOCUMENT=1 bash bench/embed/run.sh # models and peaks only, no quarry build
#     (passages: the previous run's chunks in $TMPDIR/quarry-embed-bench, else whole tldr pages)
#     and writes bench/results/embed-paths.{json,txt} (embed.json keeps the document part)
# About 20 minutes on 2 cores, release builds not included.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quarry-target}"
OUT="$PWD/bench/results"
mkdir -p "$OUT"
DOCS="${QUARRY_TEST_DOCS:-$HOME/.cache/quarry-docs}"
SKIP_DOC="${QUARRY_BENCH_SKIP_DOCUMENT:-}"
REPORT=embed.json
[ -z "$SKIP_DOC" ] || REPORT=embed-paths.json
if [ -z "$SKIP_DOC" ] && [ ! -f "$DOCS/pdf/zh-debian-reference.zh-cn.pdf" ]; then
  bash ../shared/corpora/documents/fetch.sh "$DOCS" >&2
fi

eval "$(bash scripts/setup-models)"
VENV="${QUARRY_VENV:-$HOME/.cache/quarry-models-venv}"
if ! "$VENV/bin/python" -c "import torch, sentence_transformers, onnxruntime, onnx" 2>/dev/null; then
  echo "[embed] installing torch, sentence-transformers, onnxruntime and onnx into $VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check torch sentence-transformers onnxruntime onnx >&2
fi

[ -n "$SKIP_DOC" ] || cargo build --release -q -p quarry-cli
cargo build --release -q -p quarry-models --example embed_bench

"$VENV/bin/python" bench/embed/run.py \
  --quarry "$CARGO_TARGET_DIR/release/quarry" \
  --embed-bench "$CARGO_TARGET_DIR/release/examples/embed_bench" \
  --doc "$DOCS/pdf/zh-debian-reference.zh-cn.pdf" \
  --minilm "$QUARRY_TEST_MINILM" --e5 "$QUARRY_TEST_E5" \
  --sample "${QUARRY_BENCH_SAMPLE:-128}" \
  ${SKIP_DOC:+--skip-document} \
  --out "$OUT/$REPORT"
