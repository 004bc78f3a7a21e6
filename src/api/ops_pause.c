/* jobs.pause and jobs.resume (flow/pause.h): a running crawl stops with its
 * state kept, and is queued again to go on from it. */
#include <errno.h>
#include <string.h>

#include "api/ops_impl.h"
#include "clock.h"
#include "error.h"
#include "flow/pause.h"

static void pause_priv_free(void *p) {
  jobs_pause_t *jp = p;
  job_release(&jp->job);
  free(jp);
}

static jobs_pause_t *pause_priv(op_call_t *c) {
  jobs_pause_t *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  job_init(&p->job);
  c->priv = p;
  c->priv_free = pause_priv_free;
  return p;
}

/* jobs.pause and jobs.resume: the same job, one flow call or the other. */
static int pause_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  jobs_pause_t *p = c->priv;
  int rc = op_job_resolve(s, c);
  if (rc) return rc;
  p->project = c->job.project;
  p->jobid = c->job.jobid;
  p->node = c->app->cfg.node_name;
  return !strcmp(c->def->name, "jobs.resume") ? jobs_resume(s, p, clock_wall_ms())
                                              : jobs_pause(s, p, clock_wall_ms());
}

static void pause_failed(op_call_t *c, int rc) {
  jobs_pause_t *p = c->priv;
  if (rc == SPD_ECONFLICT && p->why[0])
    op_fail(c, rc, json_pack("{s:I,s:s}", "id", (json_int_t)c->job.id, "state",
                             job_state_name(p->job.state)), "%s", p->why);
  else
    op_fail_resolve(c, rc);
}

static void pause_done(void *arg, int rc) {
  op_call_t *c = arg;
  jobs_pause_t *p = c->priv;
  if (rc) {
    pause_failed(c, rc);
    return;
  }
  int found = 0;
  if (p->here) rc = flow_pause(&c->app->flow, c->job.project, c->job.jobid, &found);
  if (rc == -ENOTSUP) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:I}", "id", (json_int_t)c->job.id),
            "job '%s' cannot be paused: it is a command spider not declared resumable "
            "(\"resumable\": true in its spiderd.json)", c->job.jobid);
    return;
  }
  if (rc == -EBUSY) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:I}", "id", (json_int_t)c->job.id),
            "job '%s' is still starting: pause it once it runs", c->job.jobid);
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "%s", spd_strerror(rc));
    return;
  }
  if (p->here && !found) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:I}", "id", (json_int_t)c->job.id),
            "job '%s' has no process on this node yet: pause it once it runs", c->job.jobid);
    return;
  }
  op_ok(c, json_pack("{s:s,s:o}", "state", p->already ? "paused" : "pausing", "job",
                     op_render_job(&p->job)));
}

void op_jobs_pause(op_call_t *c) {
  if (!pause_priv(c)) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  op_store(c, STORE_WRITE, pause_fn, pause_done);
}

static void resume_done(void *arg, int rc) {
  op_call_t *c = arg;
  jobs_pause_t *p = c->priv;
  if (rc) {
    pause_failed(c, rc);
    return;
  }
  flow_apply(&c->app->flow, &p->change);
  op_ok(c, json_pack("{s:s,s:o}", "state", job_state_name(p->job.state), "job",
                     op_render_job(&p->job)));
}

void op_jobs_resume(op_call_t *c) {
  if (!pause_priv(c)) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  op_store(c, STORE_WRITE, pause_fn, resume_done);
}
