/* Table-driven option parsing for the client sub-commands (args.h). */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt_t *find_long(const cli_opt_t *t, const char *name, size_t n) {
  for (; t->name; t++)
    if (strlen(t->name) == n && !strncmp(t->name, name, n)) return t;
  return NULL;
}

static const cli_opt_t *find_short(const cli_opt_t *t, char c) {
  for (; t->name; t++)
    if (t->short_name && t->short_name == c) return t;
  return NULL;
}

static int push_opt(cli_args_t *a, int id, const char *value) {
  cli_optval_t *o = realloc(a->opts, (a->nopts + 1) * sizeof(*o));
  if (!o) return -ENOMEM;
  a->opts = o;
  a->opts[a->nopts].id = id;
  a->opts[a->nopts].value = value;
  a->nopts++;
  return 0;
}

static int push_pos(cli_args_t *a, const char *value) {
  const char **p = realloc(a->pos, (a->npos + 1) * sizeof(*p));
  if (!p) return -ENOMEM;
  a->pos = p;
  a->pos[a->npos++] = value;
  return 0;
}

int cli_args_parse(const cli_opt_t *table, int argc, char **argv, cli_args_t *a, char *err,
                   size_t errlen) {
  memset(a, 0, sizeof(*a));
  int rc = 0, only_pos = 0;
  for (int i = 0; i < argc && !rc; i++) {
    const char *s = argv[i];
    if (only_pos || s[0] != '-' || !s[1]) {
      rc = push_pos(a, s);
    } else if (!strcmp(s, "--")) {
      only_pos = 1;
    } else if (s[1] == '-') {
      const char *eq = strchr(s + 2, '=');
      size_t n = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
      const cli_opt_t *o = find_long(table, s + 2, n);
      if (!o) {
        snprintf(err, errlen, "unknown option '--%.*s'", (int)n, s + 2);
        rc = -EINVAL;
      } else if (!o->has_arg && eq) {
        snprintf(err, errlen, "option '--%s' takes no value", o->name);
        rc = -EINVAL;
      } else if (o->has_arg && !eq && i + 1 >= argc) {
        snprintf(err, errlen, "option '--%s' needs a value", o->name);
        rc = -EINVAL;
      } else {
        rc = push_opt(a, o->id, o->has_arg ? (eq ? eq + 1 : argv[++i]) : NULL);
      }
    } else {
      const cli_opt_t *o = find_short(table, s[1]);
      if (!o) {
        snprintf(err, errlen, "unknown option '-%c'", s[1]);
        rc = -EINVAL;
      } else if (!o->has_arg && s[2]) {
        snprintf(err, errlen, "option '-%c' takes no value", s[1]);
        rc = -EINVAL;
      } else if (o->has_arg && !s[2] && i + 1 >= argc) {
        snprintf(err, errlen, "option '-%c' needs a value", s[1]);
        rc = -EINVAL;
      } else {
        rc = push_opt(a, o->id, o->has_arg ? (s[2] ? s + 2 : argv[++i]) : NULL);
      }
    }
  }
  if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
  if (rc) cli_args_release(a);
  return rc;
}

void cli_args_release(cli_args_t *a) {
  free(a->opts);
  free(a->pos);
  memset(a, 0, sizeof(*a));
}

const char *cli_args_get(const cli_args_t *a, int id) {
  for (size_t i = a->nopts; i-- > 0;)
    if (a->opts[i].id == id) return a->opts[i].value ? a->opts[i].value : "";
  return NULL;
}

int cli_parse_double(const char *s, double *out) {
  if (!s || !*s || isspace((unsigned char)*s)) return -EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || errno || !isfinite(v)) return -EINVAL;
  *out = v;
  return 0;
}

int cli_parse_long(const char *s, long long min, long long max, long long *out) {
  if (!s || !*s || isspace((unsigned char)*s)) return -EINVAL;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end || errno || v < min || v > max) return -EINVAL;
  *out = v;
  return 0;
}
