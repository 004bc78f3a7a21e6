#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <unicode/ucal.h>
#include <unicode/ustring.h>

#include "core/cron.h"
#include "error.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Expected instants are written as ISO literals with their offset and turned
 * into ms here with glibc's timegm, never with the code under test. */
static int64_t T(const char *s) {
  int y, mo, d, h, mi, sec = 0, ms = 0, n = 0;
  if (sscanf(s, "%d-%d-%dT%d:%d:%d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
    fail_msg("bad test literal %s", s);
  const char *p = s + n;
  if (*p == '.') {
    ms = atoi(p + 1);
    p += 4;
  }
  int off = 0;
  if (*p == '+' || *p == '-') {
    int oh, om;
    if (sscanf(p + 1, "%d:%d", &oh, &om) != 2) fail_msg("bad offset in %s", s);
    off = (*p == '-' ? -1 : 1) * (oh * 3600 + om * 60);
  } else if (*p != 'Z') {
    fail_msg("test literal %s needs an offset", s);
  }
  struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                  .tm_min = mi, .tm_sec = sec};
  return ((int64_t)timegm(&tm) - off) * 1000 + ms;
}

static const char *fmt(int64_t ms, const char *zone) {
  static char buf[4][CRON_ISO_MAX];
  static int i;
  char *b = buf[i++ % 4];
  if (cron_format_iso(ms, zone, b, CRON_ISO_MAX) != 0)
    snprintf(b, CRON_ISO_MAX, "%lld?", (long long)ms);
  return b;
}

static void parse_ok(cron_spec_t *sp, const char *expr, const char *zone) {
  char err[256] = "";
  cron_spec_init(sp);
  if (cron_spec_parse(sp, expr, zone, err, sizeof(err)) != 0) fail_msg("'%s': %s", expr, err);
}

/* ---- parsing ---------------------------------------------------------------- */

/* "*" when every value lo..hi is set, else the values joined by commas. */
static void set_str(uint64_t bits, int lo, int hi, char *out, size_t len) {
  int all = 1;
  for (int v = lo; v <= hi; v++) all &= (int)((bits >> v) & 1);
  if (all) {
    snprintf(out, len, "*");
    return;
  }
  out[0] = '\0';
  for (int v = 0; v < 64; v++)
    if ((bits >> v) & 1)
      snprintf(out + strlen(out), len - strlen(out), "%s%d", out[0] ? "," : "", v);
}

struct parse_case {
  const char *expr, *sec, *min, *hour, *dom, *mon, *dow;
  unsigned flags;
};

#define DS CRON_DOM_STAR
#define WS CRON_DOW_STAR
static void test_parse_table(void **state) {
  static const struct parse_case cases[] = {
      {"* * * * *", "0", "*", "*", "*", "*", "*", DS | WS},
      {"*/15 * * * *", "0", "0,15,30,45", "*", "*", "*", "*", DS | WS},
      {"5 4 * * *", "0", "5", "4", "*", "*", "*", DS | WS},
      {"0-10/3 * * * *", "0", "0,3,6,9", "*", "*", "*", "*", DS | WS},
      {"7/20 * * * *", "0", "7,27,47", "*", "*", "*", "*", DS | WS},
      {"1,5-7,*/30 * * * *", "0", "0,1,5,6,7,30", "*", "*", "*", "*", DS | WS},
      {"0 0-23/1 * * *", "0", "0", "*", "*", "*", "*", DS | WS},
      {"0 */24 * * *", "0", "0", "0", "*", "*", "*", DS | WS},
      {"0 9-17/4 * * *", "0", "0", "9,13,17", "*", "*", "*", DS | WS},
      {"0 0 1,15 * *", "0", "0", "0", "1,15", "*", "*", WS},
      {"0 0 */2 * *", "0", "0", "0", "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31", "*", "*",
       DS | WS},
      {"0 0 31 * *", "0", "0", "0", "31", "*", "*", WS},
      {"0 0 * JAN-MAR,dec *", "0", "0", "0", "*", "1,2,3,12", "*", DS | WS},
      {"0 0 1 jul *", "0", "0", "0", "1", "7", "*", WS},
      {"0 0 1 */5 *", "0", "0", "0", "1", "1,6,11", "*", WS},
      {"0 0 1 3/4 *", "0", "0", "0", "1", "3,7,11", "*", WS},
      {"0 0 1 Feb-Apr/2 *", "0", "0", "0", "1", "2,4", "*", WS},
      {"0 0 * * MON-FRI", "0", "0", "0", "*", "*", "1,2,3,4,5", DS},
      {"0 0 * * mon,Wed,FRI", "0", "0", "0", "*", "*", "1,3,5", DS},
      {"0 0 * * 7", "0", "0", "0", "*", "*", "0", DS},
      {"0 0 * * 0,7", "0", "0", "0", "*", "*", "0", DS},
      {"0 0 * * 5-7", "0", "0", "0", "*", "*", "0,5,6", DS},
      {"0 0 * * fri-sun", "0", "0", "0", "*", "*", "0,5,6", DS},
      {"0 0 * * SUN-SAT", "0", "0", "0", "*", "*", "*", DS},
      {"0 0 * * */2", "0", "0", "0", "*", "*", "0,2,4,6", DS | WS},
      {"0 0 * * 1/2", "0", "0", "0", "*", "*", "0,1,3,5", DS},
      {"0 0 13 * 5", "0", "0", "0", "13", "*", "5", 0},
      {"0 0 */2 * 1", "0", "0", "0", "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31", "*", "1", DS},
      {"59 23 31 12 6", "0", "59", "23", "31", "12", "6", 0},
      {"  0   0\t* *  *  ", "0", "0", "0", "*", "*", "*", DS | WS},
      /* six fields: seconds first */
      {"*/20 0 0 * * *", "0,20,40", "0", "0", "*", "*", "*", DS | WS},
      {"30 15 12 * * SUN", "30", "15", "12", "*", "*", "0", DS},
      {"* * * * * *", "*", "*", "*", "*", "*", "*", DS | WS},
      {"5-10/5,59 0 0 1 1 *", "5,10,59", "0", "0", "1", "1", "*", WS},
      /* macros */
      {"@yearly", "0", "0", "0", "1", "1", "*", WS},
      {"@annually", "0", "0", "0", "1", "1", "*", WS},
      {"@monthly", "0", "0", "0", "1", "*", "*", WS},
      {"@weekly", "0", "0", "0", "*", "*", "0", DS},
      {"@daily", "0", "0", "0", "*", "*", "*", DS | WS},
      {"@midnight", "0", "0", "0", "*", "*", "*", DS | WS},
      {"@hourly", "0", "0", "*", "*", "*", "*", DS | WS},
      {" @DAILY ", "0", "0", "0", "*", "*", "*", DS | WS},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    const struct parse_case *c = &cases[i];
    cron_spec_t sp;
    char got[6][200];
    parse_ok(&sp, c->expr, NULL);
    assert_int_equal(sp.kind, CRON_KIND_CRON);
    set_str(sp.seconds, 0, 59, got[0], 200);
    set_str(sp.minutes, 0, 59, got[1], 200);
    set_str(sp.hours, 0, 23, got[2], 200);
    set_str(sp.dom, 1, 31, got[3], 200);
    set_str(sp.months, 1, 12, got[4], 200);
    set_str(sp.dow, 0, 6, got[5], 200);
    const char *want[6] = {c->sec, c->min, c->hour, c->dom, c->mon, c->dow};
    for (int f = 0; f < 6; f++)
      if (strcmp(got[f], want[f]) != 0)
        fail_msg("'%s' field %d: got '%s', want '%s'", c->expr, f, got[f], want[f]);
    if (sp.flags != c->flags) fail_msg("'%s': flags %u, want %u", c->expr, sp.flags, c->flags);
    cron_spec_release(&sp);
  }
}

struct err_case {
  const char *expr, *msg;
};

static void test_parse_errors(void **state) {
  static const struct err_case cases[] = {
      {"* * * *", "cron: expected 5 or 6 fields, got 4"},
      {"", "cron: expected 5 or 6 fields, got 0"},
      {"   ", "cron: expected 5 or 6 fields, got 0"},
      {"* * * * * * *", "cron: expected 5 or 6 fields, got 7"},
      {"0 24 * * *", "cron: hour: 24 is out of range 0-23"},
      {"60 * * * *", "cron: minute: 60 is out of range 0-59"},
      {"0 0 0 * *", "cron: day of month: 0 is out of range 1-31"},
      {"0 0 32 * *", "cron: day of month: 32 is out of range 1-31"},
      {"0 0 * 0 *", "cron: month: 0 is out of range 1-12"},
      {"0 0 * 13 *", "cron: month: 13 is out of range 1-12"},
      {"0 0 * * 8", "cron: day of week: 8 is out of range 0-7"},
      {"60 0 0 * * *", "cron: second: 60 is out of range 0-59"},
      {"99999999999 * * * *", "cron: minute: 99999999999 is out of range 0-59"},
      {"0 0 * FOO *", "cron: month: 'FOO' is not a month (1-12 or JAN-DEC)"},
      {"0 0 * JANUARY *", "cron: month: 'JANUARY' is not a month (1-12 or JAN-DEC)"},
      {"0 0 * * FUN", "cron: day of week: 'FUN' is not a day (0-7 or SUN-SAT)"},
      {"0 MON * * *", "cron: hour: 'MON' is not a number"},
      {"5x * * * *", "cron: minute: '5x' is not a number"},
      {"0 0 L * *", "cron: day of month: 'L' is not a number"},
      {"0 0 ? * *", "cron: day of month: '?' is not a number"},
      {"*/0 * * * *", "cron: minute: step 0 is out of range 1-60"},
      {"*/61 * * * *", "cron: minute: step 61 is out of range 1-60"},
      {"0 */25 * * *", "cron: hour: step 25 is out of range 1-24"},
      {"*/x * * * *", "cron: minute: step 'x' is not a number"},
      {"5/ * * * *", "cron: minute: missing step in '5/'"},
      {"0 5-3 * * *", "cron: hour: range 5-3 is backwards"},
      {"0 0 * * FRI-MON", "cron: day of week: range FRI-MON is backwards"},
      {"0 0 * DEC-JAN *", "cron: month: range DEC-JAN is backwards"},
      {"-5 * * * *", "cron: minute: '-5' is not a valid range"},
      {"5- * * * *", "cron: minute: '5-' is not a valid range"},
      {"1-2-3 * * * *", "cron: minute: '2-3' is not a number"},
      {"*-5 * * * *", "cron: minute: '*' is not a number"},
      {"1,,2 * * * *", "cron: minute: empty item in '1,,2'"},
      {"1, * * * *", "cron: minute: empty item in '1,'"},
      {"0 0 ,1 * *", "cron: day of month: empty item in ',1'"},
      {"@reboot",
       "cron: @reboot is not supported: spiderd has no boot event (use a one-off schedule)"},
      {"@fortnightly", "cron: unknown macro '@fortnightly'"},
      {"@every 5m", "cron: unknown macro '@every'"},
      {"@daily 5", "cron: @daily takes no other fields"},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    cron_spec_t sp;
    char err[256] = "";
    cron_spec_init(&sp);
    int rc = cron_spec_parse(&sp, cases[i].expr, NULL, err, sizeof(err));
    if (rc != SPD_EBADPARAM) fail_msg("'%s': rc %d", cases[i].expr, rc);
    if (strcmp(err, cases[i].msg) != 0)
      fail_msg("'%s': got \"%s\", want \"%s\"", cases[i].expr, err, cases[i].msg);
    assert_int_equal(sp.kind, CRON_KIND_NONE); /* failure leaves the spec alone */
    assert_null(sp.zone);
    cron_spec_release(&sp);
  }
  /* err may be NULL; NULL expression */
  cron_spec_t sp;
  cron_spec_init(&sp);
  assert_int_equal(cron_spec_parse(&sp, "bad", NULL, NULL, 0), SPD_EBADPARAM);
  assert_int_equal(cron_spec_parse(&sp, NULL, NULL, NULL, 0), SPD_EBADPARAM);
  /* a failed re-parse keeps the previous schedule and zone */
  parse_ok(&sp, "0 3 * * *", "Europe/Berlin");
  assert_int_equal(cron_spec_parse(&sp, "0 25 * * *", "Asia/Tokyo", NULL, 0), SPD_EBADPARAM);
  assert_string_equal(sp.zone, "Europe/Berlin");
  assert_int_equal(sp.hours, 1u << 3);
  cron_spec_release(&sp);
}

static void test_zones(void **state) {
  char err[128] = "", canon[64] = "";
  assert_int_equal(cron_zone_check("America/New_York", canon, sizeof(canon), err, sizeof(err)), 0);
  assert_string_equal(canon, "America/New_York");
  assert_int_equal(cron_zone_check("US/Eastern", canon, sizeof(canon), NULL, 0), 0);
  assert_string_equal(canon, "America/New_York");
  assert_int_equal(cron_zone_check("UTC", NULL, 0, NULL, 0), 0);
  assert_int_equal(cron_zone_check("Etc/GMT+5", NULL, 0, NULL, 0), 0);
  assert_int_equal(cron_zone_check("Australia/Lord_Howe", NULL, 0, NULL, 0), 0);
  assert_int_equal(cron_zone_check(NULL, NULL, 0, NULL, 0), 0);
  assert_int_equal(cron_zone_check("", NULL, 0, NULL, 0), 0);
  const char *bad[] = {"Mars/Olympus", "GMT+5", "New York", "America/New_York\n",
                       "Europe/../etc/passwd", "ÄÖ/x"};
  for (size_t i = 0; i < N_ELEMS(bad); i++)
    if (cron_zone_check(bad[i], NULL, 0, NULL, 0) != SPD_EBADPARAM) fail_msg("accepted %s", bad[i]);
  assert_int_equal(cron_zone_check("Mars/Olympus", NULL, 0, err, sizeof(err)), SPD_EBADPARAM);
  assert_string_equal(err, "unknown time zone 'Mars/Olympus'");

  cron_spec_t sp;
  cron_spec_init(&sp);
  assert_int_equal(cron_spec_parse(&sp, "0 0 * * *", "Nowhere/City", err, sizeof(err)),
                   SPD_EBADPARAM);
  assert_string_equal(err, "unknown time zone 'Nowhere/City'");
  assert_int_equal(cron_spec_interval(&sp, 1000, CRON_NO_START, "Nowhere/City", err, sizeof(err)),
                   SPD_EBADPARAM);
  assert_int_equal(cron_spec_once(&sp, 0, "Nowhere/City", err, sizeof(err)), SPD_EBADPARAM);
  assert_int_equal(sp.kind, CRON_KIND_NONE);
  cron_spec_release(&sp);
}

/* ---- cron_next: hand-computed sequences -------------------------------------- */

struct next_case {
  const char *zone, *expr, *after;
  const char *want[9]; /* successive fires, NULL-terminated */
};

static void run_next_cases(const struct next_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const struct next_case *c = &cases[i];
    cron_spec_t sp;
    parse_ok(&sp, c->expr, c->zone);
    int64_t t = T(c->after);
    for (int k = 0; c->want[k]; k++) {
      int64_t got = 0;
      int rc = cron_next(&sp, t, &got);
      if (rc != 0) fail_msg("%s '%s' after %s: rc %d", c->zone, c->expr, fmt(t, c->zone), rc);
      if (got != T(c->want[k]))
        fail_msg("%s '%s' fire %d after %s: got %s, want %s", c->zone, c->expr, k,
                 fmt(t, c->zone), fmt(got, c->zone), c->want[k]);
      t = got;
    }
    cron_spec_release(&sp);
  }
}

