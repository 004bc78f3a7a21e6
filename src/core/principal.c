/* Users and API tokens: roles and project limits (core/principal.h). */
#include "core/principal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"

void principal_release(principal_t *p) {
  if (!p) return;
  free(p->name);
  free(p->label);
  free(p->secret);
  free(p->owner);
  free(p->projects);
  memset(p, 0, sizeof(*p));
}

ARRAY_LIST_RELEASE(principal_list_release, principal_list_t, principal_release)

static const char *const role_names[] = {"none", "read", "run", "deploy", "admin"};

const char *role_name(role_t r) {
  return r >= ROLE_NONE && r <= ROLE_ADMIN ? role_names[r] : "none";
}

role_t role_parse(const char *s) {
  for (int r = ROLE_READ; s && r <= ROLE_ADMIN; r++)
    if (!strcmp(s, role_names[r])) return (role_t)r;
  return ROLE_NONE;
}

/* Is the n bytes at name one of the comma-separated entries of list? */
static int in_list(const char *list, const char *name, size_t n) {
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    if (len == n && !memcmp(p, name, n)) return 1;
    p += len;
    if (*p == ',') p++;
  }
  return 0;
}

int principal_project_ok(const char *projects, const char *project) {
  if (!projects || !*projects) return 1;
  if (!strcmp(projects, PRINCIPAL_PROJECTS_NONE)) return 0;
  return project && *project && in_list(projects, project, strlen(project));
}

int principal_queue_ok(const char *projects, const char *q) {
  if (!projects || !*projects) return 1;
  if (!q || !*q || !strcmp(projects, PRINCIPAL_PROJECTS_NONE)) return 0;
  return in_list(projects, q, strcspn(q, "."));
}

int principal_projects_within(const char *outer, const char *inner) {
  if (!outer || !*outer) return 1;
  if (!inner || !*inner || !strcmp(outer, PRINCIPAL_PROJECTS_NONE)) return 0;
  for (const char *p = inner; *p;) {
    size_t len = strcspn(p, ",");
    if (len && !in_list(outer, p, len)) return 0;
    p += len;
    if (*p == ',') p++;
  }
  return 1;
}

int principal_name_valid(const char *s, char *err, size_t errlen) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > PRINCIPAL_NAME_MAX) {
    snprintf(err, errlen, "a name must have 1 to %d characters", PRINCIPAL_NAME_MAX);
    return 0;
  }
  if (s[0] == '-') {
    snprintf(err, errlen, "name '%s' must not start with '-'", s);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.' || c == '@' || c == '-')) {
      snprintf(err, errlen,
               "name '%.80s' may hold only letters, digits and '_', '.', '@', '-'", s);
      return 0;
    }
  }
  return 1;
}
