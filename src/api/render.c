#include "api/render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "flow/jobs.h"
#include "strbuf.h"

/* jansson writes \u escapes in upper case; Python in lower case. Only the
 * hex digits of real escapes change: a "\\u" is an escaped backslash
 * followed by 'u' and must stay. */
static void lower_unicode_escapes(char *s) {
  for (char *p = s; *p; p++) {
    if (*p != '\\') continue;
    if (p[1] == 'u') {
      for (int i = 2; i < 6 && p[i]; i++)
        if (p[i] >= 'A' && p[i] <= 'F') p[i] = (char)(p[i] - 'A' + 'a');
      p += 5;
    } else if (p[1]) {
      p++;
    }
  }
}

/* jansson writes DEL (0x7f) as it is; Python's ensure_ascii escapes it.
 * It can only stand inside a string. Takes s; NULL when out of memory. */
static char *escape_del(char *s) {
  size_t n = 0, len = strlen(s);
  for (char *p = s; *p; p++) n += *p == 0x7f;
  if (!n) return s;
  char *out = malloc(len + 5 * n + 1), *w = out;
  if (out) {
    for (char *p = s; *p; p++) {
      if (*p == 0x7f) {
        memcpy(w, "\\u007f", 6);
        w += 6;
      } else {
        *w++ = *p;
      }
    }
    *w = '\0';
  }
  free(s);
  return out;
}

char *render_json(const json_t *o, size_t *len) {
  char *s = json_dumps(o, JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
  if (!s) return NULL;
  lower_unicode_escapes(s);
  if (!(s = escape_del(s))) return NULL;
  size_t n = strlen(s);
  char *out = realloc(s, n + 2);
  if (!out) {
    free(s);
    return NULL;
  }
  out[n] = '\n';
  out[n + 1] = '\0';
  if (len) *len = n + 1;
  return out;
}

char *render_json_string(const char *s) {
  json_t *j = json_string(s);
  if (!j) return NULL;
  char *out = json_dumps(j, JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
  json_decref(j);
  if (out) lower_unicode_escapes(out);
  return out ? escape_del(out) : NULL;
}

void render_time(int64_t ms, int micro, char out[32]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  localtime_r(&t, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm);
  int frac = (int)(ms % 1000);
  if (micro && frac) snprintf(out + n, 32 - n, ".%06d", frac * 1000);
}

void render_runtime(int64_t ms, char out[32]) {
  if (ms < 0) ms = 0;
  int64_t s = ms / 1000, days = s / 86400;
  s %= 86400;
  /* str(timedelta): "1 day, 2:03:04", "3 days, 0:00:00" */
  if (days)
    snprintf(out, 32, "%lld day%s, %d:%02d:%02d", (long long)days, days == 1 ? "" : "s",
             (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60));
  else
    snprintf(out, 32, "%d:%02d:%02d", (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60));
}

static int file_exists(const char *path) {
  struct stat st;
  return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A job that ran on another node (a shared store): its files are there, and
 * this node's /logs/ and /items/ fetch them from it. */
static int ran_elsewhere(const config_t *cfg, const job_t *j) {
  return j->node && j->start_ms && strcmp(j->node, cfg->node_name) != 0;
}

char *render_log_url(const config_t *cfg, const job_t *j) {
  char *path = jobs_log_path(cfg, j->project, j->spider, j->jobid);
  char *url = NULL;
  if ((file_exists(path) || ran_elsewhere(cfg, j)) &&
      asprintf(&url, "/logs/%s/%s/%s.log", j->project, j->spider, j->jobid) < 0)
    url = NULL;
  free(path);
  return url;
}

char *render_items_url(const config_t *cfg, const job_t *j) {
  char *path = jobs_items_path(cfg, j->project, j->spider, j->jobid);
  char *url = NULL;
  if ((file_exists(path) || ran_elsewhere(cfg, j)) &&
      asprintf(&url, "/items/%s/%s/%s.jl", j->project, j->spider, j->jobid) < 0)
    url = NULL;
  free(path);
  return url;
}

static json_t *str_or_null(char *s) { /* takes s */
  json_t *v = s ? json_string(s) : json_null();
  free(s);
  return v;
}

static json_t *time_or_null(int64_t ms) {
  if (!ms) return json_null();
  char buf[32];
  render_time(ms, 1, buf);
  return json_string(buf);
}

/* The crawl's stats as spiderd reports them; the runner's full dump stays
 * in the store for the REST API. */
static json_t *stats_summary(const json_t *stats) {
  if (!json_is_object(stats)) return json_null();
  static const char *const keys[] = {"items", "requests", "responses", "errors",
                                     "finish_reason", "elapsed"};
  json_t *o = json_object();
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    json_t *v = json_object_get(stats, keys[i]);
    json_object_set(o, keys[i], v ? v : json_null());
  }
  return o;
}

/* spiderd's retry and timeout bookkeeping, as extra fields Scrapyd clients
 * ignore. Values as stored: 0 means the daemon's default (operations.md). */
static void render_job_policy(json_t *o, const job_t *j) {
  json_object_set_new(o, "attempt", json_integer(j->attempt));
  json_object_set_new(o, "max_retries", json_integer(j->max_retries));
  json_object_set_new(o, "retry_of", j->retry_of ? json_integer(j->retry_of) : json_null());
  json_object_set_new(o, "timeout",
                      j->timeout_ms > 0 ? json_real((double)j->timeout_ms / 1000.0) : json_null());
  json_object_set_new(o, "not_before", time_or_null(j->not_before_ms));
}

void render_job_end(json_t *o, const job_t *j) {
  json_object_set_new(o, "exit_code", j->exit_code >= 0 ? json_integer(j->exit_code) : json_null());
  json_object_set_new(o, "signal", j->term_signal ? json_integer(j->term_signal) : json_null());
  json_object_set_new(o, "stats", stats_summary(j->stats));
  /* Set by the launcher when it, not the crawl, ended the job. */
  json_t *reason = json_object_get(j->stats, "end_reason");
  json_object_set_new(o, "end_reason", json_is_string(reason) ? json_incref(reason) : json_null());
  render_job_policy(o, j);
}

static json_t *listjobs_pending(const config_t *cfg, const job_t *j) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_string(j->jobid));
  json_object_set_new(o, "project", json_string(j->project));
  json_object_set_new(o, "spider", json_string(j->spider));
  json_object_set_new(o, "version", j->version ? json_string(j->version) : json_null());
  json_object_set(o, "settings", j->settings ? j->settings : json_object());
  json_object_set(o, "args", j->args ? j->args : json_object());
  json_object_set_new(o, "priority", json_real(j->priority));
  render_job_policy(o, j);
  return o;
}

