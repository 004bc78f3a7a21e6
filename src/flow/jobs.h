/* A job's life in one place: the transitions that the API, the scheduler,
 * the launcher, the supervisor, the janitor and the cluster's reaper all
 * make, written once. Read with flow/claim.h (pending -> running).
 *
 *   queued     jobs_enqueue (the API, a schedule's run: jobs_fire, a retry)
 *   running    jobs_claim (flow/claim.h), then jobs_started once its
 *              process runs (jobs_adopted after a restart)
 *   ended      jobs_end: finished, failed, cancelled, lost, timed out;
 *              jobs_retry queues the next attempt of a failed or lost one
 *   cancelled  jobs_cancel (and its family), jobs_cancel_pending
 *   lost       jobs_reaped: its node was declared dead
 *   gone       jobs_prune: history beyond its bounds
 *
 * Each jobs_* transition runs on a store thread, inside the caller's store
 * op (store_submit), and does the whole change with the event that records
 * it, so both commit or neither does. It adds what the loop must learn to a
 * flow_change_t (flow/flow.h), which the caller zeroes at the start of its
 * op (a run the store pool repeats starts afresh) and hands to flow_apply
 * on the loop once the op has committed: that is the only way the job
 * counts, the jobs_queued metric and the launcher's wake-ups change. What
 * else happens on the loop (signalling a process, arming a timer) is the
 * caller's.
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
#include "core/schedule.h"
#include "flow/flow.h"
#include "store/store.h"

/* Fills a job's 0 timeout / retries / backoff with the daemon's defaults,
 * so the policy a job ran under is the one its retries inherit. */
void jobs_resolve(const config_t *cfg, job_t *j);

/* Inserts job (sets id and created_ms) and its job.queued event, stamped
 * with created_ms; the event's data is {project, spider, jobid} plus the
 * members of extra (taken; may be NULL). When job->unique_key is held,
 * nothing is written: SPD_ECONFLICT with job->id the holder's id.
 * c (may be NULL): queued + 1, and dispatch unless the job waits for its
 * not_before. */
int jobs_enqueue(store_t *s, job_t *job, json_t *extra, flow_change_t *c);

/* A job with `after` (the ids of the jobs it waits for) is inserted by
 * jobs_enqueue with this not_before_ms (never due), then settled at once
 * against those that ended already. Each end of a job j (jobs_end,
 * jobs_end_idle, jobs_cancel_pending, jobs_reaped) calls jobs_after_ended,
 * after queueing j's retry if it has one: a waiting job whose upstream
 * jobs all finished is due now (store_job_wake); one whose upstream job
 * failed, was cancelled or lost is cancelled with a job.cancelled event
 * whose reason is "upstream JOBID STATE", and what waits for it in turn the
 * same way. An upstream job's outcome is its newest attempt's: a job
 * waiting for an attempt that failed and was retried waits for the retry,
 * and the end of a retry settles what waits for the attempts before it. */
#define JOBS_AFTER_WAIT_MS INT64_C(253402300799000) /* 9999-12-31 */
int jobs_after_ended(store_t *s, const job_t *j, int64_t now_ms, flow_change_t *c);

/* The job that runs ended job src again (jobs.rerun), to be queued with
 * jobs_enqueue: the same project, spider, version (NULL stays "the
 * latest"), args, settings, meta and priority, with jobid; no parent, schedule,
 * retry lineage or unique key, and the daemon's policy of the day. src's
 * contents are taken (src is left released). 0 or -ENOMEM. */
int jobs_rerun(job_t *src, const char *jobid, job_t *out);

/* Queues the job of schedule sc for its run r, fired at now_ms (why: the
 * reason the run fires late or in another's place, NULL when on time),
 * with a new random job id: the job and its job.queued event (run_id,
 * due_ms, late_ms, reason), and r ended as fired. *job_id (may be NULL) =
 * the job's id. c as jobs_enqueue's. */
int jobs_fire(store_t *s, const schedule_t *sc, const sched_run_t *r, const char *why,
              int64_t now_ms, int64_t *job_id, flow_change_t *c);

/* Cancels the pending entries of project + jobid (state cancelled, end_ms =
 * now_ms), a job.cancelled event each; adds how many to *count and to
 * c->unqueued (c may be NULL). A paused entry ends cancelled too (counted
 * in *count, and in c->finished: it had started). */
int jobs_cancel_pending(store_t *s, const char *project, const char *jobid, int64_t now_ms,
                        int *count, flow_change_t *c);

/* A cancel of project + jobid and its whole family: a parent's cancel is its
 * children's. */
typedef struct jobs_cancel {
  const char *project, *jobid; /* in */
  const char *node;            /* in: this node's name */
  int children_only;           /* in: leave the job itself alone (jobs.cancel_children) */
  int count;          /* out: the job's own pending entries cancelled */
  int family;         /* out: pending descendants cancelled */
  int remote;         /* out: running on other nodes, asked to stop */
  int family_remote;  /* out: running descendants on other nodes, asked to stop */
  int here;           /* out: the job itself running on this node, by the store
                         (claimed: its process may not have been seen yet) */
  job_list_t running; /* out: running descendants on this node, for its launcher
                         (project and jobid filled) */
  flow_change_t change; /* out: the pending entries cancelled (count + family) */
} jobs_cancel_t;

