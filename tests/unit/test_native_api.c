/* The native API's pure pieces: path templates, page cursors, JSON-RPC
 * envelopes, parameter validation, JSON body limits, base64 and the UTF-8
 * text of log bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/jsonrpc.h"
#include "api/ops.h"
#include "api/route.h"
#include "error.h"

static void route_templates(void **state) {
  (void)state;
  route_capture_t caps[ROUTE_MAX_CAPTURES];
  size_t n = 9;
  assert_true(route_match("/jobs", "/jobs", caps, &n));
  assert_int_equal(n, 0);
  assert_false(route_match("/jobs", "/jobsx", caps, &n));
  assert_false(route_match("/jobs", "/job", caps, &n));
  assert_true(route_match("/projects/{project}/versions/{version}", "/projects/p1/versions/1.0",
                          caps, &n));
  assert_int_equal(n, 2);
  assert_int_equal(caps[0].name_len, 7);
  assert_memory_equal(caps[0].name, "project", 7);
  assert_int_equal(caps[0].value_len, 2);
  assert_memory_equal(caps[0].value, "p1", 2);
  assert_memory_equal(caps[1].value, "1.0", 3);
  /* A capture is one non-empty segment. */
  assert_false(route_match("/jobs/{id}", "/jobs/", caps, &n));
  assert_false(route_match("/jobs/{id}", "/jobs/1/log", caps, &n));
  assert_false(route_match("/jobs/{id}/log", "/jobs/1", caps, &n));
  assert_true(route_match("/jobs/{id}/log", "/jobs/abc/log", caps, &n));
  assert_false(route_match("/jobs/{id}/log", "/jobs//log", caps, &n));
}

static void cursors_round_trip(void **state) {
  (void)state;
  const int64_t ids[] = {1, 255, 256, 123456789, INT64_MAX};
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    char s[24];
    op_cursor_encode(ids[i], 0xdeadbeefu, s);
    assert_int_equal(strlen(s), 16);
    assert_int_equal(strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
                     16);
    int64_t id = 0;
    uint32_t fp = 0;
    assert_int_equal(op_cursor_decode(s, &id, &fp), 0);
    assert_true(id == ids[i]);
    assert_true(fp == 0xdeadbeefu);
  }
}

static void cursors_refuse_garbage(void **state) {
  (void)state;
  int64_t id;
  uint32_t fp;
  char s[24];
  assert_int_not_equal(op_cursor_decode("", &id, &fp), 0);
  assert_int_not_equal(op_cursor_decode("garbage", &id, &fp), 0);
  assert_int_not_equal(op_cursor_decode("AAAAAAAAAAAAAAAA", &id, &fp), 0); /* id 0 */
  assert_int_not_equal(op_cursor_decode("AAAAAAAAAAAAAAA!", &id, &fp), 0);
  op_cursor_encode(42, 7, s);
  strcat(s, "A");
  assert_int_not_equal(op_cursor_decode(s, &id, &fp), 0);
}

static json_t *parse(const char *s) {
  json_error_t e;
  json_t *j = json_loads(s, JSON_DECODE_ANY, &e);
  assert_non_null(j);
  return j;
}

static int check(const char *s, jsonrpc_call_t *c) {
  char err[256];
  json_t *j = parse(s);
  int rc = jsonrpc_check(j, c, err, sizeof(err));
  json_decref(j); /* c's borrowed pointers are not used after this */
  return rc;
}

