/* A write that collides with another transaction on PostgreSQL (a real
 * deadlock, 40P01) is run again by the store pool (store/async.h) and goes
 * through, its effect recorded once, for each kind of write spiderd makes:
 * a job's insert, a claim, a job's end, a scheduler tick, a webhook cursor,
 * a janitor delete, a queue put and an auth change.
 *
 * The collision is made, not hoped for: a second libpq connection takes a
 * table lock the op needs, waits until the op queues behind it, and then
 * asks for a lock the op's transaction holds. The op started waiting first,
 * so its backend finds the cycle first (after deadlock_timeout, 1 s; this
 * connection's is 30 s) and is the one PostgreSQL rolls back. Two shapes:
 *  - alone: the op's own first statement holds the lock (rows of jobs, so
 *    RowExclusiveLock on the table) and the second connection holds events,
 *    which the op writes next; the op is its own transaction.
 *  - in a batch: the op shares the group commit's transaction with an op
 *    before it that holds a meta row; the second connection holds the
 *    op's table and then wants that row. The op alone is rolled back to its
 *    savepoint, the batch commits, and the op runs again on its own.
 *
 * Needs SPIDERD_TEST_STORE_URL naming a PostgreSQL store ("{}" replaced per
 * test, as in test_store.c); skipped on any other store. */
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <postgresql/libpq-fe.h>

#include "clock.h"
#include "error.h"
#include "flow/jobs.h"
#include "store/async.h"

struct fx {
  char dir[256];
  char url[512];
  char conninfo[512]; /* the URL without spiderd's schema= */
  char schema[128];
  uv_loop_t loop;
  store_pool_t *pool;
  store_t *s; /* for setting up and checking, outside the pool */
};

static int fx_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* Splits "...?a=1&schema=x&b=2" into conninfo "...?a=1&b=2" and schema x. */
static void split_url(struct fx *f) {
  const char *q = strchr(f->url, '?');
  size_t n = q ? (size_t)(q - f->url) : strlen(f->url);
  snprintf(f->conninfo, sizeof(f->conninfo), "%.*s", (int)n, f->url);
  char sep = '?';
  for (const char *p = q ? q + 1 : NULL; p && *p;) {
    size_t len = strcspn(p, "&");
    if (!strncmp(p, "schema=", 7)) {
      snprintf(f->schema, sizeof(f->schema), "%.*s", (int)(len - 7), p + 7);
    } else {
      size_t at = strlen(f->conninfo);
      snprintf(f->conninfo + at, sizeof(f->conninfo) - at, "%c%.*s", sep, (int)len, p);
      sep = '&';
    }
    p += len + (p[len] == '&');
  }
}

