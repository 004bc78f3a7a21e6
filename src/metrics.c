/* Counters and fixed-bucket histograms, and their Prometheus text format. */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Request and store latencies: 1 ms to 10 s. */
static const double lat_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                    0.25,  0.5,    1,     2.5,  5,     10};
/* Schedule lag: a timer tick to a long stall. */
static const double lag_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};

#define NB(a) (sizeof(a) / sizeof((a)[0]))

typedef struct http_series {
  char *route, *method;
  int status;
  uint64_t count;
} http_series_t;

typedef struct http_route_hist {
  char *route;
  metrics_hist_t h;
} http_route_hist_t;

struct metrics_http {
  http_series_t *s;
  size_t ns, cs;
  http_route_hist_t *r;
  size_t nr, cr;
};

metrics_t *metrics_new(void) {
  metrics_t *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->http = calloc(1, sizeof(*m->http));
  if (!m->http) {
    free(m);
    return NULL;
  }
  metrics_hist_init(&m->schedule_lag, lag_bounds, NB(lag_bounds));
  metrics_hist_init(&m->claim, lat_bounds, NB(lat_bounds));
  metrics_hist_init(&m->store_op[0], lat_bounds, NB(lat_bounds));
  metrics_hist_init(&m->store_op[1], lat_bounds, NB(lat_bounds));
  return m;
}

void metrics_free(metrics_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->http->ns; i++) {
    free(m->http->s[i].route);
    free(m->http->s[i].method);
  }
  for (size_t i = 0; i < m->http->nr; i++) free(m->http->r[i].route);
  free(m->http->s);
  free(m->http->r);
  free(m->http);
  free(m);
}

void metrics_inc(metrics_t *m, uint64_t *counter, uint64_t by) {
  if (m && counter) __atomic_fetch_add(counter, by, __ATOMIC_RELAXED);
}

void metrics_job_ended(metrics_t *m, const char *state) {
  static const char *const names[METRICS_NENDS] = {"finished", "failed", "cancelled", "lost"};
  if (!m || !state) return;
  for (int i = 0; i < METRICS_NENDS; i++)
    if (!strcmp(state, names[i])) metrics_inc(m, &m->jobs_ended[i], 1);
}

static const char *const hook_names[METRICS_NHOOKS] = {
    "job_queued", "job_started", "job_finished", "job_failed",
    "job_cancelled", "job_lost", "job_ended", "job_degraded", "job_broken"};
static const char *const hook_results[METRICS_NHOOK_RESULTS] = {"ok", "failed", "timeout",
                                                                "error", "dropped"};

const char *metrics_hook_name(int hook) {
  return hook >= 0 && hook < METRICS_NHOOKS ? hook_names[hook] : "";
}

const char *metrics_hook_result(int result) {
  return result >= 0 && result < METRICS_NHOOK_RESULTS ? hook_results[result] : "";
}

void metrics_hook(metrics_t *m, int hook, int result) {
  if (!m || hook < 0 || hook >= METRICS_NHOOKS || result < 0 || result >= METRICS_NHOOK_RESULTS)
    return;
  metrics_inc(m, &m->hooks[hook][result], 1);
}

void metrics_hist_init(metrics_hist_t *h, const double *bounds, size_t nb) {
  memset(h, 0, sizeof(*h));
  h->bounds = bounds;
  h->nb = nb > METRICS_MAX_BUCKETS ? METRICS_MAX_BUCKETS : nb;
}

void metrics_hist_observe(metrics_hist_t *h, double v) {
  if (!h) return;
  if (!(v > 0)) v = 0; /* also NaN */
  size_t i = 0;
  while (i < h->nb && v > h->bounds[i]) i++;
  __atomic_fetch_add(&h->counts[i], 1, __ATOMIC_RELAXED);
  double ns = v * 1e9;
  __atomic_fetch_add(&h->sum_ns, ns >= 1.8e19 ? (uint64_t)1.8e19 : (uint64_t)ns,
                     __ATOMIC_RELAXED);
}

/* Room for element n of a growable array *p of *cap elements; 0 when out
 * of memory (the array is left as it was). */
static int room(void **p, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 1;
  size_t c = *cap ? *cap * 2 : 32;
  void *v = realloc(*p, c * size);
  if (!v) return 0;
  *p = v;
  *cap = c;
  return 1;
}

