#include "core/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "error.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    int w = snprintf(err, errlen, MANIFEST_NAME ": ");
    va_list ap;
    va_start(ap, fmt);
    if (w >= 0 && (size_t)w < errlen) vsnprintf(err + w, errlen - (size_t)w, fmt, ap);
    va_end(ap);
  }
  return SPD_EBADEGG;
}

static int is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Length of the placeholder "{name}" at s (0 when s is not one). */
static size_t placeholder_at(const char *s) {
  if (s[0] != '{') return 0;
  size_t i = 1;
  while (is_ident(s[i])) i++;
  return (i > 1 && s[i] == '}') ? i + 1 : 0;
}

static void argv_free(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) free(*p);
  free(v);
}

void manifest_argv_free(char **argv) { argv_free(argv); }

/* A validated copy of command (what: whose command, for messages). */
static int command_parse(const json_t *cmd, const char *what, char ***out, char *err,
                         size_t errlen) {
  *out = NULL;
  if (!json_is_array(cmd))
    return fail(err, errlen, "the command of %s must be an array of strings", what);
  size_t n = json_array_size(cmd);
  if (n == 0) return fail(err, errlen, "the command of %s is empty", what);
  if (n > MANIFEST_MAX_ARGS)
    return fail(err, errlen, "the command of %s has more than %d entries", what,
                MANIFEST_MAX_ARGS);
  char **v = calloc(n + 1, sizeof(*v));
  if (!v) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    const json_t *a = json_array_get(cmd, i);
    if (!json_is_string(a)) {
      argv_free(v);
      return fail(err, errlen, "entry %zu of the command of %s is not a string", i, what);
    }
    const char *s = json_string_value(a);
    if (strlen(s) != json_string_length(a)) {
      argv_free(v);
      return fail(err, errlen, "entry %zu of the command of %s holds a NUL character", i, what);
    }
    if (i == 0 && !*s) {
      argv_free(v);
      return fail(err, errlen, "the command of %s starts with an empty program name", what);
    }
    for (const char *p = s; *p; p++) {
      size_t ph = placeholder_at(p);
      if (!ph) continue;
      if (ph != sizeof("{spider}") - 1 || strncmp(p, "{spider}", ph) != 0) {
        argv_free(v);
        return fail(err, errlen,
                    "unknown placeholder '%.*s' in the command of %s (only {spider} is "
                    "replaced)",
                    (int)ph, p, what);
      }
      p += ph - 1;
    }
    if (!(v[i] = strdup(s))) {
      argv_free(v);
      return -ENOMEM;
    }
  }
  *out = v;
  return 0;
}

static char **argv_dup(char **src) {
  size_t n = 0;
  while (src[n]) n++;
  char **v = calloc(n + 1, sizeof(*v));
  for (size_t i = 0; v && i < n; i++)
    if (!(v[i] = strdup(src[i]))) {
      argv_free(v);
      return NULL;
    }
  return v;
}

static int spider_cmp(const void *a, const void *b) {
  return strcmp(((const manifest_spider_t *)a)->name, ((const manifest_spider_t *)b)->name);
}

/* Adds spider name with command spec (NULL: the default, dflt). */
static int add_spider(manifest_t *m, const char *name, const json_t *spec, char **dflt,
                      int resumable, char *err, size_t errlen) {
  char why[256];
  if (!name_valid("spider", name, why, sizeof(why)))
    return fail(err, errlen, "%s", why);
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->spiders[i].name, name))
      return fail(err, errlen, "spider '%s' is listed twice", name);
  char what[256];
  snprintf(what, sizeof(what), "spider '%s'", name);
  char **cmd = NULL;
  if (spec) {
    if (!json_is_object(spec))
      return fail(err, errlen, "spider '%s' must be an object such as {\"command\": [...]}",
                  name);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)spec, key, val) {
      if (strcmp(key, "command") != 0 && strcmp(key, "resumable") != 0)
        return fail(err, errlen, "unknown key '%s' in spider '%s' (known: command, resumable)",
                    key, name);
    }
    const json_t *r = json_object_get(spec, "resumable");
    if (r && !json_is_boolean(r))
      return fail(err, errlen, "\"resumable\" of spider '%s' must be true or false", name);
    if (r) resumable = json_is_true(r);
    const json_t *c = json_object_get(spec, "command");
    if (c) {
      int rc = command_parse(c, what, &cmd, err, errlen);
      if (rc) return rc;
    }
  }
  if (!cmd) {
    if (!dflt)
      return fail(err, errlen, "spider '%s' has no command and there is no top-level \"command\"",
                  name);
    if (!(cmd = argv_dup(dflt))) return -ENOMEM;
  }
  char *nm = strdup(name);
  if (!nm) {
    argv_free(cmd);
    return -ENOMEM;
  }
  m->spiders[m->n].name = nm;
  m->spiders[m->n].command = cmd;
  m->spiders[m->n].resumable = resumable;
  m->n++;
  return 0;
}

