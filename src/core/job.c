#include "core/job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/array.h"
#include "core/enum.h"

static const char *const state_names[JOB_NSTATES] = {
    "pending", "running", "finished", "failed", "cancelled", "lost", "paused"};

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
  free(j->unique_key);
  free(j->note);
  free(j->health);
  json_decref(j->health_reasons);
  json_decref(j->meta);
  json_decref(j->args);
  json_decref(j->settings);
  json_decref(j->stats);
  json_decref(j->segments);
  json_decref(j->after);
  job_init(j);
}

ARRAY_LIST_RELEASE(job_list_release, job_list_t, job_release)

int job_list_append(job_list_t *out, job_t *v, size_t n) {
  if (n == 0) return 0;
  job_t *nv = realloc(out->v, (out->n + n) * sizeof(*nv));
  if (!nv) return -ENOMEM;
  memcpy(nv + out->n, v, n * sizeof(*v));
  for (size_t i = 0; i < n; i++) job_init(&v[i]);
  out->v = nv;
  out->n += n;
  return 0;
}

ENUM_NAMES(job_state, job_state_t, state_names, JOB_NSTATES)

int job_state_final(job_state_t s) { return s >= JOB_FINISHED && s <= JOB_LOST; }

int job_unique_key_valid(const char *key, char *why, size_t whylen) {
  if (!key || !*key) {
    snprintf(why, whylen, "it must not be empty");
    return 0;
  }
  size_t n = strlen(key);
  if (n > JOB_UNIQUE_KEY_MAX) {
    snprintf(why, whylen, "it is %zu bytes long; at most %d are allowed", n,
             JOB_UNIQUE_KEY_MAX);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char b = (unsigned char)key[i];
    /* U+0080..U+009F are 0xC2 0x80..0x9F in UTF-8. */
    if (b < 0x20 || b == 0x7f ||
        (b == 0xc2 && i + 1 < n && (unsigned char)key[i + 1] >= 0x80 &&
         (unsigned char)key[i + 1] <= 0x9f)) {
      snprintf(why, whylen, "it must not contain control characters (byte %zu)", i);
      return 0;
    }
  }
  return 1;
}

int64_t job_retry_delay_ms(int64_t backoff_ms, int attempt, uint32_t rnd) {
  if (backoff_ms <= 0) return 0;
  int64_t d = backoff_ms;
  /* Doubling stops at the cap, so no shift can overflow. */
  for (int i = 1; i < attempt && d < JOB_RETRY_DELAY_MAX_MS; i++) d *= 2;
  if (d > JOB_RETRY_DELAY_MAX_MS) d = JOB_RETRY_DELAY_MAX_MS;
  return d + (int64_t)((double)d * 0.1 * ((double)rnd / 4294967296.0));
}

#define JOBID_MAX 200

int job_retry_jobid(const char *jobid, int attempt, char *out, size_t cap) {
  char suffix[16];
  if (!jobid || attempt < 2 || cap < JOBID_MAX + 1) return -EINVAL;
  size_t n = strlen(jobid);
  /* Strip the previous retry's own ".r<attempt-1>"; a first attempt's id
   * is the user's, whatever it ends with. */
  size_t d = n;
  while (d > 0 && jobid[d - 1] >= '0' && jobid[d - 1] <= '9') d--;
  if (attempt > 2 && d < n && n - d < 10 && d >= 2 && jobid[d - 1] == 'r' &&
      jobid[d - 2] == '.' && atoi(jobid + d) == attempt - 1)
    n = d - 2;
  int sl = snprintf(suffix, sizeof(suffix), ".r%d", attempt);
  if (sl < 0 || (size_t)sl >= sizeof(suffix)) return -EINVAL;
  if (n + (size_t)sl > JOBID_MAX) {
    n = JOBID_MAX - (size_t)sl;
    /* Back off continuation bytes so a character is never cut in half. */
    while (n > 0 && ((unsigned char)jobid[n] & 0xC0) == 0x80) n--;
  }
  while (n > 0 && jobid[n - 1] == '.') n--;
  if (n == 0) return -EINVAL;
  snprintf(out, cap, "%.*s%s", (int)n, jobid, suffix);
  return 0;
}

json_t *job_time_json(int64_t ms) {
  char buf[40];
  if (!ms) return json_null();
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)(ms % 1000));
  return json_string(buf);
}

static json_t *copy_or_null(const json_t *v) { return v ? json_deep_copy(v) : json_null(); }

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

json_t *job_event_json(const job_t *j) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "id", json_integer(j->id));
  json_object_set_new(o, "jobid", json_string(j->jobid));
  json_object_set_new(o, "project", json_string(j->project));
  json_object_set_new(o, "spider", json_string(j->spider));
  json_object_set_new(o, "version", str_or_null(j->version));
  json_object_set_new(o, "state", json_string(job_state_name(j->state)));
  json_object_set_new(o, "node", str_or_null(j->node));
  json_object_set_new(o, "priority", json_real(j->priority));
  json_object_set_new(o, "attempt", json_integer(j->attempt));
  json_object_set_new(o, "exit_code", j->exit_code >= 0 ? json_integer(j->exit_code) : json_null());
  json_object_set_new(o, "signal", j->term_signal ? json_integer(j->term_signal) : json_null());
  json_object_set_new(o, "created_ms", json_integer(j->created_ms));
  json_object_set_new(o, "start_ms", j->start_ms ? json_integer(j->start_ms) : json_null());
  json_object_set_new(o, "end_ms", j->end_ms ? json_integer(j->end_ms) : json_null());
  json_object_set_new(o, "created_time", job_time_json(j->created_ms));
  json_object_set_new(o, "start_time", job_time_json(j->start_ms));
  json_object_set_new(o, "end_time", job_time_json(j->end_ms));
  json_object_set_new(o, "schedule_id", json_integer(j->schedule_id));
  json_object_set_new(o, "parent_id", json_integer(j->parent_id));
  json_object_set_new(o, "test", json_boolean(j->test));
  json_object_set_new(o, "args", copy_or_null(j->args));
  json_object_set_new(o, "settings", copy_or_null(j->settings));
  json_object_set_new(o, "stats", copy_or_null(j->stats));
  json_object_set_new(o, "health", str_or_null(j->health));
  json_object_set_new(o, "health_reasons", copy_or_null(j->health_reasons));
  return o;
}

/* RFC 7396, section 2: target is an object (made one when it is not). */
static json_t *merge_value(json_t *target, const json_t *patch) {
  if (!json_is_object(patch)) return json_deep_copy(patch);
  json_t *t = json_is_object(target) ? json_incref(target) : json_object();
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)patch, k, v) {
    if (!t) return NULL;
    if (json_is_null(v)) {
      json_object_del(t, k);
      continue;
    }
    json_t *m = merge_value(json_object_get(t, k), v);
    if (!m || json_object_set_new(t, k, m)) {
      json_decref(t);
      return NULL;
    }
  }
  return t;
}

int job_meta_merge(json_t **meta, const json_t *patch) {
  if (!json_is_object(patch)) return -EINVAL;
  /* Merged into a copy: a failure leaves *meta as it was. */
  json_t *base = *meta ? json_deep_copy(*meta) : json_object();
  if (!base) return -ENOMEM;
  json_t *m = merge_value(base, patch);
  json_decref(base);
  if (!m) return -ENOMEM;
  json_decref(*meta);
  *meta = m;
  return 0;
}
