/* The scheduler (scheduler.h). The store thread does the thinking, in one
 * transaction per tick; the loop thread only arms the timer and applies what a
 * tick changed (flow_apply: the counts, the launcher's wake-up). */
#include "clock.h"
#include "run/scheduler.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cron.h"
#include "core/schedule.h"
#include "error.h"
#include "flow/tick.h"
#include "log.h"
#include "run/done.h"
#include "metrics.h"

#define LEADER_TICK_MS 1000

struct scheduler {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  const flow_hooks_t *flow; /* borrowed: the loop's side of what ticks change */
  uv_timer_t timer;
  int busy;     /* a tick is in flight */
  int again;    /* kicked while busy */
  int leader;
  int64_t token;
  int stopping;
  run_done_t stopped;
  metrics_t *metrics; /* borrowed; NULL = none; observed on the store thread too */
};

/* A tick in flight: the store op's record and whose it is. */
typedef struct tick {
  schedules_tick_t op;
  scheduler_t *sch;
} tick_t;

static int64_t ms_of(double seconds) { return (int64_t)(seconds * 1000.0); }

/* ---- the loop side ---- */

static int tick_fn(store_t *st, void *arg) { return schedules_tick(st, &((tick_t *)arg)->op); }

static void tick_start(scheduler_t *s);

static void on_timer(uv_timer_t *h) { tick_start(h->data); }

static void release_done(void *arg, int rc) {
  tick_t *t = arg;
  scheduler_t *s = t->sch;
  free(t);
  s->busy = 0;
  if (rc) log_warn("scheduler", "cannot give the lease up: %s", spd_strerror(rc));
  run_done_fire(&s->stopped);
}

static void release_lease(scheduler_t *s) {
  tick_t *t = calloc(1, sizeof(*t));
  if (!t || !s->leader) {
    free(t);
    run_done_fire(&s->stopped);
    return;
  }
  t->sch = s;
  t->op.node = s->cfg->node_name;
  t->op.release = 1;
  t->op.token = s->token;
  s->leader = 0;
  s->busy = 1;
  if (store_submit(s->store, STORE_WRITE, tick_fn, t, release_done)) {
    s->busy = 0;
    free(t);
    run_done_fire(&s->stopped);
  }
}

static void tick_done(void *arg, int rc) {
  tick_t *t = arg;
  scheduler_t *s = t->sch;
  s->busy = 0;
  if (rc) {
    log_error("scheduler", "tick failed: %s", spd_strerror(rc));
    t->op.leader = s->leader; /* unknown: keep what we believed */
  } else if (t->op.leader != s->leader || (t->op.leader && t->op.token != s->token)) {
    if (t->op.leader)
      log_info("scheduler", "this node fires schedules now (lease token %" PRId64 ")", t->op.token);
    else
      log_info("scheduler", "another node holds the scheduler lease; standing by");
  }
  s->leader = t->op.leader;
  if (t->op.leader) s->token = t->op.token;
  for (size_t i = 0; !rc && s->metrics && i < t->op.nlags; i++)
    metrics_hist_observe(&s->metrics->schedule_lag, t->op.lags[i]);
  free(t->op.lags);
  /* A failed tick was rolled back: nothing it queued or stopped happened. */
  if (!rc) flow_apply(s->flow, &t->op.change);
  for (size_t i = 0; !rc && i < t->op.cancel.n; i++) {
    int found = 0;
    flow_signal(s->flow, t->op.cancel.v[i].project, t->op.cancel.v[i].jobid, SIGTERM, &found);
  }
  job_list_release(&t->op.cancel);
  int64_t next = t->op.next_ms;
  free(t);
  if (s->stopping) {
    release_lease(s);
    return;
  }
  int64_t delay = s->leader ? LEADER_TICK_MS : ms_of(s->cfg->scheduler_lease) / 3;
  if (s->leader && next) {
    int64_t until = next - clock_wall_ms();
    if (until < delay) delay = until < 0 ? 0 : until;
  }
  if (s->again) delay = 0;
  s->again = 0;
  uv_timer_start(&s->timer, on_timer, (uint64_t)delay, 0);
}

static void tick_start(scheduler_t *s) {
  if (s->stopping) return;
  if (s->busy) {
    s->again = 1;
    return;
  }
  tick_t *t = calloc(1, sizeof(*t));
  if (!t) {
    uv_timer_start(&s->timer, on_timer, LEADER_TICK_MS, 0);
    return;
  }
  t->sch = s;
  t->op.node = s->cfg->node_name;
  t->op.ttl_ms = ms_of(s->cfg->scheduler_lease);
  t->op.span_ms = ms_of(s->cfg->schedule_horizon * 86400.0);
  t->op.grace_ms = ms_of(s->cfg->misfire_grace);
  t->op.want_lags = s->metrics != NULL;
  s->busy = 1;
  if (store_submit(s->store, STORE_WRITE, tick_fn, t, tick_done)) {
    s->busy = 0;
    free(t);
  }
}

int scheduler_init(scheduler_t **out, uv_loop_t *loop, const config_t *cfg,
                   store_pool_t *store, const flow_hooks_t *flow) {
  scheduler_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->loop = loop;
  s->cfg = cfg;
  s->store = store;
  s->flow = flow;
  int rc = uv_timer_init(loop, &s->timer);
  if (rc) {
    free(s);
    return rc;
  }
  s->timer.data = s;
  *out = s;
  if (cfg->scheduler) uv_timer_start(&s->timer, on_timer, 0, 0);
  return 0;
}

void scheduler_kick(scheduler_t *s) {
  if (!s || s->stopping || !s->cfg->scheduler) return;
  if (s->busy)
    s->again = 1;
  else
    uv_timer_start(&s->timer, on_timer, 0, 0);
}

void scheduler_stop(scheduler_t *s, void (*done)(void *ud), void *ud) {
  if (!s) {
    if (done) done(ud);
    return;
  }
  if (s->stopping) {
    /* Stopped again (a drain stopped it, then the daemon stops): done once
     * the first stop has given the lease up; busy until then. */
    if (s->busy) {
      run_done_set(&s->stopped, done, ud);
    } else if (done) {
      done(ud);
    }
    return;
  }
  s->stopping = 1;
  run_done_set(&s->stopped, done, ud);
  uv_timer_stop(&s->timer);
  if (!s->busy) release_lease(s); /* else tick_done releases it */
}

static void scheduler_closed(uv_handle_t *h) { free(h->data); }

void scheduler_free(scheduler_t *s) {
  if (s) uv_close((uv_handle_t *)&s->timer, scheduler_closed);
}

void scheduler_set_metrics(scheduler_t *s, struct metrics *m) { s->metrics = m; }
