#!/bin/bash
# A throwaway S3 server for the test suite: Ceph's radosgw on a one-node
# Ceph (one monitor, one OSD keeping its objects in memory).
#   tests/s3server.sh start DIR [BUCKET]  -> prints the settings to use; DIR is created
#   tests/s3server.sh stop DIR
# start prints NAME=value lines (also kept in DIR/env, for `. DIR/env`):
#   S3_ENDPOINT            http://127.0.0.1:PORT (path-style requests)
#   S3_BUCKET              a bucket that exists already (default "spiderd")
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION
# radosgw checks every request's signature (version 2 and 4) against a
# secret made at start, so a client that signs wrongly gets 403
# SignatureDoesNotMatch here as it would from a real store; it speaks
# multipart upload. Monitor and radosgw listen on free ports of 127.0.0.1;
# the daemons are stopped by their pid files in DIR. Starting takes about a
# second: the monitor commits at once instead of batching (paxos intervals),
# and each pool gets one placement group.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}

stop_daemons() {  # at once: nothing in them is kept
  local f pid pids=
  for f in "$dir"/run/client.rgw.pid "$dir"/run/osd.0.pid "$dir"/run/mon.a.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -9 "$pid" 2>/dev/null && pids="$pids $pid"
  done
  for pid in $pids; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
}

fail() {
  echo "s3server: $*" >&2
  tail -n 20 "$dir"/log/*.log >&2 2>/dev/null || true
  stop_daemons
  exit 1
}

case $cmd in
start)
  for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph-authtool ceph; do
    command -v $b >/dev/null || { echo "$b not found (apt-get install radosgw ceph-mon ceph-osd)" >&2; exit 1; }
  done
  bucket=${3:-spiderd}
  mkdir -p "$dir"/{mon,osd0,run,log}
  dir=$(cd "$dir" && pwd)
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  monport=$(free_port)
  port=$(free_port)
  fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
  key=SPIDERDTEST$(python3 -c 'import secrets; print(secrets.token_hex(5).upper())')
  secret=$(python3 -c 'import secrets; print(secrets.token_urlsafe(30))')
  conf=$dir/ceph.conf
  # No admin sockets: a test's directory may be longer than a socket path
  # can be, and nothing here asks the daemons through them.
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$monport
public network = 127.0.0.0/8
ms bind ipv6 = false
keyring = $dir/keyring
run dir = $dir/run
pid file = $dir/run/\$name.pid
admin socket =
log file = $dir/log/\$name.log
auth allow insecure global id reclaim = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 1
osd pool default pgp num = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
paxos propose interval = 0.01
paxos min wait = 0.001
[mon]
mon data = $dir/mon
[osd]
osd data = $dir/osd\$id
osd objectstore = memstore
memstore device bytes = 2147483648
osd max object name len = 460
osd max object namespace len = 64
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
EOF
  ceph_() { ceph -c "$conf" --connect-timeout 30 "$@" 2>>"$dir/log/start.log"; }
  {
    ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' &&
    ceph-authtool "$dir/keyring" --gen-key -n client.admin \
      --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' &&
    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$monport]" "$dir/monmap" &&
    ceph-mon -c "$conf" -i a --mkfs --monmap "$dir/monmap" &&
    ceph-mon -c "$conf" -i a
  } >>"$dir/log/start.log" 2>&1 || fail "the monitor did not start"
  id=$(ceph_ osd create) || fail "no OSD id"
  ceph_ auth get-or-create "osd.$id" osd 'allow *' mon 'allow profile osd' >>"$dir/keyring" ||
    fail "no OSD key"
  { ceph-osd -c "$conf" -i "$id" --mkfs && ceph-osd -c "$conf" -i "$id"; } \
    >>"$dir/log/start.log" 2>&1 || fail "the OSD did not start"
  ceph_ auth get-or-create client.rgw mon 'allow rw' osd 'allow rwx' >>"$dir/keyring" ||
    fail "no radosgw key"
  radosgw -c "$conf" -n client.rgw >>"$dir/log/start.log" 2>&1 || fail "radosgw did not start"
  ok=
  for _ in $(seq 300); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then ok=1; break; fi
    sleep 0.1
  done
  [ -n "$ok" ] || fail "radosgw does not answer on port $port"
  radosgw-admin -c "$conf" user create --uid=spiderd --display-name=spiderd \
    --access-key="$key" --secret-key="$secret" >>"$dir/log/start.log" 2>&1 ||
    fail "no S3 user"
  code=$(curl -s -o "$dir/log/bucket.xml" -w '%{http_code}' -X PUT \
    --aws-sigv4 aws:amz:us-east-1:s3 --user "$key:$secret" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    "http://127.0.0.1:$port/$bucket")
  [ "$code" = 200 ] || fail "creating bucket $bucket: HTTP $code $(cat "$dir/log/bucket.xml")"
  echo "$port" >"$dir/port"
  cat >"$dir/env" <<EOF
S3_ENDPOINT=http://127.0.0.1:$port
S3_BUCKET=$bucket
AWS_ACCESS_KEY_ID=$key
AWS_SECRET_ACCESS_KEY=$secret
AWS_DEFAULT_REGION=us-east-1
EOF
  cat "$dir/env"
  ;;
stop)
  stop_daemons
  rm -rf "$dir"
  ;;
*) echo "usage: $0 start|stop DIR [BUCKET]" >&2; exit 2 ;;
esac
