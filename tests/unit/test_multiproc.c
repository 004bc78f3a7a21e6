/* flow/multiproc.h: a multi-process run's start, its frontier fed while it
 * runs, and its parent's end with the last child, against a real store
 * (SQLite in a temporary directory, or SPIDERD_TEST_STORE_URL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "error.h"
#include "flow/jobs.h"
#include "flow/multiproc.h"
#include "store_fx.h"

static job_t new_job(const char *jobid, job_state_t st) {
  job_t j;
  job_init(&j);
  j.jobid = strdup(jobid);
  j.project = strdup("p");
  j.spider = strdup("s");
  j.args = json_object();
  j.settings = json_object();
  j.state = st;
  return j;
}

/* A run of n children seeded with two URLs; *parent and *kids are the
 * caller's. */
static void start(store_t *s, size_t n, job_t *parent, job_list_t *kids) {
  *parent = new_job("par", JOB_RUNNING);
  parent->created_ms = parent->start_ms = 1000;
  json_object_set_new(parent->settings, "SPIDERD_QUEUE", json_string("multiprocess-par"));
  json_object_set_new(parent->settings, "SPIDERD_DUPEFILTER_QUEUE", json_string("multiprocess-par.seen"));
  kids->v = calloc(n, sizeof(job_t));
  kids->n = n;
  for (size_t i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof(id), "kid%zu", i);
    kids->v[i] = new_job(id, JOB_PENDING);
  }
  const char *urls[] = {"http://a/1", "http://a/2", "http://a/1"};
  int64_t added = 0;
  flow_change_t c = {0};
  assert_int_equal(multiproc_start(s, parent, kids, urls, 3, 1000, &added, &c), 0);
  assert_int_equal(added, 2);
  assert_int_equal(c.queued, (int64_t)n);
}

/* Claims the next pending job on node n1 and ends it in state st. */
static int64_t claim_and_end(store_t *s, job_state_t st, int max_retries, flow_change_t *c) {
  job_list_t l = {0};
  assert_int_equal(store_job_claim(s, "n1", 1, 100000, &l), 0); /* a retry is due */
  assert_int_equal(l.n, 1);
  l.v[0].max_retries = max_retries;
  jobs_end_t e = {.job = &l.v[0], .state = st, .end_ms = 3000, .exit_code = st == JOB_FINISHED ? 0 : 1};
  assert_int_equal(jobs_end(s, &e), 0);
  c->finished += e.change.finished;
  int64_t retry = e.retry_id;
  job_list_release(&l);
  return retry;
}

static job_state_t state_of(store_t *s, int64_t id) {
  job_t j;
  assert_int_equal(store_job_get(s, id, &j), 0);
  job_state_t st = j.state;
  job_release(&j);
  return st;
}

