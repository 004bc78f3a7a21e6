#include "api/projects.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/auth.h"
#include "clock.h"
#include "core/names.h"
#include "error.h"
#include "log.h"
#include "flow/eggsync.h"
#include "flow/projects.h"
#include "store/eggs.h"
#include "store/marchive.h"
#include "store/pyenv.h"
#include "api/pyenvs.h"

/* A project's version stems as last read from eggs_dir/<project>, valid
 * while the directory's inode and mtime are unchanged (any egg added,
 * replaced or removed changes them), so a schedule costs one stat, not two
 * directory scans. */
typedef struct vcache {
  char *project;
  ino_t ino;
  struct timespec mtime;
  char **v;
  size_t n;
} vcache_t;

#define VCACHE_MAX 64

struct api_common {
  vcache_t vcache[VCACHE_MAX];
  size_t nvcache;
  uint64_t uuid_last; /* uuid1 timestamps handed out so far never repeat */
  uint16_t uuid_seq;
  uint8_t uuid_node[6];
};

int api_common_init(app_t *app) {
  if (app->api_common) return 0;
  api_common_t *ac = calloc(1, sizeof(*ac));
  if (!ac) return -ENOMEM;
  uint16_t seq;
  if (getrandom(ac->uuid_node, sizeof(ac->uuid_node), 0) != (ssize_t)sizeof(ac->uuid_node) ||
      getrandom(&seq, sizeof(seq), 0) != (ssize_t)sizeof(seq)) {
    free(ac);
    return -EIO;
  }
  ac->uuid_node[0] |= 0x01; /* multicast bit: not a real MAC */
  ac->uuid_seq = seq;
  app->api_common = ac;
  return 0;
}

void api_common_free(app_t *app) {
  api_common_t *ac = app->api_common;
  for (size_t i = 0; ac && i < ac->nvcache; i++) {
    strv_free(ac->vcache[i].v, ac->vcache[i].n);
    free(ac->vcache[i].project);
  }
  free(ac);
  app->api_common = NULL;
}

static int has_traversal(const char *s) { return strstr(s, "..") || strchr(s, '/'); }

int api_project_versions(app_t *app, const char *project, char *const **v, size_t *n) {
  api_common_t *ac = app->api_common;
  *v = NULL;
  *n = 0;
  if (has_traversal(project)) return 0;
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/%s", app->cfg.eggs_dir, project);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
  vcache_t *e = NULL;
  for (size_t i = 0; i < ac->nvcache && !e; i++)
    if (!strcmp(ac->vcache[i].project, project)) e = &ac->vcache[i];
  if (e && e->ino == st.st_ino && e->mtime.tv_sec == st.st_mtim.tv_sec &&
      e->mtime.tv_nsec == st.st_mtim.tv_nsec) {
    *v = e->v;
    *n = e->n;
    return 0;
  }
  char **nv = NULL;
  size_t nn = 0;
  int rc = eggs_versions(app->cfg.eggs_dir, project, &nv, &nn);
  if (rc) return rc;
  if (!e) {
    if (ac->nvcache == VCACHE_MAX) { /* evict the oldest entry */
      strv_free(ac->vcache[0].v, ac->vcache[0].n);
      free(ac->vcache[0].project);
      memmove(&ac->vcache[0], &ac->vcache[1], (VCACHE_MAX - 1) * sizeof(vcache_t));
      ac->nvcache--;
    }
    e = &ac->vcache[ac->nvcache];
    memset(e, 0, sizeof(*e));
    e->project = strdup(project);
    if (!e->project) {
      strv_free(nv, nn);
      return -ENOMEM;
    }
    ac->nvcache++;
  } else {
    strv_free(e->v, e->n);
  }
  e->ino = st.st_ino;
  e->mtime = st.st_mtim;
  e->v = nv;
  e->n = nn;
  *v = nv;
  *n = nn;
  return 0;
}

int api_project_known(app_t *app, const char *project) {
  if (config_project_settings(&app->cfg, project)) return 1;
  char *const *v;
  size_t n;
  return api_project_versions(app, project, &v, &n) == 0 && n > 0;
}

