/* Contract tests for store.h's history retention (store_jobs_prune,
 * store_events_prune). Public API only, so every backend runs them (see
 * store_fx.h for SPIDERD_TEST_STORE_URL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "error.h"
#include "store_fx.h"

/* Inserts a job of project/spider as given; returns its id. start_ms 0 is
 * a job that never started. */
static int64_t add_job(store_t *s, const char *project, const char *spider, job_state_t st,
                       int64_t start_ms, int64_t end_ms, int64_t parent_id) {
  job_t j;
  char jobid[64];
  static int seq;
  job_init(&j);
  snprintf(jobid, sizeof(jobid), "job%d", ++seq);
  j.jobid = strdup(jobid);
  j.project = strdup(project);
  j.spider = strdup(spider);
  j.state = st;
  j.start_ms = start_ms;
  j.end_ms = end_ms;
  j.parent_id = parent_id;
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t id = j.id;
  job_release(&j);
  return id;
}

static int64_t add_ended(store_t *s, const char *project, const char *spider, int64_t end_ms) {
  return add_job(s, project, spider, JOB_FINISHED, end_ms - 10, end_ms, 0);
}

/* Prunes once; returns how many went and releases the list. */
static size_t prune(store_t *s, const prune_rule_t *rules, size_t n, int keep, int64_t before,
                    size_t max) {
  job_list_t del = {0};
  assert_int_equal(store_jobs_prune(s, rules, n, keep, before, max, &del), 0);
  size_t got = del.n;
  job_list_release(&del);
  return got;
}

static int exists(store_t *s, int64_t id) {
  job_t j;
  int rc = store_job_get(s, id, &j);
  job_release(&j);
  assert_true(rc == 0 || rc == -ENOENT);
  return rc == 0;
}

/* Jobs of project/spider left, whatever their state. */
static size_t left(store_t *s, const char *project, const char *spider) {
  job_list_t l = {0};
  job_filter_t f = {.project = project, .spider = spider};
  assert_int_equal(store_jobs_list(s, &f, &l), 0);
  size_t n = l.n;
  job_list_release(&l);
  return n;
}

static void test_count_per_spider(void **state) {
  struct fx *f = *state;
  int64_t a[5], b[3];
  for (int i = 0; i < 5; i++) a[i] = add_ended(f->s, "p", "a", 1000 * (i + 1));
  for (int i = 0; i < 3; i++) b[i] = add_ended(f->s, "p", "b", 1000 * (i + 1));
  int64_t other = add_ended(f->s, "q", "a", 100); /* another project, same spider name */

  job_list_t del = {0};
  assert_int_equal(store_jobs_prune(f->s, NULL, 0, 2, 0, 100, &del), 0);
  assert_int_equal(del.n, 3 + 1);
  /* What the janitor needs to remove the files. */
  for (size_t i = 0; i < del.n; i++) {
    const job_t *d = &del.v[i];
    assert_true(d->id > 0);
    assert_non_null(d->jobid);
    assert_string_equal(d->project, "p");
    assert_non_null(d->spider);
    assert_int_equal(d->state, JOB_FINISHED);
    assert_true(d->start_ms > 0 && d->end_ms > 0);
  }
  job_list_release(&del);
  assert_false(exists(f->s, a[0]));
  assert_false(exists(f->s, a[2]));
  assert_true(exists(f->s, a[3]));
  assert_true(exists(f->s, a[4]));
  assert_false(exists(f->s, b[0]));
  assert_true(exists(f->s, b[1]) && exists(f->s, b[2]));
  assert_true(exists(f->s, other));
  /* Within the limits now: nothing more goes. */
  assert_int_equal(prune(f->s, NULL, 0, 2, 0, 100), 0);
}

