#!/usr/bin/env bash
# Runs spiderd's benchmarks against a real daemon; prints one line per figure.
# usage: bench/run.sh [path/to/spiderd]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/../build/spiderd}"
exec /usr/bin/python3 "$here/bench.py" --bin "$(readlink -f "$bin")"
