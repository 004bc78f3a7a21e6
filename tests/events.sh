#!/bin/bash
# Fails when src/ records an event whose type is not in the one list of event
# types, EVENT_TYPES in src/core/event.h (the console, the OpenAPI document
# and docs/api.md take theirs from it). A string literal "family.what" is
# taken for an event type when
#   - its family is one of the list's (job, run, schedule, queue, ...) and
#     "what" is not a file suffix ("schedule.json", "run.py"), or
#   - it is on a line that calls a function named *event*, *audit* or
#     *refuse* (add_event, store_event_add, auth_audit, ...), or assigns
#     .type, whatever its family: a new family is caught there.
# Code that names its types by the list's constants (EV_JOB_QUEUED) has
# nothing for this script to find: the compiler checks those.
#   tests/events.sh [SRC_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../src" && pwd)}
cd "$src" || exit 2

list=$(sed -nE 's/^[[:space:]]*X\([A-Z_]+, "([a-z]+\.[a-z_]+)",.*/\1/p' core/event.h | sort -u)
if [ -z "$list" ]; then
  echo "events: no EVENT_TYPES entries found in core/event.h" >&2
  exit 2
fi
families=$(sed 's/\..*//' <<<"$list" | sort -u | paste -sd'|')
suffixes='json|py|conf|cfg|ini|lua|h|c|txt|egg|html|js|css|md|log|sh|sql|pem|sock|pid|tmp|db|gz|zip'

bad=0 seen=0
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  adder=0
  grep -qE '\b[a-z_]*(event|audit|refuse)[a-z_]*[[:space:]]*\(|\.type[[:space:]]*=' <<<"$text" && adder=1
  while IFS= read -r lit; do
    name=${lit:1:-1}
    fam=${name%%.*}
    what=${name#*.}
    if [ "$adder" = 0 ]; then
      grep -qxE "$families" <<<"$fam" || continue
      grep -qxE "$suffixes" <<<"$what" && continue
    fi
    seen=$((seen + 1))
    if ! grep -qxF "$name" <<<"$list"; then
      echo "events: $file:$line: \"$name\" is not in EVENT_TYPES (src/core/event.h)" >&2
      bad=$((bad + 1))
    fi
  done < <(grep -oE "[\"'][a-z]+\.[a-z_]+[\"']" <<<"$text")
done < <(find . \( -name '*.[ch]' -o -name '*.lua' \) ! -path ./core/event.h | sed 's#^\./##' | sort |
           xargs grep -nE "[\"'][a-z]+\.[a-z_]+[\"']" /dev/null | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|//|/\*|#[[:space:]]*include)')

if [ "$bad" -gt 0 ]; then
  echo "events: $bad event type(s) written in src/ but not listed; add them to EVENT_TYPES" >&2
  exit 1
fi
echo "events: the $seen event type literal(s) in src/ are all in EVENT_TYPES"
