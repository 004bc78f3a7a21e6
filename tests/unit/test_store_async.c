/* Tests for the store pool (store/async.h): ops run off the loop, callbacks
 * come back on the loop in order, a batch isolates a failing op, a broken
 * transaction fails its whole batch, and stop drains what was queued; and
 * for the transactions under it: one whose process is killed between its
 * writes leaves none of them.
 * Same URL rule as test_store.c: SPIDERD_TEST_STORE_URL with "{}" replaced
 * per test, else a SQLite file in a temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "error.h"
#include "flow/jobs.h"
#include "store/async.h"

struct fx {
  char dir[256];
  char url[512];
  uv_loop_t loop;
  uv_thread_t loop_thread;
  store_pool_t *pool;
  /* what the callbacks saw */
  int ndone;
  int expect;
  int order[1024];
  int rcs[1024];
  int off_loop;     /* a callback ran off the loop thread */
  int on_loop_fn;   /* an op ran on the loop thread */
  int stop_at_end;  /* store_pool_stop once `expect` callbacks arrived */
};

struct op {
  struct fx *f;
  int seq;
  int fail;        /* fn returns this after doing its write */
  int break_tx;    /* fn rolls back the pool's transaction */
  uv_sem_t *entered; /* fn posts this first */
  uv_sem_t *gate;    /* then waits on this */
  int64_t id;      /* the job it inserted or read */
  int found;       /* read op: the job was there */
  int eagain;      /* the first `eagain` runs return -EAGAIN after their write */
  int runs;        /* how many times fn ran */
};

static int fx_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}

static int fx_setup(void **state) {
  struct fx *f = calloc(1, sizeof(*f));
  char err[256];
  assert_non_null(f);
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof(f->dir), "%s/spiderd-test-async-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(f->dir));
  const char *tmpl = getenv("SPIDERD_TEST_STORE_URL");
  const char *hole = tmpl ? strstr(tmpl, "{}") : NULL;
  if (!tmpl || !*tmpl)
    snprintf(f->url, sizeof(f->url), "sqlite:%s/store.db", f->dir);
  else if (!hole)
    snprintf(f->url, sizeof(f->url), "%s", tmpl);
  else
    snprintf(f->url, sizeof(f->url), "%.*s%s%s", (int)(hole - tmpl), tmpl,
             strrchr(f->dir, '-') + 1, hole + 2);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  f->loop_thread = uv_thread_self();
  int rc = store_pool_start(&f->loop, f->url, &f->pool, err, sizeof(err));
  if (rc) fail_msg("store_pool_start(%s): %s", f->url, err);
  *state = f;
  return 0;
}

static int fx_teardown(void **state) {
  struct fx *f = *state;
  if (f->pool) {
    store_pool_stop(f->pool);
    uv_run(&f->loop, UV_RUN_DEFAULT);
  }
  /* Every handle closed: the pool freed itself. */
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->dir, fx_rm, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

static void fx_stop(struct fx *f) {
  store_pool_stop(f->pool);
  f->pool = NULL;
}

/* Runs the loop until the pool is stopped and closed. */
static void fx_run(struct fx *f) {
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_null(f->pool);
}

static void check_off_loop(struct op *o) {
  uv_thread_t self = uv_thread_self();
  if (uv_thread_equal(&self, &o->f->loop_thread)) o->f->on_loop_fn = 1;
  if (o->entered) uv_sem_post(o->entered);
  if (o->gate) uv_sem_wait(o->gate);
}

static int op_insert(store_t *s, void *arg) {
  struct op *o = arg;
  check_off_loop(o);
  job_t j;
  char jobid[32];
  job_init(&j);
  snprintf(jobid, sizeof(jobid), "job-%d", o->seq);
  j.jobid = strdup(jobid);
  j.project = strdup("p");
  j.spider = strdup("s");
  int rc = store_job_insert(s, &j);
  o->id = j.id;
  job_release(&j);
  if (rc) return rc;
  if (++o->runs <= o->eagain) return -EAGAIN; /* as PostgreSQL's 40P01 / 40001 */
  if (o->break_tx) store_tx_rollback(s);
  return o->fail;
}

static int op_get(store_t *s, void *arg) {
  struct op *o = arg;
  check_off_loop(o);
  job_t j;
  int rc = store_job_get(s, o->id, &j);
  o->found = rc == 0;
  job_release(&j);
  return rc == -ENOENT ? 0 : rc;
}

static void op_done(void *arg, int rc) {
  struct op *o = arg;
  struct fx *f = o->f;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &f->loop_thread)) f->off_loop = 1;
  assert_true(f->ndone < 1024);
  f->order[f->ndone] = o->seq;
  f->rcs[f->ndone] = rc;
  f->ndone++;
  if (f->stop_at_end && f->ndone == f->expect) fx_stop(f);
}

