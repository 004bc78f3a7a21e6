/* Contract tests for store.h's schedules, runs, events, leases and the
 * jobs' scheduling fields. Public API only, so every backend runs them (see
 * store_fx.h for SPIDERD_TEST_STORE_URL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "error.h"
#include "store_fx.h"

static void mksched(schedule_t *sc, const char *name) {
  schedule_init(sc);
  sc->name = strdup(name);
  sc->kind = SCHED_CRON;
  sc->expr = strdup("*/5 * * * *");
  sc->tz = strdup("Europe/Berlin");
  sc->project = strdup("p");
  sc->spider = strdup("s");
  sc->args = json_pack("{s:s, s:s}", "zeta", "1", "alpha", "2");
  sc->settings = json_pack("{s:s}", "DOWNLOAD_DELAY", "1");
  sc->webhooks = json_pack("[s]", "http://127.0.0.1:1/hook");
  sc->overlap = OVERLAP_QUEUE;
  sc->missed = MISSED_CATCHUP;
  sc->catchup_max = 3;
  sc->priority = 2.5;
  sc->timeout_ms = 60000;
  sc->max_retries = 2;
  sc->retry_backoff_ms = 1500;
  sc->jitter_ms = 100;
}

static void test_schedule_crud(void **state) {
  struct fx *f = *state;
  schedule_t a, b, got;
  mksched(&a, "nightly");
  assert_int_equal(store_schedule_insert(f->s, &a), 0);
  assert_true(a.id > 0);
  assert_true(a.created_ms > 0);
  mksched(&b, "nightly");
  assert_int_equal(store_schedule_insert(f->s, &b), SPD_ECONFLICT);
  free(b.name);
  b.name = strdup("hourly");
  assert_int_equal(store_schedule_insert(f->s, &b), 0);
  assert_true(b.id > a.id);

  assert_int_equal(store_schedule_get(f->s, a.id, &got), 0);
  assert_string_equal(got.name, "nightly");
  assert_string_equal(got.expr, "*/5 * * * *");
  assert_string_equal(got.tz, "Europe/Berlin");
  assert_int_equal(got.overlap, OVERLAP_QUEUE);
  assert_int_equal(got.missed, MISSED_CATCHUP);
  assert_int_equal(got.catchup_max, 3);
  assert_int_equal(got.timeout_ms, 60000);
  assert_int_equal(got.max_retries, 2);
  assert_int_equal(got.retry_backoff_ms, 1500);
  assert_int_equal(got.jitter_ms, 100);
  assert_true(got.priority == 2.5);
  assert_null(got.version);
  /* Argument order survives the round trip. */
  assert_string_equal(json_object_iter_key(json_object_iter(got.args)), "zeta");
  assert_string_equal(json_string_value(json_array_get(got.webhooks, 0)),
                      "http://127.0.0.1:1/hook");
  schedule_release(&got);

  assert_int_equal(store_schedule_find(f->s, "hourly", &got), 0);
  assert_int_equal(got.id, b.id);
  schedule_release(&got);
  assert_int_equal(store_schedule_find(f->s, "nope", &got), -ENOENT);
  assert_int_equal(store_schedule_get(f->s, 9999, &got), -ENOENT);

  /* Update: every field, and a rename onto a taken name is a conflict. */
  a.paused = 1;
  a.refill_ms = 42;
  free(a.expr);
  a.expr = strdup("0 3 * * *");
  assert_int_equal(store_schedule_update(f->s, &a), 0);
  assert_int_equal(store_schedule_get(f->s, a.id, &got), 0);
  assert_int_equal(got.paused, 1);
  assert_int_equal(got.refill_ms, 42);
  assert_string_equal(got.expr, "0 3 * * *");
  schedule_release(&got);
  free(a.name);
  a.name = strdup("hourly");
  assert_int_equal(store_schedule_update(f->s, &a), SPD_ECONFLICT);
  a.id = 9999;
  free(a.name);
  a.name = strdup("other");
  assert_int_equal(store_schedule_update(f->s, &a), -ENOENT);

  schedule_list_t l = {0};
  assert_int_equal(store_schedules_list(f->s, 0, 0, &l), 0);
  assert_int_equal(l.n, 2);
  assert_string_equal(l.v[0].name, "nightly");
  int64_t first = l.v[0].id;
  schedule_list_release(&l);
  assert_int_equal(store_schedules_list(f->s, first, 1, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].name, "hourly");
  schedule_list_release(&l);

  assert_int_equal(store_schedule_delete(f->s, b.id), 0);
  assert_int_equal(store_schedule_delete(f->s, b.id), -ENOENT);
  assert_int_equal(store_schedules_list(f->s, 0, 0, &l), 0);
  assert_int_equal(l.n, 1);
  schedule_list_release(&l);
  schedule_release(&a);
  schedule_release(&b);
}

