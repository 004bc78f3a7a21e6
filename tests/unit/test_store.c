/* Contract tests for store.h. They call only the public API, so every
 * backend runs the same suite:
 *
 *   SPIDERD_TEST_STORE_URL='postgres://localhost/spiderd_test_{}' ./test_store
 *
 * "{}" in the URL is replaced by a fresh name per test (a file, a database,
 * a schema, a key prefix: whatever the backend makes of it), so every test
 * starts from an empty store. Without the variable each test gets a SQLite
 * file in its own temporary directory. Tests that look inside the SQLite
 * file itself run only in that default mode.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "store/store.h"

#include "store_fx.h"

/* A job with args and settings whose keys are not in sorted order, so a
 * round trip that sorted them would show. */
static void mkjob(job_t *j, const char *project, const char *jobid, double prio) {
  job_init(j);
  j->project = strdup(project);
  j->jobid = strdup(jobid);
  j->spider = strdup("spider1");
  j->args = json_pack("{s:s, s:s, s:s}", "zeta", "1", "alpha", "2", "mid", "3");
  j->settings = json_pack("{s:s, s:s}", "DOWNLOAD_DELAY", "2", "AUTOTHROTTLE", "1");
  j->priority = prio;
  j->state = JOB_PENDING;
}

static int64_t ins(store_t *s, const char *project, const char *jobid, double prio) {
  job_t j;
  mkjob(&j, project, jobid, prio);
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t id = j.id;
  assert_true(id > 0);
  job_release(&j);
  return id;
}

/* Inserts a job directly in a given state, as a restart or a second node
 * would find it, to build listings without depending on claim order. */
static int64_t ins_state(store_t *s, const char *project, const char *jobid,
                         double prio, job_state_t st, const char *node,
                         int64_t start_ms, int64_t end_ms) {
  job_t j;
  mkjob(&j, project, jobid, prio);
  j.state = st;
  j.node = node ? strdup(node) : NULL;
  j.start_ms = start_ms;
  j.end_ms = end_ms;
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t id = j.id;
  job_release(&j);
  return id;
}

static void expect_ids(const job_list_t *l, const int64_t *ids, size_t n) {
  if (l->n != n) {
    fprintf(stderr, "got %zu jobs:", l->n);
    for (size_t i = 0; i < l->n; i++) fprintf(stderr, " %lld", (long long)l->v[i].id);
    fprintf(stderr, "\n");
  }
  assert_int_equal(l->n, n);
  for (size_t i = 0; i < n; i++) assert_int_equal(l->v[i].id, ids[i]);
}

