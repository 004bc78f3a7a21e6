#!/usr/bin/env bash
# Task queue benchmark: a fresh spiderd on a temporary directory, Debian's
# redis-server twice (AOF with appendfsync everysec: the durable comparison;
# no persistence: in RAM), bench/queue_bench.c against all three in one run,
# a table on stdout, everything removed at the end.
#
# usage: bench/queue_bench.sh [path/to/spiderd] [queue_bench options...]
#   without options: all phases, 3 passes each (medians), a fill to 10,000,000
#   elements (~15 min on 2 cores);
#   e.g. bench/queue_bench.sh build/spiderd -p put,take,latency   (~1 min)
# SPIDERD_BENCH_STORE=URL runs spiderd on that store (a PostgreSQL URL, for
# example from tests/pgserver.sh) instead of its own SQLite file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(readlink -f "${1:-$here/../build/spiderd}")"
shift || true
[ -x "$bin" ] || { echo "no spiderd binary at $bin" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is missing (make deps)" >&2; exit 1; }
if [ $# -eq 0 ]; then set -- -p put,take,latency,full --full 10000000 --repeat 3; fi

work="$(mktemp -d /tmp/spiderd-qbench-XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # port
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on port $1" >&2
  return 1
}

gcc -std=c11 -O2 -D_GNU_SOURCE "$here/queue_bench.c" \
  $(pkg-config --cflags --libs jansson hiredis) -lpthread -o "$work/queue_bench"

# spiderd
mkdir -p "$work/spiderd"
sport=$(free_port)
cat >"$work/spiderd/scrapyd.conf" <<EOF
[scrapyd]
bind_address = 127.0.0.1
http_port = $sport
[spiderd]
python = /usr/bin/python3
log_level = warning
${SPIDERD_BENCH_STORE:+store = $SPIDERD_BENCH_STORE}
EOF
(cd "$work/spiderd" && SPIDERD_CONFIG_FILES="$work/spiderd/scrapyd.conf" \
  exec "$bin" serve >"$work/spiderd/daemon.log" 2>&1) &
spid=$!
pids+=("$spid")

# Redis: durable (AOF, fsync every second) and in RAM
start_redis() { # dir port extra...
  local dir=$1 port=$2
  shift 2
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --daemonize no \
    --protected-mode no --loglevel warning "$@" >"$dir/redis.log" 2>&1 &
  pids+=("$!")
}
rport=$(free_port)
start_redis "$work/redis-aof" "$rport" --appendonly yes --appendfsync everysec
mport=$(free_port)
start_redis "$work/redis-ram" "$mport" --appendonly no

wait_port "$sport"
wait_port "$rport"
wait_port "$mport"

echo "spiderd $(cd "$here" && git rev-parse --short HEAD 2>/dev/null || echo '?') ($bin)," \
  "$(redis-server --version | cut -d' ' -f1-3), $(nproc) cores"
echo "start: $(uptime)"
rc=0
"$work/queue_bench" -u "http://127.0.0.1:$sport" -r "127.0.0.1:$rport" -R "127.0.0.1:$mport" \
  --pid "$spid" --db "$work/spiderd/dbs/spiderd.db" --redis-dir "$work/redis-aof" "$@" || rc=$?
echo
echo "end: $(uptime)"
exit $rc