int api_egg_resolve(app_t *app, const char *project, const char *version, char **egg_path) {
  char *const *v;
  size_t n;
  *egg_path = NULL;
  int rc = api_project_versions(app, project, &v, &n);
  if (rc == 0 && n == 0 && config_project_settings(&app->cfg, project) && !version) return 0;
  if (rc || n == 0) return SPD_ENOPROJECT;
  const char *stem = NULL;
  if (!version) {
    stem = v[n - 1];
  } else {
    char *want = version_sanitize(version);
    for (size_t i = 0; want && i < n && !stem; i++)
      if (!strcmp(v[i], want)) stem = v[i];
    free(want);
  }
  if (!stem) return SPD_ENOVERSION;
  if (asprintf(egg_path, "%s/%s/%s.egg", app->cfg.eggs_dir, project, stem) < 0) {
    *egg_path = NULL;
    return -ENOMEM;
  }
  return 0;
}

/* uuid.uuid1().hex: 60-bit time in 100 ns since 1582-10-15, version 1, RFC
 * 4122 variant, a random node with the multicast bit set (as Python does
 * without a MAC address). Timestamps never repeat within this daemon. */
void api_uuid1_hex(app_t *app, char out[33]) {
  api_common_t *ac = app->api_common;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t t = (uint64_t)ts.tv_sec * 10000000u + (uint64_t)ts.tv_nsec / 100u +
               0x01B21DD213814000ull;
  if (t <= ac->uuid_last) t = ac->uuid_last + 1;
  ac->uuid_last = t;
  uint32_t time_low = (uint32_t)(t & 0xffffffffu);
  uint16_t time_mid = (uint16_t)((t >> 32) & 0xffff);
  uint16_t time_hi = (uint16_t)(((t >> 48) & 0x0fff) | 0x1000);
  uint16_t seq = (uint16_t)((ac->uuid_seq & 0x3fff) | 0x8000);
  snprintf(out, 33, "%08x%04x%04x%04x%02x%02x%02x%02x%02x%02x", time_low, time_mid, time_hi, seq,
           ac->uuid_node[0], ac->uuid_node[1], ac->uuid_node[2], ac->uuid_node[3],
           ac->uuid_node[4], ac->uuid_node[5]);
}

int api_parse_signal(const char *s, int *sig) {
  static const struct {
    const char *name;
    int sig;
  } names[] = {{"HUP", SIGHUP}, {"INT", SIGINT}, {"KILL", SIGKILL}, {"STOP", SIGSTOP},
               {"TERM", SIGTERM}};
  if (*s && strspn(s, "0123456789") == strlen(s)) {
    long v = strtol(s, NULL, 10);
    if (v < 1 || v > 64) return -EINVAL;
    *sig = (int)v;
    return 0;
  }
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (!strcmp(s, names[i].name)) {
      *sig = names[i].sig;
      return 0;
    }
  return -EINVAL;
}

/* ---- the events of a change, once done on this node ---- */

typedef struct egg_event {
  char *project, *version;
  int nspiders;
  int deleted; /* version.deleted / project.deleted, else version.added */
} egg_event_t;

static void egg_event_free(egg_event_t *e) {
  free(e->project);
  free(e->version);
  free(e);
}

static int egg_event_fn(store_t *s, void *arg) {
  egg_event_t *e = arg;
  int64_t now = clock_wall_ms();
  return e->deleted ? projects_deleted(s, e->project, e->version, now)
                    : projects_version_added(s, e->project, e->version, e->nspiders, now);
}

static void egg_event_done(void *arg, int rc) {
  egg_event_t *e = arg;
  if (rc)
    log_warn("webservice", "cannot record that %s%s%s of project '%s' was %s: %s",
             e->version ? "version '" : "", e->version ? e->version : "the eggs",
             e->version ? "'" : "", e->project, e->deleted ? "deleted" : "added",
             spd_strerror(rc));
  egg_event_free(e);
}

/* Records the change as done by who (may be NULL), fire and forget: a
 * failure is logged. version NULL: the whole project (deleted only). */
static void egg_event(app_t *app, const struct auth_who *who, const char *project,
                      const char *version, int deleted, int nspiders) {
  egg_event_t *e = calloc(1, sizeof(*e));
  if (e) {
    e->project = strdup(project);
    e->version = version ? strdup(version) : NULL;
    e->deleted = deleted;
    e->nspiders = nspiders;
  }
  if (!e || !e->project || (version && !e->version)) {
    log_warn("webservice", "cannot record the change of project '%s': out of memory", project);
    if (e) egg_event_free(e);
    return;
  }
  if (store_submit_as(app->store, STORE_WRITE, egg_event_fn, e, egg_event_done,
                      who ? who->actor : NULL, who ? who->addr : NULL))
    egg_event_done(e, SPD_ESHUTDOWN);
}

