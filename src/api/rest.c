/* The native REST API under /api/v1/: routes come from the operation table
 * (api/ops.c); this file turns a request into an operation's parameters
 * (path segments, query string, form fields, a JSON object body or a raw
 * egg) and its answer into a status and JSON, with one error shape:
 *   {"error": {"code": "SPD_ENOPROJECT", "message": "...", "details": {...}}}
 * Besides the operations: GET /api/v1/ (an index of the routes and
 * methods), GET /api/v1/openapi.json and POST /api/v1/jsonrpc. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/projects.h"
#include "api/jsonrpc.h"
#include "api/ops.h"
#include "api/render.h"
#include "api/route.h"
#include "api/sse.h"
#include "app.h"
#include "error.h"
#include "flow/jobtoken.h"

#define PREFIX "/api/v1"

/* src/api/openapi.json, embedded at build time (cmake/embed.cmake). */
extern const unsigned char api_openapi_json[];
extern const size_t api_openapi_json_len;

enum { SPECIAL_INDEX = 1, SPECIAL_OPENAPI, SPECIAL_JSONRPC, SPECIAL_EVENTS };

static const struct special {
  const char *method, *path;
  int kind;
} specials[] = {
    {"GET", "/", SPECIAL_INDEX},
    {"GET", "/openapi.json", SPECIAL_OPENAPI},
    {"POST", "/jsonrpc", SPECIAL_JSONRPC},
    {"GET", "/events/stream", SPECIAL_EVENTS},
};
#define NSPECIALS (sizeof(specials) / sizeof(specials[0]))

typedef struct rest_call {
  app_t *app;
  http_req_t *req;
  const op_def_t *def;
  char allow[64];
} rest_call_t;

/* ---- replies ---- */

static void add_cors(http_req_t *req, const char *allow) {
  http_reply_header(req, "Access-Control-Allow-Origin", "*");
  http_reply_header(req, "Access-Control-Allow-Methods", allow);
  http_reply_header(req, "Access-Control-Allow-Headers",
                    "X-Requested-With, Content-Type, Authorization");
}

static void send_json(http_req_t *req, int status, const json_t *o) {
  size_t len = 0;
  char *body = render_json(o, &len);
  if (body) http_reply(req, status, "application/json", body, len);
  else http_reply(req, 500, "text/plain", "out of memory\n", 14);
  free(body);
}

static void send_error(http_req_t *req, const char *allow, int code, const json_t *details,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void send_error(http_req_t *req, const char *allow, int code, const json_t *details,
                       const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  int status = spd_http_status(code);
  if (status == 405) http_reply_header(req, "Allow", allow);
  add_cors(req, allow);
  json_t *d = details ? json_incref((json_t *)details) : json_object();
  json_t *o = json_pack("{s:{s:s,s:s,s:o}}", "error", "code", spd_errname(code), "message", msg,
                        "details", d);
  send_json(req, status, o);
  json_decref(o);
}

static void on_op_reply(void *ud, const op_result_t *r) {
  rest_call_t *rc = ud;
  if (r->code) {
    send_error(rc->req, rc->allow, r->code, r->details, "%s", r->message);
  } else {
    add_cors(rc->req, rc->allow);
    int status = r->status ? r->status : rc->def->status;
    if (status == 204) http_reply(rc->req, 204, NULL, "", 0);
    else send_json(rc->req, status, r->value ? r->value : json_null());
  }
  free(rc);
}

/* ---- the index ---- */

static const char *param_in(const op_def_t *def, const op_param_t *p) {
  char brace[64];
  snprintf(brace, sizeof(brace), "{%s}", p->name);
  if (strstr(def->path, brace)) return "path";
  if (p->type == OPT_BLOB) return "body";
  if (def->body == OP_BODY_JSON) return "body";
  return "query";
}

static void send_index(app_t *app, http_req_t *req, const char *allow) {
  json_t *routes = json_array(), *methods = json_array();
  for (size_t i = 0; i < NSPECIALS; i++)
    json_array_append_new(routes, json_pack("{s:s,s:s+,s:n,s:[]}", "method", specials[i].method,
                                            "path", PREFIX, specials[i].path, "op", "params"));
  for (size_t i = 0; i < op_count; i++) {
    const op_def_t *d = &op_table[i];
    json_t *params = json_array();
    for (const op_param_t *p = d->params; p->name; p++)
      json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:s}", "name", p->name, "type",
                                              op_type_name(p->type), "required",
                                              !!(p->flags & OPF_REQUIRED), "in", param_in(d, p)));
    json_array_append_new(routes, json_pack("{s:s,s:s+,s:s,s:o}", "method", d->method, "path",
                                            PREFIX, d->path, "op", d->name, "params", params));
    json_array_append_new(methods, json_string(d->name));
    if (d->alias) json_array_append_new(methods, json_string(d->alias));
  }
  json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:{s:s,s:o}}", "name", "spiderd", "version",
                        SPIDERD_VERSION, "node_name", app->cfg.node_name, "routes", routes,
                        "jsonrpc", "path", PREFIX "/jsonrpc", "methods", methods);
  add_cors(req, allow);
  send_json(req, 200, o);
  json_decref(o);
}

