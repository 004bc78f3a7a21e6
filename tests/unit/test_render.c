/* Rendering must match what Python's json.dumps and str(datetime) print,
 * because Scrapyd clients compare and parse those bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "api/render.h"
#include "core/job.h"
#include "strbuf.h"

static void json_like_python(void **state) {
  (void)state;
  json_t *o = json_pack("{s:s,s:i,s:f,s:[i,i],s:n}", "jobid", "\xc3\xb1", "n", 3, "p", 2.0,
                        "a", 1, 2, "z");
  size_t len = 0;
  char *s = render_json(o, &len);
  assert_string_equal(s, "{\"jobid\": \"\\u00f1\", \"n\": 3, \"p\": 2.0, \"a\": [1, 2], \"z\": null}\n");
  assert_int_equal(len, strlen(s));
  free(s);
  json_decref(o);
}

static void escaped_backslash_u_is_kept(void **state) {
  (void)state;
  /* A literal backslash followed by "uABCD" must not be lower-cased. */
  json_t *o = json_pack("{s:s}", "k", "\\uABCD \xe2\x82\xac");
  char *s = render_json(o, NULL);
  assert_string_equal(s, "{\"k\": \"\\\\uABCD \\u20ac\"}\n");
  free(s);
  json_decref(o);
}

static void json_string_literal(void **state) {
  (void)state;
  char *s = render_json_string("a\"b\xc3\xa9");
  assert_string_equal(s, "\"a\\\"b\\u00e9\"");
  free(s);
}

static void time_formats(void **state) {
  (void)state;
  setenv("TZ", "UTC", 1);
  tzset();
  char buf[32];
  render_time(1795302542320LL, 1, buf); /* 2026-11-21 23:09:02.320 UTC */
  assert_string_equal(buf, "2026-11-21 23:09:02.320000");
  render_time(1795302542000LL, 1, buf); /* whole second: no fraction, as Python */
  assert_string_equal(buf, "2026-11-21 23:09:02");
  render_time(1795302542320LL, 0, buf);
  assert_string_equal(buf, "2026-11-21 23:09:02");
  setenv("TZ", "Europe/Paris", 1);
  tzset();
  render_time(1795302542000LL, 1, buf); /* local time, as Scrapyd */
  assert_string_equal(buf, "2026-11-22 00:09:02");
}

static void runtime_format(void **state) {
  (void)state;
  char buf[32];
  render_runtime(0, buf);
  assert_string_equal(buf, "0:00:00");
  render_runtime(3723999, buf);
  assert_string_equal(buf, "1:02:03");
  render_runtime(-5, buf);
  assert_string_equal(buf, "0:00:00");
  render_runtime(100LL * 3600 * 1000, buf);
  assert_string_equal(buf, "4 days, 4:00:00");
  render_runtime((86400LL + 61) * 1000 + 999, buf);
  assert_string_equal(buf, "1 day, 0:01:01");
}

/* A pending job's listjobs.json entry is written directly when it needs no
 * escape and no exponent, and through jansson otherwise: both must write
 * the same bytes. The same job is rendered twice, once with an id that
 * takes the direct path and once with one that needs an escape (so
 * jansson's path), and the two texts must differ by the id alone. */
static void pending_entry_direct_and_jansson_agree(void **state) {
  (void)state;
  const double prios[] = {0, 1, -1, 0.1, 2.5, 1e20, -0.0, 123456789.125};
  const int64_t timeouts[] = {0, 1500, 7200000};
  for (size_t k = 0; k < sizeof(prios) / sizeof(*prios) * 3; k++) {
    job_t j;
    job_init(&j);
    j.project = strdup("proj");
    j.spider = strdup("spi_der");
    j.version = k % 2 ? strdup("1.0-r2") : NULL;
    j.settings = k % 3 ? json_pack("{s:s,s:s}", "DOWNLOAD_DELAY", "2", "B", "x") : NULL;
    j.args = k % 4 ? json_pack("{s:s}", "city", "\xc3\xb1o\x7f") : json_object();
    j.priority = prios[k / 3];
    j.timeout_ms = timeouts[k % 3];
    j.not_before_ms = k % 5 ? 0 : 1795714760123;
    j.attempt = (int)(k % 3) + 1;
    j.max_retries = (int)(k % 4);
    j.retry_of = k % 3 ? (int64_t)k * 1000 : 0;
    strbuf_t direct = {0}, slow = {0};
    j.jobid = strdup("jobAB1");
    render_listjobs_row(NULL, 0, 0, &j, &direct);
    free(j.jobid);
    j.jobid = strdup("job\"1"); /* an escape: jansson's path */
    render_listjobs_row(NULL, 0, 0, &j, &slow);
    assert_false(direct.failed || slow.failed);
    char *at = strstr(slow.p, "job\\\"1");
    assert_non_null(at);
    memcpy(at, "jobAB1", 6); /* the same length as the escaped id */
    assert_string_equal(direct.p, slow.p);
    strbuf_release(&direct);
    strbuf_release(&slow);
    job_release(&j);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(json_like_python),
      cmocka_unit_test(escaped_backslash_u_is_kept),
      cmocka_unit_test(json_string_literal),
      cmocka_unit_test(time_formats),
      cmocka_unit_test(runtime_format),
      cmocka_unit_test(pending_entry_direct_and_jansson_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