/* Newest by end_ms, then by id; state does not matter among final ones. */
static void test_count_order(void **state) {
  struct fx *f = *state;
  int64_t late = add_job(f->s, "p", "s", JOB_FAILED, 1, 9000, 0);
  int64_t tie1 = add_ended(f->s, "p", "s", 5000);
  int64_t tie2 = add_job(f->s, "p", "s", JOB_LOST, 1, 5000, 0);
  int64_t early = add_job(f->s, "p", "s", JOB_CANCELLED, 1, 8000, 0);
  assert_int_equal(prune(f->s, NULL, 0, 3, 0, 100), 1);
  assert_true(exists(f->s, late) && exists(f->s, early) && exists(f->s, tie2));
  assert_false(exists(f->s, tie1));
}

static void test_age(void **state) {
  struct fx *f = *state;
  int64_t old1 = add_ended(f->s, "p", "a", 1000);
  int64_t old2 = add_ended(f->s, "p", "b", 2000);
  int64_t edge = add_ended(f->s, "p", "a", 2500);
  int64_t young = add_ended(f->s, "p", "b", 3000);
  assert_int_equal(prune(f->s, NULL, 0, 0, 2500, 100), 2);
  assert_false(exists(f->s, old1) || exists(f->s, old2));
  assert_true(exists(f->s, edge) && exists(f->s, young));
  /* Count and age together: whichever removes more. */
  for (int i = 0; i < 4; i++) add_ended(f->s, "p", "a", 10000 + i);
  assert_int_equal(prune(f->s, NULL, 0, 3, 2600, 100), 2);
  assert_int_equal(left(f->s, "p", "a"), 3);
  assert_int_equal(left(f->s, "p", "b"), 1);
}

static void test_overrides(void **state) {
  struct fx *f = *state;
  const char *pairs[][2] = {{"news", "front"}, {"news", "sport"}, {"news", "world"},
                            {"shop", "price"}, {"keep", "all"}};
  for (size_t k = 0; k < 5; k++)
    for (int i = 0; i < 6; i++) add_ended(f->s, pairs[k][0], pairs[k][1], 1000 * (i + 1));
  const prune_rule_t rules[] = {
      {.project = "news", .keep = 1},                   /* the project's default */
      {.project = "news", .spider = "front", .keep = 4}, /* wins for news/front */
      {.project = "news", .spider = "world", .keep = 0, .ended_before_ms = 3500},
      {.project = "keep"},                               /* no limits: keeps all */
  };
  assert_int_equal(prune(f->s, rules, 4, 2, 0, 100), 2 + 5 + 3 + 4);
  assert_int_equal(left(f->s, "news", "front"), 4);
  assert_int_equal(left(f->s, "news", "sport"), 1);
  assert_int_equal(left(f->s, "news", "world"), 3); /* its own age, no count */
  assert_int_equal(left(f->s, "shop", "price"), 2); /* the defaults */
  assert_int_equal(left(f->s, "keep", "all"), 6);
  /* The spider rule is found whatever the order of the rules. */
  const prune_rule_t rev[] = {{.project = "news", .spider = "front", .keep = 2},
                              {.project = "news", .keep = 3}};
  assert_int_equal(prune(f->s, rev, 2, 0, 0, 100), 2);
  assert_int_equal(left(f->s, "news", "front"), 2);
}

static void test_never_live_jobs(void **state) {
  struct fx *f = *state;
  int64_t pending = add_job(f->s, "p", "s", JOB_PENDING, 0, 0, 0);
  int64_t running = add_job(f->s, "p", "s", JOB_RUNNING, 500, 0, 0);
  int64_t ended = add_ended(f->s, "p", "s", 1000);
  /* Everything ended before now+1 and a count of 1: still only ended ones. */
  assert_int_equal(prune(f->s, NULL, 0, 1, INT64_MAX / 2, 100), 1);
  assert_true(exists(f->s, pending) && exists(f->s, running));
  assert_false(exists(f->s, ended));
}

