#!/usr/bin/env bash
# pgvector at scale (issue 25): Quarry's vector search on PostgreSQL beside WeKnora's query
# shape, on the same synthetic vectors (crates/quarry-store-pg/benches/pgvector.rs says what
# is generated and measured). Starts PostgreSQL 16 + pgvector through scripts/test-services in
# its own state directory, sized for the index (shared_buffers, maintenance_work_mem), makes a
# fresh database and writes bench/results/pgvector-<chunks>.json.
#   bash bench/pgvector/run.sh                          # 1,000,000 chunks of 384 dimensions
#   QUARRY_BENCH_CHUNKS=100000 bash bench/pgvector/run.sh
#   QUARRY_BENCH_VECTORS=~/.cache/quarry-bench/vectors/tldr-minilm.json bash bench/pgvector/run.sh
#       real embeddings of real text (bench/vectors/make_dataset.py makes them), all of them
#       unless QUARRY_BENCH_CHUNKS says fewer: bench/results/pgvector-tldr-minilm-<chunks>.json
# At 1M chunks on 2 cores: about 5 GB of disk and most of an hour (three HNSW builds).
#   QUARRY_BENCH_BIN=path/to/pgvector-bench bash bench/pgvector/run.sh
#       a bench binary built elsewhere (`cargo bench -p quarry-store-pg --bench pgvector
#       --no-run` prints its path): for a machine without a Rust toolchain, such as a larger
#       one lent for the 1M point (bench/README.md, "At a million chunks").
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quarry-target}"
vectors="${QUARRY_BENCH_VECTORS:-}"
if [ -n "$vectors" ]; then
    chunks="${QUARRY_BENCH_CHUNKS:-$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["count"])' "$vectors")}"
    result="pgvector-$(basename "$vectors" .json)-$chunks.json"
else
    chunks="${QUARRY_BENCH_CHUNKS:-1000000}"
    result="pgvector-$chunks.json"
fi
OUT="$PWD/bench/results"
mkdir -p "$OUT"

export QUARRY_TEST_SERVICES_DIR="${QUARRY_TEST_SERVICES_DIR:-${TMPDIR:-/tmp}/quarry-bench-pgvector-$(id -u)}"
# A server a team would size for this table: the graph build wants its memory, and the
# index should fit the buffer cache (the test default is 64 MB).
export QUARRY_TEST_PG_CONF="${QUARRY_TEST_PG_CONF:-shared_buffers = 2GB\nmaintenance_work_mem = 3GB\nmax_parallel_maintenance_workers = $(( $(nproc) - 1 ))\nmax_parallel_workers = $(nproc)\nmax_worker_processes = $(( $(nproc) + 8 ))}"
eval "$(bash scripts/test-services start-pg)"
trap 'bash scripts/test-services stop >&2 || true' EXIT

name="quarry_pgvector_$(date +%s)"
"$QUARRY_TEST_PG_BIN/psql" "$QUARRY_TEST_DATABASE_URL" -qc "CREATE DATABASE $name TEMPLATE template1"
url="${QUARRY_TEST_DATABASE_URL%%\?*}"
query="${QUARRY_TEST_DATABASE_URL#"$url"}"
QUARRY_BENCH_CHUNKS="$chunks" \
QUARRY_BENCH_VECTORS="$vectors" \
QUARRY_BENCH_DATABASE_URL="${url%/*}/$name$query" \
QUARRY_BENCH_OUT="$OUT/$result" \
  ${QUARRY_BENCH_BIN:-cargo bench -p quarry-store-pg --bench pgvector --quiet}
# Reports name places portably, never this machine's paths (bench/benchkit.py).
python3 bench/benchkit.py scrub "$OUT/$result"
