/* A schedule's changes and their events (flow/schedules.h). */
#include "flow/schedules.h"
#include "flow/health.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cron.h"
#include "core/principal.h"
#include "error.h"
#include "flow/calendars.h"

/* ---- reading the fields of a create or an update ---- */

static int set_str(char **dst, const char *v) {
  char *copy = v ? strdup(v) : NULL;
  if (v && !copy) return -ENOMEM;
  free(*dst);
  *dst = copy;
  return 0;
}

static void set_json(json_t **dst, const json_t *v) {
  json_decref(*dst);
  *dst = v && !json_is_null(v) ? json_deep_copy(v) : NULL;
}

/* Seconds (a number >= 0) as ms; SPD_EBADPARAM with a message when not. */
static int seconds_field(const json_t *p, const char *key, int64_t *out, char *err, size_t len) {
  const json_t *v = json_object_get(p, key);
  if (!v || json_is_null(v)) return 0;
  double d = json_number_value(v);
  if (!isfinite(d) || d < 0 || d > 1e12) {
    snprintf(err, len, "'%s' must be a number of seconds >= 0", key);
    return SPD_EBADPARAM;
  }
  *out = (int64_t)llround(d * 1000.0);
  return 0;
}

static int time_field(const json_t *p, const char *key, const char *tz, int64_t *out, char *err,
                      size_t len) {
  const json_t *v = json_object_get(p, key);
  if (!v || json_is_null(v)) return 0;
  char why[200] = "";
  if (cron_parse_iso(json_string_value(v), tz, out, why, sizeof(why))) {
    snprintf(err, len, "'%s': %s", key, why);
    return SPD_EBADPARAM;
  }
  return 0;
}

/* cron, interval or at: exactly one for a new schedule, at most one for a
 * stored one. */
static int timing_fields(schedule_t *sc, const json_t *p, char *err, size_t len) {
  const char *s;
  int rc = 0;
  int timings = !!json_object_get(p, "cron") + !!json_object_get(p, "interval") +
                !!json_object_get(p, "at");
  if (timings > 1 || (!sc->id && timings == 0)) {
    snprintf(err, len, "give exactly one of 'cron', 'interval' (seconds) or 'at' (a time)");
    return SPD_EBADPARAM;
  }
  if ((s = json_string_value(json_object_get(p, "cron")))) {
    sc->kind = SCHED_CRON;
    return set_str(&sc->expr, s);
  }
  if (json_object_get(p, "interval")) {
    double d = json_number_value(json_object_get(p, "interval"));
    if (!isfinite(d) || d < 0.001 || d > 1e10) {
      snprintf(err, len, "'interval' must be a number of seconds > 0");
      return SPD_EBADPARAM;
    }
    sc->kind = SCHED_INTERVAL;
    sc->interval_ms = (int64_t)llround(d * 1000.0);
    set_str(&sc->expr, NULL);
  } else if (json_string_value(json_object_get(p, "at"))) {
    sc->kind = SCHED_ONCE;
    if ((rc = time_field(p, "at", sc->tz, &sc->once_ms, err, len))) return rc;
    set_str(&sc->expr, NULL);
  }
  return 0;
}

static int webhooks_field(schedule_t *sc, const json_t *v, char *err, size_t len) {
  size_t i;
  const json_t *u;
  json_array_foreach(v, i, u) {
    const char *url = json_string_value(u);
    if (!url || strlen(url) > 2048 ||
        (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) || strpbrk(url, " \r\n")) {
      snprintf(err, len, "'webhooks' must be http:// or https:// URLs ('%.80s' is not)",
               url ? url : "");
      return SPD_EBADPARAM;
    }
  }
  set_json(&sc->webhooks, v);
  return 0;
}

