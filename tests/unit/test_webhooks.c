#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "run/webhooks.h"

/* ---- signature ---- */

/* Expected values computed with Python's hmac:
 *   hmac.new(key, ts + b"." + body, hashlib.sha256).hexdigest() */
static void test_sign_known_vectors(void **state) {
  char sig[72];
  const char *body = "{\"id\":42,\"type\":\"job.finished\"}";
  assert_int_equal(webhooks_sign("whsec_test", "1700000000", body, strlen(body), sig), 0);
  assert_string_equal(sig,
                      "sha256=9e4d5a3d70f265cb584c21d6ed186bf5faef91b1365ee8207c2643dfeb1dd0d7");
  assert_int_equal(webhooks_sign("k", "0", "", 0, sig), 0);
  assert_string_equal(sig,
                      "sha256=6b4a4b8b3c40f1e8f53a3d36682e5f99f7ad2ac1df1c93dfe336f329167641e7");
}

static void test_sign_covers_timestamp_and_body(void **state) {
  char a[72], b[72], c[72];
  assert_int_equal(webhooks_sign("k", "100", "{}", 2, a), 0);
  assert_int_equal(webhooks_sign("k", "101", "{}", 2, b), 0);
  assert_int_equal(webhooks_sign("k", "100", "{ }", 3, c), 0);
  assert_string_not_equal(a, b);
  assert_string_not_equal(a, c);
  /* Only len bytes of the body count. */
  assert_int_equal(webhooks_sign("k", "100", "{}trailing", 2, b), 0);
  assert_string_equal(a, b);
}

/* ---- lists and type filters ---- */

static void test_list_parse(void **state) {
  char **v;
  size_t n;
  assert_int_equal(webhooks_list_parse(" http://a/x, http://b/y\n\thttp://c ,,", &v, &n), 0);
  assert_int_equal(n, 3);
  assert_string_equal(v[0], "http://a/x");
  assert_string_equal(v[1], "http://b/y");
  assert_string_equal(v[2], "http://c");
  webhooks_list_free(v, n);
  assert_int_equal(webhooks_list_parse("", &v, &n), 0);
  assert_int_equal(n, 0);
  webhooks_list_free(v, n);
  assert_int_equal(webhooks_list_parse(NULL, &v, &n), 0);
  assert_int_equal(n, 0);
  webhooks_list_free(v, n);
}

static void test_type_filter(void **state) {
  char *def[] = {"job.finished", "job.failed"};
  assert_true(webhooks_type_wanted(def, 2, "job.finished"));
  assert_true(webhooks_type_wanted(def, 2, "job.failed"));
  assert_false(webhooks_type_wanted(def, 2, "job.lost"));
  assert_false(webhooks_type_wanted(def, 2, "job.finishedx"));
  assert_false(webhooks_type_wanted(def, 2, "job.finishe"));
  assert_false(webhooks_type_wanted(def, 2, "run.missed"));

  char *prefix[] = {"job.", "run.missed"};
  assert_true(webhooks_type_wanted(prefix, 2, "job.queued"));
  assert_true(webhooks_type_wanted(prefix, 2, "job.lost"));
  assert_true(webhooks_type_wanted(prefix, 2, "run.missed"));
  assert_false(webhooks_type_wanted(prefix, 2, "run.skipped"));
  assert_false(webhooks_type_wanted(prefix, 2, "jobs.x"));
  assert_false(webhooks_type_wanted(prefix, 2, "job"));

  char *all[] = {"*"};
  assert_true(webhooks_type_wanted(all, 1, "schedule.created"));
  assert_false(webhooks_type_wanted(NULL, 0, "job.finished"));
}

/* ---- backoff ---- */

static void test_backoff_doubles_and_caps(void **state) {
  const int64_t cap = 300000;
  int64_t want[] = {1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000, 300000};
  for (int i = 0; i < (int)(sizeof(want) / sizeof(want[0])); i++)
    assert_int_equal(webhooks_backoff_ms(i + 1, 1000, cap, 0.0), want[i]);
  /* Far past the cap: no overflow. */
  assert_int_equal(webhooks_backoff_ms(1000, 1000, cap, 0.0), cap);
  assert_int_equal(webhooks_backoff_ms(1, 200, cap, 0.0), 200);
  assert_int_equal(webhooks_backoff_ms(3, 200, cap, 0.0), 800);
}

static void test_backoff_jitter_bounds(void **state) {
  assert_int_equal(webhooks_backoff_ms(1, 1000, 300000, 0.5), 1050);
  assert_true(webhooks_backoff_ms(1, 1000, 300000, 0.9999) < 1100);
  assert_true(webhooks_backoff_ms(20, 1000, 300000, 0.9999) < 330000);
  /* Out-of-range jitter is clamped, never negative or doubling. */
  assert_int_equal(webhooks_backoff_ms(2, 1000, 300000, -1.0), 2000);
  assert_true(webhooks_backoff_ms(2, 1000, 300000, 5.0) < 2200);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sign_known_vectors),
      cmocka_unit_test(test_sign_covers_timestamp_and_body),
      cmocka_unit_test(test_list_parse),
      cmocka_unit_test(test_type_filter),
      cmocka_unit_test(test_backoff_doubles_and_caps),
      cmocka_unit_test(test_backoff_jitter_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
