/* Runs that check themselves (flow/health.h). */
#include "flow/health.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "flow/schedules.h"
#include "log.h"

/* The bytes of an items file read at most: a few huge items must not make
 * an end slow. */
#define SAMPLE_BYTES_MAX (8 << 20)
/* Jobs of a spider read to find the runs with the same arguments. */
#define SAME_ARGS_SCAN 100

/* ---- the items' fields ---- */

static int field_filled(const json_t *v) {
  if (!v || json_is_null(v)) return 0;
  if (json_is_string(v)) return json_string_length(v) > 0;
  return 1;
}

json_t *health_item_fields(const char *path) {
  FILE *f = path ? fopen(path, "re") : NULL;
  if (!f) return NULL;
  json_t *counts = json_object();
  char *line = NULL;
  size_t cap = 0, bytes = 0;
  ssize_t n;
  int items = 0;
  while (counts && items < HEALTH_SAMPLE_LINES && bytes < SAMPLE_BYTES_MAX &&
         (n = getline(&line, &cap, f)) > 0) {
    bytes += (size_t)n;
    json_t *item = json_loadb(line, (size_t)n, JSON_DECODE_ANY, NULL);
    if (json_is_object(item)) {
      items++;
      const char *k;
      json_t *v;
      json_object_foreach(item, k, v) {
        json_int_t c = json_integer_value(json_object_get(counts, k));
        if (field_filled(v)) json_object_set_new(counts, k, json_integer(c + 1));
        else if (!json_object_get(counts, k)) json_object_set_new(counts, k, json_integer(0));
      }
    }
    json_decref(item);
  }
  free(line);
  fclose(f);
  if (!counts || !items) {
    json_decref(counts);
    return NULL;
  }
  const char *k;
  json_t *v;
  json_object_foreach(counts, k, v) {
    double share = (double)json_integer_value(v) / items;
    json_object_set_new(counts, k, json_real((double)(int)(share * 1000 + 0.5) / 1000));
  }
  return counts;
}

/* ---- the rules ---- */

static void rules_key(char *buf, size_t len, const char *project, int64_t schedule_id) {
  if (schedule_id) snprintf(buf, len, "health.schedule.%lld", (long long)schedule_id);
  else snprintf(buf, len, "health.project.%s", project);
}

int health_rules_own(store_t *s, const char *project, int64_t schedule_id, json_t **out) {
  char key[300], *v = NULL;
  *out = NULL;
  rules_key(key, sizeof(key), project, schedule_id);
  int rc = store_meta_get(s, key, &v);
  if (rc && rc != -ENOENT) return rc;
  if (v && *v) *out = json_loads(v, 0, NULL);
  free(v);
  if (!json_is_object(*out)) {
    json_decref(*out);
    *out = json_object();
  }
  return *out ? 0 : -ENOMEM;
}

int health_rules_set(store_t *s, const char *project, int64_t schedule_id, const json_t *rules,
                     char *why, size_t whylen) {
  health_rules_t check;
  health_rules_default(&check);
  int rc = health_rules_apply(&check, rules, why, whylen);
  if (rc) return rc;
  char key[300];
  rules_key(key, sizeof(key), project, schedule_id);
  char *v = rules && json_object_size(rules) ? json_dumps(rules, JSON_COMPACT) : strdup("");
  rc = v ? store_meta_set(s, key, v) : -ENOMEM;
  free(v);
  return rc;
}

int health_rules_for(store_t *s, const char *project, int64_t schedule_id, health_rules_t *out) {
  char why[128];
  json_t *own = NULL;
  health_rules_default(out);
  int rc = health_rules_own(s, project, 0, &own);
  /* A set that no longer applies (set by another version) is passed over. */
  if (!rc && health_rules_apply(out, own, why, sizeof(why)))
    log_warn("health", "project '%s': %s", project, why);
  json_decref(own);
  own = NULL;
  if (!rc && schedule_id) rc = health_rules_own(s, NULL, schedule_id, &own);
  if (!rc && schedule_id && health_rules_apply(out, own, why, sizeof(why)))
    log_warn("health", "schedule #%lld: %s", (long long)schedule_id, why);
  json_decref(own);
  return rc;
}

/* ---- the runs like it ---- */

/* Does o count as a run like j? Broken runs do not: what is usual is what
 * the runs that worked yielded. */
static int like(const job_t *j, const job_t *o) {
  if (o->health && !strcmp(o->health, "broken")) return 0;
  return j->schedule_id || (!o->schedule_id && json_equal(o->args, j->args));
}

/* The previous finished runs like j, newest first, at most max, into l. */
static int runs_like(store_t *s, const job_t *j, size_t max, job_list_t *l) {
  job_filter_t f = {.project = j->project, .spider = j->spider, .schedule_id = j->schedule_id,
                    .states = 1u << JOB_FINISHED, .before_id = j->id, .newest_first = 1,
                    .ended_first = !j->schedule_id, .test = -1, .limit = SAME_ARGS_SCAN};
  int rc = store_jobs_list(s, &f, l);
  if (rc) return rc;
  size_t kept = 0;
  for (size_t i = 0; i < l->n; i++) {
    job_t *o = &l->v[i];
    if (kept < max && like(j, o)) {
      if (kept != i) {
        l->v[kept] = *o;
        job_init(o);
      }
      kept++;
    } else {
      job_release(o);
    }
  }
  l->n = kept;
  return 0;
}

