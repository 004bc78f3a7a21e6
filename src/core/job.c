#include "core/job.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[JOB_NSTATES] = {
    "pending", "running", "finished", "failed", "cancelled", "lost"};

void job_init(job_t *j) {
  memset(j, 0, sizeof(*j));
  j->exit_code = -1;
  j->attempt = 1;
}

void job_release(job_t *j) {
  if (!j) return;
  free(j->jobid);
  free(j->project);
  free(j->spider);
  free(j->version);
  free(j->node);
  json_decref(j->args);
  json_decref(j->settings);
  json_decref(j->stats);
  job_init(j);
}

void job_list_release(job_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) job_release(&l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = 0;
}

int job_list_take(job_list_t *l, job_t *j) {
  job_t *v = realloc(l->v, (l->n + 1) * sizeof(*v));
  if (!v) return -ENOMEM;
  v[l->n++] = *j;
  l->v = v;
  job_init(j);
  return 0;
}

const char *job_state_name(job_state_t s) {
  return (s >= 0 && s < JOB_NSTATES) ? state_names[s] : "unknown";
}

int job_state_parse(const char *name, job_state_t *out) {
  for (int i = 0; i < JOB_NSTATES; i++)
    if (name && strcmp(name, state_names[i]) == 0) {
      *out = (job_state_t)i;
      return 0;
    }
  return -EINVAL;
}

int job_state_final(job_state_t s) { return s >= JOB_FINISHED && s < JOB_NSTATES; }
