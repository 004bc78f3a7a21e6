/* The native API's operations: one layer under both faces, REST
 * (api/rest.c) and JSON-RPC (api/jsonrpc.c), so a route and a method that
 * mean the same thing cannot drift apart.
 *
 * An operation takes a JSON object of named parameters, validated here
 * against its table row (types, required fields, unknown fields, names
 * that become paths), and answers once, asynchronously or not, with a
 * result value or an error code from src/error.h plus a message a person
 * understands and optional details.
 *
 * Adding an operation: write its handler (void fn(op_call_t *), see
 * ops_impl.h), declare it in ops_impl.h, and add one row to op_table in
 * ops.c (name, Sneakpeek alias, parameters, REST method and path, success
 * status, role), then describe the route in src/api/openapi.json.
 *
 * Who may call: op_start refuses a caller (api/auth.h) below the op's role,
 * or limited to other projects than a "project" parameter names (or, for
 * queues.*, the "name" parameter); handlers check what only the store
 * knows (a job's or a schedule's project) and filter their listings.
 *
 * Loop thread only. Ownership: op_start takes params; blob is borrowed
 * until the reply; the op_result_t passed to a reply function and what it
 * points to are borrowed for the call only.
 */
#ifndef SPIDERD_API_OPS_H
#define SPIDERD_API_OPS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "core/principal.h"

typedef enum op_type {
  OPT_STR = 1,
  OPT_INT,
  OPT_NUM,
  OPT_BOOL,
  OPT_OBJ,  /* object of string values (spider args, settings) */
  OPT_STRS, /* array of strings, or one string of comma-separated values */
  OPT_ID,   /* a job: the store's integer id, or a Scrapyd job id string */
  OPT_BLOB, /* bytes: the raw body or a multipart file (REST), base64 (JSON) */
  OPT_ANY,  /* any JSON value, checked by the handler (a string from a query) */
} op_type_t;

enum {
  OPF_REQUIRED = 1u << 0,
  OPF_NAME = 1u << 1, /* becomes a path: checked with name_valid() */
};

typedef struct op_param {
  const char *name;
  op_type_t type;
  unsigned flags;
  long long min, max; /* OPT_INT bounds, used when max > min */
} op_param_t;

/* Where REST takes a POST's parameters besides the path and query. */
enum { OP_BODY_NONE = 0, OP_BODY_JSON, OP_BODY_BLOB };

enum { OP_WRITE = 1u << 0 /* refused with SPD_ESHUTDOWN while stopping */ };

typedef struct op_call op_call_t;

typedef struct op_def {
  const char *name;  /* dotted: "jobs.list"; also its JSON-RPC method */
  const char *alias; /* Sneakpeek's method name, or NULL */
  void (*fn)(op_call_t *c);
  const op_param_t *params; /* ends with a row whose name is NULL */
  unsigned flags;
  const char *method; /* REST: "GET", "POST", "DELETE" */
  const char *path;   /* REST, under /api/v1: "/jobs/{id}" */
  int status;         /* REST status on success: 200, 201, 204 (no body) */
  int body;           /* OP_BODY_* */
  role_t role;        /* the least role that may call it (api/auth.h) */
} op_def_t;

extern const op_def_t op_table[];
extern const size_t op_count;

/* By dotted name or alias; NULL when unknown. */
const op_def_t *op_find(const char *name);
const op_param_t *op_param(const op_def_t *def, const char *name);
const char *op_type_name(op_type_t t); /* "string", "integer", ... */

typedef struct op_result {
  int code;            /* 0, or an error code of src/error.h */
  const json_t *value; /* the result when code is 0 (NULL for none) */
  const char *message; /* when code is not 0 */
  const json_t *details; /* an object when code is not 0 */
  int status;            /* REST: the success status when not the op's own (0) */
} op_result_t;

typedef void (*op_reply_fn)(void *ud, const op_result_t *r);

/* Validates params (taken) against def and runs the op; reply runs exactly
 * once, possibly before op_start returns. blob is the OPT_BLOB parameter's
 * bytes when the face has them raw (REST); else a base64 string in params
 * is decoded. req is the HTTP request the op answers (borrowed until the
 * reply; NULL when none): an op that waits long watches it for a client
 * that leaves. */
void op_start(app_t *app, const op_def_t *def, json_t *params, const void *blob,
              size_t blob_len, http_req_t *req, op_reply_fn reply, void *ud);

/* Checks params against def in place: unknown fields, types, required
 * fields, bounds and names; normalises OPT_STRS to an array and OPT_ID to
 * a string. 0, or SPD_EBADPARAM / SPD_EMISSING with a message in err and
 * *details = {"field": name} (caller decrefs). */
int op_validate(const op_def_t *def, json_t *params, int have_blob, char *err,
                size_t errlen, json_t **details);

/* A query-string or form value as a JSON value of p's type; NULL with a
 * message in err when it does not parse. */
json_t *op_coerce(const op_param_t *p, const char *s, char *err, size_t errlen);

/* Parses a JSON request body: at most max bytes, nested at most depth
 * levels. 0 and *out, SPD_ETOOBIG, or SPD_EBADJSON with a message. */
int op_parse_json(const char *body, size_t len, size_t max, int depth, json_t **out,
                  char *err, size_t errlen);
#define OP_JSON_MAX (1024 * 1024)
#define OP_JSON_DEPTH 32

/* Opaque page cursors: the last job id seen plus a fingerprint of the
 * query, so a cursor used with other filters is refused. */
void op_cursor_encode(int64_t last_id, uint32_t fingerprint, char out[24]);
int op_cursor_decode(const char *s, int64_t *last_id, uint32_t *fingerprint);

/* Base64 (standard alphabet, padding optional) into a malloc'd buffer. */
int op_base64_decode(const char *s, size_t n, unsigned char **out, size_t *outlen);

/* Up to n bytes of a file as text: invalid UTF-8 becomes U+FFFD; an
 * incomplete sequence at the end is left for the next read unless final.
 * *used = bytes consumed. Returns a malloc'd string (length *textlen). */
char *op_utf8_text(const char *buf, size_t n, int final, size_t *used, size_t *textlen);

#endif
