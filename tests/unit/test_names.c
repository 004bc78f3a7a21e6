#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/names.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- name_valid ---------------------------------------------------------- */

struct name_case {
  const char *s;
  int ok;
  const char *msg; /* expected message, or NULL to skip the check */
};

static void test_name_valid_table(void **state) {
  static char long_ok[201], long_bad[202];
  memset(long_ok, 'a', 200);
  memset(long_bad, 'a', 201);
  const struct name_case cases[] = {
      {"myproject", 1, NULL},
      {"my-project_2.0", 1, NULL},
      {"a.b", 1, NULL},
      {".hidden", 1, NULL},
      {"ñandú", 1, NULL},
      {"日本", 1, NULL},
      {"with space", 1, NULL},
      {long_ok, 1, NULL},
      {long_bad, 0, "job id is longer than 200 bytes"},
      {"", 0, "job id must not be empty"},
      {".", 0, "job id '.' must not be '.' or '..'"},
      {"..", 0, "job id '..' must not be '.' or '..'"},
      {"../x", 0, "job id '../x' must not contain '/' or '..'"},
      {"a/b", 0, "job id 'a/b' must not contain '/' or '..'"},
      {"/abs", 0, NULL},
      {"x..", 0, NULL},
      {"a..b", 0, NULL},
      {"a\\b", 0, "job id 'a\\b' must not contain '\\'"},
      {"..\\x", 0, NULL},
      {"a\nb", 0,
       "job id must not contain control characters (byte 0x0a in position 1)"},
      {"\t", 0, NULL},
      {"a\x1f", 0, NULL},
      {"a\x7f", 0, NULL},
      {"\xc3(", 0,
       "job id is invalid: 'utf-8' codec can't decode byte 0xc3 in position 0: invalid "
       "continuation byte"},
      {"ab\xff", 0, NULL},
      {"\xed\xa0\x80", 0, NULL}, /* a surrogate */
      {"\xc0\xaf", 0, NULL},     /* overlong '/' */
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    char err[256] = "";
    int ok = name_valid("job id", cases[i].s, err, sizeof(err));
    if (ok != cases[i].ok) fail_msg("case %zu '%s': %d, want %d", i, cases[i].s, ok, cases[i].ok);
    if (!ok) assert_true(err[0] != '\0');
    if (cases[i].msg) assert_string_equal(err, cases[i].msg);
    /* err may be NULL */
    assert_int_equal(name_valid("job id", cases[i].s, NULL, 0), cases[i].ok);
  }
  assert_int_equal(name_valid("project", NULL, NULL, 0), 0);
}

static void test_name_valid_what_and_truncation(void **state) {
  char err[16];
  assert_int_equal(name_valid("project", "../p", err, sizeof(err)), 0);
  assert_int_equal(strlen(err), sizeof(err) - 1); /* truncated, terminated */
  char big[256];
  assert_int_equal(name_valid("spider", "a/b", big, sizeof(big)), 0);
  assert_string_equal(big, "spider 'a/b' must not contain '/' or '..'");
}

/* ---- version_sanitize ------------------------------------------------------ */

static void test_version_sanitize(void **state) {
  const char *cases[][2] = {
      {"1.0", "1_0"},           {"v 1/x.y", "v_1_x_y"}, {"r42", "r42"},
      {"2.0-rc1", "2_0-rc1"},   {"", ""},               {"a+b!c", "a_b_c"},
      {"ñ", "__"},              {"../..", "_____"},     {"AZaz09_-", "AZaz09_-"},
      {"1700000000", "1700000000"},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    char *s = version_sanitize(cases[i][0]);
    assert_non_null(s);
    assert_string_equal(s, cases[i][1]);
    /* Idempotent: an already sanitized stem maps to itself. */
    char *t = version_sanitize(s);
    assert_string_equal(t, s);
    free(t);
    free(s);
  }
  assert_null(version_sanitize(NULL));
}

/* ---- version_compare ------------------------------------------------------- */

static int sgn(int x) { return (x > 0) - (x < 0); }

