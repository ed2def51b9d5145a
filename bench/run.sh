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

echo "== retrieval quality (quarry eval)"
EVAL_HOME=$(mktemp -d)
trap 'rm -rf "$EVAL_HOME"' EXIT
export QUARRY_HOME="$EVAL_HOME"
"$QUARRY" collection add "$CORPUS" --name tldr >/dev/null
"$QUARRY" collection add "$(dirname "$CORPUS")/qmd-eval/docs" --name qmd-eval >/dev/null
{
  for set in eval/tldr-en.jsonl eval/tldr-zh.jsonl; do
    echo "# $set"; "$QUARRY" eval "$set" -c tldr
  done
  for set in queries deep-research; do
    echo "# qmd-eval/$set.jsonl"; "$QUARRY" eval "$(dirname "$CORPUS")/qmd-eval/$set.jsonl" -c qmd-eval
  done
} | tee "$OUT/eval.txt"

echo "== MCP round trip: stdio and HTTP, concurrency 1 and 32, vs QMD's MCP HTTP server"
QMD_DIRECT=""
[ -z "${SKIP_QMD:-}" ] && QMD_DIRECT="$(dirname "$QMD")/qmd-direct"
env QUARRY_BIN="$QUARRY" ${QMD_DIRECT:+"QMD_BIN=$QMD_DIRECT"} QUARRY_BENCH_CORPUS="$CORPUS/pages" \
  QUARRY_BENCH_OUT="$OUT/mcp-roundtrip.json" \
  cargo bench -p quarry-server --bench mcp_roundtrip --quiet >/dev/null
echo "reports in $OUT/"
