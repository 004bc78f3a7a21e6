/* flow/jobs.h: each transition of a job and the events it records, against
 * a real store (SQLite in a temporary directory, or SPIDERD_TEST_STORE_URL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "error.h"
#include "flow/jobs.h"
#include "metrics.h"
#include "store_fx.h"

static job_t new_job(const char *jobid, const char *unique_key) {
  job_t j;
  job_init(&j);
  j.jobid = strdup(jobid);
  j.project = strdup("p");
  j.spider = strdup("s");
  j.unique_key = unique_key ? strdup(unique_key) : NULL;
  j.state = JOB_PENDING;
  return j;
}

/* The events of job id, oldest first. */
static event_list_t events_of(store_t *s, int64_t id) {
  event_list_t l = {0};
  event_filter_t f = {.job_id = id};
  assert_int_equal(store_events_list(s, &f, &l), 0);
  return l;
}

static const char *data_str(const event_t *e, const char *k) {
  return json_string_value(json_object_get(e->data, k));
}

static void test_enqueue(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  job_t j = new_job("a", "k1");
  flow_change_t c = {0};
  assert_int_equal(jobs_enqueue(s, &j, json_pack("{s:I}", "run_id", (json_int_t)7), &c), 0);
  assert_int_equal(c.queued, 1);
  assert_true(c.dispatch); /* due now: the launcher is woken */
  assert_true(j.id > 0 && j.created_ms > 0);
  event_list_t l = events_of(s, j.id);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].type, "job.queued");
  assert_int_equal(l.v[0].ts_ms, j.created_ms);
  assert_string_equal(data_str(&l.v[0], "project"), "p");
  assert_string_equal(data_str(&l.v[0], "jobid"), "a");
  assert_int_equal(json_integer_value(json_object_get(l.v[0].data, "run_id")), 7);
  event_list_release(&l);

  /* A held key writes nothing and names the holder. */
  job_t dup = new_job("b", "k1");
  assert_int_equal(jobs_enqueue(s, &dup, NULL, NULL), SPD_ECONFLICT);
  assert_int_equal(dup.id, j.id);
  event_list_t all = {0};
  assert_int_equal(store_events_list(s, NULL, &all), 0);
  assert_int_equal(all.n, 1);
  event_list_release(&all);
  job_release(&dup);
  job_release(&j);
}

static void test_cancel_family(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  job_t parent = new_job("par", NULL), twin = new_job("par", NULL);
  parent.priority = twin.priority = -1;
  assert_int_equal(jobs_enqueue(s, &parent, NULL, NULL), 0);
  assert_int_equal(jobs_enqueue(s, &twin, NULL, NULL), 0);
  job_t kid = new_job("kid", NULL), here = new_job("here", NULL), there = new_job("there", NULL);
  kid.parent_id = here.parent_id = there.parent_id = parent.id;
  kid.priority = -1;
  here.priority = 2;
  there.priority = 1;
  assert_int_equal(jobs_enqueue(s, &kid, NULL, NULL), 0);
  assert_int_equal(jobs_enqueue(s, &here, NULL, NULL), 0);
  assert_int_equal(jobs_enqueue(s, &there, NULL, NULL), 0);
  /* Highest priority first: "here" runs on this node (n1), "there" on n2. */
  job_list_t got = {0};
  assert_int_equal(store_job_claim(s, "n1", 1, 1000, &got), 0);
  assert_int_equal(store_job_claim(s, "n2", 1, 1000, &got), 0);
  assert_int_equal(got.n, 2);
  assert_int_equal(got.v[0].id, here.id);
  assert_int_equal(got.v[1].id, there.id);
  job_list_release(&got);

  jobs_cancel_t c = {.project = "p", .jobid = "par", .node = "n1"};
  assert_int_equal(jobs_cancel(s, &c, 5000), 0);
  assert_int_equal(c.count, 2);  /* parent and its twin, both pending */
  assert_int_equal(c.family, 1); /* kid */
  assert_int_equal(c.change.unqueued, 3); /* every pending entry cancelled leaves the queue */
  assert_int_equal(c.running.n, 1);
  assert_string_equal(c.running.v[0].jobid, "here");
  job_list_t asked = {0};
  assert_int_equal(store_jobs_cancel_requested(s, "n2", &asked), 0);
  assert_int_equal(asked.n, 1);
  assert_int_equal(asked.v[0].id, there.id);
  job_list_release(&asked);
  job_list_release(&c.running);

  event_list_t l = events_of(s, kid.id);
  assert_int_equal(l.n, 2);
  assert_string_equal(l.v[1].type, "job.cancelled");
  assert_false(json_boolean_value(json_object_get(l.v[1].data, "started")));
  event_list_release(&l);
  job_t *all[] = {&parent, &twin, &kid, &here, &there};
  for (size_t i = 0; i < 5; i++) job_release(all[i]);
}

