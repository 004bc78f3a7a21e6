#include "api/jobs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/spiders.h"
#include "clock.h"
#include "error.h"
#include "flow/jobs.h"
#include "metrics.h"

/* ---- queueing a job ---- */

typedef struct enqueue {
  app_t *app;
  job_t *job;
  api_job_cb cb;
  void *ud;
  int existing; /* the job's unique_key was held: e->job is now the holder */
  const struct auth_who *who;
  flow_change_t change;
} enqueue_t;

/* The job and its job.queued event in one transaction; or, when its
 * unique_key is held, the holder read in the same transaction (it cannot
 * end in between) in place of the job. */
static int enqueue_fn(store_t *s, void *arg) {
  enqueue_t *e = arg;
  e->change = (flow_change_t){0};
  int rc = jobs_enqueue(s, e->job, NULL, &e->change);
  if (rc == SPD_ECONFLICT && e->job->unique_key) {
    job_t held;
    rc = store_job_get(s, e->job->id, &held);
    if (rc == 0) {
      job_release(e->job);
      *e->job = held;
      e->existing = 1;
    } else {
      job_release(&held);
    }
    return rc == -ENOENT ? SPD_ESTORE : rc;
  }
  return rc;
}

static void enqueue_done(void *arg, int rc) {
  enqueue_t *e = arg;
  if (!rc) flow_apply(&e->app->flow, &e->change);
  e->cb(e->ud, rc, rc ? API_JOB_STORE : e->existing ? API_JOB_EXISTING : 0, NULL);
  free(e);
}

static void enqueue_listed(void *ud, int rc, char *const *names, size_t n, const char *error) {
  enqueue_t *e = ud;
  if (rc) {
    e->cb(e->ud, rc, API_JOB_LIST, error);
    free(e);
    return;
  }
  int found = 0;
  for (size_t i = 0; i < n && !found; i++) found = !strcmp(names[i], e->job->spider);
  if (!found) {
    e->cb(e->ud, SPD_ENOSPIDER, API_JOB_SPIDER, NULL);
    free(e);
    return;
  }
  rc = store_submit_as(e->app->store, STORE_WRITE, enqueue_fn, e, enqueue_done,
                       e->who ? e->who->actor : NULL, e->who ? e->who->addr : NULL);
  if (rc) {
    e->cb(e->ud, rc, API_JOB_SUBMIT, NULL);
    free(e);
  }
}

int api_job_enqueue(app_t *app, job_t *job, const char *egg_path, api_job_cb cb, void *ud,
                    const struct auth_who *who) {
  enqueue_t *e = calloc(1, sizeof(*e));
  if (!e) return -ENOMEM;
  *e = (enqueue_t){.app = app, .job = job, .cb = cb, .ud = ud, .who = who};
  int rc = spiders_list(app->spiders, job->project, egg_path, job->version, enqueue_listed, e);
  if (rc) free(e);
  return rc;
}

/* ---- cancelling a job ---- */

typedef struct cancel {
  app_t *app;
  char *project, *jobid;
  int sig;
  int found;         /* the job's own processes on this node, signalled */
  jobs_cancel_t op;  /* the store's side: pending entries, the family, other nodes */
  api_cancel_cb cb;
  void *ud;
} cancel_t;

static void cancel_free(cancel_t *c) {
  job_list_release(&c->op.running);
  free(c->project);
  free(c->jobid);
  free(c);
}

static int cancel_fn(store_t *s, void *arg) {
  cancel_t *c = arg;
  /* jobs_cancel adds to these: a run the store pool repeats after a
   * collision starts from zero. */
  c->op.count = c->op.family = c->op.remote = c->op.here = c->op.family_remote = 0;
  c->op.change = (flow_change_t){0};
  job_list_release(&c->op.running);
  memset(&c->op.running, 0, sizeof(c->op.running));
  return jobs_cancel(s, &c->op, clock_wall_ms());
}

static void cancel_done(void *arg, int rc) {
  cancel_t *c = arg;
  if (!rc) {
    flow_apply(&c->app->flow, &c->op.change);
    /* pending jobs end here, cancelled; running ones when their process exits */
    if (c->app->metrics && c->op.count + c->op.family > 0)
      metrics_inc(c->app->metrics, &c->app->metrics->jobs_ended[METRICS_END_CANCELLED],
                  (uint64_t)(c->op.count + c->op.family));
    /* Claimed by this node when the cancel began, its process not yet
     * started: the claim's callback has started it by now (callbacks come
     * in submission order), so it is signalled here, once; so is each
     * twin of that id (jobs may share one) that the first pass missed. */
    if (c->op.here > c->found) {
      int found = 0;
      flow_signal(&c->app->flow, c->project, c->jobid, c->sig | FLOW_SIG_UNCANCELLED, &found);
      c->found += found;
    }
    for (size_t i = 0; i < c->op.running.n; i++) {
      int found = 0;
      flow_signal(&c->app->flow, c->op.running.v[i].project, c->op.running.v[i].jobid, c->sig,
                  &found);
    }
  }
  if (c->op.children_only)
    c->cb(c->ud, rc, (int)c->op.running.n + c->op.family_remote, c->op.family);
  else
    c->cb(c->ud, rc, c->found + c->op.remote, c->op.count);
  cancel_free(c);
}

static int job_cancel(app_t *app, const char *project, const char *jobid, int sig,
                      int children_only, api_cancel_cb cb, void *ud,
                      const struct auth_who *who) {
  int found = 0;
  if (!children_only) flow_signal(&app->flow, project, jobid, sig, &found);
  cancel_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->app = app;
  c->found = found;
  c->sig = sig;
  c->cb = cb;
  c->ud = ud;
  c->project = strdup(project);
  c->jobid = strdup(jobid);
  if (!c->project || !c->jobid) {
    cancel_free(c);
    return -ENOMEM;
  }
  c->op.project = c->project;
  c->op.jobid = c->jobid;
  c->op.node = app->cfg.node_name;
  c->op.children_only = children_only;
  int rc = store_submit_as(app->store, STORE_WRITE, cancel_fn, c, cancel_done,
                           who ? who->actor : NULL, who ? who->addr : NULL);
  if (rc) cancel_free(c);
  return rc;
}

int api_job_cancel(app_t *app, const char *project, const char *jobid, int sig,
                   api_cancel_cb cb, void *ud, const struct auth_who *who) {
  return job_cancel(app, project, jobid, sig, 0, cb, ud, who);
}

int api_job_cancel_children(app_t *app, const char *project, const char *jobid, int sig,
                            api_cancel_cb cb, void *ud, const struct auth_who *who) {
  return job_cancel(app, project, jobid, sig, 1, cb, ud, who);
}
