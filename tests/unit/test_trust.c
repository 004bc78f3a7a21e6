/* Trusted proxies: CIDR parsing and matching, the loopback test, and the
 * X-Forwarded-For walk (http/trust.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/trust.h"

static http_trust_t parse_ok(const char *text) {
  http_trust_t t;
  char err[256] = "";
  int rc = http_trust_parse(text, &t, err, sizeof(err));
  if (rc) fail_msg("'%s': %s", text, err);
  return t;
}

static void bad(const char *text, const char *named) {
  http_trust_t t;
  char err[256] = "";
  assert_int_equal(http_trust_parse(text, &t, err, sizeof(err)), -EINVAL);
  if (!strstr(err, named)) fail_msg("'%s': the error '%s' does not name '%s'", text, err, named);
  assert_null(t.v);
  assert_int_equal(t.n, 0);
}

static void test_parse_lists(void **state) {
  (void)state;
  http_trust_t t = parse_ok("127.0.0.1, 10.0.0.0/8 ::1\tfd00::/8,,unix");
  assert_int_equal(t.n, 4);
  assert_int_equal(t.unix_peers, 1);
  assert_int_equal(t.v[0].bits, 128); /* a single IPv4 address: /32 over its mapped form */
  assert_int_equal(t.v[1].bits, 96 + 8);
  assert_int_equal(t.v[2].bits, 128);
  assert_int_equal(t.v[3].bits, 8);
  http_trust_release(&t);
  t = parse_ok("");
  assert_int_equal(t.n, 0);
  assert_int_equal(t.unix_peers, 0);
  http_trust_release(&t);
  t = parse_ok(NULL);
  assert_int_equal(t.n, 0);
  http_trust_release(&t);
  t = parse_ok(" , ");
  assert_int_equal(t.n, 0);
  http_trust_release(&t);
}

static void test_parse_refuses(void **state) {
  (void)state;
  bad("10.0.0.0/33", "10.0.0.0/33");
  bad("2001:db8::/129", "2001:db8::/129");
  bad("127.0.0.1, 300.1.1.1", "300.1.1.1");
  bad("proxy.example.com", "proxy.example.com");
  bad("10.0.0.0/", "10.0.0.0/");
  bad("10.0.0.0/-1", "10.0.0.0/-1");
  bad("10.0.0.0/8x", "10.0.0.0/8x");
  bad("10.0.0.0/08", "10.0.0.0/08");
  bad("/8", "/8");
  bad("10.0.0.0/8/8", "10.0.0.0/8/8");
  bad("fe80::1%eth0", "fe80::1%eth0");
  bad("[::1]", "[::1]");
  char long_item[300];
  memset(long_item, '1', sizeof(long_item) - 1);
  long_item[sizeof(long_item) - 1] = '\0';
  bad(long_item, "111");
}

static void test_cidr_matching(void **state) {
  (void)state;
  http_trust_t t = parse_ok("10.0.0.0/8 192.168.1.128/25 172.16.5.4 2001:db8::/32 fd00::1");
  assert_true(http_trust_has(&t, "10.0.0.0"));
  assert_true(http_trust_has(&t, "10.255.255.255"));
  assert_false(http_trust_has(&t, "11.0.0.0"));
  assert_false(http_trust_has(&t, "9.255.255.255"));
  assert_true(http_trust_has(&t, "192.168.1.128"));
  assert_true(http_trust_has(&t, "192.168.1.255"));
  assert_false(http_trust_has(&t, "192.168.1.127"));
  assert_true(http_trust_has(&t, "172.16.5.4"));
  assert_false(http_trust_has(&t, "172.16.5.5"));
  /* an IPv4 client of a dual-stack socket, written as IPv6 */
  assert_true(http_trust_has(&t, "::ffff:10.1.2.3"));
  assert_false(http_trust_has(&t, "::ffff:11.1.2.3"));
  assert_true(http_trust_has(&t, "2001:db8::1"));
  assert_true(http_trust_has(&t, "2001:DB8:ffff::1"));
  assert_false(http_trust_has(&t, "2001:db9::1"));
  assert_true(http_trust_has(&t, "fd00::1"));
  assert_false(http_trust_has(&t, "fd00::2"));
  /* an IPv6 address whose low bits look like 10.x is not IPv4 */
  assert_false(http_trust_has(&t, "::10.1.2.3"));
  assert_false(http_trust_has(&t, "unix"));
  assert_false(http_trust_has(&t, "?"));
  assert_false(http_trust_has(&t, ""));
  http_trust_release(&t);
  /* host bits are ignored: 10.1.2.3/8 is 10.0.0.0/8 */
  t = parse_ok("10.1.2.3/8 2001:db8::ffff/120 0.0.0.0/0");
  assert_true(http_trust_has(&t, "10.9.9.9"));
  assert_true(http_trust_has(&t, "2001:db8::ff01"));
  assert_true(http_trust_has(&t, "203.0.113.7")); /* 0.0.0.0/0: every IPv4 address */
  assert_false(http_trust_has(&t, "2001:db9::1"));
  http_trust_release(&t);
  t = parse_ok("::/0 unix");
  assert_true(http_trust_has(&t, "2001:db9::1"));
  assert_true(http_trust_has(&t, "127.0.0.1"));
  assert_true(http_trust_has(&t, "unix"));
  http_trust_release(&t);
}

