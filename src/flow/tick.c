/* A scheduler tick's store side (flow/tick.h). */
#include "flow/tick.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core/array.h"
#include "core/calendar.h"
#include "core/cron.h"
#include "core/schedule.h"
#include "error.h"
#include "flow/backfill.h"
#include "flow/calendars.h"
#include "flow/jobs.h"
#include "log.h"

#define LEASE_NAME "scheduler"
#define RUNS_AHEAD 50        /* upcoming runs materialised per schedule at most */
#define MISSED_MAX 100       /* missed runs recorded per schedule per downtime */
#define FIRE_BATCH 1000      /* due runs handled per tick */
#define REFILL_BATCH 200     /* schedules materialised per tick */
#define REFILL_EVERY_MS (3600 * 1000LL)

static void add_event(store_t *s, const char *type, int64_t schedule_id, int64_t job_id,
                      json_t *data) {
  event_t e = {.type = (char *)type, .schedule_id = schedule_id, .job_id = job_id,
               .data = data};
  int rc = store_event_add(s, &e);
  if (rc) log_warn("scheduler", "cannot record event %s: %s", type, spd_strerror(rc));
  json_decref(data);
}

/* ---- materialising runs (store thread) ---- */

/* The latest `max` fire times before or at `to`, after `from`, ascending. */
static size_t latest_between(const cron_spec_t *spec, int64_t from, int64_t to, int64_t *out,
                             size_t max) {
  size_t n = 0;
  int64_t t = to + 1;
  while (n < max && cron_prev(spec, t, &t) == 0 && t > from) out[n++] = t;
  for (size_t i = 0; i < n / 2; i++) {
    int64_t x = out[i];
    out[i] = out[n - 1 - i];
    out[n - 1 - i] = x;
  }
  return n;
}

static int materialise(store_t *s, const schedules_tick_t *t, const schedule_t *sc, int64_t now) {
  cron_spec_t spec;
  char err[256] = "";
  int64_t due[MISSED_MAX + RUNS_AHEAD], fire[MISSED_MAX + RUNS_AHEAD];
  size_t n = 0, k = 0;
  int more = 0, rc = schedule_compile(sc, &spec, err, sizeof(err));
  if (rc) {
    /* Stored schedules were validated; one that no longer compiles (a zone
     * gone from ICU's data) is reported and looked at again later. */
    log_warn("scheduler", "schedule %" PRId64 " (%s) cannot be computed: %s", sc->id,
             sc->name, err);
    return store_runs_add(s, sc->id, NULL, NULL, 0, sc->horizon_ms, now + REFILL_EVERY_MS);
  }
  int64_t from = sc->horizon_ms ? sc->horizon_ms : now - 1;
  int64_t missed_to = now - t->grace_ms;
  if (from < missed_to) {
    /* Due times that passed with no scheduler materialising them. They go
     * in as upcoming runs already late, so the missed-run policy below
     * treats them exactly like runs materialised before a downtime. */
    rc = cron_between(&spec, from, missed_to, due, MISSED_MAX, &n, &more);
    if (!rc && more) {
      n = latest_between(&spec, from, missed_to, due, MISSED_MAX);
      add_event(s, "run.missed", sc->id, 0,
                json_pack("{s:s, s:I, s:I, s:i}", "reason",
                          "more runs were missed than are recorded one by one",
                          "from_ms", (json_int_t)from, "to_ms", (json_int_t)missed_to,
                          "recorded", (int)n));
    }
    for (size_t i = 0; i < n; i++) fire[i] = due[i];
    from = missed_to;
  }
  k = n;
  if (!rc) rc = cron_between(&spec, from, now + t->span_ms, due + k, RUNS_AHEAD, &n, &more);
  int64_t horizon = now + t->span_ms, refill = now + (t->span_ms / 3 < REFILL_EVERY_MS
                                                          ? t->span_ms / 3
                                                          : REFILL_EVERY_MS);
  if (!rc) {
    char seed[32];
    snprintf(seed, sizeof(seed), "%" PRId64, sc->id);
    for (size_t i = k; i < k + n; i++) fire[i] = due[i] + cron_jitter(spec.jitter_ms, seed, due[i]);
    if (more && n) {
      /* Capped: look again once half of these have gone by. */
      horizon = due[k + n - 1];
      refill = due[k + n / 2];
    }
    k += n;
  } else {
    log_warn("scheduler", "schedule %" PRId64 ": %s", sc->id, spd_strerror(rc));
  }
  cron_spec_release(&spec);
  return store_runs_add(s, sc->id, due, fire, k, horizon, refill);
}