struct cmp_case {
  const char *a, *b;
  int want; /* -1, 0, 1 */
};

static void test_version_compare_pairs(void **state) {
  const struct cmp_case cases[] = {
      /* numeric release segments */
      {"1_5", "2_0", -1},
      {"2_0", "10_0", -1},
      {"1_9", "1_10", -1},
      {"1_0_1", "1_0_10", -1},
      {"1", "2", -1},
      {"9", "10", -1},
      /* integer timestamps, longer than 64 bits too */
      {"1699999999", "1700000000", -1},
      {"999999999", "1700000000", -1},
      {"123456789012345678901234567890", "123456789012345678901234567891", -1},
      {"99999999999999999999", "100000000000000000000", -1},
      /* pre-releases */
      {"2_0rc1", "2_0", -1},
      {"2_0a1", "2_0b1", -1},
      {"2_0b1", "2_0rc1", -1},
      {"2_0alpha1", "2_0a2", -1},
      {"2_0beta2", "2_0b1", 1},
      {"2_0c1", "2_0rc2", -1},
      {"2_0pre1", "2_0rc2", -1},
      {"2_0preview3", "2_0rc2", 1},
      {"2_0rc1", "2_0rc2", -1},
      {"2_0rc", "2_0rc1", -1},
      {"2_0_rc_1", "2_0rc2", -1},
      {"2_0RC1", "2_0", -1},
      {"1_9", "2_0a1", -1},
      /* dev releases */
      {"2_0_dev1", "2_0a1", -1},
      {"2_0_dev1", "2_0_dev2", -1},
      {"2_0dev", "2_0", -1},
      {"2_0a1_dev1", "2_0a1", -1},
      {"2_0a1_dev1", "2_0_dev5", 1},
      {"1_9_post3", "2_0_dev1", -1},
      /* post releases */
      {"2_0_post1", "2_0", 1},
      {"2_0_post1", "2_0_post2", -1},
      {"2_0-1", "2_0_post1", -1}, /* equal key, strcmp tie-break */
      {"2_0-2", "2_0_post1", 1},
      {"2_0r1", "2_0", 1},
      {"2_0rev2", "2_0r1", 1},
      {"2_0_post1", "2_1", -1},
      {"2_0_post1_dev1", "2_0_post1", -1},
      {"2_0_post1_dev1", "2_0", 1},
      /* separators as PEP 440 allows them, a trailing one included */
      {"2_0rc_", "2_0rc0", 1}, /* equal key: strcmp tie-break */
      {"1_0a-1", "1_0a1", -1},  /* "-1" is a's number, not a post release */
      {"1_0a--1", "1_0a0", 1},  /* a0.post1 */
      {"1_0a_post1", "1_0a", 1},
      {"1_0dev_", "1_0", -1},
      {"1_0__dev", "1_0", -1}, /* not a version: two separators */
      /* a leading v is ignored, trailing zeros are not significant */
      {"v1_2", "1_3", -1},
      {"v1_2", "1_1", 1},
      {"V2", "v1_9", 1},
      {"1_0", "1", 1}, /* equal versions: strcmp("1_0", "1") > 0 */
      {"1", "1_0", -1},
      {"1_0_0", "1_0", 1},
      {"v1", "1", 1},
      {"01", "1", -1},
      /* not versions sort first, naturally among themselves */
      {"abc", "1_5", -1},
      {"r42", "1", -1},
      {"r42", "r43", -1},
      {"r42", "r100", -1},
      {"r9", "r10", -1},
      {"abc", "abd", -1},
      {"build-2", "build-10", -1},
      {"abc", "abc1", -1},
      {"a01", "a1", -1}, /* natural tie, strcmp tie-break */
      {"1_0_abc", "1_0", -1},
      {"1_0a1b", "0", -1},
      {"v", "1", -1},
      {"", "1", -1},
      {"", "abc", -1},
      {"x", "x", 0},
      {"1_0", "1_0", 0},
      {"", "", 0},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    int c = sgn(version_compare(cases[i].a, cases[i].b));
    int r = sgn(version_compare(cases[i].b, cases[i].a));
    if (c != cases[i].want || r != -cases[i].want)
      fail_msg("case %zu: compare('%s', '%s') = %d (reverse %d), want %d", i, cases[i].a,
               cases[i].b, c, r, cases[i].want);
  }
  assert_true(version_compare(NULL, "1") < 0);
  assert_true(version_compare("1", NULL) > 0);
  assert_int_equal(version_compare(NULL, NULL), 0);
}

