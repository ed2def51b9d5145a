#!/usr/bin/env bash
# What a filtered vector search on PostgreSQL spends before it searches: sizing its filter
# (issue 46). Before, every search counted all the chunks its filter keeps; now the count
# stops where the choice of path stops needing it (`count_cap` in
# crates/quarry-store-pg/src/vectors.rs, whose statement this mirrors) and a larger filter's
# share comes from the planner's statistics. pgbench runs both statements on the same data,
# one client, for a filter keeping 4.6 % and one keeping 95.4 % of 110,000 chunks (the shape
# of bench/backends' data: ~1.1 chunks per document).
#   bash bench/pgvector/filter-count.sh        # writes bench/results/pgvector-filter-count.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
export QUARRY_TEST_SERVICES_DIR="${QUARRY_TEST_SERVICES_DIR:-${TMPDIR:-/tmp}/quarry-bench-filter-$(id -u)}"
eval "$(bash scripts/test-services start-pg)"
trap 'bash scripts/test-services stop >&2 || true' EXIT
PSQL="$QUARRY_TEST_PG_BIN/psql"
name="quarry_filter_count_$(date +%s)"
"$PSQL" "$QUARRY_TEST_DATABASE_URL" -qc "CREATE DATABASE $name"
url="${QUARRY_TEST_DATABASE_URL%/*}/$name"
"$PSQL" "$url" -q >/dev/null <<'SQL'
CREATE TABLE documents (id bigint PRIMARY KEY, collection_id bigint NOT NULL, path text NOT NULL,
    UNIQUE (collection_id, path));
CREATE TABLE chunks (id bigint PRIMARY KEY, document_id bigint NOT NULL, hash text NOT NULL);
CREATE INDEX chunks_document ON chunks(document_id);
INSERT INTO documents SELECT i, CASE WHEN i % 22 = 0 THEN 2 ELSE 1 END, 'doc-' || i
    FROM generate_series(1, 100000) i;
INSERT INTO chunks SELECT i, CASE WHEN i <= 100000 THEN i ELSE (i * 7919) % 100000 + 1 END, md5(i::text)
    FROM generate_series(1, 110000) i;
VACUUM ANALYZE documents;
VACUUM ANALYZE chunks;
SQL
dir="$(mktemp -d)"
cat >"$dir/before.sql" <<'SQL'
SELECT (SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
        WHERE d.collection_id = ANY(ARRAY[:coll]::bigint[])),
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'chunks'::regclass);
SQL
cat >"$dir/after.sql" <<'SQL'
SELECT n.kept, n.total, CASE WHEN n.kept >= :cap THEN
    (SELECT sum(m.f)::float8 FROM pg_stats s CROSS JOIN LATERAL
     unnest(s.most_common_vals::text::bigint[], s.most_common_freqs) AS m(v, f)
     WHERE s.schemaname = current_schema() AND s.tablename = 'documents'
     AND s.attname = 'collection_id' AND m.v = ANY(ARRAY[:coll]::bigint[])) END
FROM (SELECT (SELECT count(*) FROM (SELECT 1 FROM documents d
          CROSS JOIN LATERAL (SELECT 1 FROM chunks c WHERE c.document_id = d.id OFFSET 0) c
          WHERE d.collection_id = ANY(ARRAY[:coll]::bigint[]) LIMIT :cap) k) AS kept,
      (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'chunks'::regclass) AS total) n;
SQL
out="bench/results/pgvector-filter-count.txt"
{
  echo "# Sizing a filtered vector search's filter on PostgreSQL ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); pgbench, 1 client, prepared, 10 s each"
  echo "110,000 chunks in 100,000 documents; the cap is count_cap(110,000, 4,096) = 4,097"
  echo
  printf '%-10s %-22s %12s %10s\n' statement filter "latency ms" tps
  for coll in 2 1; do
    what=$([ "$coll" = 2 ] && echo "4.6 % (4,994 chunks)" || echo "95.4 % (105,006)")
    for which in before after; do
      line=$("$QUARRY_TEST_PG_BIN/pgbench" -n -M prepared -c 1 -T 10 -D coll="$coll" -D cap=4097 \
        -f "$dir/$which.sql" "$url" 2>/dev/null)
      lat=$(sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p' <<<"$line")
      tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$line")
      printf '%-10s %-22s %12s %10.0f\n' "$which" "$what" "$lat" "$tps"
    done
  done
} | tee "$out"
"$PSQL" "$QUARRY_TEST_DATABASE_URL" -qc "DROP DATABASE $name"
rm -rf "$dir"
