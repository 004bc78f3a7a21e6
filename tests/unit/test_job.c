/* The pure pieces of the retry policy: how long a retry waits and what it
 * is called. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/job.h"
#include "core/names.h"

static void delay_doubles_per_attempt(void **state) {
  (void)state;
  assert_int_equal(job_retry_delay_ms(10000, 1, 0), 10000);
  assert_int_equal(job_retry_delay_ms(10000, 2, 0), 20000);
  assert_int_equal(job_retry_delay_ms(10000, 3, 0), 40000);
  assert_int_equal(job_retry_delay_ms(500, 4, 0), 4000);
  /* attempt < 1 is read as a first attempt */
  assert_int_equal(job_retry_delay_ms(700, 0, 0), 700);
}

static void delay_is_capped_and_never_overflows(void **state) {
  (void)state;
  assert_int_equal(job_retry_delay_ms(10000, 12, 0), JOB_RETRY_DELAY_MAX_MS);
  assert_int_equal(job_retry_delay_ms(10000, 1000000, 0), JOB_RETRY_DELAY_MAX_MS);
  assert_int_equal(job_retry_delay_ms(INT64_MAX / 2, 64, 0), JOB_RETRY_DELAY_MAX_MS);
  /* jitter is added after the cap: at most 10 % more */
  int64_t top = job_retry_delay_ms(10000, 40, UINT32_MAX);
  assert_true(top > JOB_RETRY_DELAY_MAX_MS && top <= JOB_RETRY_DELAY_MAX_MS * 11 / 10);
}

static void delay_jitter_is_up_to_ten_percent(void **state) {
  (void)state;
  assert_int_equal(job_retry_delay_ms(1000, 1, 0), 1000);
  int64_t half = job_retry_delay_ms(1000, 1, UINT32_MAX / 2);
  assert_true(half >= 1049 && half <= 1050);
  int64_t max = job_retry_delay_ms(1000, 1, UINT32_MAX);
  assert_true(max >= 1099 && max < 1100);
  for (uint32_t r = 0; r < 4000000000u; r += 123456789u) {
    int64_t d = job_retry_delay_ms(2000, 2, r);
    assert_true(d >= 4000 && d < 4400);
  }
}

static void delay_zero_backoff_is_immediate(void **state) {
  (void)state;
  assert_int_equal(job_retry_delay_ms(0, 3, UINT32_MAX), 0);
  assert_int_equal(job_retry_delay_ms(-5, 1, 77), 0);
}

static void retry_jobid(const char *in, int attempt, const char *want) {
  char out[256];
  assert_int_equal(job_retry_jobid(in, attempt, out, sizeof(out)), 0);
  assert_string_equal(out, want);
  char why[256];
  assert_true(name_valid("job id", out, why, sizeof(why)));
}

static void retry_ids(void **state) {
  (void)state;
  retry_jobid("abc", 2, "abc.r2");
  retry_jobid("abc.r2", 3, "abc.r3");   /* replaced, not stacked */
  retry_jobid("abc.r9", 10, "abc.r10");
  retry_jobid("v1.r", 2, "v1.r.r2");    /* ".r" without digits is the user's */
  retry_jobid("x.r2y", 2, "x.r2y.r2");
  retry_jobid("a.", 2, "a.r2");         /* never ".." */
  retry_jobid("a.r2", 2, "a.r2.r2");    /* a first attempt's ".r2" is the user's */
  retry_jobid("a.r7", 3, "a.r7.r3");    /* only the previous attempt's suffix goes */
  retry_jobid("75339c22e60011f1aa8202fc00000001", 2, "75339c22e60011f1aa8202fc00000001.r2");
}

static void retry_id_stays_short_and_valid_utf8(void **state) {
  (void)state;
  char in[201], out[256], want[256];
  memset(in, 'x', 200);
  in[200] = '\0';
  assert_int_equal(job_retry_jobid(in, 2, out, sizeof(out)), 0);
  assert_int_equal(strlen(out), 200);
  memset(want, 'x', 197);
  strcpy(want + 197, ".r2");
  assert_string_equal(out, want);
  /* 99 two-byte characters + "ab": the cut must not split a character */
  char u[256] = "";
  for (int i = 0; i < 99; i++) strcat(u, "\xc3\xa9");
  strcat(u, "ab");
  assert_int_equal(job_retry_jobid(u, 12, out, sizeof(out)), 0);
  assert_true(strlen(out) <= 200);
  assert_true(utf8_valid(out, strlen(out), NULL, 0));
  assert_string_equal(out + strlen(out) - 4, ".r12");
}

static void retry_id_refusals(void **state) {
  (void)state;
  char out[256];
  assert_int_equal(job_retry_jobid("abc", 1, out, sizeof(out)), -EINVAL);
  assert_int_equal(job_retry_jobid(NULL, 2, out, sizeof(out)), -EINVAL);
  assert_int_equal(job_retry_jobid("abc", 2, out, 100), -EINVAL);
  assert_int_equal(job_retry_jobid(".r5", 6, out, sizeof(out)), -EINVAL);
  assert_int_equal(job_retry_jobid("...", 2, out, sizeof(out)), -EINVAL);
}

static void unique_keys(void **state) {
  (void)state;
  char why[128], k[JOB_UNIQUE_KEY_MAX + 2];
  assert_true(job_unique_key_valid("daily-2024-05-01", why, sizeof(why)));
  assert_true(job_unique_key_valid("caf\xc3\xa9 \xe2\x82\xac", why, sizeof(why)));
  assert_false(job_unique_key_valid("", why, sizeof(why)));
  assert_non_null(strstr(why, "empty"));
  assert_false(job_unique_key_valid(NULL, why, sizeof(why)));
  memset(k, 'k', JOB_UNIQUE_KEY_MAX);
  k[JOB_UNIQUE_KEY_MAX] = '\0';
  assert_true(job_unique_key_valid(k, why, sizeof(why)));
  k[JOB_UNIQUE_KEY_MAX] = 'k';
  k[JOB_UNIQUE_KEY_MAX + 1] = '\0';
  assert_false(job_unique_key_valid(k, why, sizeof(why)));
  assert_non_null(strstr(why, "at most 200"));
  assert_false(job_unique_key_valid("a\tb", why, sizeof(why)));
  assert_non_null(strstr(why, "control"));
  assert_false(job_unique_key_valid("a\nb", why, sizeof(why)));
  assert_false(job_unique_key_valid("a\x7f", why, sizeof(why)));
  assert_false(job_unique_key_valid("a\xc2\x85", why, sizeof(why))); /* U+0085 NEL */
  assert_true(job_unique_key_valid("a\xc2\xa0", why, sizeof(why)));  /* U+00A0 is not */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(delay_doubles_per_attempt),
      cmocka_unit_test(delay_is_capped_and_never_overflows),
      cmocka_unit_test(delay_jitter_is_up_to_ten_percent),
      cmocka_unit_test(delay_zero_backoff_is_immediate),
      cmocka_unit_test(retry_ids),
      cmocka_unit_test(retry_id_stays_short_and_valid_utf8),
      cmocka_unit_test(retry_id_refusals),
      cmocka_unit_test(unique_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
