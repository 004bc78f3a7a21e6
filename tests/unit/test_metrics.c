/* The metrics module: histogram buckets, the text format and its escaping,
 * the HTTP series, and /readyz's decision. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app.h"
#include "metrics.h"
#include "strbuf.h"

static const double bounds[] = {0.1, 1, 10};

static void buckets_are_upper_bounds_inclusive(void **state) {
  (void)state;
  metrics_hist_t h;
  metrics_hist_init(&h, bounds, 3);
  metrics_hist_observe(&h, 0.1);  /* le=0.1 */
  metrics_hist_observe(&h, 0.5);  /* le=1 */
  metrics_hist_observe(&h, 1);    /* le=1 */
  metrics_hist_observe(&h, 11);   /* +Inf */
  metrics_hist_observe(&h, -3);   /* counts as 0 */
  assert_int_equal(h.counts[0], 2);
  assert_int_equal(h.counts[1], 2);
  assert_int_equal(h.counts[2], 0);
  assert_int_equal(h.counts[3], 1);
  strbuf_t b = {0};
  const char *l[] = {"kind", "read"};
  metrics_hist_render(&b, "x_seconds", l, 1, &h);
  assert_false(b.failed);
  assert_string_equal(b.p,
                      "x_seconds_bucket{kind=\"read\",le=\"0.1\"} 2\n"
                      "x_seconds_bucket{kind=\"read\",le=\"1\"} 4\n"
                      "x_seconds_bucket{kind=\"read\",le=\"10\"} 4\n"
                      "x_seconds_bucket{kind=\"read\",le=\"+Inf\"} 5\n"
                      "x_seconds_sum{kind=\"read\"} 12.6\n"
                      "x_seconds_count{kind=\"read\"} 5\n");
  strbuf_release(&b);
}

static void label_values_and_help_are_escaped(void **state) {
  (void)state;
  strbuf_t b = {0};
  metrics_family(&b, "a_total", "counter", "back\\slash\nnewline \"quotes\" stay");
  const char *l[] = {"queue", "q\"1\\\n2", "state", "ready"};
  metrics_sample(&b, "a_total", l, 2, 3);
  metrics_sample(&b, "b", NULL, 0, 0.25);
  assert_string_equal(b.p, "# HELP a_total back\\\\slash\\nnewline \"quotes\" stay\n"
                           "# TYPE a_total counter\n"
                           "a_total{queue=\"q\\\"1\\\\\\n2\",state=\"ready\"} 3\n"
                           "b 0.25\n");
  strbuf_release(&b);
}

static void http_series_by_route_method_status(void **state) {
  (void)state;
  metrics_t *m = metrics_new();
  assert_non_null(m);
  metrics_http_observe(m, "/api/v1/jobs/{id}", "GET", 200, 0.002);
  metrics_http_observe(m, "/api/v1/jobs/{id}", "GET", 200, 0.02);
  metrics_http_observe(m, "/api/v1/jobs/{id}", "BREW", 404, 0.002);
  metrics_http_observe(m, NULL, "GET", 404, 0);
  metrics_job_ended(m, "failed");
  metrics_job_ended(m, "running"); /* not an end */
  metrics_job_ended(NULL, "failed");
  strbuf_t b = {0};
  metrics_render(m, &b);
  assert_false(b.failed);
  assert_non_null(strstr(b.p, "spiderd_http_requests_total{route=\"/api/v1/jobs/{id}\","
                              "method=\"GET\",status=\"200\"} 2\n"));
  assert_non_null(strstr(b.p, "method=\"other\",status=\"404\"} 1\n"));
  assert_non_null(strstr(b.p, "{route=\"other\",method=\"GET\",status=\"404\"} 1\n"));
  assert_non_null(strstr(b.p, "spiderd_http_request_duration_seconds_count"
                              "{route=\"/api/v1/jobs/{id}\"} 3\n"));
  assert_non_null(strstr(b.p, "spiderd_jobs_total{state=\"failed\"} 1\n"));
  assert_non_null(strstr(b.p, "spiderd_jobs_total{state=\"finished\"} 0\n"));
  assert_non_null(strstr(b.p, "# TYPE spiderd_schedule_lag_seconds histogram\n"));
  strbuf_release(&b);
  metrics_free(m);
  metrics_http_observe(NULL, "/x", "GET", 200, 0); /* no metrics: nothing */
}

static void readiness_decision(void **state) {
  (void)state;
  char why[160] = "";
  assert_int_equal(api_ready_check(0, 0, 1000000, 15, why, sizeof(why)), 1);
  assert_int_equal(api_ready_check(1, 0, 1000000, 15, why, sizeof(why)), 0);
  assert_non_null(strstr(why, "heartbeat"));
  assert_int_equal(api_ready_check(1, 990000, 1000000, 15, why, sizeof(why)), 1);
  assert_int_equal(api_ready_check(1, 980000, 1000000, 15, why, sizeof(why)), 0);
  assert_non_null(strstr(why, "20.0 s old"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(buckets_are_upper_bounds_inclusive),
      cmocka_unit_test(label_values_and_help_are_escaped),
      cmocka_unit_test(http_series_by_route_method_status),
      cmocka_unit_test(readiness_decision),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
