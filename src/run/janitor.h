/* The janitor: keeps the history within its configured bounds.
 *
 * Ended jobs beyond a project/spider's count (history_per_spider, or its
 * [retention] entry) or older than its age (history_days, or [retention])
 * are deleted from the store, with their log and local items files; events
 * and ended schedule runs older than events_days are deleted too.
 *
 * A pass runs every janitor_interval seconds, and a few seconds after
 * janitor_kick() (debounced: a burst of job ends makes one pass). A pass is
 * a series of store writes of at most JANITOR_BATCH rows each, so a first
 * pass over a huge history never holds the writer for long; files are
 * removed on libuv's thread pool once the rows are gone.
 *
 * When nodes share a store, only the holder of the store lease "janitor"
 * deletes rows (taken inside each batch's own transaction, so a node that
 * lost the lease cannot delete). Files are removed by the node that deleted
 * the rows, where they exist.
 *
 * Jobs go through flow/jobs.h (jobs_prune), and what a batch changed
 * reaches the job counts through flow_apply.
 *
 * Ownership: borrows cfg, store and flow for its whole life. Runs on
 * the loop thread only.
 */
#ifndef SPIDERD_RUN_JANITOR_H
#define SPIDERD_RUN_JANITOR_H

#include <uv.h>

#include "config.h"
#include "flow/flow.h"
#include "store/async.h"

/* Rows deleted per store op. */
#define JANITOR_BATCH 500

typedef struct janitor janitor_t;

/* Starts the timer (when anything is to be bounded at all). 0 or -ENOMEM,
 * or a libuv error. */
int janitor_init(janitor_t **out, uv_loop_t *loop, const config_t *cfg,
                 store_pool_t *store, const flow_hooks_t *flow);

/* Jobs ended: prune soon (within a few seconds), not at once. */
void janitor_kick(janitor_t *j);

/* Stops passes; done(ud) runs once no store op or file removal is in
 * flight (a batch under way finishes, later ones are not started). */
void janitor_stop(janitor_t *j, void (*done)(void *ud), void *ud);

/* The history it deletes loses its objects in the object store too. */
struct objstore;
void janitor_set_objstore(janitor_t *j, struct objstore *o);

/* Frees it after janitor_stop completed (its handle closes async). */
void janitor_free(janitor_t *j);

#endif
