/* Exclusion calendars (core/calendar.h): what a definition may hold, and
 * which instants fall in one, in its zone (DST included). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/calendar.h"
#include "core/cron.h"
#include "error.h"

static int64_t at(const char *iso) {
  int64_t ms = 0;
  char err[200];
  if (cron_parse_iso(iso, "UTC", &ms, err, sizeof(err))) fail_msg("%s: %s", iso, err);
  return ms;
}

static void parse(const char *text, calendar_t *c) {
  json_error_t je;
  json_t *o = json_loads(text, 0, &je);
  char err[256] = "";
  if (!o) fail_msg("%s", je.text);
  int rc = calendar_parse(o, c, err, sizeof(err));
  json_decref(o);
  if (rc) fail_msg("%s: %s", text, err);
}

static void refused(const char *text, const char *needle) {
  json_t *o = json_loads(text, 0, NULL);
  calendar_t c;
  char err[256] = "";
  assert_non_null(o);
  assert_int_equal(calendar_parse(o, &c, err, sizeof(err)), SPD_EBADPARAM);
  json_decref(o);
  if (!strstr(err, needle)) fail_msg("%s: '%s' lacks '%s'", text, err, needle);
}

static void test_bad_definitions_say_why(void **state) {
  (void)state;
  refused("{}", "needs 'dates'");
  refused("{\"dates\": [\"2026-02-30\"]}", "2026-02-30");
  refused("{\"dates\": [\"26-12-25\"]}", "not a date");
  refused("{\"dates\": \"2026-12-25\"}", "'dates' must be an array");
  refused("{\"weekdays\": [\"funday\"]}", "funday");
  refused("{\"hours\": [\"25:00-26:00\"]}", "25:00-26:00");
  refused("{\"hours\": [\"10:00-10:00\"]}", "10:00-10:00");
  refused("{\"hours\": [\"10:00\"]}", "not a range");
  refused("{\"dates\": [\"2026-12-25\"], \"tz\": \"Mars/Olympus\"}", "Mars/Olympus");
}

static void test_dates_are_local_days_of_its_zone(void **state) {
  (void)state;
  calendar_t c;
  parse("{\"name\": \"xmas\", \"tz\": \"Europe/Paris\", \"dates\": [\"2026-12-25\"]}", &c);
  assert_true(calendar_covers(&c, at("2026-12-24T23:00:00Z")));  /* 00:00 in Paris */
  assert_true(calendar_covers(&c, at("2026-12-25T22:59:59Z")));
  assert_false(calendar_covers(&c, at("2026-12-25T23:00:00Z"))); /* the 26th there */
  assert_false(calendar_covers(&c, at("2026-12-24T22:59:59Z")));
  calendar_set_t set = {&c, 1};
  assert_ptr_equal(calendar_set_covers(&set, at("2026-12-25T12:00:00Z")), &c);
  assert_null(calendar_set_covers(&set, at("2026-12-26T12:00:00Z")));
  calendar_release(&c);
}

static void test_weekdays_and_hours(void **state) {
  (void)state;
  calendar_t c;
  /* 2026-11-28 is a Saturday */
  parse("{\"weekdays\": [\"sat\", \"Sunday\"]}", &c);
  assert_true(calendar_covers(&c, at("2026-11-28T00:00:00Z")));
  assert_true(calendar_covers(&c, at("2026-11-29T23:59:59Z")));
  assert_false(calendar_covers(&c, at("2026-11-30T00:00:00Z")));
  calendar_release(&c);
  parse("{\"hours\": [\"22:00-06:00\"]}", &c); /* every night, past midnight */
  assert_true(calendar_covers(&c, at("2026-11-30T22:00:00Z")));
  assert_true(calendar_covers(&c, at("2026-12-01T05:59:00Z")));
  assert_false(calendar_covers(&c, at("2026-12-01T06:00:00Z")));
  assert_false(calendar_covers(&c, at("2026-12-01T21:59:00Z")));
  calendar_release(&c);
  parse("{\"weekdays\": [\"mon\"], \"hours\": [\"02:00-04:00\", \"12:00-12:30\"]}", &c);
  assert_true(calendar_covers(&c, at("2026-11-30T03:00:00Z")));  /* a Monday */
  assert_true(calendar_covers(&c, at("2026-11-30T12:29:00Z")));
  assert_false(calendar_covers(&c, at("2026-11-30T12:30:00Z")));
  assert_false(calendar_covers(&c, at("2026-12-01T03:00:00Z"))); /* Tuesday */
  calendar_release(&c);
}

static void test_hours_follow_the_zone_across_dst(void **state) {
  (void)state;
  calendar_t c;
  parse("{\"tz\": \"America/New_York\", \"hours\": [\"09:00-10:00\"]}", &c);
  assert_true(calendar_covers(&c, at("2026-01-15T14:30:00Z")));  /* EST: 09:30 */
  assert_false(calendar_covers(&c, at("2026-07-15T14:30:00Z"))); /* EDT: 10:30 */
  assert_true(calendar_covers(&c, at("2026-07-15T13:30:00Z")));
  calendar_release(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_definitions_say_why),
      cmocka_unit_test(test_dates_are_local_days_of_its_zone),
      cmocka_unit_test(test_weekdays_and_hours),
      cmocka_unit_test(test_hours_follow_the_zone_across_dst),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
