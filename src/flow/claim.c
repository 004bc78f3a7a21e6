/* Claiming pending jobs and giving them back (flow/claim.h). */
#include "flow/claim.h"
#include "flow/pausestate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flow/claim_accounts.h"
#include "flow/eggsync.h"
#include "flow/jobs.h"
#include "flow/memfit.h"
#include "log.h"
#include "store/eggs.h"

/* Does limit l cover job j? */
static int limit_covers(const config_limit_t *l, const job_t *j) {
  return !strcmp(l->project, j->project) && (!l->spider || !strcmp(l->spider, j->spider));
}

/* The limits at their maximum, to skip; running[i] = limit i's running
 * jobs. Under the store's claim lock. */
static int limits_count(store_t *s, const config_t *cfg, int64_t *running, job_key_t *skip,
                        size_t *nskip) {
  int rc = store_claim_lock(s);
  for (size_t i = 0; !rc && i < cfg->nlimits; i++) {
    job_list_t r = {0};
    job_filter_t f = {.project = cfg->limits[i].project, .spider = cfg->limits[i].spider,
                      .states = 1u << JOB_RUNNING};
    /* spider NULL would list the project's jobs in the other order: fine. */
    rc = store_jobs_list(s, &f, &r);
    running[i] = 0;
    /* A multi-process run's parent runs no process: it takes no slot. */
    for (size_t k = 0; k < r.n; k++) running[i] += r.v[k].node != NULL;
    job_list_release(&r);
    if (!rc && running[i] >= cfg->limits[i].max && *nskip < STORE_CLAIM_SKIP_MAX)
      skip[(*nskip)++] = (job_key_t){cfg->limits[i].project, cfg->limits[i].spider};
  }
  return rc;
}

/* A claim under [concurrency] limits and accounts' caps (jobs_claim);
 * skip holds the capped accounts' keys already. */
static int claim_limited(store_t *s, jobs_claim_t *c, claim_accounts_t *acc, job_key_t *skip,
                         size_t nskip) {
  const config_t *cfg = c->cfg;
  int64_t *running = calloc(cfg->nlimits + 1, sizeof(*running));
  int rc = running ? limits_count(s, cfg, running, skip, &nskip) : -ENOMEM;
  if (!rc) rc = store_job_claim_skip(s, c->node, c->max, c->now, skip, nskip, &c->jobs);
  size_t kept = 0;
  for (size_t k = 0; !rc && k < c->jobs.n; k++) {
    job_t *j = &c->jobs.v[k];
    int over = claim_accounts_full(acc, j);
    for (size_t i = 0; i < cfg->nlimits && !over; i++)
      over = limit_covers(&cfg->limits[i], j) && running[i] >= cfg->limits[i].max;
    if (over) {
      rc = store_job_requeue(s, j->id);
      job_release(j);
      c->limited++;
      continue;
    }
    for (size_t i = 0; i < cfg->nlimits; i++)
      if (limit_covers(&cfg->limits[i], j)) running[i]++;
    claim_accounts_count(acc, j);
    if (kept != k) {
      c->jobs.v[kept] = *j;
      job_init(j);
    }
    kept++;
  }
  if (!rc) c->jobs.n = kept;
  free(running);
  return rc;
}

/* Memory admission (jobs_claim): keeps the claimed jobs that fit in the
 * budget, in order, and gives the others back. */
static int claim_fit_memory(store_t *s, jobs_claim_t *c) {
  int64_t left = c->mem_budget;
  size_t kept = 0;
  int rc = 0;
  for (size_t k = 0; !rc && k < c->jobs.n; k++) {
    job_t *j = &c->jobs.v[k];
    int64_t want = 0;
    rc = memfit_expected(s, c->cfg, j, &want);
    if (rc) break;
    if (want > left) {
      rc = store_job_requeue(s, j->id);
      if (!c->mem_wanted || want < c->mem_wanted) c->mem_wanted = want;
      job_release(j);
      c->mem_deferred++;
      continue;
    }
    left -= want;
    j->mem_expected = want;
    if (kept != k) {
      c->jobs.v[kept] = *j;
      job_init(j);
    }
    kept++;
  }
  if (!rc) c->jobs.n = kept;
  return rc;
}

/* An egg added on another node a moment ago may not be here yet (the
 * notice's copy is under way): the project's eggs are copied first, but
 * only then; a claim of an egg already here reads no list. Newer versions
 * of an egg that is here arrive with the notice. */
static void claim_eggs(store_t *s, const jobs_claim_t *c) {
  for (size_t i = 0; i < c->jobs.n; i++) {
    const job_t *j = &c->jobs.v[i];
    char *egg = NULL;
    int missing = eggs_path(c->cfg->eggs_dir, j->project, j->version, &egg) == -ENOENT;
    free(egg);
    if (missing && eggsync_pull(s, c->cfg->eggs_dir, j->project, NULL))
      log_warn("launcher", "could not copy the eggs of project '%s' from the store",
               j->project);
  }
}

int jobs_claim(store_t *s, jobs_claim_t *c) {
  job_list_release(&c->jobs);
  memset(&c->jobs, 0, sizeof(c->jobs));
  c->next_due = 0;
  c->limited = 0;
  c->capped = 0;
  c->mem_deferred = 0;
  c->mem_wanted = 0;
  c->change = (flow_change_t){0};
  claim_accounts_t acc;
  job_key_t skip[STORE_CLAIM_SKIP_MAX];
  size_t nskip = 0;
  int rc = claim_accounts_load(s, &acc, skip, &nskip);
  if (!rc)
    rc = c->cfg->nlimits || acc.n ? claim_limited(s, c, &acc, skip, nskip)
                                  : store_job_claim(s, c->node, c->max, c->now, &c->jobs);
  c->capped = acc.n > 0;
  claim_accounts_release(&acc);
  if (!rc && c->mem_budget >= 0) rc = claim_fit_memory(s, c);
  if (rc) return rc;
  if (c->shared) claim_eggs(s, c);
  /* A resumed job goes on from the state its pause left in the store. */
  for (size_t i = 0; c->shared && i < c->jobs.n; i++)
    if (c->jobs.v[i].segments) pausestate_restore(s, c->cfg, &c->jobs.v[i]);
  for (size_t i = 0; i < c->jobs.n; i++) jobs_resolve(c->cfg, &c->jobs.v[i]);
  c->change.unqueued = (int64_t)c->jobs.n;
  if (c->jobs.n >= c->max) return 0;
  /* Fewer than asked: every pending job left waits for its not_before, so
   * this scans only those, and only when a claim comes back short. */
  c->change.has_pending = 1;
  rc = store_job_next_due(s, c->now, &c->next_due);
  if (rc || !c->next_due) return rc;
  int64_t counts[JOB_NSTATES];
  rc = store_job_counts(s, NULL, counts);
  if (rc == 0) c->change.pending_count = counts[JOB_PENDING];
  return rc;
}

int jobs_requeue(store_t *s, const job_list_t *jobs) {
  for (size_t i = 0; i < jobs->n; i++) {
    int rc = store_job_requeue(s, jobs->v[i].id);
    if (rc && rc != -ENOENT) return rc;
  }
  return 0;
}
