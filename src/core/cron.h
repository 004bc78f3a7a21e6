/* Schedules: cron expressions, fixed intervals and one-off instants, evaluated
 * in an IANA time zone, and the ISO 8601 conversions the API shows them with.
 *
 * Ownership: a cron_spec_t is caller-allocated; cron_spec_release frees the
 * zone string it owns (after any cron_spec_* call, even a failed one). Every
 * other function writes only into caller-given buffers and keeps no state, so
 * specs may be read from several threads at once.
 *
 * Time is int64 milliseconds since the Unix epoch, UTC. Supported instants
 * lie in years 0001-9999 (CRON_MS_MIN..CRON_MS_MAX); calendar arithmetic is
 * proleptic Gregorian. ICU supplies only UTC offsets and zone transitions.
 *
 * Cron semantics (wall clock in the spec's zone):
 *  - Fields: [second] minute hour day-of-month month day-of-week. Day of month
 *    and day of week combine as in Vixie cron: if either field starts with
 *    '*' (including "*\/2") a day must match both; if neither does, a day
 *    matching either one fires ("0 0 13 * FRI" = every 13th and every Friday).
 *  - Spring-forward gap: every matching wall time that does not exist fires
 *    once, at the first instant after the gap (the transition, e.g. 03:00 in
 *    New York). A spec fires at most once at any instant, so "*\/15 2 * * *"
 *    fires once at 03:00 on that day and "0,30 2-3 * * *" once at 03:00 and
 *    again at 03:30. Two different specs ("30 2 * * *" and "0 3 * * *") each
 *    fire at 03:00; collapsing them is the scheduler's business, not ours.
 *  - Fall-back overlap: a matching wall time that occurs twice fires at its
 *    first occurrence only ... unless the hour field covers all 24 hours
 *    ("*", "0-23", "*\/1"): such specs are fixed-rate in real time and fire at
 *    both occurrences, so "*\/10 * * * *" keeps firing every 10 real minutes
 *    and "0 * * * *" every real hour through the repeated hour.
 *  - A search looks at most CRON_HORIZON_YEARS ahead, so a spec that can
 *    never fire ("0 0 30 2 *") fails fast with -ENOENT.
 *
 * Bounds: start_ms and end_ms are inclusive; fires outside them do not exist.
 */
#ifndef SPIDERD_CORE_CRON_H
#define SPIDERD_CORE_CRON_H

#include <stddef.h>
#include <stdint.h>

#define CRON_MS_MIN (-62135596800000LL)  /* 0001-01-01T00:00:00Z */
#define CRON_MS_MAX 253402300799999LL    /* 9999-12-31T23:59:59.999Z */
#define CRON_NO_START INT64_MIN
#define CRON_NO_END INT64_MAX
#define CRON_HORIZON_YEARS 28            /* one full weekday/leap cycle */
#define CRON_ZONE_MAX 64                 /* longest accepted zone id + 1 */
#define CRON_ISO_MAX 40                  /* buffer that fits any cron_format_iso */

typedef enum {
  CRON_KIND_NONE = 0,
  CRON_KIND_CRON,
  CRON_KIND_INTERVAL,
  CRON_KIND_ONCE,
} cron_kind_t;

#define CRON_DOM_STAR 0x1u /* day-of-month field started with '*' */
#define CRON_DOW_STAR 0x2u /* day-of-week field started with '*' */

typedef struct cron_spec {
  cron_kind_t kind;
  /* CRON: bit n set = value n matches. dow: 0 = Sunday .. 6 (7 folded to 0). */
  uint64_t seconds, minutes;
  uint32_t hours, dom; /* dom bits 1-31 */
  uint16_t months;     /* bits 1-12 */
  uint8_t dow;
  unsigned flags; /* CRON_DOM_STAR | CRON_DOW_STAR */
  /* INTERVAL: fires at anchor + k * interval_ms (k any integer), real time.
   * anchor_ms == CRON_NO_START means "the start bound, else the epoch". */
  int64_t interval_ms, anchor_ms;
  int64_t once_ms;       /* ONCE */
  char *zone;            /* owned; NULL means UTC */
  int64_t start_ms;      /* CRON_NO_START or first allowed fire */
  int64_t end_ms;        /* CRON_NO_END or last allowed fire */
  int64_t jitter_ms;     /* >= 0; for cron_jitter, not applied by cron_next */
} cron_spec_t;

/* Sets every field to "nothing yet": kind NONE, no zone (UTC), no bounds, no
 * jitter. Allocates nothing; safe to call on uninitialised memory. */
void cron_spec_init(cron_spec_t *spec);

/* Frees what spec owns and re-initialises it. NULL is a no-op. */
void cron_spec_release(cron_spec_t *spec);

/* Is zone a known IANA/ICU system zone id ("America/New_York", "UTC",
 * aliases like "US/Eastern" too)? ICU silently treats unknown ids as GMT, so
 * this is the check to run first. Returns 0, or SPD_EBADPARAM with e.g.
 * "unknown time zone 'Mars/Olympus'" in err (err may be NULL). If canon is
 * given, the canonical id is written there (canonlen bytes, truncated). */
