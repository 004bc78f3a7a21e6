#!/bin/bash
# The per-job cgroup v2 limits (tests/integration/test_limits.py, its cgroup
# half), plain and sanitized, in a throwaway VM on Debian's kernel: a
# machine whose memory, cpu and pids controllers are bound to cgroup v1 (a
# hybrid host, most containers) cannot give the tests a cgroup v2 hierarchy
# with them, a fresh kernel can.
#   tests/cgroupvm.sh BUILD ASAN_BUILD
# qemu boots the kernel of Debian's linux-image-amd64 (fetched with apt-get
# download, unpacked, not installed) with a busybox-static initrd that loads
# the virtio and 9p modules, mounts this machine's root read-only over 9p,
# cgroup2 with every controller at /sys/fs/cgroup, tmpfs on /tmp and /run,
# chroots into it and runs pytest with CI=true (a skip is a failure). The
# kernel and the modules are kept in BUILD/cgroupvm/<package>_<version>/
# for later runs; the results (pytest's output, exit codes and JUnit XML,
# the console) in BUILD/cgroupvm/results/. Nothing is mounted on this
# machine and qemu is stopped however the run ends (CGROUPVM_TIMEOUT
# seconds at most, 900 by default; CGROUPVM_ACCEL=kvm where KVM works, TCG
# otherwise). Needs qemu-system-x86, busybox-static.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
asan=$(cd "${2:?sanitized build dir}" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
timeout_s=${CGROUPVM_TIMEOUT:-900}
mem_mb=${CGROUPVM_MEM:-4096}
top=$build/cgroupvm
res=$top/results
# What the initrd loads to reach the host's root (with their dependencies).
targets="virtio_pci 9pnet_virtio 9p"

die() { echo "cgroupvm: $*" >&2; exit 1; }
# The VM has tmpfs on /tmp and /run: what it must see there comes from the
# source tree's share.
for d in "$build" "$asan"; do
  case $d in
  "$repo"/*) ;;
  /tmp/* | /run/*) die "$d: a build directory under /tmp or /run must be inside $repo" ;;
  esac
done

for b in "$build" "$asan"; do
  [[ -x $b/spiderd ]] || die "$b/spiderd is not built"
done
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing (Debian package qemu-system-x86)"
bb=/bin/busybox
# The initrd holds nothing else: a busybox needing shared libraries cannot run.
[[ -x $bb ]] && ! LC_ALL=C readelf -l "$bb" 2>/dev/null | grep -q 'program interpreter' ||
  die "$bb is missing or not static (Debian package busybox-static)"
mkdir -p "$top"

tmp=
qpid=
cleanup() {
  if [[ -n $qpid ]]; then kill -TERM "$qpid" 2>/dev/null || true; wait "$qpid" 2>/dev/null || true; fi
  if [[ -n $tmp ]]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The versioned kernel package linux-image-amd64 depends on now.
kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'
}
pkg=$(kernel_package)
if [[ -z $pkg && $(id -u) == 0 ]]; then
  apt-get update -qq >/dev/null
  pkg=$(kernel_package)
fi
[[ -n $pkg ]] || die "apt knows no linux-image-amd64 (apt-get update?)"
ver=$(apt-cache show --no-all-versions "$pkg" | awk '$1 == "Version:" { print $2; exit }')
[[ -n $ver ]] || die "apt has no version of $pkg"
kver=${pkg#linux-image-}
cache=$top/${pkg}_$ver

# Unpacks the kernel package into $tmp and leaves in $cache the kernel and
# ird/ (busybox, the modules in load order): everything the initrd needs but
# its init, written on every run.
prepare_kernel() {
  local root moddir base line p n d m
  tmp=$(mktemp -d "$top/prep.XXXXXX")
  echo "cgroupvm: fetching $pkg $ver"
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$ver" >/dev/null) ||
    die "apt-get download $pkg=$ver failed"
  root=$tmp/root
  dpkg-deb -x "$tmp"/"$pkg"_*.deb "$root"
  for base in "$root" "$root/usr"; do
    [[ -d $base/lib/modules/$kver ]] && moddir=$base/lib/modules/$kver && break
  done
  [[ -n ${moddir:-} && -f $root/boot/vmlinuz-$kver ]] || die "$pkg has no vmlinuz-$kver or modules"
  # The package leaves modules.dep to depmod at installation.
  "$bb" depmod -b "$base" "$kver" || die "depmod failed on $pkg"
  declare -A path=() deps=() seen=()
  while IFS= read -r line; do
    p=${line%%:*}; n=${p##*/}; n=${n%%.ko*}
    path[$n]=$p; deps[$n]=${line#*:}
  done <"$moddir/modules.dep"
  order=()
  visit() {
    local m=$1 d n
    [[ -z ${seen[$m]:-} ]] || return 0
    seen[$m]=1
    if [[ -z ${path[$m]:-} ]]; then
      grep -qE "/$m\.ko" "$moddir/modules.builtin" 2>/dev/null && return 0
      die "$pkg has no module $m (neither in modules.dep nor built in)"
    fi
    for d in ${deps[$m]}; do n=${d##*/}; visit "${n%%.ko*}"; done
    order+=("$m")
  }
  for m in $targets; do visit "$m"; done
  mkdir -p "$tmp/ird/bin" "$tmp/ird/mods"
  cp "$bb" "$tmp/ird/bin/busybox"
  for m in "${order[@]}"; do
    p=$moddir/${path[$m]}
    case $p in
    *.ko) cp "$p" "$tmp/ird/mods/$m.ko" ;;
    *.ko.xz) "$bb" xz -dc "$p" >"$tmp/ird/mods/$m.ko" ;;
    *.ko.gz) "$bb" gzip -dc "$p" >"$tmp/ird/mods/$m.ko" ;;
    *) die "cannot unpack the module $p" ;;
    esac
  done
  printf '%s\n' "${order[@]}" >"$tmp/ird/mods/load"
  cp "$root/boot/vmlinuz-$kver" "$tmp/vmlinuz"
  # Another kernel's cache is of no further use.
  rm -rf "$top"/linux-image-*
  mkdir "$cache"
  mv "$tmp/ird" "$tmp/vmlinuz" "$cache/"
  rm -rf "$tmp"; tmp=
  echo "cgroupvm: modules loaded at boot: ${order[*]}"
}
[[ -f $cache/vmlinuz && -f $cache/ird/mods/load ]] || prepare_kernel

