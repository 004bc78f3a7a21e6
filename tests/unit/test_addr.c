/* addr.h: which bind addresses only this machine reaches. A wrong 1
 * lets a daemon serve the network without authentication, so the table
 * is mostly what must be 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "addr.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

struct addr_case {
  const char *addr;
  int loopback;
};

static const struct addr_case numeric_cases[] = {
    /* 127.0.0.0/8, every address of it */
    {"127.0.0.1", 1},
    {"127.0.0.2", 1},
    {"127.1.2.3", 1},
    {"127.255.255.255", 1},
    {"127.0.0.0", 1},
    /* ::1, bare or bracketed as bind_address takes it */
    {"::1", 1},
    {"0:0:0:0:0:0:0:1", 1},
    {"[::1]", 1},
    /* 127/8 written as an IPv4-mapped IPv6 address is the same address */
    {"::ffff:127.0.0.1", 1},
    {"::ffff:127.9.9.9", 1},
    /* every other address, wildcards first */
    {"0.0.0.0", 0},
    {"::", 0},
    {"[::]", 0},
    {"10.0.0.1", 0},
    {"192.168.1.10", 0},
    {"128.0.0.1", 0},
    {"126.255.255.255", 0},
    {"::2", 0},
    {"::ffff:10.0.0.1", 0},
    {"::ffff:0.0.0.0", 0},
    {"fe80::1", 0},
    /* names and near-misses that a prefix or a resolver would take */
    {"127.evil.example", 0},
    {"127.0.0.1.nip.io", 0},
    {"127", 0},
    {"127.", 0},
    {"127.1", 0},       /* inet_aton's short form: not a dotted quad */
    {"0127.0.0.1", 0},  /* octal to inet_aton: 87.0.0.1 */
    {"127.0.0.1 ", 0},
    {" 127.0.0.1", 0},
    {"127.0.0.256", 0},
    {"127.0.0.1:6800", 0},
    {"::1%lo", 0},
    {"[::1", 0},
    {"::1]", 0},
    {"[]", 0},
    {"[127.0.0.1]", 0},
    {"", 0},
    {"localhost", 0}, /* a name: addr_loopback_numeric never resolves */
    {"LOCALHOST", 0},
};

static void test_numeric_table(void **state) {
  (void)state;
  for (size_t i = 0; i < N_ELEMS(numeric_cases); i++) {
    const struct addr_case *c = &numeric_cases[i];
    if (addr_loopback_numeric(c->addr) != c->loopback)
      fail_msg("addr_loopback_numeric(\"%s\") != %d", c->addr, c->loopback);
    /* a number is a number for both */
    if (strcmp(c->addr, "localhost") && addr_loopback(c->addr) != c->loopback)
      fail_msg("addr_loopback(\"%s\") != %d", c->addr, c->loopback);
  }
  assert_int_equal(addr_loopback_numeric(NULL), 0);
  assert_int_equal(addr_loopback(NULL), 0);
}

/* A string longer than any address, with loopback at its start. */
static void test_long_input(void **state) {
  (void)state;
  char buf[512];
  memset(buf, '1', sizeof(buf) - 1);
  buf[sizeof(buf) - 1] = '\0';
  memcpy(buf, "127.0.0.1", 9);
  assert_int_equal(addr_loopback(buf), 0);
  buf[0] = '[';
  buf[sizeof(buf) - 2] = ']';
  assert_int_equal(addr_loopback(buf), 0);
}

/* "localhost" is loopback as the documentation promises, because the
 * resolver says so here (the test machine's /etc/hosts, as everywhere);
 * no other name is, however it resolves. */
static void test_names(void **state) {
  (void)state;
  assert_int_equal(addr_loopback("localhost"), 1);
  assert_int_equal(addr_loopback("localhost."), 0);
  assert_int_equal(addr_loopback("Localhost"), 0);
  assert_int_equal(addr_loopback("ip6-localhost"), 0);
  assert_int_equal(addr_loopback("localhost.localdomain"), 0);
  assert_int_equal(addr_loopback("127.0.0.1.nip.io"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_numeric_table),
      cmocka_unit_test(test_long_input),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