/* A schedule's state: none at first, set, kept across an update of the
 * definition, cleared, gone with its schedule. */
static void test_schedule_state(void **state) {
  struct fx *f = *state;
  schedule_t a;
  char *st = (char *)"unset";
  mksched(&a, "stateful");
  assert_int_equal(store_schedule_insert(f->s, &a), 0);
  assert_int_equal(store_schedule_state_get(f->s, a.id, &st), 0);
  assert_null(st);
  assert_int_equal(store_schedule_state_set(f->s, a.id, "{\"page\": 3}"), 0);
  a.paused = 1;
  assert_int_equal(store_schedule_update(f->s, &a), 0);
  assert_int_equal(store_schedule_state_get(f->s, a.id, &st), 0);
  assert_string_equal(st, "{\"page\": 3}");
  free(st);
  assert_int_equal(store_schedule_state_set(f->s, a.id, ""), 0);
  assert_int_equal(store_schedule_state_get(f->s, a.id, &st), 0);
  assert_string_equal(st, "");
  free(st);
  assert_int_equal(store_schedule_state_set(f->s, a.id, NULL), 0);
  assert_int_equal(store_schedule_state_get(f->s, a.id, &st), 0);
  assert_null(st);
  assert_int_equal(store_schedule_state_set(f->s, a.id, "x"), 0);
  assert_int_equal(store_schedule_delete(f->s, a.id), 0);
  assert_int_equal(store_schedule_state_get(f->s, a.id, &st), -ENOENT);
  assert_int_equal(store_schedule_state_set(f->s, a.id, "y"), -ENOENT);
  assert_int_equal(store_schedule_state_set(f->s, 0, "y"), -EINVAL);
  schedule_release(&a);
}

