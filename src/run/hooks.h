/* Lifecycle hooks: local commands run when a job is queued, starts and
 * ends ([hooks] in the configuration; docs/configuration.md).
 *
 * Every node follows the store's event log (as the webhook deliverer and
 * the event streams do), so it sees every node's job events, and runs a
 * hook only where it belongs: the events of a job that ran on a node
 * (job.started, job.finished, job.failed, job.cancelled of a running job)
 * run there; the events no node ran (job.queued, job.cancelled of a
 * pending job, job.lost, an end with no start) run on the one node that
 * holds the store's "hooks" lease. A node follows from the newest event
 * when it starts: history is not replayed, and an event recorded while no
 * node followed runs no hook (at most once, never twice).
 *
 * A hook is `/bin/sh -c COMMAND` in its own process group, with the event
 * and the job as JSON on its standard input (the body a webhook receives)
 * and SPIDERD_EVENT, SPIDERD_HOOK, SPIDERD_PROJECT, SPIDERD_SPIDER,
 * SPIDERD_JOB and SPIDERD_NODE in its environment. At most [hooks]
 * concurrency run at once, the rest wait in event order; one that runs past
 * [hooks] timeout is killed (its whole group). Failures are logged and
 * counted (spiderd_hooks_total), never more: a hook cannot fail a job.
 *
 * Ownership: borrows cfg, store and metrics for its whole life. Loop thread
 * only.
 */
#ifndef SPIDERD_RUN_HOOKS_H
#define SPIDERD_RUN_HOOKS_H

#include <uv.h>

#include "config.h"
#include "metrics.h"
#include "store/async.h"

typedef struct hooks hooks_t;

/* Starts following the event log when [hooks] names a command; *out is
 * NULL (and every function below a no-op on it) when none is set. 0 or
 * -ENOMEM. */
int hooks_init(hooks_t **out, uv_loop_t *loop, const config_t *cfg, store_pool_t *store,
               metrics_t *metrics);

/* New events were appended: look now instead of at the next tick. */
void hooks_kick(hooks_t *h);

/* Reads the events recorded until now, lets the hooks they start and those
 * running finish within [hooks] timeout, kills what still runs after
 * [spiderd] shutdown_grace, then calls done(ud). */
void hooks_stop(hooks_t *h, void (*done)(void *ud), void *ud);

/* Frees it after hooks_stop completed (the loop must run to close its
 * handles). */
void hooks_free(hooks_t *h);

/* ---- pure helpers (exported for their tests) ---- */

/* The [hooks] key a hook index has ("job_queued", ...): METRICS_HOOK_*. */
const char *hooks_name(int hook);

/* Does the hook (METRICS_HOOK_*) run on an event of `type`? job_ended runs
 * on every final state: job.finished, job.failed, job.cancelled, job.lost. */
int hooks_wants(int hook, const char *type);

#endif