static void list_expect(store_t *s, const job_filter_t *f, const int64_t *ids, size_t n) {
  job_list_t l = {0};
  assert_int_equal(store_jobs_list(s, f, &l), 0);
  expect_ids(&l, ids, n);
  job_list_release(&l);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define BIT(st) (1u << (st))

/* ---- opening ---- */

static void test_open_urls(void **state) {
  struct fx *f = *state;
  char url[512], err[256];
  store_t *s = NULL;
  if (!f->sqlite_default) skip();

  snprintf(url, sizeof(url), "sqlite://%s/b.db", f->dir);
  store_close(fx_open(url));
  snprintf(url, sizeof(url), "%s/c.db", f->dir);
  store_close(fx_open(url));
  /* The missing last directory is created... */
  snprintf(url, sizeof(url), "sqlite:%s/newdir/d.db", f->dir);
  store_close(fx_open(url));
  struct stat st;
  snprintf(url, sizeof(url), "%s/newdir/d.db", f->dir);
  assert_int_equal(stat(url, &st), 0);
  /* ...but not a whole tree. */
  snprintf(url, sizeof(url), "sqlite:%s/x/y/e.db", f->dir);
  assert_int_equal(store_open(url, &s, err, sizeof(err)), -ENOENT);
  assert_null(s);
  assert_non_null(strstr(err, "x/y"));

  assert_int_equal(store_open("rediss://localhost/0", &s, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "not available"));
  /* A PostgreSQL server that is not there: the reason is libpq's. */
  assert_int_equal(store_open("postgresql://127.0.0.1:1/db?connect_timeout=2", &s, err,
                              sizeof(err)),
                   SPD_ESTORE);
  assert_non_null(strstr(err, "PostgreSQL"));
  assert_null(s);
  assert_int_equal(store_open("postgresql://127.0.0.1:1/db?schema=a-b", &s, err, sizeof(err)),
                   -EINVAL);
  assert_non_null(strstr(err, "schema"));
  assert_int_equal(store_open("nosuch://x", &s, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "nosuch"));
  assert_int_equal(store_open("", &s, err, sizeof(err)), -EINVAL);
  assert_int_equal(store_open("sqlite:", &s, err, sizeof(err)), -EINVAL);
  assert_null(s);

  /* A file that is not a database is refused with a reason. */
  snprintf(url, sizeof(url), "%s/junk.db", f->dir);
  FILE *fp = fopen(url, "w");
  assert_non_null(fp);
  fputs("this is not an SQLite database, not even close to one.......\n", fp);
  fclose(fp);
  assert_int_equal(store_open(url, &s, err, sizeof(err)), SPD_ESTORE);
  assert_true(err[0] != '\0');
  assert_null(s);
}

/* ---- every call on an empty store ---- */

static void test_empty_store(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_t j;
  job_list_t l = {0};
  job_state_t st;
  int64_t counts[JOB_NSTATES];
  int n = -1;
  char *v = (char *)"sentinel";

  assert_int_equal(store_job_get(s, 1, &j), -ENOENT);
  job_release(&j);
  assert_int_equal(store_job_status(s, NULL, "nope", &st), -ENOENT);
  assert_int_equal(store_job_status(s, "p", "nope", &st), -ENOENT);
  assert_int_equal(store_jobs_list(s, NULL, &l), 0);
  assert_int_equal(l.n, 0);
  job_filter_t filt = {.project = "p", .states = BIT(JOB_PENDING), .limit = 3};
  assert_int_equal(store_jobs_list(s, &filt, &l), 0);
  assert_int_equal(l.n, 0);
  assert_int_equal(store_job_counts(s, NULL, counts), 0);
  for (int i = 0; i < JOB_NSTATES; i++) assert_int_equal(counts[i], 0);
  assert_int_equal(store_job_counts(s, "p", counts), 0);
  for (int i = 0; i < JOB_NSTATES; i++) assert_int_equal(counts[i], 0);
  assert_int_equal(store_job_claim(s, "n1", 5, 1000, &l), 0);
  assert_int_equal(l.n, 0);
  assert_int_equal(store_job_started(s, 1, 42, 7), -ENOENT);
  assert_int_equal(store_job_finish(s, 1, JOB_FINISHED, 5, 0, 0, NULL), -ENOENT);
  assert_int_equal(store_job_cancel_pending(s, "p", "j", 10, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(store_trim_finished(s, 0, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(store_trim_finished(s, 3, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(store_meta_get(s, "k", &v), -ENOENT);
  assert_null(v);
  assert_int_equal(store_tx_begin(s), 0);
  assert_int_equal(store_tx_commit(s), 0);
}

static void test_bad_arguments(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_t j;
  job_list_t l = {0};
  job_state_t st;
  int n;

  mkjob(&j, "p", "j", 0);
  free(j.spider);
  j.spider = NULL;
  assert_int_equal(store_job_insert(s, &j), -EINVAL);
  j.spider = strdup("s");
  j.state = JOB_NSTATES;
  assert_int_equal(store_job_insert(s, &j), -EINVAL);
  job_release(&j);
  assert_int_equal(store_job_insert(s, NULL), -EINVAL);
  assert_int_equal(store_job_claim(s, NULL, 1, 0, &l), -EINVAL);
  assert_int_equal(store_job_finish(s, 1, JOB_RUNNING, 0, 0, 0, NULL), -EINVAL);
  assert_int_equal(store_job_finish(s, 1, JOB_PENDING, 0, 0, 0, NULL), -EINVAL);
  assert_int_equal(store_job_status(s, "p", NULL, &st), -EINVAL);
  assert_int_equal(store_job_cancel_pending(s, NULL, "j", 0, &n), -EINVAL);
  job_filter_t bad = {.states = 1u << JOB_NSTATES};
  assert_int_equal(store_jobs_list(s, &bad, &l), -EINVAL);
  assert_int_equal(store_trim_finished(s, -1, &n), -EINVAL);
  assert_int_equal(store_meta_set(s, "k", NULL), -EINVAL);
  assert_int_equal(store_meta_set(s, NULL, "v"), -EINVAL);
}

/* ---- insert and get ---- */

static void test_insert_get(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_t j, g;

  mkjob(&j, "proj", "job-1", 2.5);
  j.version = strdup("r12");
  assert_int_equal(store_job_insert(s, &j), 0);
  assert_true(j.id > 0);
  assert_true(j.created_ms > 1600000000000LL); /* set from the clock */

  assert_int_equal(store_job_get(s, j.id, &g), 0);
  assert_int_equal(g.id, j.id);
  assert_string_equal(g.jobid, "job-1");
  assert_string_equal(g.project, "proj");
  assert_string_equal(g.spider, "spider1");
  assert_string_equal(g.version, "r12");
  assert_true(g.priority == 2.5);
  assert_int_equal(g.state, JOB_PENDING);
  assert_null(g.node);
  assert_int_equal(g.pid, 0);
  assert_int_equal(g.pid_start, 0);
  assert_int_equal(g.created_ms, j.created_ms);
  assert_int_equal(g.start_ms, 0);
  assert_int_equal(g.end_ms, 0);
  assert_int_equal(g.exit_code, -1);
  assert_int_equal(g.term_signal, 0);
  assert_null(g.stats);
  /* Key order survives, as sent. */
  char *a = json_dumps(g.args, JSON_COMPACT);
  char *b = json_dumps(g.settings, JSON_COMPACT);
  assert_string_equal(a, "{\"zeta\":\"1\",\"alpha\":\"2\",\"mid\":\"3\"}");
  assert_string_equal(b, "{\"DOWNLOAD_DELAY\":\"2\",\"AUTOTHROTTLE\":\"1\"}");
  free(a);
  free(b);
  job_release(&g);

  /* A given created_ms is kept; NULL version, args and settings stay NULL;
   * the same Scrapyd job id may be inserted again under a new row id. */
  job_t k;
  mkjob(&k, "proj", "job-1", -1);
  json_decref(k.args);
  json_decref(k.settings);
  k.args = k.settings = NULL;
  k.created_ms = 12345;
  assert_int_equal(store_job_insert(s, &k), 0);
  assert_true(k.id > j.id);
  assert_int_equal(k.created_ms, 12345);
  assert_int_equal(store_job_get(s, k.id, &g), 0);
  assert_int_equal(g.created_ms, 12345);
  assert_null(g.version);
  assert_null(g.args);
  assert_null(g.settings);
  assert_true(g.priority == -1);
  job_release(&g);
  job_release(&k);
  job_release(&j);

  /* Non-ASCII and quotes pass through. */
  mkjob(&k, "proj", "job-2", 0);
  json_object_set_new(k.args, "q", json_string("\"é\" 'x' \\n"));
  assert_int_equal(store_job_insert(s, &k), 0);
  assert_int_equal(store_job_get(s, k.id, &g), 0);
  assert_string_equal(json_string_value(json_object_get(g.args, "q")), "\"é\" 'x' \\n");
  job_release(&g);
  job_release(&k);
}

/* ---- claim ---- */

static void test_claim_order(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};

  int64_t a = ins(s, "p1", "a", 0);
  int64_t b = ins(s, "p2", "b", 5);
  int64_t c = ins(s, "p1", "c", 5);
  int64_t d = ins(s, "p3", "d", -1);
  int64_t e = ins(s, "p2", "e", 0);
  int64_t g = ins(s, "p3", "g", 10.5);

  /* Appends to a list that already holds a job. */
  l.v = calloc(1, sizeof(job_t));
  job_init(&l.v[0]);
  l.n = 1;
  assert_int_equal(store_job_claim(s, "node-a", 3, 777, &l), 0);
  assert_int_equal(l.n, 4);
  assert_int_equal(l.v[0].id, 0);
  int64_t first[] = {g, b, c};
  for (int i = 0; i < 3; i++) {
    job_t *j = &l.v[i + 1];
    assert_int_equal(j->id, first[i]);
    assert_int_equal(j->state, JOB_RUNNING);
    assert_string_equal(j->node, "node-a");
    assert_int_equal(j->start_ms, 777);
    assert_non_null(j->args);
  }
  job_list_release(&l);

  /* max 0 claims nothing. */
  assert_int_equal(store_job_claim(s, "node-a", 0, 778, &l), 0);
  assert_int_equal(l.n, 0);
  assert_int_equal(store_job_claim(s, "node-b", 100, 800, &l), 0);
  int64_t rest[] = {a, e, d};
  expect_ids(&l, rest, N(rest));
  job_list_release(&l);
  assert_int_equal(store_job_claim(s, "node-b", 100, 801, &l), 0);
  assert_int_equal(l.n, 0);

  job_t j;
  assert_int_equal(store_job_get(s, d, &j), 0);
  assert_int_equal(j.state, JOB_RUNNING);
  assert_string_equal(j.node, "node-b");
  assert_int_equal(j.start_ms, 800);
  job_release(&j);
}

struct claimer {
  const char *url;
  pthread_barrier_t *bar;
  int64_t *ids;
  size_t n;
  int rc;
  int misordered;
};

static void *claimer_run(void *arg) {
  struct claimer *c = arg;
  char err[256];
  store_t *s = NULL;
  unsigned seed = (unsigned)(uintptr_t)c;
  c->rc = store_open(c->url, &s, err, sizeof(err));
  pthread_barrier_wait(c->bar);
  if (c->rc) return NULL;
  for (;;) {
    job_list_t l = {0};
    size_t max = 1 + (size_t)(rand_r(&seed) % 7);
    c->rc = store_job_claim(s, "n", max, 1, &l);
    if (c->rc || l.n == 0) {
      job_list_release(&l);
      break;
    }
    for (size_t i = 0; i < l.n; i++) {
      c->ids[c->n++] = l.v[i].id;
      if (i && (l.v[i].priority > l.v[i - 1].priority ||
                (l.v[i].priority == l.v[i - 1].priority && l.v[i].id < l.v[i - 1].id)))
        c->misordered = 1;
    }
    job_list_release(&l);
  }
  store_close(s);
  return NULL;
}

/* Two connections claiming at once from two threads never share a job, and
 * between them claim every job exactly once. */
static void test_claim_concurrent(void **state) {
  struct fx *f = *state;
  enum { NJOBS = 1200 };
  int64_t first = 0, last = 0;

  assert_int_equal(store_tx_begin(f->s), 0);
  for (int i = 0; i < NJOBS; i++) {
    char jobid[32];
    snprintf(jobid, sizeof(jobid), "j%d", i);
    int64_t id = ins(f->s, i % 2 ? "pa" : "pb", jobid, (double)(i % 5));
    if (!first) first = id;
    last = id;
  }
  assert_int_equal(store_tx_commit(f->s), 0);
  assert_int_equal(last - first + 1, NJOBS);

  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  struct claimer c[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    c[i] = (struct claimer){.url = f->url, .bar = &bar};
    c[i].ids = calloc(NJOBS, sizeof(int64_t));
    assert_int_equal(pthread_create(&t[i], NULL, claimer_run, &c[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);

  unsigned char *seen = calloc(NJOBS, 1);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(c[i].rc, 0);
    assert_false(c[i].misordered);
    for (size_t k = 0; k < c[i].n; k++) {
      int64_t off = c[i].ids[k] - first;
      assert_true(off >= 0 && off < NJOBS);
      assert_int_equal(seen[off], 0);
      seen[off] = 1;
    }
  }
  assert_int_equal(c[0].n + c[1].n, NJOBS);
  free(seen);
  free(c[0].ids);
  free(c[1].ids);

  int64_t counts[JOB_NSTATES];
  assert_int_equal(store_job_counts(f->s, NULL, counts), 0);
  assert_int_equal(counts[JOB_PENDING], 0);
  assert_int_equal(counts[JOB_RUNNING], NJOBS);
}

/* ---- started, finish, cancel ---- */

static void test_started_finish(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};
  job_t g;

  int64_t id = ins(s, "p", "j", 0);
  assert_int_equal(store_job_claim(s, "n1", 1, 1000, &l), 0);
  job_list_release(&l);
  assert_int_equal(store_job_started(s, id, 4242, 987654), 0);
  assert_int_equal(store_job_started(s, id + 100, 1, 1), -ENOENT);
  assert_int_equal(store_job_get(s, id, &g), 0);
  assert_int_equal(g.pid, 4242);
  assert_int_equal(g.pid_start, 987654);
  assert_int_equal(g.end_ms, 0);
  assert_int_equal(g.exit_code, -1);
  job_release(&g);

  json_t *stats = json_pack("{s:i, s:s, s:f}", "item_scraped_count", 17,
                            "finish_reason", "finished", "elapsed", 1.5);
  assert_int_equal(store_job_finish(s, id, JOB_FAILED, 5000, 3, 0, stats), 0);
  assert_int_equal(store_job_finish(s, id + 100, JOB_FINISHED, 5000, 0, 0, NULL), -ENOENT);
  assert_int_equal(store_job_get(s, id, &g), 0);
  assert_int_equal(g.state, JOB_FAILED);
  assert_int_equal(g.start_ms, 1000);
  assert_int_equal(g.end_ms, 5000);
  assert_int_equal(g.exit_code, 3);
  assert_int_equal(g.term_signal, 0);
  assert_string_equal(g.node, "n1");
  assert_int_equal(g.pid, 4242);
  assert_true(json_equal(g.stats, stats));
  char *a = json_dumps(g.stats, JSON_COMPACT);
  assert_string_equal(a, "{\"item_scraped_count\":17,\"finish_reason\":\"finished\","
                         "\"elapsed\":1.5}");
  free(a);
  job_release(&g);
  json_decref(stats);

  /* Killed by a signal, no stats: stats become NULL again. */
  assert_int_equal(store_job_finish(s, id, JOB_CANCELLED, 6000, -1, 15, NULL), 0);
  assert_int_equal(store_job_get(s, id, &g), 0);
  assert_int_equal(g.state, JOB_CANCELLED);
  assert_int_equal(g.exit_code, -1);
  assert_int_equal(g.term_signal, 15);
  assert_null(g.stats);
  job_release(&g);
}

static void test_requeue(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};
  job_t g;

  int64_t a = ins(s, "p", "a", 5), b = ins(s, "p", "b", 1);
  assert_int_equal(store_job_claim(s, "n1", 1, 1000, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, a);
  job_list_release(&l);
  assert_int_equal(store_job_requeue(s, a), 0);
  assert_int_equal(store_job_get(s, a, &g), 0);
  assert_int_equal(g.state, JOB_PENDING);
  assert_int_equal(g.start_ms, 0);
  assert_null(g.node);
  job_release(&g);
  /* Back in its place: priority first again. */
  assert_int_equal(store_job_claim(s, "n1", 2, 2000, &l), 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.v[0].id, a);
  assert_int_equal(l.v[1].id, b);
  job_list_release(&l);
  /* Only running jobs go back. */
  assert_int_equal(store_job_finish(s, b, JOB_FINISHED, 3000, 0, 0, NULL), 0);
  assert_int_equal(store_job_requeue(s, b), -ENOENT);
  assert_int_equal(store_job_requeue(s, b + 100), -ENOENT);
}

static void test_cancel_pending(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};
  job_t g;
  int n = -1;

  int64_t run = ins(s, "pa", "x", 9); /* claimed below: highest priority */
  assert_int_equal(store_job_claim(s, "n", 1, 100, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, run);
  job_list_release(&l);
  int64_t p1 = ins(s, "pa", "x", 0);
  int64_t p2 = ins(s, "pa", "x", 1);
  int64_t other_proj = ins(s, "pb", "x", 0);
  int64_t other_job = ins(s, "pa", "y", 0);

  assert_int_equal(store_job_cancel_pending(s, "pa", "x", 555, &n), 0);
  assert_int_equal(n, 2);
  int64_t cancelled[] = {p1, p2};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(store_job_get(s, cancelled[i], &g), 0);
    assert_int_equal(g.state, JOB_CANCELLED);
    assert_int_equal(g.end_ms, 555);
    assert_int_equal(g.start_ms, 0);
    job_release(&g);
  }
  assert_int_equal(store_job_get(s, run, &g), 0);
  assert_int_equal(g.state, JOB_RUNNING);
  job_release(&g);
  /* Count may be NULL; nothing left to cancel. */
  assert_int_equal(store_job_cancel_pending(s, "pa", "x", 556, NULL), 0);
  assert_int_equal(store_job_cancel_pending(s, "pa", "x", 556, &n), 0);
  assert_int_equal(n, 0);

  /* Cancelled jobs are never claimed. */
  assert_int_equal(store_job_claim(s, "n", 10, 600, &l), 0);
  int64_t left[] = {other_proj, other_job};
  expect_ids(&l, left, N(left));
  job_list_release(&l);
}

/* ---- unique jobs ---- */

/* Inserts a pending job of project with key; returns the store's answer and
 * the id it set (the new job's, or the holder's on SPD_ECONFLICT). */
static int ins_key(store_t *s, const char *project, const char *jobid, const char *key,
                   int64_t *id) {
  job_t j;
  mkjob(&j, project, jobid, 0);
  j.unique_key = key ? strdup(key) : NULL;
  j.id = -1;
  int rc = store_job_insert(s, &j);
  *id = j.id;
  job_release(&j);
  return rc;
}

static void test_unique_key(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};
  job_t g;
  int64_t a, b, c, d;

  /* The key is stored and read back by every read path. */
  assert_int_equal(ins_key(s, "p", "a", "k1", &a), 0);
  assert_true(a > 0);
  assert_int_equal(store_job_get(s, a, &g), 0);
  assert_string_equal(g.unique_key, "k1");
  job_release(&g);
  job_filter_t fl = {.project = "p"};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].unique_key, "k1");
  job_list_release(&l);
  fl = (job_filter_t){.project = "p", .newest_first = 1};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_string_equal(l.v[0].unique_key, "k1");
  job_list_release(&l);

  /* Held while pending: nothing inserted, the holder's id comes back. */
  assert_int_equal(ins_key(s, "p", "b", "k1", &b), SPD_ECONFLICT);
  assert_int_equal(b, a);
  int64_t counts[JOB_NSTATES];
  assert_int_equal(store_job_counts(s, "p", counts), 0);
  assert_int_equal(counts[JOB_PENDING], 1);

  /* Another key, another project, or no key at all: independent. */
  assert_int_equal(ins_key(s, "p", "c", "k2", &c), 0);
  assert_int_equal(ins_key(s, "q", "d", "k1", &d), 0);
  assert_true(c != a && d != a && d != c);
  int64_t n1, n2;
  assert_int_equal(ins_key(s, "p", "e", NULL, &n1), 0);
  assert_int_equal(ins_key(s, "p", "e", NULL, &n2), 0);
  assert_true(n1 != n2);
  assert_int_equal(store_job_get(s, n1, &g), 0);
  assert_null(g.unique_key);
  job_release(&g);
  /* An empty key is no key. */
  assert_int_equal(ins_key(s, "p", "f", "", &b), -EINVAL);

  /* Held while running (claim returns it with its key), and across a
   * requeue. */
  assert_int_equal(store_job_claim(s, "n", 1, 1000, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, a);
  assert_string_equal(l.v[0].unique_key, "k1");
  job_list_release(&l);
  assert_int_equal(ins_key(s, "p", "b", "k1", &b), SPD_ECONFLICT);
  assert_int_equal(b, a);
  assert_int_equal(store_job_requeue(s, a), 0);
  assert_int_equal(ins_key(s, "p", "b", "k1", &b), SPD_ECONFLICT);
  assert_int_equal(b, a);

  /* Freed when it ends; the ended job keeps its key on record. */
  assert_int_equal(store_job_finish(s, a, JOB_FINISHED, 2000, 0, 0, NULL), 0);
  int64_t a2;
  assert_int_equal(ins_key(s, "p", "a2", "k1", &a2), 0);
  assert_true(a2 > a);
  assert_int_equal(store_job_get(s, a, &g), 0);
  assert_string_equal(g.unique_key, "k1");
  job_release(&g);
  assert_int_equal(ins_key(s, "p", "b", "k1", &b), SPD_ECONFLICT);
  assert_int_equal(b, a2);

  /* Freed when cancelled while pending. */
  int n = 0;
  assert_int_equal(store_job_cancel_pending(s, "p", "a2", 3000, &n), 0);
  assert_int_equal(n, 1);
  int64_t a3;
  assert_int_equal(ins_key(s, "p", "a3", "k1", &a3), 0);
  assert_true(a3 > a2);

  /* A job inserted already ended takes no key. */
  job_t e;
  mkjob(&e, "p", "old", 0);
  e.unique_key = strdup("k1");
  e.state = JOB_FAILED;
  e.end_ms = 10;
  assert_int_equal(store_job_insert(s, &e), 0);
  assert_true(e.id > a3);
  job_release(&e);

  /* Inside a transaction: the retry pattern, old attempt ended first, then
   * the next one takes the key in the same transaction. */
  assert_int_equal(store_tx_begin(s), 0);
  assert_int_equal(ins_key(s, "p", "r", "k1", &b), SPD_ECONFLICT);
  assert_int_equal(b, a3);
  assert_int_equal(store_job_finish(s, a3, JOB_FAILED, 4000, 1, 0, NULL), 0);
  int64_t r2;
  assert_int_equal(ins_key(s, "p", "a3.r2", "k1", &r2), 0);
  assert_int_equal(store_tx_commit(s), 0);
  assert_int_equal(ins_key(s, "p", "x", "k1", &b), SPD_ECONFLICT);
  assert_int_equal(b, r2);
}

struct key_inserter {
  const char *url;
  pthread_barrier_t *bar;
  int rc;
  int64_t id;
};

static void *key_inserter_run(void *arg) {
  struct key_inserter *k = arg;
  char err[256];
  store_t *s = NULL;
  int orc = store_open(k->url, &s, err, sizeof(err));
  pthread_barrier_wait(k->bar);
  if (orc) {
    k->rc = orc;
    return NULL;
  }
  k->rc = ins_key(s, "p", "same", "the-key", &k->id);
  store_close(s);
  return NULL;
}

/* Many connections inserting one key at once: exactly one job, and every
 * loser is told its id. */
static void test_unique_key_concurrent(void **state) {
  struct fx *f = *state;
  enum { NT = 8 };
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, NT);
  struct key_inserter k[NT];
  pthread_t t[NT];
  for (int i = 0; i < NT; i++) {
    k[i] = (struct key_inserter){.url = f->url, .bar = &bar};
    assert_int_equal(pthread_create(&t[i], NULL, key_inserter_run, &k[i]), 0);
  }
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);
  int winners = 0;
  int64_t won = 0;
  for (int i = 0; i < NT; i++) {
    if (k[i].rc == 0) {
      winners++;
      won = k[i].id;
    } else {
      assert_int_equal(k[i].rc, SPD_ECONFLICT);
    }
  }
  assert_int_equal(winners, 1);
  for (int i = 0; i < NT; i++) assert_int_equal(k[i].id, won);
  int64_t counts[JOB_NSTATES];
  assert_int_equal(store_job_counts(f->s, "p", counts), 0);
  assert_int_equal(counts[JOB_PENDING], 1);
}

/* ---- status ---- */

static void test_status(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};
  job_state_t st;
  int n;

  int64_t first = ins(s, "p", "j1", 0);
  assert_int_equal(store_job_status(s, "p", "j1", &st), 0);
  assert_int_equal(st, JOB_PENDING);
  assert_int_equal(store_job_claim(s, "n", 1, 10, &l), 0);
  job_list_release(&l);
  assert_int_equal(store_job_status(s, "p", "j1", &st), 0);
  assert_int_equal(st, JOB_RUNNING);
  /* running beats pending */
  ins(s, "p", "j1", 0);
  assert_int_equal(store_job_status(s, "p", "j1", &st), 0);
  assert_int_equal(st, JOB_RUNNING);
  /* finished beats running and pending */
  ins_state(s, "p", "j1", 0, JOB_RUNNING, "n", 20, 0);
  assert_int_equal(store_job_finish(s, first, JOB_FINISHED, 30, 0, 0, NULL), 0);
  assert_int_equal(store_job_status(s, "p", "j1", &st), 0);
  assert_int_equal(st, JOB_FINISHED);
  assert_int_equal(store_job_status(s, NULL, "j1", &st), 0);
  assert_int_equal(st, JOB_FINISHED);
  /* the latest ended final job gives the state */
  ins_state(s, "p", "j1", 0, JOB_FAILED, "n", 25, 40);
  assert_int_equal(store_job_status(s, "p", "j1", &st), 0);
  assert_int_equal(st, JOB_FAILED);

  /* project filter */
  ins(s, "q", "j1", 0);
  assert_int_equal(store_job_status(s, "q", "j1", &st), 0);
  assert_int_equal(st, JOB_PENDING);
  assert_int_equal(store_job_status(s, "nope", "j1", &st), -ENOENT);

  /* cancelled before it started: as if it never existed */
  ins(s, "p", "j2", 0);
  assert_int_equal(store_job_cancel_pending(s, "p", "j2", 50, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(store_job_status(s, "p", "j2", &st), -ENOENT);
  assert_int_equal(store_job_status(s, NULL, "j2", &st), -ENOENT);
  ins(s, "p", "j2", 0);
  assert_int_equal(store_job_status(s, "p", "j2", &st), 0);
  assert_int_equal(st, JOB_PENDING);

  /* cancelled while running counts as finished */
  ins_state(s, "p", "j3", 0, JOB_CANCELLED, "n", 60, 70);
  ins(s, "p", "j3", 0);
  assert_int_equal(store_job_status(s, "p", "j3", &st), 0);
  assert_int_equal(st, JOB_CANCELLED);
}

/* ---- list, counts, trim ---- */

struct sample {
  int64_t pa, pb, pc;       /* pending */
  int64_t ra, rb, rc;       /* running */
  int64_t fin, fail, canc;  /* final, started */
  int64_t unstarted, lost;
};

static void sample_fill(store_t *s, struct sample *x) {
  x->pa = ins_state(s, "p1", "j-a", 0, JOB_PENDING, NULL, 0, 0);
  x->pb = ins_state(s, "p1", "j-b", 5, JOB_PENDING, NULL, 0, 0);
  x->pc = ins_state(s, "p2", "j-c", 5, JOB_PENDING, NULL, 0, 0);
  x->ra = ins_state(s, "p1", "j-d", 0, JOB_RUNNING, "n1", 300, 0);
  x->rb = ins_state(s, "p2", "j-e", 0, JOB_RUNNING, "n2", 100, 0);
  x->rc = ins_state(s, "p1", "j-f", 0, JOB_RUNNING, "n1", 100, 0);
  x->fin = ins_state(s, "p1", "j-g", 0, JOB_FINISHED, "n1", 50, 1000);
  x->fail = ins_state(s, "p2", "j-h", 0, JOB_FAILED, "n2", 60, 2000);
  x->canc = ins_state(s, "p1", "j-i", 0, JOB_CANCELLED, "n1", 70, 1000);
  x->unstarted = ins_state(s, "p1", "j-j", 0, JOB_CANCELLED, NULL, 0, 3000);
  x->lost = ins_state(s, "p1", "j-k", 0, JOB_LOST, "n2", 80, 500);
}

static void test_list(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  struct sample x;
  sample_fill(s, &x);
  const unsigned final = BIT(JOB_FINISHED) | BIT(JOB_FAILED) | BIT(JOB_CANCELLED) |
                         BIT(JOB_LOST);

  int64_t all[] = {x.pb, x.pc, x.pa, x.rb, x.rc, x.ra,
                   x.unstarted, x.fail, x.canc, x.fin, x.lost};
  list_expect(s, NULL, all, N(all));
  job_filter_t fl = {0};
  list_expect(s, &fl, all, N(all));

  fl = (job_filter_t){.states = BIT(JOB_PENDING)};
  int64_t pending[] = {x.pb, x.pc, x.pa};
  list_expect(s, &fl, pending, N(pending));
  fl = (job_filter_t){.states = BIT(JOB_RUNNING)};
  int64_t running[] = {x.rb, x.rc, x.ra};
  list_expect(s, &fl, running, N(running));
  fl = (job_filter_t){.states = final};
  int64_t finals[] = {x.unstarted, x.fail, x.canc, x.fin, x.lost};
  list_expect(s, &fl, finals, N(finals));
  fl.started_only = 1;
  int64_t started[] = {x.fail, x.canc, x.fin, x.lost};
  list_expect(s, &fl, started, N(started));

  fl = (job_filter_t){.project = "p1"};
  int64_t p1[] = {x.pb, x.pa, x.rc, x.ra, x.unstarted, x.canc, x.fin, x.lost};
  list_expect(s, &fl, p1, N(p1));
  fl = (job_filter_t){.project = "p2", .states = final};
  int64_t p2f[] = {x.fail};
  list_expect(s, &fl, p2f, N(p2f));
  fl = (job_filter_t){.jobid = "j-e"};
  int64_t je[] = {x.rb};
  list_expect(s, &fl, je, N(je));
  fl = (job_filter_t){.jobid = "j-e", .project = "p1"};
  list_expect(s, &fl, NULL, 0);
  fl = (job_filter_t){.node = "n1"};
  int64_t n1[] = {x.rc, x.ra, x.canc, x.fin};
  list_expect(s, &fl, n1, N(n1));
  fl = (job_filter_t){.started_only = 1};
  int64_t st_all[] = {x.rb, x.rc, x.ra, x.fail, x.canc, x.fin, x.lost};
  list_expect(s, &fl, st_all, N(st_all));

  fl = (job_filter_t){.limit = 4};
  int64_t lim[] = {x.pb, x.pc, x.pa, x.rb};
  list_expect(s, &fl, lim, N(lim));
  fl = (job_filter_t){.states = final, .limit = 2};
  int64_t lim2[] = {x.unstarted, x.fail};
  list_expect(s, &fl, lim2, N(lim2));

  /* Mixed masks: groups in state order, each in its own order. */
  fl = (job_filter_t){.states = BIT(JOB_PENDING) | BIT(JOB_FINISHED)};
  int64_t m1[] = {x.pb, x.pc, x.pa, x.fin};
  list_expect(s, &fl, m1, N(m1));
  fl = (job_filter_t){.states = BIT(JOB_FINISHED) | BIT(JOB_CANCELLED)};
  int64_t m2[] = {x.unstarted, x.canc, x.fin};
  list_expect(s, &fl, m2, N(m2));
  fl = (job_filter_t){.states = BIT(JOB_RUNNING) | BIT(JOB_LOST)};
  int64_t m3[] = {x.rb, x.rc, x.ra, x.lost};
  list_expect(s, &fl, m3, N(m3));
  fl = (job_filter_t){.states = BIT(JOB_LOST), .project = "p2"};
  list_expect(s, &fl, NULL, 0);

  /* Appends to what the list already holds; full rows come back. */
  job_list_t l = {0};
  fl = (job_filter_t){.states = BIT(JOB_RUNNING)};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 6);
  assert_int_equal(l.v[3].id, x.rb);
  assert_string_equal(l.v[3].node, "n2");
  assert_string_equal(l.v[3].project, "p2");
  assert_int_equal(l.v[3].start_ms, 100);
  assert_non_null(l.v[3].settings);
  job_list_release(&l);
}

/* What store_jobs_list must give for f with a set of projects: the list of
 * f without the set (no limit), its jobs of those projects kept in order,
 * cut at f's limit. The set leaves the order to the other fields. */
static void list_projects_expect(store_t *s, const job_filter_t *f, size_t want_n) {
  job_filter_t g = *f;
  g.projects = NULL;
  g.nprojects = 0;
  g.limit = 0;
  job_list_t all = {0}, got = {0};
  int64_t want[64];
  size_t n = 0;
  assert_int_equal(store_jobs_list(s, &g, &all), 0);
  for (size_t i = 0; i < all.n && (!f->limit || n < f->limit); i++)
    for (size_t k = 0; k < f->nprojects; k++)
      if (!strcmp(all.v[i].project, f->projects[k])) {
        assert_true(n < N(want));
        want[n++] = all.v[i].id;
        break;
      }
  job_list_release(&all);
  assert_int_equal(n, want_n);
  assert_int_equal(store_jobs_list(s, f, &got), 0);
  expect_ids(&got, want, n);
  job_list_release(&got);
}

static void test_list_projects(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  const unsigned final = BIT(JOB_FINISHED) | BIT(JOB_FAILED) | BIT(JOB_CANCELLED) |
                         BIT(JOB_LOST);
  const char *proj[] = {"a", "b", "c"};
  /* Per project: two pending (priorities 0 and 3), two running, two ended
   * (one never started), so every state group has jobs of all three. */
  for (int round = 0; round < 2; round++)
    for (size_t i = 0; i < N(proj); i++) {
      char jobid[16];
      snprintf(jobid, sizeof(jobid), "%s%d", proj[i], round);
      ins_state(s, proj[i], jobid, round * 3, JOB_PENDING, NULL, 0, 0);
      ins_state(s, proj[i], jobid, 0, JOB_RUNNING, round ? "n2" : "n1",
                100 + (int64_t)(5 - 2 * i) * 10 + round, 0);
      ins_state(s, proj[i], jobid, 0, round ? JOB_FINISHED : JOB_CANCELLED,
                round ? "n1" : NULL, round ? 50 : 0, 1000 + (int64_t)i * 7 + round);
    }
  const char *ab[] = {"a", "b"}, *ba[] = {"b", "a", "b"}, *c[] = {"c"}, *nope[] = {"zz"};

  /* Jobs of a and b, never c, in the order of the list without the set. */
  job_filter_t fl = {.projects = ab, .nprojects = 2};
  list_projects_expect(s, &fl, 12);
  job_list_t l = {0};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  for (size_t i = 0; i < l.n; i++) assert_string_not_equal(l.v[i].project, "c");
  job_list_release(&l);
  fl = (job_filter_t){.projects = ba, .nprojects = 3}; /* order and repeats do not matter */
  list_projects_expect(s, &fl, 12);
  fl = (job_filter_t){.projects = c, .nprojects = 1};
  list_projects_expect(s, &fl, 6);
  fl = (job_filter_t){.projects = nope, .nprojects = 1};
  list_projects_expect(s, &fl, 0);

  /* With states, each group in its own order. */
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .states = BIT(JOB_PENDING)};
  list_projects_expect(s, &fl, 4);
  fl.states = BIT(JOB_RUNNING);
  list_projects_expect(s, &fl, 4);
  fl.states = final;
  list_projects_expect(s, &fl, 4);
  fl.started_only = 1;
  list_projects_expect(s, &fl, 2);
  fl = (job_filter_t){.projects = ab, .nprojects = 2,
                      .states = BIT(JOB_PENDING) | BIT(JOB_FINISHED)};
  list_projects_expect(s, &fl, 6);
  fl.limit = 3;
  list_projects_expect(s, &fl, 3);

  /* With project: both apply. */
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .project = "a"};
  list_projects_expect(s, &fl, 6);
  fl.states = BIT(JOB_RUNNING);
  list_projects_expect(s, &fl, 2);
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .project = "c"};
  list_projects_expect(s, &fl, 0);

  /* With job id, node, limit. */
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .jobid = "b1"};
  list_projects_expect(s, &fl, 3);
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .node = "n1"};
  list_projects_expect(s, &fl, 4);
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .limit = 5};
  list_projects_expect(s, &fl, 5);

  /* With the native API's fields: newest first, as without the set. */
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .newest_first = 1};
  list_projects_expect(s, &fl, 12);
  fl.states = BIT(JOB_PENDING) | BIT(JOB_RUNNING);
  list_projects_expect(s, &fl, 8);
  fl = (job_filter_t){.projects = ab, .nprojects = 2, .spider = "spider1", .limit = 4,
                      .states = final, .text = "A1"};
  list_projects_expect(s, &fl, 1);

  /* The most projects allowed, with every other field set, still runs
   * (the SQL and its parameters are sized for it). */
  char names[JOB_FILTER_PROJECTS_MAX][8];
  const char *many[JOB_FILTER_PROJECTS_MAX + 1];
  for (size_t i = 0; i < JOB_FILTER_PROJECTS_MAX; i++) {
    snprintf(names[i], sizeof(names[i]), "x%zu", i);
    many[i] = names[i];
  }
  many[7] = "b";
  many[JOB_FILTER_PROJECTS_MAX] = "a";
  fl = (job_filter_t){.projects = many, .nprojects = JOB_FILTER_PROJECTS_MAX};
  list_projects_expect(s, &fl, 6);
  fl = (job_filter_t){.projects = many, .nprojects = JOB_FILTER_PROJECTS_MAX,
                      .project = "b", .jobid = "b1", .node = "n1", .started_only = 1,
                      .states = final, .limit = 9, .spider = "spider1",
                      .created_from_ms = 1, .created_to_ms = INT64_MAX, .before_id = 1000000,
                      .text = "B1", .schedule_id = 0, .parent_id = 0};
  list_projects_expect(s, &fl, 1);

  /* Refused: too many, a NULL or empty name, no array. */
  fl = (job_filter_t){.projects = many, .nprojects = JOB_FILTER_PROJECTS_MAX + 1};
  assert_int_equal(store_jobs_list(s, &fl, &l), -EINVAL);
  const char *holes[] = {"a", NULL}, *empty[] = {"a", ""};
  fl = (job_filter_t){.projects = holes, .nprojects = 2};
  assert_int_equal(store_jobs_list(s, &fl, &l), -EINVAL);
  fl = (job_filter_t){.projects = empty, .nprojects = 2};
  assert_int_equal(store_jobs_list(s, &fl, &l), -EINVAL);
  fl = (job_filter_t){.projects = NULL, .nprojects = 1};
  assert_int_equal(store_jobs_list(s, &fl, &l), -EINVAL);
  assert_int_equal(l.n, 0);
  /* nprojects 0 ignores the array. */
  fl = (job_filter_t){.projects = holes, .nprojects = 0, .states = BIT(JOB_PENDING)};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 6);
  job_list_release(&l);
}

