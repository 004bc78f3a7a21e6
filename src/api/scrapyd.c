/* Scrapyd 1.6's JSON API (scrapyd-api.md §1-2): same paths, parameters,
 * fields, messages, status codes and headers, over spiderd's store and
 * launcher. Thin: parse and validate, call the store or the launcher, render.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/jobs.h"
#include "api/listing.h"
#include "api/projects.h"
#include "api/render.h"
#include "app.h"
#include "core/limits.h"
#include "core/names.h"
#include "error.h"
#include "log.h"
#include "store/eggs.h"

typedef struct endpoint endpoint_t;
typedef struct call call_t;

struct endpoint {
  const char *name;  /* "schedule.json" */
  int post;          /* POST-only (else GET) */
  const char *cls;   /* Scrapyd's resource class, for the HEAD quirk */
  void (*fn)(call_t *c);
  role_t role;       /* the least role that may call it (api/auth.h) */
};

typedef struct scrapyd {
  app_t *app;
  struct binding {
    struct scrapyd *sd;
    const endpoint_t *ep;
  } bindings[16];
} scrapyd_t;

/* One API call in flight. Calls that wait on the store or on a runner are
 * heap-allocated and finish in a callback. */
struct call {
  scrapyd_t *sd;
  app_t *app;
  http_req_t *req;
  const endpoint_t *ep;
  const auth_who_t *who; /* who asked */
  /* per-endpoint state */
  job_t job;
  char *egg_path;
  char *project;
  char *jobid;
  char *version; /* delversion.json's, while the deletion is under way */
  int found;
  job_state_t state;
  char *body;
};

static const char *methods_of(const endpoint_t *ep) {
  return ep->post ? "OPTIONS, HEAD, POST" : "OPTIONS, HEAD, GET";
}

static void add_cors(call_t *c) {
  http_reply_header(c->req, "Access-Control-Allow-Origin", "*");
  http_reply_header(c->req, "Access-Control-Allow-Methods", methods_of(c->ep));
  http_reply_header(c->req, "Access-Control-Allow-Headers", "X-Requested-With");
}

static void call_free(call_t *c) {
  job_release(&c->job);
  free(c->egg_path);
  free(c->project);
  free(c->jobid);
  free(c->version);
  free(c->body);
  free(c);
}

/* Sends o (consumed) as Scrapyd's JSON with its CORS headers; frees c. */
static void send_json_status(call_t *c, int status, json_t *o) {
  size_t len = 0;
  char *body = o ? render_json(o, &len) : NULL;
  json_decref(o);
  add_cors(c);
  if (body) http_reply(c->req, status, "application/json", body, len);
  else http_reply(c->req, 500, "text/plain", "out of memory\n", 14);
  free(body);
  call_free(c);
}

static void send_json(call_t *c, json_t *o) { send_json_status(c, 200, o); }

/* Replies with fields + status + node_name (fields is consumed) and frees c. */
static void reply_ok(call_t *c, json_t *fields) {
  json_object_set_new(fields, "status", json_string("ok"));
  json_object_set_new(fields, "node_name", json_string(c->app->cfg.node_name));
  send_json(c, fields);
}

/* Scrapyd reports every API error with HTTP 200 and this body; with
 * debug = on, as plain text without CORS headers. Frees c. A full disk
 * (rc -ENOSPC) is 507 with the same body: nothing was stored, and a client
 * that only looks at the status must not take it for a success. */
