/* What a claimed job waits for before it starts, off the loop: its command
 * project extracted, its Python environment built (run/launcher_int.h). */
#include "run/launcher_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "store/eggs.h"
#include "store/marchive.h"
#include "store/pyenv.h"

static int launcher_prep_env(launcher_t *l, job_t *j, char *egg);

/* ---- extracting a command project off the loop ---- */

static void prep_work(uv_work_t *req) {
  prep_t *pr = req->data;
  manifest_t m;
  char *dir = NULL;
  pr->rc = marchive_prepare(pr->egg, pr->l->work_dir, pr->job.project, &m, &dir, pr->err,
                            sizeof(pr->err));
  manifest_release(&m);
  free(dir);
}

static void prep_done(uv_work_t *req, int status) {
  prep_t *pr = req->data;
  launcher_t *l = pr->l;
  job_t *j = &pr->job;
  launcher_prep_unlink(l, pr);
  if (pr->cancelled) {
    log_job(LOG_INFO, "launcher", j,
            "job '%s' was cancelled while its project was being extracted", j->jobid);
    supervise_end(&l->sv, j, JOB_CANCELLED, 0, -1, 0, NULL, NULL, NULL, NULL);
  } else if (status || pr->rc) {
    log_job(LOG_ERROR, "launcher", j,
            "cannot start job '%s' (project '%s', spider '%s'): %s", j->jobid,
            j->project, j->spider, status ? uv_strerror(status) : pr->err);
    supervise_end(&l->sv, j, JOB_FAILED, 0, -1, 0, NULL, NULL, NULL, NULL);
  } else if (l->stopping || l->draining) {
    launcher_requeue_one(l, j);
  } else {
    launcher_start_job(l, j); /* finds the extraction ready */
  }
  job_release(j);
  free(pr->egg);
  free(pr);
  launcher_maybe_stopped(l);
  launcher_dispatch(l);
}

/* Takes j into preparation when it is a command project's job whose archive
 * is not extracted yet: 1, and prep_done starts it. 0: start it now. */
int launcher_prep_start(launcher_t *l, job_t *j) {
  char *egg = NULL;
  if (eggs_path(l->cfg->eggs_dir, j->project, j->version, &egg)) return 0;
  if (marchive_kind_file(egg) != MARCHIVE_MANIFEST) return launcher_prep_env(l, j, egg);
  char *dup = strdup(egg); /* its environment first (extracted on the loop after) */
  if (dup && launcher_prep_env(l, j, dup)) {
    free(egg);
    return 1;
  }
  if (marchive_ready(egg, l->work_dir, j->project)) {
    free(egg);
    return 0;
  }
  prep_t *pr = calloc(1, sizeof(*pr));
  if (!pr) {
    free(egg);
    return 0; /* start_job extracts on the loop instead */
  }
  pr->l = l;
  pr->egg = egg;
  pr->job = *j;
  job_init(j);
  pr->req.data = pr;
  if (uv_queue_work(l->loop, &pr->req, prep_work, prep_done)) {
    *j = pr->job;
    free(egg);
    free(pr);
    return 0;
  }
  pr->next = l->preps;
  l->preps = pr;
  l->npreps++;
  launcher_running_changed(l);
  return 1;
}

/* ---- a version's environment, built on first claim (store/pyenv.h) ---- */

static void prep_free(prep_t *pr) {
  job_release(&pr->job);
  free(pr->egg);
  free(pr->interp);
  free(pr->reqs);
  free(pr);
}

/* This node cannot build j's environment. On a shared store the job goes
 * back for another node, once: if it comes back here, or on a node of its
 * own, it fails with the reason. */
static void env_unable(launcher_t *l, job_t *j, const char *why) {
  int again = 0;
  for (unsigned i = 0; i < l->nleft && i < 16; i++) again |= l->left[i] == j->id;
  if (l->shared && !again) {
    log_job(LOG_WARNING, "launcher", j,
            "job '%s' (project '%s') is left for another node: this node cannot build its "
            "environment: %s", j->jobid, j->project, why);
    l->left[l->nleft++ % 16] = j->id;
    launcher_requeue_one(l, j);
    return;
  }
  log_job(LOG_ERROR, "launcher", j, "cannot start job '%s' (project '%s', spider '%s'): %s",
          j->jobid, j->project, j->spider, why);
  supervise_end(&l->sv, j, JOB_FAILED, 0, -1, 0, NULL, NULL, NULL, NULL);
}

