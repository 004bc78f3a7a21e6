/* Status, projects, versions (eggs) and spiders operations. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "api/projects.h"
#include "api/auth.h"
#include "api/ops_impl.h"
#include "error.h"
#include "log.h"
#include "flow/memfit.h"
#include "store/eggs.h"
#include "store/pyenv.h"
#include "api/pyenvs.h"
#include <fcntl.h>
#include <sys/stat.h>

/* ---- status.get ---- */

/* This node's memory for crawls, as status.get shows it. */
static json_t *memory_json(const app_t *app) {
  memfit_node_t m = {0};
  if (app->flow.memory) app->flow.memory(app->flow.launcher, &m);
  return json_pack("{s:I,s:s?,s:I,s:I,s:I,s:I}", "available", (json_int_t)m.available, "source",
                   m.source, "reserve", (json_int_t)m.reserve, "reserved",
                   (json_int_t)m.reserved, "free", (json_int_t)m.free, "waiting",
                   (json_int_t)m.waiting);
}

void op_status_get(op_call_t *c) {
  const app_t *app = c->app;
  int64_t up = app->started_ms ? (clock_wall_ms() - app->started_ms) / 1000 : 0;
  op_ok(c, json_pack("{s:s,s:s,s:I,s:o,s:I,s:I,s:I,s:b,s:b,s:o}", "node_name",
                     app->cfg.node_name, "version", SPIDERD_VERSION, "uptime", (json_int_t)up,
                     "started_at", op_iso_time(app->started_ms), "pending",
                     (json_int_t)app->counters.pending, "running",
                     (json_int_t)app->counters.running, "finished",
                     (json_int_t)app->counters.finished, "stopping", app->stopping,
                     "draining", app->draining, "memory", memory_json(app)));
}

/* ---- projects ---- */

static json_t *project_object(app_t *app, const char *name) {
  char *const *v;
  size_t n;
  json_t *versions = json_array();
  if (api_project_versions(app, name, &v, &n) == 0)
    for (size_t i = 0; i < n; i++) json_array_append_new(versions, json_string(v[i]));
  size_t nv = json_array_size(versions);
  return json_pack("{s:s,s:o,s:O}", "name", name, "versions", versions, "latest_version",
                   nv ? json_array_get(versions, nv - 1) : json_null());
}

static int fail_no_project(op_call_t *c, const char *project) {
  if (api_project_known(c->app, project)) return 0;
  op_fail(c, SPD_ENOPROJECT, json_pack("{s:s}", "project", project), "project '%s' not found",
          project);
  return 1;
}

/* Projects with eggs, then [settings] projects without, by name. */
static int all_projects(app_t *app, char ***out, size_t *n) {
  int rc = eggs_projects(app->cfg.eggs_dir, out, n);
  if (rc) return rc;
  for (size_t i = 0; i < app->cfg.nsettings; i++) {
    const char *name = app->cfg.settings[i].name;
    int dup = 0;
    for (size_t k = 0; k < *n && !dup; k++) dup = !strcmp((*out)[k], name);
    if (dup) continue;
    char **v = realloc(*out, (*n + 1) * sizeof(*v));
    if (!v || !(v[*n] = strdup(name))) {
      if (v) *out = v;
      return -ENOMEM;
    }
    *out = v;
    (*n)++;
  }
  return 0;
}

void op_projects_list(op_call_t *c) {
  int rc = all_projects(c->app, &c->names, &c->nnames);
  if (rc) {
    op_fail(c, rc, NULL, "the projects could not be read: %s", spd_strerror(rc));
    return;
  }
  op_names_keep_mine(c);
  json_t *arr = json_array();
  for (size_t i = 0; i < c->nnames; i++) json_array_append_new(arr, project_object(c->app, c->names[i]));
  op_ok(c, json_pack("{s:o}", "projects", arr));
}

static int counts_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  int64_t counts[JOB_NSTATES];
  int rc = store_job_counts(s, op_str(c, "project"), counts);
  for (int i = 0; rc == 0 && i < JOB_NSTATES; i++) c->num[i] = counts[i];
  return rc;
}

