#include "core/cron.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <unicode/ucal.h>
#include <unicode/ustring.h>

#include "dynlib.h"
#include "error.h"

/* ICU is opened on first use rather than linked: linked, its C++ relocations
 * (and libstdc++'s) keep ~2.5 MB of every daemon resident, also one that
 * has no schedule. The names are ICU's versioned ones (ucal_open_72). */
#define ICU_STR2(x) #x
#define ICU_STR(x) ICU_STR2(x)
#define ICU_FUNCS(X)                                                                      \
  X(u_UCharsToChars) X(u_charsToUChars) X(ucal_close) X(ucal_getCanonicalTimeZoneID)     \
  X(ucal_getTimeZoneTransitionDate) X(ucal_open) X(ucal_setMillis) X(ucal_get)
#define ICU_PTR(fn) static __typeof__(fn) *icu_##fn;
ICU_FUNCS(ICU_PTR)
#define ICU_NAME(fn) ICU_STR(fn), /* the versioned name: u_charsToUChars_72 */
#define ICU_SLOT(fn) (void **)&icu_##fn,
static const char *const icu_names[] = {ICU_FUNCS(ICU_NAME)};
static void **const icu_slots[] = {ICU_FUNCS(ICU_SLOT)};
static dynlib_t icu_lib = DYNLIB_INIT("libicui18n.so." ICU_STR(U_ICU_VERSION_MAJOR_NUM), NULL,
                                      icu_names, icu_slots);

static int icu_ready(void) { return !dynlib_load(&icu_lib, NULL, 0); }

#define MS_PER_DAY 86400000LL
#define HORIZON_MS ((int64_t)CRON_HORIZON_YEARS * 366 * MS_PER_DAY)
#define ALL_HOURS 0xFFFFFFu

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return SPD_EBADPARAM;
}

/* ---- proleptic Gregorian arithmetic (H. Hinnant's algorithms) ------------
 * Our own rather than ICU's fields: ICU's Gregorian calendar switches to
 * Julian before 1582, and these need no allocation or error handling. */

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = floor_div(y, 400);
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d) {
  z += 719468;
  int64_t era = floor_div(z, 146097);
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = (int)(yoe + era * 400 + (*m <= 2));
}