/* The fields after the timing: policies, the job's settings, hooks. */
static int policy_fields(schedule_t *sc, const json_t *p, char *err, size_t len) {
  const char *s;
  const json_t *v;
  int rc;
  if ((rc = time_field(p, "start", sc->tz, &sc->start_ms, err, len)) ||
      (rc = time_field(p, "end", sc->tz, &sc->end_ms, err, len)) ||
      (rc = seconds_field(p, "jitter", &sc->jitter_ms, err, len)) ||
      (rc = seconds_field(p, "timeout", &sc->timeout_ms, err, len)) ||
      (rc = seconds_field(p, "retry_backoff", &sc->retry_backoff_ms, err, len)))
    return rc;
  if ((s = json_string_value(json_object_get(p, "overlap"))) &&
      sched_overlap_parse(s, &sc->overlap)) {
    snprintf(err, len, "'overlap' must be allow, skip, queue or replace, not '%s'", s);
    return SPD_EBADPARAM;
  }
  if ((s = json_string_value(json_object_get(p, "missed"))) && sched_missed_parse(s, &sc->missed)) {
    snprintf(err, len, "'missed' must be skip, once or catchup, not '%s'", s);
    return SPD_EBADPARAM;
  }
  if ((v = json_object_get(p, "catchup_max"))) sc->catchup_max = (int)json_integer_value(v);
  if ((v = json_object_get(p, "paused"))) sc->paused = json_is_true(v);
  if ((v = json_object_get(p, "priority"))) sc->priority = json_number_value(v);
  if ((v = json_object_get(p, "retries"))) sc->max_retries = (int)json_integer_value(v);
  if ((v = json_object_get(p, "args"))) set_json(&sc->args, v);
  if ((v = json_object_get(p, "settings"))) set_json(&sc->settings, v);
  if ((v = json_object_get(p, "meta"))) { /* checked by the API: an object, or null */
    if (!json_is_object(v) && !json_is_null(v)) {
      snprintf(err, len, "'meta' must be a JSON object");
      return SPD_EBADPARAM;
    }
    set_json(&sc->meta, v);
  }
  if ((v = json_object_get(p, "webhooks"))) return webhooks_field(sc, v, err, len);
  return 0;
}

int schedules_apply_fields(schedule_t *sc, const json_t *p, char *err, size_t len) {
  const char *s;
  int rc = 0;
#define STR(key, field) \
  if (json_object_get(p, key) && (rc = set_str(&sc->field, json_string_value(json_object_get(p, key))))) return rc
  STR("name", name);
  STR("project", project);
  STR("spider", spider);
  STR("version", version);
#undef STR
  if ((s = json_string_value(json_object_get(p, "tz")))) {
    char canon[CRON_ZONE_MAX];
    if ((rc = cron_zone_check(s, canon, sizeof(canon), err, len))) return rc;
    if ((rc = set_str(&sc->tz, s))) return rc;
  }
  if ((rc = timing_fields(sc, p, err, len)) || (rc = policy_fields(sc, p, err, len))) return rc;
  if (!sc->tz && (rc = set_str(&sc->tz, "UTC"))) return rc;
  /* The whole definition must compute, whatever part changed. */
  cron_spec_t spec;
  if ((rc = schedule_compile(sc, &spec, err, len))) return rc;
  cron_spec_release(&spec);
  return 0;
}

/* ---- finding one ---- */

int schedules_find(store_t *s, const char *key, const char *projects, schedule_t *out,
                   char *err, size_t len) {
  int rc = -ENOENT;
  schedule_init(out);
  if (key[0] >= '0' && key[0] <= '9' && strlen(key) <= 18 &&
      strspn(key, "0123456789") == strlen(key))
    rc = store_schedule_get(s, strtoll(key, NULL, 10), out);
  if (rc == -ENOENT) rc = store_schedule_find(s, key, out);
  /* a schedule of a project the caller may not see is none to it */
  if (!rc && !principal_project_ok(projects, out->project)) rc = -ENOENT;
  if (rc) {
    schedule_release(out);
    schedule_init(out);
  }
  if (rc == -ENOENT) {
    snprintf(err, len, "schedule '%s' not found", key);
    return SPD_ENOSCHEDULE;
  }
  return rc;
}

/* ---- the changes ---- */

/* note (may be NULL): a pause's note, into the event's data. */
static int schedule_event_noted(store_t *s, const char *type, const schedule_t *sc,
                                const json_t *note) {
  event_t e = {.type = (char *)type, .schedule_id = sc->id,
               .data = json_pack("{s:s, s:s, s:s}", "name", sc->name, "project", sc->project,
                                 "spider", sc->spider)};
  if (e.data && note) json_object_set(e.data, "note", (json_t *)note);
  int rc = e.data ? store_event_add(s, &e) : -ENOMEM;
  json_decref(e.data);
  return rc;
}

