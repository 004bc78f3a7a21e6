/* A run's health: how an ended job compares with the previous runs like it
 * (items, errors, requests, duration, finish reason, and the share of items
 * that carry each field). The pure part: the rules, their defaults and
 * overrides, and the judgement with its reasons in words. flow/health.c
 * finds the runs and records the result.
 *
 * Ownership: health_judge appends new strings to the caller's array;
 * health_rules_json returns a new object. Nothing else allocates.
 */
#ifndef SPIDERD_CORE_HEALTH_H
#define SPIDERD_CORE_HEALTH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef enum health_level {
  HEALTH_NONE = -1, /* too little history: not rated */
  HEALTH_OK = 0,
  HEALTH_DEGRADED,
  HEALTH_BROKEN,
} health_level_t;

/* The thresholds; every one has a default that needs no configuration. */
typedef struct health_rules {
  int history;             /* N: runs compared with (5); fewer = not rated */
  double items_degraded;   /* items under this share of the usual lowest (0.5) */
  double items_broken;     /* ... under this share: broken (0.1); 0 items always is */
  double errors_ratio;     /* errors over this many times the usual highest (2) */
  int64_t errors_min;      /* ... and at least this many over it (5) */
  double requests_degraded;/* requests under this share of the usual lowest (0.5) */
  double duration_ratio;   /* duration over this many times the usual longest (3) */
  int64_t duration_min_ms; /* ... and at least this much longer (60 s) */
  double field_drop;       /* a field's share of items this far under its usual lowest (0.2) */
  int pause_after;         /* a schedule pauses itself after this many broken runs in a row; 0 = never */
} health_rules_t;

void health_rules_default(health_rules_t *r);

/* Overrides r with the members of o (an object of the names above, with
 * duration_min and errors_min as numbers: seconds and a count). 0, or
 * -EINVAL with why naming the member. o NULL = nothing to change. */
int health_rules_apply(health_rules_t *r, const json_t *o, char *why, size_t whylen);

/* r as an object of the names health_rules_apply takes. */
json_t *health_rules_json(const health_rules_t *r);

/* What one run yielded. */
typedef struct health_run {
  int64_t items, errors, requests, duration_ms;
  const char *finish_reason; /* borrowed; NULL = unknown */
  const json_t *fields;      /* borrowed: field -> share of sampled items (0..1); NULL = no sample */
} health_run_t;

/* The counts of a run from its stats (spiderd_runner's items, errors and
 * requests, else Scrapy's item_scraped_count, log_count/ERROR and
 * downloader/request_count; item_fields), and its duration. */
void health_run_from_stats(const json_t *stats, int64_t start_ms, int64_t end_ms,
                           health_run_t *out);

/* Judges run `now` against hist[0..n) (n >= r->history, else HEALTH_NONE):
 * appends a sentence per finding to reasons ("items 12, usual 480–520").
 * failed: the run itself ended failed (broken, whatever its counts, once
 * there is history enough). */
health_level_t health_judge(const health_rules_t *r, const health_run_t *now, int failed,
                            const char *failed_why, const health_run_t *hist, size_t n,
                            json_t *reasons);

/* "ok", "degraded", "broken"; NULL for HEALTH_NONE. */
const char *health_name(health_level_t l);

#endif