static int is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int y, int m) {
  static const int dim[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : dim[m];
}

/* 1970-01-01 was a Thursday; 0 = Sunday. */
static int weekday(int64_t days) { return (int)(days + 4 - floor_div(days + 4, 7) * 7); }

struct wall {
  int y, mo, d, h, mi, s;
};

static void wall_split(int64_t sec, struct wall *w) {
  int64_t days = floor_div(sec, 86400), rem = sec - days * 86400;
  civil_from_days(days, &w->y, &w->mo, &w->d);
  w->h = (int)(rem / 3600);
  w->mi = (int)(rem / 60 % 60);
  w->s = (int)(rem % 60);
}

static int64_t wall_join(const struct wall *w) {
  return days_from_civil(w->y, w->mo, w->d) * 86400 + w->h * 3600 + w->mi * 60 + w->s;
}

/* ---- zones ---------------------------------------------------------------- */

static const char *zone_or_utc(const char *zone) { return zone && *zone ? zone : "UTC"; }

int cron_zone_check(const char *zone, char *canon, size_t canonlen, char *err, size_t errlen) {
  const char *z = zone_or_utc(zone);
  if (!icu_ready())
    return fail(err, errlen, "time zones are not available: cannot load ICU (libicui18n.so.%d)",
                U_ICU_VERSION_MAJOR_NUM);
  size_t len = strlen(z);
  /* u_charsToUChars is only defined for invariant characters, and every IANA
   * id is made of these. */
  for (size_t i = 0; i < len; i++)
    if (!isalnum((unsigned char)z[i]) && !strchr("/_-+", z[i]))
      return fail(err, errlen, "unknown time zone '%.80s'", z);
  if (len >= CRON_ZONE_MAX) return fail(err, errlen, "unknown time zone '%.80s'", z);
  UChar uz[CRON_ZONE_MAX], out[128];
  icu_u_charsToUChars(z, uz, (int32_t)len + 1);
  UBool sys = 0;
  UErrorCode st = U_ZERO_ERROR;
  int32_t n = icu_ucal_getCanonicalTimeZoneID(uz, (int32_t)len, out, 128, &sys, &st);
  if (U_FAILURE(st) || !sys) return fail(err, errlen, "unknown time zone '%s'", z);
  if (canon && canonlen) {
    char tmp[128];
    icu_u_UCharsToChars(out, tmp, n < 127 ? n : 127);
    tmp[n < 127 ? n : 127] = '\0';
    snprintf(canon, canonlen, "%s", tmp);
  }
  return 0;
}

/* The zone must have passed cron_zone_check. */
static int cal_open(const char *zone, UCalendar **cal) {
  const char *z = zone_or_utc(zone);
  if (!icu_ready()) return SPD_EBADPARAM;
  UChar uz[CRON_ZONE_MAX];
  size_t len = strlen(z);
  if (len >= CRON_ZONE_MAX) return SPD_EBADPARAM;
  icu_u_charsToUChars(z, uz, (int32_t)len + 1);
  UErrorCode st = U_ZERO_ERROR;
  *cal = icu_ucal_open(uz, (int32_t)len, "en_US_POSIX", UCAL_GREGORIAN, &st);
  if (U_FAILURE(st)) {
    if (*cal) icu_ucal_close(*cal);
    *cal = NULL;
    return st == U_MEMORY_ALLOCATION_ERROR ? -ENOMEM : SPD_EBADPARAM;
  }
  return 0;
}

/* Total UTC offset (raw + DST) in ms at instant t. An open calendar only
 * fails here on out-of-range input, which callers have already clamped. */
static int32_t zone_offset(UCalendar *cal, int64_t t) {
  UErrorCode st = U_ZERO_ERROR;
  icu_ucal_setMillis(cal, (UDate)t, &st);
  int32_t off = icu_ucal_get(cal, UCAL_ZONE_OFFSET, &st) + icu_ucal_get(cal, UCAL_DST_OFFSET, &st);
  return U_FAILURE(st) ? 0 : off;
}

/* 1 and *tr when the zone has a transition of that type relative to t. */
static int zone_transition(UCalendar *cal, int64_t t, UTimeZoneTransitionType type,
                           int64_t *tr) {
  UErrorCode st = U_ZERO_ERROR;
  UDate d = 0;
  icu_ucal_setMillis(cal, (UDate)t, &st);
  UBool found = icu_ucal_getTimeZoneTransitionDate(cal, type, &d, &st);
  if (U_FAILURE(st) || !found || d < (UDate)CRON_MS_MIN - MS_PER_DAY ||
      d > (UDate)CRON_MS_MAX + MS_PER_DAY)
    return 0;
  *tr = (int64_t)d;
  return 1;
}

/* ---- wall clock -> instants ------------------------------------------------
 * A matcher finds the first wall time (local ms, as if the zone were UTC) at
 * or after lo that it accepts, or -ENOENT once past limit. */
typedef int (*match_fn)(const void *ctx, int64_t lo, int64_t limit, int64_t *w);

/* The first instant > after whose wall time a matcher accepts, by the rules in
 * cron.h. Between two zone transitions wall = instant + offset is a
 * bijection, so the walk takes the zone one such segment at a time: the
 * first accepted wall time inside the segment wins; one that falls in the
 * spring-forward gap at the segment's end fires at the transition; one that
 * repeats the wall times just before a fall-back is skipped unless
 * every_occurrence. Each segment costs one matcher call (two when it skips a
 * repeated span), and segments are months long, so the walk is cheap. */
static int walk(UCalendar *cal, int64_t after, match_fn fn, const void *ctx,
                int every_occurrence, int64_t limit, int64_t *out) {
  int64_t s = after + 1, tprev = 0, t_next = 0;
  int32_t o = zone_offset(cal, s), oprev = o;
  if (zone_transition(cal, s, UCAL_TZ_TRANSITION_PREVIOUS_INCLUSIVE, &tprev))
    oprev = zone_offset(cal, tprev - 1);
  else
    tprev = s;
  for (;;) {
    int has_next = zone_transition(cal, s, UCAL_TZ_TRANSITION_NEXT, &t_next);
    int32_t onext = has_next ? zone_offset(cal, t_next) : o;
    int64_t lo = s + o, w;
    for (;;) {
      int rc = fn(ctx, lo, limit, &w);
      if (rc) return rc;
      if (has_next && w >= t_next + o) {
        if (onext > o && w < t_next + onext) {
          *out = t_next;
          return 0;
        }
        break;
      }
      if (!every_occurrence && oprev > o && w < tprev + oprev) {
        lo = tprev + oprev; /* the first occurrence came before this segment */
        continue;
      }
      *out = w - o;
      return 0;
    }
    tprev = t_next;
    oprev = o;
    o = onext;
    s = t_next;
  }
}

/* ---- cron matching -------------------------------------------------------- */

static int next_bit(uint64_t mask, int from, int to) {
  if (from > to || from > 63) return -1;
  uint64_t m = mask >> from;
  if (!m) return -1;
  int b = from + __builtin_ctzll(m);
  return b <= to ? b : -1;
}

static int day_ok(const cron_spec_t *sp, int y, int mo, int d) {
  int dom = (sp->dom >> d) & 1;
  int dow = (sp->dow >> weekday(days_from_civil(y, mo, d))) & 1;
  if (sp->flags & (CRON_DOM_STAR | CRON_DOW_STAR)) return dom && dow;
  return dom || dow;
}

/* Skips by field: a month that cannot match costs one step, a day one step,
 * so even a spec that never fires fails after ~30 steps a year. */
static int cron_match(const void *ctx, int64_t lo, int64_t limit, int64_t *out) {
  const cron_spec_t *sp = ctx;
  struct wall w, lim;
  wall_split(floor_div(lo + 999, 1000), &w);
  wall_split(floor_div(limit, 1000), &lim);
  for (;;) {
    if (w.s > 59) w.s = 0, w.mi++;
    if (w.mi > 59) w.mi = 0, w.h++;
    if (w.h > 23) w.h = 0, w.d++;
    if (w.mo > 12) w.mo = 1, w.y++;
    if (w.y > lim.y) return -ENOENT;
    if (!((sp->months >> w.mo) & 1)) {
      int m = next_bit(sp->months, w.mo + 1, 12);
      w.mo = m < 0 ? 13 : m;
      w.d = 1, w.h = w.mi = w.s = 0;
      continue;
    }
    if (w.d > days_in_month(w.y, w.mo)) {
      w.mo++, w.d = 1, w.h = w.mi = w.s = 0;
      continue;
    }
    if (!day_ok(sp, w.y, w.mo, w.d)) {
      w.d++, w.h = w.mi = w.s = 0;
      continue;
    }
    int v = next_bit(sp->hours, w.h, 23);
    if (v != w.h) {
      if (v < 0) w.d++, w.h = 0;
      else w.h = v;
      w.mi = w.s = 0;
      continue;
    }
    v = next_bit(sp->minutes, w.mi, 59);
    if (v != w.mi) {
      if (v < 0) w.h++, w.mi = 0;
      else w.mi = v;
      w.s = 0;
      continue;
    }
    v = next_bit(sp->seconds, w.s, 59);
    if (v != w.s) {
      if (v < 0) w.mi++, w.s = 0;
      else w.s = v;
      continue;
    }
    int64_t ms = wall_join(&w) * 1000;
    if (ms > limit) return -ENOENT;
    *out = ms;
    return 0;
  }
}

static int64_t anchor_of(const cron_spec_t *sp) {
  if (sp->anchor_ms != CRON_NO_START) return sp->anchor_ms;
  return sp->start_ms != CRON_NO_START ? sp->start_ms : 0;
}

/* cron_next with the calendar already open (NULL unless kind is CRON). */
static int next_in(const cron_spec_t *sp, UCalendar *cal, int64_t after, int64_t *next) {
  int64_t a = after, t = 0;
  if (sp->start_ms != CRON_NO_START && a < sp->start_ms - 1) a = sp->start_ms - 1;
  if (a < CRON_MS_MIN - 1) a = CRON_MS_MIN - 1;
  if (a >= CRON_MS_MAX) return -ENOENT;
  switch (sp->kind) {
  case CRON_KIND_ONCE:
    if (sp->once_ms <= a) return -ENOENT;
    t = sp->once_ms;
    break;
  case CRON_KIND_INTERVAL: {
    int64_t anchor = anchor_of(sp);
    t = anchor + (floor_div(a - anchor, sp->interval_ms) + 1) * sp->interval_ms;
    break;
  }
  case CRON_KIND_CRON: {
    int rc = walk(cal, a, cron_match, sp, sp->hours == ALL_HOURS, a + HORIZON_MS, &t);
    if (rc) return rc;
    break;
  }
  default:
    return SPD_EBADPARAM;
  }
  if (t > sp->end_ms || t > CRON_MS_MAX) return -ENOENT;
  *next = t;
  return 0;
}

static int open_for(const cron_spec_t *sp, UCalendar **cal) {
  *cal = NULL;
  if (!sp || sp->kind == CRON_KIND_NONE) return SPD_EBADPARAM;
  return sp->kind == CRON_KIND_CRON ? cal_open(sp->zone, cal) : 0;
}

int cron_next(const cron_spec_t *spec, int64_t after_ms, int64_t *next_ms) {
  UCalendar *cal;
  int rc = open_for(spec, &cal);
  if (rc) return rc;
  rc = next_in(spec, cal, after_ms, next_ms);
  if (cal) icu_ucal_close(cal);
  return rc;
}

int cron_between(const cron_spec_t *spec, int64_t from_ms, int64_t to_ms, int64_t *out,
                 size_t max, size_t *n, int *more) {
  UCalendar *cal;
  *n = 0;
  if (more) *more = 0;
  int rc = open_for(spec, &cal);
  if (rc) return rc;
  int64_t t = from_ms, nx;
  while (t < to_ms) {
    rc = next_in(spec, cal, t, &nx);
    if (rc == -ENOENT || (rc == 0 && nx > to_ms)) {
      rc = 0;
      break;
    }
    if (rc) break;
    if (*n == max) {
      if (more) *more = 1;
      break;
    }
    out[(*n)++] = t = nx;
  }
  if (cal) icu_ucal_close(cal);
  return rc;
}

/* next(x) is monotone in x, so the last fire before `before` is next(x) for
 * the largest x whose next(x) is still before it: a bisection of ~45 steps
 * instead of a mirror image of walk() with its DST rules. */
int cron_prev(const cron_spec_t *spec, int64_t before_ms, int64_t *prev_ms) {
  UCalendar *cal;
  int rc = open_for(spec, &cal);
  if (rc) return rc;
  int64_t b = before_ms;
  rc = -ENOENT;
  if (b <= CRON_MS_MIN) goto out;
  if (b > CRON_MS_MAX + 1) b = CRON_MS_MAX + 1;
  if (b > spec->end_ms && spec->end_ms != CRON_NO_END) b = spec->end_ms + 1;
  int64_t lo = b - HORIZON_MS - 1, hi = b - 1, t = 0;
  if (spec->kind != CRON_KIND_CRON) lo = CRON_MS_MIN - 1;
  if (spec->start_ms != CRON_NO_START && lo < spec->start_ms - 1) lo = spec->start_ms - 1;
  if (lo < CRON_MS_MIN - 1) lo = CRON_MS_MIN - 1;
  if (lo >= hi || next_in(spec, cal, lo, &t) != 0 || t >= b) goto out;
  /* Invariant: next(lo) < b <= next(hi). */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2, m;
    int r = next_in(spec, cal, mid, &m);
    if (r == 0 && m < b) lo = mid, t = m;
    else if (r == 0 || r == -ENOENT) hi = mid;
    else {
      rc = r;
      goto out;
    }
  }
  *prev_ms = t;
  rc = 0;
out:
  if (cal) icu_ucal_close(cal);
  return rc;
}

