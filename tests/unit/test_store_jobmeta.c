/* The store's side of a job's meta and history updates, on every backend
 * (store_fx.h): meta written at insert and replaced, meta filters (string
 * equality on top-level keys, ANDed, with the other filters), and the
 * state, original state and note of an ended job; test runs (their flag,
 * its filter, out of statistics and of their schedule's listings) and a
 * schedule's meta. Public API only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "core/job.h"
#include "error.h"
#include "store_fx.h"

static int64_t ins_meta(store_t *s, const char *project, const char *meta_json) {
  job_t j;
  job_init(&j);
  static int seq;
  char id[32];
  snprintf(id, sizeof(id), "m%d", ++seq);
  j.jobid = strdup(id);
  j.project = strdup(project);
  j.spider = strdup("sp");
  j.meta = meta_json ? json_loads(meta_json, 0, NULL) : NULL;
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t r = j.id;
  job_release(&j);
  return r;
}

/* The ids a meta filter lists, newest first, as a count and the first. */
static size_t filtered(store_t *s, const char *const *pairs, size_t n, const char *project,
                       int64_t *first) {
  job_list_t l = {0};
  job_filter_t f = {.meta = pairs, .nmeta = n, .project = project};
  assert_int_equal(store_jobs_list(s, &f, &l), 0);
  size_t got = l.n;
  *first = l.n ? l.v[0].id : 0;
  job_list_release(&l);
  return got;
}

static void test_meta_insert_replace_and_filter(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  int64_t a = ins_meta(s, "p", "{\"customer\": \"acme\", \"n\": 5, \"o\": {\"k\": \"v\"}}");
  int64_t b = ins_meta(s, "p", "{\"customer\": \"globex\", \"tag\": \"x\"}");
  int64_t c = ins_meta(s, "q", "{\"customer\": \"acme\", \"a.b\": \"dot\"}");
  int64_t none = ins_meta(s, "p", NULL);
  job_t j = fx_get(s, a);
  assert_string_equal(json_string_value(json_object_get(j.meta, "customer")), "acme");
  assert_int_equal(json_integer_value(json_object_get(j.meta, "n")), 5);
  job_release(&j);
  j = fx_get(s, none);
  assert_null(j.meta);
  assert_int_equal(j.corrected, 0);
  assert_null(j.note);
  job_release(&j);

  int64_t first;
  const char *acme[] = {"customer", "acme"};
  assert_int_equal(filtered(s, acme, 1, NULL, &first), 2);
  assert_int_equal(first, c);
  assert_int_equal(filtered(s, acme, 1, "p", &first), 1);
  assert_int_equal(first, a);
  const char *both[] = {"customer", "globex", "tag", "x"};
  assert_int_equal(filtered(s, both, 2, NULL, &first), 1);
  assert_int_equal(first, b);
  const char *miss[] = {"customer", "globex", "tag", "y"};
  assert_int_equal(filtered(s, miss, 2, NULL, &first), 0);
  const char *num[] = {"n", "5"}; /* a number is not its digits */
  assert_int_equal(filtered(s, num, 1, NULL, &first), 0);
  const char *obj[] = {"o", "{\"k\":\"v\"}"};
  assert_int_equal(filtered(s, obj, 1, NULL, &first), 0);
  const char *dot[] = {"a.b", "dot"}; /* a key is one key, dots and all */
  assert_int_equal(filtered(s, dot, 1, NULL, &first), 1);
  assert_int_equal(first, c);
  const char *bad[] = {"a\"b", "x"};
  job_list_t l = {0};
  job_filter_t bf = {.meta = bad, .nmeta = 1};
  assert_int_equal(store_jobs_list(s, &bf, &l), -EINVAL);

  /* Replaced whole; NULL removes it. */
  json_t *m = json_pack("{s:s}", "customer", "initech");
  assert_int_equal(store_job_set_meta(s, a, m), 0);
  json_decref(m);
  assert_int_equal(filtered(s, acme, 1, "p", &first), 0);
  j = fx_get(s, a);
  assert_int_equal(json_object_size(j.meta), 1);
  job_release(&j);
  assert_int_equal(store_job_set_meta(s, a, NULL), 0);
  j = fx_get(s, a);
  assert_true(!j.meta || json_object_size(j.meta) == 0);
  job_release(&j);
  assert_int_equal(store_job_set_meta(s, 987654, NULL), -ENOENT);
}