/* Sets *more when the batch was full: the next tick comes at once. */
static int refill_all(store_t *s, const schedules_tick_t *t, int64_t now, int *more) {
  schedule_list_t l = {0};
  int rc = store_schedules_refill(s, now, REFILL_BATCH, &l);
  *more = l.n == REFILL_BATCH;
  for (size_t i = 0; i < l.n && !rc; i++) {
    rc = materialise(s, t, &l.v[i], now);
    if (rc == -ENOENT) rc = 0; /* deleted meanwhile */
  }
  schedule_list_release(&l);
  return rc;
}

/* ---- firing (store thread) ---- */

/* Fires run r (flow's jobs_fire) and keeps its lag for the metrics. */
static int fire_run(store_t *s, schedules_tick_t *t, const schedule_t *sc, const sched_run_t *r,
                    const char *why, int64_t now) {
  int rc = jobs_fire(s, sc, r, why, now, NULL, &t->change);
  /* A lag that finds no memory is not kept: the metrics are best effort. */
  if (!rc && t->want_lags)
    (void)array_reserve((void **)&t->lags, &t->clags, t->nlags + 1, sizeof(*t->lags));
  if (!rc && t->nlags < t->clags) t->lags[t->nlags++] = (double)(now - r->due_ms) / 1000.0;
  return rc;
}

static int end_run(store_t *s, const sched_run_t *r, run_state_t state, const char *why,
                   int64_t now) {
  int rc = store_run_end(s, r->id, state, 0, why, now);
  if (!rc)
    add_event(s, state == RUN_MISSED ? "run.missed" : "run.skipped", r->schedule_id, 0,
              json_pack("{s:I, s:I, s:s}", "run_id", (json_int_t)r->id, "due_ms",
                        (json_int_t)r->due_ms, "reason", why));
  return rc == -ENOENT ? 0 : rc;
}

/* A run due in one of its schedule's exclusion calendars: skipped, never
 * fired, with the calendar's name. */
static int skip_in_calendar(store_t *s, const sched_run_t *r, const calendar_t *cal,
                            int64_t now) {
  char why[160];
  snprintf(why, sizeof(why), "in calendar '%s'", cal->name);
  int rc = store_run_end(s, r->id, RUN_SKIPPED, 0, why, now);
  if (!rc)
    add_event(s, "run.skipped", r->schedule_id, 0,
              json_pack("{s:I, s:I, s:s, s:s}", "run_id", (json_int_t)r->id, "due_ms",
                        (json_int_t)r->due_ms, "reason", why, "calendar", cal->name));
  return rc == -ENOENT ? 0 : rc;
}

/* The schedule's pending and running jobs. */
static int active_jobs(store_t *s, int64_t schedule_id, job_list_t *out) {
  job_filter_t f = {.schedule_id = schedule_id,
                    .states = 1u << JOB_PENDING | 1u << JOB_RUNNING,
                    .limit = 64};
  return store_jobs_list(s, &f, out);
}