static void test_live_children(void **state) {
  struct fx *f = *state;
  int64_t parent = add_ended(f->s, "p", "s", 1000);
  int64_t parent2 = add_ended(f->s, "p", "s", 1100);
  int64_t child = add_job(f->s, "p", "kid", JOB_PENDING, 0, 0, parent);
  add_job(f->s, "p", "kid", JOB_RUNNING, 1500, 0, parent2);
  add_ended(f->s, "p", "s", 5000);
  assert_int_equal(prune(f->s, NULL, 0, 1, 0, 100), 0);
  assert_true(exists(f->s, parent) && exists(f->s, parent2));
  /* The pending child ends: its parent may go now; the other still waits. */
  assert_int_equal(store_job_finish(f->s, child, JOB_FINISHED, 6000, 0, 0, NULL), 0);
  job_list_t del = {0};
  assert_int_equal(store_jobs_prune(f->s, NULL, 0, 1, 0, 100, &del), 0);
  assert_int_equal(del.n, 1);
  assert_int_equal(del.v[0].id, parent);
  job_list_release(&del);
  assert_true(exists(f->s, parent2));
}

static void test_max_batches(void **state) {
  struct fx *f = *state;
  for (int i = 0; i < 10; i++) add_ended(f->s, i % 2 ? "p" : "q", "s", 1000 + i);
  size_t runs[] = {3, 3, 3, 1, 0};
  for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
    assert_int_equal(prune(f->s, NULL, 0, 0, 5000, 3), runs[i]);
  assert_int_equal(prune(f->s, NULL, 0, 0, 5000, 0), 0);
}

/* Deleting the newest ids must not let a later insert reuse them. */
static void test_id_high_water(void **state) {
  struct fx *f = *state;
  int64_t max = 0;
  for (int i = 0; i < 5; i++) max = add_ended(f->s, "p", "s", 1000 + i);
  assert_int_equal(prune(f->s, NULL, 0, 0, 100000, 100), 5);
  int64_t next = add_ended(f->s, "p", "s", 2000);
  assert_true(next > max);
  /* And again after a reopen: the mark is in the store, not the connection. */
  assert_int_equal(prune(f->s, NULL, 0, 0, 100000, 100), 1);
  store_close(f->s);
  f->s = fx_open(f->url);
  assert_true(add_ended(f->s, "p", "s", 3000) > next);
}

/* A job cancelled before it started is not shown in listings, so it takes
 * no place in the count; it goes once it is older than the kept ones. */
static void test_unstarted(void **state) {
  struct fx *f = *state;
  int64_t old_unstarted = add_job(f->s, "p", "s", JOB_CANCELLED, 0, 500, 0);
  int64_t a = add_ended(f->s, "p", "s", 1000);
  int64_t new_unstarted = add_job(f->s, "p", "s", JOB_CANCELLED, 0, 1500, 0);
  int64_t b = add_ended(f->s, "p", "s", 2000);
  assert_int_equal(prune(f->s, NULL, 0, 2, 0, 100), 1);
  assert_false(exists(f->s, old_unstarted));
  assert_true(exists(f->s, a) && exists(f->s, b) && exists(f->s, new_unstarted));
  int64_t c = add_ended(f->s, "p", "s", 3000);
  job_list_t del = {0};
  assert_int_equal(store_jobs_prune(f->s, NULL, 0, 2, 0, 100, &del), 0);
  assert_int_equal(del.n, 2); /* a, and the unstarted one now older than b */
  for (size_t i = 0; i < del.n; i++)
    assert_true(del.v[i].id == a || (del.v[i].id == new_unstarted && del.v[i].start_ms == 0));
  job_list_release(&del);
  assert_true(exists(f->s, b) && exists(f->s, c));
}

