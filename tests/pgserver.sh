#!/bin/bash
# A throwaway PostgreSQL server for the test suite and benchmarks.
#   tests/pgserver.sh start DIR [durable]  -> prints the store URL; DIR is created
#   tests/pgserver.sh stop DIR
# The server listens on a free port of 127.0.0.1 and a socket in DIR, trusts
# local connections, and runs as the postgres user when started by root
# (initdb refuses root). Without "durable", fsync is off: the tests check
# behaviour, not disks; benchmarks ask for a durable server.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?data directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case $cmd in
start)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1
  opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=300 -c shared_buffers=256MB"
  if [ "${3:-}" != durable ]; then opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"; fi
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o "$opts" start >/dev/null
  as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE spiderd" postgres
  echo "$port" >"$dir/port"
  echo "postgresql://postgres@127.0.0.1:$port/spiderd"
  ;;
stop)
  [ -d "$dir/data" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
restart)  # a clean restart: every connection drops, nothing committed is lost
  as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w restart >/dev/null
  ;;
*) echo "usage: $0 start|stop|restart DIR" >&2; exit 2 ;;
esac
