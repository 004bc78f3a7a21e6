#!/bin/bash
# A throwaway S3-protocol server for the test suite.
#   tests/s3server.sh start DIR [BUCKET]  -> prints the settings to use; DIR is created
#   tests/s3server.sh stop DIR
# start prints NAME=value lines (also kept in DIR/env, for `. DIR/env`):
#   S3_ENDPOINT            http://127.0.0.1:PORT (path-style requests)
#   S3_BUCKET              a bucket that exists already (default "spiderd")
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION
# The server is s3rver (tests/s3/, installed by `make deps` with npm ci from
# its lockfile): it listens on a free port of 127.0.0.1, keeps its objects
# under DIR, speaks multipart upload, and is stopped by its pid file. It
# knows one access key, S3RVER; it checks version 2 signatures but takes any
# well-formed version 4 signature, so a wrong secret is not caught here.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/s3/node_modules/s3rver/bin/s3rver.js
case $cmd in
start)
  [ -f "$bin" ] || { echo "s3rver not installed (make deps, or: cd tests/s3 && npm ci)" >&2; exit 1; }
  bucket=${3:-spiderd}
  mkdir -p "$dir/data"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # Its own session and no inherited descriptors: a caller that reads this
  # script's output (subprocess.run) must not wait for the server to exit.
  setsid node "$bin" -d "$dir/data" -a 127.0.0.1 -p "$port" --silent \
    --no-vhost-buckets --configure-bucket "$bucket" \
    </dev/null >"$dir/s3rver.log" 2>&1 &
  echo $! >"$dir/s3rver.pid"
  ok=
  for _ in $(seq 100); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/$bucket/"; then ok=1; break; fi
    kill -0 "$(cat "$dir/s3rver.pid")" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$ok" ] || { echo "s3rver did not start:" >&2; cat "$dir/s3rver.log" >&2; exit 1; }
  echo "$port" >"$dir/port"
  cat >"$dir/env" <<EOF
S3_ENDPOINT=http://127.0.0.1:$port
S3_BUCKET=$bucket
AWS_ACCESS_KEY_ID=S3RVER
AWS_SECRET_ACCESS_KEY=S3RVER
AWS_DEFAULT_REGION=us-east-1
EOF
  cat "$dir/env"
  ;;
stop)
  if [ -f "$dir/s3rver.pid" ]; then
    pid=$(cat "$dir/s3rver.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
  ;;
*) echo "usage: $0 start|stop DIR [BUCKET]" >&2; exit 2 ;;
esac
