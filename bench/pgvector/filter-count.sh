#!/usr/bin/env bash
# What a filtered vector search on PostgreSQL spends before it searches: sizing its filter
# (issue 46). Before, every search counted all the chunks its filter keeps; now a store larger
# than `count_cap` counts only up to it, from the filter's documents by key, and takes a larger
# filter's share from the planner's statistics, while a smaller store counts with a join as
# before (crates/quarry-store-pg/src/vectors.rs, `PgStore::filter_size`, whose statements this
# mirrors). pgbench runs the old and the new statement on the same data, one client: filters
# keeping 4.6 % and 95.4 % of 110,000 chunks (the shape of bench/backends' data: ~1.1 chunks
# per document), and one collection holding all of a 3,300-chunk store (the default setup).
#   bash bench/pgvector/filter-count.sh        # writes bench/results/pgvector-filter-count.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
export QUARRY_TEST_SERVICES_DIR="${QUARRY_TEST_SERVICES_DIR:-${TMPDIR:-/tmp}/quarry-bench-filter-$(id -u)}"
eval "$(bash scripts/test-services start-pg)"
trap 'bash scripts/test-services stop >&2 || true' EXIT
PSQL="$QUARRY_TEST_PG_BIN/psql"
stamp="$(date +%s)"
dir="$(mktemp -d)"

# A database of `docs` documents and `chunks` chunks; every `every`-th document in collection 2.
make_db() {
  local name="$1" docs="$2" chunks="$3" every="$4"
  "$PSQL" "$QUARRY_TEST_DATABASE_URL" -qc "CREATE DATABASE $name"
  "$PSQL" "${QUARRY_TEST_DATABASE_URL%/*}/$name" -q >/dev/null <<SQL
CREATE TABLE documents (id bigint PRIMARY KEY, collection_id bigint NOT NULL, path text NOT NULL,
    UNIQUE (collection_id, path));
CREATE TABLE chunks (id bigint PRIMARY KEY, document_id bigint NOT NULL, hash text NOT NULL);
CREATE INDEX chunks_document ON chunks(document_id);
INSERT INTO documents SELECT i, CASE WHEN i % $every = 0 THEN 2 ELSE 1 END, 'doc-' || i
    FROM generate_series(1, $docs) i;
INSERT INTO chunks SELECT i, CASE WHEN i <= $docs THEN i ELSE (i * 7919) % $docs + 1 END, md5(i::text)
    FROM generate_series(1, $chunks) i;
VACUUM ANALYZE documents;
VACUUM ANALYZE chunks;
SQL
}
make_db "quarry_filter_large_$stamp" 100000 110000 22
make_db "quarry_filter_small_$stamp" 3000 3300 1000000

cat >"$dir/before.sql" <<'SQL'
SELECT (SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
        WHERE d.collection_id = ANY(ARRAY[:coll]::bigint[])),
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'chunks'::regclass);
SQL
after() {  # the new statement around one count ($1: probed | joined)
  local count
  if [ "$1" = probed ]; then
    count="SELECT count(*) FROM (SELECT 1 FROM documents d
          CROSS JOIN LATERAL (SELECT 1 FROM chunks c WHERE c.document_id = d.id OFFSET 0) c
          WHERE d.collection_id = ANY(ARRAY[:coll]::bigint[]) LIMIT :cap) k"
  else
    count="SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
          WHERE d.collection_id = ANY(ARRAY[:coll]::bigint[])"
  fi
  cat <<SQL
SELECT n.kept, CASE WHEN n.kept >= :cap THEN
    (SELECT sum(m.f)::float8 FROM pg_stats s CROSS JOIN LATERAL
     unnest(s.most_common_vals::text::bigint[], s.most_common_freqs) AS m(v, f)
     WHERE s.schemaname = current_schema() AND s.tablename = 'documents'
     AND s.attname = 'collection_id' AND m.v = ANY(ARRAY[:coll]::bigint[])) END
FROM (SELECT ($count) AS kept OFFSET 0) n;
SQL
}
after probed >"$dir/after-probed.sql"
after joined >"$dir/after-joined.sql"

run() {  # database, collection, cap, statement file → "latency tps"
  local line
  line=$("$QUARRY_TEST_PG_BIN/pgbench" -n -M prepared -c 1 -T 10 -D coll="$2" -D cap="$3" \
    -f "$4" "${QUARRY_TEST_DATABASE_URL%/*}/$1" 2>/dev/null)
  printf '%s %s' "$(sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p' <<<"$line")" \
    "$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$line")"
}
out="bench/results/pgvector-filter-count.txt"
{
  echo "# Sizing a filtered vector search's filter on PostgreSQL ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); pgbench, 1 client, prepared, 10 s each"
  echo "large: 110,000 chunks in 100,000 documents, count_cap(110,000, 4,096) = 4,097, counted from"
  echo "documents by key; small: 3,300 chunks in 3,000 documents of one collection, below the cap,"
  echo "counted with a join"
  echo
  printf '%-10s %-34s %12s %8s\n' statement filter "latency ms" tps
  for case in "large 2 4.6 % of large (4,994 chunks) probed 4097" \
              "large 1 95.4 % of large (105,006) probed 4097" \
              "small 1 all of small (3,300) joined 9223372036854775807"; do
    read -r db coll rest <<<"$case"
    cap="${rest##* }"; rest="${rest% *}"; how="${rest##* }"; what="${rest% *}"
    for which in before after; do
      file="$dir/before.sql"; [ "$which" = after ] && file="$dir/after-$how.sql"
      read -r lat tps <<<"$(run "quarry_filter_${db}_$stamp" "$coll" "$cap" "$file")"
      printf '%-10s %-34s %12s %8.0f\n' "$which" "$what" "$lat" "$tps"
    done
  done
} | tee "$out"
for db in large small; do "$PSQL" "$QUARRY_TEST_DATABASE_URL" -qc "DROP DATABASE quarry_filter_${db}_$stamp"; done
rm -rf "$dir"