int cron_zone_check(const char *zone, char *canon, size_t canonlen, char *err, size_t errlen);

/* Compiles a cron expression (5 fields, 6 with leading seconds, or a macro:
 * @yearly @annually @monthly @weekly @daily @midnight @hourly) in zone
 * (NULL or "" = UTC) into spec, replacing its kind and fields; bounds and
 * jitter are kept. Month names JAN-DEC and day names SUN-SAT are accepted in
 * any case, also in ranges; day of week 7 is Sunday, and SUN closing a range
 * means 7 ("FRI-SUN" = Fri, Sat, Sun). Steps run 1..span of the field.
 * Not supported: L, W, #, ?, @reboot, @every. Returns 0, or
 * SPD_EBADPARAM with a reason naming field and token in err, e.g.
 * "cron: hour: 24 is out of range 0-23"; -ENOMEM. On failure spec keeps its
 * previous kind and fields. */
int cron_spec_parse(cron_spec_t *spec, const char *expr, const char *zone, char *err,
                    size_t errlen);

/* Makes spec an INTERVAL of interval_ms (> 0) anchored at anchor_ms (or
 * CRON_NO_START, see cron_spec_t). zone only affects display. Returns 0 or
 * SPD_EBADPARAM / -ENOMEM with a reason in err. */
int cron_spec_interval(cron_spec_t *spec, int64_t interval_ms, int64_t anchor_ms,
                       const char *zone, char *err, size_t errlen);

/* Makes spec a ONCE at at_ms (within CRON_MS_MIN..CRON_MS_MAX). zone only
 * affects display. Returns 0 or SPD_EBADPARAM / -ENOMEM with a reason. */
int cron_spec_once(cron_spec_t *spec, int64_t at_ms, const char *zone, char *err,
                   size_t errlen);

/* Sets the inclusive bounds (CRON_NO_START / CRON_NO_END for none). Returns 0
 * or SPD_EBADPARAM ("start is after end") leaving spec unchanged. */
int cron_spec_bounds(cron_spec_t *spec, int64_t start_ms, int64_t end_ms, char *err,
                     size_t errlen);

/* First fire time strictly after after_ms, within the bounds, into *next_ms.
 * Returns 0; -ENOENT when there is none (past the end, ONCE already past,
 * nothing within CRON_HORIZON_YEARS); SPD_EBADPARAM for a spec of kind NONE;
 * -ENOMEM if ICU cannot open the zone. */
int cron_next(const cron_spec_t *spec, int64_t after_ms, int64_t *next_ms);

/* Last fire time strictly before before_ms (same rules; cron specs look back
 * at most CRON_HORIZON_YEARS). Costs ~45 cron_next searches. Returns 0,
 * -ENOENT, SPD_EBADPARAM or -ENOMEM. */
int cron_prev(const cron_spec_t *spec, int64_t before_ms, int64_t *prev_ms);

/* Fire times in (from_ms, to_ms], ascending, at most max of them into out
 * (out may be NULL when max is 0). *n gets how many were written; *more (may
 * be NULL) gets 1 when further fires remain in the interval. Each
 * call costs O(*n + 1) searches however long the interval. Returns 0 (also
 * when none), SPD_EBADPARAM or -ENOMEM; *n and *more are set on every return. */
int cron_between(const cron_spec_t *spec, int64_t from_ms, int64_t to_ms, int64_t *out,
                 size_t max, size_t *n, int *more);

/* Deterministic jitter in [0, jitter_ms) for one run, so every node computes
 * the same value: FNV-1a-64 of seed's bytes, xor due_ms, through splitmix64's
 * finaliser, reduced by multiply-high. Returns 0 when jitter_ms <= 0. seed
 * (e.g. the schedule id) may be NULL, meaning "". */
int64_t cron_jitter(int64_t jitter_ms, const char *seed, int64_t due_ms);

/* Writes ms as ISO 8601 / RFC 3339 local time with the zone's offset at that
 * instant, e.g. "2026-03-08T03:00:00-04:00"; ".123" is added only when ms is
 * not a whole second; UTC is "+00:00"; an offset with seconds (local mean
 * time before ~1900) is written "+HH:MM:SS", which cron_parse_iso reads.
 * buf needs CRON_ISO_MAX bytes. zone NULL or "" = UTC. Returns 0,
 * SPD_EBADPARAM (unknown zone, ms out of range, buffer too small), -ENOMEM. */
int cron_format_iso(int64_t ms, const char *zone, char *buf, size_t buflen);

/* Parses "YYYY-MM-DD", "YYYY-MM-DDTHH:MM[:SS[.fraction]]" ('T', 't' or ' '
 * between) with an optional "Z" or "+HH:MM[:SS]" / "+HHMM" / "+HH" suffix into
 * *ms (fraction truncated to ms). A time without offset is wall time in
 * zone (NULL or "" = UTC): a wall time in a DST gap becomes the first instant
 * after the gap, a repeated one its first occurrence (the cron rules). Returns
 * 0, or SPD_EBADPARAM with a reason in err, e.g. "'2026-02-30' is not a valid
 * date", or -ENOMEM. */
int cron_parse_iso(const char *s, const char *zone, int64_t *ms, char *err, size_t errlen);

#endif