/* A due run under its schedule's overlap policy. */
static int fire_or_hold(store_t *s, schedules_tick_t *t, const schedule_t *sc, const sched_run_t *r,
                        int64_t now) {
  job_list_t active = {0};
  char why[160];
  int rc = 0;
  if (sc->overlap != OVERLAP_ALLOW && (rc = active_jobs(s, sc->id, &active))) return rc;
  if (!active.n) {
    rc = fire_run(s, t, sc, r, r->reason ? "queued behind the previous run" : NULL, now);
    goto out;
  }
  const job_t *prev = &active.v[0];
  switch (sc->overlap) {
  case OVERLAP_SKIP:
    snprintf(why, sizeof(why), "job %s of the previous run is still %s", prev->jobid,
             job_state_name(prev->state));
    rc = end_run(s, r, RUN_SKIPPED, why, now);
    break;
  case OVERLAP_QUEUE: {
    if (r->reason) break; /* waits already */
    /* One run waits; later ones while it waits are skipped, so a slow job
     * does not pile up a backlog behind it. */
    sched_run_list_t up = {0};
    run_filter_t f = {.schedule_id = sc->id, .states = 1u << RUN_UPCOMING, .to_ms = r->due_ms};
    if ((rc = store_runs_list(s, &f, &up))) break;
    int waiting = 0;
    for (size_t i = 0; i < up.n; i++) waiting |= up.v[i].reason != NULL;
    sched_run_list_release(&up);
    if (waiting) {
      rc = end_run(s, r, RUN_SKIPPED, "an earlier run is already queued", now);
    } else {
      snprintf(why, sizeof(why), "waits for job %s", prev->jobid);
      rc = store_run_defer(s, r->id, why);
    }
    break;
  }
  case OVERLAP_REPLACE:
    for (size_t i = 0; i < active.n && !rc; i++) {
      job_t *a = &active.v[i];
      if (a->state == JOB_PENDING) {
        int n = 0;
        rc = jobs_cancel_pending(s, a->project, a->jobid, now, &n, &t->change);
      } else {
        /* Running ones are stopped by the launcher, on the loop. */
        rc = job_list_append(&t->cancel, a, 1);
      }
    }
    if (!rc) rc = fire_run(s, t, sc, r, "replaces the previous run", now);
    break;
  default:
    rc = fire_run(s, t, sc, r, NULL, now);
  }
out:
  job_list_release(&active);
  return rc;
}

/* Runs of sc that went by while no scheduler fired them, under its missed
 * policy: all recorded missed, except the latest one (once) or the latest
 * catchup_max (catch up), which are queued now. Catch-up runs ignore the
 * overlap policy: catching up means running them. */
static int handle_missed(store_t *s, schedules_tick_t *t, const schedule_t *sc,
                         const calendar_set_t *cals, int64_t now) {
  sched_run_list_t l = {0};
  int64_t late = now - t->grace_ms;
  run_filter_t f = {.schedule_id = sc->id, .states = 1u << RUN_UPCOMING, .to_ms = late};
  int rc = store_runs_list(s, &f, &l);
  size_t n = 0;
  for (size_t i = 0; i < l.n; i++)
    if (l.v[i].fire_ms < late && !l.v[i].reason) l.v[n++] = l.v[i];
    else sched_run_release(&l.v[i]);
  size_t tail = 0;
  if (sc->missed == MISSED_ONCE) tail = 1;
  if (sc->missed == MISSED_CATCHUP) tail = sc->catchup_max > 0 ? (size_t)sc->catchup_max : 1;
  if (tail > n) tail = n;
  for (size_t i = 0; i < n && !rc; i++) {
    const calendar_t *cal = calendar_set_covers(cals, l.v[i].due_ms);
    if (cal) {
      rc = skip_in_calendar(s, &l.v[i], cal, now);
    } else if (i < n - tail) {
      rc = end_run(s, &l.v[i], RUN_MISSED, "no scheduler was running at its time", now);
    } else {
      rc = fire_run(s, t, sc, &l.v[i],
                    sc->missed == MISSED_ONCE ? "missed; run once now" : "missed; caught up",
                    now);
      if (rc == -ENOENT) rc = 0;
    }
  }
  for (size_t i = 0; i < n; i++) sched_run_release(&l.v[i]);
  free(l.v);
  return rc;
}

