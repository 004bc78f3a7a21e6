#!/usr/bin/env bash
# Runs spiderd's benchmarks against a real daemon; prints one line per figure.
# usage: bench/run.sh [path/to/spiderd]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(readlink -f "${1:-$here/../build/spiderd}")"
/usr/bin/python3 "$here/bench.py" --bin "$bin"
# The scheduler at 10,000 active schedules (~7 minutes).
/usr/bin/python3 "$here/sched_bench.py" --bin "$bin"
