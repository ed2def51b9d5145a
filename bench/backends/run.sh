#!/usr/bin/env bash
# Embedded vs PostgreSQL side by side, in one run, on the same data (issue 24): starts
# PostgreSQL 16 + pgvector and moto (S3) through scripts/test-services, makes a fresh
# database and bucket, and runs `cargo bench -p quarry-cli --bench backends` with
# all-MiniLM-L6-v2 from scripts/setup-models. Writes bench/results/backends.json.
#   bash bench/backends/run.sh
#   QUARRY_BENCH_ONLY=filtered bash bench/backends/run.sh
# runs the metadata-filter measurement instead (issue 44; see the bench's docs) and writes
# bench/results/backends-filtered.json (bench/README.md gives the settings it was run with:
# QUARRY_BENCH_ROUNDS=1 QUARRY_BENCH_WARMUP=5 QUARRY_BENCH_PAGE_STRIDE=4 QUARRY_BENCH_COPIES=54).
#   QUARRY_BENCH_ONLY=uploads bash bench/backends/run.sh
# measures uploads alone, into empty stores (a few minutes; bench/results/backends-uploads.json).
# About 60 minutes on 2 cores, most of it embedding the first copy with the model, twice (both backends index ~100k documents and ~110k chunks).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quarry-target}"
OUT="$PWD/bench/results"
report=backends.json
case "${QUARRY_BENCH_ONLY:-}" in
  filtered) report=backends-filtered.json ;;
  uploads) report=backends-uploads.json ;;
esac
mkdir -p "$OUT"

eval "$(bash scripts/setup-models)"
started=0
if ! bash scripts/test-services status >/dev/null 2>&1; then started=1; fi
eval "$(bash scripts/test-services start)"
cleanup() { if [ "$started" = 1 ]; then bash scripts/test-services stop >&2 || true; fi; }
trap cleanup EXIT

name="quarry_bench_$(date +%s)"
"$QUARRY_TEST_PG_BIN/psql" "$QUARRY_TEST_DATABASE_URL" -qc "CREATE DATABASE $name TEMPLATE template1"
drop() { "$QUARRY_TEST_PG_BIN/psql" "$QUARRY_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" || true; cleanup; }
trap drop EXIT
# moto accepts an unsigned bucket creation.
bucket="quarry-bench-$(date +%s)"
curl -sf -X PUT "$QUARRY_TEST_S3_ENDPOINT/$bucket" -o /dev/null

url="${QUARRY_TEST_DATABASE_URL%%\?*}" # the server's URL, its database swapped, query kept
query="${QUARRY_TEST_DATABASE_URL#"$url"}"
QUARRY_BENCH_MODEL="$QUARRY_TEST_MINILM" \
QUARRY_BENCH_DATABASE_URL="${url%/*}/$name$query" \
QUARRY_BENCH_BLOBS_URL="s3://$bucket/blobs" \
QUARRY_BENCH_OUT="$OUT/$report" \
  cargo bench -p quarry-cli --bench backends --quiet
# Reports name places portably, never this machine's paths (bench/benchkit.py).
python3 bench/benchkit.py scrub "$OUT/$report"
