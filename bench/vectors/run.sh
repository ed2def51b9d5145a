#!/usr/bin/env bash
# The embedded store's vector search at scale (issue 46): recall@10 against exact search and
# latency with 1 and 8 clients, unfiltered and filtered to 5 % and 1 %, through the index
# calls the engine makes (crates/quarry-vectors/benches/recall.rs says what is measured),
# beside the engine's path before issue 46. Writes bench/results/vectors-<dataset>-<chunks>.json.
#   bash bench/vectors/run.sh                      # real embeddings (made first if missing)
#   QUARRY_BENCH_VECTORS= QUARRY_BENCH_CHUNKS=300000 bash bench/vectors/run.sh   # synthetic
#   QUARRY_BENCH_BIN=path/to/recall-bench …        # a bench binary built elsewhere (no toolchain
#                                                  # needed: bench/README.md, "At a million chunks")
# The dataset: bench/vectors/make_dataset.py (all-MiniLM-L6-v2 over the tldr pages, ~15 min
# on 2 cores the first time; cached under ~/.cache/quarry-bench/vectors).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quarry-target}"
OUT="$PWD/bench/results"
mkdir -p "$OUT"
vectors="${QUARRY_BENCH_VECTORS-$HOME/.cache/quarry-bench/vectors/tldr-minilm.json}"
if [ -n "$vectors" ]; then
    if [ ! -f "$vectors" ]; then
        eval "$(bash scripts/setup-models)"
        "${QUARRY_TEST_PYTHON:-$HOME/.cache/quarry-models-venv/bin/python}" \
            bench/vectors/make_dataset.py --out "$(dirname "$vectors")"
    fi
    chunks="${QUARRY_BENCH_CHUNKS:-$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["count"])' "$vectors")}"
    result="vectors-$(basename "$vectors" .json)-$chunks.json"
else
    chunks="${QUARRY_BENCH_CHUNKS:-100000}"
    result="vectors-synthetic-$chunks.json"
fi
QUARRY_BENCH_VECTORS="$vectors" QUARRY_BENCH_CHUNKS="$chunks" QUARRY_BENCH_OUT="$OUT/$result" \
    ${QUARRY_BENCH_BIN:-cargo bench -p quarry-vectors --bench recall --quiet}
python3 bench/benchkit.py scrub "$OUT/$result"
echo "wrote bench/results/$result" >&2
