/* flow/tick.c: the scheduler's tick, the one store op it runs, against a
 * real store (SQLite in a temporary directory, or SPIDERD_TEST_STORE_URL):
 * the lease fences it, a due run fires once, missed runs follow the
 * schedule's policy, overlap skip holds a run back. The .c is included for
 * its store-thread functions (the project's convention for statics). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "flow/tick.c"
#include "store_fx.h"

#define HOUR (3600 * 1000LL)

/* A paused-free interval schedule whose runs are the given due times, and
 * nothing else: its horizon and refill are far away, so a tick
 * materialises nothing of its own. */
static int64_t schedule_with_runs(store_t *s, const char *name, sched_overlap_t overlap,
                                  sched_missed_t missed, const int64_t *due, size_t n) {
  schedule_t sc;
  schedule_init(&sc);
  sc.name = strdup(name);
  sc.kind = SCHED_INTERVAL;
  sc.interval_ms = HOUR;
  sc.expr = strdup("3600000");
  sc.tz = strdup("UTC");
  sc.project = strdup("p");
  sc.spider = strdup("s");
  sc.overlap = overlap;
  sc.missed = missed;
  assert_int_equal(store_schedule_insert(s, &sc), 0);
  int64_t far = clock_wall_ms() + 1000 * HOUR;
  assert_int_equal(store_runs_add(s, sc.id, due, due, n, far, far), 0);
  int64_t id = sc.id;
  schedule_release(&sc);
  return id;
}

static schedules_tick_t tick_as(const char *node) {
  return (schedules_tick_t){.node = node, .ttl_ms = 30000, .span_ms = 24 * HOUR, .grace_ms = 60000};
}

static size_t runs_in(store_t *s, int64_t schedule_id, run_state_t st) {
  sched_run_list_t l = {0};
  run_filter_t f = {.schedule_id = schedule_id, .states = 1u << st};
  assert_int_equal(store_runs_list(s, &f, &l), 0);
  size_t n = l.n;
  sched_run_list_release(&l);
  return n;
}

static size_t jobs_of(store_t *s, int64_t schedule_id) {
  job_list_t l = {0};
  job_filter_t f = {.schedule_id = schedule_id};
  assert_int_equal(store_jobs_list(s, &f, &l), 0);
  size_t n = l.n;
  job_list_release(&l);
  return n;
}

static void test_due_run_fires_once(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms(), due[] = {now - 1000, now + HOUR};
  int64_t id = schedule_with_runs(s, "due", OVERLAP_ALLOW, MISSED_SKIP, due, 2);
  schedules_tick_t t = tick_as("a");
  assert_int_equal(schedules_tick(s, &t), 0);
  assert_true(t.leader);
  assert_int_equal(t.change.queued, 1);
  assert_int_equal(t.next_ms, due[1]); /* the timer is armed for the next run */
  assert_int_equal(runs_in(s, id, RUN_FIRED), 1);
  assert_int_equal(jobs_of(s, id), 1);
  /* Again: nothing more is due, nothing fires twice. */
  schedules_tick_t again = tick_as("a");
  assert_int_equal(schedules_tick(s, &again), 0);
  assert_int_equal(again.change.queued, 0);
  assert_int_equal(jobs_of(s, id), 1);
  job_list_release(&t.cancel);
  job_list_release(&again.cancel);
}

static void test_lease_fences(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms(), due[] = {now - 1000};
  int64_t id = schedule_with_runs(s, "fenced", OVERLAP_ALLOW, MISSED_SKIP, due, 1);
  int64_t token = 0;
  assert_int_equal(store_lease_acquire(s, LEASE_NAME, "b", now, 30000, &token), 0);
  schedules_tick_t t = tick_as("a");
  assert_int_equal(schedules_tick(s, &t), 0);
  assert_false(t.leader);
  assert_int_equal(t.change.queued, 0);
  assert_int_equal(runs_in(s, id, RUN_UPCOMING), 1);
  assert_int_equal(jobs_of(s, id), 0);
  /* The holder gives it up: the other node fires. */
  assert_int_equal(store_lease_release(s, LEASE_NAME, "b", token), 0);
  schedules_tick_t t2 = tick_as("a");
  assert_int_equal(schedules_tick(s, &t2), 0);
  assert_true(t2.leader);
  assert_int_equal(jobs_of(s, id), 1);
  job_list_release(&t.cancel);
  job_list_release(&t2.cancel);
}

static void test_missed_policies(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms();
  int64_t due[] = {now - 4 * HOUR, now - 3 * HOUR, now - 2 * HOUR};
  int64_t skip = schedule_with_runs(s, "skip", OVERLAP_ALLOW, MISSED_SKIP, due, 3);
  int64_t once = schedule_with_runs(s, "once", OVERLAP_ALLOW, MISSED_ONCE, due, 3);
  schedules_tick_t t = tick_as("a");
  assert_int_equal(schedules_tick(s, &t), 0);
  assert_int_equal(runs_in(s, skip, RUN_MISSED), 3);
  assert_int_equal(jobs_of(s, skip), 0);
  assert_int_equal(runs_in(s, once, RUN_MISSED), 2);
  assert_int_equal(runs_in(s, once, RUN_FIRED), 1); /* the latest, once, now */
  assert_int_equal(jobs_of(s, once), 1);
  job_list_release(&t.cancel);
}

static void test_overlap_skip(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms(), due[] = {now - 2000, now - 1000};
  int64_t id = schedule_with_runs(s, "busy", OVERLAP_SKIP, MISSED_SKIP, due, 2);
  schedules_tick_t t = tick_as("a");
  assert_int_equal(schedules_tick(s, &t), 0);
  /* The first fires; its job is still pending when the second is due. */
  assert_int_equal(runs_in(s, id, RUN_FIRED), 1);
  assert_int_equal(runs_in(s, id, RUN_SKIPPED), 1);
  assert_int_equal(jobs_of(s, id), 1);
  job_list_release(&t.cancel);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_due_run_fires_once),
      T(test_lease_fences),
      T(test_missed_policies),
      T(test_overlap_skip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
