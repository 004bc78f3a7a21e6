/* run/janitor.c's own logic, without a daemon: how a [retention] entry's
 * days are inherited, the cut-off a number of days makes, and the batch it
 * runs on the store thread (the lease fences a second node; the leader
 * prunes jobs beyond their count and events past their age), against a real
 * store (SQLite in a temporary directory, or SPIDERD_TEST_STORE_URL). The
 * .c is included for its statics (the project's convention). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "run/janitor.c"
#include "store_fx.h"

static void test_rule_days(void **state) {
  (void)state;
  config_retention_t r[] = {
      {.project = "p", .spider = NULL, .count = 5, .days = 7},
      {.project = "p", .spider = "a", .count = 2, .days = -1}, /* takes p's 7 */
      {.project = "p", .spider = "b", .count = 2, .days = 3},  /* its own */
      {.project = "q", .spider = "a", .count = 1, .days = -1}, /* no q entry: history_days */
      {.project = "q", .spider = NULL, .count = 1, .days = -1},
  };
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.retention = r;
  cfg.nretention = sizeof(r) / sizeof(r[0]);
  cfg.history_days = 30;
  assert_true(rule_days(&cfg, &r[0]) == 7);
  assert_true(rule_days(&cfg, &r[1]) == 7);
  assert_true(rule_days(&cfg, &r[2]) == 3);
  assert_true(rule_days(&cfg, &r[3]) == 30);
  assert_true(rule_days(&cfg, &r[4]) == 30);
}

static void test_cutoff(void **state) {
  (void)state;
  int64_t now = 10 * (int64_t)DAY_MS;
  assert_int_equal(cutoff(now, 0), 0);                  /* forever */
  assert_int_equal(cutoff(now, 1), 9 * (int64_t)DAY_MS); /* a day ago */
  assert_int_equal(cutoff(now, 0.5), now - (int64_t)(DAY_MS / 2));
  assert_int_equal(cutoff(now, 11), 0); /* before the epoch: no limit */
}

static int64_t add_ended(store_t *s, const char *spider, int64_t end_ms) {
  return fx_job(s, NULL, "p", spider, JOB_FINISHED, NULL, end_ms - 10, end_ms);
}

static void add_event(store_t *s, int64_t ts_ms) {
  event_t e = {.ts_ms = ts_ms, .type = "job.finished"};
  assert_int_equal(store_event_add(s, &e), 0);
}

static size_t jobs_left(store_t *s) {
  job_list_t l = {0};
  job_filter_t f = {.project = "p"};
  assert_int_equal(store_jobs_list(s, &f, &l), 0);
  size_t n = l.n;
  job_list_release(&l);
  return n;
}

static size_t events_left(store_t *s) {
  event_list_t l = {0};
  event_filter_t f = {0};
  assert_int_equal(store_events_list(s, &f, &l), 0);
  size_t n = l.n;
  event_list_release(&l);
  return n;
}

/* A batch as batch_submit fills it: keep one job per spider, drop events
 * that happened before events_before. */
static batch_t batch_as(const char *node, int64_t events_before) {
  return (batch_t){.node = node, .ttl_ms = 30000, .keep_default = 1,
                   .events_before = events_before};
}

static void test_batch_leader_prunes(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms();
  add_ended(s, "a", now - 3000);
  add_ended(s, "a", now - 2000);
  int64_t newest = add_ended(s, "a", now - 1000);
  int64_t other = add_ended(s, "b", now - 5000); /* alone in its spider: kept */
  add_event(s, now - 10000);
  add_event(s, now - 9000);
  add_event(s, now);
  batch_t b = batch_as("a", now - 5000);
  assert_int_equal(batch_fn(s, &b), 0);
  assert_true(b.leader);
  assert_int_equal(b.jobs.n, 2); /* what the loop side removes the files of */
  for (size_t i = 0; i < b.jobs.n; i++) {
    assert_true(b.jobs.v[i].id != newest && b.jobs.v[i].id != other);
    assert_string_equal(b.jobs.v[i].project, "p");
  }
  assert_int_equal(b.events, 2);
  assert_int_equal(b.change.finished, -2); /* both started and ended: no longer counted */
  assert_int_equal(jobs_left(s), 2);
  assert_int_equal(events_left(s), 1);
  job_list_release(&b.jobs);
  /* Again: nothing more to do. */
  batch_t again = batch_as("a", now - 5000);
  assert_int_equal(batch_fn(s, &again), 0);
  assert_true(again.leader);
  assert_int_equal(again.jobs.n, 0);
  assert_int_equal(again.events, 0);
  job_list_release(&again.jobs);
}

static void test_batch_fenced(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms();
  batch_t first = batch_as("a", 0); /* node a takes the lease */
  assert_int_equal(batch_fn(s, &first), 0);
  assert_true(first.leader);
  job_list_release(&first.jobs);
  for (int i = 0; i < 3; i++) add_ended(s, "a", now - 1000 * (i + 1));
  add_event(s, now - 10000);
  batch_t b = batch_as("b", now);
  assert_int_equal(batch_fn(s, &b), 0);
  assert_false(b.leader); /* another node's lease: it deletes nothing */
  assert_int_equal(b.jobs.n, 0);
  assert_int_equal(jobs_left(s), 3);
  assert_int_equal(events_left(s), 1);
  job_list_release(&b.jobs);
}

/* A rule of its own wins over the default: spider a keeps two, and the
 * cut-off of a project rule drops what ended before it whatever the count. */
static void test_batch_rules(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms();
  for (int i = 0; i < 4; i++) add_ended(s, "a", now - 1000 * (i + 1));
  add_ended(s, "b", now - 10 * 60000); /* ended 10 minutes ago */
  add_ended(s, "b", now - 1000);
  prune_rule_t rules[] = {
      {.project = "p", .spider = "a", .keep = 2},
      {.project = "p", .spider = NULL, .keep = 0, .ended_before_ms = now - 60000},
  };
  batch_t b = batch_as("a", 0);
  b.keep_default = 0;
  b.rules = rules;
  b.nrules = 2;
  assert_int_equal(batch_fn(s, &b), 0);
  assert_true(b.leader);
  assert_int_equal(b.jobs.n, 2 + 1);
  assert_int_equal(jobs_left(s), 3);
  job_list_release(&b.jobs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rule_days),
      cmocka_unit_test(test_cutoff),
      cmocka_unit_test_setup_teardown(test_batch_leader_prunes, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_batch_fenced, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_batch_rules, fx_setup, fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