static void check_sorted(const char **in, const char **want, size_t n) {
  const char **v = malloc(n * sizeof(*v));
  memcpy(v, in, n * sizeof(*v));
  qsort(v, n, sizeof(*v), version_compare_qsort);
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i], want[i]) != 0) fail_msg("position %zu: '%s', want '%s'", i, v[i], want[i]);
  free(v);
}

static void test_version_sort_scrapyd_example(void **state) {
  /* Scrapyd lists these alphabetically, making 2_0rc1 the "latest". */
  const char *in[] = {"10_0", "1_5", "2_0", "2_0rc1", "abc"};
  const char *want[] = {"abc", "1_5", "2_0rc1", "2_0", "10_0"};
  check_sorted(in, want, N_ELEMS(in));
}

static void test_version_sort_mixed(void **state) {
  const char *in[] = {"1700000100", "r42",   "1_0_post1", "1_0",     "v1_2",  "1_0_dev1",
                      "1_0a1",      "r9",    "1",         "1699999999", "main", "1_0rc1",
                      "2_0b2",      "2_0b10"};
  const char *want[] = {"main",  "r9",   "r42",  "1_0_dev1", "1_0a1",  "1_0rc1",     "1",
                        "1_0",   "1_0_post1",   "v1_2",     "2_0b2",  "2_0b10", "1699999999",
                        "1700000100"};
  check_sorted(in, want, N_ELEMS(in));
}

/* ---- utf8_valid ------------------------------------------------------------ */

struct utf8_case {
  const char *s;
  size_t len;
  const char *msg; /* NULL: valid */
};

#define U(lit, m) {lit, sizeof(lit) - 1, m}

