/* A scheduler tick's store side: one transaction that takes or renews the
 * "scheduler" lease and, while it holds it, materialises each schedule's
 * upcoming runs (and the missed ones), fires the due ones through jobs_fire
 * (flow/jobs.h) and applies the overlap and missed-run policies, with their
 * run.* events; a run due in one of its schedule's calendars is skipped
 * (flow/calendars.h), and the backfills' runs are released
 * (backfills_tick, flow/backfill.h). run/scheduler.c keeps the loop side: the timer, the lease's
 * tenure, applying what a tick changed (flow_apply, flow_signal).
 *
 * Store thread only (a store op of its own). Lists filled here are the
 * caller's (job_list_release, free(lags)). Errors as store.h's;
 * SPD_EFENCED never escapes (the tick then reports leader = 0).
 */
#ifndef SPIDERD_FLOW_TICK_H
#define SPIDERD_FLOW_TICK_H

#include <stddef.h>
#include <stdint.h>

#include "flow/flow.h"
#include "store/store.h"

typedef struct schedules_tick {
  const char *node;  /* in: this node's name (the lease holder) */
  int64_t ttl_ms;    /* in: the lease's time to live */
  int64_t span_ms;   /* in: how far ahead runs are materialised */
  int64_t grace_ms;  /* in: a run later than this is missed */
  int want_lags;     /* in: keep each fired run's lag in lags */
  int release;       /* in: give the lease up instead of ticking */
  int64_t token;     /* in: for release; out: this tenure's token */
  int leader;        /* out */
  int64_t next_ms;   /* out: the earliest upcoming fire time, 0 = none */
  flow_change_t change; /* out: jobs queued, and pending ones the replace policy cancelled */
  double *lags;      /* out: each fired run's lag (s), observed once committed */
  size_t nlags, clags;
  job_list_t cancel; /* out: running jobs the replace policy stops */
} schedules_tick_t;

/* The store op (store_submit's fn, arg = a schedules_tick_t). A run the
 * store pool repeats after a collision starts afresh. */
int schedules_tick(store_t *s, void *arg);

#endif
