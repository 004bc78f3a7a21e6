/* The native API's operations (api/ops*.c) with the JSON bodies REST and
 * JSON-RPC hand them, on the in-process daemon of daemon.h (real SQLite
 * store; no authentication configured, so the caller is an admin).
 *
 * Input: the first line names the operation ("jobs.create", or a
 * Sneakpeek alias; an unknown name picks an operation by its first byte),
 * the rest is the request body. The body goes through the REST body parser
 * (op_parse_json) and the JSON-RPC envelope check; then its members are
 * coerced as a query string's would be, and the operation runs with the
 * body as its parameters and must answer exactly once. users.create and
 * tokens.create are left out: the first user or token turns
 * authentication on, after which every later input would be refused (the
 * HTTP harness covers them, with the configured user). queues.take does not
 * long-poll here (no client could leave). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/jsonrpc.h"
#include "api/ops.h"
#include "daemon.h"
#include "fuzz.h"

typedef struct answer {
  int replies;
} answer_t;

static void on_reply(void *ud, const op_result_t *r) {
  answer_t *a = ud;
  a->replies++;
  if (getenv("FUZZ_DEBUG")) fprintf(stderr, "-> %d %s\n", r->code, r->message ? r->message : "");
  if (r->value) {
    char *s = json_dumps(r->value, JSON_ENCODE_ANY | JSON_COMPACT);
    free(s);
  }
  if (r->details) {
    char *s = json_dumps(r->details, JSON_ENCODE_ANY);
    free(s);
  }
}

static int answered(void *ud) { return ((answer_t *)ud)->replies > 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 256 * 1024) return 0;
  app_t *app = fuzz_daemon(0);
  char *buf = fuzz_strndup(data, size);
  char *body = strchr(buf, '\n');
  if (body) *body++ = '\0';
  else body = buf + strlen(buf);
  size_t blen = size - (size_t)(body - buf);

  const op_def_t *def = op_find(buf);
  if (!def && op_count) def = &op_table[(unsigned char)buf[0] % op_count];
  char err[512];
  json_t *j = NULL;
  int rc = op_parse_json(body, blen, OP_JSON_MAX, OP_JSON_DEPTH, &j, err, sizeof(err));
  int64_t id;
  uint32_t fp;
  unsigned char *bin = NULL;
  size_t binlen = 0;
  op_cursor_decode(body, &id, &fp);
  if (!op_base64_decode(body, blen, &bin, &binlen)) free(bin);
  if (getenv("FUZZ_DEBUG")) fprintf(stderr, "%s: json %d %s\n", def ? def->name : "?", rc, rc ? err : "");
  if (rc || !def || !strcmp(def->name, "users.create") || !strcmp(def->name, "tokens.create"))
    goto out;

  jsonrpc_call_t call;
  jsonrpc_check(j, &call, err, sizeof(err));
  if (json_is_object(j)) {
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
      const op_param_t *p = op_param(def, k);
      if (p && json_is_string(v)) json_decref(op_coerce(p, json_string_value(v), err, sizeof(err)));
    }
    if (!strcmp(def->name, "queues.take")) json_object_del(j, "wait");
  }
  answer_t a = {0};
  op_start(app, def, j, NULL, 0, NULL, on_reply, &a);
  j = NULL; /* taken */
  if (!fuzz_daemon_run(app, answered, &a, 10000)) {
    fprintf(stderr, "%s: no answer in 10 s\n", def->name);
    abort();
  }
  /* anything it started after its answer */
  for (int i = 0; i < 2; i++) uv_run(app->loop, UV_RUN_NOWAIT);
  if (a.replies != 1) {
    fprintf(stderr, "%s: %d answers\n", def->name, a.replies);
    abort();
  }
out:
  json_decref(j);
  free(buf);
  return 0;
}