static void test_start_feed_and_end(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  job_t parent;
  job_list_t kids;
  start(s, 2, &parent, &kids);
  assert_true(multiproc_is_parent(&parent));
  assert_int_equal(kids.v[0].parent_id, parent.id);
  queue_conf_t q;
  assert_int_equal(store_queue_get(s, "multiprocess-par", &q), 0);
  assert_int_equal(q.n_waiting, 2);
  queue_conf_release(&q);
  assert_int_equal(store_queue_get(s, "multiprocess-par.seen", &q), 0);
  assert_true(q.paused && q.keep_done);
  queue_conf_release(&q);

  /* The first child ends: the other still waits, the run goes on. */
  flow_change_t c = {0};
  claim_and_end(s, JOB_FINISHED, 0, &c);
  assert_int_equal(c.finished, 0);
  assert_int_equal(state_of(s, parent.id), JOB_RUNNING);
  job_t got;
  const char *more[] = {"http://a/3", "http://a/2"};
  int64_t added = 0;
  assert_int_equal(multiproc_add(s, parent.id, more, 2, 2500, &got, &added), 0);
  assert_int_equal(added, 1);
  job_release(&got);

  /* The last child is cancelled before it started: the parent ends with
   * it, cancelled, and its queues go. */
  int n = 0;
  assert_int_equal(jobs_cancel_pending(s, "p", "kid1", 4000, &n, &c), 0);
  assert_int_equal(n, 1);
  assert_int_equal(c.finished, 1);
  assert_int_equal(store_job_get(s, parent.id, &got), 0);
  assert_int_equal(got.state, JOB_CANCELLED);
  assert_int_equal(got.end_ms, 4000);
  json_t *ch = json_object_get(got.stats, "children");
  assert_int_equal(json_integer_value(json_object_get(ch, "finished")), 1);
  assert_int_equal(json_integer_value(json_object_get(ch, "cancelled")), 1);
  job_release(&got);
  assert_int_equal(store_queue_get(s, "multiprocess-par", &q), -ENOENT);
  assert_int_equal(store_queue_get(s, "multiprocess-par.seen", &q), -ENOENT);
  event_list_t l = {0};
  event_filter_t f = {.job_id = parent.id};
  assert_int_equal(store_events_list(s, &f, &l), 0);
  assert_int_equal(l.n, 3);
  assert_string_equal(l.v[2].type, "job.cancelled");
  assert_string_equal(json_string_value(json_object_get(l.v[2].data, "reason")), "children");
  event_list_release(&l);

  /* An ended run takes no more URLs, and ends once. */
  assert_int_equal(multiproc_add(s, parent.id, more, 1, 5000, &got, &added), SPD_ECONFLICT);
  assert_int_equal(got.state, JOB_CANCELLED);
  job_release(&got);
  flow_change_t again = {0};
  assert_int_equal(multiproc_settle(s, parent.id, 6000, &again), 0);
  assert_int_equal(again.finished, 0);
  job_list_release(&kids);
  job_release(&parent);
}

static void test_a_retried_child_counts_by_its_last_attempt(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  job_t parent;
  job_list_t kids;
  start(s, 1, &parent, &kids);
  flow_change_t c = {0};
  assert_true(claim_and_end(s, JOB_FAILED, 1, &c) > 0); /* retried: the run goes on */
  assert_int_equal(state_of(s, parent.id), JOB_RUNNING);
  claim_and_end(s, JOB_FINISHED, 1, &c);
  assert_int_equal(state_of(s, parent.id), JOB_FINISHED);
  assert_int_equal(c.finished, 1);
  job_list_release(&kids);
  job_release(&parent);
}

static void test_other_jobs_are_left_alone(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  /* A parent with a process of its own ends with its process, not with
   * its children. */
  job_t p = new_job("own", JOB_PENDING);
  assert_int_equal(jobs_enqueue(s, &p, NULL, NULL), 0);
  job_list_t l = {0};
  assert_int_equal(store_job_claim(s, "n1", 1, 2000, &l), 0);
  job_list_release(&l);
  job_t kid = new_job("k", JOB_PENDING);
  kid.parent_id = p.id;
  assert_int_equal(jobs_enqueue(s, &kid, NULL, NULL), 0);
  int n = 0;
  assert_int_equal(jobs_cancel_pending(s, "p", "k", 3000, &n, NULL), 0);
  assert_int_equal(state_of(s, p.id), JOB_RUNNING);

  job_t got;
  const char *urls[] = {"http://a/1"};
  int64_t added = 0;
  assert_int_equal(multiproc_add(s, p.id, urls, 1, 3000, &got, &added), SPD_EBADPARAM);
  job_release(&got);
  assert_int_equal(multiproc_add(s, 987654, urls, 1, 3000, &got, &added), -ENOENT);
  job_release(&got);
  assert_int_equal(multiproc_settle(s, 987654, 3000, NULL), 0);
  job_release(&kid);
  job_release(&p);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_start_feed_and_end),
      T(test_a_retried_child_counts_by_its_last_attempt),
      T(test_other_jobs_are_left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
