/* A job leaves the queue: this node claims pending jobs for its free slots
 * (pending -> running), and gives back the ones it cannot start after all
 * (running -> pending). The rest of a job's life is flow/jobs.h's.
 *
 * Both run on a store thread inside the caller's op (the launcher's), and
 * fill a flow_change_t the caller applies on the loop (flow/flow.h).
 *
 * Ownership: the claimed jobs are the caller's (job_list_release).
 */
#ifndef SPIDERD_FLOW_CLAIM_H
#define SPIDERD_FLOW_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "core/job.h"
#include "flow/flow.h"
#include "store/store.h"

typedef struct jobs_claim {
  const config_t *cfg; /* in: [concurrency] limits, eggs_dir, job defaults */
  const char *node;    /* in: this node's name */
  size_t max;          /* in: free slots */
  int64_t now;         /* in: wall ms; jobs due by then */
  int shared;          /* in: a shared store: eggs missing here are copied from it */
  job_list_t jobs;     /* out: claimed, their policy resolved (jobs_resolve) */
  int64_t next_due;    /* out: a short claim: the earliest delayed job, 0 = none */
  int limited;         /* out: claimed jobs given back: their limit was full */
  int capped;          /* out: an account caps its running jobs: pending jobs may
                          wait for it, which no counter shows (the launcher then
                          claims at every free slot, as under [concurrency]) */
  /* in: the memory this node has for more crawls, in bytes (run/memory.h);
   * < 0 = not counted. out: mem_deferred, the claimed jobs given back because
   * their expected memory (flow/memfit.h) did not fit, mem_wanted the
   * smallest of those; each job kept has its mem_expected set. */
  int64_t mem_budget;
  int mem_deferred;
  int64_t mem_wanted;
  /* out: unqueued = the jobs claimed; a short claim (fewer than max: none
   * due is left) reads the store's pending count too (has_pending: the
   * delayed ones, 0 when next_due is 0). Not applied when the caller gives
   * the jobs back at once (jobs_requeue). */
  flow_change_t change;
} jobs_claim_t;

/* Claims up to c->max pending jobs due by c->now for c->node, in priority
 * order. Under [concurrency] limits, under the store's claim lock (held to
 * the commit, so every node's claims take turns): counts what each limit
 * has running, skips the pending jobs of limits at their maximum, and gives
 * back any claimed job that would go over one; every node and every restart
 * counts the same rows, so a limit holds across the cluster. On a shared
 * store the eggs of claimed jobs that are not in eggs_dir yet are copied
 * from the store first. Accounts' caps on running jobs hold the same way
 * (flow/claim_accounts.h). Resets its outputs: a run the store pool repeats
 * from the store first. With a memory budget, jobs are kept in priority
 * order while their expected memory fits in what is left of it; the others
 * go back to pending, for a node where they fit or a later claim (a job
 * that fits nowhere waits). Resets its outputs: a run the store pool repeats
 * starts afresh. */
int jobs_claim(store_t *s, jobs_claim_t *c);

/* Puts claimed jobs that never ran back to pending (the daemon began to
 * stop or to drain as they were claimed): for another node or the next
 * start. A job gone meanwhile is skipped. The counts do not change: the
 * claim that took them was not applied. */
int jobs_requeue(store_t *s, const job_list_t *jobs);

#endif