/* The calendars of schedule id into *cals, reading the calendars' document
 * once per tick (*doc). */
static int tick_calendars(store_t *s, json_t **doc, int64_t id, calendar_set_t *cals) {
  int rc = *doc ? 0 : calendars_doc(s, doc);
  calendar_set_release(cals);
  return rc ? rc : calendars_set(*doc, id, cals);
}

static int fire_due(store_t *s, schedules_tick_t *t, int64_t now) {
  sched_run_list_t l = {0};
  schedule_t sc;
  calendar_set_t cals = {0};
  json_t *cal_doc = NULL;
  int have = 0, rc = store_runs_due(s, now, FIRE_BATCH, &l);
  int64_t late = now - t->grace_ms, handled_missed = 0;
  schedule_init(&sc);
  for (size_t i = 0; i < l.n && !rc; i++) {
    sched_run_t *r = &l.v[i];
    if (!have || sc.id != r->schedule_id) {
      schedule_release(&sc);
      have = 0;
      rc = store_schedule_get(s, r->schedule_id, &sc);
      if (rc == -ENOENT) {
        rc = 0;
        continue;
      }
      if (!rc) rc = tick_calendars(s, &cal_doc, sc.id, &cals);
      if (rc) break;
      have = 1;
    }
    const calendar_t *cal = calendar_set_covers(&cals, r->due_ms);
    if (sc.paused) {
      rc = end_run(s, r, RUN_SKIPPED, "the schedule is paused", now);
    } else if (r->fire_ms < late && !r->reason) {
      /* The whole missed group of this schedule at once, so the policy
       * sees which run is the latest. */
      if (handled_missed != sc.id) rc = handle_missed(s, t, &sc, &cals, now);
      handled_missed = sc.id;
    } else if (cal) {
      rc = skip_in_calendar(s, r, cal, now);
    } else {
      rc = fire_or_hold(s, t, &sc, r, now);
      if (rc == -ENOENT) rc = 0; /* ended by the missed group above */
    }
  }
  calendar_set_release(&cals);
  json_decref(cal_doc);
  schedule_release(&sc);
  sched_run_list_release(&l);
  return rc;
}

int schedules_tick(store_t *s, void *arg) {
  schedules_tick_t *t = arg;
  int64_t now = clock_wall_ms();
  if (t->release) {
    int rc = store_lease_release(s, LEASE_NAME, t->node, t->token);
    return rc == -ENOENT ? 0 : rc;
  }
  /* A run the store pool repeats after a collision starts afresh. */
  t->leader = 0;
  t->next_ms = 0;
  t->change = (flow_change_t){0};
  t->nlags = 0;
  job_list_release(&t->cancel);
  memset(&t->cancel, 0, sizeof(t->cancel));
  /* Taken inside the tick's own transaction: the fence. */
  int rc = store_lease_acquire(s, LEASE_NAME, t->node, now, t->ttl_ms, &t->token);
  if (rc == -EBUSY) return 0;
  if (rc) return rc;
  t->leader = 1;
  int more = 0;
  if ((rc = refill_all(s, t, now, &more)) || (rc = fire_due(s, t, now)) ||
      (rc = backfills_tick(s, t->node, now, &t->change, &t->cancel))) {
    if (rc != SPD_EFENCED) return rc;
    t->leader = 0; /* another node took the lease while this tick ran */
    t->next_ms = 0;
    return 0;
  }
  sched_run_list_t next = {0};
  if (!(rc = store_runs_due(s, INT64_MAX, 1, &next)) && next.n) t->next_ms = next.v[0].fire_ms;
  if (more) t->next_ms = now; /* schedules still wait for their runs */
  sched_run_list_release(&next);
  return rc;
}