static void jsonrpc_envelopes(void **state) {
  (void)state;
  jsonrpc_call_t c;
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}", &c), 0);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\"}", &c), 0);
  assert_null(c.id); /* a notification */
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":null,\"params\":[]}", &c),
                   0);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{},\"id\":\"x\"}", &c),
                   0);
  assert_int_equal(check("[]", &c), SPD_EBADREQUEST);
  assert_int_equal(check("5", &c), SPD_EBADREQUEST);
  assert_int_equal(check("{\"method\":\"m\",\"id\":1}", &c), SPD_EBADREQUEST);
  assert_int_equal(check("{\"jsonrpc\":\"1.0\",\"method\":\"m\",\"id\":1}", &c), SPD_EBADREQUEST);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"id\":1}", &c), SPD_EBADREQUEST);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":1,\"id\":1}", &c), SPD_EBADREQUEST);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":3}", &c),
                   SPD_EBADREQUEST);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":[1]}", &c),
                   SPD_EBADREQUEST);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":true}", &c),
                   SPD_EBADREQUEST);
  assert_int_equal(check("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"x\":1}", &c), SPD_EBADREQUEST);
  /* The id of an otherwise bad request is still read, for its error. */
  json_t *j = parse("{\"jsonrpc\":\"2.0\",\"method\":2,\"id\":7}");
  char err[256];
  assert_int_equal(jsonrpc_check(j, &c, err, sizeof(err)), SPD_EBADREQUEST);
  assert_int_equal(json_integer_value(c.id), 7);
  json_decref(j);
}

static int validate(const char *op, const char *params, char *err, json_t **out) {
  json_t *p = parse(params);
  json_t *details = NULL;
  int rc = op_validate(op_find(op), p, 0, err, 256, &details);
  json_decref(details);
  if (out) *out = p;
  else json_decref(p);
  return rc;
}

static void parameters(void **state) {
  (void)state;
  char err[256];
  json_t *p = NULL;
  assert_non_null(op_find("jobs.list"));
  assert_ptr_equal(op_find("kill_task"), op_find("jobs.cancel")); /* an alias */
  assert_null(op_find("get_task_instances")); /* Sneakpeek's, answered by api/sneakpeek.c */
  assert_null(op_find("nosuch"));
  assert_int_equal(validate("jobs.list", "{}", err, NULL), 0);
  assert_int_equal(validate("jobs.list", "{\"limit\": 0}", err, NULL), SPD_EBADPARAM);
  assert_int_equal(validate("jobs.list", "{\"limit\": \"5\"}", err, NULL), SPD_EBADPARAM);
  assert_string_equal(err, "'limit' must be an integer");
  assert_int_equal(validate("jobs.list", "{\"x\": 1}", err, NULL), SPD_EBADPARAM);
  assert_non_null(strstr(err, "unknown field 'x'"));
  assert_int_equal(validate("jobs.list", "{\"state\": \"pending,,running\"}", err, &p), 0);
  assert_int_equal(json_array_size(json_object_get(p, "state")), 2);
  json_decref(p);
  assert_int_equal(validate("jobs.list", "{\"state\": [1]}", err, NULL), SPD_EBADPARAM);
  assert_int_equal(validate("jobs.get", "{}", err, NULL), SPD_EMISSING);
  assert_int_equal(validate("jobs.get", "{\"id\": 12}", err, &p), 0);
  assert_string_equal(json_string_value(json_object_get(p, "id")), "12");
  json_decref(p);
  assert_int_equal(validate("jobs.get", "{\"id\": 0}", err, NULL), SPD_EBADPARAM);
  assert_int_equal(validate("jobs.get", "{\"id\": \"a/b\"}", err, NULL), SPD_EBADPARAM);
  assert_int_equal(validate("jobs.create", "{\"project\": \"..\", \"spider\": \"s\"}", err, NULL),
                   SPD_EBADPARAM);
  assert_int_equal(
      validate("jobs.create", "{\"project\": \"p\", \"spider\": \"s\", \"args\": {\"a\": 1}}", err,
               NULL),
      SPD_EBADPARAM);
  assert_string_equal(err, "'args.a' must be a string, not a number");
  /* null is absent for optional fields */
  assert_int_equal(
      validate("jobs.create", "{\"project\": \"p\", \"spider\": \"s\", \"version\": null}", err, &p),
      0);
  assert_null(json_object_get(p, "version"));
  json_decref(p);
}

