/* The janitor (janitor.h). The store thread decides what goes, one bounded
 * batch per op; the loop thread chains the batches, applies what each
 * changed (flow_apply: the count of ended jobs) and hands file removal to
 * the thread pool. */
#include "clock.h"
#include "run/janitor.h"
#include "run/objstore.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "flow/jobs.h"
#include "log.h"

#define LEASE_NAME "janitor"
/* A kick waits this long after the previous pass began: one pass serves a
 * burst of job ends. */
#define KICK_DEBOUNCE_MS 3000
#define DAY_MS 86400000.0

struct janitor {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  const flow_hooks_t *flow; /* borrowed */
  uv_timer_t timer;
  /* [retention] resolved once: spider entries without DAYS take their
   * project's, then history_days. ended_before_ms is filled per pass. */
  prune_rule_t *rules;
  double *rule_days;
  size_t nrules;
  int enabled;      /* anything is bounded at all */
  int busy;         /* a batch is in the store */
  int again;        /* kicked during a pass */
  int files_busy;   /* file removals on the thread pool */
  int stopping;
  uint64_t last_pass; /* uv_now when the last pass began */
  /* This pass's totals, logged once it and its file removals are done. */
  int64_t pass_jobs, pass_events, pass_logs, pass_items;
  int pass_open;
  void (*stopped)(void *ud);
  void *stopped_ud;
  struct objstore *objstore; /* NULL: none */
};

void janitor_set_objstore(janitor_t *j, struct objstore *o) { j->objstore = o; }

typedef struct batch {
  janitor_t *jan;
  const char *node;
  int64_t ttl_ms;
  const prune_rule_t *rules;
  size_t nrules;
  int keep_default;
  int64_t before_default, events_before;
  int leader;        /* out */
  job_list_t jobs;   /* out: deleted */
  int events;        /* out: events and runs deleted */
  flow_change_t change; /* out: jobs_prune's */
} batch_t;

typedef struct unlink_work {
  uv_work_t req;
  janitor_t *jan;
  char **paths;
  size_t n, nlogs; /* the first nlogs paths are logs, the rest items */
  int logs, items; /* out: files removed */
} unlink_work_t;

/* now - days, or 0 (no limit) for 0 days or a cut-off before the epoch. */
static int64_t cutoff(int64_t now, double days) {
  double cut = (double)now - days * DAY_MS;
  return days > 0 && cut >= 1 ? (int64_t)cut : 0;
}

/* ---- store thread ---- */

static int batch_fn(store_t *s, void *arg) {
  batch_t *b = arg;
  int64_t token;
  /* A run the store pool repeats after a collision starts afresh. */
  b->leader = 0;
  b->events = 0;
  b->change = (flow_change_t){0};
  job_list_release(&b->jobs);
  memset(&b->jobs, 0, sizeof(b->jobs));
  /* Taken in the batch's own transaction: a node whose lease passed to
   * another deletes nothing. */
  int rc = store_lease_acquire(s, LEASE_NAME, b->node, clock_wall_ms(), b->ttl_ms, &token);
  if (rc == -EBUSY) return 0;
  if (rc) return rc;
  b->leader = 1;
  rc = jobs_prune(s, b->rules, b->nrules, b->keep_default, b->before_default, JANITOR_BATCH,
                  &b->jobs, &b->change);
  if (!rc) rc = store_events_prune(s, b->events_before, JANITOR_BATCH, &b->events);
  return rc;
}

/* ---- files, on the thread pool ---- */

static void unlink_fn(uv_work_t *req) {
  unlink_work_t *w = req->data;
  for (size_t i = 0; i < w->n; i++)
    if (unlink(w->paths[i]) == 0) {
      if (i < w->nlogs) w->logs++;
      else w->items++;
    } else if (errno != ENOENT) {
      log_warn("janitor", "cannot remove %s: %s", w->paths[i], strerror(errno));
    }
}

static void pass_maybe_done(janitor_t *j);

static void unlink_done(uv_work_t *req, int status) {
  unlink_work_t *w = req->data;
  janitor_t *j = w->jan;
  j->files_busy--;
  j->pass_logs += w->logs;
  j->pass_items += w->items;
  for (size_t i = 0; i < w->n; i++) free(w->paths[i]);
  free(w->paths);
  free(w);
  pass_maybe_done(j);
}

