/* Roles, project limits and the secrets of users and tokens: core/principal.c
 * and the pure parts of api/auth.c (what a request may do is tested against
 * a real daemon in tests/integration/test_auth.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/auth.h"
#include "core/principal.h"

static void test_roles(void **state) {
  const char *names[] = {"read", "run", "deploy", "admin"};
  for (int r = ROLE_READ; r <= ROLE_ADMIN; r++) {
    assert_string_equal(role_name((role_t)r), names[r - 1]);
    assert_int_equal(role_parse(names[r - 1]), r);
  }
  assert_int_equal(role_parse("root"), ROLE_NONE);
  assert_int_equal(role_parse("Admin"), ROLE_NONE);
  assert_int_equal(role_parse(""), ROLE_NONE);
  assert_int_equal(role_parse(NULL), ROLE_NONE);
  assert_true(ROLE_READ < ROLE_RUN && ROLE_RUN < ROLE_DEPLOY && ROLE_DEPLOY < ROLE_ADMIN);
}

static void test_projects(void **state) {
  assert_true(principal_project_ok("", "anything"));
  assert_true(principal_project_ok(NULL, "anything"));
  assert_true(principal_project_ok("news", "news"));
  assert_true(principal_project_ok("a,news,b", "news"));
  assert_false(principal_project_ok("news", "new"));
  assert_false(principal_project_ok("news", "newsx"));
  assert_false(principal_project_ok("a,news", "a,news")); /* a name never holds ',' */
  assert_false(principal_project_ok("news", ""));
  assert_false(principal_project_ok("news", NULL));
}

static void test_queues(void **state) {
  assert_true(principal_queue_ok("", "whatever"));
  assert_true(principal_queue_ok("news", "news"));
  assert_true(principal_queue_ok("news", "news.urls"));
  assert_true(principal_queue_ok("shop,news", "news.a.b"));
  assert_false(principal_queue_ok("news", "newsroom"));
  assert_false(principal_queue_ok("news", "shop.news"));
  assert_false(principal_queue_ok("news", ".news"));
  assert_false(principal_queue_ok("news", ""));
}

static void test_within(void **state) {
  assert_true(principal_projects_within("", ""));
  assert_true(principal_projects_within("", "a,b"));
  assert_true(principal_projects_within("a,b", "b"));
  assert_true(principal_projects_within("a,b", "b,a"));
  assert_false(principal_projects_within("a,b", "")); /* every project is more */
  assert_false(principal_projects_within("a", "a,c"));
}

