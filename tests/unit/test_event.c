/* The one list of event types (core/event.h) and the copies that people and
 * clients read: the OpenAPI document's enum and the table in docs/api.md must
 * say exactly what the list says, in its order. When one of them fails, the
 * test prints what that copy should hold. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/event.h"

extern const unsigned char api_openapi_json[];
extern const size_t api_openapi_json_len;

/* "family.what": lowercase letters, one dot, then letters and '_'. */
static int well_formed(const char *s) {
  const char *dot = strchr(s, '.');
  if (!dot || dot == s || !dot[1] || strchr(dot + 1, '.')) return 0;
  for (const char *p = s; *p; p++)
    if (p != dot && !(islower((unsigned char)*p) || (p > dot && *p == '_'))) return 0;
  return 1;
}

static void test_names_are_well_formed_and_unique(void **state) {
  (void)state;
  size_t n;
  const event_type_t *t = event_types(&n);
  assert_int_equal(n, 35);
  for (size_t i = 0; i < n; i++) {
    if (!well_formed(t[i].name)) fail_msg("event type '%s' is not family.what", t[i].name);
    if (!t[i].meaning[0] || strchr(t[i].meaning, '\n') || strchr(t[i].meaning, '|'))
      fail_msg("event type '%s': its meaning must be one line, without '|'", t[i].name);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(t[i].name, t[j].name)) fail_msg("event type '%s' is listed twice", t[i].name);
  }
}

static void test_constants_and_valid(void **state) {
  (void)state;
  assert_string_equal(EV_JOB_QUEUED, "job.queued");
  assert_string_equal(EV_USER_UPDATE_REFUSED, "user.update_refused");
  assert_string_equal(EV_RUN_SKIPPED, "run.skipped");
  size_t n;
  const event_type_t *t = event_types(&n);
  for (size_t i = 0; i < n; i++) assert_true(event_type_valid(t[i].name));
  const char *bad[] = {NULL, "", "job.", "job", ".queued", "job.queued ", "Job.queued",
                       "job.queue", "job.queuedx", "jobs.queued", "schedule.json"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (event_type_valid(bad[i])) fail_msg("'%s' taken for an event type", bad[i]);
}

static void print_enum(const event_type_t *t, size_t n) {
  fprintf(stderr, "components.schemas.Event.properties.type.enum should be:\n");
  for (size_t i = 0; i < n; i++)
    fprintf(stderr, "            \"%s\"%s\n", t[i].name, i + 1 < n ? "," : "");
}

/* The served document (compiled in from src/api/openapi.json, which
 * test_rest.py holds byte for byte to what is served). */
static void test_openapi_enum_is_the_list(void **state) {
  (void)state;
  json_error_t err;
  json_t *doc = json_loadb((const char *)api_openapi_json, api_openapi_json_len, 0, &err);
  if (!doc) fail_msg("openapi.json: %s (line %d)", err.text, err.line);
  json_t *e = json_object_get(doc, "components");
  const char *path[] = {"schemas", "Event", "properties", "type", "enum"};
  for (size_t i = 0; e && i < sizeof(path) / sizeof(path[0]); i++) e = json_object_get(e, path[i]);
  size_t n;
  const event_type_t *t = event_types(&n);
  int same = json_is_array(e) && json_array_size(e) == n;
  for (size_t i = 0; same && i < n; i++)
    same = !strcmp(json_string_value(json_array_get(e, i)) ?: "", t[i].name);
  if (!same) print_enum(t, n);
  json_decref(doc);
  assert_true(same);
}

static char *slurp(const char *file) {
  FILE *f = fopen(file, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0, got;
  char chunk[65536];
  while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (len + got + 1 > cap) {
      cap = (len + got + 1) * 2;
      char *nb = realloc(buf, cap);
      if (!nb) break;
      buf = nb;
    }
    memcpy(buf + len, chunk, got);
    len += got;
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

/* The rows of the table under "### Event types" in docs/api.md. */
static void test_docs_table_is_the_list(void **state) {
  (void)state;
  char *md = slurp(SPIDERD_SOURCE_DIR "/docs/api.md");
  assert_non_null(md);
  const char *at = strstr(md, "\n### Event types\n");
  assert_non_null(at);
  const char *row = strstr(at, "\n|---|---|\n");
  assert_non_null(row);
  row += strlen("\n|---|---|\n");
  size_t n, i = 0;
  const event_type_t *t = event_types(&n);
  char want[512];
  int same = 1;
  for (; same && i < n; i++) {
    int len = snprintf(want, sizeof(want), "| `%s` | %s |\n", t[i].name, t[i].meaning);
    same = !strncmp(row, want, (size_t)len);
    row += len;
  }
  if (same && *row == '|') same = 0; /* a row the list does not have */
  if (!same) {
    fprintf(stderr, "docs/api.md, \"Event types\": the table should be:\n| type | what happened |\n|---|---|\n");
    for (i = 0; i < n; i++) fprintf(stderr, "| `%s` | %s |\n", t[i].name, t[i].meaning);
  }
  free(md);
  assert_true(same);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_are_well_formed_and_unique),
      cmocka_unit_test(test_constants_and_valid),
      cmocka_unit_test(test_openapi_enum_is_the_list),
      cmocka_unit_test(test_docs_table_is_the_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