static int64_t count_jobs(struct fx *f) {
  char err[256];
  store_t *s;
  int64_t c[JOB_NSTATES];
  assert_int_equal(store_open(f->url, &s, err, sizeof(err)), 0);
  assert_int_equal(store_job_counts(s, NULL, c), 0);
  store_close(s);
  return c[JOB_PENDING];
}

/* Writes and reads interleaved: every op runs on a store thread, every
 * callback on the loop thread, each kind in submission order. */
static void test_order_and_threads(void **state) {
  struct fx *f = *state;
  enum { NW = 300, NR = 100 };
  static struct op w[NW], r[NR];
  int ri = 0;
  for (int i = 0; i < NW; i++) {
    w[i] = (struct op){.f = f, .seq = i};
    assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &w[i], op_done), 0);
    if (i % 3 == 0 && ri < NR) {
      r[ri] = (struct op){.f = f, .seq = 10000 + ri, .id = ri + 1};
      assert_int_equal(store_submit(f->pool, STORE_READ, op_get, &r[ri], op_done), 0);
      ri++;
    }
  }
  f->expect = NW + ri;
  f->stop_at_end = 1;
  fx_run(f);

  assert_int_equal(f->ndone, NW + ri);
  assert_false(f->off_loop);
  assert_false(f->on_loop_fn);
  int next_w = 0, next_r = 10000;
  for (int i = 0; i < f->ndone; i++) {
    assert_int_equal(f->rcs[i], 0);
    if (f->order[i] < 10000)
      assert_int_equal(f->order[i], next_w++);
    else
      assert_int_equal(f->order[i], next_r++);
  }
  for (int i = 1; i < NW; i++) assert_true(w[i].id > w[i - 1].id);
  assert_int_equal(count_jobs(f), NW);
}

/* A read submitted from a write's callback sees the committed write. */
static struct op chain_w, chain_r;

static void chain_read_done(void *arg, int rc) {
  op_done(arg, rc);
}

static void chain_write_done(void *arg, int rc) {
  op_done(arg, rc);
  chain_r = (struct op){.f = chain_w.f, .seq = 1, .id = chain_w.id};
  assert_int_equal(
      store_submit(chain_w.f->pool, STORE_READ, op_get, &chain_r, chain_read_done), 0);
}

static void test_chain(void **state) {
  struct fx *f = *state;
  chain_w = (struct op){.f = f, .seq = 0};
  assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &chain_w,
                                chain_write_done), 0);
  f->expect = 2;
  f->stop_at_end = 1;
  fx_run(f);
  assert_int_equal(f->ndone, 2);
  assert_int_equal(f->rcs[0], 0);
  assert_int_equal(f->rcs[1], 0);
  assert_true(chain_r.found);
}

/* Blocks the writer in a gate op, then queues the ops under test, so they
 * are all queued when the writer next looks and land in one batch. */