/* ---- parameters ---- */

/* Adds key = value (a string from the path, query or a form) to params,
 * typed as the op declares. Unknown keys are kept as strings so that
 * op_validate names them. 0 or 1 (replied). */
static int add_text_param(rest_call_t *rc, json_t *params, const char *key, const char *value,
                          size_t len) {
  const op_param_t *p = op_param(rc->def, key);
  json_t *old = json_object_get(params, key);
  /* NAME.KEY=VALUE is KEY: VALUE of an object parameter NAME (jobs.list's
   * meta.KEY=VALUE filters). */
  const char *dot = strchr(key, '.');
  char head[32];
  const op_param_t *op = NULL;
  if (dot && dot[1] && (size_t)(dot - key) < sizeof(head)) {
    memcpy(head, key, (size_t)(dot - key));
    head[dot - key] = '\0';
    op = op_param(rc->def, head);
  }
  if (op && op->type == OPT_OBJ && strlen(value) == len) {
    json_t *obj = json_object_get(params, op->name);
    if (!obj) json_object_set_new(params, op->name, obj = json_object());
    if (!json_is_object(obj) || json_object_get(obj, dot + 1)) {
      send_error(rc->req, rc->allow, SPD_EBADPARAM, NULL, "'%s' is given more than once", key);
      return 1;
    }
    json_object_set_new(obj, dot + 1, json_string(value));
    return 0;
  }
  if (strlen(value) != len) {
    send_error(rc->req, rc->allow, SPD_EBADPARAM, NULL, "'%s' must not contain a NUL character",
               key);
    return 1;
  }
  if (old && p && p->type == OPT_STRS) { /* ?state=a&state=b is state=a,b */
    char *joined = NULL;
    if (asprintf(&joined, "%s,%s", json_string_value(old), value) < 0) joined = NULL;
    json_object_set_new(params, key, json_string(joined ? joined : ""));
    free(joined);
    return 0;
  }
  if (old) {
    send_error(rc->req, rc->allow, SPD_EBADPARAM, NULL, "'%s' is given more than once", key);
    return 1;
  }
  char err[256];
  json_t *v = p ? op_coerce(p, value, err, sizeof(err)) : json_string(value);
  if (!v) {
    json_t *d = json_pack("{s:s}", "field", key);
    send_error(rc->req, rc->allow, SPD_EBADPARAM, d, "%s", err);
    json_decref(d);
    return 1;
  }
  json_object_set_new(params, key, v);
  return 0;
}

static int is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
  return 1;
}