static void test_utf8_valid_table(void **state) {
  /* Messages as printed by CPython 3 for bytes.decode('utf-8'). */
  const struct utf8_case cases[] = {
      U("", NULL),
      U("plain ascii", NULL),
      U("\xc3\xb1", NULL),
      U("\xe2\x82\xac", NULL),
      U("\xf0\x9f\x98\x80", NULL),
      U("\xf4\x8f\xbf\xbf", NULL),
      U("\xed\x9f\xbf", NULL),
      U("a\0b", NULL),
      U("\xc3", "'utf-8' codec can't decode byte 0xc3 in position 0: unexpected end of data"),
      U("\xc3(", "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"),
      U("\xe0\xa0",
        "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"),
      U("\xe0\x80", "'utf-8' codec can't decode byte 0xe0 in position 0: invalid continuation byte"),
      U("\xed\xa0\x80",
        "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte"),
      U("\xf4\x90\x80\x80",
        "'utf-8' codec can't decode byte 0xf4 in position 0: invalid continuation byte"),
      U("\xf0\x9f\x98",
        "'utf-8' codec can't decode bytes in position 0-2: unexpected end of data"),
      U("\x80", "'utf-8' codec can't decode byte 0x80 in position 0: invalid start byte"),
      U("\xc0\xaf", "'utf-8' codec can't decode byte 0xc0 in position 0: invalid start byte"),
      U("\xff", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
      U("ab\xf0\x9f",
        "'utf-8' codec can't decode bytes in position 2-3: unexpected end of data"),
      U("\xf5", "'utf-8' codec can't decode byte 0xf5 in position 0: invalid start byte"),
      U("\xe1\x80",
        "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"),
      U("\xe1\x80(",
        "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte"),
      U("\xf0\x9f(",
        "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte"),
      U("ok\xc3\xb1\xc3",
        "'utf-8' codec can't decode byte 0xc3 in position 4: unexpected end of data"),
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    char err[200] = "";
    int ok = utf8_valid(cases[i].s, cases[i].len, err, sizeof(err));
    if (!cases[i].msg) {
      if (ok != 1) fail_msg("case %zu: rejected: %s", i, err);
      continue;
    }
    if (ok) fail_msg("case %zu: accepted, want '%s'", i, cases[i].msg);
    assert_string_equal(err, cases[i].msg);
    assert_int_equal(utf8_valid(cases[i].s, cases[i].len, NULL, 0), 0);
  }
  assert_int_equal(utf8_valid(NULL, 0, NULL, 0), 1);
}

/* ---- robustness on random input -------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Biased towards the characters the version grammar cares about, so random
 * strings often parse as versions and exercise every branch. */
static void random_version(char *buf, size_t cap) {
  static const char alphabet[] = "0123456789000_._-vVabcrpreviewpostdevalphabetaRC";
  static const char *const words[] = {"rc", "a", "b", "post", "dev", "r", "v", "alpha", "_", "-"};
  size_t len = (size_t)(rng() % (cap - 8));
  size_t i = 0;
  while (i < len) {
    if (rng() % 4 == 0) {
      const char *w = words[rng() % N_ELEMS(words)];
      size_t wl = strlen(w);
      if (i + wl >= cap - 1) break;
      memcpy(buf + i, w, wl);
      i += wl;
    } else {
      buf[i++] = alphabet[rng() % (sizeof(alphabet) - 1)];
    }
  }
  buf[i] = '\0';
}

static void random_bytes(char *buf, size_t cap) {
  size_t len = (size_t)(rng() % (cap - 1));
  for (size_t i = 0; i < len; i++) {
    buf[i] = (char)(rng() & 0xff);
    if (!buf[i]) buf[i] = '1';
  }
  buf[len] = '\0';
}

static void test_random_order_consistent(void **state) {
  enum { N = 3000, CAP = 24 };
  char (*v)[CAP] = malloc(sizeof(*v) * N);
  for (size_t i = 0; i < N; i++) {
    if (i % 3 == 0)
      random_bytes(v[i], CAP);
    else
      random_version(v[i], CAP);
    /* Other checks must not crash on arbitrary bytes either. */
    char err[128];
    (void)name_valid("x", v[i], err, sizeof(err));
    (void)utf8_valid(v[i], strlen(v[i]), err, sizeof(err));
    free(version_sanitize(v[i]));
  }
  for (size_t k = 0; k < 200000; k++) {
    const char *a = v[rng() % N], *b = v[rng() % N], *c = v[rng() % N];
    int ab = sgn(version_compare(a, b)), ba = sgn(version_compare(b, a));
    if (ab != -ba) fail_msg("not antisymmetric: '%s' '%s'", a, b);
    if (ab == 0 && strcmp(a, b) != 0) fail_msg("equal but different: '%s' '%s'", a, b);
    int bc = sgn(version_compare(b, c)), ac = sgn(version_compare(a, c));
    if (ab <= 0 && bc <= 0 && ac > 0) fail_msg("not transitive: '%s' <= '%s' <= '%s'", a, b, c);
    if (ab >= 0 && bc >= 0 && ac < 0) fail_msg("not transitive: '%s' >= '%s' >= '%s'", a, b, c);
  }
  /* A sort followed by a pairwise scan catches any cycle qsort tripped over. */
  const char **p = malloc(N * sizeof(*p));
  for (size_t i = 0; i < N; i++) p[i] = v[i];
  qsort(p, N, sizeof(*p), version_compare_qsort);
  for (size_t i = 1; i < N; i++) assert_true(version_compare(p[i - 1], p[i]) <= 0);
  free(p);
  free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_name_valid_table),
      cmocka_unit_test(test_name_valid_what_and_truncation),
      cmocka_unit_test(test_version_sanitize),
      cmocka_unit_test(test_version_compare_pairs),
      cmocka_unit_test(test_version_sort_scrapyd_example),
      cmocka_unit_test(test_version_sort_mixed),
      cmocka_unit_test(test_utf8_valid_table),
      cmocka_unit_test(test_random_order_consistent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