static void run_gated_batch(struct fx *f, struct op *ops, int n) {
  static uv_sem_t gate, entered;
  static struct op gate_op;
  assert_int_equal(uv_sem_init(&gate, 0), 0);
  assert_int_equal(uv_sem_init(&entered, 0), 0);
  gate_op = (struct op){.f = f, .seq = -1, .gate = &gate, .entered = &entered};
  assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &gate_op, op_done), 0);
  uv_sem_wait(&entered);
  for (int i = 0; i < n; i++)
    assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &ops[i], op_done), 0);
  uv_sem_post(&gate);
  f->expect = n + 1;
  f->stop_at_end = 1;
  fx_run(f);
  uv_sem_destroy(&gate);
  uv_sem_destroy(&entered);
  assert_int_equal(f->ndone, n + 1);
  assert_int_equal(f->order[0], -1);
  assert_int_equal(f->rcs[0], 0);
  for (int i = 0; i < n; i++) assert_int_equal(f->order[i + 1], ops[i].seq);
}

static void test_failing_op_isolated(void **state) {
  struct fx *f = *state;
  struct op ops[5];
  for (int i = 0; i < 5; i++) ops[i] = (struct op){.f = f, .seq = i};
  ops[1].fail = -EIO;
  ops[3].fail = SPD_ECONFLICT;
  run_gated_batch(f, ops, 5);
  assert_int_equal(f->rcs[1], 0);
  assert_int_equal(f->rcs[2], -EIO);
  assert_int_equal(f->rcs[3], 0);
  assert_int_equal(f->rcs[4], SPD_ECONFLICT);
  assert_int_equal(f->rcs[5], 0);
  /* gate + 3 successful inserts; the failed ones were rolled back */
  assert_int_equal(count_jobs(f), 4);
}

static void test_broken_tx_fails_batch(void **state) {
  struct fx *f = *state;
  struct op ops[3];
  for (int i = 0; i < 3; i++) ops[i] = (struct op){.f = f, .seq = i};
  ops[1].break_tx = 1;
  run_gated_batch(f, ops, 3);
  for (int i = 1; i <= 3; i++) assert_int_equal(f->rcs[i], SPD_ESTORE);
  assert_int_equal(count_jobs(f), 1); /* only the gate's own batch */
}

/* A write that answers -EAGAIN (a collision with another transaction) is
 * rolled back and run again, alone, until it goes through: its callback
 * sees only the last run, and only that run's write stays. A store that
 * cannot roll back (Redis) runs nothing twice. */
static void test_eagain_retried(void **state) {
  struct fx *f = *state;
  struct op o = {.f = f, .seq = 1, .eagain = 2};
  f->expect = 1;
  f->stop_at_end = 1;
  assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &o, op_done), 0);
  fx_run(f);
  assert_int_equal(f->ndone, 1);
  assert_int_equal(f->rcs[0], 0);
  assert_int_equal(o.runs, 3);
  assert_int_equal(count_jobs(f), 1);
}

/* ... a few times: then -EAGAIN is the answer, and nothing was written. */
static void test_eagain_gives_up(void **state) {
  struct fx *f = *state;
  struct op o = {.f = f, .seq = 1, .eagain = 1000};
  f->expect = 1;
  f->stop_at_end = 1;
  assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &o, op_done), 0);
  fx_run(f);
  assert_int_equal(f->rcs[0], -EAGAIN);
  assert_int_equal(o.runs, 6); /* the first run and 5 more */
  assert_int_equal(count_jobs(f), 0);
  assert_int_equal(spd_http_status(-EAGAIN), 503); /* a client is told to come again */
}

/* In a batch, the op that collided is rolled back to its savepoint, the
 * ops before it commit, it runs again alone, and the rest follow: writes
 * commit in submission order (the ids they get grow), callbacks too. */
