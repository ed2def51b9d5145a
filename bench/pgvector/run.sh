#!/usr/bin/env bash
# pgvector at scale (issue 25): Quarry's vector search on PostgreSQL beside WeKnora's query
# shape, on the same synthetic vectors (crates/quarry-store-pg/benches/pgvector.rs says what
# is generated and measured). Starts PostgreSQL 16 + pgvector through scripts/test-services in
# its own state directory, sized for the index (shared_buffers, maintenance_work_mem), makes a
# fresh database and writes bench/results/pgvector-<chunks>.json.
#   bash bench/pgvector/run.sh                          # 1,000,000 chunks of 384 dimensions
#   QUARRY_BENCH_CHUNKS=100000 bash bench/pgvector/run.sh
# At 1M chunks on 2 cores: about 5 GB of disk and most of an hour (two HNSW builds).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quarry-target}"
chunks="${QUARRY_BENCH_CHUNKS:-1000000}"
OUT="$PWD/bench/results"
mkdir -p "$OUT"

export QUARRY_TEST_SERVICES_DIR="${QUARRY_TEST_SERVICES_DIR:-${TMPDIR:-/tmp}/quarry-bench-pgvector-$(id -u)}"
# A server a team would size for this table: the graph build wants its memory, and the
# index should fit the buffer cache (the test default is 64 MB).
export QUARRY_TEST_PG_CONF="${QUARRY_TEST_PG_CONF:-shared_buffers = 2GB\nmaintenance_work_mem = 3GB\nmax_parallel_maintenance_workers = $(( $(nproc) - 1 ))\nmax_parallel_workers = $(nproc)\nmax_worker_processes = $(( $(nproc) + 8 ))}"
eval "$(bash scripts/test-services start)"
trap 'bash scripts/test-services stop >&2 || true' EXIT

name="quarry_pgvector_$(date +%s)"
"$QUARRY_TEST_PG_BIN/psql" "$QUARRY_TEST_DATABASE_URL" -qc "CREATE DATABASE $name TEMPLATE template1"
url="${QUARRY_TEST_DATABASE_URL%%\?*}"
query="${QUARRY_TEST_DATABASE_URL#"$url"}"
QUARRY_BENCH_CHUNKS="$chunks" \
QUARRY_BENCH_DATABASE_URL="${url%/*}/$name$query" \
QUARRY_BENCH_OUT="$OUT/pgvector-$chunks.json" \
  cargo bench -p quarry-store-pg --bench pgvector --quiet
# Reports name places portably, never this machine's paths (bench/benchkit.py).
python3 bench/benchkit.py scrub "$OUT/pgvector-$chunks.json"
