#include "api/jsonrpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/grepsr.h"
#include "api/ops.h"
#include "api/render.h"
#include "api/sneakpeek.h"
#include "error.h"

int jsonrpc_check(const json_t *req, jsonrpc_call_t *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  if (!json_is_object(req)) {
    snprintf(err, errlen, "a request must be a JSON object");
    return SPD_EBADREQUEST;
  }
  json_t *id = json_object_get(req, "id");
  if (id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id)) {
    snprintf(err, errlen, "'id' must be a string, a number or null");
    return SPD_EBADREQUEST;
  }
  out->id = id;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)req, k, v) {
    if (strcmp(k, "jsonrpc") && strcmp(k, "method") && strcmp(k, "params") && strcmp(k, "id")) {
      snprintf(err, errlen, "unknown member '%.64s' (a request has jsonrpc, method, params, id)",
               k);
      return SPD_EBADREQUEST;
    }
  }
  const json_t *ver = json_object_get(req, "jsonrpc");
  if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0")) {
    snprintf(err, errlen, "'jsonrpc' must be \"2.0\"");
    return SPD_EBADREQUEST;
  }
  const json_t *m = json_object_get(req, "method");
  if (!json_is_string(m)) {
    snprintf(err, errlen, "'method' must be a string");
    return SPD_EBADREQUEST;
  }
  json_t *params = json_object_get(req, "params");
  if (params && !json_is_object(params) && !json_is_array(params)) {
    snprintf(err, errlen, "'params' must be an object or an array");
    return SPD_EBADREQUEST;
  }
  out->method = json_string_value(m);
  out->params = params;
  return 0;
}

/* ---- a request: one call or a batch ---- */

typedef struct rpc_req {
  app_t *app;
  http_req_t *req;
  json_t *body;      /* the parsed request, kept for the borrowed ids */
  json_t *responses; /* one slot per call, null for a notification */
  size_t pending;    /* calls still running, +1 while starting them */
  int batch;
} rpc_req_t;

typedef struct rpc_slot {
  rpc_req_t *r;
  size_t index;
  json_t *id; /* NULL: a notification */
  const op_def_t *sneakpeek; /* a Sneakpeek method: its errors in its codes */
} rpc_slot_t;

static json_t *error_object(int code, const char *message, const json_t *details) {
  json_t *d = details ? json_incref((json_t *)details) : json_object();
  json_t *data = json_pack("{s:s,s:o}", "code", spd_errname(code), "details", d);
  return json_pack("{s:i,s:s,s:o}", "code", spd_rpc_code(code), "message", message, "data", data);
}

static json_t *response(json_t *id, json_t *result, json_t *error) { /* takes result/error */
  json_t *o = json_pack("{s:s}", "jsonrpc", "2.0");
  if (error) json_object_set_new(o, "error", error);
  else json_object_set_new(o, "result", result ? result : json_null());
  json_object_set(o, "id", id ? id : json_null());
  return o;
}

static void send_json(http_req_t *req, json_t *o) {
  size_t len = 0;
  char *body = render_json(o, &len);
  if (body) http_reply(req, 200, "application/json", body, len);
  else http_reply(req, 500, "text/plain", "out of memory\n", 14);
  free(body);
}

static void finish(rpc_req_t *r) {
  if (--r->pending) return;
  json_t *out = json_array();
  size_t i;
  json_t *v;
  json_array_foreach(r->responses, i, v) if (!json_is_null(v)) json_array_append(out, v);
  if (json_array_size(out) == 0) {
    http_reply(r->req, 204, NULL, "", 0);
  } else if (r->batch) {
    send_json(r->req, out);
  } else {
    send_json(r->req, json_array_get(out, 0));
  }
  json_decref(out);
  json_decref(r->responses);
  json_decref(r->body);
  free(r);
}

static void slot_set(rpc_slot_t *s, json_t *resp) {
  if (s->id) json_array_set_new(s->r->responses, s->index, resp);
  else json_decref(resp);
}

static void on_op_reply(void *ud, const op_result_t *res) {
  rpc_slot_t *s = ud;
  if (res->code == 0)
    slot_set(s, response(s->id, res->value ? json_incref((json_t *)res->value) : NULL, NULL));
  else if (s->sneakpeek) slot_set(s, response(s->id, NULL, sneakpeek_error(s->sneakpeek, res)));
  else slot_set(s, response(s->id, NULL, error_object(res->code, res->message, res->details)));
  rpc_req_t *r = s->r;
  free(s);
  finish(r);
}

