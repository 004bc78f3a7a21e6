/* run/supervise.c's end of a crawl, the store-thread step (end_fn), without
 * a daemon, against a real store (SQLite in a temporary directory, or
 * SPIDERD_TEST_STORE_URL): the state a crawl's stats file says, the end
 * reason kept beside the runner's stats, a late end on a shared store that
 * another node has already ended, and finished_to_keep. The .c is included
 * for its statics (the project's convention). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "run/supervise.c"
#include "store_fx.h"

static int64_t add_running(store_t *s, const char *jobid, const char *node) {
  return fx_job(s, jobid, "p", "s", JOB_RUNNING, node, clock_wall_ms() - 1000, 0);
}

static job_t get(store_t *s, int64_t id) { return fx_get(s, id); }

/* An end as supervise_end fills it, for job id (its identity fields). */
static end_op_t end_of(supervisor_t *l, store_t *s, int64_t id) {
  end_op_t op = {.sv = l, .state = JOB_FINISHED, .end_ms = clock_wall_ms()};
  op.job = get(s, id);
  return op;
}

/* Frees what end_of and write_stats gave op (end_op_free frees op too). */
static void end_release(end_op_t *op) {
  json_decref(op->stats); /* what end_fn read, kept for a retried write */
  job_release(&op->job);
  free(op->stats_path);
}

/* dir/name, with json in it unless json is NULL. */
static char *write_stats(const char *dir, const char *name, const char *json) {
  char *path = NULL;
  assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
  if (!json) return path;
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(json, f);
  fclose(f);
  return path;
}

/* A crawl that ended on its own: its stats file says how. */
static void test_state_from_stats(void **state) {
  struct fx *f = *state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "n1";
  supervisor_t l = {.cfg = &cfg};
  struct {
    const char *stats; /* NULL: no file (the runner died before writing it) */
    job_state_t want;
  } cases[] = {
      {"{\"finish_reason\": \"finished\", \"item_scraped_count\": 3}", JOB_FINISHED},
      {"{\"finish_reason\": \"shutdown\"}", JOB_FAILED},
      {NULL, JOB_LOST},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char jobid[16];
    snprintf(jobid, sizeof(jobid), "j%zu", i);
    int64_t id = add_running(f->s, jobid, "n1");
    end_op_t op = end_of(&l, f->s, id);
    op.from_stats = 1;
    op.stats_path = write_stats(f->dir, jobid, cases[i].stats);
    assert_int_equal(end_fn(f->s, &op), 0);
    assert_int_equal(op.state, cases[i].want);
    assert_int_equal(access(op.stats_path, F_OK), -1); /* read once, then gone */
    job_t j = get(f->s, id);
    assert_int_equal(j.state, cases[i].want);
    if (i == 0)
      assert_int_equal(json_integer_value(json_object_get(j.stats, "item_scraped_count")), 3);
    job_release(&j);
    end_release(&op);
  }
}

/* A crawl the daemon stopped (timeout, lost heartbeat): the reason goes
 * into its stats beside the runner's, never over them. */
static void test_end_reason(void **state) {
  struct fx *f = *state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "n1";
  supervisor_t l = {.cfg = &cfg};
  int64_t id = add_running(f->s, "slow", "n1");
  end_op_t op = end_of(&l, f->s, id);
  op.state = JOB_FAILED;
  op.term_signal = SIGKILL;
  op.end_reason = "timeout";
  op.stats_path = write_stats(f->dir, "slow", "{\"finish_reason\": \"finished\"}");
  assert_int_equal(end_fn(f->s, &op), 0);
  job_t j = get(f->s, id);
  assert_int_equal(j.state, JOB_FAILED);
  assert_int_equal(j.term_signal, SIGKILL);
  assert_string_equal(json_string_value(json_object_get(j.stats, "end_reason")), "timeout");
  assert_string_equal(json_string_value(json_object_get(j.stats, "finish_reason")), "finished");
  job_release(&j);
  end_release(&op);
}

/* Under a memory rlimit a failed crawl whose log reports a MemoryError
 * ended at its limit; every crawl seen by the sweep gets its peak memory
 * and CPU time in its stats, and the runner's own larger value stays. */