static int fx_setup(void **state) {
  const char *tmpl = getenv("SPIDERD_TEST_STORE_URL");
  if (!tmpl || strncmp(tmpl, "postgres", 8)) {
    *state = NULL;
    return 0;
  }
  struct fx *f = calloc(1, sizeof(*f));
  char err[256];
  assert_non_null(f);
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof(f->dir), "%s/spiderd-test-retry-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(f->dir));
  const char *hole = strstr(tmpl, "{}");
  if (!hole)
    snprintf(f->url, sizeof(f->url), "%s", tmpl);
  else
    snprintf(f->url, sizeof(f->url), "%.*s%s%s", (int)(hole - tmpl), tmpl,
             strrchr(f->dir, '-') + 1, hole + 2);
  split_url(f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  int rc = store_pool_start(&f->loop, f->url, &f->pool, err, sizeof(err));
  if (rc) fail_msg("store_pool_start(%s): %s", f->url, err);
  if ((rc = store_open(f->url, &f->s, err, sizeof(err)))) fail_msg("store_open: %s", err);
  /* The row the batch's first op holds. */
  assert_int_equal(store_meta_set(f->s, "retry.hold", "-"), 0);
  *state = f;
  return 0;
}

static int fx_teardown(void **state) {
  struct fx *f = *state;
  if (!f) return 0;
  store_close(f->s);
  store_pool_stop(f->pool);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->dir, fx_rm, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

#define NEED_PG(f)                                                                       \
  do {                                                                                   \
    if (!(f)) {                                                                          \
      print_message("skipped: SPIDERD_TEST_STORE_URL names no PostgreSQL store\n");     \
      skip();                                                                            \
    }                                                                                    \
  } while (0)

/* ---- the second connection ---- */

typedef struct locker {
  const struct fx *f;
  const char *lock_sql;  /* taken first, in its transaction */
  const char *wait_rel;  /* the table the op is seen waiting on */
  const char *close_sql; /* then: what the op's transaction holds */
  uv_sem_t locked;       /* posted once lock_sql ran (or failed) */
  uv_thread_t thread;
  int ok;
  char err[512];
} locker_t;

static int lk_exec(PGconn *c, locker_t *k, const char *sql) {
  PGresult *r = PQexec(c, sql);
  int st = PQresultStatus(r);
  int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
  if (!ok) snprintf(k->err, sizeof(k->err), "%s: %s", sql, PQresultErrorMessage(r));
  PQclear(r);
  return ok;
}

/* 1 once another backend waits, ungranted, on a lock of wait_rel. */
static int lk_waiter(PGconn *c, locker_t *k) {
  char sql[256];
  snprintf(sql, sizeof(sql),
           "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = '%s'::regclass",
           k->wait_rel);
  PGresult *r = PQexec(c, sql);
  int n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
  if (n < 0) snprintf(k->err, sizeof(k->err), "pg_locks: %s", PQresultErrorMessage(r));
  PQclear(r);
  return n;
}

static void locker_main(void *arg) {
  locker_t *k = arg;
  char sql[256];
  PGconn *c = PQconnectdb(k->f->conninfo);
  int ok = c && PQstatus(c) == CONNECTION_OK;
  if (!ok) snprintf(k->err, sizeof(k->err), "connect: %s", c ? PQerrorMessage(c) : "?");
  snprintf(sql, sizeof(sql), "SET search_path TO \"%s\"", k->f->schema);
  /* This side never finds the deadlock first: the op is the victim. */
  ok = ok && lk_exec(c, k, sql) && lk_exec(c, k, "SET deadlock_timeout = '30s'") &&
       lk_exec(c, k, "SET lock_timeout = '20s'") && lk_exec(c, k, "BEGIN") &&
       lk_exec(c, k, k->lock_sql);
  uv_sem_post(&k->locked);
  int waiting = 0;
  for (int i = 0; ok && !waiting && i < 2000; i++) {
    waiting = lk_waiter(c, k);
    if (waiting < 0) ok = 0;
    else if (!waiting) usleep(5000);
  }
  if (ok && !waiting) {
    snprintf(k->err, sizeof(k->err), "the op never waited on %s", k->wait_rel);
    ok = 0;
  }
  ok = ok && lk_exec(c, k, k->close_sql) && lk_exec(c, k, "COMMIT");
  k->ok = ok;
  PQfinish(c);
}

/* ---- ops ---- */

typedef struct top top_t;
typedef int (*body_fn)(store_t *s, top_t *o);

struct top {
  body_fn body;
  int runs;    /* how many times the pool ran it */
  int eagains; /* runs that met -EAGAIN */
  int done, rc;
  uv_sem_t *entered, *gate; /* the blocker: posts entered, waits on gate */
  /* the op's own state, kept across runs as the daemon's ops keep theirs */
  job_t job;
  job_list_t jobs;
  int64_t token;
  queue_put_t items[2];
};

static int top_fn(store_t *s, void *arg) {
  top_t *o = arg;
  o->runs++;
  if (o->entered) uv_sem_post(o->entered);
  if (o->gate) uv_sem_wait(o->gate);
  int rc = o->body ? o->body(s, o) : 0;
  if (rc == -EAGAIN) o->eagains++;
  return rc;
}

static void top_done(void *arg, int rc) {
  top_t *o = arg;
  o->done = 1;
  o->rc = rc;
}

static int hold_body(store_t *s, top_t *o) {
  (void)o;
  return store_meta_set(s, "retry.hold", "pool");
}

/* Runs o against a second connection that makes it deadlock: alone, or
 * (batch) behind an op holding the meta row "retry.hold". */
static void collide(struct fx *f, top_t *o, int batch, const char *lock_sql,
                    const char *wait_rel, const char *close_sql) {
  locker_t k = {.f = f, .lock_sql = lock_sql, .wait_rel = wait_rel, .close_sql = close_sql};
  uv_sem_t entered, gate;
  top_t blocker = {0}, holder = {.body = hold_body};
  uint64_t retries = store_pool_retries(f->pool);
  assert_int_equal(uv_sem_init(&k.locked, 0), 0);
  assert_int_equal(uv_sem_init(&entered, 0), 0);
  assert_int_equal(uv_sem_init(&gate, 0), 0);
  assert_int_equal(uv_thread_create(&k.thread, locker_main, &k), 0);
  uv_sem_wait(&k.locked);
  if (batch) {
    /* The writer sits in the blocker while the holder and o queue: they
     * then share the next batch, the holder first. */
    blocker.entered = &entered;
    blocker.gate = &gate;
    assert_int_equal(store_submit(f->pool, STORE_WRITE, top_fn, &blocker, top_done), 0);
    uv_sem_wait(&entered);
    assert_int_equal(store_submit(f->pool, STORE_WRITE, top_fn, &holder, top_done), 0);
  }
  assert_int_equal(store_submit(f->pool, STORE_WRITE, top_fn, o, top_done), 0);
  if (batch) uv_sem_post(&gate);
  while (!o->done) uv_run(&f->loop, UV_RUN_ONCE);
  uv_thread_join(&k.thread);
  if (!k.ok) fail_msg("second connection: %s", k.err);
  if (o->rc) fail_msg("the op failed: %s", spd_strerror(o->rc));
  /* It really collided, was rolled back, and ran again. */
  assert_true(o->eagains >= 1);
  assert_int_equal(o->runs, o->eagains + 1);
  assert_true(store_pool_retries(f->pool) >= retries + (uint64_t)o->eagains);
  if (batch) {
    assert_int_equal(holder.rc, 0);
    char *v = NULL;
    assert_int_equal(store_meta_get(f->s, "retry.hold", &v), 0);
    assert_string_equal(v, "conn2"); /* the holder's commit, then the second connection's */
    free(v);
  }
  uv_sem_destroy(&k.locked);
  uv_sem_destroy(&entered);
  uv_sem_destroy(&gate);
}

#define ALONE_LOCK "LOCK TABLE events IN EXCLUSIVE MODE"
#define ALONE_CLOSE "LOCK TABLE jobs IN SHARE MODE"
#define BATCH_CLOSE "UPDATE meta SET value = 'conn2' WHERE key = 'retry.hold'"

static void collide_alone(struct fx *f, top_t *o) {
  collide(f, o, 0, ALONE_LOCK, "events", ALONE_CLOSE);
}

static void collide_batch(struct fx *f, top_t *o, const char *table) {
  char sql[128];
  snprintf(sql, sizeof(sql), "LOCK TABLE %s IN EXCLUSIVE MODE", table);
  collide(f, o, 1, sql, table, BATCH_CLOSE);
}

/* ---- checks ---- */

static int64_t count_state(struct fx *f, job_state_t st) {
  int64_t c[JOB_NSTATES];
  assert_int_equal(store_job_counts(f->s, NULL, c), 0);
  return c[st];
}

static size_t count_events(struct fx *f, const char *type) {
  event_list_t l = {0};
  event_filter_t ef = {.type_prefix = type};
  assert_int_equal(store_events_list(f->s, &ef, &l), 0);
  size_t n = l.n;
  event_list_release(&l);
  return n;
}

static void job_fill(job_t *j, const char *jobid, job_state_t st) {
  job_init(j);
  j->jobid = strdup(jobid);
  j->project = strdup("p");
  j->spider = strdup("s");
  j->state = st;
  if (st != JOB_PENDING) {
    j->node = strdup("n1");
    j->start_ms = clock_wall_ms() - 1000;
  }
  if (job_state_final(st)) j->end_ms = clock_wall_ms() - 500;
}

static int64_t insert_job(struct fx *f, const char *jobid, job_state_t st) {
  job_t j;
  job_fill(&j, jobid, st);
  assert_int_equal(store_job_insert(f->s, &j), 0);
  int64_t id = j.id;
  job_release(&j);
  return id;
}

/* ---- the kinds of write ---- */

/* schedule.json, the REST enqueue: the job and its job.queued. */
static int enqueue_body(store_t *s, top_t *o) { return jobs_enqueue(s, &o->job, NULL, NULL); }

static void test_job_insert(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  top_t o = {.body = enqueue_body};
  job_fill(&o.job, "ins-1", JOB_PENDING);
  collide_alone(f, &o);
  assert_true(o.job.id > 0);
  assert_int_equal(count_state(f, JOB_PENDING), 1);
  assert_int_equal(count_events(f, "job.queued"), 1);
  job_t got;
  assert_int_equal(store_job_get(f->s, o.job.id, &got), 0);
  assert_string_equal(got.jobid, "ins-1");
  job_release(&got);
  job_release(&o.job);
}

/* The same on a connection that has its statements prepared already: the
 * deadlock meets the INSERT itself, not its PREPARE. */
static void test_job_insert_prepared(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  top_t warm = {.body = enqueue_body}, o = {.body = enqueue_body};
  job_fill(&warm.job, "warm-1", JOB_PENDING);
  assert_int_equal(store_submit(f->pool, STORE_WRITE, top_fn, &warm, top_done), 0);
  while (!warm.done) uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(warm.rc, 0);
  job_fill(&o.job, "ins-3", JOB_PENDING);
  collide_alone(f, &o);
  assert_int_equal(count_state(f, JOB_PENDING), 2);
  assert_int_equal(count_events(f, "job.queued"), 2);
  job_release(&warm.job);
  job_release(&o.job);
}

/* The same, in a batch behind another write. */
static void test_job_insert_batched(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  top_t o = {.body = enqueue_body};
  job_fill(&o.job, "ins-2", JOB_PENDING);
  collide_batch(f, &o, "jobs");
  assert_int_equal(count_state(f, JOB_PENDING), 1);
  assert_int_equal(count_events(f, "job.queued"), 1);
  job_release(&o.job);
}

/* The launcher's claim: each run starts with an empty list. */
static int claim_body(store_t *s, top_t *o) {
  job_list_release(&o->jobs);
  memset(&o->jobs, 0, sizeof(o->jobs));
  int rc = store_claim_lock(s);
  return rc ? rc : store_job_claim(s, "n1", 10, clock_wall_ms(), &o->jobs);
}

static void test_claim(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  for (int i = 0; i < 3; i++) {
    char id[16];
    snprintf(id, sizeof(id), "cl-%d", i);
    insert_job(f, id, JOB_PENDING);
  }
  top_t o = {.body = claim_body};
  collide_batch(f, &o, "jobs");
  assert_int_equal(o.jobs.n, 3);
  for (size_t i = 0; i < o.jobs.n; i++) assert_int_equal(o.jobs.v[i].state, JOB_RUNNING);
  assert_int_equal(count_state(f, JOB_RUNNING), 3);
  assert_int_equal(count_state(f, JOB_PENDING), 0);
  job_list_release(&o.jobs);
}

/* supervise's end of a failed crawl with a retry left: finished, its
 * job.failed, and one retry with its job.retried. */
static int end_body(store_t *s, top_t *o) {
  jobs_end_t e = {.job = &o->job, .state = JOB_FAILED, .end_ms = clock_wall_ms(),
                  .exit_code = 1, .rnd = 7};
  return jobs_end(s, &e);
}

static void test_job_end(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  top_t o = {.body = end_body};
  job_fill(&o.job, "end-1", JOB_RUNNING);
  o.job.max_retries = 1;
  o.job.attempt = 1;
  assert_int_equal(store_job_insert(f->s, &o.job), 0);
  collide_alone(f, &o);
  job_t got;
  assert_int_equal(store_job_get(f->s, o.job.id, &got), 0);
  assert_int_equal(got.state, JOB_FAILED);
  job_release(&got);
  assert_int_equal(count_events(f, "job.failed"), 1);
  assert_int_equal(count_events(f, "job.retried"), 1);
  assert_int_equal(count_state(f, JOB_PENDING), 1); /* the retry, once */
  job_release(&o.job);
}

/* A scheduler tick: the lease, fenced in the tick's transaction, and the
 * job a due run fires. */
static int tick_body(store_t *s, top_t *o) {
  int rc = store_lease_acquire(s, "scheduler", "n1", clock_wall_ms(), 30000, &o->token);
  return rc ? rc : jobs_enqueue(s, &o->job, json_pack("{s:s}", "schedule", "every-minute"), NULL);
}

static void test_scheduler_tick(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  top_t o = {.body = tick_body};
  job_fill(&o.job, "tick-1", JOB_PENDING);
  collide_batch(f, &o, "leases");
  char *holder = NULL;
  int64_t token = 0, expires = 0;
  assert_int_equal(store_lease_get(f->s, "scheduler", &holder, &token, &expires), 0);
  assert_string_equal(holder, "n1");
  assert_int_equal(token, o.token);
  free(holder);
  assert_int_equal(count_state(f, JOB_PENDING), 1);
  assert_int_equal(count_events(f, "job.queued"), 1);
  job_release(&o.job);
}

/* The webhooks' record of what was delivered: the cursor, fenced by the
 * lease. */
static int cursor_body(store_t *s, top_t *o) {
  int rc = store_lease_acquire(s, "webhooks", "n1", clock_wall_ms(), 30000, &o->token);
  return rc ? rc : store_meta_set(s, "webhooks.cursor", "42");
}

static void test_webhook_cursor(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  top_t o = {.body = cursor_body};
  collide_batch(f, &o, "leases");
  char *v = NULL;
  assert_int_equal(store_meta_get(f->s, "webhooks.cursor", &v), 0);
  assert_string_equal(v, "42");
  free(v);
}

/* The janitor's delete: each run starts with an empty list. */
static int prune_body(store_t *s, top_t *o) {
  job_list_release(&o->jobs);
  memset(&o->jobs, 0, sizeof(o->jobs));
  int rc = store_lease_acquire(s, "janitor", "n1", clock_wall_ms(), 30000, &o->token);
  return rc ? rc : store_jobs_prune(s, NULL, 0, 1, 0, 100, &o->jobs);
}

static void test_janitor_delete(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  for (int i = 0; i < 3; i++) {
    char id[16];
    snprintf(id, sizeof(id), "old-%d", i);
    insert_job(f, id, JOB_FINISHED);
  }
  top_t o = {.body = prune_body};
  collide_batch(f, &o, "jobs");
  assert_int_equal(o.jobs.n, 2);
  assert_int_equal(count_state(f, JOB_FINISHED), 1);
  job_list_release(&o.jobs);
}

/* A queue put (the queue made by it). */
static int put_body(store_t *s, top_t *o) {
  return store_queue_put(s, "q1", o->items, 2, clock_wall_ms());
}

static void test_queue_put(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  top_t o = {.body = put_body};
  o.items[0] = (queue_put_t){.element = "a", .len = 1};
  o.items[1] = (queue_put_t){.element = "b", .len = 1};
  collide_batch(f, &o, "queue_items");
  queue_stats_t st;
  memset(&st, 0, sizeof(st));
  assert_int_equal(store_queue_stats(f->s, "q1", clock_wall_ms(), &st), 0);
  assert_int_equal(st.waiting, 2);
  queue_item_list_t got = {0};
  assert_int_equal(store_queue_take(f->s, "q1", 10, 60000, clock_wall_ms(), &got, NULL), 0);
  assert_int_equal(got.n, 2);
  queue_item_list_release(&got);
}

/* An auth change: the user, and a new auth generation for every node. */
static int user_body(store_t *s, top_t *o) {
  (void)o;
  principal_t p = {.kind = PRINCIPAL_USER, .name = "alice", .secret = "x", .role = ROLE_READ};
  return store_principal_put(s, &p);
}

static void test_auth_change(void **state) {
  struct fx *f = *state;
  NEED_PG(f);
  char *gen0 = NULL, *gen1 = NULL;
  store_auth_gen(f->s, &gen0);
  top_t o = {.body = user_body};
  collide_batch(f, &o, "principals");
  principal_list_t l = {0};
  assert_int_equal(store_principals_list(f->s, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].name, "alice");
  principal_list_release(&l);
  assert_int_equal(store_auth_gen(f->s, &gen1), 0);
  assert_true(!gen0 || strcmp(gen0, gen1));
  free(gen0);
  free(gen1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_job_insert),  T(test_job_insert_prepared), T(test_job_insert_batched),
      T(test_claim),
      T(test_job_end),     T(test_scheduler_tick),     T(test_webhook_cursor),
      T(test_janitor_delete), T(test_queue_put),       T(test_auth_change),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