static void test_counts(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  struct sample x;
  int64_t c[JOB_NSTATES];
  sample_fill(s, &x);

  assert_int_equal(store_job_counts(s, NULL, c), 0);
  int64_t all[JOB_NSTATES] = {3, 3, 1, 1, 1, 1};
  for (int i = 0; i < JOB_NSTATES; i++) assert_int_equal(c[i], all[i]);
  assert_int_equal(store_job_counts(s, "p1", c), 0);
  int64_t p1[JOB_NSTATES] = {2, 2, 1, 0, 1, 1};
  for (int i = 0; i < JOB_NSTATES; i++) assert_int_equal(c[i], p1[i]);
  assert_int_equal(store_job_counts(s, "p2", c), 0);
  int64_t p2[JOB_NSTATES] = {1, 1, 0, 1, 0, 0};
  for (int i = 0; i < JOB_NSTATES; i++) assert_int_equal(c[i], p2[i]);
  assert_int_equal(store_job_counts(s, "nope", c), 0);
  for (int i = 0; i < JOB_NSTATES; i++) assert_int_equal(c[i], 0);
}

static int64_t count_all(store_t *s) {
  job_list_t l = {0};
  assert_int_equal(store_jobs_list(s, NULL, &l), 0);
  int64_t n = (int64_t)l.n;
  job_list_release(&l);
  return n;
}