static void start_call(rpc_req_t *r, size_t index, const json_t *req) {
  char err[256];
  jsonrpc_call_t call;
  int rc = jsonrpc_check(req, &call, err, sizeof(err));
  rpc_slot_t *s = calloc(1, sizeof(*s));
  if (!s) return; /* its slot stays empty */
  s->r = r;
  s->index = index;
  /* An invalid request is answered even without an id (with id null). */
  s->id = rc ? (call.id ? call.id : json_null()) : call.id;
  r->pending++;
  if (rc) {
    slot_set(s, response(call.id, NULL, error_object(rc, err, NULL)));
    free(s);
    finish(r);
    return;
  }
  /* Sneakpeek's names first: its methods answer in its shapes. Grepsr's
   * calls are native ops under other names, with their params renamed. */
  const op_def_t *def = s->sneakpeek = sneakpeek_find(call.method);
  json_t *params = NULL;
  if (!def && grepsr_is(call.method)) {
    json_t *d = NULL;
    if (json_is_array(call.params)) {
      rc = SPD_EBADPARAM;
      snprintf(err, sizeof(err), "params must be an object of named parameters, not an array");
    } else {
      params = call.params ? json_deep_copy(call.params) : json_object();
      rc = grepsr_map(call.method, params, &def, err, sizeof(err), &d);
    }
    if (rc) {
      slot_set(s, response(call.id, NULL, error_object(rc, err, d)));
      json_decref(d);
      json_decref(params);
      free(s);
      finish(r);
      return;
    }
  }
  if (!def) def = op_find(call.method);
  if (!def) {
    json_t *d = json_pack("{s:s}", "method", call.method);
    snprintf(err, sizeof(err), "method '%.64s' not found", call.method);
    slot_set(s, response(call.id, NULL, error_object(SPD_ENOROUTE, err, d)));
    json_decref(d);
    free(s);
    finish(r);
    return;
  }
  /* A job's token: what it may call over REST too (auth_job_op), and its
   * scraper's state. */
  if (auth_who(r->app, r->req)->kind == AUTH_JOB && !auth_job_op(def->name) &&
      !sneakpeek_for_jobs(def)) {
    json_t *d = json_pack("{s:s}", "method", call.method);
    snprintf(err, sizeof(err),
             "a job's token gives access to the queues.* methods, set_scraper_state, "
             "jobs.create of its own children and jobs.meta of its own job only, not '%.64s'",
             call.method);
    slot_set(s, response(call.id, NULL, error_object(SPD_EFORBIDDEN, err, d)));
    json_decref(d);
    json_decref(params);
    free(s);
    finish(r);
    return;
  }
  if (call.params && json_is_array(call.params)) {
    slot_set(s, response(call.id, NULL,
                         error_object(SPD_EBADPARAM,
                                      "params must be an object of named parameters, not an "
                                      "array",
                                      NULL)));
    free(s);
    finish(r);
    return;
  }
  if (!params) params = call.params ? json_deep_copy(call.params) : json_object();
  op_start(r->app, def, params, NULL, 0, r->req, on_op_reply, s);
}

void jsonrpc_handle(app_t *app, http_req_t *req) {
  size_t len = 0;
  const char *body = http_req_body(req, &len);
  char err[256];
  json_t *doc = NULL;
  int rc = body ? op_parse_json(body, len, OP_JSON_MAX, OP_JSON_DEPTH, &doc, err, sizeof(err))
                : SPD_EBADJSON;
  size_t np = 0;
  const http_param_t *ps = http_req_params(req, &np);
  if (!body && np && ps[np - 1].from_body)
    snprintf(err, sizeof(err),
             "the body came as a form: send the JSON-RPC request with Content-Type: "
             "application/json");
  else if (!body) snprintf(err, sizeof(err), "the body is empty: send a JSON-RPC request");
  if (rc == 0 && json_is_array(doc) && json_array_size(doc) == 0) {
    rc = SPD_EBADREQUEST;
    snprintf(err, sizeof(err), "an empty batch is not a request");
  } else if (rc == 0 && json_is_array(doc) && json_array_size(doc) > JSONRPC_BATCH_MAX) {
    rc = SPD_EBADREQUEST;
    snprintf(err, sizeof(err), "a batch holds at most %d calls", JSONRPC_BATCH_MAX);
  }
  if (rc) {
    /* A body too large for JSON is still a JSON-RPC parse failure. */
    json_t *resp = response(NULL, NULL, error_object(rc == SPD_ETOOBIG ? SPD_EBADJSON : rc, err, NULL));
    send_json(req, resp);
    json_decref(resp);
    json_decref(doc);
    return;
  }
  rpc_req_t *r = calloc(1, sizeof(*r));
  if (!r) {
    json_decref(doc);
    http_reply(req, 500, "text/plain", "out of memory\n", 14);
    return;
  }
  r->app = app;
  r->req = req;
  r->body = doc;
  r->batch = json_is_array(doc);
  r->pending = 1;
  size_t n = r->batch ? json_array_size(doc) : 1;
  r->responses = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(r->responses, json_null());
  for (size_t i = 0; i < n; i++) start_call(r, i, r->batch ? json_array_get(doc, i) : doc);
  finish(r);
}
