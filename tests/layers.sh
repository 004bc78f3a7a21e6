#!/bin/bash
# Fails when an #include goes the wrong way between spiderd's layers
# (docs/design.md, "Layout"). Arrows point down:
#
#   main.c                                  5
#   api/ (and app.h)   run/   cli/          4   never include each other
#   flow/                                   3
#   store/   config                         2   never include each other
#   core/   http/   net/                    1   never include each other
#   error log clock strbuf fsutil           0   (src/*.[ch])
#
# and besides: a store backend's private header (store/NAME/internal.h) is
# included only inside its folder, store/store_impl.h only inside store/, and
# core/ includes no library of I/O (libuv, libmicrohttpd, a database, curl).
#   tests/layers.sh [SRC_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../src" && pwd)}
cd "$src" || exit 2

layer() { # path relative to src/ -> "name rank"
  case $1 in
  main.c) echo "main 5" ;;
  app.h) echo "api 4" ;;
  api/*) echo "api 4" ;;
  run/*) echo "run 4" ;;
  cli/*) echo "cli 4" ;;
  flow/*) echo "flow 3" ;;
  store/*) echo "store 2" ;;
  config.[ch] | config_*.[ch]) echo "config 2" ;;
  core/*) echo "core 1" ;;
  http/*) echo "http 1" ;;
  net/*) echo "net 1" ;;
  */*) echo "unknown 9" ;;
  *) echo "base 0" ;;
  esac
}

bad=0
complain() {
  echo "layers: $1" >&2
  bad=$((bad + 1))
}

while IFS= read -r f; do
  read -r from rank < <(layer "$f")
  [ "$from" = unknown ] && complain "$f is in no layer (add its folder to tests/layers.sh)"
  while IFS=: read -r line inc; do
    read -r to trank < <(layer "$inc")
    if [ "$trank" -gt "$rank" ]; then
      complain "$f:$line includes \"$inc\": $from must not include $to (a layer above)"
    elif [ "$trank" -eq "$rank" ] && [ "$to" != "$from" ] && [ "$from" != main ]; then
      complain "$f:$line includes \"$inc\": $from and $to are side by side and must not include each other"
    fi
    case $inc in
    store/*/internal.h)
      dir=${inc%/internal.h}
      [ "${f#"$dir"/}" = "$f" ] && complain "$f:$line includes \"$inc\": a backend's private header belongs to its folder"
      ;;
    store/store_impl.h)
      [ "${f#store/}" = "$f" ] && complain "$f:$line includes \"$inc\": the ops table is private to store/"
      ;;
    esac
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
             sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1:\2/')
  if [ "$from" = core ]; then
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(uv|microhttpd|sqlite3|libpq-fe|hiredis/[a-z]+|curl/curl)\.h>' "$f" |
      while IFS= read -r hit; do echo "layers: $f:${hit%%:*}: core/ does no I/O of its own: ${hit#*:}" >&2; echo x; done |
      grep -q x && bad=$((bad + 1))
  fi
done < <(find . -name '*.[ch]' | sed 's#^\./##' | sort)

if [ "$bad" -gt 0 ]; then
  echo "layers: $bad wrong include(s); see docs/design.md, \"Layout\"" >&2
  exit 1
fi
echo "layers: every include goes down"
