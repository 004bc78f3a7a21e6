/* run/jobres.c's readings: a process's /proc usage, a job cgroup's
 * counters and removal (from stand-in directories: the real cgroup path
 * is test_limits.py's), the log tail's allocation failures, and the
 * defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "run/jobres.c"

static char *tmpdir(void) {
  char *d = strdup("/tmp/jobres-XXXXXX");
  assert_non_null(mkdtemp(d));
  return d;
}

static void put(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void drop(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  unlink(path);
}

static void sample_self(void **state) {
  (void)state;
  jobres_usage_t u = {0};
  /* Some memory and CPU of our own first. */
  char *m = malloc(8 << 20);
  assert_non_null(m);
  memset(m, 1, 8 << 20);
  volatile unsigned long x = 0;
  for (unsigned long i = 0; i < 50000000UL; i++) x += i;
  jobres_sample_pid(getpid(), &u);
  free(m);
  assert_true(u.sampled);
  assert_true(u.peak_rss >= 8 << 20);
  assert_true(u.peak_vm >= u.peak_rss);
  /* Peaks never go down. */
  jobres_usage_t v = u;
  v.peak_rss += 1;
  jobres_sample_pid(getpid(), &v);
  assert_true(v.peak_rss >= u.peak_rss + 1);
  /* A process that is gone leaves the usage as it was. */
  jobres_usage_t w = {0};
  jobres_sample_pid(0x3fffffff, &w);
  assert_false(w.sampled);
}

static void sample_cgroup_files(void **state) {
  (void)state;
  char *d = tmpdir();
  put(d, "memory.peak", "123456789\n");
  put(d, "cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
  put(d, "memory.events", "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n");
  put(d, "pids.events", "max 3\n");
  jobres_usage_t u = {0};
  jobres_sample_cgroup(d, &u);
  assert_true(u.sampled);
  assert_int_equal(u.peak_rss, 123456789);
  assert_int_equal(u.cpu_ms, 2500);
  assert_int_equal(u.oom_kills, 1); /* not oom_group_kill, not "oom" */
  assert_int_equal(u.pids_max_hits, 3);
  /* An older kernel without memory.peak: the CPU still counts. */
  drop(d, "memory.peak");
  jobres_usage_t v = {0};
  jobres_sample_cgroup(d, &v);
  assert_true(v.sampled);
  assert_int_equal(v.peak_rss, 0);
  drop(d, "cpu.stat");
  drop(d, "memory.events");
  drop(d, "pids.events");
  rmdir(d);
  free(d);
}

static void cgroup_needs_the_mechanism(void **state) {
  (void)state;
  jobres_t r = {.mech = LIMITS_RLIMIT};
  job_limits_t lim = {.memory = 1 << 30};
  assert_null(jobres_cgroup_create(&r, 7, &lim, getpid()));
  jobres_cgroup_remove(&r, NULL); /* nothing to do */
}

/* A job cgroup that still holds something when its crawl ends (here a
 * stand-in directory holding a file) is kept and removed by a later reap,
 * once empty; an absent one is not kept. */
static void a_busy_cgroup_is_reaped_later(void **state) {
  (void)state;
  char *d = tmpdir();
  jobres_t r = {.mech = LIMITS_CGROUP};
  put(d, "pid", "1\n");
  jobres_cgroup_remove(&r, d);
  assert_int_equal(r.ngraves, 1);
  assert_string_equal(r.graves[0], d);
  jobres_reap(&r);
  assert_int_equal(r.ngraves, 1); /* still busy */
  drop(d, "pid");
  jobres_reap(&r);
  assert_int_equal(r.ngraves, 0);
  assert_int_equal(access(d, F_OK), -1);
  jobres_cgroup_remove(&r, d); /* gone already */
  assert_int_equal(r.ngraves, 0);
  jobres_release(&r);
  free(d);
}

/* A cgroup is the daemon's only when no other process is in it. */
static void a_cgroup_shared_with_others_is_not_ours(void **state) {
  (void)state;
  char *d = tmpdir(), mine[64];
  snprintf(mine, sizeof(mine), "%d\n", (int)getpid());
  put(d, "cgroup.procs", mine);
  assert_true(cgroup_is_ours(d));
  put(d, "cgroup.procs", "");
  assert_true(cgroup_is_ours(d)); /* empty: moved out already */
  snprintf(mine, sizeof(mine), "%d\n1\n", (int)getpid());
  put(d, "cgroup.procs", mine);
  assert_false(cgroup_is_ours(d));
  drop(d, "cgroup.procs");
  assert_false(cgroup_is_ours(d)); /* unreadable */
  rmdir(d);
  free(d);
}

static void log_tail(void **state) {
  (void)state;
  char *d = tmpdir();
  char path[512];
  snprintf(path, sizeof(path), "%s/job.log", d);
  assert_false(jobres_log_says_oom(path)); /* no log */
  assert_false(jobres_log_says_oom(NULL));
  put(d, "job.log", "2026 [scrapy] INFO: Spider opened\nall fine\n");
  assert_false(jobres_log_says_oom(path));
  put(d, "job.log", "Traceback (most recent call last):\n  ...\nMemoryError\n");
  assert_true(jobres_log_says_oom(path));
  /* Only the tail is read: an old MemoryError 20 KB before the end is not it. */
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("MemoryError\n", f);
  for (int i = 0; i < 20000; i++) fputc(i % 64 ? 'x' : '\n', f);
  fclose(f);
  assert_false(jobres_log_says_oom(path));
  f = fopen(path, "a");
  fputc('\0', f); /* a NUL does not hide what follows */
  fputs("OSError: [Errno 12] Cannot allocate memory\n", f);
  fclose(f);
  assert_true(jobres_log_says_oom(path));
  unlink(path);
  rmdir(d);
  free(d);
}

static void defaults_and_off(void **state) {
  (void)state;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.job_memory_limit = 512LL << 20;
  cfg.job_cpu_limit = 1.2;
  cfg.job_max_procs = 9;
  cfg.job_log_limit = 1000;
  cfg.job_items_limit = 2000;
  job_limits_t d;
  jobres_defaults(&cfg, &d);
  assert_int_equal(d.memory, 512LL << 20);
  assert_int_equal(d.cpu_s, 2);
  assert_int_equal(d.procs, 9);
  assert_int_equal(d.log, 1000);
  assert_int_equal(d.items, 2000);
  /* off: nothing is looked for, nothing enforced by the kernel. */
  cfg.job_limits = "off";
  jobres_t r;
  assert_int_equal(jobres_init(&r, &cfg), 0);
  assert_int_equal(r.mech, LIMITS_NONE);
  jobres_release(&r);
  /* rlimit: prlimit is found (util-linux is on every Debian). */
  cfg.job_limits = "rlimit";
  assert_int_equal(jobres_init(&r, &cfg), 0);
  assert_int_equal(r.mech, LIMITS_RLIMIT);
  assert_non_null(strstr(r.prlimit, "prlimit"));
  jobres_release(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sample_self),
      cmocka_unit_test(sample_cgroup_files),
      cmocka_unit_test(cgroup_needs_the_mechanism),
      cmocka_unit_test(a_busy_cgroup_is_reaped_later),
      cmocka_unit_test(a_cgroup_shared_with_others_is_not_ours),
      cmocka_unit_test(log_tail),
      cmocka_unit_test(defaults_and_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
