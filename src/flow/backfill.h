/* Backfills: a schedule run again over a past window. A backfill is one
 * parent job (running, on no node: it runs no process of its own) whose
 * children are the slots' runs; the scheduler's tick releases them, at most
 * max_running live at once, as earlier ones end, and ends the parent when
 * the last one has ended (finished, or failed when any child failed or was
 * lost). Cancelling the parent (jobs.cancel, backfills.cancel) cancels its
 * live children; a paused backfill releases no new child.
 *
 * Each child is the schedule's job with the spider argument
 * BACKFILL_TIME_ARG (its slot's due time, ISO 8601 in the schedule's zone;
 * the launcher hands it to the crawl as SCHEDULED_TIME) and, when asked,
 * slot_arg (the same time, or its date).
 *
 * Kept in the store's key/value table, the same on every backend: the
 * record "backfill.<id>" (written when it starts, then by the tick alone),
 * its pause flag "backfill.<id>.paused" (by pause and resume alone), the
 * list of backfills "backfills" (by backfills_start alone, under the claim
 * lock on a shared store) and, per schedule, the slots backfills ran
 * "backfill.slots.<schedule id>" (by the tick alone), so only-missing
 * backfills leave them out as they leave out the runs the schedule fired.
 *
 * Store thread only, inside the caller's store op. Errors as store.h's, and
 * SPD_ENOSCHEDULE, SPD_ENOJOB (no such backfill), SPD_EBADPARAM (the
 * reason in err). Ownership: inputs borrowed; json_t results new references.
 */
#ifndef SPIDERD_FLOW_BACKFILL_H
#define SPIDERD_FLOW_BACKFILL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "flow/flow.h"
#include "store/store.h"

#define BACKFILL_SLOTS_MAX 10000
#define BACKFILL_TIME_ARG "_scheduled_time"

typedef struct backfill_opts {
  int64_t from_ms, to_ms;  /* the window, both included (to: at most now) */
  int redo_failed;         /* also slots whose run failed or was lost */
  int newest_first;
  int max_running;         /* >= 1 */
  int dry_run;             /* answer the slots, start nothing */
  const char *slot_arg;    /* NULL = none */
  int slot_date;           /* slot_arg gets "YYYY-MM-DD" rather than the time */
} backfill_opts_t;

/* Plans (and unless dry_run starts) a backfill of schedule key, visible
 * with projects. *out: {"dry_run", "slots": [{due, due_ms}], "left_out":
 * {"ran", "calendar"}} and, when started, the backfill (backfills_get's). */
int backfills_start(store_t *s, const char *key, const char *projects, const backfill_opts_t *o,
                    int64_t now_ms, json_t **out, char *err, size_t len, flow_change_t *ch);

/* The backfill whose parent job is id, with its children's counts by
 * state. A read. */
int backfills_get(store_t *s, int64_t id, const char *projects, json_t **out, char *err,
                  size_t len);
/* The latest backfills (the newest first). A read. */
int backfills_list(store_t *s, const char *projects, json_t **out);
/* Pauses (1) or resumes (0) it: while paused no child is released. */
int backfills_pause(store_t *s, int64_t id, const char *projects, int pause, json_t **out,
                    char *err, size_t len, flow_change_t *ch);
/* The parent job of backfill id into *parent (job_release). */
int backfills_parent(store_t *s, int64_t id, const char *projects, job_t *parent, char *err,
                     size_t len);

/* The tick's part: releases children of every running backfill, cancels
 * the live ones of a cancelled one, ends the finished ones. node: this
 * node; running children of a cancelled backfill on this node are appended
 * to cancel (the launcher stops them). */
int backfills_tick(store_t *s, const char *node, int64_t now_ms, flow_change_t *ch,
                   job_list_t *cancel);

#endif