static void env_built(void *ud, int rc, const char *key, const char *why) {
  prep_t *pr = ud;
  launcher_t *l = pr->l;
  job_t *j = &pr->job;
  if (pr->abandoned) {
    prep_free(pr);
    return;
  }
  launcher_prep_unlink(l, pr);
  char reason[sizeof(pr->err) + 64];
  if (!rc && pyenv_sidecar_write(pr->egg, key, pr->interp, pr->reqs)) rc = -EIO;
  /* pip says why at the end of its output. */
  const char *w = why ? why : spd_strerror(rc);
  size_t wl = strlen(w);
  snprintf(reason, sizeof(reason), "environment %s: %s%s", key, wl > 200 ? "..." : "",
           wl > 200 ? w + wl - 200 : w);
  if (pr->cancelled) {
    log_job(LOG_INFO, "launcher", j, "job '%s' was cancelled while its environment was built",
            j->jobid);
    supervise_end(&l->sv, j, JOB_CANCELLED, 0, -1, 0, NULL, NULL, NULL, NULL);
  } else if (l->stopping || l->draining) {
    launcher_requeue_one(l, j);
  } else if (rc) {
    env_unable(l, j, reason);
  } else {
    launcher_start_job(l, j);
  }
  prep_free(pr);
  launcher_maybe_stopped(l);
  launcher_dispatch(l);
}

/* A version copied from another node (no record of its environment here)
 * or whose environment is not built here: it is built now, the job holding
 * its slot meanwhile (1, env_built starts it). 0: start it now. Takes egg. */
static int launcher_prep_env(launcher_t *l, job_t *j, char *egg) {
  char key[PYENV_KEY_LEN + 1], err[256] = "", *py = NULL, *reqs = NULL, *want = NULL;
  char *interp = NULL, *norm = NULL;
  int rc = pyenv_for_egg(l->envs_dir, egg, &py, key), built = !rc && py;
  free(py);
  if (rc == SPD_ENOFILE) {
    rc = pyenv_sidecar_read(egg, key, &interp, &norm) ? 0 : 1; /* 1: to build */
  } else if (!rc && !built) {
    rc = pyenv_from_file(egg, &reqs, &want);
    if (!rc) rc = pyenv_spec(l->cfg->python, reqs, want, &interp, &norm, key, err, sizeof(err));
    free(reqs);
    free(want);
    if (!rc && interp && pyenv_ready(l->envs_dir, key))
      pyenv_sidecar_write(egg, key, interp, norm);
    else if (!rc && interp)
      rc = 1;
  }
  prep_t *pr = rc == 1 && l->flow && l->flow->env_ensure ? calloc(1, sizeof(*pr)) : NULL;
  if (rc == SPD_EBADPARAM) env_unable(l, j, err); /* no interpreter for it here */
  if (!pr) {
    free(interp);
    free(norm);
    free(egg);
    return rc == SPD_EBADPARAM; /* 0: start_files says what is missing */
  }
  *pr = (prep_t){.l = l, .egg = egg, .job = *j, .interp = interp, .reqs = norm};
  job_init(j);
  pr->next = l->preps;
  l->preps = pr;
  l->npreps++;
  launcher_running_changed(l);
  log_job(LOG_INFO, "launcher", &pr->job, "job '%s' waits for environment %s to be built here",
          pr->job.jobid, key);
  if (!l->flow->env_ensure(l->flow->envs, interp, norm, env_built, pr)) return 1;
  launcher_prep_unlink(l, pr);
  *j = pr->job;
  job_init(&pr->job);
  pr->egg = NULL;
  prep_free(pr);
  free(egg);
  return 0;
}