/* ---- adding an egg ---- */

typedef struct egg_add {
  app_t *app;
  char *project, *version, *tmp_path;
  api_egg_cb cb;
  void *ud;
  /* On a shared store: the spider list, kept while the egg goes into the
   * store (before eggs_dir, so no node's copy prunes it meanwhile). */
  char **names;
  size_t nnames;
  int stored;
  const struct auth_who *who;
  /* The version's Python environment (store/pyenv.h); interp NULL: none. */
  char *interp, *reqs, *py;
  char key[PYENV_KEY_LEN + 1];
  int held; /* pyenvs_hold(key) until the version is recorded or refused */
  int egg_held; /* eggsync_hold: on a shared store, until eggs_dir has it */
} egg_add_t;

static void egg_add_free(egg_add_t *a) {
  if (a->egg_held) eggsync_unhold(a->project, a->version);
  if (a->held && a->app->pyenvs) {
    pyenvs_unhold(a->app->pyenvs, a->key);
    /* A refused version leaves no environment it alone needed. */
    if (a->held < 0) pyenvs_collect(a->app->pyenvs);
  }
  free(a->interp);
  free(a->reqs);
  free(a->py);
  free(a->project);
  free(a->version);
  free(a->tmp_path);
  if (a->names) strv_free(a->names, a->nnames);
  free(a);
}

static void egg_listed(void *ud, int rc, char *const *names, size_t n, const char *error);

/* The version is refused: its environment goes unless another uses it. */
static void egg_refused(egg_add_t *a) {
  if (a->held) a->held = -1;
}

/* Records which environment the egg at final_path uses (none: the record
 * of an earlier upload of the same version goes). */
static int egg_env_record(egg_add_t *a, const char *final_path) {
  if (a->interp) return pyenv_sidecar_write(final_path, a->key, a->interp, a->reqs);
  char *side = pyenv_sidecar_path(final_path);
  if (!side) return -ENOMEM;
  if (unlink(side) && errno != ENOENT) log_warn("webservice", "cannot remove %s: %s", side,
                                                 strerror(errno));
  free(side);
  return 0;
}

static int egg_store_fn(store_t *s, void *arg) {
  egg_add_t *a = arg;
  return projects_egg_put(s, a->project, a->version, a->tmp_path, clock_wall_ms());
}

static void egg_stored(void *arg, int rc) {
  egg_add_t *a = arg;
  a->stored = 1;
  if (rc) {
    log_error("webservice", "cannot store egg %s/%s in the shared store: %s", a->project,
              a->version, spd_strerror(rc));
    egg_refused(a);
    eggs_discard(a->tmp_path);
    a->cb(a->ud, rc, API_EGG_STORE, NULL, NULL, 0);
    egg_add_free(a);
    return;
  }
  egg_listed(a, 0, a->names, a->nnames, NULL);
}

