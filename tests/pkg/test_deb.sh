#!/bin/bash
# The Debian package end to end: built (tests/pkg/build_deb.sh), its contents
# and lintian checked, installed here, spiderd started as the spiderd user
# with the packaged config (directly with setpriv; under systemd when PID 1
# is systemd), /daemonstatus.json and /ui/ asked, then stopped and the
# package purged, its user removed when this script made it.
#   tests/pkg/test_deb.sh [OUT]       (root; about a minute)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-$root/build/deb}")
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
t0=$SECONDS

[ "$(id -u)" = 0 ] || { echo "test_deb.sh: needs root (dpkg -i)"; exit 2; }
if dpkg-query -W -f='${Status}' spiderd 2>/dev/null | grep -q 'install ok installed'; then
  echo "test_deb.sh: spiderd is installed on this machine already; not touching it"; exit 2
fi

# ---- build ----
"$root/tests/pkg/build_deb.sh" "$out" >"$out.build.log" 2>&1 ||
  { tail -40 "$out.build.log"; echo "FAIL: build (log: $out.build.log)"; exit 1; }
deb=$(ls "$out"/spiderd_*_*.deb | head -1)
ok "built $(basename "$deb") in $((SECONDS - t0)) s"

# ---- contents ----
contents=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#')
for f in /usr/bin/spiderd /etc/spiderd/scrapyd.conf \
  /usr/lib/spiderd/python/spiderd_runner/__main__.py /usr/lib/spiderd/python/spiderd/__init__.py \
  /usr/share/spiderd/ui/console/index.html /usr/share/spiderd/ui/docs/index.html \
  /usr/share/spiderd/ui/api/index.html /lib/systemd/system/spiderd.service \
  /usr/lib/sysusers.d/spiderd.conf /usr/lib/tmpfiles.d/spiderd.conf \
  /usr/share/doc/spiderd/operations.md; do
  check "contains $f" grep -qxF "$f" <<<"$contents"
done
check "no __pycache__ or .stamp" bash -c '! grep -qE "__pycache__|\.stamp$" <<<"$1"' _ "$contents"
check "scrapyd.conf is a conffile" bash -c \
  'dpkg-deb --ctrl-tarfile "$1" | tar -xOf - ./conffiles | grep -qx /etc/spiderd/scrapyd.conf' _ "$deb"
depends=$(dpkg-deb -f "$deb" Depends)
for d in python3-scrapy python3 libuv1 libmicrohttpd12 libicu libcurl4 libssl3 libpq5 libarchive13 adduser; do
  check "Depends: $d" grep -q "$d" <<<"$depends"
done

# ---- lintian: errors fail, warnings are listed ----
if command -v lintian >/dev/null; then
  lint=$(lintian --allow-root "$deb" 2>&1)
  [ -n "$lint" ] && echo "$lint" | sed 's/^/  lintian: /'
  check "lintian: no errors" bash -c '! grep -q "^E:" <<<"$1"' _ "$lint"
else
  echo "  lintian not installed: skipped (apt-get install lintian)"
fi

# ---- install ----
user_before=$(getent passwd spiderd >/dev/null && echo yes || echo no)
pid=""
cleanup() {
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  [ "$under_systemd" = yes ] && systemctl stop spiderd 2>/dev/null && rm -rf /run/systemd/system/spiderd.service.d
  dpkg --purge spiderd >/dev/null 2>&1
  [ "$user_before" = no ] && getent passwd spiderd >/dev/null && userdel spiderd 2>/dev/null
  getent group spiderd >/dev/null && [ "$user_before" = no ] && groupdel spiderd 2>/dev/null
  true
}
under_systemd=no
[ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ] && under_systemd=yes
trap cleanup EXIT

if ! DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >"$out.install.log" 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -f -y -qq >>"$out.install.log" 2>&1
fi
check "installed" bash -c "dpkg-query -W -f='\${Status}' spiderd | grep -q 'install ok installed'"
check "user spiderd exists" bash -c "getent passwd spiderd >/dev/null"
check "/var/lib/spiderd owned by spiderd" bash -c '[ "$(stat -c %U /var/lib/spiderd)" = spiderd ]'
check "runner importable with the packaged pythonpath" runuser -u spiderd -- \
  env PYTHONPATH=/usr/lib/spiderd/python /usr/bin/python3 -c 'import spiderd_runner, spiderd'
