/* A run's health beside the runs like it (core/health.h): the judgement and
 * its reasons in words, the rules and their overrides; and the reading of
 * MemAvailable that slots by memory start from (run/memory.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/health.h"
#include "run/memory.h"

static health_run_t run(int64_t items, int64_t errors, int64_t requests, int64_t dur_s) {
  return (health_run_t){.items = items, .errors = errors, .requests = requests,
                        .duration_ms = dur_s * 1000, .finish_reason = "finished"};
}

/* The judgement of now against five runs like hist0 (items given per run). */
static health_level_t judge(health_run_t now, const int64_t items[5], json_t *reasons) {
  health_rules_t r;
  health_rules_default(&r);
  health_run_t hist[5];
  for (int i = 0; i < 5; i++) hist[i] = run(items[i], 2, 100, 60);
  return health_judge(&r, &now, 0, NULL, hist, 5, reasons);
}

static void expect(json_t *reasons, const char *first) {
  const char *got = json_string_value(json_array_get(reasons, 0));
  if (!got || strcmp(got, first)) fail_msg("reason '%s', expected '%s'", got ? got : "(none)", first);
}

static void test_items(void **state) {
  (void)state;
  const int64_t usual[5] = {480, 500, 520, 510, 490};
  json_t *r = json_array();
  assert_int_equal(judge(run(500, 2, 100, 60), usual, r), HEALTH_OK);
  assert_int_equal(json_array_size(r), 0);
  assert_int_equal(judge(run(200, 2, 100, 60), usual, r), HEALTH_DEGRADED);
  expect(r, "items 200, usual 480\xe2\x80\x93" "520");
  json_array_clear(r);
  assert_int_equal(judge(run(12, 2, 100, 60), usual, r), HEALTH_BROKEN);
  expect(r, "items 12, usual 480\xe2\x80\x93" "520");
  json_array_clear(r);
  assert_int_equal(judge(run(0, 2, 100, 60), usual, r), HEALTH_BROKEN);
  json_array_clear(r);
  /* a spider that usually yields nothing is not judged by its items */
  const int64_t none[5] = {0, 0, 0, 0, 0};
  assert_int_equal(judge(run(0, 2, 100, 60), none, r), HEALTH_OK);
  json_decref(r);
}

static void test_errors_requests_duration_reason(void **state) {
  (void)state;
  const int64_t usual[5] = {10, 10, 10, 10, 10};
  json_t *r = json_array();
  assert_int_equal(judge(run(10, 4, 100, 60), usual, r), HEALTH_OK); /* within errors_min */
  assert_int_equal(judge(run(10, 9, 100, 60), usual, r), HEALTH_DEGRADED);
  expect(r, "errors 9, usual 2");
  json_array_clear(r);
  assert_int_equal(judge(run(10, 2, 40, 60), usual, r), HEALTH_DEGRADED);
  expect(r, "requests 40, usual 100");
  json_array_clear(r);
  assert_int_equal(judge(run(10, 2, 100, 170), usual, r), HEALTH_OK); /* under 3 times */
  assert_int_equal(judge(run(10, 2, 100, 240), usual, r), HEALTH_DEGRADED);
  expect(r, "duration 240s, usual 60\xe2\x80\x93" "60s");
  json_array_clear(r);
  health_run_t now = run(10, 2, 100, 60);
  now.finish_reason = "closespider_timeout";
  assert_int_equal(judge(now, usual, r), HEALTH_DEGRADED);
  expect(r, "finish reason closespider_timeout, usual finished");
  json_decref(r);
}