static void counts_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (op_store_failed(c, rc)) return;
  json_t *o = project_object(c->app, op_str(c, "project"));
  json_t *jobs = json_object();
  for (int i = 0; i < JOB_NSTATES; i++)
    json_object_set_new(jobs, job_state_name((job_state_t)i), json_integer(c->num[i]));
  json_object_set_new(o, "jobs", jobs);
  op_ok(c, o);
}

void op_projects_get(op_call_t *c) {
  if (fail_no_project(c, op_str(c, "project"))) return;
  op_store(c, STORE_READ, counts_fn, counts_done);
}

static void project_deleted(void *ud, int rc) {
  op_call_t *c = ud;
  const char *project = op_str(c, "project");
  if (rc == -ENOENT && config_project_settings(&c->app->cfg, project)) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:s}", "project", project),
            "project '%s' has no eggs; it comes from the configuration's [settings]", project);
    return;
  }
  if (rc == -ENOENT) {
    fail_no_project(c, project);
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "project '%s' could not be deleted: %s", project, spd_strerror(rc));
    return;
  }
  spiders_forget(c->app->spiders, project);
  log_info("webservice", "Deleted project '%s'", project);
  op_ok(c, json_pack("{s:s,s:b}", "project", project, "deleted", 1));
}

void op_projects_delete(op_call_t *c) {
  int rc = api_eggs_delete(c->app, op_str(c, "project"), NULL, project_deleted, c, c->who);
  if (rc) op_fail(c, rc, NULL, "the project could not be deleted: %s", spd_strerror(rc));
}

/* ---- versions ---- */

void op_versions_list(op_call_t *c) {
  const char *project = op_str(c, "project");
  if (fail_no_project(c, project)) return;
  json_t *o = project_object(c->app, project);
  json_t *r = json_pack("{s:s,s:O,s:O}", "project", project, "versions",
                        json_object_get(o, "versions"), "latest_version",
                        json_object_get(o, "latest_version"));
  json_decref(o);
  op_ok(c, r);
}

static void added(void *ud, int rc, int stage, const char *error, char *const *names, size_t n) {
  op_call_t *c = ud;
  if (rc && stage == API_EGG_ENV) {
    op_fail(c, SPD_ERUNNER, json_pack("{s:s}", "pip", error ? error : spd_strerror(rc)),
            "the version's requirements could not be installed, so it was not stored");
    return;
  }
  if (rc && stage == API_EGG_LIST) {
    op_fail(c, SPD_ERUNNER, json_pack("{s:s}", "stderr", error ? error : spd_strerror(rc)),
            "the egg's spiders could not be listed, so it was not stored");
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "the egg could not be stored: %s", spd_strerror(rc));
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_string(names[i]));
  op_ok(c, json_pack("{s:s,s:s,s:o}", "project", op_str(c, "project"), "version",
                     op_str(c, "version"), "spiders", arr));
}

void op_versions_add(op_call_t *c) {
  int stage = 0;
  char why[512];
  api_egg_opts_t opts = {.requirements = op_str(c, "requirements"),
                         .python = op_str(c, "python")};
  int rc = api_egg_add(c->app, op_str(c, "project"), op_str(c, "version"), c->blob, c->blob_len,
                       &opts, added, c, &stage, why, sizeof(why), c->who);
  if (!rc) return;
  if (stage == API_EGG_ENVSPEC) {
    op_fail(c, rc == SPD_EBADPARAM ? rc : SPD_EBADPARAM, NULL, "%s", why);
    return;
  }
  if (stage == API_EGG_STAGE && rc == SPD_EBADEGG)
    op_fail(c, rc, json_pack("{s:s}", "field", "egg"),
            "the egg is not a ZIP file (send the .egg file's bytes as the body, or as the "
            "multipart field 'egg')");
  else if (stage == API_EGG_STAGE) op_fail(c, rc, NULL, "%s", why);
  else if (stage == API_EGG_MANIFEST)
    op_fail(c, rc, json_pack("{s:s}", "field", "egg"), "the project archive is refused: %s", why);
  else op_fail(c, rc, NULL, "the egg could not be added: %s", why);
}