static void test_bad_arguments(void **state) {
  struct fx *f = *state;
  job_list_t del = {0};
  const prune_rule_t noproject = {.keep = 1};
  const prune_rule_t negative = {.project = "p", .keep = -1};
  assert_int_equal(store_jobs_prune(NULL, NULL, 0, 1, 0, 10, &del), -EINVAL);
  assert_int_equal(store_jobs_prune(f->s, NULL, 0, 1, 0, 10, NULL), -EINVAL);
  assert_int_equal(store_jobs_prune(f->s, NULL, 1, 1, 0, 10, &del), -EINVAL);
  assert_int_equal(store_jobs_prune(f->s, &noproject, 1, 1, 0, 10, &del), -EINVAL);
  assert_int_equal(store_jobs_prune(f->s, &negative, 1, 1, 0, 10, &del), -EINVAL);
  assert_int_equal(store_jobs_prune(f->s, NULL, 0, -1, 0, 10, &del), -EINVAL);
  assert_int_equal(store_jobs_prune(f->s, NULL, 0, 0, -5, 10, &del), -EINVAL);
  int n = 7;
  assert_int_equal(store_events_prune(f->s, 1000, 10, NULL), -EINVAL);
  assert_int_equal(store_events_prune(f->s, 0, 10, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(del.n, 0);
}

static int64_t add_event(store_t *s, int64_t ts_ms) {
  event_t e = {.type = "job.finished", .ts_ms = ts_ms, .job_id = 1};
  assert_int_equal(store_event_add(s, &e), 0);
  return e.id;
}

static size_t events_left(store_t *s) {
  event_list_t l = {0};
  assert_int_equal(store_events_list(s, NULL, &l), 0);
  size_t n = l.n;
  event_list_release(&l);
  return n;
}

static void test_events_and_runs(void **state) {
  struct fx *f = *state;
  int64_t last = 0;
  for (int i = 0; i < 6; i++) last = add_event(f->s, 1000 * (i + 1)); /* 1000..6000 */
  schedule_t sc;
  schedule_init(&sc);
  sc.name = strdup("every");
  sc.kind = SCHED_INTERVAL;
  sc.interval_ms = 1000;
  sc.project = strdup("p");
  sc.spider = strdup("s");
  assert_int_equal(store_schedule_insert(f->s, &sc), 0);
  int64_t due[4] = {100, 200, 300, 400};
  assert_int_equal(store_runs_add(f->s, sc.id, due, due, 4, 500, 400), 0);
  sched_run_list_t runs = {0};
  run_filter_t rf = {.schedule_id = sc.id};
  assert_int_equal(store_runs_list(f->s, &rf, &runs), 0);
  assert_int_equal(runs.n, 4);
  /* Three end (at 1500, 2500, 9000); one stays upcoming, however old. */
  assert_int_equal(store_run_end(f->s, runs.v[0].id, RUN_MISSED, 0, "x", 1500), 0);
  assert_int_equal(store_run_end(f->s, runs.v[1].id, RUN_SKIPPED, 0, "y", 2500), 0);
  assert_int_equal(store_run_end(f->s, runs.v[2].id, RUN_FIRED, 0, NULL, 9000), 0);
  sched_run_list_release(&runs);

  int n = 0;
  /* Batches: 3 at most per call, events first. */
  assert_int_equal(store_events_prune(f->s, 3500, 2, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(store_events_prune(f->s, 3500, 2, &n), 0);
  assert_int_equal(n, 2); /* event 3000 and the run ended at 1500 */
  assert_int_equal(store_events_prune(f->s, 3500, 2, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(store_events_prune(f->s, 3500, 2, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(events_left(f->s), 3);
  memset(&runs, 0, sizeof(runs));
  assert_int_equal(store_runs_list(f->s, &rf, &runs), 0);
  assert_int_equal(runs.n, 2);
  assert_int_equal(runs.v[0].state, RUN_FIRED);
  assert_int_equal(runs.v[1].state, RUN_UPCOMING);
  sched_run_list_release(&runs);
  /* Event ids are never reused: the newest event always stays. */
  assert_int_equal(store_events_prune(f->s, INT64_MAX / 2, 100, &n), 0);
  assert_int_equal(n, 2 + 1);
  assert_int_equal(events_left(f->s), 1);
  assert_true(add_event(f->s, 7000) > last);
  schedule_release(&sc);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_count_per_spider), T(test_count_order),   T(test_age),
      T(test_overrides),        T(test_never_live_jobs), T(test_live_children),
      T(test_max_batches),      T(test_id_high_water), T(test_unstarted),
      T(test_bad_arguments),    T(test_events_and_runs),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
