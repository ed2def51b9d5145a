#!/usr/bin/env bash
# Statements PostgreSQL runs per `POST /query` (issue 46: fewer round trips per search).
#
#   eval "$(bash scripts/test-services start-pg)"
#   bash bench/load/statements.sh before=/path/to/quarry after=/path/to/quarry [QUERIES]
#
# For each binary: 300 tldr pages on a fresh database, embedded with all-MiniLM-L6-v2
# (scripts/setup-models), `quarry serve`, five warm-up queries; then the server's statement
# log (log_statement = all, set through the superuser's socket for the window only) over
# QUERIES sequential queries (default 50), less an idle window of the same length (the node's
# own background statements). Writes bench/results/pg-statements.txt with one query's
# statements per binary. A figure, never pass/fail.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${QUARRY_TEST_DATABASE_URL:?start PostgreSQL first: eval \"\$(bash scripts/test-services start-pg)\"}"
: "${QUARRY_TEST_SERVICES_DIR:?}" "${QUARRY_TEST_PG_BIN:?}"
QUERIES=50
BINARIES=()
for arg in "$@"; do
  case "$arg" in
    *=*) BINARIES+=("$arg") ;;
    *) QUERIES=$arg ;;
  esac
done
[[ ${#BINARIES[@]} -gt 0 ]] || { echo "usage: $0 LABEL=QUARRY... [QUERIES]" >&2; exit 2; }
MODEL=${QUARRY_BENCH_MODEL:-$HOME/.cache/quarry-models/all-MiniLM-L6-v2}
[[ -d $MODEL ]] || { echo "no model at $MODEL (bash scripts/setup-models)" >&2; exit 1; }
PSQL="$QUARRY_TEST_PG_BIN/psql"
PORT=${QUARRY_TEST_DATABASE_URL##*:}; PORT=${PORT%%/*}
superuser() { "$PSQL" -X -q -h "$QUARRY_TEST_SERVICES_DIR/pg/run" -p "$PORT" -U postgres -d postgres "$@"; }
LOG="$QUARRY_TEST_SERVICES_DIR/pg/postgres.log"
WORK=$(mktemp -d)
OUT=bench/results/pg-statements.txt
SERVER=
trap '[[ -n $SERVER ]] && kill $SERVER 2>/dev/null; superuser -c "ALTER SYSTEM RESET log_statement" -c "ALTER SYSTEM RESET log_line_prefix" -c "SELECT pg_reload_conf()" >/dev/null 2>&1; rm -rf "$WORK"' EXIT
python3 - "$WORK/corpus" <<'EOF'
import glob, os, shutil, sys
os.makedirs(sys.argv[1])
for f in sorted(glob.glob("../shared/corpora/tldr/pages/common/*.md"))[:300]:
    shutil.copy(f, sys.argv[1])
EOF
{
  echo "# Statements per POST /query on PostgreSQL ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo "300 tldr pages, all-MiniLM-L6-v2, $QUERIES sequential queries less an idle window of the same length"
  echo
} >"$OUT"
for entry in "${BINARIES[@]}"; do
  label=${entry%%=*} bin=${entry#*=}
  db="statements_$(tr -c 'a-z0-9\n' '_' <<<"$label")"
  "$PSQL" -X -q "$QUARRY_TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db TEMPLATE template1" 2>/dev/null
  export QUARRY_HOME="$WORK/$label" QUARRY_DATABASE_URL="${QUARRY_TEST_DATABASE_URL%/*}/$db" QUARRY_EMBED_MODEL=$MODEL
  "$bin" collection add "$WORK/corpus" --name tldr >"$WORK/$label.add.log" 2>&1 || { cat "$WORK/$label.add.log"; exit 1; }
  "$bin" embed >"$WORK/$label.embed.log" 2>&1 || { tail "$WORK/$label.embed.log"; exit 1; }
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$bin" serve --port "$port" >"$WORK/$label.serve.log" 2>&1 &
  SERVER=$!
  until curl -sf "127.0.0.1:$port/health" | grep -q '"model_loaded":true'; do
    kill -0 $SERVER 2>/dev/null || { tail "$WORK/$label.serve.log"; exit 1; }
    sleep 0.3
  done
  query() {
    curl -sf -X POST "127.0.0.1:$port/query" -H 'content-type: application/json' \
      -d '{"query":"compress a folder into an archive","limit":10}' >/dev/null
  }
  for _ in 1 2 3 4 5; do query; done
  superuser -c "ALTER SYSTEM SET log_statement = 'all'" -c "ALTER SYSTEM SET log_line_prefix = '%d '" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  logged() { grep -c "^$db LOG:  \(statement\|execute\)" "$LOG" || true; }
  a=$(logged); t0=$(date +%s.%N)
  for _ in $(seq "$QUERIES"); do query; done
  t1=$(date +%s.%N); b=$(logged)
  sleep "$(python3 -c "print($t1 - $t0)")"; c=$(logged)
  superuser -c "ALTER SYSTEM RESET log_statement" -c "ALTER SYSTEM RESET log_line_prefix" -c "SELECT pg_reload_conf()" >/dev/null
  kill $SERVER; wait $SERVER 2>/dev/null || true; SERVER=
  per=$(python3 -c "print(f'{($b - $a - ($c - $b)) / $QUERIES:.1f}')")
  {
    echo "## $label: $per statements per query ($((b - a)) in the window, $((c - b)) idle)"
    grep "^$db LOG:  \(statement\|execute\)" "$LOG" \
      | awk -v from="$a" -v n="${per%.*}" 'NR > from && NR <= from + n' \
      | sed "s/^$db LOG:  //; s/execute s[0-9]*: /execute: /" | cut -c1-110
    echo
  } >>"$OUT"
  echo "$label: $per statements per query" >&2
done
cat "$OUT"