/* The files of jobs that started (others never had any). */
static void remove_files(janitor_t *j, const job_list_t *jobs) {
  unlink_work_t *w = calloc(1, sizeof(*w));
  if (!w || !(w->paths = calloc(2 * jobs->n, sizeof(*w->paths)))) {
    free(w);
    log_error("janitor", "out of memory: files of %zu deleted jobs stay", jobs->n);
    return;
  }
  for (size_t i = 0; i < jobs->n; i++) {
    const job_t *d = &jobs->v[i];
    char *p = d->start_ms ? jobs_log_path(j->cfg, d->project, d->spider, d->jobid) : NULL;
    if (p) w->paths[w->n++] = p;
    if (d->start_ms) objstore_forget(j->objstore, d->project, d->spider, d->jobid);
  }
  w->nlogs = w->n;
  for (size_t i = 0; i < jobs->n; i++) {
    const job_t *d = &jobs->v[i];
    char *p = d->start_ms ? jobs_items_path(j->cfg, d->project, d->spider, d->jobid) : NULL;
    if (p) w->paths[w->n++] = p;
  }
  w->jan = j;
  w->req.data = w;
  if (!w->n || uv_queue_work(j->loop, &w->req, unlink_fn, unlink_done) != 0) {
    for (size_t i = 0; i < w->n; i++) free(w->paths[i]);
    free(w->paths);
    free(w);
    return;
  }
  j->files_busy++;
}

/* ---- the loop side ---- */

static void pass_start(janitor_t *j);

static void on_timer(uv_timer_t *h) { pass_start(h->data); }

static void arm(janitor_t *j, uint64_t delay) {
  if (!j->stopping) uv_timer_start(&j->timer, on_timer, delay, 0);
}

static uint64_t interval_ms(const janitor_t *j) {
  return (uint64_t)(j->cfg->janitor_interval * 1000.0);
}

/* Logs the pass once its batches and file removals are all done, and lets
 * a waiting stop finish. */
static void pass_maybe_done(janitor_t *j) {
  if (j->busy || j->files_busy) return;
  if (j->pass_open && (j->pass_jobs || j->pass_events))
    log_info("janitor",
             "history pruned: %" PRId64 " job(s), %" PRId64 " log file(s), %" PRId64
             " items file(s), %" PRId64 " event(s) and schedule run(s)",
             j->pass_jobs, j->pass_logs, j->pass_items, j->pass_events);
  j->pass_open = 0;
  j->pass_jobs = j->pass_events = j->pass_logs = j->pass_items = 0;
  if (j->stopping && j->stopped) {
    void (*done)(void *) = j->stopped;
    j->stopped = NULL;
    done(j->stopped_ud);
  }
}

static void batch_submit(janitor_t *j);

static void batch_done(void *arg, int rc) {
  batch_t *b = arg;
  janitor_t *j = b->jan;
  int more = 0;
  j->busy = 0;
  if (rc) {
    log_error("janitor", "pruning history failed: %s", spd_strerror(rc));
  } else if (b->leader) {
    flow_apply(j->flow, &b->change);
    j->pass_jobs += (int64_t)b->jobs.n;
    j->pass_events += b->events;
    if (b->jobs.n) remove_files(j, &b->jobs);
    more = b->jobs.n >= JANITOR_BATCH || b->events >= JANITOR_BATCH;
  }
  job_list_release(&b->jobs);
  free(b);
  if (more && !j->stopping) {
    batch_submit(j);
    return;
  }
  uint64_t delay = interval_ms(j);
  if (j->again) {
    uint64_t since = uv_now(j->loop) - j->last_pass;
    delay = since >= KICK_DEBOUNCE_MS ? 0 : KICK_DEBOUNCE_MS - since;
  }
  j->again = 0;
  arm(j, delay);
  pass_maybe_done(j);
}

