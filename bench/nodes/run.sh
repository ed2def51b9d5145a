#!/usr/bin/env bash
# Several nodes over one PostgreSQL (issue 25): catch-up lag, keyword query throughput and
# p99 with 1 and 2 nodes (and PostgreSQL's own CPU per query), ingestion docs/min with 1 and
# 2 nodes, and failover time. Starts PostgreSQL 16 + pgvector and moto through
# scripts/test-services (its own state directory) and writes bench/results/nodes.json.
#   bash bench/nodes/run.sh            # QUARRY_BIN picks the binary (default: release, else debug)
# About 20 minutes on 2 cores (the rebuild scenario loads ~100,000 documents).
set -euo pipefail
cd "$(dirname "$0")/../.."
export QUARRY_TEST_SERVICES_DIR="${QUARRY_TEST_SERVICES_DIR:-${TMPDIR:-/tmp}/quarry-bench-nodes-$(id -u)}"
eval "$(bash scripts/test-services start)"
trap 'bash scripts/test-services stop >&2 || true' EXIT
python3 bench/nodes/run.py --out bench/results/nodes.json "$@"