/* A job this node claimed is "here" to a cancel even before its process
 * is seen (the claim's callback may not have run when the cancel began),
 * so the cancel signals it once the claim has started it. */
static void test_cancel_claimed_here(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  job_t j = new_job("claimed", NULL);
  assert_int_equal(jobs_enqueue(s, &j, NULL, NULL), 0);
  job_list_t got = {0};
  assert_int_equal(store_job_claim(s, "n1", 1, 1000, &got), 0);
  assert_int_equal(got.n, 1);
  job_list_release(&got);
  jobs_cancel_t here = {.project = "p", .jobid = "claimed", .node = "n1"};
  assert_int_equal(jobs_cancel(s, &here, 5000), 0);
  assert_int_equal(here.here, 1);
  assert_int_equal(here.remote + here.count, 0);
  jobs_cancel_t there = {.project = "p", .jobid = "claimed", .node = "n2"};
  assert_int_equal(jobs_cancel(s, &there, 5000), 0);
  assert_int_equal(there.here, 0);
  assert_int_equal(there.remote, 1);
  job_list_release(&here.running);
  job_list_release(&there.running);
  job_release(&j);
}

/* Runs j (pending) on n1 and returns its row as the supervisor holds it. */
static job_t run(store_t *s, job_t *j) {
  assert_int_equal(jobs_enqueue(s, j, NULL, NULL), 0);
  job_list_t l = {0};
  assert_int_equal(store_job_claim(s, "n1", 1, 1000, &l), 0);
  assert_int_equal(l.n, 1);
  job_t r = l.v[0];
  free(l.v);
  assert_int_equal(jobs_started(s, &r, 4242, 0, 0), 0);
  return r;
}

static void test_end_and_retry(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  job_t j = new_job("r", "key");
  j.max_retries = 2;
  j.retry_backoff_ms = 1000;
  job_t r = run(s, &j);
  jobs_end_t e = {.job = &r, .state = JOB_FAILED, .end_ms = 10000, .exit_code = 1,
                  .end_reason = "timeout", .rnd = 0};
  assert_int_equal(jobs_end(s, &e), 0);
  assert_true(e.retry_id > 0);
  assert_int_equal(e.change.queued, 1); /* the retry: one more pending */
  assert_int_equal(e.change.finished, 0); /* the end counted itself when submitted */
  assert_true(e.retry_not_before >= 10000 + 750); /* backoff with jitter in [0.75, 1.25) */
  assert_true(e.retry_not_before < 10000 + 1250);

  event_list_t l = events_of(s, r.id);
  const char *want[] = {"job.queued", "job.started", "job.timeout", "job.failed", "job.retried"};
  assert_int_equal(l.n, 5);
  for (size_t i = 0; i < 5; i++) assert_string_equal(l.v[i].type, want[i]);
  assert_int_equal(json_integer_value(json_object_get(l.v[2].data, "exit_code")), 1);
  assert_int_equal(json_integer_value(json_object_get(l.v[4].data, "retry_id")), e.retry_id);
  event_list_release(&l);

  job_t next;
  assert_int_equal(store_job_get(s, e.retry_id, &next), 0);
  assert_int_equal(next.attempt, 2);
  assert_int_equal(next.retry_of, r.id);
  assert_int_equal(next.state, JOB_PENDING);
  assert_string_equal(next.unique_key, "key"); /* the key moved to the retry */
  event_list_t q = events_of(s, next.id);
  assert_int_equal(q.n, 1);
  assert_string_equal(q.v[0].type, "job.queued");
  assert_int_equal(json_integer_value(json_object_get(q.v[0].data, "retry_of")), r.id);
  event_list_release(&q);
  job_release(&next);

  /* A finished job is not retried. */
  job_t ok = new_job("ok", NULL), ro = run(s, &ok);
  jobs_end_t fin = {.job = &ro, .state = JOB_FINISHED, .end_ms = 20000, .exit_code = 0};
  assert_int_equal(jobs_end(s, &fin), 0);
  assert_int_equal(fin.retry_id, 0);
  assert_int_equal(fin.change.queued, 0);
  job_release(&ro);
  job_release(&ok);
  job_release(&r);
  job_release(&j);
}

