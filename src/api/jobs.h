/* Queueing and cancelling a job as every API face does it: the loop side of
 * flow/jobs.h's transitions (checking the spider, applying what they changed
 * with flow_apply, signalling this node's processes through app->flow).
 *
 * Loop thread only. Ownership: pointers passed in are borrowed until the
 * callback (or the return when no callback will run). Callbacks never run
 * when the call that would start them returned an error.
 */
#ifndef SPIDERD_API_JOBS_H
#define SPIDERD_API_JOBS_H

#include "app.h"

struct auth_who;

/* ---- queueing and cancelling jobs ---- */

enum {
  API_JOB_LIST = 1, /* the runner could not list the egg's spiders */
  API_JOB_SPIDER,   /* the spider is not in the egg (SPD_ENOSPIDER) */
  API_JOB_SUBMIT,   /* the store refused the op (SPD_ESHUTDOWN) */
  API_JOB_STORE,    /* the insert failed */
  API_JOB_EXISTING, /* with rc 0: the unique_key's holder was returned */
};

typedef void (*api_job_cb)(void *ud, int rc, int stage, const char *error_text);

/* Checks that job->spider is a spider of egg_path's project, inserts the job
 * (job->id is set), counts it pending and wakes the launcher. job is
 * borrowed until cb. Returns 0 (cb runs, possibly before the return) or a
 * spawn error (stage API_JOB_LIST, no callback).
 *
 * Unique jobs: when job->unique_key is held by a pending or running job of
 * the project, nothing is queued: cb gets rc 0 and stage API_JOB_EXISTING,
 * and *job has been replaced by the holder (released and refilled), so the
 * caller answers with the existing job. Otherwise stage is 0 on success.
 * who (may be NULL) is who asked: the events carry it (api/auth.h). */
int api_job_enqueue(app_t *app, job_t *job, const char *egg_path, api_job_cb cb, void *ud,
                    const struct auth_who *who);

/* found: processes signalled; count: pending entries cancelled. */
typedef void (*api_cancel_cb)(void *ud, int rc, int found, int count);

/* Signals every running process of project + jobid and cancels its pending
 * entries. Returns 0 (cb runs later) or SPD_ESHUTDOWN / -ENOMEM. */
int api_job_cancel(app_t *app, const char *project, const char *jobid, int sig,
                   api_cancel_cb cb, void *ud, const struct auth_who *who);

/* Stops the descendants of project + jobid only (jobs.cancel_children),
 * leaving the job itself as it is: found = the running descendants asked
 * to stop (signalled here or asked of their node), count = the pending
 * descendants cancelled. Returns as api_job_cancel. */
int api_job_cancel_children(app_t *app, const char *project, const char *jobid, int sig,
                            api_cancel_cb cb, void *ud, const struct auth_who *who);

#endif