# The initrd's init: mounts, runs /tmp/out/run.sh in the host's root, powers
# off (a failure on the way too: the VM never waits for its timeout).
cat >"$cache/ird/init" <<'EOF'
#!/bin/busybox sh
B=/bin/busybox
R=/newroot
fail() { $B echo "cgroupvm init: $*"; $B poweroff -f; exit 1; }
$B mkdir -p /proc /sys /dev $R
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs dev /dev
exec >/dev/console 2>&1
for m in $($B cat /mods/load); do $B insmod /mods/$m.ko || fail "insmod $m"; done
$B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose root $R ||
  fail "cannot mount the host's root"
$B ip link set lo up
$B mount -t proc proc $R/proc
$B mount -t sysfs sysfs $R/sys
$B mount -t cgroup2 cgroup2 $R/sys/fs/cgroup || fail "cannot mount cgroup2"
$B mount -t devtmpfs dev $R/dev
$B mkdir -p $R/dev/shm
$B mount -t tmpfs shm $R/dev/shm
$B mount -t tmpfs tmp $R/tmp
$B mount -t tmpfs run $R/run
$B mkdir -p $R/tmp/out
$B mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out $R/tmp/out ||
  fail "cannot mount the results directory"
# A source tree under /tmp or /run (a CI checkout, say) is under the tmpfs
# just mounted: it comes again from its own share.
SRC=$($B cat /source_tree)
if [ ! -d "$R$SRC/tests" ]; then
  $B mkdir -p "$R$SRC" && $B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose \
    tree "$R$SRC" || fail "cannot mount the source tree $SRC"
