/* run/launcher.c's own logic, without a daemon: the runner's command line
 * as Scrapyd builds it, the items feed URL, pruning a job directory, and
 * the claim under [concurrency] limits on a real store (SQLite in a
 * temporary directory, or SPIDERD_TEST_STORE_URL). The .c is included for
 * its statics (the project's convention). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "run/launcher.c"
#include "store_fx.h"

static job_t job_of(const char *project, const char *spider, const char *jobid) {
  job_t j;
  job_init(&j);
  j.project = strdup(project);
  j.spider = strdup(spider);
  j.jobid = strdup(jobid);
  return j;
}

/* Scrapyd's order: the interpreter and runner, the spider, the user's
 * settings with Scrapyd's replacing theirs in place, then _job, the
 * arguments in the order sent, and _version. */
static void test_build_argv(void **state) {
  (void)state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.python = "/usr/bin/python3";
  launcher_t l = {.cfg = &cfg};
  job_t j = job_of("p", "s", "j1");
  j.version = strdup("1.0");
  j.settings = json_pack("{s:s, s:s, s:i}", "DOWNLOAD_DELAY", "2", "LOG_FILE", "mine.log",
                         "DEPTH_LIMIT", 3);
  j.args = json_pack("{s:s, s:s}", "zeta", "1", "alpha", "a b");
  strv_t argv = {0};
  assert_int_equal(build_argv(&l, &j, NULL, "/l/j1.log", "file:///i/j1.jl", "/jobs/p/s/j1", &argv), 0);
  const char *want[] = {"/usr/bin/python3", "-m", "spiderd_runner", "crawl", "s",
                        "-s", "DOWNLOAD_DELAY=2", "-s", "LOG_FILE=/l/j1.log",
                        "-s", "DEPTH_LIMIT=3",
                        "-s", "FEEDS={\"file:///i/j1.jl\": {\"format\": \"jsonlines\"}}",
                        "-s", "JOBDIR=/jobs/p/s/j1",
                        "-a", "_job=j1", "-a", "zeta=1", "-a", "alpha=a b",
                        "-a", "_version=1.0"};
  size_t n = sizeof(want) / sizeof(want[0]);
  for (size_t i = 0; i < n && i < argv.n; i++) assert_string_equal(argv.v[i], want[i]);
  assert_int_equal(argv.n, n);
  assert_null(argv.v[n]);
  strv_release(&argv);
  /* No log, no items, no job directory, no version: none of theirs. */
  free(j.version);
  j.version = NULL;
  json_decref(j.settings);
  j.settings = NULL;
  assert_int_equal(build_argv(&l, &j, NULL, NULL, NULL, NULL, &argv), 0);
  assert_int_equal(argv.n, 5 + 2 + 4);
  assert_string_equal(argv.v[5], "-a");
  assert_string_equal(argv.v[6], "_job=j1");
  strv_release(&argv);
  job_release(&j);
}