/* Builds the op's parameters and starts it; replies on any input error. */
static void run_op(rest_call_t *rc, const route_capture_t *caps, size_t ncaps) {
  http_req_t *req = rc->req;
  json_t *params = json_object();
  const void *blob = NULL;
  size_t blob_len = 0;
  for (size_t i = 0; i < ncaps; i++) {
    char key[64];
    snprintf(key, sizeof(key), "%.*s", (int)caps[i].name_len, caps[i].name);
    json_object_set_new(params, key, json_stringn(caps[i].value, caps[i].value_len));
  }
  size_t np = 0;
  const http_param_t *ps = http_req_params(req, &np);
  for (size_t i = 0; i < np; i++) {
    const op_param_t *p = op_param(rc->def, ps[i].key);
    if (p && p->type == OPT_BLOB && ps[i].from_body) {
      blob = ps[i].value;
      blob_len = ps[i].len;
      continue;
    }
    if (ps[i].from_body && (ps[i].key[0] == '{' || ps[i].key[0] == '[')) {
      send_error(req, rc->allow, SPD_EBADJSON, NULL,
                 "the body looks like JSON but came as a form: send it with Content-Type: "
                 "application/json");
      goto fail;
    }
    if (add_text_param(rc, params, ps[i].key, ps[i].value, ps[i].len)) goto fail;
  }
  size_t len = 0;
  const char *body = http_req_body(req, &len);
  if (body && rc->def->body == OP_BODY_BLOB) {
    blob = body;
    blob_len = len;
  } else if (body && rc->def->body == OP_BODY_JSON && !is_blank(body, len)) {
    char err[512];
    json_t *doc = NULL;
    int code = op_parse_json(body, len, OP_JSON_MAX, OP_JSON_DEPTH, &doc, err, sizeof(err));
    if (code) {
      send_error(req, rc->allow, code, NULL, "%s", err);
      goto fail;
    }
    if (!json_is_object(doc)) {
      json_decref(doc);
      send_error(req, rc->allow, SPD_EBADJSON, NULL, "the JSON body must be an object");
      goto fail;
    }
    const char *k;
    json_t *v;
    json_object_foreach(doc, k, v) {
      if (json_object_get(params, k)) {
        send_error(req, rc->allow, SPD_EBADPARAM, NULL,
                   "'%s' is given twice (in the body and in the path or query)", k);
        json_decref(doc);
        goto fail;
      }
      json_object_set(params, k, v);
    }
    json_decref(doc);
  } else if (body && !is_blank(body, len)) {
    send_error(req, rc->allow, SPD_EBADPARAM, NULL, "%s %s%s takes no request body",
               rc->def->method, PREFIX, rc->def->path);
    goto fail;
  }
  op_start(rc->app, rc->def, params, blob, blob_len, req, on_op_reply, rc);
  return;
fail:
  json_decref(params);
  free(rc);
}

/* ---- routing ---- */

static void append_method(char *allow, size_t cap, const char *m) {
  if (strstr(allow, m)) return;
  size_t n = strlen(allow);
  snprintf(allow + n, cap - n, "%s%s", n ? ", " : "", m);
}

/* Which route answers path for method m, and which methods the path has
 * (for Allow). */
typedef struct rest_match {
  char allow[64];
  const op_def_t *def; /* the op that answers; NULL = none */
  int special;         /* or the special route's kind; 0 = none */
  route_capture_t caps[ROUTE_MAX_CAPTURES];
  size_t ncaps;
  const char *pattern; /* the matched route's template (metrics label); NULL = none */
} rest_match_t;

static void match_route(const char *path, const char *m, rest_match_t *r) {
  route_capture_t tmp[ROUTE_MAX_CAPTURES];
  size_t ntmp;
  snprintf(r->allow, sizeof(r->allow), "OPTIONS");
  for (size_t i = 0; i < NSPECIALS; i++) {
    if (strcmp(specials[i].path, path)) continue;
    r->pattern = specials[i].path;
    if (!strcmp(specials[i].method, "GET")) append_method(r->allow, sizeof(r->allow), "HEAD");
    append_method(r->allow, sizeof(r->allow), specials[i].method);
    if (!strcmp(specials[i].method, m)) r->special = specials[i].kind;
  }
  /* A literal segment beats a capture: /schedules/preview is its own
   * route, not the schedule named "preview" (reached by its id), so only
   * the routes with the fewest captures that match answer or count in
   * Allow. */
  size_t fewest = ROUTE_MAX_CAPTURES + 1;
  for (size_t i = 0; i < op_count; i++)
    if (route_match(op_table[i].path, path, tmp, &ntmp) && ntmp < fewest) fewest = ntmp;
  for (size_t i = 0; i < op_count; i++) {
    if (!route_match(op_table[i].path, path, tmp, &ntmp) || ntmp != fewest) continue;
    if (!r->pattern) r->pattern = op_table[i].path;
    if (!strcmp(op_table[i].method, "GET")) append_method(r->allow, sizeof(r->allow), "HEAD");
    append_method(r->allow, sizeof(r->allow), op_table[i].method);
    if (!r->def && !strcmp(op_table[i].method, m)) {
      r->def = &op_table[i];
      memcpy(r->caps, tmp, sizeof(tmp));
      r->ncaps = ntmp;
    }
  }
}

