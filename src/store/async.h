/* Running store calls off the loop thread, with group commit.
 *
 * A store_pool owns a writer thread and a reader thread, each with its own
 * store_t connection. Writes are drained in batches: every write queued when
 * the writer wakes runs inside one transaction, each in its own savepoint, so
 * one failed op is rolled back alone and one COMMIT serves the batch. Reads
 * run on the reader connection outside any explicit transaction.
 *
 * done callbacks run on the loop thread, in submission order per thread,
 * after the batch holding the op has committed (or failed). If COMMIT fails,
 * every op of the batch reports SPD_ESTORE. A done callback never runs when
 * store_submit itself failed.
 *
 * A write whose fn returns -EAGAIN (PostgreSQL: a deadlock or a
 * serialization failure with another transaction) is rolled back and run
 * again in a transaction of its own, a few times, after a short random
 * pause on the writer thread; its callback sees -EAGAIN only when every
 * run met one. So a write fn must be safe to run again after a rollback:
 * it starts each run from its inputs alone (see async.c's audit).
 *
 * Ownership: the pool never frees `arg`; the done callback owns it again.
 */
#ifndef SPIDERD_STORE_ASYNC_H
#define SPIDERD_STORE_ASYNC_H

#include <stdint.h>
#include <uv.h>

#include "store/store.h"

typedef struct store_pool store_pool_t;

/* Runs on a store thread; returns 0 or a negative code. */
typedef int (*store_fn)(store_t *s, void *arg);
/* Runs on the loop thread with what fn returned (or SPD_ESTORE). */
typedef void (*store_done_cb)(void *arg, int rc);

enum { STORE_READ = 0, STORE_WRITE = 1 };

/* Opens two connections to url and starts the threads. */
int store_pool_start(uv_loop_t *loop, const char *url, store_pool_t **out,
                     char *err, size_t errlen);

/* Queues fn(store, arg) on the writer (STORE_WRITE) or reader (STORE_READ).
 * Returns 0, or SPD_ESHUTDOWN once store_pool_stop has begun. */
int store_submit(store_pool_t *p, int kind, store_fn fn, void *arg,
                 store_done_cb done);
/* store_submit on behalf of someone: while fn runs, every event it records
 * carries data.actor and data.addr (store_set_actor), the audit trail.
 * Both are copied (cut at STORE_ACTOR_MAX / STORE_ADDR_MAX bytes); NULL or
 * "" actor = nobody. */
int store_submit_as(store_pool_t *p, int kind, store_fn fn, void *arg, store_done_cb done,
                    const char *actor, const char *addr);

/* Runs every op already queued, delivers their callbacks, joins the threads,
 * closes the connections and the uv handles, and frees the pool once the
 * handles are closed (the loop must run for that). */
void store_pool_stop(store_pool_t *p);

/* store_shared() of the pool's store (fixed for its life). */
int store_pool_shared(const store_pool_t *p);

/* How many write runs were retries after -EAGAIN, since the start. */
uint64_t store_pool_retries(const store_pool_t *p);

/* Times every op from submit to its end on the store thread into
 * m->store_op (metrics.h). Call before the first submit; m outlives p. */
struct metrics;
void store_pool_set_metrics(store_pool_t *p, struct metrics *m);

#endif
