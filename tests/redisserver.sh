#!/bin/bash
# A throwaway Redis server for the test suite.
#   tests/redisserver.sh start DIR  -> prints the store URL; DIR is created
#   tests/redisserver.sh stop DIR
# It listens on a free port of 127.0.0.1, keeps nothing on disk, and is
# stopped by its pid file.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
case $cmd in
start)
  mkdir -p "$dir"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" >/dev/null
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  echo "$port" >"$dir/port"
  echo "redis://127.0.0.1:$port/0"
  ;;
stop)
  if [ -f "$dir/port" ]; then redis-cli -p "$(cat "$dir/port")" shutdown nosave >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