static void test_runs(void **state) {
  struct fx *f = *state;
  schedule_t a;
  mksched(&a, "a");
  assert_int_equal(store_schedule_insert(f->s, &a), 0);
  int64_t due[] = {1000, 2000, 3000}, fire[] = {1010, 2020, 3030};
  assert_int_equal(store_runs_add(f->s, a.id, due, fire, 3, 3000, 2500), 0);
  /* Adding the same due times again (another materialiser, a restart)
   * leaves the rows as they are: a due time is one run. */
  int64_t fire2[] = {1500, 2500, 3500};
  assert_int_equal(store_runs_add(f->s, a.id, due, fire2, 3, 3000, 2500), 0);
  assert_int_equal(store_runs_add(f->s, 9999, due, fire, 3, 3000, 2500), -ENOENT);

  schedule_t got;
  assert_int_equal(store_schedule_get(f->s, a.id, &got), 0);
  assert_int_equal(got.horizon_ms, 3000);
  assert_int_equal(got.refill_ms, 2500);
  schedule_release(&got);
  schedule_list_t sl = {0};
  assert_int_equal(store_schedules_refill(f->s, 2499, 0, &sl), 0);
  assert_int_equal(sl.n, 0);
  assert_int_equal(store_schedules_refill(f->s, 2500, 0, &sl), 0);
  assert_int_equal(sl.n, 1);
  schedule_list_release(&sl);

  sched_run_list_t l = {0};
  assert_int_equal(store_runs_due(f->s, 2020, 10, &l), 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.v[0].due_ms, 1000);
  assert_int_equal(l.v[0].fire_ms, 1010);
  assert_int_equal(l.v[1].due_ms, 2000);
  assert_int_equal(l.v[0].state, RUN_UPCOMING);
  int64_t r1 = l.v[0].id, r2 = l.v[1].id;
  sched_run_list_release(&l);
  assert_int_equal(store_run_defer(f->s, r1, "waits for job 5"), 0);
  assert_int_equal(store_runs_due(f->s, 1010, 10, &l), 0);
  assert_string_equal(l.v[0].reason, "waits for job 5");
  sched_run_list_release(&l);

  assert_int_equal(store_run_end(f->s, r1, RUN_FIRED, 77, NULL, 5000), 0);
  assert_int_equal(store_run_end(f->s, r1, RUN_FIRED, 78, NULL, 5000), -ENOENT);
  assert_int_equal(store_run_end(f->s, r2, RUN_SKIPPED, 0, "previous run still running", 5000), 0);
  assert_int_equal(store_run_end(f->s, r2, RUN_UPCOMING, 0, NULL, 5000), -EINVAL);
  assert_int_equal(store_run_defer(f->s, r1, "x"), -ENOENT);
  assert_int_equal(store_schedule_get(f->s, a.id, &got), 0);
  assert_int_equal(got.last_due_ms, 2000);
  schedule_release(&got);

  assert_int_equal(store_runs_due(f->s, 10000, 10, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].due_ms, 3000);
  sched_run_list_release(&l);

  run_filter_t rf = {.schedule_id = a.id};
  assert_int_equal(store_runs_list(f->s, &rf, &l), 0);
  assert_int_equal(l.n, 3);
  assert_int_equal(l.v[0].state, RUN_FIRED);
  assert_int_equal(l.v[0].job_id, 77);
  assert_int_equal(l.v[0].done_ms, 5000);
  assert_int_equal(l.v[1].state, RUN_SKIPPED);
  assert_string_equal(l.v[1].reason, "previous run still running");
  sched_run_list_release(&l);
  rf.states = 1u << RUN_UPCOMING;
  assert_int_equal(store_runs_list(f->s, &rf, &l), 0);
  assert_int_equal(l.n, 1);
  sched_run_list_release(&l);
  rf = (run_filter_t){.schedule_id = a.id, .from_ms = 2000, .to_ms = 3000};
  assert_int_equal(store_runs_list(f->s, &rf, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].due_ms, 2000);
  sched_run_list_release(&l);

  /* Clearing removes only upcoming runs and resets the horizon. */
  assert_int_equal(store_runs_clear(f->s, a.id, 4500), 0);
  rf = (run_filter_t){.schedule_id = a.id};
  assert_int_equal(store_runs_list(f->s, &rf, &l), 0);
  assert_int_equal(l.n, 2); /* fired, skipped */
  sched_run_list_release(&l);
  assert_int_equal(store_schedule_get(f->s, a.id, &got), 0);
  assert_int_equal(got.horizon_ms, 4500);
  assert_int_equal(got.refill_ms, 0);
  assert_int_equal(got.last_due_ms, 2000);
  schedule_release(&got);

  /* Deleting the schedule deletes its runs. */
  assert_int_equal(store_schedule_delete(f->s, a.id), 0);
  rf = (run_filter_t){0};
  assert_int_equal(store_runs_list(f->s, &rf, &l), 0);
  assert_int_equal(l.n, 0);
  sched_run_list_release(&l);
  schedule_release(&a);
}

static void test_events(void **state) {
  struct fx *f = *state;
  int64_t head = -1;
  assert_int_equal(store_events_head(f->s, &head), 0);
  assert_int_equal(head, 0);
  const char *types[] = {"schedule.created", "job.queued", "job.started",
                         "job.finished", "run.missed"};
  for (int i = 0; i < 5; i++) {
    event_t e = {.type = (char *)types[i], .schedule_id = i < 2 ? 7 : 0,
                 .job_id = i ? 40 + (i > 1) : 0,
                 .data = json_pack("{s:i}", "n", i)};
    assert_int_equal(store_event_add(f->s, &e), 0);
    assert_true(e.id > 0);
    assert_true(e.ts_ms > 0);
    json_decref(e.data);
  }
  event_list_t l = {0};
  assert_int_equal(store_events_list(f->s, NULL, &l), 0);
  assert_int_equal(l.n, 5);
  head = 0;
  assert_int_equal(store_events_head(f->s, &head), 0);
  assert_int_equal(head, l.v[4].id);
  for (size_t i = 1; i < l.n; i++) assert_true(l.v[i].id > l.v[i - 1].id);
  assert_string_equal(l.v[0].type, "schedule.created");
  assert_int_equal(json_integer_value(json_object_get(l.v[4].data, "n")), 4);
  int64_t second = l.v[1].id;
  event_list_release(&l);

  event_filter_t ef = {.type_prefix = "job."};
  assert_int_equal(store_events_list(f->s, &ef, &l), 0);
  assert_int_equal(l.n, 3);
  event_list_release(&l);
  /* The prefix is literal: no LIKE wildcards. */
  ef.type_prefix = "job%";
  assert_int_equal(store_events_list(f->s, &ef, &l), 0);
  assert_int_equal(l.n, 0);
  event_list_release(&l);
  ef = (event_filter_t){.after_id = second, .limit = 2};
  assert_int_equal(store_events_list(f->s, &ef, &l), 0);
  assert_int_equal(l.n, 2);
  assert_string_equal(l.v[0].type, "job.started");
  event_list_release(&l);
  ef = (event_filter_t){.schedule_id = 7};
  assert_int_equal(store_events_list(f->s, &ef, &l), 0);
  assert_int_equal(l.n, 2);
  event_list_release(&l);
  ef = (event_filter_t){.job_id = 41};
  assert_int_equal(store_events_list(f->s, &ef, &l), 0);
  assert_int_equal(l.n, 3);
  event_list_release(&l);
}