static void on_rest(http_req_t *req, void *ud) {
  app_t *app = ud;
  const char *full = http_req_path(req);
  char path[1024];
  snprintf(path, sizeof(path), "%s", full + strlen(PREFIX));
  size_t n = strlen(path);
  if (n > 1 && path[n - 1] == '/') path[n - 1] = '\0'; /* "/jobs/" is "/jobs" */
  if (!path[0]) snprintf(path, sizeof(path), "/");
  const char *m = http_req_is_head(req) ? "GET" : http_req_method(req);

  rest_match_t r = {0};
  match_route(path, m, &r);
  const char *allow = r.allow, *pattern = r.pattern;
  const op_def_t *def = r.def;
  int special = r.special;
  if (pattern) {
    char label[256];
    snprintf(label, sizeof(label), "%s%s", PREFIX, pattern);
    http_req_set_route(req, label);
  } else {
    http_req_set_route(req, "other");
  }
  if (!strcmp(allow, "OPTIONS")) {
    send_error(req, "OPTIONS", SPD_ENOROUTE, NULL, "no such route: %s %s", http_req_method(req),
               full);
    return;
  }
  if (!strcmp(http_req_method(req), "OPTIONS")) {
    http_reply_header(req, "Allow", allow);
    add_cors(req, allow);
    http_reply_header(req, "Content-Length", "0");
    http_reply(req, 204, NULL, "", 0);
    return;
  }
  if (!def && !special) {
    json_t *d = json_pack("{s:s}", "allow", allow);
    send_error(req, allow, SPD_EMETHOD, d, "%s is not allowed on %s (allowed: %s)",
               http_req_method(req), full, allow);
    json_decref(d);
    return;
  }
  /* A job's token opens the queue operations, job creation for its own
   * children (jobs.create checks the parent) and its own job's meta
   * (jobs.meta checks the job is the token's) only; the server let it in
   * for their paths and the JSON-RPC endpoint, which checks its calls. */
  if (auth_who(app, req)->kind == AUTH_JOB && special != SPECIAL_JSONRPC &&
      (special || !def || !auth_job_op(def->name))) {
    send_error(req, allow, SPD_EFORBIDDEN, NULL,
               "a job's token gives access to the queue API, to creating its own child "
               "jobs and to its own job's meta only");
    return;
  }
  if (special == SPECIAL_INDEX) {
    send_index(app, req, allow);
    return;
  }
  if (special == SPECIAL_OPENAPI) {
    add_cors(req, allow);
    http_reply(req, 200, "application/json", api_openapi_json, api_openapi_json_len);
    return;
  }
  if (special == SPECIAL_EVENTS) {
    char err[256];
    add_cors(req, allow);
    int rc = app->sse ? sse_hub_open(app->sse, req, err, sizeof(err)) : SPD_ESHUTDOWN;
    if (rc) send_error(req, allow, rc, NULL, "%s", app->sse ? err : "the daemon is stopping");
    return;
  }
  if (special == SPECIAL_JSONRPC) {
    add_cors(req, allow);
    jsonrpc_handle(app, req);
    return;
  }
  rest_call_t *rc = http_req_calloc(req, sizeof(*rc));
  if (!rc) return;
  rc->app = app;
  rc->req = req;
  rc->def = def;
  snprintf(rc->allow, sizeof(rc->allow), "%s", allow);
  run_op(rc, r.caps, r.ncaps);
}

int api_rest_register(app_t *app) {
  int rc = api_common_init(app);
  if (rc) return rc;
  return http_route_prefix(app->http, PREFIX, on_rest, app);
}