static void test_remote_feed_uri(void **state) {
  (void)state;
  job_t j = job_of("p", "s", "j1");
  struct {
    const char *base, *want;
  } cases[] = {
      {"s3://bucket/items", "s3://bucket/items/p/s/j1.jl"},
      {"s3://bucket/items/", "s3://bucket/items/p/s/j1.jl"},
      {"ftp://h/x?user=a#f", "ftp://h/x/p/s/j1.jl?user=a#f"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *got = remote_feed_uri(cases[i].base, &j);
    assert_non_null(got);
    assert_string_equal(got, cases[i].want);
    free(got);
  }
  job_release(&j);
}

/* jobs_to_keep: the newest files stay, the rest go; subdirectories stay. */
static void test_prune_dir(void **state) {
  (void)state;
  char dir[] = "/tmp/spiderd-test-prune-XXXXXX", path[128];
  assert_non_null(mkdtemp(dir));
  for (int i = 0; i < 5; i++) {
    snprintf(path, sizeof(path), "%s/f%d.log", dir, i);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    struct timespec t[2] = {{.tv_sec = 1000 + i}, {.tv_sec = 1000 + i}};
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
  }
  snprintf(path, sizeof(path), "%s/sub", dir);
  assert_int_equal(mkdir(path, 0755), 0);
  prune_dir(dir, 2);
  for (int i = 0; i < 5; i++) {
    snprintf(path, sizeof(path), "%s/f%d.log", dir, i);
    assert_int_equal(access(path, F_OK) == 0, i >= 3);
    unlink(path);
  }
  snprintf(path, sizeof(path), "%s/sub", dir);
  assert_int_equal(rmdir(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

static int64_t add_job(store_t *s, const char *spider, job_state_t st, int64_t now) {
  static int seq;
  char jobid[32];
  snprintf(jobid, sizeof(jobid), "job%d", ++seq);
  job_t j = job_of("p", spider, jobid);
  j.state = st;
  j.created_ms = now - 1000 + seq;
  if (st == JOB_RUNNING) {
    j.start_ms = now - 500;
    j.node = strdup("other");
  }
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t id = j.id;
  job_release(&j);
  return id;
}

/* jobs_claim in a write transaction, as the launcher's op runs it. */
static int claim_in_tx(store_t *s, jobs_claim_t *op) {
  assert_int_equal(store_tx_begin(s), 0);
  int rc = jobs_claim(s, op);
  if (rc) store_tx_rollback(s);
  else assert_int_equal(store_tx_commit(s), 0);
  return rc;
}

static job_state_t state_of(store_t *s, int64_t id) {
  job_t j;
  assert_int_equal(store_job_get(s, id, &j), 0);
  job_state_t st = j.state;
  job_release(&j);
  return st;
}

/* [concurrency] p/a = 1 and p = 3: a's running job holds a's pending ones
 * back, b's run up to the project's limit, and of two a jobs that could
 * come in one claim only one is kept. */
static void test_claim_limited(void **state) {
  store_t *s = ((struct fx *)*state)->s;
  int64_t now = clock_wall_ms();
  config_limit_t limits[] = {{.project = "p", .spider = "a", .max = 1},
                             {.project = "p", .spider = NULL, .max = 3}};
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.limits = limits;
  cfg.nlimits = 2;
  cfg.eggs_dir = "/nonexistent";
  int64_t running = add_job(s, "a", JOB_RUNNING, now);
  int64_t a1 = add_job(s, "a", JOB_PENDING, now);
  int64_t b[3];
  for (int i = 0; i < 3; i++) b[i] = add_job(s, "b", JOB_PENDING, now);
  jobs_claim_t op = {.cfg = &cfg, .max = 10, .now = now, .node = "n1"};
  int rc = claim_in_tx(s, &op);
  if (rc == -ENOTSUP) { /* Redis: no claim under limits (refused at start-up) */
    job_list_release(&op.jobs);
    skip();
  }
  assert_int_equal(rc, 0);
  /* One running (a) + two of b = the project's three. */
  assert_int_equal(op.jobs.n, 2);
  for (size_t i = 0; i < op.jobs.n; i++) assert_string_equal(op.jobs.v[i].spider, "b");
  /* Two left the queue; short of max, so the store's pending count comes
   * along for the loop's. */
  assert_int_equal(op.change.unqueued, 2);
  assert_true(op.change.has_pending);
  assert_int_equal(state_of(s, a1), JOB_PENDING);
  assert_int_equal(state_of(s, b[2]), JOB_PENDING);
  job_list_release(&op.jobs);

  /* a's crawl ends: of a's pending jobs one may run, even when the claim
   * could take both; the project is full again with b's two. */
  assert_int_equal(store_job_finish(s, running, JOB_FINISHED, now, 0, 0, NULL), 0);
  int64_t a2 = add_job(s, "a", JOB_PENDING, now);
  jobs_claim_t op2 = {.cfg = &cfg, .max = 10, .now = now, .node = "n1"};
  assert_int_equal(claim_in_tx(s, &op2), 0);
  assert_int_equal(op2.jobs.n, 1);
  assert_string_equal(op2.jobs.v[0].spider, "a");
  assert_int_equal(state_of(s, op2.jobs.v[0].id == a1 ? a2 : a1), JOB_PENDING);
  assert_int_equal(state_of(s, b[2]), JOB_PENDING);
  job_list_release(&op2.jobs);
}

static int drained_calls;
static void on_drained(void *ud) { (*(int *)ud)++; }

/* A draining launcher claims nothing, even with jobs pending and slots
 * free (no claim is submitted: the launcher here has no store); its done
 * runs once, when the last crawl's end is in; undrain forgets it. */
static void test_drain(void **state) {
  (void)state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  job_counters_t counters = {.pending = 5};
  flow_hooks_t flow = {.counters = &counters};
  proc_t p = {0};
  launcher_t l = {.cfg = &cfg, .flow = &flow, .max_proc = 4,
                  .sv = {.procs = &p, .nprocs = 1, .wake = sv_wake, .settled = sv_settled}};
  drained_calls = 0;
  launcher_drain(&l, on_drained, &drained_calls);
  assert_true(launcher_draining(&l));
  launcher_dispatch(&l);
  launcher_dispatch_blind(&l);
  assert_int_equal(l.claiming, 0);
  assert_int_equal(drained_calls, 0); /* a crawl runs */
  l.sv.procs = NULL;
  l.sv.nprocs = 0;
  l.sv.ends_in_flight = 1; /* its end is not committed yet */
  launcher_maybe_stopped(&l);
  assert_int_equal(drained_calls, 0);
  l.sv.ends_in_flight = 0;
  launcher_maybe_stopped(&l);
  launcher_maybe_stopped(&l);
  assert_int_equal(drained_calls, 1);
  launcher_dispatch(&l);
  assert_int_equal(l.claiming, 0);

  /* Idle already: done at once. Undrained: done never comes, and dispatch
   * claims again (all slots taken here, so it stops short of the store). */
  launcher_drain(&l, on_drained, &drained_calls);
  assert_int_equal(drained_calls, 2);
  l.sv.procs = &p;
  l.sv.nprocs = 4;
  launcher_drain(&l, on_drained, &drained_calls);
  launcher_undrain(&l);
  assert_false(launcher_draining(&l));
  assert_int_equal(l.sv.due_check, 1); /* a blind claim: jobs queued elsewhere count */
  l.sv.procs = NULL;
  l.sv.nprocs = 4;
  launcher_maybe_stopped(&l);
  assert_int_equal(drained_calls, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_build_argv),
      cmocka_unit_test(test_remote_feed_uri),
      cmocka_unit_test(test_prune_dir),
      cmocka_unit_test(test_drain),
      cmocka_unit_test_setup_teardown(test_claim_limited, fx_setup, fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
