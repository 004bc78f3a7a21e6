#include "core/schedule.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/enum.h"
#include "error.h"

static const char *const kind_names[SCHED_NKINDS] = {"cron", "interval", "once"};
static const char *const overlap_names[OVERLAP_N] = {"allow", "skip", "queue", "replace"};
static const char *const missed_names[MISSED_N] = {"skip", "once", "catchup"};
static const char *const run_names[RUN_NSTATES] = {"upcoming", "fired", "missed", "skipped"};

void schedule_init(schedule_t *s) {
  memset(s, 0, sizeof(*s));
  s->catchup_max = 1;
}

void schedule_release(schedule_t *s) {
  if (!s) return;
  free(s->name);
  free(s->expr);
  free(s->tz);
  free(s->project);
  free(s->spider);
  free(s->version);
  json_decref(s->args);
  json_decref(s->settings);
  json_decref(s->webhooks);
  json_decref(s->meta);
  schedule_init(s);
}

ARRAY_LIST_RELEASE(schedule_list_release, schedule_list_t, schedule_release)

void sched_run_release(sched_run_t *r) {
  if (!r) return;
  free(r->reason);
  memset(r, 0, sizeof(*r));
}

ARRAY_LIST_RELEASE(sched_run_list_release, sched_run_list_t, sched_run_release)

ENUM_NAMES(sched_kind, sched_kind_t, kind_names, SCHED_NKINDS)
ENUM_NAMES(sched_overlap, sched_overlap_t, overlap_names, OVERLAP_N)
ENUM_NAMES(sched_missed, sched_missed_t, missed_names, MISSED_N)
ENUM_NAMES(run_state, run_state_t, run_names, RUN_NSTATES)

int schedule_compile(const schedule_t *sc, cron_spec_t *spec, char *err, size_t errlen) {
  int rc;
  cron_spec_init(spec);
  switch (sc->kind) {
  case SCHED_CRON:
    rc = sc->expr ? cron_spec_parse(spec, sc->expr, sc->tz, err, errlen) : SPD_EBADPARAM;
    break;
  case SCHED_INTERVAL:
    rc = cron_spec_interval(spec, sc->interval_ms, sc->start_ms ? sc->start_ms : sc->created_ms,
                            sc->tz, err, errlen);
    break;
  case SCHED_ONCE:
    rc = cron_spec_once(spec, sc->once_ms, sc->tz, err, errlen);
    break;
  default:
    rc = SPD_EBADPARAM;
  }
  if (rc == SPD_EBADPARAM && err && errlen && !err[0])
    snprintf(err, errlen, "the schedule has no valid timing");
  if (!rc)
    rc = cron_spec_bounds(spec, sc->start_ms ? sc->start_ms : CRON_NO_START,
                          sc->end_ms ? sc->end_ms : CRON_NO_END, err, errlen);
  if (!rc && sc->jitter_ms < 0) {
    snprintf(err, errlen, "jitter must not be negative");
    rc = SPD_EBADPARAM;
  }
  spec->jitter_ms = sc->jitter_ms;
  if (rc) cron_spec_release(spec);
  return rc;
}

static json_t *copy_or_empty(const json_t *v) { return v ? json_deep_copy(v) : json_object(); }

int schedule_job(const schedule_t *sc, const char *jobid, int64_t now_ms, job_t *j) {
  job_init(j);
  j->jobid = strdup(jobid);
  j->project = strdup(sc->project);
  j->spider = strdup(sc->spider);
  j->version = sc->version ? strdup(sc->version) : NULL;
  j->args = copy_or_empty(sc->args);
  j->settings = copy_or_empty(sc->settings);
  /* A copy, not a reference: jobs.meta merges into the job's own. */
  j->meta = sc->meta ? json_deep_copy(sc->meta) : NULL;
  j->priority = sc->priority;
  j->schedule_id = sc->id;
  j->timeout_ms = sc->timeout_ms;
  j->max_retries = sc->max_retries;
  j->retry_backoff_ms = sc->retry_backoff_ms;
  j->created_ms = now_ms;
  if (!j->jobid || !j->project || !j->spider || (sc->version && !j->version) || !j->args ||
      !j->settings || (sc->meta && !j->meta)) {
    job_release(j);
    return -ENOMEM;
  }
  return 0;
}