static int schedule_event(store_t *s, const char *type, const schedule_t *sc) {
  return schedule_event_noted(s, type, sc, NULL);
}

/* The schedule's name is taken: says so. */
static int name_taken(const schedule_t *sc, char *err, size_t len) {
  snprintf(err, len, "a schedule named '%s' exists already", sc->name);
  return SPD_ECONFLICT;
}

int schedules_create(store_t *s, const json_t *fields, schedule_t *out, char *err, size_t len,
                     flow_change_t *ch) {
  schedule_t sc;
  schedule_init(&sc);
  int rc = schedules_apply_fields(&sc, fields, err, len);
  if (!rc && (rc = store_schedule_insert(s, &sc)) == SPD_ECONFLICT) rc = name_taken(&sc, err, len);
  if (!rc && json_object_get(fields, "calendars"))
    rc = calendars_link(s, sc.id, json_object_get(fields, "calendars"), err, len);
  if (!rc) rc = schedule_event(s, "schedule.created", &sc);
  if (rc) {
    schedule_release(&sc);
    return rc;
  }
  ch->schedules = 1;
  *out = sc;
  return 0;
}

int schedules_update(store_t *s, const char *key, const char *projects, const json_t *fields,
                     int64_t now_ms, schedule_t *out, char *err, size_t len, flow_change_t *ch) {
  schedule_t sc;
  int rc = schedules_find(s, key, projects, &sc, err, len);
  if (rc) return rc;
  json_t *p = json_deep_copy(fields);
  json_object_del(p, "schedule");
  rc = p ? schedules_apply_fields(&sc, p, err, len) : -ENOMEM;
  json_decref(p);
  if (rc) goto out;
  sc.updated_ms = now_ms;
  if ((rc = store_schedule_update(s, &sc)) == SPD_ECONFLICT) rc = name_taken(&sc, err, len);
  if (!rc && json_object_get(fields, "calendars"))
    rc = calendars_link(s, sc.id, json_object_get(fields, "calendars"), err, len);
  /* Upcoming runs are recomputed from now: the old definition's are gone. */
  if (!rc) rc = store_runs_clear(s, sc.id, sc.updated_ms);
  if (!rc) rc = schedule_event(s, "schedule.updated", &sc);
  if (rc) goto out;
  sc.horizon_ms = sc.updated_ms;
  ch->schedules = 1;
  *out = sc;
  return 0;
out:
  schedule_release(&sc);
  return rc;
}

int schedules_pause(store_t *s, const char *key, const char *projects, int pause,
                    int64_t now_ms, schedule_t *out, char *err, size_t len, flow_change_t *ch) {
  return schedules_pause_noted(s, key, projects, pause, NULL, NULL, now_ms, out, err, len, ch);
}

/* The pause's note of schedule id, kept beside the schedule (the store's
 * meta table): who paused it, why and when. */
static void pause_note_key(char *buf, size_t len, int64_t id) {
  snprintf(buf, len, "schedule.%lld.pause", (long long)id);
}

int schedules_pause_note(store_t *s, int64_t id, json_t **note) {
  char key[64], *v = NULL;
  *note = NULL;
  pause_note_key(key, sizeof(key), id);
  int rc = store_meta_get(s, key, &v);
  if (rc == -ENOENT) return 0;
  if (!rc && v && *v) *note = json_loads(v, 0, NULL);
  free(v);
  return rc;
}

static int pause_note_set(store_t *s, int64_t id, const json_t *note) {
  char key[64];
  pause_note_key(key, sizeof(key), id);
  char *v = note ? json_dumps(note, JSON_COMPACT) : strdup("");
  int rc = v ? store_meta_set(s, key, v) : -ENOMEM;
  free(v);
  return rc;
}

