/* A run's health beside the runs like it (core/health.h). */
#include "core/health.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void health_rules_default(health_rules_t *r) {
  *r = (health_rules_t){.history = 5, .items_degraded = 0.5, .items_broken = 0.1,
                        .errors_ratio = 2, .errors_min = 5, .requests_degraded = 0.5,
                        .duration_ratio = 3, .duration_min_ms = 60000, .field_drop = 0.2,
                        .pause_after = 0};
}

/* One member: a number in [lo, hi] into *d (a double) or *i (a count). */
static int rule_num(const json_t *o, const char *name, double lo, double hi, double scale,
                    double *d, int64_t *i, int *n, char *why, size_t whylen) {
  json_t *v = json_object_get(o, name);
  if (!v) return 0;
  double x = json_number_value(v);
  if (!json_is_number(v) || !isfinite(x) || x < lo || x > hi) {
    snprintf(why, whylen, "%s must be a number from %g to %g", name, lo, hi);
    return -EINVAL;
  }
  if (d) *d = x;
  if (i) *i = (int64_t)(x * scale);
  if (n) *n = (int)x;
  return 0;
}

static const char *const rule_names[] = {
    "history",        "items_degraded", "items_broken", "errors_ratio", "errors_min",
    "requests_degraded", "duration_ratio", "duration_min", "field_drop", "pause_after"};

int health_rules_apply(health_rules_t *r, const json_t *o, char *why, size_t whylen) {
  if (!o) return 0;
  if (!json_is_object(o)) {
    snprintf(why, whylen, "the health rules must be an object");
    return -EINVAL;
  }
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    size_t i = 0;
    while (i < sizeof(rule_names) / sizeof(*rule_names) && strcmp(rule_names[i], k)) i++;
    if (i == sizeof(rule_names) / sizeof(*rule_names)) {
      snprintf(why, whylen, "unknown health rule '%.64s'", k);
      return -EINVAL;
    }
  }
  health_rules_t t = *r;
  int rc = rule_num(o, "history", 1, 100, 1, NULL, NULL, &t.history, why, whylen);
  if (!rc) rc = rule_num(o, "items_degraded", 0, 1, 1, &t.items_degraded, NULL, NULL, why, whylen);
  if (!rc) rc = rule_num(o, "items_broken", 0, 1, 1, &t.items_broken, NULL, NULL, why, whylen);
  if (!rc) rc = rule_num(o, "errors_ratio", 1, 1e6, 1, &t.errors_ratio, NULL, NULL, why, whylen);
  if (!rc) rc = rule_num(o, "errors_min", 0, 1e12, 1, NULL, &t.errors_min, NULL, why, whylen);
  if (!rc)
    rc = rule_num(o, "requests_degraded", 0, 1, 1, &t.requests_degraded, NULL, NULL, why, whylen);
  if (!rc) rc = rule_num(o, "duration_ratio", 1, 1e6, 1, &t.duration_ratio, NULL, NULL, why, whylen);
  if (!rc)
    rc = rule_num(o, "duration_min", 0, 1e9, 1000, NULL, &t.duration_min_ms, NULL, why, whylen);
  if (!rc) rc = rule_num(o, "field_drop", 0, 1, 1, &t.field_drop, NULL, NULL, why, whylen);
  if (!rc) rc = rule_num(o, "pause_after", 0, 1000, 1, NULL, NULL, &t.pause_after, why, whylen);
  if (!rc) *r = t;
  return rc;
}

json_t *health_rules_json(const health_rules_t *r) {
  return json_pack("{s:i, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:f, s:i}", "history", r->history,
                   "items_degraded", r->items_degraded, "items_broken", r->items_broken,
                   "errors_ratio", r->errors_ratio, "errors_min", (json_int_t)r->errors_min,
                   "requests_degraded", r->requests_degraded, "duration_ratio",
                   r->duration_ratio, "duration_min", r->duration_min_ms / 1000.0,
                   "field_drop", r->field_drop, "pause_after", r->pause_after);
}

static int64_t num_at(const json_t *o, const char *key, int *found) {
  json_t *v = json_object_get(o, key);
  if (json_is_integer(v)) {
    *found = 1;
    return (int64_t)json_integer_value(v);
  }
  if (json_is_real(v)) {
    *found = 1;
    return (int64_t)json_real_value(v);
  }
  return 0;
}

/* The runner's key, else Scrapy's own (top level, or under "scrapy"). */
static int64_t stat_count(const json_t *stats, const char *ours, const char *scrapy) {
  int found = 0;
  int64_t v = num_at(stats, ours, &found);
  if (!found) v = num_at(stats, scrapy, &found);
  if (!found) v = num_at(json_object_get(stats, "scrapy"), scrapy, &found);
  return v;
}

void health_run_from_stats(const json_t *stats, int64_t start_ms, int64_t end_ms,
                           health_run_t *out) {
  *out = (health_run_t){0};
  out->duration_ms = start_ms && end_ms > start_ms ? end_ms - start_ms : 0;
  if (!json_is_object(stats)) return;
  out->items = stat_count(stats, "items", "item_scraped_count");
  out->errors = stat_count(stats, "errors", "log_count/ERROR");
  out->requests = stat_count(stats, "requests", "downloader/request_count");
  out->finish_reason = json_string_value(json_object_get(stats, "finish_reason"));
  json_t *f = json_object_get(stats, "item_fields");
  out->fields = json_is_object(f) ? f : NULL;
}

const char *health_name(health_level_t l) {
  switch (l) {
  case HEALTH_OK: return "ok";
  case HEALTH_DEGRADED: return "degraded";
  case HEALTH_BROKEN: return "broken";
  default: return NULL;
  }
}

