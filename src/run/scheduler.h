/* The scheduler: turns schedules into jobs at their due times.
 *
 * Every node runs it; only the holder of the store's "scheduler" lease fires.
 * Each tick is one store op (one transaction) that takes or renews the
 * lease and, while it holds it, materialises upcoming runs, fires due ones
 * (queueing jobs), and applies the overlap and missed-run policies. Because
 * the lease is taken inside the same transaction as the work, a node whose
 * lease has passed to another (paused, partitioned, or slow) cannot fire:
 * its next transaction finds the lease held by someone else. A run is a
 * unique (schedule, due time) row that ends once, so no due time fires
 * twice whoever fires it.
 *
 * The tick timer is armed for the next run's fire time (so a run is queued
 * within milliseconds of it), and at least every second so the lease is
 * renewed and queued runs are looked at again.
 *
 * A run fires through flow/jobs.h (jobs_fire); what a tick changed reaches
 * the launcher and the job counts through flow (flow_apply, flow_signal).
 *
 * Ownership: borrows cfg, store and flow for its whole life.
 * Runs on the loop thread only.
 */
#ifndef SPIDERD_RUN_SCHEDULER_H
#define SPIDERD_RUN_SCHEDULER_H

#include <uv.h>

#include "config.h"
#include "flow/flow.h"
#include "store/async.h"

typedef struct scheduler scheduler_t;

int scheduler_init(scheduler_t **out, uv_loop_t *loop, const config_t *cfg,
                   store_pool_t *store, const flow_hooks_t *flow);

/* Look again soon: a schedule changed, or a job of a schedule ended. */
void scheduler_kick(scheduler_t *s);


/* Stops ticking, gives the lease up (so another node takes over at once),
 * then calls done(ud) once nothing is in flight. A second stop calls its
 * own done once the first is complete (the first's done is then dropped
 * if it had not run yet). */
void scheduler_stop(scheduler_t *s, void (*done)(void *ud), void *ud);

/* Frees it after scheduler_stop completed. */
void scheduler_free(scheduler_t *s);

/* Observes each fired run's lag (queued time - due time) and counts the
 * jobs it queues into m (metrics.h), which outlives the scheduler. */
struct metrics;
void scheduler_set_metrics(scheduler_t *s, struct metrics *m);

#endif