static void test_limit_end(void **state) {
  struct fx *f = *state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "n1";
  supervisor_t l = {.cfg = &cfg};
  int64_t id = add_running(f->s, "hog", "n1");
  end_op_t op = end_of(&l, f->s, id);
  op.state = JOB_FAILED;
  op.exit_code = 1;
  op.has_usage = 1;
  op.usage = (supervise_usage_t){.mech = LIMITS_RLIMIT, .limits = {.memory = 1 << 30},
                                 .usage = {.sampled = 1, .peak_rss = 5000, .cpu_ms = 1500}};
  op.log_path = write_stats(f->dir, "hog.log", "Traceback (most recent call last):\nMemoryError\n");
  assert_int_equal(end_fn(f->s, &op), 0);
  job_t j = get(f->s, id);
  assert_int_equal(j.state, JOB_FAILED);
  assert_string_equal(json_string_value(json_object_get(j.stats, "end_reason")), "memory_limit");
  assert_int_equal(json_integer_value(json_object_get(j.stats, "peak_memory_bytes")), 5000);
  assert_true(json_number_value(json_object_get(j.stats, "cpu_time_seconds")) == 1.5);
  job_release(&j);
  end_release(&op);
  free(op.log_path);

  /* Finished: no reason; the runner measured more than the last sweep saw. */
  id = add_running(f->s, "ok", "n1");
  op = end_of(&l, f->s, id);
  op.has_usage = 1;
  op.usage = (supervise_usage_t){.mech = LIMITS_RLIMIT, .limits = {.memory = 1 << 30},
                                 .usage = {.sampled = 1, .peak_rss = 5000, .cpu_ms = 1500}};
  op.stats_path = write_stats(f->dir, "ok", "{\"finish_reason\": \"finished\", "
                              "\"peak_memory_bytes\": 9000, \"cpu_time_seconds\": 0.5}");
  assert_int_equal(end_fn(f->s, &op), 0);
  j = get(f->s, id);
  assert_int_equal(j.state, JOB_FINISHED);
  assert_null(json_object_get(j.stats, "end_reason"));
  assert_int_equal(json_integer_value(json_object_get(j.stats, "peak_memory_bytes")), 9000);
  assert_true(json_number_value(json_object_get(j.stats, "cpu_time_seconds")) == 1.5);
  job_release(&j);
  end_release(&op);

  /* Failed with no limit that explains it: failed, no reason. */
  id = add_running(f->s, "plain", "n1");
  op = end_of(&l, f->s, id);
  op.state = JOB_FAILED;
  op.has_usage = 1;
  op.usage = (supervise_usage_t){.mech = LIMITS_RLIMIT};
  assert_int_equal(end_fn(f->s, &op), 0);
  j = get(f->s, id);
  assert_null(json_object_get(j.stats, "end_reason"));
  job_release(&j);
  end_release(&op);
}

/* On a shared store a node's late end of a job another node has already
 * ended (its node was declared dead) changes nothing. */
static void test_ended_elsewhere(void **state) {
  struct fx *f = *state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "n1";
  supervisor_t l = {.cfg = &cfg, .shared = 1};
  int64_t id = add_running(f->s, "moved", "n1");
  end_op_t first = end_of(&l, f->s, id);
  first.state = JOB_LOST;
  assert_int_equal(store_job_finish(f->s, id, JOB_LOST, first.end_ms, -1, 0, NULL), 0);
  end_release(&first);
  end_op_t late = end_of(&l, f->s, id);
  late.state = JOB_FINISHED;
  assert_int_equal(end_fn(f->s, &late), 0);
  assert_true(late.ended_elsewhere);
  job_t j = get(f->s, id);
  assert_int_equal(j.state, JOB_LOST);
  job_release(&j);
  end_release(&late);
  /* Running on another node: not this node's to end either. */
  int64_t other = add_running(f->s, "theirs", "n2");
  end_op_t op = end_of(&l, f->s, other);
  assert_int_equal(end_fn(f->s, &op), 0);
  assert_true(op.ended_elsewhere);
  j = get(f->s, other);
  assert_int_equal(j.state, JOB_RUNNING);
  job_release(&j);
  end_release(&op);
}

/* finished_to_keep: the oldest ended jobs go, and the end reports the
 * count left for the loop's counters. */
static void test_finished_to_keep(void **state) {
  struct fx *f = *state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.node_name = "n1";
  cfg.finished_to_keep = 2;
  supervisor_t l = {.cfg = &cfg};
  int64_t ids[4];
  for (int i = 0; i < 4; i++) {
    char jobid[16];
    snprintf(jobid, sizeof(jobid), "k%d", i);
    ids[i] = add_running(f->s, jobid, "n1");
    end_op_t op = end_of(&l, f->s, ids[i]);
    op.end_ms = clock_wall_ms() + i; /* in order */
    assert_int_equal(end_fn(f->s, &op), 0);
    assert_int_equal(op.change.has_finished, i >= 2);
    if (i >= 2) assert_int_equal(op.change.finished_count, 2);
    end_release(&op);
  }
  job_t j;
  assert_int_equal(store_job_get(f->s, ids[0], &j), -ENOENT);
  job_release(&j);
  j = get(f->s, ids[3]);
  assert_int_equal(j.state, JOB_FINISHED);
  job_release(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_state_from_stats, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_end_reason, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_limit_end, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_ended_elsewhere, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_finished_to_keep, fx_setup, fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