static void test_eagain_in_batch(void **state) {
  struct fx *f = *state;
  struct op ops[4];
  for (int i = 0; i < 4; i++) ops[i] = (struct op){.f = f, .seq = i};
  ops[1].eagain = 1;
  ops[3].eagain = 2;
  run_gated_batch(f, ops, 4);
  for (int i = 0; i <= 4; i++) assert_int_equal(f->rcs[i], 0);
  assert_int_equal(ops[0].runs, 1);
  assert_int_equal(ops[1].runs, 2);
  assert_int_equal(ops[3].runs, 3);
  for (int i = 1; i < 4; i++) assert_true(ops[i - 1].id < ops[i].id);
  assert_int_equal(count_jobs(f), 5); /* the gate and the four, once each */
}

/* stop runs everything queued, delivers the callbacks before it returns,
 * and refuses later submits without calling their callbacks. */
static void test_stop_drains(void **state) {
  struct fx *f = *state;
  enum { NW = 200, NR = 50 };
  static struct op w[NW], r[NR], late;
  uv_sem_t gate;
  assert_int_equal(uv_sem_init(&gate, 0), 0);
  for (int i = 0; i < NW; i++) {
    w[i] = (struct op){.f = f, .seq = i, .gate = i == 0 ? &gate : NULL};
    assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &w[i], op_done), 0);
  }
  for (int i = 0; i < NR; i++) {
    r[i] = (struct op){.f = f, .seq = 10000 + i, .id = 1};
    assert_int_equal(store_submit(f->pool, STORE_READ, op_get, &r[i], op_done), 0);
  }
  uv_sem_post(&gate);
  store_pool_t *p = f->pool;
  store_pool_stop(p);
  f->pool = NULL;
  /* delivered synchronously, before the loop ran at all */
  assert_int_equal(f->ndone, NW + NR);
  for (int i = 0; i < f->ndone; i++) assert_int_equal(f->rcs[i], 0);
  late = (struct op){.f = f, .seq = 99999};
  assert_int_equal(store_submit(p, STORE_WRITE, op_insert, &late, op_done), SPD_ESHUTDOWN);
  assert_int_equal(store_submit(p, STORE_READ, op_get, &late, op_done), SPD_ESHUTDOWN);
  store_pool_stop(p); /* a second stop is harmless */
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->ndone, NW + NR);
  uv_sem_destroy(&gate);
  assert_int_equal(count_jobs(f), NW);
}

static void test_bad_calls(void **state) {
  struct fx *f = *state;
  struct op o = {.f = f};
  char err[256];
  store_pool_t *p = (store_pool_t *)&o;
  assert_int_equal(store_submit(f->pool, 7, op_insert, &o, op_done), -EINVAL);
  assert_int_equal(store_submit(f->pool, STORE_WRITE, NULL, &o, op_done), -EINVAL);
  assert_int_equal(store_submit(NULL, STORE_WRITE, op_insert, &o, op_done), -EINVAL);
  assert_int_equal(f->ndone, 0);
  /* a bad URL: no pool, no handle left on the loop */
  assert_int_equal(store_pool_start(&f->loop, "nosuch://x", &p, err, sizeof(err)),
                   -EINVAL);
  assert_null(p);
  assert_true(err[0] != '\0');
  /* done may be NULL: fire and forget */
  assert_int_equal(store_submit(f->pool, STORE_WRITE, op_insert, &o, NULL), 0);
  fx_stop(f);
  fx_run(f);
  assert_int_equal(f->ndone, 0);
  assert_int_equal(count_jobs(f), 1);
}

/* ---- a transaction's holder killed between its writes ---- */

/* The kill points: after 1..4 of the writes of a failed job's end with its
 * retry (as flow/jobs.c makes them), after the whole of jobs_end before its
 * commit, and after the commit. */
enum { KILL_STEPS = 4, KILL_FLOW = 5, KILL_COMMITTED = 6 };