static void reply_error_rc(call_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define reply_error(c, ...) reply_error_rc(c, 0, __VA_ARGS__)
static void reply_error_rc(call_t *c, int rc, const char *fmt, ...) {
  char msg[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  int status = spd_http_status(rc) == 507 ? 507 : 200;
  if (c->app->cfg.debug) {
    char *txt = NULL;
    int n = asprintf(&txt, "Traceback (most recent call last):\n  (spiderd)\n%s\n", msg);
    if (n >= 0) http_reply(c->req, status, "text/html", txt, (size_t)n);
    else http_reply(c->req, 500, "text/plain", "out of memory\n", 14);
    free(txt);
    call_free(c);
    return;
  }
  json_t *o = json_object();
  json_object_set_new(o, "status", json_string("error"));
  json_object_set_new(o, "message", json_string(msg));
  json_object_set_new(o, "node_name", json_string(c->app->cfg.node_name));
  send_json_status(c, status, o);
}

/* 403 with Scrapyd's error body: these credentials may not do that. */
static void reply_forbidden(call_t *c, const char *why) {
  send_json_status(c, 403, json_pack("{s:s, s:s, s:s}", "status", "error", "message", why,
                                     "node_name", c->app->cfg.node_name));
}

/* A caller limited to projects names one when it leaves the project out:
 * its only project, or NULL after refusing the call (c freed). *project
 * is left alone for everyone else. 1 = refused. */
static int default_project(call_t *c, const char **project) {
  const char *limit = c->who->projects;
  if (*project || !*limit) return 0;
  if (!strchr(limit, ',')) {
    *project = limit;
    return 0;
  }
  char why[512];
  snprintf(why, sizeof(why), "%s is limited to projects %.400s: name one with 'project'",
           c->who->actor, limit);
  reply_forbidden(c, why);
  return 1;
}

/* ---- parameters (Scrapyd's @param decorator) ---- */

/* Reads a text parameter: NULL + error reply when required and missing or
 * not UTF-8 (c is freed then; the caller must return at once). *ok tells. */
static const char *text_param(call_t *c, const char *key, int required, int *ok) {
  const http_param_t *p = http_req_param(c->req, key);
  *ok = 1;
  if (!p) {
    if (required) {
      *ok = 0;
      reply_error(c, "'%s' parameter is required", key);
    }
    return NULL;
  }
  char why[160];
  if (!utf8_valid(p->value, p->len, why, sizeof(why))) {
    *ok = 0;
    reply_error(c, "%s is invalid: %s", key, why);
    return NULL;
  }
  if (strlen(p->value) != p->len) {
    *ok = 0;
    reply_error(c, "%s is invalid: embedded null character", key);
    return NULL;
  }
  return p->value;
}

#define PARAM(var, key, required)                      \
  int var##_ok;                                        \
  const char *var = text_param(c, key, required, &var##_ok); \
  if (!var##_ok) return

/* Refuses a project name that would leave eggs_dir, as Scrapyd does, and any
 * other name unsafe as a path. 1 = refused (c freed). */
static int bad_project(call_t *c, const char *project) {
  if (strstr(project, "..") || strchr(project, '/')) {
    reply_error(c, "DirectoryTraversalError: %s", project);
    return 1;
  }
  char why[256];
  if (!name_valid("project", project, why, sizeof(why))) {
    reply_error(c, "%s", why);
    return 1;
  }
  return 0;
}

/* ---- daemonstatus.json ---- */

static void ep_daemonstatus(call_t *c) {
  /* The hot path of every monitoring client: no JSON library, no I/O. */
  char *node = render_json_string(c->app->cfg.node_name);
  char body[512];
  int n = snprintf(body, sizeof(body),
                   "{\"pending\": %lld, \"running\": %lld, \"finished\": %lld, "
                   "\"status\": \"ok\", \"node_name\": %s}\n",
                   (long long)c->app->counters.pending, (long long)c->app->counters.running,
                   (long long)c->app->counters.finished, node ? node : "null");
  free(node);
  add_cors(c);
  http_reply(c->req, 200, "application/json", body, (size_t)n);
  call_free(c);
}

/* ---- listprojects.json / listversions.json ---- */

static void ep_listprojects(call_t *c) {
  char **v = NULL;
  size_t n = 0;
  json_t *arr = json_array();
  if (eggs_projects(c->app->cfg.eggs_dir, &v, &n) == 0) {
    for (size_t i = 0; i < n; i++)
      if (principal_project_ok(c->who->projects, v[i]))
        json_array_append_new(arr, json_string(v[i]));
    strv_free(v, n);
  }
  for (size_t i = 0; i < c->app->cfg.nsettings; i++) {
    const char *name = c->app->cfg.settings[i].name;
    int dup = !principal_project_ok(c->who->projects, name);
    for (size_t k = 0; k < json_array_size(arr); k++)
      if (!strcmp(json_string_value(json_array_get(arr, k)), name)) dup = 1;
    if (!dup) json_array_append_new(arr, json_string(name));
  }
  reply_ok(c, json_pack("{s:o}", "projects", arr));
}

static void ep_listversions(call_t *c) {
  PARAM(project, "project", 1);
  if (bad_project(c, project)) return;
  char **v = NULL;
  size_t n = 0;
  json_t *arr = json_array();
  if (eggs_versions(c->app->cfg.eggs_dir, project, &v, &n) == 0) {
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_string(v[i]));
    strv_free(v, n);
  }
  reply_ok(c, json_pack("{s:o}", "versions", arr));
}

/* ---- listspiders.json ---- */

static void spiders_reply(void *ud, int rc, char *const *names, size_t n, const char *error) {
  call_t *c = ud;
  if (rc) {
    reply_error(c, "RunnerError: %s", error ? error : spd_strerror(rc));
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_string(names[i]));
  reply_ok(c, json_pack("{s:o}", "spiders", arr));
}

/* Resolves the egg of project/version (raw or sanitized; NULL = latest) into
 * c->egg_path, which stays NULL for a [settings] project without eggs.
 * 1 = error replied. */
static int resolve_egg(call_t *c, const char *project, const char *version) {
  int rc = api_egg_resolve(c->app, project, version, &c->egg_path);
  if (rc == SPD_ENOPROJECT) reply_error(c, "project '%s' not found", project);
  else if (rc == SPD_ENOVERSION) reply_error(c, "version '%s' not found", version);
  else if (rc) reply_error(c, "MemoryError: out of memory");
  return rc != 0;
}

static void ep_listspiders(call_t *c) {
  PARAM(project, "project", 1);
  PARAM(version, "_version", 0);
  if (resolve_egg(c, project, version)) return;
  int rc = spiders_list(c->app->spiders, project, c->egg_path, version, spiders_reply, c);
  if (rc) reply_error(c, "RunnerError: %s", spd_strerror(rc));
}

/* ---- addversion.json ---- */

static void addversion_done(void *ud, int rc, int stage, const char *error, char *const *names,
                             size_t n) {
  call_t *c = ud;
  if (rc && stage == API_EGG_LIST) {
    reply_error(c, "RunnerError: %s", error ? error : spd_strerror(rc));
    return;
  }
  if (rc && stage == API_EGG_ENV) {
    reply_error(c, "EnvironmentError: the version's requirements could not be installed, so "
                   "it was not stored:\n%s",
                error ? error : spd_strerror(rc));
    return;
  }
  if (rc) {
    reply_error_rc(c, rc, "OSError: cannot store the egg: %s", spd_strerror(rc));
    return;
  }
  json_t *o = json_object();
  json_object_set_new(o, "project", json_string(http_req_param(c->req, "project")->value));
  json_object_set_new(o, "version", json_string(http_req_param(c->req, "version")->value));
  json_object_set_new(o, "spiders", json_integer((json_int_t)n));
  reply_ok(c, o);
}

static void ep_addversion(call_t *c) {
  PARAM(project, "project", 1);
  PARAM(version, "version", 1);
  const http_param_t *egg = http_req_param(c->req, "egg");
  if (!egg) {
    reply_error(c, "'egg' parameter is required");
    return;
  }
  if (bad_project(c, project)) return;
  /* Its file name is the version sanitized: refused before the runner
   * lists the egg's spiders, with the limit every name has (the REST
   * route's too), rather than by the file system afterwards. */
  size_t vlen = strlen(version);
  if (!vlen || vlen > 200) {
    reply_error(c, vlen ? "version is longer than 200 bytes" : "version must not be empty");
    return;
  }
  char why[512];
  int stage = 0;
  const http_param_t *reqs = http_req_param(c->req, "requirements");
  const http_param_t *py = http_req_param(c->req, "python");
  api_egg_opts_t opts = {.requirements = reqs ? reqs->value : NULL,
                         .python = py ? py->value : NULL};
  int rc = api_egg_add(c->app, project, version, egg->value, egg->len, &opts, addversion_done, c,
                       &stage, why, sizeof(why), c->who);
  if (!rc) return;
  if (stage == API_EGG_STAGE) reply_error_rc(c, rc, "%s", why);
  else if (stage == API_EGG_ENVSPEC) reply_error(c, "EnvironmentError: %s", why);
  else if (stage == API_EGG_MANIFEST) reply_error(c, "ManifestError: %s", why);
  else if (stage == API_EGG_ALLOC) reply_error(c, "MemoryError: out of memory");
  else reply_error(c, "RunnerError: %s", spd_strerror(rc));
}

/* ---- schedule.json ---- */

/* Python's repr() of a bytes value, for float() error messages. */
static void bytes_repr(const char *s, char *out, size_t cap) {
  char quote = (strchr(s, '\'') && !strchr(s, '"')) ? '"' : '\'';
  size_t w = 0;
  w += (size_t)snprintf(out + w, cap - w, "b%c", quote);
  for (const unsigned char *p = (const unsigned char *)s; *p && w + 8 < cap; p++) {
    if (*p == '\\' || *p == (unsigned char)quote) w += (size_t)snprintf(out + w, cap - w, "\\%c", *p);
    else if (*p == '\n') w += (size_t)snprintf(out + w, cap - w, "\\n");
    else if (*p == '\r') w += (size_t)snprintf(out + w, cap - w, "\\r");
    else if (*p == '\t') w += (size_t)snprintf(out + w, cap - w, "\\t");
    else if (*p < 0x20 || *p >= 0x7f) w += (size_t)snprintf(out + w, cap - w, "\\x%02x", *p);
    else out[w++] = (char)*p;
  }
  snprintf(out + w, cap - w, "%c", quote);
}

/* Python's float(): surrounding white space allowed, no hex. */
static int parse_py_float(const char *s, double *out) {
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v') s++;
  if (!*s || strpbrk(s, "xX")) return -EINVAL;
  char *end = NULL;
  errno = 0;
  double d = strtod(s, &end);
  if (end == s) return -EINVAL;
  while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r' || *end == '\f' ||
         *end == '\v')
    end++;
  if (*end) return -EINVAL;
  *out = d;
  return 0;
}

static void sched_done(void *ud, int rc, int stage, const char *error) {
  call_t *c = ud;
  if (!rc) {
    /* A held unique_key: the holder's id, marked so a client can tell. */
    json_t *o = json_pack("{s:s}", "jobid", c->job.jobid);
    if (stage == API_JOB_EXISTING) json_object_set_new(o, "existing", json_true());
    reply_ok(c, o);
    return;
  }
  switch (stage) {
  case API_JOB_LIST: reply_error(c, "RunnerError: %s", error ? error : spd_strerror(rc)); break;
  case API_JOB_SPIDER: reply_error(c, "spider '%s' not found", c->job.spider); break;
  case API_JOB_SUBMIT: reply_error(c, "StoreError: the daemon is shutting down"); break;
  default:
    reply_error_rc(c, rc, "StoreError: the job could not be stored: %s", spd_strerror(rc));
  }
}

static const char *const schedule_own_params[] = {
    "project", "spider", "_version", "jobid", "priority", "setting",
    "_timeout", "_retries", "_retry_backoff", "unique_key", "_unique_key", NULL};

/* spiderd's robustness parameters, underscored like _version so they never
 * reach the spider. Seconds become ms; 0 or absent = the daemon's default.
 * 1 = error replied. */
static int schedule_seconds(call_t *c, const char *name, const char *v, int64_t *ms) {
  double d = 0;
  if (!v) return 0;
  if (parse_py_float(v, &d)) {
    char repr[600];
    bytes_repr(v, repr, sizeof(repr));
    reply_error(c, "%s is invalid: could not convert string to float: %s", name, repr);
    return 1;
  }
  if (!isfinite(d) || d < 0 || d > 315360000.0) {
    reply_error(c, "%s is invalid: it must be a number of seconds from 0 to 315360000", name);
    return 1;
  }
  *ms = (int64_t)llround(d * 1000.0);
  return 0;
}

static int is_own_param(const char *key) {
  for (int i = 0; schedule_own_params[i]; i++)
    if (!strcmp(key, schedule_own_params[i])) return 1;
  return 0;
}

/* _timeout, _retries, _retry_backoff and the unique key (unique_key or
 * _unique_key) into c->job. 1 = error replied. */
static int schedule_policy(call_t *c) {
  int ok;
  const char *timeout_s = text_param(c, "_timeout", 0, &ok);
  if (!ok) return 1;
  const char *retries_s = text_param(c, "_retries", 0, &ok);
  if (!ok) return 1;
  const char *backoff_s = text_param(c, "_retry_backoff", 0, &ok);
  if (!ok) return 1;
  if (schedule_seconds(c, "_timeout", timeout_s, &c->job.timeout_ms) ||
      schedule_seconds(c, "_retry_backoff", backoff_s, &c->job.retry_backoff_ms))
    return 1;
  /* unique_key, or _unique_key (underscored like the other spiderd
   * parameters); both are kept from the spider. */
  const char *ukey_plain = text_param(c, "unique_key", 0, &ok);
  if (!ok) return 1;
  const char *ukey_under = text_param(c, "_unique_key", 0, &ok);
  if (!ok) return 1;
  if (ukey_plain && ukey_under && strcmp(ukey_plain, ukey_under)) {
    reply_error(c, "unique_key and _unique_key differ: give one of them");
    return 1;
  }
  const char *ukey = ukey_under ? ukey_under : ukey_plain;
  if (ukey) {
    char kwhy[256];
    if (!job_unique_key_valid(ukey, kwhy, sizeof(kwhy))) {
      reply_error(c, "%s is invalid: %s", ukey_under ? "_unique_key" : "unique_key", kwhy);
      return 1;
    }
    if (!(c->job.unique_key = strdup(ukey))) {
      reply_error(c, "MemoryError: out of memory");
      return 1;
    }
  }
  if (retries_s) {
    char *end = NULL;
    errno = 0;
    long n = strtol(retries_s, &end, 10);
    if (!*retries_s || *end || errno || n < 0 || n > 100) {
      reply_error(c, "_retries is invalid: it must be an integer from 0 to 100");
      return 1;
    }
    c->job.max_retries = (int)n;
  }
  return 0;
}

/* Settings (every value) and spider arguments (first value of every other
 * key, in first-appearance order) into c->job, as Scrapyd reads
 * request.args. 1 = error replied. */
static int schedule_args(call_t *c) {
  size_t np = 0;
  const http_param_t *ps = http_req_params(c->req, &np);
  json_t *settings = json_object(), *args = json_object();
  c->job.settings = settings;
  c->job.args = args;
  int setting_index = 0;
  char why[256];
  for (size_t i = 0; i < np; i++) {
    const http_param_t *p = &ps[i];
    if (!utf8_valid(p->value, p->len, why, sizeof(why))) {
      reply_error(c, "%s is invalid: %s", p->key, why);
      return 1;
    }
    if (!strcmp(p->key, "setting")) {
      /* Twisted's args.update: body values replace the query's. */
      const http_param_t *first = http_req_param(c->req, "setting");
      if (first && first->from_body != p->from_body) continue;
      const char *eq = strchr(p->value, '=');
      if (!eq) {
        reply_error(c,
                    "ValueError: dictionary update sequence element #%d has length 1; 2 is "
                    "required",
                    setting_index);
        return 1;
      }
      char *name = strndup(p->value, (size_t)(eq - p->value));
      json_object_set_new(settings, name ? name : "", json_string(eq + 1));
      free(name);
      setting_index++;
      continue;
    }
    if (is_own_param(p->key) || json_object_get(args, p->key)) continue;
    if (!strcmp(p->key, "settings") || !strcmp(p->key, "_job") || !strcmp(p->key, "name")) {
      reply_error(c, "TypeError: add() got multiple values for keyword argument '%s'", p->key);
      return 1;
    }
    const http_param_t *v = http_req_param(c->req, p->key);
    if (limits_is_arg(p->key)) {
      /* Resource limits stay in the job's args (stored and copied with
       * them, kept from the spider at launch): checked here, where the
       * client can still be told. */
      int64_t n;
      if (limits_parse_arg(p->key, v->value, &n, why, sizeof(why))) {
        reply_error(c, "%s", why);
        return 1;
      }
    }
    json_object_set_new(args, p->key, json_string(v->value));
  }
  return 0;
}

static void ep_schedule_json(call_t *c) {
  PARAM(project, "project", 1);
  PARAM(spider, "spider", 1);
  PARAM(version, "_version", 0);
  PARAM(jobid, "jobid", 0);
  PARAM(priority_s, "priority", 0);
  double priority = 0;
  if (priority_s && parse_py_float(priority_s, &priority)) {
    char repr[600];
    bytes_repr(priority_s, repr, sizeof(repr));
    reply_error(c, "priority is invalid: could not convert string to float: %s", repr);
    return;
  }
  if (!isfinite(priority)) {
    reply_error(c, "priority is invalid: it must be a finite number");
    return;
  }
  if (schedule_policy(c) || schedule_args(c) || resolve_egg(c, project, version)) return;
  char why[256];
  if (!name_valid("spider", spider, why, sizeof(why))) {
    reply_error(c, "spider '%s' not found", spider);
    return;
  }
  char generated[33];
  if (!jobid) {
    api_uuid1_hex(c->app, generated);
    jobid = generated;
  } else if (!name_valid("job id", jobid, why, sizeof(why))) {
    reply_error(c, "%s", why);
    return;
  }
  c->job.jobid = strdup(jobid);
  c->job.project = strdup(project);
  c->job.spider = strdup(spider);
  c->job.version = version ? strdup(version) : NULL;
  c->job.priority = priority;
  c->job.state = JOB_PENDING;
  if (!c->job.jobid || !c->job.project || !c->job.spider || (version && !c->job.version)) {
    reply_error(c, "MemoryError: out of memory");
    return;
  }
  int rc = api_job_enqueue(c->app, &c->job, c->egg_path, sched_done, c, c->who);
  if (rc) reply_error(c, "RunnerError: %s", spd_strerror(rc));
}

/* ---- cancel.json ---- */

static void cancel_done(void *ud, int rc, int found, int count) {
  call_t *c = ud;
  if (rc) {
    reply_error_rc(c, rc, "StoreError: %s", spd_strerror(rc));
    return;
  }
  json_t *o = json_object();
  const char *prev = found ? "running" : count ? "pending" : NULL;
  json_object_set_new(o, "prevstate", prev ? json_string(prev) : json_null());
  reply_ok(c, o);
}

static void ep_cancel(call_t *c) {
  PARAM(project, "project", 1);
  PARAM(job, "job", 1);
  PARAM(signame, "signal", 0);
  int sig = SIGINT;
  if (signame && api_parse_signal(signame, &sig)) {
    reply_error(c, "TypeError: 'str' object cannot be interpreted as an integer");
    return;
  }
  if (!api_project_known(c->app, project)) {
    reply_error(c, "project '%s' not found", project);
    return;
  }
  int rc = api_job_cancel(c->app, project, job, sig, cancel_done, c, c->who);
  if (rc == -ENOMEM) reply_error(c, "MemoryError: out of memory");
  else if (rc) reply_error(c, "StoreError: the daemon is shutting down");
}

/* ---- status.json ---- */

static int status_fn(store_t *s, void *arg) {
  call_t *c = arg;
  int rc = store_job_status(s, c->project, c->jobid, &c->state);
  if (rc == -ENOENT) {
    c->found = 0;
    return 0;
  }
  if (rc) return rc;
  c->found = 1;
  if (!job_state_final(c->state)) return 0;
  /* An ended job also reports how it ended: the newest of that id wins, as
   * in Scrapyd's finished-first lookup. */
  job_list_t l = {0};
  job_filter_t f = {.project = c->project, .jobid = c->jobid, .started_only = 1, .limit = 1};
  f.states = (1u << JOB_FINISHED) | (1u << JOB_FAILED) | (1u << JOB_CANCELLED) | (1u << JOB_LOST);
  rc = store_jobs_list(s, &f, &l);
  if (rc == 0 && l.n == 1) {
    c->job = l.v[0];
    job_init(&l.v[0]);
  }
  job_list_release(&l);
  return rc;
}

static void status_done(void *arg, int rc) {
  call_t *c = arg;
  if (rc) {
    reply_error_rc(c, rc, "StoreError: %s", spd_strerror(rc));
    return;
  }
  json_t *o = json_object();
  if (!c->found) {
    json_object_set_new(o, "currstate", json_null());
  } else {
    const char *curr = c->state == JOB_PENDING || c->state == JOB_PAUSED ? "pending"
                       : c->state == JOB_RUNNING ? "running"
                                                 : "finished";
    json_object_set_new(o, "currstate", json_string(curr));
    json_object_set_new(o, "state", json_string(job_state_name(c->state)));
    if (c->job.jobid) render_job_end(o, &c->job);
  }
  reply_ok(c, o);
}

static void status_read(void *ud) {
  call_t *c = ud;
  if (store_submit(c->app->store, STORE_READ, status_fn, c, status_done))
    reply_error(c, "StoreError: the daemon is shutting down");
}

static void ep_status(call_t *c) {
  PARAM(job, "job", 1);
  PARAM(project, "project", 0);
  if (default_project(c, &project)) return;
  if (project && !api_project_known(c->app, project)) {
    reply_error(c, "project '%s' not found", project);
    return;
  }
  c->project = project ? strdup(project) : NULL;
  c->jobid = strdup(job);
  if (flow_after_ends(&c->app->flow, status_read, c)) status_read(c);
}

/* ---- listjobs.json ---- */

/* Every job in one answer, as Scrapyd gives it (it has no paging), read
 * and sent a page at a time (api/listing.h). */
static void lj_head(void *ud, strbuf_t *b) {
  (void)ud;
  (void)b;
}

static void lj_open(void *ud, int group, strbuf_t *b) {
  (void)ud;
  render_listjobs_open(group, b);
}

static void lj_row(void *ud, int group, size_t i, job_t *j, strbuf_t *b) {
  call_t *c = ud;
  render_listjobs_row(&c->app->cfg, group, i, j, b);
}

static void lj_close(void *ud, int group, strbuf_t *b) {
  (void)ud;
  (void)group;
  (void)b;
}

static void lj_tail(void *ud, strbuf_t *b) {
  call_t *c = ud;
  render_listjobs_tail(c->app->cfg.node_name, b);
}

static void lj_headers(void *ud, http_req_t *req) {
  (void)req;
  add_cors(ud);
}

static void lj_failed(void *ud, http_req_t *req, int rc) {
  call_t *c = ud;
  (void)req;
  reply_error_rc(c, rc, "StoreError: %s", spd_strerror(rc));
}

static void lj_free(void *ud) { call_free(ud); }

static const api_listing_fmt_t listjobs_fmt = {
    lj_head, lj_open, lj_row, lj_close, lj_tail, lj_headers, lj_failed, lj_free};

static void ep_listjobs(call_t *c) {
  PARAM(project, "project", 0);
  if (default_project(c, &project)) return;
  if (project && !api_project_known(c->app, project)) {
    reply_error(c, "project '%s' not found", project);
    return;
  }
  if (api_listing_start(c->app, c->req, project, "application/json", &listjobs_fmt, c))
    reply_error(c, "StoreError: the daemon is shutting down");
}

/* ---- delversion.json / delproject.json ---- */

static void version_deleted(void *ud, int rc) {
  call_t *c = ud;
  const char *project = c->project, *version = c->version;
  if (rc == -ENOENT || rc == SPD_ETRAVERSAL) {
    reply_error(c, "version '%s' not found", version);
    return;
  }
  if (rc) {
    reply_error(c, "OSError: %s", spd_strerror(rc));
    return;
  }
  spiders_forget(c->app->spiders, project);
  log_info("webservice", "Deleted version '%s' of project '%s'", version, project);
  reply_ok(c, json_object());
}

static void ep_delversion(call_t *c) {
  PARAM(project, "project", 1);
  PARAM(version, "version", 1);
  if (bad_project(c, project)) return;
  c->project = strdup(project);
  c->version = strdup(version);
  int rc = c->project && c->version ? api_eggs_delete(c->app, project, version, version_deleted, c, c->who)
                                    : -ENOMEM;
  if (rc) reply_error(c, "OSError: %s", spd_strerror(rc));
}

static void project_deleted(void *ud, int rc) {
  call_t *c = ud;
  const char *project = c->project;
  if (rc == -ENOENT) {
    reply_error(c, "project '%s' not found", project);
    return;
  }
  if (rc) {
    reply_error(c, "OSError: %s", spd_strerror(rc));
    return;
  }
  spiders_forget(c->app->spiders, project);
  log_info("webservice", "Deleted project '%s'", project);
  reply_ok(c, json_object());
}

static void ep_delproject(call_t *c) {
  PARAM(project, "project", 1);
  if (bad_project(c, project)) return;
  c->project = strdup(project);
  int rc = c->project ? api_eggs_delete(c->app, project, NULL, project_deleted, c, c->who) : -ENOMEM;
  if (rc) reply_error(c, "OSError: %s", spd_strerror(rc));
}

/* ---- dispatch ---- */

static const endpoint_t endpoints[] = {
    {"daemonstatus.json", 0, "DaemonStatus", ep_daemonstatus, ROLE_READ},
    {"addversion.json", 1, "AddVersion", ep_addversion, ROLE_DEPLOY},
    {"schedule.json", 1, "Schedule", ep_schedule_json, ROLE_RUN},
    {"cancel.json", 1, "Cancel", ep_cancel, ROLE_RUN},
    {"status.json", 0, "Status", ep_status, ROLE_READ},
    {"listprojects.json", 0, "ListProjects", ep_listprojects, ROLE_READ},
    {"listversions.json", 0, "ListVersions", ep_listversions, ROLE_READ},
    {"listspiders.json", 0, "ListSpiders", ep_listspiders, ROLE_READ},
    {"delproject.json", 1, "DeleteProject", ep_delproject, ROLE_DEPLOY},
    {"delversion.json", 1, "DeleteVersion", ep_delversion, ROLE_DEPLOY},
    {"listjobs.json", 0, "ListJobs", ep_listjobs, ROLE_READ},
};

static void on_request(http_req_t *req, void *ud) {
  struct binding *b = ud;
  call_t *c = http_req_calloc(req, sizeof(*c));
  if (!c) return;
  job_init(&c->job);
  c->sd = b->sd;
  c->app = b->sd->app;
  c->req = req;
  c->ep = b->ep;
  const char *m = http_req_method(req);
  if (!strcmp(m, "OPTIONS")) {
    http_reply_header(req, "Allow", methods_of(c->ep));
    add_cors(c);
    http_reply_header(req, "Content-Length", "0");
    http_reply(req, 204, NULL, "", 0);
    call_free(c);
    return;
  }
  int head = http_req_is_head(req);
  if (c->ep->post) {
    if (head) {
      /* Twisted answers HEAD with the missing render_GET's error. */
      reply_error(c, "AttributeError: '%s' object has no attribute 'render_GET'", c->ep->cls);
      return;
    }
    if (strcmp(m, "POST")) {
      reply_error(c, "UnsupportedMethod: Expected one of [b'HEAD', b'OPTIONS', b'POST']");
      return;
    }
  } else if (strcmp(m, "GET") && !head) {
    reply_error(c, "UnsupportedMethod: Expected one of [b'HEAD', b'OPTIONS', b'GET']");
    return;
  }
  c->who = auth_who(c->app, req);
  const http_param_t *project = http_req_param(req, "project");
  char why[512];
  if (auth_allow(c->who, c->ep->role, project ? project->value : NULL, why, sizeof(why))) {
    reply_forbidden(c, why);
    return;
  }
  c->ep->fn(c);
}

int api_scrapyd_register(app_t *app) {
  scrapyd_t *sd = calloc(1, sizeof(*sd));
  if (!sd) return -ENOMEM;
  app->scrapyd = sd;
  sd->app = app;
  int rc = api_common_init(app);
  if (rc) return rc;
  size_t nb = 0;
  for (size_t i = 0; i < sizeof(endpoints) / sizeof(endpoints[0]); i++) {
    if (!config_service_enabled(&app->cfg, endpoints[i].name)) continue;
    struct binding *b = &sd->bindings[nb++];
    b->sd = sd;
    b->ep = &endpoints[i];
    char path[64];
    snprintf(path, sizeof(path), "/%s", endpoints[i].name);
    rc = http_route(app->http, path, on_request, b);
    if (rc) return rc;
  }
  return 0;
}

void api_scrapyd_free(app_t *app) {
  free(app->scrapyd);
  app->scrapyd = NULL;
}
