/* A job's life in one place: the transitions that the API, the scheduler,
 * the supervisor and the cluster's reaper all make, written once.
 *
 * Each jobs_* transition runs on a store thread, inside the caller's store
 * op (store_submit), and does the whole change with the event that records
 * it, so both commit or neither does: queued (job.queued), started
 * (job.started), cancelled (job.cancelled), ended (job.finished, job.failed,
 * job.cancelled, job.lost, job.timeout) and retried (job.retried and the
 * retry's job.queued). What happens on the loop afterwards (waking the
 * launcher, signalling a process) is the caller's, through flow/flow.h.
 *
 * Ownership: inputs are borrowed; lists filled here are the caller's
 * (job_list_release). Errors as store.h's.
 */
#ifndef SPIDERD_FLOW_JOBS_H
#define SPIDERD_FLOW_JOBS_H

#include <jansson.h>
#include <stdint.h>

#include "config.h"
#include "core/job.h"
#include "store/store.h"

/* Fills a job's 0 timeout / retries / backoff with the daemon's defaults,
 * so the policy a job ran under is the one its retries inherit. */
void jobs_resolve(const config_t *cfg, job_t *j);

/* Inserts job (sets id and created_ms) and its job.queued event, stamped
 * with created_ms; the event's data is {project, spider, jobid} plus the
 * members of extra (taken; may be NULL). When job->unique_key is held,
 * nothing is written: SPD_ECONFLICT with job->id the holder's id. */
int jobs_enqueue(store_t *s, job_t *job, json_t *extra);

/* Cancels the pending entries of project + jobid (state cancelled, end_ms =
 * now_ms), a job.cancelled event each; adds how many to *count. */
int jobs_cancel_pending(store_t *s, const char *project, const char *jobid, int64_t now_ms,
                        int *count);

/* A cancel of project + jobid and its whole family: a parent's cancel is its
 * children's. */
typedef struct jobs_cancel {
  const char *project, *jobid; /* in */
  const char *node;            /* in: this node's name */
  int count;          /* out: the job's own pending entries cancelled */
  int family;         /* out: pending descendants cancelled */
  int remote;         /* out: running on other nodes, asked to stop */
  int here;           /* out: the job itself running on this node, by the store
                         (claimed: its process may not have been seen yet) */
  job_list_t running; /* out: running descendants on this node, for its launcher
                         (project and jobid filled) */
} jobs_cancel_t;

/* Cancels the job's pending entries and every pending descendant, asks the
 * nodes running any of them elsewhere to stop them (store_job_cancel_request),
 * and lists the running descendants of this node, which only its launcher
 * can stop. At most 10,000 descendants are reached by one call. */
int jobs_cancel(store_t *s, jobs_cancel_t *c, int64_t now_ms);

/* A process of j runs: records its pid and the job.started event. */
int jobs_started(store_t *s, const job_t *j, int pid, int64_t pid_start, int warm);

/* How a running job ended. */
typedef struct jobs_end {
  const job_t *job;       /* in: the attempt that ended (its policy resolved) */
  job_state_t state;      /* in: a final state */
  int64_t end_ms;
  int exit_code;          /* -1 when none */
  int term_signal;        /* 0 when none */
  json_t *stats;          /* in: the crawl's stats (borrowed; may be NULL) */
  const char *end_reason; /* in: "timeout", "heartbeat" or NULL */
  uint32_t rnd;           /* in: the retry's jitter */
  int notify;             /* in: tell other nodes a slot is free ([concurrency]) */
  int64_t retry_id;       /* out: the retry queued, 0 = none */
  int64_t retry_not_before; /* out: when it may start */
} jobs_end_t;

/* Ends e->job: store_job_finish, job.timeout when it timed out, its end
 * event, and, when it failed or was lost with attempts left, its retry
 * (jobs_retry). */
int jobs_end(store_t *s, jobs_end_t *e);

/* Queues the next attempt of t, which ended at end_ms: a copy of its
 * template with a new job id (job_retry_jobid), due after the backoff
 * (job_retry_delay_ms with rnd), taking over its unique key, with
 * job.retried and the retry's job.queued. *retry_id = the new job (0 when
 * none could be made: no valid job id, or its key is held elsewhere);
 * not_before (may be NULL) = when it may start. */
int jobs_retry(store_t *s, const job_t *t, int64_t end_ms, int exit_code, int term_signal,
               uint32_t rnd, int64_t *retry_id, int64_t *not_before);

/* `job` ran on a node declared dead and the store ended it as lost
 * (store_nodes_reap). Records its job.lost event and, while attempts
 * remain (at least one retry, whatever max_retries says: the crawl did not
 * fail), queues its retry with no delay (*retry_id, 0 when none). */
int jobs_reaped(store_t *s, const config_t *cfg, job_t *job, int64_t now_ms, uint32_t rnd,
                int64_t *retry_id);

/* Paths of a job's files as Scrapyd lays them out; malloc'd, NULL when the
 * directory setting is empty (or, for items, a URL). */
char *jobs_log_path(const config_t *cfg, const char *project, const char *spider,
                    const char *jobid);
char *jobs_items_path(const config_t *cfg, const char *project, const char *spider,
                      const char *jobid);

#endif