/* Cancels the job's pending entries (unless c->children_only) and every
 * pending descendant, asks the
 * nodes running any of them elsewhere to stop them (store_job_cancel_request),
 * and lists the running descendants of this node, which only its launcher
 * can stop. At most 10,000 descendants are reached by one call. */
int jobs_cancel(store_t *s, jobs_cancel_t *c, int64_t now_ms);

/* A process of j runs: records its pid and the job.started event. The
 * counts do not change: the job left the queue when it was claimed, and
 * running is the launcher's (flow_running). */
int jobs_started(store_t *s, const job_t *j, int pid, int64_t pid_start, int warm);

/* A crawl a previous daemon started was adopted: its pid is written again
 * (one that daemon never recorded is found by its environment), without
 * an event: it started once. */
int jobs_adopted(store_t *s, int64_t id, int pid, int64_t pid_start);

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
  int keep;               /* in: finished_to_keep (0 = no trim) */
  const char *items_path; /* in: the job's local items file, sampled for its
                           * health (NULL = none) */
  /* in (state JOB_PAUSED, flow/pause.h): the crawl's state directory,
   * packed into a shared store for other nodes; NULL = none */
  const char *state_dir;
  int64_t retry_id;       /* out: the retry queued, 0 = none */
  int64_t retry_not_before; /* out: when it may start */
  /* out: the retry queued (jobs_enqueue's); after a trim of the history,
   * the store's count of ended jobs (has_finished). The end itself is
   * counted when it is submitted (jobs_end_submitted). */
  flow_change_t change;
} jobs_end_t;

/* Ends e->job: store_job_finish (the stats get item_fields, the share of
 * sampled items carrying each field, when there is an items file), job.timeout
 * when it timed out, its end event, its health (flow/health.h), and, when
 * it failed or was lost with attempts left, its retry (jobs_retry); then
 * trims the history to e->keep ended jobs. State JOB_PAUSED records a pause
 * instead (jobs_end_paused, flow/pause.h); a job that ran in segments gets
 * its last one. */
int jobs_end(store_t *s, jobs_end_t *e);

/* The loop's side of an end around its commit: a job counts as finished
 * from the moment its end is submitted, so pending + running + finished
 * never dips while it commits (jobs_end_submitted: finished + 1); and no
 * more when its end was not recorded after all: an error, a store closed,
 * an end another node recorded first (jobs_end_dropped: finished - 1). */
flow_change_t jobs_end_submitted(void);
flow_change_t jobs_end_dropped(void);

/* On a shared store: is job id still running on node? A node declared dead
 * has had its jobs ended as lost by another node, which queued their
 * retries: its own late end must not record them twice (*ours = 0). */
int jobs_still_ours(store_t *s, int64_t id, const char *node, int *ours);

/* Queues the next attempt of t, which ended at end_ms: a copy of its
 * template with a new job id (job_retry_jobid), due after the backoff
 * (job_retry_delay_ms with rnd), taking over its unique key, with
 * job.retried and the retry's job.queued. *retry_id = the new job (0 when
 * none could be made: no valid job id, or its key is held elsewhere);
 * not_before (may be NULL) = when it may start; c as jobs_enqueue's. */
int jobs_retry(store_t *s, const job_t *t, int64_t end_ms, int exit_code, int term_signal,
               uint32_t rnd, int64_t *retry_id, int64_t *not_before, flow_change_t *c);

/* `job` ran on a node declared dead and the store ended it as lost
 * (store_nodes_reap). Records its job.lost event and, while attempts
 * remain (at least one retry, whatever max_retries says: the crawl did not
 * fail), queues its retry with no delay (*retry_id, 0 when none).
 * c (may be NULL): finished + 1 (it started, and ended lost), and the
 * retry as jobs_enqueue's. */
int jobs_reaped(store_t *s, const config_t *cfg, job_t *job, int64_t now_ms, uint32_t rnd,
                int64_t *retry_id, flow_change_t *c);

/* Declares dead the nodes (other than cfg's) whose last beat is older than
 * timeout_ms at now_ms (store_nodes_reap) and ends their running jobs as
 * lost, each through jobs_reaped (its retry's jitter rnd + its index).
 * lost (the caller's, appended to) lists them; *retried += the retries
 * queued; c as jobs_reaped's. */
int jobs_reap_nodes(store_t *s, const config_t *cfg, int64_t now_ms, int64_t timeout_ms,
                    uint32_t rnd, job_list_t *lost, int *retried, flow_change_t *c);

/* Deletes ended jobs beyond the history's bounds (store_jobs_prune: at most
 * max, listed in *deleted for their files); c->finished - the started ones
 * among them (finished counts started jobs in a final state). */
int jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules, int keep_default,
               int64_t ended_before_ms, size_t max, job_list_t *deleted, flow_change_t *c);

/* Ends j, running on no node (a backfill's parent: no process of its own),
 * in final state `state` at now_ms, with its end event (data.reason = why
 * when not NULL). c (may be NULL): finished + 1. */
int jobs_end_idle(store_t *s, const job_t *j, job_state_t state, int64_t now_ms, const char *why,
                  flow_change_t *c);

/* Paths of a job's files as Scrapyd lays them out; malloc'd, NULL when the
 * directory setting is empty (or, for items, a URL). */
char *jobs_log_path(const config_t *cfg, const char *project, const char *spider,
                    const char *jobid);
char *jobs_items_path(const config_t *cfg, const char *project, const char *spider,
                      const char *jobid);

#endif