static void test_trim(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  int64_t ended[10];
  int n = -1;

  int64_t pend = ins(s, "p", "pending", 0);
  int64_t run = ins_state(s, "p", "running", 0, JOB_RUNNING, "n", 5, 0);
  int64_t u50 = ins_state(s, "p", "u50", 0, JOB_CANCELLED, NULL, 0, 50);
  for (int i = 0; i < 10; i++) {
    char jobid[16];
    snprintf(jobid, sizeof(jobid), "e%d", i);
    ended[i] = ins_state(s, i % 2 ? "p" : "q", jobid, 0,
                         i % 3 ? JOB_FINISHED : JOB_FAILED, "n", 10, 100 * (i + 1));
  }
  int64_t u450 = ins_state(s, "p", "u450", 0, JOB_CANCELLED, NULL, 0, 450);
  int64_t u2000 = ins_state(s, "p", "u2000", 0, JOB_CANCELLED, NULL, 0, 2000);
  assert_int_equal(count_all(s), 15);

  /* keep 0 keeps everything */
  assert_int_equal(store_trim_finished(s, 0, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(count_all(s), 15);

  /* fewer than keep: only never-started jobs older than the oldest kept go */
  assert_int_equal(store_trim_finished(s, 20, &n), 0);
  assert_int_equal(n, 1);
  job_t g;
  assert_int_equal(store_job_get(s, u50, &g), -ENOENT);

  /* keep 3: ended at 1000, 900, 800 stay; the 7 older started jobs and the
   * never-started one older than 800 go; newer never-started stays. */
  assert_int_equal(store_trim_finished(s, 3, NULL), 0);
  job_filter_t fl = {.states = BIT(JOB_FINISHED) | BIT(JOB_FAILED) |
                               BIT(JOB_CANCELLED) | BIT(JOB_LOST)};
  int64_t kept[] = {u2000, ended[9], ended[8], ended[7]};
  list_expect(s, &fl, kept, N(kept));
  assert_int_equal(store_job_get(s, u450, &g), -ENOENT);
  assert_int_equal(store_job_get(s, pend, &g), 0);
  job_release(&g);
  assert_int_equal(store_job_get(s, run, &g), 0);
  job_release(&g);
  assert_int_equal(store_trim_finished(s, 3, &n), 0);
  assert_int_equal(n, 0);

  /* A tie on end_ms at the cut-off: the higher id is the newer. */
  int64_t tie = ins_state(s, "p", "tie", 0, JOB_FINISHED, "n", 10, 800);
  assert_int_equal(store_trim_finished(s, 3, &n), 0);
  assert_int_equal(n, 1);
  int64_t kept2[] = {u2000, ended[9], ended[8], tie};
  list_expect(s, &fl, kept2, N(kept2));

  /* keep 1 */
  assert_int_equal(store_trim_finished(s, 1, &n), 0);
  assert_int_equal(n, 2);
  int64_t kept3[] = {u2000, ended[9]};
  list_expect(s, &fl, kept3, N(kept3));
  assert_int_equal(count_all(s), 4);
}

/* ---- meta ---- */

static void test_meta(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  char *v = NULL;

  assert_int_equal(store_meta_set(s, "node.id", "abc"), 0);
  assert_int_equal(store_meta_get(s, "node.id", &v), 0);
  assert_string_equal(v, "abc");
  free(v);
  assert_int_equal(store_meta_set(s, "node.id", "def"), 0);
  assert_int_equal(store_meta_set(s, "empty", ""), 0);
  assert_int_equal(store_meta_get(s, "node.id", &v), 0);
  assert_string_equal(v, "def");
  free(v);
  assert_int_equal(store_meta_get(s, "empty", &v), 0);
  assert_string_equal(v, "");
  free(v);
  assert_int_equal(store_meta_get(s, "NODE.ID", &v), -ENOENT);
}

/* The schema makes the job tokens' secret once: 64 hex digits, the same on
 * every connection (nodes sharing a store accept each other's tokens). */
static void test_job_secret_made_with_the_schema(void **state) {
  struct fx *f = *state;
  char *v = NULL, *w = NULL, err[256];
  store_t *other = NULL;
  assert_int_equal(store_meta_get(f->s, "auth.job_secret", &v), 0);
  assert_int_equal(strlen(v), 64);
  assert_int_equal(strspn(v, "0123456789abcdef"), 64);
  assert_int_equal(store_open(f->url, &other, err, sizeof(err)), 0);
  assert_int_equal(store_meta_get(other, "auth.job_secret", &w), 0);
  assert_string_equal(v, w);
  store_close(other);
  free(v);
  free(w);
}

/* ---- users and API tokens ---- */

static principal_t mkprincipal(principal_kind_t kind, const char *name, role_t role,
                               const char *projects, int64_t expires_ms) {
  return (principal_t){.kind = kind,
                       .name = (char *)name,
                       .label = kind == PRINCIPAL_TOKEN ? "ci deploy" : "",
                       .secret = "pbkdf2-sha256$1000$00ff$abcd",
                       .owner = kind == PRINCIPAL_TOKEN ? "admin" : "",
                       .role = role,
                       .projects = (char *)projects,
                       .created_ms = 1700000000123,
                       .expires_ms = expires_ms};
}

static void expect_principal(const principal_t *got, const principal_t *want) {
  assert_int_equal(got->kind, want->kind);
  assert_string_equal(got->name, want->name);
  assert_string_equal(got->label, want->label ? want->label : "");
  assert_string_equal(got->secret, want->secret ? want->secret : "");
  assert_string_equal(got->owner, want->owner ? want->owner : "");
  assert_int_equal(got->role, want->role);
  assert_string_equal(got->projects, want->projects ? want->projects : "");
  assert_int_equal(got->created_ms, want->created_ms);
  assert_int_equal(got->expires_ms, want->expires_ms);
}

/* The list's names in order, as "u:alice t:0a1b" for a message. */
static void expect_principal_names(store_t *s, const char *want) {
  principal_list_t l = {0};
  char got[512] = "";
  size_t n = 0;
  assert_int_equal(store_principals_list(s, &l), 0);
  for (size_t i = 0; i < l.n; i++)
    n += (size_t)snprintf(got + n, sizeof(got) - n, "%s%c:%s", i ? " " : "",
                          l.v[i].kind == PRINCIPAL_USER ? 'u' : 't', l.v[i].name);
  principal_list_release(&l);
  assert_string_equal(got, want);
}

static char *auth_gen(store_t *s) {
  char *g = NULL;
  assert_int_equal(store_auth_gen(s, &g), 0);
  assert_non_null(g);
  return g;
}

static void test_principals(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  int n = -1;

  /* Nothing yet: an empty list and an empty generation. */
  char *g0 = auth_gen(s);
  assert_string_equal(g0, "");
  expect_principal_names(s, "");

  /* Users before tokens, each by name in byte order ("B" < "a"), whatever
   * the order of the puts; a user and a token may share a name. */
  const char *users[] = {"carol", "alice", "Bob", "bob"};
  for (size_t i = 0; i < N(users); i++) {
    principal_t p = mkprincipal(PRINCIPAL_USER, users[i], ROLE_READ, "", 0);
    assert_int_equal(store_principal_put(s, &p), 0);
  }
  const char *tokens[] = {"ffff000011112222", "0123456789abcdef", "alice"};
  for (size_t i = 0; i < N(tokens); i++) {
    principal_t p = mkprincipal(PRINCIPAL_TOKEN, tokens[i], ROLE_RUN, "a,b", 0);
    assert_int_equal(store_principal_put(s, &p), 0);
  }
  expect_principal_names(s, "u:Bob u:alice u:bob u:carol t:0123456789abcdef t:alice "
                            "t:ffff000011112222");

  /* Every put changes the generation. */
  char *g1 = auth_gen(s);
  assert_string_not_equal(g1, "");
  principal_t p = mkprincipal(PRINCIPAL_USER, "alice", ROLE_ADMIN, "x", 0);
  assert_int_equal(store_principal_put(s, &p), 0);
  char *g2 = auth_gen(s);
  assert_string_not_equal(g2, g1);

  /* A put replaces every field of the row of that kind and name, and only
   * that row (the token "alice" keeps its own). */
  p = mkprincipal(PRINCIPAL_USER, "alice", ROLE_DEPLOY, "", 42);
  p.secret = "pbkdf2-sha256$2000$11$ef";
  p.created_ms = 5;
  assert_int_equal(store_principal_put(s, &p), 0);
  principal_list_t l = {0};
  assert_int_equal(store_principals_list(s, &l), 0);
  assert_int_equal(l.n, 7);
  expect_principal(&l.v[1], &p);
  principal_t t = mkprincipal(PRINCIPAL_TOKEN, "alice", ROLE_RUN, "a,b", 0);
  expect_principal(&l.v[5], &t);
  principal_list_release(&l);

  /* Deleting nothing: count 0, no error, the generation stays. */
  char *g3 = auth_gen(s);
  assert_string_not_equal(g3, g2);
  assert_int_equal(store_principal_delete(s, PRINCIPAL_USER, "nobody", &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(store_principal_delete(s, PRINCIPAL_TOKEN, "carol", &n), 0);
  assert_int_equal(n, 0);
  char *g4 = auth_gen(s);
  assert_string_equal(g4, g3);

  /* A real delete: count 1, only that kind's row, a new generation. */
  assert_int_equal(store_principal_delete(s, PRINCIPAL_USER, "alice", &n), 0);
  assert_int_equal(n, 1);
  char *g5 = auth_gen(s);
  assert_string_not_equal(g5, g4);
  expect_principal_names(s, "u:Bob u:bob u:carol t:0123456789abcdef t:alice "
                            "t:ffff000011112222");
  assert_int_equal(store_principal_delete(s, PRINCIPAL_USER, "alice", NULL), 0);
  char *g6 = auth_gen(s);
  assert_string_equal(g6, g5);

  /* Another connection (another node) sees the same generation. */
  store_t *s2 = fx_open(f->url);
  char *g7 = auth_gen(s2);
  assert_string_equal(g7, g5);
  store_close(s2);

  free(g0), free(g1), free(g2), free(g3), free(g4), free(g5), free(g6), free(g7);
}

/* Every field comes back as it went in: projects "" and "a,b", no expiry
 * and one, NULL strings stored as "". */
static void test_principal_round_trip(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  principal_t in[] = {
      mkprincipal(PRINCIPAL_USER, "u1", ROLE_READ, "", 0),
      mkprincipal(PRINCIPAL_USER, "u2", ROLE_ADMIN, "a,b", 1900000000456),
      mkprincipal(PRINCIPAL_TOKEN, "00112233aabbccdd", ROLE_DEPLOY, "a,b", 0),
      mkprincipal(PRINCIPAL_TOKEN, "99887766554433ff", ROLE_RUN, "", 1900000000789),
  };
  in[0].label = in[0].owner = NULL;
  in[0].projects = NULL;
  in[3].secret = "0f0e0d0c0b0a09080706050403020100f0e0d0c0b0a09080706050403020100f";
  for (size_t i = 0; i < N(in); i++) assert_int_equal(store_principal_put(s, &in[i]), 0);
  principal_list_t l = {0};
  assert_int_equal(store_principals_list(s, &l), 0);
  assert_int_equal(l.n, N(in));
  for (size_t i = 0; i < N(in); i++) expect_principal(&l.v[i], &in[i]);
  /* Appends to what the list holds. */
  assert_int_equal(store_principals_list(s, &l), 0);
  assert_int_equal(l.n, 2 * N(in));
  expect_principal(&l.v[N(in)], &in[0]);
  principal_list_release(&l);
}

static void test_principal_bad_arguments(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  principal_list_t l = {0};
  char *g = NULL;
  int n = 7;
  principal_t p = mkprincipal(PRINCIPAL_USER, "u", ROLE_READ, "", 0);
  assert_int_equal(store_principal_put(NULL, &p), -EINVAL);
  assert_int_equal(store_principal_put(s, NULL), -EINVAL);
  p.kind = 0;
  assert_int_equal(store_principal_put(s, &p), -EINVAL);
  p.kind = 3;
  assert_int_equal(store_principal_put(s, &p), -EINVAL);
  p = mkprincipal(PRINCIPAL_TOKEN, "", ROLE_READ, "", 0);
  assert_int_equal(store_principal_put(s, &p), -EINVAL);
  p.name = NULL;
  assert_int_equal(store_principal_put(s, &p), -EINVAL);
  p = mkprincipal(PRINCIPAL_USER, "u", ROLE_NONE, "", 0);
  assert_int_equal(store_principal_put(s, &p), -EINVAL);
  p.role = ROLE_ADMIN + 1;
  assert_int_equal(store_principal_put(s, &p), -EINVAL);
  assert_int_equal(store_principal_delete(s, 0, "u", &n), -EINVAL);
  assert_int_equal(n, 0);
  assert_int_equal(store_principal_delete(s, PRINCIPAL_USER, "", &n), -EINVAL);
  assert_int_equal(store_principal_delete(s, PRINCIPAL_USER, NULL, &n), -EINVAL);
  assert_int_equal(store_principals_list(s, NULL), -EINVAL);
  assert_int_equal(store_principals_list(NULL, &l), -EINVAL);
  assert_int_equal(store_auth_gen(s, NULL), -EINVAL);
  assert_int_equal(store_auth_gen(NULL, &g), -EINVAL);
  /* Nothing was written by the refused calls. */
  expect_principal_names(s, "");
  g = auth_gen(s);
  assert_string_equal(g, "");
  free(g);
}

/* ---- durability, transactions, schema ---- */

static void test_reopen(void **state) {
  struct fx *f = *state;
  job_list_t l = {0};
  job_t g;
  char *v;

  int64_t a = ins(f->s, "p", "a", 0);
  int64_t b = ins(f->s, "p", "b", 1);
  assert_int_equal(store_job_claim(f->s, "n", 1, 10, &l), 0);
  job_list_release(&l);
  assert_int_equal(store_meta_set(f->s, "k", "v"), 0);
  store_close(f->s);
  f->s = fx_open(f->url);

  assert_int_equal(store_job_get(f->s, b, &g), 0);
  assert_int_equal(g.state, JOB_RUNNING);
  job_release(&g);
  assert_int_equal(store_meta_get(f->s, "k", &v), 0);
  assert_string_equal(v, "v");
  free(v);
  assert_int_equal(store_job_claim(f->s, "n", 5, 20, &l), 0);
  int64_t left[] = {a};
  expect_ids(&l, left, N(left));
  job_list_release(&l);
  /* Ids keep growing: never reused, even after the newest row is deleted. */
  int64_t c = ins_state(f->s, "p", "c", 0, JOB_CANCELLED, NULL, 0, 1);
  assert_int_equal(store_job_finish(f->s, a, JOB_FINISHED, 10, 0, 0, NULL), 0);
  int n;
  assert_int_equal(store_trim_finished(f->s, 1, &n), 0);
  assert_int_equal(n, 1);
  store_close(f->s);
  f->s = fx_open(f->url);
  assert_true(ins(f->s, "p", "d", 0) > c);
}

static int fx_is_redis(const struct fx *f) { return !strncmp(f->url, "redis", 5); }

static void test_transactions(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};
  job_t g;

  /* Savepoints and commit only make sense inside a transaction. */
  assert_int_equal(store_sp_begin(s), -EINVAL);
  assert_int_equal(store_sp_release(s), -EINVAL);
  assert_int_equal(store_sp_rollback(s), -EINVAL);
  assert_int_equal(store_tx_commit(s), -EINVAL);
  assert_int_equal(store_tx_rollback(s), -EINVAL);

  assert_int_equal(store_tx_begin(s), 0);
  assert_int_equal(store_tx_begin(s), -EINVAL);
  assert_int_equal(store_sp_release(s), -EINVAL);
  int64_t a = ins(s, "p", "a", 0);
  assert_int_equal(store_sp_begin(s), 0);
  int64_t b = ins(s, "p", "b", 0);
  assert_int_equal(store_sp_rollback(s), 0);
  assert_int_equal(store_sp_begin(s), 0);
  int64_t c = ins(s, "p", "c", 0);
  assert_int_equal(store_sp_release(s), 0);
  assert_int_equal(store_sp_release(s), -EINVAL);
  /* nested savepoints */
  assert_int_equal(store_sp_begin(s), 0);
  int64_t d = ins(s, "p", "d", 0);
  assert_int_equal(store_sp_begin(s), 0);
  int64_t e = ins(s, "p", "e", 0);
  assert_int_equal(store_sp_rollback(s), 0);
  assert_int_equal(store_sp_release(s), 0);
  /* a claim inside the transaction sees its uncommitted rows */
  assert_int_equal(store_job_claim(s, "n", 10, 5, &l), 0);
  int64_t claimed[] = {a, c, d};
  expect_ids(&l, claimed, N(claimed));
  job_list_release(&l);
  /* a multi-statement call joins the open transaction */
  int n;
  assert_int_equal(store_trim_finished(s, 5, &n), 0);
  assert_int_equal(store_tx_commit(s), 0);

  assert_int_equal(store_job_get(s, a, &g), 0);
  assert_int_equal(g.state, JOB_RUNNING);
  job_release(&g);
  assert_int_equal(store_job_get(s, c, &g), 0);
  job_release(&g);
  assert_int_equal(store_job_get(s, d, &g), 0);
  job_release(&g);
  /* Rolled-back rows are gone (their ids may be given out again, so look
   * them up by job id). */
  job_filter_t fb = {.jobid = "b"}, fe = {.jobid = "e"};
  list_expect(s, &fb, NULL, 0);
  list_expect(s, &fe, NULL, 0);
  (void)b;
  (void)e;

  /* rollback drops the transaction's writes */
  assert_int_equal(store_tx_begin(s), 0);
  int64_t r = ins(s, "p", "r", 0);
  assert_int_equal(store_meta_set(s, "k", "v"), 0);
  assert_int_equal(store_tx_rollback(s), 0);
  job_filter_t fr = {.jobid = "r"};
  list_expect(s, &fr, NULL, 0);
  (void)r;
  char *v;
  assert_int_equal(store_meta_get(s, "k", &v), -ENOENT);

  /* another connection sees nothing until commit (Redis's readers do not
   * wait for a transaction: they see its writes at once) */
  store_t *s2 = fx_open(f->url);
  assert_int_equal(store_tx_begin(s), 0);
  int64_t w = ins(s, "p", "w", 0);
  assert_int_equal(store_job_get(s2, w, &g), fx_is_redis(f) ? 0 : -ENOENT);
  if (fx_is_redis(f)) job_release(&g);
  assert_int_equal(store_tx_commit(s), 0);
  assert_int_equal(store_job_get(s2, w, &g), 0);
  job_release(&g);
  store_close(s2);
}

static void test_migrations(void **state) {
  struct fx *f = *state;
  char err[256], path[512];
  int64_t a = ins(f->s, "p", "a", 0);
  store_close(f->s);
  f->s = NULL;
  for (int i = 0; i < 3; i++) {
    store_t *s = fx_open(f->url);
    job_t g;
    assert_int_equal(store_job_get(s, a, &g), 0);
    job_release(&g);
    store_close(s);
  }
  f->s = fx_open(f->url);
  if (!f->sqlite_default) return;

  /* Inside the file: WAL, a schema version, the tables and indexes. */
  sqlite3 *db;
  snprintf(path, sizeof(path), "%s/main.db", f->dir);
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *st;
  const char *checks[][2] = {
      {"PRAGMA journal_mode", "wal"},
      {"SELECT user_version > 0 FROM pragma_user_version", "1"},
      {"SELECT count(*) FROM sqlite_master WHERE name IN "
       "('jobs', 'meta', 'jobs_pending', 'jobs_running', 'jobs_jobid', 'jobs_ended')", "6"},
  };
  for (size_t i = 0; i < N(checks); i++) {
    assert_int_equal(sqlite3_prepare_v2(db, checks[i][0], -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), checks[i][1]);
    sqlite3_finalize(st);
  }
  /* A file from a newer build is refused, not half-used. */
  store_close(f->s);
  f->s = NULL;
  assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 999", NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);
  store_t *s = NULL;
  assert_int_equal(store_open(f->url, &s, err, sizeof(err)), SPD_ESTORE);
  assert_null(s);
  assert_non_null(strstr(err, "newer"));
}

/* A file of schema 5 (before nodes had a version) is brought up to date
 * when opened: its node rows stay, with no version until their next beat. */
static void test_migration_node_version(void **state) {
  struct fx *f = *state;
  char path[512];
  if (!f->sqlite_default) return; /* the file is SQLite's own */
  node_info_t n = {.name = "old", .url = "http://old:6800", .slots = 3, .running = 1,
                   .started_ms = 5, .version = "0.0.9"};
  assert_int_equal(store_node_beat(f->s, &n, 1000, NULL), 0);
  store_close(f->s);
  f->s = NULL;

  /* Back to what a version-5 build wrote. */
  sqlite3 *db;
  snprintf(path, sizeof(path), "%s/main.db", f->dir);
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db,
                                "ALTER TABLE nodes DROP COLUMN version;"
                                "DROP TABLE principals;" /* from schema 7 */
                                "ALTER TABLE nodes DROP COLUMN draining;" /* from schema 8 */
                                "ALTER TABLE schedules DROP COLUMN state;" /* from schema 9 */
                                "ALTER TABLE jobs DROP COLUMN meta;" /* from schema 10 */
                                "ALTER TABLE jobs DROP COLUMN original_state;"
                                "ALTER TABLE jobs DROP COLUMN note;"
                                "ALTER TABLE jobs DROP COLUMN test;" /* from schema 11 */
                                "ALTER TABLE schedules DROP COLUMN meta;"
                                "ALTER TABLE jobs DROP COLUMN health;" /* the health one */
                                "ALTER TABLE jobs DROP COLUMN health_reasons;"
                                "ALTER TABLE nodes DROP COLUMN mem_free;"
                                "ALTER TABLE nodes DROP COLUMN mem_reserved;"
                                "ALTER TABLE jobs DROP COLUMN segments;"
                                "DROP INDEX jobs_waiting;" /* the after one */
                                "ALTER TABLE jobs DROP COLUMN \"after\";"
                                "PRAGMA user_version = 5;",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);

  f->s = fx_open(f->url);
  node_list_t l = {0};
  assert_int_equal(store_nodes_list(f->s, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].name, "old");
  assert_int_equal(l.v[0].slots, 3);
  assert_int_equal(l.v[0].heartbeat_ms, 1000);
  assert_null(l.v[0].version);
  node_list_release(&l);
  n.version = "0.1.0";
  assert_int_equal(store_node_beat(f->s, &n, 2000, NULL), 0);
  assert_int_equal(store_nodes_list(f->s, &l), 0);
  assert_string_equal(l.v[0].version, "0.1.0");
  node_list_release(&l);
}

/* A file of schema 6 (before users and tokens were in the store) is
 * brought up to date when opened: its jobs stay, principals start empty. */
static void test_migration_principals(void **state) {
  struct fx *f = *state;
  char path[512];
  if (!f->sqlite_default) return; /* the file is SQLite's own */
  int64_t a = ins(f->s, "p", "a", 0);
  store_close(f->s);
  f->s = NULL;

  /* Back to what a version-6 build wrote. */
  sqlite3 *db;
  snprintf(path, sizeof(path), "%s/main.db", f->dir);
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "ALTER TABLE nodes DROP COLUMN draining; ALTER TABLE schedules DROP COLUMN state; "
                                    "ALTER TABLE jobs DROP COLUMN meta; ALTER TABLE jobs DROP COLUMN original_state; "
                                    "ALTER TABLE jobs DROP COLUMN note; "
                                    "ALTER TABLE jobs DROP COLUMN test; "
                                    "ALTER TABLE schedules DROP COLUMN meta; "
                                    "ALTER TABLE jobs DROP COLUMN health; "
                                    "ALTER TABLE jobs DROP COLUMN health_reasons; "
                                    "ALTER TABLE nodes DROP COLUMN mem_free; "
                                    "ALTER TABLE nodes DROP COLUMN mem_reserved; "
                                    "ALTER TABLE jobs DROP COLUMN segments; "
                                    "DROP INDEX jobs_waiting; ALTER TABLE jobs DROP COLUMN \"after\"; "
                                    "DROP TABLE principals; PRAGMA user_version = 6;", NULL,
                                NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);

  f->s = fx_open(f->url);
  job_t g;
  assert_int_equal(store_job_get(f->s, a, &g), 0);
  job_release(&g);
  expect_principal_names(f->s, "");
  principal_t p = mkprincipal(PRINCIPAL_USER, "admin", ROLE_ADMIN, "", 0);
  assert_int_equal(store_principal_put(f->s, &p), 0);
  expect_principal_names(f->s, "u:admin");

  /* and on to the newest: the version a new store starts at */
  char fresh[512], fresh_path[512];
  fx_url(f, "newest", fresh, sizeof(fresh));
  store_close(fx_open(fresh));
  snprintf(fresh_path, sizeof(fresh_path), "%s/newest.db", f->dir);
  int versions[2];
  const char *paths[2] = {path, fresh_path};
  for (int i = 0; i < 2; i++) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(paths[i], &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    versions[i] = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  assert_true(versions[0] > 6);
  assert_int_equal(versions[0], versions[1]);
}

/* Several processes opening a store nobody has opened yet: each one
 * succeeds and the schema is created once. */
static void test_concurrent_first_open(void **state) {
  struct fx *f = *state;
  enum { NPROC = 4 };
  char url[512];
  int go[2];
  pid_t pids[NPROC];
  fx_url(f, "fresh", url, sizeof(url));
  assert_int_equal(pipe(go), 0);
  for (int i = 0; i < NPROC; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      char c, err[256], jobid[16];
      store_t *s = NULL;
      close(go[1]);
      /* wait for the parent to release everyone at once */
      if (read(go[0], &c, 1) < 0) _exit(2);
      int rc = store_open(url, &s, err, sizeof(err));
      if (rc) {
        fprintf(stderr, "child %d: %s\n", i, err);
        _exit(1);
      }
      job_t j;
      snprintf(jobid, sizeof(jobid), "c%d", i);
      mkjob(&j, "p", jobid, 0);
      rc = store_job_insert(s, &j);
      job_release(&j);
      store_close(s);
      _exit(rc ? 1 : 0);
    }
  }
  close(go[0]);
  close(go[1]);
  for (int i = 0; i < NPROC; i++) {
    int status;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  store_t *s = fx_open(url);
  int64_t c[JOB_NSTATES];
  assert_int_equal(store_job_counts(s, "p", c), 0);
  assert_int_equal(c[JOB_PENDING], NPROC);
  store_close(s);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_open_urls),    T(test_empty_store),     T(test_bad_arguments),
      T(test_insert_get),   T(test_claim_order),     T(test_claim_concurrent),
      T(test_started_finish), T(test_requeue),
      T(test_cancel_pending), T(test_unique_key), T(test_unique_key_concurrent),
      T(test_status),
      T(test_list),         T(test_list_projects), T(test_counts),          T(test_trim),
      T(test_meta), T(test_job_secret_made_with_the_schema),         T(test_reopen),          T(test_transactions),
      T(test_principals), T(test_principal_round_trip), T(test_principal_bad_arguments),
      T(test_migrations),   T(test_migration_node_version), T(test_migration_principals),
      T(test_concurrent_first_open),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
