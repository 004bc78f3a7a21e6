/* The pure pieces of per-job resource limits (core/limits.h): sizes, a
 * job's own values over the defaults, prlimit's options, what an end under
 * limits means, and reading /proc/self/cgroup and cgroup.controllers. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/limits.h"

static void sizes(void **state) {
  (void)state;
  int64_t v = -1;
  assert_int_equal(limits_parse_size("0", &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(limits_parse_size("1048576", &v), 0);
  assert_int_equal(v, 1048576);
  assert_int_equal(limits_parse_size("512M", &v), 0);
  assert_int_equal(v, 512LL << 20);
  assert_int_equal(limits_parse_size(" 2g ", &v), 0);
  assert_int_equal(v, 2LL << 30);
  assert_int_equal(limits_parse_size("64k", &v), 0);
  assert_int_equal(v, 65536);
  assert_int_equal(limits_parse_size("", &v), -EINVAL);
  assert_int_equal(limits_parse_size("M", &v), -EINVAL);
  assert_int_equal(limits_parse_size("-1", &v), -EINVAL);
  assert_int_equal(limits_parse_size("1.5G", &v), -EINVAL);
  assert_int_equal(limits_parse_size("12T", &v), -EINVAL);
  assert_int_equal(limits_parse_size("99999999999G", &v), -ERANGE);
  assert_int_equal(limits_parse_size("99999999999999999999", &v), -ERANGE);
}

static void args_by_kind(void **state) {
  (void)state;
  char why[256];
  int64_t v = 0;
  assert_int_equal(limits_parse_arg("_cpu_limit", "2.5", &v, why, sizeof(why)), 0);
  assert_int_equal(v, 3); /* whole seconds, rounded up */
  assert_int_equal(limits_parse_arg("_cpu_limit", "abc", &v, why, sizeof(why)), -EINVAL);
  assert_non_null(strstr(why, "_cpu_limit is invalid"));
  assert_int_equal(limits_parse_arg("_max_procs", "64", &v, why, sizeof(why)), 0);
  assert_int_equal(v, 64);
  assert_int_equal(limits_parse_arg("_max_procs", "6.4", &v, why, sizeof(why)), -EINVAL);
  assert_int_equal(limits_parse_arg("_log_limit", "10M", &v, why, sizeof(why)), 0);
  assert_int_equal(v, 10LL << 20);
  assert_int_equal(limits_parse_arg("_memory_limit", "lots", &v, why, sizeof(why)), -EINVAL);
  assert_non_null(strstr(why, "_memory_limit is invalid"));
  assert_true(limits_is_arg("_items_limit"));
  assert_false(limits_is_arg("_timeout"));
  assert_false(limits_is_arg("memory_limit"));
}

static void own_values_over_defaults(void **state) {
  (void)state;
  char why[256];
  job_limits_t def = {.memory = 1 << 30, .cpu_s = 60, .procs = 0, .log = 1000, .items = 0};
  job_limits_t out;
  json_t *args = json_pack("{s:s, s:s, s:i, s:s, s:s}", "_memory_limit", "256M", "_log_limit",
                           "0", "_max_procs", 8, "_cpu_limit", "1.2", "url", "http://x");
  assert_int_equal(limits_resolve(args, &def, &out, why, sizeof(why)), 0);
  assert_int_equal(out.memory, 256LL << 20);
  assert_int_equal(out.log, 1000); /* 0 = the default, as _timeout */
  assert_int_equal(out.procs, 8);  /* a JSON number works too */
  assert_int_equal(out.cpu_s, 2);
  assert_int_equal(out.items, 0);
  json_decref(args);

  assert_int_equal(limits_resolve(NULL, &def, &out, why, sizeof(why)), 0);
  assert_memory_equal(&out, &def, sizeof(def));
  assert_int_equal(limits_resolve(NULL, NULL, &out, why, sizeof(why)), 0);
  assert_false(limits_kernel(&out));

  args = json_pack("{s:s}", "_items_limit", "big");
  assert_int_equal(limits_resolve(args, &def, &out, why, sizeof(why)), -EINVAL);
  assert_non_null(strstr(why, "_items_limit"));
  json_decref(args);
  args = json_pack("{s:b}", "_log_limit", 1);
  assert_int_equal(limits_resolve(args, &def, &out, why, sizeof(why)), -EINVAL);
  json_decref(args);
}

static void prlimit_options(void **state) {
  (void)state;
  char o[3][LIMITS_OPT_MAX];
  job_limits_t lim = {0};
  assert_int_equal(limits_prlimit_opts(&lim, o), 0);
  lim.log = 5; /* not the kernel's */
  assert_int_equal(limits_prlimit_opts(&lim, o), 0);
  assert_false(limits_kernel(&lim));
  lim = (job_limits_t){.memory = 300LL << 20, .cpu_s = 10, .procs = 50};
  assert_true(limits_kernel(&lim));
  assert_int_equal(limits_prlimit_opts(&lim, o), 3);
  assert_string_equal(o[0], "--as=314572800:314572800");
  assert_string_equal(o[1], "--cpu=10:15");
  assert_string_equal(o[2], "--nproc=50:50");
  lim = (job_limits_t){.cpu_s = 1};
  assert_int_equal(limits_prlimit_opts(&lim, o), 1);
  assert_string_equal(o[0], "--cpu=1:6");
}