int manifest_parse(const char *text, size_t len, manifest_t *m, char *err, size_t errlen) {
  json_error_t je;
  char **dflt = NULL;
  int rc;

  memset(m, 0, sizeof(*m));
  if (len > MANIFEST_MAX_BYTES)
    return fail(err, errlen, "larger than %d bytes", MANIFEST_MAX_BYTES);
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) return fail(err, errlen, "not valid JSON: %s (line %d)", je.text, je.line);
  rc = SPD_EBADEGG;
  if (!json_is_object(root)) {
    fail(err, errlen, "must be a JSON object");
    goto out;
  }
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "spiders") != 0 && strcmp(key, "command") != 0 &&
        strcmp(key, "resumable") != 0) {
      fail(err, errlen, "unknown key '%s' (known: spiders, command, resumable)", key);
      goto out;
    }
  }
  const json_t *res = json_object_get(root, "resumable");
  if (res && !json_is_boolean(res)) {
    fail(err, errlen, "\"resumable\" must be true or false");
    goto out;
  }
  int resumable = json_is_true(res);
  const json_t *cmd = json_object_get(root, "command");
  if (cmd && (rc = command_parse(cmd, "the project", &dflt, err, errlen))) goto out;
  rc = SPD_EBADEGG;
  const json_t *sp = json_object_get(root, "spiders");
  size_t n = json_is_object(sp) ? json_object_size(sp) : json_is_array(sp) ? json_array_size(sp) : 0;
  if (!sp) {
    fail(err, errlen, "no \"spiders\"");
    goto out;
  }
  if (!json_is_object(sp) && !json_is_array(sp)) {
    fail(err, errlen, "\"spiders\" must be an object (name -> {\"command\": [...]}) or an "
                      "array of names");
    goto out;
  }
  if (n == 0) {
    fail(err, errlen, "\"spiders\" is empty");
    goto out;
  }
  if (n > MANIFEST_MAX_SPIDERS) {
    fail(err, errlen, "more than %d spiders", MANIFEST_MAX_SPIDERS);
    goto out;
  }
  if (json_is_array(sp) && !dflt) {
    fail(err, errlen, "\"spiders\" is a list of names, so a top-level \"command\" is needed");
    goto out;
  }
  rc = -ENOMEM;
  m->spiders = calloc(n, sizeof(*m->spiders));
  if (!m->spiders) goto out;
  if (json_is_object(sp)) {
    json_object_foreach((json_t *)sp, key, val) {
      if ((rc = add_spider(m, key, val, dflt, resumable, err, errlen))) goto out;
    }
  } else {
    size_t i;
    json_array_foreach(sp, i, val) {
      if (!json_is_string(val)) {
        rc = fail(err, errlen, "entry %zu of \"spiders\" is not a string", i);
        goto out;
      }
      if ((rc = add_spider(m, json_string_value(val), NULL, dflt, resumable, err, errlen)))
        goto out;
    }
  }
  qsort(m->spiders, m->n, sizeof(*m->spiders), spider_cmp);
  rc = 0;
out:
  argv_free(dflt);
  json_decref(root);
  if (rc) manifest_release(m);
  return rc;
}

void manifest_release(manifest_t *m) {
  for (size_t i = 0; m->spiders && i < m->n; i++) {
    free(m->spiders[i].name);
    argv_free(m->spiders[i].command);
  }
  free(m->spiders);
  memset(m, 0, sizeof(*m));
}

const manifest_spider_t *manifest_find(const manifest_t *m, const char *name) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->spiders[i].name, name)) return &m->spiders[i];
  return NULL;
}

static char *substitute(const char *s, const char *spider) {
  size_t count = 0, sl = strlen(spider), pl = sizeof("{spider}") - 1;
  for (const char *p = s; (p = strstr(p, "{spider}")); p += pl) count++;
  char *out = malloc(strlen(s) + count * sl + 1), *w = out;
  if (!out) return NULL;
  for (const char *p = s;;) {
    const char *hit = strstr(p, "{spider}");
    if (!hit) {
      strcpy(w, p);
      break;
    }
    memcpy(w, p, (size_t)(hit - p));
    w += hit - p;
    memcpy(w, spider, sl);
    w += sl;
    p = hit + pl;
  }
  return out;
}

char **manifest_argv(const manifest_spider_t *s, const char *spider) {
  size_t n = 0;
  while (s->command[n]) n++;
  char **v = calloc(n + 1, sizeof(*v));
  for (size_t i = 0; v && i < n; i++)
    if (!(v[i] = substitute(s->command[i], spider))) {
      argv_free(v);
      return NULL;
    }
  return v;
}

static int member_fail(char *err, size_t errlen, const char *name, const char *why) {
  if (err && errlen) snprintf(err, errlen, "archive member '%s': %s", name, why);
  return SPD_EBADEGG;
}

/* Has path a ".." component? */
static int has_dotdot(const char *path) {
  for (const char *p = path; *p;) {
    size_t len = strcspn(p, "/");
    if (len == 2 && p[0] == '.' && p[1] == '.') return 1;
    p += len;
    while (*p == '/') p++;
  }
  return 0;
}

int manifest_member_check(const char *name, char *err, size_t errlen) {
  if (!name || !*name) return member_fail(err, errlen, "", "empty name");
  if (name[0] == '/') return member_fail(err, errlen, name, "absolute paths are not allowed");
  if (has_dotdot(name)) return member_fail(err, errlen, name, "'..' is not allowed");
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    if (*p == '\\') return member_fail(err, errlen, name, "backslashes are not allowed");
    if (*p < 0x20 || *p == 0x7f)
      return member_fail(err, errlen, name, "control characters are not allowed");
  }
  return 0;
}

int manifest_link_check(const char *member, const char *target, char *err, size_t errlen) {
  if (!target || !*target) return member_fail(err, errlen, member, "symlink without a target");
  if (target[0] == '/' || has_dotdot(target)) {
    if (err && errlen)
      snprintf(err, errlen,
               "archive member '%s': symlink to '%s' may point outside the project (only "
               "relative targets without '..' are allowed)",
               member, target);
    return SPD_EBADEGG;
  }
  return 0;
}
