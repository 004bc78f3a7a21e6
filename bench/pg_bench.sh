#!/usr/bin/env bash
# Many nodes on PostgreSQL: a durable throwaway server (tests/pgserver.sh,
# fsync on), bench/pg_bench.c through spiderd's store API and raw libpq,
# bench/cluster_bench.py with real daemons; every figure on stdout with the
# command that made it; the server removed at the end.
#
# usage: bench/pg_bench.sh [path/to/spiderd] [--long] [--seconds S]
#   default: ~9 min (the sustained phases 60 s each);
#   --long: the sustained single-job phases (1a, 1c, 1e, 1f) run 600 s each
#   --only LIST: phases to run, e.g. --only 1f --long (the 10-minute run);
#     ids 1a 1b 1c 1d 1e 1f 1g 2 3 4 5 (5 = the daemons, figures 5 and 6)
# Every phase runs on a schema of its own (?schema=pN), created fresh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
bin="$(readlink -f "${1:-$root/build/spiderd}")"
shift || true
long=60
short=20
only=all
while [ $# -gt 0 ]; do
  case $1 in
  --long) long=600 ;;
  --seconds) long=$2; shift ;;
  --only) only=$2; shift ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$bin" ] || { echo "no spiderd binary at $bin" >&2; exit 1; }
lib="$(dirname "$bin")/libspiderd_lib.a"
[ -f "$lib" ] || { echo "no $lib (cmake --build the tree of $bin)" >&2; exit 1; }
want() { [ "$only" = all ] || [[ ",$only," == *",$1,"* ]]; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)

work="$(mktemp -d /tmp/spiderd-pgbench-XXXXXX)"
[ "$(id -u)" = 0 ] && chmod 755 "$work"
pgdir="$work/pg"
sampler=
cleanup() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
  "$root/tests/pgserver.sh" stop "$pgdir" || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

gcc -std=c11 -O2 -D_GNU_SOURCE -I"$root/src" $(pkg-config --cflags icu-i18n libpq) \
  "$here/pg_bench.c" "$lib" \
  $(pkg-config --libs libuv libmicrohttpd jansson sqlite3 inih libzip libarchive libpq hiredis) \
  -lpthread -lm -ldl -o "$work/pg_bench"

base=$("$root/tests/pgserver.sh" start "$pgdir" durable)
psql() { "$pgbin/psql" "$base" -X -q "$@"; }
url() { echo "$base?schema=$1"; }
pgb() { # label, pg_bench args...: prints the command and its output
  local label=$1
  shift
  echo
  echo "## $label"
  echo "\$ pg_bench $*"
  "$work/pg_bench" "$@"
}

echo "spiderd $(cd "$root" && git rev-parse --short HEAD) ($bin), $("$pgbin/postgres" --version)," \
  "$(nproc) cores, $(date '+%F %T %Z')"
# auto_explain logs the plan of every statement over 1 s (server.log);
# log_analyze instruments every statement, so it is on only for phase 1a
printf "auto_explain.log_min_duration = '1s'\nauto_explain.log_analyze = on\n" >>"$pgdir/data/postgresql.conf"
psql -Atc "SELECT pg_reload_conf()" >/dev/null
echo "server: $(psql -Atc "SELECT string_agg(name || '=' || setting, ' ') FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','wal_sync_method','shared_buffers','autovacuum_naptime','max_wal_size','session_preload_libraries')")"
echo "start: $(uptime)"

# The jobs table's storage options, as the schema sets them.
"$work/pg_bench" -u "$(url p0)" -m fill -p 1 >/dev/null
echo "jobs reloptions (schema): $(psql -Atc "SELECT reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE relname = 'jobs' AND nspname = 'p0'")"

# Samples the oldest open transaction every 5 s during a phase: what holds
# the xmin horizon back (and so keeps dead queue entries in the index).
sample_xact() { # schema
  while true; do
    psql -Atc "SELECT to_char(now(), 'HH24:MI:SS') || ' oldest xact ' || coalesce(round(extract(epoch FROM max(now() - xact_start))::numeric, 1), 0) || ' s: ' || coalesce((SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 60) FROM pg_stat_activity WHERE datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid() ORDER BY xact_start LIMIT 1), '') FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL" 2>/dev/null || true
    sleep 5
  done
}

# 1. single-job transactions, 8 connections, producer + the daemon's janitor
#    (finished_to_keep 100), server and table settings as shipped
if want 1a; then
psql -c "ALTER SYSTEM SET session_preload_libraries = 'auto_explain'" -c "SELECT pg_reload_conf()" >/dev/null
sample_xact &
sampler=$!
pgb "1a. single-job tx, 8 conns, janitor = store_jobs_prune keep 100, shipped settings (naptime 1 min), ${long}s" \
  -u "$(url p1a)" -m cycle -c 8 -b 1 -d "$long" -w 10 -p 20000 -k 100
kill "$sampler"; wait "$sampler" 2>/dev/null || true; sampler=
psql -c "SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, pg_size_pretty(pg_total_relation_size(relid)) AS size FROM pg_stat_user_tables WHERE schemaname = 'p1a' AND relname = 'jobs'"
psql -c "ALTER SYSTEM RESET session_preload_libraries" -c "SELECT pg_reload_conf()" >/dev/null
echo "slow statements (auto_explain, > 1 s) in 1a:"
grep -A20 'duration: [0-9]\{4,\}' "$pgdir/server.log" | grep -E 'duration|Query Text|Semi Join|loops=' | cut -c1-220 | head -24 || true
fi