static void test_history_of_ended_jobs(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  int64_t done = fx_job(s, NULL, "p", "sp", JOB_FINISHED, "n1", 1000, 2000);
  int64_t live = fx_job(s, NULL, "p", "sp", JOB_RUNNING, "n1", 1000, 0);
  assert_int_equal(store_job_set_history(s, done, JOB_FAILED, 1, JOB_FINISHED, "bad data"), 0);
  job_t j = fx_get(s, done);
  assert_int_equal(j.state, JOB_FAILED);
  assert_int_equal(j.corrected, 1);
  assert_int_equal(j.original_state, JOB_FINISHED);
  assert_string_equal(j.note, "bad data");
  job_release(&j);
  /* The listings see the corrected state. */
  job_list_t l = {0};
  job_filter_t fl = {.states = 1u << JOB_FAILED};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, done);
  job_list_release(&l);
  int64_t counts[JOB_NSTATES];
  assert_int_equal(store_job_counts(s, "p", counts), 0);
  assert_int_equal(counts[JOB_FAILED], 1);
  assert_int_equal(counts[JOB_FINISHED], 0);
  /* Back, the note removed: written as given. */
  assert_int_equal(store_job_set_history(s, done, JOB_FINISHED, 0, JOB_FINISHED, NULL), 0);
  j = fx_get(s, done);
  assert_int_equal(j.state, JOB_FINISHED);
  assert_int_equal(j.corrected, 0);
  assert_null(j.note);
  job_release(&j);
  /* Only an ended job; only final states. */
  assert_int_equal(store_job_set_history(s, live, JOB_FAILED, 1, JOB_RUNNING, NULL), -EINVAL);
  assert_int_equal(store_job_set_history(s, live, JOB_FAILED, 0, JOB_FINISHED, NULL), -ENOENT);
  assert_int_equal(store_job_set_history(s, done, JOB_RUNNING, 0, JOB_FINISHED, NULL), -EINVAL);
  j = fx_get(s, live);
  assert_int_equal(j.state, JOB_RUNNING);
  job_release(&j);
}

/* An ended job of schedule sched (0: none), flagged test or not. */
static int64_t ins_run(store_t *s, int64_t sched, int test, int64_t end_ms) {
  static int seq;
  char id[32];
  job_t j;
  job_init(&j);
  snprintf(id, sizeof(id), "t%d", ++seq);
  j.jobid = strdup(id);
  j.project = strdup("p");
  j.spider = strdup("sp");
  j.state = JOB_FINISHED;
  j.schedule_id = sched;
  j.test = test;
  j.start_ms = end_ms - 100;
  j.end_ms = end_ms;
  j.stats = json_pack("{s:i}", "items", 10);
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t r = j.id;
  job_release(&j);
  return r;
}

static size_t listed(store_t *s, int64_t sched, int test, int64_t *first) {
  job_list_t l = {0};
  job_filter_t f = {.schedule_id = sched, .test = test};
  assert_int_equal(store_jobs_list(s, &f, &l), 0);
  size_t n = l.n;
  *first = n ? l.v[0].id : 0;
  job_list_release(&l);
  return n;
}

