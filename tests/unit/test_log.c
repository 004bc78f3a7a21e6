/* Unit tests for log.h: JSON escaping (control characters, quotes, valid and
 * invalid UTF-8), the JSON line's fields and time, and what log_msg and
 * log_job write in each format to a real file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "strbuf.h"

/* The escape of IN, as a malloc'd string. */
static char *escaped(const char *in) {
  strbuf_t b = {0};
  assert_int_equal(log_json_escape(&b, in), 0);
  if (!b.p) strbuf_adds(&b, "");
  return b.p;
}

static void expect_escape(const char *in, const char *want) {
  char *got = escaped(in);
  assert_string_equal(got, want);
  /* and jansson reads it back as a string */
  char doc[1024];
  snprintf(doc, sizeof(doc), "[\"%s\"]", got);
  json_error_t err;
  json_t *j = json_loads(doc, 0, &err);
  if (!j) fail_msg("'%s' is not JSON: %s", doc, err.text);
  json_decref(j);
  free(got);
}

static void test_escape_plain(void **state) {
  (void)state;
  expect_escape("", "");
  expect_escape(NULL, "");
  expect_escape("Process started: project='p' pid=1", "Process started: project='p' pid=1");
  expect_escape("say \"hi\" \\ bye", "say \\\"hi\\\" \\\\ bye");
  expect_escape("/a/b", "/a/b");
}

static void test_escape_control(void **state) {
  (void)state;
  expect_escape("a\nb\rc\td", "a\\nb\\rc\\td");
  expect_escape("\b\f", "\\b\\f");
  expect_escape("\x01\x1f", "\\u0001\\u001f");
  expect_escape("del\x7f", "del\\u007f");
  expect_escape("\x1b[31mred\x1b[0m", "\\u001b[31mred\\u001b[0m");
}

static void test_escape_utf8(void **state) {
  (void)state;
  /* valid sequences of 2, 3 and 4 bytes pass unchanged */
  expect_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  expect_escape("\xed\x9f\xbf", "\xed\x9f\xbf");         /* U+D7FF, below the surrogates */
  expect_escape("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"); /* U+10FFFF, the last */
  /* every byte of an invalid sequence becomes U+FFFD, then reading resumes */
  expect_escape("a\x80" "b", "a\\ufffdb");             /* a lone continuation byte */
  expect_escape("\xc0\xaf", "\\ufffd\\ufffd");         /* overlong '/' */
  expect_escape("\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd"); /* overlong, 3 bytes */
  expect_escape("\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd"); /* a surrogate */
  expect_escape("\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd"); /* above U+10FFFF */
  expect_escape("\xf5\xff\xfe", "\\ufffd\\ufffd\\ufffd");
  expect_escape("end\xe2\x82", "end\\ufffd\\ufffd"); /* cut short by the end */
  expect_escape("\xe2\x82\"", "\\ufffd\\ufffd\\\"");  /* cut short by a quote */
  expect_escape("\xc3\n", "\\ufffd\\n");
}

static json_t *parse_line(const char *line) {
  json_error_t err;
  size_t n = strlen(line);
  assert_true(n > 0);
  assert_int_equal(line[n - 1], '\n');
  assert_null(memchr(line, '\n', n - 1)); /* one line, whatever the message */
  json_t *j = json_loads(line, 0, &err);
  if (!j) fail_msg("'%s' is not JSON: %s", line, err.text);
  return j;
}

static const char *field(json_t *j, const char *name) {
  return json_string_value(json_object_get(j, name));
}