/* ---- specs ---------------------------------------------------------------- */

void cron_spec_init(cron_spec_t *spec) {
  memset(spec, 0, sizeof(*spec));
  spec->kind = CRON_KIND_NONE;
  spec->zone = NULL;
  spec->anchor_ms = CRON_NO_START;
  spec->start_ms = CRON_NO_START;
  spec->end_ms = CRON_NO_END;
}

void cron_spec_release(cron_spec_t *spec) {
  if (!spec) return;
  free(spec->zone);
  cron_spec_init(spec);
}

/* Validates zone, then makes spec one of `kind` in that zone (a copy;
 * NULL = UTC); spec is unchanged on failure. The caller fills the kind's
 * fields. */
static int spec_begin(cron_spec_t *spec, cron_kind_t kind, const char *zone, char *err,
                      size_t errlen) {
  char *z = NULL;
  int rc = cron_zone_check(zone, NULL, 0, err, errlen);
  if (rc) return rc;
  if (zone && *zone && !(z = strdup(zone))) return -ENOMEM;
  free(spec->zone);
  spec->zone = z;
  spec->kind = kind;
  return 0;
}

int cron_spec_interval(cron_spec_t *spec, int64_t interval_ms, int64_t anchor_ms,
                       const char *zone, char *err, size_t errlen) {
  if (interval_ms <= 0 || interval_ms > CRON_MS_MAX)
    return fail(err, errlen, "interval must be a positive number of milliseconds");
  if (anchor_ms != CRON_NO_START && (anchor_ms < CRON_MS_MIN || anchor_ms > CRON_MS_MAX))
    return fail(err, errlen, "interval anchor is out of range (years 1-9999)");
  int rc = spec_begin(spec, CRON_KIND_INTERVAL, zone, err, errlen);
  if (rc) return rc;
  spec->interval_ms = interval_ms;
  spec->anchor_ms = anchor_ms;
  return 0;
}