static void test_names(void **state) {
  char err[128];
  assert_true(principal_name_valid("alice", err, sizeof(err)));
  assert_true(principal_name_valid("ops.bot@example.com", err, sizeof(err)));
  assert_false(principal_name_valid("", err, sizeof(err)));
  assert_false(principal_name_valid("-x", err, sizeof(err)));
  assert_false(principal_name_valid("a b", err, sizeof(err)));
  assert_non_null(strstr(err, "letters, digits"));
  assert_false(principal_name_valid("a:b", err, sizeof(err)));
  char longname[PRINCIPAL_NAME_MAX + 2];
  memset(longname, 'a', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  assert_false(principal_name_valid(longname, err, sizeof(err)));
  longname[PRINCIPAL_NAME_MAX] = '\0';
  assert_true(principal_name_valid(longname, err, sizeof(err)));
}

static void test_allow(void **state) {
  auth_who_t w = {AUTH_TOKEN, ROLE_RUN, "token x (t)", "x", "news", "127.0.0.1", 0, NULL, NULL, NULL};
  char err[256];
  assert_int_equal(auth_allow(&w, ROLE_READ, NULL, err, sizeof(err)), 0);
  assert_int_equal(auth_allow(&w, ROLE_RUN, "news", err, sizeof(err)), 0);
  assert_int_not_equal(auth_allow(&w, ROLE_DEPLOY, "news", err, sizeof(err)), 0);
  assert_non_null(strstr(err, "'deploy'"));
  assert_int_not_equal(auth_allow(&w, ROLE_READ, "shop", err, sizeof(err)), 0);
  assert_non_null(strstr(err, "shop"));
  assert_int_equal(auth_allow_queue(&w, ROLE_RUN, "news.urls", err, sizeof(err)), 0);
  assert_int_not_equal(auth_allow_queue(&w, ROLE_RUN, "shop.urls", err, sizeof(err)), 0);
}

static void test_event_visibility(void **state) {
  auth_who_t all = {AUTH_USER, ROLE_READ, "a", "a", "", "?", 0, NULL, NULL, NULL};
  auth_who_t news = {AUTH_USER, ROLE_READ, "n", "n", "news", "?", 0, NULL, NULL, NULL};
  event_t e = {.type = "job.queued", .data = json_pack("{s:s}", "project", "news")};
  assert_true(auth_event_visible(&all, &e));
  assert_true(auth_event_visible(&news, &e));
  json_object_set_new(e.data, "project", json_string("shop"));
  assert_false(auth_event_visible(&news, &e));
  json_decref(e.data);
  e.data = json_pack("{s:s}", "queue", "news.urls");
  assert_true(auth_event_visible(&news, &e));
  json_decref(e.data);
  e.data = json_pack("{s:s}", "user", "bob"); /* neither: not its business */
  assert_false(auth_event_visible(&news, &e));
  assert_true(auth_event_visible(&all, &e));
  json_decref(e.data);
}

static void test_tokens(void **state) {
  char id[17], text[96], hash[65], id2[17], text2[96], hash2[65], again[65];
  assert_int_equal(auth_token_new(id, text, hash), 0);
  assert_int_equal(auth_token_new(id2, text2, hash2), 0);
  assert_int_equal(strlen(id), 16);
  assert_int_equal(strlen(hash), 64);
  assert_string_not_equal(id, id2);
  assert_string_not_equal(hash, hash2);
  char want[40];
  snprintf(want, sizeof(want), "sdt_%s_", id);
  assert_memory_equal(text, want, strlen(want));
  const char *secret = text + strlen(want);
  assert_int_equal(strlen(secret), 64);
  /* what is kept is not the secret, and only the secret makes it */
  assert_null(strstr(hash, secret));
  assert_int_equal(auth_token_hash(secret, again), 0);
  assert_string_equal(again, hash);
  assert_int_equal(auth_token_hash(text2 + strlen(want), again), 0);
  assert_string_not_equal(again, hash);
}

static void test_passwords(void **state) {
  char *kept = auth_password_hash("correct horse");
  char *other = auth_password_hash("correct horse");
  assert_non_null(kept);
  assert_non_null(other);
  assert_memory_equal(kept, "pbkdf2-sha256$100000$", 21);
  assert_string_not_equal(kept, other); /* salted */
  assert_null(strstr(kept, "correct"));
  assert_true(auth_password_check(kept, "correct horse"));
  assert_true(auth_password_check(other, "correct horse"));
  assert_false(auth_password_check(kept, "correct horsE"));
  assert_false(auth_password_check(kept, ""));
  /* a damaged hash never matches */
  kept[strlen(kept) - 1] = kept[strlen(kept) - 1] == '0' ? '1' : '0';
  assert_false(auth_password_check(kept, "correct horse"));
  assert_false(auth_password_check("pbkdf2-sha256$0$00$00", "x"));
  assert_false(auth_password_check("plain", "plain"));
  free(kept);
  free(other);
}

static void test_node_tokens(void **state) {
  char a[128], b[128], c[128];
  const char *secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  assert_int_equal(auth_node_token(secret, "/logs/p/s/j.log", 1700000000000, a), 0);
  assert_int_equal(auth_node_token(secret, "/logs/p/s/k.log", 1700000000000, b), 0);
  assert_int_equal(auth_node_token("another secret", "/logs/p/s/j.log", 1700000000000, c), 0);
  assert_memory_equal(a, "sdn.1700000000.", 15);
  assert_string_not_equal(a, b); /* bound to its path */
  assert_string_not_equal(a, c); /* and to the cluster's secret */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roles),
      cmocka_unit_test(test_projects),
      cmocka_unit_test(test_queues),
      cmocka_unit_test(test_within),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_allow),
      cmocka_unit_test(test_event_visibility),
      cmocka_unit_test(test_tokens),
      cmocka_unit_test(test_passwords),
      cmocka_unit_test(test_node_tokens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