/* Newest first and `before`: the latest page, then the pages below it. */
static void expect_ids(store_t *s, const event_filter_t *ef, const int64_t *want, size_t n) {
  event_list_t l = {0};
  assert_int_equal(store_events_list(s, ef, &l), 0);
  assert_int_equal(l.n, n);
  for (size_t i = 0; i < n; i++) assert_int_equal(l.v[i].id, want[i]);
  event_list_release(&l);
}

static void test_events_newest_first(void **state) {
  struct fx *f = *state;
  /* Two schedules' and three jobs' events, interleaved. */
  const char *types[] = {"job.queued", "schedule.created", "job.started", "job.finished",
                         "job.queued", "schedule.paused", "job.started", "job.failed"};
  const int64_t sched[] = {3, 3, 0, 4, 4, 3, 3, 0};
  const int64_t job[] = {50, 0, 50, 50, 51, 0, 52, 52};
  int64_t id[8];
  for (int i = 0; i < 8; i++) {
    event_t e = {.type = (char *)types[i], .schedule_id = sched[i], .job_id = job[i]};
    assert_int_equal(store_event_add(f->s, &e), 0);
    id[i] = e.id;
  }

  event_filter_t ef = {.newest_first = 1};
  expect_ids(f->s, &ef, (int64_t[]){id[7], id[6], id[5], id[4], id[3], id[2], id[1], id[0]}, 8);
  /* The newest N, then the page below the last one seen. */
  ef = (event_filter_t){.newest_first = 1, .limit = 3};
  expect_ids(f->s, &ef, (int64_t[]){id[7], id[6], id[5]}, 3);
  ef.before_id = id[5];
  expect_ids(f->s, &ef, (int64_t[]){id[4], id[3], id[2]}, 3);
  ef.before_id = id[2];
  expect_ids(f->s, &ef, (int64_t[]){id[1], id[0]}, 2);
  ef.before_id = id[0];
  expect_ids(f->s, &ef, NULL, 0);
  /* before alone, oldest first: the oldest below it. */
  ef = (event_filter_t){.before_id = id[3], .limit = 2};
  expect_ids(f->s, &ef, (int64_t[]){id[0], id[1]}, 2);
  /* after and before together are a window, either way. */
  ef = (event_filter_t){.after_id = id[1], .before_id = id[5]};
  expect_ids(f->s, &ef, (int64_t[]){id[2], id[3], id[4]}, 3);
  ef.newest_first = 1;
  expect_ids(f->s, &ef, (int64_t[]){id[4], id[3], id[2]}, 3);
  ef = (event_filter_t){.after_id = id[4], .before_id = id[5]};
  expect_ids(f->s, &ef, NULL, 0);
  /* Every filter combines with the order and the bounds. */
  ef = (event_filter_t){.newest_first = 1, .type_prefix = "job."};
  expect_ids(f->s, &ef, (int64_t[]){id[7], id[6], id[4], id[3], id[2], id[0]}, 6);
  ef = (event_filter_t){.newest_first = 1, .type_prefix = "job.", .before_id = id[4],
                        .limit = 2};
  expect_ids(f->s, &ef, (int64_t[]){id[3], id[2]}, 2);
  ef = (event_filter_t){.newest_first = 1, .schedule_id = 3};
  expect_ids(f->s, &ef, (int64_t[]){id[6], id[5], id[1], id[0]}, 4);
  ef = (event_filter_t){.newest_first = 1, .schedule_id = 3, .before_id = id[6], .limit = 2};
  expect_ids(f->s, &ef, (int64_t[]){id[5], id[1]}, 2);
  ef = (event_filter_t){.newest_first = 1, .job_id = 50, .limit = 2};
  expect_ids(f->s, &ef, (int64_t[]){id[3], id[2]}, 2);
  ef = (event_filter_t){.newest_first = 1, .job_id = 52, .schedule_id = 3,
                        .type_prefix = "job.s"};
  expect_ids(f->s, &ef, (int64_t[]){id[6]}, 1);
  ef = (event_filter_t){.newest_first = 1, .schedule_id = 4, .job_id = 51,
                        .after_id = id[3], .before_id = id[7]};
  expect_ids(f->s, &ef, (int64_t[]){id[4]}, 1);
  /* A negative bound is a caller's mistake. */
  event_list_t l = {0};
  ef = (event_filter_t){.before_id = -1};
  assert_int_equal(store_events_list(f->s, &ef, &l), -EINVAL);
  assert_int_equal(l.n, 0);
}

