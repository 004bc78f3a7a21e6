/* Scrapyd's class keys (application, spiderqueue, poller, launcher, webroot,
 * eggstorage, jobstorage) and [services] entries: spiderd loads no Python
 * class, so each one a file names is either Scrapyd 1.6's own class, whose
 * work spiderd does itself (and says how at start), or a class that did
 * something spiderd will not do. A node configured for a plugin (a queue
 * shared through PostgreSQL, a custom launcher) that silently ran without
 * it would run alone, or run wrong, so the daemon refuses it unless told
 * unknown_scrapyd_classes = warn; the message says what spiderd offers
 * instead.
 */
#include "config.h"

#include "config_int.h"
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int config_is_class_key(const char *name) {
  for (size_t i = 0; i < config_nscrapyd_class_keys; i++)
    if (strcmp(config_scrapyd_class_keys[i][0], name) == 0) return 1;
  return 0;
}

void config_classes_free(config_class_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].name);
    free(v[i].value);
  }
  free(v);
}

int config_class_note(struct loader *L, const struct src *s, enum config_class_kind kind,
                      const char *name, const char *value) {
  config_t *c = L->c;
  char *n = strdup(name), *v = value ? strdup(value) : NULL;
  if (!n || (value && !v)) goto oom;
  config_class_t *e = NULL;
  for (size_t i = 0; i < c->nclasses && !e; i++)
    if (c->classes[i].kind == kind && strcmp(c->classes[i].name, name) == 0) e = &c->classes[i];
  if (e) {
    free(n);
    free(e->value);
  } else {
    config_class_t *grown = realloc(c->classes, (c->nclasses + 1) * sizeof(*grown));
    if (!grown) goto oom;
    c->classes = grown;
    e = &grown[c->nclasses++];
    e->kind = kind;
    e->name = n;
  }
  e->value = v;
  e->src = s->kind == SRC_FILE ? s->name : s->kind == SRC_SET ? "--set" : "built-in";
  return 0;
oom:
  free(n);
  free(v);
  return config_oom(L);
}

/* ---- what each class becomes ---- */

static int say(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *msg, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (msg && n) vsnprintf(msg, n, fmt, ap);
  va_end(ap);
  return 0;
}

static const char *default_class(const char *const table[][2], size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(table[i][0], name) == 0) return table[i][1];
  return NULL;
}

static int is_sqlite(const config_t *c) { return strncmp(c->store, "sqlite:", 7) == 0; }

/* A class key naming Scrapyd's own class: what spiderd does in its place. */
static void mapped_key(const config_t *c, const char *name, const char *store, char *msg,
                       size_t n) {
  if (!strcmp(name, "spiderqueue"))
    say(msg, n, "spiderd keeps its queue in its store (store = %s)", store);
  else if (!strcmp(name, "jobstorage"))
    say(msg, n, "spiderd keeps finished jobs in its store (store = %s), across restarts; "
        "finished_to_keep = %d of them are listed (0 = all)", store, c->finished_to_keep);
  else if (!strcmp(name, "eggstorage") && is_sqlite(c))
    say(msg, n, "spiderd keeps eggs in eggs_dir (%s)", c->eggs_dir);
  else if (!strcmp(name, "eggstorage"))
    say(msg, n, "spiderd keeps eggs in its store (store = %s), copied to each node's "
        "eggs_dir (%s)", store, c->eggs_dir);
  else if (!strcmp(name, "launcher"))
    say(msg, n, "spiderd starts crawls itself, with spiderd_runner, at most %d at once "
        "(max_proc)", config_max_proc(c));
  else if (!strcmp(name, "poller"))
    say(msg, n, "spiderd starts a pending job as soon as a slot is free (poll_interval "
        "is not used)");
  else if (!strcmp(name, "webroot"))
    say(msg, n, "spiderd serves Scrapyd's web pages and JSON endpoints itself");
  else
    say(msg, n, "spiderd is the application itself");
}