int cron_spec_once(cron_spec_t *spec, int64_t at_ms, const char *zone, char *err,
                   size_t errlen) {
  if (at_ms < CRON_MS_MIN || at_ms > CRON_MS_MAX)
    return fail(err, errlen, "one-off time is out of range (years 1-9999)");
  int rc = spec_begin(spec, CRON_KIND_ONCE, zone, err, errlen);
  if (rc) return rc;
  spec->once_ms = at_ms;
  return 0;
}

int cron_spec_bounds(cron_spec_t *spec, int64_t start_ms, int64_t end_ms, char *err,
                     size_t errlen) {
  if (start_ms != CRON_NO_START && (start_ms < CRON_MS_MIN || start_ms > CRON_MS_MAX))
    return fail(err, errlen, "start is out of range (years 1-9999)");
  if (end_ms != CRON_NO_END && (end_ms < CRON_MS_MIN || end_ms > CRON_MS_MAX))
    return fail(err, errlen, "end is out of range (years 1-9999)");
  if (start_ms != CRON_NO_START && end_ms != CRON_NO_END && start_ms > end_ms)
    return fail(err, errlen, "start is after end");
  spec->start_ms = start_ms;
  spec->end_ms = end_ms;
  return 0;
}

/* ---- cron parsing ---------------------------------------------------------- */

