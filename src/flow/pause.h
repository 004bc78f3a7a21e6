/* Pausing and resuming a job: a running crawl stops with its state kept
 * (Scrapy's JOBDIR, or a resumable command's state directory), and runs on
 * later, on any node, from where it stopped. Read with flow/jobs.h.
 *
 *   running -> paused    jobs_pause finds it (the launcher of its node
 *                        stops it gracefully); its end is recorded by
 *                        jobs_end with state JOB_PAUSED: a segment, no retry
 *   paused  -> pending   jobs_resume: claimed again like any queued job
 *   paused  -> cancelled jobs_cancel_pending ends it (its state goes)
 *
 * Each run of its process is one segment of the job's history: {node,
 * started, ended, items, reason}, where reason is "paused" or the state
 * the job ended in.
 *
 * Ownership: inputs are borrowed; outputs filled here are the caller's
 * (job_release). Errors as store.h's, with a person's reason in why.
 */
#ifndef SPIDERD_FLOW_PAUSE_H
#define SPIDERD_FLOW_PAUSE_H

#include <jansson.h>
#include <stdint.h>

#include "core/job.h"
#include "flow/flow.h"
#include "store/store.h"

/* A pause or resume of project + jobid. */
typedef struct jobs_pause {
  const char *project, *jobid; /* in */
  const char *node;            /* in: this node's name */
  job_t job;     /* out: the job paused or resumed (its latest attempt) */
  int here;      /* out (pause): it runs on this node: its launcher stops it */
  int remote;    /* out (pause): it runs on another node, asked to pause it */
  int already;   /* out: it was paused already (pause) or pending (resume) */
  flow_change_t change; /* out (resume): the job queued again */
  char why[160]; /* out: why not, for a person */
} jobs_pause_t;

/* Finds the running job to pause: 0 with p->here when it runs on this
 * node (the caller's launcher stops it, and its end records the pause),
 * p->remote when it runs on another node (asked through the store, as a
 * cancel is: store_job_cancel_request with minus now_ms), or p->already
 * when it is paused already. SPD_ECONFLICT when it is pending or ended;
 * -ENOENT when there is no such job. */
int jobs_pause(store_t *s, jobs_pause_t *p, int64_t now_ms);

/* Queues a paused job again (state pending, job.resumed), its segments and
 * state kept for the node that claims it. p->already when it is pending
 * or running already; SPD_ECONFLICT when it ended; -ENOENT when none. */
int jobs_resume(store_t *s, jobs_pause_t *p, int64_t now_ms);

/* j's segments with the run that ended at end_ms appended (reason:
 * "paused" or a final state's name; items from stats, may be NULL): a new
 * array, NULL on allocation failure. */
json_t *jobs_segments_add(const job_t *j, int64_t end_ms, const json_t *stats,
                          const char *reason);

/* The part of jobs_end for a pause: state paused, the segment, job.paused;
 * on a shared store, state_dir (may be NULL) packed into it for the node
 * that resumes the job (flow/pausestate.h). */
int jobs_end_paused(store_t *s, const job_t *j, int64_t end_ms, int exit_code, int term_signal,
                    const json_t *stats, const char *state_dir);

/* A job that ran in segments reached a final state: its last segment, and
 * its state is no longer kept. */
int jobs_end_segment(store_t *s, const job_t *j, job_state_t state, int64_t end_ms,
                     const json_t *stats);

/* Ends paused job j as cancelled (jobs_cancel_pending's part for paused
 * entries); c->finished + 1. */
int jobs_cancel_paused(store_t *s, const job_t *j, int64_t now_ms, flow_change_t *c);

#endif
