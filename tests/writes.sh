#!/bin/bash
# Fails when a store function that changes a job's state, or writes a
# schedule, a user, a token or a project's versions, is called from outside
# flow/ (docs/design.md, "Layout": every state change in one place; api/
# and run/ call flow/, neither writes those rows itself). Allowed callers:
# flow/, store/ itself, and main.c (start-up). Each call elsewhere is
# printed as file:line.
#
# The list below is taken from src/store/store.h, function by function, by
# what its comment says it writes; reads, locks, heartbeats, the janitor's
# deletes of ended history, events, queues and node beats are not in it.
#   tests/writes.sh [SRC_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../src" && pwd)}
cd "$src" || exit 2

# function            what it changes (store.h)
guarded='
store_job_insert                   a new job, pending (or in the state given)
store_job_claim                    pending jobs become running on a node
store_job_claim_skip               pending jobs become running, past those at their limit
store_job_started                  a running job gets its process
store_job_requeue                  a running job that never got a process goes back to pending
store_job_finish                   a job ends (final state, exit, stats)
store_job_cancel_pending           pending jobs become cancelled
store_job_cancel_request           a running job is asked to stop
store_job_set_meta                 the meta of a job is replaced
store_job_set_history              the state or note of an ended job is corrected
store_nodes_reap                   running jobs of dead nodes end lost
store_schedule_insert              a new schedule
store_schedule_update              every field of a schedule
store_schedule_delete              a schedule and its runs go
store_runs_add                     a schedule gets upcoming runs and its horizon
store_runs_clear                   a schedule loses its upcoming runs (update, pause, resume)
store_run_defer                    an upcoming run notes why it waits
store_run_end                      a run ends (fired, missed, skipped); the schedule'"'"'s last due time
store_principal_put                a user or token is created or replaced
store_principal_delete             a user or token is deleted
store_principal_put_keep_admin     a user or token is created or replaced, unless it is the last admin
store_principal_delete_keep_admin  a user or token is deleted, unless it is the last admin
store_accounts_put                 the accounts, their projects, users, tokens and limits
store_egg_put                      a project'"'"'s version is stored
store_egg_delete                   a project'"'"'s version, or all of them, is deleted
store_job_set_segments             a paused job'"'"'s runs are recorded
store_job_resume                   a paused job becomes pending again
store_job_state_put                a paused crawl'"'"'s state is stored
store_job_state_delete             a paused crawl'"'"'s state goes
'
names=$(awk 'NF {print $1}' <<<"$guarded" | paste -sd'|')

allowed() {
  case $1 in
  flow/* | store/* | main.c) return 0 ;;
  *) return 1 ;;
  esac
}

bad=0
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  allowed "$file" && continue
  # comments name these functions too: a comment's line, or its tail
  grep -qE '^[[:space:]]*(\*|//|/\*)' <<<"$text" && continue
  text=$(sed -E 's#/\*.*(\*/|$)##; s#//.*##' <<<"$text")
  for fn in $(grep -oE "\\b($names)\\b" <<<"$text" | sort -u); do
    what=$(awk -v f="$fn" '$1 == f {$1 = ""; sub(/^ +/, ""); print}' <<<"$guarded")
    echo "writes: $file:$line: $fn ($what) may be called only from flow/" >&2
    bad=$((bad + 1))
  done
done < <(find . -name '*.[ch]' | sed 's#^\./##' | sort | xargs grep -nE "\\b($names)\\b" /dev/null)

if [ "$bad" -gt 0 ]; then
  echo "writes: $bad call(s) outside flow/ change state that flow/ owns; see docs/design.md, \"Layout\"" >&2
  exit 1
fi
echo "writes: every state-changing store call is in flow/, store/ or main.c"