static void version_deleted(void *ud, int rc) {
  op_call_t *c = ud;
  const char *project = op_str(c, "project"), *version = op_str(c, "version");
  if (rc == -ENOENT || rc == SPD_ETRAVERSAL) {
    op_fail(c, SPD_ENOVERSION, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "the version could not be deleted: %s", spd_strerror(rc));
    return;
  }
  spiders_forget(c->app->spiders, project);
  log_info("webservice", "Deleted version '%s' of project '%s'", version, project);
  op_ok(c, json_pack("{s:s,s:s,s:b}", "project", project, "version", version, "deleted", 1));
}

void op_versions_delete(op_call_t *c) {
  const char *project = op_str(c, "project"), *version = op_str(c, "version");
  if (fail_no_project(c, project)) return;
  int rc = api_eggs_delete(c->app, project, version, version_deleted, c, c->who);
  if (rc) op_fail(c, rc, NULL, "the version could not be deleted: %s", spd_strerror(rc));
}

/* ---- spiders ---- */

/* Resolves project/version into c->egg_path; 1 = failed (c is ended). */
static int resolve(op_call_t *c, const char *project, const char *version) {
  int rc = api_egg_resolve(c->app, project, version, &c->egg_path);
  if (rc == SPD_ENOPROJECT)
    op_fail(c, rc, json_pack("{s:s}", "project", project), "project '%s' not found", project);
  else if (rc == SPD_ENOVERSION)
    op_fail(c, rc, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
  else if (rc) op_fail(c, rc, NULL, "%s", spd_strerror(rc));
  return rc != 0;
}

static void spiders_done(void *ud, int rc, char *const *names, size_t n, const char *error) {
  op_call_t *c = ud;
  if (rc) {
    op_fail(c, SPD_ERUNNER, json_pack("{s:s}", "stderr", error ? error : spd_strerror(rc)),
            "the spiders of project '%s' could not be listed", op_str(c, "project"));
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_string(names[i]));
  const char *version = op_str(c, "version");
  op_ok(c, json_pack("{s:s,s:o,s:o}", "project", op_str(c, "project"), "version",
                     version ? json_string(version) : json_null(), "spiders", arr));
}

void op_spiders_list(op_call_t *c) {
  const char *project = op_str(c, "project"), *version = op_str(c, "version");
  if (resolve(c, project, version)) return;
  int rc = spiders_list(c->app->spiders, project, c->egg_path, version, spiders_done, c);
  if (rc) op_fail(c, SPD_ERUNNER, NULL, "the runner could not be started: %s", spd_strerror(rc));
}

/* scrapers.list: every project's latest spiders, one project at a time
 * (each listing may start a runner; cached ones answer at once). c->idx is
 * the project being listed; c->result collects. */
static void scrapers_next(op_call_t *c);

static void scrapers_listed(void *ud, int rc, char *const *names, size_t n, const char *error) {
  op_call_t *c = ud;
  const char *project = c->names[c->idx];
  if (rc) {
    json_array_append_new(json_object_get(c->result, "errors"),
                          json_pack("{s:s,s:s}", "project", project, "message",
                                    error ? error : spd_strerror(rc)));
  }
  for (size_t i = 0; !rc && i < n; i++)
    json_array_append_new(json_object_get(c->result, "scrapers"),
                          json_pack("{s:s++,s:s,s:s}", "id", project, "/", names[i], "project",
                                    project, "spider", names[i]));
  c->idx++;
  scrapers_next(c);
}

static void scrapers_next(op_call_t *c) {
  while (c->idx < c->nnames) {
    free(c->egg_path);
    c->egg_path = NULL;
    const char *project = c->names[c->idx];
    int rc = api_egg_resolve(c->app, project, NULL, &c->egg_path);
    if (!rc) rc = spiders_list(c->app->spiders, project, c->egg_path, NULL, scrapers_listed, c);
    if (!rc) return; /* scrapers_listed continues, maybe already done */
    json_array_append_new(json_object_get(c->result, "errors"),
                          json_pack("{s:s,s:s}", "project", project, "message", spd_strerror(rc)));
    c->idx++;
  }
  op_ok_result(c);
}

void op_scrapers_list(op_call_t *c) {
  int rc = all_projects(c->app, &c->names, &c->nnames);
  if (rc) {
    op_fail(c, rc, NULL, "the projects could not be read: %s", spd_strerror(rc));
    return;
  }
  op_names_keep_mine(c);
  c->result = json_pack("{s:[],s:[]}", "scrapers", "errors");
  scrapers_next(c);
}

/* ---- nodes ---- */

static int nodes_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  node_list_t l = {0};
  int rc = store_nodes_list(s, &l);
  if (rc) return rc;
  int64_t now = clock_wall_ms(), timeout = (int64_t)(c->app->cfg.node_timeout * 1000.0);
  json_t *a = json_array();
  for (size_t i = 0; a && i < l.n; i++) {
    const node_info_t *n = &l.v[i];
    int64_t age = now - n->heartbeat_ms;
    /* "late": silent past the timeout, not yet declared dead by a reap. */
    const char *state = n->dead ? "dead" : age > timeout ? "late" : "alive";
    json_array_append_new(
        a, json_pack("{s:s,s:o,s:o,s:i,s:i,s:o,s:o,s:I,s:s,s:b,s:b,s:I,s:I}", "name", n->name,
                     "url",
                     op_str_or_null(n->url), "version", op_str_or_null(n->version), "slots",
                     n->slots, "running", n->running,
                     "started_at", op_iso_time(n->started_ms), "heartbeat_at",
                     op_iso_time(n->heartbeat_ms), "heartbeat_age_ms", (json_int_t)age,
                     "state", state, "self", !strcmp(n->name, c->app->cfg.node_name),
                     "draining", n->draining != 0, "memory_free", (json_int_t)n->mem_free,
                     "memory_reserved", (json_int_t)n->mem_reserved));
  }
  node_list_release(&l);
  c->result = a ? json_pack("{s:o,s:b}", "nodes", a, "shared", store_pool_shared(c->app->store))
                : NULL;
  return c->result ? 0 : -ENOMEM;
}