static void coercion(void **state) {
  (void)state;
  char err[256];
  const op_param_t *limit = op_param(op_find("jobs.list"), "limit");
  json_t *v = op_coerce(limit, "25", err, sizeof(err));
  assert_int_equal(json_integer_value(v), 25);
  json_decref(v);
  assert_null(op_coerce(limit, "2x", err, sizeof(err)));
  assert_null(op_coerce(limit, "", err, sizeof(err)));
  assert_null(op_coerce(limit, "+3", err, sizeof(err)));
  v = op_coerce(op_param(op_find("jobs.log"), "offset"), "-100", err, sizeof(err));
  assert_int_equal(json_integer_value(v), -100);
  json_decref(v);
  assert_null(op_coerce(op_param(op_find("jobs.create"), "args"), "x", err, sizeof(err)));
  assert_null(op_coerce(op_param(op_find("jobs.create"), "priority"), "nan", err, sizeof(err)));
}

static void json_bodies(void **state) {
  (void)state;
  char err[256];
  json_t *j = NULL;
  assert_int_equal(op_parse_json("{\"a\": [1]}", 10, 100, 2, &j, err, sizeof(err)), 0);
  json_decref(j);
  assert_int_equal(op_parse_json("{\"a\": [[1]]}", 12, 100, 2, &j, err, sizeof(err)),
                   SPD_EBADJSON);
  /* Brackets inside strings do not count. */
  assert_int_equal(op_parse_json("{\"a\": \"[[[\\\"[[\"}", 16, 100, 1, &j, err, sizeof(err)), 0);
  json_decref(j);
  assert_int_equal(op_parse_json("{}", 2, 1, 2, &j, err, sizeof(err)), SPD_ETOOBIG);
  assert_int_equal(op_parse_json("{\"a\":1,\"a\":2}", 13, 100, 2, &j, err, sizeof(err)),
                   SPD_EBADJSON);
  assert_int_equal(op_parse_json("nul", 3, 100, 2, &j, err, sizeof(err)), SPD_EBADJSON);
}

static void base64(void **state) {
  (void)state;
  unsigned char *out = NULL;
  size_t n = 0;
  assert_int_equal(op_base64_decode("aGVsbG8=", 8, &out, &n), 0);
  assert_int_equal(n, 5);
  assert_memory_equal(out, "hello", 5);
  free(out);
  assert_int_equal(op_base64_decode("aGVsbG8", 7, &out, &n), 0);
  free(out);
  assert_int_equal(op_base64_decode("+/+/", 4, &out, &n), 0);
  assert_int_equal(n, 3);
  free(out);
  assert_int_not_equal(op_base64_decode("a", 1, &out, &n), 0);
  assert_int_not_equal(op_base64_decode("ab!c", 4, &out, &n), 0);
}

static void utf8_text(void **state) {
  (void)state;
  size_t used, len;
  char *t = op_utf8_text("ab\xc3\xa9", 4, 0, &used, &len);
  assert_string_equal(t, "ab\xc3\xa9");
  assert_int_equal(used, 4);
  free(t);
  /* A character cut at the end waits for the next read... */
  t = op_utf8_text("ab\xe2\x82", 4, 0, &used, &len);
  assert_string_equal(t, "ab");
  assert_int_equal(used, 2);
  free(t);
  /* ...unless nothing more will come. */
  t = op_utf8_text("ab\xe2\x82", 4, 1, &used, &len);
  assert_string_equal(t, "ab\xef\xbf\xbd\xef\xbf\xbd");
  assert_int_equal(used, 4);
  free(t);
  t = op_utf8_text("a\xff" "b", 3, 0, &used, &len);
  assert_string_equal(t, "a\xef\xbf\xbd" "b");
  free(t);
  t = op_utf8_text("a\0b", 3, 0, &used, &len);
  assert_int_equal(len, 3);
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(route_templates),   cmocka_unit_test(cursors_round_trip),
      cmocka_unit_test(cursors_refuse_garbage), cmocka_unit_test(jsonrpc_envelopes),
      cmocka_unit_test(parameters),        cmocka_unit_test(coercion),
      cmocka_unit_test(json_bodies),       cmocka_unit_test(base64),
      cmocka_unit_test(utf8_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