static const char *const MONTH_NAMES[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC", NULL};
static const char *const DAY_NAMES[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", NULL};

struct field {
  const char *name;
  int min, max;
  const char *const *names;
  int name_base; /* value of names[0] */
  const char *hint;
};

static const struct field FIELDS[6] = {
    {"second", 0, 59, NULL, 0, NULL},
    {"minute", 0, 59, NULL, 0, NULL},
    {"hour", 0, 23, NULL, 0, NULL},
    {"day of month", 1, 31, NULL, 0, NULL},
    {"month", 1, 12, MONTH_NAMES, 1, "a month (1-12 or JAN-DEC)"},
    {"day of week", 0, 7, DAY_NAMES, 0, "a day (0-7 or SUN-SAT)"},
};

/* One value of an item; *is_sun flags the name SUN so "FRI-SUN" can mean 5-7. */
static int parse_value(const struct field *f, const char *p, size_t len, int *v, int *is_sun,
                       char *err, size_t errlen) {
  *is_sun = 0;
  if (len == 0) return fail(err, errlen, "cron: %s: missing value", f->name);
  if (isdigit((unsigned char)p[0])) {
    long n = 0;
    for (size_t i = 0; i < len; i++) {
      if (!isdigit((unsigned char)p[i]))
        return fail(err, errlen, "cron: %s: '%.*s' is not %s", f->name, (int)len, p,
                    f->hint ? f->hint : "a number");
      if (n < 100000) n = n * 10 + (p[i] - '0');
    }
    if (n < f->min || n > f->max)
      return fail(err, errlen, "cron: %s: %.*s is out of range %d-%d", f->name, (int)len, p,
                  f->min, f->max);
    *v = (int)n;
    return 0;
  }
  for (int i = 0; f->names && f->names[i]; i++)
    if (len == 3 && strncasecmp(p, f->names[i], 3) == 0) {
      *v = f->name_base + i;
      *is_sun = f->names == DAY_NAMES && i == 0;
      return 0;
    }
  return fail(err, errlen, "cron: %s: '%.*s' is not %s", f->name, (int)len, p,
              f->hint ? f->hint : "a number");
}

/* One comma-separated item: "*", "a", "a-b", each optionally "/step". */
static int parse_item(const struct field *f, const char *p, size_t len, uint64_t *bits,
                      char *err, size_t errlen) {
  const char *slash = memchr(p, '/', len);
  size_t rlen = slash ? (size_t)(slash - p) : len;
  int lo, hi, step = 1, sun, rc;
  if (rlen == 1 && p[0] == '*') {
    lo = f->min, hi = f->max;
  } else {
    const char *dash = memchr(p, '-', rlen);
    if (dash && (dash == p || dash == p + rlen - 1))
      return fail(err, errlen, "cron: %s: '%.*s' is not a valid range", f->name, (int)rlen, p);
    rc = parse_value(f, p, dash ? (size_t)(dash - p) : rlen, &lo, &sun, err, errlen);
    if (rc) return rc;
    hi = slash ? f->max : lo;
    if (dash) {
      rc = parse_value(f, dash + 1, rlen - (size_t)(dash + 1 - p), &hi, &sun, err, errlen);
      if (rc) return rc;
      if (sun && lo > 0) hi = 7;
      if (lo > hi)
        return fail(err, errlen, "cron: %s: range %.*s is backwards", f->name, (int)rlen, p);
    }
  }
  if (slash) {
    const char *s = slash + 1;
    size_t slen = len - (size_t)(s - p);
    long n = 0;
    int span = f->max - f->min + 1;
    if (slen == 0)
      return fail(err, errlen, "cron: %s: missing step in '%.*s'", f->name, (int)len, p);
    for (size_t i = 0; i < slen; i++) {
      if (!isdigit((unsigned char)s[i]))
        return fail(err, errlen, "cron: %s: step '%.*s' is not a number", f->name, (int)slen, s);
      if (n < 100000) n = n * 10 + (s[i] - '0');
    }
    if (n < 1 || n > span)
      return fail(err, errlen, "cron: %s: step %.*s is out of range 1-%d", f->name, (int)slen, s,
                  span);
    step = (int)n;
  }
  for (int v = lo; v <= hi; v += step) *bits |= 1ULL << v;
  return 0;
}

static int parse_field(const struct field *f, const char *p, size_t len, uint64_t *bits,
                       char *err, size_t errlen) {
  *bits = 0;
  const char *end = p + len;
  while (p <= end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *stop = comma ? comma : end;
    if (stop == p)
      return fail(err, errlen, "cron: %s: empty item in '%.*s'", f->name, (int)len,
                  end - len);
    int rc = parse_item(f, p, (size_t)(stop - p), bits, err, errlen);
    if (rc) return rc;
    p = stop + 1;
  }
  return 0;
}

static const struct {
  const char *name, *expr;
} MACROS[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

int cron_spec_parse(cron_spec_t *spec, const char *expr, const char *zone, char *err,
                    size_t errlen) {
  const char *tok[7];
  size_t toklen[7];
  int nf = 0;
  if (!expr) return fail(err, errlen, "cron: expected 5 or 6 fields, got 0");
  for (const char *p = expr; *p;) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) break;
    const char *start = p;
    while (*p && *p != ' ' && *p != '\t') p++;
    if (nf < 7) tok[nf] = start, toklen[nf] = (size_t)(p - start);
    nf++;
  }
  if (nf >= 1 && tok[0][0] == '@') {
    if (toklen[0] == 7 && strncasecmp(tok[0], "@reboot", 7) == 0)
      return fail(err, errlen,
                  "cron: @reboot is not supported: spiderd has no boot event (use a one-off "
                  "schedule)");
    for (size_t i = 0; i < sizeof(MACROS) / sizeof(MACROS[0]); i++) {
      if (strlen(MACROS[i].name) != toklen[0] || strncasecmp(tok[0], MACROS[i].name, toklen[0]))
        continue;
      if (nf != 1) return fail(err, errlen, "cron: %s takes no other fields", MACROS[i].name);
      return cron_spec_parse(spec, MACROS[i].expr, zone, err, errlen);
    }
    return fail(err, errlen, "cron: unknown macro '%.*s'", (int)toklen[0], tok[0]);
  }
  if (nf != 5 && nf != 6) return fail(err, errlen, "cron: expected 5 or 6 fields, got %d", nf);
  uint64_t bits[6] = {1, 0, 0, 0, 0, 0}; /* 5 fields: second 0 */
  int first = 6 - nf;
  for (int i = 0; i < nf; i++) {
    int rc = parse_field(&FIELDS[first + i], tok[i], toklen[i], &bits[first + i], err, errlen);
    if (rc) return rc;
  }
  int rc = spec_begin(spec, CRON_KIND_CRON, zone, err, errlen);
  if (rc) return rc;
  spec->seconds = bits[0];
  spec->minutes = bits[1];
  spec->hours = (uint32_t)bits[2];
  spec->dom = (uint32_t)bits[3];
  spec->months = (uint16_t)bits[4];
  spec->dow = (uint8_t)((bits[5] | (bits[5] >> 7)) & 0x7f);
  spec->flags = (tok[nf - 3][0] == '*' ? CRON_DOM_STAR : 0u) |
                (tok[nf - 1][0] == '*' ? CRON_DOW_STAR : 0u);
  return 0;
}

/* ---- jitter ---------------------------------------------------------------- */

int64_t cron_jitter(int64_t jitter_ms, const char *seed, int64_t due_ms) {
  if (jitter_ms <= 0) return 0;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char *p = (const unsigned char *)(seed ? seed : ""); *p; p++)
    h = (h ^ *p) * 0x100000001b3ULL;
  uint64_t z = (h ^ (uint64_t)due_ms) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (int64_t)(((unsigned __int128)z * (uint64_t)jitter_ms) >> 64);
}

