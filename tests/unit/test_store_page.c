/* Contract tests of store_jobs_page (store.h): Scrapyd's three job groups
 * read a page at a time give what store_jobs_list gives at once, in its
 * order, for any page size, with or without a project, and a page goes on
 * past a job that left its group in between. Every backend:
 *
 *   SPIDERD_TEST_STORE_URL='postgres://localhost/spiderd_test_{}' ./test_store_page
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#include "store_fx.h"

static const unsigned group_states[JOB_NGROUPS] = {
    1u << JOB_PENDING, 1u << JOB_RUNNING,
    (1u << JOB_FINISHED) | (1u << JOB_FAILED) | (1u << JOB_CANCELLED) | (1u << JOB_LOST)};

static int64_t put(store_t *s, const char *project, double prio, job_state_t st,
                   int64_t start_ms, int64_t end_ms) {
  static int seq;
  char id[32];
  job_t j;
  job_init(&j);
  snprintf(id, sizeof(id), "pg%d", ++seq);
  j.jobid = strdup(id);
  j.project = strdup(project);
  j.spider = strdup("sp");
  j.priority = prio;
  j.state = st;
  j.start_ms = start_ms;
  j.end_ms = end_ms;
  if (st == JOB_RUNNING) j.node = strdup("n1");
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t out = j.id;
  job_release(&j);
  return out;
}

/* Ties on every key, two projects, an ended job that never started. */
static void fill(store_t *s) {
  static const double prios[] = {0, 1, 0, 2.5, -1, 0, 1, 0, -0.5, 0, 0, 3};
  for (size_t i = 0; i < sizeof(prios) / sizeof(prios[0]); i++)
    put(s, i % 3 ? "a" : "b", prios[i], JOB_PENDING, 0, 0);
  for (int i = 0; i < 7; i++) put(s, i % 2 ? "a" : "b", 0, JOB_RUNNING, 1000 + i / 3, 0);
  for (int i = 0; i < 9; i++)
    put(s, i % 3 ? "a" : "b", 0, i % 4 ? JOB_FINISHED : JOB_FAILED, 500, 2000 + i / 2);
  put(s, "a", 0, JOB_CANCELLED, 0, 2100); /* not started: not Scrapyd's */
}

/* The group read page by page; its ids in out (at most 64). */
static size_t read_pages(store_t *s, int group, const char *project, size_t limit,
                         int64_t *out) {
  job_page_key_t key = {0};
  size_t n = 0;
  for (int calls = 0; calls < 200; calls++) {
    job_list_t l = {0};
    int more = -1;
    assert_int_equal(store_jobs_page(s, group, project, limit, &key, &l, &more), 0);
    assert_true(l.n <= limit);
    for (size_t i = 0; i < l.n; i++) {
      assert_true(n < 64);
      out[n++] = l.v[i].id;
    }
    job_list_release(&l);
    if (!more) return n;
  }
  fail_msg("no end of group %d", group);
  return n;
}

static size_t read_all(store_t *s, int group, const char *project, int64_t *out) {
  job_filter_t f = {.project = project, .states = group_states[group],
                    .started_only = group == JOB_GROUP_ENDED};
  job_list_t l = {0};
  assert_int_equal(store_jobs_list(s, &f, &l), 0);
  for (size_t i = 0; i < l.n; i++) out[i] = l.v[i].id;
  size_t n = l.n;
  job_list_release(&l);
  return n;
}

static void test_pages_are_the_listing(void **state) {
  struct fx *f = *state;
  fill(f->s);
  static const char *const projects[] = {NULL, "a", "b", "nosuch"};
  for (int g = 0; g < JOB_NGROUPS; g++)
    for (size_t p = 0; p < 4; p++) {
      int64_t want[64], got[64];
      size_t nw = read_all(f->s, g, projects[p], want);
      if (!projects[p]) assert_true(nw >= 7);
      for (size_t limit = 1; limit <= 13; limit += 2) {
        size_t ng = read_pages(f->s, g, projects[p], limit, got);
        assert_int_equal(ng, nw);
        assert_memory_equal(got, want, nw * sizeof(*want));
      }
    }
}

/* The job a page ended on leaves its group (cancelled, claimed): the next
 * page starts where it would have, with nothing read twice or skipped. */
static void test_a_page_goes_on_past_a_job_that_left(void **state) {
  struct fx *f = *state;
  fill(f->s);
  int64_t want[64];
  size_t nw = read_all(f->s, JOB_GROUP_PENDING, NULL, want);
  job_page_key_t key = {0};
  job_list_t l = {0};
  int more = 0;
  assert_int_equal(store_jobs_page(f->s, JOB_GROUP_PENDING, NULL, 4, &key, &l, &more), 0);
  assert_int_equal(l.n, 4);
  assert_true(more);
  job_t last = l.v[3];
  int count = 0;
  assert_int_equal(store_job_cancel_pending(f->s, last.project, last.jobid, 1, &count), 0);
  assert_int_equal(count, 1);
  job_list_release(&l);
  int64_t got[64];
  size_t ng = 0;
  do {
    job_list_t m = {0};
    assert_int_equal(store_jobs_page(f->s, JOB_GROUP_PENDING, NULL, 3, &key, &m, &more), 0);
    for (size_t i = 0; i < m.n; i++) got[ng++] = m.v[i].id;
    job_list_release(&m);
  } while (more);
  assert_int_equal(ng, nw - 4);
  assert_memory_equal(got, want + 4, ng * sizeof(*got));
}

static void test_bad_arguments(void **state) {
  struct fx *f = *state;
  job_page_key_t key = {0};
  job_list_t l = {0};
  int more;
  assert_int_equal(store_jobs_page(f->s, -1, NULL, 1, &key, &l, &more), -EINVAL);
  assert_int_equal(store_jobs_page(f->s, JOB_NGROUPS, NULL, 1, &key, &l, &more), -EINVAL);
  assert_int_equal(store_jobs_page(f->s, 0, NULL, 0, &key, &l, &more), -EINVAL);
  assert_int_equal(store_jobs_page(f->s, 0, NULL, JOB_PAGE_MAX + 1, &key, &l, &more), -EINVAL);
  assert_int_equal(store_jobs_page(f->s, 0, NULL, 1, NULL, &l, &more), -EINVAL);
  assert_int_equal(store_jobs_page(f->s, 0, NULL, 5, &key, &l, &more), 0);
  assert_int_equal(l.n, 0);
  assert_int_equal(more, 0);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_pages_are_the_listing),
      T(test_a_page_goes_on_past_a_job_that_left),
      T(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