static void test_next_basic(void **state) {
  static const struct next_case cases[] = {
      {NULL, "* * * * *", "2026-01-01T00:00:00Z",
       {"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}},
      {NULL, "* * * * *", "2026-01-01T00:00:59.999Z", {"2026-01-01T00:01:00Z"}},
      {"UTC", "*/15 * * * *", "2026-01-01T00:14:59Z",
       {"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z",
        "2026-01-01T01:00:00Z"}},
      {NULL, "15,45 9-17/4 * * *", "2026-01-01T10:00:00Z",
       {"2026-01-01T13:15:00Z", "2026-01-01T13:45:00Z", "2026-01-01T17:15:00Z",
        "2026-01-01T17:45:00Z", "2026-01-02T09:15:00Z"}},
      /* year rollover */
      {NULL, "0 0 1 1 *", "2026-12-31T23:59:59.999Z",
       {"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
      {NULL, "59 23 31 12 *", "2026-12-31T23:59:00Z", {"2027-12-31T23:59:00Z"}},
      {NULL, "* * * * *", "2026-12-31T23:59:30Z", {"2027-01-01T00:00:00Z"}},
      /* the 31st skips the 30-day months and February */
      {NULL, "0 0 31 * *", "2026-01-31T00:00:00Z",
       {"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z",
        "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z",
        "2027-01-31T00:00:00Z"}},
      {NULL, "0 0 30 * *", "2026-01-30T00:00:00Z", {"2026-03-30T00:00:00Z"}},
      /* leap days; 2100 is not a leap year */
      {NULL, "0 0 29 2 *", "2026-01-01T00:00:00Z",
       {"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"}},
      {NULL, "0 0 29 2 *", "2096-03-01T00:00:00Z", {"2104-02-29T00:00:00Z"}},
      {NULL, "0 0 29 2 *", "2399-01-01T00:00:00Z", {"2400-02-29T00:00:00Z"}},
      {NULL, "0 0 28 2 *", "2028-02-28T00:00:00Z", {"2029-02-28T00:00:00Z"}},
      /* months and names */
      {NULL, "0 0 1 JAN,jul *", "2026-01-01T00:00:00Z",
       {"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
      {NULL, "0 0 1 */5 *", "2026-01-01T00:00:00Z",
       {"2026-06-01T00:00:00Z", "2026-11-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
      {NULL, "0 0 1 3/4 *", "2026-01-01T00:00:00Z",
       {"2026-03-01T00:00:00Z", "2026-07-01T00:00:00Z", "2026-11-01T00:00:00Z",
        "2027-03-01T00:00:00Z"}},
      /* days of week: 2026-03-06 is a Friday, 2026-03-01 a Sunday */
      {NULL, "0 12 * * MON-FRI", "2026-03-06T12:00:00Z",
       {"2026-03-09T12:00:00Z", "2026-03-10T12:00:00Z"}},
      {NULL, "0 0 * * 7", "2026-03-01T00:00:00Z", {"2026-03-08T00:00:00Z"}},
      {NULL, "0 0 * * SAT-SUN", "2026-03-02T00:00:00Z",
       {"2026-03-07T00:00:00Z", "2026-03-08T00:00:00Z", "2026-03-14T00:00:00Z"}},
      {NULL, "0 0 * * 5-7", "2026-03-02T00:00:00Z",
       {"2026-03-06T00:00:00Z", "2026-03-07T00:00:00Z", "2026-03-08T00:00:00Z",
        "2026-03-13T00:00:00Z"}},
      /* Vixie: both restricted -> 13th OR Friday (April 2026: Fridays 3,10,17,24; May 1) */
      {NULL, "0 0 13 * 5", "2026-04-10T00:00:00Z",
       {"2026-04-13T00:00:00Z", "2026-04-17T00:00:00Z", "2026-04-24T00:00:00Z",
        "2026-05-01T00:00:00Z"}},
      {NULL, "0 0 1-7 * 1", "2026-03-31T00:00:00Z",
       {"2026-04-01T00:00:00Z", "2026-04-02T00:00:00Z", "2026-04-03T00:00:00Z",
        "2026-04-04T00:00:00Z", "2026-04-05T00:00:00Z", "2026-04-06T00:00:00Z",
        "2026-04-07T00:00:00Z", "2026-04-13T00:00:00Z"}},
      /* ... but a '*'-led field makes it AND: odd days that are Mondays */
      {NULL, "0 0 */2 * 1", "2026-04-01T00:00:00Z",
       {"2026-04-13T00:00:00Z", "2026-04-27T00:00:00Z", "2026-05-11T00:00:00Z"}},
      {NULL, "0 0 * * */3", "2026-03-01T00:00:00Z", /* Sun, Wed, Sat */
       {"2026-03-04T00:00:00Z", "2026-03-07T00:00:00Z", "2026-03-08T00:00:00Z"}},
      /* six fields */
      {NULL, "*/15 * * * * *", "2026-01-01T00:00:07Z",
       {"2026-01-01T00:00:15Z", "2026-01-01T00:00:30Z", "2026-01-01T00:00:45Z",
        "2026-01-01T00:01:00Z"}},
      {NULL, "30 0 0 1 1 *", "2026-01-01T00:00:30Z", {"2027-01-01T00:00:30Z"}},
      {NULL, "59 59 23 31 12 *", "2026-06-01T00:00:00Z", {"2026-12-31T23:59:59Z"}},
      /* macros */
      {NULL, "@hourly", "2026-01-01T00:30:00Z", {"2026-01-01T01:00:00Z"}},
      {NULL, "@daily", "2026-01-01T00:00:00Z", {"2026-01-02T00:00:00Z"}},
      {NULL, "@midnight", "2026-01-01T23:59:59Z", {"2026-01-02T00:00:00Z"}},
      {NULL, "@weekly", "2026-01-01T00:00:00Z", {"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
      {NULL, "@monthly", "2026-01-01T00:00:00Z", {"2026-02-01T00:00:00Z"}},
      {NULL, "@yearly", "2026-01-01T00:00:00Z", {"2027-01-01T00:00:00Z"}},
      {NULL, "@annually", "2026-06-01T00:00:00Z", {"2027-01-01T00:00:00Z"}},
      /* zones without DST */
      {"Asia/Kolkata", "0 9 * * *", "2026-01-01T00:00:00Z",
       {"2026-01-01T09:00:00+05:30", "2026-01-02T09:00:00+05:30"}},
      {"Asia/Kathmandu", "0 0 * * *", "2026-01-01T00:00:00Z", {"2026-01-02T00:00:00+05:45"}},
      /* a new year in a zone ahead of UTC */
      {"Australia/Sydney", "0 0 1 1 *", "2026-12-31T12:00:00Z", {"2027-01-01T00:00:00+11:00"}},
      /* far ahead */
      {NULL, "0 0 1 1 *", "9998-06-01T00:00:00Z", {"9999-01-01T00:00:00Z"}},
  };
  run_next_cases(cases, N_ELEMS(cases));
}

static void test_next_dst(void **state) {
  static const struct next_case cases[] = {
      /* New York, 2026-03-08: 02:00 EST -> 03:00 EDT */
      {"America/New_York", "30 2 * * *", "2026-03-07T12:00:00-05:00",
       {"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
      {"America/New_York", "*/15 2 * * *", "2026-03-08T00:00:00-05:00",
       {"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
      {"America/New_York", "0 3 * * *", "2026-03-08T00:00:00-05:00",
       {"2026-03-08T03:00:00-04:00", "2026-03-09T03:00:00-04:00"}},
      {"America/New_York", "0,30 2-3 * * *", "2026-03-08T00:00:00-05:00",
       {"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:00:00-04:00"}},
      {"America/New_York", "*/30 * * * *", "2026-03-08T01:00:00-05:00",
       {"2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}},
      {"America/New_York", "0 0 2 * * *", "2026-03-08T01:59:59-05:00",
       {"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
      /* New York, 2026-11-01: 02:00 EDT -> 01:00 EST */
      {"America/New_York", "30 1 * * *", "2026-10-31T12:00:00-04:00",
       {"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
      {"America/New_York", "0,30 1 * * *", "2026-11-01T00:00:00-04:00",
       {"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:00:00-05:00"}},
      {"America/New_York", "30 1 * * *", "2026-11-01T01:10:00-05:00", /* inside the repeat */
       {"2026-11-02T01:30:00-05:00"}},
      {"America/New_York", "0 */20 1 * * *", "2026-11-01T00:59:00-04:00",
       {"2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00",
        "2026-11-02T01:00:00-05:00"}},
      /* hour '*': fixed rate in real time through the repeated hour */
      {"America/New_York", "*/30 * * * *", "2026-11-01T00:45:00-04:00",
       {"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00"}},
      {"America/New_York", "0 * * * *", "2026-11-01T00:30:00-04:00",
       {"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
      {"America/New_York", "*/30 * * * *", "2026-11-01T01:40:00-04:00", /* in the first pass */
       {"2026-11-01T01:00:00-05:00"}},
      /* Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET */
      {"Europe/Berlin", "30 2 * * *", "2026-03-28T12:00:00+01:00",
       {"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
      {"Europe/Berlin", "30 2 * * *", "2026-10-24T12:00:00+02:00",
       {"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
      {"Europe/Berlin", "*/20 * * * *", "2026-10-25T02:30:00+02:00",
       {"2026-10-25T02:40:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:20:00+01:00"}},
      /* London: 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT */
      {"Europe/London", "30 1 * * *", "2026-03-28T12:00:00+00:00",
       {"2026-03-29T02:00:00+01:00", "2026-03-30T01:30:00+01:00"}},
      {"Europe/London", "30 1 * * *", "2026-10-24T12:00:00+01:00",
       {"2026-10-25T01:30:00+01:00", "2026-10-26T01:30:00+00:00"}},
      /* Sydney: 2026-10-04 02:00 AEST -> 03:00 AEDT; 2026-04-05 03:00 AEDT -> 02:00 AEST */
      {"Australia/Sydney", "30 2 * * *", "2026-10-03T12:00:00+10:00",
       {"2026-10-04T03:00:00+11:00", "2026-10-05T02:30:00+11:00"}},
      {"Australia/Sydney", "30 2 * * *", "2026-04-04T12:00:00+11:00",
       {"2026-04-05T02:30:00+11:00", "2026-04-06T02:30:00+10:00"}},
      {"Australia/Sydney", "0 * * * *", "2026-04-05T01:30:00+11:00",
       {"2026-04-05T02:00:00+11:00", "2026-04-05T02:00:00+10:00", "2026-04-05T03:00:00+10:00"}},
      /* Lord Howe, half-hour DST: 2026-10-04 02:00 +10:30 -> 02:30 +11:00;
       * 2026-04-05 02:00 +11:00 -> 01:30 +10:30 */
      {"Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00:00+10:30",
       {"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
      {"Australia/Lord_Howe", "*/10 * * * *", "2026-10-04T01:50:00+10:30",
       {"2026-10-04T02:30:00+11:00", "2026-10-04T02:40:00+11:00"}},
      {"Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00:00+11:00",
       {"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
      {"Australia/Lord_Howe", "*/15 * * * *", "2026-04-05T01:20:00+11:00",
       {"2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30",
        "2026-04-05T01:45:00+10:30", "2026-04-05T02:00:00+10:30"}},
  };
  run_next_cases(cases, N_ELEMS(cases));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_never_and_fast(void **state) {
  const char *never[] = {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *", "0 0 30 2 * "};
  const char *zones[] = {NULL, "America/New_York", "Australia/Lord_Howe"};
  double t0 = now_s();
  for (size_t z = 0; z < N_ELEMS(zones); z++)
    for (size_t i = 0; i < N_ELEMS(never); i++) {
      cron_spec_t sp;
      int64_t t;
      parse_ok(&sp, never[i], zones[z]);
      assert_int_equal(cron_next(&sp, T("2026-01-01T00:00:00Z"), &t), -ENOENT);
      assert_int_equal(cron_prev(&sp, T("2026-01-01T00:00:00Z"), &t), -ENOENT);
      cron_spec_release(&sp);
    }
  /* 1,000 leap-day searches and 1,000 31st searches must take well under a second. */
  cron_spec_t leap, last;
  parse_ok(&leap, "0 0 29 2 *", "Europe/Berlin");
  parse_ok(&last, "0 0 31 * *", "America/New_York");
  int64_t t = T("2001-01-01T00:00:00Z"), u = t;
  for (int i = 0; i < 1000; i++) {
    assert_int_equal(cron_next(&leap, t, &t), 0);
    assert_int_equal(cron_next(&last, u, &u), 0);
  }
  double took = now_s() - t0;
  if (took > 5.0) fail_msg("searches took %.2fs", took);
  cron_spec_release(&leap);
  cron_spec_release(&last);
}

/* ---- intervals, once, bounds -------------------------------------------------- */

static void expect_next(const cron_spec_t *sp, const char *after, const char *want) {
  int64_t got = 0;
  int rc = cron_next(sp, T(after), &got);
  if (!want) {
    if (rc != -ENOENT) fail_msg("after %s: rc %d (%s), want -ENOENT", after, rc, fmt(got, NULL));
    return;
  }
  if (rc != 0) fail_msg("after %s: rc %d", after, rc);
  if (got != T(want)) fail_msg("after %s: got %s, want %s", after, fmt(got, NULL), want);
}

static void test_interval_once_bounds(void **state) {
  cron_spec_t sp;
  char err[128];
  cron_spec_init(&sp);
  assert_int_equal(cron_spec_interval(&sp, 90 * 60000, T("2026-01-01T00:00:00Z"), NULL, err,
                                      sizeof(err)), 0);
  expect_next(&sp, "2025-12-31T23:59:59.999Z", "2026-01-01T00:00:00Z");
  expect_next(&sp, "2026-01-01T00:00:00Z", "2026-01-01T01:30:00Z");
  expect_next(&sp, "2026-01-01T01:29:59.999Z", "2026-01-01T01:30:00Z");
  expect_next(&sp, "2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z");
  expect_next(&sp, "2025-12-31T22:00:00Z", "2025-12-31T22:30:00Z"); /* anchor extends back */
  /* real time, zone irrelevant: one hour across the New York gap */
  assert_int_equal(cron_spec_interval(&sp, 3600000, T("2026-03-08T01:00:00-05:00"),
                                      "America/New_York", err, sizeof(err)), 0);
  expect_next(&sp, "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00");
  /* no anchor: the start bound, else the epoch */
  assert_int_equal(cron_spec_interval(&sp, 3600000, CRON_NO_START, NULL, err, sizeof(err)), 0);
  expect_next(&sp, "2026-01-01T00:30:00Z", "2026-01-01T01:00:00Z");
  assert_int_equal(cron_spec_bounds(&sp, T("2026-01-01T00:00:10Z"), CRON_NO_END, err,
                                    sizeof(err)), 0);
  expect_next(&sp, "2020-01-01T00:00:00Z", "2026-01-01T00:00:10Z");
  expect_next(&sp, "2026-01-01T00:00:10Z", "2026-01-01T01:00:10Z");
  assert_int_equal(cron_spec_bounds(&sp, T("2026-01-01T00:00:10Z"), T("2026-01-01T02:00:09Z"),
                                    err, sizeof(err)), 0);
  expect_next(&sp, "2026-01-01T00:00:10Z", "2026-01-01T01:00:10Z");
  expect_next(&sp, "2026-01-01T01:00:10Z", NULL);
  assert_int_equal(cron_spec_interval(&sp, 0, CRON_NO_START, NULL, err, sizeof(err)),
                   SPD_EBADPARAM);
  assert_string_equal(err, "interval must be a positive number of milliseconds");
  assert_int_equal(cron_spec_interval(&sp, -5, CRON_NO_START, NULL, NULL, 0), SPD_EBADPARAM);
  cron_spec_release(&sp);

  /* once */
  assert_int_equal(cron_spec_once(&sp, T("2026-06-01T12:00:00+02:00"), "Europe/Berlin", err,
                                  sizeof(err)), 0);
  expect_next(&sp, "2026-01-01T00:00:00Z", "2026-06-01T10:00:00Z");
  expect_next(&sp, "2026-06-01T09:59:59.999Z", "2026-06-01T10:00:00Z");
  expect_next(&sp, "2026-06-01T10:00:00Z", NULL);
  int64_t t;
  assert_int_equal(cron_prev(&sp, T("2027-01-01T00:00:00Z"), &t), 0);
  assert_int_equal(t, T("2026-06-01T10:00:00Z"));
  assert_int_equal(cron_prev(&sp, T("2026-06-01T10:00:00Z"), &t), -ENOENT);
  assert_int_equal(cron_spec_bounds(&sp, T("2026-07-01T00:00:00Z"), CRON_NO_END, NULL, 0), 0);
  expect_next(&sp, "2026-01-01T00:00:00Z", NULL);
  assert_int_equal(cron_spec_once(&sp, CRON_MS_MAX + 1, NULL, err, sizeof(err)), SPD_EBADPARAM);
  cron_spec_release(&sp);

  /* cron with bounds (inclusive) */
  parse_ok(&sp, "0 * * * *", NULL);
  assert_int_equal(cron_spec_bounds(&sp, T("2026-01-01T05:30:00Z"), T("2026-01-01T08:00:00Z"),
                                    NULL, 0), 0);
  expect_next(&sp, "1999-01-01T00:00:00Z", "2026-01-01T06:00:00Z");
  expect_next(&sp, "2026-01-01T06:00:00Z", "2026-01-01T07:00:00Z");
  expect_next(&sp, "2026-01-01T07:00:00Z", "2026-01-01T08:00:00Z");
  expect_next(&sp, "2026-01-01T08:00:00Z", NULL);
  assert_int_equal(cron_spec_bounds(&sp, T("2026-01-01T06:00:00Z"), CRON_NO_END, NULL, 0), 0);
  expect_next(&sp, "2000-01-01T00:00:00Z", "2026-01-01T06:00:00Z"); /* start is a fire */
  assert_int_equal(cron_spec_bounds(&sp, T("2026-01-02T00:00:00Z"), T("2026-01-01T00:00:00Z"),
                                    err, sizeof(err)), SPD_EBADPARAM);
  assert_string_equal(err, "start is after end");
  assert_int_equal(sp.start_ms, T("2026-01-01T06:00:00Z")); /* unchanged */
  cron_spec_release(&sp);

  /* a spec of kind NONE is refused */
  cron_spec_init(&sp);
  assert_int_equal(cron_next(&sp, 0, &t), SPD_EBADPARAM);
  assert_int_equal(cron_prev(&sp, 0, &t), SPD_EBADPARAM);
  size_t n;
  assert_int_equal(cron_between(&sp, 0, 1, NULL, 0, &n, NULL), SPD_EBADPARAM);
  cron_spec_release(&sp);
  cron_spec_release(NULL);

  /* the ends of time */
  parse_ok(&sp, "0 0 1 1 *", "America/New_York");
  assert_int_equal(cron_next(&sp, INT64_MAX, &t), -ENOENT);
  assert_int_equal(cron_next(&sp, CRON_MS_MAX, &t), -ENOENT);
  assert_int_equal(cron_prev(&sp, INT64_MIN, &t), -ENOENT);
  assert_int_equal(cron_next(&sp, T("9999-01-01T00:00:00-05:00"), &t), -ENOENT);
  assert_int_equal(cron_prev(&sp, INT64_MAX, &t), 0);
  assert_int_equal(t, T("9999-01-01T00:00:00-05:00"));
  assert_int_equal(cron_next(&sp, INT64_MIN, &t), 0);
  assert_true(t >= CRON_MS_MIN && t < CRON_MS_MIN + 86400000LL); /* local mean time then */
  int64_t few[3];
  assert_int_equal(cron_between(&sp, INT64_MIN, INT64_MAX, few, 3, &n, NULL), 0);
  assert_int_equal(n, 3);
  cron_spec_release(&sp);
}

/* ---- between and prev ------------------------------------------------------------ */

static void test_between(void **state) {
  cron_spec_t sp;
  int64_t out[16];
  size_t n;
  int more;
  parse_ok(&sp, "*/15 * * * *", NULL);
  assert_int_equal(cron_between(&sp, T("2026-01-01T00:00:00Z"), T("2026-01-01T01:00:00Z"), out,
                                16, &n, &more), 0);
  assert_int_equal(n, 4);
  assert_int_equal(more, 0);
  assert_int_equal(out[0], T("2026-01-01T00:15:00Z"));
  assert_int_equal(out[3], T("2026-01-01T01:00:00Z")); /* (a, b]: b included */
  assert_int_equal(cron_between(&sp, T("2026-01-01T00:00:00Z"), T("2026-01-01T01:00:00Z"), out,
                                2, &n, &more), 0);
  assert_int_equal(n, 2);
  assert_int_equal(more, 1);
  assert_int_equal(out[1], T("2026-01-01T00:30:00Z"));
  assert_int_equal(cron_between(&sp, T("2026-01-01T00:00:00Z"), T("2026-01-01T00:00:00Z"), out,
                                16, &n, &more), 0);
  assert_int_equal(n, 0);
  assert_int_equal(more, 0);
  assert_int_equal(cron_between(&sp, T("2026-01-01T00:00:00Z"), T("2026-01-01T01:00:00Z"), NULL,
                                0, &n, &more), 0);
  assert_int_equal(n, 0);
  assert_int_equal(more, 1);
  cron_spec_release(&sp);

  /* across New York's gap */
  parse_ok(&sp, "*/30 * * * *", "America/New_York");
  assert_int_equal(cron_between(&sp, T("2026-03-08T00:00:00-05:00"), T("2026-03-08T04:00:00-04:00"),
                                out, 16, &n, &more), 0);
  const char *want[] = {"2026-03-08T00:30:00-05:00", "2026-03-08T01:00:00-05:00",
                        "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00",
                        "2026-03-08T03:30:00-04:00", "2026-03-08T04:00:00-04:00"};
  assert_int_equal(n, N_ELEMS(want));
  for (size_t i = 0; i < n; i++) assert_int_equal(out[i], T(want[i]));
  cron_spec_release(&sp);

  /* a year of downtime for an every-second schedule, capped: cheap */
  parse_ok(&sp, "* * * * * *", "Europe/Berlin");
  double t0 = now_s();
  assert_int_equal(cron_between(&sp, T("2026-01-01T00:00:00Z"), T("2027-01-01T00:00:00Z"), out,
                                10, &n, &more), 0);
  assert_true(now_s() - t0 < 1.0);
  assert_int_equal(n, 10);
  assert_int_equal(more, 1);
  assert_int_equal(out[9], T("2026-01-01T00:00:10Z"));
  cron_spec_release(&sp);

  /* the three-day window the scheduler materialises, with bounds */
  parse_ok(&sp, "0 9 * * *", "Australia/Sydney");
  assert_int_equal(cron_spec_bounds(&sp, CRON_NO_START, T("2026-04-06T09:00:00+10:00"), NULL, 0),
                   0);
  assert_int_equal(cron_between(&sp, T("2026-04-03T12:00:00+11:00"), T("2026-04-06T12:00:00+10:00"),
                                out, 16, &n, &more), 0);
  assert_int_equal(n, 3);
  assert_int_equal(out[0], T("2026-04-04T09:00:00+11:00"));
  assert_int_equal(out[1], T("2026-04-05T09:00:00+10:00"));
  assert_int_equal(out[2], T("2026-04-06T09:00:00+10:00"));
  cron_spec_release(&sp);
}

struct prev_case {
  const char *zone, *expr, *before, *want;
};

static void test_prev(void **state) {
  static const struct prev_case cases[] = {
      {NULL, "*/15 * * * *", "2026-01-01T00:15:00Z", "2026-01-01T00:00:00Z"},
      {NULL, "*/15 * * * *", "2026-01-01T00:15:00.001Z", "2026-01-01T00:15:00Z"},
      {NULL, "0 0 29 2 *", "2031-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
      {NULL, "0 0 1 1 *", "2027-01-01T00:00:00Z", "2026-01-01T00:00:00Z"},
      {NULL, "*/20 * * * * *", "2026-01-01T00:00:00Z", "2025-12-31T23:59:40Z"},
      {"America/New_York", "30 2 * * *", "2026-03-08T12:00:00-04:00", "2026-03-08T03:00:00-04:00"},
      {"America/New_York", "30 1 * * *", "2026-11-01T12:00:00-05:00", "2026-11-01T01:30:00-04:00"},
      {"America/New_York", "0 * * * *", "2026-11-01T01:30:00-05:00", "2026-11-01T01:00:00-05:00"},
      {"Australia/Lord_Howe", "15 2 * * *", "2026-10-04T12:00:00+11:00",
       "2026-10-04T02:30:00+11:00"},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    cron_spec_t sp;
    int64_t t = 0;
    parse_ok(&sp, cases[i].expr, cases[i].zone);
    int rc = cron_prev(&sp, T(cases[i].before), &t);
    if (rc || t != T(cases[i].want))
      fail_msg("'%s' before %s: rc %d got %s want %s", cases[i].expr, cases[i].before, rc,
               fmt(t, cases[i].zone), cases[i].want);
    cron_spec_release(&sp);
  }
  cron_spec_t sp;
  int64_t t;
  cron_spec_init(&sp);
  assert_int_equal(cron_spec_interval(&sp, 90 * 60000, T("2026-01-01T00:00:00Z"), NULL, NULL, 0),
                   0);
  assert_int_equal(cron_prev(&sp, T("2026-01-01T03:00:00Z"), &t), 0);
  assert_int_equal(t, T("2026-01-01T01:30:00Z"));
  assert_int_equal(cron_spec_bounds(&sp, T("2026-01-01T01:00:00Z"), CRON_NO_END, NULL, 0), 0);
  assert_int_equal(cron_prev(&sp, T("2026-01-01T01:30:00Z"), &t), -ENOENT);
  cron_spec_release(&sp);
  /* prev respects the end bound */
  parse_ok(&sp, "0 0 * * *", NULL);
  assert_int_equal(cron_spec_bounds(&sp, CRON_NO_START, T("2026-01-05T12:00:00Z"), NULL, 0), 0);
  assert_int_equal(cron_prev(&sp, T("2026-02-01T00:00:00Z"), &t), 0);
  assert_int_equal(t, T("2026-01-05T00:00:00Z"));
  cron_spec_release(&sp);
}

/* ---- jitter ----------------------------------------------------------------------- */

static void test_jitter(void **state) {
  /* Pinned values from an independent Python implementation of the documented
   * hash, so another node (or language) can reproduce them. */
  assert_int_equal(cron_jitter(60000, "sched-42", T("2026-03-08T07:00:00Z")), 5171);
  assert_int_equal(cron_jitter(3600000, "", 0), 2749300);
  assert_int_equal(cron_jitter(3600000, NULL, 0), 2749300);
  assert_int_equal(cron_jitter(1000, "7", T("2026-01-01T00:00:00Z")), 230);
  assert_int_equal(cron_jitter(1, "x", 5), 0);
  assert_int_equal(cron_jitter(0, "x", 5), 0);
  assert_int_equal(cron_jitter(-10, "x", 5), 0);
  int buckets[10] = {0}, differ = 0;
  for (int i = 0; i < 10000; i++) {
    int64_t due = T("2026-01-01T00:00:00Z") + (int64_t)i * 60000;
    int64_t j = cron_jitter(1000, "sched-1", due);
    assert_true(j >= 0 && j < 1000);
    assert_int_equal(j, cron_jitter(1000, "sched-1", due));
    differ += j != cron_jitter(1000, "sched-2", due);
    buckets[j / 100]++;
  }
  for (int b = 0; b < 10; b++) assert_true(buckets[b] > 800 && buckets[b] < 1200);
  assert_true(differ > 9900);
  int64_t big = cron_jitter(INT64_MAX, "x", 1);
  assert_true(big >= 0);
}

/* ---- ISO 8601 ------------------------------------------------------------------------ */

struct fmt_case {
  const char *instant, *zone, *want;
};

struct iso_case {
  const char *s, *zone;
  const char *want; /* literal instant, or NULL when an error is expected */
  const char *msg;
};

static void test_iso(void **state) {
  static const struct fmt_case fcases[] = {
      {"2026-03-08T07:00:00Z", "America/New_York", "2026-03-08T03:00:00-04:00"},
      {"2026-03-08T06:59:59Z", "America/New_York", "2026-03-08T01:59:59-05:00"},
      {"2026-11-01T05:30:00Z", "America/New_York", "2026-11-01T01:30:00-04:00"},
      {"2026-11-01T06:30:00Z", "America/New_York", "2026-11-01T01:30:00-05:00"},
      {"2026-10-03T15:30:00Z", "Australia/Lord_Howe", "2026-10-04T02:30:00+11:00"},
      {"2026-10-03T15:29:00Z", "Australia/Lord_Howe", "2026-10-04T01:59:00+10:30"},
      {"2026-01-01T12:00:00Z", "America/St_Johns", "2026-01-01T08:30:00-03:30"},
      {"2026-01-01T00:00:00.123Z", NULL, "2026-01-01T00:00:00.123+00:00"},
      {"2026-01-01T00:00:00Z", "UTC", "2026-01-01T00:00:00+00:00"},
      {"1969-12-31T23:59:59.999Z", NULL, "1969-12-31T23:59:59.999+00:00"},
      {"0001-01-01T00:00:00Z", NULL, "0001-01-01T00:00:00+00:00"},
      {"9999-12-31T23:59:59Z", NULL, "9999-12-31T23:59:59+00:00"},
  };
  char buf[CRON_ISO_MAX];
  for (size_t i = 0; i < N_ELEMS(fcases); i++) {
    assert_int_equal(cron_format_iso(T(fcases[i].instant), fcases[i].zone, buf, sizeof(buf)), 0);
    assert_string_equal(buf, fcases[i].want);
  }
  assert_int_equal(cron_format_iso(0, "Mars/Olympus", buf, sizeof(buf)), SPD_EBADPARAM);
  assert_int_equal(cron_format_iso(CRON_MS_MAX + 1, NULL, buf, sizeof(buf)), SPD_EBADPARAM);
  assert_int_equal(cron_format_iso(0, NULL, buf, 10), SPD_EBADPARAM);

  static const struct iso_case cases[] = {
      {"2026-03-08T03:00:00-04:00", NULL, "2026-03-08T07:00:00Z", NULL},
      {"2026-03-08T07:00:00Z", "Asia/Tokyo", "2026-03-08T07:00:00Z", NULL},
      {"2026-03-08t07:00z", NULL, "2026-03-08T07:00:00Z", NULL},
      {"2026-06-01 12:00:00.5+0200", NULL, "2026-06-01T10:00:00.500Z", NULL},
      {"2026-06-01T12:00:00,25+02", NULL, "2026-06-01T10:00:00.250Z", NULL},
      {"2026-06-01T12:00:00.123456789-01:30", NULL, "2026-06-01T13:30:00.123Z", NULL},
      {"2026-06-01", "Europe/Berlin", "2026-06-01T00:00:00+02:00", NULL},
      {"2026-06-01", NULL, "2026-06-01T00:00:00Z", NULL},
      {"2026-01-15T09:30", "Asia/Kolkata", "2026-01-15T09:30:00+05:30", NULL},
      /* naive wall times follow the cron rules: gap -> after it, repeat -> first */
      {"2026-03-08T02:30:00", "America/New_York", "2026-03-08T03:00:00-04:00", NULL},
      {"2026-03-08T03:00:00", "America/New_York", "2026-03-08T03:00:00-04:00", NULL},
      {"2026-03-08T01:59:59", "America/New_York", "2026-03-08T01:59:59-05:00", NULL},
      {"2026-11-01T01:30:00", "America/New_York", "2026-11-01T01:30:00-04:00", NULL},
      {"2026-11-01T02:00:00", "America/New_York", "2026-11-01T02:00:00-05:00", NULL},
      {"2026-10-04T02:15", "Australia/Lord_Howe", "2026-10-04T02:30:00+11:00", NULL},
      {"2026-04-05T01:45", "Australia/Lord_Howe", "2026-04-05T01:45:00+11:00", NULL},
      {"2026-10-25T02:30", "Europe/Berlin", "2026-10-25T02:30:00+02:00", NULL},
      {"2026-04-05T02:30", "Australia/Sydney", "2026-04-05T02:30:00+11:00", NULL},
      {"2026-02-30", NULL, NULL, "'2026-02-30' is not a valid date"},
      {"2027-02-29T00:00Z", NULL, NULL, "'2027-02-29' is not a valid date"},
      {"2026-13-01", NULL, NULL, "'2026-13-01' is not a valid date"},
      {"0000-01-01", NULL, NULL, "'0000-01-01' is not a valid date"},
      {"2026-06-01T24:00", NULL, NULL, "'2026-06-01T24:00' has an invalid time"},
      {"2026-06-01T12:60", NULL, NULL, "'2026-06-01T12:60' has an invalid time"},
      {"2026-06-01T12:00+25:00", NULL, NULL, "'2026-06-01T12:00+25:00' has an invalid UTC offset"},
      {"yesterday", NULL, NULL,
       "'yesterday' is not an ISO 8601 date-time (YYYY-MM-DD[THH:MM[:SS]][Z|+HH:MM])"},
      {"2026-06-01T12", NULL, NULL, NULL},
      {"2026-06-01T12:00Zx", NULL, NULL, NULL},
      {"2026-06-01T12:00:00.Z", NULL, NULL, NULL},
      {"2026-06-01T12:00:00.1234567890Z", NULL, NULL, NULL},
      {"26-06-01", NULL, NULL, NULL},
      {"", NULL, NULL, NULL},
      {"2026-06-01T12:00", "Mars/Base", NULL, "unknown time zone 'Mars/Base'"},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    char err[256] = "";
    int64_t ms = 0;
    int rc = cron_parse_iso(cases[i].s, cases[i].zone, &ms, err, sizeof(err));
    if (cases[i].want) {
      if (rc != 0) fail_msg("'%s': rc %d %s", cases[i].s, rc, err);
      if (ms != T(cases[i].want))
        fail_msg("'%s' in %s: got %s want %s", cases[i].s, cases[i].zone, fmt(ms, cases[i].zone),
                 cases[i].want);
    } else {
      if (rc != SPD_EBADPARAM) fail_msg("'%s': rc %d, want SPD_EBADPARAM", cases[i].s, rc);
      if (cases[i].msg && strcmp(err, cases[i].msg) != 0)
        fail_msg("'%s': got \"%s\" want \"%s\"", cases[i].s, err, cases[i].msg);
      assert_true(err[0] != '\0');
    }
  }
  int64_t ms;
  assert_int_equal(cron_parse_iso(NULL, NULL, &ms, NULL, 0), SPD_EBADPARAM);

  /* round trips: format then parse gives the instant back, in any zone */
  const char *zones[] = {NULL, "America/New_York", "Europe/London", "Australia/Lord_Howe",
                         "Asia/Kathmandu", "America/St_Johns", "Pacific/Chatham"};
  srand(7);
  for (int i = 0; i < 3000; i++) {
    const char *z = zones[i % N_ELEMS(zones)];
    int64_t t = (int64_t)((double)rand() / RAND_MAX * 6.0e12) - 2000000000000LL;
    if (i % 2) t -= t % 1000;
    assert_int_equal(cron_format_iso(t, z, buf, sizeof(buf)), 0);
    int64_t back = 0;
    char err[128] = "";
    if (cron_parse_iso(buf, NULL, &back, err, sizeof(err)) != 0 || back != t)
      fail_msg("round trip %lld via '%s' (%s): %lld %s", (long long)t, buf, z ? z : "UTC",
               (long long)back, err);
    /* strip the offset: naive parse in the zone gives the same instant except
     * in the second pass of a repeated hour, where it picks the first. */
    char naive[CRON_ISO_MAX];
    snprintf(naive, sizeof(naive), "%.*s", (int)strcspn(buf + 19, "+-") + 19, buf);
    assert_int_equal(cron_parse_iso(naive, z, &back, err, sizeof(err)), 0);
    assert_true(back == t || back < t);
  }
}

/* ---- fuzz: random specs against a brute-force reference --------------------------- */

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;
static unsigned rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned)(rng_state >> 16);
}

static void rand_field(char *out, size_t len, int lo, int hi, const char *const *picks,
                       size_t npicks) {
  int a = lo + (int)(rng() % (unsigned)(hi - lo + 1));
  int b = a + (int)(rng() % (unsigned)(hi - a + 1));
  int step = 1 + (int)(rng() % 7);
  switch (rng() % 7) {
  case 0: snprintf(out, len, "*"); break;
  case 1: snprintf(out, len, "*/%d", step); break;
  case 2: snprintf(out, len, "%d", a); break;
  case 3: snprintf(out, len, "%d-%d", a, b); break;
  case 4: snprintf(out, len, "%d-%d/%d", a, b, step); break;
  case 5: snprintf(out, len, "%d/%d,%d", a, step, b); break;
  default: snprintf(out, len, "%s", picks[rng() % npicks]); break;
  }
}

static void rand_expr(char *out, size_t len, int six) {
  static const char *const secs[] = {"0", "*/20", "30", "0,45"};
  static const char *const mins[] = {"*/10", "0", "30", "*/15", "*/7", "5-40/5", "45", "0,30"};
  static const char *const hours[] = {"*", "1-3", "2", "*/2", "1,2", "0-23/3", "1", "3", "2-3"};
  static const char *const doms[] = {"*", "*", "*", "1-7", "*/2", "29", "31", "15"};
  static const char *const mons[] = {"*", "*", "*", "MAR-NOV", "4,10", "*/3"};
  static const char *const dows[] = {"*", "*", "*", "SUN", "MON-FRI", "0,6", "*/2", "7"};
  char f[6][16];
  rand_field(f[0], 16, 0, 59, secs, N_ELEMS(secs));
  rand_field(f[1], 16, 0, 59, mins, N_ELEMS(mins));
  rand_field(f[2], 16, 0, 23, hours, N_ELEMS(hours));
  /* days and months mostly loose so the DST days get exercised */
  snprintf(f[3], 16, "%s", doms[rng() % N_ELEMS(doms)]);
  snprintf(f[4], 16, "%s", mons[rng() % N_ELEMS(mons)]);
  snprintf(f[5], 16, "%s", dows[rng() % N_ELEMS(dows)]);
  if (six)
    snprintf(out, len, "%s %s %s %s %s %s", f[0], f[1], f[2], f[3], f[4], f[5]);
  else
    snprintf(out, len, "%s %s %s %s %s", f[1], f[2], f[3], f[4], f[5]);
}

/* Does wall time (seconds, local, as if UTC) match sp? Via gmtime_r, not the
 * module's calendar code. */
static int wall_matches(const cron_spec_t *sp, int64_t wall_s) {
  time_t tt = (time_t)wall_s;
  struct tm tm;
  gmtime_r(&tt, &tm);
  int dom = (sp->dom >> tm.tm_mday) & 1, dow = (sp->dow >> tm.tm_wday) & 1;
  int day = (sp->flags & (CRON_DOM_STAR | CRON_DOW_STAR)) ? dom && dow : dom || dow;
  return ((sp->seconds >> tm.tm_sec) & 1) && ((sp->minutes >> tm.tm_min) & 1) &&
         ((sp->hours >> tm.tm_hour) & 1) && ((sp->months >> (tm.tm_mon + 1)) & 1) && day;
}

struct zcal {
  UCalendar *cal;
};

static int32_t icu_offset(UCalendar *cal, int64_t t) {
  UErrorCode st = U_ZERO_ERROR;
  ucal_setMillis(cal, (UDate)t, &st);
  int32_t o = ucal_get(cal, UCAL_ZONE_OFFSET, &st) + ucal_get(cal, UCAL_DST_OFFSET, &st);
  assert_false(U_FAILURE(st));
  return o;
}

static UCalendar *icu_open(const char *zone) {
  UChar uz[64];
  u_uastrcpy(uz, zone);
  UErrorCode st = U_ZERO_ERROR;
  UCalendar *cal = ucal_open(uz, -1, "en_US_POSIX", UCAL_GREGORIAN, &st);
  assert_false(U_FAILURE(st));
  return cal;
}

#define WIN_MIN (60 * 60)  /* the window: 30 h either side of a transition */
#define BACK_MIN (4 * 60)  /* plus 4 h of history for "did this wall time occur already" */

/* The fire set by the rules in cron.h, minute by minute in real time, for a
 * 5-field spec (second 0) over the minutes (w0, w0 + WIN_MIN]. off[] holds
 * the zone's offset for minutes w0 - BACK_MIN .. w0 + WIN_MIN. */
static size_t reference(const cron_spec_t *sp, int64_t w0, const int32_t *off, int64_t *out) {
  size_t n = 0;
  int every = sp->hours == 0xFFFFFFu, nd = 0;
  int32_t dist[8];
  for (int k = 0; k <= BACK_MIN + WIN_MIN; k++) {
    int seen = 0;
    for (int d = 0; d < nd; d++) seen |= dist[d] == off[k];
    if (!seen && nd < 8) dist[nd++] = off[k];
  }
  for (int k = 1; k <= WIN_MIN; k++) {
    int64_t i = w0 + (int64_t)k * 60000;
    int32_t o = off[BACK_MIN + k], op = off[BACK_MIN + k - 1];
    int64_t wall = i + o;
    int fire = 0;
    if (wall_matches(sp, wall / 1000)) {
      fire = 1;
      /* an earlier minute with the same wall time? Only the offsets the
       * window has seen can have produced one. */
      for (int d = 0; d < nd && !every; d++) {
        int64_t j = (wall - dist[d] - w0) / 60000 + BACK_MIN;
        if (j >= 0 && j < BACK_MIN + k && off[j] == dist[d]) fire = 0;
      }
    }
    if (op < o) /* the clocks jumped forward at i: walls in the gap fire here */
      for (int64_t g = i + op; g < i + o; g += 60000)
        if (wall_matches(sp, g / 1000)) fire = 1;
    if (fire) out[n++] = i;
  }
  return n;
}

static void test_fuzz_reference(void **state) {
  const char *zones[] = {"America/New_York", "Europe/Berlin", "Europe/London",
                         "Australia/Sydney", "Australia/Lord_Howe", "America/St_Johns",
                         "Pacific/Chatham"};
  static int32_t off[BACK_MIN + WIN_MIN + 1];
  static int64_t ref[WIN_MIN], got[WIN_MIN];
  int compared = 0;
  for (size_t z = 0; z < N_ELEMS(zones); z++) {
    UCalendar *cal = icu_open(zones[z]);
    UErrorCode st = U_ZERO_ERROR;
    UDate tr = (UDate)T("2026-01-01T00:00:00Z");
    for (int which = 0; which < 2; which++) {
      ucal_setMillis(cal, tr, &st);
      assert_true(ucal_getTimeZoneTransitionDate(cal, UCAL_TZ_TRANSITION_NEXT, &tr, &st));
      int64_t w0 = (int64_t)tr - (int64_t)(WIN_MIN / 2) * 60000;
      for (int k = 0; k <= BACK_MIN + WIN_MIN; k++)
        off[k] = icu_offset(cal, w0 + (int64_t)(k - BACK_MIN) * 60000);
      for (int e = 0; e < 60; e++) {
        char expr[128];
        cron_spec_t sp;
        rand_expr(expr, sizeof(expr), 0);
        parse_ok(&sp, expr, zones[z]);
        size_t nref = reference(&sp, w0, off, ref), n;
        int more;
        assert_int_equal(cron_between(&sp, w0, w0 + (int64_t)WIN_MIN * 60000, got, WIN_MIN, &n,
                                      &more), 0);
        for (size_t k = 0; k < nref || k < n; k++)
          if (k >= n || k >= nref || got[k] != ref[k])
            fail_msg("%s '%s' near %s: fire %zu got %s want %s (%zu vs %zu fires)", zones[z], expr,
                     fmt((int64_t)tr, zones[z]), k, k < n ? fmt(got[k], zones[z]) : "-",
                     k < nref ? fmt(ref[k], zones[z]) : "-", n, nref);
        compared += (int)nref;
        cron_spec_release(&sp);
      }
    }
    ucal_close(cal);
  }
  assert_true(compared > 1000);
}

/* Random specs from random instants: strictly increasing, every fire matches
 * its local fields or is the end of a forward jump, prev undoes next. */
static void test_fuzz_monotonic(void **state) {
  const char *zones[] = {"UTC", "America/New_York", "Europe/Berlin", "Australia/Sydney",
                         "Australia/Lord_Howe", "Asia/Kolkata"};
  for (int e = 0; e < 300; e++) {
    char expr[128];
    const char *zone = zones[rng() % N_ELEMS(zones)];
    rand_expr(expr, sizeof(expr), (int)(rng() % 2));
    cron_spec_t sp;
    parse_ok(&sp, expr, zone);
    UCalendar *cal = icu_open(zone);
    int64_t t = T("2000-01-01T00:00:00Z") + (int64_t)(rng() % 40000) * 86400000LL +
                (int64_t)(rng() % 86400000u);
    for (int k = 0; k < 40; k++) {
      int64_t nx, pv;
      int rc = cron_next(&sp, t, &nx);
      if (rc == -ENOENT) break;
      assert_int_equal(rc, 0);
      if (nx <= t) fail_msg("%s '%s': %s not after %s", zone, expr, fmt(nx, zone), fmt(t, zone));
      int32_t o = icu_offset(cal, nx), ob = icu_offset(cal, nx - 1);
      if (!wall_matches(&sp, (nx + o) / 1000) && !(ob < o))
        fail_msg("%s '%s': %s does not match", zone, expr, fmt(nx, zone));
      if (k % 10 == 0) {
        int64_t again;
        if (cron_prev(&sp, nx, &pv) == 0) {
          assert_int_equal(cron_next(&sp, pv, &again), 0);
          if (again != nx)
            fail_msg("%s '%s': next(prev(%s)) = %s", zone, expr, fmt(nx, zone), fmt(again, zone));
        }
      }
      t = nx;
    }
    ucal_close(cal);
    cron_spec_release(&sp);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_table),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_zones),
      cmocka_unit_test(test_next_basic),
      cmocka_unit_test(test_next_dst),
      cmocka_unit_test(test_never_and_fast),
      cmocka_unit_test(test_interval_once_bounds),
      cmocka_unit_test(test_between),
      cmocka_unit_test(test_prev),
      cmocka_unit_test(test_jitter),
      cmocka_unit_test(test_iso),
      cmocka_unit_test(test_fuzz_reference),
      cmocka_unit_test(test_fuzz_monotonic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