static json_t *listjobs_running(const config_t *cfg, const job_t *j) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_string(j->jobid));
  json_object_set_new(o, "project", json_string(j->project));
  json_object_set_new(o, "spider", json_string(j->spider));
  json_object_set_new(o, "pid", j->pid ? json_integer(j->pid) : json_null());
  json_object_set_new(o, "start_time", time_or_null(j->start_ms));
  json_object_set_new(o, "log_url", str_or_null(render_log_url(cfg, j)));
  json_object_set_new(o, "items_url", str_or_null(render_items_url(cfg, j)));
  render_job_policy(o, j);
  return o;
}

static json_t *listjobs_finished(const config_t *cfg, const job_t *j) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_string(j->jobid));
  json_object_set_new(o, "project", json_string(j->project));
  json_object_set_new(o, "spider", json_string(j->spider));
  json_object_set_new(o, "start_time", time_or_null(j->start_ms));
  json_object_set_new(o, "end_time", time_or_null(j->end_ms));
  json_object_set_new(o, "log_url", str_or_null(render_log_url(cfg, j)));
  json_object_set_new(o, "items_url", str_or_null(render_items_url(cfg, j)));
  json_object_set_new(o, "state", json_string(job_state_name(j->state)));
  render_job_end(o, j);
  return o;
}

typedef json_t *(*listjobs_entry_fn)(const config_t *cfg, const job_t *j);
static const listjobs_entry_fn listjobs_entry[3] = {listjobs_pending, listjobs_running,
                                                    listjobs_finished};
static const char *const listjobs_key[3] = {"pending", "running", "finished"};

/* Written one job at a time, as json_dumps would write the whole object: a
 * JSON tree of every job took ~3 KB a job (3.5 GB at a million pending) on
 * top of the list and the text. Each job is released once written. */
char *render_listjobs_text(const config_t *cfg, job_list_t lists[3], const char *node_name,
                           size_t *len) {
  strbuf_t b = {0};
  for (int k = 0; k < 3; k++) {
    strbuf_addf(&b, "%s\"%s\": [", k ? "], " : "{", listjobs_key[k]);
    for (size_t i = 0; i < lists[k].n; i++) {
      json_t *o = listjobs_entry[k](cfg, &lists[k].v[i]);
      char *t = o ? json_dumps(o, JSON_ENSURE_ASCII | JSON_ENCODE_ANY) : NULL;
      json_decref(o);
      job_release(&lists[k].v[i]);
      if (!t) {
        strbuf_release(&b);
        return NULL;
      }
      if (i) strbuf_add(&b, ", ", 2);
      strbuf_adds(&b, t);
      free(t);
    }
  }
  char *node = render_json_string(node_name);
  strbuf_addf(&b, "], \"status\": \"ok\", \"node_name\": %s}\n", node ? node : "null");
  free(node);
  if (b.failed || !node) {
    strbuf_release(&b);
    return NULL;
  }
  lower_unicode_escapes(b.p);
  char *out = escape_del(b.p);
  if (out && len) *len = strlen(out);
  return out;
}

int render_read_jobs(store_t *s, const char *project, job_list_t lists[3]) {
  job_filter_t f = {.project = project};
  int rc;
  f.states = 1u << JOB_PENDING;
  if ((rc = store_jobs_list(s, &f, &lists[0]))) return rc;
  f.states = 1u << JOB_RUNNING;
  if ((rc = store_jobs_list(s, &f, &lists[1]))) return rc;
  f.states = (1u << JOB_FINISHED) | (1u << JOB_FAILED) | (1u << JOB_CANCELLED) | (1u << JOB_LOST);
  f.started_only = 1;
  return store_jobs_list(s, &f, &lists[2]);
}
