/* run/cluster.c's heartbeat op against a real store (SQLite in a temporary
 * directory, or SPIDERD_TEST_STORE_URL): a node's beat declares nodes whose
 * heartbeat is older than node_timeout dead, ends their running jobs as
 * lost and queues each one's retry, in the same transaction. The .c is
 * included for its store-thread functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "run/cluster.c"
#include "store_fx.h"

static void node_beats(store_t *s, cluster_t *c, const char *name, int64_t now, beat_op_t *op) {
  memset(op, 0, sizeof(*op));
  op->c = c;
  op->node = (node_info_t){.name = (char *)name, .url = "http://127.0.0.1:1", .slots = 2};
  op->now = now;
  op->reap = 1;
  assert_int_equal(beat_fn(s, op), 0);
}

/* Queues a job and has `node` claim it at `now`. */
static int64_t running_on(store_t *s, const char *node, const char *jobid, int64_t now) {
  job_t j;
  job_init(&j);
  j.jobid = strdup(jobid);
  j.project = strdup("p");
  j.spider = strdup("s");
  assert_int_equal(jobs_enqueue(s, &j, NULL, NULL), 0);
  job_list_t l = {0};
  assert_int_equal(store_job_claim(s, node, 1, now, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, j.id);
  int64_t id = j.id;
  job_list_release(&l);
  job_release(&j);
  return id;
}

static void test_dead_node_jobs_retried(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "a";
  cfg.node_timeout = 10; /* seconds */
  cluster_t c = {.cfg = &cfg, .shared = 1};
  int64_t t0 = 1000000;
  beat_op_t op;
  node_beats(s, &c, "b", t0, &op); /* b beats once, runs a job, then goes silent */
  node_beats(s, &c, "c", t0, &op);
  int64_t lost_id = running_on(s, "b", "crawl", t0);

  /* 5 s later nobody is overdue. */
  node_beats(s, &c, "a", t0 + 5000, &op);
  assert_int_equal(op.lost.n, 0);
  job_list_release(&op.lost);

  /* c keeps beating; b does not. */
  node_beats(s, &c, "c", t0 + 9000, &op);
  job_list_release(&op.lost);
  node_beats(s, &c, "a", t0 + 15000, &op);
  assert_int_equal(op.lost.n, 1);
  assert_int_equal(op.lost.v[0].id, lost_id);
  assert_int_equal(op.retried, 1);
  job_list_release(&op.lost);

  job_t j;
  assert_int_equal(store_job_get(s, lost_id, &j), 0);
  assert_int_equal(j.state, JOB_LOST);
  job_release(&j);
  job_list_t pending = {0};
  job_filter_t f = {.states = 1u << JOB_PENDING};
  assert_int_equal(store_jobs_list(s, &f, &pending), 0);
  assert_int_equal(pending.n, 1);
  assert_int_equal(pending.v[0].retry_of, lost_id);
  assert_int_equal(pending.v[0].attempt, 2);
  job_list_release(&pending);

  node_list_t nodes = {0};
  assert_int_equal(store_nodes_list(s, &nodes), 0);
  for (size_t i = 0; i < nodes.n; i++)
    assert_int_equal(nodes.v[i].dead, !strcmp(nodes.v[i].name, "b"));
  node_list_release(&nodes);

  /* b comes back: it learns it was declared dead (it must stop its crawls). */
  node_beats(s, &c, "b", t0 + 16000, &op);
  assert_true(op.was_dead);
  job_list_release(&op.lost);
}

/* A node declares others dead only once its own beats have reached the
 * store for node_timeout without a gap over half of it: after a store
 * outage every node's beat is old, its own included. */
static void test_reaping_waits_after_a_gap(void **state) {
  (void)state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "a";
  cfg.node_timeout = 10;
  cluster_t c = {.cfg = &cfg, .shared = 1};
  int64_t t = 1000000;
  assert_false(reap_allowed(&c, t)); /* no beat yet */
  for (int i = 0; i <= 10; i++) beat_written(&c, t + i * 1000);
  assert_true(reap_allowed(&c, t + 10000));
  assert_true(reap_allowed(&c, t + 14000));
  /* Beats stop reaching the store: the next beat must not reap, however
   * long this node had beaten before. */
  assert_false(reap_allowed(&c, t + 40000));
  beat_written(&c, t + 40000);
  assert_false(reap_allowed(&c, t + 41000));
  for (int i = 41; i < 50; i++) beat_written(&c, t + i * 1000);
  assert_false(reap_allowed(&c, t + 49500));
  beat_written(&c, t + 50000);
  assert_true(reap_allowed(&c, t + 50000));
  /* A gap of under half node_timeout (a slow store) does not. */
  beat_written(&c, t + 54000);
  assert_true(reap_allowed(&c, t + 54000));
}

static void test_private_store_reaps_nothing(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "a";
  cfg.node_timeout = 10;
  cluster_t c = {.cfg = &cfg, .shared = 0};
  beat_op_t op;
  node_beats(s, &c, "b", 1000, &op);
  int64_t id = running_on(s, "b", "crawl", 1000);
  node_beats(s, &c, "a", 1000000, &op);
  assert_int_equal(op.lost.n, 0);
  job_t j;
  assert_int_equal(store_job_get(s, id, &j), 0);
  assert_int_equal(j.state, JOB_RUNNING);
  job_release(&j);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_dead_node_jobs_retried),
      T(test_reaping_waits_after_a_gap),
      T(test_private_store_reaps_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