static void test_fields_history_and_failure(void **state) {
  (void)state;
  health_rules_t rules;
  health_rules_default(&rules);
  json_t *full = json_pack("{s:f, s:f, s:f}", "name", 1.0, "price", 0.98, "note", 0.1);
  json_t *less = json_pack("{s:f, s:f}", "name", 1.0, "price", 0.4);
  health_run_t hist[5], now = run(10, 0, 10, 1);
  for (int i = 0; i < 5; i++) {
    hist[i] = run(10, 0, 10, 1);
    hist[i].fields = full;
  }
  now.fields = less;
  json_t *r = json_array();
  assert_int_equal(health_judge(&rules, &now, 0, NULL, hist, 5, r), HEALTH_DEGRADED);
  expect(r, "field price in 40% of items, usual 98%");
  assert_int_equal(json_array_size(r), 1); /* note is optional: 10 % */
  json_array_clear(r);
  assert_int_equal(health_judge(&rules, &now, 0, NULL, hist, 4, r), HEALTH_NONE);
  assert_int_equal(health_judge(&rules, &now, 1, "memory_limit", hist, 0, r), HEALTH_NONE);
  assert_int_equal(health_judge(&rules, &now, 1, "memory_limit", hist, 5, r), HEALTH_BROKEN);
  expect(r, "the run failed: memory_limit");
  json_decref(r);
  json_decref(full);
  json_decref(less);
}

static void test_rules(void **state) {
  (void)state;
  health_rules_t r;
  char why[128];
  health_rules_default(&r);
  json_t *o = json_pack("{s:i, s:f, s:i}", "history", 3, "items_degraded", 0.8, "duration_min", 5);
  assert_int_equal(health_rules_apply(&r, o, why, sizeof(why)), 0);
  assert_int_equal(r.history, 3);
  assert_int_equal(r.duration_min_ms, 5000);
  json_t *back = health_rules_json(&r);
  assert_int_equal(json_integer_value(json_object_get(back, "history")), 3);
  json_decref(back);
  json_decref(o);
  o = json_pack("{s:i}", "history", 0);
  assert_int_equal(health_rules_apply(&r, o, why, sizeof(why)), -EINVAL);
  assert_string_equal(why, "history must be a number from 1 to 100");
  assert_int_equal(r.history, 3); /* unchanged */
  json_decref(o);
  o = json_pack("{s:s}", "pause_after", "2");
  assert_int_equal(health_rules_apply(&r, o, why, sizeof(why)), -EINVAL);
  json_decref(o);
  assert_string_equal(health_name(HEALTH_DEGRADED), "degraded");
  assert_null(health_name(HEALTH_NONE));
}

static void test_stats(void **state) {
  (void)state;
  health_run_t h;
  json_t *ours = json_pack("{s:i, s:i, s:i, s:s}", "items", 7, "errors", 1, "requests", 9,
                           "finish_reason", "finished");
  health_run_from_stats(ours, 1000, 4000, &h);
  assert_int_equal(h.items, 7);
  assert_int_equal(h.requests, 9);
  assert_int_equal(h.duration_ms, 3000);
  assert_string_equal(h.finish_reason, "finished");
  json_t *scrapy = json_pack("{s:{s:i, s:i}}", "scrapy", "item_scraped_count", 5,
                             "log_count/ERROR", 2);
  health_run_from_stats(scrapy, 0, 0, &h);
  assert_int_equal(h.items, 5);
  assert_int_equal(h.errors, 2);
  json_decref(ours);
  json_decref(scrapy);
}

static void test_meminfo(void **state) {
  (void)state;
  assert_int_equal(memory_parse_meminfo("MemTotal:       24684452 kB\n"
                                        "MemFree:        21940260 kB\n"
                                        "MemAvailable:   23973640 kB\n"),
                   23973640LL * 1024);
  assert_int_equal(memory_parse_meminfo("MemTotal: 1 kB\n"), -1);
  assert_int_equal(memory_parse_meminfo(NULL), -1);
  int64_t avail = 0;
  const char *source = NULL;
  assert_int_equal(memory_available(&avail, &source), 0);
  assert_true(avail > 0);
  assert_non_null(source);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_items),      cmocka_unit_test(test_errors_requests_duration_reason),
      cmocka_unit_test(test_fields_history_and_failure), cmocka_unit_test(test_rules),
      cmocka_unit_test(test_stats),      cmocka_unit_test(test_meminfo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