static void test_leases(void **state) {
  struct fx *f = *state;
  int64_t t1 = 0, t2 = 0, t3 = 0;
  assert_int_equal(store_lease_acquire(f->s, "scheduler", "A", 1000, 500, &t1), 0);
  /* Another holder waits while A's lease is valid. */
  assert_int_equal(store_lease_acquire(f->s, "scheduler", "B", 1200, 500, &t2), -EBUSY);
  /* A renews: same token, later expiry. */
  assert_int_equal(store_lease_acquire(f->s, "scheduler", "A", 1400, 500, &t2), 0);
  assert_int_equal(t2, t1);
  assert_int_equal(store_lease_check(f->s, "scheduler", t1, 1800), 0);
  assert_int_equal(store_lease_check(f->s, "scheduler", t1, 1900), SPD_EFENCED);
  /* Expired: B takes over with a new token; A's token is fenced off. */
  assert_int_equal(store_lease_acquire(f->s, "scheduler", "B", 1900, 500, &t2), 0);
  assert_true(t2 > t1);
  assert_int_equal(store_lease_check(f->s, "scheduler", t1, 1950), SPD_EFENCED);
  assert_int_equal(store_lease_check(f->s, "scheduler", t2, 1950), 0);
  assert_int_equal(store_lease_acquire(f->s, "scheduler", "A", 1950, 500, &t3), -EBUSY);
  char *holder = NULL;
  int64_t tok = 0, exp = 0;
  assert_int_equal(store_lease_get(f->s, "scheduler", &holder, &tok, &exp), 0);
  assert_string_equal(holder, "B");
  assert_int_equal(tok, t2);
  assert_int_equal(exp, 2400);
  free(holder);
  /* Release with a stale token does nothing; with the right one frees it. */
  assert_int_equal(store_lease_release(f->s, "scheduler", "B", t1), -ENOENT);
  assert_int_equal(store_lease_release(f->s, "scheduler", "B", t2), 0);
  assert_int_equal(store_lease_acquire(f->s, "scheduler", "A", 2000, 500, &t3), 0);
  assert_true(t3 > t2);
  /* The same holder taking an expired lease again gets a new token too:
   * work it stamped before it stalled must not pass. */
  int64_t t4 = 0;
  assert_int_equal(store_lease_acquire(f->s, "scheduler", "A", 9000, 500, &t4), 0);
  assert_true(t4 > t3);
  /* Leases are independent by name. */
  assert_int_equal(store_lease_acquire(f->s, "other", "B", 9000, 500, &t1), 0);
  assert_int_equal(store_lease_get(f->s, "none", &holder, &tok, &exp), -ENOENT);
  assert_int_equal(store_lease_acquire(f->s, "x", "A", 0, 0, &t1), -EINVAL);
}

static void mkjob(job_t *j, const char *jobid) {
  job_init(j);
  j->project = strdup("p");
  j->jobid = strdup(jobid);
  j->spider = strdup("s");
}

