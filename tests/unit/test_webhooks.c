#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
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

/* 16 bytes of an address, IPv4 as ::ffff:a.b.c.d. */
static void addr_of(const char *text, unsigned char out[16]) {
  unsigned char v4[4];
  if (inet_pton(AF_INET, text, v4) == 1) {
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    memcpy(out + 12, v4, 4);
  } else {
    assert_int_equal(inet_pton(AF_INET6, text, out), 1);
  }
}

static void test_private_addresses(void **state) {
  static const char *const private_[] = {
      "127.0.0.1",   "127.255.255.254", "0.0.0.0",      "10.1.2.3",      "172.16.0.1",
      "172.31.255.255", "192.168.1.1",  "100.64.0.1",   "169.254.169.254", "224.0.0.1",
      "255.255.255.255", "198.18.0.1",  "192.0.0.8",    "::",            "::1",
      "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1", "64:ff9b::a9fe:a9fe",
      "2002:7f00:1::", "2002:c0a8:101::1", "fe80::1",   "febf::1",       "fec0::1",
      "fc00::1",     "fd12:3456::1",    "ff02::1",      "64:ff9b:1::1",  "100::1",
  };
  static const char *const public_[] = {
      "8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.255.255", "100.128.0.1", "169.253.0.1",
      "2001:4860:4860::8888", "::ffff:8.8.8.8", "2002:0808:0808::", "64:ff9b::808:808",
      "2606:4700::1111", "11.0.0.1", "192.169.0.1",
  };
  unsigned char a[16];
  for (size_t i = 0; i < sizeof(private_) / sizeof(private_[0]); i++) {
    addr_of(private_[i], a);
    if (!webhooks_addr_private(a)) fail_msg("%s should be private", private_[i]);
  }
  for (size_t i = 0; i < sizeof(public_) / sizeof(public_[0]); i++) {
    addr_of(public_[i], a);
    if (webhooks_addr_private(a)) fail_msg("%s should be public", public_[i]);
  }
  addr_of("127.0.0.1", a);
  assert_string_equal(webhooks_addr_private(a), "a loopback");
  addr_of("169.254.1.1", a);
  assert_string_equal(webhooks_addr_private(a), "a link-local");
}

static void test_allow_list(void **state) {
  webhook_net_t *nets = NULL;
  size_t n = 0;
  char err[160] = "";
  unsigned char a[16];
  assert_int_equal(webhooks_nets_parse("10.0.0.0/8, 127.0.0.1  fd00::/8", &nets, &n, err,
                                       sizeof(err)), 0);
  assert_int_equal(n, 3);
  addr_of("10.200.1.1", a);
  assert_true(webhooks_addr_allowed(nets, n, a));
  addr_of("::ffff:10.200.1.1", a);
  assert_true(webhooks_addr_allowed(nets, n, a));
  addr_of("127.0.0.1", a);
  assert_true(webhooks_addr_allowed(nets, n, a));
  addr_of("127.0.0.2", a);
  assert_false(webhooks_addr_allowed(nets, n, a));
  addr_of("fd12::1", a);
  assert_true(webhooks_addr_allowed(nets, n, a));
  addr_of("fe80::1", a);
  assert_false(webhooks_addr_allowed(nets, n, a));
  free(nets);
  assert_int_equal(webhooks_nets_parse("*", &nets, &n, err, sizeof(err)), 0);
  addr_of("::1", a);
  assert_true(webhooks_addr_allowed(nets, n, a));
  free(nets);
  assert_int_equal(webhooks_nets_parse("", &nets, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 0);
  assert_false(webhooks_addr_allowed(nets, n, a));
  static const char *const bad[] = {"10.0.0.0/33", "::/129", "localhost", "10.0.0.0/", "1.2.3.4/x",
                                    "10.0.0.0/-1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    assert_int_not_equal(webhooks_nets_parse(bad[i], &nets, &n, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "'"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sign_known_vectors),
      cmocka_unit_test(test_private_addresses),
      cmocka_unit_test(test_allow_list),
      cmocka_unit_test(test_sign_covers_timestamp_and_body),
      cmocka_unit_test(test_list_parse),
      cmocka_unit_test(test_type_filter),
      cmocka_unit_test(test_backoff_doubles_and_caps),
      cmocka_unit_test(test_backoff_jitter_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