int schedules_pause_noted(store_t *s, const char *key, const char *projects, int pause,
                          const char *by, const char *why, int64_t now_ms, schedule_t *out,
                          char *err, size_t len, flow_change_t *ch) {
  schedule_t sc;
  int rc = schedules_find(s, key, projects, &sc, err, len);
  if (rc) return rc;
  json_t *note = NULL;
  if (pause && (by || why))
    note = json_pack("{s:s?, s:s?, s:o}", "by", by, "why", why, "at", job_time_json(now_ms));
  if (sc.paused != pause) {
    sc.paused = pause;
    sc.updated_ms = now_ms;
    rc = store_schedule_update(s, &sc);
    /* Paused: no upcoming runs. Resumed: runs from now on; the time it
     * was paused is not a downtime, so nothing in it counts as missed. */
    if (!rc) rc = store_runs_clear(s, sc.id, sc.updated_ms);
    /* A resume drops the note: it told why the schedule was paused. */
    if (!rc) rc = pause_note_set(s, sc.id, note);
    if (!rc)
      rc = schedule_event_noted(s, pause ? "schedule.paused" : "schedule.resumed", &sc, note);
    if (!rc) ch->schedules = 1;
  } else if (pause && note) {
    rc = pause_note_set(s, sc.id, note); /* paused already: the note is amended */
  }
  json_decref(note);
  if (rc) {
    schedule_release(&sc);
    return rc;
  }
  *out = sc;
  return 0;
}

int schedules_delete(store_t *s, const char *key, const char *projects, char *err, size_t len,
                     flow_change_t *ch) {
  schedule_t sc;
  int rc = schedules_find(s, key, projects, &sc, err, len);
  if (rc) return rc;
  rc = store_schedule_delete(s, sc.id);
  if (!rc) rc = calendars_link(s, sc.id, NULL, err, len); /* its references go with it */
  /* Its pause note and health rules go with it. */
  if (!rc) rc = pause_note_set(s, sc.id, NULL);
  if (!rc) rc = health_rules_set(s, NULL, sc.id, NULL, err, len);
  if (!rc) rc = schedule_event(s, "schedule.deleted", &sc);
  if (!rc) ch->schedules = 1;
  schedule_release(&sc);
  return rc;
}

/* ---- state handed from one run to the next ---- */

int schedules_state_set(store_t *s, int64_t id, const char *state, char *err, size_t len) {
  if (state && strlen(state) > SCHEDULES_STATE_MAX) {
    snprintf(err, len, "a scraper's state holds at most %d bytes", SCHEDULES_STATE_MAX);
    return SPD_EBADPARAM;
  }
  int rc = store_schedule_state_set(s, id, state);
  if (rc == -ENOENT) {
    snprintf(err, len, "schedule %lld not found", (long long)id);
    rc = SPD_ENOSCHEDULE;
  }
  return rc;
}

int schedules_state_from_job(store_t *s, int64_t job_id, const char *state, int64_t *schedule_id,
                             char *err, size_t len) {
  job_t j;
  int rc = store_job_get(s, job_id, &j);
  if (rc == -ENOENT) {
    snprintf(err, len, "job %lld not found", (long long)job_id);
    return SPD_ENOJOB;
  }
  if (rc) return rc;
  *schedule_id = j.schedule_id;
  if (!j.schedule_id) {
    snprintf(err, len, "job %lld was not started by a scraper: it has no state to keep",
             (long long)job_id);
    rc = SPD_EBADPARAM;
  } else if (j.test) { /* no part of its scraper's history */
    snprintf(err, len, "job %lld is a test run: it hands no state to its scraper's next run",
             (long long)job_id);
    rc = SPD_EBADPARAM;
  } else {
    rc = schedules_state_set(s, j.schedule_id, state, err, len);
  }
  job_release(&j);
  return rc;
}

int schedules_job_state(store_t *s, job_t *j) {
  char *state = NULL;
  if (!j->schedule_id) return 0;
  int rc = store_schedule_state_get(s, j->schedule_id, &state);
  if (rc == -ENOENT) return 0; /* deleted meanwhile: the job starts from nothing */
  if (rc || !state) return rc;
  if (!j->args) j->args = json_object();
  rc = j->args ? json_object_set_new(j->args, SCHEDULES_STATE_ARG, json_string(state)) : -1;
  free(state);
  return rc ? -ENOMEM : 0;
}