static void nodes_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (op_store_failed(c, rc)) return;
  op_ok_result(c);
}

void op_nodes_list(op_call_t *c) { op_store(c, STORE_READ, nodes_fn, nodes_done); }

/* ---- nodes.drain, nodes.undrain: the node that answers ---- */

/* This node's drain state as both operations answer it. */
static json_t *drain_state(const app_t *app) {
  return json_pack("{s:s,s:b,s:b,s:I,s:I}", "name", app->cfg.node_name, "draining",
                   app->draining, "stopping", app->stopping, "running",
                   (json_int_t)app->counters.running, "pending",
                   (json_int_t)app->counters.pending);
}

void op_nodes_drain(op_call_t *c) {
  int on = !strcmp(c->def->name, "nodes.drain");
  int rc = flow_drain(&c->app->flow, on);
  if (rc == SPD_ESHUTDOWN) {
    op_fail(c, rc, NULL, "the daemon is stopping: its drain ends in the stop");
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "cannot %s: %s", on ? "drain" : "undrain", spd_strerror(rc));
    return;
  }
  op_ok(c, drain_state(c->app));
}

/* ---- a version's Python environment (store/pyenv.h) ---- */

/* The environment of project/version as the API shows it: null when the
 * version runs on the daemon's python; else its key, interpreter, state
 * (ready, building, missing: not built on this node), and once built what
 * spiderd-env.json says (packages, size, build time); with_log adds the
 * whole build log. SPD_ENOVERSION when there is no such version. */
