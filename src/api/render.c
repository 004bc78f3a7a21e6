#include "api/render.h"

#include <errno.h>
#include <math.h>
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
  json_object_set_new(o, "settings", j->settings ? json_incref(j->settings) : json_object());
  json_object_set_new(o, "args", j->args ? json_incref(j->args) : json_object());
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

/* The length of a string jansson writes as it is (printable ASCII without
 * '"' or '\\'; DEL is escaped by render_json), or -1. */
static long plain_ascii(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  for (; *p; p++)
    if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\') return -1;
  return (long)(p - (const unsigned char *)s);
}

/* Decimal digits of v into the end of buf[24]; returns where they start. */
static char *digits(long long v, char buf[24]) {
  char *p = buf + 23;
  unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  *p = '\0';
  do *--p = (char)('0' + u % 10);
  while (u /= 10);
  if (v < 0) *--p = '-';
  return p;
}

/* A real as jansson writes it (%.17g, ".0" after an integral value), when
 * that needs no exponent; 0 when it does (the row takes jansson's path).
 * Integral values, the usual priorities, without printf. */
static int plain_real(double v, char out[40]) {
  if (v == (double)(long long)v && v > -1e15 && v < 1e15 && !(v == 0 && signbit(v))) {
    char d[24];
    char *p = digits((long long)v, d);
    size_t n = strlen(p);
    memcpy(out, p, n);
    memcpy(out + n, ".0", 3);
    return 1;
  }
  int n = snprintf(out, 40, "%.17g", v);
  if (n <= 0 || n >= 36) return 0;
  for (int i = 0; i < n; i++)
    if (!(out[i] == '-' || out[i] == '.' || (out[i] >= '0' && out[i] <= '9'))) return 0;
  if (!strchr(out, '.')) memcpy(out + n, ".0", 3);
  return 1;
}

/* A JSON object as the row's text holds it: "{}" for an empty one or none,
 * else as render_json writes it. 0 or -ENOMEM. */
static int add_object(strbuf_t *b, const json_t *o) {
  if (!o || (json_is_object(o) && json_object_size(o) == 0)) return strbuf_add(b, "{}", 2);
  char *t = json_dumps(o, JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
  if (!t) return -ENOMEM;
  lower_unicode_escapes(t);
  t = escape_del(t);
  int rc = t ? strbuf_adds(b, t) : -ENOMEM;
  free(t);
  return rc;
}

#define ADD_LIT(b, s) strbuf_add(b, s, sizeof(s) - 1)

static void add_int(strbuf_t *b, long long v) {
  char d[24];
  strbuf_adds(b, digits(v, d));
}

/* A pending job's entry written directly: jansson's tree and text of it
 * cost more than reading the job (a million pending jobs took 9 s to
 * render). The same bytes: 0, or -EAGAIN for what this does not write
 * (escapes, exponents), which listjobs_entry writes. */
static int pending_fast(strbuf_t *b, const job_t *j) {
  char prio[40], timeout[40] = "null", nb[40] = "null";
  long lid = plain_ascii(j->jobid), lpr = plain_ascii(j->project), lsp = plain_ascii(j->spider);
  long lv = j->version ? plain_ascii(j->version) : 0;
  if (lid < 0 || lpr < 0 || lsp < 0 || lv < 0 || !plain_real(j->priority, prio) ||
      (j->timeout_ms > 0 && !plain_real((double)j->timeout_ms / 1000.0, timeout)))
    return -EAGAIN;
  if (j->not_before_ms) {
    nb[0] = '"';
    render_time(j->not_before_ms, 1, nb + 1);
    strcat(nb, "\"");
  }
  ADD_LIT(b, "{\"id\": \"");
  strbuf_add(b, j->jobid, (size_t)lid);
  ADD_LIT(b, "\", \"project\": \"");
  strbuf_add(b, j->project, (size_t)lpr);
  ADD_LIT(b, "\", \"spider\": \"");
  strbuf_add(b, j->spider, (size_t)lsp);
  ADD_LIT(b, "\", \"version\": ");
  if (j->version) {
    ADD_LIT(b, "\"");
    strbuf_add(b, j->version, (size_t)lv);
    ADD_LIT(b, "\"");
  } else {
    ADD_LIT(b, "null");
  }
  ADD_LIT(b, ", \"settings\": ");
  if (add_object(b, j->settings)) return -ENOMEM;
  ADD_LIT(b, ", \"args\": ");
  if (add_object(b, j->args)) return -ENOMEM;
  ADD_LIT(b, ", \"priority\": ");
  strbuf_adds(b, prio);
  ADD_LIT(b, ", \"attempt\": ");
  add_int(b, j->attempt);
  ADD_LIT(b, ", \"max_retries\": ");
  add_int(b, j->max_retries);
  ADD_LIT(b, ", \"retry_of\": ");
  if (j->retry_of) add_int(b, j->retry_of);
  else ADD_LIT(b, "null");
  ADD_LIT(b, ", \"timeout\": ");
  strbuf_adds(b, timeout);
  ADD_LIT(b, ", \"not_before\": ");
  strbuf_adds(b, nb);
  ADD_LIT(b, "}");
  return b->failed ? -ENOMEM : 0;
}

void render_listjobs_open(int group, strbuf_t *b) {
  strbuf_addf(b, "%s\"%s\": [", group ? "], " : "{", listjobs_key[group]);
}

void render_listjobs_row(const config_t *cfg, int group, size_t i, const job_t *j, strbuf_t *b) {
  if (i) strbuf_add(b, ", ", 2);
  if (group == 0) {
    size_t len = b->len;
    int rc = pending_fast(b, j);
    if (rc != -EAGAIN) return; /* written, or b->failed */
    b->len = len;
    if (b->p) b->p[len] = '\0';
  }
  json_t *o = listjobs_entry[group](cfg, j);
  char *t = o ? json_dumps(o, JSON_ENSURE_ASCII | JSON_ENCODE_ANY) : NULL;
  json_decref(o);
  if (t) {
    lower_unicode_escapes(t);
    t = escape_del(t);
  }
  if (t) strbuf_adds(b, t);
  else b->failed = 1;
  free(t);
}

void render_listjobs_tail(const char *node_name, strbuf_t *b) {
  char *node = render_json_string(node_name);
  strbuf_addf(b, "], \"status\": \"ok\", \"node_name\": %s}\n", node ? node : "null");
  if (!node) b->failed = 1;
  free(node);
}