static const char *std_method(const char *m) {
  static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
  for (size_t i = 0; m && i < NB(known); i++)
    if (!strcmp(m, known[i])) return known[i];
  return "other";
}

void metrics_http_observe(metrics_t *m, const char *route, const char *method, int status,
                          double seconds) {
  if (!m) return;
  metrics_http_t *h = m->http;
  if (!route) route = "other";
  method = std_method(method);
  http_series_t *s = NULL;
  for (size_t i = 0; i < h->ns && !s; i++)
    if (h->s[i].status == status && !strcmp(h->s[i].route, route) &&
        !strcmp(h->s[i].method, method))
      s = &h->s[i];
  if (!s) {
    if (!room((void **)&h->s, &h->cs, h->ns, sizeof(*h->s))) return;
    s = &h->s[h->ns];
    s->route = strdup(route);
    s->method = strdup(method);
    s->status = status;
    s->count = 0;
    if (!s->route || !s->method) {
      free(s->route);
      free(s->method);
      return;
    }
    h->ns++;
  }
  s->count++;
  http_route_hist_t *r = NULL;
  for (size_t i = 0; i < h->nr && !r; i++)
    if (!strcmp(h->r[i].route, route)) r = &h->r[i];
  if (!r) {
    if (!room((void **)&h->r, &h->cr, h->nr, sizeof(*h->r))) return;
    r = &h->r[h->nr];
    if (!(r->route = strdup(route))) return;
    metrics_hist_init(&r->h, lat_bounds, NB(lat_bounds));
    h->nr++;
  }
  metrics_hist_observe(&r->h, seconds);
}

/* ---- rendering ---- */

void metrics_family(strbuf_t *b, const char *name, const char *type, const char *help) {
  strbuf_addf(b, "# HELP %s ", name);
  for (const char *p = help; *p; p++) {
    if (*p == '\\') strbuf_adds(b, "\\\\");
    else if (*p == '\n') strbuf_adds(b, "\\n");
    else strbuf_add(b, p, 1);
  }
  strbuf_addf(b, "\n# TYPE %s %s\n", name, type);
}

void metrics_escape(strbuf_t *b, const char *v) {
  for (const char *p = v ? v : ""; *p; p++) {
    if (*p == '\\') strbuf_adds(b, "\\\\");
    else if (*p == '"') strbuf_adds(b, "\\\"");
    else if (*p == '\n') strbuf_adds(b, "\\n");
    else strbuf_add(b, p, 1);
  }
}

static void put_value(strbuf_t *b, double v) {
  if (isnan(v)) strbuf_adds(b, "NaN");
  else if (isinf(v)) strbuf_adds(b, v > 0 ? "+Inf" : "-Inf");
  else if (v == floor(v) && fabs(v) < 1e15) strbuf_addf(b, "%.0f", v);
  else strbuf_addf(b, "%.15g", v);
}

static void put_labels(strbuf_t *b, const char *const *labels, size_t n, const char *le) {
  if (!n && !le) return;
  strbuf_adds(b, "{");
  for (size_t i = 0; i < n; i++) {
    strbuf_addf(b, "%s%s=\"", i ? "," : "", labels[2 * i]);
    metrics_escape(b, labels[2 * i + 1]);
    strbuf_adds(b, "\"");
  }
  if (le) strbuf_addf(b, "%sle=\"%s\"", n ? "," : "", le);
  strbuf_adds(b, "}");
}

void metrics_sample(strbuf_t *b, const char *name, const char *const *labels, size_t nlabels,
                    double value) {
  strbuf_adds(b, name);
  put_labels(b, labels, nlabels, NULL);
  strbuf_adds(b, " ");
  put_value(b, value);
  strbuf_adds(b, "\n");
}