static int env_object(app_t *app, const char *project, const char *version, int with_log,
                      json_t **out) {
  char *egg = NULL, *interp = NULL, *reqs = NULL, key[PYENV_KEY_LEN + 1];
  *out = NULL;
  int rc = api_egg_resolve(app, project, version, &egg);
  if (rc) return rc;
  rc = egg ? pyenv_sidecar_read(egg, key, &interp, &reqs) : -ENOENT;
  free(egg);
  if (rc == -ENOENT) {
    *out = json_null();
    return 0;
  }
  if (rc) return rc;
  const char *dir = pyenvs_dir(app->pyenvs);
  const char *state = pyenvs_building(app->pyenvs, key) ? "building"
                       : pyenv_ready(dir, key)          ? "ready"
                                                        : "missing";
  json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "key", key, "python", interp, "state", state,
                        "requirements", reqs);
  free(interp);
  free(reqs);
  if (!o) return -ENOMEM;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s/" PYENV_READY, dir, key);
  json_t *info = !strcmp(state, "ready") ? json_load_file(path, 0, NULL) : NULL;
  static const char *const fields[] = {"python_version", "packages", "size", "build_ms",
                                       "built_at"};
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    json_t *v = info ? json_object_get(info, fields[i]) : NULL;
    json_object_set(o, fields[i], v ? v : json_null());
  }
  json_decref(info);
  if (with_log) {
    snprintf(path, sizeof(path), "%s/%s/build.log", dir, key);
    FILE *f = fopen(path, "re");
    char *text = f ? malloc(1024 * 1024 + 1) : NULL;
    size_t n = text ? fread(text, 1, 1024 * 1024, f) : 0;
    if (text) text[n] = '\0';
    json_object_set_new(o, "log", text ? json_string(text) : json_null());
    free(text);
    if (f) fclose(f);
  }
  *out = o;
  return 0;
}

static void env_reply(op_call_t *c, int with_log) {
  const char *project = op_str(c, "project"), *version = op_str(c, "version");
  json_t *env = NULL;
  int rc = env_object(c->app, project, version, with_log, &env);
  if (rc == SPD_ENOPROJECT || rc == SPD_ENOVERSION) {
    op_fail(c, SPD_ENOVERSION, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "the version's environment cannot be read: %s", spd_strerror(rc));
    return;
  }
  op_ok(c, json_pack("{s:s,s:s,s:o}", "project", project, "version", version, "environment",
                     env));
}

void op_versions_env(op_call_t *c) {
  int log = 0;
  const json_t *v = op_json(c, "log");
  if (v) log = json_is_true(v);
  env_reply(c, log);
}

static void env_rebuilt(void *ud, int rc, const char *key, const char *why) {
  op_call_t *c = ud;
  if (rc) {
    op_fail(c, SPD_ERUNNER, json_pack("{s:s}", "pip", why ? why : spd_strerror(rc)),
            "the environment %s could not be built again; the version's crawls cannot start "
            "until it is",
            key);
    return;
  }
  char *egg = NULL;
  /* A new modification time: the version's warm template and spider list
   * were made with the old environment (run/warm.h, api/spiders.h). */
  if (api_egg_resolve(c->app, op_str(c, "project"), op_str(c, "version"), &egg) == 0 && egg)
    utimensat(AT_FDCWD, egg, NULL, 0);
  free(egg);
  env_reply(c, 0);
}

void op_versions_rebuild(op_call_t *c) {
  const char *project = op_str(c, "project"), *version = op_str(c, "version");
  char *egg = NULL, *interp = NULL, *reqs = NULL, key[PYENV_KEY_LEN + 1];
  int rc = api_egg_resolve(c->app, project, version, &egg);
  if (rc == SPD_ENOPROJECT || rc == SPD_ENOVERSION || (!rc && !egg)) {
    free(egg);
    op_fail(c, SPD_ENOVERSION, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
    return;
  }
  rc = rc ? rc : pyenv_sidecar_read(egg, key, &interp, &reqs);
  free(egg);
  if (rc == -ENOENT) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' has no environment: it runs on the daemon's python",
            version, project);
    return;
  }
  if (!rc) rc = pyenvs_ensure(c->app->pyenvs, interp, reqs, 1, env_rebuilt, c);
  free(interp);
  free(reqs);
  if (rc) op_fail(c, rc, NULL, "the environment cannot be built again: %s", spd_strerror(rc));
}