if command -v systemd-analyze >/dev/null; then
  check "installed unit verifies" bash -c \
    'out=$(systemd-analyze verify --man=no /lib/systemd/system/spiderd.service 2>&1); [ -z "$out" ] || { echo "$out"; false; }'
fi

# ---- run it: the packaged config, on a free port (6800 may be taken here) ----
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if [ "$under_systemd" = yes ]; then
  mkdir -p /run/systemd/system/spiderd.service.d
  printf '[Service]\nEnvironment=SPIDERD_HTTP_PORT=%s\n' "$port" >/run/systemd/system/spiderd.service.d/test.conf
  systemctl daemon-reload
  check "systemctl start spiderd (Type=notify: returns once ready)" systemctl start spiderd
  pid=$(systemctl show -p MainPID --value spiderd)
else
  cd /var/lib/spiderd
  # setpriv execs (runuser would fork and stand between the signal and spiderd)
  setpriv --reuid spiderd --regid spiderd --init-groups -- env -i PATH=/usr/bin:/bin HOME=/var/lib/spiderd \
    SPIDERD_CONFIG_FILES=/etc/spiderd/scrapyd.conf:/etc/spiderd/conf.d SPIDERD_HTTP_PORT="$port" \
    /usr/bin/spiderd serve 2>"$out.daemon.log" &
  pid=$!
  cd "$root"
fi
up=no
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/daemonstatus.json" >/dev/null 2>&1 && { up=yes; break; }
  sleep 0.1
done
check "daemon up on 127.0.0.1:$port" [ "$up" = yes ]
status=$(curl -fsS "http://127.0.0.1:$port/daemonstatus.json")
check "daemonstatus.json: $status" grep -q '"status": *"ok"' <<<"$status"
check "runs as spiderd" bash -c '[ "$(ps -o user= -p "$1" | tr -d " ")" = spiderd ]' _ "$pid"
check "store in /var/lib/spiderd/dbs" test -f /var/lib/spiderd/dbs/spiderd.db
check "bound to loopback only (packaged bind_address)" bash -c \
  "ss -ltn | awk '{print \$4}' | grep -qx '127.0.0.1:$port'"
ui=$(curl -fsS "http://127.0.0.1:$port/ui/")
check "/ui/ serves /usr/share/spiderd/ui/console/index.html" \
  [ "$ui" = "$(cat /usr/share/spiderd/ui/console/index.html)" ]
check "/docs/ served" curl -fsS -o /dev/null "http://127.0.0.1:$port/docs/"

# ---- stop: SIGTERM, a graceful exit ----
if [ "$under_systemd" = yes ]; then
  check "systemctl stop spiderd" systemctl stop spiderd
else
  kill -TERM "$pid"
  rc=0; wait "$pid" || rc=$?
  check "SIGTERM: exit 0 (got $rc)" [ "$rc" = 0 ]
  grep -q '"stopped"\|stopped' "$out.daemon.log" || sed 's/^/  daemon: /' "$out.daemon.log" | tail -5
fi
pid=""

# ---- purge: nothing left ----
dpkg --purge spiderd >"$out.purge.log" 2>&1
check "purged" bash -c '! dpkg-query -W -f="\${Status}" spiderd 2>/dev/null | grep -q installed'
for p in /usr/bin/spiderd /etc/spiderd /var/lib/spiderd /var/log/spiderd /usr/share/spiderd /usr/lib/spiderd; do
  check "gone: $p" test ! -e "$p"
done
if [ "$user_before" = no ]; then
  userdel spiderd 2>/dev/null; getent group spiderd >/dev/null && groupdel spiderd
  check "user spiderd removed" bash -c '! getent passwd spiderd'
fi

echo "test_deb.sh: $((SECONDS - t0)) s"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