void metrics_hist_render(strbuf_t *b, const char *name, const char *const *labels,
                         size_t nlabels, const metrics_hist_t *h) {
  uint64_t cum = 0;
  char le[32];
  for (size_t i = 0; i <= h->nb; i++) {
    cum += __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
    if (i < h->nb) snprintf(le, sizeof(le), "%g", h->bounds[i]);
    else snprintf(le, sizeof(le), "+Inf");
    strbuf_addf(b, "%s_bucket", name);
    put_labels(b, labels, nlabels, le);
    strbuf_addf(b, " %llu\n", (unsigned long long)cum);
  }
  strbuf_addf(b, "%s_sum", name);
  put_labels(b, labels, nlabels, NULL);
  strbuf_adds(b, " ");
  put_value(b, (double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9);
  strbuf_addf(b, "\n%s_count", name);
  put_labels(b, labels, nlabels, NULL);
  strbuf_addf(b, " %llu\n", (unsigned long long)cum);
}

static double load(const uint64_t *c) { return (double)__atomic_load_n(c, __ATOMIC_RELAXED); }

/* A family of a single sample without labels: its name written once. */
static void one_sample(strbuf_t *b, const char *name, const char *type, const char *help,
                       double v) {
  metrics_family(b, name, type, help);
  metrics_sample(b, name, NULL, 0, v);
}

void metrics_render(const metrics_t *m, strbuf_t *b) {
  static const char *const ends[METRICS_NENDS] = {"finished", "failed", "cancelled", "lost"};
  metrics_family(b, "spiderd_jobs_total", "counter",
                 "Jobs this node's supervisor ended since it started, by final state.");
  for (int i = 0; i < METRICS_NENDS; i++) {
    const char *l[] = {"state", ends[i]};
    metrics_sample(b, "spiderd_jobs_total", l, 1, load(&m->jobs_ended[i]));
  }
  one_sample(b, "spiderd_jobs_started_total", "counter",
             "Jobs this node started (spawned) since it started.", load(&m->jobs_started));
  one_sample(b, "spiderd_jobs_started_warm_total", "counter",
             "Of those, crawls forked from a warm start template.", load(&m->jobs_started_warm));
  one_sample(b, "spiderd_warm_templates", "gauge",
             "Warm start templates this node keeps now (starting or ready).",
             load(&m->warm_templates));
  one_sample(b, "spiderd_jobs_queued_total", "counter",
             "Jobs this node queued (API calls and schedules) since it started.",
             load(&m->jobs_queued));
  /* Only the series that happened: most nodes run no hook at all. */
  metrics_family(b, "spiderd_hooks_total", "counter",
                 "[hooks] commands this node ran since it started, by hook and how they ended.");
  for (int e = 0; e < METRICS_NHOOKS; e++)
    for (int r = 0; r < METRICS_NHOOK_RESULTS; r++) {
      double v = load(&m->hooks[e][r]);
      const char *l[] = {"event", hook_names[e], "result", hook_results[r]};
      if (v > 0) metrics_sample(b, "spiderd_hooks_total", l, 2, v);
    }

  metrics_family(b, "spiderd_schedule_lag_seconds", "histogram",
                 "Delay between a scheduled run's due time and its job being queued.");
  metrics_hist_render(b, "spiderd_schedule_lag_seconds", NULL, 0, &m->schedule_lag);
  metrics_family(b, "spiderd_claim_duration_seconds", "histogram",
                 "Round trip of the launcher's claim of pending jobs.");
  metrics_hist_render(b, "spiderd_claim_duration_seconds", NULL, 0, &m->claim);
  metrics_family(b, "spiderd_store_op_duration_seconds", "histogram",
                 "Store operations: queue wait plus run on the store thread, by kind.");
  for (int k = 0; k < 2; k++) {
    const char *l[] = {"kind", k ? "write" : "read"};
    metrics_hist_render(b, "spiderd_store_op_duration_seconds", l, 1, &m->store_op[k]);
  }

  const metrics_http_t *h = m->http;
  metrics_family(b, "spiderd_http_requests_total", "counter",
                 "HTTP requests answered, by route pattern, method and status.");
  for (size_t i = 0; i < h->ns; i++) {
    char st[16];
    snprintf(st, sizeof(st), "%d", h->s[i].status);
    const char *l[] = {"route", h->s[i].route, "method", h->s[i].method, "status", st};
    metrics_sample(b, "spiderd_http_requests_total", l, 3, (double)h->s[i].count);
  }
  metrics_family(b, "spiderd_http_request_duration_seconds", "histogram",
                 "Time from a request's headers to its reply being queued, by route pattern.");
  for (size_t i = 0; i < h->nr; i++) {
    const char *l[] = {"route", h->r[i].route};
    metrics_hist_render(b, "spiderd_http_request_duration_seconds", l, 1, &h->r[i].h);
  }
}