/* ---- ISO 8601 -------------------------------------------------------------- */

int cron_format_iso(int64_t ms, const char *zone, char *buf, size_t buflen) {
  UCalendar *cal;
  if (ms < CRON_MS_MIN || ms > CRON_MS_MAX || buflen < CRON_ISO_MAX) return SPD_EBADPARAM;
  int rc = cron_zone_check(zone, NULL, 0, NULL, 0);
  if (rc || (rc = cal_open(zone, &cal))) return rc;
  int32_t off = zone_offset(cal, ms);
  icu_ucal_close(cal);
  int64_t wall = ms + off, sec = floor_div(wall, 1000);
  struct wall w;
  wall_split(sec, &w);
  int n = snprintf(buf, buflen, "%04d-%02d-%02dT%02d:%02d:%02d", w.y, w.mo, w.d, w.h, w.mi, w.s);
  if (wall - sec * 1000)
    n += snprintf(buf + n, buflen - (size_t)n, ".%03d", (int)(wall - sec * 1000));
  int a = off < 0 ? -off / 1000 : off / 1000;
  n += snprintf(buf + n, buflen - (size_t)n, "%c%02d:%02d", off < 0 ? '-' : '+', a / 3600,
                a / 60 % 60);
  if (a % 60) snprintf(buf + n, buflen - (size_t)n, ":%02d", a % 60);
  return 0;
}