static void test_line_fields(void **state) {
  (void)state;
  strbuf_t b = {0};
  log_ctx_t ctx = {"job1", "proj", "sp\"ider"};
  /* 2023-11-14T22:13:20.123 UTC */
  assert_int_equal(log_json_line(&b, 1700000000123LL, LOG_WARNING, "launcher", "node-1", &ctx,
                                 "multi\nline \xff message"),
                   0);
  json_t *j = parse_line(b.p);
  assert_string_equal(field(j, "time"), "2023-11-14T22:13:20.123Z");
  assert_string_equal(field(j, "level"), "warning");
  assert_string_equal(field(j, "component"), "launcher");
  assert_string_equal(field(j, "node"), "node-1");
  assert_string_equal(field(j, "message"), "multi\nline \xef\xbf\xbd message");
  assert_string_equal(field(j, "project"), "proj");
  assert_string_equal(field(j, "spider"), "sp\"ider");
  assert_string_equal(field(j, "job"), "job1");
  assert_int_equal(json_object_size(j), 8);
  json_decref(j);
  /* the time's milliseconds are zero-padded, and fields unknown are left out */
  b.len = 0;
  log_ctx_t partial = {"j2", NULL, NULL};
  assert_int_equal(log_json_line(&b, 5, LOG_DEBUG, "main", NULL, &partial, "m"), 0);
  assert_string_equal(b.p, "{\"time\":\"1970-01-01T00:00:00.005Z\",\"level\":\"debug\","
                           "\"component\":\"main\",\"message\":\"m\",\"job\":\"j2\"}\n");
  b.len = 0;
  assert_int_equal(log_json_line(&b, 1000, LOG_ERROR, "http", "n", NULL, ""), 0);
  j = parse_line(b.p);
  assert_int_equal(json_object_size(j), 5);
  assert_null(json_object_get(j, "job"));
  json_decref(j);
  strbuf_release(&b);
}

/* What the log wrote to a file, after FN ran with it open. */
static char *written(const char *format, void (*fn)(void)) {
  char path[] = "/tmp/test_log.XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(log_open(path), 0);
  assert_int_equal(log_set_format(format), 0);
  assert_int_equal(log_set_node("n1"), 0);
  fn();
  log_close();
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
  buf[n] = '\0';
  fclose(fp);
  unlink(path);
  return buf;
}

struct fake_job {
  const char *jobid, *project, *spider;
};

static void write_some(void) {
  struct fake_job j = {"abc", "proj", "sp"};
  log_info("main", "plain %d", 1);
  log_job(LOG_ERROR, "launcher", &j, "Process died: job='%s'", j.jobid);
  log_debug("main", "not written at info");
}

/* Line N (from 0) of TEXT, with its '\n', in a malloc'd string. */
static char *line_of(const char *text, int n) {
  for (int i = 0; i < n; i++) {
    text = strchr(text, '\n');
    assert_non_null(text);
    text++;
  }
  const char *nl = strchr(text, '\n');
  assert_non_null(nl);
  return strndup(text, (size_t)(nl - text) + 1);
}

static void test_writes_json(void **state) {
  (void)state;
  char *text = written("json", write_some);
  char *l1 = line_of(text, 0), *l2 = line_of(text, 1);
  assert_null(strchr(strchr(text, '\n') + 1, '\n')[1] ? "a third line" : NULL);
  json_t *a = parse_line(l1);
  assert_string_equal(field(a, "message"), "plain 1");
  assert_string_equal(field(a, "node"), "n1");
  assert_null(json_object_get(a, "job"));
  json_decref(a);
  json_t *b = parse_line(l2);
  assert_string_equal(field(b, "level"), "error");
  assert_string_equal(field(b, "job"), "abc");
  assert_string_equal(field(b, "project"), "proj");
  assert_string_equal(field(b, "spider"), "sp");
  assert_string_equal(field(b, "message"), "Process died: job='abc'");
  json_decref(b);
  free(l1);
  free(l2);
}

static void test_writes_text(void **state) {
  (void)state;
  char *text = written("text", write_some);
  /* twistd's layout, unchanged: the job is in the message only */
  assert_non_null(strstr(text, " [spiderd.main#info] plain 1\n"));
  assert_non_null(strstr(text, " [spiderd.launcher#error] Process died: job='abc'\n"));
  assert_null(strstr(text, "not written"));
  assert_null(strchr(text, '{'));
}

static void test_set_format(void **state) {
  (void)state;
  assert_int_equal(log_set_format("xml"), -22);
  assert_int_equal(log_set_format("json"), 0);
  assert_int_equal(log_set_format("text"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape_plain),  cmocka_unit_test(test_escape_control),
      cmocka_unit_test(test_escape_utf8),   cmocka_unit_test(test_line_fields),
      cmocka_unit_test(test_writes_json),   cmocka_unit_test(test_writes_text),
      cmocka_unit_test(test_set_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
