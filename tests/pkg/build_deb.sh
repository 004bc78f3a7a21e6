#!/bin/bash
# Builds spiderd's .deb into OUT (default build/deb): the console with
# `make ui`, then dpkg-buildpackage -us -uc -b on a copy of the tree in
# OUT/src, so its outputs (which land in the parent directory) stay in OUT.
#   tests/pkg/build_deb.sh [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-$root/build/deb}")
cd "$root"

need=()
for p in debhelper dpkg-dev fakeroot; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

make ui
rm -rf "$out"
mkdir -p "$out/src"
# the sources as they are (committed or not), without builds or node_modules
tar -C "$root" --exclude=./build --exclude='./build-*' --exclude=./ui/node_modules \
  --exclude=.git --exclude=__pycache__ --exclude=.pytest_cache -cf - . | tar -C "$out/src" -xf -
cd "$out/src"
dpkg-buildpackage -us -uc -b -j"$(nproc)"
ls -1 "$out"/*.deb