static void test_loopback(void **state) {
  (void)state;
  assert_true(http_addr_local("127.0.0.1"));
  assert_true(http_addr_local("127.255.0.9"));
  assert_true(http_addr_local("::1"));
  assert_true(http_addr_local("::ffff:127.0.0.1"));
  assert_true(http_addr_local("unix"));
  assert_false(http_addr_local("128.0.0.1"));
  assert_false(http_addr_local("126.255.255.255"));
  assert_false(http_addr_local("::2"));
  assert_false(http_addr_local("::127.0.0.1"));
  assert_false(http_addr_local("203.0.113.7"));
  assert_false(http_addr_local("?"));
  assert_false(http_addr_local("localhost"));
  char out[HTTP_ADDR_MAX];
  assert_int_equal(http_addr_canon("::FFFF:10.0.0.1", out), 0);
  assert_string_equal(out, "10.0.0.1");
  assert_int_equal(http_addr_canon("2001:DB8:0:0::1", out), 0);
  assert_string_equal(out, "2001:db8::1");
  assert_int_equal(http_addr_canon("10.0.0", out), -EINVAL);
}

/* The client for peer and header under trusted "127.0.0.1 10.0.0.0/8 fd00::/8". */
static const char *walk(const char *peer, const char *xff, int *from_header) {
  static char out[HTTP_ADDR_MAX];
  http_trust_t t = parse_ok("127.0.0.1 10.0.0.0/8 fd00::/8");
  *from_header = http_client_addr(&t, peer, xff, out);
  http_trust_release(&t);
  return out;
}

static void test_forwarded_for_walk(void **state) {
  (void)state;
  int h;
  /* nginx's $proxy_add_x_forwarded_for: what the client sent, then its peer */
  assert_string_equal(walk("127.0.0.1", "203.0.113.7", &h), "203.0.113.7");
  assert_int_equal(h, 1);
  /* a forged entry left of the first untrusted hop is never believed */
  assert_string_equal(walk("127.0.0.1", "1.2.3.4, 203.0.113.7", &h), "203.0.113.7");
  assert_string_equal(walk("127.0.0.1", "203.0.113.7, 10.1.1.1, 10.2.2.2", &h), "203.0.113.7");
  assert_string_equal(walk("10.0.0.5", "9.9.9.9,198.51.100.2,10.9.9.9", &h), "198.51.100.2");
  /* every hop trusted: the leftmost */
  assert_string_equal(walk("127.0.0.1", "10.1.1.1, 10.2.2.2", &h), "10.1.1.1");
  assert_int_equal(h, 1);
  /* an untrusted peer: the header is ignored, whatever it says */
  assert_string_equal(walk("203.0.113.9", "10.1.1.1", &h), "203.0.113.9");
  assert_int_equal(h, 0);
  assert_string_equal(walk("unix", "203.0.113.7", &h), "unix");
  assert_int_equal(h, 0);
  /* no header */
  assert_string_equal(walk("127.0.0.1", NULL, &h), "127.0.0.1");
  assert_int_equal(h, 0);
  /* IPv6, written canonically; an IPv4-mapped client as IPv4 */
  assert_string_equal(walk("fd00::1", "2001:DB8::7, fd00::2", &h), "2001:db8::7");
  assert_string_equal(walk("127.0.0.1", "::ffff:203.0.113.7", &h), "203.0.113.7");
  /* the forms with ports and brackets some proxies write */
  assert_string_equal(walk("127.0.0.1", "[2001:db8::7]:443", &h), "2001:db8::7");
  assert_string_equal(walk("127.0.0.1", "[2001:db8::7]", &h), "2001:db8::7");
  assert_string_equal(walk("127.0.0.1", "203.0.113.7:5555", &h), "203.0.113.7");
  /* malformed where the walk reads it: the peer */
  const char *malformed[] = {"", " ", ",", "203.0.113.7,", "unknown", "203.0.113.7, 10.1.1.1, junk",
                             "2001:db8::7:443x", "[203.0.113.7]", "[2001:db8::7]x",
                             "203.0.113.7:80:90", "300.0.0.1", "fe80::1%eth0"};
  for (size_t i = 0; i < sizeof(malformed) / sizeof(*malformed); i++) {
    const char *got = walk("127.0.0.1", malformed[i], &h);
    if (strcmp(got, "127.0.0.1") || h) fail_msg("'%s' gave %s (%d)", malformed[i], got, h);
  }
  /* malformed left of the client is never read */
  assert_string_equal(walk("127.0.0.1", "junk, 203.0.113.7", &h), "203.0.113.7");
  /* a very long header: only the rightmost hops matter */
  char longx[8192] = "";
  for (int i = 0; i < 500; i++) strcat(longx, "1.1.1.1,");
  strcat(longx, "198.51.100.4, 10.0.0.1");
  assert_string_equal(walk("127.0.0.1", longx, &h), "198.51.100.4");
  /* no list: the peer, header or not */
  char out[HTTP_ADDR_MAX];
  assert_int_equal(http_client_addr(NULL, "127.0.0.1", "203.0.113.7", out), 0);
  assert_string_equal(out, "127.0.0.1");
  http_trust_t none = parse_ok("");
  assert_int_equal(http_client_addr(&none, "127.0.0.1", "203.0.113.7", out), 0);
  assert_string_equal(out, "127.0.0.1");
  http_trust_release(&none);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_lists),
      cmocka_unit_test(test_parse_refuses),
      cmocka_unit_test(test_cidr_matching),
      cmocka_unit_test(test_loopback),
      cmocka_unit_test(test_forwarded_for_walk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