fi
$B chroot $R /bin/bash /tmp/out/run.sh >$R/tmp/out/guest.log 2>&1
$B sync
$B poweroff -f
EOF
chmod 755 "$cache/ird/init"
printf '%s' "$repo" >"$cache/ird/source_tree"
(cd "$cache/ird" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc 2>/dev/null) >"$top/initrd"

rm -rf "$res"
mkdir -p "$res"
# In the VM: the cgroup half of test_limits.py, each build in turn; its
# output, exit code and JUnit XML land in the results directory.
cat >"$res/run.sh" <<EOF
export HOME=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 CI=true
echo "kernel \$(uname -r), cgroup v2 controllers: \$(cat /sys/fs/cgroup/cgroup.controllers)"
cd "$repo/tests/integration" || exit 1
run() {
  local name=\$1 bin=\$2; shift 2
  env "\$@" SPIDERD_BIN="\$bin" timeout $((timeout_s > 120 ? timeout_s - 60 : timeout_s)) /usr/bin/python3 -m pytest -v -rs \\
    -p no:cacheprovider --junitxml=/tmp/out/\$name.xml -k cgroup test_limits.py >/tmp/out/\$name.log 2>&1
  echo \$? >/tmp/out/\$name.rc
  # What the tests made under the root cgroup they must have removed.
  find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -type d >/tmp/out/\$name.left
}
run plain "$build/spiderd"
run asan "$asan/spiderd" SPIDERD_SANITIZED=1
EOF

# TCG unless told: a /dev/kvm that opens is not one that works (nested
# virtualization without the MSRs qemu sets aborts it at start).
case ${CGROUPVM_ACCEL:-tcg} in
kvm) accel=(-accel kvm -cpu host) ;;
tcg) accel=(-accel tcg,thread=multi -cpu max) ;;
*) die "CGROUPVM_ACCEL is kvm or tcg" ;;
esac
echo "cgroupvm: booting $pkg $ver (${accel[1]}), the cgroup half of test_limits.py, plain and sanitized"
start=$SECONDS
timeout -k 10 "$timeout_s" qemu-system-x86_64 "${accel[@]}" -smp 2 -m "$mem_mb" \
  -nodefaults -display none -no-reboot -serial "file:$res/console.log" \
  -kernel "$cache/vmlinuz" -initrd "$top/initrd" \
  -append "console=ttyS0 panic=-1 rdinit=/init" \
  -virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$repo,mount_tag=tree,security_model=none,readonly=on,multidevs=remap" \
  -virtfs "local,path=$res,mount_tag=out,security_model=none" </dev/null &
qpid=$!
qrc=0
wait "$qpid" || qrc=$?
qpid=
echo "cgroupvm: the VM ran $((SECONDS - start)) s"
[[ $qrc != 124 ]] || echo "cgroupvm: timed out after $timeout_s s" >&2

cat "$res/guest.log" 2>/dev/null || true
ok=1
for name in plain asan; do
  echo "==== $name build ($name.log)"
  cat "$res/$name.log" 2>/dev/null || echo "(no output)"
  rc=$(cat "$res/$name.rc" 2>/dev/null || echo none)
  if [[ $rc != 0 ]]; then
    echo "cgroupvm: $name: pytest exit code $rc" >&2; ok=0; continue
  fi
  # Exit code 0 with a skip or nothing run is no proof.
  if ! /usr/bin/python3 - "$res/$name.xml" <<'EOF'; then ok=0; fi
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "skipped", "failures", "errors")}
if n["tests"] == 0 or n["skipped"] or n["failures"] or n["errors"]:
    sys.exit(f"cgroupvm: {sys.argv[1]}: {n}: every test must run and pass")
EOF
  if [[ -s $res/$name.left ]]; then
    echo "cgroupvm: $name: cgroups left behind: $(tr '\n' ' ' <"$res/$name.left")" >&2; ok=0
  fi
done
if [[ $ok != 1 ]]; then
  echo "==== the VM's console (last 60 lines of $res/console.log)"
  tail -60 "$res/console.log" 2>/dev/null || true
  echo "cgroupvm: FAILED" >&2
  exit 1
fi
echo "cgroupvm: the cgroup v2 limits passed in the VM, plain and sanitized"