static void test_test_runs_and_schedule_meta(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  schedule_t sc;
  schedule_init(&sc);
  sc.name = strdup("nightly");
  sc.kind = SCHED_CRON;
  sc.expr = strdup("0 3 * * *");
  sc.tz = strdup("UTC");
  sc.project = strdup("p");
  sc.spider = strdup("sp");
  sc.meta = json_pack("{s:s, s:i}", "team", "data", "n", 1);
  assert_int_equal(store_schedule_insert(s, &sc), 0);
  schedule_t got;
  assert_int_equal(store_schedule_get(s, sc.id, &got), 0);
  assert_true(json_equal(got.meta, sc.meta));
  json_decref(got.meta);
  got.meta = NULL; /* cleared by an update */
  assert_int_equal(store_schedule_update(s, &got), 0);
  schedule_release(&got);
  assert_int_equal(store_schedule_get(s, sc.id, &got), 0);
  assert_null(got.meta);
  schedule_release(&got);

  int64_t real = ins_run(s, sc.id, 0, 5000), test = ins_run(s, sc.id, 1, 6000);
  int64_t loose = ins_run(s, 0, 1, 7000), plain = ins_run(s, 0, 0, 8000);
  job_t j = fx_get(s, test);
  assert_int_equal(j.test, 1);
  job_release(&j);
  j = fx_get(s, real);
  assert_int_equal(j.test, 0);
  job_release(&j);
  int64_t first;
  /* Both, test runs only, none; a schedule's listing is its real runs
   * unless its test runs are asked for. */
  assert_int_equal(listed(s, 0, 0, &first), 4);
  assert_int_equal(listed(s, 0, 1, &first), 2);
  assert_int_equal(first, loose);
  assert_int_equal(listed(s, 0, -1, &first), 2);
  assert_int_equal(first, plain);
  assert_int_equal(listed(s, sc.id, 0, &first), 1);
  assert_int_equal(first, real);
  assert_int_equal(listed(s, sc.id, -1, &first), 1);
  assert_int_equal(listed(s, sc.id, 1, &first), 1);
  assert_int_equal(first, test);
  job_list_t l = {0};
  job_filter_t bad = {.test = 2};
  assert_int_equal(store_jobs_list(s, &bad, &l), -EINVAL);
  /* Statistics count the real runs only, by spider and by schedule. */
  job_stats_query_t q = {.from_ms = 1, .to_ms = 10000, .by = JOB_STATS_BY_SPIDER};
  job_stats_t st = {0};
  assert_int_equal(store_job_stats(s, &q, &st), 0);
  assert_int_equal(st.n, 1);
  assert_int_equal(st.v[0].ended, 2);
  assert_int_equal(st.v[0].items, 20);
  assert_int_equal(st.v[0].last_success_ms, 8000);
  job_stats_release(&st);
  q.by = JOB_STATS_BY_SCHEDULE;
  assert_int_equal(store_job_stats(s, &q, &st), 0);
  assert_int_equal(st.n, 1);
  assert_int_equal(st.v[0].schedule_id, sc.id);
  assert_int_equal(st.v[0].ended, 1);
  assert_int_equal(st.v[0].last_success_ms, 5000);
  job_stats_release(&st);
  schedule_release(&sc);
}

static void test_merge_patch(void **state) {
  (void)state;
  json_t *m = json_loads("{\"a\": \"b\", \"c\": {\"d\": \"e\", \"f\": \"g\"}}", 0, NULL);
  json_t *p = json_loads("{\"a\": \"z\", \"c\": {\"f\": null}, \"n\": [1]}", 0, NULL);
  assert_int_equal(job_meta_merge(&m, p), 0);
  json_t *want = json_loads("{\"a\": \"z\", \"c\": {\"d\": \"e\"}, \"n\": [1]}", 0, NULL);
  assert_true(json_equal(m, want));
  json_decref(want);
  json_decref(p);
  p = json_loads("{\"c\": \"flat\", \"a\": null}", 0, NULL);
  assert_int_equal(job_meta_merge(&m, p), 0);
  want = json_loads("{\"c\": \"flat\", \"n\": [1]}", 0, NULL);
  assert_true(json_equal(m, want));
  json_decref(want);
  json_decref(p);
  json_t *arr = json_array();
  assert_int_equal(job_meta_merge(&m, arr), -EINVAL);
  json_decref(arr);
  json_decref(m);
  json_t *empty = NULL;
  p = json_loads("{\"x\": {\"y\": null, \"z\": 1}}", 0, NULL);
  assert_int_equal(job_meta_merge(&empty, p), 0);
  want = json_loads("{\"x\": {\"z\": 1}}", 0, NULL);
  assert_true(json_equal(empty, want));
  json_decref(want);
  json_decref(p);
  json_decref(empty);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_meta_insert_replace_and_filter),
      T(test_history_of_ended_jobs),
      T(test_test_runs_and_schedule_meta),
      cmocka_unit_test(test_merge_patch),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