/* The store of kill point k: a prefix / schema / file of its own. */
static void kill_url(const struct fx *f, int k, char *out, size_t len) {
  snprintf(out, len, "%s%d", f->url, k);
}

static int kill_step(store_t *s, const job_t *j, int step) {
  event_t e = {.type = step == 1 ? "job.failed" : "job.retried", .job_id = j->id};
  job_t r;
  int rc;
  switch (step) {
  case 0: return store_job_finish(s, j->id, JOB_FAILED, 2000, 1, 0, NULL);
  case 2:
    job_init(&r);
    r.jobid = strdup("j.2");
    r.project = strdup("p");
    r.spider = strdup("s");
    r.unique_key = strdup("u");
    r.retry_of = j->id;
    r.attempt = 2;
    rc = store_job_insert(s, &r);
    job_release(&r);
    return rc;
  default: return store_event_add(s, &e);
  }
}

/* The child: its own connection, a transaction, k's writes, then death. */
static void kill_child(const char *url, int64_t id, int k) {
  char err[256];
  store_t *s = NULL;
  job_t j;
  int rc = store_open(url, &s, err, sizeof(err));
  if (!rc) rc = store_job_get(s, id, &j);
  if (!rc) rc = store_tx_begin(s);
  for (int i = 0; !rc && k <= KILL_STEPS && i < k; i++) rc = kill_step(s, &j, i);
  if (!rc && k >= KILL_FLOW) {
    jobs_end_t e = {.job = &j, .state = JOB_FAILED, .end_ms = 2000, .exit_code = 1};
    rc = jobs_end(s, &e);
    if (!rc && !e.retry_id) rc = -ENOENT;
  }
  if (!rc && k == KILL_COMMITTED) rc = store_tx_commit(s);
  if (rc) _exit(3); /* the parent sees an exit, not the kill */
  raise(SIGKILL);
  _exit(4);
}

/* A running job with a unique key and a retry left; its id. */
static int64_t kill_job(const char *url) {
  char err[256];
  store_t *s = NULL;
  job_t j;
  job_list_t l = {0};
  assert_int_equal(store_open(url, &s, err, sizeof(err)), 0);
  job_init(&j);
  j.jobid = strdup("j");
  j.project = strdup("p");
  j.spider = strdup("s");
  j.unique_key = strdup("u");
  j.max_retries = 2;
  assert_int_equal(store_job_insert(s, &j), 0);
  assert_int_equal(store_job_claim(s, "n", 1, 1000, &l), 0);
  assert_int_equal(l.n, 1);
  int64_t id = j.id;
  job_release(&j);
  job_list_release(&l);
  store_close(s);
  return id;
}

/* What kill point k left in its store: all of the end or none of it. */
static void kill_check(const char *url, int64_t id, int k) {
  char err[256];
  store_t *s = NULL;
  int64_t c[JOB_NSTATES];
  event_list_t ev = {0};
  event_filter_t all = {0};
  job_t j, u;
  assert_int_equal(store_open(url, &s, err, sizeof(err)), 0);
  /* A write comes after the dead holder's lock (Redis: its expiry). */
  assert_int_equal(store_meta_set(s, "probe", "1"), 0);
  assert_int_equal(store_job_get(s, id, &j), 0);
  assert_int_equal(store_job_counts(s, "p", c), 0);
  assert_int_equal(store_events_list(s, &all, &ev), 0);
  /* Who holds the unique key: a new job with it conflicts with the holder. */
  job_init(&u);
  u.jobid = strdup("other");
  u.project = strdup("p");
  u.spider = strdup("s");
  u.unique_key = strdup("u");
  assert_int_equal(store_job_insert(s, &u), SPD_ECONFLICT);
  if (k == KILL_COMMITTED) {
    assert_int_equal(j.state, JOB_FAILED);
    assert_int_equal(c[JOB_PENDING], 1);
    assert_int_equal(ev.n, 3); /* job.failed, job.retried, the retry's job.queued */
    assert_int_not_equal(u.id, id);
  } else {
    assert_int_equal(j.state, JOB_RUNNING);
    assert_int_equal(j.end_ms, 0);
    assert_int_equal(c[JOB_PENDING], 0);
    assert_int_equal(c[JOB_RUNNING], 1);
    assert_int_equal(c[JOB_FAILED], 0);
    assert_int_equal(ev.n, 0);
    assert_int_equal(u.id, id);
  }
  job_release(&j);
  job_release(&u);
  event_list_release(&ev);
  store_close(s);
}