static void egg_listed(void *ud, int rc, char *const *names, size_t n, const char *error) {
  egg_add_t *a = ud;
  app_t *app = a->app;
  if (!rc && !a->stored && store_pool_shared(app->store)) {
    a->names = calloc(n ? n : 1, sizeof(*a->names));
    for (size_t i = 0; a->names && i < n; i++)
      if ((a->names[a->nnames] = strdup(names[i]))) a->nnames++;
    if (a->names && a->nnames == n && !eggsync_hold(a->project, a->version)) {
      a->egg_held = 1;
      if (store_submit(app->store, STORE_WRITE, egg_store_fn, a, egg_stored) == 0) return;
    }
    rc = -ENOMEM;
    error = NULL;
  }
  if (rc) {
    /* Scrapyd stores a broken egg and makes it the latest version; spiderd
     * rejects it and keeps what was there. */
    egg_refused(a);
    eggs_discard(a->tmp_path);
    a->cb(a->ud, rc, API_EGG_LIST, error, NULL, 0);
    egg_add_free(a);
    return;
  }
  char *final_path = NULL;
  rc = eggs_path_for(app->cfg.eggs_dir, a->project, a->version, &final_path);
  if (!rc) rc = egg_env_record(a, final_path);
  free(final_path);
  final_path = NULL;
  if (!rc) rc = eggs_commit(app->cfg.eggs_dir, a->project, a->version, a->tmp_path, &final_path);
  if (rc) {
    egg_refused(a);
    eggs_discard(a->tmp_path);
    a->cb(a->ud, rc, API_EGG_STORE, NULL, NULL, 0);
    egg_add_free(a);
    return;
  }
  spiders_forget(app->spiders, a->project);
  /* The list just made is the new egg's: the deploy-then-schedule of every
   * client then needs no second runner start. */
  spiders_prime(app->spiders, a->project, final_path, names, n);
  free(final_path);
  log_info("webservice", "Added version '%s' of project '%s' (%zu spiders)", a->version,
           a->project, n);
  egg_event(app, a->who, a->project, a->version, 0, (int)n);
  a->cb(a->ud, 0, 0, NULL, names, n);
  /* A version replaced may have been the last user of its environment. */
  if (a->held) a->held = -1;
  egg_add_free(a);
}

/* The environment the archive asks for (requirements.txt at its root, a
 * wheel's Requires-Dist, .python-version or scrapy.cfg's [deploy] python;
 * an upload's fields were written into it first). a->interp stays NULL
 * when the version runs on the daemon's python and system packages. */
static int egg_env_plan(egg_add_t *a, const void *data, size_t len, char *err, size_t errlen) {
  char *reqs = NULL, *want = NULL;
  int rc = pyenv_from_archive(data, len, &reqs, &want);
  if (!rc)
    rc = pyenv_spec(a->app->cfg.python, reqs, want, &a->interp, &a->reqs, a->key, err, errlen);
  free(reqs);
  free(want);
  return rc;
}

/* An environment that could not be built refuses the upload with pip's
 * reason, keeping nothing: 1 when rc says so (a is freed). */
static int env_failed(egg_add_t *a, int rc, const char *why) {
  if (!rc) return 0;
  egg_refused(a);
  eggs_discard(a->tmp_path);
  a->cb(a->ud, rc, API_EGG_ENV, why, NULL, 0);
  egg_add_free(a);
  return 1;
}

/* The environment is built (or could not be): list the spiders with its
 * python. */
static void egg_env_ready(void *ud, int rc, const char *key, const char *why) {
  egg_add_t *a = ud;
  (void)key;
  if (env_failed(a, rc, why)) return;
  a->py = pyenv_python(pyenvs_dir(a->app->pyenvs), a->key);
  rc = a->py ? spiders_list_py(a->app->spiders, a->project, a->tmp_path, a->version, a->py,
                               egg_listed, a)
             : -ENOMEM;
  if (rc) egg_listed(a, rc, NULL, 0, spd_strerror(rc));
}

static void manifest_env_ready(void *ud, int rc, const char *key, const char *why) {
  egg_add_t *a = ud;
  (void)key;
  if (env_failed(a, rc, why)) return;
  char **names = a->names;
  size_t n = a->nnames;
  a->names = NULL;
  a->nnames = 0;
  egg_listed(a, 0, names, n, NULL);
  strv_free(names, n);
}

/* A spiderd.json project (a zip) with a requirements.txt for its Python
 * parts: its environment is built before it is stored; its commands then
 * find that environment's python first on PATH. */