static void batch_submit(janitor_t *j) {
  batch_t *b = calloc(1, sizeof(*b));
  if (!b) {
    arm(j, interval_ms(j));
    return;
  }
  int64_t now = clock_wall_ms();
  for (size_t i = 0; i < j->nrules; i++) j->rules[i].ended_before_ms = cutoff(now, j->rule_days[i]);
  b->jan = j;
  b->node = j->cfg->node_name;
  /* Renewed every pass; a holder that is gone hands over after three. */
  b->ttl_ms = (int64_t)(3 * interval_ms(j)) + 1000;
  b->rules = j->rules;
  b->nrules = j->nrules;
  b->keep_default = j->cfg->history_per_spider;
  b->before_default = cutoff(now, j->cfg->history_days);
  b->events_before = cutoff(now, j->cfg->events_days);
  j->busy = 1;
  if (store_submit(j->store, STORE_WRITE, batch_fn, b, batch_done)) {
    j->busy = 0;
    free(b);
    pass_maybe_done(j);
  }
}

static void pass_start(janitor_t *j) {
  if (j->stopping) return;
  if (j->busy) {
    j->again = 1;
    return;
  }
  j->last_pass = uv_now(j->loop);
  j->pass_open = 1;
  batch_submit(j);
}

void janitor_kick(janitor_t *j) {
  if (!j || !j->enabled || j->stopping) return;
  if (j->busy) {
    j->again = 1;
    return;
  }
  uint64_t since = uv_now(j->loop) - j->last_pass;
  uint64_t delay = j->last_pass && since < KICK_DEBOUNCE_MS ? KICK_DEBOUNCE_MS - since : 0;
  if (!uv_is_active((uv_handle_t *)&j->timer) || uv_timer_get_due_in(&j->timer) > delay)
    arm(j, delay);
}

/* Spider entries without DAYS inherit their project entry's, then the
 * daemon-wide history_days. */
static double rule_days(const config_t *cfg, const config_retention_t *e) {
  if (e->days >= 0) return e->days;
  for (size_t i = 0; e->spider && i < cfg->nretention; i++) {
    const config_retention_t *p = &cfg->retention[i];
    if (!p->spider && p->days >= 0 && !strcmp(p->project, e->project)) return p->days;
  }
  return cfg->history_days;
}

int janitor_init(janitor_t **out, uv_loop_t *loop, const config_t *cfg,
                 store_pool_t *store, const flow_hooks_t *flow) {
  int rc = -ENOMEM;
  janitor_t *j = calloc(1, sizeof(*j));
  if (!j) return rc;
  j->loop = loop;
  j->cfg = cfg;
  j->store = store;
  j->flow = flow;
  j->nrules = cfg->nretention;
  j->rules = calloc(j->nrules ? j->nrules : 1, sizeof(*j->rules));
  j->rule_days = calloc(j->nrules ? j->nrules : 1, sizeof(*j->rule_days));
  if (!j->rules || !j->rule_days) goto out;
  j->enabled = cfg->history_per_spider > 0 || cfg->history_days > 0 || cfg->events_days > 0;
  for (size_t i = 0; i < j->nrules; i++) {
    const config_retention_t *e = &cfg->retention[i];
    j->rules[i] = (prune_rule_t){.project = e->project, .spider = e->spider, .keep = e->count};
    j->rule_days[i] = rule_days(cfg, e);
    j->enabled |= e->count > 0 || j->rule_days[i] > 0;
  }
  if ((rc = uv_timer_init(loop, &j->timer))) goto out;
  j->timer.data = j;
  /* The first pass waits a moment so start-up (adoption, the first
   * claims) has the writer to itself. */
  if (j->enabled) arm(j, KICK_DEBOUNCE_MS);
  *out = j;
out:
  if (rc) {
    free(j->rules);
    free(j->rule_days);
    free(j);
  }
  return rc;
}

void janitor_stop(janitor_t *j, void (*done)(void *ud), void *ud) {
  if (!j) {
    if (done) done(ud);
    return;
  }
  j->stopping = 1;
  j->stopped = done;
  j->stopped_ud = ud;
  uv_timer_stop(&j->timer);
  pass_maybe_done(j);
}

static void janitor_closed(uv_handle_t *h) {
  janitor_t *j = h->data;
  free(j->rules);
  free(j->rule_days);
  free(j);
}

void janitor_free(janitor_t *j) {
  if (j) uv_close((uv_handle_t *)&j->timer, janitor_closed);
}
