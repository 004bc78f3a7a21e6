/* Accounts' document (core/account.h). */
#include "core/account.h"

#include <stdlib.h>
#include <string.h>

int account_has(const json_t *a, const char *field, const char *s) {
  size_t i;
  json_t *v;
  if (!s) return 0;
  json_array_foreach(json_object_get(a, field), i, v) {
    const char *x = json_string_value(v);
    if (x && !strcmp(x, s)) return 1;
  }
  return 0;
}

const char *account_find(const json_t *doc, const char *field, const char *s) {
  const char *name;
  json_t *a;
  json_object_foreach((json_t *)doc, name, a) {
    if (account_has(a, field, s)) return name;
  }
  return NULL;
}

const char *account_of(const json_t *doc, principal_kind_t kind, const char *name,
                       const char *owner) {
  if (!doc) return NULL;
  if (kind == PRINCIPAL_USER) return account_find(doc, ACCOUNT_USERS, name);
  const char *a = account_find(doc, ACCOUNT_TOKENS, name);
  return a || !owner || !*owner ? a : account_find(doc, ACCOUNT_USERS, owner);
}

char *account_scope(const json_t *doc, const char *account, const char *own) {
  const json_t *arr = json_object_get(json_object_get(doc, account), ACCOUNT_PROJECTS);
  size_t i, len = 1;
  json_t *v;
  json_array_foreach(arr, i, v) len += json_string_length(v) + 1;
  char *out = calloc(1, len + sizeof(PRINCIPAL_PROJECTS_NONE));
  if (!out) return NULL;
  json_array_foreach(arr, i, v) {
    const char *p = json_string_value(v);
    if (!p || !principal_project_ok(own, p)) continue;
    if (*out) strcat(out, ",");
    strcat(out, p);
  }
  if (!*out) strcpy(out, PRINCIPAL_PROJECTS_NONE);
  return out;
}

int64_t account_max_running(const json_t *doc, const char *account) {
  json_int_t n = json_integer_value(json_object_get(json_object_get(doc, account),
                                                    "max_running"));
  return n > 0 ? (int64_t)n : 0;
}