static void test_reaped(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.retry_backoff = 60; /* ignored: a lost node's job runs again at once */
  job_t j = new_job("lost", NULL), r = run(s, &j);
  int64_t retry = 0;
  /* No retries configured: a job lost with its node still runs once more. */
  flow_change_t c = {0};
  assert_int_equal(jobs_reaped(s, &cfg, &r, 30000, 0, &retry, &c), 0);
  assert_true(retry > 0);
  /* It ended (lost) and its retry is queued, claimable at once. */
  assert_int_equal(c.finished, 1);
  assert_int_equal(c.queued, 1);
  assert_true(c.dispatch);
  job_t again;
  assert_int_equal(store_job_get(s, retry, &again), 0);
  assert_int_equal(again.not_before_ms, 30000);
  assert_int_equal(again.attempt, 2);
  /* ... and only once. */
  int64_t none = 1;
  flow_change_t c2 = {0};
  assert_int_equal(jobs_reaped(s, &cfg, &again, 40000, 0, &none, &c2), 0);
  assert_int_equal(none, 0);
  assert_int_equal(c2.finished, 1);
  assert_int_equal(c2.queued, 0);
  event_list_t l = events_of(s, r.id);
  int lost = 0;
  for (size_t i = 0; i < l.n; i++) lost += !strcmp(l.v[i].type, "job.lost");
  assert_int_equal(lost, 1);
  event_list_release(&l);
  job_release(&again);
  job_release(&r);
  job_release(&j);
}

static void test_paths(void **state) {
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.logs_dir = "logs";
  cfg.items_dir = "";
  char *p = jobs_log_path(&cfg, "p", "s", "j1");
  assert_string_equal(p, "logs/p/s/j1.log");
  free(p);
  assert_null(jobs_items_path(&cfg, "p", "s", "j1"));
  cfg.items_dir = "/srv/items";
  p = jobs_items_path(&cfg, "p", "s", "j1");
  assert_string_equal(p, "/srv/items/p/s/j1.jl");
  free(p);
  cfg.items_dir = "s3://bucket/x";
  assert_null(jobs_items_path(&cfg, "p", "s", "j1"));
  cfg.logs_dir = "";
  assert_null(jobs_log_path(&cfg, "p", "s", "j1"));
}

/* flow_apply: deltas never take a count below 0, the store's own count
 * replaces the loop's, the queued metric counts only what was queued. */
static void test_apply(void **state) {
  (void)state;
  job_counters_t n = {.pending = 2, .finished = 1};
  metrics_t *m = metrics_new();
  assert_non_null(m);
  flow_hooks_t h = {.counters = &n, .metrics = m};
  flow_change_t c = {.queued = 1, .unqueued = 5, .finished = -3};
  flow_apply(&h, &c);
  assert_int_equal(n.pending, 0);
  assert_int_equal(n.finished, 0);
  assert_int_equal(m->jobs_queued, 1);
  c = (flow_change_t){.unqueued = 1, .has_pending = 1, .pending_count = 7,
                      .finished = 1, .has_finished = 1, .finished_count = 4};
  flow_apply(&h, &c);
  assert_int_equal(n.pending, 7);
  assert_int_equal(n.finished, 4);
  assert_int_equal(m->jobs_queued, 1);
  flow_running(&h, 3);
  assert_int_equal(n.running, 3);
  assert_int_equal(flow_pending(&h), 7);
  flow_hooks_t none = {0}; /* no counts kept: nothing to change, nothing to wake */
  flow_apply(&none, &c);
  assert_int_equal(flow_pending(&none), 0);
  metrics_free(m);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_enqueue), T(test_cancel_family), T(test_cancel_claimed_here),
      T(test_end_and_retry), T(test_reaped),
      cmocka_unit_test(test_paths),
      cmocka_unit_test(test_apply),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
