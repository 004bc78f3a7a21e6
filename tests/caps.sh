#!/bin/bash
# Fails when a source file or a C function outgrows the caps of
# docs/design.md ("Conventions"): no file under src/ (*.c, *.h, *.lua, *.py)
# over 1,500 lines, no C function over 100.
#
# A function is what follows a signature starting at column 0 (an
# identifier, then a '(' before any '='), from that line to the '}' that
# closes its body; braces in comments, strings and character literals and
# on preprocessor lines are not counted.
#   tests/caps.sh [SRC_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../src" && pwd)}
cd "$src" || exit 2
file_max=1500
func_max=100

bad=0
while IFS= read -r f; do
  n=$(wc -l <"$f")
  if [ "$n" -gt "$file_max" ]; then
    echo "caps: $f: $n lines (at most $file_max)" >&2
    bad=$((bad + 1))
  fi
done < <(find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.lua' -o -name '*.py' \) |
           sed 's#^\./##' | sort)

long=$(find . -type f -name '*.[ch]' | sed 's#^\./##' | sort | xargs awk -v max="$func_max" '
  FNR == 1 { depth = 0; incomment = 0; sig = 0; fn = 0 }
  {
    line = $0
    if (!incomment && line ~ /^[[:space:]]*#/) next
    if (depth == 0 && !incomment && !sig && line ~ /^[A-Za-z_]/ && line ~ /^[^=]*\(/) {
      sig = FNR
      name = line
      sub(/[[:space:]]*\(.*/, "", name)
      sub(/.*[^A-Za-z0-9_]/, "", name)
    }
    n = length(line)
    for (i = 1; i <= n; i++) {
      c = substr(line, i, 1)
      if (incomment) {
        if (c == "*" && substr(line, i + 1, 1) == "/") { incomment = 0; i++ }
        continue
      }
      if (c == "/" && substr(line, i + 1, 1) == "*") { incomment = 1; i++; continue }
      if (c == "/" && substr(line, i + 1, 1) == "/") break
      if (c == "\"" || c == "\047") {
        for (i++; i <= n; i++) {
          d = substr(line, i, 1)
          if (d == "\\") i++
          else if (d == c) break
        }
        continue
      }
      if (c == "{") {
        if (depth == 0) { fn = sig; fname = name }
        depth++
      } else if (c == "}") {
        depth--
        if (depth == 0) {
          if (fn && FNR - fn + 1 > max)
            printf "caps: %s:%d: %s is %d lines (at most %d)\n",
                   FILENAME, fn, fname, FNR - fn + 1, max
          fn = 0
          sig = 0
        }
      } else if (c == ";" && depth == 0) {
        sig = 0
      }
    }
  }')
if [ -n "$long" ]; then
  echo "$long" >&2
  bad=$((bad + $(echo "$long" | wc -l)))
fi

if [ "$bad" -gt 0 ]; then
  echo "caps: $bad file(s) or function(s) over the caps; see docs/design.md, \"Conventions\"" >&2
  exit 1
fi
echo "caps: every file within $file_max lines, every function within $func_max"