/* A class key naming another class: why spiderd cannot, and what instead. */
static void unknown_key(const char *name, char *msg, size_t n) {
  if (!strcmp(name, "spiderqueue"))
    say(msg, n, "spiderd keeps its queue in its own store, not in a Python class; for a queue "
        "shared by several nodes set store = postgresql://user@host/db (or "
        "redis://host:6379/0) in [spiderd] on every node (see cluster.md)");
  else if (!strcmp(name, "jobstorage"))
    say(msg, n, "spiderd keeps finished jobs in its own store; how many are kept is "
        "finished_to_keep and jobs_to_keep in [scrapyd], history_per_spider and "
        "history_days in [spiderd] and [retention]");
  else if (!strcmp(name, "eggstorage"))
    say(msg, n, "spiderd keeps eggs in eggs_dir, and in the store when the store is shared "
        "(store = postgresql://... or redis://...)");
  else if (!strcmp(name, "launcher"))
    say(msg, n, "spiderd starts crawls itself; to run commands around a crawl use [hooks], "
        "to bound crawls use max_proc, [concurrency], job_timeout and the job_*_limit keys");
  else if (!strcmp(name, "poller"))
    say(msg, n, "spiderd starts a pending job as soon as a slot is free; max_proc, "
        "[concurrency] and each job's priority decide which");
  else if (!strcmp(name, "webroot"))
    say(msg, n, "spiderd serves its own web pages, Scrapyd's JSON endpoints and its API "
        "under /api/v1/; serve other pages from a reverse proxy in front of it");
  else
    say(msg, n, "spiderd is not a Twisted application and loads none; its behaviour is set "
        "by the keys of [spiderd]");
}

static void service_list(char *out, size_t n) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < config_ndefault_services && used < n; i++)
    used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "",
                             config_default_services[i][0]);
}

static enum config_class_verdict service(const config_class_t *e, char *msg, size_t n) {
  const char *def = default_class(config_default_services, config_ndefault_services, e->name);
  char list[512];
  if (!e->value[0]) {
    say(msg, n, "disabled: spiderd does not serve /%s", e->name);
    return CONFIG_CLASS_MAPPED;
  }
  if (def && !strcmp(def, e->value)) {
    say(msg, n, "spiderd serves /%s itself", e->name);
    return CONFIG_CLASS_MAPPED;
  }
  if (def) {
    say(msg, n, "spiderd serves its own /%s and cannot load another class in its place; "
        "remove the line to keep spiderd's, or leave the value empty to disable it", e->name);
    return CONFIG_CLASS_UNKNOWN;
  }
  service_list(list, sizeof(list));
  say(msg, n, "spiderd has no endpoint /%s and cannot load one; it serves Scrapyd's %s, and "
      "its own API under /api/v1/ (see api.md)", e->name, list);
  return CONFIG_CLASS_UNKNOWN;
}

enum config_class_verdict config_scrapyd_class(const config_t *c, const config_class_t *e,
                                               char *msg, size_t msglen) {
  if (e->kind == CONFIG_CLASS_SERVICE) return service(e, msg, msglen);
  if (e->kind == CONFIG_CLASS_OTHER) {
    say(msg, msglen, "not a key of Scrapyd 1.6 or of spiderd: ignored");
    return CONFIG_CLASS_IGNORED;
  }
  const char *def =
      default_class(config_scrapyd_class_keys, config_nscrapyd_class_keys, e->name);
  /* Scrapyd 1.6 ships a second job storage; spiderd's store does both */
  int known = (def && !strcmp(def, e->value)) ||
              (!strcmp(e->name, "jobstorage") &&
               !strcmp(e->value, "scrapyd.jobstorage.SqliteJobStorage"));
  if (!known) {
    unknown_key(e->name, msg, msglen);
    return CONFIG_CLASS_UNKNOWN;
  }
  char store[1024];
  config_redact_url(c->store, store, sizeof(store));
  mapped_key(c, e->name, store, msg, msglen);
  return CONFIG_CLASS_MAPPED;
}

int config_check_scrapyd_classes(const config_t *c, char *err, size_t errlen) {
  if (!strcmp(c->unknown_scrapyd_classes, "warn")) return 0;
  for (size_t i = 0; i < c->nclasses; i++) {
    const config_class_t *e = &c->classes[i];
    char why[1024];
    if (config_scrapyd_class(c, e, why, sizeof(why)) != CONFIG_CLASS_UNKNOWN) continue;
    snprintf(err, errlen,
             "%s: [%s] %s = %s: %s. To start anyway, without it, set "
             "unknown_scrapyd_classes = warn in [spiderd]",
             e->src, e->kind == CONFIG_CLASS_SERVICE ? "services" : "scrapyd", e->name,
             e->value, why);
    return SPD_ECONFIG;
  }
  return 0;
}