static void test_killed_between_writes(void **state) {
  struct fx *f = *state;
  char url[KILL_COMMITTED + 1][600];
  int64_t id[KILL_COMMITTED + 1];
  pid_t pid[KILL_COMMITTED + 1];
  for (int k = 1; k <= KILL_COMMITTED; k++) {
    kill_url(f, k, url[k], sizeof(url[k]));
    id[k] = kill_job(url[k]);
  }
  for (int k = 1; k <= KILL_COMMITTED; k++) {
    pid[k] = fork();
    assert_true(pid[k] >= 0);
    if (pid[k] == 0) kill_child(url[k], id[k], k);
  }
  for (int k = 1; k <= KILL_COMMITTED; k++) {
    int st = 0;
    assert_int_equal(waitpid(pid[k], &st, 0), pid[k]);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  }
  for (int k = 1; k <= KILL_COMMITTED; k++) kill_check(url[k], id[k], k);
}

/* Redis: a holder stalled past its lock's expiry finds its transaction
 * rolled back by the next writer, and its commit fails. */
static void test_stalled_holder_rolled_back(void **state) {
  struct fx *f = *state;
  char url[600], err[256];
  if (strncmp(f->url, "redis", 5)) skip(); /* SQL: the holder keeps its lock */
  kill_url(f, 9, url, sizeof(url));
  int64_t id = kill_job(url);
  store_t *a = NULL, *b = NULL;
  job_t j;
  assert_int_equal(store_open(url, &a, err, sizeof(err)), 0);
  assert_int_equal(store_tx_begin(a), 0);
  assert_int_equal(store_job_finish(a, id, JOB_FAILED, 2000, 1, 0, NULL), 0);
  struct timespec ts = {5, 600 * 1000 * 1000}; /* the lock's 5 s, and some */
  nanosleep(&ts, NULL);
  assert_int_equal(store_open(url, &b, err, sizeof(err)), 0);
  assert_int_equal(store_meta_set(b, "probe", "1"), 0);
  assert_int_equal(store_job_get(b, id, &j), 0);
  assert_int_equal(j.state, JOB_RUNNING);
  job_release(&j);
  assert_int_equal(store_job_finish(a, id, JOB_FINISHED, 3000, 0, 0, NULL), SPD_ESTORE);
  assert_int_equal(store_tx_commit(a), SPD_ESTORE);
  assert_int_equal(store_job_get(a, id, &j), 0);
  assert_int_equal(j.state, JOB_RUNNING);
  job_release(&j);
  /* the connection goes on: a new transaction commits */
  assert_int_equal(store_tx_begin(a), 0);
  assert_int_equal(store_job_finish(a, id, JOB_FINISHED, 3000, 0, 0, NULL), 0);
  assert_int_equal(store_tx_commit(a), 0);
  assert_int_equal(store_job_get(b, id, &j), 0);
  assert_int_equal(j.state, JOB_FINISHED);
  job_release(&j);
  store_close(a);
  store_close(b);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_order_and_threads),  T(test_chain),       T(test_failing_op_isolated),
      T(test_broken_tx_fails_batch), T(test_stop_drains), T(test_bad_calls),
      T(test_eagain_retried),     T(test_eagain_gives_up), T(test_eagain_in_batch),
      T(test_killed_between_writes), T(test_stalled_holder_rolled_back),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
