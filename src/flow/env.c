#include "flow/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* environ (_GNU_SOURCE) */

#include "core/array.h"

typedef struct {
  char **v;
  size_t n, cap;
} envv_t;

/* Length of the name in "NAME=VALUE" (the whole string when it has no '='). */
static size_t name_len(const char *kv) {
  const char *eq = strchr(kv, '=');
  return eq ? (size_t)(eq - kv) : strlen(kv);
}

static int envv_find(const envv_t *e, const char *name, size_t nlen) {
  for (size_t i = 0; i < e->n; i++)
    if (strncmp(e->v[i], name, nlen) == 0 && e->v[i][nlen] == '=') return (int)i;
  return -1;
}

/* Takes ownership of kv (freed on failure). A name present several times in
 * environ is left once, so the child cannot see a stale duplicate. */
static int envv_put(envv_t *e, char *kv) {
  size_t nlen;
  int at;

  if (!kv) return -1;
  nlen = name_len(kv);
  at = envv_find(e, kv, nlen);
  if (at >= 0) {
    free(e->v[at]);
    e->v[at] = kv;
    for (size_t i = (size_t)at + 1; i < e->n;) {
      if (strncmp(e->v[i], kv, nlen) == 0 && e->v[i][nlen] == '=') {
        free(e->v[i]);
        memmove(&e->v[i], &e->v[i + 1], (e->n - i) * sizeof(*e->v)); /* with the NULL */
        e->n--;
      } else {
        i++;
      }
    }
    return 0;
  }
  /* One slot always stays free for the terminating NULL. */
  if (array_reserve((void **)&e->v, &e->cap, e->n + 2, sizeof(*e->v))) {
    free(kv);
    return -1;
  }
  e->v[e->n++] = kv;
  e->v[e->n] = NULL;
  return 0;
}

static char *kv_make(const char *name, const char *value) {
  char *kv = NULL;
  if (asprintf(&kv, "%s=%s", name, value) < 0) return NULL;
  return kv;
}

/* config_project_settings() inlined: env must not depend on config.c. */
static const char *project_settings(const config_t *cfg, const char *project) {
  for (size_t i = 0; cfg && project && i < cfg->nsettings; i++)
    if (cfg->settings[i].name && strcmp(cfg->settings[i].name, project) == 0)
      return cfg->settings[i].value;
  return NULL;
}

/* The daemon's own secrets, which it may take from its environment
 * (docs/configuration.md): a crawl runs deployed code and logs what it
 * likes, so it does not inherit them. Crawls reach the daemon with
 * SPIDERD_TOKEN, and never the store. */
static int secret_var(const char *kv) {
  static const char *const names[] = {
      "SCRAPYD_PASSWORD",       "SPIDERD_PASSWORD",           "SPIDERD_WEBHOOK_SECRET",
      "SPIDERD_STORE_PASSWORD", "SPIDERD_HTTPS_KEY_PASSWORD", "SPIDERD_STORE",
  };
  size_t n = name_len(kv);
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strlen(names[i]) == n && !strncmp(kv, names[i], n)) return 1;
  return 0;
}

char **env_build(const config_t *cfg, const char *project, const char *egg_path,
                 const char *version, const char *const *extra) {
  envv_t e = {0};
  const char *module;
  size_t count = 0;

  for (char **p = environ; p && *p; p++) count++;
  /* Room for the copy, the variables added below and the NULL, so the
   * common case never reallocates; more extras grow it in envv_put. */
  e.cap = count + 8;
  e.v = malloc(e.cap * sizeof(*e.v));
  if (!e.v) return NULL;
  e.v[0] = NULL;
  for (char **p = environ; p && *p; p++) {
    /* Entries without '=' are not variables a child could read. */
    if (!strchr(*p, '=') || secret_var(*p)) continue;
    if (envv_put(&e, strdup(*p))) goto fail;
  }

  if (cfg && cfg->pythonpath && *cfg->pythonpath) {
    int at = envv_find(&e, "PYTHONPATH", strlen("PYTHONPATH"));
    const char *inherited = at >= 0 ? e.v[at] + strlen("PYTHONPATH=") : NULL;
    char *kv = NULL;
    /* An empty inherited value must not add "" to sys.path: that is the cwd. */
    if (inherited && *inherited) {
      if (asprintf(&kv, "PYTHONPATH=%s:%s", cfg->pythonpath, inherited) < 0) kv = NULL;
    } else {
      kv = kv_make("PYTHONPATH", cfg->pythonpath);
    }
    if (envv_put(&e, kv)) goto fail;
  }
  if (project && envv_put(&e, kv_make("SCRAPY_PROJECT", project))) goto fail;
  if (egg_path && envv_put(&e, kv_make("SPIDERD_EGG", egg_path))) goto fail;
  if (version && envv_put(&e, kv_make("SCRAPYD_EGG_VERSION", version))) goto fail;
  module = project_settings(cfg, project);
  if (module && envv_put(&e, kv_make("SCRAPY_SETTINGS_MODULE", module))) goto fail;
  for (size_t i = 0; extra && extra[i]; i++) {
    if (!strchr(extra[i], '=')) continue;
    if (envv_put(&e, strdup(extra[i]))) goto fail;
  }
  return e.v;

fail:
  for (size_t i = 0; i < e.n; i++) free(e.v[i]);
  free(e.v);
  return NULL;
}

void env_free(char **env) {
  if (!env) return;
  for (char **p = env; *p; p++) free(*p);
  free(env);
}