static int manifest_env(egg_add_t *a, const void *data, size_t len, char *const *names,
                        size_t n, int *stage, char *err, size_t errlen) {
  int rc = egg_env_plan(a, data, len, err, errlen);
  if (rc) {
    *stage = rc == -ENOMEM ? API_EGG_ALLOC : API_EGG_ENVSPEC;
    return rc;
  }
  if (!a->interp) {
    egg_listed(a, 0, names, n, NULL);
    return 0;
  }
  a->names = calloc(n ? n : 1, sizeof(*a->names));
  for (size_t i = 0; a->names && i < n; i++)
    if ((a->names[a->nnames] = strdup(names[i]))) a->nnames++;
  if (!a->names || a->nnames != n) {
    *stage = API_EGG_ALLOC;
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  pyenvs_hold(a->app->pyenvs, a->key);
  a->held = 1;
  rc = pyenvs_ensure(a->app->pyenvs, a->interp, a->reqs, 0, manifest_env_ready, a);
  if (rc) {
    *stage = API_EGG_ENVSPEC;
    snprintf(err, errlen, "the environment's build could not start: %s", spd_strerror(rc));
  }
  return rc;
}

/* Scrapy eggs and wheels: their environment first, then their spiders. */
static int egg_add_scrapy(egg_add_t *a, const void *data, size_t len, int *stage, char *err,
                          size_t errlen) {
  int rc = egg_env_plan(a, data, len, err, errlen);
  if (rc) {
    *stage = rc == -ENOMEM ? API_EGG_ALLOC : API_EGG_ENVSPEC;
    return rc;
  }
  if (!a->interp) {
    rc = spiders_list(a->app->spiders, a->project, a->tmp_path, a->version, egg_listed, a);
    if (rc) {
      *stage = API_EGG_LIST;
      snprintf(err, errlen, "%s", spd_strerror(rc));
    }
    return rc;
  }
  pyenvs_hold(a->app->pyenvs, a->key);
  a->held = 1;
  rc = pyenvs_ensure(a->app->pyenvs, a->interp, a->reqs, 0, egg_env_ready, a);
  if (rc) {
    *stage = API_EGG_ENVSPEC;
    snprintf(err, errlen, "the environment's build could not start: %s", spd_strerror(rc));
  }
  return rc;
}

static int egg_embed(const void *data, size_t len, const api_egg_opts_t *o, void **out,
                     size_t *outlen, int *stage, char *err, size_t errlen);
static int egg_add_more(app_t *app, const char *project, const char *version, const void *data,
                        size_t len, char *tmp, api_egg_cb cb, void *ud, int *stage, char *err,
                        size_t errlen, const struct auth_who *who);

int api_egg_add(app_t *app, const char *project, const char *version, const void *data,
                size_t len, const api_egg_opts_t *opts, api_egg_cb cb, void *ud, int *stage,
                char *err, size_t errlen, const struct auth_who *who) {
  char *tmp = NULL;
  void *embedded = NULL;
  int rc = egg_embed(data, len, opts, &embedded, &len, stage, err, errlen);
  if (rc) return rc;
  if (embedded) data = embedded;
  rc = eggs_stage(app->cfg.eggs_dir, data, len, &tmp, err, errlen);
  if (rc) {
    free(embedded);
    *stage = API_EGG_STAGE;
    return rc;
  }
  rc = egg_add_more(app, project, version, data, len, tmp, cb, ud, stage, err, errlen, who);
  free(embedded);
  return rc;
}

/* An upload's requirements and python fields go into the archive itself
 * (requirements.txt, .python-version), so every node that copies it builds
 * the same environment. *out NULL: nothing to write. */
static int egg_embed(const void *data, size_t len, const api_egg_opts_t *o, void **out,
                     size_t *outlen, int *stage, char *err, size_t errlen) {
  const char *reqs = o && o->requirements && *o->requirements ? o->requirements : NULL;
  const char *py = o && o->python && *o->python ? o->python : NULL;
  *out = NULL;
  if (!reqs && !py) return 0;
  if (marchive_kind_mem(data, len) == MARCHIVE_MANIFEST) {
    *stage = API_EGG_ENVSPEC;
    snprintf(err, errlen, "a spiderd.json project says what it needs in its archive: "
                          "requirements.txt (and .python-version) at the root of its archive");
    return SPD_EBADPARAM;
  }
  int rc = pyenv_embed(data, len, reqs, py, out, outlen);
  if (rc == SPD_EBADEGG) {
    *stage = API_EGG_STAGE;
    snprintf(err, errlen, "egg is not a ZIP file (if using curl, use egg=@path not egg=path)");
  } else if (rc) {
    *stage = API_EGG_ALLOC;
    snprintf(err, errlen, "out of memory");
  }
  return rc;
}

static int egg_add_more(app_t *app, const char *project, const char *version, const void *data,
                        size_t len, char *tmp, api_egg_cb cb, void *ud, int *stage, char *err,
                        size_t errlen, const struct auth_who *who) {
  int rc;
  egg_add_t *a = calloc(1, sizeof(*a));
  if (a) {
    a->app = app;
    a->tmp_path = tmp;
    a->cb = cb;
    a->ud = ud;
    a->who = who;
    a->project = strdup(project);
    a->version = strdup(version);
  }
  if (!a || !a->project || !a->version) {
    eggs_discard(tmp);
    if (a) egg_add_free(a);
    else free(tmp);
    *stage = API_EGG_ALLOC;
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  if (marchive_kind_mem(data, len) == MARCHIVE_MANIFEST) {
    /* A project of command spiders: its manifest lists them, and every
     * member is checked now, so nothing unsafe is ever stored. */
    manifest_t m;
    rc = marchive_check_mem(data, len, &m, err, errlen);
    if (rc) {
      eggs_discard(tmp);
      egg_add_free(a);
      *stage = rc == -ENOMEM ? API_EGG_ALLOC : API_EGG_MANIFEST;
      if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
      return rc;
    }
    char **names = calloc(m.n, sizeof(*names));
    for (size_t i = 0; names && i < m.n; i++) names[i] = m.spiders[i].name;
    if (!names) {
      manifest_release(&m);
      eggs_discard(tmp);
      egg_add_free(a);
      *stage = API_EGG_ALLOC;
      snprintf(err, errlen, "out of memory");
      return -ENOMEM;
    }
    rc = manifest_env(a, data, len, names, m.n, stage, err, errlen);
    free(names);
    manifest_release(&m);
    if (rc) {
      egg_refused(a);
      eggs_discard(tmp);
      egg_add_free(a);
    }
    return rc;
  }
  rc = egg_add_scrapy(a, data, len, stage, err, errlen);
  if (rc) {
    egg_refused(a);
    eggs_discard(tmp);
    egg_add_free(a);
  }
  return rc;
}

/* ---- deleting eggs ---- */

typedef struct egg_del {
  app_t *app;
  char *project, *version, *stem;
  int count; /* versions the store had */
  void (*cb)(void *ud, int rc);
  void *ud;
  const struct auth_who *who;
} egg_del_t;

static void egg_del_free(egg_del_t *d) {
  free(d->project);
  free(d->version);
  free(d->stem);
  free(d);
}

/* gone_ok: the shared store had the egg, so a node's copy that removed it
 * from eggs_dir first (eggsync) leaves the delete done, not missing. */
static int local_delete(app_t *app, const char *project, const char *version,
                        const struct auth_who *who, int gone_ok) {
  int rc = version ? eggs_delete_version(app->cfg.eggs_dir, project, version)
                   : eggs_delete_project(app->cfg.eggs_dir, project);
  if (rc == -ENOENT && gone_ok) rc = 0;
  if (!rc) egg_event(app, who, project, version, 1, 0);
  /* An environment no kept version uses goes with the last one. */
  if (!rc && app->pyenvs) pyenvs_collect(app->pyenvs);
  return rc;
}

static int egg_del_fn(store_t *s, void *arg) {
  egg_del_t *d = arg;
  return projects_eggs_delete(s, d->project, d->stem, &d->count);
}

/* The store's delete is committed: no node's copy can bring the egg back
 * now, so eggs_dir goes (a node's copy may have removed it first). */
static void egg_del_done(void *arg, int rc) {
  egg_del_t *d = arg;
  if (!rc) rc = local_delete(d->app, d->project, d->version, d->who, d->count > 0);
  d->cb(d->ud, rc);
  egg_del_free(d);
}

int api_eggs_delete(app_t *app, const char *project, const char *version,
                    void (*cb)(void *ud, int rc), void *ud, const struct auth_who *who) {
  if (!store_pool_shared(app->store)) {
    cb(ud, local_delete(app, project, version, who, 0));
    return 0;
  }
  egg_del_t *d = calloc(1, sizeof(*d));
  if (!d) return -ENOMEM;
  d->app = app;
  d->cb = cb;
  d->ud = ud;
  d->who = who;
  d->project = strdup(project);
  d->version = version ? strdup(version) : NULL;
  d->stem = version ? version_sanitize(version) : NULL;
  if (!d->project || (version && (!d->version || !d->stem))) {
    egg_del_free(d);
    return -ENOMEM;
  }
  int rc = store_submit(app->store, STORE_WRITE, egg_del_fn, d, egg_del_done);
  if (rc) egg_del_free(d);
  return rc;
}