/* The last `k` runs of j's schedule (j included) were all broken. */
static int broken_in_a_row(store_t *s, const job_t *j, int k, int *yes) {
  job_list_t l = {0};
  job_filter_t f = {.project = j->project, .schedule_id = j->schedule_id,
                    .states = 1u << JOB_FINISHED | 1u << JOB_FAILED, .before_id = j->id,
                    .newest_first = 1, .limit = (size_t)k - 1};
  int rc = k > 1 ? store_jobs_list(s, &f, &l) : 0;
  *yes = !rc && l.n == (size_t)k - 1;
  for (size_t i = 0; *yes && i < l.n; i++)
    *yes = l.v[i].health && !strcmp(l.v[i].health, "broken");
  job_list_release(&l);
  return rc;
}

static int self_pause(store_t *s, const job_t *j, int64_t now_ms, int k,
                      const json_t *reasons, flow_change_t *c) {
  char key[24], why[600];
  const char *first = json_string_value(json_array_get(reasons, 0));
  snprintf(key, sizeof(key), "%lld", (long long)j->schedule_id);
  snprintf(why, sizeof(why), "%d broken runs in a row (the last, job '%s': %s)", k, j->jobid,
           first ? first : "broken");
  schedule_t sc;
  char err[256];
  int rc = schedules_pause_noted(s, key, NULL, 1, "spiderd", why, now_ms, &sc, err,
                                 sizeof(err), c);
  if (rc == SPD_ENOSCHEDULE) return 0; /* deleted meanwhile */
  if (!rc) {
    log_warn("health", "schedule '%s' paused itself: %s", sc.name, why);
    schedule_release(&sc);
  }
  return rc;
}

/* ---- the rating ---- */

static int rate_event(store_t *s, const job_t *j, health_level_t l, const json_t *reasons) {
  json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:O}", "project", j->project, "spider", j->spider,
                        "jobid", j->jobid, "health", health_name(l), "reasons", reasons);
  event_t e = {.type = l == HEALTH_BROKEN ? "job.broken" : "job.degraded",
               .schedule_id = j->schedule_id, .job_id = j->id, .data = d};
  int rc = d ? store_event_add(s, &e) : -ENOMEM;
  json_decref(d);
  return rc;
}

int health_rate(store_t *s, const job_t *j, job_state_t state, const json_t *stats,
                int64_t end_ms, const char *end_reason, health_verdict_t *v) {
  *v = (health_verdict_t){.level = HEALTH_NONE};
  /* A test run stops at its limits by design: it is not rated. */
  if (j->test || (state != JOB_FINISHED && state != JOB_FAILED)) return 0;
  health_rules_t r;
  job_list_t l = {0};
  int rc = health_rules_for(s, j->project, j->schedule_id, &r);
  if (!rc) rc = runs_like(s, j, (size_t)r.history, &l);
  health_run_t *hist = rc ? NULL : calloc(l.n + 1, sizeof(*hist));
  v->reasons = json_array();
  if (!rc && (!hist || !v->reasons)) rc = -ENOMEM;
  if (!rc) {
    for (size_t i = 0; i < l.n; i++)
      health_run_from_stats(l.v[i].stats, l.v[i].start_ms, l.v[i].end_ms, &hist[i]);
    health_run_t now;
    health_run_from_stats(stats, j->start_ms, end_ms, &now);
    char failed_why[64] = "";
    if (end_reason) snprintf(failed_why, sizeof(failed_why), "%s", end_reason);
    v->level = health_judge(&r, &now, state == JOB_FAILED, *failed_why ? failed_why : NULL,
                            hist, l.n, v->reasons);
    v->pause_after = r.pause_after;
    rc = store_job_set_health(s, j->id, health_name(v->level),
                              v->level == HEALTH_NONE ? NULL : v->reasons);
  }
  free(hist);
  job_list_release(&l);
  if (rc) health_verdict_release(v);
  return rc;
}

int health_announce(store_t *s, const job_t *j, int64_t end_ms, const health_verdict_t *v,
                    flow_change_t *c) {
  int rc = 0;
  if (v->level == HEALTH_DEGRADED || v->level == HEALTH_BROKEN)
    rc = rate_event(s, j, v->level, v->reasons);
  if (!rc && v->level == HEALTH_BROKEN && j->schedule_id && v->pause_after > 0) {
    int yes = 0;
    rc = broken_in_a_row(s, j, v->pause_after, &yes);
    if (!rc && yes) rc = self_pause(s, j, end_ms, v->pause_after, v->reasons, c);
  }
  return rc;
}

void health_verdict_release(health_verdict_t *v) {
  json_decref(v->reasons);
  v->reasons = NULL;
}