static void end_reasons(void **state) {
  (void)state;
  job_limits_t lim = {.memory = 1000000, .cpu_s = 5, .procs = 10};
  limits_end_t e = {.failed = 1};
  /* Nothing points at a limit. */
  assert_null(limits_end_reason(LIMITS_RLIMIT, &lim, &e));
  /* A MemoryError in the log, or the virtual size at 90 % of the limit. */
  e.memory_error = 1;
  assert_string_equal(limits_end_reason(LIMITS_RLIMIT, &lim, &e), "memory_limit");
  e.memory_error = 0;
  e.peak_vm = 900000;
  assert_string_equal(limits_end_reason(LIMITS_RLIMIT, &lim, &e), "memory_limit");
  e.peak_vm = 899999;
  assert_null(limits_end_reason(LIMITS_RLIMIT, &lim, &e));
  /* Only a failed crawl went over. */
  e = (limits_end_t){.failed = 0, .memory_error = 1, .term_signal = SIGXCPU};
  assert_null(limits_end_reason(LIMITS_RLIMIT, &lim, &e));
  /* No memory limit: a MemoryError is the crawl's own. */
  job_limits_t cpu_only = {.cpu_s = 5};
  e = (limits_end_t){.failed = 1, .memory_error = 1};
  assert_null(limits_end_reason(LIMITS_RLIMIT, &cpu_only, &e));
  /* CPU: SIGXCPU, or a KILL at the hard limit once the seconds are spent. */
  e = (limits_end_t){.failed = 1, .term_signal = SIGXCPU};
  assert_string_equal(limits_end_reason(LIMITS_RLIMIT, &lim, &e), "cpu_limit");
  e = (limits_end_t){.failed = 1, .term_signal = SIGKILL, .cpu_ms = 5000};
  assert_string_equal(limits_end_reason(LIMITS_RLIMIT, &lim, &e), "cpu_limit");
  e.cpu_ms = 4999;
  assert_null(limits_end_reason(LIMITS_RLIMIT, &lim, &e));
  /* Under a cgroup the kernel's counters say it. */
  e = (limits_end_t){.failed = 1, .oom_kills = 1, .peak_vm = 1 << 30};
  assert_string_equal(limits_end_reason(LIMITS_CGROUP, &lim, &e), "memory_limit");
  e = (limits_end_t){.failed = 1, .peak_vm = 1 << 30};
  assert_null(limits_end_reason(LIMITS_CGROUP, &lim, &e)); /* VmPeak is no cgroup limit */
  e = (limits_end_t){.failed = 1, .pids_max_hits = 3};
  assert_string_equal(limits_end_reason(LIMITS_CGROUP, &lim, &e), "pids_limit");
  assert_null(limits_end_reason(LIMITS_RLIMIT, &lim, &e)); /* NPROC leaves no trace */
  e = (limits_end_t){.failed = 1, .memory_error = 1};
  assert_null(limits_end_reason(LIMITS_NONE, &lim, &e));
}

static void cgroup_text(void **state) {
  (void)state;
  char out[64];
  assert_int_equal(limits_cgroup_path("0::/system.slice/spiderd.service\n", out, sizeof(out)), 0);
  assert_string_equal(out, "/system.slice/spiderd.service");
  /* A hybrid host: v1 lines first, the v2 line last. */
  assert_int_equal(limits_cgroup_path("4:memory:/x\n1:cpu:/\n0::/\n", out, sizeof(out)), 0);
  assert_string_equal(out, "/");
  assert_int_equal(limits_cgroup_path("4:memory:/x\n1:cpu:/\n", out, sizeof(out)), -ENOENT);
  assert_int_equal(limits_cgroup_path("0::/a/very/long/path/that/does/not/fit/here/at/all/ok",
                                      out, 16), -ERANGE);
  assert_true(limits_has_controllers("cpuset cpu io memory pids\n", "memory pids"));
  assert_true(limits_has_controllers("memory pids", ""));
  assert_false(limits_has_controllers("cpuset cpu io memory\n", "memory pids"));
  assert_false(limits_has_controllers("cpuset cpu io memoryx pids\n", "memory pids"));
  assert_false(limits_has_controllers("", "memory"));
  assert_string_equal(limits_mech_name(LIMITS_RLIMIT), "rlimit");
  assert_string_equal(limits_mech_name(LIMITS_CGROUP), "cgroup");
  assert_string_equal(limits_mech_name(LIMITS_NONE), "none");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sizes),
      cmocka_unit_test(args_by_kind),
      cmocka_unit_test(own_values_over_defaults),
      cmocka_unit_test(prlimit_options),
      cmocka_unit_test(end_reasons),
      cmocka_unit_test(cgroup_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
