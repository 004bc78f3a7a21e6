#!/bin/bash
# deploy/systemd/spiderd.service checked offline (systemd need not be PID 1):
# `systemd-analyze verify` with ExecStart pointed at the built binary, the
# directives the packaging relies on, and the sysusers/tmpfiles files parsed.
#   tests/pkg/test_systemd.sh [SPIDERD_BIN]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/spiderd}
unit=$root/deploy/systemd/spiderd.service
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if command -v systemd-analyze >/dev/null; then
  sed "s#^ExecStart=/usr/bin/spiderd#ExecStart=$bin#" "$unit" >"$tmp/spiderd.service"
  if out=$(systemd-analyze verify --man=no "$tmp/spiderd.service" 2>&1) && [ -z "$out" ]; then
    ok "systemd-analyze verify"
  else
    bad "systemd-analyze verify: $out"
  fi
else
  bad "systemd-analyze not installed (apt-get install systemd)"
fi

want=(Type=notify NotifyAccess=main "User=spiderd" "ExecStart=/usr/bin/spiderd serve"
  "Environment=SPIDERD_CONFIG_FILES=/etc/spiderd/scrapyd.conf:/etc/spiderd/conf.d"
  StateDirectory=spiderd LogsDirectory=spiderd WorkingDirectory=/var/lib/spiderd
  ProtectSystem=strict ProtectHome=true PrivateTmp=true NoNewPrivileges=true
  ProtectKernelTunables=true ProtectKernelModules=true ProtectControlGroups=false
  "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" LockPersonality=true
  RestrictRealtime=true SystemCallArchitectures=native Delegate=yes KillMode=mixed
  Restart=on-failure WatchdogSec=30)
for w in "${want[@]}"; do
  grep -qxF "$w" "$unit" && ok "$w" || bad "missing $w"
done
# the stop must outlast the daemon's own drain and stop (drain_grace +
# shutdown_grace, 30 + 10 s by default)
tss=$(sed -n 's/^TimeoutStopSec=//p' "$unit")
[ "${tss:-0}" -gt 40 ] && ok "TimeoutStopSec=$tss" || bad "TimeoutStopSec=$tss too short"

if command -v systemd-sysusers >/dev/null; then
  out=$(systemd-sysusers --dry-run --root="$tmp" "$root/deploy/systemd/spiderd.sysusers" 2>&1)
  if echo "$out" | grep -q "user 'spiderd'"; then ok "sysusers: creates user spiderd"; else bad "sysusers: $out"; fi
fi
grep -q '^d /var/lib/spiderd 0750 spiderd spiderd' "$root/deploy/systemd/spiderd.tmpfiles" &&
  ok "tmpfiles: /var/lib/spiderd" || bad "tmpfiles: /var/lib/spiderd"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