static void test_job_fields(void **state) {
  struct fx *f = *state;
  job_t j, got;
  mkjob(&j, "a");
  j.schedule_id = 5;
  j.parent_id = 9;
  j.retry_of = 3;
  j.attempt = 2;
  j.max_retries = 4;
  j.retry_backoff_ms = 250;
  j.timeout_ms = 30000;
  j.not_before_ms = 5000;
  assert_int_equal(store_job_insert(f->s, &j), 0);
  assert_int_equal(store_job_get(f->s, j.id, &got), 0);
  assert_int_equal(got.schedule_id, 5);
  assert_int_equal(got.parent_id, 9);
  assert_int_equal(got.retry_of, 3);
  assert_int_equal(got.attempt, 2);
  assert_int_equal(got.max_retries, 4);
  assert_int_equal(got.retry_backoff_ms, 250);
  assert_int_equal(got.timeout_ms, 30000);
  assert_int_equal(got.not_before_ms, 5000);
  job_release(&got);

  /* Not claimed before its time, even with nothing else pending. */
  job_list_t l = {0};
  assert_int_equal(store_job_claim(f->s, "n", 1, 4999, &l), 0);
  assert_int_equal(l.n, 0);
  int64_t next = 0;
  assert_int_equal(store_job_next_due(f->s, 1000, &next), 0);
  assert_int_equal(next, 5000);
  assert_int_equal(store_job_next_due(f->s, 5000, &next), 0);
  assert_int_equal(next, 0);
  /* A job with no delay behind it at lower priority is claimed first. */
  job_t k;
  mkjob(&k, "b");
  k.priority = -1;
  assert_int_equal(store_job_insert(f->s, &k), 0);
  assert_int_equal(store_job_claim(f->s, "n", 2, 4999, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, k.id);
  assert_int_equal(l.v[0].attempt, 1);
  job_list_release(&l);
  assert_int_equal(store_job_claim(f->s, "n", 1, 5000, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, j.id);
  job_list_release(&l);

  assert_int_equal(store_job_heartbeat(f->s, j.id, 6000), 0);
  assert_int_equal(store_job_get(f->s, j.id, &got), 0);
  assert_int_equal(got.heartbeat_ms, 6000);
  job_release(&got);
  assert_int_equal(store_job_finish(f->s, j.id, JOB_FINISHED, 7000, 0, 0, NULL), 0);
  assert_int_equal(store_job_heartbeat(f->s, j.id, 8000), -ENOENT);
  job_release(&j);
  job_release(&k);
}

static void test_job_native_list(void **state) {
  struct fx *f = *state;
  int64_t ids[10];
  for (int i = 0; i < 10; i++) {
    job_t j;
    char name[16];
    snprintf(name, sizeof(name), "j%d", i);
    mkjob(&j, name);
    if (i % 2) {
      free(j.spider);
      j.spider = strdup("other");
    }
    j.schedule_id = i < 5 ? 1 : 2;
    j.parent_id = i == 3 ? ids[0] : 0;
    j.created_ms = 1000 * (i + 1);
    assert_int_equal(store_job_insert(f->s, &j), 0);
    ids[i] = j.id;
    job_release(&j);
  }
  job_list_t l = {0};
  job_filter_t jf = {.newest_first = 1, .limit = 4};
  assert_int_equal(store_jobs_list(f->s, &jf, &l), 0);
  assert_int_equal(l.n, 4);
  assert_int_equal(l.v[0].id, ids[9]);
  assert_int_equal(l.v[3].id, ids[6]);
  jf.before_id = l.v[3].id;
  job_list_release(&l);
  assert_int_equal(store_jobs_list(f->s, &jf, &l), 0);
  assert_int_equal(l.n, 4);
  assert_int_equal(l.v[0].id, ids[5]);
  job_list_release(&l);

  jf = (job_filter_t){.spider = "other"};
  assert_int_equal(store_jobs_list(f->s, &jf, &l), 0);
  assert_int_equal(l.n, 5);
  job_list_release(&l);
  jf = (job_filter_t){.schedule_id = 2, .spider = "s"};
  assert_int_equal(store_jobs_list(f->s, &jf, &l), 0);
  assert_int_equal(l.n, 2); /* j6, j8 */
  job_list_release(&l);
  jf = (job_filter_t){.parent_id = ids[0]};
  assert_int_equal(store_jobs_list(f->s, &jf, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, ids[3]);
  job_list_release(&l);
  jf = (job_filter_t){.created_from_ms = 3000, .created_to_ms = 5000};
  assert_int_equal(store_jobs_list(f->s, &jf, &l), 0);
  assert_int_equal(l.n, 2);
  job_list_release(&l);
  jf = (job_filter_t){.newest_first = 1, .states = 1u << JOB_RUNNING};
  assert_int_equal(store_jobs_list(f->s, &jf, &l), 0);
  assert_int_equal(l.n, 0);
  job_list_release(&l);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_schedule_crud), T(test_schedule_state), T(test_runs),       T(test_events), T(test_events_newest_first),
      T(test_leases),        T(test_job_fields), T(test_job_native_list),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