# 1b. no janitor: the decay without it
want 1b && pgb "1b. single-job tx, 8 conns, no janitor, shipped settings, ${short}s" \
  -u "$(url p1b)" -m cycle -c 8 -b 1 -d "$short" -w 5 -p 20000 -k -1

# 1c. the janitor's prune with its victims computed once (the proposed fix)
want 1c && pgb "1c. as 1a, janitor = the fixed prune query, ${long}s" \
  -u "$(url p1c)" -m cycle -c 8 -b 1 -d "$long" -w 10 -p 20000 -k 100 -J fixed

# 1d. table-level settings (what ALTER TABLE can do): they cannot make
#     autovacuum look more often than the server's naptime
if want 1d; then
"$work/pg_bench" -u "$(url p1d)" -m fill -p 1 >/dev/null
psql -c "ALTER TABLE p1d.jobs SET (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0, autovacuum_analyze_threshold = 1000, autovacuum_analyze_scale_factor = 0, autovacuum_vacuum_insert_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0)"
pgb "1d. as 1c + ALTER TABLE jobs: vacuum/analyze thresholds 1000 rows, scale factors 0, ${short}s" \
  -u "$(url p1d)" -m cycle -c 8 -b 1 -d "$short" -w 5 -p 20000 -k 100 -J fixed
fi

# 1e. a VACUUM of jobs every second, as a node could run it
want 1e && pgb "1e. as 1c + VACUUM jobs every 1 s, ${long}s" \
  -u "$(url p1e)" -m cycle -c 8 -b 1 -d "$long" -w 10 -p 20000 -k 100 -J fixed -V 1

# From here on the server runs autovacuum every second (ALTER SYSTEM)
psql -c "ALTER SYSTEM SET autovacuum_naptime = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
if want 1f; then
pgb "1f. as 1c, server autovacuum_naptime = 1s, ${long}s" \
  -u "$(url p1f)" -m cycle -c 8 -b 1 -d "$long" -w 10 -p 20000 -k 100 -J fixed
psql -c "SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, pg_size_pretty(pg_total_relation_size(relid)) AS size FROM pg_stat_user_tables WHERE schemaname = 'p1f' AND relname = 'jobs'"
fi

want 1g && pgb "1g. as 1f, autocommit calls (no store_tx_begin), ${short}s" \
  -u "$(url p1g)" -m cycle -c 8 -b 1 -t auto -d "$short" -w 5 -p 20000 -k 100 -J fixed

# 2. batched: claim 10, finish the 10 in one transaction
want 2 && pgb "2. claim 10 per tx + finish 10 per tx, 8 conns, fixed janitor, naptime 1s, ${short}s" \
  -u "$(url p2)" -m cycle -c 8 -b 10 -d "$short" -w 5 -p 50000 -k 100 -J fixed

# 3. nodes: 1, 2, 3 processes with 4 connections each on one schema; the
#    first one also runs the producer and the janitor
want 3 && for n in 1 2 3; do
  u=$(url "p3n$n")
  "$work/pg_bench" -u "$u" -m fill -p 40000 >/dev/null
  start=$(( $(date +%s%3N) + 1500 ))
  echo
  echo "## 3. $n node(s) x 4 connections, single-job tx, naptime 1s, ${short}s"
  echo "\$ pg_bench -u URL -m cycle -c 4 -b 1 -d $short -s $start -n nodeI [-p 40000 -k 100 -J fixed on node 1; -p 0 -k -1 on the others]"
  pids=()
  for i in $(seq 1 "$n"); do
    if [ "$i" = 1 ]; then extra=(-p 40000 -k 100 -J fixed); else extra=(-p 0 -k -1); fi
    "$work/pg_bench" -u "$u" -m cycle -c 4 -b 1 -d "$short" -w "$short" -s "$start" \
      -n "node$i" "${extra[@]}" >"$work/node$i.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  grep -h '^result' "$work"/node*.out
  awk '/^result/ { for (i = 1; i <= NF; i++) if ($i ~ /^jobs=/) { sub("jobs=", "", $i); s += $i } }
       END { printf "nodes=%d total=%.0f/s\n", n, s / d }' n="$n" d="$short" "$work"/node*.out
  rm -f "$work"/node*.out
done

# 4. the hand-made pop (LOCK TABLE ... IN EXCLUSIVE MODE) vs spiderd's claim
want 4 && pgb "4a. hand-made pop: LOCK TABLE q IN EXCLUSIVE MODE, raw libpq, 8 workers, ${short}s" \
  -u "$(url p4)" -m lock -c 8 -b 1 -d "$short" -w 5 -p 20000
want 4 && pgb "4b. spiderd claim (store API), 8 workers, fixed janitor, same run, ${short}s" \
  -u "$(url p4s)" -m cycle -c 8 -b 1 -d "$short" -w 5 -p 20000 -k 100 -J fixed

# 5 + 6. real daemons
want 5 || { echo; echo "end: $(uptime)"; exit 0; }
echo
echo "## 5-6. real daemons on one durable schema (naptime 1s)"
echo "\$ bench/cluster_bench.py --bin $bin --url URL?schema=p5"
/usr/bin/python3 "$here/cluster_bench.py" --bin "$bin" --url "$(url p5)" --psql "$pgbin/psql"

echo
echo "end: $(uptime)"