static void say(json_t *reasons, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(json_t *reasons, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  json_array_append_new(reasons, json_string(buf));
}

/* "usual 480–520", or "usual 500" when every run gave the same. */
static void usual(char *buf, size_t len, int64_t lo, int64_t hi) {
  if (lo == hi) snprintf(buf, len, "usual %lld", (long long)lo);
  else snprintf(buf, len, "usual %lld\xe2\x80\x93%lld", (long long)lo, (long long)hi);
}

typedef struct range {
  int64_t lo, hi;
} range_t;

#define RANGE_OF(field, hist, n)                                               \
  ({                                                                           \
    range_t r_ = {hist[0].field, hist[0].field};                               \
    for (size_t i_ = 1; i_ < (n); i_++) {                                      \
      if (hist[i_].field < r_.lo) r_.lo = hist[i_].field;                      \
      if (hist[i_].field > r_.hi) r_.hi = hist[i_].field;                      \
    }                                                                          \
    r_;                                                                        \
  })

static health_level_t worse(health_level_t a, health_level_t b) { return a > b ? a : b; }

static health_level_t judge_counts(const health_rules_t *r, const health_run_t *now,
                                   const health_run_t *hist, size_t n, json_t *reasons) {
  health_level_t l = HEALTH_OK;
  char u[96];
  range_t it = RANGE_OF(items, hist, n);
  if (it.lo > 0 && (now->items == 0 || now->items < (double)it.lo * r->items_broken)) {
    usual(u, sizeof(u), it.lo, it.hi);
    say(reasons, "items %lld, %s", (long long)now->items, u);
    l = HEALTH_BROKEN;
  } else if (it.lo > 0 && now->items < (double)it.lo * r->items_degraded) {
    usual(u, sizeof(u), it.lo, it.hi);
    say(reasons, "items %lld, %s", (long long)now->items, u);
    l = HEALTH_DEGRADED;
  }
  range_t er = RANGE_OF(errors, hist, n);
  if (now->errors > (double)er.hi * r->errors_ratio && now->errors >= er.hi + r->errors_min) {
    usual(u, sizeof(u), er.lo, er.hi);
    say(reasons, "errors %lld, %s", (long long)now->errors, u);
    l = worse(l, HEALTH_DEGRADED);
  }
  range_t rq = RANGE_OF(requests, hist, n);
  if (rq.lo > 0 && now->requests < (double)rq.lo * r->requests_degraded) {
    usual(u, sizeof(u), rq.lo, rq.hi);
    say(reasons, "requests %lld, %s", (long long)now->requests, u);
    l = worse(l, HEALTH_DEGRADED);
  }
  range_t du = RANGE_OF(duration_ms, hist, n);
  if (now->duration_ms > (double)du.hi * r->duration_ratio &&
      now->duration_ms >= du.hi + r->duration_min_ms) {
    say(reasons, "duration %llds, usual %lld\xe2\x80\x93%llds", (long long)now->duration_ms / 1000,
        (long long)du.lo / 1000, (long long)du.hi / 1000);
    l = worse(l, HEALTH_DEGRADED);
  }
  return l;
}

/* Every earlier run ended for one reason, and this one for another. */
static health_level_t judge_reason(const health_run_t *now, const health_run_t *hist, size_t n,
                                   json_t *reasons) {
  const char *usual_reason = hist[0].finish_reason;
  for (size_t i = 1; i < n && usual_reason; i++)
    if (!hist[i].finish_reason || strcmp(hist[i].finish_reason, usual_reason)) usual_reason = NULL;
  if (!usual_reason || (now->finish_reason && !strcmp(now->finish_reason, usual_reason)))
    return HEALTH_OK;
  say(reasons, "finish reason %s, usual %s", now->finish_reason ? now->finish_reason : "none",
      usual_reason);
  return HEALTH_DEGRADED;
}

/* A field every earlier sample carried in most items, carried by fewer now. */
static health_level_t judge_fields(const health_rules_t *r, const health_run_t *now,
                                   const health_run_t *hist, size_t n, json_t *reasons) {
  if (!now->fields || now->items == 0 || !hist[0].fields) return HEALTH_OK;
  health_level_t l = HEALTH_OK;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)hist[0].fields, k, v) {
    double lo = json_number_value(v), hi = lo;
    int all = 1;
    for (size_t i = 1; i < n && all; i++) {
      json_t *x = hist[i].fields ? json_object_get(hist[i].fields, k) : NULL;
      if (!json_is_number(x)) all = 0;
      else {
        double d = json_number_value(x);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
      }
    }
    if (!all || lo < 0.5) continue; /* an optional field */
    double share = json_number_value(json_object_get(now->fields, k));
    if (share >= lo - r->field_drop) continue;
    if (hi - lo < 0.005)
      say(reasons, "field %s in %.0f%% of items, usual %.0f%%", k, share * 100, lo * 100);
    else
      say(reasons, "field %s in %.0f%% of items, usual %.0f\xe2\x80\x93%.0f%%", k, share * 100,
          lo * 100, hi * 100);
    l = HEALTH_DEGRADED;
  }
  return l;
}

health_level_t health_judge(const health_rules_t *r, const health_run_t *now, int failed,
                            const char *failed_why, const health_run_t *hist, size_t n,
                            json_t *reasons) {
  /* A run with too little history is not rated, failed or not: its state
   * says it failed, and a spider that never worked has no usual to miss. */
  if (n < (size_t)r->history || n == 0) return HEALTH_NONE;
  if (failed) {
    say(reasons, "the run failed%s%s", failed_why ? ": " : "", failed_why ? failed_why : "");
    return HEALTH_BROKEN;
  }
  health_level_t l = judge_counts(r, now, hist, n, reasons);
  l = worse(l, judge_reason(now, hist, n, reasons));
  return worse(l, judge_fields(r, now, hist, n, reasons));
}
