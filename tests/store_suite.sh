#!/bin/bash
# Runs the store contract tests (plain and sanitized builds), the
# integration suite, and the cluster tests with the sanitized daemon,
# against a throwaway shared store.
#   tests/store_suite.sh postgresql|redis BUILD ASAN_BUILD [pytest args...]
# The server (tests/pgserver.sh or tests/redisserver.sh) lives in a
# temporary directory and is stopped however the run ends.
set -uo pipefail
kind=${1:?postgresql|redis}
build=$(cd "${2:?build dir}" && pwd)
asan=$(cd "${3:?sanitized build dir}" && pwd)
shift 3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "/tmp/spiderd-test-$kind-XXXXXX")
case $kind in
postgresql) server=$here/pgserver.sh; param=schema ;;
redis) server=$here/redisserver.sh; param=prefix ;;
*) echo "unknown store kind '$kind'" >&2; exit 2 ;;
esac
chmod 755 "$dir"
url=$("$server" start "$dir") || exit 1
trap '"$server" stop "$dir"' EXIT
tests="test_store test_store_jobmeta test_store_auth test_store_sched test_store_janitor test_store_queue test_store_async test_store_retry test_store_nodes test_store_console test_flow test_scheduler test_cluster test_janitor test_launcher test_supervise test_multiproc"
# The plain and the sanitized build's runs side by side (each test names its
# own schemas or prefixes): they mostly wait on the server.
contract() {
  local b=$1 tag=$2 t
  for t in $tests; do
    if ! SPIDERD_TEST_STORE_URL="$url?$param=t{}" "$b/$t" >"$dir/$t.$tag.out" 2>&1; then
      echo "$t ($b) failed on $kind:"; tail -40 "$dir/$t.$tag.out"; return 1
    fi
  done
}
contract "$build" plain & plain=$!
contract "$asan" asan & sanitized=$!
wait $plain || { wait $sanitized; exit 1; }
wait $sanitized || exit 1
echo "store contract tests: passed on $kind (plain and sanitized)"
cd "$here/integration" || exit 1
env SPIDERD_BIN="$build/spiderd" SPIDERD_TEST_STORE_URL="$url?$param={}" \
  /usr/bin/python3 -m pytest -q -x -p no:cacheprovider "$@" || exit 1
# The cluster tests once more with the sanitized daemon: the code only a
# shared store runs (nodes, eggs, proxies, notices) under ASan + UBSan.
env SPIDERD_BIN="$asan/spiderd" SPIDERD_SANITIZED=1 SPIDERD_TEST_STORE_URL="$url?$param={}" \
  /usr/bin/python3 -m pytest -q -x -p no:cacheprovider test_cluster.py