/* Reads exactly n digits. */
static int digits(const char **p, int n, int *v) {
  *v = 0;
  for (int i = 0; i < n; i++, (*p)++) {
    if (!isdigit((unsigned char)**p)) return 0;
    *v = *v * 10 + (**p - '0');
  }
  return 1;
}

static int single_wall(const void *ctx, int64_t lo, int64_t limit, int64_t *w) {
  int64_t want = *(const int64_t *)ctx;
  if (want < lo || want > limit) return -ENOENT;
  *w = want;
  return 0;
}

int cron_parse_iso(const char *s, const char *zone, int64_t *ms, char *err, size_t errlen) {
  const char *p = s;
  int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, oh = 0, om = 0, os = 0, sign = 0, naive = 1;
  if (!s) return fail(err, errlen, "missing date-time");
  if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
      !digits(&p, 2, &d))
    goto syntax;
  if (*p == 'T' || *p == 't' || *p == ' ') {
    p++;
    if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi)) goto syntax;
    if (*p == ':') {
      p++;
      if (!digits(&p, 2, &sec)) goto syntax;
      if (*p == '.' || *p == ',') {
        int nd = 0;
        for (p++; isdigit((unsigned char)*p); p++, nd++)
          if (nd < 3) frac = frac * 10 + (*p - '0');
        if (nd == 0 || nd > 9) goto syntax;
        for (; nd < 3; nd++) frac *= 10;
      }
    }
    if (*p == 'Z' || *p == 'z') {
      p++;
      naive = 0;
    } else if (*p == '+' || *p == '-') {
      sign = *p++ == '-' ? -1 : 1;
      naive = 0;
      if (!digits(&p, 2, &oh)) goto syntax;
      if (*p == ':') p++;
      if (isdigit((unsigned char)*p) && !digits(&p, 2, &om)) goto syntax;
      /* seconds: what we print for old local-mean-time offsets */
      if (*p == ':' && (p++, !digits(&p, 2, &os))) goto syntax;
      if (oh > 23 || om > 59 || os > 59)
        return fail(err, errlen, "'%.64s' has an invalid UTC offset", s);
    }
  }
  if (*p) goto syntax;
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
    return fail(err, errlen, "'%.10s' is not a valid date", s);
  if (h > 23 || mi > 59 || sec > 59) return fail(err, errlen, "'%.64s' has an invalid time", s);
  int64_t wall = (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) * 1000 + frac;
  int64_t t;
  if (!naive) {
    t = wall - (int64_t)sign * (oh * 3600 + om * 60 + os) * 1000;
  } else {
    UCalendar *cal;
    int rc = cron_zone_check(zone, NULL, 0, err, errlen);
    if (rc || (rc = cal_open(zone, &cal))) return rc;
    /* Start two days early: every UTC offset is well under a day, so the walk
     * meets the wall time's first occurrence (or its gap). */
    rc = walk(cal, wall - 2 * MS_PER_DAY, single_wall, &wall, 0, wall, &t);
    icu_ucal_close(cal);
    if (rc) return fail(err, errlen, "'%.64s' does not exist in %s", s, zone_or_utc(zone));
  }
  if (t < CRON_MS_MIN || t > CRON_MS_MAX)
    return fail(err, errlen, "'%.64s' is out of range (years 1-9999)", s);
  *ms = t;
  return 0;
syntax:
  return fail(err, errlen,
              "'%.64s' is not an ISO 8601 date-time (YYYY-MM-DD[THH:MM[:SS]][Z|+HH:MM])", s);
}
