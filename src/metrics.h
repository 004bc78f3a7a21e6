/* The daemon's own measurements, rendered in the Prometheus text exposition
 * format 0.0.4 by GET /metrics (api/metrics.c).
 *
 * Counters and histograms here are updated with relaxed atomics, so store
 * threads may observe (store op durations) while the loop renders; the HTTP
 * series, keyed by route, method and status, are loop-thread only.
 * Histograms have fixed buckets (upper bounds in the metric's base unit).
 *
 * Ownership: metrics_new() returns a struct that metrics_free() frees; the
 * render functions append to a caller's strbuf.
 */
#ifndef SPIDERD_METRICS_H
#define SPIDERD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

#define METRICS_MAX_BUCKETS 16

typedef struct metrics_hist {
  const double *bounds; /* ascending upper bounds; +Inf is implicit */
  size_t nb;
  uint64_t counts[METRICS_MAX_BUCKETS + 1]; /* per bucket, not cumulative; [nb] = +Inf */
  uint64_t sum_ns;                          /* sum of observations, in 1e-9 units */
} metrics_hist_t;

/* Which end a job met on this node (spiderd_jobs_total{state}). */
enum { METRICS_END_FINISHED, METRICS_END_FAILED, METRICS_END_CANCELLED, METRICS_END_LOST,
       METRICS_NENDS };

/* The [hooks] keys (run/hooks.h), and how a hook's run ended
 * (spiderd_hooks_total{event,result}). */
enum { METRICS_HOOK_QUEUED, METRICS_HOOK_STARTED, METRICS_HOOK_FINISHED, METRICS_HOOK_FAILED,
       METRICS_HOOK_CANCELLED, METRICS_HOOK_LOST, METRICS_HOOK_ENDED, METRICS_HOOK_DEGRADED,
       METRICS_HOOK_BROKEN, METRICS_NHOOKS };
enum { METRICS_HOOK_OK, METRICS_HOOK_NONZERO, METRICS_HOOK_TIMEOUT, METRICS_HOOK_ERROR,
       METRICS_HOOK_DROPPED, METRICS_NHOOK_RESULTS };

typedef struct metrics_http metrics_http_t;

typedef struct metrics {
  uint64_t jobs_ended[METRICS_NENDS];
  uint64_t jobs_started;
  uint64_t jobs_started_warm; /* of which forked from a warm start template */
  uint64_t warm_templates;    /* gauge: templates alive (run/warm.c) */
  uint64_t jobs_queued;
  uint64_t hooks[METRICS_NHOOKS][METRICS_NHOOK_RESULTS];
  metrics_hist_t schedule_lag;  /* seconds */
  metrics_hist_t claim;         /* seconds */
  metrics_hist_t store_op[2];   /* [0] read, [1] write (STORE_READ, STORE_WRITE) */
  metrics_http_t *http;         /* loop thread only */
} metrics_t;

/* NULL when out of memory. */
metrics_t *metrics_new(void);
void metrics_free(metrics_t *m);

/* Every function below does nothing when m is NULL, so that a module
 * started without metrics (a unit test) needs no checks. */
void metrics_inc(metrics_t *m, uint64_t *counter, uint64_t by);
/* A job ended here; state is a job_state name ("finished", "failed",
 * "cancelled", "lost"); others are ignored. */
void metrics_job_ended(metrics_t *m, const char *state);
/* A hook (METRICS_HOOK_QUEUED...) ran, with result METRICS_HOOK_OK...;
 * out-of-range values are ignored. */
void metrics_hook(metrics_t *m, int hook, int result);
/* The [hooks] key of a hook, and a result's label ("ok", "failed",
 * "timeout", "error", "dropped"); "" when out of range. */
const char *metrics_hook_name(int hook);
const char *metrics_hook_result(int result);

/* Sets up h with bounds (static storage; at most METRICS_MAX_BUCKETS). */
void metrics_hist_init(metrics_hist_t *h, const double *bounds, size_t nb);
/* Any thread. A negative value counts as 0. */
void metrics_hist_observe(metrics_hist_t *h, double value);

/* Loop thread: one HTTP request answered. route is the matched route
 * pattern (low cardinality by construction), method the request's (kept
 * only when it is a standard one, else "other"). */
void metrics_http_observe(metrics_t *m, const char *route, const char *method, int status,
                          double seconds);

/* ---- rendering ---- */

/* "# HELP name help\n# TYPE name type\n" (help escaped). */
void metrics_family(strbuf_t *b, const char *name, const char *type, const char *help);
/* Appends v escaped as a label value (\\, \", \n). */
void metrics_escape(strbuf_t *b, const char *v);
/* A sample: name{labels} value\n; labels is NULL or an array of
 * nlabels key/value pairs (values escaped). */
void metrics_sample(strbuf_t *b, const char *name, const char *const *labels, size_t nlabels,
                    double value);
/* The _bucket, _sum and _count samples of h (cumulative buckets, le="+Inf"
 * equal to _count); labels as for metrics_sample, le added last. */
void metrics_hist_render(strbuf_t *b, const char *name, const char *const *labels,
                         size_t nlabels, const metrics_hist_t *h);
/* Every counter and histogram of m, with HELP and TYPE lines. */
void metrics_render(const metrics_t *m, strbuf_t *b);

#endif
